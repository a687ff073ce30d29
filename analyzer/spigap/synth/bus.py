"""Devices on one SPI controller, timed by its queue and their drivers: a capture, its
kernel trace and the truth of who waited for whom (the [[device]] form of a recipe,
recipe.py; one to eight devices: one device is a bus of one).

The Linux SPI core runs one ``spi_message`` at a time per controller: a device's
message submitted while another device's message holds the controller waits in
the controller's queue, and the wait shows on the bus as a longer gap of the
waiting device (docs/shared-bus.md). This module models that queue for devices that
share SCLK/MOSI/MISO and have one CS line each, and plans (capture.write writes it):

* the capture (.sr): SCLK, MOSI, MISO and one CS per device;
* the truth (JSON): per device every transfer (as ``scenario.truth_json``), per
  message its submit, start and done times, whether it was queued, behind which
  messages, and how long it sat in the queue while another device's message ran;
  bus-level figures (handover gaps) and the injected faults;
* the kernel trace (ftrace text, the ``trace`` layout): every device's
  ``spi_message_submit/start/done``, ``spi_set_cs``, ``spi_transfer_start/stop``
  and the controller's ``spi_controller_busy/idle``, on a trace clock with its
  own offset and drift (``bus = offset + (1 + drift_ppm·1e-6) · trace``).

The controller (FIFO, one message at a time):

* a message submitted while the controller is idle takes the caller's own path:
  ``submit → controller_busy → message_start → set_cs → CS assert``;
* submitted while another message runs (or before the controller went idle
  after one), it is queued: the pump starts it ``done_to_start`` after the
  previous message's ``spi_message_done``;
* ``queued_s`` of a message is the part of its ``submit → message_start``
  during which the controller ran another device's message: the queueing the
  trace can show; ``own_s`` the rest of it.

Drivers: ``spidev`` (a user-space loop of ioctls: the next message is
submitted ``think`` after the previous one returned) and ``irq`` (an IRQ
thread: every ``irq_period`` an interrupt, ``irq_latency`` later the thread's
first message, the next ones ``think`` after the previous one completed).
Traffic: ``mcp3008`` (3-byte conversions on cycling channels, MISO from the
device model), ``mcp2518fd-rx`` (the mcp251xfd driver's RX accesses, one IRQ per
batch of frames) or ``counter`` (``words`` counter bytes per window).

Example (times take units)::

    [capture]
    samplerate = "50MHz"
    seed = 7
    duration = "40ms"        # devices submit messages until this bus time
    lead = "50us"
    tail = "50us"

    [spi]
    sclk = "4MHz"
    mode = 0
    channels = { clk = "SCLK", mosi = "MOSI", miso = "MISO" }

    [controller]             # latencies of the SPI core (kernel.Latencies: names and defaults)
    done_to_start = "2us"
    jitter = 0.1

    [[device]]
    cs = "CE0"
    spi_device = "spi0.0"
    traffic = "mcp3008"
    driver = "spidev"
    think = "30us"

    [[device]]
    cs = "CE1"
    spi_device = "spi0.1"
    traffic = "mcp2518fd-rx"
    driver = "irq"
    irq_period = "700us"
    # a device's own SPI settings (the SPI core sets them per device): mode (same CPOL
    # as the bus's), wordsize, bitorder, cs_polarity; its data timing: miso_delay (tDO),
    # miso_enable (CS -> first bit); default its traffic's chip's (synth/traffic LAUNCH).
    # The controller's mosi_delay is bus-wide ([spi]; recipe.Recipe.launch).

    [faults]                 # optional
    overlap = [12]           # these handovers: the next CS asserts during the previous CS hold
    overlap_by = "300ns"
    stray_sclk = 2           # bursts of SCLK edges while no CS is asserted
"""

from __future__ import annotations

import dataclasses
import heapq

import numpy as np

from spigap.errors import UsageError
from spigap.outfile import write_output
from spigap.synth import kernel
from spigap.synth.capture import Capture, CsLine, TraceOptions, json_list
from spigap.synth.recipe import MAX_WINDOWS, Recipe, check_delay, check_size, set_bus_setting
from spigap.synth.timeline import Launch, SpiShape, Timeline, Windows, build
from spigap.units import parse_time

DRIVERS = ("spidev", "irq")
TRAFFIC = ("counter", "mcp3008", "mcp2518fd-rx")
MAX_DEVICES = 8
# the latencies the controller queue takes ([controller]; kernel.Latencies)
CONTROLLER_KEYS = ("submit_to_busy", "busy_to_start", "start_to_set_cs", "gpio_cs_latency", "gpio_cs_off_latency",
                   "transfer_start_to_sclk", "sclk_to_transfer_stop", "deassert_to_done", "done_to_start",
                   "done_to_idle", "idle_to_exit", "enter_to_submit")


