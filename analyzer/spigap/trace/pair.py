"""A capture and its kernel trace, aligned and split into phases: what ``spigap compare``
and ``spigap report`` take per (capture, trace) pair (``spigap trace`` prints the same).

A shared bus and its kernel trace (``load_bus``, docs/shared-bus.md "With a kernel
trace"): each device is paired as one capture is, once it is known which traced
device is on which CS line, and the trace tells who waited for whom:

* **Mapping.** Every traced SPI device (``spi0.0``, ``spi0.1``) is aligned with every
  CS line's transfers as ``align.align_spi`` does for one device (length, payload and
  timing of its windows); the pairs are assigned best match first (most matched
  windows), one device per line; the fits must agree (one kernel clock).
* **Queueing.** The SPI core runs one message at a time per controller. A message's
  ``spi_message_submit → spi_message_start`` is split into the time another device's
  message held the controller (``spi_message_start → spi_message_done`` of the other
  devices, on the bus clock: ``queued_s``, with the messages it waited behind;
  core/bus.queued_behind) and the rest (the device's own path, ``own_s``). The gap
  before the message's first CS window on the bus holds both.
* Each device's gaps are also split into phases as for one device (trace/phases.py),
  its grouping taken from the trace's message boundaries.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from spigap.core.analysis import KIND_NAMES, Analysis, describe
from spigap.core.bus import queued_behind
from spigap.errors import InputError, SpigapError, UsageError
from spigap.trace import align, columns as tm, phases as phases_mod
from spigap.trace.align import Alignment

RARE = 0.05           # phases seen in fewer than 5 % of their kind's gaps: lost or stray events


@dataclasses.dataclass
class TracedCapture:
    path: str                   # the trace file
    trace: tm.Trace
    alignment: Alignment
    phases: phases_mod.Phases
    grouping_note: str | None

    def common(self) -> list:
        """The phases seen in at least RARE of their kind's gaps (text and plots show these)."""
        seg = self.phases.segments
        return [p for p in self.phases.phases if p.stats["n"] >= RARE * seg.get(p.gap, 0)]

    def summary(self) -> dict:
        """Trace and alignment in one JSON object (``spigap compare``'s ``traces``)."""
        al = self.alignment
        return {"path": self.path, "source": self.trace.source, "events": len(self.trace),
                "resolution_s": self.trace.resolution_s, "lost_events": self.trace.lost_events,
                "alignment": {**al.to_dict(), "notes": list(al.notes)},
                "grouping": self.grouping_note, "segments": dict(self.phases.segments)}


def load(path, a: Analysis, *, device: str | None = None, cs_latency: float | None = None) -> TracedCapture:
    """Parse the ftrace text ``path``, align it with the analysis ``a`` (its SPI events),
    split every gap into phases (``a``'s grouping takes the trace's message boundaries)."""
    from spigap.trace import ftrace

    tr = ftrace.parse(path)
    al = align.align_spi(tr, a, device, cs_latency=cs_latency)
    ph = phases_mod.run(tr, al, a)
    return TracedCapture(str(path), tr, al, ph, ph.grouping_note)


# ------------------------------------------------------------------ a shared bus
MAX_CLOCK_SPREAD_S = 20e-6     # fits of one kernel clock further apart than this: a warning


@dataclasses.dataclass
class DeviceTrace:
    cs: str
    spi_device: str
    alignment: align.Alignment
    phases: phases_mod.Phases
    tried: dict                 # spi device -> matched windows, or why it did not align


@dataclasses.dataclass
class Messages:
    """Every traced message of the mapped devices, on the bus clock (columns, time order)."""

    cs: np.ndarray              # int: index into SharedTrace.names
    index: np.ndarray           # the device's message number (submit order)
    submit: np.ndarray          # s (bus)
    start: np.ndarray
    done: np.ndarray
    queued: np.ndarray          # s: another device's message held the controller meanwhile
    first_window: np.ndarray    # bus transfer index of its first CS window, -1 unknown
    behind: list                # per message: [(cs index, message index), ...]

    @property
    def own(self) -> np.ndarray:
        return self.start - self.submit - self.queued


