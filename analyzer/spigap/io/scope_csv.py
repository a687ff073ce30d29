"""Oscilloscope CSV (analog): a time column plus voltage columns -> logic via threshold.

Layouts recognized from the header (all optional, any order), with the facts
from the instruments' manuals (docs/formats.md, "Oscilloscope CSV"):

* PicoScope 6: ``Time,Channel A,...`` then a units row ``(us),(V),...`` (times
  in the unit of the units row; ``∞``/``-∞`` for over-range) and a blank line.
* Keysight/Agilent: Infiniium key/value header block (``XInc``, ``XOrg``,
  ``Points``, ``XUnits`` ...) and/or InfiniiVision ``x-axis,1,2`` + ``second,Volt``.
* Rigol DS1000Z: ``X,CH1,CH2,Start,Increment,`` + ``Sequence,Volt,Volt,<t0>,<dt>``:
  the first column is a sample index, time = Start + index x Increment.
* R&S RTM/RTB: ``in s,C1 in V,...``; peak-detect exports write every acquisition
  interval as two rows (min, max) with identical time.
* Siglent-style key/value blocks (``Sample Interval``), Saleae analog CSV
  (``Trigger [s],Time [s],...``: the trigger column is skipped; ISO 8601 times as
  csv_changes reads them), plain ``time,ch..``.

Timing: rows are samples of a uniform grid, so a tick is the sample interval
(header ``XInc``/``Increment``/``Sample Interval``, else measured from the
first rows, or ``--samplerate``) and a row's tick is its index on that grid;
the time column only has to agree with it (printed times often carry only 6
significant digits, too few to place rows by their own time). If the times
leave the grid (gaps, segments), ticks follow the times from there on, with a
warning. Rows with identical time (min/max pairs) share one tick; inside a pair
the value nearer the level before comes first, so the pair ends on the new level
when an edge falls in that interval.

Thresholds: per channel ``--threshold CH=V[,HYST]``, default mid-range of the
first rows with 10 % hysteresis (analyzer/spigap/io/threshold.py). Parsing is the
vectorized block parser of csv_changes.py; memory is one chunk of rows.
"""

from __future__ import annotations

import math
import os
import re
from typing import Iterator, Sequence

import numpy as np

from spigap.limits import PLAUSIBLE_MIN_HZ
from spigap.findings import Cause, Finding
from spigap.errors import InputError, UsageError
from spigap.io.base import CaptureInfo, CaptureReader, EdgeBlock, edges_from_rows
from spigap.io.csv_changes import (CHUNK_BYTES, CUT_SHORT, TIME_HINT, bad_time_cell, cut_short, decimal_resolution,
                                     first_bad_row, first_time_hint, head_lines, iso_start, line_chunks, looks_iso, offset_after_lines,
                                     parse_block, parse_floats, parse_iso_times, read_head, time_unit_of)
from spigap.io.threshold import Schmitt, Threshold, resolve_thresholds, strict_blocks, tap_runs
from spigap.units import TIME_UNITS

# the one table of time units, plus the spelled-out second some scopes write
_TIME_UNIT = {**TIME_UNITS, "sec": 1.0, "second": 1.0, "seconds": 1.0}
_VOLT_UNIT = {"v": 1.0, "volt": 1.0, "volts": 1.0, "mv": 1e-3, "kv": 1e3, "uv": 1e-6, "µv": 1e-6}
_UNIT_RE = re.compile(r"^\(?\s*([a-zµ]+)\s*\)?$", re.I)
_NUM_RE = re.compile(r"^\s*\"?\s*[-+]?(?:\d+[.,]?\d*|[.,]\d+)(?:[eE][-+]?\d+)?\s*\"?\s*$|^\s*$|^\s*-?∞\s*$")
_INTERVAL_KEYS = ("xinc", "increment", "sample interval", "sampling interval", "xincrement", "x increment",
                  "interval", "time interval", "delta t", "dt")
_ORIGIN_KEYS = ("xorg", "start", "xorigin", "x origin", "first point", "horizontal offset", "t0")
SAMPLE_ROWS = 1 << 18
MAX_TICK = float(1 << 62)           # rows kept for automatic thresholds


