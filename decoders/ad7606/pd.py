##
## This file is part of spigap.
##
## This program is free software: you can redistribute it and/or modify
## it under the terms of the GNU General Public License as published by
## the Free Software Foundation, either version 3 of the License, or
## (at your option) any later version.
##

import sigrokdecode as srd
from .ad760x import (DEFAULT_RANGE, DEFAULT_VARIANT, DOUTS, FRAME_BITS, RANGES, STATUS_HEADERS,
                     VARIANTS, FrameAssembler, Registers, format_duration, format_rate, frame_texts,
                     mode_hint, mode_trap, option_range, resolve_dout, result_texts, status_mismatch,
                     volts)

SCLK, CS, DOUTA, DOUTB, BUSY, CONVST, FRSTDATA, DIN = range(8)
# The mode check watches DOUT edges during the first reads only (each read gets its own
# verdict); a wrong mode does not change within a capture, so the later reads carry the
# majority verdict of these, without the cost of waking on every data edge.
TRAP_READS = 8

(ANN_DOUTA, ANN_DOUTB, ANN_FRAME, ANN_CONVST, ANN_START_DELAY, ANN_CONVERSION,
 ANN_READ, ANN_WARNING, ANN_REGISTER, ANN_NOTE) = range(10)

class Decoder(srd.Decoder):
    api_version = 3
    id = 'ad7606'
    name = 'AD7606'
    longname = 'Analog Devices AD7606 family (AD7605-4 ... AD7616)'
    desc = 'Analog Devices AD7606 family ADCs, serial interface.'
    license = 'gplv3+'
    inputs = ['logic']
    outputs = []
    tags = ['IC', 'Analog/digital']
    channels = (
        {'id': 'sclk', 'name': 'SCLK', 'desc': 'Serial clock (RD/SCLK)'},
        {'id': 'cs', 'name': 'CS#', 'desc': 'Chip select (active low)'},
        {'id': 'douta', 'name': 'DOUTA', 'desc': 'Serial data output A'},
    )
    optional_channels = (
        {'id': 'doutb', 'name': 'DOUTB', 'desc': 'Serial data output B'},
        {'id': 'busy', 'name': 'BUSY', 'desc': 'Conversion in progress'},
        {'id': 'convst', 'name': 'CONVST', 'desc': 'Conversion start (CONVST A/B)'},
        {'id': 'frstdata', 'name': 'FRSTDATA', 'desc': 'First channel on the output'},
        {'id': 'din', 'name': 'DIN', 'desc': 'Serial data input (SDI, register access)'},
    )
    options = (
        {'id': 'variant', 'desc': 'Part (channels, bits, registers)', 'default': DEFAULT_VARIANT,
            'values': tuple(VARIANTS)},
        {'id': 'range', 'desc': 'Input range (±, until a range register is seen)',
            'default': DEFAULT_RANGE, 'values': tuple(RANGES)},
        {'id': 'dout', 'desc': 'DOUT lines used', 'default': 'auto', 'values': DOUTS},
        {'id': 'status_header', 'desc': 'Status header after each result (AD7606B/C)',
            'default': 'auto', 'values': STATUS_HEADERS},
        {'id': 'cpol', 'desc': 'SCLK polarity (1: idles high)', 'default': 1,
            'values': (0, 1)},
        {'id': 'cpha', 'desc': 'SCLK phase (0: sample on leading edge)', 'default': 0,
            'values': (0, 1)},
    )
    annotations = (
        ('douta-result', 'DOUTA result'),
        ('doutb-result', 'DOUTB result'),
        ('frame', 'All channels of one read'),
        ('convst-period', 'CONVST period'),
        ('start-delay', 'CONVST rise to BUSY rise'),
        ('conversion', 'Conversion (BUSY high)'),
        ('read', 'Read after or during conversion'),
        ('warning', 'Warning'),
        ('register', 'Register access'),
        ('note', 'Note'),
    )
    annotation_rows = (
        ('douta-results', 'DOUTA', (ANN_DOUTA,)),
        ('doutb-results', 'DOUTB', (ANN_DOUTB,)),
        ('frames', 'Frames', (ANN_FRAME,)),
        ('registers', 'Registers', (ANN_REGISTER,)),
        ('convst-periods', 'CONVST', (ANN_CONVST,)),
        ('conversions', 'Conversions', (ANN_START_DELAY, ANN_CONVERSION)),
        ('reads', 'Reads', (ANN_READ,)),
        ('notes', 'Notes', (ANN_NOTE,)),
        ('warnings', 'Warnings', (ANN_WARNING,)),
    )

    def __init__(self):
        self.reset()

    def reset(self):
        self.samplerate = None
        self.cs_low = False
        self.last_convst = None         # last CONVST rising edge
        self.pending_convst = None      # CONVST rise not yet followed by BUSY rise
        self.busy_rise = None
        self.busy_fall = None
        self.read_after_pending = False # a BUSY fall not yet followed by a read
        self.busy_fall_in_read = None   # BUSY fell while SCLK was running
        self.window_ss = None
        self.window_bits = 0
        self.window_during = False
        self.window_kind = None         # None (undecided), 'data' or 'register'
        self.buffer = []                # bits of an undecided window: (n, es, dout bits, din, frst)
        self.reg_bits = []              # bits of the open register frame: (n, es, dout, din)
        self.idle_level = None          # SCLK at the last CS fall
        self.last_bit = None
        self.period = None
        self.frst_low = None
        self.first_word_done = False
        self.after_sampling = 0         # data-line edges right after a sampling edge (this read)
        self.after_launch = 0           # ... after the other edge
        self.trap_reads = 0             # reads whose data edges were watched
        self.trap_hits = 0              # ... of them with the data changing on the sampling edge
        self.trap_verdict = False       # the majority of them, for the reads after

    def metadata(self, key, value):
        if key == srd.SRD_CONF_SAMPLERATE:
            self.samplerate = value

    def start(self):
        self.out_ann = self.register(srd.OUTPUT_ANN)

    def putw(self, ss, es, texts):
        self.put(ss, es, self.out_ann, [ANN_WARNING, texts])

    def dur(self, samples):
        return format_duration(samples, self.samplerate)

    # ------------------------------------------------------------ set-up
    def prepare(self):
        self.have = {ch: self.has_channel(ch) for ch in range(8)}
        self.variant = self.options['variant']
        self.regs = Registers(self.variant)
        self.registers = bool(self.regs.map) and self.have[DIN]
        self.range = option_range(self.options['range'])
        self.dout_warning = None
        if self.options['dout'] == 'DOUTA+DOUTB' and not self.have[DOUTB]:
            self.dout_warning = 'DOUTB not connected: decoding DOUTA alone'
        self.frame = None
        self.frame_key = None
        self.new_frame()
        # What ends a read: a BUSY fall (new results), else a CONVST rise, else CS rise.
        self.boundary = 'busy' if self.have[BUSY] else ('convst' if self.have[CONVST] else 'cs')
        self.edge = 'r' if self.options['cpol'] == self.options['cpha'] else 'f'
        self.post_sampling = 1 if self.edge == 'r' else 0
        extra = []
        if self.have[BUSY]:
            extra += [('busy_rise', {BUSY: 'r'}), ('busy_fall', {BUSY: 'f'})]
        if self.have[CONVST]:
            extra += [('convst_rise', {CONVST: 'r'})]
        high = [('cs_fall', {CS: 'f'}), ('cs_fall_sclk', {CS: 'f', SCLK: self.edge})] + extra
        low = [('sclk', {SCLK: self.edge}), ('cs_rise', {CS: 'r'})] + extra
        self.names_high = [n for n, _ in high]
        self.conds_high = [c for _, c in high]
        self.names_low = [n for n, _ in low]
        self.conds_low = [c for _, c in low]
        # the data lines' edges while CS is low: do they follow the sampling edge (a wrong mode)?
        data = [('data', {pin: 'e'}) for pin in (DOUTA, DOUTB) if self.have[pin]]
        self.names_watch = self.names_low + [n for n, _ in data]
        self.conds_watch = self.conds_low + [c for _, c in data]

    def data_config(self):
        """(dout, status header) of the next read: the options, or CONFIG as seen written."""
        opt = self.options['dout']
        lines = self.regs.dout_lines
        if opt == 'auto' and lines is not None:
            dout = 'DOUTA+DOUTB' if lines == 2 and self.have[DOUTB] else 'DOUTA'
        else:
            dout = resolve_dout(opt, self.have[DOUTB])
            if dout == 'DOUTA+DOUTB' and not self.have[DOUTB]:
                dout = 'DOUTA'
        st = self.options['status_header']
        status = self.regs.status_header if st == 'auto' else st == 'on'
        return dout, status

    def new_frame(self):
        """A FrameAssembler for the next read (the register settings may have changed)."""
        key = self.data_config()
        if self.frame is not None and key == self.frame_key:
            return
        dout, status = self.frame_key = key
        if dout == 'DOUTB' and self.have[DOUTB]:
            self.data_pins = [DOUTB]
        elif dout == 'DOUTA+DOUTB':
            self.data_pins = [DOUTA, DOUTB]
        else:
            self.data_pins = [DOUTA]
        self.result_class = ([ANN_DOUTB] if dout == 'DOUTB' else [ANN_DOUTA, ANN_DOUTB])
        self.frame = FrameAssembler(self.variant, dout, self.range, status, self.regs.ranges)
        self.frame.cs_bounded = not (self.have[BUSY] or self.have[CONVST])

    # ------------------------------------------------------------ events
    def on_convst_rise(self, n):
        if self.last_convst is not None:
            p = n - self.last_convst
            rate = format_rate(p, self.samplerate)
            t = self.dur(p)
            self.put(self.last_convst, n, self.out_ann, [ANN_CONVST, [
                'CONVST period %s%s' % (t, ' (%s)' % rate if rate else ''), 'Period %s' % t, t]])
        self.last_convst = n
        self.pending_convst = n
        if self.boundary == 'convst':
            self.end_read_at_boundary(n)

    def on_busy_rise(self, n):
        if self.pending_convst is not None:
            t = self.dur(n - self.pending_convst)
            self.put(self.pending_convst, n, self.out_ann, [ANN_START_DELAY, [
                'CONVST\u2191\u2192BUSY\u2191 %s' % t, t]])
            self.pending_convst = None
        self.busy_rise = n

    def mid_read(self, n):
        """A read is under way at sample n: CS low, SCLKs clocked in this window
        and the last one recent (4 SCLK periods: byte gaps included), and the
        read has not got all its SCLKs yet."""
        if not (self.cs_low and self.window_bits and self.frame.open) or self.frame.complete():
            return False
        return self.last_bit is not None and bool(self.period) and n - self.last_bit <= 4 * self.period

    def on_busy_fall(self, n, sclk_same_sample):
        if self.busy_rise is not None:
            t = self.dur(n - self.busy_rise)
            self.put(self.busy_rise, n, self.out_ann, [ANN_CONVERSION, [
                'Conversion (BUSY high) %s' % t, 'tCONV %s' % t, t]])
            self.busy_rise = None
        self.busy_fall = n
        self.read_after_pending = True
        if self.mid_read(n):
            # The output registers change under a running read: do not split it.
            if sclk_same_sample:
                self.putw(n, n + 1, ['SCLK edge at the BUSY falling edge', 'SCLK at BUSY\u2193',
                                     'BUSY'])
            else:
                self.busy_fall_in_read = n  # judged at the next sampling edge or CS rise
            return
        if self.boundary == 'busy':
            self.end_read_at_boundary(n)

    def end_read_at_boundary(self, n):
        if self.frame.open and not self.mid_read(n):
            self.close_frame()

    def on_cs_fall(self, n, pins):
        self.cs_low = True
        self.window_ss = n
        self.window_bits = 0
        self.window_during = False
        self.window_kind = 'data' if not self.registers else None
        self.buffer = []
        self.reg_bits = []
        self.idle_level = pins[SCLK]
        self.last_bit = None
        if self.frame.open:
            return                          # CS pulsed per channel word: same read
        if self.have[BUSY]:
            if pins[BUSY] == 1:
                self.window_during = True
            elif self.read_after_pending and self.busy_fall is not None:
                t = self.dur(n - self.busy_fall)
                self.put(self.busy_fall, n, self.out_ann, [ANN_READ, [
                    'Read after conversion: BUSY\u2193\u2192CS\u2193 %s' % t,
                    'After conversion %s' % t, 'After']])
        self.read_after_pending = False

    def on_cs_rise(self, n):
        self.cs_low = False
        if self.window_kind is None and self.buffer:
            self.classify()
        if self.window_kind == 'register':
            if self.reg_bits:
                self.putw(self.reg_bits[0][0], n, [
                    'Register frame cut short: %d of %d SCLKs' % (len(self.reg_bits), FRAME_BITS),
                    'Short frame', 'Frame'])
                self.reg_bits = []
            self.window_bits = 0
            self.last_bit = None
            return
        bf = self.busy_fall_in_read
        if bf is not None:
            if self.last_bit is not None and self.period and bf - self.last_bit <= self.period:
                self.sclk_at_busy_warning(self.last_bit, n)
            elif not self.frame.complete():
                self.busy_mid_read_warning(self.last_bit if self.last_bit is not None else bf, n)
            self.busy_fall_in_read = None
        if self.window_during and self.window_ss is not None:
            self.put(self.window_ss, n, self.out_ann, [ANN_READ, [
                'Read during conversion', 'During conversion', 'During']])
        self.window_during = False
        if self.boundary == 'cs' or self.frame.partial or self.frame.complete() \
                or self.frame.sclks % self.frame.word:
            self.close_frame()
        self.window_bits = 0
        self.last_bit = None

    def sclk_at_busy_warning(self, ss, es):
        bf = self.busy_fall_in_read
        near = min(abs(bf - ss), abs(es - bf))
        self.putw(ss, es, ['SCLK running at the BUSY falling edge (edge %s from it)' % self.dur(near),
                           'SCLK at BUSY\u2193', 'BUSY'])

    def busy_mid_read_warning(self, ss, es):
        self.putw(ss, es, ['BUSY fell during the read (between SCLK bursts)', 'BUSY\u2193 mid-read',
                           'BUSY'])

    def on_data_edge(self, pins):
        """A DOUT edge while CS is low: right after a sampling edge (SCLK still at
        the level that edge left) or after the other edge."""
        if self.window_bits == 0:
            return                      # the first bit, presented at CS fall
        if pins[SCLK] == self.post_sampling:
            self.after_sampling += 1
        else:
            self.after_launch += 1

    def on_sclk(self, n, pins):
        bf = self.busy_fall_in_read
        if bf is not None:
            if self.last_bit is not None and self.period and 2 * (n - self.last_bit) <= 3 * self.period:
                self.sclk_at_busy_warning(self.last_bit, n)
            else:
                self.busy_mid_read_warning(self.last_bit if self.last_bit is not None else bf, n)
            self.busy_fall_in_read = None
        if self.last_bit is not None:
            self.period = n - self.last_bit
        es = n + (self.period or 1)
        self.window_bits += 1
        self.last_bit = n
        bit = (n, es, [pins[p] for p in self.data_pins], pins[DIN], pins[FRSTDATA], pins[DOUTA])
        if self.window_kind == 'data':
            self.data_bit(*bit[:5])
        elif self.window_kind == 'register':
            self.register_bit(bit[0], bit[1], bit[5], bit[3])
        else:
            self.buffer.append(bit)
            if len(self.buffer) == FRAME_BITS:
                self.classify()

    def classify(self):
        """A window's first 16 bits (or all, if fewer) decide: register access
        when a read is pending or DIN carries a command, else conversion data."""
        buf, self.buffer = self.buffer, []
        if self.regs.pending is not None or any(b[3] for b in buf):
            self.window_kind = 'register'
            self.after_sampling = self.after_launch = 0
            if self.frame.open:
                self.close_frame()
            for b in buf:
                self.register_bit(b[0], b[1], b[5], b[3])
        else:
            self.window_kind = 'data'
            for b in buf:
                self.data_bit(*b[:5])

    def register_bit(self, n, es, dout, din):
        self.reg_bits.append((n, es, dout, din))
        if len(self.reg_bits) < FRAME_BITS:
            return
        bits, self.reg_bits = self.reg_bits, []
        din_word = dout_word = 0
        for _, _, do, di in bits:
            din_word = din_word << 1 | (1 if di else 0)
            dout_word = dout_word << 1 | (1 if do else 0)
        for kind, texts in self.regs.frame(din_word, dout_word):
            self.put(bits[0][0], bits[-1][1], self.out_ann,
                     [ANN_REGISTER if kind == 'register' else ANN_WARNING, texts])

    def data_bit(self, n, es, bits, din, frst):
        if self.frame.sclks == 0:           # first SCLK of a read
            self.new_frame()
            self.first_word_done = False
            self.frst_low = None
            self.after_sampling = self.after_launch = 0
            if self.have[FRSTDATA] and not self.frame.partial and frst == 0:
                self.frst_low = n
        fr = self.frame
        for kind, ss, wes, value in fr.bit(bits, n, es):
            if kind == 'frame':
                values, sclks = value
                self.put(ss, wes, self.out_ann, [ANN_FRAME, self.frame_texts(values, sclks)])
                continue
            line, ch, code, status = value
            name = fr.names[ch - 1] if ch else None
            self.put(ss, wes, self.out_ann, [self.result_class[line], result_texts(
                ch, code, fr.range_of(ch) if ch else fr.default_range, fr.bits, status, name)])
            bad = status_mismatch(self.variant, ch, status)
            if bad:
                self.putw(ss, wes, bad)
            if not self.first_word_done:
                self.first_word_done = True
                if self.frst_low is not None:
                    self.putw(ss, wes, ['FRSTDATA low on the first channel', 'FRSTDATA low',
                                        'FRST'])
                    self.frst_low = None

    def frame_texts(self, values, sclks):
        fr = self.frame
        return frame_texts(values, sclks, lambda ch, code: volts(code, fr.range_of(ch), fr.bits),
                           fr.names)

    def close_frame(self):
        fr = self.frame
        if self.frst_low is not None and not self.first_word_done and fr.ss is not None:
            self.putw(fr.ss, fr.es, ['FRSTDATA low on the first channel',
                                     'FRSTDATA low', 'FRST'])
        self.frst_low = None
        ss, es = fr.ss, fr.es
        for kind, ss_, es_, value in fr.close():
            if kind == 'frame':
                values, sclks = value
                self.put(ss_, es_, self.out_ann, [ANN_FRAME, self.frame_texts(values, sclks)])
            else:
                self.put(ss_, es_, self.out_ann, [ANN_NOTE if kind == 'note' else ANN_WARNING, value])
        if ss is not None and self.trap_reads < TRAP_READS:
            trapped = mode_trap(self.after_sampling, self.after_launch)
            self.trap_reads += 1
            self.trap_hits += trapped
            self.trap_verdict = 2 * self.trap_hits > self.trap_reads
        else:
            trapped = ss is not None and self.trap_verdict
        if trapped:
            idle = self.idle_level if self.idle_level in (0, 1) else self.options['cpol']
            edge = 'rising' if self.edge == 'r' else 'falling'
            hint = mode_hint(idle, self.edge)
            self.putw(ss, es, ['DOUT changes right after the sampling (%s) SCLK edge: every bit is '
                               'taken one clock late; set %s' % (edge, hint),
                               'Data change on the sampling edge: set %s' % hint, 'Mode?'])
        self.after_sampling = self.after_launch = 0

    # ------------------------------------------------------------ main loop
    def decode(self):
        self.prepare()
        pins = self.wait()
        if self.dout_warning:
            self.putw(0, 0, [self.dout_warning, 'No DOUTB', 'DOUTB'])
        if pins[CS] == 0:
            self.cs_low = True          # read already under way at capture start
            self.window_ss = 0
            self.window_kind = 'data'
            self.frame.partial = True
        while True:
            if self.cs_low and self.trap_reads < TRAP_READS:
                names, conds = self.names_watch, self.conds_watch
            elif self.cs_low:
                names, conds = self.names_low, self.conds_low
            else:
                names, conds = self.names_high, self.conds_high
            pins = self.wait(conds)
            n = self.samplenum
            hit = {name for name, m in zip(names, self.matched) if m}
            # Same-sample events in causal order.
            if 'convst_rise' in hit:
                self.on_convst_rise(n)
            if 'busy_rise' in hit:
                self.on_busy_rise(n)
            if 'busy_fall' in hit:
                self.on_busy_fall(n, 'sclk' in hit)
            if 'cs_fall' in hit or 'cs_fall_sclk' in hit:
                self.on_cs_fall(n, pins)
                if 'cs_fall_sclk' in hit:
                    self.on_sclk(n, pins)   # a clock edge in the CS fall sample is inside
            elif 'cs_rise' in hit:
                self.on_cs_rise(n)          # a clock edge in the CS rise sample is outside
            else:
                if 'sclk' in hit:
                    self.on_sclk(n, pins)
                if 'data' in hit:
                    self.on_data_edge(pins)
