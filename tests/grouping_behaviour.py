"""Judge the message grouping on randomized driver behaviours (tests/driver_behaviour.py).

``python tests/grouping_behaviour.py dev [N]``: the first N development cases, by
the kind of answer (``Grouping.basis``) and by family, and the confidently wrong
ones (for developing). ``python tests/grouping_behaviour.py held [N] [diagram.png]``:
the reliability table of the held-back cases (docs/gaps.md) and its diagram.
``python tests/grouping_behaviour.py calibrate``: measure every kind of answer on the
development cases and the full grid (tests/grouping_grid.py) and write
analyzer/spigap/core/grouping/calibration_data.py (the confidences it states).
"""

from __future__ import annotations

import collections
import dataclasses
import pathlib
import re
import sys

import numpy as np

import driver_behaviour as db
from spigap.core import grouping

RIGHT = 0.98           # an answer is right when >= 98 % of its gap labels are


def judge(case: db.Case, **kw) -> dict:
    grp = grouping.infer(case.gaps, lead=case.lead, tick_s=1.0 / case.samplerate, **kw)
    return {"case": case, **judged(grp, case.boundary)}


def judged(grp, truth: np.ndarray) -> dict:
    """An answer against the truth: its share of gaps right; an ambiguous answer labels nothing and
    is right when the truth is among the readings it names; its lean (the first of them, when its
    basis names one) is judged too, for the calibration."""
    right = float(np.mean((grp.kinds == grouping.CONTEXT_SWITCH) == truth)) if len(truth) else 1.0
    rights = [float(np.mean((k == grouping.CONTEXT_SWITCH) == truth)) for k in grp.rival_kinds]
    return {"confidence": grp.confidence, "right": right, "basis": grp.basis, "note": grp.note,
            "ambiguous": grp.ambiguous, "structure": grp.structure, "named": max(rights, default=0.0),
            "lean_right": rights[0] if rights and "|lean:" in grp.basis else None, "method": grp.method,
            "level": "ambiguous" if grp.ambiguous else grouping.level(grp.basis), "agreement": grp.agreement,
            "k": len(grp.gap_kinds)}


def constant_n(case: db.Case) -> int | None:
    """N of a constant-N case (a spidev loop of SPI_IOC_MESSAGE(N) without usleep, a kernel loop
    of N-transfer messages): issue 32's goal asks them answered at >= 0.8 with an idle start, or
    with N >= 7 anywhere; None for every other case."""
    m = re.fullmatch(r"spidev SPI_IOC_MESSAGE\((\d+)\)|kernel loop of (\d+)-transfer messages; .*", case.desc)
    return int(m.group(1) or m.group(2)) if m else None


def calibration_items(results: list[dict]) -> list[tuple[str, str, bool]]:
    """(full key, level, right) of every answer the calibration measures: automatic answers, and
    ambiguous ones by their lean."""
    out = []
    for r in results:
        if r["ambiguous"]:
            if r["lean_right"] is not None:
                key = r["basis"].split("|", 1)[1]
                out.append((key, grouping.level(key), r["lean_right"] >= RIGHT))
        elif r["method"] == "auto" and r["basis"].count("|") == 3:
            head = r["basis"].split("|")[0]
            lvl = "one population" if head.startswith("one_population") else grouping.level(r["basis"])
            out.append((r["basis"], lvl, r["right"] >= RIGHT))
    return out


def measured(results: list[dict]) -> dict[str, tuple[int, int]]:
    from spigap.core.grouping import calibration as cal

    table: dict[str, list[int]] = {}
    for key, lvl, ok in calibration_items(results):
        for k in cal.chain(key, lvl):
            n_ok = table.setdefault(k, [0, 0])
            n_ok[0] += 1
            n_ok[1] += int(ok)
    return {k: (v[0], v[1]) for k, v in table.items()}


