"""Files the package carries, found wherever it is installed.

The sigrok decoders are edited in ``decoders/<id>/`` at the top of the source
tree; ``analyzer/spigap/sigrok/decoders`` is a symlink to it, so the package carries
them as package data: a wheel or sdist install has real copies there, an
editable install follows the link. They are found with ``importlib.resources``;
``SPIGAP_DECODERS`` overrides that. Their plain modules (the gap rules, the
devices' protocol tables and decoding) are loaded by path from here: the one
implementation the analyzer and PulseView share.
"""

from __future__ import annotations

import importlib.machinery
import importlib.resources
import importlib.util
import os
import pathlib
import sys

from spigap.errors import SpigapError

ENV_OVERRIDE = "SPIGAP_DECODERS"


class DecodersNotFound(SpigapError):
    """The decoders directory (or one decoder) cannot be found."""


def is_decoder_dir(p: pathlib.Path) -> bool:
    return (p / "__init__.py").is_file() and (p / "pd.py").is_file()


def _packaged() -> pathlib.Path | None:
    """The decoders shipped inside the package, when they are files on disk."""
    res = importlib.resources.files("spigap.sigrok").joinpath("decoders")
    return res if isinstance(res, pathlib.Path) else None


def decoders_dir() -> pathlib.Path:
    """The directory holding spigap's decoders (one subdirectory per decoder id)."""
    env = os.environ.get(ENV_OVERRIDE)
    if env:
        c = pathlib.Path(env)
        if c.is_dir() and any(is_decoder_dir(d) for d in c.iterdir()):
            return c.resolve()
        raise DecodersNotFound(f"${ENV_OVERRIDE}={env} holds no decoders "
                               "(expected <dir>/<id>/__init__.py and pd.py)")
    packaged = _packaged()
    if packaged is not None and packaged.is_dir() and any(is_decoder_dir(d) for d in packaged.iterdir()):
        return packaged.resolve()
    raise DecodersNotFound(f"spigap's sigrok decoders are missing from this installation ({packaged})",
                           hint=f"reinstall spigap, or set {ENV_OVERRIDE}=<checkout>/decoders")


def decoder_ids(root: pathlib.Path | None = None) -> list[str]:
    """Ids of the decoders in ``root`` (default: spigap's own), sorted."""
    root = root or decoders_dir()
    return sorted(d.name for d in root.iterdir() if d.is_dir() and is_decoder_dir(d))


def module_spec(name: str, path: pathlib.Path, package_dir: pathlib.Path | None = None):
    """The import spec of the Python file ``path`` under the module name ``name``
    (a package when ``package_dir`` is given); DecodersNotFound when it is not
    a loadable Python file."""
    spec = importlib.util.spec_from_file_location(
        name, path, submodule_search_locations=None if package_dir is None else [str(package_dir)])
    if spec is None or spec.loader is None:
        raise DecodersNotFound(f"{path} cannot be loaded as a Python module")
    return spec


def load_plain_module(directory: pathlib.Path, module: str, package: str):
    """Import ``directory/<module>.py`` as ``<package>.<module>``, ``package`` being a
    bare package over ``directory``: its ``__init__.py`` is not run (a decoder's imports
    ``pd.py``, which needs libsigrokdecode's ``sigrokdecode`` module), yet the module
    may import its plain siblings relatively (``from .lists import ...``), as it does
    when libsigrokdecode imports the decoder directory as a package."""
    path = directory / f"{module}.py"
    if not path.is_file():
        raise DecodersNotFound(f"{path} does not exist")
    name = f"{package}.{module}"
    if name in sys.modules:
        return sys.modules[name]
    if package not in sys.modules:
        pkg_spec = importlib.machinery.ModuleSpec(package, None, is_package=True)
        pkg_spec.submodule_search_locations = [str(directory)]
        sys.modules[package] = importlib.util.module_from_spec(pkg_spec)
    spec = module_spec(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        del sys.modules[name]
        raise
    return mod


def load_decoder_module(decoder_id: str, module: str):
    """Import a plain module of one of spigap's decoders (e.g. ``spi_gaps``'s
    ``gapdefs``) without importing the decoder itself (see load_plain_module)."""
    return load_plain_module(decoders_dir() / decoder_id, module, f"spigap_decoders.{decoder_id}")