def _fields(line: str, sep: str) -> list[str]:
    return [f.strip().strip('"').strip() for f in line.split(sep)]


_NOT_FINITE = re.compile(r"^\s*\"?\s*[-+]?(?:nan|inf|infinity)\s*\"?\s*$", re.IGNORECASE)


def _is_num(text: str) -> bool:
    return bool(_NUM_RE.match(text))


def _unit(text: str):
    m = _UNIT_RE.match(text.strip())
    if not m:
        return None
    u = m.group(1).lower()
    if u in _TIME_UNIT:
        return ("time", _TIME_UNIT[u])
    if u in _VOLT_UNIT:
        return ("volt", _VOLT_UNIT[u])
    if u in ("sequence", "points", "point", "index", "samples", "sample"):
        return ("index", 1.0)
    if u in ("a", "ma", "w", "db", "dbm", "hz", "div", "value"):
        return ("other", 1.0)
    return None


def _numeric(fields: list[str]) -> bool:
    """A row of numbers (empty cells, 'nan' and 'inf' too: a damaged row is read up to, not
    taken for the header); the first cell may be an ISO 8601 time (Saleae Logic 2's analog
    export with its "Use ISO8601 timestamps" option)."""
    return all(_is_num(x) or _NOT_FINITE.match(x) or (i == 0 and looks_iso(x)) for i, x in enumerate(fields)) \
        and not all(x == "" for x in fields)


def _filled(fields: list[str]) -> list[str]:
    """The cells up to the last non-empty one (a trailing separator, Rigol, adds an empty one)."""
    f = list(fields)
    while len(f) > 1 and f[-1] == "":
        f.pop()
    return f


RUN = 3         # the data start at the first of this many rows of numbers in a row


def _data_rows(lines: list[str]):
    """(first data line index, separator, number of columns, decimal comma) or None.

    The columns are the most common count of filled cells over the rows of numbers in the
    head (ties: the larger); the data start at the first of RUN consecutive rows of numbers
    with at least that many cells. A row further down with a cell too many is read (the
    extra cell ignored); one with too few cells or a word in it ends the capture there when
    it is read, with the row named (io/csv_changes.first_bad_row): never a silent cut."""
    best = None
    for sep in (",", ";", "\t"):
        rows = [(i, _filled(_fields(ln, sep))) for i, ln in enumerate(lines) if ln.strip()]
        numeric = [(i, f) for i, f in rows if _numeric(f)]
        counts: dict[int, int] = {}
        for _, f in numeric:
            counts[len(f)] = counts.get(len(f), 0) + 1
        if not counts:
            continue
        ncols = max(counts, key=lambda c: (counts[c], c))
        good = [_numeric(f) and len(f) >= ncols for _, f in rows]
        start = None
        for k in range(len(rows)):
            if all(good[k:k + RUN]):
                start = k
                break
        if start is None:
            continue
        # the separator giving more columns over more rows wins; ties go to ','
        first = rows[start][0]
        key = (ncols, len(rows) - start, sep == ",")
        if best is None or key > best[0]:
            dec_comma = sep != "," and any("," in x for x in _fields(lines[first], sep))
            best = (key, first, sep, ncols, dec_comma)
    if best is None:
        return None
    return best[1:]


def _short_first_row(lines: list[str], first: int, sep: str, ncols: int) -> str | None:
    """A warning when the line before the first data row is a row of numbers with fewer
    cells: a damaged first row, or a header of numbers; it is taken as the header."""
    for i in range(first - 1, -1, -1):
        if not lines[i].strip():
            continue
        f = _filled(_fields(lines[i], sep))
        if len(f) >= 2 and _numeric(f):
            return (f"line {i + 1}, just before the first data row, holds {len(f)} numbers where the data rows "
                    f"have {ncols}: it is read as part of the header (a damaged first row?)")
        return None
    return None


def sniff(head: bytes) -> bool:
    lines = head_lines(head)
    if not lines:
        return False
    d = _data_rows(lines)
    return d is not None and len(lines) - d[0] >= 2


