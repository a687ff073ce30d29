##
## This file is part of spigap.
##
## This program is free software: you can redistribute it and/or modify
## it under the terms of the GNU General Public License as published by
## the Free Software Foundation, either version 3 of the License, or
## (at your option) any later version.
##

import sigrokdecode as srd
from .mcp3x0x import DEFAULT_PART, DEFAULT_VREF, EVENT_KINDS, PARTS, FrameDecoder, texts

class Decoder(srd.Decoder):
    api_version = 3
    id = 'mcp3008'
    name = 'MCP3008'
    longname = 'Microchip MCP3001..3301, MCP3550/1/3 (Linux mcp320x)'
    desc = 'Microchip MCP3x0x/MCP355x SPI ADC.'
    license = 'gplv3+'
    inputs = ['spi']
    outputs = []
    tags = ['IC', 'Analog/digital']
    annotations = (
        ('start', 'Start bit'),
        ('mode', 'Single-ended or pseudo-differential'),
        ('channel', 'Channel select'),
        ('sample', 'Sampling clock'),
        ('null', 'Null bit'),
        ('result', 'Result code'),
        ('repeat', 'LSB-first repeat'),
        ('conversion', 'Channel, code and voltage'),
        ('warning', 'Warning'),
        ('msbf', 'MSBF bit'),
        ('ready', 'SDO/RDY bit'),
        ('overflow', 'Overflow bit'),
        ('convstart', 'Conversion start'),
    )
    annotation_rows = (
        ('commands', 'Commands', (0, 1, 2, 9, 3, 12)),
        ('replies', 'Replies', (10, 4, 11, 5, 6)),
        ('conversions', 'Conversions', (7,)),
        ('warnings', 'Warnings', (8,)),
    )
    options = (
        {'id': 'part', 'desc': 'Part', 'default': DEFAULT_PART,
            'values': tuple(sorted(PARTS))},
        {'id': 'vref', 'desc': 'Reference voltage (V)', 'default': DEFAULT_VREF},
    )

    def __init__(self):
        self.reset()

    def reset(self):
        self.frame = None
        self.cs_seen = False
        self.no_cs = False
        self.last_ss = None
        self.last_es = None
        self.period = None
        self.cs_level = None
        self.cs_active = 0          # spi's default cs_polarity; learnt from the first clocks
        self.cs_ss = None

    def start(self):
        self.out_ann = self.register(srd.OUTPUT_ANN)
        self.frame = FrameDecoder(self.options['part'], self.options['vref'])

    def emit(self, events):
        for kind, ss, es, value in events:
            self.put(ss, es, self.out_ann, [EVENT_KINDS.index(kind), texts(kind, value)])

    def decode(self, ss, es, data):
        if self.frame is None:          # reset() without a new start()
            self.frame = FrameDecoder(self.options['part'], self.options['vref'])
        ptype, mosi, miso = data
        if ptype == 'CS-CHANGE':
            if mosi is None:
                # First packet: initial CS level, or None when CS is not mapped.
                self.no_cs = miso is None
                self.cs_level = miso
                return
            # Any CS edge closes a window: spi sends BITS only while CS is active.
            if self.cs_seen:
                if mosi == self.cs_active and self.frame.clocks == 0:
                    self.emit(self.frame.cs_pulse(self.cs_ss, ss))
                self.emit(self.frame.end(ss))
            else:
                self.frame.reset()      # a window open at capture start is partial
            self.cs_seen = True
            self.cs_level, self.cs_ss = miso, ss
        elif ptype == 'BITS':
            mosi_bits = list(reversed(mosi)) if mosi is not None else None
            miso_bits = list(reversed(miso)) if miso is not None else None
            ref = mosi_bits if mosi_bits is not None else miso_bits
            if not ref:
                return
            if self.no_cs:
                self.burst_edge(ref)
            elif self.cs_level is not None:
                self.cs_active = self.cs_level
            for i, b in enumerate(ref):
                mo = mosi_bits[i][0] if mosi_bits is not None else None
                mi = miso_bits[i][0] if miso_bits is not None else None
                self.emit(self.frame.bit(mo, mi, b[1], b[2]))

    def burst_edge(self, ref):
        """No CS line: a clock pause longer than two words ends a window
        (the analyzer's rule, docs/gaps.md)."""
        first, last = ref[0][1], ref[-1][1]
        if self.last_ss is not None and self.period and \
                first - self.last_ss > 2 * len(ref) * self.period:
            self.emit(self.frame.end(self.last_es))
        if len(ref) > 1 and last > first:
            self.period = (last - first) / (len(ref) - 1)
        self.last_ss, self.last_es = last, ref[-1][2]
