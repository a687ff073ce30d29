"""spigap synth's shared-bus scenarios (analyzer/spigap/synth/bus.py): the controller queue's
model is self-consistent, and what it writes is what other tools read.

Oracles: sigrok-cli's own spi decoder, one per CS line (as its users stack it), reads
every device's words from the .sr; the project's ftrace parser reads the trace; and
the queue's invariants (one message at a time, FIFO, a queued message waits for the
one ahead of it) are checked on the truth.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import CAPTURES, capture_channels, run_sigrok

from spigap.api import analyze_device
from spigap.cli import main
from spigap.errors import UsageError
from spigap.synth import Bus, write
from spigap.trace import ftrace

RECIPE = CAPTURES / "shared-rpi-mcp3008-mcp2518fd.toml"


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    d = tmp_path_factory.mktemp("synth")
    cap, truth, trace = d / "bus.sr", d / "bus.json", d / "bus.txt"
    assert main(["synth", "--config", str(RECIPE), "-o", str(cap), "--truth", str(truth), "--ftrace", str(trace),
                 "--trace-ns"]) == 0
    return cap, json.loads(truth.read_text()), trace


def test_one_message_at_a_time_fifo(written):
    _, tr, _ = written
    msgs = tr["messages"]
    starts = [m["start_s"] for m in msgs]
    assert starts == sorted(starts)
    for prev, m in zip(msgs, msgs[1:]):
        assert m["first_assert_s"] > prev["last_deassert_s"]            # the controller holds the bus
        assert m["start_s"] >= prev["done_s"] or not m["queued"]
    queued = [m for m in msgs if m["queued"]]
    assert queued and len(queued) < len(msgs)
    for m in queued:
        # submitted while another message held the controller (behind it), or in the moment
        # between that message's done and the controller going idle (the pump takes it)
        if m["behind"]:
            assert m["behind"][-1][0] != m["device"]        # a device's own messages are synchronous
            assert 0 < m["queued_s"] <= m["start_s"] - m["submit_s"] + 1e-12
        else:
            assert m["queued_s"] == 0
    for m in msgs:
        if not m["queued"]:
            assert m["queued_s"] == 0
        assert m["own_s"] >= -1e-12


def test_sigrok_reads_every_device(written):
    """sigrok-cli's spi decoder on each CS line reads the words the truth says."""
    cap, tr, _ = written
    for name, dev in tr["devices"].items():
        out = run_sigrok(["-i", str(cap), "-P", f"spi:clk=SCLK:mosi=MOSI:miso=MISO:cs={name}",
                          "-A", "spi=mosi-data"])
        words = [int(line.split()[-1], 16) for line in out.splitlines() if line.strip()]
        assert words == [w for win in dev["mosi"] for w in win]


def test_each_device_has_its_own_settings(mixed_bus):
    """Per-device mode, word size, bit order and CS polarity ([[device]] keys): sigrok-cli's
    spi decoder, given each device's settings, reads the words the truth says on its line."""
    cap, tr = mixed_bus
    opts = {"CE0": "", "CE1": ":cpha=1:wordsize=12:cs_polarity=active-high", "CE2": ":bitorder=lsb-first"}
    for name, dev in tr["devices"].items():
        out = run_sigrok(["-i", str(cap), "-P", f"spi:clk=SCLK:mosi=MOSI:miso=MISO:cs={name}{opts[name]}",
                          "-A", "spi=mosi-data"])
        words = [int(line.split()[-1], 16) for line in out.splitlines() if line.strip()]
        assert len(words) > 50
        assert words == [w for win in dev["mosi"] for w in win], name
    # and the settings matter: the bus's own (mode 0, 8 bits, active low) misread CE1
    out = run_sigrok(["-i", str(cap), "-P", "spi:clk=SCLK:mosi=MOSI:miso=MISO:cs=CE1", "-A", "spi=mosi-data"])
    words = [int(line.split()[-1], 16) for line in out.splitlines() if line.strip()]
    assert words != [w for win in tr["devices"]["CE1"]["mosi"] for w in win]


def test_the_trace_holds_every_message(written):
    _, tr, trace = written
    t = ftrace.parse(trace)
    for name, dev in tr["devices"].items():
        spi = dev["spi_device"]
        n_msg = sum(1 for m in tr["messages"] if m["device"] == name)
        assert len(t.rows("spi:spi_message_submit", spi)) == n_msg
        assert len(t.rows("spi:spi_set_cs:activate", spi)) == dev["transfers"]
        assert len(t.rows("spi:spi_message_done", spi)) == n_msg
    # the clock: bus = offset + trace (no drift here), ns timestamps
    sub = t.rows("spi:spi_message_submit")
    first = min(m["submit_s"] for m in tr["messages"])
    assert abs(t.ts[sub[0]] + tr["trace"]["offset_s"] - first) < 2e-9