@dataclasses.dataclass
class Device:
    """One device on the bus: its CS line, kernel name, traffic and driver."""

    cs: str
    spi_device: str
    traffic: str = "counter"
    driver: str = "spidev"
    transfers_per_message: int = 1
    words: int = 3                     # counter traffic: words per CS window
    cs_setup: float = 1.0e-6
    cs_hold: float = 0.5e-6
    cs_change: float = 10e-6
    idle_clocks: float = 0.0
    think: float = 20e-6               # spidev: user space between ioctls; irq: between the thread's messages
    think_sigma: float = 0.1           # share of think
    start: float = 0.0                 # first submit (spidev) or first IRQ, after the lead
    irq_period: float = 500e-6
    irq_jitter: float = 0.2            # share of irq_period (uniform +-)
    irq_latency: float = 20e-6         # IRQ -> the thread's first submit
    messages_per_irq: int = 2          # counter traffic with the irq driver
    channels: tuple = (0, 1, 2, 3, 4, 5, 6, 7)   # mcp3008: input channels, cycled
    batch: tuple = (1, 1, 3)           # mcp2518fd-rx: frames per interrupt, cycled
    task: str = ""
    pid: int = 0
    cpu: int = 0
    spi: dict = dataclasses.field(default_factory=dict)   # the device's own mode, wordsize, bitorder, cs_polarity
    miso_delay: float | None = None    # its MISO after the launching edge (tDO); None: its traffic's chip's
    miso_enable: float | None = None   # CS assert -> its first MISO bit (CPHA 0); None: likewise


@dataclasses.dataclass
class Bus(Recipe):
    """Devices on one controller (TOML: module docstring); bus-wide keys: recipe.Recipe."""

    lead: float = 50e-6
    tail: float = 50e-6
    sclk: float = 4e6
    channels: dict = dataclasses.field(default_factory=lambda: {"clk": "SCLK", "mosi": "MOSI", "miso": "MISO"})
    duration: float = 20e-3
    controller: kernel.Latencies = dataclasses.field(default_factory=kernel.Latencies)
    devices: list = dataclasses.field(default_factory=list)
    overlap: tuple = ()
    overlap_by: float = 300e-9
    stray_sclk: int = 0

    FORM = "shared-bus scenario"

    def shape_of(self, d: Device) -> SpiShape:
        """The device's SPI settings: the bus's, with the device's own keys over them (the
        SPI core sets mode, word size, bit order and CS polarity per device)."""
        s = self.shape
        for key, value in d.spi.items():
            if key == "wordsize":
                s.wordsize = int(value)
            else:
                set_bus_setting(s, key, value)
        return s

    # ------------------------------------------------------------ loading
    @classmethod
    def from_tables(cls, data: dict, text: str, overrides: dict | None, path=None) -> "Bus":
        data = dict(data)
        sh = cls(source=text)
        devices = data.pop("device", None)
        if not isinstance(devices, list) or not 1 <= len(devices) <= MAX_DEVICES:
            raise UsageError(f"a shared-bus scenario has 1..{MAX_DEVICES} [[device]] tables",
                             path=str(path) if path else None)
        ctrl = data.pop("controller", {}) or {}
        faults = data.pop("faults", {}) or {}
        data.pop("decoders", None)          # for the tests (captures/README.md), not the synthesizer
        data.pop("pins", None)              # likewise
        try:
            for key, value in cls.flat(data, overrides).items():
                sh._set(key, value)
            sh.controller = kernel.Latencies(**kernel.model_options(ctrl, CONTROLLER_KEYS, "controller"))
            for key, value in faults.items():
                if key == "overlap":
                    sh.overlap = tuple(int(v) for v in value)
                elif key == "overlap_by":
                    sh.overlap_by = parse_time(value)
                elif key == "stray_sclk":
                    sh.stray_sclk = int(value)
                else:
                    raise UsageError(f"unknown [faults] key {key!r}; known: overlap, overlap_by, stray_sclk")
            sh.devices = [_device(d, i) for i, d in enumerate(devices)]
        except (ValueError, TypeError, OverflowError) as e:
            raise UsageError(f"shared-bus scenario: {e}", path=str(path) if path else None) from None
        sh._check()
        return sh

    def _set(self, key: str, value) -> None:
        if key == "duration":
            self.duration = parse_time(value)
        elif not self.set_common(key, value):      # samplerate, sclk, seed, mode, wordsize, channels ...
            raise UsageError(f"unknown shared-bus scenario key {key!r} (a [[device]] recipe sets each "
                             "device's timing in its own table)")

    def _check(self) -> None:
        need = self.need
        self.check_common(64)
        for d in self.devices:
            s = self.shape_of(d)
            need(1 <= s.wordsize <= 64, f"{d.cs}: wordsize must be 1..64")
            # SCLK idles at one level between the devices' windows: no clock edge outside them
            need(s.cpol == self.cpol, f"{d.cs}: a device's mode keeps the bus's CPOL (mode {self.cpol * 2} "
                 f"or {self.cpol * 2 + 1})")
        need(self.duration > 0 and np.isfinite(self.duration), "duration must be > 0 and finite")
        check_size(self.FORM, int((self.lead + self.duration + self.tail) * self.samplerate))
        c = self.controller
        need(c.jitter >= 0 and all(getattr(c, k) >= 0 for k in CONTROLLER_KEYS),
             "controller latencies and jitter must be >= 0")
        names = [d.cs for d in self.devices] + [d.spi_device for d in self.devices]
        need(len(set(names)) == len(names), "every device needs its own cs and spi_device")
        need(not set(d.cs for d in self.devices) & set(self.channels.values()),
             "a device's cs is also a bus channel")
        for d in self.devices:
            need(d.traffic in TRAFFIC, f"traffic is one of {', '.join(TRAFFIC)}, not {d.traffic!r}")
            need(d.driver in DRIVERS, f"driver is one of {', '.join(DRIVERS)}, not {d.driver!r}")
            need(d.traffic != "mcp2518fd-rx" or d.driver == "irq", "mcp2518fd-rx traffic comes from an irq driver")
            need(d.traffic != "mcp3008" or self.shape_of(d).wordsize == 8, "mcp3008 traffic needs 8-bit words")
            need(d.traffic != "mcp2518fd-rx" or self.shape_of(d).wordsize == 8,
                 "mcp2518fd-rx traffic needs 8-bit words")
            for k in ("cs_setup", "cs_hold", "cs_change", "think", "irq_period", "irq_latency", "start",
                      "idle_clocks"):
                need(getattr(d, k) >= 0, f"{d.cs}: {k} must be >= 0")
            need(d.irq_period > 0 and d.transfers_per_message >= 1 and d.words >= 1 and d.messages_per_irq >= 1,
                 f"{d.cs}: irq_period > 0, transfers_per_message, words and messages_per_irq >= 1")
            need(d.words * d.transfers_per_message <= 1 << 16,
                 f"{d.cs}: words x transfers_per_message must be <= 65536 per message")
            need(d.cs_hold > 0 and d.cs_setup > 0, f"{d.cs}: cs_setup and cs_hold must be > 0")
            for key in ("miso_delay", "miso_enable"):
                check_delay(self, f"{d.cs}: {key}", getattr(d, key))
        need(self.overlap_by > 0, "overlap_by must be > 0")
        need(self.stray_sclk >= 0, "stray_sclk must be >= 0")

    def capture(self, tl: Timeline | None = None) -> "BusCapture":
        if tl is not None:
            raise UsageError("a shared-bus scenario plans its own timeline")
        return build_bus(self)


