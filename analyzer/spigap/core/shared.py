"""A shared bus: every device on one SPI controller, in one pass (docs/shared-bus.md).

The pipeline of core/pipeline.py for several CS lines on one SCLK/MOSI/MISO: the
edge stream (SCLK, the first CS, MOSI, MISO, then the other CS lines) is read
once; each block goes to

* one framer per device (the compiled core or numpy, ``make_framer``), each with
  its own CS bit and its own settings (mode, word size, polarity: the SPI core
  sets them per device). On the compiled core they are fed together in one pass
  over the block (cframer.CBusFramer: each entry goes to the devices it concerns),
  so framing N devices costs about one device's framing; the numpy engine feeds
  each framer the block (the same windows and words);
* the bus tracker (core/bus.py): handovers, busy time, two CS lines asserted at
  once, SCLK with no CS asserted, and per transfer the other devices' activity in
  the gap before it.

Each device's batches go to its own consumer (``collect.Collector`` for analyze
and everything built on it), which measures them exactly as for a capture with
that one CS line: the per-device figures are the single-device figures. Each
group of transfers a collector measures goes through ``SharedAnalyzer``'s
``measured`` hook, which takes that device's bus columns for the whole group once
and counts the interleaving (another device's windows inside a device's
CS-inactive gaps, per gap kind), in bounded memory; the transfer rows handed out
(CSV, JSON lines) carry slices of those columns.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Callable

import numpy as np

from spigap.core import collect
from spigap.core import grouping as grouping_mod
from spigap.core.analysis import KIND_NAMES, Analysis
from spigap.core.bus import BusTracker, DeviceColumns
from spigap.core.gaprules import split
from spigap.core.quantile import median, percentiles
from spigap.core.config import SpiConfig
from spigap.core.framed import Batch, FramerFigures
from spigap.core.framing import make_framer
from spigap.core.infer.report import Settled
from spigap.core.pipeline import feed_stream
from spigap.core.settings_check import Prefix
from spigap.core.tickhist import TickHistogram
from spigap.io.base import CaptureReader

# gap kinds whose gaps the interleaving is counted for (docs/shared-bus.md)
GAP_KINDS = ("cs_change", "context_switch", "class_a", "class_b")
SETTLE_SHARE = 0.9      # of the known message ends in one class of an ambiguous grouping: it is the context switch
SURE = 0.9              # a pattern answer this confident is kept as it is (the grouping's "busy" level)


class DevicePipe:
    """What a consumer reads of its pipeline (``info``, ``cfg``, ``settled``, ``prefix``,
    ``framer``, ``truncated``, ``interrupted``, ``end_tick``), for one device of a shared bus."""

    def __init__(self, shared: "SharedPipeline", k: int, cfg: SpiConfig, settled: Settled, framer):
        self.shared, self.k = shared, k
        self.info = shared.info
        self.cfg = cfg
        self.settled = settled
        self.framer = framer
        self.prefix = Prefix()

    @property
    def truncated(self) -> str | None:
        return self.shared.truncated

    @property
    def end_tick(self) -> int | None:
        return self.shared.end_tick

    @property
    def interrupted(self) -> bool:
        return self.shared.interrupted


class SharedPipeline:
    """One opened capture of a shared bus on its way through the devices' framers."""

    def __init__(self, reader: CaptureReader, settled: Settled):
        self.reader = reader
        self.info = reader.info
        self.settled = settled
        self.cfg = settled.cfg
        self.names = self.cfg.devices
        full = {n: j for j, n in enumerate(settled.names)}
        assert self.cfg.clk is not None
        self.truncated: str | None = None
        self.interrupted = False
        self.end_tick: int | None = None
        by_cs = {d.cs: d for d in settled.devices}
        self.pipes: list[DevicePipe] = []
        self.framers = []
        self._repack: list[list[int]] = []
        cs_bits = [full[n] for n in self.names]
        actives = []
        for name in self.names:
            d = by_cs.get(name)
            actives.append(0 if (d.cfg if d is not None else self.cfg).cs_active_low else 1)
        ev_mask = sum(1 << b for b in cs_bits)
        for k, name in enumerate(self.names):
            d = by_cs.get(name)
            dcfg = d.cfg if d is not None else dataclasses.replace(self.cfg, cs=name, more_cs=())
            sources = d.sources if d is not None else dict(settled.sources)
            dsettled = dataclasses.replace(settled, cfg=dcfg, names=dcfg.stream_names(), sources=sources,
                                           warnings=[], devices=[])
            bits = {role: full[n] for role, n in (("clk", dcfg.clk), ("cs", name), ("mosi", dcfg.mosi),
                                                   ("miso", dcfg.miso)) if n is not None}
            # the first device's framer also writes every CS change (the bus tracker's input) and
            # counts the SCLK edges while no CS line is asserted
            bus = (ev_mask, ev_mask & ~(1 << full[name]),
                   sum((1 - a) << b for a, b, n in zip(actives, cs_bits, self.names) if n != name)) if k == 0 else (0, 0, 0)
            self.framers.append(make_framer(dcfg, bits, self.info.tick_s, bus=bus))
            self.pipes.append(DevicePipe(self, k, dcfg, dsettled, self.framers[-1]))
            self._repack.append([full[n] for n in dcfg.stream_names()])
        self.tracker = BusTracker(self.names, cs_bits, actives, full[self.cfg.clk])
        # the compiled core frames every device in one pass (cframer.CBusFramer); the numpy
        # engine feeds each framer the block
        from spigap.core.cframer import CBusFramer, CFramer

        inner = [getattr(f, "inner", f) for f in self.framers]     # a BigWordFramer's chunk framer
        compiled = [f for f in inner if isinstance(f, CFramer)]
        self.group: CBusFramer | None = CBusFramer(compiled) if len(compiled) == len(inner) else None

    def _figures(self, k: int) -> FramerFigures:
        # a device's framer counts the other devices' clock edges as outside its CS: the
        # bus's SCLK edges with no CS asserted are the tracker's
        return dataclasses.replace(FramerFigures.of(self.framers[k]), clk_outside_cs=0, first_clk_outside=None)

    def run(self, on_batch: Callable[[int, Batch], None], *, take: bool = True, lag: bool = False,
            interruptible: bool = False) -> None:
        """Feed the edge stream to every device's framer and the bus tracker; hand each
        device's batches to ``on_batch(device index, batch)`` (as ``Pipeline.run``)."""
        tracker = self.tracker

        def step(block, last: int) -> None:
            if tracker.prev is None:
                tracker.begin(int(block.ticks[0]), int(block.states[0]))
            if self.group is not None:
                self.group.feed(block)
            for k, f in enumerate(self.framers):
                if self.group is None:
                    f.feed(block)
                p = self.pipes[k].prefix
                if p.n < p.limit:
                    p.add(block.ticks, _repack(block.states[:p.limit - p.n], self._repack[k]))
            if take:
                batches = [Batch(f.take(lag=lag), self._figures(k), last) for k, f in enumerate(self.framers)]
                # the CS changes the batches' windows start and end at (the first framer's):
                # the bus columns of every window handed out exist before it is measured
                tracker.feed_events(self.framers[0].last_events)
                for k, b in enumerate(batches):
                    on_batch(k, b)

        # the one loop over the stream (pipeline.feed_stream), every device's framer fed from it
        self.end_tick, self.truncated, self.interrupted = feed_stream(self.settled.blocks, self.reader, step,
                                                                      interruptible=interruptible)
        end = self.end_tick
        if tracker.prev is None:
            tracker.begin(0, 0)
        finals = [Batch(f.finish(end), self._figures(k), None) for k, f in enumerate(self.framers)]
        if self.group is not None:
            self.group.close()
        tracker.feed_events(self.framers[0].last_events)
        f0 = self.framers[0]
        tracker.stray = (int(f0.clk_outside_cs), f0.first_clk_outside)
        tracker.finish(end)
        for k, b in enumerate(finals):
            on_batch(k, b)


