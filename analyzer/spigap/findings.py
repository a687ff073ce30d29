"""What a warning explains: the one ordering rule of every warning and CHECK line.

A warning is a ``str`` (every renderer prints it as one) that may carry its
``Cause``: how much of the result it explains. A CS line that does not bracket
the clock's bursts makes every figure after it meaningless; an implausible sample
rate scales every time; a contradicted mode or word size changes the words; a
coarse sample rate loses bits; a setting inferred without certainty may be wrong;
the framing's symptoms (SCLK outside CS, trailing bits) follow from any of these;
notes (partial transfers at the capture's ends, which saved setting was used) explain
nothing. ``by_cause`` orders a list by that rank, stably (warnings of one cause keep
the order they were found in); core/settings_check.py applies it where a device's
warnings are assembled, so text, JSON, check, report and batch all list them cause
first. ``batch`` marks a capture ``warn`` when a warning is more than a note
(``is_concern``), and shows its first one.

Warnings made without a cause (plain strings) count as ``SYMPTOM``: a finding nobody
ranked is never hidden below the notes.
"""

from __future__ import annotations

import enum
from typing import Iterable


class Cause(enum.IntEnum):
    """How much of the result a warning explains; the lower, the more (and the earlier)."""

    ROLES = 0        # the channel roles are wrong (the CS does not bracket the bursts, its polarity)
    TIMEBASE = 1     # the sample rate or time base is implausible: every time is scaled
    SETTINGS = 2     # a given mode or word size the signals contradict
    SAMPLING = 3     # the sample rate too coarse for the bus (bits lost at CS deassert)
    UNSURE = 4       # a setting spigap could not settle firmly (a low confidence, a saved setting disputed)
    SYMPTOM = 5      # what the framing saw: SCLK outside CS, trailing bits, two CS lines at once
    NOTE = 6         # information: partial transfers at the ends, which saved setting was used


class Finding(str):
    """A warning's text with its ``cause`` (a ``str`` everywhere it is printed or compared)."""

    __slots__ = ("cause",)
    cause: Cause

    def __new__(cls, text: str, cause: Cause = Cause.SYMPTOM) -> "Finding":
        self = super().__new__(cls, text)
        self.cause = Cause(cause)
        return self

    def __reduce__(self):        # pickled (batch's worker processes) with its cause
        return (Finding, (str(self), int(self.cause)))



def cause_of(w: str) -> Cause:
    """A warning's cause (``SYMPTOM`` for a plain string)."""
    return getattr(w, "cause", Cause.SYMPTOM)


def by_cause(warnings: Iterable[str]) -> list[str]:
    """The warnings, the one that explains the most first (stable within a cause)."""
    return sorted(warnings, key=cause_of)


def explains_figures(w: str) -> bool:
    """The figures rest on it (a wrong CS, an implausible rate, a contradicted setting, bits
    lost to the sample rate): a CHECK line above the figures, in analyze, check and compare."""
    return cause_of(w) <= Cause.SAMPLING


def is_concern(w: str) -> bool:
    """More than a note: a capture whose analysis carries one is not plainly ``ok``."""
    return cause_of(w) < Cause.NOTE


def first_concern(warnings: Iterable[str]) -> str | None:
    """The warning that explains the most, unless every warning is a note."""
    ws = [w for w in by_cause(warnings) if is_concern(w)]
    return ws[0] if ws else None
