"""ftrace / user-space log parsers (analyzer/spigap/trace/ftrace.py, userlog.py).

Oracles: the real trace_pipe excerpt of docs (linux-arm-msm, qcom-geni SPI trace
events) and the kernel's TP_printk formats (include/trace/events/spi.h, gpio.h),
written out by hand below. The layout cross-checks compare our parser with our
own writer (analyzer/spigap/synth/kernel.py): they show that every layout reads to the
same events, not that the writer is right; the hand-written lines are the
independent check of each layout.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spigap.errors import InputError
from spigap.synth import Scenario
from spigap.synth import kernel
from spigap.trace import ftrace, userlog

# a real excerpt, verbatim as posted to the linux-arm-msm list (trace_pipe, task columns
# removed by its author, tx=/rx= wrapped onto continuation lines by the mail)
EXCERPT = """\
1003.956560: spi_message_submit: spi16.0 000000001b20b93c
1003.956642: spi_controller_busy: spi16
1003.956643: spi_message_start: spi16.0 000000001b20b93c
1003.956646: geni_spi_fifo_params: 888000.spi: cs=0 mode=0x00000020
     mode_changed=0x00000007 cs_changed=0
1003.956647: spi_set_cs: spi16.0 activate
1003.956648: spi_transfer_start: spi16.0 00000000ea1cf8b6 len=16
     tx=[4c-80-e4-ca-68-4d-95-aa-ee-99-ae-d7-69-e9-5f-39]
rx=[00-00-00-00-00-00-00-00-00-00-00-00-00-00-00-00]
1003.956653: geni_spi_clk_cfg: 888000.spi: req_hz=20000000
     sclk_hz=100000000 clk_idx=5 clk_div=5 bpw=8
1003.956691: geni_spi_transfer: 888000.spi: len=16 m_cmd=0x00000003
1003.956708: geni_spi_irq: 888000.spi: m_irq=0x08000081
     dma_tx=0x00000000 dma_rx=0x00000000
1003.956717: spi_transfer_stop: spi16.0 00000000ea1cf8b6 len=16
     tx=[4c-80-e4-ca-68-4d-95-aa-ee-99-ae-d7-69-e9-5f-39]
