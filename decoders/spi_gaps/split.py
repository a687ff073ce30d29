##
## This file is part of spigap.
##
## This program is free software: you can redistribute it and/or modify
## it under the terms of the GNU General Public License as published by
## the Free Software Foundation, either version 3 of the License, or
## (at your option) any later version.
##
"""The two-population split (docs/gaps.md "Two populations"): tells inter-byte
from inter-transfer word gaps, and cs_change from context-switch gaps, by the
data's own structure.

Plain Python (no sigrokdecode, no numpy), like every module of the gap rules
(gapdefs.py): the split works on a histogram of log-spaced bins (at most a few
hundred), so the plain loops stay cheap whatever the capture length.
"""

import bisect
import math

# docs/gaps.md "Two populations". Values are binned on a log scale (gaps
# jitter in proportion to their length), modelled as two normal components
# plus a uniform "stall" component (sparse outliers: at most SPLIT_MAX_OUTLIER
# of the CS-inactive gaps, SPLIT_MAX_OUTLIER_LINEAR of the word gaps: a group
# of word gaps far longer than the others is an inter-transfer population by
# definition, only a rare hiccup is a stall), fitted by EM from several starting cuts; the fit is accepted as
# two populations only when it beats one component (BIC) AND the components are
# separated by a clear valley: means >= SPLIT_MIN_SEPARATION pooled standard
# deviations and >= SPLIT_MIN_TICKS samples apart, each holding >=
# SPLIT_MIN_SHARE of the gaps and >= SPLIT_MIN_COUNT gaps, none wider than
# SPLIT_MAX_SIGMA (a sparse, wide spread of long gaps is stalls, not a population).
SPLIT_BIN = 0.02            # bin width in ln(ticks + 1): 2 %
SPLIT_MIN_SEPARATION = 4.0
SPLIT_UNCLEAR_SEPARATION = 2.0   # between this and the above: "cannot tell"
# word gaps pile up at their floor (back-to-back words) when jitter is large:
# a clipped normal looks like two close candidates, so "cannot tell" starts higher
SPLIT_UNCLEAR_SEPARATION_LINEAR = 3.0
SPLIT_MIN_TICKS = 3.0
SPLIT_CLOSE_TICKS = 2.0         # word gaps 2-3 samples apart: 'cannot tell' when clearly two (_close_pair)
SPLIT_MIN_SHARE = 0.004
SPLIT_MIN_COUNT = 3
SPLIT_MAX_SIGMA = 0.45
SPLIT_MAX_OUTLIER = 0.15
SPLIT_MAX_OUTLIER_LINEAR = 0.02
SPLIT_ITERATIONS = 60
SPLIT_TOLERANCE = 1e-6
SPLIT_LINEAR_BINS = 400
SPLIT_START_CUTS = (0.01, 0.03, 0.1, 0.25, 0.5, 0.75, 0.9, 0.97, 0.99)


class Split:
    """Result of ``split_two``. Means/sigmas are in ln(ticks + 1).

    verdict: 'one' (one population: nothing to split), 'two' (two populations
    with a clear valley), 'unclear' (the values do not look like one
    population, but the two candidate populations overlap: cannot tell)."""

    def __init__(self, verdict, comps, outlier, separation, threshold, expected_error, n, note):
        self.verdict = verdict
        self.comps = comps          # [(weight, mean, sigma)] lo first; one entry for 'one'
        self.outlier = outlier      # weight of the uniform (stall) component
        self.separation = separation
        self.threshold = threshold  # ticks: boundary lo/hi (posteriors equal); None unless 'two'
        self.expected_error = expected_error
        self.n = n
        self.note = note
        self.scale = 'log'
        self._u_density = None

    def ticks(self, k):
        """Median of component k in ticks."""
        return _from_x(self.comps[k][1], self.scale)

    def classify(self, value, margin=0.9):
        """0 (lower population), 1 (upper), or -1 (a stall, or not clearly
        either: posterior below ``margin``) for one value in ticks."""
        if self.verdict != 'two':
            return 0
        x = _to_x(value, self.scale)
        p = [w * _normal(x, m, s) for w, m, s in self.comps]
        pu = self.outlier * (self._u_density or 1.0)
        tot = p[0] + p[1] + pu
        if tot <= 0:
            return 1 if value > self.threshold else 0
        if pu / tot > 0.5:
            return -1
        k = 0 if p[0] >= p[1] else 1
        return k if p[k] / (p[0] + p[1]) >= margin else -1


