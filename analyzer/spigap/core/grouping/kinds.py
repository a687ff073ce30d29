"""Kinds of CS-inactive gap: populations, and what their spread says physically.

Step 1 of docs/gaps.md, "CS-inactive gaps". The gaps are split by the shared
two-population rule (``gapdefs.split_two``, log scale); each side is split once
more by the same rule, so up to four kinds are found (an IRQ thread's 1 µs
cs_change gaps, 5 µs back-to-back spi_sync calls and 30-800 µs waits for the
next interrupt are three). Where the rule sees one population but the gaps fall
into two groups with an empty stretch of the log axis between them (a wide
spread of interrupt waits far above the rest), they are cut there first.

Each kind is then described (``KindStats``) by what its spread shows:

* **busy-wait**: the default cs_change of the Linux SPI core is
  ``udelay(10)`` between two GPIO writes (every spidev cs_change: spidev
  cannot set ``cs_change_delay``): 10 µs plus the writes, accurate to the
  timer, with a tight and nearly symmetric spread;
* **right tail**: a context switch crosses scheduling (a return to user
  space, a wake-up): a long right tail;
* **wide**: a spread over several-fold lengths (waits for an interrupt, sleeps
  of varying length), which a delay inside a message does not have.
"""

from __future__ import annotations

import copy
import dataclasses

import numpy as np

from spigap.core.gaprules import classify, defs, split
from spigap.core.quantile import median, percentiles

DEFAULT_CS_CHANGE_S = (9.5e-6, 14.5e-6)  # udelay(10) + two GPIO writes (up to ~2 µs each on slow SoCs; -0.5 µs: timer rounding)
TIGHT = 0.06                # robust relative spread of a busy-wait (1.4826 MAD / median)
SYMMETRIC = 2.5             # (p90 - p50) / (p50 - p10) at most this: no long right tail (a busy-wait
#                             never ends early, so its spread leans right a little)
RIGHT_TAIL = 2.0            # at least this (with a spread the samples resolve): a right tail
WIDE = 0.35                 # robust SD of ln(gap) above this: a wide spread
BREAK = 0.7                 # an empty stretch of ln(gap) this wide (2x) cuts groups apart
BREAK_SHARE = 0.1           # ... when each side holds this share of the gaps
MIN_REFINE = 30             # gaps a group needs before it is split again
CLEAR_ERROR = 0.01          # two candidates the rule calls overlapping, yet their fit puts < 1 % of the
#                             gaps on the wrong side (a tight busy-wait beside a long-tailed context switch)


@dataclasses.dataclass
class KindStats:
    """One kind of CS-inactive gap (ticks)."""
    n: int
    share: float
    median: float
    p10: float
    p90: float
    spread: float               # 1.4826 MAD / median
    log_sd: float               # 1.4826 MAD of ln(gap + 1)
    tail: float | None          # (p90 - p50) / (p50 - p10); None when the samples do not resolve it
    busy_wait: bool = False     # looks like the default cs_change (udelay(10) + GPIO writes)

    @property
    def wide(self) -> bool:
        return self.log_sd > WIDE

    def shape(self) -> str:
        if self.wide:
            return "wide"
        if self.tail is None:
            return "unresolved"
        if self.spread <= TIGHT and self.tail <= SYMMETRIC:
            return "tight"
        if self.tail >= RIGHT_TAIL:
            return "right tail"
        return "plain"

    def as_dict(self, tick_s: float) -> dict:
        return {"n": self.n, "share": round(self.share, 4), "median_s": self.median * tick_s,
                "p10_s": self.p10 * tick_s, "p90_s": self.p90 * tick_s,
                "spread": round(self.spread, 4), "tail": None if self.tail is None else round(self.tail, 3),
                "shape": self.shape(), "busy_wait": self.busy_wait}


def stats(values: np.ndarray, total: int, tick_s: float | None, resolution: float) -> KindStats:
    v = np.asarray(values, float)
    if not len(v):
        return KindStats(0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, None)
    p10, p50, p90 = percentiles(v, [10, 50, 90])
    mad = float(median(np.abs(v - p50)))
    x = np.log(v + 1.0)
    lsd = 1.4826 * float(median(np.abs(x - median(x))))
    spread = 1.4826 * mad / max(p50, 1.0)
    # the shape needs a spread of several samples to be seen at all
    tail = (p90 - p50) / (p50 - p10) if (p50 - p10) >= 2 * resolution and (p90 - p50) >= resolution else None
    k = KindStats(len(v), len(v) / max(total, 1), float(p50), float(p10), float(p90), spread, lsd,
                  None if tail is None else float(tail))
    if tick_s and DEFAULT_CS_CHANGE_S[0] <= p50 * tick_s <= DEFAULT_CS_CHANGE_S[1]:
        # tight in samples too: 6 % of 10 µs is 0.6 µs; at a coarse sample rate, two samples
        k.busy_wait = spread <= max(TIGHT, 2.0 * resolution / max(p50, 1.0)) and (tail is None or tail <= SYMMETRIC)
    return k


def _break(x: np.ndarray) -> float | None:
    """The widest empty stretch of the sorted values ``x`` (ln gaps) that is wider
    than BREAK with at least BREAK_SHARE of them on each side: its midpoint."""
    n = len(x)
    if n < 20:
        return None
    s = np.sort(x)
    lo = int(np.ceil(BREAK_SHARE * n)) - 1
    hi = n - int(np.ceil(BREAK_SHARE * n))
    if hi <= lo:
        return None
    d = s[lo + 1:hi + 1] - s[lo:hi]
    j = int(np.argmax(d))
    if d[j] < BREAK:
        return None
    return 0.5 * (s[lo + j] + s[lo + j + 1])


