"""DSView .dsl reader: DSView's own demo capture against the real sigrok-cli, and
small generated .dsl files against a plain unpacking of the documented layout.

The oracle for the demo: sigrok-cli cannot read .dsl, so ``dsl_to_sr`` below
converts the demo's samples to a sigrok .sr with nothing but ``zipfile`` and
``np.unpackbits`` (bit i of member ``L-<N>/<block>`` = sample i of that block,
the layout DSView's libsigrok4DSL reads, as the captures README describes it);
the real sigrok-cli ``spi`` decoder then decodes that file. spigap reads the
.dsl itself with its own reader. Agreement word for word checks the reader's
block streaming, sparse bit scan and block boundaries against a decoder we did
not write; the format interpretation they share (the bit order) is checked by
the README's independent figures (566 CS-low windows, 1698 MOSI words, first
MOSI words ``81 01 00 01 01 01 01 03 1C``, SCLK ~7.25 MHz). Converting and
decoding all 154,686,784 samples takes ~1 s + ~1.5 s (measured on the 2-core
reference machine), so the whole capture is compared, not a prefix.
"""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_fuzz_readers import RUNS, _check_stream, _inputs, _rezip, exercise, fuzz, mutated, zip_field_patch

from spigap.api import SpiConfig, analyze_device
from spigap.errors import CaptureTruncated
from spigap.io import open_capture
from spigap.io import dsl as dslmod
from conftest import real, run_sigrok

DEMO = "dsview__demo_spi.dsl"
DEMO_PROBES = ["miso", "mosi", "cs", "clk"]     # probe0..3 of the demo's header


def dsl_to_sr(src, dst, n_channels: int, names: list[str], rate_text: str) -> None:
    """The test's own conversion (see the module docstring)."""
    with zipfile.ZipFile(src) as z:
        hdr = z.read("header").decode()
        total = int(next(ln.split("=")[1] for ln in hdr.splitlines() if ln.startswith("total samples")))
        blocks = int(next(ln.split("=")[1] for ln in hdr.splitlines() if ln.startswith("total blocks")))
        with zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as out:
            out.writestr("version", "2")
            probes = "".join(f"probe{i + 1}={n}\n" for i, n in enumerate(names))
            out.writestr("metadata", f"[global]\nsigrok version=0.5.2\n\n[device 1]\ncapturefile=logic-1\n"
                                     f"total probes={n_channels}\nsamplerate={rate_text}\ntotal analog=0\n"
                                     f"{probes}unitsize=1\n")
            done = 0
            for b in range(blocks):
                bits = [np.unpackbits(np.frombuffer(z.read(f"L-{c}/{b}"), np.uint8), bitorder="little")
                        for c in range(n_channels)]
                n = min(min(len(x) for x in bits), total - done)
                s = np.zeros(n, np.uint8)
                for c in range(n_channels):
                    s |= bits[c][:n] << c
                out.writestr(f"logic-1-{b + 1}", s.tobytes())
                done += n


@pytest.fixture(scope="module")
def demo_sr(tmp_path_factory):
    p = tmp_path_factory.mktemp("dsl") / "demo.sr"
    dsl_to_sr(real(DEMO), p, 4, DEMO_PROBES, "40 MHz")
    return p


def test_demo_words_equal_sigrok_cli(sigrok_cli, demo_sr):
    a = analyze_device(real(DEMO), SpiConfig())
    assert a.cfg.clk == "clk" and a.cfg.mosi == "mosi" and a.cfg.miso == "miso" and a.cfg.cs == "cs"
    for line, ours in (("mosi", a.mosi), ("miso", a.miso)):
        out = run_sigrok(["-i", str(demo_sr), "-P", "spi:clk=clk:mosi=mosi:miso=miso:cs=cs",
                          "-A", f"spi={line}-data"], decoders_dir=None)
        theirs = np.array([int(x.split(": ")[1], 16) for x in out.splitlines() if x.strip()], np.uint64)
        assert len(ours) == len(theirs) > 0, (line, len(ours), len(theirs))
        assert np.array_equal(ours, theirs), f"{line} words differ"
    # the README's figures (captures/real/README.md, dsview__demo_spi.dsl)
    assert len(a.mosi) == 1698
    assert [int(w) for w in a.mosi[:9]] == [0x81, 0x01, 0x00, 0x01, 0x01, 0x01, 0x01, 0x03, 0x1C]


