"""``spigap report`` on a shared bus: the bus's section (busy time, handovers, queueing,
faults and a bus timeline picture), then each device as a capture of its own; and the
comparison device by device with who held the bus (stats/shared.py).

The bus timeline (``bus_timeline``): each device's CS windows on its own row over a
short stretch of the capture where the devices take turns, the handover gaps marked
(A's CS deassert → B's CS assert) and one device's CS-inactive gap split into the other
devices' CS time in it and the rest.
"""

from __future__ import annotations

import numpy as np

from spigap.report.plots import figure, time_unit
from spigap.units import fmt_time

COLORS = ("#2c7fb8", "#e6550d", "#31a354", "#756bb1", "#636363", "#de2d26")
WINDOWS = 8                 # CS windows shown in the timeline


def _merged(sa):
    """Every window of every device in time order: (start, end, device index) in ticks."""
    parts = []
    for k, a in enumerate(sa.devices.values()):
        parts.append(np.stack([a.start, a.end, np.full(a.n, k)], axis=1))
    w = np.concatenate(parts) if parts else np.zeros((0, 3), np.int64)
    return w[np.argsort(w[:, 0], kind="stable")]


def window_of(sa, n: int = WINDOWS) -> tuple[int, int] | None:
    """(first, last) tick of a stretch of ``n`` windows where the devices take turns (the
    first place with the most handovers among ``n`` consecutive windows)."""
    w = _merged(sa)
    if len(w) < 2:
        return None
    n = min(n, len(w))
    turn = np.concatenate([[0], (w[1:, 2] != w[:-1, 2]).astype(int)])
    score = np.convolve(turn, np.ones(n, int), mode="valid")
    i = int(np.argmax(score))
    return int(w[i, 0]), int(w[i + n - 1, 1])


def bus_timeline(sa, title: str):
    """The figure (module docstring)."""
    names = list(sa.devices)
    t = sa.tick_s
    span = window_of(sa)
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
    w = _merged(sa)
    sel = (w[:, 1] >= lo) & (w[:, 0] <= hi)
    rows = {k: len(names) - 1 - k for k in range(len(names))}
    for s, e, k in w[sel]:
        row = rows[int(k)]
        ax.broken_barh([(x(s), x(e) - x(s))], (row - 0.3, 0.6), facecolors=COLORS[int(k) % len(COLORS)], alpha=0.85)
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
    for k, a in enumerate(sa.devices.values()):
        cols = sa.columns.get(names[k])
        if cols is None or done:
            continue
        inside = np.flatnonzero((a.start > lo) & (a.start <= hi) & (cols["others"] > 0) & (cols["other_busy"] > 0))
        for i in inside:
            g0, g1 = a.end[i - 1], a.start[i]
            if g0 < lo or (a.breaks is not None and a.breaks[i]):
                continue            # (a sampled capture: transfer i - 1 is not the one before i)
            yb = rows[k] + 0.42
            ax.annotate("", (x(g1), yb), (x(g0), yb), arrowprops=dict(arrowstyle="|-|", color=COLORS[k % len(COLORS)],
                                                                    lw=0.8, mutation_scale=2))
            ob = cols["other_busy"][i] * t
            ax.text((x(g0) + x(g1)) / 2, yb + 0.05, f"{names[k]} gap {fmt_time((g1 - g0) * t, 3)}: others' CS time "
                    f"{fmt_time(ob, 3)} + the rest {fmt_time((g1 - g0) * t - ob, 3)}", ha="center", va="bottom",
                    fontsize=7, color=COLORS[k % len(COLORS)])
            done = True
            break
    ax.set_yticks([rows[k] for k in range(len(names))], names)
    ax.set_ylim(-0.7, len(names) - 0.2)
    ax.set_xlim(0, x(hi))
    ax.set_xlabel(f"time from {fmt_time(lo * t, 7)} ({unit})")
    ax.grid(alpha=0.25, axis="x")
    ax.set_title(title, fontsize=10)
    return fig


