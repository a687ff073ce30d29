"""Put a trace on the bus clock: match trace events to bus transfers, fit offset and drift.

docs/trace.md is the reference. In short:

* **Anchors.** Each side gets one time per CS window. Bus: the CS assert (the
  first SCLK edge without a CS line). Trace: the device's
  ``spi_set_cs:activate`` (a kernel without that tracepoint: each
  ``spi_transfer_start``, matched to the first SCLK edge). A trace window
  carries its length in bits (the ``len=`` of its transfers) and the tx bytes
  of its first transfer when they were traced.
* **Coarse.** A few key anchors spread over the trace; for each, every bus
  anchor of the same length is a candidate pairing. A candidate survives as
  long as the key's next trace anchors (up to ``STEPS``) also land on bus
  anchors of their lengths, within a tolerance that grows with the distance
  (``MAX_DRIFT_PPM``); a few misses are allowed (lost events, preempted
  writes). Keys whose single survivor agrees with other keys' (one line, drift
  within bounds) give the first pairing. Tolerances go from tight to loose.
* **Fine.** From that pairing the match grows over the trace in windows four
  times wider each round: predict every anchor's bus time from the current
  fit, take the nearest bus anchor of the same length (and payload), keep it
  when the residual is within the tolerance, one trace anchor per bus anchor,
  refit (Theil-Sen, then least squares on the inliers).
* **Acceptance.** A match is refused (``InputError``, one line) unless enough
  anchors match on both sides where the two recordings overlap, the residuals
  stay small against the gaps, the traced payload agrees with the wire, and
  pairing every trace anchor with the bus anchor one window later or earlier
  does NOT fit as well (traffic so regular that its timing cannot tell
  windows apart is refused, pointing to ``--sync-channel``).
* **Zero point.** Matching fixes the rate and the offset up to the anchor's
  latency (``spi_set_cs`` is traced before the CS write). Causality brackets
  it: a kernel event that causes a bus edge precedes it (set_cs → CS,
  transfer_start → first SCLK) and one that observes a bus edge follows it
  (last SCLK → transfer_stop, CS deassert → message_done). The offset is put
  in the middle of that bracket, its half-width reported as
  ``offset_uncertainty_s``. ``--sync-channel`` (``gpio:gpio_value`` events of a
  pin that is also captured) pins the zero point to the pin's edges instead.

Bus times are seconds from the start of the capture; trace times are the
trace's own clock: ``bus = offset_s + (1 + drift_ppm * 1e-6) * trace`` (kept
internally as ``a + b * (trace - t0)``, t0 the first matched anchor, for precision).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable

import numpy as np

from spigap.core.analysis import Analysis
from spigap.errors import InputError, UsageError
from spigap.trace import columns as tm

STEPS = 32                 # anchors a coarse candidate is checked against
KEYS = 24                  # key anchors tried at most, spread over the trace
AGREE = 3                  # keys that must agree before the coarse stage stops early
MAX_DRIFT_PPM = 500.0      # clocks further apart than this are not searched
MIN_MATCHED = 8            # fewer matched windows: no alignment
MIN_TRACE_FRACTION = 0.5   # of trace anchors inside the capture's time span
MIN_BUS_FRACTION = 0.3     # of bus anchors inside the trace's time span
MIN_PAYLOAD_AGREEMENT = 0.9
MAX_SHIFTED_FIT = 0.8      # a one-window shift fitting this share as well: too regular to align
FIT_SAMPLE = 1200          # Theil-Sen on at most this many pairs (it is O(n^2))


@dataclasses.dataclass
class Alignment:
    """How a trace maps onto the bus clock, and how well it matched."""

    method: str                   # "spi" (SPI events), "sync-channel", "userlog"
    device: str | None            # spi0.0; for sync-channel: the GPIO; userlog: the column
    anchor: str                   # the trace event used as anchor
    bus_anchor: str               # the bus edge it was matched to
    t0: float                     # trace time of the first matched anchor
    a: float                      # bus time at t0 (zero point applied)
    b: float                      # bus seconds per trace second
    matched: int
    unmatched_trace: int          # trace anchors inside the capture's span that matched nothing
    unmatched_bus: int            # bus anchors inside the trace's span that matched nothing
    residual_p50_s: float         # |residual| of matched anchors around their median
    residual_p99_s: float
    tolerance_s: float            # the match tolerance used
    zero_point: str               # how the offset's zero was fixed (docs/trace.md)
    offset_uncertainty_s: float | None
    payload_checked: int = 0      # matched windows whose traced tx/rx bytes were compared with MOSI/MISO
    payload_agree: int = 0
    # matched pairs: trace anchor row (index into the Trace) -> bus transfer index
    trace_rows: np.ndarray = dataclasses.field(default_factory=lambda: np.empty(0, np.int64), repr=False)
    bus_index: np.ndarray = dataclasses.field(default_factory=lambda: np.empty(0, np.int64), repr=False)
    residuals: np.ndarray = dataclasses.field(default_factory=lambda: np.empty(0), repr=False)
    notes: list[str] = dataclasses.field(default_factory=list)

    @property
    def offset_s(self) -> float:
        """bus_time = offset_s + (1 + drift_ppm * 1e-6) * trace_time."""
        return self.a - self.b * self.t0

    @property
    def drift_ppm(self) -> float:
        return (self.b - 1.0) * 1e6

    def matched_mask(self, n: int) -> np.ndarray:
        """Per bus transfer (``n`` of them): whether a trace window was matched to it."""
        m = np.zeros(n, bool)
        m[self.bus_index] = True
        return m

    def to_bus(self, ts) -> np.ndarray:
        """Trace times -> bus seconds."""
        return self.a + self.b * (np.asarray(ts, float) - self.t0)

    def to_dict(self) -> dict:
        return {"method": self.method, "device": self.device, "anchor": self.anchor, "bus_anchor": self.bus_anchor,
                "offset_s": self.offset_s, "drift_ppm": self.drift_ppm, "matched": self.matched,
                "unmatched_trace": self.unmatched_trace, "unmatched_bus": self.unmatched_bus,
                "residual_p50_s": self.residual_p50_s, "residual_p99_s": self.residual_p99_s,
                "tolerance_s": self.tolerance_s, "zero_point": self.zero_point,
                "offset_uncertainty_s": self.offset_uncertainty_s,
                "payload_checked": self.payload_checked, "payload_agree": self.payload_agree}


# ---------------------------------------------------------------- the two sides
PAYLOAD_BYTES = 8          # bytes of tx/MOSI compared per window


@dataclasses.dataclass
class _Side:
    t: np.ndarray              # seconds, sorted
    bits: np.ndarray           # int64, -1 unknown
    key: np.ndarray            # int64 index back into the source (trace row / bus transfer)
    # first PAYLOAD_BYTES bytes per anchor (trace: tx; bus: MOSI) and how many are known (0: none)
    pay: np.ndarray | None = None
    pay_n: np.ndarray | None = None
    # the same for rx (trace: spi_transfer_stop's rx; bus: MISO)
    rpay: np.ndarray | None = None
    rpay_n: np.ndarray | None = None


def _bus_side(a: Analysis, *, anchor: str) -> _Side:
    if anchor == tm.BUS_CS_ASSERT:
        ok = ~np.asarray(a.partial_start, bool)
        t = np.asarray(a.start, float)
    else:
        t = np.asarray(a.first_edge, float)
        ok = ~np.isnan(t)
    idx = np.flatnonzero(ok)
    return _Side(t=t[idx] * a.tick_s, bits=np.asarray(a.n_bits, np.int64)[idx], key=idx.astype(np.int64))


def _bus_payload(a: Analysis, idx: np.ndarray, line: str = "mosi") -> tuple[np.ndarray, np.ndarray] | None:
    """First MOSI (or MISO) bytes of transfers ``idx`` (8-bit words only), as (matrix, count)."""
    data = a.mosi if line == "mosi" else a.miso
    if a.cfg.wordsize != 8 or getattr(a.cfg, line) is None or data is None or not len(data):
        return None
    try:
        words = np.asarray(data, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        return None
    off = np.asarray(a.word_off, np.int64)
    n = np.minimum(off[idx + 1] - off[idx], PAYLOAD_BYTES)
    j = off[idx][:, None] + np.arange(PAYLOAD_BYTES)[None, :]
    valid = np.arange(PAYLOAD_BYTES)[None, :] < n[:, None]
    m = np.where(valid, words[np.minimum(j, len(words) - 1)] & 0xFF, 0).astype(np.uint8)
    return m, n.astype(np.int64)


def spi_devices(trace: tm.Trace) -> list[str]:
    """Devices (spiB.C) with set_cs or transfer_start events, most events first."""
    codes = [trace.code(n) for n in (tm.SPI_SET_CS_ACTIVATE, tm.SPI_TRANSFER_START)]
    codes = [c for c in codes if c >= 0]
    if not codes:
        return []
    m = np.isin(trace.event, codes) & (trace.device >= 0)
    counts = np.bincount(trace.device[m], minlength=len(trace.devices))
    return [trace.devices[i] for i in np.argsort(-counts, kind="stable") if counts[i] and "." in trace.devices[i]]


def _trace_side(trace: tm.Trace, device: str) -> tuple[_Side, str, str]:
    """Anchors of one device: (side, trace anchor name, bus anchor name)."""
    act = trace.rows(tm.SPI_SET_CS_ACTIVATE, device)
    starts = trace.rows(tm.SPI_TRANSFER_START, device)
    if len(act):
        anchors, name, bus = act, tm.SPI_SET_CS_ACTIVATE, tm.BUS_CS_ASSERT
    elif len(starts):
        anchors, name, bus = starts, tm.SPI_TRANSFER_START, tm.BUS_FIRST_SCLK
    else:
        raise InputError(f"no spi_set_cs or spi_transfer_start events of {device}", path=trace.path,
                         hint="enable them: echo 1 > /sys/kernel/tracing/events/spi/enable")
    t = trace.ts[anchors]
    bits = np.full(len(anchors), -1, np.int64)
    first_start = np.full(len(anchors), -1, np.int64)
    if len(starts):
        w = np.searchsorted(anchors, starts, side="right") - 1     # the window each transfer opens into
        ok = w >= 0
        ln = trace.length[starts]
        known = np.bincount(w[ok], weights=(ln[ok] >= 0), minlength=len(anchors))
        count = np.bincount(w[ok], minlength=len(anchors))
        total = np.bincount(w[ok], weights=np.maximum(ln[ok], 0) * 8, minlength=len(anchors))
        good = (count > 0) & (known == count)
        bits[good] = total[good].astype(np.int64)
        # the first transfer of each window (for its payload)
        ws, first = np.unique(w[ok], return_index=True)
        first_start[ws] = starts[ok][first]
    first_stop = np.full(len(anchors), -1, np.int64)
    stops = trace.rows(tm.SPI_TRANSFER_STOP, device)
    if len(stops) and trace.payload:
        # rx is filled in by the time of spi_transfer_stop: the window's first stop carries it
        w = np.searchsorted(anchors, stops, side="right") - 1
        ok = w >= 0
        ws, first = np.unique(w[ok], return_index=True)
        first_stop[ws] = stops[ok][first]
    pay = pay_n = rpay = rpay_n = None
    if trace.payload:
        pay, pay_n = _trace_bytes(trace, first_start, 0)
        rpay, rpay_n = _trace_bytes(trace, first_stop, 1)
        if not rpay_n.any():
            rpay = rpay_n = None
    return _Side(t=t, bits=bits, key=anchors.astype(np.int64), pay=pay, pay_n=pay_n, rpay=rpay,
                 rpay_n=rpay_n), name, bus


def _trace_bytes(trace: tm.Trace, rows: np.ndarray, which: int) -> tuple[np.ndarray, np.ndarray]:
    """The first PAYLOAD_BYTES tx (``which`` 0) or rx (1) bytes printed by each row (-1: none)."""
    pay = np.zeros((len(rows), PAYLOAD_BYTES), np.uint8)
    n = np.zeros(len(rows), np.int64)
    for i in np.flatnonzero(rows >= 0):
        p = trace.payload.get(int(rows[i]))
        raw = p[which] if p is not None else None
        if raw:
            b = raw[:PAYLOAD_BYTES]
            pay[i, :len(b)] = np.frombuffer(b, np.uint8)
            n[i] = len(b)
    return pay, n


# ---------------------------------------------------------------- matching
def _nearest(B: np.ndarray, p: np.ndarray) -> np.ndarray:
    k = np.searchsorted(B, p)
    k = np.clip(k, 1, max(len(B) - 1, 1))
    left = B[k - 1]
    right = B[np.minimum(k, len(B) - 1)]
    return np.where(np.abs(p - left) <= np.abs(right - p), k - 1, np.minimum(k, len(B) - 1))


def _coarse(T: _Side, B: _Side, tol0: float) -> list[tuple[int, int, int]]:
    """Key pairings (trace anchor i, bus anchor j, checks passed) that agree on one line."""
    nT, nB = len(T.t), len(B.t)
    steps = min(STEPS, nT - 1)
    if steps < 4 or nB < 2:
        return []
    last = nT - 1 - steps
    order = np.unique(np.linspace(0, last, min(KEYS, last + 1)).round().astype(np.int64))
    # middle keys first (most likely inside both recordings), then outwards
    order = order[np.argsort(np.abs(order - last / 2), kind="stable")]
    found: list[tuple[int, int, int]] = []
    for i in order:
        i = int(i)
        cand = np.flatnonzero(B.bits == T.bits[i]) if T.bits[i] >= 0 else np.arange(nB)
        cand = cand[_payload_equal(T, B, np.full(len(cand), i), cand) != 0]       # traced bytes, where known
        fails = np.zeros(len(cand), np.int64)
        for s in range(1, steps + 1):
            if not len(cand):
                break
            dt = T.t[i + s] - T.t[i]
            tgt = B.t[cand] + dt
            k = _nearest(B.t, tgt)
            ok = np.abs(B.t[k] - tgt) <= tol0 + MAX_DRIFT_PPM * 1e-6 * dt
            if T.bits[i + s] >= 0:
                ok &= B.bits[k] == T.bits[i + s]
            ok &= _payload_equal(T, B, np.full(len(k), i + s), k) != 0
            fails += ~ok
            keep = fails <= 2 + s // 5
            cand, fails = cand[keep], fails[keep]
        if not len(cand):
            continue
        best = int(np.argmin(fails))
        # a unique answer: the best one clearly ahead of any other candidate
        others = np.delete(fails, best)
        if len(others) and others.min() <= fails[best] + 2:
            continue
        found.append((i, int(cand[best]), steps - int(fails[best])))
        # agreement: keys on one line (offset within tolerance + drift bound)
        agree = _agreeing(found, T, B, tol0)
        if len(agree) >= AGREE:
            return agree
    return _agreeing(found, T, B, tol0)


def _agreeing(found, T: _Side, B: _Side, tol0: float) -> list[tuple[int, int, int]]:
    best: list = []
    for i, j, _ in found:
        o = B.t[j] - T.t[i]
        grp = [f for f in found
               if abs((B.t[f[1]] - T.t[f[0]]) - o) <= tol0 + MAX_DRIFT_PPM * 1e-6 * abs(T.t[f[0]] - T.t[i])]
        if len(grp) > len(best):
            best = grp
    return best


def _theil_sen(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Theil-Sen line (median of pairwise slopes, median intercept). Written out with
    numpy rather than scipy.stats.theilslopes: importing scipy.stats alone costs
    about 1.5 s, more than the whole fit."""
    i, j = np.triu_indices(len(x), 1)
    dx = x[j] - x[i]
    ok = dx != 0
    if not ok.any():
        return 0.0, float(np.median(y))
    slope = float(np.median((y[j] - y[i])[ok] / dx[ok]))
    return slope, float(np.median(y - slope * x))


