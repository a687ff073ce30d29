"""spigap convert: scope captures (and every other input) as .sr/VCD that the real
sigrok-cli 0.7.2 and PulseView 0.4.2 open and decode.

The oracle: sigrok-cli's stock i2c decoder on the conversions of one acquisition
saved three ways (the Tektronix ISF pair, the scope's own RTC.csv, libsigrok's
analog RTC.sr) must print the same transactions, the DS1307 clock read of the
sigrok-dumps README; PulseView must load the .sr and decode it to the last sample.
"""

from __future__ import annotations

import gzip
import os
import pathlib
import shutil
import signal
import subprocess

import numpy as np
import pytest

from conftest import run_sigrok
from spigap.cli import main
from spigap.io import open_capture

DATA = pathlib.Path(__file__).resolve().parent / "data" / "scopes"
ISF = [DATA / "tek0000CH1.isf", DATA / "tek0000CH2.isf"]
I2C_ROWS = "i2c=address-read:address-write:data-read:data-write"
# the DS1307's address 0x68: register pointer 0 written, then 7 time registers read
DS1307_READ = ["Write", "Address write: 68", "Data write: 00", "Read", "Address read: 68"] + [
    f"Data read: {b}" for b in ("25", "23", "21", "06", "13", "11", "21")]


@pytest.fixture(scope="module")
def rtc_csv(tmp_path_factory) -> pathlib.Path:
    p = tmp_path_factory.mktemp("rtc") / "RTC.csv"
    p.write_bytes(gzip.decompress((DATA / "RTC.csv.gz").read_bytes()))
    return p


def convert(tmp_path, inputs, name, *extra) -> pathlib.Path:
    out = tmp_path / name
    assert main(["convert", *map(str, inputs), "-o", str(out), *extra]) == 0
    return out


def i2c(path, scl, sda, fmt=None) -> list[str]:
    args = (["-I", fmt] if fmt else []) + ["-i", str(path), "-P", f"i2c:scl={scl}:sda={sda}", "-A", I2C_ROWS]
    return [ln.split(": ", 1)[1] for ln in run_sigrok(args, decoders_dir=None).splitlines() if ln.strip()]


def test_one_acquisition_three_files_same_i2c_transactions(tmp_path, rtc_csv):
    isf = convert(tmp_path, ISF, "isf.sr")
    csv = convert(tmp_path, [rtc_csv], "csv.sr")
    sr = convert(tmp_path, [DATA / "RTC.sr"], "sr.sr")
    got = [i2c(isf, "Ch2", "Ch1"), i2c(csv, "CH2", "CH1"), i2c(sr, "SCL", "SDA")]
    assert got[0] == DS1307_READ
    assert got[1] == got[0] and got[2] == got[0]


def test_sr_is_what_sigrok_cli_reads(tmp_path):
    out = convert(tmp_path, ISF, "isf.sr")
    show = run_sigrok(["-i", str(out), "--show"])
    assert "Samplerate: 50000000" in show and "- Ch1: logic" in show and "- Ch2: logic" in show
    assert "Logic sample count: 100000" in show


def test_sr_bytes_are_the_same_each_time(tmp_path, monkeypatch):
    """The same input gives the same .sr, byte for byte (zip members carry a fixed time,
    mode 0644): a regenerated or converted capture does not differ by when it was written;
    SOURCE_DATE_EPOCH, when set, is the members' time."""
    import time
    import zipfile

    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    first = convert(tmp_path, ISF, "a.sr")
    time.sleep(2.1)                      # zip times have 2 s resolution
    second = convert(tmp_path, ISF, "b.sr")
    assert first.read_bytes() == second.read_bytes()
    with zipfile.ZipFile(first) as zf:
        assert {(i.date_time, i.external_attr >> 16) for i in zf.infolist()} == {((1980, 1, 1, 0, 0, 0), 0o644)}
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")       # 2023-11-14 22:13:20 UTC
    with zipfile.ZipFile(convert(tmp_path, ISF, "c.sr")) as zf:
        assert {i.date_time for i in zf.infolist()} == {(2023, 11, 14, 22, 13, 20)}


