"""``spigap report CAPTURE... -o report.html``: one self-contained HTML report with plots."""

from __future__ import annotations

import sys

from analyzer.cli.common import add_capture_options, config_from_args
from analyzer.cli.compare import (add_event_options, add_stall_options, add_stats_options, load_captures,
                                  settings_from_args, stall_rule_from_args)
from analyzer.errors import UsageError

ORDER = 50


def add_subparser(sub) -> None:
    p = sub.add_parser("report", help="HTML report with histograms, gap timeline, throughput, stalls, "
                                      "check verdicts and before/after overlays",
                       description="Write one self-contained HTML file (plots inline as PNG): per "
                                   "capture a summary, gap statistics, stalls, histograms of every gap "
                                   "kind and of the transfer period (linear and log count), a timeline "
                                   "of the gaps, transfers per second, extra-channel latencies "
                                   "(--event) and the check verdicts (--profile); with --before/--after "
                                   "also the comparison (spigap compare) with overlays.")
    p.add_argument("captures", nargs="*", metavar="CAPTURE", help="capture files (.sr)")
    p.add_argument("-o", "--output", metavar="FILE.html", help="the HTML report")
    p.add_argument("--png", metavar="DIR", help="also write every plot as a PNG file into DIR")
    p.add_argument("--title", default=None, help="report title")
    p.add_argument("--before", nargs="+", default=[], metavar="CAPTURE", help="baseline capture(s) to compare")
    p.add_argument("--after", nargs="+", default=[], metavar="CAPTURE", help="capture(s) after the change")
    c = p.add_argument_group("check (spigap check)")
    c.add_argument("--profile", metavar="NAME|FILE", help="check every capture against this profile")
    c.add_argument("--device", metavar="NAME[@VARIANT]|FILE",
                   help="device datasheet limits (default: the profile's device; 'none' to skip)")
    c.add_argument("--headroom", type=float, default=None, metavar="FRACTION",
                   help="margin a PASS needs (default: spigap check's)")
    c.add_argument("--convst", metavar="NAME", help="CONVST channel for the device checks")
    c.add_argument("--busy", metavar="NAME", help="BUSY channel for the device checks")
    add_capture_options(p)
    add_event_options(p)
    add_stats_options(p)
    add_stall_options(p)
    p.set_defaults(func=run)


def _checker(args):
    """(check function or None, error text or None, analysis config) for --profile.

    Integration point with analyzer.model (spigap check): its
    ``check_analysis(analysis, profile, device, headroom=, events=)`` and
    ``config_for_profile`` are used as they are; if the package is missing,
    the report says so in the check section instead of failing.
    """
    cfg = config_from_args(args)
    if not args.profile:
        return None, None, cfg
    try:
        from analyzer.model import check as model_check
        from analyzer.model.profiles import load_device, load_profile
    except ImportError as e:      # the model package is not part of this build
        return None, f"spigap check is not available in this build ({e}); no verdicts for --profile", cfg
    prof = load_profile(args.profile)
    spec = args.device if args.device is not None else prof.device
    dev = load_device(spec) if spec and str(spec).lower() != "none" else None
    cfg = model_check.config_for_profile(prof, cfg, mode_given=args.mode is not None or args.cpol is not None
                                         or args.cpha is not None,
                                         tpm_given=args.transfers_per_message is not None)
    headroom = model_check.DEFAULT_HEADROOM if args.headroom is None else args.headroom

    def check(path, a):
        events = {}
        if args.convst or args.busy:
            from analyzer.model.events import read_events

            events = read_events(path, {"convst": args.convst, "busy": args.busy},
                                 samplerate=args.samplerate, input_format=args.input_format)
        return model_check.check_analysis(a, prof, dev, headroom=headroom, events=events)

    return check, None, cfg


def run(args) -> int:
    from analyzer.report import Report

    if not args.output and not args.png:
        raise UsageError("give -o FILE.html and/or --png DIR")
    if bool(args.before) != bool(args.after):
        raise UsageError("--before and --after go together")
    paths = list(dict.fromkeys(list(args.captures) + list(args.before) + list(args.after)))
    if not paths:
        raise UsageError("give at least one capture (or --before/--after)")
    check, check_error, cfg = _checker(args)
    # analyze every capture once, with the profile's settings when --profile is given
    caps = {c.path: c for c in load_captures(paths, args, cfg=cfg)}
    title = args.title or ("spigap report: " + ", ".join(paths[:3]) + (" …" if len(paths) > 3 else ""))
    rep = Report(title, stall_rule=stall_rule_from_args(args))
    for p in paths:
        c = caps[str(p)]
        res = check(p, c.analysis) if check is not None else None
        rep.add_capture(c, res, check_error)
    if args.before:
        from analyzer.stats.compare import compare

        cmp = compare([caps[str(p)] for p in args.before], [caps[str(p)] for p in args.after],
                      settings_from_args(args))
        rep.add_comparison(cmp)
    try:
        if args.output:
            with open(args.output, "w", encoding="utf-8") as f:
                f.write(rep.html())
        if args.png:
            rep.write_pngs(args.png)
    except OSError as e:
        raise UsageError(f"cannot write the report: {e.strerror}", path=e.filename) from None
    where = " and ".join(x for x in (args.output, f"{len(rep.images)} PNGs in {args.png}" if args.png else None) if x)
    print(f"wrote {where}: {len(paths)} capture(s), {len(rep.images)} plots", file=sys.stderr)
    broken = [c for c in caps.values() if c.analysis.truncated]
    for c in broken:
        print(f"spigap: error: {c.analysis.truncated}", file=sys.stderr)
    return 2 if broken else 0
