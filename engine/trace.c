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
 *   - b.scheduled_by == CS_AFTER_ALL and a precedes b's barrier: the point
 *     where b became runnable (a clock advance, or the front end's own action
 *     between steps) follows every event before it.  The barrier is the
 *     prefix given to cs__trace_step_begin_after, else the latest
 *     cs__trace_barrier before b, or b itself when there was none;
 *   - conflicting accesses: resources (object, key) overlap (same object and
 *     same key, or either key is CS_KEY_WHOLE, or either object is
 *     CS_OBJECT_ALL, the global barrier) and at least one is a write (lock
 *     acquisitions and releases count as writes).
 * HB is the transitive closure of dependency restricted to a < b.
 *
 * Vector clocks are indexed by CHAINS, not actors.  A chain is a sequence of
 * events totally ordered by HB; every event belongs to exactly one chain, at
 * position pos(e) >= 1.  clock(e)[c] is the number of events of chain c that
 * happen before or equal e (0 for a chain e does not follow), so
 *   a happens before b  iff  a < b and clock(b)[chain(a)] >= pos(a).
 * An actor's steps are not one chain: in asyncio every non-task callback is
 * an actor of one step, and a ping-pong of callbacks, each scheduled by the
 * previous one, is a single chain where actor-indexed clocks would be as wide
 * as the run is long.
 *
 * Chain of a new event e, first rule that applies (tie-break, deterministic):
 *   1. the chain of its actor's previous event, if that event is its chain's
 *      tip (it happens before e by program order);
 *   2. the chain of the lowest-index immediate predecessor that is a tip;
 *   3. a new chain.
 * Each choice keeps every chain totally ordered by HB, which is all the HB
 * test needs.  The number of chains only sets the depth of the clocks' tries
 * (below): what a clock costs is the causality it records, not the width.
 *
 * Clock representation: persistent tries with sharing.  A clock is a trie of
 * 16-entry nodes over the chain index (height h covers chains [0, 16^h); a
 * missing subtree, node 0, is all zeros), kept in one node pool per trace.
 * Clocks are immutable once their event has ended, so a new clock shares
 * every subtree it does not change with the clocks it was joined from: an
 * event's clock costs O(depth) new nodes for its own tick plus, for a join,
 * the nodes on the paths where its candidates' clocks differ (a subtree equal
 * in both, or zero in one, is taken as a pointer).  Nodes allocated while the
 * open step builds its clock (index >= the step's mark) are its own and are
 * updated in place.  N tasks that share nothing cost O(N) clock memory where
 * dense clocks cost O(N^2).  The actor-indexed clock of the public
 * API (cs__trace_get_clock) is materialised on demand: clock[a] = 1 + the
 * actor_step of a's last event that happens before or equals e, found by
 * binary search over a's events (HB-closed sets are prefixes of an actor's
 * program order).
 *
 * Clocks are computed FastTrack-style, never by scanning the trace: for every
 * resource we keep its last write and, per actor, the last read since that
 * write; for every object we keep, per actor, the last key write and the last
 * key access since the object's last whole-object write.  Every earlier event
 * that b depends on either is one of these *candidates* or happens before one
 * of them, so joining the candidates' clocks gives the exact clock, and the
 * candidates that precede no other candidate are exactly the immediate
 * predecessors.  The global barrier (object CS_OBJECT_ALL) has state of its
 * own: its last write, per actor its last read since that write, and per
 * actor the last event with any access / with a write since that write.  A
 * barrier write's candidates are the last barrier write and every actor's
 * last accessing event since (each earlier accessing event of that actor
 * precedes it in program order, and every accessing event before the last
 * barrier write happens before that write); a barrier read's are the last
 * barrier write and every actor's last writing event since; every access
 * takes the last barrier write, and every write the barrier reads since it.
 * CS_AFTER_ALL takes the maximal events as they were at its barrier as
 * candidates (the trace keeps the set of maximal events, the events no
 * later event has as an immediate predecessor: every event before the
 * barrier happens before or equals one of them; for a barrier other than the
 * latest one they are recomputed from the immediate predecessors of the
 * events before it, see prefix_tips).  They are taken in (actor,
 * event) order, which keeps the order of the predecessors list the same as
 * taking every actor's last event in actor order (each actor has at most one
 * maximal event: its last).
 *
 * Immediate predecessors: the candidates are joined in decreasing event
 * order; a candidate c is covered (happens before another candidate, which
 * can only be a later one) iff the join of the candidates after it has
 * c's chain at >= pos(c).  They are listed in candidate order.
 *
 * Memory is kept across cs__trace_reset (hash tables are invalidated by a
 * generation stamp) and grows with the length of an execution only.
 *
 * Bounds: events and accesses are indexed by uint32_t (NONE = UINT32_MAX is
 * the "no event" mark): step_begin and access_add refuse (CS_ENOMEM) past
 * UINT32_MAX - 2, so every index, count of resources/objects (at most one
 * per access) and chain number (at most one per event) fits.  The pools
 * that can grow faster than the event count (immediate predecessors) are
 * addressed by size_t offsets; the clock node pool by uint32_t (CS_ENOMEM
 * past UINT32_MAX - 1 nodes).
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX

typedef struct {
    cs_actor actor;
    uint32_t event;
} act_ev;

/* A list holding at most one entry per actor, in order of first insertion
 * since it was last emptied (that order is the order of candidates, hence of
 * the predecessors list).  Past LIST_SCAN entries an open-addressing index
 * actor -> position finds the entry in O(1): with one-step actors (asyncio
 * callbacks) such lists grow with the run.  The index is valid iff
 * hn == n >= LIST_SCAN; list_clear makes it stale (hn = 0), and it is
 * rebuilt, sized to the list, when the list reaches LIST_SCAN again. */
typedef struct {
    act_ev *v;
    uint32_t n, cap;
    uint32_t *h; /* positions in v, NONE = empty slot */
    uint32_t hn, hcap;
} act_list;

#define LIST_SCAN 8

/* Up to this many candidates, immediate predecessors are found pairwise. */
#define PAIRWISE_CANDS 8

typedef struct {
    uint32_t last_write; /* event index or NONE */
    act_list reads;      /* per actor: last read since last_write */
    act_list adds;       /* per actor: last CS_ADD since last_write (keyed only) */
} resource;

typedef struct {
    cs__objname name;     /* see cs__trace_object_name */
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
    uint64_t note;                 /* cs__trace_note's mix; 0: none */
    uint32_t clock;                /* root node of its clock trie, 0 = empty */
    uint8_t clock_h;               /* the trie's height (chains < 16^h) */
    uint32_t chain, chain_pos;     /* chain_pos >= 1 */
    uint32_t awidth;               /* actors interned when the step ended */
    uint32_t barrier;              /* CS_AFTER_ALL: follows events [0, barrier) */
    size_t pred_off;               /* into the predecessor pool */
    uint32_t n_preds;
} event;

typedef struct {
    uint32_t tip; /* last event of the chain */
    uint32_t len; /* events in the chain = chain_pos of its tip */
} chain_rec;

/* A clock trie node: 16 child node indices (inner levels) or 16 clock
 * entries (leaves), one cache line. */
#define CBITS 4
#define CFAN (1u << CBITS)
#define CMAXH 8 /* 16^8 = 2^32 chains */
typedef struct {
    uint32_t v[CFAN];
} cnode;

