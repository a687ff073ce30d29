"""The message grouping is never confidently wrong (issue 13, docs/gaps.md "Calibration").

The calibration grid (tests/grouping_grid.py) draws hidden scenarios with known
truth. Default run: every pattern, context-switch relation, start and stall
level, with the jitter levels cycled (270 scenarios, a few seconds). The full
grid crosses every jitter level too (1080 scenarios, ~30 s):
``SPIGAP_CALIBRATION=full pytest -m calibration tests/test_grouping_calibration.py``.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

import grouping_grid as gg
from spigap.core import grouping


def _check(results):
    assert results
    for r in results:
        sc = r["scenario"]
        # never >= 0.8 with more than 2 % of the gaps wrong (issue 32: below 0.8 a confidence is the
        # measured share right of its kind of answer, so 0.65 is wrong about 1 time in 3)
        assert not (r["confidence"] >= 0.8 and r["right"] < 0.98), (sc, r["confidence"], r["right"], r["note"])
    sure = [r for r in results if r["confidence"] >= 0.9]
    assert sure, "no confident answer at all: the grouping would be useless"
    # among answers given with confidence >= 0.9, >= 99 % of the labels are right
    assert np.mean([r["right"] for r in sure]) >= 0.99


def test_default_grid_covers_every_family():
    scs = gg.grid()
    assert {s.pattern for s in scs} == set(gg.PATTERNS)
    assert {s.relation for s in scs} == set(gg.CONTEXT_SWITCH_US)
    assert {s.start for s in scs} == set(gg.STARTS)
    assert {s.stalls for s in scs} == set(gg.STALLS)
    assert {s.jitter for s in scs} == set(gg.JITTER)
    assert {s.family() for s in scs} == {"constant N", "unequal lengths"}


def test_calibration_default_grid():
    res = [gg.judge(s) for s in gg.grid()]
    _check(res)
    # the answers are useful, not just safe: most clean scenarios are answered with confidence
    clean = [r for r in res if r["scenario"].relation != "overlapping" and r["scenario"].jitter <= 0.05
             and r["scenario"].start == "idle"]
    assert np.mean([r["confidence"] >= 0.9 for r in clean]) >= 0.75


@pytest.mark.calibration
@pytest.mark.skipif(os.environ.get("SPIGAP_CALIBRATION") != "full", reason="SPIGAP_CALIBRATION=full runs it")
def test_calibration_full_grid():
    _check([gg.judge(s) for s in gg.grid(full=True)])


# ------------------------------------------------------------- the four cases

def _gaps(lengths, ctx_us, cs_us=10.0, *, jitter=0.03, stalls=0.0, messages=200, seed=1, drop=1):
    rng = np.random.default_rng(seed)
    msg = np.tile(lengths, messages // len(lengths))
    ends = np.cumsum(msg)
    ctx = np.zeros(int(ends[-1]) - 1, bool)
    ctx[ends[:-1] - 1] = True
    g = np.where(ctx, ctx_us, cs_us) * gg.US * (1 + rng.normal(0, jitter, len(ctx)))
    g += (rng.random(len(g)) < stalls) * rng.uniform(20, 200, len(g)) * gg.US
    return np.rint(g)[drop:], ctx[drop:]         # drop: the capture starts inside a message


def _right(grp, ctx):
    return float(np.mean((grp.kinds == grouping.CONTEXT_SWITCH) == ctx))


TICK = 1 / 50e6            # the gaps above are samples at 50 MSa/s


@pytest.mark.parametrize("stalls", [0.0, 0.05])
def test_two_per_message_context_switch_shorter(stalls):
    # issue 13 row 1-2: context switch 5 µs shorter than cs_change 10 µs (seed 000). Issue 24:
    # a 10 µs cs_change is the kernel's udelay(10) busy-wait, tight (3 % here): that tells the roles
    g, ctx = _gaps([2], 5.0, stalls=stalls)
    grp = grouping.infer(g, lead=100.0, tick_s=TICK)
    # issue 32: stated at what answers of this kind (a busy-wait, N = 2, two tight kinds less than
    # twice apart) measured on the development cases: 0.75, not 0.9
    assert _right(grp, ctx) >= 0.99 and grp.confidence >= 0.75 and grp.transfers_per_message == 2
    assert "busy-wait" in grp.evidence[0]
    # with a 15 % spread the 10 µs gaps are no busy-wait: nothing tells which kind ends messages
    g, ctx = _gaps([2], 5.0, stalls=stalls, jitter=0.15)
    grp = grouping.infer(g, lead=100.0, tick_s=TICK)
    assert grp.ambiguous and grp.confidence <= 0.5
    # the rivals: 2 per message either way round, or every gap a message boundary (N = 1)
    assert sorted(r["transfers_per_message"] for r in grp.readings if r["status"] == "rival") == [1, 2, 2]
    assert set(np.unique(grp.kinds)) == {grouping.CLASS_A, grouping.CLASS_B}
    assert "--transfers-per-message 2" in grp.settle and "--context-switch longer|shorter" in grp.settle
    told = grouping.infer(g, context_switch="shorter", transfers_per_message=2, tick_s=TICK)
    assert _right(told, ctx) >= 0.99 and told.confidence == 1.0 and told.method == "user"


def test_two_and_three_alternating():
    # issue 13 row 3: messages of 2 and 3 transfers alternate, context switch 25 µs
    g, ctx = _gaps([2, 3], 25.0, drop=0)
    grp = grouping.infer(g, lead=50000.0, tick_s=TICK)        # captured from idle: 1 ms before the first message
    assert _right(grp, ctx) == 1.0 and grp.confidence >= 0.9
    assert grp.lengths in ([2, 3], [3, 2]) and "messages of 2 and 3 transfers alternate" in grp.note
    assert grp.transfers_per_message is None
    mid, ctx_mid = _gaps([2, 3], 25.0, drop=2)
    amb = grouping.infer(mid, lead=100.0, tick_s=TICK)
    assert amb.confidence <= 0.5 or _right(amb, ctx_mid) >= 0.98
    assert "messages of 2 and 3 transfers alternate" in amb.note


def test_irq_thread_singles_then_a_pair():
    # issue 13 row 4 (seed 001): four single transfers, then a message of 2; the lengths alone
    # (no sample period: no physical evidence)
    g, ctx = _gaps([1, 1, 1, 1, 2], 25.0, drop=3)
    amb = grouping.infer(g, lead=100.0)
    assert amb.ambiguous and amb.confidence <= 0.5
    assert "4 single transfers, then a message of 2" in amb.note
    dev = grouping.infer(g, lead=100.0, device_lengths=(1, 2))
    assert _right(dev, ctx) == 1.0 and dev.method == "device"
    assert "device" in dev.evidence[0] and dev.confidence < 0.8       # not measured on the grid
    assert "4 single transfers, then a message of 2" in dev.note


def test_known_boundaries_are_ground_truth():
    g, ctx = _gaps([2, 3], 25.0)
    grp = grouping.from_boundaries(len(g), np.flatnonzero(ctx))
    assert _right(grp, ctx) == 1.0 and grp.confidence == 1.0 and grp.method == "trace"
    assert set(grp.lengths) == {2, 3}
    with pytest.raises(ValueError):
        grouping.from_boundaries(3, [5])


def test_irregular_mix_is_labelled_by_length_and_reported():
    # an IRQ thread's irregular mix of 1- and 2-transfer messages: two clear populations,
    # no repeating pattern; the message-length distribution is reported under both readings
    rng = np.random.default_rng(3)
    lens = rng.choice([1, 2], size=400)
    ends = np.cumsum(lens)
    ctx = np.zeros(int(ends[-1]) - 1, bool)
    ctx[ends[:-1] - 1] = True
    g = np.rint(np.where(ctx, 25.0, 10.0) * gg.US * (1 + rng.normal(0, 0.05, len(ctx))))
    amb = grouping.infer(g, lead=100.0)
    assert amb.ambiguous and amb.structure == "by length" and amb.confidence <= 0.5
    assert "messages of 1 (50 %), 2 (50 %) transfers" in amb.note
    told = grouping.infer(g, lead=100.0, context_switch="longer")
    assert _right(told, ctx) == 1.0 and told.confidence >= 0.9


def test_regroup_an_analysis_with_known_boundaries(tmp_path):
    # what a kernel trace would feed in: the message boundaries, applied to a real analysis
    from spigap.core.analysis import KIND_CONTEXT_SWITCH, regroup
    from util import analyze, synth

    # cs_change 20 µs (no default busy-wait) and context switches of 5 µs: ambiguous
    sc, tl, path = synth(tmp_path, transfers_per_message=2, messages=20, cs_change="20us",
                         context_switch="5us", seed=8, lead="2us")
    a = analyze(path)
    assert a.grouping.ambiguous
    kinds = np.array(tl.truth()["kind"][1:])
    regroup(a, grouping.from_boundaries(a.n - 1, np.flatnonzero(kinds == "context_switch")))
    assert not a.grouping.ambiguous and a.grouping.method == "trace" and a.n_messages() == 20
    assert (a.gap_kind[1:][kinds == "context_switch"] == KIND_CONTEXT_SWITCH).all()
    assert len(a.gap_values("cs_change")) == 20 and len(a.gap_values("class_a")) == 0


def test_binomial_tail_equals_scipy():
    """grouping._tail (hand-written to keep scipy.special out of the start-up)
    against scipy's own binomial survival function."""
    from scipy.special import bdtrc

    from spigap.core.grouping.pattern import tail as _tail

    rng = np.random.default_rng(1)
    for q in (0.0, 1.0, 1e-4, 0.03, 0.5, 0.97):
        n = rng.integers(0, 3000, size=50)
        k = rng.integers(-1, 3001, size=50) % (n + 3) - 1
        ref = np.where(k <= 0, 1.0, bdtrc(np.maximum(k - 1, 0), n, q))
        np.testing.assert_allclose(_tail(k, n, q), ref, rtol=1e-9, atol=1e-300)


