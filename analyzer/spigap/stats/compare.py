"""Before/after comparison of captures: statistics, verdicts, attribution.

For every gap kind, the transfer duration and period, the transfer rate, the
stall rate and (with ``--event``) every latency/interval of the extra
channels:

* p50, mean, p99, std and robust σ (IQR / 1.349) per side, pooled over the
  side's captures, with the difference after − before and its confidence
  interval from a block bootstrap (``resample.Bootstrap``; two-stage when a
  side has several captures);
* a **level** test: Mann-Whitney U on the medians of non-overlapping blocks
  of L consecutive values (L from the autocorrelation, ``resample``), and a
  **jitter** test: Mann-Whitney U on the blocks' robust spreads. Blocks, not
  single gaps, are the units, because consecutive gaps are not independent;
* Holm's correction over every test of the comparison, so "no significant
  change" holds for the comparison as a whole at the family-wise level α;
* a verdict: regression / improvement when the corrected p < α, the
  bootstrap interval excludes 0 **and** the change is at least the minimum
  effect (relative to the before value, and never below 2 samples of
  resolution); otherwise "no significant change". Longer is worse for every
  time; a lower transfer rate is worse.

Attribution: every transfer period is exactly CS setup + clocking (the words)
+ inter-byte + inter-transfer gaps + CS hold + the CS-inactive gap after it
(cs_change, context switch or idle). Means add up, so the change of the mean
period splits exactly into the changes of these parts; the excess of stalls
over their kind's median is split off as its own part, so a rarer or more
frequent stall does not masquerade as a shift of its gap kind.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

import numpy as np

from spigap.core.analysis import (AMBIGUOUS_KINDS, KIND_CLASS_A, KIND_CLASS_B, KIND_CONTEXT_SWITCH,
                                    KIND_CS_CHANGE, KIND_IDLE, Analysis, start_rate_hz)
from spigap.core.result import Result
from spigap.core.stalls import STALL_KINDS, StallReport, StallRule, report as stall_report, stall_mask
from spigap.errors import UsageError
from spigap.stats import resample

if TYPE_CHECKING:
    from spigap.core.events import EventReport
    from spigap.trace.pair import TracedCapture

TIME_KINDS = ("cs_setup", "cs_hold", "inter_byte", "inter_transfer", "cs_change", "context_switch",
              "class_a", "class_b", "idle", "transfer_duration", "transfer_period")
LABELS = {
    "cs_setup": "CS setup", "cs_hold": "CS hold", "inter_byte": "inter-byte",
    "inter_transfer": "inter-transfer", "cs_change": "cs_change", "context_switch": "context switch",
    "idle": "bus idle", "transfer_duration": "transfer duration", "transfer_period": "transfer period",
    "transfer_rate": "transfer rate", "stalls": "stall rate", "clocking": "clocking (words)",
    "stall_excess": "stalls (excess)",
    # an ambiguous grouping's two kinds of CS-inactive gap (docs/gaps.md): which one is the
    # context switch is not known; short enough for the text tables' label columns
    "class_a": "cs_chg|ctx A (short)", "class_b": "cs_chg|ctx B (long)",
}
# Where a change of each part of the period usually comes from (docs/gaps.md, docs/linux-spi-timing.md §7).
HINTS = {
    "cs_setup": "GPIO chip-select path and transfer set-up (spi_set_cs/gpiod_set_value; gpiolib "
                "SRCU locking since v6.9, docs/linux-spi-timing.md §2.3; transfer_one() FIFO fill)",
    "cs_hold": "end-of-transfer detection (poll / IRQ + wake-up / DMA callback) and the GPIO "
               "chip-select write",
    "cs_setup+cs_hold": "the GPIO chip-select path (spi_set_cs → gpiod_set_value: gpiolib SRCU "
                        "locking since v6.9, docs/linux-spi-timing.md §2.3) and transfer set-up / completion",
    "clocking": "SCLK frequency or bits per transfer",
    "inter_byte": "the controller between words (idle clocks, FIFO refills, DMA vs PIO)",
    "inter_transfer": "per-transfer software cost inside one CS window (transfer boundaries, "
                      "xfer->delay, keep_cs hand-over)",
    "cs_change": "the cs_change delay (udelay(10) via spidev) and two GPIO writes",
    "context_switch": "syscall exit/entry, user space and __spi_sync between messages (scheduling)",
    "idle": "time between bursts without a CS line",
    "class_a": "the shorter CS-inactive gaps: cs_change or context switch, which one is ambiguous "
               "(--context-switch longer|shorter settles it, docs/gaps.md)",
    "class_b": "the longer CS-inactive gaps: cs_change or context switch, which one is ambiguous "
               "(--context-switch longer|shorter settles it, docs/gaps.md)",
    "stall_excess": "rare long gaps (interrupts, preemption, printk/UART flushes)",
}
MIN_VALUES = 10          # per side, for a test


@dataclasses.dataclass(frozen=True)
class Settings:
    alpha: float = 0.05               # family-wise (Holm)
    min_effect_s: float = 0.0         # absolute minimum level change (time metrics)
    min_rel_effect: float = 0.02      # minimum level change relative to the before value
    min_rel_jitter: float = 0.20      # minimum robust-σ change relative to the before value
    min_stall_ratio: float = 2.0      # stall rate after/before (or before/after) to count
    n_boot: int = 1000
    block_length: int | None = None   # None = from the autocorrelation
    seed: int = 0
    stall_rule: StallRule = StallRule()

    def __post_init__(self):
        if not 0 < self.alpha < 1:
            raise UsageError(f"--alpha must be in (0, 1), got {self.alpha:g}")
        if self.min_effect_s < 0 or self.min_rel_effect < 0 or self.min_rel_jitter < 0:
            raise UsageError("minimum effects must be >= 0")
        if self.min_stall_ratio < 1:
            raise UsageError("--min-stall-ratio must be >= 1")
        if self.n_boot < 100:
            raise UsageError(f"--bootstrap {self.n_boot}: use at least 100 resamples")
        if self.block_length is not None and self.block_length < 1:
            raise UsageError("--block-length must be >= 1")

    @property
    def confidence(self) -> float:
        return 1 - self.alpha


@dataclasses.dataclass
class Capture:
    """One device of a capture of a side: its analysis, optional extra-channel events, stalls."""

    path: str
    analysis: Analysis
    events: EventReport | None = None
    _stalls: StallReport | None = None
    traced: TracedCapture | None = None     # its kernel trace, aligned and split into phases

    def stall_report(self, rule: StallRule) -> StallReport:
        """The stall search with ``rule``: the one the analysis was finished with (core/run.py)."""
        if self._stalls is None or self._stalls.rule != rule:
            done = self.analysis.stalls
            self._stalls = done if done is not None and done.rule == rule else stall_report(self.analysis, rule)
        return self._stalls

    def stalls(self, rule: StallRule) -> list:
        return self.stall_report(rule).stalls


@dataclasses.dataclass
class Loaded:
    """One capture file of a side, analyzed: its result (every device on the bus, and the
    bus) and each device as a ``Capture`` (named ``PATH [CS]`` on a shared bus)."""

    path: str
    result: Result
    devices: dict[str, Capture] = dataclasses.field(init=False)

    def __post_init__(self):
        bus = self.result.bus is not None
        self.devices = {n: Capture(f"{self.path} [{n}]", a, None) if bus else Capture(self.path, a, a.events)
                        for n, a in self.result.devices.items()}

    @property
    def capture(self) -> Capture:
        """The capture of one device."""
        if len(self.devices) != 1:
            raise UsageError(f"{self.path} holds {len(self.devices)} devices on one bus: give --cs NAME")
        return next(iter(self.devices.values()))


@dataclasses.dataclass
class Test:
    aspect: str                 # level | jitter | rate | stalls
    statistic: str              # what Δ is (p50, robust σ, rate, stall rate ratio)
    delta: float | None
    ci: tuple[float, float] | None
    threshold: float | None
    p: float | None
    p_holm: float | None = None
    verdict: str = "no significant change"
    note: str = ""
    unit: str = "s"             # of delta, ci and threshold: s, Hz or ratio

    def to_dict(self) -> dict:
        return {"aspect": self.aspect, "statistic": self.statistic, "unit": self.unit, "delta": _f(self.delta),
                "ci": [_f(self.ci[0]), _f(self.ci[1])] if self.ci else None,
                "threshold": _f(self.threshold), "p": _f(self.p), "p_holm": _f(self.p_holm),
                "verdict": self.verdict, "note": self.note}


@dataclasses.dataclass
class MetricResult:
    name: str
    label: str
    unit: str                   # "s", "Hz" or "1" (a rate per gap)
    before: dict
    after: dict
    deltas: dict                # statistic -> {"delta", "ci"}
    tests: list[Test]
    block: resample.BlockChoice | None
    resolution_s: float | None
    verdict: str
    note: str = ""
    per_capture: dict | None = None     # side -> [p50 of each capture]

    def test(self, aspect: str) -> Test | None:
        return next((t for t in self.tests if t.aspect == aspect), None)

    def to_dict(self) -> dict:
        """JSON form; keys carry their unit like the analyze JSON (``p50_s``, ``rate_hz``)."""
        suffix = {"s": "_s", "Hz": "_hz"}.get(self.unit, "")

        def stats(d):
            return {(k if k in ("n", "stalls", "gaps") else k + suffix): _f(v) if isinstance(v, float) else v
                    for k, v in d.items()}

        return {"metric": self.name, "label": self.label, "unit": self.unit,
                "before": stats(self.before), "after": stats(self.after),
                "delta": {k: {"delta" + suffix: _f(v["delta"]), "ci" + suffix: [_f(v["ci"][0]), _f(v["ci"][1])]}
                          for k, v in self.deltas.items()},
                "tests": [t.to_dict() for t in self.tests],
                "block_length": self.block.length if self.block else None,
                "block_note": self.block.describe() if self.block else None,
                "resolution_s": self.resolution_s, "verdict": self.verdict, "note": self.note,
                "per_capture_p50" + suffix: self.per_capture}


@dataclasses.dataclass
class Comparison:
    settings: Settings
    before: list[Capture]
    after: list[Capture]
    metrics: list[MetricResult]
    attribution: dict | None
    notes: list[str]
    n_tests: int
    phases: list[PhaseResult] | None = None     # with (capture, trace) pairs: every common phase compared

    @property
    def regressions(self) -> list[MetricResult]:
        return [m for m in self.metrics if m.verdict == "regression"]

    @property
    def improvements(self) -> list[MetricResult]:
        return [m for m in self.metrics if m.verdict == "improvement"]

    @property
    def verdict(self) -> str:
        if self.regressions:
            return "regression"
        if self.improvements:
            return "improvement"
        return "no significant change"

    def metric(self, name: str) -> MetricResult | None:
        return next((m for m in self.metrics if m.name == name), None)


@dataclasses.dataclass
class PhaseResult:
    """One phase (gap kind, from event, to event) before vs after: the gap statistics' MetricResult."""

    gap: str
    frm: str
    to: str
    metric: MetricResult

    def to_dict(self) -> dict:
        return {"gap": self.gap, "from": self.frm, "to": self.to, **self.metric.to_dict()}


