"""The one way spigap writes what it outputs: every command, every file (``-o``,
``--perfetto``, ``--png``, ``--matrix-csv``, JUnit, reports, synthesized captures).

What a target gets (docs/cli.md, "What spigap writes"):

* a regular file, or a name that does not exist yet: the bytes go to a temporary
  file beside it, which is flushed to the disk (fsync) and renamed over the target
  only once complete. The target appears whole or not at all: on any failure (a
  full disk, Ctrl-C, SIGTERM, a bug) the temporary file is removed and the old
  file is left as it was. An existing file keeps its permissions (and, when run as
  root, its owner);
* a symbolic link: resolved, and its target written as above (the link stays);
* a FIFO or a character device (``/dev/stdout``, a terminal, ``/dev/null``): written
  in place as a stream, never replaced; a FIFO nobody reads yet is waited for, and
  spigap says so;
* a block device, a socket or a directory: refused in one line before any work; so is a
  regular file or a new name on a kernel file system (/proc, /sys, ...: the kernel's
  settings and reports), on a read-only file system, or in a folder the user may not
  write to (``filesystem_of`` reads the mount table);
* one of the command's inputs (the same device and inode, links followed: the path
  itself, a symbolic or hard link to it, another spelling of it): refused in one
  line. Every input is noted as it is opened (spigap.infile.note_input); the CLI
  notes the inputs its options name and checks every output before any work
  (spigap.cli.guard), and the check here is repeated before a target is replaced.

Write errors anywhere (standard output too) become ``OutputError``: one line, exit 2.
A closed pipe on standard output (``spigap ... | head``) is not an error
(``BrokenPipeError`` goes up to the CLI, which ends quietly).

``std_streams`` puts standard output and standard error behind the same rules for
the length of a command, and escapes control characters in everything printed
(``errors.printable``); ``csv_cell`` is the one rule that keeps a CSV cell from
becoming a spreadsheet formula.

It imports only spigap.errors, spigap.infile (the record of the inputs) and the
standard library.
"""

from __future__ import annotations

import contextlib
import errno
import io
import os
import re
import stat
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from typing import IO, Any

from spigap.errors import OutputError, printable
from spigap.infile import input_named

STDOUT = "-"


# ----------------------------------------------------------------- targets
def _describe(mode: int) -> str | None:
    """Why a target of this kind is refused (None: spigap writes it)."""
    if stat.S_ISDIR(mode):
        return "is a directory"
    if stat.S_ISBLK(mode):
        return "is a block device: spigap does not write onto disks"
    if stat.S_ISSOCK(mode):
        return "is a socket: spigap writes files, FIFOs and character devices"
    return None


def _resolve(path: str) -> tuple[str, os.stat_result | None]:
    """(the path to write, what is there now or None): a symlink (chain) is resolved
    to its target, which the write then goes to."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise OutputError("is a symbolic link loop", path=path,
                              hint="fix the link or give another output name") from None
        raise OutputError(f"cannot write: {e.strerror or e}", path=path) from None
    real = os.path.realpath(path) if os.path.islink(path) else path
    return real, st


_FD_PATH = re.compile(r"^/(?:dev/(stdout|stderr)|dev/fd/(\d+)|proc/self/fd/(\d+))$")


def _fd_of(path: str) -> int | None:
    """The descriptor ``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/N`` or ``/proc/self/fd/N``
    names: written as it is (a pipe, a terminal, a file the shell opened, with its offset
    and its append mode), never resolved and replaced."""
    m = _FD_PATH.match(path)
    if m is None:
        return None
    if m.group(1):
        return 1 if m.group(1) == "stdout" else 2
    return int(m.group(2) or m.group(3))


def not_an_input(path: str, shown: str | None = None) -> None:
    """Refuse ``path`` when it is one of the command's inputs (spigap.infile.input_named)."""
    inp = input_named(path)
    if inp is None:
        return
    shown = shown or path
    same = os.path.abspath(inp) == os.path.abspath(shown)
    what = "is one of this command's inputs" if same else f"is the input {printable(inp)} (the same file)"
    raise OutputError(f"{what}: spigap never writes over its inputs", path=shown,
                      hint="give another output name")


