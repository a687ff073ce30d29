"""Roles, mode, CS polarity and word size inferred from the signals (core/infer/,
docs/inference.md).

Oracles: the real captures' documented channel maps (captures/real/
README.md, checked there with sigrok-cli) — a capture analyzed with no options
must give the same words on the same lines as with its documented map — and
synthesized captures whose settings are known because we wrote them (the grid
below; our writer is the only oracle there, the real captures are the
independent one). The real sigrok-cli checks the command line `spigap detect`
prints.
"""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest
from conftest import REAL_CAPTURES, real
from hypothesis import given, settings
from hypothesis import strategies as st

from spigap.api import SpiConfig, analyze_device, analyze_file
from spigap.cli import main
from spigap.core.config import INFERABLE
from spigap.synth import Scenario, tracks
from spigap.synth.srwriter import Track, write_sr

SAMPLERATE = {"ad7920": 5e6}


def words(a):
    return (a.mosi.tolist() if a.cfg.mosi else None, a.miso.tolist() if a.cfg.miso else None)


def documented(name):
    file, cfg, _, rate = REAL_CAPTURES[name]
    return analyze_device(real(file), SpiConfig(**cfg), samplerate=rate)


# ------------------------------------------------------------ real captures
@pytest.mark.parametrize("name", sorted(n for n in REAL_CAPTURES if n != "nrf24l01-uc"))
def test_real_capture_with_no_options_decodes_like_its_documented_map(name):
    file, cfg, _, rate = REAL_CAPTURES[name]
    want = documented(name)
    got = analyze_device(real(file), samplerate=rate)
    for role in ("clk", "cs"):
        assert getattr(got.cfg, role) == getattr(want.cfg, role), (name, role, got.sources)
    assert got.n == want.n
    if (want.cfg.mosi is None) != (want.cfg.miso is None):
        # one data line: which way it carries data cannot be seen on the wires; the role is the
        # one measured more often on the development captures (docs/inference.md, "Calibration"),
        # MOSI there, which these ADCs' outputs are not: the line and its words are the same
        line = want.cfg.mosi or want.cfg.miso
        assert line in (got.cfg.mosi, got.cfg.miso) and None in (got.cfg.mosi, got.cfg.miso), got.sources
        assert [x for x in words(got) if x is not None] == [x for x in words(want) if x is not None]
        return
    for role in ("mosi", "miso"):
        assert getattr(got.cfg, role) == getattr(want.cfg, role), (name, role, got.sources)
    assert words(got) == words(want)


def test_second_bus_is_reported_and_selected_by_one_name():
    file, _, _, _ = REAL_CAPTURES["nrf24l01-uc"]
    first = analyze_device(real(file))
    assert first.cfg.clk == "rpi_CLK"
    other = [w for w in first.warnings if "another SPI bus" in w]
    assert other and "--clk uc_CLK" in other[0] and "--cs uc_CSN" in other[0]
    uc = analyze_device(real(file), SpiConfig(clk="uc_CLK", infer=INFERABLE))
    assert (uc.cfg.cs, uc.cfg.mosi, uc.cfg.miso) == ("uc_CSN", "uc_MOSI", "uc_MISO")
    assert words(uc) == words(documented("nrf24l01-uc"))


@pytest.mark.parametrize("name", ["adxl345", "enc28j60", "mrf24j40", "st25r3916", "nrf24l01-rpi", "ssi32"])
def test_real_capture_with_names_stripped(name, tmp_path):
    """Every channel renamed to its position: roles come from the signals alone."""
    file, cfg, _, rate = REAL_CAPTURES[name]
    want = documented(name)
    from spigap.io import open_capture

    with open_capture(real(file)) as r:
        chans = r.info.channels
    mapping = ",".join(f"{c}={i}" for i, c in enumerate(chans))
    res = analyze_file(real(file), samplerate=rate, channel_map=[mapping])
    pos = {c: str(i) for i, c in enumerate(chans)}
    if name == "ssi32":
        # its FC# follows CS# at every edge: without names both are selects asserted together,
        # kept as devices of the bus and reported (issue 29 item 6), never one dropped silently
        assert list(res.devices) == [pos["CS#"], pos["FC#"]]
        assert any("asserted together in every window" in w for w in res.warnings)
        got = res.devices[pos["CS#"]].kept()
    else:
        got = res.device.kept()
    for role in ("clk", "cs", "mosi", "miso"):
        name_ = getattr(want.cfg, role)
        assert getattr(got.cfg, role) == (pos[name_] if name_ else None), (role, got.sources)
    assert words(got) == words(want)


