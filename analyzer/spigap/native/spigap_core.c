/*
 * spigap compiled core: the two per-sample / per-edge loops of the analyzer.
 *
 * Hand-written because nothing off the shelf frames SPI from raw edges with
 * our definitions, and the numpy version (analyzer/spigap/core/framing.py, kept as
 * the fallback and as the oracle these loops are tested against) needs ~40
 * array passes per block. Plain C99, no Python headers: cffi compiles it at
 * install time together with the declarations in spigap_core.h, which are
 * both the cffi cdef and this file's own prototypes, so the compiler checks
 * that Python's view of the structs is the C one (analyzer/spigap/native/build.py).
 *
 * Definitions: docs/gaps.md.
 */
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "spigap_core.h"

#define BIG INT64_MAX

/* ------------------------------------------------------------------ scan */

/* bit bitpos[j] of the masked sample becomes bit j of the compact state */
static inline uint32_t compact(uint64_t v, const int64_t *bitpos, int64_t nbits)
{
    uint32_t c = 0;
    for (int64_t j = 0; j < nbits; j++)
        c |= (uint32_t)((v >> bitpos[j]) & 1u) << j;
    return c;
}

/*
 * Find the samples where the masked bits differ from the previous sample.
 * data: n samples of `unitsize` bytes (little-endian); mask: unitsize bytes;
 * bitpos[j]: bit of the sample word that becomes bit j of the compact state.
 * *prev: masked value of the sample before data[0] (in/out).
 * Writes (base + i, compact state) for every change; stops when `cap` entries
 * are written and returns the number of samples consumed.
 */
int64_t spigap_scan(const uint8_t *data, int64_t n, int64_t unitsize, const uint8_t *mask,
                    const int64_t *bitpos, int64_t nbits, uint64_t *prev, int64_t base,
                    int64_t *pos_out, uint32_t *val_out, int64_t cap, int64_t *n_out)
{
    int64_t k = *n_out, i = 0;
    uint64_t p = *prev, m = 0;
    for (int64_t b = 0; b < unitsize; b++)
        m |= (uint64_t)mask[b] << (8 * b);
    if (unitsize == 1) {
        uint8_t pb = (uint8_t)p, mb = (uint8_t)m;
        uint32_t lut[256];                   /* masked sample -> compact state */
        for (int v = 0; v < 256; v++)
            lut[v] = compact((uint64_t)(v & mb), bitpos, nbits);
        if (n > 0) {                         /* the first sample against the one before the piece */
            uint8_t v = data[0] & mb;
            if (v != pb) {
                if (k >= cap)
                    goto done1;
                pos_out[k] = base;
                val_out[k] = lut[v];
                k++;
            }
            i = 1;
        }
#if defined(__SSE2__)
        {
            /* 16 samples at a time: each against the one before it (one unaligned
               load shifted by a byte); set bits of the compare mask are changes */
            const __m128i vm = _mm_set1_epi8((char)mb), zero = _mm_setzero_si128();
            for (; i + 16 <= n; i += 16) {
                __m128i cur = _mm_loadu_si128((const __m128i *)(data + i));
                __m128i prv = _mm_loadu_si128((const __m128i *)(data + i - 1));
                __m128i x = _mm_and_si128(_mm_xor_si128(cur, prv), vm);
                unsigned bitsm = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, zero)) ^ 0xFFFFu;
                while (bitsm) {
                    int j = __builtin_ctz(bitsm);
                    if (k >= cap) {
                        i += j;
                        goto done1;
                    }
                    pos_out[k] = base + i + j;
                    val_out[k] = lut[data[i + j] & mb];
                    k++;
                    bitsm &= bitsm - 1;
                }
            }
        }
