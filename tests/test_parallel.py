"""The fast paths of the compiled core give the same results as the plain ones.

* the change scan's 16-samples-at-a-time path (unitsize 1) against a plain
  per-sample loop written here in numpy, on random data of every density,
  stopped early by small output capacities at random places;
* framing split into independently framed middles (parallel, in worker
  threads) with the boundary windows framed serially, against the serial
  compiled framer and the numpy framer, on random chunkings of the edge stream.

Oracles: the numpy change detection (analyzer/spigap/native/changes.py) and the numpy
framer (analyzer/spigap/core/framing.py) are independent implementations of the same
definitions; the serial compiled framer is the one tests/test_engines.py
checks against the numpy framer on real captures.
"""

from __future__ import annotations

import numpy as np
import pytest

from spigap import native
from spigap.io.base import EdgeBlock

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


# ------------------------------------------------------------------ framing

def _stream(rng, n, p_cs, clk_share):
    """A random edge stream: states (bit 0 SCLK, 1 CS, 2 MOSI, 3 MISO) that change at
    every entry, CS toggling with probability ``p_cs`` per entry, SCLK in most changes;
    clock edges outside CS, CS and SCLK in the same sample, idle stretches all occur."""
    ticks = np.cumsum(rng.choice([1, 1, 2, 3, 7, 14, 5000], size=n, p=[.3, .2, .2, .1, .1, .09, .01]))
    ticks = np.concatenate([[0], ticks]).astype(np.int64)
    flips = np.where(rng.random(n) < clk_share, 1, 0)
    flips |= np.where(rng.random(n) < p_cs, 2, 0)
    flips |= rng.integers(0, 4, n) << 2                 # data lines change now and then
    flips[flips == 0] = 1
    states = np.bitwise_xor.accumulate(np.concatenate([[rng.integers(0, 16)], flips])).astype(np.uint32)
    return ticks, states


def _chunks(rng, ticks, states):
    """The stream cut at random places: single entries, cuts right at CS edges, long blocks."""
    n = len(ticks)
    cuts = set(rng.integers(1, n, size=int(rng.integers(0, 12))).tolist())
    cs_edges = np.flatnonzero(np.diff(states & 2)) + 1
    if len(cs_edges):
        cuts |= set(rng.choice(cs_edges, size=min(3, len(cs_edges)), replace=False).tolist())
        cuts |= {int(c) + 1 for c in rng.choice(cs_edges, size=min(2, len(cs_edges)), replace=False) if c + 1 < n}
    edges = [0, *sorted(cuts), n]
    return [EdgeBlock(ticks[a:b], states[a:b]) for a, b in zip(edges[:-1], edges[1:]) if b > a]


def _columns(framed) -> dict:
    """A framer's batch (core/framed.Framed) as {"windows": {column: array}, "words": {...}}."""
    return {"windows": vars(framed.windows), "words": vars(framed.words)}


def _run(framer, blocks, take_every, lag=False, batches=None):
    outs = []
    for i, b in enumerate(blocks):
        framer.feed(b)
        if take_every and i % take_every == 0:
            outs.append(_columns(framer.take(lag=lag) if lag else framer.take()))
    end = int(blocks[-1].ticks[-1]) + 3
    outs.append(_columns(framer.finish(end)))
    if batches is not None:
        batches.extend(outs)
    merged = {part: {k: np.concatenate([o[part][k] for o in outs]) for k in outs[-1][part]}
              for part in ("windows", "words")}
    extra = (framer.clk_outside_cs, framer.first_clk_outside, framer.min_high, framer.min_low,
             framer.spacing.values.tolist(), framer.spacing.counts.tolist())
    return merged, extra


def _same(a, b):
    for part in ("windows", "words"):
        assert a[0][part].keys() == b[0][part].keys()
        for k in a[0][part]:
            assert np.array_equal(a[0][part][k], b[0][part][k]), (part, k)
    assert a[1] == b[1]