def _fit(t: np.ndarray, y: np.ndarray, t0: float) -> tuple[float, float]:
    """Robust line y = a + b (t - t0): Theil-Sen on a bounded subsample, then
    least squares on the inliers (more efficient for the quantization noise)."""
    x = t - t0
    if len(x) < 2:
        return float(y[0] - x[0]) if len(x) else 0.0, 1.0
    sel = np.unique(np.linspace(0, len(x) - 1, min(len(x), FIT_SAMPLE)).round().astype(np.int64))
    # fit y - x (the offset, slowly varying) for numerical headroom
    slope, intercept = _theil_sen(x[sel], (y - x)[sel])
    r = (y - x) - (intercept + slope * x)
    s = 1.4826 * float(np.median(np.abs(r - np.median(r)))) if len(r) else 0.0
    inl = np.abs(r - np.median(r)) <= max(3 * s, 1e-12)
    if inl.sum() >= 3 and np.ptp(x[inl]) > 0:
        slope, intercept = np.polyfit(x[inl], (y - x)[inl], 1)
    return float(intercept), float(1.0 + slope)


def _payload_equal(T: _Side, B: _Side, i: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Per pair: 1 the bytes both sides know (tx/MOSI, rx/MISO) agree, 0 they differ,
    -1 nothing to compare."""
    out = np.full(len(i), -1, np.int8)
    if not len(i):
        return out
    for tp, tn, bp, bn in ((T.pay, T.pay_n, B.pay, B.pay_n), (T.rpay, T.rpay_n, B.rpay, B.rpay_n)):
        if tp is None or bp is None or tn is None or bn is None:
            continue
        n = np.minimum(tn[i], bn[k])
        cmp = n > 0
        cols = np.arange(PAYLOAD_BYTES)[None, :] < n[:, None]
        eq = np.all((tp[i] == bp[k]) | ~cols, axis=1)
        out[cmp] = np.where(out[cmp] == 0, 0, eq[cmp].astype(np.int8))
    return out


def _match(T: _Side, B: _Side, idx: np.ndarray, a: float, b: float, t0: float, tol: float,
           use_payload: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(trace anchor indices, bus anchor indices, residuals) of the pairs within ``tol``,
    one trace anchor per bus anchor (the closest)."""
    if not len(idx):
        e = np.empty(0, np.int64)
        return e, e, np.empty(0)
    p = a + b * (T.t[idx] - t0)
    k = _nearest(B.t, p)
    r = B.t[k] - p
    ok = np.abs(r) <= tol
    lt = T.bits[idx]
    ok &= (lt < 0) | (B.bits[k] == lt)
    if use_payload:
        ok &= _payload_equal(T, B, idx, k) != 0
    i, k, r = idx[ok], k[ok], r[ok]
    # one trace anchor per bus anchor: the closest
    o = np.lexsort((np.abs(r), k))
    i, k, r = i[o], k[o], r[o]
    first = np.ones(len(k), bool)
    first[1:] = k[1:] != k[:-1]
    i, k, r = i[first], k[first], r[first]
    o = np.argsort(i, kind="stable")
    return i[o], k[o], r[o]


def _grow(T: _Side, B: _Side, seeds, tol: float):
    """From the coarse pairings to a fit over the whole trace."""
    ti = np.array([s[0] for s in seeds], np.int64)
    bj = np.array([s[1] for s in seeds], np.int64)
    t0 = float(T.t[ti.min()])
    if len(ti) >= 2 and np.ptp(T.t[ti]) > 0:
        a, b = _fit(T.t[ti], B.t[bj], t0)
    else:
        a, b = float(B.t[bj[0]] - (T.t[ti[0]] - t0)), 1.0
    lo_t, hi_t = T.t[0], T.t[-1]
    span0 = max(T.t[min(ti.max() + STEPS, len(T.t) - 1)] - T.t[ti.min()], 1e-4)
    c_lo, c_hi = float(T.t[ti.min()]), float(T.t[ti.max()])
    span = span0
    while True:
        lo, hi = c_lo - span, c_hi + span
        idx = np.arange(np.searchsorted(T.t, lo), np.searchsorted(T.t, hi, side="right"))
        i, k, r = _match(T, B, idx, a, b, t0, tol)
        if len(i) >= 2:
            a, b = _fit(T.t[i], B.t[k], t0)
        if lo <= lo_t and hi >= hi_t:
            break
        span *= 4
    i, k, r = _match(T, B, np.arange(len(T.t)), a, b, t0, tol)
    if len(i) >= 2:
        a, b = _fit(T.t[i], B.t[k], t0)
        i, k, r = _match(T, B, np.arange(len(T.t)), a, b, t0, tol)
    return a, b, t0, i, k, r


def _best_of(attempts: Iterable[Callable[[], "Alignment | None"]]) -> tuple["Alignment | None", InputError | None]:
    """(the alignment that matched most windows, the first refusal): each attempt aligns
    one candidate (a device, a GPIO), gives None when it has nothing to try, or refuses."""
    best: Alignment | None = None
    err: InputError | None = None
    for attempt in attempts:
        try:
            al = attempt()
        except InputError as e:
            err = err or e
            continue
        if al is not None and (best is None or al.matched > best.matched):
            best = al
    return best, err


def _seeds(T, B, resolution_s: float, tick_s: float) -> tuple[list, float]:
    """Coarse matches at the tightest tolerance that gives any: (seeds, tolerance)."""
    tol = 0.0
    for tol in _tolerances(T, B, resolution_s, tick_s):
        seeds = _coarse(T, B, tol)
        if seeds:
            return seeds, tol
    return [], tol


def _tolerances(T: _Side, B: _Side, resolution: float, tick_s: float) -> list[float]:
    """Tight to loose, each below half the typical spacing of bus anchors."""
    gaps = np.diff(B.t)
    spacing = float(np.percentile(gaps, 10)) if len(gaps) else 1.0
    base = 2 * resolution + 2 * tick_s
    tols = [base + 1e-6, base + 4e-6, base + 16e-6]
    return [t for t in tols if t < 0.45 * spacing] or [0.45 * spacing]


def align_spi(trace: tm.Trace, a: Analysis, device: str | None = None, *,
              cs_latency: float | None = None) -> Alignment:
    """Align a trace's SPI events with a capture; ``device`` None: the best-matching one.
    ``cs_latency``: the known spi_set_cs -> CS edge latency, which pins the zero point."""
    devs = spi_devices(trace)
    if device is not None:
        if device not in trace.devices:
            known = ", ".join(devs) or "none"
            raise UsageError(f"no events of {device} in the trace (SPI devices in it: {known})", path=trace.path,
                             hint="pick one with --spi-device")
        return _align_device(trace, a, device, cs_latency)
    if not devs:
        raise InputError("no spi_set_cs or spi_transfer_start events in the trace", path=trace.path,
                         hint="enable them: echo 1 > /sys/kernel/tracing/events/spi/enable")
    best, err = _best_of(functools.partial(_align_device, trace, a, d, cs_latency) for d in devs)
    if best is None:
        assert err is not None
        raise err
    if len(devs) > 1:
        best.notes.append(f"device {best.device} picked (best match of {', '.join(devs)}; --spi-device overrides)")
    return best


def _align_device(trace: tm.Trace, a: Analysis, device: str, cs_latency: float | None = None) -> Alignment:
    T, name, bus_name = _trace_side(trace, device)
    if not a.has_cs:
        bus_name = tm.BUS_FIRST_SCLK
    B = _bus_side(a, anchor=bus_name)
    what = f"{device}'s {name.split(':', 1)[1]} events"
    if len(T.t) < MIN_MATCHED or len(B.t) < MIN_MATCHED:
        raise InputError(f"too few windows to align ({len(T.t)} {what}, {len(B.t)} on the bus; "
                         f"at least {MIN_MATCHED} each)", path=trace.path)
    if T.pay is not None:
        bp = _bus_payload(a, B.key)
        if bp is not None:
            B.pay, B.pay_n = bp
    if T.rpay is not None:
        bp = _bus_payload(a, B.key, "miso")
        if bp is not None:
            B.rpay, B.rpay_n = bp
    seeds, tol = _seeds(T, B, trace.resolution_s, a.tick_s)
    if not seeds:
        raise InputError(f"no consistent match between the trace's {what} and the capture's transfers "
                         "(a trace from another recording, another device, or traffic too regular to tell "
                         "windows apart)", path=trace.path,
                         hint="check the pair of files; --spi-device picks the device; --sync-channel "
                              "aligns on a GPIO toggled by software instead")
    al = _finish(trace, T, B, seeds, tol, method="spi", device=device, anchor=name,
                 bus_anchor=bus_name, what=what)
    _refine_and_zero(al, trace, a, device, cs_latency)
    return al


def _finish(trace, T, B, seeds, tol, *, method, device, anchor, bus_anchor, what) -> Alignment:
    av, bv, t0, i, k, r = _grow(T, B, seeds, tol)
    n = len(i)
    # the overlap of the two recordings, on the bus clock
    p = av + bv * (T.t - t0)
    in_bus = (p >= B.t[0] - tol) & (p <= B.t[-1] + tol)
    q = (B.t - av) / bv + t0
    in_trace = (q >= T.t[0] - tol) & (q <= T.t[-1] + tol)
    n_t, n_b = int(in_bus.sum()), int(in_trace.sum())
    problem = None
    if n < MIN_MATCHED:
        problem = f"only {n} windows match"
    elif n < MIN_TRACE_FRACTION * n_t:
        problem = f"only {n} of {n_t} {what} inside the capture match a transfer"
    elif n < MIN_BUS_FRACTION * n_b:
        problem = f"only {n} of the capture's {n_b} transfers inside the trace match an event"
    payload_checked = payload_agree = 0
    if problem is None and ((T.pay is not None and B.pay is not None) or (T.rpay is not None and B.rpay is not None)):
        # payload agreement among the pairs that matched on time and length (checked without payload)
        i2, k2, _ = _match(T, B, np.arange(len(T.t)), av, bv, t0, tol, use_payload=False)
        eq = _payload_equal(T, B, i2, k2)
        payload_checked = int(np.count_nonzero(eq >= 0))
        payload_agree = int(np.count_nonzero(eq == 1))
        if payload_checked >= MIN_MATCHED and payload_agree < MIN_PAYLOAD_AGREEMENT * payload_checked:
            problem = (f"the traced tx/rx bytes agree with MOSI/MISO in only {payload_agree} of {payload_checked} "
                       "windows matched by time")
    if problem is None:
        # too regular: the offsets that pair each anchor with the window after or before
        # its match must not explain the trace as well (module docstring)
        for shift in (1, -1):
            ks = k + shift
            okk = (ks >= 0) & (ks < len(B.t))
            if okk.sum() < MIN_MATCHED:
                continue
            d = float(np.median(B.t[ks[okk]] - B.t[k[okk]]))
            i3, _, _ = _match(T, B, np.arange(len(T.t)), av + d, bv, t0, tol)
            if len(i3) >= MAX_SHIFTED_FIT * n:
                problem = (f"the traffic is too regular to align by its timing ({len(i3)} of {n} windows "
                           f"fit as well {'one window later' if shift > 0 else 'one window earlier'})")
                break
    if problem is not None:
        raise InputError(f"trace and capture do not match: {problem}", path=trace.path,
                         hint="a trace from another recording? --spi-device picks the device; "
                              "--sync-channel aligns on a GPIO toggled by software")
    dev = np.abs(r - np.median(r))
    return Alignment(method=method, device=device, anchor=anchor, bus_anchor=bus_anchor, t0=t0, a=av, b=bv,
                     matched=n, unmatched_trace=max(n_t - n, 0), unmatched_bus=max(n_b - n, 0),
                     residual_p50_s=float(np.percentile(dev, 50)), residual_p99_s=float(np.percentile(dev, 99)),
                     tolerance_s=tol, zero_point="fit", offset_uncertainty_s=None,
                     payload_checked=payload_checked, payload_agree=payload_agree,
                     trace_rows=T.key[i], bus_index=B.key[k], residuals=r)


# ---------------------------------------------------------------- zero point
def _low(x: np.ndarray) -> float | None:
    x = x[np.isfinite(x)]
    return float(np.percentile(x, 1)) if len(x) >= 3 else None


def bus_edges(a: Analysis) -> dict[str, np.ndarray]:
    """Bus edge times in seconds per transfer (NaN where unavailable)."""
    tick = a.tick_s
    starts = np.asarray(a.start, float) * tick
    starts[np.asarray(a.partial_start, bool)] = np.nan
    ends = np.asarray(a.end, float) * tick
    ends[np.asarray(a.partial_end, bool)] = np.nan
    return {tm.BUS_CS_ASSERT: starts, tm.BUS_FIRST_SCLK: np.asarray(a.first_edge, float) * tick,
            tm.BUS_LAST_SCLK: np.asarray(a.last_edge, float) * tick, tm.BUS_CS_DEASSERT: ends}


def owner(a: Analysis, t_bus: np.ndarray) -> np.ndarray:
    """The transfer each bus time belongs to: the one whose CS window, extended to the
    middle of the gaps on either side, holds it (-1 before the first or after the last)."""
    tick = a.tick_s
    if a.n == 0:
        return np.full(len(t_bus), -1, np.int64)
    s = np.asarray(a.start, float) * tick
    e = np.asarray(a.end, float) * tick
    mid = (e[:-1] + s[1:]) / 2
    k = np.searchsorted(mid, t_bus, side="right")
    lo = s[0] - (s[1] - e[0]) / 2 if a.n > 1 else s[0] - 1e-3
    hi = e[-1] + (s[-1] - e[-2]) / 2 if a.n > 1 else e[-1] + 1e-3
    k[(t_bus < lo) | (t_bus > hi)] = -1
    return k.astype(np.int64)


def per_transfer(trace: tm.Trace, al: Alignment, a: Analysis, name: str, device: str | None,
                 which: str) -> tuple[np.ndarray, np.ndarray]:
    """(transfer, bus time) of the first or last ``name`` event at each matched transfer."""
    rows = trace.rows(name, device)
    if not len(rows):
        return np.empty(0, np.int64), np.empty(0)
    t = al.to_bus(trace.ts[rows])
    k = owner(a, t)
    matched = al.matched_mask(a.n)
    ok = (k >= 0) & matched[np.maximum(k, 0)]
    k, t = k[ok], t[ok]
    if not len(k):
        return k, t
    if which == "first":
        ks, pos = np.unique(k, return_index=True)
    else:
        ks, pos = np.unique(k[::-1], return_index=True)
        pos = len(k) - 1 - pos
    return ks, t[pos]


# (trace event, bus edge, +1: the event causes the edge / -1: the event observes the edge, which)
CAUSAL = ((tm.SPI_SET_CS_ACTIVATE, tm.BUS_CS_ASSERT, 1, "first"),
          (tm.SPI_TRANSFER_START, tm.BUS_FIRST_SCLK, 1, "first"),
          (tm.SPI_SET_CS_DEACTIVATE, tm.BUS_CS_DEASSERT, 1, "last"),
          (tm.SPI_TRANSFER_STOP, tm.BUS_LAST_SCLK, -1, "last"),
          (tm.SPI_MESSAGE_DONE, tm.BUS_CS_DEASSERT, -1, "last"))


def _refine_and_zero(al: Alignment, trace: tm.Trace, a: Analysis, device: str,
                     cs_latency: float | None = None) -> None:
    """Refit the rate on every causal pair (one intercept per pair kind, one common
    slope), then put the zero point in the middle of the causality bracket."""
    edges = bus_edges(a)
    if not a.has_cs:
        edges[tm.BUS_CS_ASSERT] = edges[tm.BUS_CS_DEASSERT] = np.full(a.n, np.nan)
    xs: list = []
    ys: list = []
    groups: list = []
    fwd: list = []
    back: list = []
    for g, (name, edge, sign, which) in enumerate(CAUSAL):
        rows = trace.rows(name, device)
        if not len(rows):
            continue
        k, tb = per_transfer(trace, al, a, name, device, which)
        y = edges[edge][k]
        ok = np.isfinite(y)
        if ok.sum() < 3:
            continue
        lat = (y - tb)[ok] * sign            # >= 0 when the clocks agree
        # drop the far tail (a preempted write) from the rate fit
        med = np.median(lat)
        mad = 1.4826 * np.median(np.abs(lat - med)) + 1e-12
        inl = np.abs(lat - med) <= max(4 * mad, 2 * trace.resolution_s)
        x = (tb[ok] - al.a) / al.b + al.t0          # back to trace time
        xs.append(x[inl] - al.t0)
        ys.append((y[ok] - x)[inl])
        groups.append(np.full(int(inl.sum()), g))
        (fwd if sign > 0 else back).append(lat)
    if xs:
        x, y, gr = np.concatenate(xs), np.concatenate(ys), np.concatenate(groups)
        if len(x) >= 8 and np.ptp(x) > 0:
            # y = c_g + s x: remove each group's mean, regress once (common slope)
            xc, yc = x.copy(), y.copy()
            for g in np.unique(gr):
                m = gr == g
                xc[m] -= x[m].mean()
                yc[m] -= y[m].mean()
            slope = float(np.dot(xc, yc) / np.dot(xc, xc))
            # the anchor's intercept under the new slope
            old_b = al.b
            al.b = 1.0 + slope
            anchor_g = [g for g, c in enumerate(CAUSAL) if c[0] == al.anchor]
            m = gr == (anchor_g[0] if anchor_g else gr[0])
            if not m.any():
                m = np.ones(len(gr), bool)
            shift = float(np.mean(y[m] - (al.b - 1.0) * x[m]) - np.mean(y[m] - (old_b - 1.0) * x[m]))
            al.a += shift
            # the fwd/back latencies under the refined fit
            fwd, back = [], []
            for name, edge, sign, which in CAUSAL:
                k, tb = per_transfer(trace, al, a, name, device, which)
                y2 = edges[edge][k]
                ok = np.isfinite(y2)
                if ok.sum() >= 3:
                    (fwd if sign > 0 else back).append((y2 - tb)[ok] * sign)
    F = _low(np.concatenate(fwd)) if fwd else None
    K = _low(np.concatenate(back)) if back else None
    if cs_latency is not None:
        # the activate -> CS assert latency (deactivate -> CS deassert only without it): the two
        # can differ (another code path, a driver's own CS delay), and pooled, a given latency
        # would pin the zero point between them
        for name, edge, _, which in (CAUSAL[0], CAUSAL[2]):
            k, tb = per_transfer(trace, al, a, name, device, which)
            lat = edges[edge][k] - tb
            lat = lat[np.isfinite(lat)]
            if len(lat) >= 3:
                what = "activate -> CS assert" if name == tm.SPI_SET_CS_ACTIVATE else "deactivate -> CS deassert"
                al.a += float(np.median(lat)) - cs_latency
                al.zero_point = f"spi_set_cs {what} latency given ({cs_latency * 1e6:.6g} us, median)"
                al.offset_uncertainty_s = None
                return
        al.notes.append("--cs-latency: no spi_set_cs events matched to CS edges; the causal bracket is used")
    if F is None:
        return
    if K is None:
        # only events before the edges they cause: the fastest one is taken as immediate
        al.a += F
        al.zero_point = "fastest causing event immediate (no event after a bus edge in the trace)"
        al.offset_uncertainty_s = None
        return
    al.a += (F - K) / 2
    al.zero_point = "causal bracket midpoint"
    # printed timestamps are rounded to their step (the kernel's ns2usecs rounds): each of
    # F and K can read up to half a step short, so the bracket is widened by that much
    al.offset_uncertainty_s = abs(F + K) / 2 + trace.resolution_s / 2


# ---------------------------------------------------------------- sync channel
def align_sync(trace: tm.Trace, a: Analysis, edges, channel: str) -> Alignment:
    """Align ``gpio:gpio_value`` events with the edges of a captured channel
    (``edges``: spigap.core.events.ChannelEdges). The pin's edge is taken to be
    at its event's time (the GPIO write's own latency, typically well below a
    microsecond, is inside the offset)."""
    rows = trace.rows(tm.GPIO_VALUE)
    if not len(rows):
        raise InputError("--sync-channel needs gpio:gpio_value events, the trace has none", path=trace.path,
                         hint="enable them: echo 1 > /sys/kernel/tracing/events/gpio/gpio_value/enable")
    bt = np.concatenate([edges.rise, edges.fall]).astype(float)
    bv = np.concatenate([np.ones(len(edges.rise), np.int64), np.zeros(len(edges.fall), np.int64)])
    o = np.argsort(bt, kind="stable")
    B = _Side(t=bt[o] * a.tick_s, bits=bv[o], key=np.arange(len(bt))[o])
    if len(B.t) < MIN_MATCHED:
        raise InputError(f"channel {channel} has {len(B.t)} edges, too few to align on (at least {MIN_MATCHED})",
                         path=a.info.path)

    def attempt(g) -> Alignment | None:
        r = rows[trace.gpio[rows] == g]
        v = trace.value[r].astype(np.int64)
        # a write of the level the pin already has is no edge
        change = np.ones(len(r), bool)
        change[1:] = v[1:] != v[:-1]
        r, v = r[change], v[change]
        T = _Side(t=trace.ts[r], bits=v, key=r.astype(np.int64))
        if len(T.t) < MIN_MATCHED:
            return None
        seeds, tol = _seeds(T, B, trace.resolution_s, a.tick_s)
        if not seeds:
            return None
        return _finish(trace, T, B, seeds, tol, method="sync-channel", device=f"gpio{int(g)}",
                       anchor=tm.GPIO_VALUE, bus_anchor=f"bus:{channel}", what=f"gpio {int(g)} changes")

    best, err = _best_of(functools.partial(attempt, g) for g in np.unique(trace.gpio[rows]))
    if best is None:
        if err is not None:
            raise err
        raise InputError(f"no GPIO in the trace toggles like channel {channel}", path=trace.path,
                         hint="is the right channel given to --sync-channel?")
    # bus_index of a sync alignment indexes the sorted edge list, not transfers
    best.zero_point = "sync channel edge = gpio_value event"
    best.offset_uncertainty_s = None
    return best


# ---------------------------------------------------------------- user-space logs
@dataclasses.dataclass
class UserlogReport:
    """Software timestamps against bus truth (on the bus clock after the fit)."""

    column: str
    bus_anchor: str
    alignment: Alignment
    granularity_s: float | None       # the step the timestamps come in (e.g. 1 µs), None when finer than 1 ns
    error_p50_s: float                # bus edge minus mapped software time (median)
    jitter_std_s: float
    jitter_p99_s: float               # p99 of |error - median|

    def to_dict(self) -> dict:
        return {"column": self.column, "bus_anchor": self.bus_anchor, "granularity_s": self.granularity_s,
                "error_p50_s": self.error_p50_s, "jitter_std_s": self.jitter_std_s,
                "jitter_p99_s": self.jitter_p99_s, **self.alignment.to_dict()}


def granularity(ts: np.ndarray) -> float | None:
    """The largest step 10^-k s (k = 0..9) every timestamp is a multiple of, relative to the first."""
    if len(ts) < 2:
        return None
    x = np.asarray(ts, float) - float(ts[0])
    tol = 1e-11 + 4e-16 * float(np.max(np.abs(ts)))       # float64 rounding of the readings
    for k in range(0, 10):
        q = 10.0 ** -k
        if np.all(np.abs(x - np.round(x / q) * q) <= tol):
            return q
    return None


def align_userlog(log: tm.Trace, a: Analysis) -> list[UserlogReport]:
    """Each ``user:*`` column aligned with the CS asserts (a 'before' column) or the CS
    deasserts (an 'after' column): its drift, and its error against the bus."""
    out = []
    tick = a.tick_s
    if a.has_cs and a.grouping.ambiguous:
        # one timestamp per call: which CS window starts a call must be known
        raise InputError("the capture's message grouping is ambiguous, so which transfer starts each call "
                         "is unknown", path=log.path,
                         hint=f"settle it with {a.grouping.settle or '--transfers-per-message N --context-switch longer|shorter'}"
                              " or give the kernel trace too (--ftrace)")
    for name in log.events:
        if not name.startswith("user:"):
            continue
        rows = log.rows(name)
        if len(rows) < MIN_MATCHED:
            continue
        after = any(w in name for w in ("after", "end", "stop", "done"))
        if after:
            t = np.asarray(a.end, float)
            ok = ~np.asarray(a.partial_end, bool)
            bus_name = tm.BUS_CS_DEASSERT
        else:
            t = np.asarray(a.start, float)
            ok = ~np.asarray(a.partial_start, bool)
            bus_name = tm.BUS_CS_ASSERT
        idx = np.flatnonzero(ok)
        B = _Side(t=t[idx] * tick, bits=np.full(len(idx), -1, np.int64), key=idx.astype(np.int64))
        T = _Side(t=log.ts[rows], bits=np.full(len(rows), -1, np.int64), key=rows.astype(np.int64))
        # a software timestamp is taken once per call; the bus may show several windows per call
        if a.n > 1 and not a.grouping.ambiguous:
            first = np.ones(a.n, bool)
            first[1:] = a.message[1:] != a.message[:-1]
            last = np.ones(a.n, bool)
            last[:-1] = a.message[1:] != a.message[:-1]
            keep = (last if after else first)[B.key]
            B = _Side(t=B.t[keep], bits=B.bits[keep], key=B.key[keep])
        if len(B.t) < MIN_MATCHED:
            continue
        res = log.resolution_s
        g = granularity(log.ts[rows])
        tols = [t for t in (2 * max(res, g or 0) + 2 * tick + x for x in (2e-6, 8e-6, 32e-6))
                if t < 0.45 * float(np.percentile(np.diff(B.t), 10))] if len(B.t) > 1 else []
        seeds: list = []
        tol = 0.0
        for tol in tols:
            seeds = _coarse(T, B, tol)
            if seeds:
                break
        if not seeds:
            raise InputError(f"the {name} timestamps match no sequence of transfers in the capture",
                             path=log.path, hint="a log from another recording?")
        al = _finish(log, T, B, seeds, tol, method="userlog", device=name, anchor=name,
                     bus_anchor=bus_name, what=f"{name} timestamps")
        al.zero_point = "fit (software time carries the median latency)"
        err = al.residuals
        out.append(UserlogReport(column=name, bus_anchor=bus_name, alignment=al, granularity_s=g,
                                 error_p50_s=float(np.median(err)), jitter_std_s=float(np.std(err)),
                                 jitter_p99_s=float(np.percentile(np.abs(err - np.median(err)), 99))))
    if not out:
        raise InputError("no user:* column with enough timestamps to align", path=log.path)
    return out


def spi_on_fit(trace: tm.Trace, a: Analysis, fit: Alignment, device: str | None = None) -> Alignment:
    """The SPI windows of ``device`` (default: the one with most events) matched to the
    capture's transfers on a fit found otherwise (``--sync-channel``): no search, the
    same tolerance, so phases can be split on the sync channel's clock."""
    devs = spi_devices(trace)
    if device is None:
        if not devs:
            raise InputError("no spi_set_cs or spi_transfer_start events in the trace", path=trace.path,
                             hint="enable them: echo 1 > /sys/kernel/tracing/events/spi/enable")
        device = devs[0]
    T, name, bus_name = _trace_side(trace, device)
    if not a.has_cs:
        bus_name = tm.BUS_FIRST_SCLK
    B = _bus_side(a, anchor=bus_name)
    tol = _tolerances(T, B, trace.resolution_s, a.tick_s)[-1]
    # the SPI anchor precedes its edge by its latency: take it from the median residual first
    p = fit.to_bus(T.t)
    k = _nearest(B.t, p) if len(B.t) else np.empty(0, np.int64)
    lat = float(np.median(B.t[k] - p)) if len(k) else 0.0
    i, k, r = _match(T, B, np.arange(len(T.t)), fit.a + lat, fit.b, fit.t0, tol)
    if len(i) < MIN_MATCHED:
        raise InputError(f"on the --sync-channel fit only {len(i)} of {device}'s windows meet a transfer",
                         path=trace.path, hint="is the capture's CS line the one of --spi-device?")
    dev = np.abs(r - np.median(r))
    return dataclasses.replace(
        fit, method="spi", device=device, matched=len(i),
        unmatched_trace=max(len(T.t) - len(i), 0), unmatched_bus=max(len(B.t) - len(i), 0),
        residual_p50_s=float(np.percentile(dev, 50)), residual_p99_s=float(np.percentile(dev, 99)),
        tolerance_s=tol, trace_rows=T.key[i], bus_index=B.key[k], residuals=r,
        notes=fit.notes + [f"clock from --sync-channel ({fit.device}, {fit.matched} edges, residual p99 "
                           f"{fit.residual_p99_s * 1e9:.0f} ns); {device}'s windows matched on it"])
