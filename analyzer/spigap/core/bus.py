"""A shared bus: what is bus-level about several devices (CS lines) on one SCLK, in one
room (docs/shared-bus.md). Everything else about a device of a shared bus is the
single-device code, run once per device (core/pipeline.py, core/run.py).

``BusTracker`` works on the entries of the edge stream where a CS line changes (two
per transfer), which the first device's framer writes out as it frames the block
(core/pipeline.py; compiled core or numpy): no pass of its own over the stream, a cost
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
  CS changes is judged with the CS levels after it, as docs/gaps.md's same-sample rule);
* **queueing**: what the bus alone shows of a message waiting in the controller's
  queue behind another device's (``BusTracker.queueing``), and with a kernel trace who
  waited for whom (``queued_behind``).

Per device (``DeviceBus``): the **interleaving** of its CS-inactive gaps with the
other devices' transfers (``Interleave``), its transfers' bus columns beside its
analysis, and the message grouping that knows which gaps held other devices'
transfers (``BusGrouper``).
"""

from __future__ import annotations

import collections
import dataclasses
import threading
from typing import Any

import numpy as np

from spigap import native
from spigap.core import grouping as grouping_mod
from spigap.core.analysis import KIND_NAMES
from spigap.core.gaprules import split
from spigap.core.quantile import median, percentiles
from spigap.core.tickhist import TickHistogram
from spigap.units import fmt_time

OVERLAP_LIST = 1000          # intervals with two CS asserted kept with their times (all are counted)
BUS_ROWS = 1 << 14           # the compiled tracker's output rows per device and call

