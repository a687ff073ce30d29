"""Saleae Logic 2 binary export (one ``.bin`` per channel), versions 0 and 1.

Format facts (saleae/gitbook-docs, "Binary Export Format - Logic 2" and
"Binary and CSV Export Formats - 2025 Update"); all little-endian, IEEE 754:

    byte[8] "<SALEAE>"; int32 version (0|1); int32 type (0 digital, 1 analog)
    digital v0: uint32 initial_state; double begin_time; double end_time;
                uint64 num_transitions; double transition_time[num_transitions]
    digital v1: uint64 chunk_count; per chunk: uint32 initial_state;
                double sample_rate; double begin_time; double end_time;
                uint64 num_transitions; double transition_time[...]
                (chunks are continuous segments; the spaces between them are gaps)
    analog v0:  double begin_time; uint64 sample_rate; uint64 downsample;
                uint64 num_samples; float32 volts[num_samples]
    analog v1:  uint64 waveform_count; per waveform: double begin_time;
                double trigger_time; double sample_rate; int64 downsample;
                uint64 num_samples; float32 volts[...]

Logic 2 names the files ``digital_<N>.bin`` / ``analog_<N>.bin``; the channels
are called ``D<N>`` / ``A<N>`` here (rename with ``--channel-map 0=SCLK,...``;
keys are the channel numbers, ``A0`` for analog). Pointing at one ``.bin`` reads
all channel files beside it.

Time base: tick 0 is the earliest begin_time of all files. The tick is one
period of the fastest sample rate found (v1 digital chunks, analog waveforms);
v0 digital files carry no rate, so it is inferred from the transition times
(the coarsest common instrument rate on whose grid they all fall) unless
``--samplerate`` is given. Transition arrays are read through ``np.memmap`` in
slices, so memory does not depend on the capture length; analog channels are
thresholded with hysteresis (``spigap.io.threshold``).
"""

from __future__ import annotations

import glob
import math
import os
import stat
import re
import struct
from typing import Iterator, Sequence

import numpy as np

from spigap.limits import PLAUSIBLE_MIN_HZ
from spigap.findings import Cause, Finding, cause_of
from spigap.errors import CaptureTruncated, InputError, UsageError
from spigap.io.base import CaptureInfo, CaptureReader, EdgeBlock
from spigap.io.threshold import (Schmitt, Source, Threshold, merge, resolve_thresholds, sampled_source,
                                   strict_runs)

MAGIC = b"<SALEAE>"
MAX_TICK = float(1 << 62)        # times beyond this many ticks are damage, not data
SLICE = 1 << 18                  # transitions / samples read per step
_NAME_RE = re.compile(r"^(digital|analog)_(\d+)\.bin$", re.IGNORECASE)
# sample rates of logic analyzers and scopes (Hz): candidates when a file has no rate
_MANTISSAS = (1, 1.2, 1.25, 1.5, 1.5625, 1.6, 2, 2.4, 2.5, 3, 3.125, 3.2, 4, 4.8, 5, 6, 6.25, 6.4, 8, 9.6)
CANDIDATE_RATES = sorted({round(m * 10 ** e, 6) for e in range(3, 10) for m in _MANTISSAS}
                         | {24e6, 48e6, 96e6, 192e6, 12e6, 16e6, 32e6, 64e6, 128e6, 256e6, 512e6})


def is_saleae_dir(path: str) -> bool:
    return any(_NAME_RE.match(os.path.basename(p)) for p in glob.glob(os.path.join(glob.escape(path), "*.bin")))


class _Chunk:
    __slots__ = ("initial", "rate", "begin", "end", "n", "offset")

    def __init__(self, initial, rate, begin, end, n, offset):
        self.initial, self.rate, self.begin, self.end, self.n, self.offset = initial, rate, begin, end, n, offset


