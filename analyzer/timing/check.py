"""`spigap check`: measured timing vs a profile's expectations and a device's limits.

    from spigap.api import analyze_file
    from spigap.timing.check import check_analysis, config_for_profile
    from spigap.timing.profiles import load_profile

    prof = load_profile("rpi3-k4.4-nodelay")
    a = analyze_file("cap.sr", config_for_profile(prof))
    res = check_analysis(a, prof, "mcp3008@5V")
    res.verdict            # "PASS" / "MARGINAL" / "FAIL" (or "SKIP": nothing applied)
    res.to_dict()          # the JSON form (docs/timing-model.md, "check JSON")

Verdicts and the ±1-sample rule (docs/timing-model.md, "Verdicts"): every
edge-to-edge figure is off by less than one sample period r, so a measured
margin m (signed distance to the nearest bound, negative = outside) means the
true margin lies in (m − r, m + r):

* FAIL      m ≤ −r: outside the bound even if every edge was off by a sample;
* MARGINAL  −r < m < r: cannot be decided at this sample rate, or
            m − r < headroom: inside, but with less than the required headroom;
* PASS      m − r ≥ headroom;
* SKIP      nothing to measure (no such gaps in the capture, channel missing).

A capture's verdict is **NO DATA**, never PASS, when it has fewer than
``MIN_TRANSFERS`` transfers (a dead bus, a wrong channel map) or when every
figure was skipped: there is nothing a pass could stand on ('spigap check'
exits 1 then, unless ``--allow-empty``).

Headroom is a fraction (``--headroom``, default 0.1) of the band's half-width
for a two-sided band (expected ± tolerance), and of the bound itself for a
one-sided bound (p99 limits, device limits).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from spigap import __version__
from spigap.core.analysis import KIND_CONTEXT_SWITCH, KIND_CS_CHANGE, Analysis, describe
from spigap.core.config import SpiConfig
from spigap.timing.profiles import Device, Expectation, Limit, Profile, load_device, load_profile

PASS, MARGINAL, FAIL, SKIP, NO_DATA = "PASS", "MARGINAL", "FAIL", "SKIP", "NO DATA"
SEVERITY = {SKIP: 0, PASS: 1, MARGINAL: 2, NO_DATA: 3, FAIL: 4}
# fewer transfers than this: NO DATA (no median of a gap kind means anything with
# fewer values; the stall search uses the same minimum, StallRule.min_count)
MIN_TRANSFERS = 8
DEFAULT_HEADROOM = 0.1
FIRST_N = 5          # how many violation timestamps to list
CHECK_SCHEMA = 1


@dataclasses.dataclass
class Item:
    """One checked figure."""

    id: str                  # "cs_change.p50", "model.transfer_rate", "device.tCSH"
    group: str               # "profile", "model", "device"
    metric: str
    statistic: str           # p50, p99, value, min, max, count, every transfer
    unit: str                # s, Hz, 1/s, bits, edges
    verdict: str
    reason: str
    source: str = ""
    measured: float | None = None
    expected: float | None = None
    low: float | None = None
    high: float | None = None
    delta: float | None = None       # measured − expected (limits: measured − the bound it is nearest)
    margin: float | None = None      # signed distance to the nearest bound; < 0 = outside
    resolution: float | None = None  # ± uncertainty of ``measured``
    headroom: float | None = None    # margin required for PASS (same unit)
    n: int = 0
    assumed: bool = False
    unverified: bool = False
    violations: dict | None = None   # device limits: count, possible, checked, first_s, worst...
    rule: str = ""                   # a bound that is not an interval ("multiple of 16")

    def to_dict(self) -> dict:
        return {k: _clean(v) for k, v in dataclasses.asdict(self).items()}


def _clean(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, (np.floating, np.integer)):
        return _clean(v.item())
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    return v


@dataclasses.dataclass
class CheckResult:
    capture: str
    profile: Profile | None
    device: Device | None
    resolution_s: float | None     # None: no SPI bus, nothing measured
    headroom: float
    items: list
    notes: list
    summary: dict
    warnings: list

    @property
    def no_data(self) -> str | None:
        """Why there is nothing to judge (the NO DATA verdict), or None."""
        if self.summary.get("no_bus"):
            return self.summary["no_bus"]          # the signals hold no SPI bus at all
        n = self.summary.get("transfers", 0)
        if n < MIN_TRANSFERS:
            return (f"{n} transfer(s) in the capture, fewer than the {MIN_TRANSFERS} a check needs: "
                    "is the bus idle, or the channel map wrong?")
        if not any(i.verdict != SKIP for i in self.items):
            return ("every check was skipped: nothing in the "
                    + (f"profile {self.profile.name!r}" if self.profile else "device limits")
                    + " applies to this capture (check the channel map and the profile)")
        return None

    @property
    def verdict(self) -> str:
        if self.no_data:
            return NO_DATA
        sev = max((SEVERITY[i.verdict] for i in self.items), default=0)
        return next(k for k, v in SEVERITY.items() if v == sev)

    def counts(self) -> dict:
        c = {PASS: 0, MARGINAL: 0, FAIL: 0, SKIP: 0}
        for i in self.items:
            c[i.verdict] += 1
        return c

    def failed(self, strict: bool = False, allow_empty: bool = False) -> bool:
        v = self.verdict
        return v == FAIL or (strict and v == MARGINAL) or (v == NO_DATA and not allow_empty)

    def to_dict(self) -> dict:
        p = self.profile
        return {
            "capture": self.capture,
            "verdict": self.verdict,
            "no_data": self.no_data,
            "counts": self.counts(),
            "resolution_s": self.resolution_s,
            "headroom": self.headroom,
            "profile": {"name": p.name, "title": p.title, "path": p.path, "kernel": p.kernel,
                        "sources": list(p.sources), "assumptions": list(p.assumptions)} if p else None,
            "device": self.device.to_dict() if self.device else None,
            "summary": _clean(self.summary),
            "checks": [i.to_dict() for i in self.items],
            "notes": list(self.notes),
            "warnings": list(self.warnings),
        }


# ------------------------------------------------------------------ judging
def judge(measured: float, low: float | None, high: float | None, resolution: float,
          headroom_abs: float) -> tuple[str, float, str]:
    """Verdict for one figure against [low, high] with ± resolution; (verdict, margin, why)."""
    margins = []
    if low is not None:
        margins.append(measured - low)
    if high is not None:
        margins.append(high - measured)
    if not margins:
        return SKIP, math.nan, "no bound"
    m = min(margins)
    eps = 1e-9 * max(resolution, abs(measured), 1e-30)
    if m <= -resolution + eps:
        return FAIL, m, "outside the bound by at least one sample: a violation whatever the quantization"
    if m < resolution - eps:
        side = "outside" if m < 0 else "inside"
        return MARGINAL, m, (f"{side} the bound by less than the ±1-sample resolution: "
                             "cannot be decided at this sample rate")
    if m - resolution < headroom_abs - eps:
        return MARGINAL, m, "inside the bound, but with less than the required headroom"
    return PASS, m, "inside the bound with headroom"


def _headroom_abs(headroom: float, low, high) -> float:
    if low is not None and high is not None:
        return headroom * (high - low) / 2
    return headroom * abs(low if low is not None else high)


# ------------------------------------------------------------------ configuration
def config_for_profile(profile: Profile, cfg: SpiConfig | None = None, *, mode_given: bool = False,
                       tpm_given: bool = False) -> SpiConfig:
    """The analysis settings a profile asks for (SPI mode, transfers per message),
    unless the caller set them (``mode_given``/``tpm_given``, or a non-default cfg value)."""
    cfg = dataclasses.replace(cfg) if cfg is not None else SpiConfig()
    if profile.mode is not None and not mode_given and cfg.cpol == 0 and cfg.cpha == 0:
        cfg.cpol, cfg.cpha = profile.mode >> 1, profile.mode & 1
        cfg.infer = cfg.infer - {"mode"}            # the profile says it: not inferred
    if profile.transfers_per_message is not None and not tpm_given and cfg.transfers_per_message is None:
        cfg.transfers_per_message = profile.transfers_per_message
    if profile.bits_per_word != 8 and cfg.wordsize == 8 and ("wordsize" in cfg.infer or not cfg.infer):
        cfg.wordsize = profile.bits_per_word
        cfg.infer = cfg.infer - {"wordsize"}
    return cfg


# ------------------------------------------------------------------ the check
def check_analysis(analysis: Analysis, profile, device=None, *, headroom: float = DEFAULT_HEADROOM,
                   events: dict | None = None) -> CheckResult:
    """Check one analysed capture against a profile (name, file or Profile) and,
    optionally, a device's datasheet limits (spec like "mcp3008@5V", file or
    Device). ``events``: role -> EventTrack for CONVST/BUSY (spigap.timing.extra_channels).
    ``profile`` None: the device limits alone.
    """
    prof = load_profile(profile) if profile is not None else None
    dev = load_device(device) if device else None
    if prof is None and dev is None:
        from spigap.errors import UsageError

        raise UsageError("nothing to check against: give a profile and/or a device")
    if not (0 <= headroom < 1):
        from spigap.errors import UsageError

        raise UsageError(f"--headroom {headroom:g} must be a fraction in [0, 1)")
    c = _Checker(analysis, prof, dev, headroom, events or {})
    c.run()
    a = analysis
    summary = {
        "transfers": a.n,
        "samplerate_hz": a.info.samplerate_hz,
        "sclk_hz": a.sclk_hz,
        "transfers_per_message": a.grouping.transfers_per_message,
        "grouping": a.grouping.method,
        "grouping_note": a.grouping.note,
        "words_per_transfer": c.words_per_transfer,
        "idle_gaps_excluded": int(c.idle.sum()),
        "idle_gap_s": prof.idle_gap if prof else None,
        "truncated": a.truncated,
    }
    return CheckResult(capture=a.info.path, profile=prof, device=dev, resolution_s=a.tick_s,
                       headroom=headroom, items=c.items, notes=c.notes, summary=summary,
                       warnings=list(a.warnings))


class _Checker:
    def __init__(self, a: Analysis, prof: Profile | None, dev: Device | None, headroom: float, events: dict):
        self.a, self.prof, self.dev, self.h, self.events = a, prof, dev, headroom, events
        self.r = a.tick_s
        self.items: list[Item] = []
        self.notes: list[str] = []
        gb = a.gap_before
        cs_kind = (a.gap_kind == KIND_CS_CHANGE) | (a.gap_kind == KIND_CONTEXT_SWITCH)
        if prof is not None and prof.idle_gap is not None and a.has_cs:
            self.idle = cs_kind & (gb * a.tick_s > prof.idle_gap)
        else:
            self.idle = np.zeros(a.n, bool)
        complete = ~a.partial_start & ~a.partial_end
        nw = a.n_words[complete]
        uniq = np.unique(nw) if len(nw) else np.empty(0, int)
        self.words_per_transfer = int(uniq[0]) if len(uniq) == 1 else None
        self.word_sizes = uniq

    # ----------------------------------------------------------- values
    def values(self, metric: str) -> np.ndarray:
        """Per-event values in ticks, idle gaps (profile idle_gap) left out."""
        a = self.a
        if metric in ("cs_change", "context_switch"):
            kind = KIND_CS_CHANGE if metric == "cs_change" else KIND_CONTEXT_SWITCH
            return a.gap_before[(a.gap_kind == kind) & ~self.idle]
        if metric == "transfer_period":
            p = a.period()
            return p[~self.idle[1:]] if len(p) else p
        return a.gap_values(metric)

    def add(self, **kw) -> Item:
        it = Item(**kw)
        self.items.append(it)
        return it

    # ----------------------------------------------------------- run
    def run(self):
        prof = self.prof
        if prof is None:
            if self.dev is not None:
                self.check_device()
            return
        expect = dict(prof.expect)
        if "inter_byte" not in expect:
            T = 1.0 / prof.sclk_hz
            expect["inter_byte"] = Expectation(
                "inter_byte", "s",
                source=f"derived from [bus]: (½ + idle_clocks) × T with idle_clocks = "
                       f"{prof.idle_clocks:g}, T = 1/SCLK (docs/gaps.md: raw edge-to-edge word gap)",
                p50=(0.5 + prof.idle_clocks) * T, tolerance=0.25 * T,
                p99_max=(1.5 + prof.idle_clocks) * T,
                note="tolerance ±T/4 and p99 ≤ one extra idle clock are our assumption")
        for metric, ex in expect.items():
            if metric == "sclk":
                self.check_sclk(ex)
            elif metric in ("transfer_rate",) or ex.model:
                self.check_model(metric, ex)
            else:
                self.check_gap(metric, ex)
        if self.dev is not None:
            self.check_device()

    # ----------------------------------------------------------- profile: gaps
    def check_gap(self, metric: str, ex: Expectation):
        a = self.a
        base = dict(group="profile", metric=metric, unit="s", source=ex.source, assumed=ex.assumed,
                    unverified=ex.unverified)
        if not a.available(metric):
            for stat in self._stats(ex):
                self.add(id=f"{metric}.{stat}", statistic=stat, verdict=SKIP,
                         reason="not measurable without a CS line", **base)
            return
        v = self.values(metric)
        v = v[~np.isnan(v)]
        if len(v) == 0:
            why = {"cs_change": "the capture has no cs_change gaps (one transfer per message?)",
                   "inter_transfer": "no inter-transfer gaps (CS never held across a transfer boundary)",
                   "inter_byte": "no inter-byte gaps (one word per transfer?)"}.get(metric, "nothing measured")
            for stat in self._stats(ex):
                self.add(id=f"{metric}.{stat}", statistic=stat, verdict=SKIP, reason=why, **base)
            return
        d = describe(v, a.tick_s)
        excluded = ""
        if metric in ("cs_change", "context_switch", "transfer_period") and self.idle.any():
            idle_gap = self.prof.idle_gap if self.prof is not None else None
            excluded = f"; {int(self.idle.sum())} idle gap(s) > {_t(idle_gap)} left out"
        if ex.p50 is not None:
            lo, hi = ex.band(ex.p50)
            self._judge_item(f"{metric}.p50", "p50", d["p50_s"], ex.p50, lo, hi, self.r, len(v),
                             extra=excluded + self._note(metric, d["p50_s"]) + _note(ex), **base)
        if ex.p99_min is not None or ex.p99_max is not None:
            self._judge_item(f"{metric}.p99", "p99", d["p99_s"], None, ex.p99_min, ex.p99_max, self.r,
                             len(v), extra=excluded + _note(ex), **base)

    def _note(self, metric, value):
        if metric == "inter_byte" and self.a.period_ticks:
            T = self.a.period_ticks * self.a.tick_s
            return f"; = {(value - T / 2) / T:.2f} idle clocks at the measured T = {_t(T)}"
        return ""

    @staticmethod
    def _stats(ex: Expectation):
        out = []
        if ex.p50 is not None:
            out.append("p50")
        if ex.p99_min is not None or ex.p99_max is not None:
            out.append("p99")
        return out

    def _judge_item(self, id_, stat, measured, expected, lo, hi, res, n, extra="", **base):
        hab = _headroom_abs(self.h, lo, hi)
        verdict, margin, why = judge(measured, lo, hi, res, hab)
        delta = (measured - expected) if expected is not None else _nearest_delta(measured, lo, hi)
        if delta is not None and abs(delta) < 1e-6 * (res or 0):
            delta = 0.0       # float noise, far below the resolution
        self.add(id=id_, statistic=stat, verdict=verdict, reason=why + extra, measured=measured,
                 expected=expected, low=lo, high=hi, delta=delta,
                 margin=margin, resolution=res, headroom=hab, n=n, **base)

    # ----------------------------------------------------------- profile: SCLK
    def sclk_resolution(self) -> float | None:
        """± of the measured SCLK frequency (Hz).

        T is the mean spacing of sampling edges inside words; inside one word the
        spacings add up to (first → last sampling edge), which is off by < 1
        sample, so their mean is off by < 1 sample / (wordsize − 1).
        """
        a = self.a
        if not a.period_ticks:
            return None
        ws = a.cfg.wordsize
        dT = 1.0 / (ws - 1) if ws > 1 else 1.0              # ticks
        f = a.sclk_hz
        if f is None:
            return None
        return f * dT / a.period_ticks

    def check_sclk(self, ex: Expectation):
        a = self.a
        base = dict(group="profile", metric="sclk", unit="Hz", source=ex.source, assumed=ex.assumed,
                    unverified=ex.unverified)
        if not a.sclk_hz:
            self.add(id="sclk.value", statistic="value", verdict=SKIP, reason="no SCLK measured", **base)
            return
        lo, hi = ex.band(ex.p50)
        self._judge_item("sclk.value", "value", a.sclk_hz, ex.p50, lo, hi, self.sclk_resolution(),
                         int(len(a.mosi)), extra=_note(ex), **base)

    # ----------------------------------------------------------- model
    def check_model(self, metric: str, ex: Expectation):
        a, prof = self.a, self.prof
        assert prof is not None, "model metrics are only checked with a profile"
        base = dict(group="model", metric=metric, unit="s" if metric == "transfer_duration" else "1/s",
                    source=ex.source, assumed=ex.assumed, unverified=ex.unverified)
        stat = "p50" if metric == "transfer_duration" else "value"
        iid = f"model.{metric}"
        words = self.words_per_transfer
        if words is None:
            why = ("windows differ in size (" + ", ".join(str(int(w)) for w in self.word_sizes[:6])
                   + " words): the model needs one transfer size") if len(self.word_sizes) else "no complete transfers"
            self.add(id=iid, statistic=stat, verdict=SKIP, reason=why, **base)
            return
        model = prof.model()
        n_msg = a.grouping.transfers_per_message
        if metric == "transfer_duration":
            expected = ex.p50 if not ex.model else model.capture_transfer_time(words)
            v = a.gap_values("transfer_duration")
            v = v[~np.isnan(v)]
            if len(v) == 0:
                self.add(id=iid, statistic=stat, verdict=SKIP, reason="no complete transfers", **base)
                return
            lo, hi = ex.band(expected)
            measured = float(np.percentile(v, 50)) * a.tick_s
            self._judge_item(iid, stat, measured, expected, lo, hi, self.r, len(v),
                             extra=f"; model: {words} words, T_transfer − T/2 (edges)" + _note(ex), **base)
            return
        # transfer rate: N transfers per message as found in the capture
        if self.idle.any():
            self.add(id=iid, statistic=stat, verdict=SKIP,
                     reason=f"{int(self.idle.sum())} idle gap(s) > {_t(prof.idle_gap)}: the traffic is "
                            "event-driven, so the back-to-back rate model does not apply", **base)
            return
        if n_msg is None:
            why = ("the message grouping is ambiguous (" + (a.grouping.settle or "") + " settles it)"
                   if a.grouping.ambiguous else "messages of varying length: the rate model needs one N")
            self.add(id=iid, statistic=stat, verdict=SKIP, reason=why, **base)
            return
        if n_msg > 1 and "cs_change" not in prof.timing:
            self.add(id=iid, statistic=stat, verdict=SKIP,
                     reason="the profile has no [timing] cs_change for messages of several transfers",
                     **base)
            return
        rate_hz = a.transfer_rate_hz()
        s = a.start[~a.partial_start]
        if rate_hz is None:
            self.add(id=iid, statistic=stat, verdict=SKIP, reason="fewer than two transfers", **base)
            return
        expected = ex.p50 if not ex.model else model.rate(words, n_msg, edges=True)
        span = (s[-1] - s[0]) * a.tick_s
        res = rate_hz * a.tick_s / span       # the span is off by < 1 sample
        lo, hi = ex.band(expected)
        self._judge_item(iid, stat, rate_hz, expected, lo, hi, res, len(s),
                         extra=f"; model: {words} words, {n_msg} transfer(s) per message "
                               f"[{a.grouping.method}]" + _note(ex), **base)

    # ----------------------------------------------------------- device
    def check_device(self):
        dev = self.dev
        for lim in dev.limits:
            base = dict(group="device", metric=lim.metric, unit=lim.unit,
                        source=lim.source, unverified=lim.unverified, assumed=bool(lim.assumption))
            iid = f"device.{lim.name}"
            needs = lim.needs
            if needs and needs not in self.events:
                self.add(id=iid, statistic="worst", verdict=SKIP,
                         reason=f"{lim.what}: needs the {needs.upper()} channel (--event "
                                f"{needs.upper()}:{'rise' if needs == 'convst' else 'fall'})", **base)
                continue
            if lim.metric == "sclk":
                self._device_sclk(lim, iid, base)
            elif lim.metric == "sclk_outside_cs":
                self._device_count(lim, iid, base, self.a.clk_outside_cs, "SCLK edges while CS inactive")
            elif lim.metric == "sclk_at_busy_fall":
                self._device_busy(lim, iid, base)
            else:
                self._device_each(lim, iid, base)
        for what in dev.cannot_check:
            self.notes.append(f"{dev.spec}: not checked from the SPI lines: {what}")

    def _device_sclk(self, lim: Limit, iid, base):
        a = self.a
        if not a.sclk_hz:
            self.add(id=iid, statistic="value", verdict=SKIP, reason="no SCLK measured", **base)
            return
        self._judge_item(iid, "value", a.sclk_hz, None, lim.min, lim.max, self.sclk_resolution(),
                         int(len(a.mosi)), extra=_limit_note(lim), **base)

    def _device_count(self, lim: Limit, iid, base, count: int, what: str):
        lo, hi = lim.min, lim.max
        bad = (lo is not None and count < lo) or (hi is not None and count > hi)
        self.add(id=iid, statistic="count", verdict=FAIL if bad else PASS,
                 reason=f"{count} {what}" + _limit_note(lim), measured=float(count), low=lo, high=hi,
                 delta=_nearest_delta(float(count), lo, hi), resolution=0.0, n=1, **base)

    def _device_busy(self, lim: Limit, iid, base):
        a = self.a
        busy = self.events["busy"]
        falls = busy.fall
        ok = a.first_edge >= 0
        first, last = a.first_edge[ok], a.last_edge[ok]
        # a BUSY fall during a window's clocking: between its first and last SCLK edge (± 1 sample)
        k = np.searchsorted(first, falls, side="right") - 1
        inside = (k >= 0) & (falls <= np.where(k >= 0, last[np.maximum(k, 0)], -1))
        at = falls[inside]
        hi = lim.max if lim.max is not None else 0
        self.add(id=iid, statistic="count", verdict=FAIL if len(at) > hi else PASS,
                 reason=f"{len(at)} of {len(falls)} BUSY falling edge(s) while SCLK was running"
                        + _limit_note(lim),
                 measured=float(len(at)), high=hi, resolution=0.0, n=int(len(falls)),
                 violations={"count": int(len(at)), "possible": 0, "checked": int(len(falls)),
                             "first_s": [float(t) * a.tick_s for t in at[:FIRST_N]]}, **base)

    def _device_each(self, lim: Limit, iid, base):
        a = self.a
        vals, at = self._per_event(lim.metric)
        ok = ~np.isnan(vals)
        vals, at = vals[ok], at[ok]
        if len(vals) == 0:
            self.add(id=iid, statistic="worst", verdict=SKIP,
                     reason=f"{lim.what}: nothing measured" + _limit_note(lim), **base)
            return
        if lim.metric == "frame_bits":
            self._device_bits(lim, iid, base, vals, at)
            return
        stat = "worst"
        r = 1.0                      # ticks: every value is edge-to-edge
        lo = lim.min / a.tick_s if lim.min is not None else None
        hi = lim.max / a.tick_s if lim.max is not None else None
        m = np.full(len(vals), np.inf)
        if lo is not None:
            m = np.minimum(m, vals - lo)
        if hi is not None:
            m = np.minimum(m, hi - vals)
        eps = 1e-9
        definite = m <= -r + eps
        possible = (~definite) & (m < r - eps)
        worst = int(np.argmin(m))
        hab = _headroom_abs(self.h, lim.min, lim.max)
        worst_s = float(vals[worst]) * a.tick_s
        verdict, margin, why = judge(worst_s, lim.min, lim.max, a.tick_s, hab)
        nd, npos = int(definite.sum()), int(possible.sum())
        if nd:
            verdict = FAIL
            why = f"{nd} of {len(vals)} beyond the limit by at least one sample (certain violations)"
        elif npos:
            verdict = MARGINAL
            why = (f"{npos} of {len(vals)} within ±1 sample of the limit: cannot be decided at "
                   "this sample rate")
        else:
            why = f"all {len(vals)} inside; worst: " + why
        shown = at[definite] if nd else at[possible]
        self.add(id=iid, statistic=stat, verdict=verdict, reason=why + _limit_note(lim),
                 measured=worst_s, low=lim.min, high=lim.max,
                 delta=_nearest_delta(worst_s, lim.min, lim.max), margin=margin, resolution=a.tick_s,
                 headroom=hab, n=int(len(vals)),
                 violations={"count": nd, "possible": npos, "checked": int(len(vals)),
                             "first_s": [float(t) * a.tick_s for t in shown[:FIRST_N]],
                             "worst_s": worst_s, "worst_at_s": float(at[worst]) * a.tick_s},
                 **base)

    def _device_bits(self, lim: Limit, iid, base, vals, at):
        a = self.a
        bad = np.zeros(len(vals), bool)
        if lim.multiple_of:
            bad |= (vals % lim.multiple_of) != 0
        if lim.min is not None:
            bad |= vals < lim.min
        if lim.max is not None:
            bad |= vals > lim.max
        nd = int(bad.sum())
        rule = " and ".join(filter(None, [
            f"multiple of {lim.multiple_of}" if lim.multiple_of else "",
            f"≥ {lim.min:g}" if lim.min is not None else "", f"≤ {lim.max:g}" if lim.max is not None else ""]))
        self.add(id=iid, statistic="each", verdict=FAIL if nd else PASS, rule=rule,
                 reason=(f"{nd} of {len(vals)} CS windows have a bit count that breaks the limit"
                         if nd else f"all {len(vals)} CS windows fit") + _limit_note(lim),
                 measured=float(vals[bad][0]) if nd else float(vals[0]), low=lim.min, high=lim.max,
                 resolution=0.0, n=int(len(vals)),
                 violations={"count": nd, "possible": 0, "checked": int(len(vals)),
                             "first_s": [float(t) * a.tick_s for t in at[bad][:FIRST_N]]}, **base)

    def _per_event(self, metric: str) -> tuple[np.ndarray, np.ndarray]:
        """(values in ticks, tick at which each happens) for a per-transfer limit."""
        a = self.a
        if metric == "cs_setup":
            return a.cs_setup.astype(float), a.start
        if metric == "cs_hold":
            return a.cs_hold.astype(float), a.end
        if metric == "cs_high":
            if not a.has_cs or a.n < 2:
                return np.empty(0), np.empty(0, np.int64)
            return a.gap_before[1:].astype(float), a.end[:-1]
        if metric == "sclk_half":
            mh = a.min_half.astype(float)
            mh[a.min_half < 0] = np.nan
            return mh, a.start
        if metric == "transfer_duration":
            return a.duration.astype(float), a.start
        if metric == "transfer_period":
            return a.period(), a.start[:-1]
        if metric == "frame_bits":
            v = a.n_bits.astype(float)
            v[a.partial_start | a.partial_end] = np.nan
            return v, a.start
        if metric == "convst_period":
            r = self.events["convst"].rise
            return np.diff(r).astype(float), r[:-1]
        raise KeyError(metric)


# ------------------------------------------------------------------ helpers
def _nearest_delta(measured, lo, hi):
    cands = [(abs(measured - b), measured - b) for b in (lo, hi) if b is not None]
    return min(cands)[1] if cands else None


def _note(ex: Expectation) -> str:
    bits = []
    if ex.assumed:
        bits.append("expected value is our assumption")
    if ex.unverified:
        bits.append("UNVERIFIED")
    if ex.note:
        bits.append(ex.note)
    return ("; " + "; ".join(bits)) if bits else ""


def _limit_note(lim: Limit) -> str:
    bits = []
    if lim.unverified:
        bits.append("limit UNVERIFIED")
    if lim.assumption:
        bits.append("assumes " + lim.assumption)
    if lim.note:
        bits.append(lim.note)
    return ("; " + "; ".join(bits)) if bits else ""


def _t(s):
    from spigap.units import fmt_time

    return fmt_time(s)


def overall_verdict(results: list) -> str:
    """The worst verdict of several captures: FAIL > NO DATA > MARGINAL > PASS."""
    return max((r.verdict for r in results), key=lambda v: SEVERITY[v], default=NO_DATA)


def results_to_dict(results: list) -> dict:
    """The `spigap check --format json` document for several captures."""
    verdict = overall_verdict(results)
    return {"spigap": __version__, "check_schema": CHECK_SCHEMA, "verdict": verdict,
            "results": [r.to_dict() for r in results]}
