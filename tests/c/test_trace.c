/* test_trace.c -- vector clocks, dependency, covering relation and the
 * Mazurkiewicz fingerprint, checked against brute force on random traces,
 * including long chains of one-step actors (asyncio callbacks). */
#include "ctest.h"
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------ a random trace */

#define MAXE 40
#define MAXA 4

typedef struct {
    cs_actor actor;
    int64_t by;
    int after; /* -1, or the prefix of a step begun with cs__trace_step_begin_after */
    int n;
    cs_access acc[MAXA];
} gev;

typedef struct {
    int n;
    gev e[MAXE];
} gtrace;

static uint64_t lcg_state;
/* 1: gen() turns about one access in eight into a global barrier access
 * (object CS_OBJECT_ALL); 0 keeps the generator's historical stream. */
static int gen_barriers;
/* 1: gen() turns about one keyed access in three into a CS_ADD (commutative update) */
static int gen_adds;
/* 1: gen() gives about half of its CS_AFTER_ALL steps an explicit barrier, an
 * earlier prefix (cs__trace_step_begin_after) */
static int gen_prefixes;
static uint32_t rnd(uint32_t bound) {
    lcg_state = lcg_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)((lcg_state >> 33) % bound);
}

static void gen(gtrace *g, int n, int n_actors, int n_objects, int n_keys) {
    g->n = n;
    for (int i = 0; i < n; i++) {
        gev *e = &g->e[i];
        e->actor = rnd((uint32_t)n_actors);
        uint32_t r = rnd(10);
        e->by = (i > 0 && r < 2) ? (int64_t)rnd((uint32_t)i) : (r == 2 && i > 0 ? CS_AFTER_ALL : -1);
        e->after = -1;
        if (gen_prefixes && e->by == CS_AFTER_ALL && rnd(2)) e->after = (int)rnd((uint32_t)i + 1);
        e->n = (int)rnd(MAXA + 1);
        for (int k = 0; k < e->n; k++) {
            e->acc[k].object = 100 + rnd((uint32_t)n_objects);
            if (gen_barriers && rnd(8) == 0) e->acc[k].object = CS_OBJECT_ALL;
            e->acc[k].key = rnd(5) == 0 ? CS_KEY_WHOLE : rnd((uint32_t)n_keys);
            e->acc[k].kind = rnd(2) ? CS_READ : CS_WRITE;
            if (gen_adds && e->acc[k].key != CS_KEY_WHOLE && e->acc[k].object != CS_OBJECT_ALL &&
                rnd(3) == 0)
                e->acc[k].kind = CS_ADD;
            e->acc[k].site = (uint32_t)k;
        }
    }
}

static int record(cs__trace *t, const gtrace *g) {
    cs__trace_reset(t);
    for (int i = 0; i < g->n; i++) {
        const gev *e = &g->e[i];
        int rc = e->after >= 0 ? cs__trace_step_begin_after(t, e->actor, (size_t)e->after)
                               : cs__trace_step_begin(t, e->actor, e->by);
        if (rc) return -1;
        for (int k = 0; k < e->n; k++)
            if (cs__trace_access_add(t, e->acc[k].object, e->acc[k].key,
                                    (cs_access_kind)e->acc[k].kind, e->acc[k].site))
                return -1;
        if (cs__trace_step_end(t)) return -1;
    }
    return 0;
}

static bool ref_dep(const gtrace *g, int a, int b) {
    if (a > b) { int x = a; a = b; b = x; }
    const gev *x = &g->e[a], *y = &g->e[b];
    if (x->actor == y->actor) return true;
    if (y->by == a) return true;
    /* no cs__trace_barrier in these traces: CS_AFTER_ALL follows every earlier event, a
     * given prefix only the events before it */
    if (y->by == CS_AFTER_ALL && (y->after < 0 || a < y->after)) return true;
    for (int i = 0; i < x->n; i++)
        for (int j = 0; j < y->n; j++) {
            const cs_access *p = &x->acc[i], *q = &y->acc[j];
            /* reads commute, and so do adds (CS_ADD) */
            if (p->kind == q->kind && (p->kind == CS_READ || p->kind == CS_ADD)) continue;
            /* the barrier overlaps every resource, itself included */
            if (p->object == CS_OBJECT_ALL || q->object == CS_OBJECT_ALL) return true;
            if (p->object != q->object) continue;
            if (p->key == q->key || p->key == CS_KEY_WHOLE || q->key == CS_KEY_WHOLE)
                return true;
        }
    return false;
}

/* hb[a][b]: transitive closure of dependency restricted to a < b */
static void ref_hb(const gtrace *g, bool hb[MAXE][MAXE]) {
    memset(hb, 0, sizeof(bool) * MAXE * MAXE);
    for (int b = 0; b < g->n; b++)
        for (int a = b - 1; a >= 0; a--) {
            if (ref_dep(g, a, b)) hb[a][b] = true;
            if (hb[a][b])
                for (int c = 0; c < a; c++)
                    if (hb[c][a]) hb[c][b] = true;
        }
}

/* ------------------------------------------------------------- tests */

static void test_basic_clocks(void) {
    cs__trace *t = NULL;
    CHECK_EQ(cs__trace_new(&t), CS_OK);
    /* 0: a writes x; 1: b reads y; 2: b reads x; 3: a reads y */
    CHECK_EQ(cs__trace_step_begin(t, 0, -1), CS_OK);
    CHECK_EQ(cs__trace_access_add(t, 1, 7, CS_WRITE, 0), CS_OK);
    CHECK_EQ(cs__trace_step_end(t), CS_OK);
    CHECK_EQ(cs__trace_step_begin(t, 1, -1), CS_OK);
    CHECK_EQ(cs__trace_access_add(t, 1, 8, CS_READ, 0), CS_OK);
    CHECK_EQ(cs__trace_step_end(t), CS_OK);
    CHECK_EQ(cs__trace_step_begin(t, 1, -1), CS_OK);
    CHECK_EQ(cs__trace_access_add(t, 1, 7, CS_READ, 0), CS_OK);
    CHECK_EQ(cs__trace_step_end(t), CS_OK);
    CHECK_EQ(cs__trace_step_begin(t, 0, -1), CS_OK);
    CHECK_EQ(cs__trace_access_add(t, 1, 8, CS_READ, 0), CS_OK);
    CHECK_EQ(cs__trace_step_end(t), CS_OK);
    CHECK_EQ(cs__trace_len(t), 4);
    CHECK(cs__trace_hb(t, 0, 2));
    CHECK(!cs__trace_hb(t, 1, 3));
    CHECK(!cs__trace_hb(t, 0, 1));
    CHECK(cs__trace_hb(t, 1, 2));
    CHECK(!cs__trace_hb(t, 2, 0));
    CHECK(cs__trace_dep(t, 0, 2));
    CHECK(!cs__trace_dep(t, 1, 3));
    const uint32_t *clk;
    size_t len;
    CHECK_EQ(cs__trace_get_clock(t, 2, &clk, &len), CS_OK);
    CHECK_EQ(len, 2);
    CHECK_EQ(clk[0], 1);
    CHECK_EQ(clk[1], 2);
    size_t preds[4], np;
    CHECK_EQ(cs__trace_preds(t, 2, preds, 4, &np), CS_OK);
    CHECK_EQ(np, 2);
    cs_event ev;
    CHECK_EQ(cs__trace_get_event(t, 3, &ev), CS_OK);
    CHECK_EQ(ev.actor, 0);
    CHECK_EQ(ev.actor_step, 1);
    CHECK_EQ(cs__trace_get_event(t, 4, &ev), CS_EINVAL);
    /* out of sequence */
    CHECK_EQ(cs__trace_step_end(t), CS_ESTATE);
    CHECK_EQ(cs__trace_access_add(t, 1, 1, CS_READ, 0), CS_ESTATE);
    CHECK_EQ(cs__trace_step_begin(t, 0, 9), CS_EINVAL);
    cs__trace_free(t);
}

