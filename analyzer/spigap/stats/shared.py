"""``spigap compare`` on a shared bus: every device before vs after, and what of a change
in a device's CS-inactive gaps happened while other devices held the bus.

* Each device (the CS lines both sides have) is compared as a capture of that one device
  (stats/compare.py: every gap kind, the period, rate, stalls; one Holm family per device).
* **Who held the bus.** For each CS-inactive gap kind, each gap is the other devices'
  CS-active time inside it plus the rest (the device's own time and the controller's
  handovers): ``others`` and ``own``. Their means add up to the gap's mean, so the
  change of the gap's mean splits into the two ("CE1's context switch grew by 12 µs,
  11.8 µs of it while other devices held the bus"); each part's change of the mean is
  judged by its block-bootstrap interval at a Bonferroni level over all the parts.
* The bus: busy share and the handover gaps per device pair, before vs after.

docs/shared-bus.md, "compare".
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from spigap.core.analysis import KIND_CLASS_A, KIND_CLASS_B, KIND_CONTEXT_SWITCH, KIND_CS_CHANGE
from spigap.errors import UsageError
from spigap.stats.compare import Capture, MetricResult, Settings, Test, _decide, _holm, compare, time_metric

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
class SharedComparison:
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


def _device_capture(c: Capture, name: str) -> Capture:
    sa: Any = c.analysis
    return Capture(f"{c.path} [{name}]", sa.devices[name], None)


def compare_shared(before: list[Capture], after: list[Capture], settings: Settings) -> SharedComparison:
    """``before``/``after``: Captures whose analysis is a core.shared.SharedAnalysis."""
    shared: list[Any] = [c.analysis for c in before + after]     # core.shared.SharedAnalysis each
    if not all(getattr(x, "shared", False) for x in shared):
        raise UsageError("compare: a shared bus on one side and one device on the other: analyze the same "
                         "CS line(s) on both sides (--cs CE0,CE1, or --cs NAME for one device)")
    names = [n for n in shared[0].devices if all(n in x.devices for x in shared)]
    notes = []
    every = {n for x in shared for n in x.devices}
    if set(names) != every:
        notes.append(f"devices on one side only, not compared: {', '.join(sorted(every - set(names)))}")
    if not names:
        raise UsageError("compare: no CS line is on both sides")
    devices = {n: compare([_device_capture(c, n) for c in before], [_device_capture(c, n) for c in after], settings)
               for n in names}
    rng = np.random.default_rng(settings.seed)
    res = max(c.analysis.tick_s for c in before + after)
    found: list[tuple[str, str, dict]] = []
    sampled = False                 # a device's columns missing (not expected: left out, said)
    on_sample: set[str] = set()     # devices compared on a systematic sample (past 100 000 transfers)
    for n in names:
        for kind, code in SPLIT_KINDS.items():
            series: dict = {"gap": ([], []), "others": ([], []), "own": ([], [])}
            for side, caps in ((0, before), (1, after)):
                for c in caps:
                    sa: Any = c.analysis
                    a, cols = sa.devices[n], sa.columns.get(n)
                    if cols is None:
                        sampled = True
                        continue
                    if getattr(a, "sample", None) is not None:
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
                sa: Any = c.analysis
                tb = sa.bus
                h = tb.handover.get((i, j))
                if h is None or not h.n:
                    out.append(np.empty(0))
                    continue
                v, cnt = h.table()
                out.append(np.repeat(v, cnt).astype(float) * sa.tick_s)    # order lost: histogram
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
    return SharedComparison(devices, splits, bus, busy, notes)


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


def to_dict(sc: SharedComparison) -> dict:
    from spigap.stats.output import to_dict as cmp_dict

    return {"devices": {n: cmp_dict(c) for n, c in sc.devices.items()},
            "who_held_the_bus": [{"device": s.device, "kind": s.kind, "sentence": s.sentence(),
                                  "gap": s.gap.to_dict(), "others": s.others.to_dict(), "own": s.own.to_dict()}
                                 for s in sc.splits],
            "bus": {"busy_share": sc.busy, "handover": [m.to_dict() for m in sc.bus]},
            "verdict": ("regression" if sc.regressions else "improvement" if sc.improvements
                        else "no significant change"),
            "notes": sc.notes}


def render_text(sc: SharedComparison) -> str:
    from spigap.stats.output import render_text as cmp_text
    from spigap.units import fmt_time

    lines = ["shared bus: " + ", ".join(sc.devices) + " compared device by device (one Holm family each), then "
             "what of each CS-inactive gap kind happened while other devices held the bus", ""]
    if sc.splits:
        lines.append("who held the bus (mean gap = the other devices' CS time in it + the rest; each Δ mean judged by "
                     "its block-bootstrap interval, Bonferroni over these)")
        lines.append(f"  {'device':8s} {'gap kind':15s} {'Δ mean gap':>12s} {'Δ others':>12s} {'Δ own':>12s}  verdicts "
                     "(gap / others / own)")
        for s in sc.splits:
            g, o, w = s.mean_deltas()
            lines.append(f"  {s.device:8s} {s.kind:15s} {fmt_time(g):>12s} {fmt_time(o):>12s} {fmt_time(w):>12s}  "
                         f"{s.gap.verdict} / {s.others.verdict} / {s.own.verdict}")
        for s in sc.splits:
            text = s.sentence()
            if text and (s.gap.verdict in ("regression", "improvement")):
                lines.append(f"  → {text}")
        lines.append("")
    b, a = sc.busy["before"], sc.busy["after"]
    lines.append("bus busy share: before " + ", ".join(f"{100 * x:.1f} %" for x in b if x is not None)
                 + "; after " + ", ".join(f"{100 * x:.1f} %" for x in a if x is not None))
    for m in sc.bus:
        d = m.deltas.get("p50") if m.deltas else None
        lines.append(f"  {m.label}: p50 {fmt_time(m.before.get('p50'))} → {fmt_time(m.after.get('p50'))}"
                     + (f" (Δ {fmt_time(d['delta'])})" if d else "") + f": {m.verdict}")
    for n in sc.notes:
        lines.append(f"note: {n}")
    for name, c in sc.devices.items():
        lines += ["", f"=== {name} " + "=" * 60, cmp_text(c).rstrip("\n")]
    return "\n".join(lines) + "\n"
