/* test_cprog.c -- the C program driver under fifo and exhaustive. */
#include "chaossloth.h"
#include "ctest.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define N(a) (sizeof(a) / sizeof *(a))

/* counter++ without a lock: load; add; store */
static const cs_cprog_instr incr[] = {
    {.op = CS_OP_LOAD, .dst = 1, .base = 0},
    {.op = CS_OP_ADD, .dst = 1, .a = 1, .b_imm = 1},
    {.op = CS_OP_STORE, .b_reg = 1, .base = 0},
};

static const cs_cprog_instr incr_locked[] = {
    {.op = CS_OP_LOCK, .base = 0},
    {.op = CS_OP_LOAD, .dst = 1, .base = 0},
    {.op = CS_OP_ADD, .dst = 1, .a = 1, .b_imm = 1},
    {.op = CS_OP_STORE, .b_reg = 1, .base = 0},
    {.op = CS_OP_UNLOCK, .base = 0},
};

static int explore(const cs_cprog *p, cs_strategy_kind kind, cs_cprog_result *r) {
    cs_config cfg;
    cs_config_init(&cfg, kind);
    cfg.count_traces = 1;
    return cs_cprog_explore(p, &cfg, r);
}

static void test_lost_update_exhaustive(void) {
    cs_cprog_thread th[2] = {{incr, N(incr)}, {incr, N(incr)}};
    cs_cprog p = {.n_cells = 1, .n_threads = 2, .threads = th};
    cs_cprog_result r;
    CHECK_EQ(explore(&p, CS_STRATEGY_EXHAUSTIVE, &r), CS_OK);
    CHECK_EQ(r.stats.executions, 6); /* C(4,2) interleavings of 2+2 steps */
    CHECK_EQ(r.stats.complete, 1);
    /* finals: counter 2 (serial, 2 register states) or 1 (lost update) */
    CHECK_EQ(r.n_finals, 3);
    /* traces: w/r order matters on every conflicting pair */
    CHECK_EQ(r.stats.distinct_traces, 4);
    cs_cprog_result_free(&r);

    CHECK_EQ(explore(&p, CS_STRATEGY_FIFO, &r), CS_OK);
    CHECK_EQ(r.stats.executions, 1);
    CHECK_EQ(r.n_finals, 1);
    cs_cprog_result_free(&r);
}

static void test_assert_fails_on_lost_update(void) {
    /* main-less: thread 2 waits for both increments by spinning is not
     * expressible without a join, so thread 1 checks its own view instead:
     * after its store it reloads and asserts it sees its own value. */
    static const cs_cprog_instr check[] = {
        {.op = CS_OP_LOAD, .dst = 1, .base = 0},
        {.op = CS_OP_ADD, .dst = 1, .a = 1, .b_imm = 1},
        {.op = CS_OP_STORE, .b_reg = 1, .base = 0},
        {.op = CS_OP_LOAD, .dst = 2, .base = 0},
        {.op = CS_OP_ASSERT, .a = 2, .b_reg = 1},
    };
    cs_cprog_thread th[2] = {{check, N(check)}, {incr, N(incr)}};
    cs_cprog p = {.n_cells = 1, .n_threads = 2, .threads = th};
    cs_cprog_result r;
    CHECK_EQ(explore(&p, CS_STRATEGY_EXHAUSTIVE, &r), CS_OK);
    CHECK_EQ(r.stats.executions, 10); /* C(5,2) */
    CHECK(r.assert_failed > 0);
    CHECK_EQ(r.assert_failed, r.stats.failing);
    cs_cprog_result_free(&r);
}


static void test_locks_block(void) {
    cs_cprog_thread th[2] = {{incr_locked, N(incr_locked)}, {incr_locked, N(incr_locked)}};
    cs_cprog p = {.n_cells = 1, .n_locks = 1, .n_threads = 2, .threads = th};
    cs_cprog_result r;
    CHECK_EQ(explore(&p, CS_STRATEGY_EXHAUSTIVE, &r), CS_OK);
    /* whoever locks first runs its critical section; the other is not
     * enabled until the unlock, after which it is alone */
    CHECK_EQ(r.stats.executions, 2);
    CHECK_EQ(r.n_finals, 2); /* counter 2; registers differ by order */
    CHECK_EQ(r.deadlocks, 0);
    cs_cprog_result_free(&r);
}

