"""The mcp2518fd sigrok decoder (decoders/mcp2518fd) and its plain module.

Oracles: the CRC catalogue check value; the synth generator's own truth
(analyzer/spigap/synth/traffic/mcp2518fd.py, written independently of the decoder:
frames, IDs, data, register values, CRC verdicts); golden annotation files (sigrok-test
cases: tests/test_sigrok_test_cases.py);
and real foreign captures (must give warnings, never an exception).
"""

from __future__ import annotations

import os
import random
import re
import subprocess

import pytest

from conftest import (CAPTURES, DECODERS, REAL_SPI_STACKS, load_plain_module, real, run_sigrok,
                      sigrok_annotations, slow_if_big)

from spigap.synth import scenario
from spigap.synth.traffic import mcp2518fd as gen

SPI = "spi:clk=SCK:mosi=SDI:miso=SDO:cs=nCS"
SHIPPED = ["rx", "rx-k5.18", "tx", "fd", "crc"]



m = load_plain_module("mcp2518fd", "mcp251xfd")
crc = load_plain_module("mcp2518fd", "crc")
objects = load_plain_module("mcp2518fd", "objects")


# ---------------------------------------------------------------- helpers

def annotations(sr, spi=SPI, options=""):
    """(annotations as (ss, es, class, [texts]), raw stdout) of mcp2518fd stacked on ``spi``."""
    return sigrok_annotations(sr, f"{spi},mcp2518fd{options}", "mcp2518fd")


def windows(anns):
    """Split the annotation stream at each transaction (whole CS window) annotation."""
    out = []
    for a in anns:
        if a[2] == "transaction":
            out.append([])
        assert out, f"annotation before the first transaction: {a}"
        out[-1].append(a)
    return out


def reg_text(name, value, mask):
    """Expected register annotation, formatted here independently."""
    if mask == 0xF:
        return f"{name} = 0x{value >> 16:04X}_{value & 0xFFFF:04X}"
    idx = [i for i in range(4) if mask >> i & 1]
    lo, hi = min(idx), max(idx)
    v = (value >> (8 * lo)) & ((1 << (8 * (hi - lo + 1))) - 1)
    return f"{name}[{8 * hi + 7}:{8 * lo}] = 0x{v:0{2 * (hi - lo + 1)}X}"


FRAME = re.compile(r"^(RX|TX|TEF)(?: FIFO(\d+))?(?:\[(\d+)\])? ID 0x([0-9A-F]+)((?: (?:ext|FD|BRS|ESI|RTR))*)"
                   r" DLC (\d+)(?: SEQ (\d+))?(?: TS (\d+))?((?: [0-9A-F]{2})*)$")


def parse_frame(text):
    mt = FRAME.match(text)
    assert mt, f"frame annotation not understood: {text!r}"
    flags = mt.group(5).split()
    return {"kind": mt.group(1), "fifo": None if mt.group(2) is None else int(mt.group(2)),
            "index": None if mt.group(3) is None else int(mt.group(3)),
            "can_id": int(mt.group(4), 16), "ext": "ext" in flags, "fd": "FD" in flags,
            "brs": "BRS" in flags, "rtr": "RTR" in flags, "dlc": int(mt.group(6)),
            "seq": None if mt.group(7) is None else int(mt.group(7)),
            "ts": None if mt.group(8) is None else int(mt.group(8)),
            "data": [int(b, 16) for b in mt.group(9).split()]}


def truth(name):
    sc = scenario.Scenario.from_toml(CAPTURES / f"mcp2518fd-{name}.toml")
    return sc, gen.plan(sc, sc.device)


# ------------------------------------------------------------- pure module

def test_crc16_check_value():
    assert crc.crc16(b"123456789") == 0xAEE7
    assert gen.crc16_bitwise(b"123456789") == 0xAEE7


def test_crc16_table_matches_bitwise_model():
    rng = random.Random(7)
    for _ in range(200):
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 90)))
        assert crc.crc16(data) == gen.crc16_bitwise(data)


