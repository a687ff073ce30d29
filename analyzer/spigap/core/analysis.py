"""The result of analyzing one capture: ``Analysis``, every transfer's gaps in arrays.

Made by the pipeline (core/pipeline.py: frame, measure, group); read by every
output and by check, compare, report and trace. Definitions are in docs/gaps.md.
Internally every time is an integer number of ticks (one tick = one sample
period = the resolution); they become seconds only on output.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from spigap.core import grouping as grouping_mod
from spigap.core.config import SpiConfig
from spigap.core.gaprules import defs as gapdefs
from spigap.core.quantile import median, percentiles
from spigap.errors import UsageError
from spigap.io.base import CaptureInfo

GAP_KINDS = ("cs_setup", "cs_hold", "inter_byte", "inter_transfer", "cs_change", "context_switch",
             "transfer_duration", "transfer_period")
# gap_kind codes; CLASS_A/B: the two kinds of CS-inactive gap when which one is
# the context switch cannot be told (docs/gaps.md), A the shorter
KIND_NONE, KIND_CS_CHANGE, KIND_CONTEXT_SWITCH, KIND_IDLE = 0, 1, 2, 3
KIND_CLASS_A, KIND_CLASS_B = grouping_mod.CLASS_A, grouping_mod.CLASS_B
KIND_NAMES = {KIND_NONE: None, KIND_CS_CHANGE: gapdefs.CS_CHANGE, KIND_CONTEXT_SWITCH: gapdefs.CONTEXT_SWITCH,
              KIND_IDLE: "idle", KIND_CLASS_A: "class_a", KIND_CLASS_B: "class_b"}
AMBIGUOUS_KINDS = ("class_a", "class_b")


def describe(values: np.ndarray, tick_s: float) -> dict:
    """n / min / p50 / mean / p99 / max / std of tick values, in seconds."""
    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    if len(v) == 0:
        return {"n": 0, "min_s": None, "p50_s": None, "mean_s": None, "p99_s": None, "max_s": None,
                "std_s": None}
    p50, p99 = percentiles(v, [50, 99])
    return {"n": int(len(v)), "min_s": float(v.min()) * tick_s, "p50_s": float(p50) * tick_s,
            "mean_s": float(v.mean()) * tick_s, "p99_s": float(p99) * tick_s,
            "max_s": float(v.max()) * tick_s, "std_s": float(v.std()) * tick_s}


def start_rate_hz(count: int, first: float | None, last: float | None, tick_s: float = 1.0) -> float | None:
    """THE transfer rate (docs/gaps.md, "Summary figures"): ``count`` starts from ``first``
    to ``last`` (ticks of ``tick_s``; seconds with the default) -> (count - 1) / (last -
    first) per second, the mean start-to-start period inverted; None for fewer than two
    starts or none apart. Only starts that were seen count (a transfer already under way
    when the capture began has none), and the idle time before the first start and after
    the last one does not: where the capture was started and stopped is not the bus's
    throughput (seed 000 counts transfers over seconds of steady running). Every command's
    rate is this: analyze, monitor's summary, check, compare, report, batch (``StartSpan``)."""
    if count < 2 or first is None or last is None or last <= first:
        return None
    return float((count - 1) / ((last - first) * tick_s))


@dataclasses.dataclass
class StartSpan:
    """The starts a transfer rate counts, added batch by batch (``add``) or interval by
    interval (``merge``): how many, the first, the last (ticks, in capture order)."""

    count: int = 0
    first: int | None = None
    last: int | None = None

    @classmethod
    def of(cls, starts: np.ndarray) -> "StartSpan":
        s = cls()
        s.add(starts)
        return s

    def add(self, starts: np.ndarray) -> None:
        """Starts (ticks, ascending) later than every one added before."""
        if len(starts):
            self.merge(StartSpan(int(len(starts)), int(starts[0]), int(starts[-1])))

    def merge(self, other: "StartSpan") -> None:
        if other.count == 0:
            return
        if self.first is None:
            self.first = other.first
        self.count += other.count
        self.last = other.last

    def rate_hz(self, tick_s: float) -> float | None:
        return start_rate_hz(self.count, self.first, self.last, tick_s)


