"""``spigap check CAPTURE... --profile NAME [--device mcp3008@5V]``: PASS / MARGINAL / FAIL."""

from __future__ import annotations

import json
import sys

from analyzer.cli.common import add_capture_options, config_from_args, write_output
from analyzer.errors import UsageError

ORDER = 40


def _fraction(text):
    import argparse

    try:
        v = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a fraction: {text!r} (e.g. 0.1 or 10%)") from None
    if not 0 <= v < 1:
        raise argparse.ArgumentTypeError("must be in [0, 1) (e.g. 0.1 or 10%)")
    return v


def add_subparser(sub) -> None:
    p = sub.add_parser(
        "check", help="check captures against a kernel/platform profile and device datasheet limits",
        description="Measure each capture and compare every figure the profile expects (p50 and p99 "
                    "of each gap kind, SCLK, the timing model's transfer time and rate) and every "
                    "device limit (on every transfer) with PASS / MARGINAL / FAIL. Every measured "
                    "figure is ±1 sample: within one sample of a bound is MARGINAL, beyond it FAIL "
                    "(docs/timing-model.md). Exit status: 0 no FAIL, 1 any FAIL, 2 error.")
    p.add_argument("captures", nargs="*", metavar="CAPTURE", help="capture files (.sr)")
    p.add_argument("--profile", metavar="NAME|FILE",
                   help="shipped profile name (see --list) or a profile .toml file")
    p.add_argument("--device", metavar="NAME[@VARIANT]|FILE",
                   help="device datasheet limits, e.g. mcp3008@5V, mcp3008@2.7V, ad7606, mcp2518fd "
                        "(default: the profile's device; 'none' to skip)")
    p.add_argument("--headroom", type=_fraction, default=None, metavar="FRACTION",
                   help="margin a PASS needs, as a fraction of the tolerance band's half-width or of "
                        "a one-sided bound (default 0.1 = 10%%)")
    p.add_argument("--strict", action="store_true", help="MARGINAL counts as a failure (exit 1)")
    p.add_argument("--list", action="store_true", help="list the shipped profiles and devices and exit")
    add_capture_options(p)
    e = p.add_argument_group("extra channels (device checks that the SPI lines cannot show)")
    e.add_argument("--convst", metavar="NAME", help="CONVST channel (AD7606: conversion period)")
    e.add_argument("--busy", metavar="NAME", help="BUSY channel (AD7606: no SCLK on BUSY falling)")
    o = p.add_argument_group("output")
    o.add_argument("--format", choices=("text", "json", "junit"), default="text")
    o.add_argument("-v", "--verbose", action="store_true", help="text: explain every check, with sources")
    o.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    p.set_defaults(func=run)


def list_text() -> str:
    from analyzer.model.profiles import list_devices, list_profiles

    lines = ["profiles (--profile NAME):"]
    for prof in list_profiles():
        lines.append(f"  {prof.name:28s} {prof.title}")
    lines.append("")
    lines.append("devices (--device NAME[@VARIANT]):")
    for dev in list_devices():
        lines.append(f"  {dev.spec:28s} {dev.title}")
    return "\n".join(lines) + "\n"


def run(args) -> int:
    from analyzer.core import analysis
    from analyzer.io import open_capture
    from analyzer.model.check import DEFAULT_HEADROOM, check_analysis, config_for_profile, results_to_dict
    from analyzer.model.events import read_events
    from analyzer.model.profiles import load_device, load_profile

    if args.list:
        write_output(list_text(), args.output)
        return 0
    if not args.profile:
        raise UsageError("--profile NAME|FILE is required (spigap check --list shows the shipped ones)")
    if not args.captures:
        raise UsageError("give at least one capture file")
    prof = load_profile(args.profile)
    spec = args.device if args.device is not None else prof.device
    dev = load_device(spec) if spec and spec.lower() != "none" else None
    headroom = DEFAULT_HEADROOM if args.headroom is None else args.headroom
    cfg = config_for_profile(prof, config_from_args(args), mode_given=args.mode is not None
                             or args.cpol is not None or args.cpha is not None,
                             tpm_given=args.transfers_per_message is not None)
    channels = {"convst": args.convst, "busy": args.busy}
    results = []
    truncated = []
    for path in args.captures:
        with open_capture(path, input_format=args.input_format, samplerate=args.samplerate) as reader:
            a = analysis.run(reader, cfg)
        events = read_events(path, channels, samplerate=args.samplerate,
                             input_format=args.input_format) if any(channels.values()) else {}
        res = check_analysis(a, prof, dev, headroom=headroom, events=events)
        if not any(i.verdict != "SKIP" for i in res.items):
            raise UsageError(f"nothing in profile {prof.name!r} applies to this capture (every check "
                             "was skipped)", path=path, hint="check the channel mapping and the profile")
        if a.truncated:
            truncated.append(a.truncated)
        results.append(res)
    if args.format == "json":
        text = json.dumps(results_to_dict(results), indent=1) + "\n"
    elif args.format == "junit":
        from analyzer.model.render import check_junit

        text = check_junit(results, strict=args.strict)
    else:
        from analyzer.model.render import check_text

        text = check_text(results, verbose=args.verbose)
    write_output(text, args.output)
    for t in truncated:
        print(f"spigap: error: {t}", file=sys.stderr)
    if truncated:
        return 2
    return 1 if any(r.failed(args.strict) for r in results) else 0
