"""A shared bus: several CS lines on one SCLK (docs/shared-bus.md).

* ``cs_set``: the CS lines that together bracket a clock's bursts when no single
  one does (a Raspberry Pi's CE0 and CE1): each holds SCLK bursts in its windows,
  none alone holds nearly all the edges, together they do, and they are hardly
  ever asserted at once.
* ``settle_devices``: each device's settings (CS polarity, mode, word size) from
  the same prefix: the SPI core sets mode, speed and word size per device, so they
  may differ from device to device. CS polarity is judged on the bus: each line's
  level inside its own bursts, and the share of SCLK edges the lines bracket
  together.
"""

from __future__ import annotations

import dataclasses
import itertools
import re

import numpy as np

from spigap.core.config import AUTO_NAMES, SpiConfig, _norm
from spigap.core.infer.evidence import BRACKET, Evidence, cs_windows
from spigap.core.infer.report import Source
from spigap.core.infer.settings import infer_settings

MIN_WINDOWS = 4               # windows with an SCLK burst each line needs to be a device
MIN_SHARE = 0.02              # of the clock's edges each line brackets at least
MAX_OVERLAP = 0.01            # of the bracketed edges that may fall in two lines' windows at once
MAX_TIME_OVERLAP = 0.5        # of a line's windows that may overlap another line's in time (faults:
#                               the next CS asserting during the previous one's hold); above, no CS
MAX_BRANCH = 6                # lines whose two levels are both tried (2**6 readings at most)


@dataclasses.dataclass
class Device:
    """One device of a shared bus: its CS line, settings and where they came from."""

    cs: str
    cfg: SpiConfig
    sources: dict
    share: float = 0.0        # SCLK edges of the prefix inside its windows


@dataclasses.dataclass
class _Option:
    """One reading of a CS line: its windows at ``active`` and the SCLK edges inside them."""

    name: str
    active: int
    inside: np.ndarray        # per SCLK change of the prefix: inside a window
    starts: np.ndarray
    ends: np.ndarray

    @property
    def held(self) -> float:
        return float(np.sum(self.ends - self.starts))


def _options(ev: Evidence, cs: str, clk: str, min_windows: int) -> list[_Option]:
    """The readings of a CS candidate on a shared bus: each level whose windows nearly all
    hold an SCLK burst. On a dense bus both levels of a line often do (its inactive periods
    hold the other devices' bursts): which is the active one is told by the lines together
    (``_join``), not by this line alone."""
    ct = ev.t[ev.changes[clk]]
    found = []
    for active in (0, 1):
        starts, ends = cs_windows(ev, cs, active)
        if len(starts) < min_windows:
            continue
        held = (np.searchsorted(ct, ends, side="left") - np.searchsorted(ct, starts, side="right")) >= 4
        if held.mean() < 0.9:
            continue
        found.append(_Option(cs, active, _inside(ev, cs, active, clk), starts, ends))
    return found


def _inside(ev: Evidence, cs: str, active: int, clk: str) -> np.ndarray:
    """Per SCLK change of the prefix: inside this CS's windows (the level before or
    after the edge, as cs_level judges the same-sample edge)."""
    ci = ev.changes[clk]
    return (ev.level[cs][ci] == active) | (ev.level[cs][ci - 1] == active)


def _overlapping(o: _Option, us: np.ndarray, ue: np.ndarray) -> int:
    """How many of ``o``'s windows overlap in time the merged windows (us, ue) (sorted,
    disjoint, half-open: a deassert and an assert in the same tick do not overlap)."""
    if not len(us):
        return 0
    k = np.searchsorted(ue, o.starts, side="right")          # the first merged window ending after a start
    ok = k < len(us)
    return int(np.count_nonzero(us[np.minimum(k, len(us) - 1)][ok] < o.ends[ok]))


