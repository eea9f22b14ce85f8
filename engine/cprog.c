/*
 * cprog.c -- C "programs": threads as small state machines over shared
 * integer cells, run under any strategy through the public API only.  They
 * drive the DPOR soundness tests (against exhaustive) and the classic DPOR
 * benchmarks (readers, lastzero, indexer, filesystem).
 *
 * Invariant at every choice point: each thread's pc is at a visible operation
 * or at the end of its code; local operations have all been run.
 */
#define _POSIX_C_SOURCE 200809L
#include "internal.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define OBJ_CELLS 1
#define OBJ_LOCKS 2

typedef struct {
    size_t pc;
    int64_t r[CS_CPROG_REGS + 1]; /* r[0] unused */
    bool failed;                  /* an ASSERT failed: the thread stopped */
} thread_state;

typedef struct {
    const cs_cprog *p;
    int64_t *cells;
    uint32_t *owner; /* per lock: thread index + 1, 0 = free */
    thread_state *th;
    cs_actor *actors;
    cs_actor *enabled;
    size_t *enabled_thread;
    bool assert_failed;
    cs__u64set finals; /* hashes of the final states reached */
    uint64_t id_base;  /* address_ids: this execution's object ids start here */
} runner;

/* The resource of cell c / lock l: one object with a key per cell, or, with
 * address_ids, an object of its own whose id changes every execution. */
static uint64_t cell_object(const runner *R, size_t c) {
    return R->p->address_ids ? R->id_base + 2 * c : OBJ_CELLS;
}
static uint64_t lock_object(const runner *R, size_t l) {
    return R->p->address_ids ? R->id_base + 2 * l + 1 : OBJ_LOCKS;
}

static bool is_visible(uint8_t op) {
    return (op >= CS_OP_LOAD && op <= CS_OP_UNLOCK) || op == CS_OP_BARRIER ||
           op == CS_OP_BARRIER_READ || op == CS_OP_INC;
}

static int validate(const cs_cprog *p) {
    if (!p || (p->n_threads && !p->threads) || p->n_threads > UINT32_MAX) return CS_EINVAL;
    for (size_t t = 0; t < p->n_threads; t++) {
        const cs_cprog_thread *th = &p->threads[t];
        if (th->len && !th->code) return CS_EINVAL;
        for (size_t i = 0; i < th->len; i++) {
            const cs_cprog_instr *in = &th->code[i];
            if (in->op < CS_OP_LOAD || in->op > CS_OP_INC) return CS_EINVAL;
            if (in->dst > CS_CPROG_REGS || in->a > CS_CPROG_REGS ||
                in->b_reg > CS_CPROG_REGS || in->c_reg > CS_CPROG_REGS)
                return CS_EINVAL;
            switch (in->op) {
            case CS_OP_LOAD: case CS_OP_CAS: case CS_OP_FADD:
                if (in->dst == 0) return CS_EINVAL;
                /* fallthrough */
            case CS_OP_STORE: case CS_OP_INC:
                if (in->base < 0) return CS_EINVAL;
                break;
            case CS_OP_LOCK: case CS_OP_UNLOCK:
                if (in->base < 0 || (in->a == 0 && (size_t)in->base >= p->n_locks))
                    return CS_EINVAL;
                break;
            case CS_OP_SET:
                if (in->dst == 0) return CS_EINVAL;
                break;
            case CS_OP_ADD: case CS_OP_SUB: case CS_OP_MUL: case CS_OP_MOD:
                if (in->dst == 0 || in->a == 0) return CS_EINVAL;
                break;
            case CS_OP_JMP:
                if (in->target < 0 || (size_t)in->target > th->len) return CS_EINVAL;
                break;
            case CS_OP_JEQ: case CS_OP_JNE: case CS_OP_JLT: case CS_OP_JGE:
                if (in->a == 0 || in->target < 0 || (size_t)in->target > th->len)
                    return CS_EINVAL;
                break;
            case CS_OP_ASSERT:
                if (in->a == 0) return CS_EINVAL;
                break;
            case CS_OP_BARRIER: case CS_OP_BARRIER_READ:
                break; /* dst 0: the sum is not kept */
            }
        }
    }
    return CS_OK;
}

static int64_t opnd(const thread_state *ts, uint8_t reg, int64_t imm) {
    return reg ? ts->r[reg] : imm;
}

