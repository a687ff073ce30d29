"""Siglent ``.bin`` waveform files of the SDS1000X-E / SDS2000X-E family (the layout
without a version field). Siglent's "How to Extract Data from the Binary File of SDS
Oscilloscope" for these series could not be read from here: the field table below is
the one giuliof/siglent-bin2sr's Kaitai description (test/siglent-bin.ksy, BSD-3-Clause,
whose comments quote the note) and geekman/siglent-bin2sr's 010 template give, read as
facts and matched on the real file. All little-endian; no magic bytes:

    0x00  int32[4]  CH1..CH4 on (1) / off (0)
    0x10  4 x value-with-unit  CH1..CH4 V/div
    0x50  4 x value-with-unit  CH1..CH4 vertical offset
    0x90  int32     digital (logic) channels on
    0x94  int32[16] D0..D15 state
    0xd4  value-with-unit  time/div;   0xe4  value-with-unit  trigger delay
    0xf4  int32     samples per analog channel
    0xf8  value-with-unit  analog sample rate
    0x800 the samples: uint8 codes, the enabled channels' records one after another

A value-with-unit is float64 value, int32 magnitude, int32 unit: the value is
``value * 1000 ** (magnitude - 8)`` (magnitude 7 milli, 6 micro ...), the unit code
0 V, 1 A ... 23 dBm. A code becomes volts as ``(code - 128) * V/div / 25 - offset``
(25 codes per division, as Siglent's SDS1000X-E programming guide gives it for the
same ADC codes read over SCPI, ``code * vdiv / 25 - voffset``); sample 0 is at
``delay - 7 * time/div`` (14 horizontal divisions; the guide's ``trdl - timebase *
grid / 2``).

The offset's sign is the one reading the sources disagree on: Siglent's binary-file
note and SigUtils (the reader the tests check us against) add the offset; the
programming guide and vindavs/siglent-bin's measurements of SDS800X HD files (known
levels, the later V4 layout) subtract it. The one public file of this layout has a
0 V offset, so it cannot settle it: a channel with an offset gets a warning that names
both readings (edges at the automatic mid-range threshold do not depend on it).

Later Siglent scopes (SDS2000X Plus, SDS5000X, SDS6000, SDS800X HD) write versioned
layouts (an int32 version, then the data offset): refused in one line. Their public
real files could not be obtained here, and the one careful check of the note against
real files (vindavs/siglent-bin's SPEC.md, V4) found the note's offset sign and time
origin wrong, so reading them from the note alone would be unchecked. Files with the
digital channels on are refused too (their bit-packed records follow the analog ones
in a layout no file here shows).

Hand-written, header only (samples are read by io/scopefile.py in slices): there is
no maintained PyPI reader of these files (siglent-bin is not on PyPI and reads only
V4; SigUtils and siglent-bin2sr load whole files). Checked against SigUtils' reading
of a real SDS2000X-E file (tests/test_readers_siglent_bin.py,
tests/data/scopes/README.md).
"""

from __future__ import annotations

import math
import os
import struct

from spigap.findings import Cause, Finding
from spigap.errors import InputError
from spigap.io.scopefile import Waveform, WaveformReader, check_waveform, read_exact

DATA_OFFSET = 0x800
HEADER = 0x11C                 # the fields read end with the sample rate (0xf8 + 16) and a margin
CODES_PER_DIV = 25.0
CENTRE = 128.0
GRID = 14                      # horizontal divisions of SDS1000X-E / SDS2000X-E screens
_UNITS = ("V", "A", "V²", "A²", "OU", "W", "√V", "√A", "∫V", "∫A", "dV/dt", "dA/dt", "/div", "Hz", "s",
          "Sa", "pts", "(none)", "dB", "dBV", "dBA", "Vpp", "Vdc", "dBm")
_SAVE_OTHERWISE = "save as CSV on the scope (spigap reads Siglent CSV)"
_VENDORS = ("neither a Saleae export (<SALEAE>), a Keysight/Agilent or Rigol waveform (AG/RG) nor a Siglent "
            "SDS1000X-E/SDS2000X-E waveform (its header's values are not plausible)")


def _value(h: bytes, off: int) -> tuple[float, int, int]:
    return struct.unpack_from("<dII", h, off)


def _si(value: float, magnitude: int) -> float:
    return value * 1000.0 ** (magnitude - 8)


def _plausible(h: bytes, off: int, positive: bool) -> bool:
    """A value-with-unit: known magnitude and unit codes, a finite value (positive if asked)."""
    value, magnitude, unit = _value(h, off)
    return magnitude <= 13 and unit <= 23 and math.isfinite(value) and (value > 0 if positive else True)


