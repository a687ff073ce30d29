"""Settings confidences (core/infer/calibration.py) and one data line's direction
(core/infer/mosi_miso.py): the rules on signals whose answer is known by construction, and the
cross-validation that measures them (tests/sigrok_dumps_eval.py, docs/inference.md "Calibration")."""

from __future__ import annotations

import numpy as np
import pytest

import sigrok_dumps_eval as ev_script
from spigap.core.config import SpiConfig
from spigap.core.infer import calibration
from spigap.core.infer.evidence import Evidence
from spigap.core.infer.mosi_miso import line_basis
from spigap.core.infer.report import Bus

HALF = 10          # ticks per clock phase


def _evidence(delay_of, words: int = 12) -> Evidence:
    """A mode-0 bus (clk bit 0, active-low cs bit 1, data bit 2): ``words`` 8-bit transfers of
    varied bits; the data line changes ``delay_of(k)`` ticks after the k-th trailing (falling)
    clock edge at which it changes."""
    rng = np.random.default_rng(7)
    events: dict[int, dict[int, int]] = {}

    def put(t: int, ch: int, v: int) -> None:
        events.setdefault(t, {})[ch] = v

    t, k = 100, 0
    put(0, 1, 1)
    for _ in range(words):
        put(t, 1, 0)                              # CS asserts
        bits = rng.integers(0, 2, 8)
        put(t + 1, 2, int(bits[0]))
        for i in range(8):
            rise = t + HALF + 2 * HALF * i
            put(rise, 0, 1)
            put(rise + HALF, 0, 0)
            if i < 7 and bits[i + 1] != bits[i]:
                put(rise + HALF + delay_of(k), 2, int(bits[i + 1]))
                k += 1
        put(t + 2 * HALF * 8 + HALF, 1, 1)        # CS deasserts
        t += 400
    ticks, states, level = [], [], {0: 0, 1: 1, 2: 0}
    for tt in sorted(events):
        level.update(events[tt])
        ticks.append(tt)
        states.append(level[0] | level[1] << 1 | level[2] << 2)
    return Evidence(np.array(ticks, np.int64), np.array(states, np.uint32), ["clk", "cs", "d"])


