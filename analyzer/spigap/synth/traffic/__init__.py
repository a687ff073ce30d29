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

from spigap.errors import UsageError


def registry() -> dict:
    out: dict = {}
    for info in pkgutil.iter_modules(__path__):
        mod = importlib.import_module(f"{__name__}.{info.name}")
        out.update(getattr(mod, "SCENARIOS", {}))
    return out


# option values arrive as TOML values or as text from --device NAME:key=value,...

def option_list(value, conv=int) -> list:
    """A list option: a TOML list, or text '1 2 3' / '1,2,3', or one value."""
    if value is None:
        return []
    if isinstance(value, str):
        return [conv(v) for v in value.replace(",", " ").split()]
    if isinstance(value, (list, tuple)):
        return [conv(v) for v in value]
    return [conv(value)]


def option_bool(v) -> bool:
    if isinstance(v, str):
        if v.lower() in ("1", "true", "yes", "on"):
            return True
        if v.lower() in ("0", "false", "no", "off"):
            return False
        raise UsageError(f"not a boolean: {v!r}")
    return bool(v)