rx=[4c-80-e4-ca-68-4d-95-aa-ee-99-ae-d7-69-e9-5f-39]
1003.956717: spi_set_cs: spi16.0 deactivate
1003.956718: spi_message_done: spi16.0 000000001b20b93c len=16/16
"""
TX = bytes.fromhex("4c80e4ca684d95aaee99aed769e95f39")


def _names(t):
    return [t.events[c] for c in t.event]


def _devs(t):
    return [t.devices[d] if d >= 0 else None for d in t.device]


def test_real_excerpt(tmp_path):
    p = tmp_path / "pipe.txt"
    p.write_text(EXCERPT)
    t = ftrace.parse(p)
    assert _names(t) == [
        "spi:spi_message_submit", "spi:spi_controller_busy", "spi:spi_message_start",
        "ftrace:geni_spi_fifo_params", "spi:spi_set_cs:activate", "spi:spi_transfer_start",
        "ftrace:geni_spi_clk_cfg", "ftrace:geni_spi_transfer", "ftrace:geni_spi_irq",
        "spi:spi_transfer_stop", "spi:spi_set_cs:deactivate", "spi:spi_message_done"]
    assert _devs(t) == ["spi16.0", "spi16", "spi16.0", None, "spi16.0", "spi16.0", None, None, None,
                        "spi16.0", "spi16.0", "spi16.0"]
    assert t.ptr.tolist() == [0x1B20B93C, 0, 0x1B20B93C, 0, 0, 0xEA1CF8B6, 0, 0, 0, 0xEA1CF8B6, 0, 0x1B20B93C]
    assert t.length.tolist() == [-1, -1, -1, -1, -1, 16, -1, -1, -1, 16, -1, 16]
    assert t.payload == {5: (TX, bytes(16)), 9: (TX, TX)}
    assert t.resolution_s == 1e-6 and t.warnings == [] and t.lost_events == 0
    assert np.allclose(t.ts[[0, 1, -1]], [1003.956560, 1003.956642, 1003.956718], rtol=0, atol=1e-9)
    assert (t.task == -1).all() and (t.cpu == -1).all()
    # the excerpt's own numbers: 82 us submit -> busy, 69 us transfer start -> stop
    assert round((t.ts[1] - t.ts[0]) * 1e6) == 82 and round((t.ts[9] - t.ts[5]) * 1e6) == 69


# one line per layout, written by hand from the formats (the independent check of each layout)
HAND = {
    "trace 5 flags": "  my task-name-12  [001] d..1.  100.000001: spi_set_cs: spi0.0 activate, cs_high",
    "trace 4 flags": "  my task-name-12  [001] d..1  100.000001: spi_set_cs: spi0.0 activate, cs_high",
    "tgid": "  my task-name-12  (   12) [001] d..1.  100.000001: spi_set_cs: spi0.0 activate",
    "trace-cmd": "  my task-name-12  [001]  100.000001: spi_set_cs: spi0.0 activate",
    "trace-cmd no cpu": "  my task-name-12  100.000001: spi_set_cs: spi0.0 activate",
    "perf": "  my task-name    12 [001]  100.000001:  spi:spi_set_cs: spi0.0 activate",
    "perf pid/tid": "  my task-name    11/12 [001]  100.000001:  spi:spi_set_cs: spi0.0 activate",
}


@pytest.mark.parametrize("layout", list(HAND))
def test_hand_written_layouts(tmp_path, layout):
    p = tmp_path / "t.txt"
    p.write_text(HAND[layout] + "\n")
    t = ftrace.parse(p)
    assert _names(t) == ["spi:spi_set_cs:activate"] and _devs(t) == ["spi0.0"]
    assert t.tasks[t.task[0]] == "my task-name" and t.pid[0] == 12
    assert t.cpu[0] == (-1 if "no cpu" in layout else 1)
    assert t.ts[0] == 100.000001
    assert t.source == {"perf": "perf", "perf pid/tid": "perf", "trace-cmd": "trace-cmd",
                        "trace-cmd no cpu": "trace-cmd"}.get(layout, "ftrace")


def test_spi_formats_by_hand(tmp_path):
    """Every TP_printk of spi.h/gpio.h, including trace-cmd's 0x pointers and spaced bytes."""
    p = tmp_path / "t.txt"
    p.write_text("\n".join([
        "version = 6", "cpus=4", "CPU 1 is empty",
        " kworker/u8:2-87  [000]  5.000000001: spi_controller_idle: spi1",
        " kworker/u8:2-87  [000]  5.000000002: spi_message_done: spi1.2 0xffff888012345678 len=3/4",
        " kworker/u8:2-87  [000]  5.000000003: spi_transfer_stop: spi1.2 0xffff888000000001 len=2 tx=[] rx=[0a 0b]",
        "CPU:0 [12 EVENTS DROPPED]",
        " kworker/u8:2-87  [000]  5.000000004: gpio_value: 17 set 1",
        " kworker/u8:2-87  [000]  5.000000005: gpio_value: 17 get 0",
        " kworker/u8:2-87  [000]  5.000000006: spi_setup: spi1.2 setup mode 0, 8 bits/w, 1000000 Hz max --> 0",
        " kworker/u8:2-87  [000]  5.000000007: sys_exit_ioctl: 0x0",
        " kworker/u8:2-87  [000]  5.000000008: irq_handler_entry: irq=52 name=spi",
        " kworker/u8:2-87  [000]  5.000000009: my_driver_event: whatever",
        "CPU:3 [LOST 7 EVENTS]",
    ]) + "\n")
    t = ftrace.parse(p)
    assert t.source == "trace-cmd" and t.resolution_s == 1e-9 and t.lost_events == 19
    assert _names(t) == ["spi:spi_controller_idle", "spi:spi_message_done", "spi:spi_transfer_stop",
                         "gpio:gpio_value", "gpio:gpio_value:get", "spi:spi_setup", "syscalls:sys_exit_ioctl",
                         "irq:irq_handler_entry", "ftrace:my_driver_event"]
    assert _devs(t)[:3] == ["spi1", "spi1.2", "spi1.2"] and _devs(t)[5] == "spi1.2"
    assert t.ptr[1] == 0xFFFF888012345678 and t.length[1] == 3 and t.length[2] == 2
    assert t.payload == {2: (None, b"\x0a\x0b")}
    assert t.gpio[3:5].tolist() == [17, 17] and t.value[3:5].tolist() == [1, 0]
    assert t.tasks == ["kworker/u8:2"] and t.n_skipped == 3


# ------------------------------------------------------------------ layouts from the same content
@pytest.fixture(scope="module")
def timeline():
    sc = Scenario.from_toml(None, {"messages": "40", "transfers_per_message": "3", "context_switch": "60us",
                                   "cs_change": "12us", "cs_setup": "2us", "cs_hold": "1us",
                                   "segments": [1, 2], "seed": "3"})
    return sc.timeline()


