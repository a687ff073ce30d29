"""``spigap analyze CAPTURE``: per-transfer SPI timing of one capture."""

from __future__ import annotations

import json
import sys

from analyzer.cli.common import (
    CAPTURE_HELP,
    add_capture_options,
    add_device_option,
    add_event_options,
    add_output_options,
    add_stall_options,
    analyze_path,
    check_output_path,
    measure_events,
    stall_rule_from_args,
    write_output,
)

ORDER = 10


def add_subparser(sub) -> None:
    p = sub.add_parser("analyze", help="measure every gap of every SPI transfer in a capture",
                       description="Frame SPI transfers from the raw CS/SCLK edges and measure CS "
                                   "setup, CS hold, inter-byte, inter-transfer, cs_change and "
                                   "context-switch gaps (definitions: docs/gaps.md).")
    p.add_argument("capture", help=CAPTURE_HELP + ", or - for standard input (VCD, or raw samples with "
                                                 "--input-format raw; docs/live.md)")
    add_capture_options(p)
    add_device_option(p, use="label each transfer with its device meaning, decoded by spigap's sigrok "
                             "decoder code (implies --transfers)")
    add_event_options(p)
    add_stall_options(p)
    o = add_output_options(p, ("text", "json", "csv"))
    o.add_argument("--transfers", action="store_true",
                   help="include every transfer (text: the first 50; json: a 'transfers' list); "
                        "implied by --device")
    p.set_defaults(func=run)


def run(args) -> int:
    check_output_path(args.output)
    if args.event and args.capture == "-":
        from analyzer.errors import UsageError

        raise UsageError("--event reads the capture a second time, which a pipe cannot give",
                         path="<stdin>", hint="save the stream to a file and analyze that")
    if args.device:
        from analyzer import devices

        devices.parse(args.device)          # a bad device name fails before the capture is read
        if devices.parse_spec(args.device).variant:
            devices.limits(args.device)     # and so does a variant that does not exist
    a = analyze_path(args.capture, args)
    if args.device:
        a.device = args.device
        a.labels = devices.labels(a, args.device)
    from analyzer.core.stalls import find_stalls

    rule = stall_rule_from_args(args)
    stalls = find_stalls(a, rule)
    events = measure_events(args.capture, a, args)
    if args.format == "json":
        from analyzer.output.jsonout import to_dict

        text = json.dumps(to_dict(a, transfers=args.transfers or bool(args.device), stalls=stalls,
                                  stall_rule=rule, events=events), indent=1) + "\n"
    elif args.format == "csv":
        from analyzer.output import csvout

        text = csvout.render(a)
    else:
        from analyzer.output import text as text_out

        text = text_out.render(a, transfers=args.transfers or bool(args.device), stalls=stalls, stall_rule=rule,
                      events=events)
    write_output(text, args.output)
    if a.truncated:
        # the partial results are out; now say what went wrong, as an error
        print(f"spigap: error: {a.truncated}", file=sys.stderr)
        return 2
    return 0