/* Per-access scratch: the object record and the resource record. */
typedef struct acc_ref {
    uint32_t obj, res;
} acc_ref;

struct cs__trace {
    event *ev;
    size_t len, cap;
    bool open;

    cs_access *acc;
    size_t n_acc, cap_acc;
    uint32_t *acc_obj; /* per access: its object record (set at step end) */
    size_t cap_acc_obj;
    uint8_t *acc_flags; /* per access: CS_ID_* flags given with it */
    size_t cap_acc_flags;

    cnode *nodes; /* pool of clock trie nodes; node 0 is the zero subtree */
    size_t n_nodes, cap_nodes;

    chain_rec *chains; /* valid below n_chain */
    size_t n_chain, cap_chain;
    uint64_t *tip_keys; /* the maximal events at the latest barrier, sorted
                           by actor << 32 | event: CS_AFTER_ALL's candidates */
    size_t n_tip_keys, cap_tip_keys;
    /* the maximal events so far (no later event has them as an immediate
     * predecessor), in no order; max_at[e] = e's position in it or NONE */
    uint32_t *maxset;
    size_t n_max, cap_max;
    uint32_t *max_at;
    size_t cap_max_at;
    bool has_barrier;
    uint32_t barrier_len; /* events before the latest barrier */
    /* the maximal events of the prefix [0, pfx_len), sorted like tip_keys:
     * the candidates of a CS_AFTER_ALL step whose barrier is neither the
     * latest one nor the step itself (valid iff pfx_ok; a prefix never
     * changes within an execution, so it stays valid until the reset) */
    uint64_t *pfx_keys;
    size_t n_pfx_keys, cap_pfx_keys;
    uint32_t pfx_len;
    bool pfx_ok;
    uint8_t *pfx_mark; /* prefix_tips scratch: per event, an immediate predecessor */
    size_t cap_pfx_mark;
    uint64_t *order; /* step_end scratch: candidates by decreasing event */
    size_t cap_order;
    bool *covered;   /* step_end scratch: per candidate */
    size_t cap_covered;

    uint32_t *preds; /* pool: immediate predecessors */
    size_t n_pred, cap_pred;

    /* per actor (index = actor id), valid below width */
    uint32_t *last_ev;  /* last event of the actor, NONE if none */
    uint32_t *n_steps;  /* steps taken so far */
    size_t width, cap_actor;

    uint32_t *work; /* cs__trace_get_clock's result, cap_actor entries */

    /* cs__trace_get_clock's index of each actor's events, built on demand for
     * the first idx_len events (idx_len = SIZE_MAX: stale) */
    uint32_t *by_actor_off; /* actor a's events: by_actor[off[a] .. off[a+1]) */
    size_t cap_by_actor_off;
    uint32_t *by_actor;
    size_t cap_by_actor, idx_len;

    /* candidates of the open step, dedup'd by stamp[event] == stamp_now */
    uint32_t *cand;
    size_t n_cand, cap_cand;
    uint32_t *stamp; /* per event */
    size_t cap_stamp;
    uint32_t stamp_now;
    acc_ref *refs; /* per access of the open step */
    size_t cap_refs;

