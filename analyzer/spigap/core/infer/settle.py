"""Inference's entry: resolve a configuration against a capture. The user's settings
first, then names (``config.autodetect``, ``<bus>_<role>`` prefixes, a file's own
decoder settings), then the signals of a bounded prefix of the edge stream, read
once: the same blocks then go on to the framer (no second pass; works on a pipe)."""

from __future__ import annotations

import dataclasses
import itertools
import re
import time
from collections.abc import Iterator

import numpy as np

from spigap.findings import Cause, Finding
from spigap.core import config as config_mod
from spigap.core.config import SpiConfig
from spigap.core.infer import calibration
from spigap.core.infer.buses import find_buses, few_changes, no_bus_reason
from spigap.core.infer.evidence import Evidence, cs_level, cs_windows, edges_held, half_of
from spigap.core.infer.lookalike import continuous
from spigap.core.infer.mosi_miso import assign_data
from spigap.core.infer.report import Bus, NoSpiBus, Settled, Source
from spigap.core.infer.saved import reconcile
from spigap.core.infer.settings import infer_settings
from spigap.core.infer.shared import (
    NUMBERED_CS,
    Polarities,
    asserted_together,
    bus_polarity,
    cs_set,
    named_cs_candidates,
    settle_devices,
)
from spigap.errors import CaptureTruncated, UsageError
from spigap.limits import STREAM_CHANNELS
from spigap.io.base import EdgeBlock
from spigap.io.stdin import STDIN_PATH

PREFIX_ENTRIES = 1 << 17      # edge-stream entries inferred from (bounded memory, one pass)
LIVE_PREFIX_S = 2.0           # on a pipe: at most this long waiting for them
MAX_CHANNELS = STREAM_CHANNELS  # an edge stream packs at most 32 channels
LOW_CONFIDENCE = 0.75         # below this a setting is a warning naming its option
ROLES = ("clk", "mosi", "miso", "cs")
SETTINGS = ("mode", "cs_polarity", "wordsize", "bitorder")
ROLE_OPTION = {"clk": "--clk", "mosi": "--mosi", "miso": "--miso", "cs": "--cs"}
SETTING_OPTION = {"mode": "--mode", "cs_polarity": "--cs-polarity", "wordsize": "--wordsize",
                  "bitorder": "--bitorder"}


