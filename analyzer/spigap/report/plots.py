"""The report's figures (matplotlib, Agg, no pyplot state): histograms, timeline, rate, overlays.

Every function returns a ``matplotlib.figure.Figure``; ``png(fig)`` renders it.
Histogram bins are whole multiples of the capture's resolution, aligned on
sample boundaries, so quantized gaps do not turn into comb patterns.
"""

from __future__ import annotations

import contextlib
import io
import logging
import math
import re
import warnings
import weakref
from typing import Any, Literal

import numpy as np

from spigap.core.analysis import start_rate_hz
from spigap.units import display_unit

BEFORE, AFTER = "#1f77b4", "#d62728"
KIND_COLORS = {
    "cs_setup": "#1f77b4", "cs_hold": "#ff7f0e", "inter_byte": "#2ca02c", "inter_transfer": "#9467bd",
    "cs_change": "#8c564b", "context_switch": "#17becf", "idle": "#7f7f7f",
}
STALL_COLOR = "#d62728"
MAX_POINTS = 20000          # per series in the timeline; above: min/median/max per time bin


def _quiet_matplotlib() -> None:
    """matplotlib logs warnings of its own set-up on stderr (an unwritable config
    directory, a font cache being built): not the user's problem, not spigap's output."""
    logging.getLogger("matplotlib").setLevel(logging.ERROR)


def figure(w=10.0, h=4.0, *, layout: Literal["constrained"] | None = "constrained"):
    """A figure on its own Agg canvas (``png`` draws it there: the text sizes measured while
    laying it out are the ones the drawing finds cached). ``layout=None``: the caller places
    the axes with ``fit`` once the figure is drawn up."""
    _quiet_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(w, h), dpi=100, layout=layout)
    _share_mathtext(FigureCanvasAgg(fig).get_renderer())
    return fig


_MATHTEXT: list = []          # the process's mathtext parser: the first figure's renderer's


def _share_mathtext(renderer) -> None:
    """One mathtext parser for every figure of the process. Each Agg renderer makes its own,
    whose cache of parsed strings lives and dies with it, so every figure parsed its log axes'
    "10^k" labels again (most of a histogram's text layout); a parse is a function of the
    string, font, size and dpi alone, so shared it gives the same glyphs (the PNGs compared
    pixel by pixel)."""
    if not _MATHTEXT:
        _MATHTEXT.append(renderer.mathtext_parser)
    renderer.mathtext_parser = _MATHTEXT[0]


# ------------------------------------------------------------------ the frequent figures' layout
# A report draws a histogram per gap kind and capture, an overlay per kind, a timeline and a rate
# plot per capture: two dozen figures for a before/after pair. matplotlib's constrained layout
# measures every axis's decorations twice and then the figure is drawn twice (once to lay it
# out), about 40 % of each figure's cost. These figures have one row of axes and decorations of
# one line each (tick labels, axis labels, a title or suptitle, a figure legend below), so ``fit``
# places them from the sizes of those texts, measured once: no label is clipped or overlaps
# (tests/test_report_layout.py), at a few pixels from where constrained layout put them.
PAD_PX = 4.0                    # between the decorations and the figure's edge (constrained layout: 3 pt)


def _pt(points: float, fig) -> float:
    return points * fig.dpi / 72.0


class _Sizes:
    """Sizes of texts on one figure's canvas, each string measured once (the renderer's own
    metrics: what the drawing will find)."""

    def __init__(self, fig):
        from matplotlib.font_manager import FontProperties

        self.r = fig.canvas.get_renderer()
        self.props = {axis: FontProperties(size=_rc(f"{axis}tick.labelsize")) for axis in "xy"}
        self.known: dict = {}

    def text(self, s: str, axis: str) -> tuple[float, float]:
        """(width, height) of a tick label of the x or y axis: at least a line's height (the
        height of "lp", as matplotlib lays a line out)."""
        from matplotlib import cbook

        key = (s, axis)
        if key not in self.known:
            prop = self.props[axis]
            w, h, _ = self.r.get_text_width_height_descent(s, prop, cbook.is_math_text(s))
            _, lp, _ = self.r.get_text_width_height_descent("lp", prop, False)
            self.known[key] = (w, max(h, lp))
        return self.known[key]

    def ticks(self, axis, name: str) -> list[tuple[float, float]]:
        """(width, height) of each tick label the axis will draw: its locators' ticks inside
        the view, formatted by its formatters, the empty ones left out."""
        lo, hi = sorted(axis.get_view_interval())
        tol = 1e-10 * max(abs(lo), abs(hi))
        out = []
        for which in (axis.major, axis.minor):
            locs = np.asarray(which.locator(), float)
            locs = locs[(locs >= lo - tol) & (locs <= hi + tol)]
            out += [self.text(t, name) for t in which.formatter.format_ticks(locs) if t]
        return out

    def label(self, text) -> tuple[float, float]:
        """(width, height) of a Text on the canvas, (0, 0) when it is empty."""
        if text is None or not text.get_visible() or not text.get_text():
            return 0.0, 0.0
        bb = text.get_window_extent(self.r)
        return bb.width, bb.height