@pytest.mark.parametrize("seed", range(12))
def test_parallel_framing_equals_serial(seed, monkeypatch):
    from spigap.core import cframer
    from spigap.core.config import SpiConfig
    from spigap.core.framing import NumpyFramer

    rng = np.random.default_rng(seed)
    monkeypatch.setattr(cframer, "WORKERS", int(rng.integers(2, 5)))   # cut the middles 2-4 ways
    ws = int(rng.choice([1, 3, 8, 12, 64]))
    cfg = SpiConfig(cpol=int(rng.integers(0, 2)), cpha=int(rng.integers(0, 2)), wordsize=ws,
                    lsb_first=bool(rng.integers(0, 2)), cs_active_low=bool(rng.integers(0, 2)))
    bits = {"clk": 0, "cs": 1, "mosi": 2, "miso": 3}
    ticks, states = _stream(rng, int(rng.integers(2000, 20000)), float(rng.choice([0.002, 0.02, 0.2])),
                            float(rng.choice([0.6, 0.95])))
    blocks = _chunks(rng, ticks, states)
    take_every = int(rng.choice([0, 1, 3]))      # the in-memory path takes once; collect/monitor after every block

    serial = cframer.CFramer(cfg, bits, 1e-8)
    serial.par_min = 1 << 62
    want = _run(serial, [EdgeBlock(ticks, states)], 0)
    _same(want, _run(NumpyFramer(cfg, bits, 1e-8), blocks, take_every))            # the numpy oracle
    par = cframer.CFramer(cfg, bits, 1e-8)
    par.par_min = 1                               # every block's middle goes to the workers
    lag = bool(rng.integers(0, 2))                # collect takes the blocks before the latest
    got = _run(par, blocks, take_every, lag)
    _same(want, got)
    assert par._pool is None                      # finish() shut the workers down
    if len(want[0]["windows"]["start"]) > 4:
        assert par.n_parallel > 0, "no middle was framed in a worker"


# ------------------------------------------------------- a shared bus in one pass

def _bus_stream(rng, n: int, k: int):
    """An edge stream of a shared bus: SCLK (bit 0), MOSI, MISO (bits 2, 3), CS lines at bits 1,
    4, 5 (``k`` of them, each toggling now and then: windows of one device, handovers, two or
    three asserted at once, SCLK with none asserted, CS and SCLK in one sample)."""
    cs_bits = [1, 4, 5][:k]
    ticks = np.cumsum(rng.choice([1, 1, 2, 3, 7, 14, 5000], size=n, p=[.3, .2, .2, .1, .1, .09, .01]))
    ticks = np.concatenate([[0], ticks]).astype(np.int64)
    flips = np.where(rng.random(n) < 0.8, 1, 0) | (rng.integers(0, 4, n) << 2)
    for b in cs_bits:
        flips |= np.where(rng.random(n) < float(rng.choice([0.005, 0.03])), 1 << b, 0)
    flips[flips == 0] = 1
    states = np.bitwise_xor.accumulate(np.concatenate([[rng.integers(0, 64)], flips])).astype(np.uint32)
    return ticks, states, cs_bits


def _bus_run(framers, feed, blocks, take_every: int, lag: bool):
    """Every framer's merged output, figures and CS-change rows (the first framer's)."""
    outs = [[] for _ in framers]
    events = []
    for i, b in enumerate(blocks):
        feed(b)
        if take_every and i % take_every == 0:
            for k, f in enumerate(framers):
                outs[k].append(_columns(f.take(lag=lag) if lag else f.take()))
            events.append(np.asarray(framers[0].last_events).copy())
    end = int(blocks[-1].ticks[-1]) + 3
    for k, f in enumerate(framers):
        outs[k].append(_columns(f.finish(end)))
    events.append(np.asarray(framers[0].last_events).copy())
    res = []
    for k, f in enumerate(framers):
        merged = {part: {c: np.concatenate([o[part][c] for o in outs[k]]) for c in outs[k][-1][part]}
                  for part in ("windows", "words")}
        res.append((merged, (f.clk_outside_cs, f.first_clk_outside, f.min_high, f.min_low,
                             f.spacing.values.tolist(), f.spacing.counts.tolist())))
    ev = np.concatenate([e.reshape(-1, 2) for e in events])
    return res, ev[np.r_[True, np.any(ev[1:] != ev[:-1], axis=1)]] if len(ev) else ev


