"""Align a trace's SPI events with the capture's transfers (``spigap trace --ftrace``).

docs/trace.md is the reference. **Anchors**: each side gets one time per CS
window. Bus: the CS assert (the first SCLK edge without a CS line). Trace: the
device's ``spi_set_cs:activate`` (a kernel without that tracepoint: each
``spi_transfer_start``, matched to the first SCLK edge). A trace window
carries its length in bits (the ``len=`` of its transfers) and the tx bytes of
its first transfer (and the rx bytes of its first ``spi_transfer_stop``) when
they were traced. match.py matches the two sides, zero.py then fixes the
offset's zero point.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from spigap.core.analysis import Analysis
from spigap.errors import InputError, UsageError
from spigap.trace import columns as tm
from spigap.trace.align.alignment import Alignment
from spigap.trace.align.match import (MIN_MATCHED, PAYLOAD_BYTES, Side, best_of, find_seeds, finish, match, nearest,
                                      tolerances)
from spigap.trace.align.zero import refine_and_zero


def _bus_side(a: Analysis, *, anchor: str) -> Side:
    if anchor == tm.BUS_CS_ASSERT:
        ok = ~np.asarray(a.partial_start, bool)
        t = np.asarray(a.start, float)
    else:
        t = np.asarray(a.first_edge, float)
        ok = ~np.isnan(t)
    idx = np.flatnonzero(ok)
    return Side(t=t[idx] * a.tick_s, bits=np.asarray(a.n_bits, np.int64)[idx], key=idx.astype(np.int64))


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


def _trace_side(trace: tm.Trace, device: str) -> tuple[Side, str, str]:
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
    return Side(t=t, bits=bits, key=anchors.astype(np.int64), pay=pay, pay_n=pay_n, rpay=rpay,
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
    best, err = best_of(functools.partial(_align_device, trace, a, d, cs_latency) for d in devs)
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
    seeds, tol = find_seeds(T, B, trace.resolution_s, a.tick_s)
    if not seeds:
        raise InputError(f"no consistent match between the trace's {what} and the capture's transfers "
                         "(a trace from another recording, another device, or traffic too regular to tell "
                         "windows apart)", path=trace.path,
                         hint="check the pair of files; --spi-device picks the device; --sync-channel "
                              "aligns on a GPIO toggled by software instead")
    al = finish(trace, T, B, seeds, tol, method="spi", device=device, anchor=name,
                 bus_anchor=bus_name, what=what)
    refine_and_zero(al, trace, a, device, cs_latency)
    return al


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
    tol = tolerances(T, B, trace.resolution_s, a.tick_s)[-1]
    # the SPI anchor precedes its edge by its latency: take it from the median residual first
    p = fit.to_bus(T.t)
    k = nearest(B.t, p) if len(B.t) else np.empty(0, np.int64)
    lat = float(np.median(B.t[k] - p)) if len(k) else 0.0
    i, k, r = match(T, B, np.arange(len(T.t)), fit.a + lat, fit.b, fit.t0, tol)
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
