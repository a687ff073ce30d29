"""``spigap decoders``: install spigap's sigrok decoders, show where they are,
write PulseView session setups (.pvs) for captures.

    spigap decoders install [--link] [--force] [ID ...]
    spigap decoders path [--install-dir]
    spigap decoders pvs CAPTURE [--stack 'spi:clk=SCLK:...,mcp3008'] [--gaps] ...
"""

from __future__ import annotations

import os
import pathlib
import shlex
import shutil
import sys

from spigap.cli.common import add_capture_options
from spigap.errors import SpigapError, UsageError

ORDER = 60

MARKER = ".installed-by-spigap"

OTHER_CS_LINES = 3        # spi_gaps' optional Other CS# 1..3 (decoders/spi_gaps/pd.py)


def add_subparser(sub) -> None:
    p = sub.add_parser("decoders", help="install the sigrok decoders; write PulseView setups (.pvs)",
                       description="spigap's sigrok protocol decoders (spi_gaps and the device "
                                   "decoders) for sigrok-cli and PulseView (libsigrokdecode 0.5.3).")
    dsub = p.add_subparsers(dest="decoders_command", metavar="ACTION")
    dsub.required = True

    i = dsub.add_parser("install", help="copy (or link) the decoders into libsigrokdecode's user directory",
                        description="Copy the decoders into $XDG_DATA_HOME/libsigrokdecode/decoders "
                                    "(default ~/.local/share/libsigrokdecode/decoders), where "
                                    "sigrok-cli and PulseView find them.")
    i.add_argument("ids", nargs="*", metavar="ID", help="decoders to install (default: all)")
    i.add_argument("--link", action="store_true",
                   help="symlink to this checkout instead of copying (edits take effect at once)")
    i.add_argument("--force", action="store_true",
                   help="replace same-named decoders that spigap did not install")
    i.add_argument("--dest", metavar="DIR", help="install here instead of the user directory")
    i.set_defaults(func=run_install)

    pa = dsub.add_parser("path", help="print the decoders directory (for SIGROKDECODE_DIR)",
                         description="Print the directory holding spigap's decoders, e.g. "
                                     "SIGROKDECODE_DIR=$(spigap decoders path) pulseview")
    pa.add_argument("--install-dir", action="store_true",
                    help="print the directory 'install' copies to instead")
    pa.set_defaults(func=run_path)

    v = dsub.add_parser("pvs", help="write a PulseView session setup (.pvs) next to a capture",
                        description="Write <capture>.pvs: PulseView opens it with the capture and shows "
                                    "the decoder stacks ready. --stack takes sigrok-cli's -P syntax "
                                    "(decoders separated by ',', channel maps and options by ':'); "
                                    "--gaps adds spi_gaps with the settings 'spigap analyze' finds "
                                    "(channels, transfers per message, inter-transfer threshold); on a "
                                    "shared bus an spi and an spi_gaps signal per CS line, spi_gaps "
                                    "marking the handovers from the other device.")
    v.add_argument("capture", help="capture file: the .sr that PulseView opens with the setup")
    v.add_argument("--stack", action="append", default=[], metavar="SPEC",
                   help="one decode signal, e.g. 'spi:clk=SCLK:mosi=MOSI:miso=MISO:cs=CE0,mcp3008:vref=3.3' "
                        "(repeatable)")
    v.add_argument("--gaps", action="store_true",
                   help="add an spi_gaps decode signal set up from an analysis of the capture")
    v.add_argument("--hide", action="append", default=[], metavar="ID",
                   help="hide this decoder's rows (e.g. --hide spi to see only the device rows; repeatable)")
    v.add_argument("--start", metavar="TIME",
                   help="open the view at this time (needs --scale; default: zoom to fit)")
    v.add_argument("--scale", metavar="TIME",
                   help="zoom: time per screen pixel, e.g. 20ns (default: zoom to fit)")
    v.add_argument("-o", "--output", metavar="FILE.pvs", help="default: the capture's name with .pvs")
    v.add_argument("--force", action="store_true", help="overwrite an existing .pvs")
    add_capture_options(v)
    v.set_defaults(func=run_pvs)


