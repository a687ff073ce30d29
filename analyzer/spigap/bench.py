"""Side-by-side benchmark: ``spigap analyze`` vs ``sigrok-cli -P spi`` on the same captures;
and the trace path (``spigap trace``: parse + align a ~1 M-event ftrace) beside its capture's analysis.

Both are timed as whole processes (wall clock, start-up included), as a user
would run them, in the same run on the same machine; peak RSS comes from
wait4(). Captures are synthesized once into a cache directory.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import pathlib
import platform
import shutil
import statistics
import subprocess
import sys
import time

from spigap import __version__

# a dense MCP3008-like capture: 3-byte transfers back to back (bcm2835 idle clock,
# minimal CS gaps), 10 transfers per ioctl
DENSE = {"samplerate": "50MHz", "sclk": "3.6MHz", "words_per_transfer": 3, "transfers_per_message": 10,
         "mosi": [0x60, 0, 0], "miso": "random", "cs_setup": "0.3us", "cs_hold": "0.2us", "idle_clocks": 1,
         "cs_change": "0.3us", "context_switch": "0.6us", "lead": "1us", "tail": "1us", "seed": 7,
         "channels": {"clk": "SCLK", "mosi": "MOSI", "miso": "MISO", "cs": "CS"}}
SIGROK_SPI = "spi:clk=SCLK:mosi=MOSI:miso=MISO:cs=CS"
SAMPLES_PER_MESSAGE = 3950

# a dense shared bus (docs/shared-bus.md): an MCP3008 read by a spidev loop on CE0 and a second
# device on CE1 (3-byte transfers, 10 per message, each), one controller with sub-µs latencies,
# so the bus is about as busy as DENSE; sigrok-cli's users stack one spi decoder per CS line
SHARED = {
    "capture": {"samplerate": "50MHz", "seed": 7, "lead": "1us", "tail": "1us"},
    "spi": {"sclk": "3.6MHz", "mode": 0, "channels": {"clk": "SCLK", "mosi": "MOSI", "miso": "MISO"}},
    "controller": {"submit_to_busy": "0.1us", "busy_to_start": "0.05us", "start_to_set_cs": "0.05us",
                   "gpio_cs_latency": "0.1us", "gpio_cs_off_latency": "0.1us", "deassert_to_done": "0.1us",
                   "done_to_start": "0.1us", "done_to_idle": "0.05us", "idle_to_exit": "0.05us",
                   "enter_to_submit": "0.05us", "jitter": 0.05},
    "device": [
        {"cs": "CE0", "traffic": "mcp3008", "driver": "spidev", "transfers_per_message": 10, "think": "0.2us",
         "cs_setup": "0.3us", "cs_hold": "0.2us", "cs_change": "0.3us", "idle_clocks": 1},
        {"cs": "CE1", "traffic": "counter", "words": 3, "driver": "spidev", "transfers_per_message": 10,
         "think": "0.25us", "cs_setup": "0.3us", "cs_hold": "0.2us", "cs_change": "0.3us", "idle_clocks": 1}],
}
SIGROK_SHARED = ["-P", "spi:clk=SCLK:mosi=MOSI:miso=MISO:cs=CE0", "-P", "spi:clk=SCLK:mosi=MOSI:miso=MISO:cs=CE1"]


@dataclasses.dataclass
class Row:
    name: str
    samples: int
    spigap_s: float
    spigap_rss_mb: float
    sigrok_s: float | None
    sigrok_rss_mb: float | None
    note: str = ""
    inproc_s: float | None = None       # analyze_file() in a warm process: no start-up, no imports

    @property
    def msa_s(self) -> float:
        return self.samples / self.spigap_s / 1e6

    @property
    def ratio(self) -> float | None:
        return self.sigrok_s / self.spigap_s if self.sigrok_s else None


def cache_dir() -> pathlib.Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    d = pathlib.Path(base) / "spigap" / "bench"
    d.mkdir(parents=True, exist_ok=True)
    return d


def dense_capture(samples: float, log=print) -> tuple[pathlib.Path, int]:
    """The capture, synthesized once (in a subprocess, so this process stays small)."""
    # samples per ioctl of DENSE: 3956.8 measured (199 985 830 samples for 50 544 messages),
    # rounded down so the capture holds at least the samples asked for ("≥ 200 M samples")
    messages = max(1, math.ceil(samples / SAMPLES_PER_MESSAGE))
    path = cache_dir() / f"dense-mcp3008-{messages}msg.sr"
    if not path.exists():
        log(f"bench: synthesizing {path.name} (once; cached in {path.parent})")
        tmp = path.with_suffix(".tmp")
        code = ("import sys, json; from spigap.synth import load, write; "
                "write(load(None, json.loads(sys.argv[1])), sys.argv[2], compresslevel=1)")
        subprocess.run([sys.executable, "-c", code, json.dumps({**DENSE, "messages": messages}), str(tmp)],
                       check=True)
        tmp.replace(path)
    from spigap.io import open_capture

    with open_capture(path) as r:
        n = r.info.n_ticks
    return path, n


def shared_capture(samples: float, log=print) -> tuple[pathlib.Path, int]:
    """The dense shared-bus capture (SHARED) of at least ``samples`` samples, synthesized once."""
    duration_s = samples / 50e6
    path = cache_dir() / f"shared-2dev-{int(round(duration_s * 1e3))}ms.sr"
    if not path.exists():
        log(f"bench: synthesizing {path.name} (once; cached in {path.parent})")
        tmp = path.with_suffix(".tmp")
        scen = json.loads(json.dumps(SHARED))
        scen["capture"]["duration"] = f"{duration_s}s"
        code = ("import sys, json; from spigap.synth import load, toml_text, write; "
                "write(load(text=toml_text(json.loads(sys.argv[1]))), sys.argv[2], compresslevel=1)")
        subprocess.run([sys.executable, "-c", code, json.dumps(scen), str(tmp)], check=True)
        tmp.replace(path)
    from spigap.io import open_capture

    with open_capture(path) as r:
        n = r.info.n_ticks
    return path, n


def _child_env() -> dict:
    # a normal install caches bytecode; a developer shell may have turned that off
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _peak_rss_kb(pid: int) -> int | None:
    """VmHWM of the program the child runs now. (ru_maxrss from wait4 is useless
    here: Linux folds the parent's memory at fork/exec into the child's maximum.)"""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def run_measured(cmd: list[str], env: dict | None = None, stdin=None) -> tuple[int, bytes, bytes, float, float]:
    """Run cmd (``stdin``: a file or pipe to read); return (exit code, stdout, stderr, wall
    seconds, peak RSS MB of the program itself, read from its VmHWM while it runs)."""
    import tempfile
    import threading

    with tempfile.TemporaryFile() as out_file, tempfile.TemporaryFile() as err_file:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdin=stdin, stdout=out_file, stderr=err_file, env=env)
        peak = [0]

        def watch():                     # VmHWM only grows: the last reading is the peak
            while p.poll() is None:
                v = _peak_rss_kb(p.pid)
                if v:
                    peak[0] = max(peak[0], v)
                time.sleep(0.003)

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        code = p.wait()
        dt = time.perf_counter() - t0
        watcher.join()
        out_file.seek(0)
        err_file.seek(0)
        return code, out_file.read(), err_file.read(), dt, peak[0] / 1024


def timed(cmd: list[str], repeat: int) -> tuple[float, float]:
    """Median wall time and max peak RSS (MB) of ``repeat`` runs of cmd."""
    times, rss = [], []
    for _ in range(repeat):
        code, _, err, dt, peak = run_measured(cmd, env=_child_env())
        text = err.decode(errors="replace")
        if code != 0 or "srd:" in text:
            raise RuntimeError(f"{' '.join(cmd)} failed ({code}): {text.strip()[-400:]}")
        times.append(dt)
        rss.append(peak)
    return statistics.median(times), max(rss)


def in_process(path, repeat: int = 3) -> float:
    """Best warm analyze_file() time, in a fresh process (start-up and imports excluded)."""
    code = ("import sys, time; from spigap.api import analyze_file; analyze_file(sys.argv[1]); ts = []\n"
            "for _ in range(int(sys.argv[2])):\n"
            "    t = time.perf_counter(); analyze_file(sys.argv[1]); ts.append(time.perf_counter() - t)\n"
            "print(min(ts))")
    out = subprocess.run([sys.executable, "-c", code, str(path), str(repeat)], capture_output=True, text=True,
                         env=_child_env(), check=True)
    return float(out.stdout.strip())


def spigap_cmd(path, extra=()) -> list[str]:
    exe = shutil.which("spigap")
    base = [exe] if exe and os.path.dirname(exe) == os.path.dirname(sys.executable) else [sys.executable, "-m", "spigap"]
    return base + ["analyze", str(path), *extra]


def run(samples: float = 20e6, big_samples: float = 200e6, real: pathlib.Path | None = None,
        repeat: int = 3, sigrok: bool = True, sigrok_big: bool = False, log=print,
        shared_samples: float = 0.0) -> list[Row]:
    rows = []
    have_sigrok = sigrok and shutil.which("sigrok-cli") is not None

    def measure(label: str, path: pathlib.Path, n, decoders: list[str] | None, why: str, note: str = "") -> None:
        """spigap ``repeat`` times and, with ``decoders``, sigrok-cli once on ``path``: one row."""
        log(f"bench: {path.name}: spigap x{repeat} ...")
        t, m = timed(spigap_cmd(path), repeat)
        st = sm = None
        if decoders is not None:
            log(f"bench: same capture with sigrok-cli{why} ...")
            st, sm = timed(["sigrok-cli", "-i", str(path), *decoders, "-A", "spi=mosi-data"], 1)
        rows.append(Row(label, n, t, m, st, sm, note, inproc_s=in_process(path)))

    if shared_samples:
        spath, sn = shared_capture(shared_samples, log)
        measure("shared bus: 2 devices (CE0, CE1), dense", spath, sn,
                SIGROK_SHARED if have_sigrok and sigrok_big else None,
                ", one spi decoder per CS line (a few minutes)", "sigrok-cli: one spi decoder per CS")
    path, n = dense_capture(samples, log)
    measure("dense MCP3008-like, 50 MSa/s, unitsize 1", path, n, ["-P", SIGROK_SPI] if have_sigrok else None,
            " (slow)")
    if big_samples:
        bpath, bn = dense_capture(big_samples, log)
        measure("dense MCP3008-like, large (throughput)", bpath, bn,
                ["-P", SIGROK_SPI] if have_sigrok and sigrok_big else None, " (about a minute)")
    if real is not None and real.exists():
        from spigap.io import open_capture

        with open_capture(real) as r:
            rn = r.info.n_ticks
        measure(f"real {real.name}", real, rn,
                ["-P", "spi:clk=CLK:mosi=MOSI:miso=MISO:cs=CS"] if have_sigrok else None, "",
                "1 GHz, mostly idle, 98 chunks")
    return rows


# ------------------------------------------------------------------ the trace path (spigap trace)
# spidev spi_sync messages with irregular context switches (what makes windows identifiable),
# 11 trace events per message (analyzer/spigap/synth/kernel.py), plus scheduler noise
TRACE_SCEN = {"samplerate": "50MHz", "sclk": "8MHz", "words_per_transfer": 4, "transfers_per_message": 1,
              "mosi": "random", "miso": "random", "cs_setup": "2.4us", "cs_hold": "1.9us", "idle_clocks": 0,
              "context_switch": "20us", "sigma": {"context_switch": "4us"}, "lead": "10us", "tail": "10us",
              "seed": 5, "channels": {"clk": "SCLK", "mosi": "MOSI", "miso": "MISO", "cs": "CS"}}


@dataclasses.dataclass
class TraceRow:
    events: int
    transfers: int
    analyze_s: float        # the capture's analysis (analyze_file), for scale
    parse_s: float          # ftrace text -> Trace
    align_s: float          # matching + clock fit
    phases_s: float         # gaps split into phases
    matched: int
    drift_ppm: float            # the aligner's estimate (the synthesized trace drifts by 40 ppm)

    @property
    def parse_align_s(self) -> float:
        return self.parse_s + self.align_s


def trace_pair(events: float, log=print) -> tuple[pathlib.Path, pathlib.Path]:
    """A capture and its ~``events``-event trace (40 ppm drift, 1 % lost), synthesized once."""
    messages = max(100, int(events / 11.5))
    cap = cache_dir() / f"trace-{messages}msg.sr"
    txt = cap.with_suffix(".txt")
    if not (cap.exists() and txt.exists()):
        log(f"bench: synthesizing {cap.name} + {txt.name} (once; cached in {cap.parent})")
        code = ("import sys, json; from spigap.synth import Scenario, write, kernel; "
                "sc = Scenario.from_toml(None, json.loads(sys.argv[1])); tl = write(sc, sys.argv[2] + '.tmp', "
                "compresslevel=1).timeline; kernel.write(tl, sys.argv[3] + '.tmp', kernel.KernelLatencies(drift_ppm=40, "
                "lost=0.01, noise_rate_hz=2000))")
        subprocess.run([sys.executable, "-c", code, json.dumps({**TRACE_SCEN, "messages": messages}), str(cap),
                        str(txt)], check=True)
        pathlib.Path(str(cap) + ".tmp").replace(cap)
        pathlib.Path(str(txt) + ".tmp").replace(txt)
    return cap, txt


def trace_case(events: float = 1e6, log=print) -> TraceRow:
    """Parse + align (+ phases) of a ~1 M-event trace, timed in a fresh process beside the
    capture's analysis (imports excluded: each step is warm-up free numpy work)."""
    cap, txt = trace_pair(events, log)
    log(f"bench: {txt.name}: parse, align, phases ...")
    code = ("import sys, time, json; from spigap.api import analyze_device; "
            "from spigap.trace import ftrace, align, phases\n"
            "t = time.perf_counter(); a = analyze_device(sys.argv[1]); ta = time.perf_counter() - t\n"
            "t = time.perf_counter(); tr = ftrace.parse(sys.argv[2]); tp = time.perf_counter() - t\n"
            "t = time.perf_counter(); al = align.align_spi(tr, a); tl = time.perf_counter() - t\n"
            "t = time.perf_counter(); ph = phases.run(tr, al, a); tph = time.perf_counter() - t\n"
            "print(json.dumps([len(tr), a.n, ta, tp, tl, tph, al.matched, al.drift_ppm]))")
    out = subprocess.run([sys.executable, "-c", code, str(cap), str(txt)], capture_output=True, text=True,
                         env=_child_env(), check=True)
    ev, n, ta, tp, tl, tph, matched, drift = json.loads(out.stdout.strip().splitlines()[-1])
    return TraceRow(ev, n, ta, tp, tl, tph, matched, drift)


