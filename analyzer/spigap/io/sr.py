"""sigrok session files (.sr, "srzip"), read the way libsigrok 0.5 reads them.

Format facts (docs/formats.md, "sigrok .sr"): a zip with
``version`` ("1" or "2"), ``metadata`` (GKeyFile INI, section ``device 1``),
logic data in ``<capturefile>`` or ``<capturefile>-1..N`` (raw little-endian
samples, ``unitsize`` bytes each, probe N = bit N-1), analog data in
``analog-1-<A>-<n>`` (float32, one value per sample; metadata ``analog<A>=name``).
Analog channels are thresholded with hysteresis (analyzer/spigap/io/threshold.py,
``--threshold``) and merged with the logic channels of the same request.

Streaming: members are inflated piece by piece on a small thread pool (ISA-L
and numpy release the GIL), at most a few pieces in flight, so peak memory
does not depend on capture length. Edge state is carried across pieces.
A member whose compressed bytes, CRC and size repeat those of a recent one
(sigrok writes the same chunk again and again over idle stretches) is not
inflated again: its changes are the earlier member's, moved.
"""

from __future__ import annotations

import collections
import concurrent.futures
import os
import re
import zipfile
from collections.abc import Iterator, Sequence

import numpy as np

from spigap.limits import PLAUSIBLE_MIN_HZ
from spigap.findings import Cause, Finding
from spigap.errors import CaptureTruncated, InputError, SpigapError, UsageError
from spigap.io import inflate
from spigap.io.base import CaptureInfo, CaptureReader, EdgeBlock
from spigap.native.changes import (
    PieceChanges,
    compact,
    find_changes,
    masked_states,
    masks_for,
)
from spigap.io.threshold import (
    Schmitt,
    Source,
    Threshold,
    merge,
    resolve_thresholds,
    sampled_source,
)
from spigap.io.zipmembers import ZipMembers, _Damaged, _Member

WHOLE_MEMBER_BYTES = 16 << 20  # members up to this size are inflated in one worker call
SCAN_BYTES = 4 << 20           # change detection works on sub-pieces of this size
IN_FLIGHT = 3                  # pieces being inflated/scanned at once
WORKERS = min(2, os.cpu_count() or 1)
SAME_RATIO = 16                # members compressed at least this much are remembered for reuse ...
SAME_MAX_BYTES = 1 << 20       # ... when their compressed bytes are at most this long,
SAME_KEEP = 4                  # ... this many at a time,
SAME_MAX_CHANGES = 1 << 16     # ... while their changes are at most this many

_SIZE_RE = re.compile(r"^\s*(\d+)(\.\d+)?\s*([kKmMgGtT]?)")


def parse_samplerate(text: str) -> float | None:
    """libsigrok's sr_parse_sizestring: '16 MHz', '31.5 kHz', '2 mHz' (m = mega!)."""
    m = _SIZE_RE.match(text)
    if not m:
        return None
    value = float(m.group(1) + (m.group(2) or ""))
    scale = {"": 1, "k": 1e3, "K": 1e3, "m": 1e6, "M": 1e6, "g": 1e9, "G": 1e9,
             "t": 1e12, "T": 1e12}[m.group(3)]
    return value * scale


def parse_metadata(text: str) -> dict[str, dict[str, str]]:
    """GKeyFile as libsigrok sees it: every line stripped first, so the indented
    ``trigger1 = 0`` lines of version-1 files are keys of their own (Python's
    configparser would fold them into the previous value)."""
    sections: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1].strip(), {})
            continue
        if "=" in line and current is not None:
            key, value = line.split("=", 1)
            current.setdefault(key.strip(), value.strip())
    return sections


class NoSampleRate(InputError):
    """The .sr's metadata has no samplerate: times cannot be told, the samples still can
    (``spigap detect`` reads the roles from them, a sample as the time unit)."""


