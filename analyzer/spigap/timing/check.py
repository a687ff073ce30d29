"""`spigap check`: measured timing vs a profile's expectations and a device's limits.

``check_analysis`` runs the check families of ``spigap.timing.checks`` in order:
the profile's expectations (``expectations``: gap p50/p99, SCLK; ``modelled``:
transfer time and rate from the timing model), then the device's datasheet
limits (``device``, with ``events`` for the CONVST/BUSY channels). Verdicts,
``Item`` and ``CheckResult`` live in ``checks.judging``.

    from spigap.api import analyze_file
    from spigap.timing.check import check_analysis, config_for_profile
    from spigap.timing.profiles import load_profile

    prof = load_profile("rpi3-k4.4-nodelay")
    a = analyze_file("cap.sr", config_for_profile(prof))
    res = check_analysis(a, prof, "mcp3008@5V")
    res.verdict            # "PASS" / "MARGINAL" / "FAIL" (or "SKIP": nothing applied)
    res.to_dict()          # the JSON form (docs/timing-model.md, "check JSON")

The ±1-sample rule, headroom and NO DATA: ``spigap.timing.checks.judging``
(docs/timing-model.md, "Verdicts").
"""

from __future__ import annotations

import dataclasses

from spigap import __version__
from spigap import confidence
from spigap.core.analysis import KIND_NAMES, Analysis
from spigap.core.config import SpiConfig
from spigap.timing.checks.device import check_device
from spigap.timing.checks.expectations import check_gap, check_sclk, with_derived
from spigap.timing.checks.judging import (  # noqa: F401  (the public names of `spigap check`)
    FAIL,
    MARGINAL,
    MIN_TRANSFERS,
    NO_DATA,
    PASS,
    SEVERITY,
    SKIP,
    CheckResult,
    Item,
    judge,
)
from spigap.timing.checks.measurements import Measurements
from spigap.timing.checks.modelled import check_modelled
from spigap.timing.profiles import Profile, load_device, load_profile

DEFAULT_HEADROOM = 0.1
CHECK_SCHEMA = 1
MODELLED = ("transfer_rate",)       # checked against the timing model even without model = true


# ------------------------------------------------------------------ configuration
def config_for_profile(profile: Profile, cfg: SpiConfig | None = None, *, mode_given: bool = False,
                       tpm_given: bool = False) -> SpiConfig:
    """The analysis settings a profile asks for (SPI mode, transfers per message),
    unless the caller set them (``mode_given``/``tpm_given``, or a non-default cfg value)."""
    cfg = dataclasses.replace(cfg) if cfg is not None else SpiConfig()
    if profile.mode is not None and not mode_given and cfg.cpol == 0 and cfg.cpha == 0:
        cfg.cpol, cfg.cpha = profile.mode >> 1, profile.mode & 1
        cfg.infer = cfg.infer - {"mode"}            # the profile says it: not inferred
    if profile.transfers_per_message is not None and not tpm_given and cfg.transfers_per_message is None:
        cfg.transfers_per_message = profile.transfers_per_message
    if profile.bits_per_word != 8 and cfg.wordsize == 8 and ("wordsize" in cfg.infer or not cfg.infer):
        cfg.wordsize = profile.bits_per_word
        cfg.infer = cfg.infer - {"wordsize"}
    return cfg


# ------------------------------------------------------------------ the check
def check_analysis(analysis: Analysis, profile, device=None, *, headroom: float = DEFAULT_HEADROOM,
                   events: dict | None = None, rx=None, margin: float | None = None) -> CheckResult:
    """Check one analysed capture against a profile (name, file or Profile) and,
    optionally, a device's datasheet limits (spec like "mcp3008@5V", file or
    Device). ``events``: role -> EventTrack for CONVST/BUSY (spigap.timing.extra_channels).
    ``profile`` None: the device limits alone. When the capture was measured at the pins
    (``analysis.pins``), the device's pin limits are judged on it, and so is the MISO
    window at the controller against ``rx`` (a ``spigap.pins.advice.Requirement``; default:
    valid at the edge, assumed), with the device-tree advice for ``margin`` (s; default
    5 % of the SCLK period) in the notes and ``summary["pins"]``.
    """
    prof = load_profile(profile) if profile is not None else None
    dev = load_device(device) if device else None
    if prof is None and dev is None:
        from spigap.errors import UsageError

        raise UsageError("nothing to check against: give a profile and/or a device")
    if not (0 <= headroom < 1):
        from spigap.errors import UsageError

        raise UsageError(f"--headroom {headroom:g} must be a fraction in [0, 1)")
    m = Measurements(analysis, prof, headroom, events or {})
    items: list[Item] = []
    notes: list[str] = []
    if prof is not None:
        for metric, ex in with_derived(prof).items():
            if metric == "sclk":
                items += check_sclk(m, ex)
            elif metric in MODELLED or ex.model:
                items += check_modelled(m, prof, metric, ex)
            else:
                items += check_gap(m, metric, ex)
    if dev is not None:
        dev_items, notes = check_device(m, dev)
        items += dev_items
    a = analysis
    pin_summary = None
    if a.pins is not None:
        pin_summary, pin_notes = _pins(a.pins, dev, items, headroom, rx, margin)
        notes = list(notes) + pin_notes
    summary: dict = {
        "transfers": a.n,
        "samplerate_hz": a.info.samplerate_hz,
        "sclk_hz": a.sclk_hz,
        "transfers_per_message": a.grouping.transfers_per_message,
        "messages": a.n_messages(),
        "messages_in_words": confidence.messages_in_words(
            a.n_messages(), a.grouping.transfers_per_message, a.grouping.lengths,
            ambiguous=a.grouping.ambiguous, stretches=len(a.grouping.segments)),
        "grouping": a.grouping.method,
        "grouping_confidence": a.grouping.confidence,
        "grouping_confidence_words": confidence.of_grouping(a.grouping),
        "grouping_note": a.grouping.note,
        "words_per_transfer": m.words_per_transfer,
        "idle_gaps_excluded": int(m.idle.sum()),
        "idle_gap_s": prof.idle_gap if prof else None,
        "truncated": a.truncated,
    }
    summary["stalls"] = stall_summary(a, m.idle)
    if pin_summary is not None:
        summary["pins"] = pin_summary
    return CheckResult(capture=a.info.path, profile=prof, device=dev, resolution_s=a.tick_s,
                       headroom=headroom, items=items, notes=notes, summary=summary,
                       warnings=list(a.warnings))


