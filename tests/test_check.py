"""`spigap check`: verdicts against profiles and device limits, the ±1-sample rule,
and the text / JSON / JUnit outputs.

Oracles: the ground truth of captures synthesized by spigap.synth (the bundled
captures/*.toml recipes, a profile checked with another one, or injected
CONVST/BUSY faults) and the figures of seeds 000, 001 and 003 as the seeds print them.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from spigap.api import analyze_device
from spigap.timing.check import FAIL, MARGINAL, PASS, SKIP, check_analysis, config_for_profile, judge
from spigap.timing.extra_channels import read_events
from spigap.timing.profiles import load_profile
from spigap.synth.from_profile import scenario_from_profile
from spigap.synth import scenario, write
from conftest import CAPTURES, spigap_main

NODELAY_B10 = CAPTURES / "mcp3008-rpi3-k4.4-nodelay-b10.sr"


def spigap(*args):
    return spigap_main(*args)


def check_file(path, profile, device=None, **kw):
    prof = load_profile(profile)
    a = analyze_device(path, config_for_profile(prof))
    return check_analysis(a, prof, device, **kw)


def by_id(res):
    return {it.id: it for it in res.items}


def synth_from_profile(tmp_path, profile, n, messages=60, seed=3, **kw):
    sc = scenario_from_profile(load_profile(profile), transfers_per_message=n, messages=messages,
                               seed=seed, **kw)
    path = tmp_path / f"{profile}-{n}-{seed}.sr"
    tl = write(sc, path).timeline
    return path, tl


# ------------------------------------------------------------------ the ±1-sample rule
def test_judge_applies_one_sample_either_way():
    r, lo = 20e-9, 270e-9
    assert judge(lo - 20e-9, lo, None, r, 0.0)[0] == FAIL        # a full sample below: certain
    assert judge(lo - 19e-9, lo, None, r, 0.0)[0] == MARGINAL    # could be inside
    assert judge(lo + 19e-9, lo, None, r, 0.0)[0] == MARGINAL    # could be outside
    assert judge(lo + 20e-9, lo, None, r, 0.0)[0] == PASS
    assert judge(lo + 20e-9, lo, None, r, 27e-9)[0] == MARGINAL  # inside, without headroom
    assert judge(lo + 47e-9, lo, None, r, 27e-9)[0] == PASS
    assert judge(1.0, 0.5, 1.5, 0.0, 0.05)[0] == PASS              # two-sided band
    assert judge(1.46, 0.5, 1.5, 0.0, 0.05)[0] == MARGINAL
    assert judge(1.6, 0.5, 1.5, 0.0, 0.05)[0] == FAIL


def _tcsh_capture(tmp_path, samplerate, cs_high):
    """MCP3008-like bus with a jitter-free CS-high time between batched reads."""
    sc = scenario.Scenario.from_toml(None, {
        "samplerate": samplerate, "sclk": "3.6MHz", "words_per_transfer": 3, "transfers_per_message": 10,
        "messages": 12, "cs_setup": "1.6us", "cs_hold": "0.4us", "idle_clocks": 1,
        "cs_change": cs_high, "context_switch": "5us", "seed": 9})
    path = tmp_path / f"tcsh-{samplerate}-{cs_high}.sr"
    write(sc, path)
    return path


def test_resolution_decides_between_marginal_and_fail(tmp_path):
    """A 262 ns CS-high time against tCSH >= 270 ns: at 50 MS/s (±20 ns) it cannot be
    told from 270 ns; at 200 MS/s (±5 ns) it is a certain violation."""
    coarse = check_file(_tcsh_capture(tmp_path, "50MHz", "262ns"), "rpi3-k4.4-nodelay", "mcp3008@5V")
    it = by_id(coarse)["device.tCSH"]
    assert it.verdict == MARGINAL and it.violations["count"] == 0
    assert it.violations["possible"] == 12 * 9                     # every cs_change gap
    assert it.resolution == pytest.approx(20e-9)
    fine = check_file(_tcsh_capture(tmp_path, "200MHz", "262ns"), "rpi3-k4.4-nodelay", "mcp3008@5V")
    it = by_id(fine)["device.tCSH"]
    assert it.verdict == FAIL and it.violations["count"] == 12 * 9
    assert fine.verdict == FAIL
    # 310 ns at 50 MS/s shows as 300 or 320 ns: inside by more than a sample, but
    # 300 − 20 < 270 + 10 % headroom; without headroom: PASS
    ok = _tcsh_capture(tmp_path, "50MHz", "310ns")
    assert by_id(check_file(ok, "rpi3-k4.4-nodelay", "mcp3008@5V"))["device.tCSH"].verdict == MARGINAL
    assert by_id(check_file(ok, "rpi3-k4.4-nodelay", "mcp3008@5V", headroom=0.0))["device.tCSH"].verdict == PASS


# ------------------------------------------------------------------ the seed 000 tCSH violation
def test_patched_kernel_violates_mcp3008_tcsh():
    res = check_file(NODELAY_B10, "rpi3-k4.4-nodelay", "mcp3008@5V")
    it = by_id(res)["device.tCSH"]
    assert res.verdict == FAIL and it.verdict == FAIL
    v = it.violations
    assert v["checked"] == 999 and len(v["first_s"]) == 5 and v["first_s"] == sorted(v["first_s"])
    # oracle: the recipe's ground truth. Every listed violation is a truly short gap,
    # every gap more than 2 samples short must be counted, none above the limit may be.
    sc = scenario.Scenario.from_toml(CAPTURES / "mcp3008-rpi3-k4.4-nodelay-b10.toml")
    tr = sc.timeline().truth()
    deassert, gaps = tr["cs_deassert"][:-1], tr["gap_before"][1:]
    r = 1 / sc.samplerate
    for t in v["first_s"]:
        i = int(np.argmin(np.abs(deassert - t)))
        assert abs(deassert[i] - t) <= r and gaps[i] < 270e-9
    assert np.count_nonzero(gaps < 270e-9 - 2 * r) <= v["count"] <= np.count_nonzero(gaps < 270e-9)
    assert v["count"] + v["possible"] <= np.count_nonzero(gaps < 270e-9 + r)
    # the stock kernel's 10 µs busy-wait is far above tCSH
    stock = check_file(CAPTURES / "mcp3008-rpi3-k4.4-b10.sr", "rpi3-k4.4-vanilla", "mcp3008@5V")
    assert by_id(stock)["device.tCSH"].verdict == PASS


def test_mcp3008_at_2v7_fails_the_clock():
    res = check_file(CAPTURES / "mcp3008-rpi3-k4.4-b10.sr", "rpi3-k4.4-vanilla", "mcp3008@2.7V")
    it = by_id(res)["device.fSCLK"]
    # 1.35 MHz = 18 clocks x 75 ksps, both read in DS21295D (p.1, p.2): no longer UNVERIFIED
    assert it.verdict == FAIL and it.high == pytest.approx(1.35e6) and not it.unverified
    assert "UNVERIFIED" not in it.reason
    # tCSH's row was not found in a readable copy: its verdicts still say so
    assert "limit UNVERIFIED" in by_id(res)["device.tCSH"].reason
    # tFRAME's 1.2 ms is DS21295D p.22; judging the whole CS-low window by it is our assumption
    frame = by_id(res)["device.tFRAME"]
    assert frame.verdict == PASS and frame.assumed and not frame.unverified
    # at 5 V the 3.6 MHz bus sits exactly on the limit: not decidable, never PASS
    it5 = by_id(check_file(CAPTURES / "mcp3008-rpi3-k4.4-b10.sr", "rpi3-k4.4-vanilla", "mcp3008@5V"))
    assert it5["device.fSCLK"].verdict == MARGINAL


# ------------------------------------------------------------------ measured vs the captures' truth
# The figures of the field reports the profiles cite (docs/linux-spi-timing.md §2.4), as the seeds
# print them: what a check must judge against.
SEED_FIGURES = {
    # seed 000: "I am measuring 1.6 us for the start and 0.4 us for the end", "Transaction
    # Delay is ~10 us", "the Context Switching Delay measured with a scope is around 5 us";
    # patched spi.c: "the cs line still toggles for about 0.25 us"
    "rpi3-k4.4-vanilla": {"cs_setup": 1.6e-6, "cs_hold": 0.4e-6, "cs_change": 10e-6, "context_switch": 5e-6},
    "rpi3-k4.4-nodelay": {"cs_setup": 1.6e-6, "cs_hold": 0.4e-6, "cs_change": 0.25e-6, "context_switch": 5e-6},
    # seed 001, kernels A / B / C: CS to first clock "ca. 10us" / "9.8us" / "2.6us",
    # CS high between accesses "ca 25us" / "ca 30us" / "5us"
    "imx8mp-k5.18-A-mcp2518fd": {"cs_setup": 10e-6, "context_switch": 25e-6},
    "imx8mp-k5.18-B-mcp2518fd": {"cs_setup": 9.8e-6, "context_switch": 30e-6},
    "imx8mp-k5.18-C-mcp2518fd": {"cs_setup": 2.6e-6, "context_switch": 5e-6},
    # seed 003: "that step [xfer2] increases from an average of 21.6 -> 24.3 uSec"
    "pi5-k6.6.31-ad7606": {"transfer_period": 21.6e-6},
    "pi5-k6.12.25-ad7606": {"transfer_period": 24.3e-6},
}


def true_values(truth: dict, metric: str, idle_gap: float | None) -> np.ndarray:
    """A metric's values as the synthesizer placed the edges (seconds), by docs/gaps.md
    and docs/timing-model.md: CS-high gaps above the profile's idle_gap left out."""
    gap, kind = truth["gap_before"], truth["kind"]
    idle = np.zeros(len(gap), bool)
    if idle_gap is not None:
        idle = np.isin(kind, ["cs_change", "context_switch"]) & (gap > idle_gap)
    if metric in ("cs_change", "context_switch"):
        return gap[(kind == metric) & ~idle]
    if metric == "transfer_period":
        return truth["period"][~idle[1:]]
    if metric == "transfer_duration":
        return truth["duration"]
    return truth[metric]          # cs_setup, cs_hold, inter_byte, inter_transfer


