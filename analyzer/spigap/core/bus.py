"""A shared bus: bus-level figures of several devices (CS lines) on one SCLK.

``BusTracker`` works on the entries of the edge stream where a CS line changes (two
per transfer), which the first device's framer writes out as it frames the block
(core/shared.py; compiled core or numpy): no pass of its own over the stream, a cost
and memory that do not grow with the samples, and past the histograms' bound not
with the transfers either. The SCLK edges while no CS is asserted are counted by that
framer too. docs/shared-bus.md defines the figures:

* **handover**: the last CS deassert on the bus (device A) → the next CS assert
  when it is another device's (B); per pair A→B. A CS asserted in the very sample
  another is deasserted is a handover of 0;
* **busy** / **idle**: the time at least one CS is asserted, the rest; the idle gaps
  between a deassert and the next assert on the bus;
* per transfer of each device (``DeviceColumns``, in the device's window order, so
  they sit beside the framer's windows): the handover into it (from which device,
  how long), and inside the CS-inactive gap before it the other devices' CS-active
  time (summed over the devices) and how many of their windows started there;
* **two CS lines asserted at once**: each such interval with its devices (a bus
  fault: only one device may own the shared data lines);
* **SCLK with no CS asserted**: count and first tick (an edge in the very sample a
  CS changes is judged with the CS levels after it, as docs/gaps.md's same-sample rule).
"""

from __future__ import annotations

import collections
import dataclasses
import threading
from typing import Any

import numpy as np

from spigap import native
from spigap.core.tickhist import TickHistogram

OVERLAP_LIST = 1000          # intervals with two CS asserted kept with their times (all are counted)
BUS_ROWS = 1 << 14           # the compiled tracker's output rows per device and call

# DeviceColumns: -1 = none (the first window has no gap before it; no handover into a window
# whose previous bus deassert was its own)
COLUMNS = ("handover_from", "handover", "other_busy", "others", "overlap")


@dataclasses.dataclass
class Overlap:
    start: int                  # tick: a second CS asserted
    end: int | None             # tick: back to at most one (None: still at the capture's end)
    devices: tuple[int, ...]    # the devices asserted at its start


class DeviceColumns:
    """One device's bus columns, window by window, as the tracker produced them (in the
    feeding thread); read in window order (``take``, in the statistics thread) and
    dropped once released (bounded memory)."""

    def __init__(self):
        self._parts: collections.deque = collections.deque()     # (first window, {column: array})
        self._lock = threading.Lock()
        self.produced = 0

    def add(self, cols: dict[str, np.ndarray]) -> None:
        n = len(cols["handover"])
        if n:
            with self._lock:
                self._parts.append((self.produced, cols))
                self.produced += n

    def release(self, k: int) -> None:
        """Windows before ``k`` will not be read again."""
        with self._lock:
            while self._parts and self._parts[0][0] + len(self._parts[0][1]["handover"]) <= k:
                self._parts.popleft()

    def take(self, k0: int, k1: int) -> dict[str, np.ndarray]:
        """Columns of windows k0..k1-1 (capture index)."""
        out: dict[str, list] = {c: [] for c in COLUMNS}
        with self._lock:
            parts = list(self._parts)
        for first, cols in parts:
            n = len(cols["handover"])
            if first >= k1:
                break
            a, b = max(k0 - first, 0), min(k1 - first, n)
            if a < b:
                for c in COLUMNS:
                    out[c].append(cols[c][a:b])
        res = {c: (np.concatenate(v) if v else np.empty(0, _DTYPES[c])) for c, v in out.items()}
        if len(res["handover"]) != k1 - k0:
            raise AssertionError(f"bus columns for windows {k0}..{k1} not produced (have {self.produced})")
        return res


_DTYPES = {"handover_from": np.int8, "handover": np.int64, "other_busy": np.int64, "others": np.int64,
           "overlap": bool}


