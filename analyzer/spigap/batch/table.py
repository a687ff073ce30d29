"""One row per capture: the flat columns, metrics, and the text/CSV/JSON renderings.

A *result* is what ``worker.analyze_job`` returns: path, labels, status,
error and ``analysis`` (the ``output.jsonout.to_dict`` summary, or None).
"""

from __future__ import annotations

import csv
import io
import json
import os
import re

from spigap.batch.worker import ERROR, OK, TRUNCATED, WARN, first_warning, status_of
from spigap.confidence import READINGS, stated
from spigap.errors import printable
from spigap.outfile import csv_cell
from spigap.units import fmt_freq, fmt_rate, fmt_time, round_rate, round_time

GAP_KINDS = ("cs_setup", "cs_hold", "inter_byte", "inter_transfer", "cs_change", "context_switch",
             "transfer_duration", "transfer_period", "idle")
GAP_STATS = ("n", "min", "p50", "mean", "p99", "max", "std")
# numeric scalars of to_dict()["summary"] and elsewhere, by metric name
SUMMARY_METRICS = ("transfers", "partial_transfers", "words", "messages", "transfers_per_message",
                   "sclk_hz", "sclk_period_s", "samples_per_sclk_period", "sclk_min_high_s",
                   "sclk_min_low_s", "idle_clocks_p50", "transfer_rate_hz", "sclk_edges_outside_cs")
OTHER_METRICS = ("warnings", "duration_s", "samplerate_hz", "resolution_s", "elapsed_s", "stalls",
                 "stall_excess_s")
FIXED_COLUMNS = ["status", "transfers", "transfer_rate_hz", "sclk_hz",
                 *[f"{k}_{s}_s" for k in GAP_KINDS for s in ("p50", "p99")], "transfers_per_message",
                 "grouping_confidence", "grouping_confidence_words", "warnings", "first_warning", "error"]


def metric_names() -> list[str]:
    return [*SUMMARY_METRICS, *OTHER_METRICS,
            *[f"{k}.{s}" + ("" if s == "n" else "_s") for k in GAP_KINDS for s in GAP_STATS]]


def parse_metric(name: str) -> str:
    """Canonical metric name: 'context_switch.p99_s' from 'context_switch.p99',
    'context_switch_p99_s' (the CSV column) or itself. ValueError if unknown."""
    n = name.strip()
    if n in SUMMARY_METRICS or n in OTHER_METRICS:
        return n
    m = re.fullmatch(r"(\w+?)[._](n|min|p50|mean|p99|max|std)(?:_s)?", n)
    if m and m.group(1) in GAP_KINDS:
        stat = m.group(2)
        return f"{m.group(1)}.{stat}" + ("" if stat == "n" else "_s")
    raise ValueError(f"unknown metric {name!r}")


def metric_value(res: dict, metric: str):
    """The value of a canonical metric for one result (None if not available)."""
    if metric == "elapsed_s":
        return res.get("elapsed_s")
    d = res.get("analysis")
    if not d:
        return None
    if metric in SUMMARY_METRICS:
        return d["summary"].get(metric)
    if metric == "warnings":
        return len(d["warnings"])
    if metric == "resolution_s":
        return d.get("resolution_s")
    if metric in ("stalls", "stall_excess_s"):
        st = d.get("stalls") or {}
        return st.get("count" if metric == "stalls" else "excess_s")
    if metric in ("duration_s", "samplerate_hz"):
        return d["capture"].get(metric)
    kind, stat = metric.split(".", 1)
    g = d["gaps"].get(kind)
    if g is None or not g.get("available", True):
        return None
    return g.get(stat)


def per_device(results: list[dict]) -> list[dict]:
    """A capture of a shared bus (worker: ``devices``) as one row per device, labelled ``cs``."""
    out = []
    for r in results:
        docs = r.get("devices")
        if not docs:
            out.append(r)
            continue
        for name, d in docs.items():
            row = {k: v for k, v in r.items() if k != "devices"}
            row["labels"] = {**r["labels"], "cs": name}
            row["devices_of"] = len(docs)          # a shared bus's row: one of its devices
            row["analysis"] = d
            if row["status"] in (OK, WARN):
                row["status"] = status_of(d)        # each device's own warnings
            out.append(row)
    return out


def label_columns(results) -> list[str]:
    cols: list[str] = []
    for r in results:
        for k in r["labels"]:
            if k not in cols:
                cols.append(k)
    return cols


