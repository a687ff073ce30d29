"""Judge bus identification on every .sr of sigrok-dumps (issue 32), as a new user runs it:
``spigap detect FILE --format json`` with no options, and again with every channel renamed to
its number (names are evidence, not the only evidence).

    python tests/sigrok_dumps_eval.py SIGROK_DUMPS SIGROK_TEST [--half dev|held|all] [--renamed]
                                      [--jobs N] [--out results.json] [--table]

SIGROK_DUMPS is a checkout (or a folder of the extracted files) of sigrok-dumps, SIGROK_TEST
one of sigrok-test (its ``decoder/test/*/test.conf`` give the spi decoder's channels of many
captures). Neither is needed by the test suite: a held-out subset lives in tests/data/lookalike/.

The truth of each capture (``truth``): its protocol family is its folder; SPI families list the
roles (test.conf's channels, else the channel names); look-alike families the name the answer
must say ("looks like I2S", "JTAG", ...). An answer is right when:

* SPI: the clock, CS and data lines found are the true ones (where known; a CS answer at 0.5 that
  names the true one as the other reading, with the option that settles it, counts) and the mode is
  right where the capture says it (the allmodes files, test.conf's cpol/cpha; where test.conf
  decodes with the default mode, a mode sampling on the rising edge, or either when the data
  change in the very samples of the clock's edges); a CS that never changes in the prefix may
  be left out (framing without CS is the same); how sure the answer says it is, is judged by
  the reliability tables, not here;
* not SPI: "no SPI bus" (exit 2) or a clock confidence < 0.8, naming the look-alike where the
  family is one spigap knows;
* either (synchronous serial buses the spi decoder also reads: Microwire, a caliper's clock and
  data, the SDA2506's): a refusal, or an SPI answer with the true clock.

The families are split in two halves by a fixed hash of their name (``half``): the detectors
were developed on ``dev`` and their table reported on ``held`` (docs/inference.md).

``--calibrate`` (and ``--tables`` of ``--out`` files) also fits the confidences
(calibration_data.py: the bases' shares, their priors, the never-seen shares, the base rate of
CPHA given CPOL) and prints them out of fold, five folds by device: by level, by band, and one
data line's direction on every data line of the SPI captures as if captured alone.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import hashlib
import io
import json
import math
import re
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np

MAX_UNZIPPED = 30 << 20

# folder prefix -> (kind, look-alike names the refusal must contain: any of them)
FAMILIES: list[tuple[str, str, tuple[str, ...]]] = [
    ("usb/hid/mouse/lisa_m_usbhid/lisa_m_usb_spi", "spi", ()),     # an SPI bus beside the USB lines
    ("uart/voltcraft_vc940", "either", ()),     # the ES51966F's clocked serial output beside the UART
    ("sdcard/spi_mode", "spi", ()),
    ("sdcard/sd_mode", "not", ("SD",)),
    ("spi/", "spi", ()),
    ("avr_isp/", "spi", ()),
    ("nfc/", "spi", ()),
    ("display/ssd1306/ssd1306-spi", "spi", ()),
    ("display/ssd1306/ssd1306-i2c", "not", ("I2C",)),
    ("display/st7735", "spi", ()),
    ("display/hd44780", "not", ("parallel",)),
    ("dac/ad5626", "spi", ()),
    ("dac/ti_tlc5620", "either", ()),
    ("led/ws2801", "spi", ()),
    ("led/hub75", "either", ()),
    ("mouse_sensors/agilent_hdns_2000", "either", ()),   # its serial pins double as quadrature outputs
    ("mouse_sensors/", "spi", ()),
    ("microwire/", "spi", ()),
    ("vfd/", "spi", ()),
    ("nonstandard_eeproms/", "either", ()),
    ("caliper/", "either", ()),
    ("gpib/serial", "either", ()),
    ("gpib/", "not", ("parallel",)),
    ("i2c/", "not", ("I2C",)),
    ("misc/tektronix_isf", "not", ("I2C",)),
    ("i2s/", "not", ("I2S", "TDM", "AC'97")),
    ("tdm_audio/", "not", ("I2S", "TDM", "AC'97")),
    ("ac97/", "not", ("I2S", "TDM", "AC'97")),
    ("jtag/", "not", ("JTAG",)),
    ("mdio/", "not", ("MDIO",)),
    ("z80/", "not", ("parallel",)),
    ("mcs48/", "not", ("parallel",)),
    ("lpc/", "not", ("parallel", "LPC")),
]


def family_of(rel: str) -> str:
    """The protocol family: the first folder (two for sdcard, display, dac, misc, gpib, led)."""
    parts = rel.split("/")
    if parts[0] in ("sdcard", "display", "dac", "misc", "gpib", "led") and len(parts) > 2:
        return "/".join(parts[:2])
    return parts[0]


def unit_of(rel: str) -> str:
    """The unit the corpus is split by: the protocol and the device or source folder under it
    ("spi/adxl345", "i2c/eeprom_24xx"; a file directly in the protocol folder is its own unit),
    so that every protocol with several devices has captures in both halves."""
    parts = rel.split("/")
    return "/".join(parts[:2]) if len(parts) > 2 else parts[0] + "/" + parts[-1].rsplit(".", 1)[0]


def half(unit: str) -> str:
    """"dev" or "held": a fixed hash of the unit (issue 32: develop on one half, report the other)."""
    return "dev" if int(hashlib.sha256(unit.encode()).hexdigest(), 16) % 2 == 0 else "held"


def kind_of(rel: str) -> tuple[str, tuple[str, ...]]:
    for prefix, kind, names in FAMILIES:
        if rel.startswith(prefix):
            return kind, names
    return "not", ()


EDGE_MODES = {"rising": (0, 3), "falling": (1, 2)}

# role names as sigrok-dumps' captures spell them (the truth where test.conf gives none)
ROLE_NAMES = {
    "clk": {"clk", "sclk", "sck", "spiclk", "sk", "clock"},
    "mosi": {"mosi", "sdi", "di", "si", "din", "data", "sdio", "d"},
    "miso": {"miso", "sdo", "do", "so", "dout"},
    "cs": {"cs", "cs#", "ncs", "ce#", "csn", "nss", "latch", "load"},
}


def _norm(name: str) -> str:
    return re.sub(r"^\d+_", "", name.strip().lower())


def conf_maps(test_root: Path) -> dict[str, list[dict]]:
    """input path -> the spi decoders' channel maps and options of sigrok-test's test.conf."""
    out: dict[str, list[dict]] = {}
    confs = sorted(test_root.glob("decoder/test/*/test.conf")) or sorted(test_root.glob("*.conf"))
    for conf in confs:
        pds: list[tuple[str, dict, dict]] = []
        for line in conf.read_text(errors="replace").splitlines():
            s = line.split()
            if not s:
                continue
            if s[0] == "test":
                pds = []
            elif s[0] == "protocol-decoder":
                ch, opt, i = {}, {}, 2
                while i < len(s) - 1:
                    if s[i] in ("channel", "option") and "=" in s[i + 1]:
                        k, v = s[i + 1].split("=", 1)
                        (ch if s[i] == "channel" else opt)[k] = v
                        i += 2
                    else:
                        i += 1
                pds.append((s[1], ch, opt))
            elif s[0] == "input":
                for pd, ch, opt in pds:
                    if pd == "spi":
                        out.setdefault(s[1], []).append({"channels": ch, "options": opt})
    return out


def truth(rel: str, channels: list[str], maps: dict[str, list[dict]], probes: dict[int, str] | None = None) -> dict:
    probes = probes or {}
    kind, names = kind_of(rel)
    t: dict = {"file": rel, "family": family_of(rel), "unit": unit_of(rel), "half": half(unit_of(rel)),
               "kind": kind, "lookalike": list(names)}
    if kind != "spi":
        return t
    roles: dict[str, str | None] = {}
    mode = None
    if rel in maps:
        # sigrok-cli names channels by name or index; the .sr's channel list maps an index to its name
        m = maps[rel][0]
        for role, ch in m["channels"].items():
            # sigrok-cli takes a channel's name, else its index (the .sr's probe number - 1)
            roles[role] = (ch if ch in channels or not ch.isdigit() else
                           probes.get(int(ch)) or (channels[int(ch)] if int(ch) < len(channels) else ch))
        opt = m["options"]
        if "cpol" in opt or "cpha" in opt:
            mode = 2 * int(opt.get("cpol", 0)) + int(opt.get("cpha", 0))
        else:
            # decoded right with the spi decoder's default (mode 0): it samples on the rising
            # edge, which is all the test says (mode 3 samples there too)
            t["edge"] = "rising"
    else:
        for c in channels:
            for role, ns in ROLE_NAMES.items():
                if _norm(c) in ns and role not in roles:
                    roles[role] = c
    mm = re.search(r"cpol(\d)_cpha(\d)", rel)
    if mm:
        mode = 2 * int(mm.group(1)) + int(mm.group(2))
    # a reset held through the whole session (AVR ISP) or a latch pulse before the burst (a NES
    # pad's LATCH) is what the spi decoder is given as CS; framing without CS is right too
    t["cs_optional"] = bool(roles.get("cs")) and _norm(roles["cs"]) in ("rst", "reset", "latch", "1")
    t["roles"] = roles
    t["mode"] = mode
    return t


def run_detect(path: str) -> dict:
    """spigap detect PATH --format json, in this process: (exit code, JSON or the error line)."""
    from spigap.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(["detect", path, "--format", "json"])
        except SystemExit as e:          # argparse
            code = int(e.code or 0)
    res: dict = {"code": code, "error": err.getvalue().strip()}
    if code == 0:
        try:
            res["json"] = json.loads(out.getvalue())
        except ValueError:
            res["code"] = 3
    return res


def judge(t: dict, res: dict) -> tuple[bool, str]:
    """(right, why) of one answer."""
    refused = res["code"] == 2 and "no SPI bus" in res["error"]
    d = res.get("json")
    clk_conf = d["sources"].get("clk", {}).get("confidence", 0.0) if d else 0.0
    unsure = d is not None and clk_conf < 0.8
    if t["kind"] == "not":
        if not (refused or unsure):
            return False, "taken as SPI" if d else f"exit {res['code']}: {res['error'][:120]}"
        if t["lookalike"] and refused and not any(n in res["error"] for n in t["lookalike"]):
            return False, "refused without naming " + "/".join(t["lookalike"])
        return True, "refused" if refused else f"clock confidence {clk_conf:.2f}"
    if t["kind"] == "either":
        if refused or unsure:
            return True, "refused"
        if d is None:
            return False, f"exit {res['code']}: {res['error'][:120]}"
        return True, "taken as SPI"
    # SPI
    if d is None:
        return False, f"exit {res['code']}: {res['error'][:160]}"
    s = d["settings"]
    roles = t.get("roles", {})
    wrong = []
    if roles.get("clk") and s["clk"] != roles["clk"]:
        wrong.append(f"clk {s['clk']} (is {roles['clk']})")
    cs_src = d["sources"].get("cs", {})
    if "cs" in roles and s["cs"] != roles["cs"] and not ((t.get("cs_optional") or t.get("cs_static"))
                                                          and s["cs"] is None) \
            and not (roles["cs"] in cs_src.get("also", ()) and cs_src.get("confidence", 1.0) <= 0.5):
        # (the true CS named as the other of two readings at 0.5, with the option that settles it, is right)
        wrong.append(f"cs {s['cs']} (is {roles['cs']})")
    data = {roles[r] for r in ("mosi", "miso") if roles.get(r)}
    got = {s[r] for r in ("mosi", "miso") if s[r]}
    # a data line that never changes in the prefix cannot be found from the signals (a MISO left
    # high): the lines found must be data lines, and at least one of them
    if data and (not got or not got <= data):
        wrong.append(f"data {sorted(got)} (is {sorted(data)})")
    if t.get("mode") is None and t.get("edge") and s["mode"] not in EDGE_MODES[t["edge"]] \
            and not t.get("same_sample"):
        wrong.append(f"mode {s['mode']} (samples on the {t['edge']} edge)")
    if t.get("mode") is not None and s["mode"] != t["mode"]:
        mode_src = d["sources"].get("mode", {})
        wrong.append(f"mode {s['mode']} at {mode_src.get('confidence', 0):.2f} (is {t['mode']})")
    # the confidence is judged by the reliability tables (a right answer at a low, calibrated
    # confidence is right: the basis it stands on is often wrong elsewhere, and says so)
    return not wrong, "; ".join(wrong) or "right"


def probe_names(path: Path) -> dict[int, str]:
    """{index: name} of the .sr's logic channels (probeN is index N - 1)."""
    try:
        with zipfile.ZipFile(path) as z:
            md = z.read("metadata").decode("utf-8", "replace")
    except (KeyError, zipfile.BadZipFile, OSError):
        return {}
    return {int(m.group(1)) - 1: m.group(2).strip() for m in re.finditer(r"^probe(\d+)=(.*)$", md, re.M)}


