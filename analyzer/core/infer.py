"""SPI settings the user did not give, inferred from the signals (docs/inference.md).

Names still win where they settle a role (``config.autodetect``, a file's own
decoder settings); everything else comes from a bounded prefix of the edge
stream, read once: the same blocks then go on to the framer, so inference costs
no second pass and works on a pipe.

* SCLK: a channel whose changes come in regular bursts — consecutive change
  pairs span one clock period. When two channels qualify and one's changes fall
  on the other's, the one with more changes is the clock (a data line carrying
  0x55 toggles once per period, the clock twice); channels whose changes do not
  fall on a clock's edges form another bus.
* CS: the channel whose level is the same at (nearly) every SCLK edge of the
  bus and which leaves that level between bursts; among several, the one whose
  active windows are the most numerous (the tightest bracket). Its level during
  the bursts is the active level. None when no channel brackets the bursts.
* data lines: channels that change inside CS windows (inside bursts without a
  CS) and, there, nearly always right after one kind of clock edge (the
  shifting edge). IRQ, reset, trigger lines, a UART and constant channels fail
  one of the two tests.
* CPOL: the SCLK level while CS is inactive (between bursts without a CS).
* CPHA: data changes follow the shifting edge: the trailing edge of a clock
  cycle for CPHA 0, the leading one for CPHA 1.
* word size: idle clock time inside windows (a controller's pause between
  words) at bit counts that are multiples of w gives w; else the greatest common
  divisor of the bits per window, 8 when 8 divides it (16, 32 ... fit too: said).
* MOSI vs MISO cannot be known from the wires; names decide, else weak
  evidence: a line driven by the peripheral changes as its output is enabled or
  released (at CS edges) and often answers the command word with a constant.
  The choice and its confidence are reported.

Every setting is reported with where it came from (given, name, file,
inferred, default), a confidence in [0, 1] and a note; low confidence is a
warning naming the option that settles it. Nothing here guesses silently: where
two interpretations fit, the note says so.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Iterator

import numpy as np

from spigap.core import config as config_mod
from spigap.core.config import SpiConfig
from spigap.core.tickhist import median_of, percentiles_of
from spigap.core.settings_check import COMMON_WORDSIZES
from spigap.errors import CaptureTruncated, UsageError
from spigap.io.base import EdgeBlock
from spigap.io.stdin import STDIN_PATH

PREFIX_ENTRIES = 1 << 17      # edge-stream entries inferred from (bounded memory, one pass)
LIVE_PREFIX_S = 2.0           # on a pipe: at most this long waiting for them
MAX_CHANNELS = 32             # an edge stream packs at most 32 channels
MIN_CLOCK_CHANGES = 16
REGULAR = 0.6                 # share of change pairs spanning one period for a clock
ON_CLOCK = 0.7                # share of a line's changes on a clock's edges to belong to its bus
BRACKET = 0.98                # share of SCLK edges at the CS active level
DATA_EDGE = 0.75              # share of a data line's changes after one kind of clock edge
LOW_CONFIDENCE = 0.75         # below this a setting is a warning naming its option
ROLES = ("clk", "mosi", "miso", "cs")
SETTINGS = ("mode", "cs_polarity", "wordsize", "bitorder")
ROLE_OPTION = {"clk": "--clk", "mosi": "--mosi", "miso": "--miso", "cs": "--cs"}
SETTING_OPTION = {"mode": "--mode", "cs_polarity": "--cs-polarity", "wordsize": "--wordsize",
                  "bitorder": "--bitorder"}


@dataclasses.dataclass
class Source:
    """Where one setting came from: 'given', 'name', 'file', 'inferred' or 'default'."""

    how: str
    confidence: float = 1.0
    note: str = ""

    def as_dict(self) -> dict:
        return {"from": self.how, "confidence": round(float(self.confidence), 3), "note": self.note}


@dataclasses.dataclass
class Bus:
    """One SPI bus found in the signals (channel names; cs None = CS-less)."""

    clk: str
    cs: str | None
    data: list[str]
    edges: int                     # SCLK changes in the prefix (the busiest bus is not always first)
    cs_active: int | None = None   # the CS level during the bursts
    cs_confidence: float = 0.0

    def channels(self) -> list[str]:
        return [self.clk] + ([self.cs] if self.cs else []) + self.data


@dataclasses.dataclass
class Settled:
    """The outcome: the configuration to analyze with, the edge stream in its
    channel order, and the report of where every setting came from."""

    cfg: SpiConfig
    names: list[str]
    blocks: Iterator[EdgeBlock]
    sources: dict[str, Source]
    buses: list[Bus]
    warnings: list[str]
    evidence: Evidence | None = None    # the prefix the signals were read from (None: names sufficed)

    def sources_dict(self) -> dict:
        return {k: v.as_dict() for k, v in self.sources.items()}


# ---------------------------------------------------------------- the stream
def settle(reader, cfg: SpiConfig) -> Settled:
    """Resolve ``cfg`` against the capture: the user's settings, then names, then
    the signals. Returns the stream to frame (it starts with the prefix read here)."""
    info = reader.info
    channels = list(info.channels)
    named = cfg.resolve(channels, path=info.path, defaults=info.spi_channels, partial=True)
    warnings: list[str] = []
    prefix_of: dict[str, str] = {}
    if any(getattr(named, r) is None for r in ROLES):
        named = _by_bus_prefix(named, cfg, channels, warnings, prefix_of)
    sources: dict[str, Source] = {}
    for role in ROLES:
        name = getattr(named, role)
        if getattr(cfg, role) is not None:
            sources[role] = Source("given")
        elif name is not None:
            from_file = (info.spi_channels or {}).get(role) == name
            sources[role] = Source("file" if from_file else "name", 1.0,
                                   "the capture's decoder settings" if from_file else f"named {name!r}"
                                   + (f" (bus prefix {prefix_of[name]!r})" if name in prefix_of else ""))
        elif role == "cs" and cfg.no_cs:
            sources[role] = Source("given", 1.0, "--no-cs")
    for s in SETTINGS:
        if s in cfg.assumed:
            sources[s] = Source("default", 1.0, "--no-infer: the default")
        elif s not in cfg.infer:
            sources[s] = Source("given")
    # roles the names leave open are worth inferring only if some channel is not assigned yet
    assigned = {getattr(named, r) for r in ROLES} - {None}
    need_roles = any(r not in sources for r in ROLES) and any(c not in assigned for c in channels)
    if not need_roles and not cfg.infer:
        out = _finish_roles(named, sources, info)
        names = out.stream_names()
        return Settled(out, names, reader.edges(names), sources, [], warnings)

    request = channels[:MAX_CHANNELS] if need_roles else _finish_roles(named, sources, info).stream_names()
    if need_roles and len(channels) > MAX_CHANNELS:
        request = named.stream_names()
        request += [c for c in channels if c not in request][:MAX_CHANNELS - len(request)]
        warnings.append(f"the capture has {len(channels)} channels; roles were looked for among the "
                        f"first {MAX_CHANNELS} (name the others with --clk/--mosi/--miso/--cs)")
    it = reader.edges(request)
    prefix, pending, ev = read_prefix(it, request, live=info.path == STDIN_PATH)
    out, buses = _infer(named, cfg, sources, ev, need_roles, warnings, info)
    names = out.stream_names()
    blocks = _stream(prefix, it, pending, request, names)
    return Settled(out, names, blocks, sources, buses, warnings, ev)


def read_prefix(it: Iterator[EdgeBlock], names: list[str], live: bool = False):
    """(blocks, a CaptureTruncated to raise after them or None, Evidence) of the
    first PREFIX_ENTRIES entries of an edge stream (the blocks that hold them; the evidence
    is of those entries only). ``live`` (a
    pipe): also stop after LIVE_PREFIX_S of waiting, so a slow live stream is
    not held back (spigap monitor prints its first interval soon)."""
    prefix: list[EdgeBlock] = []
    n = 0
    pending: BaseException | None = None
    t0 = time.monotonic()
    try:
        for b in it:
            prefix.append(b)
            n += len(b)
            if n >= PREFIX_ENTRIES or (live and time.monotonic() - t0 >= LIVE_PREFIX_S):
                break
    except CaptureTruncated as e:
        pending = e
    if prefix:
        # the evidence is the first PREFIX_ENTRIES entries exactly (the blocks go on whole
        # to the framer): a dense capture's first block alone may hold four times as many
        t = np.concatenate([b.ticks for b in prefix])[:PREFIX_ENTRIES]
        s = np.concatenate([b.states for b in prefix])[:PREFIX_ENTRIES]
    else:
        t, s = np.zeros(1, np.int64), np.zeros(1, np.uint32)
    return prefix, pending, Evidence(t, s, names)


def all_buses(reader) -> list[Bus]:
    """Every SPI bus in a bounded prefix of the capture (``spigap detect``)."""
    names = list(reader.info.channels)[:MAX_CHANNELS]
    _, _, ev = read_prefix(reader.edges(names), names)
    return find_buses(ev, exclude=set())


def buses_seen(settled: Settled, channels: list[str]) -> list[Bus] | None:
    """``all_buses`` from the prefix ``settle`` has read, when it holds the same channels
    (None: names sufficed, or it read fewer channels; ``all_buses`` then reads its own)."""
    ev = settled.evidence
    if ev is None or list(ev.names) != list(channels)[:MAX_CHANNELS]:
        return None
    return find_buses(ev, exclude=set())


def _by_bus_prefix(named: SpiConfig, cfg: SpiConfig, channels: list[str], warnings: list[str],
                   prefix_of: dict[str, str]) -> SpiConfig:
    """Roles from ``<bus>_<role>`` names ("rpi_CLK"): the bus a given channel belongs
    to, else the first; the others are listed with the options that select them."""
    groups = config_mod.bus_groups(channels)
    if not groups:
        return named
    given = {getattr(cfg, r) for r in ROLES} - {None}
    chosen = next((p for p, g in groups.items() if given & set(g.values())), next(iter(groups)))
    out = dataclasses.replace(named)
    for role, name in groups[chosen].items():
        if getattr(out, role) is None and name not in given:
            setattr(out, role, name)
            prefix_of[name] = chosen
    for p, g in groups.items():
        if p != chosen:
            opts = " ".join(f"{ROLE_OPTION[r]} {g[r]}" for r in ROLES if r in g)
            warnings.append(f"the capture holds another SPI bus by its names ({p}_*); this analysis is of "
                            f"{chosen}_*; select the other with {opts}")
    return out


def _finish_roles(named: SpiConfig, sources: dict[str, Source], info) -> SpiConfig:
    """Roles from names only (nothing to infer): the old errors when they do not suffice."""
    _check_roles(named, info)
    for role in ROLES:
        sources.setdefault(role, Source("name", 1.0, "no channel has this role's name") if role != "cs"
                           else Source("name", 1.0, "no channel is named like a CS: framed without CS"))
    return named


def _check_roles(cfg: SpiConfig, info) -> None:
    """A clock, a data line, and no channel in two roles: else one error line naming the option."""
    if cfg.clk is None:
        raise UsageError(f"no clock channel found; the capture has: {', '.join(info.channels)}",
                         path=info.path, hint="name it with --clk")
    if cfg.mosi is None and cfg.miso is None:
        raise UsageError(f"no MOSI or MISO channel found; the capture has: {', '.join(info.channels)}",
                         path=info.path, hint="name them with --mosi/--miso")
    used = [n for n in (cfg.clk, cfg.mosi, cfg.miso, cfg.cs) if n is not None]
    if len(set(used)) != len(used):
        raise UsageError(f"one channel is mapped to two roles: clk={cfg.clk} mosi={cfg.mosi} "
                         f"miso={cfg.miso} cs={cfg.cs}", path=info.path)


def _stream(prefix: list[EdgeBlock], rest: Iterator[EdgeBlock], pending: BaseException | None,
            request: list[str], names: list[str]) -> Iterator[EdgeBlock]:
    """The prefix then the rest of the stream, with the states of ``request``'s
    channels re-packed as ``names`` (entries where none of them changes dropped)."""
    blocks = itertools.chain(prefix, _then_raise(rest, pending))
    if request == names:
        yield from blocks
        return
    src = [request.index(n) for n in names]
    last = None
    for b in blocks:
        ns = np.zeros(len(b), np.uint32)
        for j, k in enumerate(src):
            ns |= ((b.states >> np.uint32(k)) & np.uint32(1)) << np.uint32(j)
        keep = np.empty(len(ns), bool)
        keep[1:] = ns[1:] != ns[:-1]
        keep[0] = last is None or ns[0] != last
        last = ns[-1]
        if keep.any():
            yield EdgeBlock(b.ticks[keep], ns[keep])


def _then_raise(rest: Iterator[EdgeBlock], pending: BaseException | None) -> Iterator[EdgeBlock]:
    if pending is not None:
        raise pending
    yield from rest


# ---------------------------------------------------------------- evidence
class Evidence:
    """Per-channel change ticks of the prefix (ticks t, packed states s)."""

    def __init__(self, t: np.ndarray, s: np.ndarray, names: list[str]):
        self.t, self.s, self.names = t, s, names
        self.end = int(t[-1]) + 1 if len(t) else 1
        self.level = {}
        self.changes = {}
        self.clock: dict[str, tuple[float, float]] = {}     # clock_score of each channel, once
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


def _clock_score(ct: np.ndarray) -> tuple[float, float]:
    if len(ct) < MIN_CLOCK_CHANGES:
        return 0.0, 0.0
    di = np.diff(ct)
    d = di.astype(float)
    # consecutive periods (high + low phase) alike, and the two phases of each within
    # 1:3 of each other (duty cycles of 25-75 %; the enc28j60 capture's clock is 1:2)
    per = d[:-1] + d[1:]
    alike = np.abs(per[:-1] - per[1:]) <= np.maximum(1.0, 0.2 * np.maximum(per[:-1], per[1:]))
    duty = (np.maximum(d[:-1], d[1:]) <= 3 * np.minimum(d[:-1], d[1:]))[:-1]
    return float(np.mean(alike & duty)), percentiles_of(di[:-1] + di[1:], [25])[0] / 2


def _on_edges(ev: Evidence, line: str, clk: str, half: float) -> float:
    """Share of ``line``'s changes within half a clock phase of one of ``clk``'s changes."""
    lt, ct = ev.ticks(line), ev.ticks(clk)
    if not len(lt) or not len(ct):
        return 0.0
    _, prev, nxt = _around(ct, lt)
    dist = np.minimum(np.abs(lt - prev), np.abs(nxt - lt))
    return float(np.mean(dist <= max(1.0, half / 2)))


def _around(ct: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(insertion index, the clock change before, the one at or after) of each time in
    ``t`` among the sorted change ticks ``ct`` (clipped to the first/last change)."""
    j = np.searchsorted(ct, t)
    return j, ct[np.clip(j - 1, 0, len(ct) - 1)], ct[np.clip(j, 0, len(ct) - 1)]


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
        if any(_on_edges(ev, name, c, h) >= ON_CLOCK for c, h in clocks):
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


