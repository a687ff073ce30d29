"""The framer on the compiled core: same interface and results as core.framing.NumpyFramer.

Python only moves buffers: the per-edge state machine runs in
analyzer/spigap/native/spigap_core.c (definitions in docs/gaps.md). The numpy
Framer is the fallback and the oracle it is tested against.

Parallel framing (captures with a CS line): at a CS assert the framer's state
starts afresh (every per-window and per-word field is reset; only the previous
state and a few capture-wide minima/counters carry on). So in a long edge
block, the entries from its first CS assert to its last one are cut at CS
asserts into "middles", each framed by a fresh framer: one per worker thread
(the compiled call releases the GIL) and one in the calling thread, which
would otherwise wait. The calling thread frames the rest serially: the window
carried in from the previous block up to the first assert, and the window
still open from the last assert on. Outputs are put back in capture order and
the carried fields merged (sums, minima), so the result is the serial
framer's, field for field (tests/test_parallel.py checks it on random
chunkings), and ``take()`` still hands out every window closed in the blocks
fed so far. Without CS a window starts after an idle time measured from the
previous clock edge, so CS-less framing stays serial.

``take(lag=True)`` hands out only what the blocks fed before the latest one
produced, so the middles of the latest block are still being framed by the
workers while the caller measures the previous batch (core/collect.py): the
batches are the same windows, one call later, whatever the threads' timing.
"""

from __future__ import annotations

import collections
import concurrent.futures
import os
import threading
from typing import Callable

import numpy as np

from spigap import native
from spigap.core.config import SpiConfig
from spigap.core.framed import Framed, Windows, Words
from spigap.core.spacing import SpacingCounter, idle_timeout_ticks
from spigap.io.base import EdgeBlock

WIN_CAP = 1 << 14
WORD_CAP = 1 << 16
OVF_CAP = 1 << 16
EV_CAP = 1 << 15           # CS changes per call (a shared bus's first device: core/pipeline.py)
HIST = 1 << 12
BIG = np.iinfo(np.int64).max
PAR_MIN = 1 << 15          # edges in a block before its middle is framed in a worker thread
WORKERS = min(2, os.cpu_count() or 1)
PAR_PENDING = 2 * WORKERS  # middles being framed in workers at once (bounds memory)


class _Out:
    """One framer's output buffers (an out_t) and the rows it produced so far, in order."""

    def __init__(self, lib, ffi, win_cap=WIN_CAP, word_cap=WORD_CAP, ovf_cap=OVF_CAP, ev_cap=EV_CAP):
        self.win = np.empty((win_cap, lib.WIN_COLS), np.int64)
        self.word = np.empty((word_cap, 4), np.int64)
        self.hist = np.zeros(HIST, np.int64)
        self.ovf = np.empty(ovf_cap, np.int64)
        self.ev = np.empty((ev_cap, 2), np.int64)
        p = native.ptr
        self.out = ffi.new("out_t *", {"win": p(self.win), "win_cap": win_cap, "word": p(self.word),
                                       "word_cap": word_cap, "hist": p(self.hist), "hist_size": HIST,
                                       "ovf": p(self.ovf), "ovf_cap": ovf_cap, "ev": p(self.ev), "ev_cap": ev_cap})
        self.win_parts: list[np.ndarray] = []
        self.word_parts: list[np.ndarray] = []
        self.ovf_parts: list[np.ndarray] = []
        self.ev_parts: list[np.ndarray] = []

    def flush(self):
        o = self.out
        if o.n_win:
            self.win_parts.append(self.win[:o.n_win].copy())
            o.n_win = 0
        if o.n_word:
            self.word_parts.append(self.word[:o.n_word].copy())
            o.n_word = 0
        if o.n_ovf:
            self.ovf_parts.append(self.ovf[:o.n_ovf].copy())
            o.n_ovf = 0
        if o.n_ev:
            self.ev_parts.append(self.ev[:o.n_ev].copy())
            o.n_ev = 0

    def rows(self):
        """(window rows, word rows, CS-change rows) produced since the last call, handed over."""
        self.flush()
        w, wd, ev = self.win_parts, self.word_parts, self.ev_parts
        self.win_parts, self.word_parts, self.ev_parts = [], [], []
        return w, wd, ev


def _frame_all(lib, f, o: _Out, t: np.ndarray, s: np.ndarray) -> None:
    done, n = 0, len(t)
    while done < n:
        done += lib.spigap_frame(f, o.out, native.ptr(t[done:]), native.ptr(s[done:], "uint32_t *"), n - done)
        o.flush()


