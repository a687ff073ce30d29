"""Where libsigrokdecode looks for decoders (spigap's own are found by resources.py).

libsigrokdecode 0.5.3 (``srd_init``) searches, the last one winning on equal
ids: ``$XDG_DATA_DIRS/*/libsigrokdecode/decoders`` (Debian:
``/usr/share/...``), the compile-time directory, the user directory
``$XDG_DATA_HOME/libsigrokdecode/decoders`` (default
``~/.local/share/libsigrokdecode/decoders``), then ``$SIGROKDECODE_DIR`` (one
directory).
"""

from __future__ import annotations

import os
import pathlib

from spigap.resources import DecodersNotFound, decoders_dir, is_decoder_dir

SYSTEM_DECODERS = pathlib.Path("/usr/share/libsigrokdecode/decoders")


def user_decoders_dir(environ=None) -> pathlib.Path:
    """libsigrokdecode's per-user directory: $XDG_DATA_HOME/libsigrokdecode/decoders,
    default ~/.local/share/libsigrokdecode/decoders (as glib's g_get_user_data_dir)."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_DATA_HOME")
    if base and os.path.isabs(base):
        root = pathlib.Path(base)
    else:
        home = env.get("HOME") or os.path.expanduser("~")
        root = pathlib.Path(home) / ".local" / "share"
    return root / "libsigrokdecode" / "decoders"


def search_path(environ=None) -> list[pathlib.Path]:
    """libsigrokdecode's decoder directories, the one that wins first
    (SIGROKDECODE_DIR, the user directory, the compile-time one, XDG_DATA_DIRS
    from the last entry)."""
    env = os.environ if environ is None else environ
    out = []
    if env.get("SIGROKDECODE_DIR"):
        out.append(pathlib.Path(env["SIGROKDECODE_DIR"]))
    out.append(user_decoders_dir(env))
    out.append(SYSTEM_DECODERS)   # the compile-time directory (Debian)
    for d in reversed((env.get("XDG_DATA_DIRS") or "/usr/local/share:/usr/share").split(":")):
        if d:
            out.append(pathlib.Path(d) / "libsigrokdecode" / "decoders")
    seen, uniq = set(), []
    for p in out:
        if p not in seen:
            seen.add(p)
            uniq.append(p)
    return uniq


def find_decoder(decoder_id: str, extra_first: list[pathlib.Path] | None = None) -> pathlib.Path:
    """The directory of decoder ``decoder_id``: spigap's own first, then
    libsigrokdecode's search path (e.g. the stock ``spi``)."""
    roots = list(extra_first or [])
    try:
        roots.append(decoders_dir())
    except DecodersNotFound:
        pass
    roots += search_path()
    for r in roots:
        d = r / decoder_id
        if is_decoder_dir(d):
            return d
    raise DecodersNotFound(f"no sigrok decoder {decoder_id!r} (looked in "
                           f"{', '.join(str(r) for r in roots)})")
