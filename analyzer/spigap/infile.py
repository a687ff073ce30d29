"""The one way spigap opens the small files it is given: profiles, device files,
scenarios, manifests, user-space logs, TOML of any kind; and the record of every
input of a command, which the writer (outfile.py) checks so that no command ever
writes over one of its inputs.

What a path gets (docs/cli.md, "Bounds"):

* a regular file: read, at most ``limit`` bytes (``limits.TEXT_FILE_BYTES``); a
  longer one is refused in one line that names the bound, without reading it;
* a FIFO: opened without blocking. A FIFO no program writes to is refused at once
  (spigap does not wait for a writer that may never come); one a program writes
  to (``<(...)``) is read as a stream, within the same bound;
* a character device (``/dev/zero``, ``/dev/urandom``): read as a stream within the
  bound; a terminal, a block device, a socket or a directory: refused;
* TOML: parsed with tomllib (stdlib), nested at most ``limits.TOML_DEPTH`` deep.

Every path opened here, and every capture (io/base.stat_capture), is noted with
``note_input``: its device and inode, after following links. ``input_named`` tells
the writer whether a target is one of them, so ``-o`` naming an input directly,
through a symbolic or hard link, or by another spelling of its path is refused.

This is a bottom layer: it imports only spigap.errors and spigap.limits.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import stat
import tomllib
from collections.abc import Iterator
from typing import IO

from spigap.errors import InputError, SpigapError
from spigap.limits import TEXT_FILE_BYTES, TOML_DEPTH

# ------------------------------------------------------------ the inputs of a command
# (st_dev, st_ino) -> the path as given; regular files and FIFOs (the things a write would
# replace or feed); character devices such as /dev/null are no one's data. Kept while a
# command runs (``command_inputs``: spigap.cli.main); a program that uses spigap as a
# library decides for itself what it writes where.
_INPUTS: dict[tuple[int, int], str] | None = None


def _identity(st: os.stat_result) -> tuple[int, int] | None:
    if stat.S_ISREG(st.st_mode) or stat.S_ISFIFO(st.st_mode):
        return st.st_dev, st.st_ino
    return None


@contextlib.contextmanager
def command_inputs() -> Iterator[None]:
    """The inputs of one command are noted from here to the end of the block."""
    global _INPUTS
    old, _INPUTS = _INPUTS, {}
    try:
        yield
    finally:
        _INPUTS = old


def note_input(path) -> None:
    """Record ``path`` (links followed) as an input of this command; a path that does
    not exist or is no file is ignored (the reader says what is wrong with it)."""
    if _INPUTS is None:
        return
    try:
        key = _identity(os.stat(path))
    except (OSError, ValueError, TypeError):
        return
    if key is not None:
        _INPUTS.setdefault(key, os.fspath(path))


def input_named(path) -> str | None:
    """The input (as it was given) that ``path`` is, links followed: the same device and
    inode; None when ``path`` is none of the inputs or does not exist."""
    if not _INPUTS:
        return None
    try:
        key = _identity(os.stat(path))
    except (OSError, ValueError, TypeError):
        return None
    return _INPUTS.get(key) if key is not None else None


def inputs() -> list[str]:
    """Every input noted so far, as given."""
    return list(_INPUTS.values()) if _INPUTS else []


# ------------------------------------------------------------------- opening
def _refuse(path: str, problem: str, error, hint: str | None = None) -> SpigapError:
    return error(problem, path=path, hint=hint)


def open_input(path, *, what: str, error=InputError) -> IO[bytes]:
    """``path`` opened for reading as a binary file (the rules above), noted as an input.
    ``what`` names what the file should be ("profile"); ``error`` is the SpigapError
    subclass the one-line refusals are raised as."""
    path = os.fspath(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise _refuse(path, f"is a symbolic link to {os.readlink(path)!r}, which does not exist", error,
                          "fix the link or give the real path") from None
        raise _refuse(path, "no such file", error) from None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise _refuse(path, "is a symbolic link loop", error, "fix the link or give the real path") from None
        raise _refuse(path, f"cannot read: {e.strerror or e}", error) from None
    mode = st.st_mode
    if stat.S_ISDIR(mode):
        raise _refuse(path, f"is a directory, not a {what}", error)
    if stat.S_ISBLK(mode):
        raise _refuse(path, f"is a block device (a disk), not a {what}", error)
    if stat.S_ISSOCK(mode):
        raise _refuse(path, f"is a socket, not a {what}", error)
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
    try:
        if stat.S_ISFIFO(mode):
            fd = os.open(path, flags | os.O_NONBLOCK)
            f = _fifo(fd, path, what, error)
        else:
            fd = os.open(path, flags | os.O_NOCTTY)
            if os.isatty(fd):
                os.close(fd)
                raise _refuse(path, f"is a terminal, not a {what}", error)
            f = os.fdopen(fd, "rb")
    except OSError as e:
        raise _refuse(path, f"cannot read: {e.strerror or e}", error) from None
    note_input(path)
    return f


class _Prefixed(io.RawIOBase):
    """A FIFO's first bytes (read to see whether anyone writes to it), then the rest."""

    def __init__(self, first: bytes, f):
        self._first, self._f = first, f

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        if self._first:
            n = min(len(b), len(self._first))
            b[:n] = self._first[:n]
            self._first = self._first[n:]
            return n
        data = self._f.read(len(b))
        b[:len(data)] = data
        return len(data)

    def close(self) -> None:
        self._f.close()
        super().close()


