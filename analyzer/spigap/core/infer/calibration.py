"""Stated confidences of inferred settings: measured probabilities, not scores
(docs/inference.md, "Calibration").

Every inferred role and mode carries a *basis*: the kind of evidence it stands on ("bracket/edges2":
a CS whose level brackets the clock's bursts and two lines changing on its edges; "one, after the
edge": one data line whose changes lag the clock's edges, as a peripheral's output does; "clear":
95 % of the data changes after one kind of clock edge, 16 or more). The confidence spigap states for
a setting is the share of answers on its basis that were right on sigrok-dumps (every .sr of
<= 30 MB, named and with every channel renamed to its number). A device's series of captures is
not independent evidence (55 files of one test pattern): each unit counts as at most three answers
with its own share right.

Few answers: a basis' share is the posterior mean under a Beta prior fitted to how the shares of
its setting's bases spread (``PRIOR``: maximum beta-binomial marginal likelihood, fitted by the
evaluation on the same answers; per setting, one data line's direction a group of its own). Most
bases are right nearly always (SPI evidence) or wrong nearly always (a look-alike's): two or three
devices all right then state what such bases measure, not the 0.6-0.85 that one right and one
wrong answer added made of them. The share is rounded down to a multiple of 0.05 within 0.05-0.95.

How true that is, is measured out of sample: the corpus is split into five folds by device (a fixed
hash), the shares and priors fitted on four and stated on the fifth; the pooled out-of-fold
answers give the reliability table of docs/inference.md. A basis the fitting folds never saw is
stated at the share right of such answers in that same cross-validation (``UNSEEN``, per setting)
when the Beta posterior of that share puts 95 % of its mass on one side of one half (a never-seen
CS, 5 of 5 right: 0.85); else at 0.5, a coin toss (a never-seen clock: 11 of 20, and a fold's fit
measures anything from 40 to 70 %: stated at that noise, the out-of-fold answers at 0.60-0.65 were
right 4 times in 12). Answers that rest on a default only (a data line that never changes) or where
the signals allow two readings equally (two CS candidates) state 0.5. CPHA where no data line
changes is a prior, said so: the CPHA the corpus' SPI devices idling at that CPOL use more often
where their data settle it, at the share that do (``CPHA``; each device one answer), only where
that share is credibly away from one half (``cpha_prior``), else 0.5.

``python tests/sigrok_dumps_eval.py DUMPS TEST --calibrate`` writes calibration_data.py from the
whole corpus (deterministic: the folds are a hash of the device's folder); nothing here is tuned by
hand.
"""

from __future__ import annotations

import math

import numpy as np

from spigap.core.infer.calibration_data import CPHA, MEASURED, PRIOR, UNSEEN

Table = dict[tuple[str, str], tuple[int, int, float, float]]
Prior = dict[str, tuple[float, float]]

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
# answers that rest on no evidence (CPHA when no data line changes: its base rate given CPOL, where
# credible, cpha_prior); a data line that never changes
# or changes too few times to see when; two data lines that behave alike (MOSI taken as the first
# in channel order: the corpus' wirings measured 7 of 15, and in cross-validation 2 of 9 where the
# other folds' said 3 of 4: a convention, not evidence); two data lines whose first words both mostly
# repeat (a controller polling one command: the words' evidence has no direction there, right on 1
# of the corpus' 4 such answers; the same convention, 3 of 4); a CS beside another line bracketing the same
# bursts, asserted apart (SSI32's FC#: which is the select, the signals do not say); no CS, beside a
# line that brackets most bursts but changes while the clock runs (a 93LC56B's CS under an MPSSE); a
# CS whose windows hold some of the clock's bursts, the clock running outside them too (a select
# on a clock shared with a device whose CS is not captured: that line or no CS; asserted once: no
# CS or that line)
DEFAULTS = {("mode", "no data changes"), ("mosi", "static"), ("miso", "static"), (DIRECTION, "static"),
            (DIRECTION, "one, few changes"), ("mosi", "two, alike"), ("miso", "two, alike"),
            ("mosi", "two, both repeat"), ("miso", "two, both repeat"), ("mosi", "two, wide"), ("miso", "two, wide"),
            ("cs", "two brackets"), ("cs", "none, near"), ("cs", "partial"),
            ("cs", "none, partial")}


