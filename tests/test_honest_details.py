"""Issue 24 item 7: smaller honesty defects, each with its test.

* modes 1/3 with the last SCLK edge in the CS-deassert sample: the last bit is lost by the
  same-sample rule; the warning says so (it suggested --wordsize 7);
* --no-cs with bursts closer than the idle timeout: one transfer of 800 words, now with a
  warning that gives the spacing and the --idle-timeout that splits them;
* decoder settings saved with a capture (a .pvs beside a .sr, a .dsl's decoders, our own
  recipe) that the signals contradict: which one was used;
* the bundled AD7606 captures analyze without CHECK lines about their own settings; idle
  clocks are never negative and no finer than a sample; compare's deltas are no finer
  than the resolution and no share is "-0 %".
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import CAPTURES, ROOT, real

from spigap import confidence
from spigap.cli import main
from spigap.sigrok import pvs
from spigap.synth import Scenario, build, tracks, write_sr


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def _write(path, **overrides):
    """A synthesized capture written with the timeline as drawn (no 2-sample floor on CS hold)."""
    hold0 = overrides.pop("hold0", False)
    sc = Scenario.from_toml(None, overrides)
    w = sc.windows()
    if hold0:
        w.cs_hold[:] = 0.0           # the last SCLK edge in the very sample of the CS deassert
    tl = build(w, sc.shape, sc.tail)
    write_sr(path, tracks(tl, sc.channels, sc.samplerate), sc.samplerate, int(round(tl.end_time * sc.samplerate)))
    return tl


@pytest.mark.parametrize("mode,words", [(1, 1), (3, 2)])
def test_last_edge_at_cs_deassert(tmp_path, capsys, mode, words):
    p = tmp_path / "m.sr"
    _write(p, mode=mode, messages=40, words_per_transfer=words, seed=3, hold0=True)
    for extra in ([], ["--mode", str(mode), "--wordsize", "8"]):
        code, out, err = _run(capsys, "analyze", p, "--format", "json", *extra)
        assert code == 0, err
        w = json.loads(out)["warnings"]
        assert any(x.startswith("last bit lost at CS deassert: the last SCLK edge falls in the very sample CS "
                                "deasserts in 40 of 40") for x in w), w
        assert not any("--wordsize 7" in x or "--wordsize 15" in x for x in w), w
        assert any("(see 'last bit lost at CS deassert')" in x for x in w)
    # with a CS hold of two samples the same capture is whole words, and nothing is said
    q = tmp_path / "ok.sr"
    _write(q, mode=mode, messages=40, words_per_transfer=words, seed=3)
    code, out, _ = _run(capsys, "analyze", q, "--format", "json")
    assert not any("last bit lost" in x for x in json.loads(out)["warnings"])


def test_no_cs_bursts_closer_than_the_idle_timeout(tmp_path, capsys):
    p = tmp_path / "nocs.sr"
    _write(p, messages=400, transfers_per_message=1, words_per_transfer=2, cs_setup="0.3us", cs_hold="0.3us",
           context_switch="1us")
    code, out, err = _run(capsys, "analyze", p, "--no-cs", "--format", "json")
    d = json.loads(out)
    assert d["summary"]["transfers"] == 1 and d["summary"]["words"] == 800
    w = [x for x in d["warnings"] if x.startswith("no CS: ")]
    assert w and "399 pauses of 1.6 µs" in w[0] and "idle timeout (4.48 µs)" in w[0]
    timeout = w[0].rsplit("--idle-timeout ", 1)[1].split()[0]
    code, out, err = _run(capsys, "analyze", p, "--no-cs", "--idle-timeout", timeout, "--format", "json")
    d = json.loads(out)
    assert d["summary"]["transfers"] == 400 and not any(x.startswith("no CS: ") for x in d["warnings"])


def _pvs_beside(sr, options: dict):
    setup = pvs.Setup([pvs.DecodeSignal("SPI", [pvs.StackedDecoder("spi", options)],
                                        [pvs.DecodeChannel("CLK", "SCLK"), pvs.DecodeChannel("MOSI", "MOSI"),
                                         pvs.DecodeChannel("MISO", "MISO"), pvs.DecodeChannel("CS#", "CS")])])
    sr.with_suffix(".pvs").write_text(pvs.render(setup))


def test_saved_pvs_settings_the_signals_contradict(tmp_path, capsys):
    p = tmp_path / "m0.sr"
    _write(p, mode=0, messages=20, seed=5)
    _pvs_beside(p, {"cpha": ("x", 1), "bitorder": ("s", "lsb-first")})
    code, out, err = _run(capsys, "analyze", p, "--format", "json")
    d = json.loads(out)
    assert d["settings"]["mode"] == 0                  # the signals tell the mode: theirs is used
    assert any(x.startswith("PulseView's SPI decoder in m0.pvs says mode 1; the signals say mode 0") and
               "mode 0 is used (give --mode 1 to use the saved one)" in x for x in d["warnings"]), d["warnings"]
    # the bit order cannot be seen on the wires: the saved one is used, and said so
    assert d["settings"]["bitorder"] == "lsb" and d["settings"]["sources"]["bitorder"]["from"] == "file"
    assert any("says LSB first, which is used" in x for x in d["warnings"])
    # given settings are not second-guessed
    code, out, err = _run(capsys, "analyze", p, "--format", "json", "--mode", "0", "--bitorder", "msb")
    assert not any("m0.pvs" in x for x in json.loads(out)["warnings"])


def test_dsview_demo_says_which_mode_was_used(capsys):
    p = real("dsview__demo_spi.dsl")
    code, out, err = _run(capsys, "analyze", p, "--format", "json")
    d = json.loads(out)
    assert d["settings"]["mode"] == 1
    assert any(x.startswith("the .dsl's DSView SPI decoder says mode 0; the signals say mode 1") and
               "mode 1 is used" in x for x in d["warnings"]), d["warnings"]


@pytest.mark.parametrize("name", sorted(p.name for p in CAPTURES.glob("ad7606-*.sr")))
def test_ad7606_captures_carry_their_settings(name, capsys):
    code, out, err = _run(capsys, "analyze", CAPTURES / name, "--format", "json")
    d = json.loads(out)
    recipe = (CAPTURES / name).with_suffix(".toml").read_text()
    assert not any(" is inferred with confidence" in x or "contradicts the signals" in x for x in d["warnings"])
    if 'mosi = ""' in recipe:
        assert d["settings"]["mosi"] is None                       # DOUTB is no MOSI
    assert d["summary"]["idle_clocks_p50"] is None or d["summary"]["idle_clocks_p50"] >= 0
    code, out, err = _run(capsys, "analyze", CAPTURES / name)
    line = next(x for x in out.splitlines() if x.startswith("rate"))
    assert "-0." not in line and "one sample" in line


def test_compare_figures_no_finer_than_the_resolution(capsys):
    code, out, err = _run(capsys, "compare", "--before", CAPTURES / "ad7606-pi5-k6.6.31.sr",
                          "--after", CAPTURES / "ad7606-pi5-k6.12.25.sr")
    assert " ps" not in out and "-0 %" not in out
    # the inter-byte gaps did not move: their deltas are 0, not a fraction of a sample
    row = next(x for x in out.splitlines() if x.startswith("inter-byte"))
    assert "0 [0, 0]" in row and row.split("[0, 0]")[1].split()[:2] == ["0", "0"]


def test_ambiguity_is_a_json_warning(capsys):
    code, out, err = _run(capsys, "analyze", CAPTURES / "mcp2518fd-imx8mp-k5.18-B-rx.sr", "--format", "json")
    d = json.loads(out)
    g = d["summary"]["grouping"]
    assert g["ambiguous"]
    w = [x for x in d["warnings"] if x.startswith("message grouping ambiguous")]
    assert len(w) == 1 and g["settle"] in w[0]
    assert np.isfinite(g["confidence"])


SIGROK_DUMPS = ROOT / "tests" / "data" / "sigrok_dumps"       # real captures, one behaviour each (README)


def test_messages_of_varying_length_in_every_text(capsys):
    """A real capture (sigrok-dumps' MAX7219 driven by an FT232H) whose messages are told apart
    by their gaps' lengths with no repeating pattern: there is no "N × M" or "2+3" to print.
    analyze printed "10 of  transfers" (the empty list of lengths joined) and check
    "30 transfers, None per message"; each now says what JSON says, in the one form."""
    p = SIGROK_DUMPS / "max7219.sr"
    code, out, err = _run(capsys, "analyze", p, "--format", "json")
    s = json.loads(out)["summary"]
    g = s["grouping"]
    head = confidence.messages_in_words(s["messages"], s["transfers_per_message"], g["message_lengths"],
                                        ambiguous=g["ambiguous"], stretches=len(g["segments"]))
    # this capture's case: messages counted, their lengths not one pattern
    assert s["transfers_per_message"] is None and not g["message_lengths"] and not g["ambiguous"]
    assert head == f"{s['messages']} of varying length"
    code, out, err = _run(capsys, "analyze", p)
    line = next(x for x in out.splitlines() if x.startswith("messages"))
    assert line.startswith(f"messages    {head} [auto, "), line
    code, out, err = _run(capsys, "check", p, "--device", "mcp3008")
    line = next(x for x in out.splitlines() if x.startswith("capture "))
    assert "None" not in line and f"transfers, messages {head} [auto, " in line, line


def test_messages_in_words():
    words = confidence.messages_in_words
    assert words(100, 10, [10]) == "100 × 10 transfer(s)"
    assert words(40, None, [2, 3]) == "40 of 2+3 transfers"
    assert words(12, None, [], stretches=3) == "12 in 3 stretches"
    assert words(10, None, []) == "10 of varying length"
    assert words(None, None, [], ambiguous=True) == "ambiguous"
    assert words(0, None, []) == "none"            # no SPI bus: check's NO DATA line


def _stray_clock_vcd(path, cs_lines=("CS",)):
    """Three 8-bit transfers, on the CS lines in turn, then one SCLK pulse with no CS asserted 2.4 s
    into the capture (timescale 1 ns)."""
    ids = {name: chr(ord("#") + k) for k, name in enumerate(cs_lines)}
    lines = ["$timescale 1 ns $end", "$scope module top $end", "$var wire 1 ! SCLK $end",
             '$var wire 1 " MOSI $end', *[f"$var wire 1 {i} {n} $end" for n, i in ids.items()],
             "$upscope $end", "$enddefinitions $end", "#0", "0!", '0"', *[f"1{i}" for i in ids.values()]]
    t = 1000
    for k in range(3):
        cs = ids[cs_lines[k % len(cs_lines)]]
        lines += [f"#{t}", f"0{cs}"]
        t += 500
        for _ in range(8):
            lines += [f"#{t}", "1!", f"#{t + 500}", "0!"]
            t += 1000
        lines += [f"#{t + 500}", f"1{cs}"]
        t += 10500
    lines += ["#2400000000", "1!", "#2400000500", "0!", "#2400010000", '1"']
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("cs_lines, warning", [
    (("CS",), "2 SCLK edge(s) while CS was inactive (first at 2.4 s)"),
    (("CE0", "CE1"), "2 SCLK edge(s) while no CS was asserted (first at 2.4 s)"),
])
def test_first_stray_clock_edge_in_a_unit_that_fits(tmp_path, capsys, cs_lines, warning):
    """A warning's time is printed as every other time is (units.fmt_time): it said
    "first at 2.4e+06 µs" (real captures: nrf905operation.sr's "2.40564e+06 µs")."""
    p = _stray_clock_vcd(tmp_path / "stray.vcd", cs_lines)
    code, out, err = _run(capsys, "analyze", p, "--clk", "SCLK", "--mosi", "MOSI", "--cs", ",".join(cs_lines),
                          "--mode", "0", "--wordsize", "8", "--cs-polarity", "low", "--format", "json")
    assert code == 0, err
    assert warning in json.loads(out)["warnings"], out