def _normal(x, m, s):
    z = (x - m) / s
    return math.exp(-0.5 * z * z) / (s * 2.5066282746310002)


def _to_x(value, scale):
    return math.log(value + 1.0) if scale == 'log' else float(value)


def _from_x(x, scale):
    return math.exp(x) - 1.0 if scale == 'log' else x


def _floor(m, scale='log', res=1.0):
    # half a sample of res ticks (in the log domain: at a value of exp(m) - 1 ticks), or half a bin
    if scale != 'log':
        return 0.5 * res
    return max(SPLIT_BIN / 2.0, math.log1p(0.5 * res / math.exp(m)))


def _em(xs, ws, total, comps, outlier, u_density, scale='log', binw=SPLIT_BIN, res=1.0):
    """EM for one or two normal components + one uniform component over binned
    data (xs: bin centres, ws: counts). Returns (comps, outlier, loglik).

    The grouping spends most of its time here (one capture's gaps are split a few
    times, each from several starting cuts), and sigrok's embedded Python on a
    stock Debian has no numpy (python3-numpy is no dependency of libsigrokdecode):
    so the pass over the bins is written out for one and for two components, with
    each component's constants taken out of the loop. The arithmetic is that of
    the plain formulas (``_normal``), operation for operation: the same fit to the
    last bit."""
    if len(comps) == 1:
        return _em1(xs, ws, total, comps[0], outlier, u_density, scale, binw, res)
    return _em2(xs, ws, total, comps, outlier, u_density, scale, binw, res)


def _m_step(s0, s1, s2, total, scale, binw, res):
    """One component's (weight, mean, sigma) from its posterior sums; None when it holds nothing."""
    if s0 <= 1e-12:
        return None
    m = s1 / s0
    var = max(s2 / s0 - m * m, 0.0) + binw * binw / 12.0
    return s0 / total, m, max(math.sqrt(var), _floor(m, scale, res))


def _em1(xs, ws, total, comp, outlier, u_density, scale, binw, res):
    exp, log = math.exp, math.log
    w0, m0, d0 = comp
    cap = SPLIT_MAX_OUTLIER if scale == 'log' else SPLIT_MAX_OUTLIER_LINEAR
    ll = -math.inf
    for _ in range(SPLIT_ITERATIONS):
        a0, b0, c0 = 0.0, 0.0, 0.0
        su = 0.0
        new_ll = 0.0
        pu = outlier * u_density
        n0 = d0 * 2.5066282746310002
        for x, w in zip(xs, ws):
            z = (x - m0) / d0
            p0 = w0 * (exp(-0.5 * z * z) / n0)
            tot = p0 + pu
            if tot <= 0.0:
                continue
            new_ll += w * log(tot)
            f = w / tot
            r = p0 * f
            a0 += r
            b0 += r * x
            c0 += r * x * x
            su += pu * f
        c = _m_step(a0, b0, c0, total, scale, binw, res)
        if c is None:
            w0 = 0.0
        else:
            w0, m0, d0 = c
        outlier = min(su / total, cap)
        rest = 1.0 - outlier
        wsum = w0 or 1.0
        w0 = w0 / wsum * rest
        if abs(new_ll - ll) < SPLIT_TOLERANCE * max(1.0, abs(new_ll)):
            ll = new_ll
            break
        ll = new_ll
    return [(w0, m0, d0)], outlier, ll


