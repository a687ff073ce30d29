"""Write Tektronix .wfm files with tm_data_types (Tektronix's Apache-2.0 package): the files the
tests read with spigap, fftekwfm and RigolWFM (tests/test_readers_scopes.py).

Runs in the oracles venv (tests/oracles/requirements.txt), not with spigap:

    .venv-oracles/bin/python tests/oracles/write_tek_wfm.py SPEC.json

SPEC.json is a list of files, each a dict:

    path            the .wfm to write
    dtype           the curve's sample type (int8 int16 int32 uint8 uint32 uint64 float32 float64)
    samples         one record (a list), or FastFrame frames (a list of lists)
    y_spacing, y_offset, x_spacing, trigger_index
    timing          FastFrame only: per frame [tt_offset, gmt_second, fractional_second]
    precharge, postcharge   FastFrame only: samples before and after each frame's data
    version         3 (default) or 2
    big_endian      true: byte order 0xF0F0 (see below)

Prints a JSON object: tm_data_types' version. Nothing here reads a file back.

Version 2 and big-endian: tm_data_types picks the byte order and version from `product`, whose
only member (InstrumentSeries.TEKSCOPE) is version 3, little-endian; its writer has the
version-1/2 layout (4-byte point densities, its DimensionsUserViewVer12) and both byte orders
(its _ENDIAN_PREFIX_LOOKUP), reached by handing it an InstrumentSeriesDataStyle of version 2 or
of byte order 0xF0F0. Version 1 fails inside tm_data_types 0.5.0 (ValueError). A big-endian
file is written with its header big-endian but its curve in the machine's byte order (numpy's
tofile()), so it is not a big-endian file as the format defines it: the tests swap its curve.
"""

from __future__ import annotations

import json
import sys
import types

import numpy as np
import tm_data_types as tm
from tm_data_types.helpers.enums import ByteOrderFormat, VersionNumber
from tm_data_types.helpers.instrument_series import InstrumentSeries, InstrumentSeriesDataStyle


def product(version: int, big_endian: bool):
    if version == 3 and not big_endian:
        return InstrumentSeries.TEKSCOPE
    style: InstrumentSeriesDataStyle = InstrumentSeries.TEKSCOPE.value
    style = style._replace(version=VersionNumber(f":WFM#00{version}".encode()))
    if big_endian:      # tm_data_types' names are swapped: its INTEL is b"\xf0\xf0", written with ">"
        style = style._replace(byte_order=ByteOrderFormat.INTEL)
    return types.SimpleNamespace(value=style)


def waveform(spec: dict):
    dtype = np.dtype(spec["dtype"])
    if "timing" in spec:
        frames = np.asarray(spec["samples"], dtype=dtype)
        w = tm.FastFrameAnalogWaveform.create_fastframe(
            frame_count=len(frames), record_length=frames.shape[1], dtype=dtype,
            precharge_length=spec.get("precharge", 0), postcharge_length=spec.get("postcharge", 0))
        for k, (frame, (tt, gmt, frac)) in enumerate(zip(frames, spec["timing"], strict=True)):
            w.fill_frame(k, frame)
            w.set_frame_timing(k, tt_offset=tt, gmt_sec=gmt, gmt_fract=frac)
    else:
        w = tm.AnalogWaveform()
        w.y_axis_values = np.asarray(spec["samples"], dtype=dtype)
    w.y_axis_spacing = spec["y_spacing"]
    w.y_axis_offset = spec["y_offset"]
    w.x_axis_spacing = spec["x_spacing"]
    w.trigger_index = spec["trigger_index"]
    return w


def main(spec_path: str) -> None:
    with open(spec_path) as f:
        specs = json.load(f)
    for spec in specs:
        tm.write_file(spec["path"], waveform(spec), product=product(spec.get("version", 3), spec.get("big_endian", False)))
    print(json.dumps({"tm_data_types": tm.__version__}))


if __name__ == "__main__":
    main(sys.argv[1])
