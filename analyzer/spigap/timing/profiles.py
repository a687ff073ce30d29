"""Kernel/platform profiles and device datasheet limits, as TOML data.

Shipped files live in ``analyzer/spigap/timing/profiles/*.toml`` and
``analyzer/spigap/timing/devices/*.toml`` (loaded with importlib.resources); users pass
their own with ``--profile FILE.toml`` / ``--device FILE.toml[@VARIANT]``. The
format is documented in docs/timing-model.md ("Profile files"); every shipped
file is an example. ``spigap.timing.profile_files`` holds the format (one
dataclass per table) and turns a file into a ``Profile`` or ``Device``.

Every number in a profile cites where it comes from (``source``) and says
whether it is our assumption (``assumed = true``); device limits that
docs/linux-spi-timing.md lists as UNVERIFIED carry ``unverified = true``.
Loading validates everything (unknown keys too, to catch typos) and raises
``ProfileError`` with one line naming the file and the key.
"""

from __future__ import annotations

import dataclasses
import os
from importlib import resources
from typing import Annotated

from spigap.timing.model import TimingModel
from spigap.timing.toml_tables import ProfileError, flag, integer, quantity, read_toml, string, text

__all__ = ["ProfileError", "Profile", "Expectation", "Device", "Electrical", "Limit", "load_profile", "load_device",
           "list_profiles", "list_devices", "list_text"]


# metric -> unit, for [expect.*] tables
GAP_METRICS = ("cs_setup", "cs_hold", "inter_byte", "inter_transfer", "cs_change", "context_switch",
               "transfer_duration", "transfer_period")
VALUE_METRICS = {"sclk": "Hz", "transfer_rate": "1/s"}
EXPECT_METRICS = {**{m: "s" for m in GAP_METRICS}, **VALUE_METRICS}
MODEL_METRICS = ("transfer_duration", "transfer_rate")   # may take their expectation from the model

# device limit metric -> (unit, scope, needs)
LIMIT_METRICS = {
    "cs_setup": ("s", "transfer", None),          # CS assert -> first SCLK edge, per transfer
    "cs_hold": ("s", "transfer", None),           # last SCLK edge -> CS deassert, per transfer
    "cs_high": ("s", "transfer", None),           # every CS-inactive gap (cs_change, context switch)
    "sclk_half": ("s", "transfer", None),         # shortest SCLK high or low phase in each transfer
    "transfer_duration": ("s", "transfer", None),
    "transfer_period": ("s", "transfer", None),
    "frame_bits": ("bits", "transfer", None),     # SCLK bits per CS window
    "sclk": ("Hz", "global", None),               # measured SCLK frequency
    "sclk_outside_cs": ("edges", "global", None),  # SCLK edges while CS is inactive
    "convst_period": ("s", "event", "convst"),    # CONVST rising -> next CONVST rising
    "sclk_at_busy_fall": ("edges", "event", "busy"),  # BUSY falls while SCLK is running in a window
    # at the pins (docs/pin-timing.md): judged on the pin measurement, every sampling edge
    "din_setup": ("s", "pin", None),              # MOSI valid -> the device's sampling edge
    "din_hold": ("s", "pin", None),               # the device's sampling edge -> MOSI leaves
    "dout_valid": ("s", "pin", None),             # launching edge -> MISO valid (tDO)
    "dout_hold": ("s", "pin", None),              # launching edge -> MISO leaves the old bit
    "cs_dout_valid": ("s", "pin", None),          # CS assert -> the first MISO bit valid
    "sclk_high": ("s", "pin", None),              # SCLK high time at the pins
    "sclk_low": ("s", "pin", None),
    "sclk_rise": ("s", "pin", None), "sclk_fall": ("s", "pin", None),    # 10-90 %
    "din_rise": ("s", "pin", None), "din_fall": ("s", "pin", None),
    "dout_rise": ("s", "pin", None), "dout_fall": ("s", "pin", None),
}


