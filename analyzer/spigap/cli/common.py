"""Option groups shared by the subcommands, each defined once.

One spelling per concept on every subcommand (docs/cli.md): the capture and
SPI options (``add_capture_options``), ``--device NAME[@VARIANT][:KEY=VALUE,...]``
(``add_device_option``), extra channels as ``--event CHANNEL:EDGE``
(``add_event_options``), stalls (``add_stall_options``), statistics
(``add_stats_options``), a profile (``add_profile_options``), kernel traces
(``add_trace_options``: ``--ftrace``, ``--before-ftrace``/``--after-ftrace``,
``--spi-device``, ``--cs-latency``) and the output as
``--format`` + ``-o`` (``add_output_options``). Adding an option to a concept is
one line in its group here; a subcommand adds a whole concept with one call.

Every converter returns the parsed value (``--event``: an EventSpec, ``--threshold``:
a (channel, Threshold), ``--channel-map``: a dict, times and frequencies: numbers).
Also what the subcommands share of turning options into values (so no subcommand
imports another): ``config_from_args``, ``reader_options``, ``analysis_options``,
``stall_rule_from_args``, ``settings_from_args``; the services they call (analyze,
load captures, pair traces, a profile per device) are spigap/api.py's.
"""

from __future__ import annotations

import argparse
import math
import re

from spigap.core.config import SpiConfig
from spigap.errors import UsageError
from spigap.units import parse_freq, parse_time


class Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one line, like every other error:
    ``spigap: error: <what> (spigap CMD --help lists the options)``, instead of
    the whole usage block before the line that matters."""

    def error(self, message):
        self.exit(2, f"spigap: error: {message} ({self.prog} --help lists the options)\n")


# ------------------------------------------------------------------ value types
def _time(text):
    try:
        v = parse_time(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if v < 0:
        raise argparse.ArgumentTypeError("must be >= 0")
    return v


def pin_time(text):
    """A time at a receiver's pin (--rx-setup, --rx-hold, --rx-sample-delay, --pin-margin):
    >= 0 and at most limits.PIN_TIME_MAX_S."""
    from spigap.limits import PIN_TIME_MAX_S

    v = _time(text)
    if v > PIN_TIME_MAX_S:
        raise argparse.ArgumentTypeError(f"{v:g} s is no time at a pin (at most {PIN_TIME_MAX_S * 1e3:g} ms; "
                                         "setup, hold and sample delays are nanoseconds)")
    return v


def _positive_time(text):
    v = _time(text)
    if v <= 0:
        raise argparse.ArgumentTypeError("must be > 0")
    return v


def _freq(text):
    """A frequency with a unit ('3.6MHz', '20GHz', '50e6'): a sample rate, a clock, within
    spigap.limits' bounds (1 Hz .. 1e15 Hz: beyond them every time derived is absurd)."""
    from spigap.limits import rate_problem

    try:
        v = parse_freq(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if not v > 0:
        raise argparse.ArgumentTypeError("must be > 0")
    problem = rate_problem(v)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return v


def count(text, *, lo: int = 1, hi: int | None = None):
    """An integer >= ``lo`` (and <= ``hi``) (argparse type): ``type=count`` or
    ``type=lambda t: count(t, lo=0)``."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if n < lo:
        raise argparse.ArgumentTypeError(f"must be >= {lo}")
    if hi is not None and n > hi:
        raise argparse.ArgumentTypeError(f"must be {lo}..{hi:,}")
    return n


MAX_CS_LATENCY_S = 1.0         # spi_set_cs -> the CS pin: microseconds; a second is no latency


def _cs_latency(text):
    v = _time(text)
    if v > MAX_CS_LATENCY_S:
        raise argparse.ArgumentTypeError(f"{v:g} s is no CS latency (at most {MAX_CS_LATENCY_S:g} s)")
    return v


def positive_float(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < v < float("inf"):
        raise argparse.ArgumentTypeError("must be a positive number")
    return v


def nonneg_float(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 <= v < float("inf"):
        raise argparse.ArgumentTypeError("must be >= 0")
    return v


def percent(text):
    """'2', '2%' -> 0.02."""
    t = str(text).strip().rstrip("%").strip()
    try:
        v = float(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a percentage: {text!r} (e.g. 2 or 2%)") from None
    if not v >= 0 or v == float("inf"):
        raise argparse.ArgumentTypeError("must be >= 0")
    return v / 100.0


def fraction(text):
    """'0.1', '10%' -> 0.1, in [0, 1)."""
    try:
        v = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a fraction: {text!r} (e.g. 0.1 or 10%)") from None
    if not 0 <= v < 1:
        raise argparse.ArgumentTypeError("must be in [0, 1) (e.g. 0.1 or 10%)")
    return v


def _tpm(text):
    from spigap.limits import TRANSFERS_PER_MESSAGE_MAX

    if text == "auto":
        return None
    try:
        return count(text, hi=TRANSFERS_PER_MESSAGE_MAX)
    except argparse.ArgumentTypeError as e:
        raise argparse.ArgumentTypeError(f"{e} (give a number >= 1 or 'auto')") from None


def _wordsize(text):
    from spigap.core.config import MAX_WORDSIZE

    n = count(text)
    if n > MAX_WORDSIZE:
        raise argparse.ArgumentTypeError(f"must be 1..{MAX_WORDSIZE}")
    return n


def _threshold(text):
    """``[CH=]V[,HYST]`` -> (channel or None, io.threshold.Threshold)."""
    from spigap.errors import SpigapError
    from spigap.io.threshold import parse_threshold

    try:
        return parse_threshold(text)
    except SpigapError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _channel_map(text):
    """``CH=NAME[,...]`` -> {channel key: name}."""
    from spigap.errors import SpigapError
    from spigap.io import parse_channel_map

    try:
        return parse_channel_map(text)
    except SpigapError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _deglitch_ns(text):
    """'20' (ns), '20ns', '0.5us' -> nanoseconds."""
    try:
        value = float(text)
    except ValueError:
        try:
            value = parse_time(text) * 1e9
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError("must be a positive time, e.g. 20 (ns) or 0.5us")
    return value


def _event(text):
    """``[DEVICE=]CHANNEL:EDGE`` -> core.events.EventSpec."""
    from spigap.core.events import parse_event
    from spigap.errors import SpigapError

    try:
        return parse_event(text)
    except SpigapError as e:
        raise argparse.ArgumentTypeError(e.problem.split(": ", 1)[-1]) from None


def cs_prefixed(text: str) -> tuple[str | None, str]:
    """``CE0=VALUE`` -> ("CE0", "VALUE"): an option for one device of a shared bus (its CS
    line); anything else -> (None, text). A device spec's own ``KEY=VALUE`` options come
    after a ``:``, so ``mcp3008:vref=3.3`` is not prefixed."""
    m = re.match(r"^([^:=]+)=(.+)$", text.strip())
    return (m.group(1).strip(), m.group(2).strip()) if m else (None, text)


def _device(text):
    from spigap.core.labels import parse_spec
    from spigap.errors import SpigapError

    spec = cs_prefixed(text)[1]
    if spec.strip().lower() == "none":     # check/report: no device limits
        return text
    try:
        parse_spec(spec)
    except SpigapError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


class _PerDevice(argparse.Action):
    """``--device``/``--profile``: a value for the capture (the last one given wins), or
    ``CS=VALUE`` for one device of a shared bus (repeatable: ``args.<dest>_for``)."""

    def __call__(self, parser, namespace, values, option_string=None):
        cs, value = cs_prefixed(values)
        if cs is None:
            setattr(namespace, self.dest, value)
            return
        per = dict(getattr(namespace, self.dest + "_for", None) or {})
        per[cs] = value
        setattr(namespace, self.dest + "_for", per)


# ------------------------------------------------------------------ option groups
CAPTURE_HELP = ("capture file: .sr, VCD, sigrok CSV, Saleae export, scope CSV or a scope's own file "
                "(.isf, .wfm, .bin, .h5, .trc; docs/formats.md)")


def add_reader_options(g) -> None:
    """How a capture file is read (every reader option of ``reader_options``); spigap
    convert takes these alone."""
    g.add_argument("--input-format", metavar="FMT",
                   help="reader to use: sr, dsl, vcd, csv, sigrok-csv, saleae, scope-csv, isf, tek-wfm, rigol-wfm, "
                        "lecroy-trc, keysight-h5, keysight-bin, siglent-bin, raw (default: from extension/content)")
    g.add_argument("--samplerate", type=_freq, metavar="HZ",
                   help="override the capture's samplerate (e.g. 5MHz) when its metadata is wrong")
    g.add_argument("--unitsize", type=int, metavar="BYTES",
                   help="--input-format raw: bytes per sample word (default 1; channels 0..8*BYTES-1)")
    g.add_argument("--channel-map", type=_channel_map, action="append", metavar="CH=NAME[,...]",
                   help="rename channels, e.g. 0=SCLK,1=MOSI,2=MISO,3=CS (key: channel name, Saleae "
                        "channel number, or 0-based position); repeatable")
    g.add_argument("--threshold", type=_threshold, action="append", metavar="[CH=]V[,HYST]",
                   help="logic threshold (and hysteresis band, V) for analog channels (scope files and CSV, "
                        "Saleae analog, analog .sr), e.g. SCLK=1.65,0.2 or 1.4 for all; default: mid-range of "
                        "the signal with 10%% hysteresis; repeatable")
    g.add_argument("--deglitch", type=_deglitch_ns, metavar="NS",
                   help="drop pulses shorter than NS nanoseconds (or 0.5us, 20ns) on every channel")


def add_capture_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("capture and channels")
    add_reader_options(g)
    g.add_argument("--clk", metavar="NAME", help="SCLK channel (default: CLK/SCLK/SCK...)")
    g.add_argument("--mosi", metavar="NAME", help="MOSI channel (default: MOSI/SDI/DIN...)")
    g.add_argument("--miso", metavar="NAME", help="MISO channel (default: MISO/SDO/DOUT...)")
    g.add_argument("--cs", metavar="NAME", help="CS channel (default: CS/CS#/CSN/SS/CE0/nCS...)")
    g.add_argument("--no-cs", action="store_true",
                   help="the bus has no CS line: frame transfers by SCLK idle time")
    s = p.add_argument_group("SPI settings")
    s.add_argument("--mode", type=int, choices=range(4), help="SPI mode 0..3 (= CPOL*2 + CPHA; default: inferred from the signals)")
    s.add_argument("--cpol", type=int, choices=(0, 1),
                   help="clock polarity: SCLK level when idle (instead of --mode; default: inferred)")
    s.add_argument("--cpha", type=int, choices=(0, 1),
                   help="clock phase: 0 = sample on the first SCLK edge of a bit, 1 = on the second "
                        "(instead of --mode; default: inferred)")
    s.add_argument("--cs-polarity", choices=("low", "high"),
                   help="active CS level (default: inferred, else low)")
    s.add_argument("--wordsize", type=_wordsize, metavar="N",
                   help="bits per word, 1..1024 (default: inferred, else 8; above 64 bits words are Python "
                        "ints / hex strings)")
    s.add_argument("--bitorder", choices=("msb", "lsb"),
                   help="bit order of each word on the wire: msb first (default) or lsb first")
    s.add_argument("--no-infer", action="store_true",
                   help="take the defaults (mode 0, CS active low, 8-bit words, MSB first) for settings "
                        "not given instead of inferring them from the signals (docs/inference.md)")
    t = p.add_argument_group("framing")
    t.add_argument("--idle-timeout", type=_positive_time, metavar="TIME",
                   help="without CS: idle SCLK time that ends a transfer (default 2 word times)")
    t.add_argument("--inter-transfer-gap", type=_positive_time, metavar="TIME",
                   help="gap inside a CS window above which it counts as inter-transfer "
                        "(default: auto, see docs/gaps.md)")
    t.add_argument("--transfers-per-message", type=_tpm, default=None, metavar="N|auto",
                   help="CS windows per spi_message/ioctl (default auto: inferred from the gaps)")
    t.add_argument("--context-switch", choices=("longer", "shorter"), default=None,
                   help="the context switches (gaps between messages) are the longer/shorter kind of "
                        "CS-inactive gap; settles an ambiguous grouping (default: from the data's "
                        "evidence, see docs/gaps.md)")


DEVICE_METAVAR = "NAME[@VARIANT][:KEY=VALUE,...]"


def add_device_option(p, *, use: str) -> None:
    """``--device``: one spelling everywhere (spigap.core.labels.parse_spec);
    ``use`` says what this subcommand does with it."""
    p.add_argument("--device", type=_device, metavar=DEVICE_METAVAR, action=_PerDevice,
                   help=f"the SPI device: {use}. NAME: mcp3008 (also every other part of Linux mcp320x: mcp3001/3002/3004/3201/3202/3204/3208/3301, mcp3550-50/-60, mcp3551/3553), ad7606, "
                        "mcp2518fd (also mcp2517fd, mcp251863) or a device .toml file; @VARIANT picks "
                        "datasheet limits (e.g. mcp3008@2.7V, ad7606@3.3V; see 'spigap check --list'); "
                        "KEY=VALUE are decoder options (mcp3008: vref, part; ad7606: variant, range, "
                        "dout; mcp2518fd: chip, can_mode). On a shared bus, one per device: "
                        "--device CE0=mcp3008 --device CE1=mcp2518fd")
    p.set_defaults(device_for={})


def add_event_options(p) -> None:
    g = p.add_argument_group("extra channels")
    g.add_argument("--event", type=_event, action="append", default=[], metavar="CHANNEL:EDGE",
                   help="an edge on a non-SPI channel (rise, fall, both), repeatable; the events form a "
                        "chain ending at the next CS assert: --event CONVST:rise --event BUSY:fall "
                        "measures CONVST→BUSY, BUSY→CS and CONVST→CS; each channel also gets its "
                        "interval, period and pulse widths (a toggle pin: --event TOGGLE:both). A "
                        "channel named CONVST or BUSY (rename with --channel-map) also feeds the "
                        "AD7606 device checks. On a shared bus (analyze): --event CE0=CONVST:rise, the "
                        "chain ending at that device's next transfer")


def _levels(text):
    """'0.99,2.31' (VIL,VIH volts) for --pin-levels / --rx-levels."""
    try:
        lo, hi = (float(x) for x in str(text).replace(" ", "").split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not VIL,VIH in volts: {text!r} (e.g. 0.8,2.0)") from None
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        raise argparse.ArgumentTypeError(f"VIH must be above VIL: {text!r}")
    return lo, hi


def add_pin_options(p, *, switch: bool, sample_delay: bool = True) -> argparse._ArgumentGroup:
    """Timing at the pins (docs/pin-timing.md): ``switch`` adds --pins (the measurement is
    asked for; spigap pins and check do it anyway); ``sample_delay`` --rx-sample-delay (compare
    has one per side)."""
    g = p.add_argument_group("timing at the pins (docs/pin-timing.md)")
    if switch:
        g.add_argument("--pins", action="store_true",
                       help="also measure setup, hold, clock-to-output and edge quality at the receivers' pins "
                            "(from a scope's volts: interpolated; from a logic capture: +/- 1 sample)")
    g.add_argument("--pin-levels", type=_levels, metavar="VIL,VIH",
                   help="the device's input levels in volts (MOSI, SCLK, CS; default: the --device file's for "
                        "its supply, else 30/70 %% of each line's swing, said so)")
    g.add_argument("--rx-levels", type=_levels, metavar="VIL,VIH",
                   help="the controller's MISO input levels in volts (default: the device's)")
    g.add_argument("--rx-setup", type=pin_time, metavar="TIME",
                   help="the controller's MISO setup requirement (default 0: valid at the edge, assumed)")
    g.add_argument("--rx-hold", type=pin_time, metavar="TIME", help="the controller's MISO hold requirement (default 0)")
    if sample_delay:
        g.add_argument("--rx-sample-delay", type=pin_time, metavar="TIME", default=0.0,
                       help="the controller samples MISO this long after its clock edge (the device tree's "
                            "rx-sample-delay-ns, as set: the bus does not show it)")
    g.add_argument("--pin-margin", type=pin_time, metavar="TIME",
                   help="the margin the device-tree suggestions restore (default 5 %% of the SCLK period)")
    return g


def pin_requested(args) -> bool:
    return bool(getattr(args, "pins", False) or getattr(args, "pin_levels", None)
                or getattr(args, "rx_levels", None) or getattr(args, "rx_sample_delay", 0.0))


def pin_options(args, device=None, per_device=None):
    """The pin measurement's options (spigap.pins.tap.PinOptions) from the command line and a
    device's electrical table (``device``: a spigap.timing.profiles.Device or None; a shared
    bus's ``per_device``: each device's by its CS line). ``--pin-levels`` is every device's."""
    from spigap.pins.levels import Levels
    from spigap.pins.tap import PinOptions

    dev = None
    by_cs = {}
    if getattr(args, "pin_levels", None):
        dev = Levels(*args.pin_levels, "--pin-levels")
    else:
        dev = _input_levels(device)
        by_cs = {cs: lv for cs, d in (per_device or {}).items() if (lv := _input_levels(d)) is not None}
    ctl = Levels(*args.rx_levels, "--rx-levels") if getattr(args, "rx_levels", None) else None
    return PinOptions(device_levels=dev, controller_levels=ctl, device_levels_by_cs=by_cs,
                      rx_sample_delay=getattr(args, "rx_sample_delay", 0.0))


