"""SPI settings and channel mapping for one analysis."""

from __future__ import annotations

import dataclasses
import re

from spigap.errors import UsageError
from spigap.limits import STREAM_CHANNELS, TRANSFERS_PER_MESSAGE_MAX

MAX_WORDSIZE = 1024
MAX_CS_LINES = STREAM_CHANNELS - 3      # devices on one bus: the stream's channels but SCLK, MOSI, MISO
INFERABLE = frozenset({"mode", "cs_polarity", "wordsize", "bitorder"})     # words above 64 bits are framed in chunks (core/bigwords.py)

# Common names, matched case-insensitively after dropping a leading "D<n>_"/"<n>_"
# prefix (real captures use "0_CLK", "3_CS#") and a "rpi_"/"uc_"-style bus prefix
# is *not* stripped: two buses in one file must be chosen explicitly.
AUTO_NAMES = {
    "clk": ("clk", "sclk", "sck", "clock", "spi_clk", "spi_sclk", "sclk0"),
    "mosi": ("mosi", "sdi", "din", "si", "copi", "spi_mosi", "sdio", "data_in"),
    "miso": ("miso", "sdo", "dout", "so", "cipo", "spi_miso", "douta", "data_out"),
    "cs": ("cs", "cs#", "csn", "cs_n", "ncs", "ss", "ss#", "nss", "ssn", "ce0", "ce", "cs0",
           "spi_cs", "/cs", "chip_select", "en", "enable", "sync"),
}


def _norm(name: str) -> str:
    n = name.strip().lower()
    n = re.sub(r"^(d?\d+)[_\- ]", "", n)
    return n


def autodetect(channels: list[str], role: str) -> str | None:
    wanted = AUTO_NAMES[role]
    hits = [c for c in channels if _norm(c) in wanted]
    if len(hits) == 1:
        return hits[0]
    if len(hits) > 1:
        # prefer the earliest alias in the list, then the first channel
        hits.sort(key=lambda c: (wanted.index(_norm(c)), channels.index(c)))
        return hits[0]
    return None


def bus_groups(channels: list[str]) -> dict[str, dict[str, str]]:
    """Channels named ``<bus>_<role>`` ("rpi_CLK", "uc_MOSI"), grouped by bus prefix
    in channel order: {prefix: {role: channel}}; only groups with a clock."""
    groups: dict[str, dict[str, str]] = {}
    for c in channels:
        m = re.match(r"^(.+?)[_\-. ](.+)$", c.strip())
        if not m:
            continue
        prefix, rest = m.group(1), _norm(m.group(2))
        for role, aliases in AUTO_NAMES.items():
            if rest in aliases and role not in groups.setdefault(prefix, {}):
                groups[prefix][role] = c
    return {p: g for p, g in groups.items() if "clk" in g and len(g) >= 2}


