"""Write a sigrok .sr with analog channels (``analog-1-<A>-<n>`` float32), optionally mixed with logic.

Layout as libsigrok's srzip output writes it (docs/formats.md, "sigrok .sr"):
analog channel k gets index A = total probes + k (1-based), metadata
``analog<A>=<name>``, chunks ``analog-1-<A>-1..N`` of little-endian float32.
"""

from __future__ import annotations

import zipfile
from typing import Sequence

import numpy as np

from spigap.outfile import zip_entry
from spigap.synth.srwriter import Track, _pack, render, samplerate_string
from spigap.synth.writers import analog as render_analog

CHUNK_SAMPLES = 1 << 20


def write_sr_analog(path, tracks: Sequence[Track], samplerate: float, n_samples: int, *,
                    analog: Sequence[str] | None = None, chunk_samples: int = CHUNK_SAMPLES,
                    v_high: float = 3.3, noise: float = 0.02, rise: int = 1, seed: int = 0,
                    samplerate_text: str | None = None, compresslevel: int = 6) -> None:
    """Tracks named in ``analog`` (default: all) become analog channels, the rest logic probes."""
    an = [t.clean() for t in tracks if analog is None or t.name in analog]
    lo_tracks = [t.clean() for t in tracks if not (analog is None or t.name in analog)]
    n_logic = len(lo_tracks)
    lines = ["[global]", "sigrok version=0.5.2", "", "[device 1]"]
    if n_logic:
        lines.append("capturefile=logic-1")
    lines += [f"total probes={n_logic}", f"samplerate={samplerate_text or samplerate_string(samplerate)}",
              f"total analog={len(an)}"]
    lines += [f"probe{p + 1}={t.name}" for p, t in enumerate(lo_tracks)]
    lines += [f"analog{n_logic + k + 1}={t.name}" for k, t in enumerate(an)]
    if n_logic:
        lines.append(f"unitsize={(n_logic + 7) // 8}")
    rng = np.random.default_rng(seed)
    us = (n_logic + 7) // 8
    dtype = {1: np.uint8, 2: np.uint16}.get(us, np.uint32)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=compresslevel) as zf:
        zf.writestr(zip_entry(zf, "version"), "2")
        zf.writestr(zip_entry(zf, "metadata"), "\n".join(lines) + "\n")
        for c, lo in enumerate(range(0, n_samples, chunk_samples)):
            hi = min(n_samples, lo + chunk_samples)
            if n_logic:
                zf.writestr(zip_entry(zf, f"logic-1-{c + 1}"), _pack(render(lo_tracks, list(range(n_logic)), lo, hi, dtype), us))
            for k, t in enumerate(an):
                v = render_analog(t, lo, hi, v_high=v_high, noise=noise, rise=rise, rng=rng)
                zf.writestr(zip_entry(zf, f"analog-1-{n_logic + k + 1}-{c + 1}"), v.astype("<f4").tobytes())
