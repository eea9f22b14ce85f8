/* test_causes.c -- the races of an execution and their reversals (causes.c):
 * a race is a pair of dependent events of two actors that nothing else
 * orders (checked against the definition on random executions), and the
 * reversal of (i, j) keeps the prefix, runs j before i and everything else
 * once. */
#include "chaossloth.h"
#include "ctest.h"

#include <stdlib.h>
#include <string.h>

#define N(a) (sizeof(a) / sizeof *(a))

typedef struct {
    cs_actor actor;
    int64_t scheduled_by;
    uint64_t object[2];
    cs_access_kind kind[2];
    int n_acc;
} step_spec;

/* An explorer (fifo) with actors 0..n_actors-1 and one execution of `steps`
 * recorded; the execution is left ended so that the trace can be read. */
static cs_explorer *record(const step_spec *steps, size_t n, int n_actors) {
    cs_config cfg;
    cs_config_init(&cfg, CS_STRATEGY_FIFO);
    cfg.stable_objects = 1;
    cs_explorer *ex = NULL;
    CHECK_EQ(cs_explorer_new(&cfg, &ex), CS_OK);
    if (!ex) return NULL;
    cs_actor root, id;
    CHECK_EQ(cs_actor_intern(ex, CS_NO_ACTOR, 0, &root), CS_OK);
    for (int i = 1; i < n_actors; i++) CHECK_EQ(cs_actor_intern(ex, root, (uint32_t)(i - 1), &id), CS_OK);
    int more = 0;
    CHECK_EQ(cs_execution_begin(ex, &more), CS_OK);
    for (size_t k = 0; k < n; k++) {
        size_t pick = 1;
        CHECK_EQ(cs_choose(ex, &steps[k].actor, 1, &pick), CS_OK);
        CHECK_EQ(cs_step_begin(ex, steps[k].actor, steps[k].scheduled_by), CS_OK);
        for (int a = 0; a < steps[k].n_acc; a++)
            CHECK_EQ(cs_access_record(ex, steps[k].object[a], 0, steps[k].kind[a], 1), CS_OK);
        CHECK_EQ(cs_step_end(ex), CS_OK);
    }
    CHECK_EQ(cs_execution_end(ex, CS_OUTCOME_FAILED), CS_OK);
    return ex;
}

#define NONE CS_SCHEDULED_BY_NONE
#define R CS_READ
#define W CS_WRITE

static void test_races_of_a_lost_update(void) {
    /* A reads x, B writes x, A writes x, B reads y */
    const step_spec steps[] = {
        {1, NONE, {10}, {R}, 1},
        {2, NONE, {10}, {W}, 1},
        {1, NONE, {10}, {W}, 1},
        {2, NONE, {11}, {R}, 1},
    };
    cs_explorer *ex = record(steps, N(steps), 3);
    if (!ex) return;
    cs_race races[8];
    size_t n = 0;
    CHECK_EQ(cs_trace_races(ex, races, N(races), &n), CS_OK);
    CHECK_EQ(n, 2);
    CHECK_EQ(races[0].first, 0);
    CHECK_EQ(races[0].second, 1);
    CHECK_EQ(races[1].first, 1);
    CHECK_EQ(races[1].second, 2);
    cs_actor sched[8];
    size_t len = 0;
    CHECK_EQ(cs_trace_reversal(ex, 0, 1, sched, N(sched), &len), CS_OK);
    CHECK_EQ(len, 4);
    const cs_actor want01[] = {2, 1, 1, 2};
    CHECK(memcmp(sched, want01, sizeof want01) == 0);
    CHECK_EQ(cs_trace_reversal(ex, 1, 2, sched, N(sched), &len), CS_OK);
    const cs_actor want12[] = {1, 1, 2, 2};
    CHECK(memcmp(sched, want12, sizeof want12) == 0);
    /* too little room: the length only; bad pairs: CS_EINVAL */
    CHECK_EQ(cs_trace_reversal(ex, 0, 1, sched, 2, &len), CS_OK);
    CHECK_EQ(len, 4);
    CHECK_EQ(cs_trace_reversal(ex, 1, 1, sched, N(sched), &len), CS_EINVAL);
    CHECK_EQ(cs_trace_reversal(ex, 0, 4, sched, N(sched), &len), CS_EINVAL);
    cs_explorer_free(ex);
}

