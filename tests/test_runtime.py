"""What the spigap process sets up for itself (analyzer/spigap/cli/runtime.py)."""

from __future__ import annotations

import gc
import os
import platform
import subprocess
import sys

import pytest

from spigap.cli import runtime

THREADS = ("import os, sys\n"
           "if sys.argv[1] == 'tuned':\n"
           "    from spigap.cli import runtime; runtime.before_imports()\n"
           "import numpy\n"
           "print(len(os.listdir('/proc/self/task')))\n")


def test_openblas_single_threaded_unless_the_user_says(monkeypatch):
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    runtime.before_imports()
    assert os.environ["OPENBLAS_NUM_THREADS"] == "1"
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "4")
    runtime.before_imports()
    assert os.environ["OPENBLAS_NUM_THREADS"] == "4"


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads in /proc")
def test_numpy_starts_no_blas_threads_in_a_spigap_process():
    """The kernel's own count of the process's threads after ``import numpy``: only the
    main thread when tuned (OpenBLAS otherwise starts one per further core)."""
    # none of the thread settings (dask's distributed puts OMP_NUM_THREADS=1 and
    # MKL_NUM_THREADS=1 into os.environ when a test imports it)
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "GOTO_NUM_THREADS", "MKL_NUM_THREADS")}
    out = {mode: int(subprocess.run([sys.executable, "-c", THREADS, mode], env=env, capture_output=True,
                                    text=True, check=True).stdout)
           for mode in ("plain", "tuned")}
    if out["plain"] == 1:
        seen = {k: v for k, v in env.items() if "THREAD" in k or k.startswith(("OMP", "GOTO", "MKL"))}
        pytest.skip(f"this numpy starts no BLAS thread even untuned ({len(os.sched_getaffinity(0))} "
                    f"usable cores; {seen or 'no thread settings in the environment'})")
    assert out["tuned"] == 1


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")
def test_glibc_takes_the_malloc_settings():
    try:
        assert runtime.after_imports() is True
    finally:
        gc.unfreeze()          # this process is pytest's: its objects stay collectable


def test_main_called_from_python_leaves_the_process_gc_alone(capsys):
    """main(argv) from a caller's Python (a script, the test suite's in-process commands) runs
    the command without tuning the caller's process: gc.freeze there kept every object alive at
    each call, the cyclic garbage of earlier work too (an xdist worker of make test held 1 GB
    of it); the process's own command line (argv None) still tunes (after_imports, above)."""
    from spigap.cli import main
    from conftest import real

    before = gc.get_freeze_count()
    assert main(["detect", str(real("sdcard__spi_mode__cmds__cmd17.sr"))]) == 0
    assert gc.get_freeze_count() == before
    capsys.readouterr()
