"""``-`` as the capture path: a capture streamed on standard input; and the same for
a capture path that is not a regular file (a FIFO, a character device).

Two formats can come through a pipe, both written by ``sigrok-cli -O``:

* VCD (``-O vcd``, the default for ``-``): it carries channel names and the
  timescale; the VCD reader parses it as it arrives.
* raw sample words (``-O binary``, ``--input-format raw``; analyzer/spigap/io/raw.py):
  no metadata, so ``--samplerate`` and ``--unitsize`` say what they are.

A sigrok ``.sr`` (a zip archive, read by seeking) cannot be piped; spigap says
so. ``InputStream`` gives the readers what they need from a pipe: a peek at
the first bytes to recognize the format, one seek back to the end of the VCD
header (the bytes read so far are kept until then), and reads that return
after ``LATENCY_S`` with what has arrived, so a live stream from a slow
acquisition is analyzed as it comes instead of in 2 MiB lumps.

A named FIFO or character device (``mkfifo cap.vcd``, ``<(sigrok-cli ... -O vcd)``)
is read the same way, once, as a stream (``open_special``); the formats that need a
regular file (the zip archives .sr and .dsl, which are read by seeking; the CSV and
Saleae readers, which read a file twice) are refused in one line. A FIFO that has
no writer yet is waited for, and spigap says so.
"""

from __future__ import annotations

import collections
import os
import select
import stat
import sys
import time

from spigap.errors import InputError, UsageError, printable

STDIN_PATH = "<stdin>"
LATENCY_S = 0.2


class InputStream:
    """A non-seekable binary stream with replay of its start and bounded read latency."""

    def __init__(self, raw, name: str = STDIN_PATH, *, replay: bool = True, owned: bool = False):
        """``replay``: keep what is read until the first seek (VCD: back to the end of its
        header) and the last reads for ``line_of``; raw samples need neither. ``owned``:
        close ``raw`` on close (a FIFO spigap opened; not standard input)."""
        self._owned = owned
        self._raw = raw                       # a BufferedReader (sys.stdin.buffer) or any .read()/.read1()
        self.name = name
        self._kept = bytearray()              # the bytes read so far, until the first seek past them
        self._keep = replay
        self._kept_base = 0                   # stream offset of _kept[0]
        self._pos = 0                         # stream offset of the next byte read()
        self._served: collections.deque = collections.deque(maxlen=3 if replay else 0)  # (offset, lines, bytes)
        self._lines = 0
        self._eof = False

    # --- what the readers call
    def peek(self, n: int) -> bytes:
        """Up to ``n`` first bytes of the stream, without consuming them."""
        while len(self._kept) < n and not self._eof:
            more = self._raw_read(n - len(self._kept), wait=True)
            if not more:
                break
            self._kept += more
        return bytes(self._kept[:n])

    def read(self, n: int = -1) -> bytes:
        out = bytearray()
        rel = self._pos - self._kept_base
        if 0 <= rel < len(self._kept):
            out += self._kept[rel:rel + n] if n >= 0 else self._kept[rel:]
            if not self._keep:                # replayed once: drop what was served
                del self._kept[:rel + len(out)]
                self._kept_base += rel + len(out)
        want = n - len(out) if n >= 0 else 1 << 62
        if want > 0:
            more = self._raw_read(want, wait=n < 0)
            if self._keep:
                self._kept += more
            out += more
        data = bytes(out)
        if self._served.maxlen:
            self._served.append((self._pos, self._lines, data))
            self._lines += data.count(b"\n")
        self._pos += len(data)
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        if whence != 0 or not self._keep or not 0 <= offset <= len(self._kept):
            # one pass is all the engine needs (settings, events, pins: core/run); what still
            # asks for a second read (detect's survey of more than 32 channels) says so here
            raise UsageError("a pipe can be read only once, and this needs a second read of the capture",
                             path=self.name, hint="save the stream to a file and give its path")
        self._pos = offset
        self._keep = False        # the kept bytes are served once more, then dropped
        self._served.clear()
        self._lines = self._kept[:offset].count(b"\n")
        return offset

    def seekable(self) -> bool:
        return False

    def fileno(self) -> int:
        return self._raw.fileno()

    def line_of(self, byte: int) -> int | None:
        """1-based line of stream offset ``byte`` if it lies in the last few reads."""
        for off, lines, data in reversed(self._served):
            if off <= byte <= off + len(data):
                return lines + data[:byte - off].count(b"\n") + 1
        return None

    def close(self) -> None:
        self._kept = bytearray()
        if self._owned:
            self._owned = False
            self._raw.close()

    # --- reading the pipe
    def _raw_read(self, n: int, wait: bool) -> bytes:
        """Up to ``n`` bytes: whatever arrived within LATENCY_S (at least one read), all ``n``
        when ``wait``; b"" at the end of the stream."""
        if self._eof:
            return b""
        read1 = getattr(self._raw, "read1", None)
        if read1 is None:
            data = self._raw.read(n)
            self._eof = not data
            return data
        parts = []
        got = 0
        t0 = time.monotonic()
        while got < n:
            if got and not wait:
                # something is in hand: wait for more only until LATENCY_S is up
                left = LATENCY_S - (time.monotonic() - t0)
                if left <= 0 or not self._ready(left):
                    break
            data = read1(min(n - got, 1 << 20))
            if not data:
                self._eof = True
                break
            parts.append(data)
            got += len(data)
        return b"".join(parts)

    def _ready(self, timeout: float) -> bool:
        """Whether the pipe has bytes (or its end) within ``timeout`` s (True when unknown)."""
        try:
            fd = self._raw.fileno()
        except (AttributeError, OSError, ValueError):
            return True
        return bool(select.select([fd], [], [], timeout)[0])


