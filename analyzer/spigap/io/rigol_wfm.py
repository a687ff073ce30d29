"""Rigol ``.wfm`` waveform files: DS1000Z/MSO1000Z, DS1000E/D, DS1000B, DS1000C,
DS2000/MSO2000 and DS4000/MSO4000.

Each family has its own fixed header, told apart by the first four bytes
(the magic) and, where families share one, the model string or the file size:

    01 ff ff ff  DS1000Z   a5 a5 00 00  DS1000E/D (or DS1000C, by size)   a1 a5 00 00  DS1000C
    a5 a5 a4 01  DS1000B   a5 a5 38 00  DS2000, DS4000 (model "DS4..."), DS6000 ("DS6...")
    02 00 00 00  DHO800/DHO900/DHO1000 (not read: their .bin is, io/keysight_bin.py)

Source of truth: the layouts of RigolWFM (github scottprahl/RigolWFM, BSD-3-Clause,
its ksy/rigol_*_wfm.ksy Kaitai descriptions, from Rigol's "DS1000Z Waveform Storage
Structure", "DS1000E/D WFM structure instruction" and "WFM save format" documents
and from files of real scopes) and its channel.py's conversions, read as facts;
docs/formats.md lists them. All samples are uint8 ADC counts; each family turns a
count into volts as ``y_scale * (midpoint - count) - y_offset``:

    DS1000Z   y_scale -V/div / 20, y_offset = offset - V/div (firmware 00.04.04.SP3 with two
              channels: offset - V/div / 5 for a negative offset, offset for the others);
              V/div negated when inverted; midpoint 127; channels interleaved byte by byte
              (stride 1, 2 or 4 bytes: 3 channels use 4), CH4 first
    DS1000E/D y_scale = scale_measured * 1e-6 * probe / 25, y_offset = shift_measured * y_scale,
              midpoint 125; CH1's then CH2's record (rolling mode: roll_stop + 2 invalid
              bytes after each)
    DS1000B   as DS1000E with the sign of inversion, midpoint 127, y_offset + 1.12 V/div;
              four fixed slots of ``points`` bytes from byte 420
    DS1000C   as DS1000E with the sign of inversion; records from byte 256 (272 when the
              first byte is a5)
    DS2000    y_scale = -V/div / 25 (inverted: +), y_offset = the offset, midpoint 127; a
              record at its channel offset + the zero-point offset; "interwoven" (one
              channel using both channels' memory): its samples alternate between CH1's
              and CH2's records
    DS4000    as DS2000 with V/div / 32 (25 when the model's third character is "2")

DS1000Z, DS2000 and DS4000 store V/div at the probe tip (no probe factor applied);
DS1000B/C/E store it at the input and the probe factor multiplies it (a DS1000D, same
layout, stores it applied: a warning says so when the probe is not x1).

The time base: sample interval 1 / sample rate; sample 0 at the time offset minus half
the record (the memory depth for DS1000E/D, DS2000 and DS4000); DS2000 adds its
zero-point offset, and its firmware 00.03.00.01.03 (serial DS2A...) stores an offset
that is not the trigger's (RigolWFM reads it as 0, from the scope's screenshots).

Refused in one line: DS6000 (no file to check its layout against), DHO800/900/1000
``.wfm`` (their ``.bin`` is read), MSO1000Z files with logic channels (their bytes
interleave with the analog ones in a layout no document describes).

Hand-written, header only (samples are read by io/scopefile.py in slices): RigolWFM,
the one maintained reader, parses the whole file into memory (Kaitai reads every
record as one bytes object) and its volts as float64 arrays, which breaks the
bounded-memory rule for the 24 M-sample records these scopes save. The layouts are
small fixed blocks. Checked against RigolWFM's readings of real files
(tests/test_readers_rigol_wfm.py, tests/data/scopes/README.md).
"""

from __future__ import annotations

import os
import struct

import numpy as np

from spigap.errors import InputError, printable
from spigap.io.scopefile import Waveform, WaveformReader, check_waveform, header_text, read_exact

MAGIC_Z = b"\x01\xff\xff\xff"
MAGIC_E = b"\xa5\xa5\x00\x00"
MAGIC_C = b"\xa1\xa5\x00\x00"
MAGIC_B = b"\xa5\xa5\xa4\x01"
MAGIC_2 = b"\xa5\xa5\x38\x00"
MAGIC_DHO = b"\x02\x00\x00\x00"
_MAGICS = (MAGIC_Z, MAGIC_E, MAGIC_C, MAGIC_B, MAGIC_2)      # sniffed; DHO's 02 00 00 00 is too weak
HEADER = 600                      # the longest fixed header read (DS4000's time block ends at 576)
_SAVE_OTHERWISE = "save as CSV (or .bin where the scope offers it) and read that"


