"""Pairing the lines' events into timing at the pins, sampling edge by sampling edge.

The lines' events (crossings.py) arrive channel by channel and out of step; a
sampling edge is measured once every line is known to ``horizon`` beyond it
(two SCLK periods), so what is kept is bounded by that look-ahead.

For each SCLK edge inside a CS window (docs/pin-timing.md has the pictures):

* sampling edges are the leading edges in modes 0 and 2 (CPHA 0), the
  trailing ones in modes 1 and 3; the edge before a sampling edge launched its
  bit (for CPHA 0 the first bit is launched by CS itself);
* the *intended* bit of a sampling edge is the data line's state after the
  last change that began before the next launching edge less a quarter
  period: a change that begins later belongs to the next bit. Its data-valid
  window is the valid interval of that state nearest the sampling edge;
* setup = (the clock leaves its old valid level: the receiver may switch from
  here) - (the data enters its valid level); hold = (the data leaves it) -
  (the clock reaches its new valid level: the receiver has switched by then).
  Both are measured at the receiver's VIL/VIH: the device's for MOSI, the
  controller's for MISO. A bit that arrives after the sampling edge has a
  negative setup, one that leaves before it a negative hold;
* clock-to-output (tDO for MISO, the controller's for MOSI): the launching
  edge's middle-level crossing to the data's entry into its valid level, for
  bits that changed; MISO's output hold: from the same crossing to the old bit
  leaving its valid level;
* SCLK high and low time and period between middle-level crossings inside CS
  windows (phases longer than 3/4 of a period are gaps between words, not
  half periods);
* CS to the first edge (CS valid active -> the clock leaves its idle level)
  and last edge to CS (the clock valid -> CS leaves its active level);
* runts, ringback and non-monotonic edges of every line (for SCLK: double
  clocking risks).

Values are kept in ticks (the capture's sample interval) with the time of the
sampling edge; the figures say whether they are interpolated (a scope's volts)
or whole samples (a logic analyzer's edges, +/- 1 sample).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from spigap.pins.crossings import HIGH, LOW, EventStore, Flips, excursions, flips, valid_intervals
from spigap.pins.stats import Events, Figure

MIN_FLIPS_FOR_PERIOD = 16
GAP_FRACTION = 0.75          # a clock phase longer than this share of a period is a gap, not a half period
FIGURES = ("mosi_setup", "mosi_hold", "mosi_tco", "miso_setup", "miso_hold", "miso_tdo", "miso_toh", "miso_cs_valid",
           "sclk_high", "sclk_low", "sclk_period", "cs_to_first", "last_to_cs")


@dataclasses.dataclass
class Lines:
    """Which stores the measurement reads: the clock at the device's and at the
    controller's levels, CS and MOSI at the device's, MISO at the controller's."""

    clk_dev: EventStore
    clk_ctl: EventStore
    cs: EventStore | None = None
    mosi: EventStore | None = None
    miso: EventStore | None = None

    def all(self) -> list[EventStore]:
        seen: list[EventStore] = []
        for s in (self.clk_dev, self.clk_ctl, self.cs, self.mosi, self.miso):
            if s is not None and all(s is not x for x in seen):
                seen.append(s)
        return seen


