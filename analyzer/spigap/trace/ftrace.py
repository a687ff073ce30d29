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

Bounds: a line longer than ``MAX_LINE`` bytes, more than ``limits.TRACE_FILE_BYTES``
of text (a regular file: refused before it is read), NUL bytes (binary data) or a
file without a single event is an InputError naming the file; numbers are read with
bounded digit counts, so nothing from the file can overflow a column.
"""

from __future__ import annotations

import codecs
import contextlib
import gc
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator

import numpy as np

from spigap.errors import InputError, SpigapError, UsageError
from spigap.limits import TRACE_FILE_BYTES
from spigap.trace.columns import Trace

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
    r"(\d{1,12}\.(\d{1,12})):\s+"                                    # timestamp
    r"(?:([A-Za-z_][\w-]{0,63}):)?([A-Za-z_]\w{0,127}):(?:\s+|$)" + _TAIL)
# the common case of the above, faster: TASK-PID [CPU] [FLAGS] TIMESTAMP: event: fields
_FAST = re.compile(
    r"\s*(.*?)-(\d{1,7})\s+((?!))?\[(\d{1,4})\]\s+(?:\S{1,6}\s+)?(\d{1,12}\.(\d{1,12})):\s+"
    r"((?!))?([A-Za-z_]\w{0,127}):(?:\s+|$)" + _TAIL)
# TASK PID[/TID] [CPU] TIMESTAMP: [period] subsystem:event: fields  (perf script)
_PERF = re.compile(
    r"\s*(.*?)\s+(\d{1,7})(?:/(\d{1,7}))?\s+(?:\[(\d{1,4})\]\s+)?"
    r"(\d{1,12}\.(\d{1,12})):\s+(?:\d{1,20}\s+)?"
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


class _Codes(dict):
    """A dict that computes a missing value once: columns are mapped through ``__getitem__``."""

    def __init__(self, make):
        super().__init__()
        self.make = make

    def __missing__(self, key):
        value = self[key] = self.make(key)
        return value


def _int_or(default: int, base: int = 10):
    return lambda text: default if text is None else int(text, base)


class _Builder:
    """Columns built a batch of lines at a time (column-wise: map through caches, numpy)."""

    BATCH = 1 << 15

    def __init__(self, path: str):
        self.path = path
        self.chunks: list[tuple[np.ndarray, ...]] = []
        self.payload: dict[int, tuple[bytes | None, bytes | None]] = {}
        self.events: list[str] = []
        self.event_ix: dict[str, int] = {}
        self.devices: list[str] = []
        self.device_ix: dict[tuple[str, str | None], int] = {}
        self.tasks: list[str] = []
        self.task_ix: dict[str, int] = {}
        self.decimals: set[int] = set()
        self.n = 0
        self.bad_payload = 0
        self.kinds = _Codes(self._kind)
        self.codes = _Codes(self._code)
        self.devs = _Codes(lambda k: -1 if k[0] is None else self.dev(*k))
        self.task_codes = _Codes(self.task_code)
        self.small = _Codes(_int_or(-1))        # cpu, pid, len=: few distinct values

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
            name = f"spi{int(bus)}" + ("" if cs is None else f".{int(cs)}")
            if name in self.devices:            # "spi01" and "spi1": one device
                i = self.devices.index(name)
            else:
                i = len(self.devices)
                self.devices.append(sys.intern(name))
            self.device_ix[key] = i
        return i

    def task_code(self, task: str | None) -> int:
        if task is None:
            return -1
        task = task.strip()
        i = self.task_ix.get(task)
        if i is None:
            i = self.task_ix[task] = len(self.tasks)
            self.tasks.append(sys.intern(task))
        return i

    @staticmethod
    def _kind(key: tuple[str | None, str]) -> tuple[int, str]:
        """(handler kind, full event name without argument) of a printed (subsystem, event)."""
        sub, name = key
        if sub in (None, "spi") and name in _SPI_KINDS:
            kind, base = _SPI_KINDS[name]
            return kind, "spi:" + base
        if name == "gpio_value" and sub in (None, "gpio"):
            return K_GPIO, "gpio:gpio_value"
        return K_OTHER, f"{sub or subsystem_of(name)}:{name}"

    def _code(self, key: tuple[str | None, str, str | None]) -> int:
        """Event code of (subsystem, event, activate|deactivate|None)."""
        kind, full = self.kinds[key[:2]]
        if kind == K_CS and key[2] is not None:
            full = full + ":" + key[2]
        return self.ev(full)

    def add(self, batch: list[tuple]) -> None:
        """Turn a batch of head-regex group tuples into column chunks."""
        n = len(batch)
        if not n:
            return
        (task, pid, tid, cpu, ts, frac, sub, name,
         bus, cs, p, ln, frame, act, tx, rx, tail) = zip(*batch)
        self.decimals.update(map(len, frac))
        small = self.small.__getitem__
        ts_c = np.fromiter(map(float, ts), np.float64, n)
        cpu_c = np.fromiter(map(small, cpu), np.int16, n)
        if any(tid):
            pid = tuple(t or q for t, q in zip(tid, pid))
        pid_c = np.fromiter(map(small, pid), np.int32, n)
        task_c = np.fromiter(map(self.task_codes.__getitem__, task), np.int32, n)
        kinds = self.kinds.__getitem__
        kind = np.fromiter((k[0] for k in map(kinds, zip(sub, name))), np.int8, n)
        event_c = np.fromiter(map(self.codes.__getitem__, zip(sub, name, act)), np.int32, n)
        dev_c = np.fromiter(map(self.devs.__getitem__, zip(bus, cs)), np.int32, n)
        has_cs = np.fromiter(map(bool, cs), bool, n)
        len_c = np.fromiter(map(small, ln), np.int64, n)
        ptr_c = np.zeros(n, np.uint64)
        spi = (kind != K_OTHER) & (kind != K_GPIO)
        other = ~spi
        bad = spi & ((dev_c < 0) | (has_cs != (kind != K_CTRL)))
        if bool(spi.any()):
            has_ptr = np.fromiter(map(bool, p), bool, n) & ((kind == K_MSG) | (kind == K_DONE) | (kind == K_XFER))
            if bool(has_ptr.any()):
                ptr_c[has_ptr] = np.fromiter((int(p[i], 16) for i in np.flatnonzero(has_ptr)), np.uint64)
            is_cs, is_x, is_done = kind == K_CS, kind == K_XFER, kind == K_DONE
            bad |= is_cs & ~np.fromiter(map(bool, act), bool, n)
            bad |= is_x & ~np.fromiter(map(bool, ln), bool, n)
            bad |= is_done & ~np.fromiter(map(bool, frame), bool, n)
            len_c[~(is_x | is_done)] = -1
            for i in np.flatnonzero(is_x & ~bad).tolist():
                if tx[i] is not None:
                    self.payload[self.n + i] = (self._bytes(tx[i]), self._bytes(rx[i]))
        dev_c[other | bad] = -1
        len_c[other | bad] = -1
        ptr_c[bad] = 0
        gpio_c = np.full(n, -1, np.int32)
        val_c = np.full(n, -1, np.int8)
        for i in np.flatnonzero(kind == K_GPIO).tolist():
            code, _d, _p, _l, gpio, value, _pl, ok = self.fields(K_GPIO, "gpio:gpio_value", tail[i])
            event_c[i], gpio_c[i], val_c[i], bad[i] = code, gpio, value, not ok
        self.chunks.append((ts_c, cpu_c, pid_c, task_c, event_c, dev_c, ptr_c, len_c, gpio_c, val_c, bad))
        self.n += n

    def fields(self, kind: int, name: str, rest: str) -> tuple:
        """(event code, device, ptr, length, gpio, value, payload, ok) of one event's field text.

        The slow path: wrapped entries (continuation lines) and gpio_value; the
        one-line SPI events are read by the head regex's _TAIL in ``add``.
        """
        dev, ptr, length, gpio, value = -1, 0, -1, -1, -1
        payload = None
        ok = True
        if kind == K_XFER:
            m = _XFER.match(rest)
            if m is None:
                ok = False
            else:
                bus, cs, p, ln, tx, rx = m.groups()
                dev, ptr, length = self.dev(bus, cs), int(p, 16), int(ln)
                if tx is not None:
                    payload = (self._bytes(tx), self._bytes(rx))
        elif kind == K_MSG or kind == K_DONE:
            m = _MSG.match(rest)
            if m is None or (kind == K_DONE and m.group(4) is None):
                ok = False
            else:
                bus, cs, p, actual, _frame = m.groups()
                dev, ptr = self.dev(bus, cs), int(p, 16)
                if kind == K_DONE:
                    length = int(actual)
        elif kind == K_CS:
            m = _CS.match(rest)
            if m is None:
                ok = False
            else:
                dev = self.dev(m.group(1), m.group(2))
                name = name + ":" + m.group(3)
        elif kind == K_CTRL or kind == K_DEV:
            m = _DEV.match(rest)
            if m is None or (m.group(2) is None) != (kind == K_CTRL):
                ok = False
            else:
                dev = self.dev(m.group(1), m.group(2))
        elif kind == K_GPIO:
            m = _GPIO.match(rest)
            if m is None:
                ok = False
            else:
                gpio, value = int(m.group(1)), int(m.group(3) != "0")
                if m.group(2) == "get":
                    name = name + ":get"
        return self.ev(name), dev, ptr, length, gpio, value, payload, ok

    def _bytes(self, text: str) -> bytes | None:
        text = text.strip()
        if not text:
            return None
        if _HEXBYTES.fullmatch(text) is None:
            self.bad_payload += 1
            return None
        return bytes.fromhex(text.replace("-", " "))


def parse_lines(lines: Iterable[str], *, path: str = "<lines>", fmt: str | None = None) -> Trace:
    """Parse ftrace text given as lines (any iterable: a file, a pipe, a list).

    ``fmt`` (``ftrace``, ``trace-cmd``, ``perf``) only sets ``Trace.source``;
    None detects it. Lines longer than MAX_LINE are the caller's to refuse
    (``parse`` does). Memory: the columns (about 50 bytes an event), the
    payloads and one batch of lines; the text is not kept.
    """
    _check_format(fmt)
    with _no_gc():
        return _finish([_parse_lines(lines, path, fmt)], path, fmt)


def _check_format(fmt: str | None) -> None:
    if fmt is not None and fmt not in FORMATS:
        raise UsageError(f"unknown trace format {fmt!r}; known: {', '.join(FORMATS)}")


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    """Millions of short-lived tuples: the cyclic GC would rescan them all for nothing."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _parse_lines(lines: Iterable[str], path: str, fmt: str | None) -> "_Part":
    b = _Builder(path)
    fast, head, perf = _FAST.match, _HEAD.match, _PERF.match
    lost_re, flags_re = _LOST.match, _FLAGS.search
    n_lines = n_skipped = lost = 0
    lost_unknown = 0
    n_perf = n_head = n_flags = 0
    tracecmd_header = ftrace_header = False
    batch: list[tuple] = []
    add = batch.append
    size = b.BATCH
    row = -1                    # the last event's row (continuation lines extend it)
    last_m: re.Match | None = None
    wrapped: dict[int, list] = {}   # row -> [(subsystem, event), its text, continuation lines...]
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
                if last_m is not None and len(s) <= MAX_CONT_CHARS:
                    parts = wrapped.get(row)
                    if parts is None:
                        parts = wrapped[row] = [last_m.group(7, 8), last_m.string[last_m.end(8) + 1:].strip()]
                    if len(parts) <= MAX_CONTINUATION + 1:
                        parts.append(s)
                        continue
                if not tracecmd_header and row < 0 and _TRACECMD_HEADER.match(s):
                    tracecmd_header = True
                n_skipped += 1
                continue
            n_perf += 1
        else:
            n_head += 1
            if n_flags < 4 and flags_re(line) is not None:
                n_flags += 1
        row += 1
        last_m = m
        add(m.groups())
        if len(batch) >= size:
            b.add(batch)
            batch.clear()
    b.add(batch)
    batch.clear()

    n = b.n
    if n == 0:
        return _Part(None, b, dict(n_lines=n_lines, n_skipped=n_skipped, lost=lost, lost_unknown=lost_unknown,
                                   n_perf=n_perf, n_head=n_head, n_flags=n_flags,
                                   tracecmd_header=tracecmd_header, ftrace_header=ftrace_header))
    ts, cpu_c, pid_c, task_c, event_c, dev_c, ptr_c, len_c, gpio_c, val_c, bad = (
        np.concatenate(c) if len(b.chunks) > 1 else c[0] for c in zip(*b.chunks))
    b.chunks.clear()
    # wrapped entries: read their whole text again (the slow path, a few rows)
    for r, (key, *parts) in wrapped.items():
        kind, full = b.kinds[key]
        if kind == K_OTHER:
            continue
        code, dev, ptr, length, gpio, value, pl, ok = b.fields(kind, full, " ".join(parts))
        event_c[r], dev_c[r], ptr_c[r], len_c[r], gpio_c[r], val_c[r], bad[r] = (
            code, dev, ptr, length, gpio, value, not ok)
        if pl is None:
            b.payload.pop(r, None)
        else:
            b.payload[r] = pl
    cols = (ts, cpu_c, pid_c, task_c, event_c, dev_c, ptr_c, len_c, gpio_c, val_c, bad)
    return _Part(cols, b, dict(n_lines=n_lines, n_skipped=n_skipped, lost=lost, lost_unknown=lost_unknown,
                               n_perf=n_perf, n_head=n_head, n_flags=n_flags,
                               tracecmd_header=tracecmd_header, ftrace_header=ftrace_header))


