"""A recipe of either form into its model (recipe.py): the one way in for spigap synth,
the bench and scripts."""

from __future__ import annotations

import json

from spigap.synth.bus import Bus
from spigap.synth.recipe import is_bus, read
from spigap.synth.scenario import Scenario


def load(path=None, overrides: dict | None = None, *, text: str | None = None) -> Scenario | Bus:
    """The recipe in the file ``path`` (or ``text``; neither: every default), keys in
    ``overrides`` set over it: a Bus when it has [[device]] tables, else a Scenario."""
    data, text = read(path, text)
    model = Bus if is_bus(data) else Scenario
    return model.from_tables(data, text, overrides, path)


def toml_text(scenario: dict) -> str:
    """A recipe written as a dict ({"capture": {...}, ..., "device": [{...}, ...]}) as TOML text
    (spigap bench's shared-bus capture)."""
    def value(v):
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, dict):
            return "{ " + ", ".join(f"{k} = {value(x)}" for k, x in v.items()) + " }"
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return repr(v)

    lines = []
    for section, body in scenario.items():
        if section == "device":
            for d in body:
                lines.append("[[device]]")
                lines += [f"{k} = {value(v)}" for k, v in d.items()]
        else:
            lines.append(f"[{section}]")
            lines += [f"{k} = {value(v)}" for k, v in body.items()]
    return "\n".join(lines) + "\n"