def settle(reader, cfg: SpiConfig, *, tap=None, survey: bool = False) -> Settled:
    """Resolve ``cfg`` against the capture: the user's settings, then names, then
    the signals. Returns the stream to frame (it starts with the prefix read here).

    ``tap`` (core/events.EdgeCollector): extra channels (--event, --sync-channel) that ride
    in the same stream; each block goes to it before its SPI lines go on. ``survey``: the
    prefix of every channel (the first 32) is read in the same pass too
    (``Settled.survey``: spigap detect's buses). The inference sees exactly what it sees
    without them (its own channels' entries)."""
    info = reader.info
    channels = list(info.channels)
    tapped = tap.resolve(reader) if tap is not None else {}
    also = list(dict.fromkeys(tapped.values()))
    named = cfg.resolve(channels, path=info.path, defaults=info.spi_channels, partial=True, aliases=info.channel_keys)
    if cfg.clk is None and named.clk is not None and named.clk != (info.spi_channels or {}).get("clk") \
            and sum(config_mod._norm(c) in config_mod.AUTO_NAMES["clk"] for c in channels) > 1:
        # two lines named like a clock (a test bench's system clk beside its sclk): the names do not
        # say which is SCLK; the signals do (the one in bursts that the data follow)
        named = dataclasses.replace(named, clk=None)
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
                                   "the capture's saved settings" if from_file else f"named {name!r}"
                                   + (f" (bus prefix {prefix_of[name]!r})" if name in prefix_of else ""))
        elif role == "cs" and cfg.no_cs:
            sources[role] = Source("given", 1.0, "--no-cs")
    for s in SETTINGS:
        if s in cfg.assumed:
            sources[s] = Source("default", 1.0, "--no-infer: the default")
        elif s not in cfg.infer:
            sources[s] = Source("given")
    # roles the names leave open are worth inferring only if some channel is not assigned yet
    assigned = ({getattr(named, r) for r in ROLES} | set(named.more_cs)) - {None}
    need_roles = any(r not in sources for r in ROLES) and any(c not in assigned for c in channels)
    # other channels named like a CS (CE1, CS2): perhaps more devices on this bus (infer/shared.py)
    extra = [] if cfg.cs is not None or cfg.no_cs else named_cs_candidates(channels, assigned)
    if not need_roles and not cfg.infer and not extra:
        out = _finish_roles(named, sources, info)
        names = out.stream_names()
        survey = survey and _fits(names + also, channels)
        if not also and not survey:
            return Settled(out, names, reader.edges(names), sources, [], warnings)
        stream = _with(names, also + (_surveyed(channels) if survey else []), info)
        it = reader.edges(stream)
        prefix: list[EdgeBlock] = []
        pending: CaptureTruncated | None = None
        seen = None
        if survey:
            prefix, pending, (seen,) = read_prefix(it, stream, live=info.path == STDIN_PATH,
                                                   views=[_surveyed(channels)])
        blocks = _stream(prefix, it, pending, stream, names, tap, tapped)
        return Settled(out, names, blocks, sources, [], warnings, survey=seen)

    if len(extra) > MAX_CHANNELS - 4:
        # more lines named like CS lines than one stream holds with SCLK, MOSI, MISO and CS:
        # looking at some only would find no CS set (the others' transfers unbracketed) and
        # analyze one device as if it were alone
        lines = [c for c in channels if c == named.cs or c in extra]
        raise UsageError(f"{len(lines)} channels are named like CS lines ({lines[0]} .. {lines[-1]}); spigap "
                         f"follows at most {MAX_CHANNELS - 3} CS lines on one bus (an edge stream holds "
                         f"{MAX_CHANNELS} channels)", path=info.path,
                         hint=f"name at most {MAX_CHANNELS - 3} devices to analyze with --cs NAME,NAME,...")
    candidates = _candidates(channels, named, info)
    request = (candidates[:MAX_CHANNELS] if need_roles
               else _finish_roles(named, sources, info).stream_names() + extra[:MAX_CHANNELS - 4])
    if need_roles and len(candidates) > MAX_CHANNELS:
        request = named.stream_names()
        request += [c for c in candidates if c not in request][:MAX_CHANNELS - len(request)]
        warnings.append(Finding(f"the capture has {len(channels)} channels; roles were looked for among "
                                f"{MAX_CHANNELS} of them (1-bit nets before bits of vectors, in declaration order; "
                                "name others with --clk/--mosi/--miso/--cs)", Cause.NOTE))
    survey = survey and _fits(request + also, channels)
    stream = _with(request, also + (_surveyed(channels) if survey else []), info)
    it = reader.edges(stream)
    prefix, pending, views = read_prefix(it, stream, live=info.path == STDIN_PATH,
                                         views=[request] + ([_surveyed(channels)] if survey else []))
    ev = views[0]
    ev.tick_s = info.tick_s
    try:
        out, buses, devices = _infer(named, cfg, sources, ev, need_roles, warnings, info, extra)
    except NoSpiBus as e:
        if pending is None:
            raise
        raise _damaged(pending, e) from e
    names = out.stream_names()
    blocks = _stream(prefix, it, pending, stream, names, tap, tapped)
    return Settled(out, names, blocks, sources, buses, warnings, ev, devices, survey=views[1] if survey else None)


def _fits(stream: list[str], channels: list[str]) -> bool:
    """Whether the survey of every channel (the first 32) fits in one stream beside these
    (else detect reads it in a pass of its own)."""
    return len(set(stream) | set(_surveyed(channels))) <= MAX_CHANNELS


def _with(request: list[str], also: list[str], info) -> list[str]:
    """The stream's channels: ``request`` (what the inference reads), then the others the
    one pass carries (extra channels, detect's survey), at most 32 in all."""
    stream = request + [c for c in dict.fromkeys(also) if c not in request]
    if len(stream) > MAX_CHANNELS:
        raise UsageError(f"one pass over the capture reads at most {MAX_CHANNELS} channels; these options and "
                         f"the roles to infer need {len(stream)}", path=info.path,
                         hint="name the SPI lines with --clk/--mosi/--miso/--cs")
    return stream


def _candidates(channels: list[str], named: SpiConfig, info) -> list[str]:
    """The channels roles are looked for among: analog channels of a capture that has logic
    ones too are data lines only when the user asked for thresholding (--threshold) or named
    them (a demo device's sine waves, thresholded at mid-range, toggle at every zero crossing)."""
    analog = set(info.analog_channels)
    if not analog or info.analog_asked or len(analog) >= len(channels):
        out = list(channels)
    else:
        fixed = {getattr(named, r) for r in ROLES} - {None}
        out = [c for c in channels if c not in analog or c in fixed]
    return scalars_first(out)


