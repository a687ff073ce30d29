"""The one small interface every capture reader implements.

A reader turns a file into an *edge stream*: blocks of (tick, state) pairs in
time order, where ``state`` packs the levels of the requested channels (bit j =
channel j of the request) *after* every change at that tick. A tick is the
capture's time resolution (one sample period for sampled formats, the timescale
for VCD). The first entry of the first block is tick 0 with the initial levels;
after that an entry appears only where at least one requested channel changes.

Everything downstream (framing, gap measurement) works on this stream only, so
a new format needs nothing but a reader.
"""

from __future__ import annotations

import dataclasses
from typing import Iterator, Sequence

import numpy as np

from analyzer.errors import UsageError


@dataclasses.dataclass
class EdgeBlock:
    """A run of changes. ``ticks`` int64, strictly increasing; ``states`` uint32."""

    ticks: np.ndarray
    states: np.ndarray

    def __len__(self) -> int:
        return len(self.ticks)


@dataclasses.dataclass
class CaptureInfo:
    path: str
    format: str                      # e.g. "sigrok .sr v2"
    channels: list[str]              # logic channel names, in capture order
    tick_s: float                    # seconds per tick = resolution
    samplerate_hz: float | None      # None for event-based formats
    n_ticks: int | None              # capture length in ticks, if known before reading
    warnings: list[str] = dataclasses.field(default_factory=list)
    # default SPI channel map stored in the file itself ({role: channel name}, e.g. a
    # DSView .dsl's decoder settings); used for roles the user does not name
    spi_channels: dict[str, str] = dataclasses.field(default_factory=dict)
    details: dict = dataclasses.field(default_factory=dict)

    @property
    def resolution_s(self) -> float:
        return self.tick_s


class CaptureReader:
    """Base class of all readers. Subclasses set ``info`` in ``__init__``.

    ``edges(channels)`` yields EdgeBlocks and, on a damaged file, raises
    ``CaptureTruncated`` after the last good block; ``end_tick`` is valid once
    the iterator is exhausted (or has raised).
    """

    format_name = "?"
    info: CaptureInfo
    end_tick: int | None = None

    def edges(self, channels: Sequence[str]) -> Iterator[EdgeBlock]:  # pragma: no cover
        raise NotImplementedError

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def channel_index(self, name: str) -> int:
        """Index of a channel by exact name, else case-insensitive name."""
        names = self.info.channels
        if name in names:
            return names.index(name)
        folded = [n.lower() for n in names]
        if name.lower() in folded and folded.count(name.lower()) == 1:
            return folded.index(name.lower())
        raise UsageError(f"no channel named {name!r}; the capture has: {', '.join(names)}",
                         path=self.info.path, hint="pick one with --clk/--mosi/--miso/--cs")


def edges_from_rows(ticks: np.ndarray, states: np.ndarray, state: int, started: bool):
    """Timestamped rows -> the edge stream, for readers of row-based formats (CSV).

    Several rows may share a tick (the last one wins). The first call of a
    stream (``started`` False) emits tick 0 with the first row's levels; after
    that only rows whose levels differ from the previous ones. Returns
    (EdgeBlock or None, the last levels, started)."""
    last = np.empty(len(ticks), bool)
    last[-1] = True
    np.not_equal(ticks[1:], ticks[:-1], out=last[:-1])
    t, s = ticks[last], states[last]
    out_t, out_s = [], []
    if not started:
        started = True
        out_t.append(np.zeros(1, np.int64))
        out_s.append(s[:1])
        state = int(s[0])
        if t[0] == 0:
            t, s = t[1:], s[1:]
    if len(t):
        prev = np.empty(len(s), np.uint32)
        prev[0] = state
        prev[1:] = s[:-1]
        chg = s != prev
        out_t.append(t[chg])
        out_s.append(s[chg])
        state = int(s[-1])
    tt = np.concatenate(out_t) if out_t else np.empty(0, np.int64)
    if len(tt) == 0:
        return None, state, started
    return EdgeBlock(tt.astype(np.int64), np.concatenate(out_s).astype(np.uint32)), state, started
