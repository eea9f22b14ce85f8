/*
 * diagnose.c -- what went wrong in a failing execution.
 *
 * Input: the explorer's current (or just ended) execution, read through the
 * public cs_trace_* API only.
 *
 * AVIO interleavings (Lu, Tucek, Qin, Zhou, ASPLOS 2006)
 *   For every access c by actor A in event e:
 *     - c must be A's first access in e that overlaps its resource (a later
 *       access of the same resource in the same step sees the step's own
 *       value, so `x += 1` after an await is judged by its read);
 *     - p is A's latest access to an overlapping resource in an EARLIER
 *       event (AVIO's "preceding local access"; different steps, so an await
 *       lies between p and c);
 *     - r ranges over accesses by other actors that lie between p and c in
 *       trace order and overlap both p's and c's resources; the latest r of
 *       the kind the pattern needs is reported (at most one finding per
 *       (p, c)):
 *         R-W-R  stale read / check-then-act   (CS_HAZARD_STALE_READ)
 *         R-W-W  lost update                   (CS_HAZARD_LOST_UPDATE)
 *         W-R-W  dirty read of an intermediate (CS_HAZARD_DIRTY_READ)
 *         W-W-R  read of an overwritten value  (CS_HAZARD_OVERWRITTEN)
 *       The other four combinations are serializable.
 *   Resources overlap when the objects are equal and the keys are equal or
 *   either is CS_KEY_WHOLE.  The backward scan from c stops after
 *   SCAN_LIMIT accesses to the same object (a bound on the work per access
 *   for very hot objects; past it a finding can be missed, never invented).
 *
 * The global barrier (object CS_OBJECT_ALL: exec, eval, globals()...)
 *   A barrier is not a resource the user can act on, so no finding names
 *   it: barrier accesses are never p or c, and a finding's object is always
 *   c's.  A REMOTE barrier access between p and c does stand for the access
 *   the barrier over-approximates: a barrier write as a remote write, a
 *   barrier read as a remote read, of every resource.  It is used as r only
 *   when no concrete remote access of the kind the pattern needs lies
 *   between p and c (a named access explains more than "something ran
 *   exec"); the finding's r_access is then the barrier access, its key the
 *   most specific key of p and c.  Sound in the direction diagnosis needs:
 *   whatever the barrier really touched, the pattern it completes is one
 *   the interleaving made possible.  Order violations use concrete writes
 *   only (a barrier carries no ordering intent to have been overtaken).
 *   The local actor's own barrier accesses are ignored.  An `ignore` list
 *   naming CS_OBJECT_ALL drops barriers entirely.
 *
 * Order violation (CS_HAZARD_ORDER_VIOLATION)
 *   Let c be a read by actor A in event e, the first access of its resource
 *   in e, and let s = scheduled_by(e) >= 0 be the event that made e
 *   runnable.  Let r be the latest write before c, in trace order, to a
 *   resource overlapping c's, made by another actor in event f, with no
 *   access of A to that resource between f and c (A had not seen it).  It is an
 *   order violation when s < f < e and s < scheduled_by(f): f became
 *   runnable strictly after e did, so the serial fifo order (ready callbacks
 *   run in the order they were scheduled) would have run e, and c would
 *   have read the value before r wrote it; in this schedule f overtook e.
 *   The finding has p_event = s and p_access = CS_NO_INDEX.  Steps whose
 *   scheduled_by is SCHEDULED_BY_NONE or AFTER_ALL never take part (their
 *   position in the fifo order is not determined by a scheduling event).
 *   Timer callbacks armed in relaxed mode also carry the arming step as
 *   scheduled_by; for them the finding is a candidate, not a certainty.
 *
 * Structural order (findings no schedule can avoid are dropped)
 *   Let ->S be the order generated, over the events of the trace, by
 *     - program order: consecutive events of one actor;
 *     - creation: scheduled_by(e) -> e when e is the first event of its actor
 *       (a task's first step, a callback, only run after the step that
 *       created it);
 *     - join: f -> e when scheduled_by(e) = f, f is the LAST event of its
 *       actor in the trace and e belongs to another actor (the actor ended in
 *       f, and its completion woke e: `await task`, gather, TaskGroup);
 *   and by nothing else: no access conflict, whatever the object, takes part.
 *   A finding (p, r, c) is dropped when p's event ->S r's event AND r's event
 *   ->S c's event: r is then nested between p and c by the program's own
 *   structure (a scenario's setup write, the write of a worker it spawned
 *   and joined, its final check), so every schedule that runs these steps
 *   interleaves them the same way; it is sequential composition, not an
 *   atomicity violation.  Either ordering alone does not suffice: with
 *   p ->S r only, c may still run before r; with r ->S c only, r may run
 *   before p.  An order violation is filtered the same way with p = s (it
 *   never qualifies: e is woken by s < f, so f does not ->S e).
 *   Limits, both stated in the direction they err: a join that leaves no
 *   scheduled_by edge (awaiting a task that had already finished; gather's
 *   children that finished before the last one) is not seen, so the finding
 *   is kept; and a lock released in an actor's final step that wakes a waiter
 *   looks like a join (the engine cannot tell a completion from a release),
 *   so an order-dependence between a parent and a child it spawned after p,
 *   both contending for that lock, can be dropped.
 *
 * Ranking: lost updates and stale reads first, then the other kinds; then
 *   the shortest interval c_event - p_event; then c_event; then kind.
 *
 * Wait-for cycles: depth-first search over actors (edges waiter -> holder),
 * waiters visited in edge order, so the answer is deterministic.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#define SCAN_LIMIT 4096

const char *cs_hazard_name(int kind) {
    switch (kind) {
    case CS_HAZARD_LOST_UPDATE: return "lost_update";
    case CS_HAZARD_STALE_READ: return "stale_read";
    case CS_HAZARD_DIRTY_READ: return "dirty_read";
    case CS_HAZARD_OVERWRITTEN: return "overwritten_read";
    case CS_HAZARD_ORDER_VIOLATION: return "order_violation";
    default: return "unknown";
    }
}

const char *cs_hazard_pattern(int kind) {
    switch (kind) {
    case CS_HAZARD_LOST_UPDATE: return "R-W-W";
    case CS_HAZARD_STALE_READ: return "R-W-R";
    case CS_HAZARD_DIRTY_READ: return "W-R-W";
    case CS_HAZARD_OVERWRITTEN: return "W-W-R";
    case CS_HAZARD_ORDER_VIOLATION: return "order";
    default: return "unknown";
    }
}

typedef struct {
    cs_event *ev;
    size_t n_ev;
    cs_access *acc;
    uint32_t *acc_ev; /* event of each access */
    uint8_t *acc_flags; /* CS_ID_* flags of each access */
    size_t n_acc;
    uint32_t *by_obj; /* access indices sorted by (object, index), barriers excluded */
    size_t n_by_obj;
    uint32_t *all;    /* barrier (CS_OBJECT_ALL) access indices, increasing */
    size_t n_all;
    cs_finding *found;
    size_t n_found, cap_found;
} diag;

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