def _device(table: dict, i: int) -> Device:
    if not isinstance(table, dict) or "cs" not in table:
        raise UsageError(f"[[device]] number {i + 1} needs a cs name")
    d = Device(cs=str(table["cs"]), spi_device=str(table.get("spi_device", f"spi0.{i}")))
    times = {"cs_setup", "cs_hold", "cs_change", "think", "start", "irq_period", "irq_latency", "miso_delay",
             "miso_enable"}
    for key, value in table.items():
        if key in ("cs", "spi_device"):
            continue
        if key in times:
            setattr(d, key, parse_time(value))
        elif key in ("traffic", "driver", "task"):
            setattr(d, key, str(value))
        elif key in ("transfers_per_message", "words", "messages_per_irq", "pid", "cpu"):
            setattr(d, key, int(value))
        elif key in ("think_sigma", "irq_jitter", "idle_clocks"):
            setattr(d, key, float(value))
        elif key in ("channels", "batch"):
            setattr(d, key, tuple(int(v) for v in (value if isinstance(value, list) else [value])))
        elif key in ("mode", "wordsize", "bitorder", "cs_polarity"):
            d.spi[key] = int(value) if key == "wordsize" else value
            if key != "wordsize":
                set_bus_setting(SpiShape(1.0), key, value)      # a bad value raises here
        else:
            raise UsageError(f"unknown [[device]] key {key!r}")
    bus, cs = kernel.spi_device_numbers(d.spi_device)
    if not d.task:
        d.task = "spidev-test" if d.driver == "spidev" else f"irq/{52 + i}-spi{bus}.{cs}"
    d.pid = d.pid or 4242 + 17 * i
    d.cpu = d.cpu or (2 + i) % 4
    return d


# ----------------------------------------------------------------- traffic
class _Traffic:
    """A device's messages, one at a time: (windows, starts an interrupt), each window
    (mosi words, miso words)."""

    def __init__(self, sh: Bus, d: Device, k: int):
        self.d, self.sh = d, sh
        self.rng = np.random.default_rng([sh.seed, k, 1])
        self.n = 0
        self._plan: list = []
        self._at = 0
        self.truth: list[dict] = []          # per window: what it means (mcp3008, mcp2518fd)

    def next(self) -> tuple[list[tuple[list[int], list[int]]], bool]:
        d = self.d
        self.n += 1
        if d.traffic == "mcp2518fd-rx":
            return self._mcp2518fd()
        wins = []
        for _ in range(d.transfers_per_message):
            if d.traffic == "mcp3008":
                from spigap.synth.traffic import mcp3008

                ch = d.channels[len(self.truth) % len(d.channels)]
                code = int(self.rng.integers(0, 1024))
                tx = mcp3008.command_bytes("linux", ch, True)
                rx = mcp3008._words(mcp3008.device_reply(mcp3008._bits(tx), code, 10, 1))
                self.truth.append({"channel": ch, "code": code})
            else:
                mask = (1 << self.sh.shape_of(d).wordsize) - 1
                base = len(self.truth) * d.words
                tx = [(base + j) & mask for j in range(d.words)]
                # 64-bit words: numpy draws them as uint64 only (int64, the stream the shipped captures
                # were drawn with, cannot hold 2**64 - 1)
                big = {"dtype": np.uint64} if mask >= 1 << 63 else {}
                rx = [int(v) for v in self.rng.integers(0, mask, d.words, endpoint=True, **big)]
                self.truth.append({})
            wins.append((tx, rx))
        irq = d.driver == "irq" and (self.n - 1) % d.messages_per_irq == 0
        return wins, irq

    def _mcp2518fd(self):
        from spigap.synth.traffic import mcp2518fd

        if self._at >= len(self._plan):
            seed = int(self.rng.integers(0, 1 << 30))
            opts = {"name": "mcp2518fd-rx", "frames": 64, "seed": seed,
                    "batch": " ".join(str(b) for b in self.d.batch)}
            self._plan = mcp2518fd.plan(self.sh, opts)      # its opts' seed, not the recipe's
            self._at = 0
        first = self._plan[self._at]
        acc = [first]
        self._at += 1
        while self._at < len(self._plan) and not self._plan[self._at].message_start:
            acc.append(self._plan[self._at])
            self._at += 1
        for a in acc:
            self.truth.append({"what": a.what, "instruction": a.instruction, "addr": a.addr})
        return [(list(a.mosi), list(a.miso)) for a in acc], bool(first.irq_start)


