"""Which data line is MOSI and which MISO: names first; the wires alone give weaker evidence
(a peripheral's output lags the clock's edge; the controller's first byte tells each transfer's
length; a peripheral's first word repeats and its output is released after CS)."""

from __future__ import annotations

import numpy as np

from spigap.core.config import SpiConfig
from spigap.core.infer.evidence import Evidence, bursts, cs_windows, half_of, in_cycle
from spigap.core.infer.report import Bus, Source

def assign_data(out: SpiConfig, bus: Bus, ev: Evidence, sources: dict[str, Source]) -> None:
    """MOSI and MISO among the bus's data lines: names first, then weak evidence."""
    data = [d for d in bus.data if d not in {out.mosi, out.miso, out.clk, out.cs}]
    open_roles = [r for r in ("mosi", "miso") if getattr(out, r) is None and r not in sources]
    if not open_roles or not data:
        return
    if len(open_roles) == 1:
        role = open_roles[0]
        setattr(out, role, data[0])
        sources[role] = Source("inferred", 0.9 if len(data) == 1 else 0.6,
                               "the other data line is named" + (
                                   "" if len(data) == 1 else f"; other candidates: {', '.join(data[1:])}"),
                               "other named" if len(data) == 1 else "other named, several")
        return
    bits = None
    if len(data) == 2:
        # the first word's length that tells the two lines apart best: with an unsure word
        # size, 8 bits of a 16-bit counter repeat as much as a peripheral's status byte
        bits = max((8, 16, 32), key=lambda k: abs(_repeat_share(ev, data[0], out, bus, k)
                                                  - _repeat_share(ev, data[1], out, bus, k)))
    scores = {d: _peripheral_score(ev, d, out, bus, bits) for d in data}
    if len(data) == 1:
        _one_line(out, bus, ev, sources, data[0])
        return
    ranked = sorted(data, key=lambda d: scores[d])
    mosi, miso = ranked[0], ranked[-1]
    margin = scores[miso] - scores[mosi]
    la, lb = launch(ev, data[0], bus.clk), launch(ev, data[1], bus.clk)
    if len(bus.wide) > 2:
        # a dual or quad SPI bus: every lane carries the controller's command or address and the
        # device's data in turn, so no rule measured on one-lane SPI (lag, length, words) tells a
        # direction; the convention of lines alike, at its level (no evidence)
        mosi, miso = sorted((mosi, miso), key=ev.names.index)
        conf, basis = 0.5, "two, wide"
        note = (f"a dual or quad SPI bus ({', '.join(bus.wide)}): each lane carries the controller's command and the "
                "device's data in turn, so the lines tell no direction: MOSI taken as the first in channel order "
                "(SPI flash: IO0 is MOSI and IO1 MISO in one-lane phases)")
    elif la is not None and lb is not None and max(la[0], lb[0]) >= WITH_EDGE and abs(la[0] - lb[0]) >= LAG_MARGIN:
        # one line switches in the very sample of the clock's edges, the other lags them: the
        # controller launches MOSI with SCLK; a peripheral's output follows after its delay
        (late, s_late), (early, s_early) = sorted(((data[0], la[0]), (data[1], lb[0])), key=lambda x: x[1])
        words = "" if margin < WORD_MARGIN else (", words agree" if late == miso else ", words disagree")
        mosi, miso = early, late
        basis = "two, lag" + words
        note = (f"{early} switches with SCLK's edges ({s_early:.0%} of its changes in the edge's very sample), "
                f"{late} lags them ({1 - s_late:.0%} a sample or more after), as a peripheral's output does")
        conf = 0.75
        if s_early >= WITH_EDGE and (lag_s := software_lag(ev, late, bus.clk)) is not None:
            # ... unless the lag is microseconds, set between the edges: no peripheral's output is
            # that slow; a controller setting MOSI in software is (a bit-banged host), and the
            # peripheral's hardware answers with the edge
            mosi, miso = late, early
            basis = "two, lag, bit-banged"
            note = (f"{late} changes {lag_s * 1e6:.1f} µs after SCLK's edges (between them), far longer than a "
                    f"peripheral's output delay: a controller setting its data in software (bit-banged); {early} "
                    f"switches with the edges ({s_early:.0%} in their very sample), as the peripheral's hardware does")
    elif (fit := _length_fits(ev, data, out, bus)) is not None:
        # the transfer's length follows one line's first byte: the controller's command, which
        # decides how many bytes the transfer has; the peripheral shifts its first byte out before it
        # has seen the command, so its first byte cannot tell how long the transfer will be
        (mosi, f_cmd), (miso, f_other) = fit
        conf, basis = 0.75, "two, length"
        note = (f"{mosi}'s first byte tells how long each transfer is ({f_cmd:.0%} of the windows have the length "
                f"the other windows with that first byte have; {f_other:.0%} for {miso}'s): a controller's command, "
                "which the peripheral cannot know while it shifts out its own first byte")
    elif margin < WORD_MARGIN:
        # no evidence either way: channel order (MOSI is listed before MISO on most wirings)
        mosi, miso = sorted((mosi, miso), key=ev.names.index)
        conf, note, basis = 0.5, "the lines behave alike (a loopback?): MOSI taken as the first in channel order", \
            "two, alike"
    elif _repeat_share(ev, mosi, out, bus, min(out.wordsize, 32)) >= POLLING and \
            _released(ev, miso, bus) < RELEASED:
        # the premise of the evidence fails: the controller does not vary its commands (the first
        # word of the line taken as MOSI repeats in half of the windows or more: it polls a register,
        # as the PixArt HERO's host and the ADXL345 axis capture do), so which first word repeats
        # more follows the data read (a status bit, a motion flag), not who drives the line: no
        # evidence, the convention of two lines alike (a line released after CS still counts)
        mosi, miso = sorted((mosi, miso), key=ev.names.index)
        conf, basis = 0.5, "two, both repeat"
        note = ("the first words of both lines mostly repeat (a controller polling one command: which repeats "
                "more then follows the data read, not who drives the line): MOSI taken as the first in channel order")
    else:
        conf = min(0.85, 0.5 + margin / 2)
        note = (f"weak evidence: {miso}'s first words repeat more or it is released after CS, as a "
                "peripheral's output does")
        basis = "two, " + ("clear" if margin >= 0.5 else "some")
    out.mosi, out.miso = mosi, miso
    sources["mosi"] = Source("inferred", conf, note, basis)
    sources["miso"] = Source("inferred", conf, note, basis)


