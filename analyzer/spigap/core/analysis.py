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


class CaptureFigures:
    """What an Analysis and core/collect.py's BoundedAnalysis both derive from their
    settings (``cfg``) and clock period (``period_ticks``, ``tick_s``)."""

    cfg: SpiConfig
    tick_s: float
    period_ticks: float | None

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


@dataclasses.dataclass
class Analysis(CaptureFigures):
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
    labels: list[str] | None = None      # device meaning of each transfer (labels.py)
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

    # -------------------------------------------------------------- helpers
    @property
    def n(self) -> int:
        return len(self.start)

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
        s = self.start[~self.partial_start]
        if len(s) < 2 or s[-1] == s[0]:
            return None
        return float((len(s) - 1) / ((s[-1] - s[0]) * self.tick_s))

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
                               labels=None, warnings=list(a.warnings))


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
