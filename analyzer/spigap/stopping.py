"""What stops a spigap process from outside, in one place: Ctrl-C (SIGINT, Python's
``KeyboardInterrupt``), SIGTERM and SIGHUP (``Stopped``, a ``KeyboardInterrupt`` too). Each
is unwound like Ctrl-C, so that every ``finally`` runs (a batch kills its worker processes,
an output being written is dropped and the old file stays); the CLI then says so in one line
and exits 128 + the signal number (cli/__init__.py).

Two ways to take them, for the two kinds of code that run:

* ``stop_on_signals``: SIGTERM and SIGHUP raise ``Stopped`` wherever the main thread is
  (the CLI, around every subcommand);
* ``between_waits``: a stop signal is noted and acted on by a check the code calls at a safe
  point (batch/execute.py's process pool, between its waits): raised inside
  concurrent.futures' ``wait()``, an exception can leave a future's lock held (wait acquires
  them in a loop), and the executor's thread could then block on it for good and keep the
  process from exiting.

A signal set to be ignored (nohup does that with SIGHUP) stays ignored in both.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)     # raise Stopped; SIGINT stays Python's (KeyboardInterrupt)
ENDING_SIGNALS = (signal.SIGINT, *STOP_SIGNALS)    # everything that ends a run from outside


class Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived: unwound like Ctrl-C."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum
        self.name = signal.Signals(signum).name


def _raise_stopped(signum, frame):
    raise Stopped(signum)


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP raise ``Stopped`` in the main thread until the block ends (a signal
    whose handler is not the default, such as one the parent set to be ignored, is left
    alone). Elsewhere than in the main thread nothing changes (Python runs handlers there)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {}
    for s in STOP_SIGNALS:
        if signal.getsignal(s) is signal.SIG_DFL:
            old[s] = signal.signal(s, _raise_stopped)
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


@contextlib.contextmanager
def between_waits() -> Iterator[Callable[[], None]]:
    """While the block runs, a stop signal (any of ``ENDING_SIGNALS``) is noted, and acted on
    by the returned check, to be called at safe points: the handler that was there (the CLI's
    raises ``Stopped``, Python's raises KeyboardInterrupt) runs then; a handler that returns
    has handled the signal; a signal at its default action ends the process as it would
    have. An ignored signal stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: None
        return
    got: list[int] = []
    old = {}
    for s in ENDING_SIGNALS:
        h = signal.getsignal(s)
        if h is not signal.SIG_IGN and h is not None:
            old[s] = signal.signal(s, lambda signum, frame: got.append(signum))

    def check() -> None:
        if not got:
            return
        s = got[0]
        got.clear()                 # acted on once (a handler that returns is not called again)
        for k, h in old.items():
            signal.signal(k, h)
        old.clear()
        h = signal.getsignal(s)
        if callable(h):
            h(s, None)              # raises (Stopped, KeyboardInterrupt); a handler that returns has handled it
            return
        os.kill(os.getpid(), s)      # the default action: end the process as the signal would

    try:
        yield check
    finally:
        for k, h in old.items():
            signal.signal(k, h)