#endif
        for (; i < n; i++) {
            if (((data[i] ^ data[i - 1]) & mb) != 0) {
                if (k >= cap)
                    break;
                pos_out[k] = base + i;
                val_out[k] = lut[data[i] & mb];
                k++;
            }
        }
    done1:
        if (i > 0)
            pb = data[i - 1] & mb;
        p = pb;
    } else {
        for (; i < n; i++) {
            uint64_t v = 0;
            memcpy(&v, data + i * unitsize, (size_t)unitsize);  /* little-endian host */
            v &= m;
            if (v != p) {
                if (k >= cap)
                    break;
                pos_out[k] = base + i;
                val_out[k] = compact(v, bitpos, nbits);
                k++;
                p = v;
            }
        }
    }
    *prev = p;
    *n_out = k;
    return i;
}

/* ---------------------------------------------------------------- framer */

/* The per-edge helpers are inlined into spigap_frame, so the framer state it
   copies to a local can live in registers (a call would make its address escape). */
#if defined(__GNUC__)
#define HOT static inline __attribute__((always_inline))
#else
#define HOT static inline
#endif


HOT void add_spacing(out_t *o, int64_t v)
{
    if (v >= 0 && v < o->hist_size)
        o->hist[v]++;
    else
        o->ovf[o->n_ovf++] = v;
}

HOT void new_word(framer_t *f, int64_t word, int64_t t)
{
    f->cw = word;
    f->c_bit_end = (word + 1) * f->ws;
    f->c_first = t;
    f->c_last = t;
    f->c_prev_owned = -1;
    f->c_samp = 0;
    f->c_mosi = 0;
    f->c_miso = 0;
    f->c_min_high = BIG;
    f->c_min_low = BIG;
    f->c_n_space = 0;
}

HOT void emit_word(framer_t *f, out_t *o)
{
    int64_t *r = o->word + 4 * o->n_word++;
    r[0] = f->c_mosi;
    r[1] = f->c_miso;
    r[2] = f->c_first;
    r[3] = f->c_last;
    f->w_n_words++;
    for (int64_t k = 0; k < f->c_n_space; k++)
        add_spacing(o, f->c_space[k]);
    if (f->c_min_high < f->min_high) f->min_high = f->c_min_high;
    if (f->c_min_low < f->min_low) f->min_low = f->c_min_low;
    if (f->c_min_high < f->w_min_half) f->w_min_half = f->c_min_high;
    if (f->c_min_low < f->w_min_half) f->w_min_half = f->c_min_low;
    f->cw = -1;
}

HOT void open_window(framer_t *f, int64_t t, int64_t clk_ok, int64_t partial)
{
    f->open = 1;
    f->w_start = t;
    f->w_first = -1;
    f->w_last = -1;
    f->w_n_edges = 0;
    f->w_n_samp = 0;
    f->w_n_words = 0;
    f->w_min_half = BIG;
    f->w_partial_start = partial;
    f->w_clk_ok = clk_ok;
    f->w_last_samp = -1;
    f->cw = -1;
}

HOT void close_window(framer_t *f, out_t *o, int64_t end, int64_t partial_end)
{
    if (f->cw >= 0 && f->c_samp == f->ws)
        emit_word(f, o);
    int64_t *r = o->win + WIN_COLS * o->n_win++;
    r[0] = f->w_start;
    r[1] = end;
    r[2] = f->w_partial_start;
    r[3] = partial_end;
    r[4] = f->w_clk_ok;
    r[5] = f->w_n_edges;
    r[6] = f->w_n_samp;
    r[7] = f->w_n_words;
    r[8] = f->w_first;
    r[9] = f->w_last;
    r[10] = f->w_min_half == BIG ? -1 : f->w_min_half;
    f->open = 0;
    f->cw = -1;
}

