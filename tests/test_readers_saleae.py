"""Saleae Logic 2 binary export reader: v0/v1, gaps, rates, channel names, damage."""

from __future__ import annotations

import os
import struct

import numpy as np
import pytest

from spigap.api import SpiConfig, analyze_device
from spigap.errors import CaptureTruncated, InputError, UsageError
from spigap.io import open_capture
from spigap.synth import Scenario, tracks
from spigap.synth.writers import write_capture

MAP = "0=SCLK,1=MOSI,2=MISO,3=CS"


@pytest.fixture(scope="module")
def cap():
    # jitter puts edges anywhere on the 100 MHz sample grid, as in a real capture
    sc = Scenario.from_toml(None, {"messages": 20, "samplerate": 100e6, "sclk": 5e6, "sigma": 30e-9})
    tl = sc.timeline()
    n = int(round(tl.end_time * sc.samplerate))
    return sc, tracks(tl, sc.channels, sc.samplerate), n


def _write(tmp_path, cap, fmt, name=None, **kw):
    sc, trs, n = cap
    return write_capture(tmp_path / (name or fmt), fmt, trs, sc.samplerate, n, **kw)


def _ref(tmp_path, cap):
    sc, trs, n = cap
    return analyze_device(write_capture(tmp_path / "ref.sr", "sr", trs, sc.samplerate, n), SpiConfig())


def test_folder_or_one_file_and_channel_names(tmp_path, cap):
    d = _write(tmp_path, cap, "saleae-v1")
    with open_capture(d) as r:
        assert r.info.channels == ["D0", "D1", "D2", "D3"]
        assert r.info.samplerate_hz == 100e6 and r.info.resolution_source == "file"
    with open_capture(os.path.join(d, "digital_2.bin")) as r:       # one file: its folder is the capture
        assert r.info.channels == ["D0", "D1", "D2", "D3"]
    ref = _ref(tmp_path, cap)
    for key in (MAP, "D0=SCLK,D1=MOSI,D2=MISO,D3=CS", "digital_0=SCLK,digital_1=MOSI,digital_2=MISO,digital_3=CS"):
        a = analyze_device(d, SpiConfig(), channel_map=key)
        assert a.n == ref.n and np.array_equal(a.mosi, ref.mosi)


def test_v0_rate_is_inferred_from_transition_times(tmp_path, cap):
    d = _write(tmp_path, cap, "saleae-v0")
    with open_capture(d) as r:
        assert r.info.resolution_source == "inferred"
        # transitions of a 5 MHz SCLK sampled at 100 MHz all fall on a 100 MHz grid, some not on 50 MHz
        assert r.info.samplerate_hz == pytest.approx(100e6)
    with open_capture(d, samplerate=200e6) as r:
        assert r.info.samplerate_hz == 200e6


