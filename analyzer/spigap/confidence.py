"""A confidence in words a user acts on, beside the number: the one mapping.

A confidence is a measured probability (docs/gaps.md, "Calibration"; docs/inference.md),
but 0.10 alone reads as "probably wrong", and what a user does next depends on why it is
low: an answer nobody can give from the timing (two readings fit: a trace or an option
settles it) is not a wrong answer. So every confidence spigap prints carries one of a
small fixed vocabulary, chosen from the number and its basis (what produced it), the
same in text, JSON (``confidence_words``), the report, detect and batch:

====================  =================================================================
words                 when
====================  =================================================================
given                 the user said so (an option), or the capture's own files did
                      (saved decoder settings, channel names): not measured
settled by the trace  a kernel trace's message boundaries
settled by the        measured: answers of this kind are right at least 95 % of the
signals               time (confidence >= 0.95)
likely                measured: right about 3 in 4 to 19 in 20 (0.75 .. 0.95)
ambiguous: two        the timing fits two readings (or more: "several readings") and the
readings              answer says which; a trace or an option settles it (so do a setting's
                      signals: two lines bracketing the same bursts, --cs settles it). A one-
                      population grouping whose gaps look like the cs_change busy-wait
                      is one (every transfer its own call, or one call with cs_change
                      between its transfers): its 0.05 is how often the first reading
                      was the truth on our calibration family, not a verdict on this
                      capture
uncertain             measured, below 0.75, one reading: check it (give the option)
unknown               nothing measured it: a default (bit order: the wires cannot tell),
                      or too few gaps to see a pattern
====================  =================================================================
"""

from __future__ import annotations

GIVEN = "given"
BY_TRACE = "settled by the trace"
SETTLED = "settled by the signals"
LIKELY = "likely"
TWO_READINGS = "ambiguous: two readings"
SEVERAL_READINGS = "ambiguous: several readings"
UNCERTAIN = "uncertain"
UNKNOWN = "unknown"
READINGS = (TWO_READINGS, SEVERAL_READINGS)     # the timing fits more than one answer: a trace settles it

# the levels' measured shares right, held back (docs/gaps.md and docs/inference.md, "Calibration"):
# grouping 0.95: 98.3 %, 0.75: 89.6 %, 0.65: 66.4 %, 0.3: 23 %, 0.05: 7.7 %; settings at 0.80-0.90
# (sigrok-dumps' held-out half): 67-100 %. Below 0.75 no answer is "likely": "uncertain" says check it
SURE = 0.95          # at or above: settled
PROBABLE = 0.75      # at or above: likely

# a grouping's basis whose gaps are one population that looks like the cs_change busy-wait
# (core/grouping/infer.py): each transfer its own call, or one call with cs_change between them
BUSY_LIKE_ONE_POPULATION = "one_population"


def evidence_of(basis: str) -> str:
    """A grouping basis's evidence, without its calibration key's buckets
    ("one_population|n1|r-|clean" -> "one_population"; core/grouping/calibration.keys)."""
    return basis.split("|", 1)[0]


def stated(confidence: float, words: str) -> str:
    """The number and its words, as every text prints them: ``confidence 0.10, ambiguous: two readings``."""
    return f"confidence {confidence:.2f}, {words}"


def by_number(confidence: float) -> str:
    """The words of a measured confidence with nothing else known about it."""
    if confidence >= SURE:
        return SETTLED
    if confidence >= PROBABLE:
        return LIKELY
    return UNCERTAIN


def of_source(how: str, confidence: float, readings: int = 1) -> str:
    """The words of a setting's source (core/infer/report.Source: given, name, file,
    inferred, default), its confidence and how many readings it names (a CS beside another
    line that brackets the same bursts: two; an option settles it)."""
    if how in ("given", "name", "file"):
        return GIVEN
    if how == "default":
        return UNKNOWN
    if readings > 1 and confidence < PROBABLE:
        return TWO_READINGS if readings == 2 else SEVERAL_READINGS
    return by_number(confidence)


def of_grouping(g) -> str:
    """The words of a message grouping (core/grouping/model.Grouping): its method, basis,
    readings and confidence."""
    method = getattr(g, "method", "")
    basis = getattr(g, "basis", "")
    if method == "user" or basis == "given":
        return GIVEN
    if method == "trace" or basis == "trace":
        return BY_TRACE
    if method == "none":             # no grouping at all (a bus without CS)
        return UNKNOWN
    if getattr(g, "ambiguous", False):
        n = len(getattr(g, "rival_kinds", None) or ()) or 2
        return TWO_READINGS if n <= 2 else SEVERAL_READINGS
    if basis == "too_few":
        return UNKNOWN
    if evidence_of(basis) == BUSY_LIKE_ONE_POPULATION:
        return TWO_READINGS
    c = float(getattr(g, "confidence", 0.0))
    if c < PROBABLE and getattr(g, "rival", None):
        return TWO_READINGS
    return by_number(c)


def messages_in_words(messages: int | None, per_message: int | None, lengths, *, ambiguous: bool = False,
                      stretches: int = 1) -> str:
    """A capture's messages as every text prints them before the grouping's confidence
    (analyze's ``messages`` line, the report's, check's ``capture`` line): ``100 × 10
    transfer(s)``, ``40 of 2+3 transfers`` (a repeating pattern), ``12 in 3 stretches``,
    ``10 of varying length`` (messages told apart by their gaps' lengths, no pattern: the
    note gives the lengths' shares), ``ambiguous``, ``none`` (no transfer: no SPI bus)."""
    if ambiguous:
        return "ambiguous"
    if not messages and per_message is None:
        return "none"
    if stretches > 1:
        return f"{messages} in {stretches} stretches"
    if per_message is not None:
        return f"{messages} × {per_message} transfer(s)"
    if lengths:
        return f"{messages} of {'+'.join(map(str, lengths))} transfers"
    return f"{messages} of varying length"


def grouping_readings(g) -> str | None:
    """The second reading of a busy-like one-population grouping, in words (the first is
    the answer: every transfer its own message), and what settles it; None otherwise."""
    if evidence_of(getattr(g, "basis", "")) != BUSY_LIKE_ONE_POPULATION or getattr(g, "method", "") == "user":
        return None
    return ("or one message whose transfers are separated by cs_change busy-waits (gaps this tight look "
            "like the kernel's udelay(10)); a kernel trace or --transfers-per-message settles it")


def grouping_note(g) -> str:
    """A grouping's note with its second reading, when the answer has one it does not name."""
    more = grouping_readings(g)
    if not more:
        return g.note
    # the second reading names what settles it: the first's own hint goes
    return f"{g.note.replace(' (give --transfers-per-message N if the call pattern says otherwise)', '')}; {more}"
