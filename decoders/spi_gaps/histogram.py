##
## This file is part of spigap.
##
## This program is free software: you can redistribute it and/or modify
## it under the terms of the GNU General Public License as published by
## the Free Software Foundation, either version 3 of the License, or
## (at your option) any later version.
##
"""Exact counts of integer values (sample counts) and their quantiles, the same
numbers numpy gives the analyzer: the decoder's running figures (the word gaps
so far, the SCLK period T).

Plain Python (no sigrokdecode, no numpy), like every module of the gap rules
(gapdefs.py).
"""

import bisect
import math

from .measure import PERIOD_BAND


def _lerp(a, b, t):
    # numpy's linear interpolation (numpy/lib/function_base.py _lerp): the
    # same float operations, so a threshold equals np.percentile's bit for bit
    diff = b - a
    if t >= 0.5:
        return b - diff * (1.0 - t)
    return a + diff * t


class Histogram:
    """Exact counts of integer values (sample counts), kept sorted.

    Ordinary word gaps and SCLK spacings take few distinct values, so the
    queries below, which walk the values from the smallest, stay cheap."""

    def __init__(self):
        self.values = []      # sorted distinct values
        self.counts = {}
        self.total = 0

    def add(self, value, count=1):
        if value not in self.counts:
            bisect.insort(self.values, value)
            self.counts[value] = 0
        self.counts[value] += count
        self.total += count

    def _nth(self, k):
        """The k-th smallest value (0-based) and the one after it."""
        seen = 0
        for i, v in enumerate(self.values):
            seen += self.counts[v]
            if seen > k:
                if seen > k + 1 or i + 1 == len(self.values):
                    return v, v
                return v, self.values[i + 1]
        raise IndexError(k)

    def percentile(self, q):
        """Like numpy.percentile(values, 100 * q) (method 'linear')."""
        if self.total == 0:
            return None
        h = (self.total - 1) * q
        lo = int(math.floor(h))
        a, b = self._nth(lo)
        return float(_lerp(a, b, h - lo))

    def lower_quantile(self, q):
        """The first value whose cumulative count reaches q x total (the
        analyzer's SpacingCounter.quantile)."""
        if self.total == 0:
            return None
        target = q * self.total
        seen = 0
        for v in self.values:
            seen += self.counts[v]
            if seen >= target:
                return float(v)
        return float(self.values[-1])

    def band_mean(self, lo=PERIOD_BAND[0], hi=PERIOD_BAND[1]):
        """Mean of the values within [lo, hi] x median (the SCLK period T)."""
        med = self.lower_quantile(0.5)
        if med is None:
            return None
        s = n = 0
        for v in self.values:
            if lo * med <= v <= hi * med:
                c = self.counts[v]
                s += v * c
                n += c
        return s / n if n else None
