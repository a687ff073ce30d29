"""``spigap batch``: discovery, the process pool and its error isolation, manifests,
matrices from file names and labels, CSV/JSON, a local Dask cluster, and the
held-out check that every real capture analyzes in batch without an error row."""

from __future__ import annotations

import csv
import io
import json
import multiprocessing
import os
import pathlib
import shutil

import pytest

from spigap.api import analyze_device
from spigap.cli.common import capture_option_parser
from spigap.batch import discover, execute, manifest, matrix, table, worker
from spigap.cli import main
from spigap.errors import UsageError
from spigap.output.jsonout import to_dict
from spigap.synth import scenario, write
from conftest import CAPTURES, REAL, ROOT

REAL_MANIFEST = ROOT / "tests" / "data" / "batch" / "captures-real.toml"

# seed 004's axes: kernel x load x SCLK; each cell gets its own context-switch time
KERNELS = ("smp", "rt")
LOADS = ("noload", "stress")
SCLKS = ("500kHz", "2MHz")      # natural order would put 2MHz first: the matrix must not
CTX_US = {("smp", "noload"): 20, ("smp", "stress"): 80, ("rt", "noload"): 30, ("rt", "stress"): 40}
MESSAGES = 30


def synth(path, *, sclk="2MHz", ctx_us=20.0, channels=None, **extra) -> pathlib.Path:
    over = {"sclk": sclk, "samplerate": "20MHz", "messages": MESSAGES, "transfers_per_message": 1,
            "words_per_transfer": 2, "context_switch": f"{ctx_us}us",
            "sigma": {"context_switch": "200ns"}, "seed": 7, **extra}
    if channels:
        over["channels"] = channels
    write(scenario.Scenario.from_toml(None, over), path, chunk_bytes=1024)
    return pathlib.Path(path)


@pytest.fixture(scope="module")
def matrix_dir(tmp_path_factory) -> pathlib.Path:
    d = tmp_path_factory.mktemp("matrix")
    for k in KERNELS:
        for load in LOADS:
            for s in SCLKS:
                synth(d / f"{k}-{load}-{s}.sr", sclk=s, ctx_us=CTX_US[k, load])
    (d / "README.md").write_text("not a capture: directory expansion must skip it\n")
    return d


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    rc = main(["batch", *map(str, argv)])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return rc, out, err


def one_line_error(err: str) -> str:
    lines = [l for l in err.splitlines() if l.startswith("spigap: error:")]
    assert len(lines) == 1, err
    return lines[0]


