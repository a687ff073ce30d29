"""``spigap convert INPUT... -o OUT.sr|OUT.vcd``: any capture spigap reads, as a logic file
PulseView and sigrok-cli open.

The output holds exactly the edges spigap analyzes: the reader's edge stream
(analog channels thresholded with ``--threshold``/hysteresis, ``--deglitch``
applied, several files of one acquisition combined), so sigrok's decoders (ours
and the stock ones) run on scope captures too.

* ``.sr``: a logic srzip v2 session as libsigrok's srzip output writes it
  (``version`` "2", ``metadata`` with ``samplerate``/``probeN``/``unitsize``,
  ``logic-1-<k>`` members of 4 MiB); one sample per tick of the capture, or
  ``--rate`` samples per second (an edge lands on the sample at or before it).
* ``.vcd``: one ``wire`` per channel, a value change per edge; the timescale is
  the coarsest VCD unit (1/10/100 s..fs) that holds the tick exactly (20 ns ->
  10 ns), else 1 ps with times rounded to it. Written directly rather than with
  pyvcd: the format is a few lines of text per edge, and pyvcd's per-change
  Python calls would be the slow part of a long conversion; pyvcd's tokenizer
  and sigrok-cli check the files in the tests.

Both are streamed: the edges block by block, the samples 4 MiB at a time, so
memory does not grow with the capture. The file appears whole or not at all
(outfile.py). A damaged input is converted up to the damage, then the error is
reported (exit 2), like ``spigap analyze``'s partial results.
"""

from __future__ import annotations

import math
import os
import re
import sys

import numpy as np

from spigap.cli.common import _freq, add_reader_options, reader_options
from spigap.errors import CaptureTruncated, UsageError

ORDER = 75
CHUNK_BYTES = 4 << 20
MAX_SR_SAMPLES = 1 << 36          # 64 G samples: far past what PulseView opens; a sign of a wrong --rate
_VCD_UNITS = (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9), ("ps", 1e-12), ("fs", 1e-15))


def add_subparser(sub) -> None:
    p = sub.add_parser("convert", help="write a capture (scope files, CSV, Saleae, VCD, .dsl ...) as a logic "
                                       ".sr or VCD for PulseView and sigrok-cli",
                       description="Read a capture as spigap reads it (analog channels thresholded with "
                                   "--threshold and hysteresis, --deglitch applied, the files of one "
                                   "acquisition combined) and write its edges as a sigrok logic session "
                                   "(.sr) or a VCD, so PulseView and sigrok-cli decode it (docs/formats.md).")
    p.add_argument("inputs", nargs="+", metavar="INPUT",
                   help="capture file(s); several files of one acquisition (CH1.isf CH2.isf) become one capture")
    p.add_argument("-o", "--output", required=True, metavar="OUT.sr|OUT.vcd", help="the file to write")
    p.add_argument("--to", choices=("sr", "vcd"), help="output format (default: from the -o extension)")
    p.add_argument("--channels", metavar="NAME[,NAME...]",
                   help="write only these channels, in this order (default: all)")
    p.add_argument("--rate", type=_freq, metavar="HZ",
                   help=".sr: samples per second, e.g. 100MHz (default: one sample per tick of the capture, e.g. "
                        "the scope's sample rate); give one for VCD or Saleae captures with a fine time unit")
    g = p.add_argument_group("capture and channels")
    add_reader_options(g)
    p.set_defaults(func=run)


def run(args) -> int:
    from spigap.io import open_capture

    out = args.output
    kind = args.to or os.path.splitext(out)[1].lower().lstrip(".")
    if kind not in ("sr", "vcd"):
        raise UsageError("cannot tell the output format from the file name", path=out,
                         hint="name it .sr or .vcd, or give --to sr|vcd")
    _check_target(out)
    inputs = args.inputs[0] if len(args.inputs) == 1 else list(args.inputs)
    with open_capture(inputs, **reader_options(args)) as reader:
        info = reader.info
        names = _pick(info, args.channels)
        if kind == "vcd" and args.rate:
            raise UsageError("--rate applies to .sr output; a VCD keeps every edge at its time", path=out)
        error = None
        try:
            if kind == "sr":
                summary = write_sr(reader, names, out, rate=args.rate)
            else:
                summary = write_vcd(reader, names, out)
        except _Partial as e:
            summary, error = e.summary, e.error
        for w in info.warnings:
            print(f"note: {_printable(w)}", file=sys.stderr)
        print(f"wrote {out}: {summary}")
    if error is not None:
        print(f"spigap: error: {error}", file=sys.stderr)
        return 2
    return 0


