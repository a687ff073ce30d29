"""A line's level crossings: volts or logic edges -> zone-change events.

Three levels split a line's voltage into four zones: 0 (valid low, at or below
VIL), 1 and 2 (the undecided band below and above its middle), 3 (valid high, at
or above VIH). Every crossing of one of the levels is an *event*: its time in
ticks (float), the zone after it and its uncertainty. From the events:

* ``flips``: each change of the valid state (0 -> 3 or 3 -> 0): when the line
  left its old valid zone (``start``, the last crossing out of it), crossed the
  middle (``mid``, the first time) and reached the new one (``end``, the first
  entry); how often it crossed the middle on the way (a non-monotonic edge
  crosses it more than once);
* ``valid_intervals``: the spans during which the line is valid (entry into a
  valid zone to the next crossing out of it), the data-valid windows setup and
  hold are measured in;
* ``excursions``: departures from a valid zone that return to it: a *runt*
  when they crossed the middle, else a ringback into the band.

``AnalogLine`` makes the events from volts: linear interpolation between the two
samples around each crossing (a jump across several levels in one sample gives
one event per level, on the same segment). Its uncertainty, in ticks, is
3 x the noise rms / the voltage step of that sample (a crossing moves by the
noise divided by the slope) plus the linear interpolation's error on a curved
edge (|v''| / 8 for a one-sample segment, |v''| from the second differences
around the crossing, divided by the step). ``LogicLine`` makes them from a
logic analyzer's edges: zones 0 and 3 only, each change at the sample it was
recorded at, which is up to one sample after it happened.

``EventStore`` holds one line's events for one set of levels, bounded: the
measurement trims what it has consumed (``trim``).
"""

from __future__ import annotations

import dataclasses

import numpy as np

LOW, HIGH = 0, 3
MAX_EVENTS = 1 << 20    # events a store keeps without a flip before it gives up the oldest
NOISE_K = 3.0          # the stated noise bound is this many noise rms (99.7 % of a Gaussian)


class EventStore:
    """Zone-change events of one line, in time order (ticks)."""

    def __init__(self, digital: bool):
        self.digital = digital
        self.initial: int | None = None    # zone before the first retained event (None: not seen yet)
        self.frontier = -np.inf            # events are complete up to this tick
        self._t: list[np.ndarray] = []
        self._z: list[np.ndarray] = []
        self._u: list[np.ndarray] = []
        self._cache: tuple | None = None

    def add(self, t: np.ndarray, z: np.ndarray, u: np.ndarray) -> None:
        if len(t):
            self._t.append(np.asarray(t, np.float64))
            self._z.append(np.asarray(z, np.int8))
            self._u.append(np.asarray(u, np.float32))
            self._cache = None

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if self._cache is None:
            if len(self._t) > 1:
                self._t = [np.concatenate(self._t)]
                self._z = [np.concatenate(self._z)]
                self._u = [np.concatenate(self._u)]
            if self._t:
                self._cache = (self._t[0], self._z[0], self._u[0])
            else:
                self._cache = (np.empty(0), np.empty(0, np.int8), np.empty(0, np.float32))
        return self._cache

    def __len__(self) -> int:
        return len(self.arrays()[0])

    def trim(self, cut: float) -> None:
        """Drop the events before ``cut`` that nothing after it needs: everything before the
        start of the last flip that began at or before ``cut`` (that flip, the valid state
        it led to and whatever follows stay readable). A line that never flips but keeps
        crossing into the band (noise on a flat line) is cut at its last valid entry once
        it holds ``MAX_EVENTS``."""
        t, z, u = self.arrays()
        if not len(t):
            return
        f = flips(self)
        k = int(np.searchsorted(f.start_index, np.searchsorted(t, cut, side="right"), side="left")) - 1
        if k >= 0:
            first = int(f.start_index[k])
        elif len(t) > MAX_EVENTS:
            valid = np.flatnonzero(((z == LOW) | (z == HIGH)) & (t <= cut))
            first = int(valid[-1]) if len(valid) else 0
        else:
            return
        if first <= 0:
            return
        self.initial = int(z[first - 1])
        self._t, self._z, self._u = [t[first:]], [z[first:]], [u[first:]]
        self._cache = None


