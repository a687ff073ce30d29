##
## This file is part of spigap.
##
## This program is free software: you can redistribute it and/or modify
## it under the terms of the GNU General Public License as published by
## the Free Software Foundation, either version 3 of the License, or
## (at your option) any later version.
##
"""Which CS-inactive gaps end a message (docs/gaps.md "Messages"): the labels,
the rules the analyzer's message grouping holds a repeating pattern to, and
the pattern of message lengths the decoder labels the gaps by.

Plain Python (no sigrokdecode, no numpy), like every module of the gap rules
(gapdefs.py).
"""

CS_CHANGE = 'cs_change'
CONTEXT_SWITCH = 'context_switch'
AMBIGUOUS = 'cs_change|context_switch'     # which is which cannot be told

MIN_PERIODS = 5             # a repeating pattern must be seen >= 5 times
MAX_PATTERN = 128           # longest repeating pattern of gaps searched directly
MIN_AGREEMENT = 0.9         # balanced share of the gaps (mean over both kinds) that follow the pattern
MIN_PURITY = 0.75           # share of each kind's pattern positions that hold that kind
MIN_CLEAN_AGREEMENT = 0.97  # below: the pattern itself is uncertain (confidence <= 0.5)
MIN_CONSTANT_N_BY_SHARE = 7 # constant N >= 7: "the context switches are the minority" settles roles
IDLE_LEAD_FACTOR = 1.5      # an idle lead this many times the longest gap: the capture starts before a message


def parse_lengths(text):
    """'2+3' (or '2,3') -> [2, 3]: message lengths in transfers, repeating.
    '' -> []. ('+' is the separator to use on sigrok-cli's command line, where
    ',' separates stacked decoders.)"""
    out = []
    for item in str(text).replace(';', ',').replace('+', ',').replace(' ', ',').split(','):
        item = item.strip()
        if not item:
            continue
        n = int(item)
        if n < 1:
            raise ValueError('message lengths must be >= 1')
        out.append(n)
    return out


def is_message_boundary(gap_index, transfers_per_message, first_message_start=0, lengths=None):
    """True when CS-inactive gap ``gap_index`` (the gap between transfer
    ``gap_index`` and ``gap_index + 1``, transfers numbered from 0 in the
    capture) lies between two messages: a context switch, not a cs_change.

    Messages repeat ``lengths`` (e.g. [2, 3]: 2 and 3 transfers alternate);
    without it every message has ``transfers_per_message`` transfers.
    ``first_message_start`` is the number of the first transfer that starts a
    message of the pattern's first length (0: the capture starts with one)."""
    if not lengths:
        n = transfers_per_message
        if not n or n < 1:
            raise ValueError('transfers per message must be >= 1')
        lengths = [n]
    period = sum(lengths)
    pos = (gap_index + 1 - first_message_start) % period
    acc = 0
    for n in lengths:
        acc += n
        if pos == acc % period:
            return True
    return False


def gap_label(gap_index, transfers_per_message, first_message_start=0, lengths=None):
    """``context_switch`` or ``cs_change`` for CS-inactive gap ``gap_index``."""
    if is_message_boundary(gap_index, transfers_per_message, first_message_start, lengths):
        return CONTEXT_SWITCH
    return CS_CHANGE


def first_message_start_from_phase(phase, transfers_per_message):
    """The analyzer's grouping phase (gap i ends a message iff
    (i - phase) % N == 0) as the number of the first transfer that starts a
    message, 0..N-1."""
    return (phase + 1) % transfers_per_message


def message_lengths_from_labels(pattern):
    """Message lengths (in transfers) of one period of a boundary pattern
    (``pattern[i]`` True: gap i ends a message), in their smallest rotation,
    and the transfer (0..len-1) where a message of the first length starts.
    ([False, True] -> ([2], 0): gap 1 ends a message, so transfer 2 = 0 mod 2
    starts one.)"""
    p = len(pattern)
    ends = [i for i, b in enumerate(pattern) if b]
    if not ends:
        return [], 0
    lengths = []
    for k, e in enumerate(ends):
        nxt = ends[(k + 1) % len(ends)]
        d = (nxt - e) % p
        lengths.append(d if d else p)
    # one canonical rotation (the smallest), so the same pattern reads the same
    # wherever the capture starts: [3, 2] -> [2, 3]
    k = min(range(len(lengths)), key=lambda i: lengths[i:] + lengths[:i])
    return lengths[k:] + lengths[:k], (ends[0] + 1 + sum(lengths[:k])) % p


def describe_lengths(lengths):
    """[2, 3] -> 'messages of 2 and 3 transfers alternate';
    [1, 1, 1, 1, 2] -> '4 single transfers then a message of 2'."""
    if not lengths:
        return 'no message boundaries'
    if len(set(lengths)) == 1:
        n = lengths[0]
        return '%d transfer%s per message' % (n, '' if n == 1 else 's')
    runs = []
    for n in lengths:
        if runs and runs[-1][0] == n:
            runs[-1][1] += 1
        else:
            runs.append([n, 1])
    if len(runs) > 1 and runs[0][0] == runs[-1][0]:
        runs[0][1] += runs.pop()[1]
    if len(runs) == 2 and runs[0][1] == 1 and runs[1][1] == 1:
        return 'messages of %d and %d transfers alternate' % (runs[0][0], runs[1][0])
    parts = []
    for n, k in runs:
        if n == 1:
            parts.append('%d single transfer%s' % (k, '' if k == 1 else 's') if k > 1 else 'a single transfer')
        else:
            parts.append('%d message%s of %d' % (k, '' if k == 1 else 's', n) if k > 1 else 'a message of %d' % n)
    return 'repeating: ' + ', then '.join(parts)
