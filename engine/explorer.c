/*
 * explorer.c -- the explorer: one object per exploration.
 *
 * It owns the actor table (creation paths -> ids, stable across executions),
 * the trace of the current execution, the budgets and the statistics, and
 * forwards every scheduling decision to exactly one strategy (strategy_*.c).
 *
 * Invariants
 *   - Actor ids are dense, assigned in first-intern order, never reused.
 *   - Exactly one of {idle, in execution, in step} holds; calls out of
 *     sequence return CS_ESTATE and change nothing.
 */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    cs_actor parent;
    uint32_t index;
} actor_path;

struct cs_explorer {
    cs_config cfg;
    cs_actor *replay_copy;
    const cs__strategy_ops *ops;
    void *state;
    cs__trace *trace;

    /* actor table: paths[id] and a hash index (parent,index) -> id+1 */
    actor_path *paths;
    size_t n_actors, cap_actors;
    uint32_t *index_slots; /* id + 1, 0 = empty */
    size_t index_cap;

    enum { IDLE, IN_EXECUTION, IN_STEP } phase;
    size_t steps; /* steps taken in the current execution */
    bool finished;

    struct timespec started;
    bool started_set;

    bool diverged;
    size_t div_step, div_enabled;
    cs_actor div_expected;
    cs_divergence_kind div_kind;
    bool div_has_access, div_missing;
    cs_access div_access;

    cs__distinct fingerprints; /* exact, then a sketch: bounded memory */
    cs_stats stats;
};

/* ------------------------------------------------------------- helpers */

const char *cs_strerror(int status) {
    switch (status) {
    case CS_OK: return "ok";
    case CS_ENOMEM: return "out of memory";
    case CS_EINVAL: return "invalid argument";
    case CS_EDIVERGED: return "schedule diverged: prescribed step not enabled";
    case CS_EBUDGET: return "step budget exhausted";
    case CS_ESTATE: return "call out of sequence";
    case CS_EBLOCKED: return "execution is redundant (sleep-set blocked)";
    default: return "unknown status";
    }
}

static const char *const strategy_names[] = {
    "fifo", "random", "replay", "pct", "pos", "dpor", "exhaustive", "guided",
};

const char *cs_strategy_name(cs_strategy_kind kind) {
    if ((unsigned)kind >= sizeof strategy_names / sizeof *strategy_names)
        return "unknown";
    return strategy_names[kind];
}

int cs_strategy_from_name(const char *name) {
    if (!name) return -1;
    for (size_t i = 0; i < sizeof strategy_names / sizeof *strategy_names; i++)
        if (strcmp(name, strategy_names[i]) == 0) return (int)i;
    return -1;
}

static const cs__strategy_ops *ops_for(cs_strategy_kind kind) {
    switch (kind) {
    case CS_STRATEGY_FIFO: return &cs__strategy_fifo;
    case CS_STRATEGY_RANDOM: return &cs__strategy_random;
    case CS_STRATEGY_REPLAY: return &cs__strategy_replay;
    case CS_STRATEGY_PCT: return &cs__strategy_pct;
    case CS_STRATEGY_POS: return &cs__strategy_pos;
    case CS_STRATEGY_DPOR: return &cs__strategy_dpor;
    case CS_STRATEGY_EXHAUSTIVE: return &cs__strategy_exhaustive;
    case CS_STRATEGY_GUIDED: return &cs__strategy_guided;
    }
    return NULL;
}

void cs_config_init(cs_config *cfg, cs_strategy_kind kind) {
    memset(cfg, 0, sizeof *cfg);
    cfg->kind = kind;
    cfg->pct_depth = 3;
    cfg->pct_steps_hint = 64;
}

static double elapsed_seconds(const struct timespec *since) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - since->tv_sec) +
           (double)(now.tv_nsec - since->tv_nsec) * 1e-9;
}

/* --------------------------------------------------------------- actors */