class _Part:
    """The columns and counters of one stretch of a trace file (``_finish`` joins them).
    ``cols`` None: the stretch held no event."""

    def __init__(self, cols, b: "_Builder", counts: dict):
        self.cols = cols
        self.payload = b.payload
        self.events, self.devices, self.tasks = b.events, b.devices, b.tasks
        self.decimals = b.decimals
        self.bad_payload = b.bad_payload
        self.counts = counts


def _remap(codes: np.ndarray, names: list[str], into: list[str]) -> np.ndarray:
    """``codes`` (indices into ``names``, -1 none) as indices into ``into`` (extended)."""
    table = np.empty(len(names) + 1, np.int64)
    table[-1] = -1
    for i, name in enumerate(names):
        if name not in into:
            into.append(name)
        table[i] = into.index(name)
    return table[codes].astype(codes.dtype)


def _finish(parts: list[_Part], path: str, fmt: str | None) -> Trace:
    """One Trace from the parts of a file, in file order: codes re-interned, rows
    renumbered, counters summed, the layout detected, then sorted by time."""
    c: dict = {k: sum(p.counts[k] for p in parts) for k in parts[0].counts}
    full = [p for p in parts if p.cols is not None]
    if not full:
        n_lines = c["n_lines"]
        what = f"{n_lines} lines, none an ftrace event" if n_lines else "empty"
        raise _fail(path, f"not a trace: {what}",
                    "expected the text of /sys/kernel/tracing/trace, trace_pipe, `trace-cmd report` "
                    "or `perf script`; check the file")
    events, devices, tasks = list(full[0].events), list(full[0].devices), list(full[0].tasks)
    cols_list, payload, offset = [], {}, 0
    for k, p in enumerate(full):
        ts_, cpu_, pid_, task_, event_, dev_, ptr_, len_, gpio_, val_, bad_ = p.cols
        if k:
            event_ = _remap(event_, p.events, events)
            dev_ = _remap(dev_, p.devices, devices)
            task_ = _remap(task_, p.tasks, tasks)
        cols_list.append((ts_, cpu_, pid_, task_, event_, dev_, ptr_, len_, gpio_, val_, bad_))
        payload.update({r + offset: v for r, v in p.payload.items()} if offset else p.payload)
        offset += len(ts_)
    ts, cpu_c, pid_c, task_c, event_c, dev_c, ptr_c, len_c, gpio_c, val_c, bad = (
        np.concatenate(col) if len(cols_list) > 1 else col[0] for col in zip(*cols_list))
    n = len(ts)
    if fmt is None:
        if c["n_perf"] > c["n_head"]:
            fmt = "perf"
        elif c["tracecmd_header"] or (not c["ftrace_header"] and c["n_flags"] == 0 and tasks):
            fmt = "trace-cmd"
        else:
            fmt = "ftrace"
    warnings = []
    n_bad = int(bad.sum())
    if n_bad:
        warnings.append(f"{n_bad} SPI/GPIO events whose fields do not read as the kernel "
                        "prints them (kept without device/pointer/length)")
    bad_payload = sum(p.bad_payload for p in parts)
    if bad_payload:
        warnings.append(f"{bad_payload} tx=/rx= fields that are not hex bytes (payload ignored)")
    if c["lost_unknown"]:
        warnings.append(f"{c['lost_unknown']} 'EVENTS DROPPED' lines without a count (each counted as 1)")
    decimals = set().union(*(p.decimals for p in full))
    dec_min, dec_max = min(decimals), max(decimals)
    if dec_min != dec_max:
        warnings.append(f"timestamps printed with {dec_min} to {dec_max} decimals; resolution taken "
                        f"as the coarsest, 1e-{dec_min} s")
    cols = [cpu_c, pid_c, task_c, event_c, dev_c, ptr_c, len_c, gpio_c, val_c]
    if n > 1 and bool(np.any(ts[1:] < ts[:-1])):
        order = np.argsort(ts, kind="stable")
        ts = ts[order]
        cols = [col[order] for col in cols]
        inv = np.empty(n, np.int64)
        inv[order] = np.arange(n)
        payload = {int(inv[r]): v for r, v in payload.items()}
    cpu_c, pid_c, task_c, event_c, dev_c, ptr_c, len_c, gpio_c, val_c = cols
    return Trace(path=path, source=fmt, ts=ts, cpu=cpu_c, pid=pid_c, task=task_c, event=event_c,
                 device=dev_c, ptr=ptr_c, length=len_c, gpio=gpio_c, value=val_c,
                 events=events, devices=devices, tasks=tasks, payload=payload,
                 resolution_s=10.0 ** -dec_min, n_lines=c["n_lines"], n_skipped=c["n_skipped"],
                 lost_events=c["lost"], warnings=warnings)


