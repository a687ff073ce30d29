"""Extra (non-SPI) channels for device checks: the AD7606's CONVST and BUSY lines.

The SPI lines alone cannot show when a conversion starts or ends; checks like
"CONVST period ≥ 5 µs" and "no SCLK on the BUSY falling edge" need those
channels in the capture. This reads their edges in one streaming pass.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from analyzer.errors import CaptureTruncated


@dataclasses.dataclass
class EventTrack:
    role: str            # "convst", "busy"
    channel: str
    initial: int         # level at tick 0
    rise: np.ndarray     # ticks of rising edges
    fall: np.ndarray     # ticks of falling edges

    def level_at(self, ticks: np.ndarray) -> np.ndarray:
        """Level just after each tick (edges at the same tick count)."""
        t = np.asarray(ticks)
        last_rise = np.concatenate([[-1], self.rise])[np.searchsorted(self.rise, t, side="right")]
        last_fall = np.concatenate([[-1], self.fall])[np.searchsorted(self.fall, t, side="right")]
        return np.where(last_rise == last_fall, self.initial, (last_rise > last_fall).astype(int))


ROLES = ("convst", "busy")


def events_for_check(path, events, **reader_opts) -> dict:
    """``--event CHANNEL:EDGE`` texts -> lower-case channel name -> EventTrack; the
    device checks use the channels named CONVST and BUSY (``ROLES``,
    case-insensitive, after --channel-map). Every channel named must exist."""
    from analyzer.core.events import parse_event

    channels = {}
    for text in events or []:
        spec = parse_event(text)
        if not spec.is_spi:
            channels[spec.channel.strip().lower()] = spec.channel
    return read_events(path, channels, **reader_opts)


def read_events(path, channels: dict, **reader_opts) -> dict:
    """``channels``: role -> channel name; ``reader_opts``: for ``open_capture``.
    Returns role -> EventTrack."""
    from analyzer.io import open_capture

    roles = [(role, name) for role, name in channels.items() if name]
    if not roles:
        return {}
    with open_capture(path, **reader_opts) as reader:
        names = [reader.info.channels[reader.channel_index(name, option="--event CHANNEL:EDGE")] for _, name in roles]
        ticks, states = [], []
        try:
            for block in reader.edges(names):
                ticks.append(np.asarray(block.ticks, np.int64))
                states.append(np.asarray(block.states, np.uint32))
        except CaptureTruncated:
            pass   # the SPI analysis reports the damage; use what was readable
    t = np.concatenate(ticks) if ticks else np.zeros(1, np.int64)
    s = np.concatenate(states) if states else np.zeros(1, np.uint32)
    out = {}
    for j, ((role, _), name) in enumerate(zip(roles, names)):
        lv = ((s >> np.uint32(j)) & np.uint32(1)).astype(np.int8)
        d = np.diff(lv)
        out[role] = EventTrack(role, name, int(lv[0]), t[1:][d == 1], t[1:][d == -1])
    return out