def _cs_windows(ev: Evidence, cs: str, active: int) -> tuple[np.ndarray, np.ndarray]:
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
        starts, ends = _cs_windows(ev, cs, active)
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
    shortest = d[pauses - 1].min()
    return len(pauses) >= 0.5 * int(np.count_nonzero(d >= shortest))


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
    inside = _inside(ev, ch, clk, cs, active, half)
    if inside.sum() < max(2, 0.3 * len(ch)):
        return False
    j, off = _in_cycle(ev, ev.t[ch[inside]], clk, half)
    lead, trail = _lead_trail(ev, clk, j, _idle_level(ev, clk, cs, active))
    if lead + trail < 2 or max(lead, trail) < DATA_EDGE * (lead + trail):
        return False
    # and soon after it: of the changes inside a clock cycle (not those at a window's start,
    # before its first edge), most within half a period (an IRQ toggles anywhere in the cycle)
    return float(np.mean(off <= max(1.0, half))) >= DATA_EDGE


def _inside(ev: Evidence, idx: np.ndarray, clk: str, cs: str | None, active: int | None,
            half: float) -> np.ndarray:
    """Which entries ``idx`` fall inside CS windows (or, without CS, inside clock bursts)."""
    t = ev.t[idx]
    if cs is not None and active is not None:
        return ev.level[cs][idx] == active
    ct = ev.ticks(clk)
    j, prev, nxt = _around(ct, t)
    return (j > 0) & (j < len(ct)) & (nxt - prev <= 4 * max(half, 1))


