"""Raw logic samples: little-endian sample words, no header (``--input-format raw``).

What ``sigrok-cli -O binary`` writes (and its ``-I binary`` input reads):
``--unitsize`` bytes per sample (default 1), bit k of the little-endian word
= channel k, one word per sample period (``--samplerate``, required: nothing
in the data says it). Channels are named ``0`` .. ``8 × unitsize - 1`` until
``--channel-map 0=SCLK,1=MOSI,...`` names them. Works on files and on ``-``
(standard input, analyzer/spigap/io/stdin.py), e.g.
``sigrok-cli -i X.sr -O binary | spigap analyze - --input-format raw --samplerate 24m --channel-map ...``.

The data is read in pieces of ``PIECE_BYTES`` and scanned for changes by the
same scanner as the .sr reader (io/sr.py ``scan_piece``: the compiled core,
else numpy), so memory stays bounded and a live pipe is analyzed as it comes.
A piece is scanned in parts sized to hold about ``MAX_BLOCK_EDGES`` changes:
whole for a real capture, in small parts for noise or hostile input in which
nearly every sample changes (100 MB of random bytes: peak RSS 935 -> 241 MB).
"""

from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np

from spigap.errors import InputError, UsageError
from spigap.io.base import MAX_BLOCK_EDGES, CaptureInfo, CaptureReader, EdgeBlock
from spigap.native.changes import masks_for

PIECE_BYTES = 4 << 20
SCAN_START = 1 << 20    # the first scan, before the density of changes is known
SCAN_MIN = 64 << 10
MAX_UNITSIZE = 8


class RawReader(CaptureReader):
    format_name = "raw"

    def __init__(self, path, *, samplerate: float | None = None, unitsize: int | None = None, stream=None,
                 **_ignored):
        self.path = str(path)
        if samplerate is None:
            raise UsageError("raw samples carry no samplerate", path=self.path,
                             hint="give it with --samplerate, e.g. --samplerate 24m")
        if not samplerate > 0:
            raise UsageError(f"--samplerate must be positive, not {samplerate:g}", path=self.path)
        us = 1 if unitsize is None else int(unitsize)
        if not 1 <= us <= MAX_UNITSIZE:
            raise UsageError(f"--unitsize {us} is outside 1..{MAX_UNITSIZE} bytes per sample", path=self.path)
        self.unitsize = us
        if stream is not None:
            self._f = stream
        else:
            try:
                self._f = open(self.path, "rb")
            except FileNotFoundError:
                raise InputError("no such file", path=self.path) from None
            except OSError as e:
                raise InputError(f"cannot open: {e.strerror}", path=self.path) from None
        self._used = False
        self.info = CaptureInfo(
            path=self.path, format=f"raw samples, {us} byte(s) per sample, little-endian",
            channels=[str(k) for k in range(8 * us)], tick_s=1.0 / float(samplerate),
            samplerate_hz=float(samplerate), n_ticks=None, resolution_source="--samplerate")

    def edges(self, channels: Sequence[str]) -> Iterator[EdgeBlock]:
        from spigap.io.sr import scan_piece

        if not channels:
            raise UsageError("no channels requested", path=self.path)
        if self._used:
            if not hasattr(self._f, "seek") or not getattr(self._f, "seekable", lambda: False)():
                raise UsageError("a pipe can be read only once, and this needs a second read of the capture",
                                 path=self.path, hint="save the stream to a file and give its path")
            self._f.seek(0)
        self._used = True
        bits = [self.channel_index(c) for c in channels]
        masks = masks_for(bits)
        us = self.unitsize
        offset = 0              # samples so far
        prev = None             # compact state of the last sample
        carry = b""
        scan = SCAN_START       # bytes scanned at once: adapts to the density of changes
        self.end_tick = 0
        while True:
            data = self._f.read(PIECE_BYTES)
            if not data:
                break
            buf = carry + data if carry else data
            whole = len(buf) // us * us
            carry = buf[whole:]
            view = memoryview(buf)
            pos = 0
            while pos < whole:
                step = min(max(scan // us, 1) * us, whole - pos)
                pc = scan_piece(view[pos:pos + step], us, masks, bits, offset)
                ticks, states = pc.pos, pc.values
                # as many bytes next time as make about MAX_BLOCK_EDGES changes: sparse captures
                # go in whole pieces (the hot path), dense or noisy ones in small blocks (memory)
                scan = int(min(PIECE_BYTES, max(SCAN_MIN, step * MAX_BLOCK_EDGES / max(len(ticks), 1))))
                if prev is None or pc.first != prev:
                    ticks = np.concatenate([np.array([offset], np.int64), ticks])
                    states = np.concatenate([np.array([pc.first], np.uint32), states])
                prev = pc.last
                offset += pc.n
                pos += step
                self.end_tick = offset
                if len(ticks):
                    yield EdgeBlock(ticks, states.astype(np.uint32, copy=False))
        if offset == 0:
            raise InputError("no samples in the raw input", path=self.path)
        if carry:
            self.info.warnings.append(f"the raw input ends with {len(carry)} byte(s) that do not make a whole "
                                      f"{us}-byte sample; ignored (check --unitsize)")

    def close(self) -> None:
        f = getattr(self, "_f", None)
        if f is not None:
            f.close()
            self._f = None
