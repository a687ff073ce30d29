"""Vectorized change detection on sampled logic data (the analyzer's hot path).

Given the raw samples of one piece of a capture, return where the masked
channel bits change. No Python loop runs per sample or per edge.

Fast path (one byte holds every wanted channel): the masked bytes are viewed
as uint64 words, eight samples each. ``w ^ ((w << 8) | (prev >> 56))`` has a
non-zero byte exactly where a sample differs from the one before, so the full
scan runs on n/8 machine words and only words holding a change are expanded.
This is what lets a 1 G-sample, mostly idle capture be scanned at memory speed.
"""

from __future__ import annotations

import numpy as np

_BYTE_SPREAD = np.uint64(0x0101010101010101)


class PieceChanges:
    """Changes inside one piece: ``pos`` (sample numbers of the changes after the
    piece's first sample; relative to the piece for find_changes, absolute from
    the readers' scan_piece),
    ``values`` (masked state after the change), plus first and last state."""

    __slots__ = ("pos", "values", "first", "last", "n")

    def __init__(self, pos, values, first, last, n):
        self.pos, self.values, self.first, self.last, self.n = pos, values, first, last, n


def masked_states(raw: np.ndarray, unitsize: int, byte_masks: dict[int, int]) -> tuple[np.ndarray, int]:
    """Per-sample masked state in the smallest unsigned dtype that holds it.

    ``byte_masks`` maps byte index within a sample -> bit mask of wanted
    channels in that byte. Returns (states, base_bit): bit k of a state is
    bit ``base_bit + k`` of the sample word, so channel order can be restored
    later on the (few) edges only. When one byte holds every wanted channel
    the states stay uint8, which keeps the uint64 fast path below.
    """
    n = len(raw) // unitsize
    if n * unitsize != len(raw):
        raw = raw[: n * unitsize]
    used = sorted(byte_masks)
    if len(used) == 1:
        b = used[0]
        col = raw if unitsize == 1 else raw.reshape(n, unitsize)[:, b]
        return np.bitwise_and(col, np.uint8(byte_masks[b])), 8 * b
    lo, hi = used[0], used[-1]
    dtype = _dtype_for(8 * (hi - lo) + 8)
    grid = raw.reshape(n, unitsize)
    out = np.zeros(n, dtype=dtype)
    for b in used:  # at most unitsize (<= 8) passes, each vectorized over the piece
        out |= (grid[:, b] & np.uint8(byte_masks[b])).astype(dtype) << dtype(8 * (b - lo))
    return out, 8 * lo


def _dtype_for(bits: int):
    for dt in (np.uint8, np.uint16, np.uint32, np.uint64):
        if np.dtype(dt).itemsize * 8 >= bits:
            return dt
    raise ValueError(bits)


def find_changes(states: np.ndarray) -> PieceChanges:
    """Positions (> 0) where ``states[i] != states[i-1]`` and the new values."""
    n = len(states)
    if n == 0:
        return PieceChanges(np.empty(0, np.int64), states[:0], None, None, 0)
    if states.dtype == np.uint8 and n >= 64:
        pos = _changes_u8(states)
    else:
        pos = np.flatnonzero(states[1:] != states[:-1]) + 1
    return PieceChanges(pos.astype(np.int64, copy=False), states[pos], int(states[0]),
                        int(states[-1]), n)


def _changes_u8(s: np.ndarray) -> np.ndarray:
    n = len(s)
    head = n - n % 8
    w = s[:head].view(np.uint64) if s.flags.c_contiguous else np.ascontiguousarray(s[:head]).view(np.uint64)
    prev_last = np.empty_like(w)
    prev_last[0] = w[0] & np.uint64(0xFF)          # sample 0 compares with itself: no change
    np.right_shift(w[:-1], np.uint64(56), out=prev_last[1:])
    d = np.left_shift(w, np.uint64(8))
    d |= prev_last
    d ^= w
    words = np.flatnonzero(d)
    if len(words) > len(d) // 16:
        # dense data (a change in most words): expanding words costs more than
        # comparing the bytes directly
        return np.flatnonzero(s[1:] != s[:-1]) + 1
    if len(words):
        nz = d[words].view(np.uint8).reshape(-1, 8) != 0   # little-endian: byte j = sample 8i+j
        r, c = np.nonzero(nz)
        pos = words[r] * 8 + c
    else:
        pos = words
    if head < n:
        tail = np.flatnonzero(s[head - 1:-1] != s[head:]) + head
        pos = np.concatenate([pos, tail])
    return pos


def masks_for(bit_positions: list[int]) -> dict[int, int]:
    """byte index -> mask for channel bit positions (bit k of the sample word)."""
    masks: dict[int, int] = {}
    for bit in bit_positions:
        masks[bit // 8] = masks.get(bit // 8, 0) | (1 << (bit % 8))
    return masks


def compact(values: np.ndarray, bit_positions: list[int], base_bit: int = 0) -> np.ndarray:
    """Re-pack masked states so that bit j = channel j of the request.

    Runs on edges only (one vectorized pass per requested channel)."""
    out = np.zeros(len(values), dtype=np.uint32)
    v = values.astype(np.uint64, copy=False)
    for j, bit in enumerate(bit_positions):
        out |= (((v >> np.uint64(bit - base_bit)) & np.uint64(1)).astype(np.uint32)) << np.uint32(j)
    return out
