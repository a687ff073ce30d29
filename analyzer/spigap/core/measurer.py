"""The incremental measurer: one device's batches of framed windows measured one after
another, in capture order, with what needs a population decided once.

``spigap analyze`` past 100 000 transfers (core/collect.py) and ``spigap monitor``
(core/monitor.py) both measure a capture batch by batch; both go through here:

* ``first``: the first batch (the learning stretch: ``collect.LEARN_TRANSFERS``
  transfers, the monitor's baseline) is measured as a whole capture would be, and
  fixes what needs a population: the message grouping (core/grouping/) and the
  inter-byte / inter-transfer threshold of the word gaps (unless given);
* ``next``: every later batch is measured after the last window measured before it
  (the context: it gives the gap before the batch's first window), its CS-inactive
  gaps grouped with the structure of the capture's start carried on (``carry``:
  its last stretch's pattern by the gap index, a split by length, or one population;
  a structure that does not carry on is inferred anew on the batch's own gaps, and
  the grouping's note says so), its word gaps split by the same threshold (one
  population stays one; the first batch with word gaps splits them when the first
  had none).

A capture that fits in memory is measured once, whole (``whole``). On a shared
bus a device's grouping knows which of its gaps held other devices' transfers
(``grouper``: core/bus.BusGrouper).
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

from spigap.core import grouping as grouping_mod
from spigap.core.analysis import Analysis
from spigap.core.config import SpiConfig
from spigap.core.framed import Framed, FramerFigures
from spigap.core.measure import measure, ticks_per_sample, word_gap_split
from spigap.io.base import CaptureInfo


class Measurer:
    def __init__(self, info: CaptureInfo, cfg: SpiConfig, grouper=None):
        self.info = info
        self.cfg = cfg
        self.tick_s = info.tick_s
        self.mcfg = cfg                   # cfg with the word-gap threshold decided on the first batch
        # a device of a shared bus groups its gaps knowing the other devices' transfers in them
        # (core/bus.BusGrouper: infer(gaps, g0=, **kw) and view(gaps, g0)); None: grouping.infer
        self.grouper = grouper
        self.grouping: grouping_mod.Grouping | None = None
        self.thr: float | None = None
        self.split_fixed = False          # the word-gap split is decided (threshold or none)
        self.wg_note = "no word gaps"
        self.wg_warning: str | None = None
        self.fallback_note: str | None = None
        self.context: Framed | None = None
        self.n_done = 0                   # transfers measured so far (the capture index of the next one)

    def infer(self, g0: int):
        """The grouping's inference for gaps from the one after transfer ``g0`` on."""
        if self.grouper is None:
            return grouping_mod.infer
        return functools.partial(self.grouper.infer, g0=g0)

    # ------------------------------------------------------------ the whole capture at once
    def whole(self, framed: Framed, figures: FramerFigures, end_tick: int, truncated: str | None) -> Analysis:
        """A capture that fits: every transfer, measured at once."""
        return measure(self.info, self.cfg, figures, framed, end_tick, truncated, infer=self.infer(0))

    # ------------------------------------------------------------ batch by batch
    def first(self, framed: Framed, figures: FramerFigures) -> Analysis:
        """Measure the first batch and fix what needs a population: grouping, word-gap split."""
        a = measure(self.info, self.cfg, figures, framed, _end_guess(framed), None, infer=self.infer(0))
        self.grouping = a.grouping
        self.thr, self.wg_note, self.wg_warning = word_gap_split(self.info, self.cfg, a.pair_gap)
        if self.thr is not None and self.cfg.inter_transfer_gap_s is None:
            self.mcfg = dataclasses.replace(self.cfg, inter_transfer_gap_s=self.thr * self.tick_s)
        # decided on these word gaps, as a whole capture is decided once: one population
        # (no threshold) stays one for the later batches
        self.split_fixed = len(a.pair_gap) > 0
        if a.n:
            self.context = framed.tail()
        self.n_done = a.n
        return a

    def next(self, parts: list[Framed], figures: FramerFigures) -> tuple[Analysis, int, int]:
        """Measure consecutive framer batches as one, after the context. Returns (the
        analysis, how many transfers in front of it are the context's, the capture index
        of its transfer 0)."""
        ctx = self.context
        batch = Framed.concat(([ctx] if ctx is not None else []) + parts)      # one copy
        skip = 1 if ctx is not None else 0
        g0 = self.n_done - skip                     # capture index of the batch's transfer 0
        grp = None
        if self.cfg.cs is not None:
            w = batch.windows
            grp = self.carry((w.start[1:] - w.end[:-1]).astype(float), g0)
        mcfg = self.mcfg
        if self.thr is None and self.split_fixed:
            mcfg = dataclasses.replace(mcfg, inter_transfer_gap_s=math.inf)     # no second population
        a = measure(self.info, mcfg, figures, batch, _end_guess(batch), None, grouping=grp)
        if self.thr is None and self.split_fixed:
            a.inter_transfer_threshold = None
        elif self.thr is not None:
            # the threshold itself (through seconds and back it may not give the same ticks)
            a.inter_transfer_threshold = self.thr
            a.pair_inter_transfer = a.pair_gap > self.thr
        elif a.inter_transfer_threshold is not None:
            # the first batches had no word gaps: the first that has some splits them
            _, self.wg_note, self.wg_warning = word_gap_split(self.info, self.cfg, a.pair_gap)
            self.thr = a.inter_transfer_threshold       # the same split measure() just made on these gaps
            self.mcfg = dataclasses.replace(self.cfg, inter_transfer_gap_s=a.inter_transfer_threshold * self.tick_s)
        self.context = parts[-1].tail()
        self.n_done += sum(p.n for p in parts)
        return a, skip, g0

    def carry(self, gaps: np.ndarray, g0: int) -> grouping_mod.Grouping:
        """The grouping of the CS-inactive gaps after transfer ``g0`` (``gaps``: ticks) with the
        structure of the capture's start carried on; on a shared bus the gaps as this
        device's grouping sees them (``grouper.view``). The one place a grouping goes on
        past the gaps it was found on."""
        g = self.grouping
        assert g is not None
        kinds = g.kinds_for(gaps if self.grouper is None else self.grouper.view(gaps, g0), g0)
        if kinds is None and len(g.kinds) == 0:
            kinds = np.full(len(gaps), grouping_mod.CONTEXT_SWITCH, np.int8)
        elif kinds is None:
            # not seen: every structure analyze infers is periodic or by length
            self.fallback_note = ("the message structure of the capture's start does not repeat: later "
                                  "batches were grouped on their own gaps")
            return self.infer(g0)(gaps, resolution=ticks_per_sample(self.info),
                                  context_switch=self.cfg.context_switch,
                                  device_lengths=self.cfg.message_lengths, tick_s=self.tick_s)
        return dataclasses.replace(g, kinds=np.asarray(kinds, np.int8))

    def noted(self, g: grouping_mod.Grouping) -> grouping_mod.Grouping:
        """The capture's grouping with the note of a structure that did not carry on."""
        if self.fallback_note:
            return dataclasses.replace(g, note=g.note + "; " + self.fallback_note)
        return g


def _end_guess(framed: Framed) -> int:
    e = framed.windows.end
    return int(e[-1]) + 1 if len(e) else 0
