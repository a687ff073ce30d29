"""SPI buses in the prefix: clocks (channels whose changes come in regular bursts), the
CS that brackets each clock's bursts, and the data lines that change on its edges."""

from __future__ import annotations

import re

import numpy as np

from spigap.core.infer.evidence import (
    BRACKET,
    MIN_CLOCK_CHANGES,
    Evidence,
    bursts,
    clock_score,
    cs_level,
    cs_windows,
    edges_around,
    edges_held,
    gated,
    half_of,
    idle_level,
    in_cycle,
    in_windows,
    lead_trail,
    on_edges,
    pulse_train,
    together,
)
from spigap.core.infer import lookalike
from spigap.core.infer.report import Bus

VECTOR_BIT = re.compile(r"\[\d+\]$")   # a bit of a vector in a simulator's dump: rx[7]
REGULAR = 0.6                 # share of change pairs spanning one period for a clock
ON_CLOCK = 0.7                # share of a line's changes on a clock's edges to belong to its bus
DATA_EDGE = 0.75              # share of a data line's changes after one kind of clock edge
NEAR = 0.9                    # share of SCLK edges in a rejected CS's windows: named as the other reading
MULTI = 0.2                   # share of a line's in-window changes in clock cycles holding several:
#                               above, not a data line (SPI data changes once per bit, on one edge)


def find_buses(ev: Evidence, exclude: set[str], named_cs: str | None = None) -> list[Bus]:
    """Every SPI clock in the prefix with its CS and data lines, in channel order. What was
    seen and refused is kept in ``ev.refused`` (``no_bus_reason`` says it in one line).
    ``named_cs``: a CS the names give (excluded from the search, but the CS of a clock whose
    bursts it brackets, for the look-alike tests)."""
    ev.refused = []
    ev.lookalikes = []
    cand = []
    for name in ev.names:
        if name in exclude:
            continue
        reg, half = clock_score(ev, name)
        if reg >= REGULAR:
            cand.append((name, half))
    # no channel toggles like a clock: a bit-banged clock's pulse train, if one has a bus on it
    pulsed = not cand
    if pulsed:
        cand = [(n, pulse_train(ev, n)[1]) for n in ev.names if n not in exclude and pulse_train(ev, n)[0] >= REGULAR]
    # a candidate whose changes fall on a busier candidate's edges is that bus's data line: within
    # one clock phase of them (in the edge's sample, a sample or an output delay after it, or a
    # phase before a word's first edge: SSI32's MOSI is set a sample after a byte's last edge or a
    # sample before the next one's first, at one sample per phase, and toggles at so steady a rate
    # between bytes that it looks like a slower clock, which no line follows)
    cand.sort(key=lambda c: -len(ev.changes[c[0]]))
    clocks: list[tuple[str, float]] = []
    for name, half in cand:
        # ... unless that clock never pauses and this one is far slower or runs in bursts: in a
        # synchronous design (a simulated SPI core) every line changes on the system clock's
        # edges, SCLK too, and a data line does not toggle at a steady slow rate
        if any(on_edges(ev, name, c, h, within=1.0) >= ON_CLOCK and not (lookalike.continuous(ev, c, h) and (
                half >= 4 * h or not lookalike.continuous(ev, name, half)))
               for c, h in clocks):
            continue
        # a CS toggling at a steady rate with windows about as long as its gaps looks like
        # a slow clock: far slower than a clock whose bursts it brackets, it is that CS
        if any(half >= 8 * h and cs_level(ev, name, c)[1] >= BRACKET for c, h in clocks):
            continue
        clocks.append((name, half))
    clocks.sort(key=lambda c: ev.names.index(c[0]))
    taken = set(exclude) | {c for c, _ in clocks}
    par = lookalike.parallel(ev, exclude)
    buses = []
    for clk, half in clocks:
        found = _find_cs(ev, clk, taken)
        if named_cs is not None and named_cs in ev.level and (found is None or found[3] != "bracket"):
            own = _find_cs(ev, clk, taken - {named_cs})
            if own is not None and own[0] == named_cs:
                found = own
        cs, active, conf, how = found if found else (None, None, 0.0, "bracket")
        rivals = ev.cs_rivals.get(clk, ()) if how == "bracket" and conf >= 0.9 else ()
        free = [n for n in ev.names if n not in taken and n != clk and len(ev.changes[n]) >= 2]
        # a partial CS frames one device's bursts only: the data lines are those of the clock's
        # bursts, all of them (the other device's answers fall outside its windows), and the
        # look-alikes are tested as on a clock without CS
        partial = how == "partial"
        data = [n for n in free if n != cs and n not in {c for c, _ in clocks}
                and _data_line(ev, n, clk, None if partial else cs, None if partial else active, half)]
        if cs is None or partial:
            # without a CS only a 1-bit net is a data line: bits of a vector changing on a slow flag's
            # edges are a register of a simulated design, no SPI evidence
            data = [d for d in data if not VECTOR_BIT.search(d)]
        if partial and not data:
            # a partial CS is no SPI evidence of its own: without a line on the clock's edges the bus
            # is none (a GPIB handshake's EOI beside DAV), as without it
            cs, active, conf, how, partial = None, None, 0.0, "bracket", False
        data_how = "edges" if data else "none"
        # the other protocols' own evidence first (I2C's START/STOP, I2S's frame line, ...):
        # a bus one of them fits is no SPI bus (core/infer/lookalike.py)
        la = lookalike.check(ev, clk, half, free, data, None if partial else cs, conf >= 0.9 or how == "latch",
                             par, how == "latch", frames=cs is not None and (conf >= 0.9 or how == "once"))
        if la is not None:
            ev.lookalikes.append(la)
            ev.refused.append(la.text())
            continue
        if cs is not None:
            taken.add(cs)
        wide = together(ev, tuple(_distinct(ev, data))) if len(data) > 2 else ()
        if len(data) > 2:
            # a bus has two data lines: the two that carry the most changes (an IRQ that
            # happens to toggle near clock edges a few times loses to them); 1-bit nets before
            # bits of vectors (a simulated design's shift registers follow the clock too); of
            # lines that change in the same samples (a slave's output register and the MISO net
            # it drives) the first
            data = _distinct(ev, data)
            busiest = sorted(data, key=lambda n: (bool(VECTOR_BIT.search(n)), -len(ev.changes[n])))[:2]
            data = [n for n in data if n in busiest]
        taken.update(data)
        buses.append(Bus(clk, cs, data, len(ev.changes[clk]), active, conf, how, data_how,
                         wide if len(wide) > 2 and cs is not None else (),
                         tuple(r for r in rivals if r not in data)))
    # a clock that frames another clock's bits (an I2S word select divided from the bit clock) is
    # part of that look-alike, no bus of its own
    buses = [b for b in buses if b.cs_confidence >= 0.9 or not any(b.clk in la.lines for la in ev.lookalikes)]
    # a clock with neither CS nor data (a free-running reference clock) is no bus,
    # unless it is the only clock: then the data may be named
    for b in buses:
        if not b.cs and not b.data:
            ev.refused.append(f"{b.clk} toggles like a clock, but no line changes on its edges as SPI data "
                              "does" + _multi_note(ev, b.clk))
    return [b for b in buses if b.cs or b.data] or (buses[:1] if not pulsed else [])


