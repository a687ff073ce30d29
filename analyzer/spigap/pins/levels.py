"""The levels a pin measurement needs: the receiver's input levels and a trace's own.

* ``Levels``: VIL and VIH of one receiver's inputs (the device's for MOSI, SCLK
  and CS; the controller's for MISO), with where they come from. Between them a
  receiver may switch anywhere: a line is *valid* low at or below VIL, valid high
  at or above VIH, and undecided in the band between.
* ``state_levels``: the low and high levels of a trace (its *base* and *top*,
  IEEE 181's histogram method: the modes of the lower and upper half of the
  sample histogram), which the 10-90 % rise time, the overshoot and the settling
  band are relative to.
* ``noise_rms``: the trace's noise, from the spread of its sample-to-sample
  differences (edges are a small share of the samples and are left out by a
  robust first scale), never below the quantization of its samples.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

FROM_SWING = "30/70 %"     # how a Levels made from a line's own swing says so
MIN_SWING_NOISE = 8.0      # a trace whose two levels are closer than this many noise rms has no states


@dataclasses.dataclass(frozen=True)
class Levels:
    """A receiver's input levels, volts."""

    vil: float
    vih: float
    source: str = ""
    assumed: bool = False        # our default, not a datasheet's value

    def __post_init__(self):
        if not (math.isfinite(self.vil) and math.isfinite(self.vih)) or self.vih <= self.vil:
            raise ValueError(f"VIH {self.vih!r} must be above VIL {self.vil!r}")

    @property
    def mid(self) -> float:
        return (self.vil + self.vih) / 2

    @property
    def thresholds(self) -> tuple[float, float, float]:
        return (self.vil, self.mid, self.vih)

    def describe(self) -> str:
        return f"VIL {self.vil:.3g} V / VIH {self.vih:.3g} V ({self.source}{', assumed' if self.assumed else ''})"


def from_swing(base: float, top: float, what: str) -> Levels:
    """Our default where no datasheet level is given: 30 % and 70 % of the trace's own swing
    (the CMOS input levels of 0.3/0.7 x VDD when the trace swings rail to rail)."""
    a = top - base
    return Levels(base + 0.3 * a, base + 0.7 * a,
                  f"{FROM_SWING} of {what}'s measured swing {base:.3g}..{top:.3g} V", assumed=True)


def state_levels(v: np.ndarray, noise: float = 0.0) -> tuple[float, float] | None:
    """(base, top) of a two-state trace, or None when the samples show one state only.

    The histogram of the samples between their 0.1 and 99.9 percentiles (256
    bins) is split at its middle; each half's mode, refined to the mean of the
    samples within one bin of it, is a state level (IEEE 181-2011, 5.2.1.3)."""
    v = np.asarray(v, np.float64)
    v = v[np.isfinite(v)]
    if len(v) < 16:
        return None
    lo, hi = np.percentile(v, [0.1, 99.9])
    if not hi - lo > max(MIN_SWING_NOISE * noise, 1e-9):
        return None
    counts, edges = np.histogram(v, bins=256, range=(lo, hi))
    half = 128
    width = edges[1] - edges[0]
    out = []
    for part, off in ((counts[:half], 0), (counts[half:], half)):
        if part.sum() == 0:
            return None
        k = int(np.argmax(part)) + off
        c = (edges[k] + edges[k + 1]) / 2
        near = v[np.abs(v - c) <= width]
        out.append(float(near.mean()) if len(near) else float(c))
    base, top = out
    if not top - base > max(MIN_SWING_NOISE * noise, 1e-9):
        return None
    return base, top


def noise_rms(v: np.ndarray) -> float:
    """The rms noise of a trace from its sample-to-sample differences: a robust scale
    first (1.4826 x MAD, which on a quantized trace can be a whole step or nothing), then
    the standard deviation of the differences within 5 of those scales (edges left out) /
    sqrt(2); at least the rms of the quantization (LSB / sqrt(12), the LSB the smallest step
    between samples)."""
    v = np.asarray(v, np.float64)
    v = v[np.isfinite(v)]
    if len(v) < 3:
        return 0.0
    d = np.diff(v)
    med = float(np.median(d))
    steps = np.abs(d[d != 0])
    lsb = float(steps.min()) if len(steps) else 0.0
    scale = max(1.4826 * float(np.median(np.abs(d - med))), lsb)
    flat = d[np.abs(d - med) <= 5 * scale] if scale > 0 else d
    sigma = float(np.std(flat)) / math.sqrt(2) if len(flat) > 1 else 0.0
    return max(sigma, lsb / math.sqrt(12))