# ------------------------------------------------------------- the split's EM, written out for speed

def _plain_em(xs, ws, total, comps, outlier, u_density, scale="log", binw=0.02, res=1.0):
    """The EM of decoders/spi_gaps/split.py as the plain formulas: any number of components, one
    density function, no constants taken out of the loop (what split.py ran before it was
    written out per component count for speed)."""
    from spigap.core.gaprules import defs

    split = defs.split_two.__globals__
    normal = lambda x, m, s: math.exp(-0.5 * ((x - m) / s) ** 2) / (s * 2.5066282746310002)  # noqa: E731
    comps = [list(c) for c in comps]
    cap = defs.SPLIT_MAX_OUTLIER if scale == "log" else defs.SPLIT_MAX_OUTLIER_LINEAR
    ll = -math.inf
    for _ in range(defs.SPLIT_ITERATIONS):
        s0, s1, s2 = [0.0] * len(comps), [0.0] * len(comps), [0.0] * len(comps)
        su = new_ll = 0.0
        pu = outlier * u_density
        for x, w in zip(xs, ws):
            ps = [c[0] * normal(x, c[1], c[2]) for c in comps]
            tot = sum(ps) + pu
            if tot <= 0.0:
                continue
            new_ll += w * math.log(tot)
            f = w / tot
            for k, p in enumerate(ps):
                r = p * f
                s0[k] += r
                s1[k] += r * x
                s2[k] += r * x * x
            su += pu * f
        for k, c in enumerate(comps):
            if s0[k] <= 1e-12:
                c[0] = 0.0
                continue
            c[0], c[1] = s0[k] / total, s1[k] / s0[k]
            var = max(s2[k] / s0[k] - c[1] * c[1], 0.0) + binw * binw / 12.0
            c[2] = max(math.sqrt(var), split["_floor"](c[1], scale, res))
        outlier = min(su / total, cap)
        wsum = sum(c[0] for c in comps) or 1.0
        for c in comps:
            c[0] = c[0] / wsum * (1.0 - outlier)
        done = abs(new_ll - ll) < split["SPLIT_TOLERANCE"] * max(1.0, abs(new_ll))
        ll = new_ll
        if done:
            break
    return [tuple(c) for c in comps], outlier, ll


