"""Shared fixtures: where the real captures are, and how to run sigrok-cli.

The package under test is whatever ``spigap`` the environment imports:
``make test`` runs the suite against the wheel installed in a fresh venv,
from outside the checkout (``SPIGAP_TEST_INSTALLED=1``), so the decoders the
tests hand to sigrok-cli are the installed package's copies and a file
missing from the wheel fails here. ``make test-dev`` runs the same tests on
the editable checkout.
"""

from __future__ import annotations

import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import zipfile

import pytest
from hypothesis import HealthCheck, settings

from spigap import resources as _resources
from spigap.cli import runtime as _runtime

ROOT = pathlib.Path(__file__).resolve().parent.parent
CAPTURES = ROOT / "captures"
SOURCE_DECODERS = ROOT / "decoders"          # the copy edited by hand
DECODERS = _resources.decoders_dir()         # the copy the package under test carries
REAL = CAPTURES / "real"                      # the real captures, in the repository (captures/real/README.md)


# One commit, one verdict: property tests draw the same examples on every run
# (derandomize) and keep no example database between runs. The long fuzz runs
# (marker `fuzz`, `make fuzz`) use the "fuzz" profile: random, many examples.
settings.register_profile("default", derandomize=True, database=None, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("fuzz", derandomize=False, database=None, deadline=None, print_blob=True,
                          suppress_health_check=list(HealthCheck))
settings.load_profile(os.environ.get("SPIGAP_HYPOTHESIS_PROFILE", "default"))

# The test process runs with a spigap process's malloc settings (cli/runtime.malloc_settings: one
# arena for every thread, freed blocks below 64 MB kept for reuse) from its start (main() called
# in-process leaves the caller's process alone): every test meets the allocator a spigap process
# has, and with one arena _memory_given_back reaches all the freed memory (an arena per thread
# keeps its own, which malloc_trim does not return). Not after_imports: its gc.freeze would keep
# every object alive now for the whole run.
_runtime.malloc_settings()


def real(name: str) -> pathlib.Path:
    """A real capture from captures/real/ (part of the repository: a missing one fails)."""
    p = REAL / name
    assert p.is_file(), f"{p} is missing: captures/real/ is part of the repository (git checkout captures/real)"
    return p


# The 12 real captures (13 configurations: the nRF24L01 file carries two buses),
# with the channel maps and options of captures/real/README.md:
# name: (file, spigap SpiConfig keywords, sigrok spi -P options, samplerate override)
REAL_CAPTURES = {
    "ad7920": ("spi__ad7920__ad7920_fast_read.sr", dict(clk="0", miso="1", cs="2"), "clk=0:miso=1:cs=2", 5e6),
    "ltc2422": ("spi__ltc2422__ltc2422_read_adc.sr", dict(clk="0", miso="1", cs="2"), "clk=0:miso=1:cs=2", None),
    "adxl345": ("spi__adxl345__adxl345_registers.sr", dict(clk="0", mosi="1", miso="2", cs="3", cpol=1, cpha=1),
                "clk=0:mosi=1:miso=2:cs=3:cpol=1:cpha=1", None),
    "ade7758": ("spi__ade7758__ade7758-phase-b-zx-irq-context.sr", dict(clk="CLK", mosi="MOSI", miso="MISO", cpha=1, no_cs=True),
                "clk=CLK:mosi=MOSI:miso=MISO:cpha=1", None),
    "nrf24l01-rpi": ("spi__nrf24l01__nrf24l01-communication.sr",
                     dict(clk="rpi_CLK", mosi="rpi_MOSI", miso="rpi_MISO", cs="rpi_CSN"),
                     "clk=rpi_CLK:mosi=rpi_MOSI:miso=rpi_MISO:cs=rpi_CSN", None),
    "nrf24l01-uc": ("spi__nrf24l01__nrf24l01-communication.sr",
                    dict(clk="uc_CLK", mosi="uc_MOSI", miso="uc_MISO", cs="uc_CSN"),
                    "clk=uc_CLK:mosi=uc_MOSI:miso=uc_MISO:cs=uc_CSN", None),
    "ssi32": ("spi__ssi32__ssi32_bananapi_loop_test.sr", dict(), "clk=CLK:mosi=MOSI:miso=MISO:cs=CS#", None),
    "winbond": ("spi__spiflash__winbond_w25q80d__chip_erase_and_writes.sr", dict(),
                "clk=CLK:mosi=MOSI:miso=MISO:cs=CS", None),
    "atmega32": ("spi__spi_atmega32__spi_atmega32_00.sr", dict(clk="2", mosi="1", cs="0"), "clk=2:mosi=1:cs=0", None),
    "st25r3916": ("nfc__st25r39xx__HydraBus_v1_HydraNFC_Shield_v2_ST25R3916_Read_All_Registers_SpaceA_B.sr",
                  dict(cpha=1), "clk=0_CLK:mosi=2_MOSI:miso=1_MISO:cs=3_CS#:cpha=1", None),
    "mrf24j40": ("spi__mrf24j40__sensormote__mrf24j40-wake-tx-ack.sr", dict(), "clk=SCK:mosi=SDI:miso=SDO:cs=nCS", None),
    "enc28j60": ("spi__enc28j60__enc28j60-init-and-ping.sr", dict(), "clk=CLK:mosi=MOSI:miso=MISO:cs=CS", None),
    "sdcard": ("sdcard__spi_mode__cmds__cmd17.sr", dict(), "clk=CLK:mosi=MOSI:miso=MISO:cs=CS#", None),
}

# (file, the spi decoder stage of a sigrok-cli -P stack) for every real configuration
REAL_SPI_STACKS = [(f, f"spi:{opts}") for f, _, opts, _ in REAL_CAPTURES.values()]


# the real captures sigrok-cli takes 10-30 s of CPU to decode (winbond: 148 565 transfers; enc28j60:
# 1 G samples); the others take under 2 s each
SIGROK_SLOW_REAL = {REAL_CAPTURES["winbond"][0], REAL_CAPTURES["enc28j60"][0]}


def slow_if_big(stacks):
    """``stacks`` as pytest parameters, those on SIGROK_SLOW_REAL marked ``slow``: a decoder
    stacked on every real capture runs on the other ten in make test, on these two in make
    test-all and CI (their sigrok-cli runs are cached, see run_sigrok)."""
    return [pytest.param(*st, marks=pytest.mark.slow) if st[0] in SIGROK_SLOW_REAL else st for st in stacks]


@pytest.fixture(scope="session")
def sigrok_cli() -> str:
    exe = shutil.which("sigrok-cli")
    if exe is None:
        pytest.fail("sigrok-cli is not installed: run 'make test' (it installs it) or apt-get install sigrok-cli")
    return exe


@pytest.fixture(scope="session")
def tek_wfm_files(tmp_path_factory):
    """Tektronix .wfm files written by tm_data_types for this run, with what it was given
    (tests/tekwfm_oracle.py; tm_data_types runs in the venv `make oracles` makes)."""
    import tekwfm_oracle

    if tekwfm_oracle.oracle_python() is None:
        pytest.fail(f"tm_data_types' venv is missing: run 'make oracles' (make test and make test-dev do), "
                    f"or point {tekwfm_oracle.ORACLE_ENV} at a Python that has tm_data_types")
    return tekwfm_oracle.write_all(tmp_path_factory.mktemp("tek_wfm"))


# sigrok-cli on the 1 G-sample real captures takes 10-25 s a run. Its output is
# a pure function of sigrok-cli's version (which names libsigrokdecode's), the
# arguments, the input file's content and the decoders' sources, so runs on
# inputs above BIG_INPUT (inflated) are cached under exactly that key: the verdict stays
# the same, only the cost moves (SPIGAP_TEST_CACHE=off disables it).
BIG_INPUT = 16 << 20
_SIGROK_VERSION: str | None = None


# a shared bus whose three devices each have their own SPI settings (the SPI core sets them
# per device): CE1 an active-high CS, mode 1 and 12-bit words (two per window: 24 bits, which
# the signals alone read as three bytes), CE2 LSB first
# a controller with sub-µs latencies (1 MHz SCLK buses of the dense shared-bus tests)
FAST_CONTROLLER = """
[controller]
submit_to_busy = "0.5us"
busy_to_start = "0.5us"
start_to_set_cs = "0.5us"
gpio_cs_latency = "0.5us"
gpio_cs_off_latency = "0.5us"
transfer_start_to_sclk = "0.3us"
sclk_to_transfer_stop = "0.3us"
deassert_to_done = "0.5us"
done_to_start = "1us"
done_to_idle = "0.5us"
idle_to_exit = "0.5us"
enter_to_submit = "0.5us"
jitter = 0.05
"""


MIXED_BUS = """
[capture]
samplerate = "10MHz"
seed = 3
duration = "4ms"
[spi]
sclk = "1MHz"
mode = 0
[[device]]
cs = "CE0"
words = 3
think = "30us"
[[device]]
cs = "CE1"
words = 2
think = "45us"
mode = 1
wordsize = 12
cs_polarity = "high"
[[device]]
cs = "CE2"
words = 4
driver = "irq"
irq_period = "300us"
bitorder = "lsb"
"""


@pytest.fixture(scope="session")
def mixed_bus(tmp_path_factory):
    """(capture, truth) of MIXED_BUS, written by spigap synth."""
    from spigap.cli import main

    d = tmp_path_factory.mktemp("mixed-bus")
    (d / "mixed.toml").write_text(MIXED_BUS)
    assert main(["synth", "--config", str(d / "mixed.toml"), "-o", str(d / "mixed.sr"),
                 "--truth", str(d / "mixed.json")]) == 0
    return d / "mixed.sr", json.loads((d / "mixed.json").read_text())


def _sigrok_version() -> str:
    global _SIGROK_VERSION
    if _SIGROK_VERSION is None:
        _SIGROK_VERSION = subprocess.run(["sigrok-cli", "--version"], capture_output=True, text=True).stdout
    return _SIGROK_VERSION


def _fingerprint(path: pathlib.Path) -> str:
    """Content fingerprint of a capture: a zip's (.sr) member names, sizes and
    CRC-32s, which cover every byte, without reading 1 GB; else a hash of the file."""
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            return repr([(i.filename, i.file_size, i.CRC) for i in z.infolist()])
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _content_size(path: pathlib.Path) -> int:
    """Bytes sigrok-cli decodes: a zip's (.sr) inflated size, else the file's."""
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            return sum(i.file_size for i in z.infolist())
    return path.stat().st_size


def _cache_key(args: list[str], decoders_dir: pathlib.Path | None) -> str | None:
    if os.environ.get("SPIGAP_TEST_CACHE") == "off":
        return None
    inputs = [pathlib.Path(a) for i, a in enumerate(args) if i and args[i - 1] == "-i"]
    if not any(p.is_file() and _content_size(p) > BIG_INPUT for p in inputs):
        return None
    h = hashlib.sha256(_sigrok_version().encode())
    h.update(repr([a if pathlib.Path(a) not in inputs else _fingerprint(pathlib.Path(a)) for a in args]).encode())
    if decoders_dir is not None:
        for f in sorted(decoders_dir.rglob("*.py")):
            h.update(f.relative_to(decoders_dir).as_posix().encode() + f.read_bytes())
    return h.hexdigest()


# the cache lives in the checkout's build/ folder (ignored by git, removed by `make clean`),
# never in the user's home: SPIGAP_TEST_CACHE names another folder, or "off"
TEST_CACHE = ROOT / "build" / "test-cache"


def _cache_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("SPIGAP_TEST_CACHE") or TEST_CACHE) / "sigrok-cli"


