/*
 * strategy_random.c -- uniform choice among the enabled actors.
 *
 * Execution i (0-based, counted by the explorer) draws from a generator
 * seeded with cs__rng_seed_stream(seed, i), so any single execution can be
 * reproduced from (seed, i) alone, whatever ran before it (a shard's
 * execution j is stream j * count + index: shards of one seed split the
 * streams of one explorer).  Never complete: it runs until max_executions or
 * time_limit stops it.
 */
#include "internal.h"

#include <stdlib.h>

typedef struct {
    uint64_t seed; /* cs_config.seed: execution i draws from (seed, i) */
    cs__rng rng;   /* this execution's stream (reseeded by begin) */
    cs__shard shard; /* the streams this explorer draws (cs__shard_stream) */
} random_state;

static int random_create(cs_explorer *ex, const cs_config *cfg, void **state) {
    (void)ex;
    random_state *s = calloc(1, sizeof *s);
    if (!s) return CS_ENOMEM;
    s->seed = cfg->seed;
    s->shard = cs__shard_of(cfg);
    *state = s;
    return CS_OK;
}

static void random_destroy(void *state) { free(state); }

static int random_begin(cs_explorer *ex, void *state, int *more, int *complete) {
    random_state *s = state;
    cs_stats st;
    cs_explorer_stats(ex, &st);
    cs__rng_seed_stream(&s->rng, s->seed, cs__shard_stream(s->shard, st.executions));
    *more = 1;
    *complete = 0;
    return CS_OK;
}

static int random_choose(cs_explorer *ex, void *state, size_t step,
                         const cs_actor *enabled, size_t n, size_t *chosen) {
    (void)ex;
    (void)step;
    (void)enabled;
    random_state *s = state;
    *chosen = (size_t)cs__rng_below(&s->rng, n);
    return CS_OK;
}

static int random_observe(cs_explorer *ex, void *state, size_t index) {
    (void)ex;
    (void)state;
    (void)index;
    return CS_OK;
}

static int random_end(cs_explorer *ex, void *state, int outcome) {
    (void)ex;
    (void)state;
    (void)outcome;
    return CS_OK;
}

const cs__strategy_ops cs__strategy_random = {
    "random", random_create, random_destroy, random_begin,
    random_choose, random_observe, random_end,
};
