"""Per-file capture options and labels: a small TOML or CSV manifest.

TOML::

    [defaults]                      # optional: for every capture of the batch
    mode = 0

    [[capture]]
    path = "spi__ad7920__ad7920_fast_read.sr"   # or a glob: "rt-*.sr"
    samplerate = "5MHz"
    clk = "0"
    miso = "1"
    cs = "2"
    labels = { device = "ad7920", host = "mcu" }

CSV (``#`` starts a comment line)::

    path,clk,mosi,miso,cs,mode,kernel,load
    smp-noload-1MHz.sr,SCLK,MOSI,MISO,CE0,0,smp,noload

The option keys are the long capture options of ``spigap analyze`` with ``_``
or ``-`` (``samplerate``, ``clk``, ``no_cs``, ``transfers_per_message``, ...),
taking the same values (``"5MHz"``, ``"250ns"``, ``"auto"``; TOML numbers and
booleans too). In a CSV every column that is not ``path`` and not an option is
a label. A ``path`` with a ``/`` is relative to the manifest's directory; one
without matches captures by file name wherever they are, so one manifest
serves a directory of captures wherever it was copied to. Entries apply in
order, later ones overriding earlier ones, all of them overriding the
command-line options for the files they match.
"""

from __future__ import annotations

import argparse
import copy
import csv
import dataclasses
import fnmatch
import io
import os
from typing import Sequence

from spigap.errors import UsageError
from spigap.infile import read_text, read_toml

# options that exclude each other: setting one in an entry clears the others
EXCLUSIVE = {"mode": ("cpol", "cpha"), "cpol": ("mode",), "cpha": ("mode",), "cs": ("no_cs",),
             "no_cs": ("cs",)}


def option_keys(parser: argparse.ArgumentParser) -> set[str]:
    """Every capture option, by its argparse ``dest`` (``no_cs``, ``samplerate``, ...).

    ``parser``: the capture options as an argparse parser that raises
    ``UsageError`` on a bad value (the CLI passes
    ``spigap.cli.common.capture_option_parser()``), so a manifest takes
    exactly what the command line takes."""
    return set(vars(parser.parse_args([])))


@dataclasses.dataclass
class Entry:
    pattern: str                 # as written in the manifest
    where: str                   # "entry 3" / "line 4": for messages
    options: dict                # dest -> raw value (str, number, bool)
    labels: dict                 # name -> str
    resolved: str | None = None  # absolute path or glob when the pattern has a directory part

    def matches(self, path: str) -> bool:
        if self.resolved is not None:
            full = os.path.abspath(path)
            return full == self.resolved or fnmatch.fnmatchcase(full, self.resolved)
        name = os.path.basename(path)
        return name == self.pattern or fnmatch.fnmatchcase(name, self.pattern)


@dataclasses.dataclass
class Manifest:
    path: str
    defaults: dict
    entries: list[Entry]

    def lookup(self, capture: str | Sequence[str]) -> tuple[dict, dict, list[Entry]]:
        """Options and labels for one capture (defaults, then every matching entry). A
        capture saved as several files (a list): an entry matching any of them applies."""
        files = [capture] if isinstance(capture, str) else list(capture)
        options, labels, hits = dict(self.defaults), {}, []
        for e in self.entries:
            if any(e.matches(f) for f in files):
                for k in e.options:
                    for other in EXCLUSIVE.get(k, ()):
                        options.pop(other, None)
                options.update(e.options)
                labels.update(e.labels)
                hits.append(e)
        return options, labels, hits

    def capture_paths(self) -> list[str]:
        """The captures the manifest names, for a batch given only ``--manifest``."""
        base = os.path.dirname(os.path.abspath(self.path))
        return [e.resolved if e.resolved is not None else os.path.join(base, e.pattern)
                for e in self.entries]


def _key(k: str) -> str:
    return k.strip().replace("-", "_")


def _check_options(raw: dict, keys: set[str], where: str, path: str) -> dict:
    out = {}
    for k, v in raw.items():
        dest = _key(k)
        if dest not in keys:
            raise UsageError(f"{where}: unknown option {k!r}", path=path,
                             hint=f"options: {', '.join(sorted(keys))}; labels go in 'labels'")
        out[dest] = v
    return out


def _label_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (str, int, float)):
        return str(v)
    raise ValueError(f"a label is a string or a number, not {type(v).__name__}")


def _resolve(pattern: str, base: str) -> str | None:
    if "/" not in pattern and os.sep not in pattern:
        return None
    return os.path.normpath(os.path.join(base, os.path.expanduser(pattern)))


def load(path, parser: argparse.ArgumentParser) -> Manifest:
    path = os.fspath(path)
    ext = os.path.splitext(path)[1].lower()
    if ext == ".toml":
        m = _load_toml(path, parser)
    elif ext == ".csv":
        m = _load_csv(path, parser)
    else:
        raise UsageError("a manifest is a .toml or .csv file", path=path)
    # check every value now, against the real option parser: a typo in entry 40
    # should stop the batch before it starts, not become 40 error rows
    apply_options(argparse.Namespace(), m.defaults, parser=parser, where="[defaults]", path=path)
    for e in m.entries:
        apply_options(argparse.Namespace(), e.options, parser=parser, where=e.where, path=path)
    return m