static int address(const runner *R, const thread_state *ts, const cs_cprog_instr *in,
                   size_t *out) {
    int64_t a = (int64_t)in->base + (in->a ? ts->r[in->a] : 0);
    if (a < 0 || (uint64_t)a >= R->p->n_cells) return CS_EINVAL;
    *out = (size_t)a;
    return CS_OK;
}

/* Runs local operations of thread t until a visible one or the end.
 * Arithmetic wraps (computed in unsigned) so no program is UB. */
static int run_local(runner *R, size_t t) {
    const cs_cprog_thread *code = &R->p->threads[t];
    thread_state *ts = &R->th[t];
    uint64_t budget = R->p->max_local_ops ? R->p->max_local_ops : 1000000;
    while (!ts->failed && ts->pc < code->len) {
        const cs_cprog_instr *in = &code->code[ts->pc];
        if (is_visible(in->op)) return CS_OK;
        if (budget-- == 0) return CS_EINVAL;
        int64_t b = opnd(ts, in->b_reg, in->b_imm);
        int64_t x = in->a ? ts->r[in->a] : 0;
        bool jump = false;
        switch (in->op) {
        case CS_OP_SET: ts->r[in->dst] = b; break;
        case CS_OP_ADD: ts->r[in->dst] = (int64_t)((uint64_t)x + (uint64_t)b); break;
        case CS_OP_SUB: ts->r[in->dst] = (int64_t)((uint64_t)x - (uint64_t)b); break;
        case CS_OP_MUL: ts->r[in->dst] = (int64_t)((uint64_t)x * (uint64_t)b); break;
        case CS_OP_MOD: {
            if (b <= 0) return CS_EINVAL;
            int64_t m = x % b;
            ts->r[in->dst] = m < 0 ? m + b : m;
            break;
        }
        case CS_OP_JMP: jump = true; break;
        case CS_OP_JEQ: jump = x == b; break;
        case CS_OP_JNE: jump = x != b; break;
        case CS_OP_JLT: jump = x < b; break;
        case CS_OP_JGE: jump = x >= b; break;
        case CS_OP_ASSERT:
            if (x != b) {
                ts->failed = true;
                R->assert_failed = true;
                return CS_OK;
            }
            break;
        default: return CS_EINVAL;
        }
        ts->pc = jump ? (size_t)in->target : ts->pc + 1;
    }
    return CS_OK;
}

static bool finished(const runner *R, size_t t) {
    return R->th[t].failed || R->th[t].pc >= R->p->threads[t].len;
}

/* Lock id of a LOCK/UNLOCK: base + (a ? r[a] : 0); SIZE_MAX if out of range. */
static size_t lock_id(const runner *R, const thread_state *ts, const cs_cprog_instr *in) {
    int64_t l = (int64_t)in->base + (in->a ? ts->r[in->a] : 0);
    if (l < 0 || (uint64_t)l >= R->p->n_locks) return SIZE_MAX;
    return (size_t)l;
}

/* A LOCK whose id is out of range counts as enabled so that running it
 * reports the error. */
static bool enabled(const runner *R, size_t t) {
    if (finished(R, t)) return false;
    const cs_cprog_instr *in = &R->p->threads[t].code[R->th[t].pc];
    if (in->op != CS_OP_LOCK) return true;
    size_t l = lock_id(R, &R->th[t], in);
    return l == SIZE_MAX || R->owner[l] == 0;
}

