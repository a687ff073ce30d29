"""compare, check, report, monitor, batch and --device on a shared bus (docs/shared-bus.md).

Oracles: the synthesizer's truth (analyzer/spigap/synth/bus.py: per device its transfers,
the meaning of each window, the other devices' CS time in each gap) and, for compare,
a before/after pair whose only change is on the other device: CE1's CAN controller
reads more frames per interrupt, so its messages hold the bus longer, and CE0's
context switches grow by the time CE1 held the bus, not by CE0's own.
"""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest
from conftest import CAPTURES, FAST_CONTROLLER

from spigap.cli import main
from spigap.synth import Bus, write

RECIPE = CAPTURES / "shared-rpi-mcp3008-mcp2518fd.toml"


def _write(path, text, truth=None):
    write(Bus.from_toml(text=text), path, truth_path=truth)
    return json.loads(truth.read_text()) if truth else None


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("pair")
    text = RECIPE.read_text()
    before = text.replace("seed = 22", "seed = 24")
    after = text.replace("seed = 22", "seed = 23").replace('cs_change = "10us"', 'cs_change = "10us"\nbatch = [3, 3, 5]')
    tb = _write(d / "before.sr", before, d / "before.json")
    ta = _write(d / "after.sr", after, d / "after.json")
    return d / "before.sr", d / "after.sr", tb, ta


