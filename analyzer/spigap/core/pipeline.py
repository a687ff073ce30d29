"""The analysis pipeline: a reader's edges -> the framer -> batches of framed windows
-> measurement. Every analysis of a capture runs through here.

1. ``infer.settle`` resolves the settings the user did not give (names, then a
   bounded prefix of the edge stream) and hands back the edge stream to frame;
2. ``Pipeline.run`` feeds the stream block by block to the framer (the compiled
   core, or the numpy engine) and hands each batch of windows it closed to a
   consumer, with the framer's running figures (``framed.Batch``); the last
   batch closes the capture at its end (or where it was cut short);
3. the consumer measures the batches (``measure.measure``):
   ``collect.Collector`` for ``spigap analyze`` and everything built on its
   result (check, compare, report, trace, batch: ``analyze`` below), and
   ``monitor.Monitor`` for ``spigap monitor``, interval by interval.

docs/architecture.md draws it; docs/gaps.md defines what is measured.
"""

from __future__ import annotations

from typing import Callable

from spigap.core import collect, infer
from spigap.core.config import SpiConfig
from spigap.core.framed import Batch, FramerFigures
from spigap.core.framing import make_framer
from spigap.core.settings_check import Prefix
from spigap.errors import CaptureTruncated, InputError
from spigap.io.base import CaptureReader, EdgeBlock


def feed_stream(blocks, reader: CaptureReader, step: Callable[[EdgeBlock, int], None], *,
                interruptible: bool = False) -> tuple[int, str | None, bool]:
    """The one loop over a capture's edge stream: ``step(block, last tick fed)`` for every
    block, in capture order. Returns (the end tick, the reader's error when the capture is
    damaged — it ends where the reader could read no further —, whether Ctrl-C ended it:
    ``interruptible``, else Ctrl-C raises). ``Pipeline.run`` and core/shared.py's pipeline
    of several framers feed through it."""
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


class Pipeline:
    """One opened capture on its way through the framer."""

    def __init__(self, reader: CaptureReader, cfg: SpiConfig, settled: infer.Settled | None = None):
        self.reader = reader
        self.info = reader.info
        # the resolved settings and the edge stream
        self.settled = settled if settled is not None else infer.settle(reader, cfg)
        self.cfg = self.settled.cfg
        reader.settled(self.cfg)                   # a measuring wrapper (pins/tap.py) starts from here
        self.framer = make_framer(self.cfg, self.cfg.stream_bits(), self.info.tick_s)
        self.prefix = Prefix()                     # a bounded start of the stream, for the settings check
        self.truncated: str | None = None          # the reader's error when the capture is damaged
        self.interrupted = False                   # Ctrl-C ended the feeding (interruptible runs)
        self.end_tick: int | None = None

    def run(self, on_batch: Callable[[Batch], None], *, take: bool = True, lag: bool = False,
            interruptible: bool = False) -> None:
        """Feed the whole edge stream to the framer and hand the batches to ``on_batch``.

        ``take``: a batch after every block (memory bounded by a block's windows), else
        one batch at the end; ``lag``: each batch holds the windows of the blocks before
        the latest (the compiled framer's workers frame the latest meanwhile);
        ``interruptible``: Ctrl-C while feeding or consuming ends the capture there (the
        last batch is still handed out), instead of raising. A damaged capture ends
        where the reader could read no further (``truncated``)."""
        def step(block: EdgeBlock, last: int) -> None:
            self.framer.feed(block)
            self.prefix.add(block.ticks, block.states)
            if take:
                on_batch(Batch(self.framer.take(lag=lag), FramerFigures.of(self.framer), last))

        self.end_tick, self.truncated, self.interrupted = feed_stream(self.settled.blocks, self.reader, step,
                                                                      interruptible=interruptible)
        end = self.end_tick
        on_batch(Batch(self.framer.finish(end), FramerFigures.of(self.framer), None))


def analyze(reader: CaptureReader, cfg: SpiConfig, *, keep: str = "all", rows=None, **limits):
    """Analyze one opened capture. ``keep``:

    * ``"all"``: an ``Analysis`` holding every transfer (what --device, --event,
      check and trace need);
    * ``"bounded"``: the same ``Analysis`` up to ``collect.RETAIN_TRANSFERS``
      transfers, else a ``collect.BoundedAnalysis`` (histograms and counts) whose
      transfer rows went to ``rows`` as they were measured (``spigap analyze``);
    * ``"sample"``: past that bound an ``Analysis`` of a systematic sample of the
      transfers with the whole capture's totals (compare, report).

    ``limits``: ``retain``, ``learn``, ``stall_keep``, ``block`` (collect.Collector).

    Several CS lines on the clock (``--cs CE0,CE1``, or found in the signals): a
    ``shared.SharedAnalysis`` of every device and the bus (core/shared.py; ``rows``
    then takes the device's bus columns too)."""
    settled = infer.settle(reader, cfg)
    if settled.cfg.more_cs:
        from spigap.core import shared

        return shared.analyze(reader, settled, keep=keep, rows=rows, **limits)
    pipe = Pipeline(reader, cfg, settled)
    col = collect.Collector(pipe, keep=keep, rows=rows, **limits)
    try:
        pipe.run(col.add, take=keep != "all", lag=True)
        return col.result()
    finally:
        col.close()             # after an error or Ctrl-C: what is still queued is dropped
