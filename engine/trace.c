/*
 * trace.c -- the record of the current execution.
 *
 * Each event (one step) stores its actor, its rank among that actor's steps,
 * the event that scheduled it, its accesses, its vector clock and its
 * immediate happens-before predecessors (the covering relation of HB).
 *
 * Dependency of two events a < b (positions in the execution):
 *   - same actor (program order);
 *   - b.scheduled_by == a (the step that made b runnable);
 *   - b.scheduled_by == CS_AFTER_ALL (b follows every earlier event);
 *   - conflicting accesses: resources (object, key) overlap (same object and
 *     same key, or either key is CS_KEY_WHOLE) and at least one is a write
 *     (lock acquisitions and releases count as writes).
 * HB is the transitive closure of dependency restricted to a < b.
 *
 * Vector clocks are indexed by actor id; clock(e)[actor(e)] = actor_step + 1,
 * so a happens before b iff a < b and clock(b)[actor(a)] > actor_step(a).
 *
 * Clocks are computed FastTrack-style, never by scanning the trace: for every
 * resource we keep its last write and, per actor, the last read since that
 * write; for every object we keep, per actor, the last key write and the last
 * key access since the object's last whole-object write.  Every earlier event
 * that b depends on either is one of these *candidates* or happens before one
 * of them, so joining the candidates' clocks gives the exact clock, and the
 * candidates that precede no other candidate are exactly the immediate
 * predecessors.
 *
 * Memory is kept across cs_trace_reset (hash tables are invalidated by a
 * generation stamp) and grows with the length of an execution only.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX

typedef struct {
    cs_actor actor;
    uint32_t event;
} act_ev;

/* A small list holding at most one entry per actor. */
typedef struct {
    act_ev *v;
    uint32_t n, cap;
} act_list;

typedef struct {
    uint32_t last_write; /* event index or NONE */
    act_list reads;      /* per actor: last read since last_write */
} resource;

typedef struct {
    uint64_t name;        /* see cs_trace_object_name */
    uint32_t birth;       /* 0, or event + 1 of its first (unflagged) access */
    uint32_t whole;       /* resource index of (object, CS_KEY_WHOLE), or NONE */
    act_list key_writes;  /* per actor: last key write since last whole write */
    act_list key_access;  /* per actor: last key access since last whole write */
} object_rec;

typedef struct {
    uint64_t object, key;
    uint32_t gen, index;
} slot;

/* Open addressing, linear probing; a slot is live iff its gen is current. */
typedef struct {
    slot *slots;
    size_t cap, len;
} table;

typedef struct {
    cs_actor actor;
    uint32_t actor_step;
    int64_t scheduled_by;
    uint32_t first_access, n_accesses;
    uint32_t clock_off, clock_len;
    uint32_t pred_off, n_preds;
} event;

/* Per-access scratch: the object record and the resource record. */
typedef struct acc_ref {
    uint32_t obj, res;
} acc_ref;

struct cs_trace {
    event *ev;
    size_t len, cap;
    bool open;

    cs_access *acc;
    size_t n_acc, cap_acc;
    uint32_t *acc_obj; /* per access: its object record (set at step end) */
    size_t cap_acc_obj;
    uint8_t *acc_flags; /* per access: CS_ID_* flags given with it */
    size_t cap_acc_flags;

    uint32_t *clocks; /* pool: event clocks, each clock_len entries */
    size_t n_clk, cap_clk;

    uint32_t *preds; /* pool: immediate predecessors */
    size_t n_pred, cap_pred;

    /* per actor (index = actor id), valid below width */
    uint32_t *last_ev;  /* last event of the actor, NONE if none */
    uint32_t *n_steps;  /* steps taken so far */
    size_t width, cap_actor;

    uint32_t *work; /* scratch clock, cap_actor entries */

    /* candidates of the open step, dedup'd by stamp[event] == stamp_now */
    uint32_t *cand;
    size_t n_cand, cap_cand;
    uint32_t *stamp; /* per event */
    size_t cap_stamp;
    uint32_t stamp_now;
    acc_ref *refs; /* per access of the open step */
    size_t cap_refs;

    uint32_t gen;
    table res_index, obj_index;
    resource *res;
    size_t n_res, cap_res;
    object_rec *obj;
    size_t n_obj, cap_obj;
};

