/* test_dpor.c -- optimal DPOR against brute force.
 *
 * SOUNDNESS: on many small generated C programs (2-4 threads, a few
 * operations over 2-3 cells, some with locks), dpor reaches exactly the set
 * of final states that exhaustive reaches.
 * OPTIMALITY: on programs without locks, dpor runs exactly one execution per
 * Mazurkiewicz trace (exhaustive with count_traces counts them) and never a
 * sleep-set-blocked one.
 * CS_DPOR_PROGRAMS=N runs N programs per family instead of the default;
 * CS_DPOR_SEED=S changes the generator's seed; CS_DPOR_STEPS=K the bound on
 * visible operations per program (default 8 without locks, 9 with). */
#define _POSIX_C_SOURCE 200809L /* fork, pipe, waitpid: the shared-tree test */
#include "chaossloth.h"
#include "ctest.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define N(a) (sizeof(a) / sizeof *(a))

static uint64_t rs;
static uint32_t rnd(uint32_t bound) {
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (uint32_t)((rs >> 11) % bound);
}

#define MAXT 4
#define MAXI 24

typedef struct {
    cs_cprog_instr code[MAXT][MAXI];
    cs_cprog_thread th[MAXT];
    cs_cprog p;
    int steps; /* visible operations, all threads */
} gprog;

static void emit(gprog *g, int t, cs_cprog_instr in) {
    g->code[t][g->th[t].len++] = in;
}

/* A random program.  Locks (if asked) are well nested, so no thread unlocks
 * a lock it does not hold; deadlocks are possible and are final states.
 * With `barriers`, about one operation in five is a global barrier (BARRIER,
 * a write of CS_OBJECT_ALL that reads and changes every cell, or
 * BARRIER_READ); without, the generator's stream is the historical one. */
static long barrier_ops; /* barrier operations generated (the tests check > 0) */
/* when set, about one operation in four is an INC (a CS_ADD: increments commute); unset, the
 * generator's stream is the historical one */
static bool gen_adds;
static long add_ops;
static void gen_program(gprog *g, bool locks, int max_steps, bool barriers) {
    memset(g, 0, sizeof *g);
    int nt = 2 + (int)rnd(3);
    int cells = 2 + (int)rnd(2);
    int budget = max_steps;
    for (int t = 0; t < nt; t++) {
        g->th[t].code = g->code[t];
        int left_threads = nt - t - 1;
        int avail = budget - left_threads;
        int ops = 1 + (int)rnd(avail < 3 ? (uint32_t)avail : 3);
        if (ops > avail) ops = avail;
        int lock_from = -1, lock_to = -1, lock_id = 0;
        if (locks && ops >= 1 && rnd(3) != 0 && avail - ops >= 2) {
            lock_from = (int)rnd((uint32_t)ops);
            lock_to = lock_from + (int)rnd((uint32_t)(ops - lock_from));
            lock_id = (int)rnd(2);
        }
        for (int k = 0; k < ops; k++) {
            if (k == lock_from) {
                emit(g, t, (cs_cprog_instr){.op = CS_OP_LOCK, .base = lock_id});
                budget--;
            }
            int cell = (int)rnd((uint32_t)cells);
            uint8_t reg = (uint8_t)(1 + rnd(3));
            if (gen_adds && rnd(4) == 0) {
                emit(g, t, (cs_cprog_instr){.op = CS_OP_INC, .base = cell,
                                            .b_imm = 1 + (int64_t)rnd(2)});
                add_ops++;
            } else if (barriers && rnd(5) == 0) {
                uint8_t op = rnd(3) == 0 ? CS_OP_BARRIER_READ : CS_OP_BARRIER;
                emit(g, t, (cs_cprog_instr){.op = op, .dst = reg, .b_imm = (int64_t)rnd(3)});
                barrier_ops++;
            } else switch (rnd(6)) {
            case 0:
            case 1:
                emit(g, t, (cs_cprog_instr){.op = CS_OP_LOAD, .dst = reg, .base = cell});
                if (rnd(3) == 0 && k + 1 < ops && k + 1 != lock_from && k != lock_to) {
                    /* skip the next operation when the value read is 0 */
                    emit(g, t, (cs_cprog_instr){.op = CS_OP_JEQ, .a = reg, .b_imm = 0,
                                                .target = (int32_t)g->th[t].len + 2});
                }
                break;
            case 2:
                emit(g, t, (cs_cprog_instr){.op = CS_OP_STORE, .base = cell,
                                            .b_imm = 1 + (int64_t)rnd(3)});
                break;
            case 3:
                emit(g, t, (cs_cprog_instr){.op = CS_OP_STORE, .base = cell, .b_reg = reg});
                break;
            case 4:
                emit(g, t, (cs_cprog_instr){.op = CS_OP_FADD, .dst = reg, .base = cell,
                                            .b_imm = 1});
                break;
            default:
                emit(g, t, (cs_cprog_instr){.op = CS_OP_CAS, .dst = reg, .base = cell,
                                            .b_imm = (int64_t)rnd(2), .c_imm = t + 1});
                break;
            }
            budget--;
            if (k == lock_to) {
                emit(g, t, (cs_cprog_instr){.op = CS_OP_UNLOCK, .base = lock_id});
                budget--;
            }
        }
        g->steps += 0;
    }
    /* fix up skip targets that point past a jump's successor: a JEQ emitted
     * with target len + 2 means "skip one instruction"; clamp to len */
    for (int t = 0; t < nt; t++)
        for (size_t i = 0; i < g->th[t].len; i++)
            if (g->code[t][i].op == CS_OP_JEQ && (size_t)g->code[t][i].target > g->th[t].len)
                g->code[t][i].target = (int32_t)g->th[t].len;
    g->p.n_cells = (size_t)cells;
    g->p.n_locks = 2;
    g->p.n_threads = (size_t)nt;
    g->p.threads = g->th;
    g->steps = max_steps - budget;
}

static int run(const cs_cprog *p, cs_strategy_kind kind, cs_cprog_result *r) {
    cs_config cfg;
    cs_config_init(&cfg, kind);
    cfg.count_traces = 1;
    return cs_cprog_explore(p, &cfg, r);
}