static size_t path_hash(cs_actor parent, uint32_t index) {
    return (size_t)cs__mix64(((uint64_t)parent << 32) ^ index ^ 0x9e3779b97f4a7c15ULL);
}

static int index_grow(cs_explorer *ex) {
    size_t ncap = ex->index_cap ? ex->index_cap * 2 : 64;
    uint32_t *ns = calloc(ncap, sizeof *ns);
    if (!ns) return CS_ENOMEM;
    for (size_t id = 0; id < ex->n_actors; id++) {
        size_t j = path_hash(ex->paths[id].parent, ex->paths[id].index) & (ncap - 1);
        while (ns[j]) j = (j + 1) & (ncap - 1);
        ns[j] = (uint32_t)id + 1;
    }
    free(ex->index_slots);
    ex->index_slots = ns;
    ex->index_cap = ncap;
    return CS_OK;
}

int cs_actor_intern(cs_explorer *ex, cs_actor parent, uint32_t index,
                    cs_actor *out) {
    if (!ex || !out) return CS_EINVAL;
    if (parent != CS_NO_ACTOR && parent >= ex->n_actors) return CS_EINVAL;
    if ((ex->n_actors + 1) * 2 > ex->index_cap) {
        int rc = index_grow(ex);
        if (rc) return rc;
    }
    size_t mask = ex->index_cap - 1;
    size_t j = path_hash(parent, index) & mask;
    while (ex->index_slots[j]) {
        const actor_path *p = &ex->paths[ex->index_slots[j] - 1];
        if (p->parent == parent && p->index == index) {
            *out = ex->index_slots[j] - 1;
            return CS_OK;
        }
        j = (j + 1) & mask;
    }
    if (ex->n_actors >= CS_NO_ACTOR - 1) return CS_ENOMEM;
    if (ex->n_actors == ex->cap_actors) {
        size_t ncap = ex->cap_actors ? ex->cap_actors * 2 : 32;
        actor_path *np = realloc(ex->paths, ncap * sizeof *np);
        if (!np) return CS_ENOMEM;
        ex->paths = np;
        ex->cap_actors = ncap;
    }
    cs_actor id = (cs_actor)ex->n_actors++;
    ex->paths[id].parent = parent;
    ex->paths[id].index = index;
    ex->index_slots[j] = id + 1;
    *out = id;
    return CS_OK;
}

int cs_actor_path(const cs_explorer *ex, cs_actor actor, cs_actor *parent,
                  uint32_t *index) {
    if (!ex || actor >= ex->n_actors) return CS_EINVAL;
    if (parent) *parent = ex->paths[actor].parent;
    if (index) *index = ex->paths[actor].index;
    return CS_OK;
}

size_t cs__explorer_actor_count(const cs_explorer *ex) { return ex->n_actors; }
const cs__trace *cs__explorer_trace(const cs_explorer *ex) { return ex->trace; }

/* ------------------------------------------------------------- lifecycle */

int cs_explorer_new(const cs_config *cfg, cs_explorer **out) {
    if (!cfg || !out) return CS_EINVAL;
    *out = NULL;
    const cs__strategy_ops *ops = ops_for(cfg->kind);
    if (!ops) return CS_EINVAL;
    if ((cfg->kind == CS_STRATEGY_REPLAY || cfg->kind == CS_STRATEGY_GUIDED) &&
        cfg->replay_len && !cfg->replay)
        return CS_EINVAL;
    if (cfg->time_limit < 0) return CS_EINVAL;

    int rc = CS_ENOMEM;
    cs_explorer *ex = calloc(1, sizeof *ex);
    if (!ex) return CS_ENOMEM;
    ex->cfg = *cfg;
    ex->ops = ops;
    ex->fingerprints.exact_max = cfg->exact_traces ? cfg->exact_traces : CS_EXACT_TRACES;
    if (cfg->replay_len) {
        ex->replay_copy = malloc(cfg->replay_len * sizeof *ex->replay_copy);
        if (!ex->replay_copy) goto fail;
        memcpy(ex->replay_copy, cfg->replay, cfg->replay_len * sizeof *cfg->replay);
        ex->cfg.replay = ex->replay_copy;
    } else {
        ex->cfg.replay = NULL;
    }
    rc = cs__trace_new(&ex->trace);
    if (rc) goto fail;
    rc = ops->create(ex, &ex->cfg, &ex->state);
    if (rc) goto fail;
    *out = ex;
    return CS_OK;
fail:
    cs_explorer_free(ex);
    return rc;
}

