"""One batch job: analyze one capture, return a plain dict.

``analyze_job`` runs in a worker process (local pool or Dask worker). It never
raises for a bad capture: every problem becomes ``status="error"`` with the
one-line message the ``analyze`` command would print, so one bad file cannot
take the batch down. What it returns is small and pickles cheaply: the
``to_dict`` summary of the analysis (no per-transfer arrays).
"""

from __future__ import annotations

import dataclasses
import time

from analyzer.core.config import SpiConfig

OK, TRUNCATED, ERROR = "ok", "truncated", "error"


@dataclasses.dataclass
class Job:
    index: int                     # position in the batch (rows keep this order)
    path: str                      # as shown to the user
    file: str = ""                 # absolute path the worker opens
    cfg: SpiConfig | None = None
    reader: dict = dataclasses.field(default_factory=dict)   # open_capture keyword options
    labels: dict = dataclasses.field(default_factory=dict)
    stall_rule: object = None      # core.stalls.StallRule (None: the default rule)
    error: str | None = None       # known before running (bad options, no such file): not run


def result(job: Job, status: str, *, error: str | None = None, analysis: dict | None = None,
           elapsed_s: float = 0.0) -> dict:
    return {"index": job.index, "path": job.path, "labels": dict(job.labels), "status": status,
            "error": error, "analysis": analysis, "elapsed_s": elapsed_s}


def analyze_job(job: Job) -> dict:
    """Analyze ``job.file``; always returns a result dict (see ``result``)."""
    if job.error is not None:
        return result(job, ERROR, error=job.error)
    t0 = time.perf_counter()
    try:
        from analyzer.core import analysis
        from analyzer.errors import SpigapError
        from analyzer.io import open_capture
        from analyzer.output.jsonout import to_dict

        try:
            opts = dict(job.reader)
            with open_capture(job.file, **opts) as reader:
                a = analysis.run(reader, job.cfg or SpiConfig())
            d = to_dict(a, stall_rule=job.stall_rule)
        except SpigapError as e:
            return result(job, ERROR, error=str(e), elapsed_s=time.perf_counter() - t0)
        if a.truncated:
            return result(job, TRUNCATED, error=str(a.truncated), analysis=d,
                          elapsed_s=time.perf_counter() - t0)
        return result(job, OK, analysis=d, elapsed_s=time.perf_counter() - t0)
    except MemoryError:
        return result(job, ERROR, error=f"{job.path}: out of memory while analyzing",
                      elapsed_s=time.perf_counter() - t0)
    except Exception as e:  # a bug in spigap, not in the capture: say so, keep the batch going
        return result(job, ERROR, error=f"{job.path}: internal error: {type(e).__name__}: {e} "
                                        "(run 'spigap analyze --debug' on it and please report it)",
                      elapsed_s=time.perf_counter() - t0)