def flatten(res: dict, labels: list[str]) -> dict:
    """The CSV row of one result."""
    row = {"path": res["path"]}
    for k in labels:
        row[k] = res["labels"].get(k)
    row["status"] = res["status"]
    d = res.get("analysis")
    row["transfers"] = d["summary"]["transfers"] if d else None
    row["transfer_rate_hz"] = d["summary"]["transfer_rate_hz"] if d else None
    row["sclk_hz"] = d["summary"]["sclk_hz"] if d else None
    for k in GAP_KINDS:
        for s in ("p50", "p99"):
            row[f"{k}_{s}_s"] = metric_value(res, f"{k}.{s}_s")
    g = d["summary"].get("grouping") if d else None
    row["transfers_per_message"] = d["summary"].get("transfers_per_message") if d else None
    row["grouping_confidence"] = g.get("confidence") if g else None
    row["grouping_confidence_words"] = g.get("confidence_words") if g else None
    row["warnings"] = len(d["warnings"]) if d else None
    row["first_warning"] = first_warning(d)
    row["error"] = res.get("error")
    return row


def columns(results) -> list[str]:
    labels = [k for k in label_columns(results) if k not in ("path", *FIXED_COLUMNS)]
    return ["path", *labels, *FIXED_COLUMNS]


def _csv_cell(v, column: str = "", resolution: float | None = None):
    """Seconds rounded to the capture's resolution, Hz and rates to 7 significant
    digits (units.round_time, round_rate); other numbers as they are."""
    if v is None:
        return ""
    if isinstance(v, float):      # numpy floats too: plain repr, no float noise
        v = float(v)
        if column.endswith("_s"):
            v = round_time(v, resolution)
        elif column.endswith("_hz"):
            v = round_rate(v)
        return repr(v)
    return csv_cell(v)            # paths, labels, errors: never a spreadsheet formula


def render_csv(results) -> str:
    cols = columns(results)
    labels = cols[1:len(cols) - len(FIXED_COLUMNS)]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([csv_cell(c) for c in cols])
    for r in results:
        row = flatten(r, labels)
        res = (r.get("analysis") or {}).get("resolution_s")
        w.writerow([_csv_cell(row[c], c, res) for c in cols])
    return buf.getvalue()


def counts(results) -> dict:
    c = {OK: 0, WARN: 0, TRUNCATED: 0, ERROR: 0}
    seen: dict = {}
    for r in results:                     # a shared bus's devices are one capture: its worst status
        if r["index"] not in seen or r["status"] == WARN and seen[r["index"]]["status"] == OK:
            seen[r["index"]] = r
    for r in seen.values():
        c[r["status"]] += 1
    return {"captures": len(seen), "ok": c[OK], "warn": c[WARN], "truncated": c[TRUNCATED], "failed": c[ERROR]}


def summary_line(results) -> str:
    c = counts(results)
    text = f"{c['captures']} capture{'s' if c['captures'] != 1 else ''}: {c['ok']} ok"
    if c["warn"]:
        text += f", {c['warn']} with warnings"
    if c["truncated"]:
        text += f", {c['truncated']} truncated (partial results)"
    if c["failed"]:
        text += f", {c['failed']} failed"
    if c["truncated"] or c["failed"]:
        text += " -- exit status 2"
    return text


def to_json(results, *, matrices=(), extra: dict | None = None) -> dict:
    from spigap import __version__

    cols = columns(results)
    labels = cols[1:len(cols) - len(FIXED_COLUMNS)]
    return {
        "spigap": __version__,
        "schema": 1,
        "kind": "batch",
        "summary": counts(results),
        **(extra or {}),
        "columns": cols,
        "captures": [{**flatten(r, labels), **({"files": r["files"]} if r.get("files") else {}),
                      "labels": r["labels"], "elapsed_s": r.get("elapsed_s"),
                      "analysis": r.get("analysis")} for r in results],
        "matrices": [m.to_dict() for m in matrices],
    }


def render_json(results, *, matrices=(), extra: dict | None = None) -> str:
    return json.dumps(to_json(results, matrices=matrices, extra=extra), indent=1) + "\n"


def fmt_metric(metric: str, v) -> str:
    if v is None:
        return "–"
    if metric.endswith("rate_hz"):
        return fmt_rate(v)
    if metric.endswith("_hz"):
        return fmt_freq(v)
    if metric.endswith("_s"):
        return fmt_time(v)
    if isinstance(v, int) or float(v).is_integer():
        return f"{int(v)}"
    return f"{v:.4g}"


TEXT_COLUMNS = [  # (header, second header line, width, metric)
    ("transfers", "", 9, "transfers"), ("rate", "", 8, "transfer_rate_hz"), ("SCLK", "", 9, "sclk_hz"),
    ("setup", "p50", 8, "cs_setup.p50_s"), ("hold", "p50", 8, "cs_hold.p50_s"),
    ("byte", "p50", 8, "inter_byte.p50_s"), ("cs_chg", "p50", 8, "cs_change.p50_s"),
    ("ctxsw", "p50", 8, "context_switch.p50_s"), ("ctxsw", "p99", 8, "context_switch.p99_s"),
    ("warn", "", 4, "warnings"),
]
TEXT_WIDTH = 120       # the table fits a 120-column terminal; the full paths are in CSV and JSON


