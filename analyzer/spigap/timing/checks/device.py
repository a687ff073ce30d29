"""A device's datasheet limits (``--device``), checked on every transfer.

A per-transfer limit (CS setup/hold, CS-high time, SCLK half period, transfer
duration/period, CONVST period) FAILs when any value is beyond it by at least one
sample, is MARGINAL when any is within ±1 sample of it, and otherwise is judged
on its worst value; the first violations are listed with their times. SCLK is
judged once, counts (SCLK edges outside CS, bits per CS window) exactly. Limits
that need a CONVST or BUSY channel are skipped without it (``events``).
"""

from __future__ import annotations

import numpy as np

from spigap.timing.checks import events, pins
from spigap.timing.checks.judging import FAIL, FIRST_N, MARGINAL, PASS, SKIP, Item, headroom_abs, judge, judged, nearest_delta
from spigap.timing.checks.measurements import Measurements
from spigap.timing.profiles import LIMIT_METRICS, Device, Limit


def check_device(m: Measurements, dev: Device) -> tuple[list[Item], list[str]]:
    """(items, notes): one item per limit, one note per thing the SPI lines cannot show."""
    items = []
    for lim in dev.limits:
        base: dict = dict(group="device", metric=lim.metric, unit=lim.unit,
                    source=lim.source, unverified=lim.unverified, assumed=bool(lim.assumption))
        iid = f"device.{lim.name}"
        needs = lim.needs
        if needs and needs not in m.events:
            items.append(Item(id=iid, statistic="worst", verdict=SKIP,
                              reason=f"{lim.what}: needs the {needs.upper()} channel (--event "
                                     f"{needs.upper()}:{'rise' if needs == 'convst' else 'fall'})", **base))
        elif lim.metric == "sclk":
            items.append(_sclk(m, lim, iid, base))
        elif lim.metric == "sclk_outside_cs":
            items.append(_count(lim, iid, base, m.a.clk_outside_cs, "SCLK edges while CS inactive"))
        elif lim.metric == "sclk_at_busy_fall":
            items.append(events.busy_read(m, lim, iid, base, limit_note(lim)))
        elif LIMIT_METRICS[lim.metric][1] == "pin":
            items.append(pins.pin_limit(getattr(m.a, "pins", None), lim, iid, base, m.headroom, limit_note(lim)))
        else:
            items.append(_each(m, lim, iid, base))
    notes = [f"{dev.spec}: not checked from the SPI lines: {what}" for what in dev.cannot_check]
    return items, notes


def _sclk(m: Measurements, lim: Limit, iid, base) -> Item:
    a = m.a
    if not a.sclk_hz:
        return Item(id=iid, statistic="value", verdict=SKIP, reason="no SCLK measured", **base)
    return judged(iid, "value", a.sclk_hz, None, lim.min, lim.max, m.sclk_resolution(),
                  int(len(a.mosi)), m.headroom, extra=limit_note(lim), **base)


def _count(lim: Limit, iid, base, count: int, what: str) -> Item:
    lo, hi = lim.min, lim.max
    bad = (lo is not None and count < lo) or (hi is not None and count > hi)
    return Item(id=iid, statistic="count", verdict=FAIL if bad else PASS,
                reason=f"{count} {what}" + limit_note(lim), measured=float(count), low=lo, high=hi,
                delta=nearest_delta(float(count), lo, hi), resolution=0.0, n=1, **base)