ITEMS = "build/grouping-calibration-items.json"   # calibrate's answers, for ``levels`` (not versioned)


def save_items(results: list[dict]) -> None:
    """Every measured answer as [seed, key, level, right], for choosing the levels (``levels``)."""
    import json

    rows = []
    for r in results:
        seed = r["case"].seed if "case" in r else r["scenario"].seed
        rows += [[seed, k, lvl, ok] for k, lvl, ok in calibration_items([r])]
    path = pathlib.Path(__file__).resolve().parent.parent / ITEMS
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(rows))


def load_items() -> list[list]:
    import json

    return json.loads((pathlib.Path(__file__).resolve().parent.parent / ITEMS).read_text())


def _table(rows) -> dict[str, tuple[int, int]]:
    from spigap.core.grouping import calibration as cal

    t: dict[str, list[int]] = {}
    for _, key, lvl, ok in rows:
        for k in cal.chain(key, lvl):
            n_ok = t.setdefault(k, [0, 0])
            n_ok[0] += 1
            n_ok[1] += int(ok)
    return {k: (v[0], v[1]) for k, v in t.items()}


def fold(seed: int) -> int:
    """The half a seed falls in for the out-of-fold check: a hash of it, not its parity (the grid's
    seeds run through its jitter levels in turn: by parity one half would hold 1 % and 15 %, the
    other 5 % and 30 %)."""
    return (seed * 2654435761 >> 13) & 1


def levels_report(rows: list[list], levels=None) -> str:
    """The levels as the development cases measure them out of fold (docs/gaps.md "Calibration"):
    the table fitted on one half of the seeds (``fold``) states the other half's answers and vice
    versa; per stated level, the answers and the share right (an ambiguous answer's lean counts
    where it is the answer: measured right LEAN of the time or more)."""
    from spigap.core.grouping import calibration as cal

    levels = levels or cal.LEVELS
    by: dict[float, list[int]] = {}
    for half in (0, 1):
        table = _table([r for r in rows if fold(r[0]) != half])
        for _, key, lvl, ok in (r for r in rows if fold(r[0]) == half):
            p = cal.share(cal.chain(key, lvl), table)
            if p is None or (key.startswith("lean:") and p < cal.LEAN):
                continue
            c = next(level for start, level in levels if p >= start)
            n_ok = by.setdefault(c, [0, 0])
            n_ok[0] += 1
            n_ok[1] += int(ok)
    lines = ["| stated | answers | right | share | 95 % interval |", "|---|---|---|---|---|"]
    for c in sorted(by, reverse=True):
        n, ok = by[c]
        lo, hi = wilson_interval(ok, n)
        lines.append(f"| {c:.2f} | {n} | {ok} | {100 * ok / n:.1f} % | {100 * lo:.1f}-{100 * hi:.1f} % |")
    return "\n".join(lines)


def wilson_interval(ok: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Two-sided 95 % interval of a share (Wilson)."""
    if n == 0:
        return 0.0, 1.0
    p = ok / n
    d = 1 + z * z / n
    c = p + z * z / (2 * n)
    m = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return float((c - m) / d), float((c + m) / d)


def write_calibration(results: list[dict]) -> str:

    path = (pathlib.Path(__file__).resolve().parent.parent / "analyzer" / "spigap" / "core" / "grouping"
            / "calibration_data.py")
    rows = "".join(f"    {k!r}: {v!r},\n" for k, v in sorted(measured(results).items()))
    path.write_text('"""Measured on the development cases; written by ``python tests/grouping_behaviour.py '
                    'calibrate``\n(docs/gaps.md, "Calibration")."""\n\n# key: (answers, right: 98 % of the gaps '
                    "labelled right)\nMEASURED: dict[str, tuple[int, int]] = {\n" + rows + "}\n")
    return str(path)


def _judge_seed(seed: int) -> dict:
    r = judge(db.draw(seed))
    r["case"] = dataclasses.replace(r["case"], gaps=np.empty(0), boundary=np.empty(0, bool))   # small to pass back
    return r


