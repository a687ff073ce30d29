"""The mcp3008 decoder on every part of Linux's mcp320x driver (drivers/iio/adc/mcp320x.c).

Captures are synthesized as the driver clocks each part (spigap.synth.traffic.mcp3008, scenario
``mcp320x-iio``: its command byte, its read length, the MCP355x's CS pulse, SPI mode 0 and 3), and
decoded by the real sigrok-cli. The expected values do not come from our decoder: each read's
MISO bytes go through the driver's own arithmetic (``driver_value`` below, restated from
mcp320x_adc_conversion) and the datasheets' scale (volts), and the channel names from the
driver's channel tables.
"""

from __future__ import annotations

import re

import pytest

from conftest import load_plain_module, sigrok_annotations

from spigap.api import analyze_device
from spigap.core import labels
from spigap.synth import scenario, write
from spigap.synth.traffic import mcp3008 as gen

m = load_plain_module("mcp3008", "mcp3x0x")

VREF = 3.3
CONV = re.compile(r"^(\S+) = (-?\d+) \((-?\d+\.\d+) V(?:, (overrange|underrange))?\)$")


def driver_value(part: str, rx: list[int], cpol: int) -> int | None:
    """The value mcp320x_adc_conversion() returns for transfer[1]'s bytes ``rx``; None for -EIO."""
    b = rx + [0] * (4 - len(rx))
    if part == "MCP3001":
        return b[0] << 5 | b[1] >> 3
    if part in ("MCP3002", "MCP3004", "MCP3008"):
        return b[0] << 2 | b[1] >> 6
    if part == "MCP3201":
        return b[0] << 7 | b[1] >> 1
    if part in ("MCP3202", "MCP3204", "MCP3208"):
        return b[0] << 4 | b[1] >> 4
    if part == "MCP3301":
        v = (b[0] & 0x1F) << 8 | b[1]
        return v - (1 << 13) if v & (1 << 12) else v
    raw = b[0] << 24 | b[1] << 16 | b[2] << 8 | b[3]
    if cpol == 0:
        raw = (raw << 1) & 0xFFFFFFFF               # the data ready bit
    raw >>= 8
    if raw & (1 << 22) and raw & (1 << 23):
        return None
    if raw & (1 << 22):
        raw &= ~(1 << 22)
    elif raw & (1 << 23) or raw & (1 << 21):
        raw |= 0xFFC00000
    return raw - (1 << 32) if raw & (1 << 31) else raw


def datasheet_volts(part: str, code: int) -> float:
    """Unipolar parts: code × VREF / 2^n; MCP3301: 4095 at VREF − 1 LSB (DS21700 table 6-1);
    MCP355x: 22-bit two's complement over ±VREF (DS21950 §5)."""
    if part == "MCP3301":
        return code * VREF / 4096
    if part.startswith("MCP355"):
        return code * VREF / (1 << 21)
    return code * VREF / (1 << gen.IIO_PARTS[part][1])


def channel(part: str, ch: int, sgl: bool) -> str:
    """The driver's channel tables: MCP320X_VOLTAGE_CHANNEL(n) is CHn; the DIFF(a, b) channel has
    address a, IN+ on a; the single-input parts have one pair."""
    inputs = gen.IIO_PARTS[part][0]
    if inputs == 1:
        return "IN+/IN\u2212"
    if sgl:
        return f"CH{ch}"
    a, b = ch, ch ^ 1
    return f"CH{min(a, b)}+/CH{max(a, b)}\u2212" if a < b else f"CH{b}\u2212/CH{a}+"