GENERIC = ("a free-running clock",)     # look-alikes that name no protocol: a named one wins
# the more specific evidence first: START/STOP with bytes between, a TAP steered, frames whose CRC
# holds, before a frame line every N clocks (which any divided signal of a system clock shows)
SPECIFIC = {"I2C": 0, "a synchronous smart card (SLE44xx)": 1, "JTAG": 1, "SWD": 1, "MDIO": 2, "SD": 3, "LPC": 4, "UART": 5, "a parallel bus": 6,
            "a counter or Gray code": 7, "AC'97": 8, "I2S": 9, "TDM": 9}


def no_bus_reason(ev: Evidence) -> str:
    """What the prefix showed instead of an SPI bus, in one line: the most specific look-alike
    the clock buses were refused as, or one seen on any lines (I2C on any pair, a parallel bus,
    a UART line), or what was refused."""
    found = [la for la in ev.lookalikes if la.name not in GENERIC]
    if not found:
        i2c, par = lookalike.i2c_any(ev), lookalike.parallel(ev)
        # I2C whose two lines are lines of a parallel bus (two data lines of a GPIB that happen to
        # look like START/STOP) is that bus; I2C beside a parallel bus (an I/O expander's outputs) is I2C
        found = [par] if par is not None and i2c is not None and lookalike.on_parallel(i2c, par) else \
            [x for x in (i2c, par) if x is not None]
    for other in (lookalike.uart(ev), lookalike.swd_names(ev)):
        if other is not None:
            found.append(other)
    if found:
        found.sort(key=_specific)
        ev.lookalikes = found + [la for la in ev.lookalikes if la not in found]
        return found[0].text()
    if ev.lookalikes:
        return ev.lookalikes[0].text()
    if ev.refused:
        return ev.refused[0]
    busiest = max(ev.names, key=lambda n: len(ev.changes[n]), default=None)
    if busiest is None or not len(ev.changes[busiest]):
        return "no channel changes at all"
    n = len(ev.changes[busiest])
    return (f"no channel toggles like a clock (the busiest, {busiest}, changes {n} time{'' if n == 1 else 's'} "
            "with no regular period)")


