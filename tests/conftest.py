"""Shared fixtures: where the real captures are, and how to run sigrok-cli."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
CAPTURES = ROOT / "captures"
DECODERS = ROOT / "decoders"
SHARED = pathlib.Path(os.environ.get("SPIGAP_SHARED", ROOT.parent / "shared"))
REAL = SHARED / "captures-real"


def real(name: str) -> pathlib.Path:
    """A real capture from ../shared/captures-real (skip if shared/ is absent)."""
    p = REAL / name
    if not p.exists():
        pytest.skip(f"{p} not available (shared/ not beside the checkout)")
    return p


@pytest.fixture(scope="session")
def sigrok_cli() -> str:
    exe = shutil.which("sigrok-cli")
    if exe is None:
        pytest.fail("sigrok-cli is not installed: run 'make test' (it installs it) or apt-get install sigrok-cli")
    return exe


def run_sigrok(args: list[str], *, decoders_dir: pathlib.Path | None = DECODERS, timeout: int = 600) -> str:
    """Run sigrok-cli; fail on any 'srd:' error line (sigrok-cli exits 0 even when a
    decoder raises). Returns stdout."""
    env = dict(os.environ)
    if decoders_dir is not None:
        env["SIGROKDECODE_DIR"] = str(decoders_dir)
    proc = subprocess.run(["sigrok-cli", *args], capture_output=True, text=True, env=env, timeout=timeout)
    errors = [line for line in proc.stderr.splitlines() if "srd:" in line or "Traceback" in line]
    assert proc.returncode == 0, f"sigrok-cli {' '.join(args)} exited {proc.returncode}: {proc.stderr[-2000:]}"
    assert not errors, f"sigrok-cli {' '.join(args)} reported decoder errors:\n{proc.stderr[-4000:]}"
    return proc.stdout
