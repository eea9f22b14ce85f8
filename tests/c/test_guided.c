/* test_guided.c -- the guided strategy (strategy_guided.c): it follows a
 * schedule wherever the prescribed actor is enabled, takes the schedule's
 * next enabled entry where it is not, the default choice where nothing of
 * the schedule is enabled, counts the deviations, and never diverges. */
#include "chaossloth.h"
#include "ctest.h"

#include <string.h>

#define N(a) (sizeof(a) / sizeof *(a))

/* A guided explorer over `sched` with actors 0..n_actors-1 interned as the
 * root's children (actor 0 is the root). */
static cs_explorer *make_guided(const cs_actor *sched, size_t len, int n_actors) {
    cs_config cfg;
    cs_config_init(&cfg, CS_STRATEGY_GUIDED);
    cfg.replay = sched;
    cfg.replay_len = len;
    cs_explorer *ex = NULL;
    CHECK_EQ(cs_explorer_new(&cfg, &ex), CS_OK);
    if (!ex) return NULL;
    cs_actor root, id;
    CHECK_EQ(cs_actor_intern(ex, CS_NO_ACTOR, 0, &root), CS_OK);
    for (int i = 1; i < n_actors; i++) {
        CHECK_EQ(cs_actor_intern(ex, root, (uint32_t)(i - 1), &id), CS_OK);
        CHECK_EQ(id, i);
    }
    return ex;
}

/* One step: the engine chooses among `enabled`; the chosen actor runs a step
 * with no accesses.  Returns the chosen actor (CS_NO_ACTOR on an error). */
static cs_actor step(cs_explorer *ex, const cs_actor *enabled, size_t n) {
    size_t pick = n;
    int rc = cs_choose(ex, enabled, n, &pick);
    CHECK_EQ(rc, CS_OK);
    if (rc || pick >= n) return CS_NO_ACTOR;
    CHECK_EQ(cs_step_begin(ex, enabled[pick], CS_SCHEDULED_BY_NONE), CS_OK);
    CHECK_EQ(cs_step_end(ex), CS_OK);
    return enabled[pick];
}

static uint64_t deviations(const cs_explorer *ex) {
    cs_stats st;
    cs_explorer_stats(ex, &st);
    return st.guide_deviations;
}

static void begin(cs_explorer *ex) {
    int more = 0;
    CHECK_EQ(cs_execution_begin(ex, &more), CS_OK);
    CHECK_EQ(more, 1);
}

static void test_guided_name_round_trip(void) {
    CHECK_EQ(cs_strategy_from_name("guided"), CS_STRATEGY_GUIDED);
    CHECK(strcmp(cs_strategy_name(CS_STRATEGY_GUIDED), "guided") == 0);
    cs_config cfg;
    cs_config_init(&cfg, CS_STRATEGY_GUIDED);
    cfg.replay_len = 3; /* a length without a sequence */
    cs_explorer *ex = NULL;
    CHECK_EQ(cs_explorer_new(&cfg, &ex), CS_EINVAL);
    CHECK(ex == NULL);
}

/* Everything enabled all along, listed in the reverse of the schedule's
 * preference: the schedule is followed step by step, 0 deviations. */
static void test_guided_follows_a_feasible_schedule(void) {
    static const cs_actor sched[] = {0, 2, 1, 1, 0, 2};
    cs_explorer *ex = make_guided(sched, N(sched), 3);
    begin(ex);
    const cs_actor all[] = {2, 1, 0};
    for (size_t i = 0; i < N(sched); i++) CHECK_EQ(step(ex, all, 3), sched[i]);
    CHECK_EQ(deviations(ex), 0);
    /* used up: the default choice (index 0 of enabled), each a deviation */
    const cs_actor rest[] = {1, 2};
    CHECK_EQ(step(ex, rest, 2), 1);
    CHECK_EQ(step(ex, rest, 2), 1);
    CHECK_EQ(deviations(ex), 2);
    CHECK_EQ(cs_execution_end(ex, CS_OUTCOME_OK), CS_OK);
    cs_explorer_free(ex);
}

