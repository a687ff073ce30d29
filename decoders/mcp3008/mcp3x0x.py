##
## This file is part of spigap.
##
## This program is free software: you can redistribute it and/or modify
## it under the terms of the GNU General Public License as published by
## the Free Software Foundation, either version 3 of the License, or
## (at your option) any later version.
##

"""MCP3004/3008 (10-bit) and MCP3204/3208 (12-bit) frames: tables and pure decoding.

No sigrokdecode import: the sigrok decoder (pd.py) and the spigap analyzer
(``label_transfer``, loaded by file path) share this one implementation.

A frame, counted in SCLK clocks of one CS-active window (datasheet DS21295,
section 5; docs in docs/linux-spi-timing.md §4.1):

    clock   s        s+1       s+2..s+4   s+5       s+6    s+7 ...         then
    MOSI    start=1  SGL/DIFF  D2 D1 D0   -         -      -               -
    MISO    hi-Z     hi-Z      hi-Z       hi-Z      null=0 B(n-1)..B0      B1..B(n-1), zeros

Leading zeros before the start bit are ignored by the device, so the start
bit may sit at any clock: decoding works on bits, not bytes.
"""

# part -> (number of inputs, result bits)
PARTS = {
    'MCP3004': (4, 10),
    'MCP3008': (8, 10),
    'MCP3204': (4, 12),
    'MCP3208': (8, 12),
}
DEFAULT_PART = 'MCP3008'
DEFAULT_VREF = 3.3
MINUS = '\u2212'

# Frame positions relative to the start bit.
HEADER_CLOCKS = 7           # start, SGL/DIFF, D2, D1, D0, sampling clock, null bit

# Decoder states.
SEARCH, SGL, D2, D1, D0, SAMPLE, NULL, RESULT, REPEAT, DONE = range(10)

# Event kinds produced by FrameDecoder (one annotation class each in pd.py).
EVENT_KINDS = ('start', 'mode', 'channel', 'sample', 'null', 'result', 'repeat',
               'conversion', 'warning')


def part_info(part):
    """(inputs, bits) of a part name; unknown names raise ValueError."""
    key = str(part).upper()
    if key not in PARTS:
        raise ValueError('unknown part %r (known: %s)' % (part, ', '.join(sorted(PARTS))))
    return PARTS[key]


def channel_name(part, sgl, d):
    """Input selected by SGL/DIFF and D2..D0: 'CH3', or a pseudo-differential
    pair such as 'CH0+/CH1−' (D0 = 1 swaps the polarity). The 4-input parts
    ignore D2."""
    inputs, _ = part_info(part)
    if inputs == 4:
        d &= 3
    if sgl:
        return 'CH%d' % d
    even = d & ~1
    if d & 1:
        return 'CH%d%s/CH%d+' % (even, MINUS, even + 1)
    return 'CH%d+/CH%d%s' % (even, even + 1, MINUS)


def volts(code, bits, vref):
    """V = code × VREF / 2^bits (datasheet; Linux: scale = VREF / 2^resolution)."""
    return code * vref / float(1 << bits)


def format_volts(v):
    text = '%.3f V' % v
    return text[1:] if text == '-0.000 V' else text


def frame_clocks(bits):
    """Clocks from the start bit to B0 inclusive (17 for 10-bit, 19 for 12-bit parts)."""
    return HEADER_CLOCKS + bits


