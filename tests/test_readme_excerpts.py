"""README excerpts are the real output: every '$ spigap ...' line followed by
output lines is run, and its lines must match exactly. An excerpt that leaves
lines out says so with a '... (trimmed)' line (the lines around it must still
appear, in order); a line cut short ends in ' ... (trimmed)' (its start must
match). Commands on files the checkout does not have are skipped, by name."""

from __future__ import annotations

import re
import shlex

import pytest
from conftest import ROOT

from spigap.cli import main

TRIM = "... (trimmed)"


def excerpts():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    out = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", text, re.DOTALL):
        cmd, lines = None, []
        for line in block.splitlines() + ["$ end"]:
            if line.startswith("$ "):
                if cmd is not None and lines and any(x.strip() for x in lines):
                    out.append((cmd, [x for x in lines]))
                cmd, lines = line[2:], []
            elif cmd is not None:
                lines.append(line)
    return out


def _strip(lines):
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    return lines


@pytest.mark.parametrize("cmd,expected", excerpts(), ids=lambda x: x if isinstance(x, str) else "")
def test_readme_excerpt_is_the_output(cmd, expected, capsys, monkeypatch):
    argv = shlex.split(cmd.split("  #")[0])
    assert argv[0] == "spigap"
    files = [a for a in argv[1:] if a.endswith(".sr") or "/" in a]
    missing = [f for f in files if not (ROOT / f).exists()]
    if missing:
        pytest.skip(f"needs {', '.join(missing)}")
    monkeypatch.chdir(ROOT)
    main(argv[1:])
    got = capsys.readouterr().out.splitlines()
    want = _strip(expected)
    if not any(TRIM in w for w in want):
        assert _strip(got) == want
        return
    # segments between the markers: each one contiguous in the output, in order;
    # the first (last) one at the very start (end) unless a marker precedes (follows) it
    got = _strip(got)
    segs, cur = [], []
    for w in want + [TRIM]:
        if w == TRIM:
            segs.append(cur)
            cur = []
        else:
            cur.append(w)
    last = len(segs) - 1      # the last segment (empty when the excerpt ends with a marker)

    def fits(seg, at):
        return at + len(seg) <= len(got) and all(
            got[at + k].startswith(w[:-len(TRIM) - 1]) if w.endswith(" " + TRIM) else got[at + k] == w
            for k, w in enumerate(seg))

    i = 0
    for n, seg in enumerate(segs):
        if not seg:
            continue
        if n == 0:
            assert fits(seg, 0), f"README excerpt does not start like the output: {seg[0]!r} vs {got[0]!r}"
            i = len(seg)
            continue
        while i < len(got) and not fits(seg, i):
            i += 1
        assert i < len(got), f"README lines not in the output (contiguous, in this order): {seg}"
        if n == last and want[-1] != TRIM:
            assert i + len(seg) == len(got), f"README excerpt ends early without '{TRIM}': {seg[-1]!r}"
        i += len(seg)


def test_excerpts_found():
    cmds = [c for c, _ in excerpts()]
    assert any(c.startswith("spigap analyze") for c in cmds) and any(c.startswith("spigap check") for c in cmds)