def _f(x):
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


# ------------------------------------------------------------------ inputs
def time_series(a: Analysis, kind: str) -> np.ndarray:
    """Values of one gap kind in seconds, time order, without NaN."""
    if not a.available(kind):
        return np.empty(0)
    v = a.gap_values(kind)
    v = v[~np.isnan(v)]
    return v.astype(float) * a.tick_s


def _resolution(caps: list[Capture]) -> float:
    return max(c.analysis.tick_s for c in caps)


# ------------------------------------------------------------------- tests
def _mwu(x: np.ndarray, y: np.ndarray) -> float | None:
    from scipy.stats import mannwhitneyu

    if len(x) < 3 or len(y) < 3:
        return None
    if np.all(x == x[0]) and np.all(y == x[0]):
        return 1.0
    p = float(mannwhitneyu(x, y, alternative="two-sided", method="asymptotic").pvalue)
    return 1.0 if math.isnan(p) else p


def _delta(b_reps, a_reps, b_point, a_point, level):
    d = None if b_point is None or a_point is None else a_point - b_point
    ci = resample.percentile_ci(np.asarray(a_reps) - np.asarray(b_reps), level)
    return {"delta": d, "ci": ci}


def time_metric(name, label, before: list[np.ndarray], after: list[np.ndarray], res: float,
                 st: Settings, rng) -> MetricResult:
    b_all = np.concatenate(before) if before else np.empty(0)
    a_all = np.concatenate(after) if after else np.empty(0)
    pb, pa = resample.point_stats(b_all), resample.point_stats(a_all)
    per = {"before": [float(np.median(x)) if len(x) else None for x in before],
           "after": [float(np.median(x)) if len(x) else None for x in after]}
    if len(b_all) == 0 or len(a_all) == 0:
        side = "after" if len(b_all) == 0 else "before"
        return MetricResult(name, label, "s", pb, pa, {}, [], None, res, "not comparable",
                            f"only in the {side} capture(s): the bus pattern changed", per)
    if len(b_all) < MIN_VALUES or len(a_all) < MIN_VALUES:
        return MetricResult(name, label, "s", pb, pa, {}, [], None, res, "insufficient data",
                            f"fewer than {MIN_VALUES} values on a side", per)
    blk = resample.block_length([x for x in before + after if len(x)], st.block_length)
    L = blk.length
    width = max(len(x) for x in before + after) * max(len(before), len(after))
    B = resample.adaptive_replicates(st.n_boot, width)
    rb = resample.Bootstrap(before, L, rng).replicate_stats(B)
    ra = resample.Bootstrap(after, L, rng).replicate_stats(B)
    spread = lambda r: (r[0.75] - r[0.25]) * resample.ROBUST_SIGMA_PER_IQR  # noqa: E731
    lvl = st.confidence
    deltas = {
        "p50": _delta(rb[0.5], ra[0.5], pb["p50"], pa["p50"], lvl),
        "mean": _delta(rb["mean"], ra["mean"], pb["mean"], pa["mean"], lvl),
        "p99": _delta(rb[0.99], ra[0.99], pb["p99"], pa["p99"], lvl),
        "std": _delta(rb["std"], ra["std"], pb["std"], pa["std"], lvl),
        "spread": _delta(spread(rb), spread(ra), pb["spread"], pa["spread"], lvl),
    }
    p_level = _mwu(resample.block_summaries(before, L, "median"), resample.block_summaries(after, L, "median"))
    p_jit = _mwu(resample.block_summaries(before, L, "spread"), resample.block_summaries(after, L, "spread"))
    thr_level = max(st.min_effect_s, st.min_rel_effect * abs(pb["p50"]), 2 * res)
    thr_jit = max(st.min_rel_jitter * pb["spread"], 2 * res)
    tests = [Test("level", "p50", deltas["p50"]["delta"], deltas["p50"]["ci"], thr_level, p_level),
             Test("jitter", "robust σ", deltas["spread"]["delta"], deltas["spread"]["ci"], thr_jit, p_jit)]
    note = "" if B == st.n_boot else f"{B} bootstrap resamples (long series)"
    return MetricResult(name, label, "s", pb, pa, deltas, tests, blk, res, "", note, per)