def run_sigrok(args: list[str], *, decoders_dir: pathlib.Path | None = DECODERS, timeout: int = 600) -> str:
    """Run sigrok-cli; fail on any 'srd:' error line (sigrok-cli exits 0 even when a
    decoder raises). Returns stdout. Runs on big inputs are cached (see BIG_INPUT)."""
    key = _cache_key(args, decoders_dir)
    cached = _cache_dir() / f"{key}.json" if key else None
    if cached is not None and cached.is_file():
        rc, stdout, stderr = json.loads(cached.read_text())
    else:
        env = dict(os.environ)
        if decoders_dir is not None:
            env["SIGROKDECODE_DIR"] = str(decoders_dir)
        proc = subprocess.run(["sigrok-cli", *args], capture_output=True, text=True, env=env, timeout=timeout)
        rc, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
        if cached is not None and rc == 0:
            cached.parent.mkdir(parents=True, exist_ok=True)
            tmp = cached.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps([rc, stdout, stderr]))
            os.replace(tmp, cached)
    errors = [line for line in stderr.splitlines() if "srd:" in line or "Traceback" in line]
    assert rc == 0, f"sigrok-cli {' '.join(args)} exited {rc}: {stderr[-2000:]}"
    assert not errors, f"sigrok-cli {' '.join(args)} reported decoder errors:\n{stderr[-4000:]}"
    return stdout