def documented_bounds(prof, metric: str, statistic: str, sc) -> tuple:
    """(expected, low, high) of one figure, from the profile's numbers and the rules of
    docs/timing-model.md ("Profile files"): p50 ± tolerance (or ± a fraction of it),
    the p99 bounds, inter_byte derived from [bus] when the profile has no table for
    it, and ``model = true`` predicted for the recipe's own transfer size and
    transfers per message."""
    T = 1 / prof.sclk_hz
    if metric == "inter_byte" and metric not in prof.expect:
        p50, tol, rel, p99 = (0.5 + prof.idle_clocks) * T, T / 4, None, (None, (1.5 + prof.idle_clocks) * T)
    else:
        ex = prof.expect[metric]
        p50, tol, rel, p99 = ex.p50, ex.tolerance, ex.rel_tolerance, (ex.p99_min, ex.p99_max)
        if ex.model and metric == "transfer_duration":
            p50 = prof.model().capture_transfer_time(sc.words_per_transfer)
        elif ex.model:
            p50 = prof.model().rate(sc.words_per_transfer, sc.transfers_per_message, edges=True)
    if statistic == "p99":
        return (None, *p99)
    half = tol if tol is not None else rel * abs(p50)
    return p50, p50 - half, p50 + half


def verdict_from_truth(true_figure: float, low, high, resolution: float, headroom: float) -> str | None:
    """The verdict the ±1-sample rule must give, worked out from the true figure: the
    measured one is within ±resolution of it, so a true margin of at least 2 resolutions
    plus the headroom is a PASS whatever the sampling, one of −2 resolutions or less a
    FAIL; None in between (the sampling decides)."""
    margins = []
    if low is not None:
        margins.append(true_figure - low)
    if high is not None:
        margins.append(high - true_figure)
    m = min(margins)
    if m >= 2 * resolution + headroom:
        return PASS
    if m <= -2 * resolution:
        return FAIL
    return None