def check_target(path: str | None) -> None:
    """Fail before the work when ``path`` names a place that cannot be written, or one
    of the command's inputs."""
    if path in (None, STDOUT):
        return
    assert path is not None
    if _fd_of(path) is not None:
        return
    real, st = _resolve(path)
    if st is not None:
        why = _describe(st.st_mode)
        if why is not None:
            hint = "give a file name" if stat.S_ISDIR(st.st_mode) else "give a file name, a FIFO or a terminal"
            raise OutputError(why, path=path, hint=hint)
        not_an_input(path)
        if stat.S_ISREG(st.st_mode):
            _check_place(real, path)
        return
    d = os.path.dirname(os.path.abspath(real))
    if not os.path.isdir(d):
        raise OutputError("the output directory does not exist", path=path,
                          hint="create it first or give another output name")
    _check_place(real, path)


# What to do about a write that failed, by its errno: the system's words say what is wrong,
# these what to do (every message is one line: file, what, what to do)
_FIXES = {
    errno.ENOSPC: "free some space on that disk, or give an output name on another one",
    errno.EDQUOT: "free some of your quota, or give an output name on another disk",
    errno.EFBIG: "give an output name on a file system that takes larger files",
    errno.EROFS: "the file system is mounted read-only: give an output name on a writable disk",
    errno.EACCES: "give an output name in a folder you may write to",
    errno.EPERM: "give an output name in a folder you may write to",
    errno.EIO: "the disk reported an error (see dmesg): give an output name on another disk",
}


def _error(e: OSError, path: str) -> OutputError:
    return OutputError(f"cannot write: {e.strerror or e}", path=path,
                       hint=_FIXES.get(e.errno or 0, "give another output name"))


# Kernel file systems: their files are the kernel's settings and reports, not places for
# data; nothing spigap writes belongs there. procfs refuses a new file with ENOENT ("No such
# file or directory" about a folder that exists), sysfs with EACCES: named for what they are.
_KERNEL_FS = frozenset({"proc", "sysfs", "debugfs", "tracefs", "securityfs", "cgroup", "cgroup2", "pstore",
                        "bpf", "configfs", "efivarfs", "binfmt_misc", "fusectl", "selinuxfs", "devpts",
                        "mqueue", "nsfs", "rpc_pipefs"})
# the mount table read to name a target's file system: 1 MiB holds some 8 000 mounts (more
# than any machine spigap runs on; a longer table is read up to that, the rest not found)
MOUNT_TABLE_BYTES = 1 << 20


