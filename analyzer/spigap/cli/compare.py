"""``spigap compare --before A.sr [B.sr ...] --after C.sr [D.sr ...]``: did a change help or hurt?"""

from __future__ import annotations

import json
import sys

from spigap.cli.common import (
    add_capture_options,
    add_event_options,
    add_output_options,
    add_pin_options,
    add_profile_options,
    add_stall_options,
    add_stats_options,
    add_trace_options,
    pin_time,
    analysis_options,
    check_output_path,
    config_from_args,
    no_per_device,
    pin_options,
    pin_requested,
    settings_from_args,
    write_output,
)

ORDER = 45


def add_subparser(sub) -> None:
    p = sub.add_parser("compare", help="before vs after: which gap moved, and is it significant?",
                       description="Compare captures taken before and after a change (kernel, patch, "
                                   "config): p50/mean/p99/jitter of every gap kind, the transfer "
                                   "period and rate, stalls and extra-channel latencies, with "
                                   "block-bootstrap intervals, block rank tests (Holm-corrected) and "
                                   "a verdict per metric; attributes the change of the transfer "
                                   "period to the gap kinds; with each capture's kernel trace "
                                   "(--before-ftrace/--after-ftrace) the same for every kernel phase "
                                   "of every gap (docs/trace.md).",
                       usage="%(prog)s --before CAPTURE [CAPTURE ...] --after CAPTURE [CAPTURE ...] "
                             "[--before-ftrace FILE ... --after-ftrace FILE ...] [options]")
    p.add_argument("--before", nargs="+", required=True, metavar="CAPTURE",
                   help="baseline capture file(s), any format spigap reads")
    p.add_argument("--after", nargs="+", required=True, metavar="CAPTURE", help="capture(s) after the change")
    add_capture_options(p)
    add_profile_options(p, use="analyze both sides with its SPI settings (mode, transfers per "
                               "message, word size), as 'spigap check' does")
    add_event_options(p)
    add_stats_options(p)
    add_stall_options(p)
    add_trace_options(p, pairs=True)
    g = add_pin_options(p, switch=True, sample_delay=False)
    g.add_argument("--device", dest="pin_device", metavar="NAME[@VARIANT]",
                   help="with --pins: the device whose input levels (VIL/VIH) the pins are measured at")
    for side in ("before", "after"):
        g.add_argument(f"--{side}-rx-sample-delay", type=pin_time, default=0.0, metavar="TIME",
                       help=f"with --pins: the controller's MISO sample delay on the {side} side "
                            "(rx-sample-delay-ns: the bus does not show it)")
    o = add_output_options(p, ("text", "json"))
    o.add_argument("--fail-on", choices=("regression", "change", "never"), default="never",
                   help="exit 1 on any regression (or any significant change); default never")
    p.set_defaults(func=run)


def run(args) -> int:
    from spigap.stats.compare import compare_all

    from spigap.errors import UsageError

    check_output_path(args.output)
    if bool(args.before_ftrace) != bool(args.after_ftrace):
        raise UsageError("--before-ftrace and --after-ftrace go together: phases are compared between "
                         "traced captures on both sides")
    if (args.spi_device or args.cs_latency is not None) and not args.before_ftrace:
        raise UsageError("--spi-device and --cs-latency apply to the traces: give --before-ftrace/--after-ftrace")
    settings = settings_from_args(args)
    no_per_device(args, "profile")
    prof = None
    if args.profile:
        from spigap.timing.profiles import load_profile

        prof = load_profile(args.profile)
    cfg = config_from_args(args, prof)
    traced = bool(args.before_ftrace)
    pins_b = pins_a = None
    if pin_requested(args) or args.before_rx_sample_delay or args.after_rx_sample_delay:
        import dataclasses

        from spigap.timing.check import device_limits

        popts = pin_options(args, device_limits(args.pin_device) if args.pin_device else None)
        pins_b = dataclasses.replace(popts, rx_sample_delay=args.before_rx_sample_delay)
        pins_a = dataclasses.replace(popts, rx_sample_delay=args.after_rx_sample_delay)
    from spigap.api import attach_traces, load_captures

    opts = dict(analysis_options(args), stall_rule=settings.stall_rule)
    before = load_captures(args.before, cfg, traces=traced, pins=pins_b, **opts)
    after = load_captures(args.after, cfg, traces=traced, pins=pins_a, **opts)
    if (args.before_ftrace or args.event) and any(c.result.bus is not None for c in before + after):
        raise UsageError("--before-ftrace/--after-ftrace and --event take one device: the captures hold several "
                         "devices on one bus; give --cs NAME")
    tr = dict(spi_device=args.spi_device, cs_latency=args.cs_latency)
    attach_traces(before, args.before_ftrace, **tr, option="--before-ftrace", captures="--before")
    attach_traces(after, args.after_ftrace, **tr, option="--after-ftrace", captures="--after")
    cmp = compare_all(before, after, settings)
    from spigap.stats.output import render_text, to_dict

    if args.format == "json":
        doc = to_dict(cmp)
        if pins_b is not None:
            from spigap.pins import compare as pin_compare

            doc["pins"] = pin_compare.to_dict(_pins(before), _pins(after))
        text = json.dumps(doc, indent=1, allow_nan=False) + "\n"
    else:
        text = render_text(cmp)
        if pins_b is not None:
            from spigap.pins import compare as pin_compare

            text += "\n" + pin_compare.render_text(_pins(before), _pins(after))
    write_output(text, args.output)
    return _exit_code(args, before + after, cmp)


def _pins(side: list) -> list:
    """The pin measurements of one side's captures (--pins: each capture's measured device)."""
    return [a.pins for c in side for a in c.result.devices.values() if a.pins is not None]


def _exit_code(args, captures, cmp) -> int:
    """2 when a capture was cut short (each says where), 1 when ``--fail-on`` is met by the
    comparison's regressions/improvements (one device's or a shared bus's), else 0."""
    broken = [c for c in captures if c.result.truncated]
    for c in broken:
        print(f"spigap: error: {c.result.truncated}", file=sys.stderr)
    if broken:
        return 2
    if args.fail_on == "regression" and cmp.regressions:
        return 1
    if args.fail_on == "change" and (cmp.regressions or cmp.improvements):
        return 1
    return 0
