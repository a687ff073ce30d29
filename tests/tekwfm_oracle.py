"""Tektronix .wfm files written at test time by tm_data_types (Tektronix's Apache-2.0 package),
and what it was given: the truth the reader tests compare with (tests/test_readers_tek_wfm.py).

tm_data_types runs in its own venv (`make oracles`; tests/oracles/requirements.txt says why),
found through SPIGAP_ORACLE_PYTHON or at .venv-oracles/ in the checkout. Each file is a
two-level signal (runs of 3 to 40 samples, a little noise) in one sample type, so its edges
are known sample by sample: the first sample of every run.

Two files are derived from tm_data_types' output by the test itself, because tm_data_types
0.5.0 cannot write them (tests/oracles/write_tek_wfm.py): version 1 (the version-2 file with
its 2-byte summary-frame field at byte 154 removed) and big-endian (tm_data_types writes the
header big-endian but the curve in the machine's byte order: the test swaps the curve bytes).
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import struct
import subprocess
import sys

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
WRITER = ROOT / "tests" / "oracles" / "write_tek_wfm.py"
ORACLE_ENV = "SPIGAP_ORACLE_PYTHON"

# raw low level, raw high level, noise (raw units) of each sample type tm_data_types writes
LEVELS = {"int8": (-100, 100, 3), "uint8": (30, 220, 3), "int16": (-20000, 20000, 300),
          "int32": (-1_000_000, 1_000_000, 15_000), "uint32": (1_000_000, 3_000_000, 15_000),
          "uint64": (1_000_000, 3_000_000, 15_000), "float32": (0.0, 3.3, 0.02), "float64": (0.0, 3.3, 0.02)}

# FastFrame: 5 frames of 1000 samples at 1 ns; frame k starts at tick FRAME_TICKS[k] (frame 2
# right after frame 1, frame 2 in the next GMT second)
FRAME_LEN = 1000
FRAME_TICKS = np.array([0, 2500, 3500, 254_500, 255_537])
GMT0, FRAC0 = 1_700_000_000, 0.999997


@dataclasses.dataclass
class Written:
    name: str
    path: pathlib.Path
    dtype: str
    bits: np.ndarray                # levels, (n,) or (frames, FRAME_LEN)
    raw: np.ndarray                 # the samples tm_data_types was given, same shape
    y_spacing: float
    y_offset: float
    x_spacing: float
    trigger_index: float
    version: int = 3
    pre: int = 0
    post: int = 0
    frame_ticks: np.ndarray | None = None
    big_endian: bool = False

    @property
    def fastframe(self) -> bool:
        return self.frame_ticks is not None

    def volts(self) -> np.ndarray:
        return self.raw.reshape(-1).astype(np.float64) * self.y_spacing + self.y_offset

    def edge_ticks(self) -> np.ndarray:
        """Ticks where the level changes (frames placed at their trigger ticks, levels held between)."""
        bits = self.bits.reshape(-1)
        if self.fastframe:
            assert self.frame_ticks is not None
            ticks = (self.frame_ticks[:, None] + np.arange(FRAME_LEN)[None, :]).reshape(-1)
        else:
            ticks = np.arange(len(bits))
        return ticks[1:][bits[1:] != bits[:-1]]


def oracle_python() -> str | None:
    p = os.environ.get(ORACLE_ENV) or str(ROOT / ".venv-oracles" / "bin" / "python")
    return p if os.access(p, os.X_OK) else None


def _signal(dtype: str, shape, rng) -> tuple[np.ndarray, np.ndarray, float, float]:
    lo, hi, noise = LEVELS[dtype]
    n = int(np.prod(shape))
    runs = rng.integers(3, 41, size=n)
    bits = (np.repeat(np.arange(len(runs)) % 2, runs)[:n]).reshape(shape)
    level = np.where(bits == 1, hi, lo)
    if dtype.startswith("float"):
        raw = (level + rng.uniform(-noise, noise, size=shape)).astype(dtype)
        return bits, raw, 1.0, 0.0
    raw = (level + rng.integers(-noise, noise + 1, size=shape)).astype(dtype)
    spacing = 3.3 / (hi - lo)
    return bits, raw, spacing, -lo * spacing


def _specs(out: pathlib.Path) -> list[Written]:
    rng = np.random.default_rng(23)
    files = []
    for dtype in LEVELS:
        bits, raw, sp, off = _signal(dtype, (4000,), rng)
        files.append(Written(dtype, out / f"{dtype}.wfm", dtype, bits, raw, sp, off, 2e-9, 1000))
    bits, raw, sp, off = _signal("int16", (4000,), rng)
    files.append(Written("v2_int16", out / "v2_int16.wfm", "int16", bits, raw, sp, off, 4e-10, 3000, version=2))
    for dtype, pre, version in (("int16", 32, 3), ("int8", 16, 3), ("int16", 32, 2)):
        bits, raw, sp, off = _signal(dtype, (len(FRAME_TICKS), FRAME_LEN), rng)
        name = f"ff_{dtype}" if version == 3 else f"ff_v{version}_{dtype}"
        files.append(Written(name, out / f"{name}.wfm", dtype, bits, raw, sp, off, 1e-9, 500,
                             version=version, pre=pre, post=pre, frame_ticks=FRAME_TICKS))
    for w in list(files):
        if w.name in ("int16", "ff_int16"):
            files.append(dataclasses.replace(w, name=f"be_{w.name}", path=out / f"be_{w.name}.wfm", big_endian=True))
    return files


def _timing(frame_ticks: np.ndarray, dt: float) -> list[list[float]]:
    out = []
    for k, tick in enumerate(frame_ticks):
        frac = FRAC0 + float(tick) * dt
        whole = int(np.floor(frac))
        out.append([0.25 * k, GMT0 + whole, frac - whole])
    return out


def write_all(out: pathlib.Path) -> dict[str, Written]:
    """Write every file with tm_data_types (one run of the oracles' interpreter), then make the
    version-1 file and the big-endian curves from its output."""
    py = oracle_python()
    assert py is not None
    files = _specs(out)
    spec = []
    for w in files:
        d = dict(path=str(w.path), dtype=w.dtype, samples=w.raw.tolist(), y_spacing=w.y_spacing,
                 y_offset=w.y_offset, x_spacing=w.x_spacing, trigger_index=w.trigger_index, version=w.version,
                 big_endian=w.big_endian)
        if w.fastframe:
            assert w.frame_ticks is not None
            d.update(timing=_timing(w.frame_ticks, w.x_spacing), precharge=w.pre, postcharge=w.post)
        spec.append(d)
    spec_path = out / "spec.json"
    spec_path.write_text(json.dumps(spec))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    r = subprocess.run([py, str(WRITER), str(spec_path)], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, f"tm_data_types failed:\n{r.stderr[-3000:]}"
    assert json.loads(r.stdout.splitlines()[-1])["tm_data_types"] == "0.5.0"
    by_name = {w.name: w for w in files}
    v2 = by_name["v2_int16"]
    by_name["v1_int16"] = dataclasses.replace(v2, name="v1_int16", path=out / "v1_int16.wfm", version=1)
    by_name["v1_int16"].path.write_bytes(to_version_1(v2.path.read_bytes()))
    for src in ("int16", "ff_int16"):
        w = by_name[f"be_{src}"]
        b = bytearray(w.path.read_bytes())
        assert b[:2] == b"\xf0\xf0"
        curve = struct.unpack_from(">i", b, 16)[0]
        item = np.dtype(w.dtype).itemsize
        frames = 1 if w.frame_ticks is None else len(w.frame_ticks)
        length = frames * (w.pre + w.raw.shape[-1] + w.post) * item
        assert curve + length <= len(b)
        b[curve:curve + length] = np.frombuffer(bytes(b[curve:curve + length]), "<" + w.raw.dtype.str[1:]).byteswap().tobytes()
        w.path.write_bytes(bytes(b))
    return by_name


def to_version_1(v2: bytes) -> bytes:
    """A version-2 file as version 1: without the summary-frame field (2 bytes at 154); the two
    absolute offsets before it (bytes to the end of file at 11, to the curve at 16) move by 2."""
    assert v2[:10] == b"\x0f\x0f:WFM#002"
    b = bytearray(v2[:154] + v2[156:])
    b[2:10] = b":WFM#001"
    struct.pack_into("<I", b, 11, struct.unpack_from("<I", b, 11)[0] - 2)
    struct.pack_into("<I", b, 16, struct.unpack_from("<I", b, 16)[0] - 2)
    return bytes(b)


def main() -> None:          # python tests/tekwfm_oracle.py DIR: write the files to look at them
    out = pathlib.Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for w in write_all(out).values():
        print(w.name, w.path)


if __name__ == "__main__":
    main()
