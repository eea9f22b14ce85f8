/*
 * strategy_dpor.c -- optimal DPOR with wakeup trees and sleep sets
 * (Abdulla, Aronis, Jonsson, Sagonas: POPL 2014; JACM 2017 "Source Sets").
 *
 * State lives on a stack with one *position* per step of the current
 * execution (position k = the state before event k):
 *   - root: the wakeup-tree node of this position.  Its children are the
 *     branches still to explore from here, in order; the first child is the
 *     one being executed, and it is itself the root of position k + 1, so the
 *     wakeup tree of a deeper position is the subtree of the branch taken.
 *   - sleep: the sleep set, as (actor, next event of that actor) entries:
 *     inherited from position k - 1 when independent of event k - 1, plus the
 *     branches already finished at this position (owned here).
 * Backtracking removes finished branches and pops positions, so memory grows
 * with the depth of an execution and the width of the wakeup trees, never
 * with the number of executions.
 *
 * After every execution E, for each race e <E e': E' = pre(E, e), v = notdep(e, E).e' (the events of E after e
 * that do not happen after e, then e'); if no sleeping actor of E' is a weak
 * initial of v, v is inserted into the wakeup tree of E'.
 *
 * Races: e, e' dependent, different actors, e an immediate HB predecessor of
 * e', and e' neither scheduled by e, nor CS_AFTER_ALL, nor waiting for e by an
 * enabling read (CS_ENABLING) (those orders cannot be reversed).  Locks: a release is never reversed with the acquisition that
 * follows it; instead an acquisition races with the previous acquisition of
 * the same lock by another actor, when nothing but that release orders them.
 *
 * Dependency between events of different executions (wakeup sequences,
 * sleep sets) uses event identities (actor, actor_step): same actor, a
 * scheduled_by edge by identity, CS_AFTER_ALL (treated as dependent with
 * everything here: an over-approximation, which only costs executions), or
 * conflicting accesses (the global barrier CS_OBJECT_ALL conflicts with every
 * access, a barrier read with every write; races come from the trace's
 * happens-before, which orders the barrier the same way, so a barrier write
 * races with every concurrent earlier step that made an access).
 *
 * Objects across executions.  Unless the front end promises stable object
 * ids (cs_config.stable_objects, as C programs do), an id is an address that
 * means nothing in another execution.  Objects are then compared by the
 * trace's names (first access: event + 1 = birth, access index), and every
 * stored event carries an *anchor*: the length of the prefix it shares with
 * the current stack (the position where it was recorded or inserted).  Two
 * events with anchors a and b share the first m = min(a, b) steps, which run
 * identically, so objects first accessed there (birth <= m) have the same
 * name in both; an object with birth <= m on one side and birth > m on the
 * other cannot be the same object (the shared prefix would have named it).
 * Objects first accessed after the shared prefix on both sides may be one
 * object under different names, so they are treated as the same object: an
 * over-approximation that costs executions, never misses one.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------- events */

/* An access as DPOR compares it across executions.  Invariants: `object`
 * is the trace's name of the object (with stable_objects: the raw id, family
 * CS__NAME_STABLE); birth == 0 iff the name holds in every execution
 * (stable or created ids, and the barrier); `all` iff the object is
 * CS_OBJECT_ALL (named stable by the trace, so equal in every execution). */
typedef struct {
    cs__objname object;
    uint64_t key;
    uint32_t birth; /* 0: a name valid in every execution (no anchor applies) */
    uint8_t kind;
    bool all;       /* the global barrier: overlaps every access */
} dacc;

#define ANCHOR_NOW UINT32_MAX /* an event of the current execution */
#define NO_FLOOR SIZE_MAX

/* An event by identity, comparable across executions. */
typedef struct {
    cs_actor actor;
    uint32_t step;     /* actor_step: (actor, step) names the event */
    cs_actor sb_actor; /* identity of the scheduled_by event; CS_NO_ACTOR: none */
    uint32_t sb_step;
    bool after_all;    /* scheduled_by == CS_AFTER_ALL */
    bool known;        /* false until the event has been observed or inserted;
                          an unknown event is dependent with everything */
    bool ran;          /* it ran where it stands (after the same steps) in an
                          earlier execution, and acc, sb_*, after_all and
                          note are what it did then: replaying it must do
                          the same (dpor_observe) */
    uint64_t note;     /* cs_event.note: the work it started */
    bool exact;        /* its accesses are those it makes where it stands: it
                          has run there, or it was inserted as an event of
                          notdep(e, E) under nodes that are exact or matched by
                          actor (not a reversed step predicted from its run
                          elsewhere) */
    uint32_t anchor;   /* its names are valid for the first `anchor` steps of
                          the current stack (ANCHOR_NOW: a trace event) */
    uint32_t n_acc;
    dacc *acc;         /* n_acc accesses: owned by a node, or borrowed from
                          the trace scratch (tev/tacc) */
} wevent;

static bool conflict(const dacc *x, const dacc *y, uint32_t shared) {
    if (x->kind == y->kind && (x->kind == CS_READ || x->kind == CS_ADD)) return false;
    if (x->all || y->all) return true;
    bool both_unnamed = x->birth > shared && y->birth > shared;
    if (!both_unnamed && !cs__objname_eq(&x->object, &y->object)) return false;
    return x->key == y->key || x->key == CS_KEY_WHOLE || y->key == CS_KEY_WHOLE;
}

static bool dep_ev(const wevent *a, const wevent *b) {
    if (a->actor == b->actor) return true;
    if (a->after_all || b->after_all) return true;
    if (a->sb_actor == b->actor && a->sb_step == b->step) return true;
    if (b->sb_actor == a->actor && b->sb_step == a->step) return true;
    uint32_t shared = a->anchor < b->anchor ? a->anchor : b->anchor;
    for (uint32_t i = 0; i < a->n_acc; i++)
        for (uint32_t j = 0; j < b->n_acc; j++)
            if (conflict(&a->acc[i], &b->acc[j], shared)) return true;
    return false;
}

static int ev_copy(wevent *dst, const wevent *src) {
    *dst = *src;
    dst->acc = NULL;
    if (src->n_acc) {
        dst->acc = malloc(src->n_acc * sizeof *dst->acc);
        if (!dst->acc) return CS_ENOMEM;
        memcpy(dst->acc, src->acc, src->n_acc * sizeof *dst->acc);
    }
    return CS_OK;
}

/* Does a sleeper stay asleep across the event `ev`?  Only one whose
 * accesses are those it makes there can: every finished branch is (it ran
 * there), but a branch given to another process (cs_share_give) sleeps with
 * the accesses it was inserted with, which may be predicted from a run
 * elsewhere.  Such a sleeper still covers its own actor's branch where it
 * sleeps, and no deeper: a smaller sleep set only costs executions. */
static bool stays_asleep(const wevent *sleeper, const wevent *ev) {
    return sleeper->known && sleeper->exact && !dep_ev(sleeper, ev);
}

/* ----------------------------------------------------- wakeup trees */

/* A wakeup-tree node.  Invariants: first..last (via next) are its children,
 * in insertion order (the order they will be explored); last == NULL iff
 * first == NULL; a node is in at most one child list or one `owned` array. */
typedef struct node {
    wevent ev;
    struct node *first, *last, *next;
    bool given; /* a finished branch given to another process whose reports
                   are not all in (cs_share_give; cleared by cs_share_done) */
} node;

