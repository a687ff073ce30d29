"""Analog SPI traces with known truth: what a scope would see at the receivers' pins.

A synthesized bus (a ``timeline.Timeline``: CS windows, clock edges, the bits
launched) becomes four voltage traces. Each line is modelled at its receiver:

* every edge is an RC step toward the new level with the line's own time
  constant ``tau`` (from wherever the line is when the edge starts, so a line
  that has not settled starts its next edge from there);
* ``delay``: skew, every edge of the line that much later (trace length, probe);
* MOSI and MISO change where the timeline launches them (timeline.Launch: the
  controller's ``mosi_delay`` after its launching clock edge, the device's
  ``miso_delay`` after it, its first bit ``miso_enable`` after CS in CPHA 0);
* ``ring``: a damped oscillation after each edge (share of the step, frequency,
  decay time): ringing, overshoot, ringback;
* ``bounce``: ground bounce, a short pulse on the other lines at every SCLK edge;
* ``noise``: Gaussian, volts rms, added when the samples are rendered (the truth
  is the noise-free waveform).

``AnalogBus.line(role, name, samplerate)`` is a source the capture writers
render chunk by chunk (synth/writers: ``.volts(start, stop)``); ``truth``
gives, per sampling edge, the exact setup, hold and clock-to-output at given
receiver levels, found on the noise-free waveform independently of the
analyzer's streamed measurement (dense evaluation, then a root finder), and
``rise_time`` the exact 10-90 % time of an edge.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from scipy.optimize import brentq

from spigap.synth.timeline import Timeline


@dataclasses.dataclass
class LineModel:
    tau: float = 1e-9            # RC time constant of the edges, s
    delay: float = 0.0           # skew: every edge this much later, s
    v_low: float = 0.0
    v_high: float = 3.3
    ring: float = 0.0            # ringing amplitude, share of the step
    ring_hz: float = 0.0
    ring_tau: float = 0.0        # ringing decay time, s
    noise: float = 0.0           # V rms


@dataclasses.dataclass
class AnalogBus:
    timeline: Timeline
    lines: dict                  # role ("clk", "mosi", "miso", "cs") -> LineModel
    bounce: float = 0.0          # ground bounce pulse height on the other lines, V
    bounce_tau: float = 0.3e-9
    seed: int = 0

    def __post_init__(self):
        self._segs: dict[str, tuple] = {}
        tl = self.timeline
        self._clk_t = tl.clk_t + self.lines["clk"].delay if "clk" in self.lines else tl.clk_t
        self._clk_up = tl.clk_level.astype(bool)

    # ------------------------------------------------------------ edges of each line
    def edges(self, role: str) -> tuple[np.ndarray, np.ndarray, float]:
        """(edge start times, new logic levels, initial level) of one line, noise-free model."""
        tl = self.timeline
        sh = tl.shape
        m = self.lines[role]
        if role == "clk":
            t, lv, init = tl.clk_t, tl.clk_level.astype(np.int8), sh.cpol
        elif role == "cs":
            act = 0 if sh.cs_active_low else 1
            t = np.empty(2 * len(tl.cs_assert))
            t[0::2], t[1::2] = tl.cs_assert, tl.cs_deassert
            lv = np.tile(np.array([act, 1 - act], np.int8), len(tl.cs_assert))
            init = 1 - act
        elif role in ("mosi", "miso"):
            bits = tl.mosi_bits if role == "mosi" else tl.miso_bits
            t = tl.mosi_t if role == "mosi" else tl.miso_t
            lv, init = bits.astype(np.int8), 0
        else:
            raise KeyError(role)
        order = np.argsort(t, kind="stable")
        t, lv = np.asarray(t)[order], lv[order]
        prev = np.concatenate([[init], lv[:-1]])
        chg = lv != prev
        return t[chg] + m.delay, lv[chg], init

    def _segments(self, role: str):
        """Each edge's start time, target volts and the volts the line had when it started."""
        if role not in self._segs:
            m = self.lines[role]
            t, lv, init = self.edges(role)
            target = np.where(lv != 0, m.v_high, m.v_low).astype(np.float64)
            start = np.empty(len(t))
            v = m.v_high if init else m.v_low
            prev_t, prev_g, prev_s = -np.inf, v, v
            for k in range(len(t)):            # each edge starts where the previous one had got to
                if k:
                    v = self._segment_value(m, t[k] - prev_t, prev_s, prev_g)
                start[k] = v
                prev_t, prev_g, prev_s = t[k], target[k], v
            self._segs[role] = (t, target, start, m.v_high if init else m.v_low)
        return self._segs[role]

    @staticmethod
    def _segment_value(m: LineModel, dt, s, g):
        dt = np.asarray(dt, np.float64)
        v = g + (s - g) * np.exp(-dt / m.tau)
        if m.ring and m.ring_hz:
            v = v + m.ring * (g - s) * np.exp(-dt / m.ring_tau) * np.sin(2 * np.pi * m.ring_hz * dt)
        return v

    def clean(self, role: str, t: np.ndarray) -> np.ndarray:
        """The noise-free volts of one line at times ``t`` (s)."""
        m = self.lines[role]
        et, g, s, v0 = self._segments(role)
        t = np.asarray(t, np.float64)
        k = np.searchsorted(et, t, side="right") - 1
        out = np.full(t.shape, float(v0))
        on = k >= 0
        kk = k[on]
        out[on] = self._segment_value(m, t[on] - et[kk], s[kk], g[kk])
        if self.bounce and role != "clk" and len(self._clk_t):
            c = np.searchsorted(self._clk_t, t, side="right") - 1
            okc = c >= 0
            x = (t[okc] - self._clk_t[c[okc]]) / self.bounce_tau
            sign = np.where(self._clk_up[c[okc]], 1.0, -1.0)
            out[okc] += self.bounce * sign * x * np.exp(1.0 - x)
        return out

    # ------------------------------------------------------------ what the writers render
    def line(self, role: str, name: str, samplerate: float, t0: float = 0.0) -> "LineSource":
        return LineSource(self, role, name, samplerate, t0)

    # ------------------------------------------------------------ truth
    def crossing(self, role: str, level: float, a: float, b: float, rising: bool, last: bool = False) -> float:
        """The first (or ``last``) time in [a, b] the noise-free line crosses ``level`` going up
        (``rising``) or down; NaN if it does not."""
        m = self.lines[role]
        step = min(m.tau, m.ring_tau or m.tau, self.bounce_tau if self.bounce else m.tau) / 8
        n = int(min(max((b - a) / step, 16), 2_000_000))
        t = np.linspace(a, b, n + 1)
        d = self.clean(role, t) - level
        hit = np.flatnonzero((d[:-1] < 0) & (d[1:] >= 0)) if rising else np.flatnonzero((d[:-1] > 0) & (d[1:] <= 0))
        if not len(hit):
            return math.nan
        i = int(hit[-1] if last else hit[0])
        return float(brentq(lambda x: float(self.clean(role, np.array([x]))[0]) - level, t[i], t[i + 1],
                            xtol=1e-16, rtol=1e-12))

    def truth(self, role: str, vil: float, vih: float, clk_vil: float | None = None,
              clk_vih: float | None = None) -> dict:
        """Per sampling edge of the bus: the exact setup and hold of ``role``'s data line
        ("mosi" or "miso") at a receiver with these levels (and the clock's at
        ``clk_vil``/``clk_vih``, default the same), the definitions of docs/pin-timing.md:
        setup = the clock leaves its old valid level - the data enters its valid level
        (the last entry before the sampling edge, or the first after it when late);
        hold = the data leaves it - the clock reaches its new valid level. Also the
        clock-to-output of the bits that changed (launching edge's middle crossing to
        the data valid). Times in seconds, the sampling edges' middle crossings in ``at``."""
        tl = self.timeline
        sh = tl.shape
        T = sh.period
        cvil = vil if clk_vil is None else clk_vil
        cvih = vih if clk_vih is None else clk_vih
        cmid = (cvil + cvih) / 2
        ws = sh.wordsize
        k = np.arange(2 * ws)
        samp_k = k[k % 2 == sh.cpha]
        leading_rise = sh.cpol == 0
        samp_rising = (sh.cpha == 0) == leading_rise
        bits = tl.mosi_bits if role == "mosi" else tl.miso_bits
        data_t = (tl.mosi_t if role == "mosi" else tl.miso_t) + self.lines[role].delay
        cd = self.lines["clk"].delay
        out: dict[str, list] = {k2: [] for k2 in ("at", "setup", "hold", "tco", "tco_at")}
        tau_c = self.lines["clk"].tau
        for w, first in enumerate(tl.word_first):
            for j, kk in enumerate(samp_k):
                c = first + kk * T / 2 + cd             # the sampling edge starts here
                bit_i = w * ws + j
                win = (c - 0.5 * T, c + 0.5 * T)
                if samp_rising:
                    cs_ = self.crossing("clk", cvil, c - tau_c, c + 0.45 * T, True, last=False)
                    ce = self.crossing("clk", cvih, c - tau_c, c + 0.45 * T, True)
                    cm = self.crossing("clk", cmid, c - tau_c, c + 0.45 * T, True)
                else:
                    cs_ = self.crossing("clk", cvih, c - tau_c, c + 0.45 * T, False)
                    ce = self.crossing("clk", cvil, c - tau_c, c + 0.45 * T, False)
                    cm = self.crossing("clk", cmid, c - tau_c, c + 0.45 * T, False)
                b = int(bits[bit_i])
                lvl = vih if b else vil
                # the valid interval of the bit: enters at the last crossing into it before the
                # edge (or the first after it), leaves at the first crossing out after that
                lo = data_t[bit_i] - 2 * T
                enter_before = self.crossing(role, lvl, lo, cm, rising=bool(b), last=True)
                if not math.isnan(enter_before) and self._valid(role, cm, b, vil, vih):
                    enter = enter_before
                else:
                    enter = self.crossing(role, lvl, cm, win[1] + T, rising=bool(b))
                    if math.isnan(enter):
                        enter = enter_before
                leave = self.crossing(role, lvl, max(enter, cm) if not math.isnan(enter) else cm,
                                      cm + 2 * T, rising=not b)
                out["at"].append(cm)
                out["setup"].append(cs_ - enter)
                out["hold"].append((leave - ce) if not math.isnan(leave) else math.inf)
                prev_b = int(bits[bit_i - 1]) if bit_i > 0 and (bit_i % ws) else None
                if prev_b is not None and prev_b != b:
                    lc = c - T / 2                       # the launching edge
                    lm = self.crossing("clk", cmid, lc - tau_c, lc + 0.45 * T, not samp_rising)
                    out["tco"].append(enter - lm)
                    out["tco_at"].append(lm)
        return {k2: np.asarray(v) for k2, v in out.items()}

    def _valid(self, role: str, t: float, b: int, vil: float, vih: float) -> bool:
        v = float(self.clean(role, np.array([t]))[0])
        return v >= vih if b else v <= vil

    def rise_time(self, role: str) -> float:
        """10-90 % time of a settled edge of ``role`` (RC only: tau x ln 9)."""
        return self.lines[role].tau * math.log(9.0)


