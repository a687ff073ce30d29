"""spigap report: sections present, images are real PNGs (decoded by matplotlib), --png files."""

from __future__ import annotations

import base64
import io
import re

import numpy as np
import pytest

from spigap.cli import main
from spigap.synth import scenario, write
from conftest import AD7606_NEW as NEW
from conftest import AD7606_OLD as OLD
from conftest import CAPTURES

PNG_SIG = b"\x89PNG\r\n\x1a\n"


def _images(html: str) -> list[bytes]:
    return [base64.b64decode(m) for m in re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)]


def _decode(png: bytes):
    import matplotlib.image as mpimg

    assert png.startswith(PNG_SIG)
    img = mpimg.imread(io.BytesIO(png), format="png")
    assert img.ndim == 3 and img.shape[0] > 100 and img.shape[1] > 300
    # not a blank canvas: a plot has many distinct colours
    assert len(np.unique(img.reshape(-1, img.shape[2])[::7], axis=0)) > 20
    return img


# the compare report is drawn once a run (conftest.ad7606_compare_report) for this module and
# test_report_browser.py: one worker runs both
pytestmark = pytest.mark.xdist_group("ad7606_report")


@pytest.fixture(scope="module")
def compare_report(ad7606_compare_report):
    out, pngs = ad7606_compare_report
    return out.read_text(encoding="utf-8"), pngs


def test_sections_present(compare_report):
    html, _ = compare_report
    for n in (1, 2):
        for part in ("summary", "gaps", "stalls", "histograms", "timeline", "rate"):
            assert f'id="capture-{n}-{part}"' in html, (n, part)
    for sec in ('id="compare"', 'id="compare-attribution"', 'id="compare-overlays"'):
        assert sec in html
    # the title is escaped, the verdict and the diagnosis are there
    assert "AD7606 &lt;6.6 vs 6.12&gt;" in html
    assert "verdict-regression" in html and "CS setup + hold" in html
    # every timing figure carries its resolution
    assert "±1 sample (20 ns)" in html
    # the stalls of the 6.12 capture are listed with their times
    assert html.count("context switch") > 5


def test_self_contained(compare_report):
    html, _ = compare_report
    assert not re.search(r'(src|href)="(https?:|//|file:)', html)
    assert "<script" not in html


def test_images_are_valid_pngs(compare_report):
    html, pngs = compare_report
    imgs = _images(html)
    # per capture: 6 histograms (setup, hold, inter-byte, context switch, duration, period) + timeline + rate;
    # compare: attribution + 6 overlays + rate
    assert len(imgs) == 2 * 8 + 1 + 6 + 1
    for png in imgs:
        _decode(png)
    files = sorted(pngs.glob("*.png"))
    assert len(files) == len(imgs)
    assert {f.read_bytes() for f in files} == set(imgs)
    names = {f.name for f in files}
    assert "compare-attribution.png" in names
    assert "01-ad7606-pi5-k6.6.31-hist-transfer_period.png" in names
    assert "02-ad7606-pi5-k6.12.25-timeline.png" in names


def test_check_section_uses_the_model(tmp_path):
    out = tmp_path / "c.html"
    rc = main(["report", str(OLD), "--profile", "pi5-k6.6.31-ad7606", "-o", str(out)])
    html = out.read_text()
    assert rc == 0
    assert 'id="capture-1-check"' in html
    assert "pi5-k6.6.31-ad7606" in html and "transfer_period.p50" in html
    # the profile's rows pass (the device's t18, t19 and t22 are MARGINAL: at 50 MS/s their
    # 7-17 ns lie within one sample; docs/pin-timing.md)
    assert "transfer_period.p50</td><td><span class='v-PASS'>" in html
    # the mismatched profile fails
    rc = main(["report", str(NEW), "--profile", "pi5-k6.6.31-ad7606", "-o", str(out)])
    assert rc == 0 and 'class="v-FAIL"' in out.read_text()


def test_events_section(tmp_path):
    sc = scenario.Scenario.from_toml(CAPTURES / "ad7606-douta-after.toml")
    p = tmp_path / "ad.sr"
    write(sc, p)
    out = tmp_path / "e.html"
    rc = main(["report", str(p), "--mode", "2", "--event", "CONVST:rise", "--event", "BUSY:fall", "-o", str(out)])
    html = out.read_text()
    assert rc == 0
    assert 'id="capture-1-events"' in html
    assert "CONVST:rise → BUSY:fall" in html and "BUSY:fall → CS:assert" in html
    for png in _images(html):
        _decode(png)


