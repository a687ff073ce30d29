"""Change-only logic CSV, as Saleae Logic 2 and DSView export it.

Format facts: Saleae Logic 2 (saleae/gitbook-docs "Binary and CSV Export
Formats - 2025 Update"): header ``Time [s],<channel names>``, one row per time
at which any channel changes (the last sample is always written), ``0``/``1``,
``X`` = no data (channel off or a gap). DSView (libsigrok4DSL output/csv.c):
``;`` comment lines incl. ``; Sample rate: 100 MHz``, header ``Time(s), 0, 1,...``,
rows at changes with ``%0.15g`` seconds. Rows are *not* evenly spaced, which is
what sigrok's own CSV input assumes (sigrok pulseview#129); here every row is
an edge at its own time.

Logic 2's "Use ISO8601 timestamps" option writes absolute times in the time
column instead (``2026-01-30T14:06:09.197352115+00:00``, the same header): the
form of data row 1 is the file's; ISO times count from that row in whole
nanoseconds (``parse_iso_times``), every other row must have the same form.

Resolution (one tick): ``--samplerate`` if given, else the rate in a DSView
comment, else inferred from the timestamps: the decimal resolution they are
printed with, coarsened to the greatest common divisor of the row spacings
(a 50 MHz export printed in ns gives 20 ns ticks).

Parsing is vectorized per chunk of lines (``parse_block``: field boundaries
from separator/newline positions, timestamps converted by numpy's bytes ->
float cast, 0/1/X by byte comparison), shared with the scope CSV reader. Why
not the csv module or numpy.loadtxt: both turn every field into a Python
object (loadtxt also needs a converter for ``X``), which is 10-50x slower
per row; pandas/pyarrow would be heavy new dependencies for this one job.
"""

from __future__ import annotations

import math
import os
import re
from typing import Callable, Iterator, Sequence

import numpy as np

from spigap.limits import PLAUSIBLE_MIN_HZ
from spigap.findings import Cause, Finding
from spigap.errors import CaptureTruncated, InputError, UsageError, printable
from spigap.io.base import CaptureInfo, CaptureReader, EdgeBlock, edges_from_rows, open_errors
from spigap.units import TIME_UNITS

CHUNK_BYTES = 4 << 20
HEAD_BYTES = 64 << 10
MAX_TICK = float(1 << 62)       # a time this many ticks from the start is damage, not data
MAX_FIELD = 48                  # a numeric field longer than this is not a number
TIME_HINT = ("the time column holds seconds (0.000001250) or ISO 8601 times "
             "(2026-01-30T14:06:09.197352115+00:00), one form in a whole file; re-export the capture, "
             "or fix or delete that row")
# data row 1's time is neither form: the file's form is not read (a later row: that row is bad);
# e.g. ScanaStudio's "0 ns", "4.860 530 ms" (a unit, digits grouped by spaces)
TIME_FORM_HINT = ("spigap reads a time column of seconds (0.000001250) or ISO 8601 times "
                  "(2026-01-30T14:06:09.197352115+00:00), not this file's form; export the times in "
                  "seconds, or the capture as VCD or sigrok .sr")
CUT_SHORT = "the last row is incomplete (the file is cut short)"


# ------------------------------------------------------------ shared parsing
class Block:
    """Fields of complete CSV rows: ``start``/``end`` (n_rows, n_cols) byte offsets
    into ``a``; ``bad_row`` = first row with too few fields (or n_rows)."""

    __slots__ = ("a", "start", "end", "n", "total", "bad_offset", "row_offset")

    def __init__(self, a, start, end, n, total, bad_offset, row_offset):
        self.a, self.start, self.end, self.n = a, start, end, n
        self.total, self.bad_offset, self.row_offset = total, bad_offset, row_offset


