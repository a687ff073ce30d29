"""``spigap report``: one self-contained HTML file (plots inline as base64 PNG).

    from spigap.report import Report
    rep = Report(title="AD7606 on a Pi 5")
    rep.add_capture(capture, check=None)          # spigap.stats.compare.Capture
    rep.add_comparison(comparison)                # spigap.stats.compare.Comparison
    html = rep.html()
    rep.write_pngs("plots/")                      # the same figures as files

Sections per capture (HTML ids in brackets, ``N`` = capture number): summary
(capture-N-summary), gap statistics (capture-N-gaps), stalls (capture-N-stalls),
extra channels (capture-N-events, with --event), check verdicts
(capture-N-check, with --profile), histograms (capture-N-histograms),
timeline of gaps (capture-N-timeline), transfers per second (capture-N-rate),
kernel phases (capture-N-phases, when the capture has a trace: ``Capture.traced``).
Comparison: "compare" (table, attribution, kernel phases "compare-phases" with
traces on both sides, overlays).
"""

from __future__ import annotations

import base64
import datetime
import html
import os
import re

import numpy as np

from spigap import __version__
from spigap import confidence
from spigap.core import stalls as stalls_mod
from spigap.core.analysis import describe, start_rate_hz
from spigap.output.jsonout import idle_clocks
from spigap.report.cited import Citations
from spigap.units import fmt_clocks, fmt_freq, fmt_rate, fmt_time

HIST_KINDS = ("cs_setup", "cs_hold", "inter_byte", "inter_transfer", "cs_change", "context_switch", "idle",
              "transfer_duration", "transfer_period")
LABELS = {"cs_setup": "CS setup (CS→1st SCLK)", "cs_hold": "CS hold (last SCLK→CS)",
          "inter_byte": "inter-byte (edge→edge)", "inter_transfer": "inter-transfer (CS held)",
          "cs_change": "cs_change (CS high)", "context_switch": "context switch (CS high)",
          "idle": "bus idle (no CS)", "transfer_duration": "transfer (CS active)",
          "transfer_period": "transfer period",
          "class_a": "cs_change|context switch A (shorter)", "class_b": "cs_change|context switch B (longer)"}

CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;max-width:1100px;
color:#222;line-height:1.4;padding:0 1em}
h1{font-size:1.6em;margin-bottom:.2em}h2{border-bottom:2px solid #ddd;padding-bottom:.2em;margin-top:2em}
h3{margin-top:1.5em}table{border-collapse:collapse;margin:.5em 0 1em;font-size:.9em}
th,td{border:1px solid #ddd;padding:3px 8px;text-align:right;vertical-align:top}
th{background:#f4f4f4}td.l,th.l{text-align:left}table.facts th{font-weight:normal}
img{max-width:100%;display:block;margin:.5em 0 1.2em}
.verdict-regression,.v-FAIL{color:#fff;background:#c0392b;font-weight:bold}
.verdict-improvement,.v-PASS{color:#fff;background:#27ae60;font-weight:bold}
.v-MARGINAL{background:#f1c40f;font-weight:bold}.v-SKIP{color:#888}
.note{color:#555;font-size:.9em}.warn{color:#a04000}
nav ul{columns:2}code{background:#f4f4f4;padding:0 3px}
.pending{border:2px dashed #e67e22;padding:.5em 1em;background:#fff8f0}
.doc{border-left:3px solid #ddd;padding-left:1em}.doc td,.doc th{text-align:left}
"""


def _phase_groups(phases) -> list[tuple[str, list[tuple[str, str, float]]]]:
    """Phases grouped by gap kind, in order: [(kind, [(from, to, p50_s), ...]), ...]."""
    out: dict[str, list] = {}
    for p in phases:
        out.setdefault(p.gap, []).append((p.frm, p.to, p.stats["p50_s"] or 0.0))
    return list(out.items())


def _e(x) -> str:
    return html.escape(str(x), quote=True)


def _slug(text: str) -> str:
    s = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")
    return s or "capture"


def _cell(v, tag: str, left: bool, scope: str = "") -> str:
    """One cell, escaped unless it is an ('html', markup) tuple."""
    attrs = (' class="l"' if left else "") + (f' scope="{scope}"' if scope else "")
    if isinstance(v, tuple) and v and v[0] == "html":
        return f"<{tag}{attrs}>{v[1]}</{tag}>"
    return f"<{tag}{attrs}>{_e('' if v is None else v)}</{tag}>"


def _table(head: list[str], rows: list[list], left: int = 1, cls: str = "") -> str:
    """HTML table under a header row of column names; the first ``left`` columns are
    left-aligned."""
    out = [f'<table class="{cls}">' if cls else "<table>",
           "<thead><tr>" + "".join(_cell(h, "th", i < left, "col") for i, h in enumerate(head)) + "</tr></thead>",
           "<tbody>"]
    for r in rows:
        out.append("<tr>" + "".join(_cell(v, "td", i < left) for i, v in enumerate(r)) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def _facts(rows: list[list]) -> str:
    """A table of (name, value) rows: each row headed by its name, no row of column names
    (a summary has none to give)."""
    out = ['<table class="facts"><tbody>']
    for name, value in rows:
        out.append("<tr>" + _cell(name, "th", True, "row") + _cell(value, "td", True) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def _verdict_cell(v: str, cls_prefix: str = "verdict-") -> tuple:
    return ("html", f'<span class="{cls_prefix}{_e(v)}">&nbsp;{_e(v.upper() if v in ("regression", "improvement") else v)}&nbsp;</span>')


class Report:
    def __init__(self, title: str = "spigap report", *, stall_rule: stalls_mod.StallRule | None = None,
                 stall_limit: int = 50):
        self.title = title
        self.rule = stall_rule or stalls_mod.StallRule()
        self.stall_limit = stall_limit
        self.sections: list[tuple[str, str, str]] = []      # (id, title, html)
        self.images: list[tuple[str, bytes]] = []           # (file name, png)
        self.missing_glyphs: set[str] = set()              # characters the plot font cannot draw
        self.cited = Citations()                           # the docs' sections embedded (report/cited.py)
        self._n = 0

    # ------------------------------------------------------------ images
    def _img(self, fig, name: str, alt: str) -> str:
        from spigap.report.plots import png

        data = png(fig, missing=self.missing_glyphs)
        self.images.append((name, data))
        b64 = base64.b64encode(data).decode("ascii")
        return f'<img alt="{_e(alt)}" title="{_e(name)}" src="data:image/png;base64,{b64}">'

    def write_pngs(self, directory) -> list[str]:
        """Every plot as DIR/NAME.png, each whole or not at all (outfile.py)."""
        from spigap.errors import OutputError
        from spigap.outfile import write_output

        try:
            os.makedirs(directory, exist_ok=True)
        except OSError as e:
            raise OutputError(f"cannot create the directory: {e.strerror or e}", path=str(directory)) from None
        paths = []
        for name, data in self.images:
            p = os.path.join(directory, name)
            write_output(p, data)
            paths.append(p)
        return paths

    # ------------------------------------------------------------ capture
    def add_capture(self, cap, check=None, check_error: str | None = None) -> None:
        """One capture (``spigap.stats.compare.Capture``); ``check``: a CheckResult or None."""
        from spigap.report import plots

        self._n += 1
        n = self._n
        a = cap.analysis
        t = a.tick_s
        stem = f"{n:02d}-{_slug(os.path.splitext(os.path.basename(cap.path))[0])}"
        sid = f"capture-{n}"
        found = cap.stall_report(self.rule)
        st = found.stalls
        H = []
        # summary
        rate = a.transfer_rate_hz()
        g = a.grouping
        info = a.info
        rows = [
            ["file", cap.path], ["format", info.format],
            ["sample rate", fmt_freq(info.samplerate_hz) if info.samplerate_hz else "–"],
            ["resolution (± per edge-to-edge time)", fmt_time(t)],
            ["duration", fmt_time(a.end_tick * t)],
            ["channels", f"clk={a.cfg.clk} mosi={a.cfg.mosi or '–'} miso={a.cfg.miso or '–'} "
                         f"cs={a.cfg.cs or '– (framed by SCLK idle time)'}"],
            ["SPI", f"mode {a.cfg.mode}, {a.cfg.wordsize}-bit words"],
            ["SCLK", f"{fmt_freq(a.sclk_hz)} (T = {fmt_time(a.period_ticks * t)})" if a.sclk_hz else "–"],
            ["transfers", f"{a.n} ({a.n_partial()} partial), "
                          f"{a.n_words_total()} words" if a.sample is None else
                          ("html", _e(f"{a.sample['transfers']}; the figures below are from {a.n} of them, a "
                                      f"{a.sample['method']} (bounded memory, ")
                           + self.cited.link("compare-and-report.md", "Limits") + ")")],
            ["messages", confidence.messages_in_words(a.n_messages(), g.transfers_per_message, g.lengths,
                                                      ambiguous=g.ambiguous, stretches=len(g.segments))
             + f" [{g.method}, {confidence.stated(g.confidence, confidence.of_grouping(g))}] "
               f"{confidence.grouping_note(g)}"],
            ["transfer rate", fmt_rate(rate)],
            # the figure and its format of the text output and JSON (units.fmt_clocks): on the grid
            # one sample draws, never below 0
            ["idle clocks between words (p50)", fmt_clocks(idle_clocks(a), a.period_ticks)],
            ["stalls", f"{len(st)} ({fmt_time(sum(s.excess_s for s in st))} above their medians)"],
        ]
        if a.truncated:
            rows.append(["PARTIAL", a.truncated])
        H.append(f'<h3 id="{sid}-summary">Summary</h3>')
        H.append(_facts(rows))
        if a.warnings:
            H.append("<ul class='warn'>" + "".join(f"<li>{_e(w)}</li>" for w in a.warnings) + "</ul>")
        # gap statistics
        H.append(f'<h3 id="{sid}-gaps">Gap statistics</h3>')
        rows = []
        for kind in HIST_KINDS + (("class_a", "class_b") if a.grouping.ambiguous else ()):
            if not a.available(kind):
                rows.append([LABELS[kind], "n/a (no CS line)", "", "", "", "", "", ""])
                continue
            d = describe(a.gap_values(kind), t)
            if kind == "idle" and d["n"] == 0:
                continue
            rows.append([LABELS[kind], d["n"]] + [fmt_time(d[k]) for k in
                                                   ("min_s", "p50_s", "mean_s", "p99_s", "max_s", "std_s")])
        H.append(_table(["gap", "n", "min", "p50", "mean", "p99", "max", "std"], rows))
        H.append(f"<p class='note'>Every figure is an edge-to-edge time between sampled edges: ±1 sample "
                 f"({_e(fmt_time(t))}). Definitions: {self.cited.link('gaps.md', 'Per transfer')}.</p>")
        # stalls
        H.append(f'<h3 id="{sid}-stalls">Stalls</h3>')
        summ = found.summary(a)
        rows = [[k.replace("_", " "), v["gaps"], v["stalls"], f"{v['rate'] * 1000:.3g} ‰",
                 fmt_time(v["median_s"]), fmt_time(v["threshold_s"]), fmt_time(v["excess_s"]),
                 fmt_time(v["longest_s"])] for k, v in summ["kinds"].items()]
        H.append(_table(["kind", "gaps", "stalls", "rate", "median", "stall threshold", "time lost", "longest"], rows))
        H.append(f"<p class='note'>Rule: {_e(self.rule.describe())}.</p>")
        if st:
            shown = sorted(st, key=lambda s: -s.duration_s)[: self.stall_limit]
            rows = [[fmt_time(s.at_s, 7), s.kind.replace("_", " "), fmt_time(s.duration_s), fmt_time(s.median_s),
                     "+" + fmt_time(s.excess_s), s.transfer] for s in sorted(shown, key=lambda s: s.at_s)]
            more = f" (the {len(shown)} longest of {len(st)})" if len(st) > len(shown) else ""
            H.append(f"<p>Stalls{_e(more)}, in time order:</p>")
            H.append(_table(["at", "kind", "gap", "median", "excess", "transfer #"], rows, left=2))
        # extra channels
        if cap.events is not None:
            H.append(self._events_html(cap, sid, stem))
        # check
        if check is not None or check_error is not None:
            H.append(self._check_html(check, check_error, sid))
        # histograms
        H.append(f'<h3 id="{sid}-histograms">Histograms</h3>')
        H.append("<p class='note'>Left: linear count over the body (p0.5…p99.5, at most 10 robust σ from the median); right: log count over all "
                 "values (log time axis when the tail is far out), like the seed 003 histograms. Bins are "
                 "whole samples.</p>")
        thr = {k: v["threshold_s"] for k, v in summ["kinds"].items()}
        for kind in HIST_KINDS:
            if not a.available(kind):
                continue
            v = a.gap_values(kind)
            v = v[~np.isnan(v)]
            if len(v) == 0:
                continue
            fig = plots.histogram(v * t, t, LABELS[kind], threshold_s=thr.get(kind))
            H.append(self._img(fig, f"{stem}-hist-{kind}.png", f"histogram of {kind}"))
        # timeline
        H.append(f'<h3 id="{sid}-timeline">Timeline of gaps</h3>')
        series = []
        for kind in stalls_mod.stall_kinds(a):
            if not a.available(kind):
                continue
            s = stalls_mod.gap_series(a, kind)
            if len(s.values):
                series.append((kind, s.at * t, s.values * t))
        fig = plots.timeline(series, st, a.end_tick * t, f"{os.path.basename(cap.path)}: every gap over the "
                             f"capture (stalls ringed)")
        H.append(self._img(fig, f"{stem}-timeline.png", "timeline of gaps"))
        # rate
        H.append(f'<h3 id="{sid}-rate">Transfers per second</h3>')
        if a.sample is not None:
            blocks = np.split(np.arange(a.n), np.flatnonzero(a.breaks)[1:])
            mids, rates = [], []
            for b in blocks:
                s0, s1 = a.start[b[0]], a.start[b[-1]]
                r = start_rate_hz(len(b), s0, s1, t)
                if r is not None:
                    mids.append((s0 + s1) / 2 * t)
                    rates.append(r)
            fig = plots.block_rate(np.array(mids), np.array(rates), rate, a.end_tick * t,
                                   "transfers per second over the capture (sampled blocks)")
        else:
            starts = a.start[~a.partial_start] * t
            fig = plots.rate([("transfers", starts, None, rate)], a.end_tick * t,
                             "transfers per second over the capture")
        H.append(self._img(fig, f"{stem}-rate.png", "transfers per second"))
        if cap.traced is not None:
            H.append(self._phases_html(cap, sid, stem))
        if a.pins is not None:                    # --pins: timing at the pins (report/eye.py)
            from spigap.report.eye import pins_html

            H.append(pins_html(self, a.pins, stem, check))
        self.sections.append((sid, cap.path, "\n".join(H)))

    def _phases_html(self, cap, sid, stem) -> str:
        """The kernel trace's phases of every gap: alignment, table, stacked medians, timeline."""
        from spigap.report import plots

        tc = cap.traced
        al, tr = tc.alignment, tc.trace
        H = [f'<h3 id="{sid}-phases">Kernel phases (trace <code>{_e(tc.path)}</code>)</h3>']
        unc = f" ± {fmt_time(al.offset_uncertainty_s)}" if al.offset_uncertainty_s is not None else ""
        H.append(f"<p>{_e(len(tr))} events ({_e(tr.source)}, timestamps to {_e(fmt_time(tr.resolution_s))}); "
                 f"{_e(al.device)}: {_e(al.anchor)} ↔ {_e(al.bus_anchor)}, matched {al.matched}, unmatched "
                 f"{al.unmatched_trace} trace / {al.unmatched_bus} bus; drift {al.drift_ppm:+.2f} ppm; offset zero "
                 f"point: {_e(al.zero_point)}{_e(unc)}. Method: {self.cited.link('trace.md', 'Alignment')}.</p>")
        if tc.grouping_note:
            H.append(f"<p class='note'>Grouping: {_e(tc.grouping_note)}</p>")
        rows = []
        for p in tc.common():
            st = p.stats
            rows.append([p.gap, p.frm, p.to, st["n"]] + [fmt_time(st[k]) for k in
                                                          ("min_s", "p50_s", "mean_s", "p99_s", "max_s", "std_s")]
                        + [fmt_time(p.resolution_s)])
        H.append(_table(["gap", "from", "to", "n", "min", "p50", "mean", "p99", "max", "std", "resolution"], rows,
                        left=3))
        hidden = len(tc.phases.phases) - len(tc.common())
        H.append("<p class='note'>Each phase lies between consecutive events on the merged timeline (bus edges "
                 "and kernel events on the bus clock); resolution: one sample between bus edges, the trace's "
                 "timestamp step between events, both summed across"
                 + (f"; {hidden} phase(s) seen in fewer than 5 % of their gaps (lost or stray events) not shown"
                    if hidden else "") + ".</p>")
        groups = _phase_groups(tc.common())
        if groups:
            fig = plots.phase_bars([(g, ph) for g, ph in groups], "phase medians per gap kind (in order inside "
                                   "the gap)")
            H.append(self._img(fig, f"{stem}-phases.png", "phase medians per gap kind"))
        fig = plots.phase_timeline(cap.analysis, tc, f"{os.path.basename(cap.path)} + "
                                   f"{os.path.basename(tc.path)}: transfers, gaps split into phases, kernel events")
        H.append(self._img(fig, f"{stem}-phase-timeline.png", "merged timeline: bus, phases, kernel events"))
        return "\n".join(H)

    def _events_html(self, cap, sid, stem) -> str:
        from spigap.report import plots

        ev = cap.events
        t = ev.tick_s
        d = ev.to_dict()
        H = [f'<h3 id="{sid}-events">Extra channels</h3>']
        H.append(f"<p>Chain: {' → '.join(_e(x) for x in d['chain'])}. For every event, the first next-stage "
                 f"event before the following event of the same stage (±1 sample, {_e(fmt_time(t))}).</p>")
        rows = []
        stages = list(d["latency"]) + ([d["chain_total"]] if d["chain_total"] else [])
        for s in stages:
            rows.append([f"{s['from']} → {s['to']}", s["events"], s["matched"], s["missing"], s["extra"]]
                        + [fmt_time(s[k]) for k in ("min_s", "p50_s", "mean_s", "p99_s", "max_s", "std_s")])
        H.append(_table(["latency", "events", "matched", "missing", "extra", "min", "p50", "mean", "p99",
                         "max", "std"], rows))
        rows = []
        for c in d["channels"]:
            rows.append([f"{c['channel']}:{c['edge']}", c["events"], fmt_rate(c["events_per_s"]),
                         fmt_time(c["interval"]["p50_s"]), fmt_time(c["interval"]["std_s"]),
                         fmt_time(c["period"]["p50_s"]), fmt_freq(c["frequency_hz"]),
                         fmt_time(c["high"]["p50_s"]), fmt_time(c["low"]["p50_s"]),
                         f"{c['duty'] * 100:.1f} %" if c["duty"] is not None else "–"])
        H.append(_table(["channel", "events", "events/s", "interval p50", "interval std", "period p50",
                         "frequency", "high p50", "low p50", "duty"], rows))
        for s in ev.stages + ([ev.total] if ev.total is not None and len(ev.stages) > 1 else []):
            if len(s.latency):
                name = _slug(f"{s.src}-{s.dst}")
                fig = plots.histogram(s.latency * t, t, f"{s.src} → {s.dst}")
                H.append(self._img(fig, f"{stem}-latency-{name}.png", f"latency {s.src} to {s.dst}"))
        for c in ev.channels:
            if len(c.interval):
                fig = plots.histogram(c.interval * t, t, f"{c.name}:{c.edge} interval")
                H.append(self._img(fig, f"{stem}-interval-{_slug(c.name)}-{c.edge}.png", f"{c.name} interval"))
        if ev.channels:
            fig = plots.rate([(f"{c.name}:{c.edge}", c.events * t, None, None) for c in ev.channels], ev.span_ticks * t,
                             "events per second over the capture", ylabel="events/s")
            H.append(self._img(fig, f"{stem}-events-rate.png", "events per second"))
        return "\n".join(H)

    def _check_html(self, check, error, sid) -> str:
        H = [f'<h3 id="{sid}-check">Check against the profile</h3>']
        if check is None:
            H.append(f"<div class='pending'>{_e(error)}</div>")
            return "\n".join(H)
        d = check.to_dict()
        prof = d["profile"]
        dev = d.get("device")
        # --device alone has no profile
        H.append((f"<p>Profile <b>{_e(prof['name'])}</b> ({_e(prof.get('title') or '')})" if prof else "<p>No profile")
                 + (f", device <b>{_e(dev.get('spec') or dev.get('name') or '')}</b>" if dev else "")
                 + f": overall {_verdict_cell(d['verdict'], 'v-')[1]} "
                 + ", ".join(f"{k} {v}" for k, v in d["counts"].items() if v) + "</p>")
        rows = []
        for it in d["checks"]:
            unit = it.get("unit")
            fmt = (lambda v: fmt_time(v)) if unit == "s" else (lambda v: fmt_freq(v)) if unit == "Hz" else (
                lambda v: "–" if v is None else f"{v:.4g}")
            bounds = f"{fmt(it['low']) if it.get('low') is not None else ''} … {fmt(it['high']) if it.get('high') is not None else ''}"
            rows.append([it["id"], ("html", f"<span class='v-{_e(it['verdict'])}'>&nbsp;{_e(it['verdict'])}&nbsp;</span>"),
                         fmt(it.get("measured")), fmt(it.get("expected")) if it.get("expected") is not None else "",
                         bounds, it.get("reason") or ""])
        H.append(_table(["check", "verdict", "measured", "expected", "bounds", "reason"], rows, left=1))
        for n in d.get("notes") or []:
            H.append(f"<p class='note'>{_e(n)}</p>")
        return "\n".join(H)

    # ------------------------------------------------------------ a shared bus
    def add(self, cap, check=None) -> None:
        """One capture file (``spigap.stats.compare.Loaded``): a capture of one device as
        ``add_capture``; a shared bus's section (busy time, handovers, queueing, faults and a
        bus timeline picture), then each device as a capture of its own."""
        r = cap.result
        if r.bus is None:
            self.add_capture(cap.capture, check)
            return
        self._n += 1
        stem = f"{self._n:02d}-{_slug(os.path.splitext(os.path.basename(cap.path))[0])}"
        self.sections.append((f"capture-{self._n}", f"{cap.path}: the bus", self._bus_html(r, stem)))
        for c in cap.devices.values():
            self.add_capture(c)

    def _bus_html(self, r, stem: str) -> str:
        from spigap.report import plots

        fig_d = r.bus.figures(r.tick_s)
        H = ["<h3>The bus</h3>"]
        share = fig_d["busy_share"]
        rows = [["devices", ", ".join(r.devices)],
                ["busy", f"{100 * share:.1f} % ({fmt_time(fig_d['busy_s'])} of {fmt_time(fig_d['duration_s'])})"
                 if share is not None else "–"],
                ["per device", ", ".join(f"{n} {100 * s:.1f} %" for n, s in fig_d["device_busy_share"].items()
                                         if s is not None)],
                ["idle gaps p50", fmt_time(fig_d["idle_gaps"]["p50_s"])],
                ["two CS lines at once", f"{fig_d['cs_overlaps']['count']} (ERROR)" if fig_d["cs_overlaps"]["count"]
                 else "none"],
                ["SCLK with no CS", f"{fig_d['sclk_without_cs']['edges']} edge(s)"]]
        H.append(_facts(rows))
        hand = [[f"{h['from']} → {h['to']}", h["n"]] + [fmt_time(h[k]) for k in ("min_s", "p50_s", "p99_s", "max_s")]
                for h in fig_d["handover"]]
        if hand:
            H.append("<p>Handover gaps (one device's CS deassert → another's CS assert):</p>")
            H.append(_table(["pair", "n", "min", "p50", "p99", "max"], hand, left=1))
        q = r.bus.queueing(r.tick_s)
        if q:
            H.append("<ul>" + "".join(f"<li>{_e(x['note'])}</li>" for x in q) + "</ul>")
        inter = []
        for name, a in r.devices.items():
            for kind, d in a.bus.interleave.to_dict(r.tick_s).items():
                if d["with_other_devices"]:
                    inter.append([name, kind, d["gaps"], d["with_other_devices"], fmt_time(d["other_busy"]["p50_s"]),
                                  fmt_time(d["own"]["p50_s"])])
        if inter:
            H.append("<p>Interleaving: a device's CS-inactive gaps that held other devices' transfers, and in those the "
                     "others' CS time and the rest:</p>")
            H.append(_table(["device", "gap kind", "gaps", "with others", "others' CS time p50", "the rest p50"], inter,
                            left=2))
        fig = plots.bus_timeline(r, "the bus: each device's CS windows, handover gaps, one gap split")
        H.append(self._img(fig, f"{stem}-bus-timeline.png", "bus timeline"))
        if r.warnings:
            H.append("<ul class='warn'>" + "".join(f"<li>{_e(w)}</li>" for w in r.warnings) + "</ul>")
        return "\n".join(H)

    def _add_bus_comparison(self, sc) -> None:
        """A shared bus before vs after: who held the bus, then each device's comparison."""
        H = []
        if sc.splits:
            H.append("<p>Each CS-inactive gap = the other devices' CS time in it + the rest; the change of the mean "
                     "splits the same way (each part judged by its block-bootstrap interval, Bonferroni over them).</p>")
            rows = []
            for s in sc.splits:
                g, o, w = s.mean_deltas()
                rows.append([s.device, s.kind, fmt_time(g), fmt_time(o), fmt_time(w),
                             f"{s.gap.verdict} / {s.others.verdict} / {s.own.verdict}"])
            H.append(_table(["device", "gap kind", "Δ mean gap", "Δ others", "Δ own", "verdicts"], rows, left=2))
            H.append("<ul>" + "".join(f"<li>{_e(s.sentence())}</li>" for s in sc.splits if s.sentence()) + "</ul>")
        H.append("<ul class='note'>" + "".join(f"<li>{_e(n)}</li>" for n in sc.notes) + "</ul>")
        self.sections.append(("compare-bus", "Comparison: who held the bus", "\n".join(H)))
        for name, c in sc.devices.items():
            n0 = len(self.sections)
            self.add_comparison(c)
            sid, title, body = self.sections[n0]
            self.sections[n0] = (f"{sid}-{name}", f"{title} [{name}]", body)

    # ------------------------------------------------------------ comparison
    def add_comparison(self, cmp) -> None:
        """A comparison (stats.compare.compare_all): one device's, or a shared bus's (who held
        the bus, then each device's comparison)."""
        from spigap.report import plots
        from spigap.stats.compare import BusComparison
        from spigap.stats.output import fmt_ci, fmt_p, fmt_signed_time

        if isinstance(cmp, BusComparison):
            self._add_bus_comparison(cmp)
            return

        H = []
        conf = f"{cmp.settings.confidence * 100:g} %"
        H.append("<p>Before: " + ", ".join(f"<code>{_e(c.path)}</code>" for c in cmp.before)
                 + "<br>After: " + ", ".join(f"<code>{_e(c.path)}</code>" for c in cmp.after) + "</p>")
        H.append(f"<p>Overall: {_verdict_cell(cmp.verdict)[1]}</p>")
        rows = []
        for m in cmp.metrics:
            if m.unit == "s" and m.tests:
                tl, tj = m.test("level"), m.test("jitter")
                d = m.deltas
                rows.append([m.label, f"{m.before['n']}/{m.after['n']}",
                             f"{fmt_time(m.before['p50'])} → {fmt_time(m.after['p50'])}",
                             f"{fmt_signed_time(d['p50']['delta'])} {fmt_ci(d['p50']['ci'])}", fmt_signed_time(d["mean"]["delta"]),
                             fmt_signed_time(d["p99"]["delta"]),
                             f"{fmt_time(m.before['spread'])} → {fmt_time(m.after['spread'])}",
                             f"{fmt_time(m.before['std'])} → {fmt_time(m.after['std'])}",
                             f"{fmt_p(tl.p_holm)} / {fmt_p(tj.p_holm)}", _verdict_cell(m.verdict)])
            elif m.name == "transfer_rate" and m.tests:
                t = m.test("rate")
                rows.append([m.label, f"{m.before['n']}/{m.after['n']}",
                             f"{fmt_rate(m.before['rate'])} → {fmt_rate(m.after['rate'])}",
                             f"{t.delta / m.before['rate'] * 100:+.2f} %", "", "", "", "", fmt_p(t.p_holm),
                             _verdict_cell(m.verdict)])
            elif m.name == "stalls" and m.tests:
                t = m.test("stalls")
                rows.append([m.label, f"{m.before['stalls']}/{m.after['stalls']} stalls",
                             f"{(m.before['rate'] or 0) * 1000:.3g} ‰ → {(m.after['rate'] or 0) * 1000:.3g} ‰",
                             "", "", "", "", "", fmt_p(t.p_holm), _verdict_cell(m.verdict)])
            else:
                rows.append([m.label, f"{m.before.get('n', '')}/{m.after.get('n', '')}", "", "", "", "", "", "", "",
                             f"{m.verdict} ({m.note})"])
        H.append(_table(["metric", "n", "p50 before → after", f"Δp50 [{conf} CI]", "Δmean", "Δp99",
                         "robust σ", "std", "p level / jitter (Holm)", "verdict"], rows))
        H.append(f"<p class='note'>Level: Mann-Whitney U on the medians of blocks of consecutive values, jitter: "
                 f"on the blocks' robust σ (IQR/1.349); Holm over {cmp.n_tests} tests at α = "
                 f"{cmp.settings.alpha:g}; intervals: circular block bootstrap ({cmp.settings.n_boot} resamples). "
                 f"A change counts when significant and at least {cmp.settings.min_rel_effect * 100:g} % of the "
                 f"before value (never below 2 samples); jitter: {cmp.settings.min_rel_jitter * 100:g} %. "
                 f"See {self.cited.link('compare-and-report.md', 'Verdict rule')} and "
                 f"{self.cited.link('compare-and-report.md', 'Why blocks: consecutive gaps are not independent')}."
                 "</p>")
        for n in cmp.notes:
            H.append(f"<p class='note'>Note: {_e(n)}</p>")
        at = cmp.attribution
        if at:
            H.append('<h3 id="compare-attribution">Where the transfer period went</h3>')
            H.append(f"<p><b>{_e(at['interpretation'])}</b></p>")
            rows = [[r["label"], fmt_time(r["before_s"]), fmt_time(r["after_s"]), fmt_signed_time(r["delta_s"]), fmt_ci(r["ci_s"]),
                     f"{r['share'] * 100:.0f} %" if r["share"] is not None and at["changed"] else "", r["hint"]]
                    for r in at["parts"]]
            H.append(_table(["part", "before", "after", "Δ", f"{conf} CI", "share", "usual cause"], rows))
            fig = plots.attribution(at, "change of each part of the mean transfer period (after − before)")
            H.append(self._img(fig, "compare-attribution.png", "attribution of the transfer period change"))
        if cmp.phases is not None:
            H.append(self._phase_compare_html(cmp, conf))
        H.append('<h3 id="compare-overlays">Before vs after</h3>')
        res = max(c.analysis.tick_s for c in cmp.before + cmp.after)
        for kind in HIST_KINDS:
            bs = [c.analysis.gap_values(kind) * c.analysis.tick_s for c in cmp.before if c.analysis.available(kind)]
            as_ = [c.analysis.gap_values(kind) * c.analysis.tick_s for c in cmp.after if c.analysis.available(kind)]
            b = np.concatenate(bs) if bs else np.empty(0)
            a = np.concatenate(as_) if as_ else np.empty(0)
            if not np.isfinite(b).any() and not np.isfinite(a).any():
                continue
            fig = plots.overlay_histogram(b, a, res, LABELS[kind])
            H.append(self._img(fig, f"compare-hist-{kind}.png", f"before vs after: {kind}"))
        # throughput over time, side by side (each from its own start)
        span = max(c.analysis.end_tick * c.analysis.tick_s for c in cmp.before + cmp.after)
        series = []
        for side, caps in (("before", cmp.before), ("after", cmp.after)):
            a0 = caps[0].analysis
            series.append((f"{side} ({os.path.basename(caps[0].path)})", a0.start[~a0.partial_start] * a0.tick_s,
                           a0.end_tick * a0.tick_s, a0.transfer_rate_hz()))
        fig = plots.rate(series, span, "transfers per second: first before vs first after capture")
        H.append(self._img(fig, "compare-rate.png", "transfers per second before vs after"))
        self.sections.append(("compare", "Comparison: before vs after", "\n".join(H)))

    def _phase_compare_html(self, cmp, conf) -> str:
        from spigap.report import plots
        from spigap.stats.output import fmt_ci, fmt_p, fmt_signed_time

        H = ['<h3 id="compare-phases">Kernel phases: which one moved</h3>']
        rows = []
        for r in cmp.phases:
            m = r.metric
            if not m.tests:
                rows.append([r.gap, r.frm, r.to, f"{m.before.get('n', 0)}/{m.after.get('n', 0)}", "", "", "",
                             f"{m.verdict} ({m.note})"])
                continue
            d = m.deltas["p50"]
            rows.append([r.gap, r.frm, r.to, f"{m.before['n']}/{m.after['n']}",
                         f"{fmt_time(m.before['p50'])} → {fmt_time(m.after['p50'])}",
                         f"{fmt_signed_time(d['delta'])} {fmt_ci(d['ci'])}", fmt_p(m.test("level").p_holm),
                         _verdict_cell(m.verdict)])
        H.append(_table(["gap", "from", "to", "n", "p50 before → after", f"Δp50 [{conf} CI]", "p (Holm)",
                         "verdict"], rows, left=3))
        H.append("<p class='note'>The same statistics as the gaps (block rank test, block bootstrap, one Holm "
                 "family with them); a phase's change counts when at least 2 × its resolution (the trace's "
                 "timestamp step where a kernel event bounds it).</p>")
        groups = []
        for kind in dict.fromkeys(r.gap for r in cmp.phases):
            for side in ("before", "after"):
                ph = [(r.frm, r.to, getattr(r.metric, side).get("p50") or 0.0) for r in cmp.phases if r.gap == kind]
                groups.append((f"{kind} {side}", ph))
        if groups:
            fig = plots.phase_bars(groups, "phase medians, before vs after (p50 of each phase, stacked in order)")
            H.append(self._img(fig, "compare-phases.png", "phase medians before vs after"))
        return "\n".join(H)

    # ------------------------------------------------------------ output
    def html(self) -> str:
        now = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
        nav = "".join(f'<li><a href="#{_e(i)}">{_e(title)}</a></li>' for i, title, _ in self.sections)
        body = "\n".join(f'<section id="{_e(i)}"><h2>{_e(title)}</h2>\n{h}\n</section>' for i, title, h in self.sections)
        head = (f"<p class='note'>spigap {_e(__version__)}, {_e(now)}. Times are edge-to-edge between sampled "
                f"edges (±1 sample, see each capture's resolution); definitions in "
                f"{self.cited.link('gaps.md', 'Per transfer')}.</p>")
        # every document the texts name becomes a link to its cited part, embedded at the end
        body = self.cited.linkify(body)
        cited = self.cited.html()
        if cited:
            nav += f'<li><a href="#{Citations.ID}">Definitions and methods cited</a></li>'
        return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                f"<title>{_e(self.title)}</title><style>{CSS}</style></head><body>\n"
                f"<h1>{_e(self.title)}</h1>\n{head}\n<nav><ul>{nav}</ul></nav>\n{body}\n{cited}\n</body></html>\n")