def _in_cycle(ev: Evidence, times: np.ndarray, clk: str, half: float) -> tuple[np.ndarray, np.ndarray]:
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


def _lead_trail(ev: Evidence, clk: str, j: np.ndarray, idle: int) -> tuple[int, int]:
    """Of the clock changes ``j`` (indices into its changes): (leading, trailing) ones.
    Leading = the edge away from the idle level."""
    leading = ev.level[clk][ev.changes[clk][j]] != idle
    return int(leading.sum()), int((~leading).sum())


def _idle_level(ev: Evidence, clk: str, cs: str | None = None, active: int | None = None) -> int:
    lv = ev.level[clk]
    if cs is not None and active is not None:
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


# ---------------------------------------------------------------- the settings
def _infer(named: SpiConfig, cfg: SpiConfig, sources: dict[str, Source], ev: Evidence, need_roles: bool,
           warnings: list[str], info) -> tuple[SpiConfig, list[Bus]]:
    out = dataclasses.replace(named, infer=frozenset(), assumed=frozenset())
    buses: list[Bus] = []
    if need_roles:
        fixed = {getattr(named, r) for r in ROLES} - {None}
        buses = find_buses(ev, exclude={n for n in fixed if n != named.clk})
        bus = _pick_bus(buses, named)
        if bus is None:
            if named.clk is None:
                raise UsageError(f"no SPI clock found in the signals (no channel toggles in regular bursts); "
                                 f"the capture has: {', '.join(info.channels)}", path=info.path,
                                 hint="name the clock with --clk (spigap detect shows what was found)")
            bus = Bus(named.clk, None, [], len(ev.changes.get(named.clk, [])))
        if named.clk is None:
            out.clk = bus.clk
            sources["clk"] = Source("inferred", 0.95, "toggles in regular bursts")
        if "cs" not in sources:
            if bus.cs is not None and bus.cs not in {out.mosi, out.miso}:
                out.cs = bus.cs
                sources["cs"] = Source("inferred", bus.cs_confidence, "its level brackets the SCLK bursts"
                                       if bus.cs_confidence >= LOW_CONFIDENCE else
                                       "each of its windows holds an SCLK burst, but SCLK also runs outside them")
            else:
                out.cs = None
                sources["cs"] = Source("inferred", 0.8, "no channel brackets the SCLK bursts: "
                                       "framed without CS (by SCLK idle time)")
        data_lines = [d for d in bus.data if d not in {out.clk, out.cs}]
        _infer_settings(out, cfg, sources, ev, data_lines + [d for d in (out.mosi, out.miso) if d])
        active = (0 if out.cs_active_low else 1) if out.cs is not None else None
        _assign_data(out, Bus(out.clk or bus.clk, out.cs, data_lines, bus.edges, active), ev, sources)
        if len(buses) > 1:
            others = [b for b in buses if b.clk != out.clk]
            for b in others:
                opts = " ".join(f"{ROLE_OPTION[r]} {n}" for r, n in
                                (("clk", b.clk), ("cs", b.cs)) if n) + "".join(
                    f" --{'mosi' if i == 0 else 'miso'} {d}" for i, d in enumerate(b.data[:2]))
                warnings.append(f"the capture holds another SPI bus (clk={b.clk}"
                                f"{f' cs={b.cs}' if b.cs else ''} data={','.join(b.data) or '–'}); "
                                f"this analysis is of clk={out.clk}; select the other with {opts}")
    _check_roles(out, info)
    if "cs" not in sources:
        sources["cs"] = Source("name", 1.0, "no channel is named like a CS: framed without CS")
    for role in ("mosi", "miso"):
        sources.setdefault(role, Source("inferred", 0.8, "no second data line"))
    if not need_roles:
        _infer_settings(out, cfg, sources, ev, [d for d in (out.mosi, out.miso) if d])
    for key, src in sources.items():
        if src.how in ("inferred", "default") and src.confidence < LOW_CONFIDENCE:
            opt = ROLE_OPTION.get(key) or SETTING_OPTION.get(key, key)
            warnings.append(f"{key} {_value(out, key)} is {src.how} with confidence {src.confidence:.2f} "
                            f"({src.note}); give {opt} if it is wrong")
    return out, buses


