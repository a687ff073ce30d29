##
## This file is part of spigap.
##
## This program is free software: you can redistribute it and/or modify
## it under the terms of the GNU General Public License as published by
## the Free Software Foundation, either version 3 of the License, or
## (at your option) any later version.
##

# sigrok glue only: collect the bytes of one CS window, hand them to the
# plain module (mcp251xfd.py, shared with spigap's analyzer) and put its
# annotations at the sample positions of those bytes.

import sigrokdecode as srd
from .lists import CAN_MODES, CHIPS
from .mcp251xfd import State, decode_transfer

CLASSES = ('instruction', 'length', 'crc', 'register', 'ram', 'field',
           'frame', 'warning', 'transaction')
(ANN_INSTRUCTION, ANN_LENGTH, ANN_CRC, ANN_REGISTER, ANN_RAM, ANN_FIELD,
 ANN_FRAME, ANN_WARNING, ANN_TRANSACTION) = range(len(CLASSES))
CLASS_INDEX = {c: i for i, c in enumerate(CLASSES)}


class Decoder(srd.Decoder):
    api_version = 3
    id = 'mcp2518fd'
    name = 'MCP2518FD'
    longname = 'Microchip MCP2517FD/MCP2518FD/MCP251863'
    desc = 'Microchip MCP251xFD CAN FD controller SPI protocol.'
    license = 'gplv3+'
    inputs = ['spi']
    outputs = []
    tags = ['Automotive', 'IC']
    options = (
        {'id': 'chip', 'desc': 'Chip (the SEQ bits its TEF entries keep)',
         'default': 'mcp2518fd', 'values': CHIPS},
        {'id': 'can_mode', 'desc': 'Message objects if FIFO setup unseen',
         'default': 'auto', 'values': CAN_MODES},
    )
    annotations = (
        ('instruction', 'Instruction'),
        ('length', 'LEN byte'),
        ('crc', 'CRC'),
        ('register', 'Register value'),
        ('ram', 'RAM word'),
        ('field', 'Field'),
        ('frame', 'CAN frame'),
        ('warning', 'Warning'),
        ('transaction', 'Transaction summary'),
    )
    annotation_rows = (
        ('transactions', 'Transactions', (ANN_TRANSACTION,)),
        ('instructions', 'Instructions', (ANN_INSTRUCTION, ANN_LENGTH, ANN_CRC)),
        ('registers', 'Registers', (ANN_REGISTER, ANN_RAM)),
        ('fields', 'Fields', (ANN_FIELD,)),
        ('frames', 'CAN frames', (ANN_FRAME,)),
        ('warnings', 'Warnings', (ANN_WARNING,)),
    )

    def __init__(self):
        self.reset()

    def reset(self):
        self.words = []          # (ss, es, mosi, miso) of the open CS window
        self.state = None
        self.no_cs = False
        self.no_cs_warned = False
        self.wide_warned = False

    def start(self):
        self.out_ann = self.register(srd.OUTPUT_ANN)
        self.state = State(self.options['chip'], self.options['can_mode'])

    def chip_state(self):
        if self.state is None:      # reset() without a new start()
            self.state = State(self.options['chip'], self.options['can_mode'])
        return self.state

    def decode(self, ss, es, data):
        ptype, mosi, miso = data
        if ptype == 'CS-CHANGE':
            if mosi is None and miso is None:
                self.no_cs = True   # spi sends this once when CS is not mapped
                return
            self.flush()
        elif ptype == 'DATA':
            if self.no_cs:
                if not self.no_cs_warned:
                    self.no_cs_warned = True
                    self.put(ss, es, self.out_ann, [ANN_WARNING, [
                        'No CS# channel: cannot find instruction starts',
                        'No CS#']])
                return
            self.words.append((ss, es, mosi, miso))

    def flush(self):
        words, self.words = self.words, []
        if not words:
            return
        ss0, es1 = words[0][0], words[-1][1]
        if words[0][2] is None:
            self.put(ss0, es1, self.out_ann, [ANN_WARNING, [
                'MOSI not captured: cannot decode instructions', 'No MOSI']])
            return
        if any(w[2] > 0xFF or (w[3] is not None and w[3] > 0xFF) for w in words):
            if not self.wide_warned:
                self.wide_warned = True
                self.put(ss0, es1, self.out_ann, [ANN_WARNING, [
                    'Words wider than 8 bits: set spi wordsize=8',
                    'wordsize']])
            return
        mosi = [w[2] for w in words]
        miso = None if words[0][3] is None else [w[3] for w in words]
        t = decode_transfer(mosi, miso, self.chip_state())
        for a in t.anns:
            self.put(words[a.first][0], words[a.last][1], self.out_ann,
                     [CLASS_INDEX[a.cls], a.texts])