def _log_ticks_in_view(axis) -> None:
    """A log axis's locators return a decade or two beyond the view on each side, and
    matplotlib makes a tick (two lines, two texts) for each before it leaves them undrawn: a
    quarter of these figures' ticks. Wrapped, they return only the ticks in the view (with a
    margin: matplotlib's own test at the drawing decides, so the same ticks are drawn). Only
    log axes: their formatters label each tick by its value alone, where a linear axis's
    formatter picks its digits from all the ticks it is given."""
    from matplotlib.ticker import Locator

    class InView(Locator):
        def __init__(self, base):
            self.base = base

        def set_axis(self, axis):
            super().set_axis(axis)
            self.base.set_axis(axis)

        def __call__(self):
            locs = np.asarray(self.base(), float)
            tr = self.axis.get_transform()
            a, b = sorted(tr.transform(self.axis.get_view_interval()))
            with np.errstate(divide="ignore", invalid="ignore"):
                t = tr.transform(locs)
            margin = 1e-6 * (b - a)
            return locs[~((t < a - margin) | (t > b + margin))]

        def tick_values(self, vmin, vmax):
            return self.base.tick_values(vmin, vmax)

        def nonsingular(self, v0, v1):
            return self.base.nonsingular(v0, v1)

        def view_limits(self, vmin, vmax):
            return self.base.view_limits(vmin, vmax)

    if axis.get_scale() == "log":
        axis.set_major_locator(InView(axis.get_major_locator()))
        axis.set_minor_locator(InView(axis.get_minor_locator()))


def fit(fig, axes: list, *, suptitle=None, legend=None) -> None:
    """Place ``axes`` side by side, equal widths, in a figure without a layout engine: left of
    each its y tick labels and label, below them the x tick labels and label (and ``legend``, a
    figure legend at the bottom), above them the axes' titles or the figure's ``suptitle``; the
    x tick labels at an axes' ends reach half their width past it, the room between axes and at
    the right edge takes them, and the top y tick label half its height above it. Twice: the
    number of ticks follows the axes' length."""
    with _glyphs(fig):
        _fit(fig, axes, suptitle, legend)


def _fit(fig, axes: list, suptitle, legend) -> None:
    for ax in axes:
        _log_ticks_in_view(ax.xaxis)
        _log_ticks_in_view(ax.yaxis)
    size = _Sizes(fig)
    W, H = fig.bbox.width, fig.bbox.height
    ytick = _pt(max(_rc("ytick.major.size"), 0.0) + _rc("ytick.major.pad"), fig)
    xtick = _pt(max(_rc("xtick.major.size"), 0.0) + _rc("xtick.major.pad"), fig)
    legend_h = 0.0 if legend is None else (legend.get_window_extent(size.r).height + PAD_PX
                                          + _pt(legend.borderaxespad * legend.prop.get_size_in_points(), fig))
    sup_h = 0.0 if suptitle is None else (1 - suptitle.get_position()[1]) * H + size.label(suptitle)[1] + PAD_PX
    for _ in range(2):
        lefts, rights, bottoms, tops, above = [], [], [], [], []
        for ax in axes:
            yl, xl = size.ticks(ax.yaxis, "y"), size.ticks(ax.xaxis, "x")
            ylab = size.label(ax.yaxis.label)[0]            # rotated: its width across the figure
            lefts.append((max(w for w, _ in yl) + ytick if yl else 0.0)
                         + (ylab + _pt(ax.yaxis.labelpad, fig) if ylab else 0.0))
            xlab = size.label(ax.xaxis.label)[1]
            bottoms.append((max(h for _, h in xl) + xtick if xl else 0.0)
                           + (xlab + _pt(ax.xaxis.labelpad, fig) if xlab else 0.0))
            rights.append(max((w / 2 for w, _ in xl), default=0.0))
            above.append(max((h / 2 for _, h in yl), default=0.0))
            title = size.label(ax.title)[1]
            tops.append(title + _pt(_rc("axes.titlepad"), fig) if title else 0.0)
        bottom = PAD_PX + max(bottoms) + legend_h
        top = max(PAD_PX + max(max(tops), max(above)), sup_h + max(above))
        left = PAD_PX + lefts[0]
        gaps = [rights[i] + 2 * PAD_PX + lefts[i + 1] for i in range(len(axes) - 1)]
        width = (W - left - sum(gaps) - max(rights[-1], PAD_PX) - PAD_PX) / len(axes)
        x = left
        for i, ax in enumerate(axes):
            ax.set_position([x / W, bottom / H, width / W, (H - bottom - top) / H])
            x += width + (gaps[i] if i < len(gaps) else 0.0)


def _rc(key: str) -> Any:
    import matplotlib

    params: Any = matplotlib.rcParams             # (its keys are typed as literals)
    return params[key]


_GLYPH = re.compile(r"Glyph (\d+) \(.*\) missing from font")
_MISSING: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()    # figure -> characters it lacks