@dataclasses.dataclass(frozen=True)
class GapSeries:
    """One gap kind in time order: where each gap starts, its length, its transfer (all ticks)."""

    kind: str
    at: np.ndarray          # int64 ticks, start of each gap
    values: np.ndarray      # float ticks
    transfer: np.ndarray    # int64 transfer index


class DeviceFigures:
    """The typed interface of one device's analysis, whichever way it was kept: ``Analysis``
    (every transfer in arrays) and core/collect.py's ``BoundedAnalysis`` (histograms past
    100 000 transfers) both implement it, and every output, command and the stall search
    (core/stalls.py) read a device through it alone.

    What the analysis finished in core adds (core/run.py): ``stalls`` (core/stalls.py's
    ``StallReport``), ``events`` (--event: core/events.EventReport), ``labels`` and
    ``device`` (--device, spigap/api.py), on a shared bus ``bus`` (core/bus.BusColumns:
    the bus columns of its transfers, when they are kept), and ``pins`` (--pins: timing at
    the pins measured in the same pass, spigap.pins.result.PinResult; spigap/api.py)."""

    info: CaptureInfo
    cfg: SpiConfig
    tick_s: float
    end_tick: int
    truncated: str | None
    period_ticks: float | None
    inter_transfer_threshold: float | None
    word_gaps_note: str
    grouping: grouping_mod.Grouping
    idle_timeout_ticks: int | None
    engine: str
    clk_outside_cs: int
    min_high: int | None
    min_low: int | None
    warnings: list[str]
    setting_warnings: list[str]
    sources: dict
    buses: list
    device: str | None
    labels: list[str] | None
    events: Any
    stalls: Any
    bus: Any
    pins: Any

    @property
    def has_cs(self) -> bool:
        return self.cfg.cs is not None

    @property
    def sclk_hz(self) -> float | None:
        return 1.0 / (self.period_ticks * self.tick_s) if self.period_ticks else None

    def available(self, kind: str) -> bool:
        if kind in ("cs_setup", "cs_hold", "cs_change", "context_switch"):
            return self.has_cs
        return True

    # ------------------------------------------------------------ what both keep
    @property
    def n(self) -> int:
        raise NotImplementedError

    @property
    def in_memory(self) -> bool:
        """Every transfer's figures are in arrays (an ``Analysis``)."""
        raise NotImplementedError

    def n_partial(self) -> int:
        raise NotImplementedError

    def n_words_total(self) -> int:
        raise NotImplementedError

    def n_messages(self) -> int | None:
        raise NotImplementedError

    def transfer_rate_hz(self) -> float | None:
        raise NotImplementedError

    def describe_kind(self, kind: str) -> dict:
        raise NotImplementedError

    def idle_clocks_p50(self) -> float | None:
        raise NotImplementedError

    def kept(self) -> "Analysis":
        """The ``Analysis`` with every transfer's figures (``in_memory``); a bounded one's
        transfers were not kept (their rows went out as they were measured)."""
        raise ValueError("the transfers of a long capture were not kept: its rows went out as they were measured")

    # ------------------------------------------------------------ the stall search (core/stalls.py)
    def gap_center(self, kind: str) -> tuple[int, float | None, float | None]:
        """(gaps of ``kind``, their median, their median absolute deviation) in ticks;
        (0, None, None) without any."""
        raise NotImplementedError

    def gaps_above(self, kind: str, threshold: float) -> GapSeries:
        """The gaps of ``kind`` longer than ``threshold`` ticks, in time order (a bounded
        analysis keeps the longest ones only: ``stalls_beyond_list``)."""
        raise NotImplementedError

    def stalls_beyond_list(self, kind: str, med: float, threshold: float) -> tuple[int, float, float] | None:
        """When ``gaps_above`` could not keep every gap above ``threshold``: (their count,
        their summed excess over ``med`` and the longest, ticks), else None."""
        return None


