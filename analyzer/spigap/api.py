"""Open and analyze a capture: the one entry point of scripts, tests and every subcommand,
and the services the subcommands share below the command line (load captures for
compare and report, pair their kernel traces, a profile per device of a shared bus,
detect's settings and buses).

    from spigap import analyze_file, SpiConfig
    r = analyze_file("capture.sr", SpiConfig(cpha=1))
    a = r.device                             # its one device (a shared bus: r.devices["CE0"])
    a.gap_values("cs_setup") * a.tick_s      # seconds, NaN where unavailable

The capture goes through core/run.py (frame, measure, group, and finish: stalls,
--event chains, --device labels) into a ``Result``: every device of the bus (one for
a capture of one device) and the bus's figures. ``--device`` and ``--event`` are
options of that one path (``device``, ``events``), not other paths.
"""

from __future__ import annotations

import functools

from spigap.core import run
from spigap.core.analysis import GAP_KINDS, Analysis, describe
from spigap.core.config import INFERABLE, SpiConfig
from spigap.core.infer.report import Bus, Settled
from spigap.core.result import Result
from spigap.errors import UsageError
from spigap.io import open_capture
from spigap.io.base import CaptureInfo

__all__ = ["analyze_file", "analyze_device", "detect_file", "load_captures", "attach_traces", "device_configs",
           "Analysis", "Result", "SpiConfig", "GAP_KINDS", "describe", "open_capture"]


def analyze_file(path, cfg: SpiConfig | None = None, *, samplerate: float | None = None,
                 input_format: str | None = None, keep: str = "all", rows=None, device: str | dict | None = None,
                 events=None, stall_rule=None, channels: dict[str, str] | None = None, pins=None,
                 **reader_options) -> Result:
    """Read and analyze one capture. Raises SpigapError subclasses on bad input.

    Without ``cfg`` every setting is found from names and signals (core/infer/); a
    given ``cfg`` is taken as is, except roles it leaves None and its ``infer`` set.
    ``keep``, ``rows``: core/run.analyze ("all": an Analysis of every transfer;
    "bounded": histograms past 100 000 transfers, their rows to ``rows``; "sample").
    ``stall_rule``: the stall search's rule (core/stalls.StallRule; default its defaults).
    ``device``: ``--device NAME[:KEY=VALUE,...]``: each transfer's meaning in
    ``.labels`` (core/labels.py); on a shared bus {CS line: spec}, labels per device.
    ``events``: ``--event`` specs (core/events.EventSpec, or their text), measured into
    the device's ``.events``; on a shared bus each names its device (``CE0=CONVST:rise``:
    the chain ends at that device's next transfer); their channels are read in the same
    pass as the SPI lines. Both need every transfer, so they imply ``keep="all"``.
    ``channels``: more extra channels whose edges the pass collects, {name: the option
    that named it} (``Result.edges``).

    ``pins``: a ``spigap.pins.tap.PinOptions``: timing at the receivers' pins (setup, hold,
    clock-to-output, edge quality; docs/pin-timing.md) measured in the same pass (the reader
    is wrapped by a measuring tap, pins/tap.py), in each device's ``.pins`` (a
    ``spigap.pins.result.PinResult``; a shared bus: each device in its own CS windows).

    Returns a ``Result``: ``.devices`` (each device's analysis by its CS line; one for a
    capture of one device, ``.device``) and ``.bus`` (a shared bus's figures, else None)."""
    specs = list(events or [])
    if any(isinstance(e, str) for e in specs):
        from spigap.core.events import parse_event

        specs = [parse_event(e) if isinstance(e, str) else e for e in specs]
    if device or specs:
        keep = "all"
    opts = dict(reader_options, input_format=input_format, samplerate=samplerate)
    try:
        return _analyze_open(path, opts, cfg, keep=keep, rows=rows, stall_rule=stall_rule, events=specs,
                             channels=channels, device=device, pins=pins)
    finally:
        release_free_memory()


def _analyze_open(path, opts: dict, cfg: SpiConfig | None, *, pins, **kw) -> Result:
    with open_capture(path, **opts) as r:
        tap = None
        if pins is not None:
            from spigap.pins.tap import PinTap

            r = tap = PinTap(r, pins)
        res = run.analyze(r, cfg or SpiConfig(infer=INFERABLE), **kw)
        if tap is not None:                  # each device's by its CS line (one device: a bus of one)
            for cs, pins_of in tap.results().items():
                res.devices[cs or ""].pins = pins_of
        return res