@pytest.mark.parametrize("addr,name", [
    (0x000, "C1CON"), (0x01C, "C1INT"), (0x034, "C1TREC"), (0x040, "C1TEFCON"), (0x050, "C1TXQCON"),
    (0x05C, "C1FIFOCON1"), (0x060, "C1FIFOSTA1"), (0x064, "C1FIFOUA1"), (0x1C4, "C1FIFOCON31"),
    (0x1CC, "C1FIFOUA31"), (0x1D0, "C1FLTCON0"), (0x1EC, "C1FLTCON7"), (0x1F0, "C1FLTOBJ0"),
    (0x1F4, "C1MASK0"), (0x2EC, "C1MASK31"), (0xE00, "OSC"), (0xE04, "IOCON"), (0xE08, "CRC"),
    (0xE0C, "ECCCON"), (0xE10, "ECCSTAT"), (0xE14, "DEVID"),
])
def test_register_map(addr, name):
    assert m.register(addr)[0] == name


@pytest.mark.parametrize("addr", [0x04C, 0x2F0, 0x3FC, 0xE18, 0xDFC])
def test_reserved_addresses_have_no_name(addr):
    assert m.register(addr) is None


def test_register_fields():
    assert m.decode_fields("CON", 0x0498_0760)[:2] == ["REQOP=Config", "OPMOD=Config"]
    assert "REQOP=Normal CAN 2.0" in m.decode_fields("CON", 0x0600_0000)
    assert m.decode_fields("INT", 0x0000_0012)[:2] == ["RXIF", "TEFIF"]
    assert m.decode_fields("FIFOCON", 0x0300, byte_mask=0x2) == ["TXREQ", "UINC"]
    assert m.decode_fields("FIFOCON", 0xE360_0080) == [
        "PLSIZE=64 B", "FSIZE=3 (4 obj)", "TXAT=unlimited", "TXEN"]
    assert m.decode_fields("FIFOSTA", 0x0000_0501) == ["FIFOCI=5", "TFNRFNIF"]
    assert m.decode_fields("TREC", 0x0018_8000) == ["TXBP", "RXBP", "TEC=128", "REC=0"]
    assert m.decode_fields("OSC", 0x0000_1501) == ["SCLKRDY", "OSCRDY", "PLLRDY", "CLKODIV=/1", "PLLEN"]
    assert m.decode_fields("IOCON", 0x0300_0040) == ["PM1", "PM0", "XSTBYEN"]
    assert m.decode_fields("FLTCON", 0x8200_0081, index=1) == ["F4->FIFO1", "F5 off", "F6 off", "F7->FIFO2"]


def test_object_id_split_and_lengths():
    # extended ID 0x12345678 & 0x1FFFFFFF: SID = top 11 bits in 10:0, EID = low 18 bits in 28:11
    can_id = 0x12345678 & 0x1FFFFFFF
    word = (can_id >> 18) | (can_id & 0x3FFFF) << 11
    flags = 0xD | 1 << 4 | 1 << 7 | 1 << 6            # DLC 13 (32 bytes), IDE, FDF, BRS
    obj = list(word.to_bytes(4, "little")) + list(flags.to_bytes(4, "little")) + \
        list((1234).to_bytes(4, "little")) + list(range(64))
    fr, problems = objects.decode_object("RX", obj)
    assert problems == []
    assert (fr.can_id, fr.ext, fr.dlc, fr.length, fr.fdf, fr.brs, fr.ts) == (can_id, True, 13, 32, True, True, 1234)
    assert fr.data == list(range(32))
    assert [objects.dlc_length(d, True) for d in range(16)] == [0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 24, 32, 48, 64]
    assert objects.dlc_length(12, False) == 8


def _read_crc(addr, data, ln=None):
    head = [0xB0 | addr >> 8, addr & 0xFF, len(data) if ln is None else ln]
    crc = gen.crc16_bitwise(head + data)
    return head + [0] * (len(data) + 2), [0, 0, 0] + data + [crc >> 8, crc & 0xFF]


def test_label_status_read():
    mosi, miso = _read_crc(0x01C, [0x02, 0, 0, 0])
    assert m.label_transfer(mosi, miso, {}) == "READ_CRC C1INT 0x0000_0002 RXIF crc ok"
    mosi, miso = _read_crc(0x01C, [0x12, 0, 0x1A, 0x3F, 0x02, 0, 0, 0])
    assert m.label_transfer(mosi, miso, {}) == \
        "READ_CRC C1INT 0x3F1A_0012 RXIF TEFIF, C1RXIF 0x0000_0002 FIFO1 crc ok"


