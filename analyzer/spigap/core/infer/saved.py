"""Decoder settings a capture carries with it, weighed against the signals.

DSView stores its SPI decoder's setup in a .dsl (``CaptureInfo.spi_settings``);
PulseView opens ``<name>.pvs`` beside ``<name>.sr`` by itself and restores the
SPI decoder it saved there. Those settings were typed by a person and may be wrong:
DSView's own demo says CPHA 0 while its data lines change on the leading clock edge.
Where the signals tell (mode, CS polarity, word size inferred with confidence >= 0.75)
the signals are used and the warning says the saved setting differs and how to use it;
where they cannot (bit order; a word size several sizes fit; a mode with too few data
changes) the saved setting is used, as a 'file' source."""

from __future__ import annotations

import os

from spigap.findings import Cause, Finding
from spigap.core.config import SpiConfig
from spigap.core.infer.calibration import NO_CPHA
from spigap.core.infer.report import Source

MAX_PVS = 1 << 20           # bytes: a session setup is a few kB
SURE = 0.75                 # an inferred setting at least this sure beats a saved one


def saved_settings(info) -> tuple[str, dict]:
    """(where they come from, {cpol, cpha, cs_polarity, wordsize, bitorder}) of the capture's
    saved SPI decoder, or ("", {})."""
    if info.spi_settings:
        saved = dict(info.spi_settings)
        return str(saved.pop("from", "the capture's own settings")), saved
    path = str(info.path)
    stem, ext = os.path.splitext(path)
    pvs = stem + ".pvs"
    if ext.lower() != ".sr" or not os.path.isfile(pvs) or os.path.getsize(pvs) > MAX_PVS:
        return "", {}
    from spigap.sigrok import pvs as pvs_mod

    try:
        with open(pvs, encoding="utf-8") as f:
            setup = pvs_mod.read(f.read(MAX_PVS))
    except (OSError, ValueError, UnicodeDecodeError):
        return "", {}
    for sig in setup.decode_signals:
        if sig.decoders and sig.decoders[0].id == "spi":
            # a .pvs keeps the options that differ from the spi decoder's defaults
            opts = {"cpol": 0, "cpha": 0, "cs_polarity": "active-low", "wordsize": 8, "bitorder": "msb-first"}
            opts.update({k: v for k, (_, v) in sig.decoders[0].options.items() if k in opts})
            return f"PulseView's SPI decoder in {os.path.basename(pvs)}", opts
    return "", {}


def reconcile(cfg: SpiConfig, given: SpiConfig, sources: dict[str, Source], info, warnings: list[str]) -> None:
    """Weigh the saved settings against what ``cfg`` holds (inferred or default) for every
    setting the user did not give (``given.infer``); change ``cfg``/``sources`` where the saved
    one wins, and say in ``warnings`` where they differ and which was used."""
    where, saved = saved_settings(info)
    if not saved:
        return
    for role in saved.get("none", []):
        # a line the capture's maker says is not there (an AD7606 has no MOSI: DOUTB is no MOSI)
        src = sources.get(role)
        if getattr(cfg, role, None) is not None and src is not None and src.how == "inferred":
            setattr(cfg, role, None)
            sources[role] = Source("file", 1.0, f"{where}: the device has no {role.upper()} line")
    checks = []
    if "mode" in given.infer and "cpol" in saved and "cpha" in saved:
        want = 2 * int(saved["cpol"]) + int(saved["cpha"])
        checks.append(("mode", f"mode {want}", want, cfg.mode, f"mode {cfg.mode}", f"--mode {want}"))
    if "cs_polarity" in given.infer and "cs_polarity" in saved and cfg.cs is not None:
        low = str(saved["cs_polarity"]) == "active-low"
        checks.append(("cs_polarity", f"CS active {'low' if low else 'high'}", low, cfg.cs_active_low,
                       f"CS active {'low' if cfg.cs_active_low else 'high'}",
                       f"--cs-polarity {'low' if low else 'high'}"))
    if "wordsize" in given.infer and "wordsize" in saved:
        w = int(saved["wordsize"])
        checks.append(("wordsize", f"{w}-bit words", w, cfg.wordsize, f"{cfg.wordsize}-bit words", f"--wordsize {w}"))
    if "bitorder" in given.infer and "bitorder" in saved:
        lsb = str(saved["bitorder"]) == "lsb-first"
        checks.append(("bitorder", f"{'LSB' if lsb else 'MSB'} first", lsb, cfg.lsb_first,
                       f"{'LSB' if cfg.lsb_first else 'MSB'} first", f"--bitorder {'lsb' if lsb else 'msb'}"))
    for key, saved_text, want, have, have_text, option in checks:
        src = sources.get(key)
        # a CPHA stated at its base rate (no data line changes) is a prior, not the signals' word
        sure = src is not None and src.confidence >= SURE and src.basis != NO_CPHA
        if want == have:
            if src is not None and src.how in ("default", "inferred") and not sure:
                sources[key] = Source("file", 1.0, f"{where} (the signals agree)")
            continue
        if src is not None and src.how == "inferred" and sure:
            warnings.append(Finding(f"{where} says {saved_text}; the signals say {have_text} ({src.note}): "
                                    f"{have_text} is used (give {option} to use the saved one)", Cause.NOTE))
            continue
        _apply(cfg, key, want)
        sources[key] = Source("file", 1.0, f"{where}" + (f" (the signals cannot tell: {src.note})" if src else ""))
        warnings.append(Finding(f"{where} says {saved_text}, which is used: the signals cannot tell "
                                f"(they would give {have_text})", Cause.NOTE))


def _apply(cfg: SpiConfig, key: str, value) -> None:
    if key == "mode":
        cfg.cpol, cfg.cpha = value >> 1, value & 1
    elif key == "cs_polarity":
        cfg.cs_active_low = bool(value)
    elif key == "wordsize":
        cfg.wordsize = int(value)
    elif key == "bitorder":
        cfg.lsb_first = bool(value)
