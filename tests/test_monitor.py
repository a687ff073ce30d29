"""``spigap monitor``: a 20 s capture with seed 004's per-second read/write cycle counts
gives those counts back, one line per second; totals equal ``analyze``; --alert."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from spigap import native
from spigap.api import SpiConfig, analyze_device
from spigap.core.monitor import Monitor, TickHistogram, parse_alert
from spigap.core.quantile import percentiles
from spigap.errors import UsageError
from spigap.io import open_capture
from spigap.synth import Scenario, build, write
from spigap.units import parse_time

# seed 004 (dimtass, nanopi neo, SMP kernel, 1 MHz SPI, no load): read/write cycles in
# each of 20 one-second iterations of `linux-app -m 1 -r 20 -p 0`
SEED_004 = [2249, 2235, 2243, 2264, 2256, 2250, 2246, 2248, 2250, 2237,
            2231, 2246, 2241, 2237, 2253, 2262, 2260, 2261, 2261, 2264]
RATE = 250e3            # low samplerate: 20 s are 5 M samples
SHOP = pathlib.Path(__file__).resolve().parent.parent / "captures" / "mcp3008-rpi3-k4.4-b10.sr"
SPIGAP = [sys.executable, "-m", "spigap"]


@pytest.fixture(scope="module")
def soak(tmp_path_factory):
    """One SPI transfer per cycle, spread evenly over each second; one cycle in second 13
    starts 150 µs late (a stall)."""
    sc = Scenario.from_toml(None, dict(samplerate=RATE, sclk=50e3, words_per_transfer=1, transfers_per_message=1,
                                       messages=sum(SEED_004), cs_setup=8e-6, cs_hold=4e-6, tail=0.0))
    w = sc.windows()
    starts = np.concatenate([i + (np.arange(n) + 0.5) / n for i, n in enumerate(SEED_004)])
    starts[sum(SEED_004[:13]) + 100] += 150e-6
    duration = w.cs_setup + (2 * 8 - 1) / sc.sclk / 2 + w.cs_hold      # as synthesized (gaps >= 2 samples)
    w.gap_before = np.concatenate([[starts[0]], np.diff(starts) - duration[:-1]])
    tl = build(w, sc.shape, 0.0)
    sc.crop_end = 20.0 - 2 / RATE
    path = tmp_path_factory.mktemp("soak") / "soak.sr"
    write(sc, path, tl=tl)
    return path


def monitor(path, *args, stdin=None):
    proc = subprocess.run([*SPIGAP, "monitor", str(path), "--format", "jsonl", *args], input=stdin,
                          capture_output=True, timeout=120)
    lines = [json.loads(ln) for ln in proc.stdout.splitlines()]
    return proc, [ln for ln in lines if "summary" not in ln], lines[-1].get("summary") if lines else None


def test_seed_004_per_second_counts(soak):
    proc, ivs, summary = monitor(soak)
    assert proc.returncode == 0, proc.stderr.decode()
    assert len(ivs) == 20
    assert [iv["transfers"] for iv in ivs] == SEED_004
    assert [iv["t_s"] for iv in ivs] == pytest.approx(list(range(20)))
    assert [iv["rate_hz"] for iv in ivs[:19]] == pytest.approx(SEED_004[:19])
    a = analyze_device(soak, SpiConfig())
    assert summary["transfers"] == sum(iv["transfers"] for iv in ivs) == a.n == sum(SEED_004)
    # the one late cycle: a stall in second 13 only, against the baseline of second 0
    assert [iv["stalls"] for iv in ivs] == [0] * 13 + [1] + [0] * 6
    cs = ivs[13]["gaps"]["context_switch"]
    assert cs["max_s"] == pytest.approx(ivs[12]["gaps"]["context_switch"]["max_s"] + 150e-6, abs=8e-6)
    assert set(ivs[0]["gaps"]) == {"cs_setup", "cs_hold", "inter_byte", "inter_transfer", "cs_change",
                                   "context_switch"}
    assert ivs[0]["resolution_s"] == pytest.approx(1 / RATE)


def test_alert_exits_1_and_says_when(soak):
    proc, ivs, summary = monitor(soak, "--alert", "context_switch.max>400us")
    err = proc.stderr.decode()
    assert proc.returncode == 1, err
    assert len(ivs) == 14 and "context_switch.max>400us" in err and "t = 13 s" in err
    assert summary["alert"]["t_s"] == pytest.approx(13) and summary["transfers"] == sum(SEED_004[:14])
    proc, ivs, summary = monitor(soak, "--alert", "transfers<2232", "--alert", "stalls>5")
    assert proc.returncode == 1 and len(ivs) == 11 and "t = 10 s" in proc.stderr.decode()
    proc, ivs, summary = monitor(soak, "--alert", "rate_hz<100")
    assert proc.returncode == 0 and len(ivs) == 20 and summary["alert"] is None


def test_text_lines_when_not_a_terminal(soak):
    proc = subprocess.run([*SPIGAP, "monitor", str(soak), "--interval", "2s"], capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    lines = proc.stdout.decode().splitlines()
    head = [k for k, ln in enumerate(lines) if ln.split()[:2] == ["t", "transfers"]]
    assert len(head) == 1                                                    # one header: not a terminal
    rows = lines[head[0] + 1:lines.index("")]
    # each interval's start a time with its unit (units.fmt_time), every 2 s
    assert [parse_time(r[:10].strip()) for r in rows] == pytest.approx([2.0 * k for k in range(10)])
    assert [r[:10].strip() for r in rows[:2]] == ["0", "2 s"]
    assert [int(r[10:].split()[0]) for r in rows] == [a + b for a, b in zip(SEED_004[::2], SEED_004[1::2])]
    assert any(ln.startswith("summary: 10 interval(s), 20 s of capture, ") for ln in lines)


def test_summary_rate_and_times_equal_analyze_to_the_printed_digit():
    """Seed 000's capture of 10 reads per ioctl through both commands, each a real process:
    the same transfer rate (analysis.start_rate_hz: (transfers - 1) / first to last start),
    printed and in JSON; every time with its unit. Before, the monitor divided by the
    capture's length: 53.54k/s against analyze's 53.62k/s, and printed "0.0186789 s"."""
    text = subprocess.run([*SPIGAP, "analyze", str(SHOP)], capture_output=True, text=True, timeout=120)
    assert text.returncode == 0, text.stderr
    rate = next(ln.split()[1] for ln in text.stdout.splitlines() if ln.startswith("rate "))
    assert rate == "53.62k/s"
    a = analyze_device(SHOP, SpiConfig())
    mon = subprocess.run([*SPIGAP, "monitor", str(SHOP), "--interval", "2ms"], capture_output=True, text=True,
                         timeout=120)
    assert mon.returncode == 0, mon.stderr
    summary = next(ln for ln in mon.stdout.splitlines() if ln.startswith("summary"))
    assert f" of capture, 1000 transfers ({rate}), " in summary, summary
    assert ", 18.68 ms of capture, " in summary, summary              # not "0.0186789 s"
    proc, ivs, s = monitor(SHOP, "--interval", "2ms")
    assert s["rate_hz"] == a.transfer_rate_hz() and s["transfers"] == a.n
    # the alert's interval, in times with units
    proc, ivs, s = monitor(SHOP, "--interval", "2ms", "--alert", "rate_hz<53000")
    assert proc.returncode == 1 and "in the interval at t = 2 ms (2 ms .. 4 ms of the capture)" in proc.stderr.decode()
    # the summary covers the intervals up to the alert: their transfers, their rate
    assert s["transfers"] == sum(iv["transfers"] for iv in ivs) < a.n
    st = a.start[:s["transfers"]]
    assert s["rate_hz"] == pytest.approx((len(st) - 1) / ((st[-1] - st[0]) * s["resolution_s"]), rel=1e-12)


def test_summary_equals_analyze_and_pipe_equals_file(sigrok_cli):
    a = analyze_device(SHOP, SpiConfig())
    proc, ivs, summary = monitor(SHOP, "--interval", "1ms")
    assert proc.returncode == 0
    assert sum(iv["transfers"] for iv in ivs) == summary["transfers"] == a.n
    assert summary["transfers_per_message"] == a.grouping.transfers_per_message
    assert summary["rate_hz"] == a.transfer_rate_hz()
    for kind, g in summary["gaps"].items():
        v = a.gap_values(kind)
        v = v[~np.isnan(v)]
        assert g["n"] == len(v), kind
        if len(v):
            assert [g["p50_s"], g["p99_s"], g["max_s"]] == pytest.approx(
                [x * a.tick_s for x in percentiles(v, [50, 99])] + [v.max() * a.tick_s], rel=1e-12), kind
    binary = subprocess.run(["sigrok-cli", "-i", str(SHOP), "-O", "binary"], capture_output=True, timeout=60).stdout
    proc2, ivs2, summary2 = monitor("-", "--interval", "1ms", "--input-format", "raw", "--samplerate", "50m",
                                    "--channel-map", "0=SCLK,1=MOSI,2=MISO,3=CE0", stdin=binary)
    assert proc2.returncode == 0, proc2.stderr.decode()
    assert ivs2 == ivs
    assert {k: v for k, v in summary2.items() if k != "capture"} == {k: v for k, v in summary.items() if k != "capture"}


def test_engines_agree(soak):
    if native.library() is None:
        pytest.skip("compiled core unavailable")
    out = {}
    for engine in ("numpy", "c"):
        got = []
        with native.use_engine(engine), open_capture(SHOP) as r:
            s = Monitor(r, SpiConfig(), 0.003, on_interval=got.append).run()
        out[engine] = (got, s)
    assert out["numpy"] == out["c"]


def test_histogram_percentiles_are_numpys():
    rng = np.random.default_rng(1)
    v = rng.integers(0, 40, 1001)
    h = TickHistogram()
    h.add(v[:300])
    h.add(v[300:])
    assert h.percentiles([0, 1, 50, 99, 100]) == pytest.approx(percentiles(v, [0, 1, 50, 99, 100]))


@pytest.mark.parametrize("text", ["context_switch.p99", "foo.p99>1us", "cs_change.p42>1us", "stalls>x",
                                  "cs_hold.max>1 parsec"])
def test_bad_alerts(text):
    with pytest.raises(UsageError):
        parse_alert(text)


def test_live_pipe_lines_come_as_data_arrives_and_ctrl_c_summarizes(soak, tmp_path):
    """A live producer: the first 10.4 s of samples, then silence. The 10 complete seconds are
    printed while the pipe is still open; SIGINT then prints the partial one and the summary."""
    import queue
    import signal
    import threading

    data = subprocess.run(["sigrok-cli", "-i", str(soak), "-O", "binary"], capture_output=True, timeout=60).stdout
    proc = subprocess.Popen([*SPIGAP, "monitor", "-", "--input-format", "raw", "--samplerate", "250k",
                             "--channel-map", "0=SCLK,1=MOSI,2=MISO,3=CS", "--format", "jsonl"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            # SIGINT as in a terminal, even when this run was started with it ignored
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        proc.stdin.write(data[:2_600_000])
        proc.stdin.flush()
        got: queue.Queue = queue.Queue()
        reader = threading.Thread(target=lambda: [got.put(ln) for ln in iter(proc.stdout.readline, b"")],
                                  daemon=True)
        reader.start()
        lines = []
        while len(lines) < 10:          # the pipe is still open: these come from the data so far
            try:
                lines.append(json.loads(got.get(timeout=30)))
            except queue.Empty:
                raise AssertionError(f"no interval line within 30 s of the data (got {len(lines)})") from None
        assert [iv["transfers"] for iv in lines] == SEED_004[:10]
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
        reader.join(timeout=30)
        err = proc.stderr.read().decode()
    finally:
        proc.kill()
    rest = []
    while not got.empty():
        rest.append(json.loads(got.get()))
    assert rest[-1]["summary"]["interrupted"] is True, err
    assert rest[-1]["summary"]["transfers"] == sum(iv["transfers"] for iv in lines + rest[:-1])
    assert proc.returncode == 0


def test_monitor_memory_does_not_grow_with_capture_length(tmp_path, monkeypatch):
    """Raw pieces shrunk to 64 KiB: a capture 4x longer (4x the transfers) must not need
    more memory (numpy allocations are seen by tracemalloc); analyze's would grow."""
    import tracemalloc

    from spigap.io import raw
    from spigap.synth import tracks
    from spigap.synth.writers.raw import write_raw

    monkeypatch.setattr(raw, "PIECE_BYTES", 64 << 10)
    peaks = []
    for msgs in (1500, 6000):
        sc = Scenario.from_toml(None, {"messages": msgs, "words_per_transfer": 4, "transfers_per_message": 3,
                                       "samplerate": 50e6, "sclk": 5e6, "seed": 2})
        tl = sc.timeline()
        n = int(round(tl.end_time * sc.samplerate))
        path = write_raw(tmp_path / f"{msgs}.bin", tracks(tl, sc.channels, sc.samplerate), sc.samplerate, n)
        tracemalloc.start()
        try:
            with open_capture(path, input_format="raw", samplerate=sc.samplerate,
                              channel_map="0=SCLK,1=MOSI,2=MISO,3=CS") as r:
                s = Monitor(r, SpiConfig(), 0.5e-3).run()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert s["transfers"] == 3 * msgs and s["transfers_per_message"] == 3
        peaks.append(peak)
    assert peaks[1] < 1.25 * peaks[0], f"peak {peaks[0] / 1e6:.2f} MB -> {peaks[1] / 1e6:.2f} MB"