@dataclasses.dataclass
class Analysis(DeviceFigures):
    info: CaptureInfo
    cfg: SpiConfig
    tick_s: float
    end_tick: int
    truncated: str | None
    # per transfer (CS window), ticks; NaN where a figure is unavailable
    start: np.ndarray
    end: np.ndarray
    partial_start: np.ndarray
    partial_end: np.ndarray
    n_bits: np.ndarray
    n_words: np.ndarray
    first_edge: np.ndarray
    last_edge: np.ndarray
    clk_ok: np.ndarray
    min_half: np.ndarray
    cs_setup: np.ndarray
    cs_hold: np.ndarray
    duration: np.ndarray
    gap_before: np.ndarray
    gap_kind: np.ndarray
    message: np.ndarray
    # per word, flat; transfer k owns words word_off[k]:word_off[k+1]
    word_off: np.ndarray
    mosi: np.ndarray
    miso: np.ndarray
    word_first: np.ndarray
    word_last: np.ndarray
    # per pair of consecutive words inside a transfer (flat; transfer k owns pair_off[k]:pair_off[k+1])
    pair_off: np.ndarray
    pair_gap: np.ndarray
    pair_inter_transfer: np.ndarray
    # global
    period_ticks: float | None
    inter_transfer_threshold: float | None
    word_gaps_note: str                  # how word gaps were split (docs/gaps.md "Two populations")
    grouping: grouping_mod.Grouping
    idle_timeout_ticks: int | None
    engine: str
    clk_outside_cs: int
    min_high: int | None
    min_low: int | None
    warnings: list[str]
    device: str | None = None            # --device spec, when transfers were labelled
    labels: list[str] | None = None      # device meaning of each transfer (core/labels.py)
    events: Any = None                   # --event: core/events.EventReport
    pins: Any = None                     # --pins: spigap.pins.result.PinResult (timing at the pins)
    # given settings the signals contradict (also first in ``warnings``), core/settings_check.py
    setting_warnings: list[str] = dataclasses.field(default_factory=list)
    # where each setting came from (core/infer/ Source), and every SPI bus the signals show
    sources: dict = dataclasses.field(default_factory=dict)
    buses: list = dataclasses.field(default_factory=list)
    # a systematic sample of a long capture (core/collect.py; compare, report): blocks of
    # consecutive transfers. ``breaks`` marks each block's first transfer (the gap before it
    # and the period into it are not in the sample); ``sample`` holds the whole capture's
    # totals (transfers, messages, rate) and how it was sampled. None: every transfer.
    breaks: np.ndarray | None = None
    sample: dict | None = None
    # the analysis finished (core/run.py): its stalls (core/stalls.StallReport) and, on a
    # shared bus, its transfers' bus columns (core/bus.BusColumns; None when not kept)
    stalls: Any = None
    bus: Any = None

    # -------------------------------------------------------------- helpers
    @property
    def n(self) -> int:
        return len(self.start)

    @property
    def in_memory(self) -> bool:
        return True

    def kept(self) -> "Analysis":
        return self

    def seconds(self, ticks) -> float | None:
        if ticks is None or (isinstance(ticks, float) and math.isnan(ticks)):
            return None
        return float(ticks) * self.tick_s

    def period(self) -> np.ndarray:
        """Start-to-start time of consecutive transfers (both starts real edges)."""
        if self.n < 2:
            return np.empty(0)
        p = np.diff(self.start).astype(float)
        p[self.partial_start[:-1]] = np.nan
        if self.breaks is not None:
            p[self.breaks[1:]] = np.nan          # into the first transfer of a sampled block
        return p

    def gap_values(self, kind: str) -> np.ndarray:
        if kind == "cs_setup":
            return self.cs_setup
        if kind == "cs_hold":
            return self.cs_hold
        if kind == "inter_byte":
            return self.pair_gap[~self.pair_inter_transfer].astype(float)
        if kind == "inter_transfer":
            return self.pair_gap[self.pair_inter_transfer].astype(float)
        if kind == "cs_change":
            return self.gap_before[self.gap_kind == KIND_CS_CHANGE]
        if kind == "context_switch":
            return self.gap_before[self.gap_kind == KIND_CONTEXT_SWITCH]
        if kind == "idle":
            return self.gap_before[self.gap_kind == KIND_IDLE]
        if kind == "class_a":
            return self.gap_before[self.gap_kind == KIND_CLASS_A]
        if kind == "class_b":
            return self.gap_before[self.gap_kind == KIND_CLASS_B]
        if kind == "transfer_duration":
            return self.duration
        if kind == "transfer_period":
            return self.period()
        raise KeyError(kind)

    def idle_clocks(self) -> np.ndarray:
        """Idle SCLK periods in each inter-byte gap: (gap - T/2) / T."""
        if not self.period_ticks:
            return np.empty(0)
        return gapdefs.idle_clocks(self.gap_values("inter_byte"), self.period_ticks)

    def transfer_rate_hz(self) -> float | None:
        if self.sample is not None:
            return self.sample["transfer_rate_hz"]
        return StartSpan.of(self.start[~self.partial_start]).rate_hz(self.tick_s)

    def n_partial(self) -> int:
        return int(np.count_nonzero(self.partial_start | self.partial_end))

    def n_words_total(self) -> int:
        return int(len(self.mosi))

    def idle_clocks_p50(self) -> float | None:
        ic = self.idle_clocks()
        if not len(ic):
            return None
        x = float(median(ic))
        return None if math.isnan(x) else x

    def describe_kind(self, kind: str) -> dict:
        """describe() of one gap kind (core/collect.py gives the same from histograms)."""
        return describe(self.gap_values(kind), self.tick_s)

    def n_messages(self) -> int | None:
        """Messages in the capture; None when the grouping is ambiguous (no message is known)."""
        if self.n == 0:
            return 0
        if self.grouping.ambiguous:
            return None
        if self.sample is not None:
            return self.sample["messages"]
        return int(self.message[-1]) + 1

    # -------------------------------------------------------------- the stall search
    def gap_center(self, kind: str) -> tuple[int, float | None, float | None]:
        v = self.gap_values(kind)
        v = v[~np.isnan(v)]
        if not len(v):
            return 0, None, None
        med = float(median(v))
        return len(v), med, float(median(np.abs(v - med)))

    def gaps_above(self, kind: str, threshold: float) -> GapSeries:
        s = gap_series(self, kind)
        m = s.values > threshold
        return GapSeries(kind, s.at[m], s.values[m], s.transfer[m])


