"""Value Change Dump (IEEE 1364 VCD) reader: event based, exact edge times.

A tick is one ``$timescale`` unit; the first timestamp of the dump is tick 0.
Nothing is resampled: every value change becomes an edge at its own time.
Exception: libsigrok writes ``$comment Acquisition with 4/4 channels at 50 MHz``
and a power-of-ten ``$timescale`` (10 ns for 50 MHz). The resolution is then
one sample (20 ns), not the time unit: a tick is one sample, and a timestamp
that is not on a sample is reported as damage.

Format facts (IEEE 1364-2001 §18; libsigrok src/input/vcd.c for what tools
write): a header of ``$keyword ... $end`` sections (``$timescale 1ns``,
``$scope module top``, ``$var wire 1 ! clk $end``, ``$var wire 8 # data [7:0]``,
``$upscope``, ``$enddefinitions $end``), then whitespace separated tokens:
``#<time>``, scalar changes ``<0|1|x|z><id>``, vector changes ``b<bits> <id>``,
real/string changes ``r<num> <id>`` / ``s<text> <id>``, and ``$dumpvars``,
``$dumpall``, ``$dumpon``, ``$dumpoff``, ``$end``, ``$comment ... $end``.
Identifiers are any printable characters. Vector values shorter than the
variable are left-extended (with 0, or x/z). ``0``/``l`` read 0, ``1``/``h``
read 1; x, z, u, w, - read 0 (as libsigrok does; a warning says so).

Why a hand-written parser: the maintained Python VCD packages (pyvcd,
vcdvcd, Verilog_VCD) parse token by token in Python and build per-signal lists;
none streams value changes out as numpy arrays. Here the data section is read
in chunks of ``CHUNK_BYTES`` and tokenized with numpy: token boundaries from a
whitespace mask, identifiers hashed with a vectorized FNV-1a over their bytes,
timestamps decoded digit by digit over all time tokens at once. Python loops run
per chunk, per requested channel, per digit position and per ``$comment``
section, never per value change. The header (declarations only) is parsed with
``str.split`` in Python: it is proportional to the number of variables, not to
the capture length.
"""

from __future__ import annotations

import re
from typing import Iterator, Sequence

import numpy as np

from spigap.limits import PLAUSIBLE_MIN_HZ
from spigap.findings import Cause, Finding
from spigap.errors import CaptureTruncated, InputError, UsageError
from spigap.io.base import CaptureInfo, CaptureReader, EdgeBlock, open_errors
from spigap.io.threshold import strict_blocks
from spigap.units import TIME_UNITS, fmt_freq, fmt_time

CHUNK_BYTES = 2 << 20
HEADER_LIMIT = 32 << 20         # declarations beyond this: refused (parsed in memory, ~30x its size)
MAX_TOKEN = 64 << 20            # one token longer than this: damaged
HASH_BYTES = 32                 # identifiers are hashed over their first 32 bytes (+ length);
                                # a hash match is then verified byte for byte (_same_ident)

_LOGIC_TYPES = {"wire", "reg", "logic", "bit", "integer", "tri", "tri0", "tri1", "triand", "trior",
                "trireg", "wand", "wor", "supply0", "supply1", "uwire", "parameter", "int",
                "shortint", "longint", "byte", "time", "enum"}
_SKIP_TYPES = {"real", "realtime", "shortreal", "string", "event"}
_SCALAR_CHARS = b"01xXzZuUwWlLhH-"
_HIGH_CHARS = b"1hH"
_PAIR_CHARS = b"bBrRsS"


def _lut(chars: bytes) -> np.ndarray:
    """Byte -> bool lookup table (indexing it is much faster than np.isin)."""
    t = np.zeros(256, bool)
    t[np.frombuffer(chars, np.uint8)] = True
    return t


_LUT_PAIR, _LUT_SCALAR, _LUT_VECTOR = _lut(_PAIR_CHARS), _lut(_SCALAR_CHARS), _lut(b"bB")
_LUT_HIGH, _LUT_KNOWN = _lut(_HIGH_CHARS), _lut(b"01lLhH")
_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_M64 = (1 << 64) - 1