def _input_levels(device):
    """A device's input levels (pins.levels.Levels) from its electrical table, else None."""
    if device is None or device.electrical is None:
        return None
    from spigap.pins.levels import Levels

    e = device.electrical
    flag = ", UNVERIFIED" if e.unverified else ""
    return Levels(e.vil, e.vih, f"{device.spec}{' at ' + format(e.vdd, 'g') + ' V' if e.vdd else ''}{flag}",
                  assumed=e.assumed)


def rx_requirement(args):
    """The controller's MISO requirement (spigap.pins.advice.Requirement) from --rx-setup/--rx-hold."""
    from spigap.pins.advice import Requirement

    s, h = getattr(args, "rx_setup", None), getattr(args, "rx_hold", None)
    if s is None and h is None:
        return Requirement()
    return Requirement(s or 0.0, h or 0.0, "--rx-setup/--rx-hold", assumed=False)


def add_stall_options(p) -> None:
    g = p.add_argument_group("stalls (gaps far above their kind's median)")
    g.add_argument("--stall-sigmas", type=positive_float, default=8.0, metavar="K",
                   help="a stall exceeds the median by more than K robust σ (default 8) ...")
    g.add_argument("--stall-fraction", type=percent, default=0.5, metavar="PCT",
                   help="... and by more than PCT %% of the median (default 50)")


