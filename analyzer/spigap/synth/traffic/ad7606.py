"""AD7606 / AD7606-6 / AD7606-4 serial read-out with CONVST, BUSY and FRSTDATA.

Each conversion: CONVST rises, BUSY rises ``t1`` later and stays high for
``tconv``; the host reads the results either after conversion (CS falls
``cs_delay`` after BUSY falls) or during the next conversion (CS falls
``cs_delay`` after BUSY rises, and the read returns the previous conversion's
results). Results are 16-bit two's complement, MSB first, on DOUTA alone
(V1..Vn), on DOUTA+DOUTB (first/second half in parallel) or on DOUTB alone
(second half first) — docs/linux-spi-timing.md §5.3. SCLK shape (mode, rate, byte
gaps, CS setup/hold) comes from the scenario; use ``mode = 2`` for the AD7606
default (SCLK idles high, data out on the rising edge).

``[device]`` options (TOML table or ``--device ad7606-adc:key=value,...``):

==================  ====================================================
name                ``ad7606-adc``
variant             AD7606 (default), AD7606-6, AD7606-4
range               10 (default) or 5 (volts, for the truth)
dout                DOUTA (default), DOUTA+DOUTB, DOUTB (DOUTB only;
                    DOUTA then stays low)
read                after (default) or during
conversions         number of conversions (8)
period              CONVST period (40us)
tconv               BUSY high time (4us)
t1                  CONVST rise -> BUSY rise (40ns)
cs_delay            BUSY fall (after) / BUSY rise (during) -> CS fall (500ns)
convst_high         CONVST high time (1us)
cs_per_word         true: CS pulsed per 16-SCLK word (gap = cs_change)
codes               "sine" (default), "random", or a list (cycled)
busy, convst,       false leaves that line out of the capture
frstdata
sclk_at_busy_fall   conversions whose BUSY falls on an SCLK sampling edge
                    in the middle of that conversion's read
short               conversions read with 2 words per line only
frstdata_low        conversions whose FRSTDATA stays low
==================  ====================================================

The truth is ``Timeline.device_truth``: one dict per read (frame).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from spigap.errors import UsageError
from spigap.synth.traffic import option_bool, option_list
from spigap.units import parse_time

# The chip's output timing in synthesized captures (the recipe's miso_delay / miso_enable override
# it): DB15 of the first result on DOUTA/DOUTB 10 ns after CS falls, every next bit 12 ns after the
# SCLK edge that shifts it, the old bit held until then. Our assumption, inside the datasheet's
# (Rev. C, as remembered: UNVERIFIED) t18 <= 15 ns, t19 <= 17 ns and t22 >= 7 ns at VDRIVE above
# 4.75 V, and so inside the 3.3 V and 2.7 V columns (analyzer/spigap/timing/devices/ad7606.toml).
LAUNCH = {"miso_delay": 12e-9, "miso_enable": 10e-9}

VARIANTS = {"AD7606": 8, "AD7606-6": 6, "AD7606-4": 4}
DOUTS = ("DOUTA", "DOUTA+DOUTB", "DOUTB")
DEFAULT_CHANNELS = {"clk": "SCLK", "mosi": "MOSI", "miso": "MISO", "cs": "CS"}


def line_orders(n: int, dout: str) -> list[list[int]]:
    """Channels (1-based) per DOUT line in read order (datasheet p. 28)."""
    a, b = list(range(1, n // 2 + 1)), list(range(n // 2 + 1, n + 1))
    return {"DOUTA": [a + b], "DOUTA+DOUTB": [a, b], "DOUTB": [b + a]}[dout]


def _time(opts, key, default):
    return parse_time(opts.pop(key, default))


def adc(sc, opts: dict):
    """AD7606 frames on one or two DOUT lines with CONVST/BUSY/FRSTDATA (known codes)."""
    opts = dict(opts)
    variant = str(opts.pop("variant", "AD7606")).upper()
    if variant not in VARIANTS:
        raise UsageError(f"unknown variant {variant!r}; known: {', '.join(VARIANTS)}")
    nch = VARIANTS[variant]
    rng_v = float(str(opts.pop("range", 10)).upper().rstrip("V"))
    if rng_v not in (5.0, 10.0):
        raise UsageError("range is 10 or 5 (volts)")
    dout = str(opts.pop("dout", "DOUTA")).upper()
    if dout not in DOUTS:
        raise UsageError(f"dout is one of {', '.join(DOUTS)}")
    read = str(opts.pop("read", "after"))
    if read not in ("after", "during"):
        raise UsageError("read is 'after' or 'during'")
    n = int(opts.pop("conversions", 8))
    period = _time(opts, "period", "40us")
    tconv = _time(opts, "tconv", "4us")
    t1 = _time(opts, "t1", "40ns")
    cs_delay = _time(opts, "cs_delay", "500ns")
    convst_high = _time(opts, "convst_high", "1us")
    cs_per_word = option_bool(opts.pop("cs_per_word", False))
    codes_opt = opts.pop("codes", "sine")
    with_busy = option_bool(opts.pop("busy", True))
    with_convst = option_bool(opts.pop("convst", True))
    with_frst = option_bool(opts.pop("frstdata", True))
    err_busy = set(option_list(opts.pop("sclk_at_busy_fall", None)))
    err_short = set(option_list(opts.pop("short", None)))
    err_frst = set(option_list(opts.pop("frstdata_low", None)))
    if opts:
        raise UsageError(f"unknown ad7606-adc options: {', '.join(sorted(opts))}")
    if sc.wordsize not in (8, 16) or sc.lsb_first:
        raise UsageError("ad7606-adc needs wordsize 8 or 16, MSB first")
    if not sc.cs_active_low:
        raise UsageError("the AD7606 CS is active low")
    if convst_high >= period:
        raise UsageError("convst_high must be shorter than the CONVST period")
    if sc.channels == DEFAULT_CHANNELS:
        sc.channels = {"clk": "SCLK", "mosi": "", "miso": "DOUTA", "cs": "CS"}

    # ---- codes: one set per conversion (+ the one read before the first in 'during' mode)
    rng = np.random.default_rng(sc.seed)
    sets = n + (1 if read == "during" else 0)
    if codes_opt == "sine":
        amp = [0.8 * 32767 * (1 - 0.1 * c) for c in range(nch)]
        codes = [[int(round(amp[c] * math.sin(2 * math.pi * (k / 16.0 + c / nch)))) for c in range(nch)]
                 for k in range(sets)]
    elif codes_opt == "random":
        codes = rng.integers(-32768, 32767, (sets, nch), endpoint=True).tolist()
    else:
        flat = option_list(codes_opt)
        if not flat or any(not -32768 <= c <= 32767 for c in flat):
            raise UsageError("codes are -32768..32767")
        codes = [[flat[(k * nch + c) % len(flat)] for c in range(nch)] for k in range(sets)]

    orders = line_orders(nch, dout)
    lines = len(orders)
    ws = sc.wordsize

    def split(v):
        v &= 0xFFFF
        return [v] if ws == 16 else [v >> 8, v & 0xFF]

    # ---- frames -> CS windows (payload per line)
    conv_rise = sc.lead + period * np.arange(n)
    busy_rise = conv_rise + t1
    busy_fall = busy_rise + tconv
    ref = busy_fall if read == "after" else busy_rise
    first_assert = ref + cs_delay
    win_a: list = []
    win_b: list = []
    frame_of: list = []
    first_win: list = []
    truth: list[dict] = []
    for k in range(n):
        vals = codes[k]             # 'during' mode: set k holds conversion k-1's results
        conv = k if read == "after" else k - 1
        words = len(orders[0]) if k not in err_short else 2
        line_words = [[vals[ch - 1] for ch in order[:words]] for order in orders]
        if dout == "DOUTB":
            a_words, b_words = [[0] * words], line_words
        else:
            a_words, b_words = line_words[:1], line_words[1:] or [[0] * words]
        chunks = [list(range(j, j + 1)) for j in range(words)] if cs_per_word else [list(range(words))]
        first_win.append(len(win_a))
        for chunk in chunks:
            win_a.append([b for j in chunk for b in split(a_words[0][j])])
            win_b.append([b for j in chunk for b in split(b_words[0][j])])
            frame_of.append(k)
        read_values = {}
        for order, lw in zip(orders, line_words):
            for ch, v in zip(order, lw):
                read_values[ch] = v
        expect = []
        if k in err_short:
            expect.append("sclk_count")
        if k in err_busy:
            expect.append("sclk_at_busy_fall")
        if k in err_frst and with_frst:
            expect.append("frstdata_low")
        truth.append({"frame": k, "conversion": conv, "variant": variant, "dout": dout, "read": read,
                      "values": read_values,
                      "volts": {ch: v * rng_v / 32768.0 for ch, v in read_values.items()},
                      "sclks": words * 16, "expected_sclks": 16 * nch // lines, "expect": expect})

    nwin = len(win_a)
    msg = [i in set(first_win) for i in range(nwin)]
    # DOUTA is the MISO line of the timeline; the host sends nothing (no DIN).
    w = sc.windows_from_payload([[0] * len(x) for x in win_a], win_a, message_start=msg)
    T = 1.0 / sc.sclk
    span = (2 * ws - 1) * T / 2
    per = np.bincount(w.word_window, minlength=nwin)
    starts = np.concatenate([[0], np.cumsum(per)[:-1]])
    duration = np.empty(nwin)
    for i in range(nwin):
        g = w.word_gap[starts[i] + 1:starts[i] + per[i]].sum()
        duration[i] = w.cs_setup[i] + per[i] * span + g + w.cs_hold[i]
    gap = w.gap_before.copy()
    t_end = 0.0
    for i in range(nwin):
        if msg[i]:
            target = first_assert[frame_of[i]]
            gap[i] = target - t_end
            if gap[i] <= 2.0 / sc.samplerate:
                raise UsageError(f"frame {frame_of[i]} does not fit: the previous read ends "
                                 f"{(t_end - target) * 1e6:.3f} us after this read should start "
                                 "(raise period or sclk, or lower cs_delay)")
        t_end += gap[i] + duration[i]
    w.gap_before = gap
    tl = sc.build_timeline(w)
    wb = dataclasses.replace(w, miso=np.array([v for x in win_b for v in x], np.uint64))
    doutb_bits = sc.build_timeline(wb).miso_bits

    # sampling-edge time of bit j (0-based) of a frame, from the timeline's words
    def sample_edge(frame, j):
        first_word = starts[first_win[frame]]
        word = first_word + j // ws
        k = j % ws
        return tl.word_first[word] + (2 * k + sc.cpha) * T / 2

    # ---- BUSY / CONVST / FRSTDATA
    bf = busy_fall.copy()
    for k in sorted(err_busy):
        if not 0 <= k < n:
            raise UsageError(f"sclk_at_busy_fall: no conversion {k}")
        total = truth[k]["sclks"] // lines
        edge = sample_edge(k, total // 2)
        bf[k] = edge
        if edge <= busy_rise[k]:
            raise UsageError(f"sclk_at_busy_fall: the read of conversion {k} starts before its BUSY rise")
    for k in range(n - 1):
        if bf[k] >= conv_rise[k + 1]:
            raise UsageError(f"conversion {k} is still busy at the next CONVST (raise period)")
    extra = {}
    if lines == 2 or dout == "DOUTB":
        extra["DOUTB"] = (tl.miso_t, doutb_bits, 0)     # DOUTB: DOUTA's timing
    if with_busy:
        t = np.empty(2 * n)
        t[0::2], t[1::2] = busy_rise, bf
        extra["BUSY"] = (t, np.tile(np.array([1, 0], np.uint8), n), 0)
    if with_convst:
        t = np.empty(2 * n)
        t[0::2], t[1::2] = conv_rise, conv_rise + convst_high
        extra["CONVST"] = (t, np.tile(np.array([1, 0], np.uint8), n), 0)
    if with_frst:
        ts, lv = [], []
        for k in range(n):
            if k in err_frst:
                continue
            rise = tl.cs_assert[first_win[k]] + 15e-9
            fall = min(sample_edge(k, 15) + T / 4, tl.cs_deassert[first_win[k]] + 10e-9)
            ts += [rise, fall]
            lv += [1, 0]
        extra["FRSTDATA"] = (np.array(ts), np.array(lv, np.uint8), 0)
    tl.extra.update(extra)
    for k, row in enumerate(truth):
        row.update(convst_rise_s=float(conv_rise[k]), busy_rise_s=float(busy_rise[k]),
                 busy_fall_s=float(bf[k]), cs_assert_s=float(tl.cs_assert[first_win[k]]),
                 windows=[i for i in range(nwin) if frame_of[i] == k])
    tl.device_truth = truth
    return tl


SCENARIOS = {"ad7606-adc": adc}


# ----------------------------------------------------------- the Linux driver
# drivers/iio/adc/ad7606.c, ad7606_spi.c and ad7606.h, as facts (nothing copied):
# * the parts (ad7606_spi's spi_device_id names) with num_adc_channels and the channels' realbits;
#   the register command format is the bus ops' rd_wr_cmd (ad7606b_spi_rd_wr_cmd: bit 6 = read,
#   bits 5:0 = address; ad7616_spi_rd_wr_cmd: bit 7 = write, address << 1);
# * ad7606_read_samples() reads num_adc_channels results in ONE transfer: ad7606_spi_read_block
#   (spi_read of 2 bytes per channel, 8-bit words), ad7606_spi_read_block14to16 (bits_per_word 14)
#   or ad7606_spi_read_block18to32 (bits_per_word 18); the host sends nothing (zeros);
# * ad7606_spi_reg_read(): transfer 0 sends the 16-bit command (cmd << 8), transfer 1 receives 16
#   bits, cs_change 0: both in one CS window; ad7606_spi_reg_write(): one 16-bit frame,
#   (cmd << 8) | (val & 0x1FF);
# * ad7606b_sw_mode_config() writes AD7606_CONFIGURATION_REGISTER (0x02) = AD7606_SINGLE_DOUT (0);
#   ad7606_write_scale_sw() is a read-modify-write (ad7606_write_mask) of AD7606_RANGE_CH_ADDR(ch)
#   = 0x03 + ch / 2, 4 bits per channel; ad7606_write_os_sw() writes AD7606_OS_MODE (0x08) = the
#   ratio's index; ad7616_sw_mode_setup() sets BURST | SEQEN in AD7616_CONFIGURATION_REGISTER.
# What the chip answers is our model: its results MSB first, register data in the readback frame's
# low byte (AD7616: 9 bits), DOUT low while a command is clocked in.

LINUX_PARTS = {
    # name: (decoder variant, channels, bits, register command format)
    "ad7605-4": ("AD7605-4", 4, 16, None), "ad7606-4": ("AD7606-4", 4, 16, None),
    "ad7606-6": ("AD7606-6", 6, 16, None), "ad7606-8": ("AD7606", 8, 16, None),
    "ad7606b": ("AD7606B", 8, 16, "b"), "ad7606c-16": ("AD7606C-16", 8, 16, "b"),
    "ad7606c-18": ("AD7606C-18", 8, 18, "b"), "ad7607": ("AD7607", 8, 14, None),
    "ad7608": ("AD7608", 8, 18, None), "ad7609": ("AD7609", 8, 18, None),
    "ad7616": ("AD7616", 16, 16, "7616"),
}
CONFIG, OS_MODE, CONFIG_7616 = 0x02, 0x08, 0x02
SINGLE_DOUT, STATUS_HEADER = 0x00, 0x40
BURST, SEQEN = 0x40, 0x20


def _part(part: str):
    key = str(part).lower()
    if key not in LINUX_PARTS:
        raise UsageError(f"unknown ad7606 driver part {part!r}; known: {', '.join(LINUX_PARTS)}")
    return LINUX_PARTS[key]


def _bits_of(value: int, n: int) -> list[int]:
    return [(value >> (n - 1 - i)) & 1 for i in range(n)]


@dataclasses.dataclass
class Frame:
    """One CS window of the driver: DIN and DOUTA bits, where its transfers start, its meaning."""

    din: list
    dout: list
    what: str
    segments: list = dataclasses.field(default_factory=list)   # bit indices where a transfer begins
    truth: dict = dataclasses.field(default_factory=dict)


def rd_wr_cmd(part: str, addr: int, write: bool) -> int:
    fmt = _part(part)[3]
    if fmt == "b":
        return (addr & 0x3F) | ((0 if write else 1) << 6)
    if fmt == "7616":
        return ((addr & 0x7F) << 1) | ((1 if write else 0) << 7)
    raise UsageError(f"{part} has no registers in the Linux driver")


def read_block(part: str, codes: list[int], status: list[int] | None = None) -> Frame:
    """ad7606_read_samples(): all channels in one transfer; ``status``: the header bytes
    when CONFIG turned the status header on (the kernel never does)."""
    variant, n, bits, _ = _part(part)
    if len(codes) != n:
        raise UsageError(f"{part} reads {n} channels, not {len(codes)}")
    dout: list[int] = []
    for k, c in enumerate(codes):
        dout += _bits_of(c & ((1 << bits) - 1), bits)
        if status is not None:
            dout += _bits_of(status[k] & 0xFF, 8)
    return Frame([0] * len(dout), dout, "read", [0],
                 {"codes": list(codes), "variant": variant, "bits": bits, "status": status})


def reg_read(part: str, addr: int, value: int) -> Frame:
    """ad7606_spi_reg_read(): command frame then readback frame, one CS window."""
    cmd = rd_wr_cmd(part, addr, False) << 8
    readback = value & (0x1FF if _part(part)[3] == "7616" else 0xFF)
    return Frame(_bits_of(cmd, 16) + [0] * 16, [0] * 16 + _bits_of(readback, 16), "reg-read", [0, 16],
                 {"addr": addr, "value": readback, "write": False})


def reg_write(part: str, addr: int, value: int) -> Frame:
    """ad7606_spi_reg_write(): one 16-bit frame."""
    frame = (rd_wr_cmd(part, addr, True) << 8) | (value & 0x1FF)
    return Frame(_bits_of(frame, 16), [0] * 16, "reg-write", [0],
                 {"addr": addr, "value": value & 0x1FF, "write": True})


def write_mask(part: str, addr: int, mask: int, val: int, current: int) -> list[Frame]:
    """ad7606_write_mask(): read the register, write it back with the masked bits set."""
    return [reg_read(part, addr, current), reg_write(part, addr, (current & ~mask) | val)]


def linux_sequence(part: str, reads: list[list[int]], *, sw_mode: bool = True, scale=None, os_index=None,
                   status_header: bool = False, id_value=None) -> list[Frame]:
    """What the driver sends: at probe in software mode (``adi,sw-mode``) the part's setup
    (AD7606B/C: CONFIG = single DOUT; AD7616: BURST|SEQEN), then optionally a scale write on
    channel 0 (``scale`` = (register value before, range code)), an oversampling write, a
    debugfs register read of ``id_value`` (AD7606B/C ID register), then one read per list of codes."""
    variant, n, bits, fmt = _part(part)
    out: list[Frame] = []
    if sw_mode and fmt == "b":
        out.append(reg_write(part, CONFIG, STATUS_HEADER if status_header else SINGLE_DOUT))
        if scale is not None:
            before, code = scale
            out += write_mask(part, 0x03, 0x0F, code & 0x0F, before)
        if os_index is not None:
            out.append(reg_write(part, OS_MODE, os_index))
        if id_value is not None:
            out.append(reg_read(part, 0x2F, id_value))
    elif sw_mode and fmt == "7616":
        out += write_mask(part, CONFIG_7616, BURST | SEQEN, BURST | SEQEN, 0x00)
        if scale is not None:
            before, code = scale
            out += write_mask(part, 0x04, 0x03, code & 0x03, before)
    for codes in reads:
        status = [(k & 7) for k in range(n)] if status_header else None
        out.append(read_block(part, codes, status))
    return out


def linux(sc, opts: dict):
    """The Linux ad7606 driver's frames for one part: software-mode setup, register reads and
    writes, reads of all channels (bits_per_word 14/16/18), with the chip's answers."""
    opts = dict(opts)
    part = str(opts.pop("part", "ad7606-8")).lower()
    variant, n, bits, fmt = _part(part)
    conversions = int(opts.pop("conversions", 4))
    sw_mode = option_bool(opts.pop("sw_mode", fmt is not None))
    status_header = option_bool(opts.pop("status_header", False))
    scale = option_list(opts.pop("scale", None))
    os_index = opts.pop("os_index", None)
    id_value = opts.pop("id", None)
    codes_opt = opts.pop("codes", "sine")
    if opts:
        raise UsageError(f"unknown ad7606-linux options: {', '.join(sorted(opts))}")
    if status_header and fmt != "b":
        raise UsageError("the status header is an AD7606B/C feature")
    top = 1 << (bits - 1)
    if codes_opt == "sine":
        reads = [[int(round(0.8 * (top - 1) * (1 - 0.08 * c) * math.sin(2 * math.pi * (k / 16.0 + c / n))))
                  for c in range(n)] for k in range(conversions)]
    else:
        flat = option_list(codes_opt)
        if not flat or any(not -top <= c < top for c in flat):
            raise UsageError(f"codes are {-top}..{top - 1}")
        reads = [[flat[(k * n + c) % len(flat)] for c in range(n)] for k in range(conversions)]
    frames = linux_sequence(part, reads, sw_mode=sw_mode, status_header=status_header,
                            scale=tuple(scale) if scale else None,
                            os_index=None if os_index is None else int(os_index),
                            id_value=None if id_value is None else int(str(id_value), 0))
    ws = sc.wordsize
    mosi, miso, seg = [], [], []
    for f in frames:
        if len(f.dout) % ws:
            raise UsageError(f"ad7606-linux: a {len(f.dout)}-bit frame is not whole {ws}-bit words "
                             "(use wordsize 2 or 1)")
        words = len(f.dout) // ws
        pack = lambda b: [int("".join(map(str, b[j * ws:(j + 1) * ws])), 2) for j in range(words)]  # noqa: E731
        mosi.append(pack(f.din))
        miso.append(pack(f.dout))
        seg.append([j * ws in f.segments and j > 0 for j in range(words)])
    if sc.channels == DEFAULT_CHANNELS:
        sc.channels = {"clk": "SCLK", "mosi": "DIN", "miso": "DOUTA", "cs": "CS"}
    w = sc.windows_from_payload(mosi, miso, message_start=[True] * len(frames), segment_start=seg)
    tl = sc.build_timeline(w)
    tl.device_truth = [{"window": i, "what": f.what, "variant": variant, **f.truth} for i, f in enumerate(frames)]
    return tl


