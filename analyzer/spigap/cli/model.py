"""``spigap model --profile NAME``: predicted transfer rates for N transfers per message."""

from __future__ import annotations

import argparse
import json

from spigap.cli.common import (
    _freq,
    _time,
    nonneg_float,
    add_output_options,
    check_output_path,
    count,
    write_output,
)
from spigap.errors import UsageError
from spigap.units import fmt_time

ORDER = 30


def _counts(text):
    try:
        ns = [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"give numbers like 1,10,100,500, not {text!r}") from None
    if not ns or any(n < 1 for n in ns):
        raise argparse.ArgumentTypeError("every count must be >= 1")
    return ns


def add_subparser(sub) -> None:
    p = sub.add_parser(
        "model", help="predict transfer rates from a kernel/platform timing profile",
        description="The documented SPI timing model (docs/timing-model.md): per transfer "
                    "words × (bits + idle clocks) / SCLK + CS setup + CS hold, per message "
                    "(T_transfer + cs_change) × (N − 1) + T_transfer + context switch, rate = "
                    "N / message time. Prints one row per transfers-per-message value.")
    p.add_argument("--profile", metavar="NAME|FILE", help="shipped profile (see --list) or a .toml file")
    p.add_argument("--list", action="store_true", help="list the shipped profiles and devices and exit")
    p.add_argument("--bytes", type=count, metavar="N", help="words per transfer (default: the profile's)")
    p.add_argument("--transfers-per-message", type=_counts, metavar="N,N,...",
                   help="table rows (default: the profile's, e.g. 1,10,100,500)")
    w = p.add_argument_group("what if (override the profile)")
    w.add_argument("--sclk", type=_freq, metavar="HZ", help="SCLK frequency, e.g. 8MHz")
    w.add_argument("--idle-clocks", type=nonneg_float, metavar="N", help="idle SCLK periods between words")
    w.add_argument("--idle-after-last", choices=("yes", "no"),
                   help="charge the idle slot after the last word too")
    w.add_argument("--cs-setup", type=_time, metavar="TIME", help="CS assert to first SCLK edge")
    w.add_argument("--cs-hold", type=_time, metavar="TIME", help="last SCLK edge to CS deassert")
    w.add_argument("--cs-change", type=_time, metavar="TIME", help="measured CS-high gap inside a message")
    w.add_argument("--cs-change-delay", type=_time, metavar="TIME",
                   help="what spi.c is asked to wait on cs_change: the gap becomes the profile's "
                        "gap − its delay + this one, with the kernel's busy-wait/sleep semantics")
    w.add_argument("--context-switch", type=_time, metavar="TIME",
                   help="CS-high gap between messages (one ioctl to the next)")
    s = p.add_argument_group("synthesize")
    s.add_argument("--synth", metavar="FILE.sr",
                   help="also write a capture synthesized from the profile (first table row's N, "
                        "or --synth-transfers-per-message)")
    s.add_argument("--synth-transfers-per-message", type=count, metavar="N",
                   help="transfers per message of the synthesized capture")
    s.add_argument("--messages", type=count, default=200, metavar="N", help="messages to synthesize (default 200)")
    s.add_argument("--seed", type=lambda t: count(t, lo=0), default=1, metavar="N",
                   help="random seed of the synthesized jitter (default 1)")
    add_output_options(p, ("text", "json"))
    p.set_defaults(func=run)


