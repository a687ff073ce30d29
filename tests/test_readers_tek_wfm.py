"""Tektronix .wfm files written by another tool: tm_data_types, Tektronix's own Apache-2.0
package (tests/tekwfm_oracle.py writes them at test time, in the venv `make oracles` makes).

Oracles: what tm_data_types was given (the raw samples, their scale, offset and time base, the
FastFrame trigger times: every volt and every edge is known), and two readers we did not write
reading the same files: fftekwfm (int16 only: it refuses the other sample types and
big-endian files) and RigolWFM's Tektronix parser (single records; it refuses FastFrame).

What is not a file tm_data_types wrote as it is: version 1 (tm_data_types 0.5.0 fails to write
it; the version-2 file with its summary-frame field removed stands in, checked against
RigolWFM's version-1 parser) and the big-endian curves (tm_data_types writes them in the
machine's byte order under a big-endian header; the test swaps them). No file here comes
from a real oscilloscope: tests/data/scopes/README.md says why.
"""

from __future__ import annotations

import numpy as np
import pytest
from tekwfm_oracle import FRAME_LEN, LEVELS

from spigap.io import check_stream, open_capture

SINGLE = [*LEVELS, "v2_int16", "v1_int16", "be_int16"]
FASTFRAME = ["ff_int16", "ff_int8", "ff_v2_int16", "be_ff_int16"]


def read(path, channel="CH1"):
    """(info, volts of every sample, edge ticks) as our reader gives them."""
    from spigap.io.scopefile import WaveformReader

    with open_capture(path) as r:
        assert isinstance(r, WaveformReader)
        (wf,) = r.waveforms
        v = wf.volts(0, wf.n)
        blocks = list(check_stream(r.edges([channel]), 1, path=str(path)))
        ticks = np.concatenate([b.ticks for b in blocks])[1:]
        return r.info, wf, v, ticks


@pytest.mark.parametrize("name", SINGLE + FASTFRAME)
def test_volts_time_base_and_edges_are_what_tm_data_types_was_given(tek_wfm_files, name):
    w = tek_wfm_files[name]
    info, wf, v, ticks = read(w.path)
    assert info.format == f"Tektronix WFM v{w.version}" and info.channels == ["CH1"]
    assert wf.dtype == (">" if w.big_endian else "<") + w.raw.dtype.str[1:]
    assert np.array_equal(v, w.volts())                      # raw * scale + offset, bit for bit
    assert info.tick_s == w.x_spacing
    assert info.time_offset_s == pytest.approx(-w.trigger_index * w.x_spacing, rel=1e-12)
    assert np.array_equal(ticks, w.edge_ticks())            # every run's first sample, nothing else
    assert len(ticks) > 50
    if w.fastframe:
        assert np.array_equal(wf.frame_ticks, w.frame_ticks)
        assert info.n_ticks == w.frame_ticks[-1] + FRAME_LEN
        assert any(f"FastFrame: {len(w.frame_ticks)} frames of {FRAME_LEN} samples placed at their trigger "
                   "times" in x for x in info.warnings)
    else:
        assert info.n_ticks == w.raw.size and not any("FastFrame" in x for x in info.warnings)


@pytest.mark.parametrize("name", SINGLE)
def test_single_records_are_rigolwfms(tek_wfm_files, name):
    """RigolWFM's Tektronix parser (its own Kaitai layouts of versions 1, 2/3, both byte orders)."""
    import warnings

    import RigolWFM.wfm as rw

    w = tek_wfm_files[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = rw.Wfm.from_file(str(w.path))
    (c,) = [c for c in ref.channels if c.enabled]
    info, _, v, _ = read(w.path)
    theirs = np.asarray(c.volts, np.float64)
    assert len(theirs) == len(v)
    assert np.max(np.abs(theirs - v)) <= 1e-6 * max(1.0, float(np.max(np.abs(v))))   # RigolWFM: float32
    assert c.seconds_per_point == pytest.approx(info.tick_s, rel=1e-12)
    assert c.times[0] == pytest.approx(info.time_offset_s, rel=1e-12)


@pytest.mark.parametrize("name", ["int16", "ff_int16"])
def test_int16_records_are_fftekwfms(tek_wfm_files, name):
    """fftekwfm reads version-3 little-endian int16 files only; with the pre- and postcharge
    samples asked for, its frames hold ours between them."""
    import fftekwfm

    w = tek_wfm_files[name]
    ref = fftekwfm.TekWFM(str(w.path)).load_frames(scale=True, pre=True, post=True)
    info, _, v, _ = read(w.path)
    n = w.raw.shape[-1]
    assert ref.frames.shape == (v.size // n, w.pre + n + w.post)
    assert np.array_equal(ref.frames[:, w.pre:w.pre + n].reshape(-1), v)
    assert ref.tscale == info.tick_s and ref.toffset == pytest.approx(info.time_offset_s, rel=1e-12)

