"""Command-line arguments (files, directories, globs) -> the list of captures.

* a file named explicitly is always taken (the reader then decides by extension
  or content, or ``--input-format``);
* a directory is searched recursively for files whose extension a reader knows
  (``spigap.io.READERS``), hidden files and directories skipped. A Saleae
  Logic 2 binary export (a folder of ``digital_N.bin``/``analog_N.bin``) is one
  capture: the folder;
* a glob (``*``, ``?``, ``[...]``, ``**`` for any depth) keeps the matching files
  with a known extension, and also those ending in an extension the pattern
  itself spells out (``scope/*.dat --input-format scope-csv``); matched
  directories are searched as above.

A scope's files of one acquisition, one file per channel (``tek0000CH1.isf``,
``tek0000CH2.isf``: names that differ only in a trailing ``CH<n>``, in one
folder, with one extension; ``io.combine.group_acquisitions``), are one capture
however they were named: its ``files`` are the members in channel order, its
``path`` is them joined with `` + `` (as ``spigap analyze`` names them). Logic
analyzer sessions (``.sr``, ``.dsl``, ``.vcd``) hold every channel and are never
grouped.

Generic text extensions (``.csv``, ``.txt``, ``.tsv``, and any extension two
readers share) also name notes, manifests and the CSV this command writes, so
in directories and globs such files are kept only when a reader recognizes
their first bytes; the others are reported as skipped. An argument that names
nothing becomes an entry with an error (one error row in the batch); the same
capture reached twice is analyzed once.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import re
import stat

GLOB_CHARS = re.compile(r"[*?\[]")
TEXT_EXTS = (".csv", ".txt", ".tsv")
_SALEAE_FILE = re.compile(r"^(digital|analog)_\d+\.bin$", re.IGNORECASE)


@dataclasses.dataclass
class Found:
    path: str                 # as the user will see it (relative if given relative)
    error: str | None = None  # why this argument gave no capture
    files: list[str] | None = None   # an acquisition saved as several files: them (path joins them)


# sessions that hold every channel of a capture: a CH<n> in their names is the user's, not a scope's
NEVER_GROUPED = (".sr", ".dsl", ".vcd")


def _entries():
    from spigap.io import READERS

    return READERS


def _reader_extensions(entry) -> tuple[str, ...]:
    # READERS maps name -> (factory, extensions, sniff); accept an object with
    # an ``extensions`` attribute too, should the registry grow into one.
    exts = getattr(entry, "extensions", None)
    if exts is None and isinstance(entry, (tuple, list)) and len(entry) > 1:
        exts = entry[1]
    return tuple(e.lower() for e in (exts or ()))


def _reader_sniff(entry):
    sniff = getattr(entry, "sniff", None)
    if sniff is None and isinstance(entry, (tuple, list)) and len(entry) > 2:
        sniff = entry[2]
    return sniff


def known_extensions(input_format: str | None = None) -> tuple[str, ...]:
    """Extensions (with the dot, lower case) of every reader, or of one."""
    readers = _entries()
    if input_format:
        entry = readers.get(input_format)
        return _reader_extensions(entry) if entry is not None else ()
    out: list[str] = []
    for entry in readers.values():
        for e in _reader_extensions(entry):
            if e not in out:
                out.append(e)
    return tuple(out)


def ambiguous_extensions() -> set[str]:
    """Extensions that do not by themselves say 'capture': shared or generic text."""
    seen: dict[str, int] = {}
    for entry in _entries().values():
        for e in _reader_extensions(entry):
            seen[e] = seen.get(e, 0) + 1
    return {e for e, n in seen.items() if n > 1} | set(TEXT_EXTS)


def looks_like_capture(path: str, exts) -> bool:
    """Does a reader claiming this file's extension accept its first bytes? A FIFO or a
    device is not opened here (that could wait forever): the worker's reader decides,
    within the batch's time limit."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return True
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return True     # let the reader report why it cannot be read
    low = path.lower()
    for entry in _entries().values():
        if not any(low.endswith(e) for e in _reader_extensions(entry)):
            continue
        sniff = _reader_sniff(entry)
        try:
            if sniff is None or sniff(head):
                return True
        except Exception:
            continue
    return False


def is_capture_dir(path: str) -> bool:
    """A folder that is one capture (a Saleae Logic 2 binary export)."""
    from spigap.io.saleae import is_saleae_dir

    try:
        return bool(is_saleae_dir(path))
    except OSError:
        return False


def natural_key(text: str):
    """'cap-10' after 'cap-9': digit runs compare as numbers."""
    return [(0, int(t), "") if t.isdigit() else (1, 0, t.lower()) for t in re.split(r"(\d+)", text)]


def _has_ext(name: str, exts) -> bool:
    low = name.lower()
    return any(low.endswith(e) for e in exts)


def _pattern_suffix(pattern: str) -> str | None:
    """'.dat' for 'scope/*.dat': an extension the glob spells out literally."""
    base = os.path.basename(pattern)
    m = re.search(r"(\.[A-Za-z0-9_]+)$", base)
    return m.group(1).lower() if m and not GLOB_CHARS.search(m.group(1)) else None