def sniff(head: bytes) -> bool:
    """The strong magics only: a file of another extension must not be claimed by ``02 00 00 00``
    (io/__init__.py sends a ``.wfm`` no sniff accepts to this reader, which names DHO files)."""
    return head[:4] in _MAGICS


class RigolWfmReader(WaveformReader):
    format_name = "rigol-wfm"

    def __init__(self, path, *, samplerate: float | None = None, threshold=None):
        path = str(path)
        model, waves, notes = read_rigol_wfm(path)
        super().__init__(path, waves, fmt=f"Rigol {model} .wfm", samplerate=samplerate, threshold=threshold,
                         warnings=notes)


def read_rigol_wfm(path: str) -> tuple[str, list[Waveform], list[str]]:
    size = os.path.getsize(path)
    h = read_exact(path, 0, min(size, HEADER), "header")
    magic = h[:4]
    if magic != MAGIC_DHO and not sniff(h):
        raise InputError("neither a Rigol nor a Tektronix .wfm file (unknown magic bytes)", path=path,
                         hint="Tektronix AWG .wfm files are a different format")
    if magic == MAGIC_DHO:
        raise InputError("Rigol .wfm of model DHO800/DHO900/DHO1000 is not read", path=path,
                         hint="save as .bin on the scope (spigap reads DHO .bin) or as CSV")
    serial = header_text(h, 4, 20)   # DS2000/DS4000/DS6000: the "model number" field holds the serial (DS2A15...)
    ds4000 = magic == MAGIC_2 and serial.startswith(("DS4", "MSO4"))
    need = 576 if ds4000 else {MAGIC_Z: 264, MAGIC_E: 276, MAGIC_C: 108, MAGIC_B: 420, MAGIC_2: 256}[magic]
    if len(h) < need:
        raise InputError(f"the header is cut (file has {size} bytes, the header {need})", path=path)
    notes: list[str] = []
    if magic == MAGIC_Z:
        model, waves = _ds1000z(path, h)
    elif magic == MAGIC_B:
        model, waves = _ds1000b(path, h)
    elif magic == MAGIC_C or (magic == MAGIC_E and _is_c_sized(h, size)):
        model, waves = _ds1000c(path, h)
    elif magic == MAGIC_E:
        model, waves = _ds1000e(path, h, notes)
    else:
        if serial.startswith(("DS6", "MSO6")):
            raise InputError(f"Rigol .wfm of model DS6000 ({printable(serial)}) is not read (no DS6000 file to "
                             "check its layout against)", path=path, hint=_SAVE_OTHERWISE)
        if ds4000:
            model, waves = "DS4000", _ds4000(path, h, serial)
        else:
            model, waves = "DS2000", _ds2000(path, h, serial)
    if not waves:
        raise InputError("the file holds no enabled channel", path=path)
    for wf in waves:
        check_waveform(wf, f"channel {wf.name}")
    return printable(model), waves, notes


# ------------------------------------------------------------------ helpers
def _wave(path, k, n, dt, t0, offset, y_scale, y_offset, midpoint, stride=0) -> Waveform:
    """volts = y_scale * (midpoint - count) - y_offset, as ``raw * scale + shift``."""
    return Waveform(name=f"CH{k + 1}", n=n, dt=dt, t0=t0, path=path, offset=offset, dtype="u1",
                    scale=-y_scale, shift=midpoint * y_scale - y_offset, stride=stride)


def _interval(rate: float, path: str) -> float:
    if not (np.isfinite(rate) and rate > 0):
        raise InputError(f"sample rate {rate!r} Hz is not usable (damaged header?)", path=path)
    return 1.0 / rate


