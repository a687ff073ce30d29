"""A shared bus: bus-level figures of several devices (CS lines) on one SCLK.

``BusTracker`` reads the same edge stream the devices' framers read (core/shared.py
feeds both), in one pass: the compiled core (``spigap_bus_scan``) or its numpy twin
picks out the entries where a CS line changes and counts the SCLK edges while no CS
is asserted; everything else works on those CS events only (two per transfer), so
its cost and memory do not grow with the samples, and past the histograms' bound
not with the transfers either. docs/shared-bus.md defines the figures:

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
* **SCLK with no CS asserted**: count, first and last tick (an edge in the very
  sample a CS changes is judged with the CS levels after it, as docs/gaps.md's
  same-sample rule).
"""

from __future__ import annotations

import collections
import dataclasses
import threading

import numpy as np

from spigap import native
from spigap.core.tickhist import TickHistogram
from spigap.io.base import EdgeBlock

OVERLAP_LIST = 1000          # intervals with two CS asserted kept with their times (all are counted)
SCAN_CAP = 1 << 16           # CS-event indices per compiled call

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
    at ``active`` levels) on the clock at bit ``b_clk``; ``feed`` blocks, then ``finish``."""

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
        self.stray = np.array([0, -1, -1], np.int64)    # SCLK edges with no CS asserted: count, first, last
        self.events = 0

    # ------------------------------------------------------------ feeding
    def feed(self, block: EdgeBlock) -> None:
        t, s = block.ticks, block.states
        if not len(t):
            return
        if self.prev is None:
            s0 = int(s[0])
            self.prev = s0
            self.start_tick = self.t_last = int(t[0])
            self.A = ((s0 >> self.bits) & 1) == self.act
            for d in np.flatnonzero(self.A).tolist():      # partial windows: CS asserted from the start
                self.columns[d].add(_cols(np.array([-1]), np.array([-1]), np.array([-1]), np.array([0]),
                                          np.array([False])))
                self.windows[d] += 1
            t, s = t[1:], s[1:]
            if not len(t):
                return
        idx = self._scan(t, s)
        if len(idx):
            self._events(t[idx], s[idx])

    def _scan(self, t: np.ndarray, s: np.ndarray) -> np.ndarray:
        """Indices of the CS events of one block; counts the stray SCLK edges."""
        lib = native.library()
        assert self.prev is not None
        if lib is None:
            before = np.empty_like(s)
            before[0] = self.prev
            before[1:] = s[:-1]
            ch = s ^ before
            cs_ch = (ch & np.uint32(self.mask)) != 0
            stray = (((ch >> np.uint32(self.b_clk)) & 1) != 0) & ((s & np.uint32(self.mask)) == self.idle) & ~cs_ch
            st = np.flatnonzero(stray)
            if len(st):
                self.stray[0] += len(st)
                if self.stray[1] < 0:
                    self.stray[1] = int(t[st[0]])
                self.stray[2] = int(t[st[-1]])
            self.prev = int(s[-1])
            return np.flatnonzero(cs_ch)
        t = np.ascontiguousarray(t, np.int64)
        s = np.ascontiguousarray(s, np.uint32)
        ffi = native.ffi()
        k = ffi.new("int64_t *")
        parts = []
        done, n = 0, len(t)
        prev: int = self.prev
        while done < n:
            cap = min(SCAN_CAP, n - done)
            idx = np.empty(cap, np.int64)
            used = lib.spigap_bus_scan(native.ptr(t[done:]), native.ptr(s[done:], "uint32_t *"), n - done, prev,
                                       self.mask, self.idle, self.b_clk, native.ptr(idx), cap, k,
                                       native.ptr(self.stray))
            parts.append(idx[:k[0]] + done)
            done += used
            prev = int(s[done - 1])
        self.prev = prev
        return np.concatenate(parts) if len(parts) > 1 else parts[0]

    def _events(self, te: np.ndarray, se: np.ndarray) -> None:
        K, E = self.K, len(te)
        self.events += E
        A = ((se[:, None] >> self.bits[None, :]) & 1) == self.act[None, :]
        Ap = np.empty_like(A)
        Ap[0] = self.A
        Ap[1:] = A[:-1]
        asserts = A & ~Ap
        deasserts = ~A & Ap
        seg = np.diff(te, prepend=self.t_last)
        Bc = self.B[None, :] + np.cumsum(seg[:, None] * Ap, axis=0)          # B at each event
        n_after, n_before = A.sum(axis=1), Ap.sum(axis=1)
        any_prev = n_before > 0
        self.busy += int(seg[any_prev].sum())
        # the idle gaps: all CS inactive before an event that follows a deassert
        dz = deasserts.any(axis=1)
        seen = (np.cumsum(dz) - dz + (1 if self.last_deassert is not None else 0)) > 0
        self.idle_gaps.add(seg[~any_prev & seen])
        Cx = self.C[None, :] + np.cumsum(asserts, axis=0) - asserts          # asserts before each event
        last = np.maximum.accumulate(np.where(dz, np.arange(E), -1))        # the bus's last deassert
        dz_dev = np.argmax(deasserts, axis=1)
        Btot, Ctot = Bc.sum(axis=1), Cx.sum(axis=1)
        self._overlaps(te, A, n_before, n_after)
        for d in range(K):
            a_idx = np.flatnonzero(asserts[:, d])
            d_idx = np.flatnonzero(deasserts[:, d])
            if len(a_idx):
                self._windows(d, a_idx, d_idx, te, n_after, dz_dev, Bc, Cx, Btot, Ctot, last)
            if len(d_idx):
                p = int(d_idx[-1])
                self.own_prev[d] = (Bc[p].copy(), Cx[p].copy())
        self.A = A[-1].copy()
        self.B = Bc[-1].copy()
        self.t_last = int(te[-1])
        self.C = self.C + asserts.sum(axis=0)
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
        ob = (Btot[a_idx] - Bc[a_idx, d]) - np.where(inner, Btot[p] - Bc[p, d], 0)
        oc = (Ctot[a_idx] - Cx[a_idx, d]) - np.where(inner, Ctot[p] - Cx[p, d], 0)
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
                self._ov = Overlap(int(te[i]), None, tuple(np.flatnonzero(A[i]).tolist()))
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
            "sclk_without_cs": {"edges": int(self.stray[0]),
                                "first_s": s(int(self.stray[1])) if self.stray[1] >= 0 else None,
                                "last_s": s(int(self.stray[2])) if self.stray[2] >= 0 else None},
        }


def _cols(frm, gap, busy, count, overlap) -> dict[str, np.ndarray]:
    return {"handover_from": np.asarray(frm, np.int8), "handover": np.asarray(gap, np.int64),
            "other_busy": np.asarray(busy, np.int64), "others": np.asarray(count, np.int64),
            "overlap": np.asarray(overlap, bool)}