def _fifo(fd: int, path: str, what: str, error) -> IO[bytes]:
    """A FIFO opened non-blocking: refused when no program writes to it (a read then
    ends at once), else its stream from the first byte."""
    try:
        try:
            first = os.read(fd, 1 << 16)
        except BlockingIOError:
            first = None            # a writer is there and has sent nothing yet: wait for it
        if first == b"":
            raise _refuse(path, f"is a FIFO that no program writes to: there is no {what} to read", error,
                          "give a regular file, or start the writer first")
        os.set_blocking(fd, True)
        raw = os.fdopen(fd, "rb", buffering=0)
    except BaseException:
        os.close(fd)
        raise
    return io.BufferedReader(_Prefixed(first or b"", raw))


def read_bytes(path, *, what: str, limit: int = TEXT_FILE_BYTES, error=InputError) -> bytes:
    """All of ``path`` (open_input), at most ``limit`` bytes: a longer file is refused in one
    line naming the bound, a regular file before a byte is read."""
    path = os.fspath(path)
    with open_input(path, what=what, error=error) as f:
        try:
            st = os.fstat(f.fileno())
        except (OSError, ValueError, io.UnsupportedOperation):
            st = None
        if st is not None and stat.S_ISREG(st.st_mode) and st.st_size > limit:
            raise too_big(path, what, limit, error)
        try:
            data = f.read(limit + 1)
        except OSError as e:
            raise _refuse(path, f"cannot read: {e.strerror or e}", error) from None
    if len(data) > limit:
        raise too_big(path, what, limit, error)
    return data


def too_big(path: str, what: str, limit: int, error=InputError) -> SpigapError:
    return _refuse(path, f"is larger than {_size(limit)}, more than any {what} holds", error,
                   f"spigap reads at most {_size(limit)} of a {what}")


def _size(n: int) -> str:
    for unit, k in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << k and n % (1 << k) == 0:
            return f"{n >> k} {unit}"
    return f"{n} bytes"


def read_text(path, *, what: str, limit: int = TEXT_FILE_BYTES, error=InputError) -> str:
    """``read_bytes`` as UTF-8 text (a byte order mark dropped); other bytes are one line."""
    data = read_bytes(path, what=what, limit=limit, error=error)
    return decode(data, path, what, error)


def decode(data: bytes, path: str, what: str, error=InputError) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        kind = "binary data" if b"\0" in data[:4096] else "not UTF-8 text"
        raise _refuse(path, f"{kind} at byte {e.start}: not a {what}", error) from None


# ---------------------------------------------------------------------- TOML
def read_toml(path, *, what: str, text: str | None = None, limit: int = TEXT_FILE_BYTES,
              error=InputError) -> dict:
    """A TOML file (or its ``text``, ``path`` then only names it) as a dict: bounded in
    size (``limit``) and depth (``limits.TOML_DEPTH``); a file that is missing, too big,
    not UTF-8, not TOML or too deep is one ``error`` line naming the file."""
    path = os.fspath(path) if path is not None else None
    if text is None:
        text = read_text(path, what=what, limit=limit, error=error)
    elif len(text) > limit:
        raise too_big(str(path), what, limit, error)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise _refuse(path, f"not valid TOML: {e}", error) from None
    except RecursionError:
        raise _too_deep(path, what, error) from None
    if depth(data) > TOML_DEPTH:
        raise _too_deep(path, what, error)
    return data


def _too_deep(path, what: str, error) -> SpigapError:
    return _refuse(path, f"is nested deeper than {TOML_DEPTH} levels (tables, arrays, inline tables): "
                         f"not a {what}", error)


def depth(value) -> int:
    """How deep dicts and lists nest in ``value`` (a scalar: 0), without recursion."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, dict):
            items = list(v.values())
        elif isinstance(v, list):
            items = v
        else:
            continue
        deepest = max(deepest, d)
        if d > TOML_DEPTH:
            return d
        stack.extend((x, d + 1) for x in items)
    return deepest