def _specific(la) -> float:
    """How specific a look-alike's evidence is (lower first); a parallel bus latched by a strobe
    ranks above a UART (an HD44780's RS also idles high with runs of whole bit times)."""
    if la.name == "a parallel bus" and la.strong:
        return SPECIFIC["UART"] - 0.5
    return SPECIFIC.get(la.name, 9)


def _multi_note(ev: Evidence, clk: str) -> str:
    notes = ev.multi.get(clk)
    return f" ({notes} changes several times per clock cycle: not SPI data)" if notes else ""


def _find_cs(ev: Evidence, clk: str, taken: set[str]) -> tuple[str, int, float, str] | None:
    """(channel, active level, confidence, how) of the CS of ``clk``'s bus, None without one.
    ``how``: "bracket" (its level brackets the bursts), "latch" (a strobe between bursts: LOAD,
    LE, a pad's LATCH; the bits between two pulses are one transfer), "once" (one window in the
    prefix holds every clock edge)."""
    ev.cs_rivals.pop(clk, None)
    ev.cs_near.pop(clk, None)
    ev.cs_partial.pop(clk, None)
    best = None
    near: tuple[str, int, float] | None = None     # a line bracketing most bursts that changes while SCLK runs
    tight: list[tuple[str, int, int, np.ndarray]] = []       # lines bracketing every burst
    for name in ev.names:
        if name in taken or name == clk:
            continue
        active, share, windows = cs_level(ev, name, clk)
        if active is None:
            near = _near(ev, name, clk, near)
            continue
        if not _between_bursts(ev, name, clk):
            continue
        if share < BRACKET and quadrature(ev, name, clk):
            continue          # a loose bracket that is half of a quadrature pair: a mouse's XA
        # among equals, the tightest bracket: the line active the shortest time (a CS, not a strobe
        # that pulses once before each burst and is "active" all the rest of the time)
        starts, ends = cs_windows(ev, name, active)
        key = (share >= BRACKET, windows, -float(np.sum(np.minimum(ends, ev.end) - starts)))
        if share >= BRACKET:
            tight.append((name, active, windows, starts))
        if best is None or key > best[0]:
            best = (key, name, active, 0.95 if share >= BRACKET else 0.6, "bracket")
    if best is not None and best[0][0]:
        ev.cs_rivals[clk] = _rivals(ev, clk, best[1], tight)
        return best[1], best[2], best[3], best[4]
    found = _once(ev, clk, taken) or _latch(ev, clk, taken)
    if found is not None:
        return found
    if best is None and near is not None:
        ev.cs_near[clk] = near
    if best is None and near is None:
        return _partial(ev, clk, taken)
    return (best[1], best[2], best[3], best[4]) if best else None


PARTIAL = 0.25                # share of SCLK's edges a partial CS's windows hold at least


