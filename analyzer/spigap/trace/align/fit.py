"""The robust line fit of the clock mapping: Theil-Sen, then least squares on its inliers."""

from __future__ import annotations

import numpy as np

FIT_SAMPLE = 1200          # Theil-Sen on at most this many pairs (it is O(n^2))


def theil_sen(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Theil-Sen line (median of pairwise slopes, median of ``y - slope * x`` as the
    intercept): scipy.stats.theilslopes(y, x, method="joint") without its confidence
    interval. Written out because importing scipy.stats costs about 0.9 s per process,
    three to four times a whole ``spigap trace`` run on the shipped traced pairs
    (0.2-0.3 s), which imports nothing else from scipy; per call the two take the same
    time (13 ms at FIT_SAMPLE pairs) and give the same bits (tests/test_trace_align.py
    checks this one against scipy's)."""
    i, j = np.triu_indices(len(x), 1)
    dx = x[j] - x[i]
    ok = dx != 0
    if not ok.any():
        return 0.0, float(np.median(y))
    slope = float(np.median((y[j] - y[i])[ok] / dx[ok]))
    return slope, float(np.median(y - slope * x))


def fit_line(t: np.ndarray, y: np.ndarray, t0: float) -> tuple[float, float]:
    """Robust line y = a + b (t - t0): Theil-Sen on a bounded subsample, then
    least squares on the inliers (more efficient for the quantization noise)."""
    x = t - t0
    if len(x) < 2:
        return float(y[0] - x[0]) if len(x) else 0.0, 1.0
    sel = np.unique(np.linspace(0, len(x) - 1, min(len(x), FIT_SAMPLE)).round().astype(np.int64))
    # fit y - x (the offset, slowly varying) for numerical headroom
    slope, intercept = theil_sen(x[sel], (y - x)[sel])
    r = (y - x) - (intercept + slope * x)
    s = 1.4826 * float(np.median(np.abs(r - np.median(r)))) if len(r) else 0.0
    inl = np.abs(r - np.median(r)) <= max(3 * s, 1e-12)
    if inl.sum() >= 3 and np.ptp(x[inl]) > 0:
        slope, intercept = np.polyfit(x[inl], (y - x)[inl], 1)
    return float(intercept), float(1.0 + slope)