WITH_EDGE = 0.9       # share of a line's changes in the very sample of a clock edge: launched with it
LAG_MARGIN = 0.05     # two lines: the later one lags in this much more of its changes
MID_PHASE = 0.25      # median delay after the edge, in half periods: set between edges (bit-banged)
WORD_MARGIN = 0.05    # two lines: one line's share (of windows) above the other's by this much tells them apart
POLLING = 0.5         # the line taken as MOSI repeats its first word in half of the windows or more: polling
RELEASED = 0.5        # share of CS deasserts a line changes right after: released by the peripheral
MIN_WINDOWS = 8       # windows a length fit needs (fewer say nothing of how first bytes and lengths go together)


BIT_BANG_S = 2e-6     # a lag no peripheral's clock-to-output delay reaches (data sheets: 10-200 ns; slow
#                       serial EEPROMs at low supply up to about 1 µs), a software loop's does (microseconds)
SPI_CLOCK_HZ = (1e3, 1e9)   # a stated sample rate that makes SCLK slower or faster is no time base to trust


def software_lag(ev: Evidence, line: str, clk: str) -> float | None:
    """Seconds ``line`` changes after SCLK's edges when that lag is a controller's software: set
    between the edges (MID_PHASE of a half period or more, median) and BIT_BANG_S or longer, on a
    time base that makes SCLK an SPI clock; None otherwise (or without a stated time base)."""
    lag = launch(ev, line, clk)
    if lag is None or ev.tick_s is None or lag[1] < MID_PHASE:
        return None
    half_s = max(1.0, half_of(ev, clk)) * ev.tick_s
    if not SPI_CLOCK_HZ[0] <= 1 / (2 * half_s) <= SPI_CLOCK_HZ[1]:
        return None
    lag_s = lag[1] * half_s
    return lag_s if lag_s >= BIT_BANG_S else None


def launch(ev: Evidence, line: str, clk: str) -> tuple[float, float] | None:
    """When ``line`` changes after SCLK's edges: (the share of its changes within a clock period of
    an edge that fall in the edge's very sample, their median delay in half periods), None with
    fewer than 8 such changes. A controller's MOSI is launched by the clock that makes SCLK (a few
    ns of skew: the same sample at any rate a logic analyzer samples SPI at); a peripheral's MISO
    follows its clock-to-output delay (10-100 ns), in the next sample as often as the sample
    period lets it show; a bit-banged controller sets its data between the edges."""
    half = max(1.0, half_of(ev, clk))
    _, off = in_cycle(ev, ev.ticks(line), clk, half)
    if len(off) < 8:
        return None
    return float(np.mean(off == 0)), float(np.median(off)) / half


