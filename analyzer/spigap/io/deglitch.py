"""Glitch filter on the edge stream (``--deglitch NS``), usable with every reader.

Rule, per channel: a change to a new level is kept only if the channel then
stays at that level for at least ``NS``; otherwise the pulse it starts is a
glitch and is dropped (and the change that ends it becomes a no-op). Kept
changes keep their original time, so a clean edge is not delayed; for a
bouncing edge (0-1-0-1 within NS) the edge lands where the line settles. This
is the glitch filter of logic-analyzer software (pulses shorter than the width
are ignored).

Streaming: a change can be decided once the next change of its channel is
known or once the stream has moved ``NS`` past it. Entries are held back from
the first undecided change on, so the buffer spans about ``NS`` plus one input
block. Everything is vectorized per block and per requested channel.
"""

from __future__ import annotations

import math
from typing import Iterator, Sequence

import numpy as np

from spigap.errors import CaptureTruncated
from spigap.findings import Cause, Finding
from spigap.io.base import CaptureReader, EdgeBlock


class Deglitch:
    """Stateful filter: ``feed(block)`` -> EdgeBlock or None; ``finish(end_tick)``."""

    def __init__(self, n_channels: int, min_ticks: float):
        self.n = n_channels
        self.min_ticks = float(min_ticks)
        self.t = np.empty(0, np.int64)      # held input entries (undecided region)
        self.s = np.empty(0, np.uint32)
        self.in_state: int | None = None    # input state before the held entries
        self.out_state: int | None = None   # output state emitted last
        self.started = False

    def feed(self, block: EdgeBlock) -> EdgeBlock | None:
        if len(block) == 0:
            return None
        t = np.asarray(block.ticks, np.int64)
        s = np.asarray(block.states, np.uint32)
        if not self.started:
            # tick 0 carries the initial levels: they pass unfiltered
            self.started = True
            self.in_state = self.out_state = int(s[0])
            first = EdgeBlock(t[:1], s[:1])
            t, s = t[1:], s[1:]
            rest = self._push(t, s, final_tick=None)
            if rest is None:
                return first
            return EdgeBlock(np.concatenate([first.ticks, rest.ticks]),
                             np.concatenate([first.states, rest.states]))
        return self._push(t, s, final_tick=None)

    def finish(self, end_tick: int | None) -> EdgeBlock | None:
        if not len(self.t):
            return None
        end = int(end_tick) if end_tick is not None else int(self.t[-1]) + 1
        return self._push(np.empty(0, np.int64), np.empty(0, np.uint32), final_tick=max(end, int(self.t[-1])))

    def _push(self, t, s, final_tick):
        if len(t):
            self.t = np.concatenate([self.t, t])
            self.s = np.concatenate([self.s, s])
        n = len(self.t)
        if n == 0:
            return None
        last_tick = final_tick if final_tick is not None else int(self.t[-1])
        prev = np.empty(n, np.uint32)
        prev[0] = self.in_state
        prev[1:] = self.s[:-1]
        changed = self.s ^ prev
        horizon = np.iinfo(np.int64).max if final_tick is None else None
        kept_masks = []
        for j in range(self.n):
            bit = np.uint32(1 << j)
            idx = np.flatnonzero(changed & bit)
            if len(idx) == 0:
                kept_masks.append(idx)
                continue
            tt = self.t[idx]
            dur = np.empty(len(idx), np.float64)
            dur[:-1] = np.diff(tt)
            dur[-1] = last_tick - tt[-1]
            keep = dur >= self.min_ticks
            if final_tick is None and not keep[-1]:
                # the last change may still turn out long enough: undecided
                horizon = min(horizon, int(tt[-1]))
            kept_masks.append(idx[keep])
        if final_tick is None:
            cut = int(np.searchsorted(self.t, horizon, side="left"))
        else:
            cut = n
        if cut == 0:
            return None
        # output state at every held entry < cut: per channel, the level of the
        # last kept change at or before it (forward fill), else the carried level
        out = np.zeros(cut, np.uint32)
        for j, kidx in enumerate(kept_masks):
            bit = np.uint32(1 << j)
            kidx = kidx[kidx < cut]
            carried = np.uint32(self.out_state) & bit
            if len(kidx) == 0:
                out |= carried
                continue
            pos = np.full(cut, -1, np.int64)
            pos[kidx] = kidx
            np.maximum.accumulate(pos, out=pos)
            out |= np.where(pos >= 0, self.s[np.maximum(pos, 0)] & bit, carried).astype(np.uint32)
        ticks = self.t[:cut]
        keep = np.empty(cut, bool)
        keep[0] = out[0] != self.out_state
        np.not_equal(out[1:], out[:-1], out=keep[1:])
        self.out_state = int(out[-1])
        self.in_state = int(self.s[cut - 1])
        self.t, self.s = self.t[cut:], self.s[cut:]
        if not keep.any():
            return None
        return EdgeBlock(ticks[keep], out[keep])


