"""``spigap monitor``: a capture (or a live stream) summarized interval by interval.

The edges go through the analysis pipeline (core/pipeline.py) block by block;
the windows each device's framer closes come out at once as batches and are
measured by the same incremental measurer as a long ``spigap analyze``
(core/measurer.py; ``stalls.gap_series`` for the gap values of each kind with their
transfer), so every figure follows docs/gaps.md. A shared bus: one ``DeviceMonitor``
per device, fed by the one pass, their intervals merged (``Monitor``). Memory is bounded by one interval's gap values plus exact
whole-capture histograms (one count per distinct tick value and kind), not by
the capture length.

What needs more than one batch is fixed from the *baseline* (the measurer's first
batch): the transfers up to the end of the first interval, at least ``MIN_BASELINE``
of them, at most ``grouping.WINDOW`` + 1 (``analyze`` compares its candidates on the
same first 16 384 gaps):

* the message structure that tells cs_change gaps from context switches
  (``grouping.infer``, or ``--transfers-per-message``): carried on by the global gap
  index (``Measurer.carry``), so every later gap is classified as ``analyze`` would
  with that structure (``analyze`` also re-checks the winner on four samples spread
  over the capture, which a stream cannot);
* the inter-transfer threshold inside CS windows (unless given; the first batch
  with word gaps sets it when the baseline had none);
* the stall thresholds (median + max(k σ, rel × median, 5 samples) per kind,
  ``core/stalls.py``): a stall in an interval is a gap far above the
  baseline's median, so a run that degrades shows more stalls.

A transfer belongs to the interval of its CS assert (its start); its gaps
(gap before it, its setup, hold and word gaps) belong to it. Interval k
covers ticks [k·I, (k+1)·I); it is reported once no transfer can start in it
any more (a later edge has arrived and no window opened before its end is
still open), or at the end of the input.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import operator
import re
import signal
from typing import Callable

import numpy as np

from spigap.findings import Finding, by_cause, cause_of
from spigap import stopping
from spigap.core import analysis, grouping as grouping_mod, stalls as stalls_mod
from spigap.core.config import SpiConfig
from spigap.core.framed import Batch, Framed
from spigap.core.measurer import Measurer
from spigap.core.pipeline import Pipeline
from spigap.core.quantile import percentiles
from spigap.core.tickhist import TickHistogram
from spigap.errors import UsageError
from spigap.io.base import CaptureReader
from spigap.units import parse_time

MIN_BASELINE = 200
BASELINE_MAX = grouping_mod.WINDOW + 1


# ------------------------------------------------------------------ alerts
_OPS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}
_ALERT_RE = re.compile(r"^\s*(?:(?P<kind>[a-z_]+)\.(?P<stat>n|p50|p99|max)|(?P<top>transfers|rate_hz|stalls))"
                       r"\s*(?P<op>>=|<=|>|<)\s*(?P<value>\S+)\s*$")


@dataclasses.dataclass(frozen=True)
class Alert:
    """``KIND.STAT OP VALUE`` (STAT: n, p50, p99, max; VALUE a time for p50/p99/max) or
    ``transfers|rate_hz|stalls OP NUMBER``, checked on every interval."""

    text: str
    kind: str | None
    stat: str
    op: str
    value: float

    def measured(self, iv: dict) -> float | None:
        if self.kind is None:
            return iv[self.stat]
        g = iv["gaps"].get(self.kind)
        if g is None:
            return None
        return g["n"] if self.stat == "n" else g[f"{self.stat}_s"]

    def violated(self, iv: dict) -> float | None:
        """The measured value when this interval violates the alert, else None."""
        v = self.measured(iv)
        if v is None:
            return None
        return v if _OPS[self.op](v, self.value) else None


def parse_alert(text: str) -> Alert:
    m = _ALERT_RE.match(text)
    if not m:
        raise UsageError(f"bad --alert {text!r}", hint="use KIND.STAT>VALUE, e.g. 'context_switch.p99>50us', "
                         "'cs_change.max>=1ms', 'rate_hz<2000', 'stalls>0' (STAT: n, p50, p99, max)")
    kind, stat = m.group("kind"), m.group("stat") or m.group("top")
    if kind is not None and kind not in stalls_mod.STALL_KINDS:
        raise UsageError(f"--alert {text!r}: unknown gap kind {kind!r}; known: {', '.join(stalls_mod.STALL_KINDS)}")
    raw = m.group("value")
    try:
        value = parse_time(raw) if stat in ("p50", "p99", "max") else float(raw)
    except ValueError as e:
        raise UsageError(f"--alert {text!r}: {e}") from None
    return Alert(text.strip(), kind, stat, m.group("op"), value)


# ------------------------------------------------------------- histograms
def _gap_stats(v: np.ndarray | None, tick_s: float, hist: TickHistogram | None = None) -> dict:
    if hist is not None:
        if hist.n == 0:
            return {"n": 0, "p50_s": None, "p99_s": None, "max_s": None}
        p50, p99 = hist.percentiles([50, 99])
        return {"n": hist.n, "p50_s": p50 * tick_s, "p99_s": p99 * tick_s, "max_s": float(hist.max or 0) * tick_s}
    if v is None or len(v) == 0:
        return {"n": 0, "p50_s": None, "p99_s": None, "max_s": None}
    p50, p99 = percentiles(v, [50, 99])
    return {"n": int(len(v)), "p50_s": p50 * tick_s, "p99_s": p99 * tick_s, "max_s": float(v.max()) * tick_s}


def _new_slot() -> dict:
    """One interval's transfers, the starts its rate counts, gap values and stalls."""
    return {"transfers": 0, "starts": analysis.StartSpan(), "gaps": {}, "stalls": 0}