def bus_html(rep, cap, stem: str) -> str:
    """The bus's section of a shared-bus capture (HTML)."""
    from spigap.output.shared import queueing
    from spigap.report import _e, _table, fmt_time as r_time

    sa = cap.analysis
    fig_d = sa.bus.figures(sa.tick_s)
    H = ["<h3>The bus</h3>"]
    share = fig_d["busy_share"]
    rows = [["devices", ", ".join(sa.devices)],
            ["busy", f"{100 * share:.1f} % ({r_time(fig_d['busy_s'])} of {r_time(fig_d['duration_s'])})"
             if share is not None else "–"],
            ["per device", ", ".join(f"{n} {100 * s:.1f} %" for n, s in fig_d["device_busy_share"].items()
                                     if s is not None)],
            ["idle gaps p50", r_time(fig_d["idle_gaps"]["p50_s"])],
            ["two CS lines at once", f"{fig_d['cs_overlaps']['count']} (ERROR)" if fig_d["cs_overlaps"]["count"]
             else "none"],
            ["SCLK with no CS", f"{fig_d['sclk_without_cs']['edges']} edge(s)"]]
    H.append(_table(["", ""], rows, left=2))
    hand = [[f"{h['from']} → {h['to']}", h["n"]] + [r_time(h[k]) for k in ("min_s", "p50_s", "p99_s", "max_s")]
            for h in fig_d["handover"]]
    if hand:
        H.append("<p>Handover gaps (one device's CS deassert → another's CS assert):</p>")
        H.append(_table(["pair", "n", "min", "p50", "p99", "max"], hand, left=1))
    q = queueing(sa)
    if q:
        H.append("<ul>" + "".join(f"<li>{_e(x['note'])}</li>" for x in q) + "</ul>")
    inter = []
    for name, iv in sa.interleave.items():
        for kind, d in iv.to_dict(sa.tick_s).items():
            if d["with_other_devices"]:
                inter.append([name, kind, d["gaps"], d["with_other_devices"], r_time(d["other_busy"]["p50_s"]),
                              r_time(d["own"]["p50_s"])])
    if inter:
        H.append("<p>Interleaving: a device's CS-inactive gaps that held other devices' transfers, and in those the "
                 "others' CS time and the rest:</p>")
        H.append(_table(["device", "gap kind", "gaps", "with others", "others' CS time p50", "the rest p50"], inter,
                        left=2))
    fig = bus_timeline(sa, "the bus: each device's CS windows, handover gaps, one gap split")
    H.append(rep._img(fig, f"{stem}-bus-timeline.png", "bus timeline"))
    if sa.warnings:
        H.append("<ul class='warn'>" + "".join(f"<li>{_e(w)}</li>" for w in sa.warnings) + "</ul>")
    return "\n".join(H)


def add_shared(rep, cap) -> None:
    """A shared-bus capture: its bus section, then each device as a capture of its own."""
    import os

    from spigap.report import _slug
    from spigap.stats.compare import Capture

    rep._n += 1
    stem = f"{rep._n:02d}-{_slug(os.path.splitext(os.path.basename(cap.path))[0])}"
    sid = f"capture-{rep._n}"
    rep.sections.append((sid, f"{cap.path}: the bus", bus_html(rep, cap, stem)))
    for name, a in cap.analysis.devices.items():
        rep.add_capture(Capture(f"{cap.path} [{name}]", a, None))


def add_shared_comparison(rep, sc) -> None:
    """A shared bus before vs after: who held the bus, then each device's comparison."""
    from spigap.report import _e, _table, fmt_time as r_time

    H = []
    if sc.splits:
        H.append("<p>Each CS-inactive gap = the other devices' CS time in it + the rest; the change of the mean "
                 "splits the same way (each part judged by its block-bootstrap interval, Bonferroni over them).</p>")
        rows = []
        for s in sc.splits:
            g, o, w = s.mean_deltas()
            rows.append([s.device, s.kind, r_time(g), r_time(o), r_time(w),
                         f"{s.gap.verdict} / {s.others.verdict} / {s.own.verdict}"])
        H.append(_table(["device", "gap kind", "Δ mean gap", "Δ others", "Δ own", "verdicts"], rows, left=2))
        H.append("<ul>" + "".join(f"<li>{_e(s.sentence())}</li>" for s in sc.splits if s.sentence()) + "</ul>")
    H.append("<ul class='note'>" + "".join(f"<li>{_e(n)}</li>" for n in sc.notes) + "</ul>")
    rep.sections.append(("compare-bus", "Comparison: who held the bus", "\n".join(H)))
    for name, c in sc.devices.items():
        n0 = len(rep.sections)
        rep.add_comparison(c)
        sid, title, body = rep.sections[n0]
        rep.sections[n0] = (f"{sid}-{name}", f"{title} [{name}]", body)
