"""``spigap bench``: time spigap and sigrok-cli side by side (results go in BENCHMARKS.md)."""

from __future__ import annotations

import pathlib
import sys

from spigap.cli.common import (
    add_output_options,
    check_output_path,
    count,
    positive_float,
    write_output,
)

ORDER = 90


def _samples(text):
    v = positive_float(text)
    if v < 1000:
        import argparse

        raise argparse.ArgumentTypeError("must be >= 1000")
    return v


def _big_samples(text):
    return 0.0 if text.strip() in ("0", "0.0") else _samples(text)


def add_subparser(sub) -> None:
    p = sub.add_parser("bench", help="time spigap against sigrok-cli on the same captures",
                       description="Synthesize (once, cached) a dense MCP3008-like capture and time "
                                   "'spigap analyze' and 'sigrok-cli -P spi' on it in one run; also a "
                                   "large capture for throughput and, with --real, a real capture.")
    p.add_argument("--samples", type=_samples, default=20e6, metavar="N",
                   help="samples of the dense capture (default 20e6)")
    p.add_argument("--big-samples", type=_big_samples, default=200e6, metavar="N",
                   help="samples of the throughput capture (default 200e6; 0 to skip)")
    p.add_argument("--real", metavar="CAPTURE.sr",
                   help="also time a real capture (e.g. captures/real/"
                        "spi__enc28j60__enc28j60-init-and-ping.sr)")
    p.add_argument("--trace-events", type=_big_samples, default=1e6, metavar="N",
                   help="also time the trace path: parse + align (+ phases) a synthesized ftrace of about N "
                        "events beside its capture's analysis (default 1e6; 0 to skip)")
    p.add_argument("--shared-samples", type=_big_samples, default=0.0, metavar="N",
                   help="also a dense shared-bus capture of N samples: 2 devices (CE0, CE1) on one SCLK, "
                        "sigrok-cli with one spi decoder per CS line (with --sigrok-big), e.g. 200e6")
    p.add_argument("--repeat", type=count, default=3, metavar="N", help="spigap runs per capture (median is reported)")
    p.add_argument("--no-sigrok", action="store_true", help="skip sigrok-cli")
    p.add_argument("--sigrok-big", action="store_true",
                   help="also run sigrok-cli on the large capture (about a minute)")
    p.add_argument("--stages", action="store_true",
                   help="instead: where the time goes on the large capture (and --real): inflate, change scan "
                        "and framing on one core, streaming, analysis and start-up")
    add_output_options(p, ("text", "markdown"))
    p.set_defaults(func=run)


def run(args) -> int:
    from spigap import bench

    check_output_path(args.output)
    real = pathlib.Path(args.real) if args.real else None
    if real is not None and not real.exists():
        from spigap.errors import UsageError

        raise UsageError(f"no such capture: {real}")
    if args.stages:
        def log(m):
            print(m, file=sys.stderr)

        cases = [(bench.dense_capture(args.big_samples or args.samples, log)[0],
                  {"clk": "SCLK", "cs": "CS", "mosi": "MOSI", "miso": "MISO"})]
        if real is not None:
            cases.append((real, {"clk": "CLK", "cs": "CS", "mosi": "MOSI", "miso": "MISO"}))
        srows = []
        for path, roles in cases:
            log(f"bench: stages of {path.name} ...")
            srows.append(bench.stages(path, roles, args.repeat))
        write_output(bench.render_stages(srows, args.format), args.output)
        return 0
    rows = bench.run(args.samples, args.big_samples, real, args.repeat, not args.no_sigrok,
                     args.sigrok_big, log=lambda m: print(m, file=sys.stderr), shared_samples=args.shared_samples)
    text = bench.render(rows, args.format)
    if args.trace_events:
        text += "\n" + bench.render_trace(bench.trace_case(args.trace_events, log=lambda m: print(m, file=sys.stderr)),
                                          args.format)
    write_output(text, args.output)
    return 0
