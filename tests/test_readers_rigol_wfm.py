"""Rigol .wfm files saved by real scopes (DS1000Z, DS1000E/D, DS1000B, DS1000C, DS2000,
DS4000; tests/data/scopes/README.md says where each comes from).

Oracles: RigolWFM (github scottprahl/RigolWFM, a reader we did not write, whose layouts our
reader follows as facts) reading the same files: the same enabled channels, the same volts,
sample interval and time of the first sample. And the signals themselves: the scopes' 1 kHz
calibration squares give an edge every 500 us, the DS1054Z's UART an edge at whole bits of
115 200 Bd, and the real sigrok-cli's uart decoder reads its frame from spigap convert's .sr.
"""

from __future__ import annotations

import pathlib
import struct
import warnings

import numpy as np
import pytest

from spigap.cli import main
from spigap.io import check_stream, open_capture

DATA = pathlib.Path(__file__).resolve().parent / "data" / "scopes"
FILES = {  # file: (format, channels)
    "DS1054Z-A.wfm": ("Rigol DS1054Z .wfm", ["CH1", "CH2", "CH3", "CH4"]),
    "DS1054Z-ch1SquareCH4Uart.wfm": ("Rigol DS1104Z .wfm", ["CH1", "CH4"]),
    "DZ1104Z-A.wfm": ("Rigol DS1104Z .wfm", ["CH1", "CH2", "CH3", "CH4"]),
    "DS1102E-A.wfm": ("Rigol DS1000E/D .wfm", ["CH1"]),
    "DS1052E.wfm": ("Rigol DS1000E/D .wfm", ["CH1", "CH2"]),
    "DS1102D-A.wfm": ("Rigol DS1000E/D .wfm", ["CH1", "CH2"]),
    "DS1204B-A.wfm": ("Rigol DS1204B .wfm", ["CH1", "CH2", "CH3", "CH4"]),
    "DS1202CA-A.wfm": ("Rigol DS1000C .wfm", ["CH1", "CH2"]),
    "DS2072A-5.wfm": ("Rigol DS2000 .wfm", ["CH1", "CH2"]),
    "DS2072A-8.wfm": ("Rigol DS2000 .wfm", ["CH2"]),         # interwoven: CH2 in both channels' memory
    "DS4022-A.wfm": ("Rigol DS4000 .wfm", ["CH1", "CH2", "CH3", "CH4"]),
}


def ours(path, **kw):
    from spigap.io.scopefile import WaveformReader

    with open_capture(path, **kw) as r:
        assert isinstance(r, WaveformReader)
        return r.info, {wf.name: wf for wf in r.waveforms}


def edge_ticks(path, channel, **kw) -> np.ndarray:
    with open_capture(path, **kw) as r:
        blocks = list(check_stream(r.edges([channel]), 1, path=str(path)))
    return np.concatenate([b.ticks for b in blocks])[1:]


@pytest.mark.parametrize("name", list(FILES))
def test_volts_and_time_base_are_rigolwfms(name):
    import RigolWFM.wfm as rw

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = rw.Wfm.from_file(str(DATA / name))
    theirs = [c for c in ref.channels if c.enabled]
    info, waves = ours(DATA / name)
    fmt, channels = FILES[name]
    assert info.format == fmt and info.channels == channels
    assert [c.channel_number for c in theirs] == [int(n[2:]) for n in channels]
    for c, name_ in zip(theirs, channels):
        wf = waves[name_]
        v = wf.volts(0, wf.n)
        volts = np.asarray(c.volts, np.float64)
        assert len(v) == len(volts) == c.points
        assert np.max(np.abs(v - volts)) <= 1e-12 * max(1.0, float(np.max(np.abs(volts))))
        assert c.seconds_per_point == info.tick_s
        assert c.times[0] == pytest.approx(info.time_offset_s, rel=1e-12, abs=1e-18)
        assert len(set(np.round(volts, 9))) >= 2           # samples, not a constant


@pytest.mark.parametrize("name,channel,dt", [("DS1054Z-ch1SquareCH4Uart.wfm", "CH1", 40e-9),
                                             ("DS1204B-A.wfm", "CH1", 8e-6), ("DS1204B-A.wfm", "CH3", 8e-6),
                                             ("DS1102D-A.wfm", "CH2", 10e-6)])
def test_calibration_squares_have_an_edge_every_500_us(name, channel, dt):
    info, _ = ours(DATA / name)
    assert info.tick_s == pytest.approx(dt)
    t = edge_ticks(DATA / name, channel)
    assert len(t) >= 4
    assert np.all(np.abs(np.diff(t) * info.tick_s - 500e-6) <= 1.01 * dt)


def test_uart_edges_fall_on_whole_bits():
    """DS1054Z CH4: 115 200 Bd UART; every edge gap is a whole number of bits (to one 40 ns sample)."""
    path = DATA / "DS1054Z-ch1SquareCH4Uart.wfm"
    info, _ = ours(path)
    gaps = np.diff(edge_ticks(path, "CH4")) * info.tick_s
    bits = gaps * 115_200
    assert len(gaps) >= 20 and 1 <= np.round(bits).min() and np.round(bits).max() <= 9   # 8N1: 9 equal bits at most
    assert np.all(np.abs(bits - np.round(bits)) <= 0.02)        # the sender's clock is 0.15 % slow


