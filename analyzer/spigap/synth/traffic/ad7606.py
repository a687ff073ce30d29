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
from spigap.synth.timeline import build
from spigap.units import parse_time

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
    tl = build(w, sc.shape, sc.tail)
    wb = dataclasses.replace(w, miso=np.array([v for x in win_b for v in x], np.uint64))
    doutb_bits = build(wb, sc.shape, sc.tail).miso_bits

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
        extra["DOUTB"] = (tl.data_t, doutb_bits, 0)
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
