"""Write an output file whole or not at all.

The text goes to a temporary file beside the target, which is renamed over it
once complete (``os.replace`` is atomic on one filesystem), so an interrupted
run (Ctrl-C, a full disk, a killed process) never leaves a half-written report.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from typing import TextIO


def write_text_atomic(path: str, text: str) -> None:
    """Write ``text`` to ``path`` atomically; raises OSError like ``open`` would."""
    with open_atomic(path) as f:
        f.write(text)


@contextlib.contextmanager
def open_atomic(path: str) -> Iterator[TextIO]:
    """A text file to write ``path`` through (streamed: for outputs too big to build in
    memory first); it replaces ``path`` when the block ends without an exception."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            yield f
        try:
            mode = os.stat(path).st_mode & 0o7777   # keep an existing file's permissions
        except FileNotFoundError:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask                  # what open(path, "w") would have given
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
