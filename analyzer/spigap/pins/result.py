"""``PinResult``: timing at the pins of one capture, and its text, JSON and CSV forms.

Every figure carries how it was measured: *interpolated* (a scope's volts; each
value with its uncertainty: the noise bound and the interpolation error) or
*samples* (a logic analyzer's edges: each value is whole samples, true to +/- 1
sample; a value of 0 means the two edges fell on one sample: "< 1 sample", its
sign unknown). No figure is printed finer than it was measured.
"""

from __future__ import annotations

import dataclasses
import math

from spigap.errors import printable
from spigap.pins.levels import FROM_SWING, Levels
from spigap.pins.stats import Events, Figure
from spigap.units import fmt_time

PIN_SCHEMA = 1

# figure -> (what it is, which side is the bad one: "min" = too small is bad)
FIGURES = {
    "mosi_setup": ("MOSI setup at the device's sampling edge", "min"),
    "mosi_hold": ("MOSI hold at the device's sampling edge", "min"),
    "mosi_tco": ("MOSI clock-to-output (the controller's)", "max"),
    "miso_setup": ("MISO setup at the controller's sampling edge", "min"),
    "miso_hold": ("MISO hold at the controller's sampling edge", "min"),
    "miso_tdo": ("MISO clock-to-output tDO (the device's)", "max"),
    "miso_toh": ("MISO output hold after the launching edge", "min"),
    "miso_cs_valid": ("CS assert to the first MISO bit valid", "max"),
    "sclk_high": ("SCLK high time", "min"),
    "sclk_low": ("SCLK low time", "min"),
    "sclk_period": ("SCLK period", "min"),
    "cs_to_first": ("CS to the first SCLK edge", "min"),
    "last_to_cs": ("last SCLK edge to CS", "min"),
}
SHAPES = {"rise": ("rise time 10-90 %", "max"), "fall": ("fall time 90-10 %", "max"),
          "overshoot": ("overshoot", "max"), "settle": ("settling to +/-5 % (ringing)", "max")}
EVENTS = {"runt": "runts (left a valid level, crossed the middle, came back)",
          "ringback": "ringback into the undecided band",
          "nonmonotonic": "non-monotonic edges (crossed the middle more than once)",
          "double_clock": "double-clocking risks (non-monotonic edges and runts on SCLK)",
          "unsettled": "edges that never settled before the next one"}


@dataclasses.dataclass
class LineInfo:
    name: str
    role: str
    digital: bool
    base: float | None = None
    top: float | None = None
    noise: float | None = None
    levels: Levels | None = None


