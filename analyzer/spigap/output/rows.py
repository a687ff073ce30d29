"""``spigap analyze`` output written as it is produced.

A capture too long to keep (core/collect.py) hands its transfer rows over
batch by batch; ``Output`` writes them at once (CSV, JSON lines), spools them
to a temporary file (``--format json --transfers``: the rows come last in the
document, after figures known only at the end) or keeps the first few
(``--format text --transfers``). A capture that fits gives all its rows at
the end, in the same formats, so both outputs are the same text.

A shared bus's rows (each device's, with its bus columns) are spooled per device
(each device's rows come in time order) and merged by start time at the end, so the
output is the same text whether they came batch by batch or at the end.

``--format jsonl``: one JSON object per line, first one per transfer
(``"record": "transfer"`` and the keys of the JSON ``transfers`` entries),
then one ``"record": "summary"`` with the whole JSON document (without
``transfers``). README, "JSON lines".
"""

from __future__ import annotations

import csv
import heapq
import json
import tempfile
from typing import Any, TextIO

from spigap.core.result import Result
from spigap.output import csvout
from spigap.output.jsonout import all_rows, bus_rows, document, json_rows, transfer_rows

TEXT_ROWS = 50       # --format text --transfers: the first 50 transfers


class Output:
    def __init__(self, fmt: str, out: TextIO, *, transfers: bool):
        self.fmt, self.out, self.transfers = fmt, out, transfers
        self.head: list[dict] = []
        self._csv: Any = None
        self._spool: TextIO | None = None
        self._first = True
        self._bus: BusRows | None = None       # a shared bus's rows, per device

    @property
    def streams(self) -> bool:
        """Whether rows are wanted at all."""
        return self.fmt in ("csv", "jsonl") or self.transfers

    # ------------------------------------------------------------ rows
    def rows(self, a, k0: int = 0, k1: int | None = None, index0: int = 0, message0: int = 0) -> bool:
        """Transfers ``k0``..``k1`` of ``a`` (one batch's analysis of a device, whose transfer
        0 is the capture's transfer ``index0`` in its message ``message0``: core/collect.py's
        row sink); False when no more are wanted. A device of a shared bus (``a.bus``: its
        bus columns) goes to the merge of every device's rows."""
        k1 = a.n if k1 is None else k1
        if a.bus is not None:
            if self._bus is None:
                self._bus = BusRows(self.fmt)
            return self._bus.add(a, k0, k1, index0, message0)
        rows = transfer_rows(a, k0, index0, message0, stop=k1)
        if self.fmt == "csv":
            if self._csv is None:
                self._csv = csv.writer(self.out, lineterminator="\n")
                self._csv.writerow(csvout.header(a))
            ws, labelled = a.cfg.wordsize, a.labels is not None
            self._csv.writerows(csvout.row(r, ws, labelled, a.tick_s) for r in rows)
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
    def finish(self, r: Result) -> None:
        """Everything not written yet: the rows the devices hold (a capture that fits: all
        of them go now), then the figures known at the end."""
        if r.bus is not None:
            self._finish_bus(r)
            return
        a = r.device
        if a.in_memory and self.fmt != "jsonl":
            self.out.write(render(r, self.fmt, transfers=self.transfers))
            return
        if a.in_memory:
            self.rows(a)
        if self.fmt == "csv":
            if self._csv is None:       # no transfer at all: the header alone
                csv.writer(self.out, lineterminator="\n").writerow(csvout.header(a))
            return
        d = document(r)
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

            self.out.write(text_out.render(r, transfers=self.transfers, rows=self.head))

    def _finish_bus(self, r: Result) -> None:
        """A shared bus: its rows (held by the devices, or spooled as they were measured)
        merged by start time, then the figures."""
        spooled = self._bus
        in_memory = all((a.bus is not None and a.bus.columns is not None) or a.n == 0 for a in r.devices.values())
        try:
            wanted = self.transfers or self.fmt in ("csv", "jsonl")
            rows = all_rows(r) if in_memory and wanted else None
            if self.fmt == "text":
                from spigap.output import text as text_out

                head = None
                if self.transfers and rows is None and spooled is not None:
                    head = sorted((x for h in spooled.head.values() for x in h), key=lambda x: x["start_s"])
                self.out.write(text_out.render(r, transfers=self.transfers, rows=head))
                return
            it = rows if rows is not None else (spooled.merged() if spooled is not None else [])
            if self.fmt == "csv":
                csvout.write(self.out, r, it)
                return
            if self.fmt == "jsonl":
                d = document(r)
                for x in it:
                    self.out.write(json.dumps({"record": "transfer", **json_rows(r.devices[x["cs"]], [x])[0]}) + "\n")
                self.out.write(json.dumps({"record": "summary", **d}) + "\n")
                return
            d = document(r, transfers=self.transfers, rows=it)
            self.out.write(json.dumps(d, indent=1) + "\n")
        finally:
            if spooled is not None:
                spooled.close()


class BusRows:
    """Every device's transfer rows of a shared bus, merged by start time: rows handed over
    batch by batch (a capture past the in-memory bound) are spooled per device (each
    device's rows come in time order) and merged at the end."""

    def __init__(self, fmt: str):
        self.fmt = fmt
        self.spools: dict[str, Any] = {}
        self.head: dict[str, list[dict]] = {}

    def add(self, a, k0: int, k1: int, index0: int, message0: int) -> bool:
        rows = bus_rows(a, transfer_rows(a, k0, index0, message0, stop=k1), k0)
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


def render(r: Result, fmt: str, *, transfers: bool) -> str:
    """The whole output of a capture whose devices hold every transfer (text, json, csv)."""
    if fmt == "json":
        return json.dumps(document(r, transfers=transfers), indent=1) + "\n"
    if fmt == "csv":
        return csvout.render(r)
    from spigap.output import text as text_out

    return text_out.render(r, transfers=transfers)
