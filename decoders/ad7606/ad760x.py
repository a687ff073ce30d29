##
## This file is part of spigap.
##
## This program is free software: you can redistribute it and/or modify
## it under the terms of the GNU General Public License as published by
## the Free Software Foundation, either version 3 of the License, or
## (at your option) any later version.
##

"""The AD7606 family's serial interface: tables and pure decoding.

No sigrokdecode import: the sigrok decoder (pd.py) and the spigap analyzer
(``label_transfer``, loaded by file path) share this one implementation.

Parts and word lengths are the Linux driver's (drivers/iio/adc/ad7606.c chip
infos, ad7606_spi.c bus ops; docs/decoders-adc.md): one result per channel,
MSB first, two's complement, V = code x range / 2^(bits-1). AD7607: 14-bit
words, AD7608/AD7609/AD7606C-18: 18-bit words (the driver's bits_per_word 14
and 18), the others 16 bits. With two DOUT lines DOUTA carries the first half
of the channels and DOUTB the second half in parallel; with DOUTA alone all
channels come in ascending order; with DOUTB alone the second half first.
AD7606B/C (software mode) may append an 8-bit status header to each result
(CONFIG bit 6) and have registers: 16-bit frames on DIN, bit 6 = read, bits
5:0 = address, bits 7:0 = data; a read command's register comes back on DOUTA
in the next 16-bit frame (the driver's ad7606_spi_reg_read sends both frames
in one CS window). AD7616: bit 15 = write, bits 14:9 = address, bits 8:0 =
data.
"""

# ---------------------------------------------------------------- parts

# part -> (channels, bits per result, register map: None, 'B', 'C' or '7616')
VARIANTS = {
    'AD7606': (8, 16, None),       # the kernel's ad7606-8
    'AD7606-6': (6, 16, None),
    'AD7606-4': (4, 16, None),
    'AD7605-4': (4, 16, None),
    'AD7606B': (8, 16, 'B'),
    'AD7606C-16': (8, 16, 'C'),
    'AD7606C-18': (8, 18, 'C'),
    'AD7607': (8, 14, None),
    'AD7608': (8, 18, None),
    'AD7609': (8, 18, None),
    'AD7616': (16, 16, '7616'),
}
ALIASES = {'AD7606-8': 'AD7606', 'AD7606C16': 'AD7606C-16', 'AD7606C18': 'AD7606C-18'}
DEFAULT_VARIANT = 'AD7606'
# the full-scale voltage of the (bipolar) input range
RANGES = {'10V': 10.0, '5V': 5.0, '20V': 20.0, '2.5V': 2.5, '12.5V': 12.5, '6.25V': 6.25}
DEFAULT_RANGE = '10V'
# DOUT line use: 'auto' = DOUTA+DOUTB when DOUTB is connected, else DOUTA.
DOUTS = ('auto', 'DOUTA', 'DOUTA+DOUTB', 'DOUTB')
# the 8-bit status header after each result (AD7606B/C): from the CONFIG register
# when it is seen written or read, else off; or forced
STATUS_HEADERS = ('auto', 'off', 'on')
STATUS_BITS = 8
FRAME_BITS = 16                    # every register frame


def variant_info(variant):
    """(name, channels, bits, register map) of a part name (case and spelling tolerant)."""
    key = str(variant).upper().replace(' ', '')
    key = ALIASES.get(key, key)
    if key not in VARIANTS:
        raise ValueError('unknown variant %r (known: %s)' % (variant, ', '.join(VARIANTS)))
    return (key,) + VARIANTS[key]


def channels(variant):
    return variant_info(variant)[1]


def result_bits(variant):
    return variant_info(variant)[2]


