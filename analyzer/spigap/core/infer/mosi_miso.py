"""Which data line is MOSI and which MISO: names first; the wires alone give only weak
evidence (a peripheral's output repeats its first word and is released after CS)."""

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
    if la is not None and lb is not None and max(la[0], lb[0]) >= WITH_EDGE and abs(la[0] - lb[0]) >= LAG_MARGIN:
        # one line switches in the very sample of the clock's edges, the other lags them: the
        # controller launches MOSI with SCLK; a peripheral's output follows after its delay
        (late, s_late), (early, s_early) = sorted(((data[0], la[0]), (data[1], lb[0])), key=lambda x: x[1])
        words = "" if margin < 0.05 else (", words agree" if late == miso else ", words disagree")
        mosi, miso = early, late
        basis = "two, lag" + words
        note = (f"{early} switches with SCLK's edges ({s_early:.0%} of its changes in the edge's very sample), "
                f"{late} lags them ({1 - s_late:.0%} a sample or more after), as a peripheral's output does")
        conf = 0.75
    elif margin < 0.05:
        # no evidence either way: channel order (MOSI is listed before MISO on most wirings)
        mosi, miso = sorted((mosi, miso), key=ev.names.index)
        conf, note, basis = 0.5, "the lines behave alike (a loopback?): MOSI taken as the first in channel order", \
            "two, alike"
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
    if rel >= 0.5:
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
    clk = bus.clk
    ci = ev.changes[clk]
    if len(ci) < bits:
        return np.empty(0, np.int64)
    leading = ev.level[clk][ci] != out.cpol
    sampling = ci[leading] if out.cpha == 0 else ci[~leading]
    st = ev.t[sampling]
    windowed = bus.cs is not None and bus.cs_active is not None
    if bus.cs is not None and bus.cs_active is not None:
        starts, ends = cs_windows(ev, bus.cs, bus.cs_active)
    else:
        starts, ends = bursts(ev, clk)
    first = np.searchsorted(st, starts, side="right")
    ok = first + bits <= len(st)
    if windowed:            # inside its CS window (bursts: from the burst's start on)
        ok &= st[np.minimum(first + bits - 1, len(st) - 1)] < ends
    idx = first[ok][:, None] + np.arange(bits)[None, :]
    vals = ev.level[line][sampling[idx]].astype(np.int64)
    return (vals << np.arange(bits - 1, -1, -1)[None, :]).sum(axis=1)
