##
## This file is part of spigap.
##
## This program is free software: you can redistribute it and/or modify
## it under the terms of the GNU General Public License as published by
## the Free Software Foundation, either version 3 of the License, or
## (at your option) any later version.
##
"""How a duration is written: one text per zoom level of PulseView, the idle
clocks of a word gap.

Plain Python (no sigrokdecode, no numpy), like every module of the gap rules
(gapdefs.py).
"""

import math


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
