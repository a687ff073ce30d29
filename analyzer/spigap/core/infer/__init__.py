"""SPI settings the user did not give, inferred from the signals (docs/inference.md).

One room per step: ``settle`` (entry: names, then the signals of a bounded
prefix, read once), ``evidence`` (what the prefix shows of each channel:
changes, clock regularity, CS windows), ``buses`` (clocks with their CS and
data lines), ``mosi_miso`` (which data line is which), ``settings`` (CS
polarity, mode, word size), ``report`` (where each setting came from).

Names still win where they settle a role (``config.autodetect``, a file's own
decoder settings); everything else comes from a bounded prefix of the edge
stream, read once: the same blocks then go on to the framer, so inference costs
no second pass and works on a pipe.

* SCLK: a channel whose changes come in regular bursts — consecutive change
  pairs span one clock period. When two channels qualify and one's changes fall
  on the other's, the one with more changes is the clock (a data line carrying
  0x55 toggles once per period, the clock twice); channels whose changes do not
  fall on a clock's edges form another bus.
* CS: the channel whose level is the same at (nearly) every SCLK edge of the
  bus and which leaves that level between bursts; among several, the one whose
  active windows are the most numerous (the tightest bracket). Its level during
  the bursts is the active level. None when no channel brackets the bursts.
* data lines: channels that change inside CS windows (inside bursts without a
  CS) and, there, nearly always right after one kind of clock edge (the
  shifting edge). IRQ, reset, trigger lines, a UART and constant channels fail
  one of the two tests.
* CPOL: the SCLK level while CS is inactive (between bursts without a CS).
* CPHA: data changes follow the shifting edge: the trailing edge of a clock
  cycle for CPHA 0, the leading one for CPHA 1.
* word size: idle clock time inside windows (a controller's pause between
  words) at bit counts that are multiples of w gives w; else the greatest common
  divisor of the bits per window, 8 when 8 divides it (16, 32 ... fit too: said).
* MOSI vs MISO cannot be known from the wires; names decide, else weak
  evidence: a line driven by the peripheral changes as its output is enabled or
  released (at CS edges) and often answers the command word with a constant.
  The choice and its confidence are reported.

Every setting is reported with where it came from (given, name, file,
inferred, default), a confidence in [0, 1] and a note; low confidence is a
warning naming the option that settles it. Nothing here guesses silently: where
two interpretations fit, the note says so.
"""

from spigap.core.infer.report import Bus, Settled, Source
from spigap.core.infer.settle import MAX_CHANNELS, PREFIX_ENTRIES, all_buses, buses_seen, read_prefix, settle

__all__ = ["Bus", "Settled", "Source", "MAX_CHANNELS", "PREFIX_ENTRIES", "all_buses", "buses_seen", "read_prefix",
           "settle"]
