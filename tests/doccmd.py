"""The commands of README.md and docs/*.md, read from their fenced blocks, run, and
their printed blocks compared with (or rewritten from) what they print.

The convention (README.md, "Development", says it in short):

* A fence tagged ``sh`` holds commands only: each line is one command (a trailing
  ``\\`` continues it on the next line; ``#`` starts a comment). Each is run; what it
  prints is not compared.
* A fence whose first line starts with ``$ `` is a transcript: each ``$ `` line is a
  command (a trailing ``\\`` continues it on the next line), and the lines up to the
  next ``$ `` line are what it prints (standard output and error, as a terminal shows
  them); they are compared. A printed block that leaves lines out says so with a
  ``... (trimmed)`` line (the lines around it must appear, contiguous and in order);
  a line cut short ends in `` ... (trimmed)`` (its start must match).
* A ``python`` fence is a script: run with the Python that runs spigap.
* A ``toml`` fence whose first line is ``# NAME.toml`` is that file (a manifest, a
  profile): written into the doc's folder before its commands run.
* Any other fence (``text``, ``toml``, ``ini``, ``csv``, untagged) is not a command:
  an untagged fence whose lines start like a command (``spigap``, ``sigrok-cli``,
  ``make``, ...) is refused, so a command block cannot go untested by forgetting ``sh``
  (a usage synopsis is a ``text`` fence).
* HTML comments right above a fence (invisible on GitHub) say how to run it:

  - ``<!-- docs-test: files NAME=PATH ... -->`` puts the repository's PATH (a file or a
    folder) into the doc's folder as NAME, for examples that name the reader's own file
    (``capture.sr``); PATH ``synth:FORMAT[:CLK,MOSI,MISO,CS]`` is a small capture
    spigap's synthesizer writes in that format (``spigap.synth.writers.FORMATS``, with
    those channel names), for a format no shipped file has;
  - ``<!-- docs-test: not run: REASON -->`` skips the block, ``<!-- docs-test: not run
    "TEXT": REASON -->`` the commands that contain TEXT (hardware, a GUI, a cluster):
    each mark needs a reason and must match a command, and they stay few (the test
    counts them);
  - ``<!-- docs-test: setup for the sections below -->`` marks a block whose files later
    sections use (a section tested alone, or on another worker, runs it first).

A doc's blocks run top to bottom, as a reader follows them (one test per ``## ``
section), in a fresh folder outside the checkout holding links to the repository's
``captures/`` and ``tests/`` and to the decoders the package under test carries (as
``decoders``), with ``spigap`` the installed one (the interpreter's ``bin/``), ``HOME``
inside the folder, ``TZ=UTC``, ``LC_ALL=C.UTF-8`` (a later block may use what an earlier
one wrote). A command must exit 0; a ``spigap`` command may exit 1 (a verdict: FAIL, a
regression, an alert); 2 only where its printed block shows the ``spigap: error:`` line.
Nothing on standard error may be a traceback or a libsigrokdecode (``srd:``) error.

Before comparing, only the doc's folder is taken out of the output (``<folder>/``
becomes nothing: the commands name files relative to it); nothing else is normalised
(no printed block shows a date, a version or an absolute path).
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import pathlib
import re
import shlex
import signal
import subprocess
import sys

TRIM = "... (trimmed)"
CUT = " " + TRIM
# an untagged fence with a line starting with one of these is refused (see above)
COMMAND = re.compile(r"^\s*(\$ |(spigap|sigrok-cli|make|pulseview|pip|pipx|python3?|dask)\s|[A-Z_]+=\S* )")
DIRECTIVE = re.compile(r"^<!--\s*docs-test:\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")


@dataclasses.dataclass
class Command:
    text: str                       # the shell command (continuation lines joined)
    line: int                       # 1-based line of the doc where it starts
    expected: list[str] | None      # its printed lines (a transcript), None when not compared
    out: tuple[int, int] | None     # the printed lines' 0-based [start, end) in the doc
    skip: str | None = None         # why it is not run


@dataclasses.dataclass
class Block:
    doc: str                        # path relative to the repository
    line: int                       # 1-based line of the opening fence
    kind: str                       # "sh", "transcript", "python" or "file"
    body: list[str]
    commands: list[Command]
    files: dict[str, str]           # NAME -> repository path, linked into the block's folder
    skip: str | None = None
    section: str = ""               # the '## ' heading it is under
    setup: bool = False             # later sections use what it writes

    @property
    def id(self) -> str:
        first = self.commands[0].text.split()[0:3] if self.commands else [self.kind]
        return f"{self.doc}:{self.line}:{' '.join(first)[:40]}"


def docs(root: pathlib.Path) -> list[pathlib.Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def _join(lines: list[str], i: int) -> tuple[str, int]:
    """The command starting at lines[i] with its '\\' continuation lines, and the next index."""
    parts = [lines[i]]
    while parts[-1].rstrip().endswith("\\") and i + 1 < len(lines):
        i += 1
        parts.append(lines[i])
    return "\n".join(parts), i + 1


def _directives(lines: list[str], fence: int, doc: str) -> tuple[dict[str, str], str | None, list[tuple[str, str]]]:
    files: dict[str, str] = {}
    skip, skips = None, []
    j = fence - 1
    while j >= 0 and (m := DIRECTIVE.match(lines[j].strip())):
        text = m.group(1)
        where = f"{doc}:{j + 1}"
        if text.startswith("files "):
            for pair in text[len("files "):].split():
                name, sep, path = pair.partition("=")
                if not sep or not name or not path:
                    raise ValueError(f"{where}: 'files' takes NAME=PATH pairs, not {pair!r}")
                files[name] = path
        elif text == "setup for the sections below":
            files[""] = ""                 # taken out again by parse()
        elif (n := re.match(r'not run(?: "([^"]+)")?:\s*(.*)$', text)):
            if not n.group(2).strip():
                raise ValueError(f"{where}: a 'not run' mark needs a reason")
            if n.group(1):
                skips.append((n.group(1), n.group(2).strip()))
            else:
                skip = n.group(2).strip()
        else:
            raise ValueError(f"{where}: unknown docs-test directive {text!r}")
        j -= 1
    return files, skip, skips


def parse(path: pathlib.Path, root: pathlib.Path) -> list[Block]:
    doc = path.relative_to(root).as_posix()
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks = []
    section = ""
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            if lines[i].startswith("## "):
                section = lines[i][3:].strip()
            if DIRECTIVE.match(lines[i].strip()) and not any(
                    FENCE.match(x) for x in lines[i + 1:i + 2]) and not DIRECTIVE.match(lines[i + 1].strip()):
                raise ValueError(f"{doc}:{i + 1}: a docs-test mark must sit right above a fence")
            i += 1
            continue
        indent, lang = m.groups()
        j = i + 1
        while j < len(lines) and not lines[j].strip().startswith("```"):
            j += 1
        body = [x[len(indent):] if x.startswith(indent) else x for x in lines[i + 1:j]]
        start = i + 1                                     # the body's first line, 0-based
        files, skip, skips = _directives(lines, i, doc)
        setup = files.pop("", None) is not None
        first = next((x for x in body if x.strip()), "")
        if lang == "sh":
            kind, commands = "sh", _sh_commands(body, start)
        elif lang in ("", "text") and first.startswith("$ "):
            kind, commands = "transcript", _transcript(body, start)
        elif lang == "python":
            kind, commands = "python", [Command("\n".join(body), start + 1, None, None)]
        elif lang == "toml" and (named := re.match(r"^# ([\w.-]+\.toml)\s*$", first)):
            blocks.append(Block(doc, i + 1, "file", body, [], {named.group(1): ""}, section=section))
            i = j + 1
            continue
        else:
            if lang == "" and any(COMMAND.match(x) for x in body):
                raise ValueError(f"{doc}:{i + 1}: an untagged fence holds commands: tag it 'sh' (run by the suite), "
                                 f"write it as a '$ ' transcript, or tag it 'text' (a synopsis, not run)")
            if files or skip or skips:
                raise ValueError(f"{doc}:{i + 1}: a docs-test mark above a fence that is not run")
            i = j + 1
            continue
        for text, reason in skips:
            hit = [c for c in commands if text in c.text]
            if not hit:
                raise ValueError(f'{doc}:{i + 1}: not run "{text}": no command of the block contains it')
            for c in hit:
                c.skip = reason
        blocks.append(Block(doc, i + 1, kind, body, commands, files, skip, section, setup))
        i = j + 1
    return blocks


def _sh_commands(body: list[str], start: int) -> list[Command]:
    out = []
    k = 0
    while k < len(body):
        if not body[k].strip() or body[k].lstrip().startswith("#"):
            k += 1
            continue
        text, nxt = _join(body, k)
        if re.match(r"\s*cd\s", text):
            raise ValueError(f"line {start + k + 1}: 'cd' in a command block: each command runs on its own, "
                             f"in the doc's folder (name the paths instead)")
        out.append(Command(text, start + k + 1, None, None))
        k = nxt
    return out


def _transcript(body: list[str], start: int) -> list[Command]:
    out = []
    k = 0
    while k < len(body):
        if not body[k].startswith("$ "):
            k += 1
            continue
        text, nxt = _join(body, k)
        end = nxt
        while end < len(body) and not body[end].startswith("$ "):
            end += 1
        printed = body[nxt:end]
        while printed and not printed[-1].strip():
            printed = printed[:-1]
        out.append(Command(text[2:], start + k + 1, printed or None,
                           (start + nxt, start + nxt + len(printed)) if printed else None))
        k = end
    return out


# ------------------------------------------------------------------ running

@dataclasses.dataclass
class Ran:
    command: Command
    code: int
    output: list[str]               # stdout and stderr as a terminal shows them, <tmp>/ taken out
    stderr: str


def prepare(where: pathlib.Path, root: pathlib.Path, decoders: pathlib.Path) -> None:
    """A doc's folder: the repository's captures/ and tests/, the decoders that ship, a HOME."""
    (where / "home").mkdir()
    for name, target in {"captures": root / "captures", "tests": root / "tests", "decoders": decoders}.items():
        (where / name).symlink_to(target)


def link_files(block: Block, where: pathlib.Path, root: pathlib.Path) -> None:
    """The files a block names as the reader's own (its 'files' mark): links to the
    repository's, or synthesized; a 'file' block's text."""
    if block.kind == "file":
        (name,) = block.files
        (where / name).write_text("\n".join(block.body) + "\n", encoding="utf-8")
        return
    for name, path in block.files.items():
        if path.startswith("synth:"):
            synthesize(where / name.rstrip("/"), path[len("synth:"):])
            continue
        target = root / path
        if not target.exists():
            raise FileNotFoundError(f"{block.doc}:{block.line}: files {name}={path}: {target} is missing")
        dest = where / name.rstrip("/")
        if dest.is_symlink() and dest.resolve() == target.resolve():
            continue
        if dest.exists() or dest.is_symlink():
            raise FileExistsError(f"{block.doc}:{block.line}: files {name}=...: {name} is already there")
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.symlink_to(target)


def synthesize(dest: pathlib.Path, spec: str) -> None:
    """A small SPI capture (20 messages of 3 bytes at 2 MHz, 50 MHz sampling) as FORMAT."""
    from spigap.synth import Scenario, tracks
    from spigap.synth.writers import write_capture

    fmt, _, names = spec.partition(":")
    over: dict = {"messages": 20, "samplerate": 50e6, "sclk": 2e6, "seed": 1}
    if names:
        over["channels"] = dict(zip(("clk", "mosi", "miso", "cs"), names.split(","), strict=True))
    sc = Scenario.from_toml(None, over)
    tl = sc.timeline()
    dest.parent.mkdir(parents=True, exist_ok=True)
    write_capture(dest, fmt, tracks(tl, sc.channels, sc.samplerate), sc.samplerate,
                  int(round(tl.end_time * sc.samplerate)))


def environment(where: pathlib.Path) -> dict[str, str]:
    bindir = pathlib.Path(sys.executable).parent
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SIGROKDECODE", "PYTEST", "COV_"))}
    env.update(PATH=f"{bindir}:{env.get('PATH', '/usr/bin:/bin')}", HOME=str(where / "home"),
               XDG_DATA_HOME=str(where / "home" / ".local" / "share"), PYTHONUNBUFFERED="1",
               LC_ALL="C.UTF-8", TZ="UTC", COLUMNS="200", MPLBACKEND="Agg", QT_QPA_PLATFORM="offscreen")
    env.pop("VIRTUAL_ENV", None)
    return env


def run(block: Block, command: Command, where: pathlib.Path, timeout: float = 120) -> Ran:
    env = environment(where)
    if block.kind == "python":
        argv = [sys.executable, "-c", command.text]
    else:
        argv = ["bash", "-o", "pipefail", "-c", command.text]
    # a session of its own: a command that hangs is killed with everything it started
    with subprocess.Popen(argv, cwd=where, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT if command.expected is not None else subprocess.PIPE,
                          start_new_session=True) as p:
        try:
            out, err_b = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            out, err_b = p.communicate()
            return Ran(command, -1, [f"(killed after {timeout:.0f} s)"], "")
        finally:
            try:
                os.killpg(p.pid, signal.SIGKILL)      # whatever it left running in the background
            except ProcessLookupError:
                pass
    text = out.decode("utf-8", "replace")
    err = err_b.decode("utf-8", "replace") if err_b is not None else text
    return Ran(command, p.returncode, normalise(text, where).splitlines(), err)


def normalise(text: str, where: pathlib.Path) -> str:
    return text.replace(f"{where}/", "").replace(str(where), ".")


def problems(block: Block, ran: Ran) -> list[str]:
    """What is wrong with a command's run, apart from its printed lines."""
    c = ran.command
    out = []
    ok = {0}
    if block.kind != "python" and shlex.split(c.text, comments=True)[:1] == ["spigap"]:
        ok.add(1)
    if c.expected and any(x.startswith("spigap: error:") for x in c.expected):
        ok.add(2)
    if ran.code not in ok:
        out.append(f"exit status {ran.code} (expected {' or '.join(map(str, sorted(ok)))})")
    bad = [x for x in ran.stderr.splitlines() if x.startswith(("srd:", "Traceback")) or "Error:" in x[:40]]
    if bad:
        out.append("on standard error: " + " | ".join(bad[:3]))
    return out


