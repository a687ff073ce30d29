"""``spigap trace CAPTURE --ftrace FILE``: the kernel's trace on the bus clock, every gap split into phases.

The logic is in analyzer/spigap/trace/ (align/, phases.py, perfetto.py); this module
parses options and prints (docs/trace.md).
"""

from __future__ import annotations

import json
import os
import sys

from spigap.cli.common import (
    CAPTURE_HELP,
    add_capture_options,
    add_output_options,
    add_trace_options,
    analysis_options,
    check_output_path,
    config_from_args,
    write_output,
)

ORDER = 35

MAX_TEXT_TRANSFERS = 50
RARE = 0.05           # text: phases in fewer than 5 % of their kind's gaps are summarized


def add_subparser(sub) -> None:
    p = sub.add_parser("trace", help="align a kernel ftrace (or a user-space timestamp log) with the capture; "
                                     "split every gap into kernel phases",
                       description="Match the kernel's SPI trace events (ftrace text: /sys/kernel/tracing/trace, "
                                   "trace_pipe, trace-cmd report, perf script) to the capture's transfers, fit "
                                   "the trace clock to the bus clock (offset and drift), and split CS setup, "
                                   "inter-transfer, CS hold, cs_change and context-switch gaps into the phases between "
                                   "consecutive events on the merged timeline (docs/trace.md).")
    p.add_argument("capture", help=CAPTURE_HELP)
    add_capture_options(p)
    t = add_trace_options(p, ftrace="one")
    t.add_argument("--userlog", metavar="FILE",
                   help="user-space timestamp log (CSV, e.g. perf_counter_ns before/after each xfer2): aligned "
                        "too, its error against the bus reported")
    t.add_argument("--sync-channel", metavar="NAME",
                   help="align on a GPIO toggled by software instead: the capture channel NAME and the trace's "
                        "gpio:gpio_value events of that pin")
    t.add_argument("--perfetto", metavar="OUT.json",
                   help="also write the merged timeline as Chrome/Perfetto trace-event JSON (ui.perfetto.dev, "
                        "chrome://tracing)")
    o = add_output_options(p, ("text", "json"))
    o.add_argument("--transfers", action="store_true",
                   help="include every transfer with its matched trace event (text: the first 50; json: a "
                        "'transfers' list)")
    p.set_defaults(func=run)


def run(args) -> int:
    from spigap.errors import UsageError

    if not args.ftrace and not args.userlog:
        raise UsageError("give a trace: --ftrace FILE and/or --userlog FILE")
    if args.sync_channel and not args.ftrace:
        raise UsageError("--sync-channel aligns the --ftrace file's gpio_value events: give --ftrace")
    if args.spi_device and not args.ftrace:
        raise UsageError("--spi-device picks a device of the --ftrace file: give --ftrace")
    check_output_path(args.output)
    if args.perfetto:
        check_output_path(args.perfetto)
    result = compute(args)
    if result.get("shared") is not None:
        text = (json.dumps(shared_dict(result, transfers=args.transfers), indent=1) + "\n" if args.format == "json"
                else shared_text(result, transfers=args.transfers))
        write_output(text, args.output)
        if result["analysis"].truncated:
            print(f"spigap: error: {result['analysis'].truncated}", file=sys.stderr)
            return 2
        return 0
    if args.perfetto:
        from spigap.trace import perfetto

        try:
            perfetto.write(args.perfetto, result["analysis"], result["trace"], result["alignment"],
                           capture_name=os.path.basename(str(args.capture)))
        except OSError as e:
            raise UsageError(f"cannot write: {e.strerror or e}", path=args.perfetto) from None
    if args.format == "json":
        text = json.dumps(to_dict(result, transfers=args.transfers), indent=1) + "\n"
    else:
        text = render_text(result, transfers=args.transfers)
    write_output(text, args.output)
    a = result["analysis"]
    if a.truncated:
        print(f"spigap: error: {a.truncated}", file=sys.stderr)
        return 2
    return 0