def test_one_device_is_a_bus_of_one(tmp_path):
    """[[device]] tables with one device: the controller queue, the writer, the truth and the trace
    of a bus of several, and the capture an ordinary one-device capture: SCLK, MOSI, MISO and one
    CS line, whose words sigrok-cli's spi decoder reads as the truth says and whose transfers the
    analyzer finds to half a sample."""
    rec = tmp_path / "one.toml"
    rec.write_text('[capture]\nsamplerate = "50MHz"\nseed = 3\nduration = "2ms"\n[spi]\nsclk = "4MHz"\n'
                   '[[device]]\ncs = "CE0"\ntraffic = "mcp3008"\nthink = "30us"\ncs_setup = "1.6us"\n'
                   'cs_hold = "0.4us"\nidle_clocks = 1\n')
    cap, truth, trace = tmp_path / "one.sr", tmp_path / "one.json", tmp_path / "one.txt"
    assert main(["synth", "--config", str(rec), "-o", str(cap), "--truth", str(truth), "--ftrace", str(trace)]) == 0
    tr = json.loads(truth.read_text())
    dev = tr["devices"]["CE0"]
    assert list(tr["devices"]) == ["CE0"] and dev["transfers"] > 20
    assert tr["bus"]["handover_s"] == [] and not any(m["queued"] for m in tr["messages"])   # nobody to wait for
    assert capture_channels(cap) == ["SCLK", "MOSI", "MISO", "CE0"]
    out = run_sigrok(["-i", str(cap), "-P", "spi:clk=SCLK:mosi=MOSI:miso=MISO:cs=CE0", "-A", "spi=mosi-data"])
    assert [int(line.split()[-1], 16) for line in out.splitlines() if line.strip()] == [
        w for win in dev["mosi"] for w in win]
    a = analyze_device(cap)
    assert a.n == dev["transfers"]
    half = 0.5 / tr["samplerate_hz"] + 1e-12
    assert np.all(np.abs(a.start * a.tick_s - np.asarray(dev["cs_assert_s"])) <= half)
    assert np.all(np.abs(a.end * a.tick_s - np.asarray(dev["cs_deassert_s"])) <= half)
    assert len(ftrace.parse(trace).rows("spi:spi_message_submit", "spi0.0")) == len(tr["messages"])


def test_bad_recipes_are_one_line(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("".join(f'[[device]]\ncs = "CE{i}"\n' for i in range(9)))
    with pytest.raises(UsageError, match="1..8"):
        Bus.from_toml(bad)
    bad.write_text('[[device]]\ncs = "CE0"\n[[device]]\ncs = "CE0"\n')
    with pytest.raises(UsageError, match="own cs"):
        Bus.from_toml(bad)
    bad.write_text('[[device]]\ncs = "A"\ntraffic = "x"\n[[device]]\ncs = "B"\n')
    with pytest.raises(UsageError, match="traffic"):
        Bus.from_toml(bad)
    bad.write_text('[spi]\nmode = 0\n[[device]]\ncs = "A"\nmode = 2\n[[device]]\ncs = "B"\n')
    with pytest.raises(UsageError, match="CPOL"):
        Bus.from_toml(bad)
    bad.write_text('[[device]]\ncs = "A"\ncs_polarity = "up"\n[[device]]\ncs = "B"\n')
    with pytest.raises(UsageError, match="cs_polarity"):
        Bus.from_toml(bad)
    bad.write_text('[[device]]\ncs = "A"\n[[device]]\ncs = "B"\n[faults]\noverlap = [999]\n')
    with pytest.raises(UsageError, match="handovers"):
        write(Bus.from_toml(bad), tmp_path / "x.sr")


def test_64_bit_words_and_huge_messages(tmp_path, capsys):
    """wordsize 64 draws its MISO words whole (it was exit 3: numpy's int64 bound); a message of
    10**9 words is refused in one line."""
    rec = tmp_path / "w64.toml"
    rec.write_text('[capture]\nsamplerate = "4MHz"\nduration = "1ms"\n[spi]\nsclk = "500kHz"\n'
                   '[[device]]\ncs = "CE0"\nwords = 1\nwordsize = 64\n[[device]]\ncs = "CE1"\n')
    assert main(["synth", "--config", str(rec), "-o", str(tmp_path / "w.sr"), "--truth", str(tmp_path / "w.json")]) == 0
    assert json.loads((tmp_path / "w.json").read_text())["devices"]["CE0"]["transfers"] >= 3
    capsys.readouterr()
    rec.write_text(rec.read_text().replace("words = 1", "words = 1000000000"))
    assert main(["synth", "--config", str(rec), "-o", str(tmp_path / "w2.sr")]) == 2
    assert "65536" in capsys.readouterr().err


def test_no_time_between_windows_is_a_usage_error(tmp_path, capsys):
    """Every controller latency 0: two windows would touch. A recipe the user wrote, so exit 2 with
    the keys that fix it, not an internal error (exit 3)."""
    lat = ("submit_to_busy busy_to_start start_to_set_cs gpio_cs_latency gpio_cs_off_latency "
           "transfer_start_to_sclk sclk_to_transfer_stop deassert_to_done done_to_start done_to_idle "
           "idle_to_exit enter_to_submit").split()
    rec = tmp_path / "zero.toml"
    rec.write_text('[capture]\nsamplerate = "4MHz"\nduration = "200us"\n[spi]\nsclk = "1MHz"\n[controller]\n'
                   + "".join(f'{k} = "0us"\n' for k in lat)
                   + '[[device]]\ncs = "CE0"\nthink = "0us"\n[[device]]\ncs = "CE1"\nthink = "0us"\n')
    assert main(["synth", "--config", str(rec), "-o", str(tmp_path / "z.sr")]) == 2
    err = capsys.readouterr().err
    assert "no time between two windows" in err and "done_to_start" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "z.sr").exists()


def test_flags_of_one_device_scenarios_are_refused(tmp_path, capsys):
    assert main(["synth", "--config", str(RECIPE), "-o", str(tmp_path / "x.sr"), "--jitter", "1us"]) == 2
    assert "shared-bus scenario" in capsys.readouterr().err


def test_three_devices_in_capture_order(tmp_path):
    sh = Bus.from_toml(CAPTURES / "shared-three-faults.toml")
    b = sh.capture()
    tr = b.truth()
    assert list(tr["devices"]) == ["CS0", "CS1", "CS2"]
    assert len(tr["bus"]["overlaps"]) == 2 and len(tr["bus"]["stray_sclk"]) == 3
    a = np.asarray(b.cs_assert)
    assert np.all(np.diff(a) > 0)
