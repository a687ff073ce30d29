"""Write tracks as a VCD (scalar wires, or one vector holding all channels)."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from spigap.synth.srwriter import Track
from spigap.units import TIME_UNITS
from spigap.synth.writers import changes

_SLICE = 1 << 18          # value changes formatted at a time (bounded memory on long captures)

# VCD's timescale units, coarsest first (µs is spelled us in VCD)
_UNITS = [(u, s) for u, s in TIME_UNITS.items() if u != "µs"]


def timescale_for(samplerate: float) -> tuple[str, float, int]:
    """The coarsest VCD timescale (1/10/100 x unit) on which every sample falls:
    (text, seconds, time units per sample); 1 ps with rounding if none fits."""
    period = 1.0 / samplerate
    for unit, scale in _UNITS:
        for mult in (100, 10, 1):
            ts = mult * scale
            k = period / ts
            if k >= 1 and abs(k - round(k)) < 1e-9 * k:
                return f"{mult} {unit}", ts, int(round(k))
    return "1 ps", 1e-12, 0


def write_vcd(path, tracks: Sequence[Track], samplerate: float, n_samples: int, *, vector: bool = False,
              timescale: str | None = None, scope: str = "top", date: str = "synthesized by spigap",
              final_newline: bool = True) -> None:
    """Value changes of ``tracks`` at their exact sample times.

    ``vector=True`` declares one ``$var wire N # bus [N-1:0]`` whose bit j is
    track j (channels ``bus[j]``; vector values are written without leading
    zeros, as simulators do). The last timestamp is sample ``n_samples - 1``."""
    ts_text, ts_s, per = timescale_for(samplerate)
    if timescale is not None:
        num, unit = timescale.split()
        ts_text, ts_s = timescale, float(num) * dict(_UNITS)[unit]
        per = 0
    s, ch, lv, init = changes(tracks, n_samples)
    t = s * per if per else np.rint(s / samplerate / ts_s).astype(np.int64)
    t_end = (n_samples - 1) * per if per else int(round((n_samples - 1) / samplerate / ts_s))
    n = len(tracks)
    ids = [_ident(j) for j in range(n)]
    head = [f"$date {date} $end", "$version spigap synth writer $end", f"$timescale {ts_text} $end",
            f"$scope module {scope} $end"]
    if vector:
        head.append(f"$var wire {n} ! bus [{n - 1}:0] $end")
    else:
        head += [f"$var wire 1 {ids[j]} {tracks[j].name} $end" for j in range(n)]
    head += ["$upscope $end", "$enddefinitions $end", "#0", "$dumpvars"]
    if vector:
        head.append("b" + _bits(init) + " !")
    else:
        head += [f"{init[j]}{ids[j]}" for j in range(n)]
    head.append("$end")
    with open(path, "w", newline="\n") as f:
        f.write("\n".join(head) + "\n")
        if len(t):
            new_time = np.ones(len(t), bool)
            new_time[1:] = t[1:] != t[:-1]
            if vector:
                lines = _vector_lines(t, ch, lv, init, n)
                tt = np.unique(t)
                stamps = np.char.mod("#%d\n", tt)
                body = np.char.add(stamps, lines)
                f.write("\n".join(body.tolist()))
                f.write("\n")
            else:
                # in slices: numpy's fixed-width strings of a few million changes take GBs
                id_arr = np.array(ids, dtype="U8")
                for a in range(0, len(t), _SLICE):
                    b = min(len(t), a + _SLICE)
                    vals = np.char.add(lv[a:b].astype("U1"), id_arr[ch[a:b]])
                    stamps = np.where(new_time[a:b], np.char.mod("#%d\n", t[a:b]), "")
                    f.write("\n".join(np.char.add(stamps, vals).tolist()))
                    f.write("\n")
        if len(t) == 0 or t_end > t[-1]:
            f.write(f"#{t_end}" + ("\n" if final_newline else ""))


def _ident(j: int) -> str:
    chars = [chr(c) for c in range(33, 127)]
    out = ""
    j += 1
    while j:
        j, r = divmod(j - 1, len(chars))
        out = chars[r] + out
    return out


def _bits(levels_lsb_first) -> str:
    text = "".join(str(int(b)) for b in reversed(list(levels_lsb_first))).lstrip("0")
    return text or "0"


def _vector_lines(t, ch, lv, init, n):
    """One 'b<bits> !' line per distinct time (state after all its changes)."""
    cur = np.array(init, np.int64)
    weights = 1 << np.arange(n, dtype=np.int64)
    base = int((cur * weights).sum())
    # per channel forward fill of levels over the change list
    acc = np.full(len(t), base, np.int64)
    for j in range(n):
        m = np.flatnonzero(ch == j)
        pos = np.full(len(t), -1, np.int64)
        pos[m] = m
        np.maximum.accumulate(pos, out=pos)
        val = np.where(pos >= 0, lv[np.maximum(pos, 0)], cur[j]).astype(np.int64)
        acc = (acc & ~(1 << j)) | (val << j)
    last = np.ones(len(t), bool)
    last[:-1] = t[1:] != t[:-1]
    state = acc[last]
    bits = np.full(len(state), "", dtype=f"U{max(n, 1)}")
    for j in reversed(range(n)):          # MSB first; one pass per channel
        bits = np.char.add(bits, ((state >> j) & 1).astype("U1"))
    bits = np.char.lstrip(bits, "0")
    bits = np.where(bits == "", "0", bits)
    return np.char.add(np.char.add("b", bits), " !")
