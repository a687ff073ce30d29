"""Message grouping: the CS-inactive gaps -> which of them end messages.

docs/gaps.md, "CS-inactive gaps", is the reference:

1. kinds of gap (kinds.py): populations by length, and what their spread shows;
2. structure (pattern.py): the repeating pattern of kinds, or the stretches of
   different patterns when the structure changes mid-capture, or kinds in no order;
3. readings (readings.py): which kinds end messages, weighed by the evidence; one
   reading left is the answer, several an ambiguous answer that names them;
4. confidence: the measured probability that answers of that kind are right
   (calibration.py: their share right on the development cases; LEVELS and
   BASIS_CONFIDENCE only where no kind of answer like it was measured; docs/gaps.md
   "Calibration").
"""

from __future__ import annotations

import numpy as np

from spigap.core.gaprules import defs
from spigap.core.grouping import calibration as cal
from spigap.core.grouping import kinds as kinds_mod
from spigap.core.grouping import pattern as pat
from spigap.core.grouping import readings as rdg
from spigap.core.grouping.readings import kind_name
from spigap.core.grouping.model import (
    CLASS_A,
    CLASS_B,
    CONFIDENCE,
    CONTEXT_SWITCH,
    CS_CHANGE,
    Continuation,
    Grouping,
    Segment,
    all_of,
    make,
    periodic,
)
from spigap.core.quantile import median

MIN_PERIODS = pat.MIN_PERIODS
WINDOW = pat.WINDOW

# The confidence of an automatic answer, by the evidence that singled out its reading
# (readings.decide's basis) and the structure: levels measured on the development
# cases of tests/driver_behaviour.py and on the grid, checked on the held-back cases
# (docs/gaps.md, "Calibration"; ``python tests/grouping_behaviour.py dev|held``).
LEVELS = {
    "busy, with a phase": 0.95,     # busy-wait cs_change + idle start or a change of structure
    "busy": 0.9,                    # busy-wait cs_change (+ the share), nothing against it
    "busy, less sure": 0.75,        # busy-wait, but waits (wide kinds), a mixed kind or a < 1.5 µs kind
    "idle and share": 0.75,         # no busy-wait: the idle start and the share agree
    "by length": 0.3,               # kinds in no order, labelled by length: every overlap is an error
    "other": 0.5,                   # one weaker piece of evidence
    "shift": 0.5,                   # one phase shifted in distribution (pattern.shift_test): measured
}
BASIS_CONFIDENCE = {"one_population+notbusy": 0.5, "one_population": 0.1}
MIXED_TAIL = 5.0       # (p90 - p50) / (p50 - p10) above this: a kind that holds two populations
CLEAN_PATTERN = 0.995  # "busy" alone needs a pattern this many of the gaps follow
NOISY = 0.5            # a pattern fewer than MIN_CLEAN_AGREEMENT of the gaps follow


def infer(gaps_ticks: np.ndarray, *, resolution: float = 1.0, lead: float | None = None,
          context_switch: str | None = None, device_lengths=None, transfers_per_message: int | None = None,
          tick_s: float | None = None) -> Grouping:
    """Message grouping of the CS-inactive gaps ``gaps_ticks`` (gap i between
    transfers i and i+1). ``lead``: idle samples before the first CS assert
    (None when the capture starts inside a window). ``context_switch``:
    'longer'/'shorter' from the user. ``device_lengths``: message lengths the
    device's driver uses. ``transfers_per_message``: N from the user.
    ``tick_s``: seconds per tick (the physical evidence needs lengths in time)."""
    g = np.asarray(gaps_ticks, dtype=float)
    n = len(g)
    if transfers_per_message == 1:
        return make(all_of(n, CONTEXT_SWITCH), n=1, confidence=CONFIDENCE["given"], method="user",
                    note="1 transfer per message (given): every CS-inactive gap is a context switch",
                    lengths=[1], structure="given", evidence=["--transfers-per-message 1"], basis="given",
                    continuation=Continuation(period=1, codes=np.array([CONTEXT_SWITCH], np.int8)))
    if n < 2 * MIN_PERIODS:
        if transfers_per_message:
            return _given_blind(n, transfers_per_message)
        return make(all_of(n, CONTEXT_SWITCH), n=1, confidence=CONFIDENCE["too_few"], method="auto",
                    note=f"only {n} CS-inactive gap(s): too few to find a message pattern; each "
                         "transfer is counted as its own message, all gaps as context switches",
                    lengths=[1], structure="too few", basis="too_few")
    w = g[:WINDOW]
    kd, sp = kinds_mod.find(w, resolution)
    st = _structure(w, kd, sp, transfers_per_message)
    if st is not None and kd.k >= 2 and st.observed is not None:
        st.mixed = bool(kd.mixed)
    if st is None:
        if transfers_per_message:
            return _given_blind(n, transfers_per_message)
        if kd.k >= 2 and _clear_kinds(kd):
            st = _by_length_structure(g, kd)
        else:
            return _one_population(g, w, kd, sp, tick_s, resolution)
    return _resolve(g, st, lead=lead, tick_s=tick_s, resolution=resolution, context_switch=context_switch,
                    device_lengths=device_lengths, transfers_per_message=transfers_per_message)


