"""Exact histograms of integer tick values: whole-capture statistics in bounded memory.

Every gap is an integer number of ticks, so a table *value → count* holds the
whole population: n, min, max and the mean are exact, and the percentiles are
the very order statistics ``quantile.percentiles`` interpolates between
(numpy's 'linear' rule), found by cumulative count instead of by sorting the
expanded values. Memory is 16 bytes per *distinct* value (plus a buffer of
recent values no larger than the table or ``BUFFER``), not per gap.

Bound: at most ``MAX_DISTINCT`` distinct values per histogram. A population
spread wider than that (e.g. gaps from 1 µs to 10 s at 1 GHz, all different)
is coarsened: values are kept in bins of 2^k ticks (k the smallest that fits),
``shift`` says k, and the statistics say so (``exact`` False): min, max, n and
the mean stay exact, p50/p99 are the bin's centre (within 2^(k-1) ticks), the
standard deviation is that of the bin centres. docs/gaps.md, "Long captures".
"""

from __future__ import annotations

import math

import numpy as np

BUFFER = 1 << 16          # values buffered (at least; or as many as the table holds) before a merge
MAX_DISTINCT = 1 << 20    # distinct values kept per histogram before coarsening (16 MB)


class TickHistogram:
    """Exact counts of integer tick values (one entry per distinct value)."""

    def __init__(self, max_distinct: int = MAX_DISTINCT):
        self.max_distinct = max_distinct
        self._values = np.empty(0, np.int64)     # bin index (value >> shift), ascending
        self._counts = np.empty(0, np.int64)
        self._buf: list[np.ndarray] = []
        self._nbuf = 0
        self.shift = 0                            # bins of 2**shift ticks once coarsened
        self._n = 0
        self._sum = 0                             # exact sum of the values (Python int)
        self._lo: int | None = None
        self._hi: int | None = None

    # ------------------------------------------------------------ adding
    def add(self, v) -> None:
        v = np.asarray(v)
        if len(v) == 0:
            return
        v = v.astype(np.int64)
        self._n += len(v)
        self._sum += int(v.sum())
        lo, hi = int(v.min()), int(v.max())
        self._lo = lo if self._lo is None else min(self._lo, lo)
        self._hi = hi if self._hi is None else max(self._hi, hi)
        self._buf.append(v)
        self._nbuf += len(v)
        if self._nbuf >= max(BUFFER, len(self._values)):     # merging costs O(table): amortized
            self._flush()

    def _flush(self) -> None:
        if not self._buf:
            return
        v = np.concatenate(self._buf) >> self.shift
        self._buf, self._nbuf = [], 0
        u, c = counts(v)
        self._merge(u, c)
        while len(self._values) > self.max_distinct:
            self.shift += 1
            self._values, self._counts = _sum_by(self._values >> 1, self._counts)

    def _merge(self, u: np.ndarray, c: np.ndarray) -> None:
        if len(self._values) == 0:
            self._values, self._counts = u, c
            return
        self._values, self._counts = _sum_by(np.concatenate([self._values, u]),
                                             np.concatenate([self._counts, c]))

    def table(self) -> tuple[np.ndarray, np.ndarray]:
        """(values, counts), values ascending (bin centres when coarsened)."""
        self._flush()
        if self.shift == 0:
            return self._values, self._counts
        return (self._values << self.shift) + ((1 << self.shift) - 1) / 2.0, self._counts

    # ------------------------------------------------------------ statistics
    @property
    def n(self) -> int:
        return self._n

    @property
    def min(self) -> int | None:
        return self._lo

    @property
    def max(self) -> int | None:
        return self._hi

    @property
    def exact(self) -> bool:
        return self.shift == 0

    def percentiles(self, qs) -> list[float]:
        """numpy's 'linear' percentiles of the counted values (quantile.percentiles on
        the expanded values, without expanding them: order statistic i is the value
        whose cumulative count first exceeds i)."""
        values, counts = self.table()
        cum = np.cumsum(counts)
        n = int(cum[-1])
        out = []
        for q in qs:
            r = q / 100.0 * (n - 1)
            lo = int(math.floor(r))
            hi = min(lo + 1, n - 1)
            a, b = values[np.searchsorted(cum, [lo, hi], side="right")]
            out.append(float(a + (r - lo) * (b - a)))
        return out

    def median(self) -> float:
        """quantile.median of the expanded values (the mean of the two middle order
        statistics for even counts)."""
        values, counts = self.table()
        return _median(values, counts)

    def mad(self, centre: float) -> float:
        """median(|v - centre|) over the expanded values."""
        values, counts = self.table()
        d = np.abs(values - centre)
        order = np.argsort(d, kind="stable")
        return _median(d[order], counts[order])

    def sum_above(self, x: float) -> tuple[int, float]:
        """(count, sum of the values) of the values above ``x``."""
        values, counts = self.table()
        sel = values > x
        return int(counts[sel].sum()), float((values[sel] * counts[sel]).sum())

    def describe(self, tick_s: float) -> dict:
        """analysis.describe() of the counted values: n / min / p50 / mean / p99 / max / std."""
        if self._n == 0:
            return {"n": 0, "min_s": None, "p50_s": None, "mean_s": None, "p99_s": None, "max_s": None,
                    "std_s": None}
        values, counts = self.table()
        assert self._lo is not None and self._hi is not None
        p50, p99 = self.percentiles([50, 99])
        mean = float(self._sum) / self._n           # as numpy: the (exact) float sum over n
        d = values.astype(float) - mean
        std = math.sqrt(float((counts * (d * d)).sum()) / self._n)
        return {"n": self._n, "min_s": float(self._lo) * tick_s, "p50_s": p50 * tick_s,
                "mean_s": mean * tick_s, "p99_s": p99 * tick_s, "max_s": float(self._hi) * tick_s,
                "std_s": std * tick_s}