typedef struct {
    uint64_t object;
    uint32_t index;
} obj_ref;

static int cmp_by_obj(const void *a, const void *b) {
    const obj_ref *x = a, *y = b;
    if (x->object != y->object) return (x->object > y->object) - (x->object < y->object);
    return (x->index > y->index) - (x->index < y->index);
}

static bool overlap(const cs_access *a, const cs_access *b) {
    return a->object == b->object &&
           (a->key == b->key || a->key == CS_KEY_WHOLE || b->key == CS_KEY_WHOLE);
}

static int classify(int p, int r, int c) {
    if (p == CS_READ && r == CS_WRITE && c == CS_READ) return CS_HAZARD_STALE_READ;
    if (p == CS_READ && r == CS_WRITE && c == CS_WRITE) return CS_HAZARD_LOST_UPDATE;
    if (p == CS_WRITE && r == CS_READ && c == CS_WRITE) return CS_HAZARD_DIRTY_READ;
    if (p == CS_WRITE && r == CS_WRITE && c == CS_READ) return CS_HAZARD_OVERWRITTEN;
    return 0;
}

static uint64_t specific_key(const cs_access *c, const cs_access *r, const cs_access *p) {
    if (c->key != CS_KEY_WHOLE) return c->key;
    if (r->object != CS_OBJECT_ALL && r->key != CS_KEY_WHOLE) return r->key;
    if (p && p->key != CS_KEY_WHOLE) return p->key;
    return CS_KEY_WHOLE;
}

