##
## This file is part of spigap.
##
## This program is free software: you can redistribute it and/or modify
## it under the terms of the GNU General Public License as published by
## the Free Software Foundation, either version 3 of the License, or
## (at your option) any later version.
##

"""The Microchip MCP3x0x/MCP355x parts of Linux's mcp320x driver: tables and pure decoding.

No sigrokdecode import: the sigrok decoder (pd.py) and the spigap analyzer
(``label_transfer``, loaded by file path) share this one implementation.

Every part the Linux iio driver drivers/iio/adc/mcp320x.c supports, in four
frame layouts (``FRAMES``), counted in SCLK clocks of one CS-active window
(the datasheets' communication figures; docs/decoders-adc.md):

'd210' MCP3004/3008/3204/3208 (DS21295, DS21298):

    clock   s        s+1       s+2..s+4   s+5       s+6    s+7 ...         then
    MOSI    start=1  SGL/DIFF  D2 D1 D0   -         -      -               -
    MISO    hi-Z     hi-Z      hi-Z       hi-Z      null=0 B(n-1)..B0      B1..B(n-1), zeros

'odd' MCP3002/3202 (DS21294, DS21034): start, SGL/DIFF, ODD/SIGN, MSBF, then
    the null bit and B(n-1)..B0. After B0 the datasheets disagree on which
    MSBF level gives the LSB-first repeat (DS21294E says both), so either the
    repeat or zeros is accepted; the driver sends MSBF = 0.

'rx' MCP3001/3201 (DS21293, DS21290), 'rx-signed' MCP3301 (DS21700): no
    command (no DIN pin; Linux reads them with a receive-only transfer).
    Clocks 0 and 1 of the window sample (DOUT hi-Z), clock 2 is the null bit,
    then B(n-1)..B0 (the MCP3301's 13 bits are a sign bit and 12 bits, two's
    complement); the MCP3001/3201 then repeat B1.. LSB first. What the MCP3301
    sends after B0 is not decoded (its datasheet only says LSB-first data
    begins).

'ds' MCP3550-50/-60, MCP3551, MCP3553 (DS21950): 22-bit delta-sigma, no
    command. A CS pulse without clocks starts a conversion; the read is 24
    bits OVL, OVH, B21..B0 (two's complement). In SPI mode 0 the first clock
    samples SDO/RDY (low = data ready) before them: 25 bits, which Linux reads
    as 4 bytes (3 in mode 3). A window of at least 25 clocks is read with the
    RDY bit first, one of 24 without. OVH and OVL both 1 is undefined.

Leading zeros before the start bit are ignored by the devices with a command,
so the start bit may sit at any clock: decoding works on bits, not bytes.
"""

# part -> (number of inputs, result bits, frame layout); the parts and sizes of
# the Linux driver's chip infos (a single-input part is one differential pair).
PARTS = {
    'MCP3001': (1, 10, 'rx'),
    'MCP3002': (2, 10, 'odd'),
    'MCP3004': (4, 10, 'd210'),
    'MCP3008': (8, 10, 'd210'),
    'MCP3201': (1, 12, 'rx'),
    'MCP3202': (2, 12, 'odd'),
    'MCP3204': (4, 12, 'd210'),
    'MCP3208': (8, 12, 'd210'),
    'MCP3301': (1, 13, 'rx-signed'),
    'MCP3550-50': (1, 22, 'ds'),
    'MCP3550-60': (1, 22, 'ds'),
    'MCP3551': (1, 22, 'ds'),
    'MCP3553': (1, 22, 'ds'),
}
# frame layout -> (command bits after the start bit, an LSB-first repeat
# follows B0, the result is two's complement)
FRAMES = {
    'd210': (('SGL/DIFF', 'D2', 'D1', 'D0'), True, False),
    'odd': (('SGL/DIFF', 'ODD/SIGN', 'MSBF'), True, False),
    'rx': ((), True, False),
    'rx-signed': ((), False, True),
    'ds': ((), False, True),
}
DEFAULT_PART = 'MCP3008'
DEFAULT_VREF = 3.3
MINUS = '\u2212'
PAIR = 'IN+/IN' + MINUS            # the one input of the single-input parts
DS_MAX_CLOCKS = 64                 # bits kept of one MCP355x window (a read is 24 or 25)

