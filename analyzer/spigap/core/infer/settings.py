"""CS polarity, CPOL, CPHA and word size from the prefix (bit order cannot be seen on
the wires: MSB first unless given)."""

from __future__ import annotations

import numpy as np

from spigap.core.config import SpiConfig
from spigap.core.infer import calibration
from spigap.core.infer.evidence import (
    BRACKET,
    Evidence,
    bursts,
    clock_score,
    cs_level,
    cs_windows,
    gated,
    idle_level,
    in_cycle,
    in_windows,
    lead_trail,
)
from spigap.core.infer.report import Source
from spigap.core.settings_check import COMMON_WORDSIZES
from spigap.core.tickhist import median_of

def infer_settings(out: SpiConfig, cfg: SpiConfig, sources: dict[str, Source], ev: Evidence,
                    data_lines: list[str]) -> None:
    """CS polarity, CPOL, CPHA, word size and bit order where not given."""
    clk, cs = out.clk, out.cs
    have = clk in ev.level
    assert clk is not None
    if "cs_polarity" in cfg.infer:
        level = cs_level(ev, cs, clk, 1) if cs is not None and have and cs in ev.level else (None, 0.0, 0)
        if level[0] is not None:
            active, share, _ = level
            out.cs_active_low = active == 0
            sources["cs_polarity"] = Source("inferred", min(0.99, share if share >= BRACKET else 0.6),
                                            f"CS is {'low' if active == 0 else 'high'} at {share:.0%} of SCLK edges")
        else:
            edges = len(ev.changes[clk]) if have else 0
            # a CS whose one window holds part of the clock (the clock runs outside it too) has
            # edges at both levels: its level at them does not tell which one is active
            sources["cs_polarity"] = Source("default", 1.0 if cs is None else 0.5,
                                            "no CS line" if cs is None else "no SCLK edge in the prefix" if not edges
                                            else f"{cs}'s level at SCLK's {edges} edges in the prefix "
                                                 "does not tell which level is active")
    active = (0 if out.cs_active_low else 1) if cs is not None else None
    if "mode" in cfg.infer:
        if have and len(ev.changes[clk]) >= 4:
            idle = idle_level(ev, clk, cs if cs in ev.level else None, active)
            cpol = idle
            _, half = clock_score(ev, clk)
            lead = trail = 0
            for d in data_lines:
                if d not in ev.level:
                    continue
                ch = ev.changes[d]
                inside = in_windows(ev, ch, clk, cs if cs in ev.level else None, active, half)
                a, b = lead_trail(ev, clk, in_cycle(ev, ev.t[ch[inside]], clk, half)[0], idle)
                lead += a
                trail += b
            total = lead + trail
            valid = [gated(ev, d, clk) for d in data_lines if d in ev.level]
            if valid and len(set(valid)) == 1 and valid[0] is not None:
                # return-to-zero data (DATA = CLK and the bit): read at the edge into the level
                # the bits are valid at, in the very sample they appear
                v = valid[0]
                cpha = 0 if v != idle else 1
                sources["mode"] = Source("inferred", 0.9, f"CPOL {cpol}: SCLK idles {'high' if cpol else 'low'}; "
                                         f"the data lines return to {1 - v} with the clock (they hold each bit only "
                                         f"while SCLK is {'high' if v else 'low'}): read at its "
                                         f"{'rising' if v else 'falling'} edge, CPHA {cpha}", "gated")
            elif total >= 4:
                cpha = 1 if lead > trail else 0
                share = max(lead, trail) / total
                conf = share * min(1.0, total / 16)
                note = (f"CPOL {cpol}: SCLK idles {'high' if cpol else 'low'}; CPHA {cpha}: "
                        f"{max(lead, trail)} of {total} data changes follow the "
                        f"{'leading' if cpha else 'trailing'} clock edge")
                basis = ("split" if share < MODE_SPLIT else "mostly" if share < 0.95 else
                         "clear" if total >= 16 else "clear, few")
                if share < MODE_SPLIT:
                    # the edges disagree: both readings, and what tells them apart
                    conf = min(conf, 0.5)
                    note += _two_modes(out, ev, data_lines, cpol, cpha, min(lead, trail))
                sources["mode"] = Source("inferred", conf, note, basis)
            else:
                cpha, conf, note = _cpha_prior(out, ev, data_lines, cpol, cfg.cpha, total)
                sources["mode"] = Source("inferred", conf, note, calibration.NO_CPHA)
            out.cpol, out.cpha = cpol, cpha
        else:
            sources["mode"] = Source("default", 0.3, "too few SCLK edges to tell")
    if "wordsize" in cfg.infer:
        w, conf, note = _wordsize(ev, out, active)
        if w is not None:
            out.wordsize = w
            sources["wordsize"] = Source("inferred", conf, note)
        else:
            sources["wordsize"] = Source("default", 0.5, note)
    if "bitorder" in cfg.infer:
        sources["bitorder"] = Source("default", 0.9, "MSB first: the wires cannot tell bit order; "
                                     "give --bitorder lsb for LSB-first devices")


