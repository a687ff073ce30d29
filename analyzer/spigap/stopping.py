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
  process from exiting;
* ``Ending``: a run whose end is a signal and which then writes what it saw, whole
  (spigap monitor: the last intervals and the summary): the first signal ends the wait it
  arrives in (a read of a silent live stream), later ones wait until that ending is written.

A signal set to be ignored (nohup does that with SIGHUP) stays ignored in both.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

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


class Ending:
    """A run that a signal ends, and that then writes its ending whole (``spigap monitor``:
    the last intervals and the summary). While armed (``with Ending() as end``), in the main
    thread:

    * the first ending signal (SIGINT, SIGTERM, SIGHUP) is raised where the main thread is,
      by the handler that was there (KeyboardInterrupt; ``Stopped`` under the CLI): it ends a
      blocking read of a live stream that has gone silent;
    * inside ``held()`` (a batch being measured, a line being written) it is noted instead
      and raised when the section ends, so that no line is half-written and no interval
      counted but not shown;
    * after ``close()`` (the input ended: the ending is being written) the first signal is
      only noted;
    * a second signal is raised at once, wherever the main thread is: the ending is cut
      short (a standard output nobody reads cannot keep the process alive).

    ``signum`` is the first signal received (taken or noted), for the caller to act on once
    its ending is written (``stopped``: it was SIGTERM or SIGHUP). A signal ignored or at its
    default action is left so; disarmed (the block ended), the handlers are put back."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._old: dict[int, Any] = {}
        self._depth = 0
        self._noted = False          # a signal arrived inside held(): raise it at the end
        self._closed = False

    @property
    def stopped(self) -> Stopped | None:
        """``Stopped`` for the first signal when it was SIGTERM or SIGHUP, else None."""
        return Stopped(self.signum) if self.signum in STOP_SIGNALS else None

    def __enter__(self) -> "Ending":
        if threading.current_thread() is threading.main_thread():
            for s in ENDING_SIGNALS:
                h = signal.getsignal(s)
                if callable(h):
                    self._old[s] = signal.signal(s, self._on)
        return self

    def __exit__(self, *exc) -> None:
        for s, h in self._old.items():
            signal.signal(s, h)
        self._old.clear()

    def close(self) -> None:
        """The run is writing its ending: from now on signals are only noted."""
        self._closed = True

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
        # reached only when the section ended normally (an exception in flight passes on)
        if not self._depth and self._noted and not self._closed:
            self._noted = False
            self._take(self.signum)

    def _on(self, signum, frame) -> None:
        if self.signum is not None:
            # a second signal ends the run at once, its ending cut short: nothing (a standard
            # output nobody reads, which blocks the write) may keep the process from stopping
            self._old[signum](signum, frame)
            return
        self.signum = signum
        if self._closed or self._depth:
            self._noted = True
            return
        self._take(signum)

    def _take(self, signum) -> None:
        self._closed = True              # one signal ends the run; the ones after it wait
        self._old[signum](signum, None)
