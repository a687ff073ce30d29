"""Extra channels: edges of GPIO lines next to the SPI bus, and latencies between them.

``--event NAME:EDGE`` names an edge of a capture channel (``CONVST:rise``,
``BUSY:fall``, ``TOGGLE:both``). The events given form a **chain**, measured
stage by stage: for every event of stage s, the first event of stage s+1 at or
after it and before the next event of stage s (a later one would belong to the
next cycle). Unless the chain already names the SPI transfer itself, it ends
with the start of the next SPI transfer (``CS:assert``; without a CS line the
first SCLK edge of a burst, ``SPI:start``). So ``--event CONVST:rise --event
BUSY:fall`` measures CONVST→BUSY (the conversion time), BUSY→CS (how long the
host takes to start reading after the data is ready) and the whole
CONVST→CS chain. Each stage continues from the events the previous stage
matched, so a spurious extra pulse is counted (``extra``) but does not break
the chain; an event without a successor is counted as ``missing``.

Per channel, independent of the chain: the interval between consecutive
events of the given edge (for ``both``: toggle to toggle, i.e. the cycle time
of a pin toggled once per cycle, as in seed 004), the rise-to-rise period, and
the high and low pulse widths.

Edges come from the analysis's one pass over the edge stream: the extra channels
ride in it beside the SPI lines and ``EdgeCollector`` takes their edges from each
block before the SPI lines are framed (core/infer/settle.py, core/run.py): one numpy
pass per block, nothing per edge in Python, no second read. Everything is in ticks;
a latency between two sampled edges is ±1 sample.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from spigap.core.analysis import Analysis, describe, start_rate_hz
from spigap.errors import CaptureTruncated, UsageError
from spigap.io.base import EdgeBlock

_EDGE_WORDS = {
    "rise": "rise", "rising": "rise", "r": "rise", "posedge": "rise", "up": "rise", "high": "rise",
    "fall": "fall", "falling": "fall", "f": "fall", "negedge": "fall", "down": "fall", "low": "fall",
    "both": "both", "toggle": "both", "any": "both", "edge": "both", "change": "both",
}
# pseudo channel: the SPI transfers as framed by the analysis
_SPI_WORDS = {"assert": "start", "start": "start", "deassert": "end", "end": "end"}
_SPI_NAMES = ("cs", "spi")


@dataclasses.dataclass(frozen=True)
class EventSpec:
    channel: str          # channel name as given (or "CS"/"SPI" for the transfer pseudo channel)
    edge: str             # rise | fall | both | start | end (start/end: SPI transfer pseudo edges)
    device: str | None = None   # a shared bus: the device (CS line) whose transfers end the chain

    @property
    def is_spi(self) -> bool:
        return self.edge in ("start", "end")

    @property
    def label(self) -> str:
        if self.is_spi:
            if self.channel.lower() == "cs":
                return f"CS:{'assert' if self.edge == 'start' else 'deassert'}"
            return f"SPI:{self.edge}"
        return f"{self.channel}:{self.edge}"


def parse_event(text: str) -> EventSpec:
    """``NAME:rise|fall|both`` or ``CS:assert|deassert`` / ``SPI:start|end``; on a shared
    bus ``DEVICE=...`` (``CE0=CONVST:rise``): the device whose transfers end the chain."""
    m = re.match(r"^\s*(?:([^:=]+?)\s*=\s*)?([^:=]+?)\s*:\s*([A-Za-z]+)\s*$", text or "")
    if not m:
        raise UsageError(f"--event {text!r}: give CHANNEL:EDGE, e.g. CONVST:rise, BUSY:fall, TOGGLE:both "
                         "(on a shared bus DEVICE=CHANNEL:EDGE, e.g. CE0=CONVST:rise)")
    device, name, word = m.group(1), m.group(2), m.group(3).lower()
    if word in _SPI_WORDS and name.lower() in _SPI_NAMES:
        return EventSpec(name.upper(), _SPI_WORDS[word], device)
    if word not in _EDGE_WORDS:
        raise UsageError(f"--event {text!r}: unknown edge {word!r} (use rise, fall or both; "
                         "CS:assert / CS:deassert for the SPI transfers)")
    return EventSpec(name, _EDGE_WORDS[word], device)


def for_devices(specs: list[EventSpec], devices: list[str]) -> dict[str, list[EventSpec]]:
    """``specs`` per device of a capture whose devices (CS lines) are ``devices`` (one, or a
    shared bus's), without their device part. On a shared bus every event must name its
    device (the chain ends at that device's next transfer); on one device, a named device
    must be it."""
    out: dict[str, list[EventSpec]] = {}
    for s in specs:
        if s.device is None:
            if len(devices) > 1:
                raise UsageError(f"--event {s.label}: the capture holds {len(devices)} devices on one bus "
                                 f"({', '.join(devices)}); the event chain ends at one device's next transfer: "
                                 f"say which, --event {devices[0]}={s.label} (or analyze one with --cs NAME)")
            dev = devices[0] if devices else ""
        elif s.device not in devices:
            raise UsageError(f"--event {s.device}={s.label}: {s.device} is not a device of this capture "
                             f"({', '.join(devices) or 'no CS line'})")
        else:
            dev = s.device
        out.setdefault(dev, []).append(dataclasses.replace(s, device=None))
    return out


@dataclasses.dataclass
class ChannelEdges:
    """Rising and falling edge ticks of one channel (the initial level is not an edge)."""

    name: str                 # as the option named it
    rise: np.ndarray          # int64 ticks
    fall: np.ndarray
    initial: int
    end_tick: int
    tick_s: float
    channel: str = ""         # the capture's channel it names

    def ticks(self, edge: str) -> np.ndarray:
        if edge == "rise":
            return self.rise
        if edge == "fall":
            return self.fall
        return np.union1d(self.rise, self.fall)

    def high_widths(self) -> tuple[np.ndarray, np.ndarray]:
        """(rise tick, width) of every complete high pulse."""
        return _widths(self.rise, self.fall)

    def low_widths(self) -> tuple[np.ndarray, np.ndarray]:
        return _widths(self.fall, self.rise)


def _widths(first: np.ndarray, second: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each ``first`` edge, the time to the next ``second`` edge (edges alternate)."""
    j = np.searchsorted(second, first, side="right")
    ok = j < len(second)
    return first[ok], (second[j[ok]] - first[ok]).astype(np.int64)


class EdgeCollector:
    """The edges of extra channels (``names``), collected from the blocks of an edge stream
    as they go by: the analysis's one pass over the capture hands it each block before the
    SPI lines are framed (core/infer/settle.py), so ``--event`` and ``--sync-channel``
    channels cost no second read. Vectorized per block: nothing per edge in Python."""

    def __init__(self, names: list[str], options: dict[str, str] | None = None):
        self.names = list(dict.fromkeys(names))
        # the option that named each (an unknown name's error says it)
        self.options = options or {}
        k = len(self.names)
        self.bits = np.arange(k, dtype=np.uint32)
        self._rises: list[list[np.ndarray]] = [[] for _ in range(k)]
        self._falls: list[list[np.ndarray]] = [[] for _ in range(k)]
        self._prev: np.ndarray | None = None
        self._initial = np.zeros(k, np.int8)
        self.last_tick = 0
        self.canonical: dict[str, str] = {}

    def bind(self, stream: list[str], canonical: dict[str, str] | None = None) -> None:
        """The stream's channel order (``names`` are bits of its states; ``canonical``: a
        name as given -> the capture's channel name, as the stream names it)."""
        self.canonical = canonical or {}
        self.bits = np.asarray([stream.index(self.canonical.get(n, n)) for n in self.names], np.uint32)

    def resolve(self, reader) -> dict[str, str]:
        """Each name as given -> the capture's channel (an unknown name: a UsageError naming
        the option)."""
        chans = reader.info.channels
        return {n: chans[reader.channel_index(n, option=self.options.get(n, "--event CHANNEL:EDGE"))]
                for n in self.names}

    def add(self, block: EdgeBlock) -> None:
        if len(block) == 0:
            return
        lv = ((block.states[:, None] >> self.bits[None, :]) & 1).astype(np.int8)   # (n, k)
        ticks = block.ticks
        if self._prev is None:        # first entry: tick 0 with the initial levels, not an edge
            self._initial, self._prev = lv[0].copy(), lv[0].copy()
            lv, ticks = lv[1:], ticks[1:]
        if len(lv):
            d = np.diff(np.concatenate([self._prev[None, :], lv]), axis=0)
            for j in range(len(self.names)):                                   # per channel, not per edge
                self._rises[j].append(ticks[d[:, j] > 0])
                self._falls[j].append(ticks[d[:, j] < 0])
            self._prev = lv[-1].copy()
        self.last_tick = int(block.ticks[-1])

    def edges(self, end_tick: int, tick_s: float) -> dict[str, "ChannelEdges"]:
        cat = lambda parts: np.concatenate(parts).astype(np.int64) if parts else np.empty(0, np.int64)  # noqa: E731
        return {name: ChannelEdges(name=name, rise=cat(self._rises[j]), fall=cat(self._falls[j]),
                                   initial=int(self._initial[j]), end_tick=int(end_tick), tick_s=tick_s,
                                   channel=self.canonical.get(name, name))
                for j, name in enumerate(self.names)}


def read_channel_edges(reader, names: list[str]) -> tuple[dict[str, ChannelEdges], str | None]:
    """Stream the named channels of a reader of their own and collect their edges
    (``EdgeCollector``); the analysis collects them in its own pass instead.

    Returns (edges by name, truncation message or None). An unknown channel
    name raises ``UsageError`` (from the reader); a damaged capture yields
    the edges read before the damage plus the reader's message.
    """
    uniq = list(dict.fromkeys(names))
    if not uniq:
        return {}, None
    for name in uniq:                 # an unknown name: say which option named it
        reader.channel_index(name, option="--event CHANNEL:EDGE")
    c = EdgeCollector(uniq)
    c.bind(uniq)
    truncated = None
    try:
        for block in reader.edges(uniq):
            c.add(block)
    except CaptureTruncated as e:
        truncated = str(e)
    end = reader.end_tick if reader.end_tick is not None else c.last_tick + 1
    return c.edges(end, reader.info.tick_s), truncated


@dataclasses.dataclass
class Pairing:
    """Stage ``src`` → ``dst``: for each ``src`` event, the first ``dst`` event at or after it
    and before the next ``src`` event."""

    src: str
    dst: str
    at: np.ndarray            # ticks of the matched src events
    latency: np.ndarray       # ticks
    index: np.ndarray         # for every src event: index of its dst event, -1 if none
    n_src: int
    n_missing: int            # src events with no dst event before the next src event
    n_extra: int              # dst events beyond the first in a src cycle

    def to_dict(self, tick_s: float) -> dict:
        d = describe(self.latency, tick_s)
        d.update({"from": self.src, "to": self.dst, "events": self.n_src, "matched": int(len(self.latency)),
                  "missing": self.n_missing, "extra": self.n_extra, "resolution_s": tick_s})
        return d


def pair(src: np.ndarray, dst: np.ndarray, *, src_label: str = "A", dst_label: str = "B",
         end_tick: int | None = None) -> Pairing:
    """Match every ``src`` event to the first ``dst`` event in [src_i, src_{i+1})."""
    src = np.asarray(src, np.int64)
    dst = np.asarray(dst, np.int64)
    n = len(src)
    nxt = np.empty(n, np.int64)
    if n:
        nxt[:-1] = src[1:]
        nxt[-1] = np.iinfo(np.int64).max if end_tick is None else end_tick + 1
    j = np.searchsorted(dst, src, side="left")
    stop = np.searchsorted(dst, nxt, side="left")
    count = stop - j
    ok = count > 0
    index = np.where(ok, j, -1)
    lat = dst[j[ok]] - src[ok]
    return Pairing(src_label, dst_label, src[ok], lat.astype(np.int64), index.astype(np.int64), n,
                   int(np.count_nonzero(~ok)), int(np.maximum(count - 1, 0).sum()))


@dataclasses.dataclass
class ChannelStats:
    name: str
    edge: str
    events: np.ndarray        # ticks of the chosen edge
    interval: np.ndarray      # ticks between consecutive events
    period: np.ndarray        # rise to rise
    high: np.ndarray          # high pulse widths
    low: np.ndarray           # low pulse widths

    def to_dict(self, tick_s: float) -> dict:
        per = describe(self.period, tick_s)
        hi = describe(self.high, tick_s)
        freq = 1.0 / per["mean_s"] if per["mean_s"] else None
        duty = (hi["mean_s"] / per["mean_s"]) if (per["mean_s"] and hi["mean_s"] is not None) else None
        return {
            "channel": self.name, "edge": self.edge, "events": int(len(self.events)),
            # the rate of transfers' definition (analysis.start_rate_hz): first to last event
            "events_per_s": (start_rate_hz(len(self.events), int(self.events[0]), int(self.events[-1]), tick_s)
                             if len(self.events) else None),
            "interval": describe(self.interval, tick_s), "period": per, "high": hi,
            "low": describe(self.low, tick_s), "frequency_hz": freq, "duty": duty,
            "resolution_s": tick_s,
        }


def channel_stats(ch: ChannelEdges, edge: str) -> ChannelStats:
    ev = ch.ticks(edge)
    return ChannelStats(ch.name, edge, ev, np.diff(ev), np.diff(ch.rise), ch.high_widths()[1],
                        ch.low_widths()[1])


@dataclasses.dataclass
class EventReport:
    """Everything measured on the extra channels of one capture (ticks; ``tick_s`` per tick)."""

    chain: list[EventSpec]
    stages: list[Pairing]
    total: Pairing | None            # first → last stage, where every stage matched
    channels: list[ChannelStats]
    tick_s: float
    span_ticks: int
    truncated: str | None = None

    def metrics(self) -> dict[str, np.ndarray]:
        """Named tick series for comparisons: latencies, intervals, widths."""
        out = {}
        for p in self.stages:
            out[f"{p.src}→{p.dst}"] = p.latency.astype(float)
        if self.total is not None and len(self.stages) > 1:
            out[f"{self.total.src}→{self.total.dst} (chain)"] = self.total.latency.astype(float)
        for c in self.channels:
            out[f"{c.name}:{c.edge} interval"] = c.interval.astype(float)
            if c.edge != "both":
                continue
            out[f"{c.name} high width"] = c.high.astype(float)
            out[f"{c.name} low width"] = c.low.astype(float)
        return out

    def to_dict(self) -> dict:
        t = self.tick_s
        return {
            "chain": [s.label for s in self.chain],
            "latency": [p.to_dict(t) for p in self.stages],
            "chain_total": self.total.to_dict(t) if self.total is not None and len(self.stages) > 1 else None,
            "channels": [c.to_dict(t) for c in self.channels],
            "resolution_s": t,
            "truncated": self.truncated,
        }


def _spi_ticks(a: Analysis, edge: str) -> np.ndarray:
    if edge == "start":
        return a.start[~a.partial_start].astype(np.int64)
    return a.end[~a.partial_end].astype(np.int64)


def build_chain(specs: list[EventSpec], a: Analysis) -> list[EventSpec]:
    """The chain as measured: the given events, plus the next SPI transfer start at the end."""
    chain = list(specs)
    if chain and not any(s.is_spi for s in chain):
        chain.append(EventSpec("CS" if a.has_cs else "SPI", "start"))
    return chain


def measure(reader, a: Analysis, specs: list[EventSpec]) -> EventReport:
    """Read the extra channels of ``specs`` from an opened reader of their own and pair them
    (the analysis pairs the edges of its own pass instead: ``chains``)."""
    if not specs:
        raise UsageError("no --event given")
    edges, truncated = read_channel_edges(reader, [s.channel for s in specs if not s.is_spi])
    return chains(a, specs, edges, truncated)


def chains(a: Analysis, specs: list[EventSpec], edges: dict[str, ChannelEdges],
           truncated: str | None = None) -> EventReport:
    """The chain of ``specs`` (ending at the next transfer of ``a``, unless it names a
    transfer edge itself) and each extra channel's statistics, from the channels' edges."""
    chain = build_chain(specs, a)
    series = []
    for s in chain:
        series.append(_spi_ticks(a, s.edge) if s.is_spi else edges[s.channel].ticks(s.edge))
    end = a.end_tick
    # Each stage starts from the events the previous stage matched (the first BUSY fall after a
    # CONVST rise, not a spurious second one), so one glitch cannot break the chain after it.
    stages = []
    src = series[0]
    origin = np.arange(len(src), dtype=np.int64)      # index of each chain's first event
    for i in range(len(chain) - 1):
        p = pair(src, series[i + 1], src_label=chain[i].label, dst_label=chain[i + 1].label, end_tick=end)
        stages.append(p)
        ok = p.index >= 0
        src = series[i + 1][p.index[ok]]
        origin = origin[ok]
    total = None
    if stages:
        first = series[0]
        index = np.full(len(first), -1, np.int64)
        index[origin] = np.searchsorted(series[-1], src)
        total = Pairing(chain[0].label, chain[-1].label, first[origin], (src - first[origin]).astype(np.int64),
                        index, len(first), int(len(first) - len(origin)), 0)
    chans = []
    seen = set()
    for s in specs:
        if s.is_spi or (s.channel, s.edge) in seen:
            continue
        seen.add((s.channel, s.edge))
        chans.append(channel_stats(edges[s.channel], s.edge))
    return EventReport(chain, stages, total, chans, a.tick_s, int(a.end_tick), truncated)