void cs_explorer_free(cs_explorer *ex) {
    if (!ex) return;
    if (ex->state && ex->ops) ex->ops->destroy(ex->state);
    cs__trace_free(ex->trace);
    free(ex->replay_copy);
    free(ex->paths);
    free(ex->index_slots);
    cs__distinct_free(&ex->fingerprints);
    free(ex);
}

int cs_execution_begin(cs_explorer *ex, int *more) {
    if (!ex || !more) return CS_EINVAL;
    if (ex->phase != IDLE) return CS_ESTATE;
    *more = 0;
    if (ex->finished) return CS_OK;
    if (!ex->started_set) {
        clock_gettime(CLOCK_MONOTONIC, &ex->started);
        ex->started_set = true;
    }
    bool over_budget =
        (ex->cfg.max_executions && ex->stats.executions >= ex->cfg.max_executions) ||
        (ex->cfg.time_limit > 0 && ex->stats.executions > 0 &&
         elapsed_seconds(&ex->started) >= ex->cfg.time_limit);
    int strat_more = 0, complete = 0;
    int rc = ex->ops->begin(ex, ex->state, &strat_more, &complete);
    if (rc) return rc;
    if (!strat_more) {
        ex->finished = true;
        ex->stats.complete = complete;
        return CS_OK;
    }
    if (over_budget) {
        ex->finished = true;
        ex->stats.budget_hit = 1;
        ex->stats.complete = 0;
        return CS_OK;
    }
    cs__trace_reset(ex->trace);
    ex->steps = 0;
    ex->diverged = false;
    ex->phase = IN_EXECUTION;
    *more = 1;
    return CS_OK;
}

int cs_choose(cs_explorer *ex, const cs_actor *enabled, size_t n,
              size_t *chosen) {
    if (!ex || !enabled || !chosen || n == 0) return CS_EINVAL;
    if (ex->phase != IN_EXECUTION) return CS_ESTATE;
    if (ex->cfg.max_steps && ex->steps >= ex->cfg.max_steps) return CS_EBUDGET;
    size_t pick = 0;
    int rc = ex->ops->choose(ex, ex->state, ex->steps, enabled, n, &pick);
    if (rc) return rc;
    if (pick >= n) return CS_EINVAL;
    *chosen = pick;
    return CS_OK;
}

int cs_step_begin(cs_explorer *ex, cs_actor actor, int64_t scheduled_by) {
    if (!ex) return CS_EINVAL;
    if (ex->phase != IN_EXECUTION) return CS_ESTATE;
    if (actor >= ex->n_actors) return CS_EINVAL;
    if (scheduled_by < CS_AFTER_ALL || scheduled_by >= (int64_t)cs__trace_len(ex->trace))
        return CS_EINVAL;
    int rc = cs__trace_step_begin(ex->trace, actor, scheduled_by);
    if (rc) return rc;
    ex->phase = IN_STEP;
    return CS_OK;
}

int cs_step_begin_after(cs_explorer *ex, cs_actor actor, size_t prefix) {
    if (!ex) return CS_EINVAL;
    if (ex->phase != IN_EXECUTION) return CS_ESTATE;
    if (actor >= ex->n_actors) return CS_EINVAL;
    if (prefix > cs__trace_len(ex->trace)) return CS_EINVAL;
    int rc = cs__trace_step_begin_after(ex->trace, actor, prefix);
    if (rc) return rc;
    ex->phase = IN_STEP;
    return CS_OK;
}

