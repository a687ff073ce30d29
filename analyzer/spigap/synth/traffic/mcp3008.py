"""MCP3x0x/MCP355x traffic with known conversion results.

``mcp320x-iio`` (``iio``): every part of Linux's mcp320x driver, clocked as the driver does
(options part, codes, channels, differential, hiz, after_b0 = repeat/zeros for MCP3002/3202,
conversions; faults null_one, repeat_flip, not_ready, hiz_one, all_ones: lists of conversion
indexes). The rest of this docstring is ``mcp3008-adc``, the MCP3004/3008/3204/3208 idioms.

Every CS window carries one conversion request in one of the common byte
patterns (docs/linux-spi-timing.md §4.2), and MISO is what the ADC would shift out
for it: a bit-level model of the device (hi-Z until the null bit, result MSB
first, then the LSB-first repeat from B1, then zeros). This model is written
independently of the sigrok decoder, so the two can check each other.

``[device]`` options (TOML table or ``--device mcp3008-adc:key=value,...``):

=================  =====================================================
name               ``mcp3008-adc``
part               MCP3004, MCP3008 (default), MCP3204, MCP3208
vref               reference voltage for the truth's volts (3.3)
conversions        number of conversions (16)
pattern            start-alone: 0x01, (0x8|ch)<<4, 0x00
                   linux: 0x60|ch<<2, 0, 0 (seed 000, mcp320x command byte)
                   mcp3208: 0x06|ch>>2, (ch&3)<<6, 0x00
                   mcp320x: linux bytes as a 1-byte command transfer +
                   2-byte read transfer inside one CS window
                   or a list of these, cycled (default: linux)
channels           list of channel numbers, cycled (default: all inputs)
differential       true/false or a list, cycled (default false)
codes              list of result codes (cycled), "ramp" or "random"
hiz                MISO level while the device does not drive it (1)
null_one           conversions whose null bit the device sends as 1
repeat_flip        conversions with one LSB-first repeat bit inverted
short              conversions the host clocks with 2 bytes only
no_start           conversions whose MOSI bytes are all zero
cs_split           conversions with CS released after the command byte
                   (a cs_change on transfer 0 of the mcp320x message)
=================  =====================================================

Index lists accept TOML lists or space-separated text ("3 7").
The truth is ``Timeline.device_truth``: one dict per CS window.
"""

from __future__ import annotations

import numpy as np

from spigap.errors import UsageError
from spigap.synth.traffic import option_bool, option_list

# The chip's output timing in synthesized captures (the recipe's miso_delay / miso_enable override
# it): DOUT changes 40 ns after the falling clock edge, and the window's first bit (CPHA 0: the
# high-impedance level the model sends, synth hiz) 40 ns after CS falls. Our assumption, inside the
# datasheet's tDO and tEN of at most 125 ns at 5 V, 200 ns at 2.7 V (DS21295D timing table;
# analyzer/spigap/timing/devices/mcp3008.toml), with 100 ns of setup left at the 3.6 MHz maximum.
LAUNCH = {"miso_delay": 40e-9, "miso_enable": 40e-9}

PARTS = {"MCP3004": (4, 10), "MCP3008": (8, 10), "MCP3204": (4, 12), "MCP3208": (8, 12)}
PATTERNS = ("start-alone", "linux", "mcp3208", "mcp320x")


def command_bytes(pattern: str, ch: int, sgl: bool) -> list[int]:
    """The host's MOSI bytes for one conversion (docs/linux-spi-timing.md §4.2)."""
    s = 1 if sgl else 0
    if pattern == "start-alone":
        return [0x01, ((s << 3) | ch) << 4, 0x00]
    if pattern in ("linux", "mcp320x"):
        return [(1 << 6) | (s << 5) | (ch << 2), 0x00, 0x00]
    if pattern == "mcp3208":
        return [0x04 | (s << 1) | (ch >> 2), (ch & 3) << 6, 0x00]
    raise UsageError(f"unknown mcp3008 pattern {pattern!r}; known: {', '.join(PATTERNS)}")


