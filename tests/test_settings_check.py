"""Given settings checked against the signals (core/settings_check.py): a --mode,
--cs-polarity or --wordsize the edges contradict is called out first, naming
the setting that fits; the right settings, and every real capture with its
documented channel map, give no such warning (never a confident wrong one)."""

from __future__ import annotations

import json

import pytest
from conftest import CAPTURES, REAL, REAL_CAPTURES, real
from util import analyze, synth

from spigap.api import SpiConfig, analyze_device
from spigap.cli import main

B10 = CAPTURES / "mcp3008-rpi3-k4.4-b10.sr"        # mode 0, CE0 active low, 3 bytes per transfer


def test_right_settings_give_no_warning():
    assert analyze(B10).setting_warnings == []


@pytest.mark.parametrize("mode", [1, 2, 3])
def test_wrong_mode_names_the_one_that_fits(mode):
    w = analyze(B10, cpol=mode >> 1, cpha=mode & 1).setting_warnings
    assert len(w) == 1 and w[0].startswith(f"--mode {mode} ") and "--mode 0 (CPOL=0 CPHA=0) fits" in w[0]


@pytest.mark.parametrize("mode", [1, 2, 3])
def test_synthesized_mode_is_recognized(tmp_path, mode):
    """A capture synthesized in mode 1, 2 or 3, analyzed with the default mode 0."""
    _, _, path = synth(tmp_path, mode=mode, messages=40)
    w = analyze(path).setting_warnings
    assert len(w) == 1 and f"--mode {mode} (CPOL={mode >> 1} CPHA={mode & 1}) fits" in w[0], w
    assert analyze(path, cpol=mode >> 1, cpha=mode & 1).setting_warnings == []


def test_wrong_wordsize_and_cs_polarity():
    w = analyze(B10, wordsize=7).setting_warnings
    assert len(w) == 1 and "--wordsize 8 fits" in w[0] and "multiple of 24" in w[0]
    w = analyze(B10, cs_active_low=False).setting_warnings
    assert len(w) == 1 and "--cs-polarity low fits" in w[0]


def test_called_out_first_in_text_and_json(capsys):
    assert main(["analyze", str(B10), "--mode", "1"]) == 0
    out = capsys.readouterr().out.splitlines()
    check = [i for i, ln in enumerate(out) if ln.startswith("CHECK")]
    table = next(i for i, ln in enumerate(out) if ln.startswith("gap "))
    assert check and check[0] < table and "--mode 0" in out[check[0]]
    assert main(["analyze", str(B10), "--mode", "1", "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["warnings"][0].startswith("--mode 1 ") and "--mode 0" in d["warnings"][0]


@pytest.mark.parametrize("name", sorted(REAL_CAPTURES))
def test_real_captures_with_their_documented_settings_are_not_called_out(name):
    f, kw, _, rate = REAL_CAPTURES[name]
    a = analyze_device(real(f), SpiConfig(**kw), **({"samplerate": rate} if rate else {}))
    assert a.setting_warnings == []


def test_dsview_demo_data_switch_at_the_configured_sampling_edge():
    """DSView's demo says mode 0 (its decoder settings), but its data lines
    switch at the rising edge, in the very sample: mode 1 samples where they are
    stable. Reported as a better fit with the evidence, not as an error."""
    a = analyze_device(real("dsview__demo_spi.dsl"), SpiConfig())
    assert len(a.setting_warnings) == 1
    w = a.setting_warnings[0]
    assert "--mode 1 (CPOL=0 CPHA=1) fits them better" in w and "very sample of the edge" in w
    assert (REAL / "dsview__demo_spi.dsl").exists()
