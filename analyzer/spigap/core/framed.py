"""What a framer hands out: batches of framed CS windows with their words, and the
interface both framers implement.

A ``Framed`` batch is the unit of the analysis pipeline (core/pipeline.py): the
framer hands out the windows closed since its last ``take()``; the measurement
(core/measure.py) turns a batch into per-transfer gap figures. Every time is an
integer number of ticks (one tick = the capture's resolution).
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

import numpy as np

from spigap.io.base import EdgeBlock


@dataclasses.dataclass
class Windows:
    """Per CS window (= one transfer), in capture order."""

    start: np.ndarray           # int64: CS assert (or the first SCLK edge without CS)
    end: np.ndarray             # int64: CS deassert (or the last SCLK edge without CS)
    partial_start: np.ndarray   # bool: CS already active at the start of the capture
    partial_end: np.ndarray     # bool: still active at its end
    clk_ok: np.ndarray          # bool: SCLK at its idle level when CS was asserted
    n_edges: np.ndarray         # int64: SCLK edges inside the window
    n_bits: np.ndarray          # int64: sampling edges
    n_words: np.ndarray         # int64: whole words (n_bits // wordsize)
    first_edge: np.ndarray      # int64: first SCLK edge, -1 without one
    last_edge: np.ndarray       # int64: last SCLK edge, -1 without one
    min_half: np.ndarray        # int64: shortest half period inside a word, -1 without one


@dataclasses.dataclass
class Words:
    """Per word, flat: window k owns the next ``Windows.n_words[k]`` words."""

    mosi: np.ndarray            # uint64 (object: Python ints above 64 bits)
    miso: np.ndarray
    first: np.ndarray           # int64: first edge the word's bits own
    last: np.ndarray            # int64: last edge the word's bits own


def _columns(cls) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


WINDOW_COLUMNS = _columns(Windows)
WORD_COLUMNS = _columns(Words)


@dataclasses.dataclass
class Framed:
    """A batch of framed windows and their words."""

    windows: Windows
    words: Words

    @property
    def n(self) -> int:
        return len(self.windows.start)

    @property
    def n_words(self) -> int:
        return len(self.words.first)

    @classmethod
    def concat(cls, parts: list["Framed"]) -> "Framed":
        """Consecutive batches as one (one copy)."""
        if len(parts) == 1:
            return parts[0]
        return cls(Windows(**{k: np.concatenate([getattr(p.windows, k) for p in parts]) for k in WINDOW_COLUMNS}),
                   Words(**{k: np.concatenate([getattr(p.words, k) for p in parts]) for k in WORD_COLUMNS}))

    def tail(self) -> "Framed":
        """The last window with its words: the context the next batch is measured after
        (it gives the gap before that batch's first window)."""
        nw = int(self.windows.n_words[-1])
        words = {k: getattr(self.words, k) for k in WORD_COLUMNS}
        return Framed(Windows(**{k: getattr(self.windows, k)[-1:] for k in WINDOW_COLUMNS}),
                      Words(**{k: (v[len(v) - nw:] if nw else v[:0]) for k, v in words.items()}))


class Framer(Protocol):
    """Both engines: core/framing.NumpyFramer (numpy, the oracle) and core/cframer.CFramer
    (the compiled core), and core/bigwords.BigWordFramer around either."""

    @property
    def engine(self) -> str:
        """"c" or "numpy"."""

    @property
    def idle_timeout(self) -> int | None:
        """Without CS: the idle SCLK time that ends a window, in ticks."""

    @property
    def clk_outside_cs(self) -> int:
        """SCLK edges while CS was inactive, so far."""

    @property
    def first_clk_outside(self) -> int | None:
        """The tick of the first of them."""

    @property
    def min_high(self) -> int | None:
        """The shortest SCLK high phase inside a word, so far."""

    @property
    def min_low(self) -> int | None:
        """The shortest SCLK low phase inside a word, so far."""

    @property
    def last_events(self) -> np.ndarray:
        """A shared bus's first device (core/pipeline.py): rows (tick, state) of the entries
        where a CS line changed, handed out with the last ``take`` (empty otherwise)."""

    def feed(self, block: EdgeBlock) -> None:
        """Frame one block of the edge stream (blocks in capture order)."""

    def take(self, lag: bool = False) -> Framed:
        """The windows closed so far, handed out once (``lag``: those of the blocks fed
        before the latest one)."""

    def finish(self, end_tick: int) -> Framed:
        """The windows not taken yet, the one still open closed at ``end_tick``."""

    def pending_start(self) -> int | None:
        """Start tick of the first window not handed out yet, else None."""

    def period_ticks(self) -> float | None:
        """The SCLK period so far (mean of the sampling-edge spacings in the central band)."""


@dataclasses.dataclass(frozen=True)
class FramerFigures:
    """What a measurement reads from the framer besides the windows: its running,
    capture-wide figures at one moment (taken with each batch, so a batch measured
    later, in another thread, reads them as they were when it was taken)."""

    period_ticks: float | None
    idle_timeout: int | None
    engine: str
    clk_outside_cs: int
    first_clk_outside: int | None
    min_high: int | None
    min_low: int | None

    @classmethod
    def of(cls, framer: Framer) -> "FramerFigures":
        return cls(framer.period_ticks(), framer.idle_timeout, framer.engine, framer.clk_outside_cs,
                   framer.first_clk_outside, framer.min_high, framer.min_low)


@dataclasses.dataclass
class Batch:
    """One step of the pipeline: the windows framed since the last batch, the framer's
    figures when they were taken, and how far the edge stream was fed (``fed_to``: the
    last tick fed, None for the last batch, which closes the capture)."""

    framed: Framed
    figures: FramerFigures
    fed_to: int | None

    @property
    def final(self) -> bool:
        return self.fed_to is None