def _open(path: Path):
    """The capture, a sample as the time unit when its metadata has no samplerate (as spigap
    detect reads it)."""
    from spigap.io import open_capture
    from spigap.io.sr import NoSampleRate

    try:
        return open_capture(str(path))
    except NoSampleRate:
        return open_capture(str(path), samplerate=1.0)


def channel_names(path: Path) -> list[str]:
    with _open(path) as r:
        return list(r.info.channels)


def renamed_copy(path: Path, tmp: Path) -> Path:
    """A copy of the .sr with every logic channel named by its number (1-based, as sigrok names
    unnamed channels 0.. we use the index)."""
    out = tmp / path.name
    with zipfile.ZipFile(path) as zin, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zout:
        for item in zin.infolist():
            data = zin.read(item.filename)
            if item.filename == "metadata":
                text = data.decode("utf-8", "replace")
                text = re.sub(r"^(probe|analog)(\d+)=.*$", lambda m: f"{m.group(1)}{m.group(2)}={int(m.group(2)) - 1}",
                              text, flags=re.M)
                data = text.encode()
            zout.writestr(item, data)
    return out


def _one(job: tuple[str, str, bool, dict]) -> dict:
    root, rel, renamed, maps = job
    path = Path(root) / rel
    with tempfile.TemporaryDirectory() as tmp:
        try:
            names = channel_names(path)
        except Exception as e:  # noqa: BLE001 - an unreadable capture is a result too
            names = []
            err = str(e)
        else:
            err = ""
        t = truth(rel, names, maps, probe_names(path))
        if renamed and names:
            p2 = renamed_copy(path, Path(tmp))
            new = channel_names(p2)
            rename = dict(zip(names, new))
            if "roles" in t:
                t["roles"] = {r: rename.get(c, c) if c else c for r, c in t["roles"].items()}
            path = p2
        if t.get("roles") and names:
            static, same = prefix_facts(path, t["roles"])
            t["cs_static"] = bool(t["roles"].get("cs")) and t["roles"]["cs"] in static
            t["same_sample"] = same
        res = run_detect(str(path)) if names or not err else {"code": 2, "error": err}
        d = res.get("json")
        lines = line_items(path, t, d["settings"], d["sources"]) if d and t["kind"] == "spi" else []
    ok, why = judge(t, res)
    return {**t, "renamed": renamed, "right": ok, "why": why, "code": res["code"], "error": res["error"][:300],
            "settings": d["settings"] if d else None,
            "confidence": {k: v["confidence"] for k, v in d["sources"].items()} if d else None,
            "items": items(t, res) + lines}