static void test_wildcard_and_after_all(void) {
    cs__trace *t = NULL;
    CHECK_EQ(cs__trace_new(&t), CS_OK);
    /* 0: a reads (o,1); 1: b writes (o,WHOLE); 2: c reads (o,2);
     * 3: d reads (p,1) after all */
    cs__trace_step_begin(t, 0, -1);
    cs__trace_access_add(t, 5, 1, CS_READ, 0);
    cs__trace_step_end(t);
    cs__trace_step_begin(t, 1, -1);
    cs__trace_access_add(t, 5, CS_KEY_WHOLE, CS_WRITE, 0);
    cs__trace_step_end(t);
    cs__trace_step_begin(t, 2, -1);
    cs__trace_access_add(t, 5, 2, CS_READ, 0);
    cs__trace_step_end(t);
    CHECK(cs__trace_hb(t, 0, 1));
    CHECK(cs__trace_hb(t, 1, 2));
    CHECK(cs__trace_hb(t, 0, 2));
    size_t p[4], np;
    cs__trace_preds(t, 2, p, 4, &np);
    CHECK_EQ(np, 1);
    CHECK_EQ(p[0], 1);
    cs__trace_step_begin(t, 3, CS_AFTER_ALL);
    cs__trace_access_add(t, 6, 1, CS_READ, 0);
    cs__trace_step_end(t);
    CHECK(cs__trace_hb(t, 0, 3) && cs__trace_hb(t, 2, 3));
    cs__trace_preds(t, 3, p, 4, &np);
    CHECK_EQ(np, 1);
    CHECK_EQ(p[0], 2);
    CHECK(cs__trace_dep(t, 0, 3));
    /* lock operations conflict like writes: 4 acquire, 5 release, 6 acquire */
    cs__trace_step_begin(t, 0, -1);
    cs__trace_access_add(t, 9, 0, CS_LOCK_ACQUIRE, 0);
    cs__trace_step_end(t);
    cs__trace_step_begin(t, 0, -1);
    cs__trace_access_add(t, 9, 0, CS_LOCK_RELEASE, 0);
    cs__trace_step_end(t);
    cs__trace_step_begin(t, 1, -1);
    cs__trace_access_add(t, 9, 0, CS_LOCK_ACQUIRE, 0);
    cs__trace_step_end(t);
    CHECK(cs__trace_dep(t, 5, 6));
    CHECK(cs__trace_hb(t, 4, 6));
    cs__trace_preds(t, 6, p, 4, &np);
    CHECK_EQ(np, 2); /* the release 5, and actor 1's previous step 1 */
    CHECK_EQ(cs__trace_access_add(t, 1, 1, (cs_access_kind)9, 0), CS_ESTATE);
    cs__trace_step_begin(t, 1, -1);
    CHECK_EQ(cs__trace_access_add(t, 1, 1, (cs_access_kind)9, 0), CS_EINVAL);
    cs__trace_step_end(t);
    cs__trace_free(t);
}

static uint64_t fp_of(const cs__trace *t) {
    uint64_t f = 0;
    CHECK_EQ(cs__trace_fingerprint(t, &f), CS_OK);
    return f;
}

/* Random traces: clocks, HB, dependency and preds equal brute force. */
static void random_against_brute_force(uint64_t seed) {
    static bool hb[MAXE][MAXE];
    cs__trace *t = NULL;
    CHECK_EQ(cs__trace_new(&t), CS_OK);
    lcg_state = seed;
    for (int round = 0; round < 400; round++) {
        gtrace g;
        gen(&g, 1 + (int)rnd(MAXE), 1 + (int)rnd(5), 1 + (int)rnd(3), 1 + (int)rnd(3));
        CHECK_EQ(record(t, &g), 0);
        ref_hb(&g, hb);
        int bad = 0;
        for (int a = 0; a < g.n; a++)
            for (int b = 0; b < g.n; b++) {
                if (a != b && cs__trace_dep(t, (size_t)a, (size_t)b) != ref_dep(&g, a, b)) bad++;
                if (cs__trace_hb(t, (size_t)a, (size_t)b) != (a != b && hb[a][b])) bad++;
            }
        for (int b = 0; b < g.n; b++) {
            /* the actor-indexed clock: clock[a] = a's events before or at b */
            const uint32_t *clk;
            size_t len;
            CHECK_EQ(cs__trace_get_clock(t, (size_t)b, &clk, &len), CS_OK);
            size_t want_len = 0;
            for (int x = 0; x <= b; x++)
                if (g.e[x].actor + 1 > want_len) want_len = g.e[x].actor + 1;
            if (len != want_len) bad++;
            for (size_t a = 0; a < len; a++) {
                uint32_t want = 0;
                for (int x = 0; x <= b; x++)
                    if (g.e[x].actor == a && (x == b || hb[x][b])) want++;
                if (clk[a] != want) bad++;
            }
            size_t p[MAXE], np;
            CHECK_EQ(cs__trace_preds(t, (size_t)b, p, MAXE, &np), CS_OK);
            bool is_pred[MAXE] = {0};
            for (size_t k = 0; k < np; k++) is_pred[p[k]] = true;
            for (int a = 0; a < b; a++) {
                bool cover = hb[a][b];
                for (int c = a + 1; c < b && cover; c++)
                    if (hb[a][c] && hb[c][b]) cover = false;
                if (cover != is_pred[a]) bad++;
            }
        }
        CHECK_EQ(bad, 0);
        if (bad) break;
    }
    cs__trace_free(t);
}

static void test_random_against_brute_force(void) { random_against_brute_force(12345); }

/* The same with global barrier accesses (CS_OBJECT_ALL) mixed in: a barrier
 * write depends on every accessing event, a barrier read on every write. */
static void test_random_with_barriers_against_brute_force(void) {
    gen_barriers = 1;
    random_against_brute_force(4242);
    gen_barriers = 0;
}

/* The same with CS_AFTER_ALL steps whose barrier is an earlier prefix of the trace: they
 * follow the events before it (its maximal events, recomputed from the covering relation),
 * and only those. */
static void test_random_with_prefix_barriers_against_brute_force(void) {
    gen_prefixes = 1;
    random_against_brute_force(9090);
    gen_barriers = 1;
    random_against_brute_force(9191);
    gen_barriers = 0;
    gen_prefixes = 0;
}

/* The same with commutative updates (CS_ADD) mixed in, and barriers: an add follows the
 * writes and reads of its resource, a read or write follows the adds, adds stay unordered;
 * equivalent orders share a fingerprint. */
/* By hand: two adds of a counter by different actors stay unordered; a read (an enabling one)
 * follows both and waits for both; a write follows all.  Adds are keyed only; an enabling
 * write is refused by the explorer (cs_access_record). */