    /* the global barrier (CS_OBJECT_ALL): see the header comment */
    uint32_t all_write;   /* last event with a barrier write, NONE if none */
    act_list all_reads;   /* per actor: last barrier read since all_write */
    /* per actor (index = actor id, valid below width): its last event with
     * an access / with a write, NONE if none; an entry counts for the
     * barrier only when it is after all_write (earlier ones happen before
     * all_write).  Arrays, not lists: every access updates them in O(1).
     * touched_acc / touched_wr list the actors whose entry went past
     * all_write since it was set (each actor once, in first-touch order), so
     * a barrier access scans only the actors active since the last barrier
     * write, not every actor of the run. */
    uint32_t *last_acc, *last_wr;
    cs_actor *touched_acc, *touched_wr;
    size_t n_touched_acc, n_touched_wr;

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

static size_t actor_hash(cs_actor actor) { return (size_t)cs__mix64(actor + 0x2545f491ULL); }

/* Rebuilds the index of l for n + 1 entries. */
static int list_index(act_list *l) {
    uint32_t hcap = 64;
    while (hcap < 4 * (l->n + 1)) hcap *= 2;
    if (hcap != l->hcap) {
        uint32_t *nh = realloc(l->h, hcap * sizeof *nh);
        if (!nh) return CS_ENOMEM;
        l->h = nh;
        l->hcap = hcap;
    }
    memset(l->h, 0xff, hcap * sizeof *l->h);
    for (uint32_t i = 0; i < l->n; i++) {
        size_t j = actor_hash(l->v[i].actor) & (hcap - 1);
        while (l->h[j] != NONE) j = (j + 1) & (hcap - 1);
        l->h[j] = i;
    }
    l->hn = l->n;
    return CS_OK;
}

static void list_clear(act_list *l) {
    l->n = 0;
    l->hn = 0; /* stale: the list reaches LIST_SCAN again before it is used */
}

static int list_put(act_list *l, cs_actor actor, uint32_t e) {
    size_t slot_j = 0;
    if (l->n < LIST_SCAN) {
        for (uint32_t i = 0; i < l->n; i++)
            if (l->v[i].actor == actor) {
                l->v[i].event = e;
                return CS_OK;
            }
    } else {
        if ((l->hn != l->n || 2 * (l->n + 1) > l->hcap) && list_index(l)) return CS_ENOMEM;
        size_t mask = l->hcap - 1;
        size_t j = actor_hash(actor) & mask;
        for (; l->h[j] != NONE; j = (j + 1) & mask)
            if (l->v[l->h[j]].actor == actor) {
                l->v[l->h[j]].event = e;
                return CS_OK;
            }
        slot_j = j;
    }
    if (l->n == l->cap) {
        uint32_t ncap = l->cap ? l->cap * 2 : 4;
        act_ev *nv = realloc(l->v, ncap * sizeof *nv);
        if (!nv) return CS_ENOMEM;
        l->v = nv;
        l->cap = ncap;
    }
    if (l->n >= LIST_SCAN) {
        l->h[slot_j] = l->n;
        l->hn = l->n + 1;
    }
    l->v[l->n++] = (act_ev){actor, e};
    return CS_OK;
}

static size_t slot_hash(uint64_t object, uint64_t key) {
    return (size_t)cs__mix64(object * 0x9e3779b97f4a7c15ULL ^ cs__mix64(key));
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

/* ------------------------------------------------------- clock tries */

/* Entry c of the clock (root, h). */
static uint32_t trie_get_in(const cnode *nodes, uint32_t root, unsigned h, uint32_t c) {
    if (h < CMAXH && (c >> (CBITS * h)) != 0) return 0;
    uint32_t n = root;
    for (unsigned level = h; level > 0 && n; level--)
        n = nodes[n].v[(c >> (CBITS * (level - 1))) & (CFAN - 1)];
    return n;
}

static uint32_t trie_get(const cs__trace *t, uint32_t root, unsigned h, uint32_t c) {
    return trie_get_in(t->nodes, root, h, c);
}

/* A new node: a copy of node `of` (0: zeros).  May move t->nodes. */
static int node_new(cs__trace *t, uint32_t of, uint32_t *out) {
    if (t->n_nodes >= NONE - 1) return CS_ENOMEM;
    if (GROW(t->nodes, t->cap_nodes, t->n_nodes + 1)) return CS_ENOMEM;
    uint32_t n = (uint32_t)t->n_nodes++;
    if (of)
        t->nodes[n] = t->nodes[of];
    else
        memset(&t->nodes[n], 0, sizeof t->nodes[n]);
    *out = n;
    return CS_OK;
}

/* The join of subtrees d and s, both of height `level`, as *out: d itself
 * when s adds nothing, s itself when it dominates d, else a node of the open
 * step (index >= mark: updated in place, else copied first). */
static int join_node(cs__trace *t, uint32_t d, uint32_t s, unsigned level, uint32_t mark,
                     uint32_t *out) {
    if (!s || d == s) {
        *out = d;
        return CS_OK;
    }
    if (!d) {
        *out = s;
        return CS_OK;
    }
    if (level == 1) {
        const uint32_t *dv = t->nodes[d].v, *sv = t->nodes[s].v;
        bool d_ge = true, s_ge = true;
        for (unsigned i = 0; i < CFAN; i++) {
            if (dv[i] < sv[i]) d_ge = false;
            if (sv[i] < dv[i]) s_ge = false;
        }
        if (d_ge) {
            *out = d;
            return CS_OK;
        }
        if (s_ge) {
            *out = s;
            return CS_OK;
        }
        uint32_t n = d;
        if (n < mark && node_new(t, d, &n)) return CS_ENOMEM;
        for (unsigned i = 0; i < CFAN; i++)
            if (t->nodes[s].v[i] > t->nodes[n].v[i]) t->nodes[n].v[i] = t->nodes[s].v[i];
        *out = n;
        return CS_OK;
    }
    uint32_t n = d;
    bool all_s = true; /* every child of the result is s's */
    for (unsigned i = 0; i < CFAN; i++) {
        uint32_t sc = t->nodes[s].v[i], dc = t->nodes[n].v[i], r;
        if (sc == dc) continue;
        if (!sc) {
            all_s = false;
            continue;
        }
        if (join_node(t, dc, sc, level - 1, mark, &r)) return CS_ENOMEM;
        if (r != sc) all_s = false;
        if (r == dc) continue;
        if (n < mark && node_new(t, n, &n)) return CS_ENOMEM;
        t->nodes[n].v[i] = r;
    }
    if (all_s) {
        /* s dominates: share it (a copy made here, if last, is given back) */
        if (n != d && n + 1 == t->n_nodes) t->n_nodes--;
        n = s;
    }
    *out = n;
    return CS_OK;
}

/* Joins the subtree s of height sh into d of height level >= sh, where s
 * covers d's chains [0, 16^sh), i.e. d's leftmost path. */
static int join_at(cs__trace *t, uint32_t d, unsigned level, uint32_t s, unsigned sh,
                   uint32_t mark, uint32_t *out) {
    if (level == sh) return join_node(t, d, s, level, mark, out);
    uint32_t dc = d ? t->nodes[d].v[0] : 0, r;
    if (join_at(t, dc, level - 1, s, sh, mark, &r)) return CS_ENOMEM;
    if (r == dc) {
        *out = d;
        return CS_OK;
    }
    uint32_t n = d;
    if (n < mark && node_new(t, d, &n)) return CS_ENOMEM;
    t->nodes[n].v[0] = r;
    *out = n;
    return CS_OK;
}

/* Raises the clock (*root, *h) to height h2 (a new root over the old one). */
static int trie_lift(cs__trace *t, uint32_t *root, uint8_t *h, unsigned h2) {
    while (*h < h2) {
        if (*root) {
            uint32_t n;
            if (node_new(t, 0, &n)) return CS_ENOMEM;
            t->nodes[n].v[0] = *root;
            *root = n;
        }
        (*h)++;
    }
    return CS_OK;
}

/* (*root, *h) := its join with (s, sh). */
static int trie_join(cs__trace *t, uint32_t *root, uint8_t *h, uint32_t s, uint8_t sh,
                     uint32_t mark) {
    if (!s) return CS_OK;
    if (!*root) {
        *root = s;
        *h = sh;
        return CS_OK;
    }
    if (trie_lift(t, root, h, sh)) return CS_ENOMEM;
    return join_at(t, *root, *h, s, sh, mark, root);
}

/* (*root, *h)[c] := v (nodes of the open step updated in place). */
static int trie_set(cs__trace *t, uint32_t *root, uint8_t *h, uint32_t c, uint32_t v,
                    uint32_t mark) {
    unsigned need = 1;
    while (need < CMAXH && (c >> (CBITS * need)) != 0) need++;
    if (trie_lift(t, root, h, need)) return CS_ENOMEM;
    uint32_t n = *root;
    if (n < mark && node_new(t, n, &n)) return CS_ENOMEM;
    *root = n;
    for (unsigned level = *h; level > 1; level--) {
        unsigned i = (c >> (CBITS * (level - 1))) & (CFAN - 1);
        uint32_t ch = t->nodes[n].v[i], nc = ch;
        if (nc < mark && node_new(t, ch, &nc)) return CS_ENOMEM;
        t->nodes[n].v[i] = nc;
        n = nc;
    }
    t->nodes[n].v[c & (CFAN - 1)] = v;
    return CS_OK;
}

static uint32_t clock_at(const cs__trace *t, uint32_t e, uint32_t chain) {
    const event *ev = &t->ev[e];
    return trie_get(t, ev->clock, ev->clock_h, chain);
}

/* a happens before b (both recorded events) */
static bool hb_idx(const cs__trace *t, uint32_t a, uint32_t b) {
    if (a >= b) return false;
    const event *ea = &t->ev[a], *eb = &t->ev[b];
    if (ea->chain == eb->chain) return true; /* a chain is totally ordered */
    return clock_at(t, b, ea->chain) >= ea->chain_pos;
}

/* --------------------------------------------------------- lifecycle */

int cs__trace_new(cs__trace **out) {
    if (!out) return CS_EINVAL;
    cs__trace *t = calloc(1, sizeof *t);
    if (!t) return CS_ENOMEM;
    t->gen = 1;
    t->idx_len = SIZE_MAX;
    t->all_write = NONE;
    uint32_t zero;
    if (node_new(t, 0, &zero)) {
        free(t);
        return CS_ENOMEM;
    }
    *out = t;
    return CS_OK;
}

void cs__trace_free(cs__trace *t) {
    if (!t) return;
    for (size_t i = 0; i < t->cap_res; i++) {
        free(t->res[i].reads.v);
        free(t->res[i].reads.h);
        free(t->res[i].adds.v);
        free(t->res[i].adds.h);
    }
    for (size_t i = 0; i < t->cap_obj; i++) {
        free(t->obj[i].key_writes.v);
        free(t->obj[i].key_writes.h);
        free(t->obj[i].key_access.v);
        free(t->obj[i].key_access.h);
    }
    free(t->res);
    free(t->obj);
    free(t->res_index.slots);
    free(t->obj_index.slots);
    free(t->ev);
    free(t->acc);
    free(t->acc_obj);
    free(t->acc_flags);
    free(t->nodes);
    free(t->maxset);
    free(t->max_at);
    free(t->order);
    free(t->covered);
    free(t->chains);
    free(t->tip_keys);
    free(t->pfx_keys);
    free(t->pfx_mark);
    free(t->by_actor_off);
    free(t->by_actor);
    free(t->preds);
    free(t->last_ev);
    free(t->n_steps);
    free(t->work);
    free(t->cand);
    free(t->stamp);
    free(t->refs);
    free(t->all_reads.v);
    free(t->all_reads.h);
    free(t->last_acc);
    free(t->last_wr);
    free(t->touched_acc);
    free(t->touched_wr);
    free(t);
}

void cs__trace_reset(cs__trace *t) {
    if (!t) return;
    t->len = 0;
    t->open = false;
    t->n_acc = 0;
    t->n_nodes = 1; /* node 0, the zero subtree, is never written */
    t->n_max = 0;
    t->n_chain = 0;
    t->has_barrier = false;
    t->n_tip_keys = 0;
    t->pfx_ok = false;
    t->idx_len = SIZE_MAX;
    t->n_pred = 0;
    for (size_t a = 0; a < t->width; a++) {
        t->last_ev[a] = NONE;
        t->n_steps[a] = 0;
        t->last_acc[a] = NONE;
        t->last_wr[a] = NONE;
    }
    t->width = 0;
    t->n_res = 0;
    t->n_obj = 0;
    t->all_write = NONE;
    list_clear(&t->all_reads);
    t->n_touched_acc = 0;
    t->n_touched_wr = 0;
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

/* Opens a step; `barrier` is the CS_AFTER_ALL step's (0 for any other). */
static int step_open(cs__trace *t, cs_actor actor, int64_t scheduled_by, uint32_t barrier);

int cs__trace_step_begin(cs__trace *t, cs_actor actor, int64_t scheduled_by) {
    if (!t || actor == CS_NO_ACTOR) return CS_EINVAL;
    if (t->open) return CS_ESTATE;
    if (scheduled_by < CS_AFTER_ALL || scheduled_by >= (int64_t)t->len) return CS_EINVAL;
    uint32_t barrier = 0;
    if (scheduled_by == CS_AFTER_ALL) barrier = t->has_barrier ? t->barrier_len : (uint32_t)t->len;
    return step_open(t, actor, scheduled_by, barrier);
}

int cs__trace_step_begin_after(cs__trace *t, cs_actor actor, size_t prefix) {
    if (!t || actor == CS_NO_ACTOR) return CS_EINVAL;
    if (t->open) return CS_ESTATE;
    if (prefix > t->len) return CS_EINVAL;
    return step_open(t, actor, CS_AFTER_ALL, (uint32_t)prefix);
}

static int step_open(cs__trace *t, cs_actor actor, int64_t scheduled_by, uint32_t barrier) {
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
            uint32_t *la = realloc(t->last_acc, ncap * sizeof *la);
            if (!la) return CS_ENOMEM;
            t->last_acc = la;
            uint32_t *lw = realloc(t->last_wr, ncap * sizeof *lw);
            if (!lw) return CS_ENOMEM;
            t->last_wr = lw;
            cs_actor *ta = realloc(t->touched_acc, ncap * sizeof *ta);
            if (!ta) return CS_ENOMEM;
            t->touched_acc = ta;
            cs_actor *tw = realloc(t->touched_wr, ncap * sizeof *tw);
            if (!tw) return CS_ENOMEM;
            t->touched_wr = tw;
            t->cap_actor = ncap;
        }
        for (size_t a = t->width; a < nw; a++) {
            t->last_ev[a] = NONE;
            t->n_steps[a] = 0;
            t->last_acc[a] = NONE;
            t->last_wr[a] = NONE;
        }
        t->width = nw;
    }
    event *e = &t->ev[t->len];
    memset(e, 0, sizeof *e);
    e->actor = actor;
    e->actor_step = t->n_steps[actor];
    e->scheduled_by = scheduled_by;
    e->barrier = barrier;
    e->first_access = (uint32_t)t->n_acc;
    e->n_accesses = 0;
    t->open = true;
    return CS_OK;
}

int cs__trace_access_add(cs__trace *t, uint64_t object, uint64_t key,
                        cs_access_kind kind, uint32_t site) {
    if (!t) return CS_EINVAL;
    if (!t->open) return CS_ESTATE;
    uint8_t flags = (uint8_t)((unsigned)kind & (CS_ID_STABLE | CS_ID_CREATED | CS_ENABLING));
    kind = (cs_access_kind)((unsigned)kind & CS_KIND_MASK);
    if (kind < CS_READ || kind > CS_ADD) return CS_EINVAL;
    if (kind == CS_ADD && (key == CS_KEY_WHOLE || object == CS_OBJECT_ALL)) return CS_EINVAL;
    if (t->n_acc >= NONE - 1) return CS_ENOMEM;
    if (GROW(t->acc, t->cap_acc, t->n_acc + 1)) return CS_ENOMEM;
    if (GROW(t->acc_flags, t->cap_acc_flags, t->n_acc + 1)) return CS_ENOMEM;
    t->acc_flags[t->n_acc] = flags;
    t->acc[t->n_acc++] = (cs_access){object, key, site, (uint8_t)kind};
    t->ev[t->len].n_accesses++;
    return CS_OK;
}

int cs__trace_step_accesses(const cs__trace *t, size_t *count) {
    if (!t || !count) return CS_EINVAL;
    if (!t->open) return CS_ESTATE;
    *count = t->ev[t->len].n_accesses;
    return CS_OK;
}

int cs__trace_step_rewind(cs__trace *t, size_t keep, cs_access_kind kind, int *dropped) {
    if (!t || !dropped) return CS_EINVAL;
    if (!t->open) return CS_ESTATE;
    *dropped = 0;
    size_t n = t->ev[t->len].n_accesses;
    if (keep > n) return CS_EINVAL;
    size_t first = t->n_acc - n + keep;
    for (size_t i = first; i < t->n_acc; i++) {
        int base = t->acc[i].kind;
        bool covered = !(t->acc_flags[i] & CS_ENABLING) &&
                       (base == CS_READ || (kind == CS_WRITE && (base == CS_WRITE || base == CS_ADD)));
        if (!covered) return CS_OK;
    }
    t->ev[t->len].n_accesses -= (uint32_t)(t->n_acc - first);
    t->n_acc = first;
    *dropped = 1;
    return CS_OK;
}

int cs__trace_note(cs__trace *t, uint64_t note) {
    if (!t) return CS_EINVAL;
    if (!t->open) return CS_ESTATE;
    event *e = &t->ev[t->len];
    /* order-sensitive: the mix of the notes so far is mixed again with each */
    e->note = cs__mix64(e->note ^ cs__mix64(note + 0x6e6f746573ULL)) | 1;
    return CS_OK;
}

static int cmp_u64(const void *x, const void *y) {
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

static int cand_add(cs__trace *t, uint32_t e) {
    if (e == NONE || t->stamp[e] == t->stamp_now) return CS_OK;
    if (GROW(t->cand, t->cap_cand, t->n_cand + 1)) return CS_ENOMEM;
    t->stamp[e] = t->stamp_now;
    t->cand[t->n_cand++] = e;
    return CS_OK;
}

static int cand_list(cs__trace *t, const act_list *l) {
    for (uint32_t i = 0; i < l->n; i++)
        if (cand_add(t, l->v[i].event)) return CS_ENOMEM;
    return CS_OK;
}

/* Looks up (or creates) the resource record of (object, key). */
static int resource_of(cs__trace *t, uint64_t object, uint64_t key, uint32_t *out) {
    size_t old = t->cap_res;
    if (GROW(t->res, t->cap_res, t->n_res + 1)) return CS_ENOMEM;
    for (size_t i = old; i < t->cap_res; i++) memset(&t->res[i], 0, sizeof t->res[i]);
    bool created;
    uint32_t idx = table_find(&t->res_index, t->gen, object, key, (uint32_t)t->n_res, &created);
    if (idx == NONE) return CS_ENOMEM;
    if (created) {
        resource *r = &t->res[t->n_res++];
        r->last_write = NONE;
        list_clear(&r->reads);
        list_clear(&r->adds);
    }
    *out = idx;
    return CS_OK;
}

/* Names for other executions (cs__trace_object_name): a family and two
 * fields that hold the naming data whole (nothing is hashed or masked), so
 * two different objects never share a name within an execution.  The
 * barrier CS_OBJECT_ALL is always named as stable, whatever the flags: it
 * is the same "object" in every execution, never an address. */
static cs__objname object_name(uint64_t object, uint8_t flags, cs_actor actor,
                               uint32_t actor_step, uint32_t created_rank,
                               uint32_t event, uint32_t access, uint32_t *birth) {
    *birth = 0;
    if (object == CS_OBJECT_ALL || (flags & CS_ID_STABLE))
        return (cs__objname){object, 0, CS__NAME_STABLE};
    if (flags & CS_ID_CREATED)
        return (cs__objname){(uint64_t)actor << 32 | actor_step, created_rank,
                             CS__NAME_CREATED};
    *birth = event + 1;
    return (cs__objname){event, access, CS__NAME_BIRTH};
}

static int object_of(cs__trace *t, uint64_t object, cs__objname name, uint32_t birth,
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
        list_clear(&o->key_writes);
        list_clear(&o->key_access);
    }
    *out = idx;
    return CS_OK;
}

/* The current maximal events, sorted by (actor, event), into tip_keys. */
static int snapshot_tips(cs__trace *t) {
    if (GROW(t->tip_keys, t->cap_tip_keys, t->n_max + 1)) return CS_ENOMEM;
    for (size_t i = 0; i < t->n_max; i++)
        t->tip_keys[i] = (uint64_t)t->ev[t->maxset[i]].actor << 32 | t->maxset[i];
    qsort(t->tip_keys, t->n_max, sizeof *t->tip_keys, cmp_u64);
    t->n_tip_keys = t->n_max;
    return CS_OK;
}

/* The maximal events of the prefix [0, p) of the trace, sorted by (actor,
 * event): into *keys / *n (tip_keys when p is the latest barrier, else the
 * pfx_keys buffer).  p == the open step's index: the current maximal set.
 * An earlier prefix: an event before p is maximal in it iff no event before
 * p has it as an immediate predecessor (a happens-before path from it to an
 * event f < p runs through events <= f, the first step of which lists it). */
static int prefix_tips(cs__trace *t, uint32_t p, const uint64_t **keys, size_t *n) {
    if (t->has_barrier && p == t->barrier_len) {
        *keys = t->tip_keys;
        *n = t->n_tip_keys;
        return CS_OK;
    }
    if (t->pfx_ok && t->pfx_len == p) {
        /* cached: a prefix never changes within an execution */
    } else if (p == t->len) {
        if (GROW(t->pfx_keys, t->cap_pfx_keys, t->n_max + 1)) return CS_ENOMEM;
        for (size_t i = 0; i < t->n_max; i++)
            t->pfx_keys[i] = (uint64_t)t->ev[t->maxset[i]].actor << 32 | t->maxset[i];
        qsort(t->pfx_keys, t->n_max, sizeof *t->pfx_keys, cmp_u64);
        t->n_pfx_keys = t->n_max;
        t->pfx_len = p;
        t->pfx_ok = true;
    } else {
        if (GROW(t->pfx_mark, t->cap_pfx_mark, (size_t)p + 1)) return CS_ENOMEM;
        memset(t->pfx_mark, 0, (size_t)p);
        for (uint32_t f = 0; f < p; f++) {
            const event *ef = &t->ev[f];
            for (uint32_t q = 0; q < ef->n_preds; q++) t->pfx_mark[t->preds[ef->pred_off + q]] = 1;
        }
        size_t m = 0;
        for (uint32_t e = 0; e < p; e++) m += !t->pfx_mark[e];
        if (GROW(t->pfx_keys, t->cap_pfx_keys, m + 1)) return CS_ENOMEM;
        m = 0;
        for (uint32_t e = 0; e < p; e++)
            if (!t->pfx_mark[e]) t->pfx_keys[m++] = (uint64_t)t->ev[e].actor << 32 | e;
        qsort(t->pfx_keys, m, sizeof *t->pfx_keys, cmp_u64);
        t->n_pfx_keys = m;
        t->pfx_len = p;
        t->pfx_ok = true;
    }
    *keys = t->pfx_keys;
    *n = t->n_pfx_keys;
    return CS_OK;
}

int cs__trace_barrier(cs__trace *t) {
    if (!t) return CS_EINVAL;
    if (t->open) return CS_ESTATE;
    if (snapshot_tips(t)) return CS_ENOMEM;
    t->has_barrier = true;
    t->barrier_len = (uint32_t)t->len;
    return CS_OK;
}

size_t cs__trace_barrier_of(const cs__trace *t, size_t index) {
    if (!t || index >= t->len || t->ev[index].scheduled_by != CS_AFTER_ALL) return 0;
    return t->ev[index].barrier;
}

int cs__trace_step_end(cs__trace *t) {
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
        uint32_t o, r = NONE, birth;
        bool all = a->object == CS_OBJECT_ALL;
        cs__objname name = object_name(a->object, flags, actor, t->ev[me].actor_step,
                                       created_rank, me, i, &birth);
        if ((flags & CS_ID_CREATED) && !all) created_rank++;
        if (object_of(t, a->object, name, birth, &o)) return CS_ENOMEM;
        t->acc_obj[first + i] = o;
        /* the barrier has no resource records: its state is t->all_* */
        if (!all) {
            if (resource_of(t, a->object, a->key, &r)) return CS_ENOMEM;
            if (a->key == CS_KEY_WHOLE) t->obj[o].whole = r;
        }
        t->refs[i] = (acc_ref){o, r};
    }