def line_items(path: Path, t: dict, settings: dict, sources: dict) -> list[dict]:
    """The direction evidence of every true data line of an SPI capture whose clock was found,
    each as if it were the only one (``mosi_miso.line_basis``: what calibration.direction
    measures): {"setting": "one line is miso", "basis", "right": it is the MISO}."""
    from spigap.core.config import SpiConfig
    from spigap.core.infer import MAX_CHANNELS, read_prefix
    from spigap.core.infer.evidence import cs_level
    from spigap.core.infer.mosi_miso import line_basis
    from spigap.core.infer.report import Bus

    roles = t.get("roles") or {}
    clk = roles.get("clk")
    if not clk or settings.get("clk") != clk:
        return []
    with _open(path) as r:
        names = [c for c in (clk, roles.get("cs"), roles.get("mosi"), roles.get("miso"))
                 if c and c in r.info.channels][:MAX_CHANNELS]
        _, _, ev = read_prefix(r.edges(names), names)
    cs = roles.get("cs") if roles.get("cs") in ev.changes and len(ev.changes[roles["cs"]]) else None
    active = cs_level(ev, cs, clk, 1)[0] if cs else None
    if active is None:
        cs = None
    mode = settings.get("mode") or 0
    out = SpiConfig(cpol=mode >> 1, cpha=mode & 1, wordsize=min(int(settings.get("wordsize") or 8), 64))
    found = []
    for role in ("mosi", "miso"):
        line = roles.get(role)
        if line not in ev.changes or len(ev.changes[line]) < 2:
            continue
        # a CS the answer found to be a latch strobe (LOAD) is one for the truth's CS too
        how = "latch" if sources.get("cs", {}).get("basis") == "latch" and settings.get("cs") == cs else "bracket"
        basis, _ = line_basis(ev, line, Bus(clk, cs, [line], len(ev.changes[clk]), active, cs_how=how), out)
        found.append({"setting": "one line is miso", "confidence": 0.0, "from": "inferred", "basis": basis,
                      "right": role == "miso"})
    return found


