##
## This file is part of spigap.
##
## This program is free software: you can redistribute it and/or modify
## it under the terms of the GNU General Public License as published by
## the Free Software Foundation, either version 3 of the License, or
## (at your option) any later version.
##

"""AD7606 / AD7606-6 / AD7606-4 serial read-out: tables and pure decoding.

No sigrokdecode import: the sigrok decoder (pd.py) and the spigap analyzer
(``label_transfer``, loaded by file path) share this one implementation.

Serial interface (datasheet Rev. C p. 28; docs/linux-spi-timing.md §5.3): each result
is a 16-bit two's-complement code, MSB first, V = code × range / 32768 with
range 10 or 5 (V). With two DOUT lines DOUTA carries the first half of the
channels and DOUTB the second half in parallel (16 × channels / 2 SCLKs);
with DOUTA only all channels come in ascending order (16 × channels SCLKs);
with DOUTB only the second half comes first (AD7606: V5..V8, V1..V4).
"""

VARIANTS = {'AD7606': 8, 'AD7606-6': 6, 'AD7606-4': 4}
DEFAULT_VARIANT = 'AD7606'
RANGES = {'10V': 10.0, '5V': 5.0}
DEFAULT_RANGE = '10V'
# DOUT line use: 'auto' = DOUTA+DOUTB when DOUTB is connected, else DOUTA.
DOUTS = ('auto', 'DOUTA', 'DOUTA+DOUTB', 'DOUTB')
WORD_BITS = 16


def channels(variant):
    key = str(variant).upper()
    if key not in VARIANTS:
        raise ValueError('unknown variant %r (known: %s)' % (variant, ', '.join(VARIANTS)))
    return VARIANTS[key]


def range_volts(rng):
    """'10V'/'5V' (also 10, 5, '±10 V') -> 10.0 / 5.0."""
    if isinstance(rng, (int, float)):
        v = float(rng)
    else:
        s = str(rng).upper().replace('\u00b1', '').replace('+-', '').replace(' ', '').rstrip('V')
        v = float(s)
    if v not in (5.0, 10.0):
        raise ValueError('range is 10V or 5V, not %r' % (rng,))
    return v


def resolve_dout(dout, have_doutb):
    """Concrete DOUT use for option 'dout' ('auto' picks by the DOUTB channel)."""
    if dout == 'auto':
        return 'DOUTA+DOUTB' if have_doutb else 'DOUTA'
    if dout not in DOUTS:
        raise ValueError('dout is one of %s, not %r' % (', '.join(DOUTS), dout))
    return dout


def line_orders(variant, dout):
    """Channel numbers (1-based) in read order, one list per DOUT line in use."""
    n = channels(variant)
    half = n // 2
    first, second = list(range(1, half + 1)), list(range(half + 1, n + 1))
    if dout == 'DOUTA':
        return [first + second]
    if dout == 'DOUTA+DOUTB':
        return [first, second]
    if dout == 'DOUTB':
        return [second + first]
    raise ValueError('dout must be resolved first (got %r)' % (dout,))


def expected_sclks(variant, dout):
    """SCLK cycles for one full read: 16 × channels / DOUT lines."""
    return WORD_BITS * channels(variant) // len(line_orders(variant, dout))


def signed16(code):
    code &= 0xFFFF
    return code - 0x10000 if code & 0x8000 else code


def volts(code, rng):
    return code * range_volts(rng) / 32768.0


def format_volts(v):
    text = '%.3f V' % v
    return text[1:] if text == '-0.000 V' else text


def format_time(seconds):
    """A time for an annotation: '40 ns', '3.450 µs', '1.250 ms', '2.000 s'."""
    a = abs(seconds)
    if a < 1e-6:
        return '%.0f ns' % (seconds * 1e9)
    if a < 1e-3:
        return '%.3f \u00b5s' % (seconds * 1e6)
    if a < 1:
        return '%.3f ms' % (seconds * 1e3)
    return '%.3f s' % seconds


def format_duration(samples, samplerate):
    """Samples -> text; without a samplerate the count of samples."""
    if samplerate:
        return format_time(samples / float(samplerate))
    return '%d samples' % samples


def format_rate(period_samples, samplerate):
    if not samplerate or period_samples <= 0:
        return None
    hz = samplerate / float(period_samples)
    if hz >= 1e6:
        return '%.3f MHz' % (hz / 1e6)
    if hz >= 1e3:
        return '%.3f kHz' % (hz / 1e3)
    return '%.3f Hz' % hz


