"""A capture and its kernel trace, aligned and split into phases: what ``spigap compare``
and ``spigap report`` take per (capture, trace) pair (``spigap trace`` prints the same)."""

from __future__ import annotations

import dataclasses

from spigap.core.analysis import Analysis
from spigap.trace import columns as tm
from spigap.trace.align import Alignment
from spigap.trace.phases import Phases

RARE = 0.05           # phases seen in fewer than 5 % of their kind's gaps: lost or stray events


@dataclasses.dataclass
class TracedCapture:
    path: str                   # the trace file
    trace: tm.Trace
    alignment: Alignment
    phases: Phases
    grouping_note: str | None

    def common(self) -> list:
        """The phases seen in at least RARE of their kind's gaps (text and plots show these)."""
        seg = self.phases.segments
        return [p for p in self.phases.phases if p.stats["n"] >= RARE * seg.get(p.gap, 0)]

    def summary(self) -> dict:
        """Trace and alignment in one JSON object (``spigap compare``'s ``traces``)."""
        al = self.alignment
        return {"path": self.path, "source": self.trace.source, "events": len(self.trace),
                "resolution_s": self.trace.resolution_s, "lost_events": self.trace.lost_events,
                "alignment": {**al.to_dict(), "notes": list(al.notes)},
                "grouping": self.grouping_note, "segments": dict(self.phases.segments)}


def load(path, a: Analysis, *, device: str | None = None, cs_latency: float | None = None) -> TracedCapture:
    """Parse the ftrace text ``path``, align it with the analysis ``a`` (its SPI events),
    split every gap into phases (``a``'s grouping takes the trace's message boundaries)."""
    from spigap.trace import align, ftrace, phases

    tr = ftrace.parse(path)
    al = align.align_spi(tr, a, device, cs_latency=cs_latency)
    ph = phases.run(tr, al, a)
    return TracedCapture(str(path), tr, al, ph, ph.grouping_note)
