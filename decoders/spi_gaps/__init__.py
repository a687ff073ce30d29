##
## This file is part of spigap.
##
## This program is free software: you can redistribute it and/or modify
## it under the terms of the GNU General Public License as published by
## the Free Software Foundation, either version 3 of the License, or
## (at your option) any later version.
##

'''
Where the microseconds go on an SPI bus: this decoder annotates the gaps that
"spigap analyze" measures, with the same definitions (spigap docs/gaps.md),
so the numbers agree to the sample.

Channels: CLK and CS# are read. MOSI and MISO are optional and never read;
they exist so that the channel map of an spi decoder can be reused as is.

Rows:
 - Transfers: each CS-active window, its duration and word count.
 - CS setup/hold: CS assert edge to the first SCLK edge, last SCLK edge to
   the CS deassert edge.
 - Word gaps: last clock edge of a word to the first clock edge of the next
   word in the same window, with the idle SCLK periods (gap - T/2) / T.
   A gap longer than the inter-transfer threshold is an inter-transfer gap
   (a boundary between two spi_transfers without cs_change, a delay, or a
   keep_cs hand-over).
 - CS inactive: CS deassert to the next CS assert. With the transfers per
   message option (N) every N-th gap is a context switch (between two
   spi_messages / ioctls) and the others are cs_change gaps; without it they
   are shown as "CS high".
 - Warnings: SCLK not at its idle level when CS is asserted (wrong mode),
   bits that do not fill a last word (wrong word size).

An SCLK edge in the same sample as a CS edge belongs to the window at an
assert and not at a deassert (the spi decoder's order: CS first). Each bit
owns its sampling edge plus its other clock edge (the one after it for
CPHA = 0, the one before it for CPHA = 1), so a word's span is its clock
burst.

The inter-transfer threshold: when "Inter-transfer gap" is 0 (auto), the
word gaps seen so far are split into two populations only where there
really are two (a clear valley; spigap docs/gaps.md, "Two populations"), and
the threshold is the boundary between them; a single population, however
jittered, stays inter-byte. The analyzer uses all word gaps of the capture,
so in auto mode the first few windows may be labelled differently. For an exact match give the threshold: "spigap analyze
--format json" reports it (inter_transfer_threshold_s), and the .pvs files
written by "spigap decoders pvs --gaps" carry it.

"Message lengths" (e.g. 2+3: messages of 2 and 3 transfers alternate)
replaces "Transfers per message" for drivers whose messages differ in
length. When spigap cannot tell which CS-inactive gaps are the context
switches (ambiguous), "spigap decoders pvs --gaps" leaves both options unset
and the gaps are shown as "CS high".

"First message start" is the transfer (counted from 0 in the capture) that
begins the first whole message; spigap analyze infers it from the gaps
(JSON: grouping phase p gives (p + 1) mod N), and "spigap decoders pvs
--gaps" sets it.

A shared bus: "Other CS# 1".."Other CS# 3" are optional, the other devices'
CS lines on this SCLK, each with its polarity option ("as CS#" by default).
Mapped, a "Shared bus" row marks each handover into this device (the bus's
last CS deassert was another line's: from it to this CS assert, named by the
line) and a warning where this CS and another are asserted at once.

Needs the samplerate.
'''

from .pd import Decoder