def test_sr_holds_the_edges_spigap_analyzes(tmp_path):
    """Tick for tick: the source's edge stream and the .sr's (read back by the .sr reader)."""
    out = convert(tmp_path, ISF, "isf.sr")

    def stream(path):
        with open_capture(path) as r:
            blocks = list(r.edges(["Ch1", "Ch2"]))
            return np.concatenate([b.ticks for b in blocks]), np.concatenate([b.states for b in blocks]), r.end_tick

    a, b = stream(ISF), stream(out)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]) and a[2] == b[2] == 100_000


def test_vcd_is_read_by_sigrok_cli_and_pyvcd(tmp_path):
    from vcd.reader import TokenKind, tokenize

    out = convert(tmp_path, ISF, "isf.vcd")
    assert i2c(out, "Ch2", "Ch1", fmt="vcd") == DS1307_READ
    with open(out, "rb") as f:
        tokens = list(tokenize(f))
    scale = next(t.timescale for t in tokens if t.kind is TokenKind.TIMESCALE)
    assert (int(scale.magnitude), str(scale.unit.value)) == (10, "ns")       # 20 ns ticks
    times = [t.time_change for t in tokens if t.kind is TokenKind.CHANGE_TIME]
    assert times[0] == 0 and times[-1] == 200_000 and times == sorted(times)