PER_TRANSFER = ("start", "end", "partial_start", "partial_end", "n_bits", "n_words", "first_edge", "last_edge",
                "clk_ok", "min_half", "cs_setup", "cs_hold", "duration", "gap_before", "gap_kind", "message")
PER_WORD = ("mosi", "miso", "word_first", "word_last")
PER_PAIR = ("pair_gap", "pair_inter_transfer")


def take(a: Analysis, k0: int, k1: int, message_offset: int = 0) -> Analysis:
    """Transfers k0..k1-1 of ``a`` as an Analysis of their own (words and word gaps with
    them; message numbers shifted by ``message_offset``)."""
    w0, w1 = int(a.word_off[k0]), int(a.word_off[k1])
    p0, p1 = int(a.pair_off[k0]), int(a.pair_off[k1])
    cut: dict[str, Any] = {f: getattr(a, f)[k0:k1] for f in PER_TRANSFER}
    cut["message"] = cut["message"] + message_offset
    cut.update({f: getattr(a, f)[w0:w1] for f in PER_WORD})
    cut.update({f: getattr(a, f)[p0:p1] for f in PER_PAIR})
    return dataclasses.replace(a, **cut, word_off=a.word_off[k0:k1 + 1] - w0, pair_off=a.pair_off[k0:k1 + 1] - p0,
                               labels=None, warnings=list(a.warnings), stalls=None, bus=None)


