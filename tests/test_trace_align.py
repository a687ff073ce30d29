"""spigap trace: alignment and phases on synthesized (capture, trace) pairs.

Oracle: the driver model's truth (analyzer/spigap/synth/kernel.py places every event
at a known bus time, then maps it to the trace clock with a known offset and
drift), read back through the ftrace parser. The capture and the trace are
both written by spigap, but by independent code paths (the .sr writer and the
kernel model), and the aligner never sees the truth.
"""

from __future__ import annotations

import numpy as np
import pytest
from util import analyze, synth

from spigap.errors import InputError
from spigap.synth import kernel
from spigap.trace import align, ftrace, phases

# a capture with irregular context switches (what makes windows identifiable)
SCEN = dict(messages=240, transfers_per_message=2, context_switch=60e-6, cs_setup=3e-6, cs_hold=4e-6,
            sigma={"context_switch": 8e-6}, mosi="random")
GPIO_CS = kernel.KernelLatencies().gpio_cs_latency


def pair(tmp_path, name="p", scen=None, **km):
    sc, tl, cap = synth(tmp_path, f"{name}.sr", **(scen or SCEN))
    tpath = tmp_path / f"{name}.txt"
    truth = kernel.write(tl, tpath, kernel.KernelLatencies(**km))
    return analyze(cap), ftrace.parse(tpath), truth


def truth_bus(truth, ts):
    return truth["offset_s"] + (1 + truth["drift_ppm"] * 1e-6) * np.asarray(ts)


def phase_errors(res, truth):
    mine = {(p.gap, p.frm, p.to): p.stats["p50_s"] for p in res.phases}
    out = {}
    for p in truth["phases"]:
        key = (p["gap"], p["from"], p["to"])
        assert key in mine, f"phase {key} not found"
        out[key] = mine[key] - p["median_s"]
    return out


@pytest.mark.parametrize("drift,lost,ns", [(0.0, 0.0, False), (50.0, 0.01, False), (200.0, 0.10, False),
                                           (50.0, 0.0, True), (-120.0, 0.10, True)])