# ------------------------------------------------------------------ dataclasses
@dataclasses.dataclass
class Expectation:
    metric: str
    unit: str
    source: str
    p50: float | None = None          # expected median (gaps) or value (sclk, transfer_rate)
    tolerance: float | None = None    # absolute half-width of the p50/value band
    rel_tolerance: float | None = None  # relative half-width ("5%"), used when tolerance is None
    p99_min: float | None = None
    p99_max: float | None = None
    model: bool = False               # the expected value comes from the timing model
    assumed: bool = False             # the expected value is our assumption, not a measurement
    unverified: bool = False
    note: str = ""

    def band(self, expected: float | None) -> tuple[float | None, float | None]:
        """The (lo, hi) band around ``expected`` (None: no band)."""
        if expected is None:
            return None, None
        tol = self.tolerance if self.tolerance is not None else (
            abs(expected) * self.rel_tolerance if self.rel_tolerance is not None else None)
        if tol is None:
            return None, None
        return expected - tol, expected + tol

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Profile:
    name: str
    title: str
    path: str
    sources: list
    assumptions: list
    platform: str = ""
    controller: str = ""
    kernel: str | None = None
    userspace: str = ""
    device: str | None = None            # default device spec for `spigap check`
    patches: list = dataclasses.field(default_factory=list)  # changes to the stock kernel
    notes: str = ""
    # [bus]
    sclk_hz: float = 0.0
    sclk_source: str = ""
    mode: int | None = None
    bits_per_word: int = 8
    idle_clocks: float = 0.0
    idle_after_last_word: bool = False
    words_per_transfer: int = 1
    table: tuple = (1, 10, 100, 500)
    # [timing]: the model's inputs (measured edge-to-edge gaps), seconds
    timing: dict = dataclasses.field(default_factory=dict)
    segments: int = 1
    cs_change_delay: float | None = None  # what spi.c is asked to wait (spidev: 10 µs)
    # [analysis]
    transfers_per_message: int | None = None
    idle_gap: float | None = None
    # [expect.*]
    expect: dict = dataclasses.field(default_factory=dict)

    def model(self, **overrides) -> TimingModel:
        t = self.timing
        kw = dict(sclk_hz=self.sclk_hz, bits_per_word=self.bits_per_word,
                  idle_clocks=self.idle_clocks, idle_after_last_word=self.idle_after_last_word,
                  cs_setup=t.get("cs_setup", 0.0), cs_hold=t.get("cs_hold", 0.0),
                  cs_change=t.get("cs_change", 0.0), context_switch=t.get("context_switch", 0.0),
                  inter_transfer=t.get("inter_transfer", 0.0), segments=self.segments)
        kw.update({k: v for k, v in overrides.items() if v is not None})
        try:
            return TimingModel(**kw)
        except ValueError as e:
            raise ProfileError(f"cannot build the timing model: {e}", path=self.path) from None

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["expect"] = {k: v.to_dict() for k, v in self.expect.items()}
        d["table"] = list(self.table)
        return d


@dataclasses.dataclass
class Limit:
    """One datasheet limit; also the schema of a [limits.KEY] table (min and max in
    the unit of the metric, LIMIT_METRICS)."""

    name: Annotated[str, string]              # datasheet symbol, e.g. tCSH (default: the table's KEY)
    metric: Annotated[str, text]
    what: Annotated[str, text]
    source: Annotated[str, text]
    min: Annotated[float | None, quantity] = None
    max: Annotated[float | None, quantity] = None
    multiple_of: Annotated[int | None, integer(lo=1)] = None
    unverified: Annotated[bool, flag] = False
    assumption: Annotated[str, string] = ""   # what we assume to check it from the SPI lines alone
    note: Annotated[str, string] = ""

    @property
    def unit(self) -> str:
        return LIMIT_METRICS[self.metric][0]

    @property
    def needs(self) -> str | None:
        return LIMIT_METRICS[self.metric][2]

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["unit"] = self.unit
        d["needs"] = self.needs
        return d


