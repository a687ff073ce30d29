"""Readings of a structure, and the evidence that weighs them.

A structure (a repeating pattern of gap kinds, stretches of them, or kinds in
no order) says which gaps are alike, not which of them end messages. Each
*reading* is one answer to that: the set of kinds that end messages (the
others are cs_change gaps inside messages). With two kinds there are three
readings: the longer ones end messages, the shorter ones do, or every gap does
(one transfer per message, the longer gaps being pauses between calls: a
spidev loop that sleeps every 4th call looks exactly like messages of 4).

Evidence (``Vote``) supports some readings and not others; it is fallible, so
no vote removes a reading by itself unless the user gave it:

* ``given``: --context-switch / --transfers-per-message (the user);
* ``device``: the device driver's message shapes (--device);
* ``idle``: the capture starts in idle, so a message starts at its first transfer
  (evidence for the phase of a structure, not for the structure: a stall inside a
  message looks the same);
* ``busy``: a kind that looks like the default cs_change busy-wait (udelay(10) +
  two GPIO writes: 10-14.5 µs, tight, symmetric) is not a message boundary;
* ``short``: a kind shorter than 1.5 µs leaves no time to return from spi_sync
  and start another message: not a boundary;
* ``wide``: a kind spread over several-fold lengths (waits for an interrupt,
  sleeps) is not a delay inside a message: a boundary;
* ``share``: with a constant N >= 7 under one of the two single-kind readings
  (and not the other), the 1-in-N minority ends messages (says nothing about
  "every gap").

The readings all votes support are kept; one left is the answer, several are
an ambiguous answer that names them; none (the votes contradict each other)
is ambiguous too, naming what each vote supports.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np

from spigap.core.gaprules import defs
from spigap.core.grouping.kinds import KindStats

SHORT_S = 1.5e-6
PAUSES_MIN_SHARE = 0.45      # "every gap ends a message": only when the shortest kind is about half or more


@dataclasses.dataclass
class Structure:
    how: str                    # "pattern", "segments" or "by length"
    k: int
    stretches: list             # Stretch per stretch (pattern, segments)
    labels: np.ndarray | None   # by length: every gap's kind
    note: str
    agreement: float = 1.0
    observed: np.ndarray | None = None   # the labels the pattern came from (stalls -1), if any
    cuts: np.ndarray | None = None       # by length: the lengths (ticks) between neighbouring kinds
    mixed: bool = False                  # some kind may hold two populations (an overlapping split)
    shift: bool = False                  # the pattern is one phase shifted in distribution (pattern.shift_test)


@dataclasses.dataclass
class Reading:
    ends: frozenset             # kinds that end messages
    lengths: list               # per stretch: one period of message lengths
    firsts: list                # per stretch: first_message_start
    dist: str = ""              # by length: the distribution of message lengths

    @property
    def constant(self) -> int | None:
        ns = {_const(x) for x in self.lengths}
        return ns.pop() if len(ns) == 1 and None not in ns else None

    def describe(self, st: Structure, stats: list[KindStats], tick_s: float | None) -> str:
        if st.how == "by length":
            return self.dist
        if len(self.lengths) == 1 or all(x == self.lengths[0] for x in self.lengths):
            return defs.describe_lengths(self.lengths[0])
        last = len(st.stretches) - 1
        parts = [f"{defs.describe_lengths(x)} (transfers {s.start if i else 0}-"
                 f"{s.end - 1 if i < last else str(s.end) + '…'})"
                 for i, (x, s) in enumerate(zip(self.lengths, st.stretches))]
        return ", then ".join(parts)

    def ends_text(self, stats: list[KindStats], tick_s: float | None) -> str:
        k = len(stats)
        if len(self.ends) == k:
            return "every CS-inactive gap ends a message"
        if k == 2:
            return f"the {'longer' if 1 in self.ends else 'shorter'} CS-inactive gaps end messages"
        names = [kind_name(stats[j], tick_s) for j in sorted(self.ends)]
        return f"the {' and '.join(names)} gaps end messages"


def spreads(stats: list[KindStats], tick_s: float | None) -> str:
    """What the kinds' spreads say, for an answer they did not settle: 'the spreads do not
    tell them apart (20 µs: plain, spread 10 %; 200 µs: plain, spread 15 %; no busy-wait)'."""
    parts = [f"{kind_name(s, tick_s)}: {s.shape()}" + (f", spread {100 * s.spread:.2g} %" if s.shape() != "wide" else "")
             for s in stats]
    busy = [kind_name(s, tick_s) for s in stats if s.busy_wait]
    tail = ("no default cs_change busy-wait among them" if not busy else
            f"{' and '.join(busy)} look like the busy-wait" + (" (more than one: no evidence)" if len(busy) > 1 else ""))
    return f"the spreads do not tell them apart ({'; '.join(parts)}; {tail})"


