/* test_explorer.c -- actor interning, call sequencing, fifo, the bounded
 * distinct-trace count. */
#include "chaossloth.h"
#include "ctest.h"
#include "internal.h"

#include <stdlib.h>

static void test_intern_is_stable(void) {
    cs_config cfg;
    cs_config_init(&cfg, CS_STRATEGY_FIFO);
    cs_explorer *ex = NULL;
    CHECK_EQ(cs_explorer_new(&cfg, &ex), CS_OK);
    cs_actor root, a, b, a2, bad;
    CHECK_EQ(cs_actor_intern(ex, CS_NO_ACTOR, 0, &root), CS_OK);
    CHECK_EQ(cs_actor_intern(ex, root, 0, &a), CS_OK);
    CHECK_EQ(cs_actor_intern(ex, root, 1, &b), CS_OK);
    CHECK_EQ(cs_actor_intern(ex, root, 0, &a2), CS_OK);
    CHECK_EQ(a, a2);
    CHECK(a != b && a != root);
    for (uint32_t i = 0; i < 1000; i++) {
        cs_actor x, y;
        CHECK_EQ(cs_actor_intern(ex, b, i, &x), CS_OK);
        CHECK_EQ(cs_actor_intern(ex, b, i, &y), CS_OK);
        CHECK_EQ(x, y);
    }
    cs_actor parent;
    uint32_t index;
    CHECK_EQ(cs_actor_path(ex, b, &parent, &index), CS_OK);
    CHECK_EQ(parent, root);
    CHECK_EQ(index, 1);
    CHECK_EQ(cs_actor_intern(ex, 99999, 0, &bad), CS_EINVAL);
    cs_explorer_free(ex);
}

static void test_sequencing_and_fifo(void) {
    cs_config cfg;
    cs_config_init(&cfg, CS_STRATEGY_FIFO);
    cfg.max_steps = 3;
    cs_explorer *ex = NULL;
    CHECK_EQ(cs_explorer_new(&cfg, &ex), CS_OK);
    cs_actor r, t;
    cs_actor_intern(ex, CS_NO_ACTOR, 0, &r);
    cs_actor_intern(ex, r, 0, &t);
    size_t pick = 7;
    cs_actor en[2] = {t, r};
    CHECK_EQ(cs_choose(ex, en, 2, &pick), CS_ESTATE);
    int more = 0;
    CHECK_EQ(cs_execution_begin(ex, &more), CS_OK);
    CHECK_EQ(more, 1);
    CHECK_EQ(cs_access_record(ex, 1, 2, CS_READ, 0), CS_ESTATE);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(cs_choose(ex, en, 2, &pick), CS_OK);
        CHECK_EQ(pick, 0);
        CHECK_EQ(cs_step_begin(ex, en[pick], i - 1), CS_OK);
        CHECK_EQ(cs_step_begin(ex, en[pick], -1), CS_ESTATE);
        CHECK_EQ(cs_access_record(ex, 1, 2, CS_WRITE, 0), CS_OK);
        CHECK_EQ(cs_step_end(ex), CS_OK);
    }
    CHECK_EQ(cs_choose(ex, en, 2, &pick), CS_EBUDGET);
    CHECK_EQ(cs_trace_length(ex), 3);
    CHECK_EQ(cs_execution_end(ex, CS_OUTCOME_OK), CS_OK);
    CHECK_EQ(cs_execution_begin(ex, &more), CS_OK);
    CHECK_EQ(more, 0);
    cs_stats st;
    cs_explorer_stats(ex, &st);
    CHECK_EQ(st.executions, 1);
    CHECK_EQ(st.complete, 0);
    cs_explorer_free(ex);
}

static void test_names(void) {
    for (int k = 0; k <= CS_STRATEGY_EXHAUSTIVE; k++)
        CHECK_EQ(cs_strategy_from_name(cs_strategy_name((cs_strategy_kind)k)), k);
    CHECK_EQ(cs_strategy_from_name("nope"), -1);
    CHECK(cs_strerror(CS_EDIVERGED)[0] != '\0');
}

