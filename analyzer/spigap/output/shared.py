"""A shared bus's output (core/shared.SharedAnalysis): text, JSON, CSV and JSON lines.

JSON (README, "Shared bus"): the capture and the bus's settings as for one device,
then ``devices: {CE0: {...}, CE1: {...}}`` (each as the single-device document's
``settings``, ``summary``, ``gaps``, ``stalls``, ``warnings``, ``events`` with
``--event DEVICE=...``, plus ``interleave``)
and ``bus: {...}`` (core/bus.py's figures and ``queueing``: what the bus alone
shows of queueing). Transfer rows (JSON ``transfers``, CSV, JSON lines) carry
their device's CS line (``cs``) and bus columns (``handover_from``,
``handover_s``, ``other_busy_s``, ``other_windows``), all devices in the order of
their start times.
"""

from __future__ import annotations

import csv
import heapq
import io
import json
import tempfile
from typing import Any, TextIO

import numpy as np

from spigap import __version__
from spigap.core.gaprules import split
from spigap.output import csvout
from spigap.output.jsonout import SCHEMA, json_rows, to_dict as device_dict, transfer_rows

BUS_COLUMNS = ["cs", "handover_from", "handover_s", "other_busy_s", "other_windows"]
TEXT_ROWS = 50
QUEUED_MIN_FACTOR = 1.25      # one population of handovers: within 1.25 x the shortest (+ 2 samples) is "near it"
DEVICE_KEYS = ("settings", "summary", "gaps", "stalls", "warnings")


# ------------------------------------------------------------------ rows
def bus_rows(a, cols: dict, rows: list[dict], k0: int, names: list[str]) -> list[dict]:
    """``rows`` (transfers k0.. of ``a``) with the device's CS line and bus columns."""
    t = a.tick_s
    for j, r in enumerate(rows):
        i = k0 + j
        frm = int(cols["handover_from"][i])
        hand = int(cols["handover"][i])
        busy = int(cols["other_busy"][i])
        r["cs"] = a.cfg.cs
        r["handover_from"] = names[frm] if frm >= 0 else None
        r["handover_s"] = hand * t if hand >= 0 else None
        r["other_busy_s"] = busy * t if busy >= 0 else None
        r["other_windows"] = int(cols["others"][i])
    return rows


class SharedRows:
    """Every device's transfer rows, merged by start time: rows handed over batch by batch
    (a capture past the in-memory bound) are spooled per device (each device's rows come
    in time order) and merged at the end, so the output is the same text either way."""

    def __init__(self, fmt: str, transfers: bool):
        self.fmt, self.transfers = fmt, transfers
        self.spools: dict[str, Any] = {}
        self.head: dict[str, list[dict]] = {}

    def add(self, a, k0: int, k1: int, index0: int, message0: int, cols: dict, names: list[str]) -> bool:
        rows = bus_rows(a, cols, transfer_rows(a, k0, index0, message0, stop=k1), 0, names)
        name = a.cfg.cs
        if self.fmt == "text":
            head = self.head.setdefault(name, [])
            head += rows[:TEXT_ROWS - len(head)]
            return True
        f = self.spools.get(name)
        if f is None:
            f = self.spools[name] = tempfile.TemporaryFile("w+")
        for r in rows:
            f.write(json.dumps(r) + "\n")
        return True

    def merged(self):
        """Every spooled row, by start time (then device order)."""
        its = []
        for k, (name, f) in enumerate(self.spools.items()):
            f.seek(0)
            its.append(((json.loads(line)["start_s"], k, i, line) for i, line in enumerate(f)))
        for _, _, _, line in heapq.merge(*its):
            yield json.loads(line)

    def close(self) -> None:
        for f in self.spools.values():
            f.close()