class DeglitchedReader(CaptureReader):
    """Wraps any reader; its edge stream is filtered with ``Deglitch``."""

    def __init__(self, inner: CaptureReader, ns: float):
        self.inner = inner
        self.ns = float(ns)
        self.format_name = inner.format_name
        self.info = inner.info
        self.min_ticks = self.ns * 1e-9 / inner.info.tick_s
        self.info.deglitch_ns = self.ns
        if self.ns > 0 and self.min_ticks <= 1:
            self.info.warnings.append(
                f"--deglitch {self.ns:g} ns is not longer than the resolution "
                f"({inner.info.tick_s * 1e9:.4g} ns): no pulse is short enough to be dropped")

    @property
    def end_tick(self):
        return self.inner.end_tick

    @end_tick.setter
    def end_tick(self, value):
        pass

    def edges(self, channels: Sequence[str]) -> Iterator[EdgeBlock]:
        flt = Deglitch(len(channels), self.min_ticks if math.isfinite(self.min_ticks) else 0.0)
        seen, kept = _Changes(len(channels)), _Changes(len(channels))
        try:
            for block in self.inner.edges(channels):
                seen.add(block)
                out = flt.feed(block)
                if out is not None:
                    kept.add(out)
                    yield out
        except CaptureTruncated:
            tail = flt.finish(self.inner.end_tick)
            if tail is not None:
                kept.add(tail)
                yield tail
            self._say_dropped(channels, seen, kept)
            raise
        tail = flt.finish(self.inner.end_tick)
        if tail is not None:
            kept.add(tail)
            yield tail
        self._say_dropped(channels, seen, kept)

    def _say_dropped(self, channels: Sequence[str], seen: "_Changes", kept: "_Changes") -> None:
        """A channel whose pulses the filter dropped (nearly) all of is no glitchy line: its pulses
        are shorter than --deglitch (SCLK at 3.6 MHz has 139 ns pulses; --deglitch 200 leaves no
        clock, and every figure after says "no SCLK edge" without saying why). Said once per
        channel, as a setting the signals contradict: first among the warnings (a CHECK line in
        check and compare)."""
        for k, name in enumerate(channels):
            n, m = int(seen.n[k]), int(kept.n[k])
            if n >= DROPPED_MIN_CHANGES and m <= DROPPED_SHARE * n:
                text = (f"--deglitch {self.ns:g} ns dropped {n - m} of {n} changes of {name}: its pulses are "
                        f"shorter than that, not glitches; give a --deglitch below its shortest real pulse")
                if text not in self.info.warnings:
                    self.info.warnings.append(Finding(text, Cause.SETTINGS))

    def channel_index(self, name: str, option: str = "--clk/--mosi/--miso/--cs") -> int:
        return self.inner.channel_index(name, option)

    def set_volts_tap(self, tap) -> None:
        self.inner.set_volts_tap(tap)       # the volts are not filtered: the pins see what was there

    def close(self) -> None:
        self.inner.close()


# a channel with at least this many changes, of which the filter kept at most this share: said
DROPPED_MIN_CHANGES = 16
DROPPED_SHARE = 0.1


class _Changes:
    """Changes per channel of an edge stream (bit k of the state word: channel k)."""

    def __init__(self, n_channels: int):
        self.n = np.zeros(n_channels, np.int64)
        self.last: int | None = None

    def add(self, block: EdgeBlock) -> None:
        s = np.asarray(block.states, np.uint32)
        if not len(s):
            return
        prev = s[0] if self.last is None else np.uint32(self.last)
        flips = s ^ np.concatenate([np.asarray([prev], np.uint32), s[:-1]])
        for k in range(len(self.n)):
            self.n[k] += np.count_nonzero(flips & np.uint32(1 << k))
        self.last = int(s[-1])
