"""A synthesized capture and its one writer, whichever form of recipe planned it.

Either form (recipe.py) builds a ``Capture``: the bus's timeline (every CS window,
word and clock edge, timeline.py), one CS line per device as on the wire, and how it
is sampled. ``write`` turns it into the .sr (SCLK, MOSI, MISO, the CS lines, any
extra lines of a device generator; the recipe inside), the kernel trace and the
ground truth. A one-device capture is a bus of one: the same tracks, the same
writer; what differs is each form's own knowledge, its truth and its trace
(``GapCapture`` in scenario.py, ``BusCapture`` in bus.py).
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Sequence

import numpy as np

from spigap.synth.recipe import Recipe, check_size
from spigap.synth.srwriter import Track, write_sr
from spigap.synth.timeline import Timeline


@dataclasses.dataclass
class TraceOptions:
    """The kernel trace's layout and clock (spigap synth --ftrace, --trace-*); names as
    kernel.KernelLatencies'. A shared bus writes the 'trace' layout and no lost events,
    other devices or noise."""

    layout: str = "trace"
    ns: bool = False                    # 9 decimals instead of 6
    drift_ppm: float = 0.0              # bus_time = offset + (1 + drift_ppm·1e-6) · trace_time
    clock_start_s: float = 1000.0       # the trace clock at bus time 0
    lost: float = 0.0
    other_device: float = 0.0
    noise_rate_hz: float = 0.0


@dataclasses.dataclass
class CsLine:
    """One device's CS line: its name, polarity and every window's assert and deassert (s)."""

    name: str
    active_low: bool
    assert_t: np.ndarray
    deassert_t: np.ndarray


@dataclasses.dataclass
class Capture:
    """A capture as planned, in seconds; sampled from sample ``offset`` on, ``n_samples`` long."""

    recipe: Recipe
    timeline: Timeline
    cs: list[CsLine]
    offset: int = 0
    n_samples: int = 0
    traced: dict | None = None          # the kernel trace's truth, once written

    def tracks(self) -> list[Track]:
        r = self.recipe
        return tracks(self.timeline, r.channels, r.samplerate, self.offset, self.cs)

    # each form's own: its truth, its kernel trace, how it sums itself up
    def truth(self) -> dict:
        raise NotImplementedError

    def check_trace(self, opts: TraceOptions) -> None:
        """Refuse trace options this form cannot write (before anything is written)."""

    def write_trace(self, path, opts: TraceOptions) -> dict:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError

    def describe_trace(self, opts: TraceOptions) -> str:
        raise NotImplementedError


def tracks(tl: Timeline, channels: dict, samplerate: float, offset: int = 0,
           cs: Sequence[CsLine] | None = None) -> list[Track]:
    """Quantize a timeline to sample numbers (round to nearest), one Track per channel: SCLK,
    MOSI, MISO (those ``channels`` names), the CS lines (``cs``; default: the timeline's own
    windows on ``channels['cs']``), then the timeline's extra lines."""
    q = lambda t: np.rint(np.asarray(t) * samplerate).astype(np.int64) - offset  # noqa: E731
    shape = tl.shape
    out = []
    if channels.get("clk"):
        out.append(Track(channels["clk"], q(tl.clk_t), tl.clk_level, shape.cpol))
    if channels.get("mosi"):
        out.append(Track(channels["mosi"], q(tl.mosi_t), tl.mosi_bits, 0))
    if channels.get("miso"):
        out.append(Track(channels["miso"], q(tl.miso_t), tl.miso_bits, 0))
    if cs is None:
        cs = [CsLine(channels["cs"], shape.cs_active_low, tl.cs_assert, tl.cs_deassert)] if channels.get("cs") else []
    for line in cs:
        act = 0 if line.active_low else 1
        t = np.empty(2 * len(line.assert_t))
        t[0::2], t[1::2] = line.assert_t, line.deassert_t
        lv = np.tile(np.array([act, 1 - act], np.uint8), len(line.assert_t))
        out.append(Track(line.name, q(t), lv, 1 - act))
    for name, (times, levels, idle) in tl.extra.items():
        out.append(Track(name, q(times), np.asarray(levels, np.uint8), idle))
    return out


def write(recipe, path, *, truth_path=None, ftrace_path=None, trace: TraceOptions | None = None,
          tl: Timeline | None = None, **writer_kw) -> Capture:
    """Write the capture of ``recipe`` (a Scenario or a Bus; ``tl``: another timeline with the
    scenario's settings) to ``path`` (.sr), its kernel trace to ``ftrace_path`` and its truth
    (JSON, with the trace's under "trace") to ``truth_path``. Returns the capture."""
    trace = trace or TraceOptions()
    cap = recipe.capture(tl)
    if ftrace_path:
        cap.check_trace(trace)
    check_size(recipe.FORM, cap.n_samples)
    writer_kw.setdefault("chunk_bytes", recipe.chunk_bytes)
    write_sr(path, cap.tracks(), recipe.samplerate, cap.n_samples,
             extra_members={"spigap-synth.toml": recipe.recipe()}, **writer_kw)
    if ftrace_path:
        cap.traced = cap.write_trace(ftrace_path, trace)
    if truth_path:
        from spigap.outfile import write_output

        truth = cap.truth()
        if cap.traced is not None:
            truth["trace"] = cap.traced
        write_output(os.fspath(truth_path), json.dumps(truth, indent=1))
    return cap


def json_list(a) -> list:
    """An array as a JSON list, NaN as null."""
    return [None if (isinstance(x, float) and np.isnan(x)) else x for x in np.asarray(a).tolist()]
