"""Where the synthesizer launches the data bits (synth/timeline.py, Launch; recipe.Recipe.launch):
as a device and a controller drive them, each after its own delay, exactly to the float, and
the defaults never on a sampling edge whatever the SCLK and sample rate."""

from __future__ import annotations

import numpy as np
import pytest

from spigap.errors import UsageError
from spigap.synth import Scenario, load, toml_text
from spigap.synth.capture import tracks

NS = 1e-9


def scenario(**kw):
    base = dict(sclk=1e6, samplerate=50e6, messages=3, transfers_per_message=1, words_per_transfer=3,
                idle_clocks=1.0, cs_setup=1.6e-6, cs_hold=0.4e-6, mosi="random", miso="random", seed=4)
    base.update(kw)
    return Scenario.from_toml(None, {k: v for k, v in base.items()})


def edges(tl, mode):
    """Per word: (launching edge before each bit, sampling edge of each bit); the window's first
    bit in CPHA 0 has none (NaN)."""
    T = tl.shape.period
    ws = tl.shape.wordsize
    k = np.arange(2 * ws)
    samp_k = k[k % 2 == (mode & 1)]
    samp = tl.word_first[:, None] + samp_k[None, :] * (T / 2)
    launch = tl.word_first[:, None] + (samp_k[None, :] - 1) * (T / 2)
    first = np.ones(len(tl.word_first), bool)
    first[1:] = tl.windows.word_window[1:] != tl.windows.word_window[:-1]
    if mode & 1 == 0:
        later = np.flatnonzero(~first)
        launch[later, 0] = tl.word_last[later - 1]
        launch[first, 0] = np.nan
    return launch, samp, first


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_bits_change_a_delay_after_their_launching_edge(mode):
    sc = scenario(mode=mode, mosi_delay="7ns", miso_delay="33ns", miso_enable="21ns")
    tl = sc.timeline()
    launch, samp, first = edges(tl, mode)
    ws = tl.shape.wordsize
    mosi = tl.mosi_t.reshape(-1, ws)
    miso = tl.miso_t.reshape(-1, ws)
    has = ~np.isnan(launch)
    assert np.allclose(mosi[has], launch[has] + 7 * NS, rtol=0, atol=1e-15)
    assert np.allclose(miso[has], launch[has] + 33 * NS, rtol=0, atol=1e-15)
    if mode & 1 == 0:
        # the window's first bit: the device's at CS + its enable, the controller's half a period
        # before the first sampling edge (+ its delay)
        win = tl.windows.word_window[first]
        assert np.allclose(miso[first, 0], tl.cs_assert[win] + 21 * NS, rtol=0, atol=1e-15)
        assert np.allclose(mosi[first, 0], samp[first, 0] - tl.shape.period / 2 + 7 * NS, rtol=0, atol=1e-15)
    # the previous bit is held until the next one: every change before the bit's sampling edge
    assert (tl.miso_t.reshape(-1, ws) < samp).all() and (tl.mosi_t.reshape(-1, ws) < samp).all()
    truth = tl.truth()["launch"]
    assert truth == {"mosi_delay_s": 7 * NS, "miso_delay_s": 33 * NS, "miso_enable_s": 21 * NS}


def test_clock_and_cs_do_not_depend_on_the_data_timing():
    a = scenario(miso_delay="0ns", mosi_delay="0ns", miso_enable="0ns").timeline()
    b = scenario(miso_delay="120ns", mosi_delay="9ns", miso_enable="300ns").timeline()
    for key in ("clk_t", "clk_level", "cs_assert", "cs_deassert", "mosi_bits", "miso_bits"):
        assert np.array_equal(getattr(a, key), getattr(b, key)), key


@pytest.mark.parametrize("sclk,rate,mode", [(1e6, 50e6, 0), (10e6, 20e6, 0), (25e6, 50e6, 0), (10e6, 40e6, 3),
                                            (3.6e6, 50e6, 0), (20e6, 100e6, 1)])
