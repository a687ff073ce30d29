"""A shared bus and its kernel trace (analyzer/spigap/trace/pair.py, load_bus): each traced device on its
CS line, and who waited for whom.

Oracle: the synthesizer's truth (analyzer/spigap/synth/bus.py): which message waited behind
which, and how long another device's message held the controller while it waited
(``queued_s``), from the controller queue's model; the mapping spi0.N <-> CS line; the
gap kinds (the trace's message boundaries settle the grouping).
"""

from __future__ import annotations

import json

import pytest
from conftest import CAPTURES

from spigap.cli import main
from spigap.core import run
from spigap.core.analysis import KIND_NAMES
from spigap.core.config import INFERABLE, SpiConfig
from spigap.errors import InputError, UsageError
from spigap.io import open_capture
from spigap.synth import Bus, TraceOptions, write
from spigap.trace import pair as trace_shared

RECIPE = CAPTURES / "shared-rpi-mcp3008-mcp2518fd.toml"


def _write(tmp_path, text: str, **kw):
    sh = Bus.from_toml(text=text)
    cap, truth, trace = tmp_path / "b.sr", tmp_path / "b.json", tmp_path / "b.txt"
    write(sh, cap, truth_path=truth, ftrace_path=trace, trace=TraceOptions(**kw))
    return cap, json.loads(truth.read_text()), trace


def _load(cap, trace, **kw):
    with open_capture(cap) as r:
        sa = run.analyze(r, SpiConfig(infer=INFERABLE))
    return sa, trace_shared.load_bus(trace, sa, **kw)


def _check(sa, st, truth, tol):
    names = list(truth["devices"])
    assert {n: d.spi_device for n, d in st.devices.items()} == {n: truth["devices"][n]["spi_device"] for n in names}
    m = st.messages
    want = {(x["device"], x["index"]): x for x in truth["messages"]}
    assert len(m.cs) == len(want)
    for i in range(len(m.cs)):
        key = (names[int(m.cs[i])], int(m.index[i]))
        w = want[key]
        assert abs(m.queued[i] - w["queued_s"]) <= tol, (key, m.queued[i], w["queued_s"])
        assert abs(m.submit[i] - w["submit_s"]) <= 1e-6          # the fit's zero point: within its bracket
        if w["queued_s"] > tol:
            assert sorted((names[j], k) for j, k in m.behind[i]) == sorted(tuple(b) for b in w["behind"])
        a = sa.devices[key[0]]
        assert abs(a.start[int(m.first_window[i])] * a.tick_s - w["first_assert_s"]) <= a.tick_s
    # the trace's message boundaries settle every device's grouping: the truth's gap kinds
    for name in names:
        a = sa.devices[name]
        kinds = [KIND_NAMES[int(k)] for k in a.gap_kind]
        assert kinds[1:] == truth["devices"][name]["gap_before_kind"][1:]


def test_who_waited_for_whom_equals_the_truth(tmp_path):
    cap, truth, trace = _write(tmp_path, RECIPE.read_text(), ns=True)
    sa, st = _load(cap, trace)
    _check(sa, st, truth, 3e-9)
    assert not st.notes
    q = st.queueing(sa)
    for name in ("CE0", "CE1"):
        mine = [x for x in truth["messages"] if x["device"] == name]
        assert q[name]["messages"] == len(mine)
        assert q[name]["queued_behind_another"] == sum(1 for x in mine if x["queued_s"] > 0)


def test_mapping_is_by_the_traffic_not_the_names(tmp_path):
    """CE0 is spi0.1 and CE1 spi0.0 here; a 50 ppm clock and µs timestamps."""
    text = RECIPE.read_text().replace('spi_device = "spi0.0"', 'spi_device = "spi0.X"')
    text = text.replace('spi_device = "spi0.1"', 'spi_device = "spi0.0"').replace('"spi0.X"', '"spi0.1"')
    cap, truth, trace = _write(tmp_path, text, drift_ppm=50.0)
    sa, st = _load(cap, trace)
    # µs timestamps: each event rounded to 1 µs, queued_s a difference of two or three of them
    _check(sa, st, truth, 2.0e-6)


def test_cli_json_and_text(tmp_path, capsys):
    cap, truth, trace = _write(tmp_path, RECIPE.read_text(), ns=True)
    assert main(["trace", str(cap), "--ftrace", str(trace), "--format", "json", "--transfers"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["mapping"] == {"CE0": "spi0.0", "CE1": "spi0.1"}
    assert len(d["messages"]) == len(truth["messages"])
    for name in ("CE0", "CE1"):
        dev = d["devices"][name]
        assert dev["alignment"]["matched"] == truth["devices"][name]["transfers"]
        assert dev["queueing"]["messages"] == sum(1 for x in truth["messages"] if x["device"] == name)
        assert any(p["gap"] == "context_switch" for p in dev["phases"])
    assert main(["trace", str(cap), "--ftrace", str(trace)]) == 0
    out = capsys.readouterr().out
    assert "who waited for whom" in out and "CE1 ↔ spi0.1" in out


def test_spi_device_pins_the_mapping(tmp_path, capsys):
    cap, truth, trace = _write(tmp_path, RECIPE.read_text(), ns=True)
    sa, st = _load(cap, trace, spi_device="CE0=spi0.0,CE1=spi0.1")
    assert {n: d.spi_device for n, d in st.devices.items()} == {"CE0": "spi0.0", "CE1": "spi0.1"}
    with pytest.raises(UsageError, match="not a CS line"):
        _load(cap, trace, spi_device="CE7=spi0.0")
    # wrong pins: no line matches its device, one line saying why for each
    with pytest.raises(InputError, match="no traced SPI device matches"):
        _load(cap, trace, spi_device="CE0=spi0.1,CE1=spi0.0")
    # one wrong pin: that line is left out, and a note says so
    sa, st = _load(cap, trace, spi_device="CE0=spi0.1")
    assert list(st.devices) == ["CE1"] and any(n.startswith("CE0: no traced device") for n in st.notes)
    assert main(["trace", str(cap), "--ftrace", str(trace), "--perfetto", str(tmp_path / "p.json")]) == 2
    assert "takes one device" in capsys.readouterr().err
