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
                    "spi-cs-setup-delay-ns) that would restore a margin, each with its evidence.")
    p.add_argument("captures", nargs="+", metavar="CAPTURE",
                   help=CAPTURE_HELP + "; a scope's files of one acquisition (tek0000CH1.isf ... CH4.isf) "
                                       "are one capture")
    add_device_option(p, use="its input levels (VIH/VIL at its supply) and its setup/hold limits for the "
                             "advice (e.g. mcp2518fd@3.3V)")
    add_pin_options(p, switch=False)
    add_capture_options(p)
    o = add_output_options(p, ("text", "json", "csv"))
    o.add_argument("--png", metavar="FILE", help="write the eye diagrams of MOSI and MISO (with the setup/hold "
                                                 "mask) as a PNG (the first capture's)")
    p.set_defaults(func=run)


def run(args) -> int:
    from spigap.api import analyze_file
    from spigap.io.combine import group_acquisitions
    from spigap.pins.advice import period_s
    from spigap.timing.check import device_limits
    from spigap.timing.checks import pins as pin_checks

    check_output_path(args.output)
    if args.png:
        check_output_path(args.png)
    if getattr(args, "device_for", None):
        raise UsageError("--device CE0=...: spigap pins measures one device's bus; give --device SPEC and --cs")
    dev = device_limits(args.device) if args.device else None
    opts = pin_options(args, dev)
    rx = rx_requirement(args)
    docs: list[dict] = []
    texts: list[str] = []
    rows: list[list] = []
    first = None
    for group in group_acquisitions([str(c) for c in args.captures]):
        path = group if len(group) > 1 else group[0]
        result = analyze_file(path, config_from_args(args), pins=opts, **analysis_options(args))
        if result.bus is not None:
            raise UsageError("several devices on one bus: measure one with --cs NAME", path=str(path))
        res = result.device.pins
        if first is None:
            first = res
        T = period_s(res)
        margin = args.pin_margin if args.pin_margin is not None else (0.05 * T if T else 0.0)
        advice = pin_checks.advice_lines(res, rx, margin, dev)
        name = " + ".join(group)
        d = res.to_dict()
        d.update(capture=name, windows=pin_checks.windows(res), advice=advice, margin_s=margin,
                 controller={"setup_s": rx.setup, "hold_s": rx.hold, "source": rx.source, "assumed": rx.assumed})
        docs.append(d)
        lines = [f"capture     {name}", res.text().rstrip("\n")]
        for role, w in d["windows"].items():
            where = "the device" if role == "mosi" else "the controller"
            lines.append(f"  data-valid window of {role.upper()} at {where}'s sampling point: from "
                         f"{_t(-w['setup'])} to {_t(w['hold'])} around the edge (worst of {w['n']} edges)")
        if not advice:
            lines.append(f"  no device-tree change needed for a {_t(margin)} margin")
        lines += [f"  suggestion: {a_['text']}" for a_ in advice]
        texts.append("\n".join(lines) + "\n")
        for r in res.csv_rows()[(0 if not rows else 1):]:
            rows.append((["capture"] if not rows else [name]) + r)
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

        data = eye_png(first, _masks(dev, rx))
        if data is None:
            raise UsageError("no eye diagram: the capture's data lines are not analog traces (a scope's volts)",
                             hint="an eye needs volts; a logic capture's figures are in the table")
        write_bytes(args.png, data)
    return 0


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
