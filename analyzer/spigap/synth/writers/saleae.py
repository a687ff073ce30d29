"""Write tracks as a Saleae Logic 2 binary export folder (digital_N.bin / analog_N.bin).

Layouts: see analyzer/spigap/io/saleae.py (saleae/gitbook-docs binary export v0 and v1).
"""

from __future__ import annotations

import os
import struct
from typing import Sequence

import numpy as np

from spigap.synth.srwriter import Track
from spigap.synth.writers import analog as render_analog
from spigap.synth.writers import levels as render_levels

CHUNK = 1 << 20


def write_saleae(folder, tracks: Sequence[Track], samplerate: float, n_samples: int, *, version: int = 1,
                 analog: bool | Sequence[str] = False, begin_time: float = 0.0,
                 gaps: Sequence[tuple[int, int]] = (), chunk_rate: float | None = None,
                 v_high: float = 3.3, noise: float = 0.02, rise: int = 1, seed: int = 0) -> None:
    """One file per track: ``digital_<j>.bin`` (or ``analog_<j>.bin`` for tracks
    named in ``analog``; ``analog=True`` = all tracks).

    ``gaps`` (v1 only): sample ranges [a, b) without data, which split the
    digital chunks / analog waveforms. ``chunk_rate`` overrides the sample rate
    stored in v1 headers (to write implausible metadata)."""
    os.makedirs(folder, exist_ok=True)
    names = [t.name for t in tracks]
    is_analog = set(names) if analog is True else set(analog or ())
    segments = _segments(n_samples, gaps)
    if version == 0 and len(segments) > 1:
        raise ValueError("version 0 files have no gaps")
    rng = np.random.default_rng(seed)
    for j, tr in enumerate(tracks):
        tr = tr.clean()
        if tr.name in is_analog:
            path = os.path.join(folder, f"analog_{j}.bin")
            with open(path, "wb") as f:
                f.write(b"<SALEAE>" + struct.pack("<ii", version, 1))
                if version == 0:
                    f.write(struct.pack("<dQQQ", begin_time, int(round(samplerate)), 1, n_samples))
                else:
                    f.write(struct.pack("<Q", len(segments)))
                for a, b in segments:
                    if version == 1:
                        f.write(struct.pack("<dddqQ", begin_time + a / samplerate, begin_time,
                                            chunk_rate or samplerate, 1, b - a))
                    for lo in range(a, b, CHUNK):
                        hi = min(b, lo + CHUNK)
                        f.write(render_analog(tr, lo, hi, v_high=v_high, noise=noise, rise=rise,
                                              rng=rng).astype("<f4").tobytes())
        else:
            path = os.path.join(folder, f"digital_{j}.bin")
            with open(path, "wb") as f:
                f.write(b"<SALEAE>" + struct.pack("<ii", version, 0))
                if version == 1:
                    f.write(struct.pack("<Q", len(segments)))
                for a, b in segments:
                    init = int(render_levels(tr, a, a + 1)[0]) if b > a else int(tr.initial)
                    inside = (tr.samples > a) & (tr.samples < b)
                    s, lv = tr.samples[inside], tr.levels[inside].astype(np.uint8)
                    prev = np.concatenate([[init], lv[:-1]]).astype(np.uint8)
                    s = s[lv != prev]
                    times = begin_time + s.astype(np.float64) / samplerate
                    t_a, t_b = begin_time + a / samplerate, begin_time + b / samplerate
                    if version == 0:
                        f.write(struct.pack("<Iddq", init, t_a, t_b, len(times)))
                    else:
                        f.write(struct.pack("<IdddQ", init, chunk_rate or samplerate, t_a, t_b, len(times)))
                    f.write(times.astype("<f8").tobytes())


def _segments(n, gaps):
    out, pos = [], 0
    for a, b in sorted(gaps):
        if a > pos:
            out.append((pos, a))
        pos = max(pos, b)
    if pos < n:
        out.append((pos, n))
    return out
