/*
 * strategy_pos.c -- partial order sampling (Yuan, Yang, Gu, CAV 2018).
 *
 * Every pending event (the next step of an enabled actor) carries a random
 * priority in [0, 1), drawn when it becomes pending; each step runs the
 * pending event of highest priority.  After an event e executes, its actor's
 * next event is new (fresh priority when next seen), and every pending
 * event that races with e gets its priority re-drawn.  Re-drawing the racing
 * events is what makes POS sample partial orders far more evenly than a
 * uniform random walk.
 *
 * Approximation (the front end cannot know a step's accesses before it
 * runs): the accesses of an actor's pending step are PREDICTED to be those
 * of that actor's previous step in this execution, and an actor that has
 * not run yet in this execution is predicted to race with everything.  A
 * pending event is treated as racing with e when its prediction is unknown
 * or when a predicted access conflicts with an access of e (cs__conflict:
 * overlapping resources, whole-object wildcard and the global barrier
 * CS_OBJECT_ALL included, at least one write or lock operation).  Events
 * that e itself made pending are new and get a fresh priority anyway.  A wrong prediction only changes
 * the sampling distribution, never what is recorded: every schedule POS
 * produces is a real schedule of the program, and since a re-draw of a
 * non-racing event is harmless, erring towards "racing" (unknown = racing)
 * is the safe side.
 *
 * Execution i draws from a generator seeded by (seed, i).  Never complete.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    uint64_t object, key;
    uint8_t kind;
} pred_access;

typedef struct {
    uint64_t epoch;     /* entry valid for the current execution iff == epoch */
    double prio;
    bool has_prio;      /* a priority is assigned to its pending event */
    bool ran;           /* ran at least once: prediction is known */
    pred_access *pred;  /* accesses of its previous step */
    size_t n_pred, cap_pred;
} actor_slot;

typedef struct {
    uint64_t seed;     /* cs_config.seed: execution i draws from (seed, i) */
    cs__shard shard;   /* the streams this explorer draws (cs__shard_stream) */
    cs__rng rng;       /* this execution's stream (reseeded by begin) */
    uint64_t epoch;    /* bumped by begin: slots of other epochs are stale */
    actor_slot *slots; /* per actor id, cap entries */
    size_t cap;
    cs_actor *pending; /* actors last seen enabled (their pending events),
                          each once */
    size_t n_pending, cap_pending;
    pred_access *cur;  /* scratch: accesses of the event just observed */
    size_t cap_cur;
} pos_state;

static int pos_create(cs_explorer *ex, const cs_config *cfg, void **state) {
    (void)ex;
    pos_state *s = calloc(1, sizeof *s);
    if (!s) return CS_ENOMEM;
    s->seed = cfg->seed;
    s->shard = cs__shard_of(cfg);
    *state = s;
    return CS_OK;
}

static void pos_destroy(void *state) {
    pos_state *s = state;
    if (!s) return;
    for (size_t i = 0; i < s->cap; i++) free(s->slots[i].pred);
    free(s->slots);
    free(s->pending);
    free(s->cur);
    free(s);
}

static actor_slot *slot(pos_state *s, cs_actor a) {
    if (a >= s->cap) {
        size_t ncap = s->cap ? s->cap : 16;
        while (ncap <= a) ncap *= 2;
        actor_slot *ns = realloc(s->slots, ncap * sizeof *ns);
        if (!ns) return NULL;
        memset(ns + s->cap, 0, (ncap - s->cap) * sizeof *ns);
        s->slots = ns;
        s->cap = ncap;
    }
    actor_slot *sl = &s->slots[a];
    if (sl->epoch != s->epoch) {
        sl->epoch = s->epoch;
        sl->has_prio = false;
        sl->ran = false;
        sl->n_pred = 0;
    }
    return sl;
}

