"""Formatting and parsing of times and frequencies for humans."""

from __future__ import annotations

import math
import re

# the one table of time units (seconds per unit) every reader and writer uses:
# VCD timescales, CSV time columns, scope CSV headers, --option values
TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9, "ps": 1e-12, "fs": 1e-15}


def display_unit(seconds: float, smallest: str = "ps") -> tuple[str, float]:
    """(unit, seconds per unit) that shows ``seconds`` best: the largest unit
    (s, ms, µs, ns, ps) it reaches, ``smallest`` at the least."""
    a = abs(seconds) if seconds else 0.0
    for unit in ("s", "ms", "µs", "ns", "ps"):
        scale = TIME_UNITS[unit]
        if a >= scale * 0.9999 or unit == smallest:
            return unit, scale
    return "ps", TIME_UNITS["ps"]


# below this a time is float noise (the std of identical values, a difference of equal
# sums), not a measurement: no instrument resolves a femtosecond
TIME_NOISE_S = 1e-15


def fmt_time(seconds: float | None, digits: int = 4) -> str:
    """Format a duration with a unit that fits (s, ms, µs, ns, ps); float noise below
    a femtosecond prints as 0. The one formatter of times of every output (text, report,
    batch, check)."""
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return "–"
    if abs(seconds) < TIME_NOISE_S:
        return "0"
    unit, scale = display_unit(seconds)
    return f"{seconds / scale:.{digits}g} {unit}"


def fmt_clocks(value: float | None, samples_per_period: float | None) -> str:
    """Clock periods (the idle clocks between words) on the grid one sample draws on them:
    the digits 1 / samples-per-period allows, and that step beside them, "0.0 (±0.16, one
    sample)". A count of clocks is never below 0: the median gap a sample short of T/2
    (estimator noise, back-to-back words) prints as 0, not -0.02. The one formatter of
    this figure (text, report, check)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    value = max(0.0, float(value))
    if not samples_per_period:
        return f"{value:.2f}"
    res = 1.0 / samples_per_period
    digits = 2 if res < 0.05 else 1 if res < 0.5 else 0
    return f"{value:.{digits}f} (±{res:.2g}, one sample)"


def fmt_freq(hz: float | None, digits: int = 4) -> str:
    if hz is None or (isinstance(hz, float) and math.isnan(hz)):
        return "–"
    for unit, scale in (("GHz", 1e9), ("MHz", 1e6), ("kHz", 1e3)):
        if abs(hz) >= scale * (1 - 0.5 * 10 ** -digits):
            return f"{hz / scale:.{digits}g} {unit}"
    return f"{hz:.{digits}g} Hz"


def fmt_rate(per_s: float | None) -> str:
    if per_s is None or (isinstance(per_s, float) and math.isnan(per_s)):
        return "–"
    if per_s >= 1e3:
        return f"{per_s / 1e3:.4g}k/s"
    return f"{per_s:.4g}/s"


_TIME_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([a-zA-Zµ]*)\s*$")


def parse_time(text: str | float | int) -> float:
    """Parse '10us', '2.6 µs', '250ns', '1e-5', '0.5ms' or a bare number (seconds)."""
    if isinstance(text, (int, float)):
        return float(text)
    m = _TIME_RE.match(text)
    if not m:
        raise ValueError(f"not a duration: {text!r} (use e.g. 10us, 250ns, 1.5ms)")
    value, unit = float(m.group(1)), m.group(2)
    if unit and unit not in TIME_UNITS:
        raise ValueError(f"unknown time unit {unit!r} in {text!r} (use s, ms, us, ns)")
    return value * TIME_UNITS.get(unit, 1.0)


def parse_freq(text: str | float | int) -> float:
    """Parse '3.6MHz', '50 MHz', '8e6', '500k' (Hz)."""
    if isinstance(text, (int, float)):
        return float(text)
    m = re.match(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([kKmMgG]?)(?:[hH][zZ])?\s*$", text)
    if not m:
        raise ValueError(f"not a frequency: {text!r} (use e.g. 3.6MHz, 50e6)")
    # Lower-case m means mega here, as in libsigrok (frequencies below 1 Hz make no sense).
    scale = {"": 1.0, "k": 1e3, "K": 1e3, "m": 1e6, "M": 1e6, "g": 1e9, "G": 1e9}[m.group(2)]
    return float(m.group(1)) * scale


def round_time(seconds: float | None, resolution: float | None) -> float | None:
    """A time for CSV: rounded one decimal digit below the capture's resolution
    (its sample period), so it prints without float noise (3.4000000000000003e-07
    -> 3.4e-07 at 20 ns) and never moves by more than a tenth of a sample; the
    statistics (means, interpolated percentiles) keep sub-sample digits, the
    ±1-sample uncertainty itself is stated beside them (resolution_s)."""
    if seconds is None or not resolution or resolution <= 0 or not math.isfinite(seconds):
        return seconds
    return round(seconds, max(0, math.ceil(-math.log10(resolution))) + 1)


def round_rate(hz: float | None) -> float | None:
    """A frequency or rate for CSV: 7 significant digits (0.1-1 ppm, finer than any
    logic analyzer's timebase, which is good to tens of ppm)."""
    if hz is None or hz == 0 or not math.isfinite(hz):
        return hz
    return round(hz, 6 - math.floor(math.log10(abs(hz))))