@contextlib.contextmanager
def _glyphs(fig):
    """Characters the font cannot draw (names from files: a CJK file name, an odd channel
    name), warned about by matplotlib once per glyph wherever a text is first measured (laid
    out or drawn), kept with the figure for ``png`` to hand over; other warnings pass."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for w in caught:
        m = _GLYPH.search(str(w.message))
        if m is not None:
            _MISSING.setdefault(fig, set()).add(chr(int(m.group(1))))
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def png(fig, dpi: int = 100, *, missing: set | None = None) -> bytes:
    """The figure as PNG bytes. Characters the font cannot draw are drawn as boxes and added
    to ``missing`` (the caller says so once), not warned about per glyph."""
    _quiet_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if not isinstance(fig.canvas, FigureCanvasAgg):
        FigureCanvasAgg(fig)
    buf = io.BytesIO()
    with _glyphs(fig):
        fig.savefig(buf, format="png", dpi=dpi)
    if missing is not None:
        missing |= _MISSING.get(fig, set())
    return buf.getvalue()


def time_unit(seconds: float) -> tuple[str, float]:
    """(unit, scale) so that ``seconds / scale`` reads well on an axis (ns at the least)."""
    return display_unit(seconds, smallest="ns")


def _tick_edges(lo: float, hi: float, res: float, max_bins: int, min_bins: int = 12) -> np.ndarray:
    """Bin edges on sample boundaries covering [lo, hi] (seconds) with <= max_bins bins; a
    range of only a few samples is widened to ``min_bins`` samples so its bars stay readable."""
    t_lo, t_hi = math.floor(lo / res + 0.5), math.ceil(hi / res - 0.5)
    if t_hi - t_lo + 1 < min_bins:
        pad = (min_bins - (t_hi - t_lo + 1)) / 2
        t_lo, t_hi = t_lo - math.floor(pad), t_hi + math.ceil(pad)
    width = max(1, math.ceil((t_hi - t_lo + 1) / max_bins))
    nb = max(1, math.ceil((t_hi - t_lo + 1) / width))
    return (t_lo - 0.5 + width * np.arange(nb + 1)) * res


def _fmt(seconds: float) -> str:
    from spigap.units import fmt_time

    # float noise (the std of identical values) is not a time: below a femtosecond is 0
    return fmt_time(0.0 if seconds is not None and abs(seconds) < 1e-15 else seconds, 4)


def _body(v: np.ndarray, res: float) -> tuple[float, float]:
    """The range a linear histogram should show: p0.5 … p99.5, but no further than 10 robust σ
    (+3 samples) from the median, so a few stalls in a short capture do not squash the body."""
    p_lo, q25, p50, q75, p_hi = np.percentile(v, [0.5, 25, 50, 75, 99.5])
    reach = 10 * (q75 - q25) / 1.349 + 3 * res
    return max(p_lo, p50 - reach), min(p_hi, p50 + reach)


def _bars(ax, v: np.ndarray, edges: np.ndarray) -> None:
    """A filled histogram of ``v`` over ``edges`` as one step patch: what ``ax.hist`` draws as one
    rectangle per bin (100 artists a panel, most of a report's drawing time), in one artist."""
    counts, _ = np.histogram(v, bins=edges)
    ax.stairs(counts, edges, fill=True, color=BEFORE, alpha=0.85)


def histogram(values_s: np.ndarray, res: float, title: str, *, threshold_s: float | None = None,
              bins: int = 100):
    """Two panels like seed 003: linear count over the body (p0.5..p99.5), log count over all."""
    v = np.asarray(values_s, float)
    v = v[np.isfinite(v)]
    fig = figure(10, 3.6, layout=None)
    ax1, ax2 = fig.subplots(1, 2)
    if len(v) == 0:
        for ax in (ax1, ax2):
            ax.text(0.5, 0.5, "no values", ha="center", va="center", transform=ax.transAxes)
        fit(fig, [ax1, ax2], suptitle=fig.suptitle(title))
        return fig
    p_lo, p50, p99, p_hi = np.percentile(v, [0.5, 50, 99, 99.5])
    unit, sc = time_unit(p50 if p50 else v.max())
    # body: linear count
    lo1, hi1 = _body(v, res)
    e1 = _tick_edges(lo1, hi1, res, bins)
    _bars(ax1, v / sc, e1 / sc)
    ax1.set_xlim(e1[0] / sc, e1[-1] / sc)
    ax1.set_xlabel(f"{unit}  (body)")
    ax1.set_ylabel("count")
    # all: log count; log x when the tail is far away
    lo, hi = float(v.min()), float(v.max())
    log_x = lo > 0 and hi / max(p50, res) > 20
    if log_x:
        e2 = np.geomspace(max(lo, res) * 0.98, hi * 1.02, bins + 1)
        ax2.set_xscale("log")
    else:
        e2 = _tick_edges(lo, hi, res, bins)
    _bars(ax2, v / sc, e2 / sc)
    ax2.set_yscale("log")
    ax2.set_ylim(bottom=0.7)
    ax2.set_xlabel(f"{unit}  (all values{', log scale' if log_x else ''})")
    ax2.set_ylabel("count (log)")
    for ax in (ax1, ax2):
        ax.axvline(p50 / sc, color="k", lw=1, label=f"p50 {_fmt(p50)}")
        ax.axvline(p99 / sc, color="k", lw=1, ls="--", label=f"p99 {_fmt(p99)}")
        ax.grid(alpha=0.3)
    if threshold_s is not None and threshold_s <= hi:
        ax2.axvline(threshold_s / sc, color=STALL_COLOR, lw=1, ls=":", label=f"stall > {_fmt(threshold_s)}")
    ax2.legend(fontsize=8, loc="upper right")
    sup = fig.suptitle(f"{title}: n = {len(v)}, p50 {_fmt(p50)}, mean {_fmt(v.mean())} ± {_fmt(v.std())}, "
                       f"max {_fmt(hi)} (±{_fmt(res)})", fontsize=10)
    fit(fig, [ax1, ax2], suptitle=sup)
    return fig


def overlay_histogram(before_s: np.ndarray, after_s: np.ndarray, res: float, title: str,
                      *, bins: int = 80, labels=("before", "after")):
    """Before vs after as step histograms (fraction of values), linear body and log count."""
    b = np.asarray(before_s, float)
    a = np.asarray(after_s, float)
    b, a = b[np.isfinite(b)], a[np.isfinite(a)]
    fig = figure(10, 3.6, layout=None)
    ax1, ax2 = fig.subplots(1, 2)
    both = np.concatenate([b, a])
    if len(b) == 0 or len(a) == 0:
        ax1.text(0.5, 0.5, "only on one side", ha="center", va="center", transform=ax1.transAxes)
        fit(fig, [ax1, ax2], suptitle=fig.suptitle(title))
        return fig
    unit, sc = time_unit(np.median(both))
    lb, hb = _body(b, res)
    la, ha = _body(a, res)
    e1 = _tick_edges(min(lb, la), max(hb, ha), res, bins)
    lo, hi = float(both.min()), float(both.max())
    log_x = lo > 0 and hi / max(float(np.median(both)), res) > 20
    e2 = np.geomspace(max(lo, res) * 0.98, hi * 1.02, bins + 1) if log_x else _tick_edges(lo, hi, res, bins)
    for x, color, lab in ((b, BEFORE, labels[0]), (a, AFTER, labels[1])):
        w = np.full(len(x), 1.0 / len(x))
        ax1.hist(x / sc, bins=e1 / sc, weights=w, histtype="step", color=color, lw=1.5,
                 label=f"{lab}: p50 {_fmt(float(np.median(x)))}")
        ax2.hist(x / sc, bins=e2 / sc, histtype="step", color=color, lw=1.5, label=f"{lab} (n = {len(x)})")
    ax1.set_xlim(e1[0] / sc, e1[-1] / sc)
    ax1.set_ylabel("fraction")
    ax1.set_xlabel(f"{unit}  (body)")
    ax2.set_yscale("log")
    ax2.set_ylim(bottom=0.7)
    if log_x:
        ax2.set_xscale("log")
    ax2.set_ylabel("count (log)")
    ax2.set_xlabel(f"{unit}  (all values{', log scale' if log_x else ''})")
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fit(fig, [ax1, ax2], suptitle=fig.suptitle(f"{title} (±{_fmt(res)})", fontsize=10))
    return fig


def _envelope(t: np.ndarray, v: np.ndarray, nbins: int):
    """Per time bin: centre, min, median, max (vectorized via sorting by bin)."""
    edges = np.linspace(t.min(), t.max(), nbins + 1)
    b = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, nbins - 1)
    order = np.lexsort((v, b))
    bs, vs = b[order], v[order]
    starts = np.flatnonzero(np.r_[True, bs[1:] != bs[:-1]])
    ends = np.r_[starts[1:], len(bs)]
    mid = (starts + ends - 1) // 2
    centre = (edges[bs[starts]] + edges[bs[starts] + 1]) / 2
    return centre, vs[starts], vs[mid], vs[ends - 1]


