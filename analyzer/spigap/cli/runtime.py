"""What a ``spigap`` process tunes for itself before numpy is imported (the library,
``spigap.api``, and ``spigap.cli.main(argv)`` called from Python leave the host process
alone: main tunes only when it runs the process's own command line). Measured with ``spigap bench``
on the 2-core machine (BENCHMARKS.md, "Where the time goes"):

* ``OPENBLAS_NUM_THREADS=1`` unless the user set it: numpy's OpenBLAS starts one
  thread per core when it loads and they spin for ~0.1 s of CPU; spigap's analysis
  makes no BLAS call, and on two cores those cycles come out of the reader's
  inflate threads;
* glibc malloc keeps freed large blocks for reuse (``M_MMAP_THRESHOLD``,
  ``M_TRIM_THRESHOLD``) instead of returning them to the kernel and faulting in
  fresh zeroed pages for the next piece's buffers (inflated chunks, edge arrays:
  a few MB each, a few in flight): 40–60 % less system time on a dense capture,
  ~10 % less wall time; all threads share one arena (``M_ARENA_MAX``), so what one
  thread frees another reuses and no arena keeps its own free memory (peak RSS
  on the 200 M-sample benchmark capture: 166 MB, against 175–193 MB with
  glibc's defaults and 205–220 MB with these settings but an arena per thread);
* the garbage collector leaves the objects of the imports alone (``gc.freeze``).

(SIGTERM and SIGHUP unwound like Ctrl-C: spigap/stopping.py, which batch uses too.)
"""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import warnings
from collections.abc import Iterator

MMAP_THRESHOLD = 64 << 20      # blocks below this come from the heap, and are reused
TRIM_THRESHOLD = 32 << 20      # free heap kept before it is returned to the kernel
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8      # glibc's mallopt() parameters


def before_imports() -> None:
    """Call before numpy is imported."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def after_imports() -> bool:
    """Call once the subcommand's modules are imported, before any thread starts.
    True when glibc took the malloc settings (elsewhere its defaults stay)."""
    gc.freeze()
    return malloc_settings()


def malloc_settings() -> bool:
    """glibc's malloc as a spigap process sets it (one arena, MMAP_THRESHOLD, TRIM_THRESHOLD),
    before any thread starts; True when glibc took them. after_imports' part that a process
    running many commands (the test suite) takes too, without its gc.freeze."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):     # not glibc (musl has no mallopt)
        return False
    return all(mallopt(param, value) == 1 for param, value in ((_M_ARENA_MAX, 1),
                                                              (_M_MMAP_THRESHOLD, MMAP_THRESHOLD),
                                                              (_M_TRIM_THRESHOLD, TRIM_THRESHOLD)))


@contextlib.contextmanager
def one_line_warnings() -> Iterator[None]:
    """A library's warning that nothing caught earlier (numpy, scipy, matplotlib) becomes
    one line, 'spigap: warning: ...', instead of Python's two (message, source line)."""
    from spigap.errors import printable

    def show(message, category, filename, lineno, file=None, line=None):
        where = filename.replace(os.sep, "/")
        origin = where.split("/site-packages/")[1].split("/")[0] if "/site-packages/" in where else \
            os.path.basename(where)
        try:
            print(f"spigap: warning: {printable(str(message))} ({category.__name__} in {origin})",
                  file=sys.stderr, flush=True)
        except (OSError, ValueError):
            pass

    with warnings.catch_warnings():
        warnings.showwarning = show
        yield
