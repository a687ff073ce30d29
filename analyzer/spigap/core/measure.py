"""Measurement: a batch of framed windows -> every gap of every transfer, in ticks.

The pipeline's last step (core/pipeline.py hands out the batches). Definitions
are in docs/gaps.md: CS setup and hold, the word gaps inside a window (split
into inter-byte and inter-transfer, gapdefs' rule), the CS-inactive gaps and
their grouping into messages (core/grouping.py), transfer durations, and the
framing warnings. ``measure`` is called once on a whole capture (the in-memory
path) or batch by batch with the last window of the previous batch in front
(core/collect.py, core/monitor.py): both give the same figures.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable

import numpy as np

from spigap.findings import Cause, Finding
from spigap.core import grouping as grouping_mod
from spigap.core.analysis import KIND_IDLE, KIND_NONE, Analysis
from spigap.core.config import SpiConfig
from spigap.core.framed import Framed, FramerFigures
from spigap.core.gaprules import defs as gapdefs
from spigap.core.gaprules import split as split_two
from spigap.io.base import CaptureInfo
from spigap.units import fmt_freq, fmt_time

fmt_seconds = gapdefs.fmt_seconds

MIN_SAMPLES_PER_PERIOD = 4
MERGED_MIN = 4          # pauses inside CS-less transfers before they are called merged bursts


def measure(info: CaptureInfo, cfg: SpiConfig, fig: FramerFigures, framed: Framed, end_tick: int,
            truncated: str | None, grouping: grouping_mod.Grouping | None = None,
            infer: Callable[..., grouping_mod.Grouping] = grouping_mod.infer) -> Analysis:
    """The gap figures of one batch of framed windows (or of a whole capture's).

    ``fig``: the framer's running figures when the batch was taken (its SCLK period,
    counters). ``grouping``: a message structure found earlier (spigap monitor and the
    long-capture path measure batch by batch with the structure of the capture's
    start), else inferred here from the batch's CS-inactive gaps."""
    w, words = framed.windows, framed.words
    n = len(w.start)
    has_cs = cfg.cs is not None
    nan = np.full(n, np.nan)
    has_edges = w.n_edges > 0
    start = np.asarray(w.start, np.int64)       # no copy when already int64
    end = np.asarray(w.end, np.int64)
    if has_cs:
        cs_setup = np.where(has_edges & ~w.partial_start, w.first_edge - start, np.nan)
        cs_hold = np.where(has_edges & ~w.partial_end, end - w.last_edge, np.nan)
    else:
        cs_setup = nan.copy()
        cs_hold = nan.copy()
    duration = np.where(~w.partial_start & ~w.partial_end, end - start, np.nan)
    gap_before = np.full(n, np.nan)
    if n > 1:
        gap_before[1:] = start[1:] - end[:-1]

    period = fig.period_ticks
    # inter-word gaps
    n_words = w.n_words
    word_off = np.concatenate([[0], np.cumsum(n_words)]).astype(np.int64)
    n_pairs = np.maximum(n_words - 1, 0)
    pair_off = np.concatenate([[0], np.cumsum(n_pairs)]).astype(np.int64)
    if len(words.first) > 1:
        is_last = np.zeros(len(words.first), bool)
        is_last[word_off[1:][n_words > 0] - 1] = True
        g = words.first[1:] - words.last[:-1]
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
        lead = float(start[0]) if n and not w.partial_start[0] else None
        grp = grouping or infer(gaps, resolution=ticks_per_sample(info), lead=lead, context_switch=cfg.context_switch, tick_s=info.tick_s,
                                 device_lengths=cfg.message_lengths,
                                 transfers_per_message=cfg.transfers_per_message)
        boundary = grp.boundary_mask(len(gaps))
        kind = np.full(n, KIND_NONE)
        kind[1:] = grp.kinds
    message = np.concatenate([[0], np.cumsum(boundary)]).astype(np.int64)[:n]

    a = Analysis(
        info=info, cfg=cfg, tick_s=info.tick_s, end_tick=end_tick, truncated=truncated,
        start=start, end=end, partial_start=w.partial_start, partial_end=w.partial_end,
        n_bits=w.n_bits, n_words=n_words, first_edge=w.first_edge, last_edge=w.last_edge,
        clk_ok=w.clk_ok, min_half=w.min_half,
        cs_setup=np.asarray(cs_setup, float), cs_hold=np.asarray(cs_hold, float), duration=duration,
        gap_before=gap_before, gap_kind=kind, message=message,
        word_off=word_off, mosi=words.mosi, miso=words.miso, word_first=words.first,
        word_last=words.last, pair_off=pair_off, pair_gap=pair_gap, pair_inter_transfer=pair_it,
        period_ticks=period, inter_transfer_threshold=thr, word_gaps_note=wg_note, grouping=grp,
        idle_timeout_ticks=fig.idle_timeout, engine=fig.engine, clk_outside_cs=fig.clk_outside_cs,
        min_high=fig.min_high, min_low=fig.min_low, warnings=warnings)
    a.warnings += warning_lines(a, WarnCounts.of(a), fig.first_clk_outside)
    return a


