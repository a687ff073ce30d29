"""Common files that are not captures, by their first bytes: what a user gave instead of a
capture (a screenshot, a PDF of the datasheet, a compressed export, a program), named in
the one-line error (``this is a PNG image, not a capture``).

Asked only when no reader recognizes the file by its content (io/__init__.py): a capture
is recognized first, so a magic number below can never hide one. The signatures are the
formats' own published magic numbers (PNG, JPEG, GIF, TIFF, WebP, PDF, gzip, bzip2, xz,
zstd, 7-Zip, RAR, tar's "ustar" at byte 257, ELF, Windows PE "MZ", Mach-O, SQLite, HTML).
"""

from __future__ import annotations

# (first bytes, what it is, what to do)
_IMAGE = "a picture of a capture holds no samples: give the capture file itself, e.g. the .sr"
_ARCHIVE = "unpack it first and give the capture inside"
_PROGRAM = "give a capture file: .sr, .vcd, .csv or a scope's own file, docs/formats.md"
_MAGIC: list[tuple[bytes, str, str]] = [
    (b"\x89PNG\r\n\x1a\n", "a PNG image", _IMAGE),
    (b"\xff\xd8\xff", "a JPEG image", _IMAGE),
    (b"GIF87a", "a GIF image", _IMAGE),
    (b"GIF89a", "a GIF image", _IMAGE),
    (b"II*\x00", "a TIFF image", _IMAGE),
    (b"MM\x00*", "a TIFF image", _IMAGE),
    (b"%PDF-", "a PDF document", _PROGRAM),
    (b"\x1f\x8b", "a gzip-compressed file", "unpack it first with gunzip and give the capture inside"),
    (b"BZh", "a bzip2-compressed file", "unpack it first with bunzip2 and give the capture inside"),
    (b"\xfd7zXZ\x00", "an xz-compressed file", "unpack it first with unxz and give the capture inside"),
    (b"\x28\xb5\x2f\xfd", "a zstd-compressed file", "unpack it first with unzstd and give the capture inside"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive", _ARCHIVE),
    (b"Rar!\x1a\x07", "a RAR archive", _ARCHIVE),
    (b"\x7fELF", "an executable program (ELF)", _PROGRAM),
    (b"\xfe\xed\xfa\xce", "an executable program (Mach-O)", _PROGRAM),
    (b"\xfe\xed\xfa\xcf", "an executable program (Mach-O)", _PROGRAM),
    (b"\xce\xfa\xed\xfe", "an executable program (Mach-O)", _PROGRAM),
    (b"\xcf\xfa\xed\xfe", "an executable program (Mach-O)", _PROGRAM),
    (b"SQLite format 3\x00", "an SQLite database", _PROGRAM),
]


def not_a_capture(head: bytes) -> tuple[str, str] | None:
    """(what the file is, what to do) for a common non-capture, or None."""
    for magic, what, hint in _MAGIC:
        if head.startswith(magic):
            return what, hint
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "a WebP image", _IMAGE
    if len(head) >= 262 and head[257:262] == b"ustar":
        return "a tar archive", _ARCHIVE
    if head.startswith(b"MZ") and len(head) >= 64:
        pe = int.from_bytes(head[60:64], "little")
        if pe + 4 <= len(head) and head[pe:pe + 4] == b"PE\x00\x00":
            return "an executable program (Windows)", _PROGRAM
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")[:64].lower()
    if text.startswith((b"<!doctype html", b"<html")):
        return "an HTML page", "save the capture itself, not the page that shows it (a spigap report?)"
    return None