@pytest.mark.parametrize("capture,profile", [
    ("mcp3008-rpi3-k4.4-b1", "rpi3-k4.4-vanilla"), ("mcp3008-rpi3-k4.4-b10", "rpi3-k4.4-vanilla"),
    ("mcp3008-rpi3-k4.4-b100", "rpi3-k4.4-vanilla"), ("mcp3008-rpi3-k4.4-nodelay-b10", "rpi3-k4.4-nodelay"),
    ("mcp3008-rpi3-k4.4-nodelay-b100", "rpi3-k4.4-nodelay"), ("mcp3008-rpi3-k4.4-b10", "rpi3-k4.4-nodelay"),
    ("ad7606-pi5-k6.6.31", "pi5-k6.6.31-ad7606"), ("ad7606-pi5-k6.12.25", "pi5-k6.12.25-ad7606"),
    ("ad7606-pi5-k6.12.25", "pi5-k6.6.31-ad7606"),
    ("mcp2518fd-imx8mp-k5.18-A-rx", "imx8mp-k5.18-A-mcp2518fd"),
    ("mcp2518fd-imx8mp-k5.18-B-rx", "imx8mp-k5.18-B-mcp2518fd"),
    ("mcp2518fd-imx8mp-k5.18-C-rx", "imx8mp-k5.18-C-mcp2518fd"),
    ("mcp2518fd-imx8mp-k5.18-A-rx", "imx8mp-k5.18-B-mcp2518fd"),
])
def test_check_measures_the_captures_truth_and_judges_it_by_the_rule(capture, profile):
    """Oracles: the ground truth of the bundled seed captures (the edge times the
    synthesizer placed from captures/*.toml, not measured by spigap), the seeds' own
    figures and the documented rules. Every figure check reports must be the
    capture's true figure within its ±resolution, counted over the same events; it
    must be judged against the seed's number within the documented bounds; and
    wherever the truth decides the verdict, check's verdict must be that one."""
    prof = load_profile(profile)
    res = check_file(CAPTURES / f"{capture}.sr", prof)         # the profile alone: no device limits
    sc = scenario.Scenario.from_toml(CAPTURES / f"{capture}.toml")
    truth = sc.timeline().truth()
    items = by_id(res)
    # 1. the numbers it judges against are the seed's
    judged = [m for m in SEED_FIGURES[profile] if items[f"{m}.p50"].verdict != SKIP]
    assert judged
    for metric in judged:
        assert items[f"{metric}.p50"].expected == pytest.approx(SEED_FIGURES[profile][metric]), metric
    decided = n_judged = 0
    for it in res.items:
        # 2. what it measured is in the capture ...
        if it.metric == "sclk":
            want, n = sc.sclk, None
        elif it.metric == "transfer_rate":
            s = truth["cs_assert"]
            want, n = (len(s) - 1) / (s[-1] - s[0]), len(s)
        else:
            v = true_values(truth, it.metric, prof.idle_gap)
            v = v[~np.isnan(v)]
            if len(v) == 0:            # nothing of the kind in the capture: skipped, never judged
                assert it.verdict == SKIP, (it.id, it.verdict)
                continue
            want, n = float(np.percentile(v, 99 if it.statistic == "p99" else 50)), len(v)
            assert it.resolution == pytest.approx(1 / sc.samplerate), it.id   # edge to edge: one sample
        assert it.verdict != SKIP, (it.id, it.reason)
        n_judged += 1
        assert abs(it.measured - want) <= it.resolution * 1.001, (it.id, it.measured, want, it.resolution)
        if n is not None:
            assert it.n == n, (it.id, it.n, n)
        # ... judged within the documented bounds and headroom ...
        expected, lo, hi = documented_bounds(prof, it.metric, it.statistic, sc)
        assert (it.expected, it.low, it.high) == pytest.approx((expected, lo, hi)), it.id
        half = (hi - lo) / 2 if lo is not None and hi is not None else abs(lo if lo is not None else hi)
        assert it.headroom == pytest.approx(res.headroom * half), it.id
        # 3. ... by the ±1-sample rule, wherever the truth decides
        want_verdict = verdict_from_truth(want, lo, hi, it.resolution, it.headroom)
        if want_verdict is not None:
            decided += 1
            assert it.verdict == want_verdict, (it.id, it.verdict, want_verdict, want, lo, hi)
    # undecided here: SCLK (±37 kHz at 50 MS/s against a ±72 kHz band) and the 62.5 ns
    # inter-byte gap at 8 MHz (±20 ns against ±31 ns)
    assert decided >= n_judged - 2, "the truth decides nearly every figure of these captures"


