"""Streaming: peak memory must not grow with capture length."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import real


def test_one_gigasample_capture_under_300_mb():
    path = real("spi__enc28j60__enc28j60-init-and-ping.sr")      # 1.017 G samples, 98 chunks
    proc = subprocess.Popen([sys.executable, "-m", "analyzer", "analyze", str(path), "--format", "json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.stdout.read(), proc.stderr.read()
    # wait4: the peak RSS of this child alone (RUSAGE_CHILDREN would include any
    # earlier child of the test run that happens to be reaped meanwhile)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.returncode == 0, err
    peak_mb = usage.ru_maxrss / 1024
    assert peak_mb < 300, f"peak RSS {peak_mb:.0f} MB"
    assert '"transfers": 182' in out
