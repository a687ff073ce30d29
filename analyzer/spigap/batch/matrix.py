"""Captures grouped into a matrix by labels, one metric per cell.

Labels come from the manifest and/or the file names:

* ``--pattern '{kernel}-{load}-{sclk}.sr'``: ``{name}`` is a field, ``{}`` and
  ``*`` match anything; matched against the file name (against the last path
  components when the pattern has ``/``);
* ``--regex '(?P<kernel>smp|rt)/(?P<load>\\w+)-(?P<sclk>\\d+MHz)'``: named groups,
  searched in the whole path;
* ``--fields kernel,load,sclk`` alone: the file name without extension split
  at ``--sep`` (default ``-``) into exactly these fields.

Axes: ``--rows`` and ``--cols`` (comma-separated fields; several fields make
combined keys such as ``smp/printf``). By default the last field makes the rows
and the others the columns, which gives seed 004's tables (rows SCLK,
columns SMP/RT x load) from ``{kernel}-{load}-{sclk}``. Labels that look like
numbers, frequencies or times sort by value (1MHz < 2MHz < 10MHz), others
naturally (cap-9 < cap-10), unless ``--order FIELD=V1,V2,...`` lists them. Several captures in one cell are reduced to one
value (``--reduce``, default median); failed captures are left out and marked.
"""

from __future__ import annotations

import dataclasses
import os
import re
import statistics
from typing import Callable

from spigap.batch.discover import known_extensions, natural_key
from spigap.batch.table import fmt_metric, metric_value
from spigap.batch.worker import ERROR
from spigap.errors import UsageError, printable
from spigap.units import parse_freq, parse_time

REDUCERS: dict[str, Callable[[list], float]] = {
    "median": statistics.median,
    "mean": statistics.fmean,
    "min": min,
    "max": max,
}


class FieldSource:
    """Labels from a file's path: a pattern, a regex or a split of the file name."""

    def __init__(self, *, pattern: str | None = None, regex: str | None = None,
                 fields: list[str] | None = None, sep: str = "-"):
        if pattern and regex:
            raise UsageError("give --pattern or --regex, not both")
        self.kind = "pattern" if pattern else "regex" if regex else "split" if fields else None
        self.text = pattern or regex or sep
        self.depth = 0
        self.sep = sep
        self.names: list[str] = []
        self.rx: re.Pattern | None = None
        if pattern:
            self.rx, self.names = _compile_pattern(pattern)
            self.depth = pattern.replace(os.sep, "/").count("/")
        elif regex:
            try:
                self.rx = re.compile(regex)
            except re.error as e:
                raise UsageError(f"--regex {regex!r}: {e}") from None
            self.names = list(self.rx.groupindex)
            if not self.names:
                raise UsageError(f"--regex {regex!r} has no named group",
                                 hint="name the fields: (?P<kernel>smp|rt)")
        elif fields:
            if not sep:
                raise UsageError("--sep must not be empty")
            self.names = list(fields)

    def describe(self) -> str:
        return {"pattern": f"--pattern {self.text!r}", "regex": f"--regex {self.text!r}",
                "split": f"--fields split at {self.sep!r}"}.get(self.kind or "", "")

    def labels(self, path: str) -> dict | None:
        """Field values for ``path``; None when it does not fit."""
        p = path.replace(os.sep, "/")
        if self.kind == "pattern":
            tail = "/".join(p.split("/")[-(self.depth + 1):])
            assert self.rx is not None
            m = self.rx.fullmatch(tail)
            return None if m is None else dict(m.groupdict())
        if self.kind == "regex":
            assert self.rx is not None
            m = self.rx.search(p)
            return None if m is None else {k: v for k, v in m.groupdict().items() if v is not None}
        if self.kind == "split":
            name = os.path.basename(p)
            for ext in sorted(known_extensions(), key=len, reverse=True):
                if name.lower().endswith(ext):
                    name = name[: -len(ext)]
                    break
            else:
                name = os.path.splitext(name)[0]
            parts = name.split(self.sep)
            return dict(zip(self.names, parts)) if len(parts) == len(self.names) else None
        return {}


def _compile_pattern(pattern: str):
    out, names = [], []
    for part in re.split(r"(\{[^{}]*\})", pattern):
        if part.startswith("{") and part.endswith("}"):
            name = part[1:-1].strip()
            if not name:
                out.append(r"[^/]*?")
                continue
            if not name.isidentifier():
                raise UsageError(f"--pattern field {{{name}}}: a field name is letters, digits and _")
            if name in names:
                raise UsageError(f"--pattern uses field {{{name}}} twice")
            names.append(name)
            out.append(f"(?P<{name}>[^/]+?)")
        else:
            out.append(re.escape(part).replace(r"\*", r"[^/]*?"))
    if not names:
        raise UsageError(f"--pattern {pattern!r} has no {{field}}",
                         hint="e.g. --pattern '{kernel}-{load}-{sclk}.sr'")
    return re.compile("".join(out)), names


def order(values, explicit: list[str] | None = None) -> list[str]:
    """Distinct values sorted by number/frequency/time if all parse, else naturally;
    the ``explicit`` ones (``--order load=noload,printf,stress``) first, as given."""
    vals = list(dict.fromkeys(values))
    if explicit:
        first = [v for v in explicit if v in vals]
        return first + order([v for v in vals if v not in first])
    for parse in (float, parse_freq, parse_time):
        try:
            nums = {v: parse(v) for v in vals}
        except (ValueError, TypeError):
            continue
        return sorted(vals, key=lambda v: (nums[v], natural_key(v)))
    return sorted(vals, key=natural_key)


