"""The ad7606 sigrok decoder (decoders/ad7606) and its plain module ad760x.py.

Oracles: the synth generator's truth (analyzer/spigap/synth/traffic/ad7606.py,
written independently of the decoder: codes per channel and read, channel
order per DOUT use, CONVST/BUSY/CS times, injected faults); golden annotation files (sigrok-test
cases: tests/test_sigrok_test_cases.py);
real foreign captures (no exception).
"""

from __future__ import annotations

import re

import pytest

from conftest import (CAPTURES, DECODERS, assert_sigrok_naming_rules, load_decoder_class, capture_channels, load_plain_module, real,
                      run_sigrok, sigrok_annotations)

from spigap.synth import scenario, write
from spigap.synth.traffic import ad7606 as gen
from spigap.units import parse_time

BASE = "ad7606:sclk=SCLK:cs=CS:douta=DOUTA"
ALL = ":busy=BUSY:convst=CONVST:frstdata=FRSTDATA"
# shipped capture -> decoder spec (channels and options)
SHIPPED = {
    "douta-after": BASE + ALL,
    "dual-after": BASE + ":doutb=DOUTB" + ALL + ":range=5V",
    "doutb-only": BASE + ":doutb=DOUTB" + ALL + ":variant=AD7606-6:dout=DOUTB",
    "during": BASE + ":doutb=DOUTB" + ALL + ":variant=AD7606-4",
    "convst-only": BASE + ":convst=CONVST",
    "errors": BASE + ALL,
}
WARNING_FOR = {
    "sclk_at_busy_fall": "SCLK edge at the BUSY falling edge",
    "frstdata_low": "FRSTDATA low on the first channel",
}
# a read of the first channels only is legal (the Pi 5 user's 4-byte xfer2): a note, not a warning
NOTE_FOR = {"sclk_count": "Partial read: V1, V2 (32 of 128 SCLKs)"}



m = load_plain_module("ad7606", "ad760x")


# ---------------------------------------------------------------- helpers

def annotations(sr, pd):
    """(ss, es, class, [texts]) of the ad7606 decoder set up as ``pd``."""
    return sigrok_annotations(sr, pd, "ad7606")[0]


def truth_of(name, **overrides):
    sc = scenario.Scenario.from_toml(CAPTURES / f"ad7606-{name}.toml", overrides or None)
    return sc, sc.timeline()


def of(anns, cls):
    return sorted((a for a in anns if a[2] == cls), key=lambda a: (a[0], a[1]))


FRAME = re.compile(r"V(\d+)=(-?\d+)")
RESULT = re.compile(r"^V(\d+) = (-?\d+) \((-?\d+\.\d{3}) V\)$")


def frame_values(ann):
    return {int(k): int(v) for k, v in FRAME.findall(ann[3][1])}


def time_text(seconds):
    return m.format_time(seconds)


def sample(sc, t):
    return int(round(t * sc.samplerate))



# ------------------------------------------------------------ captures

@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_pulseview_setup_names_the_tested_stack(name):
    """captures/ad7606-<name>.pvs (written by spigap decoders pvs) opens the stack these tests decode."""
    from spigap.cli.decoders import parse_stack
    from spigap.sigrok import pvs

    sr = CAPTURES / f"ad7606-{name}.sr"
    want = pvs.render(pvs.Setup([parse_stack(SHIPPED[name], capture_channels(sr))]))
    assert sr.with_suffix(".pvs").read_text() == want



