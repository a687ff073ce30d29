"""The eye diagram of MOSI and MISO at their receivers, with the setup/hold mask.

Each panel is a data line's volts folded on its receiver's sampling edges
(pins/eye.py: a density, darker where more traces pass), time 0 the sampling
edge's middle-level crossing. The mask is the region the data must stay out of
for the receiver to sample it cleanly: between VIL and VIH from ``setup`` before
the edge to ``hold`` after it (the device's tSU/tHD for MOSI; the controller's
requirement for MISO, 0 when not known, so the mask is a line at the edge). The
dashed lines are the worst setup and hold measured.
"""

from __future__ import annotations

import numpy as np

from spigap.report.plots import figure, png, time_unit


def eye_figure(res, masks: dict | None = None, title: str = ""):
    """A figure with one panel per folded data line. ``masks``: role -> (setup s, hold s)."""
    roles = [r for r in ("mosi", "miso") if r in res.eyes]
    if not roles:
        return None
    masks = masks or {}
    fig = figure(5.2 * len(roles), 3.8)
    axes = fig.subplots(1, len(roles), squeeze=False)[0]
    for ax, role in zip(axes, roles):
        e = res.eyes[role]
        x0, x1 = -e.w * res.tick_s, e.w * res.tick_s
        unit, scale = time_unit(max(abs(x0), abs(x1)))
        h = e.hist.T.astype(float)
        h = np.log1p(h)
        ax.imshow(h, origin="lower", aspect="auto", cmap="magma",
                  extent=(x0 / scale, x1 / scale, e.ylim[0], e.ylim[1]), interpolation="nearest")
        li = res.lines.get(role)
        lv = li.levels if li is not None else None
        where = "the device" if role == "mosi" else "the controller"
        if lv is not None:
            for v in (lv.vil, lv.vih):
                ax.axhline(v, color="#9ecae1", lw=0.8, ls=":")
            su, ho = masks.get(role, (0.0, 0.0))
            ax.add_patch(_rect(-su / scale, lv.vil, (su + ho) / scale, lv.vih - lv.vil))
        ax.axvline(0, color="white", lw=0.6)
        s, hfig = res.figures.get(f"{role}_setup"), res.figures.get(f"{role}_hold")
        if s is not None and s.n and hfig is not None and hfig.n:
            ax.axvline(-s.min * res.tick_s / scale, color="#31a354", lw=1.0, ls="--")
            ax.axvline(hfig.min * res.tick_s / scale, color="#31a354", lw=1.0, ls="--")
        ax.set_xlabel(f"time from {where}'s sampling edge ({unit})")
        ax.set_ylabel("V")
        ax.set_title(f"{role.upper()} at {where}: {e.folded} edges" + (f" ({title})" if title else ""), fontsize=9)
    return fig


def _rect(x, y, w, h):
    from matplotlib.patches import Rectangle

    return Rectangle((x, y), max(w, 1e-12), h, facecolor="#3182bd", alpha=0.35, edgecolor="#deebf7", lw=1.0)


def eye_png(res, masks: dict | None = None, title: str = "") -> bytes | None:
    fig = eye_figure(res, masks, title)
    return png(fig) if fig is not None else None


def pins_html(report, res, stem: str, check=None) -> str:
    """The report's section of a capture measured at the pins: the table, the windows and the
    advice (from the check, when there is one), and the eye diagram."""
    import html

    from spigap.units import fmt_time

    parts = ["<h3>Timing at the pins</h3>", f"<pre>{html.escape(res.text())}</pre>"]
    summary = (check.summary.get("pins") if check is not None else None) or {}
    for role, w in summary.get("windows", {}).items():
        where = "the device" if role == "mosi" else "the controller"
        parts.append(f"<p>data-valid window of {role.upper()} at {where}'s sampling point: "
                     f"{html.escape(fmt_time(-w['setup']))} to {html.escape(fmt_time(w['hold']))} around the edge "
                     f"(worst of {w['n']} edges; negative = before it)</p>")
    for a in summary.get("advice", []):
        parts.append(f"<p><b>suggestion:</b> {html.escape(a['text'])}</p>")
    masks = {}
    dev = getattr(check, "device", None) if check is not None else None
    if dev is not None:
        su = next((lim.min for lim in dev.limits if lim.metric == "din_setup" and lim.min is not None), 0.0)
        ho = next((lim.min for lim in dev.limits if lim.metric == "din_hold" and lim.min is not None), 0.0)
        masks["mosi"] = (su, ho)
    ctl = summary.get("controller")
    if ctl:
        masks["miso"] = (ctl["setup_s"], ctl["hold_s"])
    fig = eye_figure(res, masks)
    if fig is not None:
        parts.append(report._img(fig, f"{stem}-eye.png", "eye diagram of MOSI and MISO"))
    return "\n".join(parts)
