"""Message boundaries from a kernel trace: the grouping the capture's timing can only infer.

A ``spi_message_start`` or ``spi_message_done`` of the aligned device between two
matched CS windows means a new message begins between them: that gap is a context
switch, the others of the pair are cs_change gaps. This is ground truth (evidence
``trace``, confidence 1.0) for every gap whose two transfers were matched; gaps the
trace does not cover keep the capture's own labels (an ambiguous class takes the label
the covered gaps of that class have), and the answer is only as sure as that part is
(docs/trace.md, docs/gaps.md "CS-inactive gaps").
"""

from __future__ import annotations

import numpy as np

from spigap.core import analysis as an
from spigap.core import grouping as grouping_mod
from spigap.core import stalls
from spigap.core.analysis import Analysis
from spigap.trace import columns as tm
from spigap.trace.align import Alignment, bus_edges

MESSAGE_EVENTS = (tm.SPI_MESSAGE_START, tm.SPI_MESSAGE_DONE)
AMBIGUOUS_WARNING = "message grouping ambiguous"      # core/measure.py's warning line
COVERED = 0.98          # the trace covers this share of the gaps: the whole answer is the trace's


def regroup_from_trace(trace: tm.Trace, al: Alignment, a: Analysis) -> str | None:
    """Label ``a``'s CS-inactive gaps with the trace's message boundaries (``a`` is regrouped
    in place). Returns a note, or None when the trace has no message events."""
    if not a.has_cs or a.n < 2 or al.method != "spi":
        return None
    rows = np.concatenate([trace.rows(n, al.device) for n in MESSAGE_EVENTS])
    if not len(rows):
        return None
    mt = np.sort(al.to_bus(trace.ts[rows]))
    s = bus_edges(a)[tm.BUS_CS_ASSERT]
    s = np.where(np.isnan(s), np.asarray(a.start, float) * a.tick_s, s)
    count = np.searchsorted(mt, s)
    matched = al.matched_mask(a.n)
    known = matched[:-1] & matched[1:]
    boundary = count[1:] > count[:-1]
    if known.sum() == 0:
        return None
    kinds = a.gap_kind[1:]
    cur = (kinds == an.KIND_CONTEXT_SWITCH) | (kinds == an.KIND_IDLE)
    for cls in (an.KIND_CLASS_A, an.KIND_CLASS_B):
        m = kinds == cls
        if m.any():
            kb = boundary[known & m]
            cur[m] = bool(kb.mean() >= 0.5) if len(kb) else cls == an.KIND_CLASS_B
    agree = float(np.mean(cur[known] == boundary[known]))
    own = a.grouping
    final = cur.copy()
    final[known] = boundary[known]
    covered = float(known.mean())
    cov = f"{int(known.sum())} of {a.n - 1} gaps"
    g = grouping_mod.from_boundaries(a.n - 1, np.flatnonzero(final))
    g.evidence = ["trace"] + ([] if covered >= COVERED else [f"the capture's own grouping for the "
                                                             f"{a.n - 1 - int(known.sum())} gaps the trace misses"])
    if covered < COVERED:
        # the rest is inferred: the answer is as sure as the capture's own grouping (or the class majority)
        g.confidence = min(1.0, max(own.confidence, 0.5))
        g.method = "trace+auto"
    g.note = f"{g.note}; the trace covers {cov}"
    an.regroup(a, g)
    # the stall search follows the new gap kinds (its thresholds are per kind)
    a.stalls = stalls.report(a, a.stalls.rule if a.stalls is not None else stalls.StallRule())
    # the capture's own doubt about its grouping is settled: its warning goes
    a.warnings = [w for w in a.warnings if not w.startswith(AMBIGUOUS_WARNING)]
    if own.ambiguous:
        return f"message boundaries from the trace ({cov}) settle the ambiguous grouping: {a.grouping.note}"
    return (f"message boundaries from the trace ({cov}); the capture's own grouping agreed on "
            f"{agree * 100:.1f} % of them")
