"""The default terminal report: a summary block and one line per gap kind, per device.

``render(result)``: a capture of one device is that device's report
(``render_device``); a shared bus's starts with the capture and the bus (busy time,
handovers, queueing, interleaving, faults), then each device's report without the
capture's lines, then the transfers of every device by start time."""

from __future__ import annotations

from spigap.confidence import messages_in_words, stated
from spigap.core.analysis import DeviceFigures
from spigap.core.result import Result
from spigap.output.jsonout import all_rows, document, to_dict, transfer_rows
from spigap.units import fmt_clocks, fmt_freq, fmt_rate, fmt_time

TEXT_ROWS = 50       # --transfers: the first 50 transfers

ROW_LABEL = {
    "cs_setup": "CS setup (CS→1st SCLK)",
    "cs_hold": "CS hold (last SCLK→CS)",
    "inter_byte": "inter-byte (edge→edge)",
    "inter_transfer": "inter-transfer (CS held)",
    "cs_change": "cs_change (CS high)",
    "context_switch": "context switch (CS high)",
    "idle": "bus idle (no CS)",
    "class_a": "cs_chg|ctx A (shorter)",
    "class_b": "cs_chg|ctx B (longer)",
    "transfer_duration": "transfer (CS active)",
    "transfer_period": "transfer period",
}


def transfer_line(r: dict, extra: str | None = None) -> str:
    """One transfer row of the text table (a row of output/jsonout.transfer_rows): index,
    start, bits, setup, hold, the gap before it and its kind, ``extra`` (a shared bus's
    "others in gap" column) when given, then the device's meaning or the words."""
    mo = " ".join(f"{v:02X}" for v in r["mosi"]) if r["mosi"] is not None else "–"
    mi = " ".join(f"{v:02X}" for v in r["miso"]) if r["miso"] is not None else "–"
    content = r["device"] if "device" in r else f"{mo} / {mi}"
    return (f"{r['index']:>6d} {fmt_time(r['start_s']):>12s} {r['bits']:>5d} "
            f"{fmt_time(r['cs_setup_s']):>9s} {fmt_time(r['cs_hold_s']):>9s} "
            f"{fmt_time(r['gap_before_s']):>11s} {str(r['gap_before_kind'] or ''):14s} "
            + ("" if extra is None else f"{extra:>13s} ")
            + content + (" partial" if r["partial"] else ""))


def render(r: Result, *, transfers: bool = False, rows: list | None = None) -> str:
    """The report of a capture (module docstring). ``rows``: the first transfer rows, when
    the devices do not hold them (core/collect.py: past the in-memory bound)."""
    if r.bus is None:
        return render_device(r.device, transfers=transfers, rows=rows)
    return _render_bus(r, transfers=transfers, rows=rows)