@pytest.mark.parametrize("made_from,checked_with,failing", [
    ("rpi3-k4.4-vanilla", "rpi3-k4.4-nodelay", {"cs_change.p50", "model.transfer_rate"}),
    ("rpi3-k4.4-nodelay", "rpi3-k4.4-vanilla", {"cs_change.p50", "model.transfer_rate"}),
    ("pi5-k6.6.31-ad7606", "pi5-k6.12.25-ad7606", {"transfer_period.p50", "cs_setup.p50"}),
    ("imx8mp-k5.18-C-mcp2518fd", "imx8mp-k5.18-A-mcp2518fd", {"cs_setup.p50", "context_switch.p50"}),
])
def test_capture_synthesized_from_another_profile_fails(tmp_path, made_from, checked_with, failing):
    path, _ = synth_from_profile(tmp_path, made_from, 10 if made_from.startswith("rpi3") else 1,
                                 messages=40 if made_from.startswith("rpi3") else 300)
    res = check_file(path, checked_with)
    failed = {it.id for it in res.items if it.verdict == FAIL}
    assert res.verdict == FAIL and failing <= failed, failed


def test_seed_captures_pass_their_profiles_and_fail_the_others():
    pairs = {"ad7606-pi5-k6.6.31": "pi5-k6.6.31-ad7606", "ad7606-pi5-k6.12.25": "pi5-k6.12.25-ad7606",
             "mcp2518fd-imx8mp-k5.18-A-rx": "imx8mp-k5.18-A-mcp2518fd",
             "mcp2518fd-imx8mp-k5.18-B-rx": "imx8mp-k5.18-B-mcp2518fd",
             "mcp2518fd-imx8mp-k5.18-C-rx": "imx8mp-k5.18-C-mcp2518fd",
             "mcp3008-rpi3-k4.4-b1": "rpi3-k4.4-vanilla", "mcp3008-rpi3-k4.4-b100": "rpi3-k4.4-vanilla"}
    for cap, prof in pairs.items():
        res = check_file(CAPTURES / f"{cap}.sr", prof)
        assert res.verdict == PASS, (cap, [(i.id, i.verdict) for i in res.items if i.verdict != PASS])
    # seed 003: the 6.12.25 bus against the 6.6.31 profile, +2.7 µs per read
    res = check_file(CAPTURES / "ad7606-pi5-k6.12.25.sr", "pi5-k6.6.31-ad7606")
    it = by_id(res)["transfer_period.p50"]
    assert it.verdict == FAIL and it.delta == pytest.approx(2.7e-6, abs=0.1e-6)
    # seed 001: kernel A's 25 µs CS-high gap is not kernel B's 30 µs
    res = check_file(CAPTURES / "mcp2518fd-imx8mp-k5.18-A-rx.sr", "imx8mp-k5.18-B-mcp2518fd")
    assert by_id(res)["context_switch.p50"].verdict == FAIL
    assert res.summary["idle_gaps_excluded"] > 0          # the 1 ms gaps between CAN frames


