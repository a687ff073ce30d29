"""Python entry points for scripts, tests and the other subcommands.

    from spigap.api import analyze_file, SpiConfig
    a = analyze_file("capture.sr", SpiConfig(cpha=1))
    a.gap_values("cs_setup") * a.tick_s      # seconds, NaN where unavailable
"""

from __future__ import annotations

from spigap.core.analysis import GAP_KINDS, Analysis, describe, run
from spigap.core.config import INFERABLE, SpiConfig
from spigap.io import open_capture

__all__ = ["analyze_file", "Analysis", "SpiConfig", "GAP_KINDS", "describe", "open_capture"]


def analyze_file(path, cfg: SpiConfig | None = None, *, samplerate: float | None = None,
                 input_format: str | None = None, **reader_options) -> Analysis:
    """Read and analyze one capture. Raises SpigapError subclasses on bad input.
    Without ``cfg`` every setting is found from names and signals (core/infer.py);
    a given ``cfg`` is taken as is, except roles it leaves None and its ``infer`` set."""
    with open_capture(path, input_format=input_format, samplerate=samplerate, **reader_options) as r:
        return run(r, cfg or SpiConfig(infer=INFERABLE))