# ----------------------------------------------------------------- families
def _ds1000z(path: str, h: bytes) -> tuple[str, list[Waveform]]:
    model, firmware = header_text(h, 8, 20), header_text(h, 28, 20)
    mask = h[88] & 0x0F
    (la_offset,) = struct.unpack_from("<I", h, 108)
    depth, rate_ghz = struct.unpack_from("<If", h, 116)
    (ps_offset,) = struct.unpack_from("<q", h, 72)
    hsize, hoff = struct.unpack_from("<2I", h, 256)
    if la_offset:
        # MSO1000Z logic pods interleave their bytes with the analog ones in a layout
        # no document describes (RigolWFM guesses it from the byte patterns)
        raise InputError(f"Rigol .wfm of model {printable(model)} with logic channels is not read", path=path,
                         hint=_SAVE_OTHERWISE)
    count = bin(mask).count("1")
    stride = {0: 1, 1: 1, 2: 2, 3: 4, 4: 4}[count]
    n = depth // stride
    dt = _interval(rate_ghz * 1e9, path)
    t0 = ps_offset * 1e-12 - n * dt / 2
    data = hoff + hsize
    waves = []
    enabled = [k for k in range(4) if mask >> k & 1]
    for k in enabled:
        scale, shift, inverted = struct.unpack_from("<ffB", h, 124 + 28 * k + 8)
        vdiv = -scale if inverted else scale
        if firmware == "00.04.04.SP3" and count == 2:
            bias = vdiv / 5.0 if shift < 0 else 0.0
        else:
            bias = vdiv
        # bytes of the enabled channels in turn, the highest channel first: with two channels
        # the first enabled one sits at odd bytes; with three or four, CHk at byte 4 - k
        lane = {1: 0, 2: 1 if k == enabled[0] else 0, 4: 3 - k}[stride]
        waves.append(_wave(path, k, n, dt, t0, data + lane, -vdiv / 20.0, shift - bias, 127.0,
                           stride=stride if stride > 1 else 0))
    return model or "DS1000Z", waves


def _is_c_sized(h: bytes, size: int) -> bool:
    """A DS1000C file may start with a5 a5 00 00 like a DS1000E one: its size tells (its
    records start at 256 or 272, a DS1000E's at 276)."""
    (pts,) = struct.unpack_from("<I", h, 28)
    chans = int(h[49] != 0) + int(h[73] != 0)
    return pts > 0 and chans > 0 and size in (256 + chans * pts, 272 + chans * pts)


def _ds1000e(path: str, h: bytes, notes: list[str]) -> tuple[str, list[Waveform]]:
    (roll_stop,) = struct.unpack_from("<I", h, 20)
    (depth1,) = struct.unpack_from("<I", h, 28)
    (depth2,) = struct.unpack_from("<I", h, 232)
    (rate,) = struct.unpack_from("<f", h, 100)
    (toff1,) = struct.unpack_from("<q", h, 112)
    (rate2,) = struct.unpack_from("<f", h, 236 + 16)
    (toff2,) = struct.unpack_from("<q", h, 236 + 28)
    alt = h[142] == 4                  # alternate trigger: CH2 has its own time base
    skip = roll_stop + 2 if roll_stop else 0
    if h[58 + 15] and depth2 == 0:
        depth2 = depth1
    waves = []
    off = 276
    for k, depth in ((0, depth1), (1, depth2)):
        c = 34 + 24 * k
        if not h[c + 15]:
            continue
        (probe,) = struct.unpack_from("<f", h, c + 10)
        smeas, shmeas = struct.unpack_from("<ih", h, c + 18)
        y_scale = 1e-6 * smeas * probe / 25.0
        n = depth - skip
        if n <= 0:
            raise InputError(f"CH{k + 1}: {depth} samples with {skip} invalid ones (damaged header?)", path=path)
        dt = _interval(rate2 if (alt and k == 1) else rate, path)
        toff = (toff2 if (alt and k == 1) else toff1) * 1e-12
        waves.append(_wave(path, k, n, dt, toff - depth * dt / 2, off, y_scale, shmeas * y_scale, 125.0))
        off += n + skip
        if probe != 1.0:
            notes.append(f"CH{k + 1}: probe x{probe:g} applied to the scale as a DS1000E does; a DS1000D "
                         f"(the same file layout) stores it applied already: if a DS1000D wrote this file, "
                         f"divide its volts by {probe:g}")
    return "DS1000E/D", waves


def _ds1000b(path: str, h: bytes) -> tuple[str, list[Waveform]]:
    (points,) = struct.unpack_from("<I", h, 60)
    toff, rate = struct.unpack_from("<qf", h, 172)
    dt = _interval(rate, path)
    waves = []
    for k in range(4):
        c = 68 + 24 * k
        probe, _ptype, _inv_disp, enabled, inverted, smeas, shmeas = struct.unpack_from("<fbBBBih", h, c + 8)
        if not enabled:
            continue
        vdiv = 1e-6 * smeas * probe * (-1 if inverted else 1)
        y_scale = vdiv / 25.0
        waves.append(_wave(path, k, points, dt, toff * 1e-12 - points * dt / 2, 420 + k * points, y_scale,
                           shmeas * y_scale + 1.12 * vdiv, 127.0))
    return header_text(h, 4, 8) or "DS1000B", waves