def test_png_only_and_errors(tmp_path, capsys):
    rc = main(["report", str(CAPTURES / "mcp3008-rpi3-k4.4-b10.sr"), "--png", str(tmp_path / "p")])
    assert rc == 0
    files = list((tmp_path / "p").glob("*.png"))
    # b10 has cs_change and context switch: 7 histograms + timeline + rate
    assert len(files) == 9
    capsys.readouterr()
    for argv in (["report", str(OLD)],                                        # no output
                 ["report", str(OLD), "--before", str(OLD), "-o", str(tmp_path / "x.html")],
                 ["report", "/nonexistent.sr", "-o", str(tmp_path / "x.html")],
                 ["report", str(OLD), "-o", str(tmp_path / "no" / "dir" / "x.html")]):
        rc = main(argv)
        err = capsys.readouterr().err
        assert rc == 2, argv
        assert len(err.strip().splitlines()) == 1, err



def _cell(html: str, name: str) -> str:
    m = re.search(rf"<t[hd][^>]*>{re.escape(name)}</t[hd]><td[^>]*>([^<]*)</td>", html)
    assert m, name
    return m.group(1)


def test_idle_clocks_as_the_text_prints_them(compare_report, capsys):
    """The Summary's idle clocks are the text output's figure (units.fmt_clocks: on the grid
    one sample draws, never below 0), not the raw median (-0.02 on the 6.6.31 capture)."""
    html, _ = compare_report
    capsys.readouterr()
    assert main(["analyze", str(OLD)]) == 0
    text = capsys.readouterr().out
    want = re.search(r"idle clocks between words p50 (.+)$", text, re.M).group(1)
    assert want == "0.0 (±0.16, one sample)"
    assert _cell(html, "idle clocks between words (p50)") == want


def test_no_empty_header_rows(compare_report):
    html, _ = compare_report
    assert not re.search(r"<tr>(<th[^>]*></th>)+</tr>", html)
    # the summaries: each row headed by its name
    assert '<th class="l" scope="row">sample rate</th>' in html


def test_cited_docs_ship_and_are_embedded(compare_report):
    """The docs a report cites are links to their sections inside the report, rendered from
    the documentation the installed package carries (``spigap/docs``); a name like
    "docs/gaps.md" never stands as plain text that a pip user cannot open."""
    import importlib.resources

    from conftest import ROOT

    html, _ = compare_report
    shipped = importlib.resources.files("spigap").joinpath("docs")
    for doc in (ROOT / "docs").glob("*.md"):
        assert shipped.joinpath(doc.name).read_text(encoding="utf-8") == doc.read_text(encoding="utf-8"), doc.name
    # every mention of a document before the appendix (which holds them) is a link into it
    body, _, cited = html.partition('<section id="cited-docs">')
    assert cited
    text_only = re.sub(r"<a href=\"#[^\"]+\">.*?</a>", "", body, flags=re.S)
    assert not re.findall(r"docs/[a-z-]+\.md", text_only)
    links = set(re.findall(r'<a href="#(doc-[^"]+)"', html))
    ids = set(re.findall(r' id="([^"]+)"', html))
    assert "doc-gaps--per-transfer" in links and links <= ids
    assert "<td><code>inter_byte</code></td>" in html          # the definitions table, rendered


def test_every_citation_of_the_report_resolves():
    """Each section the report's code cites (``cited.link(doc, heading)``) is in the installed
    docs, so a renamed heading fails here, not in a user's report."""
    import importlib.resources

    from spigap.report import cited

    src = "".join(f.read_text(encoding="utf-8") for f in importlib.resources.files("spigap").joinpath("report")
                  .iterdir() if f.name.endswith(".py"))
    calls = re.findall(r"cited\.link\(['\"]([\w.-]+)['\"], ['\"]([^'\"]+)['\"]\)", src)
    assert len(calls) >= 5, calls
    for doc, heading in calls:
        assert cited.section(doc, heading).strip(), (doc, heading)
