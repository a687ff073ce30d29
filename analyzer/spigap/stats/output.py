"""Rendering of a comparison: terminal text and the JSON document (``spigap compare``).

A comparison of one device's captures (``Comparison``) is rendered as it is; a shared
bus's (``BusComparison``) starts with who held the bus and the bus's handovers, then
each device's comparison as a section of its own."""

from __future__ import annotations

import math

from spigap import __version__
from spigap.findings import explains_figures
from spigap.stats.compare import BusComparison, Comparison, MetricResult
from spigap.units import fmt_rate
from spigap.units import fmt_time as _fmt_time

SCHEMA = 1


def fmt_time(seconds, digits: int = 4) -> str:
    """spigap.units.fmt_time with float noise below a femtosecond printed as 0."""
    if seconds is not None and abs(seconds) < 1e-15:
        seconds = 0.0
    return _fmt_time(seconds, digits)


def _capture_row(c) -> dict:
    a = c.analysis
    return {"path": c.path, "transfers": a.n if a.sample is None else a.sample["transfers"],
            "duration_s": a.end_tick * a.tick_s,
            "resolution_s": a.tick_s, "samplerate_hz": a.info.samplerate_hz,
            "transfers_per_message": a.grouping.transfers_per_message, "truncated": a.truncated,
            # a long capture's statistics come from a systematic sample (docs/compare-and-report.md)
            "sample": None if a.sample is None else {k: a.sample[k] for k in ("sampled", "block", "stride", "method")},
            # every warning of the capture, cause first (spigap/findings.py)
            "warnings": list(a.warnings)}


def to_dict(cmp: "Comparison | BusComparison", *, stall_limit: int = 50) -> dict:
    if isinstance(cmp, BusComparison):
        return _bus_dict(cmp)
    st = cmp.settings
    res = max(c.analysis.tick_s for c in cmp.before + cmp.after)

    def stall_block(c):
        return {"path": c.path, **c.stall_report(st.stall_rule).to_dict(c.analysis, limit=stall_limit)}

    def events_block(c):
        return {"path": c.path, **c.events.to_dict()} if c.events is not None else None

    d = {
        "spigap": __version__,
        "schema": SCHEMA,
        "command": "compare",
        "resolution_s": res,
        "settings": {"alpha": st.alpha, "confidence": st.confidence, "min_effect_s": st.min_effect_s,
                     "min_rel_effect": st.min_rel_effect, "min_rel_jitter": st.min_rel_jitter,
                     "min_stall_ratio": st.min_stall_ratio, "bootstrap": st.n_boot,
                     "block_length": st.block_length, "seed": st.seed, "tests": cmp.n_tests,
                     "stall_rule": st.stall_rule.describe(),
                     "method": "level: Mann-Whitney U on block medians; jitter: Mann-Whitney U on block "
                               "robust σ; Holm over all tests; circular block bootstrap intervals "
                               "(two-stage with several captures per side); see docs/compare-and-report.md"},
        "before": [_capture_row(c) for c in cmp.before],
        "after": [_capture_row(c) for c in cmp.after],
        "metrics": [m.to_dict() for m in cmp.metrics],
        "attribution": cmp.attribution,
        "stalls": {"before": [stall_block(c) for c in cmp.before],
                   "after": [stall_block(c) for c in cmp.after]},
        "verdict": cmp.verdict,
        "regressions": [m.name for m in cmp.regressions],
        "improvements": [m.name for m in cmp.improvements],
        "notes": list(cmp.notes),
    }
    if cmp.phases is not None:
        d["traces"] = {side: [c.traced.summary() if c.traced is not None else None for c in caps]
                       for side, caps in (("before", cmp.before), ("after", cmp.after))}
        d["phases"] = [r.to_dict() for r in cmp.phases]
        d["moved_phases"] = [r.metric.name for r in cmp.phases if r.metric.verdict in ("regression", "improvement")]
    if any(c.events is not None for c in cmp.before + cmp.after):
        d["events"] = {"before": [events_block(c) for c in cmp.before],
                       "after": [events_block(c) for c in cmp.after]}
    return d


