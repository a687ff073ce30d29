"""One device timed by the gaps it leaves on the bus: a recipe of the one-device form
(spigap.synth.recipe; the seed reports' figures) -> CS windows -> a Timeline, and
the capture's truth.

The bus-wide keys ([capture], [spi]) are every recipe's (recipe.Recipe); the rest
are this form's own. Example (all times accept units: 1.6us, 250ns, 10e-6; rates: 3.6MHz)::

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
    mosi_delay = "5ns"            # optional: the controller's MOSI after its launching SCLK edge
    miso_delay = "40ns"           # optional: the device's MISO after its launching edge (tDO)
    miso_enable = "40ns"          # optional: CS assert -> the device's first MISO bit (CPHA 0)
                                  # (default: the chip's LAUNCH in synth/traffic, else 5/10/10 ns;
                                  # a default never reaches the sampling edge: Recipe.launch)

    [device]                      # optional: device traffic instead of [pattern] payloads
    name = "mcp3008-adc"          # see analyzer/spigap/synth/devices (spigap synth --list-devices)
    channel = 3                   # ... plus that generator's own options

    [payload]                     # optional: what a chip sends and answers in these windows, timing
    name = "mcp3008-linux"        # unchanged (the words of [pattern] replaced; synth/traffic, --list-devices)

    [decoders]                    # optional, read by the tests only: our decoders' stacks over the
    stacks = ["spi:...,mcp3008"]  # capture and the warnings it shows on purpose (captures/README.md)
    faults = [{ warning = "Null bit is 1", count = 1 }]

    [pins]                        # optional, read by the tests only: `spigap check --device` over the
    device = "mcp3008"            # capture and the pin limits it fails on purpose (captures/README.md)
    faults = []

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

import numpy as np

from spigap.core.config import MAX_WORDSIZE
from spigap.errors import UsageError
from spigap.synth import kernel
from spigap.synth.capture import Capture, CsLine, TraceOptions, json_list
from spigap.synth.recipe import MAX_BITS, MAX_WINDOWS, Recipe
from spigap.synth.timeline import Timeline, Windows, build, jittered
from spigap.units import parse_time

MAX_SIGMA_S = 1.0                  # a gap's jitter (sigma): a second is not jitter any more

# the gaps a recipe may jitter ([jitter] sigma, by kind)
JITTER_KINDS = ("cs_setup", "cs_hold", "inter_byte", "inter_transfer", "cs_change", "context_switch")


@dataclasses.dataclass
class Scenario(Recipe):
    """One device's windows, timed by their gaps (module docstring); bus-wide keys: Recipe."""

    crop_start: float | None = None
    crop_end: float | None = None
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
    device: dict | None = None
    payload: dict | None = None       # [payload]: a chip's words in the [pattern] windows (synth/traffic)
    kernel: dict | None = None        # [kernel]: the trace's driver model (synth --ftrace; kernel.model_options)

    # ------------------------------------------------------------ loading
    @classmethod
    def from_tables(cls, data: dict, text: str, overrides: dict | None, path=None) -> "Scenario":
        data = dict(data)
        device = data.pop("device", None)
        payload = data.pop("payload", None)
        data.pop("decoders", None)          # for the tests (captures/README.md), not the synthesizer
        data.pop("pins", None)              # likewise
        kernel_table = data.pop("kernel", None)
        flat = cls.flat(data, overrides)
        if "device" in flat:
            device = flat.pop("device")
        sc = cls()
        sc.source = text
        sc.device = dict(device) if device else None
        if payload is not None and not isinstance(payload, dict):
            raise UsageError("[payload] must be a table (name = ..., options)", path=str(path) if path else None)
        sc.payload = dict(payload) if payload else None
        if sc.payload and sc.device:
            raise UsageError("[payload] fills the [pattern] windows; a [device] generator makes its own: "
                             "give one of them", path=str(path) if path else None)
        if kernel_table is not None:
            if not isinstance(kernel_table, dict):
                raise UsageError("[kernel] must be a table of latencies", path=str(path) if path else None)
            kernel.model_options(kernel_table)          # refuse unknown keys when the recipe is read
            sc.kernel = dict(kernel_table)
        for key, value in flat.items():
            sc._set(key, value)
        sc._check()
        return sc

    def _set(self, key: str, value) -> None:
        times = {"crop_start", "crop_end", "cs_setup", "cs_hold", "inter_transfer", "cs_change", "context_switch",
                 "burst_gap"}
        try:
            if key in times:
                setattr(self, key, parse_time(value))
            elif self.set_common(key, value):           # samplerate, sclk, mode, wordsize, channels ...
                pass
            elif key in ("words_per_transfer", "transfers_per_message", "messages", "messages_per_burst"):
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
                    self.sigma = {k: parse_time(value) for k in JITTER_KINDS}
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
        need = self.need
        self.check_common(MAX_WORDSIZE)
        for key in ("words_per_transfer", "transfers_per_message", "messages"):
            need(getattr(self, key) >= 1, f"{key} must be >= 1, not {getattr(self, key)}")
        need(self.messages_per_burst >= 0, "messages_per_burst must be >= 0")
        n_win = self.messages * self.transfers_per_message
        per_win = (sum(self.window_words) / len(self.window_words)) if self.window_words else self.words_per_transfer
        need(n_win <= MAX_WINDOWS, f"messages x transfers_per_message = {n_win:.3g} windows, more than spigap "
             f"synth plans ({MAX_WINDOWS:,}); lower messages")
        need(n_win * per_win * self.wordsize <= MAX_BITS, f"{n_win * per_win * self.wordsize:.3g} clocked bits, "
             f"more than spigap synth plans ({MAX_BITS:,}); lower messages or words_per_transfer")
        for key in ("cs_setup", "cs_hold", "inter_transfer", "cs_change", "context_switch", "burst_gap",
                    "idle_clocks"):
            v = getattr(self, key)
            need(v >= 0 and np.isfinite(v), f"{key} must be >= 0, not {v:g}")
        need(all(0 <= v <= MAX_SIGMA_S for v in self.sigma.values()),
             f"jitter (sigma) must be 0 .. {MAX_SIGMA_S:g} s")
        need(0 <= self.stall_probability <= 1, "stall_probability must be in [0, 1]")
        need(0 <= self.stall[0] <= self.stall[1], "stall is a range [low, high] of times >= 0")
        need(all(n >= 1 for n in self.segments or []) and all(n >= 1 for n in self.window_words or []),
             "segments and window_words must be >= 1 each")
        if self.segments and self.window_words:
            raise UsageError("segments and window_words cannot be combined")
        if self.segments and sum(self.segments) != self.words_per_transfer:
            raise UsageError(f"segments {self.segments} do not add up to words_per_transfer "
                             f"{self.words_per_transfer}")
        for k in self.sigma:
            if k not in JITTER_KINDS:
                raise UsageError(f"unknown jitter kind {k!r}; known: {', '.join(JITTER_KINDS)}")

    # ----------------------------------------------------------- building
    def windows(self) -> Windows:
        """The recipe's windows: [pattern] payloads with this scenario's timing and jitter."""
        rng = np.random.default_rng(self.seed)
        n = self.messages * self.transfers_per_message
        if self.window_words:
            per = np.resize(np.array(self.window_words, np.int64), n)
        else:
            per = np.full(n, self.words_per_transfer, np.int64)
        boundary = None
        if self.segments:
            starts = np.zeros(self.words_per_transfer, bool)
            starts[np.cumsum(self.segments)[:-1]] = True
            boundary = starts[_rank(per)]
        w = self._timed(rng, (np.arange(n) % self.transfers_per_message) == 0, per, boundary)
        nw, wpt = len(w.word_window), self.words_per_transfer
        w.mosi = _payload(self.mosi, nw, wpt, self.wordsize, rng)
        w.miso = _payload(self.miso, nw, wpt, self.wordsize, rng)
        return w

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
        if message_start is None:
            message_start = (np.arange(n) % self.transfers_per_message) == 0
        boundary = np.concatenate([np.asarray(b, bool) for b in segment_start]) if segment_start else None
        w = self._timed(rng, message_start, np.array([len(x) for x in mosi], np.int64), boundary)
        w.mosi = np.array([v for x in mosi for v in x], dtype=np.uint64)
        if miso is not None:
            w.miso = np.array([v for x in miso for v in x], dtype=np.uint64)
        return w

    def _timed(self, rng, message_start, per: np.ndarray, boundary: np.ndarray | None) -> Windows:
        """Windows of ``per[i]`` words each (payloads zero), every gap drawn from ``rng``: the
        CS-inactive gaps (a context switch before a window that starts a message, else a
        cs_change; a burst gap before the first message of a burst; the lead before the
        first), the word gaps (inter-transfer where ``boundary``, else inter-byte), CS
        setup and hold."""
        n = len(per)
        T = 1.0 / self.sclk
        floor = 2.0 / self.samplerate
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
        nw = int(per.sum())
        if boundary is None:
            boundary = np.zeros(nw, bool)
        word_gap = np.where(boundary, gaps("inter_transfer", self.inter_transfer, nw),
                            gaps("inter_byte", T / 2 + self.idle_clocks * T, nw, T / 2))
        word_gap[_rank(per) == 0] = 0.0
        return Windows(gap_before=gap_before, cs_setup=gaps("cs_setup", self.cs_setup, n),
                       cs_hold=gaps("cs_hold", self.cs_hold, n), kind=kind,
                       message=np.cumsum(kind == "context_switch"), word_window=np.repeat(np.arange(n), per),
                       mosi=np.zeros(nw, np.uint64), miso=np.zeros(nw, np.uint64),
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
        w = self.windows()
        truth = None
        if self.payload:
            from spigap.synth.traffic import fill_payload

            # the words only: every gap was drawn before them, so the timing stays the [pattern]'s
            truth = fill_payload(self, w, dict(self.payload))
        tl = self.build_timeline(w)
        tl.device_truth = truth
        return tl

    @property
    def traffic(self) -> str | None:
        """The name of the chip traffic in this recipe's windows ([device] or [payload]), if any."""
        table = self.device or self.payload
        return str(table.get("name")) if table else None

    def build_timeline(self, w: Windows) -> Timeline:
        """``w``'s timeline, its data lines launched as this recipe's device and controller
        drive them (Recipe.launch: the recipe's delays, else the chip's)."""
        return build(w, self.shape, self.tail, self.launch(w.cs_setup, self.traffic))

    def capture(self, tl: Timeline | None = None) -> "GapCapture":
        """The capture of ``tl`` (default: this recipe's timeline), cropped to crop_start..crop_end."""
        tl = tl or self.timeline()
        offset = int(round((self.crop_start or 0.0) * self.samplerate))
        end = self.crop_end if self.crop_end is not None else tl.end_time
        n_samples = int(round(end * self.samplerate)) - offset
        if n_samples <= 0:
            raise UsageError("the capture would be empty (check crop_start/crop_end)")
        cs = [CsLine(self.channels["cs"], tl.shape.cs_active_low, tl.cs_assert, tl.cs_deassert)] \
            if self.channels.get("cs") else []
        return GapCapture(self, tl, cs, offset, n_samples)


@dataclasses.dataclass
class GapCapture(Capture):
    """A one-device capture: its truth is the timeline's, its kernel trace the driver model's
    (kernel.py) placed inside the bus gaps."""

    recipe: Scenario

    def truth(self) -> dict:
        return truth_json(self.timeline, self.t0)

    @property
    def t0(self) -> float:
        """The timeline time of the capture's first sample (crop_start, to the sample)."""
        return self.offset / self.recipe.samplerate

    def write_trace(self, path, opts: TraceOptions) -> dict:
        sc = self.recipe
        km = kernel.KernelLatencies(**dataclasses.asdict(opts), seed=sc.seed + 1, **kernel.model_options(sc.kernel))
        return kernel.write(self.timeline, path, km, t0=self.t0)

    def describe(self) -> str:
        return f"{len(self.timeline.cs_assert)} transfers"

    def describe_trace(self, opts: TraceOptions) -> str:
        t = self.traced or {}
        return (f"{t.get('events_written')} events ({opts.layout}, drift {opts.drift_ppm:g} ppm, "
                f"{t.get('lost_events')} lost)")


def _rank(per: np.ndarray) -> np.ndarray:
    """Each word's place in its window (0 for the first), windows of ``per[i]`` words."""
    return np.arange(int(per.sum())) - np.repeat(np.cumsum(per) - per, per)


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


def truth_json(tl: Timeline, t0: float = 0.0) -> dict:
    tr = tl.truth()
    return {
        "note": "ground truth of a synthesized capture, seconds; docs/gaps.md defines the gaps",
        "time_offset_s": t0,
        "transfers": len(tl.cs_assert),
        "cs_assert_s": json_list(tr["cs_assert"] - t0), "cs_deassert_s": json_list(tr["cs_deassert"] - t0),
        "cs_setup_s": json_list(tr["cs_setup"]), "cs_hold_s": json_list(tr["cs_hold"]),
        "gap_before_s": json_list(tr["gap_before"]), "gap_before_kind": [str(k) for k in tr["kind"]],
        "inter_byte_s": json_list(tr["inter_byte"]), "inter_transfer_s": json_list(tr["inter_transfer"]),
        "mosi": json_list(tr["mosi"]), "miso": json_list(tr["miso"]),
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