int cs_clock_advance(cs_explorer *ex) {
    if (!ex) return CS_EINVAL;
    if (ex->phase != IN_EXECUTION) return CS_ESTATE;
    return cs__trace_barrier(ex->trace);
}

int cs_access_record(cs_explorer *ex, uint64_t object, uint64_t key,
                     cs_access_kind kind, uint32_t site) {
    if (!ex) return CS_EINVAL;
    if (ex->phase != IN_STEP) return CS_ESTATE;
    int base = (int)kind & CS_KIND_MASK;
    if (base < CS_READ || base > CS_ADD) return CS_EINVAL;
    if ((kind & CS_ID_STABLE) && (kind & CS_ID_CREATED)) return CS_EINVAL;
    if (object == CS_OBJECT_ALL && base != CS_READ && base != CS_WRITE) return CS_EINVAL;
    if (base == CS_ADD && key == CS_KEY_WHOLE) return CS_EINVAL;
    if ((kind & CS_ENABLING) && base != CS_READ) return CS_EINVAL;
    return cs__trace_access_add(ex->trace, object, key, kind, site);
}

int cs_step_access_count(const cs_explorer *ex, size_t *count) {
    if (!ex || !count) return CS_EINVAL;
    if (ex->phase != IN_STEP) return CS_ESTATE;
    return cs__trace_step_accesses(ex->trace, count);
}

int cs_step_rewind(cs_explorer *ex, size_t keep, cs_access_kind kind, int *dropped) {
    if (!ex || !dropped) return CS_EINVAL;
    if (ex->phase != IN_STEP) return CS_ESTATE;
    if (kind != CS_READ && kind != CS_WRITE) return CS_EINVAL;
    return cs__trace_step_rewind(ex->trace, keep, kind, dropped);
}

int cs_step_note(cs_explorer *ex, uint64_t note) {
    if (!ex) return CS_EINVAL;
    if (ex->phase != IN_STEP) return CS_ESTATE;
    return cs__trace_note(ex->trace, note);
}

int cs_step_end(cs_explorer *ex) {
    if (!ex) return CS_EINVAL;
    if (ex->phase != IN_STEP) return CS_ESTATE;
    int rc = cs__trace_step_end(ex->trace);
    if (rc) return rc;
    ex->phase = IN_EXECUTION;
    ex->steps++;
    return ex->ops->observe(ex, ex->state, cs__trace_len(ex->trace) - 1);
}

int cs_execution_end(cs_explorer *ex, int outcome) {
    if (!ex) return CS_EINVAL;
    if (outcome != CS_OUTCOME_OK && outcome != CS_OUTCOME_FAILED &&
        outcome != CS_OUTCOME_ABORTED)
        return CS_EINVAL;
    if (ex->phase == IDLE) return CS_ESTATE;
    if (ex->phase == IN_STEP) {
        /* An execution may be abandoned mid-step (an internal error); the
         * open step is completed so the trace stays well formed. */
        int rc = cs__trace_step_end(ex->trace);
        if (rc) return rc;
        ex->phase = IN_EXECUTION;
    }
    if (ex->cfg.count_traces && outcome != CS_OUTCOME_ABORTED) {
        /* Before anything changes: on CS_ENOMEM the execution is still open
         * (retry, or end it CS_OUTCOME_ABORTED, which counts no trace). */
        uint64_t fingerprint;
        int rc = cs__trace_fingerprint(ex->trace, &fingerprint);
        if (rc) return rc;
        int added = cs__distinct_add(&ex->fingerprints, fingerprint);
        if (added < 0) return added;
        ex->stats.distinct_traces = cs__distinct_count(&ex->fingerprints);
        ex->stats.traces_estimated = cs__distinct_estimated(&ex->fingerprints);
    }
    ex->phase = IDLE;
    ex->stats.executions++;
    if (outcome == CS_OUTCOME_FAILED) ex->stats.failing++;
    if (outcome == CS_OUTCOME_ABORTED) ex->stats.aborted++;
    size_t len = cs__trace_len(ex->trace);
    if (len > ex->stats.max_depth) ex->stats.max_depth = len;
    int rc = ex->ops->end(ex, ex->state, outcome);
    if (rc == CS_EDIVERGED && outcome != CS_OUTCOME_ABORTED) {
        /* The strategy found the execution did not follow its schedule (it
         * ended early): it says nothing about the program. */
        if (outcome == CS_OUTCOME_FAILED) ex->stats.failing--;
        ex->stats.aborted++;
    }
    return rc;
}