@dataclasses.dataclass
class BusTrace:
    path: str
    trace: tm.Trace
    names: list[str]            # the bus's CS lines
    devices: dict               # cs -> DeviceTrace (mapped ones)
    unmapped: list[str]         # traced SPI devices no CS line matched
    messages: Messages
    notes: list[str]

    def queueing(self, r) -> dict:
        """Per device: its messages, how many waited behind another device's message, for how
        long and behind whom, the rest (its own submit -> start), and the gap before its
        queued messages split into the two."""
        m = self.messages
        out: dict = {}
        for k, name in enumerate(self.names):
            if name not in self.devices:
                continue
            sel = m.cs == k
            q = m.queued[sel]
            waited = q > 0
            behind: dict[str, dict] = {}
            for i in np.flatnonzero(sel):
                for j, _ in m.behind[i]:
                    other = self.names[j]
                    b = behind.setdefault(other, {"messages": 0})
                    b["messages"] += 1
            a = r.devices[name]
            fw = m.first_window[sel]
            gap = np.full(len(fw), np.nan)
            kind = np.full(len(fw), None, object)
            ok = (fw > 0) & (fw < a.n)
            gap[ok] = a.gap_before[fw[ok]] * a.tick_s
            kind[ok] = [KIND_NAMES[int(x)] for x in a.gap_kind[fw[ok]]]
            gq = ok & waited
            out[name] = {
                "spi_device": self.devices[name].spi_device,
                "messages": int(sel.sum()),
                "queued_behind_another": int(waited.sum()),
                "share": float(waited.mean()) if len(q) else None,
                "behind": behind,
                "queued": describe(q[waited], 1.0),
                "queued_total_s": float(q.sum()),
                "own_submit_to_start": describe(m.own[sel], 1.0),
                "gap_before_queued": {
                    "n": int(gq.sum()), "kinds": sorted({str(x) for x in kind[gq]}),
                    "gap": describe(gap[gq], 1.0), "queued": describe(q[gq], 1.0),
                    "rest": describe(gap[gq] - q[gq], 1.0)},
            }
        return out


def _device_map(text: str | None, names: list[str]) -> dict[str, str] | None:
    """--spi-device on a shared bus: 'CE0=spi0.0,CE1=spi0.1' or 'spi0.0,spi0.1' (in the
    order of the CS lines)."""
    if not text:
        return None
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if all("=" in p for p in parts):
        out = dict(p.split("=", 1) for p in parts)
        bad = set(out) - set(names)
        if bad:
            raise UsageError(f"--spi-device names {', '.join(sorted(bad))}, not a CS line of this bus "
                             f"({', '.join(names)})")
        return out
    if len(parts) != len(names) or any("=" in p for p in parts):
        raise UsageError(f"--spi-device on a shared bus: one traced device per CS line ({', '.join(names)}), "
                         "e.g. --spi-device " + ",".join(f"{n}=spi0.{i}" for i, n in enumerate(names)))
    return dict(zip(names, parts))


def load_bus(path, r, *, spi_device: str | None = None, cs_latency: float | None = None) -> BusTrace:
    """A shared bus (``r``: core/result.Result of several devices) and its kernel trace:
    parse the trace, map its SPI devices to the bus's CS lines, align each, split each
    device's gaps into phases and find who waited for whom (module docstring)."""
    from spigap.trace import ftrace

    tr = ftrace.parse(path)
    names = list(r.devices)
    given = _device_map(spi_device, names)
    devs = align.spi_devices(tr)
    if not devs:
        raise InputError("no spi_set_cs or spi_transfer_start events in the trace", path=tr.path,
                         hint="enable them: echo 1 > /sys/kernel/tracing/events/spi/enable")
    fits: dict = {}
    tried: dict = {n: {} for n in names}
    for name in names:
        cand = [given[name]] if given and name in given else devs
        for dev in cand:
            try:
                al = align.align_spi(tr, r.devices[name], dev, cs_latency=cs_latency)
            except SpigapError as e:
                tried[name][dev] = str(getattr(e, "problem", e))
                continue
            tried[name][dev] = al.matched
            fits[(name, dev)] = al
    # best match first, one device per line and one line per device; among equal matches
    # the device whose chip select number is the line's place on the bus
    order = sorted(fits, key=lambda p: (-fits[p].matched, _cs_number(p[1]) != names.index(p[0])))
    mapping: dict[str, str] = {}
    for name, dev in order:
        if name not in mapping and dev not in mapping.values():
            mapping[name] = dev
    if not mapping:
        why = "; ".join(f"{n}: " + ", ".join(f"{d} {v}" for d, v in t.items()) for n, t in tried.items())
        raise InputError(f"no traced SPI device matches a CS line of the bus ({why})", path=tr.path,
                         hint="check the pair of files; --spi-device CE0=spi0.0,... pins the mapping")
    notes = []
    devices = {}
    for name in names:
        if name not in mapping:
            notes.append(f"{name}: no traced device matches its transfers ("
                         + ", ".join(f"{d}: {v}" for d, v in tried[name].items()) + ")")
            continue
        dev = mapping[name]
        al = fits[(name, dev)]
        ph = phases_mod.run(tr, al, r.devices[name])
        devices[name] = DeviceTrace(name, dev, al, ph, tried[name])
    unmapped = [d for d in devs if d not in mapping.values()]
    if unmapped:
        notes.append(f"traced SPI devices on no CS line of this capture: {', '.join(unmapped)}")
    # one kernel clock: every fit should put the trace at the same bus time (compared in the
    # middle of the trace; offset_s is the fit extrapolated to trace time 0)
    ref = max(devices.values(), key=lambda d: d.alignment.matched).alignment
    mid = float(np.median(tr.ts)) if len(tr) else 0.0
    at = [float(d.alignment.to_bus(mid)) for d in devices.values()]
    if len(at) > 1 and max(at) - min(at) > MAX_CLOCK_SPREAD_S:
        notes.append(f"the devices' fits put the kernel clock {1e6 * (max(at) - min(at)):.1f} µs apart: one "
                     "clock should fit all (check the mapping: --spi-device CE0=spi0.0,...)")
    msgs = _messages(tr, names, devices, ref)
    return BusTrace(str(path), tr, names, devices, unmapped, msgs, notes)


