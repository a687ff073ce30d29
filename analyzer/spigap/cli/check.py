"""``spigap check CAPTURE... --profile NAME [--device mcp3008@5V]``: PASS / MARGINAL / FAIL / NO DATA."""

from __future__ import annotations

import json
import sys

from spigap.cli.common import (
    CAPTURE_HELP,
    add_capture_options,
    add_check_options,
    add_event_options,
    add_output_options,
    add_pin_options,
    add_stall_options,
    analysis_options,
    check_output_path,
    config_from_args,
    device_profile_configs,
    pin_options,
    pin_requested,
    rx_requirement,
    stall_rule_from_args,
    write_output,
)
from spigap import confidence
from spigap.errors import UsageError

ORDER = 40


def add_subparser(sub) -> None:
    from spigap.timing.check import MIN_TRANSFERS

    p = sub.add_parser(
        "check", help="check captures against a kernel/platform profile and device datasheet limits",
        description="Measure each capture and compare every figure the profile expects (p50 and p99 "
                    "of each gap kind, SCLK, the timing model's transfer time and rate) and every "
                    "device limit (on every transfer) with PASS / MARGINAL / FAIL. Every measured "
                    "figure is ±1 sample: within one sample of a bound is MARGINAL, beyond it FAIL "
                    "(docs/timing-model.md). A capture with fewer than "
                    f"{MIN_TRANSFERS} transfers, or where every check was skipped, is NO DATA, never "
                    "PASS. Exit status: 0 no FAIL and no NO DATA, 1 any FAIL or NO DATA (MARGINAL "
                    "too with --strict), 2 error.")
    p.add_argument("captures", nargs="*", metavar="CAPTURE", help=CAPTURE_HELP + "; repeatable")
    g = add_check_options(p, use="check every capture against it (give --profile, --device or both)")
    g.add_argument("--strict", action="store_true", help="MARGINAL counts as a failure (exit 1)")
    g.add_argument("--allow-empty", action="store_true",
                   help="a capture with NO DATA (too few transfers, every check skipped) does not fail "
                        "the run (exit 0; JUnit and KTAP: skipped)")
    g.add_argument("--list", action="store_true", help="list the shipped profiles and devices and exit")
    add_capture_options(p)
    add_event_options(p)
    add_stall_options(p)
    add_pin_options(p, switch=True)
    o = add_output_options(p, ("text", "json", "junit", "ktap"))
    o.add_argument("-v", "--verbose", action="store_true", help="text: explain every check, with sources")
    p.set_defaults(func=run)


def _no_bus_summary(e) -> dict:
    return {"transfers": 0, "samplerate_hz": None, "sclk_hz": None, "transfers_per_message": None,
            "messages": 0, "messages_in_words": confidence.messages_in_words(0, None, []),
            "grouping": "none", "grouping_note": None, "no_bus": e.problem}


