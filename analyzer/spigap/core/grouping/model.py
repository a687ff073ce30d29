"""The grouping's result: per-gap kinds, the structure, the readings and their evidence."""

from __future__ import annotations

import dataclasses

import numpy as np

from spigap.core.gaprules import defs

# per-gap codes (Grouping.kinds)
CS_CHANGE, CONTEXT_SWITCH, CLASS_A, CLASS_B = 1, 2, 4, 5

# Measured confidence of each kind of answer (docs/gaps.md, "Calibration"): the
# share of answers of that kind with >= 98 % of their gaps right, on the grid
# (tests/grouping_grid.py) and on the randomized driver behaviours
# (tests/driver_behaviour.py, development seeds), rounded down; checked on the
# held-back seeds (tests/test_grouping_behaviour.py). An answer's kind is the set of
# evidence that singled out its reading (``Grouping.basis``).
CONFIDENCE = {
    "given": 1.0,          # the user's --context-switch / --transfers-per-message, or a trace
    "device": 0.75,        # a device's message shapes: not on the grid, kept below 0.8 by design
    "ambiguous": 0.5,      # roles unknown: a coin flip
    "one_population": 0.1,   # one population: every gap a context switch (or the kinds overlap)
    "too_few": 0.0,
}


@dataclasses.dataclass
class Segment:
    """One stretch of the capture with one message structure (transfers first..last)."""
    first_transfer: int
    last_transfer: int | None   # inclusive; None: to the end of the capture
    lengths: list               # one period of message lengths ([] unknown)
    first_start: int            # transfer (mod sum(lengths)) that starts a message of lengths[0]

    @property
    def transfers_per_message(self) -> int | None:
        return self.lengths[0] if self.lengths and len(set(self.lengths)) == 1 else None

    def as_dict(self, n_transfers: int | None = None) -> dict:
        last = self.last_transfer if self.last_transfer is not None else (
            n_transfers - 1 if n_transfers is not None else None)
        return {"first_transfer": self.first_transfer, "last_transfer": last,
                "transfers_per_message": self.transfers_per_message, "message_lengths": list(self.lengths),
                "first_message_start": self.first_start, "description": defs.describe_lengths(self.lengths)}


@dataclasses.dataclass
class Continuation:
    """How the kinds go on past the gaps that were looked at (spigap monitor, long captures):
    periodic (``codes[i % period]`` for absolute gap i) or by length (``cuts``: the
    kind of a gap is ``by_length[searchsorted(cuts, gap)]``)."""
    period: int = 0
    codes: np.ndarray | None = None
    cuts: np.ndarray | None = None
    by_length: np.ndarray | None = None

    def kinds(self, gaps: np.ndarray, first: int) -> np.ndarray | None:
        if self.period and self.codes is not None:
            return self.codes[(first + np.arange(len(gaps))) % self.period]
        if self.cuts is not None and self.by_length is not None:
            return self.by_length[np.searchsorted(self.cuts, np.asarray(gaps, float), side="left")]
        return None


