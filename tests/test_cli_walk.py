"""Every subcommand, every option, bad values: never an internal error (exit 3).

The walk reads the real parser (so an option added later is walked too): for
each option that takes a value it tries values a user gets wrong (zero,
negative, an unknown name, a path in a missing directory) on a small capture,
and asserts the exit status is not 3 and an error is one line. Every option has
help text; usage errors are one line.
"""

from __future__ import annotations

import argparse

import pytest
from conftest import CAPTURES

from spigap.cli import build_parser, main
from util import synth

BAD = ("0", "-1", "nope", "OUT/missing-dir/x.out", "OUT/garbage.toml", "OUT/empty.csv")
# subcommand -> arguments that make it run on the capture CAP (and write into OUT)
BASE = {
    "analyze": ["CAP"],
    "detect": ["CAP"],
    "batch": ["CAP", "-j", "1", "-q"],
    "check": ["CAP", "--profile", "rpi3-k4.4-vanilla"],
    "compare": ["--before", "CAP", "--after", "CAP", "--bootstrap", "100"],
    "report": ["CAP", "-o", "OUT/r.html"],
    "synth": ["-o", "OUT/s.sr", "--messages", "3"],
    "model": ["--profile", "rpi3-k4.4-vanilla"],
    "decoders pvs": ["CAP", "--stack", "spi", "-o", "OUT/p.pvs", "--force"],
    "decoders install": ["--dest", "OUT/dec"],
    "decoders path": [],
    # a (capture, trace) pair that aligns; its own capture instead of CAP
    "trace": [str(CAPTURES / "trace-demo.sr"), "--ftrace", str(CAPTURES / "trace-demo.txt")],
}
# options whose run is not what this walk is about (timing whole benchmarks)
# (and free text, where any value is valid)
SKIP = {("bench", "*"), ("batch", "--dask-scheduler"), ("report", "--title")}


def _subparsers(parser):
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            return a.choices
    return {}


def commands():
    """(name, parser) of every subcommand, nested ones as 'decoders pvs'."""
    top = build_parser(None)
    for name, p in _subparsers(top).items():
        sub = _subparsers(p)
        if sub:
            for n2, p2 in sub.items():
                yield f"{name} {n2}", p2
        else:
            yield name, p


def value_options(parser):
    for a in parser._actions:
        if a.option_strings and a.nargs != 0 and not isinstance(a, argparse._HelpAction):
            yield max(a.option_strings, key=len), a


def test_every_option_has_help():
    missing = [f"{name} {' / '.join(a.option_strings) or a.dest}"
               for name, p in commands() for a in p._actions
               if not isinstance(a, argparse._HelpAction) and not a.help]
    assert not missing, missing


@pytest.fixture(scope="module")
def cap(tmp_path_factory):
    d = tmp_path_factory.mktemp("walk")
    return synth(d, messages=12, transfers_per_message=1)[2]


def _argv(name, base, cap, out):
    return name.split() + [str(cap) if x == "CAP" else x.replace("OUT", str(out)) for x in base]


def _run(argv, capsys):
    code = main(argv)
    err = capsys.readouterr().err
    return code, err


@pytest.mark.parametrize("name", sorted(BASE))
def test_bad_values_never_internal_error(name, cap, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)        # '-o 0' writes a file named 0
    (tmp_path / "garbage.toml").write_bytes(b"\x00\xff[[[ not = toml\n" * 3)
    (tmp_path / "empty.csv").write_bytes(b"")
    parser = dict(commands())[name]
    assert _run(_argv(name, BASE[name], cap, tmp_path), capsys)[0] in (0, 1), "the base command must work"
    walked = 0
    # report draws its plots on every run that gets through: its option groups
    # shared with compare (same definitions in cli/common.py) are walked there
    shared = {o for o, _ in value_options(dict(commands())["compare"])} if name == "report" else set()
    for opt, action in value_options(parser):
        if (name, opt) in SKIP or (name.split()[0], "*") in SKIP or (opt in shared and opt != "--output"):
            continue
        for value in BAD[3:4] if shared and opt in ("--output", "--png") else BAD:
            argv = _argv(name, BASE[name], cap, tmp_path) + [f"{opt}={value.replace('OUT', str(tmp_path))}"]
            code, err = _run(argv, capsys)
            lines = [x for x in err.splitlines() if x.strip() and not x.startswith("spigap: warning")
                     and not x.startswith("spigap: note") and not x.startswith("wrote ")]
            assert code != 3, (argv, err)
            assert "Traceback" not in err, (argv, err)
            if code == 2:
                assert len(lines) == 1 and lines[0].startswith("spigap: error: "), (argv, err)
            walked += 1
    assert walked or name == "decoders path"


