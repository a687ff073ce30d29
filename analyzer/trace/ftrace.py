"""ftrace text -> Trace (model.py): the kernel's SPI tracepoints and everything around them.

Accepted input (detected per line, so a file may even mix them):

* ``cat /sys/kernel/tracing/trace`` — a ``#`` header, then
  ``TASK-PID [CPU] FLAGS TIMESTAMP: event: fields`` with 4 or 5 latency flag
  characters (old / new kernels), none, or the ``(TGID)`` column of the
  ``record-tgid`` option;
* ``cat /sys/kernel/tracing/trace_pipe`` — the same lines without the header;
  also the form with the TASK-PID/CPU/flags columns removed
  (``TIMESTAMP: event: fields``), and entries wrapped over continuation lines
  (a line that starts no entry continues the previous one, at most
  ``MAX_CONTINUATION`` lines, as in the real excerpt of docs);
* ``trace-cmd report`` — ``TASK-PID [CPU] TIMESTAMP: event: fields`` with or
  without ``-t`` (ns), with or without the ``[CPU]`` column and the flags
  (``-l``); its header lines (``version = 6``, ``cpus=4``, ``CPU 0 is empty``) are skipped;
* ``perf script`` — ``TASK PID[/TID] [CPU] TIMESTAMP: subsystem:event: fields``
  (``--ns`` too; the PID, or TID when both are printed, is the PID column);
* ``trace.dat`` (trace-cmd's binary file, by its magic) is converted by running
  ``trace-cmd report -t`` when trace-cmd is installed; without it an InputError
  says what to run. ``perf.data`` is refused with the ``perf script`` command to run.

Timestamps with 6 decimals (µs) or 9 (ns) set ``Trace.resolution_s`` (the
coarsest printed resolution of the file). TASK names may hold spaces and
dashes: the PID is the digits after the last ``-`` that is followed by the PID
and the ``[CPU]`` column.

Events (formats: ``TP_printk`` of include/trace/events/spi.h and gpio.h):

==============================  ====================================================
``spi_controller_busy/idle``    ``spi%d`` -> device ``spi0`` (also the old ``spi_master_*``)
``spi_message_submit/start``    ``spi%d.%d %p`` -> device, ptr
``spi_message_done``            ``spi%d.%d %p len=%u/%u`` -> length = actual bytes
``spi_set_cs``                  ``spi%d.%d activate|deactivate[, cs_high]`` -> ``spi:spi_set_cs:activate``
                                / ``:deactivate``
``spi_transfer_start/stop``     ``spi%d.%d %p len=%d tx=[..] rx=[..]`` -> ptr, length, payload
                                (hex bytes separated by ``-`` or spaces; ``[]`` -> None;
                                the kernel prints at most 64 bytes); old kernels without tx/rx too
``spi_setup``                   device
``gpio_value``                  ``%u %3s %d`` (gpio, get/set, value) or ``%u %u`` -> gpio, value;
                                a ``get`` (a read, not a toggle) is ``gpio:gpio_value:get``
anything else                   kept as ``subsystem:event``
==============================  ====================================================

ftrace text has no subsystem in the event name: known prefixes are mapped
(``spi_*`` -> spi, ``sched_*`` -> sched, ``sys_enter_*``/``sys_exit_*`` -> syscalls,
``sys_enter``/``sys_exit`` -> raw_syscalls, ``irq_handler_*``/``softirq_*`` -> irq,
``gpio_*`` -> gpio, ``ipi_*`` -> ipi, ``workqueue_*`` -> workqueue, ``timer_*``/``hrtimer_*`` -> timer);
any other is ``ftrace:<name>``. ``perf script`` names keep their own subsystem.

Lost events: the kernel's ``CPU:N [LOST M EVENTS]`` and trace-cmd's
``CPU:N [M EVENTS DROPPED]`` lines add M to ``Trace.lost_events`` (a drop without
a count adds 1 and a warning).

Bounds: a line longer than ``MAX_LINE`` bytes, NUL bytes (binary data) or a file
without a single event is an InputError naming the file; numbers are read with
bounded digit counts, so nothing from the file can overflow a column.
"""