class _Layout:
    def __init__(self):
        self.time_col: int | None = None
        self.time_unit = 1.0
        self.index_col = False      # the time column holds sample numbers (Rigol "Sequence")
        self.channels: list[tuple[int, str, float]] = []   # (column, name, volts per unit)
        self.dt: float | None = None
        self.t0: float | None = None
        self.keys: dict[str, str] = {}       # numeric header values by lower-case key
        self.meta: dict[str, str] = {}       # every "key,value" header line (text too), for the dialect
        self.dialect = "generic"


class ScopeCsvReader(CaptureReader):
    format_name = "scope-csv"

    def __init__(self, path, *, samplerate: float | None = None, threshold=None):
        self.path = str(path)
        head = read_head(self.path)
        self._size = os.path.getsize(self.path)
        lines = head_lines(head)
        d = _data_rows(lines)
        if d is None:
            raise InputError("not an oscilloscope CSV (no rows of numbers found)", path=self.path,
                             hint="pick the format with --input-format")
        self._first_line, self._sep, self.ncols, self._dec_comma = d
        raw = head[3:] if head.startswith(b"\xef\xbb\xbf") else head
        self._data_offset = (len(head) - len(raw)) + offset_after_lines(raw, self._first_line)
        lay = self._layout(lines[:self._first_line], lines[self._first_line:])
        self.layout = lay
        # ISO 8601 times in the time column (as csv_changes reads them): seconds from data row 1
        self._iso0: tuple[int, int] | None = None
        self._iso = lay.time_col is not None and not lay.index_col and \
            looks_iso(_fields(lines[self._first_line], self._sep)[lay.time_col])
        if self._iso:
            lay.time_unit = 1.0
        warnings: list[str] = []
        short = _short_first_row(lines, self._first_line, self._sep, self.ncols)
        if short is not None:
            warnings.append(short)
        if not lay.channels:
            raise InputError("the CSV has a time column but no voltage columns", path=self.path)

        # the first chunk of rows: time grid and threshold samples
        vals, ok, _, _ = self._parse(self._read_first())
        good = ok.all(axis=1)
        lead = int(np.argmin(good)) if not good.all() else len(good)
        vals = vals[:lead]
        if len(vals) == 0:
            raise InputError("no valid data rows", path=self.path)
        self._sample = {name: vals[:SAMPLE_ROWS, col] * scale for col, name, scale in lay.channels}
        dt_src = None
        if lay.time_col is not None and not lay.index_col:
            t = vals[:, lay.time_col] * lay.time_unit
            if not np.isfinite(t[0]):
                raise InputError("the first time value is not a number", path=self.path)
            self.t0 = float(t[0])
            distinct = np.concatenate([[True], t[1:] != t[:-1]])
            if lay.dt is None:
                lay.dt = _interval(t[distinct])
                dt_src = "time column" if lay.dt else None
            elif lay.dt is not None:
                dt_src = "header"
            if self._iso:
                dec = parse_iso_times(self._first_block_a, self._first_time_fs, self._first_time_fe).frac_digits
            else:
                dec = decimal_resolution(self._first_block_a, self._first_time_fs, self._first_time_fe)
            self._print_res = 10.0 ** -dec * lay.time_unit
            self._pairs = bool((~distinct).any())
        else:
            self.t0 = lay.t0 or 0.0
            self._print_res = 0.0
            self._pairs = False
            if lay.dt is not None:
                dt_src = "header"
        if samplerate is not None:
            if not samplerate > 0:
                raise UsageError(f"--samplerate must be positive, not {samplerate:g}", path=self.path)
            if lay.dt and abs(lay.dt * samplerate - 1) > 1e-3:
                warnings.append(Finding(f"--samplerate {samplerate:g} Hz overrides the file's sample interval "
                                f"{lay.dt:g} s", Cause.NOTE))
            lay.dt = 1.0 / float(samplerate)
            dt_src = "--samplerate"
        if lay.dt is None or not (lay.dt > 0 and math.isfinite(lay.dt)):
            raise InputError("cannot tell the sample interval (no time column with two distinct times, "
                             "no XInc/Increment in the header)", path=self.path,
                             hint="give the scope's sample rate with --samplerate, e.g. --samplerate 1GHz")
        if lay.dt * PLAUSIBLE_MIN_HZ >= 1:
            warnings.append(Finding(f"sample interval {lay.dt:g} s is implausibly long for SPI timing; if the "
                                    f"time unit is wrong, give the sample rate with --samplerate", Cause.TIMEBASE))
        if self._pairs:
            warnings.append(Finding("rows come in pairs with identical time (peak-detect min/max export): "
                            "each pair is one sample interval", Cause.NOTE))
        names = [name for _, name, _ in lay.channels]
        self._col_of = {name: col for col, name, _ in lay.channels}
        self._scale_of = {name: scale for _, name, scale in lay.channels}
        self._thr_spec = threshold
        self._thresholds: dict[str, Threshold] | None = None
        self.info = CaptureInfo(
            path=self.path, format=f"oscilloscope CSV ({lay.dialect})", channels=names, tick_s=lay.dt,
            samplerate_hz=1.0 / lay.dt, n_ticks=None, warnings=warnings,
            time_offset_s=self.t0, resolution_source=dt_src, analog_channels=names)
        if self._iso0 is not None:
            self.info.format = f"oscilloscope CSV ({lay.dialect}), ISO 8601 times from {iso_start(*self._iso0)}"
            self.info.time_offset_s = self._iso0[0] + self._iso0[1] * 1e-9     # seconds since 1970 (UTC)

    # ---------------------------------------------------------------- header
    def _layout(self, header: list[str], data: list[str]) -> _Layout:
        lay = _Layout()
        sep, ncols = self._sep, self.ncols
        rows = [_fields(ln, sep) for ln in header if ln.strip()]
        # key/value pairs: "XInc,2e-10" or "Sample Interval:1e-7" or Rigol's extra columns
        if rows:
            lay.meta["\0first"] = rows[0][0]
        for f in rows:
            if len(f) >= 2 and f[0] and not _is_num(f[0]):
                lay.meta.setdefault(f[0].lower(), f[1])
                if len(f) >= 4 and f[2] and not _is_num(f[2]):
                    lay.meta.setdefault(f[2].lower(), f[3])     # LeCroy: Segments,1,SegmentSize,N
            if len(f) >= 2 and f[0] and not _is_num(f[0]):
                # Siglent writes "Sample Interval,Analog:5.0E-05" / "Vertical Scale,CH1: 0.05"
                m = re.fullmatch(r"[A-Za-z]+\d*\s*:\s*(\S+)", f[1])
                value = m.group(1) if m and _is_num(m.group(1)) else f[1]
                if _is_num(value) and value != "":
                    lay.keys[f[0].lower()] = value
            elif len(f) == 1 and ":" in f[0]:
                k, v = f[0].split(":", 1)
                if _is_num(v):
                    lay.keys[k.strip().lower()] = v.strip()
        names_row = units_row = None
        for i in range(len(rows) - 1, -1, -1):
            f = rows[i]
            cells = f[:ncols]
            if len(f) < ncols or all(c == "" for c in cells):
                continue
            filled = [c for c in f if c != ""]
            if (ncols == 1 and len(filled) != 1) or (len(filled) == 1 and filled[0].lower() == "data"):
                continue            # key/value lines, Infiniium's "Data," marker
            if len(filled) == 2 and not _is_num(filled[0]) and _is_num(filled[1]) \
                    and not _timeish(filled[0]) and ncols > 1:
                continue            # a key/value line of a header block
            if units_row is None and names_row is None and all(c == "" or _unit(c) for c in cells) \
                    and any(_unit(c) for c in cells):
                units_row = i
                continue
            if any(not _is_num(c) for c in cells):
                names_row = i
                break
        names = rows[names_row][:ncols] if names_row is not None else [""] * ncols
        units = rows[units_row][:ncols] if units_row is not None else [""] * ncols
        # Rigol: "X,CH1,..,Start,Increment," / "Sequence,Volt,..,<start>,<inc>"
        if names_row is not None and units_row is not None:
            nr, ur = rows[names_row], rows[units_row]
            for j in range(ncols, min(len(nr), len(ur))):
                if nr[j] and _is_num(ur[j]) and ur[j] != "":
                    lay.keys[nr[j].lower()] = ur[j]
        kinds = [_unit(u) for u in units]
        # time column
        tcol = None
        for j, name in enumerate(names):
            low = name.lower()
            if "trigger" in low and any("time" in n.lower() for k, n in enumerate(names) if k != j):
                continue
            if (kinds[j] and kinds[j][0] in ("time", "index")) or _timeish(name):
                tcol = j
                break
        skip = set()
        for j, name in enumerate(names):
            if "trigger" in name.lower() and j != tcol:
                skip.add(j)
        if tcol is None and ncols >= 2 and names_row is None:
            try:
                col = np.array([[float(x.replace(",", ".")) if x and "∞" not in x else np.nan
                                 for x in _fields(ln, sep)[:ncols]] for ln in data[:64] if ln.strip()])
            except ValueError:      # a cell that is no number: no time column to find here
                col = np.empty((0, 0))
            if col.ndim == 2 and len(col) >= 2 and np.all(np.diff(col[:, 0]) >= 0) and col[-1, 0] > col[0, 0]:
                tcol = 0
        lay.time_col = tcol
        if tcol is not None:
            kind = kinds[tcol]
            if kind and kind[0] == "index":
                lay.index_col = True
            elif kind and kind[0] == "time":
                lay.time_unit = kind[1]
            else:
                lay.time_unit = time_unit_of(names[tcol]) or self._xunits(lay.keys) or 1.0
            if names[tcol].lower() == "x" and "increment" in lay.keys:
                lay.index_col = True
        for key in _INTERVAL_KEYS:
            if key in lay.keys:
                v = _float(lay.keys[key])
                if v and v > 0:
                    lay.dt = v
                    break
        for key in ("sample rate", "sampling rate"):     # Siglent: "Sample Rate,100000000.0"
            v = _float(lay.keys.get(key, ""))
            if lay.dt is None and v and v > 0:
                lay.dt = 1.0 / v
        for key in _ORIGIN_KEYS:
            if key in lay.keys:
                v = _float(lay.keys[key])
                if v is not None:
                    lay.t0 = v
                    break
        if lay.index_col and lay.dt is None:
            raise InputError("the first column counts samples but the header gives no sample interval",
                             path=self.path, hint="give the scope's sample rate with --samplerate")
        # channel columns
        used = set()
        for j in range(ncols):
            if j == tcol or j in skip:
                continue
            name = _clean_name(names[j]) or f"CH{len(lay.channels) + 1}"
            while name in used:
                name = f"{name}_{j}"
            used.add(name)
            kind = kinds[j]
            scale = kind[1] if kind and kind[0] == "volt" else 1.0
            m = re.search(r"[\[(]\s*(mv|v|kv)\s*[\])]|\bin\s+(mv|v)\b", names[j], re.I)
            if m:
                scale = _VOLT_UNIT[(m.group(1) or m.group(2)).lower()]
            lay.channels.append((j, name, scale))
        lay.dialect = _dialect(names, units, lay.keys, lay.meta, self._pairs_hint(data, tcol))
        return lay

    @staticmethod
    def _xunits(keys):
        for k in ("xunits", "horizontal units", "x units"):
            if k in keys:
                return _TIME_UNIT.get(keys[k].lower())
        return None

    def _pairs_hint(self, data, tcol):
        if tcol is None:
            return False
        ts = [_fields(ln, self._sep)[tcol] for ln in data[:8] if ln.strip()]
        return len(ts) >= 2 and ts[0] == ts[1]

    # ----------------------------------------------------------------- rows
    def _read_first(self) -> bytes:
        with open(self.path, "rb") as f:
            f.seek(self._data_offset)
            buf = f.read(CHUNK_BYTES)
        cut = buf.rfind(b"\n") + 1
        return buf[:cut] if cut and len(buf) == CHUNK_BYTES else buf

    def _parse(self, buf: bytes):
        blk = parse_block(buf, self._sep.encode(), self.ncols)
        cols = sorted({c for c, _, _ in self.layout.channels} | (
            {self.layout.time_col} if self.layout.time_col is not None else set()))
        vals = np.full((blk.n, self.ncols), np.nan)
        ok = np.ones((blk.n, self.ncols), bool)
        for c in cols:
            if self._iso and c == self.layout.time_col:
                v, good = self._iso_seconds(blk, c)
            else:
                v, good = parse_floats(blk.a, blk.start[:, c], blk.end[:, c], decimal_comma=self._dec_comma)
            vals[:, c] = v
            ok[:, c] = good
        if self.layout.time_col is not None:
            ok[:, self.layout.time_col] &= np.isfinite(vals[:, self.layout.time_col])
        self._first_block_a = blk.a
        tc = self.layout.time_col if self.layout.time_col is not None else 0
        self._first_time_fs = blk.start[:256, tc]
        self._first_time_fe = blk.end[:256, tc]
        return vals, ok, blk, blk.total > blk.n

    def _iso_seconds(self, blk, c: int) -> tuple[np.ndarray, np.ndarray]:
        """ISO 8601 times of column ``c`` as seconds from data row 1 (exact ns in int64 first;
        a float of those seconds keeps the ns over days) and their validity."""
        iso = parse_iso_times(blk.a, blk.start[:, c], blk.end[:, c])
        if self._iso0 is None:
            if not blk.n or not iso.ok[0]:
                raise InputError("data row 1: " + (bad_time_cell(blk.a, int(blk.start[0, c]), int(blk.end[0, c]),
                                                                 iso=True, form_known=False)
                                                   if blk.n else "no data rows"), path=self.path,
                                 hint=first_time_hint(blk, c) if blk.n else TIME_HINT)
            self._iso0 = (int(iso.sec[0]), int(iso.ns[0]))
        rel, good = iso.since(*self._iso0)
        return np.where(good, rel * 1e-9, np.nan), good

    # ---------------------------------------------------------------- edges
    def edges(self, channels: Sequence[str]) -> Iterator[EdgeBlock]:
        return strict_blocks(self._edges(channels))

    def _edges(self, channels: Sequence[str]) -> Iterator[EdgeBlock]:
        if not channels:
            raise UsageError("no channels requested", path=self.path)
        names = [self.info.channels[self.channel_index(c)] for c in channels]
        if self._thresholds is None:
            self._thresholds, notes = resolve_thresholds(
                self._thr_spec, self.info.channels, lambda ns: {n: self._sample[n] for n in ns}, path=self.path)
            self.info.warnings.extend(notes)
            self.info.thresholds.update({k: (v.level, v.hysteresis) for k, v in self._thresholds.items()})
        thresholds = self._thresholds
        schmitts = [Schmitt(thresholds[n]) for n in names]
        self._taps = [self.volts_tap_for(n) for n in names]
        cols = [self._col_of[n] for n in names]
        scales = [self._scale_of[n] for n in names]
        lay = self.layout
        dt = lay.dt
        assert dt is not None                 # the layout's sample interval is known once opened
        st = _TimeState()
        state = 0
        started = False
        last_tick = -1
        rows_done = 0
        self.end_tick = 0
        with open(self.path, "rb") as f:
            f.seek(self._data_offset)
            for chunk, pos, last in line_chunks(f, self._data_offset, self.path, lambda: last_tick + 1):
                vals, ok, blk, short = self._parse(chunk)
                need = [lay.time_col] if lay.time_col is not None else []
                good = ok[:, cols + need].all(axis=1) if blk.n else np.empty(0, bool)
                n = blk.n
                ticks, valid = self._ticks(vals, n, st, dt, rows_done)
                lim, problem = first_bad_row(ticks, good & valid, last_tick, blk, short, chunk, last)
                hint = None
                tc = lay.time_col
                if problem is not None and lim < n and tc is not None and not ok[lim, tc] and not lay.index_col \
                        and problem[0] != CUT_SHORT:
                    text = bytes(blk.a[blk.start[lim, tc]:blk.end[lim, tc]]).decode("utf-8", "replace")
                    if self._iso or looks_iso(text):
                        problem = (bad_time_cell(blk.a, int(blk.start[lim, tc]), int(blk.end[lim, tc]),
                                                 iso=self._iso, form_known=True), problem[1])
                        hint = TIME_HINT
                ticks = ticks[:lim]
                block, state, started = self._fold(vals[:lim], ticks, cols, scales, schmitts, st, state, started)
                if lim:
                    last_tick = int(ticks[-1])
                if block is not None:
                    yield block
                rows_done += lim
                if problem is not None:
                    self.end_tick = last_tick + 1
                    raise cut_short(problem, pos, rows_done + 1, (last_tick + 1) * dt, self.path, self.end_tick,
                                    hint=hint)
        if not started:
            yield EdgeBlock(np.zeros(1, np.int64), np.zeros(1, np.uint32))
            last_tick = 0
        self.end_tick = last_tick + 1
        if st.off_grid is not None:
            self.info.warnings.append(
                f"the time column leaves the uniform grid at data row {st.off_grid + 1} (a gap or a new "
                f"segment); from there on ticks follow the printed times")

    def _ticks(self, vals, n, st: "_TimeState", dt, rows_done) -> tuple[np.ndarray, np.ndarray]:
        """Tick of every row and whether its time is usable."""
        lay = self.layout
        if n == 0:
            return np.empty(0, np.int64), np.empty(0, bool)
        if lay.time_col is None:
            return np.arange(rows_done, rows_done + n, dtype=np.int64), np.ones(n, bool)
        t = vals[:, lay.time_col]
        with np.errstate(invalid="ignore", over="ignore"):
            if lay.index_col:
                valid = np.abs(t) < MAX_TICK
                return np.rint(np.where(valid, t, 0.0)).astype(np.int64), valid
            t = t * lay.time_unit
            f = (t - self.t0) / dt
            valid = np.abs(f) < MAX_TICK
        tt = np.where(valid, t, self.t0)
        by_time = np.rint(np.where(valid, f, 0.0)).astype(np.int64)
        distinct = np.empty(n, bool)
        distinct[0] = st.last_t is None or tt[0] != st.last_t
        np.not_equal(tt[1:], tt[:-1], out=distinct[1:])
        k = st.k + np.cumsum(distinct)
        if st.grid:
            tol = 0.5 * dt + self._print_res
            off = (np.abs(tt - (self.t0 + k * dt)) > tol) & valid
            if off.any():
                i = int(np.argmax(off))
                st.grid = False
                st.off_grid = rows_done + i
                k[i:] = by_time[i:]
        else:
            k = by_time
        st.k = int(k[-1])
        st.last_t = float(tt[-1])
        return k.astype(np.int64), valid

    def _fold(self, vals, ticks, cols, scales, schmitts, st, state, started):
        n = len(ticks)
        if n == 0:
            return None, state, started
        same = np.zeros(n, bool)
        same[1:] = ticks[1:] == ticks[:-1]
        states = np.zeros(n, np.uint32)
        for j, (c, sc, sm) in enumerate(zip(cols, scales, schmitts)):
            v = vals[:, c] * sc
            if self._pairs and same.any():
                v = _order_pairs(v, same, st, j)
            if self._taps[j] is not None:
                tap_runs(self._taps[j], ticks, v)
            states |= sm(v).astype(np.uint32) << np.uint32(j)
        return edges_from_rows(ticks, states, state, started)


