"""Analog -> logic, and per-channel level streams -> one edge stream.

Three pieces used by every reader that is not a plain sampled logic capture:

* ``Schmitt``: a per-channel threshold with hysteresis (a Schmitt trigger),
  vectorized over a chunk of samples, with the output level carried from one
  chunk to the next. A sample at or above ``high`` reads 1, at or below
  ``low`` reads 0, anything in between (and NaN = no data) keeps the previous
  level. The "keep" is a forward fill done with ``np.maximum.accumulate`` on
  sample indices, so no Python loop runs per sample.
* ``parse_threshold`` / ``resolve_thresholds``: ``--threshold [CH=]V[,HYST]``
  and the default (mid-range of the signal with a hysteresis of 10 % of the
  swing, per channel, falling back to the swing of all channels together for a
  channel that does not toggle in the sampled data).
* ``merge``: k-way merge of per-channel (or per-group) level streams into
  ``EdgeBlock``s. Saleae writes one file per channel, sigrok writes analog
  channels in their own members; each becomes a *source* that yields
  ``(ticks, states)`` runs with strictly increasing ticks starting at tick 0,
  and ``merge`` packs them into bit positions of one state word. Memory is
  one run per source.
"""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np

from spigap.findings import Cause, Finding
from spigap.errors import CaptureTruncated, UsageError
from spigap.io.base import EdgeBlock

DEFAULT_HYSTERESIS_FRACTION = 0.10   # of the signal swing (low..high), total band width
MIN_OWN_SWING_FRACTION = 0.2         # below this share of the pooled swing a channel "does not toggle"


# ----------------------------------------------------------------- thresholds
@dataclasses.dataclass(frozen=True)
class Threshold:
    """Switching level and total hysteresis band width, in the data's unit (volts)."""

    level: float
    hysteresis: float = 0.0

    @property
    def low(self) -> float:
        return self.level - self.hysteresis / 2

    @property
    def high(self) -> float:
        return self.level + self.hysteresis / 2

    def describe(self) -> str:
        return f"{self.level:.4g} V ± {self.hysteresis / 2:.3g}"


_NUM = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_THR_RE = re.compile(rf"^\s*(?:(?P<ch>[^=]+?)\s*=\s*)?(?P<v>{_NUM})\s*(?P<vu>m?V)?\s*"
                     rf"(?:[,/]\s*(?P<h>{_NUM})\s*(?P<hu>m?V)?\s*)?$")


def parse_threshold(text: str) -> tuple[str | None, Threshold]:
    """``"SCLK=1.65,0.2"`` -> ("SCLK", Threshold(1.65, 0.2)); ``"1.4"`` -> (None, ...) = all channels.

    Values are volts; ``mV``/``V`` suffixes are accepted. Without a hysteresis the
    default band is 10 % of the level (at least 10 mV)."""
    m = _THR_RE.match(text or "")
    if not m:
        raise UsageError(f"bad --threshold {text!r}",
                         hint="use [CHANNEL=]VOLTS[,HYSTERESIS], e.g. SCLK=1.65,0.2 or 1.4")
    ch = m.group("ch")
    if ch is not None and ch.strip() in ("", "*"):
        ch = None
    level = float(m.group("v")) * (1e-3 if m.group("vu") == "mV" else 1.0)
    if m.group("h") is not None:
        hyst = float(m.group("h")) * (1e-3 if m.group("hu") == "mV" else 1.0)
    else:
        hyst = max(abs(level) * DEFAULT_HYSTERESIS_FRACTION, 0.01)
    if not (math.isfinite(level) and math.isfinite(hyst)) or hyst < 0:
        raise UsageError(f"bad --threshold {text!r}: level and hysteresis must be finite, hysteresis >= 0")
    return (ch.strip() if ch else None), Threshold(level, hyst)


def normalize_threshold_option(value) -> list[tuple[str | None, Threshold]]:
    """Accept None, a string, a list of strings/tuples or a dict {channel|None: float|Threshold}."""
    if value is None:
        return []
    if isinstance(value, (str, tuple)):
        value = [value]
    if isinstance(value, dict):
        value = list(value.items())
    out = []
    for item in value:
        if isinstance(item, str):
            out.append(parse_threshold(item))
        else:
            key, thr = item
            if not isinstance(thr, Threshold):
                if isinstance(thr, (tuple, list)):
                    thr = Threshold(float(thr[0]), float(thr[1]))
                else:
                    thr = Threshold(float(thr), max(abs(float(thr)) * DEFAULT_HYSTERESIS_FRACTION, 0.01))
            out.append((key, thr))
    return out