static bool same_finals(const cs_cprog_result *a, const cs_cprog_result *b) {
    return a->n_finals == b->n_finals &&
           memcmp(a->finals, b->finals, a->n_finals * sizeof *a->finals) == 0;
}

static long programs_per_family(long dflt) {
    const char *s = getenv("CS_DPOR_PROGRAMS");
    if (s && *s) {
        long n = strtol(s, NULL, 10);
        if (n > 0) return n;
    }
    return dflt;
}


static uint64_t env_u64(const char *name, uint64_t dflt) {
    const char *s = getenv(name);
    return s && *s ? strtoull(s, NULL, 0) : dflt;
}

/* addresses: object ids change every execution (cs_cprog.address_ids), so
 * DPOR must rely on the engine's names; only soundness is checked then (the
 * names of objects first touched after a shared prefix are compared
 * conservatively, which may cost executions). */
static void differential(bool locks, long count, uint64_t seed, int max_steps, bool addresses,
                         bool barriers) {
    seed ^= env_u64("CS_DPOR_SEED", 0);
    max_steps = (int)env_u64("CS_DPOR_STEPS", (uint64_t)max_steps);
    if (max_steps > 14) max_steps = 14;
    rs = seed ? seed : 1;
    long mismatched = 0, nonoptimal = 0, blocked = 0, total_dpor = 0, total_exh = 0;
    long total_blocked = 0;
    static gprog g;
    for (long i = 0; i < count; i++) {
        gen_program(&g, locks, max_steps, barriers);
        g.p.address_ids = addresses;
        cs_cprog_result rd, re;
        int rc1 = run(&g.p, CS_STRATEGY_DPOR, &rd);
        int rc2 = run(&g.p, CS_STRATEGY_EXHAUSTIVE, &re);
        CHECK_EQ(rc1, CS_OK);
        CHECK_EQ(rc2, CS_OK);
        if (rc1 || rc2) return;
        CHECK_EQ(rd.stats.complete, 1);
        CHECK_EQ(rd.diverged, 0);
        total_dpor += (long)rd.stats.executions;
        total_blocked += (long)rd.stats.sleep_blocked;
        total_exh += (long)re.stats.executions;
        if (!same_finals(&rd, &re)) {
            if (mismatched < 3)
                fprintf(stderr, "program %ld (seed %llu): dpor finals %zu, exhaustive %zu\n", i,
                        (unsigned long long)seed, rd.n_finals, re.n_finals);
            mismatched++;
        }
        if (!locks && !addresses) {
            if (rd.stats.executions != re.stats.distinct_traces ||
                rd.stats.distinct_traces != rd.stats.executions) {
                if (nonoptimal < 3)
                    fprintf(stderr,
                            "program %ld: dpor executions %llu, distinct %llu, traces %llu\n", i,
                            (unsigned long long)rd.stats.executions,
                            (unsigned long long)rd.stats.distinct_traces,
                            (unsigned long long)re.stats.distinct_traces);
                nonoptimal++;
            }
            if (rd.stats.sleep_blocked) blocked++;
        }
        cs_cprog_result_free(&rd);
        cs_cprog_result_free(&re);
    }
    CHECK_EQ(mismatched, 0);
    CHECK_EQ(nonoptimal, 0);
    CHECK_EQ(blocked, 0);
    CHECK(total_dpor <= total_exh);
    printf("  %s%s%s: %ld programs, dpor %ld executions (%ld sleep-blocked) vs exhaustive %ld\n",
           locks ? "with locks" : "reads/writes", addresses ? ", per-execution ids" : "",
           barriers ? ", barriers" : "", count,
           total_dpor, total_blocked, total_exh);
}

static void test_soundness_and_optimality_rw(void) {
    differential(false, programs_per_family(2500), 0x9e3779b97f4a7c15ULL, 8, false, false);
}

static void test_soundness_with_per_execution_ids(void) {
    differential(false, programs_per_family(1500), 0x452821e638d01377ULL, 8, true, false);
    differential(true, programs_per_family(1000), 0xbe5466cf34e90c6cULL, 9, true, false);
}

/* Commutative increments (CS_ADD) among reads, writes, fetch-and-adds, CAS, locks, barriers
 * and per-execution ids: dpor reaches the final states exhaustive reaches; on programs without
 * locks or per-execution ids it runs one execution per Mazurkiewicz trace (increments of a
 * cell do not order each other), never a sleep-blocked one. */
static void test_adds_soundness_and_optimality(void) {
    gen_adds = true;
    add_ops = 0;
    long n = programs_per_family(1500);
    differential(false, n, 0x2b7e151628aed2a6ULL, 8, false, false);
    differential(false, n, 0x6a09e667bb67ae85ULL, 8, false, true);
    differential(true, programs_per_family(800), 0x3c6ef372a54ff53aULL, 9, false, true);
    differential(false, programs_per_family(800), 0x510e527f9b05688cULL, 8, true, false);
    gen_adds = false;
    CHECK(add_ops > n / 2);
}

static void test_soundness_with_locks(void) {
    differential(true, programs_per_family(1500), 0x243f6a8885a308d3ULL, 9, false, false);
}

/* Global barriers (CS_OBJECT_ALL) in generated programs: dpor reaches the
 * final states exhaustive reaches, and on read/write programs still runs
 * one execution per Mazurkiewicz trace, never a sleep-blocked one. */
static void test_barriers_soundness_and_optimality_rw(void) {
    barrier_ops = 0;
    long n = programs_per_family(2000);
    differential(false, n, 0x13198a2e03707344ULL, 8, false, true);
    CHECK(barrier_ops > n / 4);
}

static void test_barriers_with_locks_and_per_execution_ids(void) {
    barrier_ops = 0;
    long n1 = programs_per_family(1000), n2 = programs_per_family(800),
         n3 = programs_per_family(600);
    differential(true, n1, 0xa4093822299f31d0ULL, 9, false, true);
    differential(false, n2, 0x082efa98ec4e6c89ULL, 8, true, true);
    differential(true, n3, 0x3f84d5b5b5470917ULL, 9, true, true);
    CHECK(barrier_ops > (n1 + n2 + n3) / 4);
}

/* By hand: T0 stores x, T1 loads y, T2 is a barrier write.  The barrier
 * conflicts with both (T0 and T1 are independent of each other), so a trace
 * is fixed by which of T0, T1 run before the barrier: 4 traces.  A barrier
 * read instead conflicts with the store only: 2. */
