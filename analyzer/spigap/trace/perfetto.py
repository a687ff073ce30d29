"""The merged timeline as a Chrome trace-event JSON (opens in ui.perfetto.dev and chrome://tracing).

Format: the "Trace Event Format" (JSON object form, ``{"traceEvents": [...]}``).
Everything is on the bus clock, in microseconds from the start of the capture
(``ts``, ``dur``; fractional values keep ns detail). Tracks:

* process 1 "bus": thread 1 "transfers" (``ph: X`` slices, one per CS window, with
  the decoded words and the device label in ``args``), thread 2 "gaps" (one slice
  per CS setup / inter-transfer / CS hold / CS-inactive gap, named by kind), thread 3 "phases" (the
  gaps' phases, named ``kind: from → to``);
* process 2 "kernel": one thread per CPU (tid = CPU + 1; CPU unknown: tid 0) with
  every trace event as an instant event (``ph: i``, thread scope), its task, PID and
  device in ``args``;
* ``ph: M`` metadata events naming the processes and threads.

The file is written as it is generated (a million events do not sit in memory
as one string), to a temporary file renamed into place at the end.
"""

from __future__ import annotations

import json
import os

import numpy as np

from spigap.core.analysis import KIND_NAMES, Analysis
from spigap.trace import columns as tm
from spigap.trace.align import Alignment, bus_edges
from spigap.trace.phases import EDGE_NAMES, inter_transfer_gaps, segments

BUS_PID, KERNEL_PID = 1, 2
TID_TRANSFERS, TID_GAPS, TID_PHASES = 1, 2, 3
MAX_WORDS_SHOWN = 64


def _meta(pid: int, tid: int | None, name: str) -> dict:
    if tid is None:
        return {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}}
    return {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}}


