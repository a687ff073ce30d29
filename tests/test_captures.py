"""captures/: each shipped capture matches its recipe and shows its seed report's figures."""

from __future__ import annotations

import zipfile

import numpy as np
import pytest

from spigap.api import SpiConfig, analyze_device
from spigap.synth import analog_bus, load, write
from conftest import CAPTURES

RECIPES = sorted(CAPTURES.glob("*.toml"))
US = 1e-6


def test_captures_are_small():
    total = sum(p.stat().st_size for p in CAPTURES.glob("*.sr"))
    assert total < 5 * 1024 * 1024, f"captures/ holds {total / 1e6:.1f} MB of .sr files"
    scope = sum(p.stat().st_size for p in CAPTURES.glob("*.isf"))
    assert scope < 2 * 1024 * 1024, f"captures/ holds {scope / 1e6:.1f} MB of .isf files"


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.stem)
def test_shipped_capture_matches_its_recipe(tmp_path, recipe):
    """Every captures/*.sr is exactly what its .toml recipe writes (make captures); an
    analog recipe's scope files (STEM + CH1.isf ...) likewise."""
    if analog_bus.is_analog(recipe):
        paths, _, _ = analog_bus.write_recipe(recipe, str(tmp_path / recipe.stem))
        assert len(paths) == 4
        for p in paths:
            name = p.rsplit("/", 1)[-1]
            assert (CAPTURES / name).read_bytes() == open(p, "rb").read(), f"{name} differs from its recipe"
        return
    shipped = recipe.with_suffix(".sr")
    assert shipped.exists()
    fresh = tmp_path / shipped.name
    write(load(recipe), fresh)          # either form: one device, or [[device]] tables on one controller
    with zipfile.ZipFile(shipped) as a, zipfile.ZipFile(fresh) as b:
        names = sorted(n for n in a.namelist() if n.startswith(("logic-1", "metadata")))
        assert names == sorted(n for n in b.namelist() if n.startswith(("logic-1", "metadata")))
        for n in names:
            assert a.read(n) == b.read(n), f"{shipped.name}: {n} differs from its recipe (make captures?)"
    # and byte for byte: the zip's members carry a fixed time (outfile.zip_entry), so `make
    # captures` leaves the shipped files unchanged when their recipes are
    assert shipped.read_bytes() == fresh.read_bytes(), f"{shipped.name}: regenerate it (make captures)"


def p50(a, kind):
    return float(np.nanmedian(a.gap_values(kind))) * a.tick_s


def test_seed000_rpi3_mcp3008():
    b1 = analyze_device(CAPTURES / "mcp3008-rpi3-k4.4-b1.sr")
    b10 = analyze_device(CAPTURES / "mcp3008-rpi3-k4.4-b10.sr")
    b100 = analyze_device(CAPTURES / "mcp3008-rpi3-k4.4-b100.sr")
    fast = analyze_device(CAPTURES / "mcp3008-rpi3-k4.4-nodelay-b100.sr")
    for a in (b1, b10, b100, fast):
        assert p50(a, "cs_setup") == pytest.approx(1.6 * US, abs=0.04 * US)
        assert p50(a, "cs_hold") == pytest.approx(0.4 * US, abs=0.04 * US)
        assert np.median(a.idle_clocks()) == pytest.approx(1.0, abs=0.1)       # bcm2835: 1 idle SCLK
        assert a.sclk_hz == pytest.approx(3.6e6, rel=0.005)
    assert b1.grouping.transfers_per_message == 1
    assert p50(b1, "context_switch") == pytest.approx(5 * US, abs=0.1 * US)
    assert b10.grouping.transfers_per_message == 10 and b100.grouping.transfers_per_message == 100
    assert p50(b10, "cs_change") == pytest.approx(10 * US, abs=0.1 * US)
    assert p50(b10, "context_switch") == pytest.approx(5 * US, abs=0.2 * US)     # shorter than cs_change
    assert p50(fast, "cs_change") == pytest.approx(0.25 * US, abs=0.03 * US)
    # seed 000's measured rates: 69.8k/s unbatched, 52.5k/s (10) / 51.2k/s (100) batched, 105.2k/s patched
    assert b1.transfer_rate_hz() == pytest.approx(70e3, rel=0.02)
    assert b10.transfer_rate_hz() == pytest.approx(53e3, rel=0.02)
    assert b100.transfer_rate_hz() == pytest.approx(52e3, rel=0.02)
    assert fast.transfer_rate_hz() == pytest.approx(105e3, rel=0.02)


def test_seed003_pi5_ad7606_loop_times():
    old = analyze_device(CAPTURES / "ad7606-pi5-k6.6.31.sr")
    new = analyze_device(CAPTURES / "ad7606-pi5-k6.12.25.sr")
    assert p50(old, "transfer_period") == pytest.approx(21.6 * US, abs=0.1 * US)
    assert p50(new, "transfer_period") == pytest.approx(24.3 * US, abs=0.1 * US)
    assert np.nanstd(new.period()) > np.nanstd(old.period())                     # more jitter on 6.12


def test_seed001_imx8mp_mcp2518fd_kernels():
    want = {"A": (10, 25), "B": (9.8, 30), "C": (2.6, 5)}
    for k, (setup, cs_high) in want.items():
        a = analyze_device(CAPTURES / f"mcp2518fd-imx8mp-k5.18-{k}-rx.sr", SpiConfig(transfers_per_message=1))
        assert p50(a, "cs_setup") == pytest.approx(setup * US, abs=0.15 * US)
        gaps = a.gap_values("context_switch") * a.tick_s
        within_frame = gaps[gaps < 200 * US]
        assert np.median(within_frame) == pytest.approx(cs_high * US, abs=0.5 * US)
        bits = sorted(set((a.n_bits[:8]).tolist()))
        assert bits == [72, 104, 200]
    tx = analyze_device(CAPTURES / "mcp2518fd-imx8mp-k5.18-tx.sr")
    assert tx.grouping.transfers_per_message == 2
    assert sorted(set(tx.n_bits.tolist())) == [48, 168]
