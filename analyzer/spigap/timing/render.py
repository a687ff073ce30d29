"""Rendering of timing-model tables and check results: text, JUnit XML, KTAP.

(JSON is ``CheckResult.to_dict`` / ``check.results_to_dict``.)
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from spigap.confidence import stated
from spigap.findings import explains_figures
from spigap.timing.check import (
    FAIL,
    MARGINAL,
    NO_DATA,
    PASS,
    SKIP,
    CheckResult,
    overall_verdict,
)
from spigap.units import fmt_freq, fmt_rate, fmt_time


def fmt_value(v, unit: str, signed: bool = False) -> str:
    if v is None:
        return "–"
    if signed:
        if v == 0:
            return "0"
        return ("+" if v > 0 else "−") + fmt_value(abs(v), unit)
    if unit == "s":
        text = fmt_time(v)
    elif unit == "Hz":
        text = fmt_freq(v)
    elif unit == "1/s":
        text = fmt_rate(v)
    else:
        text = f"{v:g}"
    return text


def fmt_bounds(lo, hi, unit: str, rule: str = "") -> str:
    if rule:
        return rule
    if lo is not None and hi is not None:
        return f"{fmt_value(lo, unit)} … {fmt_value(hi, unit)}"
    if lo is not None:
        return f"≥ {fmt_value(lo, unit)}"
    if hi is not None:
        return f"≤ {fmt_value(hi, unit)}"
    return "–"


def _label(it) -> str:
    if it.group == "device":
        return f"{it.id[len('device.'):]} ({it.metric})"
    if it.group == "model":
        return f"{it.metric} (model)"
    if it.group == "pins":                 # the controller's MISO window (timing/checks/pins.py)
        return f"{it.id.partition('.')[2]} (controller)"
    return it.metric


# ------------------------------------------------------------------ check: text
def check_text(results: list[CheckResult], *, verbose: bool = False) -> str:
    out = []
    for res in results:
        out.append(_one_text(res, verbose))
    if len(results) > 1:
        worst = [r for r in results if r.verdict == FAIL]
        empty = [r for r in results if r.verdict == NO_DATA]
        out.append(f"overall: {overall_verdict(results)} ({len(results)} captures, {len(worst)} failing"
                   + (f", {len(empty)} with no data" if empty else "") + ")\n")
    return "\n".join(out)


def _spi_line(spi: dict) -> str:
    """A shared-bus device's settings, each with where it came from."""
    src = spi.get("sources", {})

    def how(k):
        d = src.get(k)
        return f" ({d['note'] if d['from'] == 'given' and d['note'] else d['from']})" if d else ""

    return (f"mode {spi['mode']}{how('mode')}, {spi['wordsize']}-bit words{how('wordsize')}, "
            f"{spi['bitorder'].upper()} first{how('bitorder')}, CS active {spi['cs_polarity']}{how('cs_polarity')}")


