"""The analysed capture as the checks read it.

* idle gaps: with a profile's ``[analysis] idle_gap``, CS-high gaps longer than
  it (the pauses of event-driven traffic, e.g. 1 ms between CAN frames) are left
  out of the cs_change, context-switch and period figures;
* the one transfer size (words per complete transfer) the timing model needs;
* per-metric values in ticks, and the ± resolution of the measured SCLK.
"""

from __future__ import annotations

import numpy as np

from spigap.core.analysis import KIND_CONTEXT_SWITCH, KIND_CS_CHANGE, Analysis
from spigap.timing.profiles import Profile
from spigap.units import fmt_time


class Measurements:
    def __init__(self, a: Analysis, prof: Profile | None, headroom: float, events: dict):
        self.a, self.headroom, self.events = a, headroom, events
        self.r = a.tick_s
        self.idle_gap = prof.idle_gap if prof is not None else None
        gb = a.gap_before
        cs_kind = (a.gap_kind == KIND_CS_CHANGE) | (a.gap_kind == KIND_CONTEXT_SWITCH)
        if self.idle_gap is not None and a.has_cs:
            self.idle = cs_kind & (gb * a.tick_s > self.idle_gap)
        else:
            self.idle = np.zeros(a.n, bool)
        complete = ~a.partial_start & ~a.partial_end
        nw = a.n_words[complete]
        uniq = np.unique(nw) if len(nw) else np.empty(0, int)
        self.words_per_transfer = int(uniq[0]) if len(uniq) == 1 else None
        self.word_sizes = uniq

    def values(self, metric: str) -> np.ndarray:
        """Per-event values in ticks, idle gaps (profile idle_gap) left out."""
        a = self.a
        if metric in ("cs_change", "context_switch"):
            kind = KIND_CS_CHANGE if metric == "cs_change" else KIND_CONTEXT_SWITCH
            return a.gap_before[(a.gap_kind == kind) & ~self.idle]
        if metric == "transfer_period":
            p = a.period()
            return p[~self.idle[1:]] if len(p) else p
        return a.gap_values(metric)

    def idle_note(self, metric: str) -> str:
        """'; N idle gap(s) > T left out' for the figures that leave them out."""
        if metric in ("cs_change", "context_switch", "transfer_period") and self.idle.any():
            return f"; {int(self.idle.sum())} idle gap(s) > {fmt_time(self.idle_gap)} left out"
        return ""

    def sclk_resolution(self) -> float | None:
        """± of the measured SCLK frequency (Hz).

        T is the mean spacing of sampling edges inside words; inside one word the
        spacings add up to (first → last sampling edge), which is off by < 1
        sample, so their mean is off by < 1 sample / (wordsize − 1).
        """
        a = self.a
        if not a.period_ticks:
            return None
        ws = a.cfg.wordsize
        dT = 1.0 / (ws - 1) if ws > 1 else 1.0              # ticks
        f = a.sclk_hz
        if f is None:
            return None
        return f * dT / a.period_ticks
