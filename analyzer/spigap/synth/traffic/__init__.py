"""Device payload generators: realistic traffic with known content for the decoders.

Each module here (named after its chip) defines ``SCENARIOS = {name: build}`` where
``build(sc: Scenario, opts: dict) -> Timeline``: it takes the timing of a
``Scenario`` (samplerate, SCLK, mode, gaps, jitter) and the device options
(``[device]`` table of the TOML, or ``--device NAME:key=value,...``), and
returns a Timeline whose ``truth()`` and ``extra`` tracks describe the content.
``Scenario.windows_from_payload`` applies the scenario's timing to explicit
per-window payloads, ``Scenario.build_timeline`` turns them into the timeline. ``LAUNCH``
gives the chip's own output timing, the defaults of a recipe's data delays
(recipe.Recipe.launch).
"""

from __future__ import annotations

import importlib
import pkgutil

from spigap.errors import UsageError


def _collect(attr: str) -> dict:
    out: dict = {}
    for info in pkgutil.iter_modules(__path__):
        mod = importlib.import_module(f"{__name__}.{info.name}")
        out.update(getattr(mod, attr, {}))
    return out


def registry() -> dict:
    return _collect("SCENARIOS")


def launch_defaults(traffic: str | None) -> dict:
    """The data timing (recipe keys mosi_delay, miso_delay, miso_enable, s) of the chip whose
    traffic is ``traffic``: ``LAUNCH`` of the module named by the name's first part
    (``mcp3008-linux``, ``mcp3008``: mcp3008.py); {} for other traffic."""
    chip = str(traffic or "").split("-")[0]
    if not chip or chip.startswith("_") or chip not in {m.name for m in pkgutil.iter_modules(__path__)}:
        return {}
    return dict(getattr(importlib.import_module(f"{__name__}.{chip}"), "LAUNCH", {}))


def payloads() -> dict:
    """``PAYLOADS = {name: fill}`` of the modules: ``fill(sc, windows, opts) -> truth``
    puts a chip's words into windows whose timing a [pattern] already drew (the
    seed captures: their gaps stay, their random words become what the chip
    would send and answer)."""
    return _collect("PAYLOADS")


def fill_payload(sc, w, opts: dict) -> list:
    """The [payload] table: replace ``w``'s MOSI/MISO words in place; the truth per window."""
    opts = dict(opts)
    name = opts.pop("name", None)
    fills = payloads()
    if name not in fills:
        raise UsageError(f"unknown [payload] name {name!r}; known: {', '.join(sorted(fills)) or 'none'}")
    return fills[name](sc, w, opts)


def window_words(w) -> list[int]:
    """Words of each window of a Windows."""
    import numpy as np

    return np.bincount(w.word_window, minlength=w.n).tolist()


def put_words(w, mosi: list, miso: list) -> None:
    """Set every window's words (lists per window, the same counts as before)."""
    import numpy as np

    have = window_words(w)
    got = [len(x) for x in mosi]
    if got != have or [len(x) for x in miso] != have:
        raise UsageError("[payload]: the filled windows do not have the [pattern]'s word counts")
    w.mosi = np.array([v for x in mosi for v in x], dtype=np.uint64)
    w.miso = np.array([v for x in miso for v in x], dtype=np.uint64)


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