def prefix_facts(path: Path, roles: dict) -> tuple[set[str], bool]:
    """(the channels that never change in the prefix inference reads, whether the true data
    lines change in the very samples of clock edges). A CS held active all along cannot be
    found from the signals: framing without CS is then right too. Data switching in the sample
    of a clock edge read the same bits on either edge (the sample holds the new level, and so
    does the next edge's): a mode of either edge decodes the same words."""
    from spigap.core.infer import MAX_CHANNELS, read_prefix

    with _open(path) as r:
        names = list(r.info.channels)[:MAX_CHANNELS]
        _, _, ev = read_prefix(r.edges(names), names)
    static = {n for n in names if not len(ev.changes[n])}
    clk = roles.get("clk")
    data = [roles[r] for r in ("mosi", "miso") if roles.get(r) in ev.changes]
    same = False
    if clk in ev.changes and data:
        ct = ev.ticks(clk)
        dt = np.concatenate([ev.ticks(d) for d in data])
        same = len(dt) >= 4 and float(np.mean(np.isin(dt, ct))) >= 0.95
    return static, same


def items(t: dict, res: dict) -> list[dict]:
    """The answers a reliability table counts, each with its stated confidence, whether it is
    right, where it came from and its basis (the evidence key the calibration maps):

    * ``bus``: an SPI answer (exit 0) is the claim "an SPI bus with this clock", at the clock's
      confidence; right when the capture is SPI and the clock the true one (not counted for the
      "either" families, whose clock and data either reading fits);
    * ``cs``, ``mosi``, ``miso``, ``mode``: on SPI captures whose clock was found, each setting
      whose truth is known."""
    d = res.get("json")
    if not d or t["kind"] == "either":
        return []
    s, src = d["settings"], d["sources"]

    def item(setting: str, key: str, right: bool) -> dict:
        x = src.get(key, {})
        return {"setting": setting, "confidence": x.get("confidence", 0.0), "from": x.get("from", "?"),
                "basis": x.get("basis", ""), "right": bool(right)}

    roles = t.get("roles", {})
    true_clk = roles.get("clk")
    if t["kind"] == "not":
        return [item("bus", "clk", False)]
    if not true_clk:
        return []
    out = [item("bus", "clk", s["clk"] == true_clk)]
    if s["clk"] != true_clk:
        return out
    if "cs" in roles:
        ok = s["cs"] == roles["cs"] or ((t.get("cs_optional") or t.get("cs_static")) and s["cs"] is None)
        out.append(item("cs", "cs", ok))
    data = {roles[r] for r in ("mosi", "miso") if roles.get(r)}
    for r in ("mosi", "miso"):
        if roles.get(r) and s[r] is not None:
            out.append(item(r, r, s[r] == roles[r]))
        elif roles.get(r) is None and s[r] is not None and data:
            # a data line the truth does not name: right only if it is no other true role
            out.append(item(r, r, s[r] not in set(roles.values())))
        else:
            continue
        # one data line: whether it is the MISO (the cross-validation states its role again)
        out[-1]["is_miso"] = s[r] == roles.get("miso")
    def mode_ok(m: int) -> bool:
        if t.get("mode") is not None:
            return m == t["mode"]
        return m in EDGE_MODES[t["edge"]] or bool(t.get("same_sample"))

    if t.get("mode") is not None or t.get("edge"):
        out.append(item("mode", "mode", mode_ok(s["mode"])))
        # the answer's CPOL and CPHA (a settled CPHA is what the base rate of CPHA given CPOL is
        # measured on) and the CPHA readings that would be right with its CPOL (the cross-validation
        # states a CPHA without evidence again, at its fold's base rate)
        cpol = s["mode"] >> 1
        out[-1].update(cpol=cpol, cpha=s["mode"] & 1, ok_cpha=[c for c in (0, 1) if mode_ok(2 * cpol + c)])
    return out


def files(root: Path) -> list[str]:
    out = []
    for p in sorted(root.rglob("*.sr")):
        try:
            with zipfile.ZipFile(p) as z:
                if sum(i.file_size for i in z.infolist()) > MAX_UNZIPPED:
                    continue
        except (zipfile.BadZipFile, OSError):
            continue
        out.append(str(p.relative_to(root)))
    return out