def test_b1_capture_skips_cs_change_and_models_one_transfer_per_ioctl():
    res = check_file(CAPTURES / "mcp3008-rpi3-k4.4-b1.sr", "rpi3-k4.4-vanilla")
    items = by_id(res)
    assert items["cs_change.p50"].verdict == SKIP and "no cs_change" in items["cs_change.p50"].reason
    rate = items["model.transfer_rate"]
    m = load_profile("rpi3-k4.4-vanilla").model()
    assert rate.verdict == PASS and rate.expected == pytest.approx(m.rate(3, 1, edges=True))


# ------------------------------------------------------------------ BUSY / CONVST
def _ad7606_with_events(tmp_path, *, busy_in_window=None, extra_convst=None):
    prof = load_profile("pi5-k6.6.31-ad7606")
    sc = scenario_from_profile(prof, messages=60, seed=5)
    tl = sc.timeline()
    conv = tl.cs_assert - 5e-6                       # CONVST rises 5 µs before each read
    busy_rise, busy_fall = conv + 40e-9, conv + 4e-6  # BUSY falls 1 µs before CS
    if busy_in_window is not None:                   # this read's conversion ends mid-read
        k = busy_in_window
        busy_fall[k] = tl.cs_assert[k] + prof.timing["cs_setup"] + 1e-6
    convs = list(conv)
    if extra_convst is not None:
        convs.append(conv[extra_convst] + 3e-6)      # a second conversion 3 µs later
    convs = np.sort(np.array(convs))

    def pulses(rise, fall):
        t = np.empty(2 * len(rise))
        t[0::2], t[1::2] = rise, fall
        return t, np.tile(np.array([1, 0], np.uint8), len(rise)), 0

    tl.extra["CONVST"] = pulses(convs, convs + 500e-9)
    tl.extra["BUSY"] = pulses(busy_rise, busy_fall)
    path = tmp_path / f"ad7606-{busy_in_window}-{extra_convst}.sr"
    write(sc, path, tl=tl)
    return path, tl


