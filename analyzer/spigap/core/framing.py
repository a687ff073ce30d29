"""Streaming SPI framer: edge blocks in, CS windows with words and edge times out.

Rules (docs/gaps.md):

* A *window* (= one transfer) is one CS-active period: from the CS assert edge
  to the CS deassert edge. Without a CS line, a window is a burst of SCLK edges
  separated from the next by more than the idle timeout.
* An SCLK edge in the same sample as a CS edge is judged with the CS level
  *after* that CS edge: inside the window at an assert, outside at a deassert.
  This is the order libsigrokdecode's spi decoder applies (CS first, then the
  clock), so our words match sigrok-cli's.
* Bits are taken on the sampling edge (rising in modes 0/3, falling in 1/2);
  each bit also owns its other clock edge (the one after it for CPHA=0, the
  one before it for CPHA=1). A word's edge span runs from the first to the last
  edge its bits own.
* Word alignment restarts at every window start; bits that do not fill a last
  word are counted as ``trailing_bits``.

All work is vectorized per block; only the edges of a window that is still
open at the end of a block are carried to the next one.
"""

from __future__ import annotations

import numpy as np

from spigap.core.config import SpiConfig
from spigap.core.framed import Framed, Framer, Windows, Words
from spigap.core.gaprules import defs as gapdefs
from spigap.core.spacing import SpacingCounter, idle_timeout_ticks
from spigap.io.base import EdgeBlock

# The same-sample rule is defined in the shared gap rules; this framer (and the
# compiled core, which mirrors it) implements exactly that choice.
if not (gapdefs.CLK_AT_CS_ASSERT_INSIDE and not gapdefs.CLK_AT_CS_DEASSERT_INSIDE):
    raise ImportError("gapdefs changed the same-sample rule: analyzer/spigap/core/framing.py and "
                      "analyzer/spigap/native must be changed with it")

_I64 = np.int64

# Edges framed at a time. A block's edges take some 170 bytes each in this framer's
# temporaries (masks, indices, window ids, levels): a reader's block of 3 M edges (winbond's
# .sr chunks) took 516 MB at once; 256 Ki edges take about 45 MB, at no cost in speed.
FEED_EDGES = 1 << 18


class _Columns:
    """Growing columnar store (list of arrays, concatenated once at the end)."""

    def __init__(self, **dtypes):
        self._dtypes = dtypes
        self._parts = {k: [] for k in dtypes}

    def add(self, **cols):
        for k, v in cols.items():
            self._parts[k].append(np.asarray(v, dtype=self._dtypes[k]))

    def build(self) -> dict[str, np.ndarray]:
        return {k: (np.concatenate(p) if p else np.empty(0, self._dtypes[k])) for k, p in self._parts.items()}


