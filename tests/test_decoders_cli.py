"""`spigap decoders install` / `path`: the decoders land where libsigrokdecode
looks, and the real sigrok-cli finds them there without SIGROKDECODE_DIR."""

from __future__ import annotations

import os
import pathlib

import pytest

from spigap.cli import main
from spigap import resources
from spigap.sigrok import paths
from conftest import CAPTURES, DECODERS, run_sigrok

OUR_IDS = sorted(d.name for d in DECODERS.iterdir() if (d / "pd.py").is_file())


@pytest.fixture
def xdg(tmp_path, monkeypatch):
    """A private XDG_DATA_HOME; no SIGROKDECODE_DIR, so only the user directory
    and the system decoders are searched."""
    home = tmp_path / "data"
    monkeypatch.setenv("XDG_DATA_HOME", str(home))
    monkeypatch.delenv("SIGROKDECODE_DIR", raising=False)
    return home / "libsigrokdecode" / "decoders"


def listed(text: str) -> set[str]:
    return {line.split()[0] for line in text.splitlines() if line.startswith("  ") and line.split()}


def test_our_decoders_are_all_there():
    assert "spi_gaps" in OUR_IDS
    assert resources.decoder_ids() == OUR_IDS
    assert resources.decoders_dir() == DECODERS.resolve()


def test_install_copies_and_sigrok_cli_lists_them(xdg, capsys):
    before = listed(run_sigrok(["-L"], decoders_dir=None))
    assert not set(OUR_IDS) & before, "a copy of our decoders is already in the system path"
    assert main(["decoders", "install"]) == 0
    out = capsys.readouterr().out
    assert "sigrok-cli -L | grep" in out and "restart" in out
    for i in OUR_IDS:
        d = xdg / i
        assert d.is_dir() and not d.is_symlink()
        assert (d / "pd.py").read_bytes() == (DECODERS / i / "pd.py").read_bytes()
        assert (d / ".installed-by-spigap").is_file()
        assert not (d / "__pycache__").exists()
    after = listed(run_sigrok(["-L"], decoders_dir=None))
    assert set(OUR_IDS) <= after
    # and they decode from there
    text = run_sigrok(["-i", str(CAPTURES / "mcp3008-rpi3-k4.4-b10.sr"), "-P", "spi_gaps:clk=SCLK:cs=CE0",
                       "-A", "spi_gaps=cs-setup"], decoders_dir=None)
    assert len(text.splitlines()) == 1000 and text.startswith("spi_gaps-1: CS setup: ")


def test_install_again_replaces_our_copy(xdg, capsys):
    assert main(["decoders", "install", "spi_gaps"]) == 0
    stale = xdg / "spi_gaps" / "stale.py"
    stale.write_text("# left from an older version\n")
    assert main(["decoders", "install", "spi_gaps"]) == 0
    assert not stale.exists() and (xdg / "spi_gaps" / "pd.py").exists()


def test_link_points_at_the_checkout(xdg, capsys):
    assert main(["decoders", "install", "--link"]) == 0
    for i in OUR_IDS:
        assert (xdg / i).is_symlink() and (xdg / i).resolve() == (DECODERS / i).resolve()
    assert set(OUR_IDS) <= listed(run_sigrok(["-L"], decoders_dir=None))
    # a copy may replace our link and the other way round
    assert main(["decoders", "install", "spi_gaps"]) == 0
    assert not (xdg / "spi_gaps").is_symlink()
    assert main(["decoders", "install", "--link", "spi_gaps"]) == 0
    assert (xdg / "spi_gaps").is_symlink()


def test_foreign_decoder_is_not_replaced_without_force(xdg, capsys):
    mine = xdg / "spi_gaps"
    mine.mkdir(parents=True)
    (mine / "pd.py").write_text("# somebody's own decoder\n")
    assert main(["decoders", "install"]) == 2
    err = capsys.readouterr().err
    assert "was not installed by spigap" in err and len(err.strip().splitlines()) == 1
    assert (mine / "pd.py").read_text() == "# somebody's own decoder\n"
    assert sorted(p.name for p in xdg.iterdir()) == ["spi_gaps"]        # nothing half-done
    assert main(["decoders", "install", "--force"]) == 0
    assert (mine / ".installed-by-spigap").is_file()


def test_install_errors(xdg, tmp_path, capsys):
    assert main(["decoders", "install", "no_such"]) == 2
    assert "no decoder named no_such" in capsys.readouterr().err
    assert main(["decoders", "install", "--dest", str(DECODERS)]) == 2
    assert "source directory itself" in capsys.readouterr().err
    assert all((DECODERS / i / "pd.py").is_file() for i in OUR_IDS)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["decoders", "install", "--dest", str(blocker / "sub")]) == 2
    assert "cannot create" in capsys.readouterr().err


def test_dest_outside_the_search_path_says_so(tmp_path, xdg, capsys):
    dest = tmp_path / "elsewhere"
    assert main(["decoders", "install", "--dest", str(dest), "spi_gaps"]) == 0
    assert (dest / "spi_gaps" / "pd.py").is_file()
    assert f"SIGROKDECODE_DIR={dest}" in capsys.readouterr().err


def test_path_prints_the_directories(xdg, capsys, monkeypatch):
    assert main(["decoders", "path"]) == 0
    assert capsys.readouterr().out.strip() == str(DECODERS.resolve())
    assert main(["decoders", "path", "--install-dir"]) == 0
    assert capsys.readouterr().out.strip() == str(xdg)
    # XDG_DATA_HOME unset: glib's default ~/.local/share
    monkeypatch.delenv("XDG_DATA_HOME")
    monkeypatch.setenv("HOME", "/home/someone")
    assert paths.user_decoders_dir() == pathlib.Path("/home/someone/.local/share/libsigrokdecode/decoders")


def test_path_is_usable_as_sigrokdecode_dir(capsys):
    assert main(["decoders", "path"]) == 0
    d = capsys.readouterr().out.strip()
    assert set(OUR_IDS) <= listed(run_sigrok(["-L"], decoders_dir=pathlib.Path(d)))


def test_override_and_missing_decoders(monkeypatch, tmp_path):
    monkeypatch.setenv(resources.ENV_OVERRIDE, str(tmp_path))
    with pytest.raises(resources.DecodersNotFound):
        resources.decoders_dir()
    (tmp_path / "x_pd").mkdir()
    (tmp_path / "x_pd" / "__init__.py").write_text("")
    (tmp_path / "x_pd" / "pd.py").write_text("")
    assert resources.decoders_dir() == tmp_path.resolve()
    assert resources.decoder_ids() == ["x_pd"]


def test_gapdefs_loads_without_sigrokdecode():
    import sys

    g = resources.load_decoder_module("spi_gaps", "gapdefs")
    sp = g.split_two([(10, 50), (11, 40), (40, 45), (41, 50)], "linear")
    assert sp.verdict == "two" and 11 < g.inter_transfer_threshold(sp) < 40
    assert g.inter_transfer_threshold(g.split_two([(10, 50), (11, 40)], "linear")) is None
    assert "sigrokdecode" not in sys.modules
    assert os.path.samefile(g.__file__, DECODERS / "spi_gaps" / "gapdefs.py")