def _merge(us: np.ndarray, ue: np.ndarray, o: _Option) -> tuple[np.ndarray, np.ndarray]:
    s = np.concatenate([us, o.starts])
    e = np.concatenate([ue, o.ends])
    order = np.argsort(s, kind="stable")
    s, e = s[order], np.maximum.accumulate(e[order])
    new = np.concatenate([[True], s[1:] >= e[:-1]])          # a window starting after all before it ended
    first = np.flatnonzero(new)
    last = np.concatenate([first[1:], [len(s)]]) - 1
    return s[first], e[last]


@dataclasses.dataclass
class _Reading:
    """A set of CS lines with one level each: the lines that joined, the edges they
    bracket together, and how many of their windows overlap in time."""

    chosen: list[_Option]
    union: np.ndarray
    overlaps: int             # windows asserted while another chosen line's window is

    @property
    def key(self) -> tuple:
        return tuple((o.name, o.active) for o in self.chosen)


def _join(options: list[_Option], n_edges: int, select: bool) -> _Reading | None:
    """The lines of ``options`` (one reading each, the busiest first) that bracket the
    bursts together: a line joins when it shares (nearly) no SCLK edge with the lines
    before it and (nearly) none of its windows overlaps theirs in time. ``select``: a
    line that does not join is left out (a candidate that is no CS); else it refutes
    the reading (None).

    The time test is what tells a line's active level on a dense bus: read at its
    inactive level, a line's "windows" hold the other devices' bursts (edge-disjoint
    from its own), but also every moment the bus is idle, when the other lines are at
    their inactive level too: two lines both "asserted" while no clock runs."""
    union = np.zeros(n_edges, bool)
    us = ue = np.zeros(0, np.int64)
    chosen, overlaps = [], 0
    for o in options:
        n = int(o.inside.sum())
        shared = int((o.inside & union).sum())
        over = _overlapping(o, us, ue)
        if shared > MAX_OVERLAP * max(1, n) or over > MAX_TIME_OVERLAP * len(o.starts):
            if select:
                continue
            return None
        chosen.append(o)
        overlaps += over
        union |= o.inside
        us, ue = _merge(us, ue, o)
    return _Reading(chosen, union, overlaps)


def _readings(lines: list[list[_Option]], n_edges: int, select: bool) -> list[_Reading]:
    """Every reading of ``lines`` (each line's options; the busiest line first) that
    brackets all SCLK edges with two or more lines, the fewest overlapping windows first.
    The levels of lines with two options are all tried (the first MAX_BRANCH such lines;
    the others take the level held the shorter time)."""
    two = [k for k, opts in enumerate(lines) if len(opts) > 1][:MAX_BRANCH]
    fixed = [opts if k in two else [min(opts, key=lambda o: o.held)] for k, opts in enumerate(lines)]
    found: dict[tuple, _Reading] = {}
    for combo in itertools.product(*fixed):
        r = _join(list(combo), n_edges, select)
        if r is None or len(r.chosen) < 2 or r.union.mean() < BRACKET:
            continue
        found.setdefault(r.key, r)
    return sorted(found.values(), key=lambda r: (-len(r.chosen), r.overlaps, sum(o.held for o in r.chosen)))


def cs_set(ev: Evidence, clk: str, candidates: list[str],
           active: int | None = None) -> list[tuple[str, int, float]] | None:
    """The CS lines among ``candidates`` that bracket ``clk``'s bursts together, in channel
    order: [(name, active level, share of SCLK edges)], or None when no set of two or
    more does (one CS, or none). ``active``: the given active level of every line."""
    ci = ev.changes.get(clk)
    if ci is None or len(ci) < 16:
        return None
    lines = []
    for name in candidates:
        if name == clk or name not in ev.level or not len(ev.changes[name]):
            continue
        opts = [o for o in _options(ev, name, clk, MIN_WINDOWS) if MIN_SHARE <= o.inside.mean() < BRACKET
                and active in (None, o.active)]
        if opts:
            lines.append(opts)
    if len(lines) < 2:
        return None
    # the busiest lines first (by the edges at the level held the shorter time); a line joins
    # while it adds edges without sharing them or being asserted with another
    lines.sort(key=_busy)
    found = _readings(lines, len(ci), select=True)
    if not found:
        return None
    chosen = sorted(found[0].chosen, key=lambda o: ev.names.index(o.name))
    return [(o.name, o.active, float(o.inside.mean())) for o in chosen]


