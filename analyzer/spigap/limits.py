"""Every bound spigap holds its inputs to, in one place (docs/cli.md, "Bounds").

A file or an option beyond one of these is refused in one line that names the
bound (exit 2), before the work it would make absurd: a sample rate that would
spread a 3 ms capture over years of plot bins, a "profile" that is /dev/zero, a
TOML file nested thousands deep, more channels than one edge stream holds.
Values that are possible but odd for an SPI capture (a 10 Hz sample rate) are
read, with a warning.

This is a bottom layer: it imports nothing from spigap but spigap.findings (a warning's cause).
"""

from __future__ import annotations

import math

from spigap.findings import Cause, Finding

# ------------------------------------------------------------------ files
# A profile, a device file, a scenario, a manifest, a .pvs: small text a person writes. Read whole, so read at most this much (a capture's samples stream instead).
TEXT_FILE_BYTES = 4 << 20
# A kernel trace as text, or a user-space timestamp log: read line by line into columns,
# about 1.5 to 2 bytes of memory per byte of text (so one fits beside the capture in 2 GiB).
TRACE_FILE_BYTES = 512 << 20
# TOML tables, arrays and inline tables inside each other (a profile needs 4)
TOML_DEPTH = 32

# ------------------------------------------------------------------ channels
# channels in one edge stream: the state word of io/base.EdgeBlock is 32 bits wide
# (numpy uint32, and the compiled core's framers); a request for more is one line
STREAM_CHANNELS = 32

# ------------------------------------------------------------------ message structure
# transfers per spi_message (--transfers-per-message, a manifest's or a profile's
# transfers_per_message): spidev's SPI_IOC_MESSAGE(N) holds at most 511, a driver's message
# a few thousand; a billion is no message. Past 2^63 the grouping's integers overflowed (exit 3).
TRANSFERS_PER_MESSAGE_MAX = 10**9

# ------------------------------------------------------------------ timing at the pins
# --rx-setup, --rx-hold, --rx-sample-delay (compare's --before-/--after-), --pin-margin: times at
# a receiver's pin, nanoseconds; a millisecond already asks for an SCLK below 500 Hz (beyond it
# the device-tree advice said "spi-max-frequency = <0>").
PIN_TIME_MAX_S = 1e-3

# ------------------------------------------------------------------ time bases
# The sample rate of a capture, from its file or --samplerate/--rate, and the tick (one
# sample, or a VCD's time unit) it implies. Outside these: refused. 1 fs is VCD's finest
# time unit; below 1 Hz (a tick above 1 s) no SPI capture is meant.
SAMPLERATE_MIN_HZ = 1.0
SAMPLERATE_MAX_HZ = 1e15
TICK_MIN_S = 1.0 / SAMPLERATE_MAX_HZ
TICK_MAX_S = 1.0 / SAMPLERATE_MIN_HZ
# A sampled capture below 1 kHz or above 1 THz is read with a warning (a wrong unit, a
# damaged header?); event formats (VCD) have a time unit, not a rate, and get none.
PLAUSIBLE_MIN_HZ = 1e3
PLAUSIBLE_MAX_HZ = 1e12


def fmt_hz(hz: float) -> str:
    """'1 Hz', '1e+15 Hz': the bounds as the messages print them."""
    return f"{hz:g} Hz"


def rate_problem(hz: float) -> str | None:
    """Why ``hz`` cannot be a sample rate or a clock (None: it can)."""
    if not (math.isfinite(hz) and SAMPLERATE_MIN_HZ <= hz <= SAMPLERATE_MAX_HZ):
        return (f"{hz:g} Hz is outside {fmt_hz(SAMPLERATE_MIN_HZ)} .. {fmt_hz(SAMPLERATE_MAX_HZ)}, "
                "the rates spigap works with")
    return None


def tick_problem(tick_s: float) -> str | None:
    """Why ``tick_s`` (seconds per tick) cannot be a capture's time base (None: it can)."""
    if not math.isfinite(tick_s) or tick_s <= 0:
        return f"a time base of {tick_s!r} s is none"
    if tick_s < TICK_MIN_S * (1 - 1e-9):
        return f"a time base of {tick_s:g} s is finer than 1 fs, the finest spigap reads"
    if tick_s > TICK_MAX_S * (1 + 1e-9):
        return f"a time base of {tick_s:g} s is coarser than 1 s, the coarsest spigap reads"
    return None


def odd_samplerate(hz: float) -> str | None:
    """A warning for a possible but implausible sample rate of a sampled capture (None: plausible)."""
    if hz < PLAUSIBLE_MIN_HZ:
        return Finding(f"a sample rate of {hz:g} Hz is implausibly slow for an SPI capture", Cause.TIMEBASE)
    if hz > PLAUSIBLE_MAX_HZ:
        return Finding(f"a sample rate of {hz:g} Hz is faster than any instrument samples", Cause.TIMEBASE)
    return None
