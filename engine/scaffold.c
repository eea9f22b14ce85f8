/*
 * scaffold.c -- TEMPORARY: placeholders so the engine links while the real
 * files are written.  Each owner deletes its placeholder here when its file
 * lands; this file must be gone before the work is called done.
 */
#include "internal.h"

#include <stdlib.h>

static int unavailable_create(cs_explorer *ex, const cs_config *cfg, void **state) {
    (void)ex; (void)cfg; (void)state;
    return CS_EINVAL;
}
static void none_destroy(void *s) { (void)s; }
static int none_begin(cs_explorer *ex, void *s, int *more, int *complete) {
    (void)ex; (void)s; *more = 0; *complete = 0; return CS_OK;
}
static int none_choose(cs_explorer *ex, void *s, size_t step, const cs_actor *e, size_t n, size_t *c) {
    (void)ex; (void)s; (void)step; (void)e; (void)n; *c = 0; return CS_OK;
}
static int none_observe(cs_explorer *ex, void *s, size_t i) { (void)ex; (void)s; (void)i; return CS_OK; }
static int none_end(cs_explorer *ex, void *s, int o) { (void)ex; (void)s; (void)o; return CS_OK; }

#define PLACEHOLDER(sym, nm) \
    const cs_strategy_ops sym = {nm, unavailable_create, none_destroy, none_begin, none_choose, none_observe, none_end};

/* BEGIN placeholders (delete a line when its strategy_*.c lands) */
PLACEHOLDER(cs_strategy_random, "random")
PLACEHOLDER(cs_strategy_replay, "replay")
PLACEHOLDER(cs_strategy_pct, "pct")
PLACEHOLDER(cs_strategy_pos, "pos")
PLACEHOLDER(cs_strategy_dpor, "dpor")
PLACEHOLDER(cs_strategy_exhaustive, "exhaustive")
/* END placeholders */

/* BEGIN trace placeholder (delete when trace.c lands): records actors only */
struct cs_trace { cs_event *ev; size_t len, cap; bool open; };
int cs_trace_new(cs_trace **out) { *out = calloc(1, sizeof **out); return *out ? CS_OK : CS_ENOMEM; }
void cs_trace_free(cs_trace *t) { if (t) { free(t->ev); free(t); } }
void cs_trace_reset(cs_trace *t) { t->len = 0; t->open = false; }
int cs_trace_step_begin(cs_trace *t, cs_actor a, int64_t by) {
    if (t->len == t->cap) {
        size_t nc = t->cap ? 2 * t->cap : 64;
        cs_event *n = realloc(t->ev, nc * sizeof *n);
        if (!n) return CS_ENOMEM;
        t->ev = n; t->cap = nc;
    }
    t->ev[t->len] = (cs_event){a, 0, by, 0, 0};
    t->open = true;
    return CS_OK;
}
int cs_trace_access_add(cs_trace *t, uint64_t o, uint64_t k, cs_access_kind kind, uint32_t s) {
    (void)t; (void)o; (void)k; (void)kind; (void)s; return CS_OK;
}
int cs_trace_step_end(cs_trace *t) { t->len++; t->open = false; return CS_OK; }
bool cs_trace_step_open(const cs_trace *t) { return t->open; }
size_t cs_trace_len(const cs_trace *t) { return t->len; }
uint64_t cs_trace_fingerprint(const cs_trace *t) { return t->len; }
int cs_trace_get_event(const cs_trace *t, size_t i, cs_event *out) {
    if (i >= t->len) return CS_EINVAL;
    *out = t->ev[i];
    return CS_OK;
}
int cs_trace_get_access(const cs_trace *t, size_t i, cs_access *out) { (void)t; (void)i; (void)out; return CS_EINVAL; }
int cs_trace_get_clock(const cs_trace *t, size_t i, const uint32_t **c, size_t *len) {
    (void)t; (void)i; *c = NULL; *len = 0; return CS_OK;
}
bool cs_trace_hb(const cs_trace *t, size_t a, size_t b) { (void)t; (void)a; (void)b; return false; }
bool cs_trace_dep(const cs_trace *t, size_t a, size_t b) { (void)t; (void)a; (void)b; return true; }
int cs_trace_preds(const cs_trace *t, size_t i, size_t *out, size_t cap, size_t *n) {
    (void)t; (void)i; (void)out; (void)cap; *n = 0; return CS_OK;
}
/* END trace placeholder */
