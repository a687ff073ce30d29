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
from conftest import CAPTURES, real

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
