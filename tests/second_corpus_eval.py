"""Judge the settings' confidences on a held-out corpus (issue 32): real captures from public
repositories that are not in sigrok-dumps, listed with their truth in a manifest:
tests/data/second_corpus.toml (the default) or tests/data/third_corpus.toml (captures in neither
sigrok-dumps nor the second corpus, gathered to measure the final code once). The shipped
calibration (core/infer/calibration_data.py) was fitted on sigrok-dumps only, so every answer here
is out of sample.

    python tests/second_corpus_eval.py DIR [--manifest tests/data/third_corpus.toml] [--out results.json]

DIR holds the captures at the manifest's ``file`` paths (fetched from each ``repo`` at ``commit``;
a missing file or one whose sha256 differs is skipped, said so). Each capture is analyzed as a new
user runs it, ``spigap detect FILE --format json`` with no options, and again with every channel
renamed to its number when the first run took a setting from a channel's name or the file's saved
settings (a capture whose names say nothing is already the unnamed case). The answers are judged, and the reliability
tables printed, with sigrok_dumps_eval.py's functions (one judge for both corpora): the table by
level, the table by band in docs/inference.md's format, and one line per capture.

Non-.sr captures are renamed by writing them as a .sr first (``spigap convert``, the edges as
spigap reads them), then renaming that .sr's channels (``sigrok_dumps_eval.renamed_copy``).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import sys
import tempfile
import tomllib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import sigrok_dumps_eval as sde  # noqa: E402  (the judge and tables of the first corpus)

MANIFEST = Path(__file__).resolve().parent / "data" / "second_corpus.toml"
THIRD = MANIFEST.with_name("third_corpus.toml")
ROLES = ("clk", "cs", "mosi", "miso")


def load(path: Path = MANIFEST) -> list[dict]:
    """The manifest's captures, each checked for the fields the judge needs."""
    caps = tomllib.loads(path.read_text())["capture"]
    for c in caps:
        missing = [k for k in ("file", "repo", "commit", "path", "sha256", "device", "kind", "truth") if k not in c]
        if missing:
            raise ValueError(f"{path}: {c.get('file', '?')}: missing {', '.join(missing)}")
        if c["kind"] not in ("spi", "not"):
            raise ValueError(f"{path}: {c['file']}: kind must be spi or not, not {c['kind']!r}")
        if c["kind"] == "spi" and not c.get("clk"):
            raise ValueError(f"{path}: {c['file']}: an SPI capture needs its clk")
        if c.get("mode") is not None and c.get("edge"):
            raise ValueError(f"{path}: {c['file']}: give mode or edge, not both")
        if c.get("edge") not in (None, *sde.EDGE_MODES):
            raise ValueError(f"{path}: {c['file']}: edge must be one of {sorted(sde.EDGE_MODES)}")
    return caps


def truth(cap: dict, rename: dict[str, str] | None = None) -> dict:
    """The judge's truth (sigrok_dumps_eval.truth's keys) of a manifest entry; ``rename`` maps the
    file's channel names to those of its renamed copy. The unit (what a device's answers are
    grouped by) is the repository and the device."""
    rename = rename or {}
    t: dict = {"file": cap["file"], "family": cap["kind"], "unit": f"{cap['repo']}/{cap['device']}",
               "half": "held", "kind": cap["kind"], "lookalike": list(cap.get("lookalike", []))}
    if cap["kind"] != "spi":
        return t
    t["roles"] = {r: rename.get(cap[r], cap[r]) for r in ROLES if cap.get(r)}
    t["cs_optional"] = bool(cap.get("cs_optional"))
    t["mode"] = cap.get("mode")
    if cap.get("edge"):
        t["edge"] = cap["edge"]
    return t


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def as_sr(path: Path, tmp: Path) -> Path:
    """The capture as a .sr (itself when it is one): what ``renamed_copy`` renames."""
    if path.suffix == ".sr":
        return path
    from spigap.cli import main

    out = tmp / (path.stem + ".sr")
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            code = main(["convert", str(path), "-o", str(out)])
        except SystemExit as e:
            code = int(e.code or 0)
    if code != 0:
        raise RuntimeError(err.getvalue().strip() or f"spigap convert: exit {code}")
    return out


def named_any(res: dict) -> bool:
    """Whether the answer took a setting from a channel's name (or the file's saved settings,
    which name channels too)."""
    d = res.get("json")
    return bool(d) and any(s.get("from") in ("name", "file") for s in d["sources"].values())


def one(cap: dict, path: Path, renamed: bool, tmp: Path) -> dict:
    """The result of one run (the keys sigrok_dumps_eval's tables read)."""
    t = truth(cap)
    if renamed:
        # by position: spigap convert keeps the channels' order (and writes "Channel 0" as "Channel_0")
        names = sde.channel_names(path)
        (tmp / "renamed").mkdir(exist_ok=True)
        path = sde.renamed_copy(as_sr(path, tmp), tmp / "renamed")
        t = truth(cap, dict(zip(names, sde.channel_names(path))))
    if t.get("roles"):
        try:
            static, same = sde.prefix_facts(path, t["roles"])
        except Exception:  # noqa: BLE001 - an unreadable capture is judged by its detect answer
            static, same = set(), False
        t["cs_static"] = bool(t["roles"].get("cs")) and t["roles"]["cs"] in static
        t["same_sample"] = same
    res = sde.run_detect(str(path))
    ok, why = sde.judge(t, res)
    d = res.get("json")
    return {**t, "renamed": renamed, "right": ok, "why": why, "code": res["code"], "error": res["error"][:300],
            "device": cap["device"], "settings": d["settings"] if d else None,
            "confidence": {k: v["confidence"] for k, v in d["sources"].items()} if d else None,
            "items": sde.items(t, res), "named_any": named_any(res)}


