"""``spigap analyze`` in bounded memory (core/collect.py) gives today's figures.

Oracle: ``core/run.analyze(keep="all")`` on the same capture, the path that keeps every
transfer's arrays (itself checked against sigrok-cli, the captures' README and
the synthesizer's truth elsewhere). The bounded path is forced on small
captures by a retention bound of 1 transfer; with the decisions (message
structure, word-gap split) made on the whole capture, every JSON field must be
equal; ``std_s`` only to floating-point rounding (a weighted sum over the
histogram instead of numpy's pairwise sum over the array)."""

from __future__ import annotations

import json
import math
import threading
import time
import pathlib

import numpy as np
import pytest
from conftest import REAL_CAPTURES, ROOT, real

from spigap.cli import main
from spigap.core import collect, run
from spigap.core.config import SpiConfig
from spigap.core.quantile import median, percentiles
from spigap.core.stalls import StallRule, find_stalls
from spigap.core.tickhist import TickHistogram
from spigap.io import open_capture
from spigap.output.jsonout import json_rows, to_dict, transfer_rows
from spigap.synth import scenario, write

# one device each; the shared-bus captures' bounded path: tests/test_shared_bus.py
SYNTH = sorted(p for p in (ROOT / "captures").glob("*.sr") if not p.stem.startswith("shared-"))


def _doc(a) -> dict:
    return json.loads(json.dumps(to_dict(a)))


def _same(x, y, path=""):
    """Equal, floats named std_s to 1e-12 (relative)."""
    if isinstance(x, dict):
        assert isinstance(y, dict) and set(x) == set(y), f"{path}: keys {set(x) ^ set(y)}"
        for k in x:
            _same(x[k], y[k], f"{path}/{k}")
    elif isinstance(x, list):
        assert isinstance(y, list) and len(x) == len(y), f"{path}: lengths differ"
        for i, (p, q) in enumerate(zip(x, y)):
            _same(p, q, f"{path}[{i}]")
    elif path.endswith("std_s") and isinstance(x, float):
        assert math.isclose(x, y, rel_tol=1e-12, abs_tol=0), f"{path}: {x!r} vs {y!r}"
    else:
        assert x == y, f"{path}: {x!r} vs {y!r}"


def _both(path, cfg: SpiConfig, samplerate=None, **kw):
    with open_capture(path, samplerate=samplerate) as r:
        full = run.analyze(r, cfg).device
    rows: list = []

    def sink(a, k0, k1, index0, message0):
        rows.extend(map(json.dumps, json_rows(a, transfer_rows(a, k0, index0, message0, stop=k1))))

    with open_capture(path, samplerate=samplerate) as r:
        b = run.analyze(r, cfg, keep="bounded", rows=sink, **kw).device
    return full, b, rows


def _rows_text(a, step=10_000):
    """``a``'s JSON transfer rows, each as its text, made ``step`` rows at a time: winbond's
    148 565 rows held as dicts, twice, added some 110 MB to the test's peak (402 -> 294 MB)."""
    for k0 in range(0, a.n, step):
        yield from map(json.dumps, json_rows(a, transfer_rows(a, k0, stop=k0 + step)))


def _check(full, b, rows):
    """``rows``: the bounded path's transfer rows as JSON text (_both)."""
    if full.n > 1:
        assert isinstance(b, collect.BoundedAnalysis)
        n = 0
        for n, want in enumerate(_rows_text(full), 1):
            assert n <= len(rows) and rows[n - 1] == want, f"transfer row {n - 1}"
        assert n == len(rows) == full.n
    _same(_doc(full), _doc(b))


@pytest.mark.parametrize("name", sorted(REAL_CAPTURES))
def test_real_captures_same_figures(name):
    f, cfg, _, rate = REAL_CAPTURES[name]
    _check(*_both(real(f), SpiConfig(**cfg), rate, retain=1, learn=10**9))


@pytest.mark.parametrize("path", SYNTH, ids=[p.stem for p in SYNTH])
def test_synthesized_captures_same_figures(path):
    _check(*_both(path, SpiConfig(), retain=1, learn=10**9))