@pytest.mark.parametrize("name", SHIPPED)
def test_values_order_and_lines_match_the_truth(name):
    sc, tl = truth_of(name)
    truth = tl.device_truth
    anns = annotations(CAPTURES / f"ad7606-{name}.sr", SHIPPED[name])
    frames = of(anns, "frame")
    assert len(frames) == len(truth)
    variant, dout = truth[0]["variant"], truth[0]["dout"]
    nch = gen.VARIANTS[variant]
    orders = gen.line_orders(nch, dout)
    rng = float(sc.device.get("range", 10))
    starts = [sample(sc, t["cs_assert_s"]) for t in truth] + [10 ** 12]
    for k, (t, fr) in enumerate(zip(truth, frames)):
        assert frame_values(fr) == t["values"], f"read {k}"
        assert fr[3][0].endswith(f"[{t['sclks']} SCLK]")
        assert fr[0] >= starts[k] and fr[0] < starts[k + 1]
        # one result annotation per channel, on the row of the line it came on, in read order
        words = t["sclks"] // 16
        for line, order in enumerate(orders):
            cls = "doutb-result" if (dout == "DOUTB" or line == 1) else "douta-result"
            res = [a for a in of(anns, cls) if starts[k] <= a[0] < starts[k + 1]]
            assert [int(RESULT.match(a[3][0])[1]) for a in res] == order[:words], f"read {k} {cls}"
            for a in res:
                mt = RESULT.match(a[3][0])
                ch, code, volts = int(mt[1]), int(mt[2]), float(mt[3])
                assert code == t["values"][ch]
                assert volts == pytest.approx(code * rng / 32768, abs=0.0005)
                assert volts == pytest.approx(t["volts"][ch], abs=0.0005)
        other = "douta-result" if dout == "DOUTB" else ("doutb-result" if len(orders) == 1 else None)
        if other:
            assert not [a for a in of(anns, other) if starts[k] <= a[0] < starts[k + 1]]


@pytest.mark.parametrize("name", SHIPPED)
def test_conversion_timing_and_warnings_match_the_truth(name):
    sc, tl = truth_of(name)
    truth = tl.device_truth
    anns = annotations(CAPTURES / f"ad7606-{name}.sr", SHIPPED[name])
    with_busy = sc.device.get("busy", True)
    sr = sc.samplerate
    if with_busy:
        conv = of(anns, "conversion")
        assert len(conv) == len(truth)
        for t, a in zip(truth, conv):
            assert abs(a[0] - t["busy_rise_s"] * sr) <= 1 and abs(a[1] - t["busy_fall_s"] * sr) <= 1
            assert a[3][1] == "tCONV " + time_text((a[1] - a[0]) / sr)
            assert abs((a[1] - a[0]) / sr - (t["busy_fall_s"] - t["busy_rise_s"])) <= 1 / sr
        delays = of(anns, "start-delay")
        assert len(delays) == len(truth)
        for t, a in zip(truth, delays):
            assert abs(a[0] - t["convst_rise_s"] * sr) <= 1 and abs(a[1] - t["busy_rise_s"] * sr) <= 1
        reads = of(anns, "read")
        assert len(reads) == len(truth)
        for t, a in zip(truth, reads):
            during = t["read"] == "during" or t["cs_assert_s"] < t["busy_fall_s"]
            if during:
                assert a[3][0] == "Read during conversion"
                assert abs(a[0] - t["cs_assert_s"] * sr) <= 1
            else:
                assert a[3][0].startswith("Read after conversion: BUSY\u2193\u2192CS\u2193 ")
                assert abs(a[0] - t["busy_fall_s"] * sr) <= 1 and abs(a[1] - t["cs_assert_s"] * sr) <= 1
                assert a[3][0].endswith(time_text((a[1] - a[0]) / sr))
    else:
        assert not of(anns, "conversion") and not of(anns, "read") and not of(anns, "start-delay")
    periods = of(anns, "convst-period")
    assert len(periods) == len(truth) - 1
    want_p = parse_time(sc.device.get("period", "40us"))
    for a in periods:
        assert abs((a[1] - a[0]) / sr - want_p) <= 1 / sr
        assert a[3][0].startswith("CONVST period " + time_text((a[1] - a[0]) / sr))
    # warnings and notes: exactly the injected faults, attributed to the right read
    starts = [sample(sc, t["cs_assert_s"]) for t in truth] + [10 ** 12]
    for cls, table in (("warning", WARNING_FOR), ("note", NOTE_FOR)):
        anns_c = of(anns, cls)
        for k, t in enumerate(truth):
            got = sorted(a[3][0] for a in anns_c if starts[k] <= a[0] < starts[k + 1])
            want = sorted(table[e] for e in t["expect"] if e in table)
            assert len(got) == len(want) and all(g.startswith(w) for g, w in zip(got, want)), (k, got, want)
        assert len(anns_c) == sum(e in table for t in truth for e in t["expect"])


