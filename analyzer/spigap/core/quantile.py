"""Percentiles without numpy.percentile.

Hand-written because ``np.percentile`` imports ``numpy.ma`` on first use in
numpy 2 (about 7 ms at every ``spigap analyze`` start, 1/30 of a whole run on
the benchmark capture). Same definition as numpy's default ('linear'): the
value at rank q*(n-1), interpolated between the two neighbouring order
statistics; np.partition finds them without a full sort.
"""

from __future__ import annotations

import numpy as np

# a normal distribution's standard deviation per median absolute deviation: robust σ = this × MAD
ROBUST_SIGMA_PER_MAD = 1.4826


def percentiles(values: np.ndarray, qs) -> list[float]:
    """Percentiles ``qs`` (0..100) of a 1-D array with no NaNs (numpy's 'linear')."""
    v = np.asarray(values, dtype=float)
    n = len(v)
    if n == 0:
        raise ValueError("percentile of an empty array")
    ranks = [q / 100.0 * (n - 1) for q in qs]
    lo = [int(np.floor(r)) for r in ranks]
    hi = [min(x + 1, n - 1) for x in lo]
    part = np.partition(v, sorted(set(lo + hi)))
    return [float(part[a] + (r - a) * (part[b] - part[a])) for r, a, b in zip(ranks, lo, hi)]


def median(values, axis: int | None = None):
    """np.median without its NaN check (which imports numpy.ma): inputs must hold no
    NaN. The mean of the two middle order statistics for even counts, as numpy."""
    v = np.asarray(values, dtype=float)
    if axis is None:
        v = v.ravel()
        axis = 0
    n = v.shape[axis]
    if n == 0:
        raise ValueError("median of an empty array")
    hi = n // 2
    if n % 2:
        return np.take(np.partition(v, hi, axis=axis), hi, axis=axis)[()]
    part = np.partition(v, [hi - 1, hi], axis=axis)
    return ((np.take(part, hi - 1, axis=axis) + np.take(part, hi, axis=axis)) / 2)[()]
