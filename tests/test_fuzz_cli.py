"""Fuzz the command as a user runs it: every reader family and every option that reads a
file, given damaged inputs, must end in exit 0, 1 or 2 with at most one error line, within
2 GiB of address space (RLIMIT_AS) and a time limit, and leave every input file as it was
(hashed before and after).

Each family's inputs are a small valid file mutated (bytes flipped, inserted, deleted,
duplicated, cut; format tokens and extreme numbers spliced in; for zip sessions a member's
content mutated and the archive rebuilt), drawn from a numpy generator with a fixed seed:
the same inputs on every run. The default run tries ``DEFAULT_EXAMPLES`` per family (a few
seconds each); ``pytest -m fuzz`` (``make fuzz``) tries ``SPIGAP_FUZZ_EXAMPLES`` (default
200) with ``SPIGAP_FUZZ_SEED`` choosing other inputs.

All the runs of one family go through one child process (``spigap.cli.main`` called per
input, a SIGALRM bound per call), so the test pays one interpreter start per family.
tests/test_fuzz_readers.py fuzzes the readers themselves, in-process.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pathlib
import resource
import shutil
import subprocess
import sys
import zipfile

import numpy as np
import pytest
from conftest import CAPTURES, ROOT

from util import synth

DEFAULT_EXAMPLES = 5
LONG_EXAMPLES = int(os.environ.get("SPIGAP_FUZZ_EXAMPLES", "200"))
SEED = int(os.environ.get("SPIGAP_FUZZ_SEED", "0"))
CALL_TIME_S = float(os.environ.get("SPIGAP_FUZZ_TIME_BOUND", "30"))
AS_LIMIT = 2 << 30
SCOPES = ROOT / "tests" / "data" / "scopes"
PROFILES = pathlib.Path(__import__("spigap.timing", fromlist=["x"]).__file__).parent

# the child: runs spigap.cli.main on each argv (a JSON list on stdin), one JSON line per run
RUNNER = r"""
import contextlib, io, json, resource, signal, sys
resource.setrlimit(resource.RLIMIT_AS, (%d, %d))
from spigap.cli import main

class Hang(BaseException):
    pass

def alarm(*_):
    raise Hang()

signal.signal(signal.SIGALRM, alarm)
for argv in json.load(sys.stdin):
    err, out = io.StringIO(), io.StringIO()
    signal.setitimer(signal.ITIMER_REAL, %f)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            code = main(argv)
    except Hang:
        code = "hang"
    except MemoryError:
        code = "MemoryError"
    except BaseException as e:
        code = f"{type(e).__name__}: {e}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
    print(json.dumps({"code": code, "err": err.getvalue()[-4000:]}), flush=True)