class FrameAssembler:
    """Bits of one read (all its DOUT lines) -> channel results, SCLK count check.

    ``bit(bits, ss, es)`` takes one bit per line in use (ordered as
    ``line_orders``) and returns finished words as events
    ``('result', ss, es, (line, channel or None, code))`` — channel None for a
    word past the line's channels — and, at the read's last expected SCLK,
    ``('frame', ss, es, (values, sclks))``. ``close()`` ends the read: the
    frame event of a read that stopped short, and a ``('warning', …)`` when
    the SCLK count is not 16 × channels / lines (too few or too many).
    """

    def __init__(self, variant=DEFAULT_VARIANT, dout='DOUTA', rng=DEFAULT_RANGE):
        self.variant = str(variant).upper()
        self.dout = dout
        self.range = range_volts(rng)
        self.orders = line_orders(self.variant, dout)
        self.expected = expected_sclks(self.variant, dout)
        self.reset()

    def reset(self):
        self.sclks = 0
        self.ss = None
        self.es = None
        self.word_ss = None
        self.acc = [0] * len(self.orders)
        self.nbit = 0
        self.words = 0
        self.values = {}            # channel -> code
        self.partial = False
        self.announced = False      # frame event already given

    @property
    def open(self):
        return self.sclks > 0

    def bit(self, bits, ss, es):
        out = []
        if self.ss is None:
            self.ss = ss
        if self.nbit == 0:
            self.word_ss = ss
        self.sclks += 1
        self.es = es
        for i, b in enumerate(bits):
            self.acc[i] = (self.acc[i] << 1) | (1 if b else 0)
        self.nbit += 1
        if self.nbit == WORD_BITS:
            for line, order in enumerate(self.orders):
                ch = order[self.words] if self.words < len(order) else None
                code = signed16(self.acc[line])
                if ch is not None and ch not in self.values:
                    self.values[ch] = code
                out.append(('result', self.word_ss, es, (line, ch, code)))
            self.acc = [0] * len(self.orders)
            self.nbit = 0
            self.words += 1
        if self.sclks == self.expected and self.values:
            # All SCLKs of a read: report now (a capture may end before CS rises).
            out.append(('frame', self.ss, es, (dict(self.values), self.sclks)))
            self.announced = True
        return out

    def complete(self):
        return self.sclks >= self.expected

    def close(self, es=None):
        """End of the read; ``es`` defaults to the last bit's end."""
        out = []
        if not self.sclks:
            self.reset()
            return out
        es = self.es if es is None else es
        if self.values and not self.announced:
            out.append(('frame', self.ss, es, (dict(self.values), self.sclks)))
        if self.sclks != self.expected and not self.partial:
            out.append(('warning', self.ss, es, [
                'Wrong SCLK count: %d, expected %d (16 \u00d7 %d channels / %d DOUT line%s)'
                % (self.sclks, self.expected, channels(self.variant), len(self.orders),
                   's' if len(self.orders) > 1 else ''),
                'SCLK count %d, expected %d' % (self.sclks, self.expected), 'SCLKs']))
        self.reset()
        return out


# ---------------------------------------------------------------- texts
def result_texts(ch, code, rng):
    if ch is None:
        return ['Extra word: %d (0x%04X)' % (code, code & 0xFFFF), 'Extra %d' % code, 'X']
    v = format_volts(volts(code, rng))
    return ['V%d = %d (%s)' % (ch, code, v), 'V%d %s' % (ch, v), 'V%d' % ch]


def values_line(values, rng, with_volts=True):
    parts = []
    for ch in sorted(values):
        code = values[ch]
        if with_volts:
            parts.append('V%d=%d (%s)' % (ch, code, format_volts(volts(code, rng))))
        else:
            parts.append('V%d=%d' % (ch, code))
    return ' '.join(parts)


def frame_texts(values, sclks, rng):
    return ['%s [%d SCLK]' % (values_line(values, rng), sclks), values_line(values, rng, False),
            'Frame']


# ------------------------------------------------------- analyzer hook
def label_transfer(mosi, miso, options):
    """One-line meaning of one CS window from its DOUTA bytes (the MISO words).

    ``options``: 'variant' (AD7606, AD7606-6, AD7606-4), 'range' ('10V'/'5V'),
    'dout' (DOUTA, DOUTA+DOUTB: the bytes are DOUTA's; DOUTB: DOUTB-only
    order), 'wordsize' (8 or 16). Example: 'V1=-1234 (-0.377 V) V2=…'.
    """
    options = options or {}
    variant = str(options.get('variant', DEFAULT_VARIANT)).upper()
    rng = options.get('range', DEFAULT_RANGE)
    dout = options.get('dout', 'DOUTA')
    if dout == 'auto':
        dout = 'DOUTA'
    ws = int(options.get('wordsize', 8))
    if not miso:
        return 'no DOUTA data'
    bits = []
    for w in miso:
        w = int(w)
        bits.extend((w >> (ws - 1 - i)) & 1 for i in range(ws))
    order = line_orders(variant, dout)[0]
    words = [int(''.join(map(str, bits[j:j + 16])), 2) for j in range(0, len(bits) - 15, 16)]
    parts = []
    for k, w in enumerate(words):
        code = signed16(w)
        if k < len(order):
            parts.append('V%d=%d (%s)' % (order[k], code, format_volts(volts(code, rng))))
        else:
            parts.append('extra=%d' % code)
    rest = len(bits) % 16
    if rest:
        parts.append('+%d bits' % rest)
    expected = expected_sclks(variant, dout)
    if len(bits) != expected:
        parts.append('[%d SCLK, expected %d]' % (len(bits), expected))
    return ' '.join(parts)
