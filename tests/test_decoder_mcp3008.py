"""The mcp3008 sigrok decoder (decoders/mcp3008) and its plain module mcp3x0x.py.

Oracles: the synth generator's device model (analyzer/spigap/synth/traffic/mcp3008.py,
written independently of the decoder: codes, channels, start-bit clock, repeat
bits and the warning each faulty window must give); golden annotation files (sigrok-test
cases: tests/test_sigrok_test_cases.py);
and real foreign captures (warnings, never an exception).
"""

from __future__ import annotations

import re

import pytest

from conftest import (CAPTURES, DECODERS, assert_sigrok_naming_rules, load_decoder_class, REAL_SPI_STACKS, capture_channels, load_plain_module,
                      real, run_sigrok, sigrok_annotations, slow_if_big)

from spigap.synth import scenario, write
from spigap.synth.traffic import mcp3008 as gen
from spigap.synth.timeline import build

SPI = "spi:clk=SCLK:mosi=MOSI:miso=MISO:cs={cs}"
# shipped capture -> (spi decoder options, mcp3008 options)
SHIPPED = {
    "patterns": (SPI.format(cs="CS"), ""),
    "mcp3208": (SPI.format(cs="CS") + ":cpol=1:cpha=1", ":part=MCP3208:vref=4.096"),
    "mcp3204-iio": (SPI.format(cs="CE0"), ":part=MCP3204:vref=2.5"),
    "errors": (SPI.format(cs="CS"), ""),
}
# what each expectation of the device model must show in the warnings row
WARNING_FOR = {
    "ok": None,
    "null_one": "Null bit is 1, expected 0",
    "repeat_flip": "LSB-first repeat B1..",
    "short": "Too few clocks for a result",
    "no_start": "No start bit",
    "cs_mid_no_result": "CS released mid-frame",
    "cs_mid_command": "CS released mid-frame: command incomplete",
    "null_missing": "Null bit missing",
}



m = load_plain_module("mcp3008", "mcp3x0x")


# ---------------------------------------------------------------- helpers

def annotations(sr, spi, options=""):
    """(ss, es, class, [texts]) of the mcp3008 decoder stacked on ``spi``."""
    return sigrok_annotations(sr, f"{spi},mcp3008{options}", "mcp3008")[0]


def truth_of(name):
    sc = scenario.Scenario.from_toml(CAPTURES / f"mcp3008-{name}.toml")
    tl = sc.timeline()
    return sc, tl


def sampling_edge_sample(sc, tl, window, clock):
    """Sample number of the sampling edge of clock ``clock`` (1-based) of a CS window."""
    w = tl.windows
    first_word = int((w.word_window < window).sum())
    word = first_word + (clock - 1) // sc.wordsize
    j = (clock - 1) % sc.wordsize
    t = tl.word_first[word] + (2 * j + sc.cpha) * (0.5 / sc.sclk)
    return int(round(t * sc.samplerate))


def by_window(sc, tl, anns):
    """Annotations grouped by the CS window their start sample falls in."""
    lo = [int(round(t * sc.samplerate)) for t in tl.cs_assert]
    hi = [int(round(t * sc.samplerate)) for t in tl.cs_deassert]
    groups = [[] for _ in lo]
    for a in anns:
        hits = [i for i in range(len(lo)) if lo[i] <= a[0] <= hi[i]]
        assert len(hits) == 1, f"annotation {a} is not inside exactly one CS window"
        groups[hits[0]].append(a)
    return groups


CONV = re.compile(r"^(CH\S+) = (\d+) \((-?\d+\.\d{3}) V\)$")



# ------------------------------------------------------------ captures

@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_pulseview_setup_names_the_tested_stack(name):
    """captures/mcp3008-<name>.pvs (written by spigap decoders pvs) opens the stack these tests decode."""
    from spigap.cli.decoders import parse_stack
    from spigap.sigrok import pvs

    sr = CAPTURES / f"mcp3008-{name}.sr"
    want = pvs.render(pvs.Setup([parse_stack(f"{SHIPPED[name][0]},mcp3008{SHIPPED[name][1]}", capture_channels(sr))]))
    assert sr.with_suffix(".pvs").read_text() == want



