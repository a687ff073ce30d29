"""compare and report on long captures: a systematic sample of blocks of transfers
(core/collect.py Sampler), so memory does not grow with the capture.

Oracle: the whole analysis of the same capture (core/run.analyze, itself checked against
synthesized truth and sigrok-cli elsewhere): every sampled transfer's figures equal
the whole analysis's for the same transfer; the totals are the whole capture's; and
compare finds the same change on the sample as on every transfer.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from spigap.api import SpiConfig
from spigap.cli import main
from spigap.core import analysis, collect, run
from spigap.io import open_capture
from util import synth

GAPS = ("cs_setup", "cs_hold", "inter_byte", "cs_change", "context_switch", "transfer_duration", "transfer_period")


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    d = tmp_path_factory.mktemp("sampled")
    _, _, path = synth(d, "long.sr", messages=4000, transfers_per_message=3, sigma="40ns", seed=5)
    return path


def _sampled(path, retain, block):
    with open_capture(path) as r:
        return run.analyze(r, SpiConfig(), keep="sample", retain=retain, learn=1, block=block).device


def test_sample_equals_the_whole_analysis_transfer_by_transfer(capture):
    with open_capture(capture) as r:
        full = run.analyze(r, SpiConfig()).device
    s = _sampled(capture, 2000, 250)
    assert full.n == 12000 and s.sample is not None
    assert s.n <= 2000 + 250 and s.sample["transfers"] == full.n
    assert s.sample["stride"] >= 4 and s.sample["messages"] == full.n_messages()
    assert s.transfer_rate_hz() == pytest.approx(full.transfer_rate_hz(), rel=1e-12)
    # each sampled transfer is the whole analysis's transfer with the same start
    k = np.searchsorted(full.start, s.start)
    assert (full.start[k] == s.start).all()
    blocks = k // 250
    assert (blocks % s.sample["stride"] == 0).all()                   # evenly spread over the capture
    assert blocks.max() * 250 >= full.n * 0.75
    for f in ("end", "cs_setup", "cs_hold", "duration", "n_bits", "message"):
        assert np.array_equal(getattr(s, f), getattr(full, f)[k], equal_nan=True), f
    breaks = s.breaks
    assert breaks is not None and (k[breaks] % 250 == 0).all() and breaks[0]
    assert np.isnan(s.gap_before[breaks]).all()
    assert np.array_equal(s.gap_before[~breaks], full.gap_before[k[~breaks]], equal_nan=True)
    assert np.array_equal(s.gap_kind[~breaks], full.gap_kind[k[~breaks]])
    fp, sp = full.period(), s.period()
    inner = ~breaks[1:]
    assert np.array_equal(sp[inner], fp[k[:-1][inner]], equal_nan=True)
    assert np.isnan(sp[~inner]).all()
    # words and word gaps travel with their transfers
    for j in (0, s.n // 2, s.n - 1):
        w = slice(s.word_off[j], s.word_off[j + 1])
        fw = slice(full.word_off[k[j]], full.word_off[k[j] + 1])
        assert s.mosi[w].tolist() == full.mosi[fw].tolist() and s.miso[w].tolist() == full.miso[fw].tolist()
        pg = slice(s.pair_off[j], s.pair_off[j + 1])
        fpg = slice(full.pair_off[k[j]], full.pair_off[k[j] + 1])
        assert s.pair_gap[pg].tolist() == full.pair_gap[fpg].tolist()
    # statistics close to the whole capture's (a sample, stated in a warning)
    for kind in GAPS:
        a, b = analysis.describe(full.gap_values(kind), 1.0), analysis.describe(s.gap_values(kind), 1.0)
        assert abs(a["p50_s"] - b["p50_s"]) <= 1.0, kind
    assert any("systematic sample" in w for w in s.warnings)


def test_a_capture_that_fits_is_not_sampled(capture):
    s = _sampled(capture, 20000, 250)
    assert s.sample is None and s.breaks is None and s.n == 12000


def test_compare_finds_the_same_change_on_the_sample(tmp_path, capsys, monkeypatch):
    _, _, before = synth(tmp_path, "b.sr", messages=3000, transfers_per_message=3, sigma="40ns", seed=1)
    _, _, after = synth(tmp_path, "a.sr", messages=3000, transfers_per_message=3, sigma="40ns", seed=2,
                        cs_setup="2.2us")
    args = ["compare", "--before", str(before), "--after", str(after), "--format", "json", "--bootstrap", "200"]
    assert main(args) in (0, 1)
    whole = json.loads(capsys.readouterr().out)
    monkeypatch.setattr(collect, "RETAIN_TRANSFERS", 1500)
    monkeypatch.setattr(collect, "LEARN_TRANSFERS", 1500)
    monkeypatch.setattr(collect, "SAMPLE_BLOCK", 300)
    assert main(args) in (0, 1)
    sampled = json.loads(capsys.readouterr().out)
    assert whole["before"][0]["sample"] is None
    smp = sampled["before"][0]["sample"]
    assert smp is not None and smp["sampled"] <= 1800 and sampled["before"][0]["transfers"] == 9000

    def verdicts(d):
        return {m["metric"]: m["verdict"] for m in d["metrics"]}

    vw, vs = verdicts(whole), verdicts(sampled)
    assert vw["cs_setup"] == vs["cs_setup"] == "regression"
    assert {k for k, v in vw.items() if v in ("regression", "improvement")} == \
        {k for k, v in vs.items() if v in ("regression", "improvement")}
    mw = {m["metric"]: m for m in whole["metrics"]}["cs_setup"]
    ms = {m["metric"]: m for m in sampled["metrics"]}["cs_setup"]
    assert ms["delta"]["p50"]["delta_s"] == pytest.approx(mw["delta"]["p50"]["delta_s"], abs=2e-8)


def test_report_on_a_sampled_capture(tmp_path, capture, monkeypatch):
    monkeypatch.setattr(collect, "RETAIN_TRANSFERS", 2000)
    monkeypatch.setattr(collect, "LEARN_TRANSFERS", 2000)
    monkeypatch.setattr(collect, "SAMPLE_BLOCK", 250)
    out = tmp_path / "r.html"
    assert main(["report", str(capture), "-o", str(out)]) == 0
    html = out.read_text()
    assert "systematic sample" in html and "12000; the figures below are from" in html