def parse_block(buf: bytes, sep: bytes, ncols: int) -> Block:
    """Split complete lines (``buf`` ends at a line end) into ``ncols`` fields.

    Empty lines are skipped; extra fields (e.g. a trailing separator) are ignored."""
    a = np.frombuffer(buf, dtype=np.uint8)
    nl = np.flatnonzero(a == 10)
    if len(a) and (len(nl) == 0 or nl[-1] != len(a) - 1):
        nl = np.append(nl, len(a))
    starts = np.concatenate([[0], nl[:-1] + 1]).astype(np.int64)
    ends = nl.astype(np.int64)
    # drop a trailing CR
    if len(ends):
        cr = (ends > starts) & (a[np.maximum(ends - 1, 0)] == 13)
        ends = ends - cr
    # skip blank lines (only whitespace)
    nonblank = ends > starts
    if nonblank.any():
        sel = np.flatnonzero(nonblank)
        # a line of spaces only: check the first non-space char quickly for short lines
        starts, ends = starts[sel], ends[sel]
    else:
        starts, ends = starts[:0], ends[:0]
    n = len(starts)
    seps = np.flatnonzero(a == sep[0]).astype(np.int64)
    first_sep = np.searchsorted(seps, starts)
    count = np.searchsorted(seps, ends) - first_sep
    short = count < ncols - 1
    bad_row = int(np.argmax(short)) if short.any() else n
    bad_offset = int(starts[bad_row]) if bad_row < n else len(a)
    starts, ends, first_sep = starts[:bad_row], ends[:bad_row], first_sep[:bad_row]
    m = len(starts)
    fs = np.empty((m, ncols), np.int64)
    fe = np.empty((m, ncols), np.int64)
    fs[:, 0] = starts
    for k in range(ncols - 1):          # a few columns: one vectorized pass each
        p = seps[first_sep + k] if m else np.empty(0, np.int64)
        fe[:, k] = p
        fs[:, k + 1] = p + 1
    if ncols > 1 and m:
        nxt = first_sep + ncols - 1
        has_more = nxt < len(seps)
        lim = np.where(has_more, seps[np.minimum(nxt, max(len(seps) - 1, 0))], ends)
        fe[:, ncols - 1] = np.minimum(np.where(has_more & (lim < ends), lim, ends), ends)
    elif m:
        fe[:, 0] = ends
    return Block(a, fs, fe, m, n, bad_offset, starts)


MAX_LINE = 64 << 20             # one line longer than this: damage (bounds the carried bytes)


def line_chunks(f, pos: int, path: str, at_tick: Callable[[], int]) -> Iterator[tuple[bytes, int, bool]]:
    """The rest of an open text file from byte ``pos`` on as whole lines, about
    CHUNK_BYTES at a time: (lines, byte offset of the first, last chunk of the
    file). Only the last chunk may lack its final newline. Shared by the CSV
    readers (this one and scope_csv), hand-written because numpy has no
    chunked reader that reports where a row went wrong; a line longer than
    MAX_LINE ends the capture there (``at_tick()``: where the results stop)."""
    carry = b""
    while True:
        data = f.read(CHUNK_BYTES)
        buf = carry + data
        if not buf:
            return
        cut = buf.rfind(b"\n") + 1 if data else len(buf)
        if cut == 0:
            if len(buf) > MAX_LINE:
                raise CaptureTruncated(f"a line longer than 64 MiB at byte {pos}", path=path,
                                       at_tick=at_tick())
            carry = buf
            continue
        yield buf[:cut], pos, not data
        if not data:
            return
        carry = buf[cut:]
        pos += cut


def first_bad_row(ticks: np.ndarray, usable: np.ndarray, last_tick: int, blk: Block, short: bool, chunk: bytes,
                  last: bool) -> tuple[int, tuple[str, int] | None]:
    """(rows to keep, the problem after them or None) in a chunk of rows: the
    first row whose fields are not ``usable`` or whose time goes backwards (from
    ``last_tick``, the previous row's), else a short row (``short``: the parser
    found one at ``blk.bad_offset``). A bad last row without its newline at the
    end of the file is a file cut short. The problem: (what, byte offset in chunk)."""
    n = blk.n
    bad = ~usable
    if n:
        back = np.empty(n, bool)
        back[0] = ticks[0] < last_tick
        np.less(ticks[1:], ticks[:-1], out=back[1:])
        bad |= back & usable
    lim = int(np.argmax(bad)) if bad.any() else n
    problem = None
    if lim < n:
        problem = ("time goes backwards" if usable[lim] else "a malformed row", int(blk.row_offset[lim]))
    elif short:
        problem = ("a row with too few fields", blk.bad_offset)
    if problem is not None and last and not chunk.endswith(b"\n") and \
            chunk.rfind(b"\n", 0, len(chunk) - 1) + 1 == problem[1]:
        problem = (CUT_SHORT, problem[1])
    return lim, problem


def cut_short(problem: tuple[str, int], pos: int, row: int, end_s: float, path: str, end_tick: int,
              hint: str | None = None) -> CaptureTruncated:
    """The error that ends a damaged CSV capture after its good rows (``row``: the
    bad row's 1-based data row number; ``end_s``: where the results stop)."""
    return CaptureTruncated(f"{problem[0]} at byte {pos + problem[1]} (data row {row}); results cover up to "
                            f"{end_s:.6g} s", path=path, at_tick=end_tick,
                            hint=hint or "the file is damaged or was cut short")