# ------------------------------------------------------------------ making events
class AnalogLine:
    """Volts of one line, chunk after chunk -> events in ``store`` at ``levels`` (three
    increasing volts: VIL, mid, VIH)."""

    def __init__(self, levels: tuple[float, float, float], noise: float, store: EventStore):
        self.thr = np.asarray(levels, np.float64)
        self.noise = float(noise)
        self.store = store
        self._carry = np.empty(0)          # the last two samples before the next chunk
        self._last = np.nan

    def feed(self, t0: int, v: np.ndarray) -> None:
        v = np.asarray(v, np.float64)
        if len(v) == 0:
            return
        if not np.isfinite(v).all():       # no data (NaN, over-range): hold the last value
            v = _hold(v, self._last)
        fin = np.isfinite(v)
        if not fin.any():
            return
        self._last = float(v[fin][-1])
        ext = np.concatenate([self._carry, v])
        c = len(self._carry)
        b0 = t0 - c
        # the zone: how many levels lie below the sample (comparisons: a searchsorted of a million
        # samples into three levels is ten times slower)
        z = (ext > self.thr[0]).view(np.int8) + (ext > self.thr[1]).view(np.int8) + (ext > self.thr[2]).view(np.int8)
        st = self.store
        if st.initial is None:
            st.initial = int(z[np.flatnonzero(np.isfinite(ext))[0]])
        lo = max(c - 1, 0)
        zz = z[lo:]
        p = np.flatnonzero(zz[1:] != zz[:-1]) + lo
        ok = np.isfinite(ext[p]) & np.isfinite(ext[p + 1])
        p = p[ok]
        if len(p):
            zf, zt = z[p].astype(np.int64), z[p + 1].astype(np.int64)
            k = np.abs(zt - zf)
            pp = np.repeat(p, k)
            up = np.repeat(zt > zf, k)
            first = np.repeat(np.where(zt > zf, zf, zf - 1), k)
            step = np.arange(len(pp)) - np.repeat(np.cumsum(k) - k, k)      # 0..k-1 within each change
            level = np.where(up, first + step, first - step)                 # index of the level crossed
            znew = np.where(up, level + 1, level).astype(np.int8)
            va, vb = ext[pp], ext[pp + 1]
            dv = vb - va
            frac = (self.thr[level] - va) / dv
            t = b0 + pp + frac
            adv = np.abs(dv)
            # the linear interpolation's error on a curved edge: |v''| / 8 over the step
            n = len(ext)
            before = ext[np.maximum(pp - 1, 0)]
            after = ext[np.minimum(pp + 2, n - 1)]
            curv = np.abs((after - vb) - (va - before)) / 2.0
            u = (NOISE_K * self.noise + curv / 8.0) / adv
            st.add(t, znew, u)
        self._carry = ext[-2:].copy()
        st.frontier = float(t0 + len(v) - 1)


def _hold(v: np.ndarray, last: float) -> np.ndarray:
    """NaN samples take the value before them (``last`` before the chunk)."""
    v = v.copy()
    bad = ~np.isfinite(v)
    idx = np.where(bad, -1, np.arange(len(v)))
    np.maximum.accumulate(idx, out=idx)
    held = np.where(idx >= 0, v[np.maximum(idx, 0)], last)
    v[bad] = held[bad]
    return v


class LogicLine:
    """A logic analyzer's edges of one line -> events in ``store`` (zones 0 and 3; each
    change at its tick, uncertain by one sample)."""

    def __init__(self, store: EventStore):
        self.store = store
        self._level: int | None = None

    def feed(self, ticks: np.ndarray, levels: np.ndarray, last_tick: int) -> None:
        ticks = np.asarray(ticks, np.int64)
        levels = np.asarray(levels, np.int8)
        st = self.store
        if self._level is None and len(levels):
            self._level = int(levels[0])
            st.initial = HIGH if self._level else LOW
            ticks, levels = ticks[1:], levels[1:]
        if len(levels):
            prev = np.concatenate([[self._level], levels[:-1]])
            chg = levels != prev
            if chg.any():
                st.add(ticks[chg].astype(np.float64), np.where(levels[chg] != 0, HIGH, LOW).astype(np.int8),
                       np.ones(int(chg.sum()), np.float32))
            self._level = int(levels[-1])
        st.frontier = float(last_tick)