class SrReader(ZipMembers, CaptureReader):
    format_name = "sr"
    zip_kind = "sigrok .sr file"

    def __init__(self, path, *, samplerate: float | None = None, threshold=None):
        self.path = str(path)
        self._open_fd()
        try:
            warnings: list[str] = []
            self._members = self._read_directory(warnings)
            version = self._read_small("version").decode("ascii", "replace").strip()
            if version not in ("1", "2"):
                raise InputError(f"unsupported .sr format version {version!r} (libsigrok reads 1 and 2)",
                                 path=self.path)
            md = parse_metadata(self._read_small("metadata").decode("utf-8", "replace"))
            dev_name = next((s for s in md if s.startswith("device ")), None)
            if dev_name is None:
                raise InputError("metadata has no [device 1] section", path=self.path,
                                 hint="not a sigrok session file?")
            dev = md[dev_name]
            self.capturefile = dev.get("capturefile")
            if self.capturefile is not None and not self.capturefile.strip():
                raise InputError("metadata 'capturefile' is empty: the logic data member is not named",
                                 path=self.path, hint="damaged metadata; re-save the capture with sigrok")
            total = _int(dev.get("total probes"), self.path, "total probes")
            probes: dict[int, str] = {}
            for key, value in dev.items():
                pm = re.fullmatch(r"probe(\d+)", key)
                if pm:
                    probes[int(pm.group(1))] = value
            analog_names = {int(am.group(1)): value for key, value in dev.items()
                            for am in [re.fullmatch(r"analog(\d+)", key)] if am}
            has_logic = self.capturefile is not None and bool(probes)
            if not has_logic and not analog_names:
                raise InputError("capture has no channels (no capturefile/probeN or analogN in metadata)",
                                 path=self.path, hint="not a capture saved by sigrok?")
            if not has_logic:
                probes, self.capturefile, self.unitsize = {}, None, 1
            else:
                if total is None:
                    total = max(probes)
                self.unitsize = _int(dev.get("unitsize"), self.path, "unitsize")
                if self.unitsize is None:
                    self.unitsize = (total + 7) // 8
                    warnings.append(f"metadata has no unitsize; assuming {self.unitsize} byte(s) per sample")
                if not 1 <= self.unitsize <= 8:
                    raise InputError(f"unitsize {self.unitsize} is outside 1..8", path=self.path)
                for n in probes:
                    if n < 1:
                        raise InputError(f"metadata names probe{n}: sigrok numbers probes from 1", path=self.path,
                                         hint="damaged metadata; re-save the capture with sigrok")
                # libsigrok reads such files (sigrok-dumps' cbm_1571_read_status.sr: 16 probes, unitsize 1):
                # the probes beyond the sample word hold nothing; they are left out, said so
                beyond = sorted(n for n in probes if n > self.unitsize * 8)
                if beyond:
                    span = f"probe{beyond[0]}" + (f"-{beyond[-1]}" if len(beyond) > 1 else "")
                    warnings.append(Finding(f"metadata names {span} beyond the {self.unitsize * 8} bits of a "
                                            f"sample (unitsize {self.unitsize}): left out", Cause.NOTE))
                    probes = {n: v for n, v in probes.items() if n <= self.unitsize * 8}
            self._bit_of: dict[str, int] = {}
            names = []
            for n in sorted(probes):
                names.append(probes[n])
                self._bit_of.setdefault(probes[n], n - 1)

            rate_text = dev.get("samplerate")
            stored = parse_samplerate(rate_text) if rate_text else None
            if samplerate is not None:
                rate = float(samplerate)
                if stored and abs(stored - rate) > 1e-9 * rate:
                    warnings.append(Finding(f"samplerate {rate:g} Hz from --samplerate overrides the metadata's "
                                            f"{rate_text!r}", Cause.NOTE))
            elif not stored:
                raise NoSampleRate("metadata has no samplerate", path=self.path,
                                   hint="pass the logic analyzer's rate with --samplerate, e.g. --samplerate 24MHz")
            else:
                rate = stored

            self._logic = self._logic_members(warnings) if has_logic else []
            n_samples = sum(m.usize for m in self._logic) // self.unitsize if self._logic else 0
            self._analog_of = self._analog_members(analog_names, names, warnings)
            for members in self._analog_of.values():
                n_samples = max(n_samples, sum(m.usize for m in members) // 4)
            names += list(self._analog_of)
            if not names:
                raise InputError("no channel of the capture has data (analog members missing)", path=self.path)
            self._thr_spec = threshold
            self._thresholds: dict[str, Threshold] | None = None
            for m in self._logic:
                if m.usize % self.unitsize:
                    warnings.append(f"{m.name} holds {m.usize} bytes, not a multiple of unitsize "
                                    f"{self.unitsize}; the last partial sample is ignored")
            if samplerate is None and n_samples and rate < PLAUSIBLE_MIN_HZ:
                days = n_samples / rate / 86400
                warnings.append(Finding(f"metadata samplerate {rate_text!r} is implausible for an SPI capture "
                                        f"({n_samples} samples would last {days:.3g} days); pass the real rate "
                                        f"with --samplerate (e.g. --samplerate 5MHz)", Cause.TIMEBASE))
            if self._analog_of and self._recovered:
                n_samples = None
            roles, saved = self._recipe(names)
            self.info = CaptureInfo(
                path=self.path, format=f"sigrok .sr v{version}", channels=names, tick_s=1.0 / rate,
                samplerate_hz=rate, n_ticks=None if self._recovered else n_samples, warnings=warnings,
                samplerate_metadata=rate_text, analog_channels=list(self._analog_of),
                resolution_source="--samplerate" if samplerate is not None else "metadata",
                spi_channels=roles, spi_settings=saved)
        except BaseException:     # a refused file leaves no descriptor open
            self.close()
            raise

    def _recipe(self, names: list[str]) -> tuple[dict, dict]:
        """The SPI settings a capture written by ``spigap synth`` carries (its recipe,
        member spigap-synth.toml): channel roles, mode, word size, bit order, CS polarity,
        and the roles it has no line for. ({}, {}) for any other capture or a bad recipe."""
        if "spigap-synth.toml" not in self._members:
            return {}, {}
        from spigap.infile import read_toml

        try:
            text = self._read_small("spigap-synth.toml").decode("utf-8")
            spi = read_toml(f"{self.path}:spigap-synth.toml", what="recipe", text=text).get("spi", {})
        except (SpigapError, UnicodeDecodeError):
            return {}, {}
        if not isinstance(spi, dict):
            return {}, {}
        chans = {"clk": "SCLK", "mosi": "MOSI", "miso": "MISO", "cs": "CS"}    # synth's defaults
        if isinstance(spi.get("channels"), dict):
            chans.update({k: v for k, v in spi["channels"].items() if k in chans and isinstance(v, str)})
        roles = {r: n for r, n in chans.items() if n and n in names}
        saved: dict = {"from": "the capture's own recipe (spigap-synth.toml)",
                       "none": [r for r, n in chans.items() if not n]}
        try:
            mode = int(spi["mode"]) if "mode" in spi else None
            if mode in (0, 1, 2, 3):
                saved["cpol"], saved["cpha"] = mode >> 1, mode & 1
            for k in ("cpol", "cpha", "wordsize"):
                if k in spi:
                    saved[k] = int(spi[k])
        except (TypeError, ValueError):
            return roles, {}
        if spi.get("bitorder") in ("msb", "lsb"):
            saved["bitorder"] = f"{spi['bitorder']}-first"
        if spi.get("cs_polarity") in ("low", "high"):
            saved["cs_polarity"] = f"active-{spi['cs_polarity']}"
        return roles, saved

    def _logic_members(self, warnings) -> list[_Member]:
        cf = self.capturefile
        assert cf is not None                # only called when the capture has logic data
        if cf in self._members:
            return [self._members[cf]]
        chunks = {}
        for name in self._members:
            m = re.fullmatch(re.escape(cf) + r"-(\d+)", name)
            if m:
                chunks[int(m.group(1))] = self._members[name]
        out = []
        k = 1
        while k in chunks:  # libsigrok stops at the first missing chunk number
            out.append(chunks.pop(k))
            k += 1
        if chunks:
            warnings.append(f"chunk {cf}-{k} is missing; libsigrok stops there, so chunks "
                            f"{', '.join(f'{cf}-{i}' for i in sorted(chunks))} are ignored too")
        if not out and not self._recovered:
            raise InputError(f"the logic data member '{cf}' (or '{cf}-1') named by the metadata is not "
                             f"in the zip", path=self.path, hint="damaged capture; re-save it with sigrok")
        for m in out:
            if m.method not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                raise InputError(f"zip member {m.name} uses unsupported compression {m.method}",
                                 path=self.path, hint="re-save the capture with sigrok")
        return out

    # ---------------------------------------------------------------- edges
    def edges(self, channels: Sequence[str]) -> Iterator[EdgeBlock]:
        names = [self.info.channels[self.channel_index(c)] for c in channels]
        if any(n in self._analog_of for n in names):
            yield from self._analog_edges(names)
            return
        bits = [self._bit_of[n] for n in names]
        if not bits:
            raise UsageError("no channels requested", path=self.path)
        masks = masks_for(bits)
        us = self.unitsize
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=WORKERS)
        pending: collections.deque = collections.deque()
        offset = 0          # first sample of the next piece to come out of `pending`
        prev = None         # compact state of the last sample seen
        self.end_tick = 0
        try:
            for item in self._pieces(pool, us, masks, bits):
                pending.append(item)
                while len(pending) >= IN_FLIGHT:
                    block, prev, offset = self._emit(pending.popleft(), prev, offset)
                    if block is not None:
                        yield block
            while pending:
                block, prev, offset = self._emit(pending.popleft(), prev, offset)
                if block is not None:
                    yield block
        except _Damaged as d:
            # pieces are emitted strictly in order, so everything before the
            # damaged piece has been yielded already
            self.end_tick = offset
            raise CaptureTruncated(f"{d.problem}; results cover the first {offset} samples",
                                   path=self.path, at_tick=offset,
                                   hint="re-export or re-copy the capture") from None
        finally:
            for f in pending:
                if isinstance(f, concurrent.futures.Future):
                    f.cancel()
            pool.shutdown(wait=True, cancel_futures=True)
        self.end_tick = offset
        if offset == 0:
            raise InputError("the capture has no samples (its logic data members are empty)",
                             path=self.path)
        if self._recovered:
            raise CaptureTruncated(f"zip directory missing; read {offset} samples from the members present",
                                   path=self.path, at_tick=offset, hint="the file was cut short")

    def _emit(self, fut, prev, offset):
        if isinstance(fut, _Damaged):
            raise fut
        pc: PieceChanges = fut.result()
        if pc.n == 0:
            return None, prev, offset
        ticks = pc.pos                      # absolute sample numbers already
        states = pc.values
        if prev is None or pc.first != prev:
            ticks = np.concatenate([np.array([offset], np.int64), ticks])
            states = np.concatenate([np.array([pc.first], np.uint32), states])
        block = EdgeBlock(ticks, states) if len(ticks) else None
        return block, pc.last, offset + pc.n

    def _pieces(self, pool, us, masks, bits):
        """Submit scan jobs in capture order; yields futures (or a _Damaged marker).
        ``base`` is each piece's first sample, so the scan writes absolute positions
        (a whole member's size is known from the zip directory and checked)."""
        base = 0
        # Identical members (long idle stretches make sigrok write the same chunk
        # again and again: 88 of the enc28j60 capture's 98) inflate to the same
        # samples, so their changes are those of the first one, shifted. Only
        # highly compressible members are remembered, a few at a time, and only
        # while their changes are few: memory stays bounded.
        same: collections.OrderedDict = collections.OrderedDict()
        for m in self._logic:
            for key in [k for k, v in same.items() if _too_big(v[1])]:
                del same[key]
            data_off = self._data_offset(m)
            if m.usize and m.usize <= WHOLE_MEMBER_BYTES and m.crc is not None:
                key = (m.crc, m.usize, m.csize, m.method)
                if m.csize * SAME_RATIO <= m.usize and m.csize <= SAME_MAX_BYTES:
                    comp = _read_member(self._fd, m, data_off, self._size)
                    hit = same.get(key)
                    if hit is not None and hit[0] == comp:
                        yield _Same(hit[1], base - hit[2], m, comp, us, masks, bits, base)
                    else:
                        fut = pool.submit(_inflate_scan, m, comp, us, masks, bits, base)
                        same[key] = (comp, fut, base)
                        same.move_to_end(key)
                        while len(same) > SAME_KEEP:
                            same.popitem(last=False)
                        yield fut
                else:
                    yield pool.submit(_whole_member_job, self._fd, m, data_off, us, masks, bits, base, self._size)
                base += m.usize // us
                continue
            try:
                for piece in self._stream_member(m, data_off):
                    yield pool.submit(scan_piece, piece, us, masks, bits, base)
                    base += len(piece) // us
            except _Damaged as d:
                yield d
                return

    # --------------------------------------------------------------- analog
    def _analog_members(self, analog_names: dict[int, str], logic_names: list[str],
                        warnings: list[str]) -> dict[str, list[_Member]]:
        """Channel name -> its ``analog-1-<A>-1..N`` members (in order, stopping at
        the first missing chunk number, like the logic chunks)."""
        out: dict[str, list[_Member]] = {}
        for a in sorted(analog_names):
            chunks = {}
            for name in self._members:
                m = re.fullmatch(rf"analog-1-{a}-(\d+)", name)
                if m:
                    chunks[int(m.group(1))] = self._members[name]
            members, k = [], 1
            while k in chunks:
                members.append(chunks.pop(k))
                k += 1
            label = analog_names[a]
            if chunks:
                warnings.append(f"analog chunk analog-1-{a}-{k} is missing; later chunks of {label!r} are ignored")
            if not members:
                warnings.append(f"analog channel {label!r} (analog{a}) has no data members")
                continue
            for m in members:
                if m.method not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                    raise InputError(f"zip member {m.name} uses unsupported compression {m.method}",
                                     path=self.path, hint="re-save the capture with sigrok")
            if label in logic_names or label in out:
                label = f"{label} (analog)"
            out[label] = members
        return out

    def _analog_values(self, name: str, limit: int | None = None) -> Iterator[np.ndarray]:
        """float64 samples of one analog channel, piece by piece (streamed)."""
        got = 0
        for m in self._analog_of[name]:
            data_off = self._data_offset(m)
            carry = b""
            for piece in self._stream_member(m, data_off):
                buf = carry + piece
                cut = len(buf) - len(buf) % 4
                carry = buf[cut:]
                if cut:
                    with np.errstate(invalid="ignore"):   # signalling NaNs in damaged data
                        v = np.frombuffer(buf[:cut], dtype="<f4").astype(np.float64)
                    yield v
                    got += len(v)
                    if limit is not None and got >= limit:
                        return
            if carry:
                self.info.warnings.append(f"{m.name} holds {m.usize} bytes, not a multiple of 4; "
                                          "the last partial sample is ignored")

    def _analog_sample(self, names: list[str]) -> dict[str, np.ndarray]:
        """The first ~1 M samples of each channel, for automatic thresholds."""
        out = {}
        for n in names:
            parts = []
            try:
                parts = list(self._analog_values(n, limit=1 << 20))
            except _Damaged:
                pass
            out[n] = np.concatenate(parts)[: 1 << 20] if parts else np.empty(0)
        return out

    def _analog_edges(self, names: list[str]) -> Iterator[EdgeBlock]:
        if self._thresholds is None:
            self._thresholds, notes = resolve_thresholds(self._thr_spec, list(self._analog_of),
                                                         self._analog_sample, path=self.path)
            self.info.warnings.extend(notes)
            self.info.thresholds.update({k: (v.level, v.hysteresis) for k, v in self._thresholds.items()})
        sources = []
        logic = [(j, n) for j, n in enumerate(names) if n not in self._analog_of]
        if logic:
            positions = [j for j, _ in logic]

            def logic_runs():
                for block in self.edges([n for _, n in logic]):
                    s = np.zeros(len(block.states), np.uint32)
                    for i, j in enumerate(positions):
                        s |= ((block.states >> np.uint32(i)) & np.uint32(1)) << np.uint32(j)
                    yield block.ticks, s

            mask = sum(1 << j for j in positions)
            sources.append(Source(logic_runs(), 0, mask=mask))
        for j, n in enumerate(names):
            if n in self._analog_of:
                sources.append(Source(self._analog_source(n), j))
        self.end_tick = None

        def on_trunc(e):
            self.end_tick = e.at_tick

        last = 0
        for block in merge(sources, on_truncated=on_trunc):
            last = int(block.ticks[-1])
            yield block
        self.end_tick = self.info.n_ticks if self.info.n_ticks is not None else last + 1
        if self._recovered:
            raise CaptureTruncated("zip directory missing; read the members present", path=self.path,
                                   at_tick=self.end_tick, hint="the file was cut short")

    def _analog_source(self, name: str):
        assert self._thresholds is not None  # resolved by _analog_edges before any source
        schmitt = Schmitt(self._thresholds[name])

        def chunks():
            done = 0
            try:
                for v in self._analog_values(name):
                    yield v
                    done += len(v)
            except _Damaged as d:
                raise CaptureTruncated(f"{d.problem}; results cover the first {done} samples",
                                       path=self.path, at_tick=done,
                                       hint="re-export or re-copy the capture") from None

        return sampled_source(chunks(), schmitt, tap=self.volts_tap_for(name))

    def close(self) -> None:
        if getattr(self, "_fd", None) is not None:
            os.close(self._fd)
            self._fd = None


