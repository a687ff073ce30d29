"""Oscilloscopes' own files, checked against files real scopes saved (tests/data/scopes/README.md)
and against readers we did not write.

Oracles: the same acquisition saved by the scope in another format (the
Tektronix MDO4104C's ISF pair and its own CSV; the Agilent MSO7034A's BIN, CSV
and ASCII XY files), libsigrok's reading of the ISF pair (RTC.sr), and the
readers of other projects: lecroyparser (LeCroy .trc), RigolWFM (Keysight/
Rigol .bin). Tektronix .wfm: tests/test_readers_tek_wfm.py (files tm_data_types writes);
Rigol .wfm: tests/test_readers_rigol_wfm.py.
"""

from __future__ import annotations

import gzip
import pathlib
import shutil

import numpy as np
import pytest

from spigap.cli import main
from spigap.io import check_stream, open_capture

DATA = pathlib.Path(__file__).resolve().parent / "data" / "scopes"
ISF = [DATA / "tek0000CH1.isf", DATA / "tek0000CH2.isf"]


@pytest.fixture(scope="module")
def rtc_csv(tmp_path_factory) -> pathlib.Path:
    p = tmp_path_factory.mktemp("rtc") / "RTC.csv"
    p.write_bytes(gzip.decompress((DATA / "RTC.csv.gz").read_bytes()))
    return p


def edges_s(path, channels, **kw) -> dict[str, np.ndarray]:
    """Edge times (s, from the file's time zero) of each channel, read one channel at a time."""
    out = {}
    with open_capture(path, **kw) as r:
        for ch in channels:
            blocks = list(check_stream(r.edges([ch]), 1, path=str(path)))
            t = np.concatenate([b.ticks for b in blocks])[1:]
            out[ch] = t * r.info.tick_s + (r.info.time_offset_s or 0.0)
    return out


def volts(path, **kw):
    """The reader's samples in volts, straight from its waveforms (the scale formula under test)."""
    from spigap.io.scopefile import WaveformReader

    with open_capture(path, **kw) as r:
        assert isinstance(r, WaveformReader)
        return r.info, {wf.name: wf.volts(0, wf.n) for wf in r.waveforms}


def same_edges(a: np.ndarray, b: np.ndarray, tol: float):
    assert len(a) == len(b), f"{len(a)} vs {len(b)} edges"
    assert np.max(np.abs(a - b), initial=0.0) <= tol


# ------------------------------------------------------------- Tektronix ISF
def test_isf_pair_is_one_capture_named_by_the_files():
    with open_capture(ISF) as r:
        assert r.info.channels == ["Ch1", "Ch2"]
        assert r.info.format == "Tektronix ISF, 2 files"
        assert r.info.tick_s == pytest.approx(20e-9)
        assert r.info.time_offset_s == pytest.approx(-403e-6)
        assert r.info.n_ticks == 100_000


def test_isf_volts_are_the_scopes_own_csv(rtc_csv):
    """The scope printed the same samples in RTC.csv (3 significant digits)."""
    from spigap.io.isf import read_isf

    rows = np.loadtxt(rtc_csv, delimiter=",", skiprows=21)
    for k, path in enumerate(ISF):
        wf, _ = read_isf(str(path))
        v = wf.volts(0, wf.n)
        assert len(v) == len(rows)
        assert np.max(np.abs(v - rows[:, k + 1])) < 0.006
        assert wf.t0 == pytest.approx(rows[0, 0])


def test_isf_volts_are_libsigroks_reading():
    """libsigrok's own ISF input (0.6.0-git) wrote RTC.sr from the same two files."""
    import zipfile

    from spigap.io.isf import read_isf

    with zipfile.ZipFile(DATA / "RTC.sr") as z:
        sda = np.frombuffer(z.read("analog-1-1-1"), "<f4")
        scl = np.frombuffer(z.read("analog-1-2-1"), "<f4")
    for path, ref in zip(ISF, (sda, scl)):
        wf, _ = read_isf(str(path))
        assert np.max(np.abs(wf.volts(0, wf.n) - ref)) < 1e-5


