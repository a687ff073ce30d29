"""Margins at the pins, and the device-tree values that would restore one.

The data-valid window at a receiver's sampling point is the worst setup and the
worst hold over every sampling edge (result.py). Two knobs move it, and both
move every edge alike (first order: the device's clock-to-output and the edges'
own times do not depend on the clock frequency or on when the controller
samples):

* ``rx-sample-delay-ns`` = d (spi-peripheral-props): the controller samples d
  later, so MISO's setup grows by d and its hold shrinks by d;
* ``spi-max-frequency``: a period T' instead of T moves the sampling edge by
  (T' - T) / 2 from the launching edge, so setup and hold both grow by that.

With the requirements rs, rh (the receiver's setup and hold) and a margin M:

    d in [rs + M - setup_min, hold_min - rh - M]            (at today's frequency)
    T' >= T + 2 max(rs + M - setup_min, rh + M - hold_min)  (without a sample delay)
    T' >= T - (setup_min + hold_min) + rs + rh + 2 M        (with the best sample delay)

A suggestion says what it rests on (how many edges, the worst edge and its
uncertainty, whether the requirement is a datasheet's or assumed) and what it
cannot know: the controller's own delays between its pin and its sampling flop,
how its driver rounds the delay (spi-dw: to its input clock), and whether the
driver implements the property at all.
"""

from __future__ import annotations

import dataclasses
import math

from spigap.pins.result import PinResult
from spigap.units import fmt_freq, fmt_time


@dataclasses.dataclass(frozen=True)
class Requirement:
    """A receiver's setup and hold requirement, seconds, with where it comes from."""

    setup: float = 0.0
    hold: float = 0.0
    source: str = "assumed: data valid at the sampling edge (the receiver's own requirement is not known)"
    assumed: bool = True


@dataclasses.dataclass
class Window:
    role: str                 # "mosi" (at the device) or "miso" (at the controller)
    setup: float              # worst setup, s
    hold: float               # worst hold, s
    setup_at: float
    hold_at: float
    setup_u: float            # the worst edges' uncertainties, s
    hold_u: float
    n: int

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def window(res: PinResult, role: str) -> Window | None:
    """The data-valid window of ``role`` at its receiver's sampling point, or None."""
    s, h = res.figures.get(f"{role}_setup"), res.figures.get(f"{role}_hold")
    if s is None or h is None or not s.n or not h.n:
        return None
    ws, wh = s.worst(low=True)[0], h.worst(low=True)[0]
    r = res.tick_s
    unc = (lambda u: r) if res.digital else (lambda u: float(u) * r)
    return Window(role, float(ws[0]) * r, float(wh[0]) * r, float(ws[1]) * r, float(wh[1]) * r,
                  unc(ws[2]), unc(wh[2]), s.n)


@dataclasses.dataclass
class Suggestion:
    prop: str                 # the device-tree property
    value: float | None       # its suggested value (ns for the delays, Hz for the frequency)
    text: str                 # the suggestion with its evidence

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def period_s(res: PinResult) -> float | None:
    p = res.figures.get("sclk_period")
    if p is None or not p.n:
        return None
    return p.percentile(50) * res.tick_s