from __future__ import annotations

import codecs
import os
import re
import shutil
import subprocess
import sys
from array import array
from collections.abc import Iterable, Iterator

import numpy as np

from analyzer.errors import InputError, UsageError
from analyzer.trace.model import Trace

MAX_LINE = 1 << 20              # bytes in one line; more is not a trace
MAX_CONTINUATION = 8            # continuation lines one entry may have
MAX_CONT_CHARS = 4096           # characters of one continuation line
CHUNK = 1 << 20
FORMATS = ("ftrace", "trace-cmd", "perf")

DAT_MAGIC = b"\x17\x08\x44tracing"
PERF_MAGIC = b"PERFILE2"

# the fields of the SPI tracepoints, read in the same match as the head (one regex call a line):
# bus, cs, pointer, len=, /frame, activate|deactivate, tx, rx, and the rest of the line
_TAIL = (r"(?:spi(\d{1,6})(?:\.(\d{1,6}))?(?:\s+(?:0x)?([0-9a-fA-F]{1,16})\b)?"
         r"(?:\s+len=(-?\d{1,10})(?:/(\d{1,10}))?)?(?:\s+(activate|deactivate))?"
         r"(?:\s*tx=\[([^\]]{0,4096})\]\s*rx=\[([^\]]{0,4096})\])?)?(.*)")
# TASK-PID [(TGID)] [CPU] [FLAGS] TIMESTAMP: [sub:]event: fields  (trace, trace_pipe, trace-cmd)
#  - the task is lazy: the first "-PID" that the rest of the head fits
#  - the whole head is optional: trace_pipe excerpts without the task columns
# groups: task pid tid cpu sec frac sub event + _TAIL (every head regex has the same groups)
_HEAD = re.compile(
    r"\s*(?:(.*?)-(\d{1,7})\s+(?:\(\s*[-\d]{1,8}\)\s+)?)?((?!))?"     # task, pid, (tgid), no tid
    r"(?:\[(\d{1,4})\]\s+)?"                                         # [cpu]
    r"(?:\S{1,6}\s+)??"                                              # latency flags (lazy: ts first)
    r"(\d{1,12})\.(\d{1,12}):\s+"                                    # timestamp
    r"(?:([A-Za-z_][\w-]{0,63}):)?([A-Za-z_]\w{0,127}):(?:\s+|$)" + _TAIL)
# the common case of the above, faster: TASK-PID [CPU] [FLAGS] TIMESTAMP: event: fields
_FAST = re.compile(
    r"\s*(.*?)-(\d{1,7})\s+((?!))?\[(\d{1,4})\]\s+(?:\S{1,6}\s+)?(\d{1,12})\.(\d{1,12}):\s+"
    r"((?!))?([A-Za-z_]\w{0,127}):(?:\s+|$)" + _TAIL)
# TASK PID[/TID] [CPU] TIMESTAMP: [period] subsystem:event: fields  (perf script)
_PERF = re.compile(
    r"\s*(.*?)\s+(\d{1,7})(?:/(\d{1,7}))?\s+(?:\[(\d{1,4})\]\s+)?"
    r"(\d{1,12})\.(\d{1,12}):\s+(?:\d{1,20}\s+)?"
    r"([A-Za-z_][\w-]{0,63}):([A-Za-z_]\w{0,127}):(?:\s+|$)" + _TAIL)
_FLAGS = re.compile(r"\[\d{1,4}\]\s+(\S{1,6})\s+\d{1,12}\.\d")
_LOST = re.compile(r"\s*CPU:\s*(\d{1,4})\s*\[(?:LOST\s+(\d{1,18})\s+EVENTS|(\d{1,18})?\s*EVENTS DROPPED)\]")
_TRACECMD_HEADER = re.compile(r"\s*(version = \d|cpus=\d|CPU \d+ is empty|CPU\d+ data recorded)")