/* Exact up to the threshold, then a sketch: the count stays within a few
 * standard errors (0.4% each) of the truth, re-adding seen values changes
 * nothing, and the exact table is freed at the switch. */
static void test_distinct_exact_then_sketch(void) {
    cs__distinct d = {0};
    d.exact_max = 1000;
    uint64_t x = 12345;
    for (uint64_t i = 0; i < 1000; i++) CHECK_EQ(cs__distinct_add(&d, x + i * 7919), 1);
    for (uint64_t i = 0; i < 1000; i += 3) CHECK_EQ(cs__distinct_add(&d, x + i * 7919), 0);
    CHECK_EQ(cs__distinct_count(&d), 1000);
    CHECK(!cs__distinct_estimated(&d));
    CHECK_EQ(cs__distinct_add(&d, 1), 0); /* the 1001st: the switch */
    CHECK(cs__distinct_estimated(&d));
    CHECK(d.exact.slots == NULL);
    uint64_t c = cs__distinct_count(&d);
    CHECK(c >= 990 && c <= 1012); /* linear counting: well within 1% here */
    const uint64_t n = 200000;
    for (uint64_t i = 0; i < n; i++) cs__distinct_add(&d, 0x9e3779b97f4a7c15ULL * (i + 5000));
    uint64_t big = cs__distinct_count(&d), truth = n + 1001;
    CHECK(big > truth - truth / 50 && big < truth + truth / 50);
    for (uint64_t i = 0; i < n; i += 2) cs__distinct_add(&d, 0x9e3779b97f4a7c15ULL * (i + 5000));
    CHECK_EQ(cs__distinct_count(&d), big);
    cs__distinct_free(&d);
}

/* Through the explorer: a tiny cs_config.exact_traces turns the count into
 * an estimate (cs_stats.traces_estimated) that stays close to the exact
 * count of the same run. */
static uint64_t count_orders(uint64_t exact_traces, int *estimated) {
    cs_config cfg;
    cs_config_init(&cfg, CS_STRATEGY_RANDOM);
    cfg.seed = 3;
    cfg.count_traces = 1;
    cfg.max_executions = 3000;
    cfg.exact_traces = exact_traces;
    cs_explorer *ex = NULL;
    CHECK_EQ(cs_explorer_new(&cfg, &ex), CS_OK);
    cs_actor a[3];
    cs_actor_intern(ex, CS_NO_ACTOR, 0, &a[0]);
    cs_actor_intern(ex, a[0], 0, &a[1]);
    cs_actor_intern(ex, a[0], 1, &a[2]);
    int more = 1;
    while (cs_execution_begin(ex, &more) == CS_OK && more) {
        int left[3] = {3, 3, 3};
        for (;;) {
            cs_actor en[3];
            size_t n = 0, pick;
            for (int k = 0; k < 3; k++)
                if (left[k]) en[n++] = a[k];
            if (!n) break;
            CHECK_EQ(cs_choose(ex, en, n, &pick), CS_OK);
            cs_step_begin(ex, en[pick], CS_SCHEDULED_BY_NONE);
            cs_access_record(ex, 1, 0, CS_WRITE, 0); /* every step conflicts */
            cs_step_end(ex);
            left[en[pick] == a[0] ? 0 : en[pick] == a[1] ? 1 : 2]--;
        }
        CHECK_EQ(cs_execution_end(ex, CS_OUTCOME_OK), CS_OK);
    }
    cs_stats st;
    cs_explorer_stats(ex, &st);
    *estimated = st.traces_estimated;
    cs_explorer_free(ex);
    return st.distinct_traces;
}

static void test_explorer_trace_count_estimate(void) {
    int est_exact = 1, est_sketch = 0;
    uint64_t exact = count_orders(0, &est_exact), sketch = count_orders(10, &est_sketch);
    CHECK_EQ(est_exact, 0);
    CHECK_EQ(est_sketch, 1);
    CHECK(exact > 300); /* 9! / (3! 3! 3!) = 1680 orders, most of them seen */
    CHECK(sketch + exact / 50 >= exact && sketch <= exact + exact / 50);
}

