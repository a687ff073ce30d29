"""Issue 29's cases, tried as a hostile user would: every one runs the installed command in
a child process under ``RLIMIT_AS`` = 2 GiB and a time limit, and asserts one line, exit 2
(never 3, never a MemoryError, never a hang) and inputs left as they were; or, for the
readers, that every row of a damaged file is read or the loss is said.

The input rule itself (every output against every input, four spellings) is
tests/test_inputs_safe.py; the fuzzing of every reader and file option is
tests/test_fuzz_cli.py.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import re
import resource
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import ROOT

from util import synth

SPIGAP = [sys.executable, "-m", "spigap"]
AS_LIMIT = 2 << 30
SCOPES = ROOT / "tests" / "data" / "scopes"
PROFILES = pathlib.Path(__import__("spigap.timing", fromlist=["x"]).__file__).parent / "profiles"


def _limit():
    resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT))


def run(args, *, timeout=60, **kw):
    """The installed command, in a child process under RLIMIT_AS = 2 GiB."""
    return subprocess.run([*SPIGAP, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          preexec_fn=_limit, **kw)


def one_line(p, *needles, code=2) -> str:
    lines = [ln for ln in p.stderr.splitlines() if ln.strip() and not ln.startswith(("spigap: warning",
                                                                                      "spigap: note", "note:"))]
    assert "MemoryError" not in p.stderr and "internal error" not in p.stderr and "Traceback" not in p.stderr, \
        p.stderr
    assert p.returncode == code, (p.returncode, p.stderr)
    assert len(lines) == 1 and lines[0].startswith("spigap: error: "), p.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def digest(path) -> str:
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def cap(tmp_path_factory):
    return synth(tmp_path_factory.mktemp("cap"), messages=12, transfers_per_message=1)[2]


def _scenario(messages=4):
    from spigap.synth import Scenario, tracks

    sc = Scenario.from_toml(None, {"messages": messages, "words_per_transfer": 2, "samplerate": 20e6,
                                   "sclk": 2e6, "lead": 2e-6, "tail": 2e-6})
    tl = sc.timeline()
    n = int(round(tl.end_time * sc.samplerate))
    return tracks(tl, sc.channels, sc.samplerate), sc.samplerate, n


# ------------------------------------------------------------ 1-7: the input destroyed
def test_convert_over_its_own_analog_sr(tmp_path):
    from spigap.synth.writers import write_capture

    trs, rate, n = _scenario()
    p = write_capture(tmp_path / "in.sr", "sr-analog", trs, rate, n)
    before = digest(p)
    one_line(run(["convert", p, "-o", p]), "never writes over")
    assert digest(p) == before


def test_convert_over_its_own_isf_and_csv(tmp_path):
    from spigap.synth.writers import write_capture

    isf = tmp_path / "a.isf"
    shutil.copy(SCOPES / "tek0000CH1.isf", isf)
    trs, rate, n = _scenario()
    csv = write_capture(tmp_path / "s.csv", "scope-pico", trs, rate, n)
    for p, to in ((isf, "sr"), (csv, "vcd")):
        before = digest(p)
        one_line(run(["convert", p, "--to", to, "-o", p]), "never writes over")
        assert digest(p) == before


def test_output_through_a_link_or_another_spelling(cap, tmp_path):
    q = tmp_path / "q.sr"
    shutil.copy(cap, q)
    (tmp_path / "link.sr").symlink_to(q)
    before = digest(q)
    one_line(run(["convert", q, "-o", tmp_path / "link.sr"]), "never writes over")
    one_line(run(["convert", "./q.sr", "-o", q.resolve()], cwd=tmp_path), "never writes over")
    assert digest(q) == before


@pytest.mark.parametrize("cmd", [["analyze"], ["check", "--profile", "rpi3-k4.4-vanilla"], ["report"], ["detect"]])
def test_reports_never_replace_the_capture(cmd, cap, tmp_path):
    x = tmp_path / "x.sr"
    shutil.copy(cap, x)
    before = digest(x)
    one_line(run([cmd[0], x, *cmd[1:], "-o", x]), "never writes over")
    assert digest(x) == before


def test_batch_output_onto_a_capture_in_its_folder(cap, tmp_path):
    d = tmp_path / "DIR"
    d.mkdir()
    shutil.copy(cap, d / "a.sr")
    before = digest(d / "a.sr")
    one_line(run(["batch", d, "-o", d / "a.sr", "-j", "1", "-q"]), "never writes over")
    assert digest(d / "a.sr") == before


# ------------------------------------------------------------ 8-9: one option, unbounded memory
@pytest.mark.parametrize("rate", ["0.001", "1e-300", "1e300"])
def test_absurd_samplerate_is_refused_at_once(cap, tmp_path, rate):
    t0 = time.monotonic()
    one_line(run(["report", cap, "--samplerate", rate, "-o", tmp_path / "r.html"], timeout=120),
             "--samplerate", "1 Hz .. 1e+15 Hz")
    assert time.monotonic() - t0 < 60 and not (tmp_path / "r.html").exists()


def test_a_slow_but_possible_rate_keeps_the_report_small(tmp_path):
    """1 Hz is allowed (with a warning): the report's rate plot widens its windows instead of
    allocating one bin per second of a capture now weeks long."""
    _, _, p = synth(tmp_path, "long.sr", messages=200)
    p2 = run(["report", p, "--samplerate", "1", "-o", tmp_path / "r.html"], timeout=300)
    assert p2.returncode == 0, p2.stderr
    assert "implausibly slow" in (tmp_path / "r.html").read_text()


# ------------------------------------------------------------ 10-11: files read whole
@pytest.mark.parametrize("args", [
    ["check", "CAP", "--profile", "/dev/zero"],
    ["check", "CAP", "--device", "/dev/urandom"],
    ["check", "CAP", "--profile", "DEVZERO"],
    ["model", "--profile", "/dev/zero"],
    ["check", "CAP", "--profile", "SPARSE"],
    ["batch", "CAP", "--manifest", "SPARSE"],
    ["synth", "--config", "SPARSE", "-o", "OUT"],
    ["trace", "CAP", "--userlog", "/dev/zero", "longer than"],
    ["trace", "CAP", "--ftrace", "/dev/urandom", "binary data"],
])
def test_files_read_whole_are_bounded(args, cap, tmp_path):
    text = (PROFILES / "rpi3-k4.4-vanilla.toml").read_text()
    devzero = tmp_path / "devzero.toml"
    devzero.write_text(re.sub(r'(?m)^device = .*$', 'device = "/dev/zero"', text))
    sparse = tmp_path / "sparse.toml"
    with open(sparse, "wb") as f:
        f.truncate(8 << 30)                     # 8 GiB of nothing, taking no disk
    subst = {"CAP": cap, "DEVZERO": devzero, "SPARSE": sparse, "OUT": tmp_path / "o.sr"}
    says = "larger than"
    if args[-1] in ("longer than", "binary data"):
        args, says = args[:-1], args[-1]
    t0 = time.monotonic()
    one_line(run([subst.get(a, a) for a in args], timeout=120), says)
    assert time.monotonic() - t0 < 60


@pytest.mark.parametrize("option", ["--profile", "--device"])
def test_a_fifo_without_writer_is_refused_without_waiting(option, cap, tmp_path):
    fifo = tmp_path / "p.toml"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    one_line(run(["check", cap, option, fifo], timeout=30), "FIFO", "no program writes")
    assert time.monotonic() - t0 < 20


def test_a_sr_fifo_is_refused_before_waiting_for_its_writer(tmp_path):
    fifo = tmp_path / "cap.sr"
    os.mkfifo(fifo)
    one_line(run(["analyze", fifo], timeout=30), "cannot be read from a stream")


# ------------------------------------------------------------ 12-13: rows lost silently
def _read_all(path):
    from spigap.errors import CaptureTruncated
    from spigap.io import open_capture

    with open_capture(path) as r:
        try:
            for _ in r.edges(r.info.channels[:4]):
                pass
        except CaptureTruncated as e:
            return r.end_tick, str(e), r.info.warnings
        return r.end_tick, None, r.info.warnings


@pytest.mark.parametrize("row", [1, 3, 10, 500, 999, 1000])
@pytest.mark.parametrize("fmt", ["scope-pico", "scope-keysight", "scope-rs"])
def test_a_stray_cell_loses_no_row(tmp_path, fmt, row):
    """One extra cell on one row of a 1000-row scope CSV: every row is read."""
    from spigap.synth.writers import write_capture

    trs, rate, n = _scenario(messages=3)
    n = 1000
    clean = pathlib.Path(write_capture(tmp_path / "clean.csv", fmt, trs, rate, n))
    lines = clean.read_text().split("\n")
    first = next(i for i, ln in enumerate(lines) if ln[:1].isdigit() or ln[:1] == "-")
    lines[first + row - 1] += ",0.5"
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join(lines))
    want = _read_all(clean)
    got = _read_all(bad)
    assert got[:2] == want[:2], (got, want)


@pytest.mark.parametrize("row", [3, 500])
def test_a_short_row_stops_the_capture_there_and_says_so(tmp_path, row):
    from spigap.synth.writers import write_capture

    trs, rate, n = _scenario(messages=3)
    clean = pathlib.Path(write_capture(tmp_path / "clean.csv", "scope-pico", trs, rate, 1000))
    lines = clean.read_text().split("\n")
    first = next(i for i, ln in enumerate(lines) if ln[:1].isdigit() or ln[:1] == "-")
    lines[first + row - 1] = lines[first + row - 1].rsplit(",", 1)[0]
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join(lines))
    end, err, warnings = _read_all(bad)
    if row > 3:
        assert end == row - 1 and f"data row {row}" in err, (end, err)
    else:       # the first rows: taken as the header, and said
        assert any("before the first data row" in w for w in warnings), warnings
    p = run(["analyze", bad])
    assert p.returncode in (0, 2) and "not a change-only logic CSV" not in p.stderr, p.stderr


# ------------------------------------------------------------ 14-17: exit 3 from files and options
@pytest.mark.parametrize("key, value", [(b"BYT_NR 2;", b"BYT_NR nan;"), (b"NR_PT 100000;", b"NR_PT inf;"),
                                        (b"BYT_NR 2;", b"BYT_NR inf;"), (b"NR_PT 100000;", b"NR_PT nan;")])
def test_isf_header_nan_or_inf(tmp_path, key, value):
    p = tmp_path / "h.isf"
    p.write_bytes((SCOPES / "tek0000CH1.isf").read_bytes().replace(key, value, 1))
    one_line(run(["analyze", p]), "h.isf", value.split()[0].decode())


def test_33_isf_files_are_one_line(tmp_path):
    src = (SCOPES / "tek0000CH1.isf").read_bytes()
    files = []
    for i in range(1, 34):
        f = tmp_path / f"tekCH{i}.isf"
        f.write_bytes(src.replace(b'WFID "Ch1,', b'WFID "Ch%d,' % i))
        files.append(f)
    one_line(run(["convert", *files, "-o", tmp_path / "all.sr"]), "33 channels", "at most 32")
    p = run(["analyze", *files])
    assert p.returncode == 2 and "internal error" not in p.stderr, p.stderr


def _cs_vcd(path, n_cs: int):
    ids = [f"c{k}" for k in range(n_cs)]
    out = ["$timescale 1 ns $end", "$scope module top $end", "$var wire 1 ! SCLK $end", '$var wire 1 " MOSI $end',
           "$var wire 1 # MISO $end", *[f"$var wire 1 {i} CS{k} $end" for k, i in enumerate(ids)],
           "$upscope $end", "$enddefinitions $end", "#0", "$dumpvars", "0!", '0"', "0#", *[f"1{i}" for i in ids],
           "$end"]
    t = 1000
    for _ in range(3):
        for i in ids:
            out += [f"#{t}", f"0{i}"]
            t += 500
            for b in range(8):
                out += [f"#{t}", "1!", f'{b & 1}"']
                t += 250
                out += [f"#{t}", "0!"]
                t += 250
            t += 500
            out += [f"#{t}", f"1{i}"]
            t += 2000
    out.append(f"#{t}")
    path.write_text("\n".join(out) + "\n")
    return path


def test_cs_naming_40_lines(tmp_path):
    v = _cs_vcd(tmp_path / "cs40.vcd", 40)
    one_line(run(["analyze", v, "--cs", ",".join(f"CS{k}" for k in range(40))]), "40 CS lines", "at most 29")


def test_40_cs_lines_are_not_silently_one_device(tmp_path):
    v = _cs_vcd(tmp_path / "cs40.vcd", 40)
    one_line(run(["analyze", v]), "40 channels are named like CS lines", "--cs")
    p = run(["analyze", v, "--cs", ",".join(f"CS{k}" for k in range(29)), "--format", "json"])
    assert p.returncode == 0, p.stderr


def test_profile_nested_3000_deep(cap, tmp_path):
    deep = tmp_path / "deep.toml"
    deep.write_text("a = " + "[" * 3000 + "]" * 3000 + "\n")
    one_line(run(["check", cap, "--profile", deep]), "nested deeper than 32")
    deep.write_text("".join(f"[{'.'.join(['t'] * k)}]\n" for k in range(1, 60)))
    one_line(run(["check", cap, "--profile", deep]), "nested deeper than 32")


# ------------------------------------------------------------ the smaller ones
def test_isf_time_base_1e_300(tmp_path):
    p = tmp_path / "t.isf"
    p.write_bytes((SCOPES / "tek0000CH1.isf").read_bytes().replace(b"XINCR 20.0000E-9", b"XINCR 1e-300"))
    one_line(run(["convert", p, "-o", tmp_path / "t.vcd"]), "1e-300 s", "finer than 1 fs")
    assert not (tmp_path / "t.vcd").exists()


def test_rate_takes_units_and_bounds(cap, tmp_path):
    p = run(["convert", cap, "--rate", "20GHz", "-o", tmp_path / "x.sr"])
    assert p.returncode == 0 and "20 GHz" in p.stdout, p.stderr
    one_line(run(["convert", cap, "--rate", "1e-300", "-o", tmp_path / "y.sr"]), "--rate", "1 Hz")


def test_profile_bits_per_word_names_the_profile(cap, tmp_path):
    bad = tmp_path / "bpw.toml"
    bad.write_text((PROFILES / "rpi3-k4.4-vanilla.toml").read_text().replace("[bus]\n", "[bus]\nbits_per_word = 2000\n"))
    line = one_line(run(["check", cap, "--profile", bad]), "bpw.toml", "bits_per_word")
    assert "--wordsize" not in line


def test_options_whose_consequence_is_absurd(cap, tmp_path):
    one_line(run(["compare", "--before", cap, "--after", cap, "--bootstrap", "4294967297"]), "--bootstrap")
    one_line(run(["monitor", cap, "--interval", "1e300"]), "--interval")
    one_line(run(["monitor", cap, "--interval", "1e-300"]), "--interval")
    one_line(run(["synth", "-o", tmp_path / "s.sr", "--sclk", "1e-300"]), "--sclk")
    one_line(run(["synth", "-o", tmp_path / "s.sr", "--jitter", "1e300"]), "jitter")
    one_line(run(["trace", cap, "--ftrace", "/dev/null", "--cs-latency", "1e300"]), "--cs-latency")


@pytest.mark.parametrize("recipe", [
    '[capture]\nsamplerate = "1e3090MHz"\n',
    '[traffic]\nmessages = 1e309\n',
    '[capture]\nsamplerate = "1e3090MHz"\nduration = "1ms"\n[[device]]\ncs = "CE0"\n[[device]]\ncs = "CE1"\n',
])
def test_scenario_rates_bounded(tmp_path, recipe):
    """Found by tests/test_fuzz_cli.py: an infinite sample rate or count in a recipe was exit 3."""
    (tmp_path / "s.toml").write_text(recipe)
    one_line(run(["synth", "--config", tmp_path / "s.toml", "-o", tmp_path / "s.sr"]),
             "messages" if "messages" in recipe else "samplerate")


def test_non_captures_are_named(tmp_path):
    png = tmp_path / "shot.png"
    png.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(200))
    one_line(run(["analyze", png]), "this is a PNG image, not a capture")
    sr = tmp_path / "shot.sr"
    shutil.copy(png, sr)
    one_line(run(["analyze", sr]), "this is a PNG image, not a capture")
    gz = tmp_path / "cap.csv.gz"
    gz.write_bytes(b"\x1f\x8b\x08\x00" + bytes(60))
    one_line(run(["analyze", gz]), "gzip", "unpack it first")
    pdf = tmp_path / "datasheet.vcd"
    pdf.write_bytes(b"%PDF-1.7\n" + bytes(100))
    one_line(run(["analyze", pdf]), "a PDF document")
    elf = tmp_path / "prog.csv"
    elf.write_bytes(b"\x7fELF\x02\x01\x01" + bytes(100))
    one_line(run(["analyze", elf]), "executable program")


def test_a_capture_is_recognized_by_content_first(cap, tmp_path):
    """A VCD named .sr is read as the VCD it is."""
    p = run(["convert", cap, "-o", tmp_path / "real.vcd"])
    assert p.returncode == 0, p.stderr
    shutil.copy(tmp_path / "real.vcd", tmp_path / "named.sr")
    p = run(["analyze", tmp_path / "named.sr", "--format", "json"])
    assert p.returncode == 0 and '"VCD' in p.stdout, p.stderr


def test_memory_stays_bounded_reading_noise(tmp_path):
    """A capture of random bytes under --input-format raw: one line or a result, within 2 GiB."""
    p = tmp_path / "noise.bin"
    p.write_bytes(np.random.default_rng(1).integers(0, 256, 4 << 20, dtype=np.uint8).tobytes())
    r = run(["analyze", p, "--input-format", "raw", "--samplerate", "100MHz"], timeout=300)
    assert r.returncode in (0, 2) and "MemoryError" not in r.stderr and "internal error" not in r.stderr, r.stderr



def test_a_header_less_csv_with_a_cell_that_is_no_number(tmp_path):
    """The short fuzz found it (a NUL in a sigrok CSV's first column): the time-column guess read
    every cell as a number, a ValueError, exit 3. Now: the file's one-line error."""
    bad = tmp_path / "nul.csv"
    bad.write_bytes(b'\x00 CSV generated by libsigrok 0logic,logic\n0,0,0\n0,0,0\n0,0,0\n\x00,0,0\n0,0,0\n1,0,0\n1,0,0\n0,0,0\n0,0,0\n1,0,0\n1,0,0\n0,0,0\n0,0,0\n1,0,0\n1,0,0\n0,0,0\n0,0,0\n1,0,0\n1,0,0\n0,0,0\n0,0,0\n1,0,0\n1,0,0\n0,0,0\n0,0,0\n1,0,0\n1,0,0\n0,0,0\n0,0,0\n1,0,0\n1,0,0\n0,0,0\n0,0,0\n1,0,0\n1,0,0\n0,0,0\n0,0,0\n1,0,0\n1,0,0\n0,0,0\n0,0,0\n1,0,0\n1,0,0\n0,0,0\n0,0,0\n1,1,0\n1,1,0\n0,1,0\n0,1,1\n1,1,1\n1,1,1\n')
    one_line(run(["analyze", bad]), "nul.csv")


@pytest.mark.parametrize("name,member,text", [("bad.sr", "version", "7"),
                                              ("bad.dsl", "header", "[version]\nversion=9\n")])
def test_a_refused_zip_capture_leaves_no_descriptor_open(tmp_path, name, member, text):
    """The short fuzz's workers held hundreds of descriptors of deleted .sr/.dsl files: a file the
    reader refused after opening it kept its descriptor (a library caller's, or monitor's, leak)."""
    import gc
    import zipfile

    from spigap.errors import SpigapError
    from spigap.io import open_capture

    bad = tmp_path / name
    with zipfile.ZipFile(bad, "w") as z:
        z.writestr(member, text)
    gc.disable()        # the descriptor must be closed by the reader, not by a collected object
    try:
        before = len(os.listdir("/proc/self/fd"))
        for _ in range(10):
            with pytest.raises(SpigapError):
                open_capture(str(bad))
        assert len(os.listdir("/proc/self/fd")) == before
    finally:
        gc.enable()