static int push(diag *d, const cs_finding *f) {
    if (d->n_found == d->cap_found) {
        size_t ncap = d->cap_found ? 2 * d->cap_found : 16;
        cs_finding *nf = realloc(d->found, ncap * sizeof *nf);
        if (!nf) return CS_ENOMEM;
        d->found = nf;
        d->cap_found = ncap;
    }
    d->found[d->n_found++] = *f;
    return CS_OK;
}

static int rank_class(int kind) {
    return kind == CS_HAZARD_LOST_UPDATE || kind == CS_HAZARD_STALE_READ ? 0 : 1;
}

static int cmp_finding(const void *a, const void *b) {
    const cs_finding *x = a, *y = b;
    int cx = rank_class(x->kind), cy = rank_class(y->kind);
    if (cx != cy) return cx - cy;
    size_t ix = x->c_event - x->p_event, iy = y->c_event - y->p_event;
    if (ix != iy) return (ix > iy) - (ix < iy);
    if (x->c_event != y->c_event) return (x->c_event > y->c_event) - (x->c_event < y->c_event);
    if (x->kind != y->kind) return x->kind - y->kind;
    if (x->c_access != y->c_access)
        return (x->c_access > y->c_access) - (x->c_access < y->c_access);
    return (x->r_event > y->r_event) - (x->r_event < y->r_event);
}

