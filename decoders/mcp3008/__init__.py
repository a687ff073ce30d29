##
## This file is part of spigap.
##
## This program is free software: you can redistribute it and/or modify
## it under the terms of the GNU General Public License as published by
## the Free Software Foundation, either version 3 of the License, or
## (at your option) any later version.
##

'''
This decoder stacks on top of the 'spi' PD and decodes the Microchip
MCP3004/MCP3008 (10-bit) and MCP3204/MCP3208 (12-bit) SAR ADCs.

The frame is decoded bit by bit, so the start bit may sit at any clock of the
CS window: the usual idioms all decode, e.g. 0x01, (0x8|ch)<<4, 0x00;
0x60|ch<<2, 0x00, 0x00 (the Linux mcp320x command byte); the MCP3208
0x06|ch>>2, (ch&3)<<6, 0x00; and the Linux mcp320x message of a 1-byte command
transfer and a 2-byte read transfer inside one CS-low window.

Annotations: start bit, single-ended/pseudo-differential mode and channel
(pairs as CH0+/CH1-), sampling clock, null bit, result code, channel = code
(volts) and the LSB-first repeat of the result (checked against the MSB-first
result).

Warnings: no start bit, null bit 1 (expected 0) or missing, too few clocks for
a result, LSB-first repeat mismatch, CS released mid-frame.

Options: part (MCP3004/3008/3204/3208) and vref (reference voltage, volts).
Map CLK, MOSI, MISO and CS# in the spi decoder (SPI mode 0 or 3). Without a
CS# line, a pause of more than two words without clocks ends a frame.
'''

from .pd import Decoder
