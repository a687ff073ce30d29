"""``spigap analyze CAPTURE``: per-transfer SPI timing of one capture."""

from __future__ import annotations

import json
import sys

from analyzer.cli.common import add_capture_options, config_from_args, reader_options, write_output
from analyzer.cli.compare import add_event_options, add_stall_options, stall_rule_from_args

ORDER = 10


def add_subparser(sub) -> None:
    p = sub.add_parser("analyze", help="measure every gap of every SPI transfer in a capture",
                       description="Frame SPI transfers from the raw CS/SCLK edges and measure CS "
                                   "setup, CS hold, inter-byte, inter-transfer, cs_change and "
                                   "context-switch gaps (definitions: docs/gaps.md).")
    p.add_argument("capture", help="capture file (.sr)")
    add_capture_options(p)
    p.add_argument("--device", metavar="NAME[:KEY=VALUE,...]",
                   help="label each transfer with its device meaning, decoded by spigap's sigrok "
                        "decoder code: mcp3008 (also mcp3004/3204/3208; options vref, part), ad7606 "
                        "(variant, range, dout), mcp2518fd (also mcp2517fd, mcp251863; chip, can_mode)")
    add_event_options(p)
    add_stall_options(p)
    o = p.add_argument_group("output")
    o.add_argument("--format", choices=("text", "json", "csv"), default="text")
    o.add_argument("--transfers", action="store_true",
                   help="include every transfer (text: the first 50; json: a 'transfers' list); "
                        "implied by --device")
    o.add_argument("-o", "--output", metavar="FILE", help="write here instead of stdout")
    p.set_defaults(func=run)


def analyze_path(path, args):
    """Open and analyze one capture with the CLI's options; returns the Analysis."""
    from analyzer.core import analysis
    from analyzer.io import open_capture

    cfg = config_from_args(args)
    if getattr(args, "device", None):
        from analyzer import devices

        cfg.message_lengths = devices.message_lengths(args.device)
    with open_capture(path, **reader_options(args)) as reader:
        return analysis.run(reader, cfg)


def measure_events(path, a, args):
    """--event: a second streaming pass over the capture for the extra channels."""
    from analyzer.core.events import measure, parse_event
    from analyzer.io import open_capture

    specs = [parse_event(e) for e in args.event]
    with open_capture(path, **reader_options(args)) as reader:
        return measure(reader, a, specs)


def run(args) -> int:
    if args.device:
        from analyzer import devices

        devices.parse(args.device)          # a bad device name fails before the capture is read
    a = analyze_path(args.capture, args)
    if args.device:
        a.device = args.device
        a.labels = devices.labels(a, args.device)
    from analyzer.core.stalls import find_stalls

    rule = stall_rule_from_args(args)
    stalls = find_stalls(a, rule)
    events = measure_events(args.capture, a, args) if args.event else None
    if args.format == "json":
        from analyzer.output.jsonout import to_dict

        text = json.dumps(to_dict(a, transfers=args.transfers or bool(args.device), stalls=stalls,
                                  stall_rule=rule, events=events), indent=1) + "\n"
    elif args.format == "csv":
        from analyzer.output.csvout import render

        text = render(a)
    else:
        from analyzer.output.text import render

        text = render(a, transfers=args.transfers or bool(args.device), stalls=stalls, stall_rule=rule,
                      events=events)
    write_output(text, args.output)
    if a.truncated:
        # the partial results are out; now say what went wrong, as an error
        print(f"spigap: error: {a.truncated}", file=sys.stderr)
        return 2
    return 0