def auto_thresholds(samples: dict[str, np.ndarray]) -> dict[str, Threshold]:
    """Mid-range threshold per channel from sample data (robust percentiles).

    A channel whose own swing is small against the swing of all channels (a CS
    line that never toggles in the sampled part) uses the pooled range: SPI
    lines share one logic family."""
    ranges = {}
    for name, v in samples.items():
        v = np.asarray(v, dtype=np.float64)
        v = v[np.isfinite(v)]
        if len(v):
            lo, hi = np.percentile(v, [0.5, 99.5])
            ranges[name] = (float(lo), float(hi))
    if ranges:
        plo = min(r[0] for r in ranges.values())
        phi = max(r[1] for r in ranges.values())
    else:
        plo, phi = 0.0, 3.3
    pooled_span = phi - plo
    out = {}
    for name in samples:
        lo, hi = ranges.get(name, (plo, phi))
        if pooled_span > 0 and (hi - lo) < MIN_OWN_SWING_FRACTION * pooled_span:
            lo, hi = plo, phi
        span = hi - lo
        if not span > 0:
            # flat everywhere: any level works as long as it is not the flat value itself
            out[name] = Threshold(lo + 0.5, 0.1)
            continue
        out[name] = Threshold((lo + hi) / 2, span * DEFAULT_HYSTERESIS_FRACTION)
    return out


def resolve_thresholds(spec, names: Sequence[str], sample_fn: Callable[[list[str]], dict[str, np.ndarray]],
                       *, path: str | None = None, aliases: dict[str, str] | None = None
                       ) -> tuple[dict[str, Threshold], list[str]]:
    """Thresholds for the analog channels ``names``: explicit ones from ``spec``
    (a channel key or None = every channel), the rest automatic from
    ``sample_fn(names) -> {name: samples}``. Returns (thresholds, notes)."""
    from spigap.io import resolve_channel_key

    explicit: dict[str, Threshold] = {}
    default: Threshold | None = None
    for key, thr in normalize_threshold_option(spec):
        if key is None:
            default = thr
            continue
        idx = resolve_channel_key(key, list(names), aliases or {})
        if idx is None:
            raise UsageError(f"--threshold names channel {key!r}, but the analog channels are: "
                             f"{', '.join(names) or 'none'}", path=path)
        explicit[names[idx]] = thr
    out = {}
    auto_names = [n for n in names if n not in explicit and default is None]
    sampled = sample_fn(auto_names) if auto_names else {}
    auto = auto_thresholds(sampled) if auto_names else {}
    notes = []
    flat = [n for n in auto_names if _swing(sampled.get(n)) < MIN_OWN_SWING_FRACTION * max(
        (_swing(v) for v in sampled.values()), default=0.0) or _swing(sampled.get(n)) == 0.0]
    if auto_names and max((_swing(v) for v in sampled.values()), default=0.0) == 0.0:
        notes.append("the analog channels do not swing in the sampled data, so the automatic threshold is "
                     "a guess: give the logic level with --threshold CH=V[,HYST]")
    elif flat:
        notes.append(f"{', '.join(flat)} did not toggle in the sampled data; the threshold comes from the "
                     "other channels' swing (set it with --threshold if the logic levels differ)")
    for n in names:
        if n in explicit:
            out[n] = explicit[n]
        elif default is not None:
            out[n] = default
        else:
            out[n] = auto[n]
    if auto_names:
        notes.append(Finding("analog threshold (auto, mid-range ± 5 % of the swing): " + ", ".join(
            f"{n} {out[n].describe()}" for n in auto_names) + "; set with --threshold CH=V[,HYST]", Cause.NOTE))
    return out, notes


def _swing(v) -> float:
    if v is None:
        return 0.0
    v = np.asarray(v, dtype=np.float64)
    v = v[np.isfinite(v)]
    if len(v) == 0:
        return 0.0
    lo, hi = np.percentile(v, [0.5, 99.5])
    return float(hi - lo)


# ------------------------------------------------------------------- Schmitt
class Schmitt:
    """Threshold with hysteresis over successive chunks of one channel."""

    def __init__(self, thr: Threshold, state: int | None = None):
        self.thr = thr
        self.state = state

    def __call__(self, v: np.ndarray) -> np.ndarray:
        """Levels (uint8) of the samples ``v``; NaN keeps the previous level."""
        n = len(v)
        if n == 0:
            return np.empty(0, np.uint8)
        if self.state is None:
            finite = np.flatnonzero(np.isfinite(v))
            self.state = int(v[finite[0]] >= self.thr.level) if len(finite) else 0
        hi = v >= self.thr.high
        decided = hi | (v <= self.thr.low)          # NaN compares False: undecided
        idx = np.where(decided, np.arange(n), -1)
        np.maximum.accumulate(idx, out=idx)
        out = np.where(idx >= 0, hi[np.maximum(idx, 0)], bool(self.state)).astype(np.uint8)
        self.state = int(out[-1])
        return out


