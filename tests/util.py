"""Helpers for the analyzer tests: synthesize, analyze, compare with truth."""

from __future__ import annotations

import numpy as np

from spigap.api import SpiConfig, analyze_device
from spigap.synth import Scenario, write


def synth(tmp_path, name="cap.sr", **overrides):
    sc = Scenario.from_toml(None, overrides)
    path = tmp_path / name
    tl = write(sc, path).timeline
    return sc, tl, path


def assert_within_one_sample(measured_ticks, truth_s, tick_s, what):
    m = np.asarray(measured_ticks, float) * tick_s
    t = np.asarray(truth_s, float)
    assert m.shape == t.shape, f"{what}: {m.shape} values measured, {t.shape} in truth"
    both_nan = np.isnan(m) & np.isnan(t)
    assert not (np.isnan(m) ^ np.isnan(t)).any(), f"{what}: availability differs"
    err = np.abs(m - t)[~both_nan]
    worst = err.max() if len(err) else 0.0
    assert worst <= tick_s * (1 + 1e-6), f"{what}: off by {worst / tick_s:.3f} samples (limit 1)"


def analyze(path, **cfg):
    samplerate = cfg.pop("samplerate", None)
    return analyze_device(path, SpiConfig(**cfg), samplerate=samplerate)