def parse_floats(a: np.ndarray, fs: np.ndarray, fe: np.ndarray, *, decimal_comma: bool = False
                 ) -> tuple[np.ndarray, np.ndarray]:
    """float64 values of the fields a[fs:fe] and a validity mask. Empty fields,
    'X' and '-' read NaN (valid); '∞' reads inf; quotes and spaces are ignored."""
    n = len(fs)
    length = fe - fs
    ok = (length >= 0) & (length <= MAX_FIELD)
    out = np.full(n, np.nan)
    if n == 0:
        return out, ok
    w = int(min(max(int(length.max()), 1), MAX_FIELD))
    k = np.arange(w)
    idx = fs[:, None] + k[None, :]
    inside = (k[None, :] < length[:, None]) & ok[:, None]
    mat = np.zeros((n, w), np.uint8)
    mat[inside] = a[idx[inside]]
    mat[mat == ord('"')] = 32
    if decimal_comma:
        mat[mat == ord(",")] = ord(".")
    # special tokens: empty / X / - (no data) and the UTF-8 infinity sign
    stripped = mat.copy()
    stripped[stripped == 32] = 0
    nbytes = np.count_nonzero(stripped, axis=1)
    firstc = stripped.max(axis=1) if w else np.zeros(n, np.uint8)
    single = nbytes == 1
    nodata = (nbytes == 0) | (single & np.isin(firstc, np.frombuffer(b"xX-", np.uint8)))
    mat[nodata] = 0
    inf = _find_infinity(mat)
    if inf.any():
        neg = inf & (mat == ord("-")).any(axis=1)
        mat[inf] = 0
        out[inf] = np.where(neg[inf], -np.inf, np.inf)
    todo = ~nodata & ~inf & ok
    if todo.any():
        view = np.ascontiguousarray(mat[todo]).view(f"S{w}").ravel()
        try:
            out[todo] = view.astype(np.float64)
        except ValueError:
            vals = np.full(len(view), np.nan)
            good = np.ones(len(view), bool)
            for i, b in enumerate(view):        # error path only: find the bad field(s)
                try:
                    vals[i] = float(b)
                except ValueError:
                    good[i] = False
            out[todo] = vals
            sub = np.flatnonzero(todo)
            ok[sub[~good]] = False
    return out, ok


def _find_infinity(mat: np.ndarray) -> np.ndarray:
    if mat.shape[1] < 3:
        return np.zeros(len(mat), bool)
    a, b, c = mat[:, :-2], mat[:, 1:-1], mat[:, 2:]
    return ((a == 0xE2) & (b == 0x88) & (c == 0x9E)).any(axis=1)


def read_head(path: str) -> bytes:
    """The first HEAD_BYTES of a CSV file (every CSV reader's header and first rows);
    a line that does not fit in half of that is an InputError saying so (thousands of
    columns: without this the readers would see no rows and say the wrong thing)."""
    with open_errors(path), open(path, "rb") as f:
        head = f.read(HEAD_BYTES)
    if len(head) == HEAD_BYTES:
        last = len(head) - (head.rfind(b"\n") + 1)
        if last > HEAD_BYTES // 2:
            sep = max(b",;\t", key=lambda c: head.count(bytes([c])))
            raise InputError(f"a line longer than {HEAD_BYTES // 2 >> 10} KiB within the first "
                             f"{HEAD_BYTES >> 10} KiB (more than {head.count(bytes([sep]))} columns): too wide "
                             "for a logic or scope CSV", path=path,
                             hint="export only the channels of the SPI bus")
    return head


def head_lines(head: bytes) -> list[str]:
    """Complete lines of the file head, BOM stripped, decoded leniently."""
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    text = head.decode("utf-8", "replace")
    lines = text.split("\n")
    if len(lines) > 1:
        lines = lines[:-1] if not text.endswith("\n") else lines[:-1]
    return [ln.rstrip("\r") for ln in lines]


def time_unit_of(label: str) -> float | None:
    """'Time [s]' -> 1, 'Time (us)' -> 1e-6, '(ms)' -> 1e-3, 'in s' -> 1."""
    m = re.search(r"[\[(]\s*(s|ms|us|µs|ns|ps)\s*[\])]", label, re.I) or \
        re.search(r"\bin\s+(s|ms|us|µs|ns|ps)\b", label, re.I)
    if m:
        return TIME_UNITS.get(m.group(1).lower()) or TIME_UNITS.get(m.group(1))
    return None


def decimal_resolution(a: np.ndarray, fs: np.ndarray, fe: np.ndarray) -> int:
    """Max number of decimal places the numbers a[fs:fe] are printed with
    (digits after the point minus the exponent), capped at 15."""
    best = 0
    for i in range(min(len(fs), 2048)):      # a sample of the first rows of the head
        text = bytes(a[fs[i]:fe[i]]).decode("ascii", "replace").strip().strip('"')
        m = re.fullmatch(r"[-+]?\d*(?:\.(\d*))?(?:[eE]([-+]?\d+))?", text)
        if not m:
            continue
        frac = len(m.group(1) or "")
        exp = int(m.group(2) or 0)
        best = max(best, frac - exp)
    return min(best, 15)