static int pos_begin(cs_explorer *ex, void *state, int *more, int *complete) {
    pos_state *s = state;
    cs_stats st;
    cs_explorer_stats(ex, &st);
    cs__rng_seed_stream(&s->rng, s->seed ^ 0x504f53504f53504fULL /* "POSPOSPO" */,
                        cs__shard_stream(s->shard, st.executions));
    s->epoch++;
    s->n_pending = 0;
    *more = 1;
    *complete = 0;
    return CS_OK;
}

static int pos_choose(cs_explorer *ex, void *state, size_t step,
                      const cs_actor *enabled, size_t n, size_t *chosen) {
    (void)ex;
    (void)step;
    pos_state *s = state;
    if (n > s->cap_pending) {
        cs_actor *np = realloc(s->pending, n * sizeof *np);
        if (!np) return CS_ENOMEM;
        s->pending = np;
        s->cap_pending = n;
    }
    size_t best = 0;
    double best_p = -1.0;
    for (size_t i = 0; i < n; i++) {
        actor_slot *sl = slot(s, enabled[i]);
        if (!sl) return CS_ENOMEM;
        if (!sl->has_prio) {
            sl->prio = cs__rng_double(&s->rng);
            sl->has_prio = true;
        }
        /* Ties (probability ~2^-53) go to the earlier actor in fifo order. */
        if (sl->prio > best_p) {
            best = i;
            best_p = sl->prio;
        }
        s->pending[i] = enabled[i];
    }
    s->n_pending = n;
    *chosen = best;
    return CS_OK;
}

/* The engine's one conflict test: the barrier CS_OBJECT_ALL overlaps every
 * access, lock operations count as writes. */
static bool overlaps(const pred_access *a, const pred_access *b) {
    return cs__conflict(a->object, a->key, a->kind, b->object, b->key, b->kind);
}

static int pos_observe(cs_explorer *ex, void *state, size_t index) {
    pos_state *s = state;
    cs_event ev;
    int rc = cs_trace_event(ex, index, &ev);
    if (rc) return rc;
    if (ev.n_accesses > s->cap_cur) {
        pred_access *nc = realloc(s->cur, ev.n_accesses * sizeof *nc);
        if (!nc) return CS_ENOMEM;
        s->cur = nc;
        s->cap_cur = ev.n_accesses;
    }
    for (uint32_t k = 0; k < ev.n_accesses; k++) {
        cs_access acc;
        rc = cs_trace_access(ex, (size_t)ev.first_access + k, &acc);
        if (rc) return rc;
        s->cur[k] = (pred_access){acc.object, acc.key, acc.kind};
    }
    /* Re-draw the pending events that race with the executed one. */
    for (size_t i = 0; i < s->n_pending; i++) {
        cs_actor b = s->pending[i];
        if (b == ev.actor) continue;
        actor_slot *sl = slot(s, b);
        if (!sl) return CS_ENOMEM;
        if (!sl->has_prio) continue;
        bool races = !sl->ran;
        for (size_t p = 0; !races && p < sl->n_pred; p++)
            for (uint32_t k = 0; !races && k < ev.n_accesses; k++)
                races = overlaps(&sl->pred[p], &s->cur[k]);
        if (races) sl->prio = cs__rng_double(&s->rng);
    }
    /* The executed actor's next event is new; its accesses become the
     * prediction for that event. */
    actor_slot *me = slot(s, ev.actor);
    if (!me) return CS_ENOMEM;
    if (ev.n_accesses > me->cap_pred) {
        pred_access *np = realloc(me->pred, ev.n_accesses * sizeof *np);
        if (!np) return CS_ENOMEM;
        me->pred = np;
        me->cap_pred = ev.n_accesses;
    }
    if (ev.n_accesses) memcpy(me->pred, s->cur, ev.n_accesses * sizeof *s->cur);
    me->n_pred = ev.n_accesses;
    me->ran = true;
    me->has_prio = false;
    return CS_OK;
}

static int pos_end(cs_explorer *ex, void *state, int outcome) {
    (void)ex;
    (void)state;
    (void)outcome;
    return CS_OK;
}

const cs__strategy_ops cs__strategy_pos = {
    "pos", pos_create, pos_destroy, pos_begin, pos_choose, pos_observe, pos_end,
};
