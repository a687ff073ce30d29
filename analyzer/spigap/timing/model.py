"""The timing model: how long an SPI transfer and an spi_message take on the bus.

Documented in docs/timing-model.md. In short, for a transfer of ``words``
words (one CS window)::

    T_clock    = (words × (bits + idle) − idle × [no idle slot after the last word]) / SCLK
    T_transfer = T_clock + cs_setup + cs_hold
                 + (segments − 1) × (inter_transfer − (½ + idle) × T)

and for an spi_message (one spidev ioctl) of N such transfers::

    T_message  = (T_transfer + cs_change) × (N − 1) + T_transfer + context_switch
    rate       = N / T_message            (transfers per second)

``inter_transfer`` is the measured edge-to-edge word gap at a boundary between
kernel transfers inside one CS window (docs/gaps.md); it takes the place of the
ordinary word gap of (½ + idle) × T there.

``T_clock`` counts whole clock *slots*, the way the seed 000 author (and the
bcm2835 driver's own estimate) counts them. A logic analyzer measures CS setup
and CS hold to the first and from the last SCLK *edge*; those edges are half a
period inside the first and last bit slot together, so the CS-assert to
CS-deassert time on a capture is ``T_transfer − T/2`` when cs_setup and cs_hold
are the measured edge-to-edge figures (``capture_transfer_time``).

All times are in seconds.
"""

from __future__ import annotations

import dataclasses
import math
import re


@dataclasses.dataclass(frozen=True)
class TimingModel:
    sclk_hz: float
    bits_per_word: int = 8
    idle_clocks: float = 0.0           # idle SCLK periods between two words (bcm2835 poll/IRQ: 1)
    idle_after_last_word: bool = False  # charge the idle slot after the last word too
    cs_setup: float = 0.0              # CS assert -> first SCLK edge
    cs_hold: float = 0.0               # last SCLK edge -> CS deassert
    cs_change: float = 0.0             # CS high between transfers of one message
    context_switch: float = 0.0        # CS high between messages (ioctls)
    inter_transfer: float = 0.0        # gap between kernel transfers inside one CS window
    segments: int = 1                  # kernel transfers inside one CS window (mcp320x: 2)

    def __post_init__(self):
        if not (self.sclk_hz > 0 and math.isfinite(self.sclk_hz)):
            raise ValueError(f"SCLK must be a positive frequency, not {self.sclk_hz!r}")
        if self.bits_per_word < 1:
            raise ValueError("bits per word must be >= 1")
        if self.segments < 1:
            raise ValueError("segments must be >= 1")
        for name in ("idle_clocks", "cs_setup", "cs_hold", "cs_change", "context_switch",
                     "inter_transfer"):
            v = getattr(self, name)
            if not (v >= 0 and math.isfinite(v)):
                raise ValueError(f"{name} must be >= 0, not {v!r}")
        if self.segments > 1 and self.inter_transfer < self.word_gap:
            raise ValueError(f"inter_transfer {self.inter_transfer:g} s is shorter than an ordinary word "
                             f"gap ({self.word_gap:g} s): it would not be an inter-transfer gap")

    @property
    def period(self) -> float:
        """SCLK period T (s)."""
        return 1.0 / self.sclk_hz

    @property
    def word_gap(self) -> float:
        """Edge-to-edge gap between two words of one transfer: (½ + idle) × T."""
        return (0.5 + self.idle_clocks) * self.period

    # ------------------------------------------------------------ per transfer
    def clock_slots(self, words: int) -> float:
        """SCLK periods one CS window occupies: bits plus idle slots."""
        if words < 1:
            raise ValueError("a transfer has at least one word")
        idle_slots = self.idle_clocks * (words if self.idle_after_last_word else words - 1)
        return words * self.bits_per_word + idle_slots

    def clock_time(self, words: int) -> float:
        return self.clock_slots(words) * self.period

    def transfer_time(self, words: int) -> float:
        """T_transfer: clock slots + CS setup + CS hold (+ inter-transfer gaps)."""
        if self.segments > words:
            raise ValueError(f"{self.segments} kernel transfers cannot fit in {words} words")
        return (self.clock_time(words) + self.cs_setup + self.cs_hold
                + (self.segments - 1) * (self.inter_transfer - self.word_gap))

    def capture_transfer_time(self, words: int) -> float:
        """CS assert -> CS deassert as a capture shows it (setup/hold measured to edges)."""
        return self.transfer_time(words) - self.period / 2

    # ------------------------------------------------------------- per message
    def message_time(self, words: int, n: int, *, edges: bool = False) -> float:
        """T_message for n transfers per message (``edges``: capture convention)."""
        if n < 1:
            raise ValueError("a message has at least one transfer")
        t = self.capture_transfer_time(words) if edges else self.transfer_time(words)
        return (t + self.cs_change) * (n - 1) + t + self.context_switch

    def rate(self, words: int, n: int, *, edges: bool = False) -> float:
        """Transfers per second for n transfers per message."""
        return n / self.message_time(words, n, edges=edges)

    def breakdown(self, words: int, n: int) -> dict:
        """Where the time of one message goes (s), term by term; sums to message_time."""
        return {
            "clocks": n * self.clock_time(words),
            "cs_setup": n * self.cs_setup,
            "cs_hold": n * self.cs_hold,
            "inter_transfer": n * (self.segments - 1) * (self.inter_transfer - self.word_gap),
            "cs_change": (n - 1) * self.cs_change,
            "context_switch": self.context_switch,
        }

    def table(self, words: int, ns) -> list[dict]:
        """One row per transfers-per-message value: the seed 000 table."""
        rows = []
        for n in ns:
            msg = self.message_time(words, n)
            rows.append({
                "transfers_per_message": int(n),
                "transfer_time_s": self.transfer_time(words),
                "message_time_s": msg,
                "time_per_transfer_s": msg / n,
                "rate_hz": n / msg,
                "rate_capture_hz": self.rate(words, n, edges=True),
                "breakdown_s": self.breakdown(words, n),
            })
        return rows


