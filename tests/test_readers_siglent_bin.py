"""Siglent .bin (SDS1000X-E / SDS2000X-E layout): a real SDS2000X-E file (SDS00001.bin of
github Valtuda/SigUtils, MIT; tests/data/scopes/README.md), stored gzip'ed.

Oracle: SigUtils (Valtuda/SigUtils commit 86b2a8c, SigUtils.py, a reader we did not write)
run on the same file at authoring time (2026-11-25, numpy 2); its readings are the numbers
below (SIGUTILS): channel on/off, V/div, offset, time/div, delay, sample rate, samples,
the sha256 of the sample codes it reads for CH1, volts at fixed indices, min/max, sum and
sum of squares of ``V_arr(1)``, ``t_arr()[0]``. And the signal itself: a 1 kHz, 4 Vpp
sine (edges at 0 V every 500 us).
"""

from __future__ import annotations

import gzip
import hashlib
import pathlib
import struct

import numpy as np
import pytest

from spigap.cli import main
from spigap.io import check_stream, open_capture

DATA = pathlib.Path(__file__).resolve().parent / "data" / "scopes"
SHA256 = "8eb8072d8264e209a98c35a64ba5db198851e90ecb63beb544ca70769c04ac93"   # of the original file

# SigUtils' SigWaveForm on SDS00001.bin
SIGUTILS = {
    "on": (1, 0, 0, 0), "digital_on": 0,
    "vdiv": 1.0, "offset": 0.0,            # CH1: value 1.0 / 0.0, magnitude 8, unit 0 (V)
    "time_div": 0.0002, "time_delay": 0.0, "wave_length": 2_800_000, "sample_rate": 1e9,
    "t0": -0.0014,
    "codes_sha256": "94c430010db72076d4ab8bb44b92739f53081b06d0b97ed394a09235888e8777",
    "volts_at": {0: -1.88, 1000: -1.88, 325_000: 0.16, 1_400_000: 1.12, 2_799_999: 0.12},
    "min": -2.04, "max": 2.04, "sum": 211288.79999999993, "sum_sq": 5859173.1392,
}


@pytest.fixture(scope="module")
def sds(tmp_path_factory) -> pathlib.Path:
    p = tmp_path_factory.mktemp("siglent") / "SDS00001.bin"
    p.write_bytes(gzip.decompress((DATA / "SDS00001.bin.gz").read_bytes()))
    assert hashlib.sha256(p.read_bytes()).hexdigest() == SHA256
    return p


def ours(path, **kw):
    from spigap.io.siglent_bin import SiglentBinReader

    with open_capture(path, **kw) as r:
        assert isinstance(r, SiglentBinReader)
        return r.info, {wf.name: wf for wf in r.waveforms}


def edge_ticks(path, channel, **kw) -> np.ndarray:
    with open_capture(path, **kw) as r:
        blocks = list(check_stream(r.edges([channel]), 1, path=str(path)))
    return np.concatenate([b.ticks for b in blocks])[1:]


def _patched(tmp_path, src, at, data, name="SDS00002.bin") -> pathlib.Path:
    raw = bytearray(src.read_bytes())
    raw[at:at + len(data)] = data
    p = tmp_path / name
    p.write_bytes(bytes(raw))
    return p


# ------------------------------------------------------------- the real file
def test_header_and_volts_are_sigutils(sds):
    info, waves = ours(sds)
    assert info.format == "Siglent SDS1000X-E/SDS2000X-E .bin"
    assert info.channels == ["CH1"]                   # SigUtils: ch1 on, ch2..ch4 off, digital off
    wf = waves["CH1"]
    assert wf.n == SIGUTILS["wave_length"]
    assert info.tick_s == pytest.approx(1 / SIGUTILS["sample_rate"], rel=1e-15)
    assert info.time_offset_s == pytest.approx(SIGUTILS["t0"], rel=1e-12)
    assert wf.scale == pytest.approx(SIGUTILS["vdiv"] / 25, rel=1e-15)
    codes = np.fromfile(sds, np.uint8, count=wf.n, offset=wf.offset)
    assert hashlib.sha256(codes.tobytes()).hexdigest() == SIGUTILS["codes_sha256"]
    v = wf.volts(0, wf.n)
    for i, want in SIGUTILS["volts_at"].items():
        assert v[i] == pytest.approx(want, abs=1e-12)
    assert v.min() == pytest.approx(SIGUTILS["min"], abs=1e-12)
    assert v.max() == pytest.approx(SIGUTILS["max"], abs=1e-12)
    assert v.sum() == pytest.approx(SIGUTILS["sum"], rel=1e-12)
    assert np.sum(v * v) == pytest.approx(SIGUTILS["sum_sq"], rel=1e-12)
    assert not info.warnings                          # 0 V offset, unit V: nothing to say