class _TimeState:
    def __init__(self):
        self.k = -1             # grid index of the last distinct time seen
        self.last_t: float | None = None
        self.grid = True
        self.off_grid: int | None = None
        self.prev_vals: dict[int, tuple[float, float]] = {}


def _order_pairs(v: np.ndarray, same: np.ndarray, st: _TimeState, j: int) -> np.ndarray:
    """Inside each pair of rows with one time, put the value nearer the level
    before the pair first, so an edge inside the interval ends on the new level."""
    v = v.copy()
    second = np.flatnonzero(same)                 # index of the second row of a pair
    second = second[(second >= 1) & ~same[np.maximum(second - 1, 0)] | (second == 1)]
    first = second - 1
    before = first - 1
    pa, pb = st.prev_vals.get(j, (np.nan, np.nan))
    ref = np.where(before >= 0, v[np.maximum(before, 0)], pb)
    two_before = np.where(before >= 1, same[np.maximum(before, 0)], False)
    ref = np.where(two_before, (v[np.maximum(before, 0)] + v[np.maximum(before - 1, 0)]) / 2, ref)
    a, b = v[first], v[second]
    swap = np.abs(a - ref) > np.abs(b - ref)
    v[first[swap]], v[second[swap]] = b[swap], a[swap]
    st.prev_vals[j] = (float(v[-2]) if len(v) > 1 else pa, float(v[-1]))
    return v


