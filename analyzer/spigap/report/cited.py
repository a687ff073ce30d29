"""The documentation a report cites, embedded in it.

A report is one file a user mails to a colleague or attaches to a bug; a citation
of ``docs/gaps.md`` in it would name a file that neither a pip user nor the
colleague has. So the report carries what it cites: every citation is a link to
an appendix that holds the cited section, rendered from the documentation the
package ships (``spigap/docs/*.md``, the top-level ``docs/`` as package data, as
the decoders are: resources.py), so the appendix is the documentation's own text
of the installed version, never a copy kept by hand. A document named in passing
(a note's "docs/gaps.md") brings its opening paragraphs.

Links inside an embedded section lead to another embedded section or are plain
text (the report has no link out of itself); images become their alt text.
markdown-it-py renders the Markdown (CommonMark and GitHub's tables: what the
docs are written in), with raw HTML off: nothing from a file reaches the report
unescaped.
"""

from __future__ import annotations

import functools
import html
import importlib.resources
import re

# a document named in a text: "docs/gaps.md", not the tail of a path ("/home/u/docs/x.md"), with
# the number of the section cited when there is one ("docs/linux-spi-timing.md §2.3")
DOC_RE = re.compile(r"(?<![\w/.-])docs/([a-z0-9][a-z0-9-]*)\.md(?:,? ?§(\d+(?:\.\d+)*))?")
# the parts of HTML markup that are not text: a link with its content, a tag
_NOT_TEXT = re.compile(r"(<a\b.*?</a>|<[^>]*>)", re.S)
_ANCHOR_TAG = re.compile(r'<a id="[^"]*"></a>')          # the docs' section anchors (linux-spi-timing §N)


class DocMissing(LookupError):
    """A cited document or section is not in the installed documentation."""


def doc_text(name: str) -> str:
    """The Markdown of ``docs/<name>`` as installed with the package."""
    res = importlib.resources.files("spigap").joinpath("docs", name)
    try:
        return res.read_text(encoding="utf-8")
    except (FileNotFoundError, NotADirectoryError) as e:
        raise DocMissing(f"docs/{name} is not installed with spigap") from e


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def anchor(doc: str, heading: str | None = None) -> str:
    """The report's id of a cited document (its block) or of one of its sections."""
    base = "doc-" + _slug(doc.removesuffix(".md"))
    return base if heading is None else f"{base}--{_slug(heading)}"