def run_parallel(seeds, jobs: int = 2) -> list[dict]:
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        return pool.map(_judge_seed, list(seeds), chunksize=16)


def _judge_scenario(sc) -> dict:
    import grouping_grid as gg

    return gg.judge(sc)


def grid_parallel(scenarios, jobs: int = 2) -> list[dict]:
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(jobs) as pool:
        return pool.map(_judge_scenario, list(scenarios), chunksize=16)


def table(results: list[dict]) -> str:
    """Per confidence level of the labelled answers: answers, how many had >= 98 % of their
    gaps right (and the 95 % lower bound of that share), the mean share right; then the
    ambiguous answers: how often the truth is among the readings they name."""
    by = collections.defaultdict(list)
    for r in results:
        if not r["ambiguous"]:
            by[r["confidence"]].append(r)
    lines = ["| confidence | answers | ≥ 98 % of gaps right | 95 % lower bound | mean share right |",
             "|---|---|---|---|---|"]
    for c in sorted(by, reverse=True):
        rs = by[c]
        ok = sum(r["right"] >= RIGHT for r in rs)
        lines.append(f"| {c:.2f} | {len(rs)} | {ok} ({100 * ok / len(rs):.1f} %) | "
                     f"{100 * wilson_lower(ok, len(rs)):.1f} % | {100 * np.mean([r['right'] for r in rs]):.1f} % |")
    amb = [r for r in results if r["ambiguous"]]
    if amb:
        ok = sum(r["named"] >= RIGHT for r in amb)
        lines.append(f"| ambiguous (0.50) | {len(amb)} | the truth among the readings named: {ok} "
                     f"({100 * ok / len(amb):.1f} %) | {100 * wilson_lower(ok, len(amb)):.1f} % | – |")
    return "\n".join(lines)


def interval_table(results: list[dict]) -> str:
    """docs/gaps.md's held-back table: per confidence level the answers, how many had >= 98 % of
    their gaps right, that share and its two-sided 95 % interval (Wilson); then the ambiguous
    answers: how often the truth is among the readings they name."""
    by = collections.defaultdict(list)
    for r in results:
        if not r["ambiguous"]:
            by[r["confidence"]].append(r["right"] >= RIGHT)
    lines = ["| confidence | answers | ≥ 98 % of gaps right | share right | 95 % interval |", "|---|---|---|---|---|"]
    for c in sorted(by, reverse=True):
        ok, n = int(sum(by[c])), len(by[c])
        lo, hi = wilson_interval(ok, n)
        lines.append(f"| {c:.2f} | {n} | {ok} | {100 * ok / n:.1f} % | {100 * lo:.1f}-{100 * hi:.1f} % |")
    amb = [r for r in results if r["ambiguous"]]
    if amb:
        ok = sum(r["named"] >= RIGHT for r in amb)
        lo, hi = wilson_interval(ok, len(amb))
        lines.append(f"| ambiguous (0.50) | {len(amb)} | the truth among the readings named: {ok} | "
                     f"{100 * ok / len(amb):.1f} % | {100 * lo:.1f}-{100 * hi:.1f} % |")
    return "\n".join(lines)


