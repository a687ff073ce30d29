"""Held-out check on real captures (captures/real): every one analyzes without
error, and the same real edges written as VCD / Saleae binary / change-only CSV (and, for
the small ones, as analog .sr) give the same analysis as the original .sr."""

from __future__ import annotations

import numpy as np
import pytest

from spigap.api import SpiConfig, analyze_device
from spigap.io import open_capture
from spigap.synth.srwriter import Track
from spigap.synth.writers import write_capture
from conftest import REAL, real
from test_real_captures import CAPTURES


def _config(name):
    fname, cfg, _, rate = CAPTURES[name]
    return real(fname), SpiConfig(**cfg), rate


@pytest.mark.parametrize("name", sorted(CAPTURES))
def test_every_real_capture_analyzes_without_error(name):
    path, cfg, rate = _config(name)
    a = analyze_device(path, cfg, samplerate=rate)
    assert a.truncated is None and a.n > 0
    # a glitch filter shorter than one sample changes nothing
    b = analyze_device(path, cfg, samplerate=rate, deglitch=a.tick_s * 1e9 * 0.9)
    assert b.n == a.n and np.array_equal(b.mosi, a.mosi) and np.array_equal(b.start, a.start)


def test_all_files_in_captures_real_are_covered():
    files = {p.name for p in REAL.glob("*.sr")}
    assert files and files <= {c[0] for c in CAPTURES.values()}, files - {c[0] for c in CAPTURES.values()}


def _tracks_of(path, cfg: SpiConfig, rate):
    """The real capture's edges of the SPI channels as synth Tracks (sample numbers)."""
    with open_capture(path, samplerate=rate) as r:
        c = cfg.resolve(r.info.channels, path=str(path))
        names = [n for n in (c.clk, c.mosi, c.miso, c.cs) if n is not None]
        blocks = list(r.edges(names))
        n = r.end_tick
        tick = r.info.tick_s
    t = np.concatenate([b.ticks for b in blocks])
    s = np.concatenate([b.states for b in blocks])
    out = []
    for j, name in enumerate(names):
        lv = ((s >> j) & 1).astype(np.uint8)
        out.append(Track(name, t[1:], lv[1:], int(lv[0])))
    return out, names, n, 1.0 / tick


# winbond (20.7 M value changes to write and read back in each format: about 10 s of CPU)
# is `slow` (make test-all, CI); make test round-trips the other twelve configurations
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n == "winbond" else n
                                  for n in sorted(CAPTURES)])
def test_real_edges_in_other_formats_give_the_same_analysis(name, tmp_path):
    path, cfg, rate = _config(name)
    ref = analyze_device(path, cfg, samplerate=rate)
    trs, names, n, sr = _tracks_of(path, cfg, rate)
    edges = sum(len(t.samples) for t in trs)
    # the text/analog writers are test tools at ~1 µs per row: keep the big captures to the fast ones
    fmts = ["vcd", "saleae-v1"] + (["csv-saleae"] if edges <= 2_000_000 else []) + \
        (["sr-analog"] if n <= 2_000_000 else [])
    for fmt in fmts:
        ext = {"vcd": ".vcd", "csv-saleae": ".csv", "sr-analog": ".sr"}.get(fmt, "")
        p = write_capture(tmp_path / f"{name}-{fmt}{ext}", fmt, trs, sr, n)
        kw = {"samplerate": sr} if fmt == "csv-saleae" else {}
        if fmt == "saleae-v1":
            kw["channel_map"] = {str(j): nm for j, nm in enumerate(names)}
        a = analyze_device(p, cfg, **kw)
        assert a.truncated is None, (fmt, a.truncated)
        assert a.n == ref.n, (fmt, a.n, ref.n)
        assert np.array_equal(a.mosi, ref.mosi) and np.array_equal(a.miso, ref.miso), fmt
        tol = max(a.tick_s, ref.tick_s) * (1 + 1e-6) + 1e-12
        for kind in ("cs_setup", "cs_hold", "inter_byte", "transfer_duration"):
            x, y = ref.gap_values(kind) * ref.tick_s, a.gap_values(kind) * a.tick_s
            assert np.array_equal(np.isnan(x), np.isnan(y)), (fmt, kind)
            ok = ~np.isnan(x)
            if ok.any():
                assert np.abs(x[ok] - y[ok]).max() <= tol, (fmt, kind)