def kind_name(s: KindStats, tick_s: float | None) -> str:
    if tick_s:
        return defs.fmt_seconds(s.median * tick_s, 3).replace(" ", " ")
    return f"{s.median:.4g}-sample"


def _const(lengths: list) -> int | None:
    return lengths[0] if lengths and len(set(lengths)) == 1 else None


def _shortest_period(lengths: list) -> list:
    """[2, 3, 2, 3] -> [2, 3]; [1, 1, 1] -> [1]."""
    n = len(lengths)
    for p in range(1, n + 1):
        if n % p == 0 and lengths == lengths[:p] * (n // p):
            return lengths[:p]
    return lengths


def readings(st: Structure) -> list[Reading]:
    out = []
    for r in range(1, st.k + 1):
        for ends in itertools.combinations(range(st.k), r):
            e = frozenset(ends)
            if st.how == "by length":
                assert st.labels is not None
                b = np.isin(st.labels, list(e))
                out.append(Reading(e, [], [], _distribution(b)))
                continue
            lens, firsts = [], []
            ok = True
            for s in st.stretches:
                bp = np.isin(s.pattern, list(e)).tolist()
                if not any(bp):
                    ok = False
                    break
                lengths, first = defs.message_lengths_from_labels(bp)
                short = _shortest_period(lengths)
                if len(short) < len(lengths):
                    first %= max(sum(short), 1)
                lens.append(short)
                firsts.append(first)
            if ok:
                out.append(Reading(e, lens, firsts))
    return out


def _distribution(ends: np.ndarray) -> str:
    """'messages of 1 (40 %), 2 (60 %) transfers': the lengths between the boundaries."""
    idx = np.flatnonzero(ends)
    runs = np.diff(idx)
    if len(runs) == 0:
        return "no whole message"
    v, c = np.unique(runs, return_counts=True)
    if len(v) == 1:
        return defs.describe_lengths([int(v[0])])
    top = np.argsort(-c)[:4]
    return "messages of " + ", ".join(f"{int(v[i])} ({100 * c[i] / len(runs):.0f} %)" for i in top) + \
        (" transfers" if len(v) <= 4 else " transfers, and others")


@dataclasses.dataclass
class Vote:
    name: str
    supports: set               # indices of the readings it supports
    text: str


def votes(st: Structure, rd: list[Reading], stats: list[KindStats], *, lead_ok: bool, tick_s: float | None,
          device_lengths=None) -> list[Vote]:
    """The evidence that applies, each with the readings it supports (all readings: it says nothing)."""
    everyone = set(range(len(rd)))
    out: list[Vote] = []
    if device_lengths:
        allowed = set(device_lengths)
        fit = {i for i, r in enumerate(rd) if _fits_device(r, st, allowed)}
        out.append(Vote("device", fit, f"the device's message shapes ({', '.join(map(str, sorted(allowed)))} "
                                        "transfers)"))
    if lead_ok and st.how != "by length":
        s0 = st.stretches[0]
        before = int(s0.pattern[-1 % s0.period])       # the kind of the gap before transfer 0
        sup = {i for i, r in enumerate(rd) if before in r.ends}
        out.append(Vote("idle", sup, "the capture starts in idle (longer than any gap) before a message"))
    busy = [j for j, s in enumerate(stats) if s.busy_wait]
    if len(busy) == 1:
        j = busy[0]
        out.append(Vote("busy", {i for i, r in enumerate(rd) if j not in r.ends},
                        f"the {kind_name(stats[j], tick_s)} gaps look like the default cs_change busy-wait "
                        f"(udelay(10) + two GPIO writes: spread {100 * stats[j].spread:.1f} %, no long right tail)"))
    if tick_s:
        short = [j for j, s in enumerate(stats) if s.median * tick_s < SHORT_S]
        if short and len(short) == len(stats):
            short = [int(np.argmin([s.median for s in stats]))]   # every kind short: the shortest surely is
        if short and len(short) < len(stats):
            out.append(Vote("short", {i for i, r in enumerate(rd) if not (set(short) & r.ends)},
                            f"gaps under {SHORT_S * 1e6:g} µs ({', '.join(kind_name(stats[j], tick_s) for j in short)}) "
                            "leave no time for a new message"))
    wide = [j for j, s in enumerate(stats) if s.wide]
    if wide and len(wide) < len(stats):
        out.append(Vote("wide", {i for i, r in enumerate(rd) if set(wide) <= r.ends},
                        f"the {', '.join(kind_name(stats[j], tick_s) for j in wide)} gaps spread over "
                        "several-fold lengths (waits, sleeps): not a delay inside a message"))
    if st.k == 2 and st.how == "pattern":
        one = {r.ends: (i, r.constant) for i, r in enumerate(rd) if len(r.ends) == 1}
        for lab in (0, 1):
            if frozenset([lab]) not in one or frozenset([1 - lab]) not in one:
                continue
            i, n = one[frozenset([lab])]
            _, other = one[frozenset([1 - lab])]
            if n is not None and n >= defs.MIN_CONSTANT_N_BY_SHARE and other is None:
                out.append(Vote("share", everyone - {one[frozenset([1 - lab])][0]},
                                f"the share: 1 gap in {n} is {'longer' if lab else 'shorter'}, and with N >= "
                                f"{defs.MIN_CONSTANT_N_BY_SHARE} the context switches are the minority"))
    return out


def _fits_device(r: Reading, st: Structure, allowed: set) -> bool:
    if st.how == "by length":
        return False
    return all(x and set(x) <= allowed for x in r.lengths)


def admissible(r: Reading, stats: list[KindStats]) -> bool:
    """'Every gap ends a message' (the longer kinds being pauses between calls) is a
    rival only when the shortest kind is about half of the gaps or more: a loop that
    pauses after most of its calls and not after a few is no driver's pattern."""
    if len(r.ends) < len(stats) or len(stats) < 2:
        return True
    return stats[0].share >= PAUSES_MIN_SHARE


@dataclasses.dataclass
class Decision:
    chosen: int | None          # the reading, or None (ambiguous)
    candidates: list            # readings still standing (ambiguous: the rivals named)
    basis: list                 # names of the votes that singled the reading out
    conflict: bool = False


def decide(rd: list[Reading], vs: list[Vote], allowed: set) -> Decision:
    """Intersect what every vote supports (within ``allowed``: the readings the user's
    options and plausibility leave)."""
    cand = set(allowed)
    used: list[str] = []
    # the strongest evidence first, so the basis names what mattered
    order = {"device": 0, "busy": 1, "wide": 2, "short": 3, "idle": 4, "share": 5}
    for v in sorted(vs, key=lambda v: order.get(v.name, 9)):
        nxt = cand & v.supports
        if not nxt:
            # contradiction: the readings each side supports are the rivals
            rivals = sorted((cand | (allowed & v.supports)))
            return Decision(None, rivals, used + [v.name], conflict=True)
        if nxt != cand:
            used.append(v.name)
        cand = nxt
    if len(cand) == 1:
        chosen = next(iter(cand))
        # the basis: every vote that speaks for the reading and against another one
        basis = [v.name for v in vs if chosen in v.supports and v.supports != set(range(len(rd)))
                 and (allowed - v.supports)]
        return Decision(chosen, [], sorted(set(basis) | set(used)))
    return Decision(None, sorted(cand), used)