def test_error_capture_warnings_are_specific():
    sc, tl = truth_of("errors")
    anns = annotations(CAPTURES / "ad7606-errors.sr", SHIPPED["errors"])
    (note,) = of(anns, "note")
    assert note[3][:2] == ["Partial read: V1, V2 (32 of 128 SCLKs)", "Partial read: V1, V2"]
    (busy,) = [a for a in of(anns, "warning") if a[3][0] == "SCLK edge at the BUSY falling edge"]
    assert abs(busy[0] - tl.device_truth[2]["busy_fall_s"] * sc.samplerate) <= 1


@pytest.mark.parametrize("where,warning", [
    (0.3, "SCLK running at the BUSY falling edge (edge "),       # inside a clock burst
    (-1.5, "BUSY fell during the read (between SCLK bursts)"),   # in the 2-SCLK gap before a byte
])
def test_busy_falling_inside_a_running_read(tmp_path, where, warning):
    sc = scenario.Scenario.from_toml(CAPTURES / "ad7606-errors.toml", {"idle_clocks": 2})
    tl = sc.timeline()
    T = 1 / sc.sclk
    win = tl.device_truth[2]["windows"][0]
    byte8 = int((tl.windows.word_window < win).sum()) + 8
    times, levels, idle = tl.extra["BUSY"]
    times = times.copy()
    times[2 * 2 + 1] = tl.word_first[byte8] + where * T           # BUSY fall of conversion 2
    tl.extra["BUSY"] = (times, levels, idle)
    path = tmp_path / "busy.sr"
    write(sc, path, tl=tl)
    anns = annotations(path, SHIPPED["errors"])
    got = [a[3][0] for a in of(anns, "warning")]
    assert [g for g in got if g.startswith(warning)] and not [g for g in got if "BUSY" in g and
                                                               not g.startswith(warning)]
    (fr,) = [a for a in of(anns, "frame") if a[0] >= sample(sc, tl.device_truth[2]["cs_assert_s"])][:1]
    assert frame_values(fr) == tl.device_truth[2]["values"]       # the read is not split


def test_read_boundaries_without_busy_or_convst():
    """Only SCLK/CS/DOUTA: each CS window is a read (same values, no timing);
    with CS pulsed per word and no BUSY/CONVST, each 16-SCLK window is its own
    (partial) read — the documented limit of that wiring, which the note names."""
    sc, tl = truth_of("douta-after")
    anns = annotations(CAPTURES / "ad7606-douta-after.sr", BASE)
    assert [frame_values(a) for a in of(anns, "frame")] == [t["values"] for t in tl.device_truth]
    assert {a[2] for a in anns} == {"douta-result", "frame"}
    # the during capture read on CONVST alone: CS-per-word windows still group into reads
    sc, tl = truth_of("during")
    anns = annotations(CAPTURES / "ad7606-during.sr", BASE + ":doutb=DOUTB:convst=CONVST:variant=AD7606-4")
    assert [frame_values(a) for a in of(anns, "frame")] == [t["values"] for t in tl.device_truth]
    assert not of(anns, "warning")
    anns = annotations(CAPTURES / "ad7606-convst-only.sr", BASE)
    frames = of(anns, "frame")
    assert len(frames) == 8 * len(truth_of("convst-only")[1].device_truth)
    assert all(a[3][0].endswith("[16 SCLK]") for a in frames)
    notes = of(anns, "note")
    assert not of(anns, "warning") and len(notes) == len(frames)
    assert all(a[3][0].startswith("Partial read: V1 (16 of 128 SCLKs: the first channels, or one read "
                                  "framed by CS per channel (map BUSY or CONVST") for a in notes)


