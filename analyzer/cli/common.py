"""Options shared by every subcommand that reads captures."""

from __future__ import annotations

import argparse
import sys

from analyzer.core.config import SpiConfig
from analyzer.errors import UsageError
from analyzer.units import parse_freq, parse_time


def _time(text):
    try:
        return parse_time(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _freq(text):
    try:
        return parse_freq(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _tpm(text):
    if text == "auto":
        return None
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("give a number or 'auto'") from None
    if n < 1:
        raise argparse.ArgumentTypeError("must be >= 1")
    return n


def _threshold(text):
    from analyzer.errors import SpigapError
    from analyzer.io.threshold import parse_threshold

    try:
        parse_threshold(text)
    except SpigapError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def _channel_map(text):
    from analyzer.errors import SpigapError
    from analyzer.io import parse_channel_map

    try:
        parse_channel_map(text)
    except SpigapError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def _deglitch_ns(text):
    """'20' (ns), '20ns', '0.5us' -> nanoseconds."""
    try:
        value = float(text)
    except ValueError:
        try:
            value = parse_time(text) * 1e9
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    if not value > 0:
        raise argparse.ArgumentTypeError("must be a positive time, e.g. 20 (ns) or 0.5us")
    return value


def add_capture_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("capture and channels")
    g.add_argument("--input-format", metavar="FMT", help="reader to use (default: from extension/content)")
    g.add_argument("--samplerate", type=_freq, metavar="HZ",
                   help="override the capture's samplerate (e.g. 5MHz) when its metadata is wrong")
    g.add_argument("--channel-map", type=_channel_map, action="append", metavar="CH=NAME[,...]",
                   help="rename channels, e.g. 0=SCLK,1=MOSI,2=MISO,3=CS (key: channel name, Saleae "
                        "channel number, or 0-based position); repeatable")
    g.add_argument("--threshold", type=_threshold, action="append", metavar="[CH=]V[,HYST]",
                   help="logic threshold (and hysteresis band, V) for analog channels (scope CSV, Saleae "
                        "analog, analog .sr), e.g. SCLK=1.65,0.2 or 1.4 for all; default: mid-range of "
                        "the signal with 10%% hysteresis; repeatable")
    g.add_argument("--deglitch", type=_deglitch_ns, metavar="NS",
                   help="drop pulses shorter than NS nanoseconds (or 0.5us, 20ns) on every channel")
    g.add_argument("--clk", metavar="NAME", help="SCLK channel (default: CLK/SCLK/SCK...)")
    g.add_argument("--mosi", metavar="NAME", help="MOSI channel (default: MOSI/SDI/DIN...)")
    g.add_argument("--miso", metavar="NAME", help="MISO channel (default: MISO/SDO/DOUT...)")
    g.add_argument("--cs", metavar="NAME", help="CS channel (default: CS/CS#/CSN/SS/CE0/nCS...)")
    g.add_argument("--no-cs", action="store_true",
                   help="the bus has no CS line: frame transfers by SCLK idle time")
    s = p.add_argument_group("SPI settings")
    s.add_argument("--mode", type=int, choices=range(4), help="SPI mode 0..3 (default 0)")
    s.add_argument("--cpol", type=int, choices=(0, 1))
    s.add_argument("--cpha", type=int, choices=(0, 1))
    s.add_argument("--cs-polarity", choices=("low", "high"), default="low", help="active CS level")
    s.add_argument("--wordsize", type=int, default=8, metavar="N", help="bits per word, 1..64 (default 8)")
    s.add_argument("--bitorder", choices=("msb", "lsb"), default="msb")
    t = p.add_argument_group("framing")
    t.add_argument("--idle-timeout", type=_time, metavar="TIME",
                   help="without CS: idle SCLK time that ends a transfer (default 2 word times)")
    t.add_argument("--inter-transfer-gap", type=_time, metavar="TIME",
                   help="gap inside a CS window above which it counts as inter-transfer "
                        "(default: auto, see docs/gaps.md)")
    t.add_argument("--transfers-per-message", type=_tpm, default=None, metavar="N|auto",
                   help="CS windows per spi_message/ioctl (default auto: inferred from the gaps)")
    t.add_argument("--context-switch", choices=("longer", "shorter"), default=None,
                   help="the context switches (gaps between messages) are the longer/shorter kind of "
                        "CS-inactive gap; settles an ambiguous grouping (default: from the data's "
                        "evidence, see docs/gaps.md)")


def config_from_args(args) -> SpiConfig:
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
    return SpiConfig(cpol=cpol, cpha=cpha, cs_active_low=args.cs_polarity == "low",
                     wordsize=args.wordsize, lsb_first=args.bitorder == "lsb", clk=args.clk,
                     mosi=args.mosi, miso=args.miso, cs=args.cs, no_cs=args.no_cs,
                     idle_timeout_s=args.idle_timeout, inter_transfer_gap_s=args.inter_transfer_gap,
                     transfers_per_message=args.transfers_per_message,
                     context_switch=getattr(args, "context_switch", None))


def reader_options(args) -> dict:
    """Keyword options for ``analyzer.io.open_capture`` (pass them all: ``open_capture(path, **opts)``)."""
    return {"samplerate": args.samplerate, "input_format": args.input_format,
            "threshold": getattr(args, "threshold", None), "channel_map": getattr(args, "channel_map", None),
            "deglitch": getattr(args, "deglitch", None)}


def write_output(text: str, path: str | None) -> None:
    if path in (None, "-"):
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        with open(path, "w") as f:
            f.write(text)