/* Frees n and its whole subtree (not n's siblings).  Iterative: a wakeup
 * tree is as deep as an execution is long (one node per step), so recursion
 * per level would overflow the stack.  Work list: nodes still to free,
 * linked through `next`; a freed node's children are spliced in front. */
static void node_free(node *n) {
    if (!n) return;
    n->next = NULL;
    node *work = n;
    while (work) {
        node *x = work;
        work = x->next;
        if (x->first) {
            node *tail = x->first;
            while (tail->next) tail = tail->next;
            tail->next = work;
            work = x->first;
        }
        free(x->ev.acc);
        free(x);
    }
}

static void node_append(node *parent, node *child) {
    child->next = NULL;
    if (parent->last) parent->last->next = child;
    else parent->first = child;
    parent->last = child;
}

/* ------------------------------------------------------ positions */

typedef struct {
    cs_actor actor;   /* at most one entry per actor in a sleep set */
    const wevent *ev; /* its next event: the event of a node in the `owned`
                         array of this or an earlier position (lives as long
                         as this entry, since positions are freed deepest
                         first) */
} sleeper;

/* Position k: the state before event k of the current execution. */
typedef struct {
    node *root;       /* wakeup tree here; root->first is the branch being run
                         (pos[k + 1].root == root->first for k + 1 < n_pos);
                         borrowed: owned by the parent's child list (root0 for
                         k = 0) */
    sleeper *sleep;   /* sleep set: inherited from k - 1 when independent of
                         event k - 1, plus this position's finished branches */
    uint32_t n_sleep, cap_sleep;
    node **owned;     /* finished branches of this position: childless nodes,
                         each allocated on its own so that sleepers' pointers
                         stay valid when this array grows */
    uint32_t n_owned, cap_owned;
    uint32_t held;    /* branches of this position given to another process
                         (cs_share_give) whose reports are not all in yet:
                         backtracking stops here while it is not 0 */
} position;

typedef struct {
    node *root0;       /* the wakeup tree of the empty prefix; owns every node
                          of the live tree */
    position *pos;     /* the stack: pos[0 .. n_pos); during an execution
                          n_pos == max(depth, branch) + 1 */
    size_t n_pos, cap_pos;
    size_t branch;     /* position where this execution's new branch starts:
                          positions <= branch are replayed from the tree,
                          deeper ones are built by observe */
    size_t depth;      /* steps taken in the current execution (== the trace
                          length between steps) */
    bool started;      /* begin has run once (pos[0] exists) */
    bool exhausted;    /* no branch left: the exploration is over */
    bool incomplete;   /* some branch was dropped (an aborted execution or a
                          budget): `complete` must not be claimed */
    bool stable_objects; /* cs_config.stable_objects: raw ids are names */
    bool fixed_accesses; /* cs_config.fixed_step_accesses */
    bool blocked_now;  /* this execution was cut short by its sleep set */
    bool waiting;      /* backtracking stopped at the held position
                          pos[n_pos - 1]: cs_share_resume continues it */
    size_t floor;      /* NO_FLOOR, or (a process that took a branch,
                          cs_share_take) the position it was taken at: the
                          positions up to it are the giver's, races reversed
                          there are reports (out), and the exploration ends
                          when backtracking reaches it */
    uint8_t *out;      /* reports not yet collected (cs_share_reports) */
    size_t out_len, out_cap;
    bool diverged_now; /* this execution could not follow its prescribed
                          branch (the branch is dropped at the end) */

    /* scratch for race detection (grows with execution length); valid only
     * inside dpor_end / dpor_observe */
    wevent *tev;       /* the trace's events as wevents, cap_tev entries */
    size_t cap_tev;
    dacc *tacc;        /* their accesses */
    size_t cap_tacc;
    uint32_t *vidx, *dlist; /* race(): v as trace indices; e' 's direct deps */
    bool *vremoved, *reach; /* race(): consumed elements; HB-before e' in v */
    size_t cap_v;      /* == cap_tev: capacity of vidx, dlist, vremoved, reach */
    dacc *sorted;      /* first_difference(): both access lists, sorted */
    size_t cap_sorted;
} dpor_state;

static int ensure_pos(dpor_state *s, size_t k) {
    if (k < s->n_pos) return CS_OK;
    if (k >= s->cap_pos) {
        size_t ncap = s->cap_pos ? s->cap_pos * 2 : 64;
        while (ncap <= k) ncap *= 2;
        position *np = realloc(s->pos, ncap * sizeof *np);
        if (!np) return CS_ENOMEM;
        s->pos = np;
        s->cap_pos = ncap;
    }
    while (s->n_pos <= k) memset(&s->pos[s->n_pos++], 0, sizeof(position));
    return CS_OK;
}

static void pos_clear(position *p) {
    for (uint32_t i = 0; i < p->n_owned; i++) node_free(p->owned[i]);
    free(p->owned);
    free(p->sleep);
    memset(p, 0, sizeof *p);
}

static int sleep_add(position *p, cs_actor actor, const wevent *ev) {
    if (p->n_sleep == p->cap_sleep) {
        uint32_t ncap = p->cap_sleep ? p->cap_sleep * 2 : 4;
        sleeper *ns = realloc(p->sleep, ncap * sizeof *ns);
        if (!ns) return CS_ENOMEM;
        p->sleep = ns;
        p->cap_sleep = ncap;
    }
    p->sleep[p->n_sleep++] = (sleeper){actor, ev};
    return CS_OK;
}

static bool asleep(const position *p, cs_actor a) {
    for (uint32_t i = 0; i < p->n_sleep; i++)
        if (p->sleep[i].actor == a) return true;
    return false;
}

/* Is the branch `c`, taken where `sleep` (n entries) is the sleep set,
 * redundant?  It is when its actor sleeps there: every trace through it is
 * covered by the finished branch of that sleeper.  It is also when every
 * branch below it is redundant where c leads, with the sleep set c leaves
 * there (the sleepers independent of c), judged only through exact nodes
 * (an inexact label could hide a conflict that wakes a sleeper) and at most
 * `depth` levels down.  A node without children is a leaf: a free choice
 * follows it, so it is redundant only if asleep.
 *
 * This repairs what the wakeup tree's insertion cannot know: a reversed
 * step whose accesses depend on what it reads (!fixed_accesses) enters the
 * tree predicted from a run in another context, so a sequence may be
 * inserted that a branch explored later covers; the branches explored since
 * then sleep with the accesses they really made. */
static int redundant(const node *c, const sleeper *sleep, uint32_t n, unsigned depth,
                     bool *out) {
    *out = false;
    for (uint32_t i = 0; i < n; i++)
        if (sleep[i].actor == c->ev.actor) {
            *out = true;
            return CS_OK;
        }
    if (!c->first || !c->ev.exact || depth == 0 || n == 0) return CS_OK;
    sleeper *after = malloc(n * sizeof *after);
    if (!after) return CS_ENOMEM;
    uint32_t m = 0;
    for (uint32_t i = 0; i < n; i++)
        if (stays_asleep(sleep[i].ev, &c->ev)) after[m++] = sleep[i];
    bool all = m > 0;
    int rc = CS_OK;
    for (const node *d = c->first; d && all && rc == CS_OK; d = d->next)
        rc = redundant(d, after, m, depth - 1, &all);
    free(after);
    *out = rc == CS_OK && all;
    return rc;
}

