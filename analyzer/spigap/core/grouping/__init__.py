"""Which CS-inactive gaps are cs_change gaps and which are context switches.

docs/gaps.md, "CS-inactive gaps", is the reference. One room per step: kinds.py
(populations and their spread), pattern.py (repeating structure and where it
changes), readings.py (which kinds end messages, and the evidence), infer.py
(the entry), model.py (the result: Grouping, from_boundaries). Carrying a grouping
onto later batches of a long capture or a stream: core/measurer.Measurer.carry.
"""

from spigap.core.grouping.infer import BASIS_CONFIDENCE, LEVELS, WINDOW, infer, level
from spigap.core.grouping.pattern import MIN_PERIODS
from spigap.core.grouping.model import (
    CLASS_A,
    CLASS_B,
    CONFIDENCE,
    CONTEXT_SWITCH,
    CS_CHANGE,
    Grouping,
    Segment,
    from_boundaries,
)

__all__ = ["BASIS_CONFIDENCE", "LEVELS", "MIN_PERIODS", "level", "CLASS_A", "CLASS_B", "CONFIDENCE", "CONTEXT_SWITCH", "CS_CHANGE", "Grouping",
           "Segment", "WINDOW", "from_boundaries", "infer"]
