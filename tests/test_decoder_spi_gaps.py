"""The spi_gaps sigrok decoder, run by the real sigrok-cli (libsigrokdecode 0.5.3):
its numbers must be the analyzer's (spigap.api.analyze_device) to the sample,
on synthesized captures (every mode, CS polarity, word size, partial windows,
same-sample edges) and on the real captures in captures/real.

Goldens (sigrok-test style, ``ss-es spi_gaps: class: "text" ...``) live in
tests/golden/spi_gaps/; regenerate them with SPIGAP_REGEN_GOLDEN=1 after an
intended change, and read the diff.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re

import numpy as np
import pytest

from spigap.api import SpiConfig, analyze_device
from spigap.resources import load_decoder_module
from conftest import CAPTURES, ROOT, real, run_sigrok

GOLDEN = ROOT / "tests" / "golden" / "spi_gaps"
gapdefs = load_decoder_module("spi_gaps", "gapdefs")

# the first (longest) text of each annotation class starts with these words
FIRST_TEXT = (("CS setup:", "cs-setup"), ("CS hold:", "cs-hold"), ("Inter-byte gap:", "inter-byte"),
              ("Inter-transfer gap:", "inter-transfer"), ("cs_change gap:", "cs-change"),
              ("Context switch:", "context-switch"), ("CS high:", "cs-inactive"),
              ("CS low:", "cs-inactive"), ("Transfer", "transfer"), ("SCLK not at", "warning"),
              ("", "warning"))


@dataclasses.dataclass(frozen=True)
class Ann:
    ss: int
    es: int
    cls: str
    text: str


def decode(path, pd_options: str) -> list[Ann]:
    """spi_gaps annotations (sigrok-cli, errors checked by run_sigrok)."""
    out = run_sigrok(["-i", str(path), "-P", f"spi_gaps:{pd_options}", "-A", "spi_gaps",
                      "--protocol-decoder-samplenum"])
    anns = []
    for line in out.splitlines():
        m = re.match(r"^(\d+)-(\d+) spi_gaps-1: (.*)$", line)
        assert m, f"unexpected sigrok-cli line: {line!r}"
        text = m.group(3)
        cls = next(c for prefix, c in FIRST_TEXT if text.startswith(prefix))
        if cls == "warning":
            assert "SCLK not at" in text or "left over" in text, text
        anns.append(Ann(int(m.group(1)), int(m.group(2)), cls, text))
    return anns


def decode_full(path, pd_options: str) -> list[str]:
    """All text variants with class ids (sigrok-cli -l 4 prints them), as
    sigrok-test lines. The same decode is error-checked through run_sigrok."""
    checked = decode(path, pd_options)
    import subprocess

    env = dict(os.environ, SIGROKDECODE_DIR=str(ROOT / "decoders"))
    proc = subprocess.run(["sigrok-cli", "-l", "4", "-i", str(path), "-P", f"spi_gaps:{pd_options}",
                           "-A", "spi_gaps"], capture_output=True, text=True, env=env, timeout=600)
    lines = [line.replace(" spi_gaps-1: ", " spi_gaps: ", 1) for line in proc.stdout.splitlines()]
    assert len(lines) == len(checked)
    for line, a in zip(lines, checked):
        assert line.startswith(f'{a.ss}-{a.es} spi_gaps: {a.cls}: "{a.text}"'), (line, a)
    return lines


def pd_options(a, *, clk, cs, given=True) -> str:
    """sigrok-cli options that set spi_gaps up like the analysis ``a`` (what
    'spigap decoders pvs --gaps' writes into a .pvs)."""
    cfg = a.cfg
    o = [f"clk={clk}", f"cs={cs}", f"cpol={cfg.cpol}", f"cpha={cfg.cpha}", f"wordsize={cfg.wordsize}",
         "cs_polarity=" + ("active-low" if cfg.cs_active_low else "active-high")]
    if given:
        from spigap.cli.decoders import spi_gaps_values

        v = spi_gaps_values(a)
        o += [f"{k}={v[k]!r}" if isinstance(v[k], float) else f"{k}={v[k]}"
              for k in ("transfers_per_message", "first_message_start", "message_lengths", "inter_transfer_gap")
              if k in v]
    return ":".join(o)


def expected(a) -> dict[str, list[tuple[int, int]]]:
    """What the decoder must annotate, from the analysis, per class."""
    exp = {"cs-setup": [], "cs-hold": [], "inter-byte": [], "inter-transfer": [], "cs-change": [],
           "context-switch": [], "cs-inactive": []}
    for k in range(a.n):
        if not math.isnan(a.cs_setup[k]):
            exp["cs-setup"].append((int(a.start[k]), int(a.first_edge[k])))
        if not math.isnan(a.cs_hold[k]):
            exp["cs-hold"].append((int(a.last_edge[k]), int(a.end[k])))
        w0, w1 = int(a.word_off[k]), int(a.word_off[k + 1])
        p0 = int(a.pair_off[k])
        for j in range(w0, w1 - 1):
            kind = "inter-transfer" if a.pair_inter_transfer[p0 + j - w0] else "inter-byte"
            exp[kind].append((int(a.word_last[j]), int(a.word_first[j + 1])))
            assert a.word_first[j + 1] - a.word_last[j] == a.pair_gap[p0 + j - w0]
        if k:
            kind = {1: "cs-change", 2: "context-switch", 4: "cs-inactive", 5: "cs-inactive"}[int(a.gap_kind[k])]
            exp[kind].append((int(a.end[k - 1]), int(a.start[k])))
    return exp


def got(anns, *classes) -> list[tuple[int, int]]:
    return sorted((x.ss, x.es) for x in anns if x.cls in classes)


def assert_agrees(path, cfg: SpiConfig, *, clk, cs, **reader):
    """Decoder == analyzer: every CS setup/hold, word gap and CS-inactive gap,
    to the sample, with the labels (options from the analysis)."""
    a = analyze_device(path, cfg, **reader)
    anns = decode(path, pd_options(a, clk=clk, cs=cs))
    exp = expected(a)
    for cls, spans in exp.items():
        assert got(anns, cls) == sorted(spans), f"{path.name}: {cls} differs"
    # transfers: every window the decoder saw close (a window still open at the end has none)
    closed = [(int(s), int(e)) for s, e, pe in zip(a.start, a.end, a.partial_end) if not pe]
    assert got(anns, "transfer") == closed
    # warnings: the analyzer's SCLK-not-idle-at-assert and trailing-bits transfers
    complete = ~a.partial_start & ~a.partial_end
    cpol = sorted((int(s), int(e)) for s, e, ok, c in zip(a.start, a.end, a.clk_ok, complete) if c and not ok)
    trailing = sorted((int(s), int(e)) for s, e, b, c in zip(a.start, a.end, a.n_bits, complete)
                      if c and b % a.cfg.wordsize)
    warnings = [x for x in anns if x.cls == "warning"]
    assert sorted((x.ss, x.es) for x in warnings if x.text.startswith("SCLK not at")) == cpol
    assert sorted((x.ss, x.es) for x in warnings if "word size" in x.text) == trailing
    return a, anns


# ------------------------------------------------------------------ synthesized captures

def synth(tmp_path, name, crop_windows=None, **overrides):
    """A capture from the analyzer's synthesizer; ``crop_windows=(i, j)`` cuts it
    in the middle of windows i and j (CS active at the first and last sample)."""
    from spigap.synth import scenario, write

    base = {"messages": 6, "transfers_per_message": 4, "words_per_transfer": 3, "seed": 3,
            "sigma": "30ns", "samplerate": "50MHz", "sclk": "2MHz", "lead": "5us", "tail": "5us"}
    base.update(overrides)
    sc = scenario.Scenario.from_toml(None, overrides=base)
    tl = sc.timeline()
    if crop_windows:
        i, j = crop_windows
        sc.crop_start = (tl.cs_assert[i] + tl.cs_deassert[i]) / 2
        sc.crop_end = (tl.cs_assert[j] + tl.cs_deassert[j]) / 2
    path = tmp_path / f"{name}.sr"
    write(sc, path, tl=tl)
    return path, sc


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
@pytest.mark.parametrize("polarity", ["low", "high"])
def test_agrees_with_analyzer_every_mode_and_cs_polarity(tmp_path, mode, polarity):
    path, _ = synth(tmp_path, f"m{mode}{polarity}", mode=mode, cs_polarity=polarity)
    # 4 transfers per message (given: with 6 messages and no idle lead nothing else tells
    # which gap kind ends messages, docs/gaps.md)
    a, anns = assert_agrees(path, SpiConfig(cpol=mode >> 1, cpha=mode & 1, cs_active_low=polarity == "low",
                                            transfers_per_message=4), clk="SCLK", cs="CS")
    assert len(got(anns, "inter-byte")) == 2 * 24 and len(got(anns, "cs-setup")) == 24
    assert len(got(anns, "context-switch")) == 5 and len(got(anns, "cs-change")) == 18
    assert not [x for x in anns if x.cls == "warning"]


@pytest.mark.parametrize("wordsize, words", [(16, 2), (12, 3), (1, 5), (32, 1)])
def test_agrees_with_analyzer_word_sizes(tmp_path, wordsize, words):
    path, _ = synth(tmp_path, f"w{wordsize}", wordsize=wordsize, words_per_transfer=words, mode=1)
    assert_agrees(path, SpiConfig(cpha=1, wordsize=wordsize), clk="SCLK", cs="CS")


def test_agrees_with_analyzer_inter_transfer_and_partial_windows(tmp_path):
    # the Linux mcp320x message (1-byte command + 2-byte read transfer in one
    # CS window), cut so that CS is active at the first and at the last sample
    path, _ = synth(tmp_path, "segments", crop_windows=(0, 15), segments=[1, 2], inter_transfer="4us",
                    messages=20, transfers_per_message=1)
    a, anns = assert_agrees(path, SpiConfig(), clk="SCLK", cs="CS")
    assert a.partial_start[0] and a.partial_end[-1]
    assert got(anns, "inter-transfer") and got(anns, "inter-byte")
    first = [x for x in anns if x.cls == "transfer"][0]
    assert first.ss == 0 and "already active" in first.text


def test_seed_captures(tmp_path):
    for name in ("mcp3008-rpi3-k4.4-b10.sr", "mcp3008-rpi3-mcp320x-iio.sr", "mcp3008-rpi3-k4.4-nodelay-b10.sr"):
        a, anns = assert_agrees(CAPTURES / name, SpiConfig(), clk="SCLK", cs="CE0")
        assert len(got(anns, "cs-setup")) == a.n


# ------------------------------------------------------------------ hand-built edge cases

def edge_capture(path):
    """Mode 0, CS active low, 1 MHz; every rule of docs/gaps.md that has a corner."""
    from spigap.synth.srwriter import Track, write_sr

    clk, cs = [], []

    def burst(start, bits, half=2):
        for b in range(bits):
            clk.append((start + 2 * b * half, 1))
            clk.append((start + (2 * b + 1) * half, 0))
        return start + (2 * bits - 1) * half      # the last (falling) edge

    # A: CS already active at sample 0 (partial start), one word, deassert at 40
    burst(4, 8)
    cs.append((40, 1))
    # B: the first SCLK edge in the CS assert sample (inside: setup 0); two words
    # with a gap; the last SCLK edge in the CS deassert sample (outside)
    cs.append((60, 0))
    last = burst(60, 8)
    last = burst(last + 7, 8)
    cs.append((last, 1))
    # C: SCLK high at the assert (wrong CPOL for mode 0) and 8 + 3 bits (trailing bits)
    clk.append((138, 1))
    cs.append((140, 0))
    clk.append((142, 0))
    last = burst(146, 8)
    last = burst(last + 5, 3)
    cs.append((last + 4, 1))
    # D: a CS pulse without any clock
    cs.append((200, 0))
    cs.append((210, 1))
    # E: three words, an inter-transfer gap, CS still active at the end (partial end)
    cs.append((230, 0))
    last = burst(236, 8)
    last = burst(last + 5, 8)
    burst(last + 60, 8)
    n = 400
    tr = [Track("CLK", np.array([s for s, _ in clk]), np.array([v for _, v in clk]), 0),
          Track("CS#", np.array([s for s, _ in cs]), np.array([v for _, v in cs]), 0),
          Track("MOSI", np.array([5, 70, 240]), np.array([1, 0, 1]), 0)]
    write_sr(path, tr, 1e6, n)
    return path


def test_edge_cases_agree_with_analyzer(tmp_path):
    path = edge_capture(tmp_path / "edges.sr")
    a, anns = assert_agrees(path, SpiConfig(clk="CLK", cs="CS#", mosi="MOSI"), clk="CLK", cs="CS#")
    setups = got(anns, "cs-setup")
    assert (60, 60) in setups                        # same-sample assert: setup 0
    assert not [s for s in setups if s[0] == 0]      # no setup for the partial start
    assert len(got(anns, "transfer")) == 4           # A, B, C, D; E is still open
    warnings = [(x.ss, x.text) for x in anns if x.cls == "warning"]
    # C: SCLK high at the assert; B too, as the analyzer reads SCLK after the
    # edge in the assert sample; C: 3 trailing bits
    assert [w[0] for w in warnings if "CPOL=0" in w[1]] == [60, 140]
    assert [w[0] for w in warnings if "3 bits left over" in w[1]] == [140]


def test_edge_cases_golden(tmp_path):
    path = edge_capture(tmp_path / "edges.sr")
    check_golden("edges", decode_full(path, "clk=CLK:cs=CS#:transfers_per_message=2"))


# ------------------------------------------------------------------ real captures

REAL_CASES = [
    # file, clk, cs, analyzer config (mosi/miso only to satisfy the analyzer)
    ("nfc__st25r39xx__HydraBus_v1_HydraNFC_Shield_v2_ST25R3916_Read_All_Registers_SpaceA_B.sr", "0_CLK",
     "3_CS#", dict(cpha=1, mosi="2_MOSI", miso="1_MISO"), {}),
    ("spi__adxl345__adxl345_registers.sr", "0", "3", dict(cpol=1, cpha=1, mosi="1", miso="2"), {}),
    ("spi__ssi32__ssi32_bananapi_loop_test.sr", "CLK", "CS#", dict(), {}),
    ("spi__spi_atmega32__spi_atmega32_00.sr", "2", "0", dict(mosi="1"), {}),
    ("spi__mrf24j40__sensormote__mrf24j40-wake-tx-ack.sr", "SCK", "nCS", dict(), {}),
    ("spi__nrf24l01__nrf24l01-communication.sr", "rpi_CLK", "rpi_CSN", dict(mosi="rpi_MOSI", miso="rpi_MISO"), {}),
    ("spi__nrf24l01__nrf24l01-communication.sr", "uc_CLK", "uc_CSN", dict(mosi="uc_MOSI", miso="uc_MISO"), {}),
    ("spi__ltc2422__ltc2422_read_adc.sr", "0", "2", dict(miso="1"), {}),
    ("spi__ad7920__ad7920_fast_read.sr", "0", "2", dict(miso="1"), {}),
    ("sdcard__spi_mode__cmds__cmd17.sr", "CLK", "CS#", dict(), {}),
]


@pytest.mark.parametrize("name, clk, cs, cfg, reader", REAL_CASES, ids=lambda v: v if isinstance(v, str) else "")
def test_real_captures_agree_with_analyzer(name, clk, cs, cfg, reader):
    path = real(name)
    assert_agrees(path, SpiConfig(clk=clk, cs=cs, **cfg), clk=clk, cs=cs, **reader)


@pytest.mark.parametrize("golden, name, options", [
    ("st25r3916-mode1", "nfc__st25r39xx__HydraBus_v1_HydraNFC_Shield_v2_ST25R3916_Read_All_Registers_SpaceA_B.sr",
     "clk=0_CLK:cs=3_CS#:cpha=1"),
    ("adxl345-mode3", "spi__adxl345__adxl345_registers.sr", "clk=0:cs=3:cpol=1:cpha=1"),
    ("ssi32-partial-start", "spi__ssi32__ssi32_bananapi_loop_test.sr", "clk=CLK:cs=CS#:transfers_per_message=2"),
])
def test_real_golden(golden, name, options):
    check_golden(golden, decode_full(real(name), options))


def check_golden(name: str, lines: list[str]):
    path = GOLDEN / f"{name}.txt"
    text = "\n".join(lines) + "\n"
    if os.environ.get("SPIGAP_REGEN_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"{path} is missing (run with SPIGAP_REGEN_GOLDEN=1 to write it)"
    assert path.read_text() == text, f"spi_gaps output differs from {path}"


# ------------------------------------------------------------------ auto mode, labels

def test_auto_threshold_settles_on_the_analyzers_labels():
    """Without the threshold option the decoder judges each word gap by the
    gaps seen so far; only the first windows may be labelled differently."""
    path = CAPTURES / "mcp3008-rpi3-mcp320x-iio.sr"
    a = analyze_device(path, SpiConfig())
    anns = decode(path, "clk=SCLK:cs=CE0")
    exp = expected(a)
    want = sorted([(s, e, "inter-transfer") for s, e in exp["inter-transfer"]] +
                  [(s, e, "inter-byte") for s, e in exp["inter-byte"]])
    have = sorted((x.ss, x.es, x.cls) for x in anns if x.cls in ("inter-byte", "inter-transfer"))
    assert [w[:2] for w in want] == [h[:2] for h in have]
    differ = [i for i, (w, h) in enumerate(zip(want, have)) if w != h]
    # the decoder first splits after 8 word gaps (the first four windows), then agrees
    assert differ and max(differ) < 8
    b10 = CAPTURES / "mcp3008-rpi3-k4.4-b10.sr"
    anns = decode(b10, "clk=SCLK:cs=CE0")
    assert not got(anns, "inter-transfer") and len(got(anns, "inter-byte")) == 2000


def test_without_transfers_per_message_gaps_are_plain_cs_high():
    path = CAPTURES / "mcp3008-rpi3-k4.4-b10.sr"
    anns = decode(path, "clk=SCLK:cs=CE0")
    inactive = [x for x in anns if x.cls == "cs-inactive"]
    assert len(inactive) == 999 and all(x.text.startswith("CS high:") for x in inactive)
    assert not got(anns, "cs-change", "context-switch")


def test_message_phase_option_moves_the_context_switches():
    path = CAPTURES / "mcp3008-rpi3-k4.4-b10.sr"
    a = analyze_device(path, SpiConfig())
    assert a.grouping.transfers_per_message == 10
    shifted = decode(path, "clk=SCLK:cs=CE0:transfers_per_message=10:first_message_start=3")
    ctx = got(shifted, "context-switch")
    # gap i (between transfers i and i+1) ends a message when transfer i+1 starts one: 3, 13, ...
    assert ctx[0] == (int(a.end[2]), int(a.start[3]))
    assert len(ctx) == 100


def test_texts_have_zoom_variants_and_units(tmp_path):
    lines = decode_full(CAPTURES / "mcp3008-rpi3-k4.4-b10.sr", "clk=SCLK:cs=CE0:transfers_per_message=10")
    setup = next(line for line in lines if " cs-setup: " in line)
    texts = re.findall(r'"([^"]*)"', setup)
    # longest first, down to one letter; µs/ns with the sample count in the longest
    assert texts[0].startswith("CS setup: ") and "samples)" in texts[0]
    assert texts[-1] == "S" and len(texts) >= 4
    assert [len(t) for t in texts] == sorted((len(t) for t in texts), reverse=True)
    gap = next(line for line in lines if " inter-byte: " in line)
    assert "idle clock" in gap and " ns" in gap


# ------------------------------------------------------------------ the shared rules

@pytest.mark.parametrize("seed", range(20))
def test_histogram_matches_numpy_and_the_analyzer(seed):
    from spigap.core.spacing import SpacingCounter

    rng = np.random.default_rng(seed)
    values = rng.integers(1, 60, int(rng.integers(1, 300)))
    if seed % 3 == 0:
        values = np.concatenate([values, np.full(int(rng.integers(1, 50)), 21)])
    h = gapdefs.Histogram()
    for v in values:
        h.add(int(v))
    for q in (0.25, 0.5, 0.99, 0.0, 1.0):
        assert h.percentile(q) == float(np.percentile(values, 100 * q))   # bit for bit
    sc = SpacingCounter()
    sc.add(values.astype(np.int64))
    assert h.lower_quantile(0.5) == sc.quantile(0.5)
    assert h.band_mean() == pytest.approx(sc.central_mean(), rel=1e-12)


def test_threshold_option_classifies_integer_gaps_like_the_threshold():
    for sr in (24e6, 50e6, 1e9, 5.0, 2e6):
        for thr in (84.0, 48.776857, 12.0, 10.0, 1572.0, 3.5):
            t = gapdefs.threshold_samples(gapdefs.threshold_option_us(thr, sr) * 1e-6, sr)
            for gap in range(int(thr) - 3, int(thr) + 4):
                assert (gap > t) == (gap > thr), (sr, thr, gap)


def test_rules_are_the_documented_ones():
    # word gaps: two populations only with a clear valley; one jittered population stays inter-byte
    two = gapdefs.split_two([(75, 100), (76, 90), (200, 95), (201, 100)], "linear")
    assert two.verdict == "two" and 76 < gapdefs.inter_transfer_threshold(two) < 200
    one = gapdefs.split_two([(v, int(1000 * 2.718 ** (-((v - 20) / 4) ** 2 / 2))) for v in range(8, 33)], "linear")
    assert one.verdict == "one" and gapdefs.inter_transfer_threshold(one) is None
    assert gapdefs.idle_clocks(21, 13.888) == pytest.approx((21 - 6.944) / 13.888)
    assert [gapdefs.is_message_boundary(i, 10) for i in (8, 9, 10, 19)] == [False, True, False, True]
    # messages of 2 and 3 alternating from transfer 0: boundaries after transfers 1, 4, 6, 9
    assert [i for i in range(10) if gapdefs.is_message_boundary(i, 0, 0, [2, 3])] == [1, 4, 6, 9]
    assert gapdefs.gap_label(1, 0, 0, [2, 3]) == "context_switch" and gapdefs.gap_label(2, 0, 0, [2, 3]) == "cs_change"
    assert gapdefs.message_lengths_from_labels([False, True, False, False, True]) == ([2, 3], 0)
    assert gapdefs.message_lengths_from_labels([False, False, True, False, True]) == ([2, 3], 3)
    assert gapdefs.describe_lengths([2, 3]) == "messages of 2 and 3 transfers alternate"
    assert gapdefs.describe_lengths([1, 1, 1, 1, 2]) == "repeating: 4 single transfers, then a message of 2"
    assert gapdefs.first_message_start_from_phase(9, 10) == 0
    assert gapdefs.first_message_start_from_phase(2, 10) == 3
    assert gapdefs.fmt_seconds(1.62e-6) == "1.62 µs" and gapdefs.fmt_seconds(4.2e-7) == "420 ns"
    assert gapdefs.texts("CS setup", "Setup", "S", 80, 50e6) == [
        "CS setup: 1.6 µs (80 samples)", "CS setup 1.6 µs", "Setup 1.6 µs", "1.6 µs", "S"]


def test_message_lengths_option_follows_the_analysis():
    # an MCP2518FD RX capture read as "2 single transfers, then a message of 2" (the reading
    # --context-switch shorter picks; the device's shapes alone leave "1 per message" too):
    # the decoder's message_lengths and first_message_start options give the analyzer's
    # cs_change/context-switch labels
    path = CAPTURES / "mcp2518fd-imx8mp-k5.18-A-rx.sr"
    assert analyze_device(path, SpiConfig(message_lengths=(1, 2))).grouping.ambiguous
    a = analyze_device(path, SpiConfig(message_lengths=(1, 2), context_switch="shorter"))
    assert a.grouping.lengths == [1, 1, 2] and a.grouping.method == "user"
    opts = pd_options(a, clk="SCK", cs="nCS")
    assert "message_lengths=1+1+2" in opts and "transfers_per_message" not in opts
    anns = decode(path, opts)
    exp = expected(a)
    for cls in ("cs-change", "context-switch"):
        assert got(anns, cls) == sorted(exp[cls]) and exp[cls], cls
    # ambiguous without the device: both options unset, plain CS-inactive gaps
    b = analyze_device(path, SpiConfig())
    assert b.grouping.ambiguous
    assert "message_lengths" not in pd_options(b, clk="SCK", cs="nCS")
    assert len(exp["cs-change"]) + len(exp["context-switch"]) == len(expected(b)["cs-inactive"])
