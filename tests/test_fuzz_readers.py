"""Fuzz every reader: damaged or random input gives a clear error, never a crash or a hang.

Each reader gets generated inputs:
small valid captures of its format, mutated (bytes flipped, inserted, deleted,
duplicated, cut; format tokens spliced in), plus raw random bytes. Every input
is opened and its whole edge stream read in-process, with a time bound per
call (``SPIGAP_FUZZ_TIME_BOUND``, default 5 s; a watchdog ends the process
should a call ever get stuck beyond recovery). Allowed outcomes: a valid edge
stream (checked against the interface contract), or a ``SpigapError`` whose
message names the file. Anything else, or a call over the time bound, fails
with the input that caused it.

Each reader has two runs of the same test:

* ``short`` (the default suite): ``SHORT_EXAMPLES`` inputs per reader, drawn by
  the "default" hypothesis profile (tests/conftest.py: ``derandomize``, the same
  inputs on every run: one commit, one verdict), a few seconds per reader;
* ``long`` (marker ``fuzz``, deselected by default; ``make fuzz``):
  ``SPIGAP_FUZZ_EXAMPLES`` inputs per reader (default 10000), random ones (the
  "fuzz" profile), a few minutes per reader on 2 cores; ``SPIGAP_FUZZ_SEED=N``
  repeats one run.
"""

from __future__ import annotations

import faulthandler
import io
import os
import signal
import struct
import sys
import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from spigap.core import run
from spigap.core.config import SpiConfig
from spigap.errors import CaptureTruncated, SpigapError
from spigap.io import check_stream, open_capture
from spigap.synth import Scenario, tracks
from spigap.synth.writers import write_capture

SHORT_EXAMPLES = 300
LONG_EXAMPLES = int(os.environ.get("SPIGAP_FUZZ_EXAMPLES", 10000))
_SEED = os.environ.get("SPIGAP_FUZZ_SEED")
TIME_BOUND_S = float(os.environ.get("SPIGAP_FUZZ_TIME_BOUND", "5"))

# the profiles of tests/conftest.py, whichever one the run loaded: the short run always
# draws the same inputs, the long one random ones (or SPIGAP_FUZZ_SEED's)
_RUNS = {
    "short": settings(settings.get_profile("default"), max_examples=SHORT_EXAMPLES,
                      suppress_health_check=list(HealthCheck)),
    "long": settings(settings.get_profile("fuzz"), max_examples=LONG_EXAMPLES),
}
RUNS = pytest.mark.parametrize("run_kind", [pytest.param("short"),
                                            pytest.param("long", marks=pytest.mark.fuzz)])


def fuzz(run_kind: str):
    """The settings of the short or the long run (decorates a @given test)."""
    def apply(test):
        test = _RUNS[run_kind](test)
        return seed(int(_SEED))(test) if run_kind == "long" and _SEED is not None else test
    return apply


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang(f"a reader call took longer than {TIME_BOUND_S} s")


def exercise(path, fmt, *, analyze: bool = True, **opts):
    """Open, read every edge, analyze; return the outcome. Fails on anything but
    a valid stream or a SpigapError naming the file."""
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, TIME_BOUND_S)
    # last resort: should the alarm land inside a lock and deadlock the process,
    # a watchdog thread dumps every thread's stack and ends the run
    faulthandler.dump_traceback_later(4 * TIME_BOUND_S + 10, exit=True)
    try:
        try:
            with open_capture(path, input_format=fmt, **opts) as r:
                chans = list(r.info.channels[:4])
                assert chans, "a reader returned no channels without an error"
                assert r.info.tick_s > 0 and np.isfinite(r.info.tick_s)
                _check_stream(r, chans)
                if analyze and len(chans) >= 2:
                    cfg = SpiConfig(clk=chans[0], cs=chans[1], mosi=chans[2] if len(chans) > 2 else None,
                                    miso=chans[3] if len(chans) > 3 else None)
                    run.analyze(r, cfg)
            return "ok"
        except SpigapError as e:
            text = str(e)
            assert str(path) in text, f"error does not name the file: {text!r}"
            assert "\n" not in text, f"error is not one line: {text!r}"
            return type(e).__name__
    finally:
        faulthandler.cancel_dump_traceback_later()
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _check_stream(r, chans):
    """Read the whole stream through the contract check (spigap.io.base.check_stream)."""
    try:
        for _ in check_stream(r.edges(chans), len(chans), path=r.info.path):
            pass
    except CaptureTruncated:
        assert r.end_tick is not None
        raise


