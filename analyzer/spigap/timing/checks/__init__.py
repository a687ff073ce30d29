"""The check families of `spigap check`, one module each; ``spigap.timing.check``
runs them in order and collects their items.

* ``judging``: verdicts, the ±1-sample rule (``judge``), headroom, ``Item`` and
  ``CheckResult`` (shared by every family and the renderers);
* ``measurements``: the capture as the checks read it (idle gaps left out, the
  one transfer size, per-metric values, the SCLK resolution);
* ``expectations``: the profile's ``[expect.*]`` gap figures (p50, p99) and SCLK;
* ``modelled``: transfer time and rate against the timing model;
* ``device``: a device's datasheet limits, checked on every transfer;
* ``events``: the limits that need extra channels (the AD7606's CONVST, BUSY).
"""