def _surveyed(channels: list[str]) -> list[str]:
    """The channels a survey of every bus reads (an edge stream's worth, 1-bit nets first)."""
    return scalars_first(list(channels))[:MAX_CHANNELS]


def scalars_first(channels: list[str]) -> list[str]:
    """More channels than an edge stream packs: a simulator's dump has hundreds of signals, most
    of them bits of vectors (rx[7], state[2]); an SPI line is a 1-bit net: those are looked at
    first, in declaration order."""
    if len(channels) <= MAX_CHANNELS:
        return list(channels)
    return sorted(channels, key=lambda c: bool(re.search(r"\[\d+\]$", c)))


def no_bus(info, ev: Evidence) -> NoSpiBus:
    """The one-line error of a capture whose signals hold no SPI bus."""
    skipped = [c for c in info.analog_channels if c not in ev.names]
    extra = (f"; analog channels {', '.join(skipped)} were not looked at (give --threshold to include them)"
             if skipped else "")
    reason = no_bus_reason(ev)
    la = ev.lookalikes[0] if ev.lookalikes else None
    hint = (f"if it is SPI anyway, name its lines: {la.insist()}" if la is not None and la.clk else
            "if it is SPI, name the lines with --clk/--mosi/--miso/--cs")
    return NoSpiBus(f"no SPI bus found: {reason}{extra}", path=info.path, hint=hint)


def _damaged(pending: CaptureTruncated, e: NoSpiBus) -> NoSpiBus:
    """No bus in a prefix the damage cut short: the damage first (a file cut after a few
    thousand samples holds no bus because it is cut, not because the bus is not SPI)."""
    reason = e.problem.removeprefix("no SPI bus found: ")
    return NoSpiBus(f"{pending.damage}, and the part before it holds no SPI bus ({reason})", path=e.path,
                    hint=pending.hint or "save or copy the capture again")


def read_prefix(it: Iterator[EdgeBlock], names: list[str], live: bool = False, views: list[list[str]] | None = None):
    """(blocks, a CaptureTruncated to raise after them or None, Evidence) of the
    first PREFIX_ENTRIES entries of an edge stream (the blocks that hold them; the evidence
    is of those entries only). ``live`` (a
    pipe): also stop after LIVE_PREFIX_S of waiting, so a slow live stream is
    not held back (spigap monitor prints its first interval soon).

    ``views``: lists of some of the stream's channels: then the third item is an Evidence
    of each, of the first PREFIX_ENTRIES entries that stream alone would have (the
    entries where one of its channels changes), all read in this one pass."""
    prefix: list[EdgeBlock] = []
    n = 0
    pending: CaptureTruncated | None = None
    t0 = time.monotonic()
    cut = [_View(names, v) for v in views] if views is not None else []
    try:
        for b in it:
            prefix.append(b)
            n += len(b)
            for c in cut:
                c.add(b)
            if (min((c.n for c in cut), default=n) >= PREFIX_ENTRIES
                    or (live and time.monotonic() - t0 >= LIVE_PREFIX_S)):
                break
    except CaptureTruncated as e:
        pending = e
    if views is not None:
        return prefix, pending, [c.evidence() for c in cut]
    if prefix:
        # the evidence is the first PREFIX_ENTRIES entries exactly (the blocks go on whole
        # to the framer): a dense capture's first block alone may hold four times as many
        t = np.concatenate([b.ticks for b in prefix])[:PREFIX_ENTRIES]
        s = np.concatenate([b.states for b in prefix])[:PREFIX_ENTRIES]
    else:
        t, s = np.zeros(1, np.int64), np.zeros(1, np.uint32)
    return prefix, pending, Evidence(t, s, names)


class _View:
    """A stream's entries as a stream of some of its channels alone would have them (the
    states re-packed in ``names``' order, entries where none of them changes dropped)."""

    def __init__(self, stream: list[str], names: list[str]):
        self.names = names
        self.src = None if names == stream else [stream.index(c) for c in names]
        self.last: int | None = None
        self.t: list[np.ndarray] = []
        self.s: list[np.ndarray] = []
        self.n = 0

    def cut(self, b: EdgeBlock) -> EdgeBlock:
        if self.src is None:
            return b
        ns = np.zeros(len(b), np.uint32)
        for j, k in enumerate(self.src):
            ns |= ((b.states >> np.uint32(k)) & np.uint32(1)) << np.uint32(j)
        keep = np.empty(len(ns), bool)
        keep[1:] = ns[1:] != ns[:-1]
        keep[0] = self.last is None or ns[0] != self.last
        if len(ns):
            self.last = int(ns[-1])
        return EdgeBlock(b.ticks[keep], ns[keep])

    def add(self, b: EdgeBlock) -> None:
        if self.n >= PREFIX_ENTRIES:
            return
        v = self.cut(b)
        self.t.append(v.ticks)
        self.s.append(v.states)
        self.n += len(v)

    def evidence(self) -> Evidence:
        if self.t:
            t = np.concatenate(self.t)[:PREFIX_ENTRIES]
            s = np.concatenate(self.s)[:PREFIX_ENTRIES]
        else:
            t, s = np.zeros(1, np.int64), np.zeros(1, np.uint32)
        return Evidence(t, s, self.names)