def _pick_bus(buses: list[Bus], named: SpiConfig) -> Bus | None:
    """The bus the names point to (a named role on it), else the first."""
    if not buses:
        return None
    fixed = {getattr(named, r) for r in ROLES} - {None}
    for b in buses:
        if b.clk in fixed or (b.cs and b.cs in fixed):
            return b
    return buses[0]


def _value(cfg: SpiConfig, key: str):
    if key == "mode":
        return cfg.mode
    if key == "cs_polarity":
        return "low" if cfg.cs_active_low else "high"
    if key == "bitorder":
        return "lsb" if cfg.lsb_first else "msb"
    return getattr(cfg, key)


def _assign_data(out: SpiConfig, bus: Bus, ev: Evidence, sources: dict[str, Source]) -> None:
    """MOSI and MISO among the bus's data lines: names first, then weak evidence."""
    data = [d for d in bus.data if d not in {out.mosi, out.miso, out.clk, out.cs}]
    open_roles = [r for r in ("mosi", "miso") if getattr(out, r) is None and r not in sources]
    if not open_roles or not data:
        return
    if len(open_roles) == 1:
        role = open_roles[0]
        setattr(out, role, data[0])
        sources[role] = Source("inferred", 0.9 if len(data) == 1 else 0.6,
                               "the other data line is named" + (
                                   "" if len(data) == 1 else f"; other candidates: {', '.join(data[1:])}"))
        return
    bits = None
    if len(data) == 2:
        # the first word's length that tells the two lines apart best: with an unsure word
        # size, 8 bits of a 16-bit counter repeat as much as a peripheral's status byte
        bits = max((8, 16, 32), key=lambda k: abs(_repeat_share(ev, data[0], out, bus, k)
                                                  - _repeat_share(ev, data[1], out, bus, k)))
    scores = {d: _peripheral_score(ev, d, out, bus, bits) for d in data}
    if len(data) == 1:
        d = data[0]
        sc = scores[d]
        role = "miso" if sc > 0 else "mosi"
        other = "mosi" if role == "miso" else "miso"
        setattr(out, role, d)
        sources[role] = Source("inferred", min(0.8, 0.5 + abs(sc) / 2),
                               "one data line; " + ("its first words repeat or it is released after CS: "
                                                    "a peripheral's output" if sc > 0 else
                                                    "its first words vary: a controller's commands"))
        sources[other] = Source("inferred", 0.9, "no second data line")
        return
    ranked = sorted(data, key=lambda d: scores[d])
    mosi, miso = ranked[0], ranked[-1]
    margin = scores[miso] - scores[mosi]
    if margin < 0.05:
        # no evidence either way: channel order (MOSI is listed before MISO on most wirings)
        mosi, miso = sorted((mosi, miso), key=ev.names.index)
        conf, note = 0.5, "the lines behave alike (a loopback?): MOSI taken as the first in channel order"
    else:
        conf = min(0.85, 0.5 + margin / 2)
        note = (f"weak evidence: {miso}'s first words repeat more or it is released after CS, as a "
                "peripheral's output does")
    out.mosi, out.miso = mosi, miso
    sources["mosi"] = Source("inferred", conf, note)
    sources["miso"] = Source("inferred", conf, note)


