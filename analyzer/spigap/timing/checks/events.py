"""Device limits that need channels besides the SPI lines: the AD7606's CONVST
and BUSY (``--event CONVST:rise --event BUSY:fall``; spigap.timing.extra_channels
reads them).

* ``convst_period``: CONVST rising to the next CONVST rising, each judged like a
  per-transfer limit (``device.per_event``);
* ``sclk_at_busy_fall``: BUSY falls (the output registers update) while SCLK is
  running inside a CS window, between its first and last SCLK edge (±1 sample).
"""

from __future__ import annotations

import numpy as np

from spigap.timing.checks.judging import FAIL, FIRST_N, PASS, Item
from spigap.timing.checks.measurements import Measurements
from spigap.timing.profiles import Limit


def convst_periods(m: Measurements) -> tuple[np.ndarray, np.ndarray]:
    """(CONVST rising-to-rising periods in ticks, tick of each period's start)."""
    r = m.events["convst"].rise
    return np.diff(r).astype(float), r[:-1]


def busy_read(m: Measurements, lim: Limit, iid: str, base: dict, limit_note: str) -> Item:
    """BUSY falling edges while SCLK was running: at most ``lim.max`` (0)."""
    a = m.a
    falls = m.events["busy"].fall
    ok = a.first_edge >= 0
    first, last = a.first_edge[ok], a.last_edge[ok]
    k = np.searchsorted(first, falls, side="right") - 1
    inside = (k >= 0) & (falls <= np.where(k >= 0, last[np.maximum(k, 0)], -1))
    at = falls[inside]
    hi = lim.max if lim.max is not None else 0
    return Item(id=iid, statistic="count", verdict=FAIL if len(at) > hi else PASS,
                reason=f"{len(at)} of {len(falls)} BUSY falling edge(s) while SCLK was running"
                       + limit_note,
                measured=float(len(at)), high=hi, resolution=0.0, n=int(len(falls)),
                violations={"count": int(len(at)), "possible": 0, "checked": int(len(falls)),
                            "first_s": [float(t) * a.tick_s for t in at[:FIRST_N]]}, **base)
