"""Timing at the pins through the commands users run: spigap pins, check, compare, report,
the device files' electrical tables, and the spi_pins sigrok decoder (real sigrok-cli)."""

from __future__ import annotations

import csv
import io
import json
import re

import numpy as np
import pytest

from conftest import CAPTURES, spigap_main, run_sigrok
from spigap.api import analyze_file
from spigap.pins.tap import PinOptions
from spigap.resources import load_decoder_module
from spigap.synth.srwriter import Track, write_sr
from spigap.timing.checks.judging import FAIL, MARGINAL, PASS, judge
from spigap.timing.profiles import ProfileError, load_device

BEFORE = sorted(str(p) for p in CAPTURES.glob("mcp2518fd-pi5-20mhz-scope-beforeCH*.isf"))
AFTER = sorted(str(p) for p in CAPTURES.glob("mcp2518fd-pi5-20mhz-scope-afterCH*.isf"))
setuphold = load_decoder_module("spi_pins", "setuphold")


def spigap(*args):
    return spigap_main(*args)


def test_shipped_scope_acquisition_is_four_isf_files():
    assert len(BEFORE) == 4 and len(AFTER) == 4


# ------------------------------------------------------------------ the walk-through (README)
def test_check_fails_the_miso_setup_and_suggests_a_sample_delay():
    p = spigap("check", *BEFORE, "--device", "mcp2518fd", "--format", "json")
    assert p.returncode == 1, p.stderr
    r = json.loads(p.stdout)["results"][0]
    items = {c["id"]: c for c in r["checks"]}
    assert items["controller.MISO setup"]["verdict"] == FAIL
    assert items["controller.MISO setup"]["measured"] < 0
    assert items["device.SDI setup"]["verdict"] == PASS
    advice = r["summary"]["pins"]["advice"]
    delay = [a for a in advice if a["prop"] == "rx-sample-delay-ns"]
    assert len(delay) == 1 and delay[0]["value"] == 4
    # the same bus captured again, the controller now sampling 4 ns later: PASS
    p = spigap("check", *AFTER, "--device", "mcp2518fd", "--rx-sample-delay", "4ns", "--format", "json")
    items = {c["id"]: c for c in json.loads(p.stdout)["results"][0]["checks"]}
    assert items["controller.MISO setup"]["verdict"] == PASS, items["controller.MISO setup"]
    assert p.returncode == 0, p.stdout


