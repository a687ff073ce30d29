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

import abc
import contextlib
import dataclasses
import errno
import functools
import importlib
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np

from spigap.errors import InputError, UsageError
from spigap.infile import note_input
from spigap.limits import STREAM_CHANNELS


@dataclasses.dataclass
class EdgeBlock:
    """A run of changes. ``ticks`` int64, strictly increasing; ``states`` uint32 (so one
    stream holds at most spigap.limits.STREAM_CHANNELS channels; ``check_width``)."""

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
    # where tick_s comes from: "metadata", "--samplerate", "$timescale", "comment",
    # "timestamps", "file", "inferred", ... (format-specific words, for reports)
    resolution_source: str | None = None
    samplerate_metadata: str | None = None   # the rate exactly as the file states it
    time_offset_s: float | None = None       # file time of tick 0 (formats with absolute times)
    analog_channels: list[str] = dataclasses.field(default_factory=list)   # thresholded to logic
    analog_asked: bool = False               # the user gave --threshold (analog channels may be data lines)
    thresholds: dict[str, tuple[float, float]] = dataclasses.field(default_factory=dict)  # (level, hyst) V
    # other keys a user may name a channel by (Saleae "0" -> "D0"), see resolve_channel
    channel_keys: dict[str, str] = dataclasses.field(default_factory=dict)
    original_channels: list[str] | None = None   # before --channel-map
    deglitch_ns: float | None = None
    # default SPI channel map stored in the file itself ({role: channel name}, e.g. a
    # DSView .dsl's decoder settings); used for roles the user does not name
    spi_channels: dict[str, str] = dataclasses.field(default_factory=dict)
    # the same decoder's settings, as the file stores them ({"cpol": 0, "cpha": 0, "cs_polarity":
    # "active-low", "wordsize": 8, "bitorder": "msb-first"}); core/infer/saved.py weighs them
    spi_settings: dict = dataclasses.field(default_factory=dict)

    @property
    def resolution_s(self) -> float:
        return self.tick_s


@contextlib.contextmanager
def open_errors(path: str) -> Iterator[None]:
    """Opening a capture file: the OS's errors as one-line InputErrors naming ``path``."""
    try:
        yield
    except FileNotFoundError:
        raise InputError("no such file", path=path) from None
    except IsADirectoryError:
        raise InputError("is a directory, not a capture", path=path) from None
    except OSError as e:
        raise InputError(f"cannot open: {e.strerror}", path=path) from None


