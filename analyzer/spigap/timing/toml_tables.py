"""TOML tables read into dataclasses: the schema of profile and device files.

A file's tables are dataclasses (``spigap.timing.profiles``) whose fields are the
table's keys. Each field is ``Annotated[type, kind]``: ``kind`` turns the TOML
value into the field's value or says in a few words what is wrong with it
(``Bad``). ``read_table`` reads one table: every field in declaration order, a
missing key without a default is an error, a key that is no field is a typo.
Every error is one ``ProfileError`` line naming the file and ``table.key``.

Why not a validation library: msgspec (0.22, ~700 kB, a C extension) was tried
on these files. It would replace the type checks below (``text``, ``flag``,
``integer``, ``number``: ~40 lines) but not the rest: durations ("1.6us"),
frequencies ("3.6MHz"), tolerances ("5%") and the rules between keys (a value
or ``model = true``, p99_min ≤ p99_max, a device's variants) stay ours, as
hooks. Its messages speak JSON to a TOML user ("Expected `int | null`, got
`bool` - at `$.bus.mode`", "`object`", "`array`") and would need rewriting, and
it accepts inf and blank strings where a profile must not. pydantic has the
same gaps and weighs ~5 MB. tomllib (stdlib) parses (spigap.infile.read_toml, the one
bounded TOML reader); ``dataclasses`` and
``typing.Annotated`` carry the schema; what is hand-written here is the
conversion of one value, each kind a few lines.
"""

from __future__ import annotations

import dataclasses
import math
import typing

from spigap.errors import SpigapError
from spigap.limits import rate_problem
from spigap.units import parse_freq, parse_time


class ProfileError(SpigapError):
    """A profile or device file is missing, not TOML, or has a bad/unknown key."""


class Bad(ValueError):
    """What is wrong with one value: the message after 'table.key: '."""


@dataclasses.dataclass(frozen=True)
class Where:
    """Where a value is: the file, its ``table.key``, and the unit of a quantity."""

    path: str
    loc: str
    unit: str | None = None

    def key(self, key: str) -> "Where":
        return Where(self.path, f"{self.loc}.{key}" if self.loc else key, self.unit)

    def error(self, problem: str) -> ProfileError:
        return ProfileError(f"{self.loc}: {problem}", path=self.path)


def missing(message: str) -> dict:
    """Field metadata: the whole error line when this (required) key is absent."""
    return {"missing": message}


def required(problem: str) -> dict:
    """Field metadata: what 'table.key: ' says when this (required) key is absent."""
    return {"required": problem}


def read_table(cls, data, where: Where):
    """``data`` (one TOML table) as a ``cls``: each field from its key, converted by its kind."""
    if not isinstance(data, dict):
        raise ProfileError(f"[{where.loc}] must be a table", path=where.path)
    hints = typing.get_type_hints(cls, include_extras=True)
    kw = {}
    for f in dataclasses.fields(cls):
        at = where.key(f.name)
        if f.name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                if "missing" in f.metadata:
                    raise ProfileError(f.metadata["missing"], path=where.path)
                raise at.error(f.metadata.get("required", "is required"))
            continue
        kind = hints[f.name].__metadata__[0]
        try:
            kw[f.name] = kind(data[f.name], at)
        except Bad as e:
            raise at.error(str(e)) from None
    unknown = sorted(set(data) - {f.name for f in dataclasses.fields(cls)})
    if unknown:
        raise where.key(unknown[0]).error("unknown key (typo?)")
    return cls(**kw)


# ------------------------------------------------------------------ value kinds
def table(cls):
    """A sub-table read as ``cls``."""
    return lambda v, at: read_table(cls, v, at)


def a_table(v, at: Where) -> dict:
    """A table kept as a dict (its reader comes later)."""
    if not isinstance(v, dict):
        raise ProfileError(f"[{at.loc}] must be a table", path=at.path)
    return v


def tables(v, at: Where) -> dict:
    """A table of tables (``[limits.NAME]``), each kept as a dict for its reader."""
    if not isinstance(v, dict):
        raise ProfileError(f"[{at.loc}] must be a table", path=at.path)
    for k, sub in v.items():
        if not isinstance(sub, dict):
            raise ProfileError(f"[{at.key(k).loc}] must be a table", path=at.path)
    return v


