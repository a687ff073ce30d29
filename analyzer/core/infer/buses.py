"""SPI buses in the prefix: clocks (channels whose changes come in regular bursts), the
CS that brackets each clock's bursts, and the data lines that change on its edges."""

from __future__ import annotations

import numpy as np

from spigap.core.infer.evidence import (
    BRACKET,
    Evidence,
    clock_score,
    cs_level,
    idle_level,
    in_cycle,
    in_windows,
    lead_trail,
    on_edges,
)
from spigap.core.infer.report import Bus

REGULAR = 0.6                 # share of change pairs spanning one period for a clock
ON_CLOCK = 0.7                # share of a line's changes on a clock's edges to belong to its bus
DATA_EDGE = 0.75              # share of a data line's changes after one kind of clock edge


def find_buses(ev: Evidence, exclude: set[str]) -> list[Bus]:
    """Every SPI clock in the prefix with its CS and data lines, in channel order."""
    cand = []
    for name in ev.names:
        if name in exclude:
            continue
        reg, half = clock_score(ev, name)
        if reg >= REGULAR:
            cand.append((name, half))
    # a candidate whose changes fall on a busier candidate's edges is that bus's data line
    cand.sort(key=lambda c: -len(ev.changes[c[0]]))
    clocks: list[tuple[str, float]] = []
    for name, half in cand:
        if any(on_edges(ev, name, c, h) >= ON_CLOCK for c, h in clocks):
            continue
        # a CS toggling at a steady rate with windows about as long as its gaps looks like
        # a slow clock: far slower than a clock whose bursts it brackets, it is that CS
        if any(half >= 8 * h and cs_level(ev, name, c)[1] >= BRACKET for c, h in clocks):
            continue
        clocks.append((name, half))
    clocks.sort(key=lambda c: ev.names.index(c[0]))
    taken = set(exclude) | {c for c, _ in clocks}
    buses = []
    for clk, half in clocks:
        found = _find_cs(ev, clk, taken)
        cs, active, conf = found if found else (None, None, 0.0)
        if cs is not None:
            taken.add(cs)
        data = [n for n in ev.names if n not in taken and n not in {c for c, _ in clocks}
                and _data_line(ev, n, clk, cs, active, half)]
        if len(data) > 2:
            # a bus has two data lines: the two that carry the most changes (an IRQ that
            # happens to toggle near clock edges a few times loses to them)
            busiest = sorted(data, key=lambda n: -len(ev.changes[n]))[:2]
            data = [n for n in data if n in busiest]
        taken.update(data)
        buses.append(Bus(clk, cs, data, len(ev.changes[clk]), active, conf))
    # a clock with neither CS nor data (a free-running reference clock) is no bus,
    # unless it is the only clock: then the data may be named
    return [b for b in buses if b.cs or b.data] or buses[:1]


def _find_cs(ev: Evidence, clk: str, taken: set[str]) -> tuple[str, int, float] | None:
    """(channel, active level, confidence) of the CS of ``clk``'s bus, None without one."""
    best = None
    for name in ev.names:
        if name in taken or name == clk:
            continue
        active, share, windows = cs_level(ev, name, clk)
        if active is None:
            continue
        key = (share >= BRACKET, windows)
        if best is None or key > best[0]:
            best = (key, name, active, 0.95 if share >= BRACKET else 0.6)
    return (best[1], best[2], best[3]) if best else None


def _data_line(ev: Evidence, name: str, clk: str, cs: str | None, active: int | None, half: float) -> bool:
    ch = ev.changes[name]
    if len(ch) < 2:
        return False
    inside = in_windows(ev, ch, clk, cs, active, half)
    if inside.sum() < max(2, 0.3 * len(ch)):
        return False
    j, off = in_cycle(ev, ev.t[ch[inside]], clk, half)
    lead, trail = lead_trail(ev, clk, j, idle_level(ev, clk, cs, active))
    if lead + trail < 2 or max(lead, trail) < DATA_EDGE * (lead + trail):
        return False
    # and soon after it: of the changes inside a clock cycle (not those at a window's start,
    # before its first edge), most within half a period (an IRQ toggles anywhere in the cycle)
    return float(np.mean(off <= max(1.0, half))) >= DATA_EDGE