def table(results: list[dict]) -> str:
    by = collections.defaultdict(list)
    for r in results:
        by[(r["family"], r["kind"])].append(r)
    lines = ["| family | kind | half | captures | right | wrong (first reason) |", "|---|---|---|---|---|---|"]
    for (fam, kind), rs in sorted(by.items()):
        bad = [r for r in rs if not r["right"]]
        halves = "/".join(sorted({r["half"] for r in rs}))
        lines.append(f"| {fam} | {kind} | {halves} | {len(rs)} | {len(rs) - len(bad)} | "
                     + (f"{len(bad)}: {bad[0]['file'].rsplit('/', 1)[-1]}: {bad[0]['why'][:70]}" if bad else "")
                     + " |")
    tot = collections.Counter((r["kind"], r["right"]) for r in results)
    for kind in ("spi", "either", "not"):
        n = tot[(kind, True)] + tot[(kind, False)]
        if n:
            lines.append(f"| **all {kind}** | | | {n} | {tot[(kind, True)]} | {tot[(kind, False)]} |")
    return "\n".join(lines)


def doc_table(named: list[dict], renamed: list[dict]) -> str:
    """docs/inference.md's table by family: captures, right named, right with the channels
    renamed to numbers (``--doc-table NAMED.json RENAMED.json``)."""
    ren = {r["file"]: r["right"] for r in renamed}
    by = collections.defaultdict(list)
    for r in named:
        by[(r["family"], r["kind"])].append(r)
    lines = ["| family | kind | captures | right | right, channels renamed to numbers |", "|---|---|---|---|---|"]
    for (fam, kind), rs in sorted(by.items()):
        lines.append(f"| {fam} | {kind} | {len(rs)} | {sum(r['right'] for r in rs)} | "
                     f"{sum(bool(ren.get(r['file'])) for r in rs)} |")
    for kind in ("spi", "either", "not"):
        rs = [r for r in named if r["kind"] == kind]
        if rs:
            lines.append(f"| **all {kind}** | | {len(rs)} | {sum(r['right'] for r in rs)} | "
                         f"{sum(bool(ren.get(r['file'])) for r in rs)} |")
    return "\n".join(lines)


UNIT_CAP = 3      # captures of one unit (one device's series) that count as separate evidence
FOLDS = 5         # cross-validation folds (by unit: a device's captures, named and renamed, in one fold)


def fold(unit: str) -> int:
    """The cross-validation fold of a unit: a fixed hash (deterministic; the same split as ``half``
    uses no more)."""
    return int(hashlib.sha256(("fold:" + unit).encode()).hexdigest(), 16) % FOLDS


def _calibrated(it: dict) -> bool:
    """An answer whose stated confidence comes from the table (not a name, an option, a default)."""
    from spigap.core.infer import calibration as cal

    return (it["from"] == "inferred" and bool(it["basis"]) and it["setting"] in ("bus", "cs", "mosi", "miso", "mode")
            and it["basis"] not in cal.NEEDS_OPTIONS and it["basis"] not in cal.NOT_IN_CORPUS)


def _one_line(it: dict) -> bool:
    return it["setting"] in ("mosi", "miso") and it["basis"].startswith(("one", "static", "few"))


def _tally(rows, cap: int | None = None) -> dict:
    """(setting, basis, unit, right) rows -> (setting, basis) -> (answers, right, effective answers,
    effective right): each unit (a device's series: 55 files of one test pattern) counts as at most
    ``cap`` (UNIT_CAP) answers, with its own share right."""
    cap = UNIT_CAP if cap is None else cap
    per = collections.defaultdict(list)
    for setting, basis, unit, right in rows:
        per[(setting, basis, unit)].append(int(right))
    out: dict = {}
    for (setting, basis, _), rights in per.items():
        w = min(1.0, cap / len(rights))
        n, k, en, ek = out.get((setting, basis), (0, 0, 0.0, 0.0))
        out[(setting, basis)] = (n + len(rights), k + sum(rights), en + w * len(rights), ek + w * sum(rights))
    return out


def measured(results: list[dict]) -> dict:
    """(setting, basis) -> (answers, right, effective answers, effective right) of the inferred
    answers: calibration.py's table (one data line's direction: every true data line's basis)."""
    return _tally((it["setting"], it["basis"], r["unit"], it["right"]) for r in results for it in r.get("items") or []
                  if it["from"] == "inferred" and it["basis"] and not _one_line(it))


def unseen(results: list[dict], folds: list[int]) -> dict:
    """(setting group, "unseen") -> the tally of the answers whose basis the other folds (of
    ``folds``) never saw: what a never-seen basis is stated at, measured the way it is used."""
    from spigap.core.infer import calibration as cal

    rows = []
    for g in folds:
        table = measured([r for r in results if fold(r["unit"]) in folds and fold(r["unit"]) != g])
        for r in results:
            if fold(r["unit"]) != g:
                continue
            for it in r.get("items") or []:
                if _calibrated(it) and not _one_line(it) and (it["setting"], it["basis"]) not in table \
                        and (it["setting"], it["basis"]) not in cal.DEFAULTS:
                    rows.append((cal.group(it["setting"]), "unseen", r["unit"], it["right"]))
    return _tally(rows)


PRIOR_GRID = [round(0.1 * 10 ** (i / 20), 4) for i in range(41)]     # 0.1 .. 10, log-spaced