/* A lock blocks actor 1 where the schedule wants it: the next enabled entry
 * (actor 0's later step) runs instead, and actor 1's entry is taken as soon
 * as it is enabled again -- before anything later in the schedule. */
static void test_guided_skips_a_blocked_entry_and_takes_it_later(void) {
    static const cs_actor sched[] = {0, 1, 0, 1, 2};
    cs_explorer *ex = make_guided(sched, N(sched), 3);
    begin(ex);
    const cs_actor s0[] = {0, 1, 2};
    CHECK_EQ(step(ex, s0, 3), 0); /* entry 0 */
    CHECK_EQ(deviations(ex), 0);
    const cs_actor s1[] = {2, 0}; /* 1 is blocked */
    CHECK_EQ(step(ex, s1, 2), 0); /* entry 2, not 2's entry 4, not enabled[0] */
    CHECK_EQ(deviations(ex), 1);
    const cs_actor s2[] = {2, 1}; /* 1 is enabled again */
    CHECK_EQ(step(ex, s2, 2), 1); /* entry 1: the cursor's, no deviation */
    CHECK_EQ(deviations(ex), 1);
    CHECK_EQ(step(ex, s2, 2), 1); /* entry 3 */
    CHECK_EQ(step(ex, s2, 2), 2); /* entry 4 */
    CHECK_EQ(deviations(ex), 1);
    CHECK_EQ(cs_execution_end(ex, CS_OUTCOME_OK), CS_OK);
    CHECK_EQ(cs_divergence(ex, NULL, NULL, NULL), CS_ESTATE);
    cs_explorer_free(ex);
}

/* Nothing of the rest of the schedule is enabled: the default choice, which
 * consumes no entry (the schedule's entry for that actor, if any, is still
 * there for a later step). */
static void test_guided_default_when_no_entry_is_enabled(void) {
    static const cs_actor sched[] = {1, 2};
    cs_explorer *ex = make_guided(sched, N(sched), 4);
    begin(ex);
    const cs_actor s0[] = {3, 0};
    CHECK_EQ(step(ex, s0, 2), 3); /* enabled[0] */
    CHECK_EQ(deviations(ex), 1);
    const cs_actor s1[] = {3, 2, 1};
    CHECK_EQ(step(ex, s1, 3), 1); /* entry 0 still first */
    CHECK_EQ(step(ex, s1, 3), 2);
    CHECK_EQ(deviations(ex), 1);
    CHECK_EQ(cs_execution_end(ex, CS_OUTCOME_OK), CS_OK);
    cs_explorer_free(ex);
}

/* Entries of actors that never exist here (ids never interned, far past the
 * table) are skipped; they stay unconsumed, so the cursor stays on the first
 * of them and every later choice counts as a deviation. */
static void test_guided_unknown_actors_never_block_the_run(void) {
    static const cs_actor sched[] = {1, 7, 1000000, 2, 1};
    cs_explorer *ex = make_guided(sched, N(sched), 3);
    begin(ex);
    const cs_actor all[] = {0, 1, 2};
    CHECK_EQ(step(ex, all, 3), 1); /* entry 0 */
    CHECK_EQ(deviations(ex), 0);
    CHECK_EQ(step(ex, all, 3), 2); /* entry 3: entries 1, 2 never enabled */
    CHECK_EQ(step(ex, all, 3), 1); /* entry 4 */
    CHECK_EQ(step(ex, all, 3), 0); /* used up (entries 1, 2 left): default */
    CHECK_EQ(deviations(ex), 3);
    CHECK_EQ(cs_execution_end(ex, CS_OUTCOME_OK), CS_OK);
    cs_stats st;
    cs_explorer_stats(ex, &st);
    CHECK_EQ(st.aborted, 0);
    CHECK_EQ(st.executions, 1);
    cs_explorer_free(ex);
}

/* An empty schedule is fifo; the execution may end with the schedule unused
 * or half used: no divergence, one execution only. */