def _repeat_share(ev: Evidence, line: str, out: SpiConfig, bus: Bus, bits: int) -> float:
    """Share of windows whose first ``bits`` bits are the most common value (0.4 without windows)."""
    words = first_words(ev, line, out, bus, bits)
    return float(np.unique(words, return_counts=True)[1].max()) / len(words) if len(words) else 0.4


def _peripheral_score(ev: Evidence, line: str, out: SpiConfig, bus: Bus, bits: int | None = None) -> float:
    """Weak evidence that ``line`` is driven by the peripheral (MISO), about -0.4 .. 1.6:

    * its first word in each window mostly repeats (a peripheral answers the command
      word with a constant or a status byte; a controller sends varied commands):
      the share of windows with the most common first word, less 0.4;
    * it changes just after CS deasserts (the peripheral releases its output):
      the share of deasserts followed within two half periods by a change.

    On the shared real captures this orders every MOSI/MISO pair whose lines
    differ at all (docs/inference.md has the table)."""
    score = _repeat_share(ev, line, out, bus, bits or min(out.wordsize, 32)) - 0.4
    if bus.cs is not None and bus.cs_active is not None:
        lt = ev.ticks(line)
        _, ends = _cs_windows(ev, bus.cs, bus.cs_active)
        ends = ends[ends < ev.end]
        if len(ends) and len(lt):
            j = np.searchsorted(lt, ends, side="right")
            after = lt[np.minimum(j, len(lt) - 1)] - ends
            score += float(np.mean((j < len(lt)) & (after <= max(2.0, 2 * half_of(ev, bus.clk)))))
    return score