def device_reply(mosi_bits: list[int], code: int, bits: int, hiz: int,
                 null_bit: int = 0, flip_repeat: int | None = None) -> list[int]:
    """What DOUT carries on each clock, given the host's DIN bits (one list per CS window)."""
    try:
        s = mosi_bits.index(1)
    except ValueError:
        return [hiz] * len(mosi_bits)
    out = []
    for i in range(len(mosi_bits)):
        k = i - s
        if k < 6:
            out.append(hiz)
        elif k == 6:
            out.append(null_bit)
        elif k < 7 + bits:
            out.append((code >> (bits - 1 - (k - 7))) & 1)
        elif k < 7 + 2 * bits - 1:
            j = k - 7 - bits + 1            # B1 first
            b = (code >> j) & 1
            if flip_repeat is not None and j == flip_repeat:
                b ^= 1
            out.append(b)
        else:
            out.append(0)
    return out


def expectation(mosi_bits: list[int], bits: int, null_bit: int, flip: int | None) -> dict:
    """What a correct decoder must report for one CS window (from the device model)."""
    try:
        s = mosi_bits.index(1)
    except ValueError:
        return {"expect": "no_start", "start_clock": None, "repeat_bits": 0, "complete": False}
    left = len(mosi_bits) - s                  # clocks from the start bit on
    out: dict[str, object] = {"start_clock": s + 1, "repeat_bits": max(0, min(bits - 1, left - 7 - bits))}
    if left < 5:
        out["expect"] = "cs_mid_command"
    elif left < 7:
        out["expect"] = "null_missing"
    elif left == 7:
        out["expect"] = "cs_mid_no_result"
    elif left < 7 + bits:
        out["expect"] = "short"
    elif null_bit:
        out["expect"] = "null_one"
    elif flip is not None:
        out["expect"] = "repeat_flip"
    else:
        out["expect"] = "ok"
    out["complete"] = left >= 7 + bits
    return out


def _bits(words, ws=8):
    return [(w >> (ws - 1 - i)) & 1 for w in words for i in range(ws)]


def _words(bits, ws=8):
    return [int("".join(map(str, bits[j:j + ws])), 2) for j in range(0, len(bits), ws)]