HOT void clock_edge(framer_t *f, out_t *o, int64_t t, int64_t s)
{
    int64_t level = (s >> f->b_clk) & 1;
    int64_t samp = level == f->samp_level;
    int64_t bit;
    f->w_n_edges++;
    if (f->w_first < 0)
        f->w_first = t;
    f->w_last = t;
    if (samp)
        bit = f->w_n_samp++;
    else
        bit = f->cpha == 0 ? f->w_n_samp - 1 : f->w_n_samp;
    if (bit < 0)
        return;                          /* a stray edge before the first bit: owned by no word */
    /* bit never decreases inside a window, so a new word starts only when bit reaches
       the current word's end: one division per word, not per edge */
    if (f->cw < 0 || bit >= f->c_bit_end) {
        if (f->cw >= 0 && f->c_samp == f->ws)
            emit_word(f, o);
        new_word(f, bit / f->ws, t);
    }
    if (f->c_prev_owned >= 0) {
        int64_t d = t - f->c_prev_owned;
        if (level == 0) {                /* ends a high phase */
            if (d < f->c_min_high) f->c_min_high = d;
        } else if (d < f->c_min_low) {
            f->c_min_low = d;
        }
    }
    f->c_prev_owned = t;
    f->c_last = t;
    if (!samp)
        return;
    if (f->ws > 1) {
        if (f->c_samp > 0 && f->c_n_space < NSPACE)
            f->c_space[f->c_n_space++] = t - f->c_last_samp;
    } else if (f->w_last_samp >= 0) {
        add_spacing(o, t - f->w_last_samp);
    }
    f->c_last_samp = t;
    f->w_last_samp = t;
    int64_t mo = f->b_mosi >= 0 ? (s >> f->b_mosi) & 1 : 0;
    int64_t mi = f->b_miso >= 0 ? (s >> f->b_miso) & 1 : 0;
    if (f->lsb_first) {
        f->c_mosi |= (int64_t)((uint64_t)mo << f->c_samp);
        f->c_miso |= (int64_t)((uint64_t)mi << f->c_samp);
    } else {
        f->c_mosi = (int64_t)(((uint64_t)f->c_mosi << 1) | (uint64_t)mo);
        f->c_miso = (int64_t)(((uint64_t)f->c_miso << 1) | (uint64_t)mi);
    }
    f->c_samp++;
}

void spigap_frame_init(framer_t *f, int64_t initial_state)
{
    f->prev = initial_state;
    f->open = 0;
    f->started = 0;
    f->cw = -1;
    f->last_clk = -1;
    f->clk_outside = 0;
    f->first_clk_outside = -1;
    f->min_high = BIG;
    f->min_low = BIG;
    if (f->has_cs && ((initial_state >> f->b_cs) & 1) == f->active_level)
        open_window(f, 0, ((initial_state >> f->b_clk) & 1) == f->cpol, 1);
}

/* How many entries can be framed from here without a check of the outputs' room: an entry
   writes at most one window row, one word row (a window closes, or a clock edge ends a word:
   never both, the window's clock edges come before its close), one CS-change row (ev) and
   NSPACE + 1 spacing overflow values; the same margins as a check before each entry. */
HOT int64_t room(const out_t *o, int64_t ev_need)
{
    int64_t k = o->win_cap - o->n_win - 1;
    const int64_t kw = o->word_cap - o->n_word - 1;
    const int64_t ko = (o->ovf_cap - o->n_ovf) / (2 * NSPACE);
    if (kw < k) k = kw;
    if (ko < k) k = ko;
    if (ev_need) {
        const int64_t ke = o->ev_cap - o->n_ev;
        if (ke < k) k = ke;
    }
    return k > 0 ? k : 0;
}

/* The entries i..end-1, with room for their outputs. ``has_cs`` and ``bus`` (the framer
   writes CS changes: a shared bus's first device) are constants at each call, so each
   combination is a loop of its own without the tests the others need (one device: no
   CS-change rows, no other CS lines). */
