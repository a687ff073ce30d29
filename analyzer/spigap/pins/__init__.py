"""Timing at the receiver's pins: setup, hold, clock-to-output and edge quality.

What a logic analyzer's edges and a scope's volts say about each sampling edge
of an SPI bus, measured in the same single pass as the gap analysis
(docs/pin-timing.md):

* ``levels``: the receiver's input levels (VIL/VIH) and the measured state
  levels of a trace (base/top, IEEE 181 histogram modes), noise;
* ``crossings``: volts -> the times each line crosses VIL, mid and VIH
  (interpolated, with an uncertainty), and logic edges -> the same events
  bounded by one sample; ``flips`` and ``valid_intervals`` read them;
* ``quality``: rise/fall 10-90 %, overshoot, settling (ringing) per edge;
* ``measure``: the pairing of clock, data and CS events into MOSI/MISO
  setup and hold, clock-to-output, SCLK high/low/period, CS to first edge and
  last edge to CS, runts and non-monotonic clock edges; ``eye`` folds the data
  lines on the sampling edges;
* ``stats``: bounded distributions (min, p1, p50) with the worst edges;
* ``tap``: the capture reader wrapper that feeds all of it from the one pass;
* ``result``: ``PinResult`` (text, JSON, CSV rows); ``advice``: margins, the
  data-valid window and the device-tree values that would restore a margin.
"""