def adc(sc, opts: dict):
    """MCP3004/3008/3204/3208 conversions at every start-bit alignment (known codes)."""
    opts = dict(opts)
    part = str(opts.pop("part", "MCP3008")).upper()
    if part not in PARTS:
        raise UsageError(f"unknown part {part!r}; known: {', '.join(PARTS)}")
    inputs, nbits = PARTS[part]
    vref = float(opts.pop("vref", 3.3))
    n = int(opts.pop("conversions", 16))
    patterns = opts.pop("pattern", "linux")
    patterns = [patterns] if isinstance(patterns, str) and " " not in patterns else option_list(patterns, str)
    for p in patterns:
        if p not in PATTERNS:
            raise UsageError(f"unknown mcp3008 pattern {p!r}; known: {', '.join(PATTERNS)}")
    channels = option_list(opts.pop("channels", None)) or list(range(inputs))
    if any(not 0 <= c < 8 for c in channels):
        raise UsageError("mcp3008 channels are 0..7")
    diff = opts.pop("differential", False)
    diffs = [option_bool(v) for v in (diff if isinstance(diff, list) else str(diff).replace(",", " ").split())]
    codes_opt = opts.pop("codes", "ramp")
    hiz = int(opts.pop("hiz", 1))
    errors = {k: set(option_list(opts.pop(k, None))) for k in
              ("null_one", "repeat_flip", "short", "no_start", "cs_split")}
    if opts:
        raise UsageError(f"unknown mcp3008-adc options: {', '.join(sorted(opts))}")
    if sc.wordsize != 8 or sc.lsb_first:
        raise UsageError("mcp3008-adc needs wordsize 8, MSB first")
    if (sc.cpol, sc.cpha) not in ((0, 0), (1, 1)):
        raise UsageError("the MCP3x0x supports SPI modes 0 and 3 only")

    rng = np.random.default_rng(sc.seed)
    top = (1 << nbits) - 1
    if codes_opt == "random":
        codes = [int(c) for c in rng.integers(0, top, n, endpoint=True)]
    elif codes_opt == "ramp":
        codes = [int(round(i * top / max(n - 1, 1))) for i in range(n)]
    else:
        codes = option_list(codes_opt)
        if not codes or any(not 0 <= c <= top for c in codes):
            raise UsageError(f"codes must be 0..{top}")
        codes = [codes[i % len(codes)] for i in range(n)]

    mosi_w, miso_w, seg, msg, truth = [], [], [], [], []

    def add(tx, rx, segments, first, t):
        mosi_w.append(tx)
        miso_w.append(rx)
        seg.append(segments)
        msg.append(first)
        t.update(window=len(mosi_w) - 1, mosi=tx, miso=rx)
        truth.append(t)

    for i in range(n):
        pattern = patterns[i % len(patterns)]
        ch = channels[i % len(channels)]
        sgl = not diffs[i % len(diffs)]
        code = codes[i]
        tx = command_bytes(pattern, ch, sgl)
        if i in errors["no_start"]:
            tx = [0] * len(tx)
        if i in errors["short"]:
            tx = tx[:2]
        first = i % max(sc.transfers_per_message, 1) == 0
        d = ch & 3 if inputs == 4 else ch
        if sgl:
            name = f"CH{d}"
        else:
            e = d & ~1
            name = f"CH{e}\u2212/CH{e + 1}+" if d & 1 else f"CH{e}+/CH{e + 1}\u2212"
        t = {"conversion": i, "pattern": pattern, "part": part, "channel": name, "ch": ch, "sgl": sgl,
             "code": code, "volts": code * vref / (1 << nbits)}
        if i in errors["cs_split"]:
            # CS goes high after the command byte (cs_change on transfer 0 of the
            # mcp320x message): the device aborts, the 2-byte read finds no start bit.
            for k, part_tx in enumerate(([tx[0]], [0, 0])):
                mo = _bits(part_tx)
                rx = _words(device_reply(mo, code, nbits, hiz))
                add(part_tx, rx, [False] * len(part_tx), first and k == 0,
                    {**t, **expectation(mo, nbits, 0, None)})
            continue
        mo = _bits(tx)
        null = 1 if i in errors["null_one"] else 0
        flip = 1 + int(rng.integers(0, 2)) if i in errors["repeat_flip"] else None
        ex = expectation(mo, nbits, null, flip)
        if flip is not None and ex["repeat_bits"] < flip:
            raise UsageError(f"repeat_flip: conversion {i} ({pattern}) has no LSB-first repeat bit B{flip}")
        rx = _words(device_reply(mo, code, nbits, hiz, null, flip))
        segments = [False, True, False][:len(tx)] if pattern == "mcp320x" else [False] * len(tx)
        add(tx, rx, segments, first, {**t, **ex})

    w = sc.windows_from_payload(mosi_w, miso_w, message_start=msg, segment_start=seg)
    tl = sc.build_timeline(w)
    tl.device_truth = truth
    return tl


# ----------------------------------------------------------- the Linux driver
# drivers/iio/adc/mcp320x.c, as facts (nothing copied): mcp320x_channel_to_tx_data() puts the start
# bit (1 << 6), !differential (<< 5) and the channel (<< 2) into the 1-byte transfer[0] of the
# 4- and 8-input parts; transfer[1] receives DIV_ROUND_UP(resolution, 8) bytes; both transfers are
# one spi_message (one CS window, an inter-transfer gap between them); mcp320x_adc_conversion()
# takes the code from transfer[1]'s bytes as rx_buf[0] << 2 | rx_buf[1] >> 6 (10 bit) or
# rx_buf[0] << 4 | rx_buf[1] >> 4 (12 bit). A differential channel's address is its first input
# (MCP320X_VOLTAGE_CHANNEL_DIFF(1, 0) has address 1: CH0-/CH1+).

