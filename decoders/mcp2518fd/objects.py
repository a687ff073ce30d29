##
## This file is part of spigap.
##
## This program is free software: you can redistribute it and/or modify
## it under the terms of the GNU General Public License as published by
## the Free Software Foundation, either version 3 of the License, or
## (at your option) any later version.
##

'''
MCP251xFD message objects: the CAN (FD) frames the chip keeps in its RAM as
RX objects, TX objects and TEF entries (ID word, flags word, timestamp word
when enabled, data), decoded from their bytes.
'''

from .lists import DLC_LEN


class Frame:
    '''One CAN message object found in a RAM access.'''

    __slots__ = ('kind', 'fifo', 'index', 'addr', 'can_id', 'ext', 'sid11', 'dlc',
                 'length', 'rtr', 'fdf', 'brs', 'esi', 'seq', 'seq_kept', 'filhit', 'ts',
                 'data', 'complete')

    def __init__(self, **kw):
        for k in self.__slots__:
            setattr(self, k, kw.get(k))

    def id_text(self):
        return ('0x%08X' % self.can_id) if self.ext else ('0x%03X' % self.can_id)

    def flags_text(self):
        f = []
        if self.ext:
            f.append('ext')
        if self.fdf:
            f.append('FD')
        if self.brs:
            f.append('BRS')
        if self.esi:
            f.append('ESI')
        if self.rtr:
            f.append('RTR')
        return f

    def seq_text(self):
        '''SEQ as on the wire; on an MCP2517FD TX object also the 7 bits the chip keeps.'''
        if self.seq_kept is not None and self.seq_kept != self.seq:
            return 'SEQ %d (2517FD keeps %d)' % (self.seq, self.seq_kept)
        return 'SEQ %d' % self.seq

    def where(self):
        s = self.kind
        if self.fifo is not None and self.kind != 'TEF':
            s += ' TXQ' if self.fifo == 0 else ' FIFO%d' % self.fifo
        if self.index is not None:
            s += '[%d]' % self.index
        return s

    def text(self, max_data=64, where=True):
        parts = [self.where()] if where else []
        parts += ['ID', self.id_text()]
        parts += self.flags_text()
        parts.append('DLC %d' % self.dlc)
        if self.seq is not None and self.kind in ('TX', 'TEF'):
            parts.append(self.seq_text())
        if self.ts is not None:
            parts.append('TS %d' % self.ts)
        if self.data:
            d = ' '.join('%02X' % b for b in self.data[:max_data])
            parts.append(d + (' ..' if len(self.data) > max_data else ''))
        return ' '.join(parts)


def dlc_length(dlc, fdf):
    if not fdf:
        return min(dlc, 8)
    return DLC_LEN[dlc & 0xF]


def decode_id(word):
    '''(SID, EID, SID11) fields of an object's or a filter's ID word; which of
    them make the CAN ID depends on the IDE flag (in the flags word).'''
    sid = word & 0x7FF
    eid = (word >> 11) & 0x3FFFF
    sid11 = (word >> 29) & 1
    return sid, eid, sid11


def decode_object(kind, data, chip='mcp2518fd', has_ts=None):
    '''Decode one message object (``kind`` 'RX', 'TX' or 'TEF') from its
    bytes. ``has_ts``: timestamp word present (RX: RXTSEN, TEF: TEFTSEN;
    default True as the Linux driver enables both). Returns (Frame, problems)
    where problems lists implausible bits (reserved bits set, ...).'''
    if has_ts is None:
        has_ts = kind != 'TX'
    problems = []
    w = [int.from_bytes(bytes(data[i:i + 4]), 'little') for i in range(0, min(len(data), 12) - 3, 4)]
    id_word = w[0] if len(w) > 0 else 0
    flags = w[1] if len(w) > 1 else 0
    sid, eid, sid11 = decode_id(id_word)
    ide = (flags >> 4) & 1
    fdf = (flags >> 7) & 1
    dlc = flags & 0xF
    if id_word >> 30:
        problems.append('ID word bits 31:30 set')
    if not ide and eid:
        problems.append('EID bits set in a standard frame')
    fr = Frame(kind=kind, can_id=(sid << 18 | eid) if ide else sid, ext=bool(ide),
               sid11=sid11, dlc=dlc, length=dlc_length(dlc, fdf), rtr=bool(flags >> 5 & 1),
               fdf=bool(fdf), brs=bool(flags >> 6 & 1), esi=bool(flags >> 8 & 1))
    if kind == 'TX':
        # the Linux driver writes its TX counter into bits 31:9 on every chip
        # (MCP251XFD_OBJ_FLAGS_SEQ_MCP2518FD_MASK): show the wire value; the
        # MCP2517FD keeps bits 15:9 of it for the TEF entry
        fr.seq = (flags >> 9) & 0x7FFFFF
        if chip == 'mcp2517fd':
            fr.seq_kept = fr.seq & 0x7F
    elif kind == 'TEF':
        fr.seq = (flags >> 9) & (0x7F if chip == 'mcp2517fd' else 0x7FFFFF)
        if chip == 'mcp2517fd' and flags >> 16:
            problems.append('flags bits 31:16 set: an MCP2517FD keeps SEQ bits 15:9 only '
                            '(an MCP2518FD? option chip)')
    else:
        fr.filhit = (flags >> 11) & 0x1F
        if flags >> 16 or flags & 0x600:
            problems.append('reserved flag bits set')
    if not fdf and (fr.brs or fr.esi):
        problems.append('BRS/ESI without FDF')
    if fdf and fr.rtr:
        problems.append('RTR in an FD frame')
    head = 12 if (has_ts and kind != 'TX') else 8
    if has_ts and kind != 'TX' and len(w) > 2:
        fr.ts = w[2]
    payload = list(data[head:])
    if kind == 'TEF':
        fr.data = []
    else:
        n = 0 if fr.rtr else fr.length
        if n > len(payload):
            problems.append('DLC %d needs %d data bytes, object holds %d' % (dlc, n, len(payload)))
        fr.data = payload[:n]
    fr.complete = len(data) >= head
    return fr, problems

