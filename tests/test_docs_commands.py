"""Every command of README.md and docs/*.md is run, and what the docs show it printing
is what it prints (the convention, what is compared and how the docs' blocks are
marked: tests/doccmd.py).

One test per ``## `` section of a doc; a doc's sections run in order in one folder outside
the checkout, with the installed ``spigap`` and links to the repository's captures/ and
tests/ (checked unchanged after every section). When a change of printed output is meant, rewrite the docs' printed blocks
with ``SPIGAP_UPDATE_GOLDEN=1 .venv/bin/python -m pytest -n 2 --dist loadgroup tests/test_docs_commands.py``
(the trimmed parts stay trimmed) and read the diff before committing it; without it a
block that differs fails with the diff the rewrite would make.
"""

from __future__ import annotations

import dataclasses

import os
import re

import pytest
from conftest import DECODERS, ROOT

import doccmd

UPDATE = bool(os.environ.get("SPIGAP_UPDATE_GOLDEN"))
# the blocks and commands the suite does not run: each mark carries its reason in the doc
MAX_NOT_RUN = 10


def _parse_all():
    blocks, errors = [], []
    for d in doccmd.docs(ROOT):
        try:
            blocks += doccmd.parse(d, ROOT)
        except ValueError as e:
            errors.append(str(e))
    return blocks, errors


BLOCKS, ERRORS = _parse_all()


def test_docs_follow_the_convention():
    assert not ERRORS, "\n".join(ERRORS)
    assert len(BLOCKS) > 30 and sum(b.kind == "transcript" for b in BLOCKS) > 10


def test_not_run_marks_are_few_and_give_a_reason():
    marks = [f"{b.doc}:{b.line}: {b.skip}" for b in BLOCKS if b.skip]
    marks += sorted({f"{b.doc}:{b.line}: {c.skip}" for b in BLOCKS for c in b.commands if c.skip and not b.skip})
    assert len(marks) <= MAX_NOT_RUN, "\n".join(marks)
    assert all(len(m.split(": ", 1)[1]) > 20 for m in marks), marks


def test_make_demo_prints_the_readme_transcript():
    """`make demo` (README's first command) runs `spigap analyze $(DEMO)`: the README's first
    transcript is that command, so its printed block (compared below) is what make demo prints."""
    mk = (ROOT / "Makefile").read_text(encoding="utf-8")
    demo = re.search(r"^DEMO \?= (\S+)$", mk, re.M)
    recipe = re.search(r"^demo:[^\n]*\n\t([^\n]*)$", mk, re.M)
    assert demo and recipe and recipe.group(1) == "$(BIN)/spigap analyze $(DEMO)", "the demo target changed"
    readme = [b for b in BLOCKS if b.doc == "README.md"]
    first = next(c for b in readme if b.kind == "transcript" for c in b.commands)
    assert first.text == f"spigap analyze {demo.group(1)}" and first.expected and doccmd.TRIM not in first.expected
    head = [b for b in readme if b.kind == "sh"][0]
    assert head.skip and "make demo" in "\n".join(head.body) and "make test" in "\n".join(head.body)


def _state():
    """(path, size, mtime) of every file the blocks can reach in the repository."""
    out = set()
    for top in (ROOT / "captures", ROOT / "tests" / "data", DECODERS):
        for p in top.rglob("*"):
            if p.is_file():
                s = p.stat()
                out.add((str(p), s.st_size, s.st_mtime_ns))
    return out


@pytest.fixture(scope="module")
def repo_state():
    return _state()


# one test per '## ' section that runs something; a doc's sections share its folder
SECTIONS = list(dict.fromkeys((b.doc, b.section) for b in BLOCKS if b.kind != "file" and not b.skip))
_FOLDERS: dict[str, tuple[object, set]] = {}      # doc -> (its folder in this process, the blocks run in it)


def _folder(doc, tmp_path_factory):
    if doc not in _FOLDERS:
        where = tmp_path_factory.mktemp("doc")
        doccmd.prepare(where, ROOT, DECODERS)
        for block in BLOCKS:                       # the files a doc shows (a manifest) first
            if block.doc == doc and block.kind == "file":
                doccmd.link_files(block, where, ROOT)
        _FOLDERS[doc] = (where, set())
    return _FOLDERS[doc]


def _run_block(block, where, failures):
    doccmd.link_files(block, where, ROOT)
    for c in block.commands:
        if c.skip:
            continue
        ran = doccmd.run(block, c, where)
        if failures is None:                       # a setup block of an earlier section
            continue
        head = f"{block.doc}:{c.line}: {c.text if len(c.text) < 200 else c.text[:200] + ' ...'}"
        failures += [f"{head}\n  {p}\n  output: {' | '.join(ran.output[-5:])} {ran.stderr[-400:]}"
                     for p in doccmd.problems(block, ran)]
        if c.expected is None:
            continue
        why = doccmd.matches(c.expected, ran.output)
        if why is None:
            continue
        new = doccmd.regenerate(c.expected, ran.output)
        if UPDATE:
            doccmd.rewrite(ROOT / block.doc, c, new)
        else:
            failures.append(f"{head}\n  the printed block differs: {why}\n{doccmd.diff(block, c, new)}\n"
                            f"  (if the new output is right: SPIGAP_UPDATE_GOLDEN=1 pytest {__file__})")


def _earlier_files(doc, section, where, done) -> None:
    """The files the doc's earlier sections gave the reader (their 'files' marks), where this
    process has not run those sections: a section on another xdist worker than the one before
    it finds what the reader has by then (a name this section gives itself is left to it)."""
    own = {n for b in BLOCKS if b.doc == doc and b.section == section for n in b.files}
    here = SECTIONS.index((doc, section))
    for block in BLOCKS:
        if (block.doc != doc or block.kind == "file" or block.skip or block.line in done
                or (doc, block.section) not in SECTIONS or SECTIONS.index((doc, block.section)) >= here):
            continue
        wanted = {n: p for n, p in block.files.items() if n not in own and not (where / n.rstrip("/")).exists()}
        if wanted:
            doccmd.link_files(dataclasses.replace(block, files=wanted), where, ROOT)


@pytest.mark.parametrize("doc,section", [pytest.param(d, s, id=f"{d}#{s[:40]}") for d, s in SECTIONS])
def test_doc_commands(doc, section, tmp_path_factory, repo_state):
    """A doc's section, its blocks top to bottom, in the doc's folder, as a reader follows
    it; the setup blocks of the doc's earlier sections (marked so) first, if this process
    has not run them (a section tested alone, or on another worker)."""
    where, done = _folder(doc, tmp_path_factory)
    _earlier_files(doc, section, where, done)
    failures: list[str] = []
    for block in BLOCKS:
        if block.doc != doc or block.kind == "file" or block.skip:
            continue
        if block.section == section:
            _run_block(block, where, failures)
            done.add(block.line)
        elif block.setup and block.line not in done and SECTIONS.index((doc, block.section)) < SECTIONS.index(
                (doc, section)):
            _run_block(block, where, None)
            done.add(block.line)
    assert _state() == repo_state, "a command changed a file of the repository"
    if failures:
        pytest.fail("\n\n".join(failures), pytrace=False)
