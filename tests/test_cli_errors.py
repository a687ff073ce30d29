"""Bad input: one clear line (file, problem, what to do), exit 2, no traceback."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile

import pytest

from spigap.cli import main
from spigap.errors import SpigapError
from util import synth


def run_cli(args, capsys):
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code, err, *needles):
    assert code == 2
    lines = [l for l in err.splitlines() if l.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("spigap: error: ")
    assert "Traceback" not in err
    for n in needles:
        assert n in lines[0], lines[0]


def test_not_a_zip(tmp_path, capsys):
    p = tmp_path / "notzip.sr"
    p.write_text("hello, I am not a capture\n")
    code, out, err = run_cli(["analyze", str(p)], capsys)
    assert_one_line_error(code, err, str(p), "not a zip archive")


def test_missing_file(tmp_path, capsys):
    code, out, err = run_cli(["analyze", str(tmp_path / "nope.sr")], capsys)
    assert_one_line_error(code, err, "nope.sr", "no such file")


def test_no_metadata(tmp_path, capsys):
    p = tmp_path / "nometa.sr"
    with zipfile.ZipFile(p, "w") as z:
        z.writestr("version", "2")
        z.writestr("logic-1-1", b"\x00" * 100)
    code, out, err = run_cli(["analyze", str(p)], capsys)
    assert_one_line_error(code, err, str(p), "metadata")


def test_unknown_channel_lists_the_channels(tmp_path, capsys):
    sc, tl, p = synth(tmp_path, messages=3)
    code, out, err = run_cli(["analyze", str(p), "--cs", "CS0"], capsys)
    assert_one_line_error(code, err, "no channel named 'CS0'", "SCLK, MOSI, MISO, CS")


def test_empty_capture(tmp_path, capsys):
    sc, tl, p = synth(tmp_path, messages=3)
    with zipfile.ZipFile(p) as z:
        members = {m: z.read(m) for m in z.namelist()}
    q = tmp_path / "empty.sr"
    with zipfile.ZipFile(q, "w") as z:
        z.writestr("version", members["version"])
        z.writestr("metadata", members["metadata"])
        z.writestr("logic-1-1", b"")
    code, out, err = run_cli(["analyze", str(q)], capsys)
    assert_one_line_error(code, err, str(q), "no samples")


@pytest.mark.parametrize("name, more", [
    ("empty.sr", []), ("empty.dsl", []), ("empty.vcd", []), ("empty.csv", []), ("empty.isf", []),
    ("empty.bin", []), ("empty.wfm", []), ("empty.trc", []),
    ("empty.raw", ["--input-format", "raw", "--samplerate", "1MHz"]), ("empty.sr", ["--input-format", "vcd"]),
])
def test_empty_file_says_it_is_empty(tmp_path, capsys, name, more):
    """A capture of 0 bytes (an aborted save, a failed copy) is named as empty, whatever its
    format: each reader said what its format misses ("not a zip archive", "no :WFMPRE header")
    and pointed at --input-format, which cannot help a file with nothing in it."""
    p = tmp_path / name
    p.write_bytes(b"")
    code, out, err = run_cli(["analyze", str(p), *more], capsys)
    assert_one_line_error(code, err, str(p), "is empty (0 bytes)", "save or copy the capture again")
    assert "--input-format" not in err


def test_debug_after_the_command(tmp_path, capsys):
    """The internal-error line says "run again with --debug"; a user adds it at the end of the
    command line, where it was an unrecognized option."""
    p = tmp_path / "notzip.sr"
    p.write_text("hello, I am not a capture\n")
    with pytest.raises(SpigapError, match="not a zip archive"):
        main(["analyze", str(p), "--debug"])
    code, out, err = run_cli(["analyze", str(p)], capsys)
    assert_one_line_error(code, err, "not a zip archive")


def _damage(src, dst, member_index):
    """Copy a .sr, flipping bytes in the middle of one compressed logic chunk."""
    with zipfile.ZipFile(src) as z:
        infos = [i for i in z.infolist() if i.filename.startswith("logic-1-")]
        info = infos[member_index]
    data = bytearray(src.read_bytes())
    hdr = info.header_offset
    nlen = int.from_bytes(data[hdr + 26:hdr + 28], "little")
    xlen = int.from_bytes(data[hdr + 28:hdr + 30], "little")
    start = hdr + 30 + nlen + xlen
    for k in range(start + info.compress_size // 2, start + info.compress_size // 2 + 16):
        data[k] ^= 0xA5
    dst.write_bytes(bytes(data))
    return info.filename


def test_truncated_chunk_reports_partial_results_then_errors(tmp_path, capsys):
    sc, tl, p = synth(tmp_path, messages=200, chunk_bytes=4096, sclk="1MHz", samplerate="10MHz")
    bad = tmp_path / "bad.sr"
    name = _damage(p, bad, 2)
    code, out, err = run_cli(["analyze", str(bad), "--format", "json"], capsys)
    assert_one_line_error(code, err, str(bad), name, "damaged")
    d = json.loads(out)        # partial results still printed
    assert d["capture"]["truncated"] and 0 < d["summary"]["transfers"] < 200
    assert d["summary"]["partial_transfers"] >= 1


def test_cut_file_without_zip_directory(tmp_path, capsys):
    sc, tl, p = synth(tmp_path, messages=200, chunk_bytes=4096, sclk="1MHz", samplerate="10MHz")
    cut = tmp_path / "cut.sr"
    cut.write_bytes(p.read_bytes()[: int(p.stat().st_size * 0.6)])
    code, out, err = run_cli(["analyze", str(cut)], capsys)
    assert code == 2 and "Traceback" not in err
    assert "zip directory missing" in err or "damaged" in err or "ends early" in err
    assert "transfers" in out          # the part that was there was analyzed


def test_bad_option_values(tmp_path, capsys):
    sc, tl, p = synth(tmp_path, messages=3)
    code, out, err = run_cli(["analyze", str(p), "--wordsize", "1025"], capsys)
    assert_one_line_error(code, err, "wordsize")
    code, out, err = run_cli(["analyze", str(p), "--mode", "1", "--cpol", "1"], capsys)
    assert_one_line_error(code, err, "--mode")


def test_real_cli_process_prints_no_traceback(tmp_path):
    p = tmp_path / "x.sr"
    p.write_bytes(b"PK\x03\x04garbage")
    proc = subprocess.run([sys.executable, "-m", "spigap", "analyze", str(p)], capture_output=True, text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("spigap: error: ")
    proc = subprocess.run([sys.executable, "-m", "spigap", "--debug", "analyze", str(p)], capture_output=True,
                          text=True)
    assert "Traceback" in proc.stderr


def test_outputs_json_csv_and_file(tmp_path, capsys):
    sc, tl, p = synth(tmp_path, messages=20, transfers_per_message=1)
    code, out, err = run_cli(["analyze", str(p), "--format", "json", "--transfers"], capsys)
    assert code == 0
    d = json.loads(out)
    for k in ("capture", "resolution_s", "summary", "gaps", "transfers"):
        assert k in d
    for k in ("path", "samplerate_hz", "samples", "duration_s", "channels"):
        assert k in d["capture"]
    for k in ("transfers", "partial_transfers", "words", "messages", "transfers_per_message", "sclk_hz",
              "transfer_rate_hz"):
        assert k in d["summary"]
    for kind in ("cs_setup", "cs_hold", "inter_byte", "inter_transfer", "cs_change", "context_switch",
                 "transfer_duration", "transfer_period"):
        assert set(d["gaps"][kind]) >= {"n", "min_s", "p50_s", "mean_s", "p99_s", "max_s", "std_s"}
    assert d["gaps"]["cs_change"]["n"] == 0 and d["gaps"]["cs_change"]["p50_s"] is None
    t0 = d["transfers"][0]
    for k in ("start_s", "end_s", "mosi", "miso", "cs_setup_s", "cs_hold_s", "inter_byte_s", "gap_before_s",
              "gap_before_kind", "partial"):
        assert k in t0
    assert len(d["transfers"]) == 20
    code, out, err = run_cli(["analyze", str(p), "--format", "csv"], capsys)
    rows = out.strip().splitlines()
    assert rows[0].startswith("index,start_s,end_s") and len(rows) == 21
    dest = tmp_path / "out.txt"
    code, out, err = run_cli(["analyze", str(p), "-o", str(dest)], capsys)
    assert code == 0 and out == "" and "CS setup" in dest.read_text()


HUGE = "99999999999999999999999"


def test_transfers_per_message_is_bounded_wherever_it_is_given(tmp_path, capsys):
    """--transfers-per-message past 2^63 was exit 3 (OverflowError in the grouping), from the
    command line (analyze, monitor, check), a batch manifest and a profile alike; now one line
    naming the bound (spigap/limits.py), before any capture is read."""
    from conftest import CAPTURES

    cap = CAPTURES / "mcp3008-rpi3-k4.4-b10.sr"
    for cmd in (["analyze"], ["monitor"], ["check", "--device", "mcp3008"]):
        code, out, err = run_cli([cmd[0], str(cap), *cmd[1:], "--transfers-per-message", HUGE], capsys)
        assert_one_line_error(code, err, "--transfers-per-message", "1..1,000,000,000")
    m = tmp_path / "m.toml"
    m.write_text(f'[[capture]]\npath = "{cap.name}"\ntransfers_per_message = {HUGE}\n')
    code, out, err = run_cli(["batch", str(cap), "--manifest", str(m)], capsys)
    assert_one_line_error(code, err, "m.toml", "--transfers-per-message", "1..1,000,000,000")
    prof = (CAPTURES.parent / "analyzer/spigap/timing/profiles/rpi3-k4.4-vanilla.toml").read_text()
    assert 'transfers_per_message = "auto"' in prof
    p = tmp_path / "p.toml"
    p.write_text(prof.replace('transfers_per_message = "auto"', f"transfers_per_message = {HUGE}"))
    code, out, err = run_cli(["check", str(cap), "--profile", str(p)], capsys)
    assert_one_line_error(code, err, "p.toml", "analysis.transfers_per_message", "1..1000000000")


@pytest.mark.parametrize("argv", [
    ["pins", "{cap}", "--pin-margin", "1e300"],
    ["pins", "{cap}", "--rx-setup", "2ms"],
    ["check", "{cap}", "--device", "mcp3008", "--rx-sample-delay", "1e300"],
    ["compare", "--before", "{cap}", "--after", "{cap}", "--pins", "--after-rx-sample-delay", "1s"],
])
def test_times_at_a_pin_are_bounded(capsys, argv):
    """A margin or a receiver's setup, hold or sample delay of 1e300 s made the device-tree advice
    "spi-max-frequency = <0> (5e-301 Hz)"; a time at a pin is at most 1 ms (limits.py)."""
    from conftest import CAPTURES

    cap = str(CAPTURES / "mcp3008-rpi3-k4.4-b10.sr")
    code, out, err = run_cli([a.format(cap=cap) for a in argv], capsys)
    assert_one_line_error(code, err, "is no time at a pin (at most 1 ms")