def _em2(xs, ws, total, comps, outlier, u_density, scale, binw, res):
    exp, log = math.exp, math.log
    (w0, m0, d0), (w1, m1, d1) = comps
    cap = SPLIT_MAX_OUTLIER if scale == 'log' else SPLIT_MAX_OUTLIER_LINEAR
    ll = -math.inf
    for _ in range(SPLIT_ITERATIONS):
        a0, b0, c0, a1, b1, c1 = 0.0, 0.0, 0.0, 0.0, 0.0, 0.0
        su = 0.0
        new_ll = 0.0
        pu = outlier * u_density
        n0 = d0 * 2.5066282746310002
        n1 = d1 * 2.5066282746310002
        for x, w in zip(xs, ws):
            z = (x - m0) / d0
            p0 = w0 * (exp(-0.5 * z * z) / n0)
            z = (x - m1) / d1
            p1 = w1 * (exp(-0.5 * z * z) / n1)
            tot = p0 + p1 + pu
            if tot <= 0.0:
                continue
            new_ll += w * log(tot)
            f = w / tot
            r = p0 * f
            a0 += r
            b0 += r * x
            c0 += r * x * x
            r = p1 * f
            a1 += r
            b1 += r * x
            c1 += r * x * x
            su += pu * f
        c = _m_step(a0, b0, c0, total, scale, binw, res)
        if c is None:
            w0 = 0.0
        else:
            w0, m0, d0 = c
        c = _m_step(a1, b1, c1, total, scale, binw, res)
        if c is None:
            w1 = 0.0
        else:
            w1, m1, d1 = c
        outlier = min(su / total, cap)
        rest = 1.0 - outlier
        wsum = (w0 + w1) or 1.0
        w0 = w0 / wsum * rest
        w1 = w1 / wsum * rest
        if abs(new_ll - ll) < SPLIT_TOLERANCE * max(1.0, abs(new_ll)):
            ll = new_ll
            break
        ll = new_ll
    return [(w0, m0, d0), (w1, m1, d1)], outlier, ll


def _weighted_stats(xs, ws, scale='log', res=1.0):
    n = sum(ws)
    if n <= 0:
        return 0.0, _floor(0.0, scale, res)
    m = sum(x * w for x, w in zip(xs, ws)) / n
    v = sum(w * (x - m) ** 2 for x, w in zip(xs, ws)) / n
    return m, max(math.sqrt(v), _floor(m, scale, res))


def histogram_bins(pairs, scale='log'):
    """(value ticks, count) pairs -> sorted (bin centre, count) lists and the
    bin width: in ln(ticks + 1) bins of SPLIT_BIN ('log'), or in ticks, at most
    SPLIT_LINEAR_BINS bins ('linear')."""
    pairs = [(v, c) for v, c in pairs if v >= 0 and c > 0]
    if scale == 'log':
        binw = SPLIT_BIN
        key = lambda v: int(round(math.log(v + 1.0) / binw))  # noqa: E731
    else:
        lo = min((v for v, _ in pairs), default=0)
        hi = max((v for v, _ in pairs), default=0)
        binw = max(1.0, (hi - lo) / float(SPLIT_LINEAR_BINS))
        key = lambda v: int(round(v / binw))  # noqa: E731
    bins = {}
    for v, c in pairs:
        k = key(v)
        bins[k] = bins.get(k, 0) + c
    keys = sorted(bins)
    return [k * binw for k in keys], [bins[k] for k in keys], binw


