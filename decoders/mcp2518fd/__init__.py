##
## This file is part of spigap.
##
## This program is free software: you can redistribute it and/or modify
## it under the terms of the GNU General Public License as published by
## the Free Software Foundation, either version 3 of the License, or
## (at your option) any later version.
##

'''
Microchip MCP2517FD / MCP2518FD / MCP251863 CAN FD controller, SPI side.
Stack it on the spi decoder (8-bit words, mode 0 or 3, CS# mapped).

Every CS window is one instruction: a 16-bit word (4-bit command, 12-bit
address) then data. Commands: RESET, READ, WRITE, READ_CRC, WRITE_CRC and
WRITE_SAFE. READ_CRC/WRITE_CRC carry a LEN byte (bytes for registers,
32-bit words for the message RAM at 0x400-0xBFF); the CRC-16 (poly 0x8005,
init 0xFFFF) over instruction, LEN and data is checked on every CRC
instruction, a mismatch is a warning showing both values.

Rows:
 - Transactions: each CS window in one line, e.g. "READ_CRC C1INT
   0x3F1A_0002 RXIF crc ok" (the same text spigap analyze --device shows).
 - Instructions: instruction and target, LEN byte, CRC verdict.
 - Registers: each 32-bit register (little-endian) by name (full SFR map:
   C1CON ... C1FIFOCONm/STAm/UAm, C1FLTCONm, C1FLTOBJm, C1MASKm, OSC,
   IOCON, CRC, ECCCON, ECCSTAT, DEVID), partial writes as bits [15:8] etc.,
   and RAM words by address.
 - Fields: register fields (C1CON REQOP/OPMOD, C1INT flags, FIFOCON UINC/
   TXREQ/TXEN/PLSIZE/FSIZE, FIFOSTA, C1TREC, OSC, IOCON, ...) and the parts
   of message objects (ID, DLC and flags, timestamp, data).
 - CAN frames: RAM accesses of whole message objects as CAN (FD) frames:
   RX objects, TX objects, TEF entries (ID std/ext, DLC and length, FD/BRS/
   ESI/RTR, SEQ, timestamp, data).
 - Warnings: CRC mismatches, truncated windows, unknown instructions,
   reserved addresses, implausible object bits. Traffic of other devices
   only produces warnings.

Which RAM address holds which kind of object is taken from the FIFO
configuration written (or read) in the capture: C1CON (STEF, TXQEN),
C1TEFCON, C1TXQCON, C1FIFOCONm. Without it, the sizes the Linux driver uses
apply: writes are TX objects (16 or 72 bytes), reads are RX objects (20 or
76 bytes) or TEF entries (12 bytes), chosen by length and plausibility
(option can_mode restricts to classic or FD sizes).

Option chip: which SEQ bits a TEF entry holds: 7 (flags 15:9) on the
MCP2517FD, 23 (31:9) on the MCP2518FD/MCP251863. A TX object shows the SEQ
value on the wire, 23 bits on every chip (the Linux driver writes its
counter with the MCP2518FD's mask on both); on the MCP2517FD also the 7
bits the chip keeps for the TEF entry: "SEQ 200 (2517FD keeps 72)".

The decoding is in mcp251xfd.py, a plain Python module that spigap's
analyzer imports too; the protocol tables are in lists.py, the CRC in
crc.py, message objects in objects.py.
'''

from .pd import Decoder