class FrameDecoder:
    """Bit-level state machine for one CS-active window.

    Feed every clocked bit with ``bit(mosi, miso, ss, es)`` (``None`` for a
    line that is not connected) and call ``end(ss)`` when CS is released.
    Both return a list of events ``(kind, ss, es, value)``; ``kind`` is one
    of EVENT_KINDS. ``value`` is: 'start' None; 'mode' sgl (1/0); 'channel'
    (sgl, d, name); 'sample' None; 'null' the bit or None; 'result' the code
    or None; 'repeat' (value, nbits, ok); 'conversion' a dict (channel, sgl,
    d, code, volts, bits); 'warning' a list of texts, longest first.

    Without a CS line, call ``end()`` at the end of each burst of clocks.
    """

    def __init__(self, part=DEFAULT_PART, vref=DEFAULT_VREF):
        self.part = str(part).upper()
        self.inputs, self.bits = part_info(self.part)
        self.vref = float(vref)
        self.reset()

    def reset(self):
        self.state = SEARCH
        self.clocks = 0             # clocks seen in this window
        self.mosi_seen = False      # MOSI connected (bits not None)
        self.window_ss = None       # first clock of the window
        self.frame_ss = None        # start bit
        self.sgl = None
        self.d = 0
        self.d_ss = None
        self.result_ss = None
        self.code = 0               # MSB-first result so far
        self.result_n = 0
        self.have_miso = True
        self.repeat_ss = None
        self.repeat_es = None
        self.repeat = 0             # LSB-first repeat bits, B1 at bit 0
        self.repeat_n = 0
        self.repeat_bad = False
        self.last_es = None
        self.conversion = None

    # ------------------------------------------------------------ per bit
    def bit(self, mosi, miso, ss, es):
        out = []
        if self.window_ss is None:
            self.window_ss = ss
        self.clocks += 1
        self.last_es = es
        if mosi is not None:
            self.mosi_seen = True
        st = self.state
        if st == SEARCH:
            if mosi == 1:
                self.frame_ss = ss
                self.state = SGL
                out.append(('start', ss, es, None))
        elif st == SGL:
            self.sgl = 1 if mosi else 0
            out.append(('mode', ss, es, self.sgl))
            self.state = D2
        elif st in (D2, D1, D0):
            if st == D2:
                self.d_ss = ss
            self.d = (self.d << 1) | (1 if mosi else 0)
            if st == D0:
                out.append(('channel', self.d_ss, es,
                            (self.sgl, self.d, channel_name(self.part, self.sgl, self.d))))
            self.state = st + 1
        elif st == SAMPLE:
            out.append(('sample', ss, es, None))
            self.state = NULL
        elif st == NULL:
            out.append(('null', ss, es, miso))
            if miso == 1:
                out.append(('warning', ss, es, ['Null bit is 1, expected 0', 'Null bit 1', 'Null']))
            self.state = RESULT
            self.result_ss = None
        elif st == RESULT:
            if self.result_ss is None:
                self.result_ss = ss
            if miso is None:
                self.have_miso = False
            self.code = (self.code << 1) | (1 if miso else 0)
            self.result_n += 1
            if self.result_n == self.bits:
                out.extend(self._result(es))
        elif st == REPEAT:
            if self.repeat_ss is None:
                self.repeat_ss = ss
            self.repeat_es = es
            k = self.repeat_n + 1                   # B1 comes first
            if miso is not None:
                self.repeat |= (1 if miso else 0) << k
                if (1 if miso else 0) != (self.code >> k) & 1:
                    self.repeat_bad = True
            self.repeat_n += 1
            if self.repeat_n == self.bits - 1:
                out.extend(self._repeat_done())
        return out

    def _result(self, es):
        code = self.code if self.have_miso else None
        self.conversion = {
            'channel': channel_name(self.part, self.sgl, self.d), 'sgl': self.sgl, 'd': self.d,
            'code': code, 'volts': None if code is None else volts(code, self.bits, self.vref),
            'bits': self.bits,
        }
        out = [('result', self.result_ss, es, code),
               ('conversion', self.frame_ss, es, dict(self.conversion))]
        self.state = REPEAT if self.have_miso else DONE
        return out

    def _repeat_done(self):
        out = []
        if self.repeat_n:
            value = self.repeat
            out.append(('repeat', self.repeat_ss, self.repeat_es, (value, self.repeat_n, not self.repeat_bad)))
            if self.repeat_bad:
                # Show B(k) values in MSB-first order, the bits that were repeated.
                got = value >> 1
                want = (self.code >> 1) & ((1 << self.repeat_n) - 1)
                w = (self.repeat_n + 3) // 4
                out.append(('warning', self.repeat_ss, self.repeat_es, [
                    'LSB-first repeat B1..B%d = 0x%0*X, result has 0x%0*X'
                    % (self.repeat_n, w, got, w, want),
                    'LSB repeat mismatch', 'Repeat']))
        self.state = DONE
        return out

    # ------------------------------------------------------------ window end
    def end(self, ss):
        """CS released at sample ``ss``: warnings for an unfinished frame."""
        out = []
        st = self.state
        if self.clocks == 0:
            self.reset()
            return out
        if st == SEARCH:
            why = 'in this CS window' if self.mosi_seen else '(MOSI not connected)'
            out.append(('warning', self.window_ss, ss, ['No start bit ' + why, 'No start bit',
                                                         'No start']))
        elif SGL <= st <= D0:
            out.append(('warning', self.frame_ss, ss, ['CS released mid-frame: command incomplete',
                                                       'CS released mid-frame', 'CS']))
        elif st in (SAMPLE, NULL):
            out.append(('warning', self.frame_ss, ss, ['Null bit missing: CS released after the command',
                                                       'Null bit missing', 'Null']))
        elif st == RESULT and self.result_n == 0:
            out.append(('warning', self.frame_ss, ss, ['CS released mid-frame: after the null bit, no result',
                                                       'CS released mid-frame', 'CS']))
        elif st == RESULT:
            need = self.bits - self.result_n
            out.append(('warning', self.frame_ss, ss, [
                'Too few clocks for a result: %d of %d bits (%d more clocks needed)'
                % (self.result_n, self.bits, need),
                'Too few clocks: %d of %d bits' % (self.result_n, self.bits), 'Clocks']))
        elif st == REPEAT:
            out.extend(self._repeat_done())
        self.reset()
        return out


