"""Every gap split into phases between consecutive events on the merged timeline.

docs/trace.md is the reference. Once a trace is on the bus clock
(``align.Alignment``), the bus edges of each transfer (``bus:cs_assert``,
``bus:first_sclk``, ``bus:last_sclk``, ``bus:cs_deassert``) cut the timeline
into segments: CS setup (assert → first SCLK), the clocked part, CS hold (last
SCLK → deassert), and the CS-inactive gap before the next transfer, whose kind
(cs_change, context_switch, ...) comes from the analysis' message grouping. A
window holding several spi_transfers has its clocked part cut at each
``inter_transfer`` word gap (the last SCLK edge of the word before → the first
of the word after, as ``Analysis.pair_inter_transfer`` marks them). The
trace events that fall inside a segment split it into phases, e.g. a context
switch: ``bus:cs_deassert → spi:spi_message_done → syscalls:sys_exit_ioctl →
syscalls:sys_enter_ioctl → spi:spi_message_submit → spi:spi_message_start →
spi:spi_set_cs:activate → bus:cs_assert``. Phases are keyed by (gap kind, from,
to) and described with the capture's statistics (n/min/p50/mean/p99/max/std).

Events used as phase boundaries (``boundary_rows``): the aligned device's SPI
events, its controller's (``spi_controller_busy/idle``) that follow one of the
device's own events (not another device's message), ``gpio:gpio_value``, and
the system calls of the tasks that submit the device's messages. Interrupts and
scheduler events vary from gap to gap; they stay on the Perfetto timeline but do
not split phases.

Only segments whose transfers were matched on both ends are used (elsewhere the
trace may not cover the bus). Everything is vectorized: one sort of events and
edges together.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from spigap.core import analysis as an
from spigap.core.analysis import Analysis, describe
from spigap.trace import columns as tm
from spigap.trace.align import Alignment, bus_edges

EDGE_NAMES = (tm.BUS_CS_ASSERT, tm.BUS_FIRST_SCLK, tm.BUS_LAST_SCLK, tm.BUS_CS_DEASSERT)
KIND_ORDER = ("cs_setup", "inter_transfer", "cs_hold", "cs_change", "context_switch", "class_a", "class_b",
              "idle")


@dataclasses.dataclass
class Phase:
    gap: str
    frm: str
    to: str
    stats: dict                 # describe(): n, min_s, p50_s, mean_s, p99_s, max_s, std_s
    resolution_s: float
    position: float             # mean place of the phase's start inside its gap, 0..1 (row order)
    values: np.ndarray | None = dataclasses.field(default=None, repr=False)   # durations (s), time order

    def to_dict(self) -> dict:
        return {"gap": self.gap, "from": self.frm, "to": self.to, **self.stats, "resolution_s": self.resolution_s}


@dataclasses.dataclass
class Phases:
    phases: list[Phase]
    segments: dict[str, int]      # gaps of each kind that were split (both ends matched)
    grouping_note: str | None     # what the trace's message boundaries did to the grouping


def grouped_quantile(v: np.ndarray, q: float, step: float) -> float:
    """Quantile of values that sit on a grid of ``step`` (differences of timestamps printed
    to ``step``), with each value spread evenly over its step (the grouped-data quantile):
    an unbiased estimate of the underlying continuous quantile where the plain one snaps to
    the grid (e.g. a 36.5 µs median read as 36 µs from µs timestamps)."""
    v = np.asarray(v, float)
    v = v[np.isfinite(v)]
    if not len(v):
        return float("nan")
    m = np.round(v / step).astype(np.int64)
    vals, counts = np.unique(m, return_counts=True)
    cum = np.cumsum(counts)
    target = q * len(v)
    c = int(np.searchsorted(cum, target, side="left"))
    c = min(c, len(vals) - 1)
    below = cum[c] - counts[c]
    return float((vals[c] - 0.5 + (target - below) / counts[c]) * step)


def _clean(st: dict) -> dict:
    """Float dust (1e-19 s from subtracting equal times) shown as 0."""
    return {k: (0.0 if isinstance(v, float) and abs(v) < 1e-13 else v) for k, v in st.items()}


def boundary_rows(trace: tm.Trace, device: str | None) -> np.ndarray:
    """Rows of the events that split gaps into phases (module docstring)."""
    if device is None:
        return np.flatnonzero(np.zeros(len(trace), bool))
    dev = trace.devices.index(device) if device in trace.devices else -2
    ctl = device.split(".")[0]
    ctl_i = trace.devices.index(ctl) if ctl in trace.devices else -2
    spi = np.array([n.startswith("spi:") for n in trace.events], bool)
    gpio = np.array([n.startswith("gpio:") for n in trace.events], bool)
    sysc = np.array([n.startswith("syscalls:") for n in trace.events], bool)
    ev_spi = spi[trace.event] if len(trace.events) else np.zeros(len(trace), bool)
    keep = ev_spi & (trace.device == dev)
    # controller events (busy/idle) belong to the device whose SPI event precedes them:
    # another device's message on the same controller does not split this device's phases
    ctl_rows = np.flatnonzero(ev_spi & (trace.device == ctl_i))
    if len(ctl_rows):
        same_bus = np.array([d.split(".")[0] == ctl and "." in d for d in trace.devices], bool)
        dev_rows = np.flatnonzero(ev_spi & (trace.device >= 0) & same_bus[np.maximum(trace.device, 0)])
        prev = np.searchsorted(dev_rows, ctl_rows) - 1
        ok = prev >= 0
        ok[ok] = trace.device[dev_rows[prev[ok]]] == dev
        keep[ctl_rows[ok]] = True
    if gpio.any():
        keep |= gpio[trace.event]
    if sysc.any():
        subs = trace.rows(tm.SPI_MESSAGE_SUBMIT, device)
        if not len(subs):
            subs = trace.rows(tm.SPI_TRANSFER_START, device)
        pids = np.unique(trace.pid[subs])
        pids = pids[pids >= 0]
        if len(pids):
            keep |= sysc[trace.event] & np.isin(trace.pid, pids)
    return np.flatnonzero(keep)


@dataclasses.dataclass
class Segments:
    """The bus timeline cut at the edges of every transfer (module docstring).
    Boundary i (time order) is ``edge[i]`` (an index into EDGE_NAMES) of
    transfer ``transfer[i]`` at ``t[i]`` seconds (NaN where the capture lacks
    it: partial windows); segment i runs from boundary i to i + 1, has the gap
    kind ``kind[i]`` ("" for a clocked part) and is ``ok[i]`` to split: both
    ends known, its transfers matched to the trace."""
    t: np.ndarray
    edge: np.ndarray
    transfer: np.ndarray
    kind: np.ndarray
    ok: np.ndarray

    def sorted_t(self) -> np.ndarray:
        """``t`` made non-decreasing (a missing edge takes the one before it), for
        ``searchsorted``: an event at time x lies in segment ``searchsorted(.., x, 'right') - 1``."""
        f = np.where(np.isfinite(self.t), self.t, -np.inf)
        f = np.maximum.accumulate(f)
        f[~np.isfinite(f)] = -1e300
        return f

    def place(self, trace: tm.Trace, al: Alignment) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The trace's phase-boundary events (``boundary_rows``): (rows, bus times,
        segment of each; -1 before the first boundary)."""
        rows = boundary_rows(trace, al.device)
        tb = al.to_bus(trace.ts[rows])
        return rows, tb, np.searchsorted(self.sorted_t(), tb, side="right") - 1


