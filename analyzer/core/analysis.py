"""One analysis of one capture: framing, gap measurement, message grouping, statistics.

Definitions are in docs/gaps.md. Internally every time is an integer number of
ticks (one tick = one sample period = the resolution); they become seconds only
on output.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

import numpy as np

from spigap.core import grouping as grouping_mod
from spigap.core import settings_check
from spigap.core.config import SpiConfig
from spigap.core.framing import make_framer
from spigap.core.gaprules import defs as gapdefs
from spigap.core.gaprules import split as split_two
from spigap.core.quantile import median, percentiles
from spigap.errors import CaptureTruncated, InputError
from spigap.io.base import CaptureInfo, CaptureReader

GAP_KINDS = ("cs_setup", "cs_hold", "inter_byte", "inter_transfer", "cs_change", "context_switch",
             "transfer_duration", "transfer_period")
# gap_kind codes; CLASS_A/B: the two kinds of CS-inactive gap when which one is
# the context switch cannot be told (docs/gaps.md), A the shorter
KIND_NONE, KIND_CS_CHANGE, KIND_CONTEXT_SWITCH, KIND_IDLE = 0, 1, 2, 3
KIND_CLASS_A, KIND_CLASS_B = grouping_mod.CLASS_A, grouping_mod.CLASS_B
KIND_NAMES = {KIND_NONE: None, KIND_CS_CHANGE: gapdefs.CS_CHANGE, KIND_CONTEXT_SWITCH: gapdefs.CONTEXT_SWITCH,
              KIND_IDLE: "idle", KIND_CLASS_A: "class_a", KIND_CLASS_B: "class_b"}
AMBIGUOUS_KINDS = ("class_a", "class_b")
MIN_SAMPLES_PER_PERIOD = 4


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
    """What an Analysis and core/bounded.py's BoundedAnalysis both derive from their
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
    labels: list[str] | None = None      # device meaning of each transfer
    # given settings the signals contradict (also first in ``warnings``), core/settings_check.py
    setting_warnings: list[str] = dataclasses.field(default_factory=list)
    # where each setting came from (core/infer.py Source), and every SPI bus the signals show
    sources: dict = dataclasses.field(default_factory=dict)
    buses: list = dataclasses.field(default_factory=list)
    # a systematic sample of a long capture (core/bounded.py; compare, report): blocks of
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
        """describe() of one gap kind (core/bounded.py gives the same from histograms)."""
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


def run(reader: CaptureReader, cfg: SpiConfig, *, on_block: Callable[[int], None] | None = None) -> Analysis:
    """Analyze one opened capture. ``on_block(tick)`` reports progress."""
    info = reader.info
    settled, framer = prepare(reader, cfg)
    cfg = settled.cfg
    prefix = settings_check.Prefix()          # a bounded start of the stream, for the settings check
    truncated = None
    last_tick = 0
    try:
        for block in settled.blocks:
            framer.feed(block)
            prefix.add(block.ticks, block.states)
            last_tick = int(block.ticks[-1])
            if on_block:
                on_block(last_tick)
    except CaptureTruncated as e:
        truncated = str(e)
    end_tick = reader.end_tick if reader.end_tick is not None else last_tick + 1
    if end_tick <= 0 and truncated is None:
        raise InputError("the capture holds no samples", path=info.path,
                         hint="was the acquisition stopped before it started?")
    raw = framer.finish(end_tick)
    a = _measure(info, cfg, framer, raw, end_tick, truncated)
    return settings_first(a, settled, prefix)


def settings_first(a, settled, prefix, evidence=None):
    """Put the settings' story at the top of ``a``'s warnings: given settings the signals
    contradict, naming what fits (docs/gaps.md), then what inference could not settle
    firmly (docs/inference.md); and record where each setting came from."""
    a.sources, a.buses = settled.sources, settled.buses
    a.setting_warnings = settings_check.contradictions(a, prefix, _bits(a.cfg), evidence) + settled.warnings
    a.warnings[:0] = a.setting_warnings
    return a


def prepare(reader: CaptureReader, cfg: SpiConfig):
    """(infer.Settled: the resolved config, its channel names and the edge stream to
    frame; the framer) for one capture. Settings the user did not give come from
    names, then from a bounded prefix of the stream (core/infer.py)."""
    from spigap.core import infer

    settled = infer.settle(reader, cfg)
    return settled, make_framer(settled.cfg, _bits(settled.cfg), reader.info.tick_s)


def _bits(cfg: SpiConfig) -> dict[str, int]:
    """role -> bit of the edge stream's states, in the order prepare() requests the channels."""
    roles = [role for role, name in (("clk", cfg.clk), ("cs", cfg.cs), ("mosi", cfg.mosi), ("miso", cfg.miso))
             if name is not None]
    return {role: j for j, role in enumerate(roles)}


