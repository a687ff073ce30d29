"""spigap compare / report with (capture, trace) pairs: which kernel phase moved.

Oracle: the driver model's truth (analyzer/spigap/synth/kernel.py): the 'after' side differs
from the 'before' side in one latency only, spi_set_cs(activate) -> CS assert, and the
capture's context switch grows by the same amount, so exactly that phase moves, by the
difference of the two sides' true medians. Capture, trace and truth are written by
spigap (independent code paths: the .sr writer and the kernel model); the aligner and
the comparison never see the truth.
"""

from __future__ import annotations

import json
import re
import shlex

import numpy as np
import pytest
from conftest import CAPTURES
from util import analyze, synth

from spigap.cli import main
from spigap.stats.compare import Capture, Settings, compare
from spigap.synth import kernel
from spigap.trace import pair

US = 1e-6
MOVED = ("context_switch", "spi:spi_set_cs:activate", "bus:cs_assert")
# one transfer per message (no cs_change gap, whose set_cs -> CS phase would move too);
# irregular context switches make the windows identifiable
SCEN = dict(messages=160, transfers_per_message=1, context_switch=40e-6, cs_setup=3e-6, cs_hold=4e-6,
            sigma={"context_switch": 6e-6}, mosi="random")


def side(tmp_path, name, *, seed, extra_cs, gpio_cs, drift):
    scen = dict(SCEN, seed=seed, context_switch=SCEN["context_switch"] + extra_cs)
    sc, tl, cap = synth(tmp_path, f"{name}.sr", **scen)
    tpath = tmp_path / f"{name}.txt"
    truth = kernel.write(tl, tpath, kernel.KernelLatencies(gpio_cs_latency=gpio_cs, drift_ppm=drift, seed=seed + 7))
    a = analyze(cap)
    c = Capture(str(cap), a)
    c.traced = pair.load(tpath, a)
    med = {(p["gap"], p["from"], p["to"]): p["median_s"] for p in truth["phases"]}
    return c, cap, tpath, med


@pytest.fixture(scope="module")
def sides(tmp_path_factory):
    d = tmp_path_factory.mktemp("tc")
    before = side(d, "before", seed=3, extra_cs=0.0, gpio_cs=1.5 * US, drift=30)
    after = side(d, "after", seed=4, extra_cs=2.7 * US, gpio_cs=4.2 * US, drift=-45)
    return before, after


def test_compare_flags_exactly_the_moved_phase(sides):
    (cb, _, _, tb), (ca, _, _, ta) = sides
    cmp = compare([cb], [ca], Settings())
    assert cmp.phases is not None and len(cmp.phases) >= 10
    moved = {(r.gap, r.frm, r.to): r for r in cmp.phases if r.metric.verdict != "no significant change"}
    assert set(moved) == {MOVED}, f"moved: {sorted(moved)}"
    r = moved[MOVED]
    assert r.metric.verdict == "regression"
    true_delta = ta[MOVED] - tb[MOVED]
    assert true_delta == pytest.approx(2.7 * US, abs=0.2 * US)
    assert r.metric.deltas["p50"]["delta"] == pytest.approx(true_delta, abs=0.3 * US)
    lo, hi = r.metric.deltas["p50"]["ci"]
    assert lo > 0
    # the phases' tests are in the same Holm family as the gaps'
    n_phase_tests = sum(1 for x in cmp.phases for t in x.metric.tests if t.p is not None)
    n_gap_tests = sum(1 for m in cmp.metrics for t in m.tests if t.p is not None)
    assert cmp.n_tests == n_phase_tests + n_gap_tests


def test_same_model_both_sides_moves_nothing(sides, tmp_path):
    (cb, _, _, _), _ = sides
    other, _, _, _ = side(tmp_path, "again", seed=9, extra_cs=0.0, gpio_cs=1.5 * US, drift=-10)
    cmp = compare([cb], [other], Settings())
    assert [r.metric.name for r in cmp.phases if r.metric.verdict != "no significant change"] == []