/* Examines access G[j] of one object's group as c. */
static int examine(diag *d, const uint32_t *g, size_t j) {
    uint32_t ci = g[j];
    const cs_access *c = &d->acc[ci];
    uint32_t e = d->acc_ev[ci];
    cs_actor me = d->ev[e].actor;
    size_t q = j;
    /* c must be the first access of its resource in its event */
    while (q > 0 && d->acc_ev[g[q - 1]] == e) {
        if (overlap(&d->acc[g[q - 1]], c)) return CS_OK;
        q--;
    }
    size_t r_ov = CS_NO_INDEX;
    size_t last_remote_w = CS_NO_INDEX, last_remote_r = CS_NO_INDEX;
    bool write_seen = false; /* for order violations: the latest write found */
    size_t scanned = 0;
    size_t p = CS_NO_INDEX;
    while (q > 0 && scanned < SCAN_LIMIT) {
        uint32_t ai = g[--q];
        scanned++;
        const cs_access *a = &d->acc[ai];
        if (!overlap(a, c)) continue;
        cs_actor who = d->ev[d->acc_ev[ai]].actor;
        if (who == me) {
            p = ai;
            if (!write_seen && a->kind == CS_WRITE) write_seen = true;
            break;
        }
        if (a->kind == CS_WRITE) {
            if (!write_seen) {
                write_seen = true;
                r_ov = ai;
            }
            if (last_remote_w == CS_NO_INDEX) last_remote_w = ai;
        } else if (last_remote_r == CS_NO_INDEX) {
            last_remote_r = ai;
        }
    }

    /* Creating an object is not a use of it: nothing could have seen it
     * before, so a creation is never the first access of a pattern. */
    if (p != CS_NO_INDEX && (d->acc_flags[p] & CS_ID_CREATED)) p = CS_NO_INDEX;
    if (p != CS_NO_INDEX) {
        const cs_access *pa = &d->acc[p];
        /* The remote access must overlap p's resource too: with wildcard
         * keys, overlap is not transitive, so rescan the interval for the
         * latest r of each kind that overlaps both. */
        size_t best_w = CS_NO_INDEX, best_r = CS_NO_INDEX;
        if (last_remote_w != CS_NO_INDEX || last_remote_r != CS_NO_INDEX) {
            for (size_t k = j; k-- > q + 1;) {
                uint32_t ai = g[k];
                const cs_access *a = &d->acc[ai];
                if (d->ev[d->acc_ev[ai]].actor == me) continue;
                if (!overlap(a, c) || !overlap(a, pa)) continue;
                if (a->kind == CS_WRITE && best_w == CS_NO_INDEX) best_w = ai;
                if (a->kind == CS_READ && best_r == CS_NO_INDEX) best_r = ai;
                if (best_w != CS_NO_INDEX && best_r != CS_NO_INDEX) break;
            }
        }
        int kind_w = classify(pa->kind, CS_WRITE, c->kind);
        int kind_r = classify(pa->kind, CS_READ, c->kind);
        /* no concrete remote access of a needed kind: the latest remote
         * barrier access between p and c of that kind stands for it */
        if ((kind_w && best_w == CS_NO_INDEX) || (kind_r && best_r == CS_NO_INDEX)) {
            size_t lo = 0, hi = d->n_all; /* first barrier access >= ci */
            while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (d->all[mid] < ci) lo = mid + 1;
                else hi = mid;
            }
            size_t bw = CS_NO_INDEX, br = CS_NO_INDEX;
            for (size_t k = lo; k-- > 0 && d->all[k] > p;) {
                uint32_t ai = d->all[k];
                if (d->ev[d->acc_ev[ai]].actor == me) continue;
                if (d->acc[ai].kind == CS_READ) {
                    if (br == CS_NO_INDEX) br = ai;
                } else if (bw == CS_NO_INDEX) {
                    bw = ai;
                }
                if (bw != CS_NO_INDEX && br != CS_NO_INDEX) break;
            }
            if (best_w == CS_NO_INDEX) best_w = bw;
            if (best_r == CS_NO_INDEX) best_r = br;
        }
        size_t r = CS_NO_INDEX;
        int kind = 0;
        if (kind_w && best_w != CS_NO_INDEX) {
            r = best_w;
            kind = kind_w;
        } else if (kind_r && best_r != CS_NO_INDEX) {
            r = best_r;
            kind = kind_r;
        }
        if (kind) {
            cs_finding f = {
                .kind = kind,
                .local_actor = me,
                .remote_actor = d->ev[d->acc_ev[r]].actor,
                .p_event = d->acc_ev[p],
                .r_event = d->acc_ev[r],
                .c_event = e,
                .p_access = p,
                .r_access = r,
                .c_access = ci,
                .object = c->object,
                .key = specific_key(c, &d->acc[r], pa),
            };
            int rc = push(d, &f);
            if (rc) return rc;
        }
    }

    if (c->kind == CS_READ && r_ov != CS_NO_INDEX) {
        int64_t s = d->ev[e].scheduled_by;
        uint32_t f_ev = d->acc_ev[r_ov];
        int64_t fs = d->ev[f_ev].scheduled_by;
        if (s >= 0 && fs >= 0 && s < (int64_t)f_ev && s < fs) {
            cs_finding f = {
                .kind = CS_HAZARD_ORDER_VIOLATION,
                .local_actor = me,
                .remote_actor = d->ev[f_ev].actor,
                .p_event = (size_t)s,
                .r_event = f_ev,
                .c_event = e,
                .p_access = CS_NO_INDEX,
                .r_access = r_ov,
                .c_access = ci,
                .object = c->object,
                .key = specific_key(c, &d->acc[r_ov], NULL),
            };
            int rc = push(d, &f);
            if (rc) return rc;
        }
    }
    return CS_OK;
}

/* ->S reachability (see the top of the file).  Edges only go forward in the
 * trace, so a search from a to b visits events in (a, b] only. */
typedef struct {
    uint32_t *next_same; /* next event of the same actor, NONE_EV if none */
    uint32_t *first_kid; /* first event e with a creation/join edge from here */
    uint32_t *kid_next;  /* next sibling in that list */
    uint32_t *stamp;     /* visited in search number `gen` */
    uint32_t *stack;
    uint32_t gen;
} sorder;

#define NONE_EV UINT32_MAX

static void sorder_free(sorder *so) {
    free(so->next_same);
    free(so->first_kid);
    free(so->kid_next);
    free(so->stamp);
    free(so->stack);
}