def test_sigrok_clis_uart_decoder_reads_the_converted_file(tmp_path):
    """The real sigrok-cli's stock uart decoder on spigap convert's .sr: one STX ... ETX frame,
    every byte with its start and stop bit (a frame error would print "Frame error")."""
    from conftest import run_sigrok

    out = tmp_path / "uart.sr"
    assert main(["convert", str(DATA / "DS1054Z-ch1SquareCH4Uart.wfm"), "-o", str(out)]) == 0
    rows = run_sigrok(["-i", str(out), "-P", "uart:rx=CH4:baudrate=115200", "-A", "uart"],
                      decoders_dir=None).splitlines()
    data = [r.split(": ", 1)[1] for r in rows if len(r.split(": ", 1)[1]) == 2]
    assert data == ["02", "01", "0C", "C1", "8C", "03"]
    assert sum("Stop bit" in r for r in rows) == 6 and not any("error" in r.lower() for r in rows)


def test_threshold_and_deglitch_apply(capsys):
    path = DATA / "DS1054Z-ch1SquareCH4Uart.wfm"
    assert len(edge_ticks(path, "CH1", threshold="CH1=5.0")) == 0          # above the square's 2.9 V top
    assert len(edge_ticks(path, "CH4", deglitch=20_000)) < len(edge_ticks(path, "CH4"))   # 8.7 us bits go


def test_probe_ambiguity_of_ds1000e_and_d_is_said():
    info, _ = ours(DATA / "DS1052E.wfm")
    assert any("probe x10" in w and "DS1000D" in w for w in info.warnings)
    info, _ = ours(DATA / "DS1102E-A.wfm")
    assert not any("probe" in w for w in info.warnings)


def test_convert_to_vcd(tmp_path):
    out = tmp_path / "uart.vcd"
    assert main(["convert", str(DATA / "DS1054Z-ch1SquareCH4Uart.wfm"), "-o", str(out)]) == 0
    assert out.read_text().count("\n#") > 20


def test_tek_and_rigol_wfm_are_told_apart_by_content(tmp_path, capsys):
    from spigap.io.rigol_wfm import RigolWfmReader

    with open_capture(DATA / "DS2072A-5.wfm") as r:
        assert isinstance(r, RigolWfmReader)
    p = tmp_path / "other.wfm"
    p.write_bytes(b"\x00" * 2000)
    assert main(["analyze", str(p)]) == 2
    err = capsys.readouterr().err
    assert "neither a Rigol nor a Tektronix .wfm file" in err and err.count("\n") == 1
    p.write_bytes(b"\x02\x00\x00\x00" + b"\x00" * 2000)          # a DHO magic: only a .wfm is taken for one
    assert main(["analyze", str(p)]) == 2
    assert "Rigol .wfm of model DHO800/DHO900/DHO1000 is not read" in capsys.readouterr().err
    bin_ = tmp_path / "other.bin"
    bin_.write_bytes(p.read_bytes())
    assert main(["analyze", str(bin_)]) == 2
    assert "DHO" not in capsys.readouterr().err


# ------------------------------------------------------------- refused
def _patched(tmp_path, name, at, data) -> pathlib.Path:
    raw = bytearray((DATA / name).read_bytes())
    raw[at:at + len(data)] = data
    p = tmp_path / name
    p.write_bytes(bytes(raw))
    return p


