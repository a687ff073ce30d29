"""Build and load the compiled core (spigap_core.c) with the system C compiler.

The library is compiled on first use into a cache directory
(``$SPIGAP_CACHE``, else ``$XDG_CACHE_HOME/spigap``, else ``~/.cache/spigap``)
under a name that hashes the source, so an edited source rebuilds and
concurrent processes never load a half-written file. Without a C compiler
the analyzer falls back to its numpy implementation (same results, slower):
``library()`` returns None and ``status()`` says why. ``SPIGAP_ENGINE=numpy``
forces the fallback. ``python -m analyzer.native`` builds it ahead of time.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import pathlib
import sys
import zlib

import numpy as np

SRC = pathlib.Path(__file__).with_name("spigap_core.c")
NSPACE = 64
WIN_COLS = 11

_lib = None
_status = "not loaded yet"
_forced: str | None = None

FRAMER_FIELDS = [
    "b_clk", "b_cs", "b_mosi", "b_miso", "ws", "cpha", "cpol", "samp_level", "active_level",
    "lsb_first", "has_cs", "idle_timeout", "prev", "open", "started", "w_start", "w_first", "w_last",
    "w_n_edges", "w_n_samp", "w_n_words", "w_min_half", "w_partial_start", "w_clk_ok", "w_last_samp",
    "cw", "c_first", "c_last", "c_prev_owned", "c_samp", "c_mosi", "c_miso", "c_min_high",
    "c_min_low", "c_last_samp", "c_n_space",
]


class Framer(ctypes.Structure):
    _fields_ = ([(name, ctypes.c_int64) for name in FRAMER_FIELDS]
                + [("c_space", ctypes.c_int64 * NSPACE)]
                + [(name, ctypes.c_int64) for name in ("last_clk", "clk_outside", "first_clk_outside",
                                                        "min_high", "min_low")])


_P64 = ctypes.POINTER(ctypes.c_int64)


class Out(ctypes.Structure):
    _fields_ = [("win", _P64), ("win_cap", ctypes.c_int64), ("n_win", ctypes.c_int64),
                ("word", _P64), ("word_cap", ctypes.c_int64), ("n_word", ctypes.c_int64),
                ("hist", _P64), ("hist_size", ctypes.c_int64),
                ("ovf", _P64), ("ovf_cap", ctypes.c_int64), ("n_ovf", ctypes.c_int64)]


def _cache_dir() -> pathlib.Path:
    if os.environ.get("SPIGAP_CACHE"):
        return pathlib.Path(os.environ["SPIGAP_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return pathlib.Path(base) / "spigap"


def _compiler() -> str | None:
    import shutil

    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")


def build(verbose: bool = False) -> pathlib.Path | None:
    """Compile the core if needed; return the path of the shared library or None."""
    global _status
    # the cache name changes with the source and the machine (a CRC is plenty to
    # tell versions apart, and zlib is loaded already: hashlib would cost an import)
    src = SRC.read_bytes()
    tag = f"{zlib.crc32(src + os.uname().machine.encode() + sys.platform.encode()):08x}-{len(src)}"
    cache = _cache_dir()
    so = cache / f"spigap_core-{tag}.so"
    if so.exists():
        return so
    cc = _compiler()
    if cc is None:
        _status = "no C compiler found (install gcc for the fast path); using numpy"
        return None
    import subprocess
    import tempfile

    try:
        cache.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=cache, suffix=".so.tmp")
        os.close(fd)
        cmd = [cc, "-O2", "-std=c99", "-shared", "-fPIC", "-o", tmp, str(SRC)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            os.unlink(tmp)
            _status = f"compiling the core failed ({' '.join(cmd)}): {proc.stderr.strip()[:300]}; using numpy"
            return None
        os.replace(tmp, so)            # atomic: other processes see all or nothing
    except OSError as e:
        _status = f"cannot build the core in {cache}: {e}; using numpy"
        return None
    if verbose:
        print(f"built {so}")
    return so


def library():
    """The loaded core, or None (numpy fallback). Cached per process."""
    global _lib, _status
    if _forced == "numpy":
        return None
    if _lib is not None:
        return _lib
    if os.environ.get("SPIGAP_ENGINE", "").lower() == "numpy":
        _status = "SPIGAP_ENGINE=numpy"
        return None
    so = build()
    if so is None:
        return None
    try:
        lib = ctypes.CDLL(str(so))
    except OSError as e:
        _status = f"cannot load {so}: {e}; using numpy"
        return None
    lib.spigap_scan.restype = ctypes.c_int64
    lib.spigap_scan.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p,
                                ctypes.c_void_p, ctypes.c_int64, ctypes.POINTER(ctypes.c_uint64),
                                ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                _P64]
    lib.spigap_frame_init.restype = None
    lib.spigap_frame_init.argtypes = [ctypes.POINTER(Framer), ctypes.c_int64]
    lib.spigap_frame.restype = ctypes.c_int64
    lib.spigap_frame.argtypes = [ctypes.POINTER(Framer), ctypes.POINTER(Out), ctypes.c_void_p,
                                 ctypes.c_void_p, ctypes.c_int64]
    lib.spigap_frame_finish.restype = None
    lib.spigap_frame_finish.argtypes = [ctypes.POINTER(Framer), ctypes.POINTER(Out), ctypes.c_int64]
    _lib = lib
    _status = f"compiled core {so.name}"
    return lib


@contextlib.contextmanager
def use_engine(name: str):
    """Temporarily force the numpy fallback (``"numpy"``) or the default (``"c"``)."""
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


def scan(buf, unitsize: int, masks: dict[int, int], bits: list[int], base: int = 0):
    """Changes of the wanted channels in one piece of raw samples (compiled).

    Same contract as analyzer.io.sr.scan_piece: sample numbers (``base`` = the
    piece's first sample) of the changes after the piece's first sample,
    compact states (bit j = requested channel j), first and last states."""
    from analyzer.io.changes import PieceChanges

    lib = library()
    a = np.frombuffer(buf, dtype=np.uint8)
    n = len(a) // unitsize
    if n == 0:
        return PieceChanges(np.empty(0, np.int64), np.empty(0, np.uint32), None, None, 0)
    mask = np.array([masks.get(b, 0) for b in range(unitsize)], np.uint8)
    m64 = int.from_bytes(mask.tobytes(), "little")
    bitpos = np.array(bits, np.int64)
    first_word = int.from_bytes(a[:unitsize].tobytes(), "little") & m64
    first = _compact_int(first_word, bits)
    prev = ctypes.c_uint64(first_word)
    parts_pos, parts_val = [], []
    done = 1
    while done < n:
        cap = min(n - done, max(1 << 16, (n - done) // 4))
        pos = np.empty(cap, np.int64)
        val = np.empty(cap, np.uint32)
        k = ctypes.c_int64(0)
        used = lib.spigap_scan(a[done * unitsize:].ctypes.data, n - done, unitsize, mask.ctypes.data,
                               bitpos.ctypes.data, len(bits), ctypes.byref(prev), base + done,
                               pos.ctypes.data, val.ctypes.data, cap, ctypes.byref(k))
        parts_pos.append(pos[:k.value])
        parts_val.append(val[:k.value])
        done += used
    pos = np.concatenate(parts_pos) if parts_pos else np.empty(0, np.int64)
    val = np.concatenate(parts_val) if parts_val else np.empty(0, np.uint32)
    last = int(val[-1]) if len(val) else first
    return PieceChanges(pos, val, first, last, n)


def _compact_int(word: int, bits: list[int]) -> int:
    return sum(((word >> b) & 1) << j for j, b in enumerate(bits))