/* cs_step_rewind drops a step's accesses past a mark only when the barrier
 * covers each of them, and leaves the step unchanged otherwise. */
static void test_step_rewind(void) {
    cs_config cfg;
    cs_config_init(&cfg, CS_STRATEGY_FIFO);
    cs_explorer *ex = NULL;
    CHECK_EQ(cs_explorer_new(&cfg, &ex), CS_OK);
    cs_actor r;
    cs_actor_intern(ex, CS_NO_ACTOR, 0, &r);
    int more = 0, dropped = 7;
    size_t n = 99, pick;
    CHECK_EQ(cs_step_access_count(ex, &n), CS_ESTATE);
    CHECK_EQ(cs_execution_begin(ex, &more), CS_OK);
    CHECK_EQ(cs_choose(ex, &r, 1, &pick), CS_OK);
    CHECK_EQ(cs_step_begin(ex, r, -1), CS_OK);
    CHECK_EQ(cs_access_record(ex, 1, 1, CS_WRITE, 0), CS_OK); /* before the mark: stays */
    CHECK_EQ(cs_step_access_count(ex, &n), CS_OK);
    CHECK_EQ(n, 1);
    CHECK_EQ(cs_access_record(ex, 2, 1, CS_READ, 0), CS_OK);
    CHECK_EQ(cs_access_record(ex, 3, CS_KEY_WHOLE, CS_WRITE, 0), CS_OK);
    /* a read barrier does not cover a write: nothing changes */
    CHECK_EQ(cs_step_rewind(ex, 1, CS_READ, &dropped), CS_OK);
    CHECK_EQ(dropped, 0);
    CHECK_EQ(cs_step_access_count(ex, &n), CS_OK);
    CHECK_EQ(n, 3);
    CHECK_EQ(cs_step_rewind(ex, 4, CS_WRITE, &dropped), CS_EINVAL);
    CHECK_EQ(cs_step_rewind(ex, 1, CS_ADD, &dropped), CS_EINVAL);
    CHECK_EQ(cs_step_rewind(ex, 1, CS_WRITE, &dropped), CS_OK);
    CHECK_EQ(dropped, 1);
    CHECK_EQ(cs_step_access_count(ex, &n), CS_OK);
    CHECK_EQ(n, 1);
    /* an enabling read and a lock operation are never covered */
    CHECK_EQ(cs_access_record(ex, 4, 1, (cs_access_kind)(CS_READ | CS_ENABLING), 0), CS_OK);
    CHECK_EQ(cs_step_rewind(ex, 1, CS_WRITE, &dropped), CS_OK);
    CHECK_EQ(dropped, 0);
    CHECK_EQ(cs_access_record(ex, 5, 1, CS_LOCK_ACQUIRE, 0), CS_OK);
    CHECK_EQ(cs_step_rewind(ex, 2, CS_WRITE, &dropped), CS_OK);
    CHECK_EQ(dropped, 0);
    CHECK_EQ(cs_access_record(ex, CS_OBJECT_ALL, CS_KEY_WHOLE, CS_WRITE, 0), CS_OK);
    CHECK_EQ(cs_step_end(ex), CS_OK);
    cs_event e;
    CHECK_EQ(cs_trace_event(ex, 0, &e), CS_OK);
    CHECK_EQ(e.n_accesses, 4);
    cs_access a;
    CHECK_EQ(cs_trace_access(ex, e.first_access, &a), CS_OK);
    CHECK_EQ(a.object, 1);
    CHECK_EQ(cs_trace_access(ex, e.first_access + 3, &a), CS_OK);
    CHECK_EQ(a.object, CS_OBJECT_ALL);
    CHECK_EQ(cs_step_rewind(ex, 0, CS_WRITE, &dropped), CS_ESTATE);
    CHECK_EQ(cs_execution_end(ex, CS_OUTCOME_OK), CS_OK);
    cs_explorer_free(ex);
}

#define TESTS(X)                                                               \
    X(test_intern_is_stable) X(test_sequencing_and_fifo) X(test_names)         \
    X(test_distinct_exact_then_sketch) X(test_explorer_trace_count_estimate)   \
    X(test_step_rewind)
CTEST_MAIN()
