"""Tektronix ``.wfm`` reference waveform files (DPO/MSO 5k/7k/70k, 4/5/6 Series ...),
versions ``:WFM#001`` to ``:WFM#003``, single records and FastFrame.

Layout ("Performance Oscilloscope Reference Waveform File Format", Tektronix
077-0220-11), offsets of version 3; versions 1 and 2 store the point density of
each of the four dimensions' user views (at 304, 464, 600 and 736 in version 3)
in 4 bytes instead of 8, so a field after k of them sits 4k bytes earlier, and
version 1 lacks the 2-byte summary frame field at 154, so every later field
sits 2 more bytes earlier (``_at``):

    0  byte order (0x0F0F little-, 0xF0F0 big-endian)   2 version ":WFM#00x"
    15 bytes per point   16 byte offset of the curve buffer   40 waveform label (char[32])
    72 FastFrames - 1    78 set type (0 single, 1 FastFrame)   122 data type (2 = vector)
    168 vertical scale (f8)  176 vertical offset (f8)  240 sample format (0 int16, 1 int32,
        2 uint32, 3 uint64, 4 float32, 5 float64, 6 uint8, 7 int8)
    488 time scale (f8)  496 time offset (f8)  508 time units (char[20])  768 time base (0 = time)
    788 first frame's trigger: tt offset (f8), 796 fractional second (f8), 804 GMT second (int32)
    822/826/830 data start / postcharge start / postcharge stop: byte offsets in one frame
    838 FastFrame: per further frame 24 bytes (uint32 point offset, f8 tt offset,
        f8 fractional second, int32 GMT second)

Volts = raw * scale + offset; sample i of a frame is at time offset + i * scale.
FastFrame frames are separate triggers: they are placed on one timeline at
their trigger times (the time between frames was not recorded: a warning says
so), or back to back when the timestamps cannot place them.

Hand-written (header only; samples are read by io/scopefile.py in slices):
fftekwfm 0.4.1 reads int16 curves only, fails with a KeyError on big-endian files and
reads versions 1 and 2 at version 3's offsets; the header is a fixed,
documented block. Checked against files tm_data_types (Tektronix's package)
writes, and RigolWFM's and fftekwfm's readings of them
(tests/test_readers_tek_wfm.py).
"""

from __future__ import annotations

import os
import struct

import numpy as np

from spigap.findings import Cause, Finding
from spigap.errors import InputError
from spigap.io.scopefile import MAX_SAMPLES, Waveform, WaveformReader, check_waveform, header_text, read_exact

HEADER = 838                          # version 3; versions 2 and 1: 822 and 820
_POINT_DENSITY = (304, 464, 600, 736)  # version 3 offsets of the 8-byte point densities
_FORMATS = {0: "i2", 1: "i4", 2: "u4", 3: "u8", 4: "f4", 5: "f8", 6: "u1", 7: "i1"}
MAX_FRAMES = 1 << 24


def sniff(head: bytes) -> bool:
    return head[:2] in (b"\x0f\x0f", b"\xf0\xf0") and head[2:9] == b":WFM#00"


class TekWfmReader(WaveformReader):
    format_name = "tek-wfm"

    def __init__(self, path, *, samplerate: float | None = None, threshold=None):
        path = str(path)
        wf, version, notes = read_wfm(path)
        super().__init__(path, [wf], fmt=f"Tektronix WFM v{version}", samplerate=samplerate,
                         threshold=threshold, warnings=notes)