def test_dout_option_overrides_auto():
    """dual-after with dout=DOUTA: only DOUTA is read, V1..V4 then a wrong-count warning."""
    sc, tl = truth_of("dual-after")
    anns = annotations(CAPTURES / "ad7606-dual-after.sr", SHIPPED["dual-after"] + ":dout=DOUTA")
    for t, fr in zip(tl.device_truth, of(anns, "frame")):
        vals = frame_values(fr)
        assert vals == {ch: t["values"][ch] for ch in (1, 2, 3, 4)}
    assert not of(anns, "warning")
    assert all(a[3][1] == "Partial read: V1, V2, V3, V4" for a in of(anns, "note"))
    # DOUTA+DOUTB asked for but DOUTB not mapped: one warning, DOUTA decoded
    anns = annotations(CAPTURES / "ad7606-dual-after.sr", BASE + ":dout=DOUTA+DOUTB:range=5V")
    assert of(anns, "warning")[0][3][0] == "DOUTB not connected: decoding DOUTA alone"


@pytest.mark.parametrize("mode", [0, 1, 3])
def test_sclk_polarity_phase_options(tmp_path, mode):
    sc = scenario.Scenario.from_toml(CAPTURES / "ad7606-dual-after.toml", {"mode": mode, "seed": 40 + mode})
    path = tmp_path / f"mode{mode}.sr"
    tl = write(sc, path).timeline
    pd = SHIPPED["dual-after"] + f":cpol={mode >> 1}:cpha={mode & 1}"
    anns = annotations(path, pd)
    assert [frame_values(a) for a in of(anns, "frame")] == [t["values"] for t in tl.device_truth]
    assert not of(anns, "warning")
    if mode == 0:
        # the default (cpol=1, cpha=0) samples mode-0 data on the falling edge, where
        # the next bit is launched: every code comes out shifted by one bit
        default = [frame_values(a) for a in of(annotations(path, SHIPPED["dual-after"]), "frame")]
        assert default != [t["values"] for t in tl.device_truth]


def test_doutb_only_order_and_single_wire_mapping():
    """DOUTB only: the order is V4, V5, V6, V1, V2, V3 (AD7606-6); with the one
    wire mapped to douta (doutb unmapped) the same order is decoded."""
    sc, tl = truth_of("doutb-only")
    anns = annotations(CAPTURES / "ad7606-doutb-only.sr",
                       "ad7606:sclk=SCLK:cs=CS:douta=DOUTB:busy=BUSY:variant=AD7606-6:dout=DOUTB")
    first = [int(RESULT.match(a[3][0])[1]) for a in of(anns, "doutb-result")[:6]]
    assert first == [4, 5, 6, 1, 2, 3]
    assert [frame_values(a) for a in of(anns, "frame")] == [t["values"] for t in tl.device_truth]


def test_cs_tied_low_reads_end_at_busy_and_when_complete():
    """CS held low for the whole capture (here: mapped to the idle DOUTA line of
    the DOUTB-only capture): reads are split at BUSY falls, and the last read is
    reported once all its SCLKs came, although neither CS nor BUSY ends it."""
    sc, tl = truth_of("doutb-only")
    anns = annotations(CAPTURES / "ad7606-doutb-only.sr",
                       "ad7606:sclk=SCLK:cs=DOUTA:douta=DOUTB:busy=BUSY:convst=CONVST:frstdata=FRSTDATA"
                       ":variant=AD7606-6:dout=DOUTB")
    assert [frame_values(a) for a in of(anns, "frame")] == [t["values"] for t in tl.device_truth]
    assert not of(anns, "warning")


def test_lead_pi5_capture_is_a_partial_read_of_chip_true_values():
    """The Pi 5 spidev capture reads 4 bytes per CS window (xfer2([0]*4)) in mode 0: each read
    is V1 and V2, the codes the capture's payload put there (synth/traffic/ad7606.py,
    ad7606-reads), a partial read (a note), and no warning."""
    sc, tl = truth_of("pi5-k6.6.31")
    anns = annotations(CAPTURES / "ad7606-pi5-k6.6.31.sr", "ad7606:sclk=SCLK:cs=CS:douta=DOUTA:cpol=0:cpha=0")
    assert not of(anns, "warning")
    assert [frame_values(a) for a in of(anns, "frame")] == [t["values"] for t in tl.device_truth]
    assert len(of(anns, "note")) == 2000 and {a[3][1] for a in of(anns, "note")} == {"Partial read: V1, V2"}