@dataclasses.dataclass
class PinResult:
    tick_s: float
    digital: bool                       # the clock is a logic analyzer's: every figure is whole samples
    mode: int
    lines: dict                         # role -> LineInfo
    figures: dict                       # name -> Figure (ticks)
    shapes: dict                        # role -> {"rise": Figure, ..., "unsettled": Events}
    events: dict                        # "sclk.runt" -> Events
    eyes: dict                          # role -> EyeFold
    sampling_edges: int
    windows: int
    notes: list

    # ------------------------------------------------------------ one figure
    def seconds(self, name: str) -> dict:
        """The JSON form of one figure (seconds; overshoot in %)."""
        if "." in name:
            role, what = name.split(".", 1)
            return figure_dict(self.shapes[role][what], self.tick_s, False, low=SHAPES[what][1] == "min")
        return figure_dict(self.figures[name], self.tick_s, self.digital, low=FIGURES[name][1] == "min")

    def label(self) -> str:
        return ("whole samples, +/- 1 sample (a logic capture)" if self.digital
                else "interpolated between samples, each value +/- its uncertainty (noise and interpolation)")

    # ------------------------------------------------------------ JSON
    def to_dict(self) -> dict:
        return {
            "pin_schema": PIN_SCHEMA,
            "resolution_s": self.tick_s,
            "measured": "samples" if self.digital else "interpolated",
            "label": self.label(),
            "mode": self.mode,
            "sampling_edges": self.sampling_edges,
            "cs_windows": self.windows,
            "lines": {r: _line_dict(li) for r, li in self.lines.items()},
            "figures": {n: self.seconds(n) for n in FIGURES if n in self.figures and self.figures[n].n},
            "edges": {r: {w: (self.seconds(f"{r}.{w}") if isinstance(x, Figure) else _events_dict(x, self.tick_s))
                          for w, x in d.items()} for r, d in self.shapes.items()},
            "events": {n: _events_dict(e, self.tick_s) for n, e in self.events.items() if e.n},
            "eyes": {r: e.to_dict(self.tick_s) for r, e in self.eyes.items()},
            "notes": list(self.notes),
        }

    # ------------------------------------------------------------ text
    def text(self) -> str:
        out = [f"Timing at the pins ({self.label()}; resolution {fmt_time(self.tick_s)}), "
               f"SPI mode {self.mode}, {self.sampling_edges} sampling edges in {self.windows} CS windows"]
        for r, li in self.lines.items():
            bits = [f"{r.upper()} = {printable(li.name)}"]
            if li.levels is not None:
                bits.append(li.levels.describe())
            if li.base is not None:
                bits.append(f"levels {li.base:.3g}/{li.top:.3g} V, noise {li.noise * 1e3:.3g} mV rms")
            out.append("  " + "; ".join(bits))
        rows = [("figure", "n", "min", "p1", "p50", "max", "worst at")]
        for n, (what, bad) in FIGURES.items():
            fig = self.figures.get(n)
            if fig is None or not fig.n:
                continue
            rows.append(self._row(what, fig, self.tick_s, bad, self.digital))
        for r, d in self.shapes.items():
            for w, (what, bad) in SHAPES.items():
                fig = d.get(w)
                if isinstance(fig, Figure) and fig.n:
                    scale = 1.0 if fig.unit == "%" else self.tick_s
                    rows.append(self._row(f"{r.upper()} {what}", fig, scale, bad, False))
        out.append(_table(rows))
        ev = [(n, e) for n, e in self.events.items() if e.n]
        ev += [(f"{r}.unsettled", d["unsettled"]) for r, d in self.shapes.items() if d["unsettled"].n]
        for n, e in ev:
            role, what = n.split(".", 1)
            first = ", ".join(fmt_time(t * self.tick_s) for t in e.first)
            out.append(f"  {role.upper()}: {e.n} {EVENTS.get(what, what)}; first at {first}")
        for r, e in self.eyes.items():
            out.append(f"  eye of {r.upper()}: {e.folded} of {e.edges_seen} sampling edges folded"
                       + (f" ({e.missed} outside the kept samples)" if e.missed else ""))
        out += [f"  note: {printable(n)}" for n in self.notes]
        return "\n".join(out) + "\n"

    def _row(self, what: str, fig: Figure, scale: float, bad: str, digital: bool) -> tuple:
        worst = fig.worst(low=bad == "min")
        at = fmt_time(worst[0, 1] * self.tick_s) if len(worst) else "–"
        fmt = (lambda x: _fmt_samples(x, scale)) if digital else (lambda x: _fmt_value(x, scale, fig.unit))
        p1 = fig.percentile(1) if fig.n >= 100 else math.nan
        return (what, str(fig.n), fmt(fig.min) + _pm(fig, scale, digital), fmt(p1), fmt(fig.percentile(50)),
                fmt(fig.max), at)

    # ------------------------------------------------------------ CSV
    def csv_rows(self) -> list[list]:
        """One row per figure: the header first."""
        rows: list[list] = [["figure", "what", "unit", "n", "min", "p1", "p50", "max", "mean", "std",
                             "uncertainty", "measured", "worst_at_s", "worst_value"]]
        names = [n for n in FIGURES if n in self.figures and self.figures[n].n]
        names += [f"{r}.{w}" for r, d in self.shapes.items() for w in SHAPES if isinstance(d.get(w), Figure)
                  and d[w].n]
        for n in names:
            d = self.seconds(n)
            what = FIGURES[n][0] if n in FIGURES else f"{n.split('.')[0].upper()} {SHAPES[n.split('.')[1]][0]}"
            w = d["worst"][0] if d["worst"] else {}
            rows.append([n, what, d["unit"], d["n"], d["min"], d["p1"], d["p50"], d["max"], d["mean"], d["std"],
                         d["uncertainty"], d["measured"], w.get("at_s"), w.get("value")])
        return rows


