"""Turn a list of CS windows (words + timing) into channel edges and ground truth.

Everything is vectorized: the timeline is one cumulative sum over the
intervals in bus order (CS-inactive gap, CS setup, word, word gap, ..., CS
hold), so captures with 10^5 transfers build in well under a second.

Times are kept in seconds (float64) until ``quantize``; the truth is the
continuous time, which the analyzer can only resolve to +-1 sample.

The data lines change where the hardware drives them (``Launch``): the controller's
MOSI on its launching SCLK edges, the device's MISO on them too, each after its own
clock-to-output delay, the previous bit held until then. A word's first bit is
launched by the last edge of the word before it in the same CS window (a shift
register does not know where words end); the first bit of a CS window in CPHA 0 has
no edge before it: the device drives it when CS asserts (after its output-enable
delay), the controller when it starts the transfer, half a period before the first
sampling edge (as if from an edge there). In CPHA 1 every bit has its leading edge.
"""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass
class SpiShape:
    sclk_hz: float
    cpol: int = 0
    cpha: int = 0
    wordsize: int = 8
    lsb_first: bool = False
    cs_active_low: bool = True

    @property
    def period(self) -> float:
        return 1.0 / self.sclk_hz


@dataclasses.dataclass
class Launch:
    """When the data lines change, in seconds: MOSI ``mosi_delay`` after the controller's
    launching SCLK edge (its clock-to-output); MISO ``miso_delay`` after the device's
    launching edge (its tDO: the old bit is held until then, so its output hold is the
    same time on a logic line) and, in CPHA 0, the window's first MISO bit ``miso_enable``
    after CS asserts (the device's CS-to-output-valid). Each a number, or an array with
    one value per CS window (devices of a bus with their own timing). The default: every
    bit exactly on its edge (or CS), an ideal bus; recipes give realistic values
    (``Recipe.launch``)."""

    mosi_delay: float | np.ndarray = 0.0
    miso_delay: float | np.ndarray = 0.0
    miso_enable: float | np.ndarray = 0.0

    def per_window(self, key: str, n: int) -> np.ndarray:
        """One value per window of ``key``."""
        v = getattr(self, key)
        return np.full(n, float(v)) if np.ndim(v) == 0 else np.asarray(v, float)

    def truth(self, n: int) -> dict:
        """The values (s) as JSON: a number where every window has the same, else a list."""
        out = {}
        for key in ("mosi_delay", "miso_delay", "miso_enable"):
            v = self.per_window(key, n)
            out[f"{key}_s"] = float(v[0]) if len(v) and (v == v[0]).all() else v.tolist()
        return out


@dataclasses.dataclass
class Windows:
    """What goes on the bus, window by window (all arrays in bus order).

    Per window: ``gap_before`` (CS-inactive time before the assert; for the
    first window: idle time from capture start), ``cs_setup``, ``cs_hold``,
    ``kind`` (gap_before kind: 'lead', 'cs_change', 'context_switch'),
    ``message`` index. Per word: ``word_window`` (owning window), ``mosi``,
    ``miso`` (ints), ``word_gap`` (edge-to-edge gap before the word; ignored
    for the first word of a window), ``word_boundary`` (True where an
    inter-transfer gap, not an inter-byte gap, precedes the word).
    """

    gap_before: np.ndarray
    cs_setup: np.ndarray
    cs_hold: np.ndarray
    kind: np.ndarray
    message: np.ndarray
    word_window: np.ndarray
    mosi: np.ndarray
    miso: np.ndarray
    word_gap: np.ndarray
    word_boundary: np.ndarray

    @property
    def n(self) -> int:
        return len(self.gap_before)


@dataclasses.dataclass
class Timeline:
    """Absolute times (s) of every window and word, plus the clock/data edges."""

    shape: SpiShape
    windows: Windows
    cs_assert: np.ndarray
    cs_deassert: np.ndarray
    word_first: np.ndarray
    word_last: np.ndarray
    end_time: float
    clk_t: np.ndarray          # clock edge times, all windows
    clk_level: np.ndarray      # level after each clock edge
    mosi_t: np.ndarray         # MOSI change times, one per bit (Launch)
    miso_t: np.ndarray         # MISO change times, one per bit
    mosi_bits: np.ndarray
    miso_bits: np.ndarray
    launch: Launch = dataclasses.field(default_factory=Launch)    # the delays the times were drawn with
    extra: dict = dataclasses.field(default_factory=dict)   # name -> (times, levels, idle)
    device_truth: list | None = None   # device generators: what each CS window means

    def truth(self) -> dict:
        """Ground truth in seconds, the way docs/gaps.md defines the gaps."""
        w = self.windows
        T = self.shape.period
        first_word = np.searchsorted(w.word_window, np.arange(w.n), side="left")
        last_word = np.searchsorted(w.word_window, np.arange(w.n), side="right") - 1
        has_words = last_word >= first_word
        first_edge = np.where(has_words, self.word_first[np.minimum(first_word, len(self.word_first) - 1)], np.nan)
        last_edge = np.where(has_words, self.word_last[np.maximum(last_word, 0)], np.nan)
        same = w.word_window[1:] == w.word_window[:-1]
        pair_gap = (self.word_first[1:] - self.word_last[:-1])[same]
        pair_boundary = w.word_boundary[1:][same]
        return {
            "cs_setup": first_edge - self.cs_assert,
            "cs_hold": self.cs_deassert - last_edge,
            "gap_before": np.concatenate([[np.nan], self.cs_assert[1:] - self.cs_deassert[:-1]]),
            "kind": w.kind,
            "message": w.message,
            "duration": self.cs_deassert - self.cs_assert,
            "period": np.diff(self.cs_assert),
            "inter_byte": pair_gap[~pair_boundary],
            "inter_transfer": pair_gap[pair_boundary],
            "idle_clocks": (pair_gap[~pair_boundary] - T / 2) / T,
            "mosi": w.mosi, "miso": w.miso, "word_window": w.word_window,
            "cs_assert": self.cs_assert, "cs_deassert": self.cs_deassert,
            "launch": self.launch.truth(w.n),
        }


