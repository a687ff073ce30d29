"""Where spigap's sigrok protocol decoders are, and where libsigrokdecode looks.

The decoders are edited in ``decoders/<id>/`` at the top of the source tree.
``analyzer/sigrok/decoders`` is a symlink to it, so the package carries them
as package data: a wheel or sdist install has real copies there, an editable
install follows the link. They are found with ``importlib.resources``;
``SPIGAP_DECODERS`` overrides that.

libsigrokdecode 0.5.3 (``srd_init``) searches, the last one winning on equal
ids: ``$XDG_DATA_DIRS/*/libsigrokdecode/decoders`` (Debian:
``/usr/share/...``), the compile-time directory, the user directory
``$XDG_DATA_HOME/libsigrokdecode/decoders`` (default
``~/.local/share/libsigrokdecode/decoders``), then ``$SIGROKDECODE_DIR`` (one
directory).
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
SYSTEM_DECODERS = pathlib.Path("/usr/share/libsigrokdecode/decoders")


class DecodersNotFound(SpigapError):
    """The decoders directory (or one decoder) cannot be found."""


def _is_decoder_dir(p: pathlib.Path) -> bool:
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
        if c.is_dir() and any(_is_decoder_dir(d) for d in c.iterdir()):
            return c.resolve()
        raise DecodersNotFound(f"${ENV_OVERRIDE}={env} holds no decoders "
                               "(expected <dir>/<id>/__init__.py and pd.py)")
    packaged = _packaged()
    if packaged is not None and packaged.is_dir() and any(_is_decoder_dir(d) for d in packaged.iterdir()):
        return packaged.resolve()
    raise DecodersNotFound(f"spigap's sigrok decoders are missing from this installation ({packaged})",
                           hint=f"reinstall spigap, or set {ENV_OVERRIDE}=<checkout>/decoders")


def decoder_ids(root: pathlib.Path | None = None) -> list[str]:
    """Ids of the decoders in ``root`` (default: spigap's own), sorted."""
    root = root or decoders_dir()
    return sorted(d.name for d in root.iterdir() if d.is_dir() and _is_decoder_dir(d))


def user_decoders_dir(environ=None) -> pathlib.Path:
    """libsigrokdecode's per-user directory: $XDG_DATA_HOME/libsigrokdecode/decoders,
    default ~/.local/share/libsigrokdecode/decoders (as glib's g_get_user_data_dir)."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_DATA_HOME")
    if base and os.path.isabs(base):
        root = pathlib.Path(base)
    else:
        home = env.get("HOME") or os.path.expanduser("~")
        root = pathlib.Path(home) / ".local" / "share"
    return root / "libsigrokdecode" / "decoders"


def search_path(environ=None) -> list[pathlib.Path]:
    """libsigrokdecode's decoder directories, the one that wins first
    (SIGROKDECODE_DIR, the user directory, the compile-time one, XDG_DATA_DIRS
    from the last entry)."""
    env = os.environ if environ is None else environ
    out = []
    if env.get("SIGROKDECODE_DIR"):
        out.append(pathlib.Path(env["SIGROKDECODE_DIR"]))
    out.append(user_decoders_dir(env))
    out.append(SYSTEM_DECODERS)   # the compile-time directory (Debian)
    for d in reversed((env.get("XDG_DATA_DIRS") or "/usr/local/share:/usr/share").split(":")):
        if d:
            out.append(pathlib.Path(d) / "libsigrokdecode" / "decoders")
    seen, uniq = set(), []
    for p in out:
        if p not in seen:
            seen.add(p)
            uniq.append(p)
    return uniq


def find_decoder(decoder_id: str, extra_first: list[pathlib.Path] | None = None) -> pathlib.Path:
    """The directory of decoder ``decoder_id``: spigap's own first, then
    libsigrokdecode's search path (e.g. the stock ``spi``)."""
    roots = list(extra_first or [])
    try:
        roots.append(decoders_dir())
    except DecodersNotFound:
        pass
    roots += search_path()
    for r in roots:
        d = r / decoder_id
        if _is_decoder_dir(d):
            return d
    raise DecodersNotFound(f"no sigrok decoder {decoder_id!r} (looked in "
                           f"{', '.join(str(r) for r in roots)})")


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
