"""The compiled core and the numpy implementation give identical analyses.

Two independent implementations of the same definitions (docs/gaps.md):
every field of every transfer and word must be equal, on synthesized
captures that stress the edge cases and on all real captures.
"""

from __future__ import annotations

import numpy as np
import pytest

from spigap import native
from test_real_captures import CAPTURES, real
from util import analyze, synth

pytestmark = pytest.mark.skipif(native.library() is None, reason=f"compiled core unavailable: {native.status()}")

FIELDS = ("start", "end", "partial_start", "partial_end", "n_bits", "n_words", "first_edge", "last_edge",
          "clk_ok", "min_half", "cs_setup", "cs_hold", "duration", "gap_before", "gap_kind", "message",
          "word_off", "mosi", "miso", "word_first", "word_last", "pair_gap", "pair_inter_transfer")


def both(path, **cfg):
    with native.use_engine("numpy"):
        a = analyze(path, **cfg)
    b = analyze(path, **cfg)
    assert a.engine == "numpy" and b.engine == "c"
    for f in FIELDS:
        x, y = getattr(a, f), getattr(b, f)
        assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), f
    for f in ("period_ticks", "inter_transfer_threshold", "idle_timeout_ticks", "clk_outside_cs",
              "min_high", "min_low", "grouping", "warnings"):
        assert getattr(a, f) == getattr(b, f), f
    return b


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
@pytest.mark.parametrize("ws,order", [(8, "msb"), (12, "lsb"), (1, "msb"), (64, "msb"), (7, "lsb")])
def test_synthetic(tmp_path, mode, ws, order):
    sc, tl, path = synth(tmp_path, mode=mode, wordsize=ws, bitorder=order, words_per_transfer=3, messages=25,
                         transfers_per_message=5, mosi="random", miso="random", sigma="50ns",
                         stall_probability=0.05, seed=ws + mode)
    both(path, cpol=mode >> 1, cpha=mode & 1, wordsize=ws, lsb_first=order == "lsb")


def test_wrong_wordsize_and_mode_leave_trailing_bits_and_strays(tmp_path):
    sc, tl, path = synth(tmp_path, mode=1, words_per_transfer=3, messages=20, seed=5)
    for cfg in (dict(wordsize=7), dict(wordsize=10, cpha=0), dict(cpol=1, cpha=0), dict(cpol=1, cpha=1, wordsize=5)):
        b = both(path, **cfg)
        assert b.n == 20


def test_partial_and_cs_less(tmp_path):
    sc, tl, path = synth(tmp_path, messages=20, seed=2)
    tr = tl.truth()
    cut = dict(crop_start=(tr["cs_assert"][0] + tr["cs_deassert"][0]) / 2,
               crop_end=(tr["cs_assert"][-1] + tr["cs_deassert"][-1]) / 2)
    sc2, tl2, p2 = synth(tmp_path, name="cut.sr", messages=20, seed=2, **cut)
    both(p2)
    sc3, tl3, p3 = synth(tmp_path, name="nocs.sr", channels={"cs": ""}, messages=30, context_switch="12us", seed=3)
    both(p3, no_cs=True)
    both(p3, no_cs=True, idle_timeout_s=3e-6)


@pytest.mark.parametrize("name", sorted(CAPTURES))
def test_real(name):
    f, cfg, _, rate = CAPTURES[name]
    both(real(f), samplerate=rate, **cfg)


def test_numpy_framer_sliced_blocks_frame_the_same(tmp_path, monkeypatch):
    """The numpy framer frames a reader's block a slice of core/framing.FEED_EDGES edges at a
    time (its temporaries, ~170 bytes an edge, stay bounded); with slices of 997 edges, far
    shorter than a window, every field is still the compiled core's, with CS and without."""
    from spigap.core import framing

    monkeypatch.setattr(framing, "FEED_EDGES", 997)
    sc, tl, path = synth(tmp_path, mode=1, words_per_transfer=3, messages=40, transfers_per_message=5,
                         mosi="random", miso="random", seed=7)
    both(path, cpha=1)
    sc3, tl3, p3 = synth(tmp_path, name="nocs.sr", channels={"cs": ""}, messages=30, context_switch="12us", seed=3)
    both(p3, no_cs=True)
