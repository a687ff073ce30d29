"""Run batch jobs: a local process pool (default) or an existing Dask cluster.

Time limits: each job carries ``timeout_s``; the worker stops itself when it
is reached (worker._time_limit) and returns an error row. Should a worker be
stuck where that cannot reach it (inside a C call), the local pool kills its
processes once no job has finished for longer than any running job's limit
(plus ``GRACE_S``), and pins the stuck capture the way it pins a crash.
Ctrl-C, SIGTERM and SIGHUP (spigap/stopping.py: exceptions, acted on between the pool's
waits) kill the pool's processes at once (no waiting for running captures); a worker whose parent
dies anyway (SIGKILL) is ended by the kernel (worker.init_process).

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

from spigap.batch import worker
from spigap.batch.worker import ERROR, Job, result, timeout_message
from spigap.errors import InputError, UsageError
from spigap.stopping import between_waits

GRACE_S = 10.0
POLL_S = 0.5

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


def _kill(pool) -> None:
    """End the pool's worker processes now (ProcessPoolExecutor has no public way)."""
    for proc in list(getattr(pool, "_processes", {}).values()):
        try:
            proc.kill()
        except Exception:  # already gone
            pass
    # then wait for the executor's thread to see them gone and close its pipes (quick: the
    # processes are dead): left running, it raced the interpreter's exit, whose hook wrote to a
    # pipe the thread was closing ("Exception ignored ... Bad file descriptor" after the one line)
    pool.shutdown(wait=True, cancel_futures=True)


def run_local(jobs: Sequence[Job], on_result: Callable[[dict], None], *, workers: int | None = None) -> None:
    """Analyze on a pool of ``workers`` processes (default: every core we may use)."""
    from concurrent.futures import ProcessPoolExecutor

    wanted = max(1, workers or default_workers())
    pending = list(jobs)
    serial = False     # after a crash or a stuck worker: one process, to pin it on one capture
    while pending:
        n = 1 if serial else min(wanted, len(pending))
        broken: list[Job] = []
        pool = ProcessPoolExecutor(max_workers=n, initializer=worker.init_process, initargs=(os.getpid(),))
        try:
            with between_waits() as stop_here:     # acted on between waits (stopping.py says why)
                stuck = _run_pool(pool, pending, broken, on_result, stop_here)
        except BaseException:      # Ctrl-C (KeyboardInterrupt), SIGTERM/SIGHUP or a failing on_result: stop now
            _kill(pool)
            raise
        pool.shutdown(wait=True)
        if not broken:
            return
        broken.sort(key=lambda j: j.index)
        if serial or n == 1:
            # one process runs the jobs in submission order: the first one that
            # did not finish is the one that killed it (or got stuck)
            culprit = broken[0]
            why = timeout_message(culprit) if stuck else f"{culprit.path}: {WORKER_DIED}"
            on_result(result(culprit, ERROR, error=why))
            pending, serial = broken[1:], False
        else:
            pending, serial = broken, True


def _run_pool(pool, pending: Sequence[Job], broken: list, on_result: Callable[[dict], None],
              stop_here: Callable[[], None]) -> bool:
    """Submit ``pending`` to ``pool`` and hand each result to ``on_result``; the jobs of a dead
    pool go to ``broken``. True when the pool was killed because a worker was stuck."""
    import time
    from concurrent.futures import FIRST_COMPLETED, wait
    from concurrent.futures.process import BrokenProcessPool

    futures = {}
    for job in pending:
        stop_here()
        try:
            futures[pool.submit(worker.analyze_job, job)] = job
        except BrokenProcessPool:      # a worker died while we were still submitting
            broken.append(job)
    limits = [j.timeout_s for j in futures.values()]
    known = [x for x in limits if x is not None]
    hard = None if not known or len(known) < len(limits) else max(known) + GRACE_S
    waiting = set(futures)
    progress = time.monotonic()
    while waiting:
        done, waiting = wait(waiting, timeout=POLL_S, return_when=FIRST_COMPLETED)
        stop_here()
        if done:
            progress = time.monotonic()
        elif hard is not None and time.monotonic() - progress > hard:
            # nothing finished for longer than any job may take: some worker is stuck
            # beyond its own limit. Kill the pool; the unfinished jobs run again.
            _kill(pool)
            broken.extend(futures[f] for f in waiting)
            return True
        for fut in done:
            try:
                row = fut.result()
            except BrokenProcessPool:
                broken.append(futures[fut])
                continue
            except Exception as e:  # the job or its result did not cross the process boundary
                job = futures[fut]
                row = result(job, ERROR, error=f"{job.path}: internal error: {type(e).__name__}: {e}")
            on_result(row)
    return False


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