static void test_guided_never_diverges_and_runs_once(void) {
    cs_explorer *ex = make_guided(NULL, 0, 3);
    begin(ex);
    const cs_actor all[] = {2, 0, 1};
    for (int i = 0; i < 4; i++) CHECK_EQ(step(ex, all, 3), 2);
    CHECK_EQ(deviations(ex), 4);
    CHECK_EQ(cs_execution_end(ex, CS_OUTCOME_FAILED), CS_OK);
    int more = 1;
    CHECK_EQ(cs_execution_begin(ex, &more), CS_OK);
    CHECK_EQ(more, 0);
    cs_explorer_free(ex);

    static const cs_actor sched[] = {1, 2, 1, 2};
    ex = make_guided(sched, N(sched), 3);
    begin(ex);
    CHECK_EQ(step(ex, all, 3), 1);
    /* the program ends with three entries left: replay would diverge */
    CHECK_EQ(cs_execution_end(ex, CS_OUTCOME_OK), CS_OK);
    CHECK_EQ(cs_divergence(ex, NULL, NULL, NULL), CS_ESTATE);
    cs_stats st;
    cs_explorer_stats(ex, &st);
    CHECK_EQ(st.aborted, 0);
    CHECK_EQ(st.failing, 0);
    CHECK_EQ(st.executions, 1);
    cs_explorer_free(ex);
}

/* A step the front end runs without asking is accounted as if chosen: it
 * consumes its actor's first unconsumed entry from the cursor on. */
static void test_guided_accounts_steps_it_did_not_choose(void) {
    static const cs_actor sched[] = {1, 2, 2};
    cs_explorer *ex = make_guided(sched, N(sched), 3);
    begin(ex);
    CHECK_EQ(cs_step_begin(ex, 2, CS_SCHEDULED_BY_NONE), CS_OK); /* unasked */
    CHECK_EQ(cs_step_end(ex), CS_OK);
    CHECK_EQ(deviations(ex), 1);
    const cs_actor all[] = {0, 1, 2};
    CHECK_EQ(step(ex, all, 3), 1); /* entry 0 */
    CHECK_EQ(step(ex, all, 3), 2); /* entry 2: entry 1 was consumed */
    CHECK_EQ(step(ex, all, 3), 0); /* used up */
    CHECK_EQ(deviations(ex), 2);
    CHECK_EQ(cs_execution_end(ex, CS_OUTCOME_OK), CS_OK);
    cs_explorer_free(ex);
}

/* Other strategies report 0 deviations. */
static void test_other_strategies_count_no_guide_deviations(void) {
    static const cs_actor sched[] = {1, 0};
    cs_config cfg;
    cs_config_init(&cfg, CS_STRATEGY_REPLAY);
    cfg.replay = sched;
    cfg.replay_len = N(sched);
    cs_explorer *ex = NULL;
    CHECK_EQ(cs_explorer_new(&cfg, &ex), CS_OK);
    cs_actor root, child;
    cs_actor_intern(ex, CS_NO_ACTOR, 0, &root);
    cs_actor_intern(ex, root, 0, &child);
    begin(ex);
    const cs_actor all[] = {0, 1};
    CHECK_EQ(step(ex, all, 2), 1);
    CHECK_EQ(step(ex, all, 2), 0);
    CHECK_EQ(cs_execution_end(ex, CS_OUTCOME_OK), CS_OK);
    CHECK_EQ(deviations(ex), 0);
    cs_explorer_free(ex);
}

/* ------------------------------------------- a lost update and its lock */

/* counter++ without a lock: LOAD; (ADD); STORE -- 2 steps per thread */
static const cs_cprog_instr incr[] = {
    {.op = CS_OP_LOAD, .dst = 1, .base = 0},
    {.op = CS_OP_ADD, .dst = 1, .a = 1, .b_imm = 1},
    {.op = CS_OP_STORE, .b_reg = 1, .base = 0},
};