#define REDUNDANT_DEPTH 16 /* bounds redundant()'s recursion (and its cost) */

/* Drops the leading branches of position p that are redundant (freed, not
 * put to sleep: nothing below them was explored). */
static int drop_redundant(position *p) {
    node *r = p->root;
    while (r->first) {
        bool red;
        int rc = redundant(r->first, p->sleep, p->n_sleep, REDUNDANT_DEPTH, &red);
        if (rc) return rc;
        if (!red) break;
        node *c = r->first;
        r->first = c->next;
        if (r->last == c) r->last = NULL;
        c->next = NULL;
        node_free(c);
    }
    return CS_OK;
}

/* ------------------------------------------------------- lifecycle */

static int dpor_create(cs_explorer *ex, const cs_config *cfg, void **state) {
    (void)ex;
    dpor_state *s = calloc(1, sizeof *s);
    if (!s) return CS_ENOMEM;
    s->stable_objects = cfg->stable_objects != 0;
    s->floor = NO_FLOOR;
    s->fixed_accesses = cfg->fixed_step_accesses != 0;
    s->root0 = calloc(1, sizeof *s->root0);
    if (!s->root0) {
        free(s);
        return CS_ENOMEM;
    }
    *state = s;
    return CS_OK;
}

static void dpor_destroy(void *state) {
    dpor_state *s = state;
    if (!s) return;
    for (size_t k = s->n_pos; k-- > 0;) {
        /* owned events may be referenced by deeper positions: free deepest
         * first */
        pos_clear(&s->pos[k]);
    }
    free(s->pos);
    node_free(s->root0);
    free(s->tev);
    free(s->tacc);
    free(s->sorted);
    free(s->vidx);
    free(s->dlist);
    free(s->vremoved);
    free(s->reach);
    free(s->out);
    free(s);
}

static int dpor_begin(cs_explorer *ex, void *state, int *more, int *complete) {
    (void)ex;
    dpor_state *s = state;
    *complete = 0;
    if (s->waiting) return CS_ESTATE; /* held: cs_share_resume first */
    if (s->exhausted) {
        *more = 0;
        *complete = !s->incomplete;
        return CS_OK;
    }
    if (!s->started) {
        s->started = true;
        s->branch = 0;
        if (ensure_pos(s, 0)) return CS_ENOMEM;
        s->pos[0].root = s->root0;
    }
    s->depth = 0;
    s->blocked_now = false;
    s->diverged_now = false;
    *more = 1;
    return CS_OK;
}

static int dpor_choose(cs_explorer *ex, void *state, size_t step,
                       const cs_actor *enabled, size_t n, size_t *chosen) {
    dpor_state *s = state;
    if (step != s->depth || step >= s->n_pos) return CS_EINVAL;
    position *p = &s->pos[step];
    node *c = p->root->first;
    if (c && step > s->branch) {
        /* a wakeup sequence below the new branch: its sleep set is known
         * only now */
        int rc = drop_redundant(p);
        if (rc) return rc;
        c = p->root->first;
        if (!c) {
            /* every continuation prescribed here is covered elsewhere */
            s->blocked_now = true;
            cs__explorer_count_blocked(ex);
            return CS_EBLOCKED;
        }
    }
    if (c) {
        /* prescribed: the prefix being replayed or a wakeup sequence */
        for (size_t i = 0; i < n; i++)
            if (enabled[i] == c->ev.actor) {
                *chosen = i;
                return CS_OK;
            }
        s->diverged_now = true;
        return cs__explorer_diverged(ex, step, c->ev.actor, n);
    }
    /* free choice: the first enabled actor that is not asleep */
    for (size_t i = 0; i < n; i++) {
        if (asleep(p, enabled[i])) continue;
        c = calloc(1, sizeof *c);
        if (!c) return CS_ENOMEM;
        c->ev.actor = enabled[i];
        c->ev.sb_actor = CS_NO_ACTOR;
        node_append(p->root, c);
        *chosen = i;
        return CS_OK;
    }
    s->blocked_now = true;
    cs__explorer_count_blocked(ex);
    return CS_EBLOCKED;
}

/* Fills *out with event k of the trace; accesses point into `buf`. */
static int trace_wevent(const cs__trace *t, bool stable, size_t k, wevent *out,
                        dacc *buf) {
    cs_event e;
    int rc = cs__trace_get_event(t, k, &e);
    if (rc) return rc;
    out->actor = e.actor;
    out->step = e.actor_step;
    out->sb_actor = CS_NO_ACTOR;
    out->sb_step = 0;
    out->after_all = e.scheduled_by == CS_AFTER_ALL;
    out->known = true;
    out->ran = false;
    out->note = e.note;
    out->exact = true;
    out->anchor = ANCHOR_NOW;
    if (e.scheduled_by >= 0) {
        cs_event by;
        rc = cs__trace_get_event(t, (size_t)e.scheduled_by, &by);
        if (rc) return rc;
        out->sb_actor = by.actor;
        out->sb_step = by.actor_step;
    }
    out->n_acc = e.n_accesses;
    out->acc = buf;
    for (uint32_t i = 0; i < e.n_accesses; i++) {
        cs_access a;
        rc = cs__trace_get_access(t, e.first_access + i, &a);
        if (rc) return rc;
        cs__objname name = {a.object, 0, CS__NAME_STABLE};
        uint32_t birth = 0;
        if (!stable && (rc = cs__trace_object_name(t, e.first_access + i, &name, &birth)))
            return rc;
        buf[i] = (dacc){name, a.key, birth, a.kind, a.object == CS_OBJECT_ALL};
    }
    return CS_OK;
}

static int grow_scratch(dpor_state *s, size_t n_ev, size_t n_acc) {
    if (n_ev > s->cap_tev) {
        size_t ncap = s->cap_tev ? s->cap_tev : 64;
        while (ncap < n_ev) ncap *= 2;
        wevent *a = realloc(s->tev, ncap * sizeof *a);
        if (!a) return CS_ENOMEM;
        s->tev = a;
        uint32_t *b = realloc(s->vidx, ncap * sizeof *b);
        if (!b) return CS_ENOMEM;
        s->vidx = b;
        uint32_t *b2 = realloc(s->dlist, ncap * sizeof *b2);
        if (!b2) return CS_ENOMEM;
        s->dlist = b2;
        bool *c = realloc(s->vremoved, ncap * sizeof *c);
        if (!c) return CS_ENOMEM;
        s->vremoved = c;
        bool *d = realloc(s->reach, ncap * sizeof *d);
        if (!d) return CS_ENOMEM;
        s->reach = d;
        s->cap_tev = ncap;
        s->cap_v = ncap;
    }
    if (n_acc > s->cap_tacc) {
        size_t ncap = s->cap_tacc ? s->cap_tacc : 256;
        while (ncap < n_acc) ncap *= 2;
        dacc *a = realloc(s->tacc, ncap * sizeof *a);
        if (!a) return CS_ENOMEM;
        s->tacc = a;
        s->cap_tacc = ncap;
    }
    return CS_OK;
}

/* ------------------------------------------------ replayed steps */

static bool dacc_eq(const dacc *x, const dacc *y) {
    return cs__objname_eq(&x->object, &y->object) && x->key == y->key &&
           x->birth == y->birth && x->kind == y->kind && x->all == y->all;
}

