"""The kernel's side of a synthesized capture: a driver model that writes the matching ftrace text.

For every spi_message of a synthesized Timeline the model places the events of
the spidev ``spi_sync`` path (the sync fast path: everything runs in the
calling task) around the bus edges the capture already has::

    sys_enter_ioctl -> spi_message_submit -> spi_controller_busy -> spi_message_start
    -> spi_set_cs activate [-> gpio_value (GPIO CS)] -> CS assert (bus)
    -> spi_transfer_start -> first SCLK ... last SCLK -> spi_transfer_stop
       (between transfers of one CS window: spi_transfer_stop -> spi_transfer_start)
       (cs_change between CS windows of one message: spi_set_cs deactivate -> CS deassert
        -> udelay -> spi_set_cs activate -> CS assert)
    -> spi_set_cs deactivate [-> gpio_value] -> CS deassert (bus)
    -> spi_message_done -> spi_controller_idle -> sys_exit_ioctl -> (user space) -> next ioctl

Each gap on the bus is split into phases with nominal latencies (``KernelLatencies``,
all in seconds of bus time) plus normal jitter (``jitter`` × latency) from a
seeded numpy Generator; one phase per gap (the ``None`` slot of ``CHAINS``)
takes what is left. When the latencies do not fit a gap (a 5 µs context switch
cannot hold a 20 µs syscall path) they are scaled down together to
``FILL`` × the gap, so the order of events always matches the bus. The truth is
computed from the placed times, so it is exact whatever was scaled.

Clock: the trace clock runs at another rate and offset than the bus (the
capture). With ``drift_ppm`` = d and ``offset_s`` = a::

    bus_time = a + (1 + d·1e-6) · trace_time        (the aligner's fit: a + b·t)
    trace_time = (bus_time - a) / (1 + d·1e-6)

``clock_start_s`` is the trace clock's reading at bus time 0 (an uptime, like
real traces); a = -clock_start_s · (1 + d·1e-6).

Also written, for the aligner to cope with: a fraction ``lost`` of events dropped
in bursts (ring-buffer overruns; ``CPU:N [LOST M EVENTS]`` lines where the
layout prints them), messages of another device (``other_device``, e.g. spi0.1)
in the user-space part of context switches, scheduler noise
(``sched_switch``/``sched_wakeup`` at ``noise_rate_hz``, on other tasks with
spaces and dashes in their names), µs or ns timestamps, and the layouts of
``/sys/kernel/tracing/trace`` (4 or 5 flag characters), ``trace_pipe`` (optionally
with ``tx=``/``rx=`` wrapped onto continuation lines, as in the real excerpt),
``trace-cmd report`` (with or without ``[cpu]``) and ``perf script``.
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from spigap.errors import UsageError
from spigap.synth.timeline import Timeline

LAYOUTS = ("trace", "trace_pipe", "trace-cmd", "perf")
FILL = 0.9          # latencies that do not fit a gap are scaled to this share of it

# the phases of each gap, in order: (from, to, latency parameter); None = the remainder
CHAINS = {
    "cs_setup": [("bus:cs_assert", "spi:spi_transfer_start", None),
                 ("spi:spi_transfer_start", "bus:first_sclk", "transfer_start_to_sclk")],
    "inter_transfer": [("bus:last_sclk", "spi:spi_transfer_stop", "sclk_to_transfer_stop"),
                       ("spi:spi_transfer_stop", "spi:spi_transfer_start", None),
                       ("spi:spi_transfer_start", "bus:first_sclk", "transfer_start_to_sclk")],
    "cs_hold": [("bus:last_sclk", "spi:spi_transfer_stop", None),
                ("spi:spi_transfer_stop", "spi:spi_set_cs:deactivate", "transfer_stop_to_set_cs"),
                ("spi:spi_set_cs:deactivate", "bus:cs_deassert", "gpio_cs_off_latency")],
    "cs_change": [("bus:cs_deassert", "spi:spi_set_cs:activate", None),
                  ("spi:spi_set_cs:activate", "bus:cs_assert", "gpio_cs_latency")],
    "context_switch": [("bus:cs_deassert", "spi:spi_message_done", "deassert_to_done"),
                       ("spi:spi_message_done", "spi:spi_controller_idle", "done_to_idle"),
                       ("spi:spi_controller_idle", "syscalls:sys_exit_ioctl", "idle_to_exit"),
                       ("syscalls:sys_exit_ioctl", "syscalls:sys_enter_ioctl", None),
                       ("syscalls:sys_enter_ioctl", "spi:spi_message_submit", "enter_to_submit"),
                       ("spi:spi_message_submit", "spi:spi_controller_busy", "submit_to_busy"),
                       ("spi:spi_controller_busy", "spi:spi_message_start", "busy_to_start"),
                       ("spi:spi_message_start", "spi:spi_set_cs:activate", "start_to_set_cs"),
                       ("spi:spi_set_cs:activate", "bus:cs_assert", "gpio_cs_latency")],
}


@dataclasses.dataclass
class Latencies:
    """Nominal latencies (s, bus time) of the SPI core on the spidev spi_sync path, and their
    normal jitter: the driver model of a one-device trace (KernelLatencies) and the controller
    of a shared bus (bus.py) take the same names and defaults."""

    gpio_cs_latency: float = 1.5e-6          # spi_set_cs activate tracepoint -> CS assert (GPIO CS)
    gpio_cs_off_latency: float = 1.5e-6      # spi_set_cs deactivate tracepoint -> CS deassert
    transfer_start_to_sclk: float = 0.8e-6
    sclk_to_transfer_stop: float = 1.0e-6    # inter_transfer only (cs_hold: the remainder)
    transfer_stop_to_set_cs: float = 0.2e-6
    deassert_to_done: float = 3.0e-6
    done_to_start: float = 2.0e-6            # a shared bus: the pump takes the next queued message
    done_to_idle: float = 1.0e-6
    idle_to_exit: float = 4.0e-6
    enter_to_submit: float = 4.0e-6
    submit_to_busy: float = 5.0e-6
    busy_to_start: float = 1.0e-6
    start_to_set_cs: float = 3.0e-6
    jitter: float = 0.1                      # sigma of each latency, as a share of it


@dataclasses.dataclass
class KernelLatencies(Latencies):
    """The driver model of a one-device trace: its latencies, and the trace's clock and layout."""

    seed: int = 1
    drift_ppm: float = 0.0
    clock_start_s: float = 1000.0            # trace clock at bus time 0
    lost: float = 0.0                        # share of events lost (in bursts)
    lost_burst: float = 5.0                  # mean events per lost burst
    other_device: float = 0.0                # share of context switches with a message of another device
    other_name: str = "spi0.1"
    noise_rate_hz: float = 0.0               # scheduler events per second (bus time)
    device: str = "spi0.0"
    cs_gpio: int | None = None               # GPIO number: also trace gpio_value for the CS writes
    layout: str = "trace"
    ns: bool = False                         # 9 decimals instead of 6
    flags: int = 5                           # trace/trace_pipe: 4 or 5 latency flag characters
    cpu_column: bool = True                  # trace-cmd report: with the [cpu] column
    wrap: bool = False                       # trace_pipe: tx=/rx= on continuation lines
    task: str = "spidev-test"
    pid: int = 4242
    cpu: int = 2

    def check(self) -> None:
        if self.layout not in LAYOUTS:
            raise UsageError(f"unknown trace layout {self.layout!r}; known: {', '.join(LAYOUTS)}")
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, float) and not np.isfinite(v):
                raise UsageError(f"trace model: {f.name} must be finite")
        lat = [getattr(self, k) for k in _LATENCIES]
        if min(lat) < 0 or self.jitter < 0:
            raise UsageError("trace model: latencies and jitter must be >= 0")
        if not 0 <= self.lost < 0.5:
            raise UsageError(f"--trace-lost {self.lost:g} must be in [0, 0.5)")
        if not 0 <= self.other_device <= 1 or self.noise_rate_hz < 0:
            raise UsageError("trace model: other_device in [0, 1], noise rate >= 0")
        if abs(self.drift_ppm) > 1e4:
            raise UsageError(f"--trace-drift-ppm {self.drift_ppm:g} is beyond ±10000 ppm")
        if self.flags not in (4, 5):
            raise UsageError("trace model: flags is 4 or 5")
        spi_device_numbers(self.device)
        spi_device_numbers(self.other_name)

    @property
    def offset_s(self) -> float:
        return -self.clock_start_s * (1 + self.drift_ppm * 1e-6)


