"""Small things users hit: a misspelt option or command, a folder given to
analyze, the batch table's width, CSV numbers, the README's version, the
PulseView hint of `decoders pvs`, detect's columns."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil

import pytest

from spigap import __version__
from spigap.cli import main
from conftest import CAPTURES, REAL, ROOT

B1 = CAPTURES / "mcp3008-rpi3-k4.4-b1.sr"
REAL_MANIFEST = ROOT / "tests" / "data" / "batch" / "captures-real.toml"


def run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("argv,want", [
    (["analyze", B1, "--fromat", "json"],
     "spigap: error: unrecognized option --fromat (did you mean --format?) (spigap analyze --help lists the options)"),
    (["check", B1, "--profle=rpi3-k4.4-vanilla"],
     "spigap: error: unrecognized option --profle (did you mean --profile?) (spigap check --help lists the options)"),
    (["batch", CAPTURES, "--cs-polarty", "low"],
     "spigap: error: unrecognized option --cs-polarty (did you mean --cs-polarity?) (spigap batch --help lists the options)"),
    (["analyze", B1, "--zzzz"], "spigap: error: unrecognized option --zzzz (spigap analyze --help lists the options)"),
    (["model", "extra"], "spigap: error: unrecognized arguments: extra (spigap model --help lists the options)"),
    (["analize", B1], "spigap: error: unknown command 'analize' (did you mean analyze?) (spigap --help lists the options)"),
])
def test_a_misspelling_gets_a_suggestion_and_the_subcommands_help(capsys, argv, want):
    rc, out, err = run(capsys, *argv)
    assert rc == 2 and out == "" and err.splitlines() == [want]


def test_analyze_a_folder_points_at_batch(capsys):
    rc, out, err = run(capsys, "analyze", REAL)
    assert rc == 2 and len(err.splitlines()) == 1
    assert err.rstrip().endswith(f"(for every capture in it: spigap batch {REAL})"), err


def test_batch_table_fits_120_columns_and_csv_json_keep_the_paths(capsys, tmp_path):
    rc, out, err = run(capsys, "batch", REAL, "--manifest", REAL_MANIFEST, "-q", "-j", "1",
                       "--csv", tmp_path / "b.csv", "--json", tmp_path / "b.json")
    assert rc == 0, err
    lines = out.splitlines()
    # the table (the messages below it, "warn: NAME: ...", are whole lines, as error rows' are)
    table = lines[:lines.index("", 3)]
    assert max(map(len, table)) <= 120, [ln for ln in table if len(ln) > 120]
    assert all(len(ln) <= 120 for ln in lines if not ln.startswith(("warn: ", "error: ", "truncated: ")))
    long_name = "nfc__st25r39xx__HydraBus_v1_HydraNFC_Shield_v2_ST25R3916_Read_All_Registers_SpaceA_B.sr"
    row = next(ln for ln in lines if ln.startswith("nfc__"))
    assert "…" in row.split()[0] and row.split()[0].endswith("_B.sr")
    # the header's columns line up with the rows' (right-aligned cells end under their header)
    head = lines[1]
    assert head.index("status") == row.index(" ok ") + 1
    assert head.index("transfers") + len("transfers") == row.index(" 80 ") + 3
    with open(tmp_path / "b.csv", newline="") as f:
        paths = [r["path"] for r in csv.DictReader(f)]
    assert str(REAL / long_name) in paths
    assert str(REAL / long_name) in [c["path"] for c in json.loads((tmp_path / "b.json").read_text())["captures"]]


FLOAT_NOISE = re.compile(r"\d{11,}")     # 3.4000000000000003e-07: 17 significant digits of nothing


def test_csv_numbers_are_rounded_to_the_resolution(capsys, tmp_path):
    rc, out, err = run(capsys, "analyze", B1, "--format", "csv")          # 50 MHz: 20 ns
    assert rc == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    cells = [v for r in rows for k, v in r.items() if k.endswith("_s") and v for v in v.split(";")]
    assert len(cells) > 5000 and not [c for c in cells if FLOAT_NOISE.search(c)]
    # one digit below 20 ns: whole nanoseconds, and still the sample-exact times
    assert all(float(c) == round(float(c), 9) for c in cells)
    assert {r["cs_hold_s"] for r in rows} >= {"3.4e-07", "4e-07", "4.2e-07"}
    # batch CSV: the same for times, 7 significant digits for Hz and rates
    rc, out, err = run(capsys, "batch", B1, REAL / "spi__adxl345__adxl345_registers.sr", "--format", "csv", "-q", "-j", "1")
    assert rc == 0, err
    for r in csv.DictReader(io.StringIO(out)):
        nums = [v for k, v in r.items() if k.endswith(("_s", "_hz")) and v]
        assert nums and not [v for v in nums if FLOAT_NOISE.search(v)], r
        assert len(re.sub(r"[^0-9]", "", f"{float(r['sclk_hz']):.15g}").strip("0")) <= 7


def test_readme_json_sample_shows_this_version():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert re.findall(r'"spigap": "([^"]+)"', text) == [__version__]


def test_decoders_pvs_names_the_file_it_wrote(capsys, tmp_path):
    cap = tmp_path / "my capture.sr"
    shutil.copy(B1, cap)
    rc, out, err = run(capsys, "decoders", "pvs", cap, "--gaps")
    hint = out.splitlines()[-1]
    assert rc == 0 and hint.startswith(f"open with:  pulseview '{cap}'") and f"'{tmp_path}/my capture.pvs'" in hint
    elsewhere = tmp_path / "setups" / "b1.pvs"
    elsewhere.parent.mkdir()
    rc, out, err = run(capsys, "decoders", "pvs", cap, "--gaps", "-o", elsewhere)
    hint = next(ln for ln in out.splitlines() if ln.startswith("open with:"))
    assert rc == 0 and hint.startswith(f"open with:  pulseview -s {elsewhere} '{cap}'")


@pytest.mark.parametrize("capture", ["spi__adxl345__adxl345_registers.sr", "spi__nrf24l01__nrf24l01-communication.sr"])
def test_detect_columns_line_up(capsys, capture):
    rc, out, err = run(capsys, "detect", REAL / capture)
    assert rc == 0
    lines = out.splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.startswith("setting "))
    head, rows = lines[i], lines[i + 1:i + 9]
    for word in ("value", "from", "conf"):
        col = head.index(word) if word != "conf" else head.index("conf") + len("conf")
        for r in rows:
            if word == "conf":
                assert re.match(r"\d\.\d\d", r[col - 4:col]), (r, word)
            else:
                assert r[col - 1] == " " and r[col] != " ", (r, word)
