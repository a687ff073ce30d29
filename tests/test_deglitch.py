"""--deglitch: pulses shorter than N are dropped, per channel, whatever the block boundaries."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spigap.api import SpiConfig, analyze_device
from spigap.io.base import EdgeBlock
from spigap.io.deglitch import Deglitch


def _reference(per_channel_levels: np.ndarray, min_ticks: float) -> np.ndarray:
    """Dense reference: a change to a level is kept iff the level then lasts >= min_ticks."""
    n, k = per_channel_levels.shape
    out = np.empty_like(per_channel_levels)
    for j in range(k):
        lv = per_channel_levels[:, j]
        cur = lv[0]
        out[0, j] = cur
        change = [0] + [i for i in range(1, n) if lv[i] != lv[i - 1]]
        kept = {}
        for a, b in zip(change, change[1:] + [n]):
            if a and b - a >= min_ticks:
                kept[a] = lv[a]
        for i in range(1, n):
            if i in kept:
                cur = kept[i]
            out[i, j] = cur
    return out


def _blocks_from_dense(levels: np.ndarray, cuts):
    n, k = levels.shape
    states = (levels.astype(np.uint32) << np.arange(k, dtype=np.uint32)).sum(axis=1).astype(np.uint32)
    idx = np.concatenate([[0], np.flatnonzero(states[1:] != states[:-1]) + 1])
    t, s = idx.astype(np.int64), states[idx]
    bounds = sorted({0, len(t), *[c % (len(t) + 1) for c in cuts]})
    return [EdgeBlock(t[a:b], s[a:b]) for a, b in zip(bounds, bounds[1:]) if b > a]


def _dense_from_blocks(blocks, n, k):
    out = np.zeros((n, k), np.uint8)
    for b in blocks:
        for t, s in zip(b.ticks, b.states):
            for j in range(k):
                out[t:, j] = (int(s) >> j) & 1
    return out


@st.composite
def signals(draw):
    n = draw(st.integers(2, 200))
    k = draw(st.integers(1, 3))
    # runs of random lengths, many of them short (glitches)
    cols = []
    for _ in range(k):
        lv, level = [], draw(st.integers(0, 1))
        while len(lv) < n:
            lv += [level] * draw(st.one_of(st.integers(1, 3), st.integers(1, 40)))
            level ^= 1
        cols.append(lv[:n])
    return np.array(cols, np.uint8).T, draw(st.lists(st.integers(0, 400), max_size=6))


@settings(max_examples=400, deadline=None)
@given(signals(), st.sampled_from([1.5, 2, 3.5, 8]))
def test_deglitch_matches_reference_for_any_block_split(sig, min_ticks):
    levels, cuts = sig
    n, k = levels.shape
    flt = Deglitch(k, min_ticks)
    out = []
    for b in _blocks_from_dense(levels, cuts):
        r = flt.feed(b)
        if r is not None:
            out.append(r)
    tail = flt.finish(n)
    if tail is not None:
        out.append(tail)
    t = np.concatenate([b.ticks for b in out])
    s = np.concatenate([b.states for b in out])
    assert t[0] == 0 and np.all(np.diff(t) > 0)
    assert np.all(s[1:] != s[:-1])
    assert _dense_from_blocks(out, n, k).tolist() == _reference(levels, min_ticks).tolist()


def test_deglitch_removes_injected_glitches_from_a_capture(tmp_path):
    """1-sample glitches on SCLK and CS corrupt the analysis; --deglitch 50 ns restores it."""
    from spigap.synth import Scenario, tracks
    from spigap.synth.srwriter import Track
    from spigap.synth.writers import write_capture

    sc = Scenario.from_toml(None, {"messages": 30, "samplerate": 100e6, "sclk": 2e6})
    tl = sc.timeline()
    n = int(round(tl.end_time * sc.samplerate))
    clean = tracks(tl, sc.channels, sc.samplerate)
    clean_path = write_capture(tmp_path / "clean.vcd", "vcd", clean, sc.samplerate, n)
    rng = np.random.default_rng(3)
    dirty = []
    for t in clean:
        t = t.clean()
        if t.name in ("SCLK", "CS"):
            # a 1-sample spike in the middle of every 5th idle stretch
            gaps = np.flatnonzero(np.diff(t.samples) > 40)[::5]
            mid = (t.samples[gaps] + t.samples[gaps + 1]) // 2 + rng.integers(-3, 4, len(gaps))
            lv_before = t.levels[gaps]
            s = np.concatenate([t.samples, mid, mid + 1])
            lv = np.concatenate([t.levels, 1 - lv_before, lv_before])
            o = np.argsort(s, kind="stable")
            t = Track(t.name, s[o], lv[o], t.initial)
        dirty.append(t)
    dirty_path = write_capture(tmp_path / "dirty.vcd", "vcd", dirty, sc.samplerate, n)
    ref = analyze_device(clean_path, SpiConfig())
    bad = analyze_device(dirty_path, SpiConfig())
    fixed = analyze_device(dirty_path, SpiConfig(), deglitch=50)
    assert bad.n != ref.n or not np.array_equal(bad.mosi, ref.mosi), "the glitches should disturb the analysis"
    assert fixed.n == ref.n
    assert np.array_equal(fixed.mosi, ref.mosi) and np.array_equal(fixed.miso, ref.miso)
    assert np.array_equal(fixed.start, ref.start) and np.array_equal(fixed.end, ref.end)


def test_deglitch_shorter_than_resolution_warns(tmp_path):
    from spigap.synth import Scenario, tracks
    from spigap.synth.writers import write_capture

    sc = Scenario.from_toml(None, {"messages": 2, "samplerate": 10e6, "sclk": 1e6})
    tl = sc.timeline()
    n = int(round(tl.end_time * sc.samplerate))
    p = write_capture(tmp_path / "c.sr", "sr", tracks(tl, sc.channels, sc.samplerate), sc.samplerate, n)
    a = analyze_device(p, SpiConfig(), deglitch=50)
    assert any("--deglitch" in w and "resolution" in w for w in a.warnings)
    with pytest.raises(Exception) as e:
        analyze_device(p, SpiConfig(), deglitch=-1)
    assert "deglitch" in str(e.value)


def test_deglitch_longer_than_the_clock_pulses_says_so():
    """--deglitch 200 on the bundled MCP3008 capture (SCLK 3.6 MHz: 139 ns pulses) drops every
    clock edge; the analysis said only "no SCLK edge in the prefix" (CS polarity by default) and
    0 words, never why. The filter now says which channel it emptied, first among the warnings;
    --deglitch 40 keeps the clock and says nothing."""
    import json

    from conftest import CAPTURES, spigap_main

    cap = CAPTURES / "mcp3008-rpi3-k4.4-b10.sr"
    d = json.loads(spigap_main("analyze", cap, "--deglitch", "200", "--format", "json").stdout)
    assert d["summary"]["words"] == 0
    assert d["warnings"][0] == ("--deglitch 200 ns dropped 48000 of 48000 changes of SCLK: its pulses are shorter "
                                "than that, not glitches; give a --deglitch below its shortest real pulse")
    assert not any("MOSI" in w or "CE0" in w for w in d["warnings"] if w.startswith("--deglitch"))
    d = json.loads(spigap_main("analyze", cap, "--deglitch", "40", "--format", "json").stdout)
    assert d["summary"]["words"] == 3000 and not any("--deglitch" in w for w in d["warnings"])
