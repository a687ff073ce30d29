"""A small runner of sigrok-test's decoder tests on the real sigrok-cli.

sigrok-test (https://sigrok.org/gitweb/?p=sigrok-test.git) keeps each decoder's
regression tests as ``decoder/test/<pd>/test.conf`` plus expected-output files,
over captures laid out as in sigrok-dumps; its ``pdtest`` runs them with
``runtc``, a C program built against libsigrokdecode's development files. This
runner reads the same files with the same grammar (``parse_testfile`` follows
pdtest's: ``test``, ``protocol-decoder`` with ``channel``/``option``/``initial_pin``
pairs, ``stack``, ``input``, ``output <pd> annotation|exception [class C] match
F``) and runs each case with sigrok-cli instead, which prints annotations in
runtc's format at log level 4 except for the instance suffix ``<pd>-1:`` (made
``<pd>:`` here). So tests/sigrok/ can be proposed upstream as they are, and run
here without building sigrok-test.

Written by hand: sigrok-test is not packaged, and pdtest needs the runtc
binary; the grammar is 80 lines and the output format is pinned by the
expected files themselves.

Use: ``python tests/sigrok_test_runner.py [-f] [pd[/test]] ...`` (``-f``
rewrites the expected files, as pdtest's ``-f``). Needs ``SIGROKDECODE_DIR``
pointing at our decoders (``spigap decoders path``).
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import re
import subprocess
import sys
import zipfile

HERE = pathlib.Path(__file__).resolve().parent / "sigrok"
TESTS_DIR = HERE / "sigrok-test" / "decoder" / "test"
DUMPS_DIR = HERE / "sigrok-dumps"
OUTPUT_TYPES = ("annotation", "exception")       # our decoders only annotate


class TestConfError(ValueError):
    pass


@dataclasses.dataclass
class Decoder:
    name: str
    channels: list = dataclasses.field(default_factory=list)     # (id, channel index)
    options: list = dataclasses.field(default_factory=list)      # (key, value)
    initial_pins: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Output:
    pd: str
    type: str
    match: str
    cls: str | None = None


@dataclasses.dataclass
class Case:
    pd: str                  # the directory (the decoder under test)
    name: str
    decoders: list
    input: str = ""
    outputs: list = dataclasses.field(default_factory=list)
    stack: list | None = None

    @property
    def id(self) -> str:
        return f"{self.pd}/{self.name}"


def parse_testfile(path: pathlib.Path, pd: str) -> list[Case]:
    """The test cases of one test.conf (pdtest's grammar)."""
    cases: list[Case] = []
    for n, raw in enumerate(path.read_text().split("\n"), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        f = line.split()
        key = f.pop(0)
        where = f"{path}:{n}: {line!r}"
        if not cases and key != "test":
            raise TestConfError(f"{where}: the first line must be 'test <name>'")
        if key == "test":
            if len(f) != 1:
                raise TestConfError(where)
            cases.append(Case(pd, f[0], []))
        elif key == "protocol-decoder":
            if not f:
                raise TestConfError(where)
            d = Decoder(f.pop(0))
            if len(f) % 2:
                raise TestConfError(where)
            for kind, kv in zip(f[::2], f[1::2]):
                if "=" not in kv:
                    raise TestConfError(where)
                k, v = kv.split("=", 1)
                if kind == "channel":
                    d.channels.append((k, int(v)))
                elif kind == "option":
                    d.options.append((k, v))
                elif kind == "initial_pin":
                    d.initial_pins.append((k, int(v)))
                else:
                    raise TestConfError(where)
            cases[-1].decoders.append(d)
        elif key == "stack":
            if len(f) < 2:
                raise TestConfError(where)
            cases[-1].stack = f
        elif key == "input":
            if len(f) != 1:
                raise TestConfError(where)
            cases[-1].input = f[0]
        elif key == "output":
            if len(f) < 2:
                raise TestConfError(where)
            pd_, typ, rest = f[0], f[1], f[2:]
            if len(rest) % 2:
                raise TestConfError(where)
            opts = dict(zip(rest[::2], rest[1::2]))
            if set(opts) - {"class", "match"} or "match" not in opts:
                raise TestConfError(where)
            cases[-1].outputs.append(Output(pd_, typ, opts["match"], opts.get("class")))
        else:
            raise TestConfError(where)
    for c in cases:
        if not c.decoders or not c.input or not c.outputs:
            raise TestConfError(f"{path}: test {c.name} needs protocol-decoder, input and output lines")
    return cases


def all_cases(tests_dir: pathlib.Path = TESTS_DIR) -> list[Case]:
    out = []
    for conf in sorted(tests_dir.glob("*/test.conf")):
        out.extend(parse_testfile(conf, conf.parent.name))
    return out


def channel_names(capture: pathlib.Path) -> dict[int, str]:
    """Index -> name of a .sr's logic channels (probe N is index N - 1), as runtc numbers them."""
    with zipfile.ZipFile(capture) as z:
        meta = z.read("metadata").decode()
    out = {}
    for line in meta.splitlines():
        mt = re.match(r"^\s*probe(\d+)\s*=\s*(.*?)\s*$", line)
        if mt:
            out[int(mt[1]) - 1] = mt[2]
    return out


def sigrok_stack(case: Case, capture: pathlib.Path) -> str:
    names = channel_names(capture)
    parts = []
    for d in case.decoders:
        if d.initial_pins:
            raise TestConfError(f"{case.id}: initial_pin has no sigrok-cli 0.7.2 equivalent")
        items = [d.name] + [f"{k}={names[i]}" for k, i in d.channels] + [f"{k}={v}" for k, v in d.options]
        parts.append(":".join(items))
    return ",".join(parts)


def run_case(case: Case, out: Output, *, dumps_dir: pathlib.Path = DUMPS_DIR, decoders_dir=None,
             timeout: int = 600) -> tuple[str, str]:
    """(normalized annotation text, stderr) of one output of one case."""
    capture = dumps_dir / case.input
    args = ["sigrok-cli", "-l", "4", "-i", str(capture), "-P", sigrok_stack(case, capture),
            "-A", out.pd + (f"={out.cls}" if out.cls else "")]
    env = dict(os.environ)
    if decoders_dir is not None:
        env["SIGROKDECODE_DIR"] = str(decoders_dir)
    proc = subprocess.run(args, capture_output=True, text=True, env=env, timeout=timeout)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(args)} exited {proc.returncode}: {proc.stderr[-2000:]}")
    text = re.sub(r"^(\d+-\d+ [\w]+)-\d+: ", r"\1: ", proc.stdout, flags=re.M)
    return text, proc.stderr


def decoder_errors(stderr: str) -> list[str]:
    """The lines of a -l 4 stderr that report a decoder failure (debug lines also say srd:)."""
    return [ln for ln in stderr.splitlines()
            if "Traceback" in ln or re.search(r"srd: \w+(Error|Exception)\b", ln)
            or re.search(r"^Error: srd:", ln)]


def check(case: Case, out: Output, *, fix: bool = False, **kw) -> list[str]:
    """Problems of one output ([] = pass); ``fix`` rewrites the expected file."""
    if out.type not in OUTPUT_TYPES:
        return [f"{case.id}: output type {out.type!r} is not run here (annotation, exception)"]
    text, stderr = run_case(case, out, **kw)
    errors = decoder_errors(stderr)
    if out.type == "exception":
        want = re.compile(r"srd: %s\b" % re.escape(out.match))
        return [] if any(want.search(e) for e in errors) else [f"{case.id}: no {out.match} raised"]
    if errors:
        return [f"{case.id}: decoder errors:"] + errors[:20]
    expected = TESTS_DIR / out.pd / out.match
    if fix:
        expected.write_text(text)
        return []
    if not expected.exists():
        return [f"{case.id}: {expected} is missing (run with -f)"]
    want = expected.read_text().splitlines()
    have = text.splitlines()
    if want == have:
        return []
    import difflib

    diff = list(difflib.unified_diff(want, have, str(expected), "sigrok-cli", lineterm="", n=1))
    return [f"{case.id}: output differs from {expected.name}:"] + diff[:40]


def main(argv: list[str]) -> int:
    fix = "-f" in argv
    wanted = [a for a in argv if not a.startswith("-")]
    failed = 0
    for case in all_cases():
        if wanted and not any(case.id == w or case.pd == w for w in wanted):
            continue
        for out in case.outputs:
            problems = check(case, out, fix=fix)
            print(f"{case.id}/{out.type}: {'OK' if not problems else 'FAIL'}")
            for p in problems:
                print("  " + p)
            failed += bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