@pytest.mark.parametrize("seed", range(10))
def test_bus_framing_in_one_pass_equals_each_framer_alone(seed, monkeypatch):
    # cframer.CBusFramer (spigap_frame_bus: every device of a shared bus in one pass, middles
    # cut where no CS is asserted) against one framer per device fed every block (the numpy
    # framers, and the compiled ones), on random streams and chunkings;
    # some seeds with output buffers of a few rows, so every call stops at its capacity
    from spigap.core import cframer
    from spigap.core.config import SpiConfig
    from spigap.core.framing import NumpyFramer

    rng = np.random.default_rng(100 + seed)
    monkeypatch.setattr(cframer, "WORKERS", int(rng.integers(2, 5)))
    if seed % 3 == 0:
        monkeypatch.setattr(cframer._Out.__init__, "__defaults__", (3, 3, 2 * 64 + 2, 1))
    k = int(rng.integers(2, 4))
    ticks, states, cs_bits = _bus_stream(rng, int(rng.integers(3000, 20000)), k)
    cfgs = [SpiConfig(cpol=int(rng.integers(0, 2)), cpha=int(rng.integers(0, 2)),
                      wordsize=int(rng.choice([1, 3, 8, 12])), lsb_first=bool(rng.integers(0, 2)),
                      cs_active_low=bool(rng.integers(0, 2))) for _ in range(k)]
    bits = [{"clk": 0, "cs": b, "mosi": 2, "miso": 3} for b in cs_bits]
    act = [0 if c.cs_active_low else 1 for c in cfgs]
    ev_mask = sum(1 << b for b in cs_bits)
    bus = (ev_mask, ev_mask & ~(1 << cs_bits[0]), sum((1 - a) << b for a, b in zip(act[1:], cs_bits[1:])))
    blocks = _chunks(rng, ticks, states)
    take_every = int(rng.choice([1, 3]))
    lag = bool(rng.integers(0, 2))

    def each(make, blks):
        fr = [make(c, b, bus if j == 0 else (0, 0, 0)) for j, (c, b) in enumerate(zip(cfgs, bits))]

        def feed(block):
            for f in fr:
                f.feed(block)
        return _bus_run(fr, feed, blks, take_every, False)

    want = each(lambda c, b, bs: NumpyFramer(c, b, 1e-8, bus=bs), blocks)
    alone = each(lambda c, b, bs: cframer.CFramer(c, b, 1e-8, bus=bs), blocks)
    fr = [cframer.CFramer(c, b, 1e-8, bus=bus if j == 0 else (0, 0, 0)) for j, (c, b) in enumerate(zip(cfgs, bits))]
    group = cframer.CBusFramer(fr)
    group.par_min = 1                             # every block's middle goes to the workers
    got = _bus_run(fr, group.feed, blocks, take_every, lag)
    group.close()
    assert group._pool is None
    for have in (alone, got):
        for j in range(k):
            if j and have is got:   # the other devices' SCLK edges outside their CS are not counted (the bus's are)
                have[0][j] = (have[0][j][0], want[0][j][1][:2] + have[0][j][1][2:])
            _same(want[0][j], have[0][j])
        assert np.array_equal(want[1], have[1])
    if len(want[0][0][0]["windows"]["start"]) > 4:
        assert group.n_parallel > 0, "no middle was framed in a worker"


# ------------------------------------------------------- repeated .sr members

METADATA = """[global]
sigrok version=0.5.2

[device 1]
capturefile=logic-1
total probes=4
samplerate=1 MHz
total analog=0
probe1=SCLK
probe2=MOSI
probe3=MISO
probe4=CS
unitsize=1
"""


def _edges(path, channels=("SCLK", "CS", "MOSI", "MISO")):
    from spigap.io import open_capture

    with open_capture(path) as r:
        blocks = list(r.edges(list(channels)))
        end = r.end_tick
    return np.concatenate([b.ticks for b in blocks]), np.concatenate([b.states for b in blocks]), end


