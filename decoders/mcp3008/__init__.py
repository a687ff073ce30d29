##
## This file is part of spigap.
##
## This program is free software: you can redistribute it and/or modify
## it under the terms of the GNU General Public License as published by
## the Free Software Foundation, either version 3 of the License, or
## (at your option) any later version.
##

'''
This decoder stacks on top of the 'spi' PD and decodes every part of the
Linux mcp320x driver: the Microchip MCP3001/3002/3004/3008 (10-bit),
MCP3201/3202/3204/3208 (12-bit) and MCP3301 (13-bit) SAR ADCs, and the
MCP3550-50/3550-60/3551/3553 (22-bit delta-sigma) ADCs.

The frame is decoded bit by bit, so the start bit may sit at any clock of the
CS window: the usual idioms all decode, e.g. 0x01, (0x8|ch)<<4, 0x00;
0x60|ch<<2, 0x00, 0x00 (the Linux mcp320x command byte); the MCP3208
0x06|ch>>2, (ch&3)<<6, 0x00; and the Linux mcp320x message of a 1-byte command
transfer and a 2-byte read transfer inside one CS-low window. MCP3002/3202:
start, SGL/DIFF, ODD/SIGN, MSBF. MCP3001/3201/3301 take no command: the
window's first two clocks sample, the third is the null bit. MCP355x: a CS
pulse without clocks starts a conversion; the read is SDO/RDY (SPI mode 0
only), OVL, OVH and a 22-bit two's-complement result.

Annotations: start bit, single-ended/pseudo-differential mode and channel
(pairs as CH0+/CH1-), MSBF bit, sampling clock, null bit, SDO/RDY and
overflow bits, result code, channel = code (volts), the LSB-first repeat of
the result (checked against the MSB-first result) and conversion starts.

Warnings: no start bit, null bit 1 (expected 0) or missing, too few clocks for
a result, LSB-first repeat mismatch, CS released mid-frame, MCP3001/3201
DOUT high while hi-Z (Linux would report another value), MCP355x not ready,
OVL and OVH both set.

Options: part (MCP3001 ... MCP3553) and vref (reference voltage, volts).
Map CLK, MOSI, MISO and CS# in the spi decoder (SPI mode 0 or 3). Without a
CS# line, a pause of more than two words without clocks ends a frame.
'''

from .pd import Decoder
