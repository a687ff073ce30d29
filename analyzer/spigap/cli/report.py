"""``spigap report CAPTURE... -o report.html``: one self-contained HTML report with plots."""

from __future__ import annotations

import sys

from spigap.cli.common import (
    CAPTURE_HELP,
    add_capture_options,
    add_check_options,
    add_event_options,
    add_pin_options,
    add_stall_options,
    add_stats_options,
    add_trace_options,
    analysis_options,
    check_output_path,
    config_from_args,
    pin_options,
    pin_requested,
    rx_requirement,
    no_per_device,
    settings_from_args,
    stall_rule_from_args,
    write_output,
)
from spigap.errors import UsageError, printable

ORDER = 50


def add_subparser(sub) -> None:
    p = sub.add_parser("report", help="HTML report with histograms, gap timeline, throughput, stalls, "
                                      "check verdicts and before/after overlays",
                       description="Write one self-contained HTML file (plots inline as PNG): per "
                                   "capture a summary, gap statistics, stalls, histograms of every gap "
                                   "kind and of the transfer period (linear and log count), a timeline "
                                   "of the gaps, transfers per second, extra-channel latencies "
                                   "(--event) and the check verdicts (--profile); with --before/--after "
                                   "also the comparison (spigap compare) with overlays; with kernel traces "
                                   "(--ftrace, --before-ftrace/--after-ftrace) a phase section per capture "
                                   "and the phases before vs after.")
    p.add_argument("captures", nargs="*", metavar="CAPTURE", help=CAPTURE_HELP + "; repeatable")
    p.add_argument("--before", nargs="+", default=[], metavar="CAPTURE", help="baseline capture(s) to compare")
    p.add_argument("--after", nargs="+", default=[], metavar="CAPTURE", help="capture(s) after the change")
    add_capture_options(p)
    add_check_options(p, use="check every capture against it (the verdicts of 'spigap check')")
    add_event_options(p)
    add_stats_options(p)
    add_stall_options(p)
    add_trace_options(p, ftrace="many", pairs=True)
    add_pin_options(p, switch=True)
    o = p.add_argument_group("output")
    o.add_argument("--format", choices=("html",), default="html",
                   help="output format: html, one self-contained file with the plots inline (the only one)")
    o.add_argument("-o", "--output", metavar="FILE.html", help="the HTML report")
    o.add_argument("--png", metavar="DIR", help="also write every plot as a PNG file into DIR")
    o.add_argument("--title", default=None, help="report title (default: 'spigap report: ' and the captures)")
    p.set_defaults(func=run)


def _checker(args):
    """(check function or None, analysis config) for --profile/--device."""
    from spigap.timing.check import device_limits

    prof = None
    if args.profile:
        from spigap.timing.profiles import load_profile

        prof = load_profile(args.profile)
    cfg = config_from_args(args, prof)
    spec = args.device if args.device is not None else (prof.device if prof else None)
    dev = device_limits(spec)
    args.pin_dev = dev               # the device's input levels and pin limits (run: the pin measurement)
    if prof is None and dev is None:
        return None, cfg
    from spigap.timing import check as timing_check
    from spigap.timing.extra_channels import tracks

    headroom = timing_check.DEFAULT_HEADROOM if args.headroom is None else args.headroom

    def check(r):
        # the --event channels' edges, from the analysis's own pass
        return timing_check.check_analysis(r.device.kept(), prof, dev, headroom=headroom,
                                           events=tracks(r.edges, args.event), rx=rx_requirement(args),
                                           margin=args.pin_margin)

    return check, cfg