_LATENCIES = list(dict.fromkeys(k for chain in CHAINS.values() for _, _, k in chain if k))
LATENCY_KEYS = tuple(_LATENCIES)     # the nominal latencies a recipe's [kernel] table may set


def model_options(table: dict | None, keys: tuple = LATENCY_KEYS, name: str = "kernel") -> dict:
    """Latencies keyword arguments from a recipe's ``[kernel]`` table (or a shared bus's
    ``[controller]``: ``name``, ``keys``): latencies as times ("1.2us") and ``jitter`` as a
    share; anything else is refused."""
    from spigap.units import parse_time

    out: dict = {}
    for key, value in (table or {}).items():
        try:
            if key in keys:
                out[key] = parse_time(value)
            elif key == "jitter":
                out[key] = float(value)
            else:
                raise UsageError(f"unknown [{name}] key {key!r}; known: {', '.join(keys)}, jitter")
        except (ValueError, TypeError, OverflowError) as e:
            raise UsageError(f"[{name}] {key}: {e}") from None
    return out


def spi_device_numbers(name: str) -> tuple[int, int]:
    """(bus, chip select) of a Linux SPI device name ``spiB.C``."""
    try:
        bus, cs = name.removeprefix("spi").split(".")
        return int(bus), int(cs)
    except ValueError:
        raise UsageError(f"SPI device {name!r} is not spiB.C (e.g. spi0.0)") from None


