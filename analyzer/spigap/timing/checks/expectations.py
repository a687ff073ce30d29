"""The profile's ``[expect.*]`` figures: p50 and p99 of each gap kind, and SCLK.

A p50 is judged against its band (expected ± tolerance), a p99 against its
bounds (p99_min, p99_max), both with the ±1-sample resolution of an
edge-to-edge figure. A profile without an ``[expect.inter_byte]`` table gets
one derived from its ``[bus]`` (``with_derived``).
"""

from __future__ import annotations

import numpy as np

from spigap.core.analysis import describe
from spigap.timing.checks.judging import SKIP, Item, judged
from spigap.timing.checks.measurements import Measurements
from spigap.timing.profiles import Expectation, Profile
from spigap.units import fmt_clocks, fmt_time

NOTHING_MEASURED = {
    "cs_change": "the capture has no cs_change gaps (one transfer per message?)",
    "inter_transfer": "no inter-transfer gaps (CS never held across a transfer boundary)",
    "inter_byte": "no inter-byte gaps (one word per transfer?)",
}


def with_derived(prof: Profile) -> dict:
    """The profile's expectations, with the inter-byte gap its [bus] implies unless it gives one."""
    expect = dict(prof.expect)
    if "inter_byte" not in expect:
        T = 1.0 / prof.sclk_hz
        expect["inter_byte"] = Expectation(
            "inter_byte", "s",
            source=f"derived from [bus]: (½ + idle_clocks) × T with idle_clocks = "
                   f"{prof.idle_clocks:g}, T = 1/SCLK (docs/gaps.md: raw edge-to-edge word gap)",
            p50=(0.5 + prof.idle_clocks) * T, tolerance=0.25 * T,
            p99_max=(1.5 + prof.idle_clocks) * T,
            note="tolerance ±T/4 and p99 ≤ one extra idle clock are our assumption")
    return expect


def check_gap(m: Measurements, metric: str, ex: Expectation) -> list[Item]:
    """p50 and/or p99 of one gap kind against the profile."""
    a = m.a
    base: dict = dict(group="profile", metric=metric, unit="s", source=ex.source, assumed=ex.assumed,
                unverified=ex.unverified)
    stats = statistics(ex)
    if not a.available(metric):
        return [Item(id=f"{metric}.{stat}", statistic=stat, verdict=SKIP,
                     reason="not measurable without a CS line", **base) for stat in stats]
    v = m.values(metric)
    v = v[~np.isnan(v)]
    if len(v) == 0:
        why = NOTHING_MEASURED.get(metric, "nothing measured")
        return [Item(id=f"{metric}.{stat}", statistic=stat, verdict=SKIP, reason=why, **base)
                for stat in stats]
    d = describe(v, a.tick_s)
    excluded = m.idle_note(metric)
    items = []
    if ex.p50 is not None:
        lo, hi = ex.band(ex.p50)
        items.append(judged(f"{metric}.p50", "p50", d["p50_s"], ex.p50, lo, hi, m.r, len(v), m.headroom,
                            extra=excluded + _idle_clocks(m, metric, d["p50_s"]) + note(ex), **base))
    if ex.p99_min is not None or ex.p99_max is not None:
        items.append(judged(f"{metric}.p99", "p99", d["p99_s"], None, ex.p99_min, ex.p99_max, m.r,
                            len(v), m.headroom, extra=excluded + note(ex), **base))
    return items


def check_sclk(m: Measurements, ex: Expectation) -> list[Item]:
    """The measured SCLK frequency against the profile's [bus] sclk ± sclk_tolerance."""
    a = m.a
    base: dict = dict(group="profile", metric="sclk", unit="Hz", source=ex.source, assumed=ex.assumed,
                unverified=ex.unverified)
    if not a.sclk_hz:
        return [Item(id="sclk.value", statistic="value", verdict=SKIP, reason="no SCLK measured", **base)]
    lo, hi = ex.band(ex.p50)
    return [judged("sclk.value", "value", a.sclk_hz, ex.p50, lo, hi, m.sclk_resolution(),
                   int(len(a.mosi)), m.headroom, extra=note(ex), **base)]


def statistics(ex: Expectation) -> list[str]:
    """The statistics an expectation bounds: p50 (a band), p99 (bounds)."""
    out = []
    if ex.p50 is not None:
        out.append("p50")
    if ex.p99_min is not None or ex.p99_max is not None:
        out.append("p99")
    return out


def note(ex: Expectation) -> str:
    """What the reason adds about the expectation itself: assumed, UNVERIFIED, its note."""
    bits = []
    if ex.assumed:
        bits.append("expected value is our assumption")
    if ex.unverified:
        bits.append("UNVERIFIED")
    if ex.note:
        bits.append(ex.note)
    return ("; " + "; ".join(bits)) if bits else ""


def _idle_clocks(m: Measurements, metric: str, value) -> str:
    if metric == "inter_byte" and m.a.period_ticks:
        T = m.a.period_ticks * m.a.tick_s
        return (f"; = {fmt_clocks((value - T / 2) / T, m.a.period_ticks)} idle clocks at the measured "
                f"T = {fmt_time(T)}")
    return ""
