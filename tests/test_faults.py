"""Fault injection: what spigap promises a user's machine (docs/cli.md, "What spigap
writes, and what it never touches"), tried the way a hostile or unlucky user would.

Every case runs the installed command in a child process and asserts the promise:
the old output intact or the new one whole, one line on stderr, exit 2, no process
left. Device nodes are made with mknod in a temporary directory (never the system's),
a full disk is a small tmpfs mounted for the test (skipped, with the reason, where the
test is not allowed to mount one). Nothing here sleeps to win a race: waits poll with
deadlines.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import threading
import time
import zipfile

import numpy as np
import pytest

from conftest import CAPTURES
from util import synth

SPIGAP = [sys.executable, "-m", "spigap"]
FULL, NULL, ZERO = (1, 7), (1, 3), (1, 5)     # the kernel's mem driver: /dev/full, /dev/null, /dev/zero


def run(args, *, timeout=120, **kw):
    return subprocess.run([*SPIGAP, *map(str, args)], capture_output=True, text=True, timeout=timeout, **kw)


def one_error_line(p, *needles, code=2) -> str:
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert p.returncode == code, (p.returncode, p.stderr)
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("spigap: error: "), lines[0]
    assert "Traceback" not in p.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def mknod(path, dev) -> str:
    """A character device node like /dev/full, in the test's own directory."""
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(*dev))
    except PermissionError:
        pytest.skip("mknod needs root (CAP_MKNOD): run the suite as root to test device nodes")
    return str(path)


def wait_for(predicate, what: str, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"{what}: not within {timeout:g} s"
        time.sleep(0.02)


def no_temp_files(directory) -> bool:
    return not [f for f in os.listdir(directory) if f.endswith(".tmp")]


@pytest.fixture(scope="module")
def cap(tmp_path_factory):
    _, _, p = synth(tmp_path_factory.mktemp("cap"), messages=20)
    return p


@contextlib.contextmanager
def small_tmpfs(path, size="48k"):
    """A tmpfs of ``size`` at ``path`` (a full disk on demand), unmounted afterwards."""
    os.makedirs(path, exist_ok=True)
    try:
        r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                           capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        pytest.skip("no mount command: cannot make a full disk (install util-linux mount)")
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({r.stderr.strip() or r.returncode}): run the suite as root "
                    "outside a restricted container to test a full disk")
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], capture_output=True, timeout=30)


def fill(directory) -> None:
    """Fill the filesystem of ``directory`` to the last byte."""
    fd = os.open(os.path.join(directory, "filler"), os.O_WRONLY | os.O_CREAT)
    try:
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0" * 4096)
    finally:
        os.close(fd)


# ------------------------------------------------------- 1: outputs on special files
def test_output_to_device_nodes_writes_in_place(tmp_path, cap):
    full = mknod(tmp_path / "full", FULL)
    null = mknod(tmp_path / "null", NULL)
    p = run(["analyze", cap, "-o", full])
    one_error_line(p, "full", "No space left on device")
    p = run(["analyze", cap, "-o", null])
    assert p.returncode == 0, p.stderr
    one_error_line(run(["synth", "--set", "messages=3", "-o", full]), "full", "No space left on device")
    for node in (full, null):                  # still the device nodes, not files
        assert stat.S_ISCHR(os.stat(node).st_mode)
    assert no_temp_files(tmp_path)


def test_perfetto_to_a_device_node_is_not_replaced(tmp_path):
    full = mknod(tmp_path / "full", FULL)
    p = run(["trace", CAPTURES / "trace-demo.sr", "--ftrace", CAPTURES / "trace-demo.txt", "--perfetto", full])
    one_error_line(p, "full", "No space left on device")
    assert stat.S_ISCHR(os.stat(full).st_mode)


