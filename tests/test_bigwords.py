"""Words above 64 bits (--wordsize 65..1024): same words as sigrok-cli's spi decoder,
same results on both engines, inter-byte gaps only between the long words."""

from __future__ import annotations

import json

import numpy as np
import pytest

from spigap import native
from spigap.cli import main
from spigap.core.bigwords import chunk_wordsize
from conftest import run_sigrok
from test_engines import FIELDS
from util import analyze, assert_within_one_sample, synth


def sigrok_words(path, ws, line, extra=""):
    out = run_sigrok(["-i", str(path), "-P", f"spi:clk=SCLK:mosi=MOSI:miso=MISO:cs=CS:wordsize={ws}{extra}",
                      "-A", f"spi={line}-data"], decoders_dir=None)
    return [int(ln.split(": ")[1], 16) for ln in out.splitlines() if ln.strip()]


def engines(path, **cfg):
    b = analyze(path, **cfg)
    if native.library() is not None:
        with native.use_engine("numpy"):
            a = analyze(path, **cfg)
        assert (a.engine, b.engine) == ("numpy", "c")
        for f in FIELDS:
            x, y = getattr(a, f), getattr(b, f)
            assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), f
        assert a.period_ticks == b.period_ticks and a.warnings == b.warnings
    return b


def test_chunk_sizes():
    assert [chunk_wordsize(w) for w in (8, 64, 65, 67, 96, 128, 152, 1024)] == [8, 64, 13, 1, 48, 64, 38, 64]


@pytest.fixture(scope="module")
def w152(tmp_path_factory):
    d = tmp_path_factory.mktemp("w152")
    sc, tl, path = synth(d, wordsize=152, words_per_transfer=3, messages=12, transfers_per_message=2,
                         samplerate=20e6, sclk=1e6, mosi="random", miso="random", sigma="100ns", seed=7)
    return sc, tl, path


def test_152_bit_words_decode_like_sigrok(sigrok_cli, w152):
    sc, tl, path = w152
    a = engines(path, wordsize=152)
    assert a.mosi.dtype == object and len(a.mosi) == 72
    truth = tl.truth()
    for line, ours in (("mosi", a.mosi), ("miso", a.miso)):
        theirs = sigrok_words(path, 152, line)
        assert list(ours) == theirs == [int(v) for v in truth[line]]
    assert max(a.mosi) > 1 << 140          # really long words, not truncated to 64 bits
    # gaps only between the 152-bit words: 2 per transfer, as synthesized
    assert len(a.gap_values("inter_byte")) == 2 * a.n
    assert_within_one_sample(a.gap_values("inter_byte"), truth["inter_byte"], a.tick_s, "inter_byte")
    assert not a.warnings


def test_trailing_chunks_and_lsb_first(sigrok_cli, w152):
    sc, tl, path = w152
    # 456 bits per transfer as 304-bit words: one word, 152 trailing bits (4 chunks of 38)
    a = engines(path, wordsize=304)
    assert list(a.n_words) == [1] * a.n and list(a.n_bits) == [456] * a.n
    assert list(a.mosi) == sigrok_words(path, 304, "mosi")
    assert len(a.gap_values("inter_byte")) == 0
    assert any("do not fill a 304-bit word" in w for w in a.warnings)
    b = engines(path, wordsize=152, lsb_first=True)
    assert list(b.miso) == sigrok_words(path, 152, "miso", ":bitorder=lsb-first")


def test_prime_wordsize_mode3(sigrok_cli, tmp_path):
    sc, tl, path = synth(tmp_path, wordsize=67, mode=3, words_per_transfer=2, messages=6, samplerate=10e6,
                         sclk=1e6, mosi="random", miso="counter", seed=3)
    a = engines(path, wordsize=67, cpol=1, cpha=1)
    assert list(a.mosi) == sigrok_words(path, 67, "mosi", ":cpol=1:cpha=1") == [int(v) for v in tl.truth()["mosi"]]


def test_json_and_csv_write_long_words_as_hex(w152, tmp_path, capsys):
    sc, tl, path = w152
    out = tmp_path / "a.json"
    assert main(["analyze", str(path), "--wordsize", "152", "--format", "json", "--transfers", "-o", str(out)]) == 0
    d = json.loads(out.read_text())
    first = d["transfers"][0]["mosi"][0]
    assert isinstance(first, str) and int(first, 16) == int(tl.truth()["mosi"][0]) and len(first) == 2 + 38
    assert d["settings"]["wordsize"] == 152
    csv_out = tmp_path / "a.csv"
    assert main(["analyze", str(path), "--wordsize", "152", "--format", "csv", "-o", str(csv_out)]) == 0
    row = csv_out.read_text().splitlines()[1].split(",")
    assert int(row[6].split()[0], 16) == int(tl.truth()["mosi"][0])


def test_wordsize_limit(capsys):
    assert main(["analyze", "x.sr", "--wordsize", "1025"]) == 2
    assert "must be 1..1024" in capsys.readouterr().err
