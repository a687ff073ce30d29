"""One batch job: analyze one capture, return a plain dict.

``analyze_job`` runs in a worker process (local pool or Dask worker). It never
raises for a bad capture: every problem becomes ``status="error"`` with the
one-line message the ``analyze`` command would print, so one bad file cannot
take the batch down. What it returns is small and pickles cheaply: the
``to_dict`` summary of the analysis (no per-transfer arrays).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import sys
import threading
import time

from spigap.core.config import SpiConfig
from spigap.stopping import STOP_SIGNALS

OK, WARN, TRUNCATED, ERROR = "ok", "warn", "truncated", "error"
NOT_ANALYZED = (TRUNCATED, ERROR)       # the statuses that fail a batch (exit 2); WARN does not


def status_of(d: dict | None) -> str:
    """An analyzed capture's status: ``warn`` when a warning is more than a note
    (spigap/findings.py: the one rule of what a warning explains), else ``ok``."""
    from spigap.findings import first_concern

    return WARN if d is not None and first_concern(d["warnings"]) is not None else OK


def first_warning(d: dict | None) -> str | None:
    """The warning that explains the most (the batch table's), unless all are notes."""
    from spigap.findings import first_concern

    return first_concern(d["warnings"]) if d is not None else None

# Default per-file time limit: generous for the analysis speed measured in
# BENCHMARKS.md (tens to hundreds of MB/s), so only a stuck file reaches it.
TIMEOUT_BASE_S = 60.0
TIMEOUT_S_PER_MIB = 1.0


def default_timeout(path: str | list[str]) -> float:
    """``TIMEOUT_BASE_S`` plus ``TIMEOUT_S_PER_MIB`` per MiB of the capture (a Saleae
    folder counts all its files, an acquisition saved as several files all of them)."""
    size = 0
    for p in [path] if isinstance(path, str) else path:
        try:
            if os.path.isdir(p):
                size += sum(e.stat().st_size for e in os.scandir(p) if e.is_file())
            else:
                size += os.path.getsize(p)
        except OSError:
            pass
    return TIMEOUT_BASE_S + TIMEOUT_S_PER_MIB * size / (1 << 20)


_PR_SET_PDEATHSIG = 1


def init_process(parent: int) -> None:
    """A local pool's worker process, as it starts: SIGTERM and SIGHUP end it (it does not
    inherit the parent's handlers for them), and on Linux the kernel sends it SIGKILL
    when the parent dies, however it dies, so no worker outlives the batch."""
    for s in STOP_SIGNALS:
        signal.signal(s, signal.SIG_DFL)
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:          # the parent died before the line above took effect
        os._exit(1)


class JobTimeout(BaseException):
    """The job's time limit expired (a BaseException: no ``except Exception`` on the
    way out of the reader may swallow it)."""


def timeout_message(job: "Job") -> str:
    if _is_fifo(job.file if isinstance(job.file, str) and job.file else job.path):
        # a FIFO in a searched folder: nothing was written to it, it is not damaged
        return (f"{job.path}: a FIFO nothing wrote to within the time limit of {job.timeout_s:g} s (--timeout); "
                "start its writer first, or leave it out of the batch")
    return (f"{job.path}: stopped after the time limit of {job.timeout_s:g} s (--timeout); the capture "
            "may be damaged in a way that stalls the reader: try 'spigap analyze' on it alone")


def _is_fifo(path: str) -> bool:
    import stat

    try:
        return stat.S_ISFIFO(os.stat(path).st_mode)
    except OSError:
        return False


@contextlib.contextmanager
def _time_limit(seconds: float | None):
    """SIGALRM-based limit, where it can work (the main thread of a process: the local
    pool's workers and the inline run; Dask runs jobs in threads, so not there). The
    parent pool also enforces the limit by killing stuck workers (execute.run_local)."""
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def _expired(signum, frame):
        raise JobTimeout()

    old = signal.signal(signal.SIGALRM, _expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@dataclasses.dataclass
class Job:
    index: int                     # position in the batch (rows keep this order)
    path: str                      # as shown to the user
    file: str | list[str] = ""     # what the worker opens (absolute for Dask); a list: one acquisition's files
    files: list[str] | None = None  # those files as shown to the user (path joins them with " + ")
    cfg: SpiConfig | None = None
    reader: dict = dataclasses.field(default_factory=dict)   # open_capture keyword options
    labels: dict = dataclasses.field(default_factory=dict)
    stall_rule: object = None      # core.stalls.StallRule (None: the default rule)
    error: str | None = None       # known before running (bad options, no such file): not run
    timeout_s: float | None = None  # time limit for this file (None: no limit)


def result(job: Job, status: str, *, error: str | None = None, analysis: dict | None = None,
           elapsed_s: float = 0.0) -> dict:
    res = {"index": job.index, "path": job.path, "labels": dict(job.labels), "status": status,
           "error": error, "analysis": analysis, "elapsed_s": elapsed_s}
    if job.files:
        res["files"] = list(job.files)
    return res


def analyze_job(job: Job) -> dict:
    """Analyze ``job.file``; always returns a result dict (see ``result``)."""
    if job.error is not None:
        return result(job, ERROR, error=job.error)
    t0 = time.perf_counter()
    try:
        from spigap.api import analyze_file
        from spigap.errors import SpigapError
        from spigap.output.jsonout import to_dict

        try:
            with _time_limit(job.timeout_s):
                r = analyze_file(job.file, job.cfg or SpiConfig(), stall_rule=job.stall_rule, **job.reader)
            if r.bus is not None:
                return _shared_result(job, r, time.perf_counter() - t0)
            a = r.device
            d = to_dict(a)
        except JobTimeout:
            return result(job, ERROR, error=timeout_message(job), elapsed_s=time.perf_counter() - t0)
        except SpigapError as e:
            return result(job, ERROR, error=str(e), elapsed_s=time.perf_counter() - t0)
        if a.truncated:
            return result(job, TRUNCATED, error=str(a.truncated), analysis=d,
                          elapsed_s=time.perf_counter() - t0)
        return result(job, status_of(d), analysis=d, elapsed_s=time.perf_counter() - t0)
    except MemoryError:
        return result(job, ERROR, error=f"{job.path}: out of memory while analyzing",
                      elapsed_s=time.perf_counter() - t0)
    except Exception as e:  # a bug in spigap, not in the capture: say so, keep the batch going
        return result(job, ERROR, error=f"{job.path}: internal error: {type(e).__name__}: {e} "
                                        "(run 'spigap analyze --debug' on it and please report it)",
                      elapsed_s=time.perf_counter() - t0)


def _shared_result(job: Job, sa, elapsed_s: float) -> dict:
    """A shared bus: one document per device (as one device's ``to_dict``, the bus's warnings
    first) in ``devices``; batch/table.py makes a row of each (label ``cs``)."""
    from spigap.findings import by_cause
    from spigap.output.jsonout import to_dict

    docs = {}
    for name, a in sa.devices.items():
        d = to_dict(a)
        d["warnings"] = by_cause(list(sa.warnings) + d["warnings"])
        docs[name] = d
    first = next(iter(docs.values()))
    status = TRUNCATED if sa.truncated else status_of(first)
    r = result(job, status, error=str(sa.truncated) if sa.truncated else None, analysis=first, elapsed_s=elapsed_s)
    r["devices"] = docs
    return r
