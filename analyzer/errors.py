"""Errors that reach the user as one line: which file, what is wrong, what to do."""

from __future__ import annotations


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
