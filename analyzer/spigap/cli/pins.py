"""``spigap pins CAPTURE...``: timing at the receivers' pins, the data-valid windows and the
device-tree values that would restore a margin (docs/pin-timing.md)."""

from __future__ import annotations

import csv
import io
import json

from spigap.cli.common import (
    CAPTURE_HELP,
    add_capture_options,
    add_device_option,
    add_output_options,
    add_pin_options,
    analysis_options,
    check_output_path,
    config_from_args,
    pin_options,
    rx_requirement,
    write_output,
)
from spigap.errors import UsageError

ORDER = 45


def add_subparser(sub) -> None:
    p = sub.add_parser(
        "pins", help="setup, hold, clock-to-output and edge quality at the receivers' pins",
        description="Measure every sampling edge at the pins: MOSI setup/hold at the device, MISO setup/hold "
                    "and tDO at the controller, SCLK high/low/period, CS to the first and from the last edge, "
                    "and (from a scope's volts) rise/fall times, overshoot, ringing, runts and "
                    "non-monotonic clock edges. A scope trace's figures are interpolated with a stated "
                    "uncertainty; a logic capture's are whole samples (+/- 1 sample). Then the data-valid "
                    "windows and the device-tree values (rx-sample-delay-ns, spi-max-frequency, "
                    "spi-cs-setup-delay-ns) that would restore a margin, each with its evidence. On a shared bus "
                    "every device is measured in its own CS windows and reported on its own (CAPTURE [CS]).")
    p.add_argument("captures", nargs="+", metavar="CAPTURE",
                   help=CAPTURE_HELP + "; a scope's files of one acquisition (tek0000CH1.isf ... CH4.isf) "
                                       "are one capture")
    add_device_option(p, use="its input levels (VIH/VIL at its supply) and its setup/hold limits for the "
                             "advice (e.g. mcp2518fd@3.3V; on a shared bus --device CE0=SPEC per device: each "
                             "device's lines are read at its own levels; --pin-levels: at one for every device)")
    add_pin_options(p, switch=False)
    add_capture_options(p)
    o = add_output_options(p, ("text", "json", "csv"))
    o.add_argument("--png", metavar="FILE", help="write the eye diagrams of MOSI and MISO (with the setup/hold "
                                                 "mask) as a PNG (the first capture's; of a shared bus, its first "
                                                 "device's)")
    p.set_defaults(func=run)


def run(args) -> int:
    from spigap.api import analyze_file
    from spigap.cli.common import per_device
    from spigap.io.combine import group_acquisitions
    from spigap.timing.check import device_limits

    check_output_path(args.output)
    if args.png:
        check_output_path(args.png)
    dev = device_limits(args.device) if args.device else None
    per_dev = {cs: device_limits(spec) for cs, spec in per_device(args, "device").items()}
    # the input levels: a bare --device's, each device's of a shared bus, or --pin-levels for all
    opts = pin_options(args, dev, per_dev)
    rx = rx_requirement(args)
    docs: list[dict] = []
    texts: list[str] = []
    rows: list[list] = []
    first = None
    for group in group_acquisitions([str(c) for c in args.captures]):
        path = group if len(group) > 1 else group[0]
        result = analyze_file(path, config_from_args(args), pins=opts, **analysis_options(args))
        name = " + ".join(group)
        devices = _limits_per_device(result, dev, per_dev, str(path))
        per: dict[str, dict] = {}
        for cs, limits in devices.items():
            res = result.devices[cs].pins
            if first is None:
                first = (res, limits)
            # one device: the capture's section as it always was; a shared bus: a section per
            # device, named CAPTURE [CS] as spigap check names them
            label = name if result.bus is None else f"{name} [{cs}]"
            d, text = _device(res, label, limits, rx, args)
            per[cs] = d
            texts.append(text)
            for r in res.csv_rows()[(0 if not rows else 1):]:
                rows.append((["capture"] if not rows else [label]) + r)
        if result.bus is None:
            docs.append(next(iter(per.values())))
        else:           # as analyze's JSON: a shared bus's devices by CS line
            docs.append({"capture": name, "devices": {cs: {k: v for k, v in d.items() if k != "capture"}
                                                      for cs, d in per.items()}})
    if args.format == "json":
        from spigap import __version__

        text = json.dumps({"spigap": __version__, "captures": docs}, indent=1) + "\n"
    elif args.format == "csv":
        from spigap.outfile import csv_cell

        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        for r in rows:
            w.writerow([csv_cell(c) for c in r])
        text = buf.getvalue()
    else:
        text = "\n".join(texts)
    write_output(text, args.output)
    if args.png and first is not None:
        from spigap.outfile import write_output as write_bytes
        from spigap.report.eye import eye_png

        data = eye_png(first[0], _masks(first[1], rx))
        if data is None:
            raise UsageError("no eye diagram: the capture's data lines are not analog traces (a scope's volts)",
                             hint="an eye needs volts; a logic capture's figures are in the table")
        write_bytes(args.png, data)
    return 0