MODE_SPLIT = 0.8              # below this share of data changes on one edge, both modes are named


def _cpha_prior(out: SpiConfig, ev: Evidence, data_lines: list[str], cpol: int, default: int,
                changes: int) -> tuple[int, float, str]:
    """(CPHA, confidence, note) where the data lines hardly change: CPOL is read from the idle
    clock, CPHA cannot be; the CPHA devices idling so use more often, at the share that do
    (calibration.cpha_prior: measured on sigrok-dumps where the data settle it), else the
    default at 0.5. Either way the other mode is named with the option that settles it, and
    whether the two read the same words in the prefix (a line that does not change reads the
    same on either edge)."""
    idle = "low" if cpol == 0 else "high"
    prior = calibration.cpha_prior(cpol)
    seen = ("no data line changes in SCLK's cycles" if not changes else
            f"{changes} data change{' only' if changes == 1 else 's only'} in SCLK's cycles")
    if prior is None:
        cpha, conf = default, calibration.DEFAULT_ONLY
        why = f"CPHA {cpha} is the default: the signals cannot tell ({seen})"
    else:
        cpha, conf = prior
        why = (f"CPHA {cpha} is a prior, not evidence from this capture ({seen}): of the SPI devices idling "
               f"{idle} on sigrok-dumps whose data settle it, about {conf:.0%} use mode {2 * cpol + cpha}")
    other = 2 * cpol + 1 - cpha
    return cpha, conf, (f"CPOL {cpol} from the idle clock; {why}; or mode {other}"
                        f"{_words_differ(out, ev, data_lines, cpol, cpha)} (give --mode {other} if it is that one)")


def _two_modes(out: SpiConfig, ev: Evidence, data_lines: list[str], cpol: int, cpha: int, other_n: int) -> str:
    """'; or mode M (k changes follow the other edge): the two read MISO differently (0x12 0x34 vs
    0x24 0x68)': the rival reading of a mode the edges do not settle, and the data lines it
    decodes differently (a line driven on both edges, a Microwire part's MISO)."""
    other = 2 * cpol + (1 - cpha)
    return (f"; or mode {other}: {other_n} changes follow the "
            f"{'trailing' if cpha else 'leading'} edge{_words_differ(out, ev, data_lines, cpol, cpha)}; "
            f"give --mode {2 * cpol + cpha} or --mode {other}")


def _words_differ(out: SpiConfig, ev: Evidence, data_lines: list[str], cpol: int, cpha: int) -> str:
    """'; the two read MISO differently (0x12 0x34 vs 0x24 0x68)' or '; the two read the same words in
    the prefix': the data lines' first words read at either CPHA."""
    import dataclasses

    from spigap.core.infer.mosi_miso import first_words
    from spigap.core.infer.report import Bus

    cs = out.cs if out.cs in ev.level else None
    bus = Bus(out.clk or "", cs, list(data_lines), 0, (0 if out.cs_active_low else 1) if cs else None)
    differ = []
    for d in data_lines:
        if d not in ev.level:
            continue
        a = first_words(ev, d, dataclasses.replace(out, cpol=cpol, cpha=cpha), bus)[:3]
        b = first_words(ev, d, dataclasses.replace(out, cpol=cpol, cpha=1 - cpha), bus)[:3]
        if len(a) and len(b) and a.tolist() != b.tolist():
            differ.append(f"{d} ({' '.join(f'0x{int(x):02x}' for x in a)} vs {' '.join(f'0x{int(x):02x}' for x in b)})")
    return ("; the two read " + ", ".join(differ) + " differently" if differ
            else "; the two read the same words in the prefix")


