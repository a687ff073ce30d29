"""MCP2518FD traffic of the Linux mcp251xfd driver, with known content.

A model of what the driver puts on the bus (docs/linux-spi-timing.md §6.4-§6.6) and
what the chip answers on MISO: status reads (READ_CRC C1INT, 72 bit, or
C1INT + C1RXIF, 104 bit), FIFO status reads (READ_CRC C1FIFOSTAm, 72 bit),
bulk RX object reads (READ_CRC, 200 bit for one classic frame), UINC writes
(WRITE_SAFE 40 bit from v6.3, WRITE_CRC 48 bit before; several in one
spi_message with cs_change), TX object writes (WRITE_CRC, 168 bit for
8 data bytes) followed by the RTS write in the same message, TEF reads
(136 bit) and TEF UINCs. The encoding (instruction, LEN, objects, CRC) is
written here independently of the sigrok decoder (decoders/mcp2518fd), so
the two check each other; the CRC is a bit-serial implementation, the
decoder's is table driven.

Scenarios (``[device] name = ...``):

==================  ======================================================
mcp2518fd-rx        frames received: IRQ -> status, FIFOSTA, objects, UINCs,
                    status (no FIFO setup in the capture: the decoder falls
                    back to the driver's object sizes)
mcp2518fd-tx        frames sent (TX object + RTS), then the TEF interrupt
                    (status, TX FIFOSTA, TEF objects, TEF UINCs, status)
mcp2518fd-fd        chip start-up (RESET, OSC, bit timing, C1CON, TEFCON,
                    FIFOCONm, filters, C1INT) then CAN FD frames both ways,
                    so the decoder learns the RAM layout from FIFOCON writes
mcp2518fd-crc       mcp2518fd-rx with corrupted CRCs: a status read and an
                    RX object read with a flipped MISO bit (the driver reads
                    again) and an UINC WRITE_SAFE with a bad CRC (the chip
                    drops it, flags SPICRCIF; the recovery is modelled)
==================  ======================================================

``[device]`` options (TOML table or ``--device NAME:key=value,...``):

=================  =====================================================
kernel             "6.3" (default; UINC/RTS as WRITE_SAFE, 40 bit) or
                   "5.18" (WRITE_CRC of 1 byte, 48 bit)
rx_rings           RX FIFOs the driver uses (1: status is C1INT only,
                   72 bit; 2 or 3: C1INT + C1RXIF, 104 bit). Default 1
                   (rx, crc), 2 (fd)
frames             number of CAN frames (default 8)
batch              frames per interrupt, list cycled (default 1 1 3)
seed               content seed (default: the scenario's seed)
irq_gap            idle time between interrupts / sends (default 300us)
irq_latency        INT falling edge -> first CS assert (default 20us)
chip               mcp2518fd (default) or mcp2517fd: the SEQ bits its TEF
                   entries keep (7 on the 2517FD); the TX objects carry the
                   driver's counter in flags 31:9 on every chip
tx_head            the driver's TX counter (tx_ring->head) at the start (0):
                   e.g. 200 for SEQ values past the 2517FD's 7 bits
bad_crc            (mcp2518fd-crc) which accesses get a corrupted CRC:
                   any of status, rx, uinc (default: all three)
=================  =====================================================

An nINT line (active low) is added: it falls ``irq_latency`` before an
interrupt's first access and rises at the end of the UINC that empties the
FIFO. The truth is ``Timeline.device_truth`` (one dict per CS window, see
``Access``); ``plan(sc, opts)`` returns the same list without building.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet

import dataclasses

import numpy as np

from spigap.errors import UsageError
from spigap.synth.traffic import option_list
from spigap.units import parse_time

# The chip's output timing in synthesized captures (the recipe's miso_delay / miso_enable override
# it): SDO 15 ns after the launching SCK edge, the first bit 15 ns after nCS falls. Our assumption:
# the datasheet's SPI table (DS20006027) was not read (analyzer/spigap/timing/devices/mcp2518fd.toml);
# 15 ns leaves 10 ns of the 25 ns half period at the driver's 20 MHz cap.
LAUNCH = {"miso_delay": 15e-9, "miso_enable": 15e-9}

# ------------------------------------------------------------------ encoding

READ, WRITE, RESET = 0x3, 0x2, 0x0
READ_CRC, WRITE_CRC, WRITE_SAFE = 0xB, 0xA, 0xC

C1CON, C1NBTCFG, C1DBTCFG, C1TDC, C1TSCON = 0x000, 0x004, 0x008, 0x00C, 0x014
C1INT, C1RXIF, C1TEFCON, C1TEFSTA = 0x01C, 0x020, 0x040, 0x044
OSC, IOCON, CRCREG, ECCCON, DEVID = 0xE00, 0xE04, 0xE08, 0xE0C, 0xE14
RAM = 0x400

# C1INT enables the driver sets (mcp251xfd_chip_interrupts_enable):
# CERRIE SERRIE RXOVIE TXATIE SPICRCIE ECCIE TEFIE MODIE RXIE
INT_IE = (1 << 29) | (1 << 28) | (1 << 27) | (1 << 26) | (1 << 25) | (1 << 24) | (1 << 20) | (1 << 19) | (1 << 17)
RXIF, TEFIF, SPICRCIF = 1 << 1, 1 << 4, 1 << 9

FD_LEN = (0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20, 24, 32, 48, 64)
SEQ_MASK_WIRE = 0x7FFFFF          # MCP251XFD_OBJ_FLAGS_SEQ_MCP2518FD_MASK >> 9


def crc16_bitwise(data) -> int:
    """CRC-16/CMS, one bit at a time (independent of the decoder's table)."""
    crc = 0xFFFF
    for byte in data:
        for i in range(7, -1, -1):
            bit = (byte >> i) & 1
            top = (crc >> 15) & 1
            crc = (crc << 1) & 0xFFFF
            if top ^ bit:
                crc ^= 0x8005
    return crc


def fifocon(m: int) -> int:
    return 0x50 + 0xC * m


def fifosta(m: int) -> int:
    return 0x54 + 0xC * m


def le32(v: int) -> list[int]:
    return [(v >> (8 * i)) & 0xFF for i in range(4)]


def cmd(c: int, addr: int) -> list[int]:
    return [(c << 4) | (addr >> 8), addr & 0xFF]


def dlc_for(length: int, fd: bool) -> int:
    if not fd:
        if length > 8:
            raise UsageError(f"classic CAN frames carry at most 8 bytes, not {length}")
        return length
    if length not in FD_LEN:
        raise UsageError(f"{length} is not a CAN FD length ({FD_LEN})")
    return FD_LEN.index(length)


@dataclasses.dataclass
class CanFrame:
    can_id: int
    ext: bool
    data: list
    fd: bool = False
    brs: bool = False
    rtr: bool = False
    esi: bool = False

    @property
    def dlc(self) -> int:
        return dlc_for(len(self.data), self.fd)

    def id_word(self) -> int:
        if self.ext:   # chip: SID = top 11 bits at 10:0, EID = low 18 bits at 28:11
            return ((self.can_id >> 18) & 0x7FF) | ((self.can_id & 0x3FFFF) << 11)
        return self.can_id & 0x7FF

    def flags(self) -> int:
        return (self.dlc | self.ext << 4 | self.rtr << 5 | self.brs << 6 | self.fd << 7
                | self.esi << 8)

    def rx_object(self, ts: int, payload: int) -> list[int]:
        data = list(self.data) + [0] * (payload - len(self.data))
        return le32(self.id_word()) + le32(self.flags()) + le32(ts) + data

    def tx_object(self, seq: int, seq_mask: int) -> list[int]:
        n = 0 if self.rtr else (len(self.data) + 3) // 4 * 4   # driver rounds up to words
        data = list(self.data) + [0] * (n - len(self.data))
        return le32(self.id_word()) + le32(self.flags() | (seq & seq_mask) << 9) + data

    def tef_object(self, seq: int, seq_mask: int, ts: int) -> list[int]:
        return le32(self.id_word()) + le32(self.flags() | (seq & seq_mask) << 9) + le32(ts)

    def truth(self, kind: str, **extra) -> dict:
        return {"kind": kind, "can_id": self.can_id, "ext": self.ext, "dlc": self.dlc,
                "data": [] if kind == "TEF" else list(self.data), "fd": self.fd, "brs": self.brs,
                "rtr": self.rtr, **extra}


@dataclasses.dataclass
class Access:
    """One CS window: bytes on the bus and what they mean (the truth)."""

    mosi: list
    miso: list
    instruction: str
    addr: int
    what: str = ""                 # status, fifosta, rx, uinc, tx, rts, tef, tef-uinc, init, ...
    message_start: bool = True     # False: cs_change inside one spi_message
    irq_start: bool = False        # first access of an interrupt (nINT falls before it)
    irq_end: bool = False          # nINT rises at the end of this access
    regs: list = dataclasses.field(default_factory=list)     # (name, value, byte_mask)
    frames: list = dataclasses.field(default_factory=list)   # CanFrame.truth() dicts
    crc_ok: bool | None = None     # None: instruction without CRC
    # regs/frames hold what the chip meant; with crc_ok False on a read, one
    # MISO data bit was flipped on the wire (byte ``corrupt_byte`` of the window)
    corrupt_byte: int | None = None

    def truth(self) -> dict:
        return {"what": self.what, "instruction": self.instruction, "addr": self.addr,
                "bits": 8 * len(self.mosi), "regs": [list(r) for r in self.regs],
                "frames": self.frames, "crc_ok": self.crc_ok, "corrupt_byte": self.corrupt_byte,
                "mosi": list(self.mosi), "miso": list(self.miso)}


def read_crc(addr: int, data: list[int], *, ram: bool = False, corrupt: bool = False, **kw) -> Access:
    """READ_CRC: MOSI = cmd, LEN, dummies; MISO = data + CRC(cmd, LEN, data)."""
    ln = len(data) // 4 if ram else len(data)
    head = cmd(READ_CRC, addr) + [ln]
    crc = crc16_bitwise(head + data)
    sent = list(data)
    if corrupt:            # a bit flipped on the wire after the chip computed its CRC
        sent[len(sent) // 2] ^= 0x10
    mosi = head + [0] * (len(data) + 2)
    miso = [0, 0, 0] + sent + [crc >> 8, crc & 0xFF]
    return Access(mosi, miso, instruction="READ_CRC", addr=addr, crc_ok=not corrupt,
                  corrupt_byte=3 + len(sent) // 2 if corrupt else None, **kw)


def write_crc(addr: int, data: list[int], *, ram: bool = False, corrupt: bool = False, **kw) -> Access:
    ln = len(data) // 4 if ram else len(data)
    body = cmd(WRITE_CRC, addr) + [ln] + list(data)
    crc = crc16_bitwise(body) ^ (0x0100 if corrupt else 0)
    return Access(body + [crc >> 8, crc & 0xFF], [0] * (len(body) + 2), instruction="WRITE_CRC",
                  addr=addr, crc_ok=not corrupt, **kw)


def write_safe(addr: int, data: list[int], *, corrupt: bool = False, **kw) -> Access:
    body = cmd(WRITE_SAFE, addr) + list(data)
    crc = crc16_bitwise(body) ^ (0x0100 if corrupt else 0)
    return Access(body + [crc >> 8, crc & 0xFF], [0] * (len(body) + 2), instruction="WRITE_SAFE",
                  addr=addr, crc_ok=not corrupt, **kw)


def plain_read(addr: int, data: list[int], **kw) -> Access:
    return Access(cmd(READ, addr) + [0] * len(data), [0, 0] + list(data), instruction="READ",
                  addr=addr, **kw)


def reset(**kw) -> Access:
    return Access(cmd(RESET, 0), [0, 0], instruction="RESET", addr=0, **kw)


# --------------------------------------------------------------- the driver

def _int(v) -> int:
    return int(v, 0) if isinstance(v, str) else int(v)


class Driver:
    """The mcp251xfd driver's accesses, as a list of Access (bus order)."""

    def __init__(self, opts: dict, seed: int, *, fd: bool, rx_rings: int):
        self.kernel = str(opts.get("kernel", "6.3"))
        if self.kernel not in ("6.3", "5.18"):
            raise UsageError(f"mcp2518fd kernel is 6.3 or 5.18, not {self.kernel!r}")
        self.chip = str(opts.get("chip", "mcp2518fd")).lower()
        if self.chip not in ("mcp2518fd", "mcp2517fd", "mcp251863"):
            raise UsageError(f"unknown chip {self.chip!r}")
        # the SEQ bits a TEF entry keeps: 7 (flags 15:9) on the MCP2517FD, 23 (31:9) on the others;
        # the driver writes tx_ring->head with MCP251XFD_OBJ_FLAGS_SEQ_MCP2518FD_MASK on every chip
        # (mcp251xfd-tx.c, mcp251xfd_tx_obj_from_skb: "only the lower 7 bits will be transferred
        # into the TEF object")
        self.seq_mask = 0x7F if self.chip == "mcp2517fd" else SEQ_MASK_WIRE
        self.fd = fd
        self.rx_rings = rx_rings
        if rx_rings not in (1, 2, 3):
            raise UsageError("rx_rings is 1, 2 or 3")
        self.rng = np.random.default_rng(seed)
        self.out: list[Access] = []
        # RAM layout as mcp251xfd_ring_alloc/init computes it (TEF, RX rings, TX ring)
        self.tx_num = 4 if fd else 8
        self.tx_size = 72 if fd else 16
        self.rx_size = 76 if fd else 20
        self.payload = 64 if fd else 8
        rem = (2048 - self.tx_num * (12 + self.tx_size)) // self.rx_size
        self.rx = []                                  # (fifo, base, depth)
        base = RAM + 12 * self.tx_num
        fifo = 1
        for _ in range(rx_rings):
            depth = min(1 << (rem.bit_length() - 1), 32)
            rem -= depth
            self.rx.append([fifo, base, depth, 0])    # fifo, base, depth, tail counter
            base += depth * self.rx_size
            fifo += 1
        self.tx_fifo, self.tx_base = fifo, base
        self.tx_head = _int(opts.get("tx_head", 0))     # tx_ring->head: a free-running counter
        if not 0 <= self.tx_head < 1 << 32:
            raise UsageError("tx_head is 0..2**32-1 (the driver's unsigned counter)")
        self.tef_tail = self.tx_head
        self.ts = 1_000_000
        self.pending_tef: list[tuple[CanFrame, int, int]] = []   # frame, seq, ts
        self._made = False

    # -- helpers
    def uinc(self, addr: int, value: int, **kw) -> Access:
        """1-byte write to byte 1 of a FIFOCON/TEFCON: UINC (0x01) or UINC|TXREQ (0x03)."""
        if self.kernel == "6.3":
            a = write_safe(addr + 1, [value], **kw)
        else:
            a = write_crc(addr + 1, [value], **kw)
        a.regs = [(self.regname(addr), value << 8, 0x2)]
        return a

    @staticmethod
    def regname(addr: int) -> str:
        names = {C1CON: "C1CON", C1NBTCFG: "C1NBTCFG", C1DBTCFG: "C1DBTCFG", C1TDC: "C1TDC",
                 C1TSCON: "C1TSCON", C1INT: "C1INT", C1RXIF: "C1RXIF", C1TEFCON: "C1TEFCON",
                 C1TEFSTA: "C1TEFSTA", OSC: "OSC", IOCON: "IOCON", CRCREG: "CRC", ECCCON: "ECCCON",
                 DEVID: "DEVID"}
        if addr in names:
            return names[addr]
        if 0x5C <= addr <= 0x1CC:
            m, r = divmod(addr - 0x50, 0xC)
            return ("C1FIFOCON%d", "C1FIFOSTA%d", "C1FIFOUA%d")[r // 4] % m
        if 0x1D0 <= addr <= 0x1EC:
            return "C1FLTCON%d" % ((addr - 0x1D0) // 4)
        if 0x1F0 <= addr <= 0x2EC:
            m, r = divmod(addr - 0x1F0, 8)
            return ("C1FLTOBJ%d" if r == 0 else "C1MASK%d") % m
        raise ValueError(hex(addr))

    def reg_read(self, addr: int, values: list[int], **kw) -> Access:
        data = [b for v in values for b in le32(v)]
        a = read_crc(addr, data, **kw)
        a.regs = [(self.regname(addr + 4 * i), v, 0xF) for i, v in enumerate(values)]
        return a

    def reg_write(self, addr: int, value: int, **kw) -> Access:
        a = write_crc(addr, le32(value), **kw)
        a.regs = [(self.regname(addr), value, 0xF)]
        return a

    def status(self, intf: int, rxif: int, **kw) -> Access:
        """mcp251xfd_read_regs_status: C1INT (one RX ring) or C1INT + C1RXIF."""
        if self.rx_rings == 1:
            return self.reg_read(C1INT, [INT_IE | intf], what="status", **kw)
        return self.reg_read(C1INT, [INT_IE | intf, rxif], what="status", **kw)

    def random_frame(self) -> CanFrame:
        """Mostly full frames (8 bytes classic, 64 FD: the driver's signature
        transfer sizes), some shorter ones, extended IDs and RTR frames. The
        first frame of a capture is a standard-ID frame of full length."""
        r = self.rng
        first = not self._made
        self._made = True
        ext = bool(r.random() < 0.4) and not first
        can_id = int(r.integers(0, 1 << 29)) if ext else int(r.integers(0, 0x800))
        full = first or r.random() < 0.5
        if self.fd:
            n = 64 if full else int(r.choice([0, 3, 8, 12, 20, 32, 48]))
            return CanFrame(can_id, ext, [int(x) for x in r.integers(0, 256, n)], fd=True,
                            brs=bool(r.random() < 0.7) or first, esi=bool(r.random() < 0.1))
        if not full and r.random() < 0.2:
            return CanFrame(can_id, ext, [], rtr=True)
        n = 8 if full else int(r.integers(0, 8))
        return CanFrame(can_id, ext, [int(x) for x in r.integers(0, 256, n)])

    # -- receive path (docs/linux-spi-timing.md §6.4)
    def receive(self, frames: list[CanFrame], ring: int = 0, bad: AbstractSet = frozenset()) -> None:
        fifo, base, depth, tail = self.rx[ring]
        k = len(frames)
        head = tail + k
        rxif_bits = 1 << fifo
        first = self.status(RXIF, rxif_bits, irq_start=True, corrupt="status" in bad)
        self.out.append(first)
        if "status" in bad:            # the driver retries a read with a bad CRC
            self.out.append(self.status(RXIF, rxif_bits))
        sta = (head % depth) << 8 | 0x1                      # FIFOCI, TFNRFNIF (not empty)
        if k >= depth // 2:
            sta |= 0x2
        self.out.append(self.reg_read(fifosta(fifo), [sta], what="fifosta"))
        # bulk read of the objects that lie contiguously from the tail
        objs = []
        for f in frames:
            self.ts += int(self.rng.integers(20_000, 60_000))
            objs.append((f, self.ts))
        i = 0
        while i < k:
            idx = (tail + i) % depth
            n = min(k - i, depth - idx)
            chunk = objs[i:i + n]
            data = [b for f, ts in chunk for b in f.rx_object(ts, self.payload)]
            addr = base + idx * self.rx_size
            truth = [f.truth("RX", ts=ts, fifo=fifo, index=idx + j) for j, (f, ts) in enumerate(chunk)]
            if "rx" in bad:
                a = read_crc(addr, data, ram=True, what="rx", corrupt=True)
                a.frames = truth
                self.out.append(a)
                bad = bad - {"rx"}
            a = read_crc(addr, data, ram=True, what="rx")
            a.frames = truth
            self.out.append(a)
            i += n
        # one spi_message of k UINC transfers (cs_change between them)
        for j in range(k):
            corrupt = "uinc" in bad and j == 0
            self.out.append(self.uinc(fifocon(fifo), 0x01, what="uinc", message_start=(j == 0),
                                      irq_end=(j == k - 1) and not corrupt, corrupt=corrupt))
        if "uinc" in bad:
            # the chip dropped the first UINC (bad CRC): one object is left and
            # SPICRCIF is set. Modelled recovery: clear CRCERRIF in the CRC
            # register, then increment once more.
            self.out.append(self.status(RXIF | SPICRCIF, rxif_bits))
            a = write_safe(CRCREG + 2, [0x00], what="crc-clear")
            a.regs = [("CRC", 0, 0x4)]
            self.out.append(a)
            self.out.append(self.uinc(fifocon(fifo), 0x01, what="uinc", irq_end=True))
        self.out.append(self.status(0, 0))
        self.rx[ring][3] = head

    # -- transmit path (docs/linux-spi-timing.md §6.5)
    def send(self, frame: CanFrame) -> None:
        idx = self.tx_head % self.tx_num
        addr = self.tx_base + idx * self.tx_size
        seq = self.tx_head
        obj = frame.tx_object(seq, SEQ_MASK_WIRE)
        a = write_crc(addr, obj, ram=True, what="tx")
        a.frames = [frame.truth("TX", seq=seq & SEQ_MASK_WIRE, index=idx, fifo=self.tx_fifo)]
        self.out.append(a)
        self.out.append(self.uinc(fifocon(self.tx_fifo), 0x03, what="rts", message_start=False))
        self.tx_head += 1
        self.ts += int(self.rng.integers(20_000, 60_000))
        self.pending_tef.append((frame, seq, self.ts))

    def tef_irq(self) -> None:
        k = len(self.pending_tef)
        if not k:
            return
        self.out.append(self.status(TEFIF, 0, irq_start=True))
        tail_ci = self.tx_head % self.tx_num                # FIFOCI: next object to send
        sta = tail_ci << 8 | 0x7                            # empty, half empty, not full
        self.out.append(self.reg_read(fifosta(self.tx_fifo), [sta], what="fifosta"))
        i = 0
        while i < k:
            idx = (self.tef_tail + i) % self.tx_num
            n = min(k - i, self.tx_num - idx)
            chunk = self.pending_tef[i:i + n]
            data = [b for f, seq, ts in chunk for b in f.tef_object(seq, self.seq_mask, ts)]
            a = read_crc(RAM + 12 * idx, data, ram=True, what="tef")
            a.frames = [f.truth("TEF", seq=seq & self.seq_mask, ts=ts, index=idx + j)
                        for j, (f, seq, ts) in enumerate(chunk)]
            self.out.append(a)
            i += n
        for j in range(k):
            self.out.append(self.uinc(C1TEFCON, 0x01, what="tef-uinc", message_start=(j == 0),
                                      irq_end=(j == k - 1)))
        self.out.append(self.status(0, 0))
        self.tef_tail += k
        self.pending_tef = []

    # -- chip start (mcp251xfd_chip_start order, RAM ECC clearing left out)
    def start(self) -> None:
        self.out.append(reset(what="init", irq_start=False))
        osc_ready = 1 << 12 | 1 << 10 | 1 << 8               # SCLKRDY OSCRDY PLLRDY
        self.out.append(self.reg_read(OSC, [0x0000_0460 | (1 << 10)], what="init"))
        self.out.append(self.reg_write(OSC, 0x0000_0001, what="init"))          # PLLEN
        self.out.append(self.reg_read(OSC, [osc_ready | 0x1], what="init"))
        a = plain_read(DEVID, le32(0x0000_0014), what="init")                    # ID 1 REV 4
        a.regs = [("DEVID", 0x14, 0xF)]
        self.out.append(a)
        self.out.append(self.reg_read(C1CON, [0x0498_0760], what="init"))       # config mode
        self.out.append(self.reg_write(C1NBTCFG, 0x003E_0F0F, what="init"))     # 500 kbit/s at 40 MHz
        self.out.append(self.reg_write(C1DBTCFG, 0x000E_0303, what="init"))     # 2 Mbit/s
        self.out.append(self.reg_write(C1TDC, 0x0002_1000, what="init"))        # TDCMOD auto, TDCO 16
        self.out.append(self.reg_write(C1TSCON, 0x0001_0000, what="init"))      # TBCEN, prescaler 1
        self.out.append(self.reg_write(ECCCON, 0x0000_0007, what="init"))
        self.out.append(self.reg_write(IOCON, 0x0300_0000 | (1 << 30), what="init"))
        # TEF: FSIZE = tx_num - 1, TEFTSEN, TEFNEIE
        self.out.append(self.reg_write(C1TEFCON, (self.tx_num - 1) << 24 | 1 << 5 | 1, what="init"))
        pl = 7 if self.fd else 0
        for fifo, base, depth, _ in self.rx:
            con = pl << 29 | (depth - 1) << 24 | 1 << 5 | 1 << 3 | 1    # RXTSEN RXOVIE TFNRFNIE
            self.out.append(self.reg_write(fifocon(fifo), con, what="init"))
        txcon = pl << 29 | (self.tx_num - 1) << 24 | 3 << 21 | 1 << 7   # TXAT unlimited, TXEN
        self.out.append(self.reg_write(fifocon(self.tx_fifo), txcon, what="init"))
        # filter 0 -> first RX FIFO, accept all
        self.out.append(self.reg_write(0x1D0, 0x80 | self.rx[0][0], what="init"))
        self.out.append(self.reg_write(0x1F0, 0, what="init"))
        self.out.append(self.reg_write(0x1F4, 0, what="init"))
        # REQOP normal (FD or CAN 2.0), STEF, ESIGM, RTXAT, WFT T11, WAKFIL, ISOCRCEN; TXQ off
        mode = 0 if self.fd else 6
        con = mode << 24 | 1 << 19 | 1 << 17 | 1 << 16 | 3 << 9 | 1 << 8 | 1 << 5
        self.out.append(self.reg_write(C1CON, con, what="init"))
        self.out.append(self.reg_read(C1CON, [con | mode << 21], what="init"))  # OPMOD follows
        self.out.append(self.reg_write(C1INT, INT_IE, what="init"))


def _opts(sc, opts: dict) -> tuple[int, list[int], float, float]:
    seed = _int(opts.get("seed", sc.seed))
    batch = option_list(opts.get("batch", "1 1 3")) or [1]
    if any(b < 1 for b in batch):
        raise UsageError("batch sizes must be >= 1")
    return seed, batch, parse_time(opts.get("irq_gap", "300us")), parse_time(opts.get("irq_latency", "20us"))


def _known(opts: dict, allowed: set) -> None:
    extra = set(opts) - allowed - {"seed", "irq_gap", "irq_latency", "chip", "kernel", "frames",
                                   "batch", "rx_rings", "tx_head"}
    if extra:
        raise UsageError(f"unknown mcp2518fd option(s): {', '.join(sorted(extra))}")


def plan_rx(sc, opts: dict, bad_default: tuple = ()) -> list[Access]:
    _known(opts, {"bad_crc"})
    seed, batch, _, _ = _opts(sc, opts)
    drv = Driver(opts, seed, fd=False, rx_rings=_int(opts.get("rx_rings", 1)))
    n = _int(opts.get("frames", 8))
    bad = set(option_list(opts.get("bad_crc", " ".join(bad_default)), str))
    if bad - {"status", "rx", "uinc"}:
        raise UsageError("bad_crc takes status, rx, uinc")
    done = b = 0
    while done < n:
        k = min(batch[b % len(batch)], n - done)
        drv.receive([drv.random_frame() for _ in range(k)], ring=b % drv.rx_rings,
                    bad=bad if b == 1 else frozenset())
        done += k
        b += 1
    return drv.out


def plan_crc(sc, opts: dict) -> list[Access]:
    return plan_rx(sc, opts, bad_default=("status", "rx", "uinc"))


def plan_tx(sc, opts: dict) -> list[Access]:
    _known(opts, set())
    seed, batch, _, _ = _opts(sc, opts)
    drv = Driver(opts, seed, fd=False, rx_rings=_int(opts.get("rx_rings", 1)))
    n = _int(opts.get("frames", 8))
    done = b = 0
    while done < n:
        k = min(batch[b % len(batch)], n - done)
        for _ in range(k):
            drv.send(drv.random_frame())
        drv.tef_irq()
        done += k
        b += 1
    return drv.out


def plan_fd(sc, opts: dict) -> list[Access]:
    _known(opts, set())
    seed, batch, _, _ = _opts(sc, opts)
    drv = Driver(opts, seed, fd=True, rx_rings=_int(opts.get("rx_rings", 2)))
    drv.start()
    n = _int(opts.get("frames", 8))
    done = b = 0
    while done < n:
        k = min(batch[b % len(batch)], n - done)
        if b % 2:
            for _ in range(k):
                drv.send(drv.random_frame())
            drv.tef_irq()
        else:
            drv.receive([drv.random_frame() for _ in range(k)], ring=(b // 2) % drv.rx_rings)
        done += k
        b += 1
    return drv.out


PLANS = {"mcp2518fd-rx": plan_rx, "mcp2518fd-tx": plan_tx, "mcp2518fd-fd": plan_fd,
         "mcp2518fd-crc": plan_crc}


def plan(sc, opts: dict) -> list[Access]:
    """The accesses of scenario ``opts['name']`` (or the name given to the
    generator) without building the timeline."""
    opts = dict(opts)
    name = opts.pop("name")
    return PLANS[name](sc, opts)


def _timeline(sc, opts: dict, fn):
    acc = fn(sc, opts)
    _, _, irq_gap, latency = _opts(sc, opts)
    w = sc.windows_from_payload([a.mosi for a in acc], [a.miso for a in acc],
                                message_start=[a.message_start for a in acc])
    gaps = np.asarray(w.gap_before, float)
    for i, a in enumerate(acc):
        if i and a.message_start and (a.irq_start or a.what == "tx"):
            gaps[i] = irq_gap + (gaps[i] - sc.context_switch)       # keep the jitter
    w.gap_before = gaps
    tl = sc.build_timeline(w)
    times, levels = [], []
    low = False
    for i, a in enumerate(acc):
        if a.irq_start and not low:
            times.append(tl.cs_assert[i] - latency)
            levels.append(0)
            low = True
        if a.irq_end and low:
            times.append(tl.cs_deassert[i] + 0.5e-6)
            levels.append(1)
            low = False
    tl.extra["nINT"] = (np.asarray(times), np.asarray(levels, np.uint8), 1)
    tl.device_truth = [a.truth() for a in acc]
    return tl


def _scenario(fn, doc):
    def make(sc, opts):
        return _timeline(sc, opts, fn)
    make.__doc__ = doc
    return make


# --------------------------------------------------- seed 001's accesses (payload fills)

RFC_RX_WORDS = [9, 25, 9, 13]      # 72, 200, 72, 104 bit per received frame (the RFC's list)
RFC_TX_WORDS = [21, 6]             # 168 + 48 bit per sent frame


def _cangen_frame(rng) -> CanFrame:
    """``cangen can0 -I 0x077 -L 8 -D r``: ID 0x077, 8 random data bytes (seed 001)."""
    return CanFrame(0x077, False, [int(x) for x in rng.integers(0, 256, 8)])


def _check_groups(w, group: list, what: str) -> int:
    from spigap.synth.traffic import window_words

    counts = window_words(w)
    if len(counts) % len(group) or counts != group * (len(counts) // len(group)):
        raise UsageError(f"{what} fills windows of {group} words, repeated (window_words = {group})")
    return len(counts) // len(group)


def fill_rfc_rx(sc, w, opts: dict) -> list:
    """One received classic frame per 4 windows (72/200/72/104 bit, seed 001), as the chip answers:
    READ_CRC C1FIFOSTA1 (the head index), READ_CRC of the RX object at the tail, the tail
    increment as a WRITE_CRC of C1FIFOCON1 with UINC (our reading of the RFC's second 72-bit
    access: the driver's own UINC is a 1-byte write), READ_CRC C1INT + C1RXIF (two RX rings:
    nothing left)."""
    from spigap.synth.traffic import put_words

    opts = dict(opts)
    seed = _int(opts.pop("seed", sc.seed))
    if opts:
        raise UsageError(f"unknown mcp2518fd-rfc-rx options: {', '.join(sorted(opts))}")
    frames = _check_groups(w, RFC_RX_WORDS, "mcp2518fd-rfc-rx")
    rng = np.random.default_rng([seed, 2518])
    drv = Driver({"kernel": "5.18"}, seed, fd=False, rx_rings=2)
    fifo, base, depth, _ = drv.rx[0]
    con = 0 << 29 | (depth - 1) << 24 | 1 << 5 | 1 << 3 | 1          # RXTSEN RXOVIE TFNRFNIE, 8-byte payload
    acc: list[Access] = []
    ts = 1_000_000
    for k in range(frames):
        tail = k % depth
        acc.append(drv.reg_read(fifosta(fifo), [((tail + 1) % depth) << 8 | 0x1], what="fifosta"))
        f = _cangen_frame(rng)
        ts += 40_000 + int(rng.integers(-200, 200))                    # ~1 ms at a 40 MHz time base
        a = read_crc(base + tail * drv.rx_size, f.rx_object(ts, drv.payload), ram=True, what="rx")
        a.frames = [f.truth("RX", ts=ts, fifo=fifo, index=tail)]
        acc.append(a)
        acc.append(drv.reg_write(fifocon(fifo), con | 1 << 8, what="uinc"))
        acc.append(drv.status(0, 0))
    put_words(w, [a.mosi for a in acc], [a.miso for a in acc])
    return [a.truth() for a in acc]


def fill_rfc_tx(sc, w, opts: dict) -> list:
    """One sent classic frame per 2 windows (seed 001, kernel 5.18): the TX object's WRITE_CRC
    (168 bit) and the RTS, a 1-byte WRITE_CRC of UINC|TXREQ (48 bit)."""
    from spigap.synth.traffic import put_words

    opts = dict(opts)
    seed = _int(opts.pop("seed", sc.seed))
    head = _int(opts.pop("tx_head", 0))
    if opts:
        raise UsageError(f"unknown mcp2518fd-rfc-tx options: {', '.join(sorted(opts))}")
    frames = _check_groups(w, RFC_TX_WORDS, "mcp2518fd-rfc-tx")
    rng = np.random.default_rng([seed, 2518])
    drv = Driver({"kernel": "5.18", "tx_head": head}, seed, fd=False, rx_rings=2)
    for _ in range(frames):
        drv.send(_cangen_frame(rng))
    put_words(w, [a.mosi for a in drv.out], [a.miso for a in drv.out])
    return [a.truth() for a in drv.out]


PAYLOADS = {"mcp2518fd-rfc-rx": fill_rfc_rx, "mcp2518fd-rfc-tx": fill_rfc_tx}


SCENARIOS = {
    "mcp2518fd-rx": _scenario(plan_rx, "MCP2518FD: frames received by the Linux driver (status, FIFOSTA, RX objects, UINC)"),
    "mcp2518fd-tx": _scenario(plan_tx, "MCP2518FD: frames sent (TX object + RTS) and their TEF interrupt"),
    "mcp2518fd-fd": _scenario(plan_fd, "MCP2518FD: chip start-up (FIFO setup) then CAN FD frames both ways"),
    "mcp2518fd-crc": _scenario(plan_crc, "MCP2518FD: RX traffic with corrupted CRCs (status, RX object, UINC)"),
}