# ------------------------------------------------------------------ install / path

def run_path(args) -> int:
    from spigap import resources
    from spigap.sigrok import paths

    print(paths.user_decoders_dir() if args.install_dir else resources.decoders_dir())
    return 0


def _ours(target: pathlib.Path, src: pathlib.Path) -> bool:
    """True when ``target`` is something an earlier 'spigap decoders install' put there."""
    if target.is_symlink():
        try:
            return target.resolve() == src.resolve() or (target.resolve() / MARKER).is_file()
        except OSError:
            return False
    return (target / MARKER).is_file()


def _remove(target: pathlib.Path) -> None:
    if target.is_symlink() or target.is_file():
        target.unlink()
    elif target.is_dir():
        shutil.rmtree(target)


def install(ids, dest: pathlib.Path, *, link: bool, force: bool, out=None) -> list[pathlib.Path]:
    """Copy or link the decoders into ``dest``; returns the installed directories."""
    out = out or sys.stdout
    from spigap import __version__
    from spigap import resources

    src_root = resources.decoders_dir()
    available = resources.decoder_ids(src_root)
    ids = list(ids) or available
    unknown = [i for i in ids if i not in available]
    if unknown:
        raise UsageError(f"no decoder named {', '.join(unknown)}; spigap has: {', '.join(available)}")
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"cannot create {dest}: {e.strerror}") from None
    # check everything before touching anything
    for i in ids:
        target = dest / i
        if target.exists() and not target.is_symlink() and target.resolve() == (src_root / i).resolve():
            raise UsageError(f"{target} is the source directory itself: install somewhere else")
        if (target.exists() or target.is_symlink()) and not force and not _ours(target, src_root / i):
            raise UsageError(f"{target} exists and was not installed by spigap",
                             hint="move it away or use --force to replace it")
    done = []
    for i in ids:
        src, target = src_root / i, dest / i
        _remove(target)
        try:
            if link:
                target.symlink_to(src.resolve(), target_is_directory=True)
            else:
                shutil.copytree(src, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
                (target / MARKER).write_text(f"spigap {__version__}\nsource {src.resolve()}\n")
        except OSError as e:
            raise UsageError(f"cannot install {i} into {dest}: {e.strerror}") from None
        done.append(target)
        if link:
            print(f"linked {i:<10} {target} -> {src.resolve()}", file=out)
        else:
            print(f"copied {i:<10} {src.resolve()} -> {target}", file=out)
    return done


def run_install(args) -> int:
    from spigap.sigrok import paths

    dest = pathlib.Path(args.dest).expanduser() if args.dest else paths.user_decoders_dir()
    done = install(args.ids, dest, link=args.link, force=args.force)
    names = "|".join(d.name for d in done)
    print(f"\ncheck:  sigrok-cli -L | grep -E '{names}'")
    print("        (sigrok-cli searches $XDG_DATA_HOME/libsigrokdecode/decoders, "
          "default ~/.local/share/...)")
    print("PulseView reads decoders at start-up only: restart it.")
    other = os.environ.get("SIGROKDECODE_DIR")
    if other and pathlib.Path(other).resolve() != dest.resolve():
        clash = [d.name for d in done if (pathlib.Path(other) / d.name).exists()]
        if clash:
            print(f"note: SIGROKDECODE_DIR={other} also has {', '.join(clash)}, and it wins over {dest}",
                  file=sys.stderr)
    if args.dest and dest.resolve() != paths.user_decoders_dir().resolve():
        print(f"note: {dest} is not a directory libsigrokdecode searches by itself: "
              f"run the tools with SIGROKDECODE_DIR={dest}", file=sys.stderr)
    return 0


# ------------------------------------------------------------------ pvs

def _time(text: str, what: str) -> float:
    from spigap.units import parse_time

    try:
        return parse_time(text)
    except ValueError as e:
        raise UsageError(f"{what}: {e}") from None


def parse_stack(spec: str, capture_channels: list[str]):
    """sigrok-cli -P syntax -> pvs.DecodeSignal (channels checked against the capture)."""
    from spigap.sigrok import pdinfo, pvs

    if not spec.strip():
        raise UsageError("empty --stack")
    decoders: list = []
    infos: list = []
    assigned: dict = {}
    for part in spec.split(","):
        fields = part.split(":")
        did = fields[0].strip()
        if not did:
            raise UsageError(f"--stack {spec!r}: a decoder id is missing")
        info = pdinfo.load(did)
        opts = {}
        for kv in fields[1:]:
            if "=" not in kv:
                raise UsageError(f"--stack {spec!r}: {kv!r} is not key=value")
            key, value = kv.split("=", 1)
            ch = info.channel(key)
            opt = info.option(key)
            if ch is not None:
                if value not in capture_channels:
                    raise UsageError(f"--stack: {did} channel {key}={value}: the capture has no channel "
                                     f"{value!r} (it has: {', '.join(capture_channels)})")
                assigned[(len(infos), key)] = value
            elif opt is not None:
                v = opt.parse(value, did)
                if v != opt.default:
                    opts[key] = (opt.gvariant_type, v)
            else:
                raise UsageError(f"--stack: {did} has no channel or option {key!r} (channels: "
                                 f"{', '.join(c.id for c in info.channels) or 'none'}; options: "
                                 f"{', '.join(o.id for o in info.options) or 'none'})")
        if infos and info.inputs and info.inputs[0] == "logic":
            raise UsageError(f"--stack: {did} reads logic channels and cannot sit on top of "
                             f"{infos[-1].id}; give it its own --stack")
        if infos and infos[-1].outputs and info.inputs and info.inputs[0] not in infos[-1].outputs:
            raise UsageError(f"--stack: {did} takes {info.inputs[0]!r} input but {infos[-1].id} "
                             f"gives {', '.join(infos[-1].outputs)}")
        infos.append(info)
        decoders.append(pvs.StackedDecoder(info.id, opts))
    if infos[0].inputs and infos[0].inputs[0] != "logic":
        raise UsageError(f"--stack: {infos[0].id} stacks on {infos[0].inputs[0]!r}; put a decoder "
                         f"for it first, e.g. --stack '{infos[0].inputs[0]}:...,{spec}'")
    channels = []
    for k, info in enumerate(infos):
        for c in info.channels:
            name = assigned.get((k, c.id)) or auto_assign(c.name, capture_channels)
            if name is None and not c.optional:
                raise UsageError(f"--stack: {info.id} needs channel {c.id} ({c.name}) and no capture "
                                 f"channel matches its name: give {c.id}=<one of "
                                 f"{', '.join(capture_channels)}>")
            channels.append(pvs.DecodeChannel(c.name, name))
    return pvs.DecodeSignal(infos[-1].name, decoders, channels)


def auto_assign(pd_channel_name: str, capture_channels: list[str]) -> str | None:
    """PulseView 0.4.2's rule (DecodeSignal::auto_assign_signals): lower-case,
    [-_.] -> space, a substring either way; the closer length wins."""
    import re

    def norm(s):
        return re.sub(r"[-_.]", " ", s.lower())

    ch = norm(pd_channel_name)
    match = None
    for s in capture_channels:
        sn = norm(s)
        if sn and (sn in ch or ch in sn):
            if match is None or abs(len(ch) - len(s)) < abs(len(ch) - len(match)):
                match = s
    return match


def gaps_signal(args):
    """An spi_gaps decode signal with what 'spigap analyze' finds in the capture."""
    from spigap.api import analyze_file
    from spigap.cli.common import analysis_options, config_from_args
    from spigap.sigrok import pdinfo, pvs

    if args.no_cs:
        raise UsageError("spi_gaps needs a CS line (--no-cs cannot be used with --gaps)")
    r = analyze_file(args.capture, config_from_args(args), **analysis_options(args))
    if r.bus is not None:
        return shared_signals(r), r
    a = r.device
    cfg = a.cfg
    if cfg.cs is None:
        raise UsageError("no CS channel found for spi_gaps", path=args.capture, hint="name it with --cs")
    if a.truncated:
        raise SpigapError(a.truncated)
    info = pdinfo.load("spi_gaps")
    values = spi_gaps_values(a)
    opts = {}
    for o in info.options:
        if o.id in values and values[o.id] != o.default:
            opts[o.id] = (o.gvariant_type, type(o.default)(values[o.id]))
    roles = {"clk": cfg.clk, "cs": cfg.cs, "mosi": cfg.mosi, "miso": cfg.miso}
    channels = [pvs.DecodeChannel(c.name, roles.get(c.id)) for c in info.channels]
    return pvs.DecodeSignal(info.name, [pvs.StackedDecoder(info.id, opts)], channels), r


def shared_signals(sa) -> list:
    """A shared bus: per device an spi decode signal (its CS, its settings) and an spi_gaps
    one whose optional Other CS# 1..3 are the other devices' CS lines in device order, each
    with its polarity where it differs, so it marks every handover into the device and
    two CS lines asserted at once (docs/shared-bus.md)."""
    from spigap.sigrok import pdinfo, pvs

    if sa.truncated:
        raise SpigapError(sa.truncated)
    spi, gaps = pdinfo.load("spi"), pdinfo.load("spi_gaps")
    out = []
    for name, a in sa.devices.items():
        cfg = a.cfg
        roles = {"clk": cfg.clk, "cs": name, "mosi": cfg.mosi, "miso": cfg.miso}
        sopts = {}
        for o in spi.options:
            value = pdinfo.spi_options(cfg).get(o.id)
            if value is not None and value != o.default:
                sopts[o.id] = (o.gvariant_type, type(o.default)(value))
        out.append(pvs.DecodeSignal(f"SPI {name}", [pvs.StackedDecoder(spi.id, sopts)],
                                    [pvs.DecodeChannel(c.name, roles.get(c.id)) for c in spi.channels]))
        values = spi_gaps_values(a)
        others = [(n, b.cfg) for n, b in sa.devices.items() if n != name][:OTHER_CS_LINES]
        for i, (other, ocfg) in enumerate(others, 1):
            roles[f"cs_other{i}"] = other
            if ocfg.cs_active_low != cfg.cs_active_low:
                values[f"cs_other{i}_polarity"] = pdinfo.spi_options(ocfg)["cs_polarity"]
        gopts = {o.id: (o.gvariant_type, type(o.default)(values[o.id])) for o in gaps.options
                 if o.id in values and values[o.id] != o.default}
        out.append(pvs.DecodeSignal(f"SPI gaps {name}", [pvs.StackedDecoder(gaps.id, gopts)],
                                    [pvs.DecodeChannel(c.name, roles.get(c.id)) for c in gaps.channels]))
    return out


def spi_gaps_values(a) -> dict:
    """The spi_gaps decoder options that make it label every gap as the analysis ``a`` did."""
    from spigap import resources
    from spigap.sigrok import pdinfo

    g = resources.load_decoder_module("spi_gaps", "gapdefs")
    values = pdinfo.spi_options(a.cfg)         # its bitorder is no spi_gaps option: not written
    grp = a.grouping
    if grp.ambiguous:
        pass                    # roles unknown: the decoder shows plain "CS high" gaps
    elif grp.transfers_per_message:
        values["transfers_per_message"] = int(grp.transfers_per_message)
        values["first_message_start"] = g.first_message_start_from_phase(grp.phase, grp.transfers_per_message)
    elif grp.lengths:
        values["message_lengths"] = "+".join(str(x) for x in grp.lengths)
        values["first_message_start"] = int(grp.first_start)
    if a.inter_transfer_threshold is not None:
        values["inter_transfer_gap"] = g.threshold_option_us(a.inter_transfer_threshold,
                                                            1.0 / a.tick_s)
    elif len(a.pair_gap):
        # one population of word gaps: a threshold above the longest, so the decoder
        # labels every word gap inter-byte as the analyzer does
        values["inter_transfer_gap"] = g.threshold_option_us(float(a.pair_gap.max()), 1.0 / a.tick_s)
    return values


def run_pvs(args) -> int:
    from spigap.io import open_capture
    from spigap.sigrok import pvs

    if args.samplerate is not None:
        raise UsageError("--samplerate does not apply: PulseView uses the capture's own samplerate")
    if not args.stack and not args.gaps:
        raise UsageError("nothing to set up: give --stack SPEC and/or --gaps")
    capture = pathlib.Path(args.capture)
    with open_capture(str(capture), input_format=args.input_format) as r:
        channels = list(r.info.channels)
    out = pathlib.Path(args.output) if args.output else capture.with_suffix(".pvs")
    if out.suffix != ".pvs":
        raise UsageError(f"{out}: the setup file must end in .pvs")
    if out.exists() and not args.force:
        raise UsageError(f"{out} exists", hint="use --force to overwrite it")
    signals = []
    note = None
    if args.gaps:
        sig, r = gaps_signal(args)
        if r.bus is not None:        # a shared bus: an spi and an spi_gaps signal per device
            signals += sig
            note = "; ".join(f"{n}: {d.grouping.note}" for n, d in r.devices.items())
        else:
            signals.append(sig)
            note = r.device.grouping.note
    signals += [parse_stack(s, channels) for s in args.stack]
    used = {d.id for s in signals for d in s.decoders}
    unknown = [h for h in args.hide if h not in used]
    if unknown:
        raise UsageError(f"--hide {', '.join(unknown)}: not in any stack (there are: {', '.join(sorted(used))})")
    for s in signals:
        for d in s.decoders:
            d.visible = d.id not in args.hide
    scale = _time(args.scale, "--scale") if args.scale else None
    start = _time(args.start, "--start") if args.start else None
    if start is not None and scale is None:
        raise UsageError("--start needs --scale (the zoom) too")
    if scale is not None and scale <= 0:
        raise UsageError("--scale must be > 0")
    text = pvs.render(pvs.Setup(signals, view_scale=scale, view_offset=start))
    from spigap.outfile import write_output

    write_output(str(out), text)         # whole or not at all (outfile.py)
    for s in signals:
        ids = "+".join(d.id for d in s.decoders)
        opts = ", ".join(f"{k}={v[1]:g}" if isinstance(v[1], float) else f"{k}={v[1]}"
                         for d in s.decoders for k, v in d.options.items())
        hidden = [d.id for d in s.decoders if not d.visible]
        print(f"{out}: {s.name} [{ids}]" + (f" ({opts})" if opts else "") +
              (f" (rows of {', '.join(hidden)} hidden)" if hidden else ""))
    if note:
        print(f"  spi_gaps message structure: {note}")
    # PulseView loads CAPTURE.pvs beside the capture by itself; any other file needs -s
    q = shlex.quote
    if out.resolve() == capture.with_suffix(".pvs").resolve():
        print(f"open with:  pulseview {q(str(capture))}   (it loads {q(str(out))} beside it; or "
              f"pulseview -s {q(str(out))} {q(str(capture))}); ", end="")
    else:
        print(f"open with:  pulseview -s {q(str(out))} {q(str(capture))}   ", end="")
    print("the decoders must be installed (spigap decoders install) or in SIGROKDECODE_DIR")
    n_dev = sum(1 for s in signals if s.decoders[0].id == "spi_gaps")
    if n_dev > OTHER_CS_LINES + 1:
        print(f"note: spi_gaps has {OTHER_CS_LINES} Other CS# lines: each device's sees the first "
              f"{OTHER_CS_LINES} other devices' CS lines, so handovers from the rest are not marked")
    if len(signals) > 2:
        # measured, and why: docs/decoders.md "PulseView session setups"
        print(f"note: PulseView 0.4.2 starts all {len(signals)} decode signals at once and may crash or say "
              "'decoder instance not found' on opening (its race, not the setup's): open it again")
    return 0