/* ------------------------------------------------------------ helpers */

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return CS_OK;
    size_t ncap = *cap ? *cap : 16;
    while (ncap < need) ncap *= 2;
    void *np = realloc(*p, ncap * elem);
    if (!np) return CS_ENOMEM;
    *p = np;
    *cap = ncap;
    return CS_OK;
}

#define GROW(ptr, capv, need) grow((void **)&(ptr), &(capv), (need), sizeof *(ptr))

static int list_put(act_list *l, cs_actor actor, uint32_t e) {
    for (uint32_t i = 0; i < l->n; i++)
        if (l->v[i].actor == actor) {
            l->v[i].event = e;
            return CS_OK;
        }
    if (l->n == l->cap) {
        uint32_t ncap = l->cap ? l->cap * 2 : 4;
        act_ev *nv = realloc(l->v, ncap * sizeof *nv);
        if (!nv) return CS_ENOMEM;
        l->v = nv;
        l->cap = ncap;
    }
    l->v[l->n++] = (act_ev){actor, e};
    return CS_OK;
}

static size_t slot_hash(uint64_t object, uint64_t key) {
    return (size_t)cs_mix64(object * 0x9e3779b97f4a7c15ULL ^ cs_mix64(key));
}

/* Finds (object, key); inserts it with index *fresh_index when absent and
 * sets *created.  Returns the stored index or NONE on allocation failure. */
static uint32_t table_find(table *t, uint32_t gen, uint64_t object, uint64_t key,
                           uint32_t fresh_index, bool *created) {
    *created = false;
    if ((t->len + 1) * 2 > t->cap) {
        size_t ncap = t->cap ? t->cap * 2 : 64;
        slot *ns = calloc(ncap, sizeof *ns);
        if (!ns) return NONE;
        for (size_t i = 0; i < t->cap; i++) {
            slot *s = &t->slots[i];
            if (s->gen != gen) continue;
            size_t j = slot_hash(s->object, s->key) & (ncap - 1);
            while (ns[j].gen == gen) j = (j + 1) & (ncap - 1);
            ns[j] = *s;
        }
        free(t->slots);
        t->slots = ns;
        t->cap = ncap;
    }
    size_t mask = t->cap - 1;
    size_t j = slot_hash(object, key) & mask;
    while (t->slots[j].gen == gen) {
        if (t->slots[j].object == object && t->slots[j].key == key)
            return t->slots[j].index;
        j = (j + 1) & mask;
    }
    t->slots[j] = (slot){object, key, gen, fresh_index};
    t->len++;
    *created = true;
    return fresh_index;
}

static uint32_t clock_at(const cs_trace *t, uint32_t e, cs_actor a) {
    const event *ev = &t->ev[e];
    return a < ev->clock_len ? t->clocks[ev->clock_off + a] : 0;
}

/* a happens before b (a, b < len, or b the event whose clock is in work) */
static bool hb_idx(const cs_trace *t, uint32_t a, uint32_t b) {
    if (a >= b) return false;
    const event *ea = &t->ev[a];
    return clock_at(t, b, ea->actor) > ea->actor_step;
}

/* --------------------------------------------------------- lifecycle */

int cs_trace_new(cs_trace **out) {
    if (!out) return CS_EINVAL;
    cs_trace *t = calloc(1, sizeof *t);
    if (!t) return CS_ENOMEM;
    t->gen = 1;
    *out = t;
    return CS_OK;
}

void cs_trace_free(cs_trace *t) {
    if (!t) return;
    for (size_t i = 0; i < t->cap_res; i++) free(t->res[i].reads.v);
    for (size_t i = 0; i < t->cap_obj; i++) {
        free(t->obj[i].key_writes.v);
        free(t->obj[i].key_access.v);
    }
    free(t->res);
    free(t->obj);
    free(t->res_index.slots);
    free(t->obj_index.slots);
    free(t->ev);
    free(t->acc);
    free(t->acc_obj);
    free(t->acc_flags);
    free(t->clocks);
    free(t->preds);
    free(t->last_ev);
    free(t->n_steps);
    free(t->work);
    free(t->cand);
    free(t->stamp);
    free(t->refs);
    free(t);
}