@pytest.mark.parametrize("name", SHIPPED)
def test_decoded_values_match_the_device_model(name):
    sc, tl = truth_of(name)
    spi, opts = SHIPPED[name]
    part = sc.device.get("part", "MCP3008")
    anns = annotations(CAPTURES / f"mcp3008-{name}.sr", spi, opts)
    groups = by_window(sc, tl, anns)
    truth = tl.device_truth
    assert len(truth) == len(groups) == len(tl.cs_assert)
    seen_ok_patterns = set()
    for t, group in zip(truth, groups):
        where = f"window {t['window']} ({t['pattern']}, {t['expect']})"
        cls = {}
        for a in group:
            cls.setdefault(a[2], []).append(a)
        warnings = [a[3][0] for a in cls.get("warning", [])]
        want = WARNING_FOR[t["expect"]]
        if want is None:
            assert warnings == [], f"{where}: unexpected warnings {warnings}"
        else:
            assert len(warnings) == 1 and warnings[0].startswith(want), f"{where}: warnings {warnings}"
        # the start bit sits on the clock the device model says
        if t["start_clock"] is not None:
            (start,) = cls["start"]
            assert abs(start[0] - sampling_edge_sample(sc, tl, t["window"], t["start_clock"])) <= 1, where
        else:
            assert "start" not in cls, where
        if t["expect"] in ("ok", "null_one", "repeat_flip"):
            (conv,) = cls["conversion"]
            mt = CONV.match(conv[3][0])
            assert mt, conv
            assert mt[1] == t["channel"], where
            assert int(mt[2]) == t["code"], where
            assert float(mt[3]) == pytest.approx(t["volts"], abs=0.0005), where
            (result,) = cls["result"]
            assert result[3][1] == str(t["code"])
            (null,) = cls["null"]
            assert null[3][0] == f"Null bit: {1 if t['expect'] == 'null_one' else 0}"
            (mode,) = cls["mode"]
            assert mode[3][1] == ("SGL" if t["sgl"] else "DIFF")
            if t["repeat_bits"]:
                (rep,) = cls["repeat"]
                ok = t["expect"] != "repeat_flip"
                assert rep[3][0] == f"LSB-first repeat B1..B{t['repeat_bits']} " + ("matches" if ok else "MISMATCH")
            else:
                assert "repeat" not in cls, where
            if t["expect"] == "ok":
                seen_ok_patterns.add(t["pattern"])
        else:
            assert "conversion" not in cls, where
    if name == "patterns":
        assert seen_ok_patterns == set(gen.PATTERNS), "every request pattern decodes"
    if name == "mcp3208":
        assert seen_ok_patterns == {"linux", "mcp3208", "mcp320x"}
    assert part  # the capture's part is the decoder option given in SHIPPED


def test_mcp320x_two_transfers_in_one_window_decode():
    """The Linux mcp320x message: command byte, µs-long transfer gap, 2-byte read, one CS window."""
    sc, tl = truth_of("mcp3204-iio")
    truth = tl.device_truth
    assert all(t["pattern"] == "mcp320x" for t in truth)
    assert len(tl.truth()["inter_transfer"]) == len(truth)          # one gap inside each window
    anns = annotations(CAPTURES / "mcp3008-mcp3204-iio.sr", *SHIPPED["mcp3204-iio"])
    convs = [a[3][0] for a in anns if a[2] == "conversion"]
    want = [f"{t['channel']} = {t['code']} ({t['volts']:.3f} V)" for t in truth]
    assert convs == want
    assert any("\u2212" in c for c in convs), "differential pairs are named CHa+/CHb\u2212"