def first_words(ev: Evidence, line: str, out: SpiConfig, bus: Bus, bits: int = 8) -> np.ndarray:
    """The first ``bits`` bits of ``line`` in each CS window (each burst without CS),
    read at the sampling edges of the inferred mode, MSB first."""
    clk = bus.clk
    ci = ev.changes[clk]
    if len(ci) < bits:
        return np.empty(0, np.int64)
    leading = ev.level[clk][ci] != out.cpol
    sampling = ci[leading] if out.cpha == 0 else ci[~leading]
    st = ev.t[sampling]
    windowed = bus.cs is not None and bus.cs_active is not None
    if bus.cs is not None and bus.cs_active is not None:
        starts, ends = _cs_windows(ev, bus.cs, bus.cs_active)
    else:
        starts, ends = _bursts(ev, clk)
    first = np.searchsorted(st, starts, side="right")
    ok = first + bits <= len(st)
    if windowed:            # inside its CS window (bursts: from the burst's start on)
        ok &= st[np.minimum(first + bits - 1, len(st) - 1)] < ends
    idx = first[ok][:, None] + np.arange(bits)[None, :]
    vals = ev.level[line][sampling[idx]].astype(np.int64)
    return (vals << np.arange(bits - 1, -1, -1)[None, :]).sum(axis=1)