def test_isf_csv_and_sr_give_the_same_edges(rtc_csv):
    """One acquisition, three files: the same edges, to one sample (20 ns)."""
    isf = edges_s(ISF, ["Ch1", "Ch2"])
    csv = edges_s(rtc_csv, ["CH1", "CH2"])
    sr = edges_s(DATA / "RTC.sr", ["SDA", "SCL"])
    for a, b, c in ((isf["Ch1"], csv["CH1"], sr["SDA"]), (isf["Ch2"], csv["CH2"], sr["SCL"])):
        assert len(a) > 40
        same_edges(a, b, 20e-9 * 1.01)
        same_edges(a - a[0], c - c[0], 20e-9 * 1.01)     # .sr keeps no trigger time: from the first edge


def test_isf_spectrum_is_refused(capsys):
    assert main(["analyze", str(DATA / "tek0002NRM.isf")]) == 2
    err = capsys.readouterr().err
    assert "not a time-domain waveform (XUNIT 'Hz'" in err and err.count("\n") == 1


def test_isf_cut_short_gives_the_samples_it_holds(tmp_path, capsys):
    cut = tmp_path / "cut.isf"
    cut.write_bytes(ISF[1].read_bytes()[:120_000])
    out = tmp_path / "cut.vcd"
    assert main(["convert", str(cut), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "the file ends after sample" in err and "Traceback" not in err
    assert out.exists()           # a whole VCD of the part the file holds


@pytest.mark.parametrize("mutate", ["header", "curve", "length", "nr_pt"])
def test_isf_damaged_headers_are_one_line(tmp_path, capsys, mutate):
    raw = ISF[0].read_bytes()
    bad = {"header": raw.replace(b"YMULT 312.5000E-6", b"YMULT abc"),
           "curve": raw.replace(b":CURVE #6200000", b":CURVE #9"),
           "length": raw.replace(b":CURVE #6200000", b":CURVE #6xx0000"),
           "nr_pt": raw.replace(b"NR_PT 100000;PT_FMT", b"NR_PT 0;PT_FMT").replace(
               b":WFMPRE:NR_PT 100000", b":WFMPRE:NR_PT 0")}[mutate]
    assert bad != raw
    p = tmp_path / "bad.isf"
    p.write_bytes(bad)
    assert main(["analyze", str(p), "--no-cs"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("spigap: error: ") and err.count("\n") == 1


# ------------------------------------------------ Agilent/Keysight .bin, CSV, XY
def test_agilent_bin_csv_and_xy_are_one_acquisition():
    """The MSO7034A saved one acquisition as BIN, CSV and ASCII XY (one file per
    channel): the same volts and the same edges."""
    info, v = volts(DATA / "scope_30.bin")
    assert info.format == "Keysight/Agilent .bin v10" and info.channels == ["1", "2"]
    rows = np.loadtxt(DATA / "scope_3.csv", delimiter=",", skiprows=2, max_rows=999)
    for k, name in enumerate(("1", "2")):
        assert np.max(np.abs(v[name][:999] - rows[:, k + 1])) < 1e-6
    bin_e = edges_s(DATA / "scope_30.bin", ["1", "2"])
    csv_e = edges_s(DATA / "scope_3.csv", ["1", "2"])
    xy_e = edges_s([DATA / "scope_10_1.csv", DATA / "scope_10_2.csv"], ["1", "2"])
    for ch in ("1", "2"):
        assert len(bin_e[ch]) == 5            # 1.2 kHz over 2 ms
        same_edges(bin_e[ch], csv_e[ch], 1e-9)
        same_edges(bin_e[ch], xy_e[ch], 1e-9)


def test_coarser_saves_give_the_same_edges_to_one_coarse_sample():
    """100 points (scope_27.bin, scope_7_*.csv) against 1000 points (scope_30.bin): ±1 sample of 20 µs."""
    fine = edges_s(DATA / "scope_30.bin", ["1", "2"])
    for coarse in (DATA / "scope_27.bin", [DATA / "scope_7_1.csv", DATA / "scope_7_2.csv"]):
        c = edges_s(coarse, ["1", "2"])
        for ch in ("1", "2"):
            same_edges(c[ch], fine[ch], 20e-6 * 1.01)


def test_mismatched_time_bases_are_refused(capsys):
    assert main(["analyze", str(DATA / "scope_27.bin"), str(DATA / "scope_10_2.csv")]) == 2
    err = capsys.readouterr().err
    assert "the files are not one acquisition" in err and err.count("\n") == 1


def test_two_captures_given_to_analyze_are_sent_to_batch(capsys, tmp_path):
    """Two logic-analyzer sessions given to analyze (a user's `spigap analyze captures/*.sr`) are
    no acquisition of several files: the line says so, and names the command that analyzes each,
    which runs as printed."""
    import shlex

    from conftest import CAPTURES, spigap_main

    a, b = CAPTURES / "mcp3008-rpi3-k4.4-b10.sr", CAPTURES / "mcp3008-rpi3-k4.4-b100.sr"
    assert main(["analyze", str(a), str(b)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "the files are not one acquisition" in err
    cmd = err.rsplit("to analyze each as a capture of its own: ", 1)[1].rstrip(")")
    assert cmd == f"spigap batch {a} {b}"
    argv = shlex.split(cmd)[1:]
    p = spigap_main(*argv, "-j", "1", "-q", "--format", "json", "-o", tmp_path / "rows.json")
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("name", ["agilent_4.bin", "MSO5000-A.bin", "DHO824-ch12.bin", "scope_30.bin"])
def test_bin_volts_are_rigolwfms(name):
    import RigolWFM.wfm as rw

    w = rw.Wfm.from_file(str(DATA / name))
    chans = [c for c in w.channels if c.enabled]
    info, v = volts(DATA / name)
    assert len(chans) == len(v) >= 1
    for c, (n, ours) in zip(chans, v.items()):
        assert np.array_equal(np.asarray(c.volts, np.float64), ours), n
        assert c.seconds_per_point == pytest.approx(info.tick_s)
        assert c.times[0] == pytest.approx(info.time_offset_s)


def test_rigol_mso5074_bin_without_time_base_is_refused(capsys):
    assert main(["analyze", str(DATA / "MSO5074-A.bin")]) == 2
    assert "writes no usable time base" in capsys.readouterr().err


# ------------------------------------------------------------------ LeCroy
@pytest.mark.parametrize("name", ["lecroy_2.trc", "lecroy_4.trc"])
def test_trc_is_lecroyparsers(name):
    import lecroyparser

    ref = lecroyparser.ScopeData(str(DATA / name))
    info, v = volts(DATA / name)
    (ours,) = v.values()
    assert len(ours) == len(ref.y)
    assert np.max(np.abs(ours - ref.y)) <= 1e-6 * max(1.0, float(np.max(np.abs(ref.y))))
    assert info.time_offset_s == pytest.approx(ref.x[0])
    assert info.tick_s == pytest.approx(ref.horizInterval)
    assert info.format.startswith("LeCroy .trc (LECROY")


def test_trc_sequence_mode_is_refused(capsys):
    assert main(["analyze", str(DATA / "lecroy_1.trc")]) == 2
    assert "sequence-mode file (200 segments)" in capsys.readouterr().err


# --------------------------------------------------------------- CSV vendors
@pytest.mark.parametrize("name,vendor", [("RTC.csv", "Tektronix"), ("scope_3.csv", "Keysight"),
                                         ("scope_7_1.csv", "Keysight"), ("DS1054Z-A.csv", "Rigol")])
def test_real_csv_exports_are_named_by_their_vendor(name, vendor, rtc_csv):
    path = rtc_csv if name == "RTC.csv" else DATA / name
    with open_capture(path) as r:
        assert r.info.format == f"oscilloscope CSV ({vendor})"


# header layouts as the vendors' manuals and public exports show them (no real file at hand)
HEADERS = {
    "Siglent": "Record Length,Analog:6,\nSample Interval,Analog:1.000000E-07,\nVertical Units,CH1:V,,\n"
               "Second,Value\n",
    "LeCroy": "LECROYWR204M,51184,Waveform\nSegments,1,SegmentSize,6\nSegment,TrigTime,TimeSinceSegment1\n"
              "#1,22-Jan-2015 11:35:11,0\nTime,Ampl\n",
    "PicoScope": "Time,Channel A\n(us),(V)\n\n",
    "R&S": "in s,C1 in V\n",
}


@pytest.mark.parametrize("vendor", list(HEADERS))
def test_csv_vendor_from_its_header(vendor, tmp_path):
    step = 0.1 if vendor == "PicoScope" else 1e-7
    rows = "".join(f"{i * step:.6E},{3.3 if i % 2 else 0.0}\n" for i in range(6))
    p = tmp_path / "x.csv"
    p.write_text(HEADERS[vendor] + rows)
    with open_capture(p) as r:
        assert r.info.format == f"oscilloscope CSV ({vendor})"
        assert r.info.tick_s == pytest.approx(1e-7)


# --------------------------------------------------------------- memory
def test_isf_memory_does_not_grow_with_record_length(tmp_path, monkeypatch):
    """A record 8x longer reads in the same memory (slices of SLICE samples)."""
    import tracemalloc

    from spigap.io import scopefile

    monkeypatch.setattr(scopefile, "SLICE", 1 << 16)
    head = ISF[1].read_bytes()[:ISF[1].read_bytes().index(b":CURVE") + len(":CURVE ")]
    peaks = []
    for n in (1 << 20, 1 << 23):
        t = np.arange(n)
        raw = np.where((t // 37) % 2 == 0, -16000, 16000).astype(">i2").tobytes()
        text = head.replace(b"NR_PT 100000", b"NR_PT %d" % n)
        size = str(len(raw)).encode()
        p = tmp_path / f"{n}.isf"
        p.write_bytes(text + b"#" + str(len(size)).encode() + size + raw + b"\n")
        tracemalloc.start()
        with open_capture(p) as r:
            edges = sum(len(b) for b in r.edges(["Ch2"]))
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert edges == n // 37 + 1
    assert peaks[1] < 1.25 * peaks[0] + (2 << 20), f"{peaks[0] / 1e6:.1f} MB -> {peaks[1] / 1e6:.1f} MB"


def test_copied_isf_pair_groups_by_name(tmp_path):
    from spigap.io.combine import group_acquisitions

    for p in ISF:
        shutil.copy(p, tmp_path / p.name)
    paths = sorted(str(p) for p in tmp_path.iterdir()) + [str(DATA / "scope_27.bin")]
    assert group_acquisitions(paths) == [[str(tmp_path / "tek0000CH1.isf"), str(tmp_path / "tek0000CH2.isf")],
                                         [str(DATA / "scope_27.bin")]]


# ------------------------------------------------------------- Keysight .h5
def test_h5_is_what_h5py_reads_and_the_attributes_say():
    import h5py

    with h5py.File(DATA / "keysight1.h5", "r") as f:
        g = f["Waveforms/Memory 1"]
        ref = g["Memory 1Data"][:]
        xinc, xorg = float(g.attrs["XInc"]), float(g.attrs["XOrg"])
    info, v = volts(DATA / "keysight1.h5")
    assert info.format == "Keysight .h5 (MSO9254A)" and info.channels == ["Memory 1"]
    assert np.array_equal(v["Memory 1"], ref.astype(np.float64))
    assert info.tick_s == xinc and info.time_offset_s == xorg and info.n_ticks == 100_000


def test_h5_without_h5py_says_how_to_get_it(monkeypatch, capsys):
    import sys

    monkeypatch.setitem(sys.modules, "h5py", None)       # import h5py now raises ImportError
    assert main(["analyze", str(DATA / "keysight1.h5")]) == 2
    err = capsys.readouterr().err
    assert "needs the Python package 'h5py'" in err and "install spigap[scopes]" in err and err.count("\n") == 1


def test_h5_that_is_not_a_waveform_is_one_line(tmp_path, capsys):
    import h5py

    p = tmp_path / "other.h5"
    with h5py.File(p, "w") as f:
        f["x"] = np.arange(10)
    assert main(["analyze", str(p)]) == 2
    err = capsys.readouterr().err
    assert "not a Keysight/Agilent waveform file" in err and err.count("\n") == 1


def test_files_sharing_names_get_their_stems():
    with open_capture([DATA / "scope_30.bin", DATA / "scope_30.bin"]) as r:
        assert r.info.channels == ["scope_30:1", "scope_30:2", "scope_30:1_2", "scope_30:2_2"]
        blocks = list(check_stream(r.edges(["scope_30:1", "scope_30:1_2"]), 2))
        states = np.concatenate([b.states for b in blocks])
        assert set(states.tolist()) <= {0, 3}          # the same channel twice: always equal


def test_threshold_goes_to_the_file_with_the_channel(capsys):
    assert main(["analyze", *map(str, ISF), "--threshold", "Ch1=1.0,0.2", "--threshold", "Ch2=2.0,0.2",
                 "--no-cs", "--clk", "Ch2", "--mosi", "Ch1", "--format", "json"]) == 0
    import json

    warnings = json.loads(capsys.readouterr().out)["warnings"]
    assert not any("auto" in w for w in warnings)
    assert main(["analyze", *map(str, ISF), "--threshold", "Ch9=1.0"]) == 2
    assert "--threshold names channel 'Ch9'" in capsys.readouterr().err


# --------------------------------------------------------- damaged files
@pytest.mark.parametrize("name", ["tek0000CH1.isf", "scope_30.bin", "DHO824-ch12.bin", "lecroy_4.trc",
                                  "tm:int8", "tm:ff_int16", "tm:v2_int16", "keysight1.h5",
                                  "DS1054Z-ch1SquareCH4Uart.wfm", "DS1102E-A.wfm", "DS1204B-A.wfm",
                                  "DS1202CA-A.wfm", "DS2072A-5.wfm", "DS2072A-8.wfm", "DS4022-A.wfm",
                                  "SDS00001.bin.gz"])
def test_damaged_scope_files_are_errors_not_crashes(name, tmp_path, request):
    """Cut anywhere or with header bytes overwritten: the reader gives edges or a
    SpigapError (one line, exit 2), never another exception (exit 3). tm:NAME: a .wfm
    tm_data_types wrote (tests/tekwfm_oracle.py); NAME.gz: the file gunzipped."""
    from spigap.errors import SpigapError

    if name.startswith("tm:"):
        src = request.getfixturevalue("tek_wfm_files")[name[3:]].path
    else:
        src = DATA / name
    raw = src.read_bytes()
    if src.suffix == ".gz":
        raw, src = gzip.decompress(raw), src.with_suffix("")
    rng = np.random.default_rng(23)
    p = tmp_path / src.name
    for k in range(40):
        b = bytearray(raw)
        if k % 2:
            b = b[:int(rng.integers(0, len(raw)))]
        else:
            at = rng.integers(0, min(len(raw), 1200), size=4)
            b_arr = np.frombuffer(bytes(b), np.uint8).copy()
            b_arr[at] = rng.integers(0, 256, size=4)
            b = bytearray(b_arr.tobytes())
        p.write_bytes(bytes(b))
        try:
            with open_capture(p) as r:
                for _ in check_stream(r.edges(r.info.channels[:1]), 1, path=str(p)):
                    pass
        except SpigapError as e:
            assert "\n" not in str(e)
