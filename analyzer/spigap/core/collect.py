"""Batches -> one analysis: every transfer in memory, or past a bound, histograms.

The consumer of the pipeline (core/pipeline.py) for ``spigap analyze`` and all
that builds on its result. It measures each batch (core/measure.py) with the
last window of the previous batch in front, so the gap before its first
transfer is known.

Up to ``RETAIN_TRANSFERS`` transfers (or always, with ``keep="all"``) the result
is an ``Analysis`` with every transfer's figures in arrays (about 450 bytes per
transfer with the framer's output): what ``check``, ``compare``, ``report``,
``batch`` and ``--device``/``--event`` work on. The batches are measured once,
together, at the end.

A longer capture is measured batch by batch and nothing per transfer is kept
(a ``BoundedAnalysis``):

* gap statistics: one exact histogram of tick values per gap kind
  (``core/tickhist.py``): n, min, max, mean, p50 and p99 are those of
  ``describe()`` on the whole array (std to rounding);
* decisions that need a population are made once, on the first
  ``LEARN_TRANSFERS`` transfers (exactly as they are made on a whole capture
  that holds no more): the message structure (the pattern search looks at the
  first 16 384 gaps anyway; the structure is then carried on by the gap index,
  a split by length by the same threshold) and the inter-byte / inter-transfer
  threshold of word gaps (unless given);
* stalls: the stall threshold of each kind comes from its whole-capture
  histogram (median and MAD are exact); the gaps that can exceed it are the
  longest ones, kept in a store of at most ``STALL_KEEP`` per kind (when a
  kind has more stalls than that, counts and time lost come from the
  histogram and the list holds the longest; a warning says so);
* counts (transfers, partial ones, words, messages, the rate, warnings,
  the settings check) add up batch by batch;
* per-transfer rows (``--transfers``, CSV, JSON lines) go to the ``rows`` sink
  as each batch is measured, never collected.

``keep="sample"`` keeps a systematic sample of the transfers instead (compare,
report). docs/gaps.md, "Long captures", says the same for users.
"""

from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import math
import threading
from typing import Callable

import numpy as np

from spigap.findings import Cause, Finding
from spigap.core import analysis, grouping as grouping_mod, settings_check
from spigap.core import stalls as stalls_mod
from spigap.core.analysis import AMBIGUOUS_KINDS, GAP_KINDS
from spigap.core.config import SpiConfig
from spigap.core.framed import Batch, Framed, FramerFigures
from spigap.core.gaprules import defs as gapdefs
from spigap.core.measure import WarnCounts, warning_lines
from spigap.core.measurer import Measurer
from spigap.core.pipeline import Lane
from spigap.core.tickhist import TickHistogram
from spigap.io.base import CaptureInfo

RETAIN_TRANSFERS = 100_000     # up to this many transfers: the whole Analysis, with its arrays
LEARN_TRANSFERS = RETAIN_TRANSFERS   # decisions (message structure, word-gap split) on this many
STALL_KEEP = 1 << 16           # stall candidates kept per gap kind
ROWS_AT_ONCE = 4096            # transfer rows handed to the sink at a time
# Past the first LEARN_TRANSFERS, transfers are measured in groups of MEASURE_AT_ONCE (fewer,
# larger numpy calls: the per-batch cost is mostly per call), or fewer when their words make
# MEASURE_ROWS rows (transfers + words: what the memory of a group grows with), and at most
# QUEUED_ROWS rows wait for the statistics thread.
MEASURE_AT_ONCE = 1 << 15
MEASURE_ROWS = 1 << 17
QUEUED_ROWS = 1 << 18
HIST_KINDS = GAP_KINDS + ("idle",) + AMBIGUOUS_KINDS
STORE_KINDS = stalls_mod.STALL_KINDS + AMBIGUOUS_KINDS