def test_label_bad_crc_shows_both_values():
    mosi, miso = _read_crc(0x01C, [0x02, 0, 0, 0])
    good = (miso[-2] << 8) | miso[-1]
    miso[-1] ^= 0x01
    label = m.label_transfer(mosi, miso, {})
    assert label == f"READ_CRC C1INT 0x0000_0002 RXIF CRC BAD (got 0x{good ^ 1:04X}, expected 0x{good:04X})"


def test_label_uinc_both_driver_eras():
    safe = gen.write_safe(0x05D, [0x01])
    assert m.label_transfer(safe.mosi, safe.miso, {}) == "WRITE_SAFE C1FIFOCON1[15:8] 0x01 UINC crc ok"
    crc = gen.write_crc(0x05D, [0x03])
    assert m.label_transfer(crc.mosi, None, {}) == "WRITE_CRC C1FIFOCON1[15:8] 0x03 TXREQ UINC crc ok"


def test_label_tx_object():
    fr = gen.CanFrame(0x123, False, [0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88])
    a = gen.write_crc(0x4A0, fr.tx_object(5, 0x7FFFFF), ram=True)
    assert len(a.mosi) * 8 == 168
    assert m.label_transfer(a.mosi, a.miso, {}) == \
        "WRITE_CRC RAM 0x4A0 TX obj ID 0x123 DLC 8 SEQ 5 11 22 33 44 55 66 77 88 crc ok"
    # The driver writes its counter into flags 31:9 on every chip (mcp251xfd-tx.c,
    # mcp251xfd_tx_obj_from_skb, MCP251XFD_OBJ_FLAGS_SEQ_MCP2518FD_MASK): the wire value, and on
    # the MCP2517FD the 7 bits it keeps for the TEF entry; no warning (kernel traffic)
    a = gen.write_crc(0x4A0, fr.tx_object(0x85, 0x7FFFFF), ram=True)
    assert m.label_transfer(a.mosi, a.miso, {"chip": "mcp2518fd"}) == \
        "WRITE_CRC RAM 0x4A0 TX obj ID 0x123 DLC 8 SEQ 133 11 22 33 44 55 66 77 88 crc ok"
    assert m.label_transfer(a.mosi, a.miso, {"chip": "mcp2517fd"}) == \
        "WRITE_CRC RAM 0x4A0 TX obj ID 0x123 DLC 8 SEQ 133 (2517FD keeps 5) 11 22 33 44 55 66 77 88 crc ok"


def test_label_rx_object_uses_fifo_setup_when_seen():
    st = m.new_state({})
    fr = gen.CanFrame(0x1ABCDEF, True, [1, 2, 3])
    obj = fr.rx_object(777, 8)
    mosi, miso = _read_crc(0x430, obj, ln=5)
    assert m.label_transfer(mosi, miso, {"state": st}) == \
        "READ_CRC RAM 0x430 RX obj ID 0x01ABCDEF ext DLC 3 TS 777 01 02 03 crc ok"
    # C1CON with STEF, TEF of 4 x 12 bytes, FIFO1: RX, 8-byte payload + timestamp, 8 deep
    for addr, value in ((0x000, 0x0608_0000), (0x040, 0x0300_0020), (0x05C, 0x0700_0020)):
        w = gen.write_crc(addr, gen.le32(value))
        m.label_transfer(w.mosi, w.miso, {"state": st})
    obj2 = fr.rx_object(778, 8)
    mosi, miso = _read_crc(0x430 + 20, obj2, ln=5)
    assert m.label_transfer(mosi, miso, {"state": st}).startswith(
        "READ_CRC RAM 0x444 RX FIFO1[1] obj ID 0x01ABCDEF ext DLC 3 TS 778")