def shorten(name: str, width: int) -> str:
    """``name`` in at most ``width`` characters: the file name whole with as much of
    its folder as fits before it, or, for a file name too long itself, its start
    and its end (where the parts that tell captures apart usually are) around an
    ellipsis."""
    if len(name) <= width:
        return name
    base = os.path.basename(name)
    if len(base) < width:
        return "…" + name[len(name) - (width - 1):]
    tail = (width - 1) // 2
    return base[:width - 1 - tail] + "…" + base[len(base) - tail:]


def shorten_files(files: list[str], width: int) -> str:
    """An acquisition saved as several files in at most ``width`` characters: joined with
    " + ", else what the names share around the parts that differ
    (``tek0000CH{1,2,3,4}.isf``), else that shortened."""
    joined = " + ".join(files)
    if len(joined) <= width:
        return joined
    head = os.path.commonprefix(files)
    tail = os.path.commonprefix([f[len(head):][::-1] for f in files])[::-1]
    middles = [f[len(head):len(f) - len(tail)] for f in files]
    return shorten(head + "{" + ",".join(middles) + "}" + tail, width)


def common_dir(paths) -> str:
    dirs = [os.path.dirname(p) for p in paths]
    if not dirs:
        return ""
    try:
        d = os.path.commonpath(dirs)
    except ValueError:  # absolute and relative mixed
        return ""
    return d


def render_text(results) -> str:
    lines = []
    base = common_dir([p for r in results for p in r.get("files") or [r["path"]]])

    def rel(p: str) -> str:
        return os.path.relpath(p, base) if base else os.path.normpath(p)

    files = [[rel(p) for p in r["files"]] if r.get("files") else None for r in results]
    names = [printable((" + ".join(f) if f else rel(r["path"]))
                       + (f" [{r['labels']['cs']}]" if "cs" in r["labels"] and r.get("devices_of") else ""))
             for f, r in zip(files, results)]
    if base:
        lines.append(f"captures in {printable(base)}{os.sep}")
    fixed = 2 + 9 + sum(1 + cw for _, _, cw, _ in TEXT_COLUMNS)
    w = max(12, min(max([len("capture"), *map(len, names)]), TEXT_WIDTH - fixed))
    short = [printable(shorten_files(f, w)) if f else shorten(n, w) for f, n in zip(files, names)]
    head = f"{'capture':<{w}}  {'status':<9}" + "".join(f" {h:>{cw}}" for h, _, cw, _ in TEXT_COLUMNS)
    lines.append(head)
    lines.append((" " * (w + 11) + "".join(f" {h2:>{cw}}" for _, h2, cw, _ in TEXT_COLUMNS)).rstrip())
    lines.append("-" * len(head))
    for name, r in zip(short, results):
        cells = "".join(f" {fmt_metric(m, metric_value(r, m)) if r.get('analysis') else '':>{cw}}"
                        for _, _, cw, m in TEXT_COLUMNS)
        lines.append(f"{name:<{w}}  {r['status']:<9}{cells}".rstrip())
    # a grouping the timing cannot settle (the cs_chg/ctxsw columns rest on one of its readings), in
    # the words every output uses (spigap/confidence.py); the others' words are in CSV and JSON
    unsure = [(name, r["analysis"]["summary"]) for name, r in zip(short, results)
              if r.get("analysis") and (r["analysis"]["summary"].get("grouping") or {}).get("confidence_words")
              in READINGS]
    if unsure:
        lines.append("")
        for name, sm in unsure:
            g = sm["grouping"]
            per = (f"{sm['transfers_per_message']} transfer(s) per message" if sm.get("transfers_per_message")
                   else "messages ambiguous" if g.get("ambiguous") else "messages of changing length")
            lines.append(f"grouping: {name}: {per}, {stated(g['confidence'], g['confidence_words'])}")
    problems = [(name, r) for name, r in zip(short, results) if r["status"] != OK]
    if problems:
        lines.append("")
        for name, r in problems:
            if r["status"] == WARN:      # the warning that explains the most (spigap/findings.py)
                lines.append(f"warn: {name}: {printable(str(first_warning(r.get('analysis'))))}")
            else:
                lines.append(f"{r['status']}: {printable(str(r['error']))}")
    lines.append("")
    lines.append(summary_line(results))
    return "\n".join(lines) + "\n"