def _rate_metric(before: list[np.ndarray], after: list[np.ndarray], st: Settings, rng) -> MetricResult:
    """Transfers per second = 1 / mean start-to-start period (stalls included: it is the
    throughput): the one transfer rate (analysis.start_rate_hz; n periods are n + 1 starts over
    their sum), of each side's captures pooled; of one capture, analyze's rate."""
    b_all = np.concatenate(before) if before else np.empty(0)
    a_all = np.concatenate(after) if after else np.empty(0)
    rate = lambda v: start_rate_hz(len(v) + 1, 0.0, float(np.sum(v)))  # noqa: E731
    pb = {"n": int(len(b_all)), "rate": rate(b_all)}
    pa = {"n": int(len(a_all)), "rate": rate(a_all)}
    if len(b_all) < MIN_VALUES or len(a_all) < MIN_VALUES:
        return MetricResult("transfer_rate", LABELS["transfer_rate"], "Hz", pb, pa, {}, [], None, None,
                            "insufficient data", f"fewer than {MIN_VALUES} periods on a side")
    blk = resample.block_length([x for x in before + after if len(x)], st.block_length)
    L = blk.length
    mb = resample.Bootstrap(before, L, rng).replicate_means(st.n_boot)[:, 0]
    ma = resample.Bootstrap(after, L, rng).replicate_means(st.n_boot)[:, 0]
    d = _delta(1 / mb, 1 / ma, pb["rate"], pa["rate"], st.confidence)
    p = _mwu(resample.block_summaries(before, L, "mean"), resample.block_summaries(after, L, "mean"))
    t = Test("rate", "transfers/s", d["delta"], d["ci"], st.min_rel_effect * float(pb["rate"] or 0.0), p, unit="Hz")
    return MetricResult("transfer_rate", LABELS["transfer_rate"], "Hz", pb, pa, {"rate": d}, [t], blk, None, "")