# ----------------------------------------------------------------- the controller
@dataclasses.dataclass
class Message:
    device: int
    index: int                 # the device's message number
    windows: list              # bus window indices
    submit: float
    start: float               # spi_message_start
    done: float                # spi_message_done
    busy: float | None         # spi_controller_busy (own path), None when queued
    idle: float | None = None  # spi_controller_idle after it, None when another was queued
    queued: bool = False
    behind: list = dataclasses.field(default_factory=list)    # messages (bus order) ahead of it when submitted
    irq: float | None = None   # the interrupt that started it (irq driver)
    enter: float | None = None  # sys_enter_ioctl (spidev)
    exit: float | None = None   # sys_exit_ioctl (spidev)


@dataclasses.dataclass
class Plan:
    """Every window in bus order with its device and timing parameters, and every message."""

    device: list = dataclasses.field(default_factory=list)       # per window
    message: list = dataclasses.field(default_factory=list)      # per window: index into messages
    cs_setup: list = dataclasses.field(default_factory=list)
    cs_hold: list = dataclasses.field(default_factory=list)
    assert_t: list = dataclasses.field(default_factory=list)     # planned CS assert (s)
    mosi: list = dataclasses.field(default_factory=list)         # per window: list of words
    miso: list = dataclasses.field(default_factory=list)
    word_gaps: list = dataclasses.field(default_factory=list)    # per window: gaps before words 1..
    messages: list = dataclasses.field(default_factory=list)


def plan(sh: Bus) -> tuple[Plan, list[_Traffic]]:
    """Run the controller queue: every message's submit, start and done, every window's place."""
    rng = np.random.default_rng([sh.seed, 0])
    c = sh.controller
    T = 1.0 / sh.sclk
    spans = [(2 * sh.shape_of(d).wordsize - 1) * T / 2 for d in sh.devices]

    def lat(x: float) -> float:
        if c.jitter <= 0 or x <= 0:
            return x
        return max(0.2 * x, x * (1.0 + c.jitter * float(rng.standard_normal())))

    traffic = [_Traffic(sh, d, k) for k, d in enumerate(sh.devices)]
    out = Plan()
    end = sh.lead + sh.duration
    heap: list = []
    pending: dict[int, tuple] = {}        # device -> (windows, irq time)
    n_msg = [0] * len(sh.devices)
    next_irq = [sh.lead + d.start for d in sh.devices]

    def schedule(k: int, after: float) -> None:
        """The device's next submit: ``after`` is its previous message's sys_exit_ioctl
        (spidev) or spi_message_done (irq); -inf before its first message."""
        d = sh.devices[k]
        wins, irq = traffic[k].next()
        t_irq = t_enter = None
        if d.driver == "spidev":
            t_enter = sh.lead + d.start if after == -np.inf else after + _think(rng, d)
            t = t_enter + lat(c.enter_to_submit)
        elif irq:
            t_irq = next_irq[k]
            next_irq[k] += d.irq_period * (1.0 + d.irq_jitter * float(rng.uniform(-1, 1)))
            t = max(t_irq + lat(d.irq_latency), after + _think(rng, d))
        else:
            t = after + _think(rng, d)
        pending[k] = (wins, t_irq, t_enter)
        heapq.heappush(heap, (t, k))

    for k in range(len(sh.devices)):
        schedule(k, -np.inf)
    free_at = -np.inf             # the controller goes idle here (after the last message's done)
    prev: Message | None = None
    while heap:
        t_sub, k = heapq.heappop(heap)
        if t_sub > end:
            continue
        d = sh.devices[k]
        if len(out.device) > MAX_WINDOWS:
            raise UsageError(f"shared-bus scenario: more than {MAX_WINDOWS:,} windows fit the duration, more than "
                             "spigap synth plans; shorten the duration or lengthen the devices' think times")
        wins, t_irq, t_enter = pending.pop(k)
        if t_sub >= free_at:
            busy = t_sub + lat(c.submit_to_busy)
            start = busy + lat(c.busy_to_start)
            queued = False
            if prev is not None:
                prev.idle = free_at
        else:
            assert prev is not None          # the controller is busy: a message ran before
            busy = None
            start = max(prev.done + lat(c.done_to_start), t_sub + lat(c.busy_to_start))
            queued = True
        m = Message(k, n_msg[k], [], t_sub, start, 0.0, busy, queued=queued, irq=t_irq, enter=t_enter)
        n_msg[k] += 1
        if queued:
            # FIFO, one at a time: the done times grow; those after the submit were ahead of it
            i = len(out.messages) - 1
            while i >= 0 and out.messages[i].done > t_sub:
                m.behind.insert(0, i)
                i -= 1
        t = start + lat(c.start_to_set_cs) + lat(c.gpio_cs_latency)
        for j, (tx, rx) in enumerate(wins):
            setup = _gap(rng, d.cs_setup)
            hold = _gap(rng, d.cs_hold)
            gaps = [T / 2 + d.idle_clocks * T] * (len(tx) - 1)
            out.device.append(k)
            out.message.append(len(out.messages))
            out.cs_setup.append(setup)
            out.cs_hold.append(hold)
            out.assert_t.append(t)
            out.mosi.append(tx)
            out.miso.append(rx)
            out.word_gaps.append(gaps)
            m.windows.append(len(out.device) - 1)
            t = t + setup + len(tx) * spans[k] + sum(gaps) + hold
            if j + 1 < len(wins):
                t += _gap(rng, d.cs_change)
        m.done = t + lat(c.deassert_to_done)
        free_at = m.done + lat(c.done_to_idle)
        out.messages.append(m)
        prev = m
        if d.driver == "spidev":
            m.exit = free_at + lat(c.idle_to_exit)
            schedule(k, m.exit)
        else:
            schedule(k, m.done)
    if prev is not None:
        prev.idle = free_at
    if not out.messages:
        raise UsageError("shared-bus scenario: no message fits the duration")
    return out, traffic


