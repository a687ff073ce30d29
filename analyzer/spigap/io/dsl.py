"""DSView session files (.dsl, DreamSourceLab DSLogic), logic captures.

Format facts (DSView's ``storesession.cpp`` writes it, libsigrok4DSL's
``session_driver.c`` reads it; the shipped demo ``demo_spi.dsl`` is the
reference, see captures/real/README.md): a zip with

- ``header``: INI, ``[version] version = 2`` (3 from DSView 1.2 on, same
  logic layout), ``[header]`` with ``samplerate = 40 MHz``, ``total samples``,
  ``total blocks``, ``total probes`` and ``probe<N> = name`` per enabled channel;
- ``L-<N>/<block>``: the samples of channel N in block ``block`` (0-based),
  bit-packed: bit i of the little-endian byte stream is sample i of the block
  (2 MiB = 16 Mi samples per block; the last block shorter);
- ``decoders`` (JSON, optional): the protocol decoders set up in DSView, with
  their channel assignment and options; an ``spi`` entry gives the default
  channel map (``CaptureInfo.spi_channels``), reported in a warning;
- ``session`` (JSON view settings): ignored.

Streaming: one block at a time, each requested channel's member inflated
whole (a few MiB; size-limited and CRC-checked) and scanned in pieces of
``SCAN_BYTES`` packed bytes, so memory does not grow with capture length.
The scan is sparse: only bytes where some requested channel changes (a byte
not all-0/all-1, or differing from the previous byte's last bit) are unpacked.
"""

from __future__ import annotations

import json
import os
import re
import zipfile
from collections.abc import Iterator, Sequence

import numpy as np

from spigap.findings import Cause, Finding
from spigap.errors import CaptureTruncated, InputError, UsageError
from spigap.io import inflate
from spigap.io.base import CaptureInfo, CaptureReader, EdgeBlock
from spigap.io.sr import parse_metadata, parse_samplerate
from spigap.io.zipmembers import ZipMembers

BLOCK_LIMIT = 64 << 20       # bytes of one inflated L-<N>/<block> member (DSView writes 2 MiB)
SCAN_BYTES = 256 << 10       # packed bytes per channel scanned at a time (2 Mi samples)
SPI_ROLES = ("clk", "mosi", "miso", "cs")


