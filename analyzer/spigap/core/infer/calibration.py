"""Stated confidences of inferred settings: measured probabilities, not scores
(docs/inference.md, "Calibration").

Every inferred role and mode carries a *basis*: the kind of evidence it stands on ("bracket/edges2":
a CS whose level brackets the clock's bursts and two lines changing on its edges; "one, after the
edge": one data line whose changes lag the clock's edges, as a peripheral's output does; "clear":
95 % of the data changes after one kind of clock edge, 16 or more). The confidence spigap states for
a setting is the share of answers on its basis that were right on sigrok-dumps (every .sr of
<= 30 MB, named and with every channel renamed to its number). A device's series of captures is
not independent evidence (55 files of one test pattern): each unit counts as at most three answers
with its own share right; one right and one wrong answer are added (a basis seen twice is not
sure); the share is rounded down to a multiple of 0.05 and kept within 0.05-0.95.

How true that is, is measured out of sample: the corpus is split into five folds by device (a fixed
hash), the shares fitted on four and stated on the fifth; the pooled out-of-fold answers give the
reliability table of docs/inference.md. A basis the fitting folds never saw is stated at the share
right of such answers in that same cross-validation (``UNSEEN``, per setting: a clock on a kind of
evidence never seen was mostly no SPI bus at all), not at a fixed 0.5. Answers that rest on a
default only (CPHA when the data lines do not change, a data line that never changes) state 0.5:
what the corpus' devices happen to use is no evidence about the next capture.

``python tests/sigrok_dumps_eval.py DUMPS TEST --calibrate`` writes calibration_data.py from the
whole corpus (deterministic: the folds are a hash of the device's folder); nothing here is tuned by
hand.
"""

from __future__ import annotations

import math

from spigap.core.infer.calibration_data import MEASURED, UNSEEN

Table = dict[tuple[str, str], tuple[int, int, float, float]]

DEFAULT_ONLY = 0.5
# bases that exist only when an option names a role (the other data line named: this one by
# elimination); the corpus is analyzed with no options, so it cannot measure them and their
# score stays (stating UNSEEN would call a line found by elimination a coin toss)
NEEDS_OPTIONS = {"other named", "other named, several"}
# bases the corpus holds no case of: several CS lines that together bracket one clock's bursts
# (a shared bus; no sigrok-dumps capture has one). Their score stays, as before calibration, and
# docs/inference.md says it is not measured (stating UNSEEN made every shared bus "uncertain"
# and a batch "warn" on captures whose CS lines are not in doubt)
NOT_IN_CORPUS = {"shared"}
DIRECTION = "one line is miso"       # the setting of one data line's direction (its share: MISO)
# answers that rest on no evidence: CPHA when no data line changes; a data line that never changes
# or changes too few times to see when; two data lines that behave alike (MOSI taken as the first
# in channel order: the corpus' wirings measured 7 of 15, and in cross-validation 2 of 9 where the
# other folds' said 3 of 4: a convention, not evidence)
DEFAULTS = {("mode", "no data changes"), ("mosi", "static"), ("miso", "static"), (DIRECTION, "static"),
            (DIRECTION, "one, few changes"), ("mosi", "two, alike"), ("miso", "two, alike")}


def group(setting: str) -> str:
    """The setting whose never-seen bases share one measured UNSEEN share (MOSI and MISO are one answer)."""
    return "data" if setting in ("mosi", "miso") else setting


def _share(m: tuple[int, int, float, float]) -> float:
    right, n = m[3], m[2]           # effective (each unit at most three answers)
    return (right + 1.0) / (n + 2.0)


def _level(p: float) -> float:
    return min(0.95, max(0.05, math.floor(p * 20 + 1e-9) / 20))


def share(setting: str, basis: str, table: Table | None = None) -> float | None:
    """The measured share right (with the prior) of answers of ``setting`` on ``basis``, or None."""
    m = (MEASURED if table is None else table).get((setting, basis))
    if m is None or (setting, basis) in DEFAULTS:
        return None
    return _share(m)


def stated(setting: str, basis: str, table: Table | None = None, unseen: Table | None = None) -> float:
    """The confidence to state for an answer of ``setting`` on ``basis`` (``table``/``unseen``:
    another fit's, as the cross-validation states them; default the shipped one)."""
    if (setting, basis) in DEFAULTS:
        return DEFAULT_ONLY
    p = share(setting, basis, table)
    if p is None:
        u = (UNSEEN if unseen is None else unseen).get((group(setting), "unseen"))
        return DEFAULT_ONLY if u is None else _level(_share(u))
    return _level(p)


def direction(basis: str, table: Table | None = None) -> tuple[str, float] | None:
    """One data line on ``basis``: (the role it is more often, the confidence to state it at), or
    None when the basis was never measured (then both readings are equally open)."""
    p = share(DIRECTION, basis, table)
    if p is None:
        return None
    return ("miso" if p >= 0.5 else "mosi"), _level(max(p, 1 - p))


def apply(sources: dict) -> None:
    """Replace the scores of the inferred sources that carry a basis with their measured confidence."""
    for key, src in sources.items():
        setting = "bus" if key == "clk" else key
        if (src.how == "inferred" and src.basis and setting in ("bus", "cs", "mosi", "miso", "mode")
                and src.basis not in NEEDS_OPTIONS and src.basis not in NOT_IN_CORPUS):
            if key in ("mosi", "miso") and src.basis.startswith(("one", "static", "few")):
                continue            # one data line: mosi_miso.py stated its direction's measured share
            src.confidence = stated(setting, src.basis)
            if key in ("mosi", "miso"):
                # two lines, one of two ways: a measured share under one half is chance, not evidence
                # for the other way
                src.confidence = max(src.confidence, 0.5)