def test_output_to_a_fifo_streams_to_its_reader(tmp_path, cap):
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()), daemon=True)
    reader.start()
    p = run(["analyze", cap, "-o", fifo])
    reader.join(60)
    assert p.returncode == 0, p.stderr
    assert got and got[0] == run(["analyze", cap]).stdout
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_output_to_a_fifo_without_reader_says_it_waits(tmp_path, cap):
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    proc = subprocess.Popen([*SPIGAP, "analyze", str(cap), "-o", str(fifo)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stderr.readline()              # the note comes before anything is written
        assert "waiting for a reader of the FIFO" in first and str(fifo) in first, first
        text = fifo.read_text()
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert text.startswith("capture")


def test_output_to_dev_stdout_writes_the_descriptor(tmp_path, cap):
    """-o /dev/stdout is the descriptor the shell gave: a pipe, or a file opened to append
    (resolving the link and renaming over the file would lose the output)."""
    ref = run(["analyze", cap]).stdout
    assert run(["analyze", cap, "-o", "/dev/stdout"]).stdout == ref          # a pipe
    out = tmp_path / "log.txt"
    out.write_text("first\n")
    with open(out, "a") as f:
        p = subprocess.run([*SPIGAP, "analyze", str(cap), "-o", "/dev/stdout"], stdout=f, stderr=subprocess.PIPE,
                           text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert out.read_text() == "first\n" + ref


def test_output_through_a_symlink_writes_its_target(tmp_path, cap):
    target = tmp_path / "report.txt"
    target.write_text("old\n")
    link = tmp_path / "link.txt"
    link.symlink_to(target.name)
    assert run(["analyze", cap, "-o", link]).returncode == 0
    assert link.is_symlink() and os.readlink(link) == target.name
    assert target.read_text().startswith("capture")
    loop = tmp_path / "loop.txt"
    loop.symlink_to("loop.txt")
    one_error_line(run(["analyze", cap, "-o", loop]), "loop.txt", "symbolic link loop")


def test_output_to_a_socket_is_refused_before_the_work(tmp_path, cap):
    path = tmp_path / "s.sock"
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(str(path))
        one_error_line(run(["analyze", cap, "-o", path]), "s.sock", "socket")
        assert stat.S_ISSOCK(os.stat(path).st_mode)
    finally:
        s.close()


def test_output_into_kernel_file_systems_is_one_line_before_the_work(tmp_path, cap):
    """/proc and /sys hold the kernel's settings and reports: an output there (a file that
    exists, a new name, a link to one) is refused in one line that says so and what to do,
    before the capture is read (an empty capture's own error would come first otherwise).
    Before, ``-o /proc/version`` said "No such file or directory" after the analysis."""
    empty = tmp_path / "empty.sr"
    empty.touch()
    link = tmp_path / "out.json"
    link.symlink_to("/proc/version")
    cases = [("/proc/version", "/proc", "proc"), (str(tmp_path / "out.json"), "/proc", "proc"),
             ("/proc/spigap-out.json", "/proc", "proc")]
    if os.path.isdir("/sys/kernel"):
        cases.append(("/sys/kernel/spigap-out.json", "/sys", "sysfs"))
    for target, mnt, fs in cases:
        for capture in (cap, empty):
            line = one_error_line(run(["analyze", capture, "-o", target]),
                                  f"{target}: is on {mnt}, the kernel's {fs} file system", "(give an output name")
            assert "empty" not in line and "No such file" not in line
    assert not os.path.exists("/proc/spigap-out.json") and os.path.islink(link)


def test_filesystem_of_reads_the_mount_table():
    from spigap import outfile

    assert outfile.filesystem_of("/proc/version") == ("/proc", "proc")
    assert outfile.filesystem_of("/proc") == ("/proc", "proc")
    assert outfile._unescape_mount(r"/mnt/my\040disk\134x") == "/mnt/my disk\\x"


def test_output_on_a_read_only_file_system_is_one_line(tmp_path, cap):
    with small_tmpfs(tmp_path / "disk") as disk:
        (disk / "old.json").write_text("old\n")
        r = subprocess.run(["mount", "-o", "remount,ro", str(disk)], capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            pytest.skip(f"cannot remount the tmpfs read-only ({r.stderr.strip() or r.returncode})")
        for name in ("old.json", "new.json"):
            one_error_line(run(["analyze", cap, "-o", disk / name]), f"{name}: is on a read-only file system",
                           "(give an output name on a writable disk)")
        assert (disk / "old.json").read_text() == "old\n" and not (disk / "new.json").exists()


# ------------------------------------------------------------- 2: a full disk
def test_full_disk_keeps_the_old_outputs(tmp_path, cap):
    with small_tmpfs(tmp_path / "disk") as disk:
        old = {name: f"old {name}\n" for name in ("r.html", "a.txt", "m.csv")}
        for name, text in old.items():
            (disk / name).write_text(text)
        (disk / "png").mkdir()
        fill(disk)
        p = run(["report", cap, "-o", disk / "r.html"])
        one_error_line(p, "r.html", "No space left on device")
        p = run(["analyze", cap, "--transfers", "-o", disk / "a.txt"])
        one_error_line(p, "a.txt", "No space left on device")
        p = run(["batch", cap, "-j", "1", "-q", "--fields", "a", "--matrix-csv", disk / "m.csv"])
        one_error_line(p, "m.csv", "No space left on device")
        for name, text in old.items():
            assert (disk / name).read_text() == text
        p = run(["report", cap, "--png", disk / "png"])
        one_error_line(p, "No space left on device")
        assert not [f for f in os.listdir(disk / "png") if os.path.getsize(disk / "png" / f) == 0]
        assert no_temp_files(disk) and no_temp_files(disk / "png")


# --------------------------------------------------- 3: captures that are not files
def test_sr_on_a_zero_device_is_refused_at_once(tmp_path, cap):
    zero = mknod(tmp_path / "zero", ZERO)
    link = tmp_path / "z.sr"
    link.symlink_to(zero)
    t0 = time.monotonic()
    one_error_line(run(["analyze", link], timeout=60), "z.sr", "zip archive")
    assert time.monotonic() - t0 < 30
    d = tmp_path / "batch"
    d.mkdir()
    (d / "z.sr").symlink_to(zero)
    (d / "good.sr").write_bytes(cap.read_bytes())
    p = run(["batch", d, "-q", "-j", "2", "--format", "csv"], timeout=120)
    assert p.returncode == 2
    rows = {ln.split(",")[0].rsplit("/", 1)[-1]: ln for ln in p.stdout.splitlines()[1:]}
    assert ",ok," in rows["good.sr"] and "zip archive" in rows["z.sr"]


def _writer(fifo, data: bytes, repeat: bool = False):
    """A writer for ``fifo`` in a thread: ``data`` once (or until nobody reads)."""
    def write():
        with contextlib.suppress(BrokenPipeError, OSError):
            while True:
                with open(fifo, "wb") as f:
                    f.write(data)
                if not repeat:
                    return
    t = threading.Thread(target=write, daemon=True)
    t.start()
    return t


def test_sr_fifo_with_a_writer_is_one_line(tmp_path, cap):
    fifo = tmp_path / "f.sr"
    os.mkfifo(fifo)
    _writer(fifo, cap.read_bytes())
    one_error_line(run(["analyze", fifo], timeout=60), "f.sr", "zip archive")


def test_saleae_export_with_a_fifo_is_one_line(tmp_path):
    d = tmp_path / "export"
    d.mkdir()
    os.mkfifo(d / "digital_0.bin")           # nobody writes it: opening it would wait forever
    one_error_line(run(["analyze", d], timeout=60), "digital_0.bin", "not a regular file")


def test_vcd_fifo_is_streamed_and_a_missing_writer_is_said(tmp_path, cap):
    ref = run(["analyze", CAPTURES / "trace-demo.sr", "--format", "json"]).stdout
    src = tmp_path / "x.vcd"
    subprocess.run(["sigrok-cli", "-i", str(CAPTURES / "trace-demo.sr"), "-O", "vcd", "-o", str(src)], check=True,
                   capture_output=True, timeout=120)
    fifo = tmp_path / "f.vcd"
    os.mkfifo(fifo)
    proc = subprocess.Popen([*SPIGAP, "analyze", str(fifo), "--format", "json"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        note = proc.stderr.readline()
        assert "no writer yet" in note and "f.vcd" in note, note
        _writer(fifo, src.read_bytes())
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    import json

    assert json.loads(out)["summary"]["transfers"] == json.loads(ref)["summary"]["transfers"]


def test_batch_fifo_without_a_writer_ends_at_the_timeout(tmp_path, cap):
    (tmp_path / "never.vcd").parent.mkdir(exist_ok=True)
    os.mkfifo(tmp_path / "never.vcd")
    (tmp_path / "good.sr").write_bytes(cap.read_bytes())
    t0 = time.monotonic()
    p = run(["batch", tmp_path, "-q", "-j", "2", "--timeout", "3"], timeout=120)
    assert time.monotonic() - t0 < 60
    assert p.returncode == 2 and "time limit of 3 s" in p.stdout and "good.sr" in p.stdout


# ----------------------------------------------------------- 4: batch and signals
def _default_stop_signals() -> None:
    """In the child: SIGTERM and SIGHUP at their defaults, whatever the test run inherited (a
    suite started under nohup ignores SIGHUP, and spigap keeps an ignored signal ignored)."""
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, signal.SIG_DFL)


def _stuck_batch(tmp_path, caps, out):
    """A batch of -j 2 whose workers hang in the analysis (each says so with a file)."""
    ready = tmp_path / "stuck"
    ready.mkdir()
    script = textwrap.dedent(f"""
        import os, sys, time
        from spigap.core import run as core_run
        def run(reader, cfg, **kw):
            open(os.path.join({str(ready)!r}, str(os.getpid())), "w").close()
            time.sleep(600)
        core_run.analyze = run
        from spigap.cli import main
        sys.exit(main(["batch", "-j", "2", "--quiet", "--timeout", "0", "-o", {str(out)!r},
                       *{[str(c) for c in caps]!r}]))
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, preexec_fn=_default_stop_signals)
    wait_for(lambda: len(os.listdir(ready)) >= 2 or proc.poll() is not None, "both workers started")
    assert proc.poll() is None, proc.communicate()
    return proc, [int(p) for p in os.listdir(ready)]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_batch_signal_ends_the_workers_too(tmp_path, cap, sig):
    caps = []
    for i in range(3):
        caps.append(tmp_path / f"c{i}.sr")
        caps[-1].write_bytes(cap.read_bytes())
    out = tmp_path / "old.txt"
    out.write_text("old table\n")
    proc, workers = _stuck_batch(tmp_path, caps, out)
    try:
        proc.send_signal(sig)                      # the parent only, as `kill PID` does
        _, err = proc.communicate(timeout=30)
        wait_for(lambda: not any(_alive(w) for w in workers), "the workers ended", timeout=30)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == 128 + sig, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert lines == [f"spigap: stopped by {signal.Signals(sig).name}"], err
    assert out.read_text() == "old table\n" and no_temp_files(tmp_path)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_batch_acts_on_a_stop_signal_between_waits(tmp_path, cap, sig):
    """A stop signal that arrives while the main thread is inside concurrent.futures' wait()
    (which takes the futures' locks one by one) is acted on after wait() returns: raised in
    there, it could leave a lock held, and the executor's thread could then block the exit.
    Deterministic: wait() is wrapped to hold a lock and signal itself."""
    out = tmp_path / "old.txt"
    out.write_text("old table\n")
    script = textwrap.dedent(f"""
        import concurrent.futures as cf, os, sys, threading
        lock, real, seen = threading.Lock(), cf.wait, []
        def wait(*a, **k):
            if not seen:
                lock.acquire()
                os.kill(os.getpid(), {int(sig)})      # the handler runs here, the lock held
                seen.append(1)
                lock.release()
            return real(*a, **k)
        cf.wait = wait
        from spigap.cli import main
        rc = main(["batch", "-j", "2", "--quiet", "-o", {str(out)!r}, {str(cap)!r}, {str(cap)!r}])
        print(rc, len(seen), lock.locked())
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          preexec_fn=_default_stop_signals)
    assert proc.stdout.split() == [str(128 + sig), "1", "False"], (proc.stdout, proc.stderr)
    assert proc.stderr.strip().splitlines()[-1] == f"spigap: stopped by {signal.Signals(sig).name}"
    assert out.read_text() == "old table\n"


# ------------------------------------------------------------------- 5: --ftrace
def test_ftrace_from_a_fifo_and_from_stdin(tmp_path):
    args = ["trace", CAPTURES / "trace-demo.sr", "--format", "json"]
    ref = run([*args, "--ftrace", CAPTURES / "trace-demo.txt"])
    assert ref.returncode == 0, ref.stderr
    fifo = tmp_path / "trace.fifo"
    os.mkfifo(fifo)
    _writer(fifo, (CAPTURES / "trace-demo.txt").read_bytes())
    p = run([*args, "--ftrace", fifo], timeout=120)
    assert p.returncode == 0, p.stderr
    with open(CAPTURES / "trace-demo.txt", "rb") as f:
        q = run([*args, "--ftrace", "-"], stdin=f, timeout=120)
    assert q.returncode == 0, q.stderr
    import json

    def same(text):
        d = json.loads(text)
        d["trace"].pop("path")
        return d

    assert same(p.stdout) == same(q.stdout) == same(ref.stdout)


# --------------------------------------------------------- 6: CSV cells, formulas
def test_csv_cells_from_names_are_never_formulas(tmp_path, cap):
    names = ["=cmd|' -C calc'!A0.sr", "+1-2.sr", "@SUM(A1)-x.sr", "-5-ok.sr"]
    for n in names:
        (tmp_path / n).write_bytes(cap.read_bytes())
    p = run(["batch", "-q", "-j", "1", "--format", "csv", "--fields", "a,b", "--matrix-csv", "m.csv",
             "--", *names], cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    import csv
    import io

    rows = list(csv.reader(io.StringIO(p.stdout)))
    paths = sorted(r[0] for r in rows[1:])
    assert paths == sorted("'" + n for n in names), paths
    cells = [c for r in csv.reader(open(tmp_path / "m.csv")) for c in r]
    assert "+1" in cells and "'=cmd|' " in cells            # a number stays a number; text is neutralized
    assert not [c for c in cells if c[:1] in ("=", "+", "-", "@", "\t", "\r") and not _number(c)], cells


def _number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


# ------------------------------------------------- 7: control characters from files
def _with_metadata(src, dst, old: str, new: str):
    with zipfile.ZipFile(src) as z, zipfile.ZipFile(dst, "w") as out:
        for name in z.namelist():
            data = z.read(name)
            if name == "metadata":
                text = data.decode()
                assert old in text
                data = text.replace(old, new, 1).encode()
            out.writestr(name, data)
    return dst


def test_escape_sequences_from_files_are_escaped(tmp_path, cap):
    evil = "\x1b]0;pwned\x07\x1b[2J"
    p = _with_metadata(cap, tmp_path / "c.sr", "probe1=SCLK", f"probe1=SC{evil}LK")
    for fmt in ("text", "csv"):
        r = run(["analyze", p, "--format", fmt, "--transfers"])
        assert r.returncode == 0, r.stderr
        assert "\x1b" not in r.stdout and "\x07" not in r.stdout
    assert "SC\\x1b]0;pwned\\x07\\x1b[2JLK" in run(["analyze", p]).stdout
    bad = tmp_path / f"bad{evil}\nname.sr"
    bad.write_text("not a capture")
    line = one_error_line(run(["analyze", bad]), "not a zip archive")
    assert "\x1b" not in line and "bad\\x1b]0;pwned\\x07\\x1b[2J\\nname.sr" in line
    r = run(["batch", bad, cap, "-q", "-j", "1"])
    assert "\x1b" not in r.stdout + r.stderr


# -------------------------------------------------- 8: one line where exit 3 was
def test_probe0_in_metadata_is_one_line(tmp_path, cap):
    p = _with_metadata(cap, tmp_path / "p0.sr", "probe1=SCLK", "probe0=SCLK")
    one_error_line(run(["analyze", p]), "p0.sr", "probe0")


def test_stdout_on_a_full_device_and_a_closed_pipe(tmp_path, cap):
    full = mknod(tmp_path / "full", FULL)
    for fmt in ("text", "json"):
        with open(full, "w") as out:
            p = subprocess.run([*SPIGAP, "analyze", str(cap), "--format", fmt], stdout=out, stderr=subprocess.PIPE,
                               text=True, timeout=120)
        one_error_line(p, "standard output", "No space left on device")
    proc = subprocess.Popen([*SPIGAP, "analyze", str(cap), "--transfers", "--format", "jsonl"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.read(10)
    proc.stdout.close()                                # spigap ... | head -c 10
    err = proc.stderr.read()
    assert proc.wait(60) == 0 and err == b"", err


# -------------------------------------------------------- 9: warnings, one line each
def test_library_warnings_are_one_line(tmp_path, cap):
    csv_path = tmp_path / "big.csv"
    rows = ["Time [s],SCLK,MOSI,MISO,CS"] + [f"{i * 1e-6:.6f},{i % 2},0,0,0" for i in range(40)]
    rows[30] = "1e300,1,0,0,0"
    csv_path.write_text("\n".join(rows) + "\n")
    p = run(["analyze", csv_path, "--clk", "SCLK", "--cs", "CS", "--mosi", "MOSI"])
    assert "RuntimeWarning" not in p.stderr
    assert len([ln for ln in p.stderr.splitlines() if ln.strip()]) == 1, p.stderr
    cjk = tmp_path / "中文.sr"
    cjk.write_bytes(cap.read_bytes())
    home = tmp_path / "home-is-a-file"
    home.write_text("")
    r = run(["report", cjk, "-o", tmp_path / "r.html"], env={**os.environ, "HOME": str(home),
                                                             "MPLCONFIGDIR": "", "XDG_CONFIG_HOME": "",
                                                             "XDG_CACHE_HOME": ""})
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert lines[0].startswith("wrote ") and len(lines) <= 2, r.stderr
    assert all(ln.startswith(("wrote ", "spigap: warning: ")) for ln in lines), r.stderr


# ------------------------------------------------------- 10: errors that say the truth
def test_errors_name_the_real_problem(tmp_path, cap):
    wide = tmp_path / "wide.csv"
    with open(wide, "w") as f:
        f.write(",".join(["Time [s]"] + [f"ch{i}" for i in range(10000)]) + "\n")
        for r in range(5):
            f.write(",".join([f"{r * 1e-6:.6f}"] + ["0"] * 10000) + "\n")
    one_error_line(run(["analyze", wide]), "wide.csv", "too wide")
    lv = tmp_path / "level.csv"
    rows = ["Time [s],SCLK,MOSI,MISO,CS"] + [f"{i * 1e-6:.6f},{i % 2},0,0,0" for i in range(60)]
    rows[50] = rows[50].split(",", 1)[0] + ",2,0,0,0"
    lv.write_text("\n".join(rows) + "\n")
    one_error_line(run(["analyze", lv]), "level.csv", "a level '2' on SCLK")
    loop = tmp_path / "loop.sr"
    loop.symlink_to("loop.sr")
    one_error_line(run(["analyze", loop]), "loop.sr", "symbolic link loop")
    # one NaN time in a scope CSV: analyzed up to that row, then the one-line error
    from spigap.synth import Scenario, tracks
    from spigap.synth.writers import write_capture

    sc = Scenario.from_toml(None, {"messages": 40, "samplerate": 10e6, "sclk": 1e6})
    tl = sc.timeline()
    n = int(round(tl.end_time * sc.samplerate))
    scope = write_capture(tmp_path / "p.csv", "scope-pico", tracks(tl, sc.channels, sc.samplerate), sc.samplerate, n)
    lines = open(scope).read().split("\n")
    k = len(lines) // 2
    lines[k] = "nan," + lines[k].split(",", 1)[1]
    (tmp_path / "pnan.csv").write_text("\n".join(lines))
    p = run(["analyze", tmp_path / "pnan.csv", "--format", "json"])
    one_error_line(p, "pnan.csv", f"data row {k - 2}")
    import json

    assert 0 < json.loads(p.stdout)["summary"]["transfers"] < len(tl.cs_assert)


# ------------------------------------------------------- 11: raw samples on stdin
def test_dense_raw_samples_on_stdin_stay_bounded():
    """30 MB of random bytes (a change at nearly every sample): peak RSS 0.94 GB before."""
    from spigap.bench import run_measured

    data = np.random.default_rng(20).integers(0, 256, 30 << 20, dtype=np.uint8).tobytes()
    feed = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdout.buffer.write(sys.stdin.buffer.read())"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    writer = threading.Thread(target=lambda: (feed.stdin.write(data), feed.stdin.close()), daemon=True)
    writer.start()
    try:
        code, out, err, _, peak_mb = run_measured(
            [*SPIGAP, "analyze", "-", "--input-format", "raw", "--samplerate", "50m",
             "--channel-map", "0=SCLK,1=MOSI,2=MISO,3=CS", "--format", "json"], stdin=feed.stdout)
    finally:
        feed.stdout.close()
        feed.wait()
    assert code == 0, err.decode()
    assert peak_mb < 300, f"peak RSS {peak_mb:.0f} MB"