def _bursts(ev: Evidence, clk: str) -> tuple[np.ndarray, np.ndarray]:
    """Without a CS: (start, end) ticks around each SCLK burst, bursts split where SCLK
    pauses for more than eight half periods (a tick before the first edge, after the last)."""
    ct = ev.ticks(clk)
    gap = np.flatnonzero(np.diff(ct) > 8 * max(half_of(ev, clk), 1))
    return (np.concatenate([[ct[0]], ct[gap + 1]]) - 1, np.concatenate([ct[gap], [ct[-1]]]) + 1)


def half_of(ev: Evidence, clk: str) -> float:
    return clock_score(ev, clk)[1]


def _infer_settings(out: SpiConfig, cfg: SpiConfig, sources: dict[str, Source], ev: Evidence,
                    data_lines: list[str]) -> None:
    """CS polarity, CPOL, CPHA, word size and bit order where not given."""
    clk, cs = out.clk, out.cs
    have = clk in ev.level
    assert clk is not None
    if "cs_polarity" in cfg.infer:
        level = cs_level(ev, cs, clk, 1) if cs is not None and have and cs in ev.level else (None, 0.0, 0)
        if level[0] is not None:
            active, share, _ = level
            out.cs_active_low = active == 0
            sources["cs_polarity"] = Source("inferred", min(0.99, share if share >= BRACKET else 0.6),
                                            f"CS is {'low' if active == 0 else 'high'} at {share:.0%} of SCLK edges")
        else:
            sources["cs_polarity"] = Source("default", 1.0 if cs is None else 0.5,
                                            "no CS line" if cs is None else "no SCLK edge in the prefix")
    active = (0 if out.cs_active_low else 1) if cs is not None else None
    if "mode" in cfg.infer:
        if have and len(ev.changes[clk]) >= 4:
            idle = _idle_level(ev, clk, cs if cs in ev.level else None, active)
            cpol = idle
            _, half = clock_score(ev, clk)
            lead = trail = 0
            for d in data_lines:
                if d not in ev.level:
                    continue
                ch = ev.changes[d]
                inside = _inside(ev, ch, clk, cs if cs in ev.level else None, active, half)
                a, b = _lead_trail(ev, clk, _in_cycle(ev, ev.t[ch[inside]], clk, half)[0], idle)
                lead += a
                trail += b
            total = lead + trail
            if total >= 4:
                cpha = 1 if lead > trail else 0
                share = max(lead, trail) / total
                conf = share * min(1.0, total / 16)
                note = (f"CPOL {cpol}: SCLK idles {'high' if cpol else 'low'}; CPHA {cpha}: "
                        f"{max(lead, trail)} of {total} data changes follow the "
                        f"{'leading' if cpha else 'trailing'} clock edge")
                sources["mode"] = Source("inferred", conf, note)
            else:
                cpha = cfg.cpha
                sources["mode"] = Source("inferred", 0.5,
                                         f"CPOL {cpol} from the idle clock; CPHA {cpha} is the default: the "
                                         f"data lines hardly change, so the signals cannot tell")
            out.cpol, out.cpha = cpol, cpha
        else:
            sources["mode"] = Source("default", 0.3, "too few SCLK edges to tell")
    if "wordsize" in cfg.infer:
        w, conf, note = _wordsize(ev, out, active)
        if w is not None:
            out.wordsize = w
            sources["wordsize"] = Source("inferred", conf, note)
        else:
            sources["wordsize"] = Source("default", 0.5, note)
    if "bitorder" in cfg.infer:
        sources["bitorder"] = Source("default", 0.9, "MSB first: the wires cannot tell bit order; "
                                     "give --bitorder lsb for LSB-first devices")