def percentiles_of(v: np.ndarray, qs) -> list[float]:
    """``quantile.percentiles`` of integer values, by counting (gaps and clock periods
    in ticks cluster on few values: no partition of the whole array)."""
    h = TickHistogram()
    h.add(v)
    return h.percentiles(qs)


def median_of(v: np.ndarray) -> float:
    """``quantile.median`` of integer values, by counting."""
    h = TickHistogram()
    h.add(v)
    return h.median()


def _span_ok(v: np.ndarray) -> tuple[bool, int]:
    """(whether counting beats sorting for these integers, their minimum)."""
    lo = int(v.min())
    return int(v.max()) - lo <= 4 * len(v) + 4096, lo


def counts(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(v, return_counts=True)`` of int64 values: gaps cluster on few tick
    values, so they are counted (O(n)) rather than sorted when their span allows."""
    if len(v) == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    ok, lo = _span_ok(v)
    if not ok:
        u, c = np.unique(v, return_counts=True)
        return u, c.astype(np.int64)
    cnt = np.bincount(v - lo)
    nz = np.flatnonzero(cnt)
    return nz + lo, cnt[nz]


def unique_inverse(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(v, return_inverse=True)`` of int64 values, counted where ``counts`` does."""
    if len(v) == 0:
        return np.empty(0, np.int64), np.empty(0, np.intp)
    ok, lo = _span_ok(v)
    if not ok:
        return np.unique(v, return_inverse=True)
    present = np.bincount(v - lo) > 0
    u = np.flatnonzero(present)
    index = np.cumsum(present) - 1
    return u + lo, index[v - lo]


def _sum_by(values: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Counts ``n`` of equal values added up; values ascending."""
    u, inv = unique_inverse(values)
    return u, np.bincount(inv, weights=n, minlength=len(u)).astype(np.int64)


def _median(values: np.ndarray, counts: np.ndarray) -> float:
    """Median of ``values`` repeated ``counts`` times (values ascending)."""
    cum = np.cumsum(counts)
    n = int(cum[-1])
    hi = n // 2
    idx = np.searchsorted(cum, [hi - 1, hi] if n % 2 == 0 else [hi], side="right")
    v = values[idx].astype(float)
    return float(v[0]) if n % 2 else float((v[0] + v[1]) / 2)
