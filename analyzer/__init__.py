"""spigap: where the microseconds go on an SPI bus.

The analyzer reads logic captures as a stream of edges, frames SPI transfers
from the raw CS/SCLK transitions and measures every gap of every transfer
(see docs/gaps.md for the definitions).
"""

__version__ = "0.2.0"
