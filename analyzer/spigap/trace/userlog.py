"""User-space timestamp logs (seed 002/003: ``perf_counter_ns`` before/after each ``xfer2``) -> Trace.

Accepted layout: a CSV (comma, semicolon, tab or whitespace separated) with one
header line of column names, then one row per iteration::

    iteration,before_ns,after_ns
    0,1234567890123,1234567905123
    1,1234567990456,1234568005456

* Every numeric column whose name says its unit becomes an event
  ``user:<name without the unit>``: the suffix ``_ns``, ``_us``, ``_ms`` or ``_s``
  (also ``(ns)``/``[us]`` and ``ns``/``us`` glued to the name) gives the unit;
  ``before_ns`` -> ``user:before``.
* Columns without a unit are timestamps only when ``unit=`` is given (for all of
  them); otherwise they are ignored. A column named ``iteration``, ``i``, ``n``,
  ``index`` or ``seq`` is never a timestamp.
* Empty cells are skipped (no event); a cell that is not a number is an InputError
  naming the line. Lines starting with ``#`` are comments.
* ``resolution_s`` is the finest unit of the timestamp columns (1e-9 for ns);
  the real granularity (seed 002's 1 µs steps) is for the aligner to measure.
* Rows are at most ``MAX_LINE`` bytes, the header at most ``MAX_COLUMNS``
  columns and the file at most ``limits.TRACE_FILE_BYTES``; anything else is an
  InputError. A FIFO no program writes to is refused at once (spigap.infile).
"""

from __future__ import annotations

import os
import re

import numpy as np

from spigap.errors import InputError, UsageError
from spigap.limits import TRACE_FILE_BYTES
from spigap.trace.columns import Trace

MAX_LINE = 1 << 16
MAX_COLUMNS = 256
UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0}
_UNIT = re.compile(r"^(.+?)\s*(?:_|\s|\(|\[)(ns|us|µs|ms|s)[\)\]]?$")     # before_ns, t (us), t[s]
_GLUED = re.compile(r"^(.+?)(ns|us|µs|ms)$")                               # beforens
_INDEX = {"iteration", "iter", "i", "n", "index", "seq", "idx"}
_SPLIT = re.compile(r"[,;\t ]+")


def _column_unit(name: str, default: float | None) -> tuple[str, float | None]:
    """(event name, seconds per unit) of a header cell; the unit None: not a timestamp column."""
    m = _UNIT.match(name) or _GLUED.match(name)
    if m:
        return m.group(1).strip(), UNITS[m.group(2)]
    return name, default


def parse(path, *, unit: str | None = None) -> Trace:
    """Read a user-space timestamp CSV (layout in the module docstring)."""
    path = os.fspath(path)
    if unit is not None and unit not in UNITS:
        raise UsageError(f"unknown time unit {unit!r}; known: {', '.join(UNITS)}")
    default = UNITS[unit] if unit else None
    from spigap.infile import open_input, too_big

    f = open_input(path, what="user-space log")
    with f:
        header: list[str] | None = None
        cols: list[tuple[int, str, float]] = []
        values: list[list[float]] = []
        n_lines = 0
        size = 0
        while True:
            raw = f.readline(MAX_LINE + 1)
            if not raw:
                break
            size += len(raw)
            if size > TRACE_FILE_BYTES:
                raise too_big(path, "user-space log", TRACE_FILE_BYTES)
            n_lines += 1
            if len(raw) > MAX_LINE:
                raise InputError(f"line {n_lines} is longer than {MAX_LINE // 1024} KiB: not a timestamp CSV",
                                 path=path)
            if b"\0" in raw:
                raise InputError("binary data, not a timestamp CSV", path=path,
                                 hint="expected a header such as iteration,before_ns,after_ns")
            line = raw.decode("utf-8", "replace").strip()
            if not line or line.startswith("#"):
                continue
            cells = _SPLIT.split(line)
            if header is None:
                header = [c.strip().strip('"') for c in cells]
                if len(header) > MAX_COLUMNS:
                    raise InputError(f"{len(header)} columns: not a timestamp CSV", path=path)
                for j, name in enumerate(header):
                    if name.lower() in _INDEX:
                        continue
                    base, scale = _column_unit(name, default)
                    if scale is not None:
                        cols.append((j, base, scale))
                if not cols:
                    raise InputError(f"no timestamp column in the header {line[:80]!r}", path=path,
                                     hint="name the columns with their unit (before_ns, after_us) or give the unit")
                values = [[] for _ in cols]
                continue
            for k, (j, _, scale) in enumerate(cols):
                if j >= len(cells) or cells[j] == "":
                    values[k].append(np.nan)
                    continue
                try:
                    v = float(cells[j])
                except ValueError:
                    raise InputError(f"line {n_lines}: {cells[j][:40]!r} is not a number", path=path) from None
                if not np.isfinite(v):
                    raise InputError(f"line {n_lines}: {cells[j][:40]!r} is not a finite number", path=path)
                values[k].append(v / round(1 / scale))    # /1e9 rounds once, *1e-9 twice
    if header is None:
        raise InputError("empty: no header line", path=path,
                         hint="expected a header such as iteration,before_ns,after_ns")
    ts_parts, ev_parts = [], []
    events = []
    for k, (_, base, _) in enumerate(cols):
        col = np.asarray(values[k], np.float64)
        ok = ~np.isnan(col)
        events.append(f"user:{base}")
        ts_parts.append(col[ok])
        ev_parts.append(np.full(int(ok.sum()), k, np.int32))
    ts = np.concatenate(ts_parts)
    ev = np.concatenate(ev_parts)
    if len(ts) == 0:
        raise InputError("no timestamps (only a header)", path=path)
    order = np.argsort(ts, kind="stable")
    ts, ev = ts[order], ev[order]
    n = len(ts)
    return Trace(path=path, source="userlog", ts=ts, cpu=np.full(n, -1, np.int16), pid=np.full(n, -1, np.int32),
                 task=np.full(n, -1, np.int32), event=ev, device=np.full(n, -1, np.int32),
                 ptr=np.zeros(n, np.uint64), length=np.full(n, -1, np.int64), gpio=np.full(n, -1, np.int32),
                 value=np.full(n, -1, np.int8), events=events, devices=[], tasks=[], payload={},
                 resolution_s=min(s for _, _, s in cols), n_lines=n_lines)
