"""Device payload generators: realistic traffic with known content for the decoders.

Each module here defines ``SCENARIOS = {name: build}`` where
``build(sc: Scenario, opts: dict) -> Timeline``: it takes the timing of a
``Scenario`` (samplerate, SCLK, mode, gaps, jitter) and the device options
(``[device]`` table of the TOML, or ``--device NAME:key=value,...``), and
returns a Timeline whose ``truth()`` and ``extra`` tracks describe the content.
``Scenario.windows_from_payload`` applies the scenario's timing to explicit
per-window payloads.
"""

from __future__ import annotations

import importlib
import pkgutil


def registry() -> dict:
    out = {}
    for info in pkgutil.iter_modules(__path__):
        mod = importlib.import_module(f"{__name__}.{info.name}")
        out.update(getattr(mod, "SCENARIOS", {}))
    return out