# field formats (TP_printk)
_DEV = re.compile(r"spi(\d{1,6})(?:\.(\d{1,6}))?")
_MSG = re.compile(r"spi(\d{1,6})\.(\d{1,6})\s+(?:0x)?([0-9a-fA-F]{1,16})\b(?:\s+len=(\d{1,10})/(\d{1,10}))?")
_CS = re.compile(r"spi(\d{1,6})\.(\d{1,6})\s+(activate|deactivate)")
_XFER = re.compile(r"spi(\d{1,6})\.(\d{1,6})\s+(?:0x)?([0-9a-fA-F]{1,16})\s+len=(-?\d{1,10})"
                   r"(?:\s*tx=\[([^\]]{0,4096})\]\s*rx=\[([^\]]{0,4096})\])?")
_GPIO = re.compile(r"(\d{1,9})\s+(?:(get|set)\s+)?(-?\d{1,10})")
_HEXBYTES = re.compile(r"[0-9a-fA-F]{2}(?:[-\s]+[0-9a-fA-F]{2})*")

# handler kinds
K_OTHER, K_CTRL, K_MSG, K_DONE, K_CS, K_XFER, K_GPIO, K_DEV = range(8)
_SPI_KINDS = {
    "spi_controller_busy": (K_CTRL, "spi_controller_busy"),
    "spi_controller_idle": (K_CTRL, "spi_controller_idle"),
    "spi_master_busy": (K_CTRL, "spi_controller_busy"),     # kernels before 5.x
    "spi_master_idle": (K_CTRL, "spi_controller_idle"),
    "spi_message_submit": (K_MSG, "spi_message_submit"),
    "spi_message_start": (K_MSG, "spi_message_start"),
    "spi_message_done": (K_DONE, "spi_message_done"),
    "spi_set_cs": (K_CS, "spi_set_cs"),
    "spi_transfer_start": (K_XFER, "spi_transfer_start"),
    "spi_transfer_stop": (K_XFER, "spi_transfer_stop"),
    "spi_setup": (K_DEV, "spi_setup"),
}
_PREFIXES = (("spi_", "spi"), ("sched_", "sched"), ("sys_enter_", "syscalls"), ("sys_exit_", "syscalls"),
             ("irq_handler_", "irq"), ("softirq_", "irq"), ("gpio_", "gpio"), ("ipi_", "ipi"),
             ("workqueue_", "workqueue"), ("hrtimer_", "timer"), ("timer_", "timer"))
_EXACT = {"sys_enter": "raw_syscalls", "sys_exit": "raw_syscalls"}


def subsystem_of(event: str) -> str:
    """The subsystem ftrace text leaves out, for the events spigap knows; else ``ftrace``."""
    if event in _EXACT:
        return _EXACT[event]
    for prefix, sub in _PREFIXES:
        if event.startswith(prefix):
            return sub
    return "ftrace"


def _fail(path: str, problem: str, hint: str | None = None) -> InputError:
    return InputError(problem, path=path, hint=hint)


