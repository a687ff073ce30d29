"""``spigap analyze CAPTURE``: per-transfer SPI timing of one capture."""

from __future__ import annotations

import sys

from spigap.cli.common import (
    CAPTURE_HELP,
    add_capture_options,
    add_device_option,
    add_event_options,
    add_output_options,
    add_pin_options,
    add_stall_options,
    analysis_options,
    check_output_path,
    config_from_args,
    per_device,
    pin_options,
    pin_requested,
    stall_rule_from_args,
)

ORDER = 10


def add_subparser(sub) -> None:
    p = sub.add_parser("analyze", help="measure every gap of every SPI transfer in a capture",
                       description="Frame SPI transfers from the raw CS/SCLK edges and measure CS "
                                   "setup, CS hold, inter-byte, inter-transfer, cs_change and "
                                   "context-switch gaps (definitions: docs/gaps.md).")
    p.add_argument("capture", nargs="+", help=CAPTURE_HELP + ", or - for standard input (VCD, or raw samples "
                                                            "with --input-format raw; docs/live.md); several "
                                                            "files of one acquisition (a scope's CH1.isf CH2.isf) "
                                                            "are read as one capture")
    add_capture_options(p)
    add_device_option(p, use="label each transfer with its device meaning, decoded by spigap's sigrok "
                             "decoder code (implies --transfers)")
    add_event_options(p)
    add_stall_options(p)
    add_pin_options(p, switch=True)
    o = add_output_options(p, ("text", "json", "csv", "jsonl"))
    o.add_argument("--transfers", action="store_true",
                   help="include every transfer (text: the first 50; json: a 'transfers' list; csv and "
                        "jsonl always have them); implied by --device")
    p.set_defaults(func=run)


def run(args) -> int:
    if len(args.capture) == 1:
        args.capture = args.capture[0]      # one file; a list is one acquisition in several files
    check_output_path(args.output)
    for spec in [args.device] + list(per_device(args, "device").values()):
        if not spec:
            continue
        from spigap.core import labels
        from spigap.timing.check import device_limits

        labels.parse(spec)          # a bad device name fails before the capture is read
        if labels.parse_spec(spec).variant:
            device_limits(spec)     # and so does a variant that does not exist
    from spigap.output.rows import Output

    transfers = args.transfers or bool(args.device) or bool(per_device(args, "device"))
    from spigap.outfile import open_output

    with open_output(args.output) as out:
        o = Output(args.format, out, transfers=transfers)
        # memory bounded past 100 000 transfers (rows written as measured); --device and
        # --event need every transfer (labels per transfer, latencies to each start)
        pins = None
        if pin_requested(args):       # the device's input levels from its file, when it has them
            from spigap.core import labels
            from spigap.timing.check import device_limits

            spec = args.device if args.device and labels.parse_spec(args.device).variant else None
            # a shared bus: each device at its own levels (--device CE0=SPEC)
            by_cs = {cs: _device_default(s) for cs, s in per_device(args, "device").items()}
            pins = pin_options(args, device_limits(spec) if spec else _device_default(args.device), by_cs)
        from spigap.api import analyze_file

        r = analyze_file(args.capture, config_from_args(args), keep="bounded", rows=o.rows if o.streams else None,
                         device=per_device(args, "device") or args.device, stall_rule=stall_rule_from_args(args),
                         pins=pins, **analysis_options(args))
        o.finish(r)
    if r.truncated:
        # the partial results are out; now say what went wrong, as an error
        print(f"spigap: error: {r.truncated}", file=sys.stderr)
        return 2
    return 0


def _device_default(spec):
    """The device file of --device NAME (its default variant), when spigap ships one."""
    if not spec:
        return None
    from spigap.errors import SpigapError
    from spigap.timing.check import device_limits

    try:
        return device_limits(spec)
    except SpigapError:
        return None           # a decoder-only name (mcp3204 ...): no levels
