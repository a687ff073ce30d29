"""Run batch jobs: a local process pool (default) or an existing Dask cluster.

Both call ``on_result(dict)`` once per job, in completion order, from the
calling thread. ``worker.analyze_job`` turns every capture problem into an
error result itself; what is handled here is the worker process dying (out of
memory, a crash in a C library): the local pool finds the capture that killed
it by re-running the unfinished ones one at a time, so the other captures
still finish and only the culprit becomes an error row.
"""

from __future__ import annotations

import os
from typing import Callable, Sequence

from analyzer.batch import worker
from analyzer.batch.worker import ERROR, Job, result
from analyzer.errors import InputError, UsageError

WORKER_DIED = ("the worker process died while analyzing this capture "
               "(out of memory, or a crash: try 'spigap analyze' on it alone)")


def default_workers() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def run_inline(jobs: Sequence[Job], on_result: Callable[[dict], None]) -> None:
    for job in jobs:
        on_result(worker.analyze_job(job))


def run_local(jobs: Sequence[Job], on_result: Callable[[dict], None], *, workers: int | None = None) -> None:
    """Analyze on a pool of ``workers`` processes (default: every core we may use)."""
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from concurrent.futures.process import BrokenProcessPool

    wanted = max(1, workers or default_workers())
    pending = list(jobs)
    serial = False     # after a crash: one process, to pin it on one capture
    while pending:
        n = 1 if serial else min(wanted, len(pending))
        broken: list[Job] = []
        pool = ProcessPoolExecutor(max_workers=n)
        try:
            futures = {}
            for job in pending:
                try:
                    futures[pool.submit(worker.analyze_job, job)] = job
                except BrokenProcessPool:      # a worker died while we were still submitting
                    broken.append(job)
            for fut in as_completed(futures):
                try:
                    row = fut.result()
                except BrokenProcessPool:
                    broken.append(futures[fut])
                    continue
                except Exception as e:  # the job or its result did not cross the process boundary
                    job = futures[fut]
                    row = result(job, ERROR, error=f"{job.path}: internal error: {type(e).__name__}: {e}")
                on_result(row)
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        if not broken:
            return
        broken.sort(key=lambda j: j.index)
        if serial:
            # one process runs the jobs in submission order: the first one that
            # did not finish is the one that killed it
            on_result(result(broken[0], ERROR, error=f"{broken[0].path}: {WORKER_DIED}"))
            pending, serial = broken[1:], False
        elif n == 1:
            on_result(result(broken[0], ERROR, error=f"{broken[0].path}: {WORKER_DIED}"))
            pending = broken[1:]
        else:
            pending, serial = broken, True


def run_dask(jobs: Sequence[Job], on_result: Callable[[dict], None], *, scheduler: str,
             timeout_s: float = 10.0) -> None:
    """Analyze on the Dask cluster at ``scheduler`` (e.g. tcp://host:8786).

    The workers open the files themselves: they need the same paths (a shared
    filesystem) and spigap installed in the same version.
    """
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise UsageError("--dask-scheduler needs dask distributed",
                         hint="pip install 'spigap[dask]'") from None
    try:
        client = Client(scheduler, timeout=timeout_s, set_as_default=False)
    except Exception as e:  # OSError, TimeoutError, ValueError (bad address) ...
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise InputError(f"cannot connect to the Dask scheduler {scheduler}: {msg}",
                         hint="is the scheduler running, and is the address tcp://HOST:PORT?") from None
    try:
        try:
            client.wait_for_workers(1, timeout=timeout_s)
        except TimeoutError:
            raise InputError(f"the Dask cluster at {scheduler} has no workers",
                             hint="start some: dask worker " + scheduler) from None
        futures = client.map(worker.analyze_job, list(jobs), pure=False)
        job_of = {fut.key: job for fut, job in zip(futures, jobs)}
        for fut in as_completed(futures, loop=client.loop):
            job = job_of[fut.key]
            try:
                row = fut.result()
            except Exception as e:  # KilledWorker, a worker without spigap, ...
                msg = str(e).splitlines()[0] if str(e) else ""
                row = result(job, ERROR, error=f"{job.path}: Dask: {type(e).__name__}: {msg}".rstrip(": "))
            on_result(row)
            fut.release()
    finally:
        client.close()
