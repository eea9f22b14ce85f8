/* dpor_classic.c -- the classic DPOR benchmarks as C programs, explored by
 * optimal DPOR.  Each row: N, executions, distinct Mazurkiewicz traces
 * (fingerprints), the expected number of traces from the literature,
 * sleep-set-blocked executions, seconds, executions per second.
 *
 *   readers(N)    Abdulla et al. 2014: 2^N traces
 *   lastzero(N)   Abdulla et al. 2014: (N+3) * 2^(N-2)
 *   indexer(N)    Flanagan & Godefroid 2005: 1 for N <= 11, 8^(N-11) after
 *   filesystem(N) Flanagan & Godefroid 2005: 2^(N-13) for N >= 13
 *
 * CS_BENCH_ROW_SECONDS caps each row (default 20 s); a family stops at its
 * first row that hits the cap.  CS_BENCH_QUICK=1 runs small sizes only. */
#include "chaossloth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXT 40
#define MAXI 24

static cs_cprog_instr code[MAXT][MAXI];
static cs_cprog_thread threads[MAXT];

static void thread_set(int t, size_t len) {
    threads[t].code = code[t];
    threads[t].len = len;
}

static cs_cprog readers(int n) {
    code[0][0] = (cs_cprog_instr){.op = CS_OP_STORE, .base = 0, .b_imm = 42};
    thread_set(0, 1);
    for (int i = 1; i <= n; i++) {
        code[i][0] = (cs_cprog_instr){.op = CS_OP_LOAD, .dst = 1, .base = i};
        code[i][1] = (cs_cprog_instr){.op = CS_OP_LOAD, .dst = 2, .base = 0};
        thread_set(i, 2);
    }
    return (cs_cprog){.n_cells = (size_t)n + 1, .n_threads = (size_t)n + 1, .threads = threads};
}

static cs_cprog lastzero(int n) {
    /* reader: j = N; while (array[j] != 0) j--; */
    cs_cprog_instr *r = code[0];
    r[0] = (cs_cprog_instr){.op = CS_OP_SET, .dst = 2, .b_imm = n};
    r[1] = (cs_cprog_instr){.op = CS_OP_LOAD, .dst = 1, .a = 2, .base = 0};
    r[2] = (cs_cprog_instr){.op = CS_OP_JEQ, .a = 1, .b_imm = 0, .target = 5};
    r[3] = (cs_cprog_instr){.op = CS_OP_SUB, .dst = 2, .a = 2, .b_imm = 1};
    r[4] = (cs_cprog_instr){.op = CS_OP_JMP, .target = 1};
    thread_set(0, 5);
    for (int i = 1; i <= n; i++) {
        /* array[i] = array[i-1] + 1 */
        code[i][0] = (cs_cprog_instr){.op = CS_OP_LOAD, .dst = 1, .base = i - 1};
        code[i][1] = (cs_cprog_instr){.op = CS_OP_ADD, .dst = 1, .a = 1, .b_imm = 1};
        code[i][2] = (cs_cprog_instr){.op = CS_OP_STORE, .base = i, .b_reg = 1};
        thread_set(i, 3);
    }
    return (cs_cprog){.n_cells = (size_t)n + 1, .n_threads = (size_t)n + 1, .threads = threads};
}

static cs_cprog indexer(int n) {
    /* for m in 1..4: w = m*11 + tid; h = (w*7) % 128;
     *                while (!CAS(table[h], 0, w)) h = (h+1) % 128; */
    for (int t = 0; t < n; t++) {
        cs_cprog_instr *c = code[t];
        c[0] = (cs_cprog_instr){.op = CS_OP_SET, .dst = 1, .b_imm = 1};
        c[1] = (cs_cprog_instr){.op = CS_OP_MUL, .dst = 2, .a = 1, .b_imm = 11};
        c[2] = (cs_cprog_instr){.op = CS_OP_ADD, .dst = 2, .a = 2, .b_imm = t};
        c[3] = (cs_cprog_instr){.op = CS_OP_MUL, .dst = 3, .a = 2, .b_imm = 7};
        c[4] = (cs_cprog_instr){.op = CS_OP_MOD, .dst = 3, .a = 3, .b_imm = 128};
        c[5] = (cs_cprog_instr){.op = CS_OP_CAS, .dst = 4, .a = 3, .base = 0, .b_imm = 0, .c_reg = 2};
        c[6] = (cs_cprog_instr){.op = CS_OP_JNE, .a = 4, .b_imm = 0, .target = 10};
        c[7] = (cs_cprog_instr){.op = CS_OP_ADD, .dst = 3, .a = 3, .b_imm = 1};
        c[8] = (cs_cprog_instr){.op = CS_OP_MOD, .dst = 3, .a = 3, .b_imm = 128};
        c[9] = (cs_cprog_instr){.op = CS_OP_JMP, .target = 5};
        c[10] = (cs_cprog_instr){.op = CS_OP_ADD, .dst = 1, .a = 1, .b_imm = 1};
        c[11] = (cs_cprog_instr){.op = CS_OP_JLT, .a = 1, .b_imm = 5, .target = 1};
        thread_set(t, 12);
    }
    return (cs_cprog){.n_cells = 128, .n_threads = (size_t)n, .threads = threads};
}