class LineSource:
    """One line as the capture writers take it: ``.name``, ``.volts(start, stop)``."""

    def __init__(self, bus: AnalogBus, role: str, name: str, samplerate: float, t0: float = 0.0):
        self.bus, self.role, self.name = bus, role, name
        self.samplerate, self.t0 = float(samplerate), float(t0)
        self._k = ["clk", "mosi", "miso", "cs"].index(role) if role in ("clk", "mosi", "miso", "cs") else 9

    def clean(self) -> "LineSource":
        """As a logic Track's (the writers normalize their tracks with it)."""
        return self

    def volts(self, start: int, stop: int) -> np.ndarray:
        t = self.t0 + np.arange(start, stop) / self.samplerate
        v = self.bus.clean(self.role, t)
        sigma = self.bus.lines[self.role].noise
        if sigma:
            rng = np.random.default_rng([self.bus.seed, self._k, start])
            v = v + rng.normal(0.0, sigma, len(v))
        return v


# ------------------------------------------------------------------ recipes
# An analog recipe is a synth scenario (captures/*.toml: [capture], [spi], [timing], [device]...)
# with an [analog] table: the scope (samplerate, format, vertical scale and resolution), the
# data lines' delays (mosi_delay, miso_delay, miso_enable: the recipe's own keys, recipe.Recipe.launch,
# given here beside the lines they shape), the ground bounce of the bus, and one [analog.<role>]
# table per line (tau, delay, noise, ring, ring_hz, ring_tau, v_low, v_high). `spigap synth --config RECIPE -o STEM`
# writes STEM + CH1.isf ... CH4.isf (clk, mosi, miso, cs unless `channels` says otherwise).
LINE_KEYS = {"tau": "t", "delay": "t", "noise": "f", "ring": "f", "ring_hz": "hz", "ring_tau": "t",
             "v_low": "f", "v_high": "f"}
