"""spigap report in a real browser: headless Chromium (Debian's ``chromium``, which
``make test`` installs) opens the reports, and the tests fail on any console error,
uncaught exception or browser-logged error, on any image that does not decode, on an
empty table row, on a link that leads nowhere; the rendered tables' rows are checked
against what ``spigap analyze`` prints for the same capture (one formatting of every
figure, on the resolution grid). tests/chromium.py drives the browser.

A missing chromium fails (as a missing sigrok-cli does, tests/conftest.py): the suite
has no skip for a tool it needs.
"""

from __future__ import annotations

import contextlib
import io
import re
import shutil

import pytest

from chromium import Browser
from conftest import AD7606_NEW, AD7606_OLD, CAPTURES
from spigap.cli import main

OLD = AD7606_OLD                       # idle clocks p50 a sample short of 0 before the fix
NEW = AD7606_NEW
SHARED = CAPTURES / "shared-rpi-mcp3008-mcp2518fd.sr"
TRACED = CAPTURES / "ad7606-pi5-k6.12.25-traced.sr"

# what the page reports back: every image (decoded?), every table's rows, links to nowhere
PROBE = r"""
(async () => {
  const imgs = [...document.images];
  const decoded = await Promise.all(imgs.map(i => i.decode().then(() => true, () => false)));
  const heading = el => {           // the nearest heading before the table, at its level or above
    for (; el; el = el.parentElement)
      for (let e = el.previousElementSibling; e; e = e.previousElementSibling)
        if (/^H[1-6]$/.test(e.tagName)) return e.textContent.trim();
    return "";
  };
  const tables = [...document.querySelectorAll("table")].map(t => ({
    section: (t.closest("section") || {id: ""}).id,
    heading: heading(t),
    rows: [...t.rows].map(r => [...r.cells].map(c => ({tag: c.tagName, text: c.innerText.trim()}))),
  }));
  const hrefs = [...document.querySelectorAll("a[href]")].map(a => a.getAttribute("href"));
  const nowhere = hrefs.filter(h => !h.startsWith("#") || !document.getElementById(h.slice(1)));
  return JSON.stringify({
    images: imgs.map((i, k) => ({name: i.title, width: i.naturalWidth, height: i.naturalHeight, decoded: decoded[k]})),
    tables, hrefs, nowhere,
  });
})()
"""


@pytest.fixture(scope="module")
def chromium() -> str:
    exe = shutil.which("chromium")
    if exe is None:
        pytest.fail("chromium is not installed: run 'make test' (it installs it) or apt-get install chromium")
    return exe


def _render(chromium_exe: str, path) -> tuple[dict, list[str]]:
    import json

    b = Browser(chromium_exe)
    try:
        page = b.open(path.resolve().as_uri())
        seen = json.loads(page.evaluate(PROBE))
        return seen, page.errors()
    finally:
        b.close()


def _text_report(*argv) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["analyze", *map(str, argv)]) == 0
    return out.getvalue()


# the compare report is drawn once a run (conftest.ad7606_compare_report) for this module and
# test_report.py: one worker runs both
pytestmark = pytest.mark.xdist_group("ad7606_report")


@pytest.fixture(scope="module")
def compare_page(chromium, ad7606_compare_report):
    out, pngs = ad7606_compare_report
    seen, errors = _render(chromium, out)
    return seen, errors, sorted(p.name for p in pngs.glob("*.png"))


@pytest.fixture(scope="module")
def shared_page(chromium, tmp_path_factory):
    d = tmp_path_factory.mktemp("browser-shared")
    out = d / "s.html"
    assert main(["report", str(SHARED), "-o", str(out)]) == 0
    return _render(chromium, out)


@pytest.fixture(scope="module")
def traced_page(chromium, tmp_path_factory):
    d = tmp_path_factory.mktemp("browser-traced")
    out = d / "t.html"
    assert main(["report", str(TRACED), "--ftrace", str(TRACED.with_suffix(".txt")), "-o", str(out)]) == 0
    return _render(chromium, out)


def _tables(seen, section: str, heading: str) -> list[list[dict]]:
    return [t["rows"] for t in seen["tables"] if t["section"] == section and t["heading"] == heading]


def _check_page(seen, errors) -> None:
    assert errors == [], errors
    assert seen["images"]
    bad = [i for i in seen["images"] if not i["decoded"] or i["width"] == 0 or i["height"] == 0]
    assert bad == [], bad
    assert seen["nowhere"] == [], f"links to nowhere (or out of the file): {seen['nowhere']}"
    for t in seen["tables"]:
        assert t["rows"], t
        for row in t["rows"]:
            # no empty row (an empty header row above a summary), no header cell without a name
            assert any(c["text"] for c in row), (t["section"], t["heading"], row)
            assert all(c["text"] for c in row if c["tag"] == "TH"), (t["section"], t["heading"], row)