def _check_target(path: str) -> None:
    d = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(d):
        raise UsageError("the output directory does not exist", path=path)
    if os.path.isdir(path):
        raise UsageError("is a directory", path=path, hint="give a file name to -o")
    if os.path.exists(path) and not os.path.isfile(path):
        raise UsageError("is not a regular file (a device, FIFO or socket): not replaced", path=path)


def _pick(info, wanted: str | None) -> list[str]:
    from spigap.limits import STREAM_CHANNELS

    if not wanted:
        if len(info.channels) > STREAM_CHANNELS:
            raise UsageError(f"the capture has {len(info.channels)} channels; spigap converts at most "
                             f"{STREAM_CHANNELS} at once (one edge stream)", path=info.path,
                             hint="pick them with --channels, in two runs for all of them")
        return list(info.channels)
    from spigap.io import resolve_channel

    out = []
    for key in (k.strip() for k in wanted.split(",") if k.strip()):
        idx = resolve_channel(key, info.channels)
        if idx is None:
            raise UsageError(f"--channels names {key!r}, but the capture has: {', '.join(info.channels)}",
                             path=info.path)
        out.append(info.channels[idx])
    if len(set(out)) != len(out):
        raise UsageError("--channels names a channel twice", path=info.path)
    return out


def _printable(text: str) -> str:
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in text)


def sigrok_name(name: str) -> str:
    """A channel name sigrok-cli's -P option can spell (``:``, ``=``, ``,`` separate its fields)."""
    clean = re.sub(r"[:=,\s\\\[\]]+", "_", name).strip("_") or "ch"
    return "".join(c if c.isprintable() else "_" for c in clean)


class _Partial(Exception):
    def __init__(self, summary: str, error: CaptureTruncated):
        self.summary, self.error = summary, error


# -------------------------------------------------------------------------- .sr
def samplerate_text(hz: float) -> str:
    """The rate as libsigrok's metadata writes it ('50 MHz'), exact to 1 ppb."""
    for unit, scale in (("GHz", 1e9), ("MHz", 1e6), ("kHz", 1e3), ("Hz", 1.0)):
        if hz >= scale or unit == "Hz":
            text = f"{hz / scale:.10g}"
            return f"{text} {unit}"
    raise AssertionError