/* the same under lock 0: LOCK; LOAD; (ADD); STORE; UNLOCK -- 4 steps */
static const cs_cprog_instr incr_locked[] = {
    {.op = CS_OP_LOCK, .base = 0},
    {.op = CS_OP_LOAD, .dst = 1, .base = 0},
    {.op = CS_OP_ADD, .dst = 1, .a = 1, .b_imm = 1},
    {.op = CS_OP_STORE, .b_reg = 1, .base = 0},
    {.op = CS_OP_UNLOCK, .base = 0},
};

/* The interleaving load0 load1 store0 store1 loses an update.  Replayed on
 * the locked program it diverges (thread 1 cannot take the lock at step 1);
 * guided, it runs to completion: thread 0's critical section, then thread
 * 1's, with 5 deviations (computed by hand in the comments). */
static void test_guided_runs_the_lost_update_schedule_on_the_locked_program(void) {
    static const cs_actor lost[] = {0, 1, 0, 1};
    cs_cprog_thread plain[2] = {{incr, N(incr)}, {incr, N(incr)}};
    cs_cprog_thread locked[2] = {{incr_locked, N(incr_locked)},
                                 {incr_locked, N(incr_locked)}};
    cs_cprog p_plain = {.n_cells = 1, .n_threads = 2, .threads = plain};
    cs_cprog p_locked = {.n_cells = 1, .n_locks = 1, .n_threads = 2, .threads = locked};
    cs_config cfg;
    cs_cprog_result r;

    /* the schedule is feasible on the original: replay and guided agree */
    cs_config_init(&cfg, CS_STRATEGY_REPLAY);
    cfg.replay = lost;
    cfg.replay_len = N(lost);
    CHECK_EQ(cs_cprog_explore(&p_plain, &cfg, &r), CS_OK);
    CHECK_EQ(r.diverged, 0);
    CHECK_EQ(r.n_finals, 1);
    uint64_t replay_final = r.n_finals ? r.finals[0] : 0;
    cs_cprog_result_free(&r);
    cfg.kind = CS_STRATEGY_GUIDED;
    CHECK_EQ(cs_cprog_explore(&p_plain, &cfg, &r), CS_OK);
    CHECK_EQ(r.diverged, 0);
    CHECK_EQ(r.n_finals, 1);
    if (r.n_finals) CHECK(r.finals[0] == replay_final);
    CHECK_EQ(r.stats.guide_deviations, 0);
    cs_cprog_result_free(&r);

    /* on the locked program replay diverges ... */
    cfg.kind = CS_STRATEGY_REPLAY;
    CHECK_EQ(cs_cprog_explore(&p_locked, &cfg, &r), CS_OK);
    CHECK_EQ(r.diverged, 1);
    cs_cprog_result_free(&r);
    /* ... guided does not: LOCK0 (entry 0), LOAD0 (entry 2, deviation),
     * STORE0 and UNLOCK0 (default, 2 deviations), LOCK1 (entry 1), LOAD1
     * (entry 3), STORE1 and UNLOCK1 (used up, 2 deviations). */
    cfg.kind = CS_STRATEGY_GUIDED;
    CHECK_EQ(cs_cprog_explore(&p_locked, &cfg, &r), CS_OK);
    CHECK_EQ(r.diverged, 0);
    CHECK_EQ(r.deadlocks, 0);
    CHECK_EQ(r.stats.executions, 1);
    CHECK_EQ(r.stats.aborted, 0);
    CHECK_EQ(r.stats.max_depth, 8);
    CHECK_EQ(r.stats.guide_deviations, 5);
    cs_cprog_result_free(&r);
}

#define TESTS(X)                                                               \
    X(test_guided_name_round_trip)                                             \
    X(test_guided_follows_a_feasible_schedule)                                 \
    X(test_guided_skips_a_blocked_entry_and_takes_it_later)                    \
    X(test_guided_default_when_no_entry_is_enabled)                            \
    X(test_guided_unknown_actors_never_block_the_run)                          \
    X(test_guided_never_diverges_and_runs_once)                                \
    X(test_guided_accounts_steps_it_did_not_choose)                            \
    X(test_other_strategies_count_no_guide_deviations)                         \
    X(test_guided_runs_the_lost_update_schedule_on_the_locked_program)
CTEST_MAIN()
