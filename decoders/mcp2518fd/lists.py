##
## This file is part of spigap.
##
## This program is free software: you can redistribute it and/or modify
## it under the terms of the GNU General Public License as published by
## the Free Software Foundation, either version 3 of the License, or
## (at your option) any later version.
##

'''
MCP2517FD / MCP2518FD / MCP251863 tables: instructions, the register map,
the register fields, message object sizes. Plain data, no code (as
libsigrokdecode's spiflash/lists.py); mcp251xfd.py interprets them.
Sources: spigap's docs/linux-spi-timing.md §6 (Linux mcp251xfd driver header and the
datasheet register map).
'''

# ------------------------------------------------------------ instructions

RESET, WRITE, READ, WRITE_CRC, READ_CRC, WRITE_SAFE = 0x0, 0x2, 0x3, 0xA, 0xB, 0xC

INSTRUCTIONS = {
    RESET: 'RESET',
    WRITE: 'WRITE',
    READ: 'READ',
    WRITE_CRC: 'WRITE_CRC',
    READ_CRC: 'READ_CRC',
    WRITE_SAFE: 'WRITE_SAFE',
}

# Shorter names for narrow zoom levels.
INSTRUCTION_SHORT = {
    'RESET': ('RST', 'R'),
    'WRITE': ('WR', 'W'),
    'READ': ('RD', 'R'),
    'WRITE_CRC': ('WR_CRC', 'WC'),
    'READ_CRC': ('RD_CRC', 'RC'),
    'WRITE_SAFE': ('WR_SAFE', 'WS'),
}

RAM_START = 0x400
RAM_END = 0xC00     # exclusive: 2 KiB message RAM 0x400-0xBFF

CHIPS = ('mcp2518fd', 'mcp251863', 'mcp2517fd')
CAN_MODES = ('auto', 'classic', 'fd')     # message object sizes when the FIFO setup is unseen

# ------------------------------------------------------------ register map

# SFRs at fixed addresses; the FIFO, filter and mask registers repeat
# (mcp251xfd.register() computes their addresses)
FIXED_REGS = {
    0x000: 'C1CON', 0x004: 'C1NBTCFG', 0x008: 'C1DBTCFG', 0x00C: 'C1TDC',
    0x010: 'C1TBC', 0x014: 'C1TSCON', 0x018: 'C1VEC', 0x01C: 'C1INT',
    0x020: 'C1RXIF', 0x024: 'C1TXIF', 0x028: 'C1RXOVIF', 0x02C: 'C1TXATIF',
    0x030: 'C1TXREQ', 0x034: 'C1TREC', 0x038: 'C1BDIAG0', 0x03C: 'C1BDIAG1',
    0x040: 'C1TEFCON', 0x044: 'C1TEFSTA', 0x048: 'C1TEFUA',
    0x050: 'C1TXQCON', 0x054: 'C1TXQSTA', 0x058: 'C1TXQUA',
    0xE00: 'OSC', 0xE04: 'IOCON', 0xE08: 'CRC', 0xE0C: 'ECCCON',
    0xE10: 'ECCSTAT', 0xE14: 'DEVID',
}

# ------------------------------------------------------------ field tables

MODES = ('Normal FD', 'Sleep', 'Int loopback', 'Listen only', 'Config',
         'Ext loopback', 'Normal CAN 2.0', 'Restricted')
PLSIZE_BYTES = (8, 12, 16, 20, 24, 32, 48, 64)
DLC_LEN = (0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 24, 32, 48, 64)
TXAT = ('one-shot', '3 attempts', 'unlimited', 'unlimited')
TDCMOD = ('off', 'manual', 'auto', 'auto')
CLKODIV = ('/1', '/2', '/4', '/10')

