"""``spigap detect CAPTURE``: which wire is which, and the SPI settings, from the signals."""

from __future__ import annotations

import dataclasses
import json
import shlex
from pathlib import Path

from spigap.findings import Cause, Finding, by_cause, explains_figures
from spigap.cli.common import (
    CAPTURE_HELP,
    add_capture_options,
    add_output_options,
    check_output_path,
    config_from_args,
    reader_argv,
    reader_options,
    write_output,
)

ORDER = 15


def add_subparser(sub) -> None:
    p = sub.add_parser("detect", help="infer channel roles, SPI mode, CS polarity and word size from the signals",
                       description="Read the start of a capture and say which channel is SCLK, CS, MOSI "
                                   "and MISO, the SPI mode, CS polarity and word size, where each came "
                                   "from (given, name, inferred, default) and how sure it is, every SPI "
                                   "bus found, and the spigap and sigrok-cli command lines that use them "
                                   "(docs/inference.md). Options pin what you know.")
    p.add_argument("capture", help=CAPTURE_HELP)
    add_capture_options(p)
    add_output_options(p)
    p.set_defaults(func=run)


def sigrok_option_string(cfg) -> str:
    """The sigrok spi decoder's options for ``cfg`` (sigrok-cli -P, PulseView's dialog)."""
    from spigap.sigrok.pdinfo import spi_options

    parts = [f"{role}={name}" for role, name in (("clk", cfg.clk), ("mosi", cfg.mosi), ("miso", cfg.miso),
                                                  ("cs", cfg.cs)) if name is not None]
    parts += [f"{k}={v}" for k, v in spi_options(cfg).items()]
    return "spi:" + ":".join(parts)


def spigap_options(cfg) -> list[str]:
    cs = ",".join(cfg.devices) if cfg.devices else None        # a shared bus: --cs CE0,CE1
    opts = [f"--{role}={name}" if name.startswith("-") else f"--{role} {shlex.quote(name)}"
            for role, name in (("clk", cfg.clk), ("mosi", cfg.mosi), ("miso", cfg.miso), ("cs", cs))
            if name is not None]
    if cfg.cs is None:
        opts.append("--no-cs")
    opts += [f"--mode {cfg.mode}", f"--cs-polarity {'low' if cfg.cs_active_low else 'high'}",
             f"--wordsize {cfg.wordsize}", f"--bitorder {'lsb' if cfg.lsb_first else 'msb'}"]
    return opts


def detect(path: str, args) -> dict:
    from spigap.api import detect_file
    from spigap.io.sr import NoSampleRate

    cfg = config_from_args(args)
    opts = reader_options(args)
    unknown_rate = False
    try:
        # the settings and every bus, from one pass over the capture's start
        settled, info, buses = detect_file(path, cfg, **opts)
    except NoSampleRate:
        # roles, mode and word size are read from the samples; only times need the rate
        opts["samplerate"], unknown_rate = 1.0, True
        settled, info, buses = detect_file(path, cfg, **opts)
    out = settled.cfg
    # what the reader found that every time rests on (an implausible sample rate: analyze's first
    # CHECK line), then the settings', the one that explains the most first (spigap/findings.py);
    # not of the 1 Hz detect put in for a rate the file lacks (the first line says so)
    timebase = [] if unknown_rate else [w for w in info.warnings if explains_figures(w)]
    warnings = by_cause(timebase + list(settled.warnings))
    if unknown_rate:
        warnings.insert(0, Finding("the capture's metadata has no samplerate: the roles and settings are read from "
                                   "the samples alone; analyze needs the rate (--samplerate)", Cause.TIMEBASE))
    sources = settled.sources_dict()
    for k, src in settled.sources.items():
        if src.basis:       # the evidence a calibrated confidence stands on (docs/inference.md)
            sources[k]["basis"] = src.basis
        if src.also:        # the other readings, each as likely (docs/inference.md)
            sources[k]["also"] = list(src.also)
    values = {"clk": out.clk, "mosi": out.mosi, "miso": out.miso, "cs": out.cs, "mode": out.mode,
              "cpol": out.cpol, "cpha": out.cpha, "cs_polarity": "low" if out.cs_active_low else "high",
              "wordsize": out.wordsize, "bitorder": "lsb" if out.lsb_first else "msb"}
    q = shlex.quote(path)
    reading = reader_argv(args)      # the suggested lines read the capture as this one did
    sr, convert = _sigrok_input(path, info.format, reading)
    # a shared bus: each device's settings, and one sigrok spi decoder per CS line (as its users stack it)
    per = {d.cs: d.cfg for d in settled.devices} or {c: dataclasses.replace(out, cs=c, more_cs=()) for c in out.devices}
    devices = [{"cs": c, "cs_polarity": "low" if dc.cs_active_low else "high", "mode": dc.mode,
                "wordsize": dc.wordsize, "sources": {k: v.as_dict() for k, v in d.sources.items()
                                                     if k in ("cs", "cs_polarity", "mode", "wordsize")}}
               for c, dc, d in ((c, per[c], next((x for x in settled.devices if x.cs == c), None)) for c in out.devices)
               if d is not None] if out.more_cs else []
    decoders = [sigrok_option_string(per[c]) for c in out.devices] if out.more_cs else [sigrok_option_string(out)]
    return {
        "capture": {"path": info.path if path == "-" else path, "format": info.format, "channels": list(info.channels)},
        "settings": values,
        "sources": sources,
        "buses": [_bus(b, out) for b in buses],
        "devices": devices,
        "warnings": warnings,
        "commands": {"spigap": " ".join(["spigap analyze", q, *map(shlex.quote, reading), *spigap_options(out)]),
                     "sigrok_cli": (convert + " && " if convert else "") + f"sigrok-cli -i {shlex.quote(sr)} "
                                   + " ".join(f"-P {shlex.quote(o)}" for o in decoders) + " -A spi=mosi-data:miso-data",
                     "sigrok_input": sr,
                     "sigrok_decoder_options": decoders[0] if len(decoders) == 1 else decoders},
    }