# Frame positions relative to the start bit.
HEADER_CLOCKS = 7           # start, SGL/DIFF, D2, D1, D0, sampling clock, null bit

# Decoder states.
(SEARCH, SGL, D2, D1, D0, SAMPLE, NULL, RESULT, REPEAT, DONE,
 ODD, MSBF, HIZ0, HIZ1, TAIL, DS) = range(16)

# Event kinds produced by FrameDecoder (one annotation class each in pd.py);
# new kinds go at the end, so that the classes of the older ones keep their numbers.
EVENT_KINDS = ('start', 'mode', 'channel', 'sample', 'null', 'result', 'repeat',
               'conversion', 'warning', 'msbf', 'ready', 'overflow', 'convstart')


def part_info(part):
    """(inputs, bits) of a part name; unknown names raise ValueError."""
    return part_frame(part)[:2]


def part_frame(part):
    """(inputs, bits, frame layout) of a part name; unknown names raise ValueError."""
    key = str(part).upper()
    if key not in PARTS:
        raise ValueError('unknown part %r (known: %s)' % (part, ', '.join(sorted(PARTS))))
    return PARTS[key]


def channel_name(part, sgl, d):
    """Input selected by SGL/DIFF and D2..D0 (ODD/SIGN on the 2-input parts):
    'CH3', or a pseudo-differential pair such as 'CH0+/CH1−' (D0 = 1 swaps the
    polarity). The 4-input parts ignore D2; the single-input parts have one
    pair, 'IN+/IN−'."""
    inputs, _ = part_info(part)
    if inputs == 1:
        return PAIR
    if inputs < 8:
        d &= inputs - 1
    if sgl:
        return 'CH%d' % d
    even = d & ~1
    if d & 1:
        return 'CH%d%s/CH%d+' % (even, MINUS, even + 1)
    return 'CH%d+/CH%d%s' % (even, even + 1, MINUS)


def volts(code, bits, vref, signed=False):
    """V = code × VREF / 2^bits (datasheets; Linux: scale = VREF / 2^resolution);
    a two's-complement code spans ±VREF: V = code × VREF / 2^(bits−1)."""
    return code * vref / float(1 << (bits - 1 if signed else bits))


def signed_value(raw, bits):
    """Two's complement of a ``bits``-wide field."""
    return raw - (1 << bits) if raw >> (bits - 1) & 1 else raw


def ds_value(ovl, ovh, raw22):
    """The MCP355x code the Linux driver reports (mcp320x_adc_conversion's
    arithmetic): OVH keeps B21..B0 as a positive number above full scale, OVL
    (or the sign bit B21) makes them negative; None when both flags are set
    (undefined, the driver returns -EIO)."""
    if ovl and ovh:
        return None
    if ovh:
        return raw22
    if ovl or raw22 >> 21 & 1:
        return raw22 - (1 << 22)
    return raw22


def format_volts(v, digits=3):
    text = '%.*f V' % (digits, v)
    return text[1:] if text.startswith('-') and not text.strip('-0. V') else text


def frame_clocks(bits):
    """Clocks from the start bit to B0 inclusive (17 for 10-bit, 19 for 12-bit parts)."""
    return HEADER_CLOCKS + bits