def group(setting: str) -> str:
    """The setting whose bases share one prior and one measured UNSEEN share (MOSI and MISO are
    one answer)."""
    return "data" if setting in ("mosi", "miso") else setting


def _share(m: tuple[int, int, float, float], ab: tuple[float, float] = (1.0, 1.0)) -> float:
    """The posterior mean of a basis' share right: its effective answers (each unit at most three)
    under the Beta(a, b) prior of its setting (fitted on the other bases of the setting: how shares
    of bases spread; Beta(1, 1), one right and one wrong answer added, without one)."""
    right, n = m[3], m[2]
    a, b = ab
    return (right + a) / (n + a + b)


def _level(p: float) -> float:
    return min(0.95, max(0.05, math.floor(p * 20 + 1e-9) / 20))


def share(setting: str, basis: str, table: Table | None = None, prior: Prior | None = None) -> float | None:
    """The measured share right (the posterior mean under its setting's prior) of answers of
    ``setting`` on ``basis``, or None."""
    m = (MEASURED if table is None else table).get((setting, basis))
    if m is None or (setting, basis) in DEFAULTS:
        return None
    return _share(m, (PRIOR if prior is None else prior).get(group(setting), (1.0, 1.0)))


def stated(setting: str, basis: str, table: Table | None = None, unseen: Table | None = None,
           prior: Prior | None = None) -> float:
    """The confidence to state for an answer of ``setting`` on ``basis`` (``table``/``unseen``/
    ``prior``: another fit's, as the cross-validation states them; default the shipped one)."""
    if (setting, basis) in DEFAULTS:
        return DEFAULT_ONLY
    p = share(setting, basis, table, prior)
    if p is None:
        u = (UNSEEN if unseen is None else unseen).get((group(setting), "unseen"))
        return DEFAULT_ONLY if u is None or not _credibly_off_half(u) else _level(_share(u))
    return _level(p)


def _credibly_off_half(m: tuple[int, int, float, float]) -> bool:
    """Whether the answers ``m`` (effective) put a share right credibly away from one half: the
    Beta posterior under a uniform prior puts 95 % of its mass on one side of 0.5. Never-seen
    answers are few and come from few devices (a fold's share swings 40-70 % with one device
    more or less); a share the corpus cannot tell from a coin toss is stated as one (0.5), not
    as the noise of the fold it was fitted on. Computed on a grid (numpy, no scipy on this path)."""
    n, k = m[2], m[3]
    x = np.linspace(0.0, 1.0, 4001)[1:-1]
    logpdf = k * np.log(x) + (n - k) * np.log1p(-x)
    w = np.exp(logpdf - logpdf.max())
    above = float(w[x > 0.5].sum() / w.sum())
    return above >= 0.95 or above <= 0.05


NO_CPHA = "no data changes"   # the mode's basis where no data line changes: CPHA from the base rate


def cpha_prior(cpol: int, table: dict[int, tuple[int, int, float, float]] | None = None) -> tuple[int, float] | None:
    """No data line changes, so the signals cannot tell CPHA: (the CPHA devices idling at ``cpol``
    use more often, the share of them that do: the confidence to state it at), from the SPI
    captures of sigrok-dumps whose CPHA the signals settle (``CPHA``: per CPOL, the captures
    with CPHA 1; each device one answer, its captures' share), the share the posterior mean under a
    uniform Beta prior; None when that share is not credibly away from one half (then both
    readings are a coin toss). A prior, not evidence from the capture: the note says so."""
    m = (CPHA if table is None else table).get(cpol)
    if m is None or not _credibly_off_half(m):
        return None
    p1 = _share(m)
    return (1 if p1 > 0.5 else 0), _level(max(p1, 1 - p1))


def direction(basis: str, table: Table | None = None, prior: Prior | None = None) -> tuple[str, float] | None:
    """One data line on ``basis``: (the role it is more often, the confidence to state it at), or
    None when the basis was never measured (then both readings are equally open)."""
    p = share(DIRECTION, basis, table, prior)
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
            if key == "mode" and src.basis == NO_CPHA:
                continue            # settings.py stated CPHA's base rate given CPOL (cpha_prior)
            src.confidence = stated(setting, src.basis)
            if key in ("mosi", "miso"):
                # two lines, one of two ways: a measured share under one half is chance, not evidence
                # for the other way
                src.confidence = max(src.confidence, 0.5)
