"""Inside-window word gaps: inter-byte vs inter-transfer by the data's own structure
(issue 14 item 2; docs/gaps.md "Two populations"). A single jittered population
stays inter-byte; two populations split only at a clear valley; spigap says when
it cannot tell."""

from __future__ import annotations

import numpy as np
import pytest

from spigap.core.gaprules import split
from util import analyze, synth


@pytest.mark.parametrize("jitter", [0.0, 0.1, 0.2, 0.3, 0.4])
def test_one_jittered_population_stays_inter_byte(tmp_path, jitter):
    # 4-byte transfers at 8 MHz, one idle clock between bytes: word gap 1.5 T = 187.5 ns,
    # jitter sigma = 0..40 % of it (the old max(2 g25, g25 + 2 T) rule cut this in two)
    gap = 1.5 * 125e-9
    sc, tl, path = synth(tmp_path, sclk="8MHz", words_per_transfer=4, messages=800, idle_clocks=1,
                         sigma={"inter_byte": f"{jitter * gap * 1e9:.3f}ns"} if jitter else {},
                         seed=int(jitter * 100) + 1)
    a = analyze(path)
    assert len(tl.truth()["inter_transfer"]) == 0
    assert len(a.gap_values("inter_transfer")) == 0 and len(a.gap_values("inter_byte")) == 2400
    assert a.inter_transfer_threshold is None
    assert not [w for w in a.warnings if w.startswith("word gaps")]


def test_readme_jitter_example(tmp_path):
    # README: synth --bytes 4 --transfers-per-message 1 --messages 2000 --jitter 200ns
    sc, tl, path = synth(tmp_path, sclk="8MHz", words_per_transfer=4, transfers_per_message=1,
                         messages=2000, cs_setup="2.4us", cs_hold="1.9us", context_switch="13.4us",
                         sigma="200ns", seed=1)
    a = analyze(path)
    assert len(a.gap_values("inter_transfer")) == 0 and len(a.gap_values("inter_byte")) == 6000


@pytest.mark.parametrize("name,kw,n_it,n_ib", [
    # Linux mcp320x: 1-byte command + 2-byte read in one CS window, bcm2835 at 1 MHz
    ("mcp320x", dict(sclk="1MHz", segments=[1, 2], words_per_transfer=3, inter_transfer="4us",
                     sigma="100ns"), 300, 300),
    # keep_cs hand-over: two 3-byte messages in one CS window, 13 µs apart
    ("keep_cs", dict(sclk="8MHz", segments=[3, 3], words_per_transfer=6, inter_transfer="13us",
                     sigma="50ns"), 300, 1200),
])
def test_two_populations_split_at_the_valley(tmp_path, name, kw, n_it, n_ib):
    sc, tl, path = synth(tmp_path, name=f"{name}.sr", messages=300, idle_clocks=1, seed=3, **kw)
    a = analyze(path)
    tr = tl.truth()
    assert len(tr["inter_transfer"]) == n_it and len(tr["inter_byte"]) == n_ib
    assert len(a.gap_values("inter_transfer")) == n_it and len(a.gap_values("inter_byte")) == n_ib
    assert a.word_gaps_note.startswith("two populations")


def test_rare_keep_cs_hand_overs_among_jittered_bytes():
    # 1 % of the word gaps are hand-overs (12 µs) among 0.2 µs +- 30 % byte gaps (in samples at 50 MHz)
    rng = np.random.default_rng(5)
    g = np.rint(np.clip(10 * (1 + rng.normal(0, 0.3, 5000)), 1, None))
    g[::100] = np.rint(600 * (1 + rng.normal(0, 0.02, 50)))
    sp = split(g, "linear")
    assert sp.verdict == "two" and 30 < sp.threshold < 500


def test_overlapping_populations_are_reported_not_split():
    rng = np.random.default_rng(6)
    g = np.concatenate([100 * (1 + rng.normal(0, 0.08, 3000)), 135 * (1 + rng.normal(0, 0.08, 3000))])
    sp = split(np.rint(g), "linear")
    assert sp.verdict == "unclear" and "cannot tell" in sp.note and sp.threshold is not None


def test_two_clusters_closer_than_three_samples_are_reported_not_hidden(tmp_path):
    """Back-to-back bytes (0.5 T = 3 samples) and inter-transfer gaps twice as long
    (6 samples) at 4 MHz / 24 MSa/s: below the 3 samples a split needs, yet clearly
    two clusters. spigap said "one population" without a word; now it cannot tell,
    says so, and splits nothing."""
    sc, tl, path = synth(tmp_path, sclk="4MHz", samplerate="24MHz", words_per_transfer=8, segments=[2, 2, 4],
                         idle_clocks=0, inter_transfer="250ns", sigma={"inter_transfer": "5ns", "inter_byte": "2.5ns"},
                         messages=150, transfers_per_message=2, context_switch="60us", seed=160)
    assert len(tl.truth()["inter_transfer"]) == 600
    a = analyze(path)
    assert a.word_gaps_note.startswith("not one population") and "cannot tell" in a.word_gaps_note
    assert [w for w in a.warnings if w.startswith("word gaps")]
    assert len(a.gap_values("inter_transfer")) == 0


@pytest.mark.parametrize("values", [[3, 4], [3, 4, 5], [3, 5]])
def test_one_rounded_population_is_not_made_two(values):
    """A constant gap between two whole samples, or jittered over a few, reads as
    neighbouring values: one population, not a close pair."""
    rng = np.random.default_rng(7)
    g = rng.choice(values, 4000)
    assert split(g.astype(float), "linear").verdict == "one"


def test_close_pair_needs_a_valley():
    rng = np.random.default_rng(8)
    g = np.concatenate([np.full(3000, 3.0), np.full(1000, 6.0), rng.choice([4.0, 5.0], 60)])
    sp = split(g, "linear")
    assert sp.verdict == "unclear" and "within 3 samples" in sp.note