class _Builder:
    """Columns grown row by row (array.array: 8 bytes a value, not a Python object)."""

    def __init__(self, path: str):
        self.path = path
        self.ts = array("d")
        self.cpu = array("h")
        self.pid = array("i")
        self.task = array("i")
        self.event = array("i")
        self.device = array("i")
        self.ptr = array("Q")
        self.length = array("q")
        self.gpio = array("i")
        self.value = array("b")
        self.payload: dict[int, tuple[bytes | None, bytes | None]] = {}
        self.events: list[str] = []
        self.event_ix: dict[str, int] = {}
        self.devices: list[str] = []
        self.device_ix: dict[tuple[str, str | None], int] = {}
        self.tasks: list[str] = []
        self.task_ix: dict[str, int] = {}
        self.kinds: dict[tuple[str | None, str], tuple[int, str]] = {}
        self.bad_fields = 0
        self.bad_payload = 0

    def ev(self, name: str) -> int:
        i = self.event_ix.get(name)
        if i is None:
            i = self.event_ix[name] = len(self.events)
            self.events.append(sys.intern(name))
        return i

    def dev(self, bus: str, cs: str | None) -> int:
        key = (bus, cs)
        i = self.device_ix.get(key)
        if i is None:
            i = self.device_ix[key] = len(self.devices)
            self.devices.append(sys.intern(f"spi{int(bus)}" + ("" if cs is None else f".{int(cs)}")))
        return i

    def kind(self, sub: str | None, name: str) -> tuple[int, str]:
        """(handler kind, full event name without argument) of a printed event name."""
        key = (sub, name)
        k = self.kinds.get(key)
        if k is None:
            if sub in (None, "spi") and name in _SPI_KINDS:
                kind, base = _SPI_KINDS[name]
                k = (kind, "spi:" + base)
            elif name == "gpio_value" and sub in (None, "gpio"):
                k = (K_GPIO, "gpio:gpio_value")
            else:
                k = (K_OTHER, f"{sub or subsystem_of(name)}:{name}")
            self.kinds[key] = k
        return k

    def fields(self, kind: int, name: str, rest: str) -> tuple:
        """(event code, device, ptr, length, gpio, value, payload) of one event's field text.

        The slow path: wrapped entries (continuation lines) and gpio_value; the
        one-line SPI events are read by the head regex's _TAIL in parse_lines.
        """
        dev, ptr, length, gpio, value = -1, 0, -1, -1, -1
        payload = None
        if kind == K_XFER:
            m = _XFER.match(rest)
            if m is None:
                self.bad_fields += 1
            else:
                bus, cs, p, ln, tx, rx = m.groups()
                dev, ptr, length = self.dev(bus, cs), int(p, 16), int(ln)
                if tx is not None:
                    payload = (self._bytes(tx), self._bytes(rx))
        elif kind == K_MSG or kind == K_DONE:
            m = _MSG.match(rest)
            if m is None:
                self.bad_fields += 1
            else:
                bus, cs, p, actual, _frame = m.groups()
                dev, ptr = self.dev(bus, cs), int(p, 16)
                if kind == K_DONE:
                    if actual is None:
                        self.bad_fields += 1
                    else:
                        length = int(actual)
        elif kind == K_CS:
            m = _CS.match(rest)
            if m is None:
                self.bad_fields += 1
            else:
                dev = self.dev(m.group(1), m.group(2))
                name = name + ":" + m.group(3)
        elif kind == K_CTRL or kind == K_DEV:
            m = _DEV.match(rest)
            if m is None:
                self.bad_fields += 1
            else:
                dev = self.dev(m.group(1), None if kind == K_CTRL else m.group(2))
        elif kind == K_GPIO:
            m = _GPIO.match(rest)
            if m is None:
                self.bad_fields += 1
            else:
                gpio, value = int(m.group(1)), int(m.group(3) != "0")
                if m.group(2) == "get":
                    name = name + ":get"
        return self.ev(name), dev, ptr, length, gpio, value, payload

    def patch(self, row: int, kind: int, name: str, rest: str) -> None:
        """Re-read the fields of row ``row`` from its whole (unwrapped) text."""
        code, dev, ptr, length, gpio, value, payload = self.fields(kind, name, rest)
        self.event[row], self.device[row], self.ptr[row], self.length[row] = code, dev, ptr, length
        self.gpio[row], self.value[row] = gpio, value
        if payload is None:
            self.payload.pop(row, None)
        else:
            self.payload[row] = payload

    def _bytes(self, text: str) -> bytes | None:
        text = text.strip()
        if not text:
            return None
        if _HEXBYTES.fullmatch(text) is None:
            self.bad_payload += 1
            return None
        return bytes.fromhex(text.replace("-", " "))

    def task_code(self, task: str | None) -> int:
        if task is None:
            return -1
        i = self.task_ix.get(task)
        if i is None:
            task = task.strip()
            i = self.task_ix.get(task)
            if i is None:
                i = len(self.tasks)
                self.tasks.append(sys.intern(task))
                self.task_ix[task] = i
        return i