class _Collector:
    def __init__(self, exts, exclude):
        self.exts = exts
        self.ambiguous = ambiguous_extensions()
        self.exclude = {os.path.realpath(p) for p in exclude}
        self.found: list[Found] = []
        self.seen: set[str] = set()
        self.skipped: list[str] = []

    def add(self, path: str) -> bool:
        key = os.path.realpath(path)
        if key in self.seen or key in self.exclude:
            return False
        self.seen.add(key)
        self.found.append(Found(path))
        return True

    def candidate(self, path: str, keep=None) -> None:
        """A file met while walking or globbing: add it if it is a capture."""
        name = os.path.basename(path)
        if _SALEAE_FILE.match(name):
            # one channel of a Saleae export: the folder is the capture
            folder = os.path.dirname(path) or "."
            if is_capture_dir(folder):
                self.add(folder)
                return
        if not _has_ext(name, keep or self.exts) or os.path.realpath(path) in self.exclude:
            return
        if _has_ext(name, self.ambiguous) and not looks_like_capture(path, self.exts):
            self.skipped.append(path)
            return
        self.add(path)

    def walk(self, directory: str) -> None:
        if is_capture_dir(directory):
            self.add(directory)
            return
        visited = {os.path.realpath(directory)}
        for root, dirs, files in os.walk(directory, followlinks=True):
            dirs[:] = sorted((d for d in dirs if not d.startswith(".")), key=natural_key)
            # a directory reached twice through links (a link loop) is walked once
            dirs[:] = [d for d in dirs if _first_visit(visited, os.path.join(root, d))]
            if root != directory and is_capture_dir(root):
                self.add(root)
                dirs[:] = []
                continue
            for f in sorted(files, key=natural_key):
                if not f.startswith("."):
                    self.candidate(os.path.join(root, f))


def _missing(path: str) -> str:
    """Why ``path`` names nothing (no such file, a dangling link, a link loop)."""
    from spigap.errors import InputError
    from spigap.io.base import stat_capture

    try:
        stat_capture(path)
    except InputError as e:
        return e.problem
    return "no such file"


def _first_visit(visited: set, path: str) -> bool:
    key = os.path.realpath(path)
    if key in visited:
        return False
    visited.add(key)
    return True


def expand(inputs, *, input_format: str | None = None, exclude=(),
           skipped: list | None = None) -> list[Found]:
    """The captures named by ``inputs``. ``exclude``: files never taken from
    directories or globs (the manifest); ``skipped`` (a list) receives the files
    passed over because no reader recognized them."""
    exts = known_extensions(input_format) or known_extensions()
    c = _Collector(exts, exclude)
    for arg in inputs:
        arg = os.fspath(arg)
        if GLOB_CHARS.search(arg) and not os.path.exists(arg):
            suffix = _pattern_suffix(arg)
            keep = exts + ((suffix,) if suffix and suffix not in exts else ())
            n_before, matches = len(c.found), sorted(glob.glob(arg, recursive=True), key=natural_key)
            for m in matches:
                if os.path.isdir(m):
                    c.walk(m)
                elif suffix and suffix not in exts and m.lower().endswith(suffix):
                    c.add(m)        # the user spelled this extension out: take it as is
                else:
                    c.candidate(m, keep)
            if len(c.found) == n_before and not any(os.path.realpath(m) in c.seen for m in matches):
                c.found.append(Found(arg, "matches no capture file"
                                     + (f" (known extensions: {' '.join(exts)})" if matches else "")))
        elif os.path.isdir(arg):
            n_before = len(c.found)
            c.walk(arg)
            c.found[n_before:] = sorted(c.found[n_before:], key=lambda f: natural_key(f.path))
            if len(c.found) == n_before:
                c.found.append(Found(arg, f"directory holds no capture file (known extensions: "
                                          f"{' '.join(exts)})"))
        elif os.path.exists(arg):
            c.add(arg)
        else:
            c.found.append(Found(arg, _missing(arg)))
    if skipped is not None:
        skipped.extend(c.skipped)
    return group(c.found)


def group(found: list[Found]) -> list[Found]:
    """The files of one acquisition (io.combine.group_acquisitions) as one entry, at the
    place of the first of them."""
    from spigap.io.combine import group_acquisitions

    single = [f.path for f in found if f.error is None and f.files is None
              and not _has_ext(f.path, NEVER_GROUPED) and not os.path.isdir(f.path)]
    groups = [g for g in group_acquisitions(single) if len(g) > 1]
    if not groups:
        return found
    position = {f.path: i for i, f in enumerate(found)}
    first = {min(g, key=position.__getitem__): g for g in groups}
    members = {p for g in groups for p in g}
    out = []
    for f in found:
        if f.path in first:
            out.append(Found(" + ".join(first[f.path]), files=first[f.path]))
        elif f.path not in members or f.error is not None:
            out.append(f)
    return out