def _partial(ev: Evidence, clk: str, taken: set[str]) -> tuple[str, int, float, str] | None:
    """The CS of one device on a clock that also runs outside it: another device shares the clock
    and its CS is not captured (the TrueMove3's power-up: 68 064 of 128 665 SCK edges fall while
    NCS is high, another device on the same clock), or a CS asserted for part of the capture (an FPGA
    board's CS# asserted once, the clock running on after it). No bracket test takes such a line:
    both its levels hold bursts. What marks it a select: it changes only where the clock is idle
    (between bursts, never inside one: a quadrature output or a strobe toggling while the clock
    runs is none), at one clock level every time (the idle one), far less often than the clock,
    and its windows at one level hold a good share of the edges (PARTIAL). Which level is active
    the signals do not tell (the bursts at the other level are another device's): active low,
    SPI's usual polarity, where both fit. Two readings ("partial", stated 0.5): this line as the
    select, or no CS; a line asserted once in the prefix is the other reading of no CS
    (``ev.cs_partial``: an interrupt line looks so too)."""
    ci = ev.changes[clk]
    ct = ev.t[ci]
    if len(ct) < MIN_CLOCK_CHANGES:
        return None
    half = max(half_of(ev, clk), 1.0)
    bs, be = bursts(ev, clk)
    for name in ev.names:
        if name in taken or name == clk or RESET.match(name) or SIGNAL.match(name):
            continue
        idx = ev.changes[name]
        if not 2 <= len(idx) <= len(ct) / 8 or quadrature(ev, name, clk):
            continue
        # every change in a pause of the clock: the SCLK edges around it (one in its very sample
        # counts as before: a coarse capture's last edge at the deassert) more than three half
        # periods apart (_between_bursts skips that edge, and lets a tenth pass)
        before, after, same = edges_around(ct, ev.t[idx])
        if not np.all(np.where(same, 0, before) + after > 3 * half):
            continue
        idle = ev.level[clk][idx]
        if len(np.unique(idle)) != 1:
            continue
        for active in (0, 1):
            starts, ends = cs_windows(ev, name, active)
            held = edges_held(ct, starts, ends)
            inside = int(held.sum())
            if not (np.any(held >= 4) and inside <= BRACKET * len(ct) and len(ct) - inside >= 4):
                continue
            # a good share: of the edges (a long transfer beside many short ones), or of the bursts
            # (a device polled now and then beside a busy one)
            w = np.searchsorted(starts, bs, side="right") - 1
            framed = (w >= 0) & (be - 1 <= ends[np.clip(w, 0, len(ends) - 1)])
            if inside >= PARTIAL * len(ct) or float(np.mean(framed)) >= PARTIAL:
                if int(np.count_nonzero(held >= 4)) == 1:
                    # asserted once: a select for part of the capture, or an interrupt line the
                    # host services (the ADE7758's IRQ, unnamed): no CS taken, the line named as
                    # the other reading (framing by idle time keeps every burst)
                    ev.cs_partial[clk] = (name, active)
                    return None
                return name, active, 0.5, "partial"
    return None


def _near(ev: Evidence, name: str, clk: str, near: tuple[str, int, float] | None) -> tuple[str, int, float] | None:
    """``near`` or ``name`` if it comes closer to being ``clk``'s CS though no CS test takes it: at
    one level at NEAR of SCLK's edges, in eight windows or more each holding a burst of four edges
    or more, changing far less often than the clock (a quarter: no data line), but changing while
    SCLK runs too (a host that clocks on between commands). A line changing a handful of times
    (a reset, a mouse's quadrature output) says nothing either way."""
    ci = ev.changes[clk]
    if not 16 <= len(ev.changes[name]) <= len(ci) / 4 or quadrature(ev, name, clk) or _between_bursts(ev, name, clk):
        return near       # (a line changing only where the clock pauses is _partial's)
    lv, before = ev.level[name][ci], ev.level[name][ci - 1]
    ct = ev.t[ci]
    for active in (0, 1):
        share = float(np.mean((lv == active) | (before == active)))
        if share < NEAR or (near is not None and share <= near[2]):
            continue
        starts, ends = cs_windows(ev, name, active)
        held = np.searchsorted(ct, ends, side="left") - np.searchsorted(ct, starts, side="right")
        if int(np.count_nonzero(held >= 4)) >= 8:
            near = (name, active, share)
    return near


def _rivals(ev: Evidence, clk: str, cs: str, tight: list[tuple[str, int, int, np.ndarray]]) -> tuple[str, ...]:
    """The other lines that bracket every one of ``clk``'s bursts as ``cs`` does (as many windows,
    each holding a burst) but are not asserted with it (its starts more than two clock periods
    away: a twin asserted together is a second device, settle._together): a handshake or flow
    control line (SSI32's FC#) brackets the same bursts as the select, and nothing in the
    signals says which of them is the select."""
    mine = next(x for x in tight if x[0] == cs)
    tol = 4 * max(1.0, half_of(ev, clk))
    out = []
    for name, _, windows, starts in tight:
        if name == cs or windows != mine[2] or not len(starts) or not len(mine[3]):
            continue
        k = np.clip(np.searchsorted(starts, mine[3]), 0, len(starts) - 1)
        k0 = np.clip(k - 1, 0, len(starts) - 1)
        near = np.minimum(np.abs(starts[k] - mine[3]), np.abs(starts[k0] - mine[3])) <= tol
        if float(np.mean(near)) < 0.9:
            out.append(name)
    return tuple(out)