static void test_barrier_by_hand(void) {
    for (int read = 0; read < 2; read++) {
        static cs_cprog_instr code[3][1];
        cs_cprog_thread th[3];
        code[0][0] = (cs_cprog_instr){.op = CS_OP_STORE, .base = 0, .b_imm = 1};
        code[1][0] = (cs_cprog_instr){.op = CS_OP_LOAD, .dst = 1, .base = 1};
        code[2][0] = (cs_cprog_instr){.op = read ? CS_OP_BARRIER_READ : CS_OP_BARRIER, .dst = 1,
                                      .b_imm = 5};
        for (int i = 0; i < 3; i++) th[i] = (cs_cprog_thread){code[i], 1};
        cs_cprog p = {.n_cells = 2, .n_threads = 3, .threads = th};
        cs_cprog_result rd, re;
        CHECK_EQ(run(&p, CS_STRATEGY_DPOR, &rd), CS_OK);
        CHECK_EQ(run(&p, CS_STRATEGY_EXHAUSTIVE, &re), CS_OK);
        CHECK_EQ(rd.stats.executions, read ? 2 : 4);
        CHECK_EQ(rd.stats.distinct_traces, read ? 2 : 4);
        CHECK_EQ(re.stats.distinct_traces, read ? 2 : 4);
        CHECK_EQ(rd.stats.complete, 1);
        CHECK(same_finals(&rd, &re));
        cs_cprog_result_free(&rd);
        cs_cprog_result_free(&re);
    }
}

/* readers(N): one writer x := 42, N readers each read y[i] then x. */
static void test_readers_count(void) {
    static cs_cprog_instr code[6][2];
    cs_cprog_thread th[6];
    int n = 5;
    code[0][0] = (cs_cprog_instr){.op = CS_OP_STORE, .base = 0, .b_imm = 42};
    th[0] = (cs_cprog_thread){code[0], 1};
    for (int i = 1; i <= n; i++) {
        code[i][0] = (cs_cprog_instr){.op = CS_OP_LOAD, .dst = 1, .base = i};
        code[i][1] = (cs_cprog_instr){.op = CS_OP_LOAD, .dst = 2, .base = 0};
        th[i] = (cs_cprog_thread){code[i], 2};
    }
    cs_cprog p = {.n_cells = (size_t)n + 1, .n_threads = (size_t)n + 1, .threads = th};
    cs_cprog_result r;
    CHECK_EQ(run(&p, CS_STRATEGY_DPOR, &r), CS_OK);
    CHECK_EQ(r.stats.executions, 1u << n);
    CHECK_EQ(r.stats.distinct_traces, 1u << n);
    CHECK_EQ(r.stats.sleep_blocked, 0);
    CHECK_EQ(r.stats.complete, 1);
    cs_cprog_result_free(&r);
}

/* An asyncio-shaped front end: the root writes x and creates a task whose
 * step (scheduled by that write's event) reads x.  The race is infeasible to
 * reverse, so there is one execution. */
static void test_scheduled_by_not_reversed(void) {
    cs_config cfg;
    cs_config_init(&cfg, CS_STRATEGY_DPOR);
    cs_explorer *ex = NULL;
    CHECK_EQ(cs_explorer_new(&cfg, &ex), CS_OK);
    cs_actor root, task, other;
    cs_actor_intern(ex, CS_NO_ACTOR, 0, &root);
    cs_actor_intern(ex, root, 0, &task);
    cs_actor_intern(ex, root, 1, &other);
    int more = 0, executions = 0;
    while (cs_execution_begin(ex, &more) == CS_OK && more) {
        executions++;
        size_t pick;
        cs_actor en0[1] = {root};
        CHECK_EQ(cs_choose(ex, en0, 1, &pick), CS_OK);
        cs_step_begin(ex, root, -1);
        cs_access_record(ex, 7, 1, CS_WRITE, 0);
        cs_step_end(ex);
        /* task (scheduled by event 0) reads x; other writes y */
        bool task_done = false, other_done = false;
        while (!task_done || !other_done) {
            cs_actor en[2];
            size_t n = 0;
            if (!task_done) en[n++] = task;
            if (!other_done) en[n++] = other;
            CHECK_EQ(cs_choose(ex, en, n, &pick), CS_OK);
            if (en[pick] == task) {
                cs_step_begin(ex, task, 0);
                cs_access_record(ex, 7, 1, CS_READ, 0);
                task_done = true;
            } else {
                cs_step_begin(ex, other, 0);
                cs_access_record(ex, 7, 1, CS_WRITE, 0);
                other_done = true;
            }
            cs_step_end(ex);
        }
        CHECK_EQ(cs_execution_end(ex, CS_OUTCOME_OK), CS_OK);
        if (executions > 10) break;
    }
    /* task-read vs other-write race is real: 2 executions; root's write is
     * never reordered after its own creations */
    CHECK_EQ(executions, 2);
    cs_stats st;
    cs_explorer_stats(ex, &st);
    CHECK_EQ(st.complete, 1);
    cs_explorer_free(ex);
}

/* A front end whose second execution does not offer the actor that DPOR
 * prescribes: choose reports CS_EDIVERGED and cs_divergence names it. */
