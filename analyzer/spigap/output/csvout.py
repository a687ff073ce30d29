"""``--format csv``: one row per transfer (CS window), times in seconds; on a shared bus
every device's, by start time, with the device's CS line and bus columns (``BUS_COLUMNS``)."""

from __future__ import annotations

import csv
import io
from typing import TextIO

from spigap.core.result import Result
from spigap.output.jsonout import all_rows
from spigap.outfile import csv_cell
from spigap.units import round_time

COLUMNS = ["index", "start_s", "end_s", "partial", "bits", "words", "mosi_hex", "miso_hex",
           "cs_setup_s", "cs_hold_s", "inter_byte_max_s", "inter_byte_s", "inter_transfer_s",
           "gap_before_s", "gap_before_kind", "message"]
BUS_COLUMNS = ["cs", "handover_from", "handover_s", "other_busy_s", "other_windows"]


def _hex(words, wordsize):
    if words is None:
        return ""
    width = (wordsize + 3) // 4
    return " ".join(f"{v:0{width}X}" for v in words)


def _num(x, res=None):
    """A time in seconds, rounded to the capture's resolution (units.round_time)."""
    return "" if x is None else repr(round_time(float(x), res))


# Only the device column holds text (labels decoded from the capture's data); the others
# are numbers, hex words and spigap's own gap-kind words: they pass csv_cell as they are,
# and the per-transfer rows are the hot path.
def header(a) -> list[str]:
    """One device's columns (``a``: its analysis)."""
    return COLUMNS + (["device"] if a.labels is not None else [])


def row(r: dict, wordsize: int, labelled: bool, res: float | None = None) -> list:
    """The CSV row of one transfer row (jsonout.transfer_rows); times rounded to ``res``."""
    return ([r["index"], _num(r["start_s"], res), _num(r["end_s"], res), int(r["partial"]), r["bits"],
             len(r["mosi"] if r["mosi"] is not None else r["miso"] or []),
             _hex(r["mosi"], wordsize), _hex(r["miso"], wordsize), _num(r["cs_setup_s"], res),
             _num(r["cs_hold_s"], res), _num(max(r["inter_byte_s"]) if r["inter_byte_s"] else None, res),
             ";".join(_num(g, res) for g in r["inter_byte_s"]),
             ";".join(_num(g, res) for g in r["inter_transfer_s"]),
             _num(r["gap_before_s"], res), r["gap_before_kind"] or "", r["message"]]
            + ([csv_cell(r["device"])] if labelled else []))


def bus_header(r: Result) -> list[str]:
    """A shared bus's columns."""
    labelled = any(a.labels is not None for a in r.devices.values())
    return COLUMNS + BUS_COLUMNS + (["device"] if labelled else [])


def bus_row(x: dict, wordsize: int, labelled: bool) -> list:
    """The CSV row of one of a shared bus's transfer rows (jsonout.bus_rows)."""
    base = row(x, wordsize, False)
    return base + [x["cs"], x["handover_from"] or "", _num(x["handover_s"]), _num(x["other_busy_s"]),
                   x["other_windows"]] + ([x.get("device", "")] if labelled else [])


def write(out: TextIO, r: Result, rows=None) -> None:
    """Every transfer of the capture (``rows``: a shared bus's rows merged by start time,
    when the devices do not hold them)."""
    w = csv.writer(out, lineterminator="\n")
    if r.bus is None:
        a = r.device
        w.writerow(header(a))
        ws, labelled = a.cfg.wordsize, a.labels is not None
        w.writerows(row(x, ws, labelled, a.tick_s) for x in (all_rows(r) if rows is None else rows))
        return
    w.writerow(bus_header(r))
    labelled = any(a.labels is not None for a in r.devices.values())
    for x in all_rows(r) if rows is None else rows:
        w.writerow(bus_row(x, r.devices[x["cs"]].cfg.wordsize, labelled))


def render(r: Result) -> str:
    buf = io.StringIO()
    write(buf, r)
    return buf.getvalue()