def _unescape_mount(field: str) -> str:
    """A mount point as /proc/self/mountinfo writes it: space, tab, newline and backslash as
    octal escapes (\\040)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def filesystem_of(path: str) -> tuple[str, str] | None:
    """(mount point, file system type) of the file system ``path`` is on (the longest mount
    point above it in /proc/self/mountinfo, the path's links resolved); None where there is
    no mount table (not Linux)."""
    real = os.path.realpath(path)
    try:
        with open("/proc/self/mountinfo", "rb") as f:
            table = f.read(MOUNT_TABLE_BYTES).decode("utf-8", "replace")
    except OSError:
        return None
    best: tuple[str, str] | None = None
    for line in table.splitlines():
        left, sep, right = line.partition(" - ")
        fields = left.split()
        if not sep or len(fields) < 5 or not right.split():
            continue
        mnt = _unescape_mount(fields[4])
        inside = real == mnt or real.startswith(mnt.rstrip("/") + "/")
        if inside and (best is None or len(mnt) >= len(best[0])):       # later mounts hide earlier ones
            best = (mnt, right.split()[0])
    return best


def _check_place(real: str, shown: str) -> None:
    """Refuse, before any work, a regular file or new name spigap cannot create beside: on a
    kernel file system, a read-only one, or in a folder the user may not write to (the
    temporary file goes beside the target, docs/cli.md)."""
    d = os.path.dirname(os.path.abspath(real))
    fs = filesystem_of(d)
    if fs is not None and fs[1] in _KERNEL_FS:
        raise OutputError(f"is on {printable(fs[0])}, the kernel's {fs[1]} file system: its files are the kernel's "
                          "settings and reports, not outputs", path=shown,
                          hint="give an output name on a disk, e.g. in the current folder")
    with contextlib.suppress(OSError):
        if os.statvfs(d).f_flag & os.ST_RDONLY:
            raise OutputError(f"is on a read-only file system{f' ({printable(fs[0])})' if fs else ''}",
                              path=shown, hint="give an output name on a writable disk")
    if not os.access(d, os.W_OK | os.X_OK):
        raise OutputError(f"cannot write: permission denied to create files in {printable(d)}", path=shown,
                          hint=_FIXES[errno.EACCES])


# ------------------------------------------------------------ the writers
@contextlib.contextmanager
def open_output(path: str | None, *, binary: bool = False, escape: bool = True) -> Iterator[Any]:
    """A file object to write ``path`` through, per the rules above; ``None`` or ``-``:
    standard output. Text (UTF-8) unless ``binary``; ``escape``: control characters in
    the text are escaped (``errors.printable``, tabs and newlines kept), off only for
    formats that escape their own strings (JSON). Write errors raise OutputError."""
    if path in (None, STDOUT):
        std = sys.stdout
        # within std_streams() standard output already escapes and maps its errors
        out = std if isinstance(std, _StdStream) and not binary else \
            _Checked(std.buffer if binary else std, "standard output", escape=False)
        yield out
        out.flush()
        return
    assert path is not None
    fd = _fd_of(path)
    if fd is not None:
        with _open_descriptor(fd, path, binary, escape) as f:
            yield f
        return
    real, st = _resolve(path)
    if st is not None:
        why = _describe(st.st_mode)
        if why is not None:
            raise OutputError(why, path=path)
        not_an_input(path)
    if st is not None and not stat.S_ISREG(st.st_mode):
        with _open_stream(path, path, binary, escape) as f:     # the path itself: written in place
            yield f
        return
    _check_place(real, path)
    with _open_replacing(real, path, st, binary, escape) as f:
        yield f


def write_output(path: str | None, data: str | bytes, *, escape: bool = True) -> None:
    """Write ``data`` (text or bytes) to ``path`` (``open_output``)."""
    with open_output(path, binary=isinstance(data, bytes), escape=escape) as f:
        f.write(data)


@contextlib.contextmanager
def _open_replacing(real: str, shown: str, st: os.stat_result | None, binary: bool, escape: bool):
    """A regular file: a temporary file beside it, fsynced and renamed over it at the end."""
    directory = os.path.dirname(os.path.abspath(real))
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(real)}.", suffix=".tmp", dir=directory)
    except OSError as e:
        raise _error(e, shown) from None
    try:
        raw = os.fdopen(fd, "wb")
        f = _Checked(_text(raw) if not binary else raw, shown, escape=escape and not binary)
        try:
            yield f
            f.flush()
            try:
                os.fsync(raw.fileno())
            except OSError as e:
                raise _error(e, shown) from None
        finally:
            try:
                raw.close()
            except OSError:
                pass
        try:
            if st is not None:
                os.chmod(tmp, stat.S_IMODE(st.st_mode))         # keep the old file's permissions
                if os.geteuid() == 0 and (st.st_uid, st.st_gid) != (os.getuid(), os.getgid()):
                    with contextlib.suppress(OSError):
                        os.chown(tmp, st.st_uid, st.st_gid)     # ... and its owner
            else:
                umask = os.umask(0)
                os.umask(umask)
                os.chmod(tmp, 0o666 & ~umask)                    # what open(path, "w") would have given
            not_an_input(real, shown)           # an input opened since the target was checked
            os.replace(tmp, real)
        except OSError as e:
            raise _error(e, shown) from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):          # the rename itself on the disk (best effort)
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


@contextlib.contextmanager
def _open_stream(real: str, shown: str, binary: bool, escape: bool):
    """A FIFO or a character device: written in place, in order, never replaced."""
    flags = os.O_WRONLY | getattr(os, "O_CLOEXEC", 0)
    try:
        try:
            fd = os.open(real, flags | os.O_NONBLOCK)
        except OSError as e:
            if e.errno != errno.ENXIO:       # ENXIO: a FIFO with no reader yet
                raise
            print(f"spigap: note: waiting for a reader of the FIFO {printable(shown)} "
                  "(Ctrl-C to give up)", file=sys.stderr, flush=True)
            fd = os.open(real, flags)
        os.set_blocking(fd, True)
    except OSError as e:
        raise _error(e, shown) from None
    raw = os.fdopen(fd, "wb")
    f = _Checked(_text(raw) if not binary else raw, shown, escape=escape and not binary)
    try:
        yield f
        f.flush()
    finally:
        try:
            raw.close()
        except OSError:
            pass


@contextlib.contextmanager
def _open_descriptor(fd: int, shown: str, binary: bool, escape: bool):
    """/dev/stdout and the like: the descriptor itself (a copy of it), written as a stream."""
    if fd == 1 and sys.stdout is not None:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            sys.stdout.flush()           # what was printed before comes first
    try:
        raw = os.fdopen(os.dup(fd), "wb")
    except OSError as e:
        raise _error(e, shown) from None
    f = _Checked(_text(raw) if not binary else raw, shown, escape=escape and not binary)
    try:
        yield f
        f.flush()
    finally:
        with contextlib.suppress(OSError):
            raw.close()


def _text(raw: IO[bytes]) -> io.TextIOWrapper:
    return io.TextIOWrapper(raw, encoding="utf-8", newline="\n", write_through=False)


class _Checked:
    """A file whose write errors are OutputError (EPIPE stays BrokenPipeError), and
    whose text has its control characters escaped (``escape``)."""

    def __init__(self, f, shown: str, *, escape: bool):
        self._f, self._shown, self._escape = f, shown, escape

    def write(self, data):
        if self._escape:
            data = printable(data, lines=True)
        try:
            return self._f.write(data)
        except BrokenPipeError:
            raise
        except OSError as e:
            raise _error(e, self._shown) from None

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self._call(self._f.flush)

    def seek(self, *args):               # zipfile seeks back to patch its headers (and flushes)
        return self._call(self._f.seek, *args)

    def tell(self):
        return self._call(self._f.tell)

    def _call(self, fn, *args):
        try:
            return fn(*args)
        except BrokenPipeError:
            raise
        except OSError as e:
            if e.errno == errno.ESPIPE:
                raise        # not seekable (a FIFO): zipfile then writes a stream, as it checks with tell()
            raise _error(e, self._shown) from None

    def __getattr__(self, name):
        return getattr(self._f, name)


# --------------------------------------------------------- standard streams
class _StdStream:
    """sys.stdout / sys.stderr for the length of a command: control characters in
    everything printed are escaped; on standard error a newline inside one write is
    escaped too (every message is one line); write errors are OutputError.

    Standard output collects its writes up to ``BATCH`` characters and escapes them in
    one pass (a row at a time costs twice the time of the write itself on a long
    ``--format csv``); a terminal gets every write at once, ``flush`` empties it."""

    BATCH = 1 << 16

    def __init__(self, f, name: str, *, one_line: bool):
        self.unescaped = f                  # for a progress bar, which draws with \r
        self._name, self._one_line = name, one_line
        self._held: list[str] = []
        self._size = 0
        try:
            self._at_once = one_line or f.isatty()
        except (AttributeError, ValueError, OSError):
            self._at_once = True

    def write(self, text: str) -> int:
        if not self._at_once:
            self._held.append(text)
            self._size += len(text)
            if self._size >= self.BATCH:
                self._drain()
            return len(text)
        if not self._one_line:
            safe = printable(text, lines=True)
        elif text.endswith("\n"):
            safe = printable(text[:-1]) + "\n"
        else:
            safe = printable(text)
        self._call(self.unescaped.write, safe)
        return len(text)

    def _drain(self) -> None:
        if self._held:
            text = "".join(self._held)
            self._held.clear()
            self._size = 0
            self._call(self.unescaped.write, printable(text, lines=True))

    def flush(self) -> None:
        self._drain()
        self._call(self.unescaped.flush)

    def _call(self, fn, *args):
        try:
            return fn(*args)
        except BrokenPipeError:
            raise
        except OSError as e:
            raise OutputError(f"cannot write to {self._name}: {e.strerror or e}") from None

    def __getattr__(self, name):
        return getattr(self.unescaped, name)


@contextlib.contextmanager
def std_streams() -> Iterator[None]:
    """Standard output and error behind the rules of this module until the block ends
    (then flushed: a full disk on standard output is an OutputError here, not an
    error at exit)."""
    old_out, old_err = sys.stdout, sys.stderr
    if old_out is not None:
        sys.stdout = _StdStream(old_out, "standard output", one_line=False)
    if old_err is not None:
        sys.stderr = _StdStream(old_err, "standard error", one_line=True)
    try:
        yield
        if old_out is not None:
            sys.stdout.flush()
    finally:
        out = sys.stdout
        sys.stdout, sys.stderr = old_out, old_err
        if isinstance(out, _StdStream):     # after an error too: what was printed is not lost
            with contextlib.suppress(OSError, ValueError, OutputError):
                out._drain()


def quiet_broken_pipe() -> None:
    """After EPIPE on standard output: point it at /dev/null so that the interpreter's
    flush at exit does not print 'Exception ignored ... BrokenPipeError'."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


# ---------------------------------------------------------------------- CSV
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """A CSV cell that no spreadsheet reads as a formula (OWASP's rule: text starting
    with ``= + - @``, a tab or a carriage return gets a leading ``'``, unless it is a
    number), its control characters escaped. Numbers and None pass unchanged."""
    if not isinstance(value, str):
        return value
    if value.startswith(_FORMULA_START):
        try:
            float(value)
        except ValueError:
            value = "'" + value
    return printable(value)


# the earliest time a zip entry can carry (its DOS date starts in 1980)
ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)


def zip_entry(zf: zipfile.ZipFile, name: str) -> zipfile.ZipInfo:
    """A member of a zip spigap writes (.sr): the archive's compression, mode 0644 and a fixed
    time (SOURCE_DATE_EPOCH when set, else 1980-01-01), so the same samples give the same bytes
    (a capture regenerated from its recipe, a converted file) whenever it is written."""
    when = ZIP_EPOCH
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "")
    if epoch.isdigit() and int(epoch) >= 315532800:          # 1980-01-01 UTC
        when = time.gmtime(min(int(epoch), 4354819199))[:6]    # zip dates end in 2107
    zi = zipfile.ZipInfo(name, date_time=when)
    zi.compress_type = zf.compression
    zi.external_attr = 0o644 << 16
    # ZipFile.open(zi, "w") takes the level from the ZipInfo (Python 3.11: _compresslevel,
    # 3.13: compress_level); writestr with a ZipInfo likewise
    for attr in ("compress_level", "_compresslevel"):
        if hasattr(zi, attr):
            setattr(zi, attr, zf.compresslevel)
            break
    return zi