static void test_divergence_reported(void) {
    cs_config cfg;
    cs_config_init(&cfg, CS_STRATEGY_DPOR);
    cs_explorer *ex = NULL;
    CHECK_EQ(cs_explorer_new(&cfg, &ex), CS_OK);
    cs_actor a, b;
    cs_actor_intern(ex, CS_NO_ACTOR, 0, &a);
    cs_actor_intern(ex, CS_NO_ACTOR, 1, &b);
    int more = 0;
    CHECK_EQ(cs_execution_begin(ex, &more), CS_OK);
    size_t pick;
    cs_actor en[2] = {a, b};
    for (int k = 0; k < 2; k++) {
        CHECK_EQ(cs_choose(ex, en, (size_t)(2 - k), &pick), CS_OK);
        cs_actor who = en[pick];
        cs_step_begin(ex, who, -1);
        cs_access_record(ex, 1, 1, CS_WRITE, 0);
        cs_step_end(ex);
        if (who == a) en[0] = b;
    }
    CHECK_EQ(cs_execution_end(ex, CS_OUTCOME_OK), CS_OK);
    CHECK_EQ(cs_execution_begin(ex, &more), CS_OK);
    CHECK_EQ(more, 1);
    cs_actor only_a[1] = {a};
    CHECK_EQ(cs_choose(ex, only_a, 1, &pick), CS_EDIVERGED);
    size_t step, n_en;
    cs_actor expected;
    CHECK_EQ(cs_divergence(ex, &step, &expected, &n_en), CS_OK);
    CHECK_EQ(step, 0);
    CHECK_EQ(expected, b);
    CHECK_EQ(n_en, 1);
    CHECK_EQ(cs_execution_end(ex, CS_OUTCOME_ABORTED), CS_OK);
    CHECK_EQ(cs_execution_begin(ex, &more), CS_OK);
    CHECK_EQ(more, 0);
    cs_stats st;
    cs_explorer_stats(ex, &st);
    CHECK_EQ(st.complete, 0);
    cs_explorer_free(ex);
}

/* Replayed steps must do what they did: c runs first (it conflicts with
 * nothing), then a and b race on x, so the second execution replays c
 * before reversing them.  `mode` changes what c does in that replay:
 * 0 the same, 1 the same accesses in another order (not a change: an order
 * may follow addresses), 2 one more access, 3 another note, 4 one access
 * fewer, 5 another scheduling step. */
static void replay_with(int mode) {
    cs_config cfg;
    cs_config_init(&cfg, CS_STRATEGY_DPOR);
    cs_explorer *ex = NULL;
    CHECK_EQ(cs_explorer_new(&cfg, &ex), CS_OK);
    cs_actor a, b, c;
    cs_actor_intern(ex, CS_NO_ACTOR, 0, &c);
    cs_actor_intern(ex, CS_NO_ACTOR, 1, &a);
    cs_actor_intern(ex, CS_NO_ACTOR, 2, &b);
    const cs_access_kind w = (cs_access_kind)(CS_WRITE | CS_ID_STABLE);
    int more = 0, st = CS_OK, first_st = CS_OK;
    for (int run = 0;; run++) {
        CHECK_EQ(cs_execution_begin(ex, &more), CS_OK);
        if (run < 2) CHECK_EQ(more, 1);
        if (!more) break;
        st = CS_OK;
        cs_actor en[3] = {c, a, b};
        size_t n = 3;
        for (int k = 0; k < 3 && st == CS_OK; k++) {
            size_t pick;
            CHECK_EQ(cs_choose(ex, en, n, &pick), CS_OK);
            cs_actor who = en[pick];
            int m = run == 1 && who == c ? mode : 0;
            CHECK_EQ(cs_step_begin(ex, who, m == 5 ? CS_AFTER_ALL : CS_SCHEDULED_BY_NONE), CS_OK);
            if (who == c) {
                cs_access_record(ex, m == 1 ? 11 : 10, 1, w, 0);
                if (m != 4) cs_access_record(ex, m == 1 ? 10 : 11, 1, w, 0);
                if (m == 2) cs_access_record(ex, 12, 1, w, 3);
                cs_step_note(ex, m == 3 ? 8 : 7);
            } else {
                cs_access_record(ex, 20, 1, w, 0);
            }
            st = cs_step_end(ex);
            for (size_t i = pick; i + 1 < n; i++) en[i] = en[i + 1];
            n--;
        }
        if (run == 0) CHECK_EQ(st, CS_OK);
        if (run == 1) first_st = st;
        CHECK_EQ(cs_execution_end(ex, st == CS_OK ? CS_OUTCOME_OK : CS_OUTCOME_ABORTED),
                 CS_OK);
        if (run == 1 && st != CS_OK) {
            /* the divergence stands until the next execution begins */
            break;
        }
    }
    st = first_st;
    cs_divergence_kind kind = CS_DIVERGED_NOT_ENABLED;
    int has_access = -1, missing = -1;
    cs_access acc = {0};
    size_t step = 99, n_en = 99;
    cs_actor actor = CS_NO_ACTOR;
    if (mode == 0 || mode == 1) {
        CHECK_EQ(st, CS_OK);
        CHECK_EQ(cs_divergence_detail(ex, &kind, &has_access, &acc, &missing), CS_ESTATE);
        cs_stats stats;
        cs_explorer_stats(ex, &stats);
        CHECK_EQ(stats.complete, 1);
        CHECK_EQ(stats.executions, 2);
    } else {
        CHECK_EQ(st, CS_EDIVERGED);
        CHECK_EQ(cs_divergence(ex, &step, &actor, &n_en), CS_OK);
        CHECK_EQ(step, 0);
        CHECK_EQ(actor, c);
        CHECK_EQ(n_en, 0);
        CHECK_EQ(cs_divergence_detail(ex, &kind, &has_access, &acc, &missing), CS_OK);
        CHECK_EQ(kind, CS_DIVERGED_CHANGED);
        CHECK_EQ(has_access, mode == 2 || mode == 4);
        if (mode == 2) {
            CHECK_EQ(missing, 0);
            CHECK_EQ(acc.object, 12);
            CHECK_EQ(acc.site, 3);
        }
        if (mode == 4) {
            CHECK_EQ(missing, 1);
            CHECK_EQ(acc.object, 11);
        }
        /* the rest of the exploration runs, and is not complete */
        while (cs_execution_begin(ex, &more) == CS_OK && more) {
            cs_actor en[3] = {c, a, b};
            size_t n = 3;
            while (n) {
                size_t pick;
                if (cs_choose(ex, en, n, &pick) != CS_OK) break;
                cs_step_begin(ex, en[pick], CS_SCHEDULED_BY_NONE);
                cs_access_record(ex, en[pick] == c ? 10 : 20, 1, w, 0);
                if (cs_step_end(ex) != CS_OK) break;
                for (size_t i = pick; i + 1 < n; i++) en[i] = en[i + 1];
                n--;
            }
            cs_execution_end(ex, n ? CS_OUTCOME_ABORTED : CS_OUTCOME_OK);
        }
        cs_stats stats;
        cs_explorer_stats(ex, &stats);
        CHECK_EQ(stats.complete, 0);
    }
    cs_explorer_free(ex);
}

