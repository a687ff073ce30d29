"""Streaming: peak memory must not grow with capture length."""

from __future__ import annotations

import sys

from analyzer.bench import run_measured
from conftest import real


def test_one_gigasample_capture_under_300_mb():
    path = real("spi__enc28j60__enc28j60-init-and-ping.sr")      # 1.017 G samples, 98 chunks
    # peak RSS of the analyzer process itself (its VmHWM); rusage would also count
    # the test runner's memory, which Linux folds into a child's maximum at fork/exec
    code, out, err, seconds, peak_mb = run_measured(
        [sys.executable, "-m", "analyzer", "analyze", str(path), "--format", "json"])
    assert code == 0, err.decode()
    assert 0 < peak_mb < 300, f"peak RSS {peak_mb:.0f} MB"
    assert b'"transfers": 182' in out