def _one_population(g, w, kd, sp, tick_s, resolution) -> Grouping:
    """No structure: every transfer its own message. Confident only as far as the gaps'
    spread says they are no busy-wait (cs_change gaps of equal length would look the same)."""
    n = len(g)
    note = kd.note if sp.verdict != "one" or kd.verdict == "cut" else sp.note
    one = kinds_mod.stats(w, len(w), tick_s, resolution)
    busy_like = one.busy_wait or (tick_s is not None and kinds_mod.DEFAULT_CS_CHANGE_S[0] <= one.median * tick_s
                                  <= kinds_mod.DEFAULT_CS_CHANGE_S[1])
    basis = "one_population" if busy_like or not tick_s else "one_population+notbusy"
    keys = cal.keys(basis, 1, [one.median], "clean", "one population")
    measured = cal.share(keys)
    why = ("" if basis == "one_population" else
           f"; they are no cs_change busy-wait ({kind_name(one, tick_s)}, spread {100 * one.spread:.1f} %)")
    conf = cal.stated(measured) if measured is not None else BASIS_CONFIDENCE[basis]
    basis = keys[0]
    return make(all_of(n, CONTEXT_SWITCH), n=1, confidence=conf,
                method="auto",
                note=("the CS-inactive gaps are one population" if note == "one population"
                      else f"the CS-inactive gaps are one population ({note})") + " with no repeating "
                     "pattern: each transfer is its own message and every gap a context switch"
                     + why + " (give --transfers-per-message N if the call pattern says otherwise)",
                lengths=[1], structure="one population", evidence=["one population" + why],
                basis=basis, gap_kinds=[one.as_dict(tick_s or 1.0)],
                continuation=Continuation(period=1, codes=np.array([CONTEXT_SWITCH], np.int8)))


# ------------------------------------------------------------------ structure

