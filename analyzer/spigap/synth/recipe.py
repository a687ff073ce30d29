"""A synthesis recipe: what every capture `spigap synth` writes has, whatever times it.

A recipe is TOML text (captures/*.toml) and/or flags, in one of two forms told apart
by their tables (``spigap.synth.load`` reads both):

* one device timed by the gaps it leaves on the bus ([pattern], [timing], [jitter],
  optional [device] traffic and [kernel] driver model): ``scenario.Scenario``, the
  seed reports' figures;
* one to eight devices on one SPI controller ([[device]] tables), timed by the
  controller's queue and each device's driver: ``bus.Bus`` (docs/shared-bus.md).

Both hold the bus-wide settings defined here (``Recipe``: sample rate, seed, idle lead
and tail, SCLK, mode, word size, bit order, CS polarity, channel names) and come out
through one writer (``capture.write``: the .sr with this recipe inside, the truth, the
kernel trace).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from spigap import __version__
from spigap.errors import UsageError
from spigap.limits import rate_problem
from spigap.synth.srwriter import CHUNK_BYTES
from spigap.synth.timeline import Launch, SpiShape
from spigap.units import parse_freq, parse_time

# What one synthesized capture may hold: every window and every clocked bit's edges are
# planned in memory and every sample is written, so a recipe asking for more (a
# typo'd "messages = 10**12", "cs_change = 1e9s") is refused in one line instead of
# running out of memory or writing for days. The largest capture spigap's own
# benchmarks synthesize is 1 G samples and 2.5 M windows.
MAX_WINDOWS = 10_000_000
MAX_BITS = 400_000_000              # clocked bits (two SCLK edges each)
MAX_SAMPLES = 8_000_000_000
MAX_DATA_DELAY = 1e-3               # a clock-to-output longer than this is not a delay of the data lines

# When the data lines change (timeline.Launch) unless the recipe or the chip's traffic module says
# (``LAUNCH`` in synth/traffic/<chip>.py): a controller's clock-to-output of a few ns (the SCLK and
# MOSI pins are driven by the same clock inside it), a generic device's 10 ns.
LAUNCH_KEYS = ("mosi_delay", "miso_delay", "miso_enable")
GENERIC_LAUNCH = {"mosi_delay": 5e-9, "miso_delay": 10e-9, "miso_enable": 10e-9}


def check_size(what: str, n_samples: int) -> None:
    """Refuse a capture of more than MAX_SAMPLES samples (``what`` names the recipe's form)."""
    if n_samples > MAX_SAMPLES:
        raise UsageError(f"{what}: the capture would hold {n_samples:.3g} samples, more than spigap synth "
                         f"writes ({MAX_SAMPLES:.3g}); shorten the timings or the duration, or lower samplerate")


def check_delay(form, key: str, value) -> None:
    """A data line's delay (``None``: the default) is 0 .. MAX_DATA_DELAY s."""
    if value is not None:
        form.need(0 <= value <= MAX_DATA_DELAY, f"{key} must be 0 .. {MAX_DATA_DELAY * 1e3:g} ms, not {value:g} s")


def read(path=None, text: str | None = None) -> tuple[dict, str]:
    """The recipe's tables and its text: from ``text``, else the file ``path`` (neither: empty);
    read through the one bounded reader of the files spigap reads (infile.py)."""
    from spigap.infile import read_text, read_toml

    if text is None:
        if path is None:
            return {}, ""
        text = read_text(path, what="scenario")
    return read_toml(path, what="scenario", text=text), text


def is_bus(data: dict) -> bool:
    """Whether a recipe's tables are the several-device form ([[device]] tables)."""
    return isinstance(data.get("device"), list)


def set_bus_setting(obj, key: str, value) -> bool:
    """The SPI settings a bus and each of its devices may set (mode, bitorder, cs_polarity,
    channels), set on ``obj``; False for any other key."""
    if key == "mode":
        m = int(value)
        if m not in range(4):
            raise ValueError("mode must be 0..3")
        obj.cpol, obj.cpha = m >> 1, m & 1
    elif key == "bitorder":
        if value not in ("msb", "lsb"):
            raise ValueError("bitorder is msb or lsb")
        obj.lsb_first = value == "lsb"
    elif key == "cs_polarity":
        if value not in ("low", "high"):
            raise ValueError("cs_polarity is low or high")
        obj.cs_active_low = value == "low"
    elif key == "channels":
        obj.channels = {**obj.channels, **dict(value)}
    else:
        return False
    return True


@dataclasses.dataclass
class Recipe:
    """The bus-wide settings of either form (times in s, rates in Hz)."""

    samplerate: float = 50e6
    seed: int = 1
    lead: float = 20e-6                 # idle before the first CS assert
    tail: float = 20e-6                 # idle after the last CS deassert
    chunk_bytes: int = CHUNK_BYTES      # the .sr's logic-1-N member size
    sclk: float = 3.6e6
    cpol: int = 0
    cpha: int = 0
    wordsize: int = 8
    lsb_first: bool = False
    cs_active_low: bool = True
    channels: dict = dataclasses.field(default_factory=lambda: {
        "clk": "SCLK", "mosi": "MOSI", "miso": "MISO", "cs": "CS"})
    source: str = ""                    # the recipe's text, carried inside the .sr
    # when the data lines change (timeline.Launch); None: the device's default (launch())
    mosi_delay: float | None = None
    miso_delay: float | None = None
    miso_enable: float | None = None

    FORM = "scenario"                   # the form's name in messages

    @property
    def shape(self) -> SpiShape:
        return SpiShape(self.sclk, self.cpol, self.cpha, self.wordsize, self.lsb_first, self.cs_active_low)

    @classmethod
    def from_toml(cls, path=None, overrides: dict | None = None, *, text: str | None = None):
        """This form's recipe from a file (or ``text``), keys in ``overrides`` set over it."""
        data, text = read(path, text)
        if is_bus(data) != (cls.FORM != "scenario"):
            raise UsageError(f"this recipe is not a {cls.FORM}: [[device]] tables make a shared bus, "
                             "without them one device (spigap.synth.load reads either)",
                             path=str(path) if path else None)
        return cls.from_tables(data, text, overrides, path)

    @classmethod
    def from_tables(cls, data: dict, text: str, overrides: dict | None, path=None):
        raise NotImplementedError

    def set_common(self, key: str, value) -> bool:
        """Set one bus-wide key; False for a key of the form's own."""
        if key in ("lead", "tail") or key in LAUNCH_KEYS:
            setattr(self, key, parse_time(value))
        elif key in ("samplerate", "sclk"):
            setattr(self, key, parse_freq(value))
        elif key in ("cpol", "cpha", "wordsize", "seed", "chunk_bytes"):
            setattr(self, key, int(value))
        else:
            return set_bus_setting(self, key, value)        # mode, bitorder, cs_polarity, channels
        return True

    @staticmethod
    def flat(tables: dict, overrides: dict | None) -> dict:
        """Every key of the recipe's tables (and its top-level keys) in one dict, ``overrides`` over them."""
        flat: dict = {}
        for section, values in tables.items():
            flat.update(values if isinstance(values, dict) else {section: values})
        flat.update(overrides or {})
        return flat

    def need(self, ok, what: str) -> None:
        """Refuse the recipe in one line unless ``ok``."""
        if not ok:
            raise UsageError(f"{self.FORM}: {what}")

    def check_common(self, max_wordsize: int) -> None:
        need = self.need
        for key in ("samplerate", "sclk"):
            problem = rate_problem(getattr(self, key))
            need(problem is None, f"{key}: {problem}")
        need(1 <= self.wordsize <= max_wordsize, f"wordsize {self.wordsize} must be 1..{max_wordsize}")
        need(self.cpol in (0, 1) and self.cpha in (0, 1), "cpol and cpha are 0 or 1")
        need(self.chunk_bytes >= 1 and self.seed >= 0, "chunk_bytes must be >= 1, seed >= 0")
        for key in ("lead", "tail"):
            v = getattr(self, key)
            need(v >= 0 and np.isfinite(v), f"{key} must be >= 0, not {v:g}")
        for key in LAUNCH_KEYS:
            check_delay(self, key, getattr(self, key))
        if self.samplerate < 2 * self.sclk:
            raise UsageError(f"samplerate {self.samplerate:g} Hz cannot show SCLK {self.sclk:g} Hz "
                             "(needs at least 2 samples per period)")

    def launch(self, cs_setup: np.ndarray, traffic: str | None, miso_delay: float | None = None,
               miso_enable: float | None = None) -> Launch:
        """When the data lines change in windows with these CS setups, for a device whose traffic
        is ``traffic`` (a generator or payload name: its chip's ``LAUNCH`` defaults, synth/traffic):
        the recipe's mosi_delay, miso_delay and miso_enable (``miso_*``: a device's own, over the
        recipe's) as given, even where they break a datasheet or a sampling edge (a fault capture
        asks for that); a default is shortened where it would take more than half the time from
        its edge to the bit's sampling edge less a sample, so a default never moves a bit onto
        its sampling edge whatever the SCLK and sample rate (half a period after a clock edge; the
        CS setup after CS)."""
        from spigap.synth.traffic import launch_defaults

        dflt = {**GENERIC_LAUNCH, **launch_defaults(traffic)}
        dt = 1.0 / self.samplerate
        room = max(0.0, (0.5 / self.sclk - dt) / 2)
        given = {"mosi_delay": self.mosi_delay, "miso_delay": self.miso_delay if miso_delay is None else miso_delay,
                 "miso_enable": self.miso_enable if miso_enable is None else miso_enable}
        out = {k: (v if v is not None else min(dflt[k], room)) for k, v in given.items()}
        if given["miso_enable"] is None:
            out["miso_enable"] = np.minimum(dflt["miso_enable"], np.maximum(0.0, (np.asarray(cs_setup, float) - dt) / 2))
        return Launch(**out)

    def recipe(self) -> str:
        """The text carried inside the .sr (member spigap-synth.toml)."""
        kind = "" if self.FORM == "scenario" else " (shared bus)"
        head = (f"# Synthesized by spigap synth {__version__}{kind}: NOT a real capture.\n"
                "# Regenerate with: spigap synth --config <this file> -o <capture>.sr\n")
        return head + (self.source or "")