def _words(values, wordsize: int) -> str:
    digits = max(1, (wordsize + 3) // 4)
    out = []
    for v in values[:MAX_WORDS_SHOWN]:
        try:
            out.append(f"{int(v):0{digits}x}")
        except (TypeError, ValueError):
            out.append(str(v))
    return " ".join(out) + (" ..." if len(values) > MAX_WORDS_SHOWN else "")


def events(a: Analysis, trace: tm.Trace | None, al: Alignment | None, *, capture_name: str = "capture"):
    """Yield the trace-event dicts (metadata first)."""
    us = 1e6
    yield _meta(BUS_PID, None, f"bus ({capture_name})")
    yield _meta(BUS_PID, TID_TRANSFERS, "transfers")
    yield _meta(BUS_PID, TID_GAPS, "gaps")
    yield _meta(BUS_PID, TID_PHASES, "phases")
    tick = a.tick_s
    dev = (al.device if al is not None and al.method == "spi" else None) or "spi"
    E = bus_edges(a)
    s, f, l, e = (E[n] for n in EDGE_NAMES)
    itk, it0, it1 = inter_transfer_gaps(a)
    it_at = np.searchsorted(itk, np.arange(a.n + 1))          # transfer k's gaps: it_at[k]:it_at[k + 1]
    for k in range(a.n):
        t0 = s[k] if np.isfinite(s[k]) else float(a.start[k]) * tick
        t1 = e[k] if np.isfinite(e[k]) else float(a.end[k]) * tick
        w0, w1 = int(a.word_off[k]), int(a.word_off[k + 1])
        args = {"transfer": k, "bits": int(a.n_bits[k]), "message": int(a.message[k]),
                "mosi": _words(a.mosi[w0:w1], a.cfg.wordsize) if a.cfg.mosi else None,
                "miso": _words(a.miso[w0:w1], a.cfg.wordsize) if a.cfg.miso else None}
        if a.labels is not None:
            args["label"] = a.labels[k]
        yield {"ph": "X", "name": f"{dev} transfer", "cat": "bus", "pid": BUS_PID, "tid": TID_TRANSFERS,
               "ts": t0 * us, "dur": max(t1 - t0, 0.0) * us, "args": args}
        inner = [("inter_transfer", float(it0[j]), float(it1[j])) for j in range(it_at[k], it_at[k + 1])]
        for name, x0, x1 in (("cs_setup", s[k], f[k]), *inner, ("cs_hold", l[k], e[k])):
            if np.isfinite(x0) and np.isfinite(x1):
                yield {"ph": "X", "name": name, "cat": "gap", "pid": BUS_PID, "tid": TID_GAPS,
                       "ts": x0 * us, "dur": max(x1 - x0, 0.0) * us, "args": {"transfer": k}}
        if k + 1 < a.n and np.isfinite(e[k]) and np.isfinite(s[k + 1]):
            kind = KIND_NAMES.get(int(a.gap_kind[k + 1])) or "gap"
            yield {"ph": "X", "name": kind, "cat": "gap", "pid": BUS_PID, "tid": TID_GAPS,
                   "ts": e[k] * us, "dur": max(s[k + 1] - e[k], 0.0) * us, "args": {"before_transfer": k + 1}}
    if trace is None or al is None:
        return
    yield from _phase_slices(a, trace, al)
    yield _meta(KERNEL_PID, None, f"kernel ({os.path.basename(trace.path)}, on the bus clock)")
    tb = al.to_bus(trace.ts)
    cpus = np.unique(trace.cpu)
    for c in cpus:
        yield _meta(KERNEL_PID, int(c) + 1 if c >= 0 else 0, f"CPU {int(c)}" if c >= 0 else "CPU ?")
    for r in range(len(trace)):
        c = int(trace.cpu[r])
        ti = int(trace.task[r])
        d = int(trace.device[r])
        kargs: dict = {"task": trace.tasks[ti] if ti >= 0 else None, "pid": int(trace.pid[r]),
                         "trace_ts": float(trace.ts[r])}
        if d >= 0:
            kargs["device"] = trace.devices[d]
        if trace.length[r] >= 0:
            kargs["len"] = int(trace.length[r])
        if trace.gpio[r] >= 0:
            kargs["gpio"] = int(trace.gpio[r])
            kargs["value"] = int(trace.value[r])
        p = trace.payload.get(r)
        if p is not None:
            kargs["tx"] = p[0].hex("-") if p[0] else None
            kargs["rx"] = p[1].hex("-") if p[1] else None
        yield {"ph": "i", "s": "t", "name": trace.events[int(trace.event[r])], "cat": "kernel",
               "pid": KERNEL_PID, "tid": c + 1 if c >= 0 else 0, "ts": float(tb[r]) * us, "args": kargs}


def _phase_slices(a: Analysis, trace: tm.Trace, al: Alignment):
    """One slice per phase inside each gap of a matched transfer (cut as phases.split cuts them)."""
    us = 1e6
    sg = segments(a, al)
    rows, tb, seg = sg.place(trace, al)
    order = np.argsort(seg, kind="stable")
    bounds = np.searchsorted(seg[order], np.arange(len(sg.t)))
    for q in np.flatnonzero(sg.ok):
        kind, k = str(sg.kind[q]), int(sg.transfer[q])
        sel = order[bounds[q]:bounds[q + 1]]
        names = ([EDGE_NAMES[sg.edge[q]]] + [trace.events[int(trace.event[rows[j]])] for j in sel]
                 + [EDGE_NAMES[sg.edge[q + 1]]])
        times = [float(sg.t[q])] + [float(tb[j]) for j in sel] + [float(sg.t[q + 1])]
        for i in range(len(names) - 1):
            yield {"ph": "X", "name": f"{kind}: {names[i]} → {names[i + 1]}", "cat": "phase", "pid": BUS_PID,
                   "tid": TID_PHASES, "ts": times[i] * us, "dur": max(times[i + 1] - times[i], 0.0) * us,
                   "args": {"gap": kind, "from": names[i], "to": names[i + 1], "transfer": k}}


def write(path: str, a: Analysis, trace: tm.Trace | None, al: Alignment | None, *, capture_name: str) -> int:
    """Write the JSON trace whole or not at all (streamed, outfile.py; JSON escapes its own
    strings); returns the number of events."""
    from spigap.outfile import open_output

    n = 0
    with open_output(path, escape=False) as fh:
        fh.write('{"displayTimeUnit": "ns", "otherData": {"clock": "bus (capture) time, us from its start"},\n'
                 ' "traceEvents": [\n')
        for ev in events(a, trace, al, capture_name=capture_name):
            fh.write((",\n" if n else "") + json.dumps(ev, ensure_ascii=False, allow_nan=False))
            n += 1
        fh.write("\n]}\n")
    return n