@dataclasses.dataclass
class Kinds:
    labels: np.ndarray          # per gap of the window: kind 0.. (by length) or -1
    k: int
    note: str                   # the split's own words
    verdict: str                # the first split's verdict ("two", "unclear", "one", "cut")
    lower: int = 1              # kinds 0..lower-1 lie below the first split
    mixed: tuple = ()           # kinds that may hold two populations the rule cannot tell apart


def _two(values: np.ndarray, resolution: float):
    """split_two as the grouping uses it: a wide component holding more than stalls ever
    do is a population; overlapping candidates whose own fit misplaces < CLEAR_ERROR of
    the gaps are two. Returns (Split, labels 0/1/-1 or None, 'unclear' left over)."""
    sp = split(values, "log", resolution, wide_share=defs.SPLIT_MAX_OUTLIER)
    if sp.verdict == "unclear" and sp.expected_error <= CLEAR_ERROR:
        sp = copy.copy(sp)
        sp.verdict = "two"
        sp.note = sp.note.replace("not one population, but the two candidates overlap",
                                  "two populations of different spread").replace(": cannot tell",
                                                                                  f" (expected error {100 * sp.expected_error:.2g} %)")
    if sp.verdict == "two":
        return sp, classify(sp, values), False
    return sp, None, sp.verdict == "unclear"


def _core(g: np.ndarray, resolution: float) -> tuple[np.ndarray, str] | None:
    """A tight population (a busy-wait) inside a wide one around it (context switches
    that scatter across it): by length they are one, yet most of the wide one lies
    far off the tight core. Labels: 0 within 2.5 core SDs, 1 beyond 4, -1 between."""
    x = np.log(g + 1.0)
    n = len(x)
    if n < 4 * 5:
        return None
    mode = _half_sample_mode(np.sort(x))
    near = np.abs(x - mode) < 0.1
    if near.sum() < 0.2 * n:
        return None
    sd = max(1.4826 * float(median(np.abs(x[near] - median(x[near])))), _floor(mode, resolution))
    for _ in range(3):          # the core's own spread, without the halo
        inner = np.abs(x - mode) < 3 * sd
        if inner.sum() < 0.2 * n:
            return None
        mode = float(median(x[inner]))
        sd = max(1.4826 * float(median(np.abs(x[inner] - mode))), _floor(mode, resolution))
    z = np.abs(x - mode) / sd
    far = z > 4
    if far.sum() < max(5, defs.SPLIT_MIN_SHARE * n) or (z < 2.5).sum() < 0.2 * n:
        return None
    halo = x[far]
    if 1.4826 * float(median(np.abs(halo - median(halo)))) < 3 * sd:
        return None
    lab = np.full(n, -1, np.int8)
    lab[z < 2.5] = 0
    lab[far] = 1
    return lab, (f"a tight population ({np.exp(mode) - 1:.4g} samples, spread {100 * sd:.2g} %) and a wider "
                 f"one around it ({100 * far.mean():.0f} % of the gaps far off it)")


def _floor(m: float, resolution: float) -> float:
    return max(0.005, float(np.log1p(0.5 * resolution / max(np.exp(m), 1.0))))


def _half_sample_mode(s: np.ndarray) -> float:
    """The half-sample mode of sorted values (Bickel & Fruehwirth 2006): the densest half, halved again."""
    while len(s) > 3:
        h = (len(s) + 1) // 2
        w = s[h - 1:] - s[:len(s) - h + 1]
        j = int(np.argmin(w))
        s = s[j:j + h]
    return float(np.mean(s))


def find(g: np.ndarray, resolution: float) -> tuple[Kinds, object]:
    """The kinds of the gaps ``g`` (the window) and the first split (gapdefs.Split)."""
    sp, first, _ = _two(g, resolution)
    n = len(g)
    lab = np.full(n, -1, np.int8)
    groups: list[np.ndarray] = []
    verdict = sp.verdict
    note = sp.note
    mixed: list[int] = []
    if first is not None:
        groups = [first == 0, first == 1]
    else:
        cut = _break(np.log(g + 1.0))
        if cut is not None:
            hi = np.log(g + 1.0) > cut
            groups = [~hi, hi]
            verdict = "cut"
            note = (f"two groups with nothing between {np.exp(cut - BREAK / 2):.4g} and "
                    f"{np.exp(cut + BREAK / 2):.4g} samples ({int((~hi).sum())} / {int(hi.sum())})")
        else:
            core = _core(g, resolution)
            if core is None:
                return Kinds(lab, 0, note, verdict), sp
            lab, note = core
            # the core is kind 0 whatever the halo's median: readings name kinds by median
            return Kinds(lab, 2, note, "core", 1, ()), sp
    final: list[np.ndarray] = []
    subnotes = []
    lower = 1
    for gi, m in enumerate(groups):
        if gi == 1:
            lower = len(final)
        if int(m.sum()) >= MIN_REFINE:
            sub, sl, unclear = _two(g[m], resolution)
            if unclear:
                mixed.append(len(final))
            if sl is not None:
                lo_, hi_ = np.zeros(n, bool), np.zeros(n, bool)
                lo_[np.flatnonzero(m)[sl == 0]] = True
                hi_[np.flatnonzero(m)[sl == 1]] = True
                if min(int(lo_.sum()), int(hi_.sum())) >= 2 * MIN_REFINE // 3:
                    final += [lo_, hi_]
                    subnotes.append(sub.note)
                    continue
        final.append(m)
    for j, m in enumerate(final):
        lab[m] = j
    if subnotes:
        note += f"; {len(final)} kinds in all (" + "; ".join(subnotes) + ")"
    return Kinds(lab, len(final), note, verdict, lower, tuple(mixed)), sp