MAX_BOOTSTRAP = 100_000        # resamples: time and memory grow with them; 1000 gives the 3rd digit


def add_stats_options(p) -> None:
    g = p.add_argument_group("statistics (docs/compare-and-report.md)")
    g.add_argument("--alpha", type=fraction, default=0.05, metavar="A",
                   help="family-wise significance level, Holm-corrected over all tests (default 0.05)")
    g.add_argument("--min-rel-effect", type=percent, default=0.02, metavar="PCT",
                   help="smallest level change that counts, in %% of the before value (default 2)")
    g.add_argument("--min-effect", type=_time, default=0.0, metavar="TIME",
                   help="smallest level change that counts, absolute (e.g. 100ns; default 0; "
                        "never below 2 samples)")
    g.add_argument("--min-rel-jitter", type=percent, default=0.20, metavar="PCT",
                   help="smallest change of the robust σ that counts, in %% (default 20)")
    g.add_argument("--min-stall-ratio", type=positive_float, default=2.0, metavar="R",
                   help="smallest change of the stall rate that counts, as a ratio (default 2)")
    g.add_argument("--bootstrap", type=lambda t: count(t, lo=100, hi=MAX_BOOTSTRAP), default=1000, metavar="N",
                   help=f"bootstrap resamples, 100..{MAX_BOOTSTRAP:,} (default 1000)")
    g.add_argument("--block-length", type=count, default=None, metavar="N",
                   help="block length in values (default: from the autocorrelation)")
    g.add_argument("--seed", type=lambda t: count(t, lo=0), default=0, metavar="N",
                   help="random seed of the bootstrap (default 0)")


