"""Timing at the pins (docs/pin-timing.md) against known truth.

Scope traces: synth/analog_bus.py renders an SPI bus as RC edges with known time
constants, skew, a controller and a device delay, noise and ringing, through the
formats spigap reads (Tektronix ISF files, one per channel, quantized like a
scope; scope CSV; analog .sr); its ``truth`` finds every sampling edge's setup,
hold and clock-to-output on the noise-free waveform with a root finder, apart
from the streamed measurement. Done when: every edge within max(0.1 sample, the
stated bound); rise times within 5 %. Logic captures: within one sample of the
synthesized timeline, never a figure finer than the grid.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from spigap.api import SpiConfig, analyze_file
from spigap.core.config import INFERABLE
from spigap.pins.levels import Levels
from spigap.pins.tap import PinOptions
from spigap.synth.analog_bus import AnalogBus, LineModel
from spigap.synth import Scenario, write
from spigap.synth.writers import write_capture
from spigap.synth.writers.isf import write_isf_set

RATE = 2.5e9                         # 400 ps a sample
LV = Levels(0.99, 2.31, "test: 0.3/0.7 x 3.3 V")
ROLES = (("clk", "SCLK"), ("mosi", "MOSI"), ("miso", "MISO"), ("cs", "CS"))
CMAP = "Ch1=SCLK,Ch2=MOSI,Ch3=MISO,Ch4=CS"


def bus(*, sclk=20e6, mode=0, noise=0.01, tau=1e-9, miso_tau=2.5e-9, miso_delay=18e-9, mosi_delay=3e-9,
        clk_skew=0.0, ring=0.0, messages=12, seed=3):
    sc = Scenario(sclk=sclk, cpol=mode >> 1, cpha=mode & 1, messages=messages, words_per_transfer=3,
                  idle_clocks=0, cs_setup=100e-9, cs_hold=60e-9, context_switch=400e-9, lead=200e-9,
                  tail=200e-9, seed=seed, mosi_delay=mosi_delay, miso_delay=miso_delay)
    tl = sc.timeline()
    lines = {r: LineModel(tau=tau, noise=noise) for r, _ in ROLES}
    lines["miso"] = LineModel(tau=miso_tau, noise=noise)
    lines["clk"] = LineModel(tau=tau, noise=noise, delay=clk_skew,
                             ring=ring, ring_hz=400e6 if ring else 0.0, ring_tau=3e-9 if ring else 0.0)
    return AnalogBus(tl, lines, seed=seed)


def write_isf(b: AnalogBus, tmp_path, stem="tek0000", bits=12):
    n = int(b.timeline.end_time * RATE)
    return write_isf_set(str(tmp_path / stem), [b.line(r, name, RATE) for r, name in ROLES], RATE, n,
                         volts_per_div=0.5, center=1.65, bits=bits)


def measure(paths, mode=None, **opts):
    """Analyze with the pins measured; ``mode`` given (else inferred from the signals)."""
    opts.setdefault("device_levels", LV)
    cfg = None if mode is None else SpiConfig(cpol=mode >> 1, cpha=mode & 1, infer=INFERABLE - {"mode"})
    a = analyze_file(paths, cfg, channel_map=CMAP, pins=PinOptions(record=True, **opts))
    return a, a.device.pins


def match(recorded: np.ndarray, truth_at: np.ndarray, tick_s: float, window: float):
    """Index into ``recorded`` of the row nearest each truth time (NaN-free), or -1."""
    t = recorded[:, 1] * tick_s
    k = np.clip(np.searchsorted(t, truth_at), 1, max(len(t) - 1, 1))
    k = np.where(np.abs(t[k - 1] - truth_at) < np.abs(t[k] - truth_at), k - 1, k)
    return np.where(np.abs(t[k] - truth_at) < window, k, -1)


def assert_edges(res, name: str, truth_v: np.ndarray, truth_at: np.ndarray, *, horizon_ok=True):
    """Every truth value within max(0.1 sample, its stated bound) of the measured one at that edge."""
    tick = res.tick_s
    rec = res.figures[name].recorded()
    finite = np.isfinite(truth_v)
    k = match(rec, truth_at[finite], tick, 5e-9)
    assert (k >= 0).all(), f"{name}: {int((k < 0).sum())} edges of the truth not measured"
    got = rec[k, 0] * tick
    bound = np.maximum(0.1 * tick, rec[k, 2] * tick)
    want = truth_v[finite]
    keep = want < 3.9 * 25e-9 if horizon_ok else np.ones(len(want), bool)     # below the look-ahead horizon
    err = np.abs(got - want)[keep]
    worst = int(np.argmax(err / bound[keep]))
    assert (err <= bound[keep]).all(), (
        f"{name}: {int((err > bound[keep]).sum())} of {keep.sum()} edges off by more than their bound; worst "
        f"{err[worst] * 1e12:.1f} ps vs {bound[keep][worst] * 1e12:.1f} ps")
    return len(err)


# ------------------------------------------------------------------ scope traces, truth per edge
@pytest.fixture(scope="module")
def isf_bus(tmp_path_factory):
    b = bus()
    paths = write_isf(b, tmp_path_factory.mktemp("isf"))
    return b, paths, measure(paths)


def test_setup_hold_tdo_on_scope_traces_match_the_truth(isf_bus):
    b, _, (a, res) = isf_bus
    assert not res.digital
    n = 0
    for role in ("mosi", "miso"):
        tr = b.truth(role, LV.vil, LV.vih)
        n += assert_edges(res, f"{role}_setup", tr["setup"], tr["at"])
        n += assert_edges(res, f"{role}_hold", tr["hold"], tr["at"])
        name = "miso_tdo" if role == "miso" else "mosi_tco"
        n += assert_edges(res, name, tr["tco"], tr["tco_at"])
    assert n > 900
    # the figures are what the generator was told: tDO = 18 ns + the RC to VIH/VIL, the window below
    assert res.figures["miso_tdo"].percentile(50) * res.tick_s == pytest.approx(20.3e-9, abs=0.2e-9)


def test_stated_bounds_are_honest_and_not_empty(isf_bus):
    _, _, (_, res) = isf_bus
    for name in ("mosi_setup", "miso_setup", "miso_tdo"):
        f = res.figures[name]
        assert 0 < f.u_mean * res.tick_s < 0.5e-9, f"{name}: a bound of {f.u_mean * res.tick_s:g} s"


def test_rise_times_within_5_percent(isf_bus):
    b, _, (_, res) = isf_bus
    for role in ("clk", "mosi", "miso", "cs"):
        want = b.rise_time(role)
        for what in ("rise", "fall"):
            fig = res.shapes[role][what]
            assert fig.n > 0
            assert fig.percentile(50) * res.tick_s == pytest.approx(want, rel=0.05), (role, what)
            rec = fig.recorded() if fig.record is not None else None
            assert rec is None or len(rec)


def test_settling_and_overshoot_of_plain_rc_edges(isf_bus):
    b, _, (_, res) = isf_bus
    d = res.shapes["miso"]
    # RC: from 50 % into +/-5 %: tau x ln 10, whole samples
    assert d["settle"].percentile(50) * res.tick_s == pytest.approx(b.lines["miso"].tau * math.log(10),
                                                                     abs=res.tick_s)
    # no overshoot in an RC edge: what is measured is noise, inside the stated +/- 3 sigma
    w = d["overshoot"].worst(low=False)[0]
    assert w[0] <= w[2] + 0.2


@pytest.mark.parametrize("mode", [1, 2, 3])
def test_every_mode(tmp_path, mode):
    b = bus(mode=mode, messages=4)
    a, res = measure(write_isf(b, tmp_path))
    assert a.cfg.mode == mode
    for role in ("mosi", "miso"):
        tr = b.truth(role, LV.vil, LV.vih)
        assert_edges(res, f"{role}_setup", tr["setup"], tr["at"])
        assert_edges(res, f"{role}_hold", tr["hold"], tr["at"])


def test_failing_miso_setup_and_skew(tmp_path):
    """MISO late (tDO 30 ns at 20 MHz: arrives after the sampling edge) and SCLK skewed by 2 ns:
    negative setups, measured as the truth says, and the rx-sample-delay-ns that fixes it."""
    b = bus(miso_delay=28e-9, clk_skew=2e-9, messages=6)
    paths = write_isf(b, tmp_path)
    a, res = measure(paths, mode=0)     # a MISO this late looks like mode 1 to the inference: say it
    tr = b.truth("miso", LV.vil, LV.vih)
    assert np.nanmin(tr["setup"]) < 0
    assert_edges(res, "miso_setup", tr["setup"], tr["at"])
    assert_edges(res, "miso_hold", tr["hold"], tr["at"])
    from spigap.pins.advice import Requirement, advise

    tips = advise(res, Requirement(), margin=2e-9)
    delay = [s for s in tips if s.prop == "rx-sample-delay-ns"]
    assert delay, [s.text for s in tips]
    d = delay[0].value
    assert d * 1e-9 >= 2e-9 - np.nanmin(tr["setup"])                  # restores the 2 ns margin
    # the controller sampling that much later: the same bus measured with it
    _, after = measure(paths, mode=0, rx_sample_delay=d * 1e-9)
    assert after.figures["miso_setup"].min * after.tick_s >= 2e-9
    assert after.figures["miso_hold"].min * after.tick_s >= 2e-9


def test_ringing_gives_overshoot_and_double_clock_risks(tmp_path):
    """SCLK ringing at 400 MHz with 80 % of the step: it overshoots and rings back across the
    middle level, which a receiver may take for another clock edge."""
    b = bus(ring=0.8, noise=0.005, messages=3)
    a, res = measure(write_isf(b, tmp_path))
    over = res.shapes["clk"]["overshoot"]
    # the truth: the noise-free peak after a settled rising edge
    first = b.timeline.clk_t[0] + b.lines["clk"].delay
    t = np.linspace(first, first + 20e-9, 200001)
    peak = (b.clean("clk", t).max() - 3.3) / 3.3 * 100
    assert over.percentile(50) == pytest.approx(peak, abs=over.worst(low=False)[0][2] + 1.0)
    assert res.events["sclk.double_clock"].n > 0
    assert res.events["sclk.runt"].n + res.events["sclk.nonmonotonic"].n > 0


@pytest.mark.parametrize("fmt", ["scope-keysight", "sr-analog"])
def test_other_analog_formats(tmp_path, fmt):
    """The same volts through a scope CSV and an analog .sr: the same figures within their bounds."""
    b = bus(messages=3, noise=0.005)
    n = int(b.timeline.end_time * RATE)
    srcs = [b.line(r, name, RATE) for r, name in ROLES]
    if fmt.startswith("scope"):
        path = write_capture(tmp_path / "cap.csv", fmt, srcs, RATE, n, use_track_names=True)
    else:
        path = write_capture(tmp_path / "cap.sr", fmt, srcs, RATE, n)
    a = analyze_file(path, pins=PinOptions(device_levels=LV, record=True))
    res = a.device.pins
    tr = b.truth("miso", LV.vil, LV.vih)
    assert_edges(res, "miso_setup", tr["setup"], tr["at"])
    assert_edges(res, "miso_tdo", tr["tco"], tr["tco_at"])


# ------------------------------------------------------------------ logic captures
@pytest.mark.parametrize("mode", [0, 3])
def test_logic_capture_within_one_sample(tmp_path, mode):
    """A logic capture: every figure whole samples, within one sample of the timeline, and a
    change on the clock's own sample is "< 1 sample"."""
    sc = Scenario(sclk=2e6, samplerate=20e6, messages=20, words_per_transfer=2, idle_clocks=0,
                  cpol=mode >> 1, cpha=mode & 1, seed=5, mosi_delay=0.0, miso_delay=0.0, miso_enable=0.0)
    tl = write(sc, tmp_path / "d.sr").timeline
    a = analyze_file(tmp_path / "d.sr", pins=PinOptions(record=True))
    res = a.device.pins
    assert res.digital and "1 sample" in res.label()
    r = res.tick_s
    T = 1 / sc.sclk
    ws = sc.wordsize
    k = np.arange(2 * ws)
    samp_k = k[k % 2 == sc.cpha]
    at = (tl.word_first[:, None] + samp_k[None, :] * T / 2).ravel()
    changed = np.concatenate([[True], np.diff(tl.mosi_bits.astype(int)) != 0])
    # the truth of a changed bit: launched on the edge before its sampling edge, no delay
    want = np.full(len(at), T / 2)
    rec = res.figures["mosi_setup"].recorded()
    kk = match(rec, at, r, T / 4)
    assert (kk >= 0).all()
    got = rec[kk, 0] * r
    sel = changed & (np.arange(len(at)) % ws != 0)
    assert np.all(np.abs(got[sel] - want[sel]) <= r * (1 + 1e-9))
    assert np.all(got == np.round(got / r) * r)                           # whole samples
    tco = res.figures["mosi_tco"]
    assert tco.n and tco.max == 0                                           # data changes on the clock's sample
    assert "< 1 sample" in res.text()