# ------------------------------------------------------- decoder test helpers

ANNOTATION = re.compile(r'^(\d+)-(\d+) (\w+)-\d+: ([\w-]+): (.*)$')


def sigrok_annotations(capture, stack: str, pd_id: str):
    """Annotations of decoder ``pd_id`` as (ss, es, class, [texts]), plus the raw
    stdout, from ``sigrok-cli -l 4 -i capture -P stack -A pd_id``.

    The same run at the default log level goes through run_sigrok() first,
    which fails on any srd: line; at -l 4 stderr is full of srd: debug lines,
    so there only tracebacks and srd: ...Error/Exception lines fail."""
    args = ["-i", str(capture), "-P", stack, "-A", pd_id]
    run_sigrok(args)
    env = dict(os.environ, SIGROKDECODE_DIR=str(DECODERS))
    proc = subprocess.run(["sigrok-cli", "-l", "4", *args], capture_output=True, text=True, env=env, timeout=600)
    bad = [ln for ln in proc.stderr.splitlines()
           if "Traceback" in ln or re.search(r"srd: \w+(Error|Exception)\b", ln) or "failed" in ln]
    assert proc.returncode == 0 and not bad, proc.stderr[-3000:]
    out = []
    for ln in proc.stdout.splitlines():
        mt = ANNOTATION.match(ln)
        assert mt and mt[3] == pd_id, f"unexpected sigrok-cli line {ln!r}"
        out.append((int(mt[1]), int(mt[2]), mt[4], re.findall(r'"((?:[^"\\]|\\.)*)"', mt[5])))
    return out, proc.stdout