REAL = [
    ("spi__ad7920__ad7920_fast_read.sr", "sclk=0:cs=2:douta=1:cpol=0"),
    ("spi__ltc2422__ltc2422_read_adc.sr", "sclk=0:cs=2:douta=1"),
    ("spi__adxl345__adxl345_registers.sr", "sclk=0:cs=3:douta=2:doutb=1"),
    ("spi__mrf24j40__sensormote__mrf24j40-wake-tx-ack.sr", "sclk=SCK:cs=nCS:douta=SDO:busy=INT:cpol=0"),
    ("sdcard__spi_mode__cmds__cmd17.sr", "sclk=CLK:cs=CS#:douta=MISO:cpol=0"),
    ("spi__spi_atmega32__spi_atmega32_00.sr", "sclk=2:cs=0:douta=1:cpol=0"),
    ("nfc__st25r39xx__HydraBus_v1_HydraNFC_Shield_v2_ST25R3916_Read_All_Registers_SpaceA_B.sr",
     "sclk=0_CLK:cs=3_CS#:douta=1_MISO:frstdata=4_IRQ:cpha=1"),
    ("spi__nrf24l01__nrf24l01-communication.sr",
     "sclk=rpi_CLK:cs=rpi_CSN:douta=rpi_MISO:doutb=rpi_MOSI:busy=rpi_IRQ:convst=TRG"),
]


@pytest.mark.parametrize("name,chans", REAL, ids=[n.split("__")[1] for n, _ in REAL])
def test_foreign_real_captures_do_not_raise(name, chans):
    path = real(name)
    out = run_sigrok(["-i", str(path), "-P", f"ad7606:{chans}", "-A", "ad7606", "--protocol-decoder-samplenum"])
    for ln in out.splitlines():
        assert re.match(r"^\d+-\d+ ad7606-1: ", ln), ln


# ------------------------------------------------------ plain module

def test_orders_and_counts():
    assert m.line_orders("AD7606", "DOUTA") == [[1, 2, 3, 4, 5, 6, 7, 8]]
    assert m.line_orders("AD7606", "DOUTA+DOUTB") == [[1, 2, 3, 4], [5, 6, 7, 8]]
    assert m.line_orders("AD7606", "DOUTB") == [[5, 6, 7, 8, 1, 2, 3, 4]]
    assert m.line_orders("AD7606-6", "DOUTB") == [[4, 5, 6, 1, 2, 3]]
    assert m.line_orders("AD7606-4", "DOUTB") == [[3, 4, 1, 2]]
    assert m.line_orders("AD7606-6", "DOUTA+DOUTB") == [[1, 2, 3], [4, 5, 6]]
    for v, n in (("AD7606", 8), ("AD7606-6", 6), ("AD7606-4", 4)):
        assert m.expected_sclks(v, "DOUTA") == 16 * n
        assert m.expected_sclks(v, "DOUTB") == 16 * n
        assert m.expected_sclks(v, "DOUTA+DOUTB") == 8 * n
        assert m.line_orders(v, "DOUTA")[0] == gen.line_orders(n, "DOUTA")[0]
    assert m.resolve_dout("auto", True) == "DOUTA+DOUTB" and m.resolve_dout("auto", False) == "DOUTA"
    assert m.signed16(0x8000) == -32768 and m.signed16(0x7FFF) == 32767 and m.signed16(0xFFFF) == -1
    assert m.volts(-32768, "10V") == -10.0 and m.volts(16384, "5V") == 2.5
    assert m.range_volts("\u00b15 V") == 5.0 and m.range_volts(10) == 10.0
    assert m.range_volts("2.5V") == 2.5 and m.range_volts("20V") == 20.0
    with pytest.raises(ValueError):
        m.range_volts("3V")
    assert m.format_time(40e-9) == "40 ns" and m.format_time(4e-6) == "4.000 \u00b5s"
    assert m.format_duration(200, None) == "200 samples"


