"""``--format json``: the stable, documented machine format (see README, "JSON output").

Schema version 1. Keys are only ever added, never renamed or removed within a
major version. All times are seconds; ``resolution_s`` (one sample period) is
the uncertainty of every edge-to-edge figure.

``document(result)`` is the document of a capture (core/result.Result): of one
device, that device's (``to_dict``); of a shared bus (README, "Shared bus"), the
capture and the bus's settings as for one device, then ``devices: {CE0: {...},
CE1: {...}}`` (each device's ``settings``, ``summary``, ``gaps``, ``stalls``,
``warnings``, ``events`` with ``--event DEVICE=...``, plus ``interleave``) and
``bus: {...}`` (core/bus.py's figures and ``queueing``: what the bus alone shows of
queueing). Transfer rows of a shared bus (``transfers``; CSV and JSON lines, see
output/rows.py) carry their device's CS line (``cs``) and bus columns
(``handover_from``, ``handover_s``, ``other_busy_s``, ``other_windows``), every
device's in the order of their start times.
"""

from __future__ import annotations

import math

from spigap import __version__
from spigap import confidence
from spigap.core.analysis import AMBIGUOUS_KINDS, GAP_KINDS, KIND_NAMES, Analysis, DeviceFigures
from spigap.core.gaprules import defs as gapdefs
from spigap.core.result import Result

SCHEMA = 1
DEVICE_KEYS = ("settings", "summary", "gaps", "stalls", "warnings")     # a bus's device section


def _f(x):
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else x


def gap_stats(a: DeviceFigures) -> dict:
    out = {}
    for kind in GAP_KINDS:
        d = a.describe_kind(kind)
        d["available"] = a.available(kind)
        out[kind] = d
    if not a.has_cs:
        d = a.describe_kind("idle")
        d["available"] = True
        out["idle"] = d
    if a.grouping.ambiguous:
        # which kind is the context switch is unknown: both keep their statistics
        for kind, rel in zip(AMBIGUOUS_KINDS, ("shorter", "longer")):
            d = a.describe_kind(kind)
            d["available"] = True
            d["label"] = gapdefs.AMBIGUOUS
            d["relation"] = rel
            out[kind] = d
    return out


def idle_clocks(a) -> float | None:
    """The median idle clocks between words, never below 0 (a gap measured a sample short of
    T/2 is back to back, not "-0.02 idle clocks")."""
    v = a.idle_clocks_p50()
    return None if v is None else max(0.0, float(v))


def grouping_dict(g, n_transfers: int | None = None) -> dict:
    return {"method": g.method, "confidence": g.confidence, "confidence_words": confidence.of_grouping(g),
            "phase": g.phase, "note": confidence.grouping_note(g),
            "structure": g.structure, "message_lengths": list(g.lengths),
            "first_message_start": g.first_start, "evidence": list(g.evidence),
            "ambiguous": g.ambiguous, "settle": g.settle,
            # docs/gaps.md: the structure per stretch (several: it changed), the readings weighed,
            # the closest rival and the kinds of gap with their spread
            "segments": [s.as_dict(n_transfers) for s in g.segments], "readings": list(g.readings),
            "rival": g.rival or confidence.grouping_readings(g),
            "kinds": list(g.gap_kinds), "basis": g.basis, "agreement": g.agreement}


