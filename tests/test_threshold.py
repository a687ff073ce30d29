"""Analog -> logic thresholds (Schmitt trigger), --threshold parsing, and the per-channel stream merge."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spigap.errors import CaptureTruncated, UsageError
from spigap.io.base import EdgeBlock
from spigap.io.threshold import (Schmitt, Source, Threshold, auto_thresholds, merge, parse_threshold,
                                   sampled_source, strict_blocks)


# ------------------------------------------------------------------ parsing
@pytest.mark.parametrize("text, key, level, hyst", [
    ("SCLK=1.65,0.2", "SCLK", 1.65, 0.2),
    ("1.4", None, 1.4, 0.14),
    ("CS = 800mV, 100mV", "CS", 0.8, 0.1),
    ("*=2.5", None, 2.5, 0.25),
    ("Channel A=1.2V/0.05V", "Channel A", 1.2, 0.05),
    ("D0=0", "D0", 0.0, 0.01),
])
def test_parse_threshold(text, key, level, hyst):
    k, thr = parse_threshold(text)
    assert k == key
    assert thr.level == pytest.approx(level) and thr.hysteresis == pytest.approx(hyst)


@pytest.mark.parametrize("text", ["abc", "SCLK=", "1.65,-0.1", "", "SCLK=1.6,x", "nan"])
def test_parse_threshold_rejects(text):
    with pytest.raises(UsageError) as e:
        parse_threshold(text)
    assert "threshold" in str(e.value)


def test_threshold_option_reaches_the_reader_via_the_cli():
    from spigap.cli import build_parser
    from spigap.cli.common import reader_options

    args = build_parser().parse_args(["analyze", "x.csv", "--threshold", "SCLK=1.65,0.2", "--threshold", "1.4",
                                      "--channel-map", "0=SCLK,1=MOSI", "--deglitch", "0.5us"])
    opts = reader_options(args)
    # the parsed values (cli/common's converters return them)
    assert opts["threshold"] == [parse_threshold("SCLK=1.65,0.2"), parse_threshold("1.4")]
    assert opts["channel_map"] == {"0": "SCLK", "1": "MOSI"}
    assert opts["deglitch"] == pytest.approx(500.0)


def test_bad_threshold_is_an_argparse_error(capsys):
    from spigap.cli import build_parser

    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(["analyze", "x.csv", "--threshold", "SCLK=banana"])
    assert e.value.code == 2
    assert "threshold" in capsys.readouterr().err


# ------------------------------------------------------------------ Schmitt
def _reference(v, thr: Threshold, state=None):
    out = []
    for x in v:
        if state is None:
            state = int(x >= thr.level) if np.isfinite(x) else None
        if x >= thr.high:
            state = 1
        elif x <= thr.low:
            state = 0
        out.append(state if state is not None else 0)
    return np.array(out, np.uint8)


def test_schmitt_hysteresis_example():
    thr = Threshold(1.65, 0.2)              # switches at 1.75 up, 1.55 down
    v = np.array([0.0, 1.6, 1.74, 1.76, 1.6, 1.56, 1.54, 1.7, np.nan, 3.3, np.nan, 0.1])
    assert Schmitt(thr)(v).tolist() == [0, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 0]


@settings(max_examples=300, deadline=None)
@given(st.floats(-1, 4), st.lists(st.one_of(st.floats(-1, 4), st.just(float("nan"))), max_size=200),
       st.lists(st.integers(0, 200), max_size=6), st.floats(0.5, 3), st.floats(0, 1))
def test_schmitt_chunked_equals_sequential_reference(first, values, cuts, level, hyst):
    v = np.array([first] + values)
    thr = Threshold(level, hyst)
    sm = Schmitt(thr)
    bounds = sorted({0, len(v), *[c % (len(v) + 1) for c in cuts]})
    got = np.concatenate([sm(v[a:b]) for a, b in zip(bounds, bounds[1:])])
    assert got.tolist() == _reference(v, thr).tolist()


def test_schmitt_leading_no_data_takes_the_first_level():
    # no fake edge where the data starts: the first valid sample sets the level before it
    assert Schmitt(Threshold(1.65, 0.2))(np.array([np.nan, np.nan, 3.3, 0.0])).tolist() == [1, 1, 1, 0]


def test_auto_thresholds_mid_range_and_pooled_fallback():
    rng = np.random.default_rng(1)
    clk = np.where(rng.random(5000) < 0.5, 3.3, 0.0) + rng.normal(0, 0.02, 5000)
    cs = np.full(5000, 3.3) + rng.normal(0, 0.02, 5000)        # never toggles in the sample
    thr = auto_thresholds({"SCLK": clk, "CS": cs})
    assert thr["SCLK"].level == pytest.approx(1.65, abs=0.05)
    assert thr["SCLK"].hysteresis == pytest.approx(0.33, abs=0.03)
    assert thr["CS"].level == pytest.approx(1.65, abs=0.05)     # from the pooled swing, not 3.3 V


# -------------------------------------------------------------------- merge
def _dense(per_channel, n):
    """Reference: levels of each channel over ticks [0, n) packed into states."""
    out = np.zeros(n, np.uint32)
    for j, (t, lv) in enumerate(per_channel):
        dense = np.zeros(n, np.uint32)
        for tick, level in zip(t, lv):
            dense[tick:] = level
        out |= dense << j
    return out


def _render(blocks, n):
    out = np.zeros(n, np.uint32)
    for b in blocks:
        for t, s in zip(b.ticks, b.states):
            out[t:] = s
    return out


@st.composite
def channels(draw):
    n = draw(st.integers(2, 300))
    k = draw(st.integers(1, 4))
    chans = []
    for _ in range(k):
        ticks = sorted(draw(st.sets(st.integers(1, n - 1), max_size=40)))
        init = draw(st.integers(0, 1))
        lv = [init]
        for _ in ticks:
            lv.append(lv[-1] ^ 1)
        chans.append((np.array([0] + ticks, np.int64), np.array(lv, np.uint32)))
    splits = draw(st.lists(st.integers(1, 20), min_size=k, max_size=k))
    return n, chans, splits


def _runs(t, s, size):
    for i in range(0, len(t), size):
        yield t[i:i + size], s[i:i + size]


@settings(max_examples=300, deadline=None)
@given(channels())
def test_merge_matches_dense_reference(case):
    n, chans, splits = case
    sources = [Source(_runs(t, s, size), j) for j, ((t, s), size) in enumerate(zip(chans, splits))]
    blocks = list(merge(sources))
    ticks = np.concatenate([b.ticks for b in blocks])
    states = np.concatenate([b.states for b in blocks])
    assert ticks[0] == 0 and np.all(np.diff(ticks) > 0)
    assert np.all(states[1:] != states[:-1]), "only changes after the first entry"
    assert _render(blocks, n).tolist() == _dense(chans, n).tolist()


def test_merge_stops_at_a_truncated_source():
    def good():
        yield np.array([0, 10, 20, 30], np.int64), np.array([0, 1, 0, 1], np.uint32)

    def cut():
        yield np.array([0, 5], np.int64), np.array([1, 0], np.uint32)
        raise CaptureTruncated("cut", at_tick=15)

    seen = []
    blocks = []
    with pytest.raises(CaptureTruncated):
        for b in merge([Source(good(), 0), Source(cut(), 1)], on_truncated=seen.append):
            blocks.append(b)
    ticks = np.concatenate([b.ticks for b in blocks])
    assert ticks.max() < 15 and 10 in ticks and len(seen) == 1


def test_sampled_source_places_edges_at_sample_ticks():
    v = np.array([0, 0, 3.3, 3.3, 0, 0, 0, 3.3], float)
    runs = list(sampled_source([v[:3], v[3:6], v[6:]], Schmitt(Threshold(1.65, 0.3))))
    t = np.concatenate([r[0] for r in runs])
    s = np.concatenate([r[1] for r in runs])
    assert t.tolist() == [0, 2, 4, 7] and s.tolist() == [0, 1, 0, 1]


def test_strict_blocks_merges_a_tick_continued_in_the_next_block():
    blocks = [EdgeBlock(np.array([0, 5], np.int64), np.array([0, 1], np.uint32)),
              EdgeBlock(np.array([5, 9], np.int64), np.array([3, 1], np.uint32))]
    out = list(strict_blocks(blocks))
    t = np.concatenate([b.ticks for b in out])
    s = np.concatenate([b.states for b in out])
    assert t.tolist() == [0, 5, 9] and s.tolist() == [0, 3, 1]


def test_resolve_thresholds_notes_channels_that_do_not_toggle():
    from spigap.io.threshold import resolve_thresholds

    rng = np.random.default_rng(2)
    data = {"SCLK": np.where(rng.random(1000) < 0.5, 3.3, 0.0), "CS": np.full(1000, 3.3)}
    thr, notes = resolve_thresholds(None, ["SCLK", "CS"], lambda ns: {n: data[n] for n in ns})
    assert thr["CS"].level == pytest.approx(1.65, abs=0.05)
    assert any("CS did not toggle" in n for n in notes)
    thr, notes = resolve_thresholds(None, ["A"], lambda ns: {"A": np.zeros(10)})
    assert any("a guess" in n for n in notes)
    thr, notes = resolve_thresholds(["CS=2.5,0.1"], ["SCLK", "CS"], lambda ns: {n: data[n] for n in ns})
    assert thr["CS"] == Threshold(2.5, 0.1) and not any("CS did not" in n for n in notes)
    with pytest.raises(UsageError):
        resolve_thresholds(["XX=1"], ["SCLK", "CS"], lambda ns: {n: data[n] for n in ns})