def sniff(head: bytes) -> bool:
    """No magic: every field of the header must be plausible (on/off flags 0/1 with one
    channel on, known magnitude and unit codes, the enabled channels' V/div positive, offsets
    finite, time/div and sample rate positive, the trigger delay's magnitude known, a record
    length). Saleae, Keysight and Rigol files start with ASCII, never with four 0/1 int32s."""
    if len(head) < HEADER:
        return False
    flags = struct.unpack_from("<4I", head, 0)
    if any(f > 1 for f in flags) or not any(flags) or struct.unpack_from("<I", head, 0x90)[0] > 1:
        return False
    if not all(_plausible(head, 0x10 + 16 * k, bool(flags[k])) and _plausible(head, 0x50 + 16 * k, False)
               for k in range(4)):
        return False
    tdiv, tmag, _ = _value(head, 0xD4)
    _, dmag, _ = _value(head, 0xE4)
    rate, rmag, _ = _value(head, 0xF8)
    (n,) = struct.unpack_from("<I", head, 0xF4)
    return (math.isfinite(tdiv) and tdiv > 0 and tmag <= 13 and dmag <= 13 and math.isfinite(rate) and rate > 0
            and rmag <= 13 and n > 0)


def _versioned(head: bytes) -> int | None:
    """The version of a later layout (int32 version, int32 data offset, then the on/off flags)."""
    if len(head) < 24:
        return None
    version, data_offset = struct.unpack_from("<2I", head, 0)
    flags = struct.unpack_from("<4I", head, 8)
    if 0 < version < 64 and 0x100 <= data_offset <= 0x100000 and data_offset % 0x100 == 0 \
            and all(f <= 1 for f in flags):
        return version
    return None


class SiglentBinReader(WaveformReader):
    format_name = "siglent-bin"

    def __init__(self, path, *, samplerate: float | None = None, threshold=None):
        path = str(path)
        waves, notes = read_siglent_bin(path)
        super().__init__(path, waves, fmt="Siglent SDS1000X-E/SDS2000X-E .bin", samplerate=samplerate,
                         threshold=threshold, warnings=notes)


def read_siglent_bin(path: str) -> tuple[list[Waveform], list[str]]:
    size = os.path.getsize(path)
    h = read_exact(path, 0, min(size, DATA_OFFSET), "header")
    version = _versioned(h)
    if version is not None:
        raise InputError(f"Siglent .bin version {version} is not read (only the SDS1000X-E/SDS2000X-E layout "
                         "without a version is)", path=path, hint=_SAVE_OTHERWISE)
    if len(h) < HEADER and h[:4] in (b"\0\0\0\0", b"\1\0\0\0"):
        raise InputError(f"the header is cut (file has {size} bytes, a Siglent .bin header {DATA_OFFSET})",
                         path=path)
    if not sniff(h):
        raise InputError(f"not a .bin spigap reads: {_VENDORS}", path=path,
                         hint="if it is one of these, the file is damaged; else save as CSV")
    if struct.unpack_from("<I", h, 0x90)[0]:
        raise InputError("Siglent .bin with digital (logic) channels on is not read", path=path,
                         hint="turn the digital channels off before saving, or " + _SAVE_OTHERWISE)
    if size < DATA_OFFSET:
        raise InputError(f"the file ends at byte {size}, before the samples (byte {DATA_OFFSET})", path=path)
    (n,) = struct.unpack_from("<I", h, 0xF4)
    rate = _si(*_value(h, 0xF8)[:2])
    tdiv = _si(*_value(h, 0xD4)[:2])
    delay = _si(*_value(h, 0xE4)[:2])
    dt = 1.0 / rate if rate > 0 else math.inf
    t0 = delay - GRID / 2 * tdiv
    notes: list[str] = []
    waves: list[Waveform] = []
    flags = struct.unpack_from("<4I", h, 0)
    for k in (k for k in range(4) if flags[k]):
        vdiv_v, vdiv_m, unit = _value(h, 0x10 + 16 * k)
        off_v, off_m, _ = _value(h, 0x50 + 16 * k)
        vdiv, offset = _si(vdiv_v, vdiv_m), _si(off_v, off_m)
        y = vdiv / CODES_PER_DIV
        name = f"CH{k + 1}"
        wf = Waveform(name=name, n=n, dt=dt, t0=t0, path=path, offset=DATA_OFFSET + len(waves) * n, dtype="u1",
                      scale=y, shift=-CENTRE * y - offset)
        check_waveform(wf, f"channel {name}")
        waves.append(wf)
        if unit != 0:
            notes.append(Finding(f"{name}: levels are in {_UNITS[unit]} (the file's unit), not volts", Cause.NOTE))
        if offset != 0:
            notes.append(f"{name}: vertical offset {offset:g} {_UNITS[unit]} subtracted as Siglent's programming "
                         f"guide does; Siglent's binary-file note adds it (levels {2 * offset:g} higher): not "
                         "settled on a real file of this layout (edges at the automatic threshold are the same)")
    return waves, notes