def _one_text(res: CheckResult, verbose: bool) -> str:
    p, d, s = res.profile, res.device, res.summary
    c = res.counts()
    lines = [f"check       {res.capture}: {res.verdict}  ({c[PASS]} pass, {c[MARGINAL]} marginal, "
             f"{c[FAIL]} fail, {c[SKIP]} skipped)"]
    if res.no_data:
        lines.append(f"no data     {res.no_data}")
    if p is not None:
        lines.append(f"profile     {p.name}: {p.title}")
    if d is not None:
        lines.append(f"device      {d.spec}: {d.title}")
    if s.get("spi"):
        lines.append("spi         " + _spi_line(s["spi"]))
    tpm = s.get("transfers_per_message")
    said = (f", {stated(s['grouping_confidence'], s['grouping_confidence_words'])}"
            if s.get("grouping_confidence_words") else "")
    # "10 per message", else the messages as analyze prints them ("10 of varying length", "ambiguous")
    per = f"{tpm} per message" if tpm is not None else f"messages {s['messages_in_words']}"
    lines.append(f"capture     {s['transfers']} transfers, {per} [{s['grouping']}{said}], "
                 f"SCLK {fmt_freq(s['sclk_hz'])}"
                 + (f", {s['idle_gaps_excluded']} idle gaps > {fmt_time(s['idle_gap_s'])} left out"
                    if s.get("idle_gaps_excluded") else "")
                 + (f"; {s['stalls']['count']} stall(s), {fmt_time(s['stalls']['excess_s'])} lost"
                    if s.get("stalls") else ""))
    lines.append(f"resolution  {fmt_time(res.resolution_s)} (one sample): every measured figure is "
                 f"±1 sample; within ±1 sample of a bound = MARGINAL, beyond = FAIL; "
                 f"headroom {res.headroom * 100:g} %")
    for w in res.warnings:       # what the verdicts below rest on, cause first (spigap/findings.py)
        if explains_figures(w):
            lines.append(f"CHECK       {w}")
    lines.append("")
    head = (f"{'check':34s} {'stat':6s} {'measured':>11s} {'expected':>11s}  {'bounds':24s} "
            f"{'delta':>10s}  verdict")
    lines.append(head)
    lines.append("-" * len(head))
    for it in res.items:
        flag = "*" if it.assumed else ""
        flag += "?" if it.unverified else ""
        lines.append(f"{(_label(it) + flag)[:34]:34s} {it.statistic[:6]:6s} "
                     f"{fmt_value(it.measured, it.unit):>11s} {fmt_value(it.expected, it.unit):>11s}  "
                     f"{fmt_bounds(it.low, it.high, it.unit, it.rule):24s} "
                     f"{fmt_value(it.delta, it.unit, signed=True):>10s}  {it.verdict}")
    lines.append("(* = expected value or check rests on our assumption, ? = value UNVERIFIED; "
                 "delta = measured − expected, or − the nearest bound)")
    shown = [it for it in res.items if verbose or it.verdict in (FAIL, MARGINAL, SKIP)]
    if shown:
        lines.append("")
        lines.append("details")
        for it in shown:
            fig = ""
            if it.measured is not None and it.verdict != SKIP:
                fig = (f"{it.statistic} {fmt_value(it.measured, it.unit)} vs "
                       f"{fmt_bounds(it.low, it.high, it.unit, it.rule)}"
                       + (f" (±{fmt_value(it.resolution, it.unit)})" if it.resolution else "") + ": ")
            lines.append(f"  {it.verdict:8s} {it.id}: {fig}{it.reason}")
            v = it.violations
            if v and (v.get("count") or v.get("possible")) and v.get("first_s"):
                kind = "violations" if v.get("count") else "undecidable"
                lines.append(f"           {kind} at " + ", ".join(fmt_time(t) for t in v["first_s"])
                             + (" …" if (v.get("count") or v.get("possible")) > len(v["first_s"]) else ""))
            if verbose and it.source:
                lines.append(f"           source: {it.source}")
    for n in res.notes:
        lines.append(f"note        {n}")
    for w in res.warnings:
        if not explains_figures(w):
            lines.append(f"warning     {w}")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ check: JUnit
def check_junit(results: list[CheckResult], *, strict: bool = False, allow_empty: bool = False) -> str:
    """JUnit XML: one <testsuite> per capture, one <testcase> per check.

    FAIL -> <failure>; SKIP -> <skipped>; MARGINAL -> passes with the reason in
    <system-out> (a <failure> with ``strict``); a NO DATA capture gets one more
    testcase, ``data``, failed with the reason (skipped with ``allow_empty``).
    """
    root = ET.Element("testsuites", name="spigap check")
    tot = {"tests": 0, "failures": 0, "skipped": 0}
    for res in results:
        against = " + ".join(x for x in (res.profile.name if res.profile else None,
                                         res.device.spec if res.device else None) if x)
        cls = f"spigap.check.{res.profile.name if res.profile else res.device.spec if res.device else 'none'}"
        suite = ET.SubElement(root, "testsuite", name=f"{res.capture} [{against}]")
        props = ET.SubElement(suite, "properties")
        for k, v in (("profile", res.profile.name if res.profile else ""),
                     ("profile_path", res.profile.path if res.profile else ""),
                     ("device", res.device.spec if res.device else ""),
                     ("resolution_s", repr(res.resolution_s)), ("headroom", repr(res.headroom)),
                     ("verdict", res.verdict)):
            ET.SubElement(props, "property", name=k, value=str(v))
        n = {"tests": 0, "failures": 0, "skipped": 0}
        if res.no_data:
            case = ET.SubElement(suite, "testcase", classname=cls, name="data", time="0")
            n["tests"] += 1
            if allow_empty:
                ET.SubElement(case, "skipped", message=f"NO DATA (allowed): {res.no_data}")
                n["skipped"] += 1
            else:
                ET.SubElement(case, "failure", message=f"NO DATA: {res.no_data}",
                              type=NO_DATA).text = f"NO DATA: {res.no_data}"
                n["failures"] += 1
        for it in res.items:
            case = ET.SubElement(suite, "testcase", classname=cls, name=it.id, time="0")
            msg = (f"{it.verdict}: measured {fmt_value(it.measured, it.unit)}, bounds "
                   f"{fmt_bounds(it.low, it.high, it.unit, it.rule)}, delta {fmt_value(it.delta, it.unit, True)} "
                   f"(±{fmt_value(it.resolution, it.unit)}): {it.reason}")
            n["tests"] += 1
            if it.verdict == FAIL or (strict and it.verdict == MARGINAL):
                f = ET.SubElement(case, "failure", message=msg, type=it.verdict)
                v = it.violations
                f.text = msg + (f"\nfirst at (s): {v['first_s']}" if v and v.get("first_s") else "") \
                    + (f"\nsource: {it.source}" if it.source else "")
                n["failures"] += 1
            elif it.verdict == SKIP:
                ET.SubElement(case, "skipped", message=it.reason)
                n["skipped"] += 1
            elif it.verdict == MARGINAL:
                ET.SubElement(case, "system-out").text = msg
        suite.set("tests", str(n["tests"]))
        suite.set("failures", str(n["failures"]))
        suite.set("errors", "0")
        suite.set("skipped", str(n["skipped"]))
        for k in tot:
            tot[k] += n[k]
    for k, count in tot.items():
        root.set(k, str(count))
    root.set("errors", "0")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