def _busy(opts: list[_Option]) -> int:
    return -int(min(opts, key=lambda o: o.held).inside.sum())


@dataclasses.dataclass
class Polarities:
    """The active level of each CS line of a shared bus, judged on the lines together."""

    active: dict[str, int]
    together: float                      # share of SCLK edges the lines bracket together
    overlaps: int = 0                    # windows asserted together with another line's
    other: dict[str, int] | None = None  # a second reading the signals fit as well
    other_overlaps: int = 0


def polarities(ev: Evidence, clk: str, names: list[str]) -> Polarities | None:
    """Each line's active level: the reading in which the lines bracket the SCLK edges
    together, share none, and are asserted at once in the fewest windows (``_join``). None:
    no reading of all of them does. ``other``: a second reading with about as few (at most
    twice as many, plus two): no bus idle time in the prefix tells them apart."""
    ci = ev.changes.get(clk)
    if ci is None or not len(ci) or any(n not in ev.level for n in names):
        return None
    lines = [_options(ev, n, clk, 1) for n in names]
    if any(not opts for opts in lines):
        return None
    found = _readings(sorted(lines, key=_busy), len(ci), select=False)
    if not found:
        return None
    best = found[0]
    out = Polarities({o.name: o.active for o in best.chosen}, float(best.union.mean()), best.overlaps)
    if len(found) > 1 and found[1].overlaps <= 2 * best.overlaps + 2:
        # as few windows asserted together in the other reading: nothing tells them apart
        # (in the true reading they are faults; in the wrong one, every moment the bus idles)
        out.other = {o.name: o.active for o in found[1].chosen}
        out.other_overlaps = found[1].overlaps
    return out