def _soak(tmp_path, messages=3000, **over):
    """An MCP3008 capture, 10 transfers per message, jitter and a few stalls (seed 5)."""
    sc = scenario.Scenario.from_toml(ROOT / "captures" / "mcp3008-rpi3-k4.4-b10.toml",
                                     {"seed": 5, "messages": messages, "stall_probability": 0.002, **over})
    p = tmp_path / "soak.sr"
    write(sc, p)
    return p


def test_decisions_on_the_first_transfers(tmp_path):
    """A stationary capture longer than the learning prefix: the message structure and the
    word-gap split found on its first 20 000 transfers are those of the whole capture, so
    every figure is still the same."""
    p = _soak(tmp_path)
    full, b, rows = _both(p, SpiConfig(), retain=1, learn=20_000)
    assert full.n == 30_000
    _check(full, b, rows)


def test_decisions_early_or_late_same_figures(tmp_path, monkeypatch):
    """The first batch's decisions and the later measurements run in the statistics
    thread while the framer goes on; the batches are grouped the same way whether the
    decisions were ready at once or late, so every figure and row is the same."""
    p = _soak(tmp_path)
    monkeypatch.setattr(collect, "MEASURE_AT_ONCE", 1000)
    monkeypatch.setattr(collect, "QUEUED_ROWS", 20_000)       # the framer waits for the thread too
    decide = collect.Collector._decide
    threads = []

    def late(self, *a):
        threads.append(threading.current_thread().name)
        time.sleep(0.3)
        return decide(self, *a)

    early = _both(p, SpiConfig(), retain=1, learn=20_000)
    monkeypatch.setattr(collect.Collector, "_decide", late)
    slow = _both(p, SpiConfig(), retain=1, learn=20_000)
    assert threads and threads[0].startswith("spigap-stats")
    _check(*early)
    _check(*slow)
    assert early[2] == slow[2]


def test_more_stalls_than_the_store_holds(tmp_path):
    """Stall counts and time lost come from the histogram when the store overflows; the
    list then holds the longest stalls, each one of the whole analysis's."""
    p = _soak(tmp_path, messages=400, stall_probability=0.05)
    full, b, _ = _both(p, SpiConfig(), retain=1, learn=10**9, stall_keep=8)
    rule = StallRule()
    want, got = find_stalls(full, rule), find_stalls(b, rule)
    assert len(want) > 16
    from spigap.core import stalls as stalls_mod

    sw, sg = stalls_mod.to_dict(full, want, rule), stalls_mod.to_dict(b, got, rule)
    assert sg["count"] == sw["count"]
    assert sg["excess_s"] == pytest.approx(sw["excess_s"], rel=1e-9)
    for kind, d in sw["kinds"].items():
        for key in ("gaps", "stalls", "median_s", "threshold_s", "longest_s"):
            assert sg["kinds"][kind][key] == d[key], (kind, key)
        assert sg["kinds"][kind]["excess_s"] == pytest.approx(d["excess_s"], rel=1e-9)
    assert len(got) < len(want)       # the store overflowed: the list is the longest ones
    assert {(s.kind, s.transfer) for s in got} <= {(s.kind, s.transfer) for s in want}
    assert sg["stalls_omitted"] == sw["count"] - len(sg["stalls"])


# ------------------------------------------------------------------ histograms
@pytest.mark.parametrize("seed", range(6))
def test_histogram_statistics_are_numpys(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3000))
    v = [rng.integers(0, 5, n), rng.integers(0, 10**9, n), rng.poisson(40, n) * 7][seed % 3]
    h = TickHistogram()
    for part in np.array_split(v, 5):
        h.add(part)
    qs = [0, 1, 50, 99, 100]
    assert h.percentiles(qs) == percentiles(v, qs)       # the very order statistics
    med = float(median(v))
    assert h.median() == med
    assert h.mad(med) == float(median(np.abs(v.astype(float) - med)))
    d = h.describe(1e-8)
    assert (d["n"], d["min_s"], d["max_s"]) == (n, float(v.min()) * 1e-8, float(v.max()) * 1e-8)
    assert d["mean_s"] == float(v.astype(float).mean()) * 1e-8
    assert d["std_s"] == pytest.approx(float(v.astype(float).std()) * 1e-8, rel=1e-12, abs=1e-30)


