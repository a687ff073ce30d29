"""One capture analyzed, start to finish, in one pass over its edges: the pipeline
(core/pipeline.py) into one collector per device (core/collect.py), the bus's figures
beside them (core/bus.py), then every device's analysis finished (its stalls,
core/stalls.py; its --event chains from the extra channels read in the same pass,
core/events.py; its --device labels, core/labels.py) into a ``result.Result``.
``spigap analyze`` and everything built on its result (check, compare, report,
trace, batch, decoders) take their result from here through spigap/api.py.
"""

from __future__ import annotations

import threading

from spigap.core import collect, infer
from spigap.core import stalls as stalls_mod
from spigap.core.config import SpiConfig
from spigap.core.pipeline import Pipeline
from spigap.core.result import Result
from spigap.errors import UsageError
from spigap.findings import by_cause
from spigap.io.base import CaptureReader


def analyze(reader: CaptureReader, cfg: SpiConfig, *, keep: str = "all", rows=None,
            stall_rule: stalls_mod.StallRule | None = None, events: list | tuple = (),
            channels: dict[str, str] | None = None, device: str | dict | None = None, **limits) -> Result:
    """Analyze one opened capture. ``keep``:

    * ``"all"``: every device an ``Analysis`` holding every transfer (what --device,
      --event, check and trace need);
    * ``"bounded"``: the same up to ``collect.RETAIN_TRANSFERS`` transfers, else a
      ``collect.BoundedAnalysis`` (histograms and counts) whose transfer rows went to
      ``rows`` as they were measured (``spigap analyze``);
    * ``"sample"``: past that bound an ``Analysis`` of a systematic sample of the
      transfers with the whole capture's totals (compare, report).

    ``rows(a, k0, k1, index0, message0)``: transfers k0..k1-1 of a device's measured
    batch ``a`` (``a.cfg.cs`` names the device; on a shared bus ``a.bus`` holds their bus
    columns). ``limits``: ``retain``, ``learn``, ``stall_keep``, ``block``
    (collect.Collector). ``stall_rule``: the stall search's rule (default StallRule()).

    ``events``: --event specs (core/events.EventSpec; on a shared bus each names its
    device): their channels ride in the same pass, each device's chains end at its
    transfers (``.events``). ``channels``: more extra channels to collect, {name: the
    option that named it} (``Result.edges``: every extra channel's edges). ``device``:
    --device, each transfer's meaning (core/labels.py) in ``.labels`` (a shared bus: {CS
    line: spec}, per device). Both need every transfer: keep "all"."""
    # (what a plain analysis does not use is imported when it is asked for: start-up time)
    extra = {s.channel: "--event CHANNEL:EDGE" for s in events if not s.is_spi} | dict(channels or {})
    tap = None
    if extra:
        from spigap.core.events import EdgeCollector

        tap = EdgeCollector(list(extra), extra)
    settled = infer.settle(reader, cfg, tap=tap)
    pipe = Pipeline(reader, settled.cfg, settled)
    tracker = pipe.tracker
    names = pipe.names
    feeds: list = []
    collectors: list[collect.Collector] = []
    if tracker is not None:
        from spigap.core.bus import BusGrouper, DeviceFeed
    for k, lane in enumerate(pipe.lanes):
        c = collect.Collector(lane, keep=keep, rows=rows, **limits,
                              grouper=None if tracker is None else BusGrouper(tracker.columns[k]))
        feed = None if tracker is None else DeviceFeed(names, tracker.columns[k], c.sampler)
        if feed is not None:
            c.measured = feed.measured
        collectors.append(c)
        feeds.append(feed)
    if tracker is not None:
        serial = threading.Lock()
        for c in collectors:
            c.serial = serial
    try:
        pipe.run(lambda k, batch: collectors[k].add(batch), take=keep != "all", lag=True)
        devices = {name: c.result() for name, c in zip(names, collectors)}
    finally:
        for c in collectors:
            c.close()             # after an error or Ctrl-C: what is still queued is dropped
    rule = stall_rule or stalls_mod.StallRule()
    for feed, a in zip(feeds, devices.values()):
        if feed is not None:
            a.bus = feed.finish(a)
        a.stalls = stalls_mod.report(a, rule)
    edges = tap.edges(pipe.end_tick or 0, pipe.info.tick_s) if tap is not None else {}
    # --event: each device's chains, ending at its own next transfer (a shared bus: the device
    # each event names)
    if events:
        from spigap.core import events as events_mod

        per = events_mod.for_devices(list(events), [n for n in names if n])
    _labels(devices, tracker, pipe.cfg, device)
    if events:
        for cs, own in per.items():
            a = devices[cs]
            a.events = events_mod.chains(a.kept(), own, edges, pipe.truncated)
    first = next(iter(devices.values()))
    if tracker is None:
        return Result(info=pipe.info, cfg=first.cfg, tick_s=pipe.info.tick_s, end_tick=first.end_tick,
                      truncated=first.truncated, engine=first.engine, devices=devices,
                      sources=first.sources, buses=first.buses, edges=edges)
    return Result(info=pipe.info, cfg=pipe.cfg, tick_s=pipe.info.tick_s, end_tick=pipe.end_tick or 0,
                  truncated=pipe.truncated, engine=first.engine, devices=devices, bus=tracker,
                  warnings=by_cause(list(settled.warnings) + tracker.warnings(pipe.info.tick_s)),
                  sources=settled.sources, buses=settled.buses, edges=edges)


def _labels(devices: dict, bus, cfg: SpiConfig, device) -> None:
    """--device: each transfer's meaning, per device (a shared bus: {CS line: spec})."""
    if not device:
        return
    names = list(devices)
    if bus is None:
        cs = cfg.cs
        if isinstance(device, dict):
            if cs not in device or len(device) > 1:
                raise UsageError(f"--device {', '.join(f'{k}=...' for k in device)}: the capture was analyzed as "
                                 f"one device ({cs or 'no CS line'}); give --device SPEC")
            device = device[cs]
        specs = {names[0]: device}
    else:
        if not isinstance(device, dict):
            raise UsageError(f"--device {device}: the capture holds {len(names)} devices on one bus "
                             f"({', '.join(names)}); say which: --device {names[0]}={device}")
        bad = [k for k in device if k not in devices]
        if bad:
            raise UsageError(f"--device {bad[0]}=...: {bad[0]} is not a device of this bus ({', '.join(names)})")
        specs = dict(device)
    from spigap.core import labels

    for cs, spec in specs.items():
        if not spec:
            continue
        a = devices[cs]
        a.device = spec
        a.labels = labels.label_transfers(a.kept(), spec)
