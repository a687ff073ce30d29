"""Timing scenarios: a TOML description (and/or flags) -> windows -> .sr + truth.

Example (all times accept units: 1.6us, 250ns, 10e-6; rates: 3.6MHz)::

    [capture]
    samplerate = "50MHz"
    seed = 1
    lead = "20us"                 # idle before the first CS assert
    tail = "20us"

    [spi]
    sclk = "3.6MHz"
    mode = 0                      # or cpol/cpha
    wordsize = 8
    bitorder = "msb"
    cs_polarity = "low"
    channels = { clk = "SCLK", mosi = "MOSI", miso = "MISO", cs = "CS" }

    [pattern]
    words_per_transfer = 3        # words in one CS window
    window_words = [9, 25, 9, 13] # optional: words of each window, cycled (MCP2518FD 72/200/72/104 bit)
    segments = [1, 2]             # optional: kernel transfers inside one window (mcp320x)
    transfers_per_message = 10    # CS windows per spi_message / ioctl
    messages = 200
    messages_per_burst = 4        # optional: messages come in bursts (one IRQ-thread run) ...
    mosi = [0x60, 0, 0]           # list (repeated), "counter", "random" or "zero"
    miso = "random"

    [timing]
    cs_setup = "1.6us"
    cs_hold = "0.4us"
    idle_clocks = 1               # idle SCLK periods between words (bcm2835: 1)
    inter_transfer = "5us"        # gap between segments inside one window
    cs_change = "10us"
    context_switch = "5us"
    burst_gap = "1ms"             # ... separated by this idle time (a context switch too)

    [device]                      # optional: device traffic instead of [pattern] payloads
    name = "mcp3008-adc"          # see analyzer/spigap/synth/devices (spigap synth --list-devices)
    channel = 3                   # ... plus that generator's own options

    [kernel]                      # optional: the driver model of 'spigap synth --ftrace'
    gpio_cs_latency = "1.5us"     # spi_set_cs activate -> CS assert (analyzer/spigap/synth/kernel.py,
    jitter = 0.1                  # KernelLatencies: every latency; jitter = sigma as a share of each)

    [jitter]
    sigma = "20ns"                # normal spread on every gap, or a table per gap kind
    stall_probability = 0.001     # chance that a gap gets an extra stall ...
    stall = ["20us", "200us"]     # ... drawn uniformly from this range
    stall_kinds = ["cs_change", "context_switch"]
"""

from __future__ import annotations

import dataclasses
import json
import os

import numpy as np

from spigap import __version__
from spigap.core.config import MAX_WORDSIZE
from spigap.errors import UsageError
from spigap.limits import rate_problem
from spigap.synth.srwriter import CHUNK_BYTES, Track, write_sr
from spigap.synth.timeline import SpiShape, Timeline, Windows, build, jittered
from spigap.units import parse_freq, parse_time

# What one synthesized capture may hold: every window and every clocked bit's edges are
# planned in memory and every sample is written, so a recipe asking for more (a
# typo'd "messages = 10**12", "cs_change = 1e9s") is refused in one line instead of
# running out of memory or writing for days. The largest capture spigap's own
# benchmarks synthesize is 1 G samples and 2.5 M windows.
MAX_WINDOWS = 10_000_000
MAX_BITS = 400_000_000              # clocked bits (two SCLK edges each)
MAX_SIGMA_S = 1.0                  # a gap's jitter (sigma): a second is not jitter any more
MAX_SAMPLES = 8_000_000_000


def check_size(what: str, n_samples: int) -> None:
    """Refuse a capture of more than MAX_SAMPLES samples (``what`` names the scenario kind)."""
    if n_samples > MAX_SAMPLES:
        raise UsageError(f"{what}: the capture would hold {n_samples:.3g} samples, more than spigap synth "
                         f"writes ({MAX_SAMPLES:.3g}); shorten the timings or the duration, or lower samplerate")


