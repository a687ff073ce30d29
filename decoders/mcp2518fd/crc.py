##
## This file is part of spigap.
##
## This program is free software: you can redistribute it and/or modify
## it under the terms of the GNU General Public License as published by
## the Free Software Foundation, either version 3 of the License, or
## (at your option) any later version.
##

'''
The CRC-16 of the MCP251xFD's SPI CRC instructions (READ_CRC, WRITE_CRC,
WRITE_SAFE), as the chip computes it.

Written out here: sigrok-cli and PulseView run decoders in the system's
Python, so a decoder uses the standard library only, and that has no CRC-16
with this polynomial (binascii.crc_hqx is CRC-CCITT, polynomial 0x1021).
'''


def _crc_table():
    table = []
    for byte in range(256):
        crc = byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x8005) if crc & 0x8000 else (crc << 1)
        table.append(crc & 0xFFFF)
    return table


_CRC_TABLE = _crc_table()


def crc16(data, crc=0xFFFF):
    '''CRC-16 poly 0x8005, init 0xFFFF, MSB first, no reflection, no final
    XOR (CRC-16/CMS; check value 0xAEE7 for b"123456789").'''
    for b in data:
        crc = ((crc << 8) & 0xFFFF) ^ _CRC_TABLE[((crc >> 8) ^ b) & 0xFF]
    return crc