# ----------------------------------------------------------------------------- events
# event codes of the model (index into NAMES)
NAMES = ["syscalls:sys_enter_ioctl", "spi:spi_message_submit", "spi:spi_controller_busy",
         "spi:spi_message_start", "spi:spi_set_cs:activate", "spi:spi_transfer_start",
         "spi:spi_transfer_stop", "spi:spi_set_cs:deactivate", "spi:spi_message_done",
         "spi:spi_controller_idle", "syscalls:sys_exit_ioctl", "gpio:gpio_value",
         "sched:sched_switch", "sched:sched_wakeup"]
(E_ENTER, E_SUBMIT, E_BUSY, E_START, E_CS_ON, E_XSTART, E_XSTOP, E_CS_OFF, E_DONE, E_IDLE, E_EXIT,
 E_GPIO, E_SWITCH, E_WAKEUP) = range(len(NAMES))
_CODE = {name: i for i, name in enumerate(NAMES)}


@dataclasses.dataclass
class _Events:
    """Columns of the events to write (bus time), one row per event."""

    t: list = dataclasses.field(default_factory=list)
    code: list = dataclasses.field(default_factory=list)
    ref: list = dataclasses.field(default_factory=list)     # message/transfer/other index
    kind: list = dataclasses.field(default_factory=list)    # 0 main device, 1 other device, 2 noise

    def add(self, t, code, ref, kind=0) -> None:
        t = np.atleast_1d(np.asarray(t, float))
        self.t.append(t)
        self.code.append(np.broadcast_to(np.asarray(code, np.int16), t.shape))
        self.ref.append(np.broadcast_to(np.asarray(ref, np.int64), t.shape))
        self.kind.append(np.broadcast_to(np.asarray(kind, np.int8), t.shape))

    def arrays(self):
        cat = lambda xs, dt: np.concatenate(xs).astype(dt) if xs else np.empty(0, dt)  # noqa: E731
        return cat(self.t, float), cat(self.code, np.int16), cat(self.ref, np.int64), cat(self.kind, np.int8)