static void test_replayed_step_changed(void) {
    for (int mode = 0; mode <= 5; mode++) replay_with(mode);
}

/* Timers in strict mode (CS_AFTER_ALL) are never reordered. */
static void test_after_all(void) {
    cs_config cfg;
    cs_config_init(&cfg, CS_STRATEGY_DPOR);
    cs_explorer *ex = NULL;
    CHECK_EQ(cs_explorer_new(&cfg, &ex), CS_OK);
    cs_actor a, b, timer;
    cs_actor_intern(ex, CS_NO_ACTOR, 0, &a);
    cs_actor_intern(ex, CS_NO_ACTOR, 1, &b);
    cs_actor_intern(ex, CS_NO_ACTOR, 2, &timer);
    int more = 0, executions = 0;
    while (cs_execution_begin(ex, &more) == CS_OK && more && executions < 10) {
        executions++;
        bool done[2] = {false, false};
        for (int k = 0; k < 2; k++) {
            cs_actor en[2];
            size_t n = 0, pick;
            if (!done[0]) en[n++] = a;
            if (!done[1]) en[n++] = b;
            CHECK_EQ(cs_choose(ex, en, n, &pick), CS_OK);
            cs_step_begin(ex, en[pick], -1);
            cs_access_record(ex, 1, 1, CS_READ, 0);
            cs_step_end(ex);
            done[en[pick] == b] = true;
        }
        cs_actor en[1] = {timer};
        size_t pick;
        CHECK_EQ(cs_choose(ex, en, 1, &pick), CS_OK);
        cs_step_begin(ex, timer, CS_AFTER_ALL);
        cs_access_record(ex, 1, 1, CS_WRITE, 0);
        cs_step_end(ex);
        CHECK_EQ(cs_execution_end(ex, CS_OUTCOME_OK), CS_OK);
    }
    CHECK_EQ(executions, 1); /* two reads commute; the timer follows both */
    cs_explorer_free(ex);
}

/* An asyncio-shaped program whose steps branch on what they read, the shape
 * of tests/asyncgen_programs.py's
 *   main: t = [create_task(w) for w in (w0, w1, w2)]; for x in t: await x
 *   w0, w1: read s.x          w2: await asyncio.sleep(0)
 * A step of main reads the future of the task it awaits; if that task is done
 * it goes on to the next one in the same step, else it registers a wakeup
 * (writes the future) and suspends; the completing step schedules main's
 * next step (scheduled_by).  So which futures a step of main touches depends
 * on the schedule: DPOR's guess of a reversed step must not make it explore
 * one trace twice.  Objects: 1 + t the future of task t, 10 s.x, 11 w2's
 * frame, 12 main's result. */
enum { AW_MAIN, AW_T0, AW_T1, AW_T2, AW_N };

typedef struct {
    cs_actor id[AW_N];
    bool ready[AW_N];
    int64_t sb[AW_N];     /* event that made the actor ready */
    uint64_t order[AW_N]; /* readiness order: the loop's FIFO */
    uint64_t tick;
    int steps[AW_N];
    bool done[AW_N];
    int awaiting; /* task main awaits, 3 = finished */
    uint64_t seen; /* main's observations: the outcome */
} aw_state;

static void aw_ready(aw_state *w, int a, int64_t by) {
    w->ready[a] = true;
    w->sb[a] = by;
    w->order[a] = w->tick++;
}

/* Runs one execution; returns the outcome, or UINT64_MAX if it ended early. */
static uint64_t aw_execution(cs_explorer *ex, aw_state *w) {
    memset(w->ready, 0, sizeof w->ready);
    memset(w->steps, 0, sizeof w->steps);
    memset(w->done, 0, sizeof w->done);
    w->tick = 0;
    w->awaiting = 0;
    w->seen = 0;
    aw_ready(w, AW_MAIN, CS_SCHEDULED_BY_NONE);
    for (int64_t ev = 0;; ev++) {
        cs_actor en[AW_N];
        int who[AW_N];
        size_t n = 0;
        for (uint64_t t = 0; t < w->tick; t++)
            for (int a = 0; a < AW_N; a++)
                if (w->ready[a] && w->order[a] == t) {
                    who[n] = a;
                    en[n++] = w->id[a];
                }
        if (n == 0) return w->seen;
        size_t pick;
        int rc = cs_choose(ex, en, n, &pick);
        if (rc == CS_EBLOCKED) return UINT64_MAX;
        CHECK_EQ(rc, CS_OK);
        if (rc) return UINT64_MAX;
        int a = who[pick];
        w->ready[a] = false;
        CHECK_EQ(cs_step_begin(ex, w->id[a], w->sb[a]), CS_OK);
        int k = w->steps[a]++;
        if (a == AW_MAIN) {
            if (k == 0)
                for (int t = 0; t < 3; t++) {
                    cs_access_record(ex, 1 + (uint64_t)t, CS_KEY_WHOLE, CS_WRITE, 0);
                    aw_ready(w, AW_T0 + t, ev);
                }
            for (; w->awaiting < 3; w->awaiting++) {
                uint64_t fut = 1 + (uint64_t)w->awaiting;
                cs_access_record(ex, fut, CS_KEY_WHOLE, CS_READ, 0);
                w->seen = w->seen * 4 + (uint64_t)w->done[AW_T0 + w->awaiting];
                if (!w->done[AW_T0 + w->awaiting]) {
                    cs_access_record(ex, fut, CS_KEY_WHOLE, CS_WRITE, 0); /* wakeup */
                    break;
                }
            }
            if (w->awaiting == 3) cs_access_record(ex, 12, CS_KEY_WHOLE, CS_WRITE, 0);
        } else {
            int t = a - AW_T0;
            bool finishes = t < 2 || k == 1;
            if (t < 2) cs_access_record(ex, 10, 0, CS_READ, 0);
            else cs_access_record(ex, 11, CS_KEY_WHOLE, CS_WRITE, 0);
            if (finishes) {
                cs_access_record(ex, 1 + (uint64_t)t, CS_KEY_WHOLE, CS_WRITE, 0);
                w->done[a] = true;
                if (w->awaiting == t) aw_ready(w, AW_MAIN, ev);
            } else {
                aw_ready(w, a, ev); /* sleep(0): the task reschedules itself */
            }
        }
        CHECK_EQ(cs_step_end(ex), CS_OK);
    }
}