ANALOG_KEYS = {"samplerate", "format", "volts_per_div", "center", "bits", "mosi_delay", "miso_delay",
               "miso_enable", "bounce", "bounce_tau", "seed", "channels", "clk", "mosi", "miso", "cs"}


def is_analog(path) -> bool:
    """The recipe has an [analog] table."""
    from spigap.errors import InputError, UsageError
    from spigap.synth import recipe

    try:
        return isinstance(recipe.read(path)[0].get("analog"), dict)
    except (InputError, UsageError):        # not readable, not TOML: the recipe's reader says why
        return False


def load_recipe(path):
    """(Scenario, AnalogBus, scope settings) of an analog recipe: a one-device recipe
    (synth/scenario.py) with an [analog] table."""
    from spigap.errors import UsageError
    from spigap.synth import recipe
    from spigap.synth.recipe import LAUNCH_KEYS
    from spigap.synth.scenario import Scenario
    from spigap.units import parse_freq, parse_time

    data, text = recipe.read(path)
    an = data.pop("analog")
    if recipe.is_bus(data):
        raise UsageError("an [analog] recipe is one device ([[device]] tables are not rendered as volts)",
                         path=str(path))
    bad = sorted(set(an) - ANALOG_KEYS)
    if bad:
        raise UsageError(f"[analog] has no key {bad[0]!r}; known: {', '.join(sorted(ANALOG_KEYS))}", path=str(path))
    sc = Scenario.from_tables(data, text, {k: an[k] for k in LAUNCH_KEYS if k in an}, path)

    def conv(kind, v):
        return parse_time(v) if kind == "t" else parse_freq(v) if kind == "hz" else float(v)

    lines = {}
    for role in ("clk", "mosi", "miso", "cs"):
        t = an.get(role, {})
        bad = sorted(set(t) - set(LINE_KEYS))
        if bad:
            raise UsageError(f"[analog.{role}] has no key {bad[0]!r}; known: {', '.join(LINE_KEYS)}", path=str(path))
        lines[role] = LineModel(**{k: conv(LINE_KEYS[k], v) for k, v in t.items()})
    bus = AnalogBus(sc.timeline(), lines, bounce=float(an.get("bounce", 0.0)),
                    bounce_tau=parse_time(an.get("bounce_tau", "0.3ns")), seed=int(an.get("seed", sc.seed)))
    scope = {"samplerate": parse_freq(an.get("samplerate", "2.5GHz")), "format": an.get("format", "isf"),
             "volts_per_div": float(an.get("volts_per_div", 0.5)), "center": float(an.get("center", 1.65)),
             "bits": int(an.get("bits", 8)), "channels": list(an.get("channels", ["clk", "mosi", "miso", "cs"]))}
    if scope["format"] != "isf":
        raise UsageError(f"[analog] format {scope['format']!r}: only isf is written from a recipe", path=str(path))
    return sc, bus, scope


