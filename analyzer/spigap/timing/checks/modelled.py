"""Transfer time and transfer rate against the timing model (docs/timing-model.md).

``[expect.transfer_duration]`` / ``[expect.transfer_rate]`` with ``model = true``
take the expected figure from the profile's TimingModel for the capture's own
transfer size and transfers per message; with a value they are checked like any
figure. Both need one transfer size in the capture; the rate also needs one
message length, a [timing] cs_change for messages of several transfers, and
back-to-back traffic (no idle gaps).
"""

from __future__ import annotations

import numpy as np

from spigap.timing.checks.expectations import note
from spigap.timing.checks.judging import SKIP, Item, judged
from spigap.timing.checks.measurements import Measurements
from spigap.timing.model import TimingModel
from spigap.timing.profiles import Expectation, Profile
from spigap.units import fmt_time


def check_modelled(m: Measurements, prof: Profile, metric: str, ex: Expectation) -> list[Item]:
    base: dict = dict(group="model", metric=metric, unit="s" if metric == "transfer_duration" else "1/s",
                source=ex.source, assumed=ex.assumed, unverified=ex.unverified)
    stat = "p50" if metric == "transfer_duration" else "value"
    words = m.words_per_transfer
    if words is None:
        fig: tuple | str = (("windows differ in size (" + ", ".join(str(int(w)) for w in m.word_sizes[:6])
                             + " words): the model needs one transfer size") if len(m.word_sizes)
                            else "no complete transfers")
    elif metric == "transfer_duration":
        fig = _duration(m, prof.model(), ex, words)
    else:
        fig = _rate(m, prof, prof.model(), ex, words)
    if isinstance(fig, str):
        return [Item(id=f"model.{metric}", statistic=stat, verdict=SKIP, reason=fig, **base)]
    measured, expected, res, n, extra = fig
    lo, hi = ex.band(expected)
    return [judged(f"model.{metric}", stat, measured, expected, lo, hi, res, n, m.headroom,
                   extra=extra + note(ex), **base)]


def _duration(m: Measurements, model: TimingModel, ex: Expectation, words: int) -> tuple | str:
    """Median CS window against T_transfer − T/2 (setup and hold end at SCLK edges):
    (measured, expected, resolution, n, reason suffix), or why it cannot be checked."""
    a = m.a
    expected = ex.p50 if not ex.model else model.capture_transfer_time(words)
    v = a.gap_values("transfer_duration")
    v = v[~np.isnan(v)]
    if len(v) == 0:
        return "no complete transfers"
    measured = float(np.percentile(v, 50)) * a.tick_s
    return measured, expected, m.r, len(v), f"; model: {words} words, T_transfer − T/2 (edges)"


def _rate(m: Measurements, prof: Profile, model: TimingModel, ex: Expectation, words: int) -> tuple | str:
    """Transfers per second against the model's rate for N transfers per message as
    found in the capture; the span of the starts is off by < 1 sample."""
    a = m.a
    n_msg = a.grouping.transfers_per_message
    if m.idle.any():
        return (f"{int(m.idle.sum())} idle gap(s) > {fmt_time(prof.idle_gap)}: the traffic is "
                "event-driven, so the back-to-back rate model does not apply")
    if n_msg is None:
        return ("the message grouping is ambiguous (" + (a.grouping.settle or "") + " settles it)"
                if a.grouping.ambiguous else "messages of varying length: the rate model needs one N")
    if n_msg > 1 and "cs_change" not in prof.timing:
        return "the profile has no [timing] cs_change for messages of several transfers"
    rate_hz = a.transfer_rate_hz()
    s = a.start[~a.partial_start]
    if rate_hz is None:
        return "fewer than two transfers"
    expected = ex.p50 if not ex.model else model.rate(words, n_msg, edges=True)
    span = (s[-1] - s[0]) * a.tick_s
    res = rate_hz * a.tick_s / span
    return (rate_hz, expected, res, len(s),
            f"; model: {words} words, {n_msg} transfer(s) per message [{a.grouping.method}]")
