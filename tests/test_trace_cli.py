"""spigap trace on the command line: text, JSON, Perfetto JSON, user-space logs, refusals.

The pairs come from 'spigap synth --ftrace' (the driver model's truth); the
Perfetto output is checked against the Trace Event Format's rules (required
keys per phase type, numeric ts/dur, integer pid/tid, complete events on one
thread that do not partly overlap), not against our own reader.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from util import analyze

from spigap.cli import main

ARGS = ["--messages", "200", "--transfers-per-message", "2", "--context-switch", "60us", "--cs-setup", "3us",
        "--cs-hold", "4us", "--set", "sigma_context_switch=8us", "--set", "mosi=random"]


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("tracecli")
    assert main(["synth", "-o", str(d / "c.sr"), "--truth", str(d / "truth.json"), "--ftrace", str(d / "t.txt"),
                 "--trace-drift-ppm", "40", "--trace-lost", "2%", *ARGS]) == 0
    assert main(["synth", "-o", str(d / "other.sr"), "--ftrace", str(d / "other.txt"), "--seed", "77", *ARGS]) == 0
    return d


def run(capsys, *argv):
    code = main(["trace", *map(str, argv)])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_text(pair, capsys):
    code, out, err = run(capsys, pair / "c.sr", "--ftrace", pair / "t.txt")
    assert code == 0, err
    assert "alignment (spi): spi0.0: spi:spi_set_cs:activate ↔ bus:cs_assert" in out
    assert "drift +" in out and "ppm" in out
    assert "phases (resolution: bus to bus 20 ns (one sample); trace to trace 1 µs" in out
    assert "context_switch  syscalls:sys_exit_ioctl    syscalls:sys_enter_ioctl" in out
    # the 10 µs cs_change busy-wait told the roles already; the trace agrees on every gap
    assert "the capture's own grouping agreed on 100.0 %" in out


def test_text_settles_an_ambiguous_grouping(tmp_path, capsys):
    # cs_change 20 µs: no default busy-wait, so the capture alone leaves the grouping ambiguous
    assert main(["synth", "-o", str(tmp_path / "c.sr"), "--ftrace", str(tmp_path / "t.txt"), *ARGS,
                 "--set", "cs_change=20us"]) == 0
    assert analyze(tmp_path / "c.sr").grouping.ambiguous
    code, out, err = run(capsys, tmp_path / "c.sr", "--ftrace", tmp_path / "t.txt")
    assert code == 0, err
    assert "settle the ambiguous grouping" in out


def test_json(pair, capsys):
    code, out, err = run(capsys, pair / "c.sr", "--ftrace", pair / "t.txt", "--format", "json", "--transfers",
                         "--cs-latency", "1.5us")
    assert code == 0, err
    d = json.loads(out)
    truth = json.load(open(pair / "truth.json"))["trace"]
    al = d["alignment"]
    for key in ("offset_s", "drift_ppm", "matched", "unmatched_trace", "unmatched_bus", "residual_p50_s",
                "residual_p99_s"):
        assert key in al
    assert abs(al["drift_ppm"] - 40) <= 2
    keys = {"gap", "from", "to", "n", "min_s", "p50_s", "mean_s", "p99_s", "max_s", "std_s"}
    assert d["phases"] and all(keys <= set(p) for p in d["phases"])
    mine = {(p["gap"], p["from"], p["to"]): p["p50_s"] for p in d["phases"]}
    for p in truth["phases"]:
        assert abs(mine[(p["gap"], p["from"], p["to"])] - p["median_s"]) <= 0.3e-6, p
    assert len(d["transfers"]) == 400
    assert sum(t["trace_ts"] is not None for t in d["transfers"]) == al["matched"]


def test_trace_of_another_recording_exit_2_one_line(pair, capsys):
    code, out, err = run(capsys, pair / "c.sr", "--ftrace", pair / "other.txt")
    assert code == 2 and out == ""
    lines = [x for x in err.splitlines() if x.strip() and not x.startswith("spigap: the compiled")]
    assert len(lines) == 1 and lines[0].startswith("spigap: error: ") and "other.txt" in lines[0], err


def test_usage(pair, capsys):
    code, _, err = run(capsys, pair / "c.sr")
    assert code == 2 and "--ftrace" in err
    code, _, err = run(capsys, pair / "c.sr", "--ftrace", pair / "t.txt", "--spi-device", "spi3.1")
    assert code == 2 and "spi3.1" in err and len(err.strip().splitlines()) == 1


# ------------------------------------------------------------------ Perfetto
PHASES = {"X", "i", "I", "M", "B", "E"}


def check_trace_event_format(doc: dict) -> None:
    """The rules of the Trace Event Format (JSON object form) that chrome://tracing and
    ui.perfetto.dev rely on."""
    assert isinstance(doc, dict) and isinstance(doc["traceEvents"], list)
    slices: dict = {}
    for ev in doc["traceEvents"]:
        ph = ev["ph"]
        assert ph in PHASES, ev
        assert isinstance(ev["name"], str) and ev["name"], ev
        assert isinstance(ev["pid"], int) and isinstance(ev["tid"], int), ev
        if ph == "M":
            assert ev["name"] in ("process_name", "thread_name", "process_sort_index", "thread_sort_index"), ev
            assert isinstance(ev["args"]["name"], str)
            continue
        assert isinstance(ev["ts"], (int, float)) and np.isfinite(ev["ts"]), ev
        if ph == "X":
            assert isinstance(ev["dur"], (int, float)) and ev["dur"] >= 0, ev
            slices.setdefault((ev["pid"], ev["tid"]), []).append((ev["ts"], ev["ts"] + ev["dur"]))
        if ph in ("i", "I"):
            assert ev.get("s", "t") in ("g", "p", "t"), ev
        if "args" in ev:
            assert isinstance(ev["args"], dict)
    # complete events on one thread nest or follow each other; they never partly overlap
    for track, xs in slices.items():
        xs.sort(key=lambda x: (x[0], -x[1]))
        stack: list = []
        for t0, t1 in xs:
            while stack and stack[-1] <= t0 + 1e-6:
                stack.pop()
            assert not stack or t1 <= stack[-1] + 1e-6, (track, t0, t1, stack[-1])
            stack.append(t1)


def test_perfetto(pair, tmp_path, capsys):
    out = tmp_path / "merged.json"
    code, _, err = run(capsys, pair / "c.sr", "--ftrace", pair / "t.txt", "--perfetto", out)
    assert code == 0, err
    doc = json.loads(out.read_text())
    check_trace_event_format(doc)
    evs = doc["traceEvents"]
    names = {(e["ph"], e["name"]) for e in evs}
    assert ("X", "spi0.0 transfer") in names and ("X", "context_switch") in names
    assert ("i", "spi:spi_set_cs:activate") in names
    assert any(n.startswith("context_switch: syscalls:sys_exit_ioctl → syscalls:sys_enter_ioctl")
               for p, n in names if p == "X")
    transfers = [e for e in evs if e["name"] == "spi0.0 transfer"]
    assert len(transfers) == 400 and all(e["args"]["mosi"] for e in transfers)
    # on the bus clock: the first transfer starts where the analysis says
    a = analyze(pair / "c.sr")
    assert transfers[0]["ts"] == pytest.approx(a.start[0] * a.tick_s * 1e6)
    # a kernel event lands next to its bus edge (set_cs activate ~1.5 µs before the CS assert)
    acts = sorted(e["ts"] for e in evs if e["name"] == "spi:spi_set_cs:activate")
    k = np.searchsorted(acts, transfers[100]["ts"]) - 1
    assert 0 < transfers[100]["ts"] - acts[k] < 5


def test_format_checker_catches_partial_overlap():
    bad = {"traceEvents": [{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 0, "dur": 10},
                           {"ph": "X", "name": "b", "pid": 1, "tid": 1, "ts": 5, "dur": 10}]}
    with pytest.raises(AssertionError):
        check_trace_event_format(bad)
    with pytest.raises(AssertionError):
        check_trace_event_format({"traceEvents": [{"ph": "X", "name": "a", "pid": "1", "tid": 1, "ts": 0,
                                                   "dur": 1}]})


# ------------------------------------------------------------------ user-space log
def test_userlog(tmp_path, capsys):
    """A log like seed 002's: perf_counter_ns before/after each ioctl, in 1 µs steps,
    on a clock 300 ppm off the bus; written here from the capture's own edges (cs_change
    20 µs: no busy-wait tells which window starts a call)."""
    pair = tmp_path
    assert main(["synth", "-o", str(pair / "c.sr"), *ARGS, "--set", "cs_change=20us"]) == 0
    a = analyze(pair / "c.sr")
    rng = np.random.default_rng(2)
    first = np.flatnonzero(np.arange(a.n) % 2 == 0)
    before = a.start[first] * a.tick_s - 20e-6 - np.abs(rng.normal(0, 2e-6, len(first)))
    after = a.end[first + 1] * a.tick_s + 15e-6 + np.abs(rng.normal(0, 2e-6, len(first)))
    to_log = lambda t: (np.floor((t / (1 + 300e-6) + 5000.0) * 1e6) * 1000).astype(np.int64)  # noqa: E731
    log = tmp_path / "log.csv"
    log.write_text("iteration,before_ns,after_ns\n" + "".join(
        f"{i},{b},{c}\n" for i, (b, c) in enumerate(zip(to_log(before), to_log(after)))))
    code, out, err = run(capsys, pair / "c.sr", "--userlog", log)
    assert code == 2 and "--context-switch" in err       # which window starts a call is not known
    code, out, err = run(capsys, pair / "c.sr", "--userlog", log, "--format", "json", "--context-switch", "longer",
                         "--transfers-per-message", "2")
    assert code == 0, err
    d = json.loads(out)
    cols = {u["column"]: u for u in d["userlog"]}
    assert set(cols) == {"user:before", "user:after"}
    for u in cols.values():
        assert u["granularity_s"] == pytest.approx(1e-6)
        # 200 calls over 19 ms with µs jitter: the rate is known to ~15 ppm (σ), no better
        assert abs(u["drift_ppm"] - 300) <= 45
        assert u["matched"] >= 190
        assert 0.5e-6 < u["jitter_std_s"] < 3e-6


def test_inter_transfer_gaps_on_the_timeline(tmp_path, capsys):
    """Two spi_transfers under one CS (mcp320x): the word gap between them is a
    slice on the gaps thread and is cut into phases at the transfer events, in the
    text output and on the Perfetto timeline."""
    assert main(["synth", "-o", str(tmp_path / "c.sr"), "--ftrace", str(tmp_path / "t.txt"), *ARGS,
                 "--set", "words_per_transfer=3", "--set", "segments=1,2", "--set", "inter_transfer=9us"]) == 0
    out = tmp_path / "merged.json"
    code, text, err = run(capsys, tmp_path / "c.sr", "--ftrace", tmp_path / "t.txt", "--perfetto", out)
    assert code == 0, err
    assert "inter_transfer  spi:spi_transfer_stop" in text
    doc = json.loads(out.read_text())
    check_trace_event_format(doc)
    evs = doc["traceEvents"]
    gaps = [e for e in evs if e["ph"] == "X" and e.get("cat") == "gap" and e["name"] == "inter_transfer"]
    assert len(gaps) == 400                      # one per window
    assert all(8 < e["dur"] < 10 for e in gaps), sorted(e["dur"] for e in gaps)[:3]
    cut = [e for e in evs if e.get("cat") == "phase" and e["args"]["gap"] == "inter_transfer"]
    assert {(e["args"]["from"], e["args"]["to"]) for e in cut} >= {
        ("bus:last_sclk", "spi:spi_transfer_stop"), ("spi:spi_transfer_stop", "spi:spi_transfer_start"),
        ("spi:spi_transfer_start", "bus:first_sclk")}


def test_the_inter_transfer_example_in_docs_is_what_spigap_prints(tmp_path, capsys, monkeypatch):
    """docs/trace.md's SPI_IOC_MESSAGE(2) example, run as written: the same rows."""
    from conftest import ROOT
    doc = (ROOT / "docs" / "trace.md").read_text()
    block = doc[doc.index("$ spigap synth -o m2.sr"):]
    block = block[:block.index("```")]
    cmds = [c.replace("\\\n", " ") for c in block.split("$ ")[1:]]
    shown = [line for line in block.splitlines() if line.startswith("inter_transfer")]
    assert len(cmds) == 2 and len(shown) == 3
    monkeypatch.chdir(tmp_path)
    synth_argv = cmds[0].split("\n")[0].split()[1:]
    assert main(synth_argv) == 0
    capsys.readouterr()
    assert main(cmds[1].split("\n")[0].split()[1:]) == 0
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("inter_transfer")]
    assert printed == shown


