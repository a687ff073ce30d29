"""Write one channel as a Tektronix ISF file (what TDS/DPO/MSO/MDO scopes save to USB).

The layout of io/isf.py (the instrument's answer to ``WFMOutpre?;CURVe?``): an
ASCII header of ``KEY value`` pairs as an MDO4104C writes them
(tests/data/scopes/tek0000CH1.isf), then ``:CURVE #<d><len>`` and big-endian
signed samples. Volts are quantized the way the scope does: ``bits`` of range
over 10 vertical divisions of ``volts_per_div`` (8-bit acquisitions one byte a
sample, more bits in two with the low bits zero). The samples
are rendered chunk by chunk (``source.volts(start, stop)`` or a logic Track),
so memory stays bounded for long records.
"""

from __future__ import annotations

import numpy as np

from spigap.units import fmt_time

CHUNK = 1 << 20


def write_isf(path, source, samplerate: float, n_samples: int, *, name: str = "Ch1", t0: float = 0.0,
              volts_per_div: float = 0.5, center: float = 1.65, bits: int = 8, chunk: int = CHUNK,
              **analog_kw) -> None:
    """``bits`` <= 8: one byte a sample (BYT_NR 1, as a scope's 8-bit acquisition); else two."""
    from spigap.synth.writers import analog as render_analog

    dt = 1.0 / samplerate
    full = 10.0 * volts_per_div                     # ten divisions on screen
    width = 1 if bits <= 8 else 2
    span = 1 << (8 * width)
    ymult = full / span
    step = 1 << (8 * width - bits)                 # codes below the ADC's resolution stay zero
    yoff = 0.0
    per_div = fmt_time(dt * n_samples / 10).replace(" ", "").replace("µ", "u")
    wfid = f"{name}, DC coupling, {_si(volts_per_div)}V/div, {per_div}/div, {n_samples} points, Sample mode"
    head = (f":WFMPRE:BYT_NR {width};BIT_NR {8 * width};ENCDG BINARY;BN_FMT RI;BYT_OR MSB;WFID \"{wfid}\";"
            f"NR_PT {n_samples};"
            f"PT_FMT Y;XUNIT \"s\";XINCR {dt:.4E};XZERO {t0:.4E};PT_OFF 0;YUNIT \"V\";YMULT {ymult:.4E};"
            f"YOFF {yoff:.4E};YZERO {center:.4E};VSCALE {volts_per_div:.4f};DOMAIN TIME;WFMTYPE ANALOG;")
    nbytes = width * n_samples
    digits = str(nbytes)
    with open(path, "wb") as f:
        f.write(head.encode("ascii") + f":CURVE #{len(digits)}{digits}".encode("ascii"))
        for lo in range(0, n_samples, chunk):
            hi = min(n_samples, lo + chunk)
            v = render_analog(source, lo, hi, **analog_kw).astype(np.float64)
            code = np.rint((v - center) / ymult / step) * step
            code = np.clip(code, -span // 2, span // 2 - step).astype(">i2" if width == 2 else "i1")
            f.write(code.tobytes())
        f.write(b"\n")


def _si(v: float) -> str:
    for unit, scale in (("", 1.0), ("m", 1e-3)):
        if abs(v) >= scale:
            return f"{v / scale:.3f}{unit}"
    return f"{v * 1e3:.3f}m"


def write_isf_set(stem, sources, samplerate: float, n_samples: int, **kw) -> list[str]:
    """One ISF file per source, named as the scope names them: ``<stem>CH1.isf`` ...; the
    paths in channel order."""
    paths = []
    for k, src in enumerate(sources):
        p = f"{stem}CH{k + 1}.isf"
        write_isf(p, src, samplerate, n_samples, name=f"Ch{k + 1}", **kw)
        paths.append(p)
    return paths
