/*
 * strategy_pct.c -- probabilistic concurrency testing with bug depth d
 * (Burckhardt, Kothari, Musuvathi, Nagarakatte, ASPLOS 2010).
 *
 * Per execution:
 *   - Initial priorities are a uniformly random order of the actors.  Actors
 *     are created while the program runs, so the order is built online: an
 *     actor that appears (is first seen enabled) is inserted at a uniformly
 *     random rank among the actors already seen in this execution, which
 *     gives every appearance order the same uniform distribution over
 *     permutations as drawing the whole order up front.  Initial priorities
 *     are d + rank, so all of them are above every change-point priority.
 *   - d-1 distinct change points c_1..c_{d-1} are drawn uniformly from the
 *     event indices [0, k), k = max(pct_steps_hint, longest execution seen
 *     so far).  Right after event c_i is executed, its actor drops to
 *     priority i (1 <= i <= d-1, so below every initial priority; later
 *     drops of the same actor overwrite earlier ones).
 *   - Each step runs the enabled actor of highest priority.  Priorities are
 *     distinct, so there is never a tie.
 * A bug of depth d is then found with probability >= 1/(n k^(d-1)) per
 * execution, n = number of actors.  Execution i draws from a generator
 * seeded by (seed, i), so it can be reproduced alone.  Never complete.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    uint64_t seed;     /* cs_config.seed: execution i draws from (seed, i) */
    cs__shard shard;   /* the streams this explorer draws (cs__shard_stream) */
    uint32_t depth;    /* bug depth d >= 1: d - 1 change points */
    uint64_t hint;     /* cs_config.pct_steps_hint: k is at least this */
    cs__rng rng;       /* this execution's stream (reseeded by begin) */

    /* per actor id, valid for the current execution when seen[a] == epoch */
    uint64_t *seen;
    uint32_t *rank;    /* position in `order`: rank[order[i]] == i */
    uint32_t *lowered; /* 0, or the change-point priority 1..d-1 (below every
                          initial priority d + rank) */
    size_t cap;        /* entries of seen, rank, lowered */
    uint64_t epoch;    /* bumped by begin: invalidates every per-actor entry */

    cs_actor *order;   /* actors seen this execution, ascending initial
                          priority; no actor twice */
    size_t n_order, cap_order;

    uint64_t *change;  /* change[i] = event index of change point i+1;
                          distinct, n_change == min(d - 1, k) */
    size_t n_change;
    uint64_t longest;  /* longest execution so far (k = max(hint, longest)) */
} pct_state;

static int pct_create(cs_explorer *ex, const cs_config *cfg, void **state) {
    (void)ex;
    if (cfg->pct_depth < 1) return CS_EINVAL;
    pct_state *s = calloc(1, sizeof *s);
    if (!s) return CS_ENOMEM;
    s->seed = cfg->seed;
    s->shard = cs__shard_of(cfg);
    s->depth = cfg->pct_depth;
    s->hint = cfg->pct_steps_hint ? cfg->pct_steps_hint : 1;
    s->change = calloc(s->depth, sizeof *s->change);
    if (!s->change) {
        free(s);
        return CS_ENOMEM;
    }
    *state = s;
    return CS_OK;
}

static void pct_destroy(void *state) {
    pct_state *s = state;
    if (!s) return;
    free(s->seen);
    free(s->rank);
    free(s->lowered);
    free(s->order);
    free(s->change);
    free(s);
}

static int ensure_actor(pct_state *s, cs_actor a) {
    if (a < s->cap) return CS_OK;
    size_t ncap = s->cap ? s->cap : 16;
    while (ncap <= a) ncap *= 2;
    uint64_t *seen = realloc(s->seen, ncap * sizeof *seen);
    if (!seen) return CS_ENOMEM;
    s->seen = seen;
    uint32_t *rank = realloc(s->rank, ncap * sizeof *rank);
    if (!rank) return CS_ENOMEM;
    s->rank = rank;
    uint32_t *low = realloc(s->lowered, ncap * sizeof *low);
    if (!low) return CS_ENOMEM;
    s->lowered = low;
    memset(s->seen + s->cap, 0, (ncap - s->cap) * sizeof *seen);
    s->cap = ncap;
    return CS_OK;
}