def linux_message(part: str, channel: int, differential: bool, code: int, hiz: int = 1):
    """(tx, rx, segment starts) of one mcp320x read: the bytes the driver sends and the chip answers."""
    inputs, bits = PARTS[part.upper()]
    if not 0 <= channel < 8:
        raise UsageError("mcp320x channel addresses are 0..7")
    tx = [(1 << 6) | ((0 if differential else 1) << 5) | (channel << 2)] + [0] * ((bits + 7) // 8)
    rx = _words(device_reply(_bits(tx), code, bits, hiz))
    return tx, rx, [False, True] + [False] * (len(tx) - 2)


def linux_code(part: str, rx: list[int]) -> int:
    """The code the driver takes from a read's MISO bytes (transfer[1] is rx[1:])."""
    _, bits = PARTS[part.upper()]
    if bits == 10:
        return rx[1] << 2 | rx[2] >> 6
    return rx[1] << 4 | rx[2] >> 4


def signal_codes(rng, n: int, bits: int, channels: list, kind: str = "sine") -> list[int]:
    """Codes of ``n`` conversions of slowly changing inputs (a sine per channel plus a little
    noise), or uniformly random ones."""
    top = (1 << bits) - 1
    if kind == "random":
        return [int(c) for c in rng.integers(0, top, n, endpoint=True)]
    k = np.arange(n)
    ch = np.array([channels[i % len(channels)] for i in range(n)], float)
    v = 0.5 + 0.35 * np.sin(2 * np.pi * (k / 400.0 + ch / 8.0)) + rng.normal(0.0, 0.002, n)
    return [int(c) for c in np.clip(np.rint(v * top), 0, top)]


def fill_linux(sc, w, opts: dict) -> list:
    """MCP3x0x conversions in 3-byte windows: 0x60|ch<<2 (the mcp320x command byte, also the
    seed-000 spidev user's), MISO what the chip answers (null bit, result, LSB-first repeat)."""
    from spigap.synth.traffic import put_words, window_words

    opts = dict(opts)
    part = str(opts.pop("part", "MCP3008")).upper()
    if part not in PARTS:
        raise UsageError(f"unknown part {part!r}; known: {', '.join(PARTS)}")
    inputs, nbits = PARTS[part]
    vref = float(opts.pop("vref", 3.3))
    channels = option_list(opts.pop("channels", None)) or [0]
    diff = option_bool(opts.pop("differential", False))
    kind = str(opts.pop("signal", "sine"))
    hiz = int(opts.pop("hiz", 1))
    seed = int(opts.pop("seed", sc.seed))
    if opts:
        raise UsageError(f"unknown mcp3008-linux options: {', '.join(sorted(opts))}")
    if sc.wordsize != 8 or sc.lsb_first:
        raise UsageError("mcp3008-linux needs wordsize 8, MSB first")
    counts = window_words(w)
    if set(counts) != {3}:
        raise UsageError("mcp3008-linux fills 3-byte windows (words_per_transfer = 3)")
    rng = np.random.default_rng([seed, 3008])
    codes = signal_codes(rng, len(counts), nbits, channels, kind)
    mosi, miso, truth = [], [], []
    for i, code in enumerate(codes):
        ch = channels[i % len(channels)]
        tx, rx, _ = linux_message(part, ch, diff, code, hiz)
        mosi.append(tx)
        miso.append(rx)
        truth.append({"window": i, "part": part, "ch": ch, "sgl": not diff, "code": code,
                      "volts": code * vref / (1 << nbits)})
    put_words(w, mosi, miso)
    return truth


# ------------------------------------------------- every part of mcp320x.c
# The parts of drivers/iio/adc/mcp320x.c and how the driver clocks them, as facts (nothing copied):
# mcp320x_chip_infos give the inputs and the resolution; the multi-input parts get the 1-byte
# command of mcp320x_channel_to_tx_data() (MCP3002/3202: start << 4 | !diff << 3 | ch << 2, so
# MSBF = 0; MCP3004..3208: start << 6 | !diff << 5 | ch << 2) and a DIV_ROUND_UP(resolution, 8)-byte
# read in the same CS window; the single-input parts only the read (no tx_buf); the MCP355x a CS
# pulse without clocks first (start_conv_msg, 8 us), then, after the conversion time, a 3-byte read
# in SPI mode 3 or a 4-byte one in mode 0. The device side is the datasheets' figures: DOUT hi-Z
# until the null bit (the clock after D0's sampling clock; after MSBF on MCP3002/3202; the third
# clock of the window on MCP3001/3201/3301), the result MSB first, then B1.. LSB first
# (MCP3002/3202: or zeros, the datasheets disagree); MCP355x: SDO/RDY (mode 0), OVL, OVH, 22 bits.
# part -> (inputs, data bits the device shifts out, frame: d210 / odd / rx / rx-signed / ds)
IIO_PARTS = {
    "MCP3001": (1, 10, "rx"), "MCP3002": (2, 10, "odd"), "MCP3004": (4, 10, "d210"),
    "MCP3008": (8, 10, "d210"), "MCP3201": (1, 12, "rx"), "MCP3202": (2, 12, "odd"),
    "MCP3204": (4, 12, "d210"), "MCP3208": (8, 12, "d210"), "MCP3301": (1, 13, "rx-signed"),
    "MCP3550-50": (1, 22, "ds"), "MCP3550-60": (1, 22, "ds"), "MCP3551": (1, 22, "ds"),
    "MCP3553": (1, 22, "ds"),
}


def _msb(value: int, bits: int) -> list[int]:
    return [(value >> (bits - 1 - i)) & 1 for i in range(bits)]


def iio_command(part: str, ch: int, differential: bool) -> list[int]:
    """transfer[0] of the driver's message: the command byte, or nothing (single-input parts)."""
    frame = IIO_PARTS[part][2]
    if frame == "odd":
        return [(1 << 4) | ((0 if differential else 1) << 3) | (ch << 2)]
    if frame == "d210":
        return [(1 << 6) | ((0 if differential else 1) << 5) | (ch << 2)]
    return []


def iio_reply(part: str, tx: list[int], nbytes: int, code: int, *, hiz: int = 1, null_bit: int = 0,
              flip_repeat: int | None = None, after_b0: str = "repeat", ready: int = 0,
              cpol: int = 0) -> list[int]:
    """DOUT on every clock of one read window (command bytes ``tx`` then ``nbytes`` read bytes),
    as bytes. ``code``: the result (signed for MCP3301 and MCP355x; MCP355x beyond ±2^21 sets
    OVH/OVL). ``after_b0``: 'repeat' or 'zeros' (MCP3002/3202)."""
    _, bits, frame = IIO_PARTS[part]
    n = 8 * (len(tx) + nbytes)
    if frame == "ds":
        ovh, ovl = int(code >= 1 << 21), int(code < -(1 << 21))
        out = ([ready] if cpol == 0 else []) + [ovl, ovh] + _msb(code & ((1 << 22) - 1), 22)
        return _words((out + [hiz] * n)[:n])
    raw = code & ((1 << bits) - 1)
    data = _msb(raw, bits)
    rep = [(raw >> j) & 1 for j in range(1, bits)]          # B1 .. B(n-1)
    if flip_repeat is not None:
        rep[flip_repeat - 1] ^= 1
    if frame in ("rx", "rx-signed"):
        out = [hiz, hiz, null_bit] + data + (rep if frame == "rx" else [])
    else:
        mo = _bits(tx + [0] * nbytes)
        s = mo.index(1)
        header = 4 if frame == "odd" else 6                   # clocks from the start bit to the null bit
        tail = [0] * len(rep) if after_b0 == "zeros" else rep
        out = [hiz] * (s + header) + [null_bit] + data + tail
    return _words((out + [0] * n)[:n])


def iio(sc, opts: dict):
    """Conversions of any mcp320x part, clocked as the Linux driver does (known codes)."""
    opts = dict(opts)
    part = str(opts.pop("part", "MCP3008")).upper()
    if part not in IIO_PARTS:
        raise UsageError(f"unknown part {part!r}; known: {', '.join(IIO_PARTS)}")
    inputs, bits, frame = IIO_PARTS[part]
    n = int(opts.pop("conversions", 16))
    codes = option_list(opts.pop("codes", None), int)
    channels = option_list(opts.pop("channels", None)) or list(range(inputs))
    diff = option_bool(opts.pop("differential", False))
    hiz = int(opts.pop("hiz", 0))
    after_b0 = str(opts.pop("after_b0", "repeat"))
    errors = {k: set(option_list(opts.pop(k, None)))
              for k in ("null_one", "repeat_flip", "not_ready", "hiz_one", "all_ones")}
    if opts:
        raise UsageError(f"unknown mcp320x-iio options: {', '.join(sorted(opts))}")
    if sc.wordsize != 8 or sc.lsb_first or (sc.cpol, sc.cpha) not in ((0, 0), (1, 1)):
        raise UsageError("mcp320x-iio needs 8-bit words, MSB first, SPI mode 0 or 3")
    if not codes:
        raise UsageError("mcp320x-iio needs codes")
    mosi: list[list[int]] = []
    miso: list[list[int]] = []
    seg: list[list[bool]] = []
    msg: list[bool] = []
    truth: list[dict] = []
    for i in range(n):
        code, ch = codes[i % len(codes)], channels[i % len(channels)]
        tx = iio_command(part, ch, diff)
        resolution = 21 if frame == "ds" else bits          # the chip info's (the MCP355x's: 21)
        nbytes = (resolution + 7) // 8 + (1 if frame == "ds" and sc.cpol == 0 else 0)
        if frame == "ds":                                    # start_conv_msg: CS pulse, no clocks
            mosi.append([])
            miso.append([])
            seg.append([])
            msg.append(True)
            truth.append({"conversion": i, "window": len(mosi) - 1, "part": part, "kind": "convstart"})
        rx = iio_reply(part, tx, nbytes, code, hiz=1 if i in errors["hiz_one"] else hiz,
                       null_bit=1 if i in errors["null_one"] else 0,
                       flip_repeat=1 if i in errors["repeat_flip"] else None, after_b0=after_b0,
                       ready=1 if i in errors["not_ready"] else 0, cpol=sc.cpol)
        if i in errors["all_ones"]:                          # the driver's "did not wake from shutdown"
            rx = [0xFF] * len(rx)
        mosi.append(tx + [0] * nbytes)
        miso.append(rx)
        seg.append([False] * len(tx) + [bool(tx)] + [False] * (nbytes - 1))
        msg.append(True)
        truth.append({"conversion": i, "window": len(mosi) - 1, "part": part, "kind": "read", "ch": ch,
                      "sgl": not diff, "code": code, "mosi": mosi[-1], "miso": rx,
                      **{k: i in v for k, v in errors.items()}})
    w = sc.windows_from_payload(mosi, miso, message_start=msg, segment_start=seg)
    tl = sc.build_timeline(w)
    tl.device_truth = truth
    return tl


SCENARIOS = {"mcp3008-adc": adc, "mcp320x-iio": iio}
PAYLOADS = {"mcp3008-linux": fill_linux}