class _Samples:
    """Edges -> packed sample words, rendered CHUNK by CHUNK (memory: one chunk + one block)."""

    def __init__(self, emit, unitsize: int):
        self.emit = emit
        self.unitsize = unitsize
        self.dtype = np.uint8 if unitsize == 1 else np.uint16 if unitsize == 2 else np.uint32 \
            if unitsize <= 4 else np.uint64
        self.per_chunk = CHUNK_BYTES // unitsize
        self.pos = 0                      # next sample to render
        self.level = 0                    # level before the pending edges
        self.t = np.empty(0, np.int64)    # pending edges (sample, state), samples >= pos
        self.s = np.empty(0, np.uint64)

    def feed(self, samples: np.ndarray, states: np.ndarray) -> None:
        keep = np.empty(len(samples), bool)     # several edges on one sample: the last wins
        if len(samples):
            keep[-1] = True
            np.not_equal(samples[1:], samples[:-1], out=keep[:-1])
        t = np.concatenate([self.t, samples[keep]])
        s = np.concatenate([self.s, states[keep].astype(np.uint64)])
        if len(t) > 1:                          # a sample continued across blocks: the later state
            k = np.empty(len(t), bool)
            k[-1] = True
            np.not_equal(t[1:], t[:-1], out=k[:-1])
            t, s = t[k], s[k]
        self.t, self.s = t, s
        # render the chunks that end before the last pending edge (it may still be overwritten)
        while len(self.t) and self.t[-1] >= self.pos + self.per_chunk:
            self._chunk(self.pos + self.per_chunk)

    def finish(self, end: int) -> None:
        while self.pos < end:
            self._chunk(min(end, self.pos + self.per_chunk))

    def _chunk(self, stop: int) -> None:
        n = stop - self.pos
        k = int(np.searchsorted(self.t, stop, side="left"))
        t, s = self.t[:k], self.s[:k]
        pos = np.concatenate([[0], t - self.pos])
        lev = np.concatenate([[self.level], s]).astype(self.dtype)
        lengths = np.diff(np.append(pos, n))
        out = np.repeat(lev, lengths)
        if k:
            self.level = int(s[-1])
        self.t, self.s = self.t[k:], self.s[k:]
        self.pos = stop
        raw = out.astype(out.dtype.newbyteorder("<"), copy=False)
        if raw.dtype.itemsize != self.unitsize:
            raw = np.ascontiguousarray(raw.view(np.uint8).reshape(-1, raw.dtype.itemsize)[:, :self.unitsize])
        self.emit(raw.tobytes())


