"""Real captures (captures/real): oracles we did not write.

1. Every MOSI/MISO word equals what the real sigrok-cli spi decoder outputs.
2. The README's sample-granular reference timings (CS→first SCLK, last
   SCLK→CS, CS-inactive gaps: n, min, median, max) are reproduced within ±1
   sample, or within the rounding of the README's printed figure (3
   significant digits) when that is coarser.
"""

from __future__ import annotations

import hashlib
import json
import math
import re

import numpy as np
import pytest

from spigap.api import SpiConfig, analyze_device
from conftest import REAL_CAPTURES as CAPTURES
from conftest import REAL, SIGROK_SLOW_REAL, real, run_sigrok

# From captures/real/README.md, "Reference timing" (µs): (n, min, median, max)
REFERENCE = {
    "ad7920": {"setup": (320, "0.4", "0.6", "0.6"), "hold": (320, "0.4", "0.6", "0.6"),
               "gap": (319, "6.05e+03", "6.23e+03", "6.74e+03")},
    "ltc2422": {"setup": (14, "104", "106", "106"), "hold": (14, "32", "52.5", "53.6"),
                "gap": (13, "8.09e+04", "8.5e+04", "9.69e+04")},
    "adxl345": {"setup": (57, "1", "1", "1"), "hold": (57, "1", "1", "1"), "gap": (56, "4.42e+03", "4.94e+03", "5.68e+03")},
    "nrf24l01-rpi": {"setup": (38, "28.1", "38.8", "132"), "hold": (38, "29.1", "39", "491"),
                     "gap": (37, "5.92", "8.33", "2.88e+04")},
    "nrf24l01-uc": {"setup": (84, "1.42", "1.42", "1.5"), "hold": (84, "0.5", "0.75", "0.75"),
                    "gap": (83, "0.25", "101", "2.16e+04")},
    "ssi32": {"setup": (13, "10.6", "12.2", "21"), "hold": (14, "11.2", "28.2", "62.4"), "gap": (14, "6.8", "8.6", "17.4")},
    "winbond": {"setup": (148565, "0.3", "0.4", "2.2"), "hold": (148565, "0.4", "0.5", "2.4"),
                "gap": (148564, "0.7", "0.9", "37.2")},
    "atmega32": {"setup": (6354, "4", "4", "6"), "hold": (6354, "2", "4", "4"), "gap": (6354, "250", "250", "252")},
    "st25r3916": {"setup": (80, "3", "3.01", "9.07"), "hold": (80, "2.21", "2.21", "2.32"),
                  "gap": (79, "0.72", "0.778", "0.784")},
    "mrf24j40": {"setup": (50, "1", "1.06", "2.75"), "hold": (50, "1.88", "1.88", "1.94"),
                 "gap": (49, "1.5", "1.88", "2.39e+03")},
    "enc28j60": {"setup": (181, "0.48", "0.54", "0.58"), "hold": (181, "0.52", "0.6", "5.04"),
                 "gap": (181, "0.1", "0.44", "1.46e+05")},
    "sdcard": {"setup": (1, "2.92", "2.92", "2.92"), "hold": (1, "0.75", "0.75", "0.75")},
}

_cache = {}


def analysis(name):
    if name not in _cache:
        f, cfg, _, rate = CAPTURES[name]
        _cache[name] = analyze_device(real(f), SpiConfig(**cfg), samplerate=rate)
    return _cache[name]


def sigrok_words(name):
    """{"mosi": [...], "miso": [...]}: the words of sigrok-cli's spi decoder, both lines from one
    run (its JSON trace output names each annotation's row, "MOSI data" / "MISO data")."""
    f, _, opts, rate = CAPTURES[name]
    # words do not depend on the samplerate, so the wrong ad7920 metadata is harmless here
    out = run_sigrok(["-i", str(real(f)), "-P", f"spi:{opts}", "-A", "spi=mosi-data:miso-data",
                      "--protocol-decoder-jsontrace"], decoders_dir=None)
    words: dict[str, list[int]] = {"mosi": [], "miso": []}
    for e in json.loads(out)["traceEvents"]:
        if e["ph"] == "B":
            words[{"MOSI data": "mosi", "MISO data": "miso"}[e["tid"]]].append(int(e["name"], 16))
    return words


def test_real_captures_are_the_documented_files():
    """captures/real/ holds exactly the files its README lists, byte for byte
    (size and sha256 of the original), and every file the tests use is one."""
    readme = (REAL / "README.md").read_text()
    rows = re.findall(r"^\| `([^`]+)` \| [^|]+ \| (\d+) \| `([0-9a-f]{64})` \|$", readme, re.M)
    files = {p.name for p in REAL.iterdir() if p.name != "README.md"}
    assert {r[0] for r in rows} == files
    for name, size, sha in rows:
        data = (REAL / name).read_bytes()
        assert (len(data), hashlib.sha256(data).hexdigest()) == (int(size), sha), name
    assert {f for f, *_ in CAPTURES.values()} <= files


# the README's short names for the timing table's rows
README_ROWS = {"ad7920 (at 5 MHz)": "ad7920", "nrf24l01, rpi bus": "nrf24l01-rpi", "nrf24l01, uc bus": "nrf24l01-uc"}


