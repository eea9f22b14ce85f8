/* test_diagnose.c -- AVIO patterns, order violations and wait-for cycles on
 * hand-built traces. */
#include "chaossloth.h"
#include "ctest.h"

#include <string.h>

#define OBJ 7 /* the shared object */

typedef struct {
    int actor;    /* index into ids */
    int64_t by;   /* scheduled_by */
    int n;
    cs_access acc[3];
} hstep;

static cs_actor ids[4];

/* Builds an explorer whose current execution is exactly `steps`. */
static cs_explorer *build(const hstep *steps, int n) {
    cs_config cfg;
    cs_config_init(&cfg, CS_STRATEGY_FIFO);
    cs_explorer *ex = NULL;
    if (cs_explorer_new(&cfg, &ex)) return NULL;
    cs_actor_intern(ex, CS_NO_ACTOR, 0, &ids[0]);
    for (uint32_t i = 1; i < 4; i++) cs_actor_intern(ex, ids[0], i - 1, &ids[i]);
    int more = 0;
    cs_execution_begin(ex, &more);
    for (int i = 0; i < n; i++) {
        CHECK_EQ(cs_step_begin(ex, ids[steps[i].actor], steps[i].by), CS_OK);
        for (int k = 0; k < steps[i].n; k++)
            CHECK_EQ(cs_access_record(ex, steps[i].acc[k].object, steps[i].acc[k].key,
                                      (cs_access_kind)steps[i].acc[k].kind, steps[i].acc[k].site),
                     CS_OK);
        CHECK_EQ(cs_step_end(ex), CS_OK);
    }
    CHECK_EQ(cs_execution_end(ex, CS_OUTCOME_FAILED), CS_OK);
    return ex;
}

#define R(obj, key) {(obj), (key), 0, CS_READ}
#define W(obj, key) {(obj), (key), 0, CS_WRITE}
#define NEW(obj) {(obj), CS_KEY_WHOLE, 0, CS_WRITE | CS_ID_CREATED}
#define STEP1(a, acc0) {(a), CS_SCHEDULED_BY_NONE, 1, {acc0}}

static size_t diagnose(const hstep *steps, int n, cs_finding *out, size_t cap) {
    cs_explorer *ex = build(steps, n);
    size_t total = 0;
    CHECK_EQ(cs_diagnose(ex, NULL, 0, out, cap, &total), CS_OK);
    cs_explorer_free(ex);
    return total;
}

static void test_lost_update(void) {
    hstep t[] = {STEP1(1, R(OBJ, 1)), STEP1(2, R(OBJ, 1)), STEP1(2, W(OBJ, 1)), STEP1(1, W(OBJ, 1))};
    cs_finding f[4];
    CHECK_EQ(diagnose(t, 4, f, 4), 1);
    CHECK_EQ(f[0].kind, CS_HAZARD_LOST_UPDATE);
    CHECK_EQ(f[0].local_actor, ids[1]);
    CHECK_EQ(f[0].remote_actor, ids[2]);
    CHECK_EQ(f[0].p_event, 0);
    CHECK_EQ(f[0].r_event, 2);
    CHECK_EQ(f[0].c_event, 3);
    CHECK_EQ(f[0].p_access, 0);
    CHECK_EQ(f[0].r_access, 2);
    CHECK_EQ(f[0].c_access, 3);
    CHECK_EQ(f[0].object, OBJ);
    CHECK_EQ(f[0].key, 1);
    CHECK(strcmp(cs_hazard_pattern(f[0].kind), "R-W-W") == 0);
    CHECK(strcmp(cs_hazard_name(f[0].kind), "lost_update") == 0);
}