def quadrature(ev: Evidence, name: str, clk: str) -> str | None:
    """The line ``name`` forms a quadrature pair with (a mouse sensor's XA/XB, an encoder): two
    lines that change alternately (85 % of their merged changes), never in one sample, as often
    as each other, slowly next to the clock (their changes 32 clock phases apart or more: a shift
    register's input and first stage alternate too, bit by bit); None if none. Such a line
    toggles with the motion, not with the bus: no CS, no data line."""
    ta = ev.ticks(name)
    if len(ta) < 4 or float(np.median(np.diff(ta))) < 32 * max(half_of(ev, clk), 1.0):
        return None
    for other in ev.names:
        tb = ev.ticks(other)
        if other == name or not 0.5 <= len(tb) / len(ta) <= 2:
            continue
        t = np.concatenate([ta, tb])
        w = np.concatenate([np.zeros(len(ta), np.int8), np.ones(len(tb), np.int8)])[np.argsort(t, kind="stable")]
        if float(np.mean(w[1:] != w[:-1])) >= 0.85 and len(np.intersect1d(ta, tb)) <= 0.05 * len(ta):
            return other
    return None


def _between_bursts(ev: Evidence, cs: str, clk: str) -> bool:
    """A CS changes where the clock pauses: few of its changes fall inside a burst (between two
    clock edges less than three half periods apart). A quadrature output or a strobe that
    toggles while the clock runs is no CS."""
    ct = ev.ticks(clk)
    st = ev.ticks(cs)
    if len(ct) < 2 or not len(st):
        return True
    half = half_of(ev, clk)
    # the clock edges strictly before and after (coarse captures put the last edge in the CS's sample)
    before, after, _ = edges_around(ct, st)
    inside = before + after <= 3 * max(half, 1.0)       # inf where either is missing: no burst
    return float(np.mean(inside)) <= 0.1


def _latch(ev: Evidence, clk: str, taken: set[str]) -> tuple[str, int, float, str] | None:
    """A latch strobe (LOAD, LE, LATCH): short pulses, each with no clock edge inside, between
    which the clock runs: the bits between two pulses are one transfer (its level between the
    pulses is the "active" one)."""
    ct = ev.ticks(clk)
    half = max(half_of(ev, clk), 1.0)
    for name in ev.names:
        if name in taken or name == clk or len(ev.changes[name]) < 4:
            continue
        for active in (0, 1):
            ps, pe = cs_windows(ev, name, 1 - active)           # the pulses
            ws, we = cs_windows(ev, name, active)               # between them
            inner = (ps > 0) & (pe < ev.end)
            ps, pe = ps[inner], pe[inner]
            if len(ps) < 2 or len(ws) < 2:
                continue
            width = pe - ps
            spacing = np.diff(ps)
            if float(np.median(width)) > 0.25 * float(np.median(spacing)):
                continue
            in_pulse = np.searchsorted(ct, pe, side="left") - np.searchsorted(ct, ps, side="right")
            # the clock stops for the latch (a TDM frame sync pulses while the clock runs on): a
            # pause of the clock next to each pulse
            a = np.clip(np.searchsorted(ct, ps - half, side="left") - 1, 0, len(ct) - 2)
            b = np.clip(np.searchsorted(ct, pe + half, side="right"), 1, len(ct) - 1)
            gaps = np.diff(ct)
            longest = np.array([gaps[i:j].max() if j > i else 0 for i, j in zip(a, b)])
            if float(np.mean(longest >= 1.5 * half)) < 0.9:
                continue
            held = np.searchsorted(ct, we, side="left") - np.searchsorted(ct, ws, side="right")
            if float(np.mean(in_pulse <= 1)) >= 0.9 and float(np.mean(held[1:-1] >= 4)) >= 0.9 \
                    if len(held) > 2 else False:
                return name, active, 0.8, "latch"
    return None