def add_profile_options(p, *, use: str) -> argparse._ArgumentGroup:
    g = p.add_argument_group("profile (docs/timing-model.md)")
    g.add_argument("--profile", metavar="NAME|FILE", action=_PerDevice,
                   help=f"kernel/platform profile, shipped name (spigap check --list) or .toml file: {use}")
    p.set_defaults(profile_for={})
    return g


def per_device(args, option: str) -> dict[str, str]:
    """The ``--device CE0=...``/``--profile CE0=...`` values (a shared bus), checked for the
    subcommands that take them per device (``option``: "device" or "profile")."""
    return dict(getattr(args, option + "_for", None) or {})


def no_per_device(args, *options: str) -> None:
    """A subcommand that takes --device/--profile for the whole capture only."""
    for o in options:
        if per_device(args, o):
            raise UsageError(f"--{o} CS=VALUE (one device of a shared bus) is for 'spigap analyze', 'spigap check' "
                             f"and 'spigap pins'; here give --{o} VALUE, or --cs NAME to take one device")


def add_check_options(p, *, use: str) -> argparse._ArgumentGroup:
    """--profile, --device and --headroom: what 'spigap check' judges against."""
    g = add_profile_options(p, use=use)
    add_device_option(g, use="datasheet limits checked on every transfer (default: the profile's "
                             "device; 'none' to skip)")
    g.add_argument("--headroom", type=fraction, default=None, metavar="FRACTION",
                   help="margin a PASS needs, as a fraction of the tolerance band's half-width or of "
                        "a one-sided bound (default 0.1 = 10%%)")
    return g