def _wordsize(ev: Evidence, out: SpiConfig, active: int | None) -> tuple[int | None, float, str]:
    """Word size from the sampling edges per window and where the clock pauses inside them."""
    clk, cs = out.clk, out.cs
    assert clk is not None
    ci = ev.changes[clk]
    if len(ci) < 4:
        return None, 0.0, f"{out.wordsize} (default): too few SCLK edges"
    ct = ev.t[ci]
    leading = ev.level[clk][ci] != out.cpol          # one per clock cycle
    lt = ct[leading]
    if cs is not None and active is not None and cs in ev.level:
        starts, ends = _cs_windows(ev, cs, active)
        # complete windows only (an assert and a deassert inside the prefix)
        ok = (starts > 0) & (ends < ev.end)
        starts, ends = starts[ok], ends[ok]
    else:
        starts, ends = _bursts(ev, clk)
        starts, ends = starts[1:-1], ends[1:-1]      # the first and last burst may be cut
    if not len(starts):
        return None, 0.0, "no complete transfer in the prefix"
    a = np.searchsorted(lt, starts, side="right")
    b = np.searchsorted(lt, ends, side="left")
    bits = (b - a)
    bits = bits[bits > 0]
    if not len(bits):
        return None, 0.0, "no clock cycle inside the windows"
    g = int(np.gcd.reduce(bits))
    # pauses inside windows: bit counts before a clock cycle that starts late
    d = np.diff(lt)
    period = median_of(d) if len(d) else 0.0
    pause_at: list[int] = []
    if period > 0:
        late = np.flatnonzero(d > 1.5 * period + 1) + 1      # index of the late cycle
        w_of = np.searchsorted(starts, lt[late], side="right") - 1
        ok = (w_of >= 0) & (lt[late] < ends[np.clip(w_of, 0, len(ends) - 1)])
        if ok.any():
            first = a[np.clip(w_of[ok], 0, len(a) - 1)]
            pause_at = (late[ok] - first).tolist()
    if pause_at:
        pg = int(np.gcd.reduce(pause_at))
        if pg > 1 and g % pg == 0 and len(pause_at) >= 2:
            return min(pg, 1024), 0.95, f"the clock pauses every {pg} bits inside transfers"
    if g >= 1 and g % 8 == 0:
        fits = [w for w in COMMON_WORDSIZES if g % w == 0 and w != 8]
        conf = 0.9 if not fits else 0.7
        return 8, conf, (f"every transfer is {g} bits or a multiple" + (
            f"; {', '.join(map(str, fits))}-bit words fit too (give --wordsize)" if fits else ""))
    fits = [w for w in COMMON_WORDSIZES if g % w == 0]
    if fits:
        # transfers of several lengths narrow it to their common divisor; one length cannot
        # tell 3 x 12 from 4 x 9 bits: the largest usual size, said to be a choice
        w = fits[-1]
        alone = len(fits) == 1 and len(np.unique(bits)) > 1
        return w, 0.8 if alone else 0.5, (f"every transfer is a multiple of {g} bits" + (
            "" if len(fits) == 1 else f"; {', '.join(map(str, fits[:-1]))}-bit words fit too (give --wordsize)"))
    if 1 < g <= 64:
        return g, 0.5, f"every transfer is {g} bits or a multiple, no usual word size divides it"
    return None, 0.3, f"transfers of {', '.join(map(str, np.unique(bits)[:6].tolist()))} bits share no word size; {out.wordsize} (default)"
