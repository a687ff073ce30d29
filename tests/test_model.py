"""The timing model, delay semantics, profiles as data and `spigap model`.

Oracles: the numbers printed in seed 000 (jumpnowtek) and seed 001 (Jander RFC),
docs/linux-spi-timing.md's delay table, and captures synthesized by `spigap synth`
from recipes this module did not write (captures/*.toml).
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pytest

from spigap.api import analyze_device
from spigap.timing.profiles import ProfileError, list_devices, list_profiles, load_device, load_profile
from spigap.timing.model import TimingModel, delay_semantics
from conftest import CAPTURES, spigap_main

# seed 000, "theoretical transfer rate" lines, transfers/s
SEED000_STOCK = {1: 70.4e3, 10: 53.5e3, 100: 52.22e3, 500: 52.11e3}
SEED000_PATCHED = {1: 70.4e3, 10: 100.8e3, 100: 105.3e3, 500: 105.7e3}
# seed 000, "measured transfer rate" lines
SEED000_STOCK_MEASURED = {1: 69.8e3, 10: 52.5e3, 100: 51.2e3, 500: 51.1e3}
SEED000_PATCHED_MEASURED = {1: 69.6e3, 10: 98.3e3, 100: 105.2e3, 500: 105.5e3}


def spigap(*args, check=False):
    proc = spigap_main(*args)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


# ------------------------------------------------------------------ seed 000 tables
@pytest.mark.parametrize("profile,seed", [("rpi3-k4.4-vanilla", SEED000_STOCK),
                                          ("rpi3-k4.4-nodelay", SEED000_PATCHED)])
def test_seed000_tables_within_half_a_percent(profile, seed):
    m = load_profile(profile).model()
    for n, want in seed.items():
        got = m.rate(3, n)
        assert abs(got / want - 1) < 0.005, (profile, n, got, want)


def test_seed000_intermediate_figures():
    # "1 transaction = ~7.2 us", "transactions are really 9.2 us", "10 transfers = 187 us",
    # "500 transfers = ... 9595 us", patched: "99.25 us", "4279,75 us" (sic: 4729.75)
    m = load_profile("rpi3-k4.4-vanilla").model()
    assert m.clock_slots(3) == 26
    assert m.clock_time(3) == pytest.approx(7.2e-6, rel=0.005)
    assert m.transfer_time(3) == pytest.approx(9.2e-6, rel=0.005)
    assert m.message_time(3, 10) == pytest.approx(187e-6, rel=0.005)
    assert m.message_time(3, 500) == pytest.approx(9595e-6, rel=0.005)
    p = load_profile("rpi3-k4.4-nodelay").model()
    assert p.message_time(3, 10) == pytest.approx(99.25e-6, rel=0.005)
    # the seed's "4279,75 us" is a typo: 9.45 × 499 + 14.2 = 4729.75 us, and its own
    # "9.46 us per transfer" agrees with 4729.75 / 500
    assert p.message_time(3, 500) == pytest.approx(4729.75e-6, rel=0.005)


def test_seed000_measured_rates_fall_inside_the_profiles_rate_tolerance():
    for profile, measured in (("rpi3-k4.4-vanilla", SEED000_STOCK_MEASURED),
                              ("rpi3-k4.4-nodelay", SEED000_PATCHED_MEASURED)):
        prof = load_profile(profile)
        m = prof.model()
        tol = prof.expect["transfer_rate"].rel_tolerance
        for n, got in measured.items():
            assert abs(got / m.rate(3, n) - 1) < tol, (profile, n)


def test_formula_terms():
    m = TimingModel(sclk_hz=1e6, bits_per_word=8, idle_clocks=1, cs_setup=2e-6, cs_hold=1e-6,
                    cs_change=10e-6, context_switch=50e-6)
    assert m.clock_slots(3) == 26                 # 3 × (8 + 1) − 1
    assert m.clock_time(3) == pytest.approx(26e-6)
    m2 = TimingModel(sclk_hz=1e6, bits_per_word=8, idle_clocks=1, idle_after_last_word=True)
    assert m2.clock_slots(3) == 27
    t = m.transfer_time(3)
    assert t == pytest.approx(29e-6)
    assert m.message_time(3, 4) == pytest.approx((t + 10e-6) * 3 + t + 50e-6)
    assert m.rate(3, 4) == pytest.approx(4 / m.message_time(3, 4))
    assert sum(m.breakdown(3, 4).values()) == pytest.approx(m.message_time(3, 4))
    assert m.capture_transfer_time(3) == pytest.approx(t - 0.5e-6)
    with pytest.raises(ValueError):
        TimingModel(sclk_hz=0)
    with pytest.raises(ValueError):
        TimingModel(sclk_hz=1e6, cs_setup=-1e-6)


# ------------------------------------------------------------------ model vs captures
@pytest.mark.parametrize("name", ["mcp3008-rpi3-k4.4-nodelay-b10", "mcp3008-rpi3-k4.4-nodelay-b100"])
def test_capture_convention_matches_synthesized_seed_captures(name):
    """captures/*.toml set CS setup/hold to the edge-to-edge figures: the bus rate is
    the model's with T/2 less per transfer; the slot convention is off by ~1.5 %."""
    a = analyze_device(CAPTURES / f"{name}.sr")
    m = load_profile("rpi3-k4.4-nodelay").model()
    n = a.grouping.transfers_per_message
    measured = a.transfer_rate_hz()
    assert abs(measured / m.rate(3, n, edges=True) - 1) < 0.003
    assert measured / m.rate(3, n) - 1 > 0.01


def test_segments_model_matches_the_mcp320x_capture():
    """captures/mcp3008-rpi3-mcp320x-iio.toml: 1 MHz, 1-byte + 2-byte transfer in one CS
    window with a 4 µs boundary gap, setup 1.6 µs, hold 0.4 µs."""
    m = TimingModel(sclk_hz=1e6, idle_clocks=1, cs_setup=1.6e-6, cs_hold=0.4e-6, inter_transfer=4e-6,
                    segments=2)
    a = analyze_device(CAPTURES / "mcp3008-rpi3-mcp320x-iio.sr")
    measured = float(np.nanmedian(a.duration)) * a.tick_s
    assert abs(measured - m.capture_transfer_time(3)) <= 2 * a.tick_s
    with pytest.raises(ValueError):        # a boundary gap shorter than a byte gap is not one
        TimingModel(sclk_hz=1e6, idle_clocks=1, inter_transfer=1e-6, segments=2)


# ------------------------------------------------------------------ delay semantics
def test_delay_semantics_follow_the_kernel_table():
    d = delay_semantics(10e-6, "4.4.34", cs_change=True)
    assert (d.primitive, d.busy, d.min_s) == ("udelay", True, 10e-6)
    d = delay_semantics(0.0, "4.4.45", cs_change=True)          # stock pre-5.3: always udelay(10)
    assert d.primitive == "udelay" and d.min_s == 10e-6
    d = delay_semantics(0.0, "4.4.45", cs_change=True, patched=True)
    assert d.primitive == "none" and d.min_s == 0
    assert delay_semantics(0.0, "6.1").primitive == "none"
    assert delay_semantics(500e-9, "6.1").primitive == "ndelay"
    d = delay_semantics(2.5e-6, "6.1")
    assert (d.primitive, d.busy, d.min_s) == ("udelay", True, 3e-6)   # rounded up to whole µs
    d = delay_semantics(20e-6, "6.6.31")
    assert (d.primitive, d.busy) == ("usleep_range", False)
    assert d.slack_s == pytest.approx(2e-6)                            # us / 10
    d = delay_semantics(20e-6, "6.15")
    assert d.slack_s == pytest.approx(5e-6)                            # us / 4 from v6.15
    d = delay_semantics(20e-3, "6.15", hz=250)                         # >= 4 ticks at HZ=250
    assert d.primitive == "msleep" and d.min_s == pytest.approx(20e-3)
    assert delay_semantics(10e-3, "6.15", hz=250).primitive == "usleep_range"
    assert delay_semantics(10e-3, "6.15", hz=1000).primitive == "msleep"
    assert "UNVERIFIED" in delay_semantics(2e-6, "4.4").note


# ------------------------------------------------------------------ profiles as data
SEED001 = {"A": (10e-6, 25e-6), "B": (9.8e-6, 30e-6), "C": (2.6e-6, 5e-6)}


def test_shipped_profiles_load_and_cite_their_sources():
    profs = {p.name: p for p in list_profiles()}
    for name in ("rpi3-k4.4-vanilla", "rpi3-k4.4-nodelay", "pi5-k6.6.31-ad7606", "pi5-k6.12.25-ad7606",
                 "imx8mp-k5.18-A-mcp2518fd", "imx8mp-k5.18-B-mcp2518fd", "imx8mp-k5.18-C-mcp2518fd"):
        assert name in profs
    for p in profs.values():
        assert p.sources and p.assumptions, p.name
        for ex in p.expect.values():
            assert ex.source.strip(), (p.name, ex.metric)
        assert p.device is not None
        load_device(p.device)


def test_profiles_carry_the_seed_figures():
    for k, (setup, ctx) in SEED001.items():
        p = load_profile(f"imx8mp-k5.18-{k}-mcp2518fd")
        assert p.expect["cs_setup"].p50 == pytest.approx(setup)
        assert p.expect["context_switch"].p50 == pytest.approx(ctx)
        assert "seed 001" in p.expect["cs_setup"].source
    assert load_profile("pi5-k6.6.31-ad7606").expect["transfer_period"].p50 == pytest.approx(21.6e-6)
    assert load_profile("pi5-k6.12.25-ad7606").expect["transfer_period"].p50 == pytest.approx(24.3e-6)
    # seed 003: the model's rate is the reciprocal of the loop time it reports
    for name, loop in (("pi5-k6.6.31-ad7606", 21.6e-6), ("pi5-k6.12.25-ad7606", 24.3e-6)):
        m = load_profile(name).model()
        assert 1 / m.rate(4, 1, edges=True) == pytest.approx(loop, rel=0.005)
    van, nod = load_profile("rpi3-k4.4-vanilla"), load_profile("rpi3-k4.4-nodelay")
    assert van.timing["cs_change"] == pytest.approx(10e-6)
    assert nod.timing["cs_change"] == pytest.approx(0.25e-6)
    assert nod.patches and not van.patches


def test_device_limits_and_unverified_marks():
    d5, d27 = load_device("mcp3008@5V"), load_device("mcp3008@2.7V")
    lim5 = {lim.name: lim for lim in d5.limits}
    assert lim5["tSUCS"].min == pytest.approx(100e-9)
    assert lim5["tCSH"].min == pytest.approx(270e-9)
    assert lim5["tHI/tLO"].min == pytest.approx(125e-9)
    assert lim5["fSCLK"].max == pytest.approx(3.6e6)
    assert {lim.name: lim for lim in d27.limits}["fSCLK"].max == pytest.approx(1.35e6)
    # the MCP3008 timing table was not found in a readable copy (docs/linux-spi-timing.md §4.3):
    # its rows stay UNVERIFIED; fCLK is derived from pages read (p.1 throughput, p.2 fCLK = 18 x fSAMPLE)
    assert all(lim5[k].unverified for k in ("tSUCS", "tCSH", "tHI/tLO", "tSU", "tHD", "tDO", "tR", "tF"))
    assert not lim5["fSCLK"].unverified and "DS21295D p.1" in lim5["fSCLK"].source
    # DS21295D p.22: 1.2 ms from the end of sampling to the last bit; the CS-low window is longer
    assert lim5["tFRAME"].max == pytest.approx(1.2e-3) and not lim5["tFRAME"].unverified
    assert lim5["tFRAME"].assumption
    assert {lim.name: lim for lim in d27.limits}["tDO"].max == pytest.approx(200e-9)
    ad = {lim.name: lim for lim in load_device("ad7606").limits}
    assert ad["fSCLK"].max == pytest.approx(23.5e6) and not ad["fSCLK"].unverified
    assert {lim.name: lim for lim in load_device("ad7606@3.3V").limits}["fSCLK"].unverified
    assert ad["tCYCLE"].min == pytest.approx(5e-6) and ad["tCYCLE"].needs == "convst"
    assert ad["BUSY-read"].needs == "busy"
    assert ad["tCYCLE(reads)"].assumption          # inferred from the SPI lines: says so
    mcp = {lim.name: lim for lim in load_device("mcp2518fd").limits}
    assert mcp["fSCLK"].max == pytest.approx(20e6)
    assert load_device("MCP3008@5v").variant == "5V"  # names are case-insensitive
    assert len(list_devices()) >= 6


# A limit is either traced to a document we read (a data sheet page, a Linux source file)
# or says it is UNVERIFIED and why; a rule of ours says what it assumes.
_PRIMARY = re.compile(r"\bDS\d{5}\w* p\.\d+|Rev\. [A-Z] p\.\d+|Linux drivers/")
_WHY_UNVERIFIED = re.compile(r"UNVERIFIED|not found in a readable copy|no \w+ source|not read")


def _device_entries():
    for dev in list_devices():
        for lim in dev.limits:
            yield f"{dev.name}@{dev.variant}:{lim.name}", lim.source, lim.unverified, lim.assumption
        if dev.electrical is not None:
            e = dev.electrical
            yield f"{dev.name}@{dev.variant}:electrical", e.source, e.unverified, "assumed" if e.assumed else ""


@pytest.mark.parametrize("name,source,unverified,assumption",
                         [pytest.param(*e, id=e[0]) for e in _device_entries()])
def test_every_device_limit_is_sourced_or_marked_unverified(name, source, unverified, assumption):
    assert source.strip(), f"{name}: no source"
    if unverified:
        assert _WHY_UNVERIFIED.search(source), f"{name}: UNVERIFIED but the source does not say why"
    else:
        assert "UNVERIFIED" not in source and "remembered" not in source, f"{name}: source says unsure"
        assert _PRIMARY.search(source) or assumption, \
            f"{name}: neither a document read (data sheet page, Linux source) nor an assumption"


@pytest.mark.parametrize("text,where", [
    ("not toml [", "not valid TOML"),
    ("[bus]\nsclk = '1MHz'\n", "[profile] table is missing"),
    ("[profile]\nname='x'\ntitle='t'\nsources=['s']\n[bus]\nsclk='fast'\n[timing]\n", "bus.sclk"),
    ("[profile]\nname='x'\ntitle='t'\nsources=['s']\n[bus]\nsclk='1MHz'\nsclkk='2MHz'\n[timing]\n",
     "bus.sclkk: unknown key"),
    ("[profile]\nname='x'\ntitle='t'\nsources=['s']\n[bus]\nsclk='1MHz'\n[timing]\ncs_setup='1us'\n"
     "[expect.cs_setup]\ntolerance='0.1us'\n", "expect.cs_setup.source: is required"),
    ("[profile]\nname='x'\ntitle='t'\nsources=['s']\n[bus]\nsclk='1MHz'\n[timing]\n"
     "[expect.cs_sutup]\nsource='s'\n", "expect.cs_sutup: unknown metric"),
    ("[profile]\nname='x'\ntitle='t'\nsources=['s']\n[bus]\nsclk='1MHz'\n[timing]\ncs_setup='-1us'\n",
     "timing.cs_setup"),
    ("[profile]\nname='x'\ntitle='t'\nsources=[]\n[bus]\nsclk='1MHz'\n[timing]\n", "profile.sources"),
    ("[profile]\nname='x'\ntitle='t'\nsources=['s']\n[bus]\nsclk='1MHz'\nmode=4\n[timing]\n", "bus.mode: must be 0..3"),
    ("[profile]\nname='x'\ntitle='t'\nsources=['s']\n[bus]\nsclk='1MHz'\n[timing]\n[analysis]\n"
     "transfers_per_message='some'\n", "analysis.transfers_per_message: must be an integer"),
    # a value metric has `value`, not `p50`: the typo is named
    ("[profile]\nname='x'\ntitle='t'\nsources=['s']\n[bus]\nsclk='1MHz'\n[timing]\n"
     "[expect.sclk]\np50='1MHz'\ntolerance='1%'\nsource='s'\n", "expect.sclk.p50: unknown key"),
    ("[profile]\nname='x'\ntitle='t'\nsources=['s']\n[bus]\nsclk='1MHz'\n[timing]\ncs_setup='1us'\n"
     "[expect.cs_setup]\nmodel=true\ntolerance='1%'\nsource='s'\n", "expect.cs_setup.model: only"),
    ("[profile]\nname='x'\ntitle='t'\nsources=['s']\n[bus]\nsclk='1MHz'\n[timing]\n"
     "[expect.cs_hold]\ntolerance='0.1us'\nsource='s'\n", "expect.cs_hold.p50: is required with a tolerance"),
    ("schema = 2\n[profile]\nname='x'\n", "schema 2 is not supported"),
])
def test_bad_profile_files_give_one_line_errors(tmp_path, text, where):
    f = tmp_path / "bad.toml"
    f.write_text(text)
    with pytest.raises(ProfileError) as e:
        load_profile(f)
    msg = str(e.value)
    assert where in msg and str(f) in msg and "\n" not in msg
    proc = spigap("model", "--profile", f)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("spigap: error:") and where in lines[0]
    assert "Traceback" not in proc.stderr


DEVICE = "[device]\nname='d'\ntitle='t'\nsources=['s']\n"
LIMIT = "[limits.fS]\nmetric='sclk'\nmax='1MHz'\nwhat='w'\nsource='s'\n"


@pytest.mark.parametrize("text,where", [
    (LIMIT, "[device] table is missing"),
    ("[device]\nname='d'\ntitle='t'\n" + LIMIT, "device.sources: is required"),
    (DEVICE + "[limits.fS]\nmetric='speed'\nmax='1MHz'\nwhat='w'\nsource='s'\n", "limits.fS.metric: unknown metric"),
    (DEVICE + "[limits.fS]\nmetric='sclk'\nmax='quick'\nwhat='w'\nsource='s'\n", "limits.fS.max: not a frequency"),
    (DEVICE + "[limits.t]\nmetric='cs_setup'\nmin='1MHz'\nwhat='w'\nsource='s'\n", "limits.t.min: unknown time unit"),
    (DEVICE + "[limits.fS]\nmetric='sclk'\nwhat='w'\nsource='s'\n", "a limit needs min, max or multiple_of"),
    (DEVICE + "[limits.e]\nmetric='cs_setup'\nmultiple_of=16\nwhat='w'\nsource='s'\n", "limits.e.multiple_of: only"),
    (DEVICE + "[limits]\nfS = 1\n", "[limits.fS] must be a table"),
    # a typo in a variant that was not asked for is still reported
    (DEVICE + "default_variant='a'\n" + LIMIT + "[variants.a]\ntitle='A'\n[variants.b.limits.fS]\nmax='2MHz'\nmxa=1\n",
     "variants.b.limits.fS.mxa: unknown key"),
    (DEVICE + LIMIT + "[variants.a]\ntitle='A'\n[variants.b]\ntitle='B'\n", "has variants: give one as d@VARIANT"),
    ("limit = 1\n" + DEVICE + LIMIT, "limit: unknown key"),
])
def test_bad_device_files_give_one_line_errors(tmp_path, text, where):
    f = tmp_path / "bad.toml"
    f.write_text(text)
    with pytest.raises(ProfileError) as e:
        load_device(f)
    msg = str(e.value)
    assert where in msg and str(f) in msg and "\n" not in msg


def test_unknown_names_and_missing_files():
    with pytest.raises(ProfileError, match="known: .*rpi3-k4.4-vanilla"):
        load_profile("rpi3-vanilla")
    with pytest.raises(ProfileError, match="no such file"):
        load_profile("/nonexistent/p.toml")
    with pytest.raises(ProfileError, match="no variant '3V'"):
        load_device("mcp3008@3V")
    with pytest.raises(ProfileError, match="unknown device"):
        load_device("mcp9999")


def test_user_profile_file(tmp_path):
    f = tmp_path / "mine.toml"
    f.write_text("""
[profile]
name = "mcp320x-iio"
title = "RPi 3, mcp320x iio driver, 1 MHz"
sources = ["captures/mcp3008-rpi3-mcp320x-iio.toml"]
[bus]
sclk = "1MHz"
idle_clocks = 1
words_per_transfer = 3
transfers_per_message = [1]
[timing]
cs_setup = "1.6us"
cs_hold = "0.4us"
context_switch = "150us"
inter_transfer = "4us"
segments = 2
[expect.inter_transfer]
tolerance = "0.5us"
source = "the capture recipe"
""")
    p = load_profile(f)
    assert p.expect["inter_transfer"].p50 == pytest.approx(4e-6)     # defaults to [timing]
    m = p.model()
    assert m.transfer_time(3) == pytest.approx(26e-6 + 2e-6 + 4e-6 - 1.5e-6)


# ------------------------------------------------------------------ spigap model (CLI)
def test_cli_model_prints_the_seed_table():
    out = spigap("model", "--profile", "rpi3-k4.4-vanilla", check=True).stdout
    for text in ("70.31k/s", "53.41k/s", "52.16k/s", "52.05k/s", "26 clock slots", "udelay(10)"):
        assert text in out, text
    out = spigap("model", "--profile", "rpi3-k4.4-nodelay", "--transfers-per-message", "10,100,500",
                 "--format", "json", check=True).stdout
    d = json.loads(out)
    rates = {r["transfers_per_message"]: r["rate_hz"] for r in d["rows"]}
    for n in (10, 100, 500):
        assert abs(rates[n] / SEED000_PATCHED[n] - 1) < 0.005
    assert d["profile"]["sources"] and d["clock_slots"] == 26


def test_cli_model_what_if_and_bytes():
    d = json.loads(spigap("model", "--profile", "rpi3-k4.4-vanilla", "--bytes", "2", "--cs-change",
                          "0.25us", "--transfers-per-message", "100", "--format", "json", check=True).stdout)
    assert d["clock_slots"] == 17 and d["model"]["cs_change_s"] == pytest.approx(0.25e-6)
    # 6.x kernel, a 20 µs cs_change delay sleeps: the gap grows by 20 µs, slack printed
    out = spigap("model", "--profile", "imx8mp-k5.18-C-mcp2518fd", "--cs-change-delay", "20us",
                 check=True).stdout
    assert "usleep_range" in out and "21 µs" in out and "timer slack" in out
    # on 4.4 the cs_change delay is a fixed udelay(10): asking for 20 µs changes nothing
    d = json.loads(spigap("model", "--profile", "rpi3-k4.4-vanilla", "--cs-change-delay", "20us",
                          "--format", "json", check=True).stdout)
    assert d["model"]["cs_change_s"] == pytest.approx(10e-6)
    proc = spigap("model", "--profile", "pi5-k6.6.31-ad7606", "--transfers-per-message", "1,10")
    assert proc.returncode == 2 and "cs_change" in proc.stderr
    assert spigap("model").returncode == 2
    assert "rpi3-k4.4-vanilla" in spigap("model", "--list", check=True).stdout


def test_cli_model_synth_writes_a_capture_with_the_profiles_gaps(tmp_path):
    out = tmp_path / "p.sr"
    spigap("model", "--profile", "rpi3-k4.4-vanilla", "--synth", out, "--synth-transfers-per-message",
           "10", "--messages", "30", check=True)
    a = analyze_device(out)
    r = a.tick_s
    assert a.grouping.transfers_per_message == 10
    for kind, want in (("cs_setup", 1.6e-6), ("cs_hold", 0.4e-6), ("cs_change", 10e-6),
                       ("context_switch", 5e-6)):
        got = float(np.median(a.gap_values(kind)[~np.isnan(a.gap_values(kind))])) * r
        assert math.isclose(got, want, abs_tol=0.1 * want + r), kind
