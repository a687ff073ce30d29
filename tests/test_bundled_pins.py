"""The bundled captures at the pins, through the commands users run (issues 31 and 33).

Every capture of a chip (captures/*.toml whose traffic is an MCP3008, AD7606 or
MCP2518FD; the scope acquisitions' four ISF files as one) is checked with
``spigap check --device <its chip>``: no pin limit (the device's din/dout/cs_dout
limits, the controller's MISO window) FAILs but those its recipe's ``[pins]`` table
declares on purpose (``faults``: check ids; ``options``: the walk-through's own).
The synthesizer drives the data lines as the hardware does (synth/timeline.py), so
anything else is a false alarm of our own making.

On every logic capture ``spigap pins`` measures the data lines' delays the synthesizer
used (its truth, timeline.Launch): MISO's clock-to-output (tDO), CS to the first MISO
bit (t18) and the controller's clock-to-output, each within one sample, both ways.
"""

from __future__ import annotations

import json
import tomllib

import numpy as np
import pytest
from conftest import CAPTURES, spigap_main

from spigap.synth import load
from spigap.synth.analog_bus import is_analog
from spigap.timing.checks.pins import FIGURE_OF, SHAPE_OF

CHIPS = ("mcp3008", "ad7606", "mcp2518fd")
PIN_METRICS = set(FIGURE_OF) | set(SHAPE_OF)


def _chip(traffic) -> str | None:
    name = str(traffic or "").split("-")[0]
    return name if name in CHIPS else None


def _cases():
    """(recipe, capture files, options, the recipe's [pins] table, which device of the recipe) per
    device of a chip: a shared bus's devices one at a time (--cs: spigap measures the pins of one
    device's bus)."""
    out = []
    for recipe in sorted(CAPTURES.glob("*.toml")):
        tables = tomllib.loads(recipe.read_text())
        pins = tables.get("pins", {})
        if is_analog(recipe):
            files = [str(CAPTURES / f"{recipe.stem}CH{i}.isf") for i in range(1, 5)]
        else:
            files = [str(recipe.with_suffix(".sr"))]
        opts = [str(o) for o in pins.get("options", [])]
        if isinstance(tables.get("device"), list):          # [[device]] tables: a bus of devices
            for k, d in enumerate(tables["device"]):
                chip = _chip(d.get("traffic"))
                if chip:
                    out.append(pytest.param(recipe, files, ["--cs", d["cs"], "--device", chip, *opts], pins, k,
                                            id=f"{recipe.stem}[{d['cs']}]"))
            continue
        table = tables.get("device") or tables.get("payload") or {}
        chip = _chip(table.get("name"))
        if chip:
            out.append(pytest.param(recipe, files, ["--device", chip, *opts], pins, 0, id=recipe.stem))
    return out


CASES = _cases()


def spigap(*args):
    # in this process (200 cases; the console script itself: tests/test_installed.py)
    return spigap_main(*args)


def test_every_chip_capture_is_checked():
    names = {c.id for c in CASES}
    assert {"mcp3008-rpi3-k4.4-b10", "ad7606-pi5-k6.6.31", "mcp2518fd-imx8mp-k5.18-A-rx",
            "shared-rpi-mcp3008-mcp2518fd[CE0]", "shared-rpi-mcp3008-mcp2518fd[CE1]",
            "mcp2518fd-pi5-20mhz-scope-before"} <= names
    chips = {p.stem.split("-")[0] for p in CAPTURES.glob("*.sr")} & set(CHIPS)
    assert chips == set(CHIPS)


@pytest.mark.parametrize("recipe,files,args,pins,device", CASES)
def test_check_fails_no_pin_limit_but_the_declared_ones(recipe, files, args, pins, device):
    p = spigap("check", *files, *args, "--format", "json")
    assert p.returncode in (0, 1), p.stderr
    failed = set()
    checked = 0
    for result in json.loads(p.stdout)["results"]:
        for item in result["checks"]:
            if item["metric"] in PIN_METRICS or item["group"] == "pins":
                checked += item["verdict"] != "SKIP"
                if item["verdict"] == "FAIL":
                    failed.add(item["id"])
    assert checked >= 4, f"{recipe.name}: {checked} pin limits judged"
    assert failed == set(pins.get("faults", [])), f"{recipe.name}: pin limits that FAIL: {sorted(failed)}"


def _truth(recipe, device: int):
    """The data lines' delays in the device's windows (s, one per window), and whether its MISO
    ever changes."""
    cap = load(recipe).capture()
    tl = cap.timeline
    n = tl.windows.n
    mine = np.asarray(cap.plan.device) == device if hasattr(cap, "plan") else np.ones(n, bool)
    bits = tl.miso_bits[np.repeat(mine[tl.windows.word_window], len(tl.miso_bits) // len(tl.windows.word_window))]
    truth = {k: tl.launch.per_window(k, n)[mine] for k in ("mosi_delay", "miso_delay", "miso_enable")}
    return truth, bool(len(bits)) and bool((bits != bits[0]).any())


LOGIC = [c for c in CASES if c.values[1][0].endswith(".sr")]


@pytest.mark.parametrize("recipe,files,args,pins,device", LOGIC)
def test_pins_measures_the_synthesizers_delays_within_one_sample(recipe, files, args, pins, device):
    p = spigap("pins", *files, *args, "--format", "json")
    assert p.returncode == 0, p.stderr
    res = json.loads(p.stdout)["captures"][0]
    tick = res["resolution_s"]
    assert res["measured"] == "samples"
    figures = res["figures"]
    truth, miso_changes = _truth(recipe, device)
    compared = []
    for fig, key in (("miso_tdo", "miso_delay"), ("miso_toh", "miso_delay"), ("miso_cs_valid", "miso_enable"),
                     ("mosi_tco", "mosi_delay")):
        f = figures.get(fig)
        if not f or not f["n"]:
            continue
        lo, hi = float(truth[key].min()), float(truth[key].max())
        # every edge within one sample of the truth: the extremes, both ways
        assert abs(f["min"] - lo) <= tick * 1.001 and abs(f["max"] - hi) <= tick * 1.001, \
            f"{recipe.stem} {fig}: measured {f['min']:.3g} .. {f['max']:.3g} s, truth {lo:.3g} .. {hi:.3g} s"
        compared.append(fig)
    if miso_changes:
        assert "miso_tdo" in compared, f"{recipe.stem}: no MISO clock-to-output measured"
        if res["mode"] in (0, 2):
            assert "miso_cs_valid" in compared, f"{recipe.stem}: no CS to the first MISO bit measured"
