##
## This file is part of spigap.
##
## This program is free software: you can redistribute it and/or modify
## it under the terms of the GNU General Public License as published by
## the Free Software Foundation, either version 3 of the License, or
## (at your option) any later version.
##

'''
Setup and hold of SPI data at the sampling edges, on a logic capture: marks
the sampling edges where MOSI (at the device) or MISO (at the controller)
changed too close to the clock for the receiver's setup or hold time.

A logic analyzer sees each change one sample late at most, so every figure is
whole samples, +/- 1 sample (setuphold.py, the rule spigap's pin measurement
shares): an edge is "violated" only when it breaks the limit even with that
sample in its favour, and "undecidable" when the limit lies within a sample of
the figure (sample faster to decide). A data change on the clock edge's own
sample is undecidable at any limit: its order with the edge is unknown.

Channels: CLK and CS# are required, MOSI and MISO optional (each one mapped
is checked). Options: the mode (CPOL, CPHA), the CS# polarity, the device's
MOSI setup and hold times (tSU, tHD) and the controller's MISO setup and
hold times, in ns (0: only changes on the clock's own sample are marked).
The edges are thresholded by the analyzer, so the figures are at its
threshold, not at the receiver's VIL/VIH: a scope's trace gives those
(spigap pins).

Rows: MOSI setup/hold and MISO setup/hold: one annotation from the data
change to the sampling edge (setup), or from the edge to the data change
(hold), for every edge that breaks its limit or cannot be decided.

Needs the samplerate.
'''

from .pd import Decoder