class NumpyFramer:
    """Feed EdgeBlocks (states packed as bit j = request channel j); call ``finish``."""

    engine = "numpy"

    def __init__(self, cfg: SpiConfig, bits: dict[str, int], tick_s: float, wordsize: int | None = None,
                 bus: tuple[int, int, int] = (0, 0, 0)):
        self.cfg = cfg
        self.tick_s = tick_s
        # a shared bus (core/pipeline.py): (every CS line's bits, the other devices' bits, their
        # inactive pattern); the CS changes come out with each take (``last_events``)
        self.ev_mask, self.others_mask, self.others_idle = bus
        self._ev: list[np.ndarray] = []
        self.last_events = np.empty((0, 2), np.int64)
        self.b_clk = bits["clk"]
        self.b_cs = bits.get("cs")
        self.b_mosi = bits.get("mosi")
        self.b_miso = bits.get("miso")
        self.has_cs = self.b_cs is not None
        self.ws = wordsize or cfg.wordsize     # a chunk of cfg.wordsize for words above 64 bits
        self.samp_level = 1 if cfg.sample_on_rising else 0
        self.active_level = 0 if cfg.cs_active_low else 1
        self.prev_state: int | None = None
        self.initial_state: int | None = None
        self.n_windows = 0            # windows opened so far (ids 0..n-1)
        self.n_done = 0               # windows fully processed
        self.word_count = 0
        self.clk_outside_cs = 0
        self.first_clk_outside: int | None = None
        self.spacing = SpacingCounter()    # sampling-edge spacing inside words -> T
        self.min_high: int | None = None
        self.min_low: int | None = None
        # not yet processed windows: starts/clock-ok (opened), ends (closed)
        self._starts = np.empty(0, _I64)
        self._clk_ok = np.empty(0, bool)
        self._partial_start = np.empty(0, bool)
        self._ends = np.empty(0, _I64)
        self._pending: list[tuple] = []   # edge arrays (tick, wid, level, mosi, miso)
        self.win = _Columns(start=_I64, end=_I64, partial_start=bool, partial_end=bool, clk_ok=bool,
                            n_edges=_I64, n_bits=_I64, n_words=_I64, first_edge=_I64, last_edge=_I64,
                            min_half=_I64)
        self.words = _Columns(mosi=np.uint64, miso=np.uint64, first=_I64, last=_I64)
        # CS-less mode
        self.idle_timeout: int | None = None
        self._last_clk_tick: int | None = None
        self._buffered: list[EdgeBlock] = []
        self._buffered_edges = 0

    # ------------------------------------------------------------------ feed
    def feed(self, block: EdgeBlock) -> None:
        if len(block) > FEED_EDGES:        # framed a slice at a time: the same windows (the
            for i in range(0, len(block), FEED_EDGES):     # framer streams), bounded temporaries
                self.feed(EdgeBlock(block.ticks[i:i + FEED_EDGES], block.states[i:i + FEED_EDGES]))
            return
        if len(block) == 0:
            return
        t, s = block.ticks, block.states
        if self.prev_state is None:
            self.initial_state = int(s[0])
            self.prev_state = int(s[0])
            if self.has_cs and self._cs_active(self.initial_state):
                self._open(np.array([0], _I64), np.array([self._clk_ok_at(self.initial_state)]),
                           partial=True)
            t, s = t[1:], s[1:]
            if len(t) == 0:
                return
        if self.has_cs:
            self._feed_cs(t, s)
        else:
            self._feed_nocs(EdgeBlock(t, s))

    def _cs_active(self, state: int) -> bool:
        assert self.b_cs is not None          # only called when the capture has a CS line
        return ((state >> self.b_cs) & 1) == self.active_level

    def _clk_ok_at(self, state) -> bool:
        return ((int(state) >> self.b_clk) & 1) == self.cfg.cpol

    def _open(self, starts, clk_ok, partial=False):
        self._starts = np.concatenate([self._starts, starts])
        self._clk_ok = np.concatenate([self._clk_ok, clk_ok])
        self._partial_start = np.concatenate([self._partial_start, np.full(len(starts), partial)])
        self.n_windows += len(starts)

    def _changes(self, s):
        prev = np.empty_like(s)
        prev[0] = self.prev_state
        prev[1:] = s[:-1]
        self.prev_state = int(s[-1])
        return s ^ prev

    def _feed_cs(self, t, s):
        ch = self._changes(s)
        cs_bit = np.uint32(1 << self.b_cs)
        clk_bit = np.uint32(1 << self.b_clk)
        active = ((s & cs_bit) != 0) == bool(self.active_level)
        cs_ev = (ch & cs_bit) != 0
        asserts = cs_ev & active
        deasserts = cs_ev & ~active
        cum = np.cumsum(asserts, dtype=_I64)
        wid = (self.n_windows - 1) + cum
        a_idx = np.flatnonzero(asserts)
        d_idx = np.flatnonzero(deasserts)
        clk_level = ((s >> np.uint32(self.b_clk)) & 1).astype(np.int8)
        if len(a_idx):
            self._open(t[a_idx], clk_level[a_idx] == self.cfg.cpol)
        if len(d_idx):
            self._ends = np.concatenate([self._ends, t[d_idx]])
        clk_ev = (ch & clk_bit) != 0
        inside = clk_ev & active
        # an SCLK edge in the very sample CS deasserts is simultaneous, not "outside"
        outside = clk_ev & ~active & ~cs_ev
        if self.ev_mask:
            ev = np.flatnonzero(ch & np.uint32(self.ev_mask))
            if len(ev):
                self._ev.append(np.stack([t[ev], s[ev].astype(_I64)], axis=1))
            om = np.uint32(self.others_mask)
            outside &= ((s & om) == self.others_idle) & ((ch & om) == 0)
        n_out = int(np.count_nonzero(outside))
        if n_out:
            if self.first_clk_outside is None:
                self.first_clk_outside = int(t[np.argmax(outside)])
            self.clk_outside_cs += n_out
        e_idx = np.flatnonzero(inside)
        if len(e_idx):
            self._pending.append(self._edge_arrays(t, s, e_idx, wid[e_idx], clk_level))
        if len(self._ends):
            self._process_closed()

    def _edge_arrays(self, t, s, e_idx, wid, clk_level):
        se = s[e_idx]
        mosi = ((se >> np.uint32(self.b_mosi)) & 1).astype(np.uint8) if self.b_mosi is not None else None
        miso = ((se >> np.uint32(self.b_miso)) & 1).astype(np.uint8) if self.b_miso is not None else None
        return (t[e_idx], wid, clk_level[e_idx], mosi, miso)

    # --------------------------------------------------------- CS-less mode
    def _feed_nocs(self, block: EdgeBlock):
        if self.idle_timeout is None:
            self._buffered.append(block)
            self._buffered_edges += len(block)
            if self._buffered_edges >= 256:
                self._set_timeout()          # replays the buffered blocks, this one included
            return
        self._nocs_block(block.ticks, block.states)

    def _set_timeout(self):
        blocks, self._buffered = self._buffered, []
        self.idle_timeout = idle_timeout_ticks(self.cfg, blocks, self.initial_state, self.b_clk, self.tick_s)
        for b in blocks:      # prev_state is still the initial state: nothing was consumed yet
            self._nocs_block(b.ticks, b.states)

    def _nocs_block(self, t, s):
        if len(t) == 0:
            return
        ch = self._changes(s)
        clk_level = ((s >> np.uint32(self.b_clk)) & 1).astype(np.int8)
        e_idx = np.flatnonzero((ch >> np.uint32(self.b_clk)) & 1)
        if len(e_idx) == 0:
            return
        te = t[e_idx]
        prev_t = np.empty_like(te)
        prev_t[0] = self._last_clk_tick if self._last_clk_tick is not None else -(1 << 62)
        prev_t[1:] = te[:-1]
        new = (te - prev_t) > self.idle_timeout
        n_idx = np.flatnonzero(new)
        if len(n_idx):
            # the window before each new one ends at its last edge (the previous edge)
            ends = prev_t[n_idx]
            if self.n_windows == 0:
                ends = ends[1:]
            self._ends = np.concatenate([self._ends, ends])
            first_partial = self.n_windows == 0 and int(te[n_idx[0]]) < self.idle_timeout
            self._open(te[n_idx], np.ones(len(n_idx), bool))
            if first_partial:
                self._partial_start[-len(n_idx)] = True
        wid = (self.n_windows - len(n_idx) - 1) + np.cumsum(new, dtype=_I64)
        self._last_clk_tick = int(te[-1])
        self._pending.append(self._edge_arrays(t, s, e_idx, wid, clk_level))
        if len(self._ends):
            self._process_closed()

    # ------------------------------------------------------------ windows
    def _process_closed(self, final_end: int | None = None):
        n_closed = len(self._ends)
        if final_end is not None and self.n_windows > self.n_done + n_closed:
            n_closed += 1
        if n_closed == 0:
            return
        w0 = self.n_done
        w1 = w0 + n_closed           # exclusive
        if self._pending:
            parts = self._pending
            tick = np.concatenate([p[0] for p in parts])
            wid = np.concatenate([p[1] for p in parts])
            level = np.concatenate([p[2] for p in parts])
            mosi = np.concatenate([p[3] for p in parts]) if self.b_mosi is not None else None
            miso = np.concatenate([p[4] for p in parts]) if self.b_miso is not None else None
            cut = int(np.searchsorted(wid, w1 - 1, side="right"))
            rest = (tick[cut:], wid[cut:], level[cut:],
                    mosi[cut:] if mosi is not None else None, miso[cut:] if miso is not None else None)
            self._pending = [rest] if len(rest[0]) else []
            tick, wid, level = tick[:cut], wid[:cut], level[:cut]
            mosi = mosi[:cut] if mosi is not None else None
            miso = miso[:cut] if miso is not None else None
        else:
            tick = np.empty(0, _I64)
            wid = np.empty(0, _I64)
            level = np.empty(0, np.int8)
            mosi = np.empty(0, np.uint8) if self.b_mosi is not None else None
            miso = np.empty(0, np.uint8) if self.b_miso is not None else None
        starts = self._starts[:n_closed]
        clk_ok = self._clk_ok[:n_closed]
        pstart = self._partial_start[:n_closed]
        ends = self._ends
        partial_end = np.zeros(n_closed, bool)
        if final_end is not None and len(ends) < n_closed:
            if self.has_cs:
                ends = np.concatenate([ends, [final_end]])
            else:
                last = self._last_clk_tick if self._last_clk_tick is not None else final_end
                ends = np.concatenate([ends, [last]])
            partial_end[-1] = self.has_cs or (final_end - ends[-1]) < self.idle_timeout
        self._starts = self._starts[n_closed:]
        self._clk_ok = self._clk_ok[n_closed:]
        self._partial_start = self._partial_start[n_closed:]
        self._ends = np.empty(0, _I64)
        self._windows(w0, starts, ends, clk_ok, pstart, partial_end, tick, wid - w0, level, mosi, miso)
        self.n_done = w1

    def _windows(self, w0, starts, ends, clk_ok, pstart, pend, tick, local, level, mosi, miso):
        nW = len(starts)
        ws = self.ws
        idx = np.arange(nW)
        lo = np.searchsorted(local, idx, side="left")
        hi = np.searchsorted(local, idx, side="right")
        n_edges = hi - lo
        has = n_edges > 0
        first_edge = np.where(has, tick[np.minimum(lo, len(tick) - 1)] if len(tick) else -1, -1)
        last_edge = np.where(has, tick[np.maximum(hi - 1, 0)] if len(tick) else -1, -1)
        samp = level == self.samp_level
        csum = np.cumsum(samp, dtype=_I64)
        before = np.where(lo > 0, csum[np.maximum(lo - 1, 0)] if len(csum) else 0, 0)
        n_bits = np.where(has, (csum[np.maximum(hi - 1, 0)] if len(csum) else 0) - before, 0)
        n_words = n_bits // ws
        count = csum - before[local]                  # sampling edges up to and incl. each edge
        bit = np.where(samp | (self.cfg.cpha == 0), count - 1, count)
        word = np.floor_divide(bit, ws)
        valid = (word >= 0) & (word < n_words[local])
        word_base = np.concatenate([[0], np.cumsum(n_words)[:-1]]) + self.word_count
        gword = word_base[local] + word
        # word edge spans
        vt = tick[valid]
        vg = gword[valid]
        if len(vg):
            brk = np.flatnonzero(np.diff(vg)) + 1
            w_first = vt[np.concatenate([[0], brk])]
            w_last = vt[np.concatenate([brk - 1, [len(vt) - 1]])]
        else:
            w_first = w_last = np.empty(0, _I64)
        # word values: each complete word has exactly `ws` sampling edges
        vs = valid & samp
        shifts = (np.arange(ws, dtype=np.uint64) if self.cfg.lsb_first
                  else np.arange(ws - 1, -1, -1).astype(np.uint64))
        n_w = int(n_words.sum())

        def values(line):
            if line is None:
                return np.zeros(n_w, np.uint64)
            b = line[vs].astype(np.uint64).reshape(-1, ws)
            return (b << shifts).sum(axis=1, dtype=np.uint64)

        mosi_v, miso_v = values(mosi), values(miso)
        # SCLK period from sampling-edge spacing inside words
        st = tick[vs].reshape(-1, ws)
        if ws > 1:
            self.spacing.add(np.diff(st, axis=1).ravel())
        else:
            same = np.diff(local[vs]) == 0
            self.spacing.add(np.diff(tick[vs])[same])
        # half periods: consecutive edges owned by the same word
        min_half = np.full(nW, -1, _I64)
        if len(vt) > 1:
            d = np.diff(vt)
            same_word = np.diff(vg) == 0
            if same_word.any():
                dd = d[same_word]
                lvl = level[valid][1:][same_word]   # level after the second edge
                highs = dd[lvl == 0]                # ends with a falling edge: a high phase
                lows = dd[lvl == 1]
                if len(highs):
                    self.min_high = int(highs.min()) if self.min_high is None else min(self.min_high, int(highs.min()))
                if len(lows):
                    self.min_low = int(lows.min()) if self.min_low is None else min(self.min_low, int(lows.min()))
                wl = local[valid][1:][same_word]
                big = np.iinfo(_I64).max
                tmp = np.full(nW, big, _I64)
                np.minimum.at(tmp, wl, dd)
                min_half = np.where(tmp == big, -1, tmp)
        self.win.add(start=starts, end=ends, partial_start=pstart, partial_end=pend, clk_ok=clk_ok,
                     n_edges=n_edges, n_bits=n_bits, n_words=n_words, first_edge=first_edge,
                     last_edge=last_edge, min_half=min_half)
        self.words.add(mosi=mosi_v, miso=miso_v, first=w_first, last=w_last)
        self.word_count += n_w

    # ------------------------------------------------------------ finish
    def pending_start(self) -> int | None:
        """Start tick of the first window not handed out yet (open, or not framed yet), else None."""
        if self._buffered:
            return int(self._buffered[0].ticks[0])
        return int(self._starts[0]) if len(self._starts) else None

    def period_ticks(self) -> float | None:
        return self.spacing.central_mean()

    def take(self, lag: bool = False) -> Framed:
        """The windows closed so far (with their words), handed out once: a caller
        that takes them as it feeds keeps the framer's memory bounded. ``lag`` is
        for the compiled framer's worker threads (core/cframer.py); this one frames
        as it is fed, so it has nothing in flight and hands out everything."""
        out = Framed(Windows(**self.win.build()), Words(**self.words.build()))
        self.win = _Columns(**self.win._dtypes)
        self.words = _Columns(**self.words._dtypes)
        if self._ev or len(self.last_events):
            self.last_events = np.concatenate(self._ev) if self._ev else np.empty((0, 2), _I64)
            self._ev = []
        return out

    def finish(self, end_tick: int) -> Framed:
        """The windows not taken yet, the one still open closed at ``end_tick``."""
        if not self.has_cs and self.idle_timeout is None:
            self._set_timeout()
        if self.n_windows > self.n_done:
            self._process_closed(final_end=end_tick)
        return self.take()


def make_framer(cfg: SpiConfig, bits: dict[str, int], tick_s: float,
                bus: tuple[int, int, int] = (0, 0, 0)) -> Framer:
    """The compiled framer when the core is available, else this numpy one.

    Words above 64 bits are framed as chunk words and joined (core/bigwords.py),
    the same way on both engines. ``bus``: a shared bus's first device (core/pipeline.py;
    on the compiled core a shared bus's framers are fed together, cframer.CBusFramer)."""
    from spigap import native
    from spigap.core import bigwords

    chunk = bigwords.chunk_wordsize(cfg.wordsize)
    inner: Framer
    if native.library() is not None:
        from spigap.core.cframer import CFramer

        inner = CFramer(cfg, bits, tick_s, wordsize=chunk, bus=bus)
    else:
        inner = NumpyFramer(cfg, bits, tick_s, wordsize=chunk, bus=bus)
    return inner if chunk == cfg.wordsize else bigwords.BigWordFramer(inner, cfg.wordsize, cfg.lsb_first)