class AlertTriggered(Exception):
    def __init__(self, alert: Alert, value: float, interval: dict):
        super().__init__(alert.text)
        self.alert, self.value, self.interval = alert, value, interval


class DeviceMonitor:
    """One device's intervals (its transfers, rates, gaps and stalls, its own baseline and
    stall thresholds, as for a capture of that one device), from its batches (``batch``,
    then ``finish``); ``on_interval(dict)`` is called for every interval in order."""

    def __init__(self, lane, interval_s: float, *, rule: stalls_mod.StallRule = stalls_mod.StallRule(),
                 alerts: list[Alert] | None = None, on_interval: Callable[[dict], None] | None = None,
                 on_baseline: Callable[["DeviceMonitor"], None] | None = None, grouper=None):
        self.lane = lane
        self.info = lane.info
        self.tick_s = self.info.tick_s
        if not interval_s > 0:
            raise UsageError(f"--interval must be positive, not {interval_s!r}")
        self.interval_s = interval_s
        self.iv_ticks = max(1, int(round(interval_s / self.tick_s)))
        self.rule = rule
        self.alerts = alerts or []
        self.on_interval = on_interval or (lambda iv: None)
        self.on_baseline = on_baseline or (lambda m: None)
        self.framer = lane.framer
        self.grouper = grouper           # a shared bus's device: core/bus.BusGrouper
        self.cfg, self.names = lane.cfg, lane.settled.names
        self.kinds = (["cs_setup", "cs_hold", "inter_byte", "inter_transfer", "cs_change", "context_switch"]
                      if self.cfg.cs is not None else ["inter_byte", "inter_transfer", "idle"])
        # the incremental measurer (core/measurer.py): the baseline fixes the grouping and the
        # word-gap split, later batches carry them on
        self.measurer = Measurer(self.info, self.cfg, grouper)
        # baseline
        self._learn: list[Framed] | None = []
        self._learn_n = 0
        self.grouping: grouping_mod.Grouping | None = None
        self.thresholds: dict[str, tuple[float, float]] = {}
        self.baseline_kinds: list[str] = []
        self.warnings: list[str] = []      # the baseline analysis's own warnings (framing, settings)
        # intervals
        self._next = 0                   # next interval to report
        self._open: dict[int, dict] = {}
        self.hist = {k: TickHistogram() for k in self.kinds}
        self.transfers = 0
        self.starts = analysis.StartSpan()      # of the intervals reported: the summary's rate
        self.stalls = 0
        self.intervals = 0
        self.end_tick: int | None = None
        self.truncated: str | None = None
        self.interrupted = False
        self.signal: str | None = None
        self.alert: AlertTriggered | None = None

    # ------------------------------------------------------------ driving
    def batch(self, batch: Batch) -> None:
        """One batch of this device's framer (core/pipeline.py), in capture order."""
        framed, last_tick = batch.framed, batch.fed_to
        if batch.final:
            self.end_tick = self.lane.end_tick
        n = framed.n
        if self._learn is not None:
            if n:
                self._learn.append(framed)
                self._learn_n += n
            frontier = self._frontier(last_tick)
            if last_tick is not None and not (self._learn_n >= BASELINE_MAX or
                                              (frontier >= self.iv_ticks and self._learn_n >= MIN_BASELINE)):
                return
            parts, self._learn = self._learn, None
            self._baseline(Framed.concat(parts) if parts else None, batch)
        elif n:
            self._measure(framed, batch)
        if last_tick is not None:
            self._flush_until(self._frontier(last_tick))

    def finish(self) -> None:
        """The capture ended (after the pipeline ran)."""
        self.end_tick = self.lane.end_tick
        self._flush_until(self.end_tick or 0, final=True)

    def _frontier(self, last_tick: int | None) -> float:
        """Ticks before this hold no transfer start still to come."""
        if last_tick is None:
            return math.inf
        p = self.framer.pending_start()
        return float(p) if p is not None else float(last_tick + 1)

    # ----------------------------------------------------------- baseline
    def _baseline(self, raw: Framed | None, batch: Batch) -> None:
        if raw is None:
            self.on_baseline(self)
            return
        a = self.measurer.first(raw, batch.figures)
        self.warnings = [w for w in a.warnings if w not in self.info.warnings]
        self.grouping = a.grouping if self.cfg.cs is not None else None
        for kind in self.kinds:
            v = stalls_mod.gap_series(a, kind).values
            th = stalls_mod.threshold(v, self.rule)
            if th is not None:
                self.thresholds[kind] = th
            if len(v):
                self.baseline_kinds.append(kind)
        self.on_baseline(self)
        self._distribute(a, 0)
        self._released()

    def _measure(self, raw: Framed, taken: Batch) -> None:
        a, skip, _ = self.measurer.next([raw], taken.figures)
        self._distribute(a, skip)
        self._released()

    def _released(self) -> None:
        if self.grouper is not None:
            self.grouper.columns.release(self.measurer.n_done - 1)      # the last one is the next context

    def _distribute(self, a: analysis.Analysis, skip: int) -> None:
        """Add the transfers of ``a`` (from index ``skip``) and their gaps to their intervals."""
        if a.n <= skip:
            return
        iv_of = a.start // self.iv_ticks
        counts = np.bincount(iv_of[skip:] - iv_of[skip], minlength=1)
        for j, c in enumerate(counts.tolist()):
            if c:
                self._slot(int(iv_of[skip]) + j)["transfers"] += c
        # the starts the rate counts (analysis.start_rate_hz), by interval
        real = ~a.partial_start[skip:]
        st, st_iv = a.start[skip:][real], iv_of[skip:][real]
        cuts = np.flatnonzero(np.diff(st_iv)) + 1
        for part in np.split(st, cuts):
            if len(part):
                self._slot(int(part[0] // self.iv_ticks))["starts"].add(part)
        for kind, s in stalls_mod.gap_series_of(a, self.kinds).items():
            keep = s.transfer >= skip
            v, owner = s.values[keep], iv_of[s.transfer[keep]]
            if len(v) == 0:
                continue
            th = self.thresholds.get(kind)
            order = np.argsort(owner, kind="stable")
            v, owner = v[order], owner[order]
            cuts = np.flatnonzero(np.diff(owner)) + 1
            for part_v, k in zip(np.split(v, cuts), owner[np.concatenate([[0], cuts])].tolist()):
                slot = self._slot(int(k))
                slot["gaps"].setdefault(kind, []).append(part_v)
                if th is not None:
                    slot["stalls"] += int(np.count_nonzero(part_v > th[1]))

    def _slot(self, k: int) -> dict:
        if k < self._next:          # cannot happen: intervals are reported only once complete
            raise AssertionError(f"interval {k} already reported")
        if k not in self._open:
            self._open[k] = _new_slot()
        return self._open[k]

    # ------------------------------------------------------------ output
    def _flush_until(self, frontier: float, final: bool = False) -> None:
        if final:
            end = self.end_tick or 0
            last = max([(end - 1) // self.iv_ticks] + list(self._open)) if end > 0 or self._open else -1
            upto = last + 1
        else:
            upto = int(frontier // self.iv_ticks)
        while self._next < upto:
            k = self._next
            slot = self._open.pop(k, None) or _new_slot()
            self._next += 1
            self._report(k, slot)

    def _report(self, k: int, slot: dict) -> None:
        t0 = k * self.iv_ticks
        span = self.iv_ticks
        if self.end_tick is not None and self.end_tick < t0 + span:
            span = max(self.end_tick - t0, 1)
        gaps = {}
        for kind in self.kinds:
            parts = slot["gaps"].get(kind)
            v = np.concatenate(parts) if parts else None
            if v is not None:
                self.hist[kind].add(v)
            gaps[kind] = _gap_stats(v, self.tick_s)
        iv = {"t_s": t0 * self.tick_s, "interval_s": span * self.tick_s, "transfers": slot["transfers"],
              "rate_hz": slot["transfers"] / (span * self.tick_s), "gaps": gaps, "stalls": slot["stalls"],
              "resolution_s": self.tick_s}
        self.transfers += slot["transfers"]
        self.starts.merge(slot["starts"])
        self.stalls += slot["stalls"]
        self.intervals += 1
        self.on_interval(iv)
        for al in self.alerts:
            bad = al.violated(iv)
            if bad is not None:
                raise AlertTriggered(al, bad, iv)

    def summary(self) -> dict:
        dur = (self.end_tick or 0) * self.tick_s
        if self.alert is not None:
            iv = self.alert.interval
            dur = iv["t_s"] + iv["interval_s"]
        return {
            "capture": self.info.path, "resolution_s": self.tick_s, "interval_s": self.iv_ticks * self.tick_s,
            "intervals": self.intervals, "duration_s": dur, "transfers": self.transfers,
            "rate_hz": self.starts.rate_hz(self.tick_s),
            "gaps": {k: _gap_stats(None, self.tick_s, self.hist[k]) for k in self.kinds},
            "stalls": self.stalls,
            "grouping": self.grouping.note if self.grouping is not None else None,
            "transfers_per_message": self.grouping.transfers_per_message if self.grouping is not None else None,
            "stall_baseline": {k: {"median_s": m * self.tick_s, "threshold_s": t * self.tick_s}
                               for k, (m, t) in self.thresholds.items()},
            "interrupted": self.interrupted, "signal": self.signal, "truncated": self.truncated,
            "alert": (None if self.alert is None else
                      {"rule": self.alert.alert.text, "value": self.alert.value, "t_s": self.alert.interval["t_s"]}),
        }


class Monitor:
    """``spigap monitor`` of a capture: one ``DeviceMonitor`` per device, fed by one pass
    over the capture (core/pipeline.py). Run with ``run()``; ``on_interval(dict)`` is
    called for every interval in order: one device's interval as it is; on a shared bus
    an interval is handed on once every device has reported it, as ``{"t_s",
    "interval_s", "devices": {CE0: interval, CE1: interval}}`` (docs/live.md).
    ``on_baseline(DeviceMonitor)`` once per device, when its baseline is set."""

    def __init__(self, reader: CaptureReader, cfg: SpiConfig, interval_s: float, *,
                 rule: stalls_mod.StallRule = stalls_mod.StallRule(), alerts: list[Alert] | None = None,
                 on_interval: Callable[[dict], None] | None = None,
                 on_baseline: Callable[[DeviceMonitor], None] | None = None, pipe: Pipeline | None = None,
                 ending: stopping.Ending | None = None):
        self.pipe = pipe if pipe is not None else Pipeline(reader, cfg)
        self.ending = ending
        self.info = reader.info
        self.names = self.pipe.names
        self.on_interval = on_interval or (lambda iv: None)
        self._pending: dict[int, dict] = {}
        self._seen = [0] * len(self.names)
        tracker = self.pipe.tracker
        if tracker is not None:
            from spigap.core.bus import BusGrouper
        self.devices = [DeviceMonitor(lane, interval_s, rule=rule, alerts=alerts, on_baseline=on_baseline,
                                      on_interval=self.on_interval if tracker is None else self._device_interval(k),
                                      grouper=None if tracker is None else BusGrouper(tracker.columns[k]))
                        for k, lane in enumerate(self.pipe.lanes)]
        self.alert: AlertTriggered | None = None
        self.truncated: str | None = None
        self.interrupted = False
        self.signal: str | None = None      # the signal that ended the feeding: SIGINT, SIGTERM, SIGHUP

    @property
    def shared(self) -> bool:
        return len(self.devices) > 1

    @property
    def warnings(self) -> list[str]:
        """The baseline's own warnings (framing, settings): one device's as they are, a shared
        bus's settings warnings and each device's named."""
        if not self.shared:
            return self.devices[0].warnings
        out = list(self.pipe.settled.warnings)
        for name, m in zip(self.names, self.devices):
            out += [Finding(f"{name}: {w}", cause_of(w)) for w in m.warnings]
        return by_cause(out)

    def _device_interval(self, k: int):
        def on(iv: dict) -> None:
            j = self._seen[k]
            self._seen[k] += 1
            slot = self._pending.setdefault(j, {"t_s": iv["t_s"], "interval_s": iv["interval_s"], "devices": {}})
            slot["devices"][self.names[k]] = iv
            self._emit()
        return on

    def _emit(self) -> None:
        while self._pending:
            j = min(self._pending)
            slot = self._pending[j]
            if len(slot["devices"]) < len(self.names):
                return
            del self._pending[j]
            slot["devices"] = {n: slot["devices"][n] for n in self.names}
            self.on_interval(slot)

    def run(self) -> dict:
        """Feed the capture to the end, Ctrl-C or a stop signal: every batch is measured and its
        intervals reported whole (under ``ending``, stopping.Ending, a signal is raised between
        batches, never inside one), then the intervals left."""
        ending = self.ending
        held = ending.held if ending is not None else contextlib.nullcontext

        def on_batch(k: int, b: Batch) -> None:
            if b.final and ending is not None:
                ending.close()          # the feeding is over: a signal now waits for the summary
            with held():
                self.devices[k].batch(b)

        try:
            self.pipe.run(on_batch, interruptible=True)
            if ending is not None:
                ending.close()
            for m in self.devices:
                m.finish()
        except AlertTriggered as a:
            self.alert = a
        if ending is not None:
            ending.close()
        self.truncated, self.interrupted = self.pipe.truncated, self.pipe.interrupted
        if self.interrupted:            # which signal ended the feeding (without ``ending``: Ctrl-C)
            signum = ending.signum if ending is not None and ending.signum is not None else signal.SIGINT
            self.signal = signal.Signals(signum).name
        for m in self.devices:
            m.truncated, m.interrupted, m.signal = self.truncated, self.interrupted, self.signal
            if self.alert is not None:
                m.alert = self.alert
        return self.summary()

    def summary(self) -> dict:
        """One device's summary as it is; a shared bus's with every device's."""
        if not self.shared:
            return self.devices[0].summary()
        devices = {n: m.summary() for n, m in zip(self.names, self.devices)}
        first = next(iter(devices.values()))
        return {"capture": self.info.path, "resolution_s": first["resolution_s"], "interval_s": first["interval_s"],
                "intervals": max(d["intervals"] for d in devices.values()), "duration_s": first["duration_s"],
                "transfers": sum(d["transfers"] for d in devices.values()),
                "stalls": sum(d["stalls"] for d in devices.values()), "devices": devices,
                "interrupted": self.interrupted, "signal": self.signal, "truncated": self.truncated,
                "alert": first["alert"]}