# ------------------------------------------------------------------ check: KTAP
# KTAP (Documentation/dev-tools/ktap.rst, version 1): the kernel's test output,
# read by KernelCI, LAVA and kselftest runners. Plain ASCII so that any console
# log keeps it intact; '#' ends a description, so it is escaped like control
# characters.
_ASCII = {"µ": "u", "−": "-", "–": "-", "±": "+/-", "≥": ">=", "≤": "<=", "…": "...", "×": "x",
          "→": "->", "’": "'", "‘": "'", "“": '"', "”": '"', "°": " deg"}


def ktap_text(text: str, *, description: bool = False) -> str:
    """``text`` as one line of printable ASCII: common symbols spelt out, control
    characters and other non-ASCII as ``\\xNN``/``\\uNNNN``; in a description also '#'."""
    out = []
    for ch in str(text):
        if ch in _ASCII:
            out.append(_ASCII[ch])
        elif ch == "#" and description:
            out.append("\\x23")
        elif " " <= ch <= "~":
            out.append(ch)
        elif ord(ch) < 0x100:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(f"\\u{ord(ch):04x}" if ord(ch) < 0x10000 else f"\\U{ord(ch):08x}")
    return "".join(out)


def check_ktap(results: list[CheckResult], *, strict: bool = False, allow_empty: bool = False) -> str:
    """KTAP version 1: one test per capture, one subtest per check.

    PASS -> ``ok``; FAIL -> ``not ok``; SKIP -> ``ok N id # SKIP reason``;
    MARGINAL -> ``ok`` (``not ok`` with ``strict``); a NO DATA capture gets a
    subtest ``data``, ``not ok`` with the reason (``# SKIP`` with ``allow_empty``).
    Diagnostic lines before each result give the measured figure, the bounds,
    the delta and the resolution; a capture fails when one of its checks does.
    """
    out = ["KTAP version 1", f"1..{len(results)}"]
    for n, res in enumerate(results, 1):
        against = " + ".join(x for x in (res.profile.name if res.profile else None,
                                         res.device.spec if res.device else None) if x)
        sub: list[str] = []
        k = 0
        if res.no_data:
            k += 1
            sub.append(f"# data: NO DATA: {ktap_text(res.no_data)}")
            sub.append(f"ok {k} data # SKIP NO DATA (allowed)" if allow_empty else f"not ok {k} data")
        for it in res.items:
            k += 1
            name = ktap_text(it.id, description=True)
            if it.verdict == SKIP:
                sub.append(f"ok {k} {name} # SKIP {ktap_text(it.reason)}")
                continue
            if it.measured is not None:
                sub.append(ktap_text(
                    f"# {it.id}: {it.verdict}: {it.statistic} measured {fmt_value(it.measured, it.unit)}, limit "
                    f"{fmt_bounds(it.low, it.high, it.unit, it.rule)}, delta {fmt_value(it.delta, it.unit, True)} "
                    f"(±{fmt_value(it.resolution, it.unit)})"))
            if it.verdict != PASS:
                sub.append("# " + ktap_text(f"{it.id}: {it.reason}"))
                v = it.violations
                if v and v.get("first_s"):
                    sub.append("# " + ktap_text(f"{it.id}: first at " + ", ".join(fmt_time(t) for t in v["first_s"])))
            bad = it.verdict == FAIL or (strict and it.verdict == MARGINAL)
            sub.append(f"{'not ok' if bad else 'ok'} {k} {name}")
        out += ["  KTAP version 1", f"  1..{k}"] + ["  " + line for line in sub]
        c = res.counts()
        out.append(ktap_text(f"# {res.capture}: {res.verdict} ({c[PASS]} pass, {c[MARGINAL]} marginal, "
                             f"{c[FAIL]} fail, {c[SKIP]} skipped)"))
        out.append(f"{'not ok' if res.failed(strict, allow_empty) else 'ok'} {n} "
                   f"{ktap_text(res.capture, description=True)} [{ktap_text(against, description=True)}]")
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------ model table
def _override(key: str, v) -> str:
    if key == "sclk":
        return fmt_freq(v)
    if isinstance(v, str):
        return v
    if key == "idle-clocks":
        return f"{v:g}"
    return fmt_time(v)