def test_drift_offset_and_phases(tmp_path, drift, lost, ns):
    a, tr, truth = pair(tmp_path, drift_ppm=drift, lost=lost, ns=ns, seed=3)
    al = align.align_spi(tr, a, cs_latency=GPIO_CS)
    assert abs(al.drift_ppm - drift) <= 2.0, al.drift_ppm
    # the mapping over the trace's span agrees with the truth's clock
    span = tr.ts[[0, len(tr) // 2, -1]]
    err = al.to_bus(span) - truth_bus(truth, span)
    assert np.abs(err).max() < 0.3e-6, err
    assert al.matched >= (1 - 3 * lost) * a.n - 2
    assert al.residual_p99_s < 2e-6
    res = phases.run(tr, al, a)
    worst = max(abs(e) for e in phase_errors(res, truth).values())
    assert worst <= 0.3e-6, phase_errors(res, truth)


@pytest.mark.parametrize("drift,off_latency", [(0.0, 1.5e-6), (200.0, 1.5e-6), (25.0, 0.3e-6)])
def test_causal_bracket_holds_the_true_offset(tmp_path, drift, off_latency):
    """Without --cs-latency the zero point is the bracket's middle; the truth lies inside it,
    also when a latency is shorter than the timestamps' 1 µs step (0.3 µs deactivate -> CS
    deassert: the bracket then needs its half-step margin)."""
    a, tr, truth = pair(tmp_path, drift_ppm=drift, seed=5, gpio_cs_off_latency=off_latency)
    al = align.align_spi(tr, a)
    assert al.zero_point == "causal bracket midpoint"
    t = tr.ts[len(tr) // 2]
    err = float(al.to_bus(t) - truth_bus(truth, t))
    assert al.offset_uncertainty_s is not None and abs(err) <= al.offset_uncertainty_s + 0.1e-6, \
        (err, al.offset_uncertainty_s)
    assert abs(al.drift_ppm - drift) <= 2.0


def test_other_device_noise_and_device_pick(tmp_path):
    a, tr, truth = pair(tmp_path, drift_ppm=30, other_device=0.5, noise_rate_hz=20000, lost=0.02, seed=7)
    assert "spi0.1" in tr.devices
    al = align.align_spi(tr, a, cs_latency=GPIO_CS)
    assert al.device == "spi0.0" and abs(al.drift_ppm - 30) <= 2
    # the other device's traffic is not on this capture: asked for, it is refused
    with pytest.raises(InputError) as e:
        align.align_spi(tr, a, "spi0.1")
    assert "\n" not in str(e.value)
    res = phases.run(tr, al, a)
    assert max(abs(x) for x in phase_errors(res, truth).values()) <= 0.3e-6


def test_trace_of_another_recording_is_refused(tmp_path):
    a, _, _ = pair(tmp_path, "one", drift_ppm=20, seed=1)
    other = dict(SCEN, seed=99)
    _, tr2, _ = pair(tmp_path, "two", scen=other, drift_ppm=20, seed=2)
    with pytest.raises(InputError) as e:
        align.align_spi(tr2, a)
    msg = str(e.value)
    assert "\n" not in msg and ("do not match" in msg or "no consistent match" in msg), msg


def test_too_regular_traffic_is_refused(tmp_path):
    """Identical windows at a constant period: the timing cannot tell them apart."""
    scen = dict(messages=200, transfers_per_message=1, context_switch=40e-6, mosi="counter",
                sigma={"context_switch": 0.0})
    scen["mosi"] = "0x55"
    scen["miso"] = "0xAA"       # traced rx bytes are matched with MISO too: identical on both lines
    a, tr, _ = pair(tmp_path, scen=scen, jitter=0.0, seed=1)
    with pytest.raises(InputError):
        align.align_spi(tr, a)


def test_regular_timing_is_aligned_by_the_rx_bytes(tmp_path):
    """The same timing, but the device answers differently each time (an ADC's samples):
    the traced rx bytes (spi_transfer_stop) against MISO tell the windows apart."""
    scen = dict(messages=200, transfers_per_message=1, context_switch=40e-6, mosi="0x55", miso="random",
                sigma={"context_switch": 0.0})
    a, tr, truth = pair(tmp_path, scen=scen, jitter=0.0, seed=1, drift_ppm=30)
    al = align.align_spi(tr, a)
    assert al.matched >= 195 and al.payload_agree == al.payload_checked >= 195
    t = tr.ts[al.trace_rows]
    err = al.to_bus(t) - truth_bus(truth, t)
    assert abs(np.median(err)) < 3e-6            # not one window (≈ 50 µs) off
    assert np.ptp(err) < 0.3e-6


def test_trace_starting_late_and_ending_early(tmp_path):
    """Only the middle of the capture is in the trace (a trace started late, stopped early)."""
    a, tr, truth = pair(tmp_path, drift_ppm=80, seed=11)
    lo, hi = np.quantile(tr.ts, [0.3, 0.7])
    keep = np.flatnonzero((tr.ts >= lo) & (tr.ts <= hi))
    cut = _subset(tr, keep)
    al = align.align_spi(cut, a, cs_latency=GPIO_CS)
    assert 0.3 * a.n <= al.matched <= 0.5 * a.n
    assert al.unmatched_bus <= 4                  # counted only where both recordings overlap
    assert abs(al.drift_ppm - 80) <= 2.0 + 2.0    # a shorter span: a looser bound


def _subset(tr, rows):
    import dataclasses

    pay = {int(np.searchsorted(rows, r)): v for r, v in tr.payload.items() if r in set(rows.tolist())}
    cols = {f.name: getattr(tr, f.name)[rows] for f in dataclasses.fields(tr)
            if isinstance(getattr(tr, f.name), np.ndarray)}
    return dataclasses.replace(tr, payload=pay, **cols)


def test_trace_groups_the_ambiguous_capture(tmp_path):
    from spigap.trace.messages import regroup_from_trace

    # cs_change 20 µs (no default busy-wait): two populations, roles unknown from the bus alone
    a, tr, truth = pair(tmp_path, scen={**SCEN, "cs_change": 20e-6}, seed=4)
    assert a.grouping.ambiguous
    al = align.align_spi(tr, a)
    note = regroup_from_trace(tr, al, a)
    assert note and "trace" in note
    g = a.grouping
    assert not g.ambiguous and g.transfers_per_message == 2
    assert g.evidence[0] == "trace" and g.method == "trace" and g.confidence == 1.0
    assert "the trace covers" in g.note


def test_grouped_quantile_reads_through_the_timestamp_grid():
    rng = np.random.default_rng(0)
    true = rng.normal(36.54e-6, 5e-6, 20000)
    start = rng.uniform(0, 1, 20000)
    q = np.floor((start + true) / 1e-6) * 1e-6 - np.floor(start / 1e-6) * 1e-6   # both ends truncated to µs
    assert abs(np.median(q) - np.median(true)) > 0.3e-6                        # the plain median snaps
    assert abs(phases.grouped_quantile(q, 0.5, 1e-6) - np.median(true)) < 0.1e-6


def test_granularity():
    assert align.granularity(np.array([1.0, 1.000001, 1.000005])) == pytest.approx(1e-6)
    assert align.granularity(np.array([0.0, 0.5e-9 * 3])) is None


def test_theil_sen_is_scipys():
    """The Theil-Sen fit written out in align/fit.py (to spare the scipy.stats import) is
    scipy.stats.theilslopes with the joint intercept, bit for bit: ties in x, outliers."""
    from scipy import stats

    from spigap.trace.align import fit

    rng = np.random.default_rng(4)
    for n in (2, 3, 50, 400, fit.FIT_SAMPLE):
        x = np.round(rng.uniform(0, 2, n), 3)               # unsorted, with ties from n = 50 on
        y = 3e-6 + 40e-6 * x + rng.normal(0, 1e-6, n)
        y[::7] += 5e-5
        r = stats.theilslopes(y, x, method="joint")
        assert fit.theil_sen(x, y) == (float(r.slope), float(r.intercept)), n


def test_sync_channel(tmp_path):
    """--sync-channel: gpio_value events against a captured pin. The CS line stands in for
    the spare channel; the model traces the CS GPIO writes, which sit at 70 % of the way
    from spi_set_cs to the edge, i.e. 0.3 × the set_cs latency before it."""
    from spigap.core.events import read_channel_edges
    from spigap.io import open_capture

    a, tr, truth = pair(tmp_path, drift_ppm=-60, cs_gpio=17, seed=9)
    with open_capture(a.info.path) as reader:
        edges, _ = read_channel_edges(reader, ["CS"])
    al = align.align_sync(tr, a, edges["CS"], "CS")
    assert al.method == "sync-channel" and al.device == "gpio17"
    assert abs(al.drift_ppm + 60) <= 2
    t = tr.ts[len(tr) // 2]
    err = float(al.to_bus(t) - truth_bus(truth, t))
    assert abs(err - 0.3 * GPIO_CS) <= 0.15e-6, err      # the write's own latency is in the offset
    spi = align.spi_on_fit(tr, a, al)
    assert spi.method == "spi" and spi.matched >= a.n - 4 and spi.a == al.a


@pytest.mark.parametrize("ns", [False, True])
def test_inter_transfer_gaps_inside_a_window_are_split(tmp_path, ns):
    """mcp320x-like windows: a 1-byte command and a 2-byte read as two spi_transfers
    under one CS assertion; the word gap between them is cut at spi_transfer_stop and
    spi_transfer_start, and every phase (those of the inter_transfer gaps too) lands
    within 0.3 µs of the driver model's."""
    scen = dict(SCEN, words_per_transfer=3, segments=[1, 2], inter_transfer=9e-6,
                sigma={"context_switch": 8e-6, "inter_transfer": 1e-6})
    a, tr, truth = pair(tmp_path, scen=scen, drift_ppm=40, lost=0.01, ns=ns, seed=11)
    assert {p["gap"] for p in truth["phases"]} >= {"inter_transfer"}
    al = align.align_spi(tr, a, cs_latency=GPIO_CS)
    res = phases.run(tr, al, a)
    errors = phase_errors(res, truth)
    assert max(abs(e) for e in errors.values()) <= 0.3e-6, errors
    # (the phases a lost event makes, e.g. last_sclk → first_sclk, are rare: left out as the CLI does)
    inner = [p for p in res.phases if p.gap == "inter_transfer" and p.stats["n"] >= 0.05 * res.segments["inter_transfer"]]
    assert [(p.frm, p.to) for p in inner] == [("bus:last_sclk", "spi:spi_transfer_stop"),
                                              ("spi:spi_transfer_stop", "spi:spi_transfer_start"),
                                              ("spi:spi_transfer_start", "bus:first_sclk")]
    # one inter-transfer gap per window, each split when its window is matched
    assert res.segments["inter_transfer"] == res.segments["cs_setup"]
    # the phases of a gap add up to it
    whole = a.pair_gap[a.pair_inter_transfer] * a.tick_s
    assert sum(p.stats["mean_s"] for p in inner) == pytest.approx(whole.mean(), abs=0.2e-6)


def test_cs_latency_pins_the_activate_edge_when_deassert_differs(tmp_path):
    """--cs-latency is the spi_set_cs(activate) -> CS assert latency: with a faster
    deactivate -> CS deassert (0.3 µs against 1.5 µs) the zero point stays on the
    activate edge (pooling both would put it 0.6 µs off) and every phase is within
    0.3 µs of the model's."""
    a, tr, truth = pair(tmp_path, drift_ppm=20, seed=13, ns=True, gpio_cs_off_latency=0.3e-6)
    al = align.align_spi(tr, a, cs_latency=GPIO_CS)
    span = tr.ts[[0, len(tr) // 2, -1]]
    err = al.to_bus(span) - truth_bus(truth, span)
    assert np.abs(err).max() < 0.15e-6, err
    errors = phase_errors(phases.run(tr, al, a), truth)
    assert max(abs(e) for e in errors.values()) <= 0.3e-6, errors
    assert al.zero_point.startswith("spi_set_cs activate -> CS assert latency given")