def capture_channels(sr) -> list[str]:
    """Channel names of a .sr (its metadata's probeN keys)."""
    with zipfile.ZipFile(sr) as z:
        meta = z.read("metadata").decode()
    return [ln.split("=", 1)[1] for ln in meta.splitlines() if re.match(r"^probe\d+=", ln.strip())]


def load_plain_module(decoder_id: str, module: str):
    """A decoder's plain module loaded by file path as the analyzer does (in a bare
    package, without sigrokdecode), under its own package name for the tests."""
    return _resources.load_plain_module(DECODERS / decoder_id, module, f"{decoder_id}_under_test")


def load_decoder_class(decoder_id: str):
    """The Decoder class of one of our decoders, imported as a package under the
    package's stand-in ``sigrokdecode`` module (spigap.sigrok.pdinfo; only what pd.py
    needs at class definition)."""
    from spigap.sigrok import pdinfo

    return pdinfo.load_decoder_class(DECODERS / decoder_id)


def assert_sigrok_naming_rules(D, decoder_id: str):
    """libsigrokdecode 0.5.3 load rules and master's HACKING naming."""
    assert D.api_version == 3 and D.id == decoder_id
    assert isinstance(D.inputs, list) and isinstance(D.outputs, list)
    assert isinstance(D.tags, list) and D.tags
    assert len(D.desc) <= 55 and D.desc.endswith(".")
    classes = [c[0] for c in D.annotations]
    rows = [r[0] for r in D.annotation_rows]
    assert len(set(classes)) == len(classes) and len(set(rows)) == len(rows)
    assert not set(classes) & set(rows)
    assert all(r.endswith("s") for r in rows) and not any(c.endswith("s") for c in classes)
    assert all(isinstance(r[2], tuple) for r in D.annotation_rows)
    assert sorted(i for r in D.annotation_rows for i in r[2]) == list(range(len(classes)))
    for name in ("reset", "start", "decode"):
        assert callable(getattr(D, name))