def decode_bits(mosi_bits, miso_bits, part=DEFAULT_PART, vref=DEFAULT_VREF):
    """Decode one CS window given as bit lists (clock order); positions are clock indexes."""
    dec = FrameDecoder(part, vref)
    n = len(mosi_bits) if mosi_bits is not None else len(miso_bits or [])
    events = []
    for i in range(n):
        mo = mosi_bits[i] if mosi_bits is not None else None
        mi = miso_bits[i] if miso_bits is not None and i < len(miso_bits) else None
        events.extend(dec.bit(mo, mi, i, i + 1))
    events.extend(dec.end(n))
    return events


# ---------------------------------------------------------------- texts
def texts(kind, value):
    """Annotation texts (longest first) for one event."""
    if kind == 'start':
        return ['Start bit', 'Start', 'S']
    if kind == 'mode':
        return (['Single-ended', 'SGL', 'S'] if value else ['Pseudo-differential', 'DIFF', 'D'])
    if kind == 'channel':
        sgl, d, name = value
        return ['Channel %s (D2..D0 = %d%d%d)' % (name, d >> 2 & 1, d >> 1 & 1, d & 1), name]
    if kind == 'sample':
        return ['Sampling ends', 'Sample', 'S']
    if kind == 'null':
        if value is None:
            return ['Null bit', 'Null', 'N']
        return ['Null bit: %d' % value, 'Null %d' % value, 'N']
    if kind == 'result':
        if value is None:
            return ['Result (MISO not connected)', 'Result', 'R']
        return ['Result: %d (0x%03X)' % (value, value), '%d' % value]
    if kind == 'repeat':
        value, n, ok = value
        mark = 'matches' if ok else 'MISMATCH'
        return ['LSB-first repeat B1..B%d %s' % (n, mark), 'LSB repeat %s' % ('OK' if ok else 'bad'),
                'LSB']
    if kind == 'conversion':
        c = value
        if c['code'] is None:
            return ['%s (no MISO)' % c['channel'], c['channel']]
        v = format_volts(c['volts'])
        return ['%s = %d (%s)' % (c['channel'], c['code'], v), '%s %s' % (c['channel'], v), v]
    if kind == 'warning':
        return list(value)
    raise ValueError(kind)


# ------------------------------------------------------- analyzer hook
def _words_to_bits(words, wordsize):
    bits = []
    for w in words:
        w = int(w)
        bits.extend((w >> (wordsize - 1 - i)) & 1 for i in range(wordsize))
    return bits


def label_transfer(mosi, miso, options):
    """One-line meaning of one CS window from its MOSI/MISO words (MSB first).

    ``options``: 'part' (MCP3004/3008/3204/3208, default MCP3008), 'vref'
    (volts, default 3.3), 'wordsize' (default 8). Example: 'CH3 = 512 (1.650 V)'.
    """
    options = options or {}
    part = str(options.get('part', DEFAULT_PART)).upper()
    vref = float(options.get('vref', DEFAULT_VREF))
    ws = int(options.get('wordsize', 8))
    if not mosi:
        return 'no MOSI: cannot find the start bit'
    mo = _words_to_bits(mosi, ws)
    mi = _words_to_bits(miso, ws) if miso else None
    events = decode_bits(mo, mi, part, vref)
    parts = [texts(kind, value)[0] for kind, _ss, _es, value in events if kind == 'conversion']
    parts += [value[1] for kind, _ss, _es, value in events if kind == 'warning']
    return '; '.join(parts) if parts else 'no frame'