def timeline(series: list[tuple[str, np.ndarray, np.ndarray]], stalls: list, span_s: float, title: str,
             *, annotate: int = 3):
    """Gap values over capture time, log y; ``series``: (kind, at_s, value_s). Stalls ringed."""
    fig = figure(10, 4.2, layout=None)
    ax = fig.subplots()
    t_unit, t_sc = time_unit(span_s)
    vmax = 0.0
    vmin = math.inf
    enveloped = False
    for kind, at, val in series:
        if len(val) == 0:
            continue
        pos = val > 0
        at, val = at[pos], val[pos]
        if len(val) == 0:
            continue
        color = KIND_COLORS.get(kind, "#333333")
        label = kind.replace("_", " ")
        if len(val) > MAX_POINTS:
            c, lo, med, hi = _envelope(at, val, 2000)
            ax.fill_between(c / t_sc, lo, hi, color=color, alpha=0.25, lw=0, step="mid")
            ax.plot(c / t_sc, med, color=color, lw=0.8, label=label)
            enveloped = True
        else:
            ax.plot(at / t_sc, val, ".", ms=2.5, color=color, alpha=0.6, label=label)
        vmax = max(vmax, float(val.max()))
        vmin = min(vmin, float(val.min()))
    if stalls:
        sx = np.array([s.at_s for s in stalls]) / t_sc
        sy = np.array([s.duration_s for s in stalls])
        many = len(stalls) > 100
        ax.plot(sx, sy, "o", mfc="none", mec=STALL_COLOR, ms=5 if many else 8, mew=0.8 if many else 1.2,
                label=f"stall ({len(stalls)})")
        # label the longest stalls, at most one per tenth of the time axis (no overlapping labels)
        top: list = []
        taken: list = []
        for s in sorted(stalls, key=lambda s: -s.duration_s):
            if len(top) == annotate:
                break
            if all(abs(s.at_s - x) > span_s / 10 for x in taken):
                top.append(s)
                taken.append(s.at_s)
        for s in top:
            right = s.at_s > 0.75 * span_s          # keep the label inside the axes
            ax.annotate(f"{_fmt(s.duration_s)} {s.kind.replace('_', ' ')}", (s.at_s / t_sc, s.duration_s),
                        textcoords="offset points", xytext=(-6 if right else 6, 4), ha="right" if right else "left",
                        fontsize=8, color=STALL_COLOR)
    if vmax > 0:
        ax.set_yscale("log")
        ax.set_ylim(vmin / 2, vmax * 6)
        _time_axis(ax, vmin, vmax)
    ax.set_xlim(0, span_s / t_sc)
    ax.set_xlabel(f"capture time ({t_unit})")
    ax.set_ylabel("gap (log)")
    ax.grid(alpha=0.3, which="both")
    leg = fig.legend(fontsize=8, loc="outside lower center", ncol=8)
    for h in leg.legend_handles:
        if hasattr(h, "set_markersize"):
            h.set_markersize(7)
    ax.set_title(title + (" (long series: min–max band and median per time bin)" if enveloped else ""),
                 fontsize=10)
    fit(fig, [ax], legend=leg)
    return fig


