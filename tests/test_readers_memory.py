"""Streaming: the new readers' peak memory depends on their chunk size, not on the capture length.

Chunk sizes are shrunk for the test so that small files already span many
chunks; a capture 4x longer must then not need more memory (numpy allocations
are seen by tracemalloc).
"""

from __future__ import annotations

import os
import tracemalloc

import pytest

from spigap.io import csv_changes, open_capture, saleae, vcd
from spigap.synth import Scenario, tracks
from spigap.synth.writers import write_capture

CASES = {
    "vcd": (".vcd", None),
    "csv-saleae": (".csv", None),
    "saleae-v1": ("", "0=SCLK,1=MOSI,2=MISO,3=CS"),
    "scope-keysight": (".csv", "1=SCLK,2=MOSI,3=MISO,4=CS"),
}


def _peak(path, cmap):
    tracemalloc.start()
    try:
        with open_capture(path, channel_map=cmap) as r:
            edges = sum(len(b) for b in r.edges(["SCLK", "MOSI", "MISO", "CS"]))
        return tracemalloc.get_traced_memory()[1], edges
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("fmt", list(CASES))
def test_peak_memory_does_not_grow_with_capture_length(fmt, tmp_path, monkeypatch):
    monkeypatch.setattr(vcd, "CHUNK_BYTES", 128 << 10)
    monkeypatch.setattr(csv_changes, "CHUNK_BYTES", 128 << 10)
    monkeypatch.setattr(saleae, "SLICE", 8 << 10)
    import spigap.io.scope_csv as scope_csv
    monkeypatch.setattr(scope_csv, "CHUNK_BYTES", 128 << 10)
    ext, cmap = CASES[fmt]
    # scope CSVs hold every sample: fewer messages at a lower rate keep the files small
    scale, rate = (20, 20e6) if fmt.startswith("scope") else (1, 100e6)
    peaks = []
    for msgs in (800, 3200):
        sc = Scenario.from_toml(None, {"messages": msgs // scale, "words_per_transfer": 8, "samplerate": rate,
                                       "sclk": rate / 10})
        tl = sc.timeline()
        n = int(round(tl.end_time * sc.samplerate))
        p = write_capture(tmp_path / f"{msgs}{ext}", fmt, tracks(tl, sc.channels, sc.samplerate), sc.samplerate, n)
        size = (sum(os.path.getsize(os.path.join(p, f)) for f in os.listdir(p)) if os.path.isdir(p)
                else os.path.getsize(p))
        peak, edges = _peak(p, cmap)
        assert edges > 1000
        peaks.append((peak, size))
    (small, small_size), (big, big_size) = peaks
    assert big_size > 3.5 * small_size
    assert big < 1.25 * small + (2 << 20), f"{fmt}: peak {small / 1e6:.1f} MB -> {big / 1e6:.1f} MB"
