"""`spigap check --format ktap`: KTAP version 1, the kernel's test output format.

The oracle is the grammar of Documentation/dev-tools/ktap.rst, written out below
as a small strict parser. Why our own: no maintained PyPI package parses KTAP
(the kernel's kunit_parser.py lives in tools/testing/kunit/ and is not
published; tap.py and pytap13 implement TAP 13/14, whose nesting uses
"Subtest:" lines and 4-space indents, not KTAP's nested version lines with
2-space indents). The parser is tested on hand-written valid and invalid KTAP
first, then used on spigap's output, which is also compared with the JUnit
output of the same run (same checks, same verdicts).
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import xml.etree.ElementTree as ET

import pytest

from conftest import CAPTURES
from test_check import NODELAY_B10, _idle_capture, spigap

VERSION = re.compile(r"^(KTAP version 1|TAP version 1[34])$")
PLAN = re.compile(r"^1\.\.(\d+)$")
# <result> <number> [<description>][ # [<directive>] [<diagnostic data>]]; a description has no '#'
RESULT = re.compile(r"^(ok|not ok) (\d+)(?: ([^#]*?))?(?: # ?(.*))?$")
DIRECTIVES = ("SKIP", "TODO", "XFAIL", "TIMEOUT", "ERROR")


class KtapError(AssertionError):
    pass


@dataclasses.dataclass
class KtapTest:
    number: int
    description: str
    ok: bool
    directive: str | None
    data: str
    diagnostics: list
    subtests: list


def parse_ktap(text: str, *, strict: bool = True) -> list[KtapTest]:
    """The top-level tests of a KTAP document. ``strict``: no unknown lines (the
    spec allows them, but spigap writes none)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    tests, i = _block(lines, 0, 0, strict)
    if i != len(lines):
        raise KtapError(f"line {i + 1}: unexpected {lines[i]!r}")
    return tests


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _block(lines, i, indent, strict):
    pad = " " * indent
    if i >= len(lines) or not lines[i].startswith(pad) or not VERSION.match(lines[i][indent:]):
        raise KtapError(f"line {i + 1}: a (sub)test block starts with a version line at indent {indent}")
    i += 1
    plan = None
    if i < len(lines) and lines[i].startswith(pad) and PLAN.match(lines[i][indent:]):
        plan = int(PLAN.match(lines[i][indent:])[1])
        i += 1
    tests, diags, pending = [], [], None
    while i < len(lines):
        line = lines[i]
        ind = _indent(line)
        body = line[indent:]
        if ind > indent and VERSION.match(line.strip()):
            if ind != indent + 2:
                raise KtapError(f"line {i + 1}: a nested block is indented by two spaces")
            if pending is not None:
                raise KtapError(f"line {i + 1}: two nested blocks without a result line between")
            pending, i = _block(lines, i, ind, strict)
            continue
        if ind < indent or not line.startswith(pad):
            break
        if body.startswith("#"):
            diags.append(body[1:].strip())
            i += 1
            continue
        m = RESULT.match(body)
        if m is None:
            if strict:
                raise KtapError(f"line {i + 1}: not a KTAP line: {line!r}")
            i += 1
            continue
        number = int(m[2])
        if number != len(tests) + 1:
            raise KtapError(f"line {i + 1}: test number {number}, expected {len(tests) + 1}")
        directive, data = None, m[4] or ""
        if data.split(" ", 1)[0] in DIRECTIVES:
            directive, _, data = data.partition(" ")
        t = KtapTest(number, (m[3] or "").strip(), m[1] == "ok", directive, data, diags, pending or [])
        if directive in ("TIMEOUT", "ERROR") and t.ok:
            raise KtapError(f"line {i + 1}: {directive} needs 'not ok'")
        if any(not s.ok and s.directive != "SKIP" for s in t.subtests) and t.ok:
            raise KtapError(f"line {i + 1}: a test with a failed subtest must fail")
        tests.append(t)
        diags, pending = [], None
        i += 1
    if pending is not None:
        raise KtapError(f"line {i + 1}: a nested block without its parent's result line")
    if plan is not None and plan != len(tests):
        raise KtapError(f"plan 1..{plan} but {len(tests)} results at indent {indent}")
    return tests, i


# ------------------------------------------------------------------ the parser on hand-written KTAP
GOOD = """\
KTAP version 1
1..2
  KTAP version 1
  1..3
  # first: a note
  ok 1 first
  not ok 2 second # TIMEOUT 30 seconds
  ok 3 third # SKIP not on this board
# parent: one subtest failed
not ok 1 parent
ok 2 plain # rcode=0
"""