# a reset released once before the clock starts looks like a CS asserted once: its name says which
RESET = re.compile(r"^(?:.*[._])?(?:n_?|/)?(?:rst|reset|res|por)(?:_?n|_?b|#)?$", re.I)
# an interrupt or ready line asserted while the host reads the device looks like a CS of part of
# the bursts (the ADE7758's IRQ: 224 of 240 edges while it is high): its name says which
SIGNAL = re.compile(r"^(?:.*[._])?(?:n_?|/)?(?:irq|int|intr|drdy|rdy|ready|busy|alert|motion|eoc)\d*(?:_?n|_?b|#)?$",
                    re.I)


def _once(ev: Evidence, clk: str, taken: set[str]) -> tuple[str, int, float, str] | None:
    """A CS asserted once in the prefix (one transfer, or a long stream): a line that changes at
    most four times, whose one window at a level holds every clock edge (98 %), and whose changes
    fall outside the burst in it (before its first clock edge, after its last, or in a pause of
    the clock) or, where the clock runs on at the other level (an SD card's wake-up clocks with
    CS high), leave that level a while. One flash command in a short capture: CS falls, the
    clock runs, CS rises."""
    ct = ev.ticks(clk)
    if len(ct) < 16:
        return None
    half = max(half_of(ev, clk), 1.0)
    for name in ev.names:
        if name in taken or name == clk or not 1 <= len(ev.changes[name]) <= 4 or RESET.match(name):
            continue
        lv = ev.level[name][ev.changes[clk]]
        before = ev.level[name][ev.changes[clk] - 1]
        # a clock edge within two half periods of the line's change counts as inside (a mode-0
        # clock's last fall just after CS rises; at a few samples per bit that is one edge in 30)
        st = ev.ticks(name)
        k = np.searchsorted(st, ct)
        near = np.minimum(np.abs(ct - st[np.clip(k - 1, 0, len(st) - 1)]), np.abs(st[np.clip(k, 0, len(st) - 1)] - ct))
        quiet = _dataless(ev, clk, name, ct, half)
        for active in (0, 1):
            at = (lv == active) | (before == active)
            # at most one edge per change of the line on the wrong side of it, close to it; edges
            # in bursts that carry no data at all (an SD card's 74+ wake-up clocks, CS and MOSI
            # high) count for no side
            wrong = ~at & ~quiet
            if float(np.mean(~wrong | (near <= 2 * half))) < BRACKET or int(np.count_nonzero(wrong)) > max(
                    len(st), (1 - BRACKET) * len(ct)):
                continue
            starts, ends = cs_windows(ev, name, active)
            held = np.searchsorted(ct, ends, side="left") - np.searchsorted(ct, starts, side="right")
            if int(np.count_nonzero(held >= 4)) != 1:
                continue
            # every change of the line away from the clock's running: not inside a burst (two
            # clock edges of its burst strictly before it and two after; coarse captures put the
            # last edge in the very sample of the deassert, or one edge after it)
            burst = np.concatenate([[0], np.cumsum(np.diff(ct) > 4 * half)])
            a = np.searchsorted(ct, st, side="left") - 1
            b = np.searchsorted(ct, st, side="right")
            ok = (a >= 1) & (b < len(ct) - 1)
            a, b = np.clip(a, 1, len(ct) - 2), np.clip(b, 1, len(ct) - 2)
            inside = ok & (burst[a - 1] == burst[b + 1])
            # ... or, if the clock runs on at the inactive level (an SD card's wake-up clocks with
            # CS high: eight edges or more there, and 98 % of them at the active level) and the
            # window closes again (a reset released once, with the clock running before and after
            # it, frames nothing)
            if inside.any() and not (np.count_nonzero(~at) >= 8 and float(np.mean(at)) >= BRACKET
                                     and len(st) >= 2):
                continue
            return name, active, 0.75, "once"
    return None


def _dataless(ev: Evidence, clk: str, cs: str, ct: np.ndarray, half: float) -> np.ndarray:
    """Per clock edge: its burst (a pause of more than four half periods splits them) carries no
    data: no line but the clock and ``cs`` changes from the burst's first edge to its last. An SD
    card in SPI mode is woken by 74 clocks or more with CS and MOSI high before CS is asserted
    (SD Physical Layer spec, power-up); in a capture of its start-up they are a good share of
    the edges, on the "wrong" side of a CS asserted once, and frame nothing."""
    burst = np.concatenate([[0], np.cumsum(np.diff(ct) > 4 * half)])
    first = np.flatnonzero(np.diff(np.concatenate([[-1], burst])))
    last = np.concatenate([first[1:], [len(ct)]]) - 1
    others = [ev.ticks(n) for n in ev.names if n not in (clk, cs)]
    moves = np.sort(np.concatenate(others)) if others else np.zeros(0, np.int64)
    changed = np.searchsorted(moves, ct[last], side="right") - np.searchsorted(moves, ct[first], side="left")
    return (changed == 0)[burst]