class FrameDecoder:
    """Bit-level state machine for one CS-active window.

    Feed every clocked bit with ``bit(mosi, miso, ss, es)`` (``None`` for a
    line that is not connected) and call ``end(ss)`` when CS is released.
    Both return a list of events ``(kind, ss, es, value)``; ``kind`` is one
    of EVENT_KINDS. ``value`` is: 'start' None; 'mode' sgl (1/0); 'channel'
    (sgl, d, name); 'msbf' the bit; 'sample' None; 'null' the bit or None;
    'ready' the SDO/RDY bit; 'overflow' (name, bit); 'result' the code, None,
    or for two's-complement parts (code, raw, bits); 'repeat' (value, nbits,
    ok) with ok True, False or 'zeros'; 'conversion' a dict (channel, sgl, d,
    code, volts, bits); 'warning' a list of texts, longest first;
    'convstart' None (``cs_pulse``).

    Without a CS line, call ``end()`` at the end of each burst of clocks.
    """

    def __init__(self, part=DEFAULT_PART, vref=DEFAULT_VREF):
        self.part = str(part).upper()
        self.inputs, self.bits, self.layout = part_frame(self.part)
        self.command, self.has_repeat, self.signed = FRAMES[self.layout]
        self.vref = float(vref)
        self.reset()

    def reset(self):
        self.state = {'rx': HIZ0, 'rx-signed': HIZ0, 'ds': DS}.get(self.layout, SEARCH)
        self.clocks = 0             # clocks seen in this window
        self.mosi_seen = False      # MOSI connected (bits not None)
        self.window_ss = None       # first clock of the window
        self.frame_ss = None        # start bit (first clock without a command)
        self.sgl = None
        self.d = 0
        self.d_ss = None
        self.msbf = None
        self.hiz = []               # MISO in the sampling clocks of the 'rx' parts
        self.null = None
        self.result_ss = None
        self.code = 0               # MSB-first result so far
        self.result_n = 0
        self.have_miso = True
        self.repeat_ss = None
        self.repeat_es = None
        self.repeat = 0             # LSB-first repeat bits, B1 at bit 0
        self.repeat_n = 0
        self.repeat_bad = False
        self.repeat_zeros = True
        self.last_es = None
        self.conversion = None
        self.ds_bits = []           # (miso, ss, es) of an MCP355x window

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
            self.state = ODD if self.layout == 'odd' else D2
        elif st in (D2, D1, D0, ODD):
            if st in (D2, ODD):
                self.d_ss = ss
            self.d = (self.d << 1) | (1 if mosi else 0)
            if st in (D0, ODD):
                value = (self.sgl, self.d, channel_name(self.part, self.sgl, self.d))
                out.append(('channel', self.d_ss, es, value + ('odd',) if st == ODD else value))
            self.state = MSBF if st == ODD else st + 1
        elif st == MSBF:
            self.msbf = 1 if mosi else 0
            out.append(('msbf', ss, es, self.msbf))
            self.state = NULL
        elif st == HIZ0:
            self.frame_ss = ss
            self.hiz.append(miso)
            self.state = HIZ1
        elif st == HIZ1:
            self.hiz.append(miso)
            out.append(('sample', self.frame_ss, es, None))
            self.state = NULL
        elif st == SAMPLE:
            out.append(('sample', ss, es, None))
            self.state = NULL
        elif st == NULL:
            self.null = miso
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
                if miso:
                    self.repeat_zeros = False
                if (1 if miso else 0) != (self.code >> k) & 1:
                    self.repeat_bad = True
            self.repeat_n += 1
            if self.repeat_n == self.bits - 1:
                out.extend(self._repeat_done())
        elif st == DS and len(self.ds_bits) < DS_MAX_CLOCKS:
            if miso is None:
                self.have_miso = False
            self.ds_bits.append((1 if miso else 0, ss, es))
        return out

    def _result(self, es):
        code = self.code if self.have_miso else None
        value = code
        if code is not None and self.signed:
            code = signed_value(self.code, self.bits)
            value = (code, self.code, self.bits)
        self.conversion = {
            'channel': channel_name(self.part, self.sgl, self.d), 'sgl': self.sgl, 'd': self.d,
            'code': code, 'volts': None if code is None else volts(code, self.bits, self.vref, self.signed),
            'bits': self.bits,
        }
        out = [('result', self.result_ss, es, value),
               ('conversion', self.frame_ss, es, dict(self.conversion))]
        out.extend(self._linux_rx_value())
        if not self.have_miso:
            self.state = DONE
        else:
            self.state = REPEAT if self.has_repeat else TAIL
        return out

    def _linux_rx_value(self):
        """MCP3001/3201: Linux takes the code from the window's first 16 bits
        without masking the two sampling clocks and the null bit (rx_buf[0] <<
        5 or << 7), so a DOUT that reads 1 while hi-Z changes the reported value."""
        if self.layout != 'rx' or not self.have_miso or not any(self.hiz):
            return []
        top = (self.hiz[0] or 0) << 2 | (self.hiz[1] or 0) << 1 | (self.null or 0)
        linux = top << self.bits | self.code
        return [('warning', self.frame_ss, self.last_es, [
            'MISO high while DOUT is hi-Z: Linux mcp320x would report %d, not %d (it keeps those bits)'
            % (linux, self.code), 'Linux would report %d' % linux, 'Hi-Z'])]

    def _repeat_done(self):
        out = []
        if self.repeat_n:
            value = self.repeat
            ok = not self.repeat_bad
            if not ok and self.layout == 'odd' and self.repeat_zeros:
                ok = 'zeros'        # MSBF: the datasheets allow zeros after B0 (see FRAMES)
            out.append(('repeat', self.repeat_ss, self.repeat_es, (value, self.repeat_n, ok)))
            if not ok:
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

    # ------------------------------------------------------------ MCP355x
    def cs_pulse(self, ss, es):
        """CS active from ``ss`` to ``es`` without clocks: on the MCP355x the
        start of a conversion (Linux: an 8 µs CS pulse before each read)."""
        if self.layout != 'ds':
            return []
        return [('convstart', ss, es, None)]

    def _ds_end(self, ss):
        bits = self.ds_bits
        n = self.clocks
        if n < 24:
            return [('warning', self.window_ss, ss, [
                'Too few clocks for a result: %d of 24 (25 with the RDY bit in SPI mode 0)' % n,
                'Too few clocks: %d of 24' % n, 'Clocks'])]
        out = []
        if n >= 25:
            rdy, r_ss, r_es = bits[0]
            bits = bits[1:]
            out.append(('ready', r_ss, r_es, rdy if self.have_miso else None))
            if self.have_miso and rdy:
                out.append(('warning', r_ss, r_es, [
                    'SDO/RDY high at the first clock: conversion not finished, data not valid',
                    'Not ready', 'RDY']))
        names = ('OVL', 'OVH')
        for (b, b_ss, b_es), name in zip(bits[:2], names):
            out.append(('overflow', b_ss, b_es, (name, b if self.have_miso else None)))
        r_ss, r_es = bits[2][1], bits[23][2]
        if not self.have_miso:
            out.append(('result', r_ss, r_es, None))
            out.append(('conversion', bits[0][1], r_es, {'channel': PAIR, 'code': None}))
            return out
        ovl, ovh = bits[0][0], bits[1][0]
        raw = 0
        for b, _, _ in bits[2:24]:
            raw = raw << 1 | b
        code = ds_value(ovl, ovh, raw)
        out.append(('result', r_ss, r_es, (signed_value(raw, 22) if code is None else code, raw, 22)))
        if code is None:
            out.append(('warning', bits[0][1], bits[1][2], [
                'OVL and OVH both 1: undefined (Linux mcp320x returns -EIO); 0xFFFFFF is a chip that did not wake',
                'OVL and OVH both 1', 'OV']))
            return out
        rng = 'overrange' if ovh else ('underrange' if ovl else None)
        conv = {'channel': PAIR, 'sgl': None, 'd': None, 'code': code, 'bits': 22,
                'volts': volts(code, 22, self.vref, True)}
        if rng:
            conv['range'] = rng
        out.append(('conversion', bits[0][1], r_es, conv))
        return out

    # ------------------------------------------------------------ window end
    def end(self, ss):
        """CS released at sample ``ss``: warnings for an unfinished frame."""
        out = []
        st = self.state
        if self.clocks == 0:
            self.reset()
            return out
        if st == DS:
            out.extend(self._ds_end(ss))
        elif st == SEARCH:
            why = 'in this CS window' if self.mosi_seen else '(MOSI not connected)'
            out.append(('warning', self.window_ss, ss, ['No start bit ' + why, 'No start bit',
                                                         'No start']))
        elif SGL <= st <= D0 or st in (ODD, MSBF):
            out.append(('warning', self.frame_ss, ss, ['CS released mid-frame: command incomplete',
                                                       'CS released mid-frame', 'CS']))
        elif st in (SAMPLE, NULL, HIZ1):
            after = 'the sampling clocks' if self.layout.startswith('rx') else 'the command'
            out.append(('warning', self.frame_ss, ss, ['Null bit missing: CS released after ' + after,
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
        sgl, d, name = value[:3]
        if len(value) > 3:
            return ['Channel %s (ODD/SIGN = %d)' % (name, d & 1), name]
        return ['Channel %s (D2..D0 = %d%d%d)' % (name, d >> 2 & 1, d >> 1 & 1, d & 1), name]
    if kind == 'msbf':
        return ['MSBF bit: %d' % value, 'MSBF %d' % value, 'M']
    if kind == 'sample':
        return ['Sampling ends', 'Sample', 'S']
    if kind == 'null':
        if value is None:
            return ['Null bit', 'Null', 'N']
        return ['Null bit: %d' % value, 'Null %d' % value, 'N']
    if kind == 'result':
        if value is None:
            return ['Result (MISO not connected)', 'Result', 'R']
        if isinstance(value, tuple):            # two's complement: (code, raw, bits)
            code, raw, bits = value
            return ['Result: %d (0x%0*X)' % (code, (bits + 3) // 4, raw), '%d' % code]
        return ['Result: %d (0x%03X)' % (value, value), '%d' % value]
    if kind == 'repeat':
        value, n, ok = value
        if ok == 'zeros':
            return ['Zeros after B0 (%d clocks, no LSB-first repeat)' % n, 'Zeros', 'Z']
        mark = 'matches' if ok else 'MISMATCH'
        return ['LSB-first repeat B1..B%d %s' % (n, mark), 'LSB repeat %s' % ('OK' if ok else 'bad'),
                'LSB']
    if kind == 'conversion':
        c = value
        if c['code'] is None:
            return ['%s (no MISO)' % c['channel'], c['channel']]
        v = format_volts(c['volts'], 6 if c.get('bits', 0) > 16 else 3)   # 22 bits: µV
        if c.get('range'):
            v = '%s, %s' % (v, c['range'])
        return ['%s = %d (%s)' % (c['channel'], c['code'], v), '%s %s' % (c['channel'], v), v]
    if kind == 'ready':
        if value is None:
            return ['SDO/RDY', 'RDY', 'R']
        return (['SDO/RDY low: data ready', 'Ready', 'R'] if value == 0
                else ['SDO/RDY high: busy', 'Busy', 'B'])
    if kind == 'overflow':
        name, bit = value
        if bit is None:
            return [name]
        return ['%s: %d' % (name, bit), '%s %d' % (name, bit), name[:2]]
    if kind == 'convstart':
        return ['Conversion start (CS pulse without clocks)', 'Conversion start', 'Start', 'S']
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

    ``options``: 'part' (a key of PARTS, default MCP3008), 'vref' (volts,
    default 3.3), 'wordsize' (default 8). Example: 'CH3 = 512 (1.650 V)'.
    The parts without a command need no MOSI.
    """
    options = options or {}
    part = str(options.get('part', DEFAULT_PART)).upper()
    vref = float(options.get('vref', DEFAULT_VREF))
    ws = int(options.get('wordsize', 8))
    layout = part_frame(part)[2]
    command = FRAMES[layout][0]
    if layout == 'ds' and not mosi and not miso:
        return texts('convstart', None)[0]
    if command and not mosi:
        return 'no MOSI: cannot find the start bit'
    if not command and not miso:
        return 'no MISO: nothing to decode'
    mo = _words_to_bits(mosi, ws) if command else None
    mi = _words_to_bits(miso, ws) if miso else None
    events = decode_bits(mo, mi, part, vref)
    parts = [texts(kind, value)[0] for kind, _ss, _es, value in events if kind == 'conversion']
    parts += [value[1] for kind, _ss, _es, value in events if kind == 'warning']
    return '; '.join(parts) if parts else 'no frame'