def read_lines(path: str, *, max_line: int = MAX_LINE, start: int = 0, stop: int | None = None) -> Iterator[str]:
    """The lines of a text file, read in chunks, each line bounded by ``max_line`` bytes;
    ``start``/``stop``: only that byte range (both at line starts).

    Binary data (a NUL byte) or a longer line is an InputError naming the file.
    """
    from spigap.io.base import open_errors

    with open_errors(path):
        f = open(path, "rb")
    with f:
        f.seek(start)
        yield from _stream_lines(f, path, max_line=max_line, stop=stop if stop is None else stop - start)


def _stream_lines(f, path: str, *, max_line: int = MAX_LINE, stop: int | None = None,
                  head: bytes = b"") -> Iterator[str]:
    """The lines of an open binary file (or pipe) from where it stands, ``head`` (bytes
    already read from it) first; ``stop``: at most that many bytes."""
    left = None if stop is None else stop
    total = len(head)
    dec = codecs.getincrementaldecoder("utf-8")(errors="replace")
    tail = ""
    line_no = 0
    while True:
        try:
            if head:
                chunk, head = head, b""
            else:
                chunk = f.read(CHUNK if left is None else min(CHUNK, left))
                total += len(chunk)
                if total > TRACE_FILE_BYTES:
                    raise _too_big(path)
            if left is not None:
                left -= len(chunk)
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