def add_trace_options(p, *, ftrace: str | None = None, pairs: bool = False) -> argparse._ArgumentGroup:
    """Kernel traces beside the captures (docs/trace.md). ``ftrace``: "one" (``--ftrace FILE``,
    spigap trace) or "many" (``--ftrace FILE...``, one per positional capture, in order);
    ``pairs``: ``--before-ftrace``/``--after-ftrace`` paired with ``--before``/``--after``."""
    t = p.add_argument_group("kernel trace (docs/trace.md)")
    what = ("kernel trace as text (trace, trace_pipe, trace-cmd report, perf script) or a trace-cmd "
            "trace.dat (converted with trace-cmd when it is installed)")
    if ftrace == "one":
        t.add_argument("--ftrace", metavar="FILE", help=what)
    elif ftrace == "many":
        t.add_argument("--ftrace", nargs="+", default=[], metavar="FILE",
                       help=f"{what}: one per capture, in the captures' order; adds the phase section")
    if pairs:
        t.add_argument("--before-ftrace", nargs="+", default=[], metavar="FILE",
                       help="the --before captures' kernel traces, one per capture in the same order: "
                            "compares every gap's kernel phases too")
        t.add_argument("--after-ftrace", nargs="+", default=[], metavar="FILE",
                       help="the --after captures' kernel traces, one per capture in the same order")
    t.add_argument("--spi-device", metavar="spiB.C",
                   help="the traced SPI device that is on the capture's CS line, e.g. spi0.0 (default: the one "
                        "whose traffic matches the capture)")
    t.add_argument("--cs-latency", type=_cs_latency, metavar="TIME",
                   help="the spi_set_cs(activate) -> CS assert latency when it is known (a scope, a --sync-channel run, a "
                        "profile), e.g. 1.5us: pins the clock offset's zero point, which the events alone only "
                        "bracket (docs/trace.md)")
    return t


def add_output_options(p, formats=("text", "json"), *, output_help: str = "write here instead of stdout"):
    o = p.add_argument_group("output")
    o.add_argument("--format", choices=formats, default=formats[0],
                   help=f"output format: {', '.join(formats)} (default {formats[0]})")
    o.add_argument("-o", "--output", metavar="FILE", help=output_help)
    return o


# ------------------------------------------------------------------ helpers
def config_from_args(args, profile=None) -> SpiConfig:
    """The SpiConfig of the command line; with ``profile``, the profile's settings
    (SPI mode, transfers per message, word size) where the command line gives none."""
    cpol, cpha = 0, 0
    if args.mode is not None:
        if args.cpol is not None or args.cpha is not None:
            raise UsageError("give either --mode or --cpol/--cpha, not both")
        cpol, cpha = args.mode >> 1, args.mode & 1
    else:
        cpol = args.cpol or 0
        cpha = args.cpha or 0
    if args.no_cs and args.cs:
        raise UsageError("--no-cs and --cs contradict each other")
    # settings the command line leaves out are inferred from the signals (core/infer/)
    missing = {k for k, given in (("mode", _mode_given(args)),
                                  ("cs_polarity", args.cs_polarity is not None),
                                  ("wordsize", args.wordsize is not None),
                                  ("bitorder", args.bitorder is not None)) if not given}
    no_infer = getattr(args, "no_infer", False)
    infer, assumed = (set(), missing) if no_infer else (missing, set())
    cfg = SpiConfig(cpol=cpol, cpha=cpha, cs_active_low=args.cs_polarity != "high",
                    wordsize=args.wordsize or 8, lsb_first=args.bitorder == "lsb", clk=args.clk,
                    mosi=args.mosi, miso=args.miso, cs=args.cs, no_cs=args.no_cs,
                    idle_timeout_s=args.idle_timeout, inter_transfer_gap_s=args.inter_transfer_gap,
                    transfers_per_message=args.transfers_per_message,
                    context_switch=getattr(args, "context_switch", None), infer=frozenset(infer),
                    assumed=frozenset(assumed))
    if getattr(args, "device", None):
        from spigap.core import labels

        # the driver's message shapes: evidence for the message grouping (docs/gaps.md)
        cfg.message_lengths = labels.message_lengths(args.device)
    if profile is not None:
        cfg = _with_profile(args, profile, cfg)
    return cfg