def constant_n_table(results: list[dict]) -> str:
    """docs/gaps.md's constant-N table (issue 32's goal: answered at >= 0.8 with an idle start, or
    with N >= 7 anywhere)."""
    def busy(c):
        return c.family == "spidev-n" or "default 10" in c.desc

    rows = (("spidev-n, idle start, N ≥ 2, no usleep", lambda c, n: c.family == "spidev-n" and c.start == "idle" and n >= 2),
            ("kernel-n, idle start, N ≥ 2", lambda c, n: c.family == "kernel-n" and c.start == "idle" and n >= 2),
            ("spidev-n or kernel-n, N ≥ 7, any start, no usleep", lambda c, n: n >= 7),
            ("the same with a busy-wait cs_change, idle start, N ≥ 2",
             lambda c, n: busy(c) and c.start == "idle" and n >= 2),
            ("all of issue 32's constant-N cases (idle start N ≥ 2, or N ≥ 7)",
             lambda c, n: (n >= 2 and c.start == "idle") or n >= 7))
    lines = ["| cases | count | answered at ≥ 0.8 | of those right |", "|---|---|---|---|"]
    for name, pick in rows:
        rs = [r for r in results if pick(r["case"], constant_n(r["case"]) or 0)]
        sure = [r for r in rs if not r["ambiguous"] and r["confidence"] >= 0.8]
        ok = sum(r["right"] >= RIGHT for r in sure)
        lines.append(f"| {name} | {len(rs)} | {len(sure)} ({100 * len(sure) / max(len(rs), 1):.0f} %) | {ok} |")
    return "\n".join(lines)


def family_table(results: list[dict]) -> str:
    """docs/gaps.md's by-family table."""
    by = collections.defaultdict(list)
    for r in results:
        c = r["case"]
        by[(c.family, "idle" if c.start == "idle" else "mid/stall")].append(r)
    lines = ["| family | start | cases | at ≥ 0.8 | of those right | ambiguous |", "|---|---|---|---|---|---|"]
    for (fam, start), rs in sorted(by.items()):
        sure = [r for r in rs if not r["ambiguous"] and r["confidence"] >= 0.8]
        lines.append(f"| {fam} | {start} | {len(rs)} | {len(sure)} | {sum(r['right'] >= RIGHT for r in sure)} | "
                     f"{sum(r['ambiguous'] for r in rs)} |")
    return "\n".join(lines)


def by_key(results: list[dict], key: str) -> str:
    by = collections.defaultdict(list)
    for r in results:
        by[r[key] if key in r else getattr(r["case"], key)].append(r)
    lines = []
    for k in sorted(by, key=lambda k: -len(by[k])):
        rs = by[k]
        ok = sum((r["named"] if r["ambiguous"] else r["right"]) >= RIGHT for r in rs)
        conf = sorted({r["confidence"] for r in rs})
        lines.append(f"{str(k):40s} {len(rs):5d}  right {ok:5d} ({100 * ok / len(rs):5.1f} %)  conf {conf}")
    return "\n".join(lines)


def wilson_lower(ok: int, n: int, z: float = 1.645) -> float:
    """One-sided 95 % lower bound of a share (Wilson)."""
    if n == 0:
        return 0.0
    p = ok / n
    d = 1 + z * z / n
    c = p + z * z / (2 * n)
    m = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return float((c - m) / d)