def _too_big(path: str) -> SpigapError:
    from spigap.infile import too_big

    return too_big(path, "kernel trace", TRACE_FILE_BYTES)


def _too_long(path: str, line_no: int, max_line: int) -> InputError:
    return _fail(path, f"line {line_no} is longer than {max_line // 1024} KiB: not ftrace text",
                 "pass the text of /sys/kernel/tracing/trace, trace_pipe, `trace-cmd report` or `perf script`")


def _open_stream(path: str):
    """An open binary file for ``-`` (standard input), a FIFO or a character device; None
    for a regular file (read by path, in two halves when long)."""
    import stat

    from spigap.io.base import open_errors, stat_capture

    if path == "-":
        if sys.stdin is None or sys.stdin.isatty():
            raise _fail(path, "- reads the trace from standard input, which is a terminal here",
                        "pipe one in, e.g. trace-cmd report -t trace.dat | spigap trace CAPTURE --ftrace -")
        return os.fdopen(os.dup(sys.stdin.fileno()), "rb")
    mode = stat_capture(path).st_mode
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    if stat.S_ISFIFO(mode):
        from spigap.io.stdin import _open_fifo

        with open_errors(path):
            return _open_fifo(path)
    with open_errors(path):
        return open(path, "rb")


def _read_head(f) -> bytes:
    """The first 16 bytes of a stream (fewer only at its end)."""
    head = b""
    while len(head) < 16:
        more = f.read(16 - len(head))
        if not more:
            break
        head += more
    return head