def _repack(states: np.ndarray, src: list[int]) -> np.ndarray:
    """States re-packed with bit j = bit ``src[j]`` of the stream (a device's own layout)."""
    out = np.zeros(len(states), np.uint32)
    for j, b in enumerate(src):
        out |= ((states >> np.uint32(b)) & np.uint32(1)) << np.uint32(j)
    return out


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

    def __init__(self, sampler: collect.Sampler):
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
class SharedGrouper:
    """Message grouping for one device of a shared bus (collect.Collector's ``grouper``).

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


# ------------------------------------------------------------------ the result
@dataclasses.dataclass
class SharedAnalysis:
    """Every device of one shared bus: each device's analysis (an ``Analysis`` or
    ``collect.BoundedAnalysis``, as for a capture with that one CS line), the bus
    figures (``bus``: core/bus.BusTracker) and each device's interleaving."""

    info: object
    cfg: SpiConfig
    tick_s: float
    end_tick: int
    truncated: str | None
    devices: dict
    bus: BusTracker
    interleave: dict
    columns: dict              # device -> the bus columns of every transfer (in-memory results), else None
    warnings: list
    sources: dict
    buses: list
    engine: str
    shared = True

    def bus_warnings(self) -> list[str]:
        """The bus's findings as warnings: two CS lines at once (error), SCLK with no CS."""
        t = self.tick_s
        out = []
        b = self.bus
        if b.n_overlaps:
            first = b.overlaps[0]
            out.append(f"ERROR: {b.n_overlaps} time(s) two CS lines were asserted at once "
                       f"({sum(1 for _ in b.overlaps)} listed; first at {first.start * t * 1e6:.6g} µs, "
                       f"{'+'.join(self.bus.names[d] for d in first.devices)}): only one device may drive the "
                       "shared MISO line")
        if b.stray[0]:
            out.append(f"{int(b.stray[0])} SCLK edge(s) while no CS was asserted (first at "
                       f"{(b.stray[1] or 0) * t * 1e6:.6g} µs)")
        return out