def _structure(w: np.ndarray, kd, sp, tpm) -> rdg.Structure | None:
    """The repeating structure of the window's gaps, or None."""
    n = len(w)
    if kd.k >= 2:
        lab = kd.labels
        if tpm:
            found = _given_pattern(_two(lab, kd), tpm)
            if found is not None:
                return rdg.Structure("pattern", 2, [pat.aligned(found, 0, n)], None, kd.note, found[2],
                                     observed=_two(lab, kd))
        else:
            for k, labels in ((kd.k, lab), (2, _two(lab, kd))) if kd.k > 2 else ((2, lab),):
                found = pat.pattern_k(labels, k)
                if found is not None and 0 < int(np.count_nonzero(found[1])) and len(set(found[1].tolist())) == k:
                    st = pat.aligned(found, 0, n)
                    if pat.stationary(labels, st):
                        return rdg.Structure("pattern", k, [st], None, kd.note, found[2], observed=labels)
                segs = pat.segments(labels, k)
                if segs is not None:
                    return rdg.Structure("segments", k, segs, None, kd.note, min(s.agreement for s in segs),
                                         observed=labels)
                if found is not None and len(set(found[1].tolist())) == k:
                    st = pat.aligned(found, 0, n)
                    return rdg.Structure("pattern", k, [st], None, kd.note + "; the pattern does not hold "
                                         "all along", min(found[2], defs.MIN_CLEAN_AGREEMENT - 1e-3),
                                         observed=labels)
    if tpm:
        if n >= MIN_PERIODS * tpm:
            phase = pat.phase_of(w, tpm)
            p = pat.phase_pattern(w, tpm, phase)
            return rdg.Structure("pattern", 2, [pat.Stretch(0, n, tpm, p, 1.0)], None,
                                 "one population by length; the given N's odd phase")
        return None
    # a rare kind (1 gap in 50) hides among stalls in the histogram; its period does not
    rare = pat.rare_pattern(w, sp)
    if rare is not None:
        p, pt, agree, lab = rare
        st = pat.aligned((p, pt, agree), 0, n)
        if pat.stationary(lab, st):
            return rdg.Structure("pattern", 2, [st], None, sp.note, agree, observed=lab)
        segs = pat.segments(lab, 2)
        if segs is not None:
            return rdg.Structure("segments", 2, segs, None, sp.note, min(s.agreement for s in segs), observed=lab)
    # lengths overlap: a constant N may still show as one phase that differs
    pt = pat.phase_test(w)
    if pt is not None:
        nn, phase, _ = pt
        p = pat.phase_pattern(w, nn, phase)
        return rdg.Structure("pattern", 2, [pat.Stretch(0, n, nn, p, 1.0)], None,
                             f"one population by length; one phase of every {nn} gaps differs")
    if kd.k < 2 or not _clear_kinds(kd):
        # the answer would be one population (no threshold separates the gaps, or kinds that
        # neither repeat nor each hold 15 %): one phase may still be shifted in distribution
        found = pat.shift_test(w)
        if found is not None:
            nn, phase, z = found
            p = pat.phase_pattern(w, nn, phase)
            return rdg.Structure("pattern", 2, [pat.Stretch(0, n, nn, p, 1.0)], None,
                                 f"one population by length; one phase of every {nn} gaps is shifted "
                                 f"against the others (rank test, z = {z:.1f}, over every period and phase "
                                 "tried)", shift=True)
    return None


def _two(lab: np.ndarray, kd) -> np.ndarray:
    """The labels of the first split only (kinds above the first cut are 1)."""
    if kd.k <= 2:
        return lab
    # kinds are numbered by length; the first split's lower side holds kinds 0..c-1
    c = kd.lower
    return np.where(lab < 0, -1, lab >= c).astype(np.int8)


def _clear_kinds(kd) -> bool:
    """Kinds clear enough to be labelled by length with no pattern: each >= 15 % of the gaps."""
    lab = kd.labels
    share = np.bincount(lab[lab >= 0], minlength=kd.k) / max(int(np.count_nonzero(lab >= 0)), 1)
    return bool(share.min() > defs.SPLIT_MAX_OUTLIER)


def _by_length_structure(g: np.ndarray, kd) -> rdg.Structure:
    w = g[:len(kd.labels)]
    lab = kd.labels
    med = np.array([median(w[lab == j]) for j in range(kd.k)])
    cuts = np.sqrt(med[:-1] * med[1:])           # between neighbours (geometric)
    full = np.searchsorted(cuts, g, side="left").astype(np.int8)
    known = np.concatenate([lab, np.full(len(g) - len(lab), -1, np.int8)])
    full = np.where(known >= 0, known, full).astype(np.int8)
    return rdg.Structure("by length", kd.k, [], full, kd.note, observed=lab, cuts=cuts)


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


def _given_blind(n_gaps: int, n: int) -> Grouping:
    """The user's N with no structure in the data: assume the capture starts with a message."""
    kinds = np.where((np.arange(n_gaps) - (n - 1)) % n == 0, CONTEXT_SWITCH, CS_CHANGE).astype(np.int8)
    return make(kinds, n=n, phase=n - 1, confidence=0.5, method="user",
                note=f"{n} transfers per message (given); the gaps do not show where messages start, "
                     "assuming the capture starts with a message", lengths=[n], structure="given",
                evidence=[f"--transfers-per-message {n}"], basis="given_blind",
                continuation=periodic(kinds, n))


# ------------------------------------------------------------------ kinds' statistics