    /* Candidates, from the state before this step. */
    if (cand_add(t, t->last_ev[actor])) return CS_ENOMEM;
    if (by >= 0 && cand_add(t, (uint32_t)by)) return CS_ENOMEM;
    if (by == CS_AFTER_ALL) {
        const uint64_t *keys;
        size_t nk;
        if (prefix_tips(t, t->ev[me].barrier, &keys, &nk)) return CS_ENOMEM;
        for (size_t c = 0; c < nk; c++)
            if (cand_add(t, (uint32_t)keys[c])) return CS_ENOMEM;
    }
    for (uint32_t i = 0; i < n_acc; i++) {
        const cs_access *a = &t->acc[first + i];
        bool write = a->kind != CS_READ;
        int rc = cand_add(t, t->all_write); /* every access follows it */
        if (a->object == CS_OBJECT_ALL) {
            /* every actor's last accessing (writing) event since all_write,
             * in first-touch order */
            const uint32_t *last = write ? t->last_acc : t->last_wr;
            const cs_actor *who = write ? t->touched_acc : t->touched_wr;
            size_t n_who = write ? t->n_touched_acc : t->n_touched_wr;
            for (size_t x = 0; x < n_who; x++) {
                uint32_t e = last[who[x]];
                if (t->all_write == NONE || e > t->all_write) rc |= cand_add(t, e);
            }
            if (rc) return CS_ENOMEM;
            continue;
        }
        if (write) rc |= cand_list(t, &t->all_reads);
        const object_rec *o = &t->obj[t->refs[i].obj];
        const resource *r = &t->res[t->refs[i].res];
        const resource *w = o->whole != NONE ? &t->res[o->whole] : NULL;
        if (a->key == CS_KEY_WHOLE) {
            rc |= cand_add(t, r->last_write);
            if (write) {
                rc |= cand_list(t, &r->reads);
                rc |= cand_list(t, &o->key_access);
            } else {
                rc |= cand_list(t, &o->key_writes);
            }
        } else {
            /* an add follows the reads, a read the adds, a write both;
             * adds do not follow each other */
            rc |= cand_add(t, r->last_write);
            if (w) rc |= cand_add(t, w->last_write);
            if (write) {
                rc |= cand_list(t, &r->reads);
                if (w) rc |= cand_list(t, &w->reads);
            }
            if (a->kind != CS_ADD) rc |= cand_list(t, &r->adds);
        }
        if (rc) return CS_ENOMEM;
    }