class SharedAnalyzer:
    """The consumers of one shared bus's batches: one Collector per device, and the
    interleaving counts from the rows the collectors hand out."""

    def __init__(self, pipe: SharedPipeline, *, keep: str, rows=None, **limits):
        self.pipe = pipe
        self.out_rows = rows
        self.inter = [Interleave() for _ in pipe.names]
        # each device's bus columns of the group being measured (from its capture index on):
        # taken once per group, the rows handed out slice them
        self._cols: list[tuple[int, dict[str, np.ndarray]] | None] = [None] * len(pipe.names)
        self.collectors = [collect.Collector(p, keep=keep, rows=self._sink(k) if rows is not None else None,
                                             measured=self._measured(k), **limits,
                                             grouper=SharedGrouper(pipe.tracker.columns[k]))
                           for k, p in enumerate(pipe.pipes)]
        serial = threading.Lock()
        for c in self.collectors:
            c.serial = serial
        # keep="sample": each device's bus columns of the transfers its sample holds (compare's
        # "who held the bus" on the same sample as the rest of its figures)
        self.sampled = [SampledColumns(c.sampler) if c.sampler is not None else None for c in self.collectors]

    def _measured(self, k: int):
        columns = self.pipe.tracker.columns[k]

        def measured(a, skip: int, g0: int) -> None:
            # one group's transfers at once (not per handed-out chunk of rows): the same
            # counts and histograms in fewer, larger numpy calls
            cols = columns.take(g0 + skip, g0 + a.n)
            self.inter[k].add(a.gap_kind[skip:], a.gap_before[skip:], cols)
            sampled = self.sampled[k]
            if sampled is not None:
                sampled.add(g0 + skip, cols)
            self._cols[k] = (g0 + skip, cols)
            columns.release(g0 + a.n - 1)       # the last one is the next batch's context
        return measured

    def _sink(self, k: int):
        def rows(a, k0: int, k1: int, g0: int, msg0: int) -> bool:
            if self.out_rows is None:           # another device's sink was told: no more
                return False
            held = self._cols[k]
            assert held is not None
            first, cols = held
            i0, i1 = g0 + k0 - first, g0 + k1 - first
            bus = {"columns": {c: v[i0:i1] for c, v in cols.items()}, "devices": self.pipe.names}
            if self.out_rows(a, k0, k1, g0, msg0, bus) is False:
                self.out_rows = None
                return False
            return True
        return rows

    def add(self, k: int, batch: Batch) -> None:
        self.collectors[k].add(batch)

    def close(self) -> None:
        for c in self.collectors:
            c.close()

    def result(self) -> SharedAnalysis:
        pipe = self.pipe
        results: dict = {}
        columns: dict[str, dict | None] = {}
        for k, (name, c) in enumerate(zip(pipe.names, self.collectors)):
            a = c.result()
            results[name] = a
            columns[name] = None
            if not self.inter[k].seen and isinstance(a, Analysis) and a.sample is None:
                # measured at once at the end (the capture fits): the rows were not handed out
                cols = pipe.tracker.columns[k].take(0, a.n)
                self.inter[k].add(a.gap_kind, a.gap_before, cols)
                columns[name] = cols
            elif isinstance(a, Analysis) and a.sample is not None and (sampled := self.sampled[k]) is not None:
                columns[name] = sampled.result()
        s = pipe.settled
        first = next(iter(results.values()))
        sa = SharedAnalysis(info=pipe.info, cfg=pipe.cfg, tick_s=pipe.info.tick_s, end_tick=pipe.end_tick or 0,
                            truncated=pipe.truncated, devices=results, bus=pipe.tracker,
                            interleave=dict(zip(pipe.names, self.inter)), columns=columns,
                            warnings=list(s.warnings), sources=s.sources, buses=s.buses, engine=first.engine)
        sa.warnings += sa.bus_warnings()
        return sa


def analyze(reader: CaptureReader, settled: Settled, *, keep: str = "all", rows=None, **limits) -> SharedAnalysis:
    """Analyze every device of a shared bus (``settled.cfg.more_cs``); as pipeline.analyze.
    ``rows(a, k0, k1, index0, message0, bus)``: each device's transfer rows past the
    in-memory bound (``a.cfg.cs`` names the device; ``bus``: {"columns": its bus columns
    from transfer k0 on, "devices": the bus's CS lines})."""
    pipe = SharedPipeline(reader, settled)
    sa = SharedAnalyzer(pipe, keep=keep, rows=rows, **limits)
    try:
        pipe.run(sa.add, take=keep != "all", lag=True)
        return sa.result()
    finally:
        sa.close()
