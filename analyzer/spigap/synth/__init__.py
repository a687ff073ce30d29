"""Captures with known truth: ``spigap synth`` and the device payload generators.

* ``recipe``: what every recipe holds (the bus-wide settings), and its two forms:
  ``scenario`` (one device timed by its bus gaps) and ``bus`` (devices on one
  controller, timed by its queue and their drivers); ``forms.load`` reads either;
* ``timeline``: windows -> channel edges + ground truth (vectorized);
* ``capture``: the planned capture and its one writer (.sr, truth, kernel trace);
* ``kernel``: the kernel's side, the driver model that writes a one-device trace;
* ``srwriter``: chunked .sr writer, libsigrok-compatible; ``writers``: other formats.
"""

from spigap.synth.bus import Bus
from spigap.synth.capture import Capture, TraceOptions, tracks, write
from spigap.synth.forms import load, toml_text
from spigap.synth.scenario import Scenario, truth_json
from spigap.synth.srwriter import Track, write_sr
from spigap.synth.timeline import SpiShape, Timeline, Windows, build

__all__ = ["Bus", "Capture", "Scenario", "Timeline", "TraceOptions", "Windows", "SpiShape", "Track", "build",
           "load", "toml_text", "tracks", "truth_json", "write", "write_sr"]