static void test_adds_and_an_enabling_read_by_hand(void) {
    cs__trace *t = NULL;
    CHECK_EQ(cs__trace_new(&t), CS_OK);
    for (cs_actor a = 0; a < 2; a++) {
        CHECK_EQ(cs__trace_step_begin(t, a, -1), CS_OK);
        CHECK_EQ(cs__trace_access_add(t, 5, 1, CS_ADD, 0), CS_OK);
        CHECK_EQ(cs__trace_step_end(t), CS_OK);
    }
    CHECK_EQ(cs__trace_step_begin(t, 2, 1), CS_OK);
    CHECK_EQ(cs__trace_access_add(t, 5, 1, (cs_access_kind)(CS_READ | CS_ENABLING), 0), CS_OK);
    CHECK_EQ(cs__trace_step_end(t), CS_OK);
    CHECK_EQ(cs__trace_step_begin(t, 3, -1), CS_OK);
    CHECK_EQ(cs__trace_access_add(t, 5, 1, CS_READ, 0), CS_OK);
    CHECK_EQ(cs__trace_step_end(t), CS_OK);
    CHECK_EQ(cs__trace_step_begin(t, 4, -1), CS_OK);
    CHECK_EQ(cs__trace_access_add(t, 5, CS_KEY_WHOLE, CS_WRITE, 0), CS_OK);
    CHECK_EQ(cs__trace_access_add(t, 5, CS_KEY_WHOLE, CS_ADD, 0), CS_EINVAL);
    CHECK_EQ(cs__trace_access_add(t, CS_OBJECT_ALL, 1, CS_ADD, 0), CS_EINVAL);
    CHECK_EQ(cs__trace_step_end(t), CS_OK);
    CHECK(!cs__trace_dep(t, 0, 1));
    CHECK(!cs__trace_hb(t, 0, 1));
    CHECK(cs__trace_hb(t, 0, 2) && cs__trace_hb(t, 1, 2));
    CHECK(cs__trace_waits_for(t, 2, 0) && cs__trace_waits_for(t, 2, 1));
    /* a plain read follows the adds too, but does not wait for them */
    CHECK(cs__trace_hb(t, 0, 3) && !cs__trace_waits_for(t, 3, 0));
    CHECK(!cs__trace_hb(t, 2, 3));
    for (size_t e = 0; e < 4; e++) CHECK(cs__trace_hb(t, e, 4));
    size_t preds[8], np;
    CHECK_EQ(cs__trace_preds(t, 4, preds, 8, &np), CS_OK);
    CHECK_EQ(np, 2); /* the two reads, which follow both adds */
    cs__trace_free(t);

    cs_config cfg;
    cs_config_init(&cfg, CS_STRATEGY_FIFO);
    cs_explorer *ex = NULL;
    CHECK_EQ(cs_explorer_new(&cfg, &ex), CS_OK);
    cs_actor only;
    CHECK_EQ(cs_actor_intern(ex, CS_NO_ACTOR, 0, &only), CS_OK);
    int more = 0;
    CHECK_EQ(cs_execution_begin(ex, &more), CS_OK);
    CHECK_EQ(more, 1);
    size_t chosen;
    CHECK_EQ(cs_choose(ex, &only, 1, &chosen), CS_OK);
    CHECK_EQ(cs_step_begin(ex, only, CS_SCHEDULED_BY_NONE), CS_OK);
    CHECK_EQ(cs_access_record(ex, 5, 1, (cs_access_kind)(CS_WRITE | CS_ENABLING), 0), CS_EINVAL);
    CHECK_EQ(cs_access_record(ex, 5, CS_KEY_WHOLE, CS_ADD, 0), CS_EINVAL);
    CHECK_EQ(cs_access_record(ex, 5, 1, CS_ADD, 0), CS_OK);
    int ended = cs_step_end(ex);
    CHECK_EQ(ended, CS_OK);
    cs_explorer_free(ex);
}

static void fingerprint_check(uint64_t seed);
static void test_random_with_adds_against_brute_force(void) {
    gen_adds = 1;
    random_against_brute_force(9001);
    gen_barriers = 1;
    random_against_brute_force(9002);
    fingerprint_check(9003);
    gen_barriers = 0;
    gen_adds = 0;
}

/* Re-records g in the order perm (a linearisation of its HB order). */
static void permute(const gtrace *g, const int *perm, gtrace *out) {
    int pos[MAXE];
    for (int i = 0; i < g->n; i++) pos[perm[i]] = i;
    out->n = g->n;
    for (int i = 0; i < g->n; i++) {
        out->e[i] = g->e[perm[i]];
        if (out->e[i].by >= 0) out->e[i].by = pos[out->e[i].by];
    }
}

/* Random linearisation of the HB order of g.  A CS_AFTER_ALL event is a
 * barrier: an event placed before it would become its HB predecessor. */
static void random_linearisation(const gtrace *g, bool hb[MAXE][MAXE], int *perm) {
    bool done[MAXE] = {0};
    for (int k = 0; k < g->n; k++) {
        int ready[MAXE], nr = 0;
        for (int b = 0; b < g->n; b++) {
            if (done[b]) continue;
            bool ok = true;
            for (int a = 0; a < b && ok; a++)
                if ((hb[a][b] || g->e[a].by == CS_AFTER_ALL) && !done[a]) ok = false;
            if (ok) ready[nr++] = b;
        }
        int x = ready[rnd((uint32_t)nr)];
        done[x] = true;
        perm[k] = x;
    }
}

static void fingerprint_check(uint64_t seed) {
    static bool hb[MAXE][MAXE], hb2[MAXE][MAXE];
    cs__trace *t = NULL;
    CHECK_EQ(cs__trace_new(&t), CS_OK);
    lcg_state = seed;
    int differing = 0, same_fail = 0, diff_fail = 0;
    for (int round = 0; round < 300; round++) {
        gtrace g, g2;
        gen(&g, 2 + (int)rnd(MAXE - 2), 2 + (int)rnd(4), 1 + (int)rnd(3), 1 + (int)rnd(3));
        record(t, &g);
        uint64_t f = fp_of(t);
        ref_hb(&g, hb);
        int perm[MAXE];
        random_linearisation(&g, hb, perm);
        permute(&g, perm, &g2);
        record(t, &g2);
        if (fp_of(t) != f) same_fail++;
        /* swap two adjacent dependent events of different actors where the
         * later one was not scheduled by the earlier: a different trace */
        for (int i = 0; i + 1 < g.n; i++) {
            if (g.e[i].actor == g.e[i + 1].actor || g.e[i + 1].by == i ||
                g.e[i + 1].by == CS_AFTER_ALL || g.e[i].by == CS_AFTER_ALL ||
                !ref_dep(&g, i, i + 1))
                continue;
            int sw[MAXE];
            for (int k = 0; k < g.n; k++) sw[k] = k;
            sw[i] = i + 1;
            sw[i + 1] = i;
            permute(&g, sw, &g2);
            ref_hb(&g2, hb2);
            record(t, &g2);
            if (fp_of(t) == f) diff_fail++;
            differing++;
            break;
        }
    }
    CHECK_EQ(same_fail, 0);
    CHECK_EQ(diff_fail, 0);
    CHECK(differing > 50);
    cs__trace_free(t);
}

