"""The .sr reader: format variants, chunking, streaming pieces, metadata quirks."""

from __future__ import annotations

import zipfile

import numpy as np
import pytest

from spigap.io import sr as srmod
from spigap.io import zipmembers
from spigap.io.sr import parse_metadata, parse_samplerate
from spigap.synth import Scenario, tracks, write_sr
from util import analyze

FIELDS = ("start", "end", "partial_start", "partial_end", "n_bits", "first_edge", "last_edge",
          "cs_setup", "cs_hold", "gap_before", "gap_kind", "mosi", "miso", "word_first", "word_last",
          "pair_gap", "pair_inter_transfer", "min_half")


def same_analysis(a, b):
    for f in FIELDS:
        x, y = getattr(a, f), getattr(b, f)
        assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), f
    assert a.period_ticks == b.period_ticks
    assert a.grouping == b.grouping


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("base")
    sc = Scenario.from_toml(None, {"transfers_per_message": 5, "messages": 40, "sigma": "40ns",
                                   "segments": [1, 2], "inter_transfer": "3us", "seed": 9,
                                   "stall_probability": 0.02})
    tl = sc.timeline()
    trs = tracks(tl, sc.channels, sc.samplerate)
    n = int(round(tl.end_time * sc.samplerate))
    path = tmp / "base.sr"
    write_sr(path, trs, sc.samplerate, n)
    return sc, trs, n, path, analyze(path)


def test_random_chunk_sizes_give_identical_results(tmp_path, base):
    sc, trs, n, _, ref = base
    rng = np.random.default_rng(1)
    for k in range(4):
        sizes = rng.integers(1, 3000, 64).tolist()   # cuts through words, CS edges and gaps
        path = tmp_path / f"chunks{k}.sr"
        write_sr(path, trs, sc.samplerate, n, chunk_bytes=sizes)
        with zipfile.ZipFile(path) as z:
            assert len([m for m in z.namelist() if m.startswith("logic-1-")]) > 100
        same_analysis(analyze(path), ref)


def test_small_pieces_and_scan_windows_give_identical_results(monkeypatch, base):
    *_, path, ref = base
    monkeypatch.setattr(srmod, "WHOLE_MEMBER_BYTES", 0)       # force the streaming path
    monkeypatch.setattr(zipmembers, "PIECE_BYTES", 4099)
    monkeypatch.setattr(zipmembers, "COMP_SLICE", 513)
    monkeypatch.setattr(srmod, "SCAN_BYTES", 640)
    same_analysis(analyze(path), ref)


@pytest.mark.parametrize("unitsize", [1, 2, 3, 4, 5, 6, 7, 8])
def test_unitsizes_and_sparse_probes(tmp_path, base, unitsize):
    sc, trs, n, _, ref = base
    hi = unitsize * 8
    probes = sorted({1, hi, max(2, hi - 9), max(3, hi // 2)}) if hi >= 4 else [1, 2, 3, 4]
    probes = probes[:4] if len(probes) == 4 else [1, 3, 6, hi]
    path = tmp_path / f"us{unitsize}.sr"
    write_sr(path, trs, sc.samplerate, n, probe_numbers=probes, unitsize=unitsize, chunk_bytes=[4096, 777])
    same_analysis(analyze(path), ref)


def test_version1_single_member_with_indented_metadata(tmp_path, base):
    sc, trs, n, _, ref = base
    path = tmp_path / "v1.sr"
    write_sr(path, trs, sc.samplerate, n, version=1, single_member=True)
    # rewrite the metadata the way sigrok 0.2 did: spaces around '=', an indented trigger line
    with zipfile.ZipFile(path) as z:
        members = {m: z.read(m) for m in z.namelist()}
    md = members["metadata"].decode().replace("=", " = ").replace("probe1 = SCLK", "probe1 = SCLK\n trigger1 = 0")
    members["metadata"] = md.encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for m, data in members.items():
            z.writestr(m, data)
    a = analyze(path)
    assert a.info.channels[0] == "SCLK"
    same_analysis(a, ref)


def test_analog_members_are_ignored(tmp_path, base):
    sc, trs, n, _, ref = base
    path = tmp_path / "analog.sr"
    write_sr(path, trs, sc.samplerate, n)
    with zipfile.ZipFile(path, "a") as z:
        z.writestr("analog-1-5-1", np.zeros(1000, "<f4").tobytes())
    same_analysis(analyze(path), ref)


def test_samplerate_strings_follow_libsigrok():
    assert parse_samplerate("16 MHz") == 16e6
    assert parse_samplerate("31.5 kHz") == 31.5e3
    assert parse_samplerate("2 mHz") == 2e6        # libsigrok: m means mega
    assert parse_samplerate("1 GHz") == 1e9
    assert parse_samplerate("500 KHz") == 500e3
    assert parse_samplerate("10 Hz") == 10


def test_metadata_parser_keeps_indented_keys_separate():
    md = parse_metadata("[device 1]\nprobe1 = TRG\n trigger1 = 0\nprobe2=CS\n")
    assert md["device 1"] == {"probe1": "TRG", "trigger1": "0", "probe2": "CS"}


def test_samplerate_override_and_implausible_warning(tmp_path, base):
    sc, trs, n, _, ref = base
    path = tmp_path / "slow.sr"
    write_sr(path, trs, sc.samplerate, n, samplerate_text="5 Hz")
    a = analyze(path)
    assert any("implausible" in w and "--samplerate" in w for w in a.warnings)
    b = analyze(path, samplerate=sc.samplerate)
    assert b.tick_s == pytest.approx(1 / sc.samplerate)
    assert any("overrides" in w for w in b.warnings)
    same_analysis(b, ref)
