"""Buses that look like SPI and are not (docs/inference.md, "No SPI, no bus").

A clock with a line that changes on its edges is what SPI looks like, and also what I2C,
I2S/TDM/AC'97, JTAG, MDIO, an SD card's native bus and many others look like. Each test
below is the other protocol's own evidence, read from the prefix; a clock bus one of them
fits is no SPI bus, and the refusal says what it looks like, why, and the options that frame
it as SPI anyway. ``parallel`` looks at every line (a parallel bus needs no clock line of its
own: a strobe). The tests:

* ``i2c``: a data line falls while the clock is high, away from its edges (START), or rises
  so (STOP), and the clock runs in 9-bit bytes between those conditions (8 bits and an
  acknowledge); SPI data changes at a clock edge and comes in 8-bit words;
* ``audio``: the clock never pauses and a line changes every N clock cycles, on its edges
  (I2S: half the frame each way; AC'97: a 16-clock SYNC every 256; TDM: a short frame sync);
* ``mdio``: a run of 32 ones (the preamble) on the data line at the clock's rising edges,
  then a start pattern (01, or 00 for clause 45);
* ``sd_native``: 48-bit command/response frames on the data line (start bit 0, end bit 1)
  whose CRC7 holds, more often than chance, unless the card answers them on another line
  (an SD card in SPI mode: CRC7 commands on MOSI, the R1 replies on MISO);
* ``jtag``: a line that, read as TMS at the rising edges, steers a JTAG TAP into its shift
  states exactly while the other lines change (TDI, TDO), or the lines are named so;
* ``parallel``: four or more lines that change in the same samples (an address or data bus
  with a strobe), which no SPI bus does.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from spigap.core.infer.evidence import Evidence, clock_score, cs_windows, on_edges

I2C_BYTES = 0.75              # share of stretches between START/STOP conditions that are 9-bit bytes


@dataclasses.dataclass
class Lookalike:
    """A bus that is not SPI: what it looks like, why, and the lines SPI options would name."""

    name: str                 # "I2C", "I2S", "JTAG", ...
    why: str                  # the evidence, in words
    clk: str | None = None
    data: tuple = ()
    lines: tuple = ()         # a parallel bus: its lines
    strobe: str | None = None  # ... and the line that latches them
    strong: bool = False      # I2C: eight or more stretches between conditions, 75 % of them bytes;
    #                           a parallel bus: its lines latched by a strobe

    def text(self) -> str:
        return f"looks like {self.name} ({self.why})"

    def insist(self) -> str:
        """The options that frame it as SPI anyway."""
        if self.clk is None:
            return "--clk/--mosi/--miso/--cs"
        # a data line to read, always (a parallel bus' data lines are its lines: a quad SPI's IO0-3
        # changing together); its strobe as the CS, where it is not one of those lines
        data = self.data or tuple(n for n in self.lines if n != self.clk)[:1]
        opts = [f"--clk {self.clk}"] + [f"--{r} {d}" for r, d in zip(("mosi", "miso"), data)]
        cs = self.strobe if self.strobe not in (None, self.clk, *data) else None
        return " ".join(opts) + (f" --cs {cs}" if cs else " --no-cs")


def check(ev: Evidence, clk: str, half: float, lines: list[str], data: list[str], cs: str | None,
          cs_sure: bool = False, par: Lookalike | None = None, latch: bool = False,
          frames: bool = False) -> Lookalike | None:
    """The look-alike the clock ``clk`` with these lines is, or None (it may be SPI). ``lines``:
    every other line that changes; ``data``: those that passed the data-line tests; ``cs``: the
    line that brackets the clock's bursts, if one (``cs_sure``: with 98 % of the edges inside);
    ``par``: the parallel bus of the prefix, if one; ``latch``: ``cs`` is a latch strobe;
    ``frames``: ``cs`` frames the clock's bursts (brackets them, or is asserted once around them)."""
    active = [n for n in lines if n != clk and len(ev.changes[n]) >= 2]
    named = _by_names(clk, active)
    if named is not None:
        return named
    # with a CS that brackets the bursts, only bytes of nine pulses between the conditions count
    # (a test bench's busy flag brackets an I2C master's transactions as a CS would)
    found = i2c(ev, clk, active, half, strict=cs_sure) or (smartcard(ev, clk, active, half) if not cs_sure else None)
    if found is not None and par is not None and on_parallel(found, par):
        return dataclasses.replace(par, clk=clk)
    if found is None and par is not None:
        # the clock or the CS is a line (or the strobe) of a parallel bus; or the data lines are,
        # with no sure CS (data lines changing together on a clock that a CS brackets are a wide
        # SPI: dual or quad, read one lane)
        # (a CS that brackets the bursts is SPI's own evidence, even if it changes with other lines:
        # in a simulated design every register updates on the same system clock edge)
        on_bus = clk in par.lines or clk == par.strobe or (cs is not None and cs in par.lines
                                                           and (latch or not cs_sure))
        if on_bus or (data and set(data) <= set(par.lines) and not frames):
            return dataclasses.replace(par, clk=clk)
    if found is None and cs is None:
        cnt = counter(ev)
        if cnt is not None and clk in cnt.lines:
            found = dataclasses.replace(cnt, clk=clk)
    if found is None and not latch:
        # any line may frame the bits, a slower clock too (a word-select divided from the bit clock);
        # 1-bit nets before bits of vectors
        framing = sorted((n for n in ev.names if n != clk and len(ev.changes[n]) >= 6),
                        key=lambda n: bool(re.search(r"\[\d+\]$", n)))
        found = audio(ev, clk, framing, half)
    if found is None and cs is None:
        for d in data or active:
            found = sd_native(ev, clk, d, [n for n in active if n != d]) or mdio(ev, clk, d)
            if found is not None:
                break
    if found is None and not cs_sure:
        found = jtag(ev, clk, active, half) or swd(ev, clk, active)
    if found is not None and par is not None and found.name != par.name and on_parallel(found, par):
        return dataclasses.replace(par, clk=clk)       # a TAP "steered" by an address line is that bus
    if found is None and cs is None and len(ev.changes[clk]) >= 512 and continuous(ev, clk, half):
        n = len(ev.changes[clk]) // 2
        found = Lookalike("a free-running clock", f"{clk} runs through all {n} cycles of the prefix without a pause, "
                                                   "and no line frames its bits as a CS does: an SPI clock runs in "
                                                   "bursts, one per transfer", clk, tuple(data[:2]))
    return found


