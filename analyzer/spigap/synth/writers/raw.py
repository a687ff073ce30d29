"""Raw sample words (what ``sigrok-cli -O binary`` writes, ``--input-format raw`` reads):
``unitsize`` bytes per sample, little-endian, track j on bit j, no header.
Rendered chunk by chunk, so memory stays bounded for long captures."""

from __future__ import annotations

import os
from typing import Sequence

import numpy as np

from spigap.synth.srwriter import Track, render

CHUNK_SAMPLES = 1 << 22


def write_raw(path, tracks: Sequence[Track], samplerate: float, n_samples: int, *, unitsize: int = 1) -> str:
    """``samplerate`` is not stored (the format has no header): give it to the reader."""
    path = os.fspath(path)
    dtype = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[unitsize]
    bits = list(range(len(tracks)))
    with open(path, "wb") as f:
        for start in range(0, n_samples, CHUNK_SAMPLES):
            stop = min(start + CHUNK_SAMPLES, n_samples)
            f.write(render(tracks, bits, start, stop, dtype).astype(np.dtype(dtype).newbyteorder("<")).tobytes())
    return path
