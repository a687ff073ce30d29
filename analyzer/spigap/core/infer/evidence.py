"""What a bounded prefix of the edge stream shows of each channel: its changes, how
regular they are (a clock), the windows a CS candidate brackets, where data changes
fall in the clock cycle. The other steps of inference read these measures."""

from __future__ import annotations

import numpy as np

from spigap.core.tickhist import percentiles_of

MIN_CLOCK_CHANGES = 16
BRACKET = 0.98                # share of SCLK edges at the CS active level


class Evidence:
    """Per-channel change ticks of the prefix (ticks t, packed states s)."""

    def __init__(self, t: np.ndarray, s: np.ndarray, names: list[str]):
        self.t, self.s, self.names = t, s, names
        self.end = int(t[-1]) + 1 if len(t) else 1
        self.level = {}
        self.changes = {}
        self.clock: dict[str, tuple[float, float]] = {}     # clock_score of each channel, once
        self.refused: list[str] = []         # what looked like a bus and was not (buses.find_buses)
        self.lookalikes: list = []           # lookalike.Lookalike: buses refused as another protocol
        self.multi: dict[str, str] = {}      # clock -> a line that changes several times per cycle of it
        self.cs_rivals: dict[str, tuple[str, ...]] = {}  # clock -> other lines bracketing its bursts as its CS does
        # clock without a CS -> (line, level, share of edges): it brackets most bursts, toggled inside them
        self.cs_near: dict[str, tuple[str, int, float]] = {}
        # clock without a CS -> (line, level): asserted once around some of its bursts, the clock
        # running at its other level too (buses._partial: the other reading)
        self.cs_partial: dict[str, tuple[str, int]] = {}
        self.tick_s: float | None = None     # seconds per tick, as the capture states it (settle sets it)
        for j, name in enumerate(names):
            lv = ((s >> np.uint32(j)) & 1).astype(np.int8)
            self.level[name] = lv
            self.changes[name] = np.flatnonzero(lv[1:] != lv[:-1]) + 1     # entry indices

    def ticks(self, name: str) -> np.ndarray:
        return self.t[self.changes[name]]


def clock_score(ev: Evidence, name: str) -> tuple[float, float]:
    """(share of consecutive clock periods that match each other, half period in ticks).

    A clock's consecutive periods are alike even when its speed changes (the
    LTC2422 capture runs two clock rates inside one transfer); a data line's runs
    are random multiples of the bit time; a CS alternates a short window and a
    long gap (a steady conversion rate makes its "periods" alike, not its phases)."""
    if name not in ev.clock:
        ev.clock[name] = _clock_score(ev.ticks(name))
    return ev.clock[name]


def pulse_train(ev: Evidence, name: str) -> tuple[float, float]:
    """``clock_score`` of a bit-banged clock's pulse train: a short pulse per bit, each phase as
    long as the same phase before it, whatever the duty cycle (the ADF4351 capture's clock is high
    3 µs of 14). A CS at a steady conversion rate is such a train too, and a WS2812 line sending
    equal bits: ``find_buses`` looks for these only where no channel toggles like a clock, and
    keeps them only with a CS or a data line on their edges."""
    return _clock_score(ev.ticks(name), pulses=True)


def _clock_score(ct: np.ndarray, pulses: bool = False) -> tuple[float, float]:
    if len(ct) < MIN_CLOCK_CHANGES:
        return 0.0, 0.0
    di = np.diff(ct)
    d = di.astype(float)
    # consecutive periods (high + low phase) alike, and the two phases of each within
    # 1:3 of each other (duty cycles of 25-75 %; the enc28j60 capture's clock is 1:2)
    per = d[:-1] + d[1:]
    alike = np.abs(per[:-1] - per[1:]) <= np.maximum(1.0, 0.2 * np.maximum(per[:-1], per[1:]))
    duty = (np.maximum(d[:-1], d[1:]) <= 3 * np.minimum(d[:-1], d[1:]))[:-1]
    if pulses:
        # ... or each phase as long as the same phase before it (a pulse train)
        steady = np.abs(d[:-2] - d[2:]) <= np.maximum(1.0, 0.2 * np.maximum(d[:-2], d[2:]))
        duty = duty | np.append(steady[:-1] & steady[1:], False)
    return float(np.mean(alike & duty)), percentiles_of(di[:-1] + di[1:], [25])[0] / 2