def read_wfm(path: str) -> tuple[Waveform, int, list[str]]:
    h = read_exact(path, 0, _at(HEADER, 1), f"header ({_at(HEADER, 1)} bytes)")
    if not sniff(h):
        raise InputError("not a Tektronix WFM file (no :WFM#00x header)", path=path,
                         hint="Tektronix AWG .wfm files are a different format")
    e = "<" if h[:2] == b"\x0f\x0f" else ">"
    version = int(h[9:10]) if h[9:10].isdigit() else 0
    if version not in (1, 2, 3):
        raise InputError(f"unsupported WFM version {h[2:10].decode('latin-1')!r}", path=path)
    size = _at(HEADER, version)
    if size > len(h):
        h = read_exact(path, 0, size, f"header ({size} bytes)")

    def u(fmt: str, off: int):
        return struct.unpack_from(e + fmt, h, _at(off, version))[0]

    bps = h[15]
    curve = u("i", 16)
    label = header_text(h, 40, 32)
    frames = u("I", 72) + 1
    fastframe = u("I", 78) == 1
    dtype_code = u("i", 122)
    vscale, voffset = u("d", 168), u("d", 176)
    fmt = u("i", 240)
    tscale, toffset = u("d", 488), u("d", 496)
    tunits = h[_at(508, version):_at(528, version)].split(b"\0", 1)[0].decode("latin-1").strip()
    timebase = u("i", 768)
    frac0, gmt0 = u("d", 796), u("i", 804)
    dstart, pstart, pstop = u("I", 822), u("I", 826), u("I", 830)
    if dtype_code != 2:
        raise InputError(f"not a waveform vector (data type {dtype_code}: a measurement or a pixel map)",
                         path=path)
    if timebase != 0 or (tunits and tunits.lower() not in ("s", "sec", "seconds")):
        raise InputError(f"not a time-domain waveform (time base {timebase}, units {tunits!r})", path=path)
    if fmt not in _FORMATS or np.dtype(_FORMATS[fmt]).itemsize != bps:
        raise InputError(f"unsupported sample format {fmt} with {bps} bytes per point", path=path)
    if not (0 <= dstart <= pstart <= pstop) or pstop == 0 or pstop % bps or (pstart - dstart) % bps:
        raise InputError(f"damaged record offsets (data {dstart}, postcharge {pstart}..{pstop})", path=path)
    if not 1 <= frames <= MAX_FRAMES:
        raise InputError(f"{frames} FastFrames announced (damaged header?)", path=path)
    length = (pstart - dstart) // bps
    if length <= 0 or frames * length > MAX_SAMPLES:
        raise InputError(f"{frames} frame(s) of {length} samples is not a record (damaged header?)", path=path)
    notes: list[str] = []
    wf = Waveform(name=label if label.isprintable() and label else "CH1", n=frames * length, dt=tscale,
                  t0=toffset, path=path, offset=curve + dstart, dtype=e + _FORMATS[fmt], scale=vscale,
                  shift=voffset)
    check_waveform(wf, "waveform")
    if fastframe and frames > 1:
        wf.frame_len = length
        wf.frame_stride = pstop
        wf.frame_ticks = _frame_ticks(path, e, _at(HEADER, version), frames, length, tscale, frac0, gmt0, notes)
    return wf, version, notes


def _at(offset: int, version: int) -> int:
    """Where a field at ``offset`` in a version-3 header sits in a file of ``version``."""
    if version == 3:
        return offset
    return offset - 4 * sum(pd < offset for pd in _POINT_DENSITY) - (2 if version == 1 and offset > 154 else 0)


def _frame_ticks(path, e, header, frames, length, dt, frac0, gmt0, notes) -> np.ndarray:
    """Ticks of the frames' first samples, from their trigger timestamps (the table of the
    further frames' update specifications follows the header)."""
    if header + 24 * (frames - 1) > os.path.getsize(path):
        raise InputError(f"{frames} FastFrames announced, but the file is too short for their timestamp "
                         "table (damaged header?)", path=path)
    table = read_exact(path, header, 24 * (frames - 1), "FastFrame timestamp table")
    spec = np.frombuffer(table, dtype=np.dtype([("off", e + "u4"), ("tt", e + "f8"), ("frac", e + "f8"),
                                                ("gmt", e + "i4")]), count=frames - 1)
    onsets = np.concatenate([[0.0], (spec["gmt"].astype(np.float64) - gmt0) + (spec["frac"] - frac0)])
    with np.errstate(invalid="ignore", over="ignore"):
        ticks = np.rint(onsets / dt)
    ok = bool(np.all(np.isfinite(ticks))) and bool(np.all(np.diff(ticks) >= length)) and ticks[-1] < 2.0 ** 62
    if ok:
        gaps = np.diff(ticks) - length
        notes.append(Finding(f"FastFrame: {frames} frames of {length} samples placed at their trigger times; the "
                     f"{frames - 1} gaps between them ({float(gaps.min()) * dt:.3g} s to "
                     f"{float(gaps.max()) * dt:.3g} s) were not recorded: a gap measured across one is not "
                     "bus idle time", Cause.NOTE))
        return ticks.astype(np.int64)
    notes.append(f"FastFrame: {frames} frames of {length} samples whose timestamps do not place them "
                 "one after another: read back to back (times across frames are not real)")
    return np.arange(frames, dtype=np.int64) * length
