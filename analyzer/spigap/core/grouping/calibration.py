"""The stated confidence of a grouping answer: the measured share right of answers of its kind
(docs/gaps.md, "Calibration").

An answer's kind (its *key*) is the evidence that singled out its reading (``Grouping.basis``:
"busy+idle", "share+short", ...), the message length it gives (1, 2, 3-6, 7-16, 17 or more, or
lengths that vary), how far apart its kinds of gap lie (the longest kind's median over the
shortest's: under 2, 2-5, 5 or more) and whether every kind is tight, and whether the pattern is
clean (99.5 % of the gaps follow it). An ambiguous answer whose readings include one "N per message" reading (the 1-in-N minority
ends messages) has a *lean* to it, keyed the same way ("lean:share|n7-16|..."): when that
reading is right 3 times in 4 or more, it is the answer, at that confidence, and its rivals are
named.

The share is measured on the development cases (tests/driver_behaviour.py's seeds
``DEVELOPMENT`` and the full grid of tests/grouping_grid.py): right means 98 % of the gaps
labelled right. The coarsest key (the evidence's level) has one right and one wrong answer added;
each finer key (the evidence; then the length; then the spread; then whether the kinds are tight)
starts from the coarser one's share as if it had been seen ``PRIOR`` times, so a key seen a few
times moves it only part of the way. The share is stated on a few levels (``stated``): 0.95 from
a measured 85 % on, 0.75 (70-85 %), 0.65, 0.3 and 0.05 below it. No level lies between 0.75 and
0.95: a level at >= 0.8 must be >= 95 % right, the goal's limit (docs/gaps.md, "Calibration"); out
of fold on the development cases the 0.95 level is right 96.7 % of the time and 0.75 79.5 %
(``python tests/grouping_behaviour.py levels``; with 0.95 from 90 %, 0.75 was 85 %). An answer
whose pattern fewer than 97 % of the gaps follow (``fit``: "loose") is measured among loose
answers only (``chain``), not capped. PRIOR and the levels were chosen out of fold on the
development cases alone (two halves by a hash of the seed: fitted on one, measured on the other;
PRIOR 2, 8, 16 moved the 0.95 level's share by under a point).
``python tests/grouping_behaviour.py calibrate`` writes the table (calibration_data.py); the
held-back seeds then measure how true it is.
"""

from __future__ import annotations

from spigap.core.gaprules import defs
from spigap.core.grouping.calibration_data import MEASURED

CLEAN = 0.995         # a pattern this share of the gaps follow is clean
LOOSE = defs.MIN_CLEAN_AGREEMENT   # below this share it is loose (the pattern may be wrong)
PRIOR = 4             # answers a coarser key's share counts for beside a finer key's own
LEAN = 0.75           # an ambiguous answer's lean becomes the answer from this measured share on


def n_bucket(n: int | None) -> str:
    if n is None:
        return "nvar"
    if n <= 2:
        return f"n{n}"
    return "n3-6" if n <= 6 else "n7-16" if n <= 16 else "n17+"


def ratio_bucket(medians: list[float], tight: bool = False) -> str:
    """How far apart the kinds lie, and whether every kind is tight (a queue of messages the
    controller starts back to back: "close and tight", issue 32)."""
    if len(medians) < 2 or min(medians) <= 0:
        return "r-"
    r = max(medians) / min(medians)
    return ("r<2" if r < 2 else "r2-5" if r < 5 else "r5+") + (" tight" if tight else "")


def fit(agreement: float) -> str:
    """How well the gaps follow the answer's pattern: "clean" (99.5 % of them or more), "noisy"
    (``LOOSE``, 97 %, or more), "loose" (fewer: the pattern itself may be wrong)."""
    return "clean" if agreement >= CLEAN else "noisy" if agreement >= LOOSE else "loose"


def keys(basis: str, n: int | None, medians: list[float], fitted: str, level: str, tight: bool = False) -> list[str]:
    """The keys of an answer, from the most specific to the coarsest (``fitted``: ``fit``)."""
    return chain(f"{basis}|{n_bucket(n)}|{ratio_bucket(medians, tight)}|{fitted}", level)


def chain(full: str, level: str) -> list[str]:
    """From an answer's full key ("busy+idle|n2|r2-5|clean") to the coarsest one. A loose answer
    (``fit``) is measured among loose answers only: its coarsest keys are its evidence's loose
    answers and every loose answer, never the clean ones of its evidence."""
    basis, nb, rb, c = full.split("|")
    spread = rb.replace(" tight", "") + " any"       # the spread, tight kinds or not
    head = [full, f"{basis}|{nb}|{spread}|{c}", f"{basis}|{nb}|{c}", f"{basis}|{c}"]
    return head + (["fit:loose"] if c == "loose" else [basis, f"level:{level}"])


def share(key_list: list[str], table: dict[str, tuple[int, int]] | None = None) -> float | None:
    """The measured share right of an answer with these keys (most specific first): from the
    coarsest measured key down, each finer key's count updates the coarser one's share, weighted
    as PRIOR answers (a key seen three times moves the estimate part of the way); None when not
    even the coarsest was measured. ``table``: another measured table (out-of-fold checks)."""
    p = None
    table = MEASURED if table is None else table
    for k in reversed(key_list):
        m = table.get(k)
        if m is None:
            continue
        n, right = m
        p = (right + 1.0) / (n + 2.0) if p is None else (right + PRIOR * p) / (n + PRIOR)
    return p


# (measured share from, stated level), highest first
LEVELS = ((0.85, 0.95), (0.7, 0.75), (0.45, 0.65), (0.15, 0.3), (0.0, 0.05))


def stated(p: float) -> float:
    """The level stated for a measured share ``p``."""
    return next(level for start, level in LEVELS if p >= start)