def _cs_number(dev: str) -> int:
    try:
        return int(dev.rsplit(".", 1)[1])
    except (IndexError, ValueError):
        return -1


def _messages(tr: tm.Trace, names: list[str], devices: dict, ref: align.Alignment) -> Messages:
    """Each mapped device's messages (submit, start, done paired by the message pointer, in
    time order), on the bus clock (one fit for all, ``ref``: the best matched device's, so
    the devices' events keep the trace's own order), and the queueing between devices."""
    cols: dict[str, list] = {k: [] for k in ("cs", "index", "submit", "start", "done", "first")}
    for k, name in enumerate(names):
        d = devices.get(name)
        if d is None:
            continue
        dev, al = d.spi_device, d.alignment
        rows = np.concatenate([tr.rows(e, dev) for e in (tm.SPI_MESSAGE_SUBMIT, tm.SPI_MESSAGE_START,
                                                          tm.SPI_MESSAGE_DONE)])
        rows.sort()
        ev = tr.event[rows]
        sub, sta, don = tr.code(tm.SPI_MESSAGE_SUBMIT), tr.code(tm.SPI_MESSAGE_START), tr.code(tm.SPI_MESSAGE_DONE)
        pending: dict[int, list] = {}
        found: list[list] = []
        # one Python step per message event: pairing by pointer (a driver may have several
        # messages in flight); traces of 10^5 messages take a fraction of a second
        for r, e in zip(rows.tolist(), ev.tolist()):
            p = int(tr.ptr[r])
            if e == sub:
                pending[p] = [tr.ts[r], None]
            elif e == sta and p in pending and pending[p][1] is None:
                pending[p][1] = tr.ts[r]
            elif e == don and p in pending and pending[p][1] is not None:
                s0, s1 = pending.pop(p)
                found.append([s0, s1, tr.ts[r]])
        if not found:
            continue
        f = np.asarray(found, float)
        f = f[np.argsort(f[:, 0], kind="stable")]
        bus = ref.to_bus(f)
        # the message's first CS window: the first matched set_cs activate at or after its start
        first = np.full(len(f), -1, np.int64)
        if len(al.trace_rows):
            order = np.argsort(al.trace_rows)
            tt, bi = tr.ts[al.trace_rows[order]], al.bus_index[order]
            j = np.searchsorted(tt, f[:, 1], side="left")
            ok = j < len(tt)
            ok[ok] = tt[j[ok]] <= f[ok, 2]
            first[ok] = bi[j[ok]]
        cols["cs"].append(np.full(len(f), k))
        cols["index"].append(np.arange(len(f)))
        cols["submit"].append(bus[:, 0])
        cols["start"].append(bus[:, 1])
        cols["done"].append(bus[:, 2])
        cols["first"].append(first)
    if not cols["cs"]:
        e = np.empty(0)
        return Messages(e.astype(int), e.astype(int), e, e, e, e, e.astype(np.int64), [])
    cs, index, submit, start, done, first = (np.concatenate(cols[k]) for k in
                                             ("cs", "index", "submit", "start", "done", "first"))
    order = np.argsort(start, kind="stable")
    cs, index, submit, start, done, first = (x[order] for x in (cs, index, submit, start, done, first))
    # who waited for whom: the bus-level rule (core/bus.queued_behind)
    queued, behind = queued_behind(cs, index, submit, start, done)
    return Messages(cs, index, submit, start, done, queued, first, behind)