def asserted_together(ev: Evidence, clk: str, cs: str, active: int, candidates: list[str]) -> list[str]:
    """The lines among ``candidates`` asserted together with ``cs`` in (nearly) every one of its
    windows and bracketing the clock's bursts as well as it does: two CS lines asserted at once
    (a bus fault, or one select wired to two pins). They are kept as devices of the bus, so the
    analysis reports the overlap as the error it is (as with ``--cs A,B``), never dropped."""
    ci = ev.changes.get(clk)
    if ci is None or cs not in ev.level or len(ci) < 16:
        return []
    starts, ends = cs_windows(ev, cs, active)
    if len(starts) < MIN_WINDOWS:
        return []
    tol = 2 * max(1.0, float(np.percentile(np.diff(ev.t[ci]), 25)))
    out = []
    for name in candidates:
        if name in (cs, clk) or name not in ev.level or len(ev.changes[name]) < 2:
            continue
        for level in (0, 1):
            s2, e2 = cs_windows(ev, name, level)
            if abs(len(s2) - len(starts)) > max(1, len(starts) // 20):
                continue
            k = np.clip(np.searchsorted(s2, starts), 0, len(s2) - 1)
            k0 = np.clip(k - 1, 0, len(s2) - 1)
            near = np.minimum(np.abs(s2[k] - starts), np.abs(s2[k0] - starts)) <= tol
            if float(np.mean(near)) >= 0.9 and float(_inside(ev, name, level, clk).mean()) >= BRACKET:
                out.append(name)
                break
    return out


# a channel named like one of several chip selects: CE0/CE1, CS0..CS3, nCS1, SS2, /CS1, CS1#
NUMBERED_CS = re.compile(r"^(?:n|/)?(?:cs|ce|ss|nss|csn|cs_n|spi_cs|chip_select)[_\-]?\d{1,2}(?:#|_n|n)?$")


def named_cs_candidates(channels: list[str], assigned: set) -> list[str]:
    """The channels not assigned to a role whose names say "one of several CS lines"
    (two or more of them with the assigned CS), in channel order: worth checking in the
    signals for more devices on the bus."""
    hits = [c for c in channels if NUMBERED_CS.match(_norm(c)) or _norm(c) in AUTO_NAMES["cs"]]
    if len(hits) < 2:
        return []
    return [c for c in hits if c not in assigned]


def bus_polarity(out: SpiConfig, cfg: SpiConfig, sources: dict[str, Source],
                 ev: Evidence | None) -> tuple[SpiConfig, Polarities | None]:
    """On a shared bus (``out.more_cs``) whose CS polarity is left to the signals: every
    line's active level, judged on the lines together (``polarities``), set on ``out`` (its
    first device's) and in ``sources``. Returns the configuration the rest of the bus's
    settings are inferred with (the polarity no longer among them) and the polarities
    (None: not a shared bus, polarity given, or no reading fits; then as for one CS)."""
    if not out.more_cs or "cs_polarity" not in cfg.infer or ev is None or out.clk not in ev.level:
        return cfg, None
    pol = polarities(ev, out.clk, list(out.devices))
    if pol is None:
        return cfg, None
    out.cs_active_low = pol.active[out.devices[0]] == 0
    sources["cs_polarity"] = _polarity_source(pol, out.devices[0], _share(ev, out.clk, out.devices[0], pol))
    return dataclasses.replace(cfg, infer=cfg.infer - {"cs_polarity"}), pol


def _share(ev: Evidence, clk: str, name: str, pol: Polarities) -> float:
    return float(_inside(ev, name, pol.active[name], clk).mean()) if len(ev.changes[clk]) else 0.0


def _lh(active: int) -> str:
    return "low" if active == 0 else "high"


def _polarity_source(pol: Polarities, name: str, share: float) -> Source:
    n = len(pol.active)
    note = (f"{name} is {_lh(pol.active[name])} at {share:.0%} of SCLK edges; the bus's {n} CS lines together "
            f"bracket {pol.together:.0%}")
    if pol.other is None:
        conf = min(0.99, pol.together) if pol.together >= BRACKET else 0.6
        return Source("inferred", conf, note)
    # two readings fit: the signals cannot tell which level is the active one (no moment the
    # bus idles with every line at its inactive level in the prefix); the one with fewer
    # windows asserted together is reported, at low confidence, with the other named
    read = ", ".join(f"{k} {_lh(v)}" for k, v in pol.active.items())
    other = ", ".join(f"{k} {_lh(v)}" for k, v in pol.other.items())
    same = len(set(pol.other.values())) == 1
    return Source("inferred", 0.5, f"{note}; two readings fit: {read} ({pol.overlaps} windows asserted with "
                                   f"another line's) or {other} ({pol.other_overlaps}): the bus never idles "
                                   "with every line at one level in the prefix"
                                   + (f" (give --cs-polarity {_lh(next(iter(pol.other.values())))} for the other)"
                                      if same else ""))


def settle_devices(out: SpiConfig, cfg: SpiConfig, sources: dict[str, Source], ev: Evidence | None,
                   pol: Polarities | None = None) -> list[Device]:
    """Each device's settings on the bus of ``out`` (its ``cs`` and ``more_cs``). ``cfg``:
    what the user gave (``cfg.infer``: what may be inferred); ``sources``: the bus's
    (the first device's are updated: its CS polarity is judged on the bus); ``pol``: the
    lines' polarities judged together (``bus_polarity``)."""
    names = out.devices
    base = dataclasses.replace(out, more_cs=(), device_cfgs={})
    if ev is None or out.clk not in ev.level:
        devices = []
        for n in names:
            dcfg, src = dataclasses.replace(base, cs=n), dict(sources)
            _own(dcfg, cfg, src, n)
            devices.append(Device(n, dcfg, src))
        _first(out, sources, devices)
        return devices
    clk = out.clk
    ci = ev.changes[clk]
    devices = []
    union = np.zeros(len(ci), bool)
    for k, name in enumerate(names):
        dcfg = dataclasses.replace(base, cs=name)
        src = dict(sources)
        src["cs"] = sources.get("cs", Source("given")) if k == 0 else _cs_source(cfg, sources)
        ucfg = _own(dcfg, cfg, src, name)
        judged = pol is not None and "cs_polarity" in ucfg.infer and name in pol.active
        if judged:
            assert pol is not None
            dcfg.cs_active_low = pol.active[name] == 0
        if k or ucfg is not cfg:
            # the first device's settings came with the bus's, unless its own change them
            infer_settings(dcfg, dataclasses.replace(ucfg, infer=ucfg.infer - {"cs_polarity"}) if judged else ucfg,
                           src, ev, [d for d in (out.mosi, out.miso) if d])
        share = 0.0
        if name in ev.level and len(ci):
            active = 0 if dcfg.cs_active_low else 1
            if "cs_polarity" in ucfg.infer and not judged:
                # no reading of the lines together fits: the level held the shorter time of
                # those whose windows hold bursts (as for one CS line)
                opts = _options(ev, name, clk, 1)
                if opts:
                    active = min(opts, key=lambda o: o.held).active
                    dcfg.cs_active_low = active == 0
            inside = _inside(ev, name, active, clk)
            share = float(inside.mean())
            union |= inside
        devices.append(Device(name, dcfg, src, share))
    together = float(union.mean()) if len(union) else 0.0
    if "cs_polarity" in cfg.infer:
        for d in devices:
            if pol is not None and d.cs in pol.active:
                d.sources["cs_polarity"] = _polarity_source(pol, d.cs, d.share)
                continue
            conf = min(0.99, together) if together >= BRACKET else 0.6
            d.sources["cs_polarity"] = Source(
                "inferred", conf, f"{d.cs} is {_lh(0 if d.cfg.cs_active_low else 1)} at {d.share:.0%} of SCLK "
                                  f"edges; the bus's {len(devices)} CS lines together bracket {together:.0%}")
        sources["cs_polarity"] = devices[0].sources["cs_polarity"]
        out.cs_active_low = devices[0].cfg.cs_active_low
    _first(out, sources, devices)
    return devices


# a setting's fields in SpiConfig
_FIELDS = {"mode": ("cpol", "cpha"), "wordsize": ("wordsize",), "bitorder": ("lsb_first",),
           "cs_polarity": ("cs_active_low",)}


def _own(dcfg: SpiConfig, cfg: SpiConfig, src: dict[str, Source], name: str) -> SpiConfig:
    """Apply the device's own settings (``cfg.device_cfgs[name]``: a profile's) to ``dcfg``
    where the command line gave none; returns the config whose ``infer`` says what is left
    to infer for the device (``cfg`` when it has none of its own)."""
    own = cfg.device_cfgs.get(name)
    if own is None:
        return cfg
    ucfg, origin = own
    # left to the signals (or, --no-infer, to the defaults) on the command line, set by its own
    mine = (cfg.infer - ucfg.infer) | {s for s in cfg.assumed
                                       if any(getattr(ucfg, f) != getattr(cfg, f) for f in _FIELDS[s])}
    for s in sorted(mine):
        for f in _FIELDS[s]:
            setattr(dcfg, f, getattr(ucfg, f))
        src[s] = Source("given", 1.0, origin)
    if cfg.transfers_per_message is None and ucfg.transfers_per_message is not None:
        dcfg.transfers_per_message = ucfg.transfers_per_message
    return dataclasses.replace(ucfg, infer=cfg.infer & ucfg.infer)


def _first(out: SpiConfig, sources: dict[str, Source], devices: list[Device]) -> None:
    """The bus's settings are its first device's: follow them where its own changed them."""
    d = devices[0] if devices else None
    if d is None or d.cs not in out.device_cfgs:
        return
    for s, fields in _FIELDS.items():
        for f in fields:
            setattr(out, f, getattr(d.cfg, f))
        if s in d.sources:
            sources[s] = d.sources[s]
    out.transfers_per_message = d.cfg.transfers_per_message


def _cs_source(cfg: SpiConfig, sources: dict[str, Source]) -> Source:
    if cfg.cs is not None:
        return Source("given")
    return sources.get("cs", Source("inferred", 0.95, "its level brackets SCLK bursts"))
