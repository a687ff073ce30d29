"""Kernel/platform profiles and device datasheet limits, as TOML data.

Shipped files live in ``analyzer/timing/profiles/*.toml`` and
``analyzer/timing/devices/*.toml`` (loaded with importlib.resources); users pass
their own with ``--profile FILE.toml`` / ``--device FILE.toml[@VARIANT]``. The
format is documented in docs/timing-model.md ("Profile files"); every shipped
file is an example.

Every number in a profile cites where it comes from (``source``) and says
whether it is our assumption (``assumed = true``); device limits that
docs/linux-spi-timing.md lists as UNVERIFIED carry ``unverified = true``.
Loading validates everything (unknown keys too, to catch typos) and raises
``ProfileError`` with one line naming the file and the key.
"""

from __future__ import annotations

import dataclasses
from typing import Literal, overload
import math
import os
import tomllib
from importlib import resources

from spigap.errors import SpigapError
from spigap.timing.model import TimingModel
from spigap.units import parse_freq, parse_time


class ProfileError(SpigapError):
    """A profile or device file is missing, not TOML, or has a bad/unknown key."""


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
    name: str                 # datasheet symbol, e.g. tCSH
    metric: str
    what: str
    source: str
    min: float | None = None
    max: float | None = None
    multiple_of: int | None = None
    unverified: bool = False
    assumption: str = ""      # what we assume to check it from the SPI lines alone
    note: str = ""

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
class Device:
    name: str
    variant: str | None
    title: str
    path: str
    sources: list
    limits: list
    notes: str = ""
    cannot_check: list = dataclasses.field(default_factory=list)

    @property
    def spec(self) -> str:
        return f"{self.name}@{self.variant}" if self.variant else self.name

    def to_dict(self) -> dict:
        return {"name": self.name, "variant": self.variant, "spec": self.spec, "title": self.title,
                "path": self.path, "sources": list(self.sources), "notes": self.notes,
                "cannot_check": list(self.cannot_check),
                "limits": [lim.to_dict() for lim in self.limits]}


# ------------------------------------------------------------------ value parsing
class _Table:
    """One TOML table with key bookkeeping: every key must be consumed."""

    def __init__(self, data, where: str, path: str):
        if not isinstance(data, dict):
            raise ProfileError(f"[{where}] must be a table", path=path)
        self.data, self.where, self.path = data, where, path
        self.used: set = set()

    def err(self, key, problem):
        loc = f"{self.where}.{key}" if self.where else key
        return ProfileError(f"{loc}: {problem}", path=self.path)

    def has(self, key) -> bool:
        return key in self.data

    def raw(self, key, default=None):
        self.used.add(key)
        return self.data.get(key, default)

    # overloads: with a default or required=True the value is never None
    @overload
    def text(self, key, default: str, *, required: bool = False) -> str: ...
    @overload
    def text(self, key, default: None = None, *, required: Literal[True]) -> str: ...
    @overload
    def text(self, key, default: None = None, *, required: bool = False) -> str | None: ...

    def text(self, key, default=None, *, required=False):
        v = self.raw(key)
        if v is None:
            if required:
                raise self.err(key, "is required")
            return default
        if not isinstance(v, str) or (required and not v.strip()):
            raise self.err(key, "must be a non-empty string")
        return v

    def texts(self, key, *, required=False) -> list:
        v = self.raw(key)
        if v is None:
            if required:
                raise self.err(key, "is required (a list of strings)")
            return []
        if isinstance(v, str):
            v = [v]
        if not isinstance(v, list) or not all(isinstance(x, str) and x.strip() for x in v):
            raise self.err(key, "must be a list of non-empty strings")
        if required and not v:
            raise self.err(key, "must not be empty")
        return v

    def flag(self, key, default=False) -> bool:
        v = self.raw(key, default)
        if not isinstance(v, bool):
            raise self.err(key, "must be true or false")
        return v

    @overload
    def integer(self, key, default: int, *, lo=None) -> int: ...
    @overload
    def integer(self, key, default: None = None, *, lo=None) -> int | None: ...

    def integer(self, key, default=None, *, lo=None):
        v = self.raw(key)
        if v is None:
            return default
        if isinstance(v, bool) or not isinstance(v, int):
            raise self.err(key, f"must be an integer, not {v!r}")
        if lo is not None and v < lo:
            raise self.err(key, f"must be >= {lo}")
        return v

    @overload
    def number(self, key, default: float, *, lo=None) -> float: ...
    @overload
    def number(self, key, default: None = None, *, lo=None) -> float | None: ...

    def number(self, key, default=None, *, lo=None):
        v = self.raw(key)
        if v is None:
            return default
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise self.err(key, f"must be a number, not {v!r}")
        if lo is not None and v < lo:
            raise self.err(key, f"must be >= {lo}")
        return float(v)

    def time(self, key, default=None) -> float | None:
        v = self.raw(key)
        if v is None:
            return default
        if isinstance(v, bool):
            raise self.err(key, "must be a duration like \"1.6us\"")
        try:
            t = parse_time(v)
        except (ValueError, TypeError) as e:
            raise self.err(key, str(e)) from None
        if not math.isfinite(t) or t < 0:
            raise self.err(key, "must be a non-negative duration")
        return t

    def freq(self, key, default=None) -> float | None:
        v = self.raw(key)
        if v is None:
            return default
        if isinstance(v, bool):
            raise self.err(key, "must be a frequency like \"3.6MHz\"")
        try:
            f = parse_freq(v)
        except (ValueError, TypeError) as e:
            raise self.err(key, str(e)) from None
        if not (f > 0 and math.isfinite(f)):
            raise self.err(key, "must be a positive frequency")
        return f

    def quantity(self, key, unit: str, default=None):
        if unit == "s":
            return self.time(key, default)
        if unit == "Hz":
            return self.freq(key, default)
        return self.number(key, default, lo=0)

    def tolerance(self, key, unit: str) -> tuple[float | None, float | None]:
        """'0.3us' / '20%' -> (absolute, relative)."""
        v = self.raw(key)
        if v is None:
            return None, None
        if isinstance(v, str) and v.strip().endswith("%"):
            try:
                r = float(v.strip()[:-1]) / 100.0
            except ValueError:
                raise self.err(key, f"not a percentage: {v!r}") from None
            if not (0 <= r < 10):
                raise self.err(key, f"percentage out of range: {v!r}")
            return None, r
        self.used.discard(key)
        return self.quantity(key, unit), None

    def table(self, key) -> "_Table | None":
        v = self.raw(key)
        if v is None:
            return None
        return _Table(v, f"{self.where}.{key}" if self.where else key, self.path)

    def sub(self, key) -> "_Table":
        """The sub-table ``key`` of a key the caller took from this table's own keys."""
        t = self.table(key)
        if t is None:
            raise self.err(key, "must be a table")
        return t

    def done(self):
        extra = sorted(set(self.data) - self.used)
        if extra:
            raise self.err(extra[0], "unknown key (typo?)")