static void test_fingerprint(void) { fingerprint_check(777); }

/* Equivalent orders of traces with barriers share a fingerprint; swapping a
 * barrier with an adjacent accessing event of another actor changes it. */
static void test_fingerprint_with_barriers(void) {
    gen_barriers = 1;
    fingerprint_check(31337);
    gen_barriers = 0;
}

/* The barrier's happens-before by hand: a write of CS_OBJECT_ALL follows
 * every earlier accessing event (its immediate predecessors are each
 * actor's last one), not an event without accesses; a later read of any
 * resource follows it; a barrier read follows writes only. */
static void test_global_barrier_clocks(void) {
    cs__trace *t = NULL;
    CHECK_EQ(cs__trace_new(&t), CS_OK);
    /* 0: a w(1,1)  1: b r(2,5)  2: c (no access)  3: a r(3,0)
     * 4: d W(ALL)  5: b r(9,9)  6: c r(ALL)  7: e w(7,7)  8: f r(ALL) */
    struct { cs_actor a; uint64_t o, k; int kind; } ev[] = {
        {0, 1, 1, CS_WRITE}, {1, 2, 5, CS_READ}, {2, 0, 0, 0}, {0, 3, 0, CS_READ},
        {3, CS_OBJECT_ALL, 0, CS_WRITE}, {1, 9, 9, CS_READ}, {2, CS_OBJECT_ALL, 4, CS_READ},
        {4, 7, 7, CS_WRITE}, {5, CS_OBJECT_ALL, CS_KEY_WHOLE, CS_READ},
    };
    for (size_t i = 0; i < sizeof ev / sizeof *ev; i++) {
        CHECK_EQ(cs__trace_step_begin(t, ev[i].a, CS_SCHEDULED_BY_NONE), CS_OK);
        if (ev[i].kind)
            CHECK_EQ(cs__trace_access_add(t, ev[i].o, ev[i].k, (cs_access_kind)ev[i].kind, 0),
                     CS_OK);
        CHECK_EQ(cs__trace_step_end(t), CS_OK);
    }
    size_t p[8], np;
    CHECK_EQ(cs__trace_preds(t, 4, p, 8, &np), CS_OK);
    CHECK_EQ(np, 2); /* 1 and 3 (0 precedes 3 by program order; 2 has no access) */
    CHECK(np == 2 && ((p[0] == 1 && p[1] == 3) || (p[0] == 3 && p[1] == 1)));
    CHECK(!cs__trace_hb(t, 2, 4));
    CHECK(cs__trace_hb(t, 0, 4));
    CHECK(cs__trace_hb(t, 4, 5)); /* any later access follows the barrier write */
    CHECK(cs__trace_dep(t, 4, 5));
    CHECK(!cs__trace_dep(t, 5, 6)); /* a barrier read and a read */
    CHECK(cs__trace_dep(t, 6, 7)); /* a barrier read and a write */
    CHECK(cs__trace_hb(t, 6, 7));
    CHECK(!cs__trace_dep(t, 6, 8)); /* two barrier reads */
    CHECK(cs__trace_hb(t, 7, 8));
    CHECK_EQ(cs__trace_preds(t, 8, p, 8, &np), CS_OK);
    CHECK_EQ(np, 1);
    CHECK_EQ(p[0], 7);
    CHECK(!cs__trace_dep(t, 2, 4));
    /* the barrier is named stable whatever the flags: never an address */
    cs__objname name;
    uint32_t birth = 99;
    CHECK_EQ(cs__trace_object_name(t, 3, &name, &birth), CS_OK); /* event 4's access */
    CHECK_EQ(birth, 0);
    CHECK_EQ(name.family, CS__NAME_STABLE);
    CHECK(name.id == CS_OBJECT_ALL);
    cs__trace_free(t);
}

/* Names hold their data whole: objects first accessed in different events
 * at the same access index, or created in different steps, never share a
 * name (a 24-bit mask once folded access indices together). */
static void test_object_names_never_collide(void) {
    cs__trace *t = NULL;
    CHECK_EQ(cs__trace_new(&t), CS_OK);
    enum { STEPS = 3, PER = 3 };
    for (int i = 0; i < STEPS; i++) {
        CHECK_EQ(cs__trace_step_begin(t, (cs_actor)(i % 2), CS_SCHEDULED_BY_NONE), CS_OK);
        for (int k = 0; k < PER; k++) {
            uint64_t obj = 1000 + (uint64_t)(i * PER + k);
            int flag = k == 0 ? CS_ID_CREATED : 0;
            CHECK_EQ(cs__trace_access_add(t, obj, 0, (cs_access_kind)(CS_WRITE | flag), 0),
                     CS_OK);
        }
        CHECK_EQ(cs__trace_step_end(t), CS_OK);
    }
    /* stable ids differing only in their top bits stay apart */
    CHECK_EQ(cs__trace_step_begin(t, 0, CS_SCHEDULED_BY_NONE), CS_OK);
    CHECK_EQ(cs__trace_access_add(t, 5, 0, (cs_access_kind)(CS_READ | CS_ID_STABLE), 0), CS_OK);
    CHECK_EQ(cs__trace_access_add(t, 5 | 1ULL << 63, 0,
                                  (cs_access_kind)(CS_READ | CS_ID_STABLE), 0), CS_OK);
    CHECK_EQ(cs__trace_access_add(t, 5 | 1ULL << 62, 0,
                                  (cs_access_kind)(CS_READ | CS_ID_STABLE), 0), CS_OK);
    CHECK_EQ(cs__trace_step_end(t), CS_OK);
    size_t n = STEPS * PER + 3;
    cs__objname names[STEPS * PER + 3];
    for (size_t a = 0; a < n; a++) {
        uint32_t birth;
        CHECK_EQ(cs__trace_object_name(t, a, &names[a], &birth), CS_OK);
    }
    int same = 0;
    for (size_t a = 0; a < n; a++)
        for (size_t b = a + 1; b < n; b++) same += cs__objname_eq(&names[a], &names[b]);
    CHECK_EQ(same, 0);
    cs__trace_free(t);
}

/* Exhaustive check on a tiny program: the number of distinct fingerprints
 * over all interleavings equals the number of distinct HB partial orders. */
static void test_fingerprint_counts(void) {
    /* three actors: a: w(x); b: r(x); c: r(y).  Interleavings: 3! = 6.
     * Traces: order of a's write vs b's read matters (2), c is independent. */
    cs__trace *t = NULL;
    cs__trace_new(&t);
    int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    uint64_t fp[6];
    for (int p = 0; p < 6; p++) {
        cs__trace_reset(t);
        for (int k = 0; k < 3; k++) {
            int a = perms[p][k];
            cs__trace_step_begin(t, (cs_actor)a, -1);
            if (a == 0) cs__trace_access_add(t, 1, 1, CS_WRITE, 0);
            if (a == 1) cs__trace_access_add(t, 1, 1, CS_READ, 0);
            if (a == 2) cs__trace_access_add(t, 1, 2, CS_READ, 0);
            cs__trace_step_end(t);
        }
        fp[p] = fp_of(t);
    }
    int distinct = 0;
    for (int i = 0; i < 6; i++) {
        bool seen = false;
        for (int j = 0; j < i; j++) seen |= fp[j] == fp[i];
        distinct += !seen;
    }
    CHECK_EQ(distinct, 2);
    cs__trace_free(t);
}

