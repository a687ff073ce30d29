"""VCD reader: declarations, value syntax, chunk boundaries, damage, no Python per value change."""

from __future__ import annotations

import pathlib
import re
import sys

import numpy as np
import pytest

from spigap.api import SpiConfig, analyze_device
from spigap.errors import CaptureTruncated, InputError
from spigap.io import open_capture
from spigap.io import vcd as vcd_mod


def stream(path, chans, **kw):
    with open_capture(path, **kw) as r:
        blocks = list(r.edges(chans))
        end = r.end_tick
        info = r.info
    t = np.concatenate([b.ticks for b in blocks])
    s = np.concatenate([b.states for b in blocks])
    return t.tolist(), s.tolist(), end, info


HEADER = """$date today $end
$version hand written $end
$timescale {ts} $end
$scope module top $end
$var wire 1 ! clk $end
$var wire 1 " cs $end
$var reg 4 # bus [3:0] $end
$scope module sub $end
$var wire 1 $ clk $end
$upscope $end
$upscope $end
$enddefinitions $end
"""


def test_scalars_vectors_and_comments(tmp_path):
    p = tmp_path / "a.vcd"
    p.write_text(HEADER.format(ts="10 ns") + """$dumpvars
0! 1" b0 # 0$ $end
#0
#5
1! b1010 #
#7 0"
$comment b1 # 1! #3 $end
#10 0!
#12 1! bx #
#20
""")
    t, s, end, info = stream(p, ["top.clk", "cs", "bus[3]", "bus[1]", "bus[0]"])
    assert info.channels == ["top.clk", "cs", "bus[3]", "bus[2]", "bus[1]", "bus[0]", "top.sub.clk"]
    assert info.tick_s == pytest.approx(1e-8)
    assert t == [0, 5, 7, 10, 12]
    assert s == [0b00010, 0b01111, 0b01101, 0b01100, 0b00001]
    assert end == 20        # a final timestamp without changes is the end of the dump itself
    assert any("x/z" in w for w in info.warnings)


@pytest.mark.parametrize("ts, seconds", [("1ns", 1e-9), ("1 ps", 1e-12), ("100 us", 1e-4), ("10fs", 1e-14)])
def test_timescales(tmp_path, ts, seconds):
    p = tmp_path / "t.vcd"
    p.write_text(HEADER.format(ts=ts) + "#0\n0!\n#3\n1!\n")
    with open_capture(p) as r:
        assert r.info.tick_s == pytest.approx(seconds)


def test_first_timestamp_is_tick_zero_and_values_before_it_are_initial(tmp_path):
    p = tmp_path / "o.vcd"
    p.write_text(HEADER.format(ts="1ns") + "1!\n#1000\n#1004\n0!\n#1010\n1!\n")
    t, s, end, _ = stream(p, ["top.clk"])
    assert t == [0, 4, 10] and s == [1, 0, 1] and end == 11


def test_identifiers_with_special_characters_and_vector_ids_starting_with_dollar_or_hash(tmp_path):
    p = tmp_path / "id.vcd"
    p.write_text("""$timescale 1ns $end
$var wire 1 #a a $end
$var wire 2 $$ b [1:0] $end
$var wire 1 b c $end
$var wire 1 !!~ d $end
$enddefinitions $end
#0 0#a b00 $$ 0b 0!!~
#1 1#a
#2 b10 $$ 1b
#3 b1 $$ 1!!~
#4
""")
    t, s, end, _ = stream(p, ["a", "b[1]", "b[0]", "c", "d"])
    assert t == [0, 1, 2, 3]
    assert s == [0, 0b00001, 0b01011, 0b11101]


def test_vector_value_shorter_than_the_variable_is_zero_extended(tmp_path):
    p = tmp_path / "v.vcd"
    p.write_text("$timescale 1ns $end\n$var wire 8 % d [7:0] $end\n$enddefinitions $end\n"
                 "#0 b11111111 %\n#1 b1 %\n#2\n")
    t, s, _, _ = stream(p, ["d[7]", "d[0]"])
    assert t == [0, 1] and s == [0b11, 0b10]


