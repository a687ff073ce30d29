"""Stalls: gaps far above their kind's typical value, with where they happened.

A *stall* is one gap (CS setup, CS hold, inter-byte, inter-transfer,
cs_change, context switch, or bus idle without CS) that exceeds the median of
its kind in the same capture by more than

    max(k × robust σ,  rel × median,  min_samples samples)

with robust σ = 1.4826 × MAD (median absolute deviation; equals the standard
deviation for Gaussian jitter, and is not pulled up by the stalls themselves).
Defaults: k = 8, rel = 0.5, min_samples = 5. The three terms guard against
three ways a plain "n × σ" rule goes wrong:

* k × σ: Gaussian jitter never gets there (P(> 8 σ) ≈ 6e-16), so what is
  flagged is a different mechanism (an interrupt, preemption, a UART flush),
  not the tail of the usual jitter;
* rel × median: when the jitter is tiny (a busy-wait cs_change gap of 10 µs
  ± 20 ns), 8 σ is only 160 ns; a stall must also be a sizeable fraction of
  the gap itself;
* min_samples: quantized gaps (inter-byte gaps that are 3 or 4 samples) have
  MAD = 0; a stall must be more than a few samples of resolution above.

Derived figures (transfer duration and period) are not searched: a stall
already shows up in the gap it happened in, and counting it twice would
double its weight. Kinds with fewer than ``min_count`` values (default 8)
have no meaningful median and are skipped.

Every time is in ticks internally; ``Stall`` carries seconds and the
capture's resolution.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from spigap.core.analysis import (AMBIGUOUS_KINDS, KIND_CLASS_A, KIND_CLASS_B, KIND_CONTEXT_SWITCH,
                                    KIND_CS_CHANGE, KIND_IDLE, Analysis)
from spigap.core.quantile import median
from spigap.errors import UsageError

STALL_KINDS = ("cs_setup", "cs_hold", "inter_byte", "inter_transfer", "cs_change", "context_switch",
               "idle")
ROBUST_SIGMA_PER_MAD = 1.4826


@dataclasses.dataclass(frozen=True)
class StallRule:
    """A gap is a stall when value > median + max(k·σ_robust, rel·median, min_samples ticks)."""

    k: float = 8.0
    rel: float = 0.5
    min_samples: float = 5.0
    min_count: int = 8

    def __post_init__(self):
        if not (self.k >= 0 and self.rel >= 0 and self.min_samples >= 0):
            raise UsageError("stall rule: k, rel and min_samples must be >= 0")
        if self.min_count < 3:
            raise UsageError("stall rule: min_count must be >= 3")

    def describe(self) -> str:
        return (f"gap > median + max({self.k:g} × robust σ, {self.rel * 100:g} % of the median, "
                f"{self.min_samples:g} samples), robust σ = 1.4826 × MAD, per gap kind and capture")


@dataclasses.dataclass(frozen=True)
class Stall:
    kind: str              # gap kind
    transfer: int          # index of the transfer the gap belongs to (gap_before: the later one)
    at_s: float            # capture time where the gap starts
    duration_s: float      # the gap
    excess_s: float        # gap - median of its kind
    median_s: float
    threshold_s: float
    resolution_s: float

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class GapSeries:
    """One gap kind in time order: where each gap starts, its length, its transfer (all ticks)."""

    kind: str
    at: np.ndarray          # int64 ticks, start of each gap
    values: np.ndarray      # float ticks
    transfer: np.ndarray    # int64 transfer index


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


def threshold(values: np.ndarray, rule: StallRule) -> tuple[float, float] | None:
    """(median, stall threshold) of tick values, or None when there are too few."""
    v = np.asarray(values, float)
    v = v[~np.isnan(v)]
    if len(v) < rule.min_count:
        return None
    med = float(median(v))
    return limit(med, float(median(np.abs(v - med))), rule)


def limit(med: float, mad: float, rule: StallRule) -> tuple[float, float]:
    """(median, stall threshold) from the median and the median absolute deviation (ticks)."""
    sigma = ROBUST_SIGMA_PER_MAD * mad
    return med, med + max(rule.k * sigma, rule.rel * abs(med), rule.min_samples)


def candidates(a, kind: str, rule: StallRule) -> tuple[GapSeries, tuple[float, float] | None]:
    """The gaps of ``kind`` that may be stalls, and (median, threshold) or None: every gap of
    an Analysis; a bounded analysis (core/collect.py) keeps only the longest ones."""
    if getattr(a, "bounded", False):
        return a.stall_candidates(kind, rule)
    s = gap_series(a, kind)
    return s, threshold(s.values, rule)


def count_threshold(a, kind: str, rule: StallRule) -> tuple[int, tuple[float, float] | None]:
    """(gaps of ``kind``, (median, threshold) or None)."""
    if getattr(a, "bounded", False):
        return a.stall_count_threshold(kind, rule)
    v = a.gap_values(kind)
    v = v[~np.isnan(v)]
    return len(v), (threshold(v, rule) if len(v) else None)


def stall_mask(values: np.ndarray, rule: StallRule = StallRule()) -> tuple[np.ndarray, float | None, float | None]:
    """Boolean mask of stalls among ``values`` (ticks), plus (median, threshold)."""
    v = np.asarray(values, float)
    th = threshold(v, rule)
    if th is None:
        return np.zeros(len(v), bool), None, None
    med, thr = th
    with np.errstate(invalid="ignore"):
        return v > thr, med, thr


def stall_kinds(a: Analysis) -> tuple:
    """The gap kinds searched for stalls: with an ambiguous grouping, the two classes too."""
    return STALL_KINDS + AMBIGUOUS_KINDS if a.grouping.ambiguous else STALL_KINDS


def find_stalls(a, rule: StallRule = StallRule(), kinds=None) -> list[Stall]:
    """Every stall in the capture, in time order (see the module doc for the rule)."""
    t = a.tick_s
    kinds = stall_kinds(a) if kinds is None else kinds
    out_at, out_kind, out_tr, out_v, out_med, out_thr = [], [], [], [], [], []
    for kind in kinds:
        if not a.available(kind):
            continue
        s, th = candidates(a, kind, rule)
        if th is None:
            continue
        med, thr = th
        mask = s.values > thr
        if not mask.any():
            continue
        k = int(mask.sum())
        out_at.append(s.at[mask])
        out_v.append(s.values[mask])
        out_tr.append(s.transfer[mask])
        out_kind += [kind] * k
        out_med.append(np.full(k, med))
        out_thr.append(np.full(k, thr))
    if not out_at:
        return []
    at = np.concatenate(out_at)
    order = np.argsort(at, kind="stable")
    v = np.concatenate(out_v)[order]
    meds = np.concatenate(out_med)[order]
    thrs = np.concatenate(out_thr)[order]
    tr = np.concatenate(out_tr)[order]
    kinds_sorted = [out_kind[i] for i in order.tolist()]
    at = at[order]
    return [Stall(kind=kd, transfer=int(x), at_s=float(s0) * t, duration_s=float(val) * t,
                  excess_s=float(val - m) * t, median_s=float(m) * t, threshold_s=float(th) * t,
                  resolution_s=t)
            for kd, x, s0, val, m, th in zip(kinds_sorted, tr.tolist(), at.tolist(), v.tolist(),
                                             meds.tolist(), thrs.tolist())]


def summary(a, stalls: list[Stall], rule: StallRule = StallRule(), kinds=None) -> dict:
    """Per kind: gaps searched, stalls, rate, median/threshold, time lost; plus totals (seconds)."""
    t = a.tick_s
    kinds = stall_kinds(a) if kinds is None else kinds
    per: dict[str, dict] = {}
    for kind in kinds:
        if not a.available(kind):
            continue
        n, th = count_threshold(a, kind, rule)
        if n == 0:
            continue
        mine = [s for s in stalls if s.kind == kind]
        per[kind] = d = {
            "gaps": int(n),
            "stalls": len(mine),
            "rate": len(mine) / n,
            "median_s": th[0] * t if th else None,
            "threshold_s": th[1] * t if th else None,
            "searched": th is not None,
            "excess_s": float(sum(s.excess_s for s in mine)),
            "longest_s": max((s.duration_s for s in mine), default=None),
        }
        if getattr(a, "bounded", False) and th is not None:
            a.complete_stall_summary(kind, th, d)   # more stalls than it kept: from its histogram
    total = float(sum(s.excess_s for s in stalls))
    count = len(stalls)
    if getattr(a, "bounded", False) and sum(int(p["stalls"]) for p in per.values()) != count:
        count = sum(int(p["stalls"]) for p in per.values())
        total = float(sum(float(p["excess_s"]) for p in per.values()))
    span = a.end_tick * t
    return {
        "rule": rule.describe(),
        "resolution_s": t,
        "count": count,
        "excess_s": total,
        "excess_fraction": total / span if span > 0 else None,
        "kinds": per,
    }


def to_dict(a, stalls: list[Stall], rule: StallRule = StallRule(), *, limit: int | None = None) -> dict:
    """JSON block: the summary plus the stalls (the first ``limit`` if given)."""
    d = summary(a, stalls, rule)
    shown = stalls if limit is None else stalls[:limit]
    d["stalls"] = [s.to_dict() for s in shown]
    d["stalls_omitted"] = d["count"] - len(shown)
    return d
