"""The new formats from the command line: one-line errors with exit 2, partial results on damage,
and the capture options (--channel-map, --threshold, --deglitch) reaching the readers."""

from __future__ import annotations

import json

import pytest

from spigap.cli import build_parser, main
from spigap.cli.common import reader_options
from spigap.core import run
from spigap.io import open_capture
from spigap.synth import Scenario, tracks
from spigap.synth.writers import write_capture


@pytest.fixture(scope="module")
def cap(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    sc = Scenario.from_toml(None, {"messages": 12, "samplerate": 50e6})
    tl = sc.timeline()
    n = int(round(tl.end_time * sc.samplerate))
    trs = tracks(tl, sc.channels, sc.samplerate)
    return {fmt: write_capture(d / name, fmt, trs, sc.samplerate, n)
            for fmt, name in (("vcd", "c.vcd"), ("csv-saleae", "c.csv"), ("scope-rigol", "r.csv"),
                              ("saleae-v1", "sal"), ("sr-analog", "a.sr"))}


def one_line_error(capsys, args, *needles):
    code = main(args)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("spigap: error: "), err
    assert "Traceback" not in err
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("name, text, needle", [
    ("x.vcd", "$timescale 1 parsec $end\n$enddefinitions $end\n", "bad $timescale"),
    ("x.csv", "Time [s],A\n", "no data rows"),
    ("x.bin", "<SALEAE>\x09\x00\x00\x00\x00\x00\x00\x00", "version 9"),
    ("y.bin", "<SALEAE>\x00\x00", "header is cut"),
    ("x.txt", "nothing numeric here\nat all\n", "not a change-only logic CSV"),
])
def test_bad_files_one_line_exit_2(tmp_path, capsys, name, text, needle):
    p = tmp_path / name
    p.write_text(text)
    one_line_error(capsys, ["analyze", str(p)], str(p), needle)


def test_cut_vcd_prints_partial_results_then_the_error(tmp_path, capsys, cap):
    data = open(cap["vcd"], "rb").read()
    p = tmp_path / "cut.vcd"
    p.write_bytes(data[: len(data) * 2 // 3 - 1])
    code = main(["analyze", str(p), "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 2 and '"transfers"' in out
    assert err.startswith(f"spigap: error: {p}:") and ("cut" in err or "middle of a token" in err)


def test_capture_options_reach_the_reader(cap):
    args = build_parser().parse_args(["analyze", cap["saleae-v1"], "--channel-map", "0=SCLK,1=MOSI",
                                      "--channel-map", "2=MISO,3=CS", "--deglitch", "30"])
    with open_capture(args.capture, **reader_options(args)) as r:
        assert r.info.channels == ["SCLK", "MOSI", "MISO", "CS"]
        a = run.analyze(r, __import__("spigap.cli.common", fromlist=["x"]).config_from_args(args)).device
    assert a.n == 12 and a.info.deglitch_ns == 30
    args = build_parser().parse_args(["analyze", cap["sr-analog"], "--threshold", "SCLK=1.5,0.3",
                                      "--threshold", "1.6"])
    with open_capture(args.capture, **reader_options(args)) as r:
        a = run.analyze(r, __import__("spigap.cli.common", fromlist=["x"]).config_from_args(args)).device
    assert a.n == 12 and a.info.thresholds["SCLK"] == (1.5, 0.3)
    assert a.info.thresholds["CS"][0] == 1.6


def test_content_sniffing_and_input_format(tmp_path, cap, capsys):
    p = tmp_path / "capture.dat"                 # unknown extension: the content says scope CSV
    p.write_bytes(open(cap["scope-rigol"], "rb").read())
    # unnamed scope channels: the roles come from the signals (docs/inference.md)
    assert main(["analyze", str(p), "--format", "json"]) == 0
    st = json.loads(capsys.readouterr().out)["settings"]
    assert (st["clk"], st["mosi"], st["miso"], st["cs"]) == ("CH1", "CH2", "CH3", "CH4")
    with open_capture(p, channel_map="CH1=SCLK,CH2=MOSI,CH3=MISO,CH4=CS") as r:
        assert r.format_name == "scope-csv" and r.info.channels == ["SCLK", "MOSI", "MISO", "CS"]
    one_line_error(capsys, ["analyze", str(p), "--input-format", "vcd"], "not a VCD")
    q = tmp_path / "notes.dat"
    q.write_text("just some notes\n")
    one_line_error(capsys, ["analyze", str(q)], "unknown capture format", "--input-format")