def test_rate_resamples_and_channels_pick(tmp_path):
    out = convert(tmp_path, ISF, "slow.sr", "--rate", "10e6", "--channels", "ch2")
    show = run_sigrok(["-i", str(out), "--show"])
    assert "Samplerate: 10000000" in show and "Logic sample count: 20000" in show and "Ch1" not in show
    with open_capture(ISF) as r:
        fine = np.concatenate([b.ticks for b in r.edges(["Ch2"])])
    with open_capture(out) as r:
        coarse = np.concatenate([b.ticks for b in r.edges(["Ch2"])])
    assert np.array_equal(coarse, np.unique(fine // 5))      # an edge lands on the sample at or before it


def test_failed_conversion_leaves_no_file(tmp_path, capsys):
    bad = tmp_path / "bad.isf"
    bad.write_bytes(ISF[0].read_bytes().replace(b"XINCR 20.0000E-9", b"XINCR 0.0000E-9"))
    out = tmp_path / "out.sr"
    out.write_text("keep me")
    assert main(["convert", str(bad), "-o", str(out)]) == 2
    assert "sample interval" in capsys.readouterr().err
    assert out.read_text() == "keep me" and sorted(p.name for p in tmp_path.iterdir()) == ["bad.isf", "out.sr"]


def test_a_fifo_is_never_replaced(tmp_path, capsys):
    fifo = tmp_path / "out.sr"
    os.mkfifo(fifo)
    assert main(["convert", str(ISF[0]), "-o", str(fifo)]) == 2
    assert "not a regular file" in capsys.readouterr().err
    assert fifo.is_fifo()


def test_unknown_output_extension(tmp_path, capsys):
    assert main(["convert", str(ISF[0]), "-o", str(tmp_path / "x.txt")]) == 2
    assert "cannot tell the output format" in capsys.readouterr().err


def test_convert_memory_does_not_grow_with_capture_length(tmp_path, monkeypatch):
    """Samples are rendered chunk by chunk: 8x the samples, the same peak."""
    import tracemalloc

    from spigap.cli import convert as conv
    from spigap.io import scopefile

    monkeypatch.setattr(scopefile, "SLICE", 1 << 16)
    monkeypatch.setattr(conv, "CHUNK_BYTES", 1 << 16)
    head = ISF[1].read_bytes()[:ISF[1].read_bytes().index(b":CURVE") + len(":CURVE ")]
    peaks = []
    for n in (1 << 20, 1 << 23):
        t = np.arange(n)
        raw = np.where((t // 41) % 2 == 0, -16000, 16000).astype(">i2").tobytes()
        size = str(len(raw)).encode()
        p = tmp_path / f"{n}.isf"
        p.write_bytes(head.replace(b"NR_PT 100000", b"NR_PT %d" % n) + b"#" + str(len(size)).encode() + size
                      + raw + b"\n")
        del raw, t
        tracemalloc.start()
        assert main(["convert", str(p), "-o", str(tmp_path / f"{n}.sr")]) == 0
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
    assert peaks[1] < 1.25 * peaks[0] + (2 << 20), f"{peaks[0] / 1e6:.1f} MB -> {peaks[1] / 1e6:.1f} MB"


# ------------------------------------------------------------------ PulseView
@pytest.fixture(scope="module")
def pulseview() -> str:
    exe = shutil.which("pulseview")
    if exe is None:
        pytest.fail("pulseview is not installed: apt-get install pulseview")
    return exe


def test_pulseview_opens_and_decodes_the_converted_isf_pair(pulseview, tmp_path):
    """Offscreen PulseView loads the .sr with an i2c decode signal (the .pvs beside it,
    written by spigap decoders pvs) and decodes every sample without an error."""
    from test_pulseview import assert_restored, run_pulseview

    from spigap.sigrok import pvs

    out = convert(tmp_path, ISF, "rtc.sr")
    assert main(["decoders", "pvs", str(out), "--stack", "i2c:scl=Ch2:sda=Ch1"]) == 0
    wanted = pvs.read(out.with_suffix(".pvs").read_text())
    got, log = run_pulseview(pulseview, out, tmp_path / "home")
    assert_restored(wanted, got, log)


def test_pulseview_screenshot_of_the_converted_isf_pair(pulseview, tmp_path):
    """A real window under Xvfb: the capture and its I²C annotations are drawn
    (PulseView's log says the decoder reached the last sample; the screen holds
    the traces, not a blank or an error dialog)."""
    for tool in ("xvfb-run", "xdotool", "import"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is missing: apt-get install xvfb xdotool imagemagick")
    out = convert(tmp_path, ISF, "rtc.sr")
    assert main(["decoders", "pvs", str(out), "--stack", "i2c:scl=Ch2:sda=Ch1"]) == 0
    shot = screenshot(pulseview, out, tmp_path)
    import matplotlib.image

    img = matplotlib.image.imread(shot)[..., :3]
    assert img.shape[:2] == (800, 1280)
    colors = np.unique((img.reshape(-1, 3) * 255).astype(np.uint8), axis=0)
    assert len(colors) > 50, f"the screen shows {len(colors)} colours: PulseView drew nothing"


def screenshot(exe: str, capture: pathlib.Path, tmp: pathlib.Path) -> pathlib.Path:
    """PulseView on ``capture`` (its .pvs beside it) under Xvfb, decoded, grabbed as PNG."""
    from test_pulseview import DECODERS, decoder_errors, decoded_all, total_samples

    home = tmp / "xhome"
    (home / "run").mkdir(parents=True)
    os.chmod(home / "run", 0o700)
    log, png = tmp / "pulseview.log", tmp / "shot.png"
    samples = total_samples(capture)
    script = tmp / "shoot.sh"
    script.write_text(f"""#!/bin/sh
pulseview -l 4 -c '{capture}' >'{log}' 2>&1 &
pid=$!
i=0
while [ $i -lt 600 ]; do
  grep -q 'handled all samples (abs cur {samples} / abs end {samples})' '{log}' && break
  kill -0 $pid 2>/dev/null || break
  sleep 0.1; i=$((i+1))
done
for w in $(xdotool search --onlyvisible --class pulseview 2>/dev/null); do
  xdotool windowmove $w 0 0 windowsize $w 1280 800 || true
done
sleep 2
import -window root '{png}'
kill -TERM $pid; wait $pid
""")
    env = dict(os.environ, HOME=str(home), XDG_CONFIG_HOME=str(home / "config"),
               XDG_RUNTIME_DIR=str(home / "run"), SIGROKDECODE_DIR=str(DECODERS))
    env.pop("QT_QPA_PLATFORM", None)
    proc = subprocess.Popen(["xvfb-run", "-a", "-s", "-screen 0 1280x800x24", "sh", str(script)], env=env,
                            start_new_session=True)
    try:
        proc.wait(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    text = log.read_text()
    assert decoded_all(text, samples) >= 1, f"PulseView did not decode {capture}:\n{text[-3000:]}"
    assert decoder_errors(text) == [], "\n".join(decoder_errors(text))
    assert png.exists(), "no screenshot"
    return png

