"""The result of analyzing one capture: every device on its bus, and the bus.

A capture of one device is a bus with one device: ``Result.devices`` holds each
device's analysis by its CS line (one entry for one device; an ``Analysis`` of
every transfer, or past 100 000 transfers core/collect.py's ``BoundedAnalysis``,
both read through ``analysis.DeviceFigures``), and ``Result.bus`` the bus-level
figures (core/bus.BusTracker: handovers, busy time, two CS lines at once, queueing;
each device's interleaving is its ``bus``), None for one device. Made by core/run.py
in one pass over the capture, finished there (stalls, --event chains) and in
spigap/api.py (--device labels); every output and command reads it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from spigap.core.analysis import DeviceFigures
from spigap.core.config import SpiConfig
from spigap.errors import UsageError
from spigap.io.base import CaptureInfo


@dataclasses.dataclass
class Result:
    info: CaptureInfo
    cfg: SpiConfig                       # the settings analyzed with (a shared bus: every CS line in ``devices``)
    tick_s: float
    end_tick: int
    truncated: str | None                # the reader's error when the capture is damaged
    engine: str
    devices: Mapping[str, DeviceFigures]    # CS line (one device without CS: "") -> its analysis
    bus: Any = None                      # core/bus.Bus of several devices; None for one
    warnings: list[str] = dataclasses.field(default_factory=list)    # the bus's (a device's are its own)
    sources: dict = dataclasses.field(default_factory=dict)          # where each setting came from (core/infer/)
    buses: list = dataclasses.field(default_factory=list)            # every SPI bus the signals show
    # extra channels' edges (--event, --sync-channel: core/events.ChannelEdges), read in the same pass
    edges: dict = dataclasses.field(default_factory=dict)

    @property
    def names(self) -> list[str]:
        return list(self.devices)

    @property
    def device(self) -> DeviceFigures:
        """The analysis of a capture of one device (a shared bus: say which, ``devices[CS]``)."""
        if len(self.devices) != 1:
            raise UsageError(f"the capture holds {len(self.devices)} devices on one bus "
                             f"({', '.join(self.devices)}): take one, result.devices[CS] (or --cs NAME)",
                             path=self.info.path)
        return next(iter(self.devices.values()))
