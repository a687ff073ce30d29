"""Streaming: peak memory must not grow with capture length."""

from __future__ import annotations

import resource
import subprocess
import sys

from tests.conftest import real


def test_one_gigasample_capture_under_300_mb():
    path = real("spi__enc28j60__enc28j60-init-and-ping.sr")      # 1.017 G samples, 98 chunks
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    proc = subprocess.run([sys.executable, "-m", "analyzer", "analyze", str(path), "--format", "json"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    assert before / 1024 < 300 or peak_mb > before / 1024   # an earlier child must not mask this run
    assert peak_mb < 300, f"peak RSS {peak_mb:.0f} MB"
    assert '"transfers": 182' in proc.stdout
