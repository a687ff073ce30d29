"""Writers for every input format spigap reads, driven by synth tracks.

A synthesized timeline becomes per-channel ``Track``s (sample number + level,
``spigap.synth.scenario.tracks``); these writers turn the same tracks into a
VCD, Saleae Logic 2 binary exports (v0/v1, digital or analog), change-only CSV
(Saleae/DSView), oscilloscope CSVs (PicoScope, Keysight, Rigol, R&S min/max)
and analog sigrok .sr files, so one capture can be analyzed in every format and
the results compared (tests/test_readers_cross_format.py).

    from spigap.synth.writers import write_capture
    write_capture("cap.vcd", "vcd", trs, samplerate, n_samples)

They exist for tests and demos; the analog writers render samples chunk by
chunk, so memory stays bounded for large captures too.
"""

from __future__ import annotations

import os
from typing import Sequence

from spigap.synth.srwriter import Track

__all__ = ["write_capture", "FORMATS", "Track"]

FORMATS = ("sr", "vcd", "vcd-vector", "saleae-v0", "saleae-v1", "saleae-analog", "csv-saleae", "csv-dsview",
           "scope-pico", "scope-keysight", "scope-rigol", "scope-rs", "sr-analog", "sr-mixed")


def write_capture(path, fmt: str, tracks: Sequence[Track], samplerate: float, n_samples: int, **kw) -> str:
    """Write ``tracks`` as ``fmt`` (one of ``FORMATS``); returns the path to analyze
    (for Saleae: the folder)."""
    path = os.fspath(path)
    if fmt == "sr":
        from spigap.synth.srwriter import write_sr

        write_sr(path, tracks, samplerate, n_samples, **kw)
    elif fmt in ("vcd", "vcd-vector"):
        from spigap.synth.writers.vcd import write_vcd

        write_vcd(path, tracks, samplerate, n_samples, vector=fmt == "vcd-vector", **kw)
    elif fmt in ("saleae-v0", "saleae-v1", "saleae-analog"):
        from spigap.synth.writers.saleae import write_saleae

        version = 0 if fmt == "saleae-v0" else 1
        write_saleae(path, tracks, samplerate, n_samples, version=version,
                     analog=fmt == "saleae-analog", **kw)
    elif fmt in ("csv-saleae", "csv-dsview"):
        from spigap.synth.writers.csv_changes import write_csv_changes

        write_csv_changes(path, tracks, samplerate, n_samples, dialect=fmt.split("-")[1], **kw)
    elif fmt.startswith("scope-"):
        from spigap.synth.writers.scope_csv import write_scope_csv

        write_scope_csv(path, tracks, samplerate, n_samples, dialect=fmt.split("-", 1)[1], **kw)
    elif fmt in ("sr-analog", "sr-mixed"):
        from spigap.synth.writers.sr_analog import write_sr_analog

        if fmt == "sr-mixed":
            kw.setdefault("analog", [t.name for t in tracks][:-1])
        write_sr_analog(path, tracks, samplerate, n_samples, **kw)
    else:
        raise ValueError(f"unknown format {fmt!r}; known: {', '.join(FORMATS)}")
    return path


def changes(tracks: Sequence[Track], n_samples: int):
    """Merged change list of all tracks: (sample numbers, track index, level), in
    time order, only real changes, limited to [0, n_samples); plus the levels at
    sample 0."""
    import numpy as np

    cleaned = [t.clean() for t in tracks]
    init = []
    parts_s, parts_c, parts_l = [], [], []
    for j, t in enumerate(cleaned):
        s, lv = t.samples, t.levels.astype(np.uint8)
        at0 = s <= 0
        level0 = int(lv[at0][-1]) if at0.any() else int(t.initial)
        init.append(level0)
        keep = (s > 0) & (s < n_samples)
        s, lv = s[keep], lv[keep]
        prev = np.concatenate([[level0], lv[:-1]]).astype(np.uint8)
        real = lv != prev
        parts_s.append(s[real])
        parts_c.append(np.full(int(real.sum()), j, np.int16))     # track index: 2 bytes a change, not 8
        parts_l.append(lv[real])
    s = np.concatenate(parts_s) if parts_s else np.empty(0, np.int64)
    c = np.concatenate(parts_c) if parts_c else np.empty(0, np.int16)
    lv = np.concatenate(parts_l) if parts_l else np.empty(0, np.uint8)
    order = np.lexsort((c, s))
    return s[order], c[order], lv[order], init


def levels(track: Track, start: int, stop: int):
    """Levels (uint8) of one track over samples [start, stop)."""
    import numpy as np

    from spigap.synth.srwriter import render

    return render([track.clean()], [0], max(start, 0), stop, np.uint8)


def analog(track: Track, start: int, stop: int, *, v_high: float = 3.3, v_low: float = 0.0,
           noise: float = 0.0, rise: int = 1, rng=None):
    """Voltages (float32) of one track over samples [start, stop): logic levels
    with a linear edge of ``rise`` samples (a moving average, so an edge's
    mid-level crossing lands (rise-1)/2 samples late on every channel alike)
    plus Gaussian noise of ``noise`` V rms. A track that renders its own volts
    (synth/analog_bus.py's ``LineSource``: RC edges, ringing, noise with known
    truth) gives those instead."""
    import numpy as np

    if hasattr(track, "volts"):
        return np.asarray(track.volts(max(start, 0), stop), np.float32)

    r = max(int(rise), 1)
    pad = max(0, (r - 1) - start)             # samples before 0 take the level of sample 0
    lv = levels(track, max(start - (r - 1), 0), stop).astype(np.float64)
    if pad and len(lv):
        lv = np.concatenate([np.full(pad, lv[0]), lv])
    if r > 1:
        lv = np.convolve(lv, np.ones(r) / r, mode="valid")
    v = v_low + (v_high - v_low) * lv
    if noise:
        rng = rng if rng is not None else np.random.default_rng(0)
        v = v + rng.normal(0.0, noise, len(v))
    return v.astype(np.float32)