@pytest.mark.parametrize("chunk", [7, 13, 64, 1 << 20])
def test_chunk_boundaries_do_not_matter(tmp_path, monkeypatch, chunk):
    """Tokens, vector/id pairs, comments and timestamps split across reads give the same stream."""
    rng = np.random.default_rng(0)
    lines = []
    tick = 0
    for _ in range(300):
        tick += int(rng.integers(1, 5))
        lines.append(f"#{tick}")
        if rng.random() < 0.1:
            lines.append("$comment some b11 words #5 $end")
        lines.append(f"{rng.integers(0, 2)}!")
        if rng.random() < 0.5:
            lines.append(f"b{rng.integers(0, 16):b} #")
    p = tmp_path / "c.vcd"
    p.write_text(HEADER.format(ts="1ns") + " ".join(lines) + "\n")
    ref = stream(p, ["top.clk", "bus[2]", "bus[0]"])
    monkeypatch.setattr(vcd_mod, "CHUNK_BYTES", chunk)
    assert stream(p, ["top.clk", "bus[2]", "bus[0]"])[:3] == ref[:3]


def test_cut_mid_line_analyzes_what_is_there_and_says_where(tmp_path):
    from spigap.synth import Scenario, tracks
    from spigap.synth.writers import write_capture

    sc = Scenario.from_toml(None, {"messages": 40, "samplerate": 50e6})
    tl = sc.timeline()
    n = int(round(tl.end_time * sc.samplerate))
    full = write_capture(tmp_path / "full.vcd", "vcd", tracks(tl, sc.channels, sc.samplerate), sc.samplerate, n)
    data = open(full, "rb").read()
    start = data.index(b"\n", len(data) * 6 // 10) + 1
    while data.index(b"\n", start) - start < 4:      # a line long enough to be cut inside
        start = data.index(b"\n", start) + 1
    cut_at = data.index(b"\n", start) - 2           # inside that line
    p = tmp_path / "cut.vcd"
    p.write_bytes(data[:cut_at])
    ref = analyze_device(full, SpiConfig())
    a = analyze_device(p, SpiConfig())
    assert a.truncated and "middle of a token" in a.truncated and f"byte {cut_at - 1}" in a.truncated \
        or "line" in a.truncated
    assert str(p) in a.truncated
    assert 0 < a.n < ref.n
    k = a.n - 1                                      # the last transfer may be cut itself
    assert np.array_equal(a.start[:k], ref.start[:k]) and np.array_equal(a.mosi[:a.word_off[k]],
                                                                          ref.mosi[:a.word_off[k]])


def test_backwards_time_is_damage(tmp_path):
    p = tmp_path / "b.vcd"
    p.write_text(HEADER.format(ts="1ns") + "#0 0!\n#5 1!\n#3 0!\n#9 1!\n")
    with open_capture(p) as r:
        blocks = []
        with pytest.raises(CaptureTruncated) as e:
            for b in r.edges(["top.clk"]):
                blocks.append(b)
    assert "backwards" in str(e.value) and "line 15" in str(e.value)
    assert np.concatenate([b.ticks for b in blocks]).tolist() == [0, 5]


@pytest.mark.parametrize("text, needle", [
    ("hello world\n", "not a VCD"),
    ("$timescale 1ns $end\n$var wire 1 ! x $end\n", "incomplete"),
    ("$timescale 3 parsecs $end\n$enddefinitions $end\n", "timescale"),
    ("$timescale 1ns $end\n$var real 64 ! x $end\n$enddefinitions $end\n#0\n", "no logic variables"),
])
def test_bad_headers_are_clear_errors(tmp_path, text, needle):
    p = tmp_path / "bad.vcd"
    p.write_text(text)
    with pytest.raises(InputError) as e:
        open_capture(p)
    assert needle in str(e.value) and str(p) in str(e.value)


def test_missing_timescale_and_samplerate_override(tmp_path):
    p = tmp_path / "n.vcd"
    p.write_text("$var wire 1 ! clk $end\n$enddefinitions $end\n#0 0!\n#2 1!\n")
    with open_capture(p) as r:
        assert r.info.tick_s == pytest.approx(1e-9) and "no $timescale" in r.info.warnings[0]
    with open_capture(p, samplerate=25e6) as r:
        assert r.info.tick_s == pytest.approx(40e-9)


def test_large_vcd_runs_no_python_per_value_change(tmp_path):
    """~190 k value changes are parsed by numpy, not by a Python loop per change (the module's
    docstring: Python loops run per chunk, per channel, per digit position, never per change).
    sys.settrace counts every Python line executed while the edges are read, in every module:
    a loop per change would execute at least one per change; the vectorized reader runs about
    1 560 here (one chunk), 1 per 120 changes. Counted, not timed: the same verdict on a loaded
    machine. The reader's speed (MB/s) is a figure of BENCHMARKS.md ("Readers"), not a test;
    its memory, bounded by the chunk size, is tests/test_readers_memory.py's."""
    from spigap.synth import Scenario, tracks
    from spigap.synth.writers import write_capture

    sc = Scenario.from_toml(None, {"messages": 1000, "words_per_transfer": 8, "samplerate": 100e6,
                                   "sclk": 10e6})
    tl = sc.timeline()
    n = int(round(tl.end_time * sc.samplerate))
    p = write_capture(tmp_path / "big.vcd", "vcd", tracks(tl, sc.channels, sc.samplerate), sc.samplerate, n)
    body = pathlib.Path(p).read_bytes().split(b"$enddefinitions", 1)[1]
    changes = len(re.findall(rb"(?:^|\s)[01]\S", body))     # scalar value changes: 0<id>, 1<id>
    lines = 0

    def count(frame, event, arg):
        nonlocal lines
        lines += event == "line"
        return count

    def read():
        with open_capture(p) as r:
            return sum(len(b) for b in r.edges(["SCLK", "MOSI", "MISO", "CS"]))

    n_edges = read()       # untraced first: the modules it imports lazily are imported (their lines not counted)
    sys.settrace(lambda frame, event, arg: count)
    try:
        assert read() == n_edges
    finally:
        sys.settrace(None)
    assert changes > 150_000 and n_edges > 100_000
    assert lines < changes / 20, f"{lines} Python lines for {changes} value changes"


def test_bits_declared_one_by_one_and_aliases(tmp_path):
    p = tmp_path / "bits.vcd"
    p.write_text("""$timescale 1ns $end
$scope module a $end
$var wire 1 ! data [0] $end
$var wire 1 " data [1] $end
$var wire 1 ! alias $end
$upscope $end
$enddefinitions $end
#0 0! 1"
#4 1!
#6 0"
#7
""")
    # "alias" is data[0] under another name (one identifier code): one signal, one channel,
    # and the other name still selects it
    t, s, end, info = stream(p, ["data[0]", "data[1]", "alias"])
    assert info.channels == ["data[0]", "data[1]"]
    assert t == [0, 4, 6] and s == [0b010, 0b111, 0b101] and end == 7


def test_sigrok_exported_vcd_has_the_capture_resolution(tmp_path):
    """libsigrok writes a 50 MHz capture as VCD with '$timescale 10 ns' and says
    'at 50 MHz' in a comment: the resolution is one sample (20 ns), not 10 ns,
    and every figure equals the .sr's. Oracle: the real sigrok-cli's export."""
    import shutil
    import subprocess

    from conftest import CAPTURES

    if shutil.which("sigrok-cli") is None:
        pytest.skip("sigrok-cli not installed")
    sr = CAPTURES / "mcp3008-rpi3-k4.4-b10.sr"
    out = tmp_path / "b10.vcd"
    subprocess.run(["sigrok-cli", "-i", str(sr), "-O", "vcd", "-o", str(out)], check=True,
                   capture_output=True, timeout=120)
    head = out.read_text(errors="replace")[:400]
    assert "$timescale 10 ns" in head and "at 50 MHz" in head    # what makes this case
    a_vcd, a_sr = analyze_device(out), analyze_device(sr)
    assert a_vcd.tick_s == pytest.approx(20e-9) and a_vcd.info.samplerate_hz == pytest.approx(50e6)
    for kind in ("cs_setup", "cs_hold", "inter_byte"):
        assert np.array_equal(a_vcd.gap_values(kind), a_sr.gap_values(kind)), kind
    # a time that is not on a sample of the named rate is damage, said once
    text = out.read_text().replace("\n#2162 ", "\n#2163 ", 1)
    bad = tmp_path / "bad.vcd"
    bad.write_text(text)
    with pytest.raises(CaptureTruncated, match="not on a sample"):
        stream(bad, ["SCLK"])