# ------------------------------------------------------------------ reading events
@dataclasses.dataclass
class Flips:
    """Changes of a line's valid state (arrays, time order)."""

    start: np.ndarray       # left the old valid zone (ticks)
    mid: np.ndarray         # first crossing of the middle level
    end: np.ndarray         # reached the new valid zone
    rising: np.ndarray      # bool
    n_mid: np.ndarray       # crossings of the middle level on the way (1 = monotonic through the middle)
    u_start: np.ndarray
    u_mid: np.ndarray
    u_end: np.ndarray
    start_index: np.ndarray  # index of the start event in the store

    def __len__(self) -> int:
        return len(self.start)

    def take(self, sel) -> "Flips":
        return Flips(*(getattr(self, f.name)[sel] for f in dataclasses.fields(self)))


def _prev_zone(z: np.ndarray, initial: int | None) -> np.ndarray:
    zp = np.empty(len(z), np.int8)
    if len(z):
        zp[0] = -1 if initial is None else initial
        zp[1:] = z[:-1]
    return zp


def flips(store: EventStore) -> Flips:
    t, z, u = store.arrays()
    valid = np.flatnonzero((z == LOW) | (z == HIGH))
    zones = z[valid]
    init = store.initial if store.initial in (LOW, HIGH) else -1
    prev_zone = np.concatenate([[init], zones[:-1]]).astype(np.int8)
    prev_idx = np.concatenate([[-1], valid[:-1]])
    is_flip = (zones != prev_zone) & (prev_zone >= 0)
    j = valid[is_flip]
    i = prev_idx[is_flip]
    s = i + 1                                        # the exit from the old zone
    zp = _prev_zone(z, store.initial)
    mid_ev = ((zp == 1) & (z == 2)) | ((zp == 2) & (z == 1))
    cum = np.cumsum(mid_ev)
    n_mid = cum[j] - np.where(s > 0, cum[np.maximum(s - 1, 0)], 0)
    mid_idx = np.flatnonzero(mid_ev)
    if len(mid_idx):                                 # the first crossing of the middle in [s, j]
        k = np.searchsorted(mid_idx, s)
        cand = mid_idx[np.minimum(k, len(mid_idx) - 1)]
        m = np.where((k < len(mid_idx)) & (cand <= j), cand, j)
    else:                                            # logic edges: one event per change
        m = j
    return Flips(t[s], t[m], t[j], zones[is_flip] == HIGH, n_mid.astype(np.int64), u[s], u[m], u[j], s)


@dataclasses.dataclass
class Intervals:
    """The spans during which a line is valid (time order)."""

    start: np.ndarray
    end: np.ndarray          # +inf: still valid at the store's frontier
    zone: np.ndarray
    u_start: np.ndarray
    u_end: np.ndarray


def valid_intervals(store: EventStore) -> Intervals:
    t, z, u = store.arrays()
    valid = np.flatnonzero((z == LOW) | (z == HIGH))
    nxt = valid + 1
    has_end = nxt < len(t)
    end = np.where(has_end, t[np.minimum(nxt, max(len(t) - 1, 0))] if len(t) else 0.0, np.inf)
    uend = np.where(has_end, u[np.minimum(nxt, max(len(t) - 1, 0))] if len(t) else 0.0, 0.0)
    start, zone, ustart = t[valid], z[valid], u[valid]
    if store.initial in (LOW, HIGH):               # valid since before the first retained event
        first_end = t[0] if len(t) else np.inf
        start = np.concatenate([[-np.inf], start])
        end = np.concatenate([[first_end], end])
        zone = np.concatenate([[store.initial], zone]).astype(np.int8)
        ustart = np.concatenate([[0.0], ustart])
        uend = np.concatenate([[u[0] if len(u) else 0.0], uend])
    return Intervals(start, end, zone, ustart.astype(np.float64), uend.astype(np.float64))


def excursions(store: EventStore) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Departures from a valid zone that return to it: (time of the departure, whether it
    crossed the middle level (a runt), the zone left)."""
    t, z, _ = store.arrays()
    valid = np.flatnonzero((z == LOW) | (z == HIGH))
    if len(valid) < 2:
        return np.empty(0), np.empty(0, bool), np.empty(0, np.int8)
    i, j = valid[:-1], valid[1:]
    same = z[i] == z[j]
    zp = _prev_zone(z, store.initial)
    mid_ev = ((zp == 1) & (z == 2)) | ((zp == 2) & (z == 1))
    cum = np.cumsum(mid_ev)
    crossed = (cum[j] - cum[i]) > 0
    return t[i + 1][same], crossed[same], z[i][same]