@dataclasses.dataclass
class SpiConfig:
    cpol: int = 0
    cpha: int = 0
    cs_active_low: bool = True
    wordsize: int = 8
    lsb_first: bool = False
    clk: str | None = None
    mosi: str | None = None
    miso: str | None = None
    cs: str | None = None
    # a shared bus (docs/shared-bus.md): the other devices' CS lines on the same SCLK/MOSI/MISO
    # (``--cs CE0,CE1``, or found in the signals); ``cs`` is the first device's
    more_cs: tuple = ()
    no_cs: bool = False                      # user said: there is no CS line
    idle_timeout_s: float | None = None      # CS-less framing; None = auto
    inter_transfer_gap_s: float | None = None  # None = auto threshold
    transfers_per_message: int | None = None   # None = infer
    context_switch: str | None = None          # "longer"/"shorter": which CS-inactive gaps end messages
    message_lengths: tuple | None = None       # message lengths a --device's driver uses (evidence)
    # settings to infer from the signals (core/infer/): any of INFERABLE. Empty for a
    # SpiConfig built in code (its values are taken as given); the CLI lists what the
    # command line leaves out, analyze_file() without a config infers everything.
    infer: frozenset = frozenset()
    assumed: frozenset = frozenset()           # settings left at their defaults by --no-infer (reported so)
    # a shared bus: a device's own settings (``check --profile CE0=NAME``: the SPI core sets
    # mode, word size, bit order and CS polarity per device): CS name -> (SpiConfig, where
    # from). Its values count where its ``infer`` lacks a setting this config's has (given
    # options win, then these, then the signals); its transfers_per_message where this has none.
    device_cfgs: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        if self.cpol not in (0, 1) or self.cpha not in (0, 1):
            raise UsageError("CPOL and CPHA must be 0 or 1")
        if not 1 <= self.wordsize <= MAX_WORDSIZE:
            raise UsageError(f"--wordsize {self.wordsize} is outside 1..{MAX_WORDSIZE}")
        if self.transfers_per_message is not None and not 1 <= self.transfers_per_message <= TRANSFERS_PER_MESSAGE_MAX:
            raise UsageError(f"--transfers-per-message must be 1..{TRANSFERS_PER_MESSAGE_MAX:,} or 'auto'")
        if self.context_switch not in (None, "longer", "shorter"):
            raise UsageError("--context-switch must be 'longer' or 'shorter'")
        self.infer = frozenset(self.infer)
        if not self.infer <= INFERABLE:
            raise ValueError(f"cannot infer {sorted(self.infer - INFERABLE)}")

    @property
    def mode(self) -> int:
        return self.cpol * 2 + self.cpha

    def stream_names(self) -> list[str]:
        """The channels the analysis reads, in the edge stream's bit order: SCLK, CS,
        MOSI, MISO (those that are mapped), then the other devices' CS lines."""
        return [n for n in (self.clk, self.cs, self.mosi, self.miso) if n is not None] + list(self.more_cs)

    @property
    def devices(self) -> list[str]:
        """The CS lines of the bus's devices (one, or several on a shared bus)."""
        return ([self.cs] if self.cs is not None else []) + list(self.more_cs)

    def stream_bits(self) -> dict[str, int]:
        """role -> bit of the edge stream's states (``stream_names``' order)."""
        roles = [r for r, n in (("clk", self.clk), ("cs", self.cs), ("mosi", self.mosi), ("miso", self.miso))
                 if n is not None]
        return {role: j for j, role in enumerate(roles)}

    @property
    def sample_on_rising(self) -> bool:
        # modes 0 and 3 sample on the rising edge, 1 and 2 on the falling edge
        return self.cpol == self.cpha

    def resolve(self, channels: list[str], path: str | None = None,
                defaults: dict[str, str] | None = None, partial: bool = False,
                aliases: dict[str, str] | None = None) -> "SpiConfig":
        """Fill in channel names: the user's, else the file's own map (``defaults``,
        e.g. DSView's decoder settings), else auto-detected by name; check that they
        exist. ``partial``: leave roles no name settles as None (core/infer/ finds
        them in the signals) instead of failing. ``aliases``: other names the reader knows a
        channel by (a VCD net's declarations in other scopes)."""
        from spigap.io.base import resolve_channel

        if self.cs is not None and "," in self.cs and resolve_channel(self.cs, channels) is None:
            # --cs CE0,CE1: several devices on one bus (a channel named with a comma is taken whole)
            parts = [p.strip() for p in self.cs.split(",")]
            if not all(parts):
                raise UsageError(f"--cs {self.cs!r}: give the CS lines as NAME,NAME,...", path=path)
            split = dataclasses.replace(self, cs=parts[0], more_cs=tuple(parts[1:]) + tuple(self.more_cs))
            return split.resolve(channels, path, defaults, partial, aliases)
        out = dataclasses.replace(self)

        def check(role, name):
            if name is None:
                return None
            idx = resolve_channel(name, channels, aliases)
            if idx is not None:
                return channels[idx]
            raise UsageError(f"no channel named {name!r} for --{role}; the capture has: "
                             f"{', '.join(channels)}", path=path)

        for role in ("clk", "mosi", "miso", "cs"):
            name = getattr(self, role)
            if name is not None:
                setattr(out, role, check(role, name))
            elif not (role == "cs" and self.no_cs):
                given = (defaults or {}).get(role)
                setattr(out, role, given if given in channels else autodetect(channels, role))
        out.more_cs = tuple(check("cs", n) for n in self.more_cs)
        if len(set(out.devices)) != len(out.devices):
            raise UsageError(f"--cs names one line twice: {','.join(out.devices)}", path=path)
        if self.more_cs and len(out.devices) > MAX_CS_LINES:
            raise UsageError(f"--cs names {len(out.devices)} CS lines; spigap follows at most {MAX_CS_LINES} on "
                             f"one bus (an edge stream holds {STREAM_CHANNELS} channels: SCLK, MOSI, MISO and the "
                             "CS lines)", path=path, hint=f"analyze the devices in groups of {MAX_CS_LINES} or fewer")
        if partial:
            taken = [getattr(self, r) and getattr(out, r) for r in ("clk", "mosi", "miso", "cs")] + list(out.more_cs)
            for role in ("clk", "mosi", "miso", "cs"):      # a name-found role never steals a given channel
                if getattr(self, role) is None and taken.count(getattr(out, role)) and getattr(out, role):
                    setattr(out, role, None)
            return out
        if out.clk is None:
            raise UsageError(f"no clock channel found; the capture has: {', '.join(channels)}",
                             path=path, hint="name it with --clk")
        if out.mosi is None and out.miso is None:
            raise UsageError(f"no MOSI or MISO channel found; the capture has: {', '.join(channels)}",
                             path=path, hint="name them with --mosi/--miso")
        used = [n for n in (out.clk, out.mosi, out.miso, out.cs) if n is not None] + list(out.more_cs)
        if len(set(used)) != len(used):
            raise UsageError(f"one channel is mapped to two roles: clk={out.clk} mosi={out.mosi} "
                             f"miso={out.miso} cs={','.join(out.devices) or None}", path=path)
        return out
