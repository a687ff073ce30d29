"""Open and analyze a capture: the one entry point of scripts, tests and every subcommand.

    from spigap import analyze_file, SpiConfig
    a = analyze_file("capture.sr", SpiConfig(cpha=1))
    a.gap_values("cs_setup") * a.tick_s      # seconds, NaN where unavailable

The capture goes through core/pipeline.py (frame, measure, group);
``--device`` and ``--event`` are options of that one path (``device``,
``events``), not other paths.
"""

from __future__ import annotations

from spigap.core.analysis import GAP_KINDS, Analysis, describe
from spigap.errors import UsageError
from spigap.core.config import INFERABLE, SpiConfig
from spigap.core import pipeline
from spigap.io import open_capture

__all__ = ["analyze_file", "Analysis", "SpiConfig", "GAP_KINDS", "describe", "open_capture"]


def analyze_file(path, cfg: SpiConfig | None = None, *, samplerate: float | None = None,
                 input_format: str | None = None, keep: str = "all", rows=None, device: str | dict | None = None,
                 events=None, pins=None, **reader_options):
    """Read and analyze one capture. Raises SpigapError subclasses on bad input.

    Without ``cfg`` every setting is found from names and signals (core/infer/); a
    given ``cfg`` is taken as is, except roles it leaves None and its ``infer`` set.
    ``keep``, ``rows``: core/pipeline.analyze ("all": an Analysis of every transfer;
    "bounded": histograms past 100 000 transfers, their rows to ``rows``; "sample").
    ``device``: ``--device NAME[:KEY=VALUE,...]``: each transfer's meaning in
    ``.labels`` (labels.py). ``events``: ``--event`` specs (core/events.EventSpec, or
    their text): a second pass over the capture pairs their edges, in ``.events``.
    Both need every transfer, so they imply ``keep="all"``.

    Several devices on one bus (``--cs CE0,CE1``, or found in the signals): a
    ``core.shared.SharedAnalysis`` (``.devices``: each device's Analysis; ``.bus``);
    ``device`` is then {CS line: spec} (labels per device); each event names its device
    (``CE0=CONVST:rise``: the chain ends at that device's next transfer), measured into
    that device's Analysis's ``.events``.

    ``pins``: a ``spigap.pins.tap.PinOptions``: timing at the receivers' pins (setup, hold,
    clock-to-output, edge quality; docs/pin-timing.md) measured in the same pass, in
    ``.pins`` (a ``spigap.pins.result.PinResult``)."""
    from spigap.core import events as events_mod

    specs = [events_mod.parse_event(e) if isinstance(e, str) else e for e in events or []]
    if device or specs:
        keep = "all"
    opts = dict(reader_options, input_format=input_format, samplerate=samplerate)
    with open_capture(path, **opts) as r:
        tap = None
        if pins is not None:
            from spigap.pins.tap import PinTap

            r = tap = PinTap(r, pins)
        a = pipeline.analyze(r, cfg or SpiConfig(infer=INFERABLE), keep=keep, rows=rows)
        if tap is not None:
            a.pins = tap.result()
    if getattr(a, "shared", False):
        sa = _shared_labels(a, device)
        for cs, own in events_mod.for_devices(specs, list(sa.devices)).items():
            with open_capture(path, **opts) as r:
                sa.devices[cs].events = events_mod.measure(r, sa.devices[cs], own)
        return sa
    if specs:
        specs = events_mod.for_devices(specs, [a.cfg.cs] if a.cfg.cs else []).popitem()[1]
    if isinstance(device, dict):
        if a.cfg.cs not in device or len(device) > 1:
            raise UsageError(f"--device {', '.join(f'{k}=...' for k in device)}: the capture was analyzed as one "
                             f"device ({a.cfg.cs or 'no CS line'}); give --device SPEC")
        device = device[a.cfg.cs]
    if isinstance(device, str) and device:
        from spigap import labels

        a.device = device
        a.labels = labels.label_transfers(a, device)
    if specs:
        with open_capture(path, **opts) as r:
            a.events = events_mod.measure(r, a, specs)
    return a


def _shared_labels(sa, device):
    """--device per device of a shared bus (each transfer's meaning, per device)."""
    names = list(sa.devices)
    if not device:
        return sa
    if not isinstance(device, dict):
        raise UsageError(f"--device {device}: the capture holds {len(names)} devices on one bus "
                         f"({', '.join(names)}); say which: --device {names[0]}={device}")
    bad = [k for k in device if k not in sa.devices]
    if bad:
        raise UsageError(f"--device {bad[0]}=...: {bad[0]} is not a device of this bus ({', '.join(names)})")
    from spigap import labels

    for cs, spec in device.items():
        a = sa.devices[cs]
        a.device = spec
        a.labels = labels.label_transfers(a, spec)
    return sa
