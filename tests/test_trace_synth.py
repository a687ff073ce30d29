"""The kernel driver model (analyzer/spigap/synth/kernel.py): its trace agrees with the capture it belongs to.

Oracles: the synthesized Timeline (bus truth, seeded) and the model's own
parameters; the trace is read back with our parser (test_trace_parse.py checks
that parser against the real excerpt and the kernel's formats). The phase split
(align + phases) is checked here against the same truth too, gap by gap.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from spigap.errors import UsageError
from spigap.synth import Scenario
from spigap.synth import kernel
from spigap.trace import ftrace


@pytest.fixture(scope="module")
def tl():
    sc = Scenario.from_toml(None, {"messages": "300", "transfers_per_message": "2", "context_switch": "60us",
                                   "cs_change": "12us", "cs_setup": "2us", "cs_hold": "3us",
                                   "words_per_transfer": "4", "mosi": "random", "seed": "5"})
    return sc.timeline()


def _phase(truth, gap, a, b):
    [p] = [p for p in truth["phases"] if (p["gap"], p["from"], p["to"]) == (gap, a, b)]
    return p


def test_trace_matches_the_bus(tmp_path, tl):
    km = kernel.KernelLatencies(drift_ppm=150, clock_start_s=5123.0, ns=True, other_device=0.2, noise_rate_hz=50000)
    truth = kernel.write(tl, tmp_path / "t.txt", km)
    t = ftrace.parse(tmp_path / "t.txt")
    assert truth["lost_events"] == 0 and truth["other_messages"] > 0 and truth["noise_events"] > 0
    bus = truth["offset_s"] + (1 + truth["drift_ppm"] * 1e-6) * t.ts
    act = t.rows("spi:spi_set_cs:activate", "spi0.0")
    assert len(act) == len(tl.cs_assert)
    lat = tl.cs_assert - bus[act]
    # every window's activate -> CS assert is the GPIO latency (nominal 1.5 us, 10 % jitter)
    cc = _phase(truth, "cs_change", "spi:spi_set_cs:activate", "bus:cs_assert")
    cs = _phase(truth, "context_switch", "spi:spi_set_cs:activate", "bus:cs_assert")
    assert abs(np.median(lat) - 1.5e-6) < 0.05e-6
    assert abs(cc["median_s"] - 1.5e-6) < 0.05e-6 and abs(cs["median_s"] - 1.5e-6) < 0.05e-6
    assert lat.min() > 0
    # the clock: a straight-line fit of CS assert (bus) on activate (trace) gives back the drift
    slope = np.polyfit(t.ts[act] - t.ts[act][0], tl.cs_assert, 1)[0]
    assert abs((slope - 1) * 1e6 - 150) < 2
    # transfers: one start/stop per CS window (no segments), with the bus words as tx bytes
    xs = t.rows("spi:spi_transfer_start", "spi0.0")
    assert len(xs) == len(tl.cs_assert)
    mosi = np.asarray(tl.windows.mosi, np.uint8).reshape(-1, 4)
    assert all(t.payload[int(r)][0] == bytes(m) for r, m in zip(xs, mosi))
    assert (t.length[xs] == 4).all()
    # cs_setup: CS assert -> transfer_start is what the bus leaves after transfer_start -> SCLK
    first_sclk = tl.word_first[::4]
    assert np.all((bus[xs] > tl.cs_assert) & (bus[xs] < first_sclk))
    p = _phase(truth, "cs_setup", "spi:spi_transfer_start", "bus:first_sclk")
    assert abs(np.median(first_sclk - bus[xs]) - p["median_s"]) < 2e-9
    # context switch: the syscall path in order, with the nominal latencies where they fit
    m = _phase(truth, "context_switch", "spi:spi_message_start", "spi:spi_set_cs:activate")
    assert abs(m["median_s"] - 3e-6) < 0.1e-6
    done = t.rows("spi:spi_message_done", "spi0.0")
    assert len(done) == 300 and (t.length[done] == 8).all()
    other = t.rows("spi:spi_message_done", "spi0.1")
    assert len(other) == truth["other_messages"]


def test_phases_add_up_to_the_gaps(tmp_path):
    """The analyzer's phase split (align + phases.run on a synthesized capture and its trace):
    each cs_change / context_switch gap is cut into one chain of phases, bus:cs_deassert ->
    ... -> bus:cs_assert, in the model's order; the phases of every gap add up to that gap as
    the analysis measured it, which is the synthesized gap within a sample; and every
    phase median is the model's within 0.3 us (docs/trace.md, with --cs-latency given)."""
    from spigap.api import SpiConfig, analyze_device
    from spigap.core.analysis import KIND_NAMES
    from spigap.synth import write
    from spigap.trace import align, phases

    # gaps that vary (not whole microseconds), so that durations cut wrongly cannot add up by chance
    sc = Scenario.from_toml(None, {"messages": "300", "transfers_per_message": "2", "context_switch": "60us",
                                   "cs_change": "12us", "cs_setup": "2us", "cs_hold": "3us",
                                   "sigma": {"context_switch": "8us", "cs_change": "1us"},
                                   "words_per_transfer": "4", "mosi": "random", "seed": "5"})
    tl = write(sc, tmp_path / "c.sr").timeline
    km = kernel.KernelLatencies()
    truth = kernel.write(tl, tmp_path / "t.txt", km)
    a = analyze_device(tmp_path / "c.sr", SpiConfig())
    tr = ftrace.parse(tmp_path / "t.txt")
    al = align.align_spi(tr, a, cs_latency=km.gpio_cs_latency)
    assert al.matched == a.n == len(tl.cs_assert)
    res = phases.run(tr, al, a)
    true_gaps = tl.truth()
    true_kind = np.asarray(true_gaps["kind"]).astype(str)
    kind = np.array([KIND_NAMES[int(c)] or "" for c in a.gap_kind])
    assert (kind[1:] == true_kind[1:]).all()                # the trace's message boundaries: the true grouping
    for gap in ("cs_change", "context_switch"):
        measured = a.gap_before[kind == gap] * a.tick_s
        assert len(measured) == (300 if gap == "cs_change" else 299)
        assert np.abs(measured - true_gaps["gap_before"][true_kind == gap]).max() <= a.tick_s * (1 + 1e-6)
        chain = sorted((p for p in res.phases if p.gap == gap), key=lambda p: p.position)
        want = [(p["from"], p["to"]) for p in truth["phases"] if p["gap"] == gap]
        assert [(p.frm, p.to) for p in chain] == want
        ends = [chain[0].frm] + [p.to for p in chain]
        assert ends[0] == "bus:cs_deassert" and ends[-1] == "bus:cs_assert" and len(set(ends)) == len(ends)
        assert all(p.frm == q.to for q, p in zip(chain, chain[1:]))
        assert all(len(p.values) == len(measured) for p in chain)
        per_gap = np.sum([p.values for p in chain], axis=0)     # values in time order: gap i in each
        assert np.abs(per_gap - measured).max() < 1e-12, np.abs(per_gap - measured).max()
        medians = {(p["from"], p["to"]): p["median_s"] for p in truth["phases"] if p["gap"] == gap}
        err = {(p.frm, p.to): p.stats["p50_s"] - medians[(p.frm, p.to)] for p in chain}
        assert max(abs(e) for e in err.values()) <= 0.3e-6, err