    /* The clock: join of the candidates in decreasing event order; a
     * candidate is covered iff the join of the later ones has reached it
     * (only a later event can follow it).  Nodes from `mark` on are this
     * step's own. */
    size_t width = t->n_chain;
    if (GROW(t->chains, t->cap_chain, width + 1)) return CS_ENOMEM;
    if (GROW(t->preds, t->cap_pred, t->n_pred + t->n_cand)) return CS_ENOMEM;
    if (GROW(t->order, t->cap_order, t->n_cand + 1)) return CS_ENOMEM;
    if (GROW(t->covered, t->cap_covered, t->n_cand + 1)) return CS_ENOMEM;
    uint32_t mark = (uint32_t)t->n_nodes, root = 0;
    uint8_t height = 0;
    for (size_t i = 0; i < t->n_cand; i++) t->order[i] = (uint64_t)t->cand[i] << 32 | i;
    if (t->n_cand > 1) qsort(t->order, t->n_cand, sizeof *t->order, cmp_u64);
    for (size_t k = t->n_cand; k-- > 0;) {
        uint32_t c = (uint32_t)(t->order[k] >> 32), at = (uint32_t)t->order[k];
        const event *ce = &t->ev[c];
        t->covered[at] = trie_get(t, root, height, ce->chain) >= ce->chain_pos;
        /* a covered candidate happens before a joined one: its clock is
         * already below the join */
        if (t->covered[at]) continue;
        if (trie_join(t, &root, &height, ce->clock, ce->clock_h, mark)) return CS_ENOMEM;
    }
    uint32_t n_preds = 0;
    for (size_t i = 0; i < t->n_cand; i++)
        if (!t->covered[i]) t->preds[t->n_pred + n_preds++] = t->cand[i];