def _each(m: Measurements, lim: Limit, iid, base) -> Item:
    """Every value of a per-transfer (or per-conversion) figure against the limit."""
    a = m.a
    vals, at = per_event(m, lim.metric)
    ok = ~np.isnan(vals)
    vals, at = vals[ok], at[ok]
    if len(vals) == 0:
        return Item(id=iid, statistic="worst", verdict=SKIP,
                    reason=f"{lim.what}: nothing measured" + limit_note(lim), **base)
    if lim.metric == "frame_bits":
        return _bits(m, lim, iid, base, vals, at)
    r = 1.0                      # ticks: every value is edge-to-edge
    lo = lim.min / a.tick_s if lim.min is not None else None
    hi = lim.max / a.tick_s if lim.max is not None else None
    margin_each = np.full(len(vals), np.inf)
    if lo is not None:
        margin_each = np.minimum(margin_each, vals - lo)
    if hi is not None:
        margin_each = np.minimum(margin_each, hi - vals)
    eps = 1e-9
    definite = margin_each <= -r + eps
    possible = (~definite) & (margin_each < r - eps)
    worst = int(np.argmin(margin_each))
    hab = headroom_abs(m.headroom, lim.min, lim.max)
    worst_s = float(vals[worst]) * a.tick_s
    verdict, margin, why = judge(worst_s, lim.min, lim.max, a.tick_s, hab)
    nd, npos = int(definite.sum()), int(possible.sum())
    if nd:
        verdict = FAIL
        why = f"{nd} of {len(vals)} beyond the limit by at least one sample (certain violations)"
    elif npos:
        verdict = MARGINAL
        why = (f"{npos} of {len(vals)} within ±1 sample of the limit: cannot be decided at "
               "this sample rate")
    else:
        why = f"all {len(vals)} inside; worst: " + why
    shown = at[definite] if nd else at[possible]
    return Item(id=iid, statistic="worst", verdict=verdict, reason=why + limit_note(lim),
                measured=worst_s, low=lim.min, high=lim.max,
                delta=nearest_delta(worst_s, lim.min, lim.max), margin=margin, resolution=a.tick_s,
                headroom=hab, n=int(len(vals)),
                violations={"count": nd, "possible": npos, "checked": int(len(vals)),
                            "first_s": [float(t) * a.tick_s for t in shown[:FIRST_N]],
                            "worst_s": worst_s, "worst_at_s": float(at[worst]) * a.tick_s},
                **base)


def _bits(m: Measurements, lim: Limit, iid, base, vals, at) -> Item:
    """SCLK bits per complete CS window: a multiple of N and/or within [min, max], exactly."""
    bad = np.zeros(len(vals), bool)
    if lim.multiple_of:
        bad |= (vals % lim.multiple_of) != 0
    if lim.min is not None:
        bad |= vals < lim.min
    if lim.max is not None:
        bad |= vals > lim.max
    nd = int(bad.sum())
    rule = " and ".join(filter(None, [
        f"multiple of {lim.multiple_of}" if lim.multiple_of else "",
        f"≥ {lim.min:g}" if lim.min is not None else "", f"≤ {lim.max:g}" if lim.max is not None else ""]))
    return Item(id=iid, statistic="each", verdict=FAIL if nd else PASS, rule=rule,
                reason=(f"{nd} of {len(vals)} CS windows have a bit count that breaks the limit"
                        if nd else f"all {len(vals)} CS windows fit") + limit_note(lim),
                measured=float(vals[bad][0]) if nd else float(vals[0]), low=lim.min, high=lim.max,
                resolution=0.0, n=int(len(vals)),
                violations={"count": nd, "possible": 0, "checked": int(len(vals)),
                            "first_s": [float(t) * m.a.tick_s for t in at[bad][:FIRST_N]]}, **base)


def per_event(m: Measurements, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """(values in ticks, tick at which each happens) for a per-transfer limit."""
    a = m.a
    if metric == "cs_setup":
        return a.cs_setup.astype(float), a.start
    if metric == "cs_hold":
        return a.cs_hold.astype(float), a.end
    if metric == "cs_high":
        if not a.has_cs or a.n < 2:
            return np.empty(0), np.empty(0, np.int64)
        return a.gap_before[1:].astype(float), a.end[:-1]
    if metric == "sclk_half":
        mh = a.min_half.astype(float)
        mh[a.min_half < 0] = np.nan
        return mh, a.start
    if metric == "transfer_duration":
        return a.duration.astype(float), a.start
    if metric == "transfer_period":
        return a.period(), a.start[:-1]
    if metric == "frame_bits":
        v = a.n_bits.astype(float)
        v[a.partial_start | a.partial_end] = np.nan
        return v, a.start
    if metric == "convst_period":
        return events.convst_periods(m)
    raise KeyError(metric)


def limit_note(lim: Limit) -> str:
    """What the reason adds about the limit: UNVERIFIED, what it assumes, its note."""
    bits = []
    if lim.unverified:
        bits.append("limit UNVERIFIED")
    if lim.assumption:
        bits.append("assumes " + lim.assumption)
    if lim.note:
        bits.append(lim.note)
    return ("; " + "; ".join(bits)) if bits else ""