def test_v1_gaps_are_reported_and_held(tmp_path, cap):
    sc, trs, n = cap
    d = _write(tmp_path, cap, "saleae-v1", gaps=[(n // 2, n // 2 + 3)])
    a = analyze_device(d, SpiConfig(), channel_map=MAP)
    assert any("gap(s) without data" in w for w in a.warnings)
    assert a.n == _ref(tmp_path, cap).n


def test_implausible_v1_rate_falls_back_to_the_times(tmp_path, cap):
    d = _write(tmp_path, cap, "saleae-v1", name="slow", chunk_rate=5.0)
    a = analyze_device(d, SpiConfig(), channel_map=MAP)
    w = " ".join(a.warnings)
    assert "5 Hz is implausible" in w and "--samplerate" in w
    assert a.tick_s == pytest.approx(1e-8)
    ref = _ref(tmp_path, cap)
    assert a.n == ref.n and np.array_equal(a.cs_setup, ref.cs_setup)


def test_analog_channels_with_explicit_thresholds(tmp_path, cap):
    d = _write(tmp_path, cap, "saleae-analog", v_high=1.8, noise=0.01)
    ref = _ref(tmp_path, cap)
    a = analyze_device(d, SpiConfig(), channel_map="A0=SCLK,A1=MOSI,A2=MISO,A3=CS", threshold=["0.9,0.1"])
    assert a.n == ref.n and np.array_equal(a.miso, ref.miso)
    # a threshold can name a channel by its mapped name
    a = analyze_device(d, SpiConfig(), channel_map="A0=SCLK,A1=MOSI,A2=MISO,A3=CS",
                     threshold=["SCLK=0.9,0.1", "CS=0.9", "MOSI=0.9", "MISO=0.9"])
    assert a.n == ref.n
    # a threshold above the signal: every line reads low, so CS is active throughout and no SCLK edge
    a = analyze_device(d, SpiConfig(), channel_map="A0=SCLK,A1=MOSI,A2=MISO,A3=CS", threshold="5")
    assert a.n == 1 and a.n_words.sum() == 0
    with pytest.raises(UsageError) as e:
        analyze_device(d, SpiConfig(), channel_map="A0=SCLK,A1=MOSI,A2=MISO,A3=CS", threshold="NOPE=1")
    assert "NOPE" in str(e.value)


def test_cut_file_analyzes_what_is_there(tmp_path, cap):
    d = _write(tmp_path, cap, "saleae-v0", name="cut")
    f = os.path.join(d, "digital_0.bin")
    size = os.path.getsize(f)
    os.truncate(f, 44 + ((size - 44) // 8) * 6 // 10 * 8 + 3)
    ref = _ref(tmp_path, cap)
    a = analyze_device(d, SpiConfig(), channel_map=MAP)
    assert a.truncated and "digital_0.bin" in a.truncated and "results cover up to" in a.truncated
    assert 0 < a.n < ref.n
    k = a.n - 1
    assert np.array_equal(a.start[:k], ref.start[:k])


@pytest.mark.parametrize("blob, needle", [
    (b"hello", "not a Saleae binary export"),
    (b"<SALEAE>" + struct.pack("<ii", 7, 0), "version 7"),
    (b"<SALEAE>" + struct.pack("<ii", 0, 5), "data type 5"),
    (b"<SALEAE>" + struct.pack("<ii", 0, 0) + b"\0" * 4, "header is cut"),
    (b"<SALEAE>" + struct.pack("<ii", 0, 0) + struct.pack("<Iddq", 0, 0.0, float("nan"), 0), "end time"),
])
def test_bad_files_are_clear_errors(tmp_path, blob, needle):
    d = tmp_path / "bad"
    d.mkdir()
    (d / "digital_0.bin").write_bytes(blob)
    with pytest.raises(InputError) as e:
        open_capture(d)
    assert needle in str(e.value) and "digital_0.bin" in str(e.value)


def test_damaged_transitions_stop_the_stream(tmp_path, cap):
    d = _write(tmp_path, cap, "saleae-v0", name="dmg")
    f = os.path.join(d, "digital_0.bin")
    data = bytearray(open(f, "rb").read())
    k = (len(data) - 44) // 8 // 2
    data[44 + 8 * k:44 + 8 * k + 8] = struct.pack("<d", -1.0)      # back in time
    open(f, "wb").write(bytes(data))
    with open_capture(d) as r:
        with pytest.raises(CaptureTruncated) as e:
            for _ in r.edges(["D0", "D3"]):
                pass
    assert "goes back in time" in str(e.value) and f"transition {k}" in str(e.value)


def test_analog_file_without_a_rate_is_a_clear_error(tmp_path):
    d = tmp_path / "a0"
    d.mkdir()
    (d / "analog_0.bin").write_bytes(b"<SALEAE>" + struct.pack("<ii", 0, 1) + struct.pack("<dQQQ", 0.0, 0, 1, 4)
                                     + b"\0" * 16)
    with pytest.raises(InputError) as e:
        open_capture(d)
    assert "sample rate" in str(e.value) and "analog_0.bin" in str(e.value)
