##
## This file is part of spigap.
##
## This program is free software: you can redistribute it and/or modify
## it under the terms of the GNU General Public License as published by
## the Free Software Foundation, either version 3 of the License, or
## (at your option) any later version.
##

import sigrokdecode as srd
from .setuphold import OK, VIOLATION, classify, same_sample


class SamplerateError(Exception):
    pass


# channel indices (channels, then optional_channels)
CLK, CS, MOSI, MISO = 0, 1, 2, 3

# annotation classes
A_MOSI_VIOL, A_MOSI_UNDEC, A_MISO_VIOL, A_MISO_UNDEC = range(4)


def fmt_ns(samples, samplerate):
    ns = samples * 1e9 / samplerate
    return '%.4g ns' % ns


class Decoder(srd.Decoder):
    api_version = 3
    id = 'spi_pins'
    name = 'SPI setup/hold'
    longname = 'SPI setup and hold at the sampling edges (spigap)'
    desc = 'Data changes too close to the SPI sampling edges.'
    license = 'gplv3+'
    inputs = ['logic']
    outputs = []
    tags = ['Embedded/industrial', 'Clock/timing']
    channels = (
        {'id': 'clk', 'name': 'CLK', 'desc': 'Clock'},
        {'id': 'cs', 'name': 'CS#', 'desc': 'Chip-select'},
    )
    optional_channels = (
        {'id': 'mosi', 'name': 'MOSI', 'desc': 'Master out, slave in'},
        {'id': 'miso', 'name': 'MISO', 'desc': 'Master in, slave out'},
    )
    options = (
        {'id': 'cs_polarity', 'desc': 'CS# polarity', 'default': 'active-low',
            'values': ('active-low', 'active-high')},
        {'id': 'cpol', 'desc': 'Clock polarity', 'default': 0, 'values': (0, 1)},
        {'id': 'cpha', 'desc': 'Clock phase', 'default': 0, 'values': (0, 1)},
        {'id': 'mosi_setup', 'desc': 'MOSI setup time at the device (ns)', 'default': 0.0},
        {'id': 'mosi_hold', 'desc': 'MOSI hold time at the device (ns)', 'default': 0.0},
        {'id': 'miso_setup', 'desc': 'MISO setup time at the controller (ns)', 'default': 0.0},
        {'id': 'miso_hold', 'desc': 'MISO hold time at the controller (ns)', 'default': 0.0},
    )
    annotations = (
        ('mosi-violation', 'MOSI setup/hold violated.'),
        ('mosi-undecidable', 'MOSI setup/hold within one sample of the limit.'),
        ('miso-violation', 'MISO setup/hold violated.'),
        ('miso-undecidable', 'MISO setup/hold within one sample of the limit.'),
    )
    annotation_rows = (
        ('mosi', 'MOSI setup/hold', (A_MOSI_VIOL, A_MOSI_UNDEC)),
        ('miso', 'MISO setup/hold', (A_MISO_VIOL, A_MISO_UNDEC)),
    )

    def __init__(self):
        self.reset()

    def reset(self):
        self.samplerate = None
        self.last_change = {MOSI: None, MISO: None}
        # sampling edges waiting for their hold: line -> list of (edge sample, setup samples)
        self.pending = {MOSI: [], MISO: []}
        self.counts = {MOSI: [0, 0, 0], MISO: [0, 0, 0]}      # ok, undecidable, violated

    def metadata(self, key, value):
        if key == srd.SRD_CONF_SAMPLERATE:
            self.samplerate = value

    def start(self):
        self.out_ann = self.register(srd.OUTPUT_ANN)
        self.active = 0 if self.options['cs_polarity'] == 'active-low' else 1
        self.sample_rising = self.options['cpol'] == self.options['cpha']
        self.limits = {MOSI: (self.options['mosi_setup'] * 1e-9, self.options['mosi_hold'] * 1e-9),
                       MISO: (self.options['miso_setup'] * 1e-9, self.options['miso_hold'] * 1e-9)}

    def put_line(self, line, ss, es, code, what, samples, limit_s):
        cls = (A_MOSI_VIOL if line == MOSI else A_MISO_VIOL) + (0 if code == VIOLATION else 1)
        name = 'MOSI' if line == MOSI else 'MISO'
        fig = '< 1 sample' if samples == 0 else fmt_ns(samples, self.samplerate) + ' +/-1 sample'
        lim = fmt_ns(limit_s * self.samplerate, self.samplerate)
        mark = '' if code == VIOLATION else '?'
        self.put(min(ss, es), max(ss, es) + (1 if ss == es else 0), self.out_ann, [cls, [
            '%s %s %s < %s%s' % (name, what, fig, lim, mark),
            '%s %s %s' % (name, what, fig),
            '%s%s' % (what, mark)]])

    def judge(self, line, what, samples, limit_s, ss, es):
        code = classify(samples, limit_s, self.samplerate)
        self.counts[line][code] += 1
        if code != OK:
            self.put_line(line, ss, es, code, what, samples, limit_s)

    def on_edge(self, edge):
        '''A sampling edge inside the CS window: setup now, hold once the data changes.'''
        for line in self.lines:
            if self.last_change[line] is None:
                continue
            last = self.last_change[line]
            setup, hold = same_sample(edge - last, 1)
            self.judge(line, 'setup', setup, self.limits[line][0], last, edge)
            if last == edge:                # changed on the edge's own sample: hold 0 too
                self.judge(line, 'hold', hold, self.limits[line][1], edge, edge)
            else:
                self.pending[line].append(edge)

    def on_change(self, line, sample):
        '''The data changed: the hold of the sampling edges waiting for it.'''
        for edge in self.pending[line]:
            self.judge(line, 'hold', sample - edge, self.limits[line][1], edge, sample)
        self.pending[line] = []
        self.last_change[line] = sample

    def expire(self, sample):
        '''Edges whose hold can no longer break its limit, or be undecidable: met.'''
        for line in self.lines:
            horizon = self.limits[line][1] * self.samplerate + 1
            keep = []
            for edge in self.pending[line]:
                if sample - edge >= horizon:
                    self.counts[line][OK] += 1
                else:
                    keep.append(edge)
            self.pending[line] = keep

    def decode(self):
        if not self.samplerate:
            raise SamplerateError('Cannot decode without samplerate.')
        # has_channel() once: libsigrokdecode 0.5.3's returns True/False without a reference
        # of its own, and calling it on every edge ends in "bool_dealloc" (a crash)
        self.lines = lines = [l for l in (MOSI, MISO) if self.has_channel(l)]
        conds = [{CLK: 'e'}, {CS: 'e'}] + [{l: 'e'} for l in lines]
        pins = self.wait({'skip': 0})
        for l in lines:
            self.last_change[l] = self.samplenum
        cs = pins[CS]
        while True:
            pins = self.wait(conds)
            s = self.samplenum
            self.expire(s)
            m = self.matched
            # data first: a change on the clock's own sample belongs to that edge (setup_hold: 0, 0)
            for k, l in enumerate(lines):
                if m[2 + k]:
                    self.on_change(l, s)
            if m[1]:
                cs = pins[CS]
                if cs != self.active:
                    self.pending = {MOSI: [], MISO: []}
            if m[0] and cs == self.active and (pins[CLK] == 1) == self.sample_rising:
                self.on_edge(s)
