"""trace.dat (trace-cmd's binary file) in `spigap trace --ftrace`: it goes through
`trace-cmd report -t`.

What is tested, and with what: the real trace-cmd (Debian's, installed by
`make test` like sigrok-cli) on damaged files, and a stand-in trace-cmd on PATH
for the plumbing (arguments, a flood of warnings on stderr, a failing exit).
Not tested: a real trace.dat with SPI events. This machine's kernel has no spi
tracepoints and refuses to enable ftrace, so none can be recorded here, and
writing one ourselves would only check our writer against our reader.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import stat
import subprocess
import sys

import numpy as np
import pytest

from spigap.cli import main
from spigap.errors import InputError
from spigap.trace import ftrace
from conftest import CAPTURES

MAGIC = b"\x17\x08\x44tracing6\x00"
TRACED = CAPTURES / "ad7606-pi5-k6.6.31-traced"


def run(capsys, *argv):
    code = main(["trace", *map(str, argv)])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


@pytest.fixture
def trace_cmd() -> str:
    exe = shutil.which("trace-cmd")
    if exe is None:
        pytest.fail("trace-cmd is not installed: apt-get install trace-cmd (make test installs it)")
    return exe


def fake_trace_cmd(tmp_path: pathlib.Path, monkeypatch, body: str) -> pathlib.Path:
    """A trace-cmd first on PATH: a Python script running ``body`` with ``args``."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    exe = bindir / "trace-cmd"
    exe.write_text(f"#!{sys.executable}\nimport sys\nargs = sys.argv[1:]\n{body}\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    return exe


@pytest.mark.parametrize("tail", [b"", b"\x00" * 3, bytes(range(256)) * 4], ids=["magic-only", "zeros", "bytes"])
def test_a_damaged_dat_is_one_line_and_exit_2(trace_cmd, tmp_path, capsys, tail):
    dat = tmp_path / "trace.dat"
    dat.write_bytes(MAGIC + tail)
    # trace-cmd itself reads it: it fails, or prints nothing (it then exits 0)
    proc = subprocess.run([trace_cmd, "report", "-t", "-i", str(dat)], capture_output=True, timeout=60)
    assert proc.returncode != 0 or not proc.stdout.strip()
    code, out, err = run(capsys, f"{TRACED}.sr", "--ftrace", dat)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert str(dat) in err and "trace-cmd report" in err
    assert ("trace-cmd report failed" in err) == (proc.returncode != 0), err


def test_without_trace_cmd_it_says_what_to_install(tmp_path, capsys, monkeypatch):
    dat = tmp_path / "trace.dat"
    dat.write_bytes(MAGIC)
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    code, _, err = run(capsys, f"{TRACED}.sr", "--ftrace", dat)
    assert code == 2 and err.count("\n") == 1
    assert "trace-cmd is not installed" in err and "apt-get install trace-cmd" in err


def test_the_report_is_read_as_trace_cmd_prints_it(tmp_path, monkeypatch):
    """`trace-cmd report -t -i FILE` is what runs; its output is parsed like the same
    text given directly, whatever trace-cmd writes to stderr meanwhile (2 MiB of
    warnings here: more than a pipe holds, so an undrained stderr would hang)."""
    dat = tmp_path / "trace.dat"
    dat.write_bytes(MAGIC)
    fake_trace_cmd(tmp_path, monkeypatch, f"""
assert args == ["report", "-t", "-i", {str(dat)!r}], args
for i in range(32768):
    sys.stderr.write("warning: a line of trace-cmd's warnings, repeated " + "x" * 20 + "\\n")
sys.stdout.write(open({str(TRACED) + '.txt'!r}).read())
""")
    got = ftrace.parse(str(dat))
    want = ftrace.parse(f"{TRACED}.txt")
    assert got.source == "trace-cmd" and len(got) == len(want) > 1000
    for col in ("ts", "cpu", "pid", "event", "device", "length"):
        assert np.array_equal(getattr(got, col), getattr(want, col)), col
    assert got.events == want.events and got.devices == want.devices


def test_a_failing_trace_cmd_is_reported_with_its_last_words(tmp_path, monkeypatch, capsys):
    dat = tmp_path / "trace.dat"
    dat.write_bytes(MAGIC)
    fake_trace_cmd(tmp_path, monkeypatch, """
sys.stdout.write("version = 6\\n")
for i in range(20000):
    sys.stderr.write("noise\\n")
sys.stderr.write("  failed to read the buffer of CPU 1\\n")
sys.exit(3)
""")
    with pytest.raises(InputError) as e:
        ftrace.parse(str(dat))
    assert "trace-cmd report failed: failed to read the buffer of CPU 1" in str(e.value)
    code, _, err = run(capsys, f"{TRACED}.sr", "--ftrace", dat)
    assert code == 2 and err.count("\n") == 1 and "failed to read the buffer of CPU 1" in err