def test_analysis_with_the_traces_message_boundaries(tmp_path, capsys):
    """Issue 24 item 4: with spi_message_* events the trace's message boundaries are the
    grouping (evidence 'trace', confidence 1.0), in spigap analyze's report and document too."""
    # cs_change 20 µs: the capture alone is ambiguous (and says so in a warning)
    assert main(["synth", "-o", str(tmp_path / "c.sr"), "--ftrace", str(tmp_path / "t.txt"), *ARGS,
                 "--set", "cs_change=20us"]) == 0
    capsys.readouterr()
    code, out, err = run(capsys, tmp_path / "c.sr", "--ftrace", tmp_path / "t.txt", "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    g = d["analysis"]["summary"]["grouping"]
    assert g["evidence"][0] == "trace" and not g["ambiguous"] and d["analysis"]["summary"]["transfers_per_message"] == 2
    assert g["confidence"] == 1.0 and g["method"] == "trace"
    assert not any(w.startswith("message grouping ambiguous") for w in d["analysis"]["warnings"])
    code, out, err = run(capsys, tmp_path / "c.sr", "--ftrace", tmp_path / "t.txt")
    assert "analysis with the trace's message boundaries" in out
    assert "messages    200 × 2 transfer(s) [trace, confidence 1.00, settled by the trace]" in out
    assert "context switch (CS high)" in out and "cs_chg|ctx" not in out