GAP_KINDS = ("cs_setup", "cs_hold", "inter_byte", "inter_transfer", "cs_change", "context_switch")



def set_bus_setting(obj, key: str, value) -> bool:
    """The SPI bus keys a scenario and a shared-bus scenario share (mode, bitorder,
    cs_polarity, channels), set on ``obj``; False for any other key."""
    if key == "mode":
        m = int(value)
        if m not in range(4):
            raise ValueError("mode must be 0..3")
        obj.cpol, obj.cpha = m >> 1, m & 1
    elif key == "bitorder":
        if value not in ("msb", "lsb"):
            raise ValueError("bitorder is msb or lsb")
        obj.lsb_first = value == "lsb"
    elif key == "cs_polarity":
        if value not in ("low", "high"):
            raise ValueError("cs_polarity is low or high")
        obj.cs_active_low = value == "low"
    elif key == "channels":
        obj.channels = {**obj.channels, **dict(value)}
    else:
        return False
    return True


@dataclasses.dataclass
class Scenario:
    samplerate: float = 50e6
    seed: int = 1
    lead: float = 20e-6
    tail: float = 20e-6
    crop_start: float | None = None
    crop_end: float | None = None
    chunk_bytes: int = CHUNK_BYTES
    sclk: float = 3.6e6
    cpol: int = 0
    cpha: int = 0
    wordsize: int = 8
    lsb_first: bool = False
    cs_active_low: bool = True
    channels: dict = dataclasses.field(default_factory=lambda: {
        "clk": "SCLK", "mosi": "MOSI", "miso": "MISO", "cs": "CS"})
    words_per_transfer: int = 3
    segments: list | None = None
    window_words: list | None = None
    transfers_per_message: int = 1
    messages: int = 100
    messages_per_burst: int = 0
    burst_gap: float = 1e-3
    mosi: object = "counter"
    miso: object = "random"
    cs_setup: float = 1.6e-6
    cs_hold: float = 0.4e-6
    idle_clocks: float = 1.0
    inter_transfer: float = 5e-6
    cs_change: float = 10e-6
    context_switch: float = 5e-6
    sigma: dict = dataclasses.field(default_factory=dict)
    stall_probability: float = 0.0
    stall: tuple = (20e-6, 200e-6)
    stall_kinds: tuple = ("cs_change", "context_switch")
    source: str = ""
    device: dict | None = None
    kernel: dict | None = None        # [kernel]: the trace's driver model (synth --ftrace; kernel.model_options)

    @property
    def shape(self) -> SpiShape:
        return SpiShape(self.sclk, self.cpol, self.cpha, self.wordsize, self.lsb_first, self.cs_active_low)

    # ------------------------------------------------------------ loading
    @classmethod
    def from_toml(cls, path=None, overrides: dict | None = None) -> "Scenario":
        data: dict = {}
        text = ""
        if path is not None:
            from spigap.infile import read_text, read_toml

            text = read_text(path, what="scenario")
            data = read_toml(path, what="scenario", text=text)
        flat = {}
        device = data.pop("device", None)
        kernel_table = data.pop("kernel", None)
        for section, values in data.items():
            if not isinstance(values, dict):
                flat[section] = values
                continue
            for key, value in values.items():
                flat[key] = value
        flat.update(overrides or {})
        if "device" in flat:
            device = flat.pop("device")
        sc = cls()
        sc.source = text
        sc.device = dict(device) if device else None
        if kernel_table is not None:
            from spigap.synth.kernel import model_options

            if not isinstance(kernel_table, dict):
                raise UsageError("[kernel] must be a table of latencies", path=str(path) if path else None)
            model_options(kernel_table)          # refuse unknown keys when the recipe is read
            sc.kernel = dict(kernel_table)
        for key, value in flat.items():
            sc._set(key, value)
        sc._check()
        return sc

    def _set(self, key: str, value) -> None:
        times = {"lead", "tail", "crop_start", "crop_end", "cs_setup", "cs_hold", "inter_transfer",
                 "cs_change", "context_switch", "burst_gap"}
        try:
            if key in times:
                setattr(self, key, parse_time(value))
            elif key in ("samplerate", "sclk"):
                setattr(self, key, parse_freq(value))
            elif set_bus_setting(self, key, value):       # mode, bitorder, cs_polarity, channels
                pass
            elif key in ("cpol", "cpha", "wordsize", "words_per_transfer", "transfers_per_message",
                         "messages", "seed", "chunk_bytes", "messages_per_burst"):
                setattr(self, key, int(value))
            elif key == "idle_clocks" or key == "stall_probability":
                setattr(self, key, float(value))
            elif key == "segments":
                self.segments = [int(v) for v in value] if value else None
            elif key == "window_words":
                self.window_words = [int(v) for v in value] if value else None
            elif key in ("mosi", "miso"):
                setattr(self, key, _payload_spec(value))
            elif key == "sigma":
                if isinstance(value, dict):
                    self.sigma = {k: parse_time(v) for k, v in value.items()}
                else:
                    self.sigma = {k: parse_time(value) for k in GAP_KINDS}
            elif key.startswith("sigma_"):
                self.sigma[key[6:]] = parse_time(value)
            elif key == "stall":
                lo, hi = value
                self.stall = (parse_time(lo), parse_time(hi))
            elif key == "stall_kinds":
                self.stall_kinds = tuple(value)
            else:
                raise KeyError(key)
        except KeyError:
            raise UsageError(f"unknown scenario key {key!r}") from None
        except (ValueError, TypeError, OverflowError) as e:
            raise UsageError(f"bad value for {key!r}: {e}") from None

    def _check(self) -> None:
        def need(ok, what):
            if not ok:
                raise UsageError(f"scenario: {what}")
        for key in ("samplerate", "sclk"):
            problem = rate_problem(getattr(self, key))
            need(problem is None, f"{key}: {problem}")
        need(1 <= self.wordsize <= MAX_WORDSIZE, f"wordsize {self.wordsize} must be 1..{MAX_WORDSIZE}")
        need(self.cpol in (0, 1) and self.cpha in (0, 1), "cpol and cpha are 0 or 1")
        for key in ("words_per_transfer", "transfers_per_message", "messages", "chunk_bytes"):
            need(getattr(self, key) >= 1, f"{key} must be >= 1, not {getattr(self, key)}")
        need(self.messages_per_burst >= 0 and self.seed >= 0, "messages_per_burst and seed must be >= 0")
        n_win = self.messages * self.transfers_per_message
        per_win = (sum(self.window_words) / len(self.window_words)) if self.window_words else self.words_per_transfer
        need(n_win <= MAX_WINDOWS, f"messages x transfers_per_message = {n_win:.3g} windows, more than spigap "
             f"synth plans ({MAX_WINDOWS:,}); lower messages")
        need(n_win * per_win * self.wordsize <= MAX_BITS, f"{n_win * per_win * self.wordsize:.3g} clocked bits, "
             f"more than spigap synth plans ({MAX_BITS:,}); lower messages or words_per_transfer")
        for key in ("lead", "tail", "cs_setup", "cs_hold", "inter_transfer", "cs_change", "context_switch",
                    "burst_gap", "idle_clocks"):
            v = getattr(self, key)
            need(v >= 0 and np.isfinite(v), f"{key} must be >= 0, not {v:g}")
        need(all(0 <= v <= MAX_SIGMA_S for v in self.sigma.values()),
             f"jitter (sigma) must be 0 .. {MAX_SIGMA_S:g} s")
        need(0 <= self.stall_probability <= 1, "stall_probability must be in [0, 1]")
        need(0 <= self.stall[0] <= self.stall[1], "stall is a range [low, high] of times >= 0")
        need(all(n >= 1 for n in self.segments or []) and all(n >= 1 for n in self.window_words or []),
             "segments and window_words must be >= 1 each")
        if self.samplerate < 2 * self.sclk:
            raise UsageError(f"samplerate {self.samplerate:g} Hz cannot show SCLK {self.sclk:g} Hz "
                             "(needs at least 2 samples per period)")
        if self.segments and self.window_words:
            raise UsageError("segments and window_words cannot be combined")
        if self.segments and sum(self.segments) != self.words_per_transfer:
            raise UsageError(f"segments {self.segments} do not add up to words_per_transfer "
                             f"{self.words_per_transfer}")
        for k in self.sigma:
            if k not in GAP_KINDS:
                raise UsageError(f"unknown jitter kind {k!r}; known: {', '.join(GAP_KINDS)}")

    # ----------------------------------------------------------- building
    def windows(self) -> Windows:
        rng = np.random.default_rng(self.seed)
        T = 1.0 / self.sclk
        n = self.messages * self.transfers_per_message
        floor = 2.0 / self.samplerate
        k = np.arange(n) % self.transfers_per_message
        kind = np.where(k == 0, "context_switch", "cs_change").astype(object)
        kind[0] = "lead"

        def gaps(name, nominal, count, lo=floor):
            stall_p = self.stall_probability if name in self.stall_kinds else 0.0
            return jittered(rng, nominal, count, self.sigma.get(name, 0.0), stall_p, self.stall, lo)

        gap_before = np.where(kind == "cs_change", gaps("cs_change", self.cs_change, n),
                              gaps("context_switch", self.context_switch, n))
        if self.messages_per_burst > 0:
            msg = np.arange(n) // self.transfers_per_message
            burst_start = (k == 0) & (msg % self.messages_per_burst == 0)
            gap_before = np.where(burst_start, gaps("context_switch", self.burst_gap, n), gap_before)
        gap_before[0] = self.lead
        if self.window_words:
            per = np.resize(np.array(self.window_words, np.int64), n)
        else:
            per = np.full(n, self.words_per_transfer, np.int64)
        nw = int(per.sum())
        word_window = np.repeat(np.arange(n), per)
        rank = np.arange(nw) - np.repeat(np.cumsum(per) - per, per)
        boundary = np.zeros(nw, bool)
        if self.segments:
            starts = np.zeros(self.words_per_transfer, bool)
            starts[np.cumsum(self.segments)[:-1]] = True
            boundary = starts[rank]
        nominal_ib = T / 2 + self.idle_clocks * T
        word_gap = np.where(boundary, gaps("inter_transfer", self.inter_transfer, nw),
                            gaps("inter_byte", nominal_ib, nw, T / 2))
        word_gap[rank == 0] = 0.0
        wpt = self.words_per_transfer
        return Windows(gap_before=gap_before, cs_setup=gaps("cs_setup", self.cs_setup, n),
                       cs_hold=gaps("cs_hold", self.cs_hold, n), kind=kind,
                       message=np.cumsum(kind == "context_switch"),
                       word_window=word_window, mosi=_payload(self.mosi, nw, wpt, self.wordsize, rng),
                       miso=_payload(self.miso, nw, wpt, self.wordsize, rng),
                       word_gap=word_gap, word_boundary=boundary)

    def windows_from_payload(self, mosi: list, miso: list | None = None, *,
                             message_start: list | None = None,
                             segment_start: list | None = None) -> Windows:
        """Windows carrying explicit payloads, with this scenario's timing and jitter.

        ``mosi``/``miso``: one list of words per CS window (``miso`` None = zeros).
        ``message_start[i]``: window i starts a new spi_message (its gap_before
        is a context switch, else cs_change); default: every
        ``transfers_per_message``-th window. ``segment_start[i]``: per word of
        window i, True where an inter-transfer gap (not a byte gap) precedes it.
        """
        rng = np.random.default_rng(self.seed)
        n = len(mosi)
        T = 1.0 / self.sclk
        floor = 2.0 / self.samplerate
        if message_start is None:
            message_start = (np.arange(n) % self.transfers_per_message) == 0
        ms = np.asarray(message_start, bool)
        kind = np.where(ms, "context_switch", "cs_change").astype(object)
        if n:
            kind[0] = "lead"

        def gaps(name, nominal, count, lo=floor):
            stall_p = self.stall_probability if name in self.stall_kinds else 0.0
            return jittered(rng, nominal, count, self.sigma.get(name, 0.0), stall_p, self.stall, lo)

        gap_before = np.where(kind == "cs_change", gaps("cs_change", self.cs_change, n),
                              gaps("context_switch", self.context_switch, n))
        if self.messages_per_burst > 0:
            msg = np.cumsum(ms) - 1
            burst_start = ms & (msg % self.messages_per_burst == 0)
            gap_before = np.where(burst_start, gaps("context_switch", self.burst_gap, n), gap_before)
        if n:
            gap_before[0] = self.lead
        per = np.array([len(w) for w in mosi], np.int64)
        nw = int(per.sum())
        word_window = np.repeat(np.arange(n), per)
        rank = np.arange(nw) - np.repeat(np.cumsum(per) - per, per)
        boundary = (np.concatenate([np.asarray(b, bool) for b in segment_start]) if segment_start
                    else np.zeros(nw, bool))
        word_gap = np.where(boundary, gaps("inter_transfer", self.inter_transfer, nw),
                            gaps("inter_byte", T / 2 + self.idle_clocks * T, nw, T / 2))
        word_gap[rank == 0] = 0.0
        flat = lambda ws: np.array([v for w in ws for v in w], dtype=np.uint64)  # noqa: E731
        return Windows(gap_before=gap_before, cs_setup=gaps("cs_setup", self.cs_setup, n),
                       cs_hold=gaps("cs_hold", self.cs_hold, n), kind=kind,
                       message=np.cumsum(kind == "context_switch"), word_window=word_window,
                       mosi=flat(mosi), miso=flat(miso) if miso is not None else np.zeros(nw, np.uint64),
                       word_gap=word_gap, word_boundary=boundary)

    def timeline(self) -> Timeline:
        if self.device:
            from spigap.synth.traffic import registry

            opts = dict(self.device)
            name = opts.pop("name", None)
            gens = registry()
            if name not in gens:
                raise UsageError(f"unknown device generator {name!r}; known: {', '.join(sorted(gens)) or 'none'}")
            return gens[name](self, opts)
        return build(self.windows(), self.shape, self.tail)

    def recipe(self) -> str:
        head = (f"# Synthesized by spigap synth {__version__}: NOT a real capture.\n"
                "# Regenerate with: spigap synth --config <this file> -o <capture>.sr\n")
        return head + (self.source or "")


