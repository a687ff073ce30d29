"""spigap: where the microseconds go on an SPI bus.

spigap reads logic captures as a stream of edges, frames SPI transfers from
the raw CS/SCLK transitions and measures every gap of every transfer (see
docs/gaps.md for the definitions; docs/architecture.md for the path a capture
takes).

The public API (``spigap.api``, loaded on first use so that ``import spigap``
stays cheap for the command line)::

    import spigap
    r = spigap.analyze_file("capture.sr")     # a Result: every device on the bus, and the bus
    a = r.device                              # the one device (spigap.analyze_device: the same)
"""

__version__ = "0.2.0"

_API = ("analyze_file", "analyze_device", "Analysis", "Result", "SpiConfig", "GAP_KINDS", "describe", "open_capture")
__all__ = ["__version__", *_API]


def __getattr__(name: str):
    if name in _API:
        from spigap import api

        return getattr(api, name)
    raise AttributeError(f"module 'spigap' has no attribute {name!r}")