def id_hash(ident: bytes) -> int:
    """The identifier hash ``_hash_tokens`` computes, for one identifier."""
    h = _FNV_OFFSET
    for b in ident[:HASH_BYTES]:
        h = ((h ^ b) * _FNV_PRIME) & _M64
    return (h ^ (len(ident) * 0x9E3779B97F4A7C15)) & _M64


def _hash_tokens(a: np.ndarray, start: np.ndarray, length: np.ndarray) -> np.ndarray:
    """Vectorized ``id_hash`` of the tokens a[start:start+length]."""
    h = np.full(len(start), _FNV_OFFSET, dtype=np.uint64)
    if len(start) == 0:
        return h
    maxlen = int(min(length.max(), HASH_BYTES))
    sel = np.arange(len(start))
    with np.errstate(over="ignore"):
        for k in range(maxlen):
            sel = sel[length[sel] > k]
            if len(sel) == 0:
                break
            h[sel] = (h[sel] ^ a[start[sel] + k].astype(np.uint64)) * np.uint64(_FNV_PRIME)
        h ^= length.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    return h


def _same_ident(a: np.ndarray, start: np.ndarray, length: np.ndarray, ident: bytes) -> np.ndarray:
    """Which tokens a[start:start+length] are exactly ``ident``: the check behind
    every hash match (two identifiers may share a hash, e.g. a 32-byte prefix)."""
    ok = length == len(ident)
    if not ok.any() or len(ident) == 0:
        return ok
    want = np.frombuffer(ident, np.uint8)
    sel = np.flatnonzero(ok)
    # tokens of one chunk, so len(sel) * len(ident) <= CHUNK_BYTES
    got = a[start[sel, None] + np.arange(len(ident))]
    ok[sel] = (got == want).all(axis=1)
    return ok


