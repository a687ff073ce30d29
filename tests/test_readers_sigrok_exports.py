"""Files written by a tool we did not write: sigrok-cli's own ``-O vcd`` and
``-O csv`` exports of the real captures analyze like the .sr they came from.

For every real configuration (captures/real, channel maps from
conftest.REAL_CAPTURES), sigrok-cli converts the .sr; spigap analyzes the
export and the original with the same SPI settings. Words must be equal word
for word, transfer boundaries equal in seconds (the VCD's tick is its
``$timescale``, which sigrok sets to a divisor of the sample period; the CSV's
tick is one sample), and every gap classified alike.

Size bound, measured with sigrok-cli 0.7.2 on the 2-core reference machine:
``-O vcd`` of the enc28j60 capture takes ~9 s, ``-O csv`` (one row per sample)
of the 10 M+ sample captures writes 33 MB to 8 GB; those are left out, the
others take well under a second each.
"""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

from spigap.api import SpiConfig, analyze_device
from conftest import REAL_CAPTURES, real

SLOW_VCD = {"enc28j60"}
CSV_OK = {"st25r3916", "sdcard", "ade7758", "adxl345", "mrf24j40", "atmega32", "ssi32"}

_exports: dict = {}


def export(tmp_path_factory, name: str, fmt: str):
    key = (REAL_CAPTURES[name][0], fmt)
    if key not in _exports:
        d = tmp_path_factory.mktemp("export")
        out = d / f"capture.{fmt}"
        subprocess.run(["sigrok-cli", "-i", str(real(key[0])), "-O", fmt, "-o", str(out)], check=True,
                       capture_output=True, timeout=120)
        _exports[key] = out
    return _exports[key]


def _same(name, original, exported):
    a, b = original, exported
    assert b.truncated is None, b.truncated
    assert np.array_equal(a.mosi, b.mosi) and np.array_equal(a.miso, b.miso), f"{name}: words differ"
    assert len(a.start) == len(b.start) > 0
    for field in ("start", "end"):
        ta = getattr(a, field) * a.tick_s
        tb = getattr(b, field) * b.tick_s
        assert np.allclose(ta, tb, rtol=1e-12, atol=1e-3 * a.tick_s), f"{name}: transfer {field} times differ"
    assert np.array_equal(a.gap_kind, b.gap_kind), f"{name}: gaps classified differently"


def _cfg(name):
    # channel names are the same in the exports; no samplerate override (the wrong
    # ad7920 metadata rate goes into the exports too, so times stay comparable)
    return SpiConfig(**REAL_CAPTURES[name][1])


@pytest.mark.parametrize("name", sorted(set(REAL_CAPTURES) - SLOW_VCD))
def test_sigrok_vcd_export_analyzes_like_the_sr(sigrok_cli, tmp_path_factory, name):
    f = REAL_CAPTURES[name][0]
    vcd = export(tmp_path_factory, name, "vcd")
    _same(name, analyze_device(real(f), _cfg(name)), analyze_device(vcd, _cfg(name)))


@pytest.mark.parametrize("name", sorted(CSV_OK))
def test_sigrok_csv_export_analyzes_like_the_sr(sigrok_cli, tmp_path_factory, name):
    f = REAL_CAPTURES[name][0]
    csv = export(tmp_path_factory, name, "csv")
    b = analyze_device(csv, _cfg(name))
    assert b.info.format == "sigrok CSV"
    a = analyze_device(real(f), _cfg(name))
    assert b.tick_s == a.tick_s and b.end_tick == a.end_tick
    _same(name, a, b)
