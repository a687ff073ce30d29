"""The second held-out corpus (issue 32): its manifest (tests/data/second_corpus.toml), the truth
the judge gets from it and the eval end to end on bundled captures with a manifest of their own.
The corpora themselves are not in the repository: ``SPIGAP_SECOND_CORPUS=DIR`` and
``SPIGAP_THIRD_CORPUS=DIR`` run the eval on them (skipped without); docs/inference.md, "A second
corpus" and "A third corpus"; the third's manifest (tests/data/third_corpus.toml) is checked here
too."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path

import pytest

import second_corpus_eval as ev
import sigrok_dumps_eval as sde
from spigap.cli import main as spigap_main

ROOT = Path(__file__).resolve().parent.parent
MCP3008 = ROOT / "captures" / "mcp3008-rpi3-k4.4-b10.sr"     # synthesized: SCLK, MOSI, MISO, CE0, mode 0


@pytest.mark.parametrize("manifest", [ev.MANIFEST, ev.THIRD], ids=["second", "third"])
def test_manifest_is_complete(manifest):
    caps = ev.load(manifest)
    files = [c["file"] for c in caps]
    assert len(files) == len(set(files))
    for c in caps:
        assert re.fullmatch(r"[0-9a-f]{64}", c["sha256"]), c["file"]
        assert re.fullmatch(r"[0-9a-f]{40}", c["commit"]), c["file"]
        assert "/" in c["repo"] and c["truth"].strip()
        if c["kind"] == "spi":
            named = [c[r] for r in ev.ROLES if c.get(r)]
            assert len(named) == len(set(named)), f"{c['file']}: two roles on one channel"
    # the corpus is held out: no capture of sigrok-dumps' spi/ folders by name
    assert not any(c["repo"].endswith("sigrok-dumps") for c in caps)
    for c in caps:
        if c.get("pvs_sha256"):
            assert re.fullmatch(r"[0-9a-f]{64}", c["pvs_sha256"]), c["file"]


def test_third_corpus_is_held_out_from_the_second():
    """The third corpus measures the code once on captures neither corpus's users saw: no file of
    it is one of the second corpus's (by sha256, or by repository and path), and it has SPI
    captures to judge and lookalikes to refuse."""
    second, third = ev.load(ev.MANIFEST), ev.load(ev.THIRD)
    assert not {c["sha256"] for c in second} & {c["sha256"] for c in third}
    assert not {(c["repo"], c["path"]) for c in second} & {(c["repo"], c["path"]) for c in third}
    assert {c["kind"] for c in third} == {"spi", "not"}
    assert len({ev.truth(c)["unit"] for c in third}) >= 8


def _manifest(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "m.toml"
    p.write_text(body)
    return p


ENTRY = """[[capture]]
file = "a.sr"
repo = "o/r"
commit = "{c}"
path = "a.sr"
sha256 = "{s}"
device = "d"
kind = "spi"
clk = "SCLK"
truth = "t"
""".format(c="0" * 40, s="0" * 64)


@pytest.mark.parametrize("extra, what", [
    ("mode = 0\nedge = \"rising\"\n", "mode or edge"),
    ("edge = \"both\"\n", "edge must be"),
])
def test_load_refuses_a_bad_entry(tmp_path, extra, what):
    with pytest.raises(ValueError, match=what):
        ev.load(_manifest(tmp_path, ENTRY + extra))
    with pytest.raises(ValueError, match="missing device"):
        ev.load(_manifest(tmp_path, ENTRY.replace('device = "d"\n', "")))
    with pytest.raises(ValueError, match="needs its clk"):
        ev.load(_manifest(tmp_path, ENTRY.replace('clk = "SCLK"\n', "")))


def _answer(clk="SCLK", cs="CE0", mosi="MOSI", miso="MISO", mode=0, clk_conf=0.95) -> dict:
    src = {k: {"confidence": 0.95, "from": "inferred", "basis": "b"} for k in ("cs", "mosi", "miso", "mode")}
    src["clk"] = {"confidence": clk_conf, "from": "inferred", "basis": "b"}
    return {"code": 0, "error": "", "json": {"settings": {"clk": clk, "cs": cs, "mosi": mosi, "miso": miso, "mode": mode},
                                             "sources": src}}


def test_truth_feeds_the_first_corpus_judge():
    cap = {"file": "x.sr", "repo": "o/r", "device": "d", "kind": "spi", "clk": "SCLK", "cs": "CE0",
           "mosi": "MOSI", "miso": "MISO", "edge": "rising"}
    t = ev.truth(cap)
    assert t["roles"] == {"clk": "SCLK", "cs": "CE0", "mosi": "MOSI", "miso": "MISO"}
    assert sde.judge(t, _answer()) == (True, "right")
    assert sde.judge(t, _answer(mode=3))[0]                       # samples on the rising edge too
    assert not sde.judge(t, _answer(mode=1))[0]
    # MOSI and MISO swapped: the data lines are found (the judge), each role is wrong (the tables)
    swapped = _answer(mosi="MISO", miso="MOSI")
    assert sde.judge(t, swapped)[0]
    assert {i["setting"]: i["right"] for i in sde.items(t, swapped)} == {
        "bus": True, "cs": True, "mosi": False, "miso": False, "mode": True}
    assert sde.judge(t, _answer(cs=None))[1] == "cs None (is CE0)"
    # a latch or strobe CS: framing without CS is right too
    assert sde.judge(ev.truth({**cap, "cs_optional": True}), _answer(cs=None))[0]
    # renamed: the truth follows the channels to their numbers
    t2 = ev.truth(cap, {"SCLK": "0", "MOSI": "1", "MISO": "2", "CE0": "3"})
    assert t2["roles"] == {"clk": "0", "cs": "3", "mosi": "1", "miso": "2"}
    assert sde.judge(t2, _answer("0", "3", "1", "2"))[0]
    # the items the tables count: a wrong clock is one wrong bus answer and nothing else
    assert [(i["setting"], i["right"]) for i in sde.items(t, _answer(clk="MOSI"))] == [("bus", False)]


def test_not_spi_is_right_when_refused_or_unsure():
    t = ev.truth({"file": "u.sr", "repo": "o/r", "device": "d", "kind": "not", "lookalike": ["I2C"]})
    refused = {"code": 2, "error": "spigap: error: u.sr: no SPI bus found: looks like I2C (...)"}
    assert sde.judge(t, refused)[0]
    assert not sde.judge(t, {"code": 2, "error": "spigap: error: u.sr: no SPI bus found: looks like UART"})[0]
    assert sde.judge(t, _answer(clk_conf=0.5))[0]
    assert not sde.judge(t, _answer(clk_conf=0.95))[0]


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_eval_end_to_end(tmp_path, capsys):
    """A bundled synthesized capture, as a .sr and as a VCD (renamed through a .sr written by
    spigap convert), judged named and renamed; a missing file and a changed one are skipped."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    shutil.copy(MCP3008, corpus / "m.sr")
    assert spigap_main(["convert", str(MCP3008), "-o", str(corpus / "m.vcd")]) == 0
    (corpus / "changed.sr").write_bytes(b"not the file")
    body = ""
    for name, sha in (("m.sr", _sha(corpus / "m.sr")), ("m.vcd", _sha(corpus / "m.vcd")),
                      ("changed.sr", "1" * 64), ("absent.sr", "2" * 64)):
        body += f"""[[capture]]
file = "{name}"
repo = "spigap/captures"
commit = "{'0' * 40}"
path = "{name}"
sha256 = "{sha}"
device = "MCP3008 (synthesized)"
kind = "spi"
clk = "SCLK"
cs = "CE0"
mosi = "MOSI"
miso = "MISO"
mode = 0
truth = "its recipe"

"""
    manifest = _manifest(tmp_path, body)
    results, skipped = ev.run(corpus, ev.load(manifest))
    assert sorted(skipped) == ["absent.sr: absent (fetch absent.sr of spigap/captures at 0000000000)",
                               "changed.sr: sha256 differs from the manifest's"]
    assert [(r["file"], r["renamed"]) for r in results] == [("m.sr", False), ("m.sr", True),
                                                            ("m.vcd", False), ("m.vcd", True)]
    assert all(r["right"] for r in results), [(r["file"], r["why"]) for r in results]
    renamed = [r for r in results if r["renamed"]]
    assert all(r["settings"]["clk"] == r["roles"]["clk"] and r["roles"]["clk"].isdigit() for r in renamed)
    # the renamed runs' answers are inferred and calibrated: they reach the band table
    assert {i["setting"] for r in renamed for i in r["items"]} >= {"bus", "cs", "mosi", "miso", "mode"}
    assert ev.main([str(corpus), "--manifest", str(manifest)]) == 0
    out = capsys.readouterr().out
    assert "4 runs of 2 captures, 1 devices (1 SPI); 4 right" in out
    assert "| setting | stated | answers | mean stated | right | 95 % interval | within ±10 points |" in out


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("SPIGAP_SECOND_CORPUS"), reason="SPIGAP_SECOND_CORPUS (the fetched corpus) not set")
def test_the_corpus_itself(capsys):
    root = Path(os.environ["SPIGAP_SECOND_CORPUS"])
    caps = ev.load()
    present = [c for c in caps if (root / c["file"]).is_file()]
    assert present, f"no capture of the manifest under {root}"
    for c in present:
        assert _sha(root / c["file"]) == c["sha256"], c["file"]
    assert ev.main([str(root)]) == 0
    assert "| setting | confidence | answers | right | share right |" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("SPIGAP_THIRD_CORPUS"), reason="SPIGAP_THIRD_CORPUS (the fetched corpus) not set")
