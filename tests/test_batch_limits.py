"""``spigap batch`` never waits forever: per-file time limits, prompt Ctrl-C,
outputs written whole or not at all."""

from __future__ import annotations

import multiprocessing
import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from spigap.batch import execute, worker
from spigap.cli import main
from spigap.core import run as core_run
from spigap.errors import OutputError
from spigap.outfile import write_output
from spigap.synth import scenario, write

FORK = pytest.mark.skipif(multiprocessing.get_start_method() != "fork",
                          reason="the patched analysis reaches the pool only through fork")
_RUN = core_run.analyze


def _captures(tmp_path, n=3) -> list[pathlib.Path]:
    out = []
    for i in range(n):
        sc = scenario.Scenario.from_toml(None, {"messages": 2, "samplerate": 10e6, "sclk": 1e6, "seed": i})
        p = tmp_path / f"c{i}.sr"
        write(sc, p)
        out.append(p)
    return out


def _stuck_run(ignore_alarm: bool):
    def run(reader, cfg, **kw):
        if reader.info.path.endswith("c1.sr"):
            if ignore_alarm:        # stuck where the worker's own alarm cannot reach it
                signal.signal(signal.SIGALRM, signal.SIG_IGN)
            time.sleep(600)
        return _RUN(reader, cfg, **kw)
    return run


@FORK
@pytest.mark.parametrize("ignore_alarm", [False, True])
def test_a_stuck_capture_becomes_an_error_row(tmp_path, monkeypatch, ignore_alarm):
    """The worker's alarm stops a stuck capture after its limit; should the alarm not
    reach it, the pool kills the stuck worker and pins the capture. Other captures finish."""
    monkeypatch.setattr(core_run, "analyze", _stuck_run(ignore_alarm))
    monkeypatch.setattr(execute, "GRACE_S", 0.5)
    jobs = [worker.Job(i, str(p), str(p), timeout_s=1.0) for i, p in enumerate(_captures(tmp_path))]
    rows = []
    t0 = time.monotonic()
    execute.run_local(jobs, rows.append, workers=2)
    assert time.monotonic() - t0 < 20
    assert sorted(r["index"] for r in rows) == [0, 1, 2]
    bad = [r for r in rows if r["status"] != "ok"]
    assert [pathlib.Path(r["path"]).name for r in bad] == ["c1.sr"]
    assert "time limit of 1 s (--timeout)" in bad[0]["error"]


def test_inline_run_has_the_time_limit_too(tmp_path, monkeypatch):
    monkeypatch.setattr(core_run, "analyze", _stuck_run(False))
    p = _captures(tmp_path, 2)[1]
    row = worker.analyze_job(worker.Job(0, str(p), str(p), timeout_s=0.5))
    assert row["status"] == "error" and "time limit" in row["error"]


def test_a_fifo_nobody_writes_to_is_said_so_not_called_damaged(tmp_path):
    """A FIFO in a searched folder (no writer): its row said the capture "may be damaged in a way
    that stalls the reader"; it is a FIFO nothing wrote to, and the row says so."""
    p = tmp_path / "live.vcd"
    os.mkfifo(p)
    row = worker.analyze_job(worker.Job(0, str(p), str(p), timeout_s=0.5))
    assert row["status"] == "error", row
    assert "a FIFO nothing wrote to within the time limit of 0.5 s (--timeout)" in row["error"], row["error"]
    assert "damaged" not in row["error"]


def test_default_timeout_scales_with_file_size(tmp_path):
    small = tmp_path / "s.sr"
    small.write_bytes(b"x" * 1000)
    big = tmp_path / "b.sr"
    with open(big, "wb") as f:
        f.truncate(300 << 20)          # sparse: 300 MiB without writing them
    assert worker.default_timeout(str(small)) == pytest.approx(worker.TIMEOUT_BASE_S, abs=0.01)
    assert worker.default_timeout(str(big)) == pytest.approx(worker.TIMEOUT_BASE_S + 300 * worker.TIMEOUT_S_PER_MIB)


@pytest.mark.parametrize("bad", ["-1", "soon", "inf"])
def test_bad_timeout_is_a_usage_error(tmp_path, capsys, bad):
    assert main(["batch", str(tmp_path), "--timeout", bad]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--timeout" in err


def default_sigint():
    """preexec_fn: the default SIGINT disposition in the child (Python then raises KeyboardInterrupt)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_stops_the_pool_promptly_and_writes_nothing(tmp_path):
    """SIGINT while two workers are busy with stuck captures: the batch ends within
    seconds, its -o file is not written (not even partly), no worker is left."""
    caps = _captures(tmp_path, 4)
    out = tmp_path / "report.txt"
    ready = tmp_path / "stuck"
    ready.mkdir()
    script = textwrap.dedent(f"""
        import os, sys, time
        from spigap.core import run as core_run
        def run(reader, cfg, **kw):
            open(os.path.join({str(ready)!r}, str(os.getpid())), "w").close()   # this worker is stuck now
            time.sleep(600)
        core_run.analyze = run
        from spigap.cli import main
        sys.exit(main(["batch", "-j", "2", "--quiet", "--timeout", "0", "-o", {str(out)!r},
                       *{[str(c) for c in caps]!r}]))
    """)
    # the package under test (installed wheel or editable checkout), and SIGINT handled as
    # in a terminal even when the test run itself was started with SIGINT ignored
    # (a background job of a non-interactive shell inherits SIG_IGN, and Python keeps it)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, preexec_fn=default_sigint)
    try:
        deadline = time.monotonic() + 120
        while len(os.listdir(ready)) < 2:        # both workers started and stuck
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the workers did not start within 120 s"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)   # what a terminal's Ctrl-C does: the whole group
        t0 = time.monotonic()
        proc.wait(timeout=15)
        assert time.monotonic() - t0 < 5
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode != 0
    assert not out.exists()
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]
    # no worker process of that group is left running
    time.sleep(0.5)
    with pytest.raises(ProcessLookupError):
        os.killpg(proc.pid, 0)


def test_outputs_are_replaced_whole_or_not_at_all(tmp_path, monkeypatch):
    p = tmp_path / "out.csv"
    p.write_text("old report\n")
    os.chmod(p, 0o640)

    def boom(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OutputError):
        write_output(str(p), "new report\n" * 1000)
    assert p.read_text() == "old report\n"
    assert os.listdir(tmp_path) == ["out.csv"]
    monkeypatch.undo()
    write_output(str(p), "new report\n")
    assert p.read_text() == "new report\n" and (os.stat(p).st_mode & 0o777) == 0o640
