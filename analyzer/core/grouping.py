"""Which CS-inactive gaps are cs_change gaps and which are context switches.

docs/gaps.md, "CS-inactive gaps", is the reference. In short:

1. **Populations.** The gaps are split into two populations plus sparse
   stalls by the shared rule (``gapdefs.split_two``). Each gap gets a label:
   the shorter population (0), the longer one (1), or unknown (-1: a stall,
   or not clearly either).
2. **Structure** from the label sequence: the shortest repeating pattern of
   labels that at least ``MIN_AGREEMENT`` of the known labels follow, seen at
   least ``MIN_PERIODS`` times. A pattern gives the message lengths (e.g.
   [2, 3]: messages of 2 and 3 transfers alternate) under each of the two
   readings "population 1 ends messages" / "population 0 ends messages".
   When the lengths overlap too much to split, a constant N is still found
   when one phase of the gaps differs from the others (the phase test).
3. **Roles** only with evidence, and the evidence is reported: the user's
   ``--context-switch longer|shorter``, known message boundaries (a kernel
   trace: ``from_boundaries``), a device's message shapes, the capture
   starting in idle before a message, or the share (with a constant N >= 7
   the context switches are the 1-in-N minority). Without evidence the two
   populations are reported as ambiguous classes A (shorter) and B (longer),
   ``cs_change|context_switch``, with the option that settles it.
4. **Confidence** is the measured probability that the labels are right for
   answers of that kind, from the calibration grid (docs/gaps.md,
   tests/test_grouping_calibration.py), not a score.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from spigap.core.gaprules import classify, defs, split
from spigap.core.quantile import median

MIN_PERIODS = defs.MIN_PERIODS
WINDOW = 1 << 14        # structure is searched on the first 16384 gaps, then applied to all

# per-gap codes (Grouping.kinds)
CS_CHANGE, CONTEXT_SWITCH, CLASS_A, CLASS_B = 1, 2, 4, 5

# Measured confidence of each kind of answer (docs/gaps.md, "Calibration"):
# the share of grid scenarios answered this way in which >= 98 % of the gaps
# were labelled right, rounded down. Re-measure with
# ``SPIGAP_CALIBRATION=full pytest -m calibration tests/test_grouping_calibration.py``.
CONFIDENCE = {
    "given": 1.0,          # the user's --context-switch / --transfers-per-message, or a trace
    "device": 0.75,        # a device's message shapes: not on the grid, kept below 0.8 by design
    "idle_start": 0.95,    # the capture starts in idle before a message
    "share": 0.9,          # constant N >= 7: context switches are the minority
    "one_population": 0.3,   # one population: every gap a context switch (or the kinds overlap)
    "ambiguous": 0.5,      # roles unknown: a coin flip
    "too_few": 0.0,
}


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
    structure: str = "none"     # "pattern", "one population", "by length", "too few", "given"

    def boundary_mask(self, n_gaps: int) -> np.ndarray:
        """True where a gap ends a message; ambiguous gaps count as boundaries
        (each transfer its own message) because no message is known."""
        k = self.kinds[:n_gaps]
        return (k == CONTEXT_SWITCH) | (k == CLASS_A) | (k == CLASS_B)


def _grouping(kinds, *, n=None, phase=0, confidence, method, note, **kw) -> Grouping:
    return Grouping(n, phase, round(float(confidence), 3), method, note, kinds, **kw)


def _all(n_gaps: int, code: int) -> np.ndarray:
    return np.full(n_gaps, code, np.int8)


# ------------------------------------------------------------------ structure

def _pattern(lab: np.ndarray, rare: bool = False, x: np.ndarray | None = None) -> tuple[int, np.ndarray, float] | None:
    """Shortest repeating pattern of the known labels (0/1; -1 unknown):
    (period P, pattern of P labels, agreement), or None. ``rare``: label 1 is
    a rare kind mixed with stalls, so only the positions of the pattern that
    hold it must be pure (stalls elsewhere do not count against it)."""
    n = len(lab)
    known = lab >= 0
    nk = int(known.sum())
    if nk < 2 * MIN_PERIODS:
        return None
    idx = np.flatnonzero(known)
    ones = (lab[known] == 1).astype(float)
    cands = list(range(1, min(defs.MAX_PATTERN, n // MIN_PERIODS) + 1))
    # long messages (100, 500 transfers): the spacings of the rarer label
    rarer = idx[ones == (1.0 if ones.mean() < 0.5 else 0.0)]
    if len(rarer) >= MIN_PERIODS:
        vals, cnt = np.unique(np.diff(rarer), return_counts=True)
        for v in vals[np.argsort(-cnt)][:3]:
            if defs.MAX_PATTERN < v <= n // MIN_PERIODS:
                cands.append(int(v))
    scores = []
    n1 = ones.sum()
    n0 = nk - n1
    if min(n0, n1) < MIN_PERIODS:
        return None
    if rare:
        q = max(float(n1) / nk, 1.0 / nk)
        n_tests = float(sum(cands))
        for p in cands:
            r = idx % p
            tot = np.bincount(r, minlength=p)
            if tot.min() < MIN_PERIODS:
                continue
            c1 = np.bincount(r, weights=ones, minlength=p)
            # a position holds the rare kind when it is mostly that label AND
            # stalls (the label's background rate q) could not have filled
            # it by chance, over all positions and periods tried
            on = (c1 >= defs.MIN_PURITY * tot) & (_tail(c1, tot, q) * n_tests < 1e-3)
            off_pure = (tot - c1)[~on].sum() >= (1 - defs.SPLIT_MAX_OUTLIER - 0.05) * tot[~on].sum()
            if on.any() and not on.all() and off_pure and _complete(c1, tot, on) and _tight(x, idx, r, on):
                # deviants at "off" positions are stalls, a third population: not misfits
                agree = float((c1[on].sum() + (tot - c1)[~on].sum()) / (tot[on].sum() + (tot - c1)[~on].sum()))
                return p, on.astype(np.int8), agree
        return None
    for p in cands:
        r = idx % p
        tot = np.bincount(r, minlength=p)
        if tot.min() < MIN_PERIODS:
            continue
        c1 = np.bincount(r, weights=ones, minlength=p)
        on = c1 > tot - c1
        # balanced agreement: the mean of both labels' recall under the pattern
        # (plain agreement would let "all the majority label" win on rare labels)
        bal = 0.5 * (c1[on].sum() / n1 + (tot - c1)[~on].sum() / n0)
        scores.append((p, bal, c1, tot, on))
    if not scores:
        return None
    top = max(s[1] for s in scores)
    # the smallest period that does (nearly) as well: a longer one also fits
    # noise, by chance, so allow the misfit as slack
    slack = 0.01 + (1.0 - top)
    for p, bal, c1, tot, on in scores:
        if bal < top - slack or bal < defs.MIN_AGREEMENT or on.all() or not on.any():
            continue
        # each label's residues must be mostly that label
        pur1 = c1[on].sum() / tot[on].sum()
        pur0 = (tot - c1)[~on].sum() / tot[~on].sum()
        if min(pur1, pur0) >= defs.MIN_PURITY and _complete(c1, tot, on):
            agree = float((c1[on].sum() + (tot - c1)[~on].sum()) / nk)
            return p, on.astype(np.int8), agree
    return None


def _tail(k: np.ndarray, n: np.ndarray, q: float) -> np.ndarray:
    """P(X >= k) for X ~ Binomial(n, q), elementwise, exact.

    Hand-written (a log-space sum over a table of log factorials) rather than
    scipy.special.bdtrc: importing scipy.special costs ~0.14 s of every
    `spigap analyze` start-up, more than the analysis of a 20 M-sample
    capture; the counts here are at most the grouping window (16k gaps) and
    there are at most a few hundred of them, so the sums are cheap.
    tests/test_grouping_calibration.py checks it against scipy."""
    k, n = np.broadcast_arrays(np.rint(np.asarray(k)).astype(np.int64), np.asarray(n).astype(np.int64))
    out = np.ones(k.shape)
    if not k.size:
        return out
    lf = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, max(int(n.max()), 1) + 1)))])
    for idx in zip(*np.nonzero(k > 0)):
        kk, nn = int(k[idx]), int(n[idx])
        if kk > nn or q <= 0.0:
            out[idx] = 0.0
            continue
        if q >= 1.0:
            continue
        j = np.arange(kk, nn + 1)
        lp = lf[nn] - lf[j] - lf[nn - j] + j * math.log(q) + (nn - j) * math.log1p(-q)
        m = float(lp.max())
        out[idx] = min(1.0, math.exp(m) * float(np.exp(lp - m).sum()))
    return out


def _tight(x, idx, r, on) -> bool:
    """The rare kind is one population: the gaps at its positions spread no
    wider than a population may (a mix of stalls does)."""
    if x is None:
        return True
    v = x[idx[on[r]]]
    return len(v) < 2 or float(np.std(v)) <= defs.SPLIT_MAX_SIGMA


def _complete(c1: np.ndarray, tot: np.ndarray, on: np.ndarray) -> bool:
    """False when some positions of the pattern hold the other label far more
    often than the rest of their label's positions do: the pattern then misses
    positions of a shorter true one (noisy labels at a multiple of the period)."""
    for sel, cnt in ((~on, c1), (on, tot - c1)):
        if not sel.any():
            continue
        q = max(float(cnt[sel].sum()) / max(float(tot[sel].sum()), 1.0), 1e-3)
        if (_tail(cnt[sel], tot[sel], q) * len(on) < 1e-3).any() and (cnt[sel] > 0.3 * tot[sel]).any():
            return False
    return True


def _rare_pattern(g: np.ndarray, sp):
    """A repeating pattern of gaps far off the main population (> 4 of its
    standard deviations, one side at a time), with stalls and the noise left
    unknown. The main population's label is 0 for deviants above it, 1 below."""
    w, m, s = max(sp.comps, key=lambda c: c[0])
    x = np.log(g + 1.0)
    z = (x - m) / s
    for side in (1, -1):
        dev = side * z > 4
        if dev.sum() < MIN_PERIODS or dev.mean() > 0.25:
            continue
        lab = np.full(len(g), -1, np.int8)
        lab[np.abs(z) < 2.5] = 0
        lab[dev] = 1
        found = _pattern(lab[:WINDOW], rare=True, x=x[:WINDOW])
        if found is not None:
            p, pattern, agree = found
            return p, (pattern if side == 1 else 1 - pattern).astype(np.int8), agree
    return None