def test_sine_crosses_zero_every_500_us(sds):
    """The 1 kHz sine: with --threshold 0 V (hysteresis 0.2 V) an edge every half period."""
    t = edge_ticks(sds, "CH1", threshold="CH1=0,0.2") * 1e-9
    assert len(t) == 5
    assert np.all(np.abs(np.diff(t) - 500e-6) < 1e-6)
    assert np.all(np.abs(t[2:] - t[:-2] - 1e-3) < 0.5e-6)      # whole periods: hysteresis cancels
    assert len(edge_ticks(sds, "CH1", threshold="CH1=2.5")) == 0   # above the 2.04 V top
    assert len(edge_ticks(sds, "CH1", threshold="CH1=0,0.2", deglitch=600_000)) == 0   # 500 us pulses go


def test_convert_to_sr_gives_the_same_edges(sds, tmp_path):
    out = tmp_path / "sine.sr"
    assert main(["convert", str(sds), "-o", str(out), "--threshold", "0,0.2"]) == 0
    assert np.array_equal(edge_ticks(out, "CH1"), edge_ticks(sds, "CH1", threshold="0,0.2"))


def test_other_readers_files_are_not_claimed():
    """No magic: the sniff must not take any other file of the repository for a Siglent one."""
    from spigap.io.siglent_bin import sniff

    root = pathlib.Path(__file__).resolve().parent.parent
    files = [p for d in ("tests", "captures") for p in (root / d).rglob("*") if p.is_file()]
    assert len(files) > 100
    claimed = [p for p in files if sniff(p.read_bytes()[:4096])]
    assert claimed == []