/* The strategy reports a sleep-set-blocked execution through this counter so
 * that the stats stay in one place. */
const cs_config *cs__explorer_config(const cs_explorer *ex) { return &ex->cfg; }

void cs__explorer_count_blocked(cs_explorer *ex) { ex->stats.sleep_blocked++; }

void cs__explorer_count_deviation(cs_explorer *ex) { ex->stats.guide_deviations++; }

int cs__explorer_diverged(cs_explorer *ex, size_t step, cs_actor expected,
                         size_t n_enabled) {
    ex->diverged = true;
    ex->div_kind = CS_DIVERGED_NOT_ENABLED;
    ex->div_has_access = false;
    ex->div_step = step;
    ex->div_expected = expected;
    ex->div_enabled = n_enabled;
    return CS_EDIVERGED;
}

int cs__explorer_changed(cs_explorer *ex, size_t step, cs_actor actor,
                         const cs_access *changed, bool missing) {
    ex->diverged = true;
    ex->div_kind = CS_DIVERGED_CHANGED;
    ex->div_step = step;
    ex->div_expected = actor;
    ex->div_enabled = 0;
    ex->div_has_access = changed != NULL;
    ex->div_missing = missing;
    if (changed) ex->div_access = *changed;
    return CS_EDIVERGED;
}

int cs_divergence_detail(const cs_explorer *ex, cs_divergence_kind *kind, int *has_access,
                         cs_access *access, int *missing) {
    if (!ex) return CS_EINVAL;
    if (!ex->diverged) return CS_ESTATE;
    if (kind) *kind = ex->div_kind;
    if (has_access) *has_access = ex->div_has_access;
    if (access && ex->div_has_access) *access = ex->div_access;
    if (missing) *missing = ex->div_has_access && ex->div_missing;
    return CS_OK;
}

int cs_divergence(const cs_explorer *ex, size_t *step, cs_actor *expected,
                  size_t *n_enabled) {
    if (!ex) return CS_EINVAL;
    if (!ex->diverged) return CS_ESTATE;
    if (step) *step = ex->div_step;
    if (expected) *expected = ex->div_expected;
    if (n_enabled) *n_enabled = ex->div_enabled;
    return CS_OK;
}

void cs_explorer_stats(const cs_explorer *ex, cs_stats *out) {
    if (!ex || !out) return;
    *out = ex->stats;
}

/* ---------------------------------------------- sharing DPOR's tree */

/* The tree can be shared only between executions, and only DPOR's. */
static void *share_state(cs_explorer *ex) {
    if (!ex || ex->ops != &cs__strategy_dpor || ex->phase != IDLE) return NULL;
    return ex->state;
}

int cs_share_offer(cs_explorer *ex, size_t *position, int *found) {
    void *st = share_state(ex);
    if (!st || !position || !found) return CS_EINVAL;
    return cs__dpor_share_offer(st, position, found);
}

int cs_share_give(cs_explorer *ex, size_t position, size_t *token) {
    void *st = share_state(ex);
    return st && token ? cs__dpor_share_give(st, position, token) : CS_EINVAL;
}

int cs_share_take(cs_explorer *ex, size_t position) {
    void *st = share_state(ex);
    return st ? cs__dpor_share_take(st, position) : CS_EINVAL;
}

int cs_share_reports(cs_explorer *ex, const uint8_t **buf, size_t *len) {
    void *st = share_state(ex);
    if (!st || !buf || !len) return CS_EINVAL;
    return cs__dpor_share_reports(st, buf, len);
}

