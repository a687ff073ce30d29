"""The spi_gaps sigrok decoder on a shared bus (its optional Other CS# 1..3 channels), run by
the real sigrok-cli, against the analyzer's bus figures (core/bus.py, itself checked
against the synthesizer's truth in tests/test_shared_bus.py); and the PulseView setup
'spigap decoders pvs --gaps' writes for a shared bus (PulseView loads the shipped one:
tests/test_pulseview.py, test_shipped_pvs_loads_in_pulseview).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from conftest import CAPTURES, run_sigrok

from spigap.cli import main
from spigap.core import run
from spigap.core.config import INFERABLE, SpiConfig
from spigap.io import open_capture
from spigap.sigrok import pvs

CASES = {"shared-rpi-mcp3008-mcp2518fd.sr": ("SCLK", "", ["CE0", "CE1"]),
         "shared-three-faults.sr": ("SCK", ":cpol=1:cpha=1", ["CS0", "CS1", "CS2"])}

def _sa(path):
    with open_capture(path) as r:
        return run.analyze(r, SpiConfig(infer=INFERABLE))


def _ann(out: str, text: str) -> list[int]:
    return [int(m) for m in re.findall(rf"{text}: [^(]*\((\d+) samples\)", out)]


def _ho(out: str) -> list[tuple[int, int]]:
    """(Other CS# line, samples) of each handover annotation."""
    return [(int(a), int(b)) for a, b in re.findall(r"Handover from Other CS# (\d): [^(]*\((\d+) samples\)", out)]


@pytest.mark.parametrize("name", [*sorted(CASES), "mixed"])
def test_every_other_line_gives_the_analyzers_handovers(name, mixed_bus):
    """Each device's spi_gaps with every other device's CS line mapped (Other CS# 1.., in device
    order, each with its polarity where it differs: what 'spigap decoders pvs --gaps' writes):
    every handover into the device, from the device the analyzer names, to the sample, and as
    many 'two CS asserted' warnings as the analyzer's overlaps the device is in. "mixed": three
    devices with their own CS polarity, mode, word size and bit order (conftest.MIXED_BUS)."""
    cap = mixed_bus[0] if name == "mixed" else CAPTURES / name
    sa = _sa(cap)
    names = list(sa.devices)
    clk = sa.devices[names[0]].cfg.clk
    for k, me in enumerate(names):
        cfg = sa.devices[me].cfg
        opts = f":cpol={cfg.cpol}:cpha={cfg.cpha}:wordsize={cfg.wordsize}"
        if not cfg.cs_active_low:
            opts += ":cs_polarity=active-high"
        others = [j for j in range(len(names)) if j != k]
        for i, j in enumerate(others, 1):
            opts += f":cs_other{i}={names[j]}"
            if sa.devices[names[j]].cfg.cs_active_low != cfg.cs_active_low:
                opts += f":cs_other{i}_polarity=" + ("active-low" if sa.devices[names[j]].cfg.cs_active_low
                                                     else "active-high")
        out = run_sigrok(["-i", str(cap), "-P", f"spi_gaps:clk={clk}:cs={me}{opts}",
                          "-A", "spi_gaps=handover:warning"])
        cols = sa.devices[me].bus.columns
        m = cols["handover_from"] >= 0
        want = list(zip(cols["handover_from"][m].tolist(), cols["handover"][m].tolist()))
        got = [(others[line - 1], n) for line, n in _ho(out)]
        assert got == want, me
        assert len(got) > 5, me
        both = [o for o in sa.bus.overlaps if k in o.devices]
        assert out.count("Two CS lines asserted at once") == len(both), me
    if name == "shared-three-faults.sr":
        assert sa.bus.n_overlaps == 2


@pytest.mark.parametrize("name", sorted(CASES))
def test_one_other_line_gives_the_pairs_handovers(name):
    """One Other CS# line mapped: the handovers between the two, as if the bus held only them."""
    cap = CAPTURES / name
    clk, opts, names = CASES[name]
    sa = _sa(cap)
    tr = sa.bus
    for k, me in enumerate(names):
        for j, other in enumerate(names):
            if j == k:
                continue
            out = run_sigrok(["-i", str(cap), "-P", f"spi_gaps:clk={clk}:cs={me}:cs_other1={other}{opts}",
                              "-A", "spi_gaps=handover:warning"])
            if len(names) == 2:
                cols = sa.devices[me].bus.columns
                want = cols["handover"][cols["handover_from"] == j].tolist()
            else:
                want = _pair_handovers(sa.devices[me], sa.devices[other])
            assert _ann(out, "Handover from Other CS# 1") == want, (me, other)
            both = [o for o in tr.overlaps if {k, j} <= set(o.devices) or
                    set(o.devices) == {k, j}]
            assert out.count("Two CS lines asserted at once") == len(both), (me, other)


def _pair_handovers(a, b) -> list[int]:
    """Each assert of ``a`` whose last deassert among a's and b's windows was b's: the gap."""
    ends = np.concatenate([a.end, b.end])
    who = np.concatenate([np.zeros(a.n, bool), np.ones(b.n, bool)])
    order = np.argsort(ends, kind="stable")
    ends, who = ends[order], who[order]
    out = []
    for s in a.start:
        i = int(np.searchsorted(ends, s, side="right")) - 1
        if i >= 0 and who[i] and not ((b.start <= s) & (b.end > s)).any():
            out.append(int(s - ends[i]))
    return out


def test_without_the_other_line_nothing_changes():
    """The optional channel unmapped: no handover row (the rest is the decoder's golden output,
    tests/test_decoder_spi_gaps.py)."""
    out = run_sigrok(["-i", str(CAPTURES / "shared-rpi-mcp3008-mcp2518fd.sr"), "-P", "spi_gaps:clk=SCLK:cs=CE0",
                      "-A", "spi_gaps=handover"])
    assert out.strip() == ""


def test_pvs_for_a_shared_bus(tmp_path, capsys):
    out = tmp_path / "s.pvs"
    assert main(["decoders", "pvs", str(CAPTURES / "shared-rpi-mcp3008-mcp2518fd.sr"), "--gaps", "-o", str(out),
                 "--scale", "100ns", "--start", "1.94ms"]) == 0
    text = capsys.readouterr().out
    assert "note: PulseView 0.4.2 starts all 4 decode signals" in text
    setup = pvs.read(out.read_text())
    got = [(s.name, [d.id for d in s.decoders], {c.name: c.assigned for c in s.channels}) for s in setup.decode_signals]
    assert [g[0] for g in got] == ["SPI CE0", "SPI gaps CE0", "SPI CE1", "SPI gaps CE1"]
    assert got[0][2]["CS#"] == "CE0" and got[2][2]["CS#"] == "CE1"
    assert got[1][2]["CS#"] == "CE0" and got[1][2]["Other CS# 1"] == "CE1" and got[1][2]["Other CS# 2"] is None
    assert got[3][2]["CS#"] == "CE1" and got[3][2]["Other CS# 1"] == "CE0"
    # the shipped setup is this one (make captures writes it; PulseView loads it in test_pulseview.py)
    shipped = pvs.read((CAPTURES / "shared-rpi-mcp3008-mcp2518fd.pvs").read_text())
    assert shipped == setup
    assert np.all([d.id in ("spi", "spi_gaps") for s in setup.decode_signals for d in s.decoders])
