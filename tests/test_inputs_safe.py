"""No command writes over one of its inputs (docs/cli.md, "What spigap writes, and what it
never touches").

Every subcommand is run with each of its outputs (``-o``, ``--perfetto``, ``--truth``,
``--synth``, ``--csv`` ...) naming each of its inputs (captures, profiles, device files,
traces, logs, manifests, scenarios), spelled four ways: the path as given, a symbolic
link to it, ``./name`` from its folder and its absolute path (and a hard link for the
captures). Each run must end in one line and exit 2, and every input must hash as
before. ``spigap.cli.guard`` declares which options read and which write; the last
test fails when an option that names a file is in neither list.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import pathlib
import shutil

import pytest
from conftest import CAPTURES

from spigap.cli import main
from util import synth

PROFILE = "rpi3-k4.4-vanilla"


def _digest(path) -> str:
    if os.path.isdir(path):
        return "|".join(f"{n}:{_digest(os.path.join(path, n))}" for n in sorted(os.listdir(path)))
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """One of every kind of input, in one folder."""
    import spigap.timing

    d = tmp_path_factory.mktemp("inputs")
    cap = synth(d, "cap.sr", messages=12, transfers_per_message=1)[2]
    shutil.copy(cap, d / "after.sr")
    shutil.copy(CAPTURES / "trace-demo.sr", d / "demo.sr")
    shutil.copy(CAPTURES / "trace-demo.txt", d / "demo.txt")
    (d / "log.csv").write_text("iteration,before_ns,after_ns\n0,1000,2000\n1,3000,4000\n")
    timing = pathlib.Path(spigap.timing.__file__).parent
    shutil.copy(timing / "profiles" / f"{PROFILE}.toml", d / "prof.toml")
    shutil.copy(timing / "devices" / "mcp3008.toml", d / "dev.toml")
    (d / "batch").mkdir()
    shutil.copy(cap, d / "batch" / "b.sr")
    (d / "batch.toml").write_text('[[capture]]\npath = "batch/b.sr"\n')
    (d / "scen.toml").write_text('[capture]\nsamplerate = "20MHz"\n[traffic]\nmessages = 3\n')
    return d


# subcommand -> (argv with {name} for an input file, the inputs, the outputs to point at them)
CASES = {
    "analyze": (["analyze", "{cap.sr}"], ["cap.sr"], ["-o"]),
    "detect": (["detect", "{cap.sr}"], ["cap.sr"], ["-o"]),
    "check": (["check", "{cap.sr}", "--profile", "{prof.toml}", "--device", "{dev.toml}"],
              ["cap.sr", "prof.toml", "dev.toml"], ["-o"]),
    "report": (["report", "{cap.sr}", "--profile", "{prof.toml}", "-o", "OUT/r.html"], ["cap.sr", "prof.toml"],
               ["-o"]),
    "compare": (["compare", "--before", "{cap.sr}", "--after", "{after.sr}", "--bootstrap", "100"],
                ["cap.sr", "after.sr"], ["-o"]),
    "trace": (["trace", "{demo.sr}", "--ftrace", "{demo.txt}", "--userlog", "{log.csv}"],
              ["demo.sr", "demo.txt", "log.csv"], ["-o", "--perfetto"]),
    "convert": (["convert", "{cap.sr}", "-o", "OUT/c.sr"], ["cap.sr"], ["-o"]),
    "batch": (["batch", "{batch}", "--manifest", "{batch.toml}", "-j", "1", "-q"], ["batch/b.sr", "batch.toml"],
              ["-o", "--csv", "--json"]),
    "synth": (["synth", "--config", "{scen.toml}", "-o", "OUT/s.sr"], ["scen.toml"], ["-o", "--truth", "--ftrace"]),
    "model": (["model", "--profile", "{prof.toml}"], ["prof.toml"], ["-o", "--synth"]),
    "decoders pvs": (["decoders", "pvs", "{cap.sr}", "--stack", "spi", "--force"], ["cap.sr"], ["-o"]),
    "bench": (["bench", "--real", "{cap.sr}", "--samples", "1000", "--big-samples", "0", "--trace-events", "0",
               "--no-sigrok", "--repeat", "1"], ["cap.sr"], ["-o"]),
}
SPELLINGS = ("as given", "symlink", "relative", "absolute")


def _spell(files, name: str, how: str, tmp_path) -> str:
    target = files / name
    if how == "as given":
        return str(target)
    if how == "symlink":
        link = tmp_path / f"link-{name.replace('/', '_')}"
        if not link.is_symlink():
            link.symlink_to(target)
        return str(link)
    if how == "relative":
        return os.path.join(".", name)          # the test runs in ``files``
    return os.path.abspath(target)


def _argv(template: list[str], files, out_dir) -> list[str]:
    out = []
    for a in template:
        if a.startswith("{") and a.endswith("}"):
            out.append(str(files / a[1:-1]))
        else:
            out.append(a.replace("OUT", str(out_dir)))
    return out


def _set_output(argv: list[str], option: str, value: str) -> list[str]:
    argv = list(argv)
    if option in argv:
        argv[argv.index(option) + 1] = value
    else:
        argv += [option, value]
    return argv


@pytest.mark.parametrize("command", sorted(CASES))
def test_no_output_replaces_an_input(command, files, tmp_path, capsys, monkeypatch):
    template, inputs, outputs = CASES[command]
    monkeypatch.chdir(files)
    before = {name: _digest(files / name) for name in inputs}
    listing = sorted(os.listdir(files))
    runs = 0
    for option in outputs:
        for name in inputs:
            for how in SPELLINGS:
                argv = _set_output(_argv(template, files, tmp_path), option, _spell(files, name, how, tmp_path))
                code = main(argv)
                err = capsys.readouterr().err
                lines = [ln for ln in err.splitlines() if ln.strip()]
                assert code == 2, (argv, code, err)
                assert len(lines) == 1 and lines[0].startswith("spigap: error: "), (argv, err)
                assert "never writes over" in lines[0] or "could replace" in lines[0], (argv, err)
                for n in inputs:
                    assert _digest(files / n) == before[n], f"{' '.join(argv)} changed {n}"
                runs += 1
    assert sorted(os.listdir(files)) == listing          # no temporary file left behind
    assert runs == len(outputs) * len(inputs) * len(SPELLINGS)


def test_a_hard_link_is_the_same_file(files, tmp_path, capsys):
    hard = tmp_path / "hard.sr"
    os.link(files / "cap.sr", hard)
    before = _digest(files / "cap.sr")
    assert main(["analyze", str(files / "cap.sr"), "-o", str(hard)]) == 2
    assert "is the input" in capsys.readouterr().err
    assert _digest(files / "cap.sr") == before


def test_png_folder_holding_an_input(files, tmp_path, capsys):
    """report --png DIR writes <stem>-*.png into DIR: an input there named *.png is refused first."""
    d = tmp_path / "pngs"
    d.mkdir()
    shutil.copy(files / "cap.sr", d / "cap-timeline.png")
    before = _digest(d / "cap-timeline.png")
    code = main(["report", str(d / "cap-timeline.png"), "--input-format", "sr", "--png", str(d)])
    err = capsys.readouterr().err
    assert code == 2 and "could replace" in err, err
    assert _digest(d / "cap-timeline.png") == before


def test_two_outputs_one_file(files, tmp_path, capsys):
    out = tmp_path / "same.txt"
    code = main(["synth", "-o", str(out), "--truth", str(out), "--messages", "3"])
    err = capsys.readouterr().err
    assert code == 2 and "same file" in err, err


def test_batch_output_into_the_searched_folder_is_fine_when_no_capture(files, tmp_path, capsys):
    """A batch's CSV written into the folder it searches, twice: the CSV is no capture (the
    second run skips it), so it may be replaced."""
    d = tmp_path / "run"
    shutil.copytree(files / "batch", d)
    for _ in range(2):
        assert main(["batch", str(d), "-j", "1", "-q", "--format", "csv", "-o", str(d / "res.csv")]) == 0
    capsys.readouterr()
    code = main(["batch", str(d), "-j", "1", "-q", "-o", str(d / "b.sr")])
    assert code == 2 and "never writes over" in capsys.readouterr().err


def test_library_use_is_not_guarded(tmp_path):
    """Outside a command (spigap as a library) the program decides what it writes where."""
    from spigap.io import open_capture
    from spigap.outfile import write_output

    cap = synth(tmp_path, "x.sr", messages=3)[2]
    with open_capture(cap):
        pass
    write_output(str(cap), b"replaced on purpose")
    assert cap.read_bytes() == b"replaced on purpose"


# ------------------------------------------------------------ every option has a role
_PATHLIKE = ("FILE", "DIR", "CAPTURE", "INPUT", "OUT", "PATH", "GLOB", ".sr", ".json", ".toml", ".txt", ".html")


def _commands():
    from spigap.cli import build_parser

    def subs(p):
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                return a.choices
        return {}

    for name, p in subs(build_parser(None)).items():
        inner = subs(p)
        for n2, p2 in (inner.items() if inner else [(None, p)]):
            yield (f"{name} {n2}" if n2 else name), p2


def test_every_file_option_is_declared():
    """An option or argument that names a file is an input or an output in cli/guard.py."""
    from spigap.cli import guard

    missing = []
    used = set()
    for name, p in _commands():
        for a in p._actions:
            if a.nargs == 0 or isinstance(a, argparse._HelpAction):
                continue
            role = guard.role_of(name, a.dest)
            if role is not None:
                used.add(a.dest)
            metavar = str(a.metavar or "") if a.option_strings else str(a.metavar or a.dest).upper()
            if any(k in metavar for k in _PATHLIKE) and role is None:
                missing.append(f"{name} {'/'.join(a.option_strings) or a.dest} ({metavar})")
    assert not missing, f"options that name files but have no role in spigap.cli.guard.ROLES: {missing}"
    stale = set(guard.ROLES) - used - {"profile_for", "device_for"}
    assert not stale, f"guard.ROLES names options no subcommand has: {stale}"
