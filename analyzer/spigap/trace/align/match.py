"""Match the anchors of two clocks (one time per window on each side) and accept or refuse the match.

Shared by the three aligners (spi.py, sync.py, userlog.py); docs/trace.md is the reference.

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
  refit (fit.py: Theil-Sen, then least squares on the inliers).
* **Acceptance.** A match is refused (``InputError``, one line) unless enough
  anchors match on both sides where the two recordings overlap, the residuals
  stay small against the gaps, the traced payload agrees with the wire, and
  pairing every trace anchor with the bus anchor one window later or earlier
  does NOT fit as well (traffic so regular that its timing cannot tell
  windows apart is refused, pointing to ``--sync-channel``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable

import numpy as np

from spigap.errors import InputError
from spigap.trace.align.alignment import Alignment
from spigap.trace.align.fit import fit_line

STEPS = 32                 # anchors a coarse candidate is checked against
KEYS = 24                  # key anchors tried at most, spread over the trace
AGREE = 3                  # keys that must agree before the coarse stage stops early
MAX_DRIFT_PPM = 500.0      # clocks further apart than this are not searched
MIN_MATCHED = 8            # fewer matched windows: no alignment
MIN_TRACE_FRACTION = 0.5   # of trace anchors inside the capture's time span
MIN_BUS_FRACTION = 0.3     # of bus anchors inside the trace's time span
MIN_PAYLOAD_AGREEMENT = 0.9
MAX_SHIFTED_FIT = 0.8      # a one-window shift fitting this share as well: too regular to align
PAYLOAD_BYTES = 8          # bytes of tx/MOSI compared per window


@dataclasses.dataclass
class Side:
    """The anchors of one side (the trace's windows, or the bus's), in time order."""

    t: np.ndarray              # seconds, sorted
    bits: np.ndarray           # int64, -1 unknown
    key: np.ndarray            # int64 index back into the source (trace row / bus transfer)
    # first PAYLOAD_BYTES bytes per anchor (trace: tx; bus: MOSI) and how many are known (0: none)
    pay: np.ndarray | None = None
    pay_n: np.ndarray | None = None
    # the same for rx (trace: spi_transfer_stop's rx; bus: MISO)
    rpay: np.ndarray | None = None
    rpay_n: np.ndarray | None = None


# ---------------------------------------------------------------- coarse
def tolerances(T: Side, B: Side, resolution: float, tick_s: float) -> list[float]:
    """Tight to loose, each below half the typical spacing of bus anchors."""
    gaps = np.diff(B.t)
    spacing = float(np.percentile(gaps, 10)) if len(gaps) else 1.0
    base = 2 * resolution + 2 * tick_s
    tols = [base + 1e-6, base + 4e-6, base + 16e-6]
    return [t for t in tols if t < 0.45 * spacing] or [0.45 * spacing]


def find_seeds(T, B, resolution_s: float, tick_s: float) -> tuple[list, float]:
    """Coarse matches at the tightest tolerance that gives any: (seeds, tolerance)."""
    tol = 0.0
    for tol in tolerances(T, B, resolution_s, tick_s):
        seeds = coarse(T, B, tol)
        if seeds:
            return seeds, tol
    return [], tol


def coarse(T: Side, B: Side, tol0: float) -> list[tuple[int, int, int]]:
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
            k = nearest(B.t, tgt)
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


def _agreeing(found, T: Side, B: Side, tol0: float) -> list[tuple[int, int, int]]:
    best: list = []
    for i, j, _ in found:
        o = B.t[j] - T.t[i]
        grp = [f for f in found
               if abs((B.t[f[1]] - T.t[f[0]]) - o) <= tol0 + MAX_DRIFT_PPM * 1e-6 * abs(T.t[f[0]] - T.t[i])]
        if len(grp) > len(best):
            best = grp
    return best


# ---------------------------------------------------------------- fine
def nearest(B: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Index of the value of sorted ``B`` nearest to each of ``p``."""
    k = np.searchsorted(B, p)
    k = np.clip(k, 1, max(len(B) - 1, 1))
    left = B[k - 1]
    right = B[np.minimum(k, len(B) - 1)]
    return np.where(np.abs(p - left) <= np.abs(right - p), k - 1, np.minimum(k, len(B) - 1))


def _payload_equal(T: Side, B: Side, i: np.ndarray, k: np.ndarray) -> np.ndarray:
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


def match(T: Side, B: Side, idx: np.ndarray, a: float, b: float, t0: float, tol: float,
           use_payload: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(trace anchor indices, bus anchor indices, residuals) of the pairs within ``tol``,
    one trace anchor per bus anchor (the closest)."""
    if not len(idx):
        e = np.empty(0, np.int64)
        return e, e, np.empty(0)
    p = a + b * (T.t[idx] - t0)
    k = nearest(B.t, p)
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


def _grow(T: Side, B: Side, seeds, tol: float):
    """From the coarse pairings to a fit over the whole trace."""
    ti = np.array([s[0] for s in seeds], np.int64)
    bj = np.array([s[1] for s in seeds], np.int64)
    t0 = float(T.t[ti.min()])
    if len(ti) >= 2 and np.ptp(T.t[ti]) > 0:
        a, b = fit_line(T.t[ti], B.t[bj], t0)
    else:
        a, b = float(B.t[bj[0]] - (T.t[ti[0]] - t0)), 1.0
    lo_t, hi_t = T.t[0], T.t[-1]
    span0 = max(T.t[min(ti.max() + STEPS, len(T.t) - 1)] - T.t[ti.min()], 1e-4)
    c_lo, c_hi = float(T.t[ti.min()]), float(T.t[ti.max()])
    span = span0
    while True:
        lo, hi = c_lo - span, c_hi + span
        idx = np.arange(np.searchsorted(T.t, lo), np.searchsorted(T.t, hi, side="right"))
        i, k, r = match(T, B, idx, a, b, t0, tol)
        if len(i) >= 2:
            a, b = fit_line(T.t[i], B.t[k], t0)
        if lo <= lo_t and hi >= hi_t:
            break
        span *= 4
    i, k, r = match(T, B, np.arange(len(T.t)), a, b, t0, tol)
    if len(i) >= 2:
        a, b = fit_line(T.t[i], B.t[k], t0)
        i, k, r = match(T, B, np.arange(len(T.t)), a, b, t0, tol)
    return a, b, t0, i, k, r


# ---------------------------------------------------------------- acceptance
def finish(trace, T, B, seeds, tol, *, method, device, anchor, bus_anchor, what) -> Alignment:
    """Grow the coarse ``seeds`` into a fit over the whole trace and accept it (an Alignment
    with zero_point "fit") or refuse it (InputError, module docstring's Acceptance)."""
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
        i2, k2, _ = match(T, B, np.arange(len(T.t)), av, bv, t0, tol, use_payload=False)
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
            i3, _, _ = match(T, B, np.arange(len(T.t)), av + d, bv, t0, tol)
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


def best_of(attempts: Iterable[Callable[[], "Alignment | None"]]) -> tuple["Alignment | None", InputError | None]:
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