def _magic(path: str) -> bytes:
    from spigap.io.base import open_errors

    with open_errors(path):
        with open(path, "rb") as f:
            return f.read(16)


def parse(path, *, fmt: str | None = None, max_line: int = MAX_LINE) -> Trace:
    """Read one trace file (any layout in the module docstring) into a Trace; ``-``,
    a FIFO or a character device (``<(trace-cmd report)``, ``/dev/stdin``) is read once,
    as a stream."""
    path = os.fspath(path)
    stream = _open_stream(path)
    if stream is not None:
        with stream as f:
            head = _read_head(f)
            if head.startswith(PERF_MAGIC) or head.startswith(DAT_MAGIC):
                what = "a binary perf.data file" if head.startswith(PERF_MAGIC) else "a binary trace-cmd file (trace.dat)"
                raise _fail(path, f"{what} cannot be read from a pipe",
                            "pipe its text instead: `trace-cmd report -t FILE` or `perf script -i FILE`")
            _check_format(fmt)
            return parse_lines(_stream_lines(f, path, max_line=max_line, head=head), path=path, fmt=fmt)
    head = _magic(path)
    if head.startswith(PERF_MAGIC):
        raise _fail(path, "a binary perf.data file, not text",
                    f"convert it first: perf script -i {path} > trace.txt")
    if head.startswith(DAT_MAGIC):
        return _parse_dat(path, fmt)
    _check_format(fmt)
    if os.path.getsize(path) > TRACE_FILE_BYTES:
        raise _too_big(path)
    cut = _cut(path, max_line) if _two_cores() else None
    if cut is not None:
        import concurrent.futures.process

        try:
            return _parse_two(path, fmt, max_line, cut)
        except (InputError, OSError, concurrent.futures.process.BrokenProcessPool):
            pass            # in one process: a bad line said with its line number, no fork needed
    return parse_lines(read_lines(path, max_line=max_line), path=path, fmt=fmt)


