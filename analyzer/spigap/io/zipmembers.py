"""Zip members read the way the capture readers need them (.sr, .dsl).

Why not ``zipfile`` alone: its directory parser is used, but member data is
read here with ``os.pread`` so that (a) a large member streams piece by piece
with bounded memory and can be inflated on worker threads (ISA-L releases the
GIL), (b) every offset and length taken from the file is bounded by the file's
size (a short read is truncation, never a loop), (c) small members are
size-limited and CRC-checked, and (d) a zip cut before its directory is still
read from its local headers.
"""

from __future__ import annotations

import os
import struct
import zipfile
from typing import Any

from spigap.errors import InputError
from spigap.io import inflate
from spigap.io.base import open_errors

PIECE_BYTES = 8 << 20          # raw bytes per streamed piece of a large member
COMP_SLICE = 4 << 20           # compressed bytes read at a time when streaming
SMALL_MEMBER_LIMIT = 1 << 20   # metadata-like members: a few hundred bytes in real files


class _Member:
    __slots__ = ("crc", "csize", "data_offset", "header_offset", "method", "name", "usize")

    def __init__(self, name, method, header_offset, csize, usize, crc, data_offset=None):
        self.name, self.method, self.header_offset = name, method, header_offset
        self.csize, self.usize, self.crc, self.data_offset = csize, usize, crc, data_offset


