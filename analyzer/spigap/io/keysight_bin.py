"""Keysight/Agilent ``.bin`` waveform files (InfiniiVision, Infiniium) and Rigol's
``.bin`` of the same layout (MSO5000 ``RG01``, DHO800/900/1000 ``RG03``).

Layout (Keysight InfiniiVision and Infiniium user's guides, "Binary Data (.bin)
Format"), all little-endian:

    file header:     char[2] cookie "AG" (Rigol: "RG"); char[2] version;
                     file size (int32; uint64 in version "03"); int32 waveforms
    waveform header: int32 header size; int32 waveform type (1 normal, 2 peak
                     detect, 3 average, 6 logic ...); int32 buffers; int32 points;
                     int32 count; float32 x display range; float64 x display origin;
                     float64 x increment; float64 x origin; int32 x units (2 = s);
                     int32 y units; char[16] date; char[16] time; char[24] frame
                     (model:serial); char[16] label; float64 time tag; uint32 segment
    per buffer:      int32 header size; int16 buffer type (1 normal float32, 2/3
                     max/min, 5 counts, 6 logic uint8); int16 bytes per point;
                     buffer size (int32; int64 when the header is 16 bytes) and the data

Sample i of a waveform is at x origin + i * x increment. Headers are walked
by their own size fields, so longer headers (Rigol's 144-byte one) read too.
Hand-written: the layout is the manuals' and a few fixed fields; no maintained
PyPI reader of it streams (RigolWFM's agilent/rigol bin parsers build all
samples in memory). The samples are read by io/scopefile.py in slices.
"""

from __future__ import annotations

import os
import struct

from spigap.errors import InputError
from spigap.io.scopefile import Waveform, WaveformReader, check_waveform, header_text, read_exact, unique_names

_WAVE_TYPES = {0: "unknown", 1: "normal", 2: "peak detect", 3: "average", 4: "horizontal histogram",
               5: "vertical histogram", 6: "logic"}
_VENDOR = {b"AG": "Keysight/Agilent", b"RG": "Rigol"}
MAX_WAVEFORMS = 1024


def sniff(head: bytes) -> bool:
    return len(head) >= 12 and head[:2] in _VENDOR and head[2:4].isdigit()


class KeysightBinReader(WaveformReader):
    format_name = "keysight-bin"

    def __init__(self, path, *, samplerate: float | None = None, threshold=None):
        path = str(path)
        vendor, version, waves, notes = read_bin(path)
        super().__init__(path, waves, fmt=f"{vendor} .bin v{version}", samplerate=samplerate,
                         threshold=threshold, warnings=notes)


def read_bin(path: str) -> tuple[str, str, list[Waveform], list[str]]:
    size = os.path.getsize(path)
    head = read_exact(path, 0, 16 if size >= 16 else 12, "file header")
    if not sniff(head):
        raise InputError("not a Keysight/Agilent/Rigol .bin waveform file (no AG/RG header)", path=path)
    vendor, version = _VENDOR[head[:2]], head[2:4].decode()
    if version == "03":
        (n_waves,) = struct.unpack_from("<i", head, 12)
        off = 16
    else:
        (n_waves,) = struct.unpack_from("<i", head, 8)
        off = 12
    if not 0 < n_waves <= MAX_WAVEFORMS:
        raise InputError(f"the header announces {n_waves} waveforms (damaged header?)", path=path)
    waves: list[Waveform] = []
    names: list[str] = []
    notes: list[str] = []
    skipped: list[str] = []
    for k in range(n_waves):
        if off + 140 > size:
            if waves:
                notes.append(f"the file ends before waveform {k + 1} of {n_waves} (cut short)")
                break
            raise InputError(f"the file ends inside the first waveform header ({size} bytes)", path=path)
        wh = read_exact(path, off, 140, f"waveform {k + 1} header")
        hs, wtype, nbuf, points, _count = struct.unpack_from("<5i", wh, 0)
        xinc, xorg = struct.unpack_from("<2d", wh, 32)
        xunits, _yunits = struct.unpack_from("<2i", wh, 48)
        label = header_text(wh, 112, 16)
        if not 140 <= hs <= 4096 or not 0 <= nbuf <= 16:
            raise InputError(f"waveform {k + 1}: header size {hs} / {nbuf} buffers (damaged header?)", path=path)
        if head[:2] == b"RG" and hs == 144:
            # RigolWFM's notes and its sample files: MSO5074 firmware writes a fixed header
            # (x increment 1e-12 s, 1000 points) and uint8 ADC counts marked as float32
            raise InputError("a Rigol MSO5074 .bin: its firmware writes no usable time base or calibration "
                             "(x increment 1e-12 s, raw ADC bytes marked as float32)", path=path,
                             hint="save as .wfm or CSV on that scope")
        off += hs
        first_buffer = None
        for b in range(nbuf):
            dh = read_exact(path, off, 12, f"waveform {k + 1} data header")
            dhs, btype, bpp = struct.unpack_from("<ihh", dh, 0)
            if dhs >= 16:
                (bsize,) = struct.unpack("<q", read_exact(path, off + 8, 8, f"waveform {k + 1} data header"))
            else:
                (bsize,) = struct.unpack_from("<i", dh, 8)
            if not 12 <= dhs <= 4096 or bsize < 0:
                raise InputError(f"waveform {k + 1}: data header size {dhs}, buffer {bsize} bytes (damaged?)",
                                 path=path)
            if first_buffer is None:
                first_buffer = (off + dhs, btype, bpp, bsize)
            off += dhs + bsize
        name = label or f"CH{k + 1}"
        kind = _WAVE_TYPES.get(wtype, f"type {wtype}")
        if wtype not in (1, 3) or first_buffer is None:
            skipped.append(f"{name} ({kind})")
            continue
        data_off, btype, bpp, bsize = first_buffer
        if btype != 1 or bpp != 4:
            skipped.append(f"{name} (buffer type {btype}, {bpp} bytes per point)")
            continue
        if xunits not in (0, 2):
            raise InputError(f"waveform {name}: not a time-domain waveform (x units code {xunits}, e.g. an FFT)",
                             path=path)
        n = min(points, bsize // 4) if points > 0 else bsize // 4
        if head[:2] == b"RG":
            # Rigol stores the time from the first sample to the trigger: +n*dt/2 with the trigger
            # at the screen centre in RigolWFM's MSO5000 and DHO800 files (RigolWFM negates it too)
            xorg = -xorg
        wf = Waveform(name=name, n=n, dt=xinc, t0=xorg, path=path, offset=data_off, dtype="<f4")
        check_waveform(wf, f"waveform {name}")
        waves.append(wf)
        names.append(name)
    if skipped:
        msg = f"skipped waveform(s) spigap does not read: {', '.join(skipped)} (peak detect, histograms and " \
              "logic pods are not analog samples)"
        if not waves:
            raise InputError(msg, path=path, hint="save in normal or average acquisition mode")
        notes.append(msg)
    for wf, name in zip(waves, unique_names(names)):
        wf.name = name
    return vendor, version, waves, notes