class _Same:
    """A member whose compressed bytes (and CRC and size) are those of an earlier
    one: its changes are the earlier member's, moved by ``delta`` samples. Should
    the earlier one have failed, this member is read on its own (so the message
    names it)."""

    def __init__(self, fut, delta, m, comp, us, masks, bits, base):
        self.fut, self.delta = fut, delta
        self.args = (m, comp, us, masks, bits, base)

    def result(self) -> PieceChanges:
        try:
            pc = self.fut.result()
        except _Damaged:
            return _inflate_scan(*self.args)
        return PieceChanges(pc.pos + self.delta, pc.values, pc.first, pc.last, pc.n)


def _too_big(fut) -> bool:
    """A remembered member whose changes are many is not kept for reuse."""
    if not fut.done() or fut.exception() is not None:
        return False
    return len(fut.result().pos) > SAME_MAX_CHANGES


def _read_member(fd, m: _Member, data_off, file_size) -> bytes:
    return os.pread(fd, min(m.csize, max(file_size - data_off, 0)), data_off)


def _whole_member_job(fd, m: _Member, data_off, us, masks, bits, base, file_size) -> PieceChanges:
    return _inflate_scan(m, _read_member(fd, m, data_off, file_size), us, masks, bits, base)


def _inflate_scan(m: _Member, comp: bytes, us, masks, bits, base) -> PieceChanges:
    if len(comp) < m.csize:
        raise _Damaged(f"chunk {m.name} is cut short ({len(comp)} of {m.csize} bytes)")
    try:
        # at most usize bytes come out, whatever the stream holds (usize <= WHOLE_MEMBER_BYTES)
        raw = comp if m.method == zipfile.ZIP_STORED else inflate.decompress_limited(comp, m.usize)
    except inflate.error as e:
        raise _Damaged(f"chunk {m.name} is damaged ({e})") from None
    except inflate.TooLarge:
        raise _Damaged(f"chunk {m.name} is damaged (inflates beyond its {m.usize} bytes)") from None
    if len(raw) != m.usize or inflate.crc32(raw) != m.crc:
        raise _Damaged(f"chunk {m.name} is damaged (CRC or size mismatch)")
    return scan_piece(raw, us, masks, bits, base)