# ------------------------------------------------------------- refused, damaged
def test_unknown_bin_names_the_vendors(tmp_path, capsys):
    p = tmp_path / "mystery.bin"
    p.write_bytes(bytes(range(256)) * 40)
    assert main(["analyze", str(p)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Saleae" in err and "Keysight/Agilent" in err and "Rigol" in err \
        and "Siglent" in err


@pytest.mark.parametrize("case,message", [
    ("v4", "Siglent .bin version 4 is not read"),
    ("v2", "Siglent .bin version 2 is not read"),
    ("digital", "digital (logic) channels on is not read"),
    ("rate", "sample interval"),
    ("scale", "vertical scale"),
    ("cut-header", "the header is cut"),
    ("no-samples", "before the samples"),
    ("delay-magnitude", "not a .bin spigap reads"),
])
def test_unsupported_and_damaged_are_one_line(sds, tmp_path, capsys, case, message):
    path = {
        # the later layouts as Siglent's note / siglent-bin's SPEC.md give their start:
        # int32 version, int32 data offset, four int32 channel flags
        "v4": lambda: _patched(tmp_path, sds, 0, struct.pack("<6I", 4, 0x1000, 1, 0, 0, 0)),
        "v2": lambda: _patched(tmp_path, sds, 0, struct.pack("<6I", 2, 0x800, 1, 1, 0, 0)),
        "digital": lambda: _patched(tmp_path, sds, 0x90, struct.pack("<I", 1)),
        "rate": lambda: _patched(tmp_path, sds, 0xF8, struct.pack("<dI", 1e-3, 0)),     # 1e-27 Sa/s
        "scale": lambda: _patched(tmp_path, sds, 0x10, struct.pack("<dI", 1e-300, 0)),
        "cut-header": lambda: _cut(tmp_path, sds, 200),
        "no-samples": lambda: _cut(tmp_path, sds, 0x400),
        # a damaged magnitude code: 1000 ** (code - 8) overflowed (OverflowError, exit 3)
        "delay-magnitude": lambda: _patched(tmp_path, sds, 0xE4 + 8, struct.pack("<I", 0xFFFFFFFF)),
    }[case]()
    assert main(["analyze", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("spigap: error: ") and message in err and err.count("\n") == 1, err


def _cut(tmp_path, src, size, name="SDS00003.bin") -> pathlib.Path:
    p = tmp_path / name
    with open(src, "rb") as f:
        p.write_bytes(f.read(size))
    return p


def test_cut_short_gives_the_samples_it_holds(sds, tmp_path, capsys):
    cut = _cut(tmp_path, sds, 0x800 + 1_500_000)
    info, waves = ours(cut)
    assert waves["CH1"].available() == 1_500_000
    assert any("cut short" in w for w in info.warnings)
    whole = edge_ticks(sds, "CH1", threshold="0,0.2")
    out = tmp_path / "cut.sr"
    assert main(["convert", str(cut), "-o", str(out), "--threshold", "0,0.2"]) == 2
    err = capsys.readouterr().err
    (line,) = [x for x in err.splitlines() if x.startswith("spigap: error: ")]
    assert "the file ends after sample 1500000 of 2800000" in line and "Traceback" not in err
    assert np.array_equal(edge_ticks(out, "CH1"), whole[whole < 1_500_000])


def test_offset_is_subtracted_and_its_sign_is_said(sds, tmp_path):
    """CH1 with a 500 mV offset (value 500, magnitude 7 = milli): volts 0.5 V lower than at 0 V,
    and a warning names the other reading (Siglent's binary-file note adds it)."""
    p = _patched(tmp_path, sds, 0x50, struct.pack("<dII", 500.0, 7, 0))
    info, waves = ours(p)
    _, ref = ours(sds)
    assert np.allclose(waves["CH1"].volts(0, 1000), ref["CH1"].volts(0, 1000) - 0.5, atol=1e-12)
    assert any("offset 0.5 V" in w and "adds it" in w for w in info.warnings)


# ------------------------------------------------------------- bounded
def test_slices_read_what_the_whole_record_holds(sds, monkeypatch):
    from spigap.io import scopefile

    monkeypatch.setattr(scopefile, "SLICE", 100_003)
    _, waves = ours(sds)
    wf = waves["CH1"]
    whole = wf.volts(0, wf.n)
    assert np.array_equal(np.concatenate(list(wf.chunks(wf.n))), whole)
    assert np.array_equal(wf.volts(7, 200_008), whole[7:200_008])


def _big(tmp_path, sds, n: int) -> pathlib.Path:
    """The real file's header over ``n`` samples: a square of 37-sample halves."""
    head = bytearray(sds.read_bytes()[:0x800])
    struct.pack_into("<I", head, 0xF4, n)
    s = np.where((np.arange(n) // 37) % 2 == 0, 60, 200).astype(np.uint8)
    p = tmp_path / f"{n}.bin"
    p.write_bytes(bytes(head) + s.tobytes())
    return p


def test_memory_does_not_grow_with_record_length(sds, tmp_path, monkeypatch):
    """A record 8x longer reads in the same memory (slices of SLICE samples), every edge found."""
    import tracemalloc

    from spigap.io import scopefile

    monkeypatch.setattr(scopefile, "SLICE", 1 << 16)
    peaks = []
    for n in (1 << 20, 1 << 23):
        p = _big(tmp_path, sds, n)
        tracemalloc.start()
        with open_capture(p) as r:
            edges = sum(len(b) for b in r.edges(["CH1"]))
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        assert edges == (n - 1) // 37 + 1
    assert peaks[1] < 1.25 * peaks[0] + (2 << 20), f"{peaks[0] / 1e6:.1f} MB -> {peaks[1] / 1e6:.1f} MB"
