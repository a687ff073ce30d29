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
import re

import numpy as np

from spigap.core.config import AUTO_NAMES, SpiConfig, _norm
from spigap.core.infer.evidence import BRACKET, Evidence, cs_windows
from spigap.core.infer.report import Source
from spigap.core.infer.settings import infer_settings

MIN_WINDOWS = 4               # windows with an SCLK burst each line needs to be a device
MIN_SHARE = 0.02              # of the clock's edges each line brackets at least
MAX_OVERLAP = 0.01            # of the bracketed edges that may fall in two lines' windows at once


@dataclasses.dataclass
class Device:
    """One device of a shared bus: its CS line, settings and where they came from."""

    cs: str
    cfg: SpiConfig
    sources: dict
    share: float = 0.0        # SCLK edges of the prefix inside its windows


def level(ev: Evidence, cs: str, clk: str, min_windows: int = MIN_WINDOWS) -> tuple[int, float] | None:
    """(active level, share of SCLK edges inside) of a CS candidate on a shared bus: the
    level whose windows nearly all hold an SCLK burst (the other level's windows, the
    gaps, hold another device's bursts only now and then). When both levels qualify
    (two devices strictly taking turns), the one held the shorter time. None: neither."""
    ci = ev.changes[clk]
    ct = ev.t[ci]
    found = []
    for active in (0, 1):
        starts, ends = cs_windows(ev, cs, active)
        if len(starts) < min_windows:
            continue
        held = (np.searchsorted(ct, ends, side="left") - np.searchsorted(ct, starts, side="right")) >= 4
        if held.mean() < 0.9:
            continue
        found.append((float(np.sum(ends - starts)), active, float(_inside(ev, cs, active, clk).mean())))
    if not found:
        return None
    _, active, share = min(found)
    return active, share


def _inside(ev: Evidence, cs: str, active: int, clk: str) -> np.ndarray:
    """Per SCLK change of the prefix: inside this CS's windows (the level before or
    after the edge, as cs_level judges the same-sample edge)."""
    ci = ev.changes[clk]
    return (ev.level[cs][ci] == active) | (ev.level[cs][ci - 1] == active)


def cs_set(ev: Evidence, clk: str, candidates: list[str]) -> list[tuple[str, int, float]] | None:
    """The CS lines among ``candidates`` that bracket ``clk``'s bursts together, in channel
    order: [(name, active level, share of SCLK edges)], or None when no set of two or
    more does (one CS, or none)."""
    ci = ev.changes.get(clk)
    if ci is None or len(ci) < 16:
        return None
    lines = []
    for name in candidates:
        if name == clk or name not in ev.level or not len(ev.changes[name]):
            continue
        found = level(ev, name, clk)
        if found is None or not MIN_SHARE <= found[1] < BRACKET:
            continue
        active = found[0]
        lines.append((name, active, _inside(ev, name, active, clk)))
    if len(lines) < 2:
        return None
    # the busiest lines first; a line joins while it adds edges without sharing them
    lines.sort(key=lambda x: -int(x[2].sum()))
    chosen: list = []
    union = np.zeros(len(ci), bool)
    for name, active, inside in lines:
        shared = int((inside & union).sum())
        if shared > MAX_OVERLAP * max(1, int(inside.sum())):
            continue
        chosen.append((name, active, inside))
        union |= inside
    if len(chosen) < 2 or union.mean() < BRACKET:
        return None
    chosen.sort(key=lambda x: ev.names.index(x[0]))
    return [(n, a, float(i.mean())) for n, a, i in chosen]


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


def settle_devices(out: SpiConfig, cfg: SpiConfig, sources: dict[str, Source], ev: Evidence | None) -> list[Device]:
    """Each device's settings on the bus of ``out`` (its ``cs`` and ``more_cs``). ``cfg``:
    what the user gave (``cfg.infer``: what may be inferred); ``sources``: the bus's
    (the first device's are updated: its CS polarity is judged on the bus)."""
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
        if k or ucfg is not cfg:
            # the first device's settings came with the bus's, unless its own change them
            infer_settings(dcfg, ucfg, src, ev, [d for d in (out.mosi, out.miso) if d])
        share = 0.0
        if name in ev.level and len(ci):
            active = 0 if dcfg.cs_active_low else 1
            if "cs_polarity" in ucfg.infer:
                found = level(ev, name, clk, 1)
                if found is not None:
                    active = found[0]
                    dcfg.cs_active_low = active == 0
            inside = _inside(ev, name, active, clk)
            share = float(inside.mean())
            union |= inside
        devices.append(Device(name, dcfg, src, share))
    together = float(union.mean()) if len(union) else 0.0
    if "cs_polarity" in cfg.infer:
        for d in devices:
            conf = min(0.99, together) if together >= BRACKET else 0.6
            d.sources["cs_polarity"] = Source(
                "inferred", conf, f"{d.cs} is {'low' if d.cfg.cs_active_low else 'high'} at {d.share:.0%} of SCLK "
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