def run(args) -> int:
    from spigap.timing.check import device_limits
    from spigap.api import analyze_file
    from spigap.core.infer.report import NoSpiBus
    from spigap.timing.check import DEFAULT_HEADROOM, CheckResult, check_analysis, results_to_dict
    from spigap.timing.extra_channels import tracks
    from spigap.timing.profiles import list_text, load_profile

    check_output_path(args.output)
    if args.list:
        write_output(list_text(), args.output)
        return 0
    from spigap.cli.common import per_device

    per_prof, per_dev = per_device(args, "profile"), per_device(args, "device")
    if not args.profile and not args.device and not per_prof and not per_dev:
        raise UsageError("give --profile NAME|FILE and/or --device NAME[@VARIANT] "
                         "(spigap check --list shows the shipped ones)")
    if not args.captures:
        raise UsageError("give at least one capture file")
    prof = load_profile(args.profile) if args.profile else None
    spec = args.device if args.device is not None else (prof.device if prof else None)
    dev = device_limits(spec)
    if prof is None and dev is None and not per_prof and not per_dev:
        raise UsageError("--device none without --profile leaves nothing to check")
    headroom = DEFAULT_HEADROOM if args.headroom is None else args.headroom
    cfg = config_from_args(args, prof)
    if per_prof:
        # a shared bus: each device framed with its profile's settings
        cfg.device_cfgs = device_profile_configs(args, cfg, per_prof)
    rule = stall_rule_from_args(args)
    # at the pins: asked for, or the device has electrical limits (every sampling edge, docs/pin-timing.md)
    # a shared bus: each device's profile, and its own limits (--device CE0=SPEC, else its profile's device)
    profiles = {name: load_profile(p) for name, p in per_prof.items()}
    by_cs = {name: d for name, spec in _device_specs(profiles, per_dev).items() if (d := device_limits(spec)) is not None}
    measure = pin_requested(args) or _pin_limits(dev) or any(_pin_limits(d) for d in by_cs.values())
    pins = pin_options(args, dev, by_cs) if measure else None
    results = []
    truncated = []
    from spigap.io.combine import group_acquisitions

    # a scope's files of one acquisition (tek0000CH1.isf ... CH4.isf) are one capture, as in spigap batch
    for group in group_acquisitions([str(c) for c in args.captures]):
        path = group if len(group) > 1 else group[0]
        try:
            r = analyze_file(path, cfg, stall_rule=rule, pins=pins, **analysis_options(args))
        except NoSpiBus as e:           # no SPI here: NO DATA, like a capture with too few transfers
            results.append(CheckResult(str(path), prof, dev, None, headroom, [], [], _no_bus_summary(e), []))
            continue
        if r.bus is not None:
            # a shared bus: each device against its own profile and limits
            results += _check_shared(path, r, args, prof, headroom, profiles, per_dev, by_cs)
            if r.truncated:
                truncated.append(r.truncated)
            continue
        a = r.device.kept()
        if per_prof or per_dev:
            raise UsageError("--profile/--device CS=...: the capture was analyzed as one device "
                             f"({a.cfg.cs or 'no CS line'}); give --profile NAME / --device SPEC",
                             path=str(path))
        # the --event channels' edges, from the analysis's own pass
        res = check_analysis(a, prof, dev, headroom=headroom, events=tracks(r.edges, args.event),
                             rx=rx_requirement(args), margin=args.pin_margin)
        if a.truncated:
            truncated.append(a.truncated)
        results.append(res)
    if args.format == "json":
        text = json.dumps(results_to_dict(results), indent=1) + "\n"
    elif args.format == "junit":
        from spigap.timing.render import check_junit

        text = check_junit(results, strict=args.strict, allow_empty=args.allow_empty)
    elif args.format == "ktap":
        from spigap.timing.render import check_ktap

        text = check_ktap(results, strict=args.strict, allow_empty=args.allow_empty)
    else:
        from spigap.timing.render import check_text

        text = check_text(results, verbose=args.verbose)
    write_output(text, args.output)
    for t in truncated:
        print(f"spigap: error: {t}", file=sys.stderr)
    if truncated:
        return 2
    for res in results:
        if res.no_data:
            print(f"spigap: {'note' if args.allow_empty else 'error'}: {res.capture}: NO DATA: {res.no_data}",
                  file=sys.stderr)
    return 1 if any(res.failed(args.strict, args.allow_empty) for res in results) else 0


def _device_specs(profiles: dict, per_dev: dict) -> dict:
    """Each device's spec on a shared bus: its --device CE0=SPEC, else its --profile's device."""
    specs = {name: p.device for name, p in profiles.items()}
    specs.update(per_dev)
    return {name: spec for name, spec in specs.items() if spec}


def _pin_limits(dev) -> bool:
    """The device has limits at the pins or input levels: measure the pins."""
    from spigap.timing.profiles import LIMIT_METRICS

    return dev is not None and (dev.electrical is not None
                                or any(LIMIT_METRICS[lim.metric][1] == "pin" for lim in dev.limits))


def _spi_settings(a) -> dict:
    """A shared-bus device's SPI settings and where each came from (given, its profile,
    inferred): each device is framed with its own (core/infer/shared.settle_devices)."""
    c = a.cfg
    return {"mode": c.mode, "wordsize": c.wordsize, "bitorder": "lsb" if c.lsb_first else "msb",
            "cs_polarity": "low" if c.cs_active_low else "high",
            "sources": {k: a.sources[k].as_dict() for k in ("mode", "wordsize", "bitorder", "cs_polarity")
                        if k in a.sources}}


def _check_shared(path, sa, args, prof, headroom, profiles, per_dev, limits) -> list:
    """Every device of a shared bus against its profile (``--profile CE0=NAME``) and device
    limits (``--device CE0=SPEC``, else its profile's device: ``limits``, by CS); a bare
    --profile/--device is for a capture of one device. Each device is one result, named CAPTURE [CS]."""
    from spigap.timing.check import check_analysis

    names = list(sa.devices)
    if (prof is not None or args.device) and not (profiles or per_dev):
        first = names[0]
        raise UsageError(f"the capture holds {len(names)} devices on one bus ({', '.join(names)}): give a profile per "
                         f"device (--profile {first}=NAME ...) or analyze one with --cs {first}", path=str(path))
    bad = [k for k in list(profiles) + list(per_dev) if k not in sa.devices]
    if bad:
        raise UsageError(f"--profile/--device {bad[0]}=...: {bad[0]} is not a device of this bus "
                         f"({', '.join(names)})", path=str(path))
    if args.event:
        raise UsageError("--event: the capture holds several devices on one bus: give --cs NAME", path=str(path))
    out = []
    for name, a in sa.devices.items():
        p, d = profiles.get(name), limits.get(name)
        if p is None and d is None:
            continue
        res = check_analysis(a, p, d, headroom=headroom)
        res.capture = f"{res.capture} [{name}]"
        res.summary["cs"] = name
        res.summary["spi"] = _spi_settings(a)
        out.append(res)
    if not out:
        raise UsageError("no device of the bus has a profile or device limits to check", path=str(path))
    return out