@pytest.mark.parametrize("max_changes", [1 << 16, 100])
def test_repeated_members_reuse_their_changes(tmp_path, monkeypatch, max_changes):
    """Members whose compressed bytes repeat (idle stretches, a steady clock) give the
    edges of reading every member on its own: the reuse moves the earlier member's
    changes; a repeat right after a different level gets the entry at its start."""
    import zipfile

    from spigap.io import sr as srmod

    size = 1 << 16
    idle = np.full(size, 0b1000, np.uint8)                             # CS high (inactive), rest low
    other = np.full(size, 0b0110, np.uint8)                            # another constant level
    clock = np.where((np.arange(size) // 3) % 2 == 1, 0b0001, 0).astype(np.uint8)  # SCLK, CS active
    noisy = np.random.default_rng(3).integers(0, 16, size, dtype=np.uint8)
    members = [idle, idle, idle, clock, clock, other, idle, clock, noisy, idle, clock, clock]
    path = tmp_path / "repeats.sr"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("version", "2")
        z.writestr("metadata", METADATA)
        for i, m in enumerate(members, 1):
            z.writestr(f"logic-1-{i}", m.tobytes())
    monkeypatch.setattr(srmod, "SAME_MAX_CHANGES", max_changes)
    reused = []
    real_same = srmod._Same

    def counting(*a):
        reused.append(a[2].name)
        return real_same(*a)

    monkeypatch.setattr(srmod, "_Same", counting)
    got = _edges(path)
    with monkeypatch.context() as m:
        m.setattr(srmod, "SAME_RATIO", 1 << 40)                       # nothing is remembered
        want = _edges(path)
        with native.use_engine("numpy"):                              # and the numpy scan
            want_np = _edges(path)
    for w in (want, want_np):
        assert np.array_equal(got[0], w[0]) and np.array_equal(got[1], w[1]) and got[2] == w[2]
    # idle repeats are always reused (whether the clock's are depends on whether its first
    # copy is still being read when a repeat comes: both ways give the same edges)
    assert {"logic-1-2", "logic-1-3", "logic-1-10"} <= set(reused)


@pytest.mark.parametrize("seed", range(3))
def test_parallel_framing_of_words_above_64_bits(seed, monkeypatch):
    """152-bit words are framed as chunk words and joined (core/bigwords.py): the
    parallel middles give the same words as the serial framer and the numpy one."""
    from spigap.core import cframer
    from spigap.core.config import SpiConfig
    from spigap.core.framing import make_framer

    rng = np.random.default_rng(100 + seed)
    monkeypatch.setattr(cframer, "WORKERS", 2)
    cfg = SpiConfig(wordsize=152, cpha=int(rng.integers(0, 2)), lsb_first=bool(rng.integers(0, 2)))
    bits = {"clk": 0, "cs": 1, "mosi": 2, "miso": 3}
    ticks, states = _stream(rng, 30000, 0.004, 0.97)         # windows of a few hundred clock edges
    blocks = _chunks(rng, ticks, states)
    results = []
    for par_min in (1 << 62, 1):
        fr = make_framer(cfg, bits, 1e-8)
        fr.inner.par_min = par_min
        results.append(_run(fr, blocks, 1))
        assert (fr.inner.n_parallel > 0) == (par_min == 1)
    with native.use_engine("numpy"):
        results.append(_run(make_framer(cfg, bits, 1e-8), blocks, 1))
    assert sum(results[0][0]["windows"]["n_words"]) > 10
    for r in results[1:]:
        for part in ("windows", "words"):
            for k in results[0][0][part]:
                assert list(results[0][0][part][k]) == list(r[0][part][k]), (part, k)
        assert r[1] == results[0][1]


@pytest.mark.parametrize("seed", range(4))
def test_lagged_take_hands_out_the_same_batches_one_call_later(seed, monkeypatch):
    """take(lag=True) after block k hands out what take() handed out after block k-1
    (core/collect.py measures it while the workers frame block k): the same batches
    whatever the threads' timing; finish() hands out the last two."""
    from spigap.core import cframer
    from spigap.core.config import SpiConfig

    rng = np.random.default_rng(200 + seed)
    monkeypatch.setattr(cframer, "WORKERS", 2)
    cfg = SpiConfig(wordsize=8)
    bits = {"clk": 0, "cs": 1, "mosi": 2, "miso": 3}
    ticks, states = _stream(rng, 40000, 0.02, 0.95)
    blocks = _chunks(rng, ticks, states)
    got = {}
    for lag in (False, True):
        fr = cframer.CFramer(cfg, bits, 1e-8)
        fr.par_min = 1
        got[lag] = []
        _run(fr, blocks, 1, lag, got[lag])
    plain, lagged = got[False], got[True]
    assert len(plain) == len(lagged) == len(blocks) + 1
    assert len(lagged[0]["windows"]["start"]) == 0                    # nothing before the first block
    expect = plain[:-2] + [{part: {k: np.concatenate([plain[-2][part][k], plain[-1][part][k]])
                                   for k in plain[-1][part]} for part in ("windows", "words")}]
    assert sum(len(b["windows"]["start"]) for b in plain) > 20
    for want, have in zip(expect, lagged[1:]):
        for part in ("windows", "words"):
            for k in want[part]:
                assert np.array_equal(want[part][k], have[part][k]), (part, k)
