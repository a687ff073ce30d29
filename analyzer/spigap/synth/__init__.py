"""Captures with known truth: ``spigap synth`` and the device payload generators.

* ``scenario``: timing scenarios from TOML/flags (the seed-report reproductions);
* ``timeline``: windows -> channel edges + ground truth (vectorized);
* ``srwriter``: chunked .sr writer, libsigrok-compatible.
"""

from spigap.synth.scenario import Scenario, tracks, truth_json, write
from spigap.synth.srwriter import Track, write_sr
from spigap.synth.timeline import SpiShape, Timeline, Windows, build

__all__ = ["Scenario", "Timeline", "Windows", "SpiShape", "Track", "build", "tracks", "truth_json",
           "write", "write_sr"]