def test_label_other_instructions():
    assert m.label_transfer([0x00, 0x00], [0, 0], {}) == "RESET"
    rd = gen.plain_read(0xE14, gen.le32(0x14))
    assert m.label_transfer(rd.mosi, rd.miso, {}) == "READ DEVID 0x0000_0014 ID=1 REV=4"
    assert m.label_transfer([0x20, 0x1C, 0x00, 0x00], None, {}) == "WRITE C1INT[15:0] 0x0000 no flags"
    assert m.label_transfer([0x51, 0x00, 0x12], [0, 0, 0], {}).startswith("UNKNOWN 0x5 ! Unknown instruction")
    assert "Truncated" in m.label_transfer([0xB0, 0x1C, 0x04, 0, 0], [0, 0, 0, 2, 0], {})


def test_never_raises_on_random_traffic():
    rng = random.Random(2518)
    st = m.State()
    for i in range(3000):
        n = rng.choice([0, 1, 2, 3, 4, 5, 6, 9, 13, 25, rng.randrange(0, 300)])
        mosi = [rng.randrange(256) for _ in range(n)]
        if rng.random() < 0.5:   # look like MCP251xFD instructions more often
            if n >= 2:
                mosi[0] = (rng.choice([0, 2, 3, 0xA, 0xB, 0xC]) << 4) | rng.randrange(16)
        miso = None if rng.random() < 0.2 else [rng.randrange(256) for _ in range(n)]
        t = m.decode_transfer(mosi, miso, st if i % 2 else m.State(rng.choice(m.CHIPS)))
        t.summary()
        for a in t.anns:
            assert 0 <= a.first <= a.last < n, (mosi, a)
            assert a.texts and all(isinstance(x, str) and x for x in a.texts)


# ------------------------------------------------------------- generator

@pytest.mark.parametrize("name,sizes", [
    ("rx", {("status", 72), ("fifosta", 72), ("rx", 200), ("uinc", 40)}),
    ("rx-k5.18", {("status", 104), ("fifosta", 72), ("rx", 200), ("uinc", 48)}),
    ("tx", {("tx", 168), ("rts", 48), ("status", 72), ("fifosta", 72), ("tef", 136), ("tef-uinc", 48)}),
    ("fd", {("rx", 648), ("rts", 40), ("status", 104), ("uinc", 40)}),
    ("crc", {("status", 72), ("rx", 200), ("uinc", 40)}),
])
def test_generator_has_the_driver_transfer_sizes(name, sizes):
    """docs/linux-spi-timing.md §6.1/§6.4/§6.5: the Linux driver's signature sizes."""
    _, acc = truth(name)
    have = {(a.what, 8 * len(a.mosi)) for a in acc}
    assert sizes <= have
    # UINC/RTS transfers of one message are joined by cs_change, all else starts a message
    for a in acc:
        if not a.message_start:
            assert a.what in ("uinc", "tef-uinc", "rts")


# -------------------------------------------------- decoder vs generator truth

@pytest.fixture(scope="module")
def decoded(sigrok_cli):
    return {name: annotations(CAPTURES / f"mcp2518fd-{name}.sr") for name in SHIPPED}