def codes_for(part: str) -> list[int]:
    bits = gen.IIO_PARTS[part][1]
    if part == "MCP3301":
        return [-4096, -1, 0, 1, 4095, 1234, -2345]
    if part.startswith("MCP355"):
        # full scale, one LSB each side of zero, and 10 % beyond full scale (OVH / OVL)
        return [-(1 << 21), -1, 0, 1, (1 << 21) - 1, 654321, 2306867, -2306867]
    top = (1 << bits) - 1
    return [0, 1, top, top // 3, 1 << (bits - 1), 0x2AA & top]


def synth(tmp_path, part, mode, **device):
    sc = scenario.Scenario.from_toml(None, {
        "samplerate": "20MHz", "sclk": "1MHz", "mode": mode, "context_switch": "20us", "seed": 5,
        "device": {"name": "mcp320x-iio", "part": part, **device}})
    tl = sc.timeline()
    path = tmp_path / f"{part}-mode{mode}.sr"
    write(sc, path, tl=tl)
    return sc, tl, path


def decode(path, part, mode, vref=VREF):
    cp = "cpol=1:cpha=1" if mode == 3 else "cpol=0:cpha=0"
    return sigrok_annotations(path, f"spi:clk=SCLK:mosi=MOSI:miso=MISO:cs=CS:{cp},mcp3008:part={part}:vref={vref}",
                              "mcp3008")[0]


def reads(tl):
    return [t for t in tl.device_truth if t["kind"] == "read"]


CASES = [(p, 0) for p in gen.IIO_PARTS] + [(p, 3) for p in ("MCP3001", "MCP3002", "MCP3301", "MCP3550-60", "MCP3553")]


@pytest.mark.parametrize("part,mode", CASES, ids=[f"{p}-mode{md}" for p, md in CASES])
def test_every_driver_part_decodes_to_the_drivers_value(tmp_path, part, mode):
    inputs, bits, frame = gen.IIO_PARTS[part]
    codes = codes_for(part)
    n = max(len(codes), 2 * inputs)
    sc, tl, path = synth(tmp_path, part, mode, codes=" ".join(map(str, codes)), conversions=n)
    anns = decode(path, part, mode)
    convs = [a[3][0] for a in anns if a[2] == "conversion"]
    assert [a for a in anns if a[2] == "warning"] == []
    assert len(convs) == len(reads(tl)) == n
    for t, text in zip(reads(tl), convs):
        tx_len = len(gen.iio_command(part, t["ch"], not t["sgl"]))
        value = driver_value(part, t["miso"][tx_len:], sc.cpol)
        assert value == t["code"], "the generator's chip answers what the driver reads"
        mt = CONV.match(text)
        assert mt, text
        assert mt[1] == channel(part, t["ch"], t["sgl"])
        assert int(mt[2]) == value
        assert float(mt[3]) == pytest.approx(datasheet_volts(part, value), abs=0.6 * 10 ** -len(mt[3].split(".")[1]))
        if frame == "ds":
            assert mt[4] == ("overrange" if value >= 1 << 21 else "underrange" if value < -(1 << 21) else None)
    starts = [a for a in anns if a[2] == "convstart"]
    assert len(starts) == (n if frame == "ds" else 0), "one conversion start per MCP355x read"
    if frame == "ds":
        ready = [a[3][0] for a in anns if a[2] == "ready"]
        assert ready == (["SDO/RDY low: data ready"] * n if mode == 0 else [])


@pytest.mark.parametrize("part", ["MCP3002", "MCP3202", "MCP3004", "MCP3208"])
def test_differential_pairs_of_the_multi_input_parts(tmp_path, part):
    inputs = gen.IIO_PARTS[part][0]
    sc, tl, path = synth(tmp_path, part, 0, codes="77 500", conversions=inputs, differential="true")
    convs = [a[3][0] for a in decode(path, part, 0) if a[2] == "conversion"]
    want = [channel(part, t["ch"], False) for t in reads(tl)]
    assert [CONV.match(c)[1] for c in convs] == want
    assert want[:2] == ["CH0+/CH1\u2212", "CH0\u2212/CH1+"]


@pytest.mark.parametrize("after", ["repeat", "zeros"])
@pytest.mark.parametrize("part", ["MCP3002", "MCP3202"])
def test_mcp3002_either_reading_of_msbf_is_accepted(tmp_path, part, after):
    """DS21294E says both that MSBF = 0 gives zeros and that it gives the LSB-first repeat:
    either is accepted, the MSBF bit the driver sends (0) is shown."""
    sc, tl, path = synth(tmp_path, part, 0, codes="1000 1", conversions=2, after_b0=after)
    anns = decode(path, part, 0)
    assert [a for a in anns if a[2] == "warning"] == []
    assert [a[3][0] for a in anns if a[2] == "msbf"] == ["MSBF bit: 0"] * 2
    rep = [a[3][1] for a in anns if a[2] == "repeat"]
    if after == "zeros":
        assert rep == ["Zeros", "LSB repeat OK"]       # code 1: its B1.. repeat is zeros too
    else:
        assert rep == ["LSB repeat OK"] * 2


FAULTS = [
    ("MCP3001", 0, "null_one", "Null bit is 1, expected 0"),
    ("MCP3201", 3, "null_one", "Null bit is 1, expected 0"),
    ("MCP3301", 0, "null_one", "Null bit is 1, expected 0"),
    ("MCP3202", 0, "null_one", "Null bit is 1, expected 0"),
    ("MCP3001", 0, "repeat_flip", "LSB-first repeat B1..B3 = "),
    ("MCP3201", 0, "repeat_flip", "LSB-first repeat B1..B1 = "),
    ("MCP3002", 0, "repeat_flip", "LSB-first repeat B1..B6 = "),
    ("MCP3551", 0, "not_ready", "SDO/RDY high at the first clock"),
    ("MCP3553", 3, "all_ones", "OVL and OVH both 1"),
    ("MCP3550-50", 0, "all_ones", "OVL and OVH both 1"),
]


@pytest.mark.parametrize("part,mode,fault,warning", FAULTS, ids=[f"{p}-{f}-mode{md}" for p, md, f, _ in FAULTS])
def test_wrong_frames_are_warned(tmp_path, part, mode, fault, warning):
    codes = "-1000 2000" if part.startswith("MCP355") or part == "MCP3301" else "6 5"
    sc, tl, path = synth(tmp_path, part, mode, codes=codes, conversions=2, **{fault: "1"})
    anns = decode(path, part, mode)
    warnings = [a for a in anns if a[2] == "warning"]
    read = [t for t in reads(tl) if t[fault]][0]
    if fault == "all_ones" and mode == 0:           # 0xFF... also sets SDO/RDY: busy
        assert [w[3][1] for w in warnings] == ["Not ready", "OVL and OVH both 1"]
        warnings = warnings[1:]
    assert len(warnings) == 1 and warnings[0][3][0].startswith(warning), warnings
    lo, hi = (round(x[read["window"]] * 20e6) for x in (tl.cs_assert, tl.cs_deassert))
    assert lo <= warnings[0][0] <= hi, "the warning is on the faulty (second) read"
    convs = [a for a in anns if a[2] == "conversion"]
    if fault == "all_ones":
        assert driver_value(part, read["miso"], sc.cpol) is None      # the driver's -EIO
        assert len(convs) == 1
    else:
        assert len(convs) == 2


@pytest.mark.parametrize("part", ["MCP3001", "MCP3201"])
def test_hi_z_read_as_one_gives_the_value_linux_would_report(tmp_path, part):
    """MCP3001/3201: the driver does not mask the two sampling clocks, so a DOUT that reads 1
    while hi-Z changes /sys/bus/iio/.../in_voltage0-voltage1_raw; the warning gives that value."""
    sc, tl, path = synth(tmp_path, part, 0, codes="300", conversions=1, hiz_one="0")
    anns = decode(path, part, 0)
    (t,) = reads(tl)
    linux = driver_value(part, t["miso"], 0)
    assert linux != 300
    (w,) = [a[3][0] for a in anns if a[2] == "warning"]
    assert w.startswith(f"MISO high while DOUT is hi-Z: Linux mcp320x would report {linux}, not 300")
    assert [CONV.match(a[3][0])[2] for a in anns if a[2] == "conversion"] == ["300"]


def test_a_wrong_part_option_is_visible(tmp_path):
    """An MCP3202 frame decoded as an MCP3208 has no channel bits where the part wants them."""
    sc, tl, path = synth(tmp_path, "MCP3202", 0, codes="1000", conversions=2)
    anns = decode(path, "MCP3208", 0)
    assert [a for a in anns if a[2] == "warning"], "a wrong part cannot decode cleanly"


@pytest.mark.parametrize("part,mode", [("MCP3202", 0), ("MCP3301", 3), ("MCP3551", 0), ("MCP3001", 0)])
def test_analyzer_device_labels_for_the_new_parts(tmp_path, part, mode):
    """``spigap analyze --device mcp3202`` etc.: the labels carry the driver's values."""
    codes = codes_for(part)
    sc, tl, path = synth(tmp_path, part, mode, codes=" ".join(map(str, codes)), conversions=len(codes))
    a = analyze_device(path)
    got = [g for g in labels.label_transfers(a, f"{part.lower()}:vref={VREF}") if not g.startswith("Conversion start")]
    want = []
    for t in reads(tl):
        tx_len = len(gen.iio_command(part, t["ch"], not t["sgl"]))
        want.append(driver_value(part, t["miso"][tx_len:], sc.cpol))
    assert [int(CONV.match(g)[2]) for g in got] == want, got


def test_plain_module_tables_cover_the_driver():
    """The decoder's part table is the driver's spi_device_id table, with its resolutions
    (the MCP355x's 21 is the magnitude of a 22-bit two's-complement field)."""
    assert set(m.PARTS) == set(gen.IIO_PARTS)
    for part, (inputs, bits, frame) in gen.IIO_PARTS.items():
        assert m.PARTS[part] == (inputs, bits, frame)
    assert m.ds_value(0, 0, 0x3FFFFF) == -1 and m.ds_value(0, 1, 0x230000) == 0x230000
    assert m.ds_value(1, 0, 0x1D0000) == 0x1D0000 - (1 << 22) and m.ds_value(1, 1, 0) is None
    assert m.label_transfer(None, [0x1F, 0xFF], {"part": "MCP3001"}) == "IN+/IN\u2212 = 1023 (3.297 V)"
    assert m.label_transfer([], [], {"part": "MCP3551"}) == "Conversion start (CS pulse without clocks)"
    assert m.label_transfer(None, [0xFF] * 3, {"part": "MCP3551"}) == "OVL and OVH both 1"


SHIPPED = {   # capture -> (spi options, part, vref): the recipes' [decoders] stacks
    "mcp3008-mcp3202-iio": ("", "MCP3202", 3.3),
    "mcp3008-mcp3201-iio": (":cpol=1:cpha=1", "MCP3201", 3.3),
    "mcp3008-mcp3551-iio": ("", "MCP3551", 2.5),
}


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_captures_decode_to_the_drivers_values(name):
    from conftest import CAPTURES, capture_channels
    from spigap.cli.decoders import parse_stack
    from spigap.sigrok import pvs

    spi_opts, part, vref = SHIPPED[name]
    sc = scenario.Scenario.from_toml(CAPTURES / f"{name}.toml")
    tl = sc.timeline()
    stack = f"spi:clk=SCLK:mosi=MOSI:miso=MISO:cs=CE0{spi_opts},mcp3008:part={part}:vref={vref}"
    sr = CAPTURES / f"{name}.sr"
    assert sr.with_suffix(".pvs").read_text() == pvs.render(pvs.Setup([parse_stack(stack, capture_channels(sr))]))
    anns = sigrok_annotations(sr, stack, "mcp3008")[0]
    assert [a for a in anns if a[2] == "warning"] == []
    got = [int(CONV.match(a[3][0])[2]) for a in anns if a[2] == "conversion"]
    want = []
    for t in reads(tl):
        tx_len = len(gen.iio_command(part, t["ch"], not t["sgl"]))
        want.append(driver_value(part, t["miso"][tx_len:], sc.cpol))
    assert got == want and len(set(want)) > 4


def test_short_windows_of_the_new_frames():
    """Windows cut short: the same warnings as the MCP3008's, counted in each part's frame."""
    assert m.label_transfer(None, [0x1F], {"part": "MCP3001"}) == "Too few clocks: 5 of 10 bits"
    assert m.label_transfer([0x00], [0xFF], {"part": "MCP3301", "wordsize": 2}) == "Null bit missing"
    assert m.label_transfer([0x03], [0xFF], {"part": "MCP3202"}) == "CS released mid-frame"   # in the command
    assert m.label_transfer([0x0D], [0xFF], {"part": "MCP3002"}) == "Null bit missing"
    assert m.label_transfer(None, [0, 0, 0x12], {"part": "MCP3553", "wordsize": 7}) == "Too few clocks: 21 of 24"
    assert m.label_transfer(None, [0x00, 0x00, 0x01], {"part": "MCP3553"}) == "IN+/IN\u2212 = 1 (0.000002 V)"