_local = threading.local()      # each thread's output buffers for middles, reused


def _cuts(find: Callable[[int, int], int], n: int) -> list[int] | None:
    """Where a block of ``n`` entries is cut for the framing workers: ``find(i, step)`` is
    the first cut point from entry ``i`` on in direction ``step`` (-1 if none; a CS
    assert, or for a shared bus an assert while no CS is asserted). [first, last) is cut
    into one middle per worker and one that the calling thread frames itself instead
    of waiting; None when the block holds fewer than two cut points."""
    first, last = find(0, 1), find(n - 1, -1)
    if not 0 <= first < last:
        return None
    cuts = [first]
    for k in range(1, WORKERS + 1):
        c = find(first + k * (last - first) // (WORKERS + 1), 1)
        if cuts[-1] < c < last:
            cuts.append(c)
    cuts.append(last)
    return cuts


def _frame_middle(lib, ffi, f, t: np.ndarray, s: np.ndarray):
    """A worker thread's job: frame entries that start at a CS assert and end
    before another one with the fresh framer ``f``; every window closes inside.
    Returns the rows (copied out of this thread's buffers), the spacing
    histogram's non-zero counts and the counters and minima to merge."""
    o = getattr(_local, "out", None)
    if o is None:
        o = _local.out = _Out(lib, ffi)
    _frame_all(lib, f, o, t, s)
    return _middle_result(f, o)


def _middle_result(f, o: _Out):
    """A middle's rows and figures (out of the thread's buffers ``o``, which are reset)."""
    nz = np.flatnonzero(o.hist)
    counts = o.hist[nz].copy()
    o.hist[nz] = 0
    win, word, ovf, ev = o.win_parts, o.word_parts, o.ovf_parts, o.ev_parts
    o.win_parts, o.word_parts, o.ovf_parts, o.ev_parts = [], [], [], []
    return (win, word, ovf, (nz, counts),
            (int(f.clk_outside), int(f.first_clk_outside), int(f.min_high), int(f.min_low)), ev)


class CFramer:
    engine = "c"
    par_min = PAR_MIN
    frame_here = True

    def __init__(self, cfg: SpiConfig, bits: dict[str, int], tick_s: float, wordsize: int | None = None,
                 bus: tuple[int, int, int] = (0, 0, 0)):
        self.lib = native.library()
        self.ffi = native.ffi()
        self.cfg = cfg
        self.tick_s = tick_s
        self.b_clk = bits["clk"]
        self.has_cs = "cs" in bits
        f = self.ffi.new("framer_t *")
        f.b_clk = bits["clk"]
        f.b_cs = bits.get("cs", -1)
        f.b_mosi = bits.get("mosi", -1)
        f.b_miso = bits.get("miso", -1)
        f.ws = wordsize or cfg.wordsize      # a chunk of cfg.wordsize for words above 64 bits
        f.cpha = cfg.cpha
        f.cpol = cfg.cpol
        f.samp_level = 1 if cfg.sample_on_rising else 0
        f.active_level = 0 if cfg.cs_active_low else 1
        f.lsb_first = int(cfg.lsb_first)
        f.has_cs = int(self.has_cs)
        # a shared bus (core/pipeline.py): (every CS line's bits, the other devices' bits, their
        # inactive pattern); the CS changes come out with each take (``last_events``)
        f.ev_mask, f.others_mask, f.others_idle = bus
        self.last_events = np.empty((0, 2), np.int64)
        self.f = f
        self.o = _Out(self.lib, self.ffi)
        self.hist = self.o.hist
        # output in capture order: (window rows, word rows) of the serial framer, or
        # futures of middles framed in worker threads
        self._segments: list = []
        self._mark = 0                             # _segments[:_mark]: from blocks before the latest
        self._word_rest: list[np.ndarray] = []     # words of the window still open at the last take()
        self._inflight: collections.deque = collections.deque()
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self.n_parallel = 0                        # middles framed in worker threads
        # what the middles add to the capture-wide counters and minima (merged at take())
        self._m_clk_outside = 0
        self._m_first_outside = BIG
        self._m_min_high = BIG
        self._m_min_low = BIG
        self.spacing = SpacingCounter()
        self.initial_state: int | None = None
        self.idle_timeout: int | None = None
        self._buffered: list[EdgeBlock] = []
        self._buffered_edges = 0

    # the numpy Framer's public attributes
    @property
    def clk_outside_cs(self) -> int:
        return int(self.f.clk_outside) + self._m_clk_outside

    @property
    def first_clk_outside(self) -> int | None:
        v = min(int(self.f.first_clk_outside) if self.f.first_clk_outside >= 0 else BIG, self._m_first_outside)
        return None if v == BIG else v

    @property
    def min_high(self) -> int | None:
        v = min(int(self.f.min_high), self._m_min_high)
        return None if v == BIG else v

    @property
    def min_low(self) -> int | None:
        v = min(int(self.f.min_low), self._m_min_low)
        return None if v == BIG else v

    def feed(self, block: EdgeBlock) -> None:
        if len(block) == 0:
            return
        t, s = self._open_block(block)
        if len(t) == 0:
            return
        if not self.has_cs and self.idle_timeout is None:
            self._buffered.append(EdgeBlock(t, s))
            self._buffered_edges += len(t)
            if self._buffered_edges >= 256:
                self._start_nocs()
            return
        self._run(t, s)

    def _open_block(self, block: EdgeBlock) -> tuple[np.ndarray, np.ndarray]:
        """A new block's entries to frame (its first one is the initial state of the capture's
        first block); what the serial framer produced so far belongs to the blocks before it."""
        self._segments.append(self.o.rows())
        self._mark = len(self._segments)
        t, s = block.ticks, block.states
        if self.initial_state is None:
            self.initial_state = int(s[0])
            self.lib.spigap_frame_init(self.f, self.initial_state)
            t, s = t[1:], s[1:]
        return t, s

    def _start_nocs(self):
        blocks, self._buffered = self._buffered, []
        self.idle_timeout = idle_timeout_ticks(self.cfg, blocks, self.initial_state, self.b_clk, self.tick_s)
        self.f.idle_timeout = self.idle_timeout
        for b in blocks:
            self._run(b.ticks, b.states)

    def _run(self, t, s):
        t = np.ascontiguousarray(t, np.int64)
        s = np.ascontiguousarray(s, np.uint32)
        n = len(t)
        if self.has_cs and n >= self.par_min and WORKERS > 1:
            f, sp = self.f, native.ptr(s, "uint32_t *")
            prev0 = int(f.prev)

            def assert_at(i, step):
                return int(self.lib.spigap_next_assert(sp, n, prev0, f.b_cs, f.active_level, i, step))

            cuts = _cuts(assert_at, n)
            if cuts:
                first, last = cuts[0], cuts[-1]
                self._serial(t[:first], s[:first])          # closes the window carried in
                assert not f.open                           # CS was inactive before the assert
                self._segments.append(self.o.rows())
                if self._pool is None:
                    self._pool = concurrent.futures.ThreadPoolExecutor(WORKERS, thread_name_prefix="spigap-frame")
                jobs = []
                for a, b in zip(cuts[:-1], cuts[1:]):
                    mid = self.ffi.new("framer_t *")
                    self.ffi.memmove(mid, f, self.ffi.sizeof("framer_t"))   # the configuration
                    self.lib.spigap_frame_init(mid, int(s[a - 1]) if a else prev0)
                    jobs.append((mid, t[a:b], s[a:b]))
                mine = jobs.pop() if len(jobs) > 1 and self.frame_here else None     # the last, framed here
                for job in jobs:
                    fut = self._pool.submit(_frame_middle, self.lib, self.ffi, *job)
                    self._segments.append(fut)
                    self._inflight.append(fut)
                    self.n_parallel += 1
                if mine is not None:
                    done: concurrent.futures.Future = concurrent.futures.Future()
                    done.set_result(_frame_middle(self.lib, self.ffi, *mine))
                    self._segments.append(done)
                while len(self._inflight) > PAR_PENDING:
                    self._inflight.popleft().result()
                # the serial framer goes on at the last assert, as if it had framed the middles
                f.prev = int(s[last - 1])
                self._serial(t[last:], s[last:])
                return
        self._serial(t, s)

    def _serial(self, t, s):
        _frame_all(self.lib, self.f, self.o, t, s)
        self._spacing_in()

    def _spacing_in(self) -> None:
        """The serial framer's spacing overflow rows so far, into the spacing counter."""
        if self.o.ovf_parts:
            for part in self.o.ovf_parts:
                self.spacing.add(part)
            self.o.ovf_parts = []

    def pending_start(self) -> int | None:
        """Start tick of the first window not handed out yet (open, or not framed yet), else None."""
        if self._buffered:
            return int(self._buffered[0].ticks[0])
        return int(self.f.w_start) if self.f.open else None

    def _collect(self, lag: bool = False) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
        """Every output row so far (``lag``: of the blocks before the latest), in capture
        order; the middles' counters merged."""
        if lag:
            segments, self._segments = self._segments[:self._mark], self._segments[self._mark:]
            kept = {id(x) for x in self._segments}
            self._inflight = collections.deque(x for x in self._inflight if id(x) in kept)
        else:
            self._segments.append(self.o.rows())
            segments, self._segments = self._segments, []
            self._inflight.clear()
        self._mark = 0
        self._spacing_in()
        wins: list[np.ndarray] = []
        words: list[np.ndarray] = list(self._word_rest)
        evs: list[np.ndarray] = []
        for seg in segments:
            if not isinstance(seg, tuple):                      # a middle (a future, or _Pick)
                win_parts, word_parts, ovf_parts, (nz, counts), (clk_out, first_out, mh, ml), ev_parts = seg.result()
                self._m_clk_outside += clk_out
                if first_out >= 0:
                    self._m_first_outside = min(self._m_first_outside, first_out)
                self._m_min_high = min(self._m_min_high, mh)
                self._m_min_low = min(self._m_min_low, ml)
                self.hist[nz] += counts
                for part in ovf_parts:
                    self.spacing.add(part)
                wins += win_parts
                words += word_parts
                evs += ev_parts
            else:
                wins += seg[0]
                words += seg[1]
                evs += seg[2]
        return wins, words, evs

    def period_ticks(self) -> float | None:
        return self.spacing.central_mean()

    def take(self, lag: bool = False) -> Framed:
        """The windows closed so far and their words, handed out once (the words
        of the window still open stay): keeps memory bounded when called as one feeds.
        ``lag``: only those of the blocks fed before the latest one (its middles may
        still be in the workers); ``finish()`` hands out the rest."""
        if lag:
            # the caller measures batches while the workers frame: no middle is framed here
            self.frame_here = False
        wins, words, evs = self._collect(lag)
        if evs or len(self.last_events):
            self.last_events = np.concatenate(evs) if evs else np.empty((0, 2), np.int64)
        nz = np.flatnonzero(self.hist)
        if len(nz):
            self.spacing.add_counts(nz.astype(np.int64), self.hist[nz])
            self.hist[:] = 0
        # one copy of the results at a time: concatenate, drop the parts, hand out column views
        w = np.concatenate(wins) if wins else np.zeros((0, self.lib.WIN_COLS), np.int64)
        del wins
        wd = np.concatenate(words) if words else np.zeros((0, 4), np.int64)
        del words
        n_own = int(w[:, 7].sum())
        self._word_rest = [wd[n_own:]] if len(wd) > n_own else []
        wd = wd[:n_own]
        windows = Windows(
            start=w[:, 0], end=w[:, 1], partial_start=w[:, 2] != 0, partial_end=w[:, 3] != 0,
            clk_ok=w[:, 4] != 0, n_edges=w[:, 5], n_bits=w[:, 6], n_words=w[:, 7], first_edge=w[:, 8],
            last_edge=w[:, 9], min_half=w[:, 10])
        words_out = Words(mosi=wd[:, 0].view(np.uint64), miso=wd[:, 1].view(np.uint64), first=wd[:, 2],
                          last=wd[:, 3])
        return Framed(windows, words_out)

    def finish(self, end_tick: int) -> Framed:
        """The windows not taken yet, the one still open closed at ``end_tick``."""
        if self.initial_state is None:
            self.initial_state = 0
            self.lib.spigap_frame_init(self.f, 0)
        if not self.has_cs and self.idle_timeout is None:
            self._start_nocs()
        self.lib.spigap_frame_finish(self.f, self.o.out, int(end_tick))
        out = self.take()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        return out


class _Pick:
    """Device k's part of a middle framed for every device of a shared bus (a future's result)."""

    def __init__(self, fut, k: int):
        self.fut, self.k = fut, k

    def result(self):
        return self.fut.result()[self.k]


def _frame_bus_middle(lib, ffi, mids: list, t: np.ndarray, s: np.ndarray) -> list:
    """``_frame_middle`` for every device of a shared bus at once (fresh framers ``mids``)."""
    outs = getattr(_local, "bus_out", None)
    if outs is None or len(outs) < len(mids):
        outs = _local.bus_out = [_Out(lib, ffi) for _ in mids]
    outs = outs[:len(mids)]
    _frame_bus_all(lib, ffi.new("framer_t *[]", mids), ffi.new("out_t *[]", [o.out for o in outs]), outs, t, s)
    return [_middle_result(f, o) for f, o in zip(mids, outs)]


def _frame_bus_all(lib, fs, os_, outs: list[_Out], t: np.ndarray, s: np.ndarray) -> None:
    done, n = 0, len(t)
    while done < n:
        done += lib.spigap_frame_bus(fs, os_, len(outs), native.ptr(t[done:]), native.ptr(s[done:], "uint32_t *"),
                                     n - done)
        for o in outs:
            o.flush()


class CBusFramer:
    """Every device's framer of a shared bus (core/pipeline.py) fed in one pass over each block
    (spigap_frame_bus in analyzer/spigap/native/spigap_core.c): each CFramer gets the windows, words
    and figures it gets when fed the whole stream on its own, and hands them out as before
    (``take``, ``finish``). The first framer writes the CS changes and counts the SCLK
    edges while no CS is asserted. Long blocks are cut, as in CFramer, into middles
    framed in worker threads by fresh framers, here at entries where a CS line goes
    active while none was: every device's window is closed there."""

    par_min = PAR_MIN

    def __init__(self, framers: list[CFramer]):
        assert framers and all(f.has_cs for f in framers)
        self.framers = framers
        self.lib, self.ffi = framers[0].lib, framers[0].ffi
        self.fs = self.ffi.new("framer_t *[]", [f.f for f in framers])
        self.os = self.ffi.new("out_t *[]", [f.o.out for f in framers])
        self.cs_mask = sum(1 << int(f.f.b_cs) for f in framers)
        self.cs_idle = sum((1 - int(f.f.active_level)) << int(f.f.b_cs) for f in framers)
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._inflight: collections.deque = collections.deque()
        self.n_parallel = 0

    def feed(self, block: EdgeBlock) -> None:
        if len(block) == 0:
            return
        for f in self.framers:
            t, s = f._open_block(block)
        if len(t):
            self._run(t, s)

    def _serial(self, t, s) -> None:
        _frame_bus_all(self.lib, self.fs, self.os, [f.o for f in self.framers], t, s)
        for f in self.framers:
            f._spacing_in()

    def _run(self, t, s) -> None:
        t = np.ascontiguousarray(t, np.int64)
        s = np.ascontiguousarray(s, np.uint32)
        n, framers = len(t), self.framers
        if n >= self.par_min and WORKERS > 1:
            sp = native.ptr(s, "uint32_t *")
            prev0 = int(framers[0].f.prev)

            def free_at(i, step):
                return int(self.lib.spigap_next_free_assert(sp, n, prev0, self.cs_mask, self.cs_idle, i, step))

            cuts = _cuts(free_at, n)
            if cuts:
                first, last = cuts[0], cuts[-1]
                self._serial(t[:first], s[:first])          # closes the windows carried in
                for f in framers:
                    assert not f.f.open                     # no CS was asserted before the cut
                    f._segments.append(f.o.rows())
                if self._pool is None:
                    self._pool = concurrent.futures.ThreadPoolExecutor(WORKERS, thread_name_prefix="spigap-frame")
                jobs = []
                size = self.ffi.sizeof("framer_t")
                for a, b in zip(cuts[:-1], cuts[1:]):
                    mids = []
                    for f in framers:
                        mid = self.ffi.new("framer_t *")
                        self.ffi.memmove(mid, f.f, size)                 # the configuration
                        self.lib.spigap_frame_init(mid, int(s[a - 1]) if a else prev0)
                        mids.append(mid)
                    jobs.append((mids, t[a:b], s[a:b]))
                here = all(f.frame_here for f in framers)
                mine = jobs.pop() if len(jobs) > 1 and here else None    # the last, framed here
                for job in jobs:
                    fut = self._pool.submit(_frame_bus_middle, self.lib, self.ffi, *job)
                    for k, f in enumerate(framers):
                        f._segments.append(_Pick(fut, k))
                    self._inflight.append(fut)
                    self.n_parallel += 1
                if mine is not None:
                    res = _frame_bus_middle(self.lib, self.ffi, *mine)
                    for k, f in enumerate(framers):
                        done: concurrent.futures.Future = concurrent.futures.Future()
                        done.set_result(res[k])
                        f._segments.append(done)
                while len(self._inflight) > PAR_PENDING:
                    self._inflight.popleft().result()
                for f in framers:                           # on at the last cut, as if they framed the middles
                    f.f.prev = int(s[last - 1])
                self._serial(t[last:], s[last:])
                return
        self._serial(t, s)

    def close(self) -> None:
        """After every framer's ``finish``: the worker threads end."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