class DslReader(ZipMembers, CaptureReader):
    format_name = "dsl"
    zip_kind = "DSView .dsl file"

    def __init__(self, path, *, samplerate: float | None = None):
        self.path = str(path)
        self._fd = None
        self._open_fd()
        try:
            warnings: list[str] = []
            self._members = self._read_directory(warnings)
            ini = parse_metadata(self._read_small("header").decode("utf-8", "replace"))
            version = ini.get("version", {}).get("version", "").strip()
            if version not in ("2", "3"):
                raise InputError(f"unsupported .dsl header version {version!r} (spigap reads 2 and 3)",
                                 path=self.path, hint="re-save the capture with DSView")
            hdr = ini.get("header")
            if hdr is None:
                raise InputError("the .dsl header has no [header] section", path=self.path)
            probes: dict[int, str] = {}
            for key, value in hdr.items():
                m = re.fullmatch(r"probe(\d+)", key)
                if m:
                    probes[int(m.group(1))] = value.strip() or m.group(1)
            if not probes:
                raise InputError("the .dsl header names no channels (probeN)", path=self.path,
                                 hint="only DSView logic captures are supported, not DSO/analog ones")
            if any(k.startswith("A-") or k.startswith("O-") for k in self._members) and \
                    not any(k.startswith("L-") for k in self._members):
                raise InputError("a DSView analog/oscilloscope capture: spigap reads logic captures",
                                 path=self.path)
            self._index: dict[str, int] = {}     # channel name -> N of its L-<N>/<block> members
            names = []
            for n in sorted(probes):
                name = probes[n]
                if name in self._index:
                    name = f"{name}#{n}"
                self._index[name] = n
                names.append(name)
            rate_text = hdr.get("samplerate")
            stored = parse_samplerate(rate_text) if rate_text else None
            if samplerate is not None:
                rate = float(samplerate)
                if stored and abs(stored - rate) > 1e-9 * rate:
                    warnings.append(Finding(f"samplerate {rate:g} Hz from --samplerate overrides the header's {rate_text!r}", Cause.NOTE))
            elif not stored:
                raise InputError("the .dsl header has no samplerate", path=self.path,
                                 hint="pass the rate with --samplerate, e.g. --samplerate 100MHz")
            else:
                rate = stored
            self._total = _int(hdr.get("total samples"), self.path, "total samples")
            self._blocks = _int(hdr.get("total blocks"), self.path, "total blocks")
            present = {int(m.group(1)) for k in self._members for m in [re.fullmatch(r"L-\d+/(\d+)", k)] if m}
            if self._blocks is None:
                self._blocks = (max(present) + 1) if present else 0
            if not present:
                raise InputError("the .dsl has no logic data (no L-<channel>/<block> members)", path=self.path,
                                 hint="the file is damaged or cut short: re-copy it, or re-save the capture with DSView")
            self._saved: dict = {}
            spi = self._spi_settings(names, warnings)
            self.info = CaptureInfo(
                path=self.path, format=f"DSView .dsl v{version}", channels=names, tick_s=1.0 / rate,
                samplerate_hz=rate, n_ticks=self._total, warnings=warnings,
                samplerate_metadata=rate_text, spi_channels=spi, spi_settings=self._saved,
                resolution_source="--samplerate" if samplerate is not None else "header")

        # ------------------------------------------------------------- decoders
        except BaseException:     # a refused file leaves no descriptor open
            self.close()
            raise
    def _spi_settings(self, names: list[str], warnings: list[str]) -> dict[str, str]:
        """DSView's SPI decoder channel assignment, as {role: channel name}."""
        if "decoders" not in self._members:
            return {}
        try:
            decs = json.loads(self._read_small("decoders").decode("utf-8"))
        except (InputError, ValueError, UnicodeDecodeError, RecursionError):
            warnings.append("the .dsl 'decoders' member is unreadable; its settings are ignored")
            return {}
        by_index = {n: name for name, n in self._index.items()}
        for d in decs if isinstance(decs, list) else []:
            if not isinstance(d, dict) or str(d.get("id", "")).split(":")[-1] != "spi":
                continue
            roles: dict[str, str] = {}
            for entry in d.get("channel", []):
                if isinstance(entry, dict):
                    for role, idx in entry.items():
                        if role in SPI_ROLES and isinstance(idx, int) and idx in by_index:
                            roles[role] = by_index[idx]
            if not roles:
                continue
            opts = d.get("options", {}) if isinstance(d.get("options"), dict) else {}
            shown = " ".join(f"{r}={roles[r]}" for r in SPI_ROLES if r in roles)
            # the decoder's mode, word size, bit order: weighed against the signals (core/infer/saved.py)
            self._saved = {k: opts[k] for k in ("cpol", "cpha", "cs_polarity", "wordsize", "bitorder")
                           if k in opts and isinstance(opts[k], (int, str)) and not isinstance(opts[k], bool)}
            self._saved["from"] = "the .dsl's DSView SPI decoder"
            warnings.append(Finding(f"default channel map from the file's DSView SPI decoder settings: {shown}", Cause.NOTE))
            return roles
        return {}

    # ---------------------------------------------------------------- edges
    def edges(self, channels: Sequence[str]) -> Iterator[EdgeBlock]:
        if not channels:
            raise UsageError("no channels requested", path=self.path)
        idx = [self._index[self.info.channels[self.channel_index(c)]] for c in channels]
        n_ch = len(idx)
        weights = (np.uint32(1) << np.arange(n_ch, dtype=np.uint32))
        carry_bits = None          # last sample's bit per channel (uint8[n_ch])
        state = 0
        done = 0                   # samples emitted so far
        self.end_tick = 0
        for b in range(self._blocks):
            try:
                packed = [self._block(n, b) for n in idx]
            except _Cut as c:
                self.end_tick = done
                if done == 0:
                    raise InputError(f"{c.problem}; no sample is readable", path=self.path,
                                     hint="the file is damaged or cut short: re-copy it, or re-save the capture "
                                          "with DSView") from None
                raise CaptureTruncated(f"{c.problem}; results cover the first {done} samples",
                                       path=self.path, at_tick=done, hint="the file is damaged or cut short") from None
            n_bytes = min(len(p) for p in packed)
            problem = None
            if any(len(p) != n_bytes for p in packed):
                problem = f"block {b} has channels of different lengths (damaged)"
            if b < self._blocks - 1 and n_bytes == 0:
                problem = f"block {b} is empty (damaged)"
            n_samples = n_bytes * 8
            if self._total is not None:
                n_samples = min(n_samples, max(self._total - done, 0))
            for start in range(0, (n_samples + 7) // 8, SCAN_BYTES):
                stop = min(start + SCAN_BYTES, (n_samples + 7) // 8)
                sub = np.stack([np.frombuffer(p, np.uint8, stop - start, start) for p in packed])
                limit = min(n_samples - start * 8, (stop - start) * 8)
                ticks, states, carry_bits, state = _scan(sub, carry_bits, state, weights, done, limit)
                if len(ticks):
                    yield EdgeBlock(ticks, states)
                done += limit
            if problem is not None:
                self.end_tick = done
                raise CaptureTruncated(f"{problem}; results cover the first {done} samples", path=self.path,
                                       at_tick=done, hint="re-save the capture with DSView")
        self.end_tick = done
        if done == 0:
            raise InputError("the capture has no samples", path=self.path)
        if self._total is not None and done < self._total:
            raise CaptureTruncated(f"the header promises {self._total} samples, the blocks hold {done}",
                                   path=self.path, at_tick=done, hint="the file is cut short")

    def _block(self, n: int, b: int) -> bytes:
        name = f"L-{n}/{b}"
        m = self._members.get(name)
        if m is None:
            raise _Cut(f"member {name} is missing")
        if m.usize > BLOCK_LIMIT or m.csize > BLOCK_LIMIT:
            raise _Cut(f"member {name} is larger than {BLOCK_LIMIT >> 20} MiB (damaged)")
        off = self._data_offset(m)
        comp = os.pread(self._fd, min(m.csize, max(self._size - off, 0)), off)
        if len(comp) < m.csize:
            raise _Cut(f"member {name} is cut short")
        if m.method == zipfile.ZIP_STORED:
            raw = comp
        elif m.method == zipfile.ZIP_DEFLATED:
            try:
                raw = inflate.decompress_limited(comp, m.usize if m.crc is not None else BLOCK_LIMIT)
            except inflate.error + (inflate.TooLarge,):
                raise _Cut(f"member {name} is damaged") from None
        else:
            raise _Cut(f"member {name} uses unsupported compression {m.method}")
        if m.crc is not None and (len(raw) != m.usize or inflate.crc32(raw) != m.crc):
            raise _Cut(f"member {name} is damaged (CRC or size mismatch)")
        return raw

    def close(self) -> None:
        if getattr(self, "_fd", None) is not None:
            os.close(self._fd)
            self._fd = None


class _Cut(Exception):
    def __init__(self, problem: str):
        super().__init__(problem)
        self.problem = problem


def _scan(sub: np.ndarray, carry_bits, state: int, weights: np.ndarray, base: int, limit: int):
    """Changes in one piece of bit-packed samples.

    ``sub``: uint8[n_ch, n_bytes] (bit i of byte k = sample 8k+i); ``carry_bits``:
    each channel's last sample before this piece (None at the start of the
    capture); ``limit``: samples of the piece that count. Returns (ticks,
    states, new carry bits, last state). Only bytes holding a change are
    unpacked: in SPI captures most bytes are 0x00/0xFF runs."""
    n_ch, n_bytes = sub.shape
    first_bits = sub[:, 0] & 1
    prev_last = np.empty_like(sub)
    prev_last[:, 1:] = sub[:, :-1] >> 7
    prev_last[:, 0] = first_bits if carry_bits is None else carry_bits
    # a byte holds a change if it is not uniform, or its first bit differs from the previous byte's last
    active = ((sub != 0) & (sub != 0xFF)) | ((sub & 1) != prev_last)
    cols = np.flatnonzero(active.any(axis=0))
    out_t = []
    out_s = []
    if carry_bits is None:
        out_t.append(np.zeros(1, np.int64))
        state = int((first_bits.astype(np.uint32) * weights).sum())
        out_s.append(np.array([state], np.uint32))
    if len(cols):
        bits = np.unpackbits(sub[:, cols, None], axis=2, bitorder="little")   # [n_ch, n_cols, 8]
        s = np.tensordot(weights, bits.astype(np.uint32), axes=(0, 0)).astype(np.uint32)  # [n_cols, 8]
        before = np.empty_like(s)
        before[:, 1:] = s[:, :-1]
        before[:, 0] = np.tensordot(weights, prev_last[:, cols].astype(np.uint32), axes=(0, 0))
        r, c = np.nonzero(s != before)
        pos = cols[r].astype(np.int64) * 8 + c
        keep = pos < limit
        pos, vals = pos[keep], s[r[keep], c[keep]]
        out_t.append(pos + base)
        out_s.append(vals)
    # levels at the last counted sample
    last_byte = (limit - 1) // 8
    new_carry = (sub[:, last_byte] >> ((limit - 1) % 8)) & 1
    state = int((new_carry.astype(np.uint32) * weights).sum())
    ticks = np.concatenate(out_t) if out_t else np.empty(0, np.int64)
    states = np.concatenate(out_s).astype(np.uint32) if out_s else np.empty(0, np.uint32)
    return ticks.astype(np.int64), states, new_carry, state


def _int(text, path, key):
    if text is None:
        return None
    try:
        v = int(text)
    except ValueError:
        raise InputError(f"header '{key}' is not a number: {text!r}", path=path) from None
    if v < 0:
        raise InputError(f"header '{key}' is negative: {v}", path=path)
    return v
