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

from spigap.core.analysis import (AMBIGUOUS_KINDS, DeviceFigures, GapSeries, gap_series,  # noqa: F401 (re-exported)
                                    gap_series_of)
from spigap.core.quantile import ROBUST_SIGMA_PER_MAD, median
from spigap.errors import UsageError

STALL_KINDS = ("cs_setup", "cs_hold", "inter_byte", "inter_transfer", "cs_change", "context_switch",
               "idle")


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


def count_threshold(a: DeviceFigures, kind: str, rule: StallRule) -> tuple[int, tuple[float, float] | None]:
    """(gaps of ``kind``, (median, threshold) or None when there are too few)."""
    n, med, mad = a.gap_center(kind)
    if med is None or mad is None or n < rule.min_count:
        return n, None
    return n, limit(med, mad, rule)


def stall_mask(values: np.ndarray, rule: StallRule = StallRule()) -> tuple[np.ndarray, float | None, float | None]:
    """Boolean mask of stalls among ``values`` (ticks), plus (median, threshold)."""
    v = np.asarray(values, float)
    th = threshold(v, rule)
    if th is None:
        return np.zeros(len(v), bool), None, None
    med, thr = th
    with np.errstate(invalid="ignore"):
        return v > thr, med, thr


def stall_kinds(a: DeviceFigures) -> tuple:
    """The gap kinds searched for stalls: with an ambiguous grouping, the two classes too."""
    return STALL_KINDS + AMBIGUOUS_KINDS if a.grouping.ambiguous else STALL_KINDS


@dataclasses.dataclass
class StallReport:
    """The stall search of one device's analysis, done once (core/run.py finishes every
    analysis with it): the stalls in time order and, per kind searched, the gaps and
    (median, threshold); the summary and the JSON block are read from it."""

    rule: StallRule
    stalls: list[Stall]
    kinds: dict[str, tuple[int, tuple[float, float] | None]]    # kind -> (gaps, (median, threshold) or None)
    beyond: dict[str, tuple[int, float, float]]     # kind -> (stalls, excess, longest) in ticks, where the
    #                                                 list could not hold them all (a bounded analysis)

    def summary(self, a: DeviceFigures) -> dict:
        """Per kind: gaps searched, stalls, rate, median/threshold, time lost; plus totals (seconds)."""
        return _summary(a, self.stalls, self.rule, self.kinds, self.beyond)

    def to_dict(self, a: DeviceFigures, *, limit: int | None = None) -> dict:
        """JSON block: the summary plus the stalls (the first ``limit`` if given)."""
        d = self.summary(a)
        shown = self.stalls if limit is None else self.stalls[:limit]
        d["stalls"] = [s.to_dict() for s in shown]
        d["stalls_omitted"] = d["count"] - len(shown)
        return d


def report(a: DeviceFigures, rule: StallRule = StallRule(), kinds=None) -> StallReport:
    """Every stall in the capture, in time order (see the module doc for the rule), with the
    thresholds of every kind searched, each computed once."""
    t = a.tick_s
    kinds = stall_kinds(a) if kinds is None else kinds
    out_at, out_kind, out_tr, out_v, out_med, out_thr = [], [], [], [], [], []
    per: dict[str, tuple[int, tuple[float, float] | None]] = {}
    beyond: dict[str, tuple[int, float, float]] = {}
    for kind in kinds:
        if not a.available(kind):
            continue
        n, th = count_threshold(a, kind, rule)
        per[kind] = (n, th)
        if th is None:
            continue
        med, thr = th
        more = a.stalls_beyond_list(kind, med, thr)
        if more is not None:
            beyond[kind] = more
        s = a.gaps_above(kind, thr)
        k = len(s.values)
        if not k:
            continue
        out_at.append(s.at)
        out_v.append(s.values)
        out_tr.append(s.transfer)
        out_kind += [kind] * k
        out_med.append(np.full(k, med))
        out_thr.append(np.full(k, thr))
    if not out_at:
        return StallReport(rule, [], per, beyond)
    at = np.concatenate(out_at)
    order = np.argsort(at, kind="stable")
    v = np.concatenate(out_v)[order]
    meds = np.concatenate(out_med)[order]
    thrs = np.concatenate(out_thr)[order]
    tr = np.concatenate(out_tr)[order]
    kinds_sorted = [out_kind[i] for i in order.tolist()]
    at = at[order]
    found = [Stall(kind=kd, transfer=int(x), at_s=float(s0) * t, duration_s=float(val) * t,
                   excess_s=float(val - m) * t, median_s=float(m) * t, threshold_s=float(th) * t,
                   resolution_s=t)
             for kd, x, s0, val, m, th in zip(kinds_sorted, tr.tolist(), at.tolist(), v.tolist(),
                                              meds.tolist(), thrs.tolist())]
    return StallReport(rule, found, per, beyond)


def find_stalls(a: DeviceFigures, rule: StallRule = StallRule(), kinds=None) -> list[Stall]:
    """Every stall in the capture, in time order (see the module doc for the rule)."""
    return report(a, rule, kinds).stalls


def summary(a: DeviceFigures, stalls: list[Stall], rule: StallRule = StallRule(), kinds=None) -> dict:
    """Per kind: gaps searched, stalls, rate, median/threshold, time lost; plus totals (seconds),
    of ``stalls`` (found with ``rule``)."""
    r = report(a, rule, kinds)
    return _summary(a, stalls, rule, r.kinds, r.beyond)


def _summary(a: DeviceFigures, stalls: list[Stall], rule: StallRule, kinds: dict, beyond: dict) -> dict:
    t = a.tick_s
    per: dict[str, dict] = {}
    for kind, (n, th) in kinds.items():
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
        if kind in beyond:
            # more stalls than the list holds (a bounded analysis): from its histogram
            k, total, longest = beyond[kind]
            d["stalls"] = k
            d["rate"] = k / n
            d["excess_s"] = total * t
            d["longest_s"] = float(longest) * t if k else None
    total = float(sum(s.excess_s for s in stalls))
    count = len(stalls)
    if sum(int(p["stalls"]) for p in per.values()) != count:
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


def to_dict(a: DeviceFigures, stalls: list[Stall], rule: StallRule = StallRule(), *, limit: int | None = None) -> dict:
    """JSON block: the summary plus the stalls (the first ``limit`` if given)."""
    d = summary(a, stalls, rule)
    shown = stalls if limit is None else stalls[:limit]
    d["stalls"] = [s.to_dict() for s in shown]
    d["stalls_omitted"] = d["count"] - len(shown)
    return d