def _distinct(ev: Evidence, lines: list[str]) -> list[str]:
    """``lines`` without those whose changes (90 %) fall in the samples of an earlier one's."""
    out: list[str] = []
    for n in lines:
        t = ev.ticks(n)
        if not any(float(np.mean(np.isin(t, ev.ticks(m)))) >= 0.9 for m in out):
            out.append(n)
    return out


def few_changes(ev: Evidence, clk: str, cs: str, lines: list[str]) -> list[str]:
    """A bus with a CS whose lines change too rarely for the data-line tests (a game pad's one
    pressed button: one bit of eight): the line that changes while the transfer runs (from the
    CS's first change to the clock's last edge), weak evidence."""
    ct = ev.ticks(clk)
    st = ev.ticks(cs)
    if not len(ct) or not len(st):
        return []
    lo, hi = min(int(st[0]), int(ct[0])), int(ct[-1]) + 4 * max(half_of(ev, clk), 1.0)
    found = []
    for n in lines:
        t = ev.ticks(n)
        if 1 <= len(t) < MIN_CLOCK_CHANGES and np.any((t >= lo) & (t <= hi)):
            found.append(n)
    return sorted(found, key=lambda n: -len(ev.changes[n]))[:1]


def _data_line(ev: Evidence, name: str, clk: str, cs: str | None, active: int | None, half: float) -> bool:
    ch = ev.changes[name]
    if len(ch) < 2 or quadrature(ev, name, clk):
        return False
    if gated(ev, name, clk) is not None:
        return True           # a return-to-zero line: it changes on both edges, with the clock
    inside = in_windows(ev, ch, clk, cs, active, half)
    if inside.sum() < max(2, 0.3 * len(ch)):
        return False
    # SPI data changes at most once per bit: a line toggling several times within one clock
    # cycle (a UART against a slow frame strobe) is not this clock's data
    ct = ev.ticks(clk)
    cyc = np.searchsorted(ct, ev.t[ch[inside]], side="right")
    # within one clock phase, not in a pause between bursts (a data line is set up for the next
    # word's first bit there, after its last change of the word before)
    short = (cyc > 0) & (cyc < len(ct))
    short[short] = ct[cyc[short]] - ct[cyc[short] - 1] <= 4 * max(half, 1.0)
    _, inv, cnt = np.unique(cyc, return_inverse=True, return_counts=True)
    several = (cnt[inv] > 1) & short
    # a glitch: the line leaves its level and comes back within one clock phase, in less than half
    # of it (a bit-banged X2444M master's MOSI after some edges); no clock edge samples it
    tt = ev.t[ch[inside]]
    if len(tt) >= 2:
        pair = (cnt[inv] == 2)[:-1] & (cyc[:-1] == cyc[1:]) & short[:-1]
        phase = ct[np.minimum(cyc[:-1], len(ct) - 1)] - ct[np.maximum(cyc[:-1] - 1, 0)]
        spike = pair & (np.diff(tt) < 0.5 * phase)
        # ... now and then (a quarter of its changes at most): a line that pulses so in half its
        # changes (a 93LC56B's CS toggled by an MPSSE while the clock runs) is a strobe, no data
        if 2 * int(spike.sum()) <= 0.25 * len(tt):
            several[:-1] &= ~spike
            several[1:] &= ~spike
    if float(np.mean(several)) > MULTI:
        ev.multi[clk] = name
        return False
    j, off = in_cycle(ev, ev.t[ch[inside]], clk, half)
    lead, trail = lead_trail(ev, clk, j, idle_level(ev, clk, cs, active))
    if lead + trail < 2 or max(lead, trail) < DATA_EDGE * (lead + trail):
        return False
    # and soon after it: of the changes inside a clock cycle (not those at a window's start,
    # before its first edge), most within half a period (an IRQ toggles anywhere in the cycle)
    return float(np.mean(off <= max(1.0, half))) >= DATA_EDGE