typedef struct {
    uint64_t v[64];
    size_t n;
} aw_outcomes; /* distinct observations of main, sorted */

static void aw_add(aw_outcomes *o, uint64_t x) {
    size_t i = 0;
    while (i < o->n && o->v[i] < x) i++;
    if (i < o->n && o->v[i] == x) return;
    CHECK(o->n < 64);
    if (o->n == 64) return;
    memmove(&o->v[i + 1], &o->v[i], (o->n - i) * sizeof *o->v);
    o->v[i] = x;
    o->n++;
}

/* The shared-tree tests' side (below): with a share_ctx, every execution
 * begins after share_between and the exploration ends with share_end and
 * share_send (a fork exits there). */
typedef struct share_ctx share_ctx;
static int share_between(void *arg, cs_explorer *ex);
static void share_end(void *arg, cs_explorer *ex);
static void share_send(share_ctx *c);
static void seen_add(share_ctx *c, uint64_t x);

static void aw_explore_shared(cs_strategy_kind kind, cs_stats *st, aw_outcomes *outcomes,
                              share_ctx *share) {
    cs_config cfg;
    cs_config_init(&cfg, kind);
    cfg.count_traces = 1;
    cfg.stable_objects = 1;
    cfg.max_executions = 200;
    cs_explorer *ex = NULL;
    CHECK_EQ(cs_explorer_new(&cfg, &ex), CS_OK);
    if (!ex) return;
    aw_state w;
    memset(&w, 0, sizeof w);
    cs_actor_intern(ex, CS_NO_ACTOR, 0, &w.id[AW_MAIN]);
    for (int t = 0; t < 3; t++) cs_actor_intern(ex, w.id[AW_MAIN], (uint32_t)t, &w.id[AW_T0 + t]);
    int more = 0;
    for (;;) {
        if (share) share_between(share, ex);
        if (cs_execution_begin(ex, &more) != CS_OK || !more) break;
        uint64_t seen = aw_execution(ex, &w);
        int outcome = seen == UINT64_MAX ? CS_OUTCOME_ABORTED : CS_OUTCOME_OK;
        CHECK_EQ(cs_execution_end(ex, outcome), CS_OK);
        if (seen != UINT64_MAX) {
            aw_add(outcomes, seen);
            if (share) seen_add(share, seen);
        }
    }
    cs_explorer_stats(ex, st);
    if (share) share_end(share, ex);
    cs_explorer_free(ex);
    if (share) share_send(share);
}

static void aw_explore(cs_strategy_kind kind, cs_stats *st, aw_outcomes *outcomes) {
    aw_explore_shared(kind, st, outcomes, NULL);
}

static void test_data_dependent_steps_one_execution_per_trace(void) {
    cs_stats sd, se;
    aw_outcomes od = {{0}, 0}, oe = {{0}, 0};
    aw_explore(CS_STRATEGY_DPOR, &sd, &od);
    aw_explore(CS_STRATEGY_EXHAUSTIVE, &se, &oe);
    CHECK_EQ(se.complete, 1);
    CHECK_EQ(sd.complete, 1);
    /* the same observations of main */
    CHECK_EQ(od.n, oe.n);
    CHECK(od.n == oe.n && memcmp(od.v, oe.v, od.n * sizeof *od.v) == 0);
    CHECK_EQ(sd.sleep_blocked, 0);
    /* A reversed step of main is inserted predicted from its run in another
     * context (after w1 it read w2's future; moved before w1 it stops at
     * w1's), so a wakeup sequence is inserted that a branch explored later
     * covers: that branch sleeps with the accesses it really made, and the
     * sequence is dropped before it runs (redundant() in strategy_dpor.c).
     * Without that: 5 executions for these 4 traces. */
    CHECK_EQ(sd.executions, se.distinct_traces);
    CHECK_EQ(sd.distinct_traces, sd.executions);
    printf("  await chain: dpor %llu executions, %llu traces (exhaustive %llu executions)\n",
           (unsigned long long)sd.executions, (unsigned long long)se.distinct_traces,
           (unsigned long long)se.executions);
}

/* Sharing the tree (cs_share_*, strategy_dpor.c "sharing the tree"): an
 * exploration with every branch offered given to a fork (up to a number of
 * forks), forks giving in turn; each fork sends what it reached (a set of
 * 64-bit outcomes), whether its part is complete and its reports back
 * through a pipe when it ends.  share_between runs before each execution,
 * share_end when the exploration is over; a fork then sends and exits. */
typedef struct {
    int fd;
    pid_t pid;
    size_t position, token;
} share_taker;

struct share_ctx {
    share_taker takers[16];
    size_t nt, forks, max_forks;
    int up;          /* a fork's pipe to its giver, -1 in the first process */
    int complete;    /* every part ended complete so far */
    uint64_t *seen;  /* outcomes reached here and reported by this one's forks */
    size_t n_seen, cap_seen;
    uint8_t *reports; /* share_end: this fork's reports, for share_send */
    size_t n_reports;
    cs_actor map[64]; /* actor ids: the same in every fork (interned up front) */
};

static void seen_add(share_ctx *c, uint64_t x) {
    for (size_t i = 0; i < c->n_seen; i++)
        if (c->seen[i] == x) return;
    if (c->n_seen == c->cap_seen) {
        size_t ncap = c->cap_seen ? 2 * c->cap_seen : 64;
        uint64_t *ns = realloc(c->seen, ncap * sizeof *ns);
        CHECK(ns != NULL);
        if (!ns) return;
        c->seen = ns;
        c->cap_seen = ncap;
    }
    c->seen[c->n_seen++] = x;
}