# gap kinds whose gaps the interleaving is counted for (docs/shared-bus.md)
GAP_KINDS = ("cs_change", "context_switch", "class_a", "class_b")
SETTLE_SHARE = 0.9      # of the known message ends in one class of an ambiguous grouping: it is the context switch
SURE = 0.9              # a pattern answer this confident is kept as it is (the grouping's "busy" level)
QUEUED_MIN_FACTOR = 1.25    # one population of handovers: within 1.25 x the shortest (+ 2 samples) is "near it"

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
        device's framer writes them: core/pipeline.py). On the compiled core (spigap_bus in
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

    def queueing(self, tick_s: float) -> list[dict]:
        """Per pair A -> B, what the bus alone shows: handovers near the shortest one were
        likely queued (B's message waited in the controller's queue for A's to finish).
        The handovers are split into two populations where there are two (docs/gaps.md's
        rule); else "near" is within 1.25 x the shortest + 2 samples. A kernel trace
        (spigap trace) tells for sure."""
        out = []
        for (i, j), h in self.handover.items():
            if not h.n:
                continue
            values, counts = h.table()
            scale = max(1, int(np.ceil(h.n / (1 << 16))))
            v = np.repeat(values, np.maximum(counts // scale, 1)).astype(float)
            sp = split(v, "log", 1.0) if len(v) >= 20 else None
            if sp is not None and sp.verdict == "two" and sp.threshold is not None:
                thr, how = float(sp.threshold), "the shorter of two populations of handover gaps"
            else:
                thr, how = QUEUED_MIN_FACTOR * float(h.min or 0) + 2, "within 1.25 x the shortest handover"
            near = int(counts[values <= thr].sum())
            out.append({"from": self.names[i], "to": self.names[j], "handovers": h.n, "likely_queued": near,
                        "share": near / h.n, "threshold_s": thr * tick_s, "rule": how,
                        "note": f"{near} of {h.n} transfers of {self.names[j]} started right after one of "
                                f"{self.names[i]} ({how}): likely queued behind it; a kernel trace (spigap trace) "
                                "tells for sure"})
        return out

    def warnings(self, tick_s: float) -> list[str]:
        """The bus's findings as warnings: two CS lines at once (error), SCLK with no CS."""
        t = tick_s
        out = []
        if self.n_overlaps:
            first = self.overlaps[0]
            out.append(f"ERROR: {self.n_overlaps} time(s) two CS lines were asserted at once "
                       f"({sum(1 for _ in self.overlaps)} listed; first at {fmt_time(first.start * t, 7)}, "
                       f"{'+'.join(self.names[d] for d in first.devices)}): only one device may drive the "
                       "shared MISO line")
        if self.stray[0]:
            out.append(f"{int(self.stray[0])} SCLK edge(s) while no CS was asserted (first at "
                       f"{fmt_time((self.stray[1] or 0) * t, 7)})")
        return out


def _cols(frm, gap, busy, count, overlap) -> dict[str, np.ndarray]:
    return {"handover_from": np.asarray(frm, np.int8), "handover": np.asarray(gap, np.int64),
            "other_busy": np.asarray(busy, np.int64), "others": np.asarray(count, np.int64),
            "overlap": np.asarray(overlap, bool)}


# ------------------------------------------------------------------ interleaving
class Interleave:
    """One device's CS-inactive gaps against the other devices' traffic, per gap kind:
    how many gaps, how many held another device's windows, and in those the other
    devices' CS-active time and the rest (the device's own time)."""

    def __init__(self):
        self.gaps = {k: 0 for k in GAP_KINDS}
        self.with_others = {k: 0 for k in GAP_KINDS}
        self.other_busy = {k: TickHistogram() for k in GAP_KINDS}
        self.own = {k: TickHistogram() for k in GAP_KINDS}
        self.other_total = {k: 0 for k in GAP_KINDS}
        self.seen = 0

    def add(self, kinds: np.ndarray, gaps: np.ndarray, cols: dict[str, np.ndarray]) -> None:
        self.seen += len(kinds)
        busy, count = cols["other_busy"], cols["others"]
        valid = ~np.isnan(gaps) & (busy >= 0)
        for code, name in KIND_NAMES.items():
            if name not in self.gaps:
                continue
            m = (kinds == code) & valid
            if not m.any():
                continue
            self.gaps[name] += int(m.sum())
            w = m & (count > 0)
            if w.any():
                self.with_others[name] += int(w.sum())
                self.other_busy[name].add(busy[w])
                self.own[name].add(np.maximum(gaps[w].astype(np.int64) - busy[w], 0))
                self.other_total[name] += int(busy[w].sum())

    def to_dict(self, tick_s: float) -> dict:
        out = {}
        for k in GAP_KINDS:
            if not self.gaps[k]:
                continue
            out[k] = {"gaps": self.gaps[k], "with_other_devices": self.with_others[k],
                      "share": self.with_others[k] / self.gaps[k],
                      "other_busy": self.other_busy[k].describe(tick_s),
                      "own": self.own[k].describe(tick_s),
                      "other_busy_total_s": self.other_total[k] * tick_s}
        return out


class SampledColumns:
    """A device's bus columns (core/bus.DeviceColumns) of the transfers a systematic sample
    (collect.Sampler) holds, as the rows go by: bounded as the sample is, and at the end
    in the sample's order, so they sit beside the sampled Analysis."""

    def __init__(self, sampler):
        self.sampler = sampler
        self.parts: list[tuple[np.ndarray, dict[str, np.ndarray]]] = []     # (capture indices, columns)
        self.stride = sampler.stride

    def add(self, g_first: int, cols: dict[str, np.ndarray]) -> None:
        g = g_first + np.arange(len(cols["handover"]), dtype=np.int64)
        keep = self.sampler.keeps(g)
        if keep.any():
            self.parts.append((g[keep], {c: v[keep] for c, v in cols.items()}))
        if self.sampler.stride != self.stride:      # the sample dropped every other block
            self.stride = self.sampler.stride
            self.parts = [(i[m], {c: v[m] for c, v in cols.items()}) for i, cols in self.parts
                          for m in [self.sampler.keeps(i)] if m.any()]

    def result(self) -> dict[str, np.ndarray] | None:
        want = self.sampler.indices()
        if not self.parts:
            return None
        g = np.concatenate([p[0] for p in self.parts])
        i = np.searchsorted(g, want)
        if len(g) == 0 or (i >= len(g)).any() or (g[np.minimum(i, len(g) - 1)] != want).any():
            return None                  # a transfer of the sample without its columns: none rather than wrong
        return {c: np.concatenate([p[1][c] for p in self.parts])[i] for c in self.parts[0][1]}


# ------------------------------------------------------------------ message grouping
class BusGrouper:
    """Message grouping for one device of a shared bus (core/measurer.Measurer's ``grouper``).

    The Linux SPI core runs one message at a time per controller, so a CS-inactive
    gap that holds another device's transfers ends a message (a known context
    switch), and its length is the other devices' time as much as this device's:
    it tells nothing of this device's own gaps. Such gaps take, for the population
    split and the pattern search, the length of one of the device's own gap
    populations, or their own when that gives a repeating pattern (each is tried;
    the one under which the known gaps end messages, and which is answered with
    more confidence, is kept); an answer that cannot say which population is the
    context switch is settled by the known gaps (they are context switches).
    docs/shared-bus.md."""

    def __init__(self, columns: DeviceColumns):
        self.columns = columns
        self.level: float | None = None     # the length the known gaps stand in with

    def known(self, g0: int, n: int) -> np.ndarray:
        """Of the gaps after transfer g0 (gap i before transfer g0 + 1 + i): which hold
        another device's windows."""
        if n <= 0:
            return np.zeros(0, bool)
        return self.columns.take(g0 + 1, g0 + 1 + n)["others"] > 0

    def view(self, gaps: np.ndarray, g0: int) -> np.ndarray:
        known = self.known(g0, len(gaps))
        if self.level is None or not known.any():
            return gaps
        out = np.asarray(gaps, float).copy()
        out[known] = self.level
        return out

    def infer(self, gaps: np.ndarray, *, g0: int, **kw) -> grouping_mod.Grouping:
        grp, self.level = infer_grouping(np.asarray(gaps, float), self.known(g0, len(gaps)), **kw)
        return grp


def infer_grouping(g: np.ndarray, known: np.ndarray, **kw) -> tuple[grouping_mod.Grouping, float | None]:
    """(grouping, the length the known gaps stood in with) of gaps ``g`` of which ``known``
    hold another device's transfers; ``kw``: grouping.infer's keywords."""
    n_known = int(known.sum())
    if not n_known or kw.get("transfers_per_message") == 1:
        return grouping_mod.infer(g, **kw), None
    free = g[~known]
    if len(free) >= 2 * grouping_mod.MIN_PERIODS:
        sp = split(free[:grouping_mod.WINDOW], "log", kw.get("resolution", 1.0))
        levels = sorted(float(np.expm1(m)) for _, m, _ in sp.comps) if sp.verdict == "two" else [median(free)]
    else:
        levels = [median(free) if len(free) else float(median(g))]
    # The known gaps stand in with the longest of the device's own populations they are
    # not shorter than: the controller's queue only ever delays a message, so a gap that
    # held another device's message is at least as long as it would have been, and the
    # context switch is the own population such a gap can hide.
    floor = float(percentiles(g[known], [10])[0]) * 1.05 + 2 * kw.get("resolution", 1.0)
    lvl = max([x for x in levels if x <= floor] or [min(levels)])
    g2 = g.copy()
    g2[known] = _stand_in(g[known], free, lvl)
    grp = _settle_by_known(grouping_mod.infer(g2, **kw), g2, known, kw)
    if not (grp.structure == "pattern" and grp.confidence >= SURE) and _periodic(known):
        # The known gaps at their own length: when that gives a repeating pattern, the
        # other devices' transfers fall at every Nth gap of this one (a spidev loop of
        # messages with cs_change whose every context switch holds another device's
        # message). Another reading fits as well: this device's own gaps are all context
        # switches and the other device runs in step with it; so no more than "ambiguous".
        g3 = g.copy()
        g3[known] = float(median(g[known]))
        alt = _settle_by_known(grouping_mod.infer(g3, **kw), g3, known, kw)
        if (alt.structure == "pattern" and not alt.ambiguous
                and bool((alt.kinds[known] == grouping_mod.CONTEXT_SWITCH).all())):
            other = ("; or each transfer is its own message and the other devices' transfers fall in step "
                     "at every " + str(int(sum(alt.lengths))) + "th gap (a kernel trace settles it)") if alt.lengths else ""
            grp = dataclasses.replace(alt, note=alt.note + other,
                                      confidence=min(alt.confidence, grouping_mod.CONFIDENCE["ambiguous"]))
            lvl = g3[known][0]
    said = (f"{n_known} of the {len(g)} gaps hold another device's transfers (a message holds the "
            "controller, so they end messages)")
    wrong = int((grp.kinds[known] == grouping_mod.CS_CHANGE).sum())
    if wrong:
        said += (f"; the grouping calls {wrong} of them cs_change, which the Linux SPI core never does "
                 "inside a message: check the grouping (--transfers-per-message, --context-switch)")
    if said not in grp.note:
        grp = dataclasses.replace(grp, note=f"{grp.note}; {said}")
    return grp, lvl


def _stand_in(held: np.ndarray, free: np.ndarray, lvl: float) -> np.ndarray:
    """Values for the gaps that held other devices' transfers: the device's own gaps of the
    population around ``lvl`` (within a factor 1.6), in the held gaps' order, so the stand-ins
    keep that population's spread (a constant would look like a second, perfectly tight kind
    of gap to the grouping's spread tests); ``lvl`` itself when that population is empty."""
    pool = free[(free > 0) & (np.abs(np.log(np.maximum(free, 1e-300) / lvl)) < 0.5)] if lvl > 0 else free[:0]
    if not len(pool):
        return np.full(len(held), lvl)
    out = np.empty(len(held))
    out[np.argsort(held, kind="stable")] = np.sort(np.resize(pool, len(held)))
    return out


def _periodic(known: np.ndarray) -> bool:
    """The known gaps recur at one spacing (most of them): worth a pattern search."""
    sp = np.diff(np.flatnonzero(known[:grouping_mod.WINDOW]))
    if len(sp) < grouping_mod.MIN_PERIODS:
        return False
    return int(np.bincount(sp).max()) >= 0.8 * len(sp)


def _settle_by_known(grp: grouping_mod.Grouping, g2: np.ndarray, known: np.ndarray, kw: dict) -> grouping_mod.Grouping:
    """An ambiguous grouping whose known message ends fall (nearly) all in one class:
    that class is the context switch."""
    if not grp.ambiguous:
        return grp
    k = grp.kinds[known]
    a, b = int((k == grouping_mod.CLASS_A).sum()), int((k == grouping_mod.CLASS_B).sum())
    if max(a, b) < grouping_mod.MIN_PERIODS or max(a, b) < SETTLE_SHARE * len(k):
        return grp
    rel = "longer" if b > a else "shorter"
    settled = grouping_mod.infer(g2, **dict(kw, context_switch=rel))
    text = (f"the {rel} gaps are context switches: {max(a, b)} of them hold another device's transfers "
            "(shared bus)")
    note = settled.note.replace(f"--context-switch {rel}", text).replace(", given)", f"; {text})")
    return dataclasses.replace(settled, method="shared bus", evidence=[text], note=note,
                               confidence=min(settled.confidence, grouping_mod.CONFIDENCE["device"]))


# ------------------------------------------------------------------ one device of the bus
@dataclasses.dataclass
class DeviceBus:
    """What one device of a shared bus has of the bus, beside its analysis: the bus's CS
    lines (``names``), its interleaving, and its transfers' bus columns from transfer
    ``first`` of the analysis on (``columns``; None when they were not kept: rows of a
    long capture go out as they are measured, with their columns)."""

    names: list[str]
    interleave: Interleave
    columns: dict[str, np.ndarray] | None = None
    first: int = 0

    def rows(self, k0: int, k1: int) -> dict[str, np.ndarray]:
        """The columns of the analysis's transfers k0..k1-1."""
        assert self.columns is not None
        return {c: v[k0 - self.first:k1 - self.first] for c, v in self.columns.items()}


class DeviceFeed:
    """One device's consumer side of the bus (core/run.py): each group of transfers its
    collector measures (collect.Collector's ``measured`` hook) takes that device's bus
    columns once, counts the interleaving and, for a systematic sample, keeps the columns
    of the sampled transfers; the group's analysis carries them to the rows it hands out."""

    def __init__(self, names: list[str], columns: DeviceColumns, sampler=None):
        self.names = names
        self.source = columns
        self.interleave = Interleave()
        self.sampled = SampledColumns(sampler) if sampler is not None else None

    def measured(self, a, skip: int, g0: int) -> None:
        # one group's transfers at once (not per handed-out chunk of rows): the same
        # counts and histograms in fewer, larger numpy calls
        cols = self.source.take(g0 + skip, g0 + a.n)
        self.interleave.add(a.gap_kind[skip:], a.gap_before[skip:], cols)
        if self.sampled is not None:
            self.sampled.add(g0 + skip, cols)
        a.bus = DeviceBus(self.names, self.interleave, cols, skip)
        self.source.release(g0 + a.n - 1)       # the last one is the next batch's context

    def finish(self, a) -> DeviceBus:
        """The device's bus beside its final analysis: an analysis measured at once (the
        capture fits) gets its columns and interleaving now; a sample, its sample's columns."""
        cols = None
        if not self.interleave.seen and a.in_memory and a.sample is None:
            # measured at once at the end (the capture fits): the rows were not handed out
            cols = self.source.take(0, a.n)
            self.interleave.add(a.gap_kind, a.gap_before, cols)
        elif a.in_memory and a.sample is not None and self.sampled is not None:
            cols = self.sampled.result()
        return DeviceBus(self.names, self.interleave, cols, 0)


def queued_behind(cs: np.ndarray, index: np.ndarray, submit: np.ndarray, start: np.ndarray,
                  done: np.ndarray) -> tuple[np.ndarray, list]:
    """Messages of several devices on one controller (columns in start order, on one
    clock): for each, the time another device's message held the controller between its
    submit and its start (the SPI core runs one message at a time per controller), and
    the messages it waited behind [(device, message index), ...]."""
    queued = np.zeros(len(cs))
    behind: list = [[] for _ in range(len(cs))]
    for k in np.unique(cs).tolist():
        mine = np.flatnonzero(cs == k)
        other = np.flatnonzero(cs != k)
        if not len(other):
            continue
        os_, od = start[other], done[other]            # in start order: the controller runs one at a time
        lo = np.searchsorted(od, submit[mine], side="right")       # the first other message done after the submit
        hi = np.searchsorted(os_, start[mine], side="left")       # ... up to those started before this one
        for i, a, b in zip(mine.tolist(), lo.tolist(), hi.tolist()):
            if a >= b:
                continue
            idx = other[a:b]
            ov = np.minimum(done[idx], start[i]) - np.maximum(start[idx], submit[i])
            ov = np.clip(ov, 0, None)
            queued[i] = float(ov.sum())
            behind[i] = [(int(cs[j]), int(index[j])) for j, v in zip(idx.tolist(), ov.tolist()) if v > 0]
    return queued, behind