static void test_the_other_three_patterns(void) {
    struct {
        int p, r, c, kind;
    } cases[] = {
        {CS_READ, CS_WRITE, CS_READ, CS_HAZARD_STALE_READ},
        {CS_WRITE, CS_READ, CS_WRITE, CS_HAZARD_DIRTY_READ},
        {CS_WRITE, CS_WRITE, CS_READ, CS_HAZARD_OVERWRITTEN},
        /* serializable ones */
        {CS_READ, CS_READ, CS_WRITE, 0},
        {CS_WRITE, CS_WRITE, CS_WRITE, 0},
        {CS_READ, CS_READ, CS_READ, 0},
        {CS_WRITE, CS_READ, CS_READ, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        hstep t[3] = {
            {1, -1, 1, {{OBJ, 3, 0, (uint8_t)cases[i].p}}},
            {2, -1, 1, {{OBJ, 3, 0, (uint8_t)cases[i].r}}},
            {1, -1, 1, {{OBJ, 3, 0, (uint8_t)cases[i].c}}},
        };
        cs_finding f[4];
        size_t n = diagnose(t, 3, f, 4);
        CHECK_EQ(n, cases[i].kind ? 1 : 0);
        if (n) {
            CHECK_EQ(f[0].kind, cases[i].kind);
            CHECK_EQ(f[0].r_event, 1);
        }
    }
}

static void test_same_step_read_modify_write_is_a_stale_read(void) {
    /* A: read; B: write; A: x += 1 (read + write in one step).  The write
     * follows the step's own read, so this is check-then-act, not a lost
     * update. */
    hstep t[] = {STEP1(1, R(OBJ, 1)), STEP1(2, W(OBJ, 1)), {1, -1, 2, {R(OBJ, 1), W(OBJ, 1)}}};
    cs_finding f[4];
    CHECK_EQ(diagnose(t, 3, f, 4), 1);
    CHECK_EQ(f[0].kind, CS_HAZARD_STALE_READ);
    CHECK_EQ(f[0].c_access, 2);
}

static void test_steps_of_one_actor_in_one_step_are_atomic(void) {
    /* p and c in the same step: no await between them, nothing to report */
    hstep atomic[] = {{1, -1, 2, {R(OBJ, 1), W(OBJ, 1)}}, STEP1(2, W(OBJ, 1)), STEP1(2, R(OBJ, 1))};
    cs_finding f[4];
    CHECK_EQ(diagnose(atomic, 3, f, 4), 0);
    /* the same accesses split by an await */
    hstep split[] = {STEP1(1, R(OBJ, 1)), STEP1(2, W(OBJ, 1)), STEP1(1, W(OBJ, 1))};
    CHECK_EQ(diagnose(split, 3, f, 4), 1);
}

static void test_wildcard_and_distinct_keys(void) {
    hstep whole[] = {STEP1(1, R(OBJ, 5)), STEP1(2, W(OBJ, CS_KEY_WHOLE)), STEP1(1, W(OBJ, 5))};
    cs_finding f[4];
    CHECK_EQ(diagnose(whole, 3, f, 4), 1);
    CHECK_EQ(f[0].kind, CS_HAZARD_LOST_UPDATE);
    CHECK_EQ(f[0].key, 5);
    hstep other_key[] = {STEP1(1, R(OBJ, 5)), STEP1(2, W(OBJ, 6)), STEP1(1, W(OBJ, 5))};
    CHECK_EQ(diagnose(other_key, 3, f, 4), 0);
    hstep other_obj[] = {STEP1(1, R(OBJ, 5)), STEP1(2, W(OBJ + 1, 5)), STEP1(1, W(OBJ, 5))};
    CHECK_EQ(diagnose(other_obj, 3, f, 4), 0);
    /* r overlaps c (whole) but not p (another key): not an interleaving of
     * p and c on one resource */
    hstep split[] = {STEP1(1, R(OBJ, 5)), STEP1(2, W(OBJ, 6)), STEP1(1, W(OBJ, CS_KEY_WHOLE))};
    CHECK_EQ(diagnose(split, 3, f, 4), 0);
}

static void test_ranking_and_ignore(void) {
    /* object 8: a dirty read over a short interval; object X: a lost update
     * over a long one, and a shorter lost update on object 9 */
    hstep t[] = {
        STEP1(1, R(OBJ, 1)),  /* 0 */
        STEP1(3, W(8, 0)),  /* 1 */
        STEP1(2, R(8, 0)),  /* 2 */
        STEP1(3, W(8, 0)),  /* 3: dirty read 1-2-3 */
        STEP1(3, R(9, 0)),  /* 4 */
        STEP1(2, W(9, 0)),  /* 5 */
        STEP1(3, W(9, 0)),  /* 6: lost update 4-5-6 */
        STEP1(2, W(OBJ, 1)),  /* 7 */
        STEP1(1, W(OBJ, 1)),  /* 8: lost update 0-7-8 */
    };
    cs_finding f[4];
    CHECK_EQ(diagnose(t, 9, f, 4), 3);
    CHECK_EQ(f[0].kind, CS_HAZARD_LOST_UPDATE);
    CHECK_EQ(f[0].object, 9);
    CHECK_EQ(f[1].kind, CS_HAZARD_LOST_UPDATE);
    CHECK_EQ(f[1].object, OBJ);
    CHECK_EQ(f[2].kind, CS_HAZARD_DIRTY_READ);
    /* cap smaller than the count: the best ones, full count reported */
    cs_explorer *ex = build(t, 9);
    size_t n = 0;
    CHECK_EQ(cs_diagnose(ex, NULL, 0, f, 1, &n), CS_OK);
    CHECK_EQ(n, 3);
    CHECK_EQ(f[0].object, 9);
    uint64_t ignore[] = {9, 8};
    CHECK_EQ(cs_diagnose(ex, ignore, 2, f, 4, &n), CS_OK);
    CHECK_EQ(n, 1);
    CHECK_EQ(f[0].object, OBJ);
    CHECK_EQ(cs_diagnose(ex, NULL, 0, NULL, 0, &n), CS_OK);
    CHECK_EQ(n, 3);
    CHECK_EQ(cs_diagnose(ex, NULL, 1, f, 4, &n), CS_EINVAL);
    cs_explorer_free(ex);
}

static void test_order_violation(void) {
    /* e0: root creates A (A's step scheduled by 0); e1: root creates B
     * (scheduled by 1); B runs first and writes x; then A reads x.  Fifo
     * would have run A (made runnable at 0) before B (at 1). */
    hstep t[] = {
        {0, -1, 0, {{0}}},
        {0, 0, 0, {{0}}},
        {2, 1, 1, {W(OBJ, 0)}},
        {1, 0, 1, {R(OBJ, 0)}},
    };
    cs_finding f[4];
    CHECK_EQ(diagnose(t, 4, f, 4), 1);
    CHECK_EQ(f[0].kind, CS_HAZARD_ORDER_VIOLATION);
    CHECK_EQ(f[0].local_actor, ids[1]);
    CHECK_EQ(f[0].remote_actor, ids[2]);
    CHECK_EQ(f[0].p_event, 0);
    CHECK_EQ(f[0].p_access, CS_NO_INDEX);
    CHECK_EQ(f[0].r_event, 2);
    CHECK_EQ(f[0].c_event, 3);
    /* both made runnable by the same step: fifo order unknown, no finding */
    hstep same[] = {
        {0, -1, 0, {{0}}},
        {2, 0, 1, {W(OBJ, 0)}},
        {1, 0, 1, {R(OBJ, 0)}},
    };
    CHECK_EQ(diagnose(same, 3, f, 4), 0);
    /* B was made runnable first: running it first is the fifo order */
    hstep fifo[] = {
        {0, -1, 0, {{0}}},
        {0, 0, 0, {{0}}},
        {2, 0, 1, {W(OBJ, 0)}},
        {1, 1, 1, {R(OBJ, 0)}},
    };
    CHECK_EQ(diagnose(fifo, 4, f, 4), 0);
    /* the read is a write: not an order violation of a read */
    hstep wr[] = {
        {0, -1, 0, {{0}}},
        {0, 0, 0, {{0}}},
        {2, 1, 1, {W(OBJ, 0)}},
        {1, 0, 1, {W(OBJ, 0)}},
    };
    CHECK_EQ(diagnose(wr, 4, f, 4), 0);
}

static void test_structurally_nested_remote_is_dropped(void) {
    /* root (0) writes x and creates A (1); A writes x and ends; its end
     * wakes root, which reads x: setup, worker, join, final check.  No
     * schedule can move A's write out of root's interval: no finding. */
    hstep joined[] = {
        {0, -1, 1, {W(OBJ, 0)}},
        {1, 0, 1, {W(OBJ, 0)}},
        {0, 1, 1, {R(OBJ, 0)}},
    };
    cs_finding f[4];
    CHECK_EQ(diagnose(joined, 3, f, 4), 0);
    /* the join goes through a callback actor created by A's last step
     * (gather's done-callback), which then wakes root */
    hstep via_callback[] = {
        {0, -1, 1, {W(OBJ, 0)}},
        {1, 0, 1, {W(OBJ, 0)}},
        {2, 1, 0, {{0}}},
        {0, 2, 1, {R(OBJ, 0)}},
    };
    CHECK_EQ(diagnose(via_callback, 4, f, 4), 0);
    /* not joined: root resumes by itself (sleep(0)); c may run before r in
     * another schedule, so the finding stays */
    hstep unjoined[] = {
        {0, -1, 1, {W(OBJ, 0)}},
        {1, 0, 1, {W(OBJ, 0)}},
        {0, 0, 1, {R(OBJ, 0)}},
    };
    CHECK_EQ(diagnose(unjoined, 3, f, 4), 1);
    CHECK_EQ(f[0].kind, CS_HAZARD_OVERWRITTEN);
    /* joined but not created after p (A's first step is not scheduled by
     * root): r may run before p in another schedule */
    hstep not_created[] = {
        {0, -1, 1, {W(OBJ, 0)}},
        {1, -1, 1, {W(OBJ, 0)}},
        {0, 1, 1, {R(OBJ, 0)}},
    };
    CHECK_EQ(diagnose(not_created, 3, f, 4), 1);
    /* A's step wakes root but A runs again afterwards: a wakeup (a lock
     * handed over, an event set), not A's completion, so not a join */
    hstep handoff[] = {
        {0, -1, 1, {W(OBJ, 0)}},
        {1, 0, 1, {W(OBJ, 0)}},
        {0, 1, 1, {R(OBJ, 0)}},
        {1, 1, 0, {{0}}},
    };
    CHECK_EQ(diagnose(handoff, 4, f, 4), 1);
    /* two siblings created before p: B's write lies between A's read and
     * write through wakeups only, never through creation: kept */
    hstep siblings[] = {
        {0, -1, 0, {{0}}},
        {1, 0, 1, {R(OBJ, 0)}},
        {2, 0, 1, {W(OBJ, 0)}},
        {1, 2, 1, {W(OBJ, 0)}},
    };
    CHECK_EQ(diagnose(siblings, 4, f, 4), 1);
    CHECK_EQ(f[0].kind, CS_HAZARD_LOST_UPDATE);
}

static void test_wait_for_cycle(void) {
    cs_wait_edge e[] = {
        {4, 100, 1}, /* 0: outside the cycle */
        {2, 101, 3}, /* 1 */
        {1, 102, 2}, /* 2 */
        {3, 103, 1}, /* 3 */
    };
    size_t cyc[8], len = 99;
    CHECK_EQ(cs_wait_for_cycle(e, 4, cyc, 8, &len), CS_OK);
    CHECK_EQ(len, 3);
    CHECK_EQ(cyc[0], 1);
    CHECK_EQ(cyc[1], 3);
    CHECK_EQ(cyc[2], 2);
    /* consecutive edges chain: holder of one is the waiter of the next */
    for (size_t k = 0; k < len; k++) CHECK_EQ(e[cyc[k]].holder, e[cyc[(k + 1) % len]].waiter);
    CHECK_EQ(cs_wait_for_cycle(e, 3, cyc, 8, &len), CS_OK); /* drop edge 3 */
    CHECK_EQ(len, 0);
    cs_wait_edge self[] = {{9, 1, 9}};
    CHECK_EQ(cs_wait_for_cycle(self, 1, cyc, 8, &len), CS_OK);
    CHECK_EQ(len, 1);
    CHECK_EQ(cyc[0], 0);
    CHECK_EQ(cs_wait_for_cycle(NULL, 0, NULL, 0, &len), CS_OK);
    CHECK_EQ(len, 0);
    /* a diamond without a cycle, then a long cycle found past it */
    cs_wait_edge big[] = {{1, 0, 2}, {1, 0, 3}, {2, 0, 4}, {3, 0, 4},
                          {10, 0, 11}, {11, 0, 12}, {12, 0, 13}, {13, 0, 10}};
    CHECK_EQ(cs_wait_for_cycle(big, 8, cyc, 2, &len), CS_OK);
    CHECK_EQ(len, 4);
    CHECK_EQ(cyc[0], 4);
    CHECK_EQ(cyc[1], 5);
}

/* Creating an object is not a use of it: a creation is never the local
 * access p of a pattern (the same trace with a plain write is a W-W-R). */
static void test_creation_is_not_a_local_access(void) {
    hstep created[] = {STEP1(1, NEW(OBJ)),
                       STEP1(2, W(OBJ, CS_KEY_WHOLE)), STEP1(1, R(OBJ, CS_KEY_WHOLE))};
    hstep plain[] = {STEP1(1, W(OBJ, CS_KEY_WHOLE)), STEP1(2, W(OBJ, CS_KEY_WHOLE)),
                     STEP1(1, R(OBJ, CS_KEY_WHOLE))};
    cs_finding f[4];
    size_t n = diagnose(plain, 3, f, 4);
    CHECK(n >= 1);
    CHECK_EQ(f[0].kind, CS_HAZARD_OVERWRITTEN);
    n = diagnose(created, 3, f, 4);
    for (size_t i = 0; i < n && i < 4; i++) CHECK(f[i].kind != CS_HAZARD_OVERWRITTEN);
}

/* The global barrier (CS_OBJECT_ALL) is never the resource of a finding;
 * a remote barrier write between a local pair stands for a remote write
 * when no concrete one is there; the local actor's own barrier is ignored;
 * ignoring CS_OBJECT_ALL drops it. */
static void test_global_barrier(void) {
    cs_finding f[4];
    /* barriers only: nothing to report */
    hstep only[] = {STEP1(1, W(CS_OBJECT_ALL, 0)), STEP1(2, W(CS_OBJECT_ALL, 0)),
                    STEP1(1, R(CS_OBJECT_ALL, 0)), STEP1(2, W(CS_OBJECT_ALL, 3)),
                    STEP1(1, W(CS_OBJECT_ALL, 0))};
    CHECK_EQ(diagnose(only, 5, f, 4), 0);
    /* A reads x, B runs a barrier write, A reads x again: a stale read of x */
    hstep stale[] = {STEP1(1, R(OBJ, 1)), STEP1(2, W(CS_OBJECT_ALL, 0)), STEP1(1, R(OBJ, 1))};
    CHECK_EQ(diagnose(stale, 3, f, 4), 1);
    CHECK_EQ(f[0].kind, CS_HAZARD_STALE_READ);
    CHECK_EQ(f[0].object, OBJ);
    CHECK_EQ(f[0].key, 1);
    CHECK_EQ(f[0].r_access, 1);
    CHECK_EQ(f[0].remote_actor, ids[2]);
    /* a concrete remote write is preferred to a later barrier */
    hstep both[] = {STEP1(1, R(OBJ, 1)), STEP1(2, W(OBJ, 1)), STEP1(3, W(CS_OBJECT_ALL, 0)),
                    STEP1(1, R(OBJ, 1))};
    CHECK_EQ(diagnose(both, 4, f, 4), 1);
    CHECK_EQ(f[0].r_access, 1);
    CHECK_EQ(f[0].remote_actor, ids[2]);
    /* a barrier read is a remote read: W-R-W dirty read */
    hstep dirty[] = {STEP1(1, W(OBJ, 2)), STEP1(2, R(CS_OBJECT_ALL, 0)), STEP1(1, W(OBJ, 2))};
    CHECK_EQ(diagnose(dirty, 3, f, 4), 1);
    CHECK_EQ(f[0].kind, CS_HAZARD_DIRTY_READ);
    CHECK_EQ(f[0].object, OBJ);
    /* the local actor's own barrier is no remote access */
    hstep own[] = {STEP1(1, R(OBJ, 1)), STEP1(1, W(CS_OBJECT_ALL, 0)), STEP1(1, R(OBJ, 1))};
    CHECK_EQ(diagnose(own, 3, f, 4), 0);
    /* ignoring CS_OBJECT_ALL drops barriers */
    cs_explorer *ex = build(stale, 3);
    uint64_t ign = CS_OBJECT_ALL;
    size_t total = 9;
    CHECK_EQ(cs_diagnose(ex, &ign, 1, f, 4, &total), CS_OK);
    CHECK_EQ(total, 0);
    cs_explorer_free(ex);
}

#define TESTS(X)                                                               \
    X(test_creation_is_not_a_local_access)                                     \
    X(test_lost_update)                                                        \
    X(test_the_other_three_patterns)                                           \
    X(test_same_step_read_modify_write_is_a_stale_read)                        \
    X(test_steps_of_one_actor_in_one_step_are_atomic)                          \
    X(test_wildcard_and_distinct_keys)                                         \
    X(test_ranking_and_ignore)                                                 \
    X(test_order_violation)                                                    \
    X(test_structurally_nested_remote_is_dropped)                              \
    X(test_wait_for_cycle) \
    X(test_global_barrier)
CTEST_MAIN()
