"""The fast paths of the compiled core give the same results as the plain ones.

* the change scan's 16-samples-at-a-time path (unitsize 1) against a plain
  per-sample loop written here in numpy, on random data of every density,
  stopped early by small output capacities at random places;
* framing split into independently framed middles (parallel, in worker
  threads) with the boundary windows framed serially, against the serial
  compiled framer and the numpy framer, on random chunkings of the edge stream.

Oracles: the numpy change detection (analyzer/io/changes.py) and the numpy
framer (analyzer/core/framing.py) are independent implementations of the same
definitions; the serial compiled framer is the one tests/test_engines.py
checks against the numpy framer on real captures.
"""

from __future__ import annotations

import numpy as np
import pytest

from analyzer import native

pytestmark = pytest.mark.skipif(native.library() is None, reason=f"compiled core unavailable: {native.status()}")


def _scan_c(data: np.ndarray, unitsize: int, mask: np.ndarray, bits: list[int], prev: int, cap: int):
    """spigap_scan called directly, again and again with output room for ``cap``
    changes: (positions, compact values, final prev) over the whole buffer."""
    lib, ffi = native.library(), native.ffi()
    n = len(data) // unitsize
    bitpos = np.array(bits, np.int64)
    p = ffi.new("uint64_t *", prev)
    k = ffi.new("int64_t *")
    pos_parts, val_parts = [], []
    done = 0
    while done < n:
        pos = np.empty(cap, np.int64)
        val = np.empty(cap, np.uint32)
        k[0] = 0
        rest = np.ascontiguousarray(data[done * unitsize:])
        used = lib.spigap_scan(native.ptr(rest, "uint8_t *"), n - done, unitsize, native.ptr(mask, "uint8_t *"),
                               native.ptr(bitpos), len(bits), p, done, native.ptr(pos), native.ptr(val, "uint32_t *"),
                               cap, k)
        assert used > 0 or k[0] == cap
        pos_parts.append(pos[:k[0]])
        val_parts.append(val[:k[0]])
        done += used
    return np.concatenate(pos_parts), np.concatenate(val_parts), int(p[0])


def _scan_reference(data: np.ndarray, unitsize: int, mask: np.ndarray, bits: list[int], prev: int):
    n = len(data) // unitsize
    words = np.zeros(n, np.uint64)
    for b in range(unitsize):
        words |= (data[b:n * unitsize:unitsize] & mask[b]).astype(np.uint64) << np.uint64(8 * b)
    before = np.concatenate([[np.uint64(prev)], words[:-1]])
    pos = np.flatnonzero(words != before)
    vals = np.zeros(len(pos), np.uint32)
    for j, b in enumerate(bits):
        vals |= ((words[pos] >> np.uint64(b)) & np.uint64(1)).astype(np.uint32) << np.uint32(j)
    return pos, vals, int(words[-1]) if n else prev


@pytest.mark.parametrize("unitsize", [1, 2])
@pytest.mark.parametrize("seed", range(6))
def test_scan_matches_a_plain_loop(unitsize, seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3000))
    # runs of random length: from a change every sample to long idle stretches
    run = int(rng.choice([1, 2, 7, 40, 1000]))
    levels = rng.integers(0, 256, size=(n // run + 2, unitsize), dtype=np.uint8)
    data = np.repeat(levels, run, axis=0)[:n].ravel()
    noise = rng.random(data.shape) < 0.01                 # sprinkle single-sample glitches
    data = np.where(noise, rng.integers(0, 256, data.shape, dtype=np.uint8), data).astype(np.uint8)
    mask = rng.integers(0, 256, unitsize, dtype=np.uint8) | np.uint8(1)
    set_bits = [b for b in range(8 * unitsize) if (int(mask[b // 8]) >> (b % 8)) & 1]
    bits = list(rng.permutation(set_bits)[: int(rng.integers(1, len(set_bits) + 1))])
    mask = np.zeros(unitsize, np.uint8)
    for b in bits:
        mask[b // 8] |= np.uint8(1 << (b % 8))
    prev = int(rng.integers(0, 1 << (8 * unitsize))) & int.from_bytes(mask.tobytes(), "little")
    want = _scan_reference(data, unitsize, mask, bits, prev)
    for cap in (1, 2, 3, 17, 1 << 20):
        got = _scan_c(data, unitsize, mask, bits, prev, cap)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]), cap
        assert got[2] == want[2], cap
