"""Write sigrok .sr session files (what libsigrok's srzip output module writes).

Zip members: ``version`` ("2"), ``metadata`` (the keys in libsigrok's order),
``logic-1-1..N`` (little-endian samples, ``unitsize`` bytes each; libsigrok
master buffers 4 MiB chunks). Extra members (our synthesis recipe) are
ignored by libsigrok. Samples are rendered chunk by chunk, so writing a
capture takes memory for one chunk, not for the capture.
"""

from __future__ import annotations

import dataclasses
import os
import zipfile
from typing import Iterable, Sequence

import numpy as np

CHUNK_BYTES = 4 << 20


@dataclasses.dataclass
class Track:
    """One logic channel: its level becomes ``levels[i]`` at sample ``samples[i]``."""

    name: str
    samples: np.ndarray
    levels: np.ndarray
    initial: int = 0

    def clean(self) -> "Track":
        s = np.asarray(self.samples, np.int64)
        lv = np.asarray(self.levels, np.uint8)
        order = np.argsort(s, kind="stable")
        s, lv = s[order], lv[order]
        keep = np.ones(len(s), bool)
        keep[:-1] = s[1:] != s[:-1]                  # same sample twice: the later one wins
        return Track(self.name, s[keep], lv[keep], self.initial)


def samplerate_string(hz: float) -> str:
    """Like libsigrok's sr_samplerate_string: '50 MHz', '31.5 kHz', '1 GHz'."""
    for unit, scale in (("GHz", 1e9), ("MHz", 1e6), ("kHz", 1e3)):
        if hz >= scale:
            return f"{hz / scale:g} {unit}"
    return f"{hz:g} Hz"


def render(tracks: Sequence[Track], bits: Sequence[int], start: int, stop: int, dtype) -> np.ndarray:
    """Samples [start, stop) of all tracks packed into ``dtype`` words."""
    n = stop - start
    out = np.zeros(n, dtype=dtype)
    for tr, bit in zip(tracks, bits):   # one vectorized pass per channel
        i0 = int(np.searchsorted(tr.samples, start, side="right"))
        i1 = int(np.searchsorted(tr.samples, stop, side="left"))
        init = int(tr.levels[i0 - 1]) if i0 > 0 else tr.initial
        pos = np.concatenate([[0], tr.samples[i0:i1] - start])
        lev = np.concatenate([[init], tr.levels[i0:i1]]).astype(dtype)
        lengths = np.diff(np.append(pos, n))
        out |= np.repeat(lev, lengths) << dtype(bit)
    return out


def write_sr(path, tracks: Sequence[Track], samplerate: float, n_samples: int, *,
             chunk_bytes: int | Iterable[int] = CHUNK_BYTES, probe_numbers: Sequence[int] | None = None,
             unitsize: int | None = None, version: int = 2, single_member: bool = False,
             extra_members: dict[str, str] | None = None, compresslevel: int = 6,
             samplerate_text: str | None = None, total_probes: int | None = None) -> None:
    """Write ``tracks`` as a .sr file.

    ``probe_numbers`` (1-based, may have holes) place channels at other bit
    positions; ``unitsize`` may exceed what the channels need; ``chunk_bytes``
    may be a list of sizes (cycled) to cut chunks anywhere.
    """
    tracks = [t.clean() for t in tracks]
    probes = list(probe_numbers) if probe_numbers else list(range(1, len(tracks) + 1))
    if len(probes) != len(tracks):
        raise ValueError("one probe number per track")
    need = (max(probes) + 7) // 8
    us = unitsize or need
    if us < need or us > 8:
        raise ValueError(f"unitsize {us} cannot hold probe {max(probes)}")
    dtype = {1: np.uint8, 2: np.uint16, 3: np.uint32, 4: np.uint32}.get(us, np.uint64)
    bits = [p - 1 for p in probes]
    total = total_probes or max(8 * us if unitsize else len(tracks), max(probes))
    lines = ["[global]", "sigrok version=0.5.2", "", "[device 1]", "capturefile=logic-1",
             f"total probes={total}", f"samplerate={samplerate_text or samplerate_string(samplerate)}",
             "total analog=0"]
    lines += [f"probe{p}={t.name}" for p, t in zip(probes, tracks)]
    lines.append(f"unitsize={us}")
    sizes = [chunk_bytes] if isinstance(chunk_bytes, int) else list(chunk_bytes)
    from spigap.outfile import open_output, zip_entry

    # whole or not at all (outfile.py): a synth run stopped half-way leaves no half capture
    with open_output(os.fspath(path), binary=True) as out, \
            zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=compresslevel) as zf:
        zf.writestr(zip_entry(zf, "version"), str(version))
        zf.writestr(zip_entry(zf, "metadata"), "\n".join(lines) + "\n")
        if single_member:
            with zf.open(zip_entry(zf, "logic-1"), "w", force_zip64=True) as f:
                for start in range(0, n_samples, CHUNK_BYTES // us):
                    stop = min(n_samples, start + CHUNK_BYTES // us)
                    f.write(_pack(render(tracks, bits, start, stop, dtype), us))
        else:
            start, k = 0, 0
            while start < n_samples:
                size = max(1, sizes[k % len(sizes)] // us)
                stop = min(n_samples, start + size)
                zf.writestr(zip_entry(zf, f"logic-1-{k + 1}"), _pack(render(tracks, bits, start, stop, dtype), us))
                start, k = stop, k + 1
        for name, text in (extra_members or {}).items():
            zf.writestr(zip_entry(zf, name), text)


def _pack(samples: np.ndarray, unitsize: int) -> bytes:
    if samples.dtype.itemsize == unitsize:
        return samples.astype(samples.dtype.newbyteorder("<"), copy=False).tobytes()
    raw = samples.astype("<u8").view(np.uint8).reshape(-1, 8)
    return np.ascontiguousarray(raw[:, :unitsize]).tobytes()