def word_gap_split(info: CaptureInfo, cfg: SpiConfig, pair_gap: np.ndarray) -> tuple[float | None, str, str | None]:
    """(inter-transfer threshold in ticks or None, how the word gaps were split, a warning or None)."""
    if cfg.inter_transfer_gap_s is not None:
        return cfg.inter_transfer_gap_s / info.tick_s, "given (--inter-transfer-gap)", None
    if not len(pair_gap):
        return None, "no word gaps", None
    # two populations only where there really are two (docs/gaps.md)
    sp = split_two(pair_gap, "linear", ticks_per_sample(info))
    warning = None
    if sp.verdict == "unclear":
        warning = (f"word gaps: {sp.note}; all are counted as inter-byte "
                   "(give --inter-transfer-gap TIME to split them)")
    return gapdefs.inter_transfer_threshold(sp), sp.note, warning


def ticks_per_sample(info: CaptureInfo) -> float:
    """Ticks per sample: 1, unless a reader's time unit is finer than the sample period."""
    if not info.samplerate_hz:
        return 1.0
    return max(1.0, round(1.0 / (info.samplerate_hz * info.tick_s)))


@dataclasses.dataclass
class WarnCounts:
    """What the end-of-analysis warnings count (adds up batch by batch, core/collect.py)."""

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


def _merged_bursts(a, c: WarnCounts) -> list[str]:
    """Without CS, bursts of SCLK closer than the idle timeout are framed as one transfer: their
    pauses show up as a second, longer population of word gaps (inter_transfer). Say so, with
    the spacing found and an --idle-timeout between the two populations that splits them."""
    it = a.describe_kind("inter_transfer")
    ib = a.describe_kind("inter_byte")
    if it["n"] < MERGED_MIN or it["n"] < c.n or not it["p50_s"] or not ib["n"] or not ib["p50_s"]:
        return []
    split_at = math.sqrt(ib["p50_s"] * it["min_s"]) if it["min_s"] else it["p50_s"] / 2
    timeout = a.idle_timeout_ticks * a.tick_s if a.idle_timeout_ticks is not None else None
    return [f"no CS: {it['n']} pauses of {fmt_seconds(it['p50_s'])} (p50; word gaps {fmt_seconds(ib['p50_s'])}) "
            f"inside {c.n} transfer(s): SCLK bursts closer than the idle timeout"
            + (f" ({fmt_seconds(timeout)})" if timeout else "")
            + f" are framed as one transfer; --idle-timeout {fmt_seconds(split_at).replace(' ', '')} splits them"]


def warning_lines(a, c: WarnCounts, first_clk_outside) -> list[str]:
    """The framing warnings of an analysis (``a``: Analysis or collect.BoundedAnalysis)."""
    w: list[str] = []
    t = a.tick_s
    if c.n == 0:
        w.append(Finding("no transfers found: check the channel mapping (--clk/--cs), --cs-polarity and --mode",
                         Cause.ROLES))
    if a.period_ticks is not None and a.period_ticks < MIN_SAMPLES_PER_PERIOD:
        sclk_hz = 1.0 / (a.period_ticks * t)
        w.append(Finding(f"only {a.period_ticks:g} samples per SCLK period (SCLK ≈ {fmt_freq(sclk_hz, 3)} at "
                         f"{1 / t / 1e6:.3g} MSa/s): edge times are coarse, gaps are ±1 sample "
                         f"({fmt_time(t, 3)}); sample at ≥ {MIN_SAMPLES_PER_PERIOD}× SCLK", Cause.SAMPLING))
    if a.clk_outside_cs:
        w.append(f"{a.clk_outside_cs} SCLK edge(s) while CS was inactive (first at "
                 f"{fmt_time(first_clk_outside * t, 7)})")
    if c.bad_clk:
        w.append(f"SCLK was not at its idle level (CPOL={a.cfg.cpol}) when CS was asserted in "
                 f"{c.bad_clk} transfer(s) (first at {fmt_time(c.first_bad_clk * t, 7)}): check --mode")
    if c.trailing:
        w.append(f"{c.trailing} transfer(s) end with bits that do not fill a {a.cfg.wordsize}-bit word "
                 "(check --wordsize)")
    if c.partial:
        w.append(Finding(f"{c.partial} partial transfer(s): CS already active at the start or still active at "
                         "the end of the capture; counted, but without the cut-off figures", Cause.NOTE))
    if not a.has_cs:
        w += _merged_bursts(a, c)
    g = a.grouping
    if g.ambiguous:
        # the message structure is unknown: every gap-kind figure below is per class, not per role
        w.append(Finding(f"message grouping ambiguous: which CS-inactive gaps end messages cannot be told from "
                         f"the timing ({len(g.rival_kinds) or 2} readings fit); {g.settle} settles it", Cause.UNSURE))
    return w
