##
## This file is part of spigap.
##
## This program is free software: you can redistribute it and/or modify
## it under the terms of the GNU General Public License as published by
## the Free Software Foundation, either version 3 of the License, or
## (at your option) any later version.
##

'''
Setup and hold on a logic capture, in whole samples: the rule the spi_pins
decoder and spigap's pin measurement (analyzer/spigap/pins) share.

A logic analyzer records every change at the first sample after it, so an
edge-to-edge figure of m samples is truly between m - 1 and m + 1 samples.
Against a minimum of L samples (limit_s x samplerate) that makes it

 - a violation when even m + 1 is not more than L (m <= L - 1);
 - undecidable when m - 1 < L < m + 1: the grid cannot tell;
 - met otherwise.

A data change on the very sample of the clock edge: its order with the edge
is unknown, so both setup and hold are 0 samples (undecidable against any
limit, "< 1 sample").

Plain Python and arithmetic only: the functions work on numbers and, element
by element, on numpy arrays.
'''

OK, UNDECIDABLE, VIOLATION = 0, 1, 2


def classify(samples, limit_s, samplerate):
    '''OK, UNDECIDABLE or VIOLATION for a setup or hold of ``samples`` whole samples
    against a minimum of ``limit_s`` seconds.'''
    limit = limit_s * samplerate
    violation = samples <= limit - 1
    undecided = (samples > limit - 1) & (samples < limit + 1)
    return violation * VIOLATION + undecided * UNDECIDABLE


def same_sample(setup, hold):
    '''A data change on the clock edge's own sample (a setup or a hold of 0 samples): its
    order with the edge is unknown, so both are 0. (setup, hold) in samples.'''
    zero = (setup == 0) | (hold == 0)
    return setup * (1 - zero), hold * (1 - zero)