def parse_lines(lines: Iterable[str], *, path: str = "<lines>", fmt: str | None = None) -> Trace:
    """Parse ftrace text given as lines (any iterable: a file, a pipe, a list).

    ``fmt`` (``ftrace``, ``trace-cmd``, ``perf``) only sets ``Trace.source``;
    None detects it. Lines longer than MAX_LINE are the caller's to refuse
    (``parse`` does). Memory: the columns (about 50 bytes an event) and the
    payloads; the text is not kept.
    """
    if fmt is not None and fmt not in FORMATS:
        raise UsageError(f"unknown trace format {fmt!r}; known: {', '.join(FORMATS)}")
    b = _Builder(path)
    fast, head, perf = _FAST.match, _HEAD.match, _PERF.match
    lost_re, flags_re = _LOST.match, _FLAGS.search
    ts_a, cpu_a, pid_a, task_a = b.ts.append, b.cpu.append, b.pid.append, b.task.append
    ev_a, dev_a, ptr_a, len_a = b.event.append, b.device.append, b.ptr.append, b.length.append
    gpio_a, val_a = b.gpio.append, b.value.append
    payload = b.payload
    task_ix, dev_ix, ev_ix = b.task_ix, b.device_ix, b.event_ix
    kinds = b.kinds
    to_bytes = b._bytes
    n_lines = n_skipped = lost = 0
    lost_unknown = 0
    n_perf = n_head = n_flags = 0
    tracecmd_header = ftrace_header = False
    decs: set[int] = set()
    row = -1                    # the last event's row (continuation lines extend it)
    last_m: re.Match | None = None
    last_kind, last_name = K_OTHER, ""
    last_bad = 0                # 1 when the last event's fields were counted as bad
    conts: list[str] = []
    for line in lines:
        n_lines += 1
        m = fast(line) or head(line)
        if m is None:
            m = perf(line)
            if m is None:
                # not an entry: header, lost-events line, continuation or garbage
                s = line.strip()
                if not s:
                    continue
                if s[0] == "#":
                    n_skipped += 1
                    if s.startswith("# tracer:"):
                        ftrace_header = True
                    continue
                ml = lost_re(s)
                if ml is not None:
                    count = ml.group(2) or ml.group(3)
                    if count is None:
                        lost_unknown += 1
                        lost += 1
                    else:
                        lost += int(count)
                    continue
                if last_m is not None and len(conts) < MAX_CONTINUATION and len(s) <= MAX_CONT_CHARS:
                    conts.append(s)
                    continue
                if not tracecmd_header and row < 0 and _TRACECMD_HEADER.match(s):
                    tracecmd_header = True
                n_skipped += 1
                continue
            n_perf += 1
        else:
            n_head += 1
        if conts:               # the previous entry was wrapped: read its whole text again
            assert last_m is not None
            b.bad_fields -= last_bad
            b.patch(row, last_kind, last_name, " ".join([last_m.string[last_m.end(8) + 1:].strip(), *conts]))
            conts = []
        (task, pid, tid, cpu, sec, frac, sub, name,
         bus, cs, p, ln, frame, act, tx, rx, tail) = m.groups()
        row += 1
        decs.add(len(frac))
        ts_a(float(sec + "." + frac))
        cpu_a(-1 if cpu is None else int(cpu))
        if tid is not None:
            pid = tid
        pid_a(-1 if pid is None else int(pid))
        if task is None:
            task_a(-1)
        else:
            t = task_ix.get(task)
            task_a(b.task_code(task) if t is None else t)
        k = kinds.get((sub, name))
        if k is None:
            k = b.kind(sub, name)
        kind, full = k
        last_m, last_kind, last_name = m, kind, full
        bad0 = b.bad_fields
        dev, ptr, length, gpio, value = -1, 0, -1, -1, -1
        if kind != K_OTHER:
            if kind == K_GPIO:
                bad0 = b.bad_fields
                code, dev, ptr, length, gpio, value, _ = b.fields(kind, full, tail)
                last_bad = b.bad_fields - bad0
                ev_a(code)
                dev_a(dev)
                ptr_a(ptr)
                len_a(length)
                gpio_a(gpio)
                val_a(value)
                continue
            if bus is None or (cs is None) != (kind == K_CTRL):
                b.bad_fields += 1
            else:
                d = dev_ix.get((bus, cs))
                dev = b.dev(bus, cs) if d is None else d
                if kind == K_CS:
                    if act is None:
                        b.bad_fields += 1
                    else:
                        full = full + ":" + act
                elif kind == K_XFER or kind == K_MSG or kind == K_DONE:
                    if p is not None:
                        ptr = int(p, 16)
                    if kind == K_XFER:
                        if ln is None:
                            b.bad_fields += 1
                        else:
                            length = int(ln)
                        if tx is not None:
                            payload[row] = (to_bytes(tx), to_bytes(rx))
                    elif kind == K_DONE:
                        if frame is None:
                            b.bad_fields += 1
                        else:
                            length = int(ln)
        code = ev_ix.get(full)
        ev_a(b.ev(full) if code is None else code)
        dev_a(dev)
        ptr_a(ptr)
        len_a(length)
        gpio_a(gpio)
        val_a(value)
        last_bad = b.bad_fields - bad0
        if n_flags < 4 and cpu is not None and flags_re(line) is not None:
            n_flags += 1
    if conts:
        assert last_m is not None
        b.bad_fields -= last_bad
        b.patch(row, last_kind, last_name, " ".join([last_m.string[last_m.end(8) + 1:].strip(), *conts]))

    n = len(b.ts)
    if n == 0:
        what = f"{n_lines} lines, none an ftrace event" if n_lines else "empty"
        raise _fail(path, f"not a trace: {what}",
                    "expected the text of /sys/kernel/tracing/trace, trace_pipe, `trace-cmd report` "
                    "or `perf script`; check the file")
    if fmt is None:
        if n_perf > n_head:
            fmt = "perf"
        elif tracecmd_header or (not ftrace_header and n_flags == 0 and b.task_ix):
            fmt = "trace-cmd"
        else:
            fmt = "ftrace"
    warnings = []
    if b.bad_fields:
        warnings.append(f"{b.bad_fields} SPI/GPIO events whose fields do not read as the kernel "
                        "prints them (kept without device/pointer/length)")
    if b.bad_payload:
        warnings.append(f"{b.bad_payload} tx=/rx= fields that are not hex bytes (payload ignored)")
    if lost_unknown:
        warnings.append(f"{lost_unknown} 'EVENTS DROPPED' lines without a count (each counted as 1)")
    dec_min, dec_max = min(decs), max(decs)
    if dec_min != dec_max:
        warnings.append(f"timestamps printed with {dec_min} to {dec_max} decimals; resolution taken "
                        f"as the coarsest, 1e-{dec_min} s")
    ts = np.frombuffer(b.ts, np.float64)
    cols = [np.frombuffer(a, dt).copy() for a, dt in
            ((b.cpu, np.int16), (b.pid, np.int32), (b.task, np.int32), (b.event, np.int32),
             (b.device, np.int32), (b.ptr, np.uint64), (b.length, np.int64), (b.gpio, np.int32),
             (b.value, np.int8))]
    if n > 1 and bool(np.any(ts[1:] < ts[:-1])):
        order = np.argsort(ts, kind="stable")
        ts = ts[order]
        cols = [c[order] for c in cols]
        inv = np.empty(n, np.int64)
        inv[order] = np.arange(n)
        payload = {int(inv[r]): v for r, v in payload.items()}
    else:
        ts = ts.copy()
    cpu_c, pid_c, task_c, event_c, dev_c, ptr_c, len_c, gpio_c, val_c = cols
    return Trace(path=path, source=fmt, ts=ts, cpu=cpu_c, pid=pid_c, task=task_c, event=event_c,
                 device=dev_c, ptr=ptr_c, length=len_c, gpio=gpio_c, value=val_c,
                 events=b.events, devices=b.devices, tasks=b.tasks, payload=payload,
                 resolution_s=10.0 ** -dec_min, n_lines=n_lines, n_skipped=n_skipped,
                 lost_events=lost, warnings=warnings)