/* Performs the visible operation of thread t as one step. */
static int run_step(runner *R, cs_explorer *ex, size_t t) {
    thread_state *ts = &R->th[t];
    const cs_cprog_instr *in = &R->p->threads[t].code[ts->pc];
    int rc = cs_step_begin(ex, R->actors[t], CS_SCHEDULED_BY_NONE);
    if (rc) return rc;
    size_t a = 0;
    int64_t b = opnd(ts, in->b_reg, in->b_imm);
    switch (in->op) {
    case CS_OP_LOAD:
        if ((rc = address(R, ts, in, &a))) break;
        rc = cs_access_record(ex, cell_object(R, a), a, CS_READ, (uint32_t)ts->pc);
        ts->r[in->dst] = R->cells[a];
        break;
    case CS_OP_STORE:
        if ((rc = address(R, ts, in, &a))) break;
        rc = cs_access_record(ex, cell_object(R, a), a, CS_WRITE, (uint32_t)ts->pc);
        R->cells[a] = b;
        break;
    case CS_OP_CAS: {
        if ((rc = address(R, ts, in, &a))) break;
        bool ok = R->cells[a] == b;
        /* always a write: the kind of an access must not depend on the
         * values read, since DPOR predicts a reversed event's accesses from
         * its previous run */
        rc = cs_access_record(ex, cell_object(R, a), a, CS_WRITE, (uint32_t)ts->pc);
        if (ok) R->cells[a] = opnd(ts, in->c_reg, in->c_imm);
        ts->r[in->dst] = ok;
        break;
    }
    case CS_OP_FADD:
        if ((rc = address(R, ts, in, &a))) break;
        rc = cs_access_record(ex, cell_object(R, a), a, CS_WRITE, (uint32_t)ts->pc);
        ts->r[in->dst] = R->cells[a];
        R->cells[a] = (int64_t)((uint64_t)R->cells[a] + (uint64_t)b);
        break;
    case CS_OP_INC:
        if ((rc = address(R, ts, in, &a))) break;
        rc = cs_access_record(ex, cell_object(R, a), a, CS_ADD, (uint32_t)ts->pc);
        R->cells[a] = (int64_t)((uint64_t)R->cells[a] + (uint64_t)b);
        break;
    case CS_OP_LOCK: {
        size_t l = lock_id(R, ts, in);
        if (l == SIZE_MAX || R->owner[l]) { rc = CS_EINVAL; break; }
        rc = cs_access_record(ex, lock_object(R, l), l, CS_LOCK_ACQUIRE, (uint32_t)ts->pc);
        R->owner[l] = (uint32_t)t + 1;
        break;
    }
    case CS_OP_UNLOCK: {
        size_t l = lock_id(R, ts, in);
        if (l == SIZE_MAX || R->owner[l] != (uint32_t)t + 1) { rc = CS_EINVAL; break; }
        rc = cs_access_record(ex, lock_object(R, l), l, CS_LOCK_RELEASE, (uint32_t)ts->pc);
        R->owner[l] = 0;
        break;
    }
    case CS_OP_BARRIER:
    case CS_OP_BARRIER_READ: {
        bool write = in->op == CS_OP_BARRIER;
        rc = cs_access_record(ex, CS_OBJECT_ALL, 0, write ? CS_WRITE : CS_READ,
                              (uint32_t)ts->pc);
        uint64_t sum = 0;
        for (size_t c = 0; c < R->p->n_cells; c++) {
            sum += (uint64_t)R->cells[c] * (c + 1);
            if (write) R->cells[c] = (int64_t)((uint64_t)R->cells[c] + (uint64_t)b);
        }
        if (in->dst) ts->r[in->dst] = (int64_t)sum;
        break;
    }
    default: rc = CS_EINVAL;
    }
    int rc2 = cs_step_end(ex);
    if (rc) return rc;
    if (rc2) return rc2;
    ts->pc++;
    return run_local(R, t);
}