def _read_toml(path: str, text: str | None = None) -> dict:
    try:
        if text is None:
            with open(path, "rb") as f:
                return tomllib.load(f)
        return tomllib.loads(text)
    except FileNotFoundError:
        raise ProfileError("no such file", path=path) from None
    except IsADirectoryError:
        raise ProfileError("is a directory, not a TOML file", path=path) from None
    except (OSError, UnicodeDecodeError) as e:
        raise ProfileError(f"cannot read: {e}", path=path) from None
    except tomllib.TOMLDecodeError as e:
        raise ProfileError(f"not valid TOML: {e}", path=path) from None


# ------------------------------------------------------------------ profiles
def parse_profile(data: dict, path: str) -> Profile:
    top = _Table(data, "", path)
    schema = top.integer("schema", 1)
    if schema != 1:
        raise ProfileError(f"schema {schema} is not supported (this spigap reads schema 1)", path=path)
    p = top.table("profile")
    if p is None:
        raise ProfileError("[profile] table is missing: is this a spigap profile?", path=path)
    prof = Profile(name=p.text("name", required=True), title=p.text("title", required=True),
                   path=path, sources=p.texts("sources", required=True),
                   assumptions=p.texts("assumptions"), platform=p.text("platform", ""),
                   controller=p.text("controller", ""), kernel=p.text("kernel"),
                   userspace=p.text("userspace", ""), device=p.text("device"),
                   patches=p.texts("patches"), notes=p.text("notes", ""))
    p.done()

    b = top.table("bus")
    if b is None:
        raise ProfileError("[bus] table is missing (sclk, bits_per_word, idle_clocks ...)", path=path)
    sclk = b.freq("sclk")
    if sclk is None:
        raise b.err("sclk", "is required")
    prof.sclk_hz = sclk
    prof.sclk_source = b.text("sclk_source", "")
    sclk_tol = b.tolerance("sclk_tolerance", "Hz")
    prof.mode = b.integer("mode")
    if prof.mode is not None and prof.mode not in range(4):
        raise b.err("mode", "must be 0..3")
    prof.bits_per_word = b.integer("bits_per_word", 8, lo=1)
    prof.idle_clocks = b.number("idle_clocks", 0.0, lo=0)
    prof.idle_after_last_word = b.flag("idle_after_last_word", False)
    prof.words_per_transfer = b.integer("words_per_transfer", 1, lo=1)
    table = b.raw("transfers_per_message", [1, 10, 100, 500])
    if (not isinstance(table, list) or not table
            or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in table)):
        raise b.err("transfers_per_message", "must be a list of integers >= 1")
    prof.table = tuple(table)
    b.done()

    t = top.table("timing")
    if t is None:
        raise ProfileError("[timing] table is missing (cs_setup, cs_hold, cs_change, context_switch)",
                           path=path)
    for key in ("cs_setup", "cs_hold", "cs_change", "context_switch", "inter_transfer"):
        v = t.time(key)
        if v is not None:
            prof.timing[key] = v
    prof.segments = t.integer("segments", 1, lo=1)
    prof.cs_change_delay = t.time("cs_change_delay")
    t.done()

    a = top.table("analysis")
    if a is not None:
        tpm = a.raw("transfers_per_message")
        if tpm is not None and tpm != "auto":
            a.used.discard("transfers_per_message")
            prof.transfers_per_message = a.integer("transfers_per_message", lo=1)
        prof.idle_gap = a.time("idle_gap")
        a.done()

    e = top.table("expect")
    if e is not None:
        for metric in list(e.data):
            if metric not in EXPECT_METRICS:
                raise e.err(metric, f"unknown metric; known: {', '.join(EXPECT_METRICS)}")
            prof.expect[metric] = _parse_expectation(e.sub(metric), metric, prof)
        e.done()
    # derived expectations, unless the file gives its own
    if "sclk" not in prof.expect and sclk_tol != (None, None):
        prof.expect["sclk"] = Expectation(
            "sclk", "Hz", prof.sclk_source or "[bus] sclk of this profile", p50=prof.sclk_hz,
            tolerance=sclk_tol[0], rel_tolerance=sclk_tol[1])
    top.done()
    return prof