/* Many resets with long executions: memory is reused (ASan checks leaks). */
static void test_reset_reuse(void) {
    cs__trace *t = NULL;
    cs__trace_new(&t);
    for (int round = 0; round < 20; round++) {
        cs__trace_reset(t);
        for (int i = 0; i < 500; i++) {
            CHECK_EQ(cs__trace_step_begin(t, (cs_actor)(i % 7), i > 0 && i % 11 == 0 ? CS_AFTER_ALL : -1), CS_OK);
            cs__trace_access_add(t, (uint64_t)(i % 13), (uint64_t)(i % 3), i % 2 ? CS_READ : CS_WRITE, 0);
            cs__trace_access_add(t, (uint64_t)(i % 5), CS_KEY_WHOLE, CS_READ, 0);
            CHECK_EQ(cs__trace_step_end(t), CS_OK);
        }
        CHECK_EQ(cs__trace_len(t), 500);
        CHECK(cs__trace_hb(t, 0, 499));
    }
    cs__trace_free(t);
}


/* ------------------------------------- long chains of one-step actors */

#define BIGE 240

typedef struct {
    int n;
    cs_actor actor[BIGE];
    int64_t by[BIGE];
    int na[BIGE];
    cs_access acc[BIGE][2];
} btrace;

/* Callback-shaped traces: most events are fresh one-step actors scheduled by
 * a recent event (ping-pong chains that fork), the rest a few long-lived
 * actors; sparse conflicts on a few objects; some CS_AFTER_ALL. */
static void gen_callbacks(btrace *g, int n) {
    g->n = n;
    cs_actor fresh = 8;
    for (int i = 0; i < n; i++) {
        uint32_t r = rnd(10);
        g->actor[i] = r < 7 ? fresh++ : rnd(8);
        uint32_t s = rnd(20);
        if (i == 0 || s == 0)
            g->by[i] = -1;
        else if (s == 1)
            g->by[i] = CS_AFTER_ALL;
        else
            g->by[i] = i - 1 - (int64_t)rnd(i < 6 ? (uint32_t)i : 6u);
        g->na[i] = (int)rnd(3);
        for (int k = 0; k < g->na[i]; k++) {
            g->acc[i][k].object = 200 + rnd(4);
            g->acc[i][k].key = rnd(6) == 0 ? CS_KEY_WHOLE : rnd(3);
            g->acc[i][k].kind = rnd(3) ? CS_READ : CS_WRITE;
            g->acc[i][k].site = 0;
        }
    }
}

static bool big_dep(const btrace *g, int a, int b) {
    if (g->actor[a] == g->actor[b] || g->by[b] == a || g->by[b] == CS_AFTER_ALL) return true;
    for (int i = 0; i < g->na[a]; i++)
        for (int j = 0; j < g->na[b]; j++) {
            const cs_access *p = &g->acc[a][i], *q = &g->acc[b][j];
            if (p->object == q->object && (p->kind == CS_WRITE || q->kind == CS_WRITE) &&
                (p->key == q->key || p->key == CS_KEY_WHOLE || q->key == CS_KEY_WHOLE))
                return true;
        }
    return false;
}

static void test_callback_chains_against_brute_force(void) {
    static bool hb[BIGE][BIGE];
    static btrace g;
    cs__trace *t = NULL;
    CHECK_EQ(cs__trace_new(&t), CS_OK);
    lcg_state = 4242;
    for (int round = 0; round < 12; round++) {
        gen_callbacks(&g, 40 + (int)rnd(BIGE - 40));
        cs__trace_reset(t);
        for (int i = 0; i < g.n; i++) {
            CHECK_EQ(cs__trace_step_begin(t, g.actor[i], g.by[i]), CS_OK);
            for (int k = 0; k < g.na[i]; k++)
                CHECK_EQ(cs__trace_access_add(t, g.acc[i][k].object, g.acc[i][k].key,
                                             (cs_access_kind)g.acc[i][k].kind, 0),
                         CS_OK);
            CHECK_EQ(cs__trace_step_end(t), CS_OK);
        }
        memset(hb, 0, sizeof hb);
        for (int b = 0; b < g.n; b++)
            for (int a = b - 1; a >= 0; a--) {
                if (!hb[a][b] && big_dep(&g, a, b)) hb[a][b] = true;
                if (hb[a][b])
                    for (int c = 0; c < a; c++)
                        if (hb[c][a]) hb[c][b] = true;
            }
        int bad = 0;
        for (int b = 0; b < g.n; b++) {
            for (int a = 0; a < g.n; a++)
                if (cs__trace_hb(t, (size_t)a, (size_t)b) != (a != b && hb[a][b])) bad++;
            size_t p[BIGE], np;
            CHECK_EQ(cs__trace_preds(t, (size_t)b, p, BIGE, &np), CS_OK);
            bool is_pred[BIGE] = {0};
            for (size_t k = 0; k < np; k++) is_pred[p[k]] = true;
            for (int a = 0; a < b; a++) {
                bool cover = hb[a][b];
                for (int c = a + 1; c < b && cover; c++)
                    if (hb[a][c] && hb[c][b]) cover = false;
                if (cover != is_pred[a]) bad++;
            }
            if (b % 7) continue; /* clocks of a sample: O(n * actors) each */
            const uint32_t *clk;
            size_t len;
            CHECK_EQ(cs__trace_get_clock(t, (size_t)b, &clk, &len), CS_OK);
            for (size_t a = 0; a < len; a++) {
                uint32_t want = 0;
                for (int x = 0; x <= b; x++)
                    if (g.actor[x] == a && (x == b || hb[x][b])) want++;
                if (clk[a] != want) bad++;
            }
        }
        CHECK_EQ(bad, 0);
        if (bad) break;
    }
    cs__trace_free(t);
}

/* A call_soon ping-pong: every step a new actor scheduled by the previous
 * one.  All of it is one chain (clocks of width 1), yet the public clock is
 * still indexed by actor id. */