def _limits_per_device(result, dev, per_dev: dict, path: str) -> dict:
    """Each device's datasheet limits (a Device or None) by its name in ``result.devices``: a
    capture of one device takes --device SPEC; a shared bus, --device CS=SPEC per device (as
    spigap check), or none."""
    names = list(result.devices)
    if result.bus is None:
        if per_dev:
            raise UsageError(f"--device CS=...: the capture was analyzed as one device ({names[0] or 'no CS line'}); "
                             "give --device SPEC", path=path)
        return {names[0]: dev}
    if dev is not None:
        raise UsageError(f"the capture holds {len(names)} devices on one bus ({', '.join(names)}): give a device "
                         f"per CS line (--device {names[0]}=SPEC ...) or measure one with --cs {names[0]}", path=path)
    bad = [k for k in per_dev if k not in result.devices]
    if bad:
        raise UsageError(f"--device {bad[0]}=...: {bad[0]} is not a device of this bus ({', '.join(names)})",
                         path=path)
    return {cs: per_dev.get(cs) for cs in names}


def _device(res, label: str, dev, rx, args) -> tuple[dict, str]:
    """One device's pins (``label``: the capture's name, a shared bus's device's with its CS
    line): its JSON and its text section."""
    from spigap.pins.advice import period_s
    from spigap.timing.checks import pins as pin_checks

    T = period_s(res)
    margin = args.pin_margin if args.pin_margin is not None else (0.05 * T if T else 0.0)
    advice = pin_checks.advice_lines(res, rx, margin, dev)
    d = res.to_dict()
    d.update(capture=label, windows=pin_checks.windows(res), advice=advice, margin_s=margin,
             controller={"setup_s": rx.setup, "hold_s": rx.hold, "source": rx.source, "assumed": rx.assumed})
    lines = [f"capture     {label}", res.text().rstrip("\n")]
    for role, w in d["windows"].items():
        where = "the device" if role == "mosi" else "the controller"
        lines.append(f"  data-valid window of {role.upper()} at {where}'s sampling point: from "
                     f"{_t(-w['setup'])} to {_t(w['hold'])} around the edge (worst of {w['n']} edges)")
    if not advice:
        lines.append(f"  no device-tree change needed for a {_t(margin)} margin")
    lines += [f"  suggestion: {a_['text']}" for a_ in advice]
    return d, "\n".join(lines) + "\n"


def _masks(dev, rx) -> dict:
    """role -> (setup s, hold s) of the eye masks: the device's tSU/tHD, the controller's requirement."""
    m = {"miso": (rx.setup, rx.hold)}
    if dev is not None:
        su = next((lim.min for lim in dev.limits if lim.metric == "din_setup" and lim.min is not None), 0.0)
        ho = next((lim.min for lim in dev.limits if lim.metric == "din_hold" and lim.min is not None), 0.0)
        m["mosi"] = (su, ho)
    return m


def _t(s: float) -> str:
    from spigap.units import fmt_time

    return fmt_time(s)