def infer_tick(times: np.ndarray, decimals: int) -> float:
    """Resolution of timestamps printed with ``decimals`` places: 10^-decimals
    seconds, coarsened to the gcd of the spacings when there are enough rows."""
    fine = 10.0 ** -decimals
    if len(times) < 16:
        return fine
    with np.errstate(over="ignore", invalid="ignore"):
        steps = np.rint((times - times[0]) / fine)
    in_range = np.abs(steps) < 2.0 ** 62
    if not in_range.all():           # a time like 1e300: the rows before it (the reader reports that row)
        steps = steps[:int(np.argmin(in_range))]
        if len(steps) < 16:
            return fine
    ints = steps.astype(np.int64)
    d = np.diff(np.unique(ints))
    d = d[d > 0]
    if len(d) < 8:
        return fine
    g = int(np.gcd.reduce(d))
    return fine * max(g, 1)


# ------------------------------------------------------------ ISO 8601 times
# Saleae Logic 2's "Use ISO8601 timestamps" export option writes the time column as
# absolute times, nanoseconds and the offset included: 2026-01-30T14:06:09.197352115+00:00.
ISO_MIN = 19                    # YYYY-MM-DDTHH:MM:SS
ISO_MAX = 40                    # the longest form accepted (35 with 9 digits and +HH:MM), spaces aside
ISO_FRAC = 9                    # fractional digits kept: nanoseconds, as Logic 2 writes them
_ISO_RE = re.compile(r"\d{4}-\d\d-\d\d[Tt]\d\d:\d\d:\d\d")
_DIGIT = np.zeros(256, bool)
_DIGIT[ord("0"):ord("9") + 1] = True


