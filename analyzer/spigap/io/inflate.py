"""Raw-deflate backend: ISA-L when installed, else the standard zlib.

Inflate is the floor of the analyzer's speed on sigrok captures. python-isal
(ISA-L igzip) inflates about 3x faster than zlib on logic data on the 2-core
reference machine (see BENCHMARKS.md), and releases the GIL like zlib does, so
two chunks can be inflated on two cores at once.
"""

from __future__ import annotations

import types
import zlib

_impl: types.ModuleType
try:  # pragma: no cover - which branch runs depends on the machine
    from isal import isal_zlib as _impl

    BACKEND = "isal"
except ImportError:  # pragma: no cover
    _impl = zlib
    BACKEND = "zlib"

error: tuple[type[Exception], ...] = (zlib.error,) if _impl is zlib else (zlib.error, _impl.error)


def decompressobj():
    return _impl.decompressobj(-15)


def crc32(data, value: int = 0) -> int:
    return _impl.crc32(data, value)


class TooLarge(Exception):
    """A deflate stream inflates to more than the caller's limit."""


def decompress_limited(data: bytes, limit: int) -> bytes:
    """Inflate a raw deflate stream, never holding more than ``limit`` bytes of
    output: a member that claims a small size but inflates to gigabytes (a zip
    bomb or a damaged directory) raises ``TooLarge`` instead of exhausting memory.
    Incomplete streams raise ``error``."""
    d = decompressobj()
    out = d.decompress(data, limit + 1)
    if len(out) > limit:
        raise TooLarge(len(out))
    if not d.eof:
        out += d.flush()
        if not d.eof:
            raise zlib.error("incomplete or truncated deflate stream")
    return out