def test_wrong_part_option_is_visible():
    """12-bit frames decoded as a 10-bit part: the top 10 bits of each code,
    and the LSB-first repeat check tells the user that the part is wrong."""
    sc, tl = truth_of("mcp3208")
    spi, _ = SHIPPED["mcp3208"]
    anns = annotations(CAPTURES / "mcp3008-mcp3208.sr", spi, ":vref=4.096")
    groups = by_window(sc, tl, anns)
    mismatches = 0
    for t, group in zip(tl.device_truth, groups):
        if t["expect"] != "ok":
            continue
        (conv,) = [a for a in group if a[2] == "conversion"]
        assert int(CONV.match(conv[3][0])[2]) == t["code"] >> 2
        mismatches += any(a[2] == "warning" and a[3][1] == "LSB repeat mismatch" for a in group)
    assert mismatches >= 3


def test_without_cs_line_bursts_delimit_frames():
    """No CS mapped: a clock pause of more than two words ends a frame."""
    sc, tl = truth_of("patterns")
    anns = annotations(CAPTURES / "mcp3008-patterns.sr", "spi:clk=SCLK:mosi=MOSI:miso=MISO")
    convs = [a[3][0] for a in anns if a[2] == "conversion"]
    want = [f"{t['channel']} = {t['code']} ({t['volts']:.3f} V)" for t in tl.device_truth]
    assert convs == want
    assert not [a for a in anns if a[2] == "warning"]


def test_any_start_bit_alignment_mode3_synthesized(tmp_path):
    """Leading zeros of any length before the start bit (0..15) in SPI mode 3."""
    sc = scenario.Scenario.from_toml(None, {"samplerate": "10MHz", "sclk": "1MHz", "mode": 3,
                                            "context_switch": "20us", "seed": 9})
    mosi, miso, truth = [], [], []
    for lead in range(16):
        ch, code = lead % 8, (lead * 61 + 5) % 1024
        bits = [0] * lead + [1, 1] + [(ch >> 2) & 1, (ch >> 1) & 1, ch & 1]
        bits += [0] * (32 - len(bits))
        rx = gen.device_reply(bits, code, 10, 1)
        mosi.append(gen._words(bits))
        miso.append(gen._words(rx))
        truth.append((ch, code, max(0, min(9, 32 - lead - 17))))
    w = sc.windows_from_payload(mosi, miso)
    tl = build(w, sc.shape, sc.tail)
    path = tmp_path / "align.sr"
    write(sc, path, tl=tl)
    anns = annotations(path, "spi:clk=SCLK:mosi=MOSI:miso=MISO:cs=CS:cpol=1:cpha=1")
    convs = [a[3][0] for a in anns if a[2] == "conversion"]
    assert convs == [f"CH{ch} = {code} ({code * 3.3 / 1024:.3f} V)" for ch, code, _ in truth]
    reps = [a[3][0] for a in anns if a[2] == "repeat"]
    assert reps == [f"LSB-first repeat B1..B{n} matches" for _, _, n in truth if n]
    assert not [a for a in anns if a[2] == "warning"]


# ---------------------------------------------------------- robustness

REAL = REAL_SPI_STACKS          # the documented channel maps of every real capture (conftest)


@pytest.mark.parametrize("name,spi", slow_if_big(REAL), ids=[f"{n.split('__')[1]}-{i}" for i, (n, _) in enumerate(REAL)])
def test_foreign_real_captures_give_warnings_not_exceptions(name, spi):
    path = real(name)
    out = run_sigrok(["-i", str(path), "-P", f"{spi},mcp3008", "-A", "mcp3008=conversion:warning",
                      "--protocol-decoder-samplenum"])
    lines = out.splitlines()
    assert lines, "foreign traffic must at least give warnings"
    warnings = [ln for ln in lines if " = " not in ln]
    assert warnings, "foreign traffic that decodes cleanly everywhere is suspicious"
    for ln in lines:
        assert re.match(r"^\d+-\d+ mcp3008-1: ", ln), ln


# ------------------------------------------------------ plain module