# One entry per field: (name, msb, lsb, style[, values]). Styles:
#   flag  shown (by name) when set     num   always shown as NAME=value
#   nz    NAME=value when not zero     hex   NAME=0x.. always
#   enum  NAME=values[v]               fsize FSIZE=n (n+1 objects)
#   plsize PLSIZE=n (bytes)            fifos bit mask of FIFOs (bit 0 = TXQ)
#   ua    user address (RAM offset)
FIFO_COMMON_CON = [
    ('PLSIZE', 31, 29, 'plsize'), ('FSIZE', 28, 24, 'fsize'),
    ('TXAT', 22, 21, 'enum', TXAT), ('TXPRI', 20, 16, 'nz'),
    ('FRESET', 10, 10, 'flag'), ('TXREQ', 9, 9, 'flag'), ('UINC', 8, 8, 'flag'),
]

# C1FIFOCONm fields that apply to transmit FIFOs only (not shown for TXEN = 0)
TX_ONLY_FIELDS = ('TXAT', 'TXPRI')

FIELDS = {
    'CON': [
        ('TXBWS', 31, 28, 'nz'), ('ABAT', 27, 27, 'flag'),
        ('REQOP', 26, 24, 'enum', MODES), ('OPMOD', 23, 21, 'enum', MODES),
        ('TXQEN', 20, 20, 'flag'), ('STEF', 19, 19, 'flag'),
        ('SERR2LOM', 18, 18, 'flag'), ('ESIGM', 17, 17, 'flag'),
        ('RTXAT', 16, 16, 'flag'), ('BRSDIS', 12, 12, 'flag'),
        ('BUSY', 11, 11, 'flag'), ('WFT', 10, 9, 'nz'), ('WAKFIL', 8, 8, 'flag'),
        ('PXEDIS', 6, 6, 'flag'), ('ISOCRCEN', 5, 5, 'flag'), ('DNCNT', 4, 0, 'nz'),
    ],
    'NBTCFG': [('BRP', 31, 24, 'num'), ('TSEG1', 23, 16, 'num'),
               ('TSEG2', 14, 8, 'num'), ('SJW', 6, 0, 'num')],
    'DBTCFG': [('BRP', 31, 24, 'num'), ('TSEG1', 20, 16, 'num'),
               ('TSEG2', 11, 8, 'num'), ('SJW', 3, 0, 'num')],
    'TDC': [('EDGFLTEN', 25, 25, 'flag'), ('SID11EN', 24, 24, 'flag'),
            ('TDCMOD', 17, 16, 'enum', TDCMOD), ('TDCO', 14, 8, 'num'),
            ('TDCV', 5, 0, 'num')],
    'TBC': [('TBC', 31, 0, 'num')],
    'TSCON': [('TSRES', 18, 18, 'flag'), ('TSEOF', 17, 17, 'flag'),
              ('TBCEN', 16, 16, 'flag'), ('TBCPRE', 9, 0, 'num')],
    'VEC': [('RXCODE', 30, 24, 'num'), ('TXCODE', 22, 16, 'num'),
            ('FILHIT', 12, 8, 'num'), ('ICODE', 6, 0, 'num')],
    'INT': [
        ('TXIF', 0, 0, 'flag'), ('RXIF', 1, 1, 'flag'), ('TBCIF', 2, 2, 'flag'),
        ('MODIF', 3, 3, 'flag'), ('TEFIF', 4, 4, 'flag'), ('ECCIF', 8, 8, 'flag'),
        ('SPICRCIF', 9, 9, 'flag'), ('TXATIF', 10, 10, 'flag'),
        ('RXOVIF', 11, 11, 'flag'), ('SERRIF', 12, 12, 'flag'),
        ('CERRIF', 13, 13, 'flag'), ('WAKIF', 14, 14, 'flag'),
        ('IVMIF', 15, 15, 'flag'),
        ('TXIE', 16, 16, 'flag'), ('RXIE', 17, 17, 'flag'), ('TBCIE', 18, 18, 'flag'),
        ('MODIE', 19, 19, 'flag'), ('TEFIE', 20, 20, 'flag'), ('ECCIE', 24, 24, 'flag'),
        ('SPICRCIE', 25, 25, 'flag'), ('TXATIE', 26, 26, 'flag'),
        ('RXOVIE', 27, 27, 'flag'), ('SERRIE', 28, 28, 'flag'),
        ('CERRIE', 29, 29, 'flag'), ('WAKIE', 30, 30, 'flag'),
        ('IVMIE', 31, 31, 'flag'),
    ],
    'RXIF': [('', 31, 0, 'fifos')], 'TXIF': [('', 31, 0, 'fifos')],
    'RXOVIF': [('', 31, 0, 'fifos')], 'TXATIF': [('', 31, 0, 'fifos')],
    'TXREQ': [('', 31, 0, 'fifos')],
    'TREC': [('TXBO', 21, 21, 'flag'), ('TXBP', 20, 20, 'flag'),
             ('RXBP', 19, 19, 'flag'), ('TXWARN', 18, 18, 'flag'),
             ('RXWARN', 17, 17, 'flag'), ('EWARN', 16, 16, 'flag'),
             ('TEC', 15, 8, 'num'), ('REC', 7, 0, 'num')],
    'BDIAG0': [('DTERRCNT', 31, 24, 'num'), ('DRERRCNT', 23, 16, 'num'),
               ('NTERRCNT', 15, 8, 'num'), ('NRERRCNT', 7, 0, 'num')],
    'BDIAG1': [('DLCMM', 31, 31, 'flag'), ('ESI', 30, 30, 'flag'),
               ('DCRCERR', 29, 29, 'flag'), ('DSTUFERR', 28, 28, 'flag'),
               ('DFORMERR', 27, 27, 'flag'), ('DBIT1ERR', 25, 25, 'flag'),
               ('DBIT0ERR', 24, 24, 'flag'), ('TXBOERR', 23, 23, 'flag'),
               ('NCRCERR', 21, 21, 'flag'), ('NSTUFERR', 20, 20, 'flag'),
               ('NFORMERR', 19, 19, 'flag'), ('NACKERR', 18, 18, 'flag'),
               ('NBIT1ERR', 17, 17, 'flag'), ('NBIT0ERR', 16, 16, 'flag'),
               ('EFMSGCNT', 15, 0, 'num')],
    'TEFCON': [('FSIZE', 28, 24, 'fsize'), ('FRESET', 10, 10, 'flag'),
               ('UINC', 8, 8, 'flag'), ('TEFTSEN', 5, 5, 'flag'),
               ('TEFOVIE', 3, 3, 'flag'), ('TEFFIE', 2, 2, 'flag'),
               ('TEFHIE', 1, 1, 'flag'), ('TEFNEIE', 0, 0, 'flag')],
    'TEFSTA': [('TEFOVIF', 3, 3, 'flag'), ('TEFFIF', 2, 2, 'flag'),
               ('TEFHIF', 1, 1, 'flag'), ('TEFNEIF', 0, 0, 'flag')],
    'TEFUA': [('UA', 31, 0, 'ua')], 'TXQUA': [('UA', 31, 0, 'ua')],
    'FIFOUA': [('UA', 31, 0, 'ua')],
    'TXQCON': FIFO_COMMON_CON + [
        ('TXEN', 7, 7, 'flag'), ('TXATIE', 4, 4, 'flag'),
        ('TXQEIE', 2, 2, 'flag'), ('TXQNIE', 0, 0, 'flag')],
    'TXQSTA': [('TXQCI', 12, 8, 'num'), ('TXABT', 7, 7, 'flag'),
               ('TXLARB', 6, 6, 'flag'), ('TXERR', 5, 5, 'flag'),
               ('TXATIF', 4, 4, 'flag'), ('TXQEIF', 2, 2, 'flag'),
               ('TXQNIF', 0, 0, 'flag')],
    'FIFOCON': FIFO_COMMON_CON + [
        ('TXEN', 7, 7, 'flag'), ('RTREN', 6, 6, 'flag'), ('RXTSEN', 5, 5, 'flag'),
        ('TXATIE', 4, 4, 'flag'), ('RXOVIE', 3, 3, 'flag'),
        ('TFERFFIE', 2, 2, 'flag'), ('TFHRFHIE', 1, 1, 'flag'),
        ('TFNRFNIE', 0, 0, 'flag')],
    'FIFOSTA': [('FIFOCI', 12, 8, 'num'), ('TXABT', 7, 7, 'flag'),
                ('TXLARB', 6, 6, 'flag'), ('TXERR', 5, 5, 'flag'),
                ('TXATIF', 4, 4, 'flag'), ('RXOVIF', 3, 3, 'flag'),
                ('TFERFFIF', 2, 2, 'flag'), ('TFHRFHIF', 1, 1, 'flag'),
                ('TFNRFNIF', 0, 0, 'flag')],
    'FLTOBJ': [('EXIDE', 30, 30, 'flag'), ('SID11', 29, 29, 'flag'),
               ('EID', 28, 11, 'hex'), ('SID', 10, 0, 'hex')],
    'MASK': [('MIDE', 30, 30, 'flag'), ('MSID11', 29, 29, 'flag'),
             ('MEID', 28, 11, 'hex'), ('MSID', 10, 0, 'hex')],
    'OSC': [('SCLKRDY', 12, 12, 'flag'), ('OSCRDY', 10, 10, 'flag'),
            ('PLLRDY', 8, 8, 'flag'), ('CLKODIV', 6, 5, 'enum', CLKODIV),
            ('SCLKDIV', 4, 4, 'flag'), ('LPMEN', 3, 3, 'flag'),
            ('OSCDIS', 2, 2, 'flag'), ('PLLEN', 0, 0, 'flag')],
    'IOCON': [('INTOD', 30, 30, 'flag'), ('SOF', 29, 29, 'flag'),
              ('TXCANOD', 28, 28, 'flag'), ('PM1', 25, 25, 'flag'),
              ('PM0', 24, 24, 'flag'), ('GPIO1', 17, 17, 'flag'),
              ('GPIO0', 16, 16, 'flag'), ('LAT1', 9, 9, 'flag'),
              ('LAT0', 8, 8, 'flag'), ('XSTBYEN', 6, 6, 'flag'),
              ('TRIS1', 1, 1, 'flag'), ('TRIS0', 0, 0, 'flag')],
    'CRC': [('FERRIE', 25, 25, 'flag'), ('CRCERRIE', 24, 24, 'flag'),
            ('FERRIF', 17, 17, 'flag'), ('CRCERRIF', 16, 16, 'flag'),
            ('CRC', 15, 0, 'hex')],
    'ECCCON': [('PARITY', 14, 8, 'nz'), ('DEDIE', 2, 2, 'flag'),
               ('SECIE', 1, 1, 'flag'), ('ECCEN', 0, 0, 'flag')],
    'ECCSTAT': [('ERRADDR', 27, 16, 'hex'), ('DEDIF', 2, 2, 'flag'),
                ('SECIF', 1, 1, 'flag')],
    'DEVID': [('ID', 7, 4, 'num'), ('REV', 3, 0, 'num')],
}


# ------------------------------------------------------- message objects

# Object sizes in bytes the Linux driver uses, tried in this order when a
# read's FIFO is not known from the capture (per can_mode option): RX objects
# with timestamp (classic 8 or FD 64 data bytes), TEF entries with timestamp.
FALLBACK_SIZES = {
    'classic': (('RX', 20), ('TEF', 12)),
    'fd': (('RX', 76), ('TEF', 12)),
    'auto': (('RX', 20), ('RX', 76), ('TEF', 12)),
}
