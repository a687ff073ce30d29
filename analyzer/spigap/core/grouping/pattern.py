"""Structure in a sequence of gap labels: repeating patterns, and where they change.

Labels are small ints (the kind of each CS-inactive gap, core/grouping/kinds.py),
-1 where unknown (a stall, or not clearly one kind). docs/gaps.md, "CS-inactive
gaps", step 2.

* ``pattern`` (two kinds) and ``pattern_k`` (more): the shortest repeating
  pattern that the known labels follow;
* ``rare_pattern``: a rare kind (1 gap in 50) hidden among stalls;
* ``phase_test``: a constant N whose lengths overlap, seen as one phase that differs;
* ``shift_test``: a constant N whose lengths overlap so much that no threshold separates
  its phases, seen as one phase shifted in distribution (a rank test over every period and
  phase, with its multiple-testing bound);
* ``segments``: where a capture's structure changes (a batch size that changes
  mid-capture): stretches with different repeating patterns.
"""

from __future__ import annotations

import dataclasses
import math
from statistics import NormalDist

import numpy as np

from spigap.core.gaprules import defs
from spigap.core.quantile import ROBUST_SIGMA_PER_MAD, median

MIN_PERIODS = defs.MIN_PERIODS
WINDOW = 1 << 14        # structure is searched on the first 16384 gaps, then applied to all
CLEAN = 0.97            # a stretch follows its pattern (local agreement)
LOCAL_MATCH = 0.85      # local_periods: share of a kind's occurrences that its shift by p matches
MAX_SEGMENT_PERIOD = 128
SHIFT_ALPHA = 1e-3      # shift_test: chance of a false pattern in gaps with no structure, over every test
SHIFT_MIN_ROWS = 16     # shift_test: periods a phase needs (a rank test of fewer cannot reach the bound)
SHIFT_HALF_Z = 2.0      # shift_test: the shift is seen in each half of the window (same side, |z| >= this)
SHIFT_QUARTER_SD = 2.5   # shift_test: each quarter's z within this of half the window's (a constant shift)
SHIFT_REFUSE_ALPHA = 1e-3  # shift_test: a refusal's bar (a sibling or another phase shifted), Bonferroni over
                           # the phases that check looks at, not over every period and phase the search tried