/* Inserts a newly seen actor at a uniformly random rank. */
static int appear(pct_state *s, cs_actor a) {
    int rc = ensure_actor(s, a);
    if (rc) return rc;
    if (s->seen[a] == s->epoch) return CS_OK;
    if (s->n_order == s->cap_order) {
        size_t ncap = s->cap_order ? 2 * s->cap_order : 16;
        cs_actor *no = realloc(s->order, ncap * sizeof *no);
        if (!no) return CS_ENOMEM;
        s->order = no;
        s->cap_order = ncap;
    }
    size_t pos = (size_t)cs__rng_below(&s->rng, s->n_order + 1);
    memmove(s->order + pos + 1, s->order + pos, (s->n_order - pos) * sizeof *s->order);
    s->order[pos] = a;
    s->n_order++;
    for (size_t i = pos; i < s->n_order; i++) s->rank[s->order[i]] = (uint32_t)i;
    s->seen[a] = s->epoch;
    s->lowered[a] = 0;
    return CS_OK;
}

static uint64_t priority(const pct_state *s, cs_actor a) {
    if (s->lowered[a]) return s->lowered[a];
    return (uint64_t)s->depth + s->rank[a];
}

static int pct_begin(cs_explorer *ex, void *state, int *more, int *complete) {
    pct_state *s = state;
    cs_stats st;
    cs_explorer_stats(ex, &st);
    if (st.max_depth > s->longest) s->longest = st.max_depth;
    cs__rng_seed_stream(&s->rng, s->seed ^ 0x5043545043545043ULL /* "PCTPCTPC" */,
                        cs__shard_stream(s->shard, st.executions));
    s->epoch++;
    s->n_order = 0;
    uint64_t k = s->hint > s->longest ? s->hint : s->longest;
    /* d-1 distinct points of [0, k): rejection is cheap since d << k in
     * practice; when d-1 >= k every index is a change point. */
    s->n_change = 0;
    size_t want = s->depth - 1;
    if (want >= k) {
        for (uint64_t i = 0; i < k; i++) s->change[s->n_change++] = i;
        /* shuffle which index gets which priority */
        for (size_t i = s->n_change; i > 1; i--) {
            size_t j = (size_t)cs__rng_below(&s->rng, i);
            uint64_t t = s->change[i - 1];
            s->change[i - 1] = s->change[j];
            s->change[j] = t;
        }
    } else {
        while (s->n_change < want) {
            uint64_t c = cs__rng_below(&s->rng, k);
            bool dup = false;
            for (size_t i = 0; i < s->n_change; i++) dup |= s->change[i] == c;
            if (!dup) s->change[s->n_change++] = c;
        }
    }
    *more = 1;
    *complete = 0;
    return CS_OK;
}

static int pct_choose(cs_explorer *ex, void *state, size_t step,
                      const cs_actor *enabled, size_t n, size_t *chosen) {
    (void)ex;
    (void)step;
    pct_state *s = state;
    size_t best = 0;
    uint64_t best_p = 0;
    /* All newcomers first: an insertion shifts the ranks above it. */
    for (size_t i = 0; i < n; i++) {
        int rc = appear(s, enabled[i]);
        if (rc) return rc;
    }
    for (size_t i = 0; i < n; i++) {
        uint64_t p = priority(s, enabled[i]);
        if (i == 0 || p > best_p) {
            best = i;
            best_p = p;
        }
    }
    *chosen = best;
    return CS_OK;
}

static int pct_observe(cs_explorer *ex, void *state, size_t index) {
    pct_state *s = state;
    for (size_t i = 0; i < s->n_change; i++) {
        if (s->change[i] != index) continue;
        cs_event ev;
        int rc = cs_trace_event(ex, index, &ev);
        if (rc) return rc;
        /* The actor ran, so it was chosen (or run by the front end without
         * asking: make it known either way). */
        rc = appear(s, ev.actor);
        if (rc) return rc;
        s->lowered[ev.actor] = (uint32_t)(i + 1);
    }
    return CS_OK;
}

static int pct_end(cs_explorer *ex, void *state, int outcome) {
    (void)outcome;
    pct_state *s = state;
    size_t len = cs_trace_length(ex);
    if (len > s->longest) s->longest = len;
    return CS_OK;
}

const cs__strategy_ops cs__strategy_pct = {
    "pct", pct_create, pct_destroy, pct_begin, pct_choose, pct_observe, pct_end,
};
