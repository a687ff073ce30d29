"""``spigap analyze --device``: each transfer labelled by the decoders' own code,
checked against the device generators' truth (not against the decoders)."""

from __future__ import annotations

import json

import pytest

from spigap.core import labels
from spigap.api import analyze_device
from spigap.cli import main
from spigap.errors import UsageError
from spigap.synth import Scenario
from conftest import CAPTURES


def test_mcp3008_labels_match_generator_truth():
    recipe = CAPTURES / "mcp3008-patterns.toml"
    truth = Scenario.from_toml(recipe).timeline().device_truth
    a = analyze_device(recipe.with_suffix(".sr"))
    got = labels.label_transfers(a, "mcp3008:vref=3.3")
    assert len(got) == a.n == len(truth)
    for lab, t in zip(got, truth):
        assert lab.startswith(f"{t['channel']} = {t['code']} ({t['volts']:.3f} V)"), (lab, t)


def test_mcp2518fd_labels_name_registers_and_crc():
    a = analyze_device(CAPTURES / "mcp2518fd-rx.sr")
    got = labels.label_transfers(a, "mcp2518fd")
    assert len(got) == a.n
    assert got[0].startswith("READ_CRC C1INT") and got[0].endswith("crc ok")
    assert any("RX obj ID" in lab for lab in got)
    assert not any("decoder error" in lab for lab in got)


def test_cli_json_and_csv_carry_the_labels(capsys):
    cap = str(CAPTURES / "mcp3008-patterns.sr")
    assert main(["analyze", cap, "--device", "mcp3008", "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["summary"]["device"] == "mcp3008"
    assert d["transfers"][1]["device"].startswith("CH1 = 1023")
    assert main(["analyze", cap, "--device", "mcp3008", "--format", "csv"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[0].endswith(",device") and "CH0 = 0" in rows[1]


def test_unknown_device_is_a_clear_error(capsys):
    with pytest.raises(UsageError, match="unknown device 'mcp9999'; known: mcp3008"):
        labels.parse("mcp9999")
    code = main(["analyze", str(CAPTURES / "mcp3008-patterns.sr"), "--device", "mcp9999"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("spigap: error: argument --device: unknown device")
    assert len(err.strip().splitlines()) == 1
