"""Which of two data lines is MOSI (core/infer/mosi_miso.py) on a controller polling a register, at
three samples per clock period: the PixArt HERO sensor's captures of the second corpus (a 4 MHz
mode-3 clock sampled at 12 MS/s; docs/inference.md, "A second corpus"). There neither line switches
in the clock edge's very sample (the lag evidence says nothing), and both lines' first bytes repeat:
the host sends the same read command (0x80 0x85 0x86 ...) every time, the sensor's first byte is a
status whose motion bit comes and goes. The old rule ("the line whose first word repeats more is the
peripheral's") took the host's line for MISO and stated it at 0.80."""

from __future__ import annotations

import numpy as np
import pytest

from spigap.api import detect_file
from spigap.core.infer import calibration
from spigap.core.infer.mosi_miso import _length_fit
from spigap.synth.srwriter import Track, write_sr

POLL = [0x80, 0x85, 0x86, 0x87, 0x88, 0x96, 0x80]   # read status, the deltas, a surface register
WRITE = [0x0B, 0x70]                                 # a register write now and then


class _Lines:
    """Changes of a few logic lines, put in any order, written as a .sr (its tracks sort them)."""

    def __init__(self, order: tuple[str, ...], initial: dict[str, int]):
        self.order, self.initial = order, initial
        self.ch: dict[str, tuple[list[int], list[int]]] = {k: ([], []) for k in order}

    def put(self, name: str, t: int, v: int) -> None:
        self.ch[name][0].append(t)
        self.ch[name][1].append(v)

    def write(self, path, samplerate: float, n_samples: int) -> None:
        write_sr(path, [Track(str(i), np.array(self.ch[k][0], np.int64), np.array(self.ch[k][1], np.uint8),
                              self.initial[k]) for i, k in enumerate(self.order)], samplerate, n_samples)


def _polling_capture(path, windows: int, write_every: int | None, seed: int = 5) -> None:
    """A mode-3 bus at 3 samples per clock period (12 MS/s, 4 MHz), channels renamed to numbers in
    the HERO captures' order (0 MOSI, 1 CS, 2 SCLK, 3 MISO). The host polls the motion registers
    (POLL, a 7-byte window), and every ``write_every``-th window writes a register instead (2 bytes);
    the sensor's first byte is a status (0x03, its motion bit 0x80 set in 40 % of the windows), then
    the registers' values. Each line changes in the falling edge's sample or the next one at random
    (MOSI 40 % in the edge's sample, MISO 63 %, as measured on the HERO captures)."""
    rng = np.random.default_rng(seed)
    lines = _Lines(("mosi", "cs", "clk", "miso"), {"mosi": 0, "cs": 1, "clk": 1, "miso": 0})
    put = lines.put
    level = {"mosi": 0, "miso": 0}
    t = 50
    for k in range(windows):
        status = 0x83 if rng.random() < 0.4 else 0x03
        if write_every and k % write_every == write_every - 1:
            mosi, miso = WRITE, [status, 0x00]
        else:
            deltas = [int(x) for x in rng.integers(0, 256, 4)]
            mosi, miso = POLL, [status, 0x88, *deltas, 0x20]
        put("cs", t, 0)
        f = t + 3
        bits = {name: [(b >> (7 - i)) & 1 for b in data for i in range(8)]
                for name, data in (("mosi", mosi), ("miso", miso))}
        for i in range(8 * len(mosi)):
            put("clk", f, 0)                      # the leading (falling) edge launches the bit
            put("clk", f + 2, 1)                  # the trailing (rising) edge samples it
            for name, same in (("mosi", 0.4), ("miso", 0.63)):
                if bits[name][i] != level[name]:
                    level[name] = bits[name][i]
                    put(name, f + (0 if rng.random() < same else 1), level[name])
            f += 3
        put("cs", f + 2, 1)
        t = f + 60
    lines.write(path, 12e6, t + 10)


def test_the_first_byte_that_fixes_each_transfers_length_is_the_controllers(tmp_path):
    """A read of seven bytes after the command 0x80, a write of two after 0x0B: the host's first byte
    tells how long the transfer is; the sensor's status byte, shifted out before it has seen the
    command, does not. MOSI is found ("two, length"), stated at that basis' measured share; the old
    rule took the host's line (its first byte repeats more) for MISO at 0.80."""
    _polling_capture(tmp_path / "p.sr", 120, write_every=8)
    settled, _, _ = detect_file(tmp_path / "p.sr")
    cfg, src = settled.cfg, settled.sources
    assert (cfg.clk, cfg.cs, cfg.mosi, cfg.miso) == ("2", "1", "0", "3")
    assert src["mosi"].basis == src["miso"].basis == "two, length"
    assert src["mosi"].confidence == calibration.stated("mosi", "two, length") >= 0.75
    assert "first byte tells how long each transfer is" in src["mosi"].note


def test_polling_one_command_is_no_evidence_of_the_direction(tmp_path):
    """Every window the same read: both lines' first bytes repeat (the host's in every window, the
    sensor's status in 60 %), and every transfer has one length. Which repeats more follows the data
    read, not who drives the line: no evidence, so the convention of lines alike (MOSI the first in
    channel order, right here by the wiring only) at 0.5 with a CHECK line naming --mosi; the old
    rule took the host's line for MISO at 0.80, "likely"."""
    _polling_capture(tmp_path / "p.sr", 120, write_every=None)
    settled, _, _ = detect_file(tmp_path / "p.sr")
    cfg, src = settled.cfg, settled.sources
    assert (cfg.mosi, cfg.miso) == ("0", "3")
    assert src["mosi"].basis == src["miso"].basis == "two, both repeat"
    assert src["mosi"].confidence == src["miso"].confidence == calibration.DEFAULT_ONLY
    assert any(w.startswith("mosi 0 is inferred with confidence 0.50") and "--mosi" in w
               for w in settled.warnings)