static int sorder_build(sorder *so, const cs_event *ev, size_t n) {
    memset(so, 0, sizeof *so);
    size_t m = n ? n : 1;
    cs_actor max_actor = 0;
    for (size_t i = 0; i < n; i++)
        if (ev[i].actor > max_actor) max_actor = ev[i].actor;
    uint32_t *seen = malloc(((size_t)max_actor + 1) * sizeof *seen);
    so->next_same = malloc(m * sizeof *so->next_same);
    so->first_kid = malloc(m * sizeof *so->first_kid);
    so->kid_next = malloc(m * sizeof *so->kid_next);
    so->stamp = calloc(m, sizeof *so->stamp);
    so->stack = malloc(m * sizeof *so->stack);
    if (!seen || !so->next_same || !so->first_kid || !so->kid_next || !so->stamp ||
        !so->stack) {
        free(seen);
        sorder_free(so);
        return CS_ENOMEM;
    }
    for (size_t a = 0; a <= max_actor; a++) seen[a] = NONE_EV;
    for (size_t i = n; i-- > 0;) {
        so->next_same[i] = seen[ev[i].actor];
        seen[ev[i].actor] = (uint32_t)i;
        so->first_kid[i] = NONE_EV;
    }
    free(seen);
    /* built backwards so that each list is in trace order (not needed for
     * correctness, keeps searches deterministic) */
    for (size_t e = n; e-- > 0;) {
        int64_t f = ev[e].scheduled_by;
        if (f < 0 || (uint64_t)f >= e) continue; /* NONE, AFTER_ALL */
        bool creation = ev[e].actor_step == 0;
        bool join = so->next_same[f] == NONE_EV && ev[f].actor != ev[e].actor;
        if (!creation && !join) continue;
        so->kid_next[e] = so->first_kid[f];
        so->first_kid[f] = (uint32_t)e;
    }
    return CS_OK;
}

static bool sorder_reaches(sorder *so, size_t a, size_t b) {
    if (a == b) return true;
    if (a > b) return false;
    if (++so->gen == 0) { /* wrapped: forget every old stamp */
        memset(so->stamp, 0, (b + 1) * sizeof *so->stamp);
        so->gen = 1;
    }
    size_t top = 0;
    so->stack[top++] = (uint32_t)a;
    so->stamp[a] = so->gen;
    while (top) {
        uint32_t x = so->stack[--top];
        /* successors: the actor's next event, then the creation/join list */
        uint32_t y = so->next_same[x], k = so->first_kid[x];
        while (y != NONE_EV || k != NONE_EV) {
            if (y == NONE_EV) {
                y = k;
                k = so->kid_next[k];
            }
            if (y == b) return true;
            if (y < b && so->stamp[y] != so->gen) {
                so->stamp[y] = so->gen;
                so->stack[top++] = y;
            }
            y = NONE_EV;
        }
    }
    return false;
}