def advise(res: PinResult, rx: Requirement, margin: float, dev: Requirement | None = None,
           cs_setup_min: float | None = None) -> list[Suggestion]:
    """Suggestions for the controller's receiving side (MISO), the device's (MOSI: only the
    frequency can help there) and CS setup (``cs_setup_min``: the device's tSUCS)."""
    out: list[Suggestion] = []
    T = period_s(res)
    if T is None:
        return out
    mi = window(res, "miso")
    if mi is not None:
        out += _miso(res, mi, rx, margin, T)
    mo = window(res, "mosi")
    if mo is not None and dev is not None:
        need = max(dev.setup + margin - mo.setup, dev.hold + margin - mo.hold)
        if need > 0:
            f = 1.0 / (T + 2 * need)
            out.append(Suggestion("spi-max-frequency", f, (
                f"spi-max-frequency = <{int(f)}> ({fmt_freq(f)}): MOSI at the device has setup "
                f"{fmt_time(mo.setup)} and hold {fmt_time(mo.hold)} (worst of {mo.n} edges, at "
                f"{fmt_time(mo.setup_at)} and {fmt_time(mo.hold_at)}) against tSU {fmt_time(dev.setup)} / "
                f"tHD {fmt_time(dev.hold)} ({dev.source}) + {fmt_time(margin)} margin; a sample delay "
                "does not move MOSI")))
    first = res.figures.get("cs_to_first")
    if cs_setup_min is not None and first is not None and first.n:
        worst = first.worst(low=True)[0]
        v = float(worst[0]) * res.tick_s
        need = cs_setup_min + margin - v
        if need > 0:
            ns = math.ceil(need * 1e9)
            out.append(Suggestion("spi-cs-setup-delay-ns", ns, (
                f"spi-cs-setup-delay-ns = <{ns}>: CS to the first SCLK edge at the pins is "
                f"{fmt_time(v)} at worst (of {first.n} windows, at {fmt_time(float(worst[1]) * res.tick_s)}) "
                f"against tSUCS {fmt_time(cs_setup_min)} + {fmt_time(margin)} margin")))
    return out


def _miso(res: PinResult, w: Window, rx: Requirement, margin: float, T: float) -> list[Suggestion]:
    d_lo = rx.setup + margin - w.setup
    d_hi = w.hold - rx.hold - margin
    basis = (f"MISO at the controller: setup {fmt_time(w.setup)} ±{fmt_time(w.setup_u, 2)} (worst of {w.n} "
             f"sampling edges, at {fmt_time(w.setup_at)}), hold {fmt_time(w.hold)} ±{fmt_time(w.hold_u, 2)} "
             f"(at {fmt_time(w.hold_at)}); required setup {fmt_time(rx.setup)}, hold {fmt_time(rx.hold)} "
             f"({rx.source}) + {fmt_time(margin)} margin")
    caveat = ("only controllers whose driver implements the receive sample delay honour it (spi-dw does, "
              "rounded to its input clock); the controller's own delay from its pin to its sampling flop is "
              "not in the capture")
    out: list[Suggestion] = []
    if d_lo <= 0 and d_hi >= 0:
        return out                       # the margin holds already
    t_best = T - (w.setup + w.hold) + rx.setup + rx.hold + 2 * margin
    if d_lo <= d_hi and d_lo > 0:
        ns = math.ceil(d_lo * 1e9)
        if ns * 1e-9 > d_hi:
            ns_txt = f"between {d_lo * 1e9:.1f} and {d_hi * 1e9:.1f} ns (no whole ns fits)"
        else:
            ns_txt = f"<{ns}>"
        centre = (d_lo + d_hi) / 2
        out.append(Suggestion("rx-sample-delay-ns", float(ns), (
            f"rx-sample-delay-ns = {ns_txt}: {basis}; with it setup becomes {fmt_time(w.setup + ns * 1e-9)}, "
            f"hold {fmt_time(w.hold - ns * 1e-9)}; any delay from {d_lo * 1e9:.1f} to {d_hi * 1e9:.1f} ns keeps "
            f"the margin, {centre * 1e9:.1f} ns centres the window; {caveat}")))
    elif d_lo > d_hi:
        f = 1.0 / t_best if t_best > 0 else math.inf
        out.append(Suggestion("spi-max-frequency", f, (
            f"spi-max-frequency = <{int(f)}> ({fmt_freq(f)}) with rx-sample-delay-ns centred: the data-valid "
            f"window ({fmt_time(w.setup + w.hold)}) is narrower than the requirement at {fmt_freq(1 / T)}; "
            f"{basis}")))
    t0 = T + 2 * max(rx.setup + margin - w.setup, rx.hold + margin - w.hold)
    if t0 > T:
        f0 = 1.0 / t0
        out.append(Suggestion("spi-max-frequency", f0, (
            f"or, without a sample delay, spi-max-frequency = <{int(f0)}> ({fmt_freq(f0)}): {basis}")))
    return out