def test_mode_from_the_signals_where_the_readme_and_the_wires_differ():
    # adxl345: SCLK idles high and the data switch on the falling (leading) edge: mode 3
    a = analyze_device(real(REAL_CAPTURES["adxl345"][0]))
    assert (a.cfg.cpol, a.cfg.cpha) == (1, 1)
    assert a.sources["mode"].how == "inferred" and a.sources["mode"].confidence > 0.9
    # st25r3916 and ade7758 are mode 1 per their READMEs
    for name in ("st25r3916", "ade7758"):
        a = analyze_device(real(REAL_CAPTURES[name][0]))
        assert (a.cfg.cpol, a.cfg.cpha) == (0, 1), name


# ------------------------------------------------------------ synthesized grid
def _noise_tracks(rng, n_samples, samplerate):
    """An IRQ line (short low pulses at random times), a reset line (released once),
    a UART at 115200 Bd sending random bytes, and a constant channel."""
    out = []
    t = np.sort(rng.integers(0, n_samples - 200, 6))
    out.append(Track("IRQ", np.repeat(t, 2) + np.tile([0, 100], len(t)), np.tile([0, 1], len(t)).astype(np.uint8), 1))
    out.append(Track("RST", np.array([n_samples // 50]), np.array([1], np.uint8), 0))
    bit = int(round(samplerate / 115200))
    times, levels = [], []
    pos = 1000
    while pos + 11 * bit < n_samples:
        byte = int(rng.integers(0, 256))
        bits = [0] + [(byte >> k) & 1 for k in range(8)] + [1]
        for k, b in enumerate(bits):
            times.append(pos + k * bit)
            levels.append(b)
        pos += 10 * bit + int(rng.integers(0, 40 * bit))
    out.append(Track("UART", np.array(times), np.array(levels, np.uint8), 1))
    out.append(Track("VDD", np.array([0]), np.array([1], np.uint8), 1))
    return out


def synth_capture(path, *, mode=0, cs_polarity="low", wordsize=8, bitorder="msb", cs=True, noise=True,
                  shuffle_seed=0, idle_clocks=1.0, words_per_transfer=3, window_words=None, mosi="counter",
                  miso=(0, 5, 9)):
    """A capture with unnamed channels ("0".."N-1") in shuffled order, optional noise
    channels; returns (path, {role: channel name}, scenario). MOSI counts (varied
    commands), MISO answers each command word with 0 (a peripheral's habit, the weak
    evidence MOSI and MISO are told apart by)."""
    sc = Scenario.from_toml(None, {"mode": mode, "cs_polarity": cs_polarity, "wordsize": wordsize,
                                   "bitorder": bitorder, "messages": 40, "words_per_transfer": words_per_transfer,
                                   "samplerate": "20MHz", "sclk": "1MHz", "idle_clocks": idle_clocks,
                                   "cs_change": "12us", "context_switch": "30us", "transfers_per_message": 2,
                                   "seed": 7, "mosi": mosi, "miso": list(miso) if isinstance(miso, tuple) else miso})
    if window_words:
        sc.window_words = window_words
    tl = sc.timeline()
    chans = dict(sc.channels)
    if not cs:
        chans["cs"] = None
    n_samples = int(round(tl.end_time * sc.samplerate))
    trs = tracks(tl, chans, sc.samplerate)
    rng = np.random.default_rng(shuffle_seed)
    if noise:
        trs += _noise_tracks(rng, n_samples, sc.samplerate)
    order = rng.permutation(len(trs))
    trs = [trs[i] for i in order]
    role_of = {v: k for k, v in chans.items() if v}
    names = {}
    renamed = []
    for i, tr in enumerate(trs):
        renamed.append(Track(str(i), tr.samples, tr.levels, tr.initial))
        if tr.name in role_of:
            names[role_of[tr.name]] = str(i)
    write_sr(path, renamed, sc.samplerate, n_samples)
    return path, names, sc


GRID = [dict(mode=m, cs_polarity=p, wordsize=w)
        for m in range(4) for p in ("low", "high") for w in (8, 9, 12, 16, 24, 32)]


@pytest.mark.parametrize("case", GRID, ids=lambda c: f"mode{c['mode']}-cs{c['cs_polarity']}-w{c['wordsize']}")
def test_synthesized_grid(case, tmp_path):
    path, names, sc = synth_capture(tmp_path / "c.sr", **case, shuffle_seed=case["wordsize"] + case["mode"])
    want = analyze_device(path, SpiConfig(cpol=sc.cpol, cpha=sc.cpha, cs_active_low=sc.cs_active_low,
                                        wordsize=sc.wordsize, **names))
    got = analyze_device(path)
    assert {r: getattr(got.cfg, r) for r in ("clk", "cs", "mosi", "miso")} == \
        {r: names.get(r) for r in ("clk", "cs", "mosi", "miso")}, got.sources
    assert (got.cfg.cpol, got.cfg.cpha, got.cfg.cs_active_low, got.cfg.wordsize) == \
        (sc.cpol, sc.cpha, sc.cs_active_low, sc.wordsize), got.sources
    assert words(got) == words(want)


def test_a_noise_line_beside_one_lane_spi_is_no_quad_spi(tmp_path):
    """The grid's noise channels pass the data-line tests now and then: a third line "following the
    clock" is no dual or quad SPI bus unless the lanes switch together (they shift a nibble per
    edge). 10 of the 48 grid captures were warned "a dual or quad SPI bus"."""
    from spigap.api import detect_file
    warned = []
    for case in GRID:
        path, _, _ = synth_capture(tmp_path / "c.sr", **case, shuffle_seed=case["wordsize"] + case["mode"])
        settled, _, _ = detect_file(path)
        if any("quad SPI" in str(w) for w in settled.warnings) or settled.sources["mosi"].basis == "two, wide":
            warned.append(case)
    assert not warned


def test_cs_less_bus_with_noise(tmp_path):
    path, names, sc = synth_capture(tmp_path / "c.sr", mode=1, cs=False, idle_clocks=1.0)
    got = analyze_device(path)
    assert got.cfg.cs is None and got.cfg.clk == names["clk"]
    assert got.sources["cs"].how == "inferred" and "no channel brackets" in got.sources["cs"].note
    assert (got.cfg.cpol, got.cfg.cpha) == (0, 1)


def test_lsb_first_is_not_guessed(tmp_path):
    """Bit order cannot be seen on the wires: MSB is taken and said to be a default."""
    path, names, sc = synth_capture(tmp_path / "c.sr", bitorder="lsb")
    got = analyze_device(path)
    assert got.cfg.lsb_first is False and got.sources["bitorder"].how == "default"
    want = analyze_device(path, SpiConfig(lsb_first=True, **names))
    assert words(got) != words(want)


def test_word_size_without_pauses_is_a_stated_choice(tmp_path):
    """3 x 12 bits back to back could be 4 x 9: the choice is reported with low confidence;
    transfers of several lengths settle it."""
    path, names, sc = synth_capture(tmp_path / "c.sr", wordsize=12, idle_clocks=0.0, words_per_transfer=3)
    got = analyze_device(path)
    assert got.sources["wordsize"].confidence < 0.75
    assert any("wordsize" in w and "--wordsize" in w for w in got.warnings)
    path, names, sc = synth_capture(tmp_path / "d.sr", wordsize=12, idle_clocks=0.0, window_words=[1, 2, 3])
    got = analyze_device(path)
    assert got.cfg.wordsize == 12


# ------------------------------------------------------------ a clock shared with an uncaptured CS
SHARED_CLOCK = """
[capture]
samplerate = "20MHz"
seed = 5
duration = "10ms"
lead = "50us"
tail = "50us"

[spi]
sclk = "1MHz"
mode = 3
wordsize = 8
channels = { clk = "SCLK", mosi = "MOSI", miso = "MISO" }

[[device]]
cs = "NCS"
spi_device = "spi0.0"
words = 2
think = "400us"

[[device]]
cs = "CE1"
spi_device = "spi0.1"
words = 16
think = "30us"
"""


def shared_clock_capture(path, renamed: bool):
    """Two mode-3 devices on one SCLK (the synthesizer's controller queue), the second one's CS
    not captured: NCS's device is polled every 400 us with 2 bytes, CE1's busy one sends 16 bytes
    every 30 us, so 96 % of SCLK's edges fall while NCS is high (the TrueMove3's power-up on the
    second corpus: another device runs the sensor's clock). Returns (path, {role: channel},
    the synthesizer's truth of NCS's device)."""
    from spigap.synth import Bus

    sh = Bus.from_toml(text=SHARED_CLOCK)
    cap = sh.capture()
    trs = [t for t in cap.tracks() if t.name != "CE1"]
    names = {t.name: str(i) if renamed else t.name for i, t in enumerate(trs)}
    write_sr(path, [Track(names[t.name], t.samples, t.levels, t.initial) for t in trs], sh.samplerate, cap.n_samples)
    roles = {"clk": names["SCLK"], "mosi": names["MOSI"], "miso": names["MISO"], "cs": names["NCS"]}
    return path, roles, cap.truth()["devices"]["NCS"]


def test_cpol_is_the_clocks_level_at_the_cs_changes_not_while_another_device_runs_it(tmp_path):
    """CPOL is SCLK's level where CS changes with the clock idle around it: while NCS is high the
    clock runs for the other device, and its level over that time (the entries there: a mode-3
    device's data change while SCLK is low) read mode 0 (issue 32, the TrueMove3's startup.sr)."""
    path, roles, tr = shared_clock_capture(tmp_path / "named.sr", renamed=False)
    got = analyze_device(path)
    assert (got.cfg.clk, got.cfg.cs) == ("SCLK", "NCS")
    assert got.cfg.mode == 3, got.sources["mode"].note
    assert got.sources["mode"].confidence >= 0.9 and "SCLK idles high" in got.sources["mode"].note
    assert got.n == tr["transfers"] and got.mosi.tolist() == [w for t in tr["mosi"] for w in t]


def test_a_cs_on_a_clock_shared_with_an_uncaptured_one_is_taken_with_the_other_reading(tmp_path):
    """Unnamed, no line brackets 98 % of SCLK's edges; NCS's windows hold its device's bursts, it
    changes only while SCLK idles (high, at every change), and the other device's bursts run at
    its other level. It is taken as that device's CS (its transfers framed, the words its), stated
    0.5 with the other reading, no CS, and the options that settle it; the edges outside it are
    counted (was: framed without CS at 0.5, naming NCS as a select active high that 'changes while
    SCLK runs', which it never does)."""
    path, roles, tr = shared_clock_capture(tmp_path / "renamed.sr", renamed=True)
    got = analyze_device(path)
    assert {r: getattr(got.cfg, r) for r in ("clk", "cs", "mosi", "miso")} == roles, got.sources
    assert got.cfg.cs_active_low and got.cfg.mode == 3
    src = got.sources["cs"]
    assert (src.confidence, src.basis, src.also) == (0.5, "partial", ("none",))
    assert "--no-cs" in src.note and "--cs-polarity high" in src.note and "fall outside them" in src.note
    assert src.as_dict()["confidence_words"] == "ambiguous: two readings"
    assert got.n == tr["transfers"] and got.mosi.tolist() == [w for t in tr["mosi"] for w in t]
    assert got.miso.tolist() == [w for t in tr["miso"] for w in t]
    # the clock's evidence is that of a clock without CS (the look-alikes were tested so)
    assert got.sources["clk"].basis == "none/edges2" and got.sources["clk"].confidence >= 0.9


def test_a_cs_asserted_once_around_part_of_the_bursts_is_named_as_the_other_reading(tmp_path):
    """A select asserted once around the first half of the transfers, the clock running on after it
    (the FPGA board's CS# on the second corpus; an interrupt line the host services looks the same):
    framed without CS at 0.5, the line named as the other reading with the options that take it
    (was: "framed without CS" at 0.95, 'settled by the signals')."""
    sc = Scenario.from_toml(None, {"mode": 0, "messages": 20, "words_per_transfer": 3, "samplerate": "20MHz",
                                   "sclk": "1MHz", "cs_change": "12us", "context_switch": "30us",
                                   "transfers_per_message": 2, "seed": 7, "mosi": "counter", "miso": [0, 5, 9]})
    tl = sc.timeline()
    n_samples = int(round(tl.end_time * sc.samplerate))
    trs = tracks(tl, {**sc.channels, "cs": None}, sc.samplerate)
    half = len(tl.cs_assert) // 2
    once = np.rint(np.array([tl.cs_assert[0], tl.cs_deassert[half - 1]]) * sc.samplerate).astype(np.int64)
    trs.append(Track("CSX", once, np.array([0, 1], np.uint8), 1))
    write_sr(tmp_path / "c.sr", [Track(str(i), t.samples, t.levels, t.initial) for i, t in enumerate(trs)],
             sc.samplerate, n_samples)
    got = analyze_device(tmp_path / "c.sr")
    cs = str(len(trs) - 1)
    assert got.cfg.cs is None and got.cfg.clk == "0"
    src = got.sources["cs"]
    assert (src.confidence, src.basis, src.also) == (0.5, "none, partial", (cs,))
    assert f"--cs {cs} --cs-polarity low" in src.note
    assert any(w.startswith("cs none") and "--cs" in w for w in got.warnings)
    # the reading it names frames the first half of the transfers' words as one transfer
    taken = analyze_device(tmp_path / "c.sr", SpiConfig(cs=cs, cs_active_low=True, infer=INFERABLE - {"cs_polarity"}))
    assert taken.n == 1 and len(taken.mosi) == 3 * half


@pytest.mark.parametrize("mode", [0, 2])
def test_cpha_on_lines_that_never_change_is_the_base_rate_said_to_be_a_prior(mode, tmp_path):
    """No data line changes: CPOL from the idle clock, CPHA the one devices idling so use more
    often on sigrok-dumps, at the share that do (calibration.cpha_prior), or the default at 0.5
    where that share is not credibly away from one half; the note says it is a prior (or a
    default), names the other mode with --mode, and that the two read the same words."""
    from spigap.core.infer import calibration

    path, names, sc = synth_capture(tmp_path / "c.sr", mode=mode, mosi=[0], miso=(0,), noise=False)
    # constant data lines are not data lines to the signals: they are named
    got = analyze_device(path, SpiConfig(mosi=names["mosi"], miso=names["miso"], infer=INFERABLE))
    cpol = mode >> 1
    src = got.sources["mode"]
    prior = calibration.cpha_prior(cpol)
    cpha, conf = prior if prior is not None else (0, 0.5)
    assert (got.cfg.cpol, got.cfg.cpha) == (cpol, cpha)
    assert src.confidence == conf and src.basis == calibration.NO_CPHA
    other = 2 * cpol + 1 - cpha
    assert ("a prior, not evidence from this capture" if prior else "is the default") in src.note, src.note
    assert f"or mode {other}; the two read the same words in the prefix (give --mode {other}" in src.note
    assert any(w.startswith("mode ") and "--mode" in w for w in got.warnings) == (conf < 0.75)


def test_the_two_cpha_readings_decode_the_same_words_when_no_data_line_changes(tmp_path):
    """What the note says: with the data lines constant the CPHA reading taken on a prior does not
    change the decoded words, the transfers or their timing (the other reading, given, frames the
    same)."""
    path, names, sc = synth_capture(tmp_path / "c.sr", mode=0, mosi=[0], miso=(0,), noise=False)
    a, b = (analyze_device(path, SpiConfig(cpol=0, cpha=cpha, **names)) for cpha in (0, 1))
    assert words(a) == words(b) and len(a.mosi) > 0
    assert np.array_equal(a.start, b.start) and np.array_equal(a.end, b.end)


def test_a_prior_cpha_gives_way_to_the_saved_setting(tmp_path):
    """A CPHA stated at its base rate is no evidence from the signals: a capture's saved decoder
    setting wins over it whatever its level (signals at 0.75 or more beat a saved setting)."""
    from spigap.core.config import SpiConfig as Cfg
    from spigap.core.infer.report import Source
    from spigap.core.infer.saved import reconcile

    class Info:
        spi_settings = {"from": "the .dsl's DSView SPI decoder", "cpol": 0, "cpha": 1}
        path = str(tmp_path / "x.dsl")

    cfg = Cfg(cpol=0, cpha=0)
    sources = {"mode": Source("inferred", 0.85, "a prior", "no data changes")}
    warnings: list = []
    reconcile(cfg, Cfg(infer=INFERABLE), sources, Info(), warnings)
    assert cfg.mode == 1 and sources["mode"].how == "file", sources
    cfg = Cfg(cpol=0, cpha=0)
    sources = {"mode": Source("inferred", 0.85, "8 of 8 data changes", "clear, few")}
    reconcile(cfg, Cfg(infer=INFERABLE), sources, Info(), warnings)
    assert cfg.mode == 0 and sources["mode"].how == "inferred"


def test_given_settings_are_kept_and_reported_as_given(tmp_path):
    path, names, sc = synth_capture(tmp_path / "c.sr", mode=3)
    a = analyze_device(path, SpiConfig(cpol=0, cpha=0, **names))      # wrong on purpose
    assert (a.cfg.cpol, a.cfg.cpha) == (0, 0)
    assert a.sources["mode"].how == "given" and a.sources["clk"].how == "given"
    assert a.setting_warnings and "--mode 3" in a.setting_warnings[0]


def test_no_infer_keeps_the_defaults_and_says_so(capsys):
    file = real(REAL_CAPTURES["adxl345"][0])
    assert main(["analyze", str(file), "--no-infer", "--format", "json"]) == 0
    st = json.loads(capsys.readouterr().out)["settings"]
    assert (st["mode"], st["clk"]) == (0, "0")                  # roles still from the signals
    assert st["sources"]["mode"]["from"] == "default" and st["sources"]["clk"]["from"] == "inferred"


def test_no_clock_at_all_is_one_clear_error(tmp_path, capsys):
    p = tmp_path / "flat.sr"
    write_sr(p, [Track("0", np.array([5]), np.array([1], np.uint8), 0),
                 Track("1", np.array([0]), np.array([0], np.uint8), 0)], 1e6, 1000)
    assert main(["analyze", str(p)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no SPI bus found: no channel toggles like a clock" in err[0] and "--clk" in err[0]


# ------------------------------------------------------------ the CLI
def test_detect_prints_settings_and_command_lines_that_sigrok_accepts(tmp_path, capsys, sigrok_cli):
    file = real(REAL_CAPTURES["adxl345"][0])
    assert main(["detect", str(file), "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["settings"]["clk"] == "0" and d["settings"]["mode"] == 3
    assert d["sources"]["mode"]["from"] == "inferred"
    assert [b["clk"] for b in d["buses"]] == ["0"]
    # the sigrok-cli line runs and gives the words the analysis gives
    opts = d["commands"]["sigrok_decoder_options"]
    out = subprocess.run([sigrok_cli, "-i", str(file), "-P", opts, "-A", "spi=mosi-data"],
                         capture_output=True, text=True, check=True, timeout=120)
    assert "srd:" not in out.stderr
    sig = [int(line.split()[-1], 16) for line in out.stdout.splitlines() if line.strip()]
    assert sig == analyze_device(file).mosi.tolist()
    # and the spigap line reproduces the inferred analysis with every setting given
    argv = d["commands"]["spigap"].split()[1:]
    assert main(argv + ["--format", "json"]) == 0
    given = json.loads(capsys.readouterr().out)
    assert all(v["from"] == "given" for k, v in given["settings"]["sources"].items() if k != "bitorder")


def test_detect_lists_both_buses(capsys):
    file = real(REAL_CAPTURES["nrf24l01-rpi"][0])
    assert main(["detect", str(file)]) == 0
    out = capsys.readouterr().out
    assert "bus 1     clk=rpi_CLK cs=rpi_CSN" in out and "bus 2     clk=uc_CLK cs=uc_CSN" in out
    assert "another SPI bus by its names (uc_*)" in out


def test_batch_over_the_real_captures_has_no_error_rows(tmp_path, capsys):
    from conftest import REAL

    out = tmp_path / "b.json"
    rc = main(["batch", str(REAL), "-j", "1", "-q", "--format", "json", "-o", str(out)])
    d = json.loads(out.read_text())
    assert rc == 0 and d["summary"]["failed"] == 0, d["summary"]
    # analyzed, each "ok" or "warn" (a warning above a note: docs/batch.md)
    assert d["summary"]["ok"] + d["summary"]["warn"] == len(list(REAL.glob("*.sr"))) + len(list(REAL.glob("*.dsl")))


# ------------------------------------------------------------ any signals: an answer or one clear error


@st.composite
def random_tracks(draw):
    n_ch = draw(st.integers(1, 6))
    n_samples = draw(st.integers(8, 4000))
    out = []
    for i in range(n_ch):
        kind = draw(st.sampled_from(["const", "random", "clock", "burst"]))
        if kind == "const":
            s = np.array([0])
        elif kind == "random":
            s = np.array(sorted(set(draw(st.lists(st.integers(0, n_samples - 1), max_size=200)))))
        elif kind == "clock":
            half = draw(st.integers(1, 20))
            s = np.arange(0, n_samples, half)
        else:
            half = draw(st.integers(1, 5))
            starts = sorted(set(draw(st.lists(st.integers(0, n_samples - 1), min_size=1, max_size=20))))
            s = np.unique(np.concatenate([st0 + np.arange(0, 16 * half, half) for st0 in starts]))
            s = s[s < n_samples]
        if not len(s):
            s = np.array([0])
        levels = (np.arange(len(s)) + draw(st.integers(0, 1))) % 2
        out.append(Track(str(i), s, levels.astype(np.uint8), int(levels[0] ^ 1)))
    return out, n_samples


@settings(max_examples=80)
@given(random_tracks())
def test_any_signals_give_an_analysis_or_one_clear_error(tmp_path_factory, case):
    """Inference never ends in an internal error, whatever the wires do."""
    from spigap.errors import SpigapError

    trs, n = case
    p = tmp_path_factory.mktemp("any") / "c.sr"
    write_sr(p, trs, 1e6, n)
    try:
        a = analyze_device(p)
    except SpigapError as e:
        assert "\n" not in str(e)
        return
    assert a.cfg.clk is not None and (a.cfg.mosi or a.cfg.miso)
    assert set(a.sources) >= {"clk", "cs", "mosi", "miso", "mode", "cs_polarity", "wordsize", "bitorder"}


def test_detect_reads_the_capture_once_when_it_infers(capsys, monkeypatch):
    """The buses come from the prefix the inference read (same channels): one pass
    over the start of the file, and the same buses as a separate read finds."""
    import spigap.io as io_mod
    from spigap.core import infer

    file = real(REAL_CAPTURES["adxl345"][0])
    with io_mod.open_capture(str(file)) as r:
        separate = [(b.clk, b.cs) for b in infer.all_buses(r)]
    opened = []
    real_open = io_mod.open_capture

    def counting(path, *a, **k):
        opened.append(path)
        return real_open(path, *a, **k)

    monkeypatch.setattr(io_mod, "open_capture", counting)
    assert main(["detect", str(file), "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert len(opened) == 1
    assert [(b["clk"], b["cs"]) for b in d["buses"]] == separate


@pytest.mark.parametrize("how", ["vcd", "channel-map"])
def test_detects_sigrok_cli_line_runs_for_captures_sigrok_cannot_read_as_named(tmp_path, how, sigrok_cli):
    """For a capture sigrok-cli cannot read under the names the decoder options use (a VCD, whose
    signals sigrok names its own way; channels renamed by --channel-map), detect's sigrok-cli line
    writes a .sr first with `spigap convert` and the same reading options: the line, run as a
    shell runs it, decodes the words the analysis gives, and the suggested `spigap analyze` line
    reads the capture the same way (it printed `sigrok-cli -i FILE.vcd` and no --channel-map)."""
    import os
    import shlex
    import shutil
    import sys
    from pathlib import Path

    src = Path(__file__).resolve().parent.parent / "captures" / "mcp3008-patterns.sr"
    if how == "vcd":
        cap, extra = tmp_path / "m.vcd", []
        assert main(["convert", str(src), "-o", str(cap), "--to", "vcd"]) == 0
    else:
        cap, extra = tmp_path / "m.sr", ["--channel-map", "SCLK=A,MOSI=B"]
        shutil.copy(src, cap)
    d = json.loads(_stdout_of(main, ["detect", str(cap), "--format", "json", *extra]))
    cmd = d["commands"]
    assert cmd["sigrok_cli"].startswith("spigap convert ") and cmd["sigrok_input"].endswith(".spigap.sr"), cmd
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{Path(sigrok_cli).parent}:{os.environ['PATH']}"}
    line = cmd["sigrok_cli"].replace("-A spi=mosi-data:miso-data", "-A spi=mosi-data")
    out = subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert out.returncode == 0 and "srd:" not in out.stderr, (line, out.stderr)
    words = [int(x.split()[-1], 16) for x in out.stdout.splitlines() if x.startswith("spi-1:")]
    assert words and words == analyze_device(src).mosi.tolist()
    argv = shlex.split(cmd["spigap"])[1:]
    assert ("--channel-map" in argv) == (how == "channel-map"), argv
    given = json.loads(_stdout_of(main, argv + ["--format", "json"]))["settings"]["sources"]
    assert all(v["from"] == "given" for k, v in given.items() if k != "bitorder"), given


def _stdout_of(fn, argv) -> str:
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert fn(argv) == 0
    return buf.getvalue()
