"""``spigap monitor CAPTURE|-``: transfers and gaps per interval of capture time, live.

The logic is in analyzer/spigap/core/monitor.py; this module parses options and
prints (docs/live.md).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from spigap.cli.common import (_time, add_capture_options, add_stall_options, config_from_args, reader_options,
                                 stall_rule_from_args)

ORDER = 15
HEADER_EVERY = 20          # on a terminal the column header comes back every 20 lines
# one line per interval: at most 10 000 a second of capture; one interval a day at the most
MIN_INTERVAL_S, MAX_INTERVAL_S = 100e-6, 86400.0
# an interval's start in the table and the alert: 6 digits tell 100 µs intervals apart up
# to 10 s, 1 s intervals for 11 days (units.fmt_time's default 4 would merge them)
T_DIGITS = 6


def _interval(text):
    import argparse

    v = _time(text)
    if not MIN_INTERVAL_S <= v <= MAX_INTERVAL_S:
        raise argparse.ArgumentTypeError(f"must be {MIN_INTERVAL_S * 1e6:g}us .. {MAX_INTERVAL_S:g}s "
                                         "(one line is printed per interval)")
    return v


def add_subparser(sub) -> None:
    p = sub.add_parser("monitor", help="transfers/s and gap percentiles per interval, from a file or live from a pipe",
                       description="Stream a capture (a file, or - for standard input: sigrok-cli -O vcd, or raw "
                                   "samples with --input-format raw) and print one line per interval of capture "
                                   "time: transfers, transfers/s, p50/p99/max of each gap kind, stalls. End of "
                                   "input, Ctrl-C, SIGTERM or SIGHUP prints the whole-capture summary (then "
                                   "SIGTERM exits 143, SIGHUP 129; docs/live.md).")
    p.add_argument("capture", help="capture file, or - for standard input")
    add_capture_options(p)
    add_stall_options(p)
    o = p.add_argument_group("monitor")
    o.add_argument("--interval", type=_interval, default=1.0, metavar="TIME",
                   help="capture time per line (default 1s)")
    o.add_argument("--format", choices=("text", "jsonl"), default="text",
                   help="text: a table (header repeated on a terminal); jsonl: one JSON object per interval, "
                        "then {\"summary\": ...}")
    o.add_argument("--alert", action="append", default=[], metavar="RULE",
                   help="exit 1 at the first interval where RULE holds, e.g. 'context_switch.p99>50us', "
                        "'cs_change.max>=1ms', 'rate_hz<2000', 'stalls>0' (repeatable)")
    p.set_defaults(func=run)


def run(args) -> int:
    from spigap import stopping
    from spigap.core.monitor import parse_alert
    from spigap.errors import OutputError

    alerts = [parse_alert(a) for a in args.alert]
    cfg = config_from_args(args)
    # Ctrl-C, SIGTERM and SIGHUP end the monitoring alike: the intervals so far and the
    # summary written whole, the source closed; then Ctrl-C is the normal end (exit 0),
    # SIGTERM/SIGHUP say so and exit 143/129 as every command does (cli/__init__.py)
    with stopping.Ending() as ending:
        try:
            rc = _monitor(args, cfg, alerts, ending)
        except (KeyboardInterrupt, OutputError, BrokenPipeError):
            # a second signal, or the output gone with the terminal or the pipeline that was
            # stopped: the first stop signal is why
            if ending.stopped is None:
                raise
            raise ending.stopped from None
    if ending.stopped is not None:
        raise ending.stopped
    return rc


def _monitor(args, cfg, alerts, ending) -> int:
    from spigap.core.monitor import Monitor
    from spigap.core.pipeline import Pipeline
    from spigap.io import open_capture

    out = sys.stdout
    with open_capture(args.capture, **reader_options(args)) as reader:
        pipe = Pipeline(reader, cfg)
        # one line per interval; a shared bus's with each device's figures (a section per device)
        printer: Any = _Jsonl(out) if args.format == "jsonl" else _Text(out, out.isatty(), bus=len(pipe.lanes) > 1)
        m = Monitor(reader, cfg, args.interval, rule=stall_rule_from_args(args), alerts=alerts,
                    on_interval=printer.interval, on_baseline=printer.baseline, pipe=pipe, ending=ending)
        summary = m.run()
        for w in reader.info.warnings:
            print(f"spigap: warning: {w}", file=sys.stderr)
        for w in m.warnings:
            print(f"spigap: warning (in the baseline, the first interval): {w}", file=sys.stderr)
    printer.summary(summary)
    if m.alert is not None:
        iv = m.alert.interval
        from spigap.units import fmt_time

        al = m.alert.alert
        shown = fmt_time(m.alert.value) if al.stat in ("p50", "p99", "max") else f"{m.alert.value:g}"
        print(f"spigap: alert: {al.text}: {shown} in the interval at t = {fmt_time(iv['t_s'], T_DIGITS)} "
              f"({fmt_time(iv['t_s'], T_DIGITS)} .. {fmt_time(iv['t_s'] + iv['interval_s'], T_DIGITS)} of the "
              "capture)", file=sys.stderr)
        return 1
    if m.truncated:
        print(f"spigap: error: {m.truncated}", file=sys.stderr)
        return 2
    return 0


class _Jsonl:
    """One JSON object per interval (a shared bus: ``devices: {CE0: {...}, CE1: {...}}``),
    then ``{"summary": ...}``."""

    def __init__(self, out):
        self.out = out

    def baseline(self, m) -> None:
        pass

    def interval(self, iv: dict) -> None:
        self.out.write(json.dumps(iv) + "\n")
        self.out.flush()

    def summary(self, s: dict) -> None:
        self.out.write(json.dumps({"summary": s}) + "\n")
        self.out.flush()


class _Text:
    """Columns: interval start, then per device its transfers, rate, p50/p99 of gap kinds
    and stalls. One device: every gap kind its baseline had (jsonl carries every kind), the
    header repeated on a terminal; a shared bus (``bus``): per device its context-switch
    (or the first CS-inactive kind its baseline had) p50/p99."""

    def __init__(self, out, tty: bool, *, bus: bool = False):
        self.out = out
        self.tty = tty
        self.bus = bus
        self.kinds: dict = {}       # device (its CS line) -> the gap kinds of its columns
        self.rows = 0

    def baseline(self, m) -> None:
        from spigap.units import fmt_time

        cs = m.cfg.cs
        if self.bus:
            kinds = [k for k in ("context_switch", "cs_change") if k in m.baseline_kinds] or m.baseline_kinds or m.kinds[:1]
            self.kinds[cs] = kinds[:1]
        else:
            self.kinds[cs] = m.baseline_kinds or m.kinds[:1]
        g = f"; {m.grouping.note}" if m.grouping is not None else ""
        where = f"{m.info.path} [{cs}]" if self.bus else m.info.path
        self._line(f"# {where}: one line per {fmt_time(m.iv_ticks * m.tick_s)} of capture time, "
                   f"resolution {fmt_time(m.tick_s)} (one sample){g}")

    def _header(self, devices: list[str]) -> str:
        if self.bus:
            cells = "".join(f" | {cs + ' n':>8s} {'rate':>10s} {self.kinds.get(cs, ['?'])[0][:14] + ' p50/p99':>23s} "
                            f"{'stalls':>6s}" for cs in devices)
            return f"{'t':>10s}{cells}"
        cells = "".join(f" {k + ' p50/p99':>23s}" for k in next(iter(self.kinds.values()), []))
        return f"{'t':>10s} {'transfers':>9s} {'rate':>10s}{cells} {'stalls':>6s}"

    def interval(self, iv: dict) -> None:
        from spigap.units import fmt_rate, fmt_time

        devices: dict = iv["devices"] if self.bus else {None: iv}
        if self.rows == 0 or (not self.bus and self.tty and self.rows % HEADER_EVERY == 0):
            self._line(self._header(list(devices)))
        cells = ""
        for cs, d in devices.items():
            kinds = self.kinds.get(cs, [""]) if self.bus else next(iter(self.kinds.values()), [])
            gaps = ""
            for k in kinds:
                g = d["gaps"].get(k, {"n": 0})
                cell = f"{fmt_time(g['p50_s'], 3)}/{fmt_time(g['p99_s'], 3)}" if g["n"] else "–"
                gaps += f" {cell:>23s}"
            if self.bus:
                cells += f" | {d['transfers']:>8d} {fmt_rate(d['rate_hz']):>10s}{gaps} {d['stalls']:>6d}"
            else:
                cells += f" {d['transfers']:>9d} {fmt_rate(d['rate_hz']):>10s}{gaps} {d['stalls']:>6d}"
        self._line(f"{fmt_time(iv['t_s'], T_DIGITS):>10s}{cells}")
        self.rows += 1

    def summary(self, s: dict) -> None:
        from spigap.units import fmt_rate, fmt_time

        state = ""
        if s["interrupted"]:
            state = " (interrupted)" if s.get("signal") in (None, "SIGINT") else f" (stopped by {s['signal']})"
        state += " (stopped by the alert)" if s["alert"] else ""
        self._line("")
        if not self.bus:
            self._line(f"summary{state}: {s['intervals']} interval(s), {fmt_time(s['duration_s'])} of capture, "
                       f"{s['transfers']} transfers ({fmt_rate(s['rate_hz'])}), {s['stalls']} stall(s); "
                       f"resolution {fmt_time(s['resolution_s'])}")
            self._line(f"{'gap':16s} {'n':>9s} {'p50':>10s} {'p99':>10s} {'max':>10s}")
            for k, g in s["gaps"].items():
                self._line(f"{k:16s} {g['n']:>9d} {fmt_time(g['p50_s']):>10s} {fmt_time(g['p99_s']):>10s} "
                           f"{fmt_time(g['max_s']):>10s}")
            return
        self._line(f"summary{state}: {s['intervals']} interval(s), {fmt_time(s['duration_s'])} of capture; "
                   f"resolution {fmt_time(s['resolution_s'])}")
        for cs, d in s["devices"].items():
            self._line(f"{cs}: {d['transfers']} transfers ({fmt_rate(d['rate_hz'])}), {d['stalls']} stall(s)")
            for k, g in d["gaps"].items():
                if g["n"]:
                    self._line(f"  {k:16s} {g['n']:>9d} p50 {fmt_time(g['p50_s']):>10s} p99 "
                               f"{fmt_time(g['p99_s']):>10s} max {fmt_time(g['max_s']):>10s}")

    def _line(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()