def test_pins_command_text_json_csv_and_eye(tmp_path):
    p = spigap("pins", *BEFORE, "--device", "mcp2518fd", "--png", tmp_path / "eye.png")
    assert p.returncode == 0, p.stderr
    assert "rx-sample-delay-ns = <4>" in p.stdout
    assert "data-valid window of MISO at the controller's sampling point" in p.stdout
    assert (tmp_path / "eye.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    d = json.loads(spigap("pins", *BEFORE, "--format", "json").stdout)["captures"][0]
    assert d["measured"] == "interpolated" and d["figures"]["miso_setup"]["min"] < 0
    assert d["eyes"]["miso"]["folded"] > 100
    rows = list(csv.reader(io.StringIO(spigap("pins", *BEFORE, "--format", "csv").stdout)))
    assert rows[0][:3] == ["capture", "figure", "what"]
    assert {r[1] for r in rows[1:]} >= {"mosi_setup", "miso_setup", "miso_tdo", "clk.rise"}


def test_compare_before_after_the_sample_delay():
    p = spigap("compare", "--before", *BEFORE, "--after", *AFTER, "--pins", "--device", "mcp2518fd",
               "--after-rx-sample-delay", "4ns", "--format", "json")
    assert p.returncode == 0, p.stderr
    rows = {r["name"]: r for r in json.loads(p.stdout)["pins"]["figures"]}
    assert rows["miso_setup"]["verdict"] == "better" and rows["miso_setup"]["after"] > 2e-9
    assert rows["miso_hold"]["verdict"] == "worse"               # the delay moves the window, not widens it
    assert rows["mosi_setup"]["verdict"] == "same" and rows["miso_tdo"]["verdict"] == "same"


def test_report_has_the_eye_and_the_advice(tmp_path):
    p = spigap("report", *BEFORE, "--device", "mcp2518fd", "-o", tmp_path / "r.html", "--png", tmp_path / "png")
    assert p.returncode == 0, p.stderr
    html = (tmp_path / "r.html").read_text()
    assert "Timing at the pins" in html and "rx-sample-delay-ns" in html
    assert any(f.name.endswith("-eye.png") for f in (tmp_path / "png").iterdir())


def test_analyze_pins_json():
    p = spigap("analyze", *BEFORE, "--pins", "--format", "json")
    d = json.loads(p.stdout)
    assert d["pins"]["figures"]["sclk_period"]["p50"] == pytest.approx(50e-9, abs=0.2e-9)


# ------------------------------------------------------------------ device files
def test_device_files_carry_levels_per_supply():
    assert load_device("mcp3008@5V").electrical.vih == pytest.approx(3.5)
    assert load_device("mcp3008@2.7V").electrical.vih == pytest.approx(1.89)
    assert load_device("ad7606@3.3V").electrical.vil == pytest.approx(0.33)
    tdo = {lim.name: lim for lim in load_device("mcp3008@2.7V").limits}["tDO"]
    assert tdo.max == pytest.approx(200e-9) and tdo.unverified and "Circuit.h" in tdo.source


def test_a_share_of_vdd_needs_vdd(tmp_path):
    f = tmp_path / "d.toml"
    f.write_text('schema = 1\n[device]\nname = "x"\ntitle = "x"\nsources = ["s"]\n'
                 '[electrical]\nvil = "0.3 VDD"\nvih = "0.7 VDD"\nsource = "s"\n'
                 '[limits.f]\nmetric = "sclk"\nmax = "1MHz"\nwhat = "w"\nsource = "s"\n')
    with pytest.raises(ProfileError, match=r"electrical\.vdd: is required"):
        load_device(str(f))


def test_logic_capture_check_skips_what_it_cannot_see(tmp_path):
    """mcp3008 on a logic capture: rise times need volts (SKIP); tSU judged +/- 1 sample."""
    p = spigap("check", CAPTURES / "mcp3008-rpi3-k4.4-b10.sr", "--device", "mcp3008@5V", "--format", "json")
    items = {c["id"]: c for c in json.loads(p.stdout)["results"][0]["checks"]}
    assert items["device.tR"]["verdict"] == "SKIP" and "scope" in items["device.tR"]["reason"]
    assert items["device.tSU"]["verdict"] in (PASS, MARGINAL) and items["device.tSU"]["resolution"] == 20e-9


# ------------------------------------------------------------------ the decoder
def test_classify_is_the_checks_one_sample_rule():
    """setuphold.classify (the decoder's) says what judging.judge says with r = one sample."""
    rate = 50e6
    r = 1 / rate
    for limit_samples in (0, 0.5, 1, 2.5, 3, 7):
        lim = limit_samples * r
        for m in range(0, 12):
            code = setuphold.classify(m, lim, rate)
            v, _, _ = judge(m * r, lim, None, r, 0.0)
            want = {FAIL: setuphold.VIOLATION, MARGINAL: setuphold.UNDECIDABLE, PASS: setuphold.OK}[v]
            assert code == want, (limit_samples, m)


def _logic_bus(tmp_path, offsets):
    """Mode 0 at 1 MHz, 20 MS/s (20 samples a half period): MOSI changes ``offsets`` samples before
    each sampling edge (0 = on the edge's own sample)."""
    clk_s, clk_l, mo_s, mo_l = [], [], [], []
    t, level = 100, 0
    for k, off in enumerate(offsets):
        edge = t + k * 40
        clk_s += [edge, edge + 20]
        clk_l += [1, 0]
        level ^= 1
        mo_s.append(edge - off)
        mo_l.append(level)
    n = t + 40 * len(offsets) + 100
    tracks = [Track("SCLK", np.array(clk_s), np.array(clk_l), 0), Track("MOSI", np.array(mo_s), np.array(mo_l), 0),
              Track("CS", np.array([50, n - 50]), np.array([0, 1]), 1)]
    path = tmp_path / "sh.sr"
    write_sr(path, tracks, 20e6, n)
    return path


def test_decoder_marks_what_the_analyzer_measures(tmp_path, sigrok_cli):
    """spi_pins on a logic capture (real sigrok-cli) and the analyzer's pin measurement: the same
    edges violated or undecidable against a 150 ns setup (3 samples at 20 MS/s)."""
    offsets = [20, 0, 1, 2, 3, 4, 5, 6, 20, 2, 0, 20]
    path = _logic_bus(tmp_path, offsets)
    out = run_sigrok(["-i", str(path), "-P", "spi_pins:clk=SCLK:cs=CS:mosi=MOSI:mosi_setup=150", "-A", "spi_pins",
                      "--protocol-decoder-samplenum"])
    marked = {}
    for line in out.splitlines():
        m = re.match(r"^(\d+)-(\d+) spi_pins-1: MOSI (setup|hold) (.*)$", line)
        assert m, line
        if m.group(3) == "setup":          # from the data change to the edge (one sample wide on it)
            edge = int(m.group(1)) if "< 1 sample" in m.group(4) else int(m.group(2))
            marked[edge] = "violation" if not m.group(4).endswith("?") else "undecidable"
    a = analyze_file(path, pins=PinOptions(record=True))
    rec = a.device.pins.figures["mosi_setup"].recorded()
    mine = {}
    for v, t, _ in rec:
        code = setuphold.classify(v, 150e-9, 20e6)
        if code:
            mine[int(round(t))] = "violation" if code == setuphold.VIOLATION else "undecidable"
    assert marked == mine
    # 3 samples is the limit: offsets 0 (the edge's own sample: within one sample of 0), 1, 2, 2, 0 break it
    # even with the sample in their favour; 3 cannot be decided
    assert list(marked.values()).count("violation") == 5 and list(marked.values()).count("undecidable") == 1


def _pins_json(capsys, *args) -> dict:
    from spigap.cli import main

    assert main(["analyze", str(CAPTURES / "shared-rpi-mcp3008-mcp2518fd.sr"), "--pins", "--format", "json",
                 *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_shared_bus_pins_of_every_device_as_each_alone(capsys):
    """A shared bus (MCP3008 on CE0, MCP2518FD on CE1): each device's pins are measured in its
    own CS windows, the same figures as measuring that device alone (--cs), not the first
    device's only."""
    bus = _pins_json(capsys)["devices"]
    assert set(bus) == {"CE0", "CE1"}
    for cs in ("CE0", "CE1"):
        alone = _pins_json(capsys, "--cs", cs)["pins"]
        assert bus[cs]["pins"] == alone, cs
        assert bus[cs]["pins"]["lines"]["cs"]["channel"] == cs and bus[cs]["pins"]["notes"] == []
    # the two chips' outputs differ (the synthesizer's MCP3008 launches MISO 40 ns after SCLK)
    tdo = {cs: bus[cs]["pins"]["figures"]["miso_tdo"]["p50"] for cs in bus}
    assert tdo["CE0"] == pytest.approx(40e-9) and tdo["CE1"] < 40e-9


SHARED = CAPTURES / "shared-rpi-mcp3008-mcp2518fd.sr"


def test_pins_command_reports_every_device_of_a_shared_bus():
    """`spigap pins` on a shared bus (MCP3008 on CE0, MCP2518FD on CE1): a section per device in
    text, JSON (as analyze's: the devices by CS line) and CSV, each the one `spigap pins --cs`
    gives for that device alone, with that device's limits (--device CE0=SPEC) in its advice."""
    per = ["--device", "CE0=mcp3008", "--device", "CE1=mcp2518fd"]
    p = spigap("pins", SHARED, *per, "--format", "json")
    assert p.returncode == 0, p.stderr
    (bus,) = json.loads(p.stdout)["captures"]
    assert bus["capture"] == str(SHARED) and set(bus["devices"]) == {"CE0", "CE1"}
    text = spigap("pins", SHARED, *per).stdout
    rows = list(csv.reader(io.StringIO(spigap("pins", SHARED, *per, "--format", "csv").stdout)))
    for cs, chip in (("CE0", "mcp3008"), ("CE1", "mcp2518fd")):
        alone = spigap("pins", SHARED, "--cs", cs, "--device", chip, "--format", "json")
        assert alone.returncode == 0, alone.stderr
        want = json.loads(alone.stdout)["captures"][0]
        assert want.pop("capture") == str(SHARED)
        assert bus["devices"][cs] == want, cs
        assert want["lines"]["cs"]["channel"] == cs and want["sampling_edges"] > 1000
        # the text: that device's section as alone, named CAPTURE [CS] (as spigap check names it)
        section = spigap("pins", SHARED, "--cs", cs, "--device", chip).stdout
        assert section.replace(f"capture     {SHARED}\n", f"capture     {SHARED} [{cs}]\n", 1) in text
        alone_rows = list(csv.reader(io.StringIO(
            spigap("pins", SHARED, "--cs", cs, "--device", chip, "--format", "csv").stdout)))
        assert [r[1:] for r in rows[1:] if r[0] == f"{SHARED} [{cs}]"] == [r[1:] for r in alone_rows[1:]]
    # the devices differ (the synthesizer's MCP3008 launches MISO 40 ns after SCLK)
    tdo = {cs: d["figures"]["miso_tdo"]["p50"] for cs, d in bus["devices"].items()}
    assert tdo["CE0"] == pytest.approx(40e-9) and tdo["CE1"] < 40e-9
    assert text.count("capture     ") == 2 and rows[0][0] == "capture"


@pytest.mark.parametrize("args,says", [
    (["--device", "mcp3008"], "holds 2 devices on one bus (CE0, CE1)"),          # which one?
    (["--device", "CE3=mcp3008"], "CE3 is not a device of this bus"),
])
def test_pins_command_device_options_on_a_shared_bus(args, says):
    p = spigap("pins", SHARED, *args)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and says in p.stderr, p.stderr
    q = spigap("pins", CAPTURES / "mcp3008-patterns.sr", "--device", "CS=mcp3008")
    assert q.returncode == 2 and "analyzed as one device" in q.stderr, q.stderr


# ---------------------------------------- a shared bus's input levels, per device (scope)
def _device_file(path, name: str, electrical: str):
    path.write_text(f'schema = 1\n[device]\nname = "{name}"\ntitle = "{name}"\nsources = ["test"]\n'
                    f'[electrical]\n{electrical}source = "test"\n'
                    '[limits.tSU]\nmetric = "din_setup"\nmin = "5ns"\nwhat = "w"\nsource = "test"\n')
    return str(path)


def _shared_scope_bus(tmp_path):
    """A scope's five traces of one 3.3 V bus with slow edges (RC 3 ns): SCLK, MOSI and MISO
    shared, CE0 selecting a CMOS-input part (VIL/VIH 0.3/0.7 VDD: 0.99/2.31 V) and CE1 a
    TTL-input one (0.8/2.0 V), which sees every rising edge earlier. Returns the synthesized
    bus, each CS's bus, each device's levels, its device file and the command's common arguments."""
    import dataclasses

    from test_pins import RATE, bus
    from spigap.synth.analog_bus import AnalogBus
    from spigap.synth.writers.isf import write_isf_set

    b = bus(tau=3e-9, sclk=10e6, noise=0.005, messages=8)
    tl = b.timeline
    ce = {name: AnalogBus(dataclasses.replace(tl, cs_assert=tl.cs_assert[k::2], cs_deassert=tl.cs_deassert[k::2]),
                          b.lines, seed=b.seed) for k, name in enumerate(("CE0", "CE1"))}
    srcs = [b.line("clk", "SCLK", RATE), b.line("mosi", "MOSI", RATE), b.line("miso", "MISO", RATE),
            ce["CE0"].line("cs", "CE0", RATE), ce["CE1"].line("cs", "CE1", RATE)]
    paths = write_isf_set(str(tmp_path / "tek0000"), srcs, RATE, int(tl.end_time * RATE), volts_per_div=0.5,
                          center=1.65, bits=12)
    levels = {"CE0": (0.99, 2.31), "CE1": (0.8, 2.0)}
    files = {"CE0": _device_file(tmp_path / "cmos.toml", "cmos", 'vdd = 3.3\nvil = "0.3 VDD"\nvih = "0.7 VDD"\n'),
             "CE1": _device_file(tmp_path / "ttl.toml", "ttl", 'vil = 0.8\nvih = 2.0\n')}
    common = [*paths, "--channel-map", "Ch1=SCLK,Ch2=MOSI,Ch3=MISO,Ch4=CE0,Ch5=CE1", "--format", "json"]
    return b, ce, levels, files, common


def test_pins_of_a_shared_bus_read_each_device_at_its_own_input_levels(tmp_path):
    """The bus of _shared_scope_bus. Each device's MOSI setup and hold are those at its own
    receiver (the synthesizer's truth at its levels, found on the noise-free waveform), and each
    device's section is the one `spigap pins --cs CEk` gives with that device alone; its lines
    say which levels they were read at."""
    from test_pins import RATE

    b, ce, levels, files, common = _shared_scope_bus(tmp_path)
    p = spigap("pins", *common, "--device", f"CE0={files['CE0']}", "--device", f"CE1={files['CE1']}")
    assert p.returncode == 0, p.stderr
    (shared,) = json.loads(p.stdout)["captures"]
    assert set(shared["devices"]) == {"CE0", "CE1"}
    tick = 1 / RATE
    setup_min = {}
    for k, cs in enumerate(("CE0", "CE1")):
        d = shared["devices"][cs]
        vil, vih = levels[cs]
        for role in ("clk", "mosi", "cs"):          # its inputs at its own levels
            line = d["lines"][role]
            assert (line["vil_v"], line["vih_v"]) == pytest.approx((vil, vih)), (cs, role)
            assert line["levels_source"].startswith(("cmos", "ttl")[k]), (cs, role, line["levels_source"])
        # the truth at its receiver, on the sampling edges of its own CS windows
        tr = b.truth("mosi", vil, vih)
        mine = np.zeros(len(tr["at"]), bool)
        for a, z in zip(ce[cs].timeline.cs_assert, ce[cs].timeline.cs_deassert):
            mine |= (tr["at"] > a) & (tr["at"] < z)
        fig = d["figures"]["mosi_setup"]
        assert fig["n"] == int(mine.sum()) > 20
        tol = max(0.1 * tick, fig["uncertainty_max"])
        assert fig["min"] == pytest.approx(np.nanmin(tr["setup"][mine]), abs=tol), cs
        hold = d["figures"]["mosi_hold"]
        assert hold["min"] == pytest.approx(np.nanmin(tr["hold"][mine]), abs=max(0.1 * tick, hold["uncertainty_max"])), cs
        setup_min[cs] = fig["min"]
        # the same as that device alone on the bus
        alone = spigap("pins", *common, "--cs", cs, "--device", files[cs])
        assert alone.returncode == 0, alone.stderr
        want = json.loads(alone.stdout)["captures"][0]
        want.pop("capture")
        assert d == want, cs
    # the two receivers differ by more than the measurement's resolution: the test can tell
    assert abs(setup_min["CE0"] - setup_min["CE1"]) > 2 * tick


def test_check_of_a_shared_bus_measures_each_device_at_its_own_input_levels(tmp_path):
    """`spigap check --device CE0=FILE --device CE1=FILE` on the same bus: each device's
    din_setup limit is checked on the figure `spigap pins` gives that device (its own levels,
    its own CS windows), without --pins: a device with pin limits is measured at the pins, on a
    shared bus as on one device (it was skipped, "not measured at the pins")."""
    _, _, _, files, common = _shared_scope_bus(tmp_path)
    per = ["--device", f"CE0={files['CE0']}", "--device", f"CE1={files['CE1']}"]
    pins = json.loads(spigap("pins", *common, *per).stdout)["captures"][0]["devices"]
    p = spigap("check", *common, *per)      # 4 transfers each: NO DATA for the gaps, exit 2
    results = {r["summary"]["cs"]: r for r in json.loads(p.stdout)["results"]}
    assert set(results) == {"CE0", "CE1"}, p.stderr
    for cs, r in results.items():
        (tsu,) = [c for c in r["checks"] if c.get("metric") == "din_setup"]
        assert tsu["measured"] == pytest.approx(pins[cs]["figures"]["mosi_setup"]["min"]), (cs, tsu)
    assert results["CE0"]["checks"] != results["CE1"]["checks"]


def test_analyze_pins_of_a_shared_bus_reads_each_device_at_its_own_levels(tmp_path):
    """`spigap analyze --pins --device CE0=mcp2518fd --device CE1=ad7606`: each device's lines
    are read at the input levels of its device file (0.3/0.7 of 3.3 V; 0.1/0.9 of 5 V)."""
    _, _, _, _, common = _shared_scope_bus(tmp_path)
    p = spigap("analyze", *common, "--pins", "--device", "CE0=mcp2518fd", "--device", "CE1=ad7606")
    devices = json.loads(p.stdout)["devices"]
    for cs, want in (("CE0", (0.99, 2.31)), ("CE1", (0.5, 4.5))):
        for role in ("clk", "mosi", "cs"):
            line = devices[cs]["pins"]["lines"][role]
            assert (line["vil_v"], line["vih_v"]) == pytest.approx(want), (cs, role, line)
