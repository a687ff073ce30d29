"""Streaming: peak memory must not grow with capture length."""

from __future__ import annotations

import sys

from spigap.bench import run_measured
from conftest import real


def test_one_gigasample_capture_under_300_mb():
    path = real("spi__enc28j60__enc28j60-init-and-ping.sr")      # 1.017 G samples, 98 chunks
    # peak RSS of the analyzer process itself (its VmHWM); rusage would also count
    # the test runner's memory, which Linux folds into a child's maximum at fork/exec
    code, out, err, seconds, peak_mb = run_measured(
        [sys.executable, "-m", "spigap", "analyze", str(path), "--format", "json"])
    assert code == 0, err.decode()
    assert 0 < peak_mb < 300, f"peak RSS {peak_mb:.0f} MB"
    assert b'"transfers": 182' in out


# the samples of an .sr capture, written REPEAT times to stdout as raw unitsize-1 words
_REPEAT = """
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
names = sorted((x for x in z.namelist() if x.startswith("logic-1-")), key=lambda s: int(s.rsplit("-", 1)[1]))
data = b"".join(z.read(x) for x in names)
for _ in range(int(sys.argv[2])):
    sys.stdout.buffer.write(data)
"""


def _piped_peak(sr, repeat: int) -> tuple[float, dict]:
    import json
    import subprocess

    feed = subprocess.Popen([sys.executable, "-c", _REPEAT, str(sr), str(repeat)], stdout=subprocess.PIPE)
    try:
        code, out, err, _, peak_mb = run_measured(
            [sys.executable, "-m", "spigap", "analyze", "-", "--input-format", "raw", "--samplerate", "50m",
             "--unitsize", "1", "--channel-map", "0=SCLK,1=MOSI,2=MISO,3=CS", "--format", "json"],
            stdin=feed.stdout)
    finally:
        feed.stdout.close()
        feed.wait()
    assert code == 0, err.decode()
    return peak_mb, json.loads(out)


def test_memory_does_not_grow_with_transfers(tmp_path):
    """0.5 M and 2 M transfers (a 10 000-transfer MCP3008 capture fed 50 and 200 times through
    a pipe): the same peak RSS give or take allocator noise; keeping every transfer's figures
    (about 450 bytes each, the path for captures up to core/collect.RETAIN_TRANSFERS) would
    add some 700 MB. And the figures add up: 4x the transfers, words and messages."""
    from spigap.bench import DENSE
    from spigap.synth import Scenario, write

    sr = tmp_path / "mcp3008-10k.sr"
    write(Scenario.from_toml(None, {**DENSE, "messages": 1000}), sr, compresslevel=1)
    small, d1 = _piped_peak(sr, 50)
    big, d4 = _piped_peak(sr, 200)
    assert d1["summary"]["transfers"] == 500_000 and d4["summary"]["transfers"] == 2_000_000
    assert d4["summary"]["messages"] == 4 * d1["summary"]["messages"]
    for d in (d1, d4):                  # one context switch between consecutive messages
        assert d["gaps"]["context_switch"]["n"] == d["summary"]["messages"] - 1
    assert big < 200, f"peak RSS {big:.0f} MB for 2 M transfers"
    assert big - small < 25, f"peak RSS {small:.0f} MB for 0.5 M transfers, {big:.0f} MB for 2 M"


# analyze_file on argv[2] argv[3] times in one process, its result dropped before the next
# call; prints the RSS above the start (after a warm-up analysis of argv[1]: the lazy imports)
# right after each call returns
_ONE_AFTER_ANOTHER = """
import gc, json, sys
from spigap import api

def rss():
    with open("/proc/self/status") as f:
        return next(int(x.split()[1]) / 1024 for x in f if x.startswith("VmRSS:"))

api.analyze_file(sys.argv[1])
gc.collect()
start, after, r = rss(), [], None
for _ in range(int(sys.argv[3])):
    r = None
    gc.collect()
    r = api.analyze_file(sys.argv[2])
    after.append(rss() - start)
print(json.dumps(after))
"""


def test_analyses_one_after_another_give_their_memory_back():
    """A script (a batch worker, the test suite) analyzing captures one after another: each
    analysis of the 1 G-sample capture frees its blocks' arrays, and glibc's malloc kept them
    (its heap returns memory only from its top): 49-55 MB more after each call, with 1 MB of
    the result alive. spigap.api.analyze_file hands them back (malloc_trim) before it returns:
    11-15 MB (measured on glibc 2.36; the bound sits between the two)."""
    import json
    import subprocess

    path = real("spi__enc28j60__enc28j60-init-and-ping.sr")
    warm = real("sdcard__spi_mode__cmds__cmd17.sr")
    p = subprocess.run([sys.executable, "-c", _ONE_AFTER_ANOTHER, str(warm), str(path), "3"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    after = json.loads(p.stdout)
    assert max(after) < 30, f"RSS after each analysis, MB above the start: {after}"