def channel_names(variant):
    """Names of channels 1..n: V1..V8, or the AD7616's scan order V0A, V0B, V1A, ..."""
    name, n, _, _ = variant_info(variant)
    if name == 'AD7616':
        return ['V%d%s' % (i // 2, 'AB'[i % 2]) for i in range(n)]
    return ['V%d' % (i + 1) for i in range(n)]


def channel_name(variant, ch):
    names = channel_names(variant)
    return names[ch - 1] if 1 <= ch <= len(names) else 'V%d' % ch


def range_volts(rng):
    """'10V'/'5V'/... (also 10, 5, '±10 V') -> 10.0 / 5.0 / ..."""
    if isinstance(rng, (int, float)):
        v = float(rng)
    else:
        s = str(rng).upper().replace('\u00b1', '').replace('+-', '').replace(' ', '').rstrip('V')
        v = float(s)
    if v not in RANGES.values():
        raise ValueError('range is one of %s, not %r' % (', '.join(RANGES), rng))
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
    name, n, _, _ = variant_info(variant)
    if name == 'AD7616':
        first, second = list(range(1, n + 1, 2)), list(range(2, n + 1, 2))   # the A and B channels
        if dout == 'DOUTA':
            return [list(range(1, n + 1))]      # one line: the sequencer's order V0A, V0B, V1A, ...
    else:
        half = n // 2
        first, second = list(range(1, half + 1)), list(range(half + 1, n + 1))
        if dout == 'DOUTA':
            return [first + second]
    if dout == 'DOUTA+DOUTB':
        return [first, second]
    if dout == 'DOUTB':
        return [second + first]
    raise ValueError('dout must be resolved first (got %r)' % (dout,))


def word_bits(variant, status=False):
    """SCLKs per result: the result bits, plus the status header when it is on."""
    return result_bits(variant) + (STATUS_BITS if status else 0)


def expected_sclks(variant, dout, status=False):
    """SCLK cycles for one full read: word bits x channels / DOUT lines."""
    return word_bits(variant, status) * len(line_orders(variant, dout)[0])


def to_signed(code, bits):
    code &= (1 << bits) - 1
    return code - (1 << bits) if code >> (bits - 1) else code


def signed16(code):
    return to_signed(code, 16)


class Range:
    """An input range: full scale in volts, unipolar or bipolar (± or differential)."""

    __slots__ = ('full', 'unipolar', 'text')

    def __init__(self, full, unipolar=False, text=None):
        self.full = float(full)
        self.unipolar = unipolar
        self.text = text or ('0..%g V' % full if unipolar else '\u00b1%g V' % full)


def option_range(rng):
    return Range(range_volts(rng))


def code_value(raw, bits, rng):
    """The code of a raw result: signed for bipolar ranges, unsigned for unipolar ones."""
    return raw & ((1 << bits) - 1) if rng.unipolar else to_signed(raw, bits)


def volts(code, rng, bits=16):
    """Volts of a code: code x full scale / 2^(bits-1) (bipolar), / 2^bits (unipolar).
    ``rng``: a Range, or an option value ('10V', 5)."""
    if not isinstance(rng, Range):
        rng = option_range(rng)
    return code * rng.full / float(1 << (bits if rng.unipolar else bits - 1))


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


def _names(items):
    items = list(items)
    if len(items) < 2:
        return ''.join(items)
    return ', '.join(items[:-1]) + ' or ' + items[-1]


def other_fits(sclks, lines, variant, status):
    """The parts (and status header settings) whose full read on ``lines`` DOUT
    lines is ``sclks`` SCLKs, other than the one decoded: ['AD7606C-18, AD7608 or
    AD7609 (8 x 18 bits)', ...]."""
    chosen = (variant_info(variant)[0], bool(status))
    groups = {}
    for name, (n, bits, regs) in VARIANTS.items():
        for st in ((False, True) if regs in ('B', 'C') else (False,)):
            if (name, st) == chosen or n % lines:
                continue
            w = bits + (STATUS_BITS if st else 0)
            if w * n // lines == sclks:
                groups.setdefault((n, w, st), []).append(name)
    out = []
    for (n, w, st), names in sorted(groups.items()):
        out.append('%s (%d \u00d7 %d bits%s)' % (_names(names), n, w,
                                                  ', status header on' if st else ''))
    return out


# ------------------------------------------------------------- registers

RANGE_B = {0: Range(2.5), 1: Range(5), 2: Range(10), 3: Range(10)}
RANGE_C = {0: Range(2.5), 1: Range(5), 2: Range(6.25), 3: Range(10), 4: Range(12.5),
           5: Range(5, True), 6: Range(10, True), 7: Range(12.5, True),
           8: Range(5, text='\u00b15 V diff'), 9: Range(10, text='\u00b110 V diff'),
           10: Range(12.5, text='\u00b112.5 V diff'), 11: Range(20, text='\u00b120 V diff'),
           12: Range(20, text='\u00b120 V diff'), 13: Range(20, text='\u00b120 V diff'),
           14: Range(20, text='\u00b120 V diff'), 15: Range(20, text='\u00b120 V diff')}
RANGE_7616 = {1: Range(2.5), 2: Range(5), 3: Range(10)}

# AD7606B/C register map (addresses as no-OS's ad7606.h and the Linux ad7606.h name them)
REGS_BC = {0x01: 'STATUS', 0x02: 'CONFIG', 0x07: 'BANDWIDTH', 0x08: 'OVERSAMPLING',
           0x21: 'DIGITAL_DIAG_ENABLE', 0x22: 'DIGITAL_DIAG_ERR', 0x23: 'OPEN_DETECT_ENABLE',
           0x24: 'OPEN_DETECTED', 0x25: 'AIN_OV_UV_DIAG_ENABLE', 0x26: 'AIN_OV_DIAG_ERROR',
           0x27: 'AIN_UV_DIAG_ERROR', 0x2C: 'OPEN_DETECT_QUEUE', 0x2D: 'FS_CLK_COUNTER',
           0x2E: 'OS_CLK_COUNTER', 0x2F: 'ID'}
for _i in range(4):
    REGS_BC[0x03 + _i] = 'RANGE_CH%d_CH%d' % (2 * _i + 1, 2 * _i + 2)
    REGS_BC[0x28 + _i] = 'DIAGNOSTIC_MUX_CH%d_%d' % (2 * _i + 1, 2 * _i + 2)
for _i in range(8):
    REGS_BC[0x09 + _i] = 'CH%d_GAIN' % (_i + 1)
    REGS_BC[0x11 + _i] = 'CH%d_OFFSET' % (_i + 1)
    REGS_BC[0x19 + _i] = 'CH%d_PHASE' % (_i + 1)
# AD7616 (the Linux ad7606.h's AD7616_* definitions)
REGS_7616 = {0x02: 'CONFIGURATION', 0x03: 'CHANNEL', 0x04: 'INPUT_RANGE_A1', 0x05: 'INPUT_RANGE_A2',
             0x06: 'INPUT_RANGE_B1', 0x07: 'INPUT_RANGE_B2'}
CONFIG_BC = 0x02
OP_MODES = ('normal', 'standby', 'autostandby', 'shutdown')
STATUS_FLAGS = ((7, 'RESET_DETECT'), (6, 'DIGITAL_ERROR'), (5, 'OPEN_DETECTED'), (4, 'AIN_OV'),
                (3, 'AIN_UV'))


def status_text(byte):
    """The status header / STATUS register: flags, and the channel in bits 2:0."""
    flags = [name for bit, name in STATUS_FLAGS if byte >> bit & 1]
    return 'CH %d%s' % ((byte & 7) + 1, (' ' + ' '.join(flags)) if flags else '')


class Registers:
    """Register frames of one part: the command on DIN, the readback on DOUTA in
    the frame after a read command, and what the writes and reads set (CONFIG's
    status header and DOUT lines, the channels' ranges)."""

    def __init__(self, variant):
        self.variant, n, _, self.map = variant_info(variant)
        self.n = n
        self.pending = None          # address of a read whose data comes in the next frame
        self.values = {}             # address -> last value written or read
        self.ranges = {}             # channel (1-based) -> Range set by a range register

    @property
    def status_header(self):
        return bool(self.values.get(CONFIG_BC, 0) >> 6 & 1) if self.map in ('B', 'C') else False

    @property
    def dout_lines(self):
        """DOUT lines set by CONFIG (1 or 2; None when not seen or 4/8 lines)."""
        if self.map not in ('B', 'C') or CONFIG_BC not in self.values:
            return None
        return {0: 1, 1: 2}.get(self.values[CONFIG_BC] >> 3 & 3)

    def name(self, addr):
        table = REGS_7616 if self.map == '7616' else REGS_BC
        return table.get(addr, 'REG 0x%02X' % addr)

    def command(self, frame):
        """(is_read, address, data) of a 16-bit DIN frame."""
        if self.map == '7616':
            return not frame >> 15, frame >> 9 & 0x3F, frame & 0x1FF
        return bool(frame >> 14 & 1), frame >> 8 & 0x3F, frame & 0xFF

    def frame(self, din, dout):
        """One 16-bit frame: a list of ('register'|'warning', texts)."""
        out = []
        if self.pending is not None:
            addr, self.pending = self.pending, None
            mask = 0x1FF if self.map == '7616' else 0xFF
            value = dout & mask
            self.set(addr, value)
            fields = self.fields(addr, value)
            head = 'Read %s = 0x%02X' % (self.name(addr), value)
            out.append(('register', [head + (' (%s)' % fields if fields else ''), head,
                                     'R %s' % self.name(addr)]))
            if not din:
                return out            # the driver's second frame: DIN all zero
        is_read, addr, data = self.command(din)
        if self.map in ('B', 'C') and din >> 15:
            out.append(('warning', ['DIN frame 0x%04X: bit 15 set, not an AD7606B/C command' % din,
                                    'Bad command', 'Cmd?']))
            return out
        if is_read:
            self.pending = addr
            out.append(('register', ['Read command %s (0x%02X): data in the next frame'
                                     % (self.name(addr), addr), 'Read %s' % self.name(addr), 'R']))
            return out
        if addr == 0 and self.map in ('B', 'C'):
            out.append(('register', ['Write to address 0x00: back to conversion data',
                                     'Leave register mode', 'W0']))
            return out
        self.set(addr, data)
        fields = self.fields(addr, data)
        head = 'Write %s = 0x%02X' % (self.name(addr), data)
        out.append(('register', [head + (' (%s)' % fields if fields else ''), head,
                                 'W %s' % self.name(addr)]))
        return out

    def set(self, addr, value):
        self.values[addr] = value
        if self.map in ('B', 'C') and 0x03 <= addr <= 0x06:
            table = RANGE_C if self.map == 'C' else RANGE_B
            ch = 2 * (addr - 0x03) + 1
            for k, shift in ((0, 0), (1, 4)):
                code = value >> shift & 0xF
                if code in table:
                    self.ranges[ch + k] = table[code]
        elif self.map == '7616' and 0x04 <= addr <= 0x07:
            first = (addr - 0x04) % 2 * 4          # V0..V3 or V4..V7
            group = 0 if addr < 0x06 else 1        # A or B
            for k in range(4):
                code = value >> (2 * k) & 3
                if code in RANGE_7616:
                    self.ranges[2 * (first + k) + group + 1] = RANGE_7616[code]

    def fields(self, addr, value):
        if self.map == '7616':
            if addr == 0x02:
                parts = ['OS x%d' % (1 << (value >> 2 & 7))]
                parts += [n for b, n in ((6, 'BURST'), (5, 'SEQEN')) if value >> b & 1]
                return ' '.join(parts)
            if 0x04 <= addr <= 0x07:
                first = (addr - 0x04) % 2 * 4
                group = 'AB'[0 if addr < 0x06 else 1]
                return ' '.join('V%d%s %s' % (first + k, group, RANGE_7616[value >> 2 * k & 3].text
                                              if value >> 2 * k & 3 in RANGE_7616 else 'code 0')
                                for k in range(4))
            return ''
        if addr == 0x01:
            return status_text(value)
        if addr == CONFIG_BC:
            parts = [OP_MODES[value & 3], '%d DOUT line%s' % (1 << (value >> 3 & 3),
                                                             '' if not value >> 3 & 3 else 's')]
            if value >> 5 & 1:
                parts.append('external OS clock')
            parts.append('status header %s' % ('on' if value >> 6 & 1 else 'off'))
            return ', '.join(parts)
        if 0x03 <= addr <= 0x06:
            table = RANGE_C if self.map == 'C' else RANGE_B
            ch = 2 * (addr - 0x03) + 1
            return ' '.join('V%d %s' % (ch + k, table[value >> s & 0xF].text
                                        if value >> s & 0xF in table else 'code %d' % (value >> s & 0xF))
                            for k, s in ((0, 0), (1, 4)))
        if addr == 0x08:
            ratio = value & 0xF
            return 'OS x%d%s' % (1 << ratio if ratio <= 8 else 0,
                                 ', pad %d' % (value >> 4) if value >> 4 else '')
        if addr == 0x2F:
            return 'device ID %d, silicon revision %d' % (value >> 4, value & 0xF)
        return ''


# ---------------------------------------------------------------- reads

class FrameAssembler:
    """Bits of one read (all its DOUT lines) -> channel results, SCLK count check.

    ``bit(bits, ss, es)`` takes one bit per line in use (ordered as
    ``line_orders``) and returns finished words as events
    ``('result', ss, es, (line, channel or None, code, status))`` — channel None
    for a word past the line's channels, status the header byte or None — and,
    at the read's last expected SCLK, ``('frame', ss, es, (values, sclks))``.
    ``close()`` ends the read: the frame event of a read that stopped short, a
    ``('note', ...)`` for a legal partial read (the first channels: the Pi 5
    user's 4-byte xfer2) and ``('warning', ...)`` when the SCLK count fits no
    read of this part (with the parts it does fit).
    """

    def __init__(self, variant=DEFAULT_VARIANT, dout='DOUTA', rng=DEFAULT_RANGE, status=False,
                 ranges=None):
        self.variant, self.n, self.bits, self.regmap = variant_info(variant)
        self.dout = dout
        self.status = bool(status)
        self.word = word_bits(self.variant, self.status)
        self.default_range = rng if isinstance(rng, Range) else option_range(rng)
        self.ranges = ranges if ranges is not None else {}
        self.orders = line_orders(self.variant, dout)
        self.expected = self.word * len(self.orders[0])
        self.names = channel_names(self.variant)
        self.cs_bounded = False     # reads end at CS rise (no BUSY/CONVST to group windows)
        self.reset()

    def range_of(self, ch):
        return self.ranges.get(ch, self.default_range)

    def reset(self):
        self.sclks = 0
        self.ss = None
        self.es = None
        self.word_ss = None
        self.acc = [0] * len(self.orders)
        self.nbit = 0
        self.words = 0
        self.values = {}            # channel -> code
        self.partial = False        # began before the capture: no count check
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
        if self.nbit == self.word:
            for line, order in enumerate(self.orders):
                ch = order[self.words] if self.words < len(order) else None
                word = self.acc[line]
                status = word & 0xFF if self.status else None
                raw = word >> STATUS_BITS if self.status else word
                code = code_value(raw, self.bits, self.range_of(ch) if ch else self.default_range)
                if ch is not None and ch not in self.values:
                    self.values[ch] = code
                out.append(('result', self.word_ss, es, (line, ch, code, status)))
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
            out.append(self.count_verdict(es))
        self.reset()
        return out

    def count_verdict(self, es):
        """A read of ``sclks`` SCLKs that is not this part's full read: a note for the
        first channels (a legal partial read), else a warning; either names the
        parts whose full read has this many SCLKs."""
        n, lines = self.sclks, len(self.orders)
        others = other_fits(n, lines, self.variant, self.status)
        fits = ('; %d SCLKs are a full read of %s' % (n, ' or '.join(others))) if others else ''
        if self.regmap and n % FRAME_BITS == 0 and n <= 2 * FRAME_BITS:
            fits += '; or register frames (map DIN to decode them)'
        if n < self.expected and n % self.word == 0:
            words = n // self.word
            chans = [self.names[ch - 1] for ch in self.orders[0][:words]]
            if lines > 1:
                chans += [self.names[ch - 1] for ch in self.orders[1][:words]]
            alt = (': the first channels, or one read framed by CS per channel (map BUSY or '
                   'CONVST to join such reads)') if self.cs_bounded else ''
            return ('note', self.ss, es, [
                'Partial read: %s (%d of %d SCLKs%s)%s' % (', '.join(chans), n, self.expected, alt, fits),
                'Partial read: %s' % ', '.join(chans), 'Partial'])
        if others:
            head = '%d SCLKs: looks like %s, decoded as %s (%d)' % (n, ' or '.join(others),
                                                                    self.variant, self.expected)
            if fits.endswith('(map DIN to decode them)'):
                head += '; or register frames (map DIN to decode them)'
            return ('warning', self.ss, es, [head + ': set the variant option',
                                             '%d SCLKs: looks like %s' % (n, others[0].split(' (')[0]),
                                             'Variant?'])
        return ('warning', self.ss, es, [
            'Wrong SCLK count: %d, expected %d (%d \u00d7 %d channels / %d DOUT line%s)%s'
            % (n, self.expected, self.word, self.n, lines, 's' if lines > 1 else '',
               fits if fits.endswith('(map DIN to decode them)') else ''),
            'SCLK count %d, expected %d' % (n, self.expected), 'SCLKs'])


# ---------------------------------------------------------------- texts
def result_texts(ch, code, rng, bits=16, status=None, name=None):
    """Texts of one result (``rng`` a Range or an option value)."""
    st = '' if status is None else ' status 0x%02X %s' % (status, status_text(status))
    if ch is None:
        return ['Extra word: %d (0x%X)%s' % (code, code & ((1 << bits) - 1), st), 'Extra %d' % code, 'X']
    name = name or 'V%d' % ch
    v = format_volts(volts(code, rng, bits))
    return ['%s = %d (%s)%s' % (name, code, v, st), '%s %s' % (name, v), name]


def values_line(values, volts_of, with_volts=True, names=None):
    parts = []
    for ch in sorted(values):
        name = names[ch - 1] if names else 'V%d' % ch
        code = values[ch]
        if with_volts:
            parts.append('%s=%d (%s)' % (name, code, format_volts(volts_of(ch, code))))
        else:
            parts.append('%s=%d' % (name, code))
    return ' '.join(parts)


def frame_texts(values, sclks, volts_of, names=None):
    """``volts_of(ch, code)``: the volts of a channel's code."""
    return ['%s [%d SCLK]' % (values_line(values, volts_of, True, names), sclks),
            values_line(values, volts_of, False, names), 'Frame']


def status_mismatch(variant, ch, status):
    """A status header whose channel field is not the channel at its place: the
    read is misaligned. Texts or None."""
    if status is None or ch is None or channels(variant) != 8:
        return None
    if (status & 7) + 1 != ch:
        return ['Status header of V%d says CH %d: the read is misaligned' % (ch, (status & 7) + 1),
                'Status CH mismatch', 'Status']
    return None


# ------------------------------------------------------------ mode trap

def mode_hint(idle_level, sampling_edge):
    """The cpol/cpha option text that samples on the other edge than
    ``sampling_edge`` ('r'/'f'), SCLK idling at ``idle_level``."""
    want_rising = sampling_edge == 'f'
    cpha = 0 if want_rising == (idle_level == 0) else 1
    return 'cpol=%d cpha=%d' % (idle_level, cpha)


def mode_trap(after_sampling, after_launch):
    """The data lines change right after the sampling edge (not after the other
    edge) in one read: every bit is taken one clock late."""
    return after_sampling >= 3 and after_sampling > after_launch


# ------------------------------------------------------- analyzer hook
def _words_to_bits(words, ws):
    bits = []
    for w in words:
        w = int(w)
        bits.extend((w >> (ws - 1 - i)) & 1 for i in range(ws))
    return bits


def _frames16(bits):
    return [int(''.join(map(str, bits[j:j + FRAME_BITS])), 2) for j in range(0, len(bits) - FRAME_BITS + 1,
                                                                         FRAME_BITS)]


def new_state(options=None):
    """What earlier windows teach (register writes: status header, ranges), for
    ``label_transfer``'s options['state']."""
    options = options or {}
    return Registers(options.get('variant', DEFAULT_VARIANT))


def label_transfer(mosi, miso, options):
    """One-line meaning of one CS window from its DOUTA words (MISO) and DIN
    words (MOSI, for register access).

    ``options``: 'variant' (VARIANTS), 'range' ('10V'/'5V'/...), 'dout' (DOUTA,
    DOUTA+DOUTB: the words are DOUTA's; DOUTB: DOUTB-only order), 'wordsize'
    (bits per word, default 8), 'status_header' ('auto'/'off'/'on'), 'state'
    (new_state(): register writes of earlier windows). Example:
    'V1=-1234 (-0.377 V) V2=…'.
    """
    options = options or {}
    variant = variant_info(options.get('variant', DEFAULT_VARIANT))[0]
    rng = option_range(options.get('range', DEFAULT_RANGE))
    dout = options.get('dout', 'DOUTA')
    if dout == 'auto':
        dout = 'DOUTA'
    ws = int(options.get('wordsize', 8))
    regs = options.get('state') or Registers(variant)
    din = _words_to_bits(mosi, ws) if mosi else []
    bits = _words_to_bits(miso, ws) if miso else []
    if regs.map and (regs.pending is not None or any(din[:FRAME_BITS])):
        parts = []
        din_frames = _frames16(din)
        dout_frames = _frames16(bits) + [0] * len(din_frames)
        for k, f in enumerate(din_frames):
            parts += [t[0] for kind, t in regs.frame(f, dout_frames[k])]
        if len(din) % FRAME_BITS:
            parts.append('+%d bits' % (len(din) % FRAME_BITS))
        return '; '.join(parts)
    if not miso:
        return 'no DOUTA data'
    st = options.get('status_header', 'auto')
    status = regs.status_header if st == 'auto' else st == 'on'
    fa = FrameAssembler(variant, dout, rng, status, regs.ranges)
    names = channel_names(variant)
    parts = []
    for b in bits:
        for kind, _ss, _es, value in fa.bit([b], 0, 0):
            if kind == 'result':
                line, ch, code, stat = value
                if line:
                    continue            # the words are DOUTA's: DOUTB's results are not here
                if ch is None:
                    parts.append('extra=%d' % code)
                else:
                    parts.append('%s=%d (%s)' % (names[ch - 1], code,
                                                 format_volts(volts(code, fa.range_of(ch), fa.bits))))
    rest = fa.sclks % fa.word
    if rest:
        parts.append('+%d bits' % rest)
    if fa.sclks != fa.expected:
        parts.append('[%d SCLK, expected %d]' % (fa.sclks, fa.expected))
    return ' '.join(parts)
