"""Timing at the pins on real instruments' files (tests/data/scopes, README there).

No file there stores the instrument's own rise-time measurement (the Tektronix ISF
and CSV, the Rigol .wfm/.bin, the Keysight .bin/.h5, the LeCroy .trc and Siglent
.bin headers hold the waveform and its scales only), so the real files check what
they can: one acquisition in three encodings (the MDO4104C's ISF pair, its own CSV
export and libsigrok's .sr of it) gives the same edges to the picosecond; a
calibration square sampled too slowly for its edges says so (below resolution);
and spigap's ISF writer writes what the real instrument writes.
"""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from conftest import ROOT
from spigap.api import SpiConfig, analyze_file
from spigap.io.isf import parse_header, read_isf
from spigap.pins.tap import PinOptions
from spigap.synth.analog_bus import AnalogBus, LineModel
from spigap.synth.scenario import Scenario
from spigap.synth.writers.isf import write_isf

SCOPES = ROOT / "tests" / "data" / "scopes"


def shapes(path, **cfg):
    a = analyze_file(path, SpiConfig(**cfg), pins=PinOptions())
    p = a.device.pins
    out = {}
    for role, d in p.shapes.items():
        for what in ("rise", "fall"):
            f = d[what]
            out[(role, what)] = (f.n, f.min * p.tick_s, f.percentile(50) * p.tick_s, f.max * p.tick_s,
                                 f.u_mean * p.tick_s)
    return out, p


def test_one_acquisition_three_encodings(tmp_path):
    """The DS1307's I2C lines (an MDO4104C, 50 MS/s) as the scope's ISF files, its CSV export and
    libsigrok's .sr: the same rise and fall times of every edge (the volts are the same to the
    CSV's three digits and the .sr's float32)."""
    csv = tmp_path / "RTC.csv"
    csv.write_bytes(gzip.decompress((SCOPES / "RTC.csv.gz").read_bytes()))
    isf, p = shapes([SCOPES / "tek0000CH1.isf", SCOPES / "tek0000CH2.isf"], clk="Ch2", mosi="Ch1", no_cs=True)
    sr, _ = shapes(SCOPES / "RTC.sr", clk="SCL", mosi="SDA", no_cs=True)
    cs, _ = shapes(csv, clk="CH2", mosi="CH1", no_cs=True)
    assert isf.keys() == sr.keys() == cs.keys() and len(isf) == 4
    for k in isf:
        assert isf[k][0] == sr[k][0] == cs[k][0] > 10
        np.testing.assert_allclose(isf[k][1:4], sr[k][1:4], rtol=0, atol=1e-12)
        np.testing.assert_allclose(isf[k][1:4], cs[k][1:4], rtol=0, atol=1e-12)
    # I2C with pull-ups: rises slower than falls, both many samples long (measurable)
    assert isf[("clk", "rise")][2] > isf[("clk", "fall")][2] > 5 * p.tick_s


def test_edges_faster_than_the_sampling_are_below_resolution():
    """An Agilent MSO7034A square wave saved at 2 µs a sample: its edges take less than two
    samples, so the rise time is stated as +/- 2 samples (below resolution), not as a figure."""
    out, p = shapes(SCOPES / "scope_3.csv", clk="1", mosi="2", no_cs=True)
    n, lo, p50, hi, u = out[("clk", "rise")]
    assert n >= 2 and hi < 2 * p.tick_s
    assert u >= 2 * p.tick_s


def test_isf_writer_writes_what_the_mdo4104c_writes(tmp_path):
    """The header keys of spigap's ISF writer are the real file's (tek0000CH1.isf), and the
    volts read back are the generator's, quantized to the 8-bit step."""
    real = (SCOPES / "tek0000CH1.isf").read_bytes()
    real_keys = set(parse_header(real[:real.index(b":CURVE")].decode("latin-1")))
    sc = Scenario(sclk=10e6, messages=1, words_per_transfer=1, lead=100e-9, tail=100e-9, seed=1)
    b = AnalogBus(sc.timeline(), {r: LineModel(tau=2e-9) for r in ("clk", "mosi", "miso", "cs")})
    src = b.line("clk", "SCLK", 1e9)
    n = int(sc.timeline().end_time * 1e9)
    path = tmp_path / "w.isf"
    write_isf(path, src, 1e9, n, bits=8, volts_per_div=0.5, center=1.65)
    mine = path.read_bytes()
    keys = set(parse_header(mine[:mine.index(b":CURVE")].decode("latin-1")))
    assert {"BYT_NR", "BIT_NR", "ENCDG", "BN_FMT", "BYT_OR", "WFID", "NR_PT", "PT_FMT", "XUNIT", "XINCR",
            "XZERO", "PT_OFF", "YUNIT", "YMULT", "YOFF", "YZERO"} <= keys & real_keys
    wf, notes = read_isf(str(path))
    assert not notes and wf.n == n and wf.dt == pytest.approx(1e-9)
    v = wf.volts(0, n)
    step = 5.0 / 256
    assert np.max(np.abs(v - src.volts(0, n))) <= step / 2 + 1e-9