class _ChannelFile:
    """Parsed headers of one .bin file (data stays on disk)."""

    def __init__(self, path: str, name: str, number: str):
        self.path, self.name, self.number = path, name, number
        from spigap.io.base import stat_capture

        if not stat.S_ISREG(stat_capture(path).st_mode):      # its data is mapped, by offset
            raise InputError("is not a regular file: a Saleae export is read by seeking", path=path,
                             hint="copy the export to a regular folder first")
        self.size = os.path.getsize(path)
        self.cut: str | None = None      # damage found while reading the headers
        self.notes: list[str] = []
        with open(path, "rb") as f:
            head = f.read(16)
            if head[:8] == MAGIC and len(head) < 16:
                raise InputError(f"the header is cut (file has {len(head)} bytes)", path=path)
            if len(head) < 16 or head[:8] != MAGIC:
                raise InputError("not a Saleae binary export (no <SALEAE> header)", path=path,
                                 hint="export raw data from Logic 2 as binary, or pick --input-format")
            self.version, self.type = struct.unpack("<ii", head[8:16])
            if self.version not in (0, 1):
                raise InputError(f"unsupported Saleae binary export version {self.version} (known: 0, 1)",
                                 path=path)
            if self.type not in (0, 1):
                raise InputError(f"unknown Saleae data type {self.type} (0 = digital, 1 = analog)", path=path)
            self.analog = self.type == 1
            self.chunks: list[_Chunk] = []
            if self.version == 0:
                self._v0(f)
            else:
                self._v1(f)

    def _read(self, f, n, what):
        data = f.read(n)
        if len(data) < n:
            raise _Cut(what)
        return data

    def _add(self, initial, rate, begin, end, n, offset, item):
        for name, v in (("begin time", begin), ("end time", end)):
            if not math.isfinite(v):
                raise InputError(f"{item}: {name} is {v!r}", path=self.path)
        if rate is not None and not (math.isfinite(rate) and 1e-3 <= rate <= 1e12):
            if self.analog:
                raise InputError(f"{item}: sample rate is {rate!r}", path=self.path,
                                 hint="the analog samples cannot be placed in time without it")
            self.notes.append(f"{item}: sample rate {rate!r} is not usable")
            rate = None
        itemsize = 4 if self.analog else 8
        avail = max(0, (self.size - offset) // itemsize)
        if n > avail:
            self.cut = (f"{item} should hold {n} {'samples' if self.analog else 'transitions'} but the "
                        f"file ends after {avail} (cut at byte {self.size})")
            n = avail
        self.chunks.append(_Chunk(initial, rate, begin, end, n, offset))
        return offset + n * itemsize

    def _v0(self, f):
        try:
            if self.analog:
                begin, rate, down, n = struct.unpack("<dQQQ", self._read(f, 32, "header"))
                down = down or 1
                self._add(None, rate / down, begin, begin, n, 48, "waveform")
                c = self.chunks[-1]
                c.end = begin + c.n / c.rate
            else:
                init, begin, end, n = struct.unpack("<Iddq", self._read(f, 28, "header"))
                if n < 0:
                    raise InputError(f"negative transition count {n}", path=self.path)
                self._add(init & 1, None, begin, end, n, 44, "transitions")
        except _Cut as e:
            raise InputError(f"the {e.what} is cut (file has {self.size} bytes)", path=self.path) from None

    def _v1(self, f):
        try:
            (count,) = struct.unpack("<Q", self._read(f, 8, "header"))
        except _Cut:
            raise InputError(f"the header is cut (file has {self.size} bytes)", path=self.path) from None
        off = 24
        # one small header per chunk; a chunk takes at least its header, so the
        # loop is bounded by the file size
        for i in range(count):
            if self.cut:
                break
            f.seek(off)
            try:
                if self.analog:
                    begin, trig, rate, down, n = struct.unpack("<dddqQ", self._read(f, 40, f"waveform {i}"))
                    down = down if down > 0 else 1
                    rate_eff = rate / down if math.isfinite(rate) else rate
                    off = self._add(None, rate_eff, begin, begin, n, off + 40, f"waveform {i}")
                    c = self.chunks[-1]
                    c.end = begin + c.n / c.rate
                    if c.rate < PLAUSIBLE_MIN_HZ:
                        self.notes.append(Finding(f"waveform {i}: sample rate {c.rate:g} Hz is implausible "
                                                  "(the samples' times follow from it)", Cause.TIMEBASE))
                else:
                    init, rate, begin, end, n = struct.unpack("<IdddQ", self._read(f, 36, f"chunk {i}"))
                    off = self._add(init & 1, rate, begin, end, n, off + 36, f"chunk {i}")
            except _Cut as e:
                self.cut = f"{e.what} header is cut (file ends at byte {self.size}; {count} chunk(s) announced)"
                break
        if not self.chunks and not self.cut:
            raise InputError("the file holds no data chunks", path=self.path)

    def transitions(self, chunk: _Chunk, lo: int, hi: int) -> np.ndarray:
        return np.fromfile(self.path, dtype="<f8", count=hi - lo, offset=chunk.offset + 8 * lo)

    def samples(self, chunk: _Chunk, lo: int, hi: int) -> np.ndarray:
        with np.errstate(invalid="ignore"):
            return np.fromfile(self.path, dtype="<f4", count=hi - lo, offset=chunk.offset + 4 * lo).astype(np.float64)


class _Cut(Exception):
    def __init__(self, what):
        super().__init__(what)
        self.what = what


class SaleaeReader(CaptureReader):
    format_name = "saleae"

    def __init__(self, path, *, samplerate: float | None = None, threshold=None):
        self.path = str(path)
        files = self._files(self.path)
        self.files = [_ChannelFile(p, name, num) for p, name, num in files]
        self.files.sort(key=lambda cf: (cf.analog, _natural(cf.number)))
        warnings: list[str] = []
        for cf in self.files:
            if cf.cut:
                warnings.append(f"{os.path.basename(cf.path)}: {cf.cut}")
        versions = sorted({cf.version for cf in self.files})
        chunks = [c for cf in self.files for c in cf.chunks]
        begins = [c.begin for c in chunks]
        self.t0 = min(begins) if begins else 0.0
        ends = [c.end for c in chunks] + begins
        t_end = max(ends) if ends else self.t0

        for cf in self.files:
            warnings += [Finding(f"{os.path.basename(cf.path)}: {n}", cause_of(n)) for n in cf.notes]
        rates = [c.rate for cf in self.files for c in cf.chunks if c.rate]
        digital_rates = [c.rate for cf in self.files if not cf.analog for c in cf.chunks if c.rate]
        if samplerate is not None:
            if not samplerate > 0:
                raise UsageError(f"--samplerate must be positive, not {samplerate:g}", path=self.path)
            rate = float(samplerate)
            src = "--samplerate"
        elif rates and not (digital_rates and max(digital_rates) < 1e3):
            rate = max(rates)
            src = "file"
            if any(abs(rate / r - round(rate / r)) > 1e-6 for r in rates if rate / r < 1e12):
                warnings.append("the files use sample rates that are not multiples of each other; "
                                f"times are rounded to the fastest ({rate:g} Hz)")
        else:
            rate = self._infer_rate(warnings)
            src = "inferred"
            if digital_rates:
                n = sum(c.n for c in chunks)
                warnings.append(Finding(f"the files' sample rate {max(digital_rates):g} Hz is implausible for an "
                                        f"SPI capture ({n} transitions); using {rate:g} Hz inferred from the "
                                        f"transition times instead (give the real rate with --samplerate)",
                                        Cause.TIMEBASE))
        if src == "file" and rate < PLAUSIBLE_MIN_HZ:
            n = sum(c.n for c in chunks)
            warnings.append(Finding(f"sample rate {rate:g} Hz is implausible for an SPI capture ({n} samples); "
                                    f"pass the real rate with --samplerate (e.g. --samplerate 100MHz)", Cause.TIMEBASE))
        self.rate = rate
        gaps = self._gaps()
        if gaps:
            warnings.append(gaps)

        names = [cf.name for cf in self.files]
        if len(set(names)) != len(names):
            raise InputError(f"two channel files map to the same channel name ({names})", path=self.path)
        self._by_name = {cf.name: cf for cf in self.files}
        analog = [cf.name for cf in self.files if cf.analog]
        self._thr_spec = threshold
        self._thresholds: dict[str, Threshold] | None = None
        keys = {}
        for cf in self.files:
            keys[cf.number if not cf.analog else f"A{cf.number}"] = cf.name
            keys[os.path.splitext(os.path.basename(cf.path))[0]] = cf.name
        self.end_tick = None
        span = (t_end - self.t0) * rate
        if not (math.isfinite(span) and 0 <= span < MAX_TICK):
            raise InputError(f"begin/end times ({self.t0:g} .. {t_end:g} s) do not fit a capture at "
                             f"{rate:g} Hz (damaged header?)", path=self.path)
        self._n_end = int(round(span))
        self.info = CaptureInfo(
            path=self.path, format=f"Saleae Logic 2 binary v{'/'.join(map(str, versions))}",
            channels=names, tick_s=1.0 / rate, samplerate_hz=rate, n_ticks=self._n_end or None,
            warnings=warnings,
            resolution_source=src, time_offset_s=self.t0, analog_channels=analog, channel_keys=keys)

    # ---------------------------------------------------------------- setup
    def _files(self, path):
        if os.path.isdir(path):
            paths = sorted(glob.glob(os.path.join(glob.escape(path), "*.bin")))
            paths = [p for p in paths if _NAME_RE.match(os.path.basename(p))]
            if not paths:
                raise InputError("no Saleae digital_N.bin/analog_N.bin files in this folder", path=path)
        else:
            if not os.path.exists(path):
                raise InputError("no such file", path=path)
            base = os.path.basename(path)
            if _NAME_RE.match(base):
                d = os.path.dirname(path) or "."
                paths = sorted(p for p in glob.glob(os.path.join(glob.escape(d), "*.bin"))
                               if _NAME_RE.match(os.path.basename(p)))
            else:
                paths = [path]
        out = []
        for p in paths:
            m = _NAME_RE.match(os.path.basename(p))
            if m:
                kind, num = m.group(1).lower(), m.group(2)
                out.append((p, ("A" if kind == "analog" else "D") + num, num))
            else:
                stem = os.path.splitext(os.path.basename(p))[0]
                out.append((p, stem, stem))
        return out

    def _infer_rate(self, warnings) -> float:
        """The coarsest candidate rate on whose grid every sampled transition time falls."""
        samples = []
        for cf in self.files:
            if cf.analog:
                continue
            for c in cf.chunks:
                if c.n == 0:
                    continue
                head = cf.transitions(c, 0, min(c.n, 4096))
                idx = np.unique(np.linspace(0, c.n - 1, min(c.n, 4096)).astype(np.int64))
                mm = np.memmap(cf.path, dtype="<f8", mode="r", offset=c.offset, shape=(c.n,))
                samples += [head, np.asarray(mm[idx]), np.array([c.begin])]
                del mm
        if not samples:
            warnings.append(Finding("no transitions to infer the sample rate from; assuming 1 GHz "
                            "(pass --samplerate if you know it)", Cause.TIMEBASE))
            return 1e9
        with np.errstate(invalid="ignore", over="ignore"):
            per_line = [a[np.isfinite(a) & (np.abs(a) < 1e7)] for a in (s - self.t0 for s in samples)]
            t = np.concatenate(per_line)
        # the closest two transitions of one line (a pulse the analyzer resolved): two lines may
        # change a sample apart (a device's clock-to-output after the clock edge)
        d = np.concatenate([np.diff(np.sort(a)) for a in per_line])
        d = d[d > 0]
        min_dt = float(d.min()) if len(d) else None
        fits = []
        for r in CANDIDATE_RATES:
            x = t * r
            if len(t) and np.all(np.abs(x - np.rint(x)) < 1e-3):
                fits.append(r)
                # coarsest grid that holds every time and resolves the closest two
                # transitions with >= 4 ticks (analyzers sample >= 4x the signal)
                if min_dt is None or min_dt * r >= 4 - 1e-9:
                    break
        if fits:
            rate = float(fits[-1])
            warnings.append(f"version 0 export: no sample rate in the file; {rate:g} Hz inferred from the "
                            "transition times (give the capture's rate with --samplerate if you know it)")
            return rate
        warnings.append(Finding("the transition times fit no common sample rate; using 1 ps resolution "
                        "(pass --samplerate for the instrument's rate)", Cause.TIMEBASE))
        return 1e12

    def _gaps(self) -> str | None:
        found = []
        for cf in self.files:
            for a, b in zip(cf.chunks, cf.chunks[1:]):
                if b.begin - a.end > 1.5 / self.rate:
                    found.append((cf.name, a.end, b.begin))
        if not found:
            return None
        name, a, b = max(found, key=lambda g: g[2] - g[1])
        return (f"{len(found)} gap(s) without data between chunks (largest: {name} from {a - self.t0:.6g} s "
                f"to {b - self.t0:.6g} s); levels are held across gaps, so gaps spanning a transfer "
                f"distort its timing")

    def tick(self, t: np.ndarray) -> np.ndarray:
        return np.rint((np.asarray(t, np.float64) - self.t0) * self.rate).astype(np.int64)

    # ---------------------------------------------------------------- edges
    def edges(self, channels: Sequence[str]) -> Iterator[EdgeBlock]:
        if not channels:
            raise UsageError("no channels requested", path=self.path)
        files = [self._by_name[self.info.channels[self.channel_index(c)]] for c in channels]
        if any(cf.analog for cf in files) and self._thresholds is None:
            names = [cf.name for cf in self.files if cf.analog]
            self._thresholds, notes = resolve_thresholds(
                self._thr_spec, names, self._analog_samples, path=self.path,
                aliases=self.info.channel_keys)
            self.info.warnings.extend(notes)
            self.info.thresholds.update({k: (v.level, v.hysteresis) for k, v in self._thresholds.items()})
        sources = []
        for j, cf in enumerate(files):
            runs = self._analog_runs(cf) if cf.analog else self._digital_runs(cf)
            sources.append(Source(runs, j))
        self.end_tick = None

        def on_trunc(e):
            self.end_tick = e.at_tick

        yield from merge(sources, on_truncated=on_trunc)
        self.end_tick = self._n_end if self._n_end else None

    def _digital_runs(self, cf: _ChannelFile):
        return strict_runs(self._digital(cf))

    def _digital(self, cf: _ChannelFile):
        level = cf.chunks[0].initial if cf.chunks else 0
        yield np.zeros(1, np.int64), np.array([level], np.uint32)
        last_t = -math.inf
        reached = 0
        for i, c in enumerate(cf.chunks):
            if c.begin < last_t:
                raise CaptureTruncated(f"{os.path.basename(cf.path)}: chunk {i} starts before the previous "
                                       f"one ends (damaged file)", path=self.path, at_tick=reached)
            tb = int(self.tick(np.array([c.begin]))[0])
            if c.initial != level:
                yield np.array([max(tb, 0)], np.int64), np.array([c.initial], np.uint32)
            level = c.initial
            for lo in range(0, c.n, SLICE):
                hi = min(c.n, lo + SLICE)
                t = cf.transitions(c, lo, hi)
                if len(t) < hi - lo:
                    cf.cut = cf.cut or f"the file ends early (at transition {lo + len(t)} of chunk {i})"
                with np.errstate(invalid="ignore", over="ignore"):
                    bad = ~(np.abs((t - self.t0) * self.rate) < MAX_TICK)
                back = np.empty(len(t), bool)
                if len(t):
                    back[0] = t[0] < max(last_t, c.begin)
                    np.less(t[1:], t[:-1], out=back[1:])
                if bad.any() or back.any():
                    k = int(np.argmax(bad | back))
                    t = t[:k]
                    if len(t):
                        yield self.tick(t), self._levels(c.initial, lo, len(t))
                        reached = int(self.tick(t[-1:])[0])
                    raise CaptureTruncated(
                        f"{os.path.basename(cf.path)}: transition {lo + k} of chunk {i} "
                        f"{'is not a valid time' if bad[k] else 'goes back in time'} (damaged file); results cover "
                        f"up to {reached / self.rate:.6g} s", path=self.path, at_tick=reached + 1)
                if len(t):
                    ticks = self.tick(t)
                    yield ticks, self._levels(c.initial, lo, len(t))
                    last_t = float(t[-1])
                    reached = int(ticks[-1])
            if c.n % 2:
                level ^= 1
            last_t = max(last_t, c.end)
        if cf.cut:
            raise CaptureTruncated(f"{os.path.basename(cf.path)}: {cf.cut}; results cover up to "
                                   f"{(reached + 1) / self.rate:.6g} s", path=self.path, at_tick=reached + 1,
                                   hint="re-export the capture")

    @staticmethod
    def _levels(initial: int, lo: int, n: int) -> np.ndarray:
        # state alternates with each transition: the k-th transition (0-based) sets initial ^ ((k+1) & 1)
        k = np.arange(lo, lo + n, dtype=np.int64)
        return (initial ^ ((k + 1) & 1)).astype(np.uint32)

    def _analog_runs(self, cf: _ChannelFile):
        assert self._thresholds is not None   # resolved in edges() before any analog channel is read
        schmitt = Schmitt(self._thresholds[cf.name])
        runs = []
        for c in cf.chunks:
            base_t = c.begin

            def chunks(c=c):
                for lo in range(0, c.n, SLICE):
                    yield cf.samples(c, lo, min(c.n, lo + SLICE))

            def tick_of(pos, c=c, base_t=base_t):
                return self.tick(base_t + pos / c.rate)

            runs.append(sampled_source(chunks(), schmitt, tick_of=tick_of, tap=self.volts_tap_for(cf.name)))

        def chain():
            first = True
            for r in runs:
                for t, s in r:
                    if not first and len(t) and t[0] == 0:
                        t, s = t[1:], s[1:]
                    first = False
                    if len(t):
                        yield t, s
            if first:
                yield np.zeros(1, np.int64), np.zeros(1, np.uint32)
            if cf.cut:
                last = cf.chunks[-1] if cf.chunks else None
                reached = int(self.tick(np.array([last.begin + last.n / last.rate]))[0]) if last else 0
                raise CaptureTruncated(f"{os.path.basename(cf.path)}: {cf.cut}; results cover up to "
                                       f"{reached / self.rate:.6g} s", path=self.path, at_tick=reached,
                                       hint="re-export the capture")
        return strict_runs(chain())

    def _analog_samples(self, names: list[str]) -> dict[str, np.ndarray]:
        """Up to ~1 M samples per analog channel, spread over the whole file (for auto thresholds)."""
        out = {}
        for name in names:
            cf = self._by_name[name]
            parts = []
            for c in cf.chunks:
                if c.n == 0:
                    continue
                mm = np.memmap(cf.path, dtype="<f4", mode="r", offset=c.offset, shape=(c.n,))
                step = max(1, c.n // (1 << 20))
                with np.errstate(invalid="ignore"):       # signalling NaNs in damaged data
                    parts.append(np.asarray(mm[::step], dtype=np.float64))
                del mm
            out[name] = np.concatenate(parts) if parts else np.empty(0)
        return out


def _natural(text: str):
    return (0, int(text)) if text.isdigit() else (1, text)
