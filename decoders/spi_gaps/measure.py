##
## This file is part of spigap.
##
## This program is free software: you can redistribute it and/or modify
## it under the terms of the GNU General Public License as published by
## the Free Software Foundation, either version 3 of the License, or
## (at your option) any later version.
##
"""How the gaps are measured (docs/gaps.md): the SCLK period T, the same-sample
rule, idle clocks, and a word gap against the inter-transfer threshold.

Plain Python (no sigrokdecode, no numpy), like every module of the gap rules
(gapdefs.py). Every time is an integer number of samples unless the name says
seconds.
"""

import math

# docs/gaps.md: T is the mean of the sampling-edge spacings within +-25 % of their median
PERIOD_BAND = (0.75, 1.25)
# docs/gaps.md "Same-sample edges": an SCLK edge in the sample of a CS assert is
# inside the window, one in the sample of a CS deassert is outside
CLK_AT_CS_ASSERT_INSIDE = True
CLK_AT_CS_DEASSERT_INSIDE = False


def inter_transfer_threshold(split):
    """The automatic inter-transfer threshold in samples: the boundary between
    the two word-gap populations of ``split`` (a Split), None when the word
    gaps are one population (then every word gap is inter-byte)."""
    if split is None or split.verdict != 'two':
        return None
    return split.threshold


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