def test_the_third_corpus_itself(capsys):
    root = Path(os.environ["SPIGAP_THIRD_CORPUS"])
    caps = ev.load(ev.THIRD)
    present = [c for c in caps if (root / c["file"]).is_file()]
    assert present, f"no capture of the manifest under {root}"
    for c in present:
        assert _sha(root / c["file"]) == c["sha256"], c["file"]
    assert ev.main([str(root), "--manifest", str(ev.THIRD)]) == 0
    assert "| setting | confidence | answers | right | share right |" in capsys.readouterr().out


def test_cs_polarity_note_when_the_clock_runs_outside_the_one_window(tmp_path, capsys):
    """The FPGA board's capture (podonoghue/spi.sr): CS# asserted once for half the capture, the
    clock running in and after that window. Its level at the clock's edges does not tell the
    polarity (a default, 0.5); the note said "no SCLK edge in the prefix" of a clock with 377."""
    lines = ["$timescale 1 us $end", "$scope module top $end", "$var wire 1 c SCK $end",
             "$var wire 1 d MOSI $end", "$var wire 1 s CS# $end", "$upscope $end", "$enddefinitions $end",
             "#0", "0c", "0d", "1s", "#10", "0s"]
    t, events = 20, []
    for burst in range(12):                          # 12 bytes, the window closing after the 9th
        for bit in range(8):
            events += [(t, f"{(burst + bit) & 1}d"), (t + 2, "1c"), (t + 4, "0c")]
            t += 4
        t += 40
        if burst == 8:
            events.append((t - 20, "1s"))
    events.append((t + 10, "0d"))
    for when, what in events:
        lines += [f"#{when}", what]
    path = tmp_path / "outside.vcd"
    path.write_text("\n".join(lines) + "\n")
    assert spigap_main(["detect", str(path), "--format", "json"]) == 0
    src = __import__("json").loads(capsys.readouterr().out)["sources"]["cs_polarity"]
    assert src["from"] == "default" and src["confidence"] == 0.5
    assert "no SCLK edge" not in src["note"] and "CS#'s level at SCLK's 192 edges" in src["note"], src["note"]