HOT void frame_run(framer_t *f, out_t *o, const int64_t *ticks, const uint32_t *states, int64_t i, int64_t end,
                   const int has_cs, const int bus)
{
    int64_t prev = f->prev;
    const int64_t b_cs = f->b_cs, b_clk = f->b_clk, act = f->active_level;
    for (; i < end; i++) {
        const int64_t s = states[i];
        const int64_t ch = s ^ prev;
        prev = s;
        if (!ch)
            continue;
        const int64_t t = ticks[i];
        if (bus && (ch & f->ev_mask)) {
            int64_t *r = o->ev + 2 * o->n_ev++;
            r[0] = t;
            r[1] = s;
        }
        if (has_cs) {
            const int64_t active = ((s >> b_cs) & 1) == act;
            const int64_t cs_ev = (ch >> b_cs) & 1;
            if (cs_ev) {
                if (active)
                    open_window(f, t, ((s >> b_clk) & 1) == f->cpol, 0);
                else if (f->open)
                    close_window(f, o, t, 0);
            }
            if ((ch >> b_clk) & 1) {
                if (active) {
                    clock_edge(f, o, t, s);
                } else if (!cs_ev && (!bus || ((s & f->others_mask) == f->others_idle && !(ch & f->others_mask)))) {
                    if (f->first_clk_outside < 0)
                        f->first_clk_outside = t;
                    f->clk_outside++;
                }
            }
        } else if ((ch >> b_clk) & 1) {
            if (!f->started || t - f->last_clk > f->idle_timeout) {
                if (f->open)
                    close_window(f, o, f->last_clk, 0);
                open_window(f, t, 1, !f->started && t < f->idle_timeout);
                f->started = 1;
            }
            clock_edge(f, o, t, s);
            f->last_clk = t;
        }
    }
    f->prev = prev;
}

/* Consume entries until the outputs could overflow; returns entries consumed. */
int64_t spigap_frame(framer_t *fp, out_t *op, const int64_t *ticks, const uint32_t *states, int64_t n)
{
    /* work on local copies: their addresses do not escape, so the compiler can keep
       the fields in registers (the output rows are int64_t too and could alias them) */
    framer_t fl = *fp;
    out_t ol = *op;
    framer_t *f = &fl;
    out_t *o = &ol;
    /* a shared bus's first device also writes CS changes and counts SCLK with no CS at all;
       the others_mask test is then needed too (others_mask is 0 without ev_mask) */
    const int bus = f->ev_mask != 0 || f->others_mask != 0;
    int64_t i = 0;
    while (i < n) {
        int64_t k = room(o, bus);
        if (k == 0)
            break;
        const int64_t end = n - i < k ? n : i + k;
        if (f->has_cs) {
            if (bus)
                frame_run(f, o, ticks, states, i, end, 1, 1);
            else
                frame_run(f, o, ticks, states, i, end, 1, 0);
        } else {
            frame_run(f, o, ticks, states, i, end, 0, 0);
        }
        i = end;
    }
    *fp = fl;
    *op = ol;
    return i;
}

void spigap_frame_finish(framer_t *f, out_t *o, int64_t end_tick)
{
    if (!f->open)
        return;
    if (f->has_cs)
        close_window(f, o, end_tick, 1);
    else
        close_window(f, o, f->last_clk, end_tick - f->last_clk < f->idle_timeout);
}

/*
 * Where a framer's state starts afresh: the entry i of `states` nearest to
 * `from` (looking forward when step > 0, backward otherwise) at which CS goes
 * active: states[i] active, the state before it (states[i-1], or `prev` for
 * i = 0) inactive; -1 when there is none. At such an entry a window opens and
 * every per-window and per-word field is reset, so the entries between two of
 * them can be framed by a fresh framer, in another thread, with the serial
 * framer's results (analyzer/spigap/core/cframer.py).
 */
int64_t spigap_next_assert(const uint32_t *states, int64_t n, int64_t prev, int64_t b_cs, int64_t active_level,
                           int64_t from, int64_t step)
{
    uint32_t act = (uint32_t)active_level;
    step = step > 0 ? 1 : -1;
    for (int64_t i = from; i >= 0 && i < n; i += step) {
        uint32_t before = i ? states[i - 1] : (uint32_t)prev;
        if (((states[i] >> b_cs) & 1u) == act && ((before >> b_cs) & 1u) != act)
            return i;
    }
    return -1;
}