VARIANTS = {
    "trace5": dict(layout="trace"),
    "trace4": dict(layout="trace", flags=4),
    "pipe": dict(layout="trace_pipe"),
    "pipe-wrapped": dict(layout="trace_pipe", wrap=True),
    "trace-cmd": dict(layout="trace-cmd"),
    "trace-cmd-t": dict(layout="trace-cmd", ns=True),
    "trace-cmd-nocpu": dict(layout="trace-cmd", cpu_column=False),
    "perf": dict(layout="perf"),
    "perf-ns": dict(layout="perf", ns=True),
}


def _load(tmp_path, tl, name, **kw):
    km = kernel.KernelLatencies(drift_ppm=80, other_device=0.3, noise_rate_hz=20000, cs_gpio=5, **kw)
    p = tmp_path / f"{name}.txt"
    truth = kernel.write(tl, p, km)
    return ftrace.parse(p), truth


def test_layouts_read_to_the_same_events(tmp_path, timeline):
    # oracle: our own writer (kernel.py) -- the layouts must agree with one another
    ref, truth = _load(tmp_path, timeline, "ref", layout="trace")
    assert len(ref) == truth["events_written"] and ref.warnings == []
    for name, kw in VARIANTS.items():
        t, _ = _load(tmp_path, timeline, name, **kw)
        assert _names(t) == _names(ref), name
        assert _devs(t) == _devs(ref), name
        assert t.ptr.tolist() == ref.ptr.tolist() and t.length.tolist() == ref.length.tolist(), name
        assert t.payload == ref.payload, name
        assert t.gpio.tolist() == ref.gpio.tolist() and t.value.tolist() == ref.value.tolist(), name
        assert [t.tasks[i] for i in t.task] == [ref.tasks[i] for i in ref.task], name
        assert t.pid.tolist() == ref.pid.tolist(), name
        res = 1e-9 if kw.get("ns") else 1e-6
        assert t.resolution_s == res, name
        assert np.abs(t.ts - ref.ts).max() <= 0.5e-6 + 1e-9, name
        assert t.warnings == [], (name, t.warnings)
        if kw.get("cpu_column") is False:
            assert (t.cpu == -1).all()
        else:
            assert t.cpu.tolist() == ref.cpu.tolist(), name
    assert {"Web Content", "my-app-x", "kworker/u8:2", "<idle>"} <= set(ref.tasks)


@pytest.mark.parametrize("name", ["trace5", "pipe-wrapped", "trace-cmd-t", "perf"])
def test_two_halves_read_like_one_pass(tmp_path, timeline, monkeypatch, name):
    """A long trace is parsed in two processes (ftrace._parse_two): cut where an entry starts,
    codes re-interned, rows renumbered -- the same Trace as one pass, in every layout."""
    km = kernel.KernelLatencies(drift_ppm=80, other_device=0.3, noise_rate_hz=20000, cs_gpio=5, lost=0.02,
                            **VARIANTS[name])
    p = tmp_path / f"{name}.txt"
    kernel.write(timeline, p, km)
    monkeypatch.setattr(ftrace, "PARALLEL_BYTES", 1 << 30)
    one = ftrace.parse(p)
    monkeypatch.setattr(ftrace, "PARALLEL_BYTES", 1)
    cut = ftrace._cut(str(p), ftrace.MAX_LINE)
    assert cut is not None and 0 < cut < p.stat().st_size
    two = ftrace._parse_two(str(p), None, ftrace.MAX_LINE, cut)
    assert ftrace.parse(p).ts.tolist() == two.ts.tolist()          # parse() takes the two-process path
    assert _names(two) == _names(one) and _devs(two) == _devs(one)
    for col in ("ts", "cpu", "pid", "ptr", "length", "gpio", "value"):
        assert getattr(two, col).tolist() == getattr(one, col).tolist(), col
    assert [two.tasks[i] for i in two.task] == [one.tasks[i] for i in one.task]
    assert two.payload == one.payload
    assert (two.source, two.resolution_s, two.lost_events, two.n_lines, two.n_skipped, two.warnings) == \
        (one.source, one.resolution_s, one.lost_events, one.n_lines, one.n_skipped, one.warnings)


def test_lost_events(tmp_path, timeline):
    for layout in ("trace", "trace-cmd"):
        t, truth = _load(tmp_path, timeline, f"lost-{layout}", layout=layout, lost=0.05)
        assert truth["lost_events"] > 0
        assert t.lost_events == truth["lost_announced"] and len(t) == truth["events_written"]


# ------------------------------------------------------------------ bad input
def _one_line_error(p, **kw):
    with pytest.raises(InputError) as e:
        ftrace.parse(p, **kw)
    msg = str(e.value)
    assert "\n" not in msg and str(p) in msg
    return msg