def on_parallel(found: Lookalike, par: Lookalike) -> bool:
    """I2C whose two lines are lines of a parallel bus (two of a GPIB's or an HD44780's data lines
    that happen to look like START/STOP) is that bus; I2C beside one (an I/O expander's outputs) is I2C."""
    return bool({found.clk, *found.data, *found.lines} & (set(par.lines) | {par.strobe})) \
        and (par.strong or not found.strong)


# ------------------------------------------------------------------ names

_JTAG = {"tck": "clk", "tms": "tms", "tdi": "tdi", "tdo": "tdo"}


def _norm(name: str) -> str:
    return re.sub(r"^(\d+_|d\d+_)", "", name.strip().lower()).replace("-", "_").replace(" ", "_")


def _by_names(clk: str, lines: list[str]) -> Lookalike | None:
    """Lines named for another protocol (TCK/TMS, MDC/MDIO, BIT_CLK/SYNC, LCLK/LFRAME): the
    names are evidence too, when the clock is one of them."""
    c = _norm(clk)
    ns = {_norm(n): n for n in lines}
    if c in ("tck", "jtag_tck") and ({"tms", "jtag_tms"} & set(ns)):
        return Lookalike("JTAG", f"{clk} and {ns.get('tms') or ns.get('jtag_tms')} are named for JTAG's TCK and TMS",
                         clk, tuple(ns[k] for k in ("tdi", "tdo") if k in ns))
    if c == "mdc" and "mdio" in ns:
        return Lookalike("MDIO", f"{clk} and {ns['mdio']} are named for MDIO's MDC and MDIO", clk, (ns["mdio"],))
    if c in ("lclk",) and ("lframe" in ns or "lframe#" in ns):
        return Lookalike("LPC", f"{clk} and {ns.get('lframe') or ns.get('lframe#')} are named for LPC's LCLK "
                                "and LFRAME#: a parallel bus", clk)
    return None


# ------------------------------------------------------------------ I2C

def _conditions(ev: Evidence, clk: str, d: str, h: float):
    """START (``d`` falls while ``clk`` is high, well after its rising edge, or before the clock
    ever moves) and STOP (rises so) conditions of a data line that otherwise changes while the clock
    is low: (start mask, stop mask, clock rises between consecutive conditions, each change's clock
    change index), or None when there are fewer than two conditions, or most of its changes come
    while the clock is high (SPI data driven on the leading edge)."""
    ct = ev.ticks(clk)
    dt = ev.ticks(d)
    if len(dt) < 2:
        return None
    cl = ev.level[clk][ev.changes[clk]]
    dl = ev.level[d][ev.changes[d]]
    j = np.searchsorted(ct, dt, side="right") - 1
    before = j < 0
    high = np.where(before, int(ev.level[clk][0]) == 1, cl[np.maximum(j, 0)] == 1)
    prv = np.where(before, np.inf, dt - ct[np.maximum(j, 0)])
    nxt = np.where(j < len(ct) - 1, ct[np.minimum(j + 1, len(ct) - 1)] - dt, np.inf)
    mid = high & (prv >= max(0.5 * h, 1.0)) & (nxt >= 1)     # well after the rising edge, clock still high
    start = mid & (dl == 0) & ((nxt <= 4 * h) | (before & np.isfinite(nxt)))
    stop = mid & (dl == 1) & ((prv <= 4 * h) | ~np.isfinite(nxt))
    if start.sum() < 1 or stop.sum() + start.sum() < 2 or float(np.mean(~high)) < 0.5:
        return None
    cond = np.concatenate([dt[start], dt[stop]])
    order = np.argsort(cond, kind="stable")
    after_start = np.concatenate([np.ones(int(start.sum()), bool), np.zeros(int(stop.sum()), bool)])[order][:-1]
    return start, stop, np.diff(np.searchsorted(ct[cl == 1], cond[order])), j, after_start