def render_device(a: DeviceFigures, *, transfers: bool = False, limit: int = TEXT_ROWS, rows: list | None = None,
                  header: bool = True) -> str:
    """One device's report. ``rows``: the first transfer rows, when ``a`` does not hold them
    (core/collect.py); ``header``: the capture's lines (a device of a shared bus is printed
    without them)."""
    d = to_dict(a)
    cap, s, st = d["capture"], d["summary"], d["settings"]
    res = d["resolution_s"]
    lines = []
    rate = f"{fmt_freq(cap['samplerate_hz'])}, " if cap["samplerate_hz"] else ""
    samples = f"{cap['samples']:,} samples = " if cap["samples"] is not None else ""
    if header:
        lines.append(f"capture     {cap['path']}")
        lines.append(f"            {cap['format']}, {rate}{samples}{fmt_time(cap['duration_s'])}")
    cs = (f"cs={st['cs']} (active {st['cs_polarity']})" if st["cs"] else
          f"no CS: transfers split after {fmt_time(st['idle_timeout_s'])} of idle SCLK")
    lines.append(f"channels    clk={st['clk']} mosi={st['mosi'] or '–'} miso={st['miso'] or '–'} {cs}")
    lines.append(f"spi         mode {st['mode']} (CPOL={st['cpol']} CPHA={st['cpha']}), "
                 f"{st['wordsize']}-bit words, {st['bitorder'].upper()} first")
    found = [k for k, v in st["sources"].items() if v["from"] == "inferred"
             and not (k in ("mosi", "miso") and st[k] is None)]
    if found:
        lines.append(f"inferred    {', '.join(found)} from the signals (spigap detect: how, and how sure)")
    if header:
        lines.append(f"resolution  {fmt_time(res)} (one sample): every time below is ±1 sample")
    for w in a.setting_warnings:            # a setting the signals contradict: before any number
        lines.append(f"CHECK       {w}")
    lines.append("")
    sclk = (f"SCLK {fmt_freq(s['sclk_hz'])} (T = {fmt_time(s['sclk_period_s'])}, "
            f"{s['samples_per_sclk_period']:.4g} samples)" if s["sclk_hz"] else "SCLK –")
    lines.append(f"transfers   {s['transfers']} ({s['partial_transfers']} partial), {s['words']} words; {sclk}")
    g = s["grouping"]
    if st["cs"]:
        head = messages_in_words(s["messages"], s["transfers_per_message"], g["message_lengths"],
                                 ambiguous=g["ambiguous"], stretches=len(g["segments"]))
        lines.append(f"messages    {head} [{g['method']}, {stated(g['confidence'], g['confidence_words'])}] "
                     f"{g['note']}")
    lines.append(f"rate        {fmt_rate(s['transfer_rate_hz'])} (transfers)"
                 + (f"; idle clocks between words p50 {fmt_clocks(s['idle_clocks_p50'], s['samples_per_sclk_period'])}"
                    if s["idle_clocks_p50"] is not None else ""))
    if cap["truncated"]:
        lines.append(f"PARTIAL     {cap['truncated']}")
    lines.append("")
    head = f"{'gap':26s}{'n':>8s}{'min':>11s}{'p50':>11s}{'mean':>11s}{'p99':>11s}{'max':>11s}{'std':>11s}"
    lines.append(head)
    lines.append("-" * len(head))
    for kind, row in d["gaps"].items():
        label = ROW_LABEL.get(kind, kind)
        if not row["available"]:
            lines.append(f"{label:26s}{'n/a (no CS line)':>30s}")
            continue
        vals = [fmt_time(row[k]) for k in ("min_s", "p50_s", "mean_s", "p99_s", "max_s", "std_s")]
        lines.append(f"{label:26s}{row['n']:>8d}" + "".join(f"{v:>11s}" for v in vals))
    st = d["stalls"]
    if st["count"]:
        lines.append("")
        lines.append(f"stalls      {st['count']} gap(s) far above their kind's median, "
                     f"{fmt_time(st['excess_s'])} lost in all ({st['rule']}); the longest:")
        for x in sorted(st["stalls"], key=lambda x: -x["duration_s"])[:10]:
            lines.append(f"  at {fmt_time(x['at_s'], 7):>12s}  {x['kind']:15s} {fmt_time(x['duration_s']):>10s} "
                         f"(median {fmt_time(x['median_s'])}), transfer #{x['transfer']}")
    if "events" in d:
        ev = d["events"]
        lines.append("")
        lines.append(f"events      chain {' → '.join(ev['chain'])}")
        rows = ev["latency"] + ([ev["chain_total"]] if ev["chain_total"] else [])
        for r in rows:
            lines.append(f"  {r['from'] + ' → ' + r['to']:28s} n={r['n']:<7d} p50 {fmt_time(r['p50_s']):>10s}  "
                         f"p99 {fmt_time(r['p99_s']):>10s}  max {fmt_time(r['max_s']):>10s}  "
                         f"missing {r['missing']}")
        for c in ev["channels"]:
            per = c["period"]
            lines.append(f"  {c['channel'] + ':' + c['edge']:28s} {c['events']} events "
                         f"({fmt_rate(c['events_per_s'])}), period p50 {fmt_time(per['p50_s'])}, "
                         f"high p50 {fmt_time(c['high']['p50_s'])}, low p50 {fmt_time(c['low']['p50_s'])}")
    if transfers:
        lines.append("")
        what = f"{a.device} meaning" if a.labels is not None else "mosi / miso"
        lines.append(f"{'#':>6s} {'start':>12s} {'bits':>5s} {'setup':>9s} {'hold':>9s} "
                     f"{'gap before':>11s} {'kind':14s} {what}")
        for r in (rows if rows is not None else transfer_rows(a.kept()))[:limit]:
            lines.append(transfer_line(r))
    # --pins: timing at the pins (docs/pin-timing.md), after the table
    pins = ["", a.pins.text().rstrip("\n")] if a.pins is not None else []
    return _end(lines, a.n if transfers else 0, limit, "warnings", d["warnings"], between=pins)