#define CMP(a, b) ((a) < (b) ? -1 : (a) > (b))
static int dacc_cmp(const void *p, const void *q) {
    const dacc *x = p, *y = q;
    int c;
    if ((c = CMP(x->object.family, y->object.family))) return c;
    if ((c = CMP(x->object.id, y->object.id))) return c;
    if ((c = CMP(x->object.sub, y->object.sub))) return c;
    if ((c = CMP(x->key, y->key))) return c;
    if ((c = CMP(x->birth, y->birth))) return c;
    if ((c = CMP(x->kind, y->kind))) return c;
    return CMP(x->all, y->all);
}
#undef CMP

/* Does `now`, a step replayed after the same steps as `before` ran after
 * in an earlier execution, differ from it?  Accesses compare as multisets:
 * the order a step makes them in may follow addresses (iterating a set of
 * objects, the as_completed idiom's callbacks) where what it touches does
 * not.  On a difference of accesses *diff is one: of `now` if it has one
 * `before` lacks (*missing = false, *diff_index its index in now.acc),
 * else of `before` (*missing = true). */
static int first_difference(dpor_state *s, const wevent *before, const wevent *now,
                            bool *differs, const dacc **diff, size_t *diff_index,
                            bool *missing) {
    *differs = false;
    *diff = NULL;
    bool same_order = before->n_acc == now->n_acc;
    for (uint32_t i = 0; same_order && i < now->n_acc; i++)
        same_order = dacc_eq(&before->acc[i], &now->acc[i]);
    if (!same_order) {
        size_t n = (size_t)before->n_acc + now->n_acc;
        if (n > s->cap_sorted) {
            size_t ncap = s->cap_sorted ? s->cap_sorted : 64;
            while (ncap < n) ncap *= 2;
            dacc *a = realloc(s->sorted, ncap * sizeof *a);
            if (!a) return CS_ENOMEM;
            s->sorted = a;
            s->cap_sorted = ncap;
        }
        dacc *b = s->sorted, *w = s->sorted + before->n_acc;
        if (before->n_acc) memcpy(b, before->acc, before->n_acc * sizeof *b);
        if (now->n_acc) memcpy(w, now->acc, now->n_acc * sizeof *w);
        qsort(b, before->n_acc, sizeof *b, dacc_cmp);
        qsort(w, now->n_acc, sizeof *w, dacc_cmp);
        const dacc *extra = NULL, *lost = NULL;
        uint32_t i = 0, j = 0;
        while (!extra && (i < before->n_acc || j < now->n_acc)) {
            int c = i == before->n_acc ? 1 : j == now->n_acc ? -1 : dacc_cmp(&b[i], &w[j]);
            if (c == 0) i++, j++;
            else if (c > 0) extra = &w[j++];
            else {
                if (!lost) lost = &b[i];
                i++;
            }
        }
        if (extra) {
            for (uint32_t k = 0; k < now->n_acc; k++)
                if (dacc_eq(&now->acc[k], extra)) {
                    *diff = &now->acc[k];
                    *diff_index = k;
                    break;
                }
            *missing = false;
        } else if (lost) {
            *diff = lost;
            *missing = true;
        }
        if (*diff) {
            *differs = true;
            return CS_OK;
        }
    }
    *differs = before->sb_actor != now->sb_actor || before->sb_step != now->sb_step ||
               before->after_all != now->after_all || before->note != now->note;
    return CS_OK;
}

/* The step at `index` did not do what it did when it ran there before:
 * reported as a CS_DIVERGED_CHANGED divergence. */
static int replay_changed(cs_explorer *ex, const cs__trace *t, const cs_event *e,
                          size_t index, const dacc *diff, size_t diff_index, bool missing) {
    cs_access a;
    if (!diff) return cs__explorer_changed(ex, index, e->actor, NULL, false);
    if (!missing) {
        int rc = cs__trace_get_access(t, e->first_access + diff_index, &a);
        if (rc) return rc;
    } else {
        /* made before, not now: its name is all that is left of it (an
         * object id only if the name is one) */
        uint64_t object = diff->all                                   ? CS_OBJECT_ALL
                          : diff->object.family == CS__NAME_STABLE ? diff->object.id
                                                                    : 0;
        a = (cs_access){object, diff->key, 0, diff->kind};
    }
    return cs__explorer_changed(ex, index, e->actor, &a, missing);
}

static int dpor_observe(cs_explorer *ex, void *state, size_t index) {
    dpor_state *s = state;
    const cs__trace *t = cs__explorer_trace(ex);
    if (index != s->depth || index >= s->n_pos) return CS_EINVAL;
    position *p = &s->pos[index];
    node *c = p->root->first;
    if (!c) return CS_EINVAL;
    cs_event e;
    int rc = cs__trace_get_event(t, index, &e);
    if (rc) return rc;
    if (grow_scratch(s, 1, e.n_accesses)) return CS_ENOMEM;
    wevent now;
    if ((rc = trace_wevent(t, s->stable_objects, index, &now, s->tacc))) return rc;
    now.anchor = (uint32_t)index; /* the node lives under this stack prefix */
    bool changed = false, missing = false;
    const dacc *diff = NULL;
    size_t diff_index = 0;
    if (c->ev.ran &&
        (rc = first_difference(s, &c->ev, &now, &changed, &diff, &diff_index, &missing)))
        return rc;
    if (changed) {
        /* reported before the node takes the new accesses (diff may point
         * into the node's): the execution is then aborted, and its prefix
         * and tree stay as they were */
        rc = replay_changed(ex, t, &e, index, diff, diff_index, missing);
        s->diverged_now = true;
        s->depth++;
        if (ensure_pos(s, index + 1)) return CS_ENOMEM;
        if (index + 1 > s->branch) {
            s->pos[index + 1].root = c;
            s->pos[index + 1].n_sleep = 0;
        }
        return rc;
    }
    now.ran = true;
    if (c->ev.known && c->ev.n_acc >= now.n_acc && (c->ev.acc || now.n_acc == 0)) {
        /* the node now describes the event as it really ran (usually the
         * same accesses: reuse the array) */
        dacc *keep = c->ev.acc;
        if (now.n_acc) memcpy(keep, now.acc, now.n_acc * sizeof *keep);
        c->ev = now;
        c->ev.acc = keep;
    } else {
        wevent copy;
        if ((rc = ev_copy(&copy, &now))) return rc;
        free(c->ev.acc);
        c->ev = copy;
    }
    s->depth++;
    if ((rc = ensure_pos(s, index + 1))) return rc;
    p = &s->pos[index]; /* ensure_pos may move the stack */
    position *q = &s->pos[index + 1];
    if (index + 1 > s->branch) {
        /* a new position: its tree is the branch taken, its sleep set the
         * sleepers independent of the event just executed */
        q->root = c;
        q->n_sleep = 0;
        for (uint32_t i = 0; i < p->n_sleep; i++)
            if (stays_asleep(p->sleep[i].ev, &now))
                if (sleep_add(q, p->sleep[i].actor, p->sleep[i].ev)) return CS_ENOMEM;
    }
    return CS_OK;
}

/* -------------------------------------------------- race detection */

/* v: the remaining elements of the wakeup sequence, as trace indices into
 * s->tev; vlen entries, vremoved marks consumed ones; the last element is e'
 * whose HB-predecessors within v are flagged in reach. */