static void test_ping_pong_one_chain(void) {
    enum { N = 5000 };
    cs__trace *t = NULL;
    CHECK_EQ(cs__trace_new(&t), CS_OK);
    for (int round = 0; round < 2; round++) { /* the second reuses memory */
        cs__trace_reset(t);
        for (uint32_t i = 0; i < N; i++) {
            CHECK_EQ(cs__trace_step_begin(t, i, i ? (int64_t)i - 1 : -1), CS_OK);
            if (i % 3 == 0) CHECK_EQ(cs__trace_access_add(t, 7, i % 5, CS_WRITE, 0), CS_OK);
            CHECK_EQ(cs__trace_step_end(t), CS_OK);
        }
        CHECK_EQ(cs__trace_chains(t), 1);
        CHECK(cs__trace_hb(t, 0, N - 1));
        CHECK(cs__trace_hb(t, 1234, 1235) && !cs__trace_hb(t, 1235, 1234));
        size_t p[4], np;
        CHECK_EQ(cs__trace_preds(t, 2000, p, 4, &np), CS_OK);
        CHECK_EQ(np, 1);
        CHECK_EQ(p[0], 1999);
        const uint32_t *clk;
        size_t len;
        CHECK_EQ(cs__trace_get_clock(t, 2999, &clk, &len), CS_OK);
        CHECK_EQ(len, 3000);
        int ones = 0;
        for (size_t a = 0; a < len; a++) ones += clk[a] == 1;
        CHECK_EQ(ones, 3000);
    }
    /* two independent ping-pongs interleaved: two chains, no HB across, and
     * the fingerprint does not depend on the interleaving */
    uint64_t fp[2];
    for (int v = 0; v < 2; v++) {
        cs__trace_reset(t);
        int64_t last[2] = {-1, -1};
        uint32_t taken[2] = {0, 0};
        for (uint32_t i = 0; i < 2 * 400; i++) {
            int side = v == 0 ? (int)(i % 2) : (i < 400 ? 0 : 1);
            cs_actor a = (cs_actor)(side * 1000 + taken[side]++);
            CHECK_EQ(cs__trace_step_begin(t, a, last[side]), CS_OK);
            CHECK_EQ(cs__trace_access_add(t, 50 + (uint64_t)side, 0, CS_WRITE, 0), CS_OK);
            CHECK_EQ(cs__trace_step_end(t), CS_OK);
            last[side] = (int64_t)i;
        }
        CHECK_EQ(cs__trace_chains(t), 2);
        fp[v] = fp_of(t);
        if (v == 0) {
            CHECK(cs__trace_hb(t, 0, 798) && cs__trace_hb(t, 1, 799));
            CHECK(!cs__trace_hb(t, 0, 799) && !cs__trace_hb(t, 1, 798));
        }
    }
    CHECK_EQ(fp[0], fp[1]);
    cs__trace_free(t);
}

/* Fan-out then join, many rounds: the clocks share what they do not change,
 * so their memory grows with the events (a few trie nodes each), not with
 * events x chains, and HB across rounds is kept. */
static void test_fan_out_clock_memory(void) {
    cs__trace *t = NULL;
    CHECK_EQ(cs__trace_new(&t), CS_OK);
    cs_actor next = 1;
    uint32_t i = 0;
    for (int round = 0; round < 200; round++) {
        int64_t root = (int64_t)i;
        CHECK_EQ(cs__trace_step_begin(t, 0, i ? root - 1 : -1), CS_OK);
        CHECK_EQ(cs__trace_step_end(t), CS_OK);
        i++;
        for (uint32_t k = 0; k < 6; k++, i++) {
            CHECK_EQ(cs__trace_step_begin(t, next++, root), CS_OK);
            CHECK_EQ(cs__trace_access_add(t, 9, k, CS_WRITE, 0), CS_OK);
            CHECK_EQ(cs__trace_step_end(t), CS_OK);
        }
        /* the join writes the whole object: after every sibling */
        CHECK_EQ(cs__trace_step_begin(t, next++, round % 2 ? CS_AFTER_ALL : root), CS_OK);
        CHECK_EQ(cs__trace_access_add(t, 9, CS_KEY_WHOLE, CS_WRITE, 0), CS_OK);
        CHECK_EQ(cs__trace_step_end(t), CS_OK);
        size_t p[8], np;
        CHECK_EQ(cs__trace_preds(t, i, p, 8, &np), CS_OK);
        CHECK_EQ(np, 6);
        i++;
    }
    /* ~1000 chains (trie height 3): at most a tick path and a few joined
     * leaves per event */
    CHECK(cs__trace_chains(t) > 256);
    CHECK(cs__trace_clock_nodes(t) <= 8 * (size_t)i);
    CHECK(cs__trace_hb(t, 1, i - 1));
    CHECK(!cs__trace_hb(t, 1, 2));
    cs__trace_free(t);
}

/* N tasks that share nothing: the root's step creates them all, each runs
 * two steps (the second scheduled by the first), then the root joins them
 * all.  Dense clocks would hold N chains per event (O(N^2)); the tries hold
 * a few nodes per event. */
static void test_independent_tasks_linear(void) {
    enum { N = 20000 };
    cs__trace *t = NULL;
    CHECK_EQ(cs__trace_new(&t), CS_OK);
    CHECK_EQ(cs__trace_step_begin(t, 0, -1), CS_OK);
    CHECK_EQ(cs__trace_step_end(t), CS_OK);
    for (uint32_t k = 0; k < N; k++) { /* first steps: 1 .. N */
        CHECK_EQ(cs__trace_step_begin(t, 1 + k, 0), CS_OK);
        CHECK_EQ(cs__trace_access_add(t, 5, 1, CS_READ, 0), CS_OK);
        CHECK_EQ(cs__trace_step_end(t), CS_OK);
    }
    for (uint32_t k = 0; k < N; k++) { /* second steps: N + 1 .. 2N */
        CHECK_EQ(cs__trace_step_begin(t, 1 + k, 1 + (int64_t)k), CS_OK);
        CHECK_EQ(cs__trace_access_add(t, 6, k, CS_WRITE, 0), CS_OK);
        CHECK_EQ(cs__trace_step_end(t), CS_OK);
    }
    /* the root reads every slot: after every task */
    CHECK_EQ(cs__trace_step_begin(t, 0, 2 * N), CS_OK);
    CHECK_EQ(cs__trace_access_add(t, 6, CS_KEY_WHOLE, CS_READ, 0), CS_OK);
    CHECK_EQ(cs__trace_step_end(t), CS_OK);
    size_t last = 2 * N + 1;
    CHECK(cs__trace_clock_nodes(t) <= 8 * (last + 1));
    CHECK(cs__trace_hb(t, 0, 1) && cs__trace_hb(t, 0, N));
    CHECK(!cs__trace_hb(t, 1, 2) && !cs__trace_hb(t, 1, N + 2) && !cs__trace_hb(t, N + 1, N + 2));
    CHECK(cs__trace_hb(t, 7, N + 7) && !cs__trace_hb(t, 8, N + 7));
    for (size_t k = 1; k < last; k += 997) CHECK(cs__trace_hb(t, k, last));
    size_t np;
    CHECK_EQ(cs__trace_preds(t, last, NULL, 0, &np), CS_OK);
    CHECK_EQ(np, N); /* every second step */
    const uint32_t *clk;
    size_t len;
    CHECK_EQ(cs__trace_get_clock(t, N + 5, &clk, &len), CS_OK);
    CHECK_EQ(len, N + 1);
    CHECK(clk[0] == 1 && clk[5] == 2 && clk[4] == 0 && clk[6] == 0);
    cs__trace_free(t);
}

/* Wide random traces against brute force (bitset closure): hundreds of
 * concurrent chains (trie heights 1 to 3), joins of many candidates, clock
 * advances and global-barrier accesses.  HB of every pair, the covering
 * relation, and the actor-indexed clocks of a sample must be exact. */
#define WIDE 1400
#define WORDS ((WIDE + 63) / 64)
typedef struct {
    int n;
    cs_actor actor[WIDE];
    int64_t by[WIDE];
    uint32_t barrier[WIDE]; /* CS_AFTER_ALL: follows events [0, barrier) */
    bool advance_before[WIDE];
    int na[WIDE];
    cs_access acc[WIDE][3];
} wtrace;

