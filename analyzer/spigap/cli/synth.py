"""``spigap synth``: write a capture with known truth from a timing description."""

from __future__ import annotations

from spigap.cli.common import (
    _freq,
    _time,
    _wordsize,
    nonneg_float,
    check_output_path,
    count,
    fraction,
)
from spigap.errors import UsageError


def _as_text(check):
    """Check a value on the command line but pass the text on: the scenario parses it."""
    def parse(text):
        check(text)
        return text
    return parse


# flag -> scenario key (flags override the TOML file)
FLAGS = {
    "samplerate": "samplerate", "sclk": "sclk", "mode": "mode", "wordsize": "wordsize",
    "bitorder": "bitorder", "cs_polarity": "cs_polarity", "bytes": "words_per_transfer",
    "transfers_per_message": "transfers_per_message", "messages": "messages",
    "cs_setup": "cs_setup", "cs_hold": "cs_hold", "idle_clocks": "idle_clocks",
    "inter_transfer": "inter_transfer", "cs_change": "cs_change",
    "context_switch": "context_switch", "jitter": "sigma", "stall_probability": "stall_probability",
    "seed": "seed", "mosi": "mosi", "miso": "miso",
}

ORDER = 20


def add_subparser(sub) -> None:
    p = sub.add_parser("synth", help="synthesize a .sr capture with known timing (ground truth)",
                       description="Write a libsigrok-compatible .sr capture from a timing "
                                   "description: a TOML recipe (--config; one device timed by its "
                                   "gaps, analyzer/spigap/synth/scenario.py, or devices on one "
                                   "controller, [[device]] tables, analyzer/spigap/synth/bus.py; "
                                   "examples in captures/*.toml) and/or flags. "
                                   "Times take units (1.6us, 250ns), rates too (3.6MHz).")
    p.add_argument("-o", "--output", metavar="FILE.sr", help="the capture to write (required)")
    p.add_argument("--config", metavar="FILE.toml", help="scenario description")
    p.add_argument("--truth", metavar="FILE.json", help="also write the ground truth as JSON")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="set any scenario key, e.g. --set segments=1,2 (repeatable)")
    p.add_argument("--device", metavar="NAME[:KEY=VALUE,...]",
                   help="device traffic with known content (e.g. mcp3008-adc:channel=3); "
                        "see --list-devices")
    p.add_argument("--list-devices", action="store_true", help="list device generators and exit")
    g = p.add_argument_group("scenario (override the TOML)")
    g.add_argument("--samplerate", type=_as_text(_freq), metavar="HZ", help="sample rate, e.g. 50MHz")
    g.add_argument("--sclk", type=_as_text(_freq), metavar="HZ", help="SCLK frequency, e.g. 3.6MHz")
    g.add_argument("--mode", type=int, choices=range(4), help="SPI mode 0..3")
    g.add_argument("--wordsize", type=_wordsize, metavar="N", help="bits per word, 1..64")
    g.add_argument("--bitorder", choices=("msb", "lsb"), help="bit order on the wire")
    g.add_argument("--cs-polarity", choices=("low", "high"), help="active CS level")
    g.add_argument("--bytes", type=count, metavar="N", help="words per transfer (CS window)")
    g.add_argument("--transfers-per-message", type=count, metavar="N", help="CS windows per spi_message")
    g.add_argument("--messages", type=count, metavar="N", help="how many messages (>= 1)")
    g.add_argument("--cs-setup", type=_as_text(_time), metavar="TIME", help="CS assert to first SCLK edge")
    g.add_argument("--cs-hold", type=_as_text(_time), metavar="TIME", help="last SCLK edge to CS deassert")
    g.add_argument("--idle-clocks", type=nonneg_float, metavar="N", help="idle SCLK periods between words")
    g.add_argument("--inter-transfer", type=_as_text(_time), metavar="TIME",
                   help="gap between kernel transfers inside one CS window")
    g.add_argument("--cs-change", type=_as_text(_time), metavar="TIME",
                   help="CS-high gap between transfers of one message")
    g.add_argument("--context-switch", type=_as_text(_time), metavar="TIME", help="CS-high gap between messages")
    g.add_argument("--jitter", type=_as_text(_time), metavar="TIME", help="normal spread (sigma) added to every gap")
    g.add_argument("--stall-probability", type=fraction, metavar="P",
                   help="probability that a gap is a stall, in [0, 1)")
    g.add_argument("--seed", type=lambda t: count(t, lo=0), metavar="N", help="random seed")
    g.add_argument("--mosi", help="payload: counter, random, zero or words like '0x60 0 0'")
    g.add_argument("--miso", help="payload: counter, random, zero or words")
    t = p.add_argument_group("kernel trace (analyzer/spigap/synth/kernel.py: the spidev spi_sync driver model)")
    t.add_argument("--ftrace", metavar="OUT.txt", help="also write the matching ftrace text (truth: "
                   "the --truth JSON's \"trace\" member)")
    t.add_argument("--trace-format", choices=("trace", "trace_pipe", "trace-cmd", "perf"), default="trace",
                   help="layout: /sys/kernel/tracing/trace, trace_pipe, trace-cmd report, perf script")
    t.add_argument("--trace-ns", action="store_true", help="timestamps with 9 decimals (default: 6, µs)")
    t.add_argument("--trace-drift-ppm", type=float, default=0.0, metavar="PPM",
                   help="trace clock rate error: bus_time = offset + (1 + PPM*1e-6) * trace_time")
    t.add_argument("--trace-offset", type=_as_time(), default=1000.0, metavar="TIME",
                   help="trace clock reading at the capture's time 0 (default 1000s)")
    t.add_argument("--trace-lost", type=fraction, default=0.0, metavar="P",
                   help="share of events lost in ring-buffer overruns (bursts), e.g. 5%%")
    t.add_argument("--trace-other", type=fraction, default=0.0, metavar="P",
                   help="share of context switches with a message of another device (spi0.1)")
    t.add_argument("--trace-noise", type=nonneg_float, default=0.0, metavar="HZ",
                   help="scheduler events (sched_switch/wakeup) per second")
    p.set_defaults(func=run)


