"""Judge the message grouping on randomized driver behaviours (tests/driver_behaviour.py).

``python tests/grouping_behaviour.py dev [N]``: the first N development cases, by
the kind of answer (``Grouping.basis``) and by family, and the confidently wrong
ones (for developing). ``python tests/grouping_behaviour.py held [N] [diagram.png]``:
the reliability table of the held-back cases (docs/gaps.md) and its diagram.
"""

from __future__ import annotations

import collections
import sys

import numpy as np

import driver_behaviour as db
from spigap.core import grouping

RIGHT = 0.98           # an answer is right when >= 98 % of its gap labels are


def judge(case: db.Case, **kw) -> dict:
    grp = grouping.infer(case.gaps, lead=case.lead, tick_s=1.0 / case.samplerate, **kw)
    right = float(np.mean((grp.kinds == grouping.CONTEXT_SWITCH) == case.boundary)) if len(case.gaps) else 1.0
    # an ambiguous answer labels nothing; it is right when the truth is among the readings it names
    named = max((float(np.mean((k == grouping.CONTEXT_SWITCH) == case.boundary)) for k in grp.rival_kinds),
                default=0.0)
    return {"case": case, "confidence": grp.confidence, "right": right, "basis": grp.basis, "note": grp.note,
            "ambiguous": grp.ambiguous, "structure": grp.structure, "named": named,
            "level": "ambiguous" if grp.ambiguous else grouping.level(grp.basis), "agreement": grp.agreement,
            "k": len(grp.gap_kinds)}


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


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "dev"
    count = int(sys.argv[2]) if len(sys.argv) > 2 else None
    seeds = db.DEVELOPMENT if what == "dev" else db.HELD_BACK
    res = run(list(seeds)[:count] if count else seeds)
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
