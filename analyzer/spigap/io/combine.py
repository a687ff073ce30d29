"""One acquisition saved as several files: the files' channels as one capture.

Scopes save one file per channel (Tektronix ``tek0000CH1.isf`` ...
``tek0000CH4.isf``, Agilent ``scope_7_1.csv`` + ``scope_7_2.csv``).
``CombinedReader`` puts the channels of several readers side by side and
merges their edge streams (io/threshold.py ``merge``) when they share one time
base: the same tick (to 1 ppm), the same time of tick 0 (to half a tick) and,
where the files say, the same length. Anything else is refused in one line:
files of different acquisitions cannot be lined up sample by sample.

Channel names are each file's own; a name that two files share gets the
file's stem (``tek0001CH1:CH1``). ``group_acquisitions`` sorts a list of paths
into acquisitions by their names (``<stem>CH<n>.<ext>``; ``<stem>_<n>.<ext>`` is
not grouped), for ``spigap batch`` (batch/discover.py).
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
from typing import Iterator, Sequence

import numpy as np

from spigap.findings import Finding, cause_of
from spigap.errors import InputError
from spigap.io.base import CaptureReader, EdgeBlock
from spigap.io.scopefile import describe_time_base, same_time_base, unique_names
from spigap.io.threshold import Source, merge


class CombinedReader(CaptureReader):
    format_name = "combined"

    def __init__(self, readers: list[CaptureReader]):
        self.readers = readers
        infos = [r.info for r in readers]
        first = infos[0]
        path = " + ".join(i.path for i in infos)
        for info in infos[1:]:
            ok = same_time_base(first.tick_s, first.time_offset_s, info.tick_s, info.time_offset_s)
            if ok and first.n_ticks and info.n_ticks:
                ok = first.n_ticks == info.n_ticks
            if not ok:
                raise InputError(
                    f"the files are not one acquisition: {os.path.basename(first.path)} has "
                    f"{describe_time_base(first.tick_s, first.time_offset_s, first.n_ticks)}, "
                    f"{os.path.basename(info.path)} has "
                    f"{describe_time_base(info.tick_s, info.time_offset_s, info.n_ticks)}", path=path,
                    hint="give the files of one acquisition (same sample interval, start and length); "
                         "to analyze each as a capture of its own: spigap batch "
                         + " ".join(shlex.quote(i.path) for i in infos))
        names: list[str] = []
        self._owner: list[tuple[int, str]] = []        # global channel -> (reader, its own name)
        all_names = [n for i in infos for n in i.channels]
        for k, info in enumerate(infos):
            stem = os.path.splitext(os.path.basename(info.path))[0]
            for n in info.channels:
                names.append(f"{stem}:{n}" if all_names.count(n) > 1 else n)
                self._owner.append((k, n))
        names = unique_names(names)         # the same file twice: big:Ch2, big:Ch2_2
        warnings: list[str] = []
        for info in infos:
            warnings += [Finding(f"{os.path.basename(info.path)}: {w}", cause_of(w)) for w in info.warnings]
        keys: dict[str, str] = {}
        for info in infos:
            keys.update(info.channel_keys)
        formats = sorted({i.format for i in infos})
        self.info = dataclasses.replace(
            first, path=path, format=f"{' / '.join(formats)}, {len(infos)} files", channels=names,
            warnings=warnings, analog_channels=[names[j] for j, (k, n) in enumerate(self._owner)
                                                if n in infos[k].analog_channels],
            thresholds={}, channel_keys=keys, spi_channels={})
        self._seen = [len(i.warnings) for i in infos]

    def edges(self, channels: Sequence[str]) -> Iterator[EdgeBlock]:
        wanted = [self.channel_index(c) for c in channels]
        per_reader: dict[int, list[tuple[int, str]]] = {}
        for bit, j in enumerate(wanted):
            k, name = self._owner[j]
            per_reader.setdefault(k, []).append((bit, name))
        sources = []
        for k, items in per_reader.items():
            bits = [b for b, _ in items]
            runs = _remap(self.readers[k].edges([n for _, n in items]), bits)
            sources.append(Source(runs, shift=0, mask=sum(1 << b for b in bits)))
        self.end_tick = None
        try:
            yield from merge(sources)
        finally:
            ends = [r.end_tick for r in self.readers if r.end_tick is not None]
            self.end_tick = max(ends) if ends else None
            self._collect()

    def _collect(self) -> None:
        """Thresholds and warnings the readers found while streaming."""
        for k, reader in enumerate(self.readers):
            for name, v in reader.info.thresholds.items():
                self.info.thresholds[self.info.channels[self._owner.index((k, name))]] = v
            new = reader.info.warnings[self._seen[k]:]
            self._seen[k] = len(reader.info.warnings)
            self.info.warnings.extend(Finding(f"{os.path.basename(reader.info.path)}: {w}", cause_of(w)) for w in new)

    def set_volts_tap(self, tap) -> None:
        for k, reader in enumerate(self.readers):
            if tap is None:
                reader.set_volts_tap(None)
                continue
            reader.set_volts_tap(_renamed(tap, {name: self.info.channels[j]
                                                for j, (kk, name) in enumerate(self._owner) if kk == k}))

    def close(self) -> None:
        for r in self.readers:
            r.close()


def _renamed(tap, names: dict):
    """A volts tap that hands on a reader's channel under its combined name."""
    def renamed(name, t0, v):
        tap(names.get(name, name), t0, v)
    return renamed


def _remap(blocks, bits: list[int]):
    """A reader's states (bit i = its i-th requested channel) at the combined positions."""
    for b in blocks:
        s = b.states
        out = np.zeros(len(s), np.uint32)
        for i, bit in enumerate(bits):
            out |= ((s >> np.uint32(i)) & np.uint32(1)) << np.uint32(bit)
        yield b.ticks, out


_CHANNEL_SUFFIX = re.compile(r"^(?P<stem>.*?)CH(?P<n>\d{1,2})$", re.I)


def group_acquisitions(paths: Sequence[str]) -> list[list[str]]:
    """Paths grouped into acquisitions: files whose names differ only in a trailing
    ``CH<n>`` (``tek0000CH1.isf``/``tek0000CH2.isf``, as Tektronix and Rigol name
    them) in one group, in channel order; every other file alone (``run_1.csv`` and
    ``run_2.csv`` are two captures as often as two channels: name those on the
    command line)."""
    groups: dict[tuple[str, str, str], list[tuple[int, str]]] = {}
    order: list[tuple[str, str, str]] = []
    for i, p in enumerate(paths):
        stem, ext = os.path.splitext(os.path.basename(p))
        m = _CHANNEL_SUFFIX.match(stem)
        # a file named twice is two captures (compare --before a.sr a.sr), never one
        key = (os.path.dirname(p), m.group("stem") if m else f"{stem}\0{i}", ext.lower())
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append((int(m.group("n")) if m else 0, p))
    out = []
    for key in order:
        members = sorted(groups[key])
        if len(members) > 1:
            out.append([p for _, p in members])
        else:
            out.append([members[0][1]])
    return out
