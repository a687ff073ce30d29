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


def test_never_seen_basis_states_the_measured_unseen_share():
    """The shipped table: a clock on a kind of evidence never measured states the never-seen
    share of the cross-validation (calibration_data.UNSEEN), a number the corpus gave."""
    assert ("bus", "unseen") in calibration.UNSEEN
    p = calibration.stated("bus", "a basis no capture had")
    n, k, en, ek = calibration.UNSEEN[("bus", "unseen")]
    assert p == min(0.95, max(0.05, int((ek + 1) / (en + 2) * 20 + 1e-9) / 20))