@pytest.mark.parametrize("traffic", [None, "mcp3008", "ad7606", "mcp2518fd"])
def test_defaults_never_reach_the_sampling_edge(sclk, rate, mode, traffic):
    """A default delay (the chip's, or a generic device's) is shortened where it would take a
    bit to its sampling edge's sample: at 2 samples per period the bits change on their
    launching edge's sample; the window's first MISO bit stays inside the CS setup."""
    sc = scenario(sclk=sclk, samplerate=rate, mode=mode, cs_setup="60ns" if rate >= 50e6 else "200ns",
                  messages=4)
    w = sc.windows()
    launch = sc.launch(w.cs_setup, traffic)
    from spigap.synth.timeline import build

    tl = build(w, sc.shape, sc.tail, launch)
    q = lambda t: np.rint(np.asarray(t) * rate).astype(np.int64)  # noqa: E731   (capture.tracks' rounding)
    _, samp, first = edges(tl, mode)
    ws = tl.shape.wordsize
    for line in (tl.mosi_t, tl.miso_t):
        assert (q(line).reshape(-1, ws) < q(samp)).all()
    if mode & 1 == 0:
        assert (q(tl.miso_t.reshape(-1, ws)[first, 0]) < q(samp[first, 0])).all()
    room = (0.5 / sclk - 1 / rate) / 2
    assert launch.miso_delay <= max(room, 0.0) + 1e-18 and launch.mosi_delay <= max(room, 0.0) + 1e-18


def test_a_recipe_may_ask_for_a_late_device():
    """Given values are used as given, past the sampling edge too (a fault capture)."""
    sc = scenario(sclk=2e6, miso_delay="300ns")            # longer than the 250 ns half period
    tl = sc.timeline()
    _, samp, _ = edges(tl, 0)
    late = tl.miso_t.reshape(-1, 8)[:, 1:] > samp[:, 1:]
    assert late.all()


def test_chip_defaults_and_per_device_values_on_a_bus():
    text = toml_text({
        "capture": {"samplerate": "50MHz", "seed": 3, "duration": "3ms", "lead": "20us", "tail": "20us"},
        "spi": {"sclk": "2MHz", "mode": 0, "channels": {"clk": "SCLK", "mosi": "MOSI", "miso": "MISO"}},
        "device": [{"cs": "CE0", "traffic": "mcp3008", "think": "40us"},
                   {"cs": "CE1", "traffic": "mcp2518fd-rx", "driver": "irq", "irq_period": "600us"},
                   {"cs": "CE2", "traffic": "counter", "think": "50us", "miso_delay": "31ns"}]})
    cap = load(text=text).capture()
    truth = cap.truth()["devices"]
    assert truth["CE0"]["launch"]["miso_delay_s"] == pytest.approx(40 * NS)      # synth/traffic/mcp3008.py
    assert truth["CE1"]["launch"]["miso_delay_s"] == pytest.approx(15 * NS)      # mcp2518fd.py
    assert truth["CE2"]["launch"]["miso_delay_s"] == pytest.approx(31 * NS)      # its own
    assert {d["launch"]["mosi_delay_s"] for d in truth.values()} == {5 * NS}     # one controller
    # each window's MISO as its device launches it: CE1's first bits 15 ns after its CS
    tl = cap.timeline
    dev = np.asarray(cap.plan.device)
    ww = tl.windows.word_window
    first = np.flatnonzero(np.concatenate([[True], ww[1:] != ww[:-1]]))
    ce1 = first[dev[ww[first]] == 1]
    assert np.allclose(tl.miso_t[ce1 * 8] - tl.cs_assert[ww[ce1]], 15 * NS, rtol=0, atol=1e-15)
    assert len(tracks(tl, {"clk": "SCLK", "mosi": "MOSI", "miso": "MISO"}, 50e6, cs=cap.cs)) == 6


@pytest.mark.parametrize("bad", ["-1ns", "2ms"])
def test_delays_out_of_range_are_refused(bad):
    with pytest.raises(UsageError, match="miso_delay"):
        scenario(miso_delay=bad)