def _mode_given(args) -> bool:
    return args.mode is not None or args.cpol is not None or args.cpha is not None


def _with_profile(args, profile, cfg: SpiConfig) -> SpiConfig:
    """``cfg`` with ``profile``'s settings where the command line gives none
    (timing.check.config_for_profile)."""
    from spigap.timing.check import config_for_profile

    return config_for_profile(profile, cfg, mode_given=_mode_given(args),
                              tpm_given=args.transfers_per_message is not None)


def device_profile_configs(args, cfg: SpiConfig, per_prof: dict) -> dict:
    """A shared bus's ``--profile CE0=NAME``: each device's settings (api.device_configs)."""
    from spigap.api import device_configs

    return device_configs(cfg, per_prof, mode_given=_mode_given(args),
                          tpm_given=args.transfers_per_message is not None)


def reader_options(args) -> dict:
    """Keyword options for ``spigap.io.open_capture`` (pass them all: ``open_capture(path, **opts)``):
    the parsed values of the reader options (several --channel-map: one map, the later wins)."""
    maps = getattr(args, "channel_map", None)
    return {"samplerate": args.samplerate, "input_format": args.input_format,
            "threshold": getattr(args, "threshold", None),
            "channel_map": {k: v for m in maps for k, v in m.items()} if maps else None,
            "deglitch": getattr(args, "deglitch", None), "unitsize": getattr(args, "unitsize", None)}


def reader_argv(args) -> list[str]:
    """The reader options given on the command line, as options again (``--channel-map 0=SCLK``
    ...): what a suggested command line needs to read the capture the same way. Each value is
    written back from its parsed form (floats by repr: they parse back to the same number)."""
    opts = reader_options(args)
    out: list[str] = []
    if opts["input_format"]:
        out += ["--input-format", opts["input_format"]]
    if opts["samplerate"]:
        out += ["--samplerate", repr(opts["samplerate"])]
    if opts["unitsize"]:
        out += ["--unitsize", str(opts["unitsize"])]
    if opts["channel_map"]:
        out += ["--channel-map", ",".join(f"{k}={v}" for k, v in opts["channel_map"].items())]
    for ch, t in opts["threshold"] or []:
        out += ["--threshold", f"{ch + '=' if ch else ''}{t.level!r},{t.hysteresis!r}"]
    if opts["deglitch"]:
        out += ["--deglitch", repr(opts["deglitch"])]
    return out


def analysis_options(args) -> dict:
    """What the command line gives spigap.api.analyze_file besides the settings: the parsed
    ``--event`` specs (their channels read in the analysis's one pass) and the reader
    options (``analyze_file(path, cfg, **analysis_options(args))``)."""
    return {"events": list(getattr(args, "event", None) or []), **reader_options(args)}


def stall_rule_from_args(args):
    from spigap.core.stalls import StallRule

    return StallRule(k=args.stall_sigmas, rel=args.stall_fraction)


def settings_from_args(args):
    from spigap.stats.compare import Settings

    return Settings(alpha=args.alpha, min_effect_s=args.min_effect, min_rel_effect=args.min_rel_effect,
                    min_rel_jitter=args.min_rel_jitter, min_stall_ratio=args.min_stall_ratio,
                    n_boot=args.bootstrap, block_length=args.block_length, seed=args.seed,
                    stall_rule=stall_rule_from_args(args))


def check_output_path(path: str | None) -> None:
    """Fail before the work when -o names a place that cannot be written (outfile.py)."""
    from spigap.outfile import check_target

    check_target(path)


def write_output(text: str, path: str | None) -> None:
    """``text`` to standard output or ``path``, whole or not at all (outfile.py)."""
    from spigap.outfile import write_output as write

    write(path, text)


class _RaisingParser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(message)


def capture_option_parser() -> argparse.ArgumentParser:
    """The capture options alone, as a parser that raises UsageError instead of
    exiting: 'spigap batch' parses each manifest entry with it, so a manifest
    takes exactly the values the command line takes."""
    p = _RaisingParser(prog="manifest", add_help=False, allow_abbrev=False)
    add_capture_options(p)
    return p
