"""The analysis pipeline: a reader's edges -> a framer per device -> batches of framed
windows. Every analysis of a capture runs through here, of one device or of a shared
bus (several CS lines on one SCLK: a bus of one device is the same pipeline with one).

1. ``infer.settle`` resolves the settings the user did not give (names, then a
   bounded prefix of the edge stream) and hands back the edge stream to frame;
2. ``Pipeline.run`` feeds the stream block by block (the one loop over it,
   ``feed_stream``) to each device's framer (the compiled core, or the numpy
   engine; on the compiled core a shared bus's framers are fed together in one pass
   over the block, cframer.CBusFramer) and, on a shared bus, the bus tracker
   (core/bus.py) with the CS changes the first framer writes out; it hands each
   device's batches of windows to a consumer, with the framer's running figures
   (``framed.Batch``); the last batch closes the capture at its end (or where it
   was cut short);
3. the consumers measure the batches (core/measurer.py): core/run.py's collectors
   for ``spigap analyze`` and everything built on its result, core/monitor.py for
   ``spigap monitor``.

docs/architecture.md draws it; docs/gaps.md defines what is measured.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from spigap.core import infer
from spigap.core.config import SpiConfig
from spigap.core.framed import Batch, FramerFigures
from spigap.core.framing import make_framer
from spigap.core.settings_check import Prefix
from spigap.errors import CaptureTruncated, InputError
from spigap.io.base import CaptureReader, EdgeBlock

if TYPE_CHECKING:
    from spigap.core.bus import BusTracker


def feed_stream(blocks, reader: CaptureReader, step: Callable[[EdgeBlock, int], None], *,
                interruptible: bool = False) -> tuple[int, str | None, bool]:
    """The one loop over a capture's edge stream: ``step(block, last tick fed)`` for every
    block, in capture order. Returns (the end tick, the reader's error when the capture is
    damaged — it ends where the reader could read no further —, whether Ctrl-C ended it:
    ``interruptible``, else Ctrl-C raises)."""
    last = 0
    truncated: str | None = None
    interrupted = False
    try:
        try:
            for block in blocks:
                if not len(block):
                    continue
                last = int(block.ticks[-1])      # first: a Ctrl-C inside the step ends after this block
                step(block, last)
        except CaptureTruncated as e:
            truncated = str(e)
    except KeyboardInterrupt:
        if not interruptible:
            raise
        interrupted = True
    end = reader.end_tick
    if end is None or interrupted:
        end = last + 1
    if end <= 0 and truncated is None:
        raise InputError("the capture holds no samples", path=reader.info.path,
                         hint="was the acquisition stopped before it started?")
    return end, truncated, interrupted


@dataclasses.dataclass
class Lane:
    """One device's part of the pipeline: what its consumer reads (its settings, the
    settled inference, its framer, a bounded start of its stream for the settings
    check) and, through ``pipeline``, how the feeding ended."""

    pipeline: "Pipeline"
    k: int                      # the device's place on the bus
    cfg: SpiConfig
    settled: infer.Settled
    framer: Any
    prefix: Prefix
    repack: list[int] | None = None     # a shared bus: the stream's bits of the device's own layout

    @property
    def name(self) -> str:
        return self.cfg.cs or ""

    @property
    def info(self):
        return self.pipeline.info

    @property
    def truncated(self) -> str | None:
        return self.pipeline.truncated

    @property
    def end_tick(self) -> int | None:
        return self.pipeline.end_tick

    @property
    def interrupted(self) -> bool:
        return self.pipeline.interrupted


class Pipeline:
    """One opened capture on its way through its devices' framers."""

    def __init__(self, reader: CaptureReader, cfg: SpiConfig, settled: infer.Settled | None = None):
        self.reader = reader
        self.info = reader.info
        # the resolved settings and the edge stream
        self.settled = settled if settled is not None else infer.settle(reader, cfg)
        self.cfg = self.settled.cfg
        self.devices = self._device_cfgs()
        # a measuring wrapper (pins/tap.py) starts from here, each device at its settings
        reader.settled(self.cfg, self.devices)
        self.truncated: str | None = None          # the reader's error when the capture is damaged
        self.interrupted = False                   # Ctrl-C ended the feeding (interruptible runs)
        self.end_tick: int | None = None
        self.tracker: BusTracker | None = None     # a shared bus's tracker (core/bus.py)
        self.group: Any = None                     # the compiled core's framer of every device (CBusFramer)
        self.lanes = self._lanes()

    @property
    def names(self) -> list[str]:
        return [lane.name for lane in self.lanes]

    def _device_cfgs(self) -> dict[str | None, SpiConfig]:
        """Each device's settings by its CS line, decided here only (the lanes, and through
        ``CaptureReader.settled`` the pin tap, take them from ``devices``): one device, the
        settled settings (a bus of one; its CS line may be None); a shared bus, each device's
        own (mode, word size, polarity: the SPI core sets them per device; core/infer/shared.py),
        else the bus's on its CS line."""
        cfg = self.cfg
        if not cfg.more_cs:
            return {cfg.cs: cfg}
        by_cs = {d.cs: d.cfg for d in self.settled.devices}
        return {n: by_cs[n] if n in by_cs else dataclasses.replace(cfg, cs=n, more_cs=()) for n in cfg.devices}

    def _lanes(self) -> list[Lane]:
        """A Lane per device of ``devices``. One device reads the stream in its own layout; a
        shared bus gives each device's framer its CS bit and settings, the first one the CS
        changes (the bus tracker's input), and makes the tracker."""
        settled, cfg = self.settled, self.cfg
        if len(self.devices) == 1:
            (dcfg,) = self.devices.values()
            return [Lane(self, 0, dcfg, settled, make_framer(dcfg, dcfg.stream_bits(), self.info.tick_s), Prefix())]
        names = [n for n in self.devices if n is not None]      # the CS lines
        full = {n: j for j, n in enumerate(settled.names)}
        assert cfg.clk is not None
        by_cs = {d.cs: d for d in settled.devices}
        cs_bits = [full[n] for n in names]
        actives = [0 if self.devices[n].cs_active_low else 1 for n in names]
        ev_mask = sum(1 << b for b in cs_bits)
        lanes = []
        for k, name in enumerate(names):
            d = by_cs.get(name)
            dcfg = self.devices[name]
            sources = d.sources if d is not None else dict(settled.sources)
            dsettled = dataclasses.replace(settled, cfg=dcfg, names=dcfg.stream_names(), sources=sources,
                                           warnings=[], devices=[])
            bits = {role: full[n] for role, n in (("clk", dcfg.clk), ("cs", name), ("mosi", dcfg.mosi),
                                                   ("miso", dcfg.miso)) if n is not None}
            # the first device's framer also writes every CS change (the bus tracker's input) and
            # counts the SCLK edges while no CS line is asserted
            bus = (ev_mask, ev_mask & ~(1 << full[name]),
                   sum((1 - a) << b for a, b, n in zip(actives, cs_bits, names) if n != name)) if k == 0 else (0, 0, 0)
            lanes.append(Lane(self, k, dcfg, dsettled, make_framer(dcfg, bits, self.info.tick_s, bus=bus), Prefix(),
                              [full[n] for n in dcfg.stream_names()]))
        from spigap.core.bus import BusTracker       # (imported for a shared bus only: start-up)

        self.tracker = BusTracker(list(names), cs_bits, actives, full[cfg.clk])
        # the compiled core frames every device in one pass (cframer.CBusFramer); the numpy
        # engine feeds each framer the block
        from spigap.core.cframer import CBusFramer, CFramer

        inner = [getattr(lane.framer, "inner", lane.framer) for lane in lanes]    # a BigWordFramer's chunk framer
        compiled = [f for f in inner if isinstance(f, CFramer)]
        self.group = CBusFramer(compiled) if len(compiled) == len(inner) else None
        return lanes

    def figures(self, lane: Lane) -> FramerFigures:
        f = FramerFigures.of(lane.framer)
        if self.tracker is None:
            return f
        # a device's framer counts the other devices' clock edges as outside its CS: the
        # bus's SCLK edges with no CS asserted are the tracker's
        return dataclasses.replace(f, clk_outside_cs=0, first_clk_outside=None)

    def run(self, on_batch: Callable[[int, Batch], None], *, take: bool = True, lag: bool = False,
            interruptible: bool = False) -> None:
        """Feed the whole edge stream to the framers (and the bus tracker) and hand each
        device's batches to ``on_batch(device index, batch)``.

        ``take``: a batch after every block (memory bounded by a block's windows), else
        one batch at the end; ``lag``: each batch holds the windows of the blocks before
        the latest (the compiled framer's workers frame the latest meanwhile);
        ``interruptible``: Ctrl-C while feeding or consuming ends the capture there (the
        last batch is still handed out), instead of raising. A damaged capture ends
        where the reader could read no further (``truncated``)."""
        step = self._step_one(on_batch, take, lag) if self.tracker is None else self._step_bus(on_batch, take, lag)
        # the one loop over the stream (feed_stream), every device's framer fed from it
        self.end_tick, self.truncated, self.interrupted = feed_stream(self.settled.blocks, self.reader, step,
                                                                      interruptible=interruptible)
        end = self.end_tick
        tracker = self.tracker
        if tracker is None:
            lane = self.lanes[0]
            on_batch(0, Batch(lane.framer.finish(end), FramerFigures.of(lane.framer), None))
            return
        if tracker.prev is None:
            tracker.begin(0, 0)
        finals = [Batch(lane.framer.finish(end), self.figures(lane), None) for lane in self.lanes]
        if self.group is not None:
            self.group.close()
        first = self.lanes[0].framer
        tracker.feed_events(first.last_events)
        tracker.stray = (int(first.clk_outside_cs), first.first_clk_outside)
        tracker.finish(end)
        for k, b in enumerate(finals):
            on_batch(k, b)

    def _step_one(self, on_batch, take: bool, lag: bool) -> Callable[[EdgeBlock, int], None]:
        lane = self.lanes[0]
        framer, prefix = lane.framer, lane.prefix

        def step(block: EdgeBlock, last: int) -> None:
            framer.feed(block)
            prefix.add(block.ticks, block.states)
            if take:
                on_batch(0, Batch(framer.take(lag=lag), FramerFigures.of(framer), last))
        return step

    def _step_bus(self, on_batch, take: bool, lag: bool) -> Callable[[EdgeBlock, int], None]:
        tracker = self.tracker
        assert tracker is not None
        lanes, group = self.lanes, self.group

        def step(block: EdgeBlock, last: int) -> None:
            if tracker.prev is None:
                tracker.begin(int(block.ticks[0]), int(block.states[0]))
            if group is not None:
                group.feed(block)
            for lane in lanes:
                if group is None:
                    lane.framer.feed(block)
                p = lane.prefix
                if p.n < p.limit:
                    assert lane.repack is not None
                    p.add(block.ticks, _repack(block.states[:p.limit - p.n], lane.repack))
            if take:
                batches = [Batch(lane.framer.take(lag=lag), self.figures(lane), last) for lane in lanes]
                # the CS changes the batches' windows start and end at (the first framer's):
                # the bus columns of every window handed out exist before it is measured
                tracker.feed_events(lanes[0].framer.last_events)
                for k, b in enumerate(batches):
                    on_batch(k, b)
        return step


def _repack(states: np.ndarray, src: list[int]) -> np.ndarray:
    """States re-packed with bit j = bit ``src[j]`` of the stream (a device's own layout)."""
    out = np.zeros(len(states), np.uint32)
    for j, b in enumerate(src):
        out |= ((states >> np.uint32(b)) & np.uint32(1)) << np.uint32(j)
    return out
