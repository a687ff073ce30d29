"""Captures with known truth from a profile: what this kernel *should* look like on the bus.

``scenario_from_profile`` turns a profile's [bus] and [timing] into a
``spigap.synth.scenario.Scenario`` (the same generator `spigap synth` uses),
with a normal jitter of a fraction of each gap's tolerance. Used by
``spigap model --synth`` and by the tests (check PASS on a profile's own
capture, FAIL on another profile's).
"""

from __future__ import annotations

from spigap.timing.profiles import Profile, ProfileError

JITTER_FRACTION = 0.15     # sigma = this × the p50 tolerance of each gap kind


def scenario_from_profile(profile: Profile, *, words: int | None = None, transfers_per_message: int = 1,
                          messages: int = 200, seed: int = 1, samplerate: float | None = None,
                          jitter_fraction: float = JITTER_FRACTION, stall_probability: float = 0.0,
                          stall=(20e-6, 60e-6)):
    from spigap.synth.scenario import Scenario

    t = profile.timing
    for key in ("cs_setup", "cs_hold", "context_switch"):
        if key not in t:
            raise ProfileError(f"[timing] {key} is needed to synthesize a capture", path=profile.path)
    if transfers_per_message > 1 and "cs_change" not in t:
        raise ProfileError("[timing] cs_change is needed for messages of several transfers",
                           path=profile.path)
    sigma = {}
    for kind in ("cs_setup", "cs_hold", "cs_change", "context_switch", "inter_transfer"):
        ex = profile.expect.get(kind)
        if ex is None or ex.p50 is None:
            continue
        lo, hi = ex.band(ex.p50)
        if lo is not None:
            sigma[kind] = jitter_fraction * (hi - lo) / 2
    sc = Scenario()
    sc.samplerate = samplerate or max(50e6, 10 * profile.sclk_hz)
    sc.seed = seed
    sc.sclk = profile.sclk_hz
    mode = profile.mode or 0
    sc.cpol, sc.cpha = mode >> 1, mode & 1
    sc.wordsize = profile.bits_per_word
    sc.words_per_transfer = words or profile.words_per_transfer
    if profile.segments > 1:
        n = sc.words_per_transfer
        if n < profile.segments:
            raise ProfileError(f"{profile.segments} segments need at least as many words per transfer",
                               path=profile.path)
        base = [n // profile.segments] * profile.segments
        base[-1] += n - sum(base)
        sc.segments = base
    sc.transfers_per_message = transfers_per_message
    sc.messages = messages
    sc.mosi, sc.miso = "counter", "random"
    sc.cs_setup, sc.cs_hold = t["cs_setup"], t["cs_hold"]
    sc.cs_change = t.get("cs_change", 10e-6)
    sc.context_switch = t["context_switch"]
    sc.inter_transfer = t.get("inter_transfer", 5e-6)
    sc.idle_clocks = profile.idle_clocks
    sc.sigma = sigma
    sc.stall_probability = stall_probability
    sc.stall = tuple(stall)
    sc.stall_kinds = ("context_switch",)
    sc.source = (f"# synthesized from spigap profile {profile.name} ({profile.path}): "
                 f"{transfers_per_message} transfer(s) per message, jitter sigma = "
                 f"{jitter_fraction:g} x each tolerance\n")
    sc._check()
    return sc
