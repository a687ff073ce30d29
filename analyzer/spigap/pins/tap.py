"""The pin measurement as a consumer of the capture's one pass.

``PinTap`` wraps the opened capture reader (as io/deglitch.py's filter does):
the edge stream passes through it unchanged on its way to the pipeline, and it
keeps the logic channels' edges; the analog channels' volts reach it from the
reader itself (``CaptureReader.set_volts_tap``: the scope readers hand every
chunk of volts they threshold to the tap too, so the file is read once). Once
the pipeline has settled the SPI settings (``settled``: which channel is SCLK,
MOSI, MISO, CS; the mode) the measurement pairs the lines as they come
(measure.py). Before that it only keeps the lines' events (the settle prefix is
bounded).

A channel's levels: the receiver's VIL/VIH as given (a device file's, per
supply; ``--pin-levels``), else 30/70 % of the line's own swing (assumed, and
said so). Its state levels (for rise time, overshoot, settling and the eye) and
noise come from the first chunk of its volts that shows two states (or from
another channel's, for a line that has not toggled yet: the SPI lines of one
bus share a logic family).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterator, Sequence

import numpy as np

from spigap.io.base import CaptureReader, EdgeBlock
from spigap.pins.crossings import AnalogLine, EventStore, LogicLine
from spigap.pins.eye import EyeFold
from spigap.pins.levels import Levels, from_swing, noise_rms, state_levels
from spigap.pins.measure import Lines, PinMeasurer
from spigap.pins.quality import SETTLE_BAND, EdgeShape

UNSETTLED_CAP = 1 << 22       # events kept per channel while the settings are not known yet


@dataclasses.dataclass(frozen=True)
class PinOptions:
    """What a pin measurement needs besides the capture."""

    device_levels: Levels | None = None       # VIL/VIH of the device's inputs (MOSI, SCLK, CS)
    controller_levels: Levels | None = None   # of the controller's MISO input; None: the device's
    eye: bool = True
    settle_band: float = SETTLE_BAND
    record: bool = False                      # keep every value too (tests against a generator's truth)
    rx_sample_delay: float = 0.0              # s the controller samples MISO after its clock edge (the DT's
                                              # rx-sample-delay-ns: not visible on the bus, so given)


class _Channel:
    def __init__(self, name: str, digital: bool):
        self.name = name
        self.digital = digital
        self.dev = EventStore(digital)
        self.ctl = self.dev                 # a separate store when the controller's levels differ
        self.noise: float | None = None
        self.state: tuple[float, float] | None = None
        self.lines: list[AnalogLine] = []
        self.logic: LogicLine | None = None
        self.shape: EdgeShape | None = None
        self.eye: EyeFold | None = None
        self.dev_levels: Levels | None = None
        self.ctl_levels: Levels | None = None
        self.frontier = -np.inf
        self.dropped = False                # not one of the bus's lines (after settling)

    def stores(self) -> list[EventStore]:
        return [self.dev] if self.ctl is self.dev else [self.dev, self.ctl]


class PinTap(CaptureReader):
    """A capture reader that measures timing at the pins of the stream it passes on."""

    def __init__(self, inner: CaptureReader, options: PinOptions):
        self.inner = inner
        self.options = options
        self.format_name = inner.format_name
        self.info = inner.info
        self.channels: dict[str, _Channel] = {}
        # one measurer per device of the bus (one device: a bus of one; a shared bus: each CS
        # line's windows, at its own mode and polarity), all over the same SCLK/MOSI/MISO
        # stores; keyed by the device's CS line
        self.measurers: dict[str | None, PinMeasurer] = {}
        self.device_roles: dict[str | None, dict[str, str]] = {}     # each device's role -> channel
        self.device_cfgs: dict[str | None, Any] = {}
        self.cfg: Any = None                 # the pipeline's SpiConfig, once settled
        self.notes: list[str] = []
        self._pooled: tuple[float, float, float] | None = None     # (base, top, noise) of the first line seen
        self._stores: list[EventStore] = []   # every store a measurer reads, once each
        self._cut = -np.inf                   # the stores are cut up to here
        self._unsettled = 0
        self._gave_up = False

    @property
    def end_tick(self):
        return self.inner.end_tick

    @end_tick.setter
    def end_tick(self, value):
        pass

    def close(self) -> None:
        self.inner.close()

    # ------------------------------------------------------------ the stream
    def edges(self, channels: Sequence[str]) -> Iterator[EdgeBlock]:
        names = [self.info.channels[self.channel_index(c)] for c in channels]
        analog = set(self.info.analog_channels)
        self.inner.set_volts_tap(self._volts)
        logic = [(j, n) for j, n in enumerate(names) if n not in analog]
        for block in self.inner.edges(channels):
            if logic:
                self._logic(block, logic)
            yield block

    def settled(self, cfg, devices: dict | None = None) -> None:
        """The pipeline's settings are known: measure the bus's lines from now on. ``devices``:
        each device's settings by its CS line (core/pipeline.py; one device: a bus of one), each
        measured in its own CS windows."""
        self.cfg = cfg
        self.device_cfgs = dict(devices) if devices else {cfg.cs: cfg}
        for cs, dcfg in self.device_cfgs.items():
            roles = {r: getattr(dcfg, r) for r in ("clk", "mosi", "miso")} | {"cs": cs}
            self.device_roles[cs] = {r: n for r, n in roles.items() if n is not None}
        used = {n for roles in self.device_roles.values() for n in roles.values()}
        for name, ch in self.channels.items():
            if name not in used:
                ch.dropped = True
                ch.lines, ch.shape, ch.eye = [], None, None
                ch.dev = ch.ctl = EventStore(ch.digital)
            else:
                self._maybe_eye(ch)
        if not all("clk" in r for r in self.device_roles.values()):
            self.notes.append("no SCLK line: nothing to measure at the pins")
            return
        self._start()

    def _start(self) -> None:
        if self.measurers:
            return
        analog = set(self.info.analog_channels)
        for cs, r in self.device_roles.items():
            cfg = self.device_cfgs[cs]
            ch = {role: self._channel(n, digital=n not in analog) for role, n in r.items()}
            clk = ch["clk"]
            lines = Lines(clk_dev=clk.dev, clk_ctl=clk.ctl, cs=ch["cs"].dev if "cs" in ch else None,
                          mosi=ch["mosi"].dev if "mosi" in ch else None,
                          miso=ch["miso"].ctl if "miso" in ch else None)
            fold = (lambda role, mids, cs=cs: self._fold(cs, role, mids)) if self.options.eye else None
            self.measurers[cs] = PinMeasurer(lines, cpol=cfg.cpol, cpha=cfg.cpha, cs_active_low=cfg.cs_active_low,
                                             names=dict(r), digital=clk.digital, on_sampling=fold,
                                             record=self.options.record,
                                             rx_delay=self.options.rx_sample_delay / self.info.tick_s)
        self._stores = list({id(s): s for m in self.measurers.values() for s in m.lines.all()}.values())
        self._after_input()

    def _channel(self, name: str, digital: bool) -> _Channel:
        ch = self.channels.get(name)
        if ch is None:
            ch = self.channels[name] = _Channel(name, digital)
            if not digital and self._separate_ctl():
                ch.ctl = EventStore(False)
        return ch

    def _separate_ctl(self) -> bool:
        o = self.options
        return o.controller_levels is not None and o.controller_levels != o.device_levels

    # ------------------------------------------------------------ logic channels
    def _logic(self, block: EdgeBlock, logic: list[tuple[int, str]]) -> None:
        last = int(block.ticks[-1])
        for j, name in logic:
            ch = self._channel(name, digital=True)
            if ch.dropped:
                continue
            if ch.logic is None:
                ch.logic = LogicLine(ch.dev)
            bits = ((block.states >> np.uint32(j)) & np.uint32(1)).astype(np.int8)
            ch.logic.feed(block.ticks, bits, last)
            ch.frontier = last
        self._after_input()

    # ------------------------------------------------------------ analog channels
    def _volts(self, name: str, t0: int, v: np.ndarray) -> None:
        ch = self._channel(name, digital=False)
        if ch.dropped or self._gave_up:
            return
        v = np.asarray(v, np.float64)
        if ch.noise is None:
            ch.noise = noise_rms(v)
        if ch.state is None:
            ch.state = state_levels(v, ch.noise)
            if ch.state is None and self._pooled is not None:
                ch.state = self._pooled[:2]
            if ch.state is not None and self._pooled is None:
                self._pooled = (*ch.state, ch.noise)
        if ch.state is not None and not ch.lines:
            self._make_lines(ch)
        if not ch.lines:                         # no levels yet (a flat line): only time moves on
            for s in ch.stores():
                s.frontier = float(t0 + len(v) - 1)
            return
        for line in ch.lines:
            line.feed(t0, v)
        if ch.shape is not None:
            ch.shape.feed(t0, v)
        if ch.eye is not None:
            ch.eye.feed(t0, v)
        ch.frontier = float(t0 + len(v) - 1)
        if not self.measurers:
            self._unsettled += sum(len(s) for s in ch.stores())
            if self._unsettled > UNSETTLED_CAP:
                self._gave_up = True
                self.notes.append("the SPI settings were not known before the lines' events filled the "
                                  "buffer: the pins were not measured")
        self._after_input()

    def _make_lines(self, ch: _Channel) -> None:
        o = self.options
        assert ch.state is not None and ch.noise is not None
        base, top = ch.state
        dev = o.device_levels or from_swing(base, top, ch.name)
        ctl = o.controller_levels or dev
        ch.dev_levels, ch.ctl_levels = dev, ctl
        ch.lines = [AnalogLine(dev.thresholds, ch.noise, ch.dev)]
        if ch.ctl is not ch.dev:
            ch.lines.append(AnalogLine(ctl.thresholds, ch.noise, ch.ctl))
        if top - base > 0:
            ch.shape = EdgeShape(ch.name, base, top, ch.noise, band=o.settle_band)
        self._maybe_eye(ch)

    def _maybe_eye(self, ch: _Channel) -> None:
        """A data line of the bus with known levels gets its eye diagram (before the settings are
        known every analog line keeps its ring of samples: the settle prefix may be all there is)."""
        data = self.cfg is None or any(ch.name in (r.get("mosi"), r.get("miso")) for r in self.device_roles.values())
        if not data:
            ch.eye = None
        elif self.options.eye and ch.eye is None and not ch.digital and ch.state is not None:
            ch.eye = EyeFold(ch.name, ch.state[0], ch.state[1])

    def _fold(self, cs: str | None, role: str, mids: np.ndarray) -> None:
        """Device ``cs``'s sampling edges of ``role`` onto its data line's eye, at its own period."""
        name = self.device_roles[cs].get(role)
        ch = self.channels.get(name) if name else None
        half = self.measurers[cs].half
        if ch is not None and ch.eye is not None and half:
            ch.eye.fold(mids, half)

    def _after_input(self) -> None:
        """Measure what the lines now allow, device by device; the devices read the same
        SCLK/MOSI/MISO stores (one device: a bus of one): cut them once, where none needs more."""
        if not self.measurers:
            return
        cuts = [m.advance() for m in self.measurers.values()]
        known = [c for c in cuts if c is not None]
        if len(known) < len(cuts):
            return
        cut = min(known)
        if cut > self._cut:
            self._cut = cut
            for s in self._stores:
                s.trim(cut)

    # ------------------------------------------------------------ the end
    def finish(self) -> None:
        for s in self._stores:
            s.frontier = np.inf
        for m in self.measurers.values():
            m.advance(final=True)
        for ch in self.channels.values():
            if ch.shape is not None:
                ch.shape.finish()

    def results(self) -> dict:
        """Each device's measurement (pins/result.py's ``PinResult``) by its CS line, once the
        stream has ended."""
        from spigap.pins.result import from_tap

        self.finish()
        return {cs: from_tap(self, cs) for cs in (self.device_roles or {None: {}})}