@pytest.mark.parametrize("name", SHIPPED)
def test_decoded_values_match_generator_truth(name, decoded):
    _, acc = truth(name)
    wins = windows(decoded[name][0])
    assert len(wins) == len(acc)
    st = m.new_state({})
    for a, w in zip(acc, wins):      # the Transactions row shows what label_transfer() says
        assert w[0][3][0] == m.label_transfer(a.mosi, a.miso, {"state": st})
        assert (w[0][0], w[0][1]) == (w[1][0], max(x[1] for x in w))
    n_frames = n_bad = 0
    for i, (a, w) in enumerate(zip(acc, wins)):
        where = f"{name} window {i} ({a.what})"
        by = {}
        for ss, es, cls, texts in w:
            by.setdefault(cls, []).append(texts[0])
        inst = by["instruction"][0]
        assert inst.split()[0] == a.instruction, where
        regs = by.get("register", [])
        frames = [parse_frame(t) for t in by.get("frame", [])]
        assert len(regs) == len(a.regs) and len(frames) == len(a.frames), where
        expect_regs = [list(r) for r in a.regs]
        check = a.corrupt_byte is None
        if not check and expect_regs:
            # the decoder shows what was on the wire: one data bit flipped
            k = a.corrupt_byte - 3
            expect_regs[k // 4][1] ^= 0x10 << (8 * (k % 4))
        assert regs == [reg_text(*r) for r in expect_regs], where
        for got, exp in zip(frames if check else [], a.frames):
            n_frames += 1
            for k in ("kind", "can_id", "ext", "dlc", "data", "fd", "brs", "rtr"):
                assert got[k] == exp[k], f"{where}: {k} {got[k]!r} != {exp[k]!r}"
            assert got["seq"] == exp.get("seq"), where
            assert got["ts"] == exp.get("ts"), where
            if name == "fd":      # RAM layout learnt from the FIFO setup in the capture
                assert got["index"] == exp["index"], where
                assert got["fifo"] == exp.get("fifo"), where
        crc = by.get("crc", [])
        warnings = by.get("warning", [])
        if a.crc_ok is None:
            assert crc == [], where
        elif a.crc_ok:
            assert len(crc) == 1 and crc[0].endswith(" ok"), where
        else:
            n_bad += 1
            assert len(crc) == 1 and " bad, expected 0x" in crc[0], where
            mt = re.search(r"received 0x([0-9A-F]{4}), computed 0x([0-9A-F]{4})", " ".join(warnings))
            assert mt, where
            sent = (a.miso if a.instruction.startswith("READ") else a.mosi)[-2:]
            assert int(mt.group(1), 16) == sent[0] << 8 | sent[1], where
            assert int(mt.group(1), 16) != int(mt.group(2), 16), where
        if a.crc_ok is not False:
            assert warnings == [], f"{where}: {warnings}"
    assert n_frames >= 6
    assert n_bad == (3 if name == "crc" else 0)


def test_label_transfer_agrees_with_truth():
    """The analyzer hook on every window of the shipped captures."""
    for name in SHIPPED:
        _, acc = truth(name)
        st = m.new_state({})
        for a in acc:
            label = m.label_transfer(a.mosi, a.miso, {"state": st})
            assert label.startswith(a.instruction), label
            assert ("crc ok" in label) == (a.crc_ok is True), label
            assert ("CRC BAD" in label) == (a.crc_ok is False), label
            for r in a.regs:
                assert r[0] in label, label
            if a.corrupt_byte is not None:
                continue
            for f in a.frames:
                idt = f"0x{f['can_id']:08X}" if f["ext"] else f"0x{f['can_id']:03X}"
                assert f"{f['kind']}" in label and f"ID {idt}" in label and f"DLC {f['dlc']}" in label, label


# ------------------------------------------------------ foreign real traffic

REAL = REAL_SPI_STACKS          # the documented channel maps of every real capture (conftest)


@pytest.mark.parametrize("capture,spi", slow_if_big(REAL), ids=[f"{c[:40]}|{s[8:20]}" for c, s in REAL])
def test_foreign_real_captures_give_warnings_not_exceptions(capture, spi, sigrok_cli):
    path = real(capture)
    # run_sigrok fails on any srd: line, i.e. on any exception in the stack
    warnings = run_sigrok(["-i", str(path), "-P", f"{spi},mcp2518fd", "-A", "mcp2518fd=warnings"],
                          timeout=900).splitlines()
    assert warnings, "foreign traffic should be flagged"
    assert all(ln.startswith("mcp2518fd-1: ") for ln in warnings)
    if ":cs=" not in spi:
        assert warnings == ["mcp2518fd-1: No CS# channel: cannot find instruction starts"]
    if ":mosi=" not in spi:
        assert set(warnings) == {"mcp2518fd-1: MOSI not captured: cannot decode instructions"}


def test_pulseview_lists_the_decoder():
    env = dict(os.environ, SIGROKDECODE_DIR=str(DECODERS), QT_QPA_PLATFORM="offscreen")
    try:
        proc = subprocess.run(["pulseview", "-V"], capture_output=True, text=True, env=env, timeout=120)
    except FileNotFoundError:
        pytest.skip("pulseview is not installed")
    assert re.search(r"^\s+mcp2518fd\s+Microchip MCP2517FD/MCP2518FD/MCP251863$", proc.stdout + proc.stderr,
                     re.M), (proc.stdout + proc.stderr)[-2000:]