static cs_cprog filesystem(int n) {
    /* cells: inode[0..31] at 0, busy[0..25] at 32; locks: locki at 0,
     * lockb at 32.  i = tid % 32; b = (i*2) % 26. */
    for (int t = 0; t < n; t++) {
        int i = t % 32;
        cs_cprog_instr *c = code[t];
        c[0] = (cs_cprog_instr){.op = CS_OP_LOCK, .base = i};
        c[1] = (cs_cprog_instr){.op = CS_OP_LOAD, .dst = 2, .base = i};
        c[2] = (cs_cprog_instr){.op = CS_OP_JNE, .a = 2, .b_imm = 0, .target = 16};
        c[3] = (cs_cprog_instr){.op = CS_OP_SET, .dst = 3, .b_imm = (i * 2) % 26};
        c[4] = (cs_cprog_instr){.op = CS_OP_LOCK, .a = 3, .base = 32};
        c[5] = (cs_cprog_instr){.op = CS_OP_LOAD, .dst = 4, .a = 3, .base = 32};
        c[6] = (cs_cprog_instr){.op = CS_OP_JNE, .a = 4, .b_imm = 0, .target = 12};
        c[7] = (cs_cprog_instr){.op = CS_OP_STORE, .a = 3, .base = 32, .b_imm = 1};
        c[8] = (cs_cprog_instr){.op = CS_OP_ADD, .dst = 5, .a = 3, .b_imm = 1};
        c[9] = (cs_cprog_instr){.op = CS_OP_STORE, .base = i, .b_reg = 5};
        c[10] = (cs_cprog_instr){.op = CS_OP_UNLOCK, .a = 3, .base = 32};
        c[11] = (cs_cprog_instr){.op = CS_OP_JMP, .target = 16};
        c[12] = (cs_cprog_instr){.op = CS_OP_UNLOCK, .a = 3, .base = 32};
        c[13] = (cs_cprog_instr){.op = CS_OP_ADD, .dst = 3, .a = 3, .b_imm = 1};
        c[14] = (cs_cprog_instr){.op = CS_OP_MOD, .dst = 3, .a = 3, .b_imm = 26};
        c[15] = (cs_cprog_instr){.op = CS_OP_JMP, .target = 4};
        c[16] = (cs_cprog_instr){.op = CS_OP_UNLOCK, .base = i};
        thread_set(t, 17);
    }
    return (cs_cprog){.n_cells = 58, .n_locks = 58, .n_threads = (size_t)n, .threads = threads};
}

static double expected(const char *fam, int n) {
    double p2 = 1;
    if (strcmp(fam, "readers") == 0) {
        for (int i = 0; i < n; i++) p2 *= 2;
        return p2;
    }
    if (strcmp(fam, "lastzero") == 0) {
        for (int i = 0; i < n - 2; i++) p2 *= 2;
        return (n + 3) * p2;
    }
    if (strcmp(fam, "indexer") == 0) {
        for (int i = 11; i < n; i++) p2 *= 8;
        return p2;
    }
    for (int i = 13; i < n; i++) p2 *= 2;
    return p2;
}

static int row(const char *fam, int n, cs_cprog (*make)(int), double cap) {
    cs_cprog p = make(n);
    cs_config cfg;
    cs_config_init(&cfg, CS_STRATEGY_DPOR);
    cfg.count_traces = 1;
    cfg.time_limit = cap;
    cs_cprog_result r;
    int rc = cs_cprog_explore(&p, &cfg, &r);
    if (rc) {
        printf("%-10s %3d  error: %s%s\n", fam, n, cs_strerror(rc),
               rc == CS_EINVAL && strcmp(fam, "filesystem") == 0
                   ? " (does engine/explorer.c accept CS_LOCK_ACQUIRE/CS_LOCK_RELEASE?)"
                   : "");
        return -1;
    }
    printf("%-10s %3d %12llu %12llu %12.0f %8llu %9.2f %12.0f%s\n", fam, n,
           (unsigned long long)r.stats.executions, (unsigned long long)r.stats.distinct_traces,
           expected(fam, n), (unsigned long long)r.stats.sleep_blocked, r.seconds,
           r.seconds > 0 ? (double)r.stats.executions / r.seconds : 0.0,
           r.stats.complete ? "" : "  (time cap: incomplete)");
    fflush(stdout);
    int hit = !r.stats.complete;
    cs_cprog_result_free(&r);
    return hit;
}

int main(void) {
    const char *s = getenv("CS_BENCH_ROW_SECONDS");
    double cap = s && *s ? atof(s) : 20.0;
    int quick = getenv("CS_BENCH_QUICK") && *getenv("CS_BENCH_QUICK") == '1';
    printf("optimal DPOR on the classic benchmarks (row cap %.0f s)\n", cap);
    printf("%-10s %3s %12s %12s %12s %8s %9s %12s\n", "family", "N", "executions", "traces",
           "expected", "blocked", "seconds", "exec/s");
    struct {
        const char *name;
        cs_cprog (*make)(int);
        int lo, hi;
    } fams[] = {
        {"readers", readers, 2, 16},
        {"lastzero", lastzero, 2, 15},
        {"indexer", indexer, 10, 17},
        {"filesystem", filesystem, 13, 24},
    };
    for (size_t f = 0; f < sizeof fams / sizeof *fams; f++) {
        int hi = quick ? fams[f].lo + 3 : fams[f].hi;
        for (int n = fams[f].lo; n <= hi; n++)
            if (row(fams[f].name, n, fams[f].make, cap) != 0) break;
    }
    return 0;
}