# A long trace is parsed in two processes, each a half of the file (the regex work is
# per line and holds the GIL, so threads would not help). Why not compiled: the layouts
# differ per tool and version (module docstring); Python's re reads them all in one
# place, and two cores halve its cost.
PARALLEL_BYTES = 8 << 20        # files at least this long are parsed in two halves
CUT_SEARCH = 1 << 20            # bytes searched past the middle for a line that starts an entry


def _two_cores() -> bool:
    import multiprocessing

    return (os.cpu_count() or 1) > 1 and "fork" in multiprocessing.get_all_start_methods()


def _cut(path: str, max_line: int) -> int | None:
    """A byte offset near the middle where a line starts an entry (so no wrapped entry is
    split), or None for a short file or none found within CUT_SEARCH bytes."""
    size = os.path.getsize(path)
    if size < PARALLEL_BYTES:
        return None
    with open(path, "rb") as f:
        f.seek(size // 2)
        data = f.read(CUT_SEARCH)
    pos = data.find(b"\n") + 1
    while 0 < pos < len(data):
        end = data.find(b"\n", pos)
        if end < 0:
            return None
        line = data[pos:end].decode("utf-8", "replace")
        if _FAST.match(line) or _HEAD.match(line) or _PERF.match(line):
            return size // 2 + pos
        pos = end + 1
    return None


def _part_of(path: str, fmt: str | None, max_line: int, start: int, stop: int | None) -> _Part:
    with _no_gc():
        return _parse_lines(read_lines(path, max_line=max_line, start=start, stop=stop), path, fmt)


def _parse_two(path: str, fmt: str | None, max_line: int, cut: int) -> Trace:
    import concurrent.futures
    import multiprocessing

    with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as ex:
        second = ex.submit(_part_of, path, fmt, max_line, cut, None)
        first = _part_of(path, fmt, max_line, 0, cut)
        parts = [first, second.result()]
    return _finish(parts, path, fmt)


def _parse_dat(path: str, fmt: str | None) -> Trace:
    """A trace-cmd binary file: through ``trace-cmd report -t`` when it is installed.
    Its stderr goes to a temporary file, not a pipe: a damaged file can make it warn
    without end, and an undrained pipe would then stop it (and us) for good."""
    exe = shutil.which("trace-cmd")
    if exe is None:
        raise _fail(path, "a binary trace-cmd file (trace.dat) and trace-cmd is not installed",
                    f"install it (apt-get install trace-cmd), or run `trace-cmd report -t {path} > trace.txt` "
                    "where it is installed and pass trace.txt")
    damaged = (f"check it with `trace-cmd report -t {path}`: the file may be cut short or damaged, or "
               "written by a newer trace-cmd")
    with tempfile.TemporaryFile() as errf:
        try:
            proc = subprocess.Popen([exe, "report", "-t", "-i", path], stdout=subprocess.PIPE,
                                    stderr=errf, stdin=subprocess.DEVNULL)
        except OSError as e:
            raise _fail(path, f"cannot run trace-cmd: {e.strerror}", damaged) from None
        assert proc.stdout is not None
        printed = 0

        def lines() -> Iterator[str]:
            nonlocal printed
            total = 0
            for raw in iter(lambda: proc.stdout.readline(MAX_LINE + 1), b""):  # type: ignore[union-attr]
                if len(raw) > MAX_LINE:
                    raise _too_long(path, 0, MAX_LINE)
                total += len(raw)
                if total > TRACE_FILE_BYTES:
                    raise _too_big(path)
                printed += 1
                yield raw.decode("utf-8", "replace").rstrip("\n")

        def last_error() -> str:
            errf.seek(max(errf.seek(0, os.SEEK_END) - 4096, 0))
            err = errf.read().decode("utf-8", "replace").strip().splitlines()
            return err[-1].strip() if err else f"exit {proc.returncode}"

        try:
            tr = parse_lines(lines(), path=path, fmt=fmt or "trace-cmd")
        except InputError:
            proc.kill()
            proc.wait()
            if proc.returncode > 0:
                raise _fail(path, f"trace-cmd report failed: {last_error()}", damaged) from None
            if not printed:
                raise _fail(path, "trace-cmd report printed no events", damaged) from None
            raise
        finally:
            proc.stdout.close()
        if proc.wait() != 0:
            raise _fail(path, f"trace-cmd report failed: {last_error()}", damaged)
    return tr