def split_two(pairs, scale='log', resolution=1.0, wide_share=None):
    """Split values into two populations when they really are two.

    ``pairs``: (value in ticks, count) for every distinct value (a histogram).
    ``scale``: 'log' for gaps whose jitter grows with their length
    (CS-inactive gaps: scheduler and busy-wait times), 'linear' for gaps with
    a fixed jitter (word gaps: controller and FIFO timing). ``resolution``:
    ticks per sample (1 unless a reader's time unit is finer than a sample).
    ``wide_share``: a component wider than SPLIT_MAX_SIGMA that holds more than
    this share of the values is a population (sleeps and waits for an interrupt
    spread wide), not stalls (None: never; the message grouping passes the
    stall cap, since stalls never hold more). Returns a Split (see its doc)."""
    pairs = list(pairs)
    xs, ws, binw = histogram_bins(pairs, scale)
    total = float(sum(ws))
    if total == 0:
        return Split('one', [(1.0, 0.0, SPLIT_BIN)], 0.0, 0.0, None, 0.0, 0, 'no values')
    span = (xs[-1] - xs[0]) + binw
    u_density = 1.0 / span
    # the data's own quantum: values that are all multiples of q ticks apart
    # (a reader whose time unit is finer than the sample period) resolve q ticks
    pairs = [(v, c) for v, c in pairs if v >= 0 and c > 0]
    quantum = 0
    first = pairs[0][0] if pairs else 0
    for v, _ in pairs:
        quantum = math.gcd(quantum, int(round(v - first)))
    values = sorted(v for v, _ in pairs)
    smallest = min([v for v in values if v > 0] or [0])
    if quantum <= 1 and len(values) >= 3 and values[-1] - values[0] >= 100 * len(values):
        quantum = _rounded_quantum(values, smallest)
    spread = (max(values) - min(values)) if values else 0
    if len(pairs) < 2 or not (quantum <= 0.25 * smallest or (len(pairs) >= 3 and quantum <= 0.05 * spread)):
        quantum = 1             # two far-apart values are two populations, not a time unit
    res = max(float(resolution), float(quantum), 1.0)
    m, s = _weighted_stats(xs, ws, scale, res)
    u0 = 0.01 if scale == 'log' else 0.005
    one, out1, ll1 = _em(xs, ws, total, [(1.0, m, s)], u0, u_density, scale, binw, res)
    one_split = Split('one', one, out1, 0.0, None, 0.0, int(total), 'one population')
    one_split._u_density = u_density
    one_split.scale = scale
    if len(xs) < 2:
        return one_split
    best = None
    cum = []
    acc = 0
    for w in ws:
        acc += w
        cum.append(acc)
    close = None                # the best fit 2-3 samples apart (see below)
    tried = set()
    for q in SPLIT_START_CUTS:
        j = bisect.bisect_left(cum, q * total)
        j = min(max(j, 0), len(xs) - 2)
        if j in tried:
            continue
        tried.add(j)
        lo_m, lo_s = _weighted_stats(xs[:j + 1], ws[:j + 1], scale, res)
        hi_m, hi_s = _weighted_stats(xs[j + 1:], ws[j + 1:], scale, res)
        wl = cum[j] / total
        comps, out, ll = _em(xs, ws, total, [(wl * 0.98, lo_m, lo_s), ((1 - wl) * 0.98, hi_m, hi_s)],
                             2 * u0, u_density, scale, binw, res)
        # the best fit among those that could be two populations at all (one
        # sample apart is quantization, not a second population)
        (c1, c2) = sorted(comps, key=lambda c: c[1])
        if min(c1[0], c2[0]) < SPLIT_MIN_SHARE or min(c1[0], c2[0]) * total < SPLIT_MIN_COUNT:
            continue
        apart = _from_x(c2[1], scale) - _from_x(c1[1], scale)
        if apart < SPLIT_MIN_TICKS * res:
            if scale == 'linear' and apart >= SPLIT_CLOSE_TICKS * res and (close is None or ll > close[2]):
                close = (comps, out, ll)
            continue
        if best is None or ll > best[2]:
            best = (comps, out, ll)
    if best is None:
        return _close_pair(close, ll1, total, scale, one_split)
    comps, out, ll2 = best
    comps = sorted(comps, key=lambda c: c[1])
    (w1, m1, s1), (w2, m2, s2) = comps
    sep = _separation(comps)
    ticks_apart = _from_x(m2, scale) - _from_x(m1, scale)
    bic_gain = _bic_gain(ll2, ll1, total)
    small = min(w1, w2) < SPLIT_MIN_SHARE or min(w1, w2) * total < SPLIT_MIN_COUNT
    wide = scale == 'log' and any(s > SPLIT_MAX_SIGMA and (wide_share is None or w <= wide_share)
                                  for w, s in ((w1, s1), (w2, s2)))
    # the model's own estimate of how many gaps their length alone puts in the wrong population
    err = 0.0
    for x, w in zip(xs, ws):
        p1 = w1 * _normal(x, m1, s1)
        p2 = w2 * _normal(x, m2, s2)
        if p1 + p2 > 0:
            err += w * min(p1, p2) / (p1 + p2)
    err /= total
    thr = _from_x(_boundary(comps), scale)
    desc = ('%.4g and %.4g samples (%.0f %% / %.0f %%), %.1f standard deviations apart'
            % (_from_x(m1, scale), _from_x(m2, scale), 100 * w1, 100 * w2, sep))
    if bic_gain <= 0 or small or ticks_apart < SPLIT_MIN_TICKS * res:
        return one_split
    if wide:
        one_split.note = 'one population; the rest is a sparse, wide spread (stalls)'
        return one_split
    if sep >= SPLIT_MIN_SEPARATION:
        r = Split('two', comps, out, sep, thr, err, int(total), 'two populations: ' + desc)
    elif sep >= (SPLIT_UNCLEAR_SEPARATION if scale == 'log' else SPLIT_UNCLEAR_SEPARATION_LINEAR):
        r = Split('unclear', comps, out, sep, thr, err, int(total),
                  'not one population, but the two candidates overlap (' + desc + '): cannot tell')
    else:
        return one_split
    r._u_density = u_density
    r.scale = scale
    return r