def test_short_gaps_scale_the_latencies(tmp_path):
    """A 5 us context switch cannot hold the 22 us syscall path: the events stay in order."""
    sc = Scenario.from_toml(None, {"messages": "50", "context_switch": "5us", "seed": "2"})
    tl = sc.timeline()
    truth = kernel.write(tl, tmp_path / "t.txt", kernel.KernelLatencies(ns=True))
    t = ftrace.parse(tmp_path / "t.txt")
    bus = truth["offset_s"] + t.ts
    act = t.rows("spi:spi_set_cs:activate")
    done = t.rows("spi:spi_message_done")
    assert np.all(bus[act] < tl.cs_assert) and np.all(bus[act][1:] > tl.cs_deassert[:-1])
    assert np.all(bus[done] > tl.cs_deassert)
    assert all(p["median_s"] > 0 for p in truth["phases"])


def test_bad_model():
    for kw in (dict(layout="xml"), dict(lost=0.7), dict(flags=3), dict(device="spiX"), dict(jitter=-1)):
        with pytest.raises(UsageError):
            kernel.KernelLatencies(**kw).check()


def test_cli_synth_ftrace(tmp_path):
    out = tmp_path / "c.sr"
    cmd = [sys.executable, "-m", "spigap", "synth", "-o", out, "--truth", tmp_path / "c.json",
           "--messages", "20", "--context-switch", "60us", "--ftrace", tmp_path / "c.txt",
           "--trace-drift-ppm", "-40", "--trace-offset", "200s", "--trace-lost", "2%", "--trace-format", "perf",
           "--trace-ns"]
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    truth = json.loads((tmp_path / "c.json").read_text())
    tr = truth["trace"]
    assert tr["drift_ppm"] == -40 and tr["layout"] == "perf" and tr["resolution_s"] == 1e-9
    assert abs(tr["offset_s"] - (-200 * (1 - 40e-6))) < 1e-9
    assert truth["transfers"] == 20
    t = ftrace.parse(tmp_path / "c.txt")
    assert t.source == "perf" and len(t) == tr["events_written"]
    bad = subprocess.run([str(c) for c in cmd[:-5]] + ["--trace-lost", "80%"], capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1
