"""Which CS-inactive gaps are cs_change gaps and which are context switches.

Gap lengths alone cannot tell them apart (seed 000: context switches of ~5 µs
were *shorter* than the 10 µs cs_change gaps). The message structure can: with
N transfers per spi_message (per ioctl), every N-th CS-inactive gap is the gap
between two messages and the N-1 gaps in between are cs_change gaps. So we look
for a period N and a phase such that the gaps at that phase differ from all
others, whichever way.

Scoring a candidate (N, phase): the gaps at the phase (set B) against the rest
(set C). Score = balanced accuracy of the best single threshold separating B
from C (1.0 = perfectly separable, 0.5 = no better than chance), counted only
if the medians of B and C differ by more than 4 robust standard deviations of C
and 3 ticks. Candidates: N = 2..16, plus the most common spacings between
outlying gaps (for long messages such as 100 or 500 transfers per ioctl). The
best score wins, the smaller N on a tie; at least 5 periods must be present
and the score must reach 0.95, else there is "no periodic structure". (With
only 3 periods, equally spaced chance outliers are common: the real ad7920
capture shows "every 94th gap is longer" three times by chance.)

Candidates are compared on the first WINDOW gaps; on longer captures the
winner is re-scored on whole periods from four places spread over the
capture, so the cost stays bounded however long the capture is.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from analyzer.core.quantile import median, percentiles

MIN_SCORE = 0.95
MIN_PERIODS = 5
WINDOW = 1 << 14       # candidates are compared on the first 16384 gaps; the winner across the capture


@dataclasses.dataclass
class Grouping:
    transfers_per_message: int
    phase: int            # gap i (between transfer i and i+1) ends a message iff (i - phase) % N == 0
    confidence: float     # balanced accuracy of the split, 0.5..1; 0 when nothing was inferred
    method: str           # "auto" or "user"
    note: str

    def boundary_mask(self, n_gaps: int) -> np.ndarray:
        i = np.arange(n_gaps)
        return (i - self.phase) % self.transfers_per_message == 0


def _spread_sample(g: np.ndarray, period: int, chunks: int = 4) -> np.ndarray:
    """Whole periods from ``chunks`` places spread over the capture, each starting
    at a multiple of ``period`` (so gap i keeps its phase i % period); all of
    ``g`` when that is not shorter."""
    per_chunk = (WINDOW // period) * period
    if per_chunk < MIN_PERIODS * period or len(g) <= chunks * WINDOW:
        return g
    starts = [(k * (len(g) - per_chunk) // (chunks - 1)) // period * period for k in range(chunks)]
    return np.concatenate([g[s:s + per_chunk] for s in starts])


def _phase_of(g: np.ndarray, n: int) -> int:
    m = len(g) // n * n                       # whole periods only: one vectorized median per phase
    grid = g[:m].reshape(-1, n)
    meds = median(grid, axis=0)
    if n == 2:
        # two phases deviate equally from their mean; a cs_change gap is a busy
        # wait (narrow), a context switch goes through the scheduler (wide)
        # With no spread to tell (jitter-free data), assume the capture starts
        # with a message, as --transfers-per-message does without enough data.
        p10, p90 = np.array([percentiles(grid[:, k], [10, 90]) for k in range(2)]).T
        spread = median(np.abs(grid - meds), axis=0) + (p90 - p10)
        if abs(spread[0] - spread[1]) <= 0.05 * max(spread) + 1e-9:
            return n - 1
        return int(np.argmax(spread))
    return int(np.argmax(np.abs(meds - median(meds))))


class _Scorer:
    def __init__(self, g: np.ndarray):
        self.g = g
        self.order = np.argsort(g, kind="stable")
        sg = g[self.order]
        self.cut_ok = np.append(sg[1:] != sg[:-1], False)   # thresholds between distinct values
        self.idx = np.arange(len(g))

    def score(self, n: int, phase: int) -> float:
        g = self.g
        is_b = (self.idx - phase) % n == 0
        nb = int(is_b.sum())
        nc = len(g) - nb
        if nb < MIN_PERIODS or nc < 1:
            return 0.0
        b, c = g[is_b], g[~is_b]
        mb, mc = median(b), median(c)
        sc = 1.4826 * median(np.abs(c - mc))
        if abs(mb - mc) <= max(4 * sc, 3.0):
            return 0.0
        cum_b = np.cumsum(is_b[self.order])
        k = np.arange(1, len(g) + 1)
        ba_low = 0.5 * (cum_b / nb + (nc - (k - cum_b)) / nc)
        ba = np.maximum(ba_low, 1 - ba_low)[self.cut_ok]
        return float(ba.max()) if len(ba) else 0.0


def infer(gaps_ticks: np.ndarray) -> Grouping:
    g = np.asarray(gaps_ticks, dtype=float)
    n = len(g)
    if n < 2 * MIN_PERIODS:
        return Grouping(1, 0, 0.0, "auto",
                        f"only {n} CS-inactive gap(s): too few to find a message pattern; "
                        "each transfer is counted as its own message, all gaps as context switches")
    # Compare candidates on a window (phase medians and scores are O(n) each, and
    # 15+ candidates on 10^5..10^6 gaps would dominate the analysis); the winner
    # is then scored on all gaps.
    w = g[:WINDOW]
    cands = set(range(2, min(16, len(w) // MIN_PERIODS) + 1))
    m = median(w)
    s = 1.4826 * median(np.abs(w - m)) + 1.0
    out = np.flatnonzero(np.abs(g - m) > 6 * s)
    if len(out) >= MIN_PERIODS:
        vals, cnt = np.unique(np.diff(out), return_counts=True)
        for v in vals[np.argsort(-cnt)][:3]:
            if 2 <= v <= n // MIN_PERIODS:
                cands.add(int(v))
    scorers = {}

    def scorer(data):               # sorting all gaps only when a candidate needs them
        if id(data) not in scorers:
            scorers[id(data)] = _Scorer(data)
        return scorers[id(data)]

    best = (0.0, 1, 0)
    for cand in sorted(cands):
        data = w if cand <= len(w) // MIN_PERIODS else g
        phase = _phase_of(data, cand)
        score = scorer(data).score(cand, phase)
        if score > best[0] + 0.01:
            best = (score, cand, phase)
    if best[0] > 0 and len(w) < n:
        # the winner must hold across the capture, not just in the window
        check = _spread_sample(g, best[1])
        phase = _phase_of(check, best[1])
        best = (_Scorer(check).score(best[1], phase), best[1], phase)
    score, cand, phase = best
    if score >= MIN_SCORE:
        d = w if len(w) >= MIN_PERIODS * cand else g
        b = d[(np.arange(len(d)) - phase) % cand == 0]
        c = d[(np.arange(len(d)) - phase) % cand != 0]
        rel = "shorter" if median(b) < median(c) else "longer"
        return Grouping(cand, phase, round(score, 3), "auto",
                        f"every {_ordinal(cand)} CS-inactive gap is {rel} than the others: "
                        f"{cand} transfers per message (confidence {score:.2f})")
    return Grouping(1, 0, round(score, 3), "auto",
                    "no periodic structure in the CS-inactive gaps: each transfer is counted as its "
                    "own message and every CS-inactive gap as a context switch "
                    "(give --transfers-per-message N if you know the call pattern)")


def given(gaps_ticks: np.ndarray, n: int) -> Grouping:
    """The user named N; find where the messages start if the data allows."""
    g = np.asarray(gaps_ticks, dtype=float)
    if n == 1:
        return Grouping(1, 0, 1.0, "user", "1 transfer per message (given): every CS-inactive gap is a context switch")
    if len(g) >= MIN_PERIODS * n:
        phase = _phase_of(g, n)
        score = _Scorer(g).score(n, phase)
        return Grouping(n, phase, round(score, 3), "user",
                        f"{n} transfers per message (given); message starts placed where the gaps "
                        f"differ (separation {score:.2f})")
    return Grouping(n, n - 1, 0.0, "user",
                    f"{n} transfers per message (given); too few gaps to locate message starts, "
                    "assuming the capture starts with a message")


def _ordinal(k: int) -> str:
    suffix = "th" if 10 <= k % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k}{suffix}"
