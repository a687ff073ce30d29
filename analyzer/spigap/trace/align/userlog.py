"""Align user-space timestamp logs (``--userlog``: e.g. perf_counter_ns before/after each
ioctl) with the CS edges, and measure their error against the bus."""

from __future__ import annotations

import dataclasses

import numpy as np

from spigap.core.analysis import Analysis
from spigap.errors import InputError
from spigap.trace import columns as tm
from spigap.trace.align.alignment import Alignment
from spigap.trace.align.match import MIN_MATCHED, Side, coarse, finish


@dataclasses.dataclass
class UserlogReport:
    """Software timestamps against bus truth (on the bus clock after the fit)."""

    column: str
    bus_anchor: str
    alignment: Alignment
    granularity_s: float | None       # the step the timestamps come in (e.g. 1 µs), None when finer than 1 ns
    error_p50_s: float                # bus edge minus mapped software time (median)
    jitter_std_s: float
    jitter_p99_s: float               # p99 of |error - median|

    def to_dict(self) -> dict:
        return {"column": self.column, "bus_anchor": self.bus_anchor, "granularity_s": self.granularity_s,
                "error_p50_s": self.error_p50_s, "jitter_std_s": self.jitter_std_s,
                "jitter_p99_s": self.jitter_p99_s, **self.alignment.to_dict()}


def granularity(ts: np.ndarray) -> float | None:
    """The largest step 10^-k s (k = 0..9) every timestamp is a multiple of, relative to the first."""
    if len(ts) < 2:
        return None
    x = np.asarray(ts, float) - float(ts[0])
    tol = 1e-11 + 4e-16 * float(np.max(np.abs(ts)))       # float64 rounding of the readings
    for k in range(0, 10):
        q = 10.0 ** -k
        if np.all(np.abs(x - np.round(x / q) * q) <= tol):
            return q
    return None


def align_userlog(log: tm.Trace, a: Analysis) -> list[UserlogReport]:
    """Each ``user:*`` column aligned with the CS asserts (a 'before' column) or the CS
    deasserts (an 'after' column): its drift, and its error against the bus."""
    out = []
    tick = a.tick_s
    if a.has_cs and a.grouping.ambiguous:
        # one timestamp per call: which CS window starts a call must be known
        raise InputError("the capture's message grouping is ambiguous, so which transfer starts each call "
                         "is unknown", path=log.path,
                         hint=f"settle it with {a.grouping.settle or '--transfers-per-message N --context-switch longer|shorter'}"
                              " or give the kernel trace too (--ftrace)")
    for name in log.events:
        if not name.startswith("user:"):
            continue
        rows = log.rows(name)
        if len(rows) < MIN_MATCHED:
            continue
        after = any(w in name for w in ("after", "end", "stop", "done"))
        if after:
            t = np.asarray(a.end, float)
            ok = ~np.asarray(a.partial_end, bool)
            bus_name = tm.BUS_CS_DEASSERT
        else:
            t = np.asarray(a.start, float)
            ok = ~np.asarray(a.partial_start, bool)
            bus_name = tm.BUS_CS_ASSERT
        idx = np.flatnonzero(ok)
        B = Side(t=t[idx] * tick, bits=np.full(len(idx), -1, np.int64), key=idx.astype(np.int64))
        T = Side(t=log.ts[rows], bits=np.full(len(rows), -1, np.int64), key=rows.astype(np.int64))
        # a software timestamp is taken once per call; the bus may show several windows per call
        if a.n > 1 and not a.grouping.ambiguous:
            first = np.ones(a.n, bool)
            first[1:] = a.message[1:] != a.message[:-1]
            last = np.ones(a.n, bool)
            last[:-1] = a.message[1:] != a.message[:-1]
            keep = (last if after else first)[B.key]
            B = Side(t=B.t[keep], bits=B.bits[keep], key=B.key[keep])
        if len(B.t) < MIN_MATCHED:
            continue
        res = log.resolution_s
        g = granularity(log.ts[rows])
        tols = [t for t in (2 * max(res, g or 0) + 2 * tick + x for x in (2e-6, 8e-6, 32e-6))
                if t < 0.45 * float(np.percentile(np.diff(B.t), 10))] if len(B.t) > 1 else []
        seeds: list = []
        tol = 0.0
        for tol in tols:
            seeds = coarse(T, B, tol)
            if seeds:
                break
        if not seeds:
            raise InputError(f"the {name} timestamps match no sequence of transfers in the capture",
                             path=log.path, hint="a log from another recording?")
        al = finish(log, T, B, seeds, tol, method="userlog", device=name, anchor=name,
                     bus_anchor=bus_name, what=f"{name} timestamps")
        al.zero_point = "fit (software time carries the median latency)"
        err = al.residuals
        out.append(UserlogReport(column=name, bus_anchor=bus_name, alignment=al, granularity_s=g,
                                 error_p50_s=float(np.median(err)), jitter_std_s=float(np.std(err)),
                                 jitter_p99_s=float(np.percentile(np.abs(err - np.median(err)), 99))))
    if not out:
        raise InputError("no user:* column with enough timestamps to align", path=log.path)
    return out