def fit_prior(table: dict) -> dict:
    """Setting group -> (a, b): the Beta prior of its bases' shares right that makes the measured
    answers most likely (the beta-binomial marginal likelihood of every basis' effective answers and
    right; a and b on a log grid of 0.1-10). Most bases are near always right (SPI evidence) or near
    always wrong (a look-alike's), which a U-shaped prior (a, b < 1) says: two right answers of one
    basis then say more than "one right and one wrong added" let them. One data line's direction is
    a group of its own; MOSI and MISO of two lines are one answer (counted once)."""
    from spigap.core.infer import calibration as cal

    groups: dict[str, list[tuple[float, float]]] = collections.defaultdict(list)
    for (setting, basis), (_, _, en, ek) in sorted(table.items()):
        if (setting, basis) in cal.DEFAULTS or setting == "miso":
            continue
        groups[cal.group(setting)].append((en, ek))

    def loglik(a: float, b: float, bases: list[tuple[float, float]]) -> float:
        lb = math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
        return sum(math.lgamma(k + a) + math.lgamma(n - k + b) - math.lgamma(n + a + b) - lb for n, k in bases)

    return {g: max(((a, b) for a in PRIOR_GRID for b in PRIOR_GRID), key=lambda ab: loglik(*ab, bases))
            for g, bases in sorted(groups.items())}


# the mode bases whose CPHA the signals settle (80 % or more of the data changes after one kind of
# edge, or a return-to-zero line): what the base rate of CPHA given CPOL is measured on
SETTLED_CPHA = ("clear", "clear, few", "mostly", "gated")


def cpha_table(results: list[dict]) -> dict:
    """CPOL -> (answers, with CPHA 1, effective answers, effective with CPHA 1) of the mode answers
    whose CPHA the signals settle (SETTLED_CPHA): the base rate of CPHA given CPOL a
    mode without data changes is stated at. The mode is a device's (all its captures share it):
    each unit is one answer, its captures' share (not UNIT_CAP answers: three captures of one
    device say no more than one about which mode the next device uses)."""
    rows = [("cpha", it["cpol"], r["unit"], it["cpha"] == 1) for r in results for it in r.get("items") or []
            if it["setting"] == "mode" and it["from"] == "inferred" and it["basis"] in SETTLED_CPHA
            and "cpol" in it]
    return {cpol: v for (_, cpol), v in sorted(_tally(rows, cap=1).items())}


def restate(it: dict, table: dict, unseen_table: dict, prior: dict | None = None, cpha: dict | None = None) -> dict:
    """An answer as a calibration of ``table``, ``unseen_table``, ``prior`` (default: fitted on
    ``table``) and ``cpha`` (the base rates of CPHA given CPOL) would state it (one data line: its
    role chosen again by the measured direction, right when that is the line's; a mode without
    data changes: its CPHA chosen again by the base rate, right when that reading is)."""
    from spigap.core.infer import calibration as cal

    if not _calibrated(it):
        return it
    if it["setting"] == "mode" and it["basis"] == cal.NO_CPHA and "ok_cpha" in it:
        c, conf = cal.cpha_prior(it["cpol"], cpha or {}) or (0, cal.DEFAULT_ONLY)
        return {**it, "cpha": c, "confidence": conf, "right": c in it["ok_cpha"]}
    prior = fit_prior(table) if prior is None else prior
    if _one_line(it):
        role, conf = cal.direction(it["basis"], table, prior) or ("mosi", cal.DEFAULT_ONLY)
        return {**it, "setting": role, "confidence": conf, "right": (role == "miso") == it.get("is_miso", False)}
    conf = cal.stated(it["setting"], it["basis"], table, unseen_table, prior)
    if it["setting"] in ("mosi", "miso"):
        conf = max(conf, 0.5)
    return {**it, "confidence": conf}


def crossval(results: list[dict]) -> list[dict]:
    """The results with every calibrated answer stated as the fit on the other folds states it
    (its prior fitted on those folds; a never-seen basis at the share of never-seen answers in
    those folds' own cross-validation)."""
    out = []
    for f in range(FOLDS):
        train = [r for r in results if fold(r["unit"]) != f]
        table = measured(train)
        prior = fit_prior(table)
        un = unseen(train, [g for g in range(FOLDS) if g != f])
        base = cpha_table(train)
        for r in results:
            if fold(r["unit"]) == f:
                out.append({**r, "items": [restate(it, table, un, prior, base) for it in r.get("items") or []
                                           if it["setting"] != "one line is miso"]})
    return out


def write_calibration(results: list[dict], path: Path) -> None:
    def rows(table: dict) -> str:
        return "".join(f"    {k!r}: ({n}, {k_}, {en:.2f}, {ek:.2f}),\n" for k, (n, k_, en, ek) in sorted(table.items()))

    path.write_text('"""Measured on sigrok-dumps (every .sr of <= 30 MB, named and renamed); written by '
                    'tests/sigrok_dumps_eval.py --calibrate (docs/inference.md, "Calibration")."""\n\n'
                    "# (setting, basis): (answers, right, effective answers, effective right): each unit (a device's\n"
                    f"# series of captures) counts as at most {UNIT_CAP} answers\n"
                    "MEASURED: dict[tuple[str, str], tuple[int, int, float, float]] = {\n" + rows(measured(results))
                    + "}\n\n# (setting group, \"unseen\"): the answers whose basis the other folds never saw, in a "
                    f"{FOLDS}-fold\n# cross-validation by device: what a never-seen basis is stated at\n"
                    "UNSEEN: dict[tuple[str, str], tuple[int, int, float, float]] = {\n"
                    + rows(unseen(results, list(range(FOLDS)))) + "}\n\n"
                    "# setting group: (a, b) of the Beta prior of its bases' shares right (the beta-binomial\n"
                    "# marginal likelihood of MEASURED's effective answers; a basis is stated at its posterior mean)\n"
                    "PRIOR: dict[str, tuple[float, float]] = {\n"
                    + "".join(f"    {g!r}: ({a}, {b}),\n" for g, (a, b) in fit_prior(measured(results)).items()) + "}\n\n"
                    "# CPOL: (settled answers, with CPHA 1, effective answers, effective with CPHA 1) of the SPI captures\n"
                    "# whose CPHA the signals settle: the base rate a CPHA without evidence is stated at\n"
                    "CPHA: dict[int, tuple[int, int, float, float]] = {\n"
                    + "".join(f"    {c}: ({n}, {k}, {en:.2f}, {ek:.2f}),\n" for c, (n, k, en, ek) in cpha_table(results).items())
                    + "}\n")