static uint64_t final_hash(const runner *R) {
    uint64_t h = 0x243f6a8885a308d3ULL;
    for (size_t c = 0; c < R->p->n_cells; c++) h = cs__mix64(h ^ (uint64_t)R->cells[c]) + c;
    for (size_t t = 0; t < R->p->n_threads; t++) {
        const thread_state *ts = &R->th[t];
        h = cs__mix64(h ^ ts->pc ^ ((uint64_t)ts->failed << 63));
        for (int k = 1; k <= CS_CPROG_REGS; k++) h = cs__mix64(h ^ (uint64_t)ts->r[k]) + (uint64_t)k;
    }
    return h;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void cs_cprog_result_free(cs_cprog_result *r) {
    if (!r) return;
    free(r->finals);
    r->finals = NULL;
    r->n_finals = 0;
}

int cs_cprog_explore(const cs_cprog *prog, const cs_config *cfg,
                     cs_cprog_result *out) {
    if (!cfg || !out) return CS_EINVAL;
    memset(out, 0, sizeof *out);
    int rc = validate(prog);
    if (rc) return rc;
    double t0 = now_seconds();
    runner R;
    memset(&R, 0, sizeof R);
    R.p = prog;
    cs_explorer *ex = NULL;
    size_t nt = prog->n_threads;
    R.cells = calloc(prog->n_cells ? prog->n_cells : 1, sizeof *R.cells);
    R.owner = calloc(prog->n_locks ? prog->n_locks : 1, sizeof *R.owner);
    R.th = calloc(nt ? nt : 1, sizeof *R.th);
    R.actors = calloc(nt ? nt : 1, sizeof *R.actors);
    R.enabled = calloc(nt ? nt : 1, sizeof *R.enabled);
    R.enabled_thread = calloc(nt ? nt : 1, sizeof *R.enabled_thread);
    rc = CS_ENOMEM;
    if (!R.cells || !R.owner || !R.th || !R.actors || !R.enabled || !R.enabled_thread)
        goto cleanup;
    {
        cs_config own = *cfg;
        own.stable_objects = !prog->address_ids; /* numbered, not allocated */
        own.fixed_step_accesses = 1; /* one access per step, its kind fixed */
        if ((rc = cs_explorer_new(&own, &ex))) goto cleanup;
    }
    for (size_t t = 0; t < nt; t++)
        if ((rc = cs_actor_intern(ex, CS_NO_ACTOR, (uint32_t)t, &R.actors[t]))) goto cleanup;

    uint64_t executions = 0;
    for (;;) {
        int more = 0;
        if (prog->between && (rc = prog->between(prog->hook_arg, ex))) goto cleanup;
        if ((rc = cs_execution_begin(ex, &more))) goto cleanup;
        if (!more) break;
        R.id_base = (cs__mix64(++executions) | 1) << 20; /* like fresh allocations */
        for (size_t c = 0; c < prog->n_cells; c++) R.cells[c] = prog->init ? prog->init[c] : 0;
        memset(R.owner, 0, (prog->n_locks ? prog->n_locks : 1) * sizeof *R.owner);
        memset(R.th, 0, nt * sizeof *R.th);
        R.assert_failed = false;
        int outcome = CS_OUTCOME_OK;
        for (size_t t = 0; t < nt; t++)
            if ((rc = run_local(&R, t))) goto abandon;
        for (;;) {
            size_t n = 0;
            bool pending = false;
            for (size_t t = 0; t < nt; t++) {
                if (!finished(&R, t)) pending = true;
                if (enabled(&R, t)) {
                    R.enabled[n] = R.actors[t];
                    R.enabled_thread[n++] = t;
                }
            }
            if (n == 0) {
                if (pending) {
                    out->deadlocks++;
                    outcome = CS_OUTCOME_FAILED;
                }
                break;
            }
            size_t pick = 0;
            rc = cs_choose(ex, R.enabled, n, &pick);
            if (rc == CS_EBLOCKED || rc == CS_EDIVERGED || rc == CS_EBUDGET) {
                if (rc == CS_EDIVERGED) out->diverged++;
                if (rc == CS_EBUDGET) out->budget++;
                outcome = CS_OUTCOME_ABORTED;
                rc = CS_OK;
                break;
            }
            if (rc) goto abandon;
            if ((rc = run_step(&R, ex, R.enabled_thread[pick]))) goto abandon;
        }
        if (outcome != CS_OUTCOME_ABORTED && R.assert_failed) {
            out->assert_failed++;
            outcome = CS_OUTCOME_FAILED;
        }
        if (outcome != CS_OUTCOME_ABORTED && (rc = cs__u64set_add(&R.finals, final_hash(&R))) < 0) goto abandon;
        if ((rc = cs_execution_end(ex, outcome))) goto cleanup;
    }
    out->n_finals = cs__u64set_count(&R.finals);
    out->finals = malloc((out->n_finals ? out->n_finals : 1) * sizeof *out->finals);
    rc = CS_ENOMEM;
    if (!out->finals) goto cleanup;
    cs__u64set_members(&R.finals, out->finals);
    qsort(out->finals, out->n_finals, sizeof *out->finals, cmp_u64);
    cs_explorer_stats(ex, &out->stats);
    if (prog->at_end) prog->at_end(prog->hook_arg, ex);
    rc = CS_OK;
    goto cleanup;
abandon:
    cs_execution_end(ex, CS_OUTCOME_ABORTED);
cleanup:
    if (ex && rc) cs_explorer_stats(ex, &out->stats);
    out->seconds = now_seconds() - t0;
    cs_explorer_free(ex);
    free(R.cells);
    free(R.owner);
    free(R.th);
    free(R.actors);
    free(R.enabled);
    free(R.enabled_thread);
    cs__u64set_free(&R.finals);
    if (rc) cs_cprog_result_free(out);
    return rc;
}
