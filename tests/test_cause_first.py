"""Issue 33, items 4-6: the cause said first, batch's status, confidences in words.

* The warning that explains the most comes first, by one rule (spigap/findings.py): a
  data line named as CS is said first ("does not bracket the SCLK bursts"), before
  anything about sample rates, in analyze's text and JSON and as check's CHECK line.
* ``batch`` marks a capture whose warnings are more than notes ``warn`` and shows the
  first one; an implausible sample rate is a warning in every command that uses it.
* Every confidence carries words a user acts on (spigap/confidence.py), the same in
  text, JSON, detect, check, report and batch; the AD7606 capture's one-transfer-per-call
  grouping reads as two readings, not as "probably wrong".

The commands run as a user runs them, in a child process: ``SPIGAP_EXE`` (e.g. an older
release's ``spigap``) replaces ``python -m spigap``, so these tests can be run against
another version (they fail on 6f10015).
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shlex
import subprocess
import zipfile

import pytest

from conftest import CAPTURES, spigap_main

# SPIGAP_EXE="spigap ..." runs each command as that process; by default the command line's main()
# runs in the test's process (conftest.spigap_main: the same output without an interpreter per run)
SPIGAP = shlex.split(os.environ.get("SPIGAP_EXE", ""))
MCP = CAPTURES / "mcp3008-rpi3-k4.4-b10.sr"
AD7606 = CAPTURES / "ad7606-pi5-k6.6.31.sr"
WORDS = ("given", "settled by the trace", "settled by the signals", "likely", "ambiguous: two readings",
         "ambiguous: several readings", "uncertain", "unknown")


def run(*args, code=0, timeout=300):
    if SPIGAP:
        p = subprocess.run([*SPIGAP, *map(str, args)], capture_output=True, text=True, timeout=timeout)
    else:
        p = spigap_main(*args, cwd=pathlib.Path.cwd())
    assert code is None or p.returncode == code, (p.returncode, p.stderr[-2000:])
    return p.stdout


def check_lines(text: str) -> list[str]:
    return [ln[len("CHECK"):].strip() for ln in text.splitlines() if ln.startswith("CHECK")]


@pytest.fixture(scope="module")
def one_hz(tmp_path_factory):
    """The demo capture with a bogus sample rate in its metadata (1 Hz instead of 50 MHz)."""
    out = tmp_path_factory.mktemp("rate") / "bogus-1hz.sr"
    with zipfile.ZipFile(MCP) as zi, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zo:
        for name in zi.namelist():
            data = zi.read(name)
            if name == "metadata":
                data = re.sub(rb"samplerate=[^\n]*", b"samplerate=1 Hz", data)
            zo.writestr(name, data)
    return out


# ------------------------------------------------------------------ item 4: the cause first
def test_a_data_line_named_as_cs_is_said_first(tmp_path):
    text = run("analyze", MCP, "--cs", "MOSI")
    checks = check_lines(text)
    # README: a setting the signals contradict (SCLK running while CS is "inactive") is called
    # out first, on a CHECK line above the table, naming what fits
    assert checks and "CS MOSI does not bracket the SCLK bursts" in checks[0], checks
    assert re.search(r"\b\d{3,} SCLK edges while CS was inactive", checks[0]), checks[0]
    assert "CE0" in checks[0] and "--cs" in checks[0]
    # nothing about the sample rate before it (the last-bit rule cannot be judged on such windows)
    assert not any("sample faster" in c for c in checks), checks
    assert text.index("CHECK") < text.index("\ngap ")
    d = json.loads(run("analyze", MCP, "--cs", "MOSI", "--format", "json"))
    w = d["warnings"]
    assert "does not bracket the SCLK bursts" in w[0], w
    # the symptoms it explains follow it
    sym = next(i for i, x in enumerate(w) if re.match(r"\d+ SCLK edge\(s\) while CS was inactive", x))
    part = next(i for i, x in enumerate(w) if "partial transfer(s)" in x)
    assert 0 < sym < part


def test_check_says_the_cause_before_the_verdicts():
    text = run("check", MCP, "--cs", "MOSI", "--profile", "rpi3-k4.4-vanilla", code=1)
    checks = check_lines(text)
    assert checks and "does not bracket the SCLK bursts" in checks[0], text[:2000]
    assert text.index("CHECK") < text.index("\ncheck  ")        # above the table of verdicts


def test_the_right_cs_raises_no_such_check():
    text = run("analyze", MCP)
    assert "does not bracket" not in text
    assert not check_lines(text)


# ------------------------------------------------------------------ item 5: batch status, the rate
def test_batch_marks_an_implausible_rate_warn_with_the_warning(one_hz, tmp_path):
    out = run("batch", one_hz, MCP, "-j", "1", "-q")            # warn is no failure: exit 0
    rows = {ln.split()[0]: ln.split()[1] for ln in out.splitlines() if ln.endswith(".sr") or ".sr " in ln}
    assert any(k.endswith("bogus-1hz.sr") and v == "warn" for k, v in rows.items()), out
    assert any(k.endswith("b10.sr") and v == "ok" for k, v in rows.items()), out
    first = next(ln for ln in out.splitlines() if ln.startswith("warn: "))
    assert "bogus-1hz.sr" in first and "implausible" in first
    assert "1 with warnings" in out.splitlines()[-1]
    d = json.loads(run("batch", one_hz, MCP, "-j", "1", "-q", "--format", "json"))
    bogus = next(c for c in d["captures"] if c["path"].endswith("bogus-1hz.sr"))
    assert bogus["status"] == "warn" and "implausible" in bogus["first_warning"]
    assert d["summary"]["warn"] == 1 and d["summary"]["ok"] == 1


def test_an_implausible_rate_is_said_wherever_the_rate_is_used(one_hz, tmp_path):
    assert "implausible" in check_lines(run("analyze", one_hz))[0]
    text = run("check", one_hz, "--profile", "rpi3-k4.4-vanilla", code=1)
    assert "implausible" in check_lines(text)[0] and text.index("CHECK") < text.index("\ncheck  ")
    cmp = run("compare", "--before", one_hz, "--after", MCP)
    assert any("implausible" in c for c in check_lines(cmp.replace("  CHECK", "CHECK"))), cmp[:1500]
    d = json.loads(run("compare", "--before", one_hz, "--after", MCP, "--format", "json"))
    assert "implausible" in d["before"][0]["warnings"][0]


def test_detect_says_the_implausible_rate_first_as_analyze_does():
    """sigrok-dumps' AD7920 capture says 5 Hz for its 5 MHz: analyze's first CHECK line; detect,
    which README sends a user to for "how sure", printed only the settings' CHECK lines."""
    ad7920 = CAPTURES / "real" / "spi__ad7920__ad7920_fast_read.sr"
    first = check_lines(run("analyze", ad7920))[0]
    assert "implausible" in first
    assert check_lines(run("detect", ad7920))[0] == first
    assert json.loads(run("detect", ad7920, "--format", "json"))["warnings"][0] == first