# ------------------------------------------------------------ stop signals (docs/live.md)
LIVE_ARGS = ["--input-format", "raw", "--samplerate", "50m", "--channel-map", "0=SCLK,1=MOSI,2=MISO,3=CE0",
             "--format", "jsonl", "--interval", "5ms"]


@pytest.fixture(scope="module")
def live_samples():
    """Seed 000's capture (1000 transfers in 18.7 ms) as raw samples, written by sigrok-cli,
    four times over: more edges than the inference's prefix, so intervals are printed while
    the source is still open."""
    data = subprocess.run(["sigrok-cli", "-i", str(SHOP), "-O", "binary"], capture_output=True, check=True,
                          timeout=60).stdout
    return data * 4


def _default_ending_signals() -> None:
    """In the child: Ctrl-C, SIGTERM and SIGHUP at their defaults, whatever this run inherited
    (nohup ignores SIGHUP; a background job ignores SIGINT; spigap keeps an ignored one so)."""
    import signal

    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _open_writer(fifo, proc, timeout=60.0) -> int:
    """The FIFO's write end, once spigap has opened it to read (bounded: spigap may fail first)."""
    import errno
    import os
    import time

    deadline = time.monotonic() + timeout
    while True:
        try:
            fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            os.set_blocking(fd, True)
            return fd
        except OSError as e:
            if e.errno != errno.ENXIO:
                raise
        assert proc.poll() is None, proc.communicate(timeout=30)
        assert time.monotonic() < deadline, "spigap did not open the FIFO"
        time.sleep(0.02)


