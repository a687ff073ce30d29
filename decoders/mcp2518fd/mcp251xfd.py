##
## This file is part of spigap.
##
## This program is free software: you can redistribute it and/or modify
## it under the terms of the GNU General Public License as published by
## the Free Software Foundation, either version 3 of the License, or
## (at your option) any later version.
##

'''
MCP2517FD / MCP2518FD / MCP251863 SPI protocol: what one CS window does.

Plain Python (no sigrokdecode import): the sigrok decoder (pd.py) and
spigap's analyzer use the same code. Its siblings, imported relatively as in
any libsigrokdecode decoder (the analyzer loads this module inside a bare
package over this directory, spigap.resources.load_decoder_module):
  lists.py    the tables: instructions, register map, fields, object sizes.
  crc.py      crc16(data): CRC-16/CMS as the chip computes it.
  objects.py  decode_object(): one CAN message object from its RAM bytes.
Sources of the facts: spigap's docs/linux-spi-timing.md §6 (Linux mcp251xfd
driver header and datasheet register map).

Main entry points:
  State()                          what the decoder learns across CS windows
                                   (FIFO configuration, TX FIFOs, last status).
  decode_transfer(mosi, miso, st)  one CS window -> Transfer (annotations by
                                   byte index, registers, CAN frames, CRC).
  label_transfer(mosi, miso, opts) one short line for one CS window.
'''

from .crc import crc16
from .lists import (CAN_MODES, CHIPS, FALLBACK_SIZES, FIELDS, FIXED_REGS, INSTRUCTION_SHORT, INSTRUCTIONS,
                    PLSIZE_BYTES, RAM_END, RAM_START, READ, READ_CRC, RESET, TX_ONLY_FIELDS, WRITE,
                    WRITE_SAFE)
from .objects import decode_object


# ------------------------------------------------------------ register map

def in_ram(addr):
    return RAM_START <= addr < RAM_END