# ------------------------------------------------------------------ item 6: confidence in words
def test_one_transfer_per_call_reads_as_two_readings_not_as_wrong(tmp_path):
    text = run("analyze", AD7606)
    line = next(ln for ln in text.splitlines() if ln.startswith("messages"))
    assert "confidence 0.05, ambiguous: two readings" in line, line
    assert "or one message whose transfers are separated by cs_change busy-waits" in line
    d = json.loads(run("analyze", AD7606, "--format", "json"))
    g = d["summary"]["grouping"]
    assert g["confidence_words"] == "ambiguous: two readings" and g["rival"]
    for src in d["settings"]["sources"].values():
        assert src["confidence_words"] in WORDS
    run("report", AD7606, "-o", tmp_path / "r.html")
    assert "confidence 0.05, ambiguous: two readings" in (tmp_path / "r.html").read_text()
    rows = run("batch", AD7606, "-j", "1", "-q", "--format", "csv").splitlines()
    head, row = rows[0].split(","), rows[1].split(",")
    assert row[head.index("grouping_confidence_words")] == "ambiguous: two readings"
    assert "confidence 0.05, ambiguous: two readings" in run("batch", AD7606, "-j", "1", "-q")


def test_detect_and_check_say_the_same_words():
    text = run("detect", MCP)
    head = next(ln for ln in text.splitlines() if ln.startswith("setting"))
    assert "reads as" in head
    assert re.search(r"^mode .* 0\.95  settled by the signals ", text, re.M), text
    assert re.search(r"^bitorder .* unknown ", text, re.M), text
    chk = run("check", MCP, "--profile", "rpi3-k4.4-vanilla", code=None)
    assert "[auto, confidence 0.95, settled by the signals]" in chk, chk[:800]


def test_the_words_are_one_mapping():
    from spigap import confidence as c

    class G:
        method, basis, ambiguous, rival, rival_kinds, confidence = "auto", "", False, None, [], 0.9

    g = G()
    assert c.of_grouping(g) == "likely"
    g.confidence = 0.95
    assert c.of_grouping(g) == "settled by the signals"
    g.basis = "one_population"
    g.confidence = 0.1
    assert c.of_grouping(g) == "ambiguous: two readings"
    g.basis, g.method = "trace", "trace"
    assert c.of_grouping(g) == "settled by the trace"
    g.basis, g.method = "given", "user"
    assert c.of_grouping(g) == "given"
    assert c.of_source("default", 0.9) == "unknown" and c.of_source("inferred", 0.7) == "uncertain"
    assert {c.GIVEN, c.BY_TRACE, c.SETTLED, c.LIKELY, c.TWO_READINGS, c.SEVERAL_READINGS, c.UNCERTAIN,
            c.UNKNOWN} == set(WORDS)


def test_the_order_is_one_rule():
    from spigap.findings import Cause, Finding, by_cause, first_concern

    ws = ["a symptom", Finding("a note", Cause.NOTE), Finding("a rate", Cause.TIMEBASE),
          Finding("a CS", Cause.ROLES), Finding("another note", Cause.NOTE)]
    assert [str(w) for w in by_cause(ws)] == ["a CS", "a rate", "a symptom", "a note", "another note"]
    assert first_concern([Finding("n", Cause.NOTE)]) is None
    import pickle

    assert pickle.loads(pickle.dumps(Finding("x", Cause.ROLES))).cause == Cause.ROLES