@pytest.mark.parametrize("case,message", [
    ("dho", "Rigol .wfm of model DHO800/DHO900/DHO1000 is not read"),
    ("ds6000", "Rigol .wfm of model DS6000 (DS6A0001) is not read"),
    ("mso1000z", "Rigol .wfm of model DS1104Z with logic channels is not read"),
    ("cut-header", "the header is cut"),
    ("rate", "sample rate 0.0 Hz is not usable"),
    ("scale", "vertical scale"),
])
def test_unsupported_and_damaged_are_one_line(tmp_path, capsys, case, message):
    path = {
        "dho": lambda: DATA / "DHO824-ch1.wfm",
        "ds6000": lambda: _patched(tmp_path, "DS2072A-5.wfm", 4, b"DS6A0001\0\0\0\0\0\0\0\0\0\0\0\0"),
        "mso1000z": lambda: _patched(tmp_path, "DS1054Z-ch1SquareCH4Uart.wfm", 108, struct.pack("<I", 4000)),
        "cut-header": lambda: _cut(tmp_path, "DS4022-A.wfm", 300),
        "rate": lambda: _patched(tmp_path, "DS2072A-5.wfm", 96, struct.pack("<f", 0.0)),
        "scale": lambda: _patched(tmp_path, "DS1204B-A.wfm", 68 + 16, struct.pack("<i", 0)),
    }[case]()
    assert main(["analyze", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("spigap: error: ") and message in err and err.count("\n") == 1, err


def _cut(tmp_path, name, size) -> pathlib.Path:
    p = tmp_path / name
    p.write_bytes((DATA / name).read_bytes()[:size])
    return p


@pytest.mark.parametrize("name", ["DS1054Z-ch1SquareCH4Uart.wfm", "DS2072A-8.wfm"])
def test_cut_short_gives_the_samples_it_holds(tmp_path, capsys, name):
    raw = (DATA / name).read_bytes()
    cut = _cut(tmp_path, name, len(raw) - 3_000)
    info, waves = ours(cut)
    (wf, *_) = waves.values()
    assert 0 < wf.available() < wf.n
    assert any("cut short" in w for w in info.warnings)
    out = tmp_path / "cut.vcd"
    assert main(["convert", str(cut), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    (line,) = [x for x in err.splitlines() if x.startswith("spigap: error: ")]    # the notes come before it
    assert "the file ends after sample" in line and "Traceback" not in err
    assert out.exists()           # a whole VCD of the part the file holds


# ------------------------------------------------------------- bounded
def test_slices_read_what_the_whole_record_holds(monkeypatch):
    """Read in odd-sized slices (interleaved DS1000Z bytes, DS2000 interwoven halves): the same samples."""
    from spigap.io import scopefile

    monkeypatch.setattr(scopefile, "SLICE", 1001)
    for name in ("DS1054Z-A.wfm", "DS1054Z-ch1SquareCH4Uart.wfm", "DS2072A-8.wfm", "DS4022-A.wfm"):
        _, waves = ours(DATA / name)
        for wf in waves.values():
            whole = wf.volts(0, wf.n)
            assert np.array_equal(np.concatenate(list(wf.chunks(wf.n))), whole)
            assert np.array_equal(wf.volts(7, 2008), whole[7:2008])


def _big_ds1000z(tmp_path, n: int) -> pathlib.Path:
    """The DS1054Z file's header (CH1 + CH4) over ``n`` samples per channel: CH1 a square of 37-sample halves."""
    src = (DATA / "DS1054Z-ch1SquareCH4Uart.wfm").read_bytes()
    hsize, hoff = struct.unpack_from("<2I", src, 256)
    head = bytearray(src[:hoff + hsize])
    struct.pack_into("<I", head, 116, 2 * n)
    rec = np.empty((n, 2), np.uint8)
    rec[:, 1] = np.where((np.arange(n) // 37) % 2 == 0, 60, 200)      # CH1: the odd bytes
    rec[:, 0] = 128
    p = tmp_path / f"{n}.wfm"
    p.write_bytes(bytes(head) + rec.tobytes())
    return p


def _big_ds2000_interwoven(tmp_path, n: int) -> pathlib.Path:
    src = (DATA / "DS2072A-8.wfm").read_bytes()
    offsets = struct.unpack_from("<4I", src, 68)
    head = bytearray(src[:offsets[0]])
    half = n // 2
    struct.pack_into("<4I", head, 68, len(head), len(head) + half, 0, 0)
    struct.pack_into("<3I", head, 244, n, 0, n)
    s = np.where((np.arange(n) // 37) % 2 == 0, 60, 200).astype(np.uint8)
    p = tmp_path / f"{n}-i.wfm"
    p.write_bytes(bytes(head) + s[0::2].tobytes() + s[1::2].tobytes())
    return p


@pytest.mark.parametrize("make,channel", [(_big_ds1000z, "CH1"), (_big_ds2000_interwoven, "CH2")])
def test_memory_does_not_grow_with_record_length(tmp_path, monkeypatch, make, channel):
    """A record 8x longer reads in the same memory (slices of SLICE samples), every edge found."""
    import tracemalloc

    from spigap.io import scopefile

    monkeypatch.setattr(scopefile, "SLICE", 1 << 16)
    peaks = []
    for n in (1 << 20, 1 << 23):
        p = make(tmp_path, n)
        tracemalloc.start()
        with open_capture(p) as r:
            edges = sum(len(b) for b in r.edges([channel]))
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert edges == (n - 1) // 37 + 1
    assert peaks[1] < 1.25 * peaks[0] + (2 << 20), f"{peaks[0] / 1e6:.1f} MB -> {peaks[1] / 1e6:.1f} MB"


@pytest.mark.parametrize("name", ["DS1054Z-A.wfm", "DS1102E-A.wfm", "DS1202CA-A.wfm", "DS1204B-A.wfm",
                                  "DS2072A-5.wfm", "DS4022-A.wfm"])
def test_every_cut_inside_the_header_is_an_input_error(tmp_path, name):
    """A file cut anywhere in its family's header is refused in one line (InputError, exit 2),
    never a struct.error from a field past the end (exit 3)."""
    from spigap.errors import InputError
    from spigap.io.rigol_wfm import HEADER, read_rigol_wfm

    raw = (DATA / name).read_bytes()
    p = tmp_path / name
    for size in range(4, HEADER + 1):
        p.write_bytes(raw[:size])
        try:
            read_rigol_wfm(str(p))
        except InputError:
            pass