def scan_piece(buf, unitsize: int, masks: dict[int, int], bits: list[int], base: int = 0) -> PieceChanges:
    """Changes of the wanted channels in one piece of raw samples, compacted to
    request order: the compiled core when available, else numpy in sub-pieces
    (so temporaries stay small)."""
    from spigap import native

    if native.library() is not None:
        return native.scan(buf, unitsize, masks, bits, base)
    return scan_piece_numpy(buf, unitsize, masks, bits, base)


def scan_piece_numpy(buf, unitsize: int, masks: dict[int, int], bits: list[int],
                     first_sample: int = 0) -> PieceChanges:
    a = np.frombuffer(buf, dtype=np.uint8)
    n = len(a) // unitsize
    step = max(SCAN_BYTES // unitsize, 64) * unitsize
    pos_parts, val_parts = [], []
    first = last = None
    for start in range(0, n * unitsize, step):   # a few iterations per piece, not per sample
        states, base_bit = masked_states(a[start:start + step], unitsize, masks)
        pc = find_changes(states)
        s0 = first_sample + start // unitsize
        f = int(compact(np.array([pc.first]), bits, base_bit)[0])
        vals = compact(pc.values, bits, base_bit)
        if first is None:
            first = f
        elif f != last:
            pos_parts.append(np.array([s0], np.int64))
            val_parts.append(np.array([f], np.uint32))
        pos_parts.append(pc.pos + s0)
        val_parts.append(vals)
        last = int(compact(np.array([pc.last]), bits, base_bit)[0])
    if first is None:
        return PieceChanges(np.empty(0, np.int64), np.empty(0, np.uint32), None, None, 0)
    return PieceChanges(np.concatenate(pos_parts), np.concatenate(val_parts), first, last, n)


def _int(text, path, key):
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        raise InputError(f"metadata '{key}' is not a number: {text!r}", path=path) from None