def _end(lines: list[str], n: int, limit: int, title: str, warnings: list[str],
         between: list[str] | None = None) -> str:
    """The report's end: how many transfers the table left out (of ``n``), ``between``,
    the warnings."""
    if n > limit:
        lines.append(f"       … {n - limit} more (use --format json --transfers or --format csv)")
    lines += between or []
    if warnings:
        lines.append("")
        lines.append(title)
        lines += [f"  - {w}" for w in warnings]
    return "\n".join(lines) + "\n"


def _render_bus(r: Result, *, transfers: bool, rows: list | None) -> str:
    d = document(r)
    cap, st, bus = d["capture"], d["settings"], d["bus"]
    rate = f"{fmt_freq(cap['samplerate_hz'])}, " if cap["samplerate_hz"] else ""
    samples = f"{cap['samples']:,} samples = " if cap["samples"] is not None else ""
    lines = [f"capture     {cap['path']}", f"            {cap['format']}, {rate}{samples}{fmt_time(cap['duration_s'])}"]
    pol = {n: ("low" if a.cfg.cs_active_low else "high") for n, a in r.devices.items()}
    lines.append(f"channels    clk={st['clk']} mosi={st['mosi'] or '–'} miso={st['miso'] or '–'}; "
                 f"{len(r.devices)} devices on this bus: "
                 + ", ".join(f"{n} (active {pol[n]})" for n in r.devices))
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
    for name, a in r.devices.items():
        lines.append("")
        lines.append(f"=== {name} " + "=" * 60)
        lines.append(render_device(a, header=False).rstrip("\n"))
        st = a.stalls.stalls
        cols = a.bus.columns
        if st and cols is not None:
            held = [x for x in st if 0 <= x.transfer < len(cols["others"]) and cols["others"][x.transfer] > 0]
            if held:
                lines.append(f"            {len(held)} of these {len(st)} stalls are gaps that held other devices' "
                             f"transfers ({fmt_time(sum(cols['other_busy'][x.transfer] for x in held) * r.tick_s)} "
                             "of their CS time): the bus, not this device (docs/shared-bus.md)")
    if transfers:
        lines.append("")
        labelled = any(a.labels is not None for a in r.devices.values())
        lines.append(f"{'cs':>6s} {'#':>6s} {'start':>12s} {'bits':>5s} {'setup':>9s} {'hold':>9s} "
                     f"{'gap before':>11s} {'kind':14s} {'others in gap':>13s} "
                     + ("device meaning (mosi / miso)" if labelled else "mosi / miso"))
        shown = rows if rows is not None else all_rows(r)
        for x in shown[:TEXT_ROWS]:
            others = fmt_time(x["other_busy_s"]) if x["other_windows"] else ""
            lines.append(f"{x['cs']:>6s} " + transfer_line(x, extra=others))
    total = sum(a.n for a in r.devices.values()) if transfers else 0
    return _end(lines, total, TEXT_ROWS, "bus warnings", d["warnings"])