def build(args):
    """(profile, model, words, rows, delay notes, overrides) from the CLI arguments."""
    from spigap.timing.profiles import load_profile
    from spigap.timing.model import delay_semantics

    prof = load_profile(args.profile)
    words = args.bytes if args.bytes is not None else prof.words_per_transfer
    if words < 1:
        raise UsageError("--bytes must be >= 1")
    ns = args.transfers_per_message or list(prof.table)
    overrides = {}
    kw = {}
    for flag, key in (("sclk", "sclk_hz"), ("idle_clocks", "idle_clocks"), ("cs_setup", "cs_setup"),
                      ("cs_hold", "cs_hold"), ("cs_change", "cs_change"),
                      ("context_switch", "context_switch")):
        v = getattr(args, flag)
        if v is not None:
            kw[key] = v
            overrides[flag.replace("_", "-")] = v
    if args.idle_clocks is not None and args.idle_clocks < 0:
        raise UsageError("--idle-clocks must be >= 0")
    if args.idle_after_last is not None:
        kw["idle_after_last_word"] = args.idle_after_last == "yes"
        overrides["idle-after-last"] = args.idle_after_last
    delays = []
    slack = 0.0
    if args.cs_change_delay is not None:
        if args.cs_change is not None:
            raise UsageError("give --cs-change (the gap) or --cs-change-delay (the kernel delay), not both")
        if prof.cs_change_delay is None or "cs_change" not in prof.timing:
            raise UsageError(f"profile {prof.name!r} has no [timing] cs_change and cs_change_delay to "
                             "start from: give --cs-change")
        patched = bool(prof.patches)
        old = delay_semantics(prof.cs_change_delay, prof.kernel, cs_change=True, patched=patched)
        new = delay_semantics(args.cs_change_delay, prof.kernel, cs_change=True, patched=patched)
        kw["cs_change"] = prof.timing["cs_change"] - old.min_s + new.min_s
        overrides["cs-change-delay"] = args.cs_change_delay
        slack = new.slack_s
        delays.append(f"cs_change: {fmt_time(args.cs_change_delay)} requested on {prof.kernel or 'an unknown kernel'}: "
                      f"{new.note}; gap = profile gap {fmt_time(prof.timing['cs_change'])} − "
                      f"{fmt_time(old.min_s)} + {fmt_time(new.min_s)} = {fmt_time(kw['cs_change'])}")
    elif prof.cs_change_delay is not None:
        sem = delay_semantics(prof.cs_change_delay, prof.kernel, cs_change=True, patched=bool(prof.patches))
        delays.append(f"cs_change: {fmt_time(prof.cs_change_delay)} requested on "
                      f"{prof.kernel or 'an unknown kernel'}: {sem.note}")
    if any(n > 1 for n in ns) and "cs_change" not in prof.timing and "cs_change" not in kw:
        raise UsageError(f"profile {prof.name!r} has no [timing] cs_change, needed for "
                         f"{max(ns)} transfers per message: give --cs-change")
    for patch in prof.patches:
        delays.append(f"patched kernel: {patch}")
    model = prof.model(**kw)
    rows = model.table(words, ns)
    if slack > 0:
        import dataclasses

        slow = dataclasses.replace(model, cs_change=model.cs_change + slack)
        for r in rows:
            r["rate_with_slack_hz"] = slow.rate(words, r["transfers_per_message"])
        delays.append(f"the delay sleeps: with the full timer slack (+{fmt_time(slack)} per cs_change, "
                      "wake-up latency not included) the rates drop to "
                      + ", ".join(f"{r['rate_with_slack_hz'] / 1e3:.4g}k/s" for r in rows))
    return prof, model, words, ns, rows, delays, overrides


def run(args) -> int:
    check_output_path(args.output)
    check_output_path(args.synth)
    if args.list:
        from spigap.timing.profiles import list_text

        write_output(list_text(), args.output)
        return 0
    if not args.profile:
        raise UsageError("--profile NAME|FILE is required (spigap model --list shows the shipped ones)")
    prof, model, words, ns, rows, delays, overrides = build(args)
    if args.format == "json":
        d = {"profile": {"name": prof.name, "title": prof.title, "path": prof.path, "kernel": prof.kernel,
                         "sources": prof.sources, "assumptions": prof.assumptions},
             "model": {"sclk_hz": model.sclk_hz, "bits_per_word": model.bits_per_word,
                       "idle_clocks": model.idle_clocks, "idle_after_last_word": model.idle_after_last_word,
                       "cs_setup_s": model.cs_setup, "cs_hold_s": model.cs_hold,
                       "cs_change_s": model.cs_change, "context_switch_s": model.context_switch,
                       "inter_transfer_s": model.inter_transfer, "segments": model.segments},
             "words_per_transfer": words, "clock_slots": model.clock_slots(words),
             "overrides": overrides, "rows": rows, "delays": delays}
        text = json.dumps(d, indent=1) + "\n"
    else:
        from spigap.timing.render import model_text

        text = model_text(prof, model, words, rows, delays, overrides)
    if args.synth:
        from spigap.synth.from_profile import scenario_from_profile
        from spigap.synth import write

        n = args.synth_transfers_per_message or ns[0]
        if n < 1 or args.messages < 1:
            raise UsageError("--synth-transfers-per-message and --messages must be >= 1")
        sc = scenario_from_profile(prof, words=words, transfers_per_message=n, messages=args.messages,
                                   seed=args.seed)
        for key, attr in (("cs_setup", "cs_setup"), ("cs_hold", "cs_hold"), ("cs_change", "cs_change"),
                          ("context_switch", "context_switch"), ("idle_clocks", "idle_clocks")):
            setattr(sc, attr, getattr(model, key))
        sc.sclk = model.sclk_hz
        sc._check()
        tl = write(sc, args.synth).timeline
        msg = (f"wrote {args.synth}: {len(tl.cs_assert)} transfers, {n} per message, synthesized from "
               f"{prof.name} (NOT a real capture)\n")
        if args.format == "json":
            import sys

            sys.stderr.write(msg)
        else:
            text += msg
    write_output(text, args.output)
    return 0
