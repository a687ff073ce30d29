"""Bounded distributions of per-edge figures: min, p1, p50, max and the worst edges.

A capture may hold millions of sampling edges. Each figure is kept as an exact
histogram of its values quantized to ``quantum`` (core/tickhist.py: memory per
*distinct* value, not per edge), so percentiles are exact to the quantum, which
is chosen far below the figure's own uncertainty (a sixty-fourth of a sample on a
scope trace, one sample on a logic capture, where every figure is whole samples).
The ``keep`` smallest and largest values are kept with their times and
uncertainties: the worst edges a user wants to look at.
"""

from __future__ import annotations

import math

import numpy as np

from spigap.core.tickhist import TickHistogram

KEEP = 5            # worst edges kept on each side


class Figure:
    """One measured figure over a capture (values in ticks)."""

    def __init__(self, name: str, *, quantum: float, unit: str = "s", keep: int = KEEP, record: bool = False):
        self.name = name
        # every (value, time, uncertainty) as well: for tests against a generator's truth, per edge
        self.record: list[np.ndarray] | None = [] if record else None
        self.quantum = float(quantum)     # ticks per histogram bin
        self.unit = unit
        self.keep = keep
        self.hist = TickHistogram()
        self.n = 0
        self.clipped = 0                  # values that reached the look-ahead horizon ("at least")
        self._lo = np.empty((0, 3))       # (value, time, uncertainty) of the smallest values, ascending
        self._hi = np.empty((0, 3))
        self._u_sum = 0.0
        self._u_max = 0.0
        self._sum = 0.0
        self._sumsq = 0.0

    def add(self, values, times, unc=None, clipped=None) -> None:
        v = np.asarray(values, np.float64)
        ok = np.isfinite(v)
        if not ok.all():
            v = v[ok]
            times = np.asarray(times)[ok]
            unc = np.asarray(unc)[ok] if unc is not None else None
            clipped = np.asarray(clipped)[ok] if clipped is not None else None
        if len(v) == 0:
            return
        t = np.asarray(times, np.float64)
        u = np.zeros(len(v)) if unc is None else np.broadcast_to(np.asarray(unc, np.float64), v.shape)
        self.n += len(v)
        if clipped is not None:
            self.clipped += int(np.count_nonzero(clipped))
        self.hist.add(np.rint(v / self.quantum).astype(np.int64))
        self._sum += float(v.sum())
        self._sumsq += float((v * v).sum())
        self._u_sum += float(u.sum())
        self._u_max = max(self._u_max, float(u.max()))
        rows = np.column_stack([v, t, u])
        if self.record is not None:
            self.record.append(rows)
        self._lo = _extreme(np.vstack([self._lo, rows]), self.keep, low=True)
        self._hi = _extreme(np.vstack([self._hi, rows]), self.keep, low=False)

    # ------------------------------------------------------------ reading
    def percentile(self, q: float) -> float:
        if self.n == 0:
            return math.nan
        return float(self.hist.percentiles([q])[0]) * self.quantum

    @property
    def min(self) -> float:
        return float(self._lo[0, 0]) if len(self._lo) else math.nan

    @property
    def max(self) -> float:
        return float(self._hi[0, 0]) if len(self._hi) else math.nan

    @property
    def mean(self) -> float:
        return self._sum / self.n if self.n else math.nan

    @property
    def std(self) -> float:
        if not self.n:
            return math.nan
        m = self._sum / self.n
        return math.sqrt(max(self._sumsq / self.n - m * m, 0.0))

    @property
    def u_mean(self) -> float:
        return self._u_sum / self.n if self.n else math.nan

    @property
    def u_max(self) -> float:
        return self._u_max if self.n else math.nan

    def recorded(self) -> np.ndarray:
        """(value, time, uncertainty) of every value added (``record``), time order."""
        rows = np.vstack(self.record) if self.record else np.empty((0, 3))
        return rows[np.argsort(rows[:, 1], kind="stable")]

    def worst(self, low: bool = True) -> np.ndarray:
        """(value, time, uncertainty) rows of the smallest (or largest) values, worst first."""
        return self._lo if low else self._hi


def _extreme(rows: np.ndarray, k: int, *, low: bool) -> np.ndarray:
    if len(rows) <= k:
        order = np.argsort(rows[:, 0] if low else -rows[:, 0], kind="stable")
        return rows[order]
    key = rows[:, 0] if low else -rows[:, 0]
    part = np.argpartition(key, k - 1)[:k]
    part = part[np.argsort(key[part], kind="stable")]
    return rows[part]


class Events:
    """A count of point events (runts, non-monotonic clock edges) with their first times."""

    def __init__(self, name: str, keep: int = KEEP):
        self.name = name
        self.keep = keep
        self.n = 0
        self.first: list[float] = []       # ticks
        self.detail: list[str] = []

    def add(self, times, detail: str | None = None) -> None:
        t = np.asarray(times, np.float64)
        if len(t) == 0:
            return
        self.n += len(t)
        room = self.keep - len(self.first)
        if room > 0:
            self.first.extend(float(x) for x in np.sort(t)[:room])
            if detail:
                self.detail.append(detail)