def on_edges(ev: Evidence, line: str, clk: str, half: float, within: float = 0.5) -> float:
    """Share of ``line``'s changes within ``within`` clock phases (half a phase unless told) of
    one of ``clk``'s changes."""
    lt, ct = ev.ticks(line), ev.ticks(clk)
    if not len(lt) or not len(ct):
        return 0.0
    _, prev, nxt = _around(ct, lt)
    dist = np.minimum(np.abs(lt - prev), np.abs(nxt - lt))
    return float(np.mean(dist <= max(1.0, within * half)))


def _around(ct: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(insertion index, the clock change before, the one at or after) of each time in
    ``t`` among the sorted change ticks ``ct`` (clipped to the first/last change)."""
    j = np.searchsorted(ct, t)
    return j, ct[np.clip(j - 1, 0, len(ct) - 1)], ct[np.clip(j, 0, len(ct) - 1)]


def cs_windows(ev: Evidence, cs: str, active: int) -> tuple[np.ndarray, np.ndarray]:
    """(assert ticks, deassert ticks) of the CS's active windows (the last may be open)."""
    lv = ev.level[cs]
    idx = ev.changes[cs]
    starts = ev.t[idx[lv[idx] == active]]
    ends = ev.t[idx[lv[idx] != active]]
    if lv[0] == active:
        starts = np.concatenate([[0], starts])
    if len(ends) < len(starts):
        ends = np.concatenate([ends, [ev.end]])
    return starts, ends


def cs_level(ev: Evidence, cs: str, clk: str, min_windows: int = 2) -> tuple[int | None, float, int]:
    """(active level, share of SCLK edges inside its windows, windows holding SCLK
    bursts) of a CS candidate; active None when it brackets nothing.

    The active level is the one SCLK runs at. Some peripherals' clocks also run
    while CS is inactive (the LTC2422 capture: 1040 of 1712 edges); then the
    active level is the one whose windows each hold a burst and which is held the
    shorter time (a window, not the idle between them)."""
    ci = ev.changes[clk]
    if not len(ci) or not len(ev.changes[cs]):
        return None, 0.0, 0
    # the level before or after each clock entry: at coarse sample rates the last
    # SCLK edge often falls in the very sample of the CS deassert
    lv, before = ev.level[cs][ci], ev.level[cs][ci - 1]
    ct = ev.t[ci]
    best: tuple[int | None, float, int] = (None, 0.0, 0)
    for active in (0, 1):
        share = float(np.mean((lv == active) | (before == active)))
        starts, ends = cs_windows(ev, cs, active)
        if len(starts) < min_windows:
            continue
        a = np.searchsorted(ct, starts, side="right")
        b = np.searchsorted(ct, ends, side="left")
        held = (b - a) >= 4
        windows = int(held.sum())
        if share >= BRACKET and windows >= min_windows and (min_windows < 2 or _tight(ev, ct, starts, ends)):
            return active, share, windows
        duty = float(np.sum(ends - starts)) / max(1, ev.end)
        if held.mean() >= 0.9 and share >= 0.25 and duty < 0.5 and windows > best[2]:
            best = (active, share, windows)
    return best


def _tight(ev: Evidence, ct: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> bool:
    """The CS's inactive periods are where the bus pauses: of the SCLK pauses at least as
    long as the shortest one holding an inactive period, most hold one. A line that
    merely never changes during a burst (an IRQ, a handshake) goes inactive in a few
    of the pauses only."""
    inactive_at = ends[:-1] if len(ends) > 1 else ends[:0]          # deassert times between windows
    if not len(inactive_at) or len(ct) < 2:
        return True
    i = np.searchsorted(ct, inactive_at, side="right")               # pause (ct[i-1], ct[i]) holds it
    ok = (i > 0) & (i < len(ct))
    if not ok.any():
        return True
    pauses = np.unique(i[ok])
    d = np.diff(ct)                                                   # pause j-1 ends at edge j
    # the typical pause holding one (its median: a CS blip between two commands may fall in a
    # pause no longer than a byte gap, and says nothing about the other pauses)
    typical = float(np.median(d[pauses - 1]))
    return int(np.count_nonzero(d[pauses - 1] >= typical)) >= 0.5 * int(np.count_nonzero(d >= typical))


def in_windows(ev: Evidence, idx: np.ndarray, clk: str, cs: str | None, active: int | None,
            half: float) -> np.ndarray:
    """Which entries ``idx`` fall inside CS windows (or, without CS, inside clock bursts)."""
    t = ev.t[idx]
    if cs is not None and active is not None:
        return ev.level[cs][idx] == active
    ct = ev.ticks(clk)
    j, prev, nxt = _around(ct, t)
    return (j > 0) & (j < len(ct)) & (nxt - prev <= 4 * max(half, 1))


def in_cycle(ev: Evidence, times: np.ndarray, clk: str, half: float) -> tuple[np.ndarray, np.ndarray]:
    """(index of the clock change at or before, ticks since it) of the ``times`` that fall
    less than one clock period after a clock edge. At or before: data lines switch on (or
    just after) the shifting edge, often in the very sample of it at low sample rates."""
    ct = ev.ticks(clk)
    if not len(ct) or not len(times):
        return np.empty(0, np.int64), np.empty(0, np.int64)
    j = np.searchsorted(ct, times, side="right") - 1
    off = times - ct[np.maximum(j, 0)]
    ok = (j >= 0) & (off < 2 * max(half, 1))
    return j[ok], off[ok]


def lead_trail(ev: Evidence, clk: str, j: np.ndarray, idle: int) -> tuple[int, int]:
    """Of the clock changes ``j`` (indices into its changes): (leading, trailing) ones.
    Leading = the edge away from the idle level."""
    leading = ev.level[clk][ev.changes[clk][j]] != idle
    return int(leading.sum()), int((~leading).sum())


def idle_level(ev: Evidence, clk: str, cs: str | None = None, active: int | None = None) -> int:
    """SCLK's idle level (CPOL): with a CS, its level at the CS's changes where the clock is idle
    around them (no SCLK edge within a half period either side; the last edge in the very sample
    of the deassert leaves it at its idle level too), not its level over all the time CS is
    inactive: on a clock shared with a device whose CS is not captured, the clock runs there for
    that device (the TrueMove3's power-up: half of SCK's edges fall while NCS is high, and the
    level over those entries read mode 0 for a mode-3 sensor). Without such a change, its level
    over the time CS is inactive; without CS, over its longest pauses."""
    lv = ev.level[clk]
    if cs is not None and active is not None:
        at = _at_cs_changes(ev, clk, cs)
        if at is not None:
            return at
        quiet = ev.level[cs] != active
        if quiet.any():
            return int(np.round(lv[quiet].mean()))
    # without CS: the level the clock holds over its longest pauses
    ci = ev.changes[clk]
    if len(ci) < 2:
        return int(lv[0])
    ct = ev.t[ci]
    d = np.diff(ct)
    _, half = clock_score(ev, clk)
    long = np.flatnonzero(d > 4 * max(half, 1))      # pauses between bursts
    if not len(long):
        return int(lv[0])
    return int(np.round(lv[ci[long]].mean()))


def _at_cs_changes(ev: Evidence, clk: str, cs: str) -> int | None:
    """The clock's level at the CS's changes where it is idle around them (the level most of
    them see), or None when no CS change has the clock quiet around it."""
    idx = ev.changes[cs]
    ct = ev.ticks(clk)
    if not len(idx) or not len(ct):
        return None
    half = max(half_of(ev, clk), 1.0)
    before, after, same = edges_around(ct, ev.t[idx])
    # idle around it: no edge within a half period after it, and none within one before it unless
    # it is in the very sample (a coarse capture's last edge at the deassert)
    quiet = (after > half) & ((before > half) | same)
    if not quiet.any():
        return None
    return int(np.round(ev.level[clk][idx[quiet]].mean()))


def edges_around(ct: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For each time in ``t`` among the sorted clock change ticks ``ct``: (ticks since the last
    clock edge strictly before it, ticks to the first strictly after it, inf where there is
    none; whether a clock edge falls in its very sample). A coarse capture puts SCLK's last edge
    in the sample of the CS's deassert: each caller says how that edge counts."""
    j = np.searchsorted(ct, t, side="left")
    k = np.searchsorted(ct, t, side="right")
    last = len(ct) - 1
    before = np.where(j > 0, t - ct[np.clip(j - 1, 0, last)], np.inf)
    after = np.where(k <= last, ct[np.clip(k, 0, last)] - t, np.inf)
    return before, after, k > j


def edges_held(ct: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Clock edges inside each window [starts, ends] (one in the sample of the window's start
    outside it, one in the sample of its end inside: the last edge of a coarse capture)."""
    return np.searchsorted(ct, ends, side="right") - np.searchsorted(ct, starts, side="right")


def bursts(ev: Evidence, clk: str) -> tuple[np.ndarray, np.ndarray]:
    """Without a CS: (start, end) ticks around each SCLK burst, bursts split where SCLK
    pauses for more than eight half periods (a tick before the first edge, after the last)."""
    ct = ev.ticks(clk)
    gap = np.flatnonzero(np.diff(ct) > 8 * max(half_of(ev, clk), 1))
    return (np.concatenate([[ct[0]], ct[gap + 1]]) - 1, np.concatenate([ct[gap], [ct[-1]]]) + 1)


def half_of(ev: Evidence, clk: str) -> float:
    return clock_score(ev, clk)[1]


def gated(ev: Evidence, line: str, clk: str) -> int | None:
    """The clock level during which ``line`` holds its bit when it is gated by the clock (a
    return-to-zero data line, DATA = CLK and the bit: it rises only with the clock's rises and
    falls with its falls, in their very samples, as a bit-banged MAX6921 feed does): 1 (valid
    while the clock is high), 0 (the mirror), None when it is not gated (90 % of its changes)."""
    lt, ct = ev.ticks(line), ev.ticks(clk)
    if len(lt) < 4 or len(ct) < 4:
        return None
    k = np.searchsorted(ct, lt)
    hit = (k < len(ct)) & (ct[np.minimum(k, len(ct) - 1)] == lt)
    if float(np.mean(hit)) < 0.9:
        return None
    same = ev.level[line][ev.changes[line]] == ev.level[clk][ev.changes[clk]][np.minimum(k, len(ct) - 1)]
    # and it carries bits: it stays at rest through a fifth of the clock's cycles or more (a line
    # pulsing with nearly every cycle is a copy of the clock, not data)
    if len(lt) > 0.8 * len(ct):
        return None
    for valid, agree in ((1, same), (0, ~same)):
        if float(np.mean(hit & agree)) >= 0.9:
            return valid
    return None


LANES_TOGETHER = 0.5   # a wide bus' lane changes in the sample of another lane's change this often


def together(ev: Evidence, lines: tuple) -> tuple:
    """The lines of ``lines`` that change with another of them (LANES_TOGETHER of their changes in
    the very sample of another's): a dual or quad SPI bus shifts a nibble per clock edge, its
    lanes switch together; a line that merely passed the data-line tests beside them (a noise
    channel, an interrupt) does not."""
    out = []
    for n in lines:
        t = ev.ticks(n)
        others = [ev.ticks(m) for m in lines if m != n]
        if len(t) and others and float(np.mean(np.isin(t, np.concatenate(others)))) >= LANES_TOGETHER:
            out.append(n)
    return tuple(out)