def i2c(ev: Evidence, clk: str, lines: list[str], half: float, strict: bool = False) -> Lookalike | None:
    """I2C: a line falls while the clock is high, well after its rising edge (or before the
    clock ever moves) and before it falls (START), or rises while it is high after its last
    rising edge (STOP), and the clock runs in 9-bit bytes between those conditions (8 bits
    and an acknowledge). SPI data changes on a clock edge and comes in 8-bit words."""
    ct = ev.ticks(clk)
    if len(ct) < 18:
        return None
    h = max(half, 1.0)
    for d in lines:
        c = _conditions(ev, clk, d, h)
        if c is None:
            continue
        start, stop, n, j, _ = c
        # I2C's conditions bracket bytes: at most the STOP -> START pairs have no clock pulse between
        # them (about half); a line toggling near another's edges without bytes between is no SDA
        if len(n) >= 8 and float(np.mean(n > 1)) < 0.3:
            continue
        n = n[n > 1]                         # clock pulses between conditions (the last one's rise included)
        # 9 pulses a byte (8 bits and the acknowledge) and one more before a STOP or a repeated
        # START; at a few samples per bit a condition may share its sample with the clock's rise,
        # counting one more (never one less: 9-bit SPI words between data changes while the clock
        # idles high look like 9 pulses between conditions)
        nine = float(np.mean(np.isin((n - 1) % 9, (0, 1)) & (n >= 9))) if len(n) else 0.0
        # the acknowledge hand-over: the line changes twice in one clock phase (the sender lets go,
        # the receiver pulls it low); SPI data changes once per bit
        same = (np.diff(j) == 0) & (j[1:] >= 0) & (j[1:] < len(ct) - 1)
        short = np.zeros(len(same), bool)
        short[same] = (ct[np.minimum(j[1:][same] + 1, len(ct) - 1)] - ct[j[1:][same]]) <= 4 * h
        twice = float(np.mean(short)) if len(short) else 0.0
        # with the hand-over seen, a STOP right after a byte's ninth pulse counts too (a bit-banged
        # master that raises SDA with the clock left high after the acknowledge: 9, 18, 27 pulses);
        # without it 9-bit SPI words changing data while the clock idles high count so
        whole = float(np.mean(np.isin(n % 9, (0, 1, 2)) & (n >= 9))) if len(n) else 0.0
        # the hand-over alone is weaker evidence: it needs a STOP too (a transaction seen whole)
        if not (nine >= I2C_BYTES or (max(nine / 0.3, whole / I2C_BYTES) >= 1 and twice >= 0.02
                                      and stop.sum() >= 1 and not strict)):
            continue
        if strict and len(n) < 4:
            continue
        if len(n) < 2 and twice < 0.02 and len(ct) > 4 * int(n.sum()):
            continue                         # one stretch of a long prefix: too little to tell
        how = (f"{clk} runs in 9-bit bytes between them" if nine >= I2C_BYTES else
               f"{d} changes twice in one {clk} phase at {100 * twice:.0f} % of its changes, as an acknowledge "
               "hands it over")
        return Lookalike("I2C", f"{d} changes while {clk} is high: {int(start.sum())} START and "
                                f"{int(stop.sum())} STOP conditions; {how}", clk, (d,),
                         strong=nine >= I2C_BYTES and len(n) >= 8)
    return None


def smartcard(ev: Evidence, clk: str, lines: list[str], half: float) -> Lookalike | None:
    """A synchronous smart card (SLE4442 and its kind, ISO 7816-10) on CLK, RST and I/O: RST high
    around one single clock pulse (the reset: the card then reads out its answer to reset), or
    I/O's START/STOP conditions (falling, rising while CLK is high, as I2C's) around 24-pulse
    commands (3 bytes, no acknowledge). Named so: CLK, RST and I/O."""
    names = {_norm(n): n for n in ev.names if n != clk}
    io = names.get("i/o") or names.get("io")
    if _norm(clk) == "clk" and io and ("rst" in names or "reset" in names):
        return Lookalike("a synchronous smart card (SLE44xx)", f"{clk}, {names.get('rst') or names['reset']} and {io} "
                         "are named for a card's CLK, RST and I/O (ISO 7816)", clk, (io,))
    ct = ev.ticks(clk)
    if len(ct) < 16:
        return None
    rises = ct[ev.level[clk][ev.changes[clk]] == 1]
    for r in lines:
        # RST: one pulse in the prefix, around the clock's first pulse (one rise and its fall inside
        # it), then the answer to reset: 32 bits or more clocked out on another line
        rt = ev.ticks(r)
        if len(rt) != 2 or ev.level[r][ev.changes[r][0]] != 1:
            continue
        inside = ct[(ct > rt[0]) & (ct < rt[1])]
        after = int(np.count_nonzero(rises > rt[1]))
        if len(inside) != 2 or inside[0] != ct[0] or after < 32:
            continue
        out = [d for d in lines if d != r and np.count_nonzero(ev.ticks(d) > rt[1]) >= 2]
        if out:
            return Lookalike("a synchronous smart card (SLE44xx)", f"{r} is high around {clk}'s first pulse alone: "
                             f"a card's reset, its answer to reset clocked out on {out[0]} after it (ISO 7816-3)",
                             clk, (out[0],))
    h = max(half, 1.0)
    for d in lines:
        c = _conditions(ev, clk, d, h)
        if c is None:
            continue
        n = c[2][c[4] & (c[2] > 1)]           # from a START to the next condition: the command
        if len(n) >= 1 and float(np.mean(np.isin(n - 1, (24, 25)))) >= 0.75:
            return Lookalike("a synchronous smart card (SLE44xx)", f"{d} changes while {clk} is high around "
                             f"{len(n)} command{'s' if len(n) != 1 else ''} of 24 clock pulses (3 bytes, no "
                             "acknowledge): a card's START/STOP conditions", clk, (d,))
    return None