def _time_axis(ax, vmin, vmax):
    """Label a log y axis of seconds with readable units."""
    from matplotlib.ticker import FuncFormatter

    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: _fmt(y) if y > 0 else "0"))


MAX_RATE_WINDOWS = 2000         # a rate plot's bins: a long capture's windows widen to stay below


def default_window(span_s: float, n_events: int) -> float:
    """1 s for captures longer than 20 s (seed 004 counted cycles per second; at most
    MAX_RATE_WINDOWS windows: wider for captures longer than that), else 1/50 of the
    capture, widened so that a window holds about 20 events on average."""
    if span_s > 20:
        return max(1.0, span_s / MAX_RATE_WINDOWS)
    w = span_s / 50
    if n_events > 0:
        w = max(w, min(span_s, 20 * span_s / n_events))
    return max(w, 1e-12)


def rate_bins(t: np.ndarray, span_s: float, window_s: float) -> tuple[np.ndarray, np.ndarray]:
    """(bin edges, events per second) in windows of ``window_s`` over [0, span_s]; a last partial
    window shorter than half a window is left out (its rate would be noise)."""
    n_full = int(span_s // window_s)
    rest = span_s - n_full * window_s
    edges = np.arange(n_full + 1) * window_s
    if rest >= window_s / 2 or n_full == 0:
        edges = np.append(edges, span_s)
    counts, _ = np.histogram(np.asarray(t, float), bins=edges)
    return edges, counts / np.diff(edges)


def rate(series: list[tuple], span_s: float, title: str, *, window_s: float | None = None,
         ylabel="transfers/s"):
    """Events per second over time (seed 004 counted read/write cycles per second).

    ``series``: (label, event times in s, own span in s or None, the rate over the capture or
    None), the span when the series come from captures of different lengths (None: ``span_s``,
    the x range); the rate drawn as the dashed line and named in the legend (None: the one
    definition, analysis.start_rate_hz, over the times; transfers give theirs,
    ``DeviceFigures.transfer_rate_hz``, the same of a sampled capture's whole)."""
    fig = figure(10, 3.4, layout=None)
    ax = fig.subplots()
    t_unit, t_sc = time_unit(span_s)
    if window_s is None:
        window_s = default_window(span_s, max((len(item[1]) for item in series), default=0))
    top = 0.0
    for i, item in enumerate(series):
        label, t, own, mean = item
        own = span_s if own is None else own
        edges, r = rate_bins(t, own, window_s)
        color = (BEFORE, AFTER, "#2ca02c", "#9467bd")[i % 4]
        if mean is None and len(t):
            mean = start_rate_hz(len(t), float(t[0]), float(t[-1]))
        ax.stairs(r, edges / t_sc, baseline=None, color=color, lw=1.2, label=f"{label}: {_rate(mean)} over the capture")
        if mean is not None:
            ax.axhline(mean, color=color, lw=0.8, ls="--")
        top = max(top, float(r.max()) if len(r) else 0.0)
    return _rate_axes(fig, ax, top, span_s, f"capture time ({t_unit}); window {_fmt(window_s)}", ylabel, title)


def _rate_axes(fig, ax, top: float, span_s: float, xlabel: str, ylabel: str, title: str):
    """The common frame of the rate plots: y from 0 in rate units, x over the capture."""
    from matplotlib.ticker import FuncFormatter

    _, t_sc = time_unit(span_s)
    ax.set_ylim(0, top * 1.15 if top > 0 else 1)
    ax.set_xlim(0, span_s / t_sc)
    ax.yaxis.set_major_formatter(FuncFormatter(lambda y, _: _rate(y).replace("/s", "")))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    leg = fig.legend(fontsize=8, loc="outside lower center", ncol=2)
    ax.set_title(title, fontsize=10)
    fit(fig, [ax], legend=leg)
    return fig


def block_rate(t_mid: np.ndarray, rates: np.ndarray, mean: float | None, span_s: float, title: str,
               ylabel="transfers/s"):
    """Transfers per second inside each sampled block of a long capture (one point per
    block of consecutive transfers, at its middle), with the whole capture's mean."""
    fig = figure(10, 3.4, layout=None)
    ax = fig.subplots()
    t_unit, t_sc = time_unit(span_s)
    ax.plot(np.asarray(t_mid) / t_sc, rates, ".", color=BEFORE, ms=3, label="inside each sampled block")
    if mean:
        ax.axhline(mean, color=BEFORE, lw=0.8, ls="--", label=f"{_rate(mean)} over the capture")
    top = max(float(np.max(rates)) if len(rates) else 0.0, mean or 0.0)
    return _rate_axes(fig, ax, top, span_s, f"capture time ({t_unit})", ylabel, title)


def _rate(x):
    from spigap.units import fmt_rate

    return fmt_rate(x)


def attribution(att: dict, title: str):
    """Horizontal bars: change of each part of the mean transfer period, with intervals."""
    parts = [p for p in att["parts"]]
    fig = figure(10, 0.45 * len(parts) + 1.6)
    ax = fig.subplots()
    total = att["delta_s"]
    unit, sc = time_unit(max([abs(p["delta_s"]) for p in parts] + [abs(total), 1e-9]))
    names = [p["label"] for p in parts][::-1] + ["transfer period (total)"]
    vals = [p["delta_s"] for p in parts][::-1] + [total]
    cis = [p["ci_s"] for p in parts][::-1] + [att["ci_s"]]
    y = np.arange(len(names))
    colors = [AFTER if v > 0 else "#2ca02c" for v in vals]
    colors[-1] = "#444444"
    err = np.array([[v - c[0], c[1] - v] for v, c in zip(vals, cis)]).T / sc
    ax.barh(y, np.array(vals) / sc, color=colors, alpha=0.8, xerr=np.maximum(err, 0), capsize=3)
    ax.set_yticks(y, names)
    ax.axvline(0, color="k", lw=0.8)
    ax.set_xlabel(f"change of the mean per transfer ({unit}); red = slower, green = faster")
    for yi, v, c in zip(y, vals, cis):
        x = max(v, c[1] if c[1] is not None and math.isfinite(c[1]) else v, 0.0)
        ax.annotate(("+" if v > 0 else "") + _fmt(v), (x / sc, yi), textcoords="offset points",
                    xytext=(6, -3), ha="left", fontsize=8)
    lo, hi = ax.get_xlim()
    ax.set_xlim(lo, hi + 0.12 * (hi - lo))
    ax.grid(alpha=0.3, axis="x")
    ax.set_title(title, fontsize=10)
    return fig


# ------------------------------------------------------------ kernel phases (spigap trace)
def _short(name: str) -> str:
    """'spi:spi_set_cs:activate' -> 'set_cs:activate', 'syscalls:sys_exit_ioctl' -> 'sys_exit_ioctl'."""
    sub, _, rest = name.partition(":")
    rest = rest.removeprefix("spi_") if sub == "spi" else rest
    return f"{sub}:{rest}" if sub == "bus" else rest


def _phase_colors(keys: list) -> dict:
    from matplotlib import colormaps

    cmap = colormaps["tab20"]
    return {k: cmap(i % 20) for i, k in enumerate(keys)}


def phase_bars(groups: list[tuple[str, list[tuple[str, str, float]]]], title: str):
    """Stacked horizontal bars of phase medians: one bar per (label, [(from, to, p50_s), ...])
    in the phases' order inside the gap (e.g. 'context_switch before', 'context_switch after')."""
    keys: list = []
    for _, phases in groups:
        keys += [(f, t) for f, t, _ in phases if (f, t) not in keys]
    colors = _phase_colors(keys)
    top = max((sum(v for _, _, v in ph) for _, ph in groups), default=0.0)
    unit, sc = time_unit(top or 1e-6)
    fig = figure(10, 1.0 + 0.45 * len(groups) + 0.22 * len(keys))
    ax = fig.subplots()
    for y, (label, phases) in enumerate(groups):
        left = 0.0
        for f, t, v in phases:
            ax.barh(y, v / sc, left=left / sc, color=colors[(f, t)], edgecolor="white", lw=0.5)
            if v > 0.06 * top:
                ax.text((left + v / 2) / sc, y, _fmt(v), ha="center", va="center", fontsize=7)
            left += v
    ax.set_yticks(range(len(groups)), [g[0] for g in groups], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(f"{unit} (sum of the phase medians)")
    return _phase_frame(fig, ax, colors, keys, title, 7)


def phase_timeline(a, traced, title: str, *, windows: int = 2):
    """The merged timeline over a few CS windows: transfers (bus), every gap split into its
    phases (bus edges and kernel events in time order) and the kernel events, on the bus clock."""
    from spigap.trace import columns as tm
    from spigap.trace.align import bus_edges
    from spigap.trace.phases import EDGE_NAMES, boundary_rows, segments

    al, tr = traced.alignment, traced.trace
    edges = bus_edges(a)
    matched = np.sort(al.bus_index)
    # the first run of `windows` consecutive matched transfers with complete edges
    first = int(matched[0]) if len(matched) else 0
    for k in matched:
        k = int(k)
        rng_ = np.arange(k, min(k + windows + 1, a.n))
        if len(rng_) == windows + 1 and np.isin(rng_, matched).all() and all(
                np.isfinite(edges[n][rng_]).all() for n in EDGE_NAMES):
            first = k
            break
    ks = np.arange(first, min(first + windows, a.n))
    t_lo = float(np.nanmin(edges[tm.BUS_CS_ASSERT][ks]))
    t_hi = float(np.nanmax(edges[tm.BUS_CS_DEASSERT][ks]))
    nxt = first + windows
    if nxt < a.n and np.isfinite(edges[tm.BUS_CS_ASSERT][nxt]):
        t_hi = float(edges[tm.BUS_CS_ASSERT][nxt])
    pad = 0.03 * (t_hi - t_lo)
    t_lo -= pad
    t_hi += pad
    rows = boundary_rows(tr, al.device)
    tb = al.to_bus(tr.ts[rows])
    sel = (tb >= t_lo) & (tb <= t_hi)
    ev_t, ev_n = tb[sel], [tr.events[int(c)] for c in tr.event[rows[sel]]]
    # other events (IRQ, scheduler) on the timeline too, not splitting phases
    allb = al.to_bus(tr.ts)
    other = np.flatnonzero((allb >= t_lo) & (allb <= t_hi))
    other = np.setdiff1d(other, rows)
    # the bus edges as phases.split cuts the timeline (inter-transfer word gaps included)
    sg = segments(a, al)
    near = (sg.transfer >= first - 1) & (sg.transfer <= nxt) & np.isfinite(sg.t)
    items = [(float(t), EDGE_NAMES[int(e)]) for t, e in zip(sg.t[near], sg.edge[near])]
    items += list(zip(ev_t.tolist(), ev_n))
    items = sorted((t, n) for t, n in items if t_lo <= t <= t_hi)
    sorted_t = sg.sorted_t()
    clocked = np.append(sg.kind == "", True)          # segment after each boundary: a clocked part
    keys: list = []
    segs = []
    for (t0, n0), (t1, n1) in zip(items[:-1], items[1:]):
        if clocked[np.searchsorted(sorted_t, (t0 + t1) / 2, side="right") - 1]:
            continue            # inside a clocked part: drawn as the transfer
        segs.append((t0, t1, (n0, n1)))
        if (n0, n1) not in keys:
            keys.append((n0, n1))
    colors = _phase_colors(keys)
    unit, sc = time_unit(t_hi - t_lo)
    fig = figure(12, 4.6)
    ax = fig.subplots()
    x = lambda t: (t - t_lo) / sc  # noqa: E731
    # bus: CS active windows, clocked parts
    for k in range(max(first - 1, 0), min(nxt + 1, a.n)):
        s, e = edges[tm.BUS_CS_ASSERT][k], edges[tm.BUS_CS_DEASSERT][k]
        f, last = edges[tm.BUS_FIRST_SCLK][k], edges[tm.BUS_LAST_SCLK][k]
        if np.isfinite(s) and np.isfinite(e):
            ax.barh(2, x(e) - x(s), left=x(s), height=0.5, color="#dddddd", edgecolor="#888888")
        if np.isfinite(f) and np.isfinite(last):
            for q in np.flatnonzero((sg.transfer[:-1] == k) & (sg.kind == "") & (sg.edge[:-1] == 1)):
                ax.barh(2, x(sg.t[q + 1]) - x(sg.t[q]), left=x(sg.t[q]), height=0.5, color="#555555")
            ax.text(x((f + last) / 2), 2, f"#{k} {int(a.n_bits[k])} bit", ha="center", va="center",
                    fontsize=7, color="white")
    # phases
    for t0, t1, key in segs:
        ax.barh(1, x(t1) - x(t0), left=x(t0), height=0.5, color=colors[key], edgecolor="white", lw=0.5)
    # kernel events
    for i, (t, n) in enumerate(zip(ev_t, ev_n)):
        ax.plot([x(t)] * 2, [-0.25, 0.25], color="k", lw=0.8)
        ax.text(x(t), -0.3 - 0.22 * (i % 3), _short(n), fontsize=6.5, ha="center", va="top")
    for r in other:
        ax.plot([x(allb[r])] * 2, [-0.2, 0.2], color="#aaaaaa", lw=0.6)
    ax.set_yticks([0, 1, 2], ["kernel events", "phases", "bus (CS active,\nclocked)"], fontsize=8)
    ax.set_ylim(-1.1, 2.5)
    ax.set_xlim(0, x(t_hi))
    ax.set_xlabel(f"{unit} on the bus clock (from {_fmt(t_lo)} into the capture)")
    return _phase_frame(fig, ax, colors, keys, title, 6.5)


def _phase_frame(fig, ax, colors: dict, keys: list, title: str, fontsize: float):
    """The common end of the phase plots: x grid, one legend entry per phase (from → to)."""
    from matplotlib.patches import Patch

    ax.grid(axis="x", alpha=0.3)
    ax.legend(handles=[Patch(color=colors[k], label=f"{_short(k[0])} → {_short(k[1])}") for k in keys],
              fontsize=fontsize, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.set_title(title, fontsize=10)
    return fig


# ------------------------------------------------------------------ a shared bus
BUS_COLORS = ("#2c7fb8", "#e6550d", "#31a354", "#756bb1", "#636363", "#de2d26")
BUS_WINDOWS = 8                 # CS windows shown in the timeline


def _merged(r):
    """Every window of every device in time order: (start, end, device index) in ticks."""
    parts = []
    for k, a in enumerate(r.devices.values()):
        parts.append(np.stack([a.start, a.end, np.full(a.n, k)], axis=1))
    w = np.concatenate(parts) if parts else np.zeros((0, 3), np.int64)
    return w[np.argsort(w[:, 0], kind="stable")]


def window_of(r, n: int = BUS_WINDOWS) -> tuple[int, int] | None:
    """(first, last) tick of a stretch of ``n`` windows where the devices take turns (the
    first place with the most handovers among ``n`` consecutive windows)."""
    w = _merged(r)
    if len(w) < 2:
        return None
    n = min(n, len(w))
    turn = np.concatenate([[0], (w[1:, 2] != w[:-1, 2]).astype(int)])
    score = np.convolve(turn, np.ones(n, int), mode="valid")
    i = int(np.argmax(score))
    return int(w[i, 0]), int(w[i + n - 1, 1])


def bus_timeline(r, title: str):
    """A shared bus's timeline: each device's CS windows on its own row over a short stretch
    of the capture where the devices take turns, the handover gaps marked (A's CS deassert
    → B's CS assert) and one device's CS-inactive gap split into the other devices' CS
    time in it and the rest."""
    from spigap.units import fmt_time

    names = list(r.devices)
    t = r.tick_s
    span = window_of(r)
    fig = figure(10, 1.4 + 0.75 * len(names))
    ax = fig.subplots()
    if span is None:
        ax.set_title(title + ": too few transfers", fontsize=10)
        return fig
    t0, t1 = span
    pad = max(1, (t1 - t0) // 25)
    lo, hi = t0 - pad, t1 + pad
    unit, sc = time_unit((hi - lo) * t)
    x = lambda ticks: (np.asarray(ticks, float) - lo) * t / sc  # noqa: E731
    w = _merged(r)
    sel = (w[:, 1] >= lo) & (w[:, 0] <= hi)
    rows = {k: len(names) - 1 - k for k in range(len(names))}
    for s, e, k in w[sel]:
        row = rows[int(k)]
        ax.broken_barh([(x(s), x(e) - x(s))], (row - 0.3, 0.6), facecolors=BUS_COLORS[int(k) % len(BUS_COLORS)], alpha=0.85)
    # handovers: A's deassert -> B's assert
    ws = w[sel]
    for (s0, e0, k0), (s1, e1, k1) in zip(ws[:-1], ws[1:]):
        if k0 != k1 and s1 >= e0:
            ym = (rows[int(k0)] + rows[int(k1)]) / 2
            ax.annotate("", (x(s1), ym), (x(e0), ym), arrowprops=dict(arrowstyle="<->", color="#444", lw=0.8))
            ax.text((x(e0) + x(s1)) / 2, ym + 0.08, fmt_time((s1 - e0) * t, 3), ha="center", va="bottom", fontsize=7,
                    color="#444")
    # one device's CS-inactive gap that held another device's windows, split
    done = False
    for k, a in enumerate(r.devices.values()):
        cols = a.bus.columns
        if cols is None or done:
            continue
        inside = np.flatnonzero((a.start > lo) & (a.start <= hi) & (cols["others"] > 0) & (cols["other_busy"] > 0))
        for i in inside:
            g0, g1 = a.end[i - 1], a.start[i]
            if g0 < lo or (a.breaks is not None and a.breaks[i]):
                continue            # (a sampled capture: transfer i - 1 is not the one before i)
            yb = rows[k] + 0.42
            ax.annotate("", (x(g1), yb), (x(g0), yb), arrowprops=dict(arrowstyle="|-|", color=BUS_COLORS[k % len(BUS_COLORS)],
                                                                    lw=0.8, mutation_scale=2))
            ob = cols["other_busy"][i] * t
            ax.text((x(g0) + x(g1)) / 2, yb + 0.05, f"{names[k]} gap {fmt_time((g1 - g0) * t, 3)}: others' CS time "
                    f"{fmt_time(ob, 3)} + the rest {fmt_time((g1 - g0) * t - ob, 3)}", ha="center", va="bottom",
                    fontsize=7, color=BUS_COLORS[k % len(BUS_COLORS)])
            done = True
            break
    ax.set_yticks([rows[k] for k in range(len(names))], names)
    ax.set_ylim(-0.7, len(names) - 0.2)
    ax.set_xlim(0, x(hi))
    ax.set_xlabel(f"time from {fmt_time(lo * t, 7)} ({unit})")
    ax.grid(alpha=0.25, axis="x")
    ax.set_title(title, fontsize=10)
    return fig