typedef struct {
    dpor_state *s;
    const cs__trace *t;
    size_t vlen;
    size_t remaining;
    bool unstable; /* e' (the last element) read what e wrote and steps may
                      branch on what they read: its accesses where v puts it
                      are not known */
    const uint8_t *hb; /* a reported v (cs_share_import): bit m * vlen + k
                          is hb_v(m, k), for m < k; NULL: from the trace t */
} seqv;

static bool bit_at(const uint8_t *bits, size_t i) { return bits[i >> 3] >> (i & 7) & 1; }

static bool hb_v(const seqv *v, size_t m, size_t k) {
    if (v->hb) return bit_at(v->hb, m * v->vlen + k);
    if (k == v->vlen - 1) return v->s->reach[m];
    return cs__trace_hb(v->t, v->s->vidx[m], v->s->vidx[k]);
}

/* Is actor a (whose next event is ev, if known) a weak initial of v?
 * Sets *at to its first element in v, or vlen if it has none.
 *
 * "a is a weak initial" claims that E'.v and E'.ev.v (ev run first, v
 * after it) reach the same trace, so that a branch of a, or its sleeper,
 * covers v.  With a in v that holds whatever the events' accesses (nothing
 * before a's element in v happens before it).  Without a in v it needs ev
 * independent of every element of v AS IT RUNS IN E'.v, not as it ran in E:
 * - the elements of notdep(e, E) run as recorded: none of them happens after
 *   e, so none read anything written after E' that v does not also run
 *   before it;
 * - e' runs as recorded only if it read nothing e wrote (or steps have fixed
 *   accesses); otherwise (v->unstable) its accesses before e are unknown and
 *   it is taken to conflict with ev.  Comparing a sleeper with its recorded
 *   accesses lost outcomes: if s.g: read s.g else: read s.x, recorded after
 *   a write of g, never touches x, so a finished branch that wrote x was
 *   taken to cover the reversal that reads x first
 *   (tests/test_soundness_branching.py);
 * - ev itself must be exact (a sleeper always is: it ran there; a wakeup
 *   node may be a reversed step predicted from its run elsewhere, and
 *   matching v under it lost outcomes the same way). */
static bool weak_initial(const seqv *v, cs_actor a, const wevent *ev, size_t *at) {
    dpor_state *s = v->s;
    *at = v->vlen;
    for (size_t k = 0; k < v->vlen; k++) {
        if (s->vremoved[k] || s->tev[s->vidx[k]].actor != a) continue;
        *at = k;
        for (size_t m = 0; m < k; m++)
            if (!s->vremoved[m] && hb_v(v, m, k)) return false;
        return true;
    }
    if (!ev || !ev->known || !ev->exact) return false; /* accesses not known: dependent */
    for (size_t k = 0; k < v->vlen; k++) {
        if (s->vremoved[k]) continue;
        if (k == v->vlen - 1 && v->unstable) return false;
        if (dep_ev(ev, &s->tev[s->vidx[k]])) return false;
    }
    return true;
}

/* Inserts v into the wakeup tree `root` of position `at_pos`.
 *
 * Every node matched on the way is either an element of v (matched by
 * actor) or exact and independent of what is left of v (weak_initial), so
 * the elements appended below the path run as recorded, except an unstable
 * e': only that node is inexact.
 *
 * A leaf covers v when steps have fixed accesses: a free choice follows it,
 * and optimal DPOR's argument (the wakeup tree's order against the sleep
 * sets) reverses v's race from there.  Steps whose accesses depend on what
 * they read break that argument's premises (a node predicted from a run
 * elsewhere may be neither matched nor kept apart rightly, so a branch that
 * sleeps next to a leaf may be taken to cover the reversal the leaf was to
 * reach), and taking a leaf to cover v lost outcomes of
 * tests/test_soundness_branching.py ("inexact-leaf": three tasks without a
 * branch, the main task's awaits being the steps that depend on what they
 * read; "leaf-beside-inexact-node").  There the rest of v is appended below
 * the leaf: the leaf's own sequence still starts that branch, so nothing it
 * was inserted for is lost. */
static int insert_v(seqv *v, node *root, uint32_t at_pos) {
    dpor_state *s = v->s;
    node *n = root;
    for (;;) {
        if (v->remaining == 0) return CS_OK;
        if (n != root && !n->first && s->fixed_accesses) return CS_OK; /* a leaf covers v */
        node *match = NULL;
        size_t at = v->vlen;
        for (node *c = n->first; c; c = c->next)
            if (weak_initial(v, c->ev.actor, &c->ev, &at)) {
                match = c;
                break;
            }
        if (!match) break;
        if (at < v->vlen) {
            s->vremoved[at] = true;
            v->remaining--;
        }
        n = match;
    }
    for (size_t k = 0; k < v->vlen; k++) {
        if (s->vremoved[k]) continue;
        node *c = calloc(1, sizeof *c);
        if (!c) return CS_ENOMEM;
        int rc = ev_copy(&c->ev, &s->tev[s->vidx[k]]);
        if (rc) {
            free(c);
            return rc;
        }
        /* v runs after E' = pre(E, e): only that prefix is shared */
        c->ev.anchor = at_pos;
        c->ev.exact = !(k == v->vlen - 1 && v->unstable);
        node_append(n, c);
        n = c;
    }
    return CS_OK;
}

static int report(dpor_state *s, const seqv *v, size_t at_pos);

/* v reverses a race whose earlier event is event `at_pos`: unless a sleeper
 * there is a weak initial of v, v goes into the wakeup tree of that
 * position, or, when the position is the giver's (at or above the floor of
 * a process that took a branch), into a report for the giver. */
static int place(dpor_state *s, seqv *v, size_t at_pos) {
    for (size_t k = 0; k < v->vlen; k++) s->vremoved[k] = false;
    v->remaining = v->vlen;
    position *p = &s->pos[at_pos];
    for (uint32_t q = 0; q < p->n_sleep; q++) {
        size_t at;
        if (weak_initial(v, p->sleep[q].actor, p->sleep[q].ev, &at)) return CS_OK;
    }
    if (s->floor != NO_FLOOR && at_pos <= s->floor) return report(s, v, at_pos);
    return insert_v(v, p->root, (uint32_t)at_pos);
}

/* Did `reader` read something `writer` wrote (or added to)? */
static bool reads_written(const wevent *reader, const wevent *writer) {
    uint32_t shared = reader->anchor < writer->anchor ? reader->anchor : writer->anchor;
    for (uint32_t i = 0; i < reader->n_acc; i++) {
        if (reader->acc[i].kind != CS_READ) continue;
        for (uint32_t j = 0; j < writer->n_acc; j++)
            if (writer->acc[j].kind != CS_READ &&
                conflict(&reader->acc[i], &writer->acc[j], shared))
                return true;
    }
    return false;
}

/* Handles the race (i, j) of the current trace.
 *
 * e' (j) moved before e (i) may not make the accesses it made after e: when
 * it read what e wrote and steps may branch on what they read
 * (!fixed_accesses), its accesses in E'.v are unknown.  It is then taken to
 * depend on every element of v before it, and on every sleeper and wakeup
 * node whose actor has no element in v (weak_initial), so that no branch is
 * judged to cover v by way of e' being independent of it.  Predicting
 * them from its run after e missed a reversal: a task cancelled by e never
 * made the call it makes when it runs first (the crossed cancels of
 * tests/test_dpor_asyncio.py).  (Inserting e' into the tree as an unknown
 * event as well lost an outcome of tests/test_soundness_grammar.py: a node's
 * inserted accesses are what later insertions are matched against.) */
