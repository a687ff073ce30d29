"""Errors that reach the user as one line: which file, what is wrong, what to do."""

from __future__ import annotations

import re


class SpigapError(Exception):
    """An error the user can fix; the CLI prints it as one line and exits 2."""

    def __init__(self, problem: str, *, path: str | None = None, hint: str | None = None):
        super().__init__(problem)
        self.problem = problem
        self.path = path
        self.hint = hint

    def __str__(self) -> str:
        text = f"{self.path}: {self.problem}" if self.path else self.problem
        if self.hint:
            text += f" ({self.hint})"
        return text


class InputError(SpigapError):
    """The capture cannot be read at all (not a capture, no metadata, ...)."""


class UsageError(SpigapError):
    """An option or channel name does not fit the capture."""


class CaptureTruncated(SpigapError):
    """The capture ends early or is damaged part-way.

    Raised by a reader's edge iterator after it has yielded everything that was
    readable; the analysis of what came before is still valid and reported as
    partial.
    """

    def __init__(self, problem: str, *, path: str | None = None, at_tick: int | None = None,
                 hint: str | None = None):
        super().__init__(problem, path=path, hint=hint)
        self.at_tick = at_tick

    @property
    def damage(self) -> str:
        """What is wrong with the file: the problem without the clause the readers end it with,
        how far the results go ("; results cover the first 4669 samples", "; results up to
        1.8676e-06 s", "; read 12 samples from the members present"): for a message where no
        results follow (core/infer/settle.py: no bus in the part before the damage)."""
        return _COVERED.sub("", self.problem)


# the readers' closing clause of a CaptureTruncated's problem: how far the results go
_COVERED = re.compile(r";\s*(?:results\b|read \d+ samples\b).*$", re.S)


class OutputError(SpigapError):
    """An output cannot be written (a full disk, a read-only place, a device that refuses
    the bytes); whatever the output replaced is left as it was."""


# Characters a terminal acts on instead of showing: C0 and C1 controls, DEL, the
# Unicode line/paragraph separators and the bidirectional overrides (which reorder
# what is shown). Text that came from a file (channel names, file names, metadata)
# passes through printable() before it reaches a terminal or a text file.
_CONTROLS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069"   # all but \t \n
_UNSAFE = re.compile(f"[\t\n{_CONTROLS}]")
_UNSAFE_IN_LINES = re.compile(f"[{_CONTROLS}]")
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(m: re.Match) -> str:
    c = m.group()
    if c in _NAMED:
        return _NAMED[c]
    return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"


def printable(text: str, *, lines: bool = False) -> str:
    """``text`` with every control character written as an escape (``\\x1b``, ``\\n``):
    one line that cannot move the cursor, retitle a window or clear a screen. The one
    escaping rule of every text output and error message (HTML and JSON keep their own).
    ``lines``: tabs and newlines stay (a table, a CSV document)."""
    pattern = _UNSAFE_IN_LINES if lines else _UNSAFE
    if pattern.search(text) is None:
        return text
    return pattern.sub(_escape, text)
