"""Cross-channel events (analyzer/spigap/core/events.py) on synthesized captures with extra channels.

Oracles: (1) tracks we add to a synthesized timeline at known times
(Timeline.extra); the analyzer reads them back from the .sr file, and every
latency must equal the difference of the quantized truth times exactly;
(2) the AD7606 device generator's own truth (analyzer/spigap/synth/traffic/ad7606.py).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from spigap.api import analyze_device
from spigap.cli import main
from spigap.core import events
from spigap.errors import UsageError
from spigap.io import open_capture
from spigap.synth import scenario, write
from conftest import CAPTURES

SR = 50e6


def _q(t):
    return np.rint(np.asarray(t) * SR).astype(np.int64)


def _track(rise, fall):
    t = np.concatenate([rise, fall])
    lv = np.concatenate([np.ones(len(rise), np.uint8), np.zeros(len(fall), np.uint8)])
    o = np.argsort(t, kind="stable")
    return t[o], lv[o], 0


def make_capture(path, seed=3, messages=300, drop_busy=(), tconv=4e-6, sigma_tconv=50e-9, extra_busy=()):
    """AD7606-like xfer2 loop with CONVST/BUSY before every read and a toggle pin (one toggle per
    transfer, shortly after CS deassert, as the seed 004 slave did)."""
    sc = scenario.Scenario.from_toml(CAPTURES / "ad7606-pi5-k6.6.31.toml",
                                     {"seed": seed, "messages": messages, "lead": "20us"})
    tl = sc.timeline()
    rng = np.random.default_rng(seed + 100)
    n = len(tl.cs_assert)
    busy_to_cs = rng.uniform(0.3e-6, 1.5e-6, n)
    busy_fall = tl.cs_assert - busy_to_cs
    busy_rise = busy_fall - rng.normal(tconv, sigma_tconv, n)
    convst_rise = busy_rise - 40e-9
    convst_fall = convst_rise + 1e-6
    keep = np.ones(n, bool)
    keep[list(drop_busy)] = False
    br, bf = busy_rise[keep], busy_fall[keep]
    if extra_busy:       # a second, spurious BUSY pulse shortly after the first in some cycles
        k = np.array(extra_busy)
        br = np.concatenate([br, busy_fall[k] + 100e-9])
        bf = np.concatenate([bf, busy_fall[k] + 200e-9])
    tl.extra["CONVST"] = _track(convst_rise, convst_fall)
    tl.extra["BUSY"] = _track(np.sort(br), np.sort(bf))
    toggle = tl.cs_deassert + 0.2e-6
    lv = (np.arange(n) % 2 == 0).astype(np.uint8)          # first toggle goes high
    tl.extra["TOGGLE"] = (toggle, lv, 0)
    write(sc, path, tl=tl)
    return tl, {"convst_rise": convst_rise, "convst_fall": convst_fall, "busy_rise": busy_rise,
                "busy_fall": busy_fall, "toggle": toggle, "keep": keep}


def _measure(path, specs):
    a = analyze_device(path)
    with open_capture(path) as r:
        return a, events.measure(r, a, [events.parse_event(s) for s in specs])


def test_latencies_equal_quantized_truth(tmp_path):
    p = tmp_path / "ev.sr"
    tl, tr = make_capture(p)
    a, rep = _measure(p, ["CONVST:rise", "BUSY:fall"])
    assert [s.label for s in rep.chain] == ["CONVST:rise", "BUSY:fall", "CS:assert"]
    conv, busy = rep.stages
    n = len(tl.cs_assert)
    assert conv.n_src == n and conv.n_missing == 0 and conv.n_extra == 0
    assert np.array_equal(conv.at, _q(tr["convst_rise"]))
    assert np.array_equal(conv.latency, _q(tr["busy_fall"]) - _q(tr["convst_rise"]))
    assert np.array_equal(busy.latency, _q(tl.cs_assert) - _q(tr["busy_fall"]))
    assert np.array_equal(rep.total.latency, _q(tl.cs_assert) - _q(tr["convst_rise"]))
    d = rep.to_dict()
    assert d["latency"][0]["p50_s"] == pytest.approx(np.median(tr["busy_fall"] - tr["convst_rise"]), abs=2 / SR)
    assert d["latency"][1]["resolution_s"] == pytest.approx(1 / SR)
    json.dumps(d)


def test_toggle_pin_cycle(tmp_path):
    p = tmp_path / "tog.sr"
    tl, tr = make_capture(p, messages=200)
    a, rep = _measure(p, ["TOGGLE:both"])
    (ch,) = rep.channels
    q = _q(tr["toggle"])
    assert np.array_equal(ch.events, q)
    assert np.array_equal(ch.interval, np.diff(q))          # one toggle per cycle: interval = cycle time
    assert np.array_equal(ch.period, np.diff(q[0::2]))      # rise to rise = two cycles
    assert np.array_equal(ch.high, q[1::2] - q[0::2][: len(q[1::2])])
    assert np.array_equal(ch.low, q[2::2] - q[1::2][: len(q[2::2])])
    # the cycle is the transfer period (the toggle follows every CS deassert)
    per = a.period() * a.tick_s
    assert np.median(ch.interval) / SR == pytest.approx(np.nanmedian(per), abs=2 / SR)
    d = rep.to_dict()["channels"][0]
    assert d["events"] == len(q)
    assert d["frequency_hz"] == pytest.approx(1 / (np.mean(np.diff(q[0::2])) / SR))
    # events per second as transfers per second (analysis.start_rate_hz): one toggle per
    # transfer, so the transfer rate; not the events over the capture's length (its lead-in)
    assert d["events_per_s"] == pytest.approx((len(q) - 1) / ((q[-1] - q[0]) / SR), rel=1e-12)
    assert d["events_per_s"] == pytest.approx(a.transfer_rate_hz(), rel=2e-3)
    # chain: toggle -> next transfer start
    (stage,) = rep.stages
    assert stage.dst == "CS:assert"
    assert np.array_equal(stage.latency, (_q(tl.cs_assert[1:]) - q[:-1]))


def test_missing_and_extra_responses(tmp_path):
    p = tmp_path / "miss.sr"
    drop = (10, 11, 57)
    tl, tr = make_capture(p, messages=120, drop_busy=drop, extra_busy=(30, 31, 90))
    a, rep = _measure(p, ["CONVST:rise", "BUSY:fall"])
    conv = rep.stages[0]
    assert conv.n_missing == len(drop)
    assert conv.n_extra == 3
    assert len(conv.latency) == len(tl.cs_assert) - len(drop)
    # the first BUSY fall is the one matched
    k = np.setdiff1d(np.arange(len(tl.cs_assert)), drop)
    assert np.array_equal(conv.latency, _q(tr["busy_fall"][k]) - _q(tr["convst_rise"][k]))
    assert rep.total.n_missing == len(drop)


def test_ad7606_generator_truth(tmp_path):
    """Another oracle: the AD7606 device generator's CONVST/BUSY/CS truth (read after conversion)."""
    import tomllib

    dev = tomllib.loads((CAPTURES / "ad7606-douta-after.toml").read_text())["device"]
    sc = scenario.Scenario.from_toml(CAPTURES / "ad7606-douta-after.toml",
                                     {"device": {**dev, "conversions": 12}})
    p = tmp_path / "ad.sr"
    tl = sc.timeline()
    write(sc, p, tl=tl)
    a = analyze_device(p, _mode2())
    with open_capture(p) as r:
        rep = events.measure(r, a, [events.parse_event("CONVST:rise"), events.parse_event("BUSY:fall")])
    truth = tl.device_truth
    conv, busy = rep.stages
    assert conv.n_src == len(truth) == 12
    for k, t in enumerate(truth):
        assert conv.latency[k] == _q(t["busy_fall_s"]) - _q(t["convst_rise_s"])
        assert busy.latency[k] == _q(t["cs_assert_s"]) - _q(t["busy_fall_s"])
    # the documented defaults of the generator: tCONV 4 µs + t1 40 ns, BUSY→CS 500 ns
    assert np.all(np.abs(conv.latency / SR - 4.04e-6) <= 1.01 / SR)
    assert np.all(np.abs(busy.latency / SR - 500e-9) <= 1.01 / SR)
    (convst,) = [c for c in rep.channels if c.name == "CONVST"]
    assert np.all(np.abs(convst.interval / SR - 40e-6) <= 1.01 / SR)