def test_ad7606_busy_and_convst_checks(tmp_path):
    clean, _ = _ad7606_with_events(tmp_path)
    out = spigap("check", clean, "--profile", "pi5-k6.6.31-ad7606", "--event", "CONVST:rise", "--event", "BUSY:fall",
                 "--format", "json")
    items = {c["id"]: c for c in json.loads(out.stdout)["results"][0]["checks"]}
    # nothing fails, at the pins neither: the synthesizer drives the MSB 10 ns after CS, every
    # next bit 10 ns after its SCLK edge (synth/timeline.py), inside t18 <= 15 ns and t19 <= 17 ns
    failed = {k for k, c in items.items() if c["verdict"] == "FAIL"}
    assert not failed, out.stdout + out.stderr
    assert items["device.tCYCLE"]["verdict"] == PASS and items["device.tCYCLE"]["n"] == 59
    assert items["device.BUSY-read"]["verdict"] == PASS and items["device.BUSY-read"]["n"] == 60
    # without the channels both are skipped, and say which channel they need
    res = check_file(clean, "pi5-k6.6.31-ad7606", "ad7606")
    assert by_id(res)["device.tCYCLE"].verdict == SKIP and "CONVST" in by_id(res)["device.tCYCLE"].reason
    assert by_id(res)["device.tCYCLE(reads)"].verdict == PASS

    bad, tl = _ad7606_with_events(tmp_path, busy_in_window=17, extra_convst=30)
    prof = load_profile("pi5-k6.6.31-ad7606")
    a = analyze_device(bad, config_for_profile(prof))
    ev = read_events(bad, {"convst": "CONVST", "busy": "BUSY"})
    res = check_analysis(a, prof, "ad7606", events=ev)
    busy, cyc = by_id(res)["device.BUSY-read"], by_id(res)["device.tCYCLE"]
    assert busy.verdict == FAIL and busy.violations["count"] == 1
    want = tl.cs_assert[17] + prof.timing["cs_setup"] + 1e-6
    assert abs(busy.violations["first_s"][0] - want) <= 2 * a.tick_s
    assert cyc.verdict == FAIL and cyc.violations["count"] == 1
    assert abs(cyc.violations["first_s"][0] - (tl.cs_assert[30] - 5e-6)) <= 2 * a.tick_s
    assert cyc.measured == pytest.approx(3e-6, abs=2 * a.tick_s)
    assert spigap("check", bad, "--profile", "pi5-k6.6.31-ad7606", "--event", "CONVST:rise",
                  "--event", "BUSY:fall").returncode == 1
    # a channel that is not there is a one-line error
    proc = spigap("check", bad, "--profile", "pi5-k6.6.31-ad7606", "--event", "NOPE:fall")
    assert proc.returncode == 2 and "NOPE" in proc.stderr and "Traceback" not in proc.stderr


# ------------------------------------------------------------------ CLI: outputs and exit codes
def test_cli_junit_parses_and_reports_the_violation():
    proc = spigap("check", NODELAY_B10, CAPTURES / "mcp3008-rpi3-k4.4-b10.sr", "--profile",
                  "rpi3-k4.4-nodelay", "--device", "mcp3008@5V", "--format", "junit")
    assert proc.returncode == 1, proc.stderr
    root = ET.fromstring(proc.stdout)
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert len(suites) == 2
    cases = root.findall(".//testcase")
    assert int(root.get("tests")) == len(cases)
    assert int(root.get("failures")) == len(root.findall(".//failure"))
    first = {c.get("name"): c for c in suites[0].findall("testcase")}
    assert first["device.tCSH"].find("failure") is not None
    assert first["cs_change.p50"].find("failure") is None           # 0.25 µs is what this profile expects
    second = {c.get("name"): c for c in suites[1].findall("testcase")}
    assert second["cs_change.p50"].find("failure") is not None      # the stock kernel's 10 µs is not
    props = {p.get("name"): p.get("value") for p in suites[0].iter("property")}
    assert float(props["resolution_s"]) == pytest.approx(20e-9)
    # --strict turns MARGINAL (tHI/tLO at 50 MS/s) into failures
    strict = ET.fromstring(spigap("check", CAPTURES / "mcp3008-rpi3-k4.4-b10.sr", "--profile",
                                  "rpi3-k4.4-vanilla", "--format", "junit", "--strict").stdout)
    assert any(f.get("type") == MARGINAL for f in strict.iter("failure"))