def _interval(t: np.ndarray) -> float | None:
    """Sample interval from distinct, increasing times: the median spacing, refined
    over the leading run of rows that stay on that grid (gaps do not skew it)."""
    if len(t) < 2:
        return None
    d = np.diff(t)
    if not np.all(np.isfinite(d)):
        return None
    med = float(np.median(d))
    if not med > 0:
        return None
    off = np.flatnonzero(np.abs(d - med) > 0.5 * med)
    j = int(off[0]) if len(off) else len(d)     # rows 0..j are on the grid
    if j < 1:
        return med
    dt = float(t[j] - t[0]) / j
    return dt if dt > 0 and math.isfinite(dt) else med


def _timeish(name: str) -> bool:
    low = name.lower().strip()
    return "time" in low or low in ("x", "x-axis", "t", "s", "in s", "second", "seconds", "sec") or \
        time_unit_of(name) is not None


def _float(text: str):
    try:
        return float(text.replace(",", "."))
    except (ValueError, AttributeError):
        return None


def _clean_name(name: str) -> str:
    name = re.sub(r"\s*[\[(]\s*[a-zµ]*\s*[\])]\s*$", "", name, flags=re.I)
    name = re.sub(r"\s+in\s+[a-zµ]+\s*$", "", name, flags=re.I)
    return name.strip()