def compute(args) -> dict:
    """Analyze the capture, read and align the trace(s), split the gaps."""
    from spigap.trace import align, phases

    # a --sync-channel's edges are read in the analysis's own pass
    from spigap.api import analyze_file

    r = analyze_file(args.capture, config_from_args(args), **analysis_options(args),
                     channels={args.sync_channel: "--sync-channel NAME"} if args.sync_channel else None)
    out: dict = {"capture": str(args.capture), "analysis": r, "trace": None, "alignment": None, "phases": None,
                 "userlog": None, "userlog_path": None, "grouping_note": None, "sync": None, "shared": None}
    if r.bus is not None:
        # a shared bus: every traced device on its CS line, and who waited for whom (trace/pair.py)
        from spigap.errors import UsageError
        from spigap.trace import pair

        for opt, given in (("--userlog", args.userlog), ("--sync-channel", args.sync_channel),
                           ("--perfetto", args.perfetto)):
            if given:
                raise UsageError(f"{opt} takes one device: the capture holds {len(r.devices)} on one bus "
                                 f"({', '.join(r.devices)}); give --cs NAME for {opt}")
        if not args.ftrace:
            raise UsageError("give the kernel trace: --ftrace FILE")
        out["shared"] = pair.load_bus(args.ftrace, r, spi_device=args.spi_device, cs_latency=args.cs_latency)
        out["trace"] = out["shared"].trace
        return out
    a = out["analysis"] = r.device.kept()
    if args.ftrace:
        from spigap.trace import ftrace

        tr = ftrace.parse(args.ftrace)
        out["trace"] = tr
        if args.sync_channel:
            al = align.align_sync(tr, a, r.edges[args.sync_channel], args.sync_channel)
        else:
            al = align.align_spi(tr, a, args.spi_device, cs_latency=args.cs_latency)
        out["alignment"] = al
        if al.method == "sync-channel" and align.spi_devices(tr):
            out["sync"] = al
            al = out["alignment"] = align.spi_on_fit(tr, a, al, args.spi_device)
        if al.method == "spi":
            out["phases"] = phases.run(tr, al, a)
            out["grouping_note"] = out["phases"].grouping_note
    if args.userlog:
        from spigap.trace import userlog

        log = userlog.parse(args.userlog)
        out["userlog"] = align.align_userlog(log, a)
        out["userlog_path"] = str(args.userlog)
    return out


# ------------------------------------------------------------------ output
def _trace_dict(tr) -> dict:
    return {"path": tr.path, "source": tr.source, "events": len(tr), "resolution_s": tr.resolution_s,
            "lost_events": tr.lost_events, "warnings": list(tr.warnings)}


def to_dict(result: dict, *, transfers: bool = False) -> dict:
    a = result["analysis"]
    d: dict = {"capture": result["capture"], "resolution_s": a.tick_s}
    if result["trace"] is not None:
        d["trace"] = _trace_dict(result["trace"])
    al = result["alignment"]
    if al is not None:
        d["alignment"] = al.to_dict()
        d["alignment"]["notes"] = list(al.notes)
    ph = result["phases"]
    if ph is not None:
        d["grouping"] = result["grouping_note"]
        d["segments"] = dict(ph.segments)
        d["phases"] = [p.to_dict() for p in ph.phases]
    if result["userlog"] is not None:
        d["userlog"] = [u.to_dict() for u in result["userlog"]]
    if transfers:
        d["transfers"] = _transfers(result)
    if ph is not None:
        from spigap.output.jsonout import to_dict as analysis_dict

        # spigap analyze's document, its message grouping from the trace's boundaries
        d["analysis"] = analysis_dict(a)
    return d


def _transfers(result: dict) -> list[dict]:
    import numpy as np

    a = result["analysis"]
    al, tr = result["alignment"], result["trace"]
    match = np.full(a.n, -1, np.int64)
    resid = np.full(a.n, np.nan)
    if al is not None and al.method == "spi":
        match[al.bus_index] = al.trace_rows
        resid[al.bus_index] = al.residuals
    out = []
    for k in range(a.n):
        r = int(match[k])
        out.append({"index": k, "start_s": a.seconds(a.start[k]), "end_s": a.seconds(a.end[k]),
                    "bits": int(a.n_bits[k]), "message": int(a.message[k]),
                    "trace_ts": float(tr.ts[r]) if r >= 0 else None,
                    "residual_s": float(resid[k]) if r >= 0 else None})
    return out