def join(parts: list[Analysis]) -> Analysis:
    """Analyses of consecutive stretches as one (``take``'s inverse); the first part's
    capture-wide fields (settings, grouping, warnings) are kept."""
    first = parts[0]
    cat: dict[str, Any] = {f: np.concatenate([getattr(p, f) for p in parts])
                           for f in PER_TRANSFER + PER_WORD + PER_PAIR}

    def offsets(name: str) -> np.ndarray:
        out = [np.zeros(1, np.int64)]
        base = 0
        for p in parts:
            off = getattr(p, name)
            out.append(off[1:] + base)
            base += int(off[-1])
        return np.concatenate(out)

    return dataclasses.replace(first, **cat, word_off=offsets("word_off"), pair_off=offsets("pair_off"))


def regroup(a: Analysis, grp: grouping_mod.Grouping) -> Analysis:
    """Apply another message grouping to an analysis (e.g. ``grouping.from_boundaries``
    with the message boundaries of a kernel trace): gap kinds and message numbers follow it."""
    if not a.has_cs:
        raise ValueError("no CS line: there are no CS-inactive gaps to group")
    if len(grp.kinds) != max(a.n - 1, 0):
        raise ValueError(f"the grouping covers {len(grp.kinds)} gaps, the capture has {max(a.n - 1, 0)}")
    a.grouping = grp
    a.gap_kind = a.gap_kind.copy()
    a.gap_kind[1:] = grp.kinds
    boundary = grp.boundary_mask(len(grp.kinds))
    a.message = np.concatenate([[0], np.cumsum(boundary)]).astype(np.int64)[:a.n]
    return a


def gap_series_of(a: Analysis, kinds) -> dict[str, GapSeries]:
    """``gap_series`` of several kinds of one analysis (what they share computed once)."""
    shared: dict = {}
    return {kind: gap_series(a, kind, shared) for kind in kinds}


def gap_series(a: Analysis, kind: str, shared: dict | None = None) -> GapSeries:
    """Values of ``kind`` (as ``Analysis.gap_values``, without NaN) with their start ticks.

    cs_setup starts at the CS assert, cs_hold at the last SCLK edge, word gaps
    at the last edge of the earlier word, CS-inactive gaps at the previous CS
    deassert; transfer_duration/period start at the CS assert.
    """
    n = a.n
    shared = {} if shared is None else shared
    idx = shared.get("idx")
    if idx is None:
        idx = shared["idx"] = np.arange(n, dtype=np.int64)
    if kind in ("cs_setup", "cs_hold", "transfer_duration"):
        v = a.gap_values(kind)
        at = (a.last_edge if kind == "cs_hold" else a.start).astype(np.int64)
        tr = idx
    elif kind == "transfer_period":
        v = a.period()
        at, tr = a.start[:-1].astype(np.int64), idx[:-1]
    elif kind in ("cs_change", "context_switch", "idle") + AMBIGUOUS_KINDS:
        code = {"cs_change": KIND_CS_CHANGE, "context_switch": KIND_CONTEXT_SWITCH, "idle": KIND_IDLE,
                "class_a": KIND_CLASS_A, "class_b": KIND_CLASS_B}[kind]
        sel = np.flatnonzero(a.gap_kind == code)
        sel = sel[sel > 0]
        v = a.gap_before[sel]
        at = a.end[sel - 1].astype(np.int64)
        tr = sel.astype(np.int64)
    elif kind in ("inter_byte", "inter_transfer"):
        if "owner" not in shared:
            owner = np.repeat(idx, np.diff(a.pair_off))
            shared["owner"] = owner
            shared["word"] = a.word_off[owner] + (np.arange(len(owner)) - a.pair_off[owner])
        owner, word = shared["owner"], shared["word"]
        sel = a.pair_inter_transfer if kind == "inter_transfer" else ~a.pair_inter_transfer
        v = a.pair_gap[sel].astype(float)
        at = a.word_last[word[sel]].astype(np.int64)
        tr = owner[sel]
    else:
        raise UsageError(f"unknown gap kind {kind!r}")
    v = np.asarray(v, dtype=float)
    ok = ~np.isnan(v)
    return GapSeries(kind, np.asarray(at)[ok], v[ok], np.asarray(tr)[ok])
