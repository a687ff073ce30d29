"""The zero point of an SPI alignment: the rate refitted on every causal pair, the offset from causality.

Matching fixes the rate and the offset up to the anchor's latency
(``spi_set_cs`` is traced before the CS write). Causality brackets it: a
kernel event that causes a bus edge precedes it (set_cs → CS, transfer_start
→ first SCLK) and one that observes a bus edge follows it (last SCLK →
transfer_stop, CS deassert → message_done). The offset is put in the middle of
that bracket, its half-width reported as ``offset_uncertainty_s``; a known
``--cs-latency`` pins it instead (docs/trace.md).
"""

from __future__ import annotations

import numpy as np

from spigap.core.analysis import Analysis
from spigap.trace import columns as tm
from spigap.trace.align.alignment import Alignment, bus_edges


def owner(a: Analysis, t_bus: np.ndarray) -> np.ndarray:
    """The transfer each bus time belongs to: the one whose CS window, extended to the
    middle of the gaps on either side, holds it (-1 before the first or after the last)."""
    tick = a.tick_s
    if a.n == 0:
        return np.full(len(t_bus), -1, np.int64)
    s = np.asarray(a.start, float) * tick
    e = np.asarray(a.end, float) * tick
    mid = (e[:-1] + s[1:]) / 2
    k = np.searchsorted(mid, t_bus, side="right")
    lo = s[0] - (s[1] - e[0]) / 2 if a.n > 1 else s[0] - 1e-3
    hi = e[-1] + (s[-1] - e[-2]) / 2 if a.n > 1 else e[-1] + 1e-3
    k[(t_bus < lo) | (t_bus > hi)] = -1
    return k.astype(np.int64)


def per_transfer(trace: tm.Trace, al: Alignment, a: Analysis, name: str, device: str | None,
                 which: str) -> tuple[np.ndarray, np.ndarray]:
    """(transfer, bus time) of the first or last ``name`` event at each matched transfer."""
    rows = trace.rows(name, device)
    if not len(rows):
        return np.empty(0, np.int64), np.empty(0)
    t = al.to_bus(trace.ts[rows])
    k = owner(a, t)
    matched = al.matched_mask(a.n)
    ok = (k >= 0) & matched[np.maximum(k, 0)]
    k, t = k[ok], t[ok]
    if not len(k):
        return k, t
    if which == "first":
        ks, pos = np.unique(k, return_index=True)
    else:
        ks, pos = np.unique(k[::-1], return_index=True)
        pos = len(k) - 1 - pos
    return ks, t[pos]


# (trace event, bus edge, +1: the event causes the edge / -1: the event observes the edge, which)
CAUSAL = ((tm.SPI_SET_CS_ACTIVATE, tm.BUS_CS_ASSERT, 1, "first"),
          (tm.SPI_TRANSFER_START, tm.BUS_FIRST_SCLK, 1, "first"),
          (tm.SPI_SET_CS_DEACTIVATE, tm.BUS_CS_DEASSERT, 1, "last"),
          (tm.SPI_TRANSFER_STOP, tm.BUS_LAST_SCLK, -1, "last"),
          (tm.SPI_MESSAGE_DONE, tm.BUS_CS_DEASSERT, -1, "last"))


def _low(x: np.ndarray) -> float | None:
    """The 1st percentile of the finite latencies (the fastest, a preempted outlier aside)."""
    x = x[np.isfinite(x)]
    return float(np.percentile(x, 1)) if len(x) >= 3 else None


