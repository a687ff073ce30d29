"""Put a trace on the bus clock: match trace events to bus transfers, fit offset and drift.

docs/trace.md is the reference. Three aligners, one matching engine:

spi.py        ``--ftrace``: the device's SPI events (one anchor per CS window) against the
              transfers; the anchors and payloads of both sides
sync.py       ``--sync-channel``: ``gpio:gpio_value`` events against a captured pin's edges
userlog.py    ``--userlog``: user-space timestamps against the CS edges, and their error
match.py      what the three share: coarse search, fine growth, acceptance or refusal
fit.py        the robust line fit (Theil-Sen, then least squares on the inliers)
zero.py       the SPI alignment's zero point: rate refitted on causal pairs, causal bracket
alignment.py  the result every aligner returns (``Alignment``) and the bus edge times

Bus times are seconds from the start of the capture; trace times are the
trace's own clock: ``bus = offset_s + (1 + drift_ppm * 1e-6) * trace`` (kept
internally as ``a + b * (trace - t0)``, t0 the first matched anchor, for precision).
"""

from spigap.trace.align.alignment import Alignment, bus_edges
from spigap.trace.align.spi import align_spi, spi_devices, spi_on_fit
from spigap.trace.align.sync import align_sync
from spigap.trace.align.userlog import UserlogReport, align_userlog, granularity

__all__ = ["Alignment", "UserlogReport", "align_spi", "align_sync", "align_userlog", "bus_edges", "granularity",
           "spi_devices", "spi_on_fit"]