def all_buses(reader) -> list[Bus]:
    """Every SPI bus in a bounded prefix of the capture (``spigap detect``)."""
    names = _surveyed(reader.info.channels)
    _, _, ev = read_prefix(reader.edges(names), names)
    return find_buses(ev, exclude=set())


def buses_seen(settled: Settled, channels: list[str]) -> list[Bus] | None:
    """``all_buses`` from the prefix ``settle`` has read: its own when it holds the same
    channels, else the survey it read in the same pass (``settle(survey=True)``); None
    without either (``all_buses`` then reads its own)."""
    ev = settled.evidence
    if ev is not None and list(ev.names) == _surveyed(channels):
        return _as_settled(find_buses(ev, exclude=set()), settled.cfg)
    if settled.survey is not None:
        return _as_settled(find_buses(settled.survey, exclude=set()), settled.cfg)
    return None


def _as_settled(buses: list[Bus], cfg: SpiConfig) -> list[Bus]:
    """The survey's buses with the analyzed one (its clock) as the settings say it: their CS and
    data lines (names and options win over the survey, which reads the signals alone: SSI32's
    survey takes FC# for the select where the name says CS#); a bus whose clock is one of its
    lines is none of its own."""
    mine = next((b for b in buses if b.clk == cfg.clk), None)
    if mine is None:
        return buses
    roles = [d for d in (cfg.mosi, cfg.miso) if d is not None]
    data = [d for d in mine.data if d in roles] + [d for d in roles if d not in mine.data]
    active = None if cfg.cs is None else (0 if cfg.cs_active_low else 1)
    mine = dataclasses.replace(mine, cs=cfg.cs, cs_active=active, data=data,
                               cs_rivals=tuple(r for r in mine.cs_rivals if r != cfg.cs))
    lines = set(mine.channels()) | set(cfg.more_cs)
    return [mine if b.clk == cfg.clk else b for b in buses if b.clk == cfg.clk or b.clk not in lines]


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
            warnings.append(Finding(f"the capture holds another SPI bus by its names ({p}_*); this analysis is "
                                    f"of {chosen}_*; select the other with {opts}", Cause.NOTE))
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
    used = [n for n in (cfg.clk, cfg.mosi, cfg.miso, cfg.cs) if n is not None] + list(cfg.more_cs)
    if len(set(used)) != len(used):
        raise UsageError(f"one channel is mapped to two roles: clk={cfg.clk} mosi={cfg.mosi} "
                         f"miso={cfg.miso} cs={','.join(cfg.devices) or None}", path=info.path)


def _stream(prefix: list[EdgeBlock], rest: Iterator[EdgeBlock], pending: BaseException | None,
            request: list[str], names: list[str], tap=None, tapped: dict | None = None) -> Iterator[EdgeBlock]:
    """The prefix then the rest of the stream, with the states of ``request``'s
    channels re-packed as ``names`` (entries where none of them changes dropped); each
    block whole to ``tap`` first (the extra channels' edges)."""
    blocks = itertools.chain(prefix, _then_raise(rest, pending))
    if tap is not None:
        tap.bind(request, tapped)
    if request == names and tap is None:
        yield from blocks
        return
    view = _View(request, names)
    for b in blocks:
        if tap is not None:
            tap.add(b)
        v = view.cut(b)
        if len(v):
            yield v


def _then_raise(rest: Iterator[EdgeBlock], pending: BaseException | None) -> Iterator[EdgeBlock]:
    if pending is not None:
        raise pending
    yield from rest