def test_compare_says_who_held_the_bus(pair, capsys):
    b, a, tb, ta = pair
    assert main(["compare", "--before", str(b), "--after", str(a), "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert set(d["devices"]) == {"CE0", "CE1"}
    split = {(s["device"], s["kind"]): s for s in d["who_held_the_bus"]}
    s = split[("CE0", "context_switch")]
    # the truth: CE1's CS time inside CE0's context switches, mean before and after
    def mean_other(t):
        v = [x for x, k in zip(t["devices"]["CE0"]["other_busy_s"], t["devices"]["CE0"]["gap_before_kind"])
             if x is not None and k == "context_switch"]
        return float(np.mean(v))
    want = mean_other(ta) - mean_other(tb)
    have = s["others"]["delta"]["mean"]["delta_s"]
    assert abs(have - want) <= 2 * 20e-9, (have, want)         # each gap ±1 sample at both ends
    assert s["others"]["verdict"] == "regression" and s["gap"]["verdict"] == "regression"
    assert s["own"]["verdict"] == "no significant change"
    assert "while other devices held the bus" in s["sentence"]
    assert main(["compare", "--before", str(b), "--after", str(a)]) == 0
    out = capsys.readouterr().out
    assert "who held the bus" in out and "=== CE0" in out and "=== CE1" in out


LONG = """
[capture]
samplerate = "4MHz"
seed = SEED
duration = "2.9s"
lead = "20us"
tail = "20us"
[spi]
sclk = "1MHz"
""" + FAST_CONTROLLER + """[[device]]
cs = "CE0"
words = 1
think = "3us"
cs_setup = "1us"
cs_hold = "1us"
[[device]]
cs = "CE1"
words = 1
think = "4us"
cs_setup = "1us"
cs_hold = "HOLD"
"""


# (capture duration, transfers kept whole: the bound past which compare samples, transfers per
# sample block): the full size (the real bound, 100 000 transfers; about 2 min of CPU: `slow`, run
# by make test-all and CI) and the same case scaled by 1/10 with the bound lowered to match
# (collect's constants, as tests/test_compare_sampled.py does), which make test runs
SAMPLED_SIZES = [pytest.param(("2.9s", None, None), id="full", marks=pytest.mark.slow),
                 pytest.param(("0.29s", 10_000, 100), id="scaled")]


@pytest.mark.parametrize("size", SAMPLED_SIZES)
def test_compare_splits_who_held_the_bus_past_100000_transfers(size, tmp_path, capsys, monkeypatch):
    """Past 100 000 transfers per device (the scaled case: past its lowered bound, 10 000) compare
    works on a systematic sample; the split by who held the bus is on that same sample: each side's
    mean of the other device's CS time in CE0's gaps equals the one computed from the synthesizer's
    windows for exactly the sampled gaps (±1 sample at each end of each of the other device's
    windows). After: CE1 holds CS 2 µs longer, so CE0's gaps grow while the other device held the bus."""
    from spigap.core import collect
    from spigap.synth.srwriter import write_sr

    duration, bound, block = size
    if bound is not None:
        monkeypatch.setattr(collect, "RETAIN_TRANSFERS", bound)
        monkeypatch.setattr(collect, "LEARN_TRANSFERS", bound)
        monkeypatch.setattr(collect, "SAMPLE_BLOCK", block)
    sr = 4e6
    truth = {}
    for side, seed, hold in (("before", 41, "1us"), ("after", 42, "3us")):
        sh = Bus.from_toml(text=LONG.replace("SEED", str(seed)).replace("HOLD", hold).replace("2.9s", duration))
        b = sh.capture()
        write_sr(tmp_path / f"{side}.sr", b.tracks(), sh.samplerate, b.n_samples)
        dev = np.asarray(b.plan.device)
        q = lambda t: np.rint(np.asarray(t) * sr).astype(np.int64)  # noqa: E731
        a0, e0 = q(b.cs_assert[dev == 0]), q(b.cs_deassert[dev == 0])
        a1, e1 = q(b.cs_assert[dev == 1]), q(b.cs_deassert[dev == 1])
        assert len(a0) > collect.RETAIN_TRANSFERS and len(a1) > collect.RETAIN_TRANSFERS
        # the other device's CS time inside each of CE0's gaps (e0[i-1] .. a0[i]); its windows
        # never straddle a gap's end here (no overlap faults)
        cum = np.concatenate([[0], np.cumsum(e1 - a1)])
        i0 = np.searchsorted(a1, e0[:-1])
        i1 = np.searchsorted(a1, a0[1:])
        truth[side] = np.concatenate([[-1], cum[i1] - cum[i0]])
    assert main(["compare", "--before", str(tmp_path / "before.sr"), "--after", str(tmp_path / "after.sr"),
                 "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    split = {(x["device"], x["kind"]): x for x in d["who_held_the_bus"]}
    s = split[("CE0", "context_switch")]
    assert any("same systematic sample" in n for n in d["notes"])
    for side in ("before", "after"):
        smp = d["devices"]["CE0"][side][0]["sample"]
        blk, stride = smp["block"], smp["stride"]
        assert stride >= 2
        g = np.arange(len(truth[side]))
        held = ((g // blk) % stride == 0) & (g % blk != 0) & (g > 0)
        want = truth[side][held].mean() / sr
        got = s["others"][side]["mean_s"]
        assert abs(got - want) <= 2 / sr, (side, got, want)
    assert s["others"]["verdict"] == "regression"
    assert s["others"]["delta"]["mean"]["delta_s"] == pytest.approx(2e-6, abs=0.3e-6)


def test_check_takes_a_profile_per_device(pair, capsys):
    b, _, _, _ = pair
    code = main(["check", str(b), "--profile", "CE0=rpi3-k4.4-vanilla", "--device", "CE1=mcp2518fd",
                 "--format", "json"])
    assert code == 1          # the synthesized CE0 is no Pi 3 on 4.4: its context switches FAIL
    d = json.loads(capsys.readouterr().out)
    caps = [r["capture"] for r in d["results"]]
    assert caps == [f"{b} [CE0]", f"{b} [CE1]"]
    assert main(["check", str(b), "--profile", "rpi3-k4.4-vanilla"]) == 2
    err = capsys.readouterr().err
    assert "2 devices on one bus" in err and "--profile CE0=" in err and err.count("\n") == 1
    assert main(["check", str(b), "--profile", "CE7=rpi3-k4.4-vanilla"]) == 2
    assert "CE7 is not a device" in capsys.readouterr().err


PROFILE_12BIT = """schema = 1
[profile]
name = "ce1-mode1-12bit"
title = "a device in SPI mode 1 with 12-bit words"
sources = ["tests/conftest.py MIXED_BUS: CE1"]
[bus]
sclk = "1MHz"
mode = 1
bits_per_word = 12
[timing]
cs_setup = "1us"
cs_hold = "0.5us"
cs_change = "10us"
context_switch = "30us"
[expect.cs_setup]
p99_max = "3us"
source = "the recipe: cs_setup 1 us"
"""


def test_check_frames_each_device_with_its_profile(mixed_bus, tmp_path, capsys):
    """CE1 of the mixed bus sends two 12-bit words per window in mode 1: the signals alone read
    three bytes (24 bits, no gap between the words); its profile's mode and word size frame it
    (the SPI core sets them per device), an explicit --wordsize wins over the profile, and the
    words are the truth's (which sigrok's spi decoder reads too: test_shared_synth.py)."""
    from spigap.core import run
    from spigap.core.config import INFERABLE, SpiConfig
    from spigap.io import open_capture

    cap, tr = mixed_bus
    prof = tmp_path / "ce1.toml"
    prof.write_text(PROFILE_12BIT)

    def ce1(*extra):
        assert main(["check", str(cap), "--profile", f"CE1={prof}", *extra, "--format", "json"]) == 0
        (res,) = json.loads(capsys.readouterr().out)["results"]
        assert res["capture"] == f"{cap} [CE1]"
        return res["summary"]

    s = ce1()
    assert s["words_per_transfer"] == 2 and s["transfers"] == tr["devices"]["CE1"]["transfers"]
    assert (s["spi"]["mode"], s["spi"]["wordsize"], s["spi"]["cs_polarity"]) == (1, 12, "high")
    assert s["spi"]["sources"]["mode"] == {"from": "given", "confidence": 1.0, "confidence_words": "given",
                                           "note": "profile ce1-mode1-12bit"}
    assert s["spi"]["sources"]["wordsize"]["note"] == "profile ce1-mode1-12bit"
    assert s["spi"]["sources"]["cs_polarity"]["from"] == "inferred"
    # an option on the command line wins over the profile
    s = ce1("--wordsize", "8")
    assert s["spi"]["wordsize"] == 8 and s["spi"]["sources"]["wordsize"]["note"] == ""
    assert s["words_per_transfer"] == 3 and s["spi"]["mode"] == 1
    # without the profile the signals say 8-bit words
    assert main(["check", str(cap), "--device", "CE1=mcp2518fd", "--format", "json"]) in (0, 1)
    (res,) = json.loads(capsys.readouterr().out)["results"]
    assert res["summary"]["spi"]["wordsize"] == 8 and res["summary"]["spi"]["sources"]["wordsize"]["from"] == "inferred"
    # the words framed with the profile's settings are the truth's, and the other devices keep theirs
    own = SpiConfig(cpha=1, wordsize=12, infer=INFERABLE - {"mode", "wordsize"})
    with open_capture(cap) as r:
        sa = run.analyze(r, SpiConfig(infer=INFERABLE, device_cfgs={"CE1": (own, "profile x")}))
    for name in ("CE0", "CE1"):
        want = [w for win in tr["devices"][name]["mosi"] for w in win]
        assert sa.devices[name].mosi.tolist() == want, name
    assert sa.devices["CE0"].cfg.wordsize == 8 and sa.devices["CE0"].cfg.mode == 0


def test_device_labels_per_device(pair, capsys):
    b, _, tb, _ = pair
    assert main(["analyze", str(b), "--device", "CE0=mcp3008", "--device", "CE1=mcp2518fd", "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    ce0 = [r for r in rows if r["cs"] == "CE0"]
    truth = tb["devices"]["CE0"]["meaning"]
    assert len(ce0) == len(truth)
    for r, t in zip(ce0, truth):
        assert r["device"].startswith(f"CH{t['channel']} = {t['code']} ")
    ce1 = [r for r in rows if r["cs"] == "CE1"]
    assert all("crc ok" in r["device"] for r in ce1)
    assert main(["analyze", str(b), "--device", "mcp3008"]) == 2
    assert "say which: --device CE0=mcp3008" in capsys.readouterr().err
    assert main(["analyze", str(b), "--event", "CE1:rise"]) == 2
    assert "say which, --event CE0=CE1:rise" in capsys.readouterr().err


def test_monitor_prints_each_device(pair, capsys):
    b, _, tb, _ = pair
    assert main(["monitor", str(b), "--interval", "5ms", "--format", "jsonl"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    ivs, summary = lines[:-1], lines[-1]["summary"]
    assert all(set(iv["devices"]) == {"CE0", "CE1"} for iv in ivs)
    for name in ("CE0", "CE1"):
        assert sum(iv["devices"][name]["transfers"] for iv in ivs) == tb["devices"][name]["transfers"]
        assert summary["devices"][name]["transfers"] == tb["devices"][name]["transfers"]
    # each device's rate is analyze's (analysis.start_rate_hz), not its transfers / the capture
    from spigap.api import analyze_file

    r = analyze_file(str(b))
    assert {n: d["rate_hz"] for n, d in summary["devices"].items()} == \
        {n: a.transfer_rate_hz() for n, a in r.devices.items()}
    assert main(["monitor", str(b), "--interval", "5ms"]) == 0
    out = capsys.readouterr().out
    assert "CE0 n" in out and "CE1 n" in out


def test_batch_has_a_row_per_device(pair, capsys):
    b, a, tb, ta = pair
    assert main(["batch", str(b), str(a), "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [(r["path"].endswith("before.sr"), r["cs"]) for r in rows] == [
        (True, "CE0"), (True, "CE1"), (False, "CE0"), (False, "CE1")]
    assert int(rows[1]["transfers"]) == tb["devices"]["CE1"]["transfers"]
    assert main(["batch", str(b), str(a)]) == 0
    assert "2 captures: 2 ok" in capsys.readouterr().out


# the report of one shared-bus capture (18 figures, ~20 s of CPU) and the before/after one (53
# figures, ~30 s): two tests, so that neither runs over 30 s and xdist runs them side by side
def test_report_has_the_bus_and_each_device(pair, tmp_path):
    b, a, _, _ = pair
    out = tmp_path / "r.html"
    assert main(["report", str(b), "-o", str(out), "--png", str(tmp_path / "png")]) == 0
    html = out.read_text()
    assert "The bus" in html and "bus timeline" in html and f"{b} [CE0]" in html and f"{b} [CE1]" in html
    assert (tmp_path / "png" / "01-before-bus-timeline.png").stat().st_size > 10_000


def test_compare_report_says_who_held_the_bus(pair, tmp_path):
    b, a, _, _ = pair
    # the section is what this test asks for; 200 resamples draw it as 1000 would
    # (test_compare_says_who_held_the_bus checks the figures)
    assert main(["report", "--before", str(b), "--after", str(a), "-o", str(tmp_path / "c.html"),
                 "--bootstrap", "200"]) == 0
    assert "who held the bus" in (tmp_path / "c.html").read_text()