def read_lines(path: str, *, max_line: int = MAX_LINE) -> Iterator[str]:
    """The lines of a text file, read in chunks, each line bounded by ``max_line`` bytes.

    Binary data (a NUL byte) or a longer line is an InputError naming the file.
    """
    from analyzer.io.base import open_errors

    with open_errors(path):
        f = open(path, "rb")
    with f:
        dec = codecs.getincrementaldecoder("utf-8")(errors="replace")
        tail = ""
        line_no = 0
        while True:
            try:
                chunk = f.read(CHUNK)
            except OSError as e:
                raise _fail(path, f"cannot read: {e.strerror}") from None
            if b"\0" in chunk:
                raise _fail(path, "binary data (NUL bytes), not trace text",
                            "pass the text of the trace: `trace-cmd report -t FILE > trace.txt`, "
                            "`perf script > trace.txt` or a copy of /sys/kernel/tracing/trace")
            text = tail + dec.decode(chunk, final=not chunk)
            parts = text.split("\n")
            tail = parts.pop()
            for p in parts:
                if len(p) > max_line:
                    raise _too_long(path, line_no + 1, max_line)
                line_no += 1
                yield p
            parts = []
            if len(tail) > max_line:
                raise _too_long(path, line_no + 1, max_line)
            if not chunk:
                break
        if tail:
            yield tail