def _infer(named: SpiConfig, cfg: SpiConfig, sources: dict[str, Source], ev: Evidence, need_roles: bool,
           warnings: list[str], info, extra: list[str]) -> tuple[SpiConfig, list[Bus], list]:
    out = dataclasses.replace(named, infer=frozenset(), assumed=frozenset())
    buses: list[Bus] = []
    pol: Polarities | None = None
    if need_roles and named.clk is not None and sources.get("clk", Source("")).how == "name":
        named = _free_running_named_clock(named, sources, ev, warnings)
        out.clk = named.clk
    if need_roles:
        fixed = ({getattr(named, r) for r in ROLES} | set(named.more_cs)) - {None}
        buses = find_buses(ev, exclude={n for n in fixed if n != named.clk}, named_cs=named.cs)
        bus = _pick_bus(buses, named)
        if named.clk is None and fixed:
            # the named lines' clock: the bus whose CS and data lines they are (a test bench names
            # mosi, miso and cs_n beside a system clk and its sclk)
            around = max(find_buses(ev, exclude=set()), key=lambda b: len(fixed & set(b.channels())), default=None)
            if around is not None and fixed & set(around.channels()):
                bus = around
                buses = [around] + [b for b in buses if b.clk != around.clk]
        if bus is None:
            if named.clk is None:
                raise no_bus(info, ev)
            bus = Bus(named.clk, None, [], len(ev.changes.get(named.clk, [])))
        if bus.cs and not bus.data and named.mosi is None and named.miso is None:
            # a clock and a CS that brackets its bursts, and no line that follows the clock: a
            # line changing too rarely to tell (a pad's one pressed button), else one that never
            # changes (no button pressed) is the data line the framing needs; weak evidence
            rest = [c for c in ev.names if c not in fixed | {bus.clk, bus.cs} | set(info.analog_channels)]
            few = few_changes(ev, bus.clk, bus.cs, rest)
            quiet = [c for c in rest if not len(ev.changes[c])]
            if few or quiet:
                bus = dataclasses.replace(bus, data=few or quiet[:1], data_how="few" if few else "static")
        if not bus.data and not bus.cs and named.mosi is None and named.miso is None:
            raise no_bus(info, ev)
        if bus.wide:
            warnings.append(f"{', '.join(bus.wide)} all change on {bus.clk}'s edges inside the CS windows: a dual or "
                            "quad SPI bus (several data lines per clock); it is analyzed as SPI on "
                            f"{' and '.join(bus.data)} (the timing of every transfer is the same; the words are "
                            "one lane's bits)")
        if named.clk is None:
            out.clk = bus.clk
            sources["clk"] = Source("inferred", 0.95, "toggles in regular bursts", bus_basis(bus, ev))
        if "cs" not in sources:
            if bus.cs is not None and bus.cs not in {out.mosi, out.miso}:
                out.cs = bus.cs
                sources["cs"] = Source("inferred", bus.cs_confidence, _CS_NOTE[bus.cs_how]
                                       if bus.cs_how != "bracket" or bus.cs_confidence >= LOW_CONFIDENCE else
                                       "each of its windows holds an SCLK burst, but SCLK also runs outside them",
                                       cs_basis(bus, ev))
                if bus.cs_how == "once":
                    sources["cs"] = _once_source(bus, ev, sources["cs"])
                if bus.cs_rivals:
                    sources["cs"] = _rival_source(bus, ev)
                if bus.cs_how == "partial":
                    sources["cs"] = _partial_source(bus, ev)
                    if "cs_polarity" in cfg.infer:
                        out.cs_active_low = bus.cs_active == 0
            else:
                out.cs = None
                sources["cs"] = Source("inferred", 0.8, "no channel brackets the SCLK bursts: "
                                       "framed without CS (by SCLK idle time)", "none")
                near, near_level, share = ev.cs_near.get(bus.clk, (None, 0, 0.0))
                if near is not None and near not in bus.data:
                    level = "high" if near_level else "low"
                    sources["cs"] = Source(
                        "inferred", 0.5, f"framed without CS (by SCLK idle time), or with {near} as the select: "
                        f"{share:.0%} of SCLK's edges fall while it is {level}, but it also changes while SCLK runs, "
                        "as no CS does (a host that clocks on between commands: an FTDI MPSSE driving a "
                        f"Microwire EEPROM); two readings (give --cs {near} --cs-polarity {level} if it is the select)",
                        "none, near", also=(near,))
                part, part_level = ev.cs_partial.get(bus.clk, (None, 0))
                if near is None and part is not None and part not in bus.data:
                    level = "high" if part_level else "low"
                    sources["cs"] = Source(
                        "inferred", 0.5, f"framed without CS (by SCLK idle time), or with {part} as the select: it is "
                        f"{level} once in the prefix, around SCLK bursts, and changes only while SCLK is idle, but "
                        "SCLK also runs at its other level (a select asserted for part of the capture, or another "
                        "device's bursts; an interrupt line the host services looks so too); two readings (give "
                        f"--cs {part} --cs-polarity {level} if it is the select)", "none, partial", also=(part,))
        if cfg.cs is None and not cfg.no_cs and out.clk is not None:
            foreign = {c for b in buses if b.clk != out.clk for c in b.channels()}
            free = [c for c in ev.names if c not in foreign | {out.clk, out.mosi, out.miso} and c not in bus.data]
            _shared_bus(out, cfg, sources, ev, free)
            if out.cs is not None and not out.more_cs and bus.cs_active is not None:
                # a second select is a line named like one, or not named at all ("4", "D5"): a
                # test bench's busy flag or a register bit follows CS as closely, and is none
                selects = [c for c in free if config_mod._norm(c) in config_mod.AUTO_NAMES["cs"]
                           or NUMBERED_CS.match(config_mod._norm(c)) or not re.search(r"[a-zA-Z]{2,}", c)]
                _together(out, sources, ev, bus.cs_active, selects, warnings)
        # the named data lines are the bus's; other lines following the clock then are no data
        # lines of it (a test bench's shift registers and flags)
        data_lines = [d for d in bus.data if d not in {out.clk, out.cs}
                      and not (named.mosi is not None and named.miso is not None)]
        # a shared bus's CS polarities are judged on its lines together, before the rest
        scfg, pol = bus_polarity(out, cfg, sources, ev)
        infer_settings(out, scfg, sources, ev, data_lines + [d for d in (out.mosi, out.miso) if d])
        active = (0 if out.cs_active_low else 1) if out.cs is not None else None
        assign_data(out, Bus(out.clk or bus.clk, out.cs, data_lines, bus.edges, active,
                                 cs_how=bus.cs_how if out.cs == bus.cs else "bracket",
                                 wide=bus.wide if out.clk in (None, bus.clk) else ()), ev, sources)
        if len(buses) > 1:
            others = [b for b in buses if b.clk != out.clk]
            for b in others:
                opts = " ".join(f"{ROLE_OPTION[r]} {n}" for r, n in
                                (("clk", b.clk), ("cs", b.cs)) if n) + "".join(
                    f" --{'mosi' if i == 0 else 'miso'} {d}" for i, d in enumerate(b.data[:2]))
                warnings.append(Finding(f"the capture holds another SPI bus (clk={b.clk}"
                                        f"{f' cs={b.cs}' if b.cs else ''} data={','.join(b.data) or '–'}); "
                                        f"this analysis is of clk={out.clk}; select the other with {opts}",
                                        Cause.NOTE))
    if need_roles and out.mosi is None and out.miso is None and named.mosi is None and named.miso is None:
        raise no_bus(info, ev)
    _check_roles(out, info)
    if "cs" not in sources:
        sources["cs"] = Source("name", 1.0, "no channel is named like a CS: framed without CS")
    for role in ("mosi", "miso"):
        sources.setdefault(role, Source("inferred", 0.8, "no second data line"))
    if not need_roles:
        if extra and out.clk is not None:
            _shared_bus(out, cfg, sources, ev, ([out.cs] if out.cs else []) + extra)
        scfg, pol = bus_polarity(out, cfg, sources, ev)
        infer_settings(out, scfg, sources, ev, [d for d in (out.mosi, out.miso) if d])
    reconcile(out, cfg, sources, info, warnings)       # the capture's saved decoder settings
    # a shared bus: each device's settings, its CS polarity judged on the bus (infer/shared.py)
    devices = settle_devices(out, cfg, sources, ev, pol) if out.more_cs else []
    calibration.apply(sources)          # measured probabilities instead of scores
    for key, src in sources.items():
        if src.how in ("inferred", "default") and src.confidence < LOW_CONFIDENCE:
            opt = ROLE_OPTION.get(key) or SETTING_OPTION.get(key, key)
            warnings.append(Finding(f"{key} {_value(out, key)} is {src.how} with confidence "
                                    f"{src.confidence:.2f} ({src.note}); give {opt} if it is wrong", Cause.UNSURE))
    return out, buses, devices