def line_basis(ev: Evidence, line: str, bus: Bus, out: SpiConfig) -> tuple[str, str]:
    """(basis, note) of one data line's direction: the evidence ``_one_line`` states it on (and
    tests/sigrok_dumps_eval.py measures on every data line of the corpus)."""
    if bus.data_how in ("static", "few"):
        return bus.data_how, (
            f"{line} never changes in the prefix: a data line with nothing on it (the clock and its CS are the "
            "bus; which line carries data cannot be seen)" if bus.data_how == "static" else
            f"{line} changes too rarely to follow the clock's edges (weak evidence: it changes while the "
            "transfer runs)")
    rel = _released(ev, line, bus)
    if rel >= RELEASED:
        return "one, released", (f"one data line; it changes right after CS deasserts ({rel:.0%} of them), as a "
                                 "peripheral releasing its output does")
    lag = launch(ev, line, bus.clk)
    if lag is not None:
        same, delay = lag
        if delay >= MID_PHASE:
            return "one, between edges", (f"one data line; it changes between SCLK's edges ({delay:.2f} of a "
                                          "half period after them), as a bit-banged controller or a slow "
                                          "shift register does")
        if same >= WITH_EDGE:
            return "one, with the edge", (f"one data line; {same:.0%} of its changes fall in the very sample of "
                                          "an SCLK edge, as a controller launching MOSI with its clock does")
        return "one, after the edge", (f"one data line; {1 - same:.0%} of its changes lag SCLK's edges by a "
                                       "sample or more, as a peripheral's output delay does")
    return "one, few changes", (f"one data line; it changes too few times after SCLK's edges "
                                f"({len(ev.changes[line])} changes) to see whether it lags them")


def _one_line(out: SpiConfig, bus: Bus, ev: Evidence, sources: dict[str, Source], d: str) -> None:
    """One data line: MOSI or MISO by what its basis measured on sigrok-dumps
    (core/infer/calibration.py): the share of such lines that were the peripheral's output.
    Where that share is near one half, both readings are named and what settles it."""
    from spigap.core.infer import calibration

    basis, note = line_basis(ev, d, bus, out)
    measured = calibration.direction(basis)
    role, conf = measured if measured is not None else ("mosi", calibration.DEFAULT_ONLY)
    other = "mosi" if role == "miso" else "miso"
    if conf < 0.75:
        note += (f": two readings, {role.upper()} ({conf:.0%} of such lines) or {other.upper()}; taken as "
                 f"{role.upper()} (give --{other} {d} if it is the {'peripheral' if other == 'miso' else 'controller'}'s)")
    else:
        note += f": taken as {role.upper()} ({conf:.0%} of such lines are)"
    setattr(out, role, d)
    sources[role] = Source("inferred", conf, note, basis)
    sources[other] = Source("inferred", 0.9, "no second data line")


def _released(ev: Evidence, line: str, bus: Bus) -> float:
    """Share of CS deasserts followed within two half periods by a change of ``line`` (a
    peripheral releases its output); 0 without CS, and with a latch strobe for CS (LOAD: no
    select window, no output to release; the controller sets its next bit after the pulse)."""
    if bus.cs is None or bus.cs_active is None or bus.cs_how == "latch":
        return 0.0
    lt = ev.ticks(line)
    _, ends = cs_windows(ev, bus.cs, bus.cs_active)
    ends = ends[ends < ev.end]
    if not len(ends) or not len(lt):
        return 0.0
    j = np.searchsorted(lt, ends, side="right")
    after = lt[np.minimum(j, len(lt) - 1)] - ends
    return float(np.mean((j < len(lt)) & (after <= max(2.0, 2 * half_of(ev, bus.clk)))))


def _repeat_share(ev: Evidence, line: str, out: SpiConfig, bus: Bus, bits: int) -> float:
    """Share of windows whose first ``bits`` bits are the most common value (0.4 without windows)."""
    words = first_words(ev, line, out, bus, bits)
    return float(np.unique(words, return_counts=True)[1].max()) / len(words) if len(words) else 0.4