@dataclasses.dataclass
class Electrical:
    """The device's logic input levels at its supply (the ``[electrical]`` table, a variant's
    overriding it): VIL and VIH in volts."""

    vdd: float | None
    vil: float
    vih: float
    source: str
    unverified: bool = False
    assumed: bool = False
    note: str = ""

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class Device:
    name: str
    variant: str | None
    title: str
    path: str
    sources: list
    limits: list
    notes: str = ""
    cannot_check: list = dataclasses.field(default_factory=list)
    electrical: Electrical | None = None

    @property
    def spec(self) -> str:
        return f"{self.name}@{self.variant}" if self.variant else self.name

    def to_dict(self) -> dict:
        return {"name": self.name, "variant": self.variant, "spec": self.spec, "title": self.title,
                "path": self.path, "sources": list(self.sources), "notes": self.notes,
                "cannot_check": list(self.cannot_check),
                "electrical": self.electrical.to_dict() if self.electrical else None,
                "limits": [lim.to_dict() for lim in self.limits]}


# ------------------------------------------------------------------ loading
def _resource_dir(kind: str):
    return resources.files("spigap.timing").joinpath(kind)


def _shipped(kind: str) -> dict:
    out = {}
    d = _resource_dir(kind)
    try:
        for entry in d.iterdir():
            if entry.name.endswith(".toml"):
                out[entry.name[:-5]] = entry
    except OSError:
        raise ProfileError(f"the shipped {kind} are missing from this installation",
                           hint=f"package data analyzer/spigap/timing/{kind}/*.toml was not installed; "
                                "pass your own .toml file") from None
    return dict(sorted(out.items()))


def _looks_like_file(text: str) -> bool:
    return text.endswith(".toml") or os.sep in text or "/" in text or os.path.exists(text)


def load_profile(name_or_path) -> Profile:
    """A shipped profile by name (see ``list_profiles``) or a user TOML file."""
    if isinstance(name_or_path, Profile):
        return name_or_path
    from spigap.timing.profile_files import parse_profile   # the format reads into this module's classes

    spec = os.fspath(name_or_path)
    if _looks_like_file(spec):
        return parse_profile(read_toml(spec), spec)
    shipped = _shipped("profiles")
    if spec not in shipped:
        raise ProfileError(f"unknown profile {spec!r}", hint=f"known: {', '.join(shipped)}; or give a .toml file")
    entry = shipped[spec]
    return parse_profile(read_toml(str(entry), entry.read_text(encoding="utf-8")), f"<spigap>/profiles/{entry.name}")


def list_profiles() -> list[Profile]:
    return [load_profile(name) for name in _shipped("profiles")]


# ------------------------------------------------------------------ devices
def load_device(spec) -> Device:
    """'mcp3008@5V', 'ad7606', or 'my-chip.toml@3V3' -> Device."""
    if isinstance(spec, Device):
        return spec
    from spigap.timing.profile_files import parse_device   # the format reads into this module's classes

    spec = os.fspath(spec)
    base, sep, variant = spec.rpartition("@")
    if not sep:
        base, variant = spec, None
    if not base:
        raise ProfileError(f"bad device {spec!r}", hint="use NAME[@VARIANT], e.g. mcp3008@5V")
    if _looks_like_file(base):
        return parse_device(read_toml(base), base, variant)
    shipped = _shipped("devices")
    if base.lower() not in shipped:
        raise ProfileError(f"unknown device {base!r}", hint=f"known: {', '.join(shipped)}; or give a .toml file")
    entry = shipped[base.lower()]
    return parse_device(read_toml(str(entry), entry.read_text(encoding="utf-8")),
                        f"<spigap>/devices/{entry.name}", variant)


def list_devices() -> list[Device]:
    """Every shipped device in every variant."""
    out = []
    for name, entry in _shipped("devices").items():
        data = read_toml(str(entry), entry.read_text(encoding="utf-8"))
        variants = list((data.get("variants") or {}).keys()) or [None]
        for v in variants:
            out.append(load_device(f"{name}@{v}" if v else name))
    return out


def list_text() -> str:
    """The shipped profiles and devices, for ``--list``."""
    lines = ["profiles (--profile NAME):"]
    for prof in list_profiles():
        lines.append(f"  {prof.name:28s} {prof.title}")
    lines.append("")
    lines.append("devices (--device NAME[@VARIANT]):")
    for dev in list_devices():
        lines.append(f"  {dev.spec:28s} {dev.title}")
    return "\n".join(lines) + "\n"