def _free_running_named_clock(named: SpiConfig, sources: dict[str, Source], ev: Evidence,
                              warnings: list[str]) -> SpiConfig:
    """A line named like SCLK that never pauses (a test bench's system clk) beside another that
    runs in bursts which a CS brackets or data follow: the other is SCLK, the name gives way."""
    clk = named.clk
    if clk not in ev.level or not continuous(ev, clk, half_of(ev, clk)):
        return named
    others = [b for b in find_buses(ev, exclude=set()) if b.clk != clk and (b.cs or b.data)
              and not continuous(ev, b.clk, half_of(ev, b.clk))]
    if not others:
        return named
    del sources["clk"]
    warnings.append(f"{clk} is named like SCLK but runs all the time (a system clock); {others[0].clk} runs in "
                    f"bursts {'that ' + others[0].cs + ' brackets' if others[0].cs else 'that the data follow'}: "
                    f"it is taken as SCLK (give --clk {clk} to use the name)")
    return dataclasses.replace(named, clk=None)


def _together(out: SpiConfig, sources: dict[str, Source], ev: Evidence, active: int, candidates: list[str],
              warnings: list[str]) -> None:
    """Lines asserted together with the CS in every window: kept as devices of the bus (the
    analysis then reports "two CS lines asserted at once", an error), never dropped silently."""
    assert out.clk is not None and out.cs is not None
    twins = asserted_together(ev, out.clk, out.cs, active, candidates)
    if not twins:
        return
    out.more_cs = tuple(twins)
    names = ", ".join([out.cs, *twins])
    sources["cs"] = Source("inferred", 0.95, basis="twin", note=f"{names} bracket the same SCLK bursts, asserted together in every "
                                             "window: two CS lines asserted at once")
    warnings.append(f"{names} are asserted together in every window: two CS lines asserted at once (a bus fault, "
                    f"or one select wired to two pins); both are analyzed as devices of one bus (give --cs "
                    f"{out.cs} to analyze one)")