def _stall_metric(before: list[Capture], after: list[Capture], st: Settings) -> MetricResult:
    from scipy.stats import fisher_exact

    def count(caps):
        k = sum(len(c.stalls(st.stall_rule)) for c in caps)
        n = 0
        for c in caps:
            for kind in STALL_KINDS:
                v = c.analysis.gap_values(kind) if c.analysis.available(kind) else np.empty(0)
                n += int(np.count_nonzero(~np.isnan(v)))
        return k, n

    kb, nb = count(before)
    ka, na = count(after)
    rb = kb / nb if nb else None
    ra = ka / na if na else None
    pb = {"stalls": kb, "gaps": nb, "rate": rb}
    pa = {"stalls": ka, "gaps": na, "rate": ra}
    if not nb or not na:
        return MetricResult("stalls", LABELS["stalls"], "1", pb, pa, {}, [], None, None, "insufficient data")
    p = float(fisher_exact([[kb, nb - kb], [ka, na - ka]]).pvalue) if (kb + ka) else 1.0
    ratio = (ra / rb) if rb else (math.inf if ra else 1.0)
    t = Test("stalls", "stall rate ratio after/before", ratio, None, st.min_stall_ratio, p,
             note="stalls counted with each capture's own median; Fisher's exact test treats "
                  "stalls as independent events", unit="ratio")
    return MetricResult("stalls", LABELS["stalls"], "1", pb, pa, {}, [t], None, None, "")


def _holm(ps: list[float]) -> list[float]:
    m = len(ps)
    order = np.argsort(ps, kind="stable")
    adj = np.empty(m)
    running = 0.0
    for rank, i in enumerate(order.tolist()):      # m tests, not per value
        running = max(running, min(1.0, (m - rank) * ps[i]))
        adj[i] = running
    return adj.tolist()


def _decide(m: MetricResult, st: Settings) -> None:
    verdicts = []
    for t in m.tests:
        if t.p_holm is None or t.delta is None:
            t.verdict = "no significant change"
            t.note = t.note or "no test (too few blocks)"
            verdicts.append(t.verdict)
            continue
        significant = t.p_holm < st.alpha
        if t.aspect == "stalls":
            worse = t.delta >= st.min_stall_ratio
            better = t.delta <= 1 / st.min_stall_ratio
            big = worse or better
        else:
            excl = t.ci is not None and (t.ci[0] > 0 or t.ci[1] < 0)
            significant = significant and excl
            big = t.delta is not None and t.threshold is not None and abs(t.delta) >= t.threshold
            worse = t.delta > 0 if t.aspect != "rate" else t.delta < 0
        if significant and big:
            t.verdict = "regression" if worse else "improvement"
        else:
            t.verdict = "no significant change"
            if significant:
                t.note = (t.note + "; " if t.note else "") + "statistically significant but below the minimum effect"
        verdicts.append(t.verdict)
    if "regression" in verdicts:
        m.verdict = "regression"
    elif "improvement" in verdicts:
        m.verdict = "improvement"
    else:
        m.verdict = "no significant change"


# -------------------------------------------------------------- attribution
PARTS = ("cs_setup", "cs_hold", "clocking", "inter_byte", "inter_transfer", "cs_change", "context_switch",
         "class_a", "class_b", "idle", "stall_excess")


def _structure(c) -> str:
    """A capture's message structure as text: N, a pattern of lengths (2+3), or '?'."""
    g = c.analysis.grouping
    if g.transfers_per_message is not None:
        return str(g.transfers_per_message)
    return "+".join(str(x) for x in g.lengths) if g.lengths else "?"