int cs_diagnose(const cs_explorer *ex, const uint64_t *ignore, size_t n_ignore,
                cs_finding *out, size_t cap, size_t *n) {
    if (!ex || !n || (cap && !out) || (n_ignore && !ignore)) return CS_EINVAL;
    *n = 0;
    int rc = CS_ENOMEM;
    diag d;
    memset(&d, 0, sizeof d);
    sorder so;
    memset(&so, 0, sizeof so);
    uint64_t *ign = NULL;
    obj_ref *refs = NULL;
    d.n_ev = cs_trace_length(ex);
    if (d.n_ev > UINT32_MAX) return CS_EINVAL;
    d.ev = malloc((d.n_ev ? d.n_ev : 1) * sizeof *d.ev);
    if (!d.ev) goto cleanup;
    for (size_t i = 0; i < d.n_ev; i++) {
        rc = cs_trace_event(ex, i, &d.ev[i]);
        if (rc) goto cleanup;
        size_t end = (size_t)d.ev[i].first_access + d.ev[i].n_accesses;
        if (end > d.n_acc) d.n_acc = end;
    }
    if (d.n_acc > UINT32_MAX) {
        rc = CS_EINVAL;
        goto cleanup;
    }
    rc = CS_ENOMEM;
    d.acc = malloc((d.n_acc ? d.n_acc : 1) * sizeof *d.acc);
    d.acc_ev = malloc((d.n_acc ? d.n_acc : 1) * sizeof *d.acc_ev);
    d.acc_flags = calloc(d.n_acc ? d.n_acc : 1, sizeof *d.acc_flags);
    d.by_obj = malloc((d.n_acc ? d.n_acc : 1) * sizeof *d.by_obj);
    d.all = malloc((d.n_acc ? d.n_acc : 1) * sizeof *d.all);
    refs = malloc((d.n_acc ? d.n_acc : 1) * sizeof *refs);
    ign = malloc((n_ignore ? n_ignore : 1) * sizeof *ign);
    if (!d.acc || !d.acc_ev || !d.acc_flags || !d.by_obj || !d.all || !refs || !ign)
        goto cleanup;
    if (n_ignore) memcpy(ign, ignore, n_ignore * sizeof *ign);
    if (n_ignore) qsort(ign, n_ignore, sizeof *ign, cmp_u64);
    for (size_t a = 0; a < d.n_acc; a++) d.acc_ev[a] = UINT32_MAX;
    for (size_t i = 0; i < d.n_ev; i++) {
        for (uint32_t k = 0; k < d.ev[i].n_accesses; k++) {
            size_t a = (size_t)d.ev[i].first_access + k;
            rc = cs_trace_access(ex, a, &d.acc[a]);
            if (!rc) rc = cs_trace_access_flags(ex, a, &d.acc_flags[a]);
            if (rc) goto cleanup;
            d.acc_ev[a] = (uint32_t)i;
        }
    }
    for (size_t a = 0; a < d.n_acc; a++) {
        if (d.acc_ev[a] == UINT32_MAX) continue; /* not part of any event */
        if (n_ignore && bsearch(&d.acc[a].object, ign, n_ignore, sizeof *ign, cmp_u64))
            continue;
        if (d.acc[a].object == CS_OBJECT_ALL) {
            d.all[d.n_all++] = (uint32_t)a; /* never grouped as an object */
            continue;
        }
        refs[d.n_by_obj++] = (obj_ref){d.acc[a].object, (uint32_t)a};
    }
    if (d.n_by_obj) qsort(refs, d.n_by_obj, sizeof *refs, cmp_by_obj);
    for (size_t i = 0; i < d.n_by_obj; i++) d.by_obj[i] = refs[i].index;
    for (size_t lo = 0; lo < d.n_by_obj;) {
        size_t hi = lo + 1;
        while (hi < d.n_by_obj && d.acc[d.by_obj[hi]].object == d.acc[d.by_obj[lo]].object)
            hi++;
        for (size_t j = 0; j < hi - lo; j++) {
            rc = examine(&d, d.by_obj + lo, j);
            if (rc) goto cleanup;
        }
        lo = hi;
    }
    if (d.n_found) {
        rc = sorder_build(&so, d.ev, d.n_ev);
        if (rc) goto cleanup;
        size_t kept = 0;
        for (size_t i = 0; i < d.n_found; i++) {
            const cs_finding *f = &d.found[i];
            if (sorder_reaches(&so, f->p_event, f->r_event) &&
                sorder_reaches(&so, f->r_event, f->c_event))
                continue;
            d.found[kept++] = *f;
        }
        d.n_found = kept;
    }
    if (d.n_found) qsort(d.found, d.n_found, sizeof *d.found, cmp_finding);
    for (size_t i = 0; i < d.n_found && i < cap; i++) out[i] = d.found[i];
    *n = d.n_found;
    rc = CS_OK;
cleanup:
    free(d.ev);
    free(d.acc);
    free(d.acc_ev);
    free(d.acc_flags);
    free(d.by_obj);
    free(d.all);
    free(d.found);
    free(refs);
    free(ign);
    sorder_free(&so);
    return rc;
}

/* ------------------------------------------------------- wait-for cycles */

static int cmp_actor(const void *a, const void *b) {
    cs_actor x = *(const cs_actor *)a, y = *(const cs_actor *)b;
    return (x > y) - (x < y);
}