def test_histogram_coarsens_past_its_bound():
    """More distinct values than the bound: bins of 2^k ticks, n/min/max/mean exact,
    percentiles within half a bin, and the table stays within the bound."""
    rng = np.random.default_rng(3)
    v = rng.integers(0, 10**7, 200_000)
    h = TickHistogram(max_distinct=1000)
    for part in np.array_split(v, 7):
        h.add(part)
    assert not h.exact and len(h.table()[0]) <= 1000
    d = h.describe(1.0)
    assert (d["n"], d["min_s"], d["max_s"], d["mean_s"]) == (len(v), float(v.min()), float(v.max()),
                                                            float(v.astype(float).mean()))
    half = 2 ** (h.shift - 1)
    for got, want in zip(h.percentiles([50, 99]), percentiles(v, [50, 99])):
        assert abs(got - want) <= half + 1


# ------------------------------------------------------------------ the CLI
def _cli(argv, capsys) -> str:
    assert main(argv) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("fmt", ["text", "json", "csv", "jsonl"])
def test_cli_outputs_same_when_bounded(fmt, capsys, monkeypatch):
    """Every --format with --transfers: the bounded path (retention bound 1) writes what the
    whole analysis writes (rows as they come; JSON's rows spliced in at the end)."""
    path = str(real(REAL_CAPTURES["atmega32"][0]))
    argv = ["analyze", path, "--clk", "2", "--mosi", "1", "--cs", "0", "--format", fmt, "--transfers"]
    whole = _cli(argv, capsys)
    monkeypatch.setattr(collect, "RETAIN_TRANSFERS", 1)
    part = _cli(argv, capsys)
    if fmt == "json":
        _same(json.loads(whole), json.loads(part))
    elif fmt == "jsonl":
        lines = [json.loads(x) for x in part.splitlines()]
        assert [x["record"] for x in lines] == ["transfer"] * (len(lines) - 1) + ["summary"]
        _same([json.loads(x) for x in whole.splitlines()], lines)
    else:
        assert part == whole


def test_jsonl_is_the_json_document(capsys):
    """--format jsonl: the JSON 'transfers' rows one per line, then the rest of the document."""
    path = str(real(REAL_CAPTURES["enc28j60"][0]))
    doc = json.loads(_cli(["analyze", path, "--format", "json", "--transfers"], capsys))
    lines = [json.loads(x) for x in _cli(["analyze", path, "--format", "jsonl"], capsys).splitlines()]
    rows = [{k: v for k, v in x.items() if k != "record"} for x in lines[:-1]]
    assert rows == doc.pop("transfers")
    summary = lines[-1]
    assert summary.pop("record") == "summary"
    assert summary == doc


def test_output_file_whole_and_bounded(tmp_path, capsys, monkeypatch):
    """-o FILE with rows streamed: the file appears with everything in it."""
    path = str(real(REAL_CAPTURES["atmega32"][0]))
    argv = ["analyze", path, "--clk", "2", "--mosi", "1", "--cs", "0", "--format", "csv"]
    want = _cli(argv, capsys)
    monkeypatch.setattr(collect, "RETAIN_TRANSFERS", 1)
    out = tmp_path / "rows.csv"
    assert main(argv + ["-o", str(out)]) == 0
    assert out.read_text() == want
    assert [p.name for p in tmp_path.iterdir()] == ["rows.csv"]      # no temporary left


def test_readme_documents_jsonl():
    text = pathlib.Path(ROOT / "README.md").read_text(encoding="utf-8")
    assert '"record": "transfer"' in text and '"record": "summary"' in text
    assert str(collect.RETAIN_TRANSFERS) in text.replace(",", "").replace(" ", "")