# Which instrument wrote the file, from what only its own exports carry (the
# header examples in the manuals and in public exports; docs/formats.md):
_TEK_MODEL = re.compile(r"^(mdo|mso|dpo|tds|tbs|dsa|tps|mso\d|lpd|tek)", re.I)


def _dialect(names, units, keys, meta, pairs) -> str:
    low = [n.lower() for n in names]
    first = low[0] if low else ""
    unit0 = units[0].lower() if units else ""
    if meta.get("\0first", "").upper().startswith("LECROY") or ("segments" in meta and "segmentsize" in meta):
        return "LeCroy"           # LECROY<model>,<serial>,Waveform / Segments,1,SegmentSize,N / Time,Ampl
    if _TEK_MODEL.match(meta.get("model", "")) or ("firmware version" in meta and "waveform type" in meta):
        return "Tektronix"        # Model,MDO4104C / Firmware Version / Waveform Type,ANALOG / ... / TIME,CH1
    if "xinc" in keys or "xorg" in keys or first == "x-axis":
        return "Keysight"         # Infiniium XInc/XOrg block; InfiniiVision x-axis,1,2 / second,Volt
    if "increment" in keys and first == "x":
        return "Rigol"            # DS1000Z/2000/4000: X,CH1,..,Start,Increment / Sequence,Volt,..
    if first == "x" and any(re.match(r"ch ?\d+ \(", n) for n in low[1:]):
        return "Rigol"            # DS1000D/E: X,CH 1 (V),CH 2 (V)
    if any(n.startswith("channel ") for n in low) and any(u.startswith("(") for u in units):
        return "PicoScope"        # Time,Channel A / (us),(V)
    if first.startswith("in ") or pairs:
        return "R&S" + (" min/max" if pairs else "")   # in s,C1 in V
    if meta.get("record length", "").lower().startswith("analog") or "source" in meta or \
            ("sample interval" in keys and unit0 == "second"):
        return "Siglent"          # Record Length,Analog:N / Sample Interval / Second,Value; or Source,CH1
    if first == "" and unit0 == "second":
        return "Rigol"            # DS1000B: ,CH2,CH4 / Second,Volt,Volt
    if any("[s]" in n for n in low):
        return "Saleae"
    return "generic"
