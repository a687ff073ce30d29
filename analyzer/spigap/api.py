"""Open and analyze a capture: the one entry point of scripts, tests and every subcommand.

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

from spigap.core import run
from spigap.core.analysis import GAP_KINDS, Analysis, describe
from spigap.core.config import INFERABLE, SpiConfig
from spigap.core.infer.report import Bus, Settled
from spigap.core.result import Result
from spigap.io import open_capture
from spigap.io.base import CaptureInfo

__all__ = ["analyze_file", "analyze_device", "Analysis", "Result", "SpiConfig", "GAP_KINDS", "describe",
           "open_capture"]


def analyze_file(path, cfg: SpiConfig | None = None, *, samplerate: float | None = None,
                 input_format: str | None = None, keep: str = "all", rows=None, device: str | dict | None = None,
                 events=None, stall_rule=None, channels: dict[str, str] | None = None, **reader_options) -> Result:
    """Read and analyze one capture. Raises SpigapError subclasses on bad input.

    Without ``cfg`` every setting is found from names and signals (core/infer/); a
    given ``cfg`` is taken as is, except roles it leaves None and its ``infer`` set.
    ``keep``, ``rows``: core/run.analyze ("all": an Analysis of every transfer;
    "bounded": histograms past 100 000 transfers, their rows to ``rows``; "sample").
    ``stall_rule``: the stall search's rule (core/stalls.StallRule; default its defaults).
    ``device``: ``--device NAME[:KEY=VALUE,...]``: each transfer's meaning in
    ``.labels`` (labels.py); on a shared bus {CS line: spec}, labels per device.
    ``events``: ``--event`` specs (core/events.EventSpec, or their text), measured into
    the device's ``.events``; on a shared bus each names its device (``CE0=CONVST:rise``:
    the chain ends at that device's next transfer); their channels are read in the same
    pass as the SPI lines. Both need every transfer, so they imply ``keep="all"``.
    ``channels``: more extra channels whose edges the pass collects, {name: the option
    that named it} (``Result.edges``).

    Returns a ``Result``: ``.devices`` (each device's analysis by its CS line; one for a
    capture of one device, ``.device``) and ``.bus`` (a shared bus's figures, else None)."""
    from spigap.core import events as events_mod

    specs = [events_mod.parse_event(e) if isinstance(e, str) else e for e in events or []]
    if device or specs:
        keep = "all"
    opts = dict(reader_options, input_format=input_format, samplerate=samplerate)
    with open_capture(path, **opts) as r:
        return run.analyze(r, cfg or SpiConfig(infer=INFERABLE), keep=keep, rows=rows, stall_rule=stall_rule,
                           events=specs, channels=channels, device=device)


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


def analyze_device(path, cfg: SpiConfig | None = None, **kw) -> Analysis:
    """``analyze_file(...).device``: the analysis of a capture of one device."""
    return analyze_file(path, cfg, **kw).device.kept()
