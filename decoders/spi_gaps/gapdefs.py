##
## This file is part of spigap.
##
## This program is free software: you can redistribute it and/or modify
## it under the terms of the GNU General Public License as published by
## the Free Software Foundation, either version 3 of the License, or
## (at your option) any later version.
##
"""The gap rules of docs/gaps.md as plain Python: no sigrokdecode, no numpy.

This is the ONE definition of spigap's gap rules. The spi_gaps decoder imports
it relatively (``from .gapdefs import ...``); the analyzer loads it by file
path (``spigap.core.gaprules``, through ``spigap.resources.load_decoder_module
('spi_gaps', 'gapdefs')``, which gives it a bare package over this directory),
so both sides use one copy of the rules, one module per concern:

* ``measure``: the SCLK period T as the mean of the sampling-edge spacings
  within +-25 % of their median (PERIOD_BAND); the same-sample rule (an SCLK
  edge in the sample of a CS edge belongs to the window at an assert, not at a
  deassert); idle clocks (gap - T/2) / T; a word gap against the
  inter-transfer threshold;
* ``split``: the two-population split (``split_two``) that tells inter-byte
  from inter-transfer word gaps, and cs_change from context-switch gaps, by
  the data's own structure;
* ``grouping``: which CS-inactive gap ends a message for a repeating pattern
  of message lengths, and the labels (``cs_change``, ``context_switch``,
  ambiguous ``cs_change|context_switch``);
* ``histogram``: exact counts of sample counts and their quantiles, bit for
  bit numpy's (the decoder's running figures);
* ``text``: how a duration is written, at several zoom levels.

numpy is not guaranteed inside sigrok's embedded Python, so every one of them
is plain Python. They import each other relatively: load them as a package
(libsigrokdecode imports the decoder directory as one; the analyzer's loader
makes a bare one), never one file on its own.
"""

from .grouping import (AMBIGUOUS, CONTEXT_SWITCH, CS_CHANGE, IDLE_LEAD_FACTOR, MAX_PATTERN, MIN_AGREEMENT,
                       MIN_CLEAN_AGREEMENT, MIN_CONSTANT_N_BY_SHARE, MIN_PERIODS, MIN_PURITY, describe_lengths,
                       first_message_start_from_phase, gap_label, is_message_boundary, message_lengths_from_labels,
                       parse_lengths)
from .histogram import Histogram
from .measure import (CLK_AT_CS_ASSERT_INSIDE, CLK_AT_CS_DEASSERT_INSIDE, PERIOD_BAND, idle_clocks,
                      inter_transfer_threshold, is_inter_transfer, threshold_option_us, threshold_samples)
from .split import (SPLIT_BIN, SPLIT_CLOSE_TICKS, SPLIT_ITERATIONS, SPLIT_LINEAR_BINS, SPLIT_MAX_OUTLIER,
                    SPLIT_MAX_OUTLIER_LINEAR, SPLIT_MAX_SIGMA, SPLIT_MIN_COUNT, SPLIT_MIN_SEPARATION,
                    SPLIT_MIN_SHARE, SPLIT_MIN_TICKS, SPLIT_START_CUTS, SPLIT_UNCLEAR_SEPARATION,
                    SPLIT_UNCLEAR_SEPARATION_LINEAR, Split, histogram_bins, split_two)
from .text import fmt_idle_clocks, fmt_seconds, texts

__all__ = [
    # measure
    'PERIOD_BAND', 'CLK_AT_CS_ASSERT_INSIDE', 'CLK_AT_CS_DEASSERT_INSIDE', 'idle_clocks',
    'inter_transfer_threshold', 'is_inter_transfer', 'threshold_samples', 'threshold_option_us',
    # split
    'SPLIT_BIN', 'SPLIT_MIN_SEPARATION', 'SPLIT_UNCLEAR_SEPARATION', 'SPLIT_UNCLEAR_SEPARATION_LINEAR',
    'SPLIT_MIN_TICKS', 'SPLIT_CLOSE_TICKS', 'SPLIT_MIN_SHARE', 'SPLIT_MIN_COUNT', 'SPLIT_MAX_SIGMA',
    'SPLIT_MAX_OUTLIER', 'SPLIT_MAX_OUTLIER_LINEAR', 'SPLIT_ITERATIONS', 'SPLIT_LINEAR_BINS', 'SPLIT_START_CUTS',
    'Split', 'histogram_bins', 'split_two',
    # grouping
    'CS_CHANGE', 'CONTEXT_SWITCH', 'AMBIGUOUS', 'MIN_PERIODS', 'MAX_PATTERN', 'MIN_AGREEMENT', 'MIN_PURITY',
    'MIN_CLEAN_AGREEMENT', 'MIN_CONSTANT_N_BY_SHARE', 'IDLE_LEAD_FACTOR', 'parse_lengths', 'is_message_boundary',
    'gap_label', 'first_message_start_from_phase', 'message_lengths_from_labels', 'describe_lengths',
    # histogram
    'Histogram',
    # text
    'fmt_seconds', 'texts', 'fmt_idle_clocks',
]
