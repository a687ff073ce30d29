"""Extra (non-SPI) channels for device checks: the AD7606's CONVST and BUSY lines.

The SPI lines alone cannot show when a conversion starts or ends; checks like
"CONVST period ≥ 5 µs" and "no SCLK on the BUSY falling edge" need those
channels in the capture; their edges come from the one extra-channel reader,
``spigap.core.events.read_channel_edges``.
"""

from __future__ import annotations

import dataclasses

import numpy as np



@dataclasses.dataclass
class EventTrack:
    role: str            # "convst", "busy"
    channel: str
    initial: int         # level at tick 0
    rise: np.ndarray     # ticks of rising edges
    fall: np.ndarray     # ticks of falling edges


def _named(events) -> dict[str, str]:
    """``--event CHANNEL:EDGE`` texts (or parsed specs) -> lower-case channel name -> the
    channel as named."""
    from spigap.core.events import parse_event

    channels = {}
    for e in events or []:
        spec = parse_event(e) if isinstance(e, str) else e
        if not spec.is_spi:
            channels[spec.channel.strip().lower()] = spec.channel
    return channels


def events_for_check(path, events, **reader_opts) -> dict:
    """``--event CHANNEL:EDGE`` texts -> lower-case channel name -> EventTrack; the
    device checks use the channels named CONVST and BUSY (case-insensitive,
    after --channel-map). Every channel named must exist. Reads the capture; the
    commands take the edges of their analysis's own pass instead (``tracks``)."""
    return read_events(path, _named(events), **reader_opts)


def tracks(edges: dict, events) -> dict:
    """As ``events_for_check``, from the extra channels' edges the analysis collected in
    its pass over the capture (core/result.Result.edges)."""
    return {role: EventTrack(role, edges[name].channel or name, edges[name].initial, edges[name].rise,
                             edges[name].fall)
            for role, name in _named(events).items() if name}


def read_events(path, channels: dict, **reader_opts) -> dict:
    """``channels``: role -> channel name; ``reader_opts``: for ``open_capture``.
    Returns role -> EventTrack.

    One streaming pass through ``spigap.core.events.read_channel_edges``
    (the one reader of extra channels' edges); on a damaged capture the edges
    before the damage are used (the SPI analysis reports the damage)."""
    from spigap.core.events import read_channel_edges
    from spigap.io import open_capture

    roles = [(role, name) for role, name in channels.items() if name]
    if not roles:
        return {}
    with open_capture(path, **reader_opts) as reader:
        names = [reader.info.channels[reader.channel_index(name, option="--event CHANNEL:EDGE")] for _, name in roles]
        edges, _truncated = read_channel_edges(reader, names)
    return {role: EventTrack(role, name, edges[name].initial, edges[name].rise, edges[name].fall)
            for (role, _), name in zip(roles, names)}
