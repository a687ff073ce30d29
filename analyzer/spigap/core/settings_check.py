"""Given SPI settings checked against the signals: a wrong --mode, --cs-polarity
or --wordsize changes the numbers without failing, so it is called out.

Evidence, each from what the framer or a bounded prefix of the edge stream
already holds (no second pass over the capture):

* CPHA: data lines change on the *shifting* clock edge and are stable around
  the *sampling* edge. Each data change inside a CS window is attributed to
  its nearest clock edge; when most land on sampling edges, the other CPHA
  fits the signals.
* CPOL: SCLK sits at its idle level when CS is asserted (the framer's per
  transfer ``clk_ok``); when it mostly does not, the other CPOL fits.
* word size: the clock edges of complete transfers are a multiple of the word
  size; when most transfers leave trailing bits, the greatest common divisor
  of the bits per transfer is suggested.
* CS polarity: SCLK runs inside CS windows; when most SCLK edges fall while
  CS is "inactive", the other polarity fits.
* CS at all: a chip select brackets the clock's bursts, its edges fall where the
  clock is quiet; when most of the CS line's edges fall inside a running clock
  (SCLK edges closer than 3/4 of a period on both sides), it is no chip select
  (a data line named as CS): nothing else can be judged, and this comes first.

Each warning carries its cause (spigap/findings.py): the contradictions explain
the figures after them, so ``settings_first`` orders a device's warnings by it.

Rules are deliberately one-sided (a clear majority against the given setting,
enough evidence): a setting is only called out when the signals contradict
it, never merely because they are ambiguous.
"""

from __future__ import annotations

import math

import numpy as np

from spigap.findings import Cause, Finding, by_cause, cause_of

PREFIX_ENTRIES = 1 << 18     # edge-stream entries kept for the CPHA check (bounded memory)
MIN_CHANGES = 16             # data changes needed before CPHA is judged
MAJORITY = 0.8               # share of the evidence that must contradict the setting
MIN_TRANSFERS = 4
MIN_CS_EDGES = 8             # CS edges needed before "does not bracket the bursts" is judged
INSIDE_CLOCK = 0.75          # a CS edge with SCLK edges this many periods away on both sides cuts a burst
COMMON_WORDSIZES = (8, 9, 10, 12, 16, 24, 32, 40, 48, 64)
LAST_EDGE = "last bit lost at CS deassert"   # the warning's head (measure's trailing-bits line points to it)


class Prefix:
    """The first PREFIX_ENTRIES entries of an edge stream (ticks, states)."""

    def __init__(self, limit: int = PREFIX_ENTRIES):
        self.limit = limit
        self._t: list[np.ndarray] = []
        self._s: list[np.ndarray] = []
        self.n = 0

    def add(self, ticks: np.ndarray, states: np.ndarray) -> None:
        room = self.limit - self.n
        if room <= 0:
            return
        self._t.append(np.asarray(ticks[:room], np.int64))
        self._s.append(np.asarray(states[:room], np.uint32))
        self.n += min(room, len(ticks))

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        if not self._t:
            return np.empty(0, np.int64), np.empty(0, np.uint32)
        return np.concatenate(self._t), np.concatenate(self._s)


def _mode(cpol: int, cpha: int) -> int:
    return 2 * cpol + cpha