# ---------------------------------------------------------------- delay semantics
@dataclasses.dataclass(frozen=True)
class DelaySemantics:
    """How spi.c executes a requested delay (docs/linux-spi-timing.md §1.5)."""

    requested_s: float
    primitive: str          # "none", "ndelay", "udelay", "usleep_range", "msleep"
    busy: bool              # busy-wait (narrow spread) or sleep (slack + wake-up latency)
    min_s: float            # the delay never ends before this
    slack_s: float          # the timer may add up to this much (sleeps); wake-up latency comes on top
    note: str

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def parse_kernel(version) -> tuple[int, int] | None:
    """'4.4.34' / '6.12.25+rpt-rpi-2712' / '5.18-rc1' -> (major, minor); None if unknown."""
    if version is None:
        return None
    m = re.match(r"^\s*v?(\d+)\.(\d+)", str(version))
    return (int(m.group(1)), int(m.group(2))) if m else None


def delay_semantics(seconds: float, kernel=None, *, hz: int = 250, cs_change: bool = False,
                    patched: bool = False) -> DelaySemantics:
    """What a delay of ``seconds`` requested through spi_delay costs on ``kernel``.

    ``cs_change``: the delay is the cs_change delay. Before v5.3 that was a fixed
    ``udelay(10)`` whatever was asked; since v5.3, 0 with unit USECS (the
    default, and the only thing spidev can ask for) still means 10 µs, so pass
    the *effective* request (10e-6 for spidev). ``hz`` is CONFIG_HZ, which sets
    where v6.15+ switches from usleep_range to msleep. ``patched``: the kernel's
    cs_change code was changed (seed 000 removed the udelay), so the fixed
    pre-v5.3 udelay(10) does not apply.
    """
    kv = parse_kernel(kernel)
    ns = seconds * 1e9
    if cs_change and not patched and kv is not None and kv < (5, 3):
        return DelaySemantics(seconds, "udelay", True, 10e-6, 0.0,
                              "kernels before v5.3 always busy-wait udelay(10) on cs_change "
                              "(commit 0b73aa63c193, 2014)")
    if ns <= 0:
        return DelaySemantics(seconds, "none", True, 0.0, 0.0,
                              "no delay: only the two GPIO writes separate CS deassert and assert"
                              if cs_change else "no delay")
    old = (" (before v5.3 only the stock cs_change udelay(10) was re-checked: UNVERIFIED)"
           if kv is not None and kv < (5, 3) else "")
    if ns <= 1000:
        return DelaySemantics(seconds, "ndelay", True, seconds, 0.0,
                              "ndelay() busy-wait: narrow spread (interrupts during the wait add)" + old)
    us = math.ceil(ns / 1000)
    if us <= 10:
        return DelaySemantics(seconds, "udelay", True, us * 1e-6, 0.0,
                              f"udelay({us}) busy-wait (rounded up to whole µs): narrow spread, "
                              "bounded by udelay accuracy and interrupts during the wait" + old)
    if kv is not None and kv >= (6, 15):
        upper_us = 4 * 1_000_000 // hz
        if us < upper_us:
            return DelaySemantics(seconds, "usleep_range", False, us * 1e-6, (us // 4) * 1e-6,
                                  f"fsleep -> usleep_range({us}, {us + us // 4}): sleeps; up to "
                                  "+25 % timer slack plus scheduler wake-up latency (v6.15+)")
        ms = math.ceil(us / 1000)
        return DelaySemantics(seconds, "msleep", False, ms * 1e-3, 1.0 / hz,
                              f"fsleep -> msleep({ms}): sleeps in jiffies (HZ={hz}); at least "
                              f"{ms} ms, typically one more jiffy")
    note = ("usleep_range(us, us + us/10): sleeps; up to +10 % timer slack plus scheduler "
            "wake-up latency")
    note += old
    if kv is None:
        note += " (kernel unknown: v5.3 … v6.14 semantics assumed; v6.15+ allows +25 %)"
    return DelaySemantics(seconds, "usleep_range", False, us * 1e-6, (us // 10) * 1e-6, note)