def render_text(result: dict, *, transfers: bool = False) -> str:
    from spigap.units import fmt_time

    a = result["analysis"]
    lines = [f"capture: {result['capture']}: {a.n} transfers, resolution {fmt_time(a.tick_s)} (one sample)"]
    tr, al = result["trace"], result["alignment"]
    if tr is not None:
        lost = f", {tr.lost_events} lost (the file says)" if tr.lost_events else ""
        lines.append(f"trace: {tr.path} ({tr.source}): {len(tr)} events{lost}, timestamps to "
                     f"{fmt_time(tr.resolution_s)}")
        for w in tr.warnings[:5]:
            lines.append(f"  warning: {w}")
    if al is not None:
        unc = f" ± {fmt_time(al.offset_uncertainty_s)}" if al.offset_uncertainty_s is not None else ""
        lines += [
            "",
            f"alignment ({al.method}): {al.device}: {al.anchor} ↔ {al.bus_anchor}",
            f"  offset {al.offset_s:.9f} s{unc} (bus time = offset + (1 + drift) × trace time; zero point: "
            f"{al.zero_point})",
            f"  drift {al.drift_ppm:+.2f} ppm",
            f"  matched {al.matched}; unmatched {al.unmatched_trace} trace / {al.unmatched_bus} bus (where both "
            "recordings overlap)",
            f"  residual p50 {fmt_time(al.residual_p50_s)}, p99 {fmt_time(al.residual_p99_s)} "
            f"(tolerance {fmt_time(al.tolerance_s)})",
        ]
        if al.payload_checked:
            lines.append(f"  payload: traced tx/rx bytes equal MOSI/MISO in {al.payload_agree} of {al.payload_checked} "
                         "windows")
        for n in al.notes:
            lines.append(f"  note: {n}")
    if result["grouping_note"]:
        lines.append(f"grouping: {result['grouping_note']}")
    ph = result["phases"]
    if ph is not None:
        res_t = tr.resolution_s
        lines += ["", f"phases (resolution: bus to bus {fmt_time(a.tick_s)} (one sample); trace to trace "
                      f"{fmt_time(res_t)}; bus to trace {fmt_time(res_t + a.tick_s)}"
                      + (f" plus the offset's ± {fmt_time(al.offset_uncertainty_s)}"
                         if al.offset_uncertainty_s is not None else "") + ")"]
        hdr = (f"{'gap':15s} {'from':26s} {'to':26s} {'n':>7s} {'min':>9s} {'p50':>9s} {'mean':>9s} {'p99':>9s} "
               f"{'max':>9s} {'std':>9s}")
        lines.append(hdr)
        hidden = 0
        for p in ph.phases:
            s = p.stats
            if s["n"] < RARE * ph.segments.get(p.gap, 0):
                hidden += 1
                continue
            lines.append(f"{p.gap:15s} {p.frm:26s} {p.to:26s} {s['n']:>7d} {fmt_time(s['min_s']):>9s} "
                         f"{fmt_time(s['p50_s']):>9s} {fmt_time(s['mean_s']):>9s} {fmt_time(s['p99_s']):>9s} "
                         f"{fmt_time(s['max_s']):>9s} {fmt_time(s['std_s']):>9s}")
        lines.append("gaps split: " + ", ".join(f"{k} {v}" for k, v in ph.segments.items()))
        if hidden:
            lines.append(f"({hidden} phase(s) seen in fewer than {RARE * 100:g} % of their gaps not shown: "
                         "lost events, stray events; --format json lists them)")
    if ph is not None:
        from spigap.output.text import render_device

        # spigap analyze's report, its message grouping from the trace's boundaries
        report = render_device(a).splitlines()
        if "warnings" in report:
            report = report[:report.index("warnings")]
        lines += ["", "analysis with the trace's message boundaries (spigap analyze's report):"] + report
        while lines and not lines[-1].strip():
            lines.pop()
    if result["userlog"] is not None:
        lines += ["", f"user-space log: {result['userlog_path']}"]
        for u in result["userlog"]:
            g = fmt_time(u.granularity_s) if u.granularity_s else "finer than 1 ns"
            ua = u.alignment
            lines.append(f"  {u.column} ↔ {u.bus_anchor}: matched {ua.matched}, drift {ua.drift_ppm:+.2f} ppm, "
                         f"granularity {g}, error vs bus: jitter σ {fmt_time(u.jitter_std_s)}, p99 "
                         f"{fmt_time(u.jitter_p99_s)} (the constant part is not observable: it is in the offset)")
    if transfers:
        rows = _transfers(result)
        lines += ["", f"{'#':>6s} {'start':>14s} {'bits':>5s} {'trace_ts':>16s} {'residual':>10s}"]
        for r in rows[:MAX_TEXT_TRANSFERS]:
            ts = f"{r['trace_ts']:.9f}" if r["trace_ts"] is not None else "–"
            lines.append(f"{r['index']:>6d} {r['start_s']:>14.9f} {r['bits']:>5d} {ts:>16s} "
                         f"{fmt_time(r['residual_s']):>10s}")
        if len(rows) > MAX_TEXT_TRANSFERS:
            lines.append(f"... {len(rows) - MAX_TEXT_TRANSFERS} more (--format json lists all)")
    for w in a.warnings:
        lines.append(f"warning: {w}")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ a shared bus
