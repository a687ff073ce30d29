"""Tektronix ISF (``.isf``): what TDS/DPO/MSO/MDO scopes save to a USB stick, one channel per file.

Layout (Tektronix programmer manuals, ``WFMOutpre?`` and ``CURVe?``; the file
is the instrument's answer to ``WFMOutpre?;CURVe?``): an ASCII header of
``;``-separated ``KEY value`` pairs, optionally prefixed ``:WFMPRE:`` /
``:WFMP:``, keys in long or short form (``BYT_NR``/``BYT_N``, ``XINCR``/``XIN``
...), then ``:CURVE #<d><len>`` (``<d>`` digits giving the byte count) and the
samples. Volts = (raw - YOFF) * YMULT + YZERO; time of sample i =
XZERO + (i - PT_OFF) * XINCR. ``BN_FMT`` RI (signed), RP (unsigned) or FP
(float), ``BYT_OR`` MSB or LSB. The channel's name is the first field of
``WFID`` ("Ch1, DC coupling, ...").

Hand-written (header only; samples are read by io/scopefile.py in slices):
isfreader 1.0.2, the newest release for Python < 3.13, reads the whole file
into memory, calls ``np.fromstring`` (gone in numpy 2) and treats ``BN_FMT FP``
as unsigned integers; the layout above is short and documented.
"""

from __future__ import annotations

import math
import os
import re

from spigap.errors import InputError
from spigap.io.scopefile import MAX_SAMPLES, Waveform, WaveformReader, check_waveform

HEADER_MAX = 64 << 10
_LONG = {  # short form -> long form (the upper-case part of the manual's spelling)
    "BYT_N": "BYT_NR", "BIT_N": "BIT_NR", "ENC": "ENCDG", "BN_F": "BN_FMT", "BYT_O": "BYT_OR",
    "NR_P": "NR_PT", "PT_F": "PT_FMT", "XUN": "XUNIT", "XIN": "XINCR", "XZE": "XZERO", "PT_O": "PT_OFF",
    "YUN": "YUNIT", "YMU": "YMULT", "YOF": "YOFF", "YZE": "YZERO", "WFI": "WFID", "CURV": "CURVE",
}
_CURVE = re.compile(rb":?CURV(?:E)?\s+#", re.I)


def sniff(head: bytes) -> bool:
    """A WFMOutpre header (with or without the :WFMPRE: prefix; TDS2000 files have none)
    followed by a :CURVE block."""
    text = head[:4096].upper()
    return bool(re.match(rb"\s*(:WFMP|BYT_N)", text)) and b"NR_P" in text and b":CURV" in text


def parse_header(text: str) -> dict[str, str]:
    """``KEY value;KEY "quoted; value";...`` -> {LONG_KEY: value} (quotes removed)."""
    out: dict[str, str] = {}
    for m in re.finditer(r'\s*([^;"\s]+)\s*((?:"[^"]*"|[^;"])*)', text):
        key, value = m.group(1), m.group(2).strip()
        key = key.rsplit(":", 1)[-1].upper()
        key = _LONG.get(key, key)
        if value.startswith('"') and value.endswith('"') and len(value) >= 2:
            value = value[1:-1]
        out.setdefault(key, value)
    return out


class IsfReader(WaveformReader):
    format_name = "isf"

    def __init__(self, path, *, samplerate: float | None = None, threshold=None):
        path = str(path)
        wf, notes = read_isf(path)
        super().__init__(path, [wf], fmt="Tektronix ISF", samplerate=samplerate, threshold=threshold,
                         warnings=notes)


def read_isf(path: str) -> tuple[Waveform, list[str]]:
    with open(path, "rb") as f:
        head = f.read(HEADER_MAX)
    m = _CURVE.search(head)
    if not m or not sniff(head):
        raise InputError("not a Tektronix ISF file (no :WFMPRE header with :CURVE data)", path=path)
    pos = m.end()
    if pos >= len(head) or not head[pos:pos + 1].isdigit():
        raise InputError("the :CURVE block has no length after '#'", path=path)
    digits = int(head[pos:pos + 1])
    size_text = head[pos + 1:pos + 1 + digits]
    if digits == 0:                    # '#0': indefinite length, up to the end of the file
        data_off = pos + 1
        nbytes = os.path.getsize(path) - data_off
    else:
        if len(size_text) < digits or not size_text.isdigit():
            raise InputError("the :CURVE block length is damaged", path=path)
        data_off = pos + 1 + digits
        nbytes = int(size_text)
    h = parse_header(head[:m.start()].decode("latin-1"))
    notes: list[str] = []

    def num(key: str, default: float | None = None) -> float:
        if key not in h:
            if default is None:
                raise InputError(f"the header has no {key}", path=path)
            return default
        try:
            v = float(h[key])
        except ValueError:
            raise InputError(f"the header's {key} {h[key]!r} is not a number", path=path) from None
        if not math.isfinite(v):
            raise InputError(f"the header's {key} {h[key]!r} is not a finite number (damaged header?)", path=path)
        return v

    def whole(key: str) -> int:
        v = num(key)
        if v != int(v) or not 0 < v <= MAX_SAMPLES:
            raise InputError(f"the header's {key} {h[key]!r} is not a count (damaged header?)", path=path)
        return int(v)

    enc = h.get("ENCDG", "BIN").upper()
    if not enc.startswith("BIN"):
        raise InputError(f"ASCII-encoded curve data (ENCDG {enc}) is not supported", path=path,
                         hint="save the waveform as a binary ISF")
    if h.get("PT_FMT", "Y").upper().startswith("ENV"):
        raise InputError("an envelope waveform (PT_FMT ENV: min/max pairs) is not supported", path=path,
                         hint="save in sample or high-res acquisition mode")
    xunit = h.get("XUNIT", "s").strip().lower()
    if xunit not in ("s", "sec", "second", "seconds"):
        raise InputError(f"not a time-domain waveform (XUNIT {h.get('XUNIT')!r}, e.g. a spectrum)", path=path)
    width = whole("BYT_NR")
    fmt = h.get("BN_FMT", "RI").upper()
    order = "<" if h.get("BYT_OR", "MSB").upper().startswith("LSB") else ">"
    kinds = {"RI": "i", "RP": "u", "FP": "f"}
    if fmt not in kinds or (fmt == "FP" and width not in (4, 8)) or width not in (1, 2, 4, 8):
        raise InputError(f"unsupported sample format BN_FMT {fmt} with BYT_NR {width}", path=path)
    dtype = f"{order}{kinds[fmt]}{width}"
    n = whole("NR_PT")
    if nbytes < n * width:
        notes.append(f"the :CURVE block holds {nbytes // width} samples, the header announces {n}")
        n = nbytes // width
    ymult, yoff, yzero = num("YMULT"), num("YOFF", 0.0), num("YZERO", 0.0)
    wfid = h.get("WFID", "")
    name = wfid.split(",", 1)[0].strip() if wfid else ""
    if not re.fullmatch(r"[\w .+-]{1,32}", name or "-"):
        name = ""
    wf = Waveform(name=name or "CH1", n=n, dt=num("XINCR"), t0=num("XZERO") - num("PT_OFF", 0.0) * num("XINCR"),
                  path=path, offset=data_off, dtype=dtype, scale=ymult, shift=yzero - yoff * ymult)
    check_waveform(wf, "waveform")
    return wf, notes