@pytest.mark.parametrize("part", sorted(gen.PARTS))
@pytest.mark.parametrize("pattern", ["start-alone", "linux", "mcp3208", "mcp320x"])
def test_label_transfer_against_device_model(part, pattern):
    inputs, bits = gen.PARTS[part]
    for ch in range(inputs):
        for sgl in (True, False):
            for code in (0, 1, (1 << bits) - 1, 0x155 & ((1 << bits) - 1), (1 << (bits - 1))):
                tx = gen.command_bytes(pattern, ch, sgl)
                mo = gen._bits(tx)
                rx = gen._words(gen.device_reply(mo, code, bits, 1))
                ex = gen.expectation(mo, bits, 0, None)
                label = m.label_transfer(tx, rx, {"part": part, "vref": 2.048})
                name = m.channel_name(part, 1 if sgl else 0, ch)
                if ex["expect"] == "ok":
                    assert label == f"{name} = {code} ({code * 2.048 / (1 << bits):.3f} V)"
                else:
                    assert ex["expect"] == "short" and label.startswith("Too few clocks"), label


def test_label_transfer_examples_and_warnings():
    assert m.label_transfer([0x60 | 3 << 2, 0, 0], [0xFE, 0x80, 0x00], {}) == "CH3 = 512 (1.650 V)"
    assert m.label_transfer([0x01, 0xB0, 0x00], [0xFF, 0xFA, 0x00], {"vref": "5"}) == "CH3 = 512 (2.500 V)"
    assert m.label_transfer([0, 0, 0], [0xFF] * 3, {}) == "No start bit"
    assert m.label_transfer(None, [1, 2, 3], {}).startswith("no MOSI")
    # null bit 1, LSB repeat mismatch
    assert m.label_transfer([0x6C, 0, 0], [0xFF, 0x80, 0x00], {}) == "CH3 = 512 (1.650 V); Null bit 1"
    assert m.label_transfer([0x6C, 0, 0], [0xFE, 0x80, 0x04], {}) == "CH3 = 512 (1.650 V); LSB repeat mismatch"
    assert m.label_transfer([0x6C, 0], [0xFE, 0x80], {}).startswith("Too few clocks: 8 of 10")
    assert m.label_transfer([0x6C], [0xFE], {}) == "CS released mid-frame"
    assert m.label_transfer([0x06], [0xFF], {}) == "CS released mid-frame"
    assert m.label_transfer([0x20], [0xFF], {}) == "Null bit missing"
    assert m.label_transfer([0x10], [0xFF], {}) == "Null bit missing"
    assert m.label_transfer([0x00, 0x06], [0xFF, 0xFF], {}) == "CS released mid-frame"
    # 16-bit words, differential on a 4-input part (D2 ignored)
    assert m.label_transfer([0x4C00, 0x0000], [0xFE80, 0x0020], {"wordsize": 16, "part": "MCP3004"}) \
        == "CH2\u2212/CH3+ = 512 (1.650 V)"
    # MISO missing: channel only
    assert m.label_transfer([0x6C, 0, 0], None, {}) == "CH3 (no MISO)"
    with pytest.raises(ValueError):
        m.label_transfer([0x6C, 0, 0], [0, 0, 0], {"part": "MCP3009"})


def test_channel_names():
    assert [m.channel_name("MCP3008", 0, d) for d in range(8)] == [
        "CH0+/CH1\u2212", "CH0\u2212/CH1+", "CH2+/CH3\u2212", "CH2\u2212/CH3+",
        "CH4+/CH5\u2212", "CH4\u2212/CH5+", "CH6+/CH7\u2212", "CH6\u2212/CH7+"]
    assert [m.channel_name("MCP3204", 1, d) for d in (0, 3, 4, 7)] == ["CH0", "CH3", "CH0", "CH3"]
    assert m.volts(4095, 12, 4.096) == pytest.approx(4.095)
    assert m.frame_clocks(10) == 17 and m.frame_clocks(12) == 19


def test_plain_module_has_no_sigrok_import_and_decoder_follows_naming_rules():
    src = (DECODERS / "mcp3008" / "mcp3x0x.py").read_text()
    assert not re.search(r"^\s*(import|from)\s+(sigrokdecode|\.)", src, re.M)
    D = load_decoder_class("mcp3008")
    assert_sigrok_naming_rules(D, "mcp3008")
    assert D.inputs == ["spi"]
    classes = [c[0] for c in D.annotations]
    assert classes == list(m.EVENT_KINDS)