void cs_trace_reset(cs_trace *t) {
    if (!t) return;
    t->len = 0;
    t->open = false;
    t->n_acc = 0;
    t->n_clk = 0;
    t->n_pred = 0;
    for (size_t a = 0; a < t->width; a++) {
        t->last_ev[a] = NONE;
        t->n_steps[a] = 0;
    }
    t->width = 0;
    t->n_res = 0;
    t->n_obj = 0;
    t->res_index.len = 0;
    t->obj_index.len = 0;
    if (++t->gen == 0) {
        /* generation wrapped: clear the stamps for real */
        if (t->res_index.slots) memset(t->res_index.slots, 0, t->res_index.cap * sizeof(slot));
        if (t->obj_index.slots) memset(t->obj_index.slots, 0, t->obj_index.cap * sizeof(slot));
        t->gen = 1;
    }
}

/* ------------------------------------------------------------ recording */

int cs_trace_step_begin(cs_trace *t, cs_actor actor, int64_t scheduled_by) {
    if (!t || actor == CS_NO_ACTOR) return CS_EINVAL;
    if (t->open) return CS_ESTATE;
    if (scheduled_by < CS_AFTER_ALL || scheduled_by >= (int64_t)t->len) return CS_EINVAL;
    if (t->len >= NONE - 1) return CS_ENOMEM;
    if (GROW(t->ev, t->cap, t->len + 1)) return CS_ENOMEM;
    if (actor >= t->width) {
        size_t nw = (size_t)actor + 1;
        if (nw > t->cap_actor) {
            size_t ncap = t->cap_actor ? t->cap_actor : 16;
            while (ncap < nw) ncap *= 2;
            uint32_t *a = realloc(t->last_ev, ncap * sizeof *a);
            if (!a) return CS_ENOMEM;
            t->last_ev = a;
            uint32_t *b = realloc(t->n_steps, ncap * sizeof *b);
            if (!b) return CS_ENOMEM;
            t->n_steps = b;
            uint32_t *w = realloc(t->work, ncap * sizeof *w);
            if (!w) return CS_ENOMEM;
            t->work = w;
            t->cap_actor = ncap;
        }
        for (size_t a = t->width; a < nw; a++) {
            t->last_ev[a] = NONE;
            t->n_steps[a] = 0;
        }
        t->width = nw;
    }
    event *e = &t->ev[t->len];
    memset(e, 0, sizeof *e);
    e->actor = actor;
    e->actor_step = t->n_steps[actor];
    e->scheduled_by = scheduled_by;
    e->first_access = (uint32_t)t->n_acc;
    e->n_accesses = 0;
    t->open = true;
    return CS_OK;
}

int cs_trace_access_add(cs_trace *t, uint64_t object, uint64_t key,
                        cs_access_kind kind, uint32_t site) {
    if (!t) return CS_EINVAL;
    if (!t->open) return CS_ESTATE;
    uint8_t flags = (uint8_t)((unsigned)kind & (CS_ID_STABLE | CS_ID_CREATED));
    kind = (cs_access_kind)((unsigned)kind & CS_KIND_MASK);
    if (kind < CS_READ || kind > CS_LOCK_RELEASE) return CS_EINVAL;
    if (t->n_acc >= NONE - 1) return CS_ENOMEM;
    if (GROW(t->acc, t->cap_acc, t->n_acc + 1)) return CS_ENOMEM;
    if (GROW(t->acc_flags, t->cap_acc_flags, t->n_acc + 1)) return CS_ENOMEM;
    t->acc_flags[t->n_acc] = flags;
    t->acc[t->n_acc++] = (cs_access){object, key, site, (uint8_t)kind};
    t->ev[t->len].n_accesses++;
    return CS_OK;
}

static int cand_add(cs_trace *t, uint32_t e) {
    if (e == NONE || t->stamp[e] == t->stamp_now) return CS_OK;
    if (GROW(t->cand, t->cap_cand, t->n_cand + 1)) return CS_ENOMEM;
    t->stamp[e] = t->stamp_now;
    t->cand[t->n_cand++] = e;
    return CS_OK;
}

static int cand_list(cs_trace *t, const act_list *l) {
    for (uint32_t i = 0; i < l->n; i++)
        if (cand_add(t, l->v[i].event)) return CS_ENOMEM;
    return CS_OK;
}