@dataclasses.dataclass
class Grouping:
    transfers_per_message: int | None   # constant N; None when message lengths vary or are unknown
    phase: int            # constant N: gap i ends a message iff (i - phase) % N == 0
    confidence: float     # measured probability that the labels are right (docs/gaps.md)
    method: str           # "auto", "user", "device", "trace", "none"
    note: str
    kinds: np.ndarray = dataclasses.field(compare=False, repr=False)  # per CS-inactive gap: CS_CHANGE,
    #                       CONTEXT_SWITCH, CLASS_A or CLASS_B
    lengths: list = dataclasses.field(default_factory=list)   # one period of message lengths ([] unknown)
    first_start: int = 0  # transfer (mod sum(lengths)) that starts a message of lengths[0]
    evidence: list = dataclasses.field(default_factory=list)  # why the roles are what they are
    ambiguous: bool = False
    settle: str | None = None   # the option that settles an ambiguous answer
    structure: str = "none"     # "pattern", "segments", "one population", "by length", "too few", "given"
    segments: list = dataclasses.field(default_factory=list)   # Segment per stretch (>= 2: the structure changed)
    readings: list = dataclasses.field(default_factory=list)   # every reading weighed (dicts, JSON)
    rival: str | None = None    # the reading that could also be true, and what settles it
    gap_kinds: list = dataclasses.field(default_factory=list)  # per kind of gap: its spread (dicts, JSON)
    basis: str = ""             # the kind of answer (a CONFIDENCE key or a set of evidence)
    agreement: float | None = None   # share of the (known) gap kinds that follow the structure
    continuation: Continuation = dataclasses.field(default_factory=Continuation, compare=False, repr=False)
    rival_kinds: list = dataclasses.field(default_factory=list, compare=False, repr=False)  # ambiguous: each
    #                     named reading's kinds (CS_CHANGE / CONTEXT_SWITCH per gap), for calibration

    def boundary_mask(self, n_gaps: int) -> np.ndarray:
        """True where a gap ends a message; ambiguous gaps count as boundaries
        (each transfer its own message) because no message is known."""
        k = self.kinds[:n_gaps]
        return (k == CONTEXT_SWITCH) | (k == CLASS_A) | (k == CLASS_B)

    def kinds_for(self, gaps: np.ndarray, first: int) -> np.ndarray | None:
        """The kinds of gaps ``first`` .. of the capture (``gaps``: their ticks) with this
        grouping's structure carried on, or None when it does not carry on."""
        if self.structure == "one population" and len(self.kinds):
            return np.full(len(gaps), int(self.kinds[0]), np.int8)
        out = self.continuation.kinds(gaps, first)
        return None if out is None else np.asarray(out, np.int8)


def make(kinds, *, n=None, phase=0, confidence, method, note, **kw) -> Grouping:
    return Grouping(n, phase, round(float(confidence), 3), method, note, kinds, **kw)


def all_of(n_gaps: int, code: int) -> np.ndarray:
    return np.full(n_gaps, code, np.int8)


def periodic(kinds: np.ndarray, period: int) -> Continuation:
    """The continuation of kinds that repeat with ``period`` from gap 0 (the last period seen)."""
    n = len(kinds)
    if period <= 0 or n < period:
        return Continuation()
    idx = np.arange(n - period, n)
    codes = np.empty(period, np.int8)
    codes[idx % period] = kinds[idx]
    return Continuation(period=period, codes=codes)


def from_boundaries(n_gaps: int, boundaries) -> Grouping:
    """Ground truth from outside the bus (e.g. the spi_message_submit/done
    events of a kernel trace): ``boundaries`` holds the indices of the
    CS-inactive gaps that lie between two messages (gap i: between transfers
    i and i+1)."""
    b = np.zeros(n_gaps, bool)
    idx = np.asarray(list(boundaries), dtype=np.int64)
    if len(idx) and (idx.min() < 0 or idx.max() >= n_gaps):
        raise ValueError(f"message boundary index outside 0..{n_gaps - 1}")
    b[idx] = True
    kinds = np.where(b, CONTEXT_SWITCH, CS_CHANGE).astype(np.int8)
    ends = np.flatnonzero(b)
    lengths = np.diff(ends).tolist() if len(ends) > 1 else []
    counts = sorted(set(lengths))
    nconst = counts[0] if len(counts) == 1 else None
    desc = (f"{nconst} transfers per message" if nconst else
            "message lengths " + ", ".join(str(x) for x in counts) if counts else "no whole message")
    phase = int(ends[0]) % nconst if nconst else 0
    return make(kinds, n=nconst, phase=phase, confidence=CONFIDENCE["given"], method="trace",
                note=f"message boundaries given (trace): {desc}", lengths=lengths[:64],
                first_start=int(ends[0]) + 1 if len(ends) else 0, evidence=["known message boundaries"],
                structure="given", basis="trace")