def cpha_evidence(t: np.ndarray, s: np.ndarray, bits: dict[str, int], sample_on_rising: bool,
                  cs_active_level: int | None) -> tuple[int, int, int]:
    """(data changes nearest a sampling edge, of those in the very sample of the
    edge, data changes nearest a shifting edge) inside CS windows of the prefix."""
    if len(t) < 3 or "clk" not in bits:
        return 0, 0, 0
    clk = (s >> np.uint32(bits["clk"])) & 1
    ce = np.flatnonzero(clk[1:] != clk[:-1]) + 1
    if len(ce) < 4:
        return 0, 0, 0
    ce_t = t[ce]
    sampling = (clk[ce] == 1) == sample_on_rising
    if "cs" in bits and cs_active_level is not None:
        active = ((s >> np.uint32(bits["cs"])) & 1) == cs_active_level
    else:
        active = np.ones(len(s), bool)
    bad = same = good = 0
    for role in ("mosi", "miso"):
        if role not in bits:
            continue
        d = (s >> np.uint32(bits[role])) & 1
        ch = np.flatnonzero((d[1:] != d[:-1]) & active[1:] & active[:-1]) + 1
        if not len(ch):
            continue
        td = t[ch]
        j = np.searchsorted(ce_t, td)               # first clock edge at or after the change
        prev = np.clip(j - 1, 0, len(ce_t) - 1)
        nxt = np.clip(j, 0, len(ce_t) - 1)
        use_next = np.abs(ce_t[nxt] - td) <= np.abs(td - ce_t[prev])
        nearest = np.where(use_next, nxt, prev)
        on_sampling = sampling[nearest]
        bad += int(on_sampling.sum())
        same += int((on_sampling & (ce_t[nearest] == td)).sum())
        good += int((~on_sampling).sum())
    return bad, same, good


def edges_at_deassert(t: np.ndarray, s: np.ndarray, bits: dict[str, int], cs_active_level: int | None) -> tuple[int, int]:
    """(CS deasserts, of them with an SCLK edge in the very same sample) in the prefix. Such an
    edge is outside the window by the same-sample rule (docs/gaps.md), as in sigrok's spi
    decoder: at a coarse sample rate with a short CS hold the last bit of a mode 1/3 transfer
    (its sampling edge is the last edge) is lost."""
    if len(t) < 2 or "clk" not in bits or "cs" not in bits or cs_active_level is None:
        return 0, 0
    cs = (s >> np.uint32(bits["cs"])) & 1
    clk = (s >> np.uint32(bits["clk"])) & 1
    d = np.flatnonzero((cs[1:] != cs[:-1]) & (cs[1:] != cs_active_level)) + 1
    if not len(d):
        return 0, 0
    return len(d), int(np.count_nonzero(clk[d] != clk[d - 1]))


def cs_edges_in_bursts(t: np.ndarray, s: np.ndarray, bits: dict[str, int]) -> tuple[int, int]:
    """(CS edges, of them inside a running clock) in the prefix: an SCLK edge no more than
    INSIDE_CLOCK SCLK periods before the CS edge (or in its very sample) and another as close
    after it. A chip select changes where the clock is quiet (its setup and hold, and the
    gap between transfers); a data line changes on the clock's shifting edges."""
    if len(t) < 2 or "clk" not in bits or "cs" not in bits:
        return 0, 0
    cs = (s >> np.uint32(bits["cs"])) & 1
    clk = (s >> np.uint32(bits["clk"])) & 1
    ce_t = t[np.flatnonzero(clk[1:] != clk[:-1]) + 1]
    cs_t = t[np.flatnonzero(cs[1:] != cs[:-1]) + 1]
    if len(ce_t) < 4 or not len(cs_t):
        return len(cs_t), 0
    half = float(np.median(np.diff(ce_t)))          # the clock's half period (most spacings are in bursts)
    reach = 2 * INSIDE_CLOCK * half
    j = np.searchsorted(ce_t, cs_t, side="right")    # first clock edge after the CS edge
    before = np.where(j > 0, cs_t - ce_t[np.clip(j - 1, 0, len(ce_t) - 1)], np.inf)
    after = np.where(j < len(ce_t), ce_t[np.clip(j, 0, len(ce_t) - 1)] - cs_t, np.inf)
    return len(cs_t), int(np.count_nonzero((before <= reach) & (after <= reach)))