def _shared_bus(out: SpiConfig, cfg: SpiConfig, sources: dict[str, Source], ev: Evidence,
                candidates: list[str]) -> None:
    """Several CS lines that together bracket the clock's bursts: every device of a shared
    bus (infer/shared.py), the first as ``cs``, the others as ``more_cs``; with --cs-polarity,
    lines active at that level only."""
    assert out.clk is not None
    given = None if "cs_polarity" in cfg.infer else (0 if out.cs_active_low else 1)
    found = cs_set(ev, out.clk, [c for c in candidates if c in ev.level], given)
    if not found:
        return
    names = [n for n, _, _ in found]
    out.cs, out.more_cs = names[0], tuple(names[1:])
    if given is None:
        out.cs_active_low = found[0][1] == 0
    sources["cs"] = Source("inferred", 0.95, basis="shared", note=f"{', '.join(names)} each bracket SCLK bursts "
                                             f"({', '.join(f'{n} {s:.0%}' for n, _, s in found)} of the edges), "
                                             "together all of them: devices of one shared bus")


_CS_NOTE = {
    "bracket": "its level brackets the SCLK bursts",
    "latch": "a latch strobe (LOAD, LE, LATCH): a short pulse between bursts with no SCLK edge in it; the "
             "bits between two pulses are framed as one transfer",
    "once": "asserted once in the prefix: SCLK runs only at this level (one long transfer so far)",
    "partial": "its windows hold some SCLK bursts; SCLK also runs outside them",     # _partial_source's note
}


def _once_source(bus: Bus, ev: Evidence, src: Source) -> Source:
    """A CS asserted once (buses._once) whose window leaves SCLK edges outside: the bursts
    there carry no data (an SD card's wake-up clocks); the note counts them."""
    assert bus.cs is not None
    ct = ev.ticks(bus.clk)
    outside = len(ct) - int(edges_held(ct, *cs_windows(ev, bus.cs, bus.cs_active or 0)).sum())
    if outside < 8:
        return src
    return dataclasses.replace(src, note=f"asserted once in the prefix: {len(ct) - outside} of SCLK's {len(ct)} edges "
                                         f"at this level; the other {outside} in bursts before or after it in "
                                         "which no data line changes (an SD card's wake-up clocks, CS and MOSI "
                                         "high), framed out")


