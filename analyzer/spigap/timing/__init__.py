"""The timing model, profiles (TOML data) and `spigap check` logic.

* ``model``: ``TimingModel`` (per-transfer and per-message time, rate) and
  ``delay_semantics`` (busy-wait vs sleep per kernel);
* ``profiles``: ``Profile`` / ``Device`` and ``load_profile`` / ``load_device``
  (shipped TOML under ``profiles/`` and ``devices/``, or user files);
  ``profile_files``: their file format, one dataclass per table, read by
  ``toml_tables``;
* ``check``: ``check_analysis(analysis, profile, device) -> CheckResult``, which
  runs the check families in ``checks/``;
* ``extra_channels``: the CONVST/BUSY edges the AD7606 checks need;
* ``render``: text and JUnit XML output of check results, the model table.

docs/timing-model.md documents all of it.
"""

from spigap.timing.model import DelaySemantics, TimingModel, delay_semantics

__all__ = ["TimingModel", "DelaySemantics", "delay_semantics"]
