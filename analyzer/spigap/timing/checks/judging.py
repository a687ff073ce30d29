"""Verdicts and the ±1-sample rule, shared by every check family.

Every edge-to-edge figure is off by less than one sample period r, so a measured
margin m (signed distance to the nearest bound, negative = outside) means the
true margin lies in (m − r, m + r):

* FAIL      m ≤ −r: outside the bound even if every edge was off by a sample;
* MARGINAL  −r < m < r: cannot be decided at this sample rate, or
            m − r < headroom: inside, but with less than the required headroom;
* PASS      m − r ≥ headroom;
* SKIP      nothing to measure (no such gaps in the capture, channel missing).

Headroom is a fraction of the band's half-width for a two-sided band (expected ±
tolerance), and of the bound itself for a one-sided bound (p99 limits, device
limits). A capture's verdict is NO DATA when it has fewer than ``MIN_TRANSFERS``
transfers or every figure was skipped (docs/timing-model.md, "Verdicts").
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from spigap.timing.profiles import Device, Profile

PASS, MARGINAL, FAIL, SKIP, NO_DATA = "PASS", "MARGINAL", "FAIL", "SKIP", "NO DATA"
SEVERITY = {SKIP: 0, PASS: 1, MARGINAL: 2, NO_DATA: 3, FAIL: 4}
# fewer transfers than this: NO DATA (no median of a gap kind means anything with
# fewer values; the stall search uses the same minimum, StallRule.min_count)
MIN_TRANSFERS = 8
FIRST_N = 5          # how many violation timestamps to list


@dataclasses.dataclass
class Item:
    """One checked figure."""

    id: str                  # "cs_change.p50", "model.transfer_rate", "device.tCSH"
    group: str               # "profile", "model", "device"
    metric: str
    statistic: str           # p50, p99, value, min, max, count, every transfer
    unit: str                # s, Hz, 1/s, bits, edges
    verdict: str
    reason: str
    source: str = ""
    measured: float | None = None
    expected: float | None = None
    low: float | None = None
    high: float | None = None
    delta: float | None = None       # measured − expected (limits: measured − the bound it is nearest)
    margin: float | None = None      # signed distance to the nearest bound; < 0 = outside
    resolution: float | None = None  # ± uncertainty of ``measured``
    headroom: float | None = None    # margin required for PASS (same unit)
    n: int = 0
    assumed: bool = False
    unverified: bool = False
    violations: dict | None = None   # device limits: count, possible, checked, first_s, worst...
    rule: str = ""                   # a bound that is not an interval ("multiple of 16")

    def to_dict(self) -> dict:
        return {k: clean(v) for k, v in dataclasses.asdict(self).items()}


def clean(v):
    """JSON-ready: numpy scalars to Python numbers, NaN and ±inf to None."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, (np.floating, np.integer)):
        return clean(v.item())
    if isinstance(v, dict):
        return {k: clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [clean(x) for x in v]
    return v


@dataclasses.dataclass
class CheckResult:
    capture: str
    profile: Profile | None
    device: Device | None
    resolution_s: float | None     # None: no SPI bus, nothing measured
    headroom: float
    items: list
    notes: list
    summary: dict
    warnings: list

    @property
    def no_data(self) -> str | None:
        """Why there is nothing to judge (the NO DATA verdict), or None."""
        if self.summary.get("no_bus"):
            return self.summary["no_bus"]          # the signals hold no SPI bus at all
        n = self.summary.get("transfers", 0)
        if n < MIN_TRANSFERS:
            return (f"{n} transfer(s) in the capture, fewer than the {MIN_TRANSFERS} a check needs: "
                    "is the bus idle, or the channel map wrong?")
        if not any(i.verdict != SKIP for i in self.items):
            return ("every check was skipped: nothing in the "
                    + (f"profile {self.profile.name!r}" if self.profile else "device limits")
                    + " applies to this capture (check the channel map and the profile)")
        return None

    @property
    def verdict(self) -> str:
        if self.no_data:
            return NO_DATA
        sev = max((SEVERITY[i.verdict] for i in self.items), default=0)
        return next(k for k, v in SEVERITY.items() if v == sev)

    def counts(self) -> dict:
        c = {PASS: 0, MARGINAL: 0, FAIL: 0, SKIP: 0}
        for i in self.items:
            c[i.verdict] += 1
        return c

    def failed(self, strict: bool = False, allow_empty: bool = False) -> bool:
        v = self.verdict
        return v == FAIL or (strict and v == MARGINAL) or (v == NO_DATA and not allow_empty)

    def to_dict(self) -> dict:
        p = self.profile
        return {
            "capture": self.capture,
            "verdict": self.verdict,
            "no_data": self.no_data,
            "counts": self.counts(),
            "resolution_s": self.resolution_s,
            "headroom": self.headroom,
            "profile": {"name": p.name, "title": p.title, "path": p.path, "kernel": p.kernel,
                        "sources": list(p.sources), "assumptions": list(p.assumptions)} if p else None,
            "device": self.device.to_dict() if self.device else None,
            "summary": clean(self.summary),
            "checks": [i.to_dict() for i in self.items],
            "notes": list(self.notes),
            "warnings": list(self.warnings),
        }


def judge(measured: float, low: float | None, high: float | None, resolution: float,
          headroom_abs: float) -> tuple[str, float, str]:
    """Verdict for one figure against [low, high] with ± resolution; (verdict, margin, why)."""
    margins = []
    if low is not None:
        margins.append(measured - low)
    if high is not None:
        margins.append(high - measured)
    if not margins:
        return SKIP, math.nan, "no bound"
    m = min(margins)
    eps = 1e-9 * max(resolution, abs(measured), 1e-30)
    if m <= -resolution + eps:
        return FAIL, m, "outside the bound by at least one sample: a violation whatever the quantization"
    if m < resolution - eps:
        side = "outside" if m < 0 else "inside"
        return MARGINAL, m, (f"{side} the bound by less than the ±1-sample resolution: "
                             "cannot be decided at this sample rate")
    if m - resolution < headroom_abs - eps:
        return MARGINAL, m, "inside the bound, but with less than the required headroom"
    return PASS, m, "inside the bound with headroom"


def headroom_abs(headroom: float, low, high) -> float:
    """The margin PASS needs, in the figure's unit: a fraction of the half-width of
    a two-sided band, of the bound itself for a one-sided one."""
    if low is not None and high is not None:
        return headroom * (high - low) / 2
    return headroom * abs(low if low is not None else high)


def nearest_delta(measured, lo, hi):
    """measured − the bound it is nearest (None without a bound)."""
    cands = [(abs(measured - b), measured - b) for b in (lo, hi) if b is not None]
    return min(cands)[1] if cands else None


def judged(id_, stat, measured, expected, lo, hi, res, n, headroom: float, extra="", **base) -> Item:
    """The Item for one figure judged against [lo, hi] (``judge``), with its delta
    to ``expected`` (or to the nearest bound) and ``extra`` appended to the reason."""
    hab = headroom_abs(headroom, lo, hi)
    verdict, margin, why = judge(measured, lo, hi, res, hab)
    delta = (measured - expected) if expected is not None else nearest_delta(measured, lo, hi)
    if delta is not None and abs(delta) < 1e-6 * (res or 0):
        delta = 0.0       # float noise, far below the resolution
    return Item(id=id_, statistic=stat, verdict=verdict, reason=why + extra, measured=measured,
                expected=expected, low=lo, high=hi, delta=delta,
                margin=margin, resolution=res, headroom=hab, n=n, **base)