def test_cli_text_json_and_exit_codes(tmp_path):
    proc = spigap("check", NODELAY_B10, "--profile", "rpi3-k4.4-nodelay", "--device", "mcp3008@5V")
    assert proc.returncode == 1
    assert "tCSH" in proc.stdout and "FAIL" in proc.stdout and "±1 sample" in proc.stdout
    proc = spigap("check", NODELAY_B10, "--profile", "rpi3-k4.4-nodelay", "--device", "none")
    assert proc.returncode == 0 and "device" not in proc.stdout.splitlines()[2]
    out = tmp_path / "r.json"
    proc = spigap("check", NODELAY_B10, "--profile", "rpi3-k4.4-nodelay", "--format", "json", "-o", out)
    assert proc.returncode == 1 and proc.stdout == ""
    d = json.loads(out.read_text())
    assert d["check_schema"] == 1 and d["verdict"] == FAIL
    r0 = d["results"][0]
    assert r0["device"]["spec"] == "mcp3008@5V"                     # the profile's default device
    assert r0["resolution_s"] == pytest.approx(20e-9)
    t = {c["id"]: c for c in r0["checks"]}["device.tCSH"]
    assert t["violations"]["count"] > 0 and t["unverified"] is True and t["low"] == pytest.approx(270e-9)
    # errors: one line, exit 2
    bad = tmp_path / "bad.toml"
    bad.write_text("[profile]\nname = 'x'\n")
    for args, what in ((["--profile", bad], "profile.title"), (["--profile", "nope"], "unknown profile"),
                       (["--profile", "rpi3-k4.4-vanilla", "--device", "mcp3008@9V"], "no variant")):
        proc = spigap("check", NODELAY_B10, *args)
        assert proc.returncode == 2, args
        lines = proc.stderr.strip().splitlines()
        assert what in proc.stderr and "Traceback" not in proc.stderr and len(lines) == 1, proc.stderr
    proc = spigap("check", NODELAY_B10, "--profile", "rpi3-k4.4-vanilla", "--headroom", "2")
    assert proc.returncode == 2 and "--headroom: must be in [0, 1)" in proc.stderr   # argparse
    proc = spigap("check", tmp_path / "missing.sr", "--profile", "rpi3-k4.4-vanilla")
    assert proc.returncode == 2 and "no such file" in proc.stderr
    assert "mcp3008@2.7V" in spigap("check", "--list").stdout


# ------------------------------------------------------------------ NO DATA: never a pass on a dead bus
def _idle_capture(tmp_path):
    """A capture whose lines never move: the synthesized lead, cropped before the first CS."""
    out = tmp_path / "idle.sr"
    proc = spigap("synth", "-o", out, "--set", "lead=1ms", "--set", "crop_end=10us")
    assert proc.returncode == 0, proc.stderr
    return out


def test_idle_capture_is_no_data_not_pass(tmp_path):
    idle = _idle_capture(tmp_path)
    for extra in ([], ["--strict"]):
        proc = spigap("check", idle, "--profile", "rpi3-k4.4-vanilla", *extra)
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert proc.stdout.startswith(f"check       {idle}: NO DATA")
        assert "PASS" not in proc.stdout.splitlines()[0]
        assert proc.stderr.strip().splitlines() == [
            (f"spigap: error: {idle}: NO DATA: 0 transfer(s) in the capture, fewer than the 8 a check "
             "needs: is the bus idle, or the channel map wrong?")]
    d = json.loads(spigap("check", idle, "--profile", "rpi3-k4.4-vanilla", "--format", "json").stdout)
    assert d["verdict"] == "NO DATA" and d["results"][0]["verdict"] == "NO DATA"
    assert "0 transfer(s)" in d["results"][0]["no_data"]
    # JUnit: a failure with the reason, not a green suite of skips
    proc = spigap("check", idle, "--profile", "rpi3-k4.4-vanilla", "--format", "junit")
    root = ET.fromstring(proc.stdout)
    assert proc.returncode == 1 and int(root.get("failures")) == 1
    fail = root.find(".//testcase[@name='data']/failure")
    assert fail.get("type") == "NO DATA" and "0 transfer(s)" in fail.get("message")
    # --allow-empty: exit 0, JUnit skipped, the verdict still says NO DATA
    proc = spigap("check", idle, "--profile", "rpi3-k4.4-vanilla", "--allow-empty", "--format", "junit")
    root = ET.fromstring(proc.stdout)
    assert proc.returncode == 0 and root.get("failures") == "0"
    assert root.find(".//testcase[@name='data']/skipped") is not None
    # with a real capture next to it, the run still fails, and the text says why
    proc = spigap("check", NODELAY_B10, idle, "--profile", "rpi3-k4.4-nodelay", "--device", "none")
    assert proc.returncode == 1 and "overall: NO DATA (2 captures, 0 failing, 1 with no data)" in proc.stdout