def _as_time():
    from spigap.units import parse_time

    def parse(text):
        try:
            return parse_time(text)
        except ValueError as e:
            import argparse

            raise argparse.ArgumentTypeError(str(e)) from None
    return parse


def parse_device(text: str) -> dict:
    name, _, rest = text.partition(":")
    opts = {"name": name}
    for item in filter(None, rest.split(",")):
        if "=" not in item:
            raise UsageError(f"--device options are KEY=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        opts[k.strip()] = v.strip()
    return opts


def run(args) -> int:
    from spigap import synth

    if args.list_devices:
        from spigap.synth.traffic import registry

        for name, fn in sorted(registry().items()):
            doc = (fn.__doc__ or "").strip().splitlines()
            print(f"{name:24s} {doc[0] if doc else ''}")
        return 0
    if not args.output:
        raise UsageError("-o/--output FILE.sr is required")
    check_output_path(args.output)
    check_output_path(args.truth)
    check_output_path(getattr(args, "ftrace", None))
    from spigap.synth import analog_bus

    if args.config and analog_bus.is_analog(args.config):
        return _run_analog(args)
    overrides = {}
    for flag, key in FLAGS.items():
        value = getattr(args, flag, None)
        if value is not None:
            overrides[key] = value
    for item in args.set:
        if "=" not in item:
            raise UsageError(f"--set needs KEY=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        overrides[key.strip()] = value.split(",") if "," in value else value
    if args.device:
        overrides["device"] = parse_device(args.device)
    recipe = synth.load(args.config, overrides)
    trace = synth.TraceOptions(layout=args.trace_format, ns=args.trace_ns, drift_ppm=args.trace_drift_ppm,
                               clock_start_s=args.trace_offset, lost=args.trace_lost,
                               other_device=args.trace_other, noise_rate_hz=args.trace_noise)
    cap = synth.write(recipe, args.output, truth_path=args.truth, ftrace_path=args.ftrace, trace=trace)
    if args.ftrace:
        print(f"wrote {args.ftrace}: {cap.describe_trace(trace)} (synthesized)")
    print(f"wrote {args.output}: {cap.describe()}, {cap.timeline.end_time * 1e3:.4g} ms at "
          f"{recipe.samplerate / 1e6:g} MSa/s (synthesized)")
    return 0


def _run_analog(args) -> int:
    """A recipe with an [analog] table: a scope's acquisition, one ISF file per channel
    (analyzer/spigap/synth/analog_bus.py); -o is the files' stem (STEM + CH1.isf ...; a trailing
    .sr, .isf or CH1.isf is dropped)."""
    from spigap.synth import analog_bus

    given = [f"--{flag.replace('_', '-')}" for flag in FLAGS if getattr(args, flag, None) is not None]
    given += ["--set"] * bool(args.set) + ["--device"] * bool(args.device) + ["--ftrace"] * bool(args.ftrace)
    if given:
        raise UsageError(f"{', '.join(dict.fromkeys(given))} do not apply to an analog recipe: set its "
                         "values in the TOML", path=args.config)
    stem = args.output
    for tail in ("CH1.isf", ".isf", ".sr"):      # `make captures` passes STEM.sr for every recipe
        if stem.endswith(tail):
            stem = stem[:-len(tail)]
            break
    paths, bus, scope = analog_bus.write_recipe(args.config, stem)
    if args.truth:
        import json

        from spigap.cli.common import write_output

        write_output(json.dumps(analog_bus.truth_json(bus), indent=1), args.truth)
    print(f"wrote {', '.join(paths)}: {len(bus.timeline.cs_assert)} transfers at "
          f"{scope['samplerate'] / 1e9:g} GSa/s (synthesized scope traces)")
    return 0