class PinMeasurer:
    def __init__(self, lines: Lines, *, cpol: int, cpha: int, cs_active_low: bool, names: dict[str, str],
                 digital: bool, on_sampling=None, record: bool = False, rx_delay: float = 0.0):
        self.lines = lines
        self.cpol, self.cpha = cpol, cpha
        self.sample_rising = cpol == cpha
        self.cs_active = LOW if cs_active_low else HIGH
        self.names = names                     # role -> channel name
        self.digital = digital
        self.on_sampling = on_sampling         # (role, sampling-edge mids) for the eye diagrams
        self.rx_delay = rx_delay               # ticks the controller samples MISO after its clock edge
        q = 1.0 if digital else 1 / 64
        self.figures = {n: Figure(n, quantum=q, record=record) for n in FIGURES}
        self.events: dict[str, Events] = {}
        self.half: float | None = None         # half the SCLK period, ticks (estimated from the clock)
        self.lo = -np.inf                      # measured up to here (mid-crossing times of SCLK flips)
        self.sampling_edges = 0
        self.windows = 0

    @property
    def horizon(self) -> float:
        return 4.0 * self.half if self.half else math.inf

    def event(self, name: str) -> Events:
        if name not in self.events:
            self.events[name] = Events(name)
        return self.events[name]

    # ------------------------------------------------------------------ driving
    def advance(self, final: bool = False) -> float | None:
        """Measure everything that every line is now known far enough beyond. Returns the tick
        before which nothing is needed any more (None: nothing measured yet): pins/tap.py cuts
        the lines' stores there (the devices of a bus read the same stores: once, at the
        earliest of their cuts)."""
        if self.half is None:
            self._estimate_period(final)
            if self.half is None:
                return None
        frontier = min(s.frontier for s in self.lines.all())
        hi = math.inf if final else frontier - self.horizon
        if not hi > self.lo:
            return None if final else self.lo - self.horizon
        self._region(self.lo, hi, math.inf if final else frontier)
        self.lo = hi
        if final:
            return None
        return hi - self.horizon

    def _estimate_period(self, final: bool) -> None:
        f = flips(self.lines.clk_dev)
        if len(f) < MIN_FLIPS_FOR_PERIOD and not (final and len(f) >= 3):
            return
        d = np.diff(f.mid)
        d = d[d > 0]
        if len(d):
            self.half = float(np.percentile(d, 25))       # words' half periods outnumber the gaps

    # ------------------------------------------------------------------ one region
    def _region(self, lo: float, hi: float, frontier: float) -> None:
        half = self.half
        assert half is not None
        T = 2 * half
        windows = self._windows()
        for role, clk, data in (("mosi", self.lines.clk_dev, self.lines.mosi),
                                ("miso", self.lines.clk_ctl, self.lines.miso)):
            cf = flips(clk)
            sel, w = self._in_windows(cf, windows, lo, hi)
            if role == "mosi":
                self._clock_figures(cf, sel, w, lo, hi, T)
                self._cs_figures(cf, windows, lo, hi)
            if data is None:
                continue
            self._data_figures(role, cf, sel, w, windows, data, frontier, T)
        for role, store in (("sclk", self.lines.clk_dev), ("cs", self.lines.cs), ("mosi", self.lines.mosi),
                            ("miso", self.lines.miso)):
            if store is not None:
                self._line_events(role, store, lo, hi)

    def _windows(self):
        """CS windows (assert flip, deassert flip) as arrays of middle-crossing times, with
        the assert's and deassert's valid times: (a_mid, a_end, a_u, d_mid, d_start, d_u)."""
        cs = self.lines.cs
        if cs is None:
            inf = np.array([np.inf])
            return (np.array([-np.inf]), np.array([-np.inf]), np.zeros(1), inf, inf, np.zeros(1))
        f = flips(cs)
        to_active = ~f.rising if self.cs_active == LOW else f.rising
        a = np.flatnonzero(to_active)
        d = np.flatnonzero(~to_active)
        a_mid, a_end, a_u = f.mid[a], f.end[a], f.u_end[a]
        # CS already active before the first retained assert
        init_active = cs.initial == self.cs_active
        if init_active and (not len(d) or (len(a) and d[0] < a[0]) or not len(a)):
            a_mid = np.concatenate([[-np.inf], a_mid])
            a_end = np.concatenate([[-np.inf], a_end])
            a_u = np.concatenate([[0.0], a_u])
        # each assert's deassert: the first deassert after it
        k = np.searchsorted(f.mid[d], a_mid, side="right")
        has = k < len(d)
        dk = d[np.minimum(k, max(len(d) - 1, 0))] if len(d) else np.zeros(len(a_mid), np.int64)
        d_mid = np.where(has, f.mid[dk] if len(d) else np.inf, np.inf)
        d_start = np.where(has, f.start[dk] if len(d) else np.inf, np.inf)
        d_u = np.where(has, f.u_start[dk] if len(d) else 0.0, 0.0)
        return a_mid, a_end, a_u.astype(float), d_mid, d_start, d_u.astype(float)

    def _in_windows(self, cf: Flips, windows, lo: float, hi: float):
        """Indices of the clock flips with their middle crossing in [lo, hi) inside a CS
        window, and each one's window index."""
        win = self._window_of(cf, windows)
        idx = np.flatnonzero((cf.mid >= lo) & (cf.mid < hi) & (win >= 0))
        return idx, win[idx]

    def _window_of(self, cf: Flips, windows) -> np.ndarray:
        a_mid, _, _, d_mid, _, _ = windows
        w = np.searchsorted(a_mid, cf.mid, side="right") - 1
        ok = (w >= 0) & (cf.mid < d_mid[np.maximum(w, 0)])
        return np.where(ok, w, -1)

    def _unc(self, *u) -> np.ndarray:
        if self.digital:
            return np.ones(np.broadcast(*u).shape)
        return np.sqrt(sum(np.asarray(x, float) ** 2 for x in u))

    # ------------------------------------------------------------------ data lines
    def _data_figures(self, role: str, cf: Flips, sel, w, windows, data: EventStore, frontier: float,
                      T: float) -> None:
        half = T / 2
        rising = cf.rising[sel]
        samp = sel[rising == self.sample_rising]
        if not len(samp):
            return
        win_all = self._window_of(cf, windows)
        ws = win_all[samp]
        a_mid = windows[0]
        # the launching edge before each sampling edge (the previous flip in the window), or CS
        prev = samp - 1
        prev_ok = (prev >= 0) & (win_all[np.maximum(prev, 0)] == ws)
        l_mid = np.where(prev_ok, cf.mid[np.maximum(prev, 0)], a_mid[ws])
        l_u = np.where(prev_ok, cf.u_mid[np.maximum(prev, 0)], 0.0)
        by_cs = ~prev_ok
        nxt = samp + 1
        next_ok = (nxt < len(cf)) & (win_all[np.minimum(nxt, len(cf) - 1)] == ws)
        s_mid = cf.mid[samp]
        bound = np.where(next_ok, cf.mid[np.minimum(nxt, len(cf) - 1)] - half / 2, s_mid + half / 2)
        low_bound = np.where(np.isfinite(l_mid), l_mid - half / 2, s_mid - 3 * half / 2)
        df = flips(data)
        if not len(df):                 # a line that never changed: one NaN change, never selected (k < 0)
            df = Flips(*(np.full(1, np.nan) if f.name != "rising" else np.zeros(1, bool)
                         for f in dataclasses.fields(Flips)))
        iv = valid_intervals(data)
        # the intended state: after the last change that began before the bound
        k = np.searchsorted(df.start, bound, side="left") - 1
        changed = (k >= 0) & (df.start[np.maximum(k, 0)] >= low_bound)
        zone = np.where(k >= 0, np.where(df.rising[np.maximum(k, 0)], HIGH, LOW), -1)
        no_flip = k < 0
        if no_flip.any():               # no change retained before: the state the intervals give
            j = np.searchsorted(iv.start, bound[no_flip], side="right") - 1
            zone[no_flip] = np.where(j >= 0, iv.zone[np.maximum(j, 0)], -1)
        # the valid interval of that state nearest the sampling edge
        i0 = np.searchsorted(iv.start, s_mid, side="right") - 1
        best = np.full(len(samp), -1, np.int64)
        best_d = np.full(len(samp), np.inf)
        for off in (0, 1, -1):
            c = i0 + off
            ok = (c >= 0) & (c < len(iv.start))
            cc = np.clip(c, 0, max(len(iv.start) - 1, 0))
            if not len(iv.start):
                break
            ok &= iv.zone[cc] == zone
            dist = np.maximum(np.maximum(iv.start[cc] - s_mid, s_mid - iv.end[cc]), 0.0)
            better = ok & (dist < best_d)
            best = np.where(better, cc, best)
            best_d = np.where(better, dist, best_d)
        good = best >= 0
        if not good.all():
            samp, s_mid, l_mid, l_u, by_cs, changed, best, k = (
                x[good] for x in (samp, s_mid, l_mid, l_u, by_cs, changed, best, k))
        if not len(samp):
            return
        horizon = self.horizon
        i_start, i_end = iv.start[best], iv.end[best]
        d = self.rx_delay if role == "miso" else 0.0      # rx-sample-delay-ns: the controller samples later
        setup = cf.start[samp] + d - i_start
        clip_s = ~np.isfinite(i_start) | (setup > horizon)
        setup = np.where(clip_s, horizon, setup)
        end = np.minimum(i_end, frontier)
        hold = end - (cf.end[samp] + d)
        clip_h = (i_end > frontier) | (hold > horizon)
        hold = np.where(clip_h, horizon, hold)
        if self.digital:                # a change on the clock's own sample: both 0 (the decoder's rule)
            setup, hold = _setuphold().same_sample(setup, hold)
        u_s = self._unc(cf.u_start[samp], np.where(np.isfinite(i_start), iv.u_start[best], 0.0))
        u_h = self._unc(cf.u_end[samp], np.where(np.isfinite(i_end), iv.u_end[best], 0.0))
        f = self.figures
        f[f"{role}_setup"].add(setup, s_mid, u_s, clip_s)
        f[f"{role}_hold"].add(hold, s_mid, u_h, clip_h)
        # clock to output: bits that changed, from the launching edge to the new state's valid start
        after = changed & np.isfinite(i_start) & (i_start >= df.start[np.maximum(k, 0)])
        tco = i_start - l_mid
        u_t = self._unc(l_u, iv.u_start[best])
        name = "miso_tdo" if role == "miso" else "mosi_tco"
        sel_t = after & ~by_cs
        f[name].add(tco[sel_t], l_mid[sel_t], u_t[sel_t])
        if role == "miso":
            sel_c = after & by_cs & np.isfinite(l_mid)
            f["miso_cs_valid"].add(tco[sel_c], l_mid[sel_c], u_t[sel_c])
            # output hold: the launching edge to the old bit leaving its valid level
            kk = np.maximum(k, 0)
            toh = df.start[kk] - l_mid
            f["miso_toh"].add(toh[sel_t], l_mid[sel_t], self._unc(l_u, df.u_start[kk])[sel_t])
        if self.on_sampling is not None:
            self.on_sampling(role, s_mid + d)

    # ------------------------------------------------------------------ the clock
    def _clock_figures(self, cf: Flips, sel, w, lo, hi, T: float) -> None:
        self.sampling_edges += int(np.count_nonzero(cf.rising[sel] == self.sample_rising))
        if len(sel) < 2:
            return
        k = sel[:-1]
        same = (w[1:] == w[:-1]) & (sel[1:] == sel[:-1] + 1)
        k = k[same]
        phase = cf.mid[k + 1] - cf.mid[k]
        ok = phase <= GAP_FRACTION * T
        u = self._unc(cf.u_mid[k], cf.u_mid[k + 1])
        hi_ph = cf.rising[k] & ok
        lo_ph = ~cf.rising[k] & ok
        self.figures["sclk_high"].add(phase[hi_ph], cf.mid[k][hi_ph], u[hi_ph])
        self.figures["sclk_low"].add(phase[lo_ph], cf.mid[k][lo_ph], u[lo_ph])
        # a period: two consecutive good phases
        pos = np.flatnonzero(ok)
        two = pos[:-1][(pos[1:] == pos[:-1] + 1) & (k[pos[1:]] == k[pos[:-1]] + 1)]
        if len(two):
            kk = k[two]
            per = cf.mid[kk + 2] - cf.mid[kk]
            self.figures["sclk_period"].add(per, cf.mid[kk], self._unc(cf.u_mid[kk], cf.u_mid[kk + 2]))

    def _cs_figures(self, cf: Flips, windows, lo: float, hi: float) -> None:
        if self.lines.cs is None:
            return
        a_mid, a_end, a_u, d_mid, d_start, d_u = windows
        win = self._window_of(cf, windows)
        first = (win >= 0) & np.concatenate([[True], win[1:] != win[:-1]])
        first &= (cf.mid >= lo) & (cf.mid < hi) & np.isfinite(a_end[np.maximum(win, 0)])
        i = np.flatnonzero(first)
        if len(i):
            wi = win[i]
            self.figures["cs_to_first"].add(cf.start[i] - a_end[wi], cf.mid[i], self._unc(cf.u_start[i], a_u[wi]))
        # deasserts in the region: the last clock flip of their window
        dsel = np.flatnonzero((d_mid >= lo) & (d_mid < hi) & np.isfinite(d_mid))
        if len(dsel) and len(cf):
            last = np.searchsorted(cf.mid, d_mid[dsel], side="left") - 1
            ok = (last >= 0) & (cf.mid[np.maximum(last, 0)] > a_mid[dsel])
            last, dd = last[ok], dsel[ok]
            self.figures["last_to_cs"].add(d_start[dd] - cf.end[last], d_mid[dd],
                                           self._unc(d_u[dd], cf.u_end[last]))
        self.windows += int(np.count_nonzero((a_mid >= lo) & (a_mid < hi)))

    # ------------------------------------------------------------------ every line
    def _line_events(self, role: str, store: EventStore, lo: float, hi: float) -> None:
        if self.digital:
            return
        t, runt, _ = excursions(store)
        sel = (t >= lo) & (t < hi)
        self.event(f"{role}.runt").add(t[sel & runt])
        self.event(f"{role}.ringback").add(t[sel & ~runt])
        f = flips(store)
        nm = (f.mid >= lo) & (f.mid < hi) & (f.n_mid > 1)
        self.event(f"{role}.nonmonotonic").add(f.mid[nm])
        if role == "sclk":
            self.event("sclk.double_clock").add(np.concatenate([f.mid[nm], t[sel & runt]]))


def _setuphold():
    """decoders/spi_pins/setuphold.py: the whole-samples rule the spi_pins decoder shares."""
    from spigap.resources import load_decoder_module

    return load_decoder_module("spi_pins", "setuphold")
