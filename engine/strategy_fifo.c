/*
 * strategy_fifo.c -- the default order: always the first enabled actor.
 * The front end lists enabled actors in stock asyncio's order, so fifo
 * reproduces what asyncio.run would do.  One execution, no state.
 */
#include "internal.h"

static int fifo_create(cs_explorer *ex, const cs_config *cfg, void **state) {
    (void)ex;
    (void)cfg;
    static int token;
    *state = &token;
    return CS_OK;
}

static void fifo_destroy(void *state) { (void)state; }

static int fifo_begin(cs_explorer *ex, void *state, int *more, int *complete) {
    (void)state;
    cs_stats st;
    cs_explorer_stats(ex, &st);
    *more = st.executions == 0;
    *complete = 0;
    return CS_OK;
}

static int fifo_choose(cs_explorer *ex, void *state, size_t step,
                       const cs_actor *enabled, size_t n, size_t *chosen) {
    (void)ex;
    (void)state;
    (void)step;
    (void)enabled;
    (void)n;
    *chosen = 0;
    return CS_OK;
}

static int fifo_observe(cs_explorer *ex, void *state, size_t index) {
    (void)ex;
    (void)state;
    (void)index;
    return CS_OK;
}

static int fifo_end(cs_explorer *ex, void *state, int outcome) {
    (void)ex;
    (void)state;
    (void)outcome;
    return CS_OK;
}

const cs__strategy_ops cs__strategy_fifo = {
    "fifo", fifo_create, fifo_destroy, fifo_begin,
    fifo_choose, fifo_observe, fifo_end,
};