def _peripheral_score(ev: Evidence, line: str, out: SpiConfig, bus: Bus, bits: int | None = None) -> float:
    """Weak evidence that ``line`` is driven by the peripheral (MISO), about -0.4 .. 1.6:

    * its first word in each window mostly repeats (a peripheral answers the command
      word with a constant or a status byte; a controller sends varied commands):
      the share of windows with the most common first word, less 0.4;
    * it changes just after CS deasserts (the peripheral releases its output):
      the share of deasserts followed within two half periods by a change.

    On the shared real captures this orders every MOSI/MISO pair whose lines
    differ at all (docs/inference.md has the table)."""
    return _repeat_share(ev, line, out, bus, bits or min(out.wordsize, 32)) - 0.4 + _released(ev, line, bus)


def first_words(ev: Evidence, line: str, out: SpiConfig, bus: Bus, bits: int = 8) -> np.ndarray:
    """The first ``bits`` bits of ``line`` in each CS window (each burst without CS),
    read at the sampling edges of the inferred mode, MSB first."""
    return _first_and_length(ev, line, out, bus, bits)[0]


def _first_and_length(ev: Evidence, line: str, out: SpiConfig, bus: Bus,
                      bits: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """(the first ``bits`` bits of ``line``, the window's length in bits) of each CS window (each
    burst without CS) holding at least ``bits`` sampling edges, read at the sampling edges of the
    inferred mode, MSB first."""
    clk = bus.clk
    ci = ev.changes[clk]
    if len(ci) < bits:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    leading = ev.level[clk][ci] != out.cpol
    sampling = ci[leading] if out.cpha == 0 else ci[~leading]
    st = ev.t[sampling]
    windowed = bus.cs is not None and bus.cs_active is not None
    if bus.cs is not None and bus.cs_active is not None:
        starts, ends = cs_windows(ev, bus.cs, bus.cs_active)
    else:
        starts, ends = bursts(ev, clk)
    first = np.searchsorted(st, starts, side="right")
    length = np.searchsorted(st, ends, side="right") - first
    ok = first + bits <= len(st)
    if windowed:            # inside its CS window (bursts: from the burst's start on)
        ok &= st[np.minimum(first + bits - 1, len(st) - 1)] < ends
    idx = first[ok][:, None] + np.arange(bits)[None, :]
    vals = ev.level[line][sampling[idx]].astype(np.int64)
    return (vals << np.arange(bits - 1, -1, -1)[None, :]).sum(axis=1), length[ok]


def _length_fit(words: np.ndarray, length: np.ndarray) -> float:
    """Share of the windows whose length is the one the *other* windows with the same first word
    have most often (a first word no other window has: the length the other windows have most
    often; a tie: half a hit). A controller's command fixes the transfer's length (a register
    read of one byte, a burst of six, a flash command and its address); a first word that says
    nothing about it predicts the most common length, no better. Leaving each window out keeps a
    first word seen once (a counter, a sample) from predicting its own length."""
    rows = np.arange(len(words))
    _, w = np.unique(words, return_inverse=True)
    _, ln = np.unique(length, return_inverse=True)
    joint = np.zeros((int(w.max()) + 1, int(ln.max()) + 1), np.int64)
    np.add.at(joint, (w, ln), 1)
    others = joint[w]                                     # per window: the lengths of its first word's windows
    others[rows, ln] -= 1                                 # ... but itself
    alone = others.sum(axis=1) == 0
    others[alone] = joint.sum(axis=0)[None, :] - np.eye(joint.shape[1], dtype=np.int64)[ln[alone]]
    best = others.max(axis=1)
    ties = (others == best[:, None]).sum(axis=1)
    hit = np.where(others[rows, ln] == best, 1.0 / ties, 0.0)
    return float(hit.mean())


def _length_fits(ev: Evidence, data: list[str], out: SpiConfig,
                 bus: Bus) -> tuple[tuple[str, float], tuple[str, float]] | None:
    """((the line whose first byte fixes the windows' lengths, its fit), (the other, its fit)) of
    two data lines (``_length_fit``), or None where it does not tell them apart: fewer than
    MIN_WINDOWS windows, every window of one length, or fits within WORD_MARGIN of each other."""
    fits = []
    for d in data:
        words, length = _first_and_length(ev, d, out, bus, 8)
        if len(words) < MIN_WINDOWS or len(np.unique(length)) < 2:
            return None
        fits.append((d, _length_fit(words, length)))
    hi, lo = sorted(fits, key=lambda x: -x[1])
    return (hi, lo) if hi[1] - lo[1] >= WORD_MARGIN else None
