/*
 * strategy_exhaustive.c -- brute force: every schedule, by depth-first search
 * over the choice tree.  It is the oracle the DPOR soundness tests compare
 * against, so it is deliberately simple.
 *
 * State: one frame per choice of the current execution (the enabled set seen
 * there, in the front end's order, and the index taken).  The next execution
 * replays the frames, except that the deepest frame with an untried
 * alternative advances to it; deeper choices start again at index 0.
 * Memory grows with the depth of an execution, not with their number.
 *
 * Invariant between executions: frames[0..n_frames) is the prefix the next
 * execution must follow; frames[n_frames - 1].choice is the new alternative.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    size_t off;     /* the enabled set seen here: pool[off .. off + n) */
    uint32_t n;     /* >= 1 */
    uint32_t choice; /* index taken, < n; alternatives below it are done */
} frame;

typedef struct {
    frame *frames;  /* one per choice; frames[k].off < frames[k + 1].off */
    size_t n_frames, cap_frames;
    cs_actor *pool; /* the enabled sets of frames[0 .. n_frames), in order;
                       n_pool == end of the last frame's set */
    size_t n_pool, cap_pool;
    size_t depth;   /* choices made in the current execution (<= n_frames
                       while replaying, == n_frames after) */
    bool started;   /* at least one execution began */
    bool exhausted; /* every alternative of every frame was taken */
} exh_state;

static int exh_create(cs_explorer *ex, const cs_config *cfg, void **state) {
    (void)ex;
    (void)cfg;
    exh_state *s = calloc(1, sizeof *s);
    if (!s) return CS_ENOMEM;
    *state = s;
    return CS_OK;
}

static void exh_destroy(void *state) {
    exh_state *s = state;
    if (!s) return;
    free(s->frames);
    free(s->pool);
    free(s);
}

static int exh_begin(cs_explorer *ex, void *state, int *more, int *complete) {
    (void)ex;
    exh_state *s = state;
    *complete = 0;
    if (s->exhausted) {
        *more = 0;
        *complete = 1;
        return CS_OK;
    }
    *more = 1;
    s->started = true;
    s->depth = 0;
    return CS_OK;
}

static int exh_choose(cs_explorer *ex, void *state, size_t step,
                      const cs_actor *enabled, size_t n, size_t *chosen) {
    exh_state *s = state;
    if (step != s->depth || n > UINT32_MAX) return CS_EINVAL;
    if (step < s->n_frames) {
        /* replaying the prefix: find the prescribed actor */
        const frame *f = &s->frames[step];
        cs_actor want = s->pool[f->off + f->choice];
        for (size_t i = 0; i < n; i++)
            if (enabled[i] == want) {
                *chosen = i;
                s->depth++;
                return CS_OK;
            }
        return cs__explorer_diverged(ex, step, want, n);
    }
    if (s->n_frames == s->cap_frames) {
        size_t ncap = s->cap_frames ? s->cap_frames * 2 : 64;
        frame *nf = realloc(s->frames, ncap * sizeof *nf);
        if (!nf) return CS_ENOMEM;
        s->frames = nf;
        s->cap_frames = ncap;
    }
    if (s->n_pool + n > s->cap_pool) {
        size_t ncap = s->cap_pool ? s->cap_pool * 2 : 256;
        while (ncap < s->n_pool + n) ncap *= 2;
        cs_actor *np = realloc(s->pool, ncap * sizeof *np);
        if (!np) return CS_ENOMEM;
        s->pool = np;
        s->cap_pool = ncap;
    }
    memcpy(s->pool + s->n_pool, enabled, n * sizeof *enabled);
    s->frames[s->n_frames++] = (frame){s->n_pool, (uint32_t)n, 0};
    s->n_pool += n;
    s->depth++;
    *chosen = 0;
    return CS_OK;
}

static int exh_observe(cs_explorer *ex, void *state, size_t index) {
    (void)ex;
    (void)state;
    (void)index;
    return CS_OK;
}

static int exh_end(cs_explorer *ex, void *state, int outcome) {
    (void)ex;
    (void)outcome;
    exh_state *s = state;
    /* Frames past the choices actually made (an execution cut short) are
     * dropped: their subtrees were never entered. */
    if (s->n_frames > s->depth) {
        s->n_frames = s->depth;
        s->n_pool = s->n_frames ? s->frames[s->n_frames - 1].off + s->frames[s->n_frames - 1].n : 0;
    }
    while (s->n_frames > 0) {
        frame *f = &s->frames[s->n_frames - 1];
        if (f->choice + 1 < f->n) {
            f->choice++;
            return CS_OK;
        }
        s->n_frames--;
        s->n_pool = f->off;
    }
    s->exhausted = true;
    return CS_OK;
}

const cs__strategy_ops cs__strategy_exhaustive = {
    "exhaustive", exh_create, exh_destroy, exh_begin,
    exh_choose, exh_observe, exh_end,
};
