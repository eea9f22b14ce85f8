/* test_explorer.c -- actor interning, call sequencing, fifo. */
#include "chaossloth.h"
#include "ctest.h"

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

#define TESTS(X) X(test_intern_is_stable) X(test_sequencing_and_fifo) X(test_names)
CTEST_MAIN()