def test_demo_info_and_default_channel_map():
    with open_capture(real(DEMO)) as r:
        assert r.info.format == "DSView .dsl v2"
        assert r.info.samplerate_hz == 40e6 and r.info.n_ticks == 154_686_784
        assert r.info.channels[:4] == DEMO_PROBES
        assert r.info.spi_channels == {"clk": "clk", "mosi": "mosi", "miso": "miso", "cs": "cs"}
        assert any("DSView SPI decoder settings" in w for w in r.info.warnings)
        _check_stream(r, ["clk", "cs", "mosi", "miso"])
        assert r.end_tick == 154_686_784


# ------------------------------------------------------------ generated .dsl
def write_dsl(samples: np.ndarray, names: list[str], *, block_bytes: int, rate: str = "10 MHz",
              decoders=None, drop: tuple[str, ...] = (), extra_header: str = "") -> bytes:
    """samples: uint8[n_channels, n] of 0/1. Blocks of ``block_bytes`` packed bytes."""
    n_ch, n = samples.shape
    per = block_bytes * 8
    blocks = (n + per - 1) // per
    hdr = (f"[version]\nversion = 2\n[header]\ndriver = virtual-session\ncapturefile = data\n"
           f"total samples = {n}\ntotal probes = {n_ch}\ntotal blocks = {blocks}\nsamplerate = {rate}\n"
           + "".join(f"probe{i} = {nm}\n" for i, nm in enumerate(names)) + extra_header)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("header", hdr)
        if decoders is not None:
            z.writestr("decoders", json.dumps(decoders))
        for c in range(n_ch):
            for b in range(blocks):
                name = f"L-{c}/{b}"
                if name not in drop:
                    z.writestr(name, np.packbits(samples[c, b * per:(b + 1) * per], bitorder="little").tobytes())
    return buf.getvalue()


def reference_edges(samples: np.ndarray, order: list[int]):
    state = np.zeros(samples.shape[1], np.uint32)
    for j, c in enumerate(order):
        state |= samples[c].astype(np.uint32) << j
    chg = np.flatnonzero(np.diff(state)) + 1
    return np.concatenate([[0], chg]), np.concatenate([state[:1], state[chg]])


def _read(p, chans):
    with open_capture(p) as r:
        blocks = list(r.edges(chans))
    return np.concatenate([b.ticks for b in blocks]), np.concatenate([b.states for b in blocks])


@pytest.mark.parametrize("seed,n,block_bytes,scan", [(1, 5003, 64, 16), (2, 4096, 512, 1 << 18), (3, 777, 1, 3)])
def test_generated_dsl_equals_plain_unpacking(tmp_path, monkeypatch, seed, n, block_bytes, scan):
    """Random levels with runs (like real logic), block and scan boundaries anywhere,
    a total not a multiple of 8: the reader's edges equal a plain per-sample diff."""
    monkeypatch.setattr(dslmod, "SCAN_BYTES", scan)
    rng = np.random.default_rng(seed)
    flips = rng.random((4, n)) < rng.choice([0.02, 0.3, 0.9], size=(4, 1))
    samples = (np.cumsum(flips, axis=1) % 2).astype(np.uint8)
    p = tmp_path / "g.dsl"
    p.write_bytes(write_dsl(samples, ["a", "b", "c", "d"], block_bytes=block_bytes))
    for order in ([0, 1, 2, 3], [3, 1], [2]):
        t, s = _read(p, [["a", "b", "c", "d"][i] for i in order])
        rt, rs = reference_edges(samples, order)
        assert np.array_equal(t, rt) and np.array_equal(s, rs), order
    assert exercise(p, None) == "ok"


