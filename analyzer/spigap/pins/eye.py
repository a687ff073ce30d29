"""Eye diagrams: a data line's volts folded on its receiver's sampling edges.

Every sampling edge's neighbourhood (one SCLK period either side) is added to a
2-D histogram of (time from the sampling edge, volts). Memory is the histogram
(one per receiver of the line: a shared bus's devices each have theirs) and a
ring of the line's latest samples (``RING`` of them, one per line); cost is bounded by
folding every sampling edge up to ``FULL``, then every second, fourth ... so
that about ``FULL`` more are folded per doubling of the capture (the picture is
a density: the thinning does not change its shape for a stationary bus). A
sampling edge whose neighbourhood has already left the ring (a line that ran far
ahead of the clock because it did not change) is counted, not folded.
"""

from __future__ import annotations

import numpy as np

RING = 1 << 21          # samples of the line kept for folding
FULL = 1 << 13          # sampling edges folded before thinning starts
XBINS, YBINS = 200, 120


class Ring:
    """A data line's latest ``RING`` samples, which its eyes fold (one ring per line: on a
    shared bus every device's eye of the line folds the same samples)."""

    def __init__(self) -> None:
        self.v = np.empty(0, np.float32)
        self.t0 = 0                                  # tick of v[0]

    def feed(self, t0: int, v: np.ndarray) -> None:
        v = np.asarray(v, np.float32)
        if self.t0 + len(self.v) != t0:              # a jump in the ticks: start afresh
            self.v, self.t0 = v[-RING:].copy(), t0 + max(len(v) - RING, 0)
            return
        ring = np.concatenate([self.v, v]) if len(self.v) else v
        drop = max(len(ring) - RING, 0)
        self.v = ring[drop:].copy() if drop else ring
        self.t0 += drop


class EyeFold:
    """One receiver's eye of a line: the line's ring folded on that receiver's sampling edges
    (a shared bus: each device's, at its own period)."""

    def __init__(self, name: str, base: float, top: float, ring: Ring):
        self.name = name
        amp = top - base
        self.ylim = (base - 0.35 * amp, top + 0.35 * amp)
        self.w = 0.0                                 # one period either side, ticks (set by the first fold)
        self.hist = np.zeros((XBINS, YBINS), np.int64)
        self.edges_seen = 0
        self.folded = 0
        self.missed = 0
        self.ring = ring
        self._step = 1

    def fold(self, mids: np.ndarray, half_period: float) -> None:
        if not self.w:
            self.w = 2.0 * half_period
        mids = np.asarray(mids, np.float64)
        n0 = self.edges_seen
        self.edges_seen += len(mids)
        idx = np.arange(n0, n0 + len(mids))
        take = (idx < FULL) | (idx % self._step == 0)
        while self.edges_seen > FULL * self._step * 2:
            self._step *= 2
        mids = mids[take]
        if not len(mids):
            return
        lo = np.ceil(mids - self.w).astype(np.int64)
        n = int(np.ceil(2 * self.w)) + 1
        ring, ring_t0 = self.ring.v, self.ring.t0
        inside = (lo >= ring_t0) & (lo + n <= ring_t0 + len(ring))
        self.missed += int(np.count_nonzero(~inside))
        mids, lo = mids[inside], lo[inside]
        if not len(mids):
            return
        for a in range(0, len(mids), 512):           # bounded temporaries
            m, l0 = mids[a:a + 512], lo[a:a + 512]
            ticks = l0[:, None] + np.arange(n)[None, :]
            x = (ticks - m[:, None]).ravel()
            y = ring[(ticks - ring_t0).ravel()]
            h, _, _ = np.histogram2d(x, y, bins=(XBINS, YBINS), range=((-self.w, self.w), self.ylim))
            self.hist += h.astype(np.int64)
        self.folded += len(mids)

    def to_dict(self, tick_s: float) -> dict:
        return {"line": self.name, "x_range_s": [-self.w * tick_s, self.w * tick_s], "v_range": list(self.ylim),
                "bins": [XBINS, YBINS], "edges": self.edges_seen, "folded": self.folded, "missed": self.missed}
