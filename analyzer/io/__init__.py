"""Capture readers: one module per file format, all behind ``CaptureReader``.

``open_capture`` picks the reader from ``input_format`` or from the file's
extension and first bytes.
"""

from __future__ import annotations

import os

from analyzer.errors import InputError
from analyzer.io.base import CaptureInfo, CaptureReader, EdgeBlock

__all__ = ["CaptureInfo", "CaptureReader", "EdgeBlock", "open_capture", "READERS"]


def _sr(path, **kw):
    from analyzer.io.sr import SrReader

    return SrReader(path, samplerate=kw.get("samplerate"))


# name -> (factory, extensions, sniff(first_bytes) -> bool)
READERS = {
    "sr": (_sr, (".sr",), lambda head: head.startswith(b"PK\x03\x04")),
}


def open_capture(path, *, input_format: str | None = None, **options) -> CaptureReader:
    path = os.fspath(path)
    if input_format:
        if input_format not in READERS:
            raise InputError(f"unknown input format {input_format!r}; known: {', '.join(READERS)}", path=path)
        return READERS[input_format][0](path, **options)
    if not os.path.exists(path):
        raise InputError("no such file", path=path)
    if os.path.isdir(path):
        raise InputError("is a directory, not a capture", path=path)
    ext = os.path.splitext(path)[1].lower()
    for factory, exts, _ in READERS.values():
        if ext in exts:
            return factory(path, **options)
    with open(path, "rb") as f:
        head = f.read(4096)
    for factory, _, sniff in READERS.values():
        if sniff(head):
            return factory(path, **options)
    raise InputError("unknown capture format", path=path,
                     hint=f"use --input-format ({', '.join(READERS)})")