def figure_dict(fig: Figure, tick_s: float, digital: bool, low: bool) -> dict:
    """One figure in seconds (overshoot in %): its distribution, its uncertainty and its worst
    edges (the smallest values when ``low``, else the largest), each with its time."""
    scale = 1.0 if fig.unit == "%" else tick_s
    whole = digital and fig.unit != "%"

    def sv(x):
        return None if x is None or not math.isfinite(x) else float(x) * scale

    worst = [{"value": sv(v), "at_s": float(t) * tick_s, "uncertainty": tick_s if whole else sv(u)}
             for v, t, u in fig.worst(low=low)]
    return {"unit": "%" if fig.unit == "%" else "s", "n": fig.n, "min": sv(fig.min), "p1": sv(fig.percentile(1)),
            "p50": sv(fig.percentile(50)), "max": sv(fig.max), "mean": sv(fig.mean), "std": sv(fig.std),
            "uncertainty": tick_s if whole else sv(fig.u_mean),
            "uncertainty_max": tick_s if whole else sv(fig.u_max),
            "measured": "samples" if whole else "interpolated", "at_horizon": fig.clipped, "worst": worst}


def _events_dict(e: Events, tick_s: float) -> dict:
    return {"count": e.n, "first_s": [t * tick_s for t in e.first]}


def _line_dict(li: LineInfo) -> dict:
    d = {"channel": li.name, "digital": li.digital, "base_v": li.base, "top_v": li.top, "noise_v": li.noise}
    if li.levels is not None:
        d.update(vil_v=li.levels.vil, vih_v=li.levels.vih, levels_source=li.levels.source,
                 levels_assumed=li.levels.assumed)
    return d


def _fmt_value(x: float, scale: float, unit: str) -> str:
    if x is None or not math.isfinite(x):
        return "–"
    if unit == "%":
        return f"{x:.3g} %"
    return fmt_time(x * scale)


def _fmt_samples(x: float, scale: float) -> str:
    """A whole-samples figure: 0 is "< 1 sample" (the edges fell on one sample)."""
    if x is None or not math.isfinite(x):
        return "–"
    if abs(x) < 0.5:
        return "< 1 sample"
    return fmt_time(x * scale)


def _pm(fig: Figure, scale: float, digital: bool) -> str:
    if digital:
        return " ±1 sample" if fig.n and abs(fig.min) >= 0.5 else ""
    w = fig.worst(low=True)
    if not len(w) or not w[0, 2] > 0:
        return ""
    if fig.unit == "%":
        return f" ±{float(w[0, 2]):.2g} %"
    return f" ±{fmt_time(float(w[0, 2]) * scale, 2)}"


def _table(rows: list[tuple]) -> str:
    width = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for k, r in enumerate(rows):
        cells = [str(c).ljust(width[i]) if i == 0 else str(c).rjust(width[i]) for i, c in enumerate(r)]
        lines.append("  " + "  ".join(cells).rstrip())
        if k == 0:
            lines.append("  " + "  ".join("-" * w for w in width))
    return "\n".join(lines)


def from_tap(tap, cs: str | None = None) -> PinResult:
    """The result of a finished ``PinTap`` (tap.finish() called): of the device on CS line ``cs``
    (a shared bus measures each device in its own CS windows)."""
    m = tap.measurers.get(cs)
    roles = tap.device_roles.get(cs, {})
    cfg = tap.device_cfgs.get(cs, tap.cfg)
    lines = {}
    for role, name in roles.items():
        ch = tap.channels.get(name)
        if ch is None:
            continue
        lv = tap.levels(cs, role)           # each device's own (a shared bus: its receivers')
        base, top = ch.state if ch.state is not None else (None, None)
        lines[role] = LineInfo(name, role, ch.digital, base, top, ch.noise if not ch.digital else None,
                               None if ch.digital else lv)
    shapes = {}
    eyes = {}
    for role, name in roles.items():
        ch = tap.channels.get(name)
        if ch is None:
            continue
        if ch.shape is not None:
            s = ch.shape
            shapes[role] = {"rise": s.rise, "fall": s.fall, "overshoot": s.overshoot, "settle": s.settle,
                            "unsettled": s.unsettled}
        eye = ch.eyes.get(cs)
        if eye is not None and eye.folded:
            eyes[role] = eye
    notes = list(tap.notes)
    if m is None:
        return PinResult(tap.info.tick_s, True, cfg.mode if cfg else 0, lines, {}, shapes, {}, eyes, 0, 0,
                         notes or ["nothing was measured at the pins"])
    if any(li.levels is not None and li.levels.source.startswith(FROM_SWING) for li in lines.values()):
        notes.append("receiver levels not given (no device VIH/VIL for this supply, no --pin-levels): "
                     "30/70 % of each line's own swing assumed")
    return PinResult(tap.info.tick_s, m.digital, cfg.mode, lines, m.figures, shapes, m.events, eyes,
                     m.sampling_edges, m.windows, notes)