static bool wide_dep(const wtrace *g, int a, int b) {
    if (g->actor[a] == g->actor[b] || g->by[b] == a) return true;
    if (g->by[b] == CS_AFTER_ALL && (uint32_t)a < g->barrier[b]) return true;
    for (int i = 0; i < g->na[a]; i++)
        for (int j = 0; j < g->na[b]; j++) {
            const cs_access *p = &g->acc[a][i], *q = &g->acc[b][j];
            if (p->kind != CS_WRITE && q->kind != CS_WRITE) continue;
            if (p->object == CS_OBJECT_ALL || q->object == CS_OBJECT_ALL) return true;
            if (p->object == q->object &&
                (p->key == q->key || p->key == CS_KEY_WHOLE || q->key == CS_KEY_WHOLE))
                return true;
        }
    return false;
}

static void test_wide_random_against_brute_force(void) {
    static wtrace g;
    static uint64_t hb[WIDE][WORDS]; /* hb[b]: the events that happen before b */
    cs__trace *t = NULL;
    CHECK_EQ(cs__trace_new(&t), CS_OK);
    lcg_state = 99991;
    int total_bad = 0;
    size_t max_chains = 0;
    for (int round = 0; round < 6; round++) {
        g.n = 300 + (int)rnd(WIDE - 300);
        cs_actor fresh = 4;
        uint32_t last_adv = 0;
        bool any_adv = false;
        cs__trace_reset(t);
        for (int i = 0; i < g.n; i++) {
            uint32_t r = rnd(10);
            g.actor[i] = r < 8 ? fresh++ : rnd(4);
            uint32_t s = rnd(30);
            /* fan-outs: scheduled by a random earlier event, often far back */
            g.by[i] = i == 0 || s == 0 ? -1 : s == 1 ? CS_AFTER_ALL : (int64_t)rnd((uint32_t)i);
            g.advance_before[i] = i > 0 && rnd(40) == 0;
            if (g.advance_before[i]) {
                CHECK_EQ(cs__trace_barrier(t), CS_OK);
                last_adv = (uint32_t)i;
                any_adv = true;
            }
            g.barrier[i] = any_adv ? last_adv : (uint32_t)i;
            g.na[i] = (int)rnd(4);
            for (int k = 0; k < g.na[i]; k++) {
                cs_access *a = &g.acc[i][k];
                a->object = rnd(60) == 0 ? CS_OBJECT_ALL : 300 + rnd(40);
                a->key = rnd(8) == 0 ? CS_KEY_WHOLE : rnd(4);
                a->kind = rnd(4) ? CS_READ : CS_WRITE;
                a->site = 0;
            }
            CHECK_EQ(cs__trace_step_begin(t, g.actor[i], g.by[i]), CS_OK);
            for (int k = 0; k < g.na[i]; k++)
                CHECK_EQ(cs__trace_access_add(t, g.acc[i][k].object, g.acc[i][k].key,
                                             (cs_access_kind)g.acc[i][k].kind, 0),
                         CS_OK);
            CHECK_EQ(cs__trace_step_end(t), CS_OK);
        }
        if (cs__trace_chains(t) > max_chains) max_chains = cs__trace_chains(t);
        memset(hb, 0, sizeof hb);
        for (int b = 0; b < g.n; b++)
            for (int a = 0; a < b; a++)
                if (wide_dep(&g, a, b)) {
                    hb[b][a / 64] |= 1ULL << (a % 64);
                    for (int w = 0; w < WORDS; w++) hb[b][w] |= hb[a][w];
                }
        int bad = 0;
        static size_t p[WIDE];
        for (int b = 0; b < g.n; b++) {
            for (int a = 0; a < g.n; a++) {
                bool want = a < b && (hb[b][a / 64] >> (a % 64) & 1);
                if (cs__trace_hb(t, (size_t)a, (size_t)b) != want) bad++;
            }
            size_t np;
            CHECK_EQ(cs__trace_preds(t, (size_t)b, p, WIDE, &np), CS_OK);
            /* a covers b: a before b, and no c between them with a < c < b in HB */
            int n_cover = 0;
            for (int a = 0; a < b; a++) {
                if (!(hb[b][a / 64] >> (a % 64) & 1)) continue;
                bool cover = true;
                for (int c = a + 1; c < b && cover; c++)
                    if ((hb[b][c / 64] >> (c % 64) & 1) && (hb[c][a / 64] >> (a % 64) & 1))
                        cover = false;
                if (!cover) continue;
                n_cover++;
                bool listed = false;
                for (size_t k = 0; k < np; k++) listed |= p[k] == (size_t)a;
                if (!listed) bad++;
            }
            if ((int)np != n_cover) bad++;
            for (size_t k = 1; k < np; k++)
                if (p[k] == p[k - 1]) bad++;
            if (b % 97) continue;
            const uint32_t *clk;
            size_t len;
            CHECK_EQ(cs__trace_get_clock(t, (size_t)b, &clk, &len), CS_OK);
            for (size_t a = 0; a < len; a++) {
                uint32_t want = 0;
                for (int x = 0; x <= b; x++)
                    if (g.actor[x] == a && (x == b || (hb[b][x / 64] >> (x % 64) & 1))) want++;
                if (clk[a] != want) bad++;
            }
        }
        /* the HB view: a copy that outlives the trace's next execution */
        cs_hb_view *view = NULL;
        CHECK_EQ(cs__trace_hb_view(t, &view), CS_OK);
        cs__trace_reset(t);
        CHECK_EQ(cs_hb_view_length(view), (size_t)g.n);
        for (int b = 0; b < g.n; b += 13) {
            size_t len = cs_hb_view_clock_len(view, (size_t)b);
            for (size_t a = 0; a < len + 2; a++) {
                uint32_t want = 0, got = 99;
                for (int x = 0; x <= b && a < len; x++)
                    if (g.actor[x] == a && (x == b || (hb[b][x / 64] >> (x % 64) & 1))) want++;
                CHECK_EQ(cs_hb_view_clock(view, (size_t)b, (cs_actor)a, &got), CS_OK);
                if (got != want) bad++;
            }
            for (int a = 0; a < g.n; a += 7)
                if (cs_hb_view_happens_before(view, (size_t)a, (size_t)b) !=
                    (a < b && (hb[b][a / 64] >> (a % 64) & 1)))
                    bad++;
        }
        cs__hb_view_free(view);
        total_bad += bad;
        if (bad) break;
    }
    CHECK_EQ(total_bad, 0);
    CHECK(max_chains > 256); /* the tries reached height 3 */
    cs__trace_free(t);
}

/* A clock advance: the timers it makes due follow every event before it, and
 * only those -- a step that ran after the advance stays concurrent with a
 * timer of the same advance unless they conflict. */