def level_of(confidence: float) -> float:
    """The level an answer is counted at: its confidence to the 0.05 below (the stated levels are
    multiples of 0.05; uncalibrated scores in between are binned)."""
    return round(int(round(confidence * 100, 6)) // 5 * 0.05, 2)


def reliability(results: list[dict], settings=("bus", "cs", "mosi", "miso", "mode")) -> str:
    """Per setting and stated confidence level: answers, how many right (the issue's reliability
    table); a refusal ("no SPI bus") is counted as its own row of the bus."""
    by = collections.defaultdict(list)
    for r in results:
        for it in r.get("items") or []:
            by[(it["setting"], level_of(it["confidence"]))].append(it["right"])
    lines = ["| setting | confidence | answers | right | share right |", "|---|---|---|---|---|"]
    for setting in settings:
        if setting == "bus":
            ref = [r for r in results if r["code"] == 2 and "no SPI bus" in r["error"] and r["kind"] != "either"]
            if ref:
                ok = sum(r["kind"] == "not" for r in ref)
                lines.append(f"| bus | refused (no SPI bus) | {len(ref)} | {ok} | {100 * ok / len(ref):.1f} % |")
        for (st, lv) in sorted((k for k in by if k[0] == setting), key=lambda k: -k[1]):
            rs = by[(st, lv)]
            lines.append(f"| {st} | {lv:.2f} | {len(rs)} | {sum(rs)} | {100 * sum(rs) / len(rs):.1f} % |")
    return "\n".join(lines)


def oof_table(results: list[dict]) -> str:
    """The out-of-fold reliability table (named | renamed columns) of results that say which they are."""
    oof = crossval(results)
    tabs = {ren: reliability([r for r in oof if r["renamed"] == ren]).splitlines()[2:] for ren in (False, True)}
    rows: dict = {}
    for ren, lines in tabs.items():
        for line in lines:
            c = [x.strip() for x in line.strip("|").split("|")]
            rows.setdefault((c[0], c[1]), {})[ren] = (c[2], c[3], c[4])
    order = sorted(rows, key=lambda k: (("bus", "cs", "mosi", "miso", "mode").index(k[0]),
                                        -1.0 if not k[1][0].isdigit() else -float(k[1])))
    out = ["| setting | confidence | named: answers | right | renamed to numbers: answers | right |",
           "|---|---|---|---|---|---|"]
    for k in order:
        cells = []
        for ren in (False, True):
            n, ok, sh = rows[k].get(ren, ("0", "–", ""))
            cells += [n, f"{ok} ({sh.replace(' %', ' %').split('.')[0]} %)" if sh else "–"]
        out.append(f"| {k[0]} | {k[1]} | " + " | ".join(cells) + " |")
    return "\n".join(out)


BANDS = ((0.8, 0.95, "0.80-0.95"), (0.55, 0.75, "0.55-0.75"), (0.5, 0.5, "0.50"), (0.05, 0.45, "0.05-0.45"))


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95 % Wilson score interval of a share right k of n (a closed form; few answers)."""
    if not n:
        return 0.0, 1.0
    p = k / n
    c = (p + z * z / (2 * n)) / (1 + z * z / n)
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, c - h), min(1.0, c + h)


def band_rows(oof: list[dict]) -> list[tuple[str, str, int, float, int]]:
    """(setting, band, answers, mean stated, right) of the calibrated out-of-fold answers (names,
    options and saved settings state 1.0 and are left out; MOSI and MISO of two lines count as
    two answers)."""
    by = collections.defaultdict(list)
    for r in oof:
        for it in r.get("items") or []:
            c = round(it["confidence"], 2)
            band = next((b for lo, hi, b in BANDS if lo <= c <= hi), None)
            if band is not None and it["from"] == "inferred":
                by[("MOSI/MISO" if it["setting"] in ("mosi", "miso") else it["setting"], band)].append(
                    (it["confidence"], it["right"]))
    order = ["bus", "cs", "MOSI/MISO", "mode"]
    return [(s, b, len(v), sum(c for c, _ in v) / len(v), sum(x for _, x in v))
            for s in order for _, _, b in BANDS for v in [by.get((s, b))] if v]


def bands(oof: list[dict]) -> str:
    """docs/inference.md's table by band: answers, mean stated, right, the 95 % interval of the
    share right, and whether the mean stated lies within 10 points of the share (the goal)."""
    out = ["| setting | stated | answers | mean stated | right | 95 % interval | within ±10 points |",
           "|---|---|---|---|---|---|---|"]
    for s, b, n, mean, k in band_rows(oof):
        lo, hi = wilson(k, n)
        out.append(f"| {s} | {b} | {n} | {mean:.2f} | {k} ({100 * k / n:.0f} %) | {100 * lo:.0f}-{100 * hi:.0f} % | "
                   f"{'yes' if abs(mean - k / n) <= 0.10 + 1e-9 else 'no'} |")
    return "\n".join(out)


def few_devices(results: list[dict], oof: list[dict]) -> tuple[int, float, int]:
    """(answers, mean stated, right) out of fold of the answers whose basis the fitting folds saw
    on one to three devices (not those on no evidence): what a small count is stated at."""
    from spigap.core.infer import calibration as cal

    got = []
    for f in range(FOLDS):
        units: dict = collections.defaultdict(set)
        for r in results:
            if fold(r["unit"]) != f:
                for it in r.get("items") or []:
                    units[(it["setting"], it["basis"])].add(r["unit"])
        for r in oof:
            if fold(r["unit"]) != f:
                continue
            for it in r.get("items") or []:
                if _calibrated(it) and not _one_line(it) and (it["setting"], it["basis"]) not in cal.DEFAULTS \
                        and 1 <= len(units.get((it["setting"], it["basis"]), ())) <= 3:
                    got.append((it["confidence"], it["right"]))
    return len(got), (sum(c for c, _ in got) / len(got) if got else 0.0), sum(x for _, x in got)


def line_family(results: list[dict]) -> list[dict]:
    """One data line's direction out of fold on the family it is fitted on: every true data line of
    the corpus' SPI captures taken as if it were the only one (``line_items``), its role and
    confidence stated by the fit on the folds without its device (calibration.direction), right
    when that role is the line's. The real answers (``crossval``) hold only the lines a capture
    with one data line asks about; these are the lines a user could capture alone."""
    from spigap.core.infer import calibration as cal

    out = []
    for f in range(FOLDS):
        table = measured([r for r in results if fold(r["unit"]) != f])
        prior = fit_prior(table)
        for r in results:
            if fold(r["unit"]) != f:
                continue
            got = []
            for it in r.get("items") or []:
                if it["setting"] == cal.DIRECTION:
                    role, conf = cal.direction(it["basis"], table, prior) or ("mosi", cal.DEFAULT_ONLY)
                    got.append({**it, "setting": role, "confidence": conf, "right": (role == "miso") == it["right"]})
            out.append({**r, "items": got})
    return out


def line_table(results: list[dict]) -> str:
    """docs/inference.md's table of one data line's direction out of fold on its 468-line family
    (``line_family``), by band as ``bands`` gives the real answers."""
    return bands(line_family(results)).replace("| MOSI/MISO |", "| one data line |")


def print_bands(results: list[dict]) -> None:
    oof = crossval(results)
    print()
    print(bands(oof))
    n, mean, k = few_devices(results, oof)
    if n:
        print(f"\nbases the fitting folds saw on one to three devices: {n} answers, stated {mean:.2f} on average, "
              f"{k} right ({100 * k / n:.0f} %)")
    print("\none data line's direction on every data line of the SPI captures, each as if captured alone:")
    print(line_table(results))


def run(args, which: str, renamed: bool) -> list[dict]:
    maps = conf_maps(args.test)
    rels = [r for r in files(args.dumps) if re.search(args.only, r)]
    if which != "all":
        rels = [r for r in rels if half(unit_of(r)) == which]
    jobs = [(str(args.dumps), r, renamed, maps) for r in rels]
    if args.jobs > 1:
        import multiprocessing

        with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
            return pool.map(_one, jobs, chunksize=4)
    return [_one(j) for j in jobs]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dumps", type=Path)
    ap.add_argument("test", type=Path)
    ap.add_argument("--half", choices=("dev", "held", "all"), default="all")
    ap.add_argument("--renamed", action="store_true", help="every channel renamed to its number")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--only", default="", help="a regular expression the relative paths must match")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--tables", nargs="+", type=Path, metavar="RESULTS_JSON",
                    help="only print the tables of earlier --out files (dumps and test are then ignored)")
    ap.add_argument("--calibrate", action="store_true",
                    help="write analyzer/spigap/core/infer/calibration_data.py from the whole corpus (named and "
                         "renamed; with --tables, from those results) and print the out-of-fold reliability table")
    ap.add_argument("--doc-table", nargs=2, type=Path, metavar=("NAMED_JSON", "RENAMED_JSON"),
                    help="only print docs/inference.md's table by family of two earlier --out files")
    args = ap.parse_args(argv)
    if args.doc_table:
        print(doc_table(*(json.loads(f.read_text()) for f in args.doc_table)))
        return 0
    if args.calibrate:
        if args.tables:
            results = [r for f in args.tables for r in json.loads(f.read_text())]
        else:
            results = run(args, "all", False) + run(args, "all", True)
            if args.out:
                args.out.write_text(json.dumps(results, indent=1))
        target = Path(__file__).resolve().parent.parent / "analyzer/spigap/core/infer/calibration_data.py"
        write_calibration(results, target)
        print(f"{target}: {len(measured(results))} bases from {len(results)} answers\n")
        print(oof_table(results))
        print_bands(results)
        return 0
    if args.tables:
        results = [r for f in args.tables for r in json.loads(f.read_text())]
        if all("renamed" in r for r in results):
            print(oof_table(results))
            print_bands(results)
            print()
        if args.half != "all":
            results = [r for r in results if r["half"] == args.half]
        print(table(results))
        print()
        print(reliability(results))
        return 0
    results = run(args, args.half, args.renamed)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))
    print(table(results))
    print()
    print(reliability(results))
    bad = [r for r in results if not r["right"]]
    print(f"\n{len(results) - len(bad)} of {len(results)} right")
    for r in bad:
        print(f"WRONG {r['file']}: {r['why']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
