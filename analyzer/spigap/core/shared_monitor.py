"""``spigap monitor`` on a shared bus: one core/monitor.Monitor per device, fed by one
pass over the capture (core/shared.SharedPipeline), their intervals merged.

Each device's intervals are its own (its transfers, rates, gaps and stalls, its own
baseline and stall thresholds, as for a capture of that one device); an interval is
handed on once every device has reported it, as ``{"t_s", "interval_s", "devices":
{CE0: interval, CE1: interval}}`` (docs/live.md).
"""

from __future__ import annotations

from typing import Callable

from spigap.core import stalls as stalls_mod
from spigap.core.infer.report import Settled
from spigap.core.monitor import Alert, AlertTriggered, Monitor
from spigap.core.shared import SharedGrouper, SharedPipeline
from spigap.io.base import CaptureReader


class SharedMonitor:
    def __init__(self, reader: CaptureReader, settled: Settled, interval_s: float, *,
                 rule: stalls_mod.StallRule = stalls_mod.StallRule(), alerts: list[Alert] | None = None,
                 on_interval: Callable[[dict], None] | None = None,
                 on_baseline: Callable[[Monitor], None] | None = None):
        self.pipe = SharedPipeline(reader, settled)
        self.info = reader.info
        self.names = list(self.pipe.names)
        self.on_interval = on_interval or (lambda iv: None)
        self._pending: dict[int, dict] = {}
        self._seen = [0] * len(self.names)
        self.monitors = [Monitor(reader, p.cfg, interval_s, rule=rule, alerts=alerts, pipe=p,
                                 grouper=SharedGrouper(self.pipe.tracker.columns[k]),
                                 on_interval=self._device_interval(k), on_baseline=on_baseline)
                         for k, p in enumerate(self.pipe.pipes)]
        self.alert: AlertTriggered | None = None
        self.truncated: str | None = None
        self.interrupted = False

    @property
    def warnings(self) -> list[str]:
        out = list(self.pipe.settled.warnings)
        for name, m in zip(self.names, self.monitors):
            out += [f"{name}: {w}" for w in m.warnings]
        return out

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
        try:
            self.pipe.run(lambda k, b: self.monitors[k].batch(b), interruptible=True)
            for m in self.monitors:
                m.finish()
        except AlertTriggered as a:
            self.alert = a
        self.truncated, self.interrupted = self.pipe.truncated, self.pipe.interrupted
        for m in self.monitors:
            m.truncated, m.interrupted = self.truncated, self.interrupted
            if self.alert is not None:
                m.alert = self.alert
        return self.summary()

    def summary(self) -> dict:
        devices = {n: m.summary() for n, m in zip(self.names, self.monitors)}
        first = next(iter(devices.values()))
        return {"capture": self.info.path, "resolution_s": first["resolution_s"], "interval_s": first["interval_s"],
                "intervals": max(d["intervals"] for d in devices.values()), "duration_s": first["duration_s"],
                "transfers": sum(d["transfers"] for d in devices.values()),
                "stalls": sum(d["stalls"] for d in devices.values()), "devices": devices,
                "interrupted": self.interrupted, "truncated": self.truncated, "alert": first["alert"]}
