"""The default terminal report: a summary block and one line per gap kind."""

from __future__ import annotations

from spigap.core.analysis import Analysis
from spigap.output.jsonout import to_dict
from spigap.units import fmt_freq, fmt_rate, fmt_time

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


def _clocks(value: float, samples_per_period: float | None) -> str:
    """Idle clocks to the resolution one sample gives them (1 / samples per SCLK period)."""
    if not samples_per_period:
        return f"{value:.2f}"
    res = 1.0 / samples_per_period
    digits = 2 if res < 0.05 else 1 if res < 0.5 else 0
    return f"{value:.{digits}f} (±{res:.2g}, one sample)"


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


def render(a: Analysis, *, transfers: bool = False, limit: int = 50, stalls=None, stall_rule=None,
           events=None, rows: list | None = None, header: bool = True) -> str:
    """``rows``: the first transfer rows, when ``a`` does not hold them (core/collect.py);
    ``header``: the capture's lines (a device of a shared bus is printed without them)."""
    d = to_dict(a, stalls=stalls, stall_rule=stall_rule, events=events)
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
        if g["ambiguous"]:
            head = "ambiguous"
        elif len(g["segments"]) > 1:
            head = f"{s['messages']} in {len(g['segments'])} stretches"
        elif s["transfers_per_message"] is not None:
            head = f"{s['messages']} × {s['transfers_per_message']} transfer(s)"
        else:
            head = f"{s['messages']} of {'+'.join(map(str, g['message_lengths']))} transfers"
        lines.append(f"messages    {head} [{g['method']}, confidence {g['confidence']:.2f}] {g['note']}")
    lines.append(f"rate        {fmt_rate(s['transfer_rate_hz'])} (transfers)"
                 + (f"; idle clocks between words p50 {_clocks(s['idle_clocks_p50'], s['samples_per_sclk_period'])}"
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
        from spigap.output.jsonout import transfer_rows

        for r in (rows if rows is not None else transfer_rows(a))[:limit]:
            lines.append(transfer_line(r))
        if a.n > limit:
            lines.append(f"       … {a.n - limit} more (use --format json --transfers or --format csv)")
    if getattr(a, "pins", None) is not None:         # --pins: timing at the pins (docs/pin-timing.md)
        lines.append("")
        lines.append(a.pins.text().rstrip("\n"))
    if d["warnings"]:
        lines.append("")
        lines.append("warnings")
        lines += [f"  - {w}" for w in d["warnings"]]
    return "\n".join(lines) + "\n"