def all_rows(sa) -> list[dict]:
    """Every transfer row of every device, by start time (an in-memory SharedAnalysis)."""
    names = list(sa.devices)
    out = []
    for k, (name, a) in enumerate(sa.devices.items()):
        cols = sa.columns.get(name)
        if cols is None:
            raise ValueError("the device's transfers were not kept (a long capture): rows went out as measured")
        for i, r in enumerate(bus_rows(a, cols, transfer_rows(a), 0, names)):
            out.append((r["start_s"], k, i, r))
    out.sort(key=lambda x: x[:3])
    return [r for *_, r in out]


# ------------------------------------------------------------------ JSON
def queueing(sa) -> list[dict]:
    """Per pair A -> B, what the bus alone shows: handovers near the shortest one were
    likely queued (B's message waited in the controller's queue for A's to finish).
    The handovers are split into two populations where there are two (docs/gaps.md's
    rule); else "near" is within 1.25 x the shortest + 2 samples. A kernel trace
    (spigap trace) tells for sure."""
    b = sa.bus
    out = []
    for (i, j), h in b.handover.items():
        if not h.n:
            continue
        values, counts = h.table()
        scale = max(1, int(np.ceil(h.n / (1 << 16))))
        v = np.repeat(values, np.maximum(counts // scale, 1)).astype(float)
        sp = split(v, "log", 1.0) if len(v) >= 20 else None
        if sp is not None and sp.verdict == "two" and sp.threshold is not None:
            thr, how = float(sp.threshold), "the shorter of two populations of handover gaps"
        else:
            thr, how = QUEUED_MIN_FACTOR * float(h.min) + 2, "within 1.25 x the shortest handover"
        near = int(counts[values <= thr].sum())
        out.append({"from": b.names[i], "to": b.names[j], "handovers": h.n, "likely_queued": near,
                    "share": near / h.n, "threshold_s": thr * sa.tick_s, "rule": how,
                    "note": f"{near} of {h.n} transfers of {b.names[j]} started right after one of {b.names[i]} "
                            f"({how}): likely queued behind it; a kernel trace (spigap trace) tells for sure"})
    return out


def to_dict(sa, *, transfers: bool = False, stalls: dict | None = None, stall_rule=None) -> dict:
    first = next(iter(sa.devices.values()))
    base = device_dict(first, stalls=(stalls or {}).get(first.cfg.cs), stall_rule=stall_rule)
    t = sa.tick_s
    d: dict = {"spigap": __version__, "schema": SCHEMA, "engine": sa.engine, "capture": base["capture"],
               "resolution_s": t}
    cfg = sa.cfg
    d["settings"] = {"clk": cfg.clk, "mosi": cfg.mosi, "miso": cfg.miso, "cs": list(cfg.devices),
                     "sources": {k: v.as_dict() for k, v in sa.sources.items()},
                     "buses": [{"clk": b.clk, "cs": b.cs, "data": b.data} for b in sa.buses]}
    devices = {}
    for name, a in sa.devices.items():
        dd = device_dict(a, stalls=(stalls or {}).get(name), stall_rule=stall_rule, events=getattr(a, "events", None))
        dev = {k: dd[k] for k in DEVICE_KEYS + ("events",) if k in dd}
        dev["interleave"] = sa.interleave[name].to_dict(t)
        devices[name] = dev
    d["devices"] = devices
    bus = sa.bus.figures(t)
    bus["queueing"] = queueing(sa)
    d["bus"] = bus
    d["warnings"] = list(sa.warnings)
    if transfers:
        d["transfers"] = [json_rows(sa.devices[r["cs"]], [r])[0] for r in all_rows(sa)]
    return d


# ------------------------------------------------------------------ text
def render_text(sa, *, transfers: bool = False, stalls: dict | None = None, stall_rule=None,
                rows: list[dict] | None = None) -> str:
    from spigap.output import text as text_out
    from spigap.units import fmt_freq, fmt_time

    d = to_dict(sa, stalls=stalls, stall_rule=stall_rule)
    cap, st, bus = d["capture"], d["settings"], d["bus"]
    rate = f"{fmt_freq(cap['samplerate_hz'])}, " if cap["samplerate_hz"] else ""
    samples = f"{cap['samples']:,} samples = " if cap["samples"] is not None else ""
    lines = [f"capture     {cap['path']}", f"            {cap['format']}, {rate}{samples}{fmt_time(cap['duration_s'])}"]
    pol = {n: ("low" if a.cfg.cs_active_low else "high") for n, a in sa.devices.items()}
    lines.append(f"channels    clk={st['clk']} mosi={st['mosi'] or '–'} miso={st['miso'] or '–'}; "
                 f"{len(sa.devices)} devices on this bus: "
                 + ", ".join(f"{n} (active {pol[n]})" for n in sa.devices))
    lines.append(f"resolution  {fmt_time(d['resolution_s'])} (one sample): every time below is ±1 sample")
    lines.append("")
    share = bus["busy_share"]
    lines.append(f"bus         busy {100 * share:.1f} % ({fmt_time(bus['busy_s'])} of {fmt_time(bus['duration_s'])})"
                 if share is not None else "bus         –")
    lines.append("            " + ", ".join(f"{n} {100 * s:.1f} %" for n, s in bus["device_busy_share"].items()
                                          if s is not None)
                 + f"; idle gaps p50 {fmt_time(bus['idle_gaps']['p50_s'])}")
    for h in bus["handover"]:
        lines.append(f"handover    {h['from']}→{h['to']:6s} n={h['n']:<6d} min {fmt_time(h['min_s']):>9s}  "
                     f"p50 {fmt_time(h['p50_s']):>9s}  p99 {fmt_time(h['p99_s']):>9s}  max {fmt_time(h['max_s']):>9s}")
    for q in bus["queueing"]:
        lines.append(f"queued?     {q['to']} after {q['from']}: {q['likely_queued']} of {q['handovers']} handovers "
                     f"≤ {fmt_time(q['threshold_s'])} ({q['rule']}): likely queued behind it (bus alone; a "
                     "kernel trace tells for sure)")
    for name, dev in d["devices"].items():
        for kind, iv in dev["interleave"].items():
            if not iv["with_other_devices"]:
                continue
            lines.append(f"interleave  {name}: {iv['with_other_devices']} of {iv['gaps']} {kind} gaps hold other "
                         f"devices' transfers; in those, the others' CS time p50 "
                         f"{fmt_time(iv['other_busy']['p50_s'])}, the rest p50 {fmt_time(iv['own']['p50_s'])}")
    ov = bus["cs_overlaps"]
    for o in ov["intervals"][:10]:
        lines.append(f"ERROR       two CS lines asserted at once: {'+'.join(o['devices'])} from "
                     f"{fmt_time(o['start_s'], 7)} to {fmt_time(o['end_s'], 7) if o['end_s'] is not None else 'the end'}")
    if ov["count"] > 10:
        lines.append(f"            … {ov['count'] - 10} more (JSON lists {ov['listed']})")
    sw = bus["sclk_without_cs"]
    if sw["edges"]:
        lines.append(f"SCLK        {sw['edges']} edge(s) with no CS asserted (first at {fmt_time(sw['first_s'], 7)})")
    for name, a in sa.devices.items():
        lines.append("")
        lines.append(f"=== {name} " + "=" * 60)
        st = (stalls or {}).get(name)
        body = text_out.render(a, stalls=st, stall_rule=stall_rule, header=False, events=getattr(a, "events", None))
        lines.append(body.rstrip("\n"))
        cols = sa.columns.get(name)
        if st and cols is not None:
            held = [x for x in st if 0 <= x.transfer < len(cols["others"]) and cols["others"][x.transfer] > 0]
            if held:
                lines.append(f"            {len(held)} of these {len(st)} stalls are gaps that held other devices' "
                             f"transfers ({fmt_time(sum(cols['other_busy'][x.transfer] for x in held) * sa.tick_s)} "
                             "of their CS time): the bus, not this device (docs/shared-bus.md)")
    if transfers:
        lines.append("")
        labelled = any(a.labels is not None for a in sa.devices.values())
        lines.append(f"{'cs':>6s} {'#':>6s} {'start':>12s} {'bits':>5s} {'setup':>9s} {'hold':>9s} "
                     f"{'gap before':>11s} {'kind':14s} {'others in gap':>13s} "
                     + ("device meaning (mosi / miso)" if labelled else "mosi / miso"))
        shown = rows if rows is not None else all_rows(sa)
        for r in shown[:TEXT_ROWS]:
            others = fmt_time(r["other_busy_s"]) if r["other_windows"] else ""
            lines.append(f"{r['cs']:>6s} " + text_out.transfer_line(r, extra=others))
        total = sum(a.n for a in sa.devices.values())
        if total > TEXT_ROWS:
            lines.append(f"       … {total - TEXT_ROWS} more (use --format json --transfers or --format csv)")
    if d["warnings"]:
        lines.append("")
        lines.append("bus warnings")
        lines += [f"  - {w}" for w in d["warnings"]]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ CSV
def csv_header(sa) -> list[str]:
    labelled = any(a.labels is not None for a in sa.devices.values())
    return csvout.COLUMNS + BUS_COLUMNS + (["device"] if labelled else [])


def csv_row(r: dict, wordsize: int, labelled: bool) -> list:
    base = csvout.row(r, wordsize, False)
    return base + [r["cs"], r["handover_from"] or "", csvout._num(r["handover_s"]), csvout._num(r["other_busy_s"]),
                   r["other_windows"]] + ([r.get("device", "")] if labelled else [])


def render_csv(sa, rows=None) -> str:
    buf = io.StringIO()
    write_csv(buf, sa, all_rows(sa) if rows is None else rows)
    return buf.getvalue()


def write_csv(out: TextIO, sa, rows) -> None:
    w = csv.writer(out, lineterminator="\n")
    w.writerow(csv_header(sa))
    labelled = any(a.labels is not None for a in sa.devices.values())
    for r in rows:
        w.writerow(csv_row(r, sa.devices[r["cs"]].cfg.wordsize, labelled))


# ------------------------------------------------------------------ the end
def finish(out: TextIO, fmt: str, sa, spooled: SharedRows | None, *, transfers: bool, stalls: dict,
           stall_rule) -> None:
    """Everything of a shared bus's output (``spooled``: the rows handed over batch by batch)."""
    in_memory = all(sa.columns.get(n) is not None or a.n == 0 for n, a in sa.devices.items())
    try:
        wanted = transfers or fmt in ("csv", "jsonl")
        rows = all_rows(sa) if in_memory and wanted else None
        if fmt == "text":
            head = None
            if transfers and rows is None and spooled is not None:
                head = sorted((r for h in spooled.head.values() for r in h), key=lambda r: r["start_s"])
            out.write(render_text(sa, transfers=transfers, stalls=stalls, stall_rule=stall_rule, rows=head))
            return
        it = rows if rows is not None else (spooled.merged() if spooled is not None else [])
        if fmt == "csv":
            write_csv(out, sa, it)
            return
        d = to_dict(sa, stalls=stalls, stall_rule=stall_rule)
        if fmt == "jsonl":
            for r in it:
                out.write(json.dumps({"record": "transfer", **json_rows(sa.devices[r["cs"]], [r])[0]}) + "\n")
            out.write(json.dumps({"record": "summary", **d}) + "\n")
            return
        if transfers:
            d["transfers"] = [json_rows(sa.devices[r["cs"]], [r])[0] for r in it]
        out.write(json.dumps(d, indent=1) + "\n")
    finally:
        if spooled is not None:
            spooled.close()
