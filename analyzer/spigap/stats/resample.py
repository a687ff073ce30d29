"""Resampling for series of gaps that are not independent.

Consecutive gaps share causes (a slow interrupt, a cache-cold path, a
frequency change, a stall and its aftermath), so a series of n gaps carries
less information than n independent draws. Everything here works on *blocks*
of consecutive values, long enough that the dependence lives inside a block:

* ``block_length``: from the autocorrelation of the ranks (robust to stalls):
  twice the first lag at which it falls inside the ±2/√n noise band, and at
  least n^(1/3) (the usual rate for block bootstraps); capped so that every
  capture still gives >= 8 blocks.
* ``Bootstrap``: circular block bootstrap (Politis & Romano) inside each
  capture; with several captures per side, the captures are resampled first
  (two-stage / hierarchical bootstrap), so capture-to-capture variation (a
  reboot, temperature, a different run) is part of the interval.
* ``block_summaries``: non-overlapping blocks of L values per capture,
  summarized by their median, robust spread or mean: nearly independent units
  for a rank test.

Everything is vectorized over replicates (numpy arrays of shape
(replicates, values)), computed in chunks to bound memory.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

ROBUST_SIGMA_PER_IQR = 1.0 / 1.3489795    # IQR of a normal distribution is 1.349 σ
MIN_BLOCKS = 8
CHUNK_ELEMENTS = 4_000_000                # values per chunk of replicates
WORK_BUDGET = 50_000_000                  # values sorted per statistic and side


def _ranks(x: np.ndarray) -> np.ndarray:
    from scipy.stats import rankdata

    return rankdata(x)


def decorrelation_lag(x: np.ndarray) -> int:
    """First lag at which the rank autocorrelation falls inside ±2/√n (1 for i.i.d. data)."""
    n = len(x)
    if n < 8:
        return 1
    r = _ranks(x)
    r = r - r.mean()
    if not np.any(r):
        return 1
    size = 1 << int(math.ceil(math.log2(2 * n)))
    f = np.fft.rfft(r, size)
    acf = np.fft.irfft(f * np.conj(f), size)[: n // 4 + 1]
    acf = acf / acf[0]
    band = 2.0 / math.sqrt(n)
    below = np.flatnonzero(acf[1:] < band)
    return int(below[0] + 1) if len(below) else max(n // 4, 1)


@dataclasses.dataclass(frozen=True)
class BlockChoice:
    length: int
    lag: int              # largest decorrelation lag seen
    capped: bool          # the dependence is longer than the captures allow

    def describe(self) -> str:
        s = f"blocks of {self.length} consecutive values"
        if self.capped:
            s += (f" (capped: values stay correlated for ~{self.lag} steps, longer than the capture "
                  "allows; p-values and intervals are optimistic)")
        return s


def block_length(series: list[np.ndarray], fixed: int | None = None) -> BlockChoice:
    """One block length for all captures of both sides of one metric."""
    sizes = [len(x) for x in series if len(x)]
    if not sizes:
        return BlockChoice(1, 1, False)
    n_min = min(sizes)
    cap = max(n_min // MIN_BLOCKS, 1)
    if fixed is not None:
        return BlockChoice(max(1, min(int(fixed), max(n_min, 1))), 0, False)
    lag = max(decorrelation_lag(x) for x in series if len(x))
    want = max(int(math.ceil(max(sizes) ** (1 / 3))), 2 * lag if lag > 1 else 1)
    return BlockChoice(max(1, min(want, cap)), lag, want > cap and lag > 1 and 2 * lag > cap)


def block_summaries(series: list[np.ndarray], L: int, what: str) -> np.ndarray:
    """Non-overlapping blocks of ``L`` values per capture (partial tail dropped), summarized.

    ``what``: 'median', 'spread' (IQR / 1.349) or 'mean'.
    """
    out = []
    for x in series:
        nb = len(x) // L
        if nb == 0:
            continue
        b = np.asarray(x[: nb * L], float).reshape(nb, L)
        if what == "median":
            out.append(np.median(b, axis=1))
        elif what == "mean":
            out.append(b.mean(axis=1))
        elif what == "spread":
            q = np.percentile(b, [25, 75], axis=1)
            out.append((q[1] - q[0]) * ROBUST_SIGMA_PER_IQR)
        else:
            raise ValueError(what)
    return np.concatenate(out) if out else np.empty(0)


# --------------------------------------------------------------- bootstrap
def row_stats(v: np.ndarray, count: np.ndarray, quantiles=(0.25, 0.5, 0.75, 0.99)) -> dict:
    """Statistics of each row of ``v`` whose first ``count[i]`` sorted values are real
    (the rest is +inf padding). Quantiles interpolate linearly like numpy's default.
    ``v`` is sorted in place (the caller's array: no copy of B x n values)."""
    v.sort(axis=1)
    out = {}
    rows = np.arange(v.shape[0])
    for q in quantiles:
        h = q * (count - 1)
        lo = np.floor(h).astype(np.int64)
        hi = np.minimum(lo + 1, count - 1)
        frac = h - lo
        a, b = v[rows, lo], v[rows, hi]
        out[q] = a + frac * (b - a)
    # sorted rows hold their infinities (the padding) at their ends: none there, none at all
    padded = np.isinf(v[:, 0]).any() or np.isinf(v[:, -1]).any()
    finite = np.where(np.isinf(v), 0.0, v) if padded else v
    mean = finite.sum(axis=1) / count
    var = np.maximum((finite ** 2).sum(axis=1) / count - mean ** 2, 0.0)
    out["mean"] = mean
    out["std"] = np.sqrt(var)
    return out


def point_stats(x: np.ndarray) -> dict:
    """The same statistics as ``row_stats`` for one pooled sample."""
    x = np.asarray(x, float)
    if len(x) == 0:
        return {"n": 0, "p50": None, "mean": None, "p99": None, "std": None, "spread": None,
                "p25": None, "p75": None}
    p25, p50, p75, p99 = np.percentile(x, [25, 50, 75, 99])
    return {"n": int(len(x)), "p50": float(p50), "mean": float(x.mean()), "p99": float(p99),
            "std": float(x.std()), "spread": float(p75 - p25) * ROBUST_SIGMA_PER_IQR,
            "p25": float(p25), "p75": float(p75)}


class Bootstrap:
    """Two-stage circular block bootstrap of one side (one or more captures)."""

    def __init__(self, series: list[np.ndarray], L: int, rng: np.random.Generator):
        self.series = [np.asarray(x, float) for x in series if len(x)]
        self.L = max(int(L), 1)
        self.rng = rng
        self.sizes = np.array([len(x) for x in self.series], np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)[:-1]]).astype(np.int64)
        self.pool = np.concatenate(self.series) if self.series else np.empty(0)
        # each capture followed by its first L - 1 values again (repeated if it is shorter): a
        # block starting anywhere in a capture is one contiguous slice of this, so the resamples
        # are gathered as whole blocks (rows of a sliding window) instead of index by index
        ext = [np.resize(x, len(x) + self.L - 1) for x in self.series]
        self.ext_offsets = np.concatenate([[0], np.cumsum([len(e) for e in ext])[:-1]]).astype(np.int64)
        self.windows = (np.lib.stride_tricks.sliding_window_view(np.concatenate(ext), self.L) if ext
                        else np.empty((0, self.L)))

    @property
    def m(self) -> int:
        return len(self.series)

    def _draw_captures(self, B: int) -> np.ndarray:
        if self.m == 1:
            return np.zeros((B, 1), np.int64)
        return self.rng.integers(0, self.m, size=(B, self.m))

    def _values(self, caps: np.ndarray, width: int) -> np.ndarray:
        """Values (B, width) of one slot's circular block resample of capture ``caps[i]`` per row;
        columns beyond a row's capture length are +inf (padding). The draws are those of the
        index-by-index form (block starts uniform in the capture, one ``rng.random`` call), so a
        seed gives the same resamples."""
        B = len(caps)
        L = self.L
        nblk = -(-width // L)
        n = self.sizes[caps]                                             # (B,)
        starts = np.floor(self.rng.random((B, nblk)) * n[:, None]).astype(np.int64)
        v = self.windows[self.ext_offsets[caps][:, None] + starts].reshape(B, nblk * L)[:, :width]
        short = n < width
        if short.any():
            v = np.ascontiguousarray(v)
            v[np.arange(width)[None, :] >= n[:, None]] = np.inf
        return v

    def replicate_stats(self, B: int, quantiles=(0.25, 0.5, 0.75, 0.99)) -> dict:
        """Statistics of ``B`` resamples (dict of arrays of length B, see ``row_stats``)."""
        width = int(self.sizes.max())
        total_w = width * self.m
        per_chunk = max(1, CHUNK_ELEMENTS // max(total_w, 1))
        parts = []
        done = 0
        while done < B:
            b = min(per_chunk, B - done)
            caps = self._draw_captures(b)
            v = np.concatenate([self._values(caps[:, s], width) for s in range(self.m)], axis=1)
            count = np.minimum(self.sizes[caps], width).sum(axis=1)
            parts.append(row_stats(v, count, quantiles))
            done += b
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}

    def replicate_means(self, B: int, columns: np.ndarray | None = None) -> np.ndarray:
        """Means of ``B`` resamples of the rows of ``columns`` (pool-aligned, shape (N, C)), via
        circular block sums: shape (B, C). Without ``columns``: the values themselves, (B, 1)."""
        data = self.pool[:, None] if columns is None else np.asarray(columns, float)
        L = self.L
        C = data.shape[1]
        # circular block sums per capture: S[i] = sum of rows i .. i+L-1 (wrapping), pool-aligned
        S = np.empty_like(data)
        for off, n in zip(self.offsets.tolist(), self.sizes.tolist()):
            x = data[off:off + n]
            reps = -(-L // n) + 1
            ext = np.concatenate([x] * reps, axis=0)[: n + L]
            cs = np.concatenate([np.zeros((1, C)), np.cumsum(ext, axis=0)])
            S[off:off + n] = cs[L:L + n] - cs[:n]
        sums = np.zeros((B, C))
        counts = np.zeros(B)
        caps = self._draw_captures(B)
        for s in range(self.m):
            c_all = caps[:, s]
            nblk_all = -(-self.sizes[c_all] // L)                    # blocks needed per row
            per_chunk = max(1, CHUNK_ELEMENTS // max(int(nblk_all.max()) * C, 1))
            for b0 in range(0, B, per_chunk):
                sl = slice(b0, min(b0 + per_chunk, B))
                c, nblk = c_all[sl], nblk_all[sl]
                n = self.sizes[c]
                kmax = int(nblk.max())
                starts = np.floor(self.rng.random((len(c), kmax)) * n[:, None]).astype(np.int64)
                use = (np.arange(kmax)[None, :] < nblk[:, None]).astype(float)
                idx = self.offsets[c][:, None] + starts
                sums[sl] += np.einsum("bk,bkc->bc", use, S[idx])
                counts[sl] += nblk * L
        return sums / counts[:, None]


def adaptive_replicates(B: int, width: int) -> int:
    """Fewer replicates for very long series, so one statistic costs at most WORK_BUDGET values."""
    if width <= 0:
        return B
    return int(max(min(B, WORK_BUDGET // width), min(B, 200)))


def percentile_ci(reps: np.ndarray, level: float) -> tuple[float, float]:
    reps = np.asarray(reps, float)
    reps = reps[np.isfinite(reps)]
    if len(reps) == 0:
        return (math.nan, math.nan)
    a = (1 - level) / 2
    lo, hi = np.percentile(reps, [100 * a, 100 * (1 - a)])
    return float(lo), float(hi)
