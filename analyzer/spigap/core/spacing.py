"""Clock-edge spacings, which both framers measure: exact counts of the spacings
between SCLK edges (the clock period's median and central mean, without keeping
every edge) and the idle time that ends a transfer on a bus without CS.

Its own module so that the numpy framer (core/framing.py) and the compiled one
(core/cframer.py) share it without importing each other.
"""

from __future__ import annotations

import numpy as np

from spigap.core.config import SpiConfig
from spigap.core.gaprules import defs as gapdefs
from spigap.core.quantile import median
from spigap.io.base import EdgeBlock

_I64 = np.int64


class SpacingCounter:
    """Exact counts of integer tick spacings (for medians without keeping every edge)."""

    def __init__(self):
        self.values = np.empty(0, _I64)
        self.counts = np.empty(0, _I64)

    def add(self, spacings: np.ndarray):
        if len(spacings) == 0:
            return
        v, c = np.unique(spacings, return_counts=True)
        self.add_counts(v, c)

    def add_counts(self, v: np.ndarray, c: np.ndarray):
        allv = np.concatenate([self.values, v])
        allc = np.concatenate([self.counts, c])
        u, inv = np.unique(allv, return_inverse=True)
        self.values, self.counts = u, np.bincount(inv, weights=allc).astype(_I64)

    @property
    def total(self) -> int:
        return int(self.counts.sum())

    def central_mean(self, lo: float = gapdefs.PERIOD_BAND[0], hi: float = gapdefs.PERIOD_BAND[1]) -> float | None:
        """Mean of the spacings within [lo, hi] x median: sub-sample precision
        (spacings of 13 and 14 samples average to 13.89 for 3.6 MHz at
        50 MSa/s) without letting clock stretching or stalls pull it."""
        med = self.quantile(0.5)
        if med is None:
            return None
        keep = (self.values >= lo * med) & (self.values <= hi * med)
        c = self.counts[keep]
        return float((self.values[keep] * c).sum() / c.sum())

    def quantile(self, q: float) -> float | None:
        if self.total == 0:
            return None
        cum = np.cumsum(self.counts)
        k = min(int(np.searchsorted(cum, q * cum[-1], side="left")), len(self.values) - 1)
        return float(self.values[k])


def idle_timeout_ticks(cfg: SpiConfig, blocks: list[EdgeBlock], initial_state: int, b_clk: int,
                       tick_s: float) -> int:
    """CS-less framing: the idle time (ticks) that ends a transfer.

    ``--idle-timeout`` if given; else two word times (2 x wordsize x T) with T
    taken as twice the median spacing of the first clock edges (``blocks``:
    the first edge blocks after the initial state)."""
    if cfg.idle_timeout_s is not None:
        return max(1, int(round(cfg.idle_timeout_s / tick_s)))
    if not blocks:
        return 2
    ticks = np.concatenate([b.ticks for b in blocks])
    states = np.concatenate([b.states for b in blocks])
    prev = np.concatenate([[initial_state], states[:-1]]).astype(np.uint32)
    clk_t = ticks[((states ^ prev) >> np.uint32(b_clk)) & 1 == 1]
    sp = np.diff(clk_t)
    half = float(median(sp)) if len(sp) else 1.0
    return max(2, int(round(2 * cfg.wordsize * 2 * half)))
