"""Simulator dumps (issue 32): test benches of SPI, I2C, UART and I2S cores written by Icarus
Verilog (tests/data/hdl/README.md), analyzed with no options as an FPGA engineer would open them:
hundreds of signals, a hierarchy of scopes, one net under one identifier code in several scopes,
vectors, x and z, a 1 ps timescale, a free-running system clock beside the bus. Oracle: the
benches' own HDL (what each line is, which mode the master drives)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest
from conftest import ROOT

from spigap.cli import main
from spigap.io import open_capture

HDL = ROOT / "tests" / "data" / "hdl"


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def _detect(capsys, path) -> dict:
    code, out, err = _run(capsys, "detect", path, "--format", "json")
    assert code == 0, err
    return json.loads(out)


def test_spi_bench_roles_from_the_signals_not_the_system_clock(capsys):
    """tb.clk (50 MHz, never pauses, every register changes on its edges) is no SCLK: sclk runs in
    bursts that cs_n brackets and the data follow. Was: clk as SCLK, or 'no channel changes at
    all' when the first 32 channels were register bits."""
    d = _detect(capsys, HDL / "spi_tb.vcd")
    s = d["settings"]
    assert (s["clk"], s["cs"], s["mosi"], s["miso"]) == ("sclk", "cs_n", "mosi", "miso")
    assert (s["mode"], s["cs_polarity"], s["wordsize"]) == (0, "low", 8)
    assert d["sources"]["clk"]["from"] == "inferred"          # two lines are named like a clock
    analyzed = [b for b in d["buses"] if b["analyzed"]]
    assert analyzed and analyzed[0]["clk"] == "sclk" and analyzed[0]["cs"] == "cs_n"
    assert all(b["clk"] != "clk" for b in d["buses"]), d["buses"]     # the system clock is no bus


def test_spi_bench_analyzes_every_transfer(capsys):
    code, out, err = _run(capsys, "analyze", HDL / "spi_tb.vcd", "--format", "json")
    assert code == 0, err
    a = json.loads(out)
    assert a["summary"]["transfers"] == 16 and a["summary"]["partial_transfers"] == 0
    assert a["summary"]["words"] == 31          # 1, 2 and 3 bytes in turn (n = i % 3, plus one)


def test_one_net_is_one_channel_named_one_way():
    """sclk is dumped as tb.sclk, tb.u_master.sclk_o and tb.u_slave.sclk under one identifier
    code: one channel, named by its declaration nearest the top; the other names select it."""
    with open_capture(HDL / "spi_tb.vcd") as r:
        ch = r.info.channels
        assert len(ch) == len(set(ch)) and len(ch) > 300            # hundreds of signals, each once
        assert r.info.tick_s == pytest.approx(1e-12)                  # the 1 ps timescale
        assert "sclk" in ch and not any(c.endswith(".sclk") or c == "sclk_o" for c in ch)
        for alias in ("tb.sclk", "tb.u_slave.sclk", "tb.u_master.sclk_o", "sclk_o"):
            assert ch[r.channel_index(alias)] == "sclk"
        assert ch[r.channel_index("tb.u_slave.miso")] == "miso"


def test_an_alias_names_a_role(capsys):
    code, out, err = _run(capsys, "detect", HDL / "spi_tb.vcd", "--clk", "tb.u_slave.sclk", "--format", "json")
    assert code == 0, err
    assert json.loads(out)["settings"]["clk"] == "sclk"


def _anonymous(tmp_path):
    """The SPI bench with its bus nets renamed (net_a ...): the roles from the signals alone,
    beside a system clock still named clk."""
    text = (HDL / "spi_tb.vcd").read_text()
    head, body = text.split("$enddefinitions", 1)
    names = {"sclk": "net_a", "mosi": "net_b", "miso": "net_c", "cs_n": "net_d", "sclk_o": "net_a_o",
             "mosi_o": "net_b_o", "cs_n_o": "net_d_o", "miso_i": "net_c_i"}
    head = re.sub(r"(\$var \S+ \d+ \S+ )(\S+)", lambda m: m.group(1) + names.get(m.group(2), m.group(2)), head)
    out = tmp_path / "anon.vcd"
    out.write_text(head + "$enddefinitions" + body)
    return out


def test_a_line_named_clk_that_never_pauses_is_no_sclk(capsys, tmp_path):
    d = _detect(capsys, _anonymous(tmp_path))
    s = d["settings"]
    assert (s["clk"], s["cs"]) == ("net_a", "net_d")
    assert {s["mosi"], s["miso"]} == {"net_b", "net_c"}
    assert s["mode"] == 0
    assert any("clk is named like SCLK but runs all the time" in w for w in d["warnings"])


@pytest.mark.parametrize("bench,says", [("i2c", "looks like I2C (sda changes while scl is high"),
                                         ("uart", "looks like UART (line idles high"),
                                         ("i2s", "looks like I2S (a continuous bit clock bclk; lrclk switches every 32")])
def test_other_cores_are_no_spi_bus(bench, says, capsys):
    path = HDL / f"{bench}_tb.vcd"
    code, out, err = _run(capsys, "analyze", path)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and f"{path}: no SPI bus found: {says}" in lines[0], lines


def _without_date(text: str) -> str:
    return re.sub(r"\$date.*?\$end", "", text, count=1, flags=re.S)


@pytest.mark.skipif(shutil.which("iverilog") is None or shutil.which("vvp") is None, reason="iverilog not installed")
@pytest.mark.parametrize("bench", ["spi", "i2c", "uart", "i2s"])
def test_the_dumps_are_what_the_benches_make(bench, tmp_path):
    """The committed dumps are the benches' output (README's command), not edited by hand."""
    vvp = tmp_path / f"{bench}.vvp"
    subprocess.run(["iverilog", "-Wall", "-o", str(vvp), str(HDL / f"{bench}_tb.v")], check=True, timeout=60)
    subprocess.run(["vvp", "-n", str(vvp)], check=True, cwd=tmp_path, capture_output=True, timeout=120)
    made = (tmp_path / f"{bench}_tb.vcd").read_text()
    assert _without_date(made) == _without_date((HDL / f"{bench}_tb.vcd").read_text())