def _parse_expectation(x: _Table, metric: str, prof: Profile) -> Expectation:
    unit = EXPECT_METRICS[metric]
    value_key = "value" if metric in VALUE_METRICS else "p50"
    ex = Expectation(metric, unit, source=x.text("source", required=True))
    ex.model = x.flag("model", False)
    if ex.model and metric not in MODEL_METRICS:
        raise x.err("model", f"only {', '.join(MODEL_METRICS)} can take their expectation from the model")
    ex.p50 = x.quantity(value_key, unit)
    if ex.model and ex.p50 is not None:
        raise x.err(value_key, "give either model = true or a value, not both")
    ex.tolerance, ex.rel_tolerance = x.tolerance("tolerance", unit)
    has_tol = ex.tolerance is not None or ex.rel_tolerance is not None
    if ex.p50 is None and not ex.model and has_tol:
        if metric not in prof.timing:
            raise x.err(value_key, f"is required with a tolerance ([timing] has no {metric} to default to)")
        ex.p50 = prof.timing[metric]       # the [timing] value is the expected median
    if (ex.p50 is not None or ex.model) and not has_tol:
        raise x.err("tolerance", f"is required with {value_key if not ex.model else 'model = true'}")
    if metric not in VALUE_METRICS:
        ex.p99_min = x.quantity("p99_min", unit)
        ex.p99_max = x.quantity("p99_max", unit)
        if ex.p99_min is not None and ex.p99_max is not None and ex.p99_min > ex.p99_max:
            raise x.err("p99_min", "is larger than p99_max")
    if ex.p50 is None and not ex.model and ex.p99_min is None and ex.p99_max is None:
        raise x.err(value_key, "no expectation: give a value with a tolerance, model = true, or p99 bounds")
    ex.assumed = x.flag("assumed", False)
    ex.unverified = x.flag("unverified", False)
    ex.note = x.text("note", "")
    x.done()
    return ex


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
                           hint=f"package data analyzer/timing/{kind}/*.toml was not installed; "
                                "pass your own .toml file") from None
    return dict(sorted(out.items()))


def _looks_like_file(text: str) -> bool:
    return text.endswith(".toml") or os.sep in text or "/" in text or os.path.exists(text)


def load_profile(name_or_path) -> Profile:
    """A shipped profile by name (see ``list_profiles``) or a user TOML file."""
    if isinstance(name_or_path, Profile):
        return name_or_path
    spec = os.fspath(name_or_path)
    if _looks_like_file(spec):
        return parse_profile(_read_toml(spec), spec)
    shipped = _shipped("profiles")
    if spec not in shipped:
        raise ProfileError(f"unknown profile {spec!r}", hint=f"known: {', '.join(shipped)}; or give a .toml file")
    entry = shipped[spec]
    return parse_profile(_read_toml(str(entry), entry.read_text(encoding="utf-8")), f"<spigap>/profiles/{entry.name}")


def list_profiles() -> list[Profile]:
    return [load_profile(name) for name in _shipped("profiles")]