def period_parts(a: Analysis, rule: StallRule = StallRule()) -> np.ndarray:
    """Per transfer with a valid period: the parts it is made of, in seconds, shape (n, len(PARTS)).

    Rows add up exactly to the transfer period (start of the next transfer −
    start of this one). Stalls (``rule``) contribute their excess over their
    kind's median to ``stall_excess`` instead of their kind.
    """
    n = a.n
    t = a.tick_s
    if n < 2:
        return np.empty((0, len(PARTS)))
    col = {p: i for i, p in enumerate(PARTS)}
    out = np.zeros((n, len(PARTS)))
    excess = np.zeros(n)
    for kind in ("cs_setup", "cs_hold"):
        v = getattr(a, kind).astype(float)
        if a.has_cs:
            mask, med, _ = stall_mask(v, rule)
            ex = np.where(mask, v - (med or 0.0), 0.0)
            out[:, col[kind]] = np.nan_to_num(v) - ex
            excess += ex
    owner = np.repeat(np.arange(n), np.diff(a.pair_off))
    for kind, sel in (("inter_byte", ~a.pair_inter_transfer), ("inter_transfer", a.pair_inter_transfer)):
        v = a.pair_gap[sel].astype(float)
        mask, med, _ = stall_mask(v, rule)
        ex = np.where(mask, v - (med or 0.0), 0.0)
        out[:, col[kind]] = np.bincount(owner[sel], weights=v - ex, minlength=n)
        excess += np.bincount(owner[sel], weights=ex, minlength=n)
    words_etc = a.duration - np.nan_to_num(a.cs_setup) - np.nan_to_num(a.cs_hold) - np.bincount(
        owner, weights=a.pair_gap.astype(float), minlength=n)
    out[:, col["clocking"]] = words_etc
    # the CS-inactive gap after transfer k is gap_before[k + 1]
    g = np.full(n, np.nan)
    g[:-1] = a.gap_before[1:]
    gk = np.full(n, -1)
    gk[:-1] = a.gap_kind[1:]
    for kind, code in (("cs_change", KIND_CS_CHANGE), ("context_switch", KIND_CONTEXT_SWITCH),
                       ("class_a", KIND_CLASS_A), ("class_b", KIND_CLASS_B), ("idle", KIND_IDLE)):
        sel = gk == code
        v = np.where(sel, g, np.nan)
        mask, med, _ = stall_mask(v[sel], rule)
        ex = np.zeros(n)
        ex[np.flatnonzero(sel)[mask]] = v[sel][mask] - (med or 0.0)
        out[:, col[kind]] = np.where(sel, g - ex, 0.0)
        excess += ex
    out[:, col["stall_excess"]] = excess
    valid = ~np.isnan(a.period())
    valid = np.concatenate([valid, [False]]) & ~np.isnan(words_etc) & ~np.isnan(g)
    return out[valid] * t


def _attribution(before: list[Capture], after: list[Capture], period: MetricResult | None,
                 st: Settings, rng) -> dict | None:
    pb = [period_parts(c.analysis, st.stall_rule) for c in before]
    pa = [period_parts(c.analysis, st.stall_rule) for c in after]
    nb, na = sum(len(x) for x in pb), sum(len(x) for x in pa)
    if nb < MIN_VALUES or na < MIN_VALUES:
        return None
    L = period.block.length if period is not None and period.block else 1
    Bb = resample.Bootstrap([x[:, 0] for x in pb if len(x)], L, rng)
    Ba = resample.Bootstrap([x[:, 0] for x in pa if len(x)], L, rng)
    cb = np.concatenate([x for x in pb if len(x)])
    ca = np.concatenate([x for x in pa if len(x)])
    # add the total (the period) as the last column, so its interval comes from the same resamples
    cb = np.column_stack([cb, cb.sum(axis=1)])
    ca = np.column_stack([ca, ca.sum(axis=1)])
    mb = Bb.replicate_means(st.n_boot, cb)
    ma = Ba.replicate_means(st.n_boot, ca)
    mean_b, mean_a = cb.mean(axis=0), ca.mean(axis=0)
    d = mean_a - mean_b
    reps = ma - mb
    total, total_ci = float(d[-1]), resample.percentile_ci(reps[:, -1], st.confidence)
    level = period.test("level") if period is not None else None
    thr = level.threshold if level is not None else None
    changed = thr is not None and abs(total) >= thr and (total_ci[0] > 0 or total_ci[1] < 0)
    parts: list[dict] = []
    for i, p in enumerate(PARTS):
        if mean_b[i] == 0 and mean_a[i] == 0:
            continue
        parts.append({"part": p, "label": LABELS.get(p, p), "before_s": float(mean_b[i]),
                      "after_s": float(mean_a[i]), "delta_s": float(d[i]),
                      "ci_s": list(resample.percentile_ci(reps[:, i], st.confidence)),
                      "share": float(d[i] / total) if total != 0 else None, "hint": HINTS.get(p, "")})
    parts.sort(key=lambda r: -abs(r["delta_s"]))
    # the CS edges together: the seed 003 diagnosis ("GPIO chip-select path")
    groups = {"cs_setup+cs_hold": ("cs_setup", "cs_hold")}
    grouped = {}
    for gname, members in groups.items():
        idx = [PARTS.index(x) for x in members]
        gd = float(d[idx].sum())
        grouped[gname] = {"delta_s": gd, "ci_s": list(resample.percentile_ci(reps[:, idx].sum(axis=1), st.confidence)),
                          "share": gd / total if total != 0 else None, "hint": HINTS[gname]}
    interp = _interpret(total, total_ci, changed, parts, grouped)
    return {"metric": "transfer period (mean over transfers, stalls split off)",
            "before_mean_s": float(mean_b[-1]), "after_mean_s": float(mean_a[-1]),
            "delta_s": total, "ci_s": list(total_ci), "changed": bool(changed),
            "parts": parts, "groups": grouped, "interpretation": interp,
            "method": "every period = CS setup + clocking + word gaps + CS hold + the gap after it; "
                      "means add up, so the parts' changes sum to the period's change; "
                      f"{int(st.confidence * 100)} % intervals from the same block bootstrap"}


