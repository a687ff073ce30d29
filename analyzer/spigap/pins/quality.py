"""Edge quality of one analog line: rise/fall time, overshoot, settling (ringing).

Relative to the line's own state levels (base, top; amplitude A = top - base,
levels.state_levels):

* rise / fall time: from the last crossing out of 10 % (90 %) to the first
  crossing into 90 % (10 %), interpolated like every crossing (crossings.py);
* overshoot: how far the line goes beyond the new level after an edge, in % of
  A (the largest excursion from the edge reaching 90 % (10 %) to the next edge
  reaching 10 % (90 %); undershoot for a falling edge): ringing that dips back
  across 50 % stays part of its edge;
* settling time (ringing): from the 50 % crossing to the start of the last run
  of samples within +/- ``band`` x A of the new level before the line heads for
  the next edge; an edge that never gets into the band before the next one is
  *unsettled*. Whole samples: +/- 1 sample. The overshoot is the highest
  sample's less the noise's expected maximum over the segment (_close).

Streamed: each chunk of volts is split where each edge reaches its new level
and reduced segment by segment; the open segment carries over to the next chunk.
"""

from __future__ import annotations

import numpy as np

from spigap.pins.crossings import AnalogLine, EventStore, flips
from spigap.pins.stats import Events, Figure

SETTLE_BAND = 0.05      # settling band: +/- this share of the amplitude