static int race(dpor_state *s, const cs__trace *t, size_t i, size_t j, bool via_release) {
    /* e' read nothing written after E' but by e, since e is its immediate
     * predecessor; an acquisition raced through a release (via_release) may
     * have read what the steps between them wrote, which v leaves out */
    bool unstable = !s->fixed_accesses && (via_release || reads_written(&s->tev[j], &s->tev[i]));
    seqv v = {s, t, 0, 0, unstable, NULL};
    /* notdep(e, E) over the whole execution, events after e' included (as
     * in the paper): with data-dependent control flow a shorter v can be
     * judged covered by a branch that never leads to the reversed trace */
    size_t len = cs__trace_len(t);
    for (size_t k = i + 1; k < len; k++)
        if (k != j && !cs__trace_hb(t, i, k)) s->vidx[v.vlen++] = (uint32_t)k;
    s->vidx[v.vlen++] = (uint32_t)j;
    /* reach[m]: element m happens before e' within E'.v, i.e. m is, or
     * happens before, an element d of v that e' depends on directly (HB
     * between elements other than e' is the trace's) */
    const wevent *ej = &s->tev[j];
    size_t nd = 0;
    for (size_t m = 0; m + 1 < v.vlen; m++) {
        s->reach[m] = unstable || dep_ev(&s->tev[s->vidx[m]], ej);
        if (s->reach[m]) s->dlist[nd++] = s->vidx[m];
    }
    for (size_t m = 0; m + 1 < v.vlen; m++)
        for (size_t q = 0; q < nd && !s->reach[m]; q++)
            if (s->dlist[q] > s->vidx[m] && cs__trace_hb(t, s->vidx[m], s->dlist[q]))
                s->reach[m] = true;
    s->reach[v.vlen - 1] = false;
    return place(s, &v, i);
}

static bool is_lock_op(const wevent *e, uint8_t kind, cs__objname *obj, uint64_t *key) {
    for (uint32_t i = 0; i < e->n_acc; i++)
        if (e->acc[i].kind == kind) {
            *obj = e->acc[i].object;
            *key = e->acc[i].key;
            return true;
        }
    return false;
}

static bool same_lock_release(const wevent *e, const cs__objname *obj, uint64_t key) {
    for (uint32_t i = 0; i < e->n_acc; i++)
        if (e->acc[i].kind == CS_LOCK_RELEASE && cs__objname_eq(&e->acc[i].object, obj) &&
            (e->acc[i].key == key || e->acc[i].key == CS_KEY_WHOLE || key == CS_KEY_WHOLE))
            return true;
    return false;
}

static int detect_races(dpor_state *s, const cs__trace *t) {
    size_t len = cs__trace_len(t);
    size_t n_acc = 0;
    for (size_t k = 0; k < len; k++) {
        cs_event e;
        if (cs__trace_get_event(t, k, &e)) return CS_EINVAL;
        n_acc += e.n_accesses;
    }
    if (grow_scratch(s, len + 1, n_acc + 1)) return CS_ENOMEM;
    size_t off = 0;
    for (size_t k = 0; k < len; k++) {
        int rc = trace_wevent(t, s->stable_objects, k, &s->tev[k], s->tacc + off);
        if (rc) return rc;
        off += s->tev[k].n_acc;
    }
    size_t pcap = 16;
    size_t *preds = malloc(pcap * sizeof *preds);
    if (!preds) return CS_ENOMEM;
    int rc = CS_OK;
    /* Every race of the execution, also those whose both events lie in the
     * replayed prefix: v depends on the events after e', which change from
     * one execution to the next. */
    for (size_t j = 1; j < len && rc == CS_OK; j++) {
        const wevent *ej = &s->tev[j];
        size_t np;
        if ((rc = cs__trace_preds(t, j, preds, pcap, &np))) break;
        if (np > pcap) {
            free(preds);
            pcap = np;
            preds = malloc(pcap * sizeof *preds);
            if (!preds) return CS_ENOMEM;
            if ((rc = cs__trace_preds(t, j, preds, pcap, &np))) break;
        }
        /* an event made runnable by a clock advance cannot move before the
         * events its barrier follows; later ones are ordinary races */
        size_t barrier = ej->after_all ? cs__trace_barrier_of(t, j) : 0;
        cs_event evj;
        cs__trace_get_event(t, j, &evj);
        cs__objname lobj = {0, 0, 0};
        uint64_t lkey = 0;
        bool acquire = is_lock_op(ej, CS_LOCK_ACQUIRE, &lobj, &lkey);
        size_t rel = SIZE_MAX;
        for (size_t q = 0; q < np && rc == CS_OK; q++) {
            size_t i = preds[q];
            const wevent *ei = &s->tev[i];
            if (ei->actor == ej->actor || evj.scheduled_by == (int64_t)i || i < barrier ||
                cs__trace_waits_for(t, j, i))
                continue;
            if (acquire && same_lock_release(ei, &lobj, lkey)) {
                rel = i;
                continue;
            }
            rc = race(s, t, i, j, false);
        }
        if (rc || rel == SIZE_MAX) continue;
        /* the acquisition matching that release: same actor, same lock */
        size_t acq = SIZE_MAX;
        for (size_t k = rel; k-- > 0;) {
            cs__objname o2;
            uint64_t k2;
            if (s->tev[k].actor == s->tev[rel].actor &&
                is_lock_op(&s->tev[k], CS_LOCK_ACQUIRE, &o2, &k2) && cs__objname_eq(&o2, &lobj) &&
                k2 == lkey) {
                acq = k;
                break;
            }
        }
        if (acq == SIZE_MAX) continue;
        bool ordered = false; /* ordered by something other than the release */
        for (size_t q = 0; q < np && !ordered; q++)
            if (preds[q] != rel && (preds[q] == acq || cs__trace_hb(t, acq, preds[q])))
                ordered = true;
        if (!ordered) rc = race(s, t, acq, j, true);
    }
    free(preds);
    return rc;
}

/* ----------------------------------------------------- backtracking */

/* Makes the childless node c a finished branch of position p: owned there,
 * its actor asleep with c's event. */
static int own_asleep(position *p, node *c) {
    if (p->n_owned == p->cap_owned) {
        /* only the array of pointers moves: sleepers point at the nodes'
         * events, which stay where they are */
        uint32_t ncap = p->cap_owned ? p->cap_owned * 2 : 4;
        node **no = realloc(p->owned, ncap * sizeof *no);
        if (!no) return CS_ENOMEM;
        p->owned = no;
        p->cap_owned = ncap;
    }
    p->owned[p->n_owned++] = c;
    return sleep_add(p, c->ev.actor, &c->ev);
}

/* Pops finished positions from k up to the next branch still to explore
 * (s->branch), putting each finished branch to sleep where it was taken.
 * Stops at a held position with nothing left to run there (waiting: the
 * reports of the branches given away may add some, cs_share_resume goes on),
 * and ends the exploration at position 0 or at this process's floor. */
