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
said so). A line is read at the levels of every receiver it reaches: SCLK at the
device's and at the controller's (MISO's launch and sampling edges), MOSI and CS
at the device's, MISO at the controller's (``--rx-levels``, else the selected
device's: one logic family). On a shared bus each device has its own input levels
(``PinOptions.device_levels_by_cs``; a CMOS-input part and a TTL-input one on one
3.3 V bus switch at different points of the same edges): its CS line is read at
its levels, the shared SCLK and MOSI once per distinct set of levels, and each
device is measured at its own, as it would be alone. A logic capture's lines were
thresholded by the analyzer: one set of events serves every receiver.

A line's state levels (for rise time, overshoot, settling and the eye) and
noise come from the first chunk of its volts that shows two states (or from
another channel's, for a line that has not toggled yet: the SPI lines of one
bus share a logic family).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

from spigap.io.base import CaptureReader, EdgeBlock
from spigap.pins.crossings import AnalogLine, EventStore, LogicLine
from spigap.pins.eye import EyeFold, Ring
from spigap.pins.levels import Levels, from_swing, noise_rms, state_levels
from spigap.pins.measure import Lines, PinMeasurer
from spigap.pins.quality import SETTLE_BAND, EdgeShape

UNSETTLED_CAP = 1 << 22       # events kept per channel while the settings are not known yet


@dataclasses.dataclass(frozen=True)
class PinOptions:
    """What a pin measurement needs besides the capture."""

    device_levels: Levels | None = None       # VIL/VIH of the device's inputs (MOSI, SCLK, CS)
    controller_levels: Levels | None = None   # of the controller's MISO input; None: the device's
    # a shared bus: a device's own input levels by its CS line (the others: device_levels)
    device_levels_by_cs: Mapping[str, Levels] = dataclasses.field(default_factory=dict)
    eye: bool = True
    settle_band: float = SETTLE_BAND
    record: bool = False                      # keep every value too (tests against a generator's truth)
    rx_sample_delay: float = 0.0              # s the controller samples MISO after its clock edge (the DT's
                                              # rx-sample-delay-ns: not visible on the bus, so given)


# which receiver's levels a line is read at: a Levels as given, or None: 30/70 % of its own swing
Key = Levels | None


class _Channel:
    def __init__(self, name: str, digital: bool, keys: list[Key]):
        self.name = name
        self.digital = digital
        # the line's events at each receiver's levels it reaches; a logic line's are the
        # analyzer's edges, one store for every receiver
        one = EventStore(True)
        self.store: dict[Key, EventStore] = {k: one if digital else EventStore(False) for k in keys}
        self.lines: dict[Key, AnalogLine] = {}       # what feeds each analog store
        self.levels: dict[Key, Levels] = {}          # the levels each store is read at (None resolved)
        self.noise: float | None = None
        self.state: tuple[float, float] | None = None
        self.logic: LogicLine | None = None
        self.shape: EdgeShape | None = None
        self.ring: Ring | None = None                # a data line's latest samples, for the eyes
        self.eyes: dict[str | None, EyeFold] = {}    # each device's eye of the line (by its CS line)
        self.frontier = -np.inf
        self.dropped = False                # not one of the bus's lines (after settling)

    def stores(self) -> list[EventStore]:
        return list({id(s): s for s in self.store.values()}.values())

    def keep(self, keys: set[Key]) -> None:
        """Only the levels its receivers read it at (after settling)."""
        for k in [k for k in self.store if k not in keys]:
            del self.store[k]
            self.lines.pop(k, None)
            self.levels.pop(k, None)


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
        self.need: dict[str, set[Key]] | None = None     # each line's receivers' levels, once settled
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
        # the levels each line is read at: SCLK at its devices' and the controller's, MOSI and CS
        # at their devices', MISO at the controller's
        need: dict[str, set[Key]] = {}
        for cs, roles in self.device_roles.items():
            dev, ctl = self.dev_key(cs), self.ctl_key(cs)
            for role, n in roles.items():
                need.setdefault(n, set()).update((dev, ctl) if role == "clk" else (ctl,) if role == "miso" else (dev,))
        self.need = need
        for name, ch in self.channels.items():
            if name not in need:
                ch.dropped = True
                ch.store, ch.lines, ch.levels, ch.shape, ch.ring = {}, {}, {}, None, None
            else:
                ch.keep(need[name])
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
            dev, ctl = self.dev_key(cs), self.ctl_key(cs)
            lines = Lines(clk_dev=clk.store[dev], clk_ctl=clk.store[ctl], cs=ch["cs"].store[dev] if "cs" in ch else None,
                          mosi=ch["mosi"].store[dev] if "mosi" in ch else None,
                          miso=ch["miso"].store[ctl] if "miso" in ch else None)
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
            if self.need is None:       # before settling: at every receiver's levels given
                o = self.options
                keys = [o.device_levels, *o.device_levels_by_cs.values()]
                keys += [o.controller_levels] if o.controller_levels is not None else []
            else:
                keys = list(self.need.get(name, ()))
            ch = self.channels[name] = _Channel(name, digital, list(dict.fromkeys(keys)))
            ch.dropped = self.need is not None and name not in self.need
        return ch

    def dev_key(self, cs: str | None) -> Key:
        """The levels of device ``cs``'s inputs (SCLK, MOSI, its CS)."""
        o = self.options
        return o.device_levels_by_cs.get(cs, o.device_levels) if cs is not None else o.device_levels

    def ctl_key(self, cs: str | None) -> Key:
        """The levels of the controller's MISO input while device ``cs`` is selected: as given, else
        the device's (one logic family on the bus)."""
        return self.options.controller_levels if self.options.controller_levels is not None else self.dev_key(cs)

    def levels(self, cs: str | None, role: str) -> Levels | None:
        """The levels device ``cs``'s line ``role`` was read at (None: a logic line, or none yet)."""
        ch = self.channels.get(self.device_roles.get(cs, {}).get(role, ""))
        if ch is None:
            return None
        return ch.levels.get(self.ctl_key(cs) if role == "miso" else self.dev_key(cs))

    # ------------------------------------------------------------ logic channels
    def _logic(self, block: EdgeBlock, logic: list[tuple[int, str]]) -> None:
        last = int(block.ticks[-1])
        for j, name in logic:
            ch = self._channel(name, digital=True)
            if ch.dropped:
                continue
            if ch.logic is None:
                ch.logic = LogicLine(ch.stores()[0])
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
        for line in ch.lines.values():
            line.feed(t0, v)
        if ch.shape is not None:
            ch.shape.feed(t0, v)
        if ch.ring is not None:
            ch.ring.feed(t0, v)
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
        for key, store in ch.store.items():
            lv = ch.levels[key] = key if key is not None else from_swing(base, top, ch.name)
            ch.lines[key] = AnalogLine(lv.thresholds, ch.noise, store)
        if top - base > 0:
            ch.shape = EdgeShape(ch.name, base, top, ch.noise, band=o.settle_band)
        self._maybe_eye(ch)

    def _maybe_eye(self, ch: _Channel) -> None:
        """A data line of the bus with known levels gets its eye diagram (before the settings are
        known every analog line keeps its ring of samples: the settle prefix may be all there is)."""
        data = self.cfg is None or any(ch.name in (r.get("mosi"), r.get("miso")) for r in self.device_roles.values())
        if not data:
            ch.ring = None
        elif self.options.eye and ch.ring is None and not ch.digital and ch.state is not None:
            ch.ring = Ring()

    def _fold(self, cs: str | None, role: str, mids: np.ndarray) -> None:
        """Device ``cs``'s sampling edges of ``role`` onto its own eye of the data line, at its own
        period (a shared bus: each device's eye holds its own edges, as measured alone)."""
        name = self.device_roles[cs].get(role)
        ch = self.channels.get(name) if name else None
        half = self.measurers[cs].half
        if ch is None or ch.ring is None or ch.state is None or not half:
            return
        eye = ch.eyes.get(cs)
        if eye is None:
            eye = ch.eyes[cs] = EyeFold(ch.name, ch.state[0], ch.state[1], ch.ring)
        eye.fold(mids, half)

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