class ZipMembers:
    """Mixin: zip member access for a reader. The reader sets ``path``, opens
    ``_fd`` (``_open_fd``), then calls ``_read_directory``; ``unitsize`` (bytes per
    sample) keeps streamed pieces whole samples."""

    zip_kind = "capture"
    path: str
    unitsize: int = 1
    _fd: Any                   # the open file descriptor (None once closed)
    _size: int
    _members: dict
    _recovered: bool

    def _open_fd(self) -> None:
        with open_errors(self.path):
            self._fd = os.open(self.path, os.O_RDONLY)
        self._size = os.fstat(self._fd).st_size

    def _read_directory(self, warnings) -> dict[str, _Member]:
        self._recovered = False
        try:
            with zipfile.ZipFile(self.path) as zf:
                infos = zf.infolist()
        except (zipfile.BadZipFile, NotImplementedError, ValueError, struct.error, EOFError, OverflowError):
            # zipfile's own parse errors on a damaged directory (bad sizes, versions, names)
            head = os.pread(self._fd, 4, 0)
            if head != b"PK\x03\x04":
                raise InputError(f"not a {self.zip_kind} (not a zip archive)", path=self.path,
                                 hint="pick the format with --input-format") from None
            self._recovered = True
            members = self._scan_local_headers()
            warnings.append(f"zip directory missing or damaged (file of {self._size} bytes); "
                            f"reading the {len(members)} member(s) found from their local headers")
            return members
        members = {}
        for i in infos:
            members[i.filename] = _Member(i.filename, i.compress_type, i.header_offset,
                                          i.compress_size, i.file_size, i.CRC)
        return members

    def _scan_local_headers(self) -> dict[str, _Member]:
        """Walk local file headers from the start (for a zip cut before its directory)."""
        members: dict[str, _Member] = {}
        off = 0
        while off + 30 <= self._size:
            hdr = os.pread(self._fd, 30, off)
            if hdr[:4] != b"PK\x03\x04":
                break
            (_, _, flags, method, _, _, crc, csize, usize, nlen, xlen) = struct.unpack("<IHHHHHIIIHH", hdr)
            name = os.pread(self._fd, nlen, off + 30).decode("utf-8", "replace")
            data_off = off + 30 + nlen + xlen
            if flags & 0x08 or csize == 0xFFFFFFFF:
                # sizes follow the data; we cannot know them without inflating: keep what is left
                csize, usize, crc = self._size - data_off, 0, None
            m = _Member(name, method, off, min(csize, max(self._size - data_off, 0)), usize, crc, data_off)
            if data_off + csize > self._size:
                m.crc = None  # cut short: do not claim a CRC match
            members[name] = m
            off = data_off + csize
            if flags & 0x08:
                break
        return members

    def _data_offset(self, m: _Member) -> int:
        if m.data_offset is None:
            if not 0 <= m.header_offset < self._size:
                raise InputError(f"zip member {m.name} lies outside the file (damaged zip directory)",
                                 path=self.path)
            hdr = os.pread(self._fd, 30, m.header_offset)
            if len(hdr) < 30 or hdr[:4] != b"PK\x03\x04":
                raise InputError(f"zip member {m.name} has a broken header", path=self.path)
            nlen, xlen = struct.unpack("<HH", hdr[26:30])
            m.data_offset = m.header_offset + 30 + nlen + xlen
        return m.data_offset

    def _read_small(self, name: str) -> bytes:
        """A small member (``version``, ``metadata``) whole, size-limited and CRC-checked."""
        m = self._members.get(name)
        if m is None:
            raise InputError(f"not a {self.zip_kind} (zip has no '{name}' member)", path=self.path)
        limit = SMALL_MEMBER_LIMIT
        if m.usize > limit or (m.method == zipfile.ZIP_STORED and m.csize > limit):
            raise InputError(f"zip member '{name}' is {max(m.usize, m.csize)} bytes, over the "
                             f"{limit >> 20} MiB a '{name}' member can be (damaged, or not a {self.zip_kind})",
                             path=self.path)
        data_off = self._data_offset(m)
        # never read past the end of the file, whatever the directory claims
        data = os.pread(self._fd, min(m.csize, max(self._size - data_off, 0)), data_off)
        if len(data) < m.csize:
            raise InputError(f"zip member '{name}' is cut short ({len(data)} of {m.csize} bytes)",
                             path=self.path, hint="the file is truncated")
        if m.method == zipfile.ZIP_STORED:
            raw = data
        elif m.method == zipfile.ZIP_DEFLATED:
            try:
                raw = inflate.decompress_limited(data, limit)
            except inflate.error:
                raise InputError(f"zip member '{name}' is damaged", path=self.path) from None
            except inflate.TooLarge:
                raise InputError(f"zip member '{name}' inflates to more than {limit >> 20} MiB "
                                 f"(damaged, or not a {self.zip_kind})", path=self.path) from None
        else:
            raise InputError(f"zip member '{name}' uses unsupported compression {m.method}", path=self.path)
        if m.crc is not None and (inflate.crc32(raw) != m.crc or len(raw) != m.usize):
            raise InputError(f"zip member '{name}' is damaged (CRC or size mismatch)", path=self.path,
                             hint="re-export or re-copy the capture")
        return raw

    def _stream_member(self, m: _Member, data_off: int):
        """Raw bytes of a member, piece by piece. Reads stop at the end of the file
        whatever the directory claims: a short read is truncation (``_Damaged``)."""
        end = min(data_off + m.csize, self._size)
        pos = data_off
        crc = 0
        got = 0
        carry = b""
        if m.method == zipfile.ZIP_STORED:
            while pos < end:
                n = min(PIECE_BYTES, end - pos)
                piece = os.pread(self._fd, n, pos)
                pos += len(piece)
                crc = inflate.crc32(piece, crc)
                got += len(piece)
                yield piece
                if len(piece) < n:
                    break
        else:
            d = inflate.decompressobj()
            tail = b""
            while not d.eof:
                if not tail and pos < end:
                    want = min(COMP_SLICE, end - pos)
                    tail = os.pread(self._fd, want, pos)
                    pos += len(tail)
                    if len(tail) < want:
                        end = pos       # the file shrank under us: nothing more to read
                try:
                    # with max_length, inflate may hold output back even when all
                    # input is consumed: keep calling (with empty input) until eof
                    out = d.decompress(tail, PIECE_BYTES)
                except inflate.error as e:
                    raise _Damaged(f"chunk {m.name} is damaged ({e})") from None
                tail = d.unconsumed_tail
                if out:
                    crc = inflate.crc32(out, crc)
                    got += len(out)
                    out = carry + out
                    cut = len(out) - len(out) % self.unitsize
                    carry = out[cut:]
                    if cut:
                        yield out[:cut]
                elif not tail and pos >= end:
                    break           # no input left and nothing more comes out
            if not d.eof:
                raise _Damaged(f"chunk {m.name} ends early (deflate stream cut after {got} bytes)")
        if data_off + m.csize > self._size:
            raise _Damaged(f"chunk {m.name} is cut short (the file ends {data_off + m.csize - self._size} "
                           f"bytes before its end)")
        if m.crc is not None and (crc != m.crc or (m.usize and got != m.usize)):
            raise _Damaged(f"chunk {m.name} is damaged (CRC or size mismatch)")


class _Damaged(Exception):
    def __init__(self, problem):
        super().__init__(problem)
        self.problem = problem