/* ------------------------------------------------------- a shared bus's framers */

/*
 * Every device of a shared bus framed in one pass (analyzer/spigap/core/cframer.py,
 * CBusFramer): fs[d] is device d's framer (its CS bit and settings; fs[0] also
 * writes the CS changes and counts the SCLK edges while no CS is asserted),
 * os[d] its outputs. The result is, device by device, what spigap_frame gives
 * when each framer is fed the whole stream, but for the non-first ones'
 * SCLK edges outside their CS, which are not counted: an entry where a CS line changes goes to every device (the
 * window opens or closes, and its clock edge to each device asserted after it);
 * any other entry only to the devices asserted (a clock edge), or, when none
 * is, to fs[0]'s count of SCLK edges without CS. One pass instead of one per
 * device: the entries outside a device's windows were most of each framer's
 * work (one loop turn each, as many as inside). Works on the framers in place
 * (the copy to locals that spigap_frame makes would cost a copy per transfer
 * here). Stops before an entry whose output could overflow; returns the
 * entries consumed.
 */
/* spigap_frame_bus's run of entries while one device alone is asserted, from entry i (a clock
   edge): up to the next entry where a CS line changes, or where the outputs could overflow
   (*full); returns that entry. restrict: the framer's fields are reached through f alone, so
   the compiler may keep them in registers across the stores to the output rows. */
HOT int64_t run_one(framer_t *restrict f, out_t *restrict o, const int64_t *ticks, const uint32_t *states,
                    int64_t i, int64_t n, int64_t cs_mask, int64_t b_clk, int64_t *prev, int64_t *full)
{
    int64_t p = *prev;
    for (; i < n; i++) {
        const int64_t s = states[i];
        const int64_t ch = s ^ p;
        if (ch & cs_mask)
            break;
        if ((ch >> b_clk) & 1) {
            if (o->word_cap - o->n_word < 2 || o->ovf_cap - o->n_ovf < 2 * NSPACE) {
                *full = 1;
                break;
            }
            clock_edge(f, o, ticks[i], s);
        }
        p = s;
    }
    *prev = p;
    return i;
}