/* Looks up (or creates) the resource record of (object, key). */
static int resource_of(cs_trace *t, uint64_t object, uint64_t key, uint32_t *out) {
    size_t old = t->cap_res;
    if (GROW(t->res, t->cap_res, t->n_res + 1)) return CS_ENOMEM;
    for (size_t i = old; i < t->cap_res; i++) memset(&t->res[i], 0, sizeof t->res[i]);
    bool created;
    uint32_t idx = table_find(&t->res_index, t->gen, object, key, (uint32_t)t->n_res, &created);
    if (idx == NONE) return CS_ENOMEM;
    if (created) {
        resource *r = &t->res[t->n_res++];
        r->last_write = NONE;
        r->reads.n = 0;
    }
    *out = idx;
    return CS_OK;
}

/* Names for other executions (cs_trace_object_name).  The top two bits keep
 * the three families apart: stable ids (00), created objects (01), objects
 * named by their first access (1x). */
#define NAME_CREATED (1ULL << 62)
#define NAME_BIRTH (1ULL << 63)

static uint64_t object_name(uint64_t object, uint8_t flags, cs_actor actor,
                            uint32_t actor_step, uint32_t created_rank,
                            uint32_t event, uint32_t access, uint32_t *birth) {
    *birth = 0;
    if (flags & CS_ID_STABLE) return object & ~(NAME_CREATED | NAME_BIRTH);
    if (flags & CS_ID_CREATED)
        return NAME_CREATED | (cs_mix64(((uint64_t)actor << 32 | actor_step) ^
                                     cs_mix64(created_rank + 0x9e3779b97f4a7c15ULL)) &
                               (NAME_CREATED - 1));
    *birth = event + 1;
    return NAME_BIRTH | (uint64_t)(event + 1) << 24 | (access & 0xffffff);
}

static int object_of(cs_trace *t, uint64_t object, uint64_t name, uint32_t birth,
                     uint32_t *out) {
    size_t old = t->cap_obj;
    if (GROW(t->obj, t->cap_obj, t->n_obj + 1)) return CS_ENOMEM;
    for (size_t i = old; i < t->cap_obj; i++) memset(&t->obj[i], 0, sizeof t->obj[i]);
    bool created;
    uint32_t idx = table_find(&t->obj_index, t->gen, object, 0, (uint32_t)t->n_obj, &created);
    if (idx == NONE) return CS_ENOMEM;
    if (created) {
        object_rec *o = &t->obj[t->n_obj++];
        o->name = name;
        o->birth = birth;
        o->whole = NONE;
        o->key_writes.n = 0;
        o->key_access.n = 0;
    }
    *out = idx;
    return CS_OK;
}

