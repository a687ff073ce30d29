"""Docs stand alone: every document spigap's outputs, data files and docs cite is
in the repository, and every section they cite exists.

The checks read the checkout's text files (what a user's clone has):

* nothing refers to a folder outside the repository (``../shared``) or to
  documents that are not in it (the old ``domain-reference``);
* every ``docs/<name>.md`` named in analyzer/, decoders/, captures/, docs/,
  README.md and BENCHMARKS.md exists;
* every ``linux-spi-timing §N.M`` citation (and the further ``§`` numbers that
  follow it on the same line, as in "§2.4 (...), §3 (...)") names a section
  with that number; ``§9 item K`` names an existing item; docs/timing-model.md
  cites that document by bare ``§`` numbers (its header says so);
* every relative Markdown link in README.md, BENCHMARKS.md, docs/ and captures/
  points to an existing file, and its ``#anchor`` to a heading or an
  ``<a id>`` of that file.
"""

from __future__ import annotations

import pathlib
import re

import pytest

from conftest import ROOT

SKIP_DIRS = {".git", ".venv", ".venv-wheel", "build", "dist", "__pycache__", ".pytest_cache", ".hypothesis"}
TEXT_SUFFIXES = {".py", ".md", ".toml", ".txt", ".cfg", ".in", ".html", ".css", ".js", ".sh", ""}
REFERENCE = ROOT / "docs" / "linux-spi-timing.md"


def text_files(*tops):
    for top in tops:
        top = ROOT / top
        paths = [top] if top.is_file() else sorted(top.rglob("*"))
        for p in paths:
            if p.is_file() and not SKIP_DIRS & set(p.relative_to(ROOT).parts) and p.suffix in TEXT_SUFFIXES:
                try:
                    yield p, p.read_text(encoding="utf-8")
                except UnicodeDecodeError:
                    continue


CITING = ["analyzer", "decoders", "captures", "docs", "tests", "README.md", "BENCHMARKS.md",
          "Makefile", "setup.cfg", "setup.py", "pyproject.toml", "MANIFEST.in", ".ci"]


def _sections() -> tuple[set[str], int]:
    text = REFERENCE.read_text()
    ids = set(re.findall(r'<a id="s([\d.]+)"></a>', text))
    items = re.findall(r"^(\d+)\. ", text.split('<a id="s9"></a>', 1)[1], re.M)
    return ids, len(items)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    h = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", h).replace(" ", "-")


def _anchors(path: pathlib.Path) -> set[str]:
    text = path.read_text()
    out = set(re.findall(r'<a id="([^"]+)"', text))
    out |= {_slug(h) for h in re.findall(r"^#{1,6} (.+)$", text, re.M)}
    return out


def test_nothing_refers_outside_the_repository():
    bad = []
    for p, text in text_files(*CITING):
        if p.name == "test_doc_citations.py":
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if "../shared" in line or "shared/docs" in line or "shared/captures" in line \
                    or "domain-reference" in line:
                bad.append(f"{p.relative_to(ROOT)}:{n}: {line.strip()[:120]}")
    assert bad == []


def test_cited_docs_exist():
    missing = []
    for p, text in text_files(*CITING):
        for m in re.finditer(r"(?<![\w/.-])docs/([\w./-]+?\.md)\b", text):
            if not (ROOT / "docs" / m[1]).is_file():
                missing.append(f"{p.relative_to(ROOT)}: docs/{m[1]}")
    assert missing == []


def test_every_cited_section_exists():
    ids, n_items = _sections()
    assert {"1.3", "1.5", "2.3", "4.3", "6.4", "7", "9"} <= ids      # the most cited ones
    cited, bad = 0, []
    for p, text in text_files(*CITING):
        bare = p == ROOT / "docs" / "timing-model.md"
        for n, line in enumerate(text.splitlines(), 1):
            if bare:
                tail = line
            else:
                at = line.find("linux-spi-timing")
                if at < 0:
                    continue
                tail = line[at:]
                other = re.search(r"\b(?!linux-spi-timing)[\w-]+\.md\b", tail[len("linux-spi-timing.md"):])
                if other:
                    tail = tail[:len("linux-spi-timing.md") + other.start()]
            for m in re.finditer(r"§(\d+(?:\.\d+)?)(?: item (\d+))?", tail):
                cited += 1
                if m[1] not in ids or (m[2] and not 1 <= int(m[2]) <= n_items):
                    bad.append(f"{p.relative_to(ROOT)}:{n}: {m[0]}")
    assert bad == [] and cited > 50, (bad, cited)


MD_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


@pytest.mark.parametrize("top", ["README.md", "BENCHMARKS.md", "CHANGELOG.md", "docs", "captures"])
def test_relative_markdown_links_resolve(top):
    bad = []
    for p, text in text_files(top):
        if p.suffix != ".md":
            continue
        text = re.sub(r"```.*?```", "", text, flags=re.S)       # code blocks are not links
        for m in MD_LINK.finditer(text):
            target = m[1]
            if re.match(r"^[a-z]+:", target):
                continue
            file_part, _, anchor = target.partition("#")
            dest = (p.parent / file_part).resolve() if file_part else p
            if not dest.exists():
                bad.append(f"{p.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                bad.append(f"{p.relative_to(ROOT)}: {target} (no such anchor)")
    assert bad == []


def test_quoted_phrases_of_cited_sections_are_in_them():
    """A citation that quotes the section ("§7 'Device limits a checker can apply'")
    quotes words that are in that section."""
    text = REFERENCE.read_text()
    sections = {m[1]: m[2] for m in re.finditer(r'<a id="s([\d.]+)"></a>\n(.*?)(?=<a id="s|\Z)', text, re.S)}
    quotes = []
    for p, body in text_files(*CITING):
        for m in re.finditer(r"linux-spi-timing\.md §([\d.]+):? '([^']+)'", body):
            quotes.append((p, m[1], m[2]))
    assert len(quotes) >= 4
    missing = [(str(p.relative_to(ROOT)), sec, q) for p, sec, q in quotes
               if " ".join(q.split()) not in " ".join(sections[sec].split())]
    assert missing == []


REPO_PATH = re.compile(r"(?<![\w./-])((?:analyzer|tests|captures|decoders|docs|\.ci)/[\w./*{},-]*[\w*}])")


def test_repository_paths_in_the_docs_exist():
    """Every path into the repository that README, BENCHMARKS, docs/ and captures/
    name exists (globs and {a,b} alternatives match something; ``X`` is a
    placeholder). CHANGELOG is history: it may name what was renamed since."""
    import glob

    bad = []
    for top in ("README.md", "BENCHMARKS.md", "docs", "captures"):
        for p, text in text_files(top):
            if p.suffix != ".md":
                continue
            for m in REPO_PATH.finditer(text):
                path = m[1]
                if re.search(r"(^|/)X\.\w+$", path):
                    continue
                if any(c in path for c in "*{"):
                    pattern = re.sub(r"\{[^}]*\}?", "*", path)
                    if not glob.glob(str(ROOT / pattern)):
                        bad.append(f"{p.relative_to(ROOT)}: {path}")
                elif not (ROOT / path).exists():
                    bad.append(f"{p.relative_to(ROOT)}: {path}")
    assert bad == []