def _place(rng, km: KernelLatencies, kind: str, start: np.ndarray, end: np.ndarray,
           scale_free: bool = False) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Event times inside gaps [start, end] along CHAINS[kind]; returns (times, durations).

    times: one array per event of the chain (len(chain) - 1 events), durations:
    one array per phase. ``scale_free``: the gap is open (the lead before the
    first message): latencies are not scaled, the remainder is whatever it is.
    """
    chain = CHAINS[kind]
    n = len(start)
    gap = end - start
    nominal = []
    for _, _, key in chain:
        if key is None:
            nominal.append(np.zeros(n))
        else:
            lat = getattr(km, key)
            nominal.append(np.maximum(lat + rng.normal(0.0, km.jitter * lat, n), 0.0))
    total = np.sum(nominal, axis=0)
    if scale_free:
        factor = np.ones(n)
    else:
        factor = np.where(total > FILL * gap, FILL * gap / np.maximum(total, 1e-30), 1.0)
    dur = [d * factor for d in nominal]
    rest = [i for i, (_, _, key) in enumerate(chain) if key is None][0]
    dur[rest] = gap - (total * factor)
    times = []
    acc = start.copy()
    for d in dur[:-1]:
        acc = acc + d
        times.append(acc)
    return times, dur


def _phase_truth(kind: str, durs: list[np.ndarray], out: dict) -> None:
    for (a, b, _), d in zip(CHAINS[kind], durs):
        out.setdefault((kind, a, b), []).append(d)


def build_events(tl: Timeline, km: KernelLatencies):
    """Place every event of the model; returns (events, per-message/transfer info, phase truth)."""
    km.check()
    rng = np.random.default_rng(km.seed)
    w = tl.windows
    nwin = w.n
    if nwin == 0 or len(tl.word_first) == 0:
        raise UsageError("the capture has no transfers: no trace to write")
    ev = _Events()
    phases: dict[tuple[str, str, str], list[np.ndarray]] = {}
    # transfers: words split at CS windows and at inter-transfer boundaries
    ww = w.word_window
    nw = len(ww)
    start_word = np.ones(nw, bool)
    start_word[1:] = (ww[1:] != ww[:-1]) | w.word_boundary[1:]
    tr_first = np.flatnonzero(start_word)
    tr_last = np.concatenate([tr_first[1:], [nw]]) - 1
    tr_win = ww[tr_first]
    first_sclk, last_sclk = tl.word_first[tr_first], tl.word_last[tr_last]
    ntr = len(tr_first)
    first_of_win = np.ones(ntr, bool)
    first_of_win[1:] = tr_win[1:] != tr_win[:-1]
    last_of_win = np.ones(ntr, bool)
    last_of_win[:-1] = tr_win[1:] != tr_win[:-1]
    has_words = np.bincount(ww, minlength=nwin) > 0
    if not has_words.all():
        raise UsageError("trace model: every CS window needs at least one word")
    # cs_setup: CS assert -> transfer_start -> first SCLK
    fw = np.flatnonzero(first_of_win)
    (xs,), d = _place(rng, km, "cs_setup", tl.cs_assert[tr_win[fw]], first_sclk[fw])
    xstart = np.empty(ntr)
    xstart[fw] = xs
    _phase_truth("cs_setup", d, phases)
    # inter_transfer: last SCLK -> transfer_stop -> transfer_start -> first SCLK
    it = np.flatnonzero(~last_of_win)
    xstop = np.empty(ntr)
    if len(it):
        (a, b), d = _place(rng, km, "inter_transfer", last_sclk[it], first_sclk[it + 1])
        xstop[it], xstart[it + 1] = a, b
        _phase_truth("inter_transfer", d, phases)
    # cs_hold: last SCLK -> transfer_stop -> set_cs deactivate -> CS deassert
    lw = np.flatnonzero(last_of_win)
    (a, cs_off), d = _place(rng, km, "cs_hold", last_sclk[lw], tl.cs_deassert[tr_win[lw]])
    xstop[lw] = a
    _phase_truth("cs_hold", d, phases)
    # gaps before each window: cs_change or context_switch (the first: the lead)
    kind = np.asarray(w.kind).astype(str)
    msg = np.cumsum(kind != "cs_change") - 1            # message index of each window
    nmsg = int(msg[-1]) + 1
    cs_on = np.empty(nwin)
    cc = np.flatnonzero(kind == "cs_change")
    if len(cc):
        (a,), d = _place(rng, km, "cs_change", tl.cs_deassert[cc - 1], tl.cs_assert[cc])
        cs_on[cc] = a
        _phase_truth("cs_change", d, phases)
    ctx = np.flatnonzero((kind != "cs_change") & (np.arange(nwin) > 0))
    msg_first_win = np.flatnonzero(kind != "cs_change")
    t_enter, t_submit, t_busy, t_start = (np.empty(nmsg) for _ in range(4))
    t_done, t_idle, t_exit = (np.empty(nmsg) for _ in range(3))
    user_gap = np.empty(0)
    if len(ctx):
        times, d = _place(rng, km, "context_switch", tl.cs_deassert[ctx - 1], tl.cs_assert[ctx])
        m_prev, m_next = msg[ctx - 1], msg[ctx]
        t_done[m_prev], t_idle[m_prev], t_exit[m_prev] = times[0], times[1], times[2]
        t_enter[m_next], t_submit[m_next], t_busy[m_next], t_start[m_next] = times[3:7]
        cs_on[ctx] = times[7]
        user_gap = np.stack([times[2], times[3]], axis=1)
        _phase_truth("context_switch", d, phases)
    # the lead: the first message's path before its CS assert (no previous message)
    times, _ = _place(rng, km, "context_switch", tl.cs_assert[:1] - 1.0, tl.cs_assert[:1], scale_free=True)
    t_enter[0], t_submit[0], t_busy[0], t_start[0] = (x[0] for x in times[3:7])
    cs_on[0] = times[7][0]
    # the tail: the last message completes after its CS deassert
    last = nwin - 1
    times, _ = _place(rng, km, "context_switch", tl.cs_deassert[last:], tl.cs_deassert[last:] + 1.0,
                      scale_free=True)
    t_done[-1], t_idle[-1], t_exit[-1] = times[0][0], times[1][0], times[2][0]

    ev.add(t_enter, E_ENTER, np.arange(nmsg))
    ev.add(t_submit, E_SUBMIT, np.arange(nmsg))
    ev.add(t_busy, E_BUSY, np.arange(nmsg))
    ev.add(t_start, E_START, np.arange(nmsg))
    ev.add(cs_on, E_CS_ON, np.arange(nwin))
    ev.add(xstart, E_XSTART, np.arange(ntr))
    ev.add(xstop, E_XSTOP, np.arange(ntr))
    ev.add(cs_off, E_CS_OFF, tr_win[lw])
    ev.add(t_done, E_DONE, np.arange(nmsg))
    ev.add(t_idle, E_IDLE, np.arange(nmsg))
    ev.add(t_exit, E_EXIT, np.arange(nmsg))
    if km.cs_gpio is not None:
        # the GPIO write sits inside the spi_set_cs -> CS edge latency (70 % of it)
        ev.add(cs_on + 0.7 * (tl.cs_assert - cs_on), E_GPIO, np.arange(nwin) * 2 + 1)
        ev.add(cs_off + 0.7 * (tl.cs_deassert - cs_off), E_GPIO, np.arange(nwin) * 2)
    # another device's messages in the user-space part of some context switches
    other = np.empty(0, np.int64)
    if km.other_device > 0 and len(user_gap):
        pick = np.flatnonzero(rng.random(len(user_gap)) < km.other_device)
        a, b = user_gap[pick, 0], user_gap[pick, 1]
        ok = (b - a) > 4e-6
        pick, a, b = pick[ok], a[ok], b[ok]
        other = pick
        # 9 events evenly in the middle half of the user-space gap
        frac = 0.25 + 0.5 * np.arange(9) / 8
        seq = [E_SUBMIT, E_BUSY, E_START, E_CS_ON, E_XSTART, E_XSTOP, E_CS_OFF, E_DONE, E_IDLE]
        for f, code in zip(frac, seq):
            ev.add(a + f * (b - a), code, np.arange(len(pick)), 1)
    if km.noise_rate_hz > 0:
        t0, t1 = float(t_enter[0]) - 1e-3, float(t_exit[-1]) + 1e-3
        k = rng.poisson(km.noise_rate_hz * (t1 - t0))
        tn = np.sort(rng.uniform(t0, t1, k))
        ev.add(tn, np.where(rng.random(k) < 0.5, E_SWITCH, E_WAKEUP), rng.integers(0, 1 << 30, k), 2)
    info = dict(tr_win=tr_win, tr_first=tr_first, tr_last=tr_last, msg=msg, nmsg=nmsg,
                msg_first_win=msg_first_win, n_other=len(other))
    return ev, info, phases


# ----------------------------------------------------------------------------- writing
_NOISE_TASKS = [("kworker/u8:2", 87), ("Web Content", 3101), ("my-app-x", 2718), ("<idle>", 0)]


def _hexbytes(values: np.ndarray, bpw: int) -> str:
    if values.dtype == object:
        return ""
    v = np.asarray(values, np.uint64)
    if bpw == 1:
        raw = v.astype(np.uint8).tobytes()
    else:
        raw = b"".join(int(x).to_bytes(8, "little")[:bpw] for x in v.tolist())
    return "-".join(f"{b:02x}" for b in raw[:64])


def write(tl: Timeline, path, km: KernelLatencies, *, t0: float = 0.0) -> dict:
    """Write the trace of ``tl`` to ``path`` in ``km.layout``; return the truth (JSON-able).

    ``t0``: the timeline time of the capture's first sample (a cropped capture);
    the truth's ``offset_s`` is on the capture's clock (its time 0 = ``t0``).
    """
    ev, info, phases = build_events(tl, km)
    t, code, ref, kind = ev.arrays()
    order = np.argsort(t, kind="stable")
    t, code, ref, kind = t[order], code[order], ref[order], kind[order]
    rng = np.random.default_rng(km.seed + 7919)
    n_all = len(t)
    keep = np.ones(n_all, bool)
    lost_at: dict[int, int] = {}
    if km.lost > 0 and n_all:
        # bursts: each event starts a burst with probability p; mean length lost_burst
        p = km.lost / km.lost_burst
        starts = np.flatnonzero(rng.random(n_all) < p)
        lengths = rng.geometric(1.0 / km.lost_burst, len(starts))
        for s0, ln in zip(starts.tolist(), lengths.tolist()):
            keep[s0:s0 + ln] = False
        # the line announcing a loss goes before the next kept event
        dropped = ~keep
        ends = np.flatnonzero(dropped[:-1] & ~dropped[1:]) + 1
        runs_start = np.flatnonzero(dropped & np.concatenate([[True], ~dropped[:-1]]))
        for r0, r1 in zip(runs_start.tolist(), ends.tolist()):
            lost_at[r1] = r1 - r0
    d = 1 + km.drift_ppm * 1e-6
    a = km.offset_s
    ts = (t - a) / d
    dec = 9 if km.ns else 6
    bpw = (tl.shape.wordsize + 7) // 8
    w = tl.windows
    tr_win, tr_first, tr_last, msg = info["tr_win"], info["tr_first"], info["tr_last"], info["msg"]
    ntr = len(tr_win)
    tr_len = (tr_last - tr_first + 1) * bpw
    msg_len = np.bincount(msg[tr_win], weights=tr_len, minlength=info["nmsg"]).astype(np.int64)
    msg_ptr = rng.integers(1 << 24, 1 << 32, info["nmsg"])
    tr_ptr = rng.integers(1 << 24, 1 << 32, ntr)
    bus, cs = spi_device_numbers(km.device)
    obus, _ = spi_device_numbers(km.other_name)
    dev = km.device
    layout = km.layout
    lines: list[str] = []
    if layout == "trace":
        lines += _header(km.flags, n_all - int((~keep).sum()))
    elif layout == "trace-cmd":
        lines += ["cpus=4"]
    flags = "....." if km.flags == 5 else "...."
    nlost = 0

    def fields(c: int, r: int, k: int) -> str:
        if k == 2:
            if c == E_SWITCH:
                return (f"prev_comm=swapper/1 prev_pid=0 prev_prio=120 prev_state=R ==> "
                        f"next_comm=kworker/1:1 next_pid={r % 30000} next_prio=120")
            return f"comm=ksoftirqd/1 pid={r % 30000} prio=120 target_cpu=001"
        dv = dev if k == 0 else km.other_name
        if c == E_ENTER:
            return "fd: 0x00000003, cmd: 0x40206b00, arg: 0x7ffd1c2a9e50"
        if c == E_EXIT:
            return f"0x{int(msg_len[r]):x}"
        if c in (E_BUSY, E_IDLE):
            return f"spi{bus if k == 0 else obus}"
        if c in (E_SUBMIT, E_START):
            return f"{dv} {int(msg_ptr[r]) if k == 0 else 0x5eed0000 + r:016x}"
        if c == E_DONE:
            ln = int(msg_len[r]) if k == 0 else 2
            return f"{dv} {int(msg_ptr[r]) if k == 0 else 0x5eed0000 + r:016x} len={ln}/{ln}"
        if c in (E_CS_ON, E_CS_OFF):
            return f"{dv} {'activate' if c == E_CS_ON else 'deactivate'}"
        if c == E_GPIO:
            return f"{km.cs_gpio} set {r % 2 if tl.shape.cs_active_low is False else 1 - r % 2}"
        # transfer start/stop
        if k == 1:
            return f"{dv} {0x0ddba110 + r:016x} len=2 tx=[a5-5a] rx=[00-00]"
        wa, wb = int(tr_first[r]), int(tr_last[r]) + 1
        tx = _hexbytes(w.mosi[wa:wb], bpw)
        rx = _hexbytes(w.miso[wa:wb], bpw) if c == E_XSTOP else "-".join(["00"] * min(64, int(tr_len[r])))
        if w.miso.dtype == object:
            rx = ""
        sep = "\n     " if km.wrap else " "
        return f"{dv} {int(tr_ptr[r]):016x} len={int(tr_len[r])}{sep}tx=[{tx}]{sep[:1]}rx=[{rx}]"

    names = [n.split(":")[1] for n in NAMES]
    subs = [n.split(":")[0] for n in NAMES]
    cpu_noise = [0, 1, 3]
    for i in np.flatnonzero(keep).tolist():
        c, r, k = int(code[i]), int(ref[i]), int(kind[i])
        if i in lost_at and layout != "perf":
            cpu_l = km.cpu
            nlost += lost_at[i]
            lines.append(f"CPU:{cpu_l} [LOST {lost_at[i]} EVENTS]" if layout != "trace-cmd"
                         else f"CPU:{cpu_l} [{lost_at[i]} EVENTS DROPPED]")
        elif i in lost_at:
            nlost += lost_at[i]
        if k == 2:
            task, pid = _NOISE_TASKS[r % len(_NOISE_TASKS)]
            cpu = cpu_noise[r % 3]
        elif k == 1:
            task, pid, cpu = "irq/52-spi0.1", 312, 0
        else:
            task, pid, cpu = km.task, km.pid, km.cpu
        stamp = f"{ts[i]:.{dec}f}"
        name = names[c]
        f = fields(c, r, k)
        if layout == "perf":
            lines.append(f"{task:>16} {pid:>6} [{cpu:03d}] {stamp}: {subs[c]}:{name}: {f}")
        elif layout == "trace-cmd":
            col = f" [{cpu:03d}]" if km.cpu_column else ""
            lines.append(f"{task:>16}-{pid:<6}{col} {stamp}: {name}: {f}")
        else:
            lines.append(trace_line(task, pid, cpu, flags, stamp, name, f))
    from spigap.outfile import write_output

    write_output(os.fspath(path), "\n".join(lines) + "\n")
    if km.cs_gpio is not None:      # the GPIO write splits spi_set_cs -> CS edge at 70 %
        for key in [k for k in phases if k[1].startswith("spi:spi_set_cs")]:
            g, f, to = key
            v = phases.pop(key)
            phases[(g, f, "gpio:gpio_value")] = [0.7 * x for x in v]
            phases[(g, "gpio:gpio_value", to)] = [0.3 * x for x in v]
    truth = {
        "note": "ground truth of a synthesized trace (analyzer/spigap/synth/kernel.py): "
                "bus_time = offset_s + (1 + drift_ppm*1e-6) * trace_time",
        "path": str(path), "layout": layout, "resolution_s": 10.0 ** -dec,
        "offset_s": a - t0, "drift_ppm": km.drift_ppm, "clock_start_s": km.clock_start_s,
        "device": km.device, "messages": info["nmsg"], "transfers": ntr,
        "events_written": int(keep.sum()), "events_model": n_all, "lost_events": int((~keep).sum()),
        "lost_announced": nlost, "other_device": km.other_name if info["n_other"] else None,
        "other_messages": info["n_other"], "noise_events": int((kind == 2).sum()),
        "model": {k: getattr(km, k) for k in _LATENCIES + ["jitter", "seed"]},
        "phases": [
            {"gap": g, "from": f, "to": to, "n": int(sum(len(x) for x in v)),
             "median_s": float(np.median(np.concatenate(v))), "mean_s": float(np.mean(np.concatenate(v)))}
            for (g, f, to), v in phases.items()],
    }
    return truth


def trace_line(task: str, pid: int, cpu: int, flags: str, stamp: str, name: str, fields: str) -> str:
    """One event in /sys/kernel/tracing/trace's layout (also trace_pipe's)."""
    return f"{task:>16}-{pid:<7} [{cpu:03d}] {flags} {stamp}: {name}: {fields}"


def header(flags: int, entries: int, legend: bool = True) -> list[str]:
    """/sys/kernel/tracing/trace's header, with the latency flags' legend or without it."""
    lines = _header(flags, entries)
    return lines if legend else lines[:4] + lines[-2:]


def _header(flags: int, entries: int) -> list[str]:
    if flags == 5:
        return ["# tracer: nop", "#", f"# entries-in-buffer/entries-written: {entries}/{entries}   #P:4", "#",
                "#                                _-----=> irqs-off/BH-disabled",
                "#                               / _----=> need-resched",
                "#                              | / _---=> hardirq/softirq",
                "#                              || / _--=> preempt-depth",
                "#                              ||| / _-=> migrate-disable",
                "#                              |||| /     delay",
                "#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION",
                "#              | |         |   |||||     |         |"]
    return ["# tracer: nop", "#", f"# entries-in-buffer/entries-written: {entries}/{entries}   #P:4", "#",
            "#                              _-----=> irqs-off",
            "#                             / _----=> need-resched",
            "#                            | / _---=> hardirq/softirq",
            "#                            || / _--=> preempt-depth",
            "#                            ||| /     delay",
            "#           TASK-PID   CPU#  ||||    TIMESTAMP  FUNCTION",
            "#              | |       |   ||||       |         |"]