def _expected(st: rdg.Structure, n: int) -> np.ndarray:
    """Every gap's kind under the structure (the window's length ``n`` and beyond)."""
    if st.how == "by length":
        assert st.labels is not None
        return st.labels[:n]
    out = np.empty(n, np.int8)
    bounds = [s.start for s in st.stretches[1:]]
    pos = 0
    for i, s in enumerate(st.stretches):
        end = bounds[i] if i < len(bounds) else n
        out[pos:end] = s.kinds(pos, end - pos)
        pos = end
    return out


def _stats(w: np.ndarray, st: rdg.Structure, observed: np.ndarray | None, tick_s, resolution) -> list:
    exp = _expected(st, len(w))
    out = []
    for j in range(st.k):
        sel = exp == j
        if observed is not None:
            agree = sel & (observed == j)
            if agree.sum() >= max(3, 0.5 * sel.sum()):
                sel = agree              # stalls (and mislabels) out of the spread
        out.append(kinds_mod.stats(w[sel], len(w), tick_s, resolution))
    # the share is of the gaps the structure gives the kind
    for j, s in enumerate(out):
        s.share = float(np.mean(exp == j)) if len(exp) else 0.0
    return out


# ------------------------------------------------------------------ readings -> grouping

def _resolve(g, st: rdg.Structure, *, lead, tick_s, resolution, context_switch, device_lengths,
             transfers_per_message) -> Grouping:
    n = len(g)
    w = g[:WINDOW]
    stats = _stats(w, st, st.observed, tick_s, resolution)
    if any(s.tail is not None and s.tail > MIXED_TAIL for s in stats):
        st.mixed = True
    rd = rdg.readings(st)
    allowed = set(range(len(rd)))
    given = []
    if context_switch in ("longer", "shorter"):
        lab = st.k - 1 if context_switch == "longer" else 0
        keep = {i for i, r in enumerate(rd) if lab in r.ends and (len(r.ends) == 1 or st.k > 2)
                and (context_switch == "longer" or st.k - 1 not in r.ends)}
        allowed &= keep
        given.append(f"--context-switch {context_switch}")
    if transfers_per_message:
        keep = {i for i, r in enumerate(rd) if r.constant == transfers_per_message}
        if keep & allowed:
            allowed &= keep
            given.append(f"--transfers-per-message {transfers_per_message}")
    plausible = {i for i in allowed if rdg.admissible(rd[i], stats)}
    if plausible:
        allowed = plausible
    lead_ok = lead is not None and n >= 20 and lead > defs.IDLE_LEAD_FACTOR * float(np.max(w))
    vs = rdg.votes(st, rd, stats, lead_ok=lead_ok, tick_s=tick_s, device_lengths=device_lengths)
    if transfers_per_message and len(allowed) > 1 and st.how != "by length":
        # the user's N settles the roles when one phase is the odd one out
        odd = [i for i in allowed if len(rd[i].ends) == 1
               and int(np.isin(st.stretches[0].pattern, list(rd[i].ends)).sum()) == 1]
        if len(odd) == 1 and st.stretches[0].period >= 3:
            allowed = set(odd)
            given.append(f"one gap in {transfers_per_message} differs")
    dec = rdg.decide(rd, vs, allowed) if not (given and len(allowed) == 1) else rdg.Decision(next(iter(allowed)), [], [])
    vtext = {v.name: v.text for v in vs}
    gap_kinds = [s.as_dict(tick_s or 1.0) for s in stats]
    medians = [s.median for s in stats]
    tight = all(s.shape() == "tight" for s in stats)
    fitted = cal.fit(st.agreement)
    # a lean is measured among ambiguous answers' leans, loose or not (too few loose ones to measure)
    lean_fit = "clean" if fitted == "clean" else "noisy"
    lean_key = None
    if dec.chosen is None and not given and not st.shift:
        # an ambiguous answer with an "N per message" reading among its readings: that reading is
        # the answer where answers like it measured right 3 times in 4 or more (calibration.py).
        # Not for a shifted phase (pattern.shift_test): a pause every N calls or an spi_async queue
        # shifts one phase just as a message end does, and only evidence of the roles (a busy-wait,
        # the idle start, the share) separates them: the development cases' leans of such answers
        # were right 61 % of the time (63 of 103), 85 % out of fold where their keys said 0.95
        lean = _lean(rd, dec, st, stats)
        if lean is not None:
            votes = "+".join(sorted(dec.basis)) or "none"
            lean_key = _key(f"lean:{votes}", st)
            keys = cal.keys(lean_key, rd[lean].constant, medians, lean_fit, level(lean_key), tight)
            p = cal.share(keys)
            full_lean = keys[0]
            if p is not None and p >= cal.LEAN:
                dec = rdg.Decision(lean, [i for i in dec.candidates if i != lean], dec.basis)
            else:
                dec = rdg.Decision(None, [lean] + [i for i in dec.candidates if i != lean], dec.basis,
                                   dec.conflict)
    report = _readings_report(rd, st, stats, tick_s, dec, vs, allowed)
    if dec.chosen is None:
        return _ambiguous(g, st, rd, stats, dec, tick_s, vtext, gap_kinds, report, given,
                          full_lean if lean_key else None)
    r = rd[dec.chosen]
    calibrated = False
    if given and len(allowed) == 1:
        basis, method, conf = "given", "user", CONFIDENCE["given"]
        why = "; ".join(given)
    else:
        method = "device" if "device" in dec.basis else "auto"
        if lean_key is not None:
            basis = lean_key
            others = [rd[i] for i in dec.candidates]
            why = ("the readings timing allows are " + "; ".join(_label(x, st, stats, tick_s) for x in [r] + others)
                   + f"; {r.describe(st, stats, tick_s)} is the one measured right most often with this evidence ("
                   + ("; ".join(vtext[b] for b in dec.basis) or "the gaps' structure alone") + ")")
        else:
            basis = _key("+".join(sorted(dec.basis)) or "only", st)
            why = "; ".join(vtext[b] for b in dec.basis) or "the only plausible reading"
        conf = _confidence(basis)
        if level(basis) == "busy" and st.agreement < CLEAN_PATTERN:
            # a few gaps off the pattern: a short stretch of another structure may hide there
            conf = min(conf, LEVELS["busy, less sure"])
        keys = cal.keys(basis, r.constant if st.how != "by length" else None, medians,
                        lean_fit if lean_key is not None else fitted, level(basis), tight)
        measured = cal.share(keys)
        # a loose answer's key measured loose answers: its share is its confidence, uncapped
        calibrated = measured is not None and method == "auto" and keys[0].endswith("|loose")
        if measured is not None and method == "auto":
            conf = cal.stated(measured)
        basis = keys[0]
        if given:
            why = "; ".join(given) + "; " + why
    if basis != "given" and st.agreement < defs.MIN_CLEAN_AGREEMENT:
        if not calibrated:
            conf = min(conf, NOISY)      # not measured among loose answers: capped
        why += (f"; but only {100 * st.agreement:.0f} % of the gaps follow the pattern, so it may be wrong "
                f"(give --transfers-per-message N)")
    kinds_full = _kinds(g, st, r.ends)
    segs = _segments(st, r)
    lengths = r.lengths[0] if len(r.lengths) == 1 else []
    nconst = r.constant if st.how != "by length" else None
    first_start = r.firsts[0] if r.firsts else 0
    phase = (first_start - 1) % nconst if nconst else 0
    desc = r.describe(st, stats, tick_s)
    rival = _rival(rd, dec, vs, allowed, st, stats, tick_s)
    note = (f"{desc}: {r.ends_text(stats, tick_s)} (evidence: {why}; {st.note})"
            + (f". Rival reading: {rival}" if rival else ""))
    return make(kinds_full, n=nconst, phase=phase, confidence=conf, method=method if basis != "given" else "user",
                note=note, lengths=lengths, first_start=first_start, evidence=[why], structure=st.how,
                segments=segs, readings=report, rival=rival, gap_kinds=gap_kinds, basis=basis,
                agreement=round(float(st.agreement), 4) if st.how != "by length" else None,
                continuation=_continuation(st, kinds_full, {j: (CONTEXT_SWITCH if j in r.ends else CS_CHANGE)
                                                            for j in range(st.k)}))