static int backtrack(dpor_state *s, size_t k) {
    int rc;
    for (;;) {
        position *p = &s->pos[k];
        if ((rc = drop_redundant(p))) return rc;
        if (p->root->first || p->held) {
            /* the branches after a given one wait for its reports: they
             * may add to their subtrees (see "sharing the tree") */
            s->branch = k;
            s->waiting = p->held != 0;
            /* positions past k are rebuilt by the next execution */
            for (size_t d = s->n_pos; d-- > k + 1;) pos_clear(&s->pos[d]);
            s->n_pos = k + 1;
            return CS_OK;
        }
        if (k == 0 || k == s->floor) break;
        pos_clear(p);
        s->n_pos = k;
        k--;
        /* the branch executed at k is finished: it goes to sleep at k */
        node *c = s->pos[k].root->first;
        s->pos[k].root->first = c->next;
        if (s->pos[k].root->last == c) s->pos[k].root->last = NULL;
        c->next = NULL; /* c has no children left (checked above) */
        if ((rc = own_asleep(&s->pos[k], c))) return rc;
    }
    for (size_t d = s->n_pos; d-- > 0;) pos_clear(&s->pos[d]);
    s->n_pos = 0;
    s->exhausted = true;
    return CS_OK;
}

static int dpor_end(cs_explorer *ex, void *state, int outcome) {
    dpor_state *s = state;
    const cs__trace *t = cs__explorer_trace(ex);
    size_t len = cs__trace_len(t);
    int rc;
    if (outcome == CS_OUTCOME_ABORTED && !s->blocked_now) s->incomplete = true;
    if (len != s->depth || len >= s->n_pos) return CS_EINVAL;
    if (!s->diverged_now && (rc = detect_races(s, t))) return rc;
    size_t k = len;
    node *r = s->pos[k].root;
    if (s->diverged_now) {
        /* the prescribed branch could not run: drop it */
        node *c = r->first;
        if (c) {
            r->first = c->next;
            if (r->last == c) r->last = NULL;
            c->next = NULL;
            node_free(c);
        }
    } else if (r->first) {
        /* The execution stopped before the branches prescribed here could
         * run (step budget, or the front end ended it early): re-running the
         * same prefix would stop at the same place, so they are dropped and
         * the exploration is not complete. */
        node *c = r->first;
        r->first = r->last = NULL;
        while (c) {
            node *nx = c->next;
            c->next = NULL;
            s->incomplete = true;
            node_free(c);
            c = nx;
        }
    }
    return backtrack(s, k);
}

/* ------------------------------------------- sharing the tree (--jobs) */

/* A process can give a pending branch of a shallow position to another
 * process (a fork of it, made between two executions) and go on without
 * it; the taker explores that branch's subtree only.
 *   - The taker keeps the given branch c as the only branch of its position
 *     p (its floor) and stops when it has backtracked to it.  c is explored
 *     as if it came before the branch being run at p (f) and before the
 *     branches given earlier whose reports are not in: none of them sleeps
 *     at p in the taker, which therefore relies on nothing they would insert.
 *     Its sleepers at p are the branches finished there before the fork,
 *     whose insertions into c's subtree were made before it.
 *   - The giver puts c to sleep at p at once (a sequence that starts with c
 *     is the taker's) and holds p: when f is finished it runs nothing more
 *     at p, and does not backtrack above p, until the taker's reports are in
 *     (cs_share_import, cs_share_done).  The branches after c at p sleep c
 *     and rely on what c's subtree inserts into theirs, as they would
 *     sequentially: those insertions are among the reports.
 *   - A race the taker finds whose earlier event lies at or above its floor
 *     reverses at a position of the giver: it is checked against the taker's
 *     own sleep set there (a subset of the giver's) and becomes a report,
 *     which the giver places as it would place its own race.
 * Why that is enough: DPOR's sleep sets are sound only together with the
 * sequences the sleepers' own explorations insert into the later branches
 * (a step that branches on what it read may make a sleeper's recorded event
 * unlike the one it makes later: tests/test_share.py's first generated
 * counterexample had f asleep in the taker).  Here every sleeper of a
 * subtree was finished, with its insertions made, before the subtree was
 * explored, in every process; f and c, unordered, may both explore a trace
 * (redundant executions, never a missed one).  Every taker is a fork, so the
 * positions up to its floor are the giver's, event for event: the reports'
 * object names, valid for the first `floor` steps, mean the same there, and
 * actor ids are mapped through the actor table (cs_share_import). */

/* The branch of position p a give or take concerns: the first child after
 * the running one whose actor does not sleep there (one that sleeps is
 * redundant; backtracking drops it). */
static node *shareable(const position *p, node **before) {
    node *prev = p->root->first;
    if (!prev) return NULL;
    for (node *c = prev->next; c; prev = c, c = c->next)
        if (!asleep(p, c->ev.actor) && c->ev.actor != p->root->first->ev.actor) {
            *before = prev;
            return c;
        }
    return NULL;
}

static void free_children(node *n) {
    node *c = n->first;
    while (c) {
        node *nx = c->next;
        c->next = NULL;
        node_free(c);
        c = nx;
    }
    n->first = n->last = NULL;
}

int cs__dpor_share_offer(void *state, size_t *position, int *found) {
    dpor_state *s = state;
    *found = 0;
    if (!s->started || s->exhausted || s->waiting) return CS_OK;
    size_t lo = s->floor == NO_FLOOR ? 0 : s->floor + 1;
    /* positions before the next branch: their first child is on the path
     * the next execution replays, which the taker shares up to k */
    for (size_t k = lo; k < s->branch && k < s->n_pos; k++) {
        node *before;
        if (shareable(&s->pos[k], &before)) {
            *position = k;
            *found = 1;
            return CS_OK;
        }
    }
    return CS_OK;
}

int cs__dpor_share_give(void *state, size_t k, size_t *token) {
    dpor_state *s = state;
    node *before;
    node *c = k < s->n_pos && k < s->branch && !s->waiting ? shareable(&s->pos[k], &before)
                                                           : NULL;
    if (!c) return CS_EINVAL;
    before->next = c->next;
    if (s->pos[k].root->last == c) s->pos[k].root->last = before;
    c->next = NULL;
    free_children(c);
    int rc = own_asleep(&s->pos[k], c);
    if (rc) {
        node_free(c);
        return rc;
    }
    c->given = true;
    *token = s->pos[k].n_owned - 1;
    s->pos[k].held++;
    return CS_OK;
}

int cs__dpor_share_take(void *state, size_t k) {
    dpor_state *s = state;
    node *before;
    node *c = k < s->n_pos && k < s->branch && !s->waiting ? shareable(&s->pos[k], &before)
                                                           : NULL;
    if (!c) return CS_EINVAL;
    for (size_t d = s->n_pos; d-- > k + 1;) pos_clear(&s->pos[d]);
    s->n_pos = k + 1;
    position *p = &s->pos[k];
    node *f = p->root->first;
    /* every other branch here is the giver's: f and the rest go */
    for (node *x = f->next; x;) {
        node *nx = x->next;
        x->next = NULL;
        if (x != c) node_free(x);
        x = nx;
    }
    f->next = NULL;
    node_free(f);
    p->root->first = p->root->last = c;
    /* c is explored as if it came before f and the branches given before it
     * whose reports are not in: none of them sleeps here */
    uint32_t kept = 0;
    for (uint32_t i = 0; i < p->n_sleep; i++) {
        bool given = false;
        for (uint32_t j = 0; j < p->n_owned && !given; j++)
            given = p->owned[j]->given && &p->owned[j]->ev == p->sleep[i].ev;
        if (!given) p->sleep[kept++] = p->sleep[i];
    }
    p->n_sleep = kept;
    for (size_t d = 0; d <= k; d++) s->pos[d].held = 0;
    s->branch = k;
    s->floor = k;
    s->out_len = 0;
    return CS_OK;
}

