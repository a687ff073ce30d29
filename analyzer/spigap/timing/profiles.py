"""The profiles and device limits spigap knows: shipped ones by name, users' files.

Shipped files live in ``analyzer/spigap/timing/profiles/*.toml`` and
``analyzer/spigap/timing/devices/*.toml`` (loaded with importlib.resources); users pass
their own with ``--profile FILE.toml`` / ``--device FILE.toml[@VARIANT]``. The
format is documented in docs/timing-model.md ("Profile files"); every shipped
file is an example. ``spigap.timing.profile_files`` holds the format (one
dataclass per table) and what a file reads into (``Profile``, ``Device``; named
here too, for the modules that use them).

Every number in a profile cites where it comes from (``source``) and says
whether it is our assumption (``assumed = true``); device limits that
docs/linux-spi-timing.md lists as UNVERIFIED carry ``unverified = true``.
Loading validates everything (unknown keys too, to catch typos) and raises
``ProfileError`` with one line naming the file and the key. Files are read
through spigap.infile.read_toml: bounded in size and depth (docs/cli.md, "Bounds").
"""

from __future__ import annotations

import os
from importlib import resources

from spigap.timing.profile_files import (
    EXPECT_METRICS,
    GAP_METRICS,
    LIMIT_METRICS,
    MODEL_METRICS,
    VALUE_METRICS,
    Device,
    Electrical,
    Expectation,
    Limit,
    Profile,
    parse_device,
    parse_profile,
)
from spigap.infile import read_toml
from spigap.timing.toml_tables import ProfileError

__all__ = ["ProfileError", "Profile", "Expectation", "Device", "Electrical", "Limit", "load_profile", "load_device",
           "list_profiles", "list_devices", "list_text", "GAP_METRICS", "VALUE_METRICS", "EXPECT_METRICS",
           "MODEL_METRICS", "LIMIT_METRICS"]


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


def _shipped_toml(entry, what: str) -> dict:
    """A shipped file (a package resource, which may live in a zip) through the one TOML reader."""
    return read_toml(str(entry), what=what, text=entry.read_text(encoding="utf-8"), error=ProfileError)


def _looks_like_file(text: str) -> bool:
    return text.endswith(".toml") or os.sep in text or "/" in text or os.path.exists(text)


def load_profile(name_or_path) -> Profile:
    """A shipped profile by name (see ``list_profiles``) or a user TOML file."""
    if isinstance(name_or_path, Profile):
        return name_or_path
    spec = os.fspath(name_or_path)
    if _looks_like_file(spec):
        return parse_profile(read_toml(spec, what="profile", error=ProfileError), spec)
    shipped = _shipped("profiles")
    if spec not in shipped:
        raise ProfileError(f"unknown profile {spec!r}", hint=f"known: {', '.join(shipped)}; or give a .toml file")
    entry = shipped[spec]
    return parse_profile(_shipped_toml(entry, "profile"), f"<spigap>/profiles/{entry.name}")


def list_profiles() -> list[Profile]:
    return [load_profile(name) for name in _shipped("profiles")]


# ------------------------------------------------------------------ devices
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
        return parse_device(read_toml(base, what="device file", error=ProfileError), base, variant)
    shipped = _shipped("devices")
    if base.lower() not in shipped:
        raise ProfileError(f"unknown device {base!r}", hint=f"known: {', '.join(shipped)}; or give a .toml file")
    entry = shipped[base.lower()]
    return parse_device(_shipped_toml(entry, "device file"), f"<spigap>/devices/{entry.name}", variant)


def list_devices() -> list[Device]:
    """Every shipped device in every variant."""
    out = []
    for name, entry in _shipped("devices").items():
        data = _shipped_toml(entry, "device file")
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