static size_t actor_index(const cs_actor *sorted, size_t n, cs_actor a) {
    const cs_actor *hit = bsearch(&a, sorted, n, sizeof *sorted, cmp_actor);
    return (size_t)(hit - sorted);
}

int cs_wait_for_cycle(const cs_wait_edge *edges, size_t n, size_t *cycle,
                      size_t cap, size_t *len) {
    if (!len || (n && !edges) || (cap && !cycle)) return CS_EINVAL;
    *len = 0;
    if (n == 0) return CS_OK;
    int rc = CS_ENOMEM;
    size_t n_nodes = 0;
    cs_actor *nodes = malloc(2 * n * sizeof *nodes);
    size_t *first = NULL, *next = NULL, *stack_edge = NULL, *cursor = NULL, *on_path = NULL;
    unsigned char *color = NULL;
    size_t *cyc = NULL;
    if (!nodes) goto cleanup;
    for (size_t i = 0; i < n; i++) {
        nodes[2 * i] = edges[i].waiter;
        nodes[2 * i + 1] = edges[i].holder;
    }
    qsort(nodes, 2 * n, sizeof *nodes, cmp_actor);
    for (size_t i = 0; i < 2 * n; i++)
        if (n_nodes == 0 || nodes[n_nodes - 1] != nodes[i]) nodes[n_nodes++] = nodes[i];
    /* adjacency: edges by waiter, in edge order (linked lists built
     * backwards so that traversal follows edge order) */
    first = malloc(n_nodes * sizeof *first);
    next = malloc(n * sizeof *next);
    cursor = malloc(n_nodes * sizeof *cursor);
    on_path = malloc(n_nodes * sizeof *on_path); /* depth+1 on the path, 0 = not */
    stack_edge = malloc(n_nodes * sizeof *stack_edge);
    color = calloc(n_nodes, 1);
    cyc = malloc(n * sizeof *cyc);
    if (!first || !next || !cursor || !on_path || !stack_edge || !color || !cyc)
        goto cleanup;
    for (size_t v = 0; v < n_nodes; v++) first[v] = CS_NO_INDEX;
    for (size_t i = n; i-- > 0;) {
        size_t w = actor_index(nodes, n_nodes, edges[i].waiter);
        next[i] = first[w];
        first[w] = i;
    }
    memset(on_path, 0, n_nodes * sizeof *on_path);
    size_t found = 0;
    for (size_t i = 0; i < n && !found; i++) {
        size_t root = actor_index(nodes, n_nodes, edges[i].waiter);
        if (color[root]) continue;
        /* iterative DFS; stack_edge[d] = edge taken from depth d */
        size_t depth = 0;
        color[root] = 1;
        on_path[root] = 1;
        cursor[root] = first[root];
        size_t cur = root;
        while (!found) {
            size_t ei = cursor[cur];
            if (ei == CS_NO_INDEX) {
                color[cur] = 2;
                on_path[cur] = 0;
                if (depth == 0) break;
                depth--;
                cur = actor_index(nodes, n_nodes, edges[stack_edge[depth]].waiter);
                continue;
            }
            cursor[cur] = next[ei];
            size_t to = actor_index(nodes, n_nodes, edges[ei].holder);
            if (on_path[to]) {
                /* cycle: edges stack_edge[on_path[to]-1 .. depth-1], then ei */
                size_t start = on_path[to] - 1;
                for (size_t k = start; k < depth; k++) cyc[found++] = stack_edge[k];
                cyc[found++] = ei;
                break;
            }
            if (color[to]) continue; /* finished: no cycle through it */
            stack_edge[depth++] = ei;
            color[to] = 1;
            on_path[to] = depth + 1;
            cursor[to] = first[to];
            cur = to;
        }
    }
    if (found) {
        size_t lo = 0;
        for (size_t k = 1; k < found; k++)
            if (cyc[k] < cyc[lo]) lo = k;
        for (size_t k = 0; k < found && k < cap; k++) cycle[k] = cyc[(lo + k) % found];
        *len = found;
    }
    rc = CS_OK;
cleanup:
    free(nodes);
    free(first);
    free(next);
    free(cursor);
    free(on_path);
    free(stack_edge);
    free(color);
    free(cyc);
    return rc;
}