def _too_long(path: str, line_no: int, max_line: int) -> InputError:
    return _fail(path, f"line {line_no} is longer than {max_line // 1024} KiB: not ftrace text",
                 "pass the text of /sys/kernel/tracing/trace, trace_pipe, `trace-cmd report` or `perf script`")


def _magic(path: str) -> bytes:
    from analyzer.io.base import open_errors

    with open_errors(path):
        with open(path, "rb") as f:
            return f.read(16)


def parse(path, *, fmt: str | None = None, max_line: int = MAX_LINE) -> Trace:
    """Read one trace file (any layout in the module docstring) into a Trace."""
    path = os.fspath(path)
    head = _magic(path)
    if head.startswith(PERF_MAGIC):
        raise _fail(path, "a binary perf.data file, not text",
                    f"convert it first: perf script -i {path} > trace.txt")
    if head.startswith(DAT_MAGIC):
        return _parse_dat(path, fmt)
    return parse_lines(read_lines(path, max_line=max_line), path=path, fmt=fmt)


def _parse_dat(path: str, fmt: str | None) -> Trace:
    """A trace-cmd binary file: through ``trace-cmd report -t`` when it is installed."""
    exe = shutil.which("trace-cmd")
    hint = f"run `trace-cmd report -t {path} > trace.txt` where trace-cmd is installed and pass trace.txt"
    if exe is None:
        raise _fail(path, "a binary trace-cmd file (trace.dat) and trace-cmd is not installed", hint)
    try:
        proc = subprocess.Popen([exe, "report", "-t", "-i", path], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    except OSError as e:
        raise _fail(path, f"cannot run trace-cmd: {e.strerror}", hint) from None
    assert proc.stdout is not None and proc.stderr is not None

    def lines() -> Iterator[str]:
        for raw in iter(lambda: proc.stdout.readline(MAX_LINE + 1), b""):  # type: ignore[union-attr]
            if len(raw) > MAX_LINE:
                raise _too_long(path, 0, MAX_LINE)
            yield raw.decode("utf-8", "replace").rstrip("\n")

    try:
        tr = parse_lines(lines(), path=path, fmt=fmt or "trace-cmd")
    except InputError:
        proc.kill()
        err = proc.stderr.read(4096).decode("utf-8", "replace").strip().splitlines()
        proc.wait()
        if proc.returncode:
            raise _fail(path, f"trace-cmd report failed: {err[-1] if err else 'exit ' + str(proc.returncode)}",
                        hint) from None
        raise
    finally:
        proc.stdout.close()
    err = proc.stderr.read(4096).decode("utf-8", "replace").strip().splitlines()
    if proc.wait() != 0:
        raise _fail(path, f"trace-cmd report failed: {err[-1] if err else 'exit ' + str(proc.returncode)}",
                    hint)
    return tr
