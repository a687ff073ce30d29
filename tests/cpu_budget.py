"""Which tests `make test` leaves to `make test-all` (and CI): the list in tests/slow_tests.txt.

A contributor's `make test` must stay within its budget (README, "Development": about
5 minutes and 300 s of CPU on 2 cores, setup included), so every test that costs more
than THRESHOLD seconds of CPU (its setup, call and teardown, with the subprocesses it
waited for) is marked ``slow`` by tests/conftest.py from that list: `make test` leaves
it out, `make test-all` and CI (.ci/run) run it. The list is measured, not guessed:

    SPIGAP_TEST_CPU_LOG=$PWD/build/cpu.log make test-all   # a whole run, slow tests included
    python tests/cpu_budget.py build/cpu.log               # rewrites tests/slow_tests.txt
    SPIGAP_TEST_CPU_LOG=$PWD/build/cpu2.log make test      # then: a fixture's cost moves to
    python tests/cpu_budget.py build/cpu.log build/cpu2.log    # the next test that uses it

Tests marked ``slow`` in their own file (full-size cases) stay so whatever they cost.
CPU, not wall time: wall time on a shared machine measures the neighbours.
"""

from __future__ import annotations

import argparse
import collections
import pathlib
import re

THRESHOLD = 0.3          # seconds of CPU per test
LIST = pathlib.Path(__file__).with_name("slow_tests.txt")
# never listed, whatever they cost: the list's own check (a renamed test must fail make test, not
# only CI) and the checks of what users install (the wheel without a compiler, the sdist with
# none: make test builds and installs them to run these; about 6 s of CPU)
EXEMPT = ("tests/test_slow_list.py::", "tests/test_installed.py::")
HEADER = """\
# Tests `make test` leaves out (they are marked `slow` by tests/conftest.py; `make test-all`
# and CI run them): each cost more than {threshold} s of CPU in the run this list was made from.
# Regenerate it with tests/cpu_budget.py (its docstring says how); the seconds are that run's.
"""

def nodeid(raw: str) -> str:
    """The test's id without pytest-xdist's ``@group`` suffix (--dist loadgroup)."""
    return re.sub(r"@[\w.-]+$", "", raw)


def read_logs(paths: list[pathlib.Path], threshold: float = THRESHOLD) -> dict[str, float]:
    """CPU seconds per test from SPIGAP_TEST_CPU_LOG files (lines "seconds<TAB>phase<TAB>nodeid"),
    the most it cost in any of the runs. A module or session fixture's cost falls on the first
    test of a run that uses it (its setup): when that setup costs more than ``threshold``, every
    test of its xdist group (the tests that share the fixture, ``@group`` in the log) is charged
    it too, so the group leaves make test together instead of one test per run."""
    cpu: dict[str, float] = {}
    groups: dict[str, set[str]] = collections.defaultdict(set)
    costly: dict[str, float] = {}
    for path in paths:
        run: dict[str, float] = collections.defaultdict(float)
        for line in path.read_text().splitlines():
            seconds, phase, raw = line.split("\t", 2)
            n = nodeid(raw)
            group = raw[len(n) + 1:]
            run[n] += float(seconds)
            if group:
                groups[group].add(n)
                if phase == "setup" and float(seconds) > threshold:
                    costly[group] = max(costly.get(group, 0.0), float(seconds))
        for n, sec in run.items():
            cpu[n] = max(cpu.get(n, 0.0), sec)
    for group, sec in costly.items():
        for n in groups[group]:
            cpu[n] = max(cpu[n], sec)
    return cpu


def read_list(path: pathlib.Path = LIST) -> set[str]:
    """The node ids in the list (comment lines, blank lines and the "  # N s" after an id skipped)."""
    if not path.exists():
        return set()
    ids = (re.sub(r"\s+# [\d.]+ s$", "", line) for line in path.read_text().splitlines())
    return {i.strip() for i in ids if i.strip() and not i.startswith("#")}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log", type=pathlib.Path, nargs="+",
                    help="SPIGAP_TEST_CPU_LOG files: a whole run, and runs of make test with the list in place")
    ap.add_argument("--threshold", type=float, default=THRESHOLD, help="seconds of CPU (default %(default)s)")
    a = ap.parse_args(argv)
    cpu = read_logs(a.log, a.threshold)
    slow = sorted((n for n, s in cpu.items() if s > a.threshold and not n.startswith(EXEMPT)), key=lambda n: (n.split("::")[0], n))
    LIST.write_text(HEADER.format(threshold=a.threshold)
                    + "".join(f"{n}  # {cpu[n]:.1f} s\n" for n in slow))
    kept = sum(s for n, s in cpu.items() if s <= a.threshold)
    print(f"{len(slow)} of {len(cpu)} tests over {a.threshold} s of CPU listed in {LIST.name}; "
          f"the others cost {kept:.0f} s")


if __name__ == "__main__":
    main()