def i2c_any(ev: Evidence, exclude: set[str] | frozenset[str] = frozenset()) -> Lookalike | None:
    """I2C on any pair of lines, named or not, whether or not the clock looks regular (a
    clock-stretching SCL does not): every line that changes often enough tried as SCL."""
    names = [n for n in ev.names if n not in exclude and len(ev.changes[n]) >= 18]
    for c in sorted(names, key=lambda n: -len(ev.changes[n])):
        d = np.diff(ev.ticks(c))
        half = float(np.percentile(d, 25)) if len(d) else 0.0
        found = i2c(ev, c, [n for n in ev.names if n != c and len(ev.changes[n]) >= 2], half)
        if found is not None:
            return found
    return None


# ------------------------------------------------------------------ clocks that never pause

def continuous(ev: Evidence, clk: str, half: float) -> bool:
    """The clock runs all through the prefix: no pause of more than four half periods
    (an SPI clock runs in bursts, one per transfer or word)."""
    ct = ev.ticks(clk)
    if len(ct) < 64:
        return False
    d = np.diff(ct)
    pause = d > 4 * max(half, 1.0)
    return float(np.sum(d[pause])) < 0.05 * float(ct[-1] - ct[0]) and int(pause.sum()) <= max(2, len(ct) // 4096)


def audio(ev: Evidence, clk: str, lines: list[str], half: float) -> Lookalike | None:
    """A continuous bit clock with a frame line that changes every N clock cycles, on its edges:
    I2S (word select, half the frame each way), AC'97 (a 16-clock SYNC every 256), TDM (a short
    frame sync), or another framed serial stream. SPI's clock pauses between transfers."""
    if not continuous(ev, clk, half):
        return None
    ct = ev.ticks(clk)
    lv = ev.level[clk][ev.changes[clk]]
    rises = ct[lv == 1]
    for f in lines:
        ft = ev.ticks(f)
        if len(ft) < 6 or on_edges(ev, f, clk, half) < 0.9:
            continue
        fl = ev.level[f][ev.changes[f]]
        cyc = np.searchsorted(rises, ft)             # clock cycles before each change
        ups, downs = cyc[fl == 1], cyc[fl == 0]
        if len(ups) < 3 or len(downs) < 3:
            continue
        per = np.diff(ups)
        vals, cnt = np.unique(per, return_counts=True)
        p = int(vals[np.argmax(cnt)])
        # audio frames are 16 to 512 bits (2 x 8 bit to 16 slots x 32 bit); a slower steady line
        # on a system clock is a divided control signal of a synchronous design (an SPI core's
        # SCLK every 14 system clocks, with pauses between transfers: 90 % of the frames steady)
        if not 16 <= p <= 512 or float(np.mean(np.abs(per - p) <= 1)) < 0.9:
            continue
        k = min(len(ups), len(downs))
        hi = (downs[:k] - ups[:k]) % p if downs[0] > ups[0] else (downs[1:k] - ups[:k - 1]) % p
        if not len(hi):
            continue
        width = int(np.median(hi))
        if abs(width - p / 2) <= 1:
            return Lookalike("I2S", f"a continuous bit clock {clk}; {f} switches every {p // 2} clocks, "
                                    f"a word-select line: {p // 2} bits per channel", clk, lines=(f,))
        if abs(p - 256) <= 1:
            return Lookalike("AC'97", f"a continuous bit clock {clk}; {f} pulses every 256 clocks: AC'97's SYNC "
                                      "(16 clocks wide once the link runs)", clk, lines=(f,))
        w = min(width, p - width)
        wide = f"for {w} clock{'s' if w != 1 else ''}" if w else "(shorter than a clock)"
        return Lookalike("TDM", f"a continuous bit clock {clk}; {f} pulses {wide} every {p} clocks: a frame sync",
                         clk, lines=(f,))
    return None


def _bits(ev: Evidence, clk: str, d: str) -> np.ndarray:
    """``d``'s level at the rising edges of ``clk`` (the level just before the edge's entry:
    data driven on the other edge is stable there)."""
    ci = ev.changes[clk]
    rising = ci[ev.level[clk][ci] == 1]
    return ev.level[d][np.maximum(rising - 1, 0)].astype(np.int8)


def mdio(ev: Evidence, clk: str, d: str) -> Lookalike | None:
    """MDIO: frames start with 32 ones (the preamble) sampled at MDC's rising edges, then 01
    (clause 22) or 00 (clause 45); each frame is 64 bits."""
    b = _bits(ev, clk, d)
    if len(b) < 64:
        return None
    frames = events = 0
    run = 0
    for i in range(len(b) - 2):
        if b[i]:
            run += 1
            continue
        if run >= 32 and i + 32 <= len(b):
            events += 1
            # the turnaround's 0, and bits that change at the clock's pace (a UART's start bit
            # sampled by a fast system clock stays 0 for hundreds of its cycles)
            frames += int(b[i + 15] == 0 and np.count_nonzero(np.diff(b[i:i + 32])) >= 3)
        run = 0
    # frames filling half the prefix; or, on an MDC that runs on while the bus idles (ones),
    # two or more frames after their preambles, each with its turnaround (chance: 1 in 2)
    if not (frames >= 1 and frames * 64 >= 0.5 * len(b)) and not (frames >= 3 and frames >= 0.9 * events):
        return None
    return Lookalike("MDIO", f"{d} sends a preamble of 32 ones at {clk}'s rising edges before each of "
                             f"{frames} 64-bit frame{'s' if frames != 1 else ''}", clk, (d,))


def _crc7(bits: np.ndarray) -> int:
    crc = 0
    for bit in bits:
        top = ((crc >> 6) & 1) ^ int(bit)
        crc = (crc << 1) & 0x7F
        if top:
            crc ^= 0x09
    return crc


def sd_native(ev: Evidence, clk: str, d: str, others: list[str]) -> Lookalike | None:
    """An SD card's native bus: 48-bit command (and response) frames on CMD, sampled at CLK's
    rising edges: a start bit 0 after the line idles high, the transmission bit, 38 bits, a
    CRC7 that holds, an end bit 1; more frames whose CRC holds than chance gives (1 in 128).
    Not when ``others`` carry the card's answers: in SPI mode the host's commands keep their
    CRC7 (CMD0 and CMD8 must) but the card replies on its own line (MISO), never on CMD."""
    b = _bits(ev, clk, d)
    if len(b) < 48:
        return None
    # a frame starts with 0 after the line idled high (at least 8 ones)
    ones = np.concatenate([[0], np.cumsum(b)])
    idx = np.arange(8, len(b) - 47)
    starts = idx[(b[idx] == 0) & (ones[idx] - ones[idx - 8] == 8)]
    valid: list[int] = []
    tried = 0
    nxt = 0
    for s in starts[:4000]:
        if s < nxt:
            continue
        tried += 1
        f = b[s:s + 48]
        if f[47] == 1 and _crc7(f[:40]) == int("".join(map(str, f[40:47])), 2):
            valid.append(int(s))
            nxt = s + 48
    if valid and _answered_elsewhere(b, [_bits(ev, clk, o) for o in others], valid):
        return None
    # by chance 1 in 256 tries holds (CRC7 and the end bit)
    if (len(valid) >= 2 and len(valid) >= 3 * tried / 256 + 1) or (len(valid) == 1 and tried <= 8):
        return Lookalike("SD", f"{d} carries {len(valid)} 48-bit command/response frames at {clk}'s rising edges "
                               "whose CRC7 holds: an SD card's native CMD line", clk, (d,))
    echoed = _echoes(b, starts)
    # by chance the two transmission bits, the end bits and the index match in 1 start of 1 024
    if echoed >= 2 and echoed >= 3 * len(starts) / 1024 + 1:
        return Lookalike("SD", f"{d} carries {echoed} 48-bit commands at {clk}'s rising edges each answered by a "
                               "48-bit response echoing its command index: an SD card's native CMD line", clk, (d,))
    return None


N_CR = 64        # clocks from a command's end bit to the card's answer, at most (SD: N_CR, N_CR(SPI) 8 bytes)


def _answered_elsewhere(b: np.ndarray, other_bits: list[np.ndarray], valid: list[int]) -> bool:
    """The host's commands (transmission bit 1) among the CRC-valid frames at ``valid`` are
    answered on another line, never on their own: each answer is the first line to leave its
    idle high within N_CR clocks of the command's end (a native card answers on CMD with a
    frame whose transmission bit is 0; in SPI mode MOSI stays high, 0xFF clocked to read the
    R1 byte, whose first bit is 0, on MISO). Two such answers and none on the command line."""
    same = elsewhere = 0
    for s in valid:
        end = s + 48
        if b[s + 1] != 1 or end + N_CR > len(b):
            continue
        z = np.flatnonzero(b[end:end + N_CR] == 0)
        first_same = int(z[0]) if len(z) else N_CR
        first_other = N_CR
        for o in other_bits:
            if o[end - 8:end].all():          # the line idled high through the command's last byte
                zo = np.flatnonzero(o[end:end + N_CR] == 0)
                if len(zo):
                    first_other = min(first_other, int(zo[0]))
        if first_same < first_other and first_same >= 2 and end + first_same + 1 < len(b) \
                and b[end + first_same + 1] == 0:
            same += 1
        elif first_other < first_same:
            elsewhere += 1
    return elsewhere >= 2 and same == 0


def _echoes(b: np.ndarray, starts: np.ndarray) -> int:
    """Commands answered by an R1-style response: a host frame (start bit 0, transmission bit 1, a
    6-bit index, end bit 1 at bit 47), then, two to 64 clocks later (N_CR), a card frame (start
    bit 0, transmission bit 0) carrying the same index, with its end bit. The CRC is not needed:
    an undersampled clock loses a bit now and then, and the index alone is the card's answer."""
    n = 0
    for s in starts:
        if s + 48 + 2 + 48 > len(b) or b[s + 1] != 1 or b[s + 47] != 1:
            continue
        # the response's start bit: the first 0 after the command's end, after 2 ones or more
        rest = b[s + 48:s + 48 + 66]
        z = np.flatnonzero(rest == 0)
        if not len(z) or z[0] < 2:
            continue
        r = s + 48 + int(z[0])
        if r + 48 <= len(b) and b[r + 1] == 0 and b[r + 47] == 1 and np.array_equal(b[r + 2:r + 8], b[s + 2:s + 8]):
            n += 1
    return n


# ------------------------------------------------------------------ SWD

_JTAG_TO_SWD = np.array([0, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 0, 0, 1, 1, 1], np.int8)   # 0xE79E, LSB first


def swd_names(ev: Evidence) -> Lookalike | None:
    """Lines named SWCLK and SWDIO, however irregular the clock (a debug probe's bursts)."""
    names = {_norm(n): n for n in ev.names}
    clk = next((names[k] for k in ("swclk", "swdclk", "swck", "swdck") if k in names), None)
    if clk is None or "swdio" not in names:
        return None
    return Lookalike("SWD", f"{clk} and {names['swdio']} are named for SWD's SWCLK and SWDIO", clk, (names["swdio"],))


def swd(ev: Evidence, clk: str, lines: list[str]) -> Lookalike | None:
    """ARM's Serial Wire Debug: read at the clock's rising edges, a line sends a line reset (50
    ones or more) and the JTAG-to-SWD switch (0xE79E), or requests after a line reset (a start 1,
    four bits and their parity, a stop 0, a park 1); or the lines are named SWCLK and SWDIO."""
    names = {_norm(n): n for n in lines}
    if _norm(clk) in ("swclk", "swdclk", "swck", "swdck") and "swdio" in names:
        return Lookalike("SWD", f"{clk} and {names['swdio']} are named for SWD's SWCLK and SWDIO", clk,
                         (names["swdio"],))
    for d in lines:
        b = _bits(ev, clk, d)
        if len(b) < 66:
            continue
        # a line reset: 50 clocks with SWDIO high (48 seen at the rising edges: the capture may
        # start inside it)
        ones = np.concatenate([[0], np.cumsum(b)])
        idx = np.arange(48, len(b) - 16)
        after_reset = idx[(ones[idx] - ones[idx - 48] == 48)]
        switch = any(np.array_equal(b[i:i + 16], _JTAG_TO_SWD) for i in after_reset[:4000]
                     if b[i] == 0)
        req = [i for i in range(2, len(b) - 8) if b[i - 1] == 0 and b[i - 2] == 0 and b[i] == 1]
        good = sum(1 for i in req if b[i + 6] == 0 and b[i + 7] == 1 and int(b[i + 1:i + 5].sum()) % 2 == b[i + 5])
        if switch or (len(after_reset) and good >= 3 and good >= 0.6 * len(req)):
            why = ("the JTAG-to-SWD switch (0xE79E) after a line reset" if switch else
                   f"{good} requests (start, parity, stop, park) after a line reset")
            return Lookalike("SWD", f"read at {clk}'s rising edges, {d} sends {why}: ARM Serial Wire Debug", clk, (d,))
    return None


# ------------------------------------------------------------------ JTAG

_TAP = {  # state: (next with TMS 0, next with TMS 1)
    "TLR": ("RTI", "TLR"), "RTI": ("RTI", "SELDR"), "SELDR": ("CAPDR", "SELIR"), "CAPDR": ("SHDR", "EX1DR"),
    "SHDR": ("SHDR", "EX1DR"), "EX1DR": ("PADR", "UPDR"), "PADR": ("PADR", "EX2DR"), "EX2DR": ("SHDR", "UPDR"),
    "UPDR": ("RTI", "SELDR"), "SELIR": ("CAPIR", "TLR"), "CAPIR": ("SHIR", "EX1IR"), "SHIR": ("SHIR", "EX1IR"),
    "EX1IR": ("PAIR", "UPIR"), "PAIR": ("PAIR", "EX2IR"), "EX2IR": ("SHIR", "UPIR"), "UPIR": ("RTI", "SELDR"),
}


def _tap(tms: np.ndarray) -> tuple[np.ndarray, int, int]:
    """Per clock cycle: in a shift state; the number of completed scans (a shift state left
    through Exit1 to Update); the cycle from which the state is known. The TAP's state is known once every state it might have started in
    leads to the same one (five ones always do: a reset; most TMS sequences do sooner)."""
    shift = np.zeros(len(tms), bool)
    possible = set(_TAP)
    state = None
    scans = 0
    known = len(tms)
    for i, t in enumerate(tms):
        if state is None:
            possible = {_TAP[x][int(t)] for x in possible}
            if len(possible) == 1:
                state, known = possible.pop(), i + 1
            continue
        state = _TAP[state][int(t)]
        shift[i] = state in ("SHDR", "SHIR")
        if state in ("UPDR", "UPIR"):
            scans += 1
    return shift, scans, known


def jtag(ev: Evidence, clk: str, lines: list[str], half: float) -> Lookalike | None:
    """JTAG: read as TMS at TCK's rising edges, one line resets the TAP (five ones) and steers it
    through scans (Shift-DR/IR, then Update) while the other lines (TDI, TDO) change only in the
    shift states, as their bits are shifted."""
    ci = ev.changes[clk]
    rising = ci[ev.level[clk][ci] == 1]
    if len(rising) < 16:
        return None
    rt = ev.t[rising]
    for m in lines:
        if len(ev.changes[m]) < 2:
            continue
        shift, scans, known = _tap(ev.level[m][np.maximum(rising - 1, 0)])
        if scans < 2 or not shift.any():
            continue
        # the cycles next to a shift state, of those whose state is known: a line changing only
        # there is shifting bits (changes elsewhere at most half as often as chance gives)
        around = shift | np.roll(shift, 1) | np.roll(shift, -1)
        cover = float(np.mean(around[known:]))
        others = [x for x in lines if x != m and len(ev.changes[x]) >= 4]
        moving = []
        for x in others:
            xt = ev.ticks(x)
            cyc = np.clip(np.searchsorted(rt, xt), 0, len(rt) - 1)      # the cycle a change leads into
            inside = (xt > rt[min(known, len(rt) - 1)]) & (xt <= rt[-1])
            if inside.sum() < 4:
                continue
            near = float(np.mean(around[cyc[inside]]))
            if near >= 0.9 and 1 - near <= 0.5 * (1 - cover) and on_edges(ev, x, clk, half) >= 0.7:
                moving.append(x)
        if moving:
            return Lookalike("JTAG", f"read as TMS at {clk}'s rising edges, {m} steers a JTAG TAP "
                                     f"through {scans} scans; {', '.join(moving)} change{'s' if len(moving) == 1 else ''} "
                                     "only in its shift states (TDI/TDO)", clk, tuple(moving[:2]), lines=(m,))
    return None


# ------------------------------------------------------------------ UART

def uart(ev: Evidence) -> Lookalike | None:
    """A UART line: it idles high, its low runs (a start bit and the zeros after it) are whole
    numbers of one bit time (90 % within 10 %, the bit time the shortest common run) of at most
    nine bits, its high runs a bit or longer (data ones, the stop bit, idle): asynchronous serial,
    no clock of its own (a test bench's TX beside its system clock, a console)."""
    best = None
    clocks = [(c, clock_score(ev, c)[1]) for c in ev.names if clock_score(ev, c)[0] >= 0.6]
    for n in ev.names:
        t = ev.ticks(n)
        if len(t) < 20:
            continue
        d = np.diff(t).astype(float)
        bit = float(np.percentile(d, 5))
        if any(c != n and bit <= 8 * h and on_edges(ev, n, c, h) >= 0.9 for c, h in clocks):
            continue                # a bit a clock period or so, on a clock's edges: synchronous data
            #                         (a simulated UART's line changes on a far faster system clock)
        if bit < 4:                 # a few samples per bit at least, to tell multiples apart
            continue
        k = d / bit
        low = ev.level[n][ev.changes[n]][:-1] == 0          # the run after a fall
        whole = np.abs(k - np.round(k)) <= 0.1 * np.maximum(1.0, np.round(k) / 4)
        if low.sum() < 10 or float(np.mean(whole[low] & (k[low] <= 9.5))) < 0.9 or float(np.min(k)) < 0.9:
            continue
        if len(np.unique(np.round(k[low]))) < 2:
            continue                # every low run one length: a clock, not bytes
        if best is None or len(t) > best[0]:
            best = (len(t), n, bit)
    if best is None:
        return None
    _, n, bit = best
    return Lookalike("UART", f"{n} idles high, its low runs are whole numbers of one bit time ({bit:.4g} samples) "
                             "and at most nine bits: asynchronous serial, no clock", data=(n,), lines=(n,))


# ------------------------------------------------------------------ counters

def counter(ev: Evidence, exclude: set[str] | frozenset[str] = frozenset()) -> Lookalike | None:
    """Four or more lines each changing half as often as the one before, evenly (the bits of a
    binary counter or a Gray code, a clock divider chain): each looks like a clock whose edges the
    next one follows, which is no SPI bus (SPI data change as the bits do, not at a fixed rate)."""
    names = sorted((n for n in ev.names if n not in exclude and len(ev.changes[n]) >= 8),
                   key=lambda n: -len(ev.changes[n]))
    best: list[str] = []
    for i, first in enumerate(names):
        chain = [first]
        for n in names[i + 1:]:
            ratio = len(ev.changes[chain[-1]]) / len(ev.changes[n])
            if 1.8 <= ratio <= 2.2 and clock_score(ev, n)[0] >= 0.5:
                chain.append(n)
        if len(chain) > len(best) and clock_score(ev, first)[0] >= 0.6:
            best = chain
    if len(best) < 4:
        return None
    shown = ", ".join(best[:6]) + (" ..." if len(best) > 6 else "")
    return Lookalike("a counter or Gray code", f"{len(best)} lines ({shown}) each change half as often as the one "
                                               "before, evenly: the bits of a counter or a clock divider chain",
                     lines=tuple(best))


# ------------------------------------------------------------------ parallel buses

MIN_PARALLEL = 4              # lines changing together that make a parallel bus


def parallel(ev: Evidence, exclude: set[str] | frozenset[str] = frozenset()) -> Lookalike | None:
    """Four or more lines that change in the same samples, many times: an address or data bus
    (with a strobe: E, ALE, DAV, a clock). SPI changes one data line per direction, and CS with
    them at most once per transfer."""
    return _together(ev, exclude) or strobed(ev, exclude)


def _together(ev: Evidence, exclude: set[str] | frozenset[str]) -> Lookalike | None:
    names = [n for n in ev.names if n not in exclude and len(ev.changes[n]) >= 4
             and clock_score(ev, n)[0] < 0.6]          # a clock changes near everything
    # one signal on two channels (a loopback's MOSI and MISO, a CS probed twice) is one line
    names = list({ev.changes[n].tobytes(): n for n in reversed(names)}.values())[::-1]
    if len(names) < MIN_PARALLEL:
        return None
    ticks = {n: ev.ticks(n) for n in names}
    together = []
    for n in names:
        t = ticks[n]
        # "together": another line changes within a twentieth of this line's usual spacing
        # (bit-banged buses set their lines one after the other, microseconds apart)
        w = max(1.0, 0.05 * float(np.median(np.diff(t))))
        near = np.zeros(len(t), np.int32)
        for m in names:
            if m == n:
                continue
            u = ticks[m]
            k = np.searchsorted(u, t)
            d = np.minimum(np.abs(t - u[np.clip(k - 1, 0, len(u) - 1)]), np.abs(u[np.clip(k, 0, len(u) - 1)] - t))
            near += d <= w
        if float(np.mean(near >= 1)) >= 0.5:
            together.append(n)
    # the bits of one vector of a simulator's dump (left[10], left[9]) are one register: four lines
    # of four names at least
    if len({re.sub(r"\[\d+\]$", "", n) for n in together}) < MIN_PARALLEL:
        return None
    count = np.zeros(len(ev.t), np.int32)
    for n in together:
        count[ev.changes[n]] += 1
    multi = max(int(np.count_nonzero(count >= 2)), min(len(ticks[n]) for n in together))
    # eight times together; or, in a short prefix, three times with four lines in one sample
    if multi < 8 and int(np.count_nonzero(count >= MIN_PARALLEL)) < 3:
        return None
    strobe = _strobe(ev, together, count, names)
    shown = ", ".join(together[:6]) + (" ..." if len(together) > 6 else "")
    return Lookalike("a parallel bus", f"{len(together)} lines ({shown}) change together "
                                       f"about {multi} times" + (f"; {strobe} strobes them" if strobe else ""),
                     lines=tuple(together), strobe=strobe)


def strobed(ev: Evidence, exclude: set[str] | frozenset[str] = frozenset()) -> Lookalike | None:
    """A parallel bus latched by a strobe, its lines set one after another (a bit-banged
    HD44780's E and D4-D7, GPIB's DAV and DIO1-8): a line pulses (its pulses three times
    shorter than their spacing: a strobe, not a clock, which is about as long high as low), and
    three or more lines change only between its pulses, each at most once between two pulses,
    two or more in the same interval. SPI data change many times per CS window, and once per
    cycle of a clock that runs in bursts."""
    names = [n for n in ev.names if n not in exclude and len(ev.changes[n]) >= 2]
    best: tuple[int, str, list[str]] | None = None
    for st in names:
        if len(ev.changes[st]) < 16:
            continue
        for level in (0, 1):
            ps, pe = cs_windows(ev, st, level)
            inner = (ps > 0) & (pe < ev.end)
            ps, pe = ps[inner], pe[inner]
            if len(ps) < 8 or float(np.median(np.diff(ps))) < 3 * float(np.median(pe - ps)):
                continue
            lines = []
            together = np.zeros(len(ps) + 1, np.int32)
            for n in names:
                if n == st:
                    continue
                t = ev.ticks(n)
                k = np.searchsorted(ps, t, side="right")          # interval after pulse k-1
                in_pulse = (k > 0) & (t < pe[np.maximum(k - 1, 0)])
                _, cnt = np.unique(k, return_counts=True)
                if float(np.mean(in_pulse)) <= 0.1 and float(np.mean(cnt == 1)) >= 0.9:
                    lines.append(n)
                    together[np.unique(k)] += 1
            busy = together[together > 0]
            # a strobe latches words: most of its intervals hold a change of the bus (a line that
            # pulses far more often than the others change, an I2C SDA beside slow GPIOs, is none)
            if len(lines) >= 3 and len(busy) >= 8 and float(np.mean(busy >= 2)) >= 0.3 \
                    and len(busy) >= 0.3 * len(together):
                if best is None or len(lines) > best[0]:
                    best = (len(lines), st, lines)
    if best is None:
        return None
    _, st, lines = best
    shown = ", ".join(lines[:6]) + (" ..." if len(lines) > 6 else "")
    return Lookalike("a parallel bus", f"{len(lines)} lines ({shown}) are set between pulses of {st}, each at most "
                                       f"once: {st} strobes them (a data bus latched word by word)",
                     lines=tuple(lines), strobe=st, strong=True)


def _strobe(ev: Evidence, bus: list[str], count: np.ndarray, names: list[str]) -> str | None:
    """The line whose changes come right after the bus lines change (E, ALE, DAV), if one."""
    busy = np.flatnonzero(count >= 3)
    if not len(busy):
        return None
    bt = ev.t[busy]
    best = None
    for n in names:
        if n in bus:
            continue
        st = ev.ticks(n)
        if len(st) < 4:
            continue
        j = np.searchsorted(bt, st, side="left") - 1
        ok = j >= 0
        if not ok.any():
            continue
        share = float(np.mean(ok))
        if best is None or share > best[0]:
            best = (share, n)
    return best[1] if best and best[0] >= 0.5 else None
