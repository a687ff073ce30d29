"""The message grouping beyond our own grid (issue 24): the randomized driver behaviours of
tests/driver_behaviour.py and the patterns the issue found spigap confidently wrong on.

Each pattern must give the right labels, or an honest low-confidence answer whose named
readings include the true one. The reliability on the held-back seeds (never used while
the grouping was developed, docs/gaps.md "Calibration"): the default run checks the first 200
(judged once, by one worker), ``SPIGAP_CALIBRATION=full pytest -m calibration`` all 4000.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from conftest import CAPTURES

import driver_behaviour as db
import grouping_behaviour as gb
from spigap.cli import main
from spigap.core import grouping

SEEDS = (101, 102, 103)             # the patterns' own seeds (not calibration seeds)
JITTERS = ((0.02, 0.15), (0.05, 0.05), (0.01, 0.3))    # (cs_change, context switch) lognormal sigma


def _infer(case, **kw):
    return grouping.infer(case.gaps, lead=case.lead, tick_s=1.0 / case.samplerate, **kw)


def _right(kinds, case) -> float:
    return float(np.mean((kinds == grouping.CONTEXT_SWITCH) == case.boundary))


def _named(grp, case) -> bool:
    """The truth is among the readings an ambiguous answer names."""
    return any(_right(k, case) >= 0.98 for k in grp.rival_kinds)


@pytest.mark.parametrize("name", db.ISSUE_PATTERNS)
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("cs_sigma,ctx_sigma", JITTERS)
def test_issue_pattern_right_or_honest(name, seed, cs_sigma, ctx_sigma):
    case = db.issue_pattern(name, seed, cs_sigma=cs_sigma, ctx_sigma=ctx_sigma)
    grp = _infer(case)
    if grp.ambiguous:
        assert grp.confidence <= 0.5 and _named(grp, case), grp.note
        assert grp.settle and "kernel trace" in grp.settle
        assert grp.rival                         # the text names the other readings
    else:
        assert _right(grp.kinds, case) >= 0.98, grp.note


def test_irq_mix_names_both_readings():
    # cs_change 1 µs, context switch 5 µs, IRQ gaps 30-800 µs: three kinds; was "N = 4, 0.95"
    case = db.issue_pattern("irq-1-3", 101)
    grp = _infer(case)
    assert grp.ambiguous and grp.confidence <= 0.5
    assert "4 transfers per message" in grp.note and "messages of 1 and 3 transfers alternate" in grp.note
    assert [k["shape"] for k in grp.gap_kinds][-1] == "wide"


def test_pauses_every_4th_call_is_ambiguous():
    # one transfer per ioctl, a pause every 4th call: was "N = 4, 0.95", 25 % right
    case = db.issue_pattern("ioctl-pause-4", 101)
    grp = _infer(case)
    assert grp.ambiguous and grp.confidence <= 0.5
    assert "4 transfers per message" in grp.note and "1 transfer per message" in grp.note
    assert "--transfers-per-message 1" in grp.settle and "--transfers-per-message 4" in grp.settle


@pytest.mark.parametrize("name", ["batch-4-8", "batch-4-8-mid"])
def test_batch_size_change_is_two_segments(name):
    # N = 4, then N = 8: was "6 single transfers, then a message of 2" / "N = 8" for the whole capture
    case = db.issue_pattern(name, 101)
    grp = _infer(case)
    assert _right(grp.kinds, case) == 1.0 and grp.confidence >= 0.9 and not grp.ambiguous
    assert grp.structure == "segments" and grp.transfers_per_message is None
    assert [s.transfers_per_message for s in grp.segments] == [4, 8]
    cut = int(np.flatnonzero(np.diff(np.flatnonzero(case.boundary)) == 8)[0])
    first_8 = int(np.flatnonzero(case.boundary)[cut]) + 1      # the first transfer of an 8-message
    assert abs(grp.segments[1].first_transfer - first_8) <= 8
    assert grp.segments[0].first_transfer == 0 and grp.segments[1].last_transfer is None


def test_stall_at_the_start_is_no_idle_evidence():
    # N = 2, the first CS-high stretch 1 ms long but inside a message: was "N = 2 with the phase
    # swapped, 0.95"; the busy-wait and the idle start disagree, and the answer says so
    case = db.issue_pattern("n2-stalled-start", 101)
    grp = _infer(case)
    assert grp.ambiguous and grp.confidence <= 0.5 and _named(grp, case)
    assert "the evidence disagrees" in grp.note


def test_seed_001_capture_names_the_true_reading(capsys):
    # four spi_sync accesses per received frame, every gap ends a message: before, the true
    # reading was not among those offered, and --device mcp2518fd said "1+1+2", 0.75
    path = CAPTURES / "mcp2518fd-imx8mp-k5.18-B-rx.sr"
    for extra, rivals in (([], {None, 4, 1}), (["--device", "mcp2518fd"], {None, 1})):
        assert main(["analyze", str(path), "--format", "json", *extra]) == 0
        d = json.loads(capsys.readouterr().out)
        g = d["summary"]["grouping"]
        assert g["ambiguous"] and g["confidence"] <= 0.5
        named = {r["transfers_per_message"] for r in g["readings"] if r["status"] == "rival"}
        assert named == rivals, g["readings"]
        assert "1 transfer per message" in g["note"] and "--transfers-per-message 1" in g["settle"]
        assert any(w.startswith("message grouping ambiguous") for w in d["warnings"])
    # the recipe's own answer, given: right
    assert main(["analyze", str(path), "--format", "json", "--transfers-per-message", "1"]) == 0
    g = json.loads(capsys.readouterr().out)["summary"]["grouping"]
    assert g["confidence"] == 1.0 and not g["ambiguous"]


def test_segments_in_a_capture(tmp_path, capsys):
    """End to end: a capture whose batch size changes (the generator's gaps on a bus) gives
    JSON segments with their transfer ranges, and the text says so."""
    from spigap.synth import SpiShape, Track, Windows, build, tracks, write_sr

    case = db.issue_pattern("batch-4-8", 102)
    sr = case.samplerate
    gaps_s = np.concatenate([[case.lead / sr], case.gaps / sr])
    n = len(gaps_s)
    kind = np.where(np.concatenate([[False], case.boundary]), "context_switch", "cs_change").astype(object)
    kind[0] = "lead"
    ww = np.repeat(np.arange(n), 2)
    w = Windows(gap_before=gaps_s, cs_setup=np.full(n, 1.5e-6), cs_hold=np.full(n, 0.5e-6), kind=kind,
                message=np.cumsum(kind == "context_switch"), word_window=ww,
                mosi=np.arange(2 * n, dtype=np.uint64) & np.uint64(255), miso=np.zeros(2 * n, np.uint64),
                word_gap=np.where(np.arange(2 * n) % 2 == 1, 0.4e-6, 0.0), word_boundary=np.zeros(2 * n, bool))
    tl = build(w, SpiShape(4e6), 20e-6)
    trs: list[Track] = tracks(tl, {"clk": "SCLK", "mosi": "MOSI", "miso": "MISO", "cs": "CS"}, sr)
    path = tmp_path / "batch.sr"
    write_sr(path, trs, sr, int(round(tl.end_time * sr)))
    assert main(["analyze", str(path), "--format", "json"]) == 0
    g = json.loads(capsys.readouterr().out)["summary"]["grouping"]
    assert g["structure"] == "segments" and not g["ambiguous"]
    seg = g["segments"]
    assert [s["transfers_per_message"] for s in seg] == [4, 8]
    assert seg[0]["first_transfer"] == 0 and seg[-1]["last_transfer"] == n - 1
    assert seg[0]["last_transfer"] + 1 == seg[1]["first_transfer"]
    assert main(["analyze", str(path)]) == 0
    out = capsys.readouterr().out
    assert "in 2 stretches" in out and "then 8 transfers per message" in out


def _check_reliability(results, points: int | None = None):
    """Issue 32's goal on the held-back cases (an answer is right with >= 98 % of its gaps right):
    no level at >= 0.8 below 95 % right, every level within 10 points of its share right (beyond
    what the level's count leaves to chance: the share's 90 % interval; a level with ``points``
    answers or more: its share itself, as docs/gaps.md states it), a quarter of the answers at
    >= 0.9, ambiguous answers naming the truth more often than not."""
    for c, ok, n in _levels(results):
        if c >= 0.8:
            assert ok / n >= 0.95, (c, n, ok / n)
        assert _within(c, ok, n), (c, n, ok / n)
        if points is not None and n >= points:
            # the 0.75 level at 86.1 % on the retired seeds (0.95 from kinds measured 90 %) failed this
            assert abs(ok / n - c) <= 0.1, (c, n, ok / n)
    sure = [r for r in results if r["confidence"] >= 0.9]
    assert len(sure) >= 0.25 * len(results), "an always-ambiguous tool fails users just as much"
    amb = [r for r in results if r["ambiguous"]]
    assert np.mean([r["named"] >= gb.RIGHT for r in amb]) >= 0.6


def _levels(results):
    out = []
    for c in sorted({r["confidence"] for r in results if not r["ambiguous"]}):
        rs = [r for r in results if not r["ambiguous"] and r["confidence"] == c]
        out.append((c, sum(r["right"] >= gb.RIGHT for r in rs), len(rs)))
    return out


def _within(c, ok, n) -> bool:
    return gb.wilson_lower(ok, n) - 0.1 <= c <= 1 - gb.wilson_lower(n - ok, n) + 0.1


# The held-back sample is judged once per run (about 10 s of CPU): its tests share one xdist group
# (make test's --dist loadgroup), and the judged sample is kept under build/test-cache keyed by a
# hash of the grouping code, the gap rules and the generator, a lock making a second worker wait
# for the first (xdist does not always keep a group on one worker); any change judges it afresh
HELD_BACK_GROUP = pytest.mark.xdist_group("grouping-held-back")


def _code_hash() -> str:
    import hashlib
    import pathlib

    from spigap.resources import decoders_dir

    h = hashlib.sha256(repr(list(db.HELD_BACK_FAST)).encode())
    files = (sorted(pathlib.Path(grouping.__file__).parent.glob("*.py")) + sorted((decoders_dir() / "spi_gaps").glob("*.py"))
             + [pathlib.Path(db.__file__), pathlib.Path(gb.__file__)])
    for f in files:
        h.update(f.name.encode() + f.read_bytes())
    return h.hexdigest()[:24]


@pytest.fixture(scope="session")
def held_back_fast():
    import fcntl
    import pathlib
    import pickle

    from conftest import TEST_CACHE

    if os.environ.get("SPIGAP_TEST_CACHE") == "off":
        return gb.run(db.HELD_BACK_FAST)
    folder = pathlib.Path(os.environ.get("SPIGAP_TEST_CACHE") or TEST_CACHE) / "grouping"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"held-back-{_code_hash()}.pickle"
    with open(folder / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.is_file():
            return pickle.loads(path.read_bytes())
        results = gb.run(db.HELD_BACK_FAST)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(pickle.dumps(results))
        os.replace(tmp, path)
        return results


@HELD_BACK_GROUP
def test_reliability_held_back_fast(held_back_fast):
    _check_reliability(held_back_fast)


def _constant_n_cases(results, busy_wait=None):
    """Issue 32's constant-N cases: an idle start (N >= 2), or N >= 7 anywhere; ``busy_wait``: only
    those whose cs_change is the default 10 µs busy-wait (spidev, a kernel loop's default delay)."""
    out = []
    for r in results:
        c, n = r["case"], gb.constant_n(r["case"]) or 0
        if (n >= 2 and c.start == "idle") or n >= 7:
            if busy_wait is None or busy_wait == (c.family == "spidev-n" or "default 10" in c.desc):
                out.append(r)
    return out


def _sure_and_right(rs) -> float:
    return float(np.mean([not r["ambiguous"] and r["confidence"] >= 0.8 and r["right"] >= gb.RIGHT for r in rs]))


@HELD_BACK_GROUP
def test_constant_n_with_a_busy_wait_is_answered_sure(held_back_fast):
    # the busy-wait tells the cs_change gaps, the idle start or the share the phase: answered at
    # >= 0.8 and right (4000 held-back seeds 9 216 001-9 220 000: 92 % of the idle starts)
    rs = [r for r in _constant_n_cases(held_back_fast, busy_wait=True) if r["case"].start == "idle"]
    assert len(rs) >= 10 and _sure_and_right(rs) >= 0.8, [(r["case"].desc, r["basis"], r["confidence"]) for r in rs]


@HELD_BACK_GROUP
@pytest.mark.xfail(strict=True, reason="issue 32's goal, constant N answered at >= 0.8: measured on the 4000 held-back "
                   "cases (seeds 9 216 001-9 220 000), spidev idle starts 95 %, kernel loops 62 %, N >= 7 anywhere 79 %, "
                   "all 76 % (82 % of the captures that hold 5 messages or more; docs/gaps.md). The rest timing alone "
                   "cannot settle: captures too short to show 5 messages (N >= 17), answers right but below 0.8, N = "
                   "2-16 without a busy-wait (a pause every N calls or an spi_async queue looks the same), kernel loops "
                   "whose cs_change_delay is as long as the gap between messages with no phase shifted enough for the "
                   "rank test's bound; a kernel trace or --transfers-per-message settles them")
def test_constant_n_goal_not_met_yet(held_back_fast):
    """Issue 32's goal in full: constant-N captures with an idle start, or N >= 7 anywhere,
    answered at >= 0.8 (and right), 80 % of them or more."""
    assert _sure_and_right(_constant_n_cases(held_back_fast)) >= 0.8


@pytest.mark.calibration
@pytest.mark.skipif(os.environ.get("SPIGAP_CALIBRATION") != "full", reason="SPIGAP_CALIBRATION=full runs it")
def test_reliability_held_back_full():
    _check_reliability(gb.run_parallel(db.HELD_BACK), points=100)


def test_generator_draws_every_family_and_start():
    cases = [db.draw(s) for s in db.DEVELOPMENT[:200]]
    assert {c.family for c in cases} == set(db.FAMILIES)
    assert {c.start for c in cases} == {"idle", "mid", "stall"}
    for c in cases:
        assert len(c.gaps) == len(c.boundary) and (c.gaps >= 1).all()
    # the held-back seeds are not development seeds
    assert not set(db.HELD_BACK) & set(db.DEVELOPMENT)


# ------------------------------------------------------------- issue 32's grouping cases
# answers it had and withheld (constant N, an idle start or N >= 7), and the close, tight gaps it
# was sure of and wrong on. Gaps at 50 MSa/s, lognormal jitter; the seeds are the cases' own.

def _constant_n(N: int, cs_us: float, ctx_us: float, cs_sigma: float, ctx_sigma: float, *, drop: int = 0,
                n: int = 3000, seed: int = 1):
    rng = np.random.default_rng(seed)
    b = np.zeros(n - 1, bool)
    b[N - 1::N] = True
    g = np.where(b, ctx_us * np.exp(rng.normal(0, ctx_sigma, n - 1)), cs_us * np.exp(rng.normal(0, cs_sigma, n - 1)))
    return np.maximum(np.rint(g[drop:] * 50), 1.0), b[drop:]


# (cs_change, context switch, their sigmas): a kernel driver's fast cs_change (GPIO writes only)
# and spi_sync; a 2 µs cs_change_delay and a user-space round trip; neither is the 10 µs busy-wait
NO_BUSY_WAIT = {"fast": (0.26, 5.0, 0.03, 0.05), "delay": (2.0, 30.0, 0.1, 0.3)}


@pytest.mark.parametrize("timing", sorted(NO_BUSY_WAIT))
@pytest.mark.parametrize("seed", (1, 2))
def test_n50_idle_start_is_answered_sure(timing, seed):
    # was "50 per message", right, at 0.75: an answer 4 in 4 right, stated as 3 in 4
    g, b = _constant_n(50, *NO_BUSY_WAIT[timing], seed=seed)
    grp = grouping.infer(g, lead=50_000.0, tick_s=1 / 50e6)
    assert not grp.ambiguous and grp.transfers_per_message == 50
    assert float(np.mean((grp.kinds == grouping.CONTEXT_SWITCH) == b)) == 1.0
    assert grp.confidence >= 0.8, grp.basis


@pytest.mark.parametrize("timing", sorted(NO_BUSY_WAIT))
@pytest.mark.parametrize("seed", (1, 2))
def test_n20_from_mid_message_is_answered(timing, seed):
    # was "ambiguous" (0.5) on every gap: the capture starts 10 transfers into a message
    g, b = _constant_n(20, *NO_BUSY_WAIT[timing], drop=10, seed=seed)
    grp = grouping.infer(g, lead=20.0, tick_s=1 / 50e6)
    assert not grp.ambiguous and grp.transfers_per_message == 20
    assert float(np.mean((grp.kinds == grouping.CONTEXT_SWITCH) == b)) == 1.0
    assert grp.confidence >= 0.8, grp.basis


@pytest.mark.parametrize("seed", (1, 2, 3))
@pytest.mark.parametrize("base,extra,every", [(2.0, 1.0, 8), (0.5, 0.3, 4), (5.0, 4.0, 12), (1.0, 1.2, 3)])
@pytest.mark.parametrize("lead", (50_000.0, 20.0))
def test_close_tight_gaps_are_not_answered_sure_and_wrong(seed, base, extra, every, lead):
    # an spi_async queue: every gap ends a message, all of them tight and close (a little longer
    # every k-th one, a completion handled); was "k per message" at 0.75 with 1 gap in k right
    rng = np.random.default_rng(seed)
    g = base * np.exp(rng.normal(0, 0.02, 2999))
    g[np.arange(2999) % every == 3 % every] += extra
    grp = grouping.infer(np.maximum(np.rint(g * 50), 1.0), lead=lead, tick_s=1 / 50e6)
    right = float(np.mean(grp.kinds == grouping.CONTEXT_SWITCH))
    if grp.ambiguous:
        assert grp.confidence <= 0.5 and any(float(np.mean(k == grouping.CONTEXT_SWITCH)) >= 0.98
                                             for k in grp.rival_kinds), grp.note
    else:
        assert right >= 0.98 or grp.confidence <= 0.4, (grp.basis, grp.confidence, right)


def test_dense_100_per_message_capture(tmp_path, capsys):
    # the 381 500-transfer capture's recipe (3815 messages of 100 transfers, cs_change 0.26 µs,
    # context switches 5.02 µs, 1 µs of idle before the first) at 40 messages: was 0.75 although
    # its own text rules the rival reading out
    from spigap.synth import Scenario, write

    rec = {"samplerate": "50MHz", "sclk": "3.125MHz", "words_per_transfer": 3, "transfers_per_message": 100,
           "mosi": [0x01, 0x80, 0], "miso": "random", "cs_setup": "1us", "cs_hold": "0.5us", "idle_clocks": 1,
           "cs_change": "0.26us", "context_switch": "5.02us", "lead": "1us", "tail": "1us", "seed": 7,
           "channels": {"clk": "CLK", "mosi": "MOSI", "miso": "MISO", "cs": "CS"}, "messages": 40}
    path = tmp_path / "dense.sr"
    write(Scenario.from_toml(None, rec), path)
    assert main(["analyze", str(path), "--format", "json"]) == 0
    g = json.loads(capsys.readouterr().out)["summary"]["grouping"]
    assert not g["ambiguous"] and g["confidence"] >= 0.8, g
    assert g["message_lengths"] == [100] and "ruled out" in g["note"]


# ------------------------------------------------------------- a rare kind told by its period
# Long messages behind a 10 µs busy-wait: the 1-in-N context switch is too rare to show in the
# histogram beside stalls; only its period tells it from them (docs/gaps.md, step 1).

def _busy_wait_long_messages(N: int, seed: int, *, n: int = 3000, stalls: float = 0.03):
    """spidev SPI_IOC_MESSAGE(N) at 50 MSa/s: cs_change the udelay(10) busy-wait between two
    0.4 µs GPIO writes, context switches 16-30 µs (lognormal), stalls of 20-500 µs on 3 % of
    the gaps, context switches included."""
    rng = np.random.default_rng(seed)
    b = np.zeros(n - 1, bool)
    b[N - 1::N] = True
    cs = 10.8 + np.abs(rng.normal(0, 0.12, n - 1)) + rng.normal(0, 0.04, n - 1)
    g = np.where(b, 22.0 * np.exp(rng.normal(0, 0.2, n - 1)), cs)
    g = g + (rng.random(n - 1) < stalls) * rng.uniform(20, 500, n - 1)
    return np.maximum(np.rint(g * 50), 1.0), b


@pytest.mark.parametrize("N", (24, 32, 64))
@pytest.mark.parametrize("seed", (1, 2, 3))
@pytest.mark.parametrize("start", ("idle", "mid"))
def test_busy_wait_long_messages_among_stalls_are_answered(N, seed, start):
    # the context switches recur every N-th gap, every time: stalls do not. Was "one population"
    # (0.05) for N = 64 with seeds 2 and 3: the few stalls that struck context switches widened
    # their spread past a population's, so the period was taken for a mix of stalls
    drop = 0 if start == "idle" else N // 2
    g, b = _busy_wait_long_messages(N, seed)
    grp = grouping.infer(g[drop:], lead=100_000.0 if start == "idle" else 20.0, tick_s=1 / 50e6)
    assert not grp.ambiguous and grp.transfers_per_message == N, grp.note
    assert float(np.mean((grp.kinds == grouping.CONTEXT_SWITCH) == b[drop:])) == 1.0
    assert grp.confidence >= 0.8 and "busy" in grp.basis, grp.basis


@pytest.mark.parametrize("seed", range(1, 6))
def test_random_stalls_are_no_period(seed):
    # a busy-wait and 5 % stalls, nothing periodic: one population, never a pattern of stalls
    g, _ = _busy_wait_long_messages(10**6, seed, n=1500, stalls=0.05)
    grp = grouping.infer(g, lead=100_000.0, tick_s=1 / 50e6)
    assert grp.structure == "one population", grp.note


@pytest.mark.parametrize("seed", range(1, 6))
def test_a_rare_kind_at_a_shorter_period_is_not_a_longer_pattern(seed):
    # a context switch every 12th gap, off the main population half the time (its spread
    # straddles it), that happened to be off every time at one phase of 36: the kind recurs every
    # 12 gaps, so "1 in 36" is chance, not the structure (was found as 36 for seeds 3-5)
    from spigap.core.grouping import pattern

    rng = np.random.default_rng(seed)
    lab = np.zeros(324, np.int8)
    ends = np.arange(11, 324, 12)
    lab[ends] = rng.random(len(ends)) < 0.5
    lab[ends[ends % 36 == 23]] = 1
    lab[rng.choice(np.flatnonzero(lab == 0), 3, replace=False)] = 1        # stalls
    found = pattern.pattern(lab, rare=True)
    assert found is None or found[0] == 12, found


@pytest.mark.parametrize("seed", (3778, 4782, 5418))
def test_development_cases_of_a_rare_kind(seed):
    # development cases (tests/driver_behaviour.py) each rule was written for, all "one
    # population" before: 3778 stalls on some of the context switches (a kernel loop of 42 behind
    # the default busy-wait), 4782 five messages in the capture, seen exactly five times (60 per
    # message, sleeping cs_change_delay), 5418 context switches on both sides of the busy-wait
    # (100 per message, 7-15 µs against 13 µs)
    case = db.draw(seed)
    grp = _infer(case)
    assert not grp.ambiguous and grp.transfers_per_message == gb.constant_n(case), grp.note
    assert _right(grp.kinds, case) >= 0.98


# ------------------------------------------------------------- lengths that overlap (issue 32)
# A kernel loop whose cs_change_delay is as long as the gap between its messages: one population,
# no length threshold separates the message ends (pattern.phase_test finds nothing), yet every
# N-th gap is shifted in distribution. pattern.shift_test finds it by a rank test over every
# period and phase, bounded for the number of tests; "one transfer per message" before.

def _overlapping_loop(N: int, seed: int, *, drop: int = 0, n: int = 1500):
    """A kernel worker's N-transfer messages at 50 MSa/s: cs_change 4 µs (GPIO writes and the
    controller, lognormal sigma 0.06), the next spi_sync 3.85 µs and tighter (sigma 0.02)."""
    return _constant_n(N, 4.0, 3.85, 0.06, 0.02, drop=drop, n=n, seed=seed)


@pytest.mark.parametrize("N", (8, 13))
@pytest.mark.parametrize("seed", (1, 2, 3))
@pytest.mark.parametrize("start", ("idle", "mid"))
def test_overlapping_kernel_loop_is_answered(N, seed, start):
    from spigap.core.grouping import pattern

    drop = 0 if start == "idle" else N // 2
    g, b = _overlapping_loop(N, seed, drop=drop)
    assert pattern.phase_test(g) is None            # no length threshold separates them
    grp = grouping.infer(g, lead=100_000.0 if start == "idle" else 20.0, tick_s=1 / 50e6)
    assert not grp.ambiguous and grp.transfers_per_message == N, grp.note
    assert float(np.mean((grp.kinds == grouping.CONTEXT_SWITCH) == b)) == 1.0
    assert grp.confidence >= 0.8 and "shift" in grp.basis, grp.basis


@pytest.mark.parametrize("N", (3, 5, 8, 13))
def test_shift_test_finds_the_period_not_a_multiple(N):
    from spigap.core.grouping import pattern

    for seed in (1, 2, 3):
        g, b = _overlapping_loop(N, seed)
        found = pattern.shift_test(g)
        assert found is not None and found[0] == N and found[1] == N - 1, (seed, found)


def test_shift_test_refuses_two_shifted_phases():
    # messages of 2, 2 and 4 transfers (ends at three phases of 8): no single phase differs
    from spigap.core.grouping import pattern

    rng = np.random.default_rng(5)
    n = 1600
    b = np.isin(np.arange(n) % 8, (1, 3, 7))
    g = np.rint(np.where(b, 3.85 * np.exp(rng.normal(0, 0.02, n)), 4.0 * np.exp(rng.normal(0, 0.06, n))) * 50)
    found = pattern.shift_test(g)
    assert found is None or found[0] not in (4, 8), found


def test_gaps_in_no_order_give_no_shift_pattern():
    # the multiple-testing bound: gaps with no structure (lognormal, integer ticks with ties,
    # exponential, a few stalls) give a false pattern about 1 time in 1000 at most (SHIFT_ALPHA)
    # over every period and phase tried: none in these 400 captures of 120-6000 gaps (2 in 4000
    # more, seeds 1000-4999)
    from spigap.core.grouping import pattern

    false = []
    for seed in range(400):
        rng = np.random.default_rng(seed)
        n = int(rng.integers(120, 6000))
        g = (rng.lognormal(np.log(500), 0.3, n), np.rint(rng.normal(250, 3, n)),
             np.rint(rng.exponential(100, n)) + 200,
             np.rint(rng.lognormal(np.log(300), 0.05, n) * (1 + 0.2 * (rng.random(n) < 0.03))))[seed % 4]
        if pattern.shift_test(g) is not None:
            false.append(seed)
    assert not false
    g = np.rint(4.0 * np.exp(np.random.default_rng(7).normal(0, 0.06, 1499)) * 50)
    grp = grouping.infer(g, lead=100_000.0, tick_s=1 / 50e6)
    assert grp.structure == "one population", grp.note


def test_shift_test_ranks_as_scipy_does():
    """pattern._ranks (written out: importing scipy.stats cost every grouping command about a
    second) gives scipy.stats.rankdata's average ranks, ties included; the bound's z is scipy's."""
    from statistics import NormalDist

    from scipy import stats

    from spigap.core.grouping import pattern
    rng = np.random.default_rng(11)
    for _ in range(50):
        w = rng.integers(0, int(rng.integers(2, 40)), int(rng.integers(1, 300))).astype(float)
        assert np.array_equal(pattern._ranks(w), stats.rankdata(w))
    for p in (1e-3, 1e-6, 6e-8, 1e-10):
        assert abs(-NormalDist().inv_cdf(p) - stats.norm.isf(p)) < 1e-9


# The rank test runs whenever the answer would be one population: also when the kinds step split
# the gaps into kinds that neither repeat nor each hold 15 % (it ran only when that step saw one
# population). Development cases, "one transfer per message" before (1-13 % of their gaps right).

@pytest.mark.parametrize("seed", (3973, 2894, 5094))
def test_shift_test_runs_when_the_kinds_give_no_structure(seed):
    from spigap.core.grouping import kinds, pattern

    case = db.draw(seed)
    kd, _ = kinds.find(np.asarray(case.gaps[:pattern.WINDOW], float), 1.0)
    assert kd.k >= 2                                 # the kinds step saw more than one population
    grp = grouping.infer(case.gaps, lead=case.lead, tick_s=1.0 / case.samplerate)
    assert "shift" in grp.basis and grp.transfers_per_message == gb.constant_n(case), grp.note
    assert _right(grp.kinds, case) >= gb.RIGHT


@pytest.mark.parametrize("seed", (1283, 3400, 2143, 5798, 1200))
def test_shift_test_refuses_a_batch_size_that_changes(seed):
    # spidev batches whose size changes mid-capture: the shifted phase of one batch size shows in
    # both halves of the window but not in every quarter (answered "N per message" from it, at 0.95
    # and 79-98 % right, once the test ran beside two kinds)
    from spigap.core.grouping import pattern

    case = db.draw(seed)
    assert case.family == "batch-change"
    assert pattern.shift_test(case.gaps) is None


@pytest.mark.parametrize("seed", (779, 783))
def test_shift_test_refuses_a_second_phase_below_the_search_bound(seed):
    # messages of 2 and 3 transfers (the grid's 11 µs context switch beside the 10 µs cs_change,
    # 15 % jitter): two phases of 5 are context switches, the second one's shift (z 4.2-4.5) under
    # the bound of the whole search (4.8) but over the refusal's own (3.7: 10⁻³ over the 4 other
    # phases, two sided)
    import grouping_grid as gg
    from spigap.core.grouping import pattern

    sc = next(s for s in gg.grid(full=True) if s.seed == seed)
    assert sc.pattern == "2,3"
    g, _, _ = gg.draw(sc)
    assert pattern.shift_test(g) is None