def to_dict(a: DeviceFigures, *, transfers: bool = False) -> dict:
    """The JSON document of one device's analysis (its stalls and --event chains as the
    analysis was finished with them, core/run.py)."""
    info = a.info
    t = a.tick_s
    g = a.grouping
    d = {
        "spigap": __version__,
        "schema": SCHEMA,
        "engine": a.engine,
        "capture": {
            "path": info.path,
            "format": info.format,
            "samplerate_hz": info.samplerate_hz,
            "samples": int(a.end_tick) if info.samplerate_hz else None,
            "duration_s": a.end_tick * t,
            "channels": info.channels,
            "truncated": a.truncated,
        },
        "resolution_s": t,
        "settings": {
            "clk": a.cfg.clk, "mosi": a.cfg.mosi, "miso": a.cfg.miso, "cs": a.cfg.cs,
            "cs_polarity": "low" if a.cfg.cs_active_low else "high",
            "mode": a.cfg.mode, "cpol": a.cfg.cpol, "cpha": a.cfg.cpha,
            "wordsize": a.cfg.wordsize, "bitorder": "lsb" if a.cfg.lsb_first else "msb",
            "idle_timeout_s": a.idle_timeout_ticks * t if a.idle_timeout_ticks is not None else None,
            "inter_transfer_threshold_s": (a.inter_transfer_threshold * t
                                           if a.inter_transfer_threshold is not None else None),
            "context_switch": a.cfg.context_switch,
            # where each setting came from: given / name / file / inferred / default (docs/inference.md)
            "sources": {k: v.as_dict() for k, v in a.sources.items()},
            "buses": [{"clk": b.clk, "cs": b.cs, "data": b.data} for b in a.buses],
        },
        "summary": {
            "transfers": a.n,
            "partial_transfers": a.n_partial(),
            "words": a.n_words_total(),
            "messages": a.n_messages(),
            "transfers_per_message": g.transfers_per_message,
            "grouping": grouping_dict(g, a.n),
            "word_gaps": a.word_gaps_note,
            "sclk_hz": a.sclk_hz,
            "sclk_period_s": a.period_ticks * t if a.period_ticks else None,
            "samples_per_sclk_period": a.period_ticks,
            "sclk_min_high_s": a.min_high * t if a.min_high is not None else None,
            "sclk_min_low_s": a.min_low * t if a.min_low is not None else None,
            "idle_clocks_p50": idle_clocks(a),
            "transfer_rate_hz": a.transfer_rate_hz(),
            "sclk_edges_outside_cs": a.clk_outside_cs,
            "device": a.device,
        },
        "gaps": gap_stats(a),
        "warnings": list(a.warnings),
        "stalls": a.stalls.to_dict(a, limit=1000),
    }
    if a.events is not None:
        d["events"] = a.events.to_dict()
    if a.pins is not None:          # --pins: timing at the pins (docs/pin-timing.md)
        d["pins"] = a.pins.to_dict()
    if transfers:
        d["transfers"] = json_rows(a, transfer_rows(a.kept()))
    return d


def document(r: Result, *, transfers: bool = False, rows=None) -> dict:
    """The JSON document of a capture: one device's as ``to_dict``; a shared bus's with a
    section per device and the bus's (module docstring). ``rows``: a shared bus's transfer
    rows when the devices do not hold them (output/rows.py, past the in-memory bound)."""
    if r.bus is None:
        return to_dict(r.device, transfers=transfers)
    first = next(iter(r.devices.values()))
    base = to_dict(first)
    t = r.tick_s
    d = {"spigap": __version__, "schema": SCHEMA, "engine": r.engine, "capture": base["capture"],
         "resolution_s": t}
    cfg = r.cfg
    d["settings"] = {"clk": cfg.clk, "mosi": cfg.mosi, "miso": cfg.miso, "cs": list(cfg.devices),
                     "sources": {k: v.as_dict() for k, v in r.sources.items()},
                     "buses": [{"clk": b.clk, "cs": b.cs, "data": b.data} for b in r.buses]}
    devices = {}
    for name, a in r.devices.items():
        dd = to_dict(a)
        dev = {k: dd[k] for k in DEVICE_KEYS + ("events", "pins") if k in dd}
        dev["interleave"] = a.bus.interleave.to_dict(t)
        devices[name] = dev
    d["devices"] = devices
    bus = r.bus.figures(t)
    bus["queueing"] = r.bus.queueing(t)
    d["bus"] = bus
    d["warnings"] = list(r.warnings)
    if transfers:
        d["transfers"] = [json_rows(r.devices[x["cs"]], [x])[0] for x in (all_rows(r) if rows is None else rows)]
    return d


