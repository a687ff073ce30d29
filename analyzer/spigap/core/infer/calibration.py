"""Stated confidences of inferred settings: measured probabilities, not scores
(docs/inference.md, "Calibration").

Every inferred role and mode carries a *basis*: the kind of evidence it stands on ("bracket/edges2":
a CS whose level brackets the clock's bursts and two lines changing on its edges; "one, released": one
data line that changes right after CS deasserts; "clear": 95 % of the data changes after one kind of
clock edge, 16 or more). The confidence spigap states for a setting is the share of answers on its
basis that were right on the development half of sigrok-dumps (every .sr of <= 30 MB, named and
with every channel renamed to its number; the corpus split by protocol and device). A device's
series of captures is not independent evidence (55 files of one test pattern): each unit counts
as at most three answers with its own share right, one right and one wrong answer are added (a
basis seen twice is not sure), and the share is rounded down to a multiple of 0.05 and kept within
0.05-0.95. The held-out half measures how true they are (docs/inference.md has both tables). A
basis never seen states 0.5; so do answers that rest on a default only (CPHA when the data lines
do not change, a data line that never changes): what the corpus' devices happen to use is no
evidence about the next capture.

``python tests/sigrok_dumps_eval.py DUMPS TEST --calibrate`` writes calibration_data.py from the
development half; nothing here is tuned by hand.
"""

from __future__ import annotations

import math

from spigap.core.infer.calibration_data import MEASURED

UNSEEN = 0.5
# bases that exist only when an option names a role (the other data line named: this one by
# elimination); the corpus is analyzed with no options, so it cannot measure them and their
# score stays (stating UNSEEN would call a line found by elimination a coin toss)
NEEDS_OPTIONS = {"other named", "other named, several"}
# bases the corpus holds no case of: several CS lines that together bracket one clock's bursts
# (a shared bus; no sigrok-dumps capture has one). Their score stays, as before calibration, and
# docs/inference.md says it is not measured (stating UNSEEN made every shared bus "uncertain"
# and a batch "warn" on captures whose CS lines are not in doubt)
NOT_IN_CORPUS = {"shared"}
DEFAULTS = {("mode", "no data changes"), ("mosi", "static"), ("miso", "static"), ("one line is miso", "static")}


def share(setting: str, basis: str) -> float | None:
    """The measured share right (with the prior) of answers of ``setting`` on ``basis``, or None."""
    m = MEASURED.get((setting, basis))
    if m is None or (setting, basis) in DEFAULTS:
        return None
    right, n = m[3], m[2]           # effective (each unit at most three answers)
    return (right + 1.0) / (n + 2.0)


def stated(setting: str, basis: str) -> float:
    """The confidence to state for an answer of ``setting`` on ``basis``."""
    p = share(setting, basis)
    if p is None:
        return UNSEEN
    return min(0.95, max(0.05, math.floor(p * 20 + 1e-9) / 20))


def miso_share(basis: str) -> float | None:
    """One data line on ``basis``: the measured share of such lines that are MISO (None: not measured)."""
    p = share("one line is miso", basis)
    return None if p is None else p


def apply(sources: dict) -> None:
    """Replace the scores of the inferred sources that carry a basis with their measured confidence."""
    for key, src in sources.items():
        setting = "bus" if key == "clk" else key
        if (src.how == "inferred" and src.basis and setting in ("bus", "cs", "mosi", "miso", "mode")
                and src.basis not in NEEDS_OPTIONS and src.basis not in NOT_IN_CORPUS):
            if key in ("mosi", "miso") and src.basis.startswith(("one", "static", "few")):
                p = miso_share(src.basis)
                if p is not None:
                    src.confidence = min(0.95, max(0.05, math.floor(max(p, 1 - p) * 20 + 1e-9) / 20))
                    continue
            src.confidence = stated(setting, src.basis)
            if key in ("mosi", "miso"):
                # two lines, one of two ways: a measured share under one half is chance, not evidence
                # for the other way (the dev captures' alike lines were right 7 times of 15)
                src.confidence = max(src.confidence, 0.5)