def _md():
    """The Markdown parser and renderer (imported when a report is written, not with the package)."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": False}).enable("table")


def _headings(tokens) -> list[tuple[int, int, str]]:
    """(first line, level, text) of every heading, in order (fenced code is no heading)."""
    out = []
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open" and tok.map:
            out.append((tok.map[0], int(tok.tag[1]), tokens[i + 1].content))
    return out


@functools.lru_cache(maxsize=32)
def _doc_headings(doc: str) -> tuple[tuple[int, int, str], ...]:
    """``_headings`` of an installed document, parsed once a process (a report cites the same
    documents again and again: every "§N" in a text, every section of the appendix)."""
    return tuple(_headings(_md().parse(doc_text(doc))))


def numbered(doc: str, number: str) -> str | None:
    """The heading of section ``number`` ("2.3") of ``doc`` (its headings start with their
    numbers, as linux-spi-timing.md's do), or None."""
    for _, _, title in _doc_headings(doc):
        if re.match(rf"{re.escape(number)}\.?\s", title):
            return title
    return None


def section(doc: str, heading: str | None) -> str:
    """The Markdown of one section of ``doc`` (the heading's line to the next heading of
    the same or a higher level), or, for ``heading=None``, the opening text under the
    title. DocMissing when the document has no such heading."""
    lines = doc_text(doc).splitlines()
    heads = _doc_headings(doc)
    if heading is None:
        start = heads[0][0] + 1 if heads and heads[0][1] == 1 else 0
        end = next((ln for ln, _, _ in heads if ln >= start), len(lines))
        return "\n".join(lines[start:end])
    for k, (ln, level, title) in enumerate(heads):
        if title.strip("`") == heading or title == heading:
            end = next((n for n, lv, _ in heads[k + 1:] if lv <= level), len(lines))
            return "\n".join(lines[ln + 1:end])
    raise DocMissing(f"docs/{doc} has no section {heading!r}")


class Citations:
    """The sections one report cites, in the order first cited; ``link`` makes a citation,
    ``linkify`` turns the document names in a text into citations, ``html`` the appendix."""

    ID = "cited-docs"

    def __init__(self) -> None:
        self.cited: dict[str, list[str | None]] = {}      # doc -> headings (None: its opening)

    def _add(self, doc: str, heading: str | None) -> None:
        hs = self.cited.setdefault(doc, [])
        if heading not in hs:
            hs.append(heading)

    def link(self, doc: str, heading: str | None = None) -> str:
        """An HTML link to the embedded section (or document opening) of ``doc``."""
        self._add(doc, heading)
        label = f"docs/{doc}" + (f", “{heading}”" if heading else "")
        return f'<a href="#{anchor(doc, heading)}">{html.escape(label)}</a>'

    def linkify(self, markup: str) -> str:
        """``markup`` (the report's HTML) with each document it names ("docs/" + name + ".md") in its text (a note, a
        warning, a check's reason: texts of the layers below, which name documents) a link to
        that document's block in the appendix (its opening paragraphs at least); tags and
        links are left as they are."""
        parts = _NOT_TEXT.split(markup)
        return "".join(p if k % 2 else self._linkify_text(p) for k, p in enumerate(parts))

    def _linkify_text(self, escaped: str) -> str:
        def sub(m: re.Match) -> str:
            doc = f"{m.group(1)}.md"
            try:
                heading = numbered(doc, m.group(2)) if m.group(2) else None
            except DocMissing:
                return m.group(0)
            if heading is not None:
                self._add(doc, heading)
                return f'<a href="#{anchor(doc, heading)}">{m.group(0)}</a>'
            if not self.cited.get(doc):
                self._add(doc, None)
            return f'<a href="#{anchor(doc)}">{m.group(0)}</a>'
        return DOC_RE.sub(sub, escaped)

    def html(self) -> str:
        """The appendix: each cited document's sections, rendered. Empty without citations."""
        if not self.cited:
            return ""
        ids = {anchor(d, h) for d, hs in self.cited.items() for h in hs} | {anchor(d) for d in self.cited}
        where = importlib.resources.files("spigap").joinpath("docs")
        H = [f'<section id="{self.ID}"><h2>Definitions and methods cited</h2>',
             "<p class='note'>The sections of spigap's documentation this report cites, as installed with "
             f"the spigap that wrote it (the whole documents are in {html.escape(str(where))}).</p>"]
        for doc, heads in self.cited.items():
            H.append(f'<div id="{anchor(doc)}">')
            for h in heads:
                title = f"docs/{doc}" + (f": {h}" if h else "")
                sid = anchor(doc, h)
                H.append(f'<h3 id="{sid}">{html.escape(title)}</h3>' if h else f"<h3>{html.escape(title)}</h3>")
                H.append(f'<div class="doc">{render(section(doc, h), doc, ids)}</div>')
            H.append("</div>")
        H.append("</section>")
        return "\n".join(H)


def render(markdown: str, doc: str, ids: set[str]) -> str:
    """Markdown of ``doc`` as HTML inside the report: a link to a section the report embeds
    stays a link (to it), any other link is its text, an image its alt text."""
    md = _md()
    open_links: list[bool] = []

    def link_open(_renderer, tokens, idx, _options, _env):
        href = tokens[idx].attrGet("href") or ""
        target = _target(str(href), doc, ids)
        open_links.append(target is not None)
        return f'<a href="#{target}">' if target is not None else ""

    def link_close(_renderer, tokens, idx, _options, _env):
        return "</a>" if open_links.pop() else ""

    def image(_renderer, tokens, idx, _options, _env):
        return html.escape(f"[figure: {tokens[idx].content}]")

    md.add_render_rule("link_open", link_open)
    md.add_render_rule("link_close", link_close)
    md.add_render_rule("image", image)
    return md.render(_ANCHOR_TAG.sub("", markdown))


def _target(href: str, doc: str, ids: set[str]) -> str | None:
    """The report's id a doc link leads to when the report embeds it, else None."""
    if re.match(r"[a-z]+:", href):
        return None
    path, _, frag = href.partition("#")
    name = path.rsplit("/", 1)[-1] or doc
    if not name.endswith(".md"):
        return None
    cands = [f"{anchor(name)}--{frag}"] if frag else []
    num = re.fullmatch(r"s(\d+(?:\.\d+)*)", frag)
    if num:                                     # a numbered section's anchor (#s2.3)
        try:
            title = numbered(name, num.group(1))
        except DocMissing:
            title = None
        if title is not None:
            cands.insert(0, anchor(name, title))
    for cand in cands + [anchor(name)]:
        if cand in ids:
            return cand
    return None