# ------------------------------------------------------------------ text
def fmt_signed_time(x, digits=4) -> str:
    """Signed time."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    return ("+" if x > 0 else "") + fmt_time(x, digits)


def on_grid(x, res: float | None):
    """``x`` to the nearest multiple of the resolution ``res``: a difference of edge-to-edge
    times is no finer than one sample (a Δmean of −50 ps at 20 ns is 0)."""
    if x is None or not res or (isinstance(x, float) and not math.isfinite(x)):
        return x
    return round(x / res) * res + 0.0          # + 0.0: no "-0"


def fmt_delta(x, res: float | None, digits: int = 4) -> str:
    return fmt_signed_time(on_grid(x, res), digits)


def fmt_ci_grid(ci, res: float | None) -> str:
    if not ci or ci[0] is None:
        return fmt_ci(ci)
    return fmt_ci([on_grid(ci[0], res), on_grid(ci[1], res)])


def fmt_share(share: float) -> str:
    """A share in %, never "-0 %"."""
    v = round(share * 100)
    return f"{v + 0:.0f} %"


def fmt_p(p) -> str:
    if p is None:
        return "–"
    if p < 1e-10:
        return "<1e-10"
    if p < 1e-3:
        return f"{p:.1e}"
    return f"{p:.3g}"


def fmt_ci(ci, fmt=fmt_signed_time) -> str:
    if not ci or ci[0] is None or (isinstance(ci[0], float) and math.isnan(ci[0])):
        return ""
    return f"[{fmt(ci[0], 3)}, {fmt(ci[1], 3)}]"


def _verdict(v: str) -> str:
    return v.upper() if v in ("regression", "improvement") else v


def _signed_rate(x, digits=4):
    if x is None:
        return "–"
    return ("+" if x > 0 else "−") + fmt_rate(abs(x))


def render_text(cmp: "Comparison | BusComparison") -> str:
    if isinstance(cmp, BusComparison):
        return _bus_text(cmp)
    st = cmp.settings
    L = []
    res = max(c.analysis.tick_s for c in cmp.before + cmp.after)
    L.append(f"spigap compare: {len(cmp.before)} before vs {len(cmp.after)} after capture(s); "
             f"resolution {fmt_time(res)} (every time is ±1 sample)")
    for side, caps in (("before", cmp.before), ("after", cmp.after)):
        for c in caps:
            a = c.analysis
            L.append(f"  {side:7s}{c.path}: {a.n if a.sample is None else a.sample['transfers']} transfers, "
                     f"{fmt_time(a.end_tick * a.tick_s)}"
                     + (f", PARTIAL ({a.truncated})" if a.truncated else "")
                     + (f"; statistics from {a.n} of them, a {a.sample['method']}" if a.sample else ""))
            # what its figures rest on (a wrong CS, an implausible rate ...): cause first
            L += [f"  CHECK  {c.path}: {w}" for w in a.warnings if explains_figures(w)]
    conf = f"{st.confidence * 100:g} %"
    L.append(f"  method: Mann-Whitney U on blocks of consecutive values (level: block medians, jitter: "
             f"block robust σ), Holm over {cmp.n_tests} tests at α = {st.alpha:g}; {conf} block-bootstrap "
             f"intervals ({st.n_boot} resamples)")
    L.append(f"  a change counts when significant and ≥ max({st.min_rel_effect * 100:g} % of the before "
             f"p50{', ' + fmt_time(st.min_effect_s) if st.min_effect_s else ''}, 2 samples); jitter: ≥ "
             f"{st.min_rel_jitter * 100:g} % of the before robust σ")
    L.append("")
    time_metrics = [m for m in cmp.metrics if m.unit == "s"]
    head = (f"{'level':24s}{'n before/after':>15s}  {'p50 before → after':>24s}  {'Δp50 [' + conf + ' CI]':>30s}"
            f"{'Δmean':>11s}{'Δp99':>11s}{'p (Holm)':>10s}  verdict")
    L.append(head)
    L.append("-" * len(head))
    for m in time_metrics:
        L.append(_level_row(m, res))
    rate = next((m for m in cmp.metrics if m.name == "transfer_rate"), None)
    if rate is not None:
        t = rate.test("rate")
        d = rate.deltas.get("rate")
        L.append(f"{rate.label:24s}{rate.before['n']:>7d}/{rate.after['n']:<7d}  "
                 f"{fmt_rate(rate.before['rate']) + ' → ' + fmt_rate(rate.after['rate']):>24s}  "
                 + (f"{_signed_rate(d['delta']) + ' ' + fmt_ci(d['ci'], lambda x, _: _signed_rate(x)):>30s}"
                    if d else f"{'':30s}")
                 + f"{'':22s}{fmt_p(t.p_holm) if t else '–':>10s}  {_verdict(rate.verdict)}")
    stall = next((m for m in cmp.metrics if m.name == "stalls"), None)
    if stall is not None:
        t = stall.test("stalls")
        per_k = lambda d: f"{d['stalls']}/{d['gaps']}"  # noqa: E731
        ratio = "–" if t is None or t.delta is None else (
            "×∞" if math.isinf(t.delta) else f"×{t.delta:.3g}")
        L.append(f"{stall.label:24s}{per_k(stall.before) + ' → ' + per_k(stall.after):>15s}  "
                 f"{_permille(stall.before['rate']) + ' → ' + _permille(stall.after['rate']):>24s}  "
                 f"{ratio:>30s}{'':22s}{fmt_p(t.p_holm) if t else '–':>10s}  {_verdict(stall.verdict)}")
    L.append("")
    head = (f"{'jitter':24s}{'robust σ before → after':>26s}  {'Δσ [' + conf + ' CI]':>30s}"
            f"{'std before → after':>26s}{'p (Holm)':>10s}  verdict")
    L.append(head)
    L.append("-" * len(head))
    for m in time_metrics:
        t = m.test("jitter")
        if t is None:
            continue
        sp = f"{fmt_time(m.before['spread'])} → {fmt_time(m.after['spread'])}"
        sd = f"{fmt_time(m.before['std'])} → {fmt_time(m.after['std'])}"
        L.append(f"{m.label[:23]:24s}{sp:>26s}  {fmt_delta(t.delta, res) + ' ' + fmt_ci_grid(t.ci, res):>30s}{sd:>26s}"
                 f"{fmt_p(t.p_holm):>10s}  {_verdict(t.verdict)}")
    if cmp.phases is not None:
        L += [""] + _phase_text(cmp, conf)
    at = cmp.attribution
    if at:
        L.append("")
        L.append(f"attribution of the transfer period (mean per transfer, stalls split off): "
                 f"{fmt_time(at['before_mean_s'])} → {fmt_time(at['after_mean_s'])}, "
                 f"{fmt_delta(at['delta_s'], res)} {fmt_ci_grid(at['ci_s'], res)}")
        L.append(f"  {'part':20s}{'before':>11s}{'after':>11s}{'Δ':>11s}  {conf + ' CI':26s}{'share':>7s}")
        for r in at["parts"]:
            share = fmt_share(r["share"]) if r["share"] is not None and at["changed"] else ""
            L.append(f"  {r['label']:20s}{fmt_time(r['before_s']):>11s}{fmt_time(r['after_s']):>11s}"
                     f"{fmt_delta(r['delta_s'], res):>11s}  {fmt_ci_grid(r['ci_s'], res):26s}{share:>7s}")
        L.append(f"  → {at['interpretation']}")
    L.append("")
    for side, caps in (("before", cmp.before), ("after", cmp.after)):
        for c in caps:
            s = c.stalls(st.stall_rule)
            if not s:
                L.append(f"stalls  {side} {c.path}: none")
                continue
            lost = sum(x.excess_s for x in s)
            L.append(f"stalls  {side} {c.path}: {len(s)}, {fmt_time(lost)} lost; longest:")
            for x in sorted(s, key=lambda x: -x.duration_s)[:5]:
                L.append(f"          at {fmt_time(x.at_s, 7):>12s}  {x.kind:15s} {fmt_time(x.duration_s):>10s}"
                         f" (median {fmt_time(x.median_s)}), transfer #{x.transfer}")
    L.append(f"        rule: {st.stall_rule.describe()}")
    ev = [m for m in cmp.metrics if m.name.startswith("event:")]
    if ev:
        L.append("")
        L.append("extra channels: see the level/jitter rows named after the events (CHANNEL:EDGE→...)")
    L.append("")
    if cmp.regressions:
        L.append("verdict REGRESSION: " + "; ".join(_why(m) for m in cmp.regressions))
    if cmp.improvements:
        L.append(("verdict IMPROVEMENT: " if not cmp.regressions else "        improvements: ")
                 + "; ".join(_why(m) for m in cmp.improvements))
    if not cmp.regressions and not cmp.improvements:
        L.append("verdict no significant change")
    for n in cmp.notes:
        L.append(f"note    {n}")
    for m in cmp.metrics:
        if m.verdict in ("not comparable",):
            L.append(f"note    {m.label}: not comparable ({m.note})")
    return "\n".join(L) + "\n"


def _phase_text(cmp: Comparison, conf: str) -> list[str]:
    """The phases of every gap (kernel traces on the bus clock), one row each, and which moved."""
    from spigap.units import fmt_time as ft

    L = []
    for side, caps in (("before", cmp.before), ("after", cmp.after)):
        for c in caps:
            if c.traced is None:
                continue
            al = c.traced.alignment
            unc = f" ± {ft(al.offset_uncertainty_s)}" if al.offset_uncertainty_s is not None else ""
            L.append(f"trace   {side:7s}{c.traced.path}: matched {al.matched} of {c.analysis.n} transfers, drift "
                     f"{al.drift_ppm:+.2f} ppm, offset zero point: {al.zero_point}{unc}")
    res = {c.traced.trace.resolution_s for c in cmp.before + cmp.after if c.traced is not None}
    L.append(f"phases (kernel events on the bus clock, docs/trace.md); resolution: one sample between bus edges, "
             f"the trace's timestamp step ({', '.join(ft(r) for r in sorted(res))}) between events, both summed "
             f"across; a change counts when significant and ≥ max({cmp.settings.min_rel_effect * 100:g} % of the "
             "before p50, 2 × the phase's resolution)")
    head = (f"{'gap':15s} {'from':26s} {'to':26s}{'n before/after':>15s}  {'p50 before → after':>24s}  "
            f"{'Δp50 [' + conf + ' CI]':>30s}{'p (Holm)':>10s}  verdict")
    L.append(head)
    L.append("-" * len(head))
    for r in cmp.phases or []:
        m = r.metric
        lead = f"{r.gap:15s} {r.frm:26s} {r.to:26s}"
        if m.verdict in ("not comparable", "insufficient data"):
            L.append(f"{lead}{m.before.get('n', 0):>7d}/{m.after.get('n', 0):<7d}  {m.verdict} ({m.note})")
            continue
        t = m.test("level")
        d = m.deltas["p50"]
        p50 = f"{fmt_time(m.before['p50'])} → {fmt_time(m.after['p50'])}"
        L.append(f"{lead}{m.before['n']:>7d}/{m.after['n']:<7d}  {p50:>24s}  "
                 f"{fmt_signed_time(d['delta']) + ' ' + fmt_ci(d['ci']):>30s}"
                 f"{fmt_p(t.p_holm) if t else '–':>10s}  {_verdict(m.verdict)}")
    moved = [r for r in cmp.phases or [] if r.metric.verdict in ("regression", "improvement")]
    if moved:
        for r in moved:
            d = r.metric.deltas["p50"]
            L.append(f"→ moved: {r.gap}: {r.frm} → {r.to}: p50 {fmt_signed_time(d['delta'])} {fmt_ci(d['ci'])} "
                     f"({_verdict(r.metric.verdict)})")
    else:
        L.append("→ no phase moved significantly")
    return L


def _permille(r) -> str:
    return "–" if r is None else f"{r * 1000:.3g} ‰"


def _level_row(m: MetricResult, res: float | None = None) -> str:
    label = m.label[:23]
    if m.verdict in ("not comparable", "insufficient data"):
        nb, na = m.before.get("n", 0), m.after.get("n", 0)
        return f"{label:24s}{nb:>7d}/{na:<7d}  {m.verdict} ({m.note})"
    t = m.test("level")
    assert t is not None          # every time metric with values has a level test
    d = m.deltas
    p50 = f"{fmt_time(m.before['p50'])} → {fmt_time(m.after['p50'])}"
    return (f"{label:24s}{m.before['n']:>7d}/{m.after['n']:<7d}  {p50:>24s}  "
            f"{fmt_delta(d['p50']['delta'], res) + ' ' + fmt_ci_grid(d['p50']['ci'], res):>30s}"
            f"{fmt_delta(d['mean']['delta'], res):>11s}{fmt_delta(d['p99']['delta'], res):>11s}{fmt_p(t.p_holm):>10s}  "
            f"{_verdict(t.verdict)}")


def _why(m: MetricResult) -> str:
    parts = []
    for t in m.tests:
        if t.verdict not in ("regression", "improvement"):
            continue
        if t.aspect == "level":
            base = m.before.get("p50")
            rel = f" ({t.delta / base * 100:+.0f} %)" if base else ""
            parts.append(f"p50 {fmt_signed_time(t.delta)}{rel}")
        elif t.aspect == "jitter":
            parts.append(f"jitter σ {fmt_time(m.before['spread'])} → {fmt_time(m.after['spread'])}")
        elif t.aspect == "rate":
            parts.append(f"{fmt_rate(m.before['rate'])} → {fmt_rate(m.after['rate'])} "
                         f"({t.delta / m.before['rate'] * 100:+.1f} %)")
        elif t.aspect == "stalls":
            parts.append(f"{_permille(m.before['rate'])} → {_permille(m.after['rate'])}")
    return f"{m.label} " + ", ".join(parts)


__all__ = ["to_dict", "render_text"]


# ------------------------------------------------------------------ a shared bus
def _bus_dict(sc: BusComparison) -> dict:
    return {"devices": {n: to_dict(c) for n, c in sc.devices.items()},
            "who_held_the_bus": [{"device": s.device, "kind": s.kind, "sentence": s.sentence(),
                                  "gap": s.gap.to_dict(), "others": s.others.to_dict(), "own": s.own.to_dict()}
                                 for s in sc.splits],
            "bus": {"busy_share": sc.busy, "handover": [m.to_dict() for m in sc.bus]},
            "verdict": ("regression" if sc.regressions else "improvement" if sc.improvements
                        else "no significant change"),
            "notes": sc.notes}


def _bus_text(sc: BusComparison) -> str:
    lines = ["shared bus: " + ", ".join(sc.devices) + " compared device by device (one Holm family each), then "
             "what of each CS-inactive gap kind happened while other devices held the bus", ""]
    if sc.splits:
        lines.append("who held the bus (mean gap = the other devices' CS time in it + the rest; each Δ mean judged by "
                     "its block-bootstrap interval, Bonferroni over these)")
        lines.append(f"  {'device':8s} {'gap kind':15s} {'Δ mean gap':>12s} {'Δ others':>12s} {'Δ own':>12s}  verdicts "
                     "(gap / others / own)")
        for s in sc.splits:
            g, o, w = s.mean_deltas()
            lines.append(f"  {s.device:8s} {s.kind:15s} {_fmt_time(g):>12s} {_fmt_time(o):>12s} {_fmt_time(w):>12s}  "
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
        lines.append(f"  {m.label}: p50 {_fmt_time(m.before.get('p50'))} → {_fmt_time(m.after.get('p50'))}"
                     + (f" (Δ {_fmt_time(d['delta'])})" if d else "") + f": {m.verdict}")
    for n in sc.notes:
        lines.append(f"note: {n}")
    for name, c in sc.devices.items():
        lines += ["", f"=== {name} " + "=" * 60, render_text(c).rstrip("\n")]
    return "\n".join(lines) + "\n"