def _interpret(total, ci, changed, parts, grouped) -> str:
    from spigap.units import fmt_time

    if not changed:
        return (f"the mean transfer period changed by {fmt_time(total, 3)} "
                f"[{fmt_time(ci[0], 3)}, {fmt_time(ci[1], 3)}]: no significant change to attribute")
    cs = grouped["cs_setup+cs_hold"]
    top = parts[0]
    if cs["share"] is not None and cs["share"] >= 0.5:
        where = f"mostly in CS setup + hold ({fmt_time(cs['delta_s'], 3)}, {cs['share'] * 100:.0f} %): {cs['hint']}"
    elif top["share"] is not None and top["share"] >= 0.5:
        where = f"mostly in {top['label']} ({fmt_time(top['delta_s'], 3)}, {top['share'] * 100:.0f} %): {top['hint']}"
    else:
        spread = ", ".join(f"{r['label']} {fmt_time(r['delta_s'], 3)}" for r in parts[:3])
        where = f"spread over several parts: {spread}"
    sign = "+" if total > 0 else ""
    return f"mean transfer period {sign}{fmt_time(total, 3)} per transfer, {where}"


# --------------------------------------------------------------------- main
def compare(before: list[Capture], after: list[Capture], settings: Settings = Settings()) -> Comparison:
    if not before or not after:
        raise UsageError("compare needs at least one --before and one --after capture")
    st = settings
    rng = np.random.default_rng(st.seed)
    res = max(_resolution(before), _resolution(after))
    notes = []
    metrics: list[MetricResult] = []
    ticks = {c.analysis.tick_s for c in before + after}
    if len(ticks) > 1:
        notes.append("the captures have different sample rates; every difference is ±"
                     f"{res * 1e9:.3g} ns (the coarsest resolution)")
    for side, caps in (("before", before), ("after", after)):
        tpm = {_structure(c) for c in caps}
        if len(tpm) > 1:
            notes.append(f"the {side} captures have different message structures "
                         f"({', '.join(sorted(tpm))} transfers per message)")
    tb = {_structure(c) for c in before}
    ta = {_structure(c) for c in after}
    if tb.isdisjoint(ta):
        notes.append(f"the message structure changed ({'/'.join(map(str, sorted(tb)))} → "
                     f"{'/'.join(map(str, sorted(ta)))} transfers per message): cs_change and "
                     "context-switch figures are not like for like")
    for kind in TIME_KINDS:
        b = [time_series(c.analysis, kind) for c in before]
        a = [time_series(c.analysis, kind) for c in after]
        if not any(len(x) for x in b) and not any(len(x) for x in a):
            continue
        m = time_metric(kind, LABELS[kind], b, a, res, st, rng)
        if kind in AMBIGUOUS_KINDS and m.verdict == "not comparable":
            side = "after" if not any(len(x) for x in b) else "before"
            m.note = (f"the grouping is ambiguous in the {side} capture(s) only: there the CS-inactive gaps "
                      "are classes A/B, elsewhere cs_change/context_switch; --transfers-per-message N "
                      "--context-switch longer|shorter on both sides compares them")
        metrics.append(m)
    if any(m.name in AMBIGUOUS_KINDS and m.verdict != "not comparable" for m in metrics):
        notes.append("cs_chg|ctx A/B: the grouping is ambiguous (docs/gaps.md): the shorter and the longer kind "
                     "of CS-inactive gap, compared by length; which one is the context switch is not known "
                     "(--transfers-per-message N --context-switch longer|shorter settles it)")
    period = next((m for m in metrics if m.name == "transfer_period"), None)
    metrics.append(_rate_metric([time_series(c.analysis, "transfer_period") for c in before],
                                [time_series(c.analysis, "transfer_period") for c in after], st, rng))
    metrics.append(_stall_metric(before, after, st))
    # extra channels
    if any(c.events is not None for c in before + after):
        names: list[str] = []
        for c in before + after:
            if c.events is not None:
                names += [k for k in c.events.metrics() if k not in names]
        for name in names:
            def ser(c):
                if c.events is None:
                    return np.empty(0)
                v = c.events.metrics().get(name)
                return np.empty(0) if v is None else v * c.events.tick_s
            metrics.append(time_metric(f"event:{name}", name, [ser(c) for c in before],
                                        [ser(c) for c in after], res, st, rng))
    # kernel phases, with (capture, trace) pairs on both sides
    phase_results = _phase_metrics(before, after, st, rng) if any(c.traced for c in before) and any(
        c.traced for c in after) else None
    if any(c.traced for c in before + after) and phase_results is None:
        notes.append("kernel traces were given for one side only: no phase comparison")
    # Holm over every test that produced a p-value (the phases' too: one family)
    tests = [t for m in metrics + [r.metric for r in phase_results or []] for t in m.tests if t.p is not None]
    for t, p in zip(tests, _holm([t.p for t in tests if t.p is not None])):
        t.p_holm = p
    for m in metrics + [r.metric for r in phase_results or []]:
        if m.verdict in ("not comparable", "insufficient data"):
            continue
        _decide(m, st)
    attribution = _attribution(before, after, period, st, rng) if period is not None and period.tests else None
    if len(before) == 1 or len(after) == 1:
        notes.append("one capture on a side: the intervals cover the variation within a capture, not "
                     "between runs or boots; give several captures per side (--before A B ...) to include it")
    if phase_results is not None and (any(c.traced is None for c in before + after)):
        notes.append("phases compared over the captures that have a trace only")
    return Comparison(st, before, after, metrics, attribution, notes, len(tests), phase_results)