def render_trace(r: TraceRow, fmt: str = "text") -> str:
    if fmt == "markdown":
        return ("| trace events | transfers | capture analysis | parse | align | parse + align | phases | matched "
                "| drift (truth 40 ppm) |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
                f"| {r.events} | {r.transfers} | {r.analyze_s:.2f} s | {r.parse_s:.2f} s | {r.align_s:.2f} s | "
                f"{r.parse_align_s:.2f} s | {r.phases_s:.2f} s | {r.matched} | {r.drift_ppm:+.2f} ppm |\n")
    return (f"trace: {r.events} events, {r.transfers} transfers: capture analysis {r.analyze_s:.2f} s; parse "
            f"{r.parse_s:.2f} s + align {r.align_s:.2f} s = {r.parse_align_s:.2f} s; phases {r.phases_s:.2f} s; "
            f"matched {r.matched}, drift {r.drift_ppm:+.2f} ppm (truth 40)\n")


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{os.cpu_count()} cores, {cpu}, Python {platform.python_version()}"


def render(rows: list[Row], fmt: str = "text") -> str:
    from spigap import native
    from spigap.io import inflate

    head = (f"spigap {__version__} ({native.engine()} engine, {inflate.BACKEND} inflate) vs sigrok-cli; "
            f"{machine()}; wall clock per process, start-up included (bytecode cached); "
            f"peak RSS = the process's VmHWM")
    if fmt == "markdown":
        out = [head, "", "| capture | samples | spigap | MSa/s | peak RSS | sigrok-cli | sigrok RSS | ratio "
                         "| spigap in-process | ratio in-process |",
               "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for r in rows:
            ri = r.sigrok_s / r.inproc_s if (r.sigrok_s and r.inproc_s) else None
            out.append(f"| {r.name} | {r.samples / 1e6:.1f} M | {r.spigap_s:.3f} s | {r.msa_s:.0f} | "
                       f"{r.spigap_rss_mb:.0f} MB | {_s(r.sigrok_s)} | {_mb(r.sigrok_rss_mb)} | "
                       f"{_x(r.ratio)} | {_s3(r.inproc_s)} | {_x(ri)} |")
        return "\n".join(out) + "\n"
    out = [head, f"{'capture':44s} {'samples':>9s} {'spigap':>9s} {'MSa/s':>7s} {'RSS':>7s} "
                 f"{'sigrok-cli':>10s} {'ratio':>7s} {'in-process':>11s}"]
    for r in rows:
        out.append(f"{r.name:44s} {r.samples / 1e6:8.1f}M {r.spigap_s:8.3f}s {r.msa_s:7.0f} "
                   f"{r.spigap_rss_mb:5.0f}MB {_s(r.sigrok_s):>10s} {_x(r.ratio):>7s} {_s3(r.inproc_s):>11s}")
    return "\n".join(out) + "\n"


def _s(x):
    return "–" if x is None else f"{x:.2f} s"


def _s3(x):
    return "–" if x is None else f"{x:.3f} s"


def _mb(x):
    return "–" if x is None else f"{x:.0f} MB"


def _x(x):
    return "–" if x is None else f"{x:.0f}×"


# ------------------------------------------------------------------ stages

@dataclasses.dataclass
class StageRow:
    name: str
    samples: int
    edges: int
    inflate_s: float          # CPU seconds on one core, best of the repeats
    scan_s: float
    frame_s: float            # the serial compiled framer (Python calls included)
    stream_s: float           # wall: reader + framer as analyze runs them (threads), no statistics
    analysis_s: float         # wall: analyze_file() warm, in process
    startup_s: float          # wall: a fresh interpreter importing what `spigap analyze` needs


# what `spigap analyze` imports and loads before it reads a capture
STARTUP = ("import spigap.cli, spigap.cli.analyze, spigap.api, spigap.core.analysis, "
           "spigap.core.collect, spigap.core.pipeline, spigap.io.sr, spigap.output.text, spigap.native as n; n.library()")


def stages(path, roles: dict[str, str], repeat: int = 3) -> StageRow:
    """Where the time of one .sr capture goes: inflate, change scan and framing
    each on one core (thread CPU time, one pass member by member, nothing kept),
    then the streaming part as analyze runs it (2 threads inflate and scan, the
    framer's middles on worker threads), the whole in-process analysis and the
    interpreter start-up."""
    import numpy as np

    from spigap import native
    from spigap.api import analyze_file
    from spigap.core.cframer import CFramer
    from spigap.core.config import SpiConfig
    from spigap.core.framing import make_framer
    from spigap.io import inflate, open_capture, sr
    from spigap.io.base import EdgeBlock
    from spigap.native.changes import masks_for

    names = [roles["clk"], roles["cs"], roles["mosi"], roles["miso"]]
    cfg = SpiConfig(clk=names[0], cs=names[1], mosi=names[2], miso=names[3])
    bits_of = {"clk": 0, "cs": 1, "mosi": 2, "miso": 3}
    best = {"inflate": 1e9, "scan": 1e9, "frame": 1e9, "stream": 1e9, "analysis": 1e9, "startup": 1e9}
    n_samples = n_edges = 0
    clock = time.thread_time
    for _ in range(repeat):
        acc = {"inflate": 0.0, "scan": 0.0, "frame": 0.0}
        with open_capture(path) as r:
            assert isinstance(r, sr.SrReader)
            bits = [r._bit_of[n] for n in names]
            masks = masks_for(bits)
            framer = CFramer(cfg, bits_of, r.info.tick_s)
            framer.par_min = 1 << 62                    # serial: one core
            base, prev, n_edges = 0, None, 0
            for m in r._logic:
                comp = sr._read_member(r._fd, m, r._data_offset(m), r._size)
                t0 = clock()
                raw = inflate.decompress_limited(comp, m.usize)
                t1 = clock()
                pc = native.scan(raw, r.unitsize, masks, bits, base) if native.library() else \
                    sr.scan_piece_numpy(raw, r.unitsize, masks, bits, base)
                t2 = clock()
                ticks, states = pc.pos, pc.values
                if prev is None or pc.first != prev:
                    ticks = np.concatenate([[base], ticks]).astype(np.int64)
                    states = np.concatenate([np.array([pc.first], np.uint32), states])
                t3 = clock()
                framer.feed(EdgeBlock(ticks, states))
                acc["frame"] += clock() - t3
                acc["inflate"] += t1 - t0
                acc["scan"] += t2 - t1
                n_edges += len(ticks)
                base += pc.n
                prev = pc.last
                del raw
            t3 = clock()
            framer.finish(base)
            acc["frame"] += clock() - t3
            n_samples = base
        for k, v in acc.items():
            best[k] = min(best[k], v)
        t0 = time.perf_counter()
        with open_capture(path) as r:
            f = make_framer(cfg, bits_of, r.info.tick_s)
            for block in r.edges(names):
                f.feed(block)
            f.finish(r.end_tick)
        best["stream"] = min(best["stream"], time.perf_counter() - t0)
        t0 = time.perf_counter()
        analyze_file(path)
        best["analysis"] = min(best["analysis"], time.perf_counter() - t0)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", STARTUP], check=True, env=_child_env())
        best["startup"] = min(best["startup"], time.perf_counter() - t0)
    return StageRow(pathlib.Path(path).name, n_samples, n_edges, best["inflate"], best["scan"], best["frame"],
                    best["stream"], best["analysis"], best["startup"])


def render_stages(rows: list[StageRow], fmt: str = "text") -> str:
    head = (f"where the time goes ({machine()}): inflate, scan and frame are CPU seconds on one core "
            "(best of the repeats); streaming (reader + framer on their threads), analysis "
            "(analyze_file, warm) and start-up are wall clock")
    cols = ["capture", "samples", "edges", "inflate", "scan", "frame", "streaming", "analysis", "start-up"]
    lines = []
    for r in rows:
        def rate(s, n=r.samples):
            return f"{s:.3f} s ({n / s / 1e6:.0f} M/s)" if s > 0 else "–"
        lines.append([r.name, f"{r.samples / 1e6:.1f} M", f"{r.edges / 1e6:.2f} M", rate(r.inflate_s),
                      rate(r.scan_s), rate(r.frame_s, r.edges), rate(r.stream_s), rate(r.analysis_s),
                      f"{r.startup_s:.3f} s"])
    if fmt == "markdown":
        out = [head, "", "| " + " | ".join(cols) + " |", "|---|" + "---:|" * (len(cols) - 1)]
        out += ["| " + " | ".join(row) + " |" for row in lines]
        return "\n".join(out) + "\n"
    return "\n".join([head] + ["  ".join(f"{c:>18s}" for c in cols)] +
                     ["  ".join(f"{c:>18s}" for c in row) for row in lines]) + "\n"