class Evidence:
    """What the checks count over the transfers; adds up batch by batch (core/collect.py)."""

    def __init__(self, a=None, skip: int = 0):
        self.n = self.bits = self.complete = self.wrong_cpol = self.whole = self.trailing = self.gcd = 0
        if a is None or a.n <= skip:
            return
        complete = ~a.partial_start[skip:] & ~a.partial_end[skip:]
        self.n = a.n - skip
        self.bits = int(a.n_bits[skip:].sum())
        self.complete = int(complete.sum())
        self.wrong_cpol = int((~a.clk_ok[skip:] & complete).sum())
        nb = a.n_bits[skip:][complete].astype(np.int64)
        nb = nb[nb > 0]
        self.whole = len(nb)                                   # complete transfers with bits
        self.trailing = int((nb % a.cfg.wordsize != 0).sum())
        if len(nb):
            self.gcd = int(np.gcd.reduce(nb))

    def add(self, o: "Evidence") -> None:
        self.n += o.n
        self.bits += o.bits
        self.complete += o.complete
        self.wrong_cpol += o.wrong_cpol
        self.whole += o.whole
        self.trailing += o.trailing
        self.gcd = math.gcd(self.gcd, o.gcd)


def contradictions(a, prefix: Prefix, bits: dict[str, int], ev: Evidence | None = None) -> list[str]:
    """Warnings for given settings the signals contradict, each naming the
    setting that fits better. ``a``: the Analysis; ``bits``: role -> bit of the
    prefix's states; ``ev``: the transfers' evidence when ``a`` holds no arrays."""
    cfg = a.cfg
    out: list[str] = []
    ev = ev if ev is not None else Evidence(a)
    n_complete = ev.complete
    t, s = prefix.arrays()
    # a CS line at all: its edges where the clock is quiet
    if a.has_cs:
        n_cs, cut = cs_edges_in_bursts(t, s, bits)
        if n_cs >= MIN_CS_EDGES and cut >= MAJORITY * n_cs:
            unused = [c for c in a.info.channels if c not in cfg.stream_names()]
            where = f" (the capture's channels not in use: {', '.join(unused)})" if unused else ""
            outside = f"{a.clk_outside_cs} SCLK edges while CS was inactive, and " if a.clk_outside_cs else ""
            out.append(Finding(
                f"CS {cfg.cs} does not bracket the SCLK bursts: {outside}{cut} of {n_cs} of its edges in the "
                f"capture's start fall inside a running clock (SCLK edges within {INSIDE_CLOCK:g} of a period "
                f"before and after), as a data line's do; every figure below rests on windows that are not "
                f"transfers: name the chip select with --cs{where}, or leave --cs out and spigap finds the "
                f"line that brackets the bursts (spigap detect)", Cause.ROLES))
            return out      # the windows are not transfers: nothing else can be judged
    # CS polarity: SCLK should run inside the windows
    inside = 2 * ev.bits
    if a.has_cs and a.clk_outside_cs >= 16 and a.clk_outside_cs >= MAJORITY * (a.clk_outside_cs + inside):
        given, other = ("low", "high") if cfg.cs_active_low else ("high", "low")
        out.append(Finding(f"--cs-polarity {given} contradicts the signals: {a.clk_outside_cs} SCLK edges fall "
                           f"while CS is inactive and {inside} inside CS windows; --cs-polarity {other} fits them",
                           Cause.ROLES))
        return out          # the windows are the gaps: nothing else can be judged
    cpol, cpha = cfg.cpol, cfg.cpha
    # CPOL: SCLK at its idle level at CS assert
    if a.has_cs and n_complete >= MIN_TRANSFERS:
        if ev.wrong_cpol >= MAJORITY * n_complete:
            cpol = 1 - cfg.cpol
    # CPHA: data changes on the shifting edge
    active = (0 if cfg.cs_active_low else 1) if a.has_cs else None
    bad, same, good = cpha_evidence(t, s, bits, cfg.sample_on_rising if cpol == cfg.cpol else not cfg.sample_on_rising,
                              active)
    if bad + good >= MIN_CHANGES and bad >= MAJORITY * (bad + good):
        cpha = 1 - cfg.cpha
    if (cpol, cpha) != (cfg.cpol, cfg.cpha):
        why = []
        if cpol != cfg.cpol:
            why.append(f"SCLK is not at CPOL={cfg.cpol}'s idle level at CS assert in most transfers")
        if cpha != cfg.cpha:
            why.append(f"data changes at the sampling edge in {bad} of {bad + good} changes"
                       + (f", {same} of them in the very sample of the edge (the bits are read while the "
                          "lines switch)" if same else ""))
        out.append(Finding(f"--mode {_mode(cfg.cpol, cfg.cpha)} (CPOL={cfg.cpol} CPHA={cfg.cpha}) contradicts the "
                           f"signals ({'; '.join(why)}); --mode {_mode(cpol, cpha)} (CPOL={cpol} CPHA={cpha}) fits "
                           "them better", Cause.SETTINGS))
    # word size: complete transfers are whole words
    if n_complete >= MIN_TRANSFERS:
        trailing = ev.trailing
        n_d, at = edges_at_deassert(t, s, bits, active)
        if ev.whole >= MIN_TRANSFERS and trailing >= MAJORITY * ev.whole and n_d >= MIN_TRANSFERS \
                and at >= MAJORITY * n_d:
            # not a word size: the last edge and CS deassert share a sample (the last bit is outside)
            rate = 1.0 / a.tick_s if a.tick_s else None
            out.append(Finding(f"{LAST_EDGE}: the last SCLK edge falls in the very sample CS deasserts in {at} of {n_d} "
                       f"transfers of the capture's start, so by the same-sample rule (sigrok's spi decoder's too) "
                       f"it is outside the window and each transfer's last bit is lost ({trailing} of {ev.whole} "
                       f"end with bits that do not fill a {cfg.wordsize}-bit word); --wordsize {cfg.wordsize} is "
                       f"not what is wrong: sample faster"
                       + (f" than {rate / 1e6:.3g} MSa/s" if rate else "")
                       + " so that CS hold spans a sample, or read the last bit off the waveform", Cause.SAMPLING))
        elif ev.whole >= MIN_TRANSFERS and trailing >= MAJORITY * ev.whole:
            g = ev.gcd
            if g > 1 and g != cfg.wordsize:
                # the usual word sizes that divide every transfer, the smallest first (8 for byte streams)
                usual = [w for w in COMMON_WORDSIZES if g % w == 0]
                best = usual[0] if usual else g
                alt = f" (so does any divisor of {g})" if best != g else ""
                out.append(Finding(f"--wordsize {cfg.wordsize} contradicts the signals: {trailing} of {ev.whole} "
                                   f"complete transfers end with bits that do not fill a word, and every transfer's "
                                   f"clock count is a multiple of {g}; --wordsize {best} fits them{alt}",
                                   Cause.SETTINGS))
    return out


def settings_first(a, settled, prefix: Prefix, evidence: Evidence | None = None):
    """Put the settings' story at the top of ``a``'s warnings (``a``: an Analysis or a
    BoundedAnalysis): given settings the signals contradict, naming what fits
    (docs/gaps.md), an implausible time base, then what inference could not settle firmly
    (docs/inference.md), every warning ordered by what it explains (spigap/findings.py, the
    one rule); and record where each setting came from (``settled``: core/infer/'s Settled).
    ``setting_warnings`` are the text's CHECK lines above the table."""
    a.sources, a.buses = settled.sources, settled.buses
    timebase = [w for w in a.warnings if cause_of(w) == Cause.TIMEBASE]
    a.setting_warnings = by_cause(contradictions(a, prefix, a.cfg.stream_bits(), evidence) + timebase
                                  + settled.warnings)
    if any(w.startswith(LAST_EDGE) for w in a.setting_warnings):
        a.warnings = [Finding(w.replace("(check --wordsize)", f"(see '{LAST_EDGE}')"), cause_of(w))
                      for w in a.warnings]
    a.warnings = by_cause(a.setting_warnings + [w for w in a.warnings if w not in timebase])
    return a