def diagram(results: list[dict], path: str, title: str) -> None:
    """The reliability diagram: per confidence level, the share of answers >= 98 % right."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by = collections.defaultdict(list)
    for r in results:
        if not r["ambiguous"]:
            by[r["confidence"]].append(r["right"] >= RIGHT)
    conf = sorted(by)
    share = [float(np.mean(by[c])) for c in conf]
    lo = [wilson_lower(int(np.sum(by[c])), len(by[c])) for c in conf]
    n = [len(by[c]) for c in conf]
    fig, ax = plt.subplots(figsize=(5.5, 4.2), dpi=110)
    ax.plot([0, 1], [0, 1], color="0.7", lw=1, ls="--", label="calibrated (share = confidence)")
    ax.fill_between([0.8, 1.05], 0.95, 1.0, color="#d8f0d8", lw=0, label="goal at ≥ 0.8: ≥ 95 % right")
    ax.errorbar(conf, share, yerr=[np.subtract(share, lo), np.zeros(len(share))], fmt="o", color="C0",
                capsize=3, label="measured (bar: 95 % lower bound)")
    for c, s, k in zip(conf, share, n):
        ax.annotate(f"{k}", (c, s), textcoords="offset points", xytext=(6, -10), fontsize=8)
    amb = [r for r in results if r["ambiguous"]]
    if amb:
        named = float(np.mean([r["named"] >= RIGHT for r in amb]))
        ax.plot([0.5], [named], "x", color="C3", ms=8,
                label="ambiguous (0.5): truth among the readings named")
        ax.annotate(f"{len(amb)}", (0.5, named), textcoords="offset points", xytext=(-34, -4), fontsize=8, color="C3")
    ax.set_xlim(-0.02, 1.05)
    ax.set_ylim(-0.02, 1.05)
    ax.set_xlabel("confidence spigap reports")
    ax.set_ylabel("share of answers with ≥ 98 % of gaps right")
    ax.set_title(title, fontsize=10)
    ax.legend(loc="upper left", fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def run(seeds) -> list[dict]:
    return [judge(db.draw(s)) for s in seeds]


HELD_RESULTS = str(pathlib.Path(__file__).resolve().parent.parent / "build" / "grouping-held-back.pickle")

if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "dev"
    count = int(sys.argv[2]) if len(sys.argv) > 2 else None
    if what == "calibrate":
        import grouping_grid as gg

        res = run_parallel(list(db.DEVELOPMENT)[:count] if count else db.DEVELOPMENT)
        grid = grid_parallel(gg.grid(full=True))
        print(write_calibration(res + grid), f"from {len(res)} driver behaviours and {len(grid)} grid scenarios")
        print(constant_n_table(res), "(judged with the table before this run)", sep="\n")
        save_items(res + grid)
        sys.exit(0)
    if what == "levels":
        print(levels_report(load_items()))
        sys.exit(0)
    if what == "held-tables":
        # the tables of the last ``held`` run again, without judging anything
        import pickle

        res = pickle.loads(pathlib.Path(HELD_RESULTS).read_bytes())
        print(interval_table(res), constant_n_table(res), family_table(res), sep="\n\n")
        sys.exit(0)
    seeds = db.DEVELOPMENT if what == "dev" else db.HELD_BACK
    res = run_parallel(list(seeds)[:count] if count else seeds)
    if what == "held":
        import pickle

        pathlib.Path(HELD_RESULTS).parent.mkdir(exist_ok=True)
        pathlib.Path(HELD_RESULTS).write_bytes(pickle.dumps(res))
        print(interval_table(res), constant_n_table(res), family_table(res), sep="\n\n", end="\n\n")
    print(table(res))
    print()
    print(by_key(res, "basis"))
    print()
    print(by_key(res, "level"))
    print()
    print(by_key(res, "family"))
    if what == "dev":
        bad = [r for r in res if r["confidence"] >= 0.8 and r["right"] < RIGHT]
        print(f"\n{len(bad)} answers at >= 0.8 with < 98 % right")
        for r in bad[:60]:
            c = r["case"]
            print(c.seed, c.family, c.start, c.desc, "|", r["basis"], r["confidence"], round(r["right"], 3), "|",
                  r["note"][:160])
    elif len(sys.argv) > 3:
        diagram(res, sys.argv[3], f"message grouping, {len(res)} held-back driver behaviours")


def breakdown(results: list[dict]) -> str:
    """Share of confident (>= 0.8) answers and their share right, by family and start."""
    by = collections.defaultdict(list)
    for r in results:
        c = r["case"]
        by[(c.family, c.start)].append(r)
    lines = []
    for k in sorted(by):
        rs = by[k]
        conf = [r for r in rs if r["confidence"] >= 0.8]
        ok = sum(r["right"] >= RIGHT for r in conf)
        lines.append(f"{k[0]:20s} {k[1]:6s} {len(rs):5d}  confident {len(conf):4d} ({100 * len(conf) / len(rs):5.1f} %)"
                     f"  of those right {ok}")
    return "\n".join(lines)