static void test_barrier_after_clock_advance(void) {
    cs__trace *t = NULL;
    CHECK_EQ(cs__trace_new(&t), CS_OK);
    /* 0: a writes (1,0); 1: b writes (2,0); advance; 2: timer c AFTER_ALL;
     * 3: a (scheduled by 2) writes (3,0); 4: timer d AFTER_ALL writes (4,0);
     * 5: timer e AFTER_ALL writes (3,0) */
    cs__trace_step_begin(t, 0, -1);
    cs__trace_access_add(t, 1, 0, CS_WRITE, 0);
    cs__trace_step_end(t);
    cs__trace_step_begin(t, 1, -1);
    cs__trace_access_add(t, 2, 0, CS_WRITE, 0);
    cs__trace_step_end(t);
    CHECK_EQ(cs__trace_barrier(t), CS_OK);
    cs__trace_step_begin(t, 2, CS_AFTER_ALL);
    cs__trace_step_end(t);
    cs__trace_step_begin(t, 0, 2);
    cs__trace_access_add(t, 3, 0, CS_WRITE, 0);
    cs__trace_step_end(t);
    cs__trace_step_begin(t, 3, CS_AFTER_ALL);
    cs__trace_access_add(t, 4, 0, CS_WRITE, 0);
    cs__trace_step_end(t);
    cs__trace_step_begin(t, 4, CS_AFTER_ALL);
    cs__trace_access_add(t, 3, 0, CS_WRITE, 0);
    cs__trace_step_end(t);
    CHECK_EQ(cs__trace_barrier_of(t, 2), 2);
    CHECK_EQ(cs__trace_barrier_of(t, 4), 2);
    CHECK_EQ(cs__trace_barrier_of(t, 3), 0);
    CHECK(cs__trace_hb(t, 0, 4) && cs__trace_hb(t, 1, 4));
    CHECK(!cs__trace_hb(t, 2, 4) && !cs__trace_hb(t, 3, 4)); /* after the advance */
    CHECK(!cs__trace_dep(t, 3, 4));
    CHECK(cs__trace_dep(t, 1, 4));
    CHECK(cs__trace_hb(t, 3, 5) && cs__trace_dep(t, 3, 5)); /* a conflict, not the barrier */
    size_t p[8], np;
    cs__trace_preds(t, 4, p, 8, &np);
    CHECK_EQ(np, 2); /* the tips before the advance: 0 and 1 */
    CHECK(p[0] < 2 && p[1] < 2);
    CHECK_EQ(cs__trace_barrier(t), CS_OK);
    cs__trace_step_begin(t, 5, CS_AFTER_ALL); /* a second advance follows all six */
    cs__trace_step_end(t);
    for (size_t i = 0; i < 6; i++) CHECK(cs__trace_hb(t, i, 6));
    CHECK_EQ(cs__trace_barrier_of(t, 6), 6);
    cs__trace_step_begin(t, 0, -1);
    CHECK_EQ(cs__trace_barrier(t), CS_ESTATE); /* only between steps */
    cs__trace_step_end(t);
    cs__trace_free(t);
}

/* A timer made due by a clock advance that runs after a later barrier (the
 * front end's action at the run's end): begun with its own prefix, it follows
 * the events before its advance only; a step begun after the later prefix
 * follows those too, and the two stay concurrent.  Prefixes past the trace
 * are refused. */
static void test_steps_after_an_earlier_barrier(void) {
    cs__trace *t = NULL;
    CHECK_EQ(cs__trace_new(&t), CS_OK);
    /* 0: a writes (1,0); 1: b writes (2,0); advance at 2;
     * 2: c writes (3,0); 3: d writes (4,0); barrier at 4;
     * 4: w after prefix 4 writes (5,0); 5: timer t after prefix 2 writes (6,0);
     * 6: u after prefix 2 writes (3,0): a conflict with c, not the barrier */
    cs__trace_step_begin(t, 0, -1);
    cs__trace_access_add(t, 1, 0, CS_WRITE, 0);
    cs__trace_step_end(t);
    cs__trace_step_begin(t, 1, -1);
    cs__trace_access_add(t, 2, 0, CS_WRITE, 0);
    cs__trace_step_end(t);
    CHECK_EQ(cs__trace_barrier(t), CS_OK);
    cs__trace_step_begin(t, 2, -1);
    cs__trace_access_add(t, 3, 0, CS_WRITE, 0);
    cs__trace_step_end(t);
    cs__trace_step_begin(t, 3, -1);
    cs__trace_access_add(t, 4, 0, CS_WRITE, 0);
    cs__trace_step_end(t);
    CHECK_EQ(cs__trace_barrier(t), CS_OK);
    CHECK_EQ(cs__trace_step_begin_after(t, 4, 4), CS_OK);
    cs__trace_access_add(t, 5, 0, CS_WRITE, 0);
    cs__trace_step_end(t);
    CHECK_EQ(cs__trace_step_begin_after(t, 5, 2), CS_OK);
    cs__trace_access_add(t, 6, 0, CS_WRITE, 0);
    cs__trace_step_end(t);
    CHECK_EQ(cs__trace_step_begin_after(t, 6, 2), CS_OK);
    cs__trace_access_add(t, 3, 0, CS_WRITE, 0);
    cs__trace_step_end(t);
    CHECK_EQ(cs__trace_barrier_of(t, 4), 4);
    CHECK_EQ(cs__trace_barrier_of(t, 5), 2);
    CHECK_EQ(cs__trace_barrier_of(t, 6), 2);
    for (size_t i = 0; i < 4; i++) CHECK(cs__trace_hb(t, i, 4));
    CHECK(cs__trace_hb(t, 0, 5) && cs__trace_hb(t, 1, 5));
    CHECK(!cs__trace_hb(t, 2, 5) && !cs__trace_hb(t, 3, 5) && !cs__trace_hb(t, 4, 5));
    CHECK(!cs__trace_dep(t, 4, 5) && !cs__trace_dep(t, 2, 5));
    CHECK(cs__trace_dep(t, 1, 5));
    CHECK(cs__trace_hb(t, 2, 6) && !cs__trace_hb(t, 3, 6));
    size_t p[8], np;
    cs__trace_preds(t, 5, p, 8, &np);
    CHECK_EQ(np, 2); /* the tips before the advance: 0 and 1 */
    CHECK(p[0] < 2 && p[1] < 2);
    cs__trace_preds(t, 4, p, 8, &np);
    CHECK_EQ(np, 4); /* 0..3: nothing orders them */
    /* a prefix equal to the trace's length: every earlier event */
    CHECK_EQ(cs__trace_step_begin_after(t, 7, 7), CS_OK);
    cs__trace_step_end(t);
    for (size_t i = 0; i < 7; i++) CHECK(cs__trace_hb(t, i, 7));
    CHECK_EQ(cs__trace_step_begin_after(t, 7, 9), CS_EINVAL);
    CHECK_EQ(cs__trace_step_begin_after(t, CS_NO_ACTOR, 1), CS_EINVAL);
    cs__trace_step_begin(t, 0, -1);
    CHECK_EQ(cs__trace_step_begin_after(t, 1, 1), CS_ESTATE);
    cs__trace_step_end(t);
    cs__trace_free(t);
}

#define TESTS(X)                                                               \
    X(test_basic_clocks) X(test_wildcard_and_after_all)                        \
    X(test_random_against_brute_force) X(test_fingerprint)                     \
    X(test_fingerprint_counts) X(test_reset_reuse)                             \
    X(test_callback_chains_against_brute_force) X(test_ping_pong_one_chain)    \
    X(test_fan_out_clock_memory) X(test_barrier_after_clock_advance)        \
    X(test_random_with_barriers_against_brute_force)                          \
    X(test_random_with_adds_against_brute_force)                              \
    X(test_adds_and_an_enabling_read_by_hand)                                 \
    X(test_fingerprint_with_barriers) X(test_global_barrier_clocks)           \
    X(test_independent_tasks_linear) X(test_wide_random_against_brute_force)  \
    X(test_object_names_never_collide) X(test_steps_after_an_earlier_barrier) \
    X(test_random_with_prefix_barriers_against_brute_force)
CTEST_MAIN()