def open_stdin(input_format: str | None, opts):
    """The reader for a capture on standard input (``input_format``: None, "vcd" or "raw")."""
    if sys.stdin is None or sys.stdin.isatty():
        raise InputError("- reads the capture from standard input, which is a terminal here", path=STDIN_PATH,
                         hint="pipe one in, e.g. sigrok-cli -i X.sr -O vcd | spigap analyze -")
    return _open_stream(sys.stdin.buffer, STDIN_PATH, input_format, opts, owned=False)


# how long a FIFO may stay silent before spigap says what it waits for
FIFO_NOTE_S = 1.0


def open_special(path: str, mode: int, input_format: str | None, opts):
    """The reader for a capture path that is a FIFO or a character device: read once,
    as a stream, like standard input."""
    kind = "FIFO" if stat.S_ISFIFO(mode) else "character device"
    _streamable(path, input_format, kind)       # before a FIFO's writer is waited for
    try:
        if stat.S_ISFIFO(mode):
            f = _open_fifo(path)
        else:
            f = open(path, "rb")
    except OSError as e:
        raise InputError(f"cannot open: {e.strerror or e}", path=path) from None
    try:
        return _open_stream(f, path, input_format, opts, owned=True, kind=kind)
    except BaseException:
        f.close()
        raise


def _streamable(path: str, input_format: str | None, kind: str) -> None:
    """Refuse, before opening it, a FIFO or device whose name or --input-format says it
    holds a format that cannot be read as a stream (only VCD and raw samples can)."""
    if input_format in ("vcd", "raw"):
        return
    ext = os.path.splitext(path)[1].lower()
    if input_format is None:
        from spigap.io import READERS

        by_ext = [spec.name for spec in READERS.values() if ext in spec.extensions]
        if not by_ext or "vcd" in by_ext:
            return                   # no name to go by (<(...)): what arrives is sniffed
        what = "a sigrok .sr file (a zip archive, read by seeking)" if ext in (".sr", ".dsl") else \
            f"a {ext} file"
    else:
        what = f"--input-format {input_format}"
    hint = "give the path of a regular file" + (", or convert on the fly: sigrok-cli -i X.sr -O vcd | "
                                                "spigap analyze -" if ext in (".sr", ".dsl") else "")
    raise InputError(f"is a {kind}, and {what} cannot be read from a stream (only VCD and raw samples can)",
                     path=path, hint=hint)


def _open_fifo(path: str):
    """Open a FIFO for reading without hanging unseen: opened non-blocking, then waited
    on until a writer sends something or closes (after FIFO_NOTE_S spigap says it is
    waiting; a batch's --timeout, SIGALRM, ends the wait)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        p = select.poll()
        p.register(fd, select.POLLIN | select.POLLHUP)
        if not p.poll(FIFO_NOTE_S * 1000):
            print(f"spigap: note: {printable(path)} is a FIFO with no writer yet; waiting for one "
                  "(Ctrl-C to give up)", file=sys.stderr, flush=True)
            while not p.poll(1000):
                pass
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _open_stream(raw, name: str, input_format: str | None, opts, *, owned: bool, kind: str | None = None):
    """The reader for a stream: VCD (sniffed, or --input-format vcd) or raw samples
    (--input-format raw); everything else is refused in one line. ``kind``: what a named
    path is ("FIFO", "character device"), None for standard input."""
    where = "a pipe" if kind is None else f"a {kind}"
    if input_format == "raw":
        from spigap.io.raw import RawReader

        return RawReader(name, stream=InputStream(raw, name, replay=False, owned=owned), samplerate=opts.samplerate,
                         unitsize=opts.unitsize)
    src = InputStream(raw, name, owned=owned)
    try:
        head = src.peek(4096)
        if not head:
            if kind is None:
                raise InputError("standard input is empty", path=name,
                                 hint="pipe a capture in, e.g. sigrok-cli -i X.sr -O vcd | spigap analyze -")
            raise InputError(f"is {where} and it sent nothing", path=name)
        if input_format in (None, "vcd"):
            from spigap.io import _sniff_vcd
            from spigap.io.vcd import VcdReader

            if input_format == "vcd" or _sniff_vcd(head):
                return VcdReader(name, samplerate=opts.samplerate, stream=src)
        if head.startswith(b"PK\x03\x04") or (kind and input_format is None and
                                               os.path.splitext(name)[1].lower() in (".sr", ".dsl")):
            raise InputError(f"a sigrok .sr file cannot be read from {where} (it is a zip archive): it is read by seeking",
                             path=name, hint="give the path of a regular file, or convert on the fly: "
                                             "sigrok-cli -i X.sr -O vcd | spigap analyze -")
        if input_format is None:
            if kind is None:
                raise InputError("standard input is not a VCD", path=name,
                                 hint="for raw sample words (sigrok-cli -O binary) give --input-format raw "
                                      "--samplerate HZ --unitsize BYTES")
            raise InputError(f"is {where}, and from a stream spigap reads VCD or raw samples only: this is "
                             "not a VCD", path=name,
                             hint="copy it to a regular file first, or give --input-format raw for raw "
                                  "sample words")
        raise InputError(f"--input-format {input_format} cannot be read from {where} (only vcd and raw can)",
                         path=name, hint="give the path of a regular file" if kind else
                         "give the file's path instead of -")
    except BaseException:
        src.close()
        raise