int cs_share_reports_clear(cs_explorer *ex) {
    void *st = share_state(ex);
    if (!st) return CS_EINVAL;
    cs__dpor_share_reports_clear(st);
    return CS_OK;
}

int cs_share_import(cs_explorer *ex, const uint8_t *buf, size_t len, const cs_actor *map,
                    size_t n_map) {
    void *st = share_state(ex);
    if (!st || (!buf && len)) return CS_EINVAL;
    for (size_t i = 0; i < n_map; i++)
        if (map[i] >= ex->n_actors) return CS_EINVAL;
    return cs__dpor_share_import(st, buf, len, map, n_map);
}

int cs_share_done(cs_explorer *ex, size_t position, size_t token) {
    void *st = share_state(ex);
    return st ? cs__dpor_share_done(st, position, token) : CS_EINVAL;
}

int cs_share_waiting(cs_explorer *ex, size_t *position, int *waiting) {
    void *st = share_state(ex);
    if (!st || !position || !waiting) return CS_EINVAL;
    return cs__dpor_share_waiting(st, position, waiting);
}

int cs_share_resume(cs_explorer *ex) {
    void *st = share_state(ex);
    return st ? cs__dpor_share_resume(st) : CS_EINVAL;
}

/* ------------------------------------------------ public trace accessors */

size_t cs_trace_length(const cs_explorer *ex) {
    return ex ? cs__trace_len(ex->trace) : 0;
}

int cs_trace_event(const cs_explorer *ex, size_t index, cs_event *out) {
    if (!ex || !out) return CS_EINVAL;
    return cs__trace_get_event(ex->trace, index, out);
}

int cs_trace_access(const cs_explorer *ex, size_t access_index, cs_access *out) {
    if (!ex || !out) return CS_EINVAL;
    return cs__trace_get_access(ex->trace, access_index, out);
}

int cs_trace_access_flags(const cs_explorer *ex, size_t access_index, uint8_t *flags) {
    if (!ex || !flags) return CS_EINVAL;
    return cs__trace_get_access_flags(ex->trace, access_index, flags);
}

int cs_trace_clock(cs_explorer *ex, size_t index, const uint32_t **clock,
                   size_t *len) {
    if (!ex || !clock || !len) return CS_EINVAL;
    return cs__trace_get_clock(ex->trace, index, clock, len);
}

int cs_trace_hb_view(const cs_explorer *ex, cs_hb_view **out) {
    if (!ex || !out) return CS_EINVAL;
    return cs__trace_hb_view(ex->trace, out);
}

void cs_hb_view_free(cs_hb_view *view) { cs__hb_view_free(view); }

int cs_trace_happens_before(const cs_explorer *ex, size_t a, size_t b) {
    if (!ex) return 0;
    size_t n = cs__trace_len(ex->trace);
    if (a >= n || b >= n || a == b) return 0;
    return cs__trace_hb(ex->trace, a, b) ? 1 : 0;
}

int cs_trace_dependent(const cs_explorer *ex, size_t a, size_t b) {
    if (!ex) return 0;
    size_t n = cs__trace_len(ex->trace);
    if (a >= n || b >= n || a == b) return 0;
    return cs__trace_dep(ex->trace, a, b) ? 1 : 0;
}

int cs_trace_predecessors(const cs_explorer *ex, size_t index, size_t *out,
                          size_t cap, size_t *n) {
    if (!ex || !n || (cap && !out)) return CS_EINVAL;
    return cs__trace_preds(ex->trace, index, out, cap, n);
}

int cs_trace_schedule(const cs_explorer *ex, cs_actor *out, size_t cap,
                      size_t *n) {
    if (!ex || !n || (cap && !out)) return CS_EINVAL;
    size_t len = cs__trace_len(ex->trace);
    *n = len;
    for (size_t i = 0; i < len && i < cap; i++) {
        cs_event ev;
        int rc = cs__trace_get_event(ex->trace, i, &ev);
        if (rc) return rc;
        out[i] = ev.actor;
    }
    return CS_OK;
}