def refine_and_zero(al: Alignment, trace: tm.Trace, a: Analysis, device: str,
                     cs_latency: float | None = None) -> None:
    """Refit the rate on every causal pair (one intercept per pair kind, one common
    slope), then put the zero point in the middle of the causality bracket."""
    edges = bus_edges(a)
    if not a.has_cs:
        edges[tm.BUS_CS_ASSERT] = edges[tm.BUS_CS_DEASSERT] = np.full(a.n, np.nan)
    xs: list = []
    ys: list = []
    groups: list = []
    fwd: list = []
    back: list = []
    for g, (name, edge, sign, which) in enumerate(CAUSAL):
        rows = trace.rows(name, device)
        if not len(rows):
            continue
        k, tb = per_transfer(trace, al, a, name, device, which)
        y = edges[edge][k]
        ok = np.isfinite(y)
        if ok.sum() < 3:
            continue
        lat = (y - tb)[ok] * sign            # >= 0 when the clocks agree
        # drop the far tail (a preempted write) from the rate fit
        med = np.median(lat)
        mad = 1.4826 * np.median(np.abs(lat - med)) + 1e-12
        inl = np.abs(lat - med) <= max(4 * mad, 2 * trace.resolution_s)
        x = (tb[ok] - al.a) / al.b + al.t0          # back to trace time
        xs.append(x[inl] - al.t0)
        ys.append((y[ok] - x)[inl])
        groups.append(np.full(int(inl.sum()), g))
        (fwd if sign > 0 else back).append(lat)
    if xs:
        x, y, gr = np.concatenate(xs), np.concatenate(ys), np.concatenate(groups)
        if len(x) >= 8 and np.ptp(x) > 0:
            # y = c_g + s x: remove each group's mean, regress once (common slope)
            xc, yc = x.copy(), y.copy()
            for g in np.unique(gr):
                m = gr == g
                xc[m] -= x[m].mean()
                yc[m] -= y[m].mean()
            slope = float(np.dot(xc, yc) / np.dot(xc, xc))
            # the anchor's intercept under the new slope
            old_b = al.b
            al.b = 1.0 + slope
            anchor_g = [g for g, c in enumerate(CAUSAL) if c[0] == al.anchor]
            m = gr == (anchor_g[0] if anchor_g else gr[0])
            if not m.any():
                m = np.ones(len(gr), bool)
            shift = float(np.mean(y[m] - (al.b - 1.0) * x[m]) - np.mean(y[m] - (old_b - 1.0) * x[m]))
            al.a += shift
            # the fwd/back latencies under the refined fit
            fwd, back = [], []
            for name, edge, sign, which in CAUSAL:
                k, tb = per_transfer(trace, al, a, name, device, which)
                y2 = edges[edge][k]
                ok = np.isfinite(y2)
                if ok.sum() >= 3:
                    (fwd if sign > 0 else back).append((y2 - tb)[ok] * sign)
    F = _low(np.concatenate(fwd)) if fwd else None
    K = _low(np.concatenate(back)) if back else None
    if cs_latency is not None:
        # the activate -> CS assert latency (deactivate -> CS deassert only without it): the two
        # can differ (another code path, a driver's own CS delay), and pooled, a given latency
        # would pin the zero point between them
        for name, edge, _, which in (CAUSAL[0], CAUSAL[2]):
            k, tb = per_transfer(trace, al, a, name, device, which)
            lat = edges[edge][k] - tb
            lat = lat[np.isfinite(lat)]
            if len(lat) >= 3:
                what = "activate -> CS assert" if name == tm.SPI_SET_CS_ACTIVATE else "deactivate -> CS deassert"
                al.a += float(np.median(lat)) - cs_latency
                al.zero_point = f"spi_set_cs {what} latency given ({cs_latency * 1e6:.6g} us, median)"
                al.offset_uncertainty_s = None
                return
        al.notes.append("--cs-latency: no spi_set_cs events matched to CS edges; the causal bracket is used")
    if F is None:
        return
    if K is None:
        # only events before the edges they cause: the fastest one is taken as immediate
        al.a += F
        al.zero_point = "fastest causing event immediate (no event after a bus edge in the trace)"
        al.offset_uncertainty_s = None
        return
    al.a += (F - K) / 2
    al.zero_point = "causal bracket midpoint"
    # printed timestamps are rounded to their step (the kernel's ns2usecs rounds): each of
    # F and K can read up to half a step short, so the bracket is widened by that much
    al.offset_uncertainty_s = abs(F + K) / 2 + trace.resolution_s / 2
