"""The one definition of spigap's gap rules, shared with the spi_gaps decoder.

The rules live in ``decoders/spi_gaps/`` (plain Python, so that sigrok's
embedded interpreter, which may lack numpy, runs the very same code; one module
per concern, all handed out by ``gapdefs.py``); this module loads them once and
gives the analyzer numpy conveniences on top of them.
"""

from __future__ import annotations

import numpy as np

from spigap.core.tickhist import counts, unique_inverse
from spigap.resources import load_decoder_module

defs = load_decoder_module("spi_gaps", "gapdefs")


def split(values: np.ndarray, scale: str = "log", resolution: float = 1.0, wide_share: float | None = None):
    """``defs.split_two`` over an array of tick values (histogrammed with numpy first);
    ``resolution``: ticks per sample; ``wide_share``: see split_two."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    u, c = counts(np.rint(v).astype(np.int64))
    return defs.split_two(zip(u.tolist(), c.tolist()), scale, resolution, wide_share)


def classify(sp, values: np.ndarray, margin: float = 0.9) -> np.ndarray:
    """``sp.classify`` for every value (one call per distinct value): int8 0 / 1 / -1."""
    v = np.rint(np.asarray(values, dtype=float)).astype(np.int64)
    u, inv = unique_inverse(v)
    lab = np.array([sp.classify(int(x), margin) for x in u.tolist()], dtype=np.int8)
    return lab[inv]
