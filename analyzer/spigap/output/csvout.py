"""``--format csv``: one row per transfer (CS window), times in seconds."""

from __future__ import annotations

import csv
import io

from spigap.core.analysis import Analysis
from spigap.output.jsonout import transfer_rows
from spigap.outfile import csv_cell
from spigap.units import round_time

COLUMNS = ["index", "start_s", "end_s", "partial", "bits", "words", "mosi_hex", "miso_hex",
           "cs_setup_s", "cs_hold_s", "inter_byte_max_s", "inter_byte_s", "inter_transfer_s",
           "gap_before_s", "gap_before_kind", "message"]


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


def render(a: Analysis) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(header(a))
    for r in transfer_rows(a):
        w.writerow(row(r, a.cfg.wordsize, a.labels is not None, a.tick_s))
    return buf.getvalue()