int cs_trace_step_end(cs_trace *t) {
    if (!t) return CS_EINVAL;
    if (!t->open) return CS_ESTATE;
    uint32_t me = (uint32_t)t->len;
    cs_actor actor = t->ev[me].actor;
    uint32_t first = t->ev[me].first_access, n_acc = t->ev[me].n_accesses;
    int64_t by = t->ev[me].scheduled_by;

    if (GROW(t->stamp, t->cap_stamp, (size_t)me + 1)) return CS_ENOMEM;
    if (GROW(t->refs, t->cap_refs, (size_t)n_acc + 1)) return CS_ENOMEM;
    if (++t->stamp_now == 0) {
        memset(t->stamp, 0, t->cap_stamp * sizeof *t->stamp);
        t->stamp_now = 1;
    }
    t->stamp[me] = t->stamp_now; /* never a candidate of itself */
    t->n_cand = 0;

    /* Resolve records first: creating records may move the arrays. */
    if (GROW(t->acc_obj, t->cap_acc_obj, (size_t)first + n_acc + 1)) return CS_ENOMEM;
    uint32_t created_rank = 0;
    for (uint32_t i = 0; i < n_acc; i++) {
        const cs_access *a = &t->acc[first + i];
        uint8_t flags = t->acc_flags[first + i];
        uint32_t o, r, birth;
        uint64_t name = object_name(a->object, flags, actor, t->ev[me].actor_step,
                                    created_rank, me, i, &birth);
        if (flags & CS_ID_CREATED) created_rank++;
        if (object_of(t, a->object, name, birth, &o)) return CS_ENOMEM;
        t->acc_obj[first + i] = o;
        if (resource_of(t, a->object, a->key, &r)) return CS_ENOMEM;
        if (a->key == CS_KEY_WHOLE) t->obj[o].whole = r;
        t->refs[i] = (acc_ref){o, r};
    }

    /* Candidates, from the state before this step. */
    if (cand_add(t, t->last_ev[actor])) return CS_ENOMEM;
    if (by >= 0 && cand_add(t, (uint32_t)by)) return CS_ENOMEM;
    if (by == CS_AFTER_ALL)
        for (size_t a = 0; a < t->width; a++)
            if (cand_add(t, t->last_ev[a])) return CS_ENOMEM;
    for (uint32_t i = 0; i < n_acc; i++) {
        const cs_access *a = &t->acc[first + i];
        const object_rec *o = &t->obj[t->refs[i].obj];
        const resource *r = &t->res[t->refs[i].res];
        const resource *w = o->whole != NONE ? &t->res[o->whole] : NULL;
        bool write = a->kind != CS_READ;
        int rc = CS_OK;
        if (a->key == CS_KEY_WHOLE) {
            rc |= cand_add(t, r->last_write);
            if (write) {
                rc |= cand_list(t, &r->reads);
                rc |= cand_list(t, &o->key_access);
            } else {
                rc |= cand_list(t, &o->key_writes);
            }
        } else {
            rc |= cand_add(t, r->last_write);
            if (w) rc |= cand_add(t, w->last_write);
            if (write) {
                rc |= cand_list(t, &r->reads);
                if (w) rc |= cand_list(t, &w->reads);
            }
        }
        if (rc) return CS_ENOMEM;
    }

    /* The clock: join of the candidates, then tick. */
    size_t width = t->width;
    if (GROW(t->clocks, t->cap_clk, t->n_clk + width)) return CS_ENOMEM;
    if (GROW(t->preds, t->cap_pred, t->n_pred + t->n_cand)) return CS_ENOMEM;
    uint32_t *clk = t->clocks + t->n_clk;
    memset(clk, 0, width * sizeof *clk);
    for (size_t i = 0; i < t->n_cand; i++) {
        const event *c = &t->ev[t->cand[i]];
        const uint32_t *cc = t->clocks + c->clock_off;
        for (uint32_t a = 0; a < c->clock_len; a++)
            if (cc[a] > clk[a]) clk[a] = cc[a];
    }
    clk[actor] = t->ev[me].actor_step + 1;

    /* Immediate predecessors: candidates that precede no other candidate. */
    uint32_t n_preds = 0;
    for (size_t i = 0; i < t->n_cand; i++) {
        uint32_t c = t->cand[i];
        bool covered = false;
        for (size_t j = 0; j < t->n_cand && !covered; j++)
            if (j != i && hb_idx(t, c, t->cand[j])) covered = true;
        if (!covered) t->preds[t->n_pred + n_preds++] = c;
    }

    /* Update the per-resource state, in access order. */
    for (uint32_t i = 0; i < n_acc; i++) {
        const cs_access *a = &t->acc[first + i];
        object_rec *o = &t->obj[t->refs[i].obj];
        resource *r = &t->res[t->refs[i].res];
        int rc = CS_OK;
        if (a->key == CS_KEY_WHOLE) {
            if (a->kind != CS_READ) {
                r->last_write = me;
                r->reads.n = 0;
                o->key_writes.n = 0;
                o->key_access.n = 0;
            } else {
                rc |= list_put(&r->reads, actor, me);
            }
        } else {
            if (a->kind != CS_READ) {
                r->last_write = me;
                r->reads.n = 0;
                rc |= list_put(&o->key_writes, actor, me);
            } else {
                rc |= list_put(&r->reads, actor, me);
            }
            rc |= list_put(&o->key_access, actor, me);
        }
        if (rc) return CS_ENOMEM;
    }

    event *e = &t->ev[me];
    e->clock_off = (uint32_t)t->n_clk;
    e->clock_len = (uint32_t)width;
    e->pred_off = (uint32_t)t->n_pred;
    e->n_preds = n_preds;
    t->n_clk += width;
    t->n_pred += n_preds;
    t->last_ev[actor] = me;
    t->n_steps[actor]++;
    t->len++;
    t->open = false;
    return CS_OK;
}

bool cs_trace_step_open(const cs_trace *t) { return t && t->open; }
size_t cs_trace_len(const cs_trace *t) { return t ? t->len : 0; }