def _think(rng, d: Device) -> float:
    return max(0.2 * d.think, d.think * (1.0 + d.think_sigma * float(rng.standard_normal())))


def _gap(rng, x: float) -> float:
    """A bus-side gap with 2 % jitter (the device's own timing, not the kernel's)."""
    return max(0.5 * x, x * (1.0 + 0.02 * float(rng.standard_normal())))


# ----------------------------------------------------------------- the capture
@dataclasses.dataclass(kw_only=True)
class BusCapture(Capture):
    """A shared bus's capture: the plan behind it, each device's traffic, every window's CS
    edges as on the wire (after the faults) and the faults injected."""

    recipe: Bus
    plan: Plan
    traffic: list
    cs_assert: np.ndarray       # per window, after the faults
    cs_deassert: np.ndarray
    overlaps: list              # (start, end, device a, device b)
    stray: list                 # (first edge, last edge) of each burst of SCLK edges with no CS asserted

    def check_trace(self, opts: TraceOptions) -> None:
        if opts.layout != "trace" or opts.lost or opts.other_device or opts.noise_rate_hz:
            raise UsageError("a shared-bus scenario's kernel trace is written in the 'trace' layout, with no "
                             "lost events, other devices or noise (--trace-format, --trace-lost, "
                             "--trace-other, --trace-noise)")

    def describe(self) -> str:
        per = ", ".join(f"{d.cs} {self.plan.device.count(k)}" for k, d in enumerate(self.recipe.devices))
        return f"{len(self.plan.device)} transfers ({per})"

    def describe_trace(self, opts: TraceOptions) -> str:
        return (f"the kernel trace of {len(self.plan.messages)} messages on "
                f"{', '.join(d.spi_device for d in self.recipe.devices)} (trace, drift {opts.drift_ppm:g} ppm)")

    # ------------------------------------------------------------- the truth
    def truth(self) -> dict:
        """Per device every transfer, per message the queue, the bus figures and the faults."""
        sh, tl, p = self.recipe, self.timeline, self.plan
        dev = np.asarray(p.device)
        ww = tl.windows.word_window
        n = len(dev)
        first_word = np.searchsorted(ww, np.arange(n), side="left")
        last_word = np.searchsorted(ww, np.arange(n), side="right") - 1
        first_edge, last_edge = tl.word_first[first_word], tl.word_last[last_word]
        msg_of = np.asarray(p.message)
        devices = {}
        for k, d in enumerate(sh.devices):
            w = np.flatnonzero(dev == k)
            a, e = self.cs_assert[w], self.cs_deassert[w]
            gap = np.concatenate([[np.nan], a[1:] - e[:-1]])
            m = msg_of[w]
            kind = ["lead"] + ["cs_change" if m[i] == m[i - 1] else "context_switch" for i in range(1, len(w))]
            # other devices' CS-active time inside each of this device's CS-inactive gaps (summed
            # over the other devices), and how many of their windows start inside
            busy = np.full(len(w), np.nan)
            count = np.zeros(len(w), np.int64)
            if len(w) > 1:
                lo, hi = e[:-1], a[1:]
                busy[1:] = 0.0
                for o in range(len(sh.devices)):
                    if o == k:
                        continue
                    ow = np.flatnonzero(dev == o)
                    oa, oe = self.cs_assert[ow], self.cs_deassert[ow]
                    cum = np.concatenate([[0.0], np.cumsum(oe - oa)])
                    xs = np.empty(2 * len(ow))
                    ys = np.empty(2 * len(ow))
                    xs[0::2], xs[1::2] = oa, oe
                    ys[0::2], ys[1::2] = cum[:-1], cum[1:]
                    busy[1:] += np.interp(hi, xs, ys) - np.interp(lo, xs, ys)
                    count[1:] += np.searchsorted(oa, hi, side="left") - np.searchsorted(oa, lo, side="left")
            ib = []
            for i in w.tolist():
                f, l_ = int(first_word[i]), int(last_word[i])
                ib.append((tl.word_first[f + 1:l_ + 1] - tl.word_last[f:l_]).tolist())
            devices[d.cs] = {
                "spi_device": d.spi_device, "traffic": d.traffic, "driver": d.driver,
                "transfers": len(w), "messages": int(len(set(m.tolist()))),
                "cs_assert_s": a.tolist(), "cs_deassert_s": e.tolist(),
                "cs_setup_s": (first_edge[w] - a).tolist(), "cs_hold_s": (e - last_edge[w]).tolist(),
                "gap_before_s": json_list(gap), "gap_before_kind": kind,
                "message": [int(x) for x in np.unique(m, return_inverse=True)[1]],
                "other_busy_s": json_list(busy), "other_windows": count.tolist(),
                "inter_byte_s": ib,
                "mosi": [p.mosi[i] for i in w.tolist()], "miso": [p.miso[i] for i in w.tolist()],
                "launch": Launch(**{key: tl.launch.per_window(key, n)[w]
                                    for key in ("mosi_delay", "miso_delay", "miso_enable")}).truth(len(w)),
                "meaning": self.traffic[k].truth[:len(w)],
            }
        hand = np.flatnonzero(dev[1:] != dev[:-1]) + 1
        names = [d.cs for d in sh.devices]
        messages = []
        for i, m in enumerate(p.messages):
            messages.append({
                "device": names[m.device], "spi_device": sh.devices[m.device].spi_device, "index": m.index,
                "submit_s": m.submit, "start_s": m.start, "done_s": m.done,
                "first_assert_s": float(self.cs_assert[m.windows[0]]), "last_deassert_s": float(self.cs_deassert[m.windows[-1]]),
                "queued": m.queued, "behind": [[names[p.messages[j].device], p.messages[j].index] for j in m.behind],
                "queued_s": _queued_s(p.messages, i), "irq_s": m.irq})
        for i, mm in enumerate(messages):
            mm["own_s"] = mm["start_s"] - mm["submit_s"] - mm["queued_s"]
        busy = np.clip(self.cs_deassert - self.cs_assert, 0, None)
        return {
            "note": "ground truth of a synthesized shared-bus capture (analyzer/spigap/synth/bus.py), seconds",
            "samplerate_hz": sh.samplerate, "duration_s": tl.end_time,
            "channels": dict(sh.channels), "devices": devices,
            "bus": {
                "transfers": n,
                "handover_s": (self.cs_assert[hand] - self.cs_deassert[hand - 1]).tolist(),
                "handover_pair": [[names[int(dev[h - 1])], names[int(dev[h])]] for h in hand.tolist()],
                "busy_s": float(busy.sum()),
                "overlaps": [{"start_s": s, "end_s": e, "devices": [names[a], names[c]]} for s, e, a, c in self.overlaps],
                "stray_sclk": [{"first_s": s, "last_s": e} for s, e in self.stray],
            },
            "messages": messages,
        }

    # ------------------------------------------------------------- the trace
    def trace_lines(self, *, ns: bool = False, drift_ppm: float = 0.0, clock_start_s: float = 1000.0) -> list[str]:
        """The kernel's side as /sys/kernel/tracing/trace text (5 latency flags)."""
        sh, tl, p, c = self.recipe, self.timeline, self.plan, self.recipe.controller
        rng = np.random.default_rng([sh.seed, 3])
        ww = tl.windows.word_window
        n = len(p.device)
        first_word = np.searchsorted(ww, np.arange(n), side="left")
        last_word = np.searchsorted(ww, np.arange(n), side="right") - 1
        first_sclk, last_sclk = tl.word_first[first_word], tl.word_last[last_word]
        orig_assert, deassert = tl.cs_assert, tl.cs_deassert
        ev: list[tuple[float, int, str, str, str, int, int]] = []      # (t, order, task, event, fields, pid, cpu)
        pump = ("spi0", 201, 1)
        bus = kernel.spi_device_numbers(sh.devices[0].spi_device)[0]

        def add(t, task, name, fields, order=0):
            ev.append((float(t), order, task[0], name, fields, task[1], task[2]))

        def jit(x):
            return max(0.2 * x, x * (1.0 + c.jitter * float(rng.standard_normal()))) if c.jitter > 0 else x

        for mi, m in enumerate(p.messages):
            d = sh.devices[m.device]
            own = (d.task, d.pid, d.cpu)
            runner = own if not m.queued else pump
            ptr = 0xffff888004000000 + 0x400 * mi
            length = sum(len(p.mosi[w]) for w in m.windows) * ((sh.shape_of(d).wordsize + 7) // 8)
            if m.enter is not None:
                add(m.enter, own, "sys_enter_ioctl", "fd: 0x00000003, cmd: 0x40206b00, arg: 0x7ffd1c2a9e50")
            add(m.submit, own, "spi_message_submit", f"{d.spi_device} {ptr:016x}")
            if m.busy is not None:
                add(m.busy, own, "spi_controller_busy", f"spi{bus}")
            add(m.start, runner, "spi_message_start", f"{d.spi_device} {ptr:016x}")
            for j, w in enumerate(m.windows):
                if j == 0:
                    t_on = orig_assert[w] - jit(c.gpio_cs_latency)
                    t_on = max(t_on, m.start + 1e-9)
                else:
                    t_on = orig_assert[w] - min(jit(c.gpio_cs_latency), 0.8 * (orig_assert[w] - deassert[w - 1]))
                add(t_on, runner, "spi_set_cs", f"{d.spi_device} activate")
                setup = first_sclk[w] - orig_assert[w]
                add(first_sclk[w] - min(jit(c.transfer_start_to_sclk), 0.8 * setup), runner, "spi_transfer_start",
                    f"{d.spi_device} {ptr + 0x40 + j:016x} len={len(p.mosi[w])} tx=[{_hex(p.mosi[w])}] "
                    f"rx=[{'-'.join(['00'] * min(64, len(p.mosi[w])))}]")
                hold = deassert[w] - last_sclk[w]
                add(last_sclk[w] + min(jit(c.sclk_to_transfer_stop), 0.3 * hold), runner, "spi_transfer_stop",
                    f"{d.spi_device} {ptr + 0x40 + j:016x} len={len(p.mosi[w])} tx=[{_hex(p.mosi[w])}] "
                    f"rx=[{_hex(p.miso[w])}]")
                add(deassert[w] - min(jit(c.gpio_cs_off_latency), 0.3 * hold), runner, "spi_set_cs",
                    f"{d.spi_device} deactivate")
            add(m.done, runner, "spi_message_done", f"{d.spi_device} {ptr:016x} len={length}/{length}")
            if m.idle is not None:
                add(m.idle, runner, "spi_controller_idle", f"spi{bus}", 1)
            if m.exit is not None:
                add(m.exit, own, "sys_exit_ioctl", f"0x{length:x}", 2)
        ev.sort(key=lambda x: (x[0], x[1]))
        dec = 9 if ns else 6
        d_ = 1 + drift_ppm * 1e-6
        lines = kernel.header(5, len(ev), legend=False)
        for t, _, task, name, fields, pid, cpu in ev:
            lines.append(kernel.trace_line(task, pid, cpu, ".....", f"{t / d_ + clock_start_s:.{dec}f}", name, fields))
        return lines

    def write_trace(self, path, opts: TraceOptions) -> dict:
        lines = self.trace_lines(ns=opts.ns, drift_ppm=opts.drift_ppm, clock_start_s=opts.clock_start_s)
        write_output(str(path), "\n".join(lines) + "\n")
        return {"path": str(path), "resolution_s": 1e-9 if opts.ns else 1e-6,
                "offset_s": -opts.clock_start_s * (1 + opts.drift_ppm * 1e-6), "drift_ppm": opts.drift_ppm,
                "events": len(lines) - 6, "devices": {d.spi_device: d.cs for d in self.recipe.devices}}


def build_bus(sh: Bus) -> BusCapture:
    p, traffic = plan(sh)
    n = len(p.device)
    assert_t = np.asarray(p.assert_t)
    wsz = [sh.shape_of(d).wordsize for d in sh.devices]
    dur = np.array([s + len(tx) * (2 * wsz[k] - 1) / (2 * sh.sclk) + sum(g) + h
                    for k, s, tx, g, h in zip(p.device, p.cs_setup, p.mosi, p.word_gaps, p.cs_hold)])
    deassert_t = assert_t + dur
    gap_before = np.empty(n)
    gap_before[0] = assert_t[0]
    gap_before[1:] = assert_t[1:] - deassert_t[:-1]
    bad = np.flatnonzero(gap_before[1:] <= 0)
    if len(bad):
        # reachable from a recipe (every [controller] latency and cs_change 0): the user's to fix
        i = int(bad[0]) + 1
        names = [d.cs for d in sh.devices]
        raise UsageError(f"shared-bus scenario: {names[p.device[i]]}'s window at {assert_t[i] * 1e6:.3f} µs "
                         f"starts before {names[p.device[i - 1]]}'s ends (no time between two windows on the "
                         "bus); give the [controller] latencies (done_to_start, start_to_set_cs, "
                         "gpio_cs_latency ...) or the device's cs_change a length > 0")
    per = np.array([len(m) for m in p.mosi], np.int64)
    nw = int(per.sum())
    ww = np.repeat(np.arange(n), per)
    word_gap = np.zeros(nw)
    flat_gaps = [g for gaps in p.word_gaps for g in [0.0] + gaps]
    word_gap[:] = flat_gaps
    windows = Windows(gap_before=gap_before, cs_setup=np.asarray(p.cs_setup), cs_hold=np.asarray(p.cs_hold),
                      kind=np.full(n, "bus", dtype=object), message=np.asarray(p.message),
                      word_window=ww, mosi=np.array([v for m in p.mosi for v in m], np.uint64),
                      miso=np.array([v for m in p.miso for v in m], np.uint64), word_gap=word_gap,
                      word_boundary=np.zeros(nw, bool))
    dev = np.asarray(p.device)
    tl = _build(sh, windows, dev, assert_t, deassert_t)
    cs_a, cs_d = tl.cs_assert.copy(), tl.cs_deassert.copy()
    overlaps = []
    for h in sh.overlap:
        # handover number h (0-based, over the windows whose device differs from the previous one's)
        hand = np.flatnonzero(dev[1:] != dev[:-1]) + 1
        if not 0 <= h < len(hand):
            raise UsageError(f"[faults] overlap {h}: the capture has {len(hand)} handovers")
        k = int(hand[h])
        last_edge = tl.word_last[int(np.searchsorted(ww, k) - 1)]
        if sh.overlap_by >= cs_d[k - 1] - last_edge:
            raise UsageError(f"[faults] overlap_by {sh.overlap_by:g} s must be shorter than the CS hold it overlaps")
        cs_a[k] = cs_d[k - 1] - sh.overlap_by
        overlaps.append((float(cs_a[k]), float(cs_d[k - 1]), int(dev[k - 1]), int(dev[k])))
    stray = []
    if sh.stray_sclk:
        rng = np.random.default_rng([sh.seed, 2])
        T = 1.0 / sh.sclk
        gaps = np.flatnonzero(cs_a[1:] - cs_d[:-1] > 8 * T) + 1
        if len(gaps) < sh.stray_sclk:
            raise UsageError("[faults] stray_sclk: not enough idle gaps for the bursts")
        pick = np.sort(rng.choice(gaps, sh.stray_sclk, replace=False))
        ts, ls = [], []
        for k in pick.tolist():
            t0 = cs_d[k - 1] + 0.5 * (cs_a[k] - cs_d[k - 1]) - 2 * T
            e = t0 + np.arange(8) * T / 2
            ts.append(e)
            ls.append(np.tile(np.array([1 - sh.cpol, sh.cpol], np.uint8), 4))
            stray.append((float(e[0]), float(e[-1])))
        # into the clock line, in time order (an SCLK edge of the bus: truth and trace do not see them)
        clk_t = np.concatenate([tl.clk_t, np.concatenate(ts)])
        clk_l = np.concatenate([tl.clk_level, np.concatenate(ls)])
        order = np.argsort(clk_t, kind="stable")
        tl.clk_t, tl.clk_level = clk_t[order], clk_l[order]
    cs = []
    for k, d in enumerate(sh.devices):
        w = np.flatnonzero(dev == k)
        cs.append(CsLine(d.cs, sh.shape_of(d).cs_active_low, cs_a[w], cs_d[w]))
    return BusCapture(recipe=sh, timeline=tl, cs=cs, n_samples=int(round(tl.end_time * sh.samplerate)), plan=p,
                      traffic=traffic, cs_assert=cs_a, cs_deassert=cs_d, overlaps=overlaps, stray=stray)


def _launch(sh: Bus, d: Device, cs_setup: np.ndarray) -> Launch:
    """When the data lines change in a device's windows: the controller's MOSI as the recipe
    says, the device's MISO as its own keys, the recipe's or its traffic's chip say."""
    return sh.launch(cs_setup, d.traffic, d.miso_delay, d.miso_enable)


def _build(sh: Bus, w: Windows, dev: np.ndarray, assert_t: np.ndarray, deassert_t: np.ndarray) -> Timeline:
    """The bus's timeline: one device's windows at a time, each with its own settings
    (timeline.build), merged in bus order (all devices share SCLK's idle level)."""
    if all(not d.spi for d in sh.devices):
        # one build; each window's data timing its device's
        per = {key: np.zeros(w.n) for key in ("mosi_delay", "miso_delay", "miso_enable")}
        for k, d in enumerate(sh.devices):
            win = np.flatnonzero(dev == k)
            lw = _launch(sh, d, w.cs_setup[win])
            for key in per:
                per[key][win] = lw.per_window(key, len(win))
        return build(w, sh.shape, sh.tail, Launch(**per))
    n, nw = w.n, len(w.word_window)
    cs_a, cs_d = np.empty(n), np.empty(n)
    wf, wl = np.empty(nw), np.empty(nw)
    clk, data, end = [], [], 0.0
    per = {key: np.zeros(n) for key in ("mosi_delay", "miso_delay", "miso_enable")}
    for k, d in enumerate(sh.devices):
        win = np.flatnonzero(dev == k)
        if not len(win):
            continue
        words = np.flatnonzero(np.isin(w.word_window, win))
        # each gap from the previous window of this device, as the bus placed them
        gap = np.concatenate([[assert_t[win[0]]], assert_t[win[1:]] - deassert_t[win[:-1]]])
        sub = Windows(gap_before=gap, cs_setup=w.cs_setup[win], cs_hold=w.cs_hold[win], kind=w.kind[win],
                      message=w.message[win], word_window=np.searchsorted(win, w.word_window[words]),
                      mosi=w.mosi[words], miso=w.miso[words], word_gap=w.word_gap[words],
                      word_boundary=w.word_boundary[words])
        one = build(sub, sh.shape_of(d), sh.tail, _launch(sh, d, sub.cs_setup))
        cs_a[win], cs_d[win] = one.cs_assert, one.cs_deassert
        wf[words], wl[words] = one.word_first, one.word_last
        clk.append((one.clk_t, one.clk_level))
        data.append((one.mosi_t, one.miso_t, one.mosi_bits, one.miso_bits))
        for key in per:
            per[key][win] = one.launch.per_window(key, len(win))
        end = max(end, one.end_time)
    ct = np.concatenate([c[0] for c in clk])
    co = np.argsort(ct, kind="stable")

    def line(i: int, j: int):
        """One data line's (times, bits) of every device, in time order."""
        t = np.concatenate([x[i] for x in data])
        o = np.argsort(t, kind="stable")
        return t[o], np.concatenate([x[j] for x in data])[o]

    (mosi_t, mosi_b), (miso_t, miso_b) = line(0, 2), line(1, 3)
    return Timeline(sh.shape, w, cs_a, cs_d, wf, wl, end, ct[co], np.concatenate([c[1] for c in clk])[co],
                    mosi_t, miso_t, mosi_b, miso_b, launch=Launch(**per))


def _queued_s(msgs: list, i: int) -> float:
    """The part of message i's submit -> start during which another device's message ran."""
    m = msgs[i]
    total = 0.0
    for j in m.behind:
        o = msgs[j]
        if o.device != m.device:
            total += max(0.0, min(o.done, m.start) - max(o.start, m.submit))
    return total


def _hex(words) -> str:
    return "-".join(f"{int(v) & 0xFF:02x}" for v in words[:64])