def shared_dict(result: dict, *, transfers: bool = False) -> dict:
    """JSON of a shared bus's trace: per device its alignment, phases and queueing."""
    st, sa = result["shared"], result["analysis"]
    q = st.queueing(sa)
    d: dict = {"capture": result["capture"], "resolution_s": sa.tick_s, "trace": _trace_dict(st.trace),
               "mapping": {n: dt.spi_device for n, dt in st.devices.items()},
               "tried": {n: dt.tried for n, dt in st.devices.items()}, "unmapped": st.unmapped,
               "notes": st.notes, "devices": {}}
    for name, dt in st.devices.items():
        al = dt.alignment
        d["devices"][name] = {
            "spi_device": dt.spi_device, "alignment": {**al.to_dict(), "notes": list(al.notes)},
            "grouping": dt.phases.grouping_note, "segments": dict(dt.phases.segments),
            "phases": [p.to_dict() for p in dt.phases.phases], "queueing": q[name]}
    if transfers:
        m = st.messages
        d["messages"] = [{"cs": st.names[int(m.cs[i])], "index": int(m.index[i]), "submit_s": float(m.submit[i]),
                          "start_s": float(m.start[i]), "done_s": float(m.done[i]), "queued_s": float(m.queued[i]),
                          "own_s": float(m.own[i]), "behind": [[st.names[j], k] for j, k in m.behind[i]],
                          "first_transfer": int(m.first_window[i]) if m.first_window[i] >= 0 else None}
                         for i in range(len(m.cs))]
    return d


def shared_text(result: dict, *, transfers: bool = False) -> str:
    from spigap.units import fmt_time

    st, sa = result["shared"], result["analysis"]
    tr = st.trace
    lines = [f"capture: {result['capture']}: a shared bus, {len(sa.devices)} devices ("
             + ", ".join(f"{n} {a.n} transfers" for n, a in sa.devices.items()) + ")",
             f"trace: {tr.path} ({tr.source}): {len(tr)} events, timestamps to {fmt_time(tr.resolution_s)}", ""]
    for name, dt in st.devices.items():
        al = dt.alignment
        others = ", ".join(f"{d} {v if isinstance(v, int) else 'no match'}" for d, v in dt.tried.items()
                           if d != dt.spi_device)
        lines.append(f"{name} ↔ {dt.spi_device}: {al.matched} windows matched"
                     + (f" (also tried: {others})" if others else "")
                     + f"; offset {al.offset_s:.9f} s, drift {al.drift_ppm:+.2f} ppm")
    for n in st.notes:
        lines.append(f"note: {n}")
    lines += ["", "who waited for whom (spi_message_submit → spi_message_start: the time another device's message "
                  "held the controller, and the rest)"]
    for name, q in st.queueing(sa).items():
        behind = ", ".join(f"{o} {b['messages']}×" for o, b in q["behind"].items()) or "nobody"
        qq, own, g = q["queued"], q["own_submit_to_start"], q["gap_before_queued"]
        lines.append(f"  {name} ({q['spi_device']}): {q['queued_behind_another']} of {q['messages']} messages "
                     f"waited behind another device's message (behind {behind}); queued p50 {fmt_time(qq['p50_s'])}, "
                     f"max {fmt_time(qq['max_s'])}, {fmt_time(q['queued_total_s'])} in all; own submit→start p50 "
                     f"{fmt_time(own['p50_s'])}")
        if g["n"]:
            lines.append(f"      the {'/'.join(g['kinds'])} gap before a queued message: p50 {fmt_time(g['gap']['p50_s'])}"
                         f" = queued {fmt_time(g['queued']['p50_s'])} + the rest {fmt_time(g['rest']['p50_s'])} "
                         f"(p50s: they need not add up)")
    for name, dt in st.devices.items():
        single = {"capture": result["capture"], "analysis": sa.devices[name], "trace": tr,
                  "alignment": dt.alignment, "phases": dt.phases, "userlog": None, "userlog_path": None,
                  "grouping_note": dt.phases.grouping_note, "sync": None}
        lines += ["", f"=== {name} ({dt.spi_device}) " + "=" * 50]
        body = render_text(single).splitlines()
        lines += [x for x in body[2:] if x and not x.startswith("warning: ")]
    if transfers:
        m = st.messages
        lines += ["", f"{'cs':>6s} {'msg':>6s} {'submit':>14s} {'start':>14s} {'queued':>10s} {'own':>10s}  behind"]
        for i in range(min(len(m.cs), MAX_TEXT_TRANSFERS)):
            lines.append(f"{st.names[int(m.cs[i])]:>6s} {int(m.index[i]):>6d} {m.submit[i]:>14.9f} {m.start[i]:>14.9f} "
                         f"{fmt_time(m.queued[i]):>10s} {fmt_time(m.own[i]):>10s}  "
                         + ", ".join(f"{st.names[j]}#{k}" for j, k in m.behind[i]))
        if len(m.cs) > MAX_TEXT_TRANSFERS:
            lines.append(f"... {len(m.cs) - MAX_TEXT_TRANSFERS} more (--format json lists all)")
    for w in sa.warnings:
        lines.append(f"warning: {w}")
    return "\n".join(lines) + "\n"