# ------------------------------------------------------------------ transfer rows
def bus_rows(a: DeviceFigures, rows: list[dict], k0: int) -> list[dict]:
    """``rows`` (transfers k0.. of ``a``, a device of a shared bus) with its CS line and bus
    columns."""
    t = a.tick_s
    cols = a.bus.rows(k0, k0 + len(rows))
    names = a.bus.names
    for j, r in enumerate(rows):
        frm = int(cols["handover_from"][j])
        hand = int(cols["handover"][j])
        busy = int(cols["other_busy"][j])
        r["cs"] = a.cfg.cs
        r["handover_from"] = names[frm] if frm >= 0 else None
        r["handover_s"] = hand * t if hand >= 0 else None
        r["other_busy_s"] = busy * t if busy >= 0 else None
        r["other_windows"] = int(cols["others"][j])
    return rows


def all_rows(r: Result) -> list[dict]:
    """Every transfer row of every device of an in-memory result, by start time (a shared
    bus's rows with their bus columns)."""
    if r.bus is None:
        return transfer_rows(r.device.kept())
    out = []
    for k, a in enumerate(r.devices.values()):
        if a.bus is None or a.bus.columns is None:
            raise ValueError("the device's transfers were not kept (a long capture): rows went out as measured")
        for i, x in enumerate(bus_rows(a, transfer_rows(a.kept()), 0)):
            out.append((x["start_s"], k, i, x))
    out.sort(key=lambda x: x[:3])
    return [x for *_, x in out]


def json_rows(a, rows: list[dict]) -> list[dict]:
    """Transfer rows as JSON gives them: words above 64 bits as hex strings (JSON
    numbers lose precision above 2**53)."""
    if a.cfg.wordsize > 64:
        width = (a.cfg.wordsize + 3) // 4
        for r in rows:
            for line in ("mosi", "miso"):
                if r[line] is not None:
                    r[line] = [f"0x{v:0{width}X}" for v in r[line]]
    return rows


def transfer_rows(a: Analysis, skip: int = 0, index0: int = 0, message0: int = 0, stop: int | None = None) -> list[dict]:
    """One dict per transfer ``skip``..``stop`` of ``a``; ``index0``/``message0``: the capture's index and
    message number of ``a``'s transfer 0 (core/collect.py measures a capture batch by batch)."""
    t = a.tick_s
    rows = []
    mosi_ok, miso_ok = a.cfg.mosi is not None, a.cfg.miso is not None
    mosi, miso = a.mosi.tolist(), a.miso.tolist()
    pair_gap = (a.pair_gap * t).tolist()
    pair_it = a.pair_inter_transfer.tolist()
    # one Python step per transfer: this is output formatting, not the hot path
    for k in range(skip, a.n if stop is None else min(stop, a.n)):
        w0, w1 = int(a.word_off[k]), int(a.word_off[k + 1])
        p0, p1 = int(a.pair_off[k]), int(a.pair_off[k + 1])
        kind = KIND_NAMES[int(a.gap_kind[k])]
        rows.append({
            "index": index0 + k,
            "start_s": float(a.start[k]) * t,
            "end_s": float(a.end[k]) * t,
            "partial": bool(a.partial_start[k] or a.partial_end[k]),
            "partial_start": bool(a.partial_start[k]),
            "partial_end": bool(a.partial_end[k]),
            "bits": int(a.n_bits[k]),
            "mosi": mosi[w0:w1] if mosi_ok else None,
            "miso": miso[w0:w1] if miso_ok else None,
            "cs_setup_s": _f(a.cs_setup[k] * t),
            "cs_hold_s": _f(a.cs_hold[k] * t),
            "inter_byte_s": [g for g, it in zip(pair_gap[p0:p1], pair_it[p0:p1]) if not it],
            "inter_transfer_s": [g for g, it in zip(pair_gap[p0:p1], pair_it[p0:p1]) if it],
            "gap_before_s": _f(a.gap_before[k] * t),
            "gap_before_kind": kind,
            "message": message0 + int(a.message[k]),
        })
        if a.labels is not None:
            rows[-1]["device"] = a.labels[k]
    return rows
