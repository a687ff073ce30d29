"""What every aligner returns, and the bus edges it maps trace events onto.

``Alignment``: the trace clock on the bus clock (``bus = offset_s + (1 +
drift_ppm * 1e-6) * trace``, kept as ``a + b * (trace - t0)``, t0 the first
matched anchor, for precision), how well the two matched, and the matched
pairs. ``bus_edges()``: each transfer's CS and SCLK edges in seconds.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from spigap.core.analysis import Analysis
from spigap.trace import columns as tm


@dataclasses.dataclass
class Alignment:
    """How a trace maps onto the bus clock, and how well it matched."""

    method: str                   # "spi" (SPI events), "sync-channel", "userlog"
    device: str | None            # spi0.0; for sync-channel: the GPIO; userlog: the column
    anchor: str                   # the trace event used as anchor
    bus_anchor: str               # the bus edge it was matched to
    t0: float                     # trace time of the first matched anchor
    a: float                      # bus time at t0 (zero point applied)
    b: float                      # bus seconds per trace second
    matched: int
    unmatched_trace: int          # trace anchors inside the capture's span that matched nothing
    unmatched_bus: int            # bus anchors inside the trace's span that matched nothing
    residual_p50_s: float         # |residual| of matched anchors around their median
    residual_p99_s: float
    tolerance_s: float            # the match tolerance used
    zero_point: str               # how the offset's zero was fixed (docs/trace.md)
    offset_uncertainty_s: float | None
    payload_checked: int = 0      # matched windows whose traced tx/rx bytes were compared with MOSI/MISO
    payload_agree: int = 0
    # matched pairs: trace anchor row (index into the Trace) -> bus transfer index
    trace_rows: np.ndarray = dataclasses.field(default_factory=lambda: np.empty(0, np.int64), repr=False)
    bus_index: np.ndarray = dataclasses.field(default_factory=lambda: np.empty(0, np.int64), repr=False)
    residuals: np.ndarray = dataclasses.field(default_factory=lambda: np.empty(0), repr=False)
    notes: list[str] = dataclasses.field(default_factory=list)

    @property
    def offset_s(self) -> float:
        """bus_time = offset_s + (1 + drift_ppm * 1e-6) * trace_time."""
        return self.a - self.b * self.t0

    @property
    def drift_ppm(self) -> float:
        return (self.b - 1.0) * 1e6

    def matched_mask(self, n: int) -> np.ndarray:
        """Per bus transfer (``n`` of them): whether a trace window was matched to it."""
        m = np.zeros(n, bool)
        m[self.bus_index] = True
        return m

    def to_bus(self, ts) -> np.ndarray:
        """Trace times -> bus seconds."""
        return self.a + self.b * (np.asarray(ts, float) - self.t0)

    def to_dict(self) -> dict:
        return {"method": self.method, "device": self.device, "anchor": self.anchor, "bus_anchor": self.bus_anchor,
                "offset_s": self.offset_s, "drift_ppm": self.drift_ppm, "matched": self.matched,
                "unmatched_trace": self.unmatched_trace, "unmatched_bus": self.unmatched_bus,
                "residual_p50_s": self.residual_p50_s, "residual_p99_s": self.residual_p99_s,
                "tolerance_s": self.tolerance_s, "zero_point": self.zero_point,
                "offset_uncertainty_s": self.offset_uncertainty_s,
                "payload_checked": self.payload_checked, "payload_agree": self.payload_agree}


def bus_edges(a: Analysis) -> dict[str, np.ndarray]:
    """Bus edge times in seconds per transfer (NaN where unavailable)."""
    tick = a.tick_s
    starts = np.asarray(a.start, float) * tick
    starts[np.asarray(a.partial_start, bool)] = np.nan
    ends = np.asarray(a.end, float) * tick
    ends[np.asarray(a.partial_end, bool)] = np.nan
    return {tm.BUS_CS_ASSERT: starts, tm.BUS_FIRST_SCLK: np.asarray(a.first_edge, float) * tick,
            tm.BUS_LAST_SCLK: np.asarray(a.last_edge, float) * tick, tm.BUS_CS_DEASSERT: ends}