def release_free_memory() -> None:
    """Hand the memory an analysis freed back to the system (glibc's malloc_trim).

    An analysis allocates and frees arrays of up to tens of MB per block. glibc keeps what
    is freed in its heap, which returns memory only from its top, never past a live object
    (the spigap process's settings, cli/runtime.py, keep blocks below 64 MB in the heap; with
    glibc's defaults its mmap threshold rises to the largest block freed). A process that
    analyzes captures one after another (a script, batch's workers, the test suite) then held
    the freed memory of its analyses: 49-55 MB more after each analysis of the 1 G-sample
    enc28j60 capture, with 1 MB of it alive; 11-15 MB with this (tests/test_memory.py).
    malloc_trim(0) returns every free page of every arena (1-2 ms); an arena per thread
    (glibc's default outside a spigap process) keeps the top of its heap. There is no library
    for this one call (ctypes reaches libc); on a C library without it (musl, macOS'
    libSystem) nothing happens."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim():
    import ctypes

    try:
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None


def detect_file(path, cfg: SpiConfig | None = None, **reader_options) -> tuple[Settled, CaptureInfo, list[Bus]]:
    """What ``spigap detect`` reports, from one pass over a bounded prefix of the capture:
    the settled settings (core/infer/settle.py: names, then the signals) and every SPI bus
    the signals show (a survey of every channel read in the same pass)."""
    from spigap import io
    from spigap.core import infer

    with io.open_capture(path, **reader_options) as r:
        settled = infer.settle(r, cfg or SpiConfig(infer=INFERABLE), survey=True)
        info = r.info
        buses = infer.buses_seen(settled, list(info.channels))
        if buses is None:          # more than 32 channels with the roles named beyond them: a pass of its own
            buses = infer.all_buses(r)
    return settled, info, buses


def load_captures(paths, cfg: SpiConfig | None = None, *, traces: bool = False, **kw) -> list:
    """Analyze each path (``analyze_file``'s keywords: ``events``, ``stall_rule``, reader
    options); stats.compare.Loaded each (its result, and its devices as
    stats.compare.Capture), what compare and report take. Long captures are a systematic
    sample of their transfers (bounded memory, docs/compare-and-report.md), except with
    --event or kernel traces (``traces``), which pair every transfer. A scope's files of
    one acquisition (tek0000CH1.isf ... CH4.isf) are one capture."""
    from spigap.io.combine import group_acquisitions
    from spigap.stats.compare import Loaded

    keep = "all" if traces else "sample"
    flat = [str(x) for p in paths for x in (p if isinstance(p, (list, tuple)) else [p])]
    return [Loaded(" + ".join(group), analyze_file(group if len(group) > 1 else group[0], cfg, keep=keep, **kw))
            for group in group_acquisitions(flat)]


def attach_traces(caps: list, traces, *, spi_device: str | None = None, cs_latency: float | None = None,
                  option: str, captures: str) -> None:
    """Align ``traces`` (paths) with ``caps`` (stats.compare.Loaded, same order) and split
    their gaps into phases (each one device's ``Capture.traced``). ``option``/``captures``
    name the options in the error when the counts differ."""
    if not traces:
        return
    if len(traces) != len(caps):
        raise UsageError(f"{option} gives {len(traces)} trace(s) for {len(caps)} {captures} capture(s): "
                         f"give one trace per capture, in the same order")
    from spigap.trace import pair

    for c, path in zip(caps, traces):
        one = c.capture
        one.traced = pair.load(path, one.analysis, device=spi_device, cs_latency=cs_latency)


def device_configs(cfg: SpiConfig, per_prof: dict, *, mode_given: bool, tpm_given: bool) -> dict:
    """A shared bus's profiles per device (``--profile CE0=NAME``): each device's settings
    from its profile (the SPI core sets them per device), as ``SpiConfig.device_cfgs``: what
    the command line gives wins (``mode_given``, ``tpm_given``), then the profile
    (timing.check.config_for_profile), then the signals."""
    import dataclasses

    from spigap.timing.check import config_for_profile
    from spigap.timing.profiles import load_profile

    out = {}
    for name, spec in per_prof.items():
        p = load_profile(spec)
        out[name] = (config_for_profile(p, dataclasses.replace(cfg, device_cfgs={}), mode_given=mode_given,
                                        tpm_given=tpm_given), f"profile {p.name}")
    return out


def analyze_device(path, cfg: SpiConfig | None = None, **kw) -> Analysis:
    """``analyze_file(...).device``: the analysis of a capture of one device."""
    return analyze_file(path, cfg, **kw).device.kept()