def write_recipe(path, stem: str) -> tuple[list[str], AnalogBus, dict]:
    """Write the recipe's acquisition as one ISF file per channel, named as a Tektronix scope
    names them (STEM + CH1.isf ...), the recipe inside none of them (ISF has no room): keep it
    next to them. Returns (paths, bus, scope settings)."""
    from spigap.synth.writers.isf import write_isf_set

    sc, bus, scope = load_recipe(path)
    names = sc.channels
    rate = scope["samplerate"]
    t0 = sc.crop_start or 0.0
    end = sc.crop_end if sc.crop_end is not None else bus.timeline.end_time
    n = int(round((end - t0) * rate))
    srcs = [bus.line(role, names.get(role, role.upper()), rate, t0=t0) for role in scope["channels"]]
    paths = write_isf_set(stem, srcs, rate, n, volts_per_div=scope["volts_per_div"], center=scope["center"],
                          bits=scope["bits"], t0=t0)
    return paths, bus, scope


def truth_json(bus: AnalogBus) -> dict:
    """The recipe's truth at 30/70 % of each line's swing: per sampling edge setup, hold and
    clock-to-output of MOSI and MISO (s), and each line's 10-90 % rise time."""
    out: dict = {"levels": "0.3/0.7 x v_high", "lines": {}}
    for role in ("mosi", "miso"):
        m = bus.lines[role]
        vil, vih = m.v_low + 0.3 * (m.v_high - m.v_low), m.v_low + 0.7 * (m.v_high - m.v_low)
        tr = bus.truth(role, vil, vih)
        out[role] = {k: [None if not math.isfinite(x) else float(x) for x in v] for k, v in tr.items()}
    for role, m in bus.lines.items():
        out["lines"][role] = {"rise_10_90_s": bus.rise_time(role), **dataclasses.asdict(m)}
    return out
