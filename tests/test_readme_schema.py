"""The README's JSON schema of 'spigap analyze --format json' is complete: every
key the real output has (with --transfers, --device, --event, with and without
CS) is listed there, and every listed object key exists in some real output."""

from __future__ import annotations

import json
import re

import pytest
from conftest import CAPTURES, ROOT

from spigap.cli import main

ANY = object()          # "{...}", "[...]" or a bare word key: anything goes


def readme_schema(heading: str = "### JSON output (`--format json`") -> dict:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    sec = text[text.index(heading):]
    block = sec[sec.index("```") + 3:]
    block = block[:block.index("```")]
    block = re.sub(r"#[^\n]*", "", block)           # comments
    block = re.sub(r"\([^)]*\)", "", block)         # (no-CS captures only)
    toks = re.findall(r'"[^"]*"|\.\.\.|[{}\[\]:,|]|[A-Za-z_][\w.-]*|-?[0-9][\w.+-]*', block)
    pos = 0

    def peek():
        return toks[pos] if pos < len(toks) else None

    def take(expected=None):
        nonlocal pos
        t = toks[pos]
        assert expected is None or t == expected, f"README schema: expected {expected!r} at {t!r}"
        pos += 1
        return t

    def value():
        t = peek()
        if t == "{":
            return obj()
        if t == "[":
            take("[")
            items = []
            while peek() != "]":
                items.append(value())
                if peek() == ",":
                    take(",")
            take("]")
            return ("list", items[0] if items else ANY)
        if t == "...":
            take()
            return ANY
        take()                                       # a scalar example
        while peek() == "|":
            take("|")
            take()
        return "scalar"

    def obj():
        take("{")
        keys: dict = {}
        while peek() != "}":
            if peek() == "...":
                take()
                keys[ANY] = ANY
            else:
                names = [take()]
                while peek() == "|":
                    take("|")
                    names.append(take())
                v = value() if peek() == ":" and take(":") else "scalar"
                for n in names:
                    keys[n.strip('"') if n.startswith('"') else ANY] = v
            if peek() == ",":
                take(",")
        take("}")
        return keys

    return obj()


def unlisted(data, schema, path="") -> list[str]:
    """Keys of ``data`` the schema does not list."""
    if schema is ANY or data is None:
        return []
    if isinstance(schema, tuple):                   # a list
        assert isinstance(data, list), path
        return [m for item in data for m in unlisted(item, schema[1], path + "[]")][:20]
    if schema == "scalar":
        return [] if not isinstance(data, dict) else [f"{path}.{k}" for k in data]
    assert isinstance(data, dict), f"{path}: README lists an object, output has {type(data).__name__}"
    out = []
    for k, v in data.items():
        if k in schema:
            out += unlisted(v, schema[k], f"{path}.{k}")
        elif ANY in schema:
            out += unlisted(v, schema[ANY], f"{path}.{k}")
        else:
            out.append(f"{path}.{k}")
    return out


def listed_paths(schema, path=""):
    if isinstance(schema, tuple):
        yield from listed_paths(schema[1], path + "[]")
    elif isinstance(schema, dict):
        for k, v in schema.items():
            p = f"{path}.{'*' if k is ANY else k}"
            yield p
            yield from listed_paths(v, p)


def seen_paths(data, path=""):
    if isinstance(data, list):
        for item in data:
            yield from seen_paths(item, path + "[]")
    elif isinstance(data, dict):
        for k, v in data.items():
            yield f"{path}.{k}"
            yield from seen_paths(v, f"{path}.{k}")


def analyze_json(capsys, *argv) -> dict:
    assert main(["analyze", *map(str, argv), "--format", "json"]) in (0, 2)
    return json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    from spigap.synth import scenario, write

    d = tmp_path_factory.mktemp("schema")
    ad = d / "ad.sr"
    write(scenario.Scenario.from_toml(CAPTURES / "ad7606-douta-after.toml"), ad)
    return [
        ([CAPTURES / "mcp3008-rpi3-k4.4-b10.sr", "--device", "mcp3008", "--event", "CE0:fall"]),
        ([ad, "--mode", "2", "--event", "CONVST:rise", "--event", "BUSY:fall", "--transfers"]),
        ([CAPTURES / "mcp3008-rpi3-k4.4-b1.sr", "--no-cs", "--transfers"]),     # framed by SCLK idle
    ]


def test_readme_schema_lists_every_key(outputs, capsys):
    schema = readme_schema()
    seen = set()
    for argv in outputs:
        d = analyze_json(capsys, *argv)
        missing = unlisted(d, schema)
        assert not missing, f"keys in the output of analyze {argv} that README.md does not list: {missing}"
        seen.update(seen_paths(d))
    # and the README lists nothing that no output has (wildcards aside)
    norm = {re.sub(r"\.(cs_setup|cs_hold|inter_byte|inter_transfer|cs_change|context_switch|class_a|class_b|idle)(?=\.)",
                   ".*", p) for p in seen}
    listed = {re.sub(r"\.(cs_setup|cs_hold|inter_byte|inter_transfer|cs_change|context_switch|class_a|class_b|idle)(?=\.|$)",
                     ".*", p) for p in listed_paths(schema)}
    stale = sorted(p for p in listed if p not in norm and not re.search(r"\.\*|\.(transfer_duration|"
                                                                        r"transfer_period|interval|period|"
                                                                        r"high|low)", p))
    assert not stale, f"README.md lists keys no output has: {stale}"


def test_the_schema_check_catches_an_unlisted_key():
    schema = readme_schema()
    assert unlisted({"summary": {"transfers": 1, "new_key": 2}}, schema) == [".summary.new_key"]
    assert unlisted({"stalls": {"stalls": [{"kind": "x", "extra": 1}]}}, schema) == [".stalls.stalls[].extra"]


def test_readme_lists_every_key_of_a_shared_bus(capsys):
    """The shared-bus document (docs/shared-bus.md): its own listing, devices' objects as
    one device's (checked against the first listing), and the rows' extra keys."""
    schema = readme_schema("### Shared bus JSON")
    one = readme_schema()
    # an event chain on one device (--event DEVICE=...): its "events", as one device's
    d = analyze_json(capsys, CAPTURES / "shared-three-faults.sr", "--transfers", "--event", "CS1=SDO:rise")
    assert "events" in d["devices"]["CS1"] and "events" not in d["devices"]["CS0"]
    missing = unlisted(d, schema)
    for name, dev in d["devices"].items():
        missing += unlisted({k: v for k, v in dev.items() if k != "interleave"}, one, f".devices.{name}")
    assert not missing, f"keys of a shared bus's JSON that README.md does not list: {missing}"
    listed = {re.sub(r"\.(cs_change|context_switch|class_a|class_b)(?=\.|$)", ".*", p) for p in listed_paths(schema)}
    seen = {re.sub(r"\.(cs_change|context_switch|class_a|class_b)(?=\.|$)", ".*", p)
            for p in seen_paths(d)}
    seen = {re.sub(r"^\.devices\.CS[0-9]", ".devices.*", p) for p in seen}
    stale = sorted(p for p in listed if p not in seen and not p.endswith(".*") and "device" != p.rsplit(".", 1)[-1])
    assert not stale, f"README.md lists shared-bus keys no output has: {stale}"