int64_t spigap_frame_bus(framer_t *const *fs, out_t *const *os, int64_t k, const int64_t *ticks,
                         const uint32_t *states, int64_t n)
{
    framer_t *f0 = fs[0];
    out_t *o0 = os[0];
    int64_t cs_mask = 0, act = 0, i = 0;
    int64_t prev = f0->prev;
    for (int64_t d = 0; d < k; d++) {
        cs_mask |= (int64_t)1 << fs[d]->b_cs;
        act |= (int64_t)(((prev >> fs[d]->b_cs) & 1) == fs[d]->active_level) << d;
    }
    const int64_t b_clk = f0->b_clk;
    /* the device asserted when it is the only one (NULL: none or several) */
    framer_t *cur = act && !(act & (act - 1)) ? fs[__builtin_ctzll((unsigned long long)act)] : NULL;
    out_t *cur_o = act && !(act & (act - 1)) ? os[__builtin_ctzll((unsigned long long)act)] : NULL;
    for (; i < n; i++) {
        const int64_t s = states[i];
        const int64_t ch = s ^ prev;
        if (ch & cs_mask) {
            /* a CS line changes: every device may open or close a window */
            int64_t full = o0->ev_cap - o0->n_ev < (f0->ev_mask != 0);
            for (int64_t d = 0; d < k && !full; d++)
                full = os[d]->win_cap - os[d]->n_win < 2 || os[d]->word_cap - os[d]->n_word < 2
                       || os[d]->ovf_cap - os[d]->n_ovf < 2 * NSPACE;
            if (full)
                break;
            const int64_t t = ticks[i];
            if (ch & f0->ev_mask) {
                int64_t *r = o0->ev + 2 * o0->n_ev++;
                r[0] = t;
                r[1] = s;
            }
            act = 0;
            for (int64_t d = 0; d < k; d++) {
                framer_t *f = fs[d];
                const int64_t active = ((s >> f->b_cs) & 1) == f->active_level;
                act |= active << d;
                if ((ch >> f->b_cs) & 1) {
                    if (active)
                        open_window(f, t, ((s >> f->b_clk) & 1) == f->cpol, 0);
                    else if (f->open)
                        close_window(f, os[d], t, 0);
                }
                if (active && ((ch >> f->b_clk) & 1))
                    clock_edge(f, os[d], t, s);
            }
            cur = act && !(act & (act - 1)) ? fs[__builtin_ctzll((unsigned long long)act)] : NULL;
            cur_o = act && !(act & (act - 1)) ? os[__builtin_ctzll((unsigned long long)act)] : NULL;
        } else if ((ch >> b_clk) & 1) {
            if (act == 0) {
                /* SCLK with no CS asserted (none changes in this entry) */
                if (f0->first_clk_outside < 0)
                    f0->first_clk_outside = ticks[i];
                f0->clk_outside++;
            } else if (cur != NULL) {
                /* one device asserted (the common case): its entries up to the next CS change */
                int64_t full = 0;
                i = run_one(cur, cur_o, ticks, states, i, n, cs_mask, b_clk, &prev, &full);
                if (full)
                    break;
                i--;                             /* entry i (a CS change, or n) is the loop's next */
                continue;
            } else {
                int64_t full = 0;
                for (int64_t a = act; a && !full; a &= a - 1) {
                    const out_t *o = os[__builtin_ctzll((unsigned long long)a)];
                    full = o->word_cap - o->n_word < 2 || o->ovf_cap - o->n_ovf < 2 * NSPACE;
                }
                if (full)
                    break;
                for (int64_t a = act; a; a &= a - 1) {
                    const int d = __builtin_ctzll((unsigned long long)a);
                    clock_edge(fs[d], os[d], ticks[i], s);
                }
            }
        }
        prev = s;
    }
    for (int64_t d = 0; d < k; d++)
        fs[d]->prev = prev;
    return i;
}

/*
 * Where every framer of a shared bus starts afresh: the entry i nearest to
 * `from` (forward when step > 0) at which a CS line goes active while before it
 * (states[i-1], or `prev` for i = 0) none was (every line at its `cs_idle`
 * level): every device's window is closed there and one opens, so the entries
 * between two of them can be framed by fresh framers in another thread, as
 * spigap_next_assert does for one device. -1 when there is none.
 */
int64_t spigap_next_free_assert(const uint32_t *states, int64_t n, int64_t prev, int64_t cs_mask, int64_t cs_idle,
                                int64_t from, int64_t step)
{
    const uint32_t m = (uint32_t)cs_mask, idle = (uint32_t)cs_idle;
    step = step > 0 ? 1 : -1;
    for (int64_t i = from; i >= 0 && i < n; i += step) {
        uint32_t before = i ? states[i - 1] : (uint32_t)prev;
        if ((states[i] & m) != idle && (before & m) == idle)
            return i;
    }
    return -1;
}

/* ------------------------------------------------------------------ bus */

