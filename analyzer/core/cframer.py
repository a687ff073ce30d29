"""The framer on the compiled core: same interface and results as core.framing.Framer.

Python only moves buffers: the per-edge state machine runs in
analyzer/native/spigap_core.c (definitions in docs/gaps.md). The numpy
Framer is the fallback and the oracle it is tested against.
"""

from __future__ import annotations

import numpy as np

from analyzer import native
from analyzer.core.config import SpiConfig
from analyzer.core.framing import SpacingCounter, idle_timeout_ticks
from analyzer.io.base import EdgeBlock

WIN_CAP = 1 << 14
WORD_CAP = 1 << 16
OVF_CAP = 1 << 16
HIST = 1 << 12
BIG = np.iinfo(np.int64).max


class CFramer:
    engine = "c"

    def __init__(self, cfg: SpiConfig, bits: dict[str, int], tick_s: float, wordsize: int | None = None):
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
        self.f = f
        self.win = np.zeros((WIN_CAP, self.lib.WIN_COLS), np.int64)
        self.word = np.zeros((WORD_CAP, 4), np.int64)
        self.hist = np.zeros(HIST, np.int64)
        self.ovf = np.zeros(OVF_CAP, np.int64)
        p = native.ptr
        self.out = self.ffi.new("out_t *", {"win": p(self.win), "win_cap": WIN_CAP, "word": p(self.word),
                                            "word_cap": WORD_CAP, "hist": p(self.hist), "hist_size": HIST,
                                            "ovf": p(self.ovf), "ovf_cap": OVF_CAP})
        self._win_parts: list[np.ndarray] = []
        self._word_parts: list[np.ndarray] = []
        self.spacing = SpacingCounter()
        self.initial_state: int | None = None
        self.idle_timeout: int | None = None
        self._buffered: list[EdgeBlock] = []
        self._buffered_edges = 0

    # the numpy Framer's public attributes
    @property
    def clk_outside_cs(self) -> int:
        return int(self.f.clk_outside)

    @property
    def first_clk_outside(self) -> int | None:
        return None if self.f.first_clk_outside < 0 else int(self.f.first_clk_outside)

    @property
    def min_high(self) -> int | None:
        return None if self.f.min_high == BIG else int(self.f.min_high)

    @property
    def min_low(self) -> int | None:
        return None if self.f.min_low == BIG else int(self.f.min_low)

    def feed(self, block: EdgeBlock) -> None:
        if len(block) == 0:
            return
        t, s = block.ticks, block.states
        if self.initial_state is None:
            self.initial_state = int(s[0])
            self.lib.spigap_frame_init(self.f, self.initial_state)
            t, s = t[1:], s[1:]
            if len(t) == 0:
                return
        if not self.has_cs and self.idle_timeout is None:
            self._buffered.append(EdgeBlock(t, s))
            self._buffered_edges += len(t)
            if self._buffered_edges >= 256:
                self._start_nocs()
            return
        self._run(t, s)

    def _start_nocs(self):
        blocks, self._buffered = self._buffered, []
        self.idle_timeout = idle_timeout_ticks(self.cfg, blocks, self.initial_state, self.b_clk, self.tick_s)
        self.f.idle_timeout = self.idle_timeout
        for b in blocks:
            self._run(b.ticks, b.states)

    def _run(self, t, s):
        t = np.ascontiguousarray(t, np.int64)
        s = np.ascontiguousarray(s, np.uint32)
        done, n = 0, len(t)
        while done < n:
            used = self.lib.spigap_frame(self.f, self.out,
                                         native.ptr(t[done:]), native.ptr(s[done:], "uint32_t *"), n - done)
            done += used
            self._flush()

    def _flush(self):
        o = self.out
        if o.n_win:
            self._win_parts.append(self.win[:o.n_win].copy())
            o.n_win = 0
        if o.n_word:
            self._word_parts.append(self.word[:o.n_word].copy())
            o.n_word = 0
        if o.n_ovf:
            self.spacing.add(self.ovf[:o.n_ovf].copy())
            o.n_ovf = 0

    def pending_start(self) -> int | None:
        """Start tick of the first window not handed out yet (open, or not framed yet), else None."""
        if self._buffered:
            return int(self._buffered[0].ticks[0])
        return int(self.f.w_start) if self.f.open else None

    def take(self) -> dict:
        """The windows closed so far and their words, handed out once (the words
        of the window still open stay): keeps memory bounded when called as one feeds."""
        self._flush()
        nz = np.flatnonzero(self.hist)
        if len(nz):
            self.spacing.add_counts(nz.astype(np.int64), self.hist[nz])
            self.hist[:] = 0
        # one copy of the results at a time: concatenate, drop the parts, hand out column views
        w = np.concatenate(self._win_parts) if self._win_parts else np.zeros((0, self.lib.WIN_COLS), np.int64)
        self._win_parts = []
        wd = np.concatenate(self._word_parts) if self._word_parts else np.zeros((0, 4), np.int64)
        n_own = int(w[:, 7].sum())
        self._word_parts = [wd[n_own:]] if len(wd) > n_own else []
        wd = wd[:n_own]
        windows = {
            "start": w[:, 0], "end": w[:, 1], "partial_start": w[:, 2] != 0,
            "partial_end": w[:, 3] != 0, "clk_ok": w[:, 4] != 0, "n_edges": w[:, 5],
            "n_bits": w[:, 6], "n_words": w[:, 7], "first_edge": w[:, 8],
            "last_edge": w[:, 9], "min_half": w[:, 10],
        }
        words = {"mosi": wd[:, 0].view(np.uint64), "miso": wd[:, 1].view(np.uint64),
                 "first": wd[:, 2], "last": wd[:, 3]}
        return {"windows": windows, "words": words}

    def finish(self, end_tick: int) -> dict:
        """The windows not taken yet, the one still open closed at ``end_tick``."""
        if self.initial_state is None:
            self.initial_state = 0
            self.lib.spigap_frame_init(self.f, 0)
        if not self.has_cs and self.idle_timeout is None:
            self._start_nocs()
        self.lib.spigap_frame_finish(self.f, self.out, int(end_tick))
        return self.take()
