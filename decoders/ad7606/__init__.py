##
## This file is part of spigap.
##
## This program is free software: you can redistribute it and/or modify
## it under the terms of the GNU General Public License as published by
## the Free Software Foundation, either version 3 of the License, or
## (at your option) any later version.
##

'''
Analog Devices AD7606 / AD7606-6 / AD7606-4 (8/6/4-channel 16-bit ADC)
serial read-out. A logic-input decoder: it reads SCLK, CS# and DOUTA (and
optionally DOUTB, BUSY, CONVST, FRSTDATA) itself, because one spi instance
has only one MISO line.

Results: every channel's 16-bit two's-complement code and volts
(code x range / 32768, range 10 V or 5 V), in read order: DOUTA alone gives
V1..V8; DOUTA+DOUTB give V1..V4 on DOUTA and V5..V8 on DOUTB in parallel;
DOUTB alone gives V5..V8, V1..V4 (AD7606-6: V4..V6, V1..V3; AD7606-4: V3, V4,
V1, V2). A frame annotation lists all channels of one read.

A read ends at the next BUSY falling edge (new results) when BUSY is
connected, else at the next CONVST rising edge, else at CS# rising. So a read
may be split over several CS# windows (CS# pulsed per 16-SCLK word) when
BUSY or CONVST is connected.

Conversions (with BUSY/CONVST): CONVST rise to BUSY rise, BUSY high time
(tCONV), BUSY fall to CS# fall (read after conversion) or read during
conversion, CONVST period.

Warnings: SCLK running at the BUSY falling edge (the output registers change
under the read), wrong SCLK count for a read (16 x channels / DOUT lines),
FRSTDATA not high on the first channel.

Options: variant (AD7606/AD7606-6/AD7606-4), range (10V/5V), dout (auto:
DOUTA+DOUTB when DOUTB is connected, else DOUTA; or DOUTA, DOUTA+DOUTB,
DOUTB = DOUTB only, read from the doutb channel when connected, else from
douta), cpol/cpha of SCLK (default cpol=1 cpha=0: SCLK idles high, data
changes on the rising edge and is sampled on the falling edge).
'''

from .pd import Decoder
