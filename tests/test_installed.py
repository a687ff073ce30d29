"""What a user installs: the wheel carries the compiled core and the decoders,
needs no compiler at run time, and an sdist built without a compiler falls
back to the numpy engine, saying so once.

``make test`` runs the whole suite against the wheel installed in a fresh
venv from outside the checkout (``SPIGAP_TEST_INSTALLED=1``) and hands this
file the sdist it built (``SPIGAP_SDIST``); on an editable checkout
(``make test-dev``) the installed-only checks are skipped.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest
from conftest import CAPTURES, DECODERS, ROOT, SOURCE_DECODERS, real

import spigap
from spigap import native
from spigap import resources

INSTALLED = os.environ.get("SPIGAP_TEST_INSTALLED") == "1"
installed_only = pytest.mark.skipif(not INSTALLED, reason="runs against the installed wheel (make test)")
DEMO = CAPTURES / "mcp3008-rpi3-k4.4-b10.sr"


def _no_compiler_path(tmp_path: pathlib.Path) -> str:
    """A PATH whose cc/gcc/clang fail loudly and leave a mark when called."""
    shims = tmp_path / "nocc"
    shims.mkdir()
    mark = tmp_path / "compiler-called"
    for name in ("cc", "gcc", "clang", "c99"):
        p = shims / name
        p.write_text(f"#!/bin/sh\ntouch {mark}\nexit 1\n")
        p.chmod(0o755)
    return f"{shims}:{os.path.dirname(sys.executable)}:/usr/bin:/bin"


def test_packaged_decoders_are_the_source_ones():
    """The one copy edited by hand (decoders/) is what the package carries."""
    ids = resources.decoder_ids()
    assert ids == ["ad7606", "mcp2518fd", "mcp3008", "spi_gaps", "spi_pins"]
    for i in ids:
        src = sorted(p.name for p in (SOURCE_DECODERS / i).glob("*.py"))
        assert sorted(p.name for p in (DECODERS / i).glob("*.py")) == src
        for name in src:
            assert (DECODERS / i / name).read_bytes() == (SOURCE_DECODERS / i / name).read_bytes(), \
                f"{i}/{name}: the installed copy differs from decoders/ (rebuild the wheel)"


@installed_only
def test_the_installed_package_is_under_test():
    pkg = pathlib.Path(spigap.__file__).resolve()
    src = ROOT / "analyzer"
    assert src not in pkg.parents, f"the tests import the checkout ({pkg}), not the installed wheel"
    assert SOURCE_DECODERS != DECODERS.resolve() and src not in DECODERS.parents


@installed_only
def test_wheel_runs_compiled_core_without_a_compiler(tmp_path):
    """Compiled engine on a real capture, no compiler looked for, the decoders
    found, from a directory that is not the checkout."""
    env = dict(os.environ, PATH=_no_compiler_path(tmp_path))
    env.pop("SPIGAP_ENGINE", None)
    exe = pathlib.Path(sys.executable).with_name("spigap")
    ver = subprocess.run([str(exe), "--version"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert ver.returncode == 0 and ver.stdout.startswith(f"spigap {spigap.__version__} (c engine"), ver
    # a real capture (1 G samples, named channels): 182 transfers per captures/real/README.md
    cap = real("spi__enc28j60__enc28j60-init-and-ping.sr")
    out = subprocess.run([str(exe), "analyze", str(cap), "--format", "json"], capture_output=True, text=True,
                         env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["engine"] == "c" and d["summary"]["transfers"] == 182 and out.stderr == ""
    dec = subprocess.run([str(exe), "decoders", "path"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert dec.returncode == 0 and pathlib.Path(dec.stdout.strip()) == DECODERS
    assert not (tmp_path / "compiler-called").exists(), "something looked for a C compiler at run time"
    assert native.engine() == "c", native.status()


@pytest.mark.skipif(not os.environ.get("SPIGAP_SDIST"), reason="needs the sdist make test built (SPIGAP_SDIST)")
def test_sdist_without_compiler_installs_and_uses_numpy(tmp_path):
    """pip install of the sdist where every compiler fails: the install
    succeeds, spigap says once on stderr that it runs the numpy engine, and
    its results equal the compiled engine's."""
    target = tmp_path / "site"
    env = dict(os.environ, PATH=_no_compiler_path(tmp_path), CC=str(tmp_path / "nocc" / "cc"))
    env.pop("SPIGAP_ENGINE", None)
    # no build isolation: the test venv has setuptools and cffi, and nothing is downloaded
    inst = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                           "--target", str(target), os.environ["SPIGAP_SDIST"]],
                          capture_output=True, text=True, env=env, cwd=tmp_path)
    assert inst.returncode == 0, inst.stderr[-3000:]
    assert (tmp_path / "compiler-called").exists(), "the build did not even try a compiler"
    assert not list(target.glob("analyzer/spigap/native/_spigap_core*")), "a core was built without a compiler?"
    code = ("import json, sys; from spigap.cli import main; sys.exit(main(['analyze', sys.argv[1], "
            "'--format', 'json', '-o', sys.argv[2]]))")
    run_env = dict(env, PYTHONPATH=str(target))
    out = tmp_path / "numpy.json"
    proc = subprocess.run([sys.executable, "-c", code, str(DEMO), str(out)], capture_output=True, text=True,
                          env=run_env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "numpy engine" in lines[0], proc.stderr
    ref = tmp_path / "c.json"
    proc_c = subprocess.run([sys.executable, "-c", code, str(DEMO), str(ref)], capture_output=True, text=True,
                            env=dict(os.environ), cwd=tmp_path)
    assert proc_c.returncode == 0, proc_c.stderr
    a, b = json.loads(out.read_text()), json.loads(ref.read_text())
    assert (a["engine"], b["engine"]) == ("numpy", "c")
    a.pop("engine"), b.pop("engine")
    assert a == b
