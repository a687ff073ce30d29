"""Truth from the drivers (issue 30): every operation of the Linux drivers, decoded right.

The captures here are built from what the kernel drivers send, as facts read in
their sources (the generators in analyzer/spigap/synth/traffic/: mcp3008.py
``linux_message``, ad7606.py ``linux_sequence``, mcp2518fd.py ``Driver``), with
what the chip answers, and decoded by the real sigrok-cli with our decoders
(``run_sigrok`` fails on any ``srd:`` line). ``OPERATIONS`` lists the 28
operations of issue 30 with the kernel file and identifier each one follows;
every one is checked by a test below (``covers``), and a test fails when one
is left out.
"""

from __future__ import annotations

import re

import pytest
from conftest import sigrok_annotations

from spigap.synth import scenario, write
from spigap.synth.traffic import ad7606 as adgen
from spigap.synth.traffic import mcp2518fd as cangen
from spigap.synth.traffic import mcp3008 as mcpgen
from spigap.synth.timeline import build

# id: (what, kernel file, identifiers)
OPERATIONS = {
    # drivers/iio/adc/mcp320x.c
    "mcp320x-se-10": ("10-bit single-ended read (MCP3004, MCP3008)", "drivers/iio/adc/mcp320x.c",
                      "mcp320x_channel_to_tx_data, mcp320x_adc_conversion"),
    "mcp320x-diff-10": ("10-bit pseudo-differential read (MCP3004, MCP3008)", "drivers/iio/adc/mcp320x.c",
                        "mcp320x_channel_to_tx_data, MCP320X_VOLTAGE_CHANNEL_DIFF"),
    "mcp320x-se-12": ("12-bit single-ended read (MCP3204, MCP3208)", "drivers/iio/adc/mcp320x.c",
                      "mcp320x_channel_to_tx_data, mcp320x_adc_conversion"),
    "mcp320x-diff-12": ("12-bit pseudo-differential read (MCP3204, MCP3208)", "drivers/iio/adc/mcp320x.c",
                        "mcp320x_channel_to_tx_data, MCP320X_VOLTAGE_CHANNEL_DIFF"),
    "mcp320x-repeat": ("the LSB-first repeat in the 2-byte receive transfer", "drivers/iio/adc/mcp320x.c",
                       "mcp320x_probe (transfer[1].len = DIV_ROUND_UP(resolution, 8))"),
    # drivers/iio/adc/ad7606.c, ad7606_spi.c
    "ad7606-8-read": ("AD7606-8 read: 8 x 16 bits in one transfer", "drivers/iio/adc/ad7606_spi.c",
                      "ad7606_spi_read_block, ad7606_read_samples"),
    "ad7606-6-read": ("AD7606-6 read: 6 x 16 bits", "drivers/iio/adc/ad7606_spi.c", "ad7606_spi_read_block, ad7606_6_info"),
    "ad7606-4-read": ("AD7606-4 read: 4 x 16 bits", "drivers/iio/adc/ad7606_spi.c", "ad7606_spi_read_block, ad7606_4_info"),
    "ad7606c-18-read": ("AD7606C-18 read: 8 x 18 bits (144 clocks)", "drivers/iio/adc/ad7606_spi.c",
                        "ad7606_spi_read_block18to32 (bits_per_word = 18)"),
    "ad7606bc-registers": ("AD7606B/C software-mode register writes and reads", "drivers/iio/adc/ad7606_spi.c",
                           "ad7606b_sw_mode_config, ad7606_spi_reg_read, ad7606_spi_reg_write, "
                           "ad7606b_spi_rd_wr_cmd; ad7606.c ad7606_write_mask"),
    "ad7606-mode-trap": ("the device tree's mode 3 on an AD7606 (bits shifted): a warning naming cpol/cpha",
                         "Documentation/devicetree/bindings/iio/adc/adi,ad7606.yaml", "spi-cpol, spi-cpha"),
    # drivers/net/can/spi/mcp251xfd/
    "mcp251xfd-reset": ("RESET", "mcp251xfd-core.c", "mcp251xfd_chip_softreset_do"),
    "mcp251xfd-read": ("READ: DEVID, command and 4 bytes in one window", "mcp251xfd-core.c",
                       "mcp251xfd_register_get_dev_id"),
    "mcp251xfd-read-crc": ("READ_CRC of a register", "mcp251xfd-regmap.c", "mcp251xfd_regmap_crc_read"),
    "mcp251xfd-write-crc": ("WRITE_CRC of a register (and the pre-6.3 1-byte UINC)", "mcp251xfd-regmap.c",
                            "mcp251xfd_regmap_crc_gather_write; mcp251xfd-ring.c uinc_xfer"),
    "mcp251xfd-write-safe": ("WRITE_SAFE of one byte (UINC, RTS; v6.3+)", "mcp251xfd-regmap.c",
                             "mcp251xfd_cmd_prepare_write_reg"),
    "mcp251xfd-register-window": ("C1INT and C1RXIF in one READ_CRC", "mcp251xfd-core.c",
                                  "mcp251xfd_read_regs_status"),
    "mcp251xfd-len": ("the LEN byte: bytes for registers, 32-bit words for RAM", "mcp251xfd.h",
                      "__mcp251xfd_spi_cmd_crc_set_len"),
    "mcp251xfd-crc-ok": ("CRC verdict: good", "mcp251xfd-crc16.c", "mcp251xfd_crc16_compute2"),
    "mcp251xfd-crc-bad-read": ("CRC verdict: a read with a corrupted bit (the driver reads again)",
                               "mcp251xfd-regmap.c", "mcp251xfd_regmap_crc_read, MCP251XFD_READ_CRC_RETRIES_MAX"),
    "mcp251xfd-crc-bad-write": ("CRC verdict: a write with a bad CRC (the chip drops it)", "mcp251xfd-regmap.c",
                                "mcp251xfd_cmd_prepare_write_reg (MCP251XFD_QUIRK_CRC_REG)"),
    "mcp251xfd-layout": ("the RAM layout learnt from the FIFO configuration writes", "mcp251xfd-ring.c",
                         "mcp251xfd_ring_init; mcp251xfd-chip-fifo.c mcp251xfd_chip_fifo_init"),
    "mcp251xfd-rx-object": ("RX objects", "mcp251xfd-rx.c", "mcp251xfd_rx_obj_read"),
    "mcp251xfd-tx-object": ("TX objects", "mcp251xfd-tx.c", "mcp251xfd_tx_obj_from_skb"),
    "mcp251xfd-tef-object": ("TEF objects", "mcp251xfd-tef.c", "mcp251xfd_tef_obj_read"),
    "mcp251xfd-bulk-read": ("several objects in one READ_CRC", "mcp251xfd-rx.c",
                            "mcp251xfd_rx_obj_read (len > 1), mcp251xfd_get_rx_linear_len"),
    "mcp251xfd-short-tx": ("the driver's short TX write (data rounded up to words, shorter than the object)",
                           "mcp251xfd-tx.c", "mcp251xfd_tx_obj_from_skb (len += round_up(cfd->len, 4))"),
    "mcp251xfd-2517fd-seq": ("MCP2517FD: SEQ in flags 31:9 as the driver writes it", "mcp251xfd-tx.c",
                             "mcp251xfd_tx_obj_from_skb, MCP251XFD_OBJ_FLAGS_SEQ_MCP2518FD_MASK"),
}
COVERED: set = set()