def string(v, at: Where) -> str:
    if not isinstance(v, str):
        raise Bad("must be a non-empty string")
    return v


def text(v, at: Where) -> str:
    """A string with something in it."""
    if not isinstance(v, str) or not v.strip():
        raise Bad("must be a non-empty string")
    return v


def texts(v, at: Where) -> list:
    """A list of non-empty strings; one string is a list of one."""
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list) or not all(isinstance(x, str) and x.strip() for x in v):
        raise Bad("must be a list of non-empty strings")
    return v


def some_texts(v, at: Where) -> list:
    v = texts(v, at)
    if not v:
        raise Bad("must not be empty")
    return v


def flag(v, at: Where) -> bool:
    if not isinstance(v, bool):
        raise Bad("must be true or false")
    return v


def integer(lo: int | None = None, hi: int | None = None):
    def kind(v, at: Where) -> int:
        if isinstance(v, bool) or not isinstance(v, int):
            raise Bad(f"must be an integer, not {v!r}")
        if hi is not None and not (lo is None or lo <= v <= hi):
            raise Bad(f"must be {lo}..{hi}")
        if lo is not None and v < lo:
            raise Bad(f"must be >= {lo}")
        return v
    return kind


def number(lo: float | None = None):
    def kind(v, at: Where) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise Bad(f"must be a number, not {v!r}")
        if lo is not None and v < lo:
            raise Bad(f"must be >= {lo}")
        return float(v)
    return kind


def time(v, at: Where) -> float:
    """A duration: "1.6us", "250 ns", or a number of seconds."""
    if isinstance(v, bool):
        raise Bad("must be a duration like \"1.6us\"")
    try:
        t = parse_time(v)
    except (ValueError, TypeError) as e:
        raise Bad(str(e)) from None
    if not math.isfinite(t) or t < 0:
        raise Bad("must be a non-negative duration")
    return t


def freq(v, at: Where) -> float:
    """A frequency: "3.6MHz", "500k", or a number of Hz."""
    if isinstance(v, bool):
        raise Bad("must be a frequency like \"3.6MHz\"")
    try:
        f = parse_freq(v)
    except (ValueError, TypeError) as e:
        raise Bad(str(e)) from None
    if not (f > 0 and math.isfinite(f)):
        raise Bad("must be a positive frequency")
    problem = rate_problem(f)
    if problem is not None:
        raise Bad(problem)
    return f


def quantity(v, at: Where) -> float:
    """A value in the unit of the table it is in (``Where.unit``): s, Hz, or a plain number."""
    if at.unit == "s":
        return time(v, at)
    if at.unit == "Hz":
        return freq(v, at)
    return number(lo=0)(v, at)


def tolerance(unit: str | None = None):
    """'0.3us' (absolute, in ``unit`` or the table's) or '20%' (relative): (absolute, relative)."""
    def kind(v, at: Where) -> tuple[float | None, float | None]:
        if isinstance(v, str) and v.strip().endswith("%"):
            try:
                r = float(v.strip()[:-1]) / 100.0
            except ValueError:
                raise Bad(f"not a percentage: {v!r}") from None
            if not (0 <= r < 10):
                raise Bad(f"percentage out of range: {v!r}")
            return None, r
        return quantity(v, dataclasses.replace(at, unit=unit or at.unit)), None
    return kind


def level(v, at: Where) -> tuple[float, bool]:
    """An input level: volts (a number) or a share of the supply ("0.7 VDD", "0.3*VDD"):
    (value, relative to VDD)."""
    if isinstance(v, bool):
        raise Bad("must be volts or a share of VDD like \"0.7 VDD\"")
    if isinstance(v, (int, float)):
        if not math.isfinite(v):
            raise Bad(f"must be a number of volts, not {v!r}")
        return float(v), False
    if isinstance(v, str):
        t = v.strip().upper().replace("*", " ").replace("X", " ")
        if t.endswith("VDD"):
            try:
                k = float(t[:-3].strip() or "1")
            except ValueError:
                raise Bad(f"not a share of VDD: {v!r}") from None
            if not (0 <= k <= 1.5):
                raise Bad(f"share of VDD out of range: {v!r}")
            return k, True
    raise Bad(f"must be volts or a share of VDD like \"0.7 VDD\", not {v!r}")
