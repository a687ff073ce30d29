"""``-`` as the capture path: a capture streamed on standard input.

Two formats can come through a pipe, both written by ``sigrok-cli -O``:

* VCD (``-O vcd``, the default for ``-``): it carries channel names and the
  timescale; the VCD reader parses it as it arrives.
* raw sample words (``-O binary``, ``--input-format raw``; analyzer/io/raw.py):
  no metadata, so ``--samplerate`` and ``--unitsize`` say what they are.

A sigrok ``.sr`` (a zip archive, read by seeking) cannot be piped; spigap says
so. ``InputStream`` gives the readers what they need from a pipe: a peek at
the first bytes to recognize the format, one seek back to the end of the VCD
header (the bytes read so far are kept until then), and reads that return
after ``LATENCY_S`` with what has arrived, so a live stream from a slow
acquisition is analyzed as it comes instead of in 2 MiB lumps.
"""

from __future__ import annotations

import collections
import select
import sys
import time

from spigap.errors import InputError

STDIN_PATH = "<stdin>"
LATENCY_S = 0.2


class InputStream:
    """A non-seekable binary stream with replay of its start and bounded read latency."""

    def __init__(self, raw, name: str = STDIN_PATH, *, replay: bool = True):
        """``replay``: keep what is read until the first seek (VCD: back to the end of its
        header) and the last reads for ``line_of``; raw samples need neither."""
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
            raise OSError("a pipe cannot be read again")
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
    if input_format == "raw":
        from spigap.io.raw import RawReader

        return RawReader(STDIN_PATH, stream=InputStream(sys.stdin.buffer, replay=False), samplerate=opts.samplerate, unitsize=opts.unitsize)
    src = InputStream(sys.stdin.buffer)
    head = src.peek(4096)
    if not head:
        raise InputError("standard input is empty", path=STDIN_PATH,
                         hint="pipe a capture in, e.g. sigrok-cli -i X.sr -O vcd | spigap analyze -")
    if input_format in (None, "vcd"):
        from spigap.io import _sniff_vcd
        from spigap.io.vcd import VcdReader

        if input_format == "vcd" or _sniff_vcd(head):
            return VcdReader(STDIN_PATH, samplerate=opts.samplerate, stream=src)
    if head.startswith(b"PK\x03\x04"):
        raise InputError("a sigrok .sr file cannot be read from a pipe (it is a zip archive)", path=STDIN_PATH,
                         hint="give its path, or convert on the fly: sigrok-cli -i X.sr -O vcd | spigap analyze -")
    if input_format is None:
        raise InputError("standard input is not a VCD", path=STDIN_PATH,
                         hint="for raw sample words (sigrok-cli -O binary) give --input-format raw "
                              "--samplerate HZ --unitsize BYTES")
    raise InputError(f"--input-format {input_format} cannot be read from a pipe (only vcd and raw can)",
                     path=STDIN_PATH, hint="give the file's path instead of -")
