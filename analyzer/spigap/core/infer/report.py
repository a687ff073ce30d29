"""What inference reports: where each setting came from, the buses it found, and the
settled configuration with the edge stream to frame."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import TYPE_CHECKING

from spigap import confidence as confidence_words
from spigap.findings import by_cause
from spigap.core.config import SpiConfig
from spigap.errors import UsageError
from spigap.io.base import EdgeBlock

if TYPE_CHECKING:
    from spigap.core.infer.evidence import Evidence


class NoSpiBus(UsageError):
    """The signals hold no SPI bus (an I2C or UART capture, a demo device): analyze, detect,
    batch and check say so in one line instead of framing something that is not SPI."""


@dataclasses.dataclass
class Source:
    """Where one setting came from: 'given', 'name', 'file', 'inferred' or 'default'."""

    how: str
    confidence: float = 1.0
    note: str = ""
    basis: str = ""           # the evidence an inferred confidence is calibrated by (core/infer/calibration.py)
    also: tuple = ()          # the other readings the data leave open (a CS beside a line bracketing the same bursts)

    def as_dict(self) -> dict:
        return {"from": self.how, "confidence": round(float(self.confidence), 3),
                "confidence_words": confidence_words.of_source(self.how, self.confidence, 1 + len(self.also)),
                "note": self.note}


@dataclasses.dataclass
class Bus:
    """One SPI bus found in the signals (channel names; cs None = CS-less)."""

    clk: str
    cs: str | None
    data: list[str]
    edges: int                     # SCLK changes in the prefix (the busiest bus is not always first)
    cs_active: int | None = None   # the CS level during the bursts
    cs_confidence: float = 0.0
    cs_how: str = "bracket"        # "bracket" (a CS), "latch" (a strobe between bursts), "once" (one window),
    #                                "partial" (its windows hold some bursts, the clock runs outside them too)
    data_how: str = "edges"        # "edges" (data lines change on the clock's edges), "few" (a line that
    #                                changes too rarely to tell, while the transfer runs), "none"
    wide: tuple = ()               # more than two data lines follow the clock (dual/quad SPI): all of them
    cs_rivals: tuple = ()          # other lines bracketing every burst as the CS does, not asserted with it

    def channels(self) -> list[str]:
        return [self.clk] + ([self.cs] if self.cs else []) + self.data


@dataclasses.dataclass
class Settled:
    """The outcome: the configuration to analyze with, the edge stream in its
    channel order, and the report of where every setting came from."""

    cfg: SpiConfig
    names: list[str]
    blocks: Iterator[EdgeBlock]
    sources: dict[str, Source]
    buses: list[Bus]
    warnings: list[str]
    evidence: Evidence | None = None    # the prefix the signals were read from (None: names sufficed)
    devices: list = dataclasses.field(default_factory=list)    # a shared bus: infer/shared.Device per CS line
    survey: Evidence | None = None      # the prefix of every channel (the first 32), read in the same pass (detect)

    def __post_init__(self) -> None:
        self.warnings = by_cause(self.warnings)      # the one order of every warning (spigap/findings.py)

    def sources_dict(self) -> dict:
        return {k: v.as_dict() for k, v in self.sources.items()}