def build(windows: Windows, shape: SpiShape, tail: float, launch: Launch | None = None) -> Timeline:
    """The timeline of ``windows``: CS and clock edges from the gaps, each bit's MOSI and
    MISO change time from ``launch`` (module docstring; default: on the edges, no delay)."""
    w = windows
    launch = launch or Launch()
    T = shape.period
    ws = shape.wordsize
    span = (2 * ws - 1) * T / 2                 # first to last clock edge of a word
    n_words_per = np.bincount(w.word_window, minlength=w.n)
    first_of_window = np.ones(len(w.word_window), bool)
    first_of_window[1:] = w.word_window[1:] != w.word_window[:-1]
    # event sequence per window: assert, (first, last) per word, deassert
    n_ev = 2 * w.n + 2 * len(w.word_window)
    base = 2 * np.arange(w.n) + 2 * np.concatenate([[0], np.cumsum(n_words_per)[:-1]])
    assert_pos = base
    deassert_pos = base + 1 + 2 * n_words_per
    word_rank = np.arange(len(w.word_window)) - np.concatenate([[0], np.cumsum(n_words_per)[:-1]])[w.word_window]
    first_pos = assert_pos[w.word_window] + 1 + 2 * word_rank
    last_pos = first_pos + 1
    delta = np.empty(n_ev)
    delta[assert_pos] = w.gap_before
    delta[first_pos] = np.where(first_of_window, w.cs_setup[w.word_window], w.word_gap)
    delta[last_pos] = span
    # hold counts from the last clock edge, or from the assert for an empty window
    delta[deassert_pos] = w.cs_hold
    t = np.cumsum(delta)
    cs_assert, cs_deassert = t[assert_pos], t[deassert_pos]
    word_first, word_last = t[first_pos], t[last_pos]
    # clock edges: 2*ws per word, T/2 apart
    k = np.arange(2 * ws)
    clk_t = (word_first[:, None] + k[None, :] * (T / 2)).ravel()
    lead = 1 - shape.cpol
    clk_level = np.tile(np.where(k % 2 == 0, lead, shape.cpol), len(word_first)).astype(np.uint8)
    samp_k = k[k % 2 == shape.cpha]                     # sampling edge numbers within a word
    # each bit's launching edge: the clock edge before its sampling edge (one array, reused for MISO)
    at = word_first[:, None] + (samp_k[None, :] - 1) * (T / 2)
    later = np.flatnonzero(~first_of_window)
    if shape.cpha == 0 and len(later):
        at[later, 0] = word_last[later - 1]             # a later word's first bit: the last edge before it
    mosi_t = (at + _per_word(launch.mosi_delay, w.word_window)).ravel()
    at += _per_word(launch.miso_delay, w.word_window)
    if shape.cpha == 0:
        # the window's first MISO bit: when CS asserts, after the device's output-enable delay
        first = np.flatnonzero(first_of_window)
        win = w.word_window[first]
        at[first, 0] = cs_assert[win] + launch.per_window("miso_enable", w.n)[win]
    miso_t = at.ravel()
    shifts = np.arange(ws) if shape.lsb_first else np.arange(ws - 1, -1, -1)

    def bits(values):
        if ws > 64:         # Python ints (object array): elementwise big-int shifts
            v = np.asarray(values, dtype=object)
            return ((v[:, None] >> shifts.astype(object)[None, :]) & 1).astype(np.uint8).ravel()
        v = np.asarray(values, dtype=np.uint64)
        return ((v[:, None] >> shifts.astype(np.uint64)[None, :]) & np.uint64(1)).astype(np.uint8).ravel()

    return Timeline(shape, w, cs_assert, cs_deassert, word_first, word_last,
                    float(t[-1] + tail) if len(t) else tail, clk_t, clk_level, mosi_t, miso_t,
                    bits(w.mosi), bits(w.miso), launch=launch)


def _per_word(delay, word_window: np.ndarray):
    """A delay as a number, or one per window spread to its words' rows."""
    return delay if np.ndim(delay) == 0 else np.asarray(delay, float)[word_window][:, None]


def jittered(rng: np.random.Generator, nominal, n: int, sigma: float, stall_p: float,
             stall: tuple[float, float], floor: float) -> np.ndarray:
    """``n`` gap values: nominal + N(0, sigma) + occasional uniform stalls, >= floor."""
    v = np.asarray(nominal, float).copy() if np.ndim(nominal) else np.full(n, float(nominal))
    if sigma > 0:
        v += rng.normal(0.0, sigma, n)
    if stall_p > 0:
        hit = rng.random(n) < stall_p
        v[hit] += rng.uniform(stall[0], stall[1], int(hit.sum()))
    return np.maximum(v, floor)