static void test_wakeup_and_program_order_are_no_races(void) {
    /* A writes x and wakes B (B's step is scheduled by event 0), B reads x:
     * dependent, but B could not run before A's step; A's own next step
     * follows it in program order */
    const step_spec steps[] = {
        {1, NONE, {10}, {W}, 1},
        {2, 0, {10}, {R}, 1},
        {1, NONE, {10}, {W}, 1},
    };
    cs_explorer *ex = record(steps, N(steps), 3);
    if (!ex) return;
    size_t n = 99;
    CHECK_EQ(cs_trace_races(ex, NULL, 0, &n), CS_OK);
    CHECK_EQ(n, 1); /* only (1, 2): B's read against A's second write */
    cs_race r;
    CHECK_EQ(cs_trace_races(ex, &r, 1, &n), CS_OK);
    CHECK_EQ(r.first, 1);
    CHECK_EQ(r.second, 2);
    cs_explorer_free(ex);
}

static void test_reversal_moves_the_independent_steps_between(void) {
    /* A writes x; C writes z; B reads z (after C); B reads x: the reversal of
     * (0, 3) runs C and B's steps first (they do not happen after A's) */
    const step_spec steps[] = {
        {1, NONE, {10}, {W}, 1},
        {3, NONE, {12}, {W}, 1},
        {2, NONE, {12}, {R}, 1},
        {2, NONE, {10}, {R}, 1},
    };
    cs_explorer *ex = record(steps, N(steps), 4);
    if (!ex) return;
    cs_actor sched[4];
    size_t len = 0;
    CHECK_EQ(cs_trace_reversal(ex, 0, 3, sched, N(sched), &len), CS_OK);
    const cs_actor want[] = {3, 2, 2, 1};
    CHECK(memcmp(sched, want, sizeof want) == 0);
    cs_explorer_free(ex);
}

/* The definition, by brute force over the public relations. */
static int is_race(cs_explorer *ex, size_t i, size_t j) {
    cs_event ei, ej;
    cs_trace_event(ex, i, &ei);
    cs_trace_event(ex, j, &ej);
    if (ei.actor == ej.actor || ej.scheduled_by == (int64_t)i) return 0;
    if (!cs_trace_dependent(ex, i, j)) return 0;
    for (size_t k = i + 1; k < j; k++)
        if (cs_trace_happens_before(ex, i, k) && cs_trace_happens_before(ex, k, j)) return 0;
    return 1;
}

static void test_races_match_the_definition_on_random_executions(void) {
    srand(7);
    for (int round = 0; round < 300; round++) {
        step_spec steps[9];
        size_t n = 3 + (size_t)(rand() % 7);
        for (size_t k = 0; k < n; k++) {
            steps[k].actor = (cs_actor)(1 + rand() % 3);
            steps[k].scheduled_by = (k > 0 && rand() % 4 == 0) ? (int64_t)(rand() % k) : NONE;
            steps[k].n_acc = 1 + rand() % 2;
            for (int a = 0; a < 2; a++) {
                steps[k].object[a] = 10 + (uint64_t)(rand() % 3);
                steps[k].kind[a] = rand() % 2 ? R : W;
            }
        }
        cs_explorer *ex = record(steps, n, 4);
        if (!ex) return;
        cs_race races[64];
        size_t nr = 0;
        CHECK_EQ(cs_trace_races(ex, races, N(races), &nr), CS_OK);
        size_t expected = 0, at = 0;
        for (size_t j = 0; j < n; j++)
            for (size_t i = 0; i < j; i++)
                if (is_race(ex, i, j)) {
                    expected++;
                    CHECK(at < nr && races[at].first == i && races[at].second == j);
                    at++;
                }
        CHECK_EQ(nr, expected);
        /* every reversal is a permutation of the schedule with j's step first
         * among the steps from position i on */
        for (size_t q = 0; q < nr && q < N(races); q++) {
            cs_actor sched[9], orig[9];
            size_t len = 0, olen = 0;
            CHECK_EQ(cs_trace_reversal(ex, races[q].first, races[q].second, sched, 9, &len), CS_OK);
            CHECK_EQ(cs_trace_schedule(ex, orig, 9, &olen), CS_OK);
            CHECK_EQ(len, n);
            int count[4] = {0, 0, 0, 0};
            for (size_t k = 0; k < n; k++) count[orig[k]]++, count[sched[k]]--;
            for (int a = 0; a < 4; a++) CHECK_EQ(count[a], 0);
            CHECK(memcmp(sched, orig, races[q].first * sizeof *orig) == 0);
        }
        cs_explorer_free(ex);
    }
}

#define TESTS(X)                                           \
    X(test_races_of_a_lost_update)                         \
    X(test_wakeup_and_program_order_are_no_races)          \
    X(test_reversal_moves_the_independent_steps_between)   \
    X(test_races_match_the_definition_on_random_executions)
CTEST_MAIN()