def _bic_gain(ll2, ll1, total):
    """How much better two components fit than one, net of the three extra parameters (BIC / 2)."""
    return (ll2 - ll1) - 1.5 * math.log(max(total, 2.0))


def _separation(comps):
    """Distance of two components' means (sorted, lo first) in pooled standard deviations."""
    (_, m1, s1), (_, m2, s2) = comps
    return (m2 - m1) / math.sqrt((s1 * s1 + s2 * s2) / 2.0)


def _close_pair(close, ll1, total, scale, one_split):
    """Word gaps (linear scale) in two clusters 2-3 samples apart (e.g. 3 and 6
    samples: back-to-back bytes and an inter-transfer gap at a low sample rate) are
    below the 3 samples that a split needs, but a clear two-component fit there is
    not one population either: the sample rate cannot tell them apart, and the note
    says so (an 'unclear' verdict: no split, a warning; --inter-transfer-gap settles
    it). ``close``: the best such fit or None."""
    if close is None:
        return one_split
    comps, out, ll2 = close
    comps = sorted(comps, key=lambda c: c[1])
    (w1, m1, _), (w2, m2, _) = comps
    sep = _separation(comps)
    if _bic_gain(ll2, ll1, total) <= 0 or sep < SPLIT_MIN_SEPARATION:
        return one_split
    thr = _from_x(_boundary(comps), scale)
    r = Split('unclear', comps, out, sep, thr, 0.0, int(total),
              'not one population, but the two candidates (%.4g and %.4g samples, %.0f %% / %.0f %%) are '
              'within %.0f samples of each other, the least that tells populations from the sample '
              'rate\'s rounding: cannot tell' % (_from_x(m1, scale), _from_x(m2, scale), 100 * w1, 100 * w2,
                                                  SPLIT_MIN_TICKS))
    r._u_density = one_split._u_density
    r.scale = scale
    return r


def _rounded_quantum(values, smallest):
    """The time unit of values that are rounded multiples of it (a VCD in ps of
    a 12 MHz capture: 333333, 416666, ... samples of 83333.3 ps), or 1."""
    merged = [values[0]]
    for v in values[1:]:
        if v - merged[-1] > 2:
            merged.append(v)
    if len(merged) < 3:
        return 1
    q = min(b - a for a, b in zip(merged, merged[1:]))
    if q < 10 or q > 0.5 * smallest:
        return 1
    span = merged[-1] - merged[0]
    q = span / float(round(span / float(q)))       # the unit to sub-tick precision
    for v in merged:
        k = (v - merged[0]) / float(q)
        if abs(k - round(k)) * q > 2 + 1e-6 * v:
            return 1
    return q


def _boundary(comps):
    """Where the two weighted components are equally likely (between their means), in x."""
    (w1, m1, s1), (w2, m2, s2) = comps
    lo, hi = m1, m2
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if w1 * _normal(mid, m1, s1) > w2 * _normal(mid, m2, s2):
            lo = mid
        else:
            hi = mid
    return 0.5 * (lo + hi)