@dataclasses.dataclass
class Cell:
    value: float | None = None
    n: int = 0
    failed: int = 0
    values: list = dataclasses.field(default_factory=list)
    paths: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Matrix:
    metric: str
    reduce: str
    rows: list[str]
    cols: list[str]
    row_keys: list[tuple]
    col_keys: list[tuple]
    cells: dict
    unmatched: list[str]

    def cell(self, row: tuple, col: tuple) -> Cell | None:
        return self.cells.get((row, col))

    def to_dict(self) -> dict:
        return {
            "metric": self.metric, "reduce": self.reduce, "rows": self.rows, "cols": self.cols,
            "row_keys": [list(k) for k in self.row_keys], "col_keys": [list(k) for k in self.col_keys],
            "cells": [{"row": dict(zip(self.rows, r)), "col": dict(zip(self.cols, c)),
                       "value": cell.value, "n": cell.n, "failed": cell.failed, "values": cell.values,
                       "paths": cell.paths}
                      for (r, c), cell in sorted(self.cells.items(), key=self._cell_order)],
            "unmatched": self.unmatched,
        }

    def _cell_order(self, item):
        (r, c), _ = item
        return self.row_keys.index(r), self.col_keys.index(c)


def axes(fields: list[str], rows: list[str] | None, cols: list[str] | None) -> tuple[list, list]:
    """Default axes: rows = the last field, cols = the others."""
    if rows and cols:
        return rows, cols
    if rows:
        return rows, [f for f in fields if f not in rows]
    if cols:
        return [f for f in fields if f not in cols], cols
    if len(fields) == 1:
        return fields, []
    return fields[-1:], fields[:-1]


def build(results, metric: str, rows: list[str], cols: list[str], reduce: str = "median",
          orders: dict | None = None) -> Matrix:
    cells: dict = {}
    unmatched = []
    seen_rows, seen_cols = [], []
    wanted = rows + cols
    for r in results:
        lab = r["labels"]
        if any(f not in lab for f in wanted):
            unmatched.append(r["path"])
            continue
        rk = tuple(str(lab[f]) for f in rows)
        ck = tuple(str(lab[f]) for f in cols)
        seen_rows.append(rk)
        seen_cols.append(ck)
        cell = cells.setdefault((rk, ck), Cell())
        if r["status"] == ERROR:
            cell.failed += 1
            continue
        v = metric_value(r, metric)
        if v is not None:
            cell.values.append(v)
            cell.paths.append(r["path"])
    for cell in cells.values():
        cell.n = len(cell.values)
        cell.value = REDUCERS[reduce](cell.values) if cell.values else None
    orders = orders or {}
    return Matrix(metric, reduce, rows, cols, _sorted_keys(seen_rows, [orders.get(f) for f in rows]),
                  _sorted_keys(seen_cols, [orders.get(f) for f in cols]), cells, unmatched)


def _sorted_keys(keys: list[tuple], explicit: list) -> list[tuple]:
    keys = list(dict.fromkeys(keys))
    if not keys:
        return []
    rank = []
    for i in range(len(keys[0])):
        ordered = order([k[i] for k in keys], explicit[i])
        rank.append({v: j for j, v in enumerate(ordered)})
    return sorted(keys, key=lambda k: tuple(rank[i][v] for i, v in enumerate(k)))


def _key_text(key: tuple) -> str:
    return printable("/".join(key)) if key else "all"      # labels come from file names


def render_text(m: Matrix) -> str:
    corner = f"{'/'.join(m.rows) or '-'} \\ {'/'.join(m.cols) or '-'}"
    head = [corner] + [_key_text(c) for c in m.col_keys]
    body = []
    marked = multi = False
    for rk in m.row_keys:
        line = [_key_text(rk)]
        for ck in m.col_keys:
            cell = m.cells.get((rk, ck))
            if cell is None:
                line.append("")
            elif cell.value is None:
                line.append("error*" if cell.failed else "–")
                marked |= bool(cell.failed)
            else:
                line.append(fmt_metric(m.metric, cell.value) + ("*" if cell.failed else ""))
                marked |= bool(cell.failed)
                multi |= cell.n > 1
        body.append(line)
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
    out = [f"{m.metric} ({m.reduce} per cell)" if multi else m.metric]
    out.append("  ".join(h.ljust(widths[0]) if i == 0 else h.rjust(widths[i])
                         for i, h in enumerate(head)).rstrip())
    for line in body:
        out.append("  ".join(c.ljust(widths[0]) if i == 0 else c.rjust(widths[i])
                             for i, c in enumerate(line)).rstrip())
    if marked:
        out.append("* some captures of this cell failed; see the error rows")
    if m.unmatched:
        out.append(f"not in the matrix ({len(m.unmatched)}): "
                   + ", ".join(printable(os.path.basename(p)) for p in m.unmatched[:5])
                   + (" ..." if len(m.unmatched) > 5 else "")
                   + f" (no {'/'.join(m.rows + m.cols)} label)")
    return "\n".join(out) + "\n"


def render_csv(matrices) -> str:
    """The matrices as one CSV: metric, the row fields, then one column per column key.

    Every matrix of a batch has the same rows and columns (they come from the
    labels), so several metrics stack as rows of one table.
    """
    import csv
    import io

    from spigap.outfile import csv_cell

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    if not matrices:
        return ""
    first = matrices[0]
    # labels and keys come from file names: never a spreadsheet formula (outfile.csv_cell)
    w.writerow([csv_cell(c) for c in ["metric", *first.rows, *[_key_text(c) for c in first.col_keys]]])
    for m in matrices:
        for rk in m.row_keys:
            vals = []
            for ck in m.col_keys:
                cell = m.cells.get((rk, ck))
                vals.append("" if cell is None or cell.value is None else repr(float(cell.value)))
            w.writerow([csv_cell(m.metric), *[csv_cell(k) for k in rk], *vals])
    return buf.getvalue()