@pytest.mark.parametrize("words, length, fit", [
    ([1, 1, 1, 2, 2, 3, 3, 3], [8, 8, 8, 16, 16, 8, 8, 8], 1.0),     # each command its own length
    ([0] * 8, [8, 8, 8, 16, 16, 8, 8, 8], 0.75),                      # one first word: the common length
    (list(range(8)), [8, 8, 8, 16, 16, 8, 8, 8], 0.75),               # each seen once: no better
    ([1, 1, 2, 2], [8, 16, 8, 16], 0.0),                              # the others of its word disagree
])
def test_length_fit_leaves_each_window_out(words, length, fit):
    """A first word seen once cannot predict its own window's length (a counter or an ADC sample
    would fit every length perfectly otherwise): each window is predicted from the others."""
    assert _length_fit(np.array(words), np.array(length)) == pytest.approx(fit)


@pytest.mark.parametrize("name", ["st25r3916", "mrf24j40"])
def test_real_captures_renamed_are_told_apart_by_the_command_byte(name):
    """Two real captures of sigrok-dumps, every channel renamed to its number: the ST25R3916's
    register reads and writes and the MRF24J40's short and long address commands have transfers
    of several lengths, fixed by the controller's first byte; neither lags on one line only. The
    old rule answered them from the repeating first words ("two, clear", stated 0.80)."""
    from conftest import REAL_CAPTURES, real

    from spigap.io import open_capture

    file, _, opts, rate = REAL_CAPTURES[name]
    roles = dict(kv.split("=") for kv in opts.split(":"))     # the README's channel map
    with open_capture(real(file)) as r:
        chans = list(r.info.channels)
    settled, _, _ = detect_file(real(file), samplerate=rate,
                                channel_map=[",".join(f"{c}={i}" for i, c in enumerate(chans))])
    pos = {c: str(i) for i, c in enumerate(chans)}
    assert (settled.cfg.mosi, settled.cfg.miso) == (pos[roles["mosi"]], pos[roles["miso"]])
    assert settled.sources["mosi"].basis == "two, length"
    assert settled.sources["mosi"].confidence == calibration.stated("mosi", "two, length")


def _bit_banged_capture(path, samplerate: float, seed: int = 7) -> None:
    """A bit-banged controller (an MCU toggling GPIOs, as the CYRF6936 capture of the third corpus
    shows) at 250 kS/s: SCLK 50 kHz (high 2 samples, low 3), mode 0, channels numbered 0 SCLK, 1 CS,
    2 MOSI, 3 MISO. The software sets MOSI one or two samples (4-8 µs) after SCLK falls; the
    peripheral's hardware shifts MISO out on that falling edge, in its very sample. Commands vary
    (a register address, then data) and the peripheral answers with its status then the values."""
    rng = np.random.default_rng(seed)
    lines = _Lines(("clk", "cs", "mosi", "miso"), {"clk": 0, "cs": 1, "mosi": 0, "miso": 0})
    put = lines.put
    level = {"mosi": 0, "miso": 0}
    t = 20
    for _ in range(60):
        n = int(rng.integers(2, 6))
        mosi = [int(rng.integers(0, 64))] + [int(x) for x in rng.integers(0, 256, n - 1)]
        miso = [0x0F] + [int(x) for x in rng.integers(0, 256, n - 1)]
        put("cs", t, 0)
        f = t + 8
        bits = {name: [(b >> (7 - i)) & 1 for b in data for i in range(8)]
                for name, data in (("mosi", mosi), ("miso", miso))}
        for i in range(8 * n):
            # before the bit's rising edge: MISO on the falling edge's sample, MOSI 1-2 samples later
            if bits["miso"][i] != level["miso"]:
                level["miso"] = bits["miso"][i]
                put("miso", f - 3, level["miso"])
            if bits["mosi"][i] != level["mosi"]:
                level["mosi"] = bits["mosi"][i]
                put("mosi", f - 3 + int(rng.integers(1, 3)), level["mosi"])
            put("clk", f, 1)                      # the rising edge samples
            put("clk", f + 2, 0)                  # the falling edge: the next bit
            f += 5
        put("cs", f + 4, 1)
        t = f + 40
    lines.write(path, samplerate, t + 10)


def test_a_bit_banged_controllers_mosi_lags_by_microseconds(tmp_path):
    """The line set microseconds after SCLK's edges is a controller's software, not a peripheral's
    output delay (10-200 ns): MOSI, with the line that switches in the edges' sample as MISO. The
    old rule read the later line as the peripheral's output, swapped at 0.90."""
    _bit_banged_capture(tmp_path / "b.sr", 250e3)
    settled, _, _ = detect_file(tmp_path / "b.sr")
    cfg, src = settled.cfg, settled.sources
    assert (cfg.clk, cfg.mosi, cfg.miso) == ("0", "2", "3")
    assert src["mosi"].basis == "two, lag, bit-banged"
    assert "µs after SCLK's edges" in src["mosi"].note


def test_a_lag_on_an_implausible_time_base_is_no_software_lag(tmp_path):
    """The same samples with a stated rate of 5 Hz (sigrok-dumps' AD7920 states 5 Hz for 5 MHz):
    SCLK would run at 1 Hz, no time base for microseconds; the lag is no evidence of software."""
    _bit_banged_capture(tmp_path / "b.sr", 5.0)
    settled, _, _ = detect_file(tmp_path / "b.sr")
    assert settled.sources["mosi"].basis != "two, lag, bit-banged"