def _phase_test(g: np.ndarray) -> tuple[int, int, float] | None:
    """Constant N when the lengths overlap: one phase of the gaps differs from
    all others (balanced accuracy of the best threshold >= 0.95, medians more
    than 4 robust SDs and 3 samples apart). Returns (N, phase, score)."""
    w = g[:WINDOW]
    best = None
    for n in range(2, min(16, len(w) // MIN_PERIODS) + 1):
        m = len(w) // n * n
        grid = w[:m].reshape(-1, n)
        meds = median(grid, axis=0)
        phase = int(np.argmax(np.abs(meds - median(meds))))
        s = _score(w, n, phase)
        if s >= 0.95 and (best is None or s > best[2] + 0.01):
            best = (n, phase, s)
    return best


def _score(g: np.ndarray, n: int, phase: int) -> float:
    is_b = (np.arange(len(g)) - phase) % n == 0
    nb = int(is_b.sum())
    nc = len(g) - nb
    if nb < MIN_PERIODS or nc < 1:
        return 0.0
    b, c = g[is_b], g[~is_b]
    mb, mc = median(b), median(c)
    sc = 1.4826 * median(np.abs(c - mc))
    if abs(mb - mc) <= max(4 * sc, 3.0):
        return 0.0
    order = np.argsort(g, kind="stable")
    sg = g[order]
    ok = np.append(sg[1:] != sg[:-1], False)
    cum_b = np.cumsum(is_b[order])
    k = np.arange(1, len(g) + 1)
    ba = 0.5 * (cum_b / nb + (nc - (k - cum_b)) / nc)
    ba = np.maximum(ba, 1 - ba)[ok]
    return float(ba.max()) if len(ba) else 0.0


# ------------------------------------------------------------------ roles

@dataclasses.dataclass
class _Reading:
    label: int            # the population (0 shorter, 1 longer) that ends messages
    lengths: list
    first_start: int


def _readings(pattern: np.ndarray) -> dict:
    out = {}
    for lab in (0, 1):
        lengths, first = defs.message_lengths_from_labels([bool(x == lab) for x in pattern.tolist()])
        out[lab] = _Reading(lab, lengths, first)
    return out


def _constant(lengths: list) -> int | None:
    return lengths[0] if lengths and len(set(lengths)) == 1 else None


def _fits(lengths: list, allowed) -> bool:
    return bool(lengths) and set(lengths) <= set(allowed)


def _resolve(pattern, g, lead, context_switch, device_lengths, agreement=1.0):
    """(population that ends messages or None, evidence text, confidence key)."""
    rd = _readings(pattern)
    if context_switch in ("longer", "shorter"):
        lab = 1 if context_switch == "longer" else 0
        return lab, f"--context-switch {context_switch}", "given"
    if device_lengths:
        fit = [lab for lab in (0, 1) if _fits(rd[lab].lengths, device_lengths)]
        if len(fit) == 1:
            return fit[0], (f"the device's message shapes ({', '.join(map(str, sorted(device_lengths)))} "
                            "transfers)"), "device"
    if lead is not None and len(g) >= 20 and lead > defs.IDLE_LEAD_FACTOR * float(np.max(g)):
        lab = int(pattern[-1 % len(pattern)])
        return lab, (f"the capture starts in idle ({lead:.0f} samples, longer than any gap) before a "
                     "message"), "idle_start"
    for lab in (0, 1):
        n = _constant(rd[lab].lengths)
        other = _constant(rd[1 - lab].lengths)
        if n is not None and n >= defs.MIN_CONSTANT_N_BY_SHARE and other is None:
            return lab, (f"the share: 1 gap in {n} is {'longer' if lab else 'shorter'}, and with N >= "
                         f"{defs.MIN_CONSTANT_N_BY_SHARE} the context switches are the minority"), "share"
    return None, "", "ambiguous"


# ------------------------------------------------------------------ inference

def infer(gaps_ticks: np.ndarray, *, resolution: float = 1.0, lead: float | None = None, context_switch: str | None = None,
          device_lengths=None, transfers_per_message: int | None = None) -> Grouping:
    """Message grouping of the CS-inactive gaps ``gaps_ticks`` (gap i between
    transfers i and i+1). ``lead``: idle samples before the first CS assert
    (None when the capture starts inside a window). ``context_switch``:
    'longer'/'shorter' from the user. ``device_lengths``: message lengths the
    device's driver uses. ``transfers_per_message``: N from the user."""
    g = np.asarray(gaps_ticks, dtype=float)
    n = len(g)
    if transfers_per_message == 1:
        return _grouping(_all(n, CONTEXT_SWITCH), n=1, confidence=CONFIDENCE["given"], method="user",
                         note="1 transfer per message (given): every CS-inactive gap is a context switch",
                         lengths=[1], structure="given", evidence=["--transfers-per-message 1"])
    if n < 2 * MIN_PERIODS:
        if transfers_per_message:
            return _given_blind(n, transfers_per_message, context_switch)
        return _grouping(_all(n, CONTEXT_SWITCH), n=1, confidence=CONFIDENCE["too_few"], method="auto",
                         note=f"only {n} CS-inactive gap(s): too few to find a message pattern; each "
                              "transfer is counted as its own message, all gaps as context switches",
                         lengths=[1], structure="too few")
    sp = split(g[:WINDOW] if n > WINDOW else g, "log", resolution)
    pat = None
    if sp.verdict in ("two", "unclear"):
        lab = classify(sp, g)
        if transfers_per_message:
            pat = _given_pattern(lab, transfers_per_message)
        else:
            found = _pattern(lab[:WINDOW])
            if found is not None and 0 < int(found[1].sum()) < len(found[1]):
                pat = found
    if pat is None and not transfers_per_message:
        # a rare kind (1 gap in 50) hides among stalls in the histogram; its
        # period does not: gaps far off the main population, on one side
        pat = _rare_pattern(g, sp)
    if pat is None:
        # lengths overlap: a constant N may still show as one phase that differs
        pt = (_phase_test(g) if not transfers_per_message else
              ((transfers_per_message, _phase_of(g, transfers_per_message), 1.0)
               if n >= MIN_PERIODS * transfers_per_message else None))
        if pt is not None:
            nn, phase, _ = pt
            p = np.zeros(nn, np.int8)
            rest = np.delete(g[:len(g) // nn * nn].reshape(-1, nn), phase, axis=1)
            pmed = median(g[(np.arange(n) - phase) % nn == 0])
            longer = pmed > median(rest.ravel())
            p[:] = 0 if longer else 1
            p[phase] = 1 if longer else 0
            pat = (nn, p, 1.0)
            sp_note = "one population by length; one phase of every " + str(nn) + " gaps differs"
        else:
            sp_note = sp.note
    else:
        sp_note = sp.note
    if pat is None:
        if transfers_per_message:
            return _given_blind(n, transfers_per_message, context_switch)
        if sp.verdict == "two" and min(c[0] for c in sp.comps) > defs.SPLIT_MAX_OUTLIER * sum(c[0] for c in sp.comps):
            return _by_length(g, sp, context_switch)
        return _grouping(_all(n, CONTEXT_SWITCH), n=1, confidence=CONFIDENCE["one_population"], method="auto",
                         note=("the CS-inactive gaps are one population" if sp_note == "one population"
                               else f"the CS-inactive gaps are one population ({sp_note})") + " with no repeating "
                              "pattern: each transfer is its own message and every gap a context switch "
                              "(give --transfers-per-message N if the call pattern says otherwise)",
                         lengths=[1], structure="one population",
                         evidence=["one population"])
    period, pattern, agreement = pat
    ends, why, key = _resolve(pattern, g, lead, context_switch, device_lengths, agreement)
    if transfers_per_message and ends is None:
        # the user's N settles the roles when one phase is the odd one out
        odd = [lab for lab in (0, 1) if int((pattern == lab).sum()) == 1]
        if len(odd) == 1 and period >= 3:
            ends, why, key = odd[0], f"--transfers-per-message {period}: one gap in {period} differs", "given"
    rd = _readings(pattern)
    lab_full = pattern[np.arange(n) % period]
    if ends is None:
        kinds = np.where(lab_full == 1, CLASS_B, CLASS_A).astype(np.int8)
        a, b = rd[0], rd[1]
        settle = _settle(pattern, rd)
        note = (f"two kinds of CS-inactive gap in a repeating pattern ({sp_note}), but nothing tells which "
                f"is the context switch: if the longer gaps (class B) end messages, "
                f"{defs.describe_lengths(b.lengths)}; if the shorter ones (class A) do, "
                f"{defs.describe_lengths(a.lengths)}. Both are labelled cs_change|context_switch; "
                f"{settle} settles it")
        same_n = _constant(a.lengths) if _constant(a.lengths) == _constant(b.lengths) else None
        return _grouping(kinds, n=same_n, confidence=CONFIDENCE["ambiguous"], method="auto", note=note,
                         lengths=[], ambiguous=True, settle=settle, structure="pattern", evidence=[])
    r = rd[ends]
    kinds = np.where(lab_full == ends, CONTEXT_SWITCH, CS_CHANGE).astype(np.int8)
    conf = CONFIDENCE[key]
    if key != "given" and agreement < defs.MIN_CLEAN_AGREEMENT:
        # a noisy pattern may be a multiple of the true one with positions missed
        conf = min(conf, CONFIDENCE["ambiguous"])
        why += (f"; but only {100 * agreement:.0f} % of the gaps follow the pattern, so it may be wrong "
                f"(give --transfers-per-message N)")
    nconst = _constant(r.lengths)
    phase = (r.first_start - 1) % nconst if nconst else 0
    rel = "longer" if ends == 1 else "shorter"
    method = {"given": "user", "device": "device"}.get(key, "auto")
    note = (f"{defs.describe_lengths(r.lengths)}: the {rel} CS-inactive gaps end messages "
            f"(evidence: {why}; {sp_note})")
    return _grouping(kinds, n=nconst, phase=phase, confidence=conf, method=method, note=note,
                     lengths=r.lengths, first_start=r.first_start, evidence=[why], structure="pattern")


def _distribution(ends: np.ndarray) -> str:
    """'lengths 1 (40 %), 2 (60 %)': how many transfers the messages between the boundaries hold."""
    idx = np.flatnonzero(ends)
    runs = np.diff(idx)
    if len(runs) == 0:
        return "no whole message"
    v, c = np.unique(runs, return_counts=True)
    top = np.argsort(-c)[:4]
    return "messages of " + ", ".join(f"{int(v[i])} ({100 * c[i] / len(runs):.0f} %)" for i in top) + \
        (" transfers" if len(v) <= 4 else " transfers, and others")


def _by_length(g: np.ndarray, sp, context_switch) -> Grouping:
    """Two populations of clearly different length but no repeating pattern
    (an IRQ thread's irregular mix): labels by length; which kind is the
    context switch only when the user says so."""
    lab = g > sp.threshold
    dist = {True: _distribution(lab), False: _distribution(~lab)}
    if context_switch in ("longer", "shorter"):
        ends = lab if context_switch == "longer" else ~lab
        kinds = np.where(ends, CONTEXT_SWITCH, CS_CHANGE).astype(np.int8)
        conf = max(0.0, 1.0 - 10 * sp.expected_error)     # not on the grid: the split's own error estimate
        return _grouping(kinds, confidence=conf, method="user",
                         note=f"no repeating pattern; by length (the {context_switch} gaps end messages, given): "
                              f"{dist[context_switch == 'longer']} ({sp.note})",
                         structure="by length", evidence=[f"--context-switch {context_switch}"])
    kinds = np.where(lab, CLASS_B, CLASS_A).astype(np.int8)
    settle = "--context-switch longer|shorter (or a kernel trace)"
    return _grouping(kinds, confidence=CONFIDENCE["ambiguous"], method="auto",
                     note=f"two kinds of CS-inactive gap ({sp.note}) with no repeating pattern: if the longer "
                          f"ones (class B) end messages, {dist[True]}; if the shorter ones (class A) do, "
                          f"{dist[False]}. Both are labelled cs_change|context_switch; {settle} settles it",
                     ambiguous=True, settle=settle, structure="by length")


def _settle(pattern, rd) -> str:
    a, b = rd[0], rd[1]
    na, nb = _constant(a.lengths), _constant(b.lengths)
    n = nb or na
    tpm = f"--transfers-per-message {n} " if n and (na is None or nb is None or na == nb) else ""
    return f"{tpm}--context-switch longer|shorter (or a kernel trace)"


def _phase_of(g: np.ndarray, n: int) -> int:
    m = len(g) // n * n
    meds = median(g[:m].reshape(-1, n), axis=0)
    return int(np.argmax(np.abs(meds - median(meds))))


def _given_pattern(lab: np.ndarray, n: int):
    """The pattern of period n (the user's N) from the labels, when it holds."""
    known = lab >= 0
    if int(known.sum()) < MIN_PERIODS * n:
        return None
    r = np.flatnonzero(known) % n
    tot = np.bincount(r, minlength=n)
    c1 = np.bincount(r, weights=(lab[known] == 1).astype(float), minlength=n)
    pattern = (c1 > tot - c1).astype(np.int8)
    agree = float(np.maximum(c1, tot - c1).sum()) / max(int(known.sum()), 1)
    if agree < defs.MIN_AGREEMENT or pattern.min() == pattern.max():
        return None
    return n, pattern, agree


def _given_blind(n_gaps: int, n: int, context_switch) -> Grouping:
    """The user's N with no structure in the data: assume the capture starts with a message."""
    kinds = np.where((np.arange(n_gaps) - (n - 1)) % n == 0, CONTEXT_SWITCH, CS_CHANGE).astype(np.int8)
    return _grouping(kinds, n=n, phase=n - 1, confidence=0.5, method="user",
                     note=f"{n} transfers per message (given); the gaps do not show where messages start, "
                          "assuming the capture starts with a message", lengths=[n], structure="given",
                     evidence=[f"--transfers-per-message {n}"])


def extend(g: Grouping, n_gaps: int, first: int, gaps_ticks: np.ndarray | None = None, **infer_kw) -> Grouping:
    """The grouping of gaps ``first`` .. ``first + n_gaps - 1`` of the capture
    whose first gaps gave ``g`` (spigap monitor measures a stream batch by
    batch with the structure of its start). A repeating structure (a constant
    N or a pattern of message lengths, its kinds periodic from gap 0) or one
    population carries over as it is; anything else is inferred anew on the
    batch's own gaps (``gaps_ticks``, with ``infer``'s keywords)."""
    period = int(sum(g.lengths)) if g.lengths else 0
    if g.structure == "one population" and len(g.kinds):
        kinds = _all(n_gaps, int(g.kinds[0]))
    elif period and len(g.kinds) >= period:
        kinds = g.kinds[(first + np.arange(n_gaps)) % period]
    elif gaps_ticks is not None:
        return infer(gaps_ticks, **infer_kw)
    else:
        kinds = _all(n_gaps, CONTEXT_SWITCH)
    return dataclasses.replace(g, kinds=np.asarray(kinds, np.int8))


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
    return _grouping(kinds, n=nconst, phase=phase, confidence=CONFIDENCE["given"], method="trace",
                     note=f"message boundaries given (trace): {desc}", lengths=lengths[:64],
                     first_start=int(ends[0]) + 1 if len(ends) else 0, evidence=["known message boundaries"],
                     structure="given")
