"""No command writes over one of its inputs: which arguments name files spigap reads
and which it writes, and the one check of them, before any work (docs/cli.md, "What
spigap writes, and what it never touches").

``ROLES`` says it for every option of every subcommand, by its ``dest``
(``OVERRIDES`` where one subcommand's option of that name goes the other way:
``spigap synth --ftrace`` writes a trace, ``spigap trace --ftrace`` reads one).
``spigap.cli.main`` calls ``check`` after parsing and before the subcommand runs:
every input is noted (spigap.infile.note_input: its device and inode, links
followed), then every output is checked against them (spigap.outfile.check_target)
and against the other outputs. An output that is an input, directly, through a
symbolic or hard link or by another spelling of its path, is one line and exit 2
before a capture is opened.

Inputs found later (the captures a folder or a glob of ``spigap batch`` holds, the
device file a profile names) are noted when they are opened, and the writer checks
again before it replaces anything; ``spigap batch`` checks its outputs again once
it has found its captures, before it analyzes any.

tests/test_inputs_safe.py fails when an option that names a file has no role here,
so a new option or subcommand cannot forget it.
"""

from __future__ import annotations

import argparse
import dataclasses
import fnmatch
import os

from spigap.errors import UsageError


@dataclasses.dataclass(frozen=True)
class Role:
    kind: str                   # "input", "spec" (a name or a file), "output", "output dir"
    pattern: str = "*"          # "output dir": the names written into it


INPUT = Role("input")
SPEC = Role("spec")             # --profile NAME|FILE, --device NAME[@V][:K=V] or FILE.toml
OUTPUT = Role("output")
NONE = Role("none")             # names no file (declared, so the completeness test knows)

# dest -> role, for every subcommand (the shared option groups of cli/common.py and the
# subcommands' own path arguments)
ROLES: dict[str, Role] = {
    "capture": INPUT, "captures": INPUT, "inputs": INPUT, "before": INPUT, "after": INPUT,
    "ftrace": INPUT, "before_ftrace": INPUT, "after_ftrace": INPUT, "userlog": INPUT,
    "manifest": INPUT, "config": INPUT, "real": INPUT,
    "profile": SPEC, "profile_for": SPEC, "device": SPEC, "device_for": SPEC,
    "output": OUTPUT, "perfetto": OUTPUT, "csv": OUTPUT, "json": OUTPUT, "matrix_csv": OUTPUT,
    "truth": OUTPUT, "synth": OUTPUT,
    "png": Role("output dir", "*.png"),
    "dest": Role("output dir"),
}
# (subcommand, dest) -> role where a subcommand's option differs from ROLES
OVERRIDES: dict[tuple[str, str], Role] = {
    ("synth", "ftrace"): OUTPUT,            # spigap synth --ftrace OUT.txt: the trace it writes
    ("synth", "device"): NONE,              # spigap synth --device NAME:K=V: traffic, not a file
}


def role_of(command: str, dest: str) -> Role | None:
    return OVERRIDES.get((command, dest), ROLES.get(dest))


def command_of(args: argparse.Namespace) -> str:
    """'analyze', 'decoders pvs': the subcommand the namespace is of."""
    names = [getattr(args, "command", None) or ""]
    names += [v for k, v in sorted(vars(args).items()) if k.endswith("_command") and isinstance(v, str)]
    return " ".join(n for n in names if n)


def _values(value) -> list[str]:
    if value is None or isinstance(value, bool):
        return []
    if isinstance(value, dict):
        return [str(v) for v in value.values()]
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value if v is not None]
    return [str(value)]


def spec_paths(spec: str) -> list[str]:
    """The file a --profile/--device value names, if it names one that exists:
    ``CE0=chip.toml@3V3:vref=3.3`` -> ["chip.toml"]."""
    from spigap.cli.common import cs_prefixed

    spec = cs_prefixed(spec)[1]
    out = []
    for cand in (spec, spec.split(":", 1)[0], spec.rpartition("@")[0], spec.split(":", 1)[0].rpartition("@")[0]):
        if cand and cand not in out and os.path.isfile(cand):
            out.append(cand)
    return out[:1]


def paths(args: argparse.Namespace) -> tuple[list[str], list[str], list[tuple[str, Role]]]:
    """(inputs, outputs, output directories with their role) the command line names."""
    command = command_of(args)
    inputs: list[str] = []
    outputs: list[str] = []
    dirs: list[tuple[str, Role]] = []
    for dest, value in vars(args).items():
        role = role_of(command, dest)
        if role is None or role is NONE:
            continue
        for v in _values(value):
            if role is INPUT:
                if v != "-":
                    inputs.append(v)
            elif role is SPEC:
                inputs += spec_paths(v)
            elif role is OUTPUT:
                outputs.append(v)
            else:
                dirs.append((v, role))
    return inputs, outputs, dirs


def check(args: argparse.Namespace) -> None:
    """Note the inputs the command line names; refuse, in one line, an output that is one
    of them (or a place that cannot be written, outfile.check_target), two outputs that are
    one file, and an output directory that holds an input its files could replace."""
    from spigap import infile

    inputs, outputs, dirs = paths(args)
    for p in inputs:
        infile.note_input(p)
    check_outputs(outputs)
    for d, role in dirs:
        check_output_dir(d, role.pattern, infile.inputs())


def recheck(args: argparse.Namespace, found: list[str]) -> None:
    """Inputs found after parsing (the captures of a batch's folders and globs): noted,
    a folder's files too (a Saleae capture), then ``check`` again, before any work."""
    from spigap import infile

    for p in found:
        infile.note_input(p)
        if os.path.isdir(p):
            try:
                for entry in os.scandir(p):
                    infile.note_input(entry.path)
            except OSError:
                pass
    check(args)


def check_outputs(outputs: list[str]) -> None:
    """Every output against the inputs noted so far and against the other outputs."""
    from spigap import outfile

    seen: dict[object, str] = {}
    for out in outputs:
        outfile.check_target(out)
        if out == outfile.STDOUT or out.startswith("/dev/") or out.startswith("/proc/self/fd/"):
            continue
        try:
            st = os.stat(out)
            key: object = (st.st_dev, st.st_ino)
        except OSError:
            key = os.path.realpath(out)
        if key in seen:
            raise UsageError(f"{seen[key]} and {out} are the same file: give each output its own name")
        seen[key] = out


def check_output_dir(directory: str, pattern: str, inputs: list[str]) -> None:
    """An output directory (``--png DIR``) holding an input whose name its files may take."""
    try:
        real = os.path.realpath(directory)
    except OSError:
        return
    for inp in inputs:
        try:
            here = os.path.realpath(os.path.dirname(os.path.abspath(inp)))
        except OSError:
            continue
        if here == real and fnmatch.fnmatch(os.path.basename(inp), pattern):
            raise UsageError(f"holds the input {os.path.basename(inp)}, which a file written there ({pattern}) "
                             "could replace: spigap never writes over its inputs", path=directory,
                             hint="give another directory")