def _phase_metrics(before: list[Capture], after: list[Capture], st: Settings, rng) -> list[PhaseResult]:
    """Every phase seen in at least 5 % of its gap kind's gaps on a side (``pair.RARE``;
    rarer ones come from lost or stray events), compared like a gap kind: its durations per
    capture in time order, the phase's resolution (one sample between bus edges, the trace's
    timestamp step between events) as the resolution. Order: the gap kinds', then the
    phases' order inside the gap."""
    from spigap.trace.phases import KIND_ORDER

    keys: dict[tuple[str, str, str], tuple[float, float]] = {}     # key -> (position, resolution)
    for c in before + after:
        if c.traced is None:
            continue
        for p in c.traced.common():
            pos, res = keys.get((p.gap, p.frm, p.to), (p.position, 0.0))
            keys[(p.gap, p.frm, p.to)] = (pos, max(res, p.resolution_s))

    def series(caps, key):
        out = []
        for c in caps:
            if c.traced is None:
                continue
            ph = next((p for p in c.traced.phases.phases if (p.gap, p.frm, p.to) == key), None)
            v = np.asarray(ph.values, float) if ph is not None and ph.values is not None else np.empty(0)
            step = c.traced.trace.resolution_s
            if not key[1].startswith("bus:") and not key[2].startswith("bus:") and step > 10 * c.analysis.tick_s:
                # two trace timestamps: the duration is a whole number of timestamp steps; the
                # clock-rate correction (ppm of it) is not information, only a spurious difference
                v = np.round(v / step) * step
            out.append(v)
        return out

    order = sorted(keys, key=lambda k: (KIND_ORDER.index(k[0]) if k[0] in KIND_ORDER else 99, keys[k][0]))
    out = []
    for key in order:
        gap, frm, to = key
        m = time_metric(f"phase:{gap}:{frm}->{to}", f"{gap}: {frm} → {to}", series(before, key),
                        series(after, key), keys[key][1], st, rng)
        out.append(PhaseResult(gap, frm, to, m))
    return out


# ------------------------------------------------------------------ a shared bus
SPLIT_KINDS = {"cs_change": KIND_CS_CHANGE, "context_switch": KIND_CONTEXT_SWITCH, "class_a": KIND_CLASS_A,
               "class_b": KIND_CLASS_B}


@dataclasses.dataclass
class Split:
    """One device's gap kind: the gap, the other devices' time in it, the rest."""

    device: str
    kind: str
    gap: MetricResult
    others: MetricResult
    own: MetricResult

    def mean_deltas(self) -> tuple[float | None, float | None, float | None]:
        def d(m):
            x = m.deltas.get("mean") if m.deltas else None
            return None if x is None else x["delta"]
        return d(self.gap), d(self.others), d(self.own)

    def sentence(self) -> str | None:
        from spigap.units import fmt_time

        g, o, w = self.mean_deltas()
        if g is None or o is None or w is None:
            return None
        verb = "grew" if g > 0 else "shrank"
        part = "all" if abs(w) <= 0.1 * abs(g) else ("most" if abs(o) >= 0.5 * abs(g) and o * g > 0 else "some")
        if o * g <= 0:
            return (f"{self.device}'s {self.kind} {verb} by {fmt_time(abs(g))} (mean), none of it while other devices "
                    f"held the bus: its own part changed by {fmt_time(w)}")
        return (f"{self.device}'s {self.kind} {verb} by {fmt_time(abs(g))} (mean), {part} of it while other devices "
                f"held the bus ({fmt_time(o)} of their CS time in the gap, {fmt_time(w)} its own)")


@dataclasses.dataclass
class BusComparison:
    devices: dict               # cs -> Comparison
    splits: list[Split]
    bus: list                   # MetricResult (handover gaps per pair)
    busy: dict                  # side -> [busy share per capture, None for an empty one]
    notes: list[str]

    @property
    def regressions(self) -> list:
        return [m for c in self.devices.values() for m in c.regressions]

    @property
    def improvements(self) -> list:
        return [m for c in self.devices.values() for m in c.improvements]


def compare_all(before: list[Loaded], after: list[Loaded], settings: Settings = Settings()) -> "Comparison | BusComparison":
    """Captures of one device (``compare``), or of a shared bus: every device compared as a
    capture of that one device (one Holm family per device), then what of each device's
    CS-inactive gaps happened while other devices held the bus, and the bus's handovers
    (docs/shared-bus.md, "compare")."""
    if not any(x.result.bus is not None for x in before + after):
        return compare([x.capture for x in before], [x.capture for x in after], settings)
    return compare_bus(before, after, settings)