def _load_toml(path: str, parser: argparse.ArgumentParser) -> Manifest:
    data = read_toml(path, what="manifest")
    keys = option_keys(parser)
    unknown = set(data) - {"defaults", "capture"}
    if unknown:
        raise UsageError(f"unknown top-level key(s) {', '.join(sorted(unknown))}", path=path,
                         hint="use [defaults] and [[capture]] tables")
    defaults = data.get("defaults", {})
    if not isinstance(defaults, dict):
        raise UsageError("[defaults] must be a table", path=path)
    defaults = _check_options(defaults, keys, "[defaults]", path)
    caps = data.get("capture", [])
    if not isinstance(caps, list) or not all(isinstance(c, dict) for c in caps):
        raise UsageError("'capture' must be an array of tables ([[capture]])", path=path)
    base = os.path.dirname(os.path.abspath(path))
    entries = []
    for i, c in enumerate(caps, 1):
        where = f"[[capture]] #{i}"
        c = dict(c)
        pattern = c.pop("path", None)
        if not isinstance(pattern, str) or not pattern:
            raise UsageError(f"{where}: needs a 'path' (a file name, a path or a glob)", path=path)
        labels = c.pop("labels", {})
        if not isinstance(labels, dict):
            raise UsageError(f"{where}: 'labels' must be a table, e.g. labels = {{ kernel = \"rt\" }}",
                             path=path)
        try:
            labels = {str(k): _label_value(v) for k, v in labels.items()}
        except ValueError as e:
            raise UsageError(f"{where}: {e}", path=path) from None
        entries.append(Entry(pattern, where, _check_options(c, keys, where, path), labels,
                             _resolve(pattern, base)))
    return Manifest(path, defaults, entries)


def _load_csv(path: str, parser: argparse.ArgumentParser) -> Manifest:
    text = read_text(path, what="manifest")
    lines = [(n, line) for n, line in enumerate(io.StringIO(text, newline=""), 1)
             if line.strip() and not line.lstrip().startswith("#")]
    if not lines:
        raise UsageError("empty manifest", path=path)
    rows = list(csv.reader(line for _, line in lines))
    header = [h.strip() for h in rows[0]]
    if "path" not in header:
        raise UsageError("the CSV manifest needs a 'path' column", path=path,
                         hint=f"its header is: {','.join(header)}")
    if len(set(header)) != len(header):
        raise UsageError("repeated column name in the header", path=path)
    keys = option_keys(parser)
    base = os.path.dirname(os.path.abspath(path))
    entries = []
    for (lineno, _), row in zip(lines[1:], rows[1:]):
        where = f"line {lineno}"
        if len(row) > len(header):
            raise UsageError(f"{where}: {len(row)} fields, the header has {len(header)}", path=path)
        cells = {h: v.strip() for h, v in zip(header, row)}
        pattern = cells.pop("path", "")
        if not pattern:
            raise UsageError(f"{where}: empty 'path'", path=path)
        options, labels = {}, {}
        for h, v in cells.items():
            if v == "":
                continue
            if _key(h) in keys:
                options[_key(h)] = _csv_value(v)
            else:
                labels[h] = v
        entries.append(Entry(pattern, where, options, labels, _resolve(pattern, base)))
    return Manifest(path, {}, entries)


def _csv_value(v: str):
    low = v.lower()
    if low in ("true", "yes", "on"):
        return True
    if low in ("false", "no", "off"):
        return False
    return v


def apply_options(base: argparse.Namespace, options: dict, *, parser: argparse.ArgumentParser, where: str = "",
                  path: str | None = None) -> argparse.Namespace:
    """``base`` (the command-line options) overridden by one entry's ``options``.

    The entry is parsed by the same argparse options ``spigap analyze`` has, so
    every value is checked and converted exactly as on the command line.
    """
    ns = copy.copy(base)
    argv, unset = [], []
    for dest, value in options.items():
        flag = "--" + dest.replace("_", "-")
        if hasattr(ns, dest):
            setattr(ns, dest, None)     # replace, not extend, a repeatable option (--threshold)
        if isinstance(value, bool):
            if value:
                argv.append(flag)
            else:
                unset.append(dest)
        elif isinstance(value, list):
            argv += [f"{flag}={item}" for item in value]
        else:
            argv.append(f"{flag}={value}")   # '=': a value may start with '-'
        for other in EXCLUSIVE.get(dest, ()):
            if other not in options and hasattr(ns, other):
                setattr(ns, other, False if other == "no_cs" else None)
    try:
        parser.parse_args(argv, namespace=ns)
    except UsageError as e:
        prefix = f"{where}: " if where else ""
        raise UsageError(f"{prefix}{e.problem}", path=path) from None
    for dest in unset:
        setattr(ns, dest, False)
    return ns
