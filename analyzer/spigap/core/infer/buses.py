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
MULTI = 0.2                   # share of a line's in-window changes in clock cycles holding several:
#                               above, not a data line (SPI data changes once per bit, on one edge)
I2C_BYTES = 0.75              # share of stretches between START/STOP conditions that are 9-bit bytes


def find_buses(ev: Evidence, exclude: set[str]) -> list[Bus]:
    """Every SPI clock in the prefix with its CS and data lines, in channel order. What was
    seen and refused is kept in ``ev.refused`` (``no_bus_reason`` says it in one line)."""
    ev.refused = []
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
        if cs is None:
            # I2C has no CS: its SDA is checked before the data-line tests (which it fails anyway:
            # the acknowledge hand-over changes it twice in a clock phase)
            why = _i2c(ev, clk, [n for n in ev.names if n not in taken and n != clk
                                 and len(ev.changes[n]) >= 4], half)
            if why:
                ev.refused.append(why)
                continue
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
    for b in buses:
        if not b.cs and not b.data:
            ev.refused.append(f"{b.clk} toggles like a clock, but no line changes on its edges as SPI data "
                              "does" + _multi_note(ev, b.clk))
    return [b for b in buses if b.cs or b.data] or buses[:1]


def no_bus_reason(ev: Evidence) -> str:
    """What the prefix showed instead of an SPI bus, in one line."""
    if ev.refused:
        return ev.refused[0]
    busiest = max(ev.names, key=lambda n: len(ev.changes[n]), default=None)
    if busiest is None or not len(ev.changes[busiest]):
        return "no channel changes at all"
    n = len(ev.changes[busiest])
    return (f"no channel toggles like a clock (the busiest, {busiest}, changes {n} time{'' if n == 1 else 's'} "
            "with no regular period)")


def _multi_note(ev: Evidence, clk: str) -> str:
    notes = ev.multi.get(clk)
    return f" ({notes} changes several times per clock cycle: not SPI data)" if notes else ""


def _i2c(ev: Evidence, clk: str, data: list[str], half: float) -> str | None:
    """I2C, not SPI: a data line falls while the clock is high, well after its rising edge and
    just before it falls (START), or rises while the clock is high after its last rising
    edge (STOP), and the clock runs in 9-bit bytes between those conditions (8 bits and
    an acknowledge). SPI data changes on a clock edge and comes in 8-bit words."""
    ct = ev.ticks(clk)
    if len(ct) < 18:
        return None
    cl = ev.level[clk][ev.changes[clk]]
    rises = ct[cl == 1]
    for d in data:
        dt = ev.ticks(d)
        dl = ev.level[d][ev.changes[d]]
        j = np.searchsorted(ct, dt, side="right") - 1
        ok = j >= 0
        high = np.zeros(len(dt), bool)
        high[ok] = cl[j[ok]] == 1
        prv = np.full(len(dt), np.inf)
        prv[ok] = dt[ok] - ct[j[ok]]
        nxt = np.full(len(dt), np.inf)
        m = ok & (j < len(ct) - 1)
        nxt[m] = ct[j[m] + 1] - dt[m]
        mid = high & (prv >= max(0.5 * half, 1.0))          # well after the rising edge, clock still high
        start = mid & (dl == 0) & (nxt <= 4 * max(half, 1.0))
        stop = mid & (dl == 1) & (prv <= 4 * max(half, 1.0))
        if start.sum() < 2:
            continue
        cond = np.sort(np.concatenate([dt[start], dt[stop]]))
        n = np.diff(np.searchsorted(rises, cond))
        n = n[n > 1]                         # clock pulses between conditions (the last one's rise included)
        if len(n) < 2 or np.mean((n - 1) % 9 == 0) < I2C_BYTES:
            continue
        return (f"{d} changes while {clk} is high ({int(start.sum())} START and {int(stop.sum())} STOP "
                f"conditions) and {clk} runs in 9-bit bytes between them: looks like I2C")
    return None


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
    # SPI data changes at most once per bit: a line toggling several times within one clock
    # cycle (a UART against a slow frame strobe) is not this clock's data
    cyc = np.searchsorted(ev.ticks(clk), ev.t[ch[inside]], side="right")
    _, inv, cnt = np.unique(cyc, return_inverse=True, return_counts=True)
    if float(np.mean(cnt[inv] > 1)) > MULTI:
        ev.multi[clk] = name
        return False
    j, off = in_cycle(ev, ev.t[ch[inside]], clk, half)
    lead, trail = lead_trail(ev, clk, j, idle_level(ev, clk, cs, active))
    if lead + trail < 2 or max(lead, trail) < DATA_EDGE * (lead + trail):
        return False
    # and soon after it: of the changes inside a clock cycle (not those at a window's start,
    # before its first edge), most within half a period (an IRQ toggles anywhere in the cycle)
    return float(np.mean(off <= max(1.0, half))) >= DATA_EDGE