class IsoTimes:
    """ISO 8601 times of a chunk of rows: whole seconds since 1970 (UTC) and nanoseconds,
    both int64, and a validity mask; ``frac_digits``: the most fractional digits seen."""

    __slots__ = ("sec", "ns", "ok", "frac_digits")

    def __init__(self, sec: np.ndarray, ns: np.ndarray, ok: np.ndarray, frac_digits: int):
        self.sec, self.ns, self.ok, self.frac_digits = sec, ns, ok, frac_digits

    def since(self, sec0: int, ns0: int) -> tuple[np.ndarray, np.ndarray]:
        """Nanoseconds from (sec0, ns0), exact in int64, and the rows where that fits
        (a time 2^62 ns away is damage, not data)."""
        with np.errstate(over="ignore"):
            dsec = self.sec - np.int64(sec0)
        fits = self.ok & (np.abs(dsec) < (1 << 62) // 10**9)
        rel = np.where(fits, dsec, 0) * np.int64(10**9) + (self.ns - np.int64(ns0))
        return rel, fits


def iso_start(sec: int, ns: int) -> str:
    """The time of data row 1, in UTC, for the capture's description."""
    return f"{np.datetime64(sec, 's')}.{ns:09d}Z (UTC)"


def looks_iso(text: str) -> bool:
    """Whether a time cell has the shape of an ISO 8601 date and time (decides the
    file's time form from its first row, and names a mix of forms in errors)."""
    return _ISO_RE.match(text.strip().strip('"').strip()) is not None


def parse_iso_times(a: np.ndarray, fs: np.ndarray, fe: np.ndarray) -> IsoTimes:
    """ISO 8601 times in the fields a[fs:fe], vectorized over a chunk of rows.

    The calendar (leap years, days of each month, ranges of hours, minutes and
    seconds, seconds since 1970) is numpy.datetime64's own ISO 8601 parser, at a
    unit of seconds. Around it, by hand and checked byte by byte: the fixed shape
    ``YYYY-MM-DDTHH:MM:SS``, the fraction read as an integer of nanoseconds (1 to 9
    digits: exact, where a float of the epoch seconds keeps ~0.2 us and Python's
    datetime keeps microseconds), and the offset (``Z``, ``+HH:MM``, ``+HHMM``,
    ``+HH``) subtracted as whole seconds. Not numpy's ``datetime64[ns]`` of the
    whole text: it wraps silently outside the years 1678-2262, and its parsing of
    offsets is deprecated (a warning, then an error)."""
    n = len(fs)
    length = fe - fs
    ok = (length >= ISO_MIN) & (length <= ISO_MAX + 8)
    if n == 0:
        return IsoTimes(np.zeros(0, np.int64), np.zeros(0, np.int64), ok, 0)
    w = ISO_MAX + 8
    k = np.arange(w)
    inside = (k[None, :] < length[:, None]) & ok[:, None]
    raw = np.zeros((n, w), np.uint8)
    raw[inside] = a[(fs[:, None] + k[None, :])[inside]]
    blank = (raw == 32) | (raw == ord('"')) | (raw == 9) | (raw == 0)
    lead = np.argmax(~blank, axis=1)                      # spaces and quotes before the time
    if lead.any():                                        # the time, left-aligned, 0-padded
        src = np.minimum(lead[:, None] + np.arange(ISO_MAX + 1)[None, :], w - 1)
        mat = np.take_along_axis(raw, src, axis=1)
    else:
        mat = raw[:, :ISO_MAX + 1].copy()
    stop = (mat == 32) | (mat == ord('"')) | (mat == 9) | (mat == 0)
    L = np.where(stop.any(axis=1), np.argmax(stop, axis=1), ISO_MAX + 1)
    rest = ((k[None, :] >= (lead + L)[:, None]) & ~blank).any(axis=1)    # more than blanks after it
    ok &= ~rest & (L >= ISO_MIN) & (L <= ISO_MAX)
    mat[np.arange(ISO_MAX + 1)[None, :] >= L[:, None]] = 0
    rows = np.arange(n)

    def at(pos):
        return mat[rows, np.clip(pos, 0, ISO_MAX)]

    def digits(pos):
        return _DIGIT[at(pos)]

    def value(pos, count):
        v = np.zeros(n, np.int64)
        for i in range(count):
            v = v * 10 + (at(pos + i).astype(np.int64) - 48)
        return v

    # the offset at the end: Z, +HH:MM, +HHMM or +HH (after the seconds, so never a date's '-')
    sign = np.zeros(n, np.int64)
    body = L.copy()
    z = (at(L - 1) == ord("Z")) | (at(L - 1) == ord("z"))
    body[z] = L[z] - 1
    off = np.zeros(n, np.int64)
    for tz_len, hh, mm in ((6, 5, 2), (5, 4, 2), (3, 2, None)):
        p = L - tz_len
        s = at(p)
        m = ~z & (sign == 0) & (p >= ISO_MIN) & ((s == ord("+")) | (s == ord("-"))) & digits(L - hh) & \
            digits(L - hh + 1)
        if mm is not None:
            m &= digits(L - mm) & digits(L - mm + 1)
            if tz_len == 6:
                m &= at(L - 3) == ord(":")
        minutes = value(L - hh, 2) * 60 + (value(L - mm, 2) if mm is not None else 0)
        m &= (value(L - hh, 2) <= 23) & ((value(L - mm, 2) <= 59) if mm is not None else True)
        sign[m] = np.where(s[m] == ord("-"), -1, 1)
        off[m] = minutes[m] * 60
        body[m] = p[m]
    # the shape YYYY-MM-DDTHH:MM:SS[.fffffffff]
    for col in (0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18):
        ok &= _DIGIT[mat[:, col]]
    for col, c in ((4, "-"), (7, "-"), (13, ":"), (16, ":")):
        ok &= mat[:, col] == ord(c)
    ok &= np.isin(mat[:, 10], np.frombuffer(b"Tt", np.uint8))
    nfrac = np.where(body > ISO_MIN, body - ISO_MIN - 1, 0)
    has_frac = body > ISO_MIN
    ok &= ~has_frac | (np.isin(mat[:, ISO_MIN], np.frombuffer(b".,", np.uint8)) & (nfrac >= 1) &
                       (nfrac <= ISO_FRAC))
    ns = np.zeros(n, np.int64)
    for i in range(ISO_FRAC):
        pos = ISO_MIN + 1 + i
        d = (i < nfrac) & ok
        ok &= ~(i < nfrac) | _DIGIT[mat[:, min(pos, ISO_MAX)]]
        ns = ns * 10 + np.where(d, mat[:, min(pos, ISO_MAX)].astype(np.int64) - 48, 0)
    sec = np.zeros(n, np.int64)
    if ok.any():
        cal = np.ascontiguousarray(mat[ok, :ISO_MIN])
        cal[:, 10] = ord("T")
        view = cal.view(f"S{ISO_MIN}").ravel()
        try:
            sec[ok] = view.astype("datetime64[s]").astype(np.int64)
        except ValueError:                    # error path only: find the bad time(s) (Feb 30, 25:00 ...)
            idx = np.flatnonzero(ok)
            for row, b in zip(idx, view):
                try:
                    sec[row] = np.datetime64(b.decode("ascii"), "s").astype(np.int64)
                except ValueError:
                    ok[row] = False
    sec -= sign * off
    frac_digits = int(nfrac[ok].max()) if ok.any() else 0
    return IsoTimes(sec, ns, ok, frac_digits)


def first_time_hint(blk: "Block", col: int) -> str:
    """What to do when data row 1's time (column ``col``) is neither form: fix that row when
    the rows after it have a time spigap reads (one damaged row), else (no row of the first
    few has one: ScanaStudio's "0 ns", "4.860 530 ms") export the times in a form it reads."""
    rows = slice(1, min(blk.n, 9))
    if rows.start < rows.stop:
        fs, fe = blk.start[rows, col], blk.end[rows, col]
        secs, ok = parse_floats(blk.a, fs, fe)
        if (ok & np.isfinite(secs)).any() or parse_iso_times(blk.a, fs, fe).ok.any():
            return TIME_HINT
    return TIME_FORM_HINT


def bad_time_cell(a: np.ndarray, fs: int, fe: int, *, iso: bool, form_known: bool) -> str:
    """What is wrong with the time cell a[fs:fe], the cell quoted: the other time form than
    the file's (``iso``; ``form_known``: data row 1 has set it), an ISO time that is no
    time, or no time at all. For the errors of every CSV reader with a time column."""
    text = bytes(a[fs:fe]).decode("utf-8", "replace").strip().strip('"')
    cell = printable(text[:48])
    mix = "(the file mixes two time forms; every row must have the form of data row 1)"
    if looks_iso(text):
        if not iso and form_known:
            return f"an ISO 8601 time {cell!r} among times in seconds {mix}"
        if parse_iso_times(a, np.array([fs]), np.array([fe])).ok[0]:
            return f"the time {cell!r} lies more than 2^62 ticks from data row 1"
        return (f"the ISO 8601 time {cell!r} is not a valid time (a date or time field out of range, more "
                f"than {ISO_FRAC} fractional digits, or a bad offset)")
    if _is_seconds(text):
        if iso:
            return f"a time in seconds {cell!r} among ISO 8601 times {mix}"
        return f"the time {cell!r} is not finite or lies more than 2^62 ticks from data row 1"
    return f"the time cell {cell!r} is neither seconds nor an ISO 8601 time"


# ---------------------------------------------------------------------- sniff
def _split(line: str, sep: str) -> list[str]:
    return [f.strip().strip('"').strip() for f in line.split(sep)]


def _header(lines: list[str]):
    """(index of the header line, separator, samplerate from comments) or None."""
    rate = None
    for i, line in enumerate(lines):
        s = line.strip()
        if not s:
            continue
        if s[0] in ";#" or s.startswith("//"):
            m = re.search(r"sample\s*rate\s*[:=]\s*([0-9.]+\s*[kKmMgG]?)\s*Hz", s, re.I)
            if m:
                from spigap.io.sr import parse_samplerate

                rate = parse_samplerate(m.group(1))
            continue
        for sep in (",", ";", "\t"):
            fields = _split(s, sep)
            if len(fields) >= 2 and "time" in fields[0].lower():
                return i, sep, rate
        return None
    return None


def _is_seconds(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def sniff(head: bytes) -> bool:
    lines = head_lines(head)
    h = _header(lines)
    if h is None:
        return False
    i, sep, _ = h
    ncols = len(_split(lines[i], sep))
    rows = [ln for ln in lines[i + 1:i + 21] if ln.strip()]
    if not rows:
        return False
    bad = 0
    for ln in rows:
        f = _split(ln, sep)
        ok = (_is_seconds(f[0]) or looks_iso(f[0])) and len(f) >= ncols and \
            all(v in ("0", "1", "X", "x") for v in f[1:ncols])
        bad += not ok
    # one damaged row among the first is the reader's to report (with its row number), not a
    # reason to take the file for another format
    return bad == 0 or (bad == 1 and len(rows) >= 4)


# --------------------------------------------------------------------- reader
class ChangeCsvReader(CaptureReader):
    format_name = "csv"

    def __init__(self, path, *, samplerate: float | None = None):
        self.path = str(path)
        head = read_head(self.path)
        self._size = os.path.getsize(self.path)
        lines = head_lines(head)
        h = _header(lines)
        if h is None:
            raise InputError("not a change-only logic CSV (no 'Time,...' header line)", path=self.path,
                             hint="Saleae/DSView exports start with 'Time [s],<channels>'; for scope "
                                  "CSVs use --input-format scope-csv")
        i, self._sep, comment_rate = h
        header = _split(lines[i], self._sep)
        self.ncols = len(header)
        while self.ncols > 2 and header[self.ncols - 1] == "":
            self.ncols -= 1                       # trailing separator
        names = [n or f"D{j}" for j, n in enumerate(header[1:self.ncols])]
        if len(set(names)) != len(names):
            names = [f"{n}#{j}" if names.count(n) > 1 else n for j, n in enumerate(names)]
        unit = time_unit_of(header[0]) or 1.0
        self._unit = unit
        raw = head[3:] if head.startswith(b"\xef\xbb\xbf") else head
        bom = len(head) - len(raw)
        self._data_offset = bom + sum(len(ln.encode("utf-8", "replace")) + 1 for ln in lines[:i + 1])
        # the header lines may have had CRs stripped: find the true offset
        self._data_offset = offset_after_lines(raw, i + 1) + bom
        warnings: list[str] = []
        # first rows: time origin and resolution
        first = raw[self._data_offset - bom:]
        cut = first.rfind(b"\n") + 1
        blk = parse_block(first[:cut] if cut else first, self._sep.encode(), self.ncols)
        if blk.n == 0 and blk.total:
            raise InputError(f"data row 1 has fewer fields than the header's {self.ncols} (a damaged row at byte "
                             f"{self._data_offset})", path=self.path, hint="the file is damaged")
        if blk.n == 0:
            raise InputError("no data rows after the header", path=self.path)
        # the time form of the whole file, from its first row: seconds, or ISO 8601 (Logic 2's
        # "Use ISO8601 timestamps" option), then held to every row
        self._iso0: tuple[int, int] | None = None
        self._form_known = False           # data row 1 read: the file's time form is known
        iso = parse_iso_times(blk.a, blk.start[:1, 0], blk.end[:1, 0])
        if iso.ok[0]:
            iso = parse_iso_times(blk.a, blk.start[:, 0], blk.end[:, 0])
            self._iso0 = (int(iso.sec[0]), int(iso.ns[0]))
            rel, good = iso.since(*self._iso0)
            t_vals = rel * 1e-9
            unit = self._unit = 1.0
        else:
            t_vals, t_ok = parse_floats(blk.a, blk.start[:, 0], blk.end[:, 0])
            good = t_ok & np.isfinite(t_vals)
        if not good[0]:
            raise InputError(f"data row 1: {self._bad_time(blk, 0)}", path=self.path, hint=first_time_hint(blk, 0))
        self.t0 = float(t_vals[0]) * unit
        self._form_known = True
        if samplerate is not None:
            if not samplerate > 0:
                raise UsageError(f"--samplerate must be positive, not {samplerate:g}", path=self.path)
            tick = 1.0 / float(samplerate)
            src = "--samplerate"
        elif comment_rate:
            tick = 1.0 / comment_rate
            src = "comment"
            if comment_rate < PLAUSIBLE_MIN_HZ:
                warnings.append(Finding(f"the file's sample rate comment says {comment_rate:g} Hz, implausible "
                                        f"for an SPI capture; pass the real rate with --samplerate (e.g. "
                                        f"--samplerate 100MHz)", Cause.TIMEBASE))
        else:
            lead = np.flatnonzero(~good)
            k = int(lead[0]) if len(lead) else blk.n
            if self._iso0 is not None:
                dec = parse_iso_times(blk.a, blk.start[:k, 0], blk.end[:k, 0]).frac_digits
            else:
                dec = decimal_resolution(blk.a, blk.start[:k, 0], blk.end[:k, 0])
                dec += int(round(-math.log10(unit)))
            tick = infer_tick(t_vals[:k] * unit, min(dec, 15))
            src = "timestamps"
            if tick >= 1e-3:
                warnings.append(Finding(f"the timestamps resolve only {tick:g} s; if the capture's sample rate is "
                                f"known, pass it with --samplerate (e.g. --samplerate 50MHz)", Cause.SAMPLING))
        self.tick = tick
        fmt, offset = "change-only logic CSV", self.t0
        if self._iso0 is not None:
            fmt = f"change-only logic CSV, ISO 8601 times from {iso_start(*self._iso0)}"
            offset = self._iso0[0] + self._iso0[1] * 1e-9       # the file's time of tick 0: seconds since 1970
        self.info = CaptureInfo(
            path=self.path, format=fmt, channels=names, tick_s=tick,
            samplerate_hz=1.0 / tick if src != "timestamps" else None, n_ticks=None, warnings=warnings,
            resolution_source=src, time_offset_s=offset)

    def edges(self, channels: Sequence[str]) -> Iterator[EdgeBlock]:
        from spigap.io.threshold import strict_blocks

        return strict_blocks(self._edges(channels))

    def _edges(self, channels: Sequence[str]) -> Iterator[EdgeBlock]:
        if not channels:
            raise UsageError("no channels requested", path=self.path)
        cols = [1 + self.channel_index(c) for c in channels]
        sep = self._sep.encode()
        state = 0
        started = False
        last_tick = -1
        row_no = 0
        x_rows = 0
        x_first = None
        self.end_tick = 0
        with open(self.path, "rb") as f:
            f.seek(self._data_offset)
            for chunk, pos, last in line_chunks(f, self._data_offset, self.path, lambda: max(last_tick + 1, 0)):
                blk = parse_block(chunk, sep, self.ncols)
                n = blk.n
                if self._iso0 is not None:
                    rel, ok = parse_iso_times(blk.a, blk.start[:, 0], blk.end[:, 0]).since(*self._iso0)
                    ft = rel / (self.tick * 1e9)        # int64 ns from the first row: exact to 2^53 ns
                else:
                    t, ok = parse_floats(blk.a, blk.start[:, 0], blk.end[:, 0])
                    ok &= np.isfinite(t)
                    with np.errstate(invalid="ignore", over="ignore"):
                        ft = (t * self._unit - self.t0) / self.tick
                with np.errstate(invalid="ignore"):
                    ok &= np.abs(ft) < MAX_TICK
                time_ok = ok.copy()
                lv = np.empty((n, len(cols)), np.int8)
                for j, c in enumerate(cols):
                    ch, good = _bits(blk.a, blk.start[:, c], blk.end[:, c])
                    lv[:, j] = ch
                    ok &= good
                ticks = np.rint(np.where(ok, ft, 0.0)).astype(np.int64)
                lim, problem = first_bad_row(ticks, ok, last_tick, blk, blk.total > n, chunk, last)
                hint = None
                if problem is not None and lim < n and time_ok[lim] and not ok[lim]:
                    problem = (self._bad_level(blk, lim, cols, channels), problem[1])
                elif problem is not None and lim < n and not time_ok[lim] and problem[0] != CUT_SHORT:
                    problem, hint = (self._bad_time(blk, lim), problem[1]), TIME_HINT
                ticks, lv = ticks[:lim], lv[:lim]
                block, state, started, x = self._fold(ticks, lv, state, started)
                x_rows += x[0]
                if x_first is None and x[1] is not None:
                    x_first = x[1]
                if lim:
                    last_tick = int(ticks[-1])
                if block is not None:
                    yield block
                row_no += lim
                if problem is not None:
                    self.end_tick = last_tick + 1
                    raise cut_short(problem, pos, row_no + 1, (last_tick + 1) * self.tick, self.path, self.end_tick,
                                    hint=hint)
        if not started:
            yield EdgeBlock(np.zeros(1, np.int64), np.zeros(1, np.uint32))
            last_tick = 0
        self.end_tick = last_tick + 1
        if x_rows and x_first is not None:
            self.info.warnings.append(
                f"{x_rows} row(s) have no data (X) for a requested channel (first at "
                f"{x_first * self.tick + self.t0:.6g} s); levels are held across them")

    def _bad_time(self, blk, row: int) -> str:
        return bad_time_cell(blk.a, int(blk.start[row, 0]), int(blk.end[row, 0]), iso=self._iso0 is not None,
                             form_known=self._form_known)

    def _bad_level(self, blk, row: int, cols, channels) -> str:
        """What is wrong with a row whose time is good: the first level that is not 0, 1 or X."""
        for c, name in zip(cols, channels):
            text = bytes(blk.a[blk.start[row, c]:blk.end[row, c]]).decode("utf-8", "replace").strip().strip('"')
            if text not in ("0", "1", "X", "x"):
                return f"a level {printable(text[:20])!r} on {printable(name)} (logic levels are 0, 1 or X)"
        return "a malformed row"

    def _fold(self, ticks, lv, state, started):
        """Rows -> EdgeBlock entries (X holds the level; same tick: the last row wins)."""
        n = len(ticks)
        if n == 0:
            return None, state, started, (0, None)
        xmask = (lv < 0).any(axis=1)
        x = (int(xmask.sum()), int(ticks[np.argmax(xmask)]) if xmask.any() else None)
        st = np.zeros(n, np.uint32)
        for j in range(lv.shape[1]):
            col = lv[:, j]
            known = col >= 0
            pos = np.where(known, np.arange(n), -1)
            np.maximum.accumulate(pos, out=pos)
            val = np.where(pos >= 0, col[np.maximum(pos, 0)], (state >> j) & 1).astype(np.uint32)
            st |= val << np.uint32(j)
        block, state, started = edges_from_rows(ticks, st, state, started)
        return block, state, started, x


def _bits(a, fs, fe) -> tuple[np.ndarray, np.ndarray]:
    """0/1/X fields -> int8 (X = -1) and a validity mask; surrounding spaces/quotes allowed."""
    n = len(fs)
    if n == 0:
        return np.empty(0, np.int8), np.empty(0, bool)
    length = fe - fs
    ok = (length >= 1) & (length <= 8)
    w = int(min(max(int(length.max()), 1), 8))
    k = np.arange(w)
    inside = (k[None, :] < length[:, None]) & ok[:, None]
    mat = np.zeros((n, w), np.uint8)
    mat[inside] = a[(fs[:, None] + k[None, :])[inside]]
    mat[(mat == 32) | (mat == ord('"')) | (mat == 9)] = 0
    ok &= np.count_nonzero(mat, axis=1) == 1
    c = mat.max(axis=1)
    out = np.full(n, -1, np.int8)
    out[c == ord("0")] = 0
    out[c == ord("1")] = 1
    ok &= (c == ord("0")) | (c == ord("1")) | (c == ord("X")) | (c == ord("x"))
    return out, ok


def offset_after_lines(raw: bytes, n_lines: int) -> int:
    """The byte offset in ``raw`` after its first ``n_lines`` lines (their ends as the file has
    them, CR LF too): where a CSV's data rows start, for every CSV reader."""
    pos = 0
    for _ in range(n_lines):
        k = raw.find(b"\n", pos)
        if k < 0:
            return len(raw)
        pos = k + 1
    return pos