    /* The chain, by the rules of the header comment, then tick.  The chain
     * records are committed with the event, at the end. */
    uint32_t chain = NONE, own = t->last_ev[actor];
    if (own != NONE && t->chains[t->ev[own].chain].tip == own) chain = t->ev[own].chain;
    if (chain == NONE) {
        uint32_t lowest = NONE;
        for (uint32_t q = 0; q < n_preds; q++) {
            uint32_t x = t->preds[t->n_pred + q];
            if (x < lowest && t->chains[t->ev[x].chain].tip == x) lowest = x;
        }
        if (lowest != NONE) chain = t->ev[lowest].chain;
    }
    if (chain == NONE) {
        chain = (uint32_t)width++;
        t->chains[chain].len = 0;
    }
    uint32_t pos = t->chains[chain].len + 1;
    if (trie_set(t, &root, &height, chain, pos, mark)) return CS_ENOMEM;

    /* The maximal events: the immediate predecessors no longer are, this
     * event is (grown first: nothing below may fail half-way). */
    if (GROW(t->max_at, t->cap_max_at, (size_t)me + 1)) return CS_ENOMEM;
    if (GROW(t->maxset, t->cap_max, t->n_max + 1)) return CS_ENOMEM;

    /* The barrier state, per event.  A step with a barrier write becomes
     * all_write: every later access follows it, so its other accesses need
     * no per-actor entry (entries at or before all_write do not count). */
    bool barrier_write = false;
    for (uint32_t i = 0; i < n_acc; i++)
        if (t->acc[first + i].object == CS_OBJECT_ALL && t->acc[first + i].kind != CS_READ)
            barrier_write = true;
    if (barrier_write) {
        t->all_write = me;
        list_clear(&t->all_reads);
        t->n_touched_acc = 0;
        t->n_touched_wr = 0;
    } else if (n_acc) {
        /* touched lists: an actor whose entry is NONE or at or before
         * all_write is not listed (lists are cleared with each barrier
         * write); every entry set here is after all_write */
        uint32_t aw = t->all_write;
        bool any_write = false, all_read = false;
        for (uint32_t i = 0; i < n_acc; i++) {
            any_write |= t->acc[first + i].kind != CS_READ;
            all_read |= t->acc[first + i].object == CS_OBJECT_ALL;
        }
        uint32_t pa = t->last_acc[actor];
        if (pa == NONE || (aw != NONE && pa <= aw)) t->touched_acc[t->n_touched_acc++] = actor;
        t->last_acc[actor] = me;
        if (any_write) {
            uint32_t pw = t->last_wr[actor];
            if (pw == NONE || (aw != NONE && pw <= aw)) t->touched_wr[t->n_touched_wr++] = actor;
            t->last_wr[actor] = me;
        }
        if (all_read && list_put(&t->all_reads, actor, me)) return CS_ENOMEM;
    }

    /* Update the per-resource state, in access order. */
    for (uint32_t i = 0; i < n_acc; i++) {
        const cs_access *a = &t->acc[first + i];
        int rc = CS_OK;
        if (a->object == CS_OBJECT_ALL) continue;
        object_rec *o = &t->obj[t->refs[i].obj];
        resource *r = &t->res[t->refs[i].res];
        if (a->key == CS_KEY_WHOLE) {
            if (a->kind != CS_READ) {
                r->last_write = me;
                list_clear(&r->reads);
                list_clear(&o->key_writes);
                list_clear(&o->key_access);
            } else {
                rc |= list_put(&r->reads, actor, me);
            }
        } else {
            if (a->kind == CS_ADD) {
                rc |= list_put(&r->adds, actor, me);
                rc |= list_put(&o->key_writes, actor, me);
            } else if (a->kind != CS_READ) {
                r->last_write = me;
                list_clear(&r->reads);
                list_clear(&r->adds);
                rc |= list_put(&o->key_writes, actor, me);
            } else {
                rc |= list_put(&r->reads, actor, me);
            }
            rc |= list_put(&o->key_access, actor, me);
        }
        if (rc) return CS_ENOMEM;
    }