def _ds1000c(path: str, h: bytes) -> tuple[str, list[Waveform]]:
    (points,) = struct.unpack_from("<I", h, 28)
    toff, rate = struct.unpack_from("<qf", h, 92)
    dt = _interval(rate, path)
    off = 256 + (16 if h[0] == 0xA5 else 0)
    waves = []
    for k in range(2):
        c = 36 + 24 * k
        (probe,) = struct.unpack_from("<f", h, c + 8)
        enabled, inverted = h[c + 13], h[c + 14]
        smeas, shmeas = struct.unpack_from("<ih", h, c + 16)
        if not enabled:
            continue
        y_scale = 1e-6 * smeas * probe * (-1 if inverted else 1) / 25.0
        waves.append(_wave(path, k, points, dt, toff * 1e-12 - points * dt / 2, off, y_scale, shmeas * y_scale,
                           125.0))
        off += points
    return "DS1000C", waves


def _ds2000(path: str, h: bytes, model: str) -> list[Waveform]:
    firmware = header_text(h, 24, 20)
    interwoven = bool(h[65] & 1)
    offsets = struct.unpack_from("<4I", h, 68)
    (rate,) = struct.unpack_from("<f", h, 96)
    (toff_ps,) = struct.unpack_from("<q", h, 112)
    storage_depth, z_pt, wfm_len = struct.unpack_from("<3I", h, 244)
    dt = _interval(rate, path)
    toff = toff_ps * 1e-12
    if model.startswith("DS2A") and firmware == "00.03.00.01.03":
        # RigolWFM's reading of this firmware's files: the stored offset is not the trigger's
        # (the scope's screenshots of them show the trigger centred)
        toff = 0.0
    t0 = toff + z_pt * dt - storage_depth * dt / 2
    waves = []
    for k in range(4):
        c = 120 + 28 * k
        enabled = h[c]
        vdiv, voffset = struct.unpack_from("<ff", h, c + 8)
        inverted = (h[c + 16] if enabled == 1 else h[c + 17]) == 1
        if not enabled:
            continue
        y_scale = -(-vdiv if inverted else vdiv) / 25.0
        if interwoven:
            if k > 1 or not (offsets[0] and offsets[1]):
                raise InputError(f"CH{k + 1}: interwoven record without CH1's and CH2's memory (damaged header?)",
                                 path=path)
            waves.append(_interwoven(path, k, wfm_len, dt, t0, [o + z_pt for o in offsets[:2]], y_scale,
                                     voffset))
        elif offsets[k]:
            waves.append(_wave(path, k, wfm_len, dt, t0, offsets[k] + z_pt, y_scale, voffset, 127.0))
    return waves


def _interwoven(path, k, n, dt, t0, starts, y_scale, y_offset) -> Waveform:
    """One channel sampled in both channels' memories: sample 2i in CH1's record, 2i+1 in CH2's."""
    size = os.path.getsize(path)
    half = n // 2
    have = min(half, *(max(0, size - s) for s in starts))

    def read(lo: int, hi: int) -> np.ndarray:
        a, b = (np.fromfile(path, dtype=np.uint8, count=(hi + 1) // 2 - lo // 2, offset=s + lo // 2)
                for s in starts)
        m = min(len(a), len(b))
        both = np.empty(2 * m, np.uint8)
        both[0::2], both[1::2] = a[:m], b[:m]
        return both[lo % 2:lo % 2 + hi - lo]

    wf = _wave(path, k, 2 * half, dt, t0, starts[0], y_scale, y_offset, 127.0)
    wf.read, wf.held = read, 2 * have
    return wf


def _ds4000(path: str, h: bytes, model: str) -> list[Waveform]:
    mask = h[64] & 0x0F
    positions = struct.unpack_from("<4I", h, 68)
    (rate,) = struct.unpack_from("<f", h, 100)
    (depth,) = struct.unpack_from("<I", h, 268)
    (toff_ps,) = struct.unpack_from("<q", h, 568)
    dt = _interval(rate, path)
    divisions = 25.0 if model[2:3] == "2" else 32.0
    waves = []
    for k in range(4):
        if not mask >> k & 1:
            continue
        c = 124 + 28 * k
        vdiv, voffset, inverted = struct.unpack_from("<ffB", h, c + 8)
        y_scale = -(-vdiv if inverted else vdiv) / divisions
        waves.append(_wave(path, k, depth, dt, toff_ps * 1e-12 - depth * dt / 2, positions[k], y_scale, voffset,
                           127.0))
    return waves