def test_compare_report_renders_clean(compare_page):
    seen, errors, pngs = compare_page
    _check_page(seen, errors)
    # every plot the report holds is one --png wrote, and each decoded in the browser
    assert sorted(i["name"] for i in seen["images"]) == pngs


def test_shared_bus_report_renders_clean(shared_page):
    seen, errors = shared_page
    _check_page(seen, errors)
    bus = _tables(seen, "capture-1", "The bus")
    assert bus and {r[0]["text"] for r in bus[0]} >= {"devices", "busy", "two CS lines at once"}


def test_traced_report_renders_clean(traced_page):
    seen, errors = traced_page
    _check_page(seen, errors)
    assert any(t["heading"].startswith("Kernel phases") for t in seen["tables"])


def _text_gap_rows(text: str) -> dict[str, list[str]]:
    """The gap table of ``spigap analyze``'s text: label -> [n, min, p50, mean, p99, max, std]."""
    rows = {}
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("gap ") and ln.split()[1:3] == ["n", "min"])
    for ln in lines[start + 2:]:
        if not ln.strip():
            break
        cells = re.split(r"\s{2,}", ln.strip())
        if len(cells) == 8:
            rows[cells[0]] = cells[1:]
    return rows


@pytest.mark.parametrize("n,capture", [(1, OLD), (2, NEW)])
def test_figures_as_the_text_prints_them(compare_page, n, capture):
    """The Summary's idle clocks and every gap statistic read as ``spigap analyze`` prints
    them: the same rounding on the resolution grid, no count below 0."""
    seen, _, _ = compare_page
    text = _text_report(capture)
    summary = _tables(seen, f"capture-{n}", "Summary")
    assert len(summary) == 1
    facts = {r[0]["text"]: r[1]["text"] for r in summary[0] if len(r) == 2}
    idle = re.search(r"idle clocks between words p50 (.+)$", text, re.M).group(1)
    assert facts["idle clocks between words (p50)"] == idle
    assert not facts["idle clocks between words (p50)"].startswith("-")
    assert all(r[0]["tag"] == "TH" for r in summary[0])          # each row headed by its name

    gaps = _tables(seen, f"capture-{n}", "Gap statistics")
    assert len(gaps) == 1
    head, *body = gaps[0]
    assert [c["text"] for c in head] == ["gap", "n", "min", "p50", "mean", "p99", "max", "std"]
    want = _text_gap_rows(text)
    have = {r[0]["text"]: [c["text"] for c in r[1:]] for r in body}
    common = set(want) & set(have)
    assert len(common) >= 6, (sorted(want), sorted(have))
    for label in common:
        assert have[label] == want[label], label
        assert int(have[label][0]) >= 0


def test_cited_docs_are_in_the_report(compare_page):
    """Each citation of the docs is a link into the report, to the section embedded from the
    documentation the installed package carries (a pip user has no docs/ folder)."""
    seen, _, _ = compare_page
    assert "#doc-gaps--per-transfer" in seen["hrefs"]
    assert not [h for h in seen["hrefs"] if ".md" in h]
    defs = _tables(seen, "cited-docs", "docs/gaps.md: Per transfer")
    assert defs, [t["heading"] for t in seen["tables"] if t["section"] == "cited-docs"]
    rows = {r[0]["text"]: r[1]["text"] for r in defs[0][1:]}
    assert {"cs_setup", "cs_hold", "inter_byte", "transfer_period"} <= set(rows)
    assert "idle clocks are (gap − T/2) / T" in rows["inter_byte"]


def test_the_probe_sees_errors(chromium, tmp_path):
    """The checks above can fail: a console error, an image that does not decode and a
    broken link on a page are all reported."""
    p = tmp_path / "bad.html"
    p.write_text('<!DOCTYPE html><html><body><table><tr><th></th><th></th></tr><tr><td>a</td><td>1</td></tr>'
                 '</table><img title="bad.png" src="data:image/png;base64,iVBORw0KGgoAAAANSUhEUg==">'
                 '<a href="#nowhere">x</a><script>console.error("boom")</script></body></html>')
    seen, errors = _render(chromium, p)
    assert any("boom" in e for e in errors), errors
    with pytest.raises(AssertionError):
        _check_page(seen, [])
    assert seen["images"][0]["width"] == 0 and not seen["images"][0]["decoded"]
    assert seen["nowhere"] == ["#nowhere"]
    assert seen["tables"][0]["rows"][0] == [{"tag": "TH", "text": ""}, {"tag": "TH", "text": ""}]