def _lean(rd, dec, st: rdg.Structure, stats) -> int | None:
    """Among an ambiguous answer's readings, the one "N per message" reading (one kind, the
    rarest, ends messages of a constant N >= 2), if there is exactly one."""
    if st.how == "by length" or st.k < 2:
        return None
    rare = int(np.argmin([s.share for s in stats]))
    found = [i for i in dec.candidates if rd[i].ends == frozenset([rare]) and (rd[i].constant or 0) >= 2]
    return found[0] if len(found) == 1 else None


def _key(basis: str, st: rdg.Structure) -> str:
    """The kind of answer: the evidence that singled it out, and what makes it less sure."""
    return (basis + ("+segments" if st.how == "segments" else "") + ("+bylength" if st.how == "by length" else "")
            + ("+mixed" if st.mixed else "") + ("+shift" if st.shift else ""))


def level(key: str) -> str:
    """The calibration level of an answer's kind (``_key``; a calibration key's features after "|"
    are not evidence)."""
    if key.startswith("lean:"):
        return "lean"
    parts = set(key.split("|")[0].split("+"))
    if "shift" in parts:      # a structure of its own kind: measured apart from every other answer
        return "shift"
    if "bylength" in parts:
        return "by length"
    if "busy" in parts:
        if parts & {"mixed", "short"} or ("wide" in parts and not parts & {"idle", "segments"}):
            return "busy, less sure"
        return "busy, with a phase" if parts & {"idle", "segments"} else "busy"
    if {"idle", "share"} <= parts and "mixed" not in parts:
        return "idle and share"
    return "other"