def _payload_spec(value):
    if isinstance(value, str):
        if value in ("counter", "random", "zero"):
            return value
        return [int(v, 0) for v in value.replace(",", " ").split()]
    return [int(v, 0) if isinstance(v, str) else int(v) for v in value]


def _payload(spec, n_words: int, wpt: int, ws: int, rng) -> np.ndarray:
    """Word values: uint64 up to 64 bits, Python ints (object array) above."""
    mask = (1 << ws) - 1
    if ws > 64:
        if spec == "counter":
            big = [i & mask for i in range(n_words)]
        elif spec == "random":      # 32-bit pieces from the scenario's generator
            parts = rng.integers(0, 1 << 32, (n_words, (ws + 31) // 32), dtype=np.uint64).tolist()
            big = [sum(int(p) << (32 * j) for j, p in enumerate(row)) & mask for row in parts]
        elif spec == "zero":
            big = [0] * n_words
        else:
            base = [int(v) & mask for v in spec]
            big = [base[i % len(base)] for i in range(n_words)]
        out = np.empty(n_words, object)
        out[:] = big
        return out
    if spec == "counter":
        return (np.arange(n_words, dtype=np.uint64) & np.uint64(mask))
    if spec == "random":
        hi = np.uint64(mask)
        return rng.integers(0, int(hi), n_words, dtype=np.uint64, endpoint=True)
    if spec == "zero":
        return np.zeros(n_words, np.uint64)
    vals = np.array([int(v) & mask for v in spec], dtype=np.uint64)
    return np.resize(vals, n_words)


def tracks(tl: Timeline, channels: dict, samplerate: float, offset: int = 0) -> list[Track]:
    """Quantize a timeline to sample numbers (round to nearest), one Track per channel."""
    q = lambda t: np.rint(np.asarray(t) * samplerate).astype(np.int64) - offset  # noqa: E731
    shape = tl.shape
    out = []
    if channels.get("clk"):
        out.append(Track(channels["clk"], q(tl.clk_t), tl.clk_level, shape.cpol))
    if channels.get("mosi"):
        out.append(Track(channels["mosi"], q(tl.data_t), tl.mosi_bits, 0))
    if channels.get("miso"):
        out.append(Track(channels["miso"], q(tl.data_t), tl.miso_bits, 0))
    if channels.get("cs"):
        act = 0 if shape.cs_active_low else 1
        t = np.empty(2 * len(tl.cs_assert))
        t[0::2], t[1::2] = tl.cs_assert, tl.cs_deassert
        lv = np.tile(np.array([act, 1 - act], np.uint8), len(tl.cs_assert))
        out.append(Track(channels["cs"], q(t), lv, 1 - act))
    for name, (times, levels, idle) in tl.extra.items():
        out.append(Track(name, q(times), np.asarray(levels, np.uint8), idle))
    return out


def write(sc: Scenario, path, *, truth_path=None, tl: Timeline | None = None, **writer_kw) -> Timeline:
    tl = tl or sc.timeline()
    offset = int(round((sc.crop_start or 0.0) * sc.samplerate))
    end = sc.crop_end if sc.crop_end is not None else tl.end_time
    n_samples = int(round(end * sc.samplerate)) - offset
    if n_samples <= 0:
        raise UsageError("the capture would be empty (check crop_start/crop_end)")
    check_size("scenario", n_samples)
    trs = tracks(tl, sc.channels, sc.samplerate, offset)
    writer_kw.setdefault("chunk_bytes", sc.chunk_bytes)
    write_sr(path, trs, sc.samplerate, n_samples, extra_members={"spigap-synth.toml": sc.recipe()},
             **writer_kw)
    if truth_path:
        from spigap.outfile import write_output

        write_output(os.fspath(truth_path), json.dumps(truth_json(tl, offset / sc.samplerate), indent=1))
    return tl


def truth_json(tl: Timeline, t0: float = 0.0) -> dict:
    tr = tl.truth()

    def clean(a):
        return [None if (isinstance(x, float) and np.isnan(x)) else x for x in np.asarray(a).tolist()]

    return {
        "note": "ground truth of a synthesized capture, seconds; docs/gaps.md defines the gaps",
        "time_offset_s": t0,
        "transfers": len(tl.cs_assert),
        "cs_assert_s": clean(tr["cs_assert"] - t0), "cs_deassert_s": clean(tr["cs_deassert"] - t0),
        "cs_setup_s": clean(tr["cs_setup"]), "cs_hold_s": clean(tr["cs_hold"]),
        "gap_before_s": clean(tr["gap_before"]), "gap_before_kind": [str(k) for k in tr["kind"]],
        "inter_byte_s": clean(tr["inter_byte"]), "inter_transfer_s": clean(tr["inter_transfer"]),
        "mosi": clean(tr["mosi"]), "miso": clean(tr["miso"]),
        "device": _jsonable(tl.device_truth),
    }


def _jsonable(x):
    """Device truth as plain JSON (numpy scalars and arrays become numbers and lists)."""
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    if isinstance(x, np.generic):
        return x.item()
    return x