def test_reference_table_is_the_readme_table():
    """REFERENCE above is the README's "Reference timings" table, number for number."""
    readme = (REAL / "README.md").read_text().split("## Reference timings", 1)[1]
    seen = set()
    for line in readme.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 4 or not re.match(r"^\d[\d ]*: ", cells[1]):
            continue
        name = README_ROWS.get(cells[0], cells[0])
        seen.add(name)
        for kind, cell in zip(("setup", "hold", "gap"), cells[1:]):
            m = re.match(r"^([\d ]+): ([\d. ]+(?: / [\d. ]+)*)$", cell)
            if kind not in REFERENCE[name]:
                assert m is None, (name, kind, cell)
                continue
            n, lo, med, hi = REFERENCE[name][kind]
            vals = [float(v.replace(" ", "")) for v in m[2].split(" / ")]
            vals = vals * 3 if len(vals) == 1 else vals
            assert int(m[1].replace(" ", "")) == n, (name, kind)
            assert vals == pytest.approx([float(lo), float(med), float(hi)], rel=1e-9), (name, kind)
    assert seen == set(REFERENCE)


# the module's analyses are kept in _cache: its tests share one worker (each analysis once a run)
pytestmark = pytest.mark.xdist_group("real_captures")


# word for word on every real capture; the two sigrok-cli takes 10-30 s of CPU to decode
# (SIGROK_SLOW_REAL: winbond, 148 565 transfers; enc28j60, 1 G samples) are `slow` (make test-all,
# CI): make test compares the other ten configurations (multi-chunk files among them), and keeps
# both big captures' reference timings below
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if CAPTURES[n][0] in SIGROK_SLOW_REAL else n
                                  for n in sorted(CAPTURES)])
def test_words_equal_sigrok_cli(sigrok_cli, name):
    a = analysis(name)
    words = sigrok_words(name)
    for line, ours in (("mosi", a.mosi), ("miso", a.miso)):
        if getattr(a.cfg, line) is None:
            continue
        theirs = words[line]
        assert len(theirs) > 0
        assert len(ours) == len(theirs), f"{name} {line}: {len(ours)} words vs sigrok-cli {len(theirs)}"
        assert np.array_equal(ours, np.array(theirs, dtype=np.uint64)), f"{name} {line} words differ"


def _tolerance(printed: str, tick_us: float) -> float:
    v = float(printed)
    if v == 0:
        return tick_us
    digits = 3
    exp = math.floor(math.log10(abs(v)))
    half_unit = 0.5 * 10 ** (exp - digits + 1)
    return max(tick_us, half_unit) + 1e-9


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_reference_timings(name):
    a = analysis(name)
    tick_us = a.tick_s * 1e6
    complete = ~a.partial_start & ~a.partial_end
    ours = {
        "setup": a.cs_setup[complete],
        "hold": a.cs_hold[~a.partial_end],
        "gap": a.gap_before[1:],
    }
    for key, (n, lo, med, hi) in REFERENCE[name].items():
        v = ours[key][~np.isnan(ours[key])] * tick_us
        assert len(v) == n, f"{name} {key}: n={len(v)}, README says {n}"
        for what, printed, got in (("min", lo, v.min()), ("median", med, np.median(v)), ("max", hi, v.max())):
            tol = _tolerance(printed, tick_us)
            assert abs(got - float(printed)) <= tol, \
                f"{name} {key} {what}: {got:.6g} µs vs README {printed} (±{tol:.3g})"


def test_enc28j60_inter_transfer_gaps_match_readme():
    # README: "SCLK idle gaps > 2.5x median edge spacing inside CS windows: n=223;
    # min 0.66 / median 0.68 / max 4.1 µs" -- those are our inter-transfer gaps
    a = analysis("enc28j60")
    v = a.gap_values("inter_transfer") * a.tick_s * 1e6
    assert len(v) == 223
    assert v.min() == pytest.approx(0.66, abs=0.005) and np.median(v) == pytest.approx(0.68, abs=0.005)
    assert v.max() == pytest.approx(4.1, abs=0.05)


def test_cs_less_capture_reports_cs_metrics_unavailable():
    a = analysis("ade7758")
    assert a.n == 8 and len(a.mosi) == 15
    assert not a.available("cs_setup") and not a.available("cs_change")
    assert len(a.gap_values("idle")) == 7


def test_unnamed_channels_without_inference_need_explicit_mapping():
    """A SpiConfig built in code infers no setting, but roles no name settles still come
    from the signals; the old error remains for a capture whose signals show no clock
    (tests/test_infer.py)."""
    a = analyze_device(real("spi__ad7920__ad7920_fast_read.sr"), SpiConfig(), samplerate=5e6)
    assert (a.cfg.clk, a.cfg.miso, a.cfg.cs) == ("0", "1", "2")
    assert a.sources["clk"].how == "inferred" and a.sources["mode"].how == "given"


@pytest.mark.parametrize("name", ["spi__ad7920__ad7920_fast_read.sr", "spi__ltc2422__ltc2422_read_adc.sr"])
def test_one_data_line_of_a_converter_is_its_output(name):
    """The AD7920's and the LTC2422's only data line is the converter's DOUT (MISO: sigrok-test's
    test.conf decodes it as miso). Some of its changes land a sample after SCLK's edge (the
    converter's output delay), where a controller launches MOSI in the edge's very sample: taken
    as MISO, at the share of such lines that were MISO on sigrok-dumps (docs/inference.md,
    "Calibration"), under 0.75, with the other reading and the option that settles it named.
    Both were answered MOSI before (0.60 and 0.90)."""
    from spigap.core.infer import calibration

    a = analyze_device(real(name), SpiConfig(infer=frozenset({"mode", "cs_polarity", "wordsize"})))
    src = a.sources["miso"]
    assert (a.cfg.clk, a.cfg.miso, a.cfg.mosi, a.cfg.cs) == ("0", "1", None, "2")
    assert src.how == "inferred" and src.basis == "one, after the edge"
    assert src.confidence == calibration.direction("one, after the edge")[1]
    assert 0.6 <= src.confidence < 0.75
    assert "two readings, MISO" in src.note and "give --mosi 1" in src.note