def _confidence(key: str, default: float | None = None) -> float:
    if key in BASIS_CONFIDENCE:
        return BASIS_CONFIDENCE[key]
    if default is not None:
        return default
    if key.startswith("lean:"):
        return LEVELS["other"]
    conf = LEVELS[level(key.replace("device+", "").replace("+device", ""))]
    if "device" in key:
        return min(CONFIDENCE["device"], conf)
    return conf


def _kinds(g: np.ndarray, st: rdg.Structure, ends) -> np.ndarray:
    exp = _full_kinds(g, st)
    return np.where(np.isin(exp, list(ends)), CONTEXT_SWITCH, CS_CHANGE).astype(np.int8)


def _full_kinds(g: np.ndarray, st: rdg.Structure) -> np.ndarray:
    n = len(g)
    if st.how == "by length":
        assert st.labels is not None
        return st.labels
    return _expected(st, n)


def _segments(st: rdg.Structure, r: rdg.Reading) -> list:
    if st.how == "by length":
        return []
    out = []
    for i, (s, lengths, first) in enumerate(zip(st.stretches, r.lengths, r.firsts)):
        # gap j lies between transfers j and j + 1: a stretch of gaps s..e-1 holds transfers s..e-1
        # (its last transfer's gap after it is the next stretch's first)
        start = 0 if i == 0 else s.start
        end = None if i == len(st.stretches) - 1 else s.end - 1
        out.append(Segment(start, end, lengths, first))
    return out


def _continuation(st: rdg.Structure, kinds: np.ndarray, code: dict) -> Continuation:
    if st.how == "by length":
        return Continuation(cuts=st.cuts, by_length=np.array([code[j] for j in range(st.k)], np.int8))
    last = st.stretches[-1]
    codes = np.array([code[int(x)] for x in last.pattern.tolist()], np.int8)
    return Continuation(period=last.period, codes=codes)


def _label(r: rdg.Reading, st, stats, tick_s) -> str:
    return f"{r.describe(st, stats, tick_s)} ({r.ends_text(stats, tick_s)})"


def _readings_report(rd, st, stats, tick_s, dec, vs, allowed) -> list:
    out = []
    for i, r in enumerate(rd):
        if i == dec.chosen:
            status = "chosen"
        elif i in dec.candidates:
            status = "rival"
        elif i not in allowed:
            status = "excluded"
        else:
            status = "ruled out"
        against = [v.name for v in vs if i not in v.supports]
        out.append({"reading": _label(r, st, stats, tick_s), "ends": sorted(r.ends),
                    "transfers_per_message": r.constant if st.how != "by length" else None,
                    "message_lengths": [list(x) for x in r.lengths], "status": status, "against": against})
    return out