def test_cli_compare_json_and_text(sides, capsys, tmp_path):
    (_, capb, trb, _), (_, capa, tra, _) = sides
    out = tmp_path / "c.json"
    assert main(["compare", "--before", str(capb), "--after", str(capa), "--before-ftrace", str(trb),
                 "--after-ftrace", str(tra), "--format", "json", "-o", str(out)]) == 0
    d = json.loads(out.read_text())
    assert d["moved_phases"] == ["phase:context_switch:spi:spi_set_cs:activate->bus:cs_assert"]
    row = next(p for p in d["phases"] if (p["gap"], p["from"], p["to"]) == MOVED)
    assert row["verdict"] == "regression" and row["delta"]["p50"]["delta_s"] > 2 * US
    assert d["traces"]["before"][0]["alignment"]["matched"] > 100
    main(["compare", "--before", str(capb), "--after", str(capa), "--before-ftrace", str(trb),
          "--after-ftrace", str(tra)])
    text = capsys.readouterr().out
    assert "→ moved: context_switch: spi:spi_set_cs:activate → bus:cs_assert: p50 +2." in text


def test_cli_trace_counts_must_pair(sides, capsys):
    (_, capb, trb, _), (_, capa, tra, _) = sides
    assert main(["compare", "--before", str(capb), str(capb), "--after", str(capa), "--before-ftrace", str(trb),
                 "--after-ftrace", str(tra)]) == 2
    assert "one trace per capture" in capsys.readouterr().err
    assert main(["compare", "--before", str(capb), "--after", str(capa), "--before-ftrace", str(trb)]) == 2
    assert "go together" in capsys.readouterr().err


def test_report_has_the_phase_sections(sides, tmp_path):
    (_, capb, trb, _), (_, capa, tra, _) = sides
    html = tmp_path / "r.html"
    png = tmp_path / "png"
    assert main(["report", "--before", str(capb), "--after", str(capa), "--before-ftrace", str(trb),
                 "--after-ftrace", str(tra), "-o", str(html), "--png", str(png)]) == 0
    text = html.read_text()
    for sid in ("capture-1-phases", "capture-2-phases", "compare-phases"):
        assert f'id="{sid}"' in text
    assert "spi:spi_set_cs:activate" in text and "REGRESSION" in text
    names = {p.name for p in png.iterdir()}
    assert {"compare-phases.png", "01-before-phases.png", "01-before-phase-timeline.png",
            "02-after-phase-timeline.png"} <= names


def _recipe_trace_args(recipe):
    """The synth command written in the recipe's comment (its --ftrace flags)."""
    text = recipe.read_text()
    m = re.search(r"#\s+spigap synth (.*?)\n#\s+(--ftrace .*?)\n", text)
    assert m, f"{recipe.name}: no 'spigap synth ... --ftrace ...' command in the comment"
    return shlex.split(m.group(1)) + shlex.split(m.group(2))


@pytest.mark.parametrize("kver", ["6.6.31", "6.12.25"])
def test_shipped_seed003_traces_match_their_recipes(kver, tmp_path):
    recipe = CAPTURES / f"ad7606-pi5-k{kver}-traced.toml"
    argv = _recipe_trace_args(recipe)
    fresh = {"-o": tmp_path / "c.sr", "--ftrace": tmp_path / "t.txt"}
    for i, x in enumerate(argv):
        if x in fresh:
            assert argv[i + 1] == f"captures/ad7606-pi5-k{kver}-traced.{'sr' if x == '-o' else 'txt'}"
            argv[i + 1] = str(fresh[x])
        elif x == "--config":
            argv[i + 1] = str(recipe)
    assert main(["synth"] + argv) == 0
    shipped = CAPTURES / f"ad7606-pi5-k{kver}-traced.txt"
    assert shipped.read_bytes() == fresh["--ftrace"].read_bytes(), f"{shipped.name} differs from its recipe"


def test_seed003_the_regression_sits_before_the_cs_edge():
    """The README walk-through: on the shipped 6.6.31 / 6.12.25 pairs only
    spi_set_cs(activate) -> CS assert moves, by the recipes' +2.7 µs."""
    caps = []
    for kver in ("6.6.31", "6.12.25"):
        cap = CAPTURES / f"ad7606-pi5-k{kver}-traced.sr"
        a = analyze(cap)
        c = Capture(str(cap), a)
        c.traced = pair.load(CAPTURES / f"ad7606-pi5-k{kver}-traced.txt", a)
        caps.append(c)
    cmp = compare([caps[0]], [caps[1]], Settings())
    moved = [r for r in cmp.phases if r.metric.verdict != "no significant change"]
    assert [(r.gap, r.frm, r.to) for r in moved] == [MOVED]
    assert moved[0].metric.deltas["p50"]["delta"] == pytest.approx(2.7 * US, abs=0.3 * US)
    assert float(np.median(caps[1].analysis.period())) * caps[1].analysis.tick_s == pytest.approx(24.3 * US,
                                                                                                   abs=0.1 * US)