# ------------------------------------------------------------------ devices
def parse_device(data: dict, path: str, variant: str | None = None) -> Device:
    top = _Table(data, "", path)
    schema = top.integer("schema", 1)
    if schema != 1:
        raise ProfileError(f"schema {schema} is not supported (this spigap reads schema 1)", path=path)
    d = top.table("device")
    if d is None:
        raise ProfileError("[device] table is missing: is this a spigap device file?", path=path)
    name = d.text("name", required=True)
    title = d.text("title", required=True)
    sources = d.texts("sources", required=True)
    notes = d.text("notes", "")
    cannot = d.texts("cannot_check")
    default_variant = d.text("default_variant")
    d.done()
    base = top.table("limits")
    limits = {} if base is None else {k: base.table(k) for k in list(base.data)}
    if base is not None:
        base.done()
    vt = top.table("variants")
    variants = {} if vt is None else {k: vt.sub(k) for k in list(vt.data)}
    if vt is not None:
        vt.done()
    if variant is None:
        variant = default_variant
    if variants and variant is None:
        raise ProfileError(f"device {name!r} has variants: give one as {name}@VARIANT",
                           path=path, hint=f"variants: {', '.join(variants)}")
    if variant is not None:
        folded = {k.lower(): k for k in variants}
        if variant.lower() not in folded:
            raise ProfileError(f"device {name!r} has no variant {variant!r}", path=path,
                               hint=f"variants: {', '.join(variants) or 'none'}")
        variant = folded[variant.lower()]
    # a variant overrides or adds limits (and may say something about itself)
    merged: dict = {}
    for key, tbl in limits.items():
        merged[key] = [tbl]
    vnotes = ""
    for vname, vtbl in variants.items():
        v_limits = vtbl.table("limits")
        v_title = vtbl.text("title", "")
        v_notes = vtbl.text("notes", "")
        vtbl.done()
        v_items = {} if v_limits is None else {k: v_limits.table(k) for k in list(v_limits.data)}
        if v_limits is not None:
            v_limits.done()
        if vname == variant:
            vnotes = " ".join(filter(None, [v_title, v_notes]))
            for key, tbl in v_items.items():
                merged.setdefault(key, []).append(tbl)
        else:   # validate the others too, so a typo in any variant is reported
            for key, tbl in v_items.items():
                _parse_limit(key, [*(merged.get(key) or []), tbl], path, validate_only=True)
    out = [_parse_limit(key, tbls, path) for key, tbls in merged.items()]
    top.done()
    return Device(name=name, variant=variant, title=title, path=path, sources=sources, limits=out,
                  notes=" ".join(filter(None, [notes, vnotes])), cannot_check=cannot)


def _parse_limit(key: str, tables: list, path: str, validate_only: bool = False) -> Limit:
    merged: dict = {}
    for t in tables:
        merged.update(t.data)
    x = _Table(merged, tables[-1].where, path)
    metric = x.text("metric", required=True)
    if metric not in LIMIT_METRICS:
        raise x.err("metric", f"unknown metric {metric!r}; known: {', '.join(LIMIT_METRICS)}")
    unit = LIMIT_METRICS[metric][0]
    lim = Limit(name=x.text("name", key), metric=metric, what=x.text("what", required=True),
                source=x.text("source", required=True), min=x.quantity("min", unit),
                max=x.quantity("max", unit), multiple_of=x.integer("multiple_of", lo=1),
                unverified=x.flag("unverified", False), assumption=x.text("assumption", ""),
                note=x.text("note", ""))
    if lim.min is None and lim.max is None and lim.multiple_of is None:
        raise x.err("min", "a limit needs min, max or multiple_of")
    if lim.multiple_of is not None and metric != "frame_bits":
        raise x.err("multiple_of", "only applies to metric = \"frame_bits\"")
    x.done()
    return lim


def load_device(spec) -> Device:
    """'mcp3008@5V', 'ad7606', or 'my-chip.toml@3V3' -> Device."""
    if isinstance(spec, Device):
        return spec
    spec = os.fspath(spec)
    base, sep, variant = spec.rpartition("@")
    if not sep:
        base, variant = spec, None
    if not base:
        raise ProfileError(f"bad device {spec!r}", hint="use NAME[@VARIANT], e.g. mcp3008@5V")
    if _looks_like_file(base):
        return parse_device(_read_toml(base), base, variant)
    shipped = _shipped("devices")
    if base.lower() not in shipped:
        raise ProfileError(f"unknown device {base!r}", hint=f"known: {', '.join(shipped)}; or give a .toml file")
    entry = shipped[base.lower()]
    return parse_device(_read_toml(str(entry), entry.read_text(encoding="utf-8")),
                        f"<spigap>/devices/{entry.name}", variant)


def list_devices() -> list[Device]:
    """Every shipped device in every variant."""
    out = []
    for name, entry in _shipped("devices").items():
        data = _read_toml(str(entry), entry.read_text(encoding="utf-8"))
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