def run(root: Path, caps: list[dict]) -> tuple[list[dict], list[str]]:
    """Every capture named, and renamed where names were used; (results, skipped lines)."""
    results, skipped = [], []
    for cap in caps:
        path = root / cap["file"]
        if not path.is_file():
            skipped.append(f"{cap['file']}: absent (fetch {cap['path']} of {cap['repo']} at {cap['commit'][:10]})")
            continue
        if sha256(path) != cap["sha256"]:
            skipped.append(f"{cap['file']}: sha256 differs from the manifest's")
            continue
        pvs = path.with_suffix(".pvs")
        if cap.get("pvs_sha256") and not (pvs.is_file() and sha256(pvs) == cap["pvs_sha256"]):
            # PulseView's saved decoder beside the .sr is part of what the named run reads
            skipped.append(f"{cap['file']}: its .pvs is absent or differs from the manifest's")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            r = one(cap, path, False, Path(tmp))
            results.append(r)
            if r["named_any"]:
                try:
                    results.append(one(cap, path, True, Path(tmp)))
                except Exception as e:  # noqa: BLE001 - said per capture, the rest still run
                    skipped.append(f"{cap['file']}: renamed copy not made: {e}")
    return results, skipped


def capture_table(results: list[dict]) -> str:
    """One line per run: the answer's clock, CS, data lines and mode with their confidences."""
    out = ["| capture | device | channels | right | answer | why |", "|---|---|---|---|---|---|"]
    for r in results:
        s, c = r["settings"], r["confidence"] or {}
        if s:
            data = ",".join(x for x in (s.get("mosi"), s.get("miso")) if x) or "–"
            ans = (f"clk {s['clk']} {c.get('clk', 0):.2f}, cs {s['cs'] or '–'} {c.get('cs', 0):.2f}, "
                   f"data {data}, mode {s['mode']} {c.get('mode', 0):.2f}")
        else:
            ans = f"exit {r['code']}: " + r["error"].split(": ", 2)[-1][:80]
        out.append(f"| {r['file']} | {r['device']} | {'numbers' if r['renamed'] else 'named'} | "
                   f"{'yes' if r['right'] else 'no'} | {ans} | {r['why'][:90]} |")
    return "\n".join(out)


def band_devices(results: list[dict]) -> str:
    """Who stands behind each band of ``sde.bands``: per device (a unit), its answers and how many
    right, so that a band carried by one device's series of captures reads as such."""
    by: dict = {}
    for r in results:
        for it in r.get("items") or []:
            c = round(it["confidence"], 2)
            band = next((b for lo, hi, b in sde.BANDS if lo <= c <= hi), None)
            if band is None or it["from"] != "inferred":
                continue
            setting = "MOSI/MISO" if it["setting"] in ("mosi", "miso") else it["setting"]
            n, k = by.setdefault((setting, band), {}).get(r["device"], (0, 0))
            by[(setting, band)][r["device"]] = (n + 1, k + int(it["right"]))
    out = ["| setting | stated | devices | per device: right of answers |", "|---|---|---|---|"]
    order = {s: i for i, s in enumerate(("bus", "cs", "MOSI/MISO", "mode"))}
    bands = [b for _, _, b in sde.BANDS]
    for (setting, band), devs in sorted(by.items(), key=lambda kv: (order[kv[0][0]], bands.index(kv[0][1]))):
        out.append(f"| {setting} | {band} | {len(devs)} | "
                   + "; ".join(f"{d.split(' (')[0]}: {k} of {n}" for d, (n, k) in sorted(devs.items())) + " |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", type=Path, help="the folder holding the captures at the manifest's file paths")
    ap.add_argument("--manifest", type=Path, default=MANIFEST,
                    help=f"the captures and their truth (default {MANIFEST.name}; {THIRD.name} is the third corpus)")
    ap.add_argument("--out", type=Path, help="write the results as JSON")
    args = ap.parse_args(argv)
    caps = load(args.manifest)
    results, skipped = run(args.dir, caps)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))
    for line in skipped:
        print(f"skipped {line}")
    devices = {r["unit"] for r in results}
    spi = {r["unit"] for r in results if r["kind"] == "spi"}
    print(f"{len(results)} runs of {len({r['file'] for r in results})} captures, {len(devices)} devices "
          f"({len(spi)} SPI); {sum(r['right'] for r in results)} right\n")
    print(capture_table(results))
    print()
    print(sde.reliability(results))
    print()
    print(sde.bands(results))
    print()
    print(band_devices(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