/*
 * A shared bus's tracker (analyzer/spigap/core/bus.py, docs/shared-bus.md): the bus
 * figures from the entries where a CS line changed (rows of tick, state, in
 * order; the first device's framer writes them). Compiled because the numpy
 * version (BusTracker._events, kept as the fallback and as the oracle this
 * loop is tested against) needs ~30 array passes per batch of events and was,
 * at two CS changes per transfer, the largest cost a second device added to a
 * capture; here it is a few operations per event and device.
 *
 * Per event: each device's CS time and asserts are summed up to it; a device's
 * deassert keeps the other devices' sums, so at its next assert their
 * difference is the other devices' CS time and asserts inside its CS-inactive
 * gap; the bus's last deassert (the lowest device when several fall in one
 * entry) gives the handover into an assert of another device when no second
 * CS is asserted with it. Writes one row per assert (BUS_COLS, by device), the idle gaps
 * (no CS asserted before an event, after a first deassert) and the starts and
 * ends of intervals with two or more CS asserted. Stops before an event whose
 * rows could overflow the outputs; returns the events consumed.
 */
int64_t spigap_bus(bus_t *b, busout_t *o, const int64_t *ev, int64_t n)
{
    const int64_t K = b->k, cap = o->win_cap;
    int64_t i = 0, top = 0;                  /* top: the most rows of one device */
    for (int64_t d = 0; d < K; d++)
        top = o->n_win[d] > top ? o->n_win[d] : top;
    for (; i < n; i++) {
        if (top >= o->win_cap || o->idle_cap - o->n_idle < 1 || o->ov_cap - o->n_ov < 1)
            break;
        const int64_t t = ev[2 * i], s = ev[2 * i + 1];
        const int64_t seg = t - b->t_last;
        int64_t now[BUS_MAX];
        int64_t n_before = 0, n_after = 0, dz_dev = -1, btot = 0, ctot = 0, mask = 0;
        for (int64_t d = 0; d < K; d++) {
            now[d] = ((s >> b->bit[d]) & 1) == b->act[d];
            if (b->asserted[d]) {
                n_before++;
                b->busy_dev[d] += seg;
            }
            if (now[d]) {
                n_after++;
                mask |= (int64_t)1 << d;
            } else if (b->asserted[d] && dz_dev < 0) {
                dz_dev = d;
            }
            btot += b->busy_dev[d];
            ctot += b->n_assert[d];
        }
        if (n_before)
            b->busy += seg;
        else if (b->ld_dev >= 0)
            o->idle[o->n_idle++] = seg;
        if (n_after >= 2 && n_before < 2) {
            int64_t *r = o->ov + 3 * o->n_ov++;
            r[0] = 1; r[1] = t; r[2] = mask;
        } else if (n_after < 2 && n_before >= 2) {
            int64_t *r = o->ov + 3 * o->n_ov++;
            r[0] = 0; r[1] = t; r[2] = mask;
        }
        if (dz_dev >= 0) {                   /* before the asserts: a CS asserted in this very entry hands over at 0 */
            b->ld_t = t;
            b->ld_dev = dz_dev;
        }
        for (int64_t d = 0; d < K; d++) {
            if (now[d] && !b->asserted[d]) {
                int64_t *r = o->win + d * BUS_COLS * cap + o->n_win[d]++;
                const int64_t overlap = n_after >= 2;
                const int64_t hand = b->ld_dev >= 0 && b->ld_dev != d && !overlap;
                top = o->n_win[d] > top ? o->n_win[d] : top;
                r[0] = hand ? b->ld_dev : -1;
                r[cap] = hand ? t - b->ld_t : -1;
                if (b->has_own[d]) {
                    r[2 * cap] = (btot - b->busy_dev[d]) - b->own_busy[d];
                    r[3 * cap] = (ctot - b->n_assert[d]) - b->own_assert[d];
                } else {
                    r[2 * cap] = -1;
                    r[3 * cap] = 0;
                }
                r[4 * cap] = overlap;
            } else if (!now[d] && b->asserted[d]) {
                b->has_own[d] = 1;
                b->own_busy[d] = btot - b->busy_dev[d];
                b->own_assert[d] = ctot - b->n_assert[d];
            }
        }
        for (int64_t d = 0; d < K; d++) {
            b->n_assert[d] += now[d] && !b->asserted[d];
            b->asserted[d] = now[d];
        }
        b->t_last = t;
    }
    return i;
}