@pytest.mark.parametrize("name", sorted(set(BASE) - {"decoders path", "decoders install"}))
def test_output_into_a_missing_directory(name, cap, tmp_path, capsys):
    argv = _argv(name, BASE[name], cap, tmp_path)
    if "-o" in argv:
        argv[argv.index("-o") + 1] = str(tmp_path / "missing" / "out.x")
    else:
        argv += ["-o", str(tmp_path / "missing" / "out.x")]
    code, err = _run(argv, capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "missing" in err, err


def test_usage_error_is_one_line(capsys):
    code, err = _run(["compare", "--before", "a.sr"], capsys)
    assert code == 2
    assert err.splitlines() == [("spigap: error: the following arguments are required: --after "
                                 "(spigap compare --help lists the options)")]


def test_synth_messages_zero(tmp_path, capsys):
    code, err = _run(["synth", "-o", str(tmp_path / "x.sr"), "--messages", "0"], capsys)
    assert code == 2 and err.strip() == ("spigap: error: argument --messages: must be >= 1 "
                                         "(spigap synth --help lists the options)")
    code, err = _run(["synth", "-o", str(tmp_path / "x.sr"), "--set", "messages=0"], capsys)
    assert code == 2 and err.strip() == "spigap: error: scenario: messages must be >= 1, not 0"


@pytest.mark.parametrize("sets, says", [
    (["messages=1000000000000"], "windows, more than spigap synth plans"),
    (["words_per_transfer=100000000", "messages=10"], "clocked bits, more than spigap synth plans"),
    (["cs_change=1e9s", "transfers_per_message=3", "messages=3"], "more than spigap synth writes"),
])
def test_synth_refuses_what_it_cannot_hold(tmp_path, capsys, sets, says):
    """A typo'd size is one line and exit 2 within a second: not a MemoryError (exit 3) or days of writing."""
    import time

    t0 = time.monotonic()
    code, err = _run(["synth", "-o", str(tmp_path / "x.sr"), *[a for s in sets for a in ("--set", s)]], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and says in err, err
    assert time.monotonic() - t0 < 10 and not (tmp_path / "x.sr").exists()


def test_shared_synth_refuses_what_it_cannot_hold(tmp_path, capsys):
    rec = tmp_path / "big.toml"
    rec.write_text('[capture]\nduration = "1e6s"\n[[device]]\ncs = "CE0"\n[[device]]\ncs = "CE1"\n')
    code, err = _run(["synth", "--config", str(rec), "-o", str(tmp_path / "x.sr")], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "more than spigap synth writes" in err, err


def test_unknown_event_channel_names_the_event_option(cap, capsys):
    for cmd in (["analyze", str(cap)], ["check", str(cap), "--profile", "rpi3-k4.4-vanilla"]):
        code, err = _run([*cmd, "--event", "NOPE:rise"], capsys)
        assert code == 2 and len(err.strip().splitlines()) == 1, err
        assert "no channel named 'NOPE'" in err and "pick one with --event CHANNEL:EDGE" in err
        assert "--clk" not in err


def test_help_says_every_format_works():
    for name, p in commands():
        for a in p._actions:
            assert "(.sr)" not in (a.help or ""), (name, a.dest)


@pytest.mark.parametrize("name", ["analyze", "batch", "check", "compare", "report", "decoders pvs"])
def test_bad_capture_files_never_internal_error(name, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "garbage.sr").write_bytes(b"\x00\xffPK\x03\x04 not a zip" * 5)
    (tmp_path / "empty.vcd").write_bytes(b"")
    (tmp_path / "text.csv").write_text("time,a\nx,y\n")
    (tmp_path / "adir").mkdir()
    for bad in ("garbage.sr", "empty.vcd", "text.csv", "adir", "missing.sr"):
        argv = _argv(name, BASE[name], tmp_path / bad, tmp_path)
        code, err = _run(argv, capsys)
        lines = [x for x in err.splitlines() if x.startswith("spigap: error")]
        assert code == 2 and "Traceback" not in err, (argv, err)
        assert len(lines) == 1 and len(err.strip().splitlines()) <= 2, (argv, err)