def level_changes(levels: np.ndarray, prev: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Positions where ``levels`` differ from the sample before (``prev`` before
    index 0; None = position 0 always counts) and the new levels."""
    if len(levels) == 0:
        return np.empty(0, np.int64), levels[:0]
    d = np.empty(len(levels), bool)
    d[0] = prev is None or levels[0] != prev
    np.not_equal(levels[1:], levels[:-1], out=d[1:])
    pos = np.flatnonzero(d)
    return pos.astype(np.int64), levels[pos]


def sampled_source(chunks: Iterable[np.ndarray], schmitt: Schmitt, *,
                   tick_of: Callable[[np.ndarray], np.ndarray] | None = None,
                   tap: Callable[[int, np.ndarray], None] | None = None
                   ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """A source for ``merge`` from successive sample chunks of one analog channel.

    ``tick_of(sample_numbers)`` maps sample numbers to ticks (default: the
    sample number itself; it must not decrease). The first run starts with
    tick 0, holding the first sample's level. ``tap(first_tick, volts)``
    (CaptureReader.volts_tap_for) sees every chunk too, in runs of consecutive ticks."""
    return strict_runs(_sampled(chunks, schmitt, tick_of, tap))


def tap_runs(tap: Callable[[int, np.ndarray], None], ticks: np.ndarray, v: np.ndarray) -> None:
    """Hand ``v`` (samples at ``ticks``, not decreasing) to a volts tap in runs of consecutive
    ticks; a tick repeated (a peak-detect pair) keeps its first sample."""
    if not len(v):
        return
    d = np.diff(ticks)
    if d.size == 0 or bool((d == 1).all()):
        tap(int(ticks[0]), v)
        return
    keep = np.concatenate([[True], d != 0])
    ticks, v = ticks[keep], v[keep]
    cuts = np.flatnonzero(np.diff(ticks) != 1) + 1
    for a, b in zip(np.concatenate([[0], cuts]), np.concatenate([cuts, [len(v)]])):
        tap(int(ticks[a]), v[a:b])


def _sampled(chunks, schmitt, tick_of, tap=None):
    base = 0
    prev = None
    for v in chunks:
        if tap is not None:
            if tick_of is None:
                tap(base, v)
            else:
                tap_runs(tap, np.asarray(tick_of(base + np.arange(len(v))), np.int64), v)
        lv = schmitt(v)
        pos, new = level_changes(lv, prev)
        if len(lv):
            prev = int(lv[-1])
        if len(pos):
            abs_pos = pos + base
            ticks = np.asarray(tick_of(abs_pos) if tick_of else abs_pos, np.int64)
            if base == 0 and ticks[0] != 0:
                ticks = np.concatenate([np.zeros(1, np.int64), ticks])
                new = np.concatenate([new[:1], new])
            yield ticks, new.astype(np.uint32)
        base += len(v)
    if prev is None:
        yield np.zeros(1, np.int64), np.zeros(1, np.uint32)


# --------------------------------------------------------------------- merge
def strict_runs(runs: Iterable[tuple[np.ndarray, np.ndarray]]) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Make a source's ticks strictly increasing: where several entries share a
    tick (inside a run or across runs) the last one wins. Holds back the last
    entry of each run until the next run shows whether it continues."""
    held_t = np.empty(0, np.int64)
    held_s = np.empty(0, np.uint32)
    try:
        for t, s in runs:
            if len(t) == 0:
                continue
            t = np.concatenate([held_t, np.asarray(t, np.int64)])
            s = np.concatenate([held_s, np.asarray(s, np.uint32)])
            keep = np.empty(len(t), bool)
            keep[-1] = True
            np.not_equal(t[1:], t[:-1], out=keep[:-1])
            t, s = t[keep], s[keep]
            if len(t) > 1:
                yield t[:-1], s[:-1]
            held_t, held_s = t[-1:], s[-1:]
    except CaptureTruncated:
        if len(held_t):
            yield held_t, held_s
        raise
    if len(held_t):
        yield held_t, held_s


def strict_blocks(blocks: Iterable[EdgeBlock]) -> Iterator[EdgeBlock]:
    """EdgeBlocks with strictly increasing ticks across blocks (a tick continued
    in the next block: the later state wins) and only real changes after the
    first entry. Passes ``CaptureTruncated`` on after flushing."""
    prev: int | None = None
    for t, s in strict_runs((b.ticks, b.states) for b in blocks):
        chg = np.empty(len(t), bool)
        chg[0] = prev is None or int(s[0]) != prev
        np.not_equal(s[1:], s[:-1], out=chg[1:])
        prev = int(s[-1])
        if chg.any():
            yield EdgeBlock(t[chg], s[chg])


class Source:
    """One input of ``merge``: ``runs`` yields (ticks, states) with strictly
    increasing ticks, the first tick being 0; ``states`` hold ``nbits`` channel
    bits that land at bit ``shift`` of the merged state (or, with ``mask``,
    states already placed at their final bits)."""

    def __init__(self, runs: Iterable[tuple[np.ndarray, np.ndarray]], shift: int, nbits: int = 1,
                 mask: int | None = None):
        self.it = iter(runs)
        self.shift = shift
        self.mask = mask if mask is not None else ((1 << nbits) - 1) << shift
        self.t = np.empty(0, np.int64)
        self.s = np.empty(0, np.uint32)
        self.done = False
        self.state = 0         # state (already shifted) before the buffered entries

    def fill(self) -> CaptureTruncated | None:
        """Pull until the buffer holds something or the source ends."""
        while not self.done and len(self.t) == 0:
            try:
                t, s = next(self.it)
            except StopIteration:
                self.done = True
                return None
            except CaptureTruncated as e:
                self.done = True
                return e
            self.t = np.asarray(t, np.int64)
            self.s = (np.asarray(s, np.uint32) << np.uint32(self.shift)) & np.uint32(self.mask)
        return None


def merge(sources: list[Source], *, on_truncated: Callable[[CaptureTruncated], None] | None = None
          ) -> Iterator[EdgeBlock]:
    """k-way merge of sources into EdgeBlocks (first entry tick 0; afterwards only changes).

    A source that raises ``CaptureTruncated`` limits everything to the tick it
    reached: the other sources are emitted up to there, then the exception is
    re-raised (after ``on_truncated``)."""
    limit: int | None = None
    failure: CaptureTruncated | None = None
    prev_state: int | None = None
    while True:
        for src in sources:
            e = src.fill()
            if e is not None:
                reached = e.at_tick if e.at_tick is not None else (int(src.t[-1]) if len(src.t) else 0)
                if limit is None or reached < limit:
                    limit, failure = reached, e
        live = [src for src in sources if len(src.t)]
        if not live:
            break
        pending = [src for src in sources if not src.done]
        horizon = min(int(src.t[-1]) for src in pending) if pending else None
        if limit is not None and (horizon is None or horizon >= limit):
            horizon = limit - 1
        if horizon is None:
            horizon = max(int(src.t[-1]) for src in live)
        parts = []
        for src in live:
            k = int(np.searchsorted(src.t, horizon, side="right"))
            parts.append(src.t[:k])
        ticks = np.unique(np.concatenate(parts)) if parts else np.empty(0, np.int64)
        if len(ticks) == 0:
            break       # only when the limit cut everything that is left
        state = np.zeros(len(ticks), np.uint32)
        for src in sources:
            if len(src.t) == 0:
                state |= np.uint32(src.state)
                continue
            k = int(np.searchsorted(src.t, horizon, side="right"))
            if k == 0:
                state |= np.uint32(src.state)
                continue
            st, ss = src.t[:k], src.s[:k]
            idx = np.searchsorted(st, ticks, side="right") - 1
            state |= np.where(idx >= 0, ss[np.maximum(idx, 0)], np.uint32(src.state)).astype(np.uint32)
            if k:
                src.state = int(ss[k - 1])
            src.t, src.s = src.t[k:], src.s[k:]
        keep = np.empty(len(ticks), bool)
        keep[0] = prev_state is None or state[0] != prev_state
        np.not_equal(state[1:], state[:-1], out=keep[1:])
        if prev_state is None:
            keep[0] = True
            if ticks[0] != 0:      # a source started late: tick 0 holds the initial levels
                ticks = np.concatenate([[0], ticks])
                state = np.concatenate([[state[0]], state])
                keep = np.concatenate([[True], keep])
                keep[1] = False
        prev_state = int(state[-1])
        if keep.any():
            yield EdgeBlock(ticks[keep].astype(np.int64), state[keep])
        if limit is not None and horizon >= limit - 1:
            break
    if failure is not None:
        if on_truncated:
            on_truncated(failure)
        raise failure
