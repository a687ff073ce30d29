"""Oscilloscope waveform files (binary): the part every native scope format shares.

A scope file holds one or more *waveforms*: ``n`` samples at a fixed interval
``dt`` starting at time ``t0`` (relative to the trigger), each sample a raw
integer or float that becomes volts through ``raw * scale + shift``. The
format modules (isf.py, keysight_bin.py, lecroy_trc.py, tek_wfm.py,
keysight_h5.py, rigol_wfm.py, siglent_bin.py) only parse their headers into ``Waveform`` objects; this module
reads the samples and turns them into the edge stream:

* samples are read from the file slice by slice (``np.fromfile`` at an offset,
  ``SLICE`` samples at a time), so memory does not grow with the record length
  (a 1 GB waveform is never loaded whole);
* each channel is thresholded with hysteresis (``--threshold``, default
  mid-range, io/threshold.py) and the channels are merged into one stream;
* a file shorter than its header says gives everything it holds, then
  ``CaptureTruncated`` with the sample where it ends.

The tick is the sample interval; tick 0 is the first sample. Several
waveforms of one file share the time base (else the file is refused); files
of one acquisition are combined by io/combine.py.
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Callable, Iterator, Sequence

import numpy as np

from spigap.limits import PLAUSIBLE_MIN_HZ
from spigap.findings import Cause, Finding
from spigap.errors import CaptureTruncated, InputError, UsageError
from spigap.io.base import CaptureInfo, CaptureReader, EdgeBlock
from spigap.io.threshold import Schmitt, Source, Threshold, merge, resolve_thresholds, sampled_source

SLICE = 1 << 20                      # samples read per step and channel
SAMPLE_FOR_THRESHOLD = 1 << 18       # leading samples the automatic threshold looks at
MAX_SAMPLES = 1 << 40                # a count above this is damage, not data
SCOPES_EXTRA = "install spigap[scopes] (pip install 'spigap[scopes]')"


@dataclasses.dataclass
class Waveform:
    """One channel of a scope file; its samples stay on disk until read."""

    name: str
    n: int                         # samples the header announces
    dt: float                      # sample interval, s
    t0: float                      # time of sample 0, s
    path: str
    offset: int = 0                # byte offset of sample 0 in ``path``
    dtype: str = "<f4"             # raw sample type, byte order included
    scale: float = 1.0             # volts = raw * scale + shift
    shift: float = 0.0
    read: Callable[[int, int], np.ndarray] | None = None   # (lo, hi) -> raw samples, instead of the file
    held: int | None = None        # with ``read``: samples the file holds when fewer than ``n``
    # segmented records (Tektronix FastFrame): ``n`` = frames x frame_len samples; frame k's
    # samples start at byte offset + k * frame_stride and at tick frame_ticks[k]
    frame_len: int = 0
    frame_stride: int = 0
    frame_ticks: np.ndarray | None = None
    # interleaved channels (Rigol DS1000Z): sample i at byte offset + i * stride (0: packed)
    stride: int = 0

    def available(self) -> int:
        """Samples the file really holds (a cut file holds fewer than announced)."""
        if self.read is not None:
            return self.n if self.held is None else min(self.n, self.held)
        size = os.path.getsize(self.path)
        item = np.dtype(self.dtype).itemsize
        if self.stride:
            return int(min(self.n, max(0, (size - self.offset - item) // self.stride + 1)))
        if self.frame_ticks is None:
            return int(min(self.n, max(0, (size - self.offset) // item)))
        full = max(0, (size - self.offset) // self.frame_stride) if self.frame_stride else 0
        full = min(full, len(self.frame_ticks))
        part = 0
        if full < len(self.frame_ticks):
            part = min(self.frame_len, max(0, (size - self.offset - full * self.frame_stride) // item))
        return int(min(self.n, full * self.frame_len + part))

    def end_tick(self, available: int) -> int:
        """The tick after sample ``available - 1``."""
        if self.frame_ticks is None or available == 0:
            return available
        k, i = divmod(available - 1, self.frame_len)
        return int(self.frame_ticks[k]) + i + 1

    def tick_of(self, samples: np.ndarray) -> np.ndarray:
        assert self.frame_ticks is not None
        k, i = np.divmod(samples, self.frame_len)
        return self.frame_ticks[k] + i

    def _raw(self, lo: int, hi: int) -> np.ndarray:
        item = np.dtype(self.dtype).itemsize
        if self.stride:
            if hi <= lo:
                return np.empty(0, self.dtype)
            buf = np.fromfile(self.path, dtype=np.uint8, count=(hi - lo - 1) * self.stride + item,
                              offset=self.offset + lo * self.stride)
            k = max(0, (len(buf) - item) // self.stride + 1)
            return np.ndarray((k,), dtype=self.dtype, buffer=buf, strides=(self.stride,)).copy()
        if self.frame_ticks is None:
            return np.fromfile(self.path, dtype=self.dtype, count=hi - lo, offset=self.offset + lo * item)
        parts = []
        while lo < hi:
            k, i = divmod(lo, self.frame_len)
            m = min(hi - lo, self.frame_len - i)
            parts.append(np.fromfile(self.path, dtype=self.dtype, count=m,
                                     offset=self.offset + k * self.frame_stride + i * item))
            lo += m
        return np.concatenate(parts) if parts else np.empty(0, self.dtype)

    def volts(self, lo: int, hi: int) -> np.ndarray:
        if self.read is not None:
            raw = np.asarray(self.read(lo, hi))
        else:
            raw = self._raw(lo, hi)
        with np.errstate(invalid="ignore", over="ignore"):
            v = raw.astype(np.float64)
            if self.scale != 1.0:
                v *= self.scale
            if self.shift != 0.0:
                v += self.shift
        return v

    def chunks(self, stop: int) -> Iterator[np.ndarray]:
        for lo in range(0, stop, SLICE):
            yield self.volts(lo, min(stop, lo + SLICE))


def check_waveform(wf: Waveform, what: str) -> None:
    """The header values every format must get right before samples are read."""
    if not (0 < wf.n <= MAX_SAMPLES):
        raise InputError(f"{what}: {wf.n} samples is not a record length (damaged header?)", path=wf.path)
    if not (math.isfinite(wf.dt) and 0 < wf.dt < 1e3):
        raise InputError(f"{what}: sample interval {wf.dt!r} s is not usable (damaged header?)", path=wf.path)
    if not math.isfinite(wf.t0) or abs(wf.t0) > 1e9:
        raise InputError(f"{what}: start time {wf.t0!r} s is not usable (damaged header?)", path=wf.path)
    if not (math.isfinite(wf.scale) and math.isfinite(wf.shift)) or wf.scale == 0:
        raise InputError(f"{what}: vertical scale {wf.scale!r} / offset {wf.shift!r} is not usable", path=wf.path)


def same_time_base(a_dt: float, a_t0: float | None, b_dt: float, b_t0: float | None) -> bool:
    """One time base: the same interval (to 1 ppm) and the same start (to half a sample)."""
    if abs(a_dt - b_dt) > 1e-6 * max(a_dt, b_dt):
        return False
    if a_t0 is None or b_t0 is None:
        return a_t0 is None and b_t0 is None
    return abs(a_t0 - b_t0) <= 0.5 * min(a_dt, b_dt)


def unique_names(names: Sequence[str]) -> list[str]:
    out: list[str] = []
    for i, name in enumerate(names):
        name = name or f"CH{i + 1}"
        base, k = name, 2
        while name in out:
            name, k = f"{base}_{k}", k + 1
        out.append(name)
    return out


class WaveformReader(CaptureReader):
    """The reader behind every binary scope format: ``waveforms`` -> edge stream."""

    format_name = "scope"

    def __init__(self, path: str, waveforms: list[Waveform], *, fmt: str, samplerate: float | None = None,
                 threshold=None, warnings: list[str] | None = None):
        self.path = path
        if not waveforms:
            raise InputError("the file holds no waveform", path=path)
        first = waveforms[0]
        for wf in waveforms[1:]:
            if not same_time_base(first.dt, first.t0, wf.dt, wf.t0) or wf.n != first.n:
                raise InputError(f"waveforms {first.name} and {wf.name} have different time bases "
                                 f"({describe_time_base(first.dt, first.t0, first.n)} vs "
                                 f"{describe_time_base(wf.dt, wf.t0, wf.n)})", path=path,
                                 hint="spigap reads the waveforms of one acquisition")
        warnings = list(warnings or [])
        dt = first.dt
        src = "file"
        if samplerate is not None:
            if not samplerate > 0:
                raise UsageError(f"--samplerate must be positive, not {samplerate:g}", path=path)
            if abs(dt * samplerate - 1) > 1e-3:
                warnings.append(Finding(f"--samplerate {samplerate:g} Hz overrides the file's sample interval {dt:g} s", Cause.NOTE))
            dt = 1.0 / float(samplerate)
            src = "--samplerate"
        if dt * PLAUSIBLE_MIN_HZ >= 1:
            warnings.append(Finding(f"sample interval {dt:g} s is implausibly long for SPI timing", Cause.TIMEBASE))
        self.waveforms = waveforms
        self._avail = min(wf.available() for wf in waveforms)
        if self._avail <= 0:
            raise InputError(f"the file ends before the first sample (header announces {first.n})", path=path)
        if self._avail < first.n:
            warnings.append(f"the file holds {self._avail} of the {first.n} samples its header announces "
                            "(cut short): read up to there")
        names = [wf.name for wf in waveforms]
        self._by_name = dict(zip(names, waveforms))
        self._thr_spec = threshold
        self._thresholds: dict[str, Threshold] | None = None
        self.info = CaptureInfo(path=path, format=fmt, channels=names, tick_s=dt, samplerate_hz=1.0 / dt,
                                n_ticks=first.end_tick(first.n), warnings=warnings, resolution_source=src,
                                time_offset_s=first.t0, analog_channels=list(names))

    def edges(self, channels: Sequence[str]) -> Iterator[EdgeBlock]:
        if not channels:
            raise UsageError("no channels requested", path=self.path)
        names = [self.info.channels[self.channel_index(c)] for c in channels]
        if self._thresholds is None:
            n_head = min(self._avail, SAMPLE_FOR_THRESHOLD)
            self._thresholds, notes = resolve_thresholds(
                self._thr_spec, self.info.channels,
                lambda ns: {n: self._by_name[n].volts(0, n_head) for n in ns}, path=self.path)
            self.info.warnings.extend(notes)
            self.info.thresholds.update({k: (v.level, v.hysteresis) for k, v in self._thresholds.items()})
        sources = []
        for j, n in enumerate(names):
            wf = self._by_name[n]
            tick_of = wf.tick_of if wf.frame_ticks is not None else None
            sources.append(Source(sampled_source(wf.chunks(self._avail), Schmitt(self._thresholds[n]),
                                                 tick_of=tick_of, tap=self.volts_tap_for(n)), shift=j))
        self.end_tick = None
        yield from merge(sources)
        self.end_tick = self.waveforms[0].end_tick(self._avail)
        if self._avail < self.waveforms[0].n:
            raise CaptureTruncated(
                f"the file ends after sample {self._avail} of {self.waveforms[0].n} (cut short); results up to "
                f"{self.end_tick * self.info.tick_s:.6g} s", path=self.path, at_tick=self.end_tick)


def describe_time_base(dt: float, t0: float | None, n: int | None) -> str:
    from spigap.units import fmt_time

    text = f"{fmt_time(dt)} per sample"
    if t0 is not None:
        text += f" from {fmt_time(t0) if t0 else '0 s'}"
    if n:
        text += f", {n} samples"
    return text


def need(module: str, fmt: str, path: str):
    """Import the optional library a format needs, or say in one line how to get it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise InputError(f"reading {fmt} files needs the Python package {module!r}", path=path,
                         hint=SCOPES_EXTRA) from None


def read_exact(path: str, offset: int, size: int, what: str) -> bytes:
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read(size)
    if len(data) < size:
        raise InputError(f"the {what} is cut (file has {os.path.getsize(path)} bytes)", path=path)
    return data


def header_text(h: bytes, off: int, size: int) -> str:
    """A fixed-width text field of a binary header: up to its first NUL, Latin-1, stripped
    (escape it with errors.printable before it is shown)."""
    return h[off:off + size].split(b"\0", 1)[0].decode("latin-1").strip()