@dataclasses.dataclass(frozen=True)
class FramerFigures:
    """What a measurement reads from the framer besides the windows: its running,
    capture-wide figures at one moment. core/bounded.py takes them on the feeding
    thread and measures in another while the framer goes on."""

    period_ticks: float | None
    idle_timeout: int | None
    engine: str
    clk_outside_cs: int
    first_clk_outside: int | None
    min_high: int | None
    min_low: int | None

    @classmethod
    def of(cls, framer) -> "FramerFigures":
        if isinstance(framer, cls):
            return framer
        return cls(framer.spacing.central_mean(), framer.idle_timeout, framer.engine, framer.clk_outside_cs,
                   framer.first_clk_outside, framer.min_high, framer.min_low)


def _measure(info, cfg, framer, raw, end_tick, truncated, grouping=None) -> Analysis:
    """``framer``: the framer, or its ``FramerFigures``. ``grouping``: a message structure
    found earlier (spigap monitor measures a capture window by window with the structure
    of its start), else inferred here."""
    fig = FramerFigures.of(framer)
    w, words = raw["windows"], raw["words"]
    n = len(w["start"])
    has_cs = cfg.cs is not None
    nan = np.full(n, np.nan)
    has_edges = w["n_edges"] > 0
    start = np.asarray(w["start"], np.int64)       # no copy when already int64
    end = np.asarray(w["end"], np.int64)
    if has_cs:
        cs_setup = np.where(has_edges & ~w["partial_start"], w["first_edge"] - start, np.nan)
        cs_hold = np.where(has_edges & ~w["partial_end"], end - w["last_edge"], np.nan)
    else:
        cs_setup = nan.copy()
        cs_hold = nan.copy()
    duration = np.where(~w["partial_start"] & ~w["partial_end"], end - start, np.nan)
    gap_before = np.full(n, np.nan)
    if n > 1:
        gap_before[1:] = start[1:] - end[:-1]

    period = fig.period_ticks
    # inter-word gaps
    n_words = w["n_words"]
    word_off = np.concatenate([[0], np.cumsum(n_words)]).astype(np.int64)
    n_pairs = np.maximum(n_words - 1, 0)
    pair_off = np.concatenate([[0], np.cumsum(n_pairs)]).astype(np.int64)
    if len(words["first"]) > 1:
        is_last = np.zeros(len(words["first"]), bool)
        is_last[word_off[1:][n_words > 0] - 1] = True
        g = words["first"][1:] - words["last"][:-1]
        pair_gap = g[~is_last[:-1]]
    else:
        pair_gap = np.empty(0, np.int64)
    warnings = list(info.warnings)
    thr, wg_note, wg_warning = word_gap_split(info, cfg, pair_gap)
    if wg_warning:
        warnings.append(wg_warning)
    pair_it = pair_gap > thr if thr is not None else np.zeros(len(pair_gap), bool)

    # message grouping from the CS-inactive gaps
    gaps = gap_before[1:]
    if not has_cs:
        grp = grouping_mod.Grouping(1, 0, 0.0, "none", "no CS line: transfers are framed by SCLK idle "
                                    "time, so cs_change and context-switch gaps are unavailable",
                                    np.full(len(gaps), grouping_mod.CONTEXT_SWITCH, np.int8))
        kind = np.full(n, KIND_IDLE)
        kind[:1] = KIND_NONE
        boundary = np.ones(max(n - 1, 0), bool)
    else:
        # ``grouping``: a structure found earlier (spigap monitor), else inferred here.
        # idle before the first CS assert (evidence that a message starts there), None when
        # the capture starts inside a window
        lead = float(start[0]) if n and not w["partial_start"][0] else None
        grp = grouping or grouping_mod.infer(gaps, resolution=_ticks_per_sample(info), lead=lead, context_switch=cfg.context_switch,
                                 device_lengths=cfg.message_lengths,
                                 transfers_per_message=cfg.transfers_per_message)
        boundary = grp.boundary_mask(len(gaps))
        kind = np.full(n, KIND_NONE)
        kind[1:] = grp.kinds
    message = np.concatenate([[0], np.cumsum(boundary)]).astype(np.int64)[:n]

    a = Analysis(
        info=info, cfg=cfg, tick_s=info.tick_s, end_tick=end_tick, truncated=truncated,
        start=start, end=end, partial_start=w["partial_start"], partial_end=w["partial_end"],
        n_bits=w["n_bits"], n_words=n_words, first_edge=w["first_edge"], last_edge=w["last_edge"],
        clk_ok=w["clk_ok"], min_half=w["min_half"],
        cs_setup=np.asarray(cs_setup, float), cs_hold=np.asarray(cs_hold, float), duration=duration,
        gap_before=gap_before, gap_kind=kind, message=message,
        word_off=word_off, mosi=words["mosi"], miso=words["miso"], word_first=words["first"],
        word_last=words["last"], pair_off=pair_off, pair_gap=pair_gap, pair_inter_transfer=pair_it,
        period_ticks=period, inter_transfer_threshold=thr, word_gaps_note=wg_note, grouping=grp,
        idle_timeout_ticks=fig.idle_timeout, engine=fig.engine, clk_outside_cs=fig.clk_outside_cs,
        min_high=fig.min_high, min_low=fig.min_low, warnings=warnings)
    _warn(a, fig)
    return a