# ------------------------------------------------------------------ printed blocks

def _fits(seg: list[str], got: list[str], at: int) -> bool:
    return at + len(seg) <= len(got) and all(
        got[at + k].startswith(w[:-len(CUT)]) if w.endswith(CUT) else got[at + k] == w for k, w in enumerate(seg))


def _segments(want: list[str]) -> list[list[str]]:
    segs, cur = [], []
    for w in want + [TRIM]:
        if w.strip() == TRIM:
            segs.append(cur)
            cur = []
        else:
            cur.append(w)
    return segs


def matches(want: list[str], got: list[str]) -> str | None:
    """None when the printed block is the output (with its trims), else what differs first."""
    got = _rstrip(got)
    segs = _segments(want)
    if len(segs) == 1:
        return None if _fits(segs[0], got, 0) and len(segs[0]) == len(got) else "the output differs"
    i = 0
    last = len(segs) - 1
    for n, seg in enumerate(segs):
        if not seg:
            continue
        if n == 0:
            if not _fits(seg, got, 0):
                return f"the output does not start with {seg[0]!r}"
            i = len(seg)
            continue
        while i < len(got) and not _fits(seg, got, i):
            i += 1
        if i >= len(got):
            return f"not in the output (contiguous, in this order, after the lines before): {seg[0]!r}"
        if n == last and i + len(seg) != len(got):
            return f"the output goes on after {seg[-1]!r} without a '{TRIM}' line"
        i += len(seg)
    return None


