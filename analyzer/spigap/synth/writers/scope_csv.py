"""Write tracks as oscilloscope CSV exports (analog voltages, one row per sample).

Dialects (header layouts as the instruments write them; see analyzer/spigap/io/scope_csv.py):

* ``pico``: PicoScope 6 ``Time,Channel A,...`` + units row ``(us),(V),...`` + blank line
* ``keysight``: Infiniium-style key/value header block (Revision, Type, Points,
  XInc, XOrg, ...) then InfiniiVision-style ``x-axis,1,2,...`` / ``second,Volt,...``
* ``rigol``: DS1000Z ``X,CH1,...,Start,Increment,`` / ``Sequence,Volt,...,<t0>,<dt>``
  then ``<index>,<v>,...,`` rows (3 significant digits)
* ``rs``: R&S RTM/RTB peak-detect export ``in s,C1 in V,...``: every acquisition
  interval (``decimate`` samples) is a min row and a max row with the same time
* ``plain``: ``time,<track names>`` in seconds
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from spigap.synth.srwriter import Track
from spigap.synth.writers import analog as render_analog

ROWS = 1 << 16


def native_names(dialect: str, n: int) -> list[str] | None:
    if dialect == "pico":
        return [f"Channel {chr(65 + j)}" for j in range(n)]
    if dialect == "keysight":
        return [str(j + 1) for j in range(n)]
    if dialect == "rigol":
        return [f"CH{j + 1}" for j in range(n)]
    if dialect == "rs":
        return [f"C{j + 1}" for j in range(n)]
    return None


def write_scope_csv(path, tracks: Sequence[Track], samplerate: float, n_samples: int, *,
                    dialect: str = "plain", use_track_names: bool = False, t0: float = 0.0,
                    v_high: float = 3.3, noise: float = 0.02, rise: int = 1, decimate: int = 2,
                    seed: int = 0, final_newline: bool = True) -> None:
    n = len(tracks)
    native = native_names(dialect, n)
    names = [t.name for t in tracks] if use_track_names or native is None else native
    dt = 1.0 / samplerate
    rng = np.random.default_rng(seed)
    with open(path, "w", newline="\n") as f:
        if dialect == "pico":
            f.write("Time," + ",".join(names) + "\n(us)," + ",".join(["(V)"] * n) + "\n\n")
        elif dialect == "keysight":
            block = [("Revision", "0"), ("Type", "raw"), ("Start", "0"), ("Points", str(n_samples)),
                     ("Count", "1"), ("XDispRange", f"{n_samples * dt:.6e}"), ("XDispOrg", f"{t0:.6e}"),
                     ("XInc", f"{dt:.9e}"), ("XOrg", f"{t0:.9e}"), ("XUnits", "second"),
                     ("YDispRange", "8.0"), ("YDispOrg", "1.65"), ("YInc", "1.0e-3"), ("YOrg", "0"),
                     ("YUnits", "volt"), ("Frame", "DSO-X 3034A:MY00000000"), ("Date", "01 JAN 2025"),
                     ("Time", "12:00:00:00"), ("Max bandwidth", "3.5e8"), ("Min bandwidth", "0")]
            f.write("".join(f"{k},{v}\n" for k, v in block))
            f.write("x-axis," + ",".join(names) + "\nsecond," + ",".join(["Volt"] * n) + "\n")
        elif dialect == "rigol":
            f.write("X," + ",".join(names) + ",Start,Increment,\n")
            f.write("Sequence," + ",".join(["Volt"] * n) + f",{t0:.6e},{dt:.6e}\n")
        elif dialect == "rs":
            f.write("in s," + ",".join(f"{nm} in V" for nm in names) + "\n")
        elif dialect == "plain":
            f.write("time," + ",".join(names) + "\n")
        else:
            raise ValueError(f"unknown dialect {dialect!r}")
        step = ROWS - ROWS % max(decimate, 1)
        for lo in range(0, n_samples, step):
            hi = min(n_samples, lo + step)
            v = np.stack([render_analog(t, lo, hi, v_high=v_high, noise=noise, rise=rise, rng=rng)
                          for t in tracks], axis=1)
            idx = np.arange(lo, hi)
            if dialect == "rs":
                k = max(decimate, 1)
                m = (hi - lo) // k * k
                if m == 0:
                    continue
                blocks = v[:m].reshape(-1, k, n)
                vmin, vmax = blocks.min(axis=1), blocks.max(axis=1)
                rows = np.empty((2 * len(vmin), n), np.float32)
                rows[0::2], rows[1::2] = vmin, vmax
                times = np.repeat(t0 + idx[:m:k] * dt, 2)
                cols = [np.char.mod("%.9e", times)] + [np.char.mod("%.4e", rows[:, j]) for j in range(n)]
            elif dialect == "pico":
                cols = [np.char.mod("%.6f", (t0 + idx * dt) * 1e6)] + [np.char.mod("%.5f", v[:, j])
                                                                      for j in range(n)]
            elif dialect == "keysight":
                cols = [np.char.mod("%.9e", t0 + idx * dt)] + [np.char.mod("%.5e", v[:, j]) for j in range(n)]
            elif dialect == "rigol":
                cols = [idx.astype("U20")] + [np.char.mod("%.2e", v[:, j]) for j in range(n)]
            else:
                cols = [np.char.mod("%.10g", t0 + idx * dt)] + [np.char.mod("%.5g", v[:, j]) for j in range(n)]
            body = cols[0]
            for c in cols[1:]:
                body = np.char.add(np.char.add(body, ","), c)
            if dialect == "rigol":
                body = np.char.add(body, ",")
            text = "\n".join(body.tolist())
            last = hi >= n_samples
            f.write(text + ("\n" if (final_newline or not last) else ""))