def test_bad_inputs(tmp_path, monkeypatch):
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(bytes(range(256)) * 64)
    assert "binary" in _one_line_error(garbage)
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    assert "empty" in _one_line_error(empty)
    prose = tmp_path / "prose.txt"
    prose.write_text("hello\nthis is not a trace\n" * 50)
    assert "not a trace" in _one_line_error(prose)
    huge = tmp_path / "huge.txt"
    huge.write_text("1.000001: spi_controller_busy: spi0\n" + "x" * (ftrace.MAX_LINE + 10) + "\n")
    assert "longer than" in _one_line_error(huge)
    huge_tail = tmp_path / "huge_tail.txt"        # no newline at all
    huge_tail.write_text("y" * (ftrace.MAX_LINE + 10))
    assert "longer than" in _one_line_error(huge_tail)
    dat = tmp_path / "trace.dat"
    dat.write_bytes(ftrace.DAT_MAGIC + bytes(100))
    monkeypatch.setattr(ftrace.shutil, "which", lambda name: None)
    msg = _one_line_error(dat)
    assert "trace-cmd report -t" in msg and "not installed" in msg
    perf = tmp_path / "perf.data"
    perf.write_bytes(ftrace.PERF_MAGIC + bytes(100))
    assert "perf script -i" in _one_line_error(perf)
    assert "no such file" in _one_line_error(tmp_path / "missing.txt")


FRAGMENTS = ["1003.956560: ", "spi_transfer_start: ", "spi0.0 ", "00000000ea1cf8b6 ", "len=16 ", "len=3/4",
             "tx=[4c-80", "-e4]", " rx=[", "]", "activate", "  task-12 ", "[001] ", "d..1. ", "CPU:1 [LOST ",
             "9999999999999999999999 EVENTS]", "\n", "     ", "#", "gpio_value: ", "17 set 1", "spi:", "perf 12 ",
             "\x00", "\xff", "é", "-", ":", "99999999999999.9999999999999: "]


@settings(max_examples=300)
@given(st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=8), max_size=60))
def test_fuzz_only_input_errors(parts):
    text = "".join(parts)
    try:
        t = ftrace.parse_lines(text.split("\n"), path="fuzz")
    except InputError as e:
        assert "\n" not in str(e)
        return
    n = len(t)
    assert all(len(c) == n for c in (t.cpu, t.pid, t.task, t.event, t.device, t.ptr, t.length, t.gpio, t.value))
    assert bool(np.all(np.diff(t.ts) >= 0))
    assert all(0 <= r < n for r in t.payload)


def test_200k_events_in_batches(tmp_path):
    """A long trace parses whole across the parser's line batches (its speed is a benchmark,
    BENCHMARKS.md, not a timed test)."""
    line = "     spidev-test-4242    [002] ..... {:.6f}: spi_transfer_start: spi0.0 000000008fcf1477 len=3 " \
           "tx=[60-00-00] rx=[00-00-00]\n"
    p = tmp_path / "big.txt"
    with open(p, "w") as f:
        for k in range(0, 200_000, 10_000):
            f.write("".join(line.format(1000 + 1e-6 * i) for i in range(k, k + 10_000)))
    t = ftrace.parse(p)
    assert len(t) == 200_000 and len(t.payload) == 200_000
    assert t.ts[0] == 1000.0 and abs(t.ts[-1] - (1000 + 1e-6 * 199_999)) < 1e-9
    assert bool(np.all(np.diff(t.ts) > 0)) and t.resolution_s == 1e-6


# ------------------------------------------------------------------ user-space logs
def test_userlog(tmp_path):
    p = tmp_path / "u.csv"
    p.write_text("iteration,before_ns,after_ns\n0,1234567890123,1234567905123\n1,1234567990456,\n")
    t = userlog.parse(p)
    assert t.events == ["user:before", "user:after"] and t.source == "userlog"
    assert t.ts.tolist() == [1234.567890123, 1234.567905123, 1234.567990456]
    assert t.event.tolist() == [0, 1, 0] and t.resolution_s == 1e-9
    q = tmp_path / "u2.txt"
    q.write_text("# seed 002\ni t(us) other\n0 10 5\n1 11 6\n")
    t = userlog.parse(q)
    assert t.events == ["user:t"] and np.allclose(t.ts, [10e-6, 11e-6])
    t = userlog.parse(q, unit="s")
    assert t.events == ["user:t", "user:other"]


def test_userlog_bad(tmp_path):
    for name, content in [("empty.csv", ""), ("nounit.csv", "a,b\n1,2\n"), ("text.csv", "t_ns\nabc\n"),
                          ("bin.csv", "t_ns\n\x00\x01\n"), ("header.csv", "t_ns\n")]:
        p = tmp_path / name
        p.write_text(content)
        with pytest.raises(InputError) as e:
            userlog.parse(p)
        assert "\n" not in str(e.value) and name in str(e.value)