    for (uint32_t q = 0; q < n_preds; q++) {
        uint32_t x = t->preds[t->n_pred + q], at = t->max_at[x];
        if (at == NONE) continue;
        uint32_t moved = t->maxset[--t->n_max];
        t->maxset[at] = moved;
        t->max_at[moved] = at;
        t->max_at[x] = NONE;
    }
    t->max_at[me] = (uint32_t)t->n_max;
    t->maxset[t->n_max++] = me;

    event *e = &t->ev[me];
    e->clock = root;
    e->clock_h = height;
    e->chain = chain;
    e->chain_pos = pos;
    e->awidth = (uint32_t)t->width;
    t->chains[chain] = (chain_rec){me, pos};
    t->n_chain = width;
    e->pred_off = t->n_pred;
    e->n_preds = n_preds;
    t->n_pred += n_preds;
    t->last_ev[actor] = me;
    t->n_steps[actor]++;
    t->len++;
    t->open = false;
    return CS_OK;
}

bool cs__trace_step_open(const cs__trace *t) { return t && t->open; }
size_t cs__trace_chains(const cs__trace *t) { return t ? t->n_chain : 0; }
size_t cs__trace_clock_nodes(const cs__trace *t) { return t && t->n_nodes ? t->n_nodes - 1 : 0; }
size_t cs__trace_len(const cs__trace *t) { return t ? t->len : 0; }

/* ------------------------------------------------------------ queries */

int cs__trace_get_event(const cs__trace *t, size_t index, cs_event *out) {
    if (!t || !out || index >= t->len) return CS_EINVAL;
    const event *e = &t->ev[index];
    out->actor = e->actor;
    out->actor_step = e->actor_step;
    out->scheduled_by = e->scheduled_by;
    out->first_access = e->first_access;
    out->n_accesses = e->n_accesses;
    out->note = e->note;
    return CS_OK;
}

int cs__trace_object_name(const cs__trace *t, size_t access_index, cs__objname *name,
                          uint32_t *birth) {
    if (!t || !name || !birth || access_index >= t->n_acc) return CS_EINVAL;
    /* accesses of the open step are resolved only when it ends */
    if (t->open && access_index >= t->ev[t->len].first_access) return CS_ESTATE;
    *name = t->obj[t->acc_obj[access_index]].name;
    *birth = t->obj[t->acc_obj[access_index]].birth;
    return CS_OK;
}

int cs__trace_get_access_flags(const cs__trace *t, size_t index, uint8_t *flags) {
    if (!t || !flags || index >= t->n_acc) return CS_EINVAL;
    *flags = t->acc_flags[index];
    return CS_OK;
}

int cs__trace_get_access(const cs__trace *t, size_t index, cs_access *out) {
    if (!t || !out || index >= t->n_acc) return CS_EINVAL;
    *out = t->acc[index];
    return CS_OK;
}

/* Builds by_actor: the events of each actor in order (counting sort). */
static int index_actors(cs__trace *t) {
    if (t->idx_len == t->len) return CS_OK;
    if (GROW(t->by_actor_off, t->cap_by_actor_off, t->width + 1)) return CS_ENOMEM;
    if (GROW(t->by_actor, t->cap_by_actor, t->len + 1)) return CS_ENOMEM;
    uint32_t *off = t->by_actor_off;
    /* off[a + 1] = steps of actor a, then prefix sums */
    off[0] = 0;
    for (size_t a = 0; a < t->width; a++) off[a + 1] = t->n_steps[a];
    for (size_t a = 0; a < t->width; a++) off[a + 1] += off[a];
    for (size_t i = 0; i < t->len; i++) {
        const event *e = &t->ev[i];
        t->by_actor[off[e->actor] + e->actor_step] = (uint32_t)i;
    }
    t->idx_len = t->len;
    return CS_OK;
}

int cs__trace_get_clock(cs__trace *t, size_t index, const uint32_t **clock, size_t *len) {
    if (!t || !clock || !len || index >= t->len) return CS_EINVAL;
    if (index_actors(t)) return CS_ENOMEM;
    const event *e = &t->ev[index];
    uint32_t me = (uint32_t)index;
    for (uint32_t a = 0; a < e->awidth; a++) {
        if (a == e->actor) {
            t->work[a] = e->actor_step + 1;
            continue;
        }
        /* the actor's events that happen before e form a prefix of its
         * program order: count them by binary search */
        const uint32_t *evs = t->by_actor + t->by_actor_off[a];
        uint32_t lo = 0, hi = t->by_actor_off[a + 1] - t->by_actor_off[a];
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (hb_idx(t, evs[mid], me))
                lo = mid + 1;
            else
                hi = mid;
        }
        t->work[a] = lo;
    }
    *clock = t->work;
    *len = e->awidth;
    return CS_OK;
}

bool cs__trace_hb(const cs__trace *t, size_t a, size_t b) {
    if (!t || a >= t->len || b >= t->len) return false;
    return hb_idx(t, (uint32_t)a, (uint32_t)b);
}

static bool overlap(const cs_access *x, const cs_access *y) {
    return cs__conflict(x->object, x->key, x->kind, y->object, y->key, y->kind);
}

bool cs__trace_dep(const cs__trace *t, size_t a, size_t b) {
    if (!t || a >= t->len || b >= t->len || a == b) return false;
    if (a > b) {
        size_t x = a;
        a = b;
        b = x;
    }
    const event *ea = &t->ev[a], *eb = &t->ev[b];
    if (ea->actor == eb->actor) return true;
    if (eb->scheduled_by == (int64_t)a) return true;
    if (eb->scheduled_by == CS_AFTER_ALL && a < eb->barrier) return true;
    for (uint32_t i = 0; i < ea->n_accesses; i++)
        for (uint32_t j = 0; j < eb->n_accesses; j++)
            if (overlap(&t->acc[ea->first_access + i], &t->acc[eb->first_access + j]))
                return true;
    return false;
}

bool cs__trace_waits_for(const cs__trace *t, size_t later, size_t earlier) {
    if (!t || later >= t->len || earlier >= later) return false;
    const event *el = &t->ev[later], *ee = &t->ev[earlier];
    for (uint32_t i = 0; i < el->n_accesses; i++) {
        if (!(t->acc_flags[el->first_access + i] & CS_ENABLING)) continue;
        for (uint32_t j = 0; j < ee->n_accesses; j++)
            if (t->acc[ee->first_access + j].kind == CS_ADD &&
                overlap(&t->acc[el->first_access + i], &t->acc[ee->first_access + j]))
                return true;
    }
    return false;
}