def pattern(lab: np.ndarray, rare: bool = False, x: np.ndarray | None = None) -> tuple[int, np.ndarray, float] | None:
    """Shortest repeating pattern of the known labels (0/1; -1 unknown):
    (period P, pattern of P labels, agreement), or None. ``rare``: label 1 is
    a rare kind mixed with stalls, so only the positions of the pattern that
    hold it must be pure (stalls elsewhere do not count against it)."""
    n = len(lab)
    known = lab >= 0
    nk = int(known.sum())
    if nk < 2 * MIN_PERIODS:
        return None
    idx = np.flatnonzero(known)
    ones = (lab[known] == 1).astype(float)
    cands = list(range(1, min(defs.MAX_PATTERN, n // MIN_PERIODS) + 1))
    # long messages (100, 500 transfers): the spacings of the rarer label
    rarer = idx[ones == (1.0 if ones.mean() < 0.5 else 0.0)]
    if len(rarer) >= MIN_PERIODS:
        vals, cnt = np.unique(np.diff(rarer), return_counts=True)
        for v in vals[np.argsort(-cnt)][:3]:
            if defs.MAX_PATTERN < v <= n // MIN_PERIODS:
                cands.append(int(v))
    scores = []
    n1 = ones.sum()
    n0 = nk - n1
    if min(n0, n1) < MIN_PERIODS:
        return None
    if rare:
        q = max(float(n1) / nk, 1.0 / nk)
        n_tests = float(sum(cands))
        for p, r, tot, c1 in _folds(idx, ones, cands, rare_of=n):
            # a position holds the rare kind when it is seen there >= MIN_PERIODS times, mostly
            # that label, AND stalls (the label's background rate q) could not have filled it by
            # chance, over all positions and periods tried
            on = (tot >= MIN_PERIODS) & (c1 >= defs.MIN_PURITY * tot) & (tail(c1, tot, q) * n_tests < 1e-3)
            off_pure = (tot - c1)[~on].sum() >= (1 - defs.SPLIT_MAX_OUTLIER - 0.05) * tot[~on].sum()
            if (on.any() and not on.all() and off_pure and _complete(c1, tot, on) and _tight(x, idx, r, on)
                    and not _shorter_period(c1, tot, on)):
                # deviants at "off" positions are stalls, a third population: not misfits
                agree = float((c1[on].sum() + (tot - c1)[~on].sum()) / (tot[on].sum() + (tot - c1)[~on].sum()))
                return p, on.astype(np.int8), agree
        return None
    for p, r, tot, c1 in _folds(idx, ones, cands):
        on = c1 > tot - c1
        # balanced agreement: the mean of both labels' recall under the pattern
        # (plain agreement would let "all the majority label" win on rare labels)
        bal = 0.5 * (c1[on].sum() / n1 + (tot - c1)[~on].sum() / n0)
        scores.append((p, bal, c1, tot, on))
    if not scores:
        return None
    top = max(s[1] for s in scores)
    # the smallest period that does (nearly) as well: a longer one also fits
    # noise, by chance, so allow the misfit as slack
    slack = 0.01 + (1.0 - top)
    for p, bal, c1, tot, on in scores:
        if bal < top - slack or bal < defs.MIN_AGREEMENT or on.all() or not on.any():
            continue
        # each label's residues must be mostly that label
        pur1 = c1[on].sum() / tot[on].sum()
        pur0 = (tot - c1)[~on].sum() / tot[~on].sum()
        if min(pur1, pur0) >= defs.MIN_PURITY and _complete(c1, tot, on):
            agree = float((c1[on].sum() + (tot - c1)[~on].sum()) / nk)
            return p, on.astype(np.int8), agree
    return None


def _folds(idx: np.ndarray, ones: np.ndarray, cands: list[int], rare_of: int | None = None):
    """For each candidate period p whose every position holds at least MIN_PERIODS known
    labels: (p, each label's position idx % p, labels per position, label-1 count per
    position). ``rare_of``: the labels' count, for a rare kind among stalls: the labels span
    MIN_PERIODS periods, and a position may hold fewer known labels (stalls and gaps between
    the kinds are unknown; the rare kind's own positions are held to MIN_PERIODS by the caller)."""
    for p in cands:
        r = idx % p
        tot = np.bincount(r, minlength=p)
        if (tot.min() < MIN_PERIODS) if rare_of is None else (rare_of < MIN_PERIODS * p or not tot.all()):
            continue
        yield p, r, tot, np.bincount(r, weights=ones, minlength=p)


def pattern_k(lab: np.ndarray, k: int) -> tuple[int, np.ndarray, float] | None:
    """``pattern`` for ``k`` >= 2 kinds: each kind's own pattern (that kind vs the
    others) must repeat; the period is the least common multiple of theirs, the
    pattern the majority kind at each position."""
    if k == 2:
        return pattern(lab)
    periods = []
    for j in range(k):
        ind = np.where(lab < 0, -1, lab == j).astype(np.int8)
        f = pattern(ind)
        if f is None:
            return None
        periods.append(f[0])
    p = math.lcm(*periods)
    if p > defs.MAX_PATTERN or p * MIN_PERIODS > len(lab):
        return None
    known = lab >= 0
    idx = np.flatnonzero(known)
    cnt = np.bincount((idx % p) * k + lab[known], minlength=p * k).reshape(p, k)
    pat = np.argmax(cnt, axis=1).astype(np.int8)
    if len(set(pat.tolist())) < k:
        return None
    agree = float(cnt.max(axis=1).sum()) / max(len(idx), 1)
    if agree < defs.MIN_AGREEMENT:
        return None
    return p, pat, agree


def tail(k: np.ndarray, n: np.ndarray, q: float) -> np.ndarray:
    """P(X >= k) for X ~ Binomial(n, q), elementwise, exact.

    Hand-written (a log-space sum over a table of log factorials) rather than
    scipy.special.bdtrc: importing scipy.special costs ~0.14 s of every
    `spigap analyze` start-up, more than the analysis of a 20 M-sample
    capture; the counts here are at most the grouping window (16k gaps) and
    there are at most a few hundred of them, so the sums are cheap.
    tests/test_grouping_calibration.py checks it against scipy."""
    k, n = np.broadcast_arrays(np.rint(np.asarray(k)).astype(np.int64), np.asarray(n).astype(np.int64))
    out = np.ones(k.shape)
    if not k.size:
        return out
    lf = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, max(int(n.max()), 1) + 1)))])
    for idx in zip(*np.nonzero(k > 0)):
        kk, nn = int(k[idx]), int(n[idx])
        if kk > nn or q <= 0.0:
            out[idx] = 0.0
            continue
        if q >= 1.0:
            continue
        j = np.arange(kk, nn + 1)
        lp = lf[nn] - lf[j] - lf[nn - j] + j * math.log(q) + (nn - j) * math.log1p(-q)
        m = float(lp.max())
        out[idx] = min(1.0, math.exp(m) * float(np.exp(lp - m).sum()))
    return out


