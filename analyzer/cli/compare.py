"""``spigap compare --before A.sr [B.sr ...] --after C.sr [D.sr ...]``: did a change help or hurt?"""

from __future__ import annotations

import argparse
import json
import sys

from analyzer.cli.common import add_capture_options, config_from_args, reader_options, write_output

ORDER = 45


def _percent(text):
    t = str(text).strip().rstrip("%").strip()
    try:
        v = float(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a percentage: {text!r} (e.g. 2 or 2%)") from None
    if v < 0:
        raise argparse.ArgumentTypeError("must be >= 0")
    return v / 100.0


def _time(text):
    from analyzer.units import parse_time

    try:
        return parse_time(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_event_options(p) -> None:
    g = p.add_argument_group("extra channels")
    g.add_argument("--event", action="append", default=[], metavar="CHANNEL:EDGE",
                   help="an edge on a non-SPI channel (rise, fall, both), repeatable; the events form a "
                        "chain ending at the next CS assert: --event CONVST:rise --event BUSY:fall "
                        "measures CONVST→BUSY, BUSY→CS and CONVST→CS; each channel also gets its "
                        "interval, period and pulse widths (a toggle pin: --event TOGGLE:both)")


def add_stall_options(p) -> None:
    g = p.add_argument_group("stalls (gaps far above their kind's median)")
    g.add_argument("--stall-sigmas", type=float, default=8.0, metavar="K",
                   help="a stall exceeds the median by more than K robust σ (default 8) ...")
    g.add_argument("--stall-fraction", type=_percent, default=0.5, metavar="PCT",
                   help="... and by more than PCT %% of the median (default 50)")


def add_stats_options(p) -> None:
    g = p.add_argument_group("statistics (docs/compare-and-report.md)")
    g.add_argument("--alpha", type=float, default=0.05,
                   help="family-wise significance level, Holm-corrected over all tests (default 0.05)")
    g.add_argument("--min-rel-effect", type=_percent, default=0.02, metavar="PCT",
                   help="smallest level change that counts, in %% of the before value (default 2)")
    g.add_argument("--min-effect", type=_time, default=0.0, metavar="TIME",
                   help="smallest level change that counts, absolute (e.g. 100ns; default 0; "
                        "never below 2 samples)")
    g.add_argument("--min-rel-jitter", type=_percent, default=0.20, metavar="PCT",
                   help="smallest change of the robust σ that counts, in %% (default 20)")
    g.add_argument("--min-stall-ratio", type=float, default=2.0, metavar="R",
                   help="smallest change of the stall rate that counts, as a ratio (default 2)")
    g.add_argument("--bootstrap", type=int, default=1000, metavar="N", help="bootstrap resamples (default 1000)")
    g.add_argument("--block-length", type=int, default=None, metavar="N",
                   help="block length in values (default: from the autocorrelation)")
    g.add_argument("--seed", type=int, default=0, help="random seed of the bootstrap (default 0)")


def stall_rule_from_args(args):
    from analyzer.core.stalls import StallRule

    return StallRule(k=args.stall_sigmas, rel=args.stall_fraction)


def settings_from_args(args):
    from analyzer.stats.compare import Settings

    return Settings(alpha=args.alpha, min_effect_s=args.min_effect, min_rel_effect=args.min_rel_effect,
                    min_rel_jitter=args.min_rel_jitter, min_stall_ratio=args.min_stall_ratio,
                    n_boot=args.bootstrap, block_length=args.block_length, seed=args.seed,
                    stall_rule=stall_rule_from_args(args))


def load_captures(paths, args, *, cfg=None, events=True):
    """Analyze each path (and measure --event channels); returns stats.compare.Capture objects.

    ``cfg``: the SpiConfig to use (default: from the capture options)."""
    from analyzer.core import analysis
    from analyzer.core.events import measure, parse_event
    from analyzer.io import open_capture
    from analyzer.stats.compare import Capture

    cfg = cfg if cfg is not None else config_from_args(args)
    opts = reader_options(args)
    specs = [parse_event(e) for e in getattr(args, "event", []) or []] if events else []
    out = []
    for path in paths:
        with open_capture(path, **opts) as r:
            a = analysis.run(r, cfg)
        ev = None
        if specs:
            with open_capture(path, **opts) as r:     # a second streaming pass for the extra channels
                ev = measure(r, a, specs)
        out.append(Capture(str(path), a, ev))
    return out


def add_subparser(sub) -> None:
    p = sub.add_parser("compare", help="before vs after: which gap moved, and is it significant?",
                       description="Compare captures taken before and after a change (kernel, patch, "
                                   "config): p50/mean/p99/jitter of every gap kind, the transfer "
                                   "period and rate, stalls and extra-channel latencies, with "
                                   "block-bootstrap intervals, block rank tests (Holm-corrected) and "
                                   "a verdict per metric; attributes the change of the transfer "
                                   "period to the gap kinds.")
    p.add_argument("--before", nargs="+", required=True, metavar="CAPTURE", help="baseline capture(s)")
    p.add_argument("--after", nargs="+", required=True, metavar="CAPTURE", help="capture(s) after the change")
    add_capture_options(p)
    add_event_options(p)
    add_stats_options(p)
    add_stall_options(p)
    o = p.add_argument_group("output")
    o.add_argument("--format", choices=("text", "json"), default="text")
    o.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    o.add_argument("--fail-on", choices=("regression", "change", "never"), default="never",
                   help="exit 1 on any regression (or any significant change); default never")
    p.set_defaults(func=run)


def run(args) -> int:
    from analyzer.stats.compare import compare

    settings = settings_from_args(args)
    before = load_captures(args.before, args)
    after = load_captures(args.after, args)
    cmp = compare(before, after, settings)
    if args.format == "json":
        from analyzer.stats.output import to_dict

        text = json.dumps(to_dict(cmp), indent=1, allow_nan=False) + "\n"
    else:
        from analyzer.stats.output import render_text

        text = render_text(cmp)
    write_output(text, args.output)
    broken = [c for c in before + after if c.analysis.truncated]
    if broken:
        for c in broken:
            print(f"spigap: error: {c.analysis.truncated}", file=sys.stderr)
        return 2
    if args.fail_on == "regression" and cmp.regressions:
        return 1
    if args.fail_on == "change" and (cmp.regressions or cmp.improvements):
        return 1
    return 0


__all__ = ["add_subparser", "run", "load_captures", "add_stats_options", "add_stall_options",
           "add_event_options", "settings_from_args", "stall_rule_from_args"]