@pytest.fixture(autouse=True)
def _memory_given_back():
    """After each test, the memory it freed goes back to the system (spigap.api.release_free_memory,
    what analyze_file does after each analysis): glibc's malloc keeps freed memory in its heaps,
    and an xdist worker that ran a thousand tests held the high-water mark of them all (1.6 GB
    at the end of make test, most of it freed)."""
    yield
    from spigap.api import release_free_memory

    release_free_memory()


@pytest.fixture(autouse=True)
def _checked_edge_streams(monkeypatch):
    """Every reader opened through ``spigap.io.open_capture`` in a test has its edge
    stream wrapped in ``check_stream`` (the reader contract: tick 0 first, strictly
    increasing ticks, no bits beyond the request, non-empty), so any test that reads
    a capture also checks the reader that read it."""
    import spigap.io as io_mod
    from spigap.io.base import check_stream

    opened = io_mod._open

    def checked(path, input_format, opts):
        reader = opened(path, input_format, opts)
        edges = reader.edges

        def checked_edges(channels):
            return check_stream(edges(channels), len(channels), path=reader.info.path)

        reader.edges = checked_edges
        return reader

    monkeypatch.setattr(io_mod, "_open", checked)


def spigap_main(*args, cwd: pathlib.Path = ROOT):
    """``spigap ARGS`` run by the command line's main() in this process, from ``cwd``: the
    returncode, stdout and stderr a subprocess would give, without a new interpreter's start-up
    (about 0.15 s of CPU a run). For tests of what a command prints and exits with; what needs a
    process of its own (signals, exit codes at interpreter exit, the installed console script:
    test_installed.py, test_faults.py) keeps subprocess.run."""
    import contextlib
    import io
    import types

    from spigap.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.chdir(cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])      # given argv: main leaves this process's gc alone
    return types.SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())

# the AD7606 before/after report (README, "Did the patch help?"): 24 figures, about 6 s of CPU.
# tests/test_report.py reads its HTML and PNGs, tests/test_report_browser.py renders it in
# Chromium: both modules are in the xdist group "ad7606_report" (one worker), so it is drawn
# once a run, not once per module and worker
AD7606_OLD = CAPTURES / "ad7606-pi5-k6.6.31.sr"
AD7606_NEW = CAPTURES / "ad7606-pi5-k6.12.25.sr"
AD7606_REPORT_TITLE = "AD7606 <6.6 vs 6.12>"     # escaped in the page (test_report.py checks)


@pytest.fixture(scope="session")
def ad7606_compare_report(tmp_path_factory) -> tuple[pathlib.Path, pathlib.Path]:
    """(report.html, the --png folder) of ``spigap report --before 6.6.31 --after 6.12.25``."""
    d = tmp_path_factory.mktemp("ad7606-report")
    out, pngs = d / "r.html", d / "png"
    p = spigap_main("report", "--before", AD7606_OLD, "--after", AD7606_NEW, "-o", out,
                    "--png", pngs, "--bootstrap", "200", "--title", AD7606_REPORT_TITLE)
    assert p.returncode == 0, p.stderr
    return out, pngs

