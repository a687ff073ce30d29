##
## This file is part of spigap.
##
## This program is free software: you can redistribute it and/or modify
## it under the terms of the GNU General Public License as published by
## the Free Software Foundation, either version 3 of the License, or
## (at your option) any later version.
##

'''
Analog Devices AD7606 family, serial interface: every part of the Linux
ad7606 driver. AD7606 (8 channels; the kernel's ad7606-8), AD7606-6,
AD7606-4, AD7605-4, AD7606B and AD7606C-16 (16-bit results), AD7607 (14-bit),
AD7608, AD7609 and AD7606C-18 (18-bit), AD7616 (16 channels, 16-bit, in the
order its sequencer sends them: V0A, V0B, V1A, ...). A logic-input decoder:
it reads SCLK, CS# and DOUTA (and optionally DOUTB, BUSY, CONVST, FRSTDATA,
DIN) itself, because one spi instance has only one MISO line.

Results: every channel's two's-complement code and volts (code x range /
2^(bits-1)), in read order: DOUTA alone gives V1..V8; DOUTA+DOUTB give
V1..V4 on DOUTA and V5..V8 on DOUTB in parallel; DOUTB alone gives V5..V8,
V1..V4 (AD7606-6: V4..V6, V1..V3; AD7606-4: V3, V4, V1, V2). A frame
annotation lists all channels of one read. AD7606B/C with the status header
on: each result is followed by its 8-bit status (channel, AIN_OV/UV,
OPEN_DETECTED, DIGITAL_ERROR, RESET_DETECT); a channel field that is not the
channel at its place is a warning (misaligned read).

A read of the first channels only (e.g. 4 bytes: V1 and V2) is a partial
read: a note, not a warning. An SCLK count that no read of the chosen part
has is a warning naming the parts whose full read it is ("144 SCLKs: looks
like AD7606C-18, AD7608 or AD7609 (8 x 18 bits)").

Registers (AD7606B/C, AD7616; DIN mapped): a CS window whose DIN carries a
command, or the frame after a read command, is decoded as 16-bit register
frames: "Write CONFIG = 0x00 (normal, 1 DOUT line, status header off)",
"Read RANGE_CH1_CH2 = 0x33 (V1 ±10 V V2 ±10 V)". Writes and reads set what
the following reads decode: CONFIG's status header and DOUT lines (option
dout auto), the channels' ranges.

A read ends at the next BUSY falling edge (new results) when BUSY is
connected, else at the next CONVST rising edge, else at CS# rising. So a
read may be split over several CS# windows (CS# pulsed per channel word)
when BUSY or CONVST is connected.

Conversions (with BUSY/CONVST): CONVST rise to BUSY rise, BUSY high time
(tCONV), BUSY fall to CS# fall (read after conversion) or read during
conversion, CONVST period.

Warnings: SCLK running at the BUSY falling edge (the output registers change
under the read), an SCLK count that fits no read, FRSTDATA not high on the
first channel, and DOUT changing right after the sampling edge (a wrong
mode, e.g. mode 3 copied from the device tree: every bit taken one clock
late), naming the cpol/cpha to set.

Options: variant, range (until a range register is seen), dout (auto:
DOUTA+DOUTB when DOUTB is connected, or as CONFIG sets it; or DOUTA,
DOUTA+DOUTB, DOUTB = DOUTB only, read from the doutb channel when
connected, else from douta), status_header (auto: as CONFIG sets it),
cpol/cpha of SCLK (default cpol=1 cpha=0: SCLK idles high, data changes on
the rising edge and is sampled on the falling edge).
'''

from .pd import Decoder
