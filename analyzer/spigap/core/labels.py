"""``spigap analyze --device NAME``: the device-level meaning of each transfer.

One implementation per protocol: the meaning comes from the plain module of
our sigrok decoder (decoders/<id>/<module>.py, loaded by path without
libsigrokdecode), the same code PulseView runs. Each such module provides
``label_transfer(mosi, miso, options) -> str`` and optionally
``new_state(options)`` for protocols whose meaning depends on earlier
transfers (the MCP2518FD's FIFO layout).
"""

from __future__ import annotations

import dataclasses

from spigap.errors import UsageError

# name -> (decoder id, plain module, default options)
DEVICES = {
    "mcp3008": ("mcp3008", "mcp3x0x", {"part": "MCP3008"}),
    # every other part of Linux's mcp320x driver, named as its spi_device_id table does
    **{p.lower(): ("mcp3008", "mcp3x0x", {"part": p}) for p in (
        "MCP3001", "MCP3002", "MCP3004", "MCP3201", "MCP3202", "MCP3204", "MCP3208", "MCP3301",
        "MCP3550-50", "MCP3550-60", "MCP3551", "MCP3553")},
    "ad7606": ("ad7606", "ad760x", {}),
    "mcp2518fd": ("mcp2518fd", "mcp251xfd", {"chip": "mcp2518fd"}),
    "mcp2517fd": ("mcp2518fd", "mcp251xfd", {"chip": "mcp2517fd"}),
    "mcp251863": ("mcp2518fd", "mcp251xfd", {"chip": "mcp251863"}),
}


@dataclasses.dataclass(frozen=True)
class DeviceSpec:
    """``--device NAME[@VARIANT][:KEY=VALUE,...]``, the one spelling of every subcommand.

    NAME: a decoder/device name (``DEVICES``) or a device limits ``.toml`` file;
    VARIANT: which datasheet limits (supply voltage...) 'spigap check' applies;
    KEY=VALUE: options of the device's sigrok decoder ('spigap analyze' labels).
    """

    name: str
    variant: str | None
    options: dict
    is_file: bool

    @property
    def limits_spec(self) -> str:
        """The spec ``spigap.timing.profiles.load_device`` takes (timing/check.device_limits)."""
        return f"{self.name}@{self.variant}" if self.variant else self.name


def _is_file(name: str) -> bool:
    return name.lower().endswith(".toml") or "/" in name or "\\" in name


def parse_spec(spec: str) -> DeviceSpec:
    """'mcp3008@5V:vref=5' -> DeviceSpec('mcp3008', '5V', {'vref': '5'}, False)."""
    text = str(spec).strip()
    head, _, rest = text.partition(":")
    name, at, variant = head.rpartition("@")
    if not at:
        name, variant = head, ""
    name = name.strip()
    if not name or (at and not variant.strip()):
        raise UsageError(f"bad device {text!r}: give NAME[@VARIANT][:KEY=VALUE,...], e.g. mcp3008@5V:vref=3.3")
    is_file = _is_file(name)
    if not is_file:
        name = name.lower()
        if name not in DEVICES:
            raise UsageError(f"unknown device {name!r}; known: {', '.join(DEVICES)} (or a device .toml file)")
    opts = {}
    for item in filter(None, (x.strip() for x in rest.split(","))):
        if "=" not in item:
            raise UsageError(f"device options are KEY=VALUE, got {item!r} in {text!r}")
        k, v = item.split("=", 1)
        opts[k.strip()] = v.strip()
    return DeviceSpec(name, variant.strip() or None, opts, is_file)


def parse(spec: str) -> tuple[str, dict]:
    """'mcp3008:vref=5,part=MCP3208' -> ('mcp3008', {'vref': '5', 'part': 'MCP3208'}): the decoder side."""
    d = parse_spec(spec)
    if d.is_file:
        raise UsageError(f"--device {spec!r}: a device file holds datasheet limits only; labelling the "
                         f"transfers needs a decoder name: {', '.join(DEVICES)}")
    return d.name, d.options


# The message shapes of each device's Linux driver, in CS windows per
# spi_message: evidence for the message grouping (docs/gaps.md). mcp251xfd
# reads registers with single-transfer messages and the RX path with a
# 2-transfer message (seed 001: four single transfers, then 168 + 48 bits).
MESSAGE_LENGTHS = {
    "mcp2518fd": (1, 2), "mcp2517fd": (1, 2), "mcp251863": (1, 2),
}


def message_lengths(spec: str) -> tuple | None:
    """Message lengths (CS windows per message) the device's driver uses, or None when unknown."""
    if spec is None or str(spec).strip().lower() == "none":
        return None
    d = parse_spec(spec)
    return None if d.is_file else MESSAGE_LENGTHS.get(d.name)


def label_transfers(analysis, spec: str) -> list[str]:
    """One label per transfer, in bus order."""
    from spigap.resources import load_decoder_module

    name, user_opts = parse(spec)
    decoder, module, defaults = DEVICES[name]
    mod = load_decoder_module(decoder, module)
    opts = {**defaults, "wordsize": analysis.cfg.wordsize, **user_opts}
    if hasattr(mod, "new_state"):
        opts["state"] = mod.new_state(opts)
    a = analysis
    mosi = a.mosi.tolist() if a.cfg.mosi is not None else None
    miso = a.miso.tolist() if a.cfg.miso is not None else None
    out = []
    # one call per transfer: device decoding is per-transfer output work, not the hot path
    for k in range(a.n):
        w0, w1 = int(a.word_off[k]), int(a.word_off[k + 1])
        try:
            out.append(mod.label_transfer(mosi[w0:w1] if mosi is not None else None,
                                          miso[w0:w1] if miso is not None else None, opts))
        except Exception as e:  # a decoder bug must not lose the timing results
            out.append(f"(decoder error: {type(e).__name__}: {e})")
    return out