def _group_left(pgid: int) -> list[int]:
    """Processes still in the process group (spigap's session)."""
    import os

    left = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                left.append(int(p))
    return left


def _monitor_live(tmp_path, data, sig, *, stdout, lines_seen, before_signal=lambda: None):
    """``spigap monitor FIFO`` of a source that sends ``data`` and then stays open (a live
    bus gone quiet); ``sig`` once ``lines_seen()`` has 10 interval lines. Returns (the
    process, its stderr). Every wait is bounded."""
    import os
    import threading
    import time

    fifo = tmp_path / "live.bin"
    os.mkfifo(fifo)
    proc = subprocess.Popen([*SPIGAP, "monitor", str(fifo), *LIVE_ARGS], stdout=stdout, stderr=subprocess.PIPE,
                            start_new_session=True, preexec_fn=_default_ending_signals)
    fd = -1
    try:
        fd = _open_writer(fifo, proc)
        feeder = threading.Thread(target=lambda: _write_all(fd, data), daemon=True)
        feeder.start()
        deadline = time.monotonic() + 60
        while lines_seen() < 10:
            assert proc.poll() is None, proc.communicate(timeout=30)
            assert time.monotonic() < deadline, f"no 10 interval lines within 60 s ({lines_seen()})"
            time.sleep(0.02)
        feeder.join(timeout=60)
        assert not feeder.is_alive(), "spigap stopped reading its source"
        before_signal()
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        # the source is closed (its writer is told at once) and nothing of spigap is left
        with pytest.raises(BrokenPipeError):
            os.write(fd, data[:4096])
        assert _group_left(proc.pid) == []
    finally:
        if fd >= 0:
            os.close(fd)
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    return proc, err.decode()


