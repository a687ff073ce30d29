"""Differential test of the VCD tokenizer against pyvcd (a test-only dependency).

VCD files are written by pyvcd's ``VCDWriter`` (random, fixed seeds): scalar
wires with x/z values, vectors, real variables, ``$dumpoff``/``$dumpon``, and
in half of them identifiers replaced by long ones sharing a 40-byte prefix
(pyvcd's own identifier generator, prefixed: identifiers of equal length that
differ only in their last byte, the case the hash fast path once merged).
The expected edge stream comes from pyvcd's own ``tokenize``: per timestamp
the last value of every requested bit (1/h = 1, anything else 0, as spigap
documents), an entry where the levels change. spigap's reader must give the
same stream, with its chunk size shrunk so that tokens straddle chunks.
"""

from __future__ import annotations

import io

import numpy as np
import pytest

from vcd import reader as vreader     # pyvcd, of the [test] extra
from vcd import writer as vwriter

from spigap.io import open_capture
from spigap.io import vcd as vcdmod

PREFIX = "L" * 20 + "+-*/" * 5          # 40 printable bytes


def generate(seed: int, long_ids: bool, monkeypatch) -> tuple[str, list[tuple[str, str, int, int]]]:
    """A random VCD; returns its text and the requested bits: (channel name, id, size, bit)."""
    rng = np.random.default_rng(seed)
    if long_ids:
        orig = vwriter._encode_identifier
        monkeypatch.setattr(vwriter, "_encode_identifier", lambda n: PREFIX + orig(n))
    out = io.StringIO()
    w = vwriter.VCDWriter(out, timescale="1 ns", date="today")
    scalars = [w.register_var("top", f"s{i}", "wire", size=1, init=int(rng.integers(2))) for i in range(5)]
    vectors = [w.register_var("top", f"v{i}", "wire", size=int(s), init=0) for i, s in enumerate((4, 9))]
    real = w.register_var("top", "r", "real", init=0.0)
    t = 0
    dumping = True
    for _ in range(int(rng.integers(200, 400))):
        t += int(rng.integers(1, 50))
        if rng.random() < 0.02:
            if dumping:
                w.dump_off(t)
            else:
                w.dump_on(t)
            dumping = not dumping
            continue
        if not dumping:
            continue
        for _ in range(int(rng.integers(1, 4))):
            kind = rng.random()
            if kind < 0.6:
                v = scalars[int(rng.integers(len(scalars)))]
                w.change(v, t, str(rng.choice(["0", "1", "1", "0", "x", "z"])))
            elif kind < 0.9:
                v = vectors[int(rng.integers(len(vectors)))]
                w.change(v, t, int(rng.integers(0, 1 << v.size)))
            else:
                w.change(real, t, float(rng.normal()))
    w.close(t + 5)
    bits = [(f"s{i}", v.ident, 1, 0) for i, v in enumerate(scalars)]
    for i, v in enumerate(vectors):
        bits += [(f"v{i}[{b}]", v.ident, v.size, b) for b in (0, v.size - 1, v.size // 2)]
    return out.getvalue(), bits


def expected(text: str, bits) -> tuple[np.ndarray, np.ndarray]:
    """The edge stream, from pyvcd's tokenizer."""
    want: dict[str, list[tuple[int, int]]] = {}
    for j, (_, ident, _, bit) in enumerate(bits):
        want.setdefault(ident, []).append((j, bit))
    state = 0
    t0 = None
    times: list[int] = []
    states: list[int] = []
    for tok in vreader.tokenize(io.BytesIO(text.encode())):
        if tok.kind is vreader.TokenKind.CHANGE_TIME:
            if t0 is None:
                t0 = tok.data
            elif times and times[-1] == tok.data - t0:
                continue
            times.append(tok.data - t0)
            states.append(state)
            continue
        if tok.kind in (vreader.TokenKind.CHANGE_SCALAR, vreader.TokenKind.CHANGE_VECTOR):
            ch = tok.data
            for j, bit in want.get(ch.id_code, []):
                val = ch.value
                if isinstance(val, int):
                    level = (val >> bit) & 1
                else:
                    s = str(val)
                    level = 1 if (bit < len(s) and s[len(s) - 1 - bit] in "1hH") else 0
                state = (state & ~(1 << j)) | (level << j)
            if times:
                states[-1] = state
    t = np.array(times, np.int64)
    s = np.array(states, np.uint32)
    keep = np.ones(len(s), bool)
    keep[1:] = s[1:] != s[:-1]
    return t[keep], s[keep]


@pytest.mark.parametrize("seed,long_ids,chunk", [(1, False, 2 << 20), (2, True, 2 << 20), (3, True, 997),
                                                  (4, False, 1013), (5, True, 4096), (6, False, 333)])
def test_reader_agrees_with_pyvcd(tmp_path, monkeypatch, seed, long_ids, chunk):
    text, bits = generate(seed, long_ids, monkeypatch)
    if long_ids:
        assert PREFIX + "!" in text and PREFIX + '"' in text
    assert "$dumpoff" in text and "$dumpon" in text and "\nr" in text
    p = tmp_path / "g.vcd"
    p.write_text(text)
    monkeypatch.setattr(vcdmod, "CHUNK_BYTES", chunk)
    names = [b[0] for b in bits]
    with open_capture(p) as r:
        blocks = list(r.edges(names))
    got_t = np.concatenate([b.ticks for b in blocks])
    got_s = np.concatenate([b.states for b in blocks])
    exp_t, exp_s = expected(text, bits)
    assert np.array_equal(got_t, exp_t) and np.array_equal(got_s, exp_s)
