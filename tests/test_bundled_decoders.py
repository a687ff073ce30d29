"""Our decoders over every bundled capture (issue 33 item 1), on the real sigrok-cli.

Each recipe (captures/*.toml) names in its ``[decoders]`` table the stacks our
decoders run with over the capture and the warnings it shows on purpose
(``faults``: text prefix and count; the fault demos). A capture of a chip
carries what the chip answers to what the host sends (the seed captures'
``[payload]``: synth/traffic/*), so any other warning annotation is a false
alarm of a decoder or a wrong payload, and fails here. The decoded values of
the seed captures are checked against the payload's truth.
"""

from __future__ import annotations

import collections
import re
import tomllib

import pytest
from conftest import CAPTURES, run_sigrok, sigrok_annotations

from spigap.synth import scenario

CAPTURE_FILES = sorted(CAPTURES.glob("*.sr"))
CHIPS = ("mcp3008", "ad7606", "mcp2518fd")
# captures without a recipe (written with flags, README): generic traffic, timing decoder only
NO_RECIPE = {"trace-demo.sr": ["spi_gaps:clk=SCLK:cs=CS:mosi=MOSI:miso=MISO"]}


def declared(sr):
    recipe = sr.with_suffix(".toml")
    if not recipe.exists():
        assert sr.name in NO_RECIPE, f"{sr.name} has no recipe"
        return NO_RECIPE[sr.name], []
    table = tomllib.loads(recipe.read_text()).get("decoders")
    assert table, f"{recipe.name} declares no [decoders] table"
    return table["stacks"], [(f["warning"], int(f["count"])) for f in table.get("faults", [])]


@pytest.mark.parametrize("sr", CAPTURE_FILES, ids=lambda p: p.stem)
def test_decoders_show_only_the_declared_faults(sr):
    stacks, faults = declared(sr)
    tops = [s.split(",")[-1].split(":")[0] for s in stacks]
    chip = next((c for c in CHIPS if sr.name.startswith(c)), None)
    if chip:
        assert chip in tops, f"{sr.name}: a {chip} capture is decoded with {chip}"
    if sr.name.startswith("shared-rpi"):
        assert {"mcp3008", "mcp2518fd"} <= set(tops)
    seen: collections.Counter = collections.Counter()
    unexpected = []
    for stack, top in zip(stacks, tops):
        out = run_sigrok(["-i", str(sr), "-P", stack, "-A", f"{top}=warnings"])
        for line in out.splitlines():
            text = re.sub(r"^\w+-\d+: ", "", line)
            match = [w for w, _ in faults if text.startswith(w)]
            if match:
                seen[match[0]] += 1
            else:
                unexpected.append(f"{stack}: {text}")
    assert not unexpected, f"{sr.name}: warnings its recipe does not declare:\n" + "\n".join(unexpected[:20])
    assert dict(seen) == {w: n for w, n in faults}, f"{sr.name}: declared {faults}, seen {dict(seen)}"


SEEDS = {
    "mcp3008-rpi3-k4.4-b10": "spi:clk=SCLK:mosi=MOSI:miso=MISO:cs=CE0,mcp3008",
    "mcp3008-rpi3-mcp320x-iio": "spi:clk=SCLK:mosi=MOSI:miso=MISO:cs=CE0,mcp3008",
    "ad7606-pi5-k6.12.25": "ad7606:sclk=SCLK:cs=CS:douta=DOUTA:cpol=0:cpha=0",
    "mcp2518fd-imx8mp-k5.18-B-rx": "spi:clk=SCK:mosi=SDI:miso=SDO:cs=nCS,mcp2518fd",
    "mcp2518fd-imx8mp-k5.18-tx": "spi:clk=SCK:mosi=SDI:miso=SDO:cs=nCS,mcp2518fd",
}


@pytest.mark.parametrize("name", SEEDS)
def test_seed_captures_decode_to_their_payload(name):
    """The seed captures decode to what their [payload] put there (its truth)."""
    tl = scenario.Scenario.from_toml(CAPTURES / f"{name}.toml").timeline()
    truth = tl.device_truth
    stack = SEEDS[name]
    top = stack.split(",")[-1].split(":")[0]
    anns, _ = sigrok_annotations(CAPTURES / f"{name}.sr", stack, top)
    if top == "mcp3008":
        got = [a[3][0] for a in anns if a[2] == "conversion"]
        assert got == [f"CH{t['ch']} = {t['code']} ({t['volts']:.3f} V)" for t in truth]
        assert [a[3][0] for a in anns if a[2] == "repeat"] == ["LSB-first repeat B1..B6 matches"] * len(truth)
    elif top == "ad7606":
        frames = [dict((int(k), int(v)) for k, v in re.findall(r"V(\d+)=(-?\d+)", a[3][1]))
                  for a in anns if a[2] == "frame"]
        assert frames == [t["values"] for t in truth]
    else:
        rows = [a[3][0] for a in anns if a[2] == "transaction"]
        assert len(rows) == len(truth) and all(r.endswith("crc ok") for r in rows)
        want = [t["instruction"] for t in truth]
        assert [r.split()[0] for r in rows] == want
        frames = [f for t in truth for f in t["frames"]]
        shown = [a[3][0] for a in anns if a[2] == "frame"]
        assert len(shown) == len(frames) and all(" ID 0x077 DLC 8 " in s for s in shown)