static int cmp_seen(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static bool write_all(int fd, const void *data, size_t n) {
    const uint8_t *p = data;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w <= 0) return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

static bool read_all(int fd, void *data, size_t n) {
    uint8_t *p = data;
    while (n) {
        ssize_t r = read(fd, p, n);
        if (r <= 0) return false;
        p += r;
        n -= (size_t)r;
    }
    return true;
}

/* A fork's end, read: complete, its outcomes, its reports (imported). */
static void share_collect(share_ctx *c, cs_explorer *ex, const share_taker *t) {
    int complete = 0;
    size_t n = 0, len = 0;
    bool ok = read_all(t->fd, &complete, sizeof complete) && read_all(t->fd, &n, sizeof n);
    for (size_t i = 0; ok && i < n; i++) {
        uint64_t x;
        ok = read_all(t->fd, &x, sizeof x);
        if (ok) seen_add(c, x);
    }
    ok = ok && read_all(t->fd, &len, sizeof len);
    uint8_t *reports = ok ? malloc(len ? len : 1) : NULL;
    ok = reports && read_all(t->fd, reports, len);
    CHECK(ok);
    size_t n_actors = 0; /* every fork has the same table: interned before any fork */
    while (n_actors < 64 && cs_actor_path(ex, (cs_actor)n_actors, NULL, NULL) == CS_OK) n_actors++;
    if (ok) CHECK_EQ(cs_share_import(ex, reports, len, c->map, n_actors), CS_OK);
    CHECK_EQ(cs_share_done(ex, t->position, t->token), CS_OK);
    free(reports);
    close(t->fd);
    int status = 0;
    CHECK_EQ(waitpid(t->pid, &status, 0), t->pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (!complete) c->complete = 0;
}

static int share_between(void *arg, cs_explorer *ex) {
    share_ctx *c = arg;
    size_t at;
    int waiting = 0, found = 0;
    CHECK_EQ(cs_share_waiting(ex, &at, &waiting), CS_OK);
    while (waiting) {
        for (size_t i = 0; i < c->nt;)
            if (c->takers[i].position == at) {
                share_collect(c, ex, &c->takers[i]);
                c->takers[i] = c->takers[--c->nt];
            } else {
                i++;
            }
        CHECK_EQ(cs_share_resume(ex), CS_OK);
        CHECK_EQ(cs_share_waiting(ex, &at, &waiting), CS_OK);
    }
    while (c->nt < 16 && c->forks < c->max_forks &&
           cs_share_offer(ex, &at, &found) == CS_OK && found) {
        int fds[2];
        CHECK_EQ(pipe(fds), 0);
        fflush(NULL);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            close(fds[0]);
            for (size_t i = 0; i < c->nt; i++) close(c->takers[i].fd);
            c->nt = 0;
            c->n_seen = 0;
            c->up = fds[1];
            CHECK_EQ(cs_share_take(ex, at), CS_OK);
            return CS_OK;
        }
        close(fds[1]);
        c->takers[c->nt] = (share_taker){fds[0], pid, at, 0};
        CHECK_EQ(cs_share_give(ex, at, &c->takers[c->nt].token), CS_OK);
        c->nt++;
        c->forks++;
    }
    return CS_OK;
}

/* The exploration is over here: its completeness and, in a fork, its
 * reports are kept for share_send (the explorer goes after this). */
static void share_end(void *arg, cs_explorer *ex) {
    share_ctx *c = arg;
    CHECK_EQ(c->nt, 0);
    cs_stats st;
    cs_explorer_stats(ex, &st);
    if (!st.complete) c->complete = 0;
    if (c->up < 0) return;
    const uint8_t *buf = NULL;
    size_t len = 0;
    CHECK_EQ(cs_share_reports(ex, &buf, &len), CS_OK);
    c->reports = malloc(len ? len : 1);
    CHECK(c->reports != NULL);
    if (c->reports && len) memcpy(c->reports, buf, len);
    c->n_reports = c->reports ? len : 0;
}

/* In a fork: sends its part to its giver and exits (returns in the first
 * process). */
static void share_send(share_ctx *c) {
    if (c->up < 0) return;
    bool sent = write_all(c->up, &c->complete, sizeof c->complete) &&
                write_all(c->up, &c->n_seen, sizeof c->n_seen) &&
                write_all(c->up, c->seen, c->n_seen * sizeof *c->seen) &&
                write_all(c->up, &c->n_reports, sizeof c->n_reports) &&
                (c->n_reports == 0 || write_all(c->up, c->reports, c->n_reports));
    _exit(sent && ctest_failed_checks == 0 ? 0 : 1);
}

static void share_init(share_ctx *c, size_t max_forks) {
    memset(c, 0, sizeof *c);
    c->up = -1;
    c->complete = 1;
    c->max_forks = max_forks;
    for (cs_actor a = 0; a < 64; a++) c->map[a] = a;
}

static void test_shared_tree_reaches_every_outcome(void) {
    aw_outcomes oe = {{0}, 0}, own = {{0}, 0};
    cs_stats se, sd;
    aw_explore(CS_STRATEGY_EXHAUSTIVE, &se, &oe);
    share_ctx c;
    share_init(&c, 16);
    aw_explore_shared(CS_STRATEGY_DPOR, &sd, &own, &c);
    qsort(c.seen, c.n_seen, sizeof *c.seen, cmp_seen);
    CHECK(c.forks > 0);
    CHECK_EQ(c.complete, 1);
    CHECK_EQ(c.n_seen, oe.n);
    CHECK(c.n_seen == oe.n && memcmp(c.seen, oe.v, oe.n * sizeof *oe.v) == 0);
    printf("  shared tree, await chain: %zu forks, %zu outcomes (exhaustive %zu)\n", c.forks,
           c.n_seen, oe.n);
    free(c.seen);
}

/* Generated C programs (reads, writes, locks, barriers), each explored by
 * DPOR with its tree shared by up to 6 forks: the final states are
 * exhaustive's, the exploration complete. */
static void test_shared_tree_on_generated_programs(void) {
    rs = 0x5eed ^ env_u64("CS_DPOR_SEED", 0);
    long count = programs_per_family(60), mismatched = 0;
    size_t forks = 0;
    static gprog g;
    for (long i = 0; i < count; i++) {
        gen_program(&g, i % 2 == 1, 8, i % 3 == 2);
        g.p.address_ids = i % 5 == 4;
        g.p.between = NULL;
        g.p.at_end = NULL;
        cs_cprog_result re, rd;
        CHECK_EQ(run(&g.p, CS_STRATEGY_EXHAUSTIVE, &re), CS_OK);
        share_ctx c;
        share_init(&c, 6);
        g.p.between = share_between;
        g.p.at_end = share_end;
        g.p.hook_arg = &c;
        CHECK_EQ(run(&g.p, CS_STRATEGY_DPOR, &rd), CS_OK);
        g.p.between = NULL;
        g.p.at_end = NULL;
        for (size_t k = 0; k < rd.n_finals; k++) seen_add(&c, rd.finals[k]);
        share_send(&c);
        qsort(c.seen, c.n_seen, sizeof *c.seen, cmp_seen);
        CHECK_EQ(c.complete, 1);
        if (c.n_seen != re.n_finals || memcmp(c.seen, re.finals, re.n_finals * sizeof *c.seen)) {
            if (mismatched < 3)
                fprintf(stderr, "program %ld: shared dpor finals %zu, exhaustive %zu\n", i,
                        c.n_seen, re.n_finals);
            mismatched++;
        }
        forks += c.forks;
        free(c.seen);
        cs_cprog_result_free(&re);
        cs_cprog_result_free(&rd);
    }
    CHECK_EQ(mismatched, 0);
    CHECK(forks > 0);
    printf("  shared tree, generated: %ld programs, %zu forks\n", count, forks);
}

/* Wakeup trees as deep as an execution is long are freed without recursion
 * (a recursive free overflowed the stack on a 300k-step execution). */
#define DEEP_STEPS 300000

/* A one-actor execution of DEEP_STEPS steps builds a chain of DEEP_STEPS
 * nodes; freeing the explorer mid-execution frees it. */
static void test_deep_tree_freed_mid_execution(void) {
    cs_config cfg;
    cs_config_init(&cfg, CS_STRATEGY_DPOR);
    cs_explorer *ex = NULL;
    CHECK_EQ(cs_explorer_new(&cfg, &ex), CS_OK);
    if (!ex) return;
    cs_actor a;
    CHECK_EQ(cs_actor_intern(ex, CS_NO_ACTOR, 0, &a), CS_OK);
    int more = 0;
    CHECK_EQ(cs_execution_begin(ex, &more), CS_OK);
    CHECK_EQ(more, 1);
    int rc = CS_OK;
    for (uint32_t i = 0; i < DEEP_STEPS && rc == CS_OK; i++) {
        size_t ch;
        rc = cs_choose(ex, &a, 1, &ch);
        if (!rc) rc = cs_step_begin(ex, a, CS_SCHEDULED_BY_NONE);
        if (!rc) rc = cs_access_record(ex, 1, i % 4, CS_WRITE, 0);
        if (!rc) rc = cs_step_end(ex);
    }
    CHECK_EQ(rc, CS_OK);
    CHECK_EQ(cs_trace_length(ex), DEEP_STEPS);
    cs_explorer_free(ex);
}

/* Actor A writes x once; actor B takes DEEP_STEPS steps, the last writing
 * x.  Run A first: the race A -> B's last step inserts B's whole run as one
 * wakeup sequence (DEEP_STEPS nodes deep).  The second execution follows it
 * for 10 steps and is aborted: the rest of the prescribed chain is dropped,
 * and the exploration is reported incomplete. */
static void test_deep_tree_dropped_when_cut_short(void) {
    cs_config cfg;
    cs_config_init(&cfg, CS_STRATEGY_DPOR);
    cs_explorer *ex = NULL;
    CHECK_EQ(cs_explorer_new(&cfg, &ex), CS_OK);
    if (!ex) return;
    cs_actor act[2];
    CHECK_EQ(cs_actor_intern(ex, CS_NO_ACTOR, 0, &act[0]), CS_OK);
    CHECK_EQ(cs_actor_intern(ex, CS_NO_ACTOR, 1, &act[1]), CS_OK);
    for (int exec = 0; exec < 2; exec++) {
        int more = 0;
        CHECK_EQ(cs_execution_begin(ex, &more), CS_OK);
        CHECK_EQ(more, 1);
        uint32_t left[2] = {1, DEEP_STEPS};
        int rc = CS_OK;
        size_t steps = 0;
        while (rc == CS_OK && (left[0] || left[1]) && (exec == 0 || steps < 10)) {
            cs_actor en[2];
            size_t n = 0;
            for (int k = 0; k < 2; k++)
                if (left[k]) en[n++] = act[k];
            size_t ch = 0;
            rc = cs_choose(ex, en, n, &ch);
            if (rc) break;
            int who = en[ch] == act[0] ? 0 : 1;
            rc = cs_step_begin(ex, en[ch], CS_SCHEDULED_BY_NONE);
            if (!rc && (who == 0 || left[1] == 1)) rc = cs_access_record(ex, 7, 0, CS_WRITE, 0);
            if (!rc) rc = cs_step_end(ex);
            left[who]--;
            steps++;
        }
        CHECK_EQ(rc, CS_OK);
        if (exec == 1) {
            /* the wakeup sequence starts with B */
            cs_event e0;
            CHECK_EQ(cs_trace_event(ex, 0, &e0), CS_OK);
            CHECK_EQ(e0.actor, act[1]);
        }
        CHECK_EQ(cs_execution_end(ex, exec == 0 ? CS_OUTCOME_OK : CS_OUTCOME_ABORTED), CS_OK);
    }
    int more = 1;
    CHECK_EQ(cs_execution_begin(ex, &more), CS_OK);
    CHECK_EQ(more, 0);
    cs_stats st;
    cs_explorer_stats(ex, &st);
    CHECK_EQ(st.complete, 0);
    cs_explorer_free(ex);
}

#define TESTS(X)                                                               \
    X(test_readers_count) X(test_scheduled_by_not_reversed)                    \
    X(test_divergence_reported) X(test_replayed_step_changed) X(test_after_all)                              \
    X(test_data_dependent_steps_one_execution_per_trace)                       \
    X(test_soundness_and_optimality_rw) X(test_soundness_with_locks)           \
    X(test_soundness_with_per_execution_ids)                                   \
    X(test_deep_tree_freed_mid_execution)                                      \
    X(test_deep_tree_dropped_when_cut_short)                                   \
    X(test_barrier_by_hand) X(test_barriers_soundness_and_optimality_rw)       \
    X(test_barriers_with_locks_and_per_execution_ids)                          \
    X(test_adds_soundness_and_optimality)                                      \
    X(test_shared_tree_reaches_every_outcome)                                  \
    X(test_shared_tree_on_generated_programs)
CTEST_MAIN()
