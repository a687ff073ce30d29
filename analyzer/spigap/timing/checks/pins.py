"""Limits at the pins: a device's electrical timing and the controller's MISO window.

A pin limit (``din_setup``, ``dout_valid``, ``sclk_rise`` ...) is judged on the
pin measurement (spigap.pins, docs/pin-timing.md) of every sampling edge: its
worst edge against the limit, with that edge's own uncertainty (a scope trace:
the noise bound and the interpolation error; a logic capture: one sample) as the
resolution of the ±1-sample rule (judging.py): beyond the limit by more than it
is FAIL, within it MARGINAL ("below resolution"), inside with the headroom PASS.
A figure a logic capture cannot show (a rise time) is SKIP, saying it needs a
scope trace; a capture measured without the pins, or without the line, SKIP.

The controller's side: MISO setup and hold at its sampling edge against its
requirement (``--rx-setup``/``--rx-hold``; without them: data valid at the edge,
>= 0, and the item says it is assumed), and the advice (pins/advice.py).
"""

from __future__ import annotations

import numpy as np

from spigap.pins.advice import Requirement, advise, window
from spigap.pins.result import PinResult
from spigap.pins.stats import Figure
from spigap.timing.checks.judging import FAIL, FIRST_N, MARGINAL, PASS, SKIP, Item, headroom_abs, judge
from spigap.timing.profiles import Device, Limit
from spigap.units import fmt_time

FIGURE_OF = {"din_setup": "mosi_setup", "din_hold": "mosi_hold", "dout_valid": "miso_tdo", "dout_hold": "miso_toh",
             "cs_dout_valid": "miso_cs_valid", "sclk_high": "sclk_high", "sclk_low": "sclk_low"}
SHAPE_OF = {"sclk_rise": ("clk", "rise"), "sclk_fall": ("clk", "fall"), "din_rise": ("mosi", "rise"),
            "din_fall": ("mosi", "fall"), "dout_rise": ("miso", "rise"), "dout_fall": ("miso", "fall")}


def pin_limit(res: PinResult | None, lim: Limit, iid: str, base: dict, headroom: float, note: str) -> Item:
    if res is None:
        return Item(id=iid, statistic="worst", verdict=SKIP,
                    reason=f"{lim.what}: not measured at the pins (spigap check measures them when the device "
                           "has pin limits; give --pins)" + note, **base)
    if lim.metric in SHAPE_OF:
        role, what = SHAPE_OF[lim.metric]
        if res.digital or role not in res.lines or res.lines[role].digital:
            return Item(id=iid, statistic="worst", verdict=SKIP,
                        reason=f"{lim.what}: a logic capture shows no rise or fall time (needs the line's volts: "
                               "a scope trace)" + note, **base)
        fig = res.shapes.get(role, {}).get(what)
        digital = False
    else:
        fig = res.figures.get(FIGURE_OF[lim.metric])
        digital = res.digital
    if not isinstance(fig, Figure) or not fig.n:
        return Item(id=iid, statistic="worst", verdict=SKIP,
                    reason=f"{lim.what}: nothing measured (no such edges, or the line is not in the capture)"
                           + note, **base)
    return judge_figure(fig, res.tick_s, digital, lim.min, lim.max, headroom, iid, note, base)


def judge_figure(fig: Figure, tick_s: float, digital: bool, lo: float | None, hi: float | None,
                 headroom: float, iid: str, note: str, base: dict) -> Item:
    """The worst edge of ``fig`` against [lo, hi] with its own uncertainty as the resolution."""
    low = lo is not None
    w = fig.worst(low=low)
    v, at, u = float(w[0, 0]) * tick_s, float(w[0, 1]) * tick_s, float(w[0, 2]) * tick_s
    r = tick_s if digital else max(u, 1e-15)
    hab = headroom_abs(headroom, lo, hi)
    verdict, margin, why = judge(v, lo, hi, r, hab)
    vals, counts = fig.hist.table()
    q = np.asarray(vals, float) * fig.quantum * tick_s
    # beyond the limit; beyond it by more than the resolution (certain); within it of the limit
    if lo is not None:
        beyond, certain = int(counts[q < lo].sum()), int(counts[q < lo - r].sum())
        near = int(counts[(q >= lo - r) & (q < lo + r)].sum())
    elif hi is not None:
        beyond, certain = int(counts[q > hi].sum()), int(counts[q > hi + r].sum())
        near = int(counts[(q <= hi + r) & (q > hi - r)].sum())
    else:
        beyond = certain = near = 0
    res_txt = "±1 sample" if digital else f"±{fmt_time(r, 2)} (its noise bound and interpolation error)"
    if verdict == MARGINAL and abs(margin) < r:
        why = f"below resolution: {near} of {fig.n} edges within {res_txt} of the limit, the worst among them"
    elif verdict == FAIL:
        why = (f"{beyond} of {fig.n} edges beyond the limit; the worst by more than its {res_txt}: "
               "a violation whatever the measurement error")
    elif verdict == PASS:
        why = f"all {fig.n} inside; worst {fmt_time(v)} {res_txt}"
    times = [float(t) * tick_s for t in w[:FIRST_N, 1]]
    delta = (v - lo) if lo is not None else (v - hi if hi is not None else None)
    return Item(id=iid, statistic="worst", verdict=verdict, reason=why + note, measured=v, low=lo, high=hi,
                delta=delta, margin=margin, resolution=r,
                headroom=hab, n=fig.n,
                violations={"count": certain if verdict == FAIL else 0, "possible": near, "checked": fig.n,
                            "first_s": times,
                            "worst_s": v, "worst_at_s": at}, **base)


def controller_items(res: PinResult, rx: Requirement, headroom: float) -> list[Item]:
    """MISO setup and hold at the controller's sampling edge against its requirement."""
    out = []
    for what, fig_name, need in (("setup", "miso_setup", rx.setup), ("hold", "miso_hold", rx.hold)):
        fig = res.figures.get(fig_name)
        base: dict = dict(group="pins", metric=f"miso_{what}", unit="s", source=rx.source, unverified=False,
                          assumed=rx.assumed)
        iid = f"controller.MISO {what}"
        if fig is None or not fig.n:
            out.append(Item(id=iid, statistic="worst", verdict=SKIP, reason="no MISO line measured", **base))
            continue
        note = "; assumes " + rx.source.removeprefix("assumed: ") if rx.assumed else ""
        out.append(judge_figure(fig, res.tick_s, res.digital, need, None, headroom, iid, note, base))
    return out


def advice_lines(res: PinResult, rx: Requirement, margin: float, dev: Device | None) -> list[dict]:
    """The device-tree suggestions with their evidence (pins/advice.py) and the windows."""
    tsu = thd = tsucs = None
    src = ""
    if dev is not None:
        for lim in dev.limits:
            if lim.metric == "din_setup" and lim.min is not None:
                tsu, src = lim.min, lim.source
            elif lim.metric == "din_hold" and lim.min is not None:
                thd = lim.min
            elif lim.metric == "cs_setup" and lim.min is not None:
                tsucs = lim.min
    dev_req = Requirement(tsu or 0.0, thd or 0.0, src or "the device's", False) if tsu is not None else None
    return [s.to_dict() for s in advise(res, rx, margin, dev_req, tsucs)]


def windows(res: PinResult) -> dict:
    return {r: w.to_dict() for r in ("mosi", "miso") if (w := window(res, r)) is not None}