def _tight(x, idx, r, on) -> bool:
    """The rare kind is one population: the gaps at its positions spread no
    wider than a population may (a mix of stalls does). The spread is robust
    (1.4826 MAD of ln(gap + 1)): stalls lengthen the rare kind's gaps as often as
    any other's, and a few of them must not make a population look like a mix."""
    if x is None:
        return True
    v = x[idx[on[r]]]
    return len(v) < 2 or ROBUST_SIGMA_PER_MAD * float(median(np.abs(v - median(v)))) <= defs.SPLIT_MAX_SIGMA


def _shorter_period(c1: np.ndarray, tot: np.ndarray, on: np.ndarray) -> bool:
    """True when the rare kind's positions repeat at a shorter period d (a divisor of the
    pattern's) whose other phases hold it too, more often than stalls explain (their rate at
    the pattern's other positions): the kind then recurs every d gaps but overlaps the main
    population there, and a phase of the longer period that happened to show it every time
    is chance, not the structure (stalls strike no phase more than another)."""
    p = len(on)
    off = ~on
    q = max(float(c1[off].sum()) / max(float(tot[off].sum()), 1.0), 1e-3)
    pairs = [(int(j), d) for j in np.flatnonzero(on) for d in range(1, p) if p % d == 0]
    for j, d in pairs:
        sib = np.zeros(p, bool)
        sib[(j + d * np.arange(1, p // d)) % p] = True
        sib &= off
        if sib.any() and float(tail(np.array([c1[sib].sum()]), np.array([tot[sib].sum()]), q)[0]) * len(pairs) < 1e-3:
            return True
    return False


def _complete(c1: np.ndarray, tot: np.ndarray, on: np.ndarray) -> bool:
    """False when some positions of the pattern hold the other label far more
    often than the rest of their label's positions do: the pattern then misses
    positions of a shorter true one (noisy labels at a multiple of the period)."""
    for sel, cnt in ((~on, c1), (on, tot - c1)):
        if not sel.any():
            continue
        q = max(float(cnt[sel].sum()) / max(float(tot[sel].sum()), 1.0), 1e-3)
        if (tail(cnt[sel], tot[sel], q) * len(on) < 1e-3).any() and (cnt[sel] > 0.3 * tot[sel]).any():
            return False
    return True


def rare_pattern(g: np.ndarray, sp):
    """A repeating pattern of gaps far off the main population (> 4 of its
    standard deviations, one side at a time, then both: a rare kind whose
    spread straddles the main one), with stalls and the noise left unknown.
    Stalls strike at random, so deviants that recur at one position of a
    period, every time, are a kind of gap, not stalls (``pattern``'s binomial
    test). The main population's label is 0 when the rare kind lies above it, 1
    below. Returns (period, pattern, agreement, labels) or None."""
    w, m, s = max(sp.comps, key=lambda c: c[0])
    x = np.log(g + 1.0)
    z = (x - m) / s
    for side in (1, -1, 0):
        dev = (np.abs(z) if side == 0 else side * z) > 4
        if dev.sum() < MIN_PERIODS or dev.mean() > 0.25:
            continue
        lab = np.full(len(g), -1, np.int8)
        lab[np.abs(z) < 2.5] = 0
        lab[dev] = 1
        found = pattern(lab[:WINDOW], rare=True, x=x[:WINDOW])
        if found is not None:
            p, pat, agree = found
            if side == 0:       # which side the rare kind lies on: its gaps' median
                on = pat[np.arange(len(g)) % p].astype(bool) & (lab == 1)
                side = 1 if float(median(z[on])) > 0 else -1
            if side == -1:
                lab = np.where(lab < 0, lab, 1 - lab).astype(np.int8)
            return p, (pat if side == 1 else 1 - pat).astype(np.int8), agree, lab
    return None


def phase_test(g: np.ndarray) -> tuple[int, int, float] | None:
    """Constant N when the lengths overlap: one phase of the gaps differs from
    all others (balanced accuracy of the best threshold >= 0.95, medians more
    than 4 robust SDs and 3 samples apart). Returns (N, phase, score)."""
    w = g[:WINDOW]
    best = None
    for n in range(2, min(16, len(w) // MIN_PERIODS) + 1):
        m = len(w) // n * n
        grid = w[:m].reshape(-1, n)
        meds = median(grid, axis=0)
        dev = np.abs(meds - median(meds))
        phase = int(np.argmax(dev))
        s = _score(w, n, phase)
        if s >= 0.95 and (best is None or s > best[2] + 0.01) and _one_odd(w, n, phase, dev):
            best = (n, phase, s)
    return best


def shift_test(g: np.ndarray) -> tuple[int, int, float] | None:
    """Constant N when the lengths overlap so much that no threshold separates the gaps that
    end messages (a kernel loop whose cs_change_delay is as long as the gap between its
    messages): one phase of every N gaps is shifted in distribution against the others.

    Every period N (2 up to one that leaves each phase ``SHIFT_MIN_ROWS`` gaps, at most 128)
    and every phase is tested: the Mann-Whitney rank-sum of that phase's gaps against all the
    others (normal approximation with the ties' correction: a sum of bounded ranks, whose
    tails the normal's do not undershoot much this far out), two sided, and a phase counts when
    its p-value times the number of tests (Bonferroni) is below ``SHIFT_ALPHA``: gaps in no
    order give a false pattern about that often at most (2 in 4400 synthesized captures of
    120-6000 gaps, docs/gaps.md). Of the phases
    that count, the largest |z| is the candidate (a multiple of the true period dilutes the
    shift's evidence by the square root of the multiple, a divisor mixes it with unshifted
    gaps); it is refused when a shorter period dividing it shows the other phases of its class
    shifted too (the shorter period is the pattern, or the structure is no constant N), when
    another phase differs from the rest as well (several kinds of message end), both at
    ``SHIFT_REFUSE_ALPHA`` over the phases they look at (not the search's bound: a chance phase
    of a multiple, or a second shifted phase, need not pass that itself), when either half of the
    window does not show the shift on the same side, or when a quarter shows it far weaker than
    a constant shift would (a batch size that changes).
    A hand-written scan because scipy's ``mannwhitneyu`` would rank the gaps again for each of
    the thousands of period/phase pairs; one ranking and a ``bincount`` per period does them
    all. Returns (N, phase, |z|) or None."""
    w = np.asarray(g[:WINDOW], float)
    n = len(w)
    top = min(MAX_SEGMENT_PERIOD, n // SHIFT_MIN_ROWS)
    if top < 2:
        return None
    tests = top * (top + 1) // 2 - 1
    zmin = -NormalDist().inv_cdf(SHIFT_ALPHA / (2 * tests))
    ranks = _ranks(w)
    ties = _tie_term(w)
    idx = np.arange(n)
    best = None
    for per in range(2, top + 1):
        z = _phase_z(ranks, idx % per, per, ties)
        ph = int(np.argmax(np.abs(z)))
        if abs(z[ph]) >= zmin and (best is None or abs(z[ph]) > best[2]):
            best = (per, ph, float(abs(z[ph])), float(np.sign(z[ph])))
    if best is None:
        return None
    per, ph, zb, sign = best
    divisors = [m for m in range(2, per) if per % m == 0]
    zsib = -NormalDist().inv_cdf(SHIFT_REFUSE_ALPHA / max(len(divisors), 1))      # one sided, per divisor
    if any(_siblings_shifted(w, per, ph, m, sign, zsib) for m in divisors):
        return None
    if per > 2:
        keep = (idx - ph) % per != 0
        rest = w[keep]
        zo = _phase_z(_ranks(rest), idx[keep] % per, per, _tie_term(rest))
        zo[ph] = 0.0
        if float(np.max(np.abs(zo))) >= -NormalDist().inv_cdf(SHIFT_REFUSE_ALPHA / (2 * (per - 1))):
            return None
    for half in (slice(0, n // 2), slice(n // 2, n)):
        wh = w[half]
        zh = _phase_z(_ranks(wh), idx[half] % per, per, _tie_term(wh))
        if sign * zh[ph] < SHIFT_HALF_Z:
            return None
    # all along: a constant shift gives each quarter of the window about half the window's z (a
    # quarter of the gaps); a quarter far below that holds another structure (a batch size that
    # changed, whose shorter stretch the halves above do not see)
    for q in range(4):
        part = slice(q * n // 4, (q + 1) * n // 4)
        wq = w[part]
        zq = _phase_z(_ranks(wq), idx[part] % per, per, _tie_term(wq))
        if sign * zq[ph] < zb / 2 - SHIFT_QUARTER_SD:
            return None
    return per, ph, zb


def _ranks(w: np.ndarray) -> np.ndarray:
    """1-based ranks of ``w``, ties given their average rank (as scipy.stats.rankdata's default:
    written out because importing scipy.stats costs about a second of every command that groups
    gaps; tests/test_grouping_behaviour.py compares the two)."""
    order = np.argsort(w, kind="mergesort")
    sw = w[order]
    new = np.concatenate([[True], sw[1:] != sw[:-1]])
    starts = np.flatnonzero(new)
    counts = np.diff(np.concatenate([starts, [len(w)]]))
    out = np.empty(len(w))
    out[order] = (starts + (counts + 1) / 2.0)[np.cumsum(new) - 1]
    return out


def _tie_term(w: np.ndarray) -> float:
    """The ties' correction of the rank-sum variance: 1 - sum(t^3 - t) / (n^3 - n)."""
    _, t = np.unique(w, return_counts=True)
    n = float(len(w))
    t = t.astype(float)
    return 1.0 - float(np.sum(t ** 3 - t)) / max(n ** 3 - n, 1.0)


def _phase_z(ranks: np.ndarray, cls: np.ndarray, per: int, ties: float) -> np.ndarray:
    """Normal-approximation z of the rank sum of each class (``cls``: 0..per-1) against the rest."""
    n = float(len(ranks))
    n1 = np.bincount(cls, minlength=per).astype(float)
    r = np.bincount(cls, weights=ranks, minlength=per)
    mean = n1 * (n + 1) / 2
    var = n1 * (n - n1) * (n + 1) / 12 * ties
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.where(var > 0, (r - mean) / np.sqrt(np.maximum(var, 1e-300)), 0.0)
    return z


def _siblings_shifted(w: np.ndarray, per: int, ph: int, m: int, sign: float, zmin: float) -> bool:
    """At a period ``m`` dividing ``per``, the other phases of ``ph``'s class (``ph`` mod m, not
    ``ph`` itself) are shifted the same way against the gaps outside the class: the pattern
    repeats at ``m`` (or is no constant N)."""
    idx = np.arange(len(w))
    outside = (idx - ph) % m != 0
    sib = ~outside & ((idx - ph) % per != 0)
    sel = outside | sib
    z = _phase_z(_ranks(w[sel]), sib[sel].astype(np.int64), 2, _tie_term(w[sel]))
    return bool(sign * z[1] >= zmin)


def _one_odd(w: np.ndarray, n: int, phase: int, dev: np.ndarray) -> bool:
    """Only one phase differs (no other phase deviates by a third as much: 2+2+4 is not
    4 with one odd phase), and it differs all along (in every block of >= 10 periods its
    median lies on the same side of the others', a batch size that changed fails)."""
    if n > 2 and float(np.sort(dev)[-2]) > dev[phase] / 3:
        return False
    m = len(w) // n * n
    grid = w[:m].reshape(-1, n)
    rows = max(10, len(grid) // 8)
    sign = None
    for r0 in range(0, len(grid) - rows + 1, rows):
        blk = grid[r0:r0 + rows]
        d = float(median(blk[:, phase]) - median(np.delete(blk, phase, axis=1).ravel()))
        if sign is None:
            sign = d > 0
        if (d > 0) != sign or abs(d) < 0.5 * float(dev[phase]):
            return False
    return True


def phase_of(g: np.ndarray, n: int) -> int:
    m = len(g) // n * n
    meds = median(g[:m].reshape(-1, n), axis=0)
    return int(np.argmax(np.abs(meds - median(meds))))


def phase_pattern(g: np.ndarray, n: int, phase: int) -> np.ndarray:
    """The two-kind pattern of a constant N whose odd phase is ``phase``: 1 marks the longer kind."""
    p = np.zeros(n, np.int8)
    rest = np.delete(g[:len(g) // n * n].reshape(-1, n), phase, axis=1)
    pmed = median(g[(np.arange(len(g)) - phase) % n == 0])
    longer = pmed > median(rest.ravel())
    p[:] = 0 if longer else 1
    p[phase] = 1 if longer else 0
    return p


def _score(g: np.ndarray, n: int, phase: int) -> float:
    is_b = (np.arange(len(g)) - phase) % n == 0
    nb = int(is_b.sum())
    nc = len(g) - nb
    if nb < MIN_PERIODS or nc < 1:
        return 0.0
    b, c = g[is_b], g[~is_b]
    mb, mc = median(b), median(c)
    sc = ROBUST_SIGMA_PER_MAD * median(np.abs(c - mc))
    if abs(mb - mc) <= max(4 * sc, 3.0):
        return 0.0
    order = np.argsort(g, kind="stable")
    sg = g[order]
    ok = np.append(sg[1:] != sg[:-1], False)
    cum_b = np.cumsum(is_b[order])
    k = np.arange(1, len(g) + 1)
    ba = 0.5 * (cum_b / nb + (nc - (k - cum_b)) / nc)
    ba = np.maximum(ba, 1 - ba)[ok]
    return float(ba.max()) if len(ba) else 0.0


# ------------------------------------------------------------------ segments

@dataclasses.dataclass
class Stretch:
    """Gaps ``start`` .. ``end - 1`` follow one repeating pattern of kinds.
    ``pattern[i % period]`` is the kind of gap i (absolute gap index)."""
    start: int
    end: int
    period: int
    pattern: np.ndarray
    agreement: float

    def kinds(self, first: int, n: int) -> np.ndarray:
        return self.pattern[(first + np.arange(n)) % self.period]


def aligned(found: tuple[int, np.ndarray, float], start: int, end: int) -> Stretch:
    """A pattern found on gaps start.. (its index 0 = gap ``start``) as a Stretch on absolute indices."""
    p, pat, agree = found
    return Stretch(start, end, p, np.roll(np.asarray(pat, np.int8), start % p), agree)


def stationary(lab: np.ndarray, st: Stretch) -> bool:
    """The pattern holds all along: in no block of >= 5 periods (and >= 64 gaps), nor in
    the first and last 4 periods (>= 24 gaps), do fewer than 90 % of the known labels follow it. A pattern that fits one part of
    the capture only (a batch size that changed) fails."""
    n = len(lab)
    known = lab >= 0
    hit = (lab == st.kinds(0, n)) & known
    # the ends first: a few periods of another pattern at the start (a capture that begins
    # just before a batch size changes) hide in a block of 64
    edge = max(4 * st.period, 24)
    if n >= 4 * edge:
        for a, b in ((0, edge), (n - edge, n)):
            nk = int(known[a:b].sum())
            if nk >= edge // 2 and hit[a:b].sum() < 0.9 * nk:
                return False
    block = max(5 * st.period, 64)
    if n < 2 * block:
        return True
    cut = np.arange(0, n - block + 1, max(block // 2, 1))
    ch = np.concatenate([[0], np.cumsum(hit)])
    ck = np.concatenate([[0], np.cumsum(known)])
    nk = ck[cut + block] - ck[cut]
    agree = (ch[cut + block] - ch[cut]) / np.maximum(nk, 1)
    return bool(np.all((agree >= 0.9) | (nk < block // 2)))


def local_periods(lab: np.ndarray, k: int, max_p: int = MAX_SEGMENT_PERIOD) -> np.ndarray:
    """Per gap, the smallest period p that the labels around it follow; 0 where none does.

    Within max(96, 6p + min(6p, 48)) gap pairs (i - p, i) around each gap, every kind must match its
    shift: of the pairs where either gap is of kind j, >= LOCAL_MATCH must have both
    (a rare kind counts as much as a common one), for at least two kinds seen >= 2 times."""
    n = len(lab)
    known = lab >= 0
    best = np.zeros(n, np.int64)
    for p in range(1, min(max_p, n // (2 * MIN_PERIODS)) + 1):
        w = max(96, 6 * p + min(6 * p, 48))
        if w > n - p:
            break
        both = known[p:] & known[:-p]
        a, b = lab[p:], lab[:-p]
        ok_all = np.ones(n, bool)
        seen = np.zeros(n, np.int64)
        centre = np.arange(n)
        lo = np.clip(centre - p - w // 2, 0, len(a))
        hi = np.clip(lo + w, 0, len(a))
        lo = np.maximum(hi - w, 0)
        for j in range(k):
            aj, bj = both & (a == j), both & (b == j)
            cm = np.concatenate([[0], np.cumsum(aj & bj)])
            co = np.concatenate([[0], np.cumsum(aj | bj)])
            occ = co[hi] - co[lo]
            hit = cm[hi] - cm[lo]
            present = occ >= 2
            seen += present
            ok_all &= ~present | (hit >= LOCAL_MATCH * occ)
        ok = ok_all & (seen >= 2) & (best == 0)
        best[ok] = p
        if not (best == 0).any():
            break
    return best


def _majority(lab: np.ndarray, p: int, k: int) -> tuple[int, np.ndarray, float] | None:
    known = lab >= 0
    idx = np.flatnonzero(known)
    cnt = np.bincount((idx % p) * k + lab[known], minlength=p * k).reshape(p, k)
    if (cnt.sum(axis=1) == 0).any():
        return None
    pat = np.argmax(cnt, axis=1).astype(np.int8)
    if len(set(pat.tolist())) < 2:
        return None
    return p, pat, float(cnt.max(axis=1).sum()) / max(len(idx), 1)


def segments(lab: np.ndarray, k: int) -> list[Stretch] | None:
    """Stretches of the label sequence with different repeating patterns (a batch size
    that changes mid-capture), or None when one pattern explains it as well.

    The local periods (``local_periods``) propose the candidate patterns; the cut
    between two of them is where the first explains the labels before it and the
    second those after it best; a part is cut again while that helps. Each stretch
    holds >= MIN_PERIODS periods and >= 32 gaps."""
    n = len(lab)
    per = local_periods(lab, k)
    vals, cnt = np.unique(per[per > 0], return_counts=True)
    cands = [int(p) for p, c in sorted(zip(vals.tolist(), cnt.tolist()), key=lambda t: -t[1])
             if c >= max(3 * p, 24)][:4]
    if len(cands) < 2:
        return None
    pats = {}
    for p in cands:
        f = _majority(np.where(per == p, lab, -1).astype(np.int8), p, k)
        if f is not None:
            pats[p] = aligned(f, 0, n)
    if len(pats) < 2:
        return None
    known = lab >= 0
    hits = {p: np.concatenate([[0], np.cumsum((lab == st.kinds(0, n)) & known)]) for p, st in pats.items()}
    ck = np.concatenate([[0], np.cumsum(known)])
    out = _cut(hits, ck, pats, 0, n, 0)
    if out is None or len(out) < 2:
        return None
    return out


def _cut(hits: dict, ck: np.ndarray, pats: dict, s: int, e: int, depth: int) -> list[Stretch] | None:
    """[s, e) as one stretch or cut in two (recursively) where that explains the labels far better."""
    nk = max(int(ck[e] - ck[s]), 1)
    one = max(pats, key=lambda p: hits[p][e] - hits[p][s])
    one_hits = int(hits[one][e] - hits[one][s])
    whole = Stretch(s, e, one, pats[one].pattern, one_hits / nk)
    if depth >= 3 or whole.agreement >= CLEAN:
        return [whole] if whole.agreement >= defs.MIN_AGREEMENT else None
    best = None
    for pa in pats:
        for pb in pats:
            if pa == pb:
                continue
            lo = s + max(MIN_PERIODS * pa, 32)
            hi = e - max(MIN_PERIODS * pb, 32)
            if hi <= lo:
                continue
            cs = np.arange(lo, hi + 1)
            score = (hits[pa][cs] - hits[pa][s]) + (hits[pb][e] - hits[pb][cs])
            j = int(np.argmax(score))
            if best is None or score[j] > best[0]:
                best = (int(score[j]), int(cs[j]), pa, pb)
    if best is None:
        return None
    sc, c, _, _ = best
    # far better: at most half the misfits of one pattern, and clean on each side
    if (nk - sc) > 0.5 * (nk - one_hits):
        return [whole] if whole.agreement >= defs.MIN_AGREEMENT else None
    left = _cut(hits, ck, pats, s, c, depth + 1)
    right = _cut(hits, ck, pats, c, e, depth + 1)
    if left is None or right is None:
        return None
    merged: list[Stretch] = []
    for st in left + right:
        if merged and merged[-1].period == st.period and np.array_equal(merged[-1].pattern, st.pattern):
            prev = merged[-1]
            k1, k2 = prev.end - prev.start, st.end - st.start
            merged[-1] = Stretch(prev.start, st.end, st.period, st.pattern,
                                 (prev.agreement * k1 + st.agreement * k2) / (k1 + k2))
        else:
            merged.append(st)
    return merged