def word_gap_split(info: CaptureInfo, cfg: SpiConfig, pair_gap: np.ndarray) -> tuple[float | None, str, str | None]:
    """(inter-transfer threshold in ticks or None, how the word gaps were split, a warning or None)."""
    if cfg.inter_transfer_gap_s is not None:
        return cfg.inter_transfer_gap_s / info.tick_s, "given (--inter-transfer-gap)", None
    if not len(pair_gap):
        return None, "no word gaps", None
    # two populations only where there really are two (docs/gaps.md)
    sp = split_two(pair_gap, "linear", _ticks_per_sample(info))
    warning = None
    if sp.verdict == "unclear":
        warning = (f"word gaps: {sp.note}; all are counted as inter-byte "
                   "(give --inter-transfer-gap TIME to split them)")
    return gapdefs.inter_transfer_threshold(sp), sp.note, warning


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


def _ticks_per_sample(info: CaptureInfo) -> float:
    """Ticks per sample: 1, unless a reader's time unit is finer than the sample period."""
    if not info.samplerate_hz:
        return 1.0
    return max(1.0, round(1.0 / (info.samplerate_hz * info.tick_s)))


@dataclasses.dataclass
class WarnCounts:
    """What the end-of-analysis warnings count (adds up batch by batch, core/bounded.py)."""

    n: int = 0
    bad_clk: int = 0                   # complete-start transfers with SCLK off its idle level at CS assert
    first_bad_clk: int | None = None   # start tick of the first
    trailing: int = 0                  # complete transfers with bits that do not fill a word
    partial: int = 0

    @classmethod
    def of(cls, a: Analysis, skip: int = 0) -> "WarnCounts":
        """The counts of transfers ``skip``.. of ``a``."""
        ps, pe = a.partial_start[skip:], a.partial_end[skip:]
        bad = np.flatnonzero(~a.clk_ok[skip:] & ~ps) if a.has_cs else np.empty(0, int)
        trailing = a.n_bits[skip:] % a.cfg.wordsize
        return cls(n=a.n - skip, bad_clk=len(bad),
                   first_bad_clk=int(a.start[skip + bad[0]]) if len(bad) else None,
                   trailing=int(np.count_nonzero(trailing[~ps & ~pe])),
                   partial=int(np.count_nonzero(ps | pe)))

    def add(self, o: "WarnCounts") -> None:
        if self.first_bad_clk is None:
            self.first_bad_clk = o.first_bad_clk
        self.n += o.n
        self.bad_clk += o.bad_clk
        self.trailing += o.trailing
        self.partial += o.partial


def _warn(a: Analysis, framer) -> None:
    a.warnings += warning_lines(a, WarnCounts.of(a), framer.first_clk_outside)


def warning_lines(a, c: WarnCounts, first_clk_outside) -> list[str]:
    """The framing warnings of an analysis (``a``: Analysis or bounded.BoundedAnalysis)."""
    w: list[str] = []
    t = a.tick_s
    if c.n == 0:
        w.append("no transfers found: check the channel mapping (--clk/--cs), --cs-polarity and --mode")
    if a.period_ticks is not None and a.period_ticks < MIN_SAMPLES_PER_PERIOD:
        sclk_hz = 1.0 / (a.period_ticks * t)
        w.append(f"only {a.period_ticks:g} samples per SCLK period (SCLK ≈ {sclk_hz / 1e6:.3g} MHz at "
                 f"{1 / t / 1e6:.3g} MSa/s): edge times are coarse, gaps are ±1 sample "
                 f"({t * 1e9:.3g} ns); sample at ≥ {MIN_SAMPLES_PER_PERIOD}× SCLK")
    if a.clk_outside_cs:
        w.append(f"{a.clk_outside_cs} SCLK edge(s) while CS was inactive (first at "
                 f"{first_clk_outside * t * 1e6:.6g} µs)")
    if c.bad_clk:
        w.append(f"SCLK was not at its idle level (CPOL={a.cfg.cpol}) when CS was asserted in "
                 f"{c.bad_clk} transfer(s) (first at {c.first_bad_clk * t * 1e6:.6g} µs): check --mode")
    if c.trailing:
        w.append(f"{c.trailing} transfer(s) end with bits that do not fill a {a.cfg.wordsize}-bit word "
                 "(check --wordsize)")
    if c.partial:
        w.append(f"{c.partial} partial transfer(s): CS already active at the start or still active at the "
                 "end of the capture; counted, but without the cut-off figures")
    return w