BAD = {
    "no version line": "1..1\nok 1 a\n",
    "numbers skip": "KTAP version 1\n1..2\nok 1 a\nok 3 b\n",
    "plan mismatch": "KTAP version 1\n1..3\nok 1 a\nok 2 b\n",
    "hash in a description": "KTAP version 1\n1..1\nok 1 a#b\n",
    "three-space indent": "KTAP version 1\n1..1\n   KTAP version 1\n   1..1\n   ok 1 a\nok 1 p\n",
    "parent passes a failed child": "KTAP version 1\n1..1\n  KTAP version 1\n  1..1\n  not ok 1 a\nok 1 p\n",
    "ERROR on ok": "KTAP version 1\n1..1\nok 1 a # ERROR broke\n",
    "no parent result": "KTAP version 1\n1..1\n  KTAP version 1\n  1..1\n  ok 1 a\n",
    "garbage line": "KTAP version 1\n1..1\nhello\nok 1 a\n",
}


def test_the_parser_reads_valid_ktap():
    tests = parse_ktap(GOOD)
    assert [(t.number, t.description, t.ok) for t in tests] == [(1, "parent", False), (2, "plain", True)]
    sub = tests[0].subtests
    assert [(s.description, s.ok, s.directive, s.data) for s in sub] == [
        ("first", True, None, ""), ("second", False, "TIMEOUT", "30 seconds"), ("third", True, "SKIP", "not on this board")]
    assert sub[0].diagnostics == ["first: a note"] and tests[0].diagnostics == ["parent: one subtest failed"]
    assert tests[1].data == "rcode=0"
    # unknown lines are allowed by the spec (only our strict mode refuses them)
    assert len(parse_ktap(BAD["garbage line"], strict=False)) == 1


@pytest.mark.parametrize("name", sorted(BAD))
def test_the_parser_refuses_invalid_ktap(name):
    with pytest.raises(KtapError):
        parse_ktap(BAD[name])


# ------------------------------------------------------------------ spigap check --format ktap
def _junit_cases(suite):
    out = {}
    for c in suite.findall("testcase"):
        out[c.get("name")] = ("fail" if c.find("failure") is not None
                              else "skip" if c.find("skipped") is not None else "ok")
    return out


def _ktap_cases(test):
    return {s.description: ("skip" if s.directive == "SKIP" else "ok" if s.ok else "fail") for s in test.subtests}


@pytest.mark.parametrize("extra", [[], ["--strict"]], ids=["default", "strict"])
def test_ktap_matches_junit_check_for_check(extra):
    args = ["check", NODELAY_B10, CAPTURES / "mcp3008-rpi3-k4.4-b10.sr", "--profile", "rpi3-k4.4-nodelay",
            "--device", "mcp3008@5V", *extra]
    k = spigap(*args, "--format", "ktap")
    j = spigap(*args, "--format", "junit")
    assert k.returncode == j.returncode == 1, k.stderr
    assert k.stdout.isascii()
    tests = parse_ktap(k.stdout)
    suites = ET.fromstring(j.stdout).findall("testsuite")
    assert len(tests) == len(suites) == 2
    for t, s in zip(tests, suites):
        assert _ktap_cases(t) == _junit_cases(s)
        assert t.ok == (not any(v == "fail" for v in _junit_cases(s).values()))
        assert t.description.startswith(str(CAPTURES)) and t.description.endswith("[rpi3-k4.4-nodelay + mcp3008@5V]")
        for sub in t.subtests:
            if sub.directive == "SKIP":
                assert sub.data, sub                      # the reason
                continue
            # a diagnostic line before each result: measured vs limit, delta, resolution
            assert any(d.startswith(f"{sub.description}: ") and " measured " in d and ", limit " in d
                       and "(+/-" in d for d in sub.diagnostics), sub
    first = {s.description: s for s in tests[0].subtests}
    assert not first["device.tCSH"].ok and first["cs_change.p50"].ok
    assert any("device.tCSH: first at " in d for d in first["device.tCSH"].diagnostics)
    marginal = [s for s in tests[1].subtests if any(": MARGINAL: " in d for d in s.diagnostics)]
    assert marginal and all(s.ok == (extra == []) for s in marginal)


def test_ktap_no_data_fails_unless_allowed(tmp_path):
    idle = _idle_capture(tmp_path)
    proc = spigap("check", idle, "--profile", "rpi3-k4.4-vanilla", "--format", "ktap")
    (t,) = parse_ktap(proc.stdout)
    assert proc.returncode == 1 and not t.ok
    data = t.subtests[0]
    assert data.description == "data" and not data.ok and "NO DATA: 0 transfer(s)" in data.diagnostics[0]
    proc = spigap("check", idle, "--profile", "rpi3-k4.4-vanilla", "--format", "ktap", "--allow-empty")
    (t,) = parse_ktap(proc.stdout)
    assert proc.returncode == 0 and t.ok and t.subtests[0].directive == "SKIP"


def test_ktap_escapes_what_would_break_a_line(tmp_path):
    odd = tmp_path / "run #1 µ\x1b[31m.sr"
    shutil.copy(NODELAY_B10, odd)
    proc = spigap("check", odd, "--profile", "rpi3-k4.4-nodelay", "--device", "none", "--format", "ktap",
                  "-o", tmp_path / "out.ktap")
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "out.ktap").read_text(encoding="ascii")
    (t,) = parse_ktap(text)
    assert "run \\x231 u\\x1b[31m.sr" in t.description and "\x1b" not in text
