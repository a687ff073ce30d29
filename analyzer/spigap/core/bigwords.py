"""Words above 64 bits (``--wordsize`` 65..1024), on both engines alike.

Both framers keep a word in a 64-bit register. A longer word is framed as
*chunk* words whose size divides it (the largest divisor <= 64: 38 for 152,
32 for 128, 1 for a prime such as 67), and consecutive chunks of a window are
joined here into the real words in one vectorized pass per batch of windows:

* k = wordsize / chunk chunks make one word; its edge span runs from the first
  edge of its first chunk to the last edge of its last chunk;
* the value concatenates the chunks' bits in the configured bit order (MSB
  first: the first chunk is the most significant; LSB first: the least);
* chunks that do not fill a whole word at a window's end are dropped from the
  words: their bits stay in ``n_bits``, so they are that window's trailing
  bits exactly as for short words (word alignment restarts at every window).

Values are Python ints (numpy object arrays): they do not fit any numpy
integer. JSON and CSV write them as hex strings (README, docs/gaps.md).

Everything else the framer measures is untouched, except two figures taken
"within a word": the SCLK period (median of sampling-edge spacings inside a
word) and a window's shortest half period skip the one spacing across each
chunk boundary inside a word. Both are medians/minima over many spacings of
the same clock, so the effect is nil on a real capture.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from spigap.core.framed import Framed, Words

MAX_CHUNK = 64


def chunk_wordsize(wordsize: int) -> int:
    """The word size the framer runs with: ``wordsize`` itself up to 64 bits,
    else its largest divisor <= 64."""
    if wordsize <= MAX_CHUNK:
        return wordsize
    return max(d for d in range(1, MAX_CHUNK + 1) if wordsize % d == 0)


def join(out: Framed, wordsize: int, lsb_first: bool) -> Framed:
    """Framer output with chunk words -> the same with ``wordsize``-bit words."""
    win, words = out.windows, out.words
    n_chunks = np.asarray(win.n_words, np.int64)
    chunk = chunk_wordsize(wordsize)          # what make_framer ran the framer with
    k = wordsize // chunk
    n_big = n_chunks // k
    owner = np.repeat(np.arange(len(n_chunks)), n_chunks)
    rank = np.arange(len(owner)) - np.repeat(np.cumsum(n_chunks) - n_chunks, n_chunks)
    keep = rank < (n_big * k)[owner]
    first = np.asarray(words.first)[keep].reshape(-1, k)[:, 0]
    last = np.asarray(words.last)[keep].reshape(-1, k)[:, -1]
    order = range(k) if lsb_first else range(k - 1, -1, -1)
    shifts = np.array([chunk * i for i in order], dtype=object)

    def value(v):
        c = np.asarray(v)[keep].astype(object).reshape(-1, k)
        if len(c) == 0:
            return np.empty(0, object)
        return np.left_shift(c, shifts).sum(axis=1).astype(object)

    return Framed(dataclasses.replace(win, n_words=n_big),
                  Words(mosi=value(words.mosi), miso=value(words.miso), first=first, last=last))


class BigWordFramer:
    """A framer running on chunk words that hands out ``wordsize``-bit words."""

    def __init__(self, inner, wordsize: int, lsb_first: bool):
        self.inner = inner
        self.wordsize = wordsize
        self.lsb_first = lsb_first

    def __getattr__(self, name):            # engine, spacing, idle_timeout, clk_outside_cs, ...
        return getattr(self.inner, name)

    def feed(self, block) -> None:
        self.inner.feed(block)

    def take(self, lag: bool = False) -> Framed:
        return join(self.inner.take(lag), self.wordsize, self.lsb_first)

    def finish(self, end_tick: int) -> Framed:
        return join(self.inner.finish(end_tick), self.wordsize, self.lsb_first)
