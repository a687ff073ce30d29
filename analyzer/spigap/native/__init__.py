"""The compiled core (spigap_core.c), built at install time by cffi.

setup.py compiles ``spigap.native._spigap_core`` from spigap_core.c and
spigap_core.h (analyzer/spigap/native/build.py says why cffi); nothing is compiled
or looked for at run time. When the module is absent (an sdist installed
without a C compiler) the analyzer runs on its numpy engine, which gives the
same results more slowly and stays the reference the tests compare the core
against; spigap says so once on stderr. ``SPIGAP_ENGINE=numpy`` forces the
numpy engine (quietly).
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any

import numpy as np

_mod: Any = None          # the cffi extension module (has .ffi and .lib) once loaded
_status = "not loaded yet"
_forced: str | None = None
_warned = False


def _load() -> Any:
    global _mod, _status, _warned
    if _mod is not None:
        return _mod
    try:
        from spigap.native import _spigap_core  # type: ignore[attr-defined]
    except ImportError as e:
        _status = f"compiled core not installed ({e}); using the numpy engine"
        if not _warned:
            _warned = True
            print("spigap: the compiled core is not installed (this copy was built without a C compiler); "
                  "using the numpy engine: same results, 2-4x slower. Reinstall with gcc present for "
                  "the compiled core.", file=sys.stderr)
        return None
    _mod = _spigap_core
    _status = f"compiled core {os.path.basename(_spigap_core.__file__)}"
    return _mod


def library() -> Any:
    """The compiled core's ``lib`` (cffi), or None for the numpy engine."""
    global _status
    if _forced == "numpy":
        return None
    if os.environ.get("SPIGAP_ENGINE", "").lower() == "numpy":
        _status = "SPIGAP_ENGINE=numpy"
        return None
    mod = _load()
    return None if mod is None else mod.lib


def ffi() -> Any:
    """The compiled core's cffi ``ffi`` (only valid when ``library()`` is not None)."""
    return _load().ffi


@contextlib.contextmanager
def use_engine(name: str):
    """Temporarily force the numpy engine (``"numpy"``) or the default (``"c"``)."""
    global _forced
    old, _forced = _forced, (None if name == "c" else name)
    try:
        yield
    finally:
        _forced = old


def status() -> str:
    library()
    return _status


def engine() -> str:
    return "c" if library() is not None else "numpy"


def ptr(a: np.ndarray, ctype: str = "int64_t *") -> Any:
    """A C pointer to a contiguous numpy array's data (the array must outlive its use)."""
    return ffi().cast(ctype, a.ctypes.data)


def scan(buf, unitsize: int, masks: dict[int, int], bits: list[int], base: int = 0):
    """Changes of the wanted channels in one piece of raw samples (compiled).

    Same contract as spigap.io.sr.scan_piece: sample numbers (``base`` = the
    piece's first sample) of the changes after the piece's first sample,
    compact states (bit j = requested channel j), first and last states."""
    from spigap.native.changes import PieceChanges

    lib = library()
    f = ffi()
    a = np.frombuffer(buf, dtype=np.uint8)
    n = len(a) // unitsize
    if n == 0:
        return PieceChanges(np.empty(0, np.int64), np.empty(0, np.uint32), None, None, 0)
    mask = np.array([masks.get(b, 0) for b in range(unitsize)], np.uint8)
    m64 = int.from_bytes(mask.tobytes(), "little")
    bitpos = np.array(bits, np.int64)
    first_word = int.from_bytes(a[:unitsize].tobytes(), "little") & m64
    first = _compact_int(first_word, bits)
    prev = f.new("uint64_t *", first_word)
    k = f.new("int64_t *")
    parts_pos, parts_val = [], []
    done = 1
    while done < n:
        cap = min(n - done, max(1 << 16, (n - done) // 4))
        pos = np.empty(cap, np.int64)
        val = np.empty(cap, np.uint32)
        k[0] = 0
        rest = a[done * unitsize:]
        used = lib.spigap_scan(ptr(rest, "uint8_t *"), n - done, unitsize, ptr(mask, "uint8_t *"),
                               ptr(bitpos), len(bits), prev, base + done,
                               ptr(pos), ptr(val, "uint32_t *"), cap, k)
        if done == 1 and used == n - done:
            # the whole piece in one call (the usual case): the buffers shrunk in place to
            # the changes found (realloc gives the tail back without copying the rest), so
            # neither a copy nor a buffer sized for many changes is handed on
            pos.resize(k[0], refcheck=False)
            val.resize(k[0], refcheck=False)
            parts_pos.append(pos)
            parts_val.append(val)
        else:
            parts_pos.append(pos[:k[0]])
            parts_val.append(val[:k[0]])
        done += used
    if len(parts_pos) == 1:
        pos, val = parts_pos[0], parts_val[0]
    else:
        pos = np.concatenate(parts_pos) if parts_pos else np.empty(0, np.int64)
        val = np.concatenate(parts_val) if parts_val else np.empty(0, np.uint32)
    last = int(val[-1]) if len(val) else first
    return PieceChanges(pos, val, first, last, n)


def _compact_int(word: int, bits: list[int]) -> int:
    return sum(((word >> b) & 1) << j for j, b in enumerate(bits))
