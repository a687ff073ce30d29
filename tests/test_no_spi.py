"""No SPI, no bus (issue 24): captures of other protocols get one line, 'no SPI bus
found: <what was seen>', exit 2, from analyze and detect; an error row from batch;
NO DATA from check. The captures are real ones from sigrok-dumps and sigrok-cli's demo
device (tests/data/non_spi/README.md); every real SPI capture still analyzes with no
options (tests/test_real_captures.py, tests/test_output_golden.py)."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT

from spigap.cli import main

DATA = ROOT / "tests" / "data" / "non_spi"
SEEN = {   # file: what the line must say was seen
    "samsung_syncmaster245b.sr": "looks like I2C (sda changes while scl is high: 3 START and 2 STOP conditions; scl "
                                 "runs in 9-bit bytes between them)",
    "24aa025uid_seqrndread16_pagewrite16_seqrndread16.sr": "looks like I2C (SDA changes while SCL is high",
    "uart_count_19200_8n1.sr": "looks like a free-running clock (ch runs through all 365 cycles",
    "mcp2515dm-bm-125kbits_msg_222_5bytes.sr": "no channel toggles like a clock",
    "ds18b20.sr": "no channel toggles like a clock",
    "dcf77_20s.sr": "no channel toggles like a clock",
    "rako_rsrdali_query_ballast.sr": "D0 toggles like a clock, but no line changes on its edges",
    "sigrok_cli_demo.sr": "analog channels A0, A1, A2, A3, A4 were not looked at (give --threshold",
}


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


@pytest.mark.parametrize("name", sorted(SEEN))
@pytest.mark.parametrize("command", ["analyze", "detect"])
def test_one_line_no_spi_bus(name, command, capsys):
    code, out, err = _run(capsys, command, DATA / name)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"spigap: error: {DATA / name}: no SPI bus found: ")
    assert SEEN[name] in lines[0]
    assert "Traceback" not in err


def test_looks_like_i2c_both_captures(capsys):
    for name in ("samsung_syncmaster245b.sr", "24aa025uid_seqrndread16_pagewrite16_seqrndread16.sr"):
        code, _, err = _run(capsys, "analyze", DATA / name, "--format", "json")
        assert code == 2 and "looks like I2C" in err


def test_batch_error_rows(capsys):
    code, out, err = _run(capsys, "batch", DATA, "--format", "json")
    assert code == 2
    rows = {r["path"].rsplit("/", 1)[-1]: r for r in json.loads(out)["captures"]}
    assert set(rows) == set(SEEN)
    for name, r in rows.items():
        assert r["status"] == "error" and "no SPI bus found: " in r["error"] and SEEN[name] in r["error"]


def test_check_no_data(capsys):
    code, out, err = _run(capsys, "check", DATA / "uart_count_19200_8n1.sr", "--device", "mcp3008", "--format",
                          "json")
    assert code == 1
    res = json.loads(out)["results"][0]
    assert res["verdict"] == "NO DATA" and res["no_data"].startswith("no SPI bus found: ")
    assert "NO DATA: no SPI bus found" in err
    code, out, err = _run(capsys, "check", DATA / "uart_count_19200_8n1.sr", "--device", "mcp3008",
                          "--allow-empty")
    assert code == 0 and "NO DATA" in out
    # no transfer: no message either, said as such (it printed "None per message")
    assert "capture     0 transfers, messages none [none]" in out and "None" not in out, out


def test_named_roles_are_taken_as_given(capsys):
    # the user says it is SPI: spigap frames it (and the settings check says what it thinks)
    code, out, err = _run(capsys, "analyze", DATA / "uart_count_19200_8n1.sr", "--clk", "ch", "--miso", "tx",
                          "--no-cs")
    assert code == 0, err


def test_analog_channels_when_asked(capsys):
    # with --threshold the demo device's analog channels are looked at too (and still hold no SPI)
    code, out, err = _run(capsys, "analyze", DATA / "sigrok_cli_demo.sr", "--threshold", "0")
    assert code == 2 and "no SPI bus found" in err and "analog channels" not in err


@pytest.mark.parametrize("command", ["analyze", "detect"])
def test_a_capture_cut_before_its_bus_says_the_damage_first(command, capsys, tmp_path):
    """The first 5000 bytes of a Tektronix ISF (4669 of 172 125 samples): no bus can be seen in
    them because the file is cut, and the one line says that first (it said only "no SPI bus
    found: Ch1 toggles like a clock ...", while `spigap convert` named the cut)."""
    cut = tmp_path / "cut.isf"
    cut.write_bytes((ROOT / "captures" / "mcp2518fd-pi5-20mhz-scope-beforeCH1.isf").read_bytes()[:5000])
    code = main([command, str(cut)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert "4669 of 172125" in err[-1] and "cut short" in err[-1], err
    assert err[-1].index("cut short") < err[-1].index("no SPI bus"), err
    assert "results" not in err[-1]


def test_a_cut_sr_without_names_says_the_damage_not_the_results(capsys, tmp_path):
    """A .sr whose channels are numbers, cut after its first 300 bytes (1 095 samples, no bus to
    see): the damage first and no "results cover the first 1095 samples" before "the part before
    it holds no SPI bus" (each reader ends its problem with how far the results go, in words of
    its own: CaptureTruncated.damage leaves that clause out, whatever its words)."""
    from test_lookalike import renamed

    whole = renamed(ROOT / "captures" / "mcp3008-rpi3-k4.4-b10.sr", tmp_path)
    cut = tmp_path / "cut.sr"
    cut.write_bytes(whole.read_bytes()[:300])
    code = main(["analyze", str(cut)])
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2 and "ends early" in line and "holds no SPI bus" in line, line
    assert "results" not in line, line
