"""Stall detection (analyzer/spigap/core/stalls.py) against stalls injected at known places.

Oracle: the synthesizer's timeline (analyzer/spigap/synth), where we add a known
extra delay to chosen gaps before the capture is written; the analyzer only
sees the .sr file. Positions are checked to ±1 sample.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from spigap.api import analyze_device
from spigap.core import stalls
from spigap.errors import UsageError
from spigap.synth import scenario, write
from spigap.synth.timeline import build
from conftest import CAPTURES

SR = 50e6


def _ad7606(seed, messages=400, **over):
    base = {"seed": seed, "messages": messages, "stall_probability": 0.0}
    base.update(over)
    return scenario.Scenario.from_toml(CAPTURES / "ad7606-pi5-k6.12.25.toml", base)


def _write(sc, w, path):
    tl = build(w, sc.shape, sc.tail)
    write(sc, path, tl=tl)
    return tl


def _q(t):
    return np.rint(np.asarray(t) * SR).astype(np.int64)


def test_injected_stalls_found_exactly(tmp_path):
    sc = _ad7606(11)
    w = sc.windows()
    cs_idx = [40, 41, 250]            # context switches (gap before these transfers)
    hold_idx = [100]                  # CS hold
    setup_idx = [333]                 # CS setup
    w.gap_before[cs_idx] += np.array([60e-6, 25e-6, 300e-6])
    w.cs_hold[hold_idx] += 12e-6
    w.cs_setup[setup_idx] += 9e-6
    p = tmp_path / "stalls.sr"
    tl = _write(sc, w, p)
    a = analyze_device(p)
    found = stalls.find_stalls(a)
    got = sorted((s.kind, s.transfer) for s in found)
    want = sorted([("context_switch", i) for i in cs_idx] + [("cs_hold", i) for i in hold_idx]
                  + [("cs_setup", i) for i in setup_idx])
    assert got == want
    tick = 1 / SR
    truth = tl.truth()
    for s in found:
        k = s.transfer
        if s.kind == "context_switch":
            at, dur = tl.cs_deassert[k - 1], truth["gap_before"][k]
        elif s.kind == "cs_hold":
            at, dur = tl.cs_deassert[k] - truth["cs_hold"][k], truth["cs_hold"][k]
        else:
            at, dur = tl.cs_assert[k], truth["cs_setup"][k]
        assert abs(s.at_s - at) <= 1.01 * tick
        assert abs(s.duration_s - dur) <= 2.01 * tick      # two edges, each ±½ sample after rounding
        assert s.resolution_s == pytest.approx(tick)
        assert s.excess_s == pytest.approx(s.duration_s - s.median_s)
        assert s.duration_s > s.threshold_s
    # time order
    assert [s.at_s for s in found] == sorted(s.at_s for s in found)
    summ = stalls.summary(a, found)
    assert summ["count"] == len(want)
    assert summ["kinds"]["context_switch"]["stalls"] == 3
    assert summ["excess_s"] == pytest.approx(sum(s.excess_s for s in found))
    assert summ["kinds"]["context_switch"]["longest_s"] == pytest.approx(truth["gap_before"][250], abs=2 * tick)
    json.dumps(stalls.to_dict(a, found))


def test_cs_change_stall_in_batched_messages(tmp_path):
    sc = scenario.Scenario.from_toml(CAPTURES / "mcp3008-rpi3-k4.4-b10.toml",
                                     {"seed": 5, "messages": 40, "stall_probability": 0.0})
    w = sc.windows()
    kinds = np.asarray(w.kind)
    cc = np.flatnonzero(kinds == "cs_change")
    target = int(cc[77])
    w.gap_before[target] += 40e-6
    p = tmp_path / "b10.sr"
    _write(sc, w, p)
    a = analyze_device(p)
    found = stalls.find_stalls(a)
    assert [(s.kind, s.transfer) for s in found] == [("cs_change", target)]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_no_stalls_in_plain_jitter(tmp_path, seed):
    """Gaussian jitter alone never reaches 8 robust σ: no stall may be reported."""
    sc = _ad7606(seed, messages=1500)
    p = tmp_path / f"clean{seed}.sr"
    write(sc, p)
    a = analyze_device(p)
    assert stalls.find_stalls(a) == []
    # quantized inter-byte gaps (3 or 4 samples, MAD = 0) are not stalls either
    ib = a.gap_values("inter_byte")
    assert len(np.unique(ib)) >= 2
    assert stalls.summary(a, [])["kinds"]["inter_byte"]["stalls"] == 0


def test_stall_rule_terms():
    rng = np.random.default_rng(0)
    v = 1000 + rng.normal(0, 10, 5000)
    v[[10, 20]] = [1000 + 6 * 10, 1000 + 12 * 10]      # 6 σ: jitter tail; 12 σ: a stall
    mask, med, thr = stalls.stall_mask(v, stalls.StallRule(k=8, rel=0.0, min_samples=0))
    sigma = 1.4826 * np.median(np.abs(v - np.median(v)))
    assert sigma == pytest.approx(10, rel=0.05)
    assert thr == pytest.approx(med + 8 * sigma)
    assert np.flatnonzero(mask).tolist() == [20]
    # the relative term dominates when the jitter is tiny
    v[30] = 3000
    mask, med, thr = stalls.stall_mask(v, stalls.StallRule(k=8, rel=0.5, min_samples=0))
    assert thr == pytest.approx(med * 1.5)
    assert np.flatnonzero(mask).tolist() == [30]
    # the sample floor dominates for quantized gaps (MAD = 0)
    q = np.array([3] * 90 + [4] * 10 + [9], float)
    mask, med, thr = stalls.stall_mask(q, stalls.StallRule(k=8, rel=0.5, min_samples=5))
    assert (med, thr) == (3.0, 8.0)
    assert np.flatnonzero(mask).tolist() == [100]
    # too few values: nothing is searched
    mask, med, thr = stalls.stall_mask(v[:5])
    assert med is None and not mask.any()


def test_bad_rule():
    with pytest.raises(UsageError):
        stalls.StallRule(k=-1)
    with pytest.raises(UsageError):
        stalls.StallRule(min_count=2)


def test_gap_series_times_match_truth(tmp_path):
    sc = _ad7606(4, messages=50)
    p = tmp_path / "g.sr"
    tl = sc.timeline()
    write(sc, p, tl=tl)
    a = analyze_device(p)
    s = stalls.gap_series(a, "context_switch")
    assert np.array_equal(s.at, _q(tl.cs_deassert[s.transfer - 1]))
    s = stalls.gap_series(a, "cs_setup")
    assert np.array_equal(s.at, _q(tl.cs_assert))
    s = stalls.gap_series(a, "inter_byte")
    assert len(s.at) == 3 * 50
    # the gap starts at the last clock edge of the earlier word
    assert np.array_equal(s.at, _q(tl.word_last.reshape(50, 4)[:, :3].ravel()))
    with pytest.raises(UsageError):
        stalls.gap_series(a, "nonsense")


def test_seed004_uart_flush_gaps(tmp_path):
    """Seed 004: a read/write cycle every ~0.3 ms, stopped for ~328 ms by printf/UART flushes
    after every ~0.5 s of cycles. Each flush is one stall, at its place, and nothing else is."""
    sc = scenario.Scenario.from_toml(None, {
        "samplerate": "4MHz", "sclk": "500kHz", "words_per_transfer": 2, "messages": 3000,
        "messages_per_burst": 1000, "context_switch": "290us", "burst_gap": "328ms", "seed": 4,
        "cs_setup": "5us", "cs_hold": "3us", "sigma_context_switch": "5us", "sigma_cs_setup": "0.5us"})
    p = tmp_path / "s004.sr"
    tl = sc.timeline()
    write(sc, p, tl=tl)
    a = analyze_device(p)
    found = stalls.find_stalls(a)
    assert [s.transfer for s in found] == [1000, 2000]
    assert {s.kind for s in found} == {"context_switch"}
    for s in found:
        assert s.at_s == pytest.approx(tl.cs_deassert[s.transfer - 1], abs=1 / 4e6)
        assert s.duration_s == pytest.approx(tl.truth()["gap_before"][s.transfer], abs=2 / 4e6)
        assert s.duration_s == pytest.approx(328e-3, abs=30e-6)
    summ = stalls.summary(a, found)
    assert summ["excess_fraction"] == pytest.approx(2 * (328e-3 - 290e-6) / (a.end_tick * a.tick_s), rel=0.01)
