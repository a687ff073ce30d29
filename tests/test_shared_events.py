"""--event on a shared bus: each event names the device whose next transfer ends its chain
(``--event CE0=DRDY:rise``; core/events.for_devices, docs/shared-bus.md).

Oracle: a DRDY pin added to a synthesized two-device bus, rising a fixed number of
samples before each of CE0's CS asserts (the synthesizer's own windows, build_bus's
cs_assert); the latency to each device's next CS assert is computed here from those
windows, not by spigap.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from spigap.cli import main
from spigap.synth import Bus
from spigap.synth.srwriter import Track, write_sr

BUS = """
[capture]
samplerate = "4MHz"
seed = 9
duration = "3ms"
[spi]
sclk = "1MHz"
[[device]]
cs = "CE0"
words = 2
think = "20us"
[[device]]
cs = "CE1"
words = 1
think = "7us"
"""
LEAD = 12                     # samples from each DRDY rise to CE0's CS assert


@pytest.fixture(scope="module")
def bus(tmp_path_factory):
    d = tmp_path_factory.mktemp("events")
    sh = Bus.from_toml(text=BUS)
    b = sh.capture()
    sr = sh.samplerate
    dev = np.asarray(b.plan.device)
    a0 = np.rint(np.asarray(b.cs_assert)[dev == 0] * sr).astype(np.int64)
    a1 = np.rint(np.asarray(b.cs_assert)[dev == 1] * sr).astype(np.int64)
    rise = a0 - LEAD
    drdy = Track("DRDY", np.concatenate([rise, rise + 4]), np.concatenate([np.ones(len(rise)), np.zeros(len(rise))]))
    write_sr(d / "bus.sr", [*b.tracks(), drdy], sr, b.n_samples)
    return d / "bus.sr", rise, a0, a1, 1 / sr


def _analyze(capsys, *args) -> dict:
    assert main(["analyze", *args, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_each_device_gets_its_own_chain(bus, capsys):
    cap, rise, a0, a1, tick = bus
    d = _analyze(capsys, str(cap), "--cs", "CE0,CE1", "--event", "CE0=DRDY:rise", "--event", "CE1=DRDY:rise")
    for name, asserts in (("CE0", a0), ("CE1", a1)):
        ev = d["devices"][name]["events"]
        assert ev["chain"] == ["DRDY:rise", "CS:assert"]
        lat = ev["latency"][0]
        # the truth: the first of this device's asserts at or after each rise, before the next rise
        j = np.searchsorted(asserts, rise)
        nxt = np.concatenate([rise[1:], [np.iinfo(np.int64).max]])
        ok = (j < len(asserts)) & (asserts[np.minimum(j, len(asserts) - 1)] < nxt)
        want = (asserts[j[ok]] - rise[ok]) * tick
        assert lat["n"] == int(ok.sum()) and lat["missing"] == int((~ok).sum())
        assert lat["p50_s"] == pytest.approx(float(np.percentile(want, 50, method="lower")), abs=1.01 * tick)
        assert lat["max_s"] == pytest.approx(float(want.max()), abs=1.01 * tick)
    # CE0's chain: LEAD samples each time (±1 sample)
    lat0 = d["devices"]["CE0"]["events"]["latency"][0]
    assert abs(lat0["p50_s"] - LEAD * tick) <= tick and abs(lat0["max_s"] - LEAD * tick) <= tick
    assert "events" in d["devices"]["CE1"]


def test_text_shows_the_chain_in_the_devices_section(bus, capsys):
    cap = bus[0]
    assert main(["analyze", str(cap), "--cs", "CE0,CE1", "--event", "CE0=DRDY:rise"]) == 0
    out = capsys.readouterr().out
    ce0, ce1 = out.split("=== CE0 ")[1].split("=== CE1 ")
    assert "events      chain DRDY:rise → CS:assert" in ce0 and "events" not in ce1


def test_a_bare_event_on_a_shared_bus_says_which_form(bus, capsys):
    cap = bus[0]
    assert main(["analyze", str(cap), "--cs", "CE0,CE1", "--event", "DRDY:rise"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--event CE0=DRDY:rise" in err[0]
    assert main(["analyze", str(cap), "--cs", "CE0,CE1", "--event", "CE7=DRDY:rise"]) == 2
    assert "CE7 is not a device" in capsys.readouterr().err


def test_one_device_takes_its_own_name(bus, capsys):
    cap, rise, a0, _, tick = bus
    d = _analyze(capsys, str(cap), "--cs", "CE0", "--event", "CE0=DRDY:rise")
    assert abs(d["events"]["latency"][0]["p50_s"] - LEAD * tick) <= tick
    assert main(["analyze", str(cap), "--cs", "CE0", "--event", "CE1=DRDY:rise"]) == 2
    assert "CE1 is not a device of this capture (CE0)" in capsys.readouterr().err
