##
## This file is part of spigap.
##
## This program is free software: you can redistribute it and/or modify
## it under the terms of the GNU General Public License as published by
## the Free Software Foundation, either version 3 of the License, or
## (at your option) any later version.
##

import sigrokdecode as srd
from .gapdefs import (CONTEXT_SWITCH, Histogram, fmt_idle_clocks, gap_label, idle_clocks,
                      inter_transfer_threshold, is_inter_transfer, parse_lengths, split_two,
                      texts, threshold_samples)


class SamplerateError(Exception):
    pass


class OptionError(Exception):
    pass


# channel indices (channels, then optional_channels)
CLK, CS = 0, 1
OTHERS = (4, 5, 6)          # Other CS# 1..3: the other devices' CS lines on this SCLK

# annotation classes (plain ints: lookups of a pseudo-enum class cost time
# on every clock edge)
A_TRANSFER, A_CS_SETUP, A_CS_HOLD, A_INTER_BYTE, A_INTER_TRANSFER, \
    A_CS_CHANGE, A_CONTEXT_SWITCH, A_CS_INACTIVE, A_WARNING, A_HANDOVER = range(10)


class Decoder(srd.Decoder):
    api_version = 3
    id = 'spi_gaps'
    name = 'SPI gaps'
    longname = 'SPI timing gaps (spigap)'
    desc = 'CS setup/hold, word gaps and CS-inactive gaps of SPI.'
    license = 'gplv3+'
    inputs = ['logic']
    outputs = []
    tags = ['Embedded/industrial', 'Clock/timing']
    channels = (
        {'id': 'clk', 'name': 'CLK', 'desc': 'Clock'},
        {'id': 'cs', 'name': 'CS#', 'desc': 'Chip-select'},
    )
    optional_channels = (
        {'id': 'mosi', 'name': 'MOSI', 'desc': 'Master out, slave in (not read).'},
        {'id': 'miso', 'name': 'MISO', 'desc': 'Master in, slave out (not read).'},
        {'id': 'cs_other1', 'name': 'Other CS# 1',
            'desc': "Another device's chip-select on this SCLK."},
        {'id': 'cs_other2', 'name': 'Other CS# 2',
            'desc': "A third device's chip-select on this SCLK."},
        {'id': 'cs_other3', 'name': 'Other CS# 3',
            'desc': "A fourth device's chip-select on this SCLK."},
    )
    options = (
        {'id': 'cs_polarity', 'desc': 'CS# polarity', 'default': 'active-low',
            'values': ('active-low', 'active-high')},
        {'id': 'cpol', 'desc': 'Clock polarity', 'default': 0, 'values': (0, 1)},
        {'id': 'cpha', 'desc': 'Clock phase', 'default': 0, 'values': (0, 1)},
        {'id': 'wordsize', 'desc': 'Word size', 'default': 8},
        {'id': 'transfers_per_message',
            'desc': 'Transfers per message (0 = unknown)', 'default': 0},
        {'id': 'first_message_start',
            'desc': 'Transfer that starts the first message', 'default': 0},
        {'id': 'message_lengths',
            'desc': 'Repeating message lengths, e.g. 2+3 (overrides transfers per message)',
            'default': ''},
        {'id': 'inter_transfer_gap',
            'desc': 'Inter-transfer gap threshold in us (0 = auto)', 'default': 0.0},
        {'id': 'cs_other1_polarity', 'desc': 'Other CS# 1 polarity', 'default': 'as CS#',
            'values': ('as CS#', 'active-low', 'active-high')},
        {'id': 'cs_other2_polarity', 'desc': 'Other CS# 2 polarity', 'default': 'as CS#',
            'values': ('as CS#', 'active-low', 'active-high')},
        {'id': 'cs_other3_polarity', 'desc': 'Other CS# 3 polarity', 'default': 'as CS#',
            'values': ('as CS#', 'active-low', 'active-high')},
    )
    annotations = (
        ('transfer', 'Transfer (CS window).'),
        ('cs-setup', 'CS assert to first SCLK edge.'),
        ('cs-hold', 'Last SCLK edge to CS deassert.'),
        ('inter-byte', 'Gap between words of one transfer.'),
        ('inter-transfer', 'Gap above the inter-transfer threshold.'),
        ('cs-change', 'CS inactive inside a message (cs_change).'),
        ('context-switch', 'CS inactive between messages.'),
        ('cs-inactive', 'CS inactive, message structure unknown.'),
        ('warning', 'Warning.'),
        ('handover', "Another device's CS deassert to this CS assert."),
    )
    annotation_rows = (
        ('transfers', 'Transfers', (A_TRANSFER,)),
        ('cs-timings', 'CS setup/hold', (A_CS_SETUP, A_CS_HOLD)),
        ('word-gaps', 'Word gaps', (A_INTER_BYTE, A_INTER_TRANSFER)),
        ('cs-inactive-gaps', 'CS inactive',
            (A_CS_CHANGE, A_CONTEXT_SWITCH, A_CS_INACTIVE)),
        ('warnings', 'Warnings', (A_WARNING,)),
        ('bus', 'Shared bus', (A_HANDOVER,)),
    )

    def __init__(self):
        self.reset()

    def reset(self):
        self.samplerate = None
        self.window = -1            # number of the current/last CS window
        self.in_window = False
        self.last_end = None        # sample of the last CS deassert
        self.gaps = Histogram()     # all word gaps so far (samples)
        self.auto_thr = None        # inter-transfer threshold from the word gaps so far
        self.next_split = 8         # re-split the word gaps when this many are seen
        self.spacing = Histogram()  # sampling-edge spacings inside words
        # a shared bus (Other CS# 1..3): per line its active level and whether it is asserted
        self.other_act = {}
        self.other_on = {}
        self.other_off = None       # (sample, line) of the last deassert among the other lines
        self.both_since = None      # this CS and another asserted since this sample
        self.both_with = set()      # the other lines asserted with it meanwhile
        self._clear_window(0, False, True)

    def metadata(self, key, value):
        if key == srd.SRD_CONF_SAMPLERATE:
            self.samplerate = value

    def start(self):
        self.out_ann = self.register(srd.OUTPUT_ANN)
        o = self.options
        self.active = 0 if o['cs_polarity'] == 'active-low' else 1
        self.cpol = o['cpol']
        self.cpha = o['cpha']
        # modes 0 and 3 sample on the rising edge, 1 and 2 on the falling one
        self.samp_level = 1 if self.cpol == self.cpha else 0
        self.ws = o['wordsize']
        if self.ws < 1:
            raise OptionError('Word size must be at least 1.')
        self.tpm = o['transfers_per_message']
        if self.tpm < 0:
            raise OptionError('Transfers per message must be >= 0.')
        self.first_msg = o['first_message_start']
        if self.first_msg < 0:
            raise OptionError('First message start must be >= 0.')
        try:
            self.lengths = parse_lengths(o['message_lengths'])
        except ValueError:
            raise OptionError('Message lengths must be positive integers, e.g. 2+3.') from None
        self.thr_us = float(o['inter_transfer_gap'])
        if self.thr_us < 0:
            raise OptionError('Inter-transfer gap must be >= 0.')
        self.fixed_thr = None
        self.inactive_name = 'CS high' if self.active == 0 else 'CS low'

    # ------------------------------------------------------------ helpers
    def putx(self, ss, es, cls, txt):
        self.put(ss, es, self.out_ann, [cls, txt])

    def _clear_window(self, start, partial, clk_ok):
        self.start_s = start
        self.partial = partial
        self.clk_ok = clk_ok
        self.first_edge = None
        self.last_edge = None
        self.n_samp = 0             # sampling edges (bits) so far
        self.cur_w = -1             # word the last owned edge belongs to
        self.cur_first = None       # first owned edge of that word
        self.last_owned = None      # last owned edge so far
        self.prev_last = None       # last owned edge of the word before cur_w
        self.word_samp = []         # sampling-edge samples of word cur_w
        self.last_samp = None       # wordsize 1: previous sampling edge

    def period(self):
        return self.spacing.band_mean()

    # ------------------------------------------------------------ events
    def open_window(self, s, partial, clk):
        self.window += 1
        if self.last_end is not None:
            self.cs_inactive_gap(self.window - 1, self.last_end, s)
        on = [i for i in sorted(self.other_on) if self.other_on[i]]
        off = self.other_off
        if off is not None and not on and (self.last_end is None or off[0] >= self.last_end):
            # the bus's last deassert was another device's: the bus went from it to this one
            self.putx(off[0], s, A_HANDOVER,
                      texts('Handover from Other CS# %d' % off[1], 'Handover', 'HO', s - off[0],
                            self.samplerate))
        self._clear_window(s, partial, clk == self.cpol)
        self.in_window = True
        if on:
            self.both_since = s
            self.both_with = set(on)

    def other_edge(self, s, line, level):
        """An edge of Other CS# ``line`` (1..3)."""
        on = level == self.other_act[line]
        if on == self.other_on[line]:
            return
        self.other_on[line] = on
        if on:
            if self.in_window:
                if self.both_since is None:
                    self.both_since = s
                self.both_with.add(line)
        else:
            # several lines released in one sample: the lowest numbered one (the analyzer
            # takes the first device's, and "spigap decoders pvs" maps them in device order)
            if self.other_off is None or s > self.other_off[0]:
                self.other_off = (s, line)
            if not any(self.other_on.values()):
                self.both_end(s)

    def both_end(self, s):
        if self.both_since is not None:
            lines = ', '.join('Other CS# %d' % i for i in sorted(self.both_with))
            self.putx(self.both_since, s, A_WARNING,
                      ['Two CS lines asserted at once (CS# and %s): only one device may drive '
                       'the shared MISO' % lines, 'Two CS asserted', 'CS!'])
            self.both_since = None
            self.both_with = set()

    def cs_inactive_gap(self, index, ss, es):
        n = es - ss
        sr = self.samplerate
        if self.tpm or self.lengths:
            if gap_label(index, self.tpm, self.first_msg, self.lengths) == CONTEXT_SWITCH:
                self.putx(ss, es, A_CONTEXT_SWITCH,
                          texts('Context switch', 'Ctx switch', 'X', n, sr))
            else:
                self.putx(ss, es, A_CS_CHANGE,
                          texts('cs_change gap', 'cs_change', 'C', n, sr))
        else:
            name = self.inactive_name
            self.putx(ss, es, A_CS_INACTIVE, texts(name, name, 'CS', n, sr))

    def clock_edge(self, t, level):
        if self.first_edge is None:
            self.first_edge = t
            if not self.partial:
                self.putx(self.start_s, t, A_CS_SETUP,
                          texts('CS setup', 'Setup', 'S', t - self.start_s, self.samplerate))
        self.last_edge = t
        if level == self.samp_level:
            samp = True
            self.n_samp += 1
            bit = self.n_samp - 1
        else:
            samp = False
            # the other edge belongs to the bit before it (CPHA=0) or after it (CPHA=1)
            bit = self.n_samp - 1 if self.cpha == 0 else self.n_samp
            if bit < 0:
                return
        w = bit // self.ws
        if w != self.cur_w:
            self.prev_last = self.last_owned
            self.cur_w = w
            self.cur_first = t
            self.word_samp = []
        self.last_owned = t
        if not samp:
            return
        if self.ws == 1:
            if self.last_samp is not None:
                self.spacing.add(t - self.last_samp)
            self.last_samp = t
        else:
            self.word_samp.append(t)
        if bit % self.ws == self.ws - 1:
            ws_ = self.word_samp
            for i in range(1, len(ws_)):
                self.spacing.add(ws_[i] - ws_[i - 1])
            if w >= 1:
                self.word_gap(self.prev_last, self.cur_first)

    def word_gap(self, ss, es):
        gap = es - ss
        self.gaps.add(gap)
        period = self.period()
        if self.fixed_thr is not None:
            thr = self.fixed_thr
        else:
            # the analyzer's two-population split over the word gaps seen so far,
            # redone each time their number doubles, so the cost stays bounded (log2 of the count)
            if self.gaps.total >= self.next_split:
                self.auto_thr = inter_transfer_threshold(
                    split_two([(v, self.gaps.counts[v]) for v in self.gaps.values], 'linear'))
                self.next_split = self.gaps.total * 2
            thr = self.auto_thr
        sr = self.samplerate
        if is_inter_transfer(gap, thr):
            self.putx(ss, es, A_INTER_TRANSFER,
                      texts('Inter-transfer gap', 'Inter-xfer', 'I', gap, sr))
        else:
            extra = fmt_idle_clocks(idle_clocks(gap, period))
            self.putx(ss, es, A_INTER_BYTE,
                      texts('Inter-byte gap', 'Gap', 'B', gap, sr, extra))

    def close_window(self, t):
        sr = self.samplerate
        ss = self.start_s
        if self.last_edge is not None:
            self.putx(self.last_edge, t, A_CS_HOLD,
                      texts('CS hold', 'Hold', 'H', t - self.last_edge, sr))
        words = self.n_samp // self.ws
        wtxt = '%d word%s' % (words, '' if words == 1 else 's')
        if self.partial:
            self.putx(ss, t, A_TRANSFER,
                      ['Transfer (CS already active at the start), ' + wtxt,
                       'Transfer (partial), ' + wtxt, 'Partial', 'P'])
        else:
            self.putx(ss, t, A_TRANSFER,
                      texts('Transfer', 'Transfer', 'T', t - ss, sr, wtxt))
            if not self.clk_ok:
                self.putx(ss, t, A_WARNING,
                          ['SCLK not at its idle level (CPOL=%d) when CS was '
                           'asserted: check CPOL/CPHA' % self.cpol,
                           'SCLK not idle at CS assert', 'CPOL?'])
            trailing = self.n_samp % self.ws
            if trailing:
                self.putx(ss, t, A_WARNING,
                          ['%d bit%s left over, not a whole %d-bit word: check the word size'
                           % (trailing, '' if trailing == 1 else 's', self.ws),
                           '%d trailing bit%s' % (trailing, '' if trailing == 1 else 's'),
                           'Bits?'])
        self.last_end = t
        self.in_window = False
        self.both_end(t)

    # ------------------------------------------------------------ main loop
    def decode(self):
        if not self.samplerate:
            raise SamplerateError('Cannot decode without samplerate.')
        if self.thr_us > 0:
            self.fixed_thr = threshold_samples(self.thr_us * 1e-6, self.samplerate)
        pins = self.wait({})
        clk, cs = pins[:2]
        # a shared bus: the mapped Other CS# lines, each with its polarity
        others = [(i + 1, ch) for i, ch in enumerate(OTHERS) if self.has_channel(ch)]
        for line, ch in others:
            pol = self.options['cs_other%d_polarity' % line]
            self.other_act[line] = self.active if pol == 'as CS#' else (0 if pol == 'active-low' else 1)
            self.other_on[line] = pins[ch] == self.other_act[line]
        if cs == self.active:
            # CS already active at the first sample: a partial window
            self.open_window(self.samplenum, True, clk)
        assert_edge = 'f' if self.active == 0 else 'r'
        # outside a window only CS asserts wake us; the second term tells
        # whether SCLK changed in that very sample (it then belongs to the window)
        idle = [{CS: assert_edge}, {CS: assert_edge, CLK: 'e'}]
        # inside: every SCLK edge and the CS deassert (an SCLK edge in the
        # deassert sample is outside the window)
        busy = [{CLK: 'e'}, {CS: 'e'}]
        # a shared bus: the other lines' edges too (handovers, two CS asserted), conditions 2..;
        # handled before this CS's edge in the same sample (a handover in one sample is 0)
        for line, ch in others:
            idle.append({ch: 'e'})
            busy.append({ch: 'e'})
        while True:
            if self.in_window:
                pins = self.wait(busy)
                m = self.matched
                for k, (line, ch) in enumerate(others):
                    if m[2 + k]:
                        self.other_edge(self.samplenum, line, pins[ch])
                if m[1]:
                    self.close_window(self.samplenum)
                elif m[0]:
                    self.clock_edge(self.samplenum, pins[CLK])
            else:
                pins = self.wait(idle)
                m = self.matched
                for k, (line, ch) in enumerate(others):
                    if m[2 + k]:
                        self.other_edge(self.samplenum, line, pins[ch])
                if m[0] or m[1]:
                    self.open_window(self.samplenum, False, pins[CLK])
                    if m[1]:
                        self.clock_edge(self.samplenum, pins[CLK])