def _token_bounds(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(start, end) byte offsets of the whitespace-separated tokens of ``a``."""
    nonws = a > 32
    d = np.diff(nonws.view(np.int8), prepend=np.int8(0), append=np.int8(0))
    return np.flatnonzero(d == 1), np.flatnonzero(d == -1)


def _values_and_ids(first: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which tokens are vector/real/string values and which their identifiers, from each
    token's first byte: such a value takes the next token as its identifier, so a run of
    b/r/s-like tokens alternates value, identifier, value ..."""
    n = len(first)
    pair = _LUT_PAIR[first]
    run_start = np.empty(n, bool)
    run_start[0] = True
    run_start[1:] = ~pair[:-1]
    # position inside the run of pair-like tokens
    last_start = np.maximum.accumulate(np.where(pair & run_start, np.arange(n), -1))
    rank = np.arange(n) - last_start
    is_value = pair & (rank % 2 == 0)
    is_id = np.zeros(n, bool)
    is_id[1:] = is_value[:-1]
    return is_value, is_id


class _Var:
    __slots__ = ("kind", "size", "ident", "ref", "msb", "lsb", "scope", "selected")

    def __init__(self, kind, size, ident, ref, msb, lsb, scope, selected=False):
        self.selected = selected    # declared with a bit select ([3] or [7:0])
        self.kind, self.size, self.ident, self.ref = kind, size, ident, ref
        self.msb, self.lsb, self.scope = msb, lsb, scope


class VcdReader(CaptureReader):
    format_name = "vcd"

    def __init__(self, path, *, samplerate: float | None = None, stream=None):
        self.path = str(path)
        with open_errors(self.path):
            # stream: a pipe (analyzer/spigap/io/stdin.py), read once as it arrives
            self._f = stream if stream is not None else open(self.path, "rb")
        warnings: list[str] = []
        header, self._data_offset = self._read_header()
        timescale, vars_, rate = self._parse_header(header, warnings)
        channels, self._chan = self._channels(vars_)
        if not channels:
            raise InputError("the VCD declares no logic variables ($var wire/reg/logic ...)", path=self.path)
        self._timescale_s = timescale
        self._step = 1                  # VCD time units per tick (one sample, see the module doc)
        if samplerate is not None:
            if not samplerate > 0:
                raise UsageError(f"--samplerate must be positive, not {samplerate:g}", path=self.path)
            tick_s = 1.0 / float(samplerate)
            warnings.append(Finding(f"--samplerate {fmt_freq(samplerate)} overrides the $timescale: one VCD time "
                            f"unit is taken as {fmt_time(tick_s)}", Cause.NOTE))
        elif timescale is None:
            tick_s = 1e-9
            warnings.append(Finding("the VCD has no $timescale; assuming 1 ns per time unit "
                            "(if that is wrong, give the time unit's rate with --samplerate, e.g. 1GHz)", Cause.TIMEBASE))
        else:
            tick_s = timescale
            step = round(1.0 / (rate * timescale)) if rate else 0
            if step > 1 and abs(step * timescale * rate - 1) < 1e-6:
                # libsigrok's export: one sample is `step` time units
                self._step, tick_s = step, timescale * step
            if tick_s * PLAUSIBLE_MIN_HZ >= 1:
                warnings.append(Finding(f"$timescale {fmt_time(tick_s)} is implausibly coarse for SPI timing; if the "
                                        f"dump's time unit is really finer, give its rate with --samplerate "
                                        f"(e.g. --samplerate 1GHz for 1 ns)", Cause.TIMEBASE))
        self.info = CaptureInfo(
            path=self.path, format="VCD", channels=channels, tick_s=tick_s, channel_keys=self._aliases,
            samplerate_hz=1.0 / tick_s if self._step > 1 else None, n_ticks=None, warnings=warnings,
            resolution_source="--samplerate" if samplerate is not None else
            ("comment" if self._step > 1 else "$timescale" if timescale is not None else "assumed 1 ns"))

    # --------------------------------------------------------------- header
    def _read_header(self) -> tuple[str, int]:
        buf = b""
        pat = re.compile(rb"\$enddefinitions\s+\$end")
        while True:
            more = self._f.read(1 << 20)
            if not more:
                break
            start = max(0, len(buf) - 32)
            buf += more
            m = pat.search(buf, start if start else 0)
            if m:
                return buf[:m.start()].decode("latin-1"), m.end()
            if len(buf) > HEADER_LIMIT:
                if buf.lstrip().startswith(b"$"):
                    raise InputError(f"the VCD header has no '$enddefinitions $end' within its first "
                                     f"{HEADER_LIMIT >> 20} MiB: too many declarations, or not a VCD",
                                     path=self.path, hint="dump only the SPI signals")
                break
        if not buf.lstrip().startswith(b"$"):
            raise InputError("not a VCD file (it does not start with a $keyword section)", path=self.path,
                             hint="pick the format with --input-format")
        raise InputError("the VCD header is incomplete (no '$enddefinitions $end'); the file is cut "
                         "inside its declarations", path=self.path)

    def _parse_header(self, text: str, warnings: list[str]):
        if text.startswith("\ufeff") or text.startswith("ï»¿"):
            text = text[3:] if text.startswith("ï»¿") else text[1:]
        tokens = text.split()
        timescale = None
        rate = None
        scope: list[str] = []
        vars_: list[_Var] = []
        i = 0
        n = len(tokens)

        def section(i):
            j = i + 1
            while j < n and tokens[j] != "$end":
                j += 1
            return tokens[i + 1:j], j + 1

        while i < n:
            tok = tokens[i]
            if not tok.startswith("$"):
                raise InputError(f"unexpected text {tok[:40]!r} in the VCD header", path=self.path)
            body, nxt = section(i)
            if nxt > n and tok not in ("$end",):
                raise InputError(f"section {tok} has no $end in the VCD header", path=self.path)
            if tok == "$timescale":
                timescale = self._timescale("".join(body))
            elif tok == "$scope":
                scope.append(body[1] if len(body) > 1 else (body[0] if body else "?"))
            elif tok == "$upscope":
                if scope:
                    scope.pop()
            elif tok == "$var":
                v = self._var(body, scope)
                if v is not None:
                    vars_.append(v)
            elif tok == "$comment":
                m = _SIGROK_RATE.search(" ".join(body))
                if m:
                    rate = float(m.group(1)) * {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9}[m.group(2)]
            i = nxt
        return timescale, vars_, rate

    def _timescale(self, text: str) -> float:
        m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(s|ms|us|µs|ns|ps|fs)", text.strip())
        if not m or float(m.group(1)) <= 0:
            raise InputError(f"bad $timescale {text!r} (expected e.g. '1ns', '10 ps')", path=self.path)
        return float(m.group(1)) * TIME_UNITS[m.group(2)]

    def _var(self, body: list[str], scope: list[str]):
        if len(body) < 4:
            raise InputError(f"bad $var declaration {' '.join(body)[:60]!r}", path=self.path)
        kind, size_text, ident, ref = body[0], body[1], body[2], body[3]
        rest = "".join(body[4:])
        if kind in _SKIP_TYPES:
            return None
        if kind not in _LOGIC_TYPES:
            return None
        try:
            size = int(size_text)
        except ValueError:
            raise InputError(f"bad $var size {size_text!r} for {ref}", path=self.path) from None
        if not 1 <= size <= 1 << 16:
            raise InputError(f"$var {ref} has an implausible width {size}", path=self.path)
        sel = rest
        if "[" in ref and not rest:
            k = ref.index("[")
            ref, sel = ref[:k], ref[k:]
        msb, lsb = size - 1, 0
        m = re.fullmatch(r"\[\s*(-?\d+)\s*(?::\s*(-?\d+)\s*)?\]", sel) if sel else None
        if m:
            if m.group(2) is not None:
                msb, lsb = int(m.group(1)), int(m.group(2))
            else:
                msb = lsb = int(m.group(1))
        if abs(msb - lsb) + 1 != size:
            msb, lsb = size - 1, 0   # range does not match the width: number the bits 0..size-1
        return _Var(kind, size, ident.encode("latin-1"), ref, msb, lsb, ".".join(scope), selected=bool(m))

    def _channels(self, vars_: list[_Var]):
        """Channel names in declaration order and, per name, (var, bit offset from the MSB).

        A simulator dumps one net in every scope it passes through under one identifier code
        (tb.sclk, tb.u_master.sclk_o, tb.u_slave.sclk): that is one signal, so one channel,
        named by its declaration nearest the top (the first of those); a name two signals share is
        qualified by its scope (tb.u_master.clk beside tb.clk only if they are two nets)."""
        # one entry per (identifier, bit): the declaration nearest the top names it
        first: dict[tuple[bytes, int], tuple[str, _Var, int, int]] = {}
        order: list[tuple[bytes, int]] = []
        for v in vars_:
            if v.size == 1:
                bits = [(f"{v.ref}[{v.msb}]" if v.selected else v.ref, 0)]
            else:
                step = -1 if v.msb >= v.lsb else 1
                bits = [(f"{v.ref}[{bit}]", k) for k, bit in enumerate(range(v.msb, v.lsb + step, step))]
            depth = v.scope.count(".") + 1 if v.scope else 0
            for name, k in bits:
                key = (v.ident, k if v.size > 1 else 0)
                if key not in first:
                    order.append(key)
                    first[key] = (name, v, k, depth)
                elif depth < first[key][3]:
                    first[key] = (name, v, k, depth)
        counts: dict[str, int] = {}
        for key in order:
            counts[first[key][0]] = counts.get(first[key][0], 0) + 1
        names: list[str] = []
        chan: dict = {}
        canonical: dict[tuple[bytes, int], str] = {}
        for key in order:
            name, v, k, _ = first[key]
            full = f"{v.scope}.{name}" if counts[name] > 1 and v.scope else name
            if full in chan:
                n = 2
                while f"{full}#{n}" in chan:
                    n += 1
                full = f"{full}#{n}"
            chan[full] = (v, k)
            names.append(full)
            canonical[key] = full
        # every other declaration of a signal names it too (--clk tb.u_slave.sclk means sclk)
        self._aliases: dict[str, str] = {}
        for v in vars_:
            step = -1 if v.msb >= v.lsb else 1
            for k, bit in enumerate(range(v.msb, v.lsb + step, step)):
                name = f"{v.ref}[{bit}]" if v.size > 1 or v.selected else v.ref
                target = canonical[(v.ident, k if v.size > 1 else 0)]
                for alias in (name, f"{v.scope}.{name}" if v.scope else name):
                    if alias not in chan:
                        self._aliases.setdefault(alias, target)
        return names, chan

    # ---------------------------------------------------------------- edges
    def edges(self, channels: Sequence[str]) -> Iterator[EdgeBlock]:
        if not channels:
            raise UsageError("no channels requested", path=self.path)
        want = []
        for c in channels:
            v, k = self._chan[self.info.channels[self.channel_index(c)]]
            want.append((id_hash(v.ident), v.ident, v.size, k))
        p = _Parser(self, want)
        self.end_tick = 0
        # one VCD time may continue into the next chunk: merge entries across blocks
        blocks = strict_blocks(p.run())
        if self._step == 1:
            yield from blocks
            return
        step = self._step
        try:
            for b in blocks:
                if np.any(b.ticks % step):
                    t = int(b.ticks[np.flatnonzero(b.ticks % step)[0]])
                    raise CaptureTruncated(
                        f"time {t} (after the first timestamp) is not on a sample of the "
                        f"{1 / (step * self._timescale_s) / 1e6:g} MHz acquisition the header names",
                        path=self.path, at_tick=t // step,
                        hint="give the true rate of one time unit with --samplerate to read every time as is")
                yield EdgeBlock(b.ticks // step, b.states)
        finally:
            self.end_tick = -(-self.end_tick // step)

    def close(self) -> None:
        f = getattr(self, "_f", None)
        if f is not None:
            f.close()
            self._f = None


# libsigrok's VCD output: "Acquisition with 4/4 channels at 50 MHz"
_SIGROK_RATE = re.compile(r"Acquisition with \d+/\d+ channels at ([0-9]*\.?[0-9]+)\s*([kMG]?)Hz")


class _Damage(Exception):
    """Damage at file offset ``byte``; ``block`` = edges decoded before it."""

    def __init__(self, problem: str, byte: int, block: EdgeBlock | None = None):
        super().__init__(problem)
        self.problem, self.byte, self.block = problem, byte, block


class _Parser:
    """Streaming tokenizer/decoder of the data section for a fixed channel request."""

    def __init__(self, reader: VcdReader, want):
        self.r = reader
        self.want = want
        self.n_ch = len(want)
        self.state = 0               # current levels (bit j = requested channel j)
        self.time: int | None = None  # current VCD time
        self.offset: int | None = None  # first timestamp = tick 0
        self.in_section = False      # inside $comment ... $end (or an unknown section)
        self.started = False          # tick 0 emitted
        self.changes_after_time = True  # a value change follows the last timestamp
        self.xz = 0

    def run(self) -> Iterator[EdgeBlock]:
        f = self.r._f
        f.seek(self.r._data_offset)
        pos = self.r._data_offset    # file offset of buf[0]
        carry = b""
        eof = False
        try:
            while not eof:
                data = f.read(CHUNK_BYTES)
                eof = not data
                buf = carry + data
                if not buf:
                    break
                cut = max(buf.rfind(b" "), buf.rfind(b"\n"), buf.rfind(b"\t"), buf.rfind(b"\r")) + 1
                if eof:
                    used, block = self._chunk(buf[:cut], pos, final=True) if cut else (0, None)
                    if block is not None:
                        yield block
                    if buf[used:].strip():
                        raise _Damage("the file ends in the middle of a token (cut short?)", pos + used)
                    break
                if cut == 0:
                    if len(buf) > MAX_TOKEN:
                        raise _Damage("a token longer than 64 MiB (not a VCD data section)", pos)
                    carry = buf
                    continue
                used, block = self._chunk(buf[:cut], pos, final=False)
                if block is not None:
                    yield block
                carry = buf[used:]
                pos += used
        except _Damage as d:
            if d.block is not None:
                yield d.block
            line = self._line_of(d.byte)
            self.r.end_tick = self._end_tick()
            tail = self._flush_initial()
            if tail is not None:
                yield tail
            raise CaptureTruncated(
                f"{d.problem} at line {line} (byte {d.byte}); results cover the dump up to "
                f"time {self.time if self.time is not None else 0}", path=self.r.path,
                at_tick=self.r.end_tick, hint="the file is damaged or cut short") from None
        tail = self._flush_initial()
        if tail is not None:
            yield tail
        if self.xz:
            self.r.info.warnings.append(f"{self.xz} value change(s) of the requested channels are x/z/u "
                                        "(unknown); they read as 0")
        self.r.end_tick = self._end_tick()
        if self.in_section:
            raise CaptureTruncated("the VCD ends inside a $comment/$section (no $end): the file is cut",
                                   path=self.r.path, at_tick=self.r.end_tick)

    def _end_tick(self) -> int:
        """One past the last tick of the dump. A final timestamp with no value change
        after it marks the end itself (sigrok's VCD output ends with ``#<n samples>``)."""
        if self.offset is None or self.time is None:
            return 1 if self.started else 0
        return max(1, self.time - self.offset + (1 if self.changes_after_time else 0))

    def _flush_initial(self):
        """A dump whose data section never had a timestamp: emit the initial levels."""
        if self.started:
            return None
        self.started = True
        if self.offset is None:
            self.offset = self.time = 0
        return EdgeBlock(np.zeros(1, np.int64), np.array([self.state], np.uint32))

    def _line_of(self, byte: int) -> int | str:
        f = self.r._f
        if hasattr(f, "line_of"):          # a pipe: only the last reads are still known
            return f.line_of(byte) or "?"
        f.seek(0)
        remaining = byte
        lines = 1
        while remaining > 0:
            data = f.read(min(remaining, 1 << 20))
            if not data:
                break
            lines += data.count(b"\n")
            remaining -= len(data)
        return lines

    # ----------------------------------------------------------- one chunk
    def _chunk(self, buf: bytes, pos: int, final: bool):
        """Decode whole tokens of ``buf``; returns (bytes consumed, EdgeBlock or None).

        In steps, each vectorized over the chunk's tokens: find the tokens, drop the
        keywords and skipped sections, tell values, identifiers, timestamps and scalar
        changes apart, check the timestamps, pick the requested channels' changes."""
        a = np.frombuffer(buf, dtype=np.uint8)
        starts, ends = _token_bounds(a)
        if len(starts) == 0:
            return len(buf), None
        alive = self._skip_sections(buf, starts, ends)
        if alive is None:
            return len(buf), None
        starts, ends = starts[alive], ends[alive]
        length, first = ends - starts, a[starts]
        n = len(starts)
        if n == 0:
            return len(buf), None
        is_value, is_id = _values_and_ids(first)
        used = len(buf)
        if n and is_value[-1] and not final:
            # the identifier of the last vector value is in the next chunk
            used = int(starts[-1])
            starts, ends, length, first = starts[:-1], ends[:-1], length[:-1], first[:-1]
            is_value, is_id = is_value[:-1], is_id[:-1]
            n -= 1
        if n and is_value[-1] and final:
            raise _Damage("a vector value without its identifier (the file is cut)", pos + int(starts[-1]))
        if n == 0:
            return used, None

        is_time = (first == ord("#")) & ~is_id
        is_scalar = _LUT_SCALAR[first] & ~is_id & ~is_value
        bad = ~(is_time | is_scalar | is_value | is_id) | (is_scalar & (length < 2))
        t_idx, times, lim, problem = self._timestamps(a, buf, starts, ends, length, first, is_time, bad)

        changes = np.flatnonzero((is_scalar | is_value)[:lim])
        if len(t_idx):
            self.changes_after_time = bool(len(changes)) and bool(changes[-1] > t_idx[-1])
        elif len(changes):
            self.changes_after_time = True
        rec_tok, rec_ch, rec_lv = self._requested(a, starts, length, first, is_scalar[:lim],
                                                  is_value[:lim] & _LUT_VECTOR[first[:lim]])
        block = self._records(rec_tok, rec_ch, rec_lv, t_idx, times)
        if problem is not None:
            raise _Damage(problem, pos + int(starts[lim]), block)
        return used, block

    def _skip_sections(self, buf: bytes, starts: np.ndarray, ends: np.ndarray) -> np.ndarray | None:
        """Which tokens are data: not keywords ($dumpvars ... $end markers) nor inside a
        skipped section ($comment ... $end, which may run across chunks). None: the whole
        chunk is inside a section. Keywords are rare, so a loop over them is fine."""
        first = np.frombuffer(buf, dtype=np.uint8)[starts]
        alive = np.ones(len(starts), bool)
        kw = np.flatnonzero(first == ord("$"))
        end_tok = np.zeros(len(starts), bool)
        texts = [buf[starts[i]:ends[i]] for i in kw]
        if len(kw):
            is_end = np.array([t == b"$end" for t in texts], bool)
            end_tok[kw[is_end]] = True
        i0 = 0
        if self.in_section:
            e = np.flatnonzero(end_tok)
            if len(e) == 0:
                return None
            alive[:e[0] + 1] = False
            i0 = e[0] + 1
            self.in_section = False
        end_idx = np.flatnonzero(end_tok)
        for i, t in zip(kw, texts):
            if i < i0 or not alive[i]:
                continue
            if len(t) == 1:
                continue                  # a lone '$' is an identifier
            word = t[1:]
            if word in (b"dumpvars", b"dumpall", b"dumpon", b"dumpoff", b"end"):
                alive[i] = False
                continue
            if not word.isalpha():
                continue                  # '$x' style identifier after a vector value
            # unknown or comment section: skip to its $end
            k = np.searchsorted(end_idx, i, side="right")
            if k == len(end_idx):
                alive[i:] = False
                self.in_section = True
                break
            alive[i:end_idx[k] + 1] = False
        return alive

    def _timestamps(self, a, buf, starts, ends, length, first, is_time, bad):
        """(token indices of the timestamps, their values, the index of the first bad token
        or the token count, the problem there or None): '#' and 1..18 decimal digits,
        never decreasing."""
        n = len(starts)
        t_idx = np.flatnonzero(is_time)
        times, t_ok = self._times(a, starts[t_idx] + 1, length[t_idx] - 1)
        bad[t_idx[~t_ok]] = True
        problem = None
        lim = int(np.argmax(bad)) if bad.any() else n
        if lim < n:
            shown = bytes(buf[starts[lim]:min(ends[lim], starts[lim] + 24)])
            problem = ("a bad timestamp " if first[lim] == ord("#") else "an unexpected token ") + repr(shown)
        keep_t = t_idx < lim
        t_idx, times = t_idx[keep_t], times[keep_t]
        if len(times):
            before = self.time if self.time is not None else int(times[0])
            dec = np.flatnonzero(np.diff(np.concatenate([[before], times])) < 0)
            if len(dec):
                j = int(dec[0])
                lim = int(t_idx[j])
                prior = before if j == 0 else int(times[j - 1])
                problem = f"timestamps go backwards (#{int(times[j])} after #{prior})"
                t_idx, times = t_idx[:j], times[:j]
        return t_idx, times, lim, problem

    def _requested(self, a, starts, length, first, is_scalar, is_vector):
        """Records of the requested channels' changes: (token indices, channel, level)
        lists. Identifiers are matched by hash first (scalar ids follow their value char,
        vector ids are the next token), then exactly."""
        rec_tok, rec_ch, rec_lv = [], [], []
        sc = np.flatnonzero(is_scalar)
        vv = np.flatnonzero(is_vector)
        h_sc = _hash_tokens(a, starts[sc] + 1, length[sc] - 1) if len(sc) else np.empty(0, np.uint64)
        h_vv = _hash_tokens(a, starts[vv + 1], length[vv + 1]) if len(vv) else np.empty(0, np.uint64)
        for j, (h, ident, size, k) in enumerate(self.want):
            h = np.uint64(h)
            for toks, hh, scalar in ((sc, h_sc, True), (vv, h_vv, False)):
                m = toks[hh == h]
                if len(m) == 0:
                    continue
                if scalar:      # the hash is a fast filter: keep exact matches only
                    m = m[_same_ident(a, starts[m] + 1, length[m] - 1, ident)]
                else:
                    m = m[_same_ident(a, starts[m + 1], length[m + 1], ident)]
                if len(m) == 0:
                    continue
                if scalar:                  # scalar: value is one char at the token start
                    vbeg = starts[m]
                    vlen_ = np.ones(len(m), np.int64)
                else:
                    vbeg = starts[m] + 1
                    vlen_ = length[m] - 1
                p = k - size + vlen_
                ok = p >= 0
                ch = np.full(len(m), ord("0"), np.uint8)
                ch[ok] = a[vbeg[ok] + p[ok]]
                lv = _LUT_HIGH[ch]
                self.xz += int(np.count_nonzero(~_LUT_KNOWN[ch]))
                rec_tok.append(m)
                rec_ch.append(np.full(len(m), j, np.int64))
                rec_lv.append(lv)
        return rec_tok, rec_ch, rec_lv

    @staticmethod
    def _times(a, start, length):
        """Decimal values of the digit strings a[start:start+length] and a validity mask:
        one vectorized pass per digit position over the tokens that long."""
        val = np.zeros(len(start), np.int64)
        ok = (length > 0) & (length <= 18)
        if len(start) == 0:
            return val, ok
        sel = np.flatnonzero(ok)
        for k in range(int(length[sel].max()) if len(sel) else 0):
            sel = sel[length[sel] > k]
            dig = a[start[sel] + k].astype(np.int64) - 48
            good = (dig >= 0) & (dig <= 9)
            ok[sel[~good]] = False
            val[sel] = val[sel] * 10 + np.where(good, dig, 0)
        return val, ok

    def _records(self, rec_tok, rec_ch, rec_lv, t_idx, times):
        """Fold the value changes of this chunk into EdgeBlock entries."""
        if self.offset is None and len(times):
            self.offset = int(times[0])
        if rec_tok:
            tok = np.concatenate(rec_tok)
            order = np.argsort(tok, kind="stable")
            tok = tok[order]
            ch = np.concatenate(rec_ch)[order]
            lv = np.concatenate(rec_lv)[order]
        else:
            tok = np.empty(0, np.int64)
            ch = np.empty(0, np.int64)
            lv = np.empty(0, bool)
        # time of every record: the last timestamp token before it (or the carried time)
        k = np.searchsorted(t_idx, tok, side="right") - 1
        carried = self.time if self.time is not None else (self.offset if self.offset is not None else 0)
        rt = np.where(k >= 0, times[np.maximum(k, 0)] if len(times) else carried, carried).astype(np.int64)
        if len(times):
            self.time = int(times[-1])
        if self.offset is None:
            # no timestamp seen yet: these are initial values, folded into the state
            for j in range(self.n_ch):
                m = ch == j
                if m.any():
                    self.state = (self.state & ~(1 << j)) | (int(lv[m][-1]) << j)
            return None
        # state after each record: per channel forward fill
        n = len(tok)
        state = np.full(n, self.state, np.uint32)
        for j in range(self.n_ch):
            m = np.flatnonzero(ch == j)
            if len(m) == 0:
                continue
            pos = np.full(n, -1, np.int64)
            pos[m] = m
            np.maximum.accumulate(pos, out=pos)
            bit = np.uint32(1 << j)
            val = np.where(pos >= 0, lv[np.maximum(pos, 0)], (self.state >> j) & 1).astype(np.uint32)
            state = (state & ~bit) | (val << np.uint32(j))
        ticks = rt - self.offset
        if n:
            last = np.empty(n, bool)
            last[-1] = True
            np.not_equal(ticks[1:], ticks[:-1], out=last[:-1])
            ticks, state = ticks[last], state[last]
        out_t, out_s = [], []
        if not self.started:
            self.started = True
            init = self.state
            if len(ticks) and ticks[0] == 0:
                init = int(state[0])
                ticks, state = ticks[1:], state[1:]
            out_t.append(np.zeros(1, np.int64))
            out_s.append(np.array([init], np.uint32))
            self.state = init
        if len(ticks):
            prev = np.empty(len(state), np.uint32)
            prev[0] = self.state
            prev[1:] = state[:-1]
            chg = state != prev
            out_t.append(ticks[chg])
            out_s.append(state[chg])
            self.state = int(state[-1])
        if not out_t:
            return None
        t = np.concatenate(out_t)
        if len(t) == 0:
            return None
        return EdgeBlock(t.astype(np.int64), np.concatenate(out_s).astype(np.uint32))


