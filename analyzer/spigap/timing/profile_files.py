"""The profile and device file format: what a file reads into (``Profile``, ``Device``,
their ``Expectation`` and ``Limit`` entries, the metrics they name), one dataclass per
TOML table, and the rules between keys (docs/timing-model.md, "Profile files",
"Device files").

``parse_profile`` / ``parse_device`` turn a parsed TOML document into a
``Profile`` / ``Device``; spigap.timing.toml_tables reads each table (types, units,
unknown keys) and words the errors: one line, the file, ``table.key`` and what is
wrong. spigap.timing.profiles finds the files (shipped names, user paths) and
loads them.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated

from spigap.core.config import MAX_WORDSIZE
from spigap.limits import TRANSFERS_PER_MESSAGE_MAX
from spigap.timing.model import TimingModel
from spigap.timing.toml_tables import (
    Bad,
    ProfileError,
    Where,
    a_table,
    flag,
    freq,
    integer,
    level,
    missing,
    number,
    quantity,
    read_table,
    required,
    some_texts,
    string,
    table,
    tables,
    text,
    texts,
    time,
    tolerance,
)


# ------------------------------------------------------------------ what a file reads into
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


# ------------------------------------------------------------------ tables
def _schema_version(v, at: Where) -> int:
    v = integer()(v, at)
    if v != 1:
        raise ProfileError(f"schema {v} is not supported (this spigap reads schema 1)", path=at.path)
    return v


def _auto_or_count(v, at: Where) -> int | None:
    """[analysis] transfers_per_message: "auto" (None: inferred) or N >= 1."""
    return None if v == "auto" else integer(lo=1, hi=TRANSFERS_PER_MESSAGE_MAX)(v, at)


def _counts(v, at: Where) -> tuple:
    if not isinstance(v, list) or not v or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in v):
        raise Bad("must be a list of integers >= 1")
    return tuple(v)


@dataclasses.dataclass(kw_only=True)
class ProfileTable:                 # [profile]
    name: Annotated[str, text]
    title: Annotated[str, text]
    sources: Annotated[list, some_texts] = dataclasses.field(metadata=required("is required (a list of strings)"))
    assumptions: Annotated[list, texts] = dataclasses.field(default_factory=list)
    platform: Annotated[str, string] = ""
    controller: Annotated[str, string] = ""
    kernel: Annotated[str | None, string] = None
    userspace: Annotated[str, string] = ""
    device: Annotated[str | None, string] = None
    patches: Annotated[list, texts] = dataclasses.field(default_factory=list)
    notes: Annotated[str, string] = ""


@dataclasses.dataclass(kw_only=True)
class BusTable:                     # [bus]
    sclk: Annotated[float, freq]
    sclk_source: Annotated[str, string] = ""
    sclk_tolerance: Annotated[tuple, tolerance("Hz")] = (None, None)
    mode: Annotated[int | None, integer(0, 3)] = None
    bits_per_word: Annotated[int, integer(1, MAX_WORDSIZE)] = 8
    idle_clocks: Annotated[float, number(lo=0)] = 0.0
    idle_after_last_word: Annotated[bool, flag] = False
    words_per_transfer: Annotated[int, integer(lo=1)] = 1
    transfers_per_message: Annotated[tuple, _counts] = (1, 10, 100, 500)


@dataclasses.dataclass(kw_only=True)
class TimingTable:                  # [timing]: the model's inputs, measured edge-to-edge, seconds
    cs_setup: Annotated[float | None, time] = None
    cs_hold: Annotated[float | None, time] = None
    cs_change: Annotated[float | None, time] = None
    context_switch: Annotated[float | None, time] = None
    inter_transfer: Annotated[float | None, time] = None
    segments: Annotated[int, integer(lo=1)] = 1
    cs_change_delay: Annotated[float | None, time] = None

    GAPS = ("cs_setup", "cs_hold", "cs_change", "context_switch", "inter_transfer")


@dataclasses.dataclass(kw_only=True)
class AnalysisTable:                # [analysis]
    transfers_per_message: Annotated[int | None, _auto_or_count] = None
    idle_gap: Annotated[float | None, time] = None


@dataclasses.dataclass(kw_only=True)
class GapExpectTable:               # [expect.GAP]: p50 / p99 of a gap kind, seconds
    source: Annotated[str, text]
    model: Annotated[bool, flag] = False
    p50: Annotated[float | None, quantity] = None
    tolerance: Annotated[tuple, tolerance()] = (None, None)
    p99_min: Annotated[float | None, quantity] = None
    p99_max: Annotated[float | None, quantity] = None
    assumed: Annotated[bool, flag] = False
    unverified: Annotated[bool, flag] = False
    note: Annotated[str, string] = ""


@dataclasses.dataclass(kw_only=True)
class ValueExpectTable:             # [expect.sclk], [expect.transfer_rate]: one value
    source: Annotated[str, text]
    model: Annotated[bool, flag] = False
    value: Annotated[float | None, quantity] = None
    tolerance: Annotated[tuple, tolerance()] = (None, None)
    assumed: Annotated[bool, flag] = False
    unverified: Annotated[bool, flag] = False
    note: Annotated[str, string] = ""


@dataclasses.dataclass(kw_only=True)
class ProfileFile:
    schema: Annotated[int, _schema_version] = 1
    profile: Annotated[ProfileTable, table(ProfileTable)] = dataclasses.field(
        metadata=missing("[profile] table is missing: is this a spigap profile?"))
    bus: Annotated[BusTable, table(BusTable)] = dataclasses.field(
        metadata=missing("[bus] table is missing (sclk, bits_per_word, idle_clocks ...)"))
    timing: Annotated[TimingTable, table(TimingTable)] = dataclasses.field(
        metadata=missing("[timing] table is missing (cs_setup, cs_hold, cs_change, context_switch)"))
    analysis: Annotated[AnalysisTable, table(AnalysisTable)] = dataclasses.field(default_factory=AnalysisTable)
    expect: Annotated[dict, a_table] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(kw_only=True)
class DeviceTable:                  # [device]
    name: Annotated[str, text]
    title: Annotated[str, text]
    sources: Annotated[list, some_texts] = dataclasses.field(metadata=required("is required (a list of strings)"))
    notes: Annotated[str, string] = ""
    cannot_check: Annotated[list, texts] = dataclasses.field(default_factory=list)
    default_variant: Annotated[str | None, string] = None


@dataclasses.dataclass(kw_only=True)
class ElectricalTable:              # [electrical], [variants.NAME.electrical]: logic input levels
    vdd: Annotated[float | None, number(lo=0)] = None
    vil: Annotated[tuple | None, level] = None
    vih: Annotated[tuple | None, level] = None
    source: Annotated[str, string] = ""
    unverified: Annotated[bool, flag] = False
    assumed: Annotated[bool, flag] = False
    note: Annotated[str, string] = ""


@dataclasses.dataclass(kw_only=True)
class VariantTable:                 # [variants.NAME]: limits that override or add to [limits]
    title: Annotated[str, string] = ""
    notes: Annotated[str, string] = ""
    limits: Annotated[dict, tables] = dataclasses.field(default_factory=dict)
    electrical: Annotated[dict, a_table] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(kw_only=True)
class DeviceFile:
    schema: Annotated[int, _schema_version] = 1
    device: Annotated[DeviceTable, table(DeviceTable)] = dataclasses.field(
        metadata=missing("[device] table is missing: is this a spigap device file?"))
    limits: Annotated[dict, tables] = dataclasses.field(default_factory=dict)
    variants: Annotated[dict, tables] = dataclasses.field(default_factory=dict)
    electrical: Annotated[dict, a_table] = dataclasses.field(default_factory=dict)


# ------------------------------------------------------------------ profiles
def parse_profile(data: dict, path: str) -> Profile:
    f = read_table(ProfileFile, data, Where(path, ""))
    p, b, t = f.profile, f.bus, f.timing
    prof = Profile(name=p.name, title=p.title, path=path, sources=p.sources, assumptions=p.assumptions,
                   platform=p.platform, controller=p.controller, kernel=p.kernel, userspace=p.userspace,
                   device=p.device, patches=p.patches, notes=p.notes,
                   sclk_hz=b.sclk, sclk_source=b.sclk_source, mode=b.mode, bits_per_word=b.bits_per_word,
                   idle_clocks=b.idle_clocks, idle_after_last_word=b.idle_after_last_word,
                   words_per_transfer=b.words_per_transfer, table=b.transfers_per_message,
                   timing={k: getattr(t, k) for k in TimingTable.GAPS if getattr(t, k) is not None},
                   segments=t.segments, cs_change_delay=t.cs_change_delay,
                   transfers_per_message=f.analysis.transfers_per_message, idle_gap=f.analysis.idle_gap)
    at = Where(path, "expect")
    for metric, x in f.expect.items():
        if metric not in EXPECT_METRICS:
            raise at.key(metric).error(f"unknown metric; known: {', '.join(EXPECT_METRICS)}")
        prof.expect[metric] = _expectation(x, metric, prof, at.key(metric))
    # derived expectations, unless the file gives its own
    if "sclk" not in prof.expect and b.sclk_tolerance != (None, None):
        prof.expect["sclk"] = Expectation(
            "sclk", "Hz", prof.sclk_source or "[bus] sclk of this profile", p50=prof.sclk_hz,
            tolerance=b.sclk_tolerance[0], rel_tolerance=b.sclk_tolerance[1])
    return prof


def _expectation(data: dict, metric: str, prof: Profile, at: Where) -> Expectation:
    """One [expect.METRIC] table, with the rules between its keys."""
    unit = EXPECT_METRICS[metric]
    at = dataclasses.replace(at, unit=unit)
    x: GapExpectTable | ValueExpectTable
    if metric in VALUE_METRICS:
        x = v = read_table(ValueExpectTable, data, at)
        value_key, value, p99 = "value", v.value, (None, None)
    else:
        x = g = read_table(GapExpectTable, data, at)
        value_key, value, p99 = "p50", g.p50, (g.p99_min, g.p99_max)
    ex = Expectation(metric, unit, source=x.source, p50=value, tolerance=x.tolerance[0],
                     rel_tolerance=x.tolerance[1], p99_min=p99[0], p99_max=p99[1], model=x.model,
                     assumed=x.assumed, unverified=x.unverified, note=x.note)
    if ex.model and metric not in MODEL_METRICS:
        raise at.key("model").error(f"only {', '.join(MODEL_METRICS)} can take their expectation from the model")
    if ex.model and ex.p50 is not None:
        raise at.key(value_key).error("give either model = true or a value, not both")
    has_tol = x.tolerance != (None, None)
    if ex.p50 is None and not ex.model and has_tol:
        if metric not in prof.timing:
            raise at.key(value_key).error(
                f"is required with a tolerance ([timing] has no {metric} to default to)")
        ex.p50 = prof.timing[metric]       # the [timing] value is the expected median
    if (ex.p50 is not None or ex.model) and not has_tol:
        raise at.key("tolerance").error(f"is required with {value_key if not ex.model else 'model = true'}")
    if ex.p99_min is not None and ex.p99_max is not None and ex.p99_min > ex.p99_max:
        raise at.key("p99_min").error("is larger than p99_max")
    if ex.p50 is None and not ex.model and ex.p99_min is None and ex.p99_max is None:
        raise at.key(value_key).error("no expectation: give a value with a tolerance, model = true, or p99 bounds")
    return ex


# ------------------------------------------------------------------ devices
def parse_device(data: dict, path: str, variant: str | None = None) -> Device:
    f = read_table(DeviceFile, data, Where(path, ""))
    d, variants = f.device, f.variants
    if variant is None:
        variant = d.default_variant
    if variants and variant is None:
        raise ProfileError(f"device {d.name!r} has variants: give one as {d.name}@VARIANT",
                           path=path, hint=f"variants: {', '.join(variants)}")
    if variant is not None:
        folded = {k.lower(): k for k in variants}
        if variant.lower() not in folded:
            raise ProfileError(f"device {d.name!r} has no variant {variant!r}", path=path,
                               hint=f"variants: {', '.join(variants) or 'none'}")
        variant = folded[variant.lower()]
    # a variant overrides or adds limits (and may say something about itself); each
    # limit is read from its [limits.KEY] table updated by the variant's
    merged = {key: [(f"limits.{key}", tbl)] for key, tbl in f.limits.items()}
    vnotes = ""
    elec = [("electrical", f.electrical)] if f.electrical else []
    for vname, vdata in variants.items():
        v = read_table(VariantTable, vdata, Where(path, f"variants.{vname}"))
        own = [(key, (f"variants.{vname}.limits.{key}", tbl)) for key, tbl in v.limits.items()]
        if vname == variant:
            vnotes = " ".join(filter(None, [v.title, v.notes]))
            for key, tbl in own:
                merged.setdefault(key, []).append(tbl)
            if v.electrical:
                elec.append((f"variants.{vname}.electrical", v.electrical))
        else:   # read the others too, so a typo in any variant is reported
            for key, tbl in own:
                _limit(key, [*merged.get(key, []), tbl], path)
            if v.electrical:
                _electrical([*elec[:1], (f"variants.{vname}.electrical", v.electrical)], path)
    limits = [_limit(key, tbls, path) for key, tbls in merged.items()]
    return Device(name=d.name, variant=variant, title=d.title, path=path, sources=d.sources, limits=limits,
                  notes=" ".join(filter(None, [d.notes, vnotes])), cannot_check=d.cannot_check,
                  electrical=_electrical(elec, path) if elec else None)


def _electrical(tables: list, path: str) -> Electrical:
    """The input levels from [electrical] updated by the variant's table: VIL and VIH in volts
    (a share of VDD needs vdd)."""
    data: dict = {}
    for _, tbl in tables:
        data.update(tbl)
    at = Where(path, tables[-1][0])
    e = read_table(ElectricalTable, data, at)
    volts = {}
    for key in ("vil", "vih"):
        v = getattr(e, key)
        if v is None:
            raise at.key(key).error("is required (volts, or a share of VDD like \"0.7 VDD\")")
        value, rel = v
        if rel and e.vdd is None:
            raise at.key("vdd").error(f"is required: {key} is a share of VDD")
        volts[key] = value * e.vdd if rel else value
    if not volts["vih"] > volts["vil"]:
        raise at.key("vih").error(f"must be above vil ({volts['vil']:g} V)")
    if not e.source.strip():
        raise at.key("source").error("is required: where the levels come from")
    return Electrical(vdd=e.vdd, vil=volts["vil"], vih=volts["vih"], source=e.source, unverified=e.unverified,
                      assumed=e.assumed, note=e.note)


def _limit(key: str, tables: list, path: str) -> Limit:
    """One limit from its tables [(where, dict)], later ones overriding earlier keys."""
    data: dict = {"name": key}
    for _, tbl in tables:
        data.update(tbl)
    at = Where(path, tables[-1][0])
    if "metric" not in data:
        raise at.key("metric").error("is required")
    try:        # first: the unit of min and max depends on it
        metric = text(data["metric"], at)
    except Bad as e:
        raise at.key("metric").error(str(e)) from None
    if metric not in LIMIT_METRICS:
        raise at.key("metric").error(f"unknown metric {metric!r}; known: {', '.join(LIMIT_METRICS)}")
    lim = read_table(Limit, data, dataclasses.replace(at, unit=LIMIT_METRICS[metric][0]))
    if lim.min is None and lim.max is None and lim.multiple_of is None:
        raise at.key("min").error("a limit needs min, max or multiple_of")
    if lim.multiple_of is not None and metric != "frame_bits":
        raise at.key("multiple_of").error("only applies to metric = \"frame_bits\"")
    return lim