def _rstrip(lines: list[str]) -> list[str]:
    lines = [x.rstrip() for x in lines]
    while lines and not lines[-1]:
        lines = lines[:-1]
    return lines


def regenerate(want: list[str], got: list[str]) -> list[str]:
    """The printed block rewritten from the output, keeping its shape: the same parts
    trimmed (each kept stretch of lines is mapped onto the output by a line alignment,
    taking along lines the output added inside it), lines cut short at the same length."""
    got = _rstrip(got)
    segs = _segments(want)
    if len(segs) == 1:
        return got
    flat = [w for s in segs for w in s]
    keys = [w[:-len(CUT)] if w.endswith(CUT) else w for w in flat]
    where = _align(keys, got)
    out: list[str] = []
    k = 0
    lo = 0
    for n, seg in enumerate(segs):
        if n:
            out.append(TRIM)
        if not seg:
            continue
        first = 0 if n == 0 else max(lo, where[k])
        last = len(got) - 1 if n == len(segs) - 1 else max(first, where[k + len(seg) - 1])
        span = got[first:last + 1]
        for m, line in enumerate(span):
            cut = seg[min(m, len(seg) - 1)]
            if cut.endswith(CUT) and len(line) > len(cut) - len(CUT):
                line = line[:len(cut) - len(CUT)] + CUT
            out.append(line)
        lo = last + 1
        k += len(seg)
    return out