def _mode2():
    from spigap.core.config import SpiConfig

    return SpiConfig(cpol=1, cpha=0)


def test_pair_by_hand():
    p = events.pair(np.array([10, 20, 30, 40]), np.array([12, 13, 35, 41, 50]), end_tick=100)
    assert p.latency.tolist() == [2, 5, 1]
    assert p.index.tolist() == [0, -1, 2, 3]
    assert (p.n_missing, p.n_extra) == (1, 2)       # 13 and 50 are extra in their cycles
    p = events.pair(np.array([5]), np.array([5]))
    assert p.latency.tolist() == [0]                # same sample counts (latency 0)
    p = events.pair(np.empty(0, np.int64), np.array([1, 2]))
    assert len(p.latency) == 0 and p.n_src == 0


@pytest.mark.parametrize("text,label", [("CONVST:rise", "CONVST:rise"), ("busy : Falling", "busy:fall"),
                                        ("T:toggle", "T:both"), ("cs:assert", "CS:assert"),
                                        ("SPI:end", "SPI:end")])
def test_parse_event(text, label):
    assert events.parse_event(text).label == label


@pytest.mark.parametrize("text", ["CONVST", "CONVST:up:down", "X:sideways", ":rise", ""])
def test_parse_event_errors(text):
    with pytest.raises(UsageError):
        events.parse_event(text)


def test_unknown_channel_is_a_usage_error(tmp_path, capsys):
    p = tmp_path / "ev.sr"
    make_capture(p, messages=20)
    rc = main(["compare", "--before", str(p), "--after", str(p), "--event", "NOPE:rise"])
    err = capsys.readouterr().err
    assert rc == 2
    assert "NOPE" in err and len(err.strip().splitlines()) == 1


def test_compare_reports_event_shift(tmp_path, capsys):
    """A slower conversion (tCONV 4 → 4.5 µs) must show up as a CONVST→BUSY regression, while
    BUSY→CS (same distribution) stays unchanged."""
    b, a = tmp_path / "b.sr", tmp_path / "a.sr"
    make_capture(b, seed=21, messages=600)
    make_capture(a, seed=22, messages=600, tconv=4.5e-6)
    rc = main(["compare", "--before", str(b), "--after", str(a), "--event", "CONVST:rise",
               "--event", "BUSY:fall", "--format", "json", "--bootstrap", "300", "--fail-on", "regression"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 1
    m = {x["metric"]: x for x in out["metrics"]}
    conv = m["event:CONVST:rise→BUSY:fall"]
    assert conv["verdict"] == "regression"
    assert conv["delta"]["p50"]["delta_s"] == pytest.approx(0.5e-6, abs=0.05e-6)
    assert m["event:BUSY:fall→CS:assert"]["verdict"] == "no significant change"
    assert out["events"]["before"][0]["chain"] == ["CONVST:rise", "BUSY:fall", "CS:assert"]