class BusTracker:
    """Bus-level figures of ``names`` (CS lines at ``bits`` of the stream's states, asserted
    at ``active`` levels): ``begin``, ``feed_events``, then ``finish``."""

    def __init__(self, names: list[str], bits: list[int], active: list[int], b_clk: int):
        self.names = list(names)
        self.K = len(names)
        self.bits = np.asarray(bits, np.uint32)
        self.act = np.asarray(active, np.uint32)
        self.b_clk = b_clk
        self.mask = int(sum(1 << b for b in bits))
        self.idle = int(sum((1 - a) << b for a, b in zip(active, bits)))
        self.prev: int | None = None
        self.start_tick = 0
        self.end_tick: int | None = None
        self.A = np.zeros(self.K, bool)                 # asserted after the last event
        self.t_last = 0
        self.B = np.zeros(self.K, np.int64)             # CS-active ticks of each device up to t_last
        self.C = np.zeros(self.K, np.int64)             # asserts of each device so far
        self.busy = 0                                   # ticks with at least one CS asserted, up to t_last
        self.last_deassert: tuple[int, int] | None = None     # (tick, device) of the bus's last deassert
        self.own_prev: list[tuple[np.ndarray, np.ndarray] | None] = [None] * self.K   # (B, C) at its last deassert
        self.columns = [DeviceColumns() for _ in range(self.K)]
        self.windows = np.zeros(self.K, np.int64)
        self.idle_gaps = TickHistogram()
        self.handover = {(a, b): TickHistogram() for a in range(self.K) for b in range(self.K) if a != b}
        self.overlaps: list[Overlap] = []
        self.n_overlaps = 0
        self.overlap_ticks = 0
        self._ov: Overlap | None = None
        self.stray: tuple[int, int | None] = (0, None)  # SCLK edges with no CS asserted: count, first tick
        self.events = 0
        self._lib: Any = native.library() if self.K <= 32 else None     # the compiled tracker (32: BUS_MAX)
        self._c: Any = None                             # its state (bus_t), from the first events on

    # ------------------------------------------------------------ feeding
    def begin(self, tick: int, state: int) -> None:
        """The stream's first entry (its state before any change)."""
        self.prev = int(state)
        self.start_tick = self.t_last = int(tick)
        self.A = ((int(state) >> self.bits) & 1) == self.act
        for d in np.flatnonzero(self.A).tolist():      # partial windows: CS asserted from the start
            self.columns[d].add(_cols(np.array([-1]), np.array([-1]), np.array([-1]), np.array([0]),
                                      np.array([False])))
            self.windows[d] += 1

    def feed_events(self, events: np.ndarray) -> None:
        """The entries where a CS line changed, in order: rows (tick, state) (the first
        device's framer writes them: core/shared.py). On the compiled core (spigap_bus in
        analyzer/spigap/native/spigap_core.c) when it is installed, else in numpy (``_events``,
        the oracle tests/test_shared_bus.py compares it with): the same figures."""
        if not len(events):
            return
        if self._lib is None:
            self._events(events[:, 0], events[:, 1].astype(np.uint32))
        else:
            self._events_c(np.ascontiguousarray(events, np.int64))

    def _start_c(self) -> None:
        """The compiled tracker's state from this one's (after ``begin``, before any event)."""
        ffi = native.ffi()
        b = ffi.new("bus_t *")
        b.k = self.K
        for d in range(self.K):
            b.bit[d], b.act[d], b.asserted[d] = int(self.bits[d]), int(self.act[d]), int(self.A[d])
            b.busy_dev[d], b.n_assert[d] = int(self.B[d]), int(self.C[d])
        b.t_last, b.busy = self.t_last, self.busy
        b.ld_t, b.ld_dev = self.last_deassert if self.last_deassert is not None else (-1, -1)
        self._c = b

    def _events_c(self, ev: np.ndarray) -> None:
        if self._c is None:
            self._start_c()
            # the tracker's output buffers, kept from call to call (as the framers' are):
            # rows are copied out after each spigap_bus call, which stops when one fills
            cap = BUS_ROWS
            self._win = np.empty((self.K, self._lib.BUS_COLS, cap), np.int64)
            self._idle = np.empty(cap, np.int64)
            self._ovbuf = np.empty((cap, 3), np.int64)
            p = native.ptr
            self._o = native.ffi().new("busout_t *", {"win": p(self._win), "win_cap": cap, "idle": p(self._idle),
                                                      "idle_cap": cap, "ov": p(self._ovbuf), "ov_cap": cap})
        b, K, E = self._c, self.K, len(ev)
        o, win, idle, ov = self._o, self._win, self._idle, self._ovbuf
        self.events += E
        p = native.ptr
        rows: list[list[np.ndarray]] = [[] for _ in range(K)]
        done = 0
        while done < E:
            done += self._lib.spigap_bus(b, o, p(ev[done:]), E - done)
            for d in range(K):
                if o.n_win[d]:
                    rows[d].append(win[d, :, :o.n_win[d]].copy())
                    o.n_win[d] = 0
            if o.n_idle:
                self.idle_gaps.add(idle[:o.n_idle].copy())      # the histogram keeps what it is given
                o.n_idle = 0
            if o.n_ov:
                self._overlap_rows(ov[:o.n_ov].tolist())
                o.n_ov = 0
        for d in range(K):
            if not rows[d]:
                continue
            r = rows[d][0] if len(rows[d]) == 1 else np.concatenate(rows[d], axis=1)
            frm = r[0].astype(np.int8)
            for e in range(K):
                m = frm == e
                if e != d and m.any():
                    self.handover[(e, d)].add(r[1][m])
            self.columns[d].add(_cols(frm, r[1], r[2], r[3], r[4] != 0))
            self.windows[d] += r.shape[1]
        # the running figures finish() and figures() read
        self.A = np.array([bool(b.asserted[d]) for d in range(K)])
        self.B = np.array([b.busy_dev[d] for d in range(K)], np.int64)
        self.C = np.array([b.n_assert[d] for d in range(K)], np.int64)
        self.busy, self.t_last = int(b.busy), int(b.t_last)
        if b.ld_dev >= 0:
            self.last_deassert = (int(b.ld_t), int(b.ld_dev))

    def _overlap_rows(self, rows: list) -> None:
        """The compiled tracker's overlap rows (1 = a second CS asserted, 0 = back to one)."""
        for kind, t, mask in rows:
            if kind == 1:
                self._ov = Overlap(t, None, tuple(d for d in range(self.K) if mask >> d & 1))
                self.n_overlaps += 1
                if len(self.overlaps) < OVERLAP_LIST:
                    self.overlaps.append(self._ov)
            elif self._ov is not None:
                self._ov.end = t
                self.overlap_ticks += t - self._ov.start
                self._ov = None

    def _events(self, te: np.ndarray, se: np.ndarray) -> None:
        # one array per device (K is small: columns, not an E x K matrix, whose row
        # reductions numpy does slowly)
        K, E = self.K, len(te)
        self.events += E
        te = np.asarray(te, np.int64)
        A = [((se >> b) & np.uint32(1)) == a for b, a in zip(self.bits, self.act)]
        Ap = []
        for d in range(K):
            x = np.empty(E, bool)
            x[0] = self.A[d]
            x[1:] = A[d][:-1]
            Ap.append(x)
        asserts = [A[d] & ~Ap[d] for d in range(K)]
        deasserts = [~A[d] & Ap[d] for d in range(K)]
        seg = np.diff(te, prepend=self.t_last)
        Bc = [self.B[d] + np.cumsum(np.where(Ap[d], seg, 0)) for d in range(K)]     # CS time up to each event
        n_after = np.zeros(E, np.int8)
        n_before = np.zeros(E, np.int8)
        dz = np.zeros(E, bool)
        dz_dev = np.zeros(E, np.int64)
        for d in range(K - 1, -1, -1):
            n_after += A[d]
            n_before += Ap[d]
            dz |= deasserts[d]
            dz_dev[deasserts[d]] = d             # several at once: the first device's
        any_prev = n_before > 0
        self.busy += int(seg[any_prev].sum())
        # the idle gaps: all CS inactive before an event that follows a deassert
        seen = (np.cumsum(dz) - dz + (1 if self.last_deassert is not None else 0)) > 0
        self.idle_gaps.add(seg[~any_prev & seen])
        Cx = [self.C[d] + np.cumsum(asserts[d]) - asserts[d] for d in range(K)]   # asserts before each event
        last = np.maximum.accumulate(np.where(dz, np.arange(E), -1))          # the bus's last deassert
        Btot, Ctot = sum(Bc), sum(Cx)
        self._overlaps(te, A, n_before, n_after)
        for d in range(K):
            a_idx = np.flatnonzero(asserts[d])
            d_idx = np.flatnonzero(deasserts[d])
            if len(a_idx):
                self._windows(d, a_idx, d_idx, te, n_after, dz_dev, Bc, Cx, Btot, Ctot, last)
            if len(d_idx):
                p = int(d_idx[-1])
                self.own_prev[d] = (np.array([b[p] for b in Bc]), np.array([c[p] for c in Cx]))
        self.A = np.array([a[-1] for a in A])
        self.B = np.array([b[-1] for b in Bc], np.int64)
        self.t_last = int(te[-1])
        self.C = self.C + np.array([int(x.sum()) for x in asserts], np.int64)
        j = int(last[-1])
        if j >= 0:
            self.last_deassert = (int(te[j]), int(dz_dev[j]))

    def _windows(self, d, a_idx, d_idx, te, n_after, dz_dev, Bc, Cx, Btot, Ctot, last) -> None:
        n = len(a_idx)
        k = np.searchsorted(d_idx, a_idx) - 1          # this device's deassert before each assert
        inner = k >= 0
        p = d_idx[np.maximum(k, 0)] if len(d_idx) else np.zeros(n, np.int64)
        # the other devices' CS time and asserts since this device's last deassert: all
        # devices' minus its own
        ob = (Btot[a_idx] - Bc[d][a_idx]) - np.where(inner, Btot[p] - Bc[d][p], 0)
        oc = (Ctot[a_idx] - Cx[d][a_idx]) - np.where(inner, Ctot[p] - Cx[d][p], 0)
        have = inner.copy()
        if (~inner).any() and self.own_prev[d] is not None:
            pB, pC = self.own_prev[d]
            ob[~inner] -= int(pB.sum() - pB[d])
            oc[~inner] -= int(pC.sum() - pC[d])
            have[~inner] = True
        busy = np.where(have, ob, -1)
        count = np.where(have, oc, 0)
        overlap = n_after[a_idx] >= 2
        # the handover: the bus's last deassert (at or before the assert) was another device's
        j = last[a_idx]
        ld_t = np.where(j >= 0, te[np.maximum(j, 0)], -1)
        ld_dev = np.where(j >= 0, dz_dev[np.maximum(j, 0)], -1)
        if (j < 0).any() and self.last_deassert is not None:
            ld_t[j < 0], ld_dev[j < 0] = self.last_deassert
        hand = (ld_dev >= 0) & (ld_dev != d) & ~overlap
        gap = np.where(hand, te[a_idx] - ld_t, -1)
        frm = np.where(hand, ld_dev, -1).astype(np.int8)
        if hand.any():
            for e in range(self.K):
                m = frm == e
                if e != d and m.any():
                    self.handover[(e, d)].add(gap[m])
        self.columns[d].add(_cols(frm, gap, busy, count, overlap))
        self.windows[d] += n

    def _overlaps(self, te, A, n_before, n_after) -> None:
        starts = np.flatnonzero((n_after >= 2) & (n_before < 2))
        ends = np.flatnonzero((n_after < 2) & (n_before >= 2))
        if not len(starts) and not len(ends):
            return
        marks = sorted([(int(i), 0) for i in ends] + [(int(i), 1) for i in starts])
        for i, kind in marks:
            if kind == 1:
                self._ov = Overlap(int(te[i]), None, tuple(d for d in range(self.K) if A[d][i]))
                self.n_overlaps += 1
                if len(self.overlaps) < OVERLAP_LIST:
                    self.overlaps.append(self._ov)
            elif self._ov is not None:
                self._ov.end = int(te[i])
                self.overlap_ticks += self._ov.end - self._ov.start
                self._ov = None

    def finish(self, end_tick: int) -> None:
        """The capture ends at ``end_tick``: close the time sums."""
        end = max(int(end_tick), self.t_last)
        seg = end - self.t_last
        self.B = self.B + seg * self.A
        self.busy += seg * int(self.A.any())
        self.t_last = end
        self.end_tick = end
        if self._ov is not None:
            self.overlap_ticks += end - self._ov.start

    # ------------------------------------------------------------ results
    @property
    def duration(self) -> int:
        return (self.end_tick if self.end_tick is not None else self.t_last) - self.start_tick

    def figures(self, tick_s: float) -> dict:
        """Bus-level figures in seconds (JSON ``bus``, without the per-device interleaving)."""
        dur = self.duration
        s = lambda ticks: None if ticks is None else float(ticks) * tick_s  # noqa: E731
        pairs = []
        for (a, b), h in self.handover.items():
            if h.n:
                pairs.append({"from": self.names[a], "to": self.names[b], **h.describe(tick_s)})
        return {
            "devices": list(self.names),
            "duration_s": s(dur),
            "busy_s": s(self.busy),
            "busy_share": self.busy / dur if dur > 0 else None,
            "idle_s": s(dur - self.busy),
            "device_busy_s": {n: s(int(b)) for n, b in zip(self.names, self.B)},
            "device_busy_share": {n: (int(b) / dur if dur > 0 else None) for n, b in zip(self.names, self.B)},
            "idle_gaps": self.idle_gaps.describe(tick_s),
            "handover": pairs,
            "cs_overlaps": {"count": self.n_overlaps, "total_s": s(self.overlap_ticks),
                            "listed": len(self.overlaps),
                            "intervals": [{"start_s": s(o.start), "end_s": s(o.end),
                                           "devices": [self.names[d] for d in o.devices]} for o in self.overlaps]},
            "sclk_without_cs": {"edges": int(self.stray[0]), "first_s": s(self.stray[1])},
        }


def _cols(frm, gap, busy, count, overlap) -> dict[str, np.ndarray]:
    return {"handover_from": np.asarray(frm, np.int8), "handover": np.asarray(gap, np.int64),
            "other_busy": np.asarray(busy, np.int64), "others": np.asarray(count, np.int64),
            "overlap": np.asarray(overlap, bool)}
