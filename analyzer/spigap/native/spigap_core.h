/*
 * spigap compiled core: the declarations Python sees.
 *
 * This file is read twice: by spigap_core.c (#include) and by cffi as its
 * cdef (analyzer/spigap/native/build.py), so the struct layouts Python uses are the
 * ones the compiler checked. It must therefore stay within what cffi's cdef
 * parser accepts: no #include, no include guard, constants as an enum.
 * The includer provides <stdint.h>.
 */

enum {
    NSPACE = 64,      /* clock spacings a word keeps for the sub-sample period */
    WIN_COLS = 11,    /* one window row: start end pstart pend clk_ok n_edges n_bits n_words first last min_half */
    BUS_MAX = 32,     /* CS lines of a shared bus (the edge stream's states are 32 bits) */
    BUS_COLS = 5      /* one CS assert row: from gap other_busy others overlap */
};

typedef struct {
    /* configuration (written by Python) */
    int64_t b_clk, b_cs, b_mosi, b_miso;      /* bit of each line in the state; -1 = absent */
    int64_t ws, cpha, cpol, samp_level, active_level, lsb_first, has_cs, idle_timeout;
    /* running state */
    int64_t prev;                              /* previous compact state */
    int64_t open, started;
    int64_t w_start, w_first, w_last, w_n_edges, w_n_samp, w_n_words, w_min_half;
    int64_t w_partial_start, w_clk_ok, w_last_samp;
    int64_t cw, c_first, c_last, c_prev_owned, c_samp, c_mosi, c_miso, c_min_high, c_min_low, c_last_samp;
    int64_t c_n_space;
    int64_t c_bit_end;                         /* first bit past the current word (new_word) */
    int64_t c_space[NSPACE];
    int64_t last_clk;
    int64_t clk_outside, first_clk_outside, min_high, min_low;
    /* a shared bus (analyzer/spigap/core/shared.py), configuration: every CS line's bit (ev_mask: each
       entry where one changes is written to out_t.ev), and the other devices' CS bits with
       their inactive pattern (an SCLK edge counts as outside only when they are inactive
       too, and none changes in that entry); 0 for one device */
    int64_t ev_mask, others_mask, others_idle;
} framer_t;

typedef struct {
    int64_t *win;   int64_t win_cap;  int64_t n_win;    /* rows of WIN_COLS */
    int64_t *word;  int64_t word_cap; int64_t n_word;   /* rows of 4: mosi, miso, first, last */
    int64_t *hist;  int64_t hist_size;                  /* counts of spacing values < hist_size */
    int64_t *ovf;   int64_t ovf_cap;  int64_t n_ovf;    /* larger spacing values */
    int64_t *ev;    int64_t ev_cap;   int64_t n_ev;     /* rows of 2: tick, state of each CS change (ev_mask) */
} out_t;

/* a shared bus's tracker (analyzer/spigap/core/bus.py): the running state between calls */
typedef struct {
    /* configuration (written by Python) */
    int64_t k;                                 /* devices */
    int64_t bit[BUS_MAX], act[BUS_MAX];        /* each CS line's bit in the state, its asserted level */
    /* running state */
    int64_t asserted[BUS_MAX];                 /* after the last event */
    int64_t t_last;                            /* tick of the last event (the capture's start before any) */
    int64_t busy_dev[BUS_MAX];                 /* each device's CS-active ticks up to t_last */
    int64_t n_assert[BUS_MAX];                 /* each device's asserts so far */
    int64_t busy;                              /* ticks with at least one CS asserted, up to t_last */
    int64_t ld_t, ld_dev;                      /* the bus's last deassert: tick, device (-1: none yet) */
    int64_t has_own[BUS_MAX];                  /* the device was deasserted once */
    int64_t own_busy[BUS_MAX], own_assert[BUS_MAX];   /* the other devices' sums at its last deassert */
} bus_t;

typedef struct {
    /* one row per CS assert, by device and column: column c of device d's row j at
       win[(d * BUS_COLS + c) * win_cap + j]; columns: from gap other_busy others overlap */
    int64_t *win;  int64_t win_cap;  int64_t n_win[BUS_MAX];
    int64_t *idle; int64_t idle_cap; int64_t n_idle;   /* idle gaps (every CS inactive), ticks */
    int64_t *ov;   int64_t ov_cap;   int64_t n_ov;     /* rows of 3: 1 start / 0 end, tick, asserted mask */
} busout_t;

int64_t spigap_scan(const uint8_t *data, int64_t n, int64_t unitsize, const uint8_t *mask,
                    const int64_t *bitpos, int64_t nbits, uint64_t *prev, int64_t base,
                    int64_t *pos_out, uint32_t *val_out, int64_t cap, int64_t *n_out);
void spigap_frame_init(framer_t *f, int64_t initial_state);
int64_t spigap_frame(framer_t *f, out_t *o, const int64_t *ticks, const uint32_t *states, int64_t n);
void spigap_frame_finish(framer_t *f, out_t *o, int64_t end_tick);
int64_t spigap_next_assert(const uint32_t *states, int64_t n, int64_t prev, int64_t b_cs, int64_t active_level,
                           int64_t from, int64_t step);
int64_t spigap_frame_bus(framer_t *const *fs, out_t *const *os, int64_t k, const int64_t *ticks,
                         const uint32_t *states, int64_t n);
int64_t spigap_next_free_assert(const uint32_t *states, int64_t n, int64_t prev, int64_t cs_mask, int64_t cs_idle,
                                int64_t from, int64_t step);
int64_t spigap_bus(bus_t *b, busout_t *o, const int64_t *ev, int64_t n);