int cs__dpor_share_done(void *state, size_t k, size_t token) {
    dpor_state *s = state;
    if (k >= s->n_pos || s->pos[k].held == 0 || token >= s->pos[k].n_owned ||
        !s->pos[k].owned[token]->given)
        return CS_EINVAL;
    s->pos[k].owned[token]->given = false;
    s->pos[k].held--;
    return CS_OK;
}

int cs__dpor_share_waiting(void *state, size_t *position, int *waiting) {
    dpor_state *s = state;
    *waiting = s->waiting;
    if (s->waiting) *position = s->n_pos - 1;
    return CS_OK;
}

int cs__dpor_share_resume(void *state) {
    dpor_state *s = state;
    if (!s->waiting) return CS_EINVAL;
    s->waiting = false;
    return backtrack(s, s->n_pos - 1);
}

/* ---- reports: a byte string of records, each
 *   uint32 position, uint32 vlen, uint32 n_acc (all elements), uint8 unstable
 *   vlen x wevent (acc pointer cleared), n_acc x dacc (the elements' in order)
 *   (vlen * vlen + 7) / 8 bytes: bit m * vlen + k = hb_v(m, k)
 * in this binary's layout (giver and taker are forks of one process). */

typedef struct {
    uint32_t position, vlen, n_acc;
    uint8_t unstable;
} report_head;

static int out_put(dpor_state *s, const void *data, size_t n) {
    if (s->out_len + n > s->out_cap) {
        size_t ncap = s->out_cap ? s->out_cap : 4096;
        while (ncap < s->out_len + n) ncap *= 2;
        uint8_t *no = realloc(s->out, ncap);
        if (!no) return CS_ENOMEM;
        s->out = no;
        s->out_cap = ncap;
    }
    memcpy(s->out + s->out_len, data, n);
    s->out_len += n;
    return CS_OK;
}

/* Appends v (all its elements, as place() leaves them) reversing at
 * `at_pos` to the reports.  The elements' names hold for the prefix this
 * process shares with its giver: their anchors are clamped to the floor. */
static int report(dpor_state *s, const seqv *v, size_t at_pos) {
    size_t vlen = v->vlen;
    report_head h = {(uint32_t)at_pos, (uint32_t)vlen, 0, v->unstable};
    for (size_t k = 0; k < vlen; k++) h.n_acc += s->tev[s->vidx[k]].n_acc;
    size_t start = s->out_len;
    int rc = out_put(s, &h, sizeof h);
    for (size_t k = 0; k < vlen && rc == CS_OK; k++) {
        wevent e = s->tev[s->vidx[k]];
        e.acc = NULL;
        if (e.anchor > s->floor) e.anchor = (uint32_t)s->floor;
        rc = out_put(s, &e, sizeof e);
    }
    for (size_t k = 0; k < vlen && rc == CS_OK; k++) {
        const wevent *e = &s->tev[s->vidx[k]];
        if (e->n_acc) rc = out_put(s, e->acc, e->n_acc * sizeof(dacc));
    }
    size_t nbits = (vlen * vlen + 7) / 8;
    if (rc == CS_OK) {
        uint8_t *bits = calloc(nbits ? nbits : 1, 1);
        if (!bits) rc = CS_ENOMEM;
        for (size_t k = 0; bits && k < vlen; k++)
            for (size_t m = 0; m < k; m++)
                if (hb_v(v, m, k)) {
                    size_t b = m * vlen + k;
                    bits[b >> 3] |= (uint8_t)(1u << (b & 7));
                }
        if (bits) {
            rc = out_put(s, bits, nbits);
            free(bits);
        }
    }
    if (rc) s->out_len = start;
    return rc;
}

int cs__dpor_share_reports(void *state, const uint8_t **buf, size_t *len) {
    dpor_state *s = state;
    *buf = s->out;
    *len = s->out_len;
    return CS_OK;
}

void cs__dpor_share_reports_clear(void *state) { ((dpor_state *)state)->out_len = 0; }

static int map_actor(cs_actor *a, const cs_actor *map, size_t n_map) {
    if (*a == CS_NO_ACTOR) return CS_OK;
    if ((size_t)*a >= n_map) return CS_EINVAL;
    *a = map[*a];
    return CS_OK;
}

/* The giver's side: each report of a taker (actor ids of the taker's table,
 * map[taker id] = this process's id) is placed as this process's own race
 * would be, or reported on when its position is above this process's own
 * floor. */
int cs__dpor_share_import(void *state, const uint8_t *buf, size_t len, const cs_actor *map,
                          size_t n_map) {
    dpor_state *s = state;
    size_t off = 0;
    while (off < len) {
        report_head h;
        if (len - off < sizeof h) return CS_EINVAL;
        memcpy(&h, buf + off, sizeof h);
        off += sizeof h;
        size_t nbits = ((size_t)h.vlen * h.vlen + 7) / 8;
        size_t need = (size_t)h.vlen * sizeof(wevent) + (size_t)h.n_acc * sizeof(dacc) + nbits;
        if (h.vlen == 0 || len - off < need || h.position >= s->n_pos) return CS_EINVAL;
        int rc = grow_scratch(s, h.vlen, h.n_acc + 1);
        if (rc) return rc;
        const uint8_t *evp = buf + off;
        const uint8_t *accp = evp + (size_t)h.vlen * sizeof(wevent);
        const uint8_t *bits = accp + (size_t)h.n_acc * sizeof(dacc);
        off += need;
        size_t a = 0;
        for (size_t k = 0; k < h.vlen; k++) {
            wevent *e = &s->tev[k];
            memcpy(e, evp + k * sizeof(wevent), sizeof *e);
            if (a + e->n_acc > h.n_acc) return CS_EINVAL;
            e->acc = s->tacc + a;
            memcpy(e->acc, accp + a * sizeof(dacc), e->n_acc * sizeof(dacc));
            a += e->n_acc;
            if ((rc = map_actor(&e->actor, map, n_map)) ||
                (rc = map_actor(&e->sb_actor, map, n_map)))
                return rc;
            for (uint32_t i = 0; i < e->n_acc; i++) {
                cs__objname *o = &e->acc[i].object;
                if (o->family != CS__NAME_CREATED) continue;
                cs_actor who = (cs_actor)(o->id >> 32);
                if ((rc = map_actor(&who, map, n_map))) return rc;
                o->id = (uint64_t)who << 32 | (o->id & 0xffffffffu);
            }
            s->vidx[k] = (uint32_t)k;
        }
        if (a != h.n_acc) return CS_EINVAL;
        seqv v = {s, NULL, h.vlen, h.vlen, h.unstable != 0, bits};
        if ((rc = place(s, &v, h.position))) return rc;
    }
    return CS_OK;
}

const cs__strategy_ops cs__strategy_dpor = {
    "dpor", dpor_create, dpor_destroy, dpor_begin,
    dpor_choose, dpor_observe, dpor_end,
};