def _align(keys: list[str], got: list[str]) -> list[int]:
    """For each wanted line, the output line it corresponds to (non-decreasing)."""
    sm = difflib.SequenceMatcher(None, keys, got, autojunk=False)
    where = [-1] * len(keys)
    for tag, a0, a1, b0, b1 in sm.get_opcodes():
        lo = b0
        for a in range(a0, a1):
            if tag == "equal":
                where[a] = b0 + (a - a0)
            elif tag == "replace":           # a changed line: the most similar one, in order
                where[a] = max(range(lo, b1), key=lambda b: difflib.SequenceMatcher(
                    None, keys[a], got[b], autojunk=False).ratio())
                lo = where[a]
    for a in range(len(where)):                    # deleted lines: the position before them
        if where[a] < 0:
            where[a] = where[a - 1] if a else 0
    for a in range(1, len(where)):
        where[a] = max(where[a], where[a - 1])
    return [min(w, max(len(got) - 1, 0)) for w in where]


def diff(block: Block, command: Command, new: list[str]) -> str:
    return "\n".join(difflib.unified_diff(command.expected or [], new, f"{block.doc}:{command.line} (the doc)",
                                          "what it prints now", lineterm="", n=2))


def rewrite(path: pathlib.Path, command: Command, new: list[str]) -> None:
    """Replace the command's printed block in the doc with new lines (the doc locked,
    the block found again by its command line and old text: other workers may be
    rewriting other blocks of the same doc)."""
    import fcntl

    with open(path, "r+", encoding="utf-8") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        lines = f.read().split("\n")
        old = command.expected or []
        head = command.text.split("\n")[0]
        at = None
        for i, line in enumerate(lines):
            if line.strip() == f"$ {head}".strip():
                j = i + 1 + command.text.count("\n")
                indent = line[:len(line) - len(line.lstrip())]
                if [x[len(indent):] for x in lines[j:j + len(old)]] == old:
                    at = (j, indent)
                    break
        if at is None:
            raise RuntimeError(f"{path}: the printed block of '$ {head}' changed while rewriting it")
        j, indent = at
        lines[j:j + len(old)] = [indent + x if x else x for x in new]
        f.seek(0)
        f.write("\n".join(lines))
        f.truncate()
