"""Align a trace on a GPIO toggled by software and captured beside the bus (``--sync-channel``)."""

from __future__ import annotations

import functools

import numpy as np

from spigap.core.analysis import Analysis
from spigap.errors import InputError
from spigap.trace import columns as tm
from spigap.trace.align.alignment import Alignment
from spigap.trace.align.match import MIN_MATCHED, Side, best_of, find_seeds, finish


def align_sync(trace: tm.Trace, a: Analysis, edges, channel: str) -> Alignment:
    """Align ``gpio:gpio_value`` events with the edges of a captured channel
    (``edges``: spigap.core.events.ChannelEdges). The pin's edge is taken to be
    at its event's time (the GPIO write's own latency, typically well below a
    microsecond, is inside the offset)."""
    rows = trace.rows(tm.GPIO_VALUE)
    if not len(rows):
        raise InputError("--sync-channel needs gpio:gpio_value events, the trace has none", path=trace.path,
                         hint="enable them: echo 1 > /sys/kernel/tracing/events/gpio/gpio_value/enable")
    bt = np.concatenate([edges.rise, edges.fall]).astype(float)
    bv = np.concatenate([np.ones(len(edges.rise), np.int64), np.zeros(len(edges.fall), np.int64)])
    o = np.argsort(bt, kind="stable")
    B = Side(t=bt[o] * a.tick_s, bits=bv[o], key=np.arange(len(bt))[o])
    if len(B.t) < MIN_MATCHED:
        raise InputError(f"channel {channel} has {len(B.t)} edges, too few to align on (at least {MIN_MATCHED})",
                         path=a.info.path)

    def attempt(g) -> Alignment | None:
        r = rows[trace.gpio[rows] == g]
        v = trace.value[r].astype(np.int64)
        # a write of the level the pin already has is no edge
        change = np.ones(len(r), bool)
        change[1:] = v[1:] != v[:-1]
        r, v = r[change], v[change]
        T = Side(t=trace.ts[r], bits=v, key=r.astype(np.int64))
        if len(T.t) < MIN_MATCHED:
            return None
        seeds, tol = find_seeds(T, B, trace.resolution_s, a.tick_s)
        if not seeds:
            return None
        return finish(trace, T, B, seeds, tol, method="sync-channel", device=f"gpio{int(g)}",
                       anchor=tm.GPIO_VALUE, bus_anchor=f"bus:{channel}", what=f"gpio {int(g)} changes")

    best, err = best_of(functools.partial(attempt, g) for g in np.unique(trace.gpio[rows]))
    if best is None:
        if err is not None:
            raise err
        raise InputError(f"no GPIO in the trace toggles like channel {channel}", path=trace.path,
                         hint="is the right channel given to --sync-channel?")
    # bus_index of a sync alignment indexes the sorted edge list, not transfers
    best.zero_point = "sync channel edge = gpio_value event"
    best.offset_uncertainty_s = None
    return best
