"""Teledyne LeCroy ``.trc`` waveform files (WaveRunner, WavePro, WaveSurfer, HDO ...).

Layout: the ``WAVEDESC`` block of template ``LECROY_2_3`` (LeCroy remote control
manuals, "Waveform template"; the scope answers ``TEMPLATE?`` with it), after an
optional SCPI block prefix ``#9<9 digits>``. Offsets from ``WAVEDESC``:

    32 COMM_TYPE (int16: 0 byte, 1 word samples)   34 COMM_ORDER (0 big-, 1 little-endian)
    36 WAVE_DESCRIPTOR  40 USER_TEXT  44 RES_DESC1  48 TRIGTIME_ARRAY  52 RIS_TIME_ARRAY
    56 RES_ARRAY1  60 WAVE_ARRAY_1 (int32 byte lengths of the blocks that follow, in order)
    96 TRACE_LABEL (char[16])  116 WAVE_ARRAY_COUNT  144 SUBARRAY_COUNT (segments)
    156 VERTICAL_GAIN  160 VERTICAL_OFFSET (float32)  176 HORIZ_INTERVAL (float32)
    180 HORIZ_OFFSET (float64)  244 HORUNIT (char[48])  344 WAVE_SOURCE (int16: 0..3 = C1..C4)

The samples (WAVE_ARRAY_1) follow the descriptor, user text and time arrays;
volts = VERTICAL_GAIN * raw - VERTICAL_OFFSET, time of sample i =
HORIZ_OFFSET + i * HORIZ_INTERVAL. Sequence-mode files (several segments) are
refused: their segments are separate acquisitions.

Hand-written (the descriptor only; samples are read by io/scopefile.py in
slices): lecroyparser 1.4.2 and lecroyscope 1.0.0 read the whole file into
memory, and the template is documented field by field.
"""

from __future__ import annotations

import os
import struct

from spigap.errors import InputError
from spigap.io.scopefile import Waveform, WaveformReader, check_waveform, header_text, read_exact

DESC_SIZE = 346


def sniff(head: bytes) -> bool:
    k = head.find(b"WAVEDESC", 0, 64)
    return k >= 0 and head[k + 16:k + 24] == b"LECROY_2"


class LecroyTrcReader(WaveformReader):
    format_name = "lecroy-trc"

    def __init__(self, path, *, samplerate: float | None = None, threshold=None):
        path = str(path)
        wf, model, notes = read_trc(path)
        super().__init__(path, [wf], fmt=f"LeCroy .trc ({model})" if model else "LeCroy .trc",
                         samplerate=samplerate, threshold=threshold, warnings=notes)


def read_trc(path: str) -> tuple[Waveform, str, list[str]]:
    head = read_exact(path, 0, min(64, os.path.getsize(path)), "file start")
    base = head.find(b"WAVEDESC")
    if base < 0:
        raise InputError("not a LeCroy .trc file (no WAVEDESC block)", path=path)
    d = read_exact(path, base, DESC_SIZE, "WAVEDESC block")
    template = d[16:32].split(b"\0", 1)[0].decode("latin-1")
    if not template.startswith("LECROY_2"):
        raise InputError(f"WAVEDESC template {template!r} is not supported (only LECROY_2_x)", path=path)
    (order,) = struct.unpack_from("<h", d, 34)
    e = "<" if order == 1 else ">"
    (comm_type,) = struct.unpack_from(e + "h", d, 32)
    lengths = struct.unpack_from(e + "7i", d, 36)
    desc_len, user_len, res_desc, trig_len, ris_len, res_arr, wave1 = lengths
    if min(lengths) < 0 or desc_len < DESC_SIZE:
        raise InputError(f"damaged WAVEDESC block lengths {lengths}", path=path)
    model = header_text(d, 76, 16)
    label = header_text(d, 96, 16)
    (count,) = struct.unpack_from(e + "i", d, 116)
    (segments,) = struct.unpack_from(e + "i", d, 144)
    gain, voff = struct.unpack_from(e + "2f", d, 156)
    (hint_,) = struct.unpack_from(e + "f", d, 176)
    (hoff,) = struct.unpack_from(e + "d", d, 180)
    horunit = header_text(d, 244, 48)
    (source,) = struct.unpack_from(e + "h", d, 344)
    if segments > 1:
        raise InputError(f"a sequence-mode file ({segments} segments) is not supported", path=path,
                         hint="save a single acquisition")
    if horunit.upper() not in ("S", ""):
        raise InputError(f"not a time-domain waveform (horizontal unit {horunit!r})", path=path)
    if comm_type not in (0, 1):
        raise InputError(f"unknown sample width COMM_TYPE {comm_type}", path=path)
    width = 1 if comm_type == 0 else 2
    notes: list[str] = []
    n = count
    if wave1 // width < n:
        notes.append(f"WAVE_ARRAY_1 holds {wave1 // width} samples, WAVE_ARRAY_COUNT says {count}")
        n = wave1 // width
    name = label if label and label.isprintable() else (f"C{source + 1}" if 0 <= source <= 7 else "CH1")
    data_off = base + desc_len + user_len + res_desc + trig_len + ris_len + res_arr
    wf = Waveform(name=name, n=n, dt=float(hint_), t0=float(hoff), path=path, offset=data_off,
                  dtype=f"{e}i{width}", scale=float(gain), shift=-float(voff))
    if n <= 0:
        raise InputError("the file holds no samples (WAVE_ARRAY_1 is empty)", path=path)
    check_waveform(wf, "waveform")
    return wf, model, notes
