"""The timing model, profiles (TOML data) and `spigap check` logic.

* ``timing``: ``TimingModel`` (per-transfer and per-message time, rate) and
  ``delay_semantics`` (busy-wait vs sleep per kernel);
* ``profiles``: ``load_profile`` / ``load_device`` (shipped TOML under
  ``profiles/`` and ``devices/``, or user files);
* ``check``: ``check_analysis(analysis, profile, device) -> CheckResult``;
* ``render``: text and JUnit XML output of check results, the model table;
* ``synthesis``: ``scenario_from_profile`` (a capture with known truth).

docs/timing-model.md documents all of it.
"""

from spigap.timing.model import DelaySemantics, TimingModel, delay_semantics

__all__ = ["TimingModel", "DelaySemantics", "delay_semantics"]