def _rival_source(bus: Bus, ev: Evidence) -> Source:
    """A CS beside other lines that bracket the same bursts, asserted apart (SSI32's CS# and its
    flow control FC#): one of them is the select and the signals do not say which. Both readings
    at 0.5 (calibration.DEFAULTS: no evidence either way), with the option that settles it; the
    one active the shorter time is taken."""
    assert bus.cs is not None
    names = [bus.cs, *bus.cs_rivals]
    lead = ""
    if len(names) == 2:
        a = cs_windows(ev, bus.cs, bus.cs_active if bus.cs_active is not None else 0)[0]
        b = cs_windows(ev, names[1], cs_level(ev, names[1], bus.clk)[0] or 0)[0]
        k = min(len(a), len(b))
        if k:
            apart = float(np.median(np.abs(a[:k] - b[:k]))) / max(1.0, 2 * half_of(ev, bus.clk))
            lead = f", asserted about {apart:.0f} SCLK periods apart"
    others = " or ".join(bus.cs_rivals)
    readings = "two" if len(names) == 2 else str(len(names))
    return Source("inferred", 0.5, f"{' and '.join(names)} each bracket every SCLK burst{lead}: {readings} readings, one of "
                                   f"them is the select (the other a handshake or flow-control line); taken as "
                                   f"{bus.cs}, active the shorter time (give --cs {others} if that is the select)",
                  "two brackets", also=tuple(bus.cs_rivals))


def _partial_source(bus: Bus, ev: Evidence) -> Source:
    """A CS whose windows hold some of the clock's bursts, the clock running outside them too
    (buses._partial): two readings at 0.5 (calibration.DEFAULTS), this line as the select of one
    device (the bursts outside it another device's, whose CS is not captured, or the select was
    asserted for part of the capture) or no CS; the edges outside are counted, and the options
    that settle it named."""
    assert bus.cs is not None
    active = bus.cs_active if bus.cs_active is not None else 0
    ct = ev.ticks(bus.clk)
    held = edges_held(ct, *cs_windows(ev, bus.cs, active))     # as buses._partial counted them
    outside = len(ct) - int(held.sum())
    level = "low" if active == 0 else "high"
    n = int(np.count_nonzero(held >= 4))
    windows = "its one window" if n == 1 else f"{n} of its windows"
    return Source("inferred", 0.5, f"{windows} at {level} hold{'s' if n == 1 else ''} SCLK bursts and "
                                   f"it changes only while SCLK is idle, but {outside} of SCLK's {len(ct)} edges in "
                                   "the prefix fall outside them: the select of one device on a clock shared with "
                                   "another whose CS is not captured (or asserted for part of the capture), or no CS; "
                                   f"two readings, taken as the select (give --no-cs to frame every burst without "
                                   f"it, --cs-polarity {'high' if active == 0 else 'low'} for the other level)",
                  "partial", also=("none",))


def cs_basis(bus: Bus, ev: Evidence) -> str:
    """The CS evidence an inferred CS (and the bus) is calibrated by: "bracket" (its level
    brackets the bursts at 98 % of the edges), "square" (... but it is a square wave: windows and
    gaps of one length each, half the period each, as a divided clock gating another is), "loose"
    (each window holds a burst, the clock also runs outside), "latch", "once", "none"."""
    if bus.cs is None:
        return "none"
    if bus.cs_how == "bracket":
        if bus.cs_confidence < 0.9:
            return "loose"
        starts, ends = cs_windows(ev, bus.cs, bus.cs_active if bus.cs_active is not None else 0)
        inner = (starts > 0) & (ends < ev.end)
        w, g = (ends - starts)[inner], (starts[1:] - ends[:-1])[inner[1:] & inner[:-1]]
        if len(w) >= 4 and len(g) >= 4:
            wm, gm = float(np.median(w)), float(np.median(g))
            if np.all(np.abs(w - wm) <= 0.02 * wm) and np.all(np.abs(g - gm) <= 0.02 * gm) \
                    and 0.45 <= wm / (wm + gm) <= 0.55:
                return "square"
        return "bracket"
    return bus.cs_how


def bus_basis(bus: Bus, ev: Evidence) -> str:
    """The evidence an inferred SPI clock is calibrated by: the CS's and the data lines' ("once/edges2":
    a CS asserted once, two lines changing on the clock's edges; "/cont": no CS, and the clock never
    pauses in the prefix)."""
    cont = bus.cs is None and continuous(ev, bus.clk, half_of(ev, bus.clk))
    # a partial CS is no evidence for the clock beyond a clock without CS (the look-alikes were
    # tested as without one): its basis is that one's
    cs = "none" if bus.cs_how == "partial" else cs_basis(bus, ev)
    return (f"{cs}/{bus.data_how}{min(len(bus.data), 2) if bus.data_how != 'none' else ''}"
            + ("/cont" if cont else ""))


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
    if key == "cs" and cfg.cs is None:
        return "none"
    return getattr(cfg, key)