# SPIGAP_TEST_CPU_LOG=<file>: each test's CPU time (this process and the children it waited
# for: the spigap, sigrok-cli, ... subprocesses) appended to <file> as "seconds<TAB>phase<TAB>nodeid",
# one line per phase (setup, call, teardown). Wall times mislead on a shared machine; this is what
# the suite's CPU budget (README, "Development") is measured by.
_CPU_LOG = os.environ.get("SPIGAP_TEST_CPU_LOG")
if _CPU_LOG:
    import resource

    def _cpu_now() -> float:
        s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime

    def _timed(phase):
        @pytest.hookimpl(hookwrapper=True)
        def hook(item, *args, **kwargs):
            t0 = _cpu_now()
            yield
            with open(_CPU_LOG, "a") as f:
                f.write(f"{_cpu_now() - t0:.3f}\t{phase}\t{item.nodeid}\n")
        return hook

    pytest_runtest_setup = _timed("setup")
    pytest_runtest_call = _timed("call")
    pytest_runtest_teardown = _timed("teardown")

# SPIGAP_TEST_RSS_LOG=<file>: each test's memory, appended to <file> as "pid<TAB>phase<TAB>
# rss_before<TAB>rss_after<TAB>peak<TAB>malloc_used<TAB>malloc_free<TAB>nodeid" in MB, one line per
# phase: rss is this process's resident set (/proc/self/status VmRSS), peak its high-water mark so
# far (ru_maxrss), malloc_used/malloc_free what glibc's malloc has handed out and holds free (all
# its arenas, mallinfo2) after the phase. Each xdist worker writes its own lines (pid). A test
# whose rss_after stays above its rss_before left memory behind: live objects if malloc_used grew,
# the allocator's free memory if malloc_free did. What the suite's memory figure (BENCHMARKS.md,
# "make test's memory") is measured by.
_RSS_LOG = os.environ.get("SPIGAP_TEST_RSS_LOG")
if _RSS_LOG:
    import ctypes
    import resource

    class _Mallinfo2(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                    "fsmblks", "uordblks", "fordblks", "keepcost")]

    try:
        _mallinfo2 = ctypes.CDLL(None).mallinfo2
        _mallinfo2.restype = _Mallinfo2
    except (OSError, AttributeError):        # not glibc >= 2.33: the malloc columns are nan
        _mallinfo2 = None

    def _rss_mb() -> float:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return float("nan")

    def _malloc_mb() -> tuple[float, float]:
        if _mallinfo2 is None:
            return float("nan"), float("nan")
        m = _mallinfo2()
        return (m.uordblks + m.hblkhd) / 2**20, m.fordblks / 2**20

    def _rss_logged(phase):
        @pytest.hookimpl(hookwrapper=True)
        def hook(item, *args, **kwargs):
            before = _rss_mb()
            yield
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            used, free = _malloc_mb()
            with open(_RSS_LOG, "a") as f:
                f.write(f"{os.getpid()}\t{phase}\t{before:.0f}\t{_rss_mb():.0f}\t{peak:.0f}\t{used:.0f}\t{free:.0f}"
                        f"\t{item.nodeid}\n")
        return hook

    if _CPU_LOG:
        raise pytest.UsageError("SPIGAP_TEST_RSS_LOG and SPIGAP_TEST_CPU_LOG wrap the same hooks: set one at a time")
    pytest_runtest_setup = _rss_logged("setup")
    pytest_runtest_call = _rss_logged("call")
    pytest_runtest_teardown = _rss_logged("teardown")


# tests/slow_tests.txt: the tests measured over cpu_budget.THRESHOLD s of CPU, marked `slow`
# here (make test leaves them out; make test-all and CI run them). tryfirst: before `-m`
# deselects and before pytest-xdist appends its @group to the ids.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    from cpu_budget import read_list

    listed = read_list()
    for item in items:
        if item.nodeid in listed:
            item.add_marker(pytest.mark.slow)
