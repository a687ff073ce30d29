"""Before/after on the figures at the pins: did a device-tree or pinctrl change help?

A pin figure is a distribution over sampling edges, each value with its stated
uncertainty (interpolated: noise and interpolation; logic: one sample). What a
change moves is judged on the worst edge (the side that breaks limits: the
smallest setup, the largest clock-to-output) and on the median: a move larger
than the two sides' uncertainties together is *better* or *worse* (the figure's
bad side says which), a smaller one *same* (within the measurement). Several
captures on one side: the worst of their worst edges, the median of their
medians. Counts of runts and double-clocking risks are compared as counts.
"""

from __future__ import annotations

import dataclasses

from spigap.pins.result import FIGURES, SHAPES, PinResult
from spigap.pins.stats import Figure
from spigap.units import fmt_time


@dataclasses.dataclass
class Row:
    name: str
    what: str
    unit: str
    before: float | None        # the worst edge
    after: float | None
    before_p50: float | None
    after_p50: float | None
    resolution: float            # the two sides' uncertainties together
    verdict: str                 # better / worse / same / only before / only after

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _side(results: list[PinResult], name: str):
    """(worst, p50, uncertainty of the worst, unit, bad side) over one side's captures."""
    if "." in name:
        role, what = name.split(".", 1)
        figs = [(r.shapes.get(role, {}).get(what), r.tick_s, False) for r in results]
        bad = SHAPES[what][1]
    else:
        figs = [(r.figures.get(name), r.tick_s, r.digital) for r in results]
        bad = FIGURES[name][1]
    worst, p50s, unc, unit = None, [], 0.0, "s"
    for fig, tick, digital in figs:
        if not isinstance(fig, Figure) or not fig.n:
            continue
        scale = 1.0 if fig.unit == "%" else tick
        unit = "%" if fig.unit == "%" else "s"
        row = fig.worst(low=bad == "min")[0]
        v = float(row[0]) * scale
        u = tick if digital and fig.unit != "%" else float(row[2]) * scale
        if worst is None or (v < worst if bad == "min" else v > worst):
            worst, unc = v, u
        p50s.append(fig.percentile(50) * scale)
    p50 = sorted(p50s)[len(p50s) // 2] if p50s else None
    return worst, p50, unc, unit, bad


def compare(before: list[PinResult], after: list[PinResult]) -> list[Row]:
    names = list(FIGURES) + [f"{r}.{w}" for r in ("clk", "mosi", "miso", "cs") for w in SHAPES]
    rows = []
    for name in names:
        b, bp, bu, unit, bad = _side(before, name)
        a, ap, au, _, _ = _side(after, name)
        if b is None and a is None:
            continue
        what = FIGURES[name][0] if name in FIGURES else f"{name.split('.')[0].upper()} {SHAPES[name.split('.')[1]][0]}"
        res = bu + au
        if b is None or a is None:
            verdict = "only after" if b is None else "only before"
        elif abs(a - b) <= res:
            verdict = "same"
        else:
            up = a > b
            verdict = "better" if up == (bad == "min") else "worse"
        rows.append(Row(name, what, unit, b, a, bp, ap, res, verdict))
    return rows


def event_counts(results: list[PinResult]) -> dict:
    out: dict[str, int] = {}
    for r in results:
        for name, e in r.events.items():
            out[name] = out.get(name, 0) + e.n
    return out


def to_dict(before: list[PinResult], after: list[PinResult]) -> dict:
    return {"figures": [r.to_dict() for r in compare(before, after)],
            "events": {"before": event_counts(before), "after": event_counts(after)}}


def render_text(before: list[PinResult], after: list[PinResult]) -> str:
    rows = compare(before, after)
    if not rows:
        return "timing at the pins: nothing measured on either side\n"
    head = ("figure (worst edge; p50)", "before", "after", "±", "verdict")
    table = [head]
    for r in rows:
        f = (lambda x: "–" if x is None else (f"{x:.3g} %" if r.unit == "%" else fmt_time(x)))
        table.append((r.what, f"{f(r.before)}; {f(r.before_p50)}", f"{f(r.after)}; {f(r.after_p50)}",
                      f(r.resolution) if r.resolution else "0", r.verdict))
    width = [max(len(t[i]) for t in table) for i in range(len(head))]
    lines = ["timing at the pins (worst edge and median; a move within ± is the measurement's own)"]
    for k, t in enumerate(table):
        lines.append("  " + "  ".join(c.ljust(width[i]) if i == 0 else c.rjust(width[i]) for i, c in enumerate(t)))
        if k == 0:
            lines.append("  " + "  ".join("-" * w for w in width))
    b, a = event_counts(before), event_counts(after)
    for name in sorted(set(b) | set(a)):
        if b.get(name, 0) or a.get(name, 0):
            lines.append(f"  {name}: {b.get(name, 0)} -> {a.get(name, 0)}")
    return "\n".join(lines) + "\n"
