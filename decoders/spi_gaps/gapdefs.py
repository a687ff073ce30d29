##
## This file is part of spigap.
##
## This program is free software: you can redistribute it and/or modify
## it under the terms of the GNU General Public License as published by
## the Free Software Foundation, either version 3 of the License, or
## (at your option) any later version.
##
"""Gap definitions of docs/gaps.md as plain Python: no sigrokdecode, no numpy.

The spi_gaps decoder imports this module relatively (``from .gapdefs import
...``); the analyzer and the tests load it by file path
(``analyzer.sigrok.paths.load_decoder_module('spi_gaps', 'gapdefs')``), so
both sides use one copy of the rules:

* the inter-transfer threshold max(2 x g25, g25 + 2 T) over the word gaps;
* the SCLK period T as the mean of the sampling-edge spacings within
  +-25 % of their median;
* idle clocks (gap - T/2) / T;
* which CS-inactive gap ends a message when the transfers per message are
  known;
* how a duration is written, at several zoom levels.

Every time here is an integer number of samples unless the name says
seconds. This module must stay importable on its own (no relative imports).
"""

import bisect
import math

# docs/gaps.md: "a word gap is inter_transfer when it exceeds max(2 x g25, g25 + 2 T)"
THRESHOLD_QUANTILE = 0.25
# docs/gaps.md: T is the mean of the sampling-edge spacings within +-25 % of their median
PERIOD_BAND = (0.75, 1.25)


def inter_transfer_threshold(g25, period):
    """The automatic inter-transfer threshold in samples (docs/gaps.md).

    ``g25`` is the 25th percentile of all word gaps, ``period`` the SCLK
    period T in samples (None when unknown, then the 2 T term is 0)."""
    return max(2.0 * g25, g25 + 2.0 * (period or 0.0))


def is_inter_transfer(gap, threshold):
    """A word gap strictly longer than the threshold is an inter-transfer gap."""
    return threshold is not None and gap > threshold


def idle_clocks(gap, period):
    """Idle SCLK periods in a word gap: (gap - T/2) / T (0 for back-to-back words)."""
    if not period:
        return None
    return (gap - period / 2.0) / period


def threshold_samples(threshold_s, samplerate):
    """A threshold given in seconds, in samples, computed as the analyzer does
    (seconds divided by the sample period)."""
    return threshold_s / (1.0 / samplerate)


def threshold_option_us(threshold, samplerate):
    """The decoder's 'inter_transfer_gap' option (µs) that classifies every
    word gap (a whole number of samples) as a threshold of ``threshold``
    samples does: half a sample above its floor, so float rounding of the
    µs value cannot move a gap of exactly the threshold across it."""
    return (math.floor(threshold) + 0.5) / samplerate * 1e6


def is_message_boundary(gap_index, transfers_per_message, first_message_start=0):
    """True when CS-inactive gap ``gap_index`` (the gap between transfer
    ``gap_index`` and ``gap_index + 1``, transfers numbered from 0 in the
    capture) lies between two messages: a context switch, not a cs_change.

    ``first_message_start`` is the number of the first transfer that starts a
    message (0: the capture starts with a message)."""
    n = transfers_per_message
    if not n or n < 1:
        raise ValueError('transfers per message must be >= 1')
    return (gap_index + 1 - first_message_start) % n == 0


def first_message_start_from_phase(phase, transfers_per_message):
    """The analyzer's grouping phase (gap i ends a message iff
    (i - phase) % N == 0) as the number of the first transfer that starts a
    message, 0..N-1."""
    return (phase + 1) % transfers_per_message


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


# ------------------------------------------------------------------ text

def fmt_seconds(seconds, digits=4):
    """A duration with the unit that fits: '1.6 µs', '420 ns', '64.28 µs'."""
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return '?'
    a = abs(seconds)
    if a == 0:
        return '0 ns'
    for unit, scale in (('s', 1.0), ('ms', 1e-3), ('µs', 1e-6), ('ns', 1e-9)):
        if a >= scale * 0.9999:
            return '%.*g %s' % (digits, seconds / scale, unit)
    return '%.*g ps' % (digits, seconds / 1e-12)


def texts(long_label, short_label, letter, samples, samplerate, extra=None):
    """Annotation texts from the longest to the shortest (PulseView picks the
    longest that fits the zoom level)::

        'CS setup: 1.6 µs (80 samples)', 'CS setup 1.6 µs', 'Setup 1.6 µs',
        '1.6 µs', 'S'

    ``extra`` (e.g. '1 idle clock') is added to the two longest texts."""
    t = fmt_seconds(samples / float(samplerate))
    n = int(samples)
    first = '%s: %s (%d sample%s)' % (long_label, t, n, '' if n == 1 else 's')
    second = '%s %s' % (long_label, t)
    if extra:
        first = '%s, %s' % (first, extra)
        second = '%s, %s' % (second, extra)
    out = [first, second, '%s %s' % (short_label, t), t, letter]
    # drop neighbours that came out equal (short label == long label)
    return [s for i, s in enumerate(out) if i == 0 or s != out[i - 1]]


def fmt_idle_clocks(clocks):
    """'1.0 idle clocks', '0 idle clocks' (back-to-back), or None when T is unknown."""
    if clocks is None:
        return None
    if abs(clocks) < 0.05:
        return '0 idle clocks'
    return '%.1f idle clock%s' % (clocks, '' if abs(clocks - 1.0) < 0.05 else 's')