"""

TOKENS = {
    "text": [b",", b";", b"\n", b"\r\n", b"\t", b"nan", b"inf", b"-inf", b"1e308", b"1e-308", b"-1",
             b"99999999999999999999", b"0", b"1", b"X", b"\"", b"\x00", b"\xff", b"#", b"$end", b"$var",
             b"Time [s]", b"(us)", b"; Samplerate: 0 Hz\n", b"[[", b"]]", b"= ", b"\"\"\"", b"'"],
    "bin": [b"\x00" * 8, b"\xff" * 8, b"\x7f\xf0\x00\x00\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00\xf8\x7f",
            b"\xff\xff\xff\x7f", b"\x01\x00\x00\x00", b"nan", b"inf", b"1e-300", b"NR_PT 0;", b"XINCR 0;"],
    "toml": [b"[", b"]", b"[[", b"]]", b"=", b" = 1e309", b" = -1", b" = 0", b" = \"\"", b" = \"1e-300s\"",
             b" = \"1e300Hz\"", b" = [" * 40, b"]" * 40, b"\n[profile]\n", b"\n[bus]\n", b"\n[timing]\n",
             b"\n[expect.cs_setup]\n", b"a.b.c.d.e.f = 1\n", b"\"\"\"", b"\x00", b"inf", b"nan", b"#"],
}


def mutate(data: bytes, kind: str, rng: np.random.Generator) -> bytes:
    buf = bytearray(data)
    for _ in range(int(rng.integers(1, 6))):
        op = rng.choice(["flip", "ins", "del", "cut", "dup", "tok", "tok", "num"])
        pos = int(rng.integers(0, len(buf) + 1)) if buf else 0
        if op == "flip" and buf:
            buf[min(pos, len(buf) - 1)] = int(rng.integers(0, 256))
        elif op == "ins":
            buf[pos:pos] = rng.integers(0, 256, int(rng.integers(1, 9)), dtype=np.uint8).tobytes()
        elif op == "del" and buf:
            del buf[pos:pos + int(rng.integers(1, 65))]
        elif op == "cut":
            del buf[pos:]
        elif op == "dup" and buf:
            k = int(rng.integers(1, 257))
            buf[pos:pos] = buf[max(0, pos - k):pos]
        elif op == "tok":
            toks = TOKENS[kind]
            buf[pos:pos] = toks[int(rng.integers(0, len(toks)))]
        elif op == "num" and buf:
            # an extreme number where a digit stands
            digits = [i for i in range(len(buf)) if 48 <= buf[i] <= 57]
            if digits:
                i = digits[int(rng.integers(0, len(digits)))]
                buf[i:i + 1] = [b"1e309", b"-1", b"0", b"nan", b"4294967297", b"1e-300"][int(rng.integers(0, 6))]
    return bytes(buf)


def mutate_zip(data: bytes, rng: np.random.Generator) -> bytes:
    """A member's content mutated (or one dropped), the archive rebuilt: damage the reader sees
    past the zip layer."""
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        members = {i.filename: z.read(i.filename) for i in z.infolist()}
    names = sorted(members)
    name = names[int(rng.integers(0, len(names)))]
    if rng.random() < 0.15 and len(names) > 1:
        del members[name]
    else:
        members[name] = mutate(members[name], "text" if name in ("metadata", "header", "version") else "bin", rng)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for k, v in members.items():
            z.writestr(k, v)
    return out.getvalue()


# ------------------------------------------------------------------ the seeds
@pytest.fixture(scope="module")
def seeds(tmp_path_factory):
    """family -> (seed file name, its bytes, mutation kind, argv template with FILE, extra files)."""
    from spigap.synth import Scenario, tracks
    from spigap.synth.writers import write_capture
    from test_reader_dsl import write_dsl

    d = tmp_path_factory.mktemp("seeds")
    sc = Scenario.from_toml(None, {"messages": 3, "words_per_transfer": 2, "samplerate": 20e6, "sclk": 2e6,
                                   "lead": 2e-6, "tail": 2e-6})
    tl = sc.timeline()
    n = int(round(tl.end_time * sc.samplerate))
    trs = tracks(tl, sc.channels, sc.samplerate)

    def written(fmt, name):
        return pathlib.Path(write_capture(d / name, fmt, trs, sc.samplerate, n)).read_bytes()

    cap = synth(d, "base.sr", messages=8)[2]
    rows = [0] * 5 + [1, 1, 0, 0] * 10 + [3, 3, 2, 6, 7, 7]
    sigrok_csv = ("; CSV generated by libsigrok 0.5.2\n; Channels (3/16): CLK, CS, MOSI\n; Samplerate: 1 MHz\n"
                  "logic,logic,logic\n" + "".join(f"{v & 1},{v >> 1 & 1},{v >> 2 & 1}\n" for v in rows)).encode()
    bits = (np.random.default_rng(0).random((4, 4000)) < 0.5).astype(np.uint8)
    profile = (PROFILES / "profiles" / "rpi3-k4.4-vanilla.toml").read_bytes()
    device = (PROFILES / "devices" / "mcp3008.toml").read_bytes()
    a = "FILE"
    fam = {
        # capture readers
        "sr": ("f.sr", cap.read_bytes(), "zip", ["analyze", a]),
        "sr-analog": ("f.sr", written("sr-analog", "an.sr"), "zip", ["analyze", a]),
        "dsl": ("f.dsl", write_dsl(bits, ["SCLK", "MOSI", "MISO", "CS"], block_bytes=128), "zip", ["analyze", a]),
        "vcd": ("f.vcd", written("vcd", "v.vcd"), "text", ["analyze", a]),
        "csv": ("f.csv", written("csv-saleae", "s.csv"), "text", ["analyze", a]),
        "sigrok-csv": ("f.csv", sigrok_csv, "text", ["analyze", a]),
        "scope-csv": ("f.csv", written("scope-pico", "p.csv"), "text", ["analyze", a]),
        "saleae": ("digital_0.bin", None, "bin", ["analyze", "DIR"]),
        "isf": ("f.isf", (SCOPES / "tek0002NRM.isf").read_bytes(), "bin", ["analyze", a]),
        "rigol-wfm": ("f.wfm", (SCOPES / "DS1054Z-A.wfm").read_bytes(), "bin", ["analyze", a]),
        "lecroy-trc": ("f.trc", (SCOPES / "lecroy_1.trc").read_bytes(), "bin", ["analyze", a]),
        "keysight-bin": ("f.bin", (SCOPES / "agilent_4.bin").read_bytes(), "bin", ["analyze", a]),
        "rigol-bin": ("f.bin", (SCOPES / "MSO5074-A.bin").read_bytes(), "bin", ["analyze", a]),
        "raw": ("f.raw", bits[0].tobytes() * 4, "bin", ["analyze", a, "--input-format", "raw", "--samplerate",
                                                         "10MHz"]),
        # options that read a file
        "--profile": ("p.toml", profile, "toml", ["check", "CAP", "--profile", a]),
        "--device": ("d.toml", device, "toml", ["check", "CAP", "--device", a]),
        "model --profile": ("p.toml", profile, "toml", ["model", "--profile", a]),
        "--ftrace": ("t.txt", (CAPTURES / "trace-demo.txt").read_bytes()[:60000], "text",
                     ["trace", "DEMO", "--ftrace", a]),
        "--userlog": ("l.csv", b"iteration,before_ns,after_ns\n" + b"".join(
            b"%d,%d,%d\n" % (i, 1000000 + i * 50000, 1010000 + i * 50000) for i in range(200)), "text",
            ["trace", "DEMO", "--userlog", a]),
        "--manifest": ("m.toml", b'[defaults]\nsamplerate = "20MHz"\n[[capture]]\npath = "CAPNAME"\n'
                       b'labels = { kernel = "4.4" }\n', "toml", ["batch", "--manifest", a, "-j", "1", "-q"]),
        "--config": ("s.toml", b'[capture]\nsamplerate = "20MHz"\n[spi]\nsclk = "2MHz"\n[traffic]\nmessages = 4\n'
                     b'[gaps]\ncs_change = "10us"\n', "toml", ["synth", "--config", a, "-o", "OUT/s.sr"]),
        "--config shared": ("b.toml", b'[capture]\nsamplerate = "10MHz"\nseed = 3\nduration = "2ms"\n[spi]\n'
                            b'sclk = "1MHz"\n[[device]]\ncs = "CE0"\nwords = 3\nthink = "30us"\n[[device]]\n'
                            b'cs = "CE1"\nwords = 2\nmode = 1\n[controller]\njitter = 0.05\n[faults]\n'
                            b'stray_sclk = 2\n', "toml", ["synth", "--config", a, "-o", "OUT/s.sr"]),
        ".pvs": ("base.pvs", None, "text", ["analyze", "PVSCAP"]),
    }
    saleae = d / "saleae"
    write_capture(saleae, "saleae-v1", trs, sc.samplerate, n)
    return {"dir": d, "cap": cap, "fam": fam, "saleae": saleae}


def _pvs_seed(cap: pathlib.Path) -> bytes:
    from spigap.cli import main

    out = cap.with_suffix(".pvs")
    assert main(["decoders", "pvs", str(cap), "--stack", "spi:clk=SCLK:mosi=MOSI:miso=MISO:cs=CS", "-o",
                 str(out), "--force"]) == 0
    data = out.read_bytes()
    out.unlink()
    return data


def _digests(root: pathlib.Path) -> dict[str, str]:
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink():
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def fuzz(family: str, seeds, tmp_path, examples: int, seed: int) -> None:
    name, data, kind, template = seeds["fam"][family]
    rng = np.random.default_rng([seed, sum(map(ord, family))])
    inputs = tmp_path / "in"
    inputs.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    shutil.copy(seeds["cap"], inputs / "cap.sr")
    shutil.copy(CAPTURES / "trace-demo.sr", inputs / "demo.sr")
    if family == ".pvs":
        data = _pvs_seed(inputs / "cap.sr")
    argvs = []
    for i in range(examples):
        case = inputs / f"case{i}"
        case.mkdir()
        if family == "saleae":
            shutil.copytree(seeds["saleae"], case / "cap")
            victims = sorted((case / "cap").iterdir())
            victim = victims[int(rng.integers(0, len(victims)))]
            victim.write_bytes(mutate(victim.read_bytes(), "bin", rng))
            target = case / "cap"
        elif family == ".pvs":
            shutil.copy(inputs / "cap.sr", case / "cap.sr")
            (case / "cap.pvs").write_bytes(mutate(data, kind, rng))
            target = case / "cap.sr"
        else:
            content = mutate_zip(data, rng) if kind == "zip" and rng.random() < 0.7 else \
                mutate(data, "bin" if kind == "zip" else kind, rng)
            if family == "--manifest":
                shutil.copy(inputs / "cap.sr", case / "c.sr")
                content = content.replace(b"CAPNAME", b"c.sr")
            target = case / name
            target.write_bytes(content)
        subst = {"FILE": str(target), "DIR": str(target), "PVSCAP": str(target), "CAP": str(inputs / "cap.sr"),
                 "DEMO": str(inputs / "demo.sr")}
        argvs.append([subst.get(x, x.replace("OUT", str(out / f"{i}"))) for x in template])
        (out / f"{i}").mkdir()
    before = _digests(inputs)
    runner = RUNNER % (AS_LIMIT, AS_LIMIT, CALL_TIME_S)
    proc = subprocess.run([sys.executable, "-c", runner], input=json.dumps(argvs), capture_output=True, text=True,
                          timeout=examples * (CALL_TIME_S + 5) + 60, cwd=tmp_path,
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (AS_LIMIT, AS_LIMIT)))
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(results) == len(argvs), f"the runner stopped: {proc.stderr[-3000:]}"
    bad = []
    for argv, r in zip(argvs, results):
        lines = [ln for ln in r["err"].splitlines() if ln.strip()]
        errors = [ln for ln in lines if ln.startswith("spigap: error")]
        ok = (r["code"] in (0, 1, 2) and "internal error" not in r["err"] and "Traceback" not in r["err"]
              and len(errors) <= 1 and (r["code"] != 2 or len(errors) == 1))
        if not ok:
            bad.append((" ".join(argv), r["code"], lines[-3:]))
    assert not bad, f"{family}: {len(bad)} of {len(argvs)} inputs broke a promise; first: {bad[0]}"
    after = _digests(inputs)
    changed = [k for k in before if before[k] != after.get(k)]
    assert not changed, f"{family}: inputs changed: {changed}"


FAMILIES = ["sr", "sr-analog", "dsl", "vcd", "csv", "sigrok-csv", "scope-csv", "saleae", "isf", "rigol-wfm",
            "lecroy-trc", "keysight-bin", "rigol-bin", "raw", "--profile", "--device", "model --profile",
            "--ftrace", "--userlog", "--manifest", "--config", "--config shared", ".pvs"]


@pytest.mark.parametrize("family", FAMILIES)
def test_fuzz_short(family, seeds, tmp_path):
    fuzz(family, seeds, tmp_path, DEFAULT_EXAMPLES, SEED)


@pytest.mark.fuzz
@pytest.mark.parametrize("family", FAMILIES)
def test_fuzz_long(family, seeds, tmp_path):
    fuzz(family, seeds, tmp_path, LONG_EXAMPLES, SEED + 1)


def test_the_runner_reports_a_broken_promise(seeds, tmp_path, monkeypatch):
    """The harness can fail: a call that outlives the time bound is reported."""
    monkeypatch.setattr(sys.modules[__name__], "CALL_TIME_S", 0.001)
    with pytest.raises(AssertionError, match="broke a promise"):
        fuzz("sr", seeds, tmp_path, 1, SEED)