def model_text(profile, model, words: int, rows: list[dict], delays: list, overrides: dict) -> str:
    T = model.period
    lines = [f"profile     {profile.name}: {profile.title}",
             f"            {profile.path}"]
    lines.append(f"bus         SCLK {fmt_freq(model.sclk_hz)} (T = {fmt_time(T)}), {model.bits_per_word}-bit "
                 f"words, {model.idle_clocks:g} idle clock(s) between words"
                 f"{' and after the last' if model.idle_after_last_word else ''}")
    clk = model.clock_slots(words)
    lines.append(f"transfer    {words} words = {clk:g} clock slots = {fmt_time(model.clock_time(words))}"
                 f" + CS setup {fmt_time(model.cs_setup)} + CS hold {fmt_time(model.cs_hold)}"
                 + (f" + {model.segments - 1} × inter-transfer {fmt_time(model.inter_transfer)}"
                    if model.segments > 1 else "")
                 + f" = {fmt_time(model.transfer_time(words))}")
    lines.append(f"gaps        cs_change {fmt_time(model.cs_change)}, context switch "
                 f"{fmt_time(model.context_switch)}")
    if overrides:
        lines.append("overrides   " + ", ".join(f"--{k} {_override(k, v)}" for k, v in overrides.items()))
    lines.append("")
    head = (f"{'transfers/msg':>13s} {'message':>11s} {'per transfer':>13s} {'rate':>11s} "
            f"{'capture rate':>13s}  {'clocks':>6s} {'setup+hold':>10s} {'cs_change':>9s} {'ctx sw':>6s}")
    lines.append(head)
    lines.append("-" * len(head))
    for r in rows:
        b = r["breakdown_s"]
        m = r["message_time_s"]
        pct = lambda x: f"{100 * x / m:5.1f}%"  # noqa: E731
        lines.append(f"{r['transfers_per_message']:>13d} {fmt_time(m):>11s} "
                     f"{fmt_time(r['time_per_transfer_s']):>13s} {fmt_rate(r['rate_hz']):>11s} "
                     f"{fmt_rate(r['rate_capture_hz']):>13s}  {pct(b['clocks']):>6s} "
                     f"{pct(b['cs_setup'] + b['cs_hold'] + b['inter_transfer']):>10s} "
                     f"{pct(b['cs_change']):>9s} {pct(b['context_switch']):>6s}")
    lines.append("")
    lines.append("rate = N / ((T_transfer + cs_change) × (N − 1) + T_transfer + context_switch)  "
                 "(docs/timing-model.md)")
    lines.append(f"capture rate: what `spigap analyze` measures when CS setup/hold are the "
                 f"edge-to-edge figures (T_transfer − T/2 = −{fmt_time(T / 2)} per transfer)")
    for dl in delays:
        lines.append(f"delay       {dl}")
    if profile.sources:
        lines.append("sources     " + ("\n            ".join(profile.sources)))
    if profile.assumptions:
        lines.append("assumed     " + ("\n            ".join(profile.assumptions)))
    return "\n".join(lines) + "\n"