def inter_transfer_gaps(a: Analysis) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every inter_transfer word gap in capture order: (its transfer, start, end in
    seconds), from the last SCLK edge of the word before to the first of the word
    after (``Analysis.pair_inter_transfer`` marks them)."""
    pit = np.flatnonzero(np.asarray(a.pair_inter_transfer, bool))
    pk = np.searchsorted(np.asarray(a.pair_off), pit, side="right") - 1
    w = np.asarray(a.word_off)[pk] + (pit - np.asarray(a.pair_off)[pk])      # pair p: words w, w + 1
    return (pk.astype(np.int64), np.asarray(a.word_last, float)[w] * a.tick_s,
            np.asarray(a.word_first, float)[w + 1] * a.tick_s)


def segments(a: Analysis, al: Alignment) -> Segments:
    """Every transfer's boundaries in time order: CS assert, first SCLK, at each
    inter-transfer word gap the last SCLK before and the first SCLK after it,
    last SCLK, CS deassert; a segment is split only where ``al`` matched its
    transfers. Vectorized: one lexsort of (transfer, place in the window, gap)."""
    n = a.n
    edges = bus_edges(a)
    E = np.stack([edges[name] for name in EDGE_NAMES], axis=1)          # n x 4
    pk, g0, g1 = inter_transfer_gaps(a)
    inner_t = np.stack([g0, g1], axis=1).reshape(-1)
    inner_edge = np.tile(np.array([2, 1]), len(pk))           # last SCLK, then first SCLK
    inner_k = np.repeat(pk, 2)
    # place in the window: assert 0, first SCLK 1, inner 2 (by word), last SCLK 3, deassert 4
    t = np.concatenate([E.reshape(-1), inner_t])
    edge = np.concatenate([np.tile(np.arange(4), n), inner_edge])
    k = np.concatenate([np.repeat(np.arange(n), 4), inner_k]).astype(np.int64)
    place = np.concatenate([np.tile(np.array([0, 1, 3, 4]), n), np.full(2 * len(pk), 2)])
    order = np.concatenate([np.zeros(4 * n, np.int64), np.arange(2 * len(pk))])     # inner: capture order
    o = np.lexsort((order, place, k))
    t, edge, k, place = t[o], edge[o], k[o], place[o]
    nseg = max(len(t) - 1, 0)
    kind = np.full(nseg, "", dtype=object)
    after = edge[:nseg]
    sk = k[:nseg]
    kind[after == 0] = "cs_setup"
    kind[(after == 2) & (place[:nseg] == 2)] = "inter_transfer"
    kind[(after == 2) & (place[:nseg] == 3)] = "cs_hold"
    gap = after == 3                                            # CS deassert → next transfer's assert
    gk = np.asarray(a.gap_kind)
    for code, name in an.KIND_NAMES.items():
        if name is not None:
            kind[gap & (gk[np.minimum(sk + 1, max(n - 1, 0))] == code)] = name
    valid = np.isfinite(t)
    m = np.append(al.matched_mask(n), False)
    ok = valid[:nseg] & valid[1:] & (kind != "") & m[sk]
    ok &= ~gap | m[np.minimum(sk + 1, n)]
    return Segments(t=t, edge=edge, transfer=k, kind=kind, ok=ok)


def split(trace: tm.Trace, al: Alignment, a: Analysis) -> Phases:
    """Phase statistics of every gap kind (module docstring)."""
    sg = segments(a, al)
    E, ok, kind_names = sg.t, sg.ok, sg.kind
    nseg = len(ok)
    # events on the bus clock, their segment
    rows, tb, seg = sg.place(trace, al)
    inside = (seg >= 0) & (seg < nseg)
    inside[inside] &= ok[seg[inside]]
    rows, tb, seg = rows[inside], tb[inside], seg[inside]
    ev_names = list(trace.events)
    name_list = ev_names + list(EDGE_NAMES)
    edge_code = len(ev_names) + np.arange(4)
    qs = np.flatnonzero(ok)
    # items: start edge (order 0), events (1), end edge (2)
    it_q = np.concatenate([qs, seg, qs])
    it_o = np.concatenate([np.zeros(len(qs), np.int8), np.ones(len(seg), np.int8), np.full(len(qs), 2, np.int8)])
    it_t = np.concatenate([E[qs], tb, E[qs + 1]])
    it_c = np.concatenate([edge_code[sg.edge[qs]], trace.event[rows].astype(np.int64), edge_code[sg.edge[qs + 1]]])
    it_src = np.concatenate([np.zeros(len(qs), np.int8), np.ones(len(seg), np.int8), np.zeros(len(qs), np.int8)])
    seq = np.arange(len(it_q))
    o = np.lexsort((seq, it_t, it_o, it_q))
    it_q, it_t, it_c, it_src = it_q[o], it_t[o], it_c[o], it_src[o]
    same = it_q[1:] == it_q[:-1]
    fq, fc, tc = it_q[:-1][same], it_c[:-1][same], it_c[1:][same]
    dur = (it_t[1:] - it_t[:-1])[same]
    pos = np.zeros(len(fq))
    if len(fq):
        span = E[fq + 1] - E[fq]
        pos = np.where(span > 0, (it_t[:-1][same] - E[fq]) / np.where(span > 0, span, 1), 0.0)
    src_pair = it_src[:-1][same] + it_src[1:][same]     # 0 bus-bus, 1 mixed, 2 trace-trace
    kinds_of = kind_names[fq] if len(fq) else np.empty(0, object)
    kind_idx = {kname: i for i, kname in enumerate(KIND_ORDER)}
    kcode = np.array([kind_idx.get(x, len(KIND_ORDER)) for x in kinds_of], np.int64) if len(fq) else \
        np.empty(0, np.int64)
    out: list[Phase] = []
    if len(fq):
        o = np.lexsort((tc, fc, kcode))
        kc, f2, t2 = kcode[o], fc[o], tc[o]
        brk = np.flatnonzero((np.diff(kc) != 0) | (np.diff(f2) != 0) | (np.diff(t2) != 0)) + 1
        starts = np.concatenate([[0], brk])
        stops = np.concatenate([brk, [len(o)]])
        res_t = trace.resolution_s
        for s0, s1 in zip(starts, stops):
            sel = o[s0:s1]
            kname = kinds_of[sel[0]]
            sp = int(src_pair[sel[0]])
            res = a.tick_s if sp == 0 else res_t if sp == 2 else res_t + a.tick_s
            st = describe(dur[sel], 1.0)
            if sp == 2 and res_t > 10 * a.tick_s:
                # both ends printed to res_t: the values sit on a grid; quantiles interpolated in the step
                st["p50_s"], st["p99_s"] = (min(max(grouped_quantile(dur[sel], q, res_t * al.b), st["min_s"]),
                                                st["max_s"]) for q in (0.5, 0.99))
            out.append(Phase(gap=str(kname), frm=name_list[int(f2[s0])], to=name_list[int(t2[s0])],
                             stats=_clean(st), resolution_s=float(res),
                             position=float(np.mean(pos[sel])), values=dur[sel]))
    out.sort(key=lambda p: (kind_idx.get(p.gap, len(KIND_ORDER)), p.position, -p.stats["n"]))
    counts: dict[str, int] = {}
    for kname in kind_names[qs]:
        counts[str(kname)] = counts.get(str(kname), 0) + 1
    return Phases(phases=out, segments={kk: counts[kk] for kk in sorted(counts, key=lambda x: kind_idx.get(x, 99))},
                  grouping_note=None)


def run(trace: tm.Trace, al: Alignment, a: Analysis) -> Phases:
    """The trace's message boundaries applied to the grouping (``regroup_from_trace``),
    then every gap split (``split``)."""
    from spigap.trace.messages import regroup_from_trace

    note = regroup_from_trace(trace, al, a)
    res = split(trace, al, a)
    res.grouping_note = note
    return res