def test_decoders_member_gives_the_channel_map(tmp_path):
    """Channel names nothing auto-detects: DSView's SPI settings map them."""
    n = 4000
    i = np.arange(n)
    clk = ((i // 4) % 2).astype(np.uint8)
    cs = ((i < 100) | (i > 3900)).astype(np.uint8)
    mosi = ((i // 32) % 2).astype(np.uint8)
    samples = np.stack([cs, mosi, clk])
    dec = [{"id": "1:spi", "channel": [{"cs": 0}, {"mosi": 1}, {"clk": 2}], "options": {"cpol": 0}}]
    p = tmp_path / "m.dsl"
    p.write_bytes(write_dsl(samples, ["P0", "P1", "P2"], block_bytes=100, decoders=dec))
    a = analyze_device(p, SpiConfig())
    assert (a.cfg.clk, a.cfg.mosi, a.cfg.cs) == ("P2", "P1", "P0")
    # the user's own choice wins over the file's
    b = analyze_device(p, SpiConfig(clk="P2", mosi="P0", cs="P1"))
    assert (b.cfg.mosi, b.cfg.cs) == ("P0", "P1")


def test_missing_block_is_truncation_after_the_good_blocks(tmp_path):
    rng = np.random.default_rng(7)
    samples = (rng.random((2, 3000)) < 0.5).astype(np.uint8)
    p = tmp_path / "cut.dsl"
    p.write_bytes(write_dsl(samples, ["a", "b"], block_bytes=100, drop=("L-1/2",)))
    with open_capture(p) as r:
        got = []
        with pytest.raises(CaptureTruncated, match="L-1/2 is missing"):
            for b in r.edges(["a", "b"]):
                got.append(b)
        assert r.end_tick == 1600
    t = np.concatenate([b.ticks for b in got])
    rt, _ = reference_edges(samples, [0, 1])
    assert np.array_equal(t, rt[rt < 1600])


@pytest.mark.parametrize("cut", [300, 30000])
def test_cut_demo_says_what_to_do(tmp_path, capsys, cut):
    """DSView's demo cut short (a copy that stopped): inside its header (no L- member left) or
    before its first block: one line with what is wrong and, as the other readers, what to do."""
    from spigap.cli import main

    p = tmp_path / "cut.dsl"
    p.write_bytes(real(DEMO).read_bytes()[:cut])
    assert main(["analyze", str(p)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"spigap: error: {p}: "), err
    assert err.endswith("(the file is damaged or cut short: re-copy it, or re-save the capture with DSView)"), err


@RUNS
def test_fuzz_dsl(tmp_path, run_kind):
    """Damaged .dsl files (members mutated, zip fields patched, raw bytes): a valid
    stream or a one-line error, never a hang or a crash. Short and fixed-seed in the
    default run, long and random behind the ``fuzz`` marker (see test_fuzz_readers)."""
    rng = np.random.default_rng(11)
    samples = (np.cumsum(rng.random((3, 2000)) < 0.1, axis=1) % 2).astype(np.uint8)
    dec = [{"id": "1:spi", "channel": [{"clk": 0}, {"mosi": 1}, {"cs": 2}]}]
    seed = write_dsl(samples, ["a", "b", "c"], block_bytes=64, decoders=dec)
    with zipfile.ZipFile(io.BytesIO(seed)) as z:
        members = {i.filename: z.read(i.filename) for i in z.infolist()}

    @st.composite
    def member_mutation(draw):
        m = dict(members)
        name = draw(st.sampled_from(sorted(m)))
        m[name] = draw(mutated(m[name], "sr"))
        return _rezip(m)

    @fuzz(run_kind)
    @given(st.one_of(member_mutation(), zip_field_patch(seed), _inputs([seed], "sr")))
    def run(data):
        p = tmp_path / "f.dsl"
        p.write_bytes(data)
        exercise(p, None)
    run()