def covers(*ops):
    for op in ops:
        assert op in OPERATIONS, op
    COVERED.update(ops)
    return lambda fn: fn


def test_the_28_operations_of_issue_30_are_all_tested():
    assert len(OPERATIONS) == 28
    assert COVERED == set(OPERATIONS), f"not tested: {sorted(set(OPERATIONS) - COVERED)}"


def of(anns, cls):
    return [a for a in anns if a[2] == cls]


def texts(anns, cls):
    return [a[3][0] for a in anns if a[2] == cls]


# ------------------------------------------------------------------ MCP320x

MCP_TIMING = {"samplerate": "20MHz", "sclk": "1MHz", "mode": 0, "wordsize": 8, "idle_clocks": 1,
              "inter_transfer": "4us", "context_switch": "20us", "cs_setup": "1.6us", "cs_hold": "0.4us",
              "seed": 320}


def mcp320x_capture(tmp_path, part):
    """Every channel address of ``part``, single-ended then pseudo-differential, each with
    codes 0, full scale, mid scale and two others: the driver's message, the chip's answer."""
    inputs, bits = mcpgen.PARTS[part]
    top = (1 << bits) - 1
    mosi, miso, seg, reads = [], [], [], []
    for diff in (False, True):
        for ch in range(inputs):
            for code in (0, top, top // 2 + 1, (37 * (ch + 1)) % top, top - 5 * ch):
                tx, rx, segments = mcpgen.linux_message(part, ch, diff, code)
                assert mcpgen.linux_code(part, rx) == code     # the driver reads back what the chip sent
                mosi.append(tx)
                miso.append(rx)
                seg.append(segments)
                reads.append((ch, diff, code))
    sc = scenario.Scenario.from_toml(None, MCP_TIMING)
    w = sc.windows_from_payload(mosi, miso, message_start=[True] * len(mosi), segment_start=seg)
    path = tmp_path / f"{part}.sr"
    write(sc, path, tl=build(w, sc.shape, sc.tail))
    return path, reads


def pair_name(ch, diff, inputs):
    if not diff:
        return f"CH{ch}"
    if inputs == 4:
        ch &= 3
    even = ch & ~1
    return f"CH{even}\u2212/CH{even + 1}+" if ch & 1 else f"CH{even}+/CH{even + 1}\u2212"


@covers("mcp320x-se-10", "mcp320x-diff-10", "mcp320x-se-12", "mcp320x-diff-12", "mcp320x-repeat")
@pytest.mark.parametrize("part", ["MCP3004", "MCP3008", "MCP3204", "MCP3208"])
def test_mcp320x_reads(tmp_path, part):
    inputs, bits = mcpgen.PARTS[part]
    path, reads = mcp320x_capture(tmp_path, part)
    anns, _ = sigrok_annotations(path, f"spi:clk=SCLK:mosi=MOSI:miso=MISO:cs=CS,mcp3008:part={part}:vref=3.3",
                                 "mcp3008")
    assert not of(anns, "warning")
    want = [f"{pair_name(ch, diff, inputs)} = {code} ({code * 3.3 / (1 << bits):.3f} V)" for ch, diff, code in reads]
    assert texts(anns, "conversion") == want
    # 2 bytes after the 1-byte command: the null bit ends byte 0, then B(n-1)..B0 and the LSB-first
    # repeat from B1 fill the rest (6 bits for 10-bit parts, 4 for 12-bit ones)
    n = 16 - bits
    assert texts(anns, "repeat") == [f"LSB-first repeat B1..B{n} matches"] * len(reads)
    assert texts(anns, "null") == ["Null bit: 0"] * len(reads)


# ------------------------------------------------------------------- AD7606

AD_TIMING = {"samplerate": "50MHz", "sclk": "10MHz", "mode": 2, "wordsize": 2, "idle_clocks": 0,
             "cs_setup": "0.5us", "cs_hold": "0.3us", "context_switch": "5us", "inter_transfer": "1us",
             "seed": 7606}


def ad7606_capture(tmp_path, part, **opts):
    sc = scenario.Scenario.from_toml(None, {**AD_TIMING, "device": {"name": "ad7606-linux", "part": part, **opts}})
    path = tmp_path / f"{part}.sr"
    tl = write(sc, path).timeline
    return path, tl.device_truth


FRAME_VALUES = re.compile(r"(V\d+[AB]?)=(-?\d+)")


def frames(anns):
    return [dict(FRAME_VALUES.findall(a[3][1])) for a in of(anns, "frame")]


def read_values(truth, names):
    return [{names[k]: str(c) for k, c in enumerate(t["codes"])} for t in truth if t["what"] == "read"]


@covers("ad7606-8-read", "ad7606-6-read", "ad7606-4-read", "ad7606c-18-read")
@pytest.mark.parametrize("part,variant", [
    ("ad7606-8", "AD7606"), ("ad7606-6", "AD7606-6"), ("ad7606-4", "AD7606-4"), ("ad7605-4", "AD7605-4"),
    ("ad7606c-18", "AD7606C-18"), ("ad7607", "AD7607"), ("ad7608", "AD7608"), ("ad7609", "AD7609"),
])
def test_ad7606_reads(tmp_path, part, variant):
    """One transfer of num_adc_channels results (ad7606_read_samples), 14/16/18-bit words."""
    path, truth = ad7606_capture(tmp_path, part, sw_mode=False, conversions=4)
    anns, _ = sigrok_annotations(path, f"ad7606:sclk=SCLK:cs=CS:douta=DOUTA:din=DIN:variant={variant}", "ad7606")
    n, bits = adgen.LINUX_PARTS[part][1:3]
    assert frames(anns) == read_values(truth, [f"V{k + 1}" for k in range(n)])
    assert not of(anns, "warning") and not of(anns, "note")
    assert all(a[3][0].endswith(f"[{n * bits} SCLK]") for a in of(anns, "frame"))
    for a in of(anns, "douta-result"):       # volts: code x 10 V / 2^(bits - 1)
        mt = re.match(r"^V\d+ = (-?\d+) \((-?\d+\.\d{3}) V\)$", a[3][0])
        assert float(mt[2]) == pytest.approx(int(mt[1]) * 10 / (1 << (bits - 1)), abs=0.0006)


@covers("ad7606c-18-read")
def test_ad7606c_18_decoded_as_16_bit_names_the_parts_it_fits(tmp_path):
    """The issue's case: 144 clocks decoded as an AD7606 say which parts they fit."""
    path, truth = ad7606_capture(tmp_path, "ad7606c-18", sw_mode=False, conversions=2)
    anns, _ = sigrok_annotations(path, "ad7606:sclk=SCLK:cs=CS:douta=DOUTA", "ad7606")
    assert texts(anns, "warning") == [
        "144 SCLKs: looks like AD7606C-18, AD7608 or AD7609 (8 \u00d7 18 bits), decoded as AD7606 (128): "
        "set the variant option"] * 2


def test_ad7607_read_decoded_as_16_bit_is_named_too(tmp_path):
    """112 clocks: the first 7 channels of a 16-bit part (a note), or a whole AD7607 read."""
    path, _ = ad7606_capture(tmp_path, "ad7607", sw_mode=False, conversions=1)
    anns, _ = sigrok_annotations(path, "ad7606:sclk=SCLK:cs=CS:douta=DOUTA", "ad7606")
    assert not of(anns, "warning")
    (note,) = texts(anns, "note")
    assert note.startswith("Partial read: V1, V2, V3, V4, V5, V6, V7 (112 of 128 SCLKs")
    assert note.endswith("112 SCLKs are a full read of AD7607 (8 \u00d7 14 bits)")


@covers("ad7606bc-registers")
@pytest.mark.parametrize("part,variant,range_text,id_value", [
    ("ad7606b", "AD7606B", "\u00b15 V", 0x14), ("ad7606c-16", "AD7606C-16", "\u00b15 V", 0x34),
    ("ad7606c-18", "AD7606C-18", "\u00b15 V", 0x34),
])
def test_ad7606bc_software_mode_registers(tmp_path, part, variant, range_text, id_value):
    """At probe in software mode: CONFIG = single DOUT (ad7606b_sw_mode_config); a scale write
    on channel 0 (ad7606_write_scale_sw: read-modify-write of RANGE_CH1_CH2); an oversampling
    write (ad7606_write_os_sw); a register read (debugfs ad7606_reg_access); then reads, whose
    V1 is now scaled to ±5 V."""
    regs_c = variant != "AD7606B"
    before, code = (0x33, 0x1) if regs_c else (0x22, 0x1)
    path, truth = ad7606_capture(tmp_path, part, conversions=2, scale=[before, code], os_index=3, id=id_value)
    anns, _ = sigrok_annotations(path, f"ad7606:sclk=SCLK:cs=CS:douta=DOUTA:din=DIN:variant={variant}", "ad7606")
    assert not of(anns, "warning") and not of(anns, "note")
    after = (before & ~0xF) | code
    rng = lambda c: {0x1: "\u00b15 V", 0x2: "\u00b110 V" if not regs_c else "\u00b16.25 V",  # noqa: E731
                     0x3: "\u00b110 V"}[c]
    assert texts(anns, "register") == [
        "Write CONFIG = 0x00 (normal, 1 DOUT line, status header off)",
        "Read command RANGE_CH1_CH2 (0x03): data in the next frame",
        f"Read RANGE_CH1_CH2 = 0x{before:02X} (V1 {rng(before & 0xF)} V2 {rng(before >> 4)})",
        f"Write RANGE_CH1_CH2 = 0x{after:02X} (V1 {range_text} V2 {rng(after >> 4)})",
        "Write OVERSAMPLING = 0x03 (OS x8)",
        "Read command ID (0x2F): data in the next frame",
        f"Read ID = 0x{id_value:02X} (device ID {id_value >> 4}, silicon revision {id_value & 0xF})",
    ]
    n, bits = adgen.LINUX_PARTS[part][1:3]
    assert frames(anns) == read_values(truth, [f"V{k + 1}" for k in range(n)])
    v1 = [a[3][0] for a in of(anns, "douta-result") if a[3][0].startswith("V1 ")]
    for t in v1:                                   # the range write applies to what follows
        mt = re.match(r"^V1 = (-?\d+) \((-?\d+\.\d{3}) V\)$", t)
        assert float(mt[2]) == pytest.approx(int(mt[1]) * 5 / (1 << (bits - 1)), abs=0.0006)
    # the same traffic without DIN: each register window says it may be one (map DIN)
    anns, _ = sigrok_annotations(path, f"ad7606:sclk=SCLK:cs=CS:douta=DOUTA:variant={variant}", "ad7606")
    said = [a[3][0] for a in of(anns, "note") + of(anns, "warning")]
    assert not of(anns, "register") and len(said) == 5
    assert all(t.endswith("; or register frames (map DIN to decode them)") for t in said)


def test_ad7606_status_header_follows_config(tmp_path):
    """CONFIG with STATUS_HEADER (not what Linux writes): each result carries its status byte,
    whose channel field is checked."""
    path, truth = ad7606_capture(tmp_path, "ad7606c-16", conversions=2, status_header=True)
    anns, _ = sigrok_annotations(path, "ad7606:sclk=SCLK:cs=CS:douta=DOUTA:din=DIN:variant=AD7606C-16", "ad7606")
    assert texts(anns, "register") == ["Write CONFIG = 0x40 (normal, 1 DOUT line, status header on)"]
    assert not of(anns, "warning") and not of(anns, "note")
    assert frames(anns) == read_values(truth, [f"V{k + 1}" for k in range(8)])
    assert all(a[3][0].endswith("[192 SCLK]") for a in of(anns, "frame"))
    res = texts(anns, "douta-result")
    assert all(t.endswith(f" status 0x{k % 8:02X} CH {k % 8 + 1}") for k, t in enumerate(res))
    # decoded with the header forced off: 192 clocks fit the part with its header on
    anns, _ = sigrok_annotations(path, "ad7606:sclk=SCLK:cs=CS:douta=DOUTA:variant=AD7606C-16:status_header=off",
                                 "ad7606")
    assert texts(anns, "warning")[0].startswith("192 SCLKs: looks like AD7606B or AD7606C-16 (8 \u00d7 24 bits, "
                                                "status header on)")


def test_ad7616_registers_and_sequencer_order(tmp_path):
    """AD7616 in software mode: BURST|SEQEN set by a read-modify-write of its CONFIGURATION
    register (ad7616_sw_mode_setup, ad7616_spi_rd_wr_cmd), then 16 results per read in the
    sequencer's order V0A, V0B, V1A, ..."""
    path, truth = ad7606_capture(tmp_path, "ad7616", conversions=2, scale=[0xFF, 0x2])
    anns, _ = sigrok_annotations(path, "ad7606:sclk=SCLK:cs=CS:douta=DOUTA:din=DIN:variant=AD7616", "ad7606")
    assert not of(anns, "warning") and not of(anns, "note")
    assert texts(anns, "register") == [
        "Read command CONFIGURATION (0x02): data in the next frame",
        "Read CONFIGURATION = 0x00 (OS x1)",
        "Write CONFIGURATION = 0x60 (OS x1 BURST SEQEN)",
        "Read command INPUT_RANGE_A1 (0x04): data in the next frame",
        "Read INPUT_RANGE_A1 = 0xFF (V0A \u00b110 V V1A \u00b110 V V2A \u00b110 V V3A \u00b110 V)",
        "Write INPUT_RANGE_A1 = 0xFE (V0A \u00b15 V V1A \u00b110 V V2A \u00b110 V V3A \u00b110 V)",
    ]
    names = [f"V{i // 2}{'AB'[i % 2]}" for i in range(16)]
    assert frames(anns) == read_values(truth, names)


@covers("ad7606-mode-trap")
@pytest.mark.parametrize("part,variant", [("ad7606-8", "AD7606"), ("ad7606c-18", "AD7606C-18")])
def test_ad7606_mode_3_from_the_device_tree_is_called_out(tmp_path, part, variant):
    """The DT binding's spi-cpol + spi-cpha (mode 3) copied into the options samples on the
    rising edge, where the AD7606 changes DOUT: every read warns and names cpol=1 cpha=0."""
    path, truth = ad7606_capture(tmp_path, part, sw_mode=False, conversions=3)
    anns, _ = sigrok_annotations(path, f"ad7606:sclk=SCLK:cs=CS:douta=DOUTA:variant={variant}:cpol=1:cpha=1",
                                 "ad7606")
    assert texts(anns, "warning") == ["DOUT changes right after the sampling (rising) SCLK edge: every bit is "
                                      "taken one clock late; set cpol=1 cpha=0"] * 3
    n = adgen.LINUX_PARTS[part][1]
    assert frames(anns) != read_values(truth, [f"V{k + 1}" for k in range(n)])     # the shifted values
    # the right mode: no warning
    anns, _ = sigrok_annotations(path, f"ad7606:sclk=SCLK:cs=CS:douta=DOUTA:variant={variant}", "ad7606")
    assert not of(anns, "warning")


# ---------------------------------------------------------------- MCP251xFD

CAN_TIMING = {"samplerate": "100MHz", "sclk": "10MHz", "mode": 0, "wordsize": 8, "idle_clocks": 0,
              "cs_setup": "1us", "cs_hold": "0.5us", "cs_change": "0.5us", "context_switch": "4us",
              "channels": {"clk": "SCK", "mosi": "SDI", "miso": "SDO", "cs": "nCS"}, "seed": 251}
CAN_STACK = "spi:clk=SCK:mosi=SDI:miso=SDO:cs=nCS,mcp2518fd"


def can_capture(tmp_path, name, chip="mcp2518fd", **opts):
    device = {"name": name, "chip": chip, **opts}
    sc = scenario.Scenario.from_toml(None, {**CAN_TIMING, "device": device})
    path = tmp_path / f"{name}.sr"
    tl = write(sc, path).timeline
    anns, _ = sigrok_annotations(path, f"{CAN_STACK}:chip={chip}", "mcp2518fd")
    wins = []
    for a in anns:
        if a[2] == "transaction":
            wins.append([])
        wins[-1].append(a)
    assert len(wins) == len(tl.device_truth)
    return wins, tl.device_truth


def cls_texts(win, cls):
    return [a[3][0] for a in win if a[2] == cls]


@pytest.fixture(scope="module")
def fd_start(tmp_path_factory):
    """Chip start-up (RESET, OSC, DEVID, bit timing, TEF/FIFO configuration, C1CON), then CAN FD
    frames both ways in batches of 1 and 3 (v6.3+: WRITE_SAFE UINCs)."""
    return can_capture(tmp_path_factory.mktemp("fd"), "mcp2518fd-fd", frames=8, batch="1 3")


@covers("mcp251xfd-reset", "mcp251xfd-read", "mcp251xfd-read-crc", "mcp251xfd-write-crc", "mcp251xfd-len",
        "mcp251xfd-crc-ok", "mcp251xfd-write-safe")
def test_mcp251xfd_instructions(fd_start):
    wins, truth = fd_start
    rows = [cls_texts(w, "transaction")[0] for w in wins]
    assert rows[0] == "RESET"
    assert rows[4] == "READ DEVID 0x0000_0014 ID=1 REV=4"          # plain READ, no CRC
    assert rows[1].startswith("READ_CRC OSC 0x0000_0") and rows[1].endswith(" crc ok")
    assert rows[2] == "WRITE_CRC OSC 0x0000_0001 CLKODIV=/1 PLLEN crc ok"
    assert rows[6] == "WRITE_CRC C1NBTCFG 0x003E_0F0F BRP=0 TSEG1=62 TSEG2=15 SJW=15 crc ok"
    for w, t in zip(wins, truth):
        assert cls_texts(w, "transaction")[0].split()[0] == t["instruction"]
        lens = cls_texts(w, "length")
        crcs = cls_texts(w, "crc")
        if t["instruction"] in ("READ_CRC", "WRITE_CRC"):
            data = len(t["mosi"]) - 5
            want = (f"LEN {data // 4} word{'s' if data != 4 else ''} ({data} bytes)" if 0x400 <= t["addr"] < 0xC00
                    else f"LEN {data} byte{'s' if data != 1 else ''}")
            assert lens == [want]
        else:
            assert lens == []
        if t["crc_ok"] is None:
            assert crcs == []
        else:
            got = t["miso"][-2:] if t["instruction"] == "READ_CRC" else t["mosi"][-2:]
            assert crcs == [f"CRC 0x{got[0] << 8 | got[1]:04X} ok"]
        assert cls_texts(w, "warning") == []
    safe = [cls_texts(w, "transaction")[0] for w in wins if cls_texts(w, "transaction")[0].startswith("WRITE_SAFE")]
    assert safe and set(safe) <= {"WRITE_SAFE C1FIFOCON1[15:8] 0x01 UINC crc ok",
                                  "WRITE_SAFE C1FIFOCON2[15:8] 0x01 UINC crc ok",
                                  "WRITE_SAFE C1FIFOCON3[15:8] 0x03 TXREQ UINC crc ok",
                                  "WRITE_SAFE C1TEFCON[15:8] 0x01 UINC crc ok"}


@covers("mcp251xfd-layout", "mcp251xfd-rx-object", "mcp251xfd-tx-object", "mcp251xfd-tef-object",
        "mcp251xfd-bulk-read", "mcp251xfd-short-tx")
def test_mcp251xfd_objects_in_the_layout_learnt(fd_start):
    wins, truth = fd_start
    n = bulk = short = 0
    tx_size = 72
    for w, t in zip(wins, truth):
        shown = cls_texts(w, "frame")
        assert len(shown) == len(t["frames"])
        if len(shown) > 1:
            bulk += 1
        for s, f in zip(shown, t["frames"]):
            n += 1
            where = {"RX": f"RX FIFO{f.get('fifo')}[{f['index']}]", "TX": f"TX FIFO{f.get('fifo')}[{f['index']}]",
                     "TEF": f"TEF[{f['index']}]"}[f["kind"]]
            flags = "".join(" " + k for k, on in (("FD", f["fd"]), ("BRS", f["brs"]), ("RTR", f["rtr"])) if on)
            want = f"{where} ID 0x{f['can_id']:03X}{' ext' if f['ext'] else ''}{flags} DLC {f['dlc']}"
            if f["ext"]:
                want = want.replace(f"ID 0x{f['can_id']:03X} ext", f"ID 0x{f['can_id']:08X} ext")
            assert s.startswith(want), (s, want)
            if f.get("seq") is not None:
                assert f" SEQ {f['seq']}" in s
            if f["kind"] != "TX":
                assert f" TS {f['ts']}" in s
            if f["data"]:
                assert s.endswith(" ".join(f"{b:02X}" for b in f["data"]))
            if f["kind"] == "TX" and len(t["mosi"]) - 5 < tx_size:
                short += 1          # written up to its data rounded to words, not the 72-byte object
        assert cls_texts(w, "warning") == []
    assert n >= 8 and bulk >= 1 and short >= 1
    # an RX FIFO's configuration shows no transmit fields; the TX FIFO's does
    cons = [cls_texts(w, "transaction")[0] for w in wins if "C1FIFOCON" in cls_texts(w, "transaction")[0]
            and cls_texts(w, "transaction")[0].startswith("WRITE_CRC C1FIFOCON") and "PLSIZE" in
            cls_texts(w, "transaction")[0]]
    assert any("TXEN" in c and "TXAT=unlimited" in c for c in cons)
    assert all("TXAT" not in c for c in cons if "TXEN" not in c)


@covers("mcp251xfd-register-window", "mcp251xfd-write-crc")
def test_mcp251xfd_status_window_and_pre_6_3_uinc(tmp_path):
    """Two RX rings: the status read covers C1INT and C1RXIF; kernel 5.18: UINC is a 1-byte WRITE_CRC."""
    wins, truth = can_capture(tmp_path, "mcp2518fd-rx", kernel="5.18", rx_rings=2, frames=4, batch="1 3")
    rows = [cls_texts(w, "transaction")[0] for w in wins]
    status = [r for r in rows if r.startswith("READ_CRC C1INT")]
    assert status and all(", C1RXIF 0x" in r and r.endswith(" crc ok") for r in status)
    assert any(r.startswith("READ_CRC C1INT 0x3F1A_0002 RXIF, C1RXIF 0x0000_0002 FIFO1") for r in status)
    assert [len(cls_texts(w, "register")) for w, r in zip(wins, rows) if r.startswith("READ_CRC C1INT")] == \
        [2] * len(status)
    uinc = [r for r in rows if "UINC" in r]
    assert uinc and all(r.startswith("WRITE_CRC C1FIFOCON") and r.endswith("[15:8] 0x01 UINC crc ok") for r in uinc)
    assert not [a for w in wins for a in w if a[2] == "warning"]


@covers("mcp251xfd-crc-bad-read", "mcp251xfd-crc-bad-write")
def test_mcp251xfd_crc_verdicts(tmp_path):
    wins, truth = can_capture(tmp_path, "mcp2518fd-crc", frames=6)
    bad = [(w, t) for w, t in zip(wins, truth) if t["crc_ok"] is False]
    kinds = sorted(t["instruction"] for _, t in bad)
    assert kinds == ["READ_CRC", "READ_CRC", "WRITE_SAFE"]
    for w, t in bad:
        wire = t["miso"] if t["instruction"] == "READ_CRC" else t["mosi"]
        got = wire[-2] << 8 | wire[-1]
        body = t["mosi"][:3] + wire[3:-2] if t["instruction"] == "READ_CRC" else t["mosi"][:-2]
        want = cangen.crc16_bitwise(body)          # the CRC of what was on the wire
        assert cls_texts(w, "crc") == [f"CRC 0x{got:04X} bad, expected 0x{want:04X}"]
        assert cls_texts(w, "warning") == [f"CRC mismatch: received 0x{got:04X}, computed 0x{want:04X}"]
        assert cls_texts(w, "transaction")[0].endswith(f"CRC BAD (got 0x{got:04X}, expected 0x{want:04X})")
    good = [w for w, t in zip(wins, truth) if t["crc_ok"]]
    assert good and all(cls_texts(w, "crc")[0].endswith(" ok") and not cls_texts(w, "warning") for w in good)


@covers("mcp251xfd-2517fd-seq", "mcp251xfd-tx-object", "mcp251xfd-tef-object")
def test_mcp2517fd_seq_as_the_driver_writes_it(tmp_path):
    """After 200 frames the driver's counter is past the 2517FD's 7 SEQ bits: TX objects show the
    wire value and the 7 bits the chip keeps, TEF entries the kept bits, and nothing warns."""
    wins, truth = can_capture(tmp_path, "mcp2518fd-tx", chip="mcp2517fd", tx_head=200, frames=6, batch="1 2 3")
    tx = [s for w in wins for s in cls_texts(w, "frame") if s.startswith("TX ")]
    tef = [s for w in wins for s in cls_texts(w, "frame") if s.startswith("TEF")]
    assert [re.search(r" SEQ (\d+) \(2517FD keeps (\d+)\)", s).groups() for s in tx] == \
        [(str(200 + k), str((200 + k) & 0x7F)) for k in range(6)]
    assert [re.search(r" SEQ (\d+)", s).group(1) for s in tef] == [str((200 + k) & 0x7F) for k in range(6)]
    assert not [a for w in wins for a in w if a[2] == "warning"]
    # the same traffic read as an MCP2518FD: the TX side is the same wire value
    wins, _ = can_capture(tmp_path, "mcp2518fd-tx", chip="mcp2518fd", tx_head=200, frames=6, batch="1 2 3")
    tx = [s for w in wins for s in cls_texts(w, "frame") if s.startswith("TX ")]
    assert [re.search(r" SEQ (\d+)", s).group(1) for s in tx] == [str(200 + k) for k in range(6)]
    assert "keeps" not in " ".join(tx)