def register(addr):
    '''(name, kind, index) of the 32-bit SFR at the word-aligned ``addr``,
    or None for RAM and reserved addresses. ``kind`` selects the field table
    (C1FIFOCON3 -> kind 'FIFOCON', index 3).'''
    addr &= 0xFFC
    name = FIXED_REGS.get(addr)
    if name is not None:
        kind = name[2:] if name.startswith('C1') else name
        return name, kind, None
    if 0x05C <= addr <= 0x1CC:
        m, r = divmod(addr - 0x050, 0xC)
        kind = ('FIFOCON', 'FIFOSTA', 'FIFOUA')[r // 4]
        return 'C1%s%d' % (kind, m), kind, m
    if 0x1D0 <= addr <= 0x1EC:
        m = (addr - 0x1D0) // 4
        return 'C1FLTCON%d' % m, 'FLTCON', m
    if 0x1F0 <= addr <= 0x2EC:
        m, r = divmod(addr - 0x1F0, 8)
        if r == 0:
            return 'C1FLTOBJ%d' % m, 'FLTOBJ', m
        return 'C1MASK%d' % m, 'MASK', m
    return None


def fifocon_addr(m):
    return 0x050 + 0xC * m


def address_name(addr):
    '''Human name of any 12-bit address: register (+byte offset) or RAM.'''
    if in_ram(addr):
        return 'RAM 0x%03X' % addr
    reg = register(addr)
    if reg is None:
        return '0x%03X' % addr
    return reg[0] + ('+%d' % (addr & 3) if addr & 3 else '')


# ------------------------------------------------------------ field decoding

def _bits_mask(msb, lsb):
    return ((1 << (msb - lsb + 1)) - 1) << lsb


def _byte_mask_bits(byte_mask):
    '''Bit mask of the register bits held by the bytes in ``byte_mask``
    (bit i of byte_mask = byte i of the register present).'''
    m = 0
    for i in range(4):
        if byte_mask & (1 << i):
            m |= 0xFF << (8 * i)
    return m


def decode_fields(kind, value, byte_mask=0xF, index=None):
    '''Field texts of a register value. Only fields whose bits all lie in the
    bytes present (``byte_mask``) are shown.'''
    have = _byte_mask_bits(byte_mask)
    out = []
    if kind == 'FLTCON':
        for k in range(4):
            if not byte_mask & (1 << k):
                continue
            b = (value >> (8 * k)) & 0xFF
            n = 4 * index + k if index is not None else k
            if b & 0x80:
                out.append('F%d->FIFO%d' % (n, b & 0x1F))
            else:
                out.append('F%d off' % n)
        return out
    if kind == 'INT':
        # flags by name; the enables (normally a constant set) as one item
        flags, enables = [], []
        for name, msb, lsb, style in FIELDS['INT']:
            if have >> lsb & 1 and value >> lsb & 1:
                (flags if lsb < 16 else enables).append(name)
        if have & 0xFFFF and not flags:
            flags = ['no flags']
        return flags + (['IE:' + '+'.join(enables)] if enables else [])
    # an RX FIFO (TXEN = 0 in the bytes present): its transmit-only fields mean nothing
    rx_fifo = kind == 'FIFOCON' and have & 0x80 and not value & 0x80
    for entry in FIELDS.get(kind, ()):
        name, msb, lsb, style = entry[:4]
        if rx_fifo and name in TX_ONLY_FIELDS:
            continue
        mask = _bits_mask(msb, lsb)
        if mask & have != mask:
            continue
        v = (value & mask) >> lsb
        if style == 'flag':
            if v:
                out.append(name)
        elif style == 'num':
            out.append('%s=%d' % (name, v))
        elif style == 'nz':
            if v:
                out.append('%s=%d' % (name, v))
        elif style == 'hex':
            out.append('%s=0x%X' % (name, v))
        elif style == 'enum':
            out.append('%s=%s' % (name, entry[4][v]))
        elif style == 'fsize':
            out.append('FSIZE=%d (%d obj)' % (v, v + 1))
        elif style == 'plsize':
            out.append('PLSIZE=%d B' % PLSIZE_BYTES[v])
        elif style == 'fifos':
            names = [('TXQ' if i == 0 else 'FIFO%d' % i) for i in range(32) if v >> i & 1]
            out.append(' '.join(names) if names else 'none')
        elif style == 'ua':
            out.append('UA=0x%03X (RAM 0x%03X)' % (v & 0xFFF, (RAM_START + v) & 0xFFF))
    return out


def hex32(v):
    return '0x%04X_%04X' % (v >> 16, v & 0xFFFF)


# ----------------------------------------------------------------- state

class Region:
    __slots__ = ('start', 'end', 'kind', 'fifo', 'obj_size', 'has_ts')

    def __init__(self, start, end, kind, fifo, obj_size, has_ts):
        self.start, self.end, self.kind, self.fifo = start, end, kind, fifo
        self.obj_size, self.has_ts = obj_size, has_ts


class State:
    '''What is learnt across CS windows: configuration registers (from
    writes, and from reads with a good or no CRC), the FIFOs seen used for
    TX (RTS writes), and which status register was read last.'''

    def __init__(self, chip='mcp2518fd', can_mode='auto'):
        self.chip = chip if chip in CHIPS else 'mcp2518fd'
        self.can_mode = can_mode if can_mode in CAN_MODES else 'auto'
        self.reset()

    def reset(self):
        self.bytes = {}          # address -> byte value of tracked registers
        self.tx_fifos = set()
        self.last_status = None  # 'TEF' or a FIFO number (last xxSTA read)
        self._layout = None

    def note_byte(self, addr, value):
        if addr in _TRACKED_BYTES:
            if self.bytes.get(addr) != value:
                self.bytes[addr] = value
                self._layout = None

    def reg(self, base, byte_mask=0xF):
        '''Value of a tracked register if all bytes in byte_mask are known.'''
        v = 0
        for i in range(4):
            if byte_mask & (1 << i):
                b = self.bytes.get(base + i)
                if b is None:
                    return None
                v |= b << (8 * i)
        return v

    def layout(self):
        '''RAM regions derived from the configuration seen so far (the chip
        allocates TEF, TXQ, FIFO1, FIFO2, ... in this order from 0x400),
        up to the first FIFO whose configuration is unknown.'''
        if self._layout is not None:
            return self._layout
        regions = []
        self._layout = regions
        con = self.reg(0x000, 0x4)          # byte 2: TXQEN (20), STEF (19)
        if con is None:
            con = 1 << 19                   # Linux driver: STEF set, TXQ off
        addr = RAM_START
        if con & (1 << 19):
            tef = self.reg(0x040, 0x9)
            if tef is None:
                return regions
            ts = bool(tef & (1 << 5))
            size = 12 if ts else 8
            n = ((tef >> 24) & 0x1F) + 1
            regions.append(Region(addr, addr + n * size, 'TEF', None, size, ts))
            addr += n * size
        if con & (1 << 20):
            q = self.reg(0x050, 0x8)
            if q is None:
                return regions
            size = 8 + PLSIZE_BYTES[q >> 29]
            n = ((q >> 24) & 0x1F) + 1
            regions.append(Region(addr, addr + n * size, 'TX', 0, size, False))
            addr += n * size
        for m in range(1, 32):
            c = self.reg(fifocon_addr(m), 0x9)
            if c is None:
                break
            tx = bool(c & 0x80)
            ts = (not tx) and bool(c & 0x20)
            size = 8 + (4 if ts else 0) + PLSIZE_BYTES[c >> 29]
            n = ((c >> 24) & 0x1F) + 1
            regions.append(Region(addr, addr + n * size, 'TX' if tx else 'RX', m, size, ts))
            addr += n * size
        return regions

    def region_at(self, addr):
        for r in self.layout():
            if r.start <= addr < r.end:
                return r
        return None

    def is_tx_fifo(self, m):
        if m in self.tx_fifos:
            return True
        c = self.reg(fifocon_addr(m), 0x1)
        return bool(c is not None and c & 0x80)


def _tracked_bytes():
    regs = [0x000, 0x040, 0x050] + [fifocon_addr(m) for m in range(1, 32)]
    return frozenset(a + i for a in regs for i in range(4))


_TRACKED_BYTES = _tracked_bytes()


# --------------------------------------------------------- transfer model

class Ann:
    '''An annotation over data bytes first..last (inclusive, indices into
    the CS window) of class ``cls``, with texts longest first.'''

    __slots__ = ('first', 'last', 'cls', 'texts')

    def __init__(self, first, last, cls, texts):
        self.first, self.last, self.cls, self.texts = first, last, cls, texts

    def __repr__(self):
        return 'Ann(%d, %d, %r, %r)' % (self.first, self.last, self.cls, self.texts)


class Transfer:
    '''Everything decoded from one CS window.'''

    def __init__(self):
        self.cmd = None          # 4-bit command, None if fewer than 2 bytes
        self.name = None         # instruction name or 'UNKNOWN'
        self.addr = None
        self.len_byte = None     # LEN byte of READ_CRC/WRITE_CRC
        self.data = []           # data bytes (MISO for reads, MOSI for writes)
        self.regs = []           # (address, name, value, byte_mask, fields)
        self.frames = []         # Frame objects
        self.ram_words = []      # (address, value) of RAM words not in objects
        self.crc_received = None
        self.crc_computed = None
        self.warnings = []
        self.anns = []

    @property
    def crc_ok(self):
        if self.crc_received is None or self.crc_computed is None:
            return None
        return self.crc_received == self.crc_computed

    def ann(self, first, last, cls, texts):
        self.anns.append(Ann(first, last, cls, texts))

    def warn(self, first, last, text):
        self.warnings.append(text)
        self.anns.append(Ann(first, last, 'warning', [text, 'Warning']))

    def summary(self):
        '''One line: instruction, target, values, CRC verdict, warnings.'''
        if self.name is None:
            return '; '.join(self.warnings) or 'empty'
        parts = [self.name]
        if self.name == 'UNKNOWN':
            parts.append('0x%X' % self.cmd)
        elif self.name != 'RESET':
            if self.frames or self.ram_words or in_ram(self.addr):
                parts.append('RAM 0x%03X' % self.addr)
            vals = []
            for addr, name, value, mask, fields in self.regs:
                if mask == 0xF:
                    t = '%s %s' % (name, hex32(value))
                else:
                    t = '%s%s %s' % (name, _byte_range(mask), _partial_hex(value, mask))
                shown = [f for f in fields if not f.startswith('IE:')]
                if shown:
                    t += ' ' + ' '.join(shown)
                vals.append(t)
            if vals:
                parts.append(', '.join(vals))
            if self.frames:
                parts.append('; '.join('%s obj %s' % (f.where(), f.text(max_data=8, where=False))
                                       for f in self.frames))
            elif self.ram_words:
                parts.append('%d word%s' % (len(self.ram_words), '' if len(self.ram_words) == 1 else 's'))
            elif not vals:
                parts.append(address_name(self.addr))
        ok = self.crc_ok
        if ok is True:
            parts.append('crc ok')
        elif ok is False:
            parts.append('CRC BAD (got 0x%04X, expected 0x%04X)' % (self.crc_received, self.crc_computed))
        other = [w for w in self.warnings if not w.startswith('CRC mismatch')]
        if other:
            parts.append('! ' + '; '.join(other))
        return ' '.join(parts)


def _byte_range(mask):
    lo = min(i for i in range(4) if mask >> i & 1)
    hi = max(i for i in range(4) if mask >> i & 1)
    return '[%d:%d]' % (8 * hi + 7, 8 * lo)


def _partial_hex(value, mask):
    lo = min(i for i in range(4) if mask >> i & 1)
    hi = max(i for i in range(4) if mask >> i & 1)
    v = (value >> (8 * lo)) & ((1 << (8 * (hi - lo + 1))) - 1)
    return '0x%0*X' % (2 * (hi - lo + 1), v)


# ------------------------------------------------------------ decoding

def decode_transfer(mosi, miso, state=None):
    '''Decode one CS window. ``mosi``/``miso``: byte lists (``miso`` None
    when not captured). ``state`` (a State) carries what was learnt from
    earlier windows and is updated. Never raises on odd traffic: problems
    become warnings. The first annotation (class 'transaction') spans the
    whole window with the one-line summary.'''
    if state is None:
        state = State()
    t = Transfer()
    _decode(t, mosi, miso, state)
    if t.name is not None:
        short = t.name if t.name in ('RESET', 'UNKNOWN') else '%s %s' % (t.name, address_name(t.addr))
        texts = [t.summary(), short, t.name]
        if t.crc_ok is False or t.warnings:
            texts.insert(1, short + ' !')
        t.anns.insert(0, Ann(0, len(mosi) - 1, 'transaction', texts))
    return t


def _decode(t, mosi, miso, state):
    n = len(mosi)
    if n == 0:
        return t
    last = n - 1
    if n < 2:
        t.warn(0, last, 'Only %d byte in this CS window: no instruction' % n)
        return t
    word = (mosi[0] << 8) | mosi[1]
    cmd = word >> 12
    addr = word & 0xFFF
    t.cmd, t.addr = cmd, addr
    name = INSTRUCTIONS.get(cmd)
    if name is None:
        t.name = 'UNKNOWN'
        t.ann(0, 1, 'instruction', ['Unknown instruction 0x%X (0x%04X)' % (cmd, word),
                                    'Unknown 0x%X' % cmd, '?'])
        t.warn(0, last, 'Unknown instruction 0x%X: not MCP251xFD traffic?' % cmd)
        return t
    t.name = name
    short = INSTRUCTION_SHORT[name]
    if cmd == RESET:
        t.ann(0, 1, 'instruction', ['RESET', short[0], short[1]])
        if addr:
            t.warn(0, 1, 'RESET with address 0x%03X (expected 0x000)' % addr)
        if n > 2:
            t.warn(2, last, '%d extra bytes after RESET' % (n - 2))
        state.reset()
        return t
    target = address_name(addr)
    full = target + (' (offset 0x%03X)' % (addr - RAM_START) if in_ram(addr) else '')
    t.ann(0, 1, 'instruction', ['%s %s' % (name, full), '%s %s' % (short[0], target),
                                name, short[0], short[1]])
    ram = in_ram(addr)
    reading = cmd in (READ, READ_CRC)
    if reading and miso is None:
        t.warn(0, last, 'MISO not captured: read data unknown')
    src = miso if reading else mosi
    crc_at = None
    if cmd in (READ, WRITE):
        start, count = 2, n - 2
    elif cmd == WRITE_SAFE:
        if n < 5:
            t.warn(0, last, 'WRITE_SAFE needs command, data and CRC (%d bytes here)' % n)
        if n < 4:
            start, count = 2, n - 2
            t.warn(last, last, 'CRC missing (CS released early)')
        else:
            start, count = 2, n - 4
            crc_at = n - 2
    else:  # READ_CRC / WRITE_CRC
        if n < 3:
            t.warn(0, last, '%s without LEN byte' % name)
            return t
        t.len_byte = mosi[2]
        count = mosi[2] * 4 if ram else mosi[2]
        unit = '%d word%s (%d bytes)' % (mosi[2], '' if mosi[2] == 1 else 's', count) if ram \
            else '%d byte%s' % (count, '' if count == 1 else 's')
        t.ann(2, 2, 'length', ['LEN %s' % unit, 'LEN %d' % mosi[2], 'L'])
        start = 3
        crc_at = 3 + count
        if n < crc_at + 2:
            have = max(n - 3, 0)
            if have < count:
                t.warn(min(3, last), last, 'Truncated: LEN asks for %d data bytes, window has %d'
                       % (count, have))
                count = have
            crc_at = None
            t.warn(last, last, 'CRC missing (CS released early)')
    if crc_at is not None and n > crc_at + 2:
        t.warn(crc_at + 2, last, '%d extra bytes after the CRC' % (n - crc_at - 2))
    data = list(src[start:start + count]) if src is not None else []
    t.data = data
    # CRC
    if crc_at is not None and n >= crc_at + 2:
        if cmd == READ_CRC:
            if miso is not None:
                t.crc_received = (miso[crc_at] << 8) | miso[crc_at + 1]
                t.crc_computed = crc16(list(mosi[:3]) + data)
        else:
            t.crc_received = (mosi[crc_at] << 8) | mosi[crc_at + 1]
            t.crc_computed = crc16(mosi[:crc_at])
    if data:
        # Does the chip act on these data bytes / can we trust them?
        trusted = t.crc_ok is not False
        applies = trusted and not (cmd == WRITE_SAFE and t.crc_ok is not True)
        if ram:
            _decode_ram(t, state, addr, data, start, reading)
        else:
            _decode_sfr(t, state, addr, data, start, reading, trusted if reading else applies)
    if t.crc_ok is True:
        t.ann(crc_at, crc_at + 1, 'crc', ['CRC 0x%04X ok' % t.crc_received, 'CRC ok', 'C'])
    elif t.crc_ok is False:
        t.ann(crc_at, crc_at + 1, 'crc', ['CRC 0x%04X bad, expected 0x%04X'
                                          % (t.crc_received, t.crc_computed), 'CRC bad', 'C!'])
        t.warn(crc_at, crc_at + 1, 'CRC mismatch: received 0x%04X, computed 0x%04X'
               % (t.crc_received, t.crc_computed))
    return t


def _decode_sfr(t, state, addr, data, start, reading, remember):
    '''Group the data bytes by 32-bit register and annotate each.'''
    i = 0
    n = len(data)
    while i < n:
        a = (addr + i) & 0xFFF
        base = a & ~3
        mask = 0
        value = 0
        j = i
        while j < n and ((addr + j) & 0xFFF) & ~3 == base:
            off = (addr + j) & 3
            mask |= 1 << off
            value |= data[j] << (8 * off)
            j += 1
        first, lastb = start + i, start + j - 1
        reg = register(base)
        if in_ram(base):
            # an SFR access that runs on into RAM: show the RAM words raw
            t.ram_words.append((base, value))
            t.ann(first, lastb, 'ram', ['RAM 0x%03X = %s' % (base, _partial_hex(value, mask)),
                                        '0x%03X' % base])
        elif reg is None:
            t.warn(first, lastb, 'Reserved address 0x%03X' % base)
            t.ann(first, lastb, 'register', ['0x%03X = %s' % (base, _partial_hex(value, mask)),
                                             _partial_hex(value, mask)])
        else:
            name, kind, index = reg
            fields = decode_fields(kind, value, mask, index)
            if mask == 0xF:
                vtxt = hex32(value)
                texts = ['%s = %s' % (name, vtxt), '%s %s' % (name, vtxt), name]
            else:
                vtxt = _partial_hex(value, mask)
                rng = _byte_range(mask)
                texts = ['%s%s = %s' % (name, rng, vtxt), '%s %s' % (name, vtxt), name]
            t.ann(first, lastb, 'register', texts)
            if fields:
                ftxt = ' '.join(fields)
                t.ann(first, lastb, 'field', [ftxt, fields[0]])
            t.regs.append((base, name, value, mask, fields))
            if remember:
                for k in range(4):
                    if mask >> k & 1:
                        state.note_byte(base + k, (value >> (8 * k)) & 0xFF)
                if not reading and kind == 'FIFOCON' and mask & 0x2 and value & (1 << 9):
                    state.tx_fifos.add(index)
                if reading and kind == 'FIFOSTA':
                    state.last_status = index
                if reading and kind == 'TXQSTA':
                    state.last_status = 0
                if reading and kind == 'TEFSTA':
                    state.last_status = 'TEF'
        i = j


def _classify_ram(t, state, addr, data, reading):
    '''Return (kind, obj_size, has_ts, fifo, first_index) for a RAM access
    holding whole message objects, or None.'''
    n = len(data)
    r = state.region_at(addr)
    if r is not None:
        off = addr - r.start
        if off % r.obj_size == 0 and n % r.obj_size == 0 and addr + n <= r.end:
            return r.kind, r.obj_size, r.has_ts, r.fifo, off // r.obj_size
        if not (r.kind == 'TX' and not reading and off % r.obj_size == 0 and 8 <= n < r.obj_size):
            t.warn(0, 1, 'Access of %d bytes at 0x%03X does not cover whole %s objects of %d bytes'
                   % (n, addr, r.kind, r.obj_size))
            return None
        # a TX object written only up to its DLC (the driver rounds up to words)
        return r.kind, n, False, r.fifo, off // r.obj_size
    if not reading:
        # one TX object per write: ID + flags + data rounded up to words
        if 8 <= n <= 72:
            return 'TX', n, False, None, None
        return None
    best = None
    hint = 'TEF' if (state.last_status == 'TEF' or (isinstance(state.last_status, int)
                                                     and state.is_tx_fifo(state.last_status))) \
        else 'RX'
    for kind, size in FALLBACK_SIZES[state.can_mode]:
        if n % size:
            continue
        bad = 0
        for o in range(0, n, size):
            _, problems = decode_object(kind, data[o:o + size], state.chip)
            bad += len(problems)
        score = (bad, 0 if kind == hint else 1)
        if best is None or score < best[0]:
            best = (score, kind, size)
    if best is None:
        return None
    return best[1], best[2], True, None, None


def _decode_ram(t, state, addr, data, start, reading):
    n = len(data)
    if addr & 3:
        t.warn(start, start + n - 1, 'RAM access at 0x%03X is not word-aligned' % addr)
    if n % 4:
        t.warn(start, start + n - 1, 'RAM access of %d bytes: not whole 32-bit words' % n)
    # RAM words on the registers row
    for o in range(0, n - n % 4, 4):
        v = int.from_bytes(bytes(data[o:o + 4]), 'little')
        t.ann(start + o, start + o + 3, 'ram', ['RAM 0x%03X = %s' % ((addr + o) & 0xFFF, hex32(v)),
                                                hex32(v)])
    cls = None if (addr & 3 or n % 4) else _classify_ram(t, state, addr, data, reading)
    if cls is None:
        for o in range(0, n - n % 4, 4):
            t.ram_words.append(((addr + o) & 0xFFF, int.from_bytes(bytes(data[o:o + 4]), 'little')))
        return
    kind, size, has_ts, fifo, index = cls
    for k, o in enumerate(range(0, n, size)):
        obj = data[o:o + size]
        fr, problems = decode_object(kind, obj, state.chip, has_ts)
        fr.fifo = fifo
        fr.index = None if index is None else index + k
        fr.addr = (addr + o) & 0xFFF
        t.frames.append(fr)
        s0 = start + o
        s1 = start + o + len(obj) - 1
        _annotate_object(t, fr, s0, s1, has_ts)
        for p in problems:
            t.warn(s0, s1, '%s object at 0x%03X: %s' % (kind, fr.addr, p))


def _annotate_object(t, fr, s0, s1, has_ts):
    idt = fr.id_text()
    t.ann(s0, s0 + 3, 'field', ['ID %s %s' % (idt, 'ext' if fr.ext else 'std'), idt])
    fl = ['DLC %d (%d bytes)' % (fr.dlc, fr.length)] + fr.flags_text()
    if fr.seq is not None:
        fl.append(fr.seq_text())
    if fr.filhit:
        fl.append('FILHIT %d' % fr.filhit)
    t.ann(s0 + 4, min(s0 + 7, s1), 'field', [' '.join(fl), 'DLC %d' % fr.dlc])
    pos = s0 + 8
    if has_ts and fr.kind != 'TX':
        if pos + 3 <= s1:
            t.ann(pos, pos + 3, 'field', ['Timestamp %d' % fr.ts, 'TS'])
        pos += 4
    if fr.data and pos <= s1:
        d = ' '.join('%02X' % b for b in fr.data)
        t.ann(pos, min(pos + len(fr.data) - 1, s1), 'field', ['Data ' + d, d, 'Data'])
    short = '%s %s [%d]' % (fr.kind, idt, fr.length)
    t.ann(s0, s1, 'frame', [fr.text(), short, fr.kind])


# ------------------------------------------------------------ analyzer hook

def label_transfer(mosi, miso, options):
    '''Short one-line meaning of one CS window, e.g.
    "READ_CRC C1INT 0x0000_0002 RXIF crc ok".

    ``options``: 'chip' ('mcp2518fd', 'mcp251863', 'mcp2517fd') and
    'can_mode' ('auto', 'classic', 'fd'), as the decoder's options. To carry
    what earlier windows taught (FIFO configuration, TX FIFOs) pass the same
    State object in options['state'] on every call (see new_state()).'''
    options = options or {}
    state = options.get('state')
    if state is None:
        state = new_state(options)
    return decode_transfer(list(mosi), None if miso is None else list(miso), state).summary()


def new_state(options=None):
    options = options or {}
    return State(options.get('chip', 'mcp2518fd'), options.get('can_mode', 'auto'))
