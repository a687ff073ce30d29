"""One synthesized capture written in every format gives the same analysis.

The reference is the .sr of the same tracks. Every other format must find the
same transfers (count exact, same words), the same message grouping, and every
gap within one tick of the coarser of the two resolutions (VCD: the
timescale; R&S min/max: one acquisition interval = 2 samples).
"""

from __future__ import annotations

import numpy as np
import pytest

from spigap.api import SpiConfig, analyze_device
from spigap.synth import Scenario, tracks
from spigap.synth.writers import FORMATS, write_capture
from spigap.synth.writers.scope_csv import native_names

SCENARIOS = {
    # mode 0, 50 MHz: every format's time unit divides the sample period
    "mode0": {"messages": 30, "transfers_per_message": 3, "samplerate": 50e6, "sclk": 3.6e6,
              "words_per_transfer": 3, "cs_change": 12e-6, "context_switch": 40e-6},
    # mode 3, 24 MHz (41.67 ns: no exact VCD timescale, printed times are rounded), jitter
    "mode3": {"messages": 25, "transfers_per_message": 2, "samplerate": 24e6, "sclk": 1e6, "mode": 3,
              "words_per_transfer": 2, "sigma": {"cs_setup": 50e-9, "inter_byte": 80e-9}, "seed": 7},
}


def _build(name):
    sc = Scenario.from_toml(None, dict(SCENARIOS[name]))
    tl = sc.timeline()
    n = int(round(tl.end_time * sc.samplerate))
    return sc, tracks(tl, sc.channels, sc.samplerate), n


def _ext(fmt):
    if fmt.startswith("vcd"):
        return ".vcd"
    if fmt.startswith(("csv", "scope")):
        return ".csv"
    if fmt.startswith("sr"):
        return ".sr"
    return ""


def _options(fmt, trs):
    if fmt.startswith("saleae"):
        return {"channel_map": ",".join(f"{j}={t.name}" for j, t in enumerate(trs)) if fmt != "saleae-analog"
                else {f"A{j}": t.name for j, t in enumerate(trs)}}
    if fmt == "vcd-vector":
        return {"channel_map": {f"bus[{j}]": t.name for j, t in enumerate(trs)}}
    if fmt.startswith("scope-"):
        return {"channel_map": dict(zip(native_names(fmt[6:], len(trs)), (t.name for t in trs)))}
    return {}


@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    d = tmp_path_factory.mktemp("xf")
    out = {}
    for name in SCENARIOS:
        sc, trs, n = _build(name)
        cfg = SpiConfig(cpol=sc.cpol, cpha=sc.cpha)
        ref = analyze_device(write_capture(d / f"{name}.sr", "sr", trs, sc.samplerate, n), cfg)
        out[name] = (d, sc, trs, n, cfg, ref)
    return out


@pytest.mark.parametrize("fmt", [f for f in FORMATS if f != "sr"])
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_same_analysis_in_every_format(captures, fmt, scenario):
    d, sc, trs, n, cfg, ref = captures[scenario]
    path = write_capture(d / f"{scenario}-{fmt}{_ext(fmt)}", fmt, trs, sc.samplerate, n)
    a = analyze_device(path, cfg, **_options(fmt, trs))
    assert a.truncated is None, a.truncated
    assert ref.n > 40
    assert a.n == ref.n, f"{fmt}: {a.n} transfers, reference {ref.n}"
    assert np.array_equal(a.n_words, ref.n_words)
    assert np.array_equal(a.mosi, ref.mosi) and np.array_equal(a.miso, ref.miso)
    assert np.array_equal(a.message, ref.message), "message grouping differs"
    tol = max(a.tick_s, ref.tick_s) * (1 + 1e-6) + 1e-12
    for kind in ("cs_setup", "cs_hold", "inter_byte", "cs_change", "context_switch", "transfer_duration",
                 "transfer_period"):
        x = ref.gap_values(kind) * ref.tick_s
        y = a.gap_values(kind) * a.tick_s
        assert x.shape == y.shape, kind
        assert np.array_equal(np.isnan(x), np.isnan(y)), kind
        ok = ~np.isnan(x)
        err = np.abs(x[ok] - y[ok]).max() if ok.any() else 0.0
        assert err <= tol, f"{fmt} {kind}: off by {err * 1e9:.2f} ns (limit {tol * 1e9:.2f} ns)"
    # absolute times agree too (same time origin: tick 0 = capture start)
    err = np.abs(ref.start * ref.tick_s - a.start * a.tick_s).max()
    assert err <= tol


def test_resolution_is_reported_per_format(captures):
    d, sc, trs, n, cfg, ref = captures["mode0"]
    expect = {"vcd": 10e-9, "saleae-v1": 20e-9, "csv-saleae": 20e-9, "csv-dsview": 20e-9,
              "scope-keysight": 20e-9, "scope-rigol": 20e-9, "scope-pico": 20e-9, "scope-rs": 40e-9}
    for fmt, tick in expect.items():
        path = write_capture(d / f"res-{fmt}{_ext(fmt)}", fmt, trs, sc.samplerate, n)
        a = analyze_device(path, cfg, **_options(fmt, trs))
        assert a.tick_s == pytest.approx(tick, rel=1e-6), fmt
    # v0 files carry no rate: the inferred grid must hold every sample time (divide 20 ns)
    path = write_capture(d / "res-saleae-v0", "saleae-v0", trs, sc.samplerate, n)
    a = analyze_device(path, cfg, **_options("saleae-v0", trs))
    k = 20e-9 / a.tick_s
    assert abs(k - round(k)) < 1e-6 and a.tick_s <= 20e-9
    assert any("inferred from the transition times" in w for w in a.warnings)