def test_a_data_line_that_never_changes(tmp_path):
    """MISO held at one level the whole capture (a device that never answers): its setup and
    hold are the whole window, no clock-to-output, no internal error."""
    sc = Scenario(sclk=2e6, samplerate=20e6, messages=10, words_per_transfer=2, idle_clocks=0, seed=5,
                  miso="zero")
    write(sc, tmp_path / "z.sr")
    res = analyze_file(tmp_path / "z.sr", pins=PinOptions()).device.pins
    assert res.figures["miso_setup"].n > 0 and res.figures["miso_tdo"].n == 0
    assert res.figures["mosi_setup"].n > 0


# ------------------------------------------------------------------ bounded memory
def test_what_is_kept_does_not_grow_with_the_capture(tmp_path, monkeypatch):
    """The lines' events are kept only as far back as the look-ahead needs: on a logic capture of
    200 000 SCLK edges the stores never hold more than a few thousand events."""
    from spigap.pins import tap

    sc = Scenario(sclk=10e6, samplerate=100e6, messages=4000, words_per_transfer=3, idle_clocks=0, seed=9)
    write(sc, tmp_path / "long.sr", chunk_bytes=1 << 16)
    seen = []
    orig = tap.PinTap._after_input

    def after_input(self):          # each time the tap has measured and cut: what its stores hold
        orig(self)
        if self.measurers:
            seen.append(sum(len(s) for s in self._stores))

    monkeypatch.setattr(tap.PinTap, "_after_input", after_input)
    a = analyze_file(tmp_path / "long.sr", pins=PinOptions())
    res = a.device.pins
    assert res.sampling_edges == 4000 * 3 * 8
    assert len(seen) > 20 and max(seen[:-1]) < 20_000, max(seen)