def _sigrok_input(path: str, fmt: str, reading: list[str]) -> tuple[str, str | None]:
    """The file sigrok-cli and PulseView open, and the command that makes it (or None): a .sr
    read as it is; any other capture (a CSV, a VCD, a scope's file, or channels renamed by
    --channel-map) is first written as a .sr beside it by ``spigap convert`` with the same
    reading options, so sigrok sees the channels by the names the decoder options use (it
    cannot read most of these formats, and names a VCD's signals its own way)."""
    if path == "-" or (fmt.startswith("sigrok .sr") and not reading):
        return path, None
    sr = str(Path(path).with_suffix("")) + ".spigap.sr"
    return sr, " ".join(["spigap convert", shlex.quote(path), "-o", shlex.quote(sr), *map(shlex.quote, reading)])


def _bus(b, out) -> dict:
    """One bus found in the signals; the analyzed shared bus with its first device's CS and polarity
    (judged on its lines together), not the single line the bus search picked."""
    shared = b.clk == out.clk and bool(out.more_cs)
    cs, active = (out.cs, 0 if out.cs_active_low else 1) if shared else (b.cs, b.cs_active)
    return {"clk": b.clk, "cs": cs, "cs_polarity": None if active is None or cs is None else
            "low" if active == 0 else "high",
            "devices": list(out.devices) if shared else ([b.cs] if b.cs else []),
            "data": b.data, "analyzed": b.clk == out.clk}


def render_text(d: dict) -> str:
    lines = [f"capture   {d['capture']['path']}  ({d['capture']['format']}; channels: "
             f"{', '.join(d['capture']['channels'])})"]
    for i, b in enumerate(d["buses"], 1):
        cs = f"cs={b['cs']} (active {b['cs_polarity']})" if b["cs"] else "no CS"
        if len(b["devices"]) > 1:
            cs = f"cs={','.join(b['devices'])} (a shared bus: {len(b['devices'])} devices)"
        lines.append(f"bus {i}     clk={b['clk']} {cs} data={','.join(b['data']) or '–'}"
                     + ("   <- analyzed" if b["analyzed"] else ""))
    if not d["buses"]:
        lines.append("bus       none found in the signals (roles from names or options)")
    lines.append("")
    show = {"clk": "clk", "cs": "cs", "mosi": "mosi", "miso": "miso", "mode": "mode",
            "cs_polarity": "cs_polarity", "wordsize": "wordsize", "bitorder": "bitorder"}
    rows = []
    for key, label in show.items():
        src = d["sources"].get(key, {"from": "?", "confidence": 0, "note": ""})
        v = d["settings"][key]
        if key == "mode":
            v = f"{v} (CPOL={d['settings']['cpol']} CPHA={d['settings']['cpha']})"
        rows.append((label, str(v if v is not None else "–"), src))
    # columns as wide as their widest cell (a long channel name or the mode keeps them aligned)
    wv = max(12, *(len(v) for _, v, _ in rows))
    wf = max(9, *(len(s["from"]) for _, _, s in rows))
    # the confidence in words beside the number (spigap/confidence.py, the one mapping)
    ww = max(len("reads as"), *(len(s.get("confidence_words", "")) for _, _, s in rows))
    lines.append(f"{'setting':<12} {'value':<{wv}} {'from':<{wf}} {'conf':>5}  {'reads as':<{ww}}  note")
    for label, v, src in rows:
        lines.append(f"{label:<12} {v:<{wv}} {src['from']:<{wf}} {src['confidence']:>5.2f}  "
                     f"{src.get('confidence_words', ''):<{ww}}  {src['note']}".rstrip())
    for dev in d["devices"]:
        lines.append(f"device {dev['cs']:<5} mode {dev['mode']}, CS active {dev['cs_polarity']}, "
                     f"{dev['wordsize']}-bit words: "
                     + "; ".join(f"{k} {v['from']} {v['confidence']:.2f} ({v.get('confidence_words', '')})"
                                 for k, v in dev["sources"].items()))
    for w in d["warnings"]:             # cause first (core/infer: the Settled's warnings)
        lines.append(f"CHECK     {w}")
    lines.append("")
    lines.append(d["commands"]["spigap"])
    lines.append(d["commands"]["sigrok_cli"])
    opts = d["commands"]["sigrok_decoder_options"]
    sr = d["commands"]["sigrok_input"]
    where = "" if sr == d["capture"]["path"] else f"open {sr} (the line above writes it) and "
    if isinstance(opts, list):
        lines.append(f"PulseView: {where}one SPI decoder per CS line (spigap decoders pvs writes the session): "
                     + "  ".join(opts))
    else:
        lines.append(f"PulseView: {where}add the SPI decoder with {opts}")
    return "\n".join(lines) + "\n"


def run(args) -> int:
    check_output_path(args.output)
    d = detect(args.capture, args)
    text = json.dumps(d, indent=1) + "\n" if args.format == "json" else render_text(d)
    write_output(text, args.output)
    return 0