def run(args) -> int:
    from spigap.report import Report

    if not args.output and not args.png:
        raise UsageError("give -o FILE.html and/or --png DIR")
    if bool(args.before) != bool(args.after):
        raise UsageError("--before and --after go together")
    paths = list(dict.fromkeys(list(args.captures) + list(args.before) + list(args.after)))
    if not paths:
        raise UsageError("give at least one capture (or --before/--after)")
    check_output_path(args.output)
    no_per_device(args, "profile", "device")
    check, cfg = _checker(args)
    from spigap.io.combine import group_acquisitions

    # a scope's files of one acquisition (tek0000CH1.isf ... CH4.isf) are one capture
    key = {p: " + ".join(g) for g in group_acquisitions([str(x) for x in paths]) for p in g}
    args.captures, args.before, args.after = ([key[str(x)] for x in dict.fromkeys(str(y) for y in ps)]
                                              for ps in (args.captures, args.before, args.after))
    args.captures, args.before, args.after = (list(dict.fromkeys(ps)) for ps in (args.captures, args.before,
                                                                                 args.after))
    groups = {" + ".join(g): g for g in group_acquisitions([str(x) for x in paths])}
    paths = list(groups)
    dev = getattr(args, "pin_dev", None)
    pins = pin_options(args, dev) if pin_requested(args) or (dev is not None and dev.electrical) else None
    # analyze every capture once, with the profile's settings when --profile is given
    from spigap.api import attach_traces, load_captures

    caps = {c.path: c for c in load_captures([groups[p] for p in paths], cfg,
                                             traces=bool(args.ftrace or args.before_ftrace),
                                             stall_rule=stall_rule_from_args(args), pins=pins,
                                             **analysis_options(args))}
    if bool(args.before_ftrace) != bool(args.after_ftrace):
        raise UsageError("--before-ftrace and --after-ftrace go together")
    if (args.spi_device or args.cs_latency is not None) and not (args.ftrace or args.before_ftrace):
        raise UsageError("--spi-device and --cs-latency apply to the traces: give --ftrace or "
                         "--before-ftrace/--after-ftrace")
    shared = [c for c in caps.values() if c.result.bus is not None]
    if shared and (check is not None or args.ftrace or args.before_ftrace or args.event):
        raise UsageError(f"{shared[0].path} holds several devices on one bus: --profile/--device, traces and "
                         "--event take one device here: give --cs NAME (spigap check --profile CE0=... and spigap "
                         "trace take every device)")
    tr = dict(spi_device=args.spi_device, cs_latency=args.cs_latency)
    attach_traces([caps[str(p)] for p in args.captures], args.ftrace, **tr, option="--ftrace", captures="positional")
    attach_traces([caps[str(p)] for p in args.before], args.before_ftrace, **tr, option="--before-ftrace",
                  captures="--before")
    attach_traces([caps[str(p)] for p in args.after], args.after_ftrace, **tr, option="--after-ftrace",
                  captures="--after")
    title = args.title or ("spigap report: " + ", ".join(paths[:3]) + (" …" if len(paths) > 3 else ""))
    rep = Report(title, stall_rule=stall_rule_from_args(args))
    for p in paths:
        c = caps[str(p)]
        # a shared bus: its section, then each device as a capture of its own
        rep.add(c, check(c.result) if check is not None and c.result.bus is None else None)
    if args.before:
        from spigap.stats.compare import compare_all

        before, after = [caps[str(p)] for p in args.before], [caps[str(p)] for p in args.after]
        rep.add_comparison(compare_all(before, after, settings_from_args(args)))
    if args.output:
        write_output(rep.html(), args.output)      # whole or not at all (outfile.py)
    if args.png:
        rep.write_pngs(args.png)
    where = " and ".join(x for x in (args.output, f"{len(rep.images)} PNGs in {args.png}" if args.png else None) if x)
    print(f"wrote {where}: {len(paths)} capture(s), {len(rep.images)} plots", file=sys.stderr)
    if rep.missing_glyphs:
        print(f"spigap: warning: the plots' font has no glyph for {printable(' '.join(sorted(rep.missing_glyphs)))} "
              "(drawn as boxes in the plots; the HTML text shows them)", file=sys.stderr)
    broken = [c for c in caps.values() if c.result.truncated]
    for c in broken:
        print(f"spigap: error: {c.result.truncated}", file=sys.stderr)
    return 2 if broken else 0
