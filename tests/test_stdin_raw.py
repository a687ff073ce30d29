"""``-`` as the capture path: sigrok-cli -O vcd / -O binary piped into spigap give the
words and gaps of the .sr itself; the raw reader on files; pipe errors."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from spigap.api import SpiConfig, analyze_device

CAPTURE = pathlib.Path(__file__).resolve().parent.parent / "captures" / "mcp3008-rpi3-k4.4-b10.sr"
CMAP = "0=SCLK,1=MOSI,2=MISO,3=CE0"
SPIGAP = [sys.executable, "-m", "spigap"]


def sigrok(fmt: str) -> bytes:
    proc = subprocess.run(["sigrok-cli", "-i", str(CAPTURE), "-O", fmt], capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def spigap_json(args, stdin=None):
    proc = subprocess.run([*SPIGAP, "analyze", *args, "--format", "json", "--transfers"], input=stdin,
                          capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def reference():
    return spigap_json([str(CAPTURE)])


def same_words_and_gaps(d, ref):
    assert d["summary"]["transfers"] == ref["summary"]["transfers"] > 100
    assert d["transfers"] == ref["transfers"]            # words, every gap, kinds, messages
    for kind, g in ref["gaps"].items():
        for k, v in g.items():
            assert d["gaps"][kind][k] == (v if v is None or isinstance(v, bool)
                                          else pytest.approx(v, rel=1e-9, abs=1e-15)), (kind, k)


def test_vcd_from_a_real_pipe(sigrok_cli, reference):
    cmd = f"sigrok-cli -i '{CAPTURE}' -O vcd | '{sys.executable}' -m spigap analyze - --format json --transfers"
    proc = subprocess.run(cmd, shell=True, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    d = json.loads(proc.stdout)
    assert d["capture"]["path"] == "<stdin>" and d["capture"]["channels"] == ["SCLK", "MOSI", "MISO", "CE0"]
    # sigrok-cli writes a 10 ns timescale for 50 MSa/s and says so in $comment:
    # the reader takes one sample (20 ns) as the resolution, as from the .sr
    assert d["resolution_s"] == 2e-8
    same_words_and_gaps(d, reference)


def test_binary_from_a_real_pipe(sigrok_cli, reference):
    cmd = (f"sigrok-cli -i '{CAPTURE}' -O binary | '{sys.executable}' -m spigap analyze - --input-format raw "
           f"--samplerate 50m --unitsize 1 --channel-map {CMAP} --format json --transfers")
    proc = subprocess.run(cmd, shell=True, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    d = json.loads(proc.stdout)
    assert d["capture"]["samples"] == reference["capture"]["samples"]
    assert d["summary"] == reference["summary"] and d["stalls"] == reference["stalls"]
    same_words_and_gaps(d, reference)


def test_raw_files_any_unitsize(sigrok_cli, tmp_path, reference):
    data = np.frombuffer(sigrok("binary"), np.uint8)
    one = tmp_path / "cap.bin"
    one.write_bytes(data.tobytes())
    a = analyze_device(one, SpiConfig(clk="0", mosi="1", miso="2", cs="3"), input_format="raw", samplerate=50e6)
    # the same levels in the high byte of 16-bit words, channels 8..11, plus one stray trailing byte
    two = tmp_path / "cap2.bin"
    two.write_bytes((data.astype("<u2") << 8).tobytes() + b"\x00")
    b = analyze_device(two, SpiConfig(), input_format="raw", samplerate=50e6, unitsize=2,
                     channel_map="8=SCLK,9=MOSI,10=MISO,11=CS")
    assert a.n == b.n == reference["summary"]["transfers"]
    for f in ("start", "end", "mosi", "miso", "word_first", "word_last", "pair_gap"):
        assert np.array_equal(getattr(a, f), getattr(b, f)), f
    assert any("1 byte(s) that do not make a whole 2-byte sample" in w for w in b.warnings)
    assert b.info.channels[:2] == ["0", "1"] and len(b.info.channels) == 16


@pytest.mark.parametrize("args,stdin,message", [
    (["-"], b"", "standard input is empty"),
    (["-"], CAPTURE.read_bytes(), "cannot be read from a pipe (it is a zip archive)"),
    (["-"], b"\x00\x01" * 100, "is not a VCD"),
    (["-", "--input-format", "raw"], b"\x00\x01" * 100, "raw samples carry no samplerate"),
    (["-", "--input-format", "raw", "--samplerate", "1m", "--unitsize", "9"], b"\x00", "outside 1..8"),
    (["-", "--input-format", "saleae"], b"<SALEAE>", "cannot be read from a pipe"),
], ids=["empty", "sr-zip", "not-vcd", "raw-no-rate", "raw-unitsize-9", "saleae"])
def test_pipe_errors_are_one_line(args, stdin, message):
    proc = subprocess.run([*SPIGAP, "analyze", *args], input=stdin, capture_output=True, timeout=60)
    err = proc.stderr.decode()
    assert proc.returncode == 2 and message in err and "Traceback" not in err, err


EVENTS = pathlib.Path(__file__).resolve().parent.parent / "captures" / "ad7606-douta-after.sr"


def _same_but_path(piped: dict, saved: dict, path: str) -> None:
    assert piped["capture"].pop("path") == "<stdin>" and saved["capture"].pop("path") == path
    assert piped == saved


def test_event_chain_and_pins_from_a_pipe(sigrok_cli, tmp_path):
    """One pass reads the SPI lines, the --event channels and the pin timing: a pipe gives
    what the saved file gives (the chain CONVST -> BUSY -> CS of the AD7606 capture)."""
    vcd = subprocess.run(["sigrok-cli", "-i", str(EVENTS), "-O", "vcd"], capture_output=True, timeout=120,
                         check=True).stdout
    saved = tmp_path / "ev.vcd"
    saved.write_bytes(vcd)
    args = ["--event", "CONVST:rise", "--event", "BUSY:fall", "--pins", "--format", "json"]
    piped = subprocess.run([*SPIGAP, "analyze", "-", *args], input=vcd, capture_output=True, timeout=120)
    assert piped.returncode == 0, piped.stderr.decode()
    d = json.loads(piped.stdout)
    assert d["events"]["latency"] and d["pins"]
    ref = subprocess.run([*SPIGAP, "analyze", str(saved), *args], capture_output=True, timeout=120, check=True)
    _same_but_path(d, json.loads(ref.stdout), str(saved))


def test_detect_from_a_pipe(sigrok_cli, tmp_path):
    vcd = sigrok("vcd")
    saved = tmp_path / "c.vcd"
    saved.write_bytes(vcd)
    piped = subprocess.run([*SPIGAP, "detect", "-", "--format", "json"], input=vcd, capture_output=True,
                           timeout=120)
    assert piped.returncode == 0, piped.stderr.decode()
    d = json.loads(piped.stdout)
    ref = json.loads(subprocess.run([*SPIGAP, "detect", str(saved), "--format", "json"], capture_output=True,
                                    timeout=120, check=True).stdout)
    assert [b["clk"] for b in d["buses"]] == ["SCLK"]
    d["commands"] = ref["commands"] = None      # they name the input as given: - and the path
    _same_but_path(d, ref, str(saved))


def test_detect_of_more_than_32_channels_from_a_pipe_is_one_line(sigrok_cli):
    """detect surveys more than 32 channels in a second read: from a pipe that is an
    error of one line (exit 2), never an internal error."""
    vcd = sigrok("vcd")
    head, body = vcd.split(b"$enddefinitions $end", 1)
    extra = b"".join(b"$var wire 1 z%d D%d $end\n" % (i, i) for i in range(36))
    head = head.replace(b"$scope module libsigrok $end", b"$scope module libsigrok $end\n" + extra, 1)
    proc = subprocess.run([*SPIGAP, "detect", "-"], input=head + b"$enddefinitions $end" + body,
                          capture_output=True, timeout=120)
    err = proc.stderr.decode()
    assert proc.returncode == 2 and "a pipe can be read only once" in err and "save the stream to a file" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_damaged_vcd_on_a_pipe_says_where(sigrok_cli, reference):
    vcd = sigrok("vcd")
    cut = vcd[: len(vcd) * 2 // 3]
    cut = cut[: cut.rfind(b"\n#")] + b"\n#12x"        # a bad timestamp
    proc = subprocess.run([*SPIGAP, "analyze", "-", "--format", "json"], input=cut, capture_output=True,
                          timeout=60)
    assert proc.returncode == 2, proc.stderr.decode()
    d = json.loads(proc.stdout)
    assert 0 < d["summary"]["transfers"] < reference["summary"]["transfers"]
    line = cut.count(b"\n") + 1
    assert f"at line {line}" in proc.stderr.decode()


def test_stream_replays_a_long_header_and_reads_in_small_pieces(sigrok_cli, tmp_path):
    """A VCD whose header is longer than the sniffed head, arriving a few bytes at a time:
    the stream reader gives the edges of the same file."""
    import io

    from spigap.io.stdin import InputStream
    from spigap.io.vcd import VcdReader

    vcd = sigrok("vcd")
    cut = vcd.index(b"$timescale")
    vcd = vcd[:cut] + b"$comment " + b"x" * 20000 + b" $end\n" + vcd[cut:]
    path = tmp_path / "c.vcd"
    path.write_bytes(vcd)

    class Trickle(io.RawIOBase):
        def __init__(self, data):
            self.data, self.pos = data, 0

        def readable(self):
            return True

        def readinto(self, b):
            n = min(len(b), 777, len(self.data) - self.pos)
            b[:n] = self.data[self.pos:self.pos + n]
            self.pos += n
            return n

    names = ["SCLK", "MOSI", "MISO", "CE0"]
    with VcdReader(path) as r:
        want = list(r.edges(names))
    with VcdReader("<stdin>", stream=InputStream(io.BufferedReader(Trickle(vcd), 1000))) as r:
        got = list(r.edges(names))
        assert r.info.channels == names
    assert np.array_equal(np.concatenate([b.ticks for b in got]), np.concatenate([b.ticks for b in want]))
    assert np.array_equal(np.concatenate([b.states for b in got]), np.concatenate([b.states for b in want]))