def compare_bus(before: list[Loaded], after: list[Loaded], settings: Settings) -> BusComparison:
    """``before``/``after``: captures of a shared bus."""
    shared: list[Result] = [x.result for x in before + after]
    if not all(x.bus is not None for x in shared):
        raise UsageError("compare: a shared bus on one side and one device on the other: analyze the same "
                         "CS line(s) on both sides (--cs CE0,CE1, or --cs NAME for one device)")
    names = [n for n in shared[0].devices if all(n in x.devices for x in shared)]
    notes = []
    every = {n for x in shared for n in x.devices}
    if set(names) != every:
        notes.append(f"devices on one side only, not compared: {', '.join(sorted(every - set(names)))}")
    if not names:
        raise UsageError("compare: no CS line is on both sides")
    devices = {n: compare([c.devices[n] for c in before], [c.devices[n] for c in after], settings) for n in names}
    rng = np.random.default_rng(settings.seed)
    res = max(c.result.tick_s for c in before + after)
    found: list[tuple[str, str, dict]] = []
    sampled = False                 # a device's columns missing (not expected: left out, said)
    on_sample: set[str] = set()     # devices compared on a systematic sample (past 100 000 transfers)
    for n in names:
        for kind, code in SPLIT_KINDS.items():
            series: dict = {"gap": ([], []), "others": ([], []), "own": ([], [])}
            for side, caps in ((0, before), (1, after)):
                for c in caps:
                    dev = c.result.devices[n]
                    cols = dev.bus.columns
                    if cols is None:
                        sampled = True
                        continue
                    a = dev.kept()
                    if a.sample is not None:
                        on_sample.add(n)
                    m = (a.gap_kind == code) & (cols["other_busy"] >= 0) & ~np.isnan(a.gap_before)
                    g = a.gap_before[m] * a.tick_s
                    o = cols["other_busy"][m] * a.tick_s
                    series["gap"][side].append(g)
                    series["others"][side].append(o)
                    series["own"][side].append(g - o)
            b, a_ = series["others"]
            if not any(len(x) for x in b) or not any(len(x) for x in a_):
                continue
            if not any((x > 0).any() for x in b + a_):
                continue                 # no other device's transfer in any of these gaps
            found.append((n, kind, series))
    # the means add up (gap = others + own): each part's change of the mean, with its block
    # bootstrap interval at a Bonferroni level over every part compared
    adj = dataclasses.replace(settings, alpha=settings.alpha / max(1, 3 * len(found)))
    splits: list[Split] = []
    for n, kind, series in found:
        ms = [time_metric(f"{n}:{kind}:{part}", f"{n} {kind} ({part})", series[part][0], series[part][1], res,
                          adj, rng) for part in ("gap", "others", "own")]
        for m in ms:
            _mean_verdict(m, settings)
        splits.append(Split(n, kind, *ms))
    if sampled:
        notes.append("the split by who held the bus needs each transfer's bus columns: a capture without them is "
                     "left out of it")
    if on_sample:
        notes.append(f"who held the bus ({', '.join(sorted(on_sample))}): past 100 000 transfers per device, on the "
                     "same systematic sample as the device's own figures (blocks of consecutive transfers; the gap "
                     "before each block is left out)")
    # the bus: handover gaps per pair
    bus = []
    pairs = sorted({(a, b) for x in shared for (a, b), h in x.bus.handover.items() if h.n})
    for i, j in pairs:
        def series_of(caps):
            out = []
            for c in caps:
                r = c.result
                h = r.bus.handover.get((i, j))
                if h is None or not h.n:
                    out.append(np.empty(0))
                    continue
                v, cnt = h.table()
                out.append(np.repeat(v, cnt).astype(float) * r.tick_s)    # order lost: histogram
            return out
        ni, nj = shared[0].bus.names[i], shared[0].bus.names[j]
        bus.append(time_metric(f"handover:{ni}->{nj}", f"handover {ni}→{nj}", series_of(before), series_of(after),
                               res, settings, rng))
    tests = [t for m in bus for t in m.tests if t.p is not None]
    for t, p in zip(tests, _holm([float(t.p) for t in tests if t.p is not None])):
        t.p_holm = p
    for m in bus:
        if m.verdict not in ("not comparable", "insufficient data"):
            _decide(m, settings)
    if bus:
        notes.append("handover gaps: compared as histograms (their time order is not kept), so the block bootstrap "
                     "sees them as independent; read their intervals as too narrow where handovers come in runs")
    busy = {side: [x.bus.figures(x.tick_s)["busy_share"] for x in xs]
            for side, xs in (("before", shared[:len(before)]), ("after", shared[len(before):]))}
    return BusComparison(devices, splits, bus, busy, notes)


def _mean_verdict(m, st: Settings) -> None:
    """The mean's change: counts when its interval excludes 0 and it is at least the minimum
    effect (as compare's level test, on the mean: the part of a sum)."""
    if m.verdict in ("not comparable", "insufficient data") or not m.deltas:
        return
    d = m.deltas["mean"]
    thr = max(st.min_effect_s, st.min_rel_effect * abs(m.before.get("mean") or 0.0), 2 * (m.resolution_s or 0.0))
    t = Test("level", "mean", d["delta"], d["ci"], thr, None)
    excl = t.ci is not None and (t.ci[0] > 0 or t.ci[1] < 0)
    if excl and t.delta is not None and abs(t.delta) >= thr:
        t.verdict = "regression" if t.delta > 0 else "improvement"
    elif excl:
        t.note = "the interval excludes 0 but the change is below the minimum effect"
    m.tests = [t]
    m.verdict = t.verdict