static void test_deadlock_detected(void) {
    static const cs_cprog_instr ab[] = {
        {.op = CS_OP_LOCK, .base = 0}, {.op = CS_OP_LOCK, .base = 1},
        {.op = CS_OP_UNLOCK, .base = 1}, {.op = CS_OP_UNLOCK, .base = 0},
    };
    static const cs_cprog_instr ba[] = {
        {.op = CS_OP_LOCK, .base = 1}, {.op = CS_OP_LOCK, .base = 0},
        {.op = CS_OP_UNLOCK, .base = 0}, {.op = CS_OP_UNLOCK, .base = 1},
    };
    cs_cprog_thread th[2] = {{ab, N(ab)}, {ba, N(ba)}};
    cs_cprog p = {.n_cells = 0, .n_locks = 2, .n_threads = 2, .threads = th};
    cs_cprog_result r;
    CHECK_EQ(explore(&p, CS_STRATEGY_EXHAUSTIVE, &r), CS_OK);
    CHECK_EQ(r.deadlocks, 2); /* a0 b1 and b1 a0 */
    CHECK_EQ(r.stats.executions, 6); /* 3 per first locker */
    cs_cprog_result_free(&r);
}

static void test_loops_and_cas(void) {
    /* each thread claims the first free slot of a 3-cell table with CAS */
    static const cs_cprog_instr claim[] = {
        {.op = CS_OP_SET, .dst = 2, .b_imm = 0},                      /* 0: i = 0 */
        {.op = CS_OP_CAS, .dst = 1, .a = 2, .base = 0, .b_imm = 0, .c_imm = 7}, /* 1 */
        {.op = CS_OP_JNE, .a = 1, .b_imm = 0, .target = 5},           /* 2: won */
        {.op = CS_OP_ADD, .dst = 2, .a = 2, .b_imm = 1},              /* 3: i++ */
        {.op = CS_OP_JMP, .target = 1},                               /* 4 */
    };
    cs_cprog_thread th[3] = {{claim, N(claim)}, {claim, N(claim)}, {claim, N(claim)}};
    cs_cprog p = {.n_cells = 3, .n_threads = 3, .threads = th};
    cs_cprog_result r;
    CHECK_EQ(explore(&p, CS_STRATEGY_EXHAUSTIVE, &r), CS_OK);
    CHECK_EQ(r.n_finals, 6); /* which thread got which slot: 3! */
    CHECK_EQ(r.stats.complete, 1);
    cs_cprog_result_free(&r);
}

static void test_bad_programs(void) {
    static const cs_cprog_instr bad_jump[] = {{.op = CS_OP_JMP, .target = 5}};
    static const cs_cprog_instr bad_lock[] = {{.op = CS_OP_LOCK, .base = 3}};
    static const cs_cprog_instr bad_addr[] = {{.op = CS_OP_LOAD, .dst = 1, .base = 9}};
    static const cs_cprog_instr bad_unlock[] = {{.op = CS_OP_UNLOCK, .base = 0}};
    static const cs_cprog_instr spin[] = {{.op = CS_OP_JMP, .target = 0}};
    cs_cprog_thread th[1] = {{bad_jump, 1}};
    cs_cprog p = {.n_cells = 1, .n_locks = 1, .n_threads = 1, .threads = th};
    cs_cprog_result r;
    CHECK_EQ(explore(&p, CS_STRATEGY_FIFO, &r), CS_EINVAL);
    th[0].code = bad_lock;
    CHECK_EQ(explore(&p, CS_STRATEGY_FIFO, &r), CS_EINVAL);
    th[0].code = bad_addr;
    CHECK_EQ(explore(&p, CS_STRATEGY_FIFO, &r), CS_EINVAL);
    th[0].code = bad_unlock;
    CHECK_EQ(explore(&p, CS_STRATEGY_FIFO, &r), CS_EINVAL);
    th[0].code = spin;
    p.max_local_ops = 1000;
    CHECK_EQ(explore(&p, CS_STRATEGY_FIFO, &r), CS_EINVAL);
    CHECK_EQ(cs_cprog_explore(NULL, NULL, &r), CS_EINVAL);
}

static void test_step_budget(void) {
    static const cs_cprog_instr forever[] = {
        {.op = CS_OP_LOAD, .dst = 1, .base = 0}, {.op = CS_OP_JMP, .target = 0}};
    cs_cprog_thread th[1] = {{forever, N(forever)}};
    cs_cprog p = {.n_cells = 1, .n_threads = 1, .threads = th};
    cs_config cfg;
    cs_config_init(&cfg, CS_STRATEGY_FIFO);
    cfg.max_steps = 50;
    cs_cprog_result r;
    CHECK_EQ(cs_cprog_explore(&p, &cfg, &r), CS_OK);
    CHECK_EQ(r.budget, 1);
    CHECK_EQ(r.stats.aborted, 1);
    CHECK_EQ(r.n_finals, 0);
    cs_cprog_result_free(&r);
}

#define TESTS(X)                                                               \
    X(test_lost_update_exhaustive) X(test_assert_fails_on_lost_update)         \
    X(test_locks_block) X(test_deadlock_detected) X(test_loops_and_cas)        \
    X(test_bad_programs) X(test_step_budget)
CTEST_MAIN()