/* ------------------------------------------------------------ queries */

int cs_trace_get_event(const cs_trace *t, size_t index, cs_event *out) {
    if (!t || !out || index >= t->len) return CS_EINVAL;
    const event *e = &t->ev[index];
    out->actor = e->actor;
    out->actor_step = e->actor_step;
    out->scheduled_by = e->scheduled_by;
    out->first_access = e->first_access;
    out->n_accesses = e->n_accesses;
    return CS_OK;
}

int cs_trace_object_name(const cs_trace *t, size_t access_index, uint64_t *name,
                         uint32_t *birth) {
    if (!t || !name || !birth || access_index >= t->n_acc) return CS_EINVAL;
    /* accesses of the open step are resolved only when it ends */
    if (t->open && access_index >= t->ev[t->len].first_access) return CS_ESTATE;
    *name = t->obj[t->acc_obj[access_index]].name;
    *birth = t->obj[t->acc_obj[access_index]].birth;
    return CS_OK;
}

int cs_trace_get_access(const cs_trace *t, size_t index, cs_access *out) {
    if (!t || !out || index >= t->n_acc) return CS_EINVAL;
    *out = t->acc[index];
    return CS_OK;
}

int cs_trace_get_clock(const cs_trace *t, size_t index, const uint32_t **clock,
                       size_t *len) {
    if (!t || !clock || !len || index >= t->len) return CS_EINVAL;
    *clock = t->clocks + t->ev[index].clock_off;
    *len = t->ev[index].clock_len;
    return CS_OK;
}

bool cs_trace_hb(const cs_trace *t, size_t a, size_t b) {
    if (!t || a >= t->len || b >= t->len) return false;
    return hb_idx(t, (uint32_t)a, (uint32_t)b);
}

static bool overlap(const cs_access *x, const cs_access *y) {
    if (x->object != y->object) return false;
    if (x->kind == CS_READ && y->kind == CS_READ) return false; /* lock ops are writes */
    return x->key == y->key || x->key == CS_KEY_WHOLE || y->key == CS_KEY_WHOLE;
}

bool cs_trace_dep(const cs_trace *t, size_t a, size_t b) {
    if (!t || a >= t->len || b >= t->len || a == b) return false;
    if (a > b) {
        size_t x = a;
        a = b;
        b = x;
    }
    const event *ea = &t->ev[a], *eb = &t->ev[b];
    if (ea->actor == eb->actor) return true;
    if (eb->scheduled_by == (int64_t)a || eb->scheduled_by == CS_AFTER_ALL) return true;
    for (uint32_t i = 0; i < ea->n_accesses; i++)
        for (uint32_t j = 0; j < eb->n_accesses; j++)
            if (overlap(&t->acc[ea->first_access + i], &t->acc[eb->first_access + j]))
                return true;
    return false;
}

int cs_trace_preds(const cs_trace *t, size_t index, size_t *out, size_t cap,
                   size_t *n) {
    if (!t || !n || index >= t->len || (cap && !out)) return CS_EINVAL;
    const event *e = &t->ev[index];
    *n = e->n_preds;
    for (uint32_t i = 0; i < e->n_preds && i < cap; i++) out[i] = t->preds[e->pred_off + i];
    return CS_OK;
}

/* --------------------------------------------------------- fingerprint */

/* Canonical form: the linearisation that always runs the ready event of the
 * smallest actor id first (ready = all immediate predecessors done).  Each
 * event is hashed with its actor, actor_step, accesses and the identities
 * (actor, actor_step) of its immediate predecessors, so the hash describes the
 * labelled partial order itself: equal iff the executions are equivalent
 * (modulo collisions), including CS_AFTER_ALL edges that a sequence alone
 * would not show. */