def stat_capture(path: str) -> os.stat_result:
    """What ``path`` is (symlinks followed), or the one-line InputError that says why
    there is nothing to read: no such file, a dangling link, a link loop, no permission.
    A socket is refused here (nothing reads a capture from one). Every capture passes
    here once: it is noted as an input of the command (spigap.infile.note_input)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise InputError(f"is a symbolic link to {os.readlink(path)!r}, which does not exist", path=path,
                             hint="fix the link or give the capture's real path") from None
        raise InputError("no such file", path=path) from None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise InputError("is a symbolic link loop (the links point at each other)", path=path,
                             hint="fix the link or give the capture's real path") from None
        raise InputError(f"cannot open: {e.strerror or e}", path=path) from None
    if stat.S_ISSOCK(st.st_mode):
        raise InputError("is a socket, not a capture", path=path,
                         hint="save the stream to a file, or pipe it to 'spigap analyze -'")
    note_input(path)            # no output of this command may replace it (outfile.py)
    if stat.S_ISDIR(st.st_mode):
        with contextlib.suppress(OSError):       # a Saleae capture folder: its files are the capture
            for entry in os.scandir(path):
                if entry.is_file():
                    note_input(entry.path)
    return st


def resolve_channel(key: str, names: Sequence[str], aliases: dict[str, str] | None = None,
                    positional: bool = False) -> int | None:
    """The one rule for which channel a user's name means: the exact name, else a
    unique case-insensitive match, else a reader alias (Saleae "0" -> "D0"), else
    (``positional``) a 0-based position. None if nothing matches."""
    names = list(names)
    if key in names:
        return names.index(key)
    folded = [n.lower() for n in names]
    if folded.count(key.lower()) == 1:
        return folded.index(key.lower())
    if aliases:
        target = aliases.get(key, aliases.get(key.lower()))
        if target is not None and target in names:
            return names.index(target)
    if positional and re.fullmatch(r"\d+", key) and int(key) < len(names):
        return int(key)
    return None


@dataclasses.dataclass(frozen=True)
class ReaderOptions:
    """Options a format may take (``ReaderSpec.options`` says which)."""

    samplerate: float | None = None   # overrides the file's rate / time unit
    threshold: object = None          # --threshold spec(s) for analog channels
    unitsize: int | None = None       # raw input: bytes per sample word


@dataclasses.dataclass(frozen=True)
class ReaderSpec:
    """One format in the registry: what it is called, which files are its, and its reader.

    ``reader`` is "module:Class", imported on first use (so the CLI starts without
    numpy-heavy modules of formats it does not read)."""

    name: str
    extensions: tuple[str, ...]
    sniff: Callable[[bytes], bool]
    reader: str
    options: tuple[str, ...] = ("samplerate",)

    @property
    def cls(self) -> Callable[..., CaptureReader]:
        module, name = self.reader.split(":")
        return getattr(importlib.import_module(module), name)

    def open(self, path: str, options: ReaderOptions) -> CaptureReader:
        return self.cls(path, **{k: getattr(options, k) for k in self.options})


class CaptureReader(abc.ABC):
    """Base class of all readers. Subclasses set ``info`` in ``__init__``.

    ``edges(channels)`` yields EdgeBlocks and, on a damaged file, raises
    ``CaptureTruncated`` after the last good block; ``end_tick`` is valid once
    the iterator is exhausted (or has raised). ``check_stream`` states the
    contract as code.
    """

    format_name = "?"
    info: CaptureInfo
    end_tick: int | None = None
    volts_tap: Callable[[str, int, np.ndarray], None] | None = None

    def set_volts_tap(self, tap: Callable[[str, int, np.ndarray], None] | None) -> None:
        """``tap(channel, first_tick, volts)`` is handed every chunk of volts an analog
        channel is read in, in its own time order, alongside the thresholding (the pin
        measurement's input, pins/tap.py: the file is read once). A reader that wraps others
        passes it on under its own channel names."""
        self.volts_tap = tap

    def volts_tap_for(self, name: str) -> Callable[[int, np.ndarray], None] | None:
        """The volts tap for one channel (None: nobody listens)."""
        tap = self.volts_tap
        if tap is None:
            return None
        return lambda t0, v: tap(name, t0, v)

    def settled(self, cfg, devices: dict | None = None) -> None:
        """Told the settings the pipeline settled on (channel roles, mode) and each device's
        by its CS line (``devices``: one device is a bus of one) before it frames the stream: a
        measuring wrapper (pins/tap.py) starts from them. Nothing to do here."""

    def __init_subclass__(cls, **kwargs):
        """Every reader's ``edges`` first checks the request against the state word's width
        (spigap.limits.STREAM_CHANNELS): one line, before a byte is read, instead of states
        that do not fit. Done here so that no reader, present or future, can forget it."""
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("edges")
        if own is None or getattr(own, "_checks_width", False):
            return

        @functools.wraps(own)
        def edges(self, channels):
            check_width(channels, self.info.path)
            return own(self, channels)

        edges._checks_width = True
        cls.edges = edges

    @abc.abstractmethod
    def edges(self, channels: Sequence[str]) -> Iterator[EdgeBlock]:
        """The edge stream of ``channels`` (bit j of a state = channels[j])."""

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def channel_index(self, name: str, option: str = "--clk/--mosi/--miso/--cs") -> int:
        """Index of a channel by name (``resolve_channel``, no positions); ``option``:
        the command-line option that named it (for the message)."""
        idx = resolve_channel(name, self.info.channels, self.info.channel_keys)
        if idx is None:
            raise UsageError(f"no channel named {name!r}; the capture has: {', '.join(self.info.channels)}",
                             path=self.info.path, hint=f"pick one with {option}")
        return idx


def check_width(channels: Sequence[str], path: str) -> None:
    """A request for more channels than one edge stream's state word holds: one line."""
    if len(channels) > STREAM_CHANNELS:
        raise UsageError(f"{len(channels)} channels asked of one edge stream, which holds at most "
                         f"{STREAM_CHANNELS} (its state word is {STREAM_CHANNELS} bits)", path=path,
                         hint="name fewer channels (--cs, --event, convert --channels)")


def check_stream(blocks: Iterable[EdgeBlock], n_channels: int, *, path: str = "?") -> Iterator[EdgeBlock]:
    """The reader contract as a wrapper around an edge stream: int64 ticks and uint32
    states of equal, non-zero length per block; the first tick 0; ticks strictly
    increasing within and across blocks; no state bit beyond the requested channels;
    a stream that ends without ``CaptureTruncated`` is non-empty. Violations raise
    AssertionError naming the file (a reader bug, not bad input)."""
    last = None
    limit = 1 << n_channels
    for b in blocks:        # a CaptureTruncated from the reader passes through
        t, s = b.ticks, b.states
        assert isinstance(t, np.ndarray) and t.dtype == np.int64, f"{path}: ticks are not int64"
        assert isinstance(s, np.ndarray) and s.dtype == np.uint32, f"{path}: states are not uint32"
        assert len(t) == len(s) > 0, f"{path}: a block of {len(t)} ticks and {len(s)} states"
        if last is None:
            assert t[0] == 0, f"{path}: the stream starts at tick {t[0]}, not 0"
        else:
            assert t[0] > last, f"{path}: tick {t[0]} after {last} across blocks"
        assert bool(np.all(t[1:] > t[:-1])), f"{path}: ticks not strictly increasing"
        assert bool(np.all(s < limit)), f"{path}: state bits beyond the {n_channels} requested channels"
        last = int(t[-1])
        yield b
    assert last is not None, f"{path}: an edge stream without its tick-0 entry"


# About how many edges a reader hands downstream in one block at the most. A block's
# figures downstream take some hundred bytes per edge (framing, words, gaps), so a piece
# in which nearly every sample changes (noise, hostile input: megabytes of samples,
# millions of edges) would make a peak near a gigabyte; io/raw.py scans its input in
# pieces sized to stay near this many changes.
MAX_BLOCK_EDGES = 1 << 18


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