def test_every_check_skipped_is_no_data():
    res = check_file(CAPTURES / "mcp3008-rpi3-k4.4-b1.sr", "rpi3-k4.4-vanilla", "mcp3008@5V")
    assert res.verdict == MARGINAL and res.no_data is None
    res.items = [i for i in res.items if i.verdict == SKIP]      # what is left when nothing applies
    assert res.items and res.verdict == "NO DATA" and "every check was skipped" in res.no_data
    assert res.failed() and not res.failed(allow_empty=True)


def test_device_alone_is_a_check():
    proc = spigap("check", NODELAY_B10, "--device", "mcp3008@5V", "--format", "json")
    d = json.loads(proc.stdout)
    r0 = d["results"][0]
    assert r0["profile"] is None and r0["device"]["spec"] == "mcp3008@5V"
    # the device's limits, and (its file has input levels: measured at the pins) the controller's MISO window
    assert {c["group"] for c in r0["checks"]} == {"device", "pins"}
    assert proc.returncode == 1 and d["verdict"] == FAIL         # tCSH, as with the profile
    proc = spigap("check", NODELAY_B10)
    assert proc.returncode == 2 and "--profile" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_check_reports_stalls_with_the_stall_options():
    d = json.loads(spigap("check", CAPTURES / "mcp3008-rpi3-k4.4-b10.sr", "--profile", "rpi3-k4.4-vanilla",
                          "--format", "json").stdout)
    st = d["results"][0]["summary"]["stalls"]
    assert st["count"] == 1 and st["excess_s"] == pytest.approx(59.24e-6, abs=0.02e-6)   # as analyze
    d = json.loads(spigap("check", CAPTURES / "mcp3008-rpi3-k4.4-b10.sr", "--profile", "rpi3-k4.4-vanilla",
                          "--stall-sigmas", "3", "--stall-fraction", "1", "--format", "json").stdout)
    assert d["results"][0]["summary"]["stalls"]["count"] > 1 and "3 × robust σ" in \
        d["results"][0]["summary"]["stalls"]["rule"]


def test_idle_gaps_the_profile_leaves_out_are_no_stalls():
    """The i.MX8MP profiles leave CS-high gaps above 200 µs out of every figure (the bus idling
    between CAN frames, its idle_gap); check's stall count beside them counted the same 49 gaps as
    stalls: "49 idle gaps > 200 µs left out; 49 stall(s), 47.76 ms lost" on a capture that is fine.
    The stalls are analyze's (same options) less those gaps."""
    cap = CAPTURES / "mcp2518fd-imx8mp-k5.18-A-rx.sr"
    d = json.loads(spigap("check", cap, "--profile", "imx8mp-k5.18-A-mcp2518fd", "--format", "json").stdout)
    s = d["results"][0]["summary"]
    assert s["idle_gaps_excluded"] == 49 and s["idle_gap_s"] == pytest.approx(200e-6)
    a = json.loads(spigap("analyze", cap, "--transfers-per-message", "1", "--format", "json").stdout)
    stalls = a["stalls"]["stalls"]
    busy = [x for x in stalls if not (x["kind"] == "context_switch" and x["duration_s"] > 200e-6)]
    assert len(stalls) - len(busy) == s["stalls"]["idle_gaps_left_out"] == 49
    assert s["stalls"]["count"] == len(busy)
    assert s["stalls"]["excess_s"] == pytest.approx(sum(x["excess_s"] for x in busy), abs=1e-12)
    text = spigap("check", cap, "--profile", "imx8mp-k5.18-A-mcp2518fd").stdout
    line = next(x for x in text.splitlines() if x.startswith("capture "))
    assert "49 idle gaps > 200 µs left out" in line and "ms lost" not in line, line