static uint64_t event_hash(const cs_trace *t, uint32_t i) {
    const event *e = &t->ev[i];
    uint64_t h = cs_mix64(((uint64_t)e->actor << 32 | e->actor_step) + 0x51ed27);
    for (uint32_t k = 0; k < e->n_accesses; k++) {
        /* Objects enter by their execution-independent name only where it has
         * one (stable or created ids); an address would make every execution
         * distinct, and the labelled partial order already decides
         * equivalence. */
        const cs_access *a = &t->acc[e->first_access + k];
        const object_rec *o = &t->obj[t->acc_obj[e->first_access + k]];
        h = cs_mix64(h ^ cs_mix64((o->birth ? 0 : o->name) + 0x1234567));
        h = cs_mix64(h ^ cs_mix64(a->key ^ 0xabcdef));
        h = cs_mix64(h ^ a->kind);
    }
    uint64_t ps = 0; /* commutative over the predecessor set */
    for (uint32_t k = 0; k < e->n_preds; k++) {
        const event *p = &t->ev[t->preds[e->pred_off + k]];
        ps += cs_mix64(((uint64_t)p->actor << 32 | p->actor_step) ^ 0x7f4a7c15ULL);
    }
    return cs_mix64(h ^ cs_mix64(ps + e->n_preds));
}

uint64_t cs_trace_fingerprint(const cs_trace *t) {
    if (!t || t->len == 0) return 0x6a09e667f3bcc908ULL;
    size_t n = t->len;
    uint32_t *indeg = calloc(n, sizeof *indeg);
    uint32_t *succ_off = calloc(n + 1, sizeof *succ_off);
    uint32_t *succ = malloc((t->n_pred ? t->n_pred : 1) * sizeof *succ);
    uint32_t *heap = malloc(n * sizeof *heap);
    uint64_t h = 0xcbf29ce484222325ULL;
    if (!indeg || !succ_off || !succ || !heap) {
        /* degrade to the plain sequence hash: still deterministic */
        for (size_t i = 0; i < n; i++) h = cs_mix64(h ^ event_hash(t, (uint32_t)i));
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        const event *e = &t->ev[i];
        indeg[i] = e->n_preds;
        for (uint32_t k = 0; k < e->n_preds; k++) succ_off[t->preds[e->pred_off + k] + 1]++;
    }
    for (size_t i = 0; i < n; i++) succ_off[i + 1] += succ_off[i];
    {
        uint32_t *fill = calloc(n, sizeof *fill);
        if (!fill) {
            for (size_t i = 0; i < n; i++) h = cs_mix64(h ^ event_hash(t, (uint32_t)i));
            goto done;
        }
        for (size_t i = 0; i < n; i++) {
            const event *e = &t->ev[i];
            for (uint32_t k = 0; k < e->n_preds; k++) {
                uint32_t p = t->preds[e->pred_off + k];
                succ[succ_off[p] + fill[p]++] = (uint32_t)i;
            }
        }
        free(fill);
    }
    /* binary min-heap of ready events keyed by actor id (at most one ready
     * event per actor: an actor's later step waits for its earlier one) */
    size_t hn = 0;
#define HKEY(x) (t->ev[(x)].actor)
#define HPUSH(x)                                                             \
    do {                                                                     \
        size_t c_ = hn++;                                                    \
        heap[c_] = (x);                                                      \
        while (c_ > 0 && HKEY(heap[(c_ - 1) / 2]) > HKEY(heap[c_])) {        \
            uint32_t tmp_ = heap[c_];                                        \
            heap[c_] = heap[(c_ - 1) / 2];                                   \
            heap[(c_ - 1) / 2] = tmp_;                                       \
            c_ = (c_ - 1) / 2;                                               \
        }                                                                    \
    } while (0)
    for (size_t i = 0; i < n; i++)
        if (indeg[i] == 0) HPUSH((uint32_t)i);
    size_t done_n = 0;
    while (hn > 0) {
        uint32_t x = heap[0];
        heap[0] = heap[--hn];
        for (size_t c = 0;;) {
            size_t l = 2 * c + 1, r = l + 1, m = c;
            if (l < hn && HKEY(heap[l]) < HKEY(heap[m])) m = l;
            if (r < hn && HKEY(heap[r]) < HKEY(heap[m])) m = r;
            if (m == c) break;
            uint32_t tmp = heap[c];
            heap[c] = heap[m];
            heap[m] = tmp;
            c = m;
        }
        h = cs_mix64(h ^ event_hash(t, x)) + (uint64_t)done_n++;
        for (uint32_t k = succ_off[x]; k < succ_off[x + 1]; k++)
            if (--indeg[succ[k]] == 0) HPUSH(succ[k]);
    }
#undef HPUSH
#undef HKEY
done:
    free(indeg);
    free(succ_off);
    free(succ);
    free(heap);
    return h;
}