@pytest.mark.parametrize("delay_of, basis", [
    (lambda k: 0, "one, with the edge"),                     # launched with SCLK (a controller)
    (lambda k: 1 if k % 3 == 0 else 0, "one, after the edge"),   # a sample late a third of the time
    (lambda k: HALF // 2, "one, between edges"),             # set between edges (bit-banged)
])
def test_one_line_basis_is_when_it_switches_after_the_edge(delay_of, basis):
    ev = _evidence(delay_of)
    got, note = line_basis(ev, "d", Bus("clk", "cs", ["d"], len(ev.changes["clk"]), 0), SpiConfig())
    assert got == basis, note


def test_one_line_with_too_few_changes_is_no_evidence():
    ev = _evidence(lambda k: 0, words=1)
    got, _ = line_basis(ev, "d", Bus("clk", "cs", ["d"], len(ev.changes["clk"]), 0), SpiConfig())
    assert got == "one, few changes"
    assert calibration.direction(got) is None       # both readings, MOSI first, at 0.5
    assert calibration.stated("mosi", "two, alike") == calibration.DEFAULT_ONLY


def test_shipped_direction_follows_the_measured_shares():
    """A line switching in the edge's sample is MOSI, one lagging it MISO (as measured on the
    corpus' data lines: calibration_data.py), each at its share, never surer than 0.95."""
    role, conf = calibration.direction("one, with the edge")
    assert role == "mosi" and 0.75 <= conf <= 0.95
    role, conf = calibration.direction("one, after the edge")
    assert role == "miso" and 0.55 <= conf < 0.95


def _result(unit: str, basis: str, right: bool, setting: str = "bus") -> dict:
    return {"unit": unit, "renamed": False, "items": [
        {"setting": setting, "confidence": 0.0, "from": "inferred", "basis": basis, "right": right}]}


def test_cross_validation_states_each_answer_from_the_folds_without_its_device():
    """An answer is stated by the fit on the other folds: a basis right everywhere else is stated
    high even where it is wrong; a basis only one device shows is stated at the never-seen share
    the other folds measure, not at a fixed 0.5."""
    units = [f"spi/dev{i}" for i in range(40)]
    results = [_result(u, "common", ev_script.fold(u) != 0 or i % 2 == 0) for i, u in enumerate(units)]
    # each of these bases is seen in one device only: never seen by the other folds; 1 in 4 right
    results += [_result(u, f"rare{i}", i % 4 == 0) for i, u in enumerate(units)]
    oof = ev_script.crossval(results)
    assert len(oof) == len(results)
    common = [r["items"][0] for r in oof if r["items"][0]["basis"] == "common"]
    table = ev_script.measured([r for r in results if ev_script.fold(r["unit"]) != 0])
    in_fold0 = [r for r in oof if ev_script.fold(r["unit"]) == 0 and r["items"][0]["basis"] == "common"]
    assert in_fold0 and all(r["items"][0]["confidence"] == calibration.stated("bus", "common", table, {})
                            for r in in_fold0)
    assert all(it["confidence"] >= 0.8 for it in common)
    rare = [r["items"][0] for r in oof if r["items"][0]["basis"].startswith("rare")]
    assert all(0.1 <= it["confidence"] <= 0.4 for it in rare), sorted({it["confidence"] for it in rare})
    un = ev_script.unseen(results, list(range(ev_script.FOLDS)))
    n, k, _, _ = un[("bus", "unseen")]
    assert n == 40 and k == 10


def test_one_line_answers_are_chosen_again_in_each_fold():
    """One data line's role is re-chosen by the fold's own measured direction (an answer taken as
    MOSI by the shipped table is right out of fold only if the fold's fit also says MOSI)."""
    table = {(calibration.DIRECTION, "one, after the edge"): (10, 8, 10.0, 8.0)}
    it = {"setting": "mosi", "confidence": 0.5, "from": "inferred", "basis": "one, after the edge",
          "right": False, "is_miso": True}
    got = ev_script.restate(it, table, {})
    assert got["setting"] == "miso" and got["right"] and got["confidence"] == 0.75


def test_never_seen_basis_states_the_measured_unseen_share_when_credible():
    """The shipped table: a clock on a kind of evidence never measured states the never-seen
    share of the cross-validation (calibration_data.UNSEEN) only where the corpus tells it from a
    coin toss (95 % of the Beta posterior on one side of one half); else 0.5. The bus' never-seen
    answers (about 11 of 20 right; a fold's fit measured 40-70 %) state 0.5: out of fold the
    answers stated 0.60-0.65 by their fold's share were right 4 times in 12."""
    n, k, en, ek = calibration.UNSEEN[("bus", "unseen")]
    assert 0.3 < ek / en < 0.7
    assert calibration.stated("bus", "a basis no capture had") == calibration.DEFAULT_ONLY
    # a share the answers do put away from one half is stated
    assert calibration.stated("bus", "new", {}, {("bus", "unseen"): (5, 5, 5.0, 5.0)}) == 0.85
    assert calibration.stated("bus", "new", {}, {("bus", "unseen"): (20, 2, 20.0, 2.0)}) == 0.1
    # ... and one it does not is a coin toss (the old rule stated 10 of 14 at 0.65)
    assert calibration.stated("bus", "new", {}, {("bus", "unseen"): (14, 10, 14.0, 10.0)}) == 0.5
    assert calibration.stated("bus", "new", {}, {("bus", "unseen"): (3, 3, 3.0, 3.0)}) == 0.5


def test_prior_is_fitted_to_how_bases_spread():
    """The Beta prior of a setting's bases is the one that makes their answers most likely: bases
    that are right nearly always or wrong nearly always (SPI evidence, or a look-alike's) give a
    U-shaped prior, under which two right answers of a new basis say it is sure (the old rule,
    one right and one wrong added, stated 2 of 2 at 0.75: under-confident out of fold)."""
    table = {("bus", f"good{i}"): (n, n, float(n), float(n)) for i, n in enumerate((20, 9, 14, 3, 30, 6))}
    table.update({("bus", f"bad{i}"): (n, 0, float(n), 0.0) for i, n in enumerate((12, 5, 8))})
    prior = ev_script.fit_prior(table)
    a, b = prior["bus"]
    assert a < 1 and b < 1, prior
    table[("bus", "two right")] = (2, 2, 2.0, 2.0)
    table[("bus", "two wrong")] = (2, 0, 2.0, 0.0)
    assert calibration.stated("bus", "two right", table, {}, prior) >= 0.85
    assert calibration.stated("bus", "two wrong", table, {}, prior) <= 0.15
    # bases alike (each right about 90 %): a strong prior near their common share
    alike = {("cs", f"b{i}"): (n, round(0.9 * n), float(n), float(round(0.9 * n))) for i, n in
             enumerate((30, 20, 40, 10, 50))}
    a, b = ev_script.fit_prior(alike)["cs"]
    assert a + b >= 5 and 0.8 <= a / (a + b) <= 0.97


def test_shipped_small_counts_are_stated_near_their_share():
    """Bases seen on one to three devices, all right, state what bases like them measure (the
    shipped prior), not 0.6-0.85: a CS latch strobe (2 of 2, one device named and renamed), a clock
    beside a CS over a data line that never changes (2 of 2, two devices), a loose CS's clock, a
    mode read from a few changes."""
    for setting, basis in (("cs", "latch"), ("bus", "bracket/static1"), ("bus", "loose/edges1"),
                           ("mode", "clear, few")):
        n, k, en, ek = calibration.MEASURED[(setting, basis)]
        assert k == n and en <= 8, (setting, basis)
        assert calibration.stated(setting, basis) >= 0.9, (setting, basis)
    # the wrong ones stay low: a square-wave CS (a divided clock gating another), 0 of 2
    assert calibration.stated("bus", "square/edges1") <= 0.2


def test_band_table_counts_answers_and_says_which_miss():
    """The published band table (docs/inference.md): answers by setting and band, the mean stated,
    the share right and whether they are within 10 points."""
    items = [{"setting": "bus", "confidence": 0.65, "from": "inferred", "basis": "x", "right": i < 4} for i in range(12)]
    items += [{"setting": "miso", "confidence": 0.9, "from": "inferred", "basis": "y", "right": True}] * 10
    rows = ev_script.band_rows([{"items": items}])
    assert rows[0][:3] == ("bus", "0.55-0.75", 12) and rows[0][4] == 4
    assert rows[1][:3] == ("MOSI/MISO", "0.80-0.95", 10)
    text = ev_script.bands([{"items": items}])
    assert "| bus | 0.55-0.75 | 12 | 0.65 | 4 (33 %) |" in text and text.splitlines()[2].endswith("| no |")
    lo, hi = ev_script.wilson(4, 12)
    assert 0.1 < lo < 0.33 < hi < 0.65


def test_shipped_prior_is_the_fit_of_the_shipped_table():
    """calibration_data.PRIOR is what the evaluation's fit makes of MEASURED (nothing by hand)."""
    assert calibration.PRIOR == ev_script.fit_prior(calibration.MEASURED)
    assert set(calibration.PRIOR) == {"bus", "cs", "data", "mode", calibration.DIRECTION}


def test_cpha_without_evidence_is_the_base_rate_given_cpol():
    """No data line changes: CPHA the one devices idling at that CPOL use more often, at the share
    that do (the posterior mean under a uniform prior), only when that share is credibly away from
    one half; else None (0.5 and the default)."""
    table = {0: (40, 4, 19.0, 2.0), 1: (20, 14, 6.0, 4.5)}
    assert calibration.cpha_prior(0, table) == (0, 0.85)          # 1 - 3/21
    assert calibration.cpha_prior(1, table) is None               # 5.5 of 8: not credible
    assert calibration.cpha_prior(1, {1: (30, 29, 12.0, 11.0)}) == (1, 0.85)
    assert calibration.cpha_prior(0, {}) is None


def test_cpha_base_rate_counts_each_device_once_and_is_restated_per_fold():
    """The base rate is a device's mode: each unit is one answer (its captures' share), measured on
    answers whose CPHA the signals settle; out of fold a mode without data changes takes its fold's
    base rate again, right when that reading is."""
    def mode(unit, cpol, cpha, basis="clear"):
        return {"unit": unit, "items": [{"setting": "mode", "from": "inferred", "basis": basis, "right": True,
                                         "confidence": 0.95, "cpol": cpol, "cpha": cpha, "ok_cpha": [cpha]}]}
    results = [mode("spi/a", 0, 0)] * 9 + [mode("spi/b", 0, 0), mode("spi/c", 0, 1), mode("spi/d", 0, 0, "split")]
    assert ev_script.cpha_table(results) == {0: (11, 1, 3.0, 1.0)}
    it = {"setting": "mode", "from": "inferred", "basis": calibration.NO_CPHA, "right": True, "confidence": 0.5,
          "cpol": 1, "cpha": 0, "ok_cpha": [0]}
    got = ev_script.restate(it, {}, {}, {}, {1: (10, 10, 10.0, 10.0)})
    assert got["cpha"] == 1 and got["confidence"] == 0.9 and not got["right"]
    got = ev_script.restate(it, {}, {}, {}, {1: (4, 3, 4.0, 3.0)})
    assert got["cpha"] == 0 and got["confidence"] == 0.5 and got["right"]


def test_shipped_cpha_base_rate_is_the_evaluations():
    """calibration_data.CPHA holds one row per CPOL, each device once (no more devices than answers)."""
    assert set(calibration.CPHA) <= {0, 1}
    for n, k, en, ek in calibration.CPHA.values():
        assert 0 <= ek <= en <= n and k <= n


def test_line_family_states_each_line_by_the_fit_without_its_device():
    """One data line's direction on its family (every true data line as if captured alone): each
    line's role and confidence come from the folds without its device; right when the role is the
    line's. Units of one fold fitted on the others only."""
    def line(unit, basis, miso):
        return {"unit": unit, "items": [{"setting": calibration.DIRECTION, "confidence": 0.0, "from": "inferred",
                                         "basis": basis, "right": miso}]}
    units = [f"spi/dev{i}" for i in range(40)]
    results = [line(u, "one, released", True) for u in units] + [line("spi/odd", "one, weird", True)]
    fam = ev_script.line_family(results)
    got = {r["unit"]: r["items"][0] for r in fam}
    assert all(got[u]["setting"] == "miso" and got[u]["right"] and got[u]["confidence"] >= 0.85 for u in units)
    # a basis no other fold saw: no measured direction, MOSI at 0.5 (wrong here)
    assert got["spi/odd"]["confidence"] == 0.5 and got["spi/odd"]["setting"] == "mosi" and not got["spi/odd"]["right"]
    assert "| one data line | 0.80-0.95 | 40 |" in ev_script.line_table(results)