def _write_all(fd: int, data: bytes) -> None:
    import os

    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _jsonl_whole(path):
    """Every line of the output a whole JSON object; the intervals and the summary."""
    text = path.read_text()
    assert text.endswith("\n")
    lines = [json.loads(ln) for ln in text.splitlines()]
    assert "summary" in lines[-1] and not any("summary" in ln for ln in lines[:-1])
    return lines[:-1], lines[-1]["summary"]


@pytest.mark.parametrize("name", ["SIGTERM", "SIGHUP", "SIGINT"])
def test_live_monitor_stop_signals_write_the_summary_whole(tmp_path, live_samples, name):
    """systemd's SIGTERM and a closed session's SIGHUP end the monitor as Ctrl-C does (every
    interval so far and the summary, whole, in the output file; the source closed; no
    process left), then it says why and exits 143 / 129 (docs/cli.md). Ctrl-C is monitor's
    normal end: the summary, exit 0 (docs/live.md)."""
    import signal

    sig = signal.Signals[name]
    out = tmp_path / "monitor.jsonl"
    with open(out, "wb") as f:
        proc, err = _monitor_live(tmp_path, live_samples, sig, stdout=f,
                                  lines_seen=lambda: out.read_bytes().count(b"\n"))
    ivs, summary = _jsonl_whole(out)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    if sig == signal.SIGINT:
        assert proc.returncode == 0, err
        assert not any("stopped" in ln or "interrupted" in ln for ln in lines), err
    else:
        assert proc.returncode == 128 + sig, err
        assert lines[-1] == f"spigap: stopped by {name}", err
        assert not any(ln.startswith("spigap: error") for ln in lines), err
    assert summary["interrupted"] is True and summary["signal"] == name
    # every interval shown whole, the summary their sum (up to 4000 transfers, 15 intervals:
    # all that was sent, if spigap had read the last of it when the signal came)
    assert summary["transfers"] == sum(iv["transfers"] for iv in ivs) <= 4000
    assert 10 <= summary["intervals"] == len(ivs) <= 15


def test_live_monitor_sighup_of_a_closed_terminal(tmp_path, live_samples):
    """The terminal it prints on is closed (its writes fail: EIO), then SIGHUP: the summary
    cannot be shown, and that is not an output error: stopped by SIGHUP, 129."""
    import os
    import pty
    import signal
    import threading

    master, slave = pty.openpty()
    got = bytearray()

    def read_tty():
        while True:
            try:
                b = os.read(master, 65536)
            except OSError:
                return
            if not b:
                return
            got.extend(b)

    reader = threading.Thread(target=read_tty, daemon=True)
    reader.start()
    closed = []

    def hang_up():
        os.close(master)            # the terminal goes away
        closed.append(True)

    try:
        proc, err = _monitor_live(tmp_path, live_samples, signal.SIGHUP, stdout=slave,
                                  lines_seen=lambda: got.count(b"\n"), before_signal=hang_up)
    finally:
        os.close(slave)
        if not closed:
            os.close(master)
    assert proc.returncode == 128 + signal.SIGHUP, err
    assert [ln for ln in err.splitlines() if ln.strip()] == ["spigap: stopped by SIGHUP"], err