def fill_reads(sc, w, opts: dict) -> list:
    """Reads of the first channels in windows of any whole 16-bit words (the seed-003 user's
    xfer2([0, 0, 0, 0]): V1 and V2), results of slowly changing inputs; DIN stays zero."""
    from spigap.synth.traffic import put_words, window_words

    opts = dict(opts)
    variant = str(opts.pop("variant", "AD7606")).upper()
    if variant not in VARIANTS:
        raise UsageError(f"unknown variant {variant!r}; known: {', '.join(VARIANTS)}")
    nch = VARIANTS[variant]
    rng_v = float(str(opts.pop("range", 10)).upper().rstrip("V"))
    seed = int(opts.pop("seed", sc.seed))
    if opts:
        raise UsageError(f"unknown ad7606-reads options: {', '.join(sorted(opts))}")
    if sc.wordsize not in (8, 16) or sc.lsb_first:
        raise UsageError("ad7606-reads needs wordsize 8 or 16, MSB first")
    per = 16 // sc.wordsize
    counts = window_words(w)
    if any(c % per or c // per > nch for c in counts):
        raise UsageError(f"ad7606-reads fills windows of 1..{nch} whole 16-bit words")
    rng = np.random.default_rng([seed, 7606])
    mosi, miso, truth = [], [], []
    for i, c in enumerate(counts):
        chans = c // per
        vals = [int(np.clip(round(0.6 * 32767 * math.sin(2 * math.pi * (i / 250.0 + ch / nch))
                                  + rng.normal(0.0, 3.0)), -32768, 32767)) for ch in range(chans)]
        words = []
        for v in vals:
            v &= 0xFFFF
            words += [v] if per == 1 else [v >> 8, v & 0xFF]
        mosi.append([0] * c)
        miso.append(words)
        truth.append({"window": i, "variant": variant, "values": {ch + 1: v for ch, v in enumerate(vals)},
                      "volts": {ch + 1: v * rng_v / 32768.0 for ch, v in enumerate(vals)}})
    put_words(w, mosi, miso)
    return truth


SCENARIOS["ad7606-linux"] = linux
PAYLOADS = {"ad7606-reads": fill_reads}
