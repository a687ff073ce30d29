"""The report's frequent figures (histograms, overlays, timelines, rate plots) are placed by
``plots.fit``, not by matplotlib's constrained layout: every text they draw lies inside the
figure and no two of them overlap, whatever the tick labels' widths (counts of 6 digits,
log axes' 10^k, long time labels, a legend below), as constrained layout guaranteed.

Oracle: matplotlib's own extents of the drawn texts (``get_window_extent`` after the draw)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from spigap.core.stalls import Stall
from spigap.report import plots


def _drawn(fig, monkeypatch) -> list:
    """(text, bbox) of every text the figure's drawing puts on the canvas (recorded at the
    renderer: tick labels of ticks outside the view are not drawn), and its figure legends."""
    from matplotlib.backends.backend_agg import RendererAgg

    drawn = []
    draw_text = RendererAgg.draw_text

    def record(self, gc, x, y, s, prop, angle, ismath=False, mtext=None):
        if mtext is not None and s:
            drawn.append(mtext)
        return draw_text(self, gc, x, y, s, prop, angle, ismath, mtext)

    with monkeypatch.context() as m:
        m.setattr(RendererAgg, "draw_text", record)
        plots.png(fig)                   # drawn as the report draws it
    r = fig.canvas.get_renderer()
    return [(t.get_text(), t.get_window_extent(r)) for t in drawn] + [
        ("figure legend", leg.get_window_extent(r)) for leg in fig.legends]


def _check(fig, monkeypatch):
    W, H = fig.bbox.width, fig.bbox.height
    texts = _drawn(fig, monkeypatch)
    assert len(texts) > 3
    for name, bb in texts:
        assert bb.x0 >= -0.5 and bb.y0 >= -0.5 and bb.x1 <= W + 0.5 and bb.y1 <= H + 0.5, (name, bb, W, H)
    # decorations (outside every axes) never overlap one another; texts inside an axes
    # (annotations, the axes' legends, "no values") are the plot's own business
    axes = [ax.get_window_extent() for ax in fig.axes]
    legends = {t.get_text() for leg in fig.legends for t in leg.get_texts()}

    def inside(bb):
        return any(a.x0 - 0.5 <= bb.x0 and bb.x1 <= a.x1 + 0.5 and a.y0 - 0.5 <= bb.y0 and bb.y1 <= a.y1 + 0.5
                   for a in axes)

    deco = [(n, bb) for n, bb in texts if not inside(bb) and n not in legends]
    for (n1, b1), (n2, b2) in itertools.combinations(deco, 2):
        ov_x = min(b1.x1, b2.x1) - max(b1.x0, b2.x0)
        ov_y = min(b1.y1, b2.y1) - max(b1.y0, b2.y0)
        assert ov_x <= 0.5 or ov_y <= 0.5, (n1, b1, n2, b2)
    # and reach into no axes (a tick label ends where its tick starts)
    for (n, bb), a in itertools.product(deco, axes):
        ov_x = min(bb.x1, a.x1) - max(bb.x0, a.x0)
        ov_y = min(bb.y1, a.y1) - max(bb.y0, a.y0)
        assert ov_x <= 1.5 or ov_y <= 1.5, (n, bb, a)


RES = 20e-9


@pytest.mark.parametrize("values", [
    np.random.default_rng(1).normal(13.6e-6, 0.9e-6, 2000),                       # the AD7606's context switch
    np.concatenate([np.random.default_rng(2).normal(2e-6, 5e-8, 900_000), [5e-3, 8e-3]]),   # 6-digit counts, log x
    np.random.default_rng(3).integers(3, 5, 50_000) * RES,                        # quantized, a few samples
    np.random.default_rng(4).lognormal(-9, 2, 20_000),                            # decades of spread
    np.array([]),
])
def test_histograms_keep_their_texts_apart(values, monkeypatch):
    _check(plots.histogram(values, RES, "context switch (CS high)", threshold_s=20e-6), monkeypatch)


def test_overlays_keep_their_texts_apart(monkeypatch):
    rng = np.random.default_rng(5)
    _check(plots.overlay_histogram(rng.normal(3e-6, 3e-7, 100_000), rng.normal(3.6e-6, 3e-7, 100_000), RES,
                                   "CS setup (CS→1st SCLK)"), monkeypatch)
    _check(plots.overlay_histogram(rng.lognormal(-11, 1.5, 5000), rng.lognormal(-10, 1.5, 5000), RES, "period"), monkeypatch)
    _check(plots.overlay_histogram(np.array([]), rng.normal(1e-6, 1e-8, 50), RES, "only after"), monkeypatch)


def test_timeline_and_rate_keep_their_texts_apart(monkeypatch):
    rng = np.random.default_rng(6)
    span = 123.4
    at = np.sort(rng.uniform(0, span, 30_000))
    kinds = ("cs_setup", "cs_hold", "inter_byte", "inter_transfer", "cs_change", "context_switch", "idle")
    series = [(k, at, rng.lognormal(-14 + i, 0.3, len(at))) for i, k in enumerate(kinds)]
    stalls = [Stall("context_switch", int(i), float(t), 0.0123, 0.012, 1e-5, 5e-5, RES)
              for i, t in enumerate(rng.uniform(0, span, 150))]
    _check(plots.timeline(series, stalls, span, "capture.sr: every gap over the capture (stalls ringed)"), monkeypatch)
    _check(plots.rate([("before (a-very-long-capture-name-k6.6.31.sr)", at, None, None),
                       ("after (another-long-capture-name-k6.12.25.sr)", at[::2], span, 14_999.0)], span,
                      "transfers per second: first before vs first after capture"), monkeypatch)
    _check(plots.block_rate(np.linspace(1, span - 1, 100), rng.normal(123_456, 900, 100), 123_000.0, span,
                            "transfers per second over the capture (sampled blocks)"), monkeypatch)


def test_glyphs_the_font_lacks_are_collected_not_warned():
    """A capture's name the plot font cannot draw (a CJK file name) is measured by the layout
    before the drawing: its glyphs are still handed to the caller, who says so once, and no
    warning per glyph escapes (what the report printed before the layout was measured)."""
    import warnings

    rng = np.random.default_rng(7)
    at = np.sort(rng.uniform(0, 1.0, 500))
    missing: set = set()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig = plots.timeline([("cs_setup", at, rng.lognormal(-14, 0.3, 500))], [], 1.0, "捕获.sr: every gap")
        plots.png(fig, missing=missing)
    assert missing == {"捕", "获"}
    assert not [w for w in caught if "missing from font" in str(w.message)]