# rows(batch_analysis, k0, k1, index0, message0): transfers k0..k1-1 of the batch's analysis,
# whose transfer 0 is the capture's transfer index0 in its message message0 (output/rows.py
# formats them); returns False when it wants no more
RowSink = Callable[[analysis.Analysis, int, int, int, int], "bool | None"]
# measured(batch_analysis, skip, index0): transfers skip..n-1 of a measured group (its transfer 0
# is the capture's transfer index0), once per group, before its rows go to the RowSink
MeasuredSink = Callable[[analysis.Analysis, int, int], None]
SAMPLE_BLOCK = 1000            # consecutive transfers per block of a sampled capture (compare, report)
KEEP = ("all", "bounded", "sample")
# the figures of a bounded analysis that are the whole capture's (an Analysis of a sample takes them)
WHOLE_CAPTURE = ("info", "cfg", "tick_s", "end_tick", "truncated", "grouping", "period_ticks",
                 "inter_transfer_threshold", "word_gaps_note", "idle_timeout_ticks", "engine", "clk_outside_cs",
                 "min_high", "min_low", "setting_warnings", "sources", "buses")


class Sampler:
    """A systematic sample of blocks of consecutive transfers in bounded memory.

    Block b (transfers b·block .. b·block + block - 1 of the capture) is kept while
    b is a multiple of ``stride``; when more than ``cap`` transfers are kept, the
    stride doubles and every other kept block goes (so the sample stays evenly
    spread over the whole capture, whatever its length, and never exceeds ``cap``
    transfers plus one batch). Inside a block every figure is exact; the gap
    before each block's first transfer and the period into it are left out
    (``Analysis.breaks``), as their neighbour is not in the sample. The block
    bootstrap of compare then resamples blocks of consecutive values inside these
    blocks (its block length is far below ``block``), docs/compare-and-report.md.
    """

    def __init__(self, cap: int, block: int):
        self.cap = max(cap, block)
        self.block = block
        self.stride = 1
        # (block, starts it, piece, capture index of its first transfer)
        self.pieces: list[tuple[int, bool, analysis.Analysis, int]] = []
        self.kept = 0

    def add(self, a: analysis.Analysis, skip: int, g0: int, msg0: int) -> None:
        if a.n <= skip:
            return
        g = g0 + np.arange(skip, a.n)
        blk = g // self.block
        keep = blk % self.stride == 0
        if not keep.any():
            return
        # runs of kept transfers, cut where a block starts
        k = np.flatnonzero(keep) + skip
        cuts = np.flatnonzero((np.diff(k) != 1) | ((g0 + k[1:]) % self.block == 0)) + 1
        for run in np.split(k, cuts):
            k0, k1 = int(run[0]), int(run[-1]) + 1
            piece = analysis.take(a, k0, k1, msg0)
            self.pieces.append((int((g0 + k0) // self.block), (g0 + k0) % self.block == 0, piece, g0 + k0))
            self.kept += k1 - k0
        while self.kept > self.cap:
            self.stride *= 2
            self.pieces = [p for p in self.pieces if p[0] % self.stride == 0]
            self.kept = sum(p[2].n for p in self.pieces)

    def keeps(self, g: np.ndarray) -> np.ndarray:
        """Which of the capture's transfers ``g`` the sample holds so far (what it drops
        later goes with its block: ``indices`` tells at the end)."""
        return (g // self.block) % self.stride == 0

    def indices(self) -> np.ndarray:
        """The capture index of every transfer of the sample, in its order."""
        if not self.pieces:
            return np.empty(0, np.int64)
        return np.concatenate([np.arange(p[3], p[3] + p[2].n, dtype=np.int64) for p in self.pieces])

    def analysis(self, b: "BoundedAnalysis") -> analysis.Analysis:
        """The sample as one Analysis: its blocks' arrays, the whole capture's figures from
        ``b`` (made once, not patched afterwards)."""
        a = analysis.join([p[2] for p in self.pieces])
        breaks = np.zeros(a.n, bool)
        at = np.cumsum([0] + [p[2].n for p in self.pieces[:-1]])
        breaks[at[[p[1] for p in self.pieces]]] = True
        sample = {"transfers": b.n, "sampled": a.n, "block": self.block, "stride": self.stride,
                  "messages": b.n_messages(), "transfer_rate_hz": b.transfer_rate_hz(),
                  "method": f"systematic sample: blocks of {self.block} consecutive transfers, one in "
                            f"every {self.stride}"}
        warnings = list(b.warnings) + [
            f"statistics from a systematic sample of {a.n} of the capture's {b.n} transfers (blocks of "
            f"{self.block} consecutive transfers, one in every {self.stride}; docs/compare-and-report.md)"]
        return dataclasses.replace(a, **b.capture_figures(), gap_before=np.where(breaks, np.nan, a.gap_before),
                                   gap_kind=np.where(breaks, analysis.KIND_NONE, a.gap_kind).astype(a.gap_kind.dtype),
                                   breaks=breaks, sample=sample, warnings=warnings)


# ------------------------------------------------------------------ stalls
class _StallStore:
    """The longest gaps of one kind, in time order: every gap above ``cutoff`` (raised as
    the store fills, so at most ``cap`` entries are held)."""

    def __init__(self, cap: int = STALL_KEEP):
        self.cap = cap
        self.cutoff = -math.inf
        self._parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self._n = 0

    def add(self, at: np.ndarray, v: np.ndarray, tr: np.ndarray) -> None:
        keep = v > self.cutoff
        if not keep.any():
            return
        self._parts.append((at[keep], v[keep], tr[keep]))
        self._n += int(keep.sum())
        if self._n > self.cap:
            at, v, tr = self.arrays()
            k = len(v) - self.cap // 2
            self.cutoff = max(self.cutoff, float(np.partition(v, k)[k]))
            keep = v > self.cutoff
            self._parts = [(at[keep], v[keep], tr[keep])]
            self._n = int(keep.sum())

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if not self._parts:
            return np.empty(0, np.int64), np.empty(0), np.empty(0, np.int64)
        if len(self._parts) > 1:
            at, v, tr = (np.concatenate(x) for x in zip(*self._parts))
            self._parts = [(at, v, tr)]
        return self._parts[0]


# ------------------------------------------------------------------ result
@dataclasses.dataclass
class BoundedAnalysis(analysis.DeviceFigures):
    """An analysis without per-transfer arrays: what ``--format json`` and the text
    report show, from histograms and counts (the output modules call the same methods
    on an ``Analysis``)."""

    info: CaptureInfo
    cfg: SpiConfig
    tick_s: float
    end_tick: int
    truncated: str | None
    grouping: grouping_mod.Grouping
    period_ticks: float | None
    inter_transfer_threshold: float | None
    word_gaps_note: str
    idle_timeout_ticks: int | None
    engine: str
    clk_outside_cs: int
    min_high: int | None
    min_low: int | None
    hists: dict
    stores: dict
    counts: WarnCounts
    n_words: int
    starts: analysis.StartSpan     # the starts of transfers with a real start (the rate)
    last_message: int
    warnings: list = dataclasses.field(default_factory=list)
    setting_warnings: list = dataclasses.field(default_factory=list)
    sources: dict = dataclasses.field(default_factory=dict)     # core/infer/, as in Analysis
    buses: list = dataclasses.field(default_factory=list)
    device: str | None = None
    labels: None = None
    events: None = None
    stalls: object = None          # core/stalls.StallReport (core/run.py)
    bus: None = None               # a bounded device's bus columns went out with its rows
    pins: object = None            # --pins: spigap.pins.result.PinResult, as in Analysis

    @property
    def n(self) -> int:
        return self.counts.n

    @property
    def in_memory(self) -> bool:
        return False

    def capture_figures(self) -> dict:
        """The whole capture's figures that an ``Analysis`` of a sample of its transfers
        carries as they are (collect.Sampler.analysis)."""
        return {f: getattr(self, f) for f in WHOLE_CAPTURE}

    def n_partial(self) -> int:
        return self.counts.partial

    def n_words_total(self) -> int:
        return self.n_words

    def n_messages(self) -> int | None:
        if self.n == 0:
            return 0
        if self.grouping.ambiguous:
            return None
        return self.last_message + 1

    def transfer_rate_hz(self) -> float | None:
        return self.starts.rate_hz(self.tick_s)

    def describe_kind(self, kind: str) -> dict:
        return self.hists[kind].describe(self.tick_s)

    def idle_clocks_p50(self) -> float | None:
        """The median of ``Analysis.idle_clocks()``: (gap - T/2) / T rises with the gap, so its
        middle order statistics are those of the inter-byte gaps."""
        h = self.hists["inter_byte"]
        if not self.period_ticks or h.n == 0:
            return None
        n = h.n
        values, counts = h.table()
        cum = np.cumsum(counts)
        hi = n // 2
        idx = np.searchsorted(cum, [hi - 1, hi] if n % 2 == 0 else [hi], side="right")
        ic = gapdefs.idle_clocks(values[idx].astype(float), self.period_ticks)
        x = float(ic[0]) if n % 2 else float((ic[0] + ic[1]) / 2)
        return None if math.isnan(x) else x

    # ---------------------------------------------------------- stalls
    def gap_center(self, kind: str) -> tuple[int, float | None, float | None]:
        h = self.hists.get(kind)
        if h is None or h.n == 0:
            return 0, None, None
        med = h.median()
        return h.n, med, h.mad(med)

    def gaps_above(self, kind: str, threshold: float) -> analysis.GapSeries:
        store = self.stores.get(kind)
        if store is None:
            return analysis.GapSeries(kind, np.empty(0, np.int64), np.empty(0), np.empty(0, np.int64))
        at, v, tr = store.arrays()
        m = v > threshold
        return analysis.GapSeries(kind, at[m], v[m], tr[m])

    def stalls_beyond_list(self, kind: str, med: float, threshold: float) -> tuple[int, float, float] | None:
        """A kind with more stalls than the store holds: counts, time lost and the longest
        from the histogram (the list has the longest ones)."""
        store = self.stores.get(kind)
        if store is None or threshold >= store.cutoff:
            return None
        h = self.hists[kind]
        k, total = h.sum_above(threshold)
        return k, total - k * med, float(h.max)


# ------------------------------------------------------------------ the run


class Collector:
    """Takes one device's batches of the pipeline (``add``) and makes its result (``result``).

    ``keep``: "all" (every transfer, one measurement at the end), "bounded" (the same up
    to ``retain`` transfers, else a BoundedAnalysis, rows to ``rows`` as measured) or
    "sample" (a systematic sample past ``retain``: ``Sampler``). Defaults: the module's
    ``RETAIN_TRANSFERS``, ``LEARN_TRANSFERS`` (at least ``retain``), ``STALL_KEEP``,
    ``SAMPLE_BLOCK``. Past the bound the batches are measured by core/measurer.py's
    incremental measurer in the statistics thread."""

    def __init__(self, lane: Lane, *, keep: str = "bounded", rows: RowSink | None = None,
                 retain: int | None = None, learn: int | None = None, stall_keep: int | None = None,
                 block: int | None = None, grouper=None, measured: MeasuredSink | None = None):
        if keep not in KEEP:
            raise ValueError(f"keep must be one of {KEEP}, not {keep!r}")
        self.lane, self.rows = lane, rows
        # called once per measured group (before its rows go to ``rows``): a shared bus's
        # per-transfer bus columns and interleaving, over the whole group at once (core/bus.DeviceFeed)
        self.measured = measured
        # held while a group is measured: a shared bus's collectors take turns (their
        # decisions do not), so their statistics threads do not contend for the GIL
        self.serial: threading.Lock | None = None
        if keep == "all":
            self.retain = self.learn = math.inf
        else:
            self.retain = RETAIN_TRANSFERS if retain is None else retain
            self.learn = max(LEARN_TRANSFERS if learn is None else learn, self.retain)
        self.sampler: Sampler | None = None
        if keep == "sample":
            self.sampler = Sampler(int(self.retain), SAMPLE_BLOCK if block is None else block)
        self.info = lane.info
        self.tick_s = self.info.tick_s
        self.cfg = lane.cfg
        # the incremental measurer: a device of a shared bus groups its gaps knowing the other
        # devices' transfers in them (core/bus.BusGrouper); None: grouping.infer
        self.measurer = Measurer(self.info, self.cfg, grouper)
        self.parts: list[Framed] | None = []
        self.learn_n = 0
        self.result_: analysis.Analysis | None = None
        self.figures: FramerFigures | None = None      # the framer's figures with the last batch
        # bounded mode
        self.hists = {k: TickHistogram() for k in HIST_KINDS}
        self.stores = {k: _StallStore(STALL_KEEP if stall_keep is None else stall_keep) for k in STORE_KINDS}
        self.counts = WarnCounts()
        self.evidence = settings_check.Evidence()
        self.n_words = 0
        self.starts = analysis.StartSpan()
        self.last_message = 0
        # framer batches not grouped for measuring yet: (batch, transfers, rows)
        self.pending: list[tuple[Framed, int, int]] = []
        self.n_pending = 0
        self.rows_pending = 0
        # the statistics thread: decisions and measurements, in capture order
        self.stats: concurrent.futures.ThreadPoolExecutor | None = None
        self.queued: collections.deque = collections.deque()     # (future, rows)
        self.n_queued = 0

    def close(self) -> None:
        """Drop what is queued (after an error or Ctrl-C); nothing when the run completed."""
        if self.stats is not None:
            self.stats.shutdown(wait=False, cancel_futures=True)
            self.stats = None

    def result(self) -> "analysis.Analysis | BoundedAnalysis":
        """The capture's analysis, once the last batch was added."""
        self._wait(0)
        if self.result_ is not None:
            return self.result_
        end_tick = self.lane.end_tick
        assert end_tick is not None, "result() before the last batch"
        return self._result(end_tick)

    # ---------------------------------------------------------- batches
    def add(self, batch: Batch) -> None:
        """One batch of the pipeline (the last one closes the capture)."""
        framed, self.figures = batch.framed, batch.figures
        end_tick = self.lane.end_tick if batch.final else None
        n = framed.n
        if self.parts is not None:
            if n or not self.parts:
                self.parts.append(framed)
                self.learn_n += n
            if end_tick is None and self.learn_n <= self.learn:
                return
            whole = Framed.concat(self.parts)
            self.parts = None
            if end_tick is not None and self.learn_n <= self.retain:
                # a capture that fits: every transfer, measured at once
                a = self.measurer.whole(whole, batch.figures, end_tick, self.lane.truncated)
                self.result_ = settings_check.settings_first(a, self.lane.settled, self.lane.prefix)
                return
            # decisions and measurements run in the statistics thread, in order, while this
            # thread feeds the framer; each reads the framer's running figures as they
            # were when its batch was taken, so nothing depends on the threads' timing
            self.stats = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="spigap-stats")
            self._queue(self._decide, whole, self.learn_n + whole.n_words, batch.figures)
            return
        if n:
            rows = n + framed.n_words
            self.pending.append((framed, n, rows))
            self.n_pending += n
            self.rows_pending += rows
        while self.pending and (self.n_pending >= MEASURE_AT_ONCE or self.rows_pending >= MEASURE_ROWS
                                or end_tick is not None):
            n_group = rows = k = 0
            while k < len(self.pending) and n_group < MEASURE_AT_ONCE and rows < MEASURE_ROWS:
                n_group += self.pending[k][1]
                rows += self.pending[k][2]
                k += 1
            group, self.pending = self.pending[:k], self.pending[k:]
            self.n_pending -= n_group
            self.rows_pending -= rows
            self._queue(self._measure, [g[0] for g in group], rows, batch.figures)

    def _queue(self, job, framed, rows: int, figures: FramerFigures) -> None:
        assert self.stats is not None
        self._wait(QUEUED_ROWS - rows)
        fut = self.stats.submit(job, framed, figures)
        self.queued.append((fut, rows))
        self.n_queued += rows

    def _wait(self, at_most: int) -> None:
        """Until at most ``at_most`` rows wait for the statistics thread (its errors raise here)."""
        while self.queued and (self.n_queued > at_most or self.queued[0][0].done()):
            fut, n = self.queued.popleft()
            self.n_queued -= n
            fut.result()
        if self.stats is not None and not self.queued and at_most == 0:
            self.stats.shutdown(wait=True)
            self.stats = None

    def _decide(self, framed: Framed, figures: FramerFigures) -> None:
        """Measure the first batch and fix what needs a population: grouping, word-gap split."""
        self._take(self.measurer.first(framed, figures), 0, 0, 0)

    def _measure(self, parts: list[Framed], figures: FramerFigures) -> None:
        """Measure consecutive framer batches as one, after the last window measured
        before them (the context: it gives the gap before the first one)."""
        if self.serial is None:
            self._measure_parts(parts, figures)
        else:
            with self.serial:
                self._measure_parts(parts, figures)

    def _measure_parts(self, parts: list[Framed], figures: FramerFigures) -> None:
        a, skip, g0 = self.measurer.next(parts, figures)
        self._take(a, skip, g0, self.last_message if skip else 0)

    def _take(self, a: analysis.Analysis, skip: int, g0: int, msg0: int) -> None:
        """Add transfers ``skip``.. of ``a`` (capture index ``g0`` + k) to the histograms,
        stall stores, counts and rows."""
        if a.n <= skip:
            return
        kinds = [k for k in HIST_KINDS if a.grouping.ambiguous or k not in ("class_a", "class_b")]
        for kind, s in stalls_mod.gap_series_of(a, kinds).items():
            # the context's period counts now: its successor only arrived in this batch
            keep = s.transfer >= (0 if kind == "transfer_period" else skip)
            v = s.values[keep]
            if not len(v):
                continue
            self.hists[kind].add(v)
            if kind in self.stores:
                self.stores[kind].add(s.at[keep], v, s.transfer[keep] + g0)
        if self.sampler is not None:
            self.sampler.add(a, skip, g0, msg0)
        self.counts.add(WarnCounts.of(a, skip))
        self.evidence.add(settings_check.Evidence(a, skip))
        self.n_words += int(a.n_words[skip:].sum())
        self.starts.add(a.start[skip:][~a.partial_start[skip:]])
        self.last_message = msg0 + int(a.message[-1])
        if self.measured is not None:
            self.measured(a, skip, g0)
        if self.rows is not None:
            for k in range(skip, a.n, ROWS_AT_ONCE):
                if self.rows(a, k, min(k + ROWS_AT_ONCE, a.n), g0, msg0) is False:
                    self.rows = None          # the sink has all it wants (text: the first 50)
                    break

    def _result(self, end_tick: int) -> "BoundedAnalysis | analysis.Analysis":
        f = self.figures
        assert f is not None
        m = self.measurer
        if m.grouping is None:      # cannot happen: a bounded run measured a first batch
            raise AssertionError("no grouping")
        b = BoundedAnalysis(
            info=self.info, cfg=self.cfg, tick_s=self.tick_s, end_tick=end_tick, truncated=self.lane.truncated,
            grouping=m.noted(m.grouping), period_ticks=f.period_ticks, inter_transfer_threshold=m.thr,
            word_gaps_note=m.wg_note, idle_timeout_ticks=f.idle_timeout, engine=f.engine,
            clk_outside_cs=f.clk_outside_cs, min_high=f.min_high, min_low=f.min_low, hists=self.hists,
            stores=self.stores, counts=self.counts, n_words=self.n_words, starts=dataclasses.replace(self.starts),
            last_message=self.last_message)
        w = list(self.info.warnings)
        if m.wg_warning:
            w.append(m.wg_warning)
        w += warning_lines(b, self.counts, f.first_clk_outside)
        for kind, h in self.hists.items():
            if not h.exact:
                w.append(Finding(f"{kind}: {h.n} gaps spread over more than {h.max_distinct} distinct values; their "
                         f"p50/p99/std are from bins of {1 << h.shift} samples (docs/gaps.md, 'Long captures')", Cause.NOTE))
        b.warnings = w
        b = settings_check.settings_first(b, self.lane.settled, self.lane.prefix, self.evidence)
        return self.sampler.analysis(b) if self.sampler is not None else b
