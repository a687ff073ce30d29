"""``spigap analyze --format json`` is byte for byte what it was when these files were
written, on every bundled and real capture: a change to the analysis path (the pipeline,
the framers, measurement, grouping, inference) that changes a figure fails here, naming
the first key that differs.

The expected documents (tests/golden/analyze/<capture>.json.gz) were written by the
analysis before its pipeline was restructured (issue 19); the capture's path is
``<capture>``, the version and the engine are masked. When a change of output is meant,
rewrite them with ``SPIGAP_UPDATE_GOLDEN=1`` and say why in the commit.
"""

from __future__ import annotations

import gzip
import json
import os
import re

import pytest
from conftest import CAPTURES, REAL, ROOT

from spigap.cli import main

GOLDEN = ROOT / "tests" / "golden" / "analyze"
OPTIONS = {"spi__ad7920__ad7920_fast_read.sr": ["--samplerate", "5MHz"]}   # its metadata says 5 Hz


def _cases():
    out = []
    for g in sorted(GOLDEN.glob("*.json.gz")):
        name = g.name[:-len(".json.gz")]
        path = CAPTURES / name
        if not path.exists():
            path = REAL / name
        out.append(pytest.param(path, g, id=name))
    return out


def _mask(text: str, path) -> str:
    text = text.replace(json.dumps(str(path)), '"<capture>"')
    text = re.sub(r'^ "spigap": "[^"]*",$', ' "spigap": "<version>",', text, count=1, flags=re.M)
    return re.sub(r'^ "engine": "[^"]*",$', ' "engine": "<engine>",', text, count=1, flags=re.M)


def _first_difference(want, have, where=""):
    if isinstance(want, dict) and isinstance(have, dict):
        for k in list(want) + [k for k in have if k not in want]:
            if k not in want or k not in have:
                return f"{where}/{k}: only in {'the output' if k in have else 'the golden file'}"
            d = _first_difference(want[k], have[k], f"{where}/{k}")
            if d:
                return d
        return None
    if isinstance(want, list) and isinstance(have, list):
        for i, (p, q) in enumerate(zip(want, have)):
            d = _first_difference(p, q, f"{where}[{i}]")
            if d:
                return d
        return None if len(want) == len(have) else f"{where}: {len(want)} items became {len(have)}"
    return None if want == have else f"{where}: {want!r} became {have!r}"


def test_every_bundled_and_real_capture_has_a_golden_document():
    names = {g.name[:-len(".json.gz")] for g in GOLDEN.glob("*.json.gz")}
    bundled = {p.name for p in CAPTURES.glob("*.sr")}
    assert bundled <= names, f"no golden JSON for {sorted(bundled - names)}"
    if REAL.is_dir():
        real = {p.name for p in REAL.iterdir() if p.suffix in (".sr", ".dsl")}
        assert real <= names, f"no golden JSON for {sorted(real - names)}"


@pytest.mark.parametrize("path,golden", _cases())
def test_analyze_json_is_unchanged(path, golden, capsys):
    if not path.exists():
        pytest.skip(f"{path} is not here")
    code = main(["analyze", str(path), "--format", "json", *OPTIONS.get(path.name, [])])
    out = capsys.readouterr().out
    assert code == 0
    have = _mask(out, path)
    if os.environ.get("SPIGAP_UPDATE_GOLDEN"):
        with gzip.GzipFile(golden, "wb", mtime=0) as g:
            g.write(have.encode())
    want = _mask(gzip.decompress(golden.read_bytes()).decode(), path)
    if have != want:
        diff = _first_difference(json.loads(want), json.loads(have)) or "the same JSON, other bytes"
        pytest.fail(f"{path.name}: the output changed: {diff}")
