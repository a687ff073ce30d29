"""What a sigrok protocol decoder declares: channels, options, annotations.

Read from the decoder's Python class, the way libsigrokdecode reads it, but
without libsigrokdecode: the decoder package is imported with a stand-in
``sigrokdecode`` module that provides only what decoders use at import time
(the ``Decoder`` base class and the constants). Nothing is run.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import pathlib
import sys
import types
from typing import Any

from spigap.errors import UsageError
from spigap import resources
from spigap.sigrok import paths

def spi_options(cfg) -> dict:
    """The SPI settings of a SpiConfig as sigrok's spi decoder options (spi_gaps shares
    their names; it has no bitorder): for sigrok-cli -P, PulseView's dialog and .pvs files."""
    return {"cpol": cfg.cpol, "cpha": cfg.cpha,
            "cs_polarity": "active-low" if cfg.cs_active_low else "active-high",
            "wordsize": cfg.wordsize, "bitorder": "lsb-first" if cfg.lsb_first else "msb-first"}


# GVariant type strings libsigrokdecode uses for option values (decoder.c / util.c)
GVARIANT_TYPE = {str: "s", int: "x", float: "d"}


@dataclasses.dataclass(frozen=True)
class Channel:
    id: str
    name: str
    desc: str
    optional: bool


@dataclasses.dataclass(frozen=True)
class Option:
    id: str
    desc: str
    default: object
    values: tuple | None

    @property
    def gvariant_type(self) -> str:
        return GVARIANT_TYPE[type(self.default)]

    def parse(self, text: str, decoder_id: str):
        """A value given as text (as on sigrok-cli's -P), in the option's type."""
        kind = type(self.default)
        value: object
        try:
            value = int(text) if kind is int else float(text) if kind is float else text
        except ValueError:
            raise UsageError(f"{decoder_id}: option {self.id} takes a{'n integer' if kind is int else ' number'}, "
                             f"not {text!r}") from None
        if self.values is not None and value not in self.values:
            raise UsageError(f"{decoder_id}: option {self.id} must be one of "
                             f"{', '.join(str(v) for v in self.values)}, not {text!r}")
        return value


@dataclasses.dataclass(frozen=True)
class DecoderInfo:
    id: str
    name: str
    longname: str
    inputs: tuple
    outputs: tuple
    channels: tuple          # required, then optional: the decoder's channel order
    options: tuple
    annotations: tuple       # (class id, description)
    annotation_rows: tuple   # (row id, description, class indices)
    path: pathlib.Path

    def channel(self, key: str) -> Channel | None:
        for c in self.channels:
            if c.id == key:
                return c
        return None

    def option(self, key: str) -> Option | None:
        for o in self.options:
            if o.id == key:
                return o
        return None


def _stub() -> types.ModuleType:
    m = types.ModuleType("sigrokdecode")

    class Decoder:
        pass

    # setattr: a module object built at run time, which a type checker cannot know
    for attr, value in (("Decoder", Decoder), ("OUTPUT_ANN", 0), ("OUTPUT_PYTHON", 1), ("OUTPUT_BINARY", 2),
                        ("OUTPUT_META", 3), ("SRD_CONF_SAMPLERATE", 10000)):
        setattr(m, attr, value)
    return m


def load_decoder_class(directory: pathlib.Path) -> Any:
    """The ``Decoder`` class of the decoder package in ``directory`` (``<root>/<id>``),
    imported under the stand-in ``sigrokdecode`` module (the one stand-in: the tests
    use it too); ``sys.modules`` is left as it was. Raises what the import raises."""
    directory = pathlib.Path(directory)
    saved_modules = set(sys.modules)
    saved_srd = sys.modules.get("sigrokdecode")
    saved_path = list(sys.path)
    name = f"_spigap_pdinfo_{directory.name}"
    sys.modules["sigrokdecode"] = _stub()
    sys.path.insert(0, str(directory.parent))   # for decoders importing 'common'
    try:
        spec = resources.module_spec(name, directory / "__init__.py", package_dir=directory)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        return mod.Decoder
    finally:
        for k in set(sys.modules) - saved_modules:
            del sys.modules[k]
        if saved_srd is None:
            sys.modules.pop("sigrokdecode", None)
        else:
            sys.modules["sigrokdecode"] = saved_srd
        sys.path[:] = saved_path


def read_decoder(directory: pathlib.Path) -> DecoderInfo:
    """Import the decoder package in ``directory`` (``<root>/<id>``) and read its class."""
    directory = pathlib.Path(directory)
    try:
        cls = load_decoder_class(directory)
        chans = tuple(Channel(c["id"], c["name"], c["desc"], False) for c in getattr(cls, "channels", ()))
        chans += tuple(Channel(c["id"], c["name"], c["desc"], True)
                       for c in getattr(cls, "optional_channels", ()))
        opts = tuple(Option(o["id"], o.get("desc", ""), o.get("default"),
                            tuple(o["values"]) if "values" in o else None)
                     for o in getattr(cls, "options", ()))
        return DecoderInfo(id=cls.id, name=cls.name, longname=getattr(cls, "longname", cls.name),
                           inputs=tuple(cls.inputs), outputs=tuple(cls.outputs), channels=chans,
                           options=opts, annotations=tuple(getattr(cls, "annotations", ())),
                           annotation_rows=tuple(getattr(cls, "annotation_rows", ())),
                           path=directory)
    except Exception as e:
        raise UsageError(f"cannot read the sigrok decoder in {directory}: {type(e).__name__}: {e}") from None


def load(decoder_id: str) -> DecoderInfo:
    """The decoder ``decoder_id`` as PulseView would find it (spigap's own first)."""
    try:
        d = paths.find_decoder(decoder_id)
    except resources.DecodersNotFound as e:
        raise UsageError(str(e), hint="check the id with sigrok-cli -L") from None
    return read_decoder(d)