def _wordsize(ev: Evidence, out: SpiConfig, active: int | None) -> tuple[int | None, float, str]:
    """Word size from the sampling edges per window and where the clock pauses inside them."""
    clk, cs = out.clk, out.cs
    assert clk is not None
    ci = ev.changes[clk]
    if len(ci) < 4:
        return None, 0.0, f"{out.wordsize} (default): too few SCLK edges"
    ct = ev.t[ci]
    leading = ev.level[clk][ci] != out.cpol          # one per clock cycle
    lt = ct[leading]
    if cs is not None and active is not None and cs in ev.level:
        starts, ends = cs_windows(ev, cs, active)
        # complete windows only (an assert and a deassert inside the prefix)
        ok = (starts > 0) & (ends < ev.end)
        starts, ends = starts[ok], ends[ok]
    else:
        starts, ends = bursts(ev, clk)
        starts, ends = starts[1:-1], ends[1:-1]      # the first and last burst may be cut
    if not len(starts):
        return None, 0.0, "no complete transfer in the prefix"
    a = np.searchsorted(lt, starts, side="right")
    b = np.searchsorted(lt, ends, side="left")
    bits = (b - a)
    bits = bits[bits > 0]
    if not len(bits):
        return None, 0.0, "no clock cycle inside the windows"
    g = int(np.gcd.reduce(bits))
    # pauses inside windows: bit counts before a clock cycle that starts late
    d = np.diff(lt)
    period = median_of(d) if len(d) else 0.0
    pause_at: list[int] = []
    if period > 0:
        late = np.flatnonzero(d > 1.5 * period + 1) + 1      # index of the late cycle
        w_of = np.searchsorted(starts, lt[late], side="right") - 1
        ok = (w_of >= 0) & (lt[late] < ends[np.clip(w_of, 0, len(ends) - 1)])
        if ok.any():
            first = a[np.clip(w_of[ok], 0, len(a) - 1)]
            pause_at = (late[ok] - first).tolist()
    if pause_at:
        pg = int(np.gcd.reduce(pause_at))
        if pg > 1 and g % pg == 0 and len(pause_at) >= 2:
            return min(pg, 1024), 0.95, f"the clock pauses every {pg} bits inside transfers"
    if g >= 1 and g % 8 == 0:
        fits = [w for w in COMMON_WORDSIZES if g % w == 0 and w != 8]
        conf = 0.9 if not fits else 0.7
        return 8, conf, (f"every transfer is {g} bits or a multiple" + (
            f"; {', '.join(map(str, fits))}-bit words fit too (give --wordsize)" if fits else ""))
    fits = [w for w in COMMON_WORDSIZES if g % w == 0]
    if fits:
        # transfers of several lengths narrow it to their common divisor; one length cannot
        # tell 3 x 12 from 4 x 9 bits: the largest usual size, said to be a choice
        w = fits[-1]
        alone = len(fits) == 1 and len(np.unique(bits)) > 1
        return w, 0.8 if alone else 0.5, (f"every transfer is a multiple of {g} bits" + (
            "" if len(fits) == 1 else f"; {', '.join(map(str, fits[:-1]))}-bit words fit too (give --wordsize)"))
    if 1 < g <= 64:
        return g, 0.5, f"every transfer is {g} bits or a multiple, no usual word size divides it"
    return None, 0.3, f"transfers of {', '.join(map(str, np.unique(bits)[:6].tolist()))} bits share no word size; {out.wordsize} (default)"