# ------------------------------------------------------------ pool and error isolation
def test_pool_isolates_broken_files(tmp_path, matrix_dir, capsys):
    bad = tmp_path / "garbage.sr"
    bad.write_bytes(b"PK\x03\x04 this is no zip at all" * 10)
    data = (matrix_dir / "rt-stress-2MHz.sr").read_bytes()
    cut = tmp_path / "cut.sr"
    cut.write_bytes(data[: len(data) * 3 // 10])
    rc, out, err = run_cli(capsys, matrix_dir, bad, cut, tmp_path / "missing.sr", "-j", "2",
                           "--format", "json")
    assert rc == 2
    d = json.loads(out)
    rows = {pathlib.Path(r["path"]).name: r for r in d["captures"]}
    assert len(rows) == 8 + 3
    good = [r for n, r in rows.items() if n not in ("garbage.sr", "cut.sr", "missing.sr")]
    assert all(r["status"] == "ok" and r["transfers"] == MESSAGES and r["error"] is None for r in good)
    for name in ("garbage.sr", "missing.sr"):
        r = rows[name]
        assert r["status"] == "error" and r["transfers"] is None and r["analysis"] is None
        assert name in r["error"] and "\n" not in r["error"]
    assert "no such file" in rows["missing.sr"]["error"]
    assert rows["cut.sr"]["status"] == "truncated"           # partial results, and said so
    assert 0 < rows["cut.sr"]["transfers"] < MESSAGES
    assert d["summary"] == {"captures": 11, "ok": 8, "warn": 0, "truncated": 1, "failed": 2}
    assert "3 of 11 captures not fully analyzed" in one_line_error(err)


def test_rows_keep_input_order_and_match_a_single_analysis(matrix_dir, capsys):
    rc, out, _ = run_cli(capsys, matrix_dir, "-j", "2", "--format", "csv")
    assert rc == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    names = [pathlib.Path(r["path"]).name for r in rows]
    assert names == sorted(names, key=discover.natural_key)
    r = rows[names.index("smp-stress-500kHz.sr")]
    d = to_dict(analyze_device(matrix_dir / "smp-stress-500kHz.sr"))
    assert int(r["transfers"]) == d["summary"]["transfers"]
    assert float(r["sclk_hz"]) == d["summary"]["sclk_hz"]
    assert float(r["context_switch_p99_s"]) == d["gaps"]["context_switch"]["p99_s"]
    assert float(r["cs_setup_p50_s"]) == d["gaps"]["cs_setup"]["p50_s"]
    assert r["inter_transfer_p50_s"] == ""                    # none in this capture: empty, not 0
    assert r["warnings"] == str(len(d["warnings"])) and r["error"] == "" and r["status"] == "ok"


_ANALYZE_JOB = worker.analyze_job


def _crashing_analyze_job(job):
    if job.path.endswith("rt-noload-2MHz.sr"):
        os._exit(9)             # what the OOM killer or a segfault looks like to the pool
    return _ANALYZE_JOB(job)


@pytest.mark.skipif(multiprocessing.get_start_method() != "fork",
                    reason="the patched worker reaches the pool only through fork")
def test_a_worker_that_dies_costs_only_its_own_row(matrix_dir, monkeypatch):
    monkeypatch.setattr(worker, "analyze_job", _crashing_analyze_job)
    found = discover.expand([matrix_dir])
    jobs = [worker.Job(i, f.path, f.path) for i, f in enumerate(found)]
    rows = []
    execute.run_local(jobs, rows.append, workers=2)
    assert sorted(r["index"] for r in rows) == list(range(len(jobs)))
    dead = [r for r in rows if r["status"] != "ok"]
    assert [pathlib.Path(r["path"]).name for r in dead] == ["rt-noload-2MHz.sr"]
    assert "worker process died" in dead[0]["error"]


def test_progress_bar_only_on_a_terminal_and_not_with_quiet(matrix_dir, monkeypatch, capsys):
    class Tty(io.StringIO):
        def isatty(self):
            return True

    files = sorted(matrix_dir.glob("smp-*.sr"))
    for quiet, expect_bar in (((), True), (("--quiet",), False)):
        tty = Tty()
        monkeypatch.setattr("sys.stderr", tty)
        assert main(["batch", *map(str, files), "-j", "1", *quiet]) == 0
        assert (f"/{len(files)} [" in tty.getvalue()) is expect_bar
        monkeypatch.undo()
    capsys.readouterr()
    assert main(["batch", *map(str, files), "-j", "1"]) == 0     # capsys: not a TTY
    assert capsys.readouterr().err == ""



def test_the_command_in_its_own_process(matrix_dir, tmp_path):
    """The installed entry point end to end: rows on stdout, one error line, exit 2."""
    import subprocess
    import sys

    bad = tmp_path / "bad.sr"
    bad.write_bytes(b"\x00" * 100)
    proc = subprocess.run([sys.executable, "-m", "spigap", "batch", str(matrix_dir), str(bad),
                           "--format", "csv"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == ["spigap: error: 1 of 9 captures not fully analyzed (see the error rows)"]
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert [r["status"] for r in rows].count("ok") == 8 and rows[-1]["status"] == "error"

# ------------------------------------------------------------ discovery
def test_directories_and_globs_expand_to_capture_files(tmp_path, matrix_dir):
    sub = tmp_path / "a" / "b"
    sub.mkdir(parents=True)
    shutil.copy(matrix_dir / "rt-noload-2MHz.sr", sub / "x10.sr")
    shutil.copy(matrix_dir / "rt-noload-2MHz.sr", sub / "x9.sr")
    shutil.copy(matrix_dir / "rt-noload-2MHz.sr", tmp_path / "a" / ".hidden.sr")
    (sub / "notes.txt").write_text("x")           # .txt: a CSV reader's extension, but no capture
    (sub / "scope.dat").write_text("x")
    skipped = []
    got = discover.expand([tmp_path / "a"], skipped=skipped)
    assert [pathlib.Path(f.path).name for f in got] == ["x9.sr", "x10.sr"]
    assert all(f.error is None for f in got)
    assert [pathlib.Path(p).name for p in skipped] == ["notes.txt"]
    # glob, the same files again (analyzed once), a literal .txt (explicit files are taken)
    got = discover.expand([str(tmp_path / "**" / "*.sr"), str(sub / "x9.sr"), str(sub / "notes.txt")])
    assert [pathlib.Path(f.path).name for f in got] == ["x9.sr", "x10.sr", "notes.txt"]
    # a glob spelling out an extension no reader claims keeps it (--input-format will tell)
    assert [pathlib.Path(f.path).name for f in discover.expand([str(sub / "*.dat")])] == ["scope.dat"]
    # the manifest beside the captures is not a capture
    assert discover.expand([sub], exclude=[sub / "x9.sr"])[0].path.endswith("x10.sr")
    # nothing there: one entry with the reason, not a crash and not silence
    got = discover.expand([str(tmp_path / "nope" / "*.sr"), str(tmp_path / "absent.sr")])
    assert [f.error for f in got] == ["matches no capture file", "no such file"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "holds no capture file" in discover.expand([empty])[0].error


def test_a_saleae_export_folder_is_one_capture(tmp_path):
    exp = tmp_path / "runs" / "rt-stress"
    exp.mkdir(parents=True)
    for n in (0, 1, 2):
        (exp / f"digital_{n}.bin").write_bytes(b"<SALEAE>" + bytes(40))
    (tmp_path / "runs" / "x.sr").write_bytes(b"PK\x03\x04")
    names = lambda got: [os.path.relpath(f.path, tmp_path) for f in got]
    assert names(discover.expand([tmp_path / "runs"])) == [os.path.join("runs", "rt-stress"),
                                                          os.path.join("runs", "x.sr")]
    assert names(discover.expand([exp])) == [os.path.join("runs", "rt-stress")]
    assert names(discover.expand([str(tmp_path / "**" / "*.bin")])) == [os.path.join("runs", "rt-stress")]


def test_known_extensions_come_from_the_readers():
    from spigap.io import READERS

    exts = discover.known_extensions()
    assert ".sr" in exts and ".dsl" in exts
    # every extension of every reader (raw samples have none: only --input-format raw)
    assert set(exts) == {e for spec in READERS.values() for e in spec.extensions}


# ------------------------------------------------------------ matrix
def _expected_cell(kernel, load):
    return CTX_US[kernel, load] * 1e-6


@pytest.mark.parametrize("grouping", [
    ("--pattern", "{kernel}-{load}-{sclk}.sr"),
    ("--fields", "kernel,load,sclk"),
    ("--regex", r"(?P<kernel>smp|rt)-(?P<load>[a-z]+)-(?P<sclk>\w+)\.sr$"),
])
def test_matrix_from_file_names(matrix_dir, tmp_path, capsys, grouping):
    mcsv = tmp_path / "m.csv"
    rc, out, _ = run_cli(capsys, matrix_dir, *grouping, "--metric", "context_switch.p50",
                         "--metric", "sclk_hz", "-j", "2", "--matrix-csv", mcsv)
    assert rc == 0
    rows = list(csv.reader(io.StringIO(mcsv.read_text())))
    # seed 004's layout: SCLK down, kernel/load across
    assert rows[0] == ["metric", "sclk", "rt/noload", "rt/stress", "smp/noload", "smp/stress"]
    body = [r for r in rows[1:] if r[0] == "context_switch.p50_s"]
    assert [r[1] for r in body] == ["500kHz", "2MHz"]               # by value, not by text
    for r in body:
        for col, text in zip(rows[0][2:], r[2:]):
            kernel, load = col.split("/")
            assert float(text) == pytest.approx(_expected_cell(kernel, load), abs=2e-6)
    sclk = {r[1]: [float(x) for x in r[2:]] for r in rows[1:] if r[0] == "sclk_hz"}
    assert sclk["500kHz"] == pytest.approx([500e3] * 4, rel=1e-3)
    assert sclk["2MHz"] == pytest.approx([2e6] * 4, rel=1e-3)
    # the text matrix: header and a row per SCLK, after the capture table
    text = out.split("context_switch.p50_s\n", 1)[1]
    lines = text.splitlines()
    assert lines[0].split() == ["sclk", "\\", "kernel/load", "rt/noload", "rt/stress", "smp/noload",
                                "smp/stress"]
    assert lines[1].split()[0] == "500kHz" and lines[1].count("µs") == 4
    assert lines[2].split()[0] == "2MHz"


def test_matrix_axes_reduce_and_failed_cells(matrix_dir, tmp_path, capsys):
    bad = tmp_path / "rt-stress-9MHz.sr"
    bad.write_bytes(b"not a capture")
    rc, out, err = run_cli(capsys, matrix_dir, bad, "--pattern", "{kernel}-{load}-{sclk}.sr",
                           "--rows", "kernel", "--cols", "load", "--metric", "transfers",
                           "--reduce", "max", "--format", "json", "-j", "2")
    assert rc == 2
    (m,) = json.loads(out)["matrices"]
    assert m["rows"] == ["kernel"] and m["cols"] == ["load"] and m["reduce"] == "max"
    assert m["row_keys"] == [["rt"], ["smp"]] and m["col_keys"] == [["noload"], ["stress"]]
    cells = {(c["row"]["kernel"], c["col"]["load"]): c for c in m["cells"]}
    assert cells["smp", "noload"]["n"] == 2 and cells["smp", "noload"]["value"] == MESSAGES
    assert cells["rt", "stress"]["failed"] == 1 and cells["rt", "stress"]["n"] == 2
    # --order: seed 004's column order (SMP before RT), the load across, the kernel inside
    rc, out, _ = run_cli(capsys, matrix_dir, "--pattern", "{kernel}-{load}-{sclk}.sr",
                         "--cols", "load,kernel", "--order", "kernel=smp,rt", "--format", "json")
    (m,) = json.loads(out)["matrices"]
    assert m["col_keys"] == [["noload", "smp"], ["noload", "rt"], ["stress", "smp"], ["stress", "rt"]]
    assert m["rows"] == ["sclk"]
    # text: the failed capture marks its cell
    rc, out, _ = run_cli(capsys, matrix_dir, bad, "--pattern", "{kernel}-{load}-{sclk}.sr",
                         "--rows", "kernel", "--cols", "load", "--metric", "transfers", "-j", "2")
    assert f"{MESSAGES}*" in out and "some captures of this cell failed" in out


def test_unmatched_names_are_listed_not_dropped(matrix_dir, tmp_path, capsys):
    shutil.copy(matrix_dir / "rt-noload-2MHz.sr", tmp_path / "odd_name.sr")
    rc, out, _ = run_cli(capsys, matrix_dir, tmp_path / "odd_name.sr",
                         "--pattern", "{kernel}-{load}-{sclk}.sr", "-j", "2")
    assert rc == 0
    assert "not in the matrix (1): odd_name.sr" in out
    assert "odd_name.sr" in out.split("transfer_rate_hz")[0]    # still a row of its own


def test_label_order_and_pattern_compilation():
    assert matrix.order(["10MHz", "2MHz", "500kHz"]) == ["500kHz", "2MHz", "10MHz"]
    assert matrix.order(["100us", "5us", "20ms"]) == ["5us", "100us", "20ms"]
    assert matrix.order(["cap-10", "cap-9", "b"]) == ["b", "cap-9", "cap-10"]
    fs = matrix.FieldSource(pattern="{kernel}/{load}_{}_{sclk}.sr")
    assert fs.labels("/x/rt/stress_run3_10MHz.sr") == {"kernel": "rt", "load": "stress", "sclk": "10MHz"}
    assert fs.labels("/x/rt/other.sr") is None
    for bad in ("{a}-{a}.sr", "no-fields.sr", "{1x}.sr"):
        with pytest.raises(UsageError):
            matrix.FieldSource(pattern=bad)
    with pytest.raises(UsageError):
        matrix.FieldSource(regex="(unnamed)")


def test_metric_names():
    assert table.parse_metric("context_switch.p99") == "context_switch.p99_s"
    assert table.parse_metric("context_switch_p99_s") == "context_switch.p99_s"
    assert table.parse_metric("cs_setup.n") == "cs_setup.n"
    assert table.parse_metric("transfer_rate_hz") == "transfer_rate_hz"
    for name in table.metric_names():
        assert table.parse_metric(name) == name
    with pytest.raises(ValueError):
        table.parse_metric("context_swtich.p99")


# ------------------------------------------------------------ outputs
def test_csv_and_json_files_beside_the_text_table(matrix_dir, tmp_path, capsys):
    c, j = tmp_path / "rows.csv", tmp_path / "all.json"
    rc, out, _ = run_cli(capsys, matrix_dir, "--pattern", "{kernel}-{load}-{sclk}.sr",
                         "--csv", c, "--json", j, "-j", "2")
    assert rc == 0 and "\n8 captures: 8 ok\n" in out
    rows = list(csv.DictReader(io.StringIO(c.read_text())))
    assert len(rows) == 8
    assert list(rows[0])[:4] == ["path", "kernel", "load", "sclk"]          # labels after the path
    for col in ("status", "transfers", "transfer_rate_hz", "sclk_hz", "cs_setup_p50_s",
                "context_switch_p99_s", "idle_p50_s", "warnings", "error"):
        assert col in rows[0]
    d = json.loads(j.read_text())
    assert d["kind"] == "batch" and d["summary"]["ok"] == 8 and len(d["captures"]) == 8
    cap = d["captures"][0]
    assert cap["labels"] == {k: cap[k] for k in ("kernel", "load", "sclk")}
    assert cap["analysis"]["schema"] == 1 and "gaps" in cap["analysis"]     # the full to_dict
    assert d["matrices"][0]["metric"] == "transfer_rate_hz"
    assert [r["path"] for r in rows] == [x["path"] for x in d["captures"]]


# ------------------------------------------------------------ manifest
def _odd_channel_captures(tmp_path) -> list[pathlib.Path]:
    chans = {"clk": "A0", "mosi": "A1", "miso": "A2", "cs": "A3"}
    return [synth(tmp_path / f"run{i}.sr", channels=chans, ctx_us=20 + 10 * i, cs_polarity="high")
            for i in range(3)]


def test_manifest_toml_gives_per_file_options_and_labels(tmp_path, capsys):
    caps = _odd_channel_captures(tmp_path)
    rc, out, _ = run_cli(capsys, tmp_path, "-j", "2", "--format", "json")
    # no name says which channel is which: each file's roles and CS polarity come from its signals
    rows = json.loads(out)["captures"]
    # MOSI and MISO carry the same bits (a loopback), told apart only by MISO's output delay (it lags
    # SCLK's edges: "two, lag", a basis measured once on sigrok-dumps, right; under the two-line
    # bases' fitted prior, all of them right since polling counts as no evidence (issue 32: a = 10,
    # b = 0.1), it states 0.95 (0.85 under b = 1.26): ok, not warn as at 0.65 before)
    assert rc == 0 and all(r["status"] == "ok" for r in rows)
    assert all(r["analysis"]["settings"]["sources"]["mosi"]["confidence"] == 0.95
               and "A2 lags them" in r["analysis"]["settings"]["sources"]["mosi"]["note"] for r in rows)
    st = rows[0]["analysis"]["settings"]
    assert (st["clk"], st["cs"], st["cs_polarity"]) == ("A0", "A3", "high")
    assert st["sources"]["clk"]["from"] == "inferred"
    m = tmp_path / "m.toml"
    m.write_text("""
[defaults]
clk = "A0"
cs = "A3"
cs_polarity = "high"

[[capture]]
path = "run*.sr"
mosi = "A1"
labels = { board = "pi" }

[[capture]]
path = "run2.sr"          # later entries override earlier ones
miso = "A2"
labels = { board = "imx", kernel = "rt" }
""")
    rc, out, err = run_cli(capsys, tmp_path, "--manifest", m, "-j", "2", "--format", "json",
                           "--rows", "board", "--metric", "context_switch.p50_s")
    assert rc == 0, err
    d = json.loads(out)
    by = {pathlib.Path(r["path"]).name: r for r in d["captures"]}
    assert [by[c.name]["status"] for c in caps] == ["ok"] * 3
    run0 = by["run0.sr"]["analysis"]["settings"]       # miso not in its manifest entries: from the signals
    assert run0["miso"] == "A2" and run0["sources"]["miso"]["from"] == "inferred"
    assert run0["sources"]["mosi"]["from"] == "given"
    assert by["run2.sr"]["analysis"]["settings"]["miso"] == "A2"
    assert by["run2.sr"]["labels"] == {"board": "imx", "kernel": "rt"}
    assert by["run1.sr"]["labels"] == {"board": "pi"}
    (mx,) = d["matrices"]
    cells = {c["row"]["board"]: c for c in mx["cells"]}
    assert cells["pi"]["n"] == 2 and cells["imx"]["value"] == pytest.approx(40e-6, abs=2e-6)


def test_manifest_alone_names_the_captures_and_csv_works(tmp_path, capsys):
    _odd_channel_captures(tmp_path)
    m = tmp_path / "m.csv"
    m.write_text("# options and labels per file\n"
                 "path,clk,mosi,miso,cs,cs-polarity,transfers_per_message,kernel,load\n"
                 "run0.sr,A0,A1,,A3,high,1,smp,noload\n"
                 "run1.sr,A0,A1,,A3,high,auto,smp,stress\n"
                 "run2.sr,A0,,A2,A3,high,,rt,stress\n")
    rc, out, err = run_cli(capsys, "--manifest", m, "-j", "2", "--format", "json",
                           "--rows", "kernel", "--cols", "load", "--metric", "transfers")
    assert rc == 0, err
    # the same with the folder as input: the manifest inside is not taken for a capture
    rc2, out2, err2 = run_cli(capsys, tmp_path, "--manifest", m, "-j", "2", "--format", "json",
                              "--rows", "kernel", "--cols", "load", "--metric", "transfers")
    assert rc2 == 0 and err2 == "" and len(json.loads(out2)["captures"]) == 3
    d = json.loads(out)
    assert [pathlib.Path(r["path"]).name for r in d["captures"]] == ["run0.sr", "run1.sr", "run2.sr"]
    st = d["captures"][2]["analysis"]["settings"]
    assert st["miso"] == "A2" and st["sources"]["miso"]["from"] == "given"
    assert st["sources"]["mosi"]["from"] == "inferred"                         # empty cell: not given
    assert d["captures"][0]["analysis"]["summary"]["grouping"]["method"] == "user"
    assert d["captures"][0]["labels"] == {"kernel": "smp", "load": "noload"}
    cells = {(c["row"]["kernel"], c["col"]["load"]): c["value"] for c in d["matrices"][0]["cells"]}
    assert cells == {("smp", "noload"): MESSAGES, ("smp", "stress"): MESSAGES, ("rt", "stress"): MESSAGES}


def test_manifest_overrides_exclusive_command_line_options(tmp_path, capsys):
    caps = _odd_channel_captures(tmp_path)
    m = tmp_path / "m.toml"
    m.write_text('[[capture]]\npath = "run0.sr"\ncpha = 1\n\n'
                 '[[capture]]\npath = "run1.sr"\nno_cs = true\n')
    rc, out, err = run_cli(capsys, *caps[:2], "--manifest", m, "--mode", "2", "--clk", "A0", "--mosi", "A1",
                           "--cs", "A3", "--cs-polarity", "high", "-j", "1", "--format", "json")
    assert rc == 0, err
    d = json.loads(out)
    s0 = d["captures"][0]["analysis"]["settings"]
    assert (s0["cpol"], s0["cpha"]) == (0, 1)         # cpha in the entry replaces --mode 2
    s1 = d["captures"][1]["analysis"]["settings"]
    assert s1["cs"] is None and (s1["cpol"], s1["cpha"]) == (1, 0)


@pytest.mark.parametrize("text, words", [
    ('[[capture]]\npath = "a.sr"\nmdoe = 1\n', ["[[capture]] #1", "unknown option 'mdoe'"]),
    ('[[capture]]\npath = "a.sr"\nmode = 7\n', ["[[capture]] #1", "--mode", "invalid choice"]),
    ('[[capture]]\npath = "a.sr"\nsamplerate = "fast"\n', ["--samplerate", "fast"]),
    ('[[capture]]\nmode = 1\n', ["needs a 'path'"]),
    ('[capture]\npath = "a.sr"\n', ["array of tables"]),
    ('[[capture]\n', ["not valid TOML"]),
    ('[defaults]\nclk = "A0"\n[extra]\n', ["unknown top-level key"]),
])
def test_bad_manifests_stop_before_any_analysis(tmp_path, capsys, text, words):
    m = tmp_path / "m.toml"
    m.write_text(text)
    rc, out, err = run_cli(capsys, tmp_path, "--manifest", m)
    assert rc == 2 and out == ""
    line = one_line_error(err)
    assert str(m) in line
    for w in words:
        assert w in line


def test_manifest_list_options_replace_the_command_line_ones(tmp_path, capsys):
    caps = _odd_channel_captures(tmp_path)
    m = tmp_path / "m.toml"
    m.write_text('[[capture]]\npath = "run*.sr"\nchannel_map = "A0=SCLK,A1=MOSI,A2=MISO,A3=CS"\n'
                 'cs_polarity = "high"\n')
    # a --channel-map on the command line alone names no role: the signals say X is SCLK ...
    rc, out, _ = run_cli(capsys, *caps, "--channel-map", "A0=X", "-j", "1", "--format", "json")
    assert rc == 0 and json.loads(out)["captures"][0]["analysis"]["settings"]["clk"] == "X"
    # ... the manifest's replaces it (rather than adding to it), and auto-detection finds the roles
    rc, out, err = run_cli(capsys, *caps, "--manifest", m, "--channel-map", "A0=X", "-j", "1",
                           "--format", "json")
    assert rc == 0, err
    s = json.loads(out)["captures"][0]["analysis"]["settings"]
    assert (s["clk"], s["mosi"], s["miso"], s["cs"]) == ("SCLK", "MOSI", "MISO", "CS")


def test_manifest_entry_matching_nothing_is_a_warning(tmp_path, capsys):
    caps = _odd_channel_captures(tmp_path)
    m = tmp_path / "m.toml"
    m.write_text('[defaults]\nclk = "A0"\nmosi = "A1"\ncs = "A3"\ncs_polarity = "high"\n'
                 '[[capture]]\npath = "typo.sr"\nmode = 1\n')
    rc, _, err = run_cli(capsys, *caps, "--manifest", m, "-j", "1")
    assert rc == 0
    assert "[[capture]] #1 (typo.sr) matches no capture" in err


def test_manifest_paths_with_directories_are_relative_to_the_manifest(tmp_path):
    (tmp_path / "caps").mkdir()
    m = tmp_path / "m.toml"
    m.write_text('[[capture]]\npath = "caps/*.sr"\nmode = 1\n[[capture]]\npath = "x.sr"\nmode = 2\n')
    man = manifest.load(m, capture_option_parser())
    opts, _, hits = man.lookup(str(tmp_path / "caps" / "a.sr"))
    assert opts == {"mode": 1} and len(hits) == 1
    assert man.lookup(str(tmp_path / "a.sr"))[0] == {}
    assert man.lookup("/elsewhere/x.sr")[0] == {"mode": 2}
    assert man.capture_paths() == [str(tmp_path / "caps" / "*.sr"), str(tmp_path / "x.sr")]


# ------------------------------------------------------------ usage errors
@pytest.mark.parametrize("argv, words", [
    ([], ["give capture files"]),
    (["--metric", "nope"], ["unknown metric 'nope'", "--list-metrics"]),
    (["--pattern", "{a}-{b}", "--rows", "c"], ["no label 'c'", "known: a, b"]),
    (["--pattern", "{a}", "--regex", "(?P<a>x)"], ["--pattern or --regex"]),
    (["--rows", "kernel"], ["no labels to group by"]),
    (["--matrix-csv", "m.csv"], ["--matrix-csv needs a matrix"]),
    (["--mode", "1", "--cpha", "1"], ["--mode or --cpol/--cpha"]),
    (["--pattern", "{a}-{b}", "--rows", "a", "--cols", "a"], ["both a row and a column"]),
])
def test_usage_errors_are_one_line(matrix_dir, capsys, argv, words):
    inputs = [str(matrix_dir)] if argv else []
    rc, out, err = run_cli(capsys, *inputs, *argv)
    assert rc == 2 and out == ""
    line = one_line_error(err)
    for w in words:
        assert w in line


def test_list_metrics(capsys):
    rc, out, _ = run_cli(capsys, "--list-metrics")
    assert rc == 0 and "context_switch.p99_s" in out.split() and "transfer_rate_hz" in out.split()


# ------------------------------------------------------------ Dask
def test_local_dask_cluster_gives_the_same_rows_as_the_pool(matrix_dir, tmp_path, capsys):
    import distributed

    bad = tmp_path / "garbage.sr"
    bad.write_bytes(b"junk")
    args = [matrix_dir, bad, "--pattern", "{kernel}-{load}-{sclk}.sr", "--format", "csv",
            "--metric", "context_switch.p99"]
    rc, pool_rows, _ = run_cli(capsys, *args, "-j", "2")
    assert rc == 2
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=":0") as cluster:   # any free port
        assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")
        rc, dask_rows, err = run_cli(capsys, *args, "--dask-scheduler", cluster.scheduler_address)
    assert rc == 2
    assert dask_rows == pool_rows
    assert len(pool_rows.splitlines()) == 1 + 9
    assert "1 of 9 captures not fully analyzed" in one_line_error(err)


def test_unreachable_dask_scheduler_is_a_one_line_error():
    job = worker.Job(0, "x.sr", "x.sr")
    with pytest.raises(Exception) as e:
        execute.run_dask([job], lambda r: None, scheduler="tcp://127.0.0.1:1", timeout_s=0.5)
    assert type(e.value).__name__ == "InputError"
    assert "cannot connect to the Dask scheduler tcp://127.0.0.1:1" in str(e.value)
    assert "\n" not in str(e.value)


def test_dask_cluster_without_workers_is_a_one_line_error():
    import distributed

    with distributed.LocalCluster(n_workers=0, processes=False, host="127.0.0.1", protocol="tcp://",
                                  dashboard_address=None) as cluster:
        with pytest.raises(Exception) as e:
            execute.run_dask([worker.Job(0, "x.sr", "x.sr")], lambda r: None,
                             scheduler=cluster.scheduler_address, timeout_s=0.5)
    assert type(e.value).__name__ == "InputError"
    assert "has no workers" in str(e.value) and "\n" not in str(e.value)


# ------------------------------------------------------------ held-out: the real captures
# CS windows per capture, from captures/real/README.md (atmega32: the last
# window is cut by the end of the capture; ssi32: CS is already active at sample 0,
# so the partial first window counts too)
REAL_TRANSFERS = {
    "spi__ad7920__ad7920_fast_read.sr": 320,
    "spi__ltc2422__ltc2422_read_adc.sr": 14,
    "spi__adxl345__adxl345_registers.sr": 57,
    "spi__nrf24l01__nrf24l01-communication.sr": 38,
    "spi__ssi32__ssi32_bananapi_loop_test.sr": 15,
    "spi__spiflash__winbond_w25q80d__chip_erase_and_writes.sr": 148565,
    "spi__spi_atmega32__spi_atmega32_00.sr": 6355,
    "nfc__st25r39xx__HydraBus_v1_HydraNFC_Shield_v2_ST25R3916_Read_All_Registers_SpaceA_B.sr": 80,
    "spi__mrf24j40__sensormote__mrf24j40-wake-tx-ack.sr": 50,
    "spi__enc28j60__enc28j60-init-and-ping.sr": 182,
    "sdcard__spi_mode__cmds__cmd17.sr": 1,
}


def test_all_real_captures_analyze_in_batch_without_error_rows(tmp_path, capsys):
    j = tmp_path / "real.json"
    rc, out, err = run_cli(capsys, REAL, "--manifest", REAL_MANIFEST, "--json", j,
                           "--rows", "device", "--cols", "host", "--metric", "cs_setup.p50")
    rows = json.loads(j.read_text())["captures"]
    errors = [f"{r['path']}: {r['error']}" for r in rows if r["status"] not in ("ok", "warn")]
    assert errors == []
    assert rc == 0 and err == ""
    # the 12 .sr captures and DSView's demo .dsl (its own SPI settings map the channels); those with
    # a warning above a note are "warn" (README's batch example says which and why)
    assert len(rows) == 13 and out.splitlines()[-1] != "" and "13 captures: " in out
    assert all((r["status"] == "warn") == bool(r["first_warning"]) for r in rows)
    got = {pathlib.Path(r["path"]).name: r for r in rows}
    for name, n in REAL_TRANSFERS.items():
        assert got[name]["transfers"] == n, name
    # the CS-less ADE7758: framed by SCLK idle time, CS figures unavailable
    assert got["dsview__demo_spi.dsl"]["transfers"] == 566
    ade = got["spi__ade7758__ade7758-phase-b-zx-irq-context.sr"]
    assert ade["cs_setup_p50_s"] is None and ade["idle_p50_s"] > 0 and ade["transfers"] > 0
    # the AD7920 with the samplerate override: 1 MHz SCLK, not 1 Hz
    assert got["spi__ad7920__ad7920_fast_read.sr"]["sclk_hz"] == pytest.approx(1e6, rel=1e-3)
    # the nRF24L01 Raspberry Pi bus: its Linux CS setup of tens of µs (README: median 38.8 µs)
    assert got["spi__nrf24l01__nrf24l01-communication.sr"]["cs_setup_p50_s"] == pytest.approx(
        38.8e-6, abs=0.2e-6)



def test_stall_options_shape_the_stalls_metric(tmp_path, capsys):
    for name in ("k-b10.sr", "k-b1.sr"):
        shutil.copy(CAPTURES / f"mcp3008-rpi3-k4.4-{name[2:]}", tmp_path / name)
    counts = []
    for frac in ("50", "1"):
        out = tmp_path / f"m{frac}.json"
        assert main(["batch", str(tmp_path), "-j", "1", "-q", "--pattern", "{kernel}-{batch}.sr",
                     "--metric", "stalls", "--stall-sigmas", "3", "--stall-fraction", frac,
                     "--format", "json", "-o", str(out)]) == 0
        d = json.loads(out.read_text())
        counts.append(sorted(c["analysis"]["stalls"]["count"] for c in d["captures"]))
        assert d["matrices"][0]["metric"] == "stalls"
    assert counts[0] == [1, 1] and counts[1][0] > 1      # a lower bar finds more stalls
    capsys.readouterr()


# --------------------------------------------- a scope's files of one acquisition
SCOPES = ROOT / "tests" / "data" / "scopes"
ISF_PAIR = [str(SCOPES / "tek0000CH1.isf"), str(SCOPES / "tek0000CH2.isf")]
ISF_OPTIONS = ("--clk", "Ch2", "--mosi", "Ch1", "--no-cs")     # an I2C bus (DS1307) read as SPI: SCL, SDA


def test_batch_over_a_folder_makes_one_row_of_a_scopes_channel_files(tmp_path, capsys):
    """tests/data/scopes/: the MDO4104C's tek0000CH1.isf + tek0000CH2.isf are one capture
    (one row, at the place of CH1); every other file keeps its own row, the Agilent
    ASCII XY pairs (scope_7_1.csv, scope_7_2.csv) included: only CH<n> names group."""
    j = tmp_path / "b.json"
    rc, out, _ = run_cli(capsys, SCOPES, *ISF_OPTIONS, "-q", "--json", j)
    assert rc == 2                            # the other scope files have no channel Ch2
    rows = json.loads(j.read_text())["captures"]
    files = sorted(p for p in SCOPES.iterdir() if p.suffix in (".isf", ".wfm", ".bin", ".trc", ".h5", ".csv", ".sr"))
    # one row for the ISF pair; the Rigol DHO .wfm is skipped (its magic is too weak for a reader to
    # recognize it in a folder; named explicitly it is refused in one line: tests/test_readers_rigol_wfm.py)
    assert len(files) >= 19 and len(rows) == len(files) - 2
    assert "DHO824-ch1.wfm" not in json.dumps(rows)
    pair = [r for r in rows if "tek0000CH" in r["path"]]
    assert len(pair) == 1
    (r,) = pair
    assert r["path"] == " + ".join(ISF_PAIR) and r["files"] == ISF_PAIR
    # an I2C bus read as SPI: warn (no whole transfer to tell a word size by), not ok
    assert r["status"] == "warn" and "wordsize" in r["first_warning"], r["error"]
    assert r["analysis"]["capture"]["channels"] == ["Ch1", "Ch2"]
    assert r["analysis"]["capture"]["format"] == "Tektronix ISF, 2 files"
    # the same analysis as `spigap analyze` of the two files
    alone = to_dict(analyze_device(ISF_PAIR, capture_option_parser_config(*ISF_OPTIONS)))
    assert r["analysis"]["summary"] == alone["summary"] and r["transfers"] > 0
    names = [pathlib.Path(x["path"]).name for x in rows if "files" not in x]
    assert {"tek0002NRM.isf", "scope_7_1.csv", "scope_7_2.csv", "RTC.sr"} <= set(names)
    assert all("files" not in x for x in rows if x is not r)
    # the row sits where CH1 sorts (natural order of the folder)
    order = [pathlib.Path(x["files"][0] if "files" in x else x["path"]).name for x in rows]
    assert order == sorted(order, key=discover.natural_key)
    # text: the pair in the capture column; CSV: the full paths joined
    assert main(["batch", str(SCOPES), *ISF_OPTIONS, "-q"]) == 2
    text = capsys.readouterr().out
    assert any(line.startswith("tek0000CH{1,2}.isf ") and " warn " in line for line in text.splitlines())
    assert main(["batch", str(SCOPES), *ISF_OPTIONS, "-q", "--format", "csv"]) == 2
    csv_rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [c["status"] for c in csv_rows if c["path"] == " + ".join(ISF_PAIR)] == ["warn"]


def capture_option_parser_config(*argv):
    from spigap.cli.common import config_from_args

    return config_from_args(capture_option_parser().parse_args(list(argv)))


def test_globs_and_named_files_of_one_acquisition_group_too(tmp_path, capsys):
    for args in ([str(SCOPES / "tek0000CH*.isf")], list(reversed(ISF_PAIR))):
        j = tmp_path / "b.json"
        rc, _, _ = run_cli(capsys, *args, *ISF_OPTIONS, "-q", "-j", "1", "--json", j)
        rows = json.loads(j.read_text())["captures"]
        assert rc == 0 and len(rows) == 1 and rows[0]["files"] == ISF_PAIR, args
    # logic sessions hold every channel: a CH<n> in their names groups nothing
    for n in (1, 2):
        shutil.copy(SCOPES / "RTC.sr", tmp_path / f"rtcCH{n}.sr")
    found = discover.expand([tmp_path])
    assert [pathlib.Path(f.path).name for f in found] == ["rtcCH1.sr", "rtcCH2.sr"]
    assert all(f.files is None for f in found)


def test_a_manifest_naming_one_of_the_files_applies_to_the_acquisition(tmp_path, capsys):
    m = tmp_path / "m.toml"
    m.write_text('[[capture]]\npath = "tek0000CH2.isf"\nclk = "Ch2"\nmosi = "Ch1"\nno_cs = true\n'
                 'labels = { scope = "MDO4104C" }\n')
    j = tmp_path / "b.json"
    rc, _, err = run_cli(capsys, SCOPES / "tek0000CH*.isf", "--manifest", m, "-q", "-j", "1", "--json", j)
    (r,) = json.loads(j.read_text())["captures"]
    assert rc == 0 and err == "" and r["labels"] == {"scope": "MDO4104C"} and r["status"] == "warn"
    assert r["analysis"]["capture"]["channels"] == ["Ch1", "Ch2"]


def test_grouping_keeps_folders_errors_and_order():
    found = [discover.Found("a/x.sr"), discover.Found("a/tekCH2.isf"), discover.Found("missing", "no such file"),
             discover.Found("a/tekCH1.isf"), discover.Found("a/tek.trc")]
    out = discover.group(found)
    assert [(f.path, f.files, f.error) for f in out] == [
        ("a/x.sr", None, None), ("a/tekCH1.isf + a/tekCH2.isf", ["a/tekCH1.isf", "a/tekCH2.isf"], None),
        ("missing", None, "no such file"), ("a/tek.trc", None, None)]
    assert table.shorten_files(["tek0000CH1.isf", "tek0000CH2.isf", "tek0000CH3.isf"], 20) == "tek0000CH{1,2,3}.isf"
    size = sum(os.path.getsize(p) for p in ISF_PAIR)           # the time limit counts every file
    assert worker.default_timeout(ISF_PAIR) == worker.TIMEOUT_BASE_S + worker.TIMEOUT_S_PER_MIB * size / (1 << 20)