def _bytes(codes):
    out = []
    for c in codes:
        c &= 0xFFFF
        out += [c >> 8, c & 0xFF]
    return out


def test_label_transfer():
    codes = [-1234, 0, 32767, -32768, 1, -1, 16384, 100]
    label = m.label_transfer(None, _bytes(codes), {})
    assert label.startswith("V1=-1234 (-0.377 V) V2=0 (0.000 V) V3=32767 (10.000 V) V4=-32768 (-10.000 V)")
    assert label.endswith("V8=100 (0.031 V)") and "SCLK" not in label
    assert m.label_transfer([0] * 16, _bytes(codes), {"range": "5V"}).startswith("V1=-1234 (-0.188 V)")
    # DOUTB-only order, AD7606-4
    assert m.label_transfer(None, _bytes([1, 2, 3, 4]), {"variant": "AD7606-4", "dout": "DOUTB"}) == \
        "V3=1 (0.000 V) V4=2 (0.001 V) V1=3 (0.001 V) V2=4 (0.001 V)"
    # two DOUT lines: the bytes are DOUTA's, V1..V4 in 64 SCLKs
    assert m.label_transfer(None, _bytes([5, 6, 7, 8]), {"dout": "DOUTA+DOUTB"}) == \
        "V1=5 (0.002 V) V2=6 (0.002 V) V3=7 (0.002 V) V4=8 (0.002 V)"
    # the Pi 5 spidev read: 4 bytes
    assert m.label_transfer([0] * 4, [0xFB, 0x2E, 0x00, 0x10], {}) == \
        "V1=-1234 (-0.377 V) V2=16 (0.005 V) [32 SCLK, expected 128]"
    # extra words, odd bytes, 16-bit words
    assert m.label_transfer(None, _bytes([1, 2, 3, 4, 5]), {"variant": "AD7606-4"}).endswith(
        "extra=5 [80 SCLK, expected 64]")
    assert m.label_transfer(None, [0x00, 0x01, 0x02], {}) == "V1=1 (0.000 V) +8 bits [24 SCLK, expected 128]"
    assert m.label_transfer(None, [0xFB2E], {"wordsize": 16}).startswith("V1=-1234 (-0.377 V)")
    assert m.label_transfer([0], [], {}) == "no DOUTA data"


def test_plain_module_has_no_sigrok_import_and_decoder_follows_naming_rules():
    src = (DECODERS / "ad7606" / "ad760x.py").read_text()
    assert not re.search(r"^\s*(import|from)\s+(sigrokdecode|\.)", src, re.M)
    D = load_decoder_class("ad7606")
    assert_sigrok_naming_rules(D, "ad7606")
    assert D.inputs == ["logic"]
    assert [c["id"] for c in D.channels] == ["sclk", "cs", "douta"]
    assert [c["id"] for c in D.optional_channels] == ["doutb", "busy", "convst", "frstdata", "din"]
    classes = [c[0] for c in D.annotations]
    rows = [r[0] for r in D.annotation_rows]
    assert len(set(classes)) == len(classes) and len(set(rows)) == len(rows)
    assert not set(classes) & set(rows)
    assert all(r.endswith("s") for r in rows) and not any(c.endswith("s") for c in classes)
    assert all(isinstance(r[2], tuple) for r in D.annotation_rows)
    assert sorted(i for r in D.annotation_rows for i in r[2]) == list(range(len(classes)))
    opts = {o["id"]: o for o in D.options}
    assert opts["cpol"]["default"] == 1 and opts["cpha"]["default"] == 0      # SPI mode 2 (§5.3)
    for o in D.options:
        if "values" in o:
            assert isinstance(o["values"], tuple) and o["default"] in o["values"]
            assert all(type(v) is type(o["default"]) for v in o["values"])
    assert callable(D.metadata)