def stall_summary(a, idle) -> dict:
    """Stalls next to the verdicts (analyze's rule and numbers: a p99 inside its bound can hide
    a few long gaps), without the CS-inactive gaps the profile's ``idle_gap`` leaves out of every
    figure (``idle``: per transfer, its gap before is one; a stall is that gap when it is of
    the gap-before's kind, ``transfer`` the later one): the bus idling between bursts is no
    software cost, and was counted as stalls beside "N idle gaps left out" (the i.MX8MP
    MCP2518FD captures: "49 idle gaps > 200 µs left out; 49 stall(s), 47.76 ms lost")."""
    rep = a.stalls
    d = rep.to_dict(a, limit=0)
    out = {k: d[k] for k in ("rule", "count", "excess_s", "excess_fraction")}
    if idle.any() and not rep.beyond:      # every stall listed (check keeps every transfer)
        kept = [x for x in rep.stalls if not (idle[x.transfer] and x.kind == KIND_NAMES[int(a.gap_kind[x.transfer])])]
        span = a.end_tick * a.tick_s
        out["count"] = len(kept)
        out["excess_s"] = float(sum(x.excess_s for x in kept))
        out["excess_fraction"] = out["excess_s"] / span if span > 0 else None
        out["idle_gaps_left_out"] = len(rep.stalls) - len(kept)
    return out


def _pins(res, dev, items: list, headroom: float, rx, margin) -> tuple[dict, list[str]]:
    """The controller's MISO window (items) and the advice (notes) of a capture measured at the pins."""
    from spigap.pins.advice import Requirement, period_s
    from spigap.timing.checks import pins

    rx = rx or Requirement()
    if margin is None:
        T = period_s(res)
        margin = 0.05 * T if T else 0.0
    items += pins.controller_items(res, rx, headroom)
    advice = pins.advice_lines(res, rx, margin, dev)
    notes = [f"suggestion: {a['text']}" for a in advice]
    return {"measured": res.to_dict(), "windows": pins.windows(res), "advice": advice, "margin_s": margin,
            "controller": {"setup_s": rx.setup, "hold_s": rx.hold, "source": rx.source,
                           "assumed": rx.assumed}}, notes


def overall_verdict(results: list) -> str:
    """The worst verdict of several captures: FAIL > NO DATA > MARGINAL > PASS."""
    return max((r.verdict for r in results), key=lambda v: SEVERITY[v], default=NO_DATA)


def results_to_dict(results: list) -> dict:
    """The `spigap check --format json` document for several captures."""
    verdict = overall_verdict(results)
    return {"spigap": __version__, "check_schema": CHECK_SCHEMA, "verdict": verdict,
            "results": [r.to_dict() for r in results]}


def device_limits(spec):
    """The datasheet limits (spigap.timing.profiles.Device) of ``spec``, or None for 'none'."""
    from spigap.core.labels import parse_spec
    from spigap.errors import UsageError
    from spigap.timing.profiles import load_device

    if spec is None or str(spec).strip().lower() == "none":
        return None
    d = parse_spec(spec)
    if not d.is_file:
        from spigap.timing.profiles import list_devices

        shipped = sorted({x.name for x in list_devices()})
        if d.name not in shipped:
            raise UsageError(f"no datasheet limits shipped for {d.name!r} (spigap has them for "
                             f"{', '.join(shipped)})", hint="give a device .toml file, or --device none")
    return load_device(d.limits_spec)