def _rival(rd, dec, vs, allowed, st, stats, tick_s) -> str | None:
    """The reading that comes closest to the chosen one (ruled out by the fewest votes), and what ruled it out."""
    best = None
    for i, r in enumerate(rd):
        if i == dec.chosen or i not in allowed:
            continue
        against = [v for v in vs if i not in v.supports]
        if best is None or len(against) < len(best[1]):
            best = (r, against)
    if best is None:
        return None
    r, against = best
    names = {"busy": "the busy-wait", "short": "the sub-1.5 µs gaps", "wide": "the waits", "idle": "the idle start",
             "share": "the share", "device": "the device's shapes"}
    return (f"{_label(r, st, stats, tick_s)}, ruled out by "
            f"{', '.join(names.get(v.name, v.name) for v in against) or 'nothing'}"
            f"; a kernel trace or --transfers-per-message settles it")


def _settle(cands: list, st: rdg.Structure) -> str:
    opts = []
    for r in cands:
        n = r.constant if st.how != "by length" else None
        if n and f"--transfers-per-message {n}" not in opts:
            opts.append(f"--transfers-per-message {n}")
    if st.k == 2:
        opts.append("--context-switch longer|shorter")
    opts.append("a kernel trace (spigap trace with spi_message_* events)")
    return " or ".join(opts) if len(opts) <= 2 else ", ".join(opts[:-1]) + " or " + opts[-1]


def _ambiguous(g, st, rd, stats, dec, tick_s, vtext, gap_kinds, report, given, lean_key=None) -> Grouping:
    cands = [rd[i] for i in dec.candidates] or rd
    exp = _full_kinds(g, st)
    # gaps every rival reading labels alike keep that label; the others are classes A/B
    agree_end = [j for j in range(st.k) if all(j in r.ends for r in cands)]
    agree_in = [j for j in range(st.k) if all(j not in r.ends for r in cands)]
    undecided = [j for j in range(st.k) if j not in agree_end and j not in agree_in]
    code = {j: CONTEXT_SWITCH for j in agree_end}
    code.update({j: CS_CHANGE for j in agree_in})
    for rank, j in enumerate(undecided):
        code[j] = CLASS_A if rank == 0 else CLASS_B
    kinds = np.array([code[j] for j in range(st.k)], np.int8)[exp]
    settle = _settle(cands, st)
    texts = [f"{r.describe(st, stats, tick_s)} if {r.ends_text(stats, tick_s).replace('end messages', 'do')}"
             .replace("if every CS-inactive gap ends a message", "if every gap ends a message (the longer ones "
                      "being pauses between calls)") for r in cands]
    why = ""
    if dec.conflict:
        why = " (the evidence disagrees: " + "; ".join(vtext[b] for b in dec.basis if b in vtext) + ")"
    elif dec.basis:
        why = " (evidence that narrowed it down: " + "; ".join(vtext[b] for b in dec.basis if b in vtext) + ")"
    head = ("two kinds of CS-inactive gap" if st.k == 2 else f"{st.k} kinds of CS-inactive gap")
    where = {"pattern": "in a repeating pattern", "segments": "in a pattern that changes mid-capture",
             "by length": "with no repeating pattern"}[st.how]
    shapes = "" if dec.conflict or "busy" in dec.basis else f"; {rdg.spreads(stats, tick_s)}"
    note = (f"{head} {where} ({st.note}), but timing alone cannot tell which of them end messages{why}{shapes}: "
            + "; or ".join(texts)
            + f". Gaps the readings disagree on are labelled cs_change|context_switch; {settle} settles it")
    consts = {r.constant for r in cands} if st.how != "by length" else {None}
    same_n = consts.pop() if len(consts) == 1 else None
    rival = "; or ".join(texts[1:]) if len(texts) > 1 else None
    rival_kinds = [np.where(np.isin(exp, list(r.ends)), CONTEXT_SWITCH, CS_CHANGE).astype(np.int8) for r in cands]
    return make(kinds, n=same_n, confidence=CONFIDENCE["ambiguous"], method="user" if given else "auto", note=note,
                rival_kinds=rival_kinds,
                lengths=[], ambiguous=True, settle=settle, structure=st.how, evidence=[],
                segments=_segments(st, cands[0]) if st.how == "segments" else [],
                readings=report, rival=rival, gap_kinds=gap_kinds,
                # the lean reading (first of the rivals) and its calibration key, for measuring it
                basis="ambiguous" + (f"|{lean_key}" if lean_key and dec.candidates else ""),
                continuation=_continuation(st, kinds, code))