def write_sr(reader, names: list[str], path: str, *, rate: float | None = None) -> str:
    import zipfile

    from spigap.outfile import open_output, zip_entry

    info = reader.info
    tick_rate = 1.0 / info.tick_s
    hz = float(rate) if rate else tick_rate
    if not (math.isfinite(hz) and hz > 0):
        raise UsageError(f"the capture's resolution {info.tick_s!r} s gives no sample rate", path=info.path,
                         hint="give one with --rate")
    scale = hz / tick_rate                # output samples per tick
    if info.n_ticks and info.n_ticks * scale > MAX_SR_SAMPLES:
        raise UsageError(f"{info.n_ticks * scale:.3g} samples at {samplerate_text(hz)} is more than a .sr "
                         "should hold", path=path, hint="give a lower --rate")
    unitsize = max(1, (len(names) + 7) // 8)
    if unitsize > 8:
        raise UsageError(f"{len(names)} channels: a .sr holds at most 64 logic channels", path=path,
                         hint="pick some with --channels")
    if unitsize in (3, 5, 6, 7):
        unitsize = {3: 4, 5: 8, 6: 8, 7: 8}[unitsize]
    sr_names = [sigrok_name(n) for n in names]
    if len(set(sr_names)) != len(sr_names):
        sr_names = [f"{n}_{i}" for i, n in enumerate(sr_names)]
    meta = ["[global]", "sigrok version=0.5.2", "", "[device 1]", "capturefile=logic-1",
            f"total probes={len(names)}", f"samplerate={samplerate_text(hz)}", "total analog=0"]
    meta += [f"probe{i + 1}={n}" for i, n in enumerate(sr_names)]
    meta.append(f"unitsize={unitsize}")
    error = None
    try:
        with open_output(path, binary=True) as raw:
            # whole or not at all (a regular file), in place (a FIFO or device: zipfile streams)
            with zipfile.ZipFile(raw, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as zf:
                zf.writestr(zip_entry(zf, "version"), "2")
                zf.writestr(zip_entry(zf, "metadata"), "\n".join(meta) + "\n")
                members = [0]

                def emit(data: bytes) -> None:
                    members[0] += 1
                    zf.writestr(zip_entry(zf, f"logic-1-{members[0]}"), data)

                samples = _Samples(emit, unitsize)
                limit = MAX_SR_SAMPLES
                try:
                    for block in reader.edges(names):
                        if scale == 1.0:
                            pos = block.ticks
                        else:
                            pos = np.floor(block.ticks * scale + 1e-9).astype(np.int64)
                        if len(pos) and pos[-1] > limit:
                            raise UsageError(f"the capture runs past {limit} samples at {samplerate_text(hz)}",
                                             path=info.path, hint="give a lower --rate")
                        samples.feed(pos, block.states)
                except CaptureTruncated as e:
                    error = e
                last = int(samples.t[-1]) if len(samples.t) else samples.pos - 1
                if reader.end_tick is None:
                    end = last + 1
                else:
                    end = max(int(math.ceil(reader.end_tick * scale - 1e-9)), last + 1)
                end = max(end, samples.pos, 1)
                samples.finish(end)
    except OSError as e:
        raise UsageError(f"cannot write: {e.strerror or e}", path=path) from None
    summary = (f"sigrok logic session, {len(names)} channel(s) ({', '.join(sr_names)}), "
               f"{samplerate_text(hz)}, {end} samples")
    if error is not None:
        raise _Partial(summary + " (up to the damage)", error)
    return summary


# -------------------------------------------------------------------------- VCD
def vcd_timescale(tick_s: float) -> tuple[str, int, bool]:
    """(timescale text, VCD units per tick, exact): the coarsest unit that holds the tick."""
    for unit, sec in _VCD_UNITS:
        for mult in (100, 10, 1):
            ts = mult * sec
            k = tick_s / ts
            if k >= 1 and abs(k - round(k)) <= 1e-9 * k:
                return f"{mult} {unit}", int(round(k)), True
    k = tick_s / 1e-12
    return "1 ps", max(1, int(round(k))), abs(k - round(k)) <= 1e-9 * max(k, 1)


def _vcd_id(i: int) -> str:
    chars = [chr(33 + i % 94)]
    i //= 94
    while i:
        chars.append(chr(33 + i % 94))
        i //= 94
    return "".join(chars)


def write_vcd(reader, names: list[str], path: str) -> str:
    from spigap import __version__
    from spigap.outfile import open_output

    info = reader.info
    ts, per_tick, exact = vcd_timescale(info.tick_s)
    if not exact and per_tick < 1000:
        raise UsageError(f"the tick {info.tick_s!r} s is not a whole number of VCD time units", path=info.path)
    ids = [_vcd_id(i) for i in range(len(names))]
    vnames = [re.sub(r"[^\w.\[\]-]+", "_", n) or "ch" for n in names]
    error = None
    n_edges = 0
    end = 0
    try:
        with open_output(path, escape=False) as f:       # names are made VCD-safe below
            f.write(f"$version spigap {__version__} $end\n$timescale {ts} $end\n$scope module capture $end\n")
            for i, n in zip(ids, vnames):
                f.write(f"$var wire 1 {i} {n} $end\n")
            f.write("$upscope $end\n$enddefinitions $end\n")
            prev = None
            last_t = 0
            try:
                for block in reader.edges(names):
                    parts = []
                    for t, s in zip(block.ticks.tolist(), block.states.tolist()):
                        if prev is None:
                            parts.append(f"#{t * per_tick}\n$dumpvars\n")
                            parts += [f"{(s >> j) & 1}{ids[j]}\n" for j in range(len(ids))]
                            parts.append("$end\n")
                        else:
                            ch = s ^ prev
                            parts.append(f"#{t * per_tick}\n")
                            j = 0
                            while ch:
                                if ch & 1:
                                    parts.append(f"{(s >> j) & 1}{ids[j]}\n")
                                ch >>= 1
                                j += 1
                        prev = s
                        last_t = t
                    n_edges += len(block.ticks)
                    f.write("".join(parts))
            except CaptureTruncated as e:
                error = e
            end = reader.end_tick if reader.end_tick is not None else last_t + 1
            end = max(end, last_t)
            if end > last_t:
                f.write(f"#{end * per_tick}\n")     # the end of the capture, as sigrok's -O vcd writes it
    except OSError as e:
        raise UsageError(f"cannot write: {e.strerror or e}", path=path) from None
    summary = (f"VCD, {len(names)} channel(s) ({', '.join(vnames)}), timescale {ts}"
               f"{'' if exact else ' (times rounded to it)'}, {n_edges} value changes, {end} ticks")
    if error is not None:
        raise _Partial(summary + " (up to the damage)", error)
    return summary