def test_split_em_is_the_plain_em_to_the_last_bit(monkeypatch):
    """The EM pass is written out for one and two components (the grouping's CPU is mostly
    there; sigrok's Python has no numpy): every split must come out as the plain formulas give
    it, bit for bit: verdict, components, threshold and every value's side."""
    from spigap.core.gaprules import defs

    split = defs.split_two.__globals__
    rng = np.random.default_rng(5)
    cases = []
    for i in range(40):
        n = int(rng.integers(30, 3000))
        a, b = rng.uniform(20, 600), rng.uniform(20, 3000)
        sa, sb = rng.choice([0.01, 0.05, 0.2]), rng.choice([0.01, 0.05, 0.3])
        v = np.where(rng.random(n) < rng.uniform(0.05, 0.95), a * np.exp(rng.normal(0, sa, n)),
                     b * np.exp(rng.normal(0, sb, n)))
        v[rng.random(n) < 0.02] *= 20
        u, c = np.unique(np.rint(v).astype(int), return_counts=True)
        cases.append((list(zip(u.tolist(), c.tolist())), "log" if i % 3 else "linear"))

    def run():
        out = []
        for pairs, scale in cases:
            sp = defs.split_two(pairs, scale)
            out.append((sp.verdict, sp.comps, sp.outlier, sp.threshold, sp.expected_error, sp.note,
                        [sp.classify(v) for v, _ in pairs]))
        return out

    fast = run()
    assert {f[0] for f in fast} >= {"one", "two"}          # both outcomes are compared
    monkeypatch.setitem(split, "_em", _plain_em)
    assert run() == fast