class EdgeShape:
    def __init__(self, name: str, base: float, top: float, noise: float, *, band: float = SETTLE_BAND):
        self.name = name
        self.base, self.top = float(base), float(top)
        self.amp = self.top - self.base
        self.band = band * self.amp
        self.noise = float(noise)
        self.store = EventStore(digital=False)
        self.line = AnalogLine((self.base + 0.1 * self.amp, self.base + 0.5 * self.amp,
                                self.base + 0.9 * self.amp), noise, self.store)
        self.rise = Figure(f"{name}.rise", quantum=1 / 64)
        self.fall = Figure(f"{name}.fall", quantum=1 / 64)
        self.overshoot = Figure(f"{name}.overshoot", quantum=1e-4, unit="%")
        self.settle = Figure(f"{name}.settle", quantum=1.0)
        self.unsettled = Events(f"{name}.unsettled")
        self._seg_end = -np.inf           # the last edge a segment was started for
        # the open segment (since the last 50 % crossing)
        self._seg_t: float | None = None
        self._seg_up = True
        self._seg_peak = np.nan
        self._seg_run = np.nan            # tick where the current run of in-band samples started
        self._seg_len = 0                 # samples in the open segment so far
        self._prev_in = False

    def feed(self, t0: int, v: np.ndarray) -> None:
        v = np.asarray(v, np.float64)
        if not len(v):
            return
        self.line.feed(t0, v)
        f = flips(self.store)
        new = f.end > self._seg_end
        f = f.take(new)
        if len(f):
            self._seg_end = float(f.end[-1])
        self._segments(t0, v, f.end, f.mid, f.rising)
        self._edges(f)
        self.store.trim(self.store.frontier - 4 * len(v))

    def _segments(self, t0: int, v: np.ndarray, ends_t: np.ndarray, mt: np.ndarray, mup: np.ndarray) -> None:
        """Split the chunk where each new edge reaches its new level (90 % or 10 %: ``ends_t``)
        and reduce each segment: its peak, and where its last run of samples in the settling
        band started; the segment's edge crossed 50 % at ``mt``."""
        n = len(v)
        cut = np.clip(np.ceil(ends_t - t0).astype(np.int64), 0, n)   # first sample of each new segment
        bounds = np.concatenate([[0], cut])
        ends = np.concatenate([cut, [n]])
        ups = np.concatenate([[self._seg_up], mup])
        mids = np.concatenate([[np.nan if self._seg_t is None else self._seg_t], mt])
        tgt = np.repeat(np.where(ups, self.top, self.base), ends - bounds)     # each sample's new level
        inside = np.abs(v - tgt) <= self.band
        prev_in = np.concatenate([[self._prev_in], inside[:-1]])
        first = np.zeros(n, bool)
        first[cut[cut < n]] = True                                 # a new segment starts a new run
        rs = np.where(inside & (~prev_in | first), np.arange(n), -1)
        has = bounds < ends
        nseg = len(bounds)
        peak = np.full(nseg, np.nan)
        last_run = np.full(nseg, -1, np.int64)
        if has.any():
            b = bounds[has]
            peak[has] = np.where(ups[has], np.maximum.reduceat(v, b), np.minimum.reduceat(v, b))
            last_run[has] = np.maximum.reduceat(rs, b)
        lens = ends - bounds
        pk = peak.copy()
        run = np.where(last_run >= 0, t0 + last_run.astype(float), np.nan)
        m = lens.copy()
        # the first segment continues the carried one
        m[0] += self._seg_len
        if not has[0]:
            pk[0] = self._seg_peak
        elif not np.isnan(self._seg_peak):
            pk[0] = max(pk[0], self._seg_peak) if ups[0] else min(pk[0], self._seg_peak)
        if last_run[0] < 0:                    # no run began in this part: the one before (if any)
            run[0] = self._seg_run
        if nseg > 1:                           # every segment but the last is complete
            self._close(mids[:-1], ups[:-1], pk[:-1], run[:-1], m[:-1])
        self._seg_t = None if np.isnan(mids[-1]) else float(mids[-1])
        self._seg_up, self._seg_peak, self._seg_run, self._seg_len = bool(ups[-1]), pk[-1], run[-1], int(m[-1])
        self._prev_in = bool(inside[-1])

    def _close(self, t_mid, up, peak, run, m) -> None:
        """Edges' segments are complete (arrays): their overshoot, and their settling time (the
        start of the last run in the band, the line leaving it only for the next edge), or
        unsettled (never in the band).

        The highest of m noisy samples lies about noise x sqrt(2 ln m) above the true peak
        (the expected maximum of m Gaussian samples): that much is taken off the overshoot,
        and is its stated uncertainty."""
        t_mid, up, peak, run = (np.atleast_1d(np.asarray(x, float)) for x in (t_mid, up, peak, run))
        m = np.atleast_1d(np.asarray(m, float))
        ok = ~np.isnan(t_mid)
        t_mid, up, peak, run, m = t_mid[ok], up[ok].astype(bool), peak[ok], run[ok], m[ok]
        has = ~np.isnan(peak)
        over = np.where(up, peak - self.top, self.base - peak)
        bias = self.noise * np.sqrt(2 * np.log(np.maximum(m, 2)))
        self.overshoot.add((np.maximum(over - bias, 0.0) / self.amp * 100.0)[has], t_mid[has],
                           (bias / self.amp * 100.0)[has])
        settled = ~np.isnan(run) & (run >= t_mid)
        self.settle.add((run - t_mid)[settled], t_mid[settled], np.ones(int(settled.sum())))
        self.unsettled.add(t_mid[~settled])

    def _edges(self, f) -> None:
        if not len(f):
            return
        d = f.end - f.start
        u = np.sqrt(f.u_start.astype(float) ** 2 + f.u_end.astype(float) ** 2)
        u = np.where(d < 2.0, np.maximum(u, 2.0), u)       # under two samples: below the resolution
        self.rise.add(d[f.rising], f.mid[f.rising], u[f.rising])
        self.fall.add(d[~f.rising], f.mid[~f.rising], u[~f.rising])

    def finish(self) -> None:
        """The capture ended: the open segment's edge is judged on what was seen."""
        if self._seg_t is not None:
            self._close(self._seg_t, self._seg_up, self._seg_peak, self._seg_run, self._seg_len)
            self._seg_t = None
