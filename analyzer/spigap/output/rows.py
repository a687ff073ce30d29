"""``spigap analyze`` output written as it is produced.

A capture too long to keep (core/collect.py) hands its transfer rows over
batch by batch; ``Output`` writes them at once (CSV, JSON lines), spools them
to a temporary file (``--format json --transfers``: the rows come last in the
document, after figures known only at the end) or keeps the first few
(``--format text --transfers``). A capture that fits gives all its rows at
the end, in the same formats, so both outputs are the same text.

``--format jsonl``: one JSON object per line, first one per transfer
(``"record": "transfer"`` and the keys of the JSON ``transfers`` entries),
then one ``"record": "summary"`` with the whole JSON document (without
``transfers``). README, "JSON lines".
"""

from __future__ import annotations

import csv
import json
import tempfile
from typing import Any, TextIO

from spigap.output import csvout
from spigap.output.jsonout import json_rows, to_dict, transfer_rows

TEXT_ROWS = 50       # --format text --transfers: the first 50 transfers


class Output:
    def __init__(self, fmt: str, out: TextIO, *, transfers: bool):
        self.fmt, self.out, self.transfers = fmt, out, transfers
        self.head: list[dict] = []
        self._csv: Any = None
        self._spool: TextIO | None = None
        self._first = True
        self._shared: Any = None                 # a shared bus's rows (output/shared.py)

    @property
    def streams(self) -> bool:
        """Whether rows are wanted at all."""
        return self.fmt in ("csv", "jsonl") or self.transfers

    # ------------------------------------------------------------ rows
    def rows(self, a, k0: int = 0, k1: int | None = None, index0: int = 0, message0: int = 0,
             bus: dict | None = None) -> bool:
        """Transfers ``k0``..``k1`` of ``a`` (one batch's analysis, whose transfer 0 is the
        capture's transfer ``index0`` in its message ``message0``: core/collect.py's row
        sink); False when no more are wanted. ``bus``: a device of a shared bus, its bus
        columns and the bus's devices (core/shared.py): the rows go to output/shared.py's merge."""
        if bus is not None:
            from spigap.output import shared

            if self._shared is None:
                self._shared = shared.SharedRows(self.fmt, self.transfers)
            return self._shared.add(a, k0, k1 if k1 is not None else a.n, index0, message0, bus["columns"],
                                    bus["devices"])
        rows = transfer_rows(a, k0, index0, message0, stop=k1)
        if self.fmt == "csv":
            if self._csv is None:
                self._csv = csv.writer(self.out, lineterminator="\n")
                self._csv.writerow(csvout.header(a))
            ws, labelled = a.cfg.wordsize, a.labels is not None
            res = getattr(a, "tick_s", None)          # times rounded to the capture's resolution
            self._csv.writerows(csvout.row(r, ws, labelled, res) for r in rows)
        elif self.fmt == "jsonl":
            self.out.write("".join(json.dumps({"record": "transfer", **r}) + "\n" for r in json_rows(a, rows)))
        elif self.fmt == "json":
            if self._spool is None:
                self._spool = tempfile.TemporaryFile("w+")
            for r in json_rows(a, rows):
                if not self._first:
                    self._spool.write(",\n")
                self._first = False
                self._spool.write("\n".join("  " + line for line in json.dumps(r, indent=1).splitlines()))
        else:
            self.head += rows[:TEXT_ROWS - len(self.head)]
            return len(self.head) < TEXT_ROWS
        return True

    # ------------------------------------------------------------ the end
    def finish(self, a, *, stalls, stall_rule, events) -> None:
        """Everything not written yet. ``a``: the Analysis (all its rows go now) or the
        BoundedAnalysis (its rows went to ``rows``); a shared bus's SharedAnalysis
        (``stalls``: per device)."""
        if getattr(a, "shared", False):
            from spigap.output import shared

            shared.finish(self.out, self.fmt, a, self._shared, transfers=self.transfers, stalls=stalls,
                          stall_rule=stall_rule)
            return
        bounded = getattr(a, "bounded", False)
        if not bounded and self.fmt != "jsonl":
            self.out.write(render(a, self.fmt, transfers=self.transfers, stalls=stalls, stall_rule=stall_rule,
                                  events=events))
            return
        if not bounded:
            self.rows(a)
        if self.fmt == "csv":
            if self._csv is None:       # no transfer at all: the header alone
                csv.writer(self.out, lineterminator="\n").writerow(csvout.header(a))
            return
        d = to_dict(a, stalls=stalls, stall_rule=stall_rule, events=events)
        if self.fmt == "jsonl":
            self.out.write(json.dumps({"record": "summary", **d}) + "\n")
        elif self.fmt == "json":
            text = json.dumps(d, indent=1)
            if self.transfers:
                # json.dumps(d with "transfers" last, indent=1), the rows spliced in from the spool
                self.out.write(text[:-2] + ',\n "transfers": ')
                if self._spool is None:
                    self.out.write("[]")
                else:
                    self.out.write("[\n")
                    self._spool.seek(0)
                    while chunk := self._spool.read(1 << 20):
                        self.out.write(chunk)
                    self._spool.close()
                    self.out.write("\n ]")
                self.out.write("\n}\n")
            else:
                self.out.write(text + "\n")
        else:
            from spigap.output import text as text_out

            self.out.write(text_out.render(a, transfers=self.transfers, stalls=stalls, stall_rule=stall_rule,
                                           events=events, rows=self.head))


def render(a, fmt: str, *, transfers: bool, stalls, stall_rule, events) -> str:
    """The whole output of an Analysis that holds every transfer (text, json, csv)."""
    if fmt == "json":
        return json.dumps(to_dict(a, transfers=transfers, stalls=stalls, stall_rule=stall_rule, events=events),
                          indent=1) + "\n"
    if fmt == "csv":
        return csvout.render(a)
    from spigap.output import text as text_out

    return text_out.render(a, transfers=transfers, stalls=stalls, stall_rule=stall_rule, events=events)