# ------------------------------------------------------------------- seeds
def _tracks(**over):
    sc = Scenario.from_toml(None, dict({"messages": 2, "words_per_transfer": 2, "samplerate": 20e6,
                                        "sclk": 2e6, "lead": 2e-6, "tail": 2e-6}, **over))
    tl = sc.timeline()
    n = int(round(tl.end_time * sc.samplerate))
    return tracks(tl, sc.channels, sc.samplerate), sc.samplerate, n


@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    d = tmp_path_factory.mktemp("seeds")
    trs, rate, n = _tracks()
    out = {}
    for fmt, name in (("vcd", "a.vcd"), ("vcd-vector", "v.vcd"), ("csv-saleae", "s.csv"),
                      ("csv-dsview", "d.csv"), ("scope-pico", "p.csv"), ("scope-keysight", "k.csv"),
                      ("scope-rigol", "r.csv"), ("scope-rs", "rs.csv"), ("sr-analog", "a.sr"),
                      ("sr-mixed", "m.sr")):
        p = d / name
        write_capture(p, fmt, trs, rate, n)
        out[fmt] = p.read_bytes()
    for fmt, kw in (("sr", {"chunk_bytes": [300, 500]}), ("sr-single", {"single_member": True})):
        p = d / f"{fmt}.sr"
        write_capture(p, "sr", trs, rate, n, **kw)
        out[fmt] = p.read_bytes()
    # sigrok-cli -O csv's layout (libsigrok 0.5.2): comments, a 'logic' label row, one row per sample
    rows = [0] * 5 + [1, 1, 0, 0] * 10 + [3, 3, 2, 6, 7, 7]
    out["sigrok-csv"] = ("; CSV generated by libsigrok 0.5.2\n; Channels (3/16): CLK, CS, MOSI\n"
                         "; Samplerate: 1 MHz\nlogic,logic,logic\n"
                         + "".join(f"{v & 1},{v >> 1 & 1},{v >> 2 & 1}\n" for v in rows)).encode()
    for fmt in ("saleae-v0", "saleae-v1", "saleae-analog"):
        p = d / fmt
        write_capture(p, fmt, trs, rate, n, **({"gaps": [(n // 3, n // 3 + 5)]} if fmt == "saleae-v1" else {}))
        out[fmt] = {f: (p / f).read_bytes() for f in sorted(os.listdir(p))}
    return out


TOKENS = {
    "vcd": [b"#", b"#0", b"#99999999999999999999", b"$end", b"$comment", b"$dumpvars", b"$var wire 1 ! x $end",
            b"b", b"b1x0z ", b"r1.5 ", b"x!", b"1!", b"0\"", b"$enddefinitions", b"$timescale 1 ps $end",
            b"\n", b" ", b"$scope", b"$upscope", b"[3:0]", b"\x00", b"\xff"],
    "csv": [b",", b"\n", b"X", b"0", b"1", b"Time [s]", b"; Sample rate: 2 mHz\n", b"nan", b"inf", b"-1e308",
            b"1e999", b"\"", b"\r\n", b";", b"\t", b"\xe2\x88\x9e", b"(us)", b"Sequence", b"Start,Increment"],
    "bin": [b"<SALEAE>", b"\x00" * 8, b"\xff" * 8, b"\x7f\xf0\x00\x00\x00\x00\x00\x00",
            b"\x00\x00\x00\x00\x00\x00\xf8\x7f", b"\x01\x00\x00\x00", b"\xff\xff\xff\x7f"],
    "sr": [b"PK\x03\x04", b"PK\x01\x02", b"analog1=X\n", b"total analog=9\n", b"samplerate=0 Hz\n",
           b"samplerate=5 Hz\n", b"unitsize=9\n", b"probe1=\n", b"capturefile=logic-1\n", b"\x00"],
}


@st.composite
def mutated(draw, seed: bytes, kind: str):
    data = bytearray(seed)
    n_ops = draw(st.integers(1, 6))
    for _ in range(n_ops):
        op = draw(st.sampled_from(["flip", "ins", "del", "cut", "dup", "tok", "tok"]))
        pos = draw(st.integers(0, max(len(data), 1))) if data else 0
        if op == "flip" and data:
            i = min(pos, len(data) - 1)
            data[i] = draw(st.integers(0, 255))
        elif op == "ins":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=8))
        elif op == "del" and data:
            k = draw(st.integers(1, 64))
            del data[pos:pos + k]
        elif op == "cut":
            del data[pos:]
        elif op == "dup" and data:
            k = draw(st.integers(1, 128))
            data[pos:pos] = data[max(0, pos - k):pos]
        elif op == "tok":
            data[pos:pos] = draw(st.sampled_from(TOKENS[kind]))
    return bytes(data)


def _inputs(seeds_of, kind):
    return st.one_of(
        st.sampled_from(seeds_of).flatmap(lambda s: mutated(s, kind)),
        st.binary(max_size=256),
        st.lists(st.sampled_from(TOKENS[kind]), max_size=40).map(b"".join),
    )


# ------------------------------------------------------------------- tests
def _text_fuzz(tmp_path, data: bytes, name: str, fmt, sniff: bool):
    p = tmp_path / name
    p.write_bytes(data)
    exercise(p, None if sniff else fmt)


@RUNS
def test_fuzz_vcd(seeds, tmp_path, run_kind):
    @fuzz(run_kind)
    @given(_inputs([seeds["vcd"], seeds["vcd-vector"]], "vcd"), st.booleans())
    def run(data, sniff):
        _text_fuzz(tmp_path, data, "f.vcd", "vcd", sniff)
    run()


@RUNS
def test_fuzz_csv_changes(seeds, tmp_path, run_kind):
    @fuzz(run_kind)
    @given(_inputs([seeds["csv-saleae"], seeds["csv-dsview"]], "csv"), st.booleans())
    def run(data, sniff):
        _text_fuzz(tmp_path, data, "f.csv", "csv", sniff)
    run()


@RUNS
def test_fuzz_sigrok_csv(seeds, tmp_path, run_kind):
    @fuzz(run_kind)
    @given(_inputs([seeds["sigrok-csv"]], "csv"), st.booleans())
    def run(data, sniff):
        _text_fuzz(tmp_path, data, "f.csv", "sigrok-csv", sniff)
    run()


@RUNS
def test_fuzz_scope_csv(seeds, tmp_path, run_kind):
    @fuzz(run_kind)
    @given(_inputs([seeds["scope-pico"], seeds["scope-keysight"], seeds["scope-rigol"], seeds["scope-rs"]],
                   "csv"), st.booleans())
    def run(data, sniff):
        _text_fuzz(tmp_path, data, "f.csv", "scope-csv", sniff)
    run()


@RUNS
def test_fuzz_saleae(seeds, tmp_path, run_kind):
    folders = [seeds["saleae-v0"], seeds["saleae-v1"], seeds["saleae-analog"]]

    @fuzz(run_kind)
    @given(st.sampled_from(range(len(folders))).flatmap(
        lambda k: st.tuples(st.just(k), st.sampled_from(sorted(folders[k])),
                            _inputs([b for b in folders[k].values()], "bin"))), st.booleans())
    def run(case, one_file):
        k, victim, data = case
        d = tmp_path / "cap"
        if d.exists():
            for f in os.listdir(d):
                os.unlink(d / f)
        else:
            d.mkdir()
        for f, content in folders[k].items():
            (d / f).write_bytes(data if f == victim else content)
        exercise(d / victim if one_file else d, "saleae" if not one_file else None)
    run()


def _rezip(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for k, v in members.items():
            zf.writestr(k, v)
    return buf.getvalue()


@RUNS
def test_fuzz_sr_analog(seeds, tmp_path, run_kind):
    zips = [seeds["sr-analog"], seeds["sr-mixed"]]
    parsed = []
    for z in zips:
        with zipfile.ZipFile(io.BytesIO(z)) as zf:
            parsed.append({i.filename: zf.read(i.filename) for i in zf.infolist()})

    @st.composite
    def member_mutation(draw):
        members = dict(draw(st.sampled_from(parsed)))
        name = draw(st.sampled_from(sorted(members)))
        members[name] = draw(mutated(members[name], "sr"))
        if draw(st.booleans()):
            members.pop(draw(st.sampled_from(sorted(members))), None)
        return _rezip(members)

    @fuzz(run_kind)
    @given(st.one_of(member_mutation(), _inputs(zips, "sr")))
    def run(data):
        p = tmp_path / "f.sr"
        p.write_bytes(data)
        exercise(p, None)
    run()


# zip structure fields a damaged .sr may carry: (record signature, offset, struct format)
ZIP_FIELDS = [(b"PK\x01\x02", 20, "<I"), (b"PK\x01\x02", 24, "<I"), (b"PK\x01\x02", 28, "<H"),
              (b"PK\x01\x02", 30, "<H"), (b"PK\x01\x02", 42, "<I"), (b"PK\x03\x04", 18, "<I"),
              (b"PK\x03\x04", 22, "<I"), (b"PK\x03\x04", 26, "<H"), (b"PK\x03\x04", 28, "<H"),
              (b"PK\x03\x04", 8, "<H"), (b"PK\x05\x06", 16, "<I"), (b"PK\x05\x06", 10, "<H")]


@st.composite
def zip_field_patch(draw, data: bytes):
    """Set one size/offset/count field of one zip record to an awkward value."""
    buf = bytearray(data)
    for _ in range(draw(st.integers(1, 3))):
        sig, off, fmt = draw(st.sampled_from(ZIP_FIELDS))
        places = [i for i in range(len(buf)) if buf.startswith(sig, i)]
        if not places:
            continue
        at = draw(st.sampled_from(places)) + off
        big = 0xFFFF if fmt == "<H" else 0xFFFFFFFF
        value = draw(st.one_of(st.sampled_from([0, 1, 8, big, big - 1, len(buf), len(buf) - at]),
                               st.integers(0, big)))
        if at + struct.calcsize(fmt) <= len(buf):
            struct.pack_into(fmt, buf, at, max(0, min(value, big)))
    return bytes(buf)


@RUNS
def test_fuzz_sr_logic(seeds, tmp_path, run_kind):
    """Logic .sr files: member contents mutated, zip fields (sizes, offsets, name and
    extra lengths) patched, raw bytes mutated. Found the streaming loop on a member
    whose data lies past the end of the file."""
    zips = [seeds["sr"], seeds["sr-single"]]
    parsed = []
    for z in zips:
        with zipfile.ZipFile(io.BytesIO(z)) as zf:
            parsed.append({i.filename: zf.read(i.filename) for i in zf.infolist()})

    @st.composite
    def member_mutation(draw):
        members = dict(draw(st.sampled_from(parsed)))
        name = draw(st.sampled_from(sorted(members)))
        members[name] = draw(mutated(members[name], "sr"))
        return _rezip(members)

    @fuzz(run_kind)
    @given(st.one_of(member_mutation(), st.sampled_from(zips).flatmap(zip_field_patch), _inputs(zips, "sr")))
    def run(data):
        p = tmp_path / "f.sr"
        p.write_bytes(data)
        exercise(p, None)
    run()


# a handful of fixed cases that must come out a particular way
def test_exercise_accepts_valid_seeds(seeds, tmp_path):
    for fmt in ("vcd", "vcd-vector", "csv-saleae", "csv-dsview", "scope-pico", "scope-keysight", "scope-rigol",
                "scope-rs", "sr-analog", "sr-mixed", "sr", "sr-single", "sigrok-csv"):
        p = tmp_path / ("x.vcd" if fmt.startswith("vcd") else "x.sr" if fmt.startswith("sr") else "x.csv")
        p.write_bytes(seeds[fmt])
        assert exercise(p, None) == "ok", fmt
    for fmt in ("saleae-v0", "saleae-v1", "saleae-analog"):
        d = tmp_path / fmt
        d.mkdir()
        for f, content in seeds[fmt].items():
            (d / f).write_bytes(content)
        assert exercise(d, None) == "ok", fmt


def test_exercise_catches_a_hang(tmp_path, monkeypatch):
    """The time bound works: a reader that never returns is reported, not waited for."""
    import spigap.io as io_mod

    def slow(path, **kw):
        import time
        time.sleep(60)

    spec = io_mod.READERS["vcd"]
    monkeypatch.setattr(type(spec), "open", lambda self, path, opts: slow(path))
    monkeypatch.setattr(sys.modules[__name__], "TIME_BOUND_S", 0.2)
    p = tmp_path / "x.vcd"
    p.write_text("$end\n")
    t0 = __import__("time").perf_counter()
    with pytest.raises(Hang):
        exercise(p, "vcd")
    assert __import__("time").perf_counter() - t0 < 2