int cs__trace_preds(const cs__trace *t, size_t index, size_t *out, size_t cap,
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
static uint64_t event_hash(const cs__trace *t, uint32_t i) {
    const event *e = &t->ev[i];
    uint64_t h = cs__mix64(((uint64_t)e->actor << 32 | e->actor_step) + 0x51ed27);
    for (uint32_t k = 0; k < e->n_accesses; k++) {
        /* Objects enter by their execution-independent name only where it has
         * one (stable or created ids); an address would make every execution
         * distinct, and the labelled partial order already decides
         * equivalence. */
        const cs_access *a = &t->acc[e->first_access + k];
        const object_rec *o = &t->obj[t->acc_obj[e->first_access + k]];
        if (!o->birth) {
            h = cs__mix64(h ^ cs__mix64(o->name.id + 0x1234567));
            h = cs__mix64(h ^ ((uint64_t)o->name.sub << 8 | o->name.family));
        } else {
            h = cs__mix64(h ^ cs__mix64(0x1234567));
        }
        h = cs__mix64(h ^ cs__mix64(a->key ^ 0xabcdef));
        h = cs__mix64(h ^ a->kind);
    }
    uint64_t ps = 0; /* commutative over the predecessor set */
    for (uint32_t k = 0; k < e->n_preds; k++) {
        const event *p = &t->ev[t->preds[e->pred_off + k]];
        ps += cs__mix64(((uint64_t)p->actor << 32 | p->actor_step) ^ 0x7f4a7c15ULL);
    }
    return cs__mix64(h ^ cs__mix64(ps + e->n_preds));
}

int cs__trace_fingerprint(const cs__trace *t, uint64_t *out) {
    if (!t || !out) return CS_EINVAL;
    if (t->len == 0) {
        *out = 0x6a09e667f3bcc908ULL;
        return CS_OK;
    }
    int rc = CS_ENOMEM;
    size_t n = t->len;
    uint32_t *indeg = calloc(n, sizeof *indeg);
    size_t *succ_off = calloc(n + 1, sizeof *succ_off);
    uint32_t *succ = malloc((t->n_pred ? t->n_pred : 1) * sizeof *succ);
    uint32_t *heap = malloc(n * sizeof *heap);
    uint32_t *fill = calloc(n, sizeof *fill);
    uint64_t h = 0xcbf29ce484222325ULL;
    if (!indeg || !succ_off || !succ || !heap || !fill) goto done;
    for (size_t i = 0; i < n; i++) {
        const event *e = &t->ev[i];
        indeg[i] = e->n_preds;
        for (uint32_t k = 0; k < e->n_preds; k++) succ_off[t->preds[e->pred_off + k] + 1]++;
    }
    for (size_t i = 0; i < n; i++) succ_off[i + 1] += succ_off[i];
    for (size_t i = 0; i < n; i++) {
        const event *e = &t->ev[i];
        for (uint32_t k = 0; k < e->n_preds; k++) {
            uint32_t p = t->preds[e->pred_off + k];
            succ[succ_off[p] + fill[p]++] = (uint32_t)i;
        }
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
        h = cs__mix64(h ^ event_hash(t, x)) + (uint64_t)done_n++;
        for (size_t k = succ_off[x]; k < succ_off[x + 1]; k++)
            if (--indeg[succ[k]] == 0) HPUSH(succ[k]);
    }
#undef HPUSH
#undef HKEY
    *out = h;
    rc = CS_OK;
done:
    free(indeg);
    free(succ_off);
    free(succ);
    free(heap);
    free(fill);
    return rc;
}

/* ------------------------------------------------------------ HB view */

/* What the actor-indexed clocks need, copied out of the trace: per event its
 * actor, rank, chain, position and clock root; the node pool; each actor's
 * events in order.  O(events + nodes) memory. */
typedef struct {
    cs_actor actor;
    uint32_t actor_step, chain, chain_pos, clock, awidth;
    uint8_t clock_h;
} vevent;

struct cs_hb_view {
    size_t len, width;
    vevent *ev;
    cnode *nodes;
    uint32_t *by_actor_off; /* width + 1 entries */
    uint32_t *by_actor;     /* len entries */
};

void cs__hb_view_free(cs_hb_view *v) {
    if (!v) return;
    free(v->ev);
    free(v->nodes);
    free(v->by_actor_off);
    free(v->by_actor);
    free(v);
}

int cs__trace_hb_view(const cs__trace *t, cs_hb_view **out) {
    if (!t || !out) return CS_EINVAL;
    *out = NULL;
    cs_hb_view *v = calloc(1, sizeof *v);
    if (!v) return CS_ENOMEM;
    v->len = t->len;
    v->width = t->width;
    v->ev = malloc((t->len ? t->len : 1) * sizeof *v->ev);
    v->nodes = malloc((t->n_nodes ? t->n_nodes : 1) * sizeof *v->nodes);
    v->by_actor_off = calloc(t->width + 1, sizeof *v->by_actor_off);
    v->by_actor = malloc((t->len ? t->len : 1) * sizeof *v->by_actor);
    if (!v->ev || !v->nodes || !v->by_actor_off || !v->by_actor) {
        cs__hb_view_free(v);
        return CS_ENOMEM;
    }
    if (t->n_nodes) memcpy(v->nodes, t->nodes, t->n_nodes * sizeof *v->nodes);
    for (size_t i = 0; i < t->len; i++) {
        const event *e = &t->ev[i];
        v->ev[i] = (vevent){e->actor, e->actor_step, e->chain,   e->chain_pos,
                            e->clock, e->awidth,     e->clock_h};
        v->by_actor_off[e->actor + 1]++;
    }
    for (size_t a = 0; a < t->width; a++) v->by_actor_off[a + 1] += v->by_actor_off[a];
    for (size_t i = 0; i < t->len; i++) {
        const event *e = &t->ev[i];
        v->by_actor[v->by_actor_off[e->actor] + e->actor_step] = (uint32_t)i;
    }
    *out = v;
    return CS_OK;
}

size_t cs_hb_view_length(const cs_hb_view *v) { return v ? v->len : 0; }

static bool view_hb(const cs_hb_view *v, uint32_t a, uint32_t b) {
    if (a >= b) return false;
    const vevent *ea = &v->ev[a], *eb = &v->ev[b];
    if (ea->chain == eb->chain) return true;
    return trie_get_in(v->nodes, eb->clock, eb->clock_h, ea->chain) >= ea->chain_pos;
}

int cs_hb_view_happens_before(const cs_hb_view *v, size_t a, size_t b) {
    if (!v || a >= v->len || b >= v->len) return 0;
    return view_hb(v, (uint32_t)a, (uint32_t)b) ? 1 : 0;
}

size_t cs_hb_view_clock_len(const cs_hb_view *v, size_t index) {
    return v && index < v->len ? v->ev[index].awidth : 0;
}

int cs_hb_view_clock(const cs_hb_view *v, size_t index, cs_actor actor, uint32_t *value) {
    if (!v || !value || index >= v->len) return CS_EINVAL;
    const vevent *e = &v->ev[index];
    *value = 0;
    if (actor >= e->awidth || actor >= v->width) return CS_OK;
    if (actor == e->actor) {
        *value = e->actor_step + 1;
        return CS_OK;
    }
    /* the actor's events that happen before e are a prefix of its program
     * order: count them by binary search (as cs__trace_get_clock) */
    const uint32_t *evs = v->by_actor + v->by_actor_off[actor];
    uint32_t lo = 0, hi = v->by_actor_off[actor + 1] - v->by_actor_off[actor];
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (view_hb(v, evs[mid], (uint32_t)index))
            lo = mid + 1;
        else
            hi = mid;
    }
    *value = lo;
    return CS_OK;
}
