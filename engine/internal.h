/*
 * internal.h -- what the engine's files share and the front ends never see.
 *
 * Ownership:
 *   explorer.c      the explorer object, actor interning, budgets, stats,
 *                   dispatch to the strategy vtable
 *   trace.c         the record of the current execution: events, accesses,
 *                   vector clocks, dependency and races
 *   strategy_*.c    one file per strategy, each exporting one cs__strategy_ops
 *   rng.c           the seeded generator every randomised strategy uses
 */
#ifndef CS_INTERNAL_H
#define CS_INTERNAL_H

#include "chaossloth.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* --------------------------------------------------------------- hashing */

/* A 64-bit finaliser (splitmix64's): a bijection that spreads every input
 * bit over the output; the engine's hash tables and fingerprints use it. */
static inline uint64_t cs__mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

/* Do two accesses conflict?  Their resources overlap (same object and same
 * key, or either key is CS_KEY_WHOLE, or either object is CS_OBJECT_ALL, the
 * global barrier, which overlaps every resource) and at least one is not a
 * read (lock acquisitions and releases count as writes). */
static inline bool cs__conflict(uint64_t o1, uint64_t k1, uint8_t kind1, uint64_t o2,
                                uint64_t k2, uint8_t kind2) {
    if (kind1 == kind2 && (kind1 == CS_READ || kind1 == CS_ADD)) return false;
    if (o1 == CS_OBJECT_ALL || o2 == CS_OBJECT_ALL) return true;
    if (o1 != o2) return false;
    return k1 == k2 || k1 == CS_KEY_WHOLE || k2 == CS_KEY_WHOLE;
}

/* A growable set of 64-bit values (open addressing; 0 is kept out of band). */
typedef struct {
    uint64_t *slots;
    size_t cap, len;
    bool has_zero;
} cs__u64set;

/* Returns 1 if v was added, 0 if it was present, CS_ENOMEM. */
int cs__u64set_add(cs__u64set *s, uint64_t v);
size_t cs__u64set_count(const cs__u64set *s);
bool cs__u64set_has(const cs__u64set *s, uint64_t v);
/* Writes the members (in no particular order) to out, which has room for
 * cs__u64set_count(s) values. */
void cs__u64set_members(const cs__u64set *s, uint64_t *out);
void cs__u64set_free(cs__u64set *s);

/* Distinct 64-bit values (trace fingerprints) in bounded memory: counted
 * exactly in a cs__u64set up to `exact_max` values, then by a HyperLogLog
 * sketch of 2^CS__HLL_P one-byte registers (64 KB; relative standard error
 * 1.04 / 2^(P/2) = 0.4%) into which the exact set is poured and freed.  From
 * the switch on the count is an estimate (cs__distinct_estimated) and memory
 * stays flat however many values arrive. */
#define CS__HLL_P 16
typedef struct {
    cs__u64set exact;
    uint64_t exact_max; /* values counted exactly before the sketch */
    uint8_t *hll;       /* NULL while exact; else 2^CS__HLL_P registers */
    double hll_sum;     /* sketch: sum over registers of 2^-register */
    size_t hll_zeros;   /* sketch: registers still 0 */
} cs__distinct;

/* Returns 1 if v is new (exact mode), 0 if seen or in sketch mode, CS_ENOMEM
 * (nothing changed). */
int cs__distinct_add(cs__distinct *d, uint64_t v);
uint64_t cs__distinct_count(const cs__distinct *d);
bool cs__distinct_estimated(const cs__distinct *d);
void cs__distinct_free(cs__distinct *d);

/* ------------------------------------------------------------------- rng */

/* xoshiro256** seeded through splitmix64: fast, reproducible everywhere. */
typedef struct {
    uint64_t s[4];
} cs__rng;

void cs__rng_seed(cs__rng *rng, uint64_t seed);
uint64_t cs__rng_next(cs__rng *rng);
/* Seeds the stream of execution `stream` of a run seeded with `seed`: the
 * two inputs are mixed separately so neighbouring pairs give unrelated
 * streams, and any execution is reproducible from (seed, stream) alone. */
void cs__rng_seed_stream(cs__rng *rng, uint64_t seed, uint64_t stream);
/* Uniform in [0, bound), bound >= 1, without modulo bias. */
uint64_t cs__rng_below(cs__rng *rng, uint64_t bound);
/* Uniform double in [0, 1). */
double cs__rng_double(cs__rng *rng);

/* A sampling strategy's shard (cs_config.shard_index / shard_count) and the
 * random stream of its execution number `executions`. */
typedef struct {
    uint64_t index, count; /* count >= 1 */
} cs__shard;

static inline cs__shard cs__shard_of(const cs_config *cfg) {
    cs__shard s = {cfg->shard_index, cfg->shard_count ? cfg->shard_count : 1};
    return s;
}

static inline uint64_t cs__shard_stream(cs__shard s, uint64_t executions) {
    return executions * s.count + s.index;
}

/* ----------------------------------------------------------------- trace */

/* The record of one execution.  Memory is reused across executions: reset
 * keeps the capacity.  Every event carries a vector clock indexed by chains
 * of HB-ordered events, stored as a persistent trie that shares what it does
 * not change with the clocks it was joined from (see trace.c); the
 * actor-indexed clock is computed on request. */
typedef struct cs__trace cs__trace;

int cs__trace_new(cs__trace **out);
void cs__trace_free(cs__trace *t);
void cs__trace_reset(cs__trace *t);
int cs__trace_step_begin(cs__trace *t, cs_actor actor, int64_t scheduled_by);
/* A CS_AFTER_ALL step whose barrier is the prefix [0, prefix) (<= the
 * trace's length), whatever the latest barrier (see cs_step_begin_after). */
int cs__trace_step_begin_after(cs__trace *t, cs_actor actor, size_t prefix);
int cs__trace_access_add(cs__trace *t, uint64_t object, uint64_t key,
                        cs_access_kind kind, uint32_t site);
/* Mixes a note into the open step's (see cs_step_note). */
int cs__trace_note(cs__trace *t, uint64_t note);
int cs__trace_step_accesses(const cs__trace *t, size_t *count);
int cs__trace_step_rewind(cs__trace *t, size_t keep, cs_access_kind kind, int *dropped);
/* Records a clock advance between steps: later CS_AFTER_ALL steps happen
 * after every step recorded so far (see cs_clock_advance). */
int cs__trace_barrier(cs__trace *t);
/* For a CS_AFTER_ALL event: how many events precede its barrier (it happens
 * after events [0, n)); for any other event 0. */
size_t cs__trace_barrier_of(const cs__trace *t, size_t index);
/* Completes the open step: computes its vector clock from program order, the
 * scheduled_by edge and conflicting earlier accesses. */
int cs__trace_step_end(cs__trace *t);
bool cs__trace_step_open(const cs__trace *t);
size_t cs__trace_len(const cs__trace *t);
/* The number of HB chains the clocks are indexed by. */
size_t cs__trace_chains(const cs__trace *t);
/* Clock trie nodes in use (64 bytes each): what the execution's clocks cost. */
size_t cs__trace_clock_nodes(const cs__trace *t);
/* Canonical fingerprint of the execution's Mazurkiewicz trace: equal for two
 * executions iff they are equivalent up to swapping adjacent independent
 * steps (modulo hash collisions).  Needs O(steps) scratch memory: CS_ENOMEM
 * when it cannot be had (never a different, cheaper hash: that would count
 * one trace twice). */
int cs__trace_fingerprint(const cs__trace *t, uint64_t *out);

/* The name of an object, for comparing executions: a family and the data
 * that identifies the object within it, kept whole (no hashing, no masking),
 * so two objects of one execution never share a name. */
enum { CS__NAME_STABLE = 0, CS__NAME_CREATED = 1, CS__NAME_BIRTH = 2 };
typedef struct {
    uint64_t id;    /* stable: the object id; created: actor << 32 | actor_step;
                       birth: the event of the first access */
    uint32_t sub;   /* stable: 0; created: rank of the creation in its step;
                       birth: index of the first access within its event */
    uint8_t family; /* CS__NAME_* */
} cs__objname;

static inline bool cs__objname_eq(const cs__objname *a, const cs__objname *b) {
    return a->id == b->id && a->sub == b->sub && a->family == b->family;
}

/* The name of the object of an access.  The first access of the object in
 * the execution decides: CS_OBJECT_ALL (the barrier, whatever its flags) and
 * CS_ID_STABLE give the id itself (*birth = 0); CS_ID_CREATED gives (actor,
 * actor_step, rank of the creation in the step) (*birth = 0); otherwise the
 * name is that first access (event, index) and *birth = event + 1.  Two
 * executions that share their first m steps give the same names to the
 * objects first accessed within those steps (births <= m); an object first
 * accessed later may carry a different name in another execution. */
int cs__trace_object_name(const cs__trace *t, size_t access_index, cs__objname *name,
                          uint32_t *birth);

/* Accessors used by explorer.c to implement the public cs_trace_* API. */
int cs__trace_get_event(const cs__trace *t, size_t index, cs_event *out);
int cs__trace_get_access(const cs__trace *t, size_t index, cs_access *out);
int cs__trace_get_access_flags(const cs__trace *t, size_t index, uint8_t *flags);
/* The actor-indexed vector clock of an event: *len = the number of actors
 * interned when it was recorded, clock[a] = the number of actor a's events
 * that happen before or equal it.  Materialised into a buffer owned by the
 * trace: *clock is valid until the next cs__trace_get_clock call, step or
 * reset.  O(*len * log(steps per actor)), plus O(len) after new steps. */
int cs__trace_get_clock(cs__trace *t, size_t index, const uint32_t **clock, size_t *len);
bool cs__trace_hb(const cs__trace *t, size_t a, size_t b);
/* A copy of the trace's happens-before for cs_trace_hb_view. */
int cs__trace_hb_view(const cs__trace *t, cs_hb_view **out);
void cs__hb_view_free(cs_hb_view *v);
bool cs__trace_dep(const cs__trace *t, size_t a, size_t b);
/* Does event `later` wait for event `earlier`: an enabling read (CS_ENABLING) of `later`
 * conflicting with an add (CS_ADD) of `earlier`?  Such a pair is never reversed (DPOR,
 * causes). */
bool cs__trace_waits_for(const cs__trace *t, size_t later, size_t earlier);
int cs__trace_preds(const cs__trace *t, size_t index, size_t *out, size_t cap,
                   size_t *n);

/* ------------------------------------------------------------- strategy */

typedef struct cs__strategy_ops {
    const char *name;
    /* Allocates the strategy's state from the explorer's config. */
    int (*create)(cs_explorer *ex, const cs_config *cfg, void **state);
    void (*destroy)(void *state);
    /* Decides whether another execution should run (*more = 0 when the
     * strategy has nothing left; it then sets *complete when that means every
     * trace was covered). */
    int (*begin)(cs_explorer *ex, void *state, int *more, int *complete);
    /* Picks the index of the next actor to run.  `step` is the number of
     * steps already taken in this execution. */
    int (*choose)(cs_explorer *ex, void *state, size_t step,
                  const cs_actor *enabled, size_t n, size_t *chosen);
    /* Called after each step is recorded in the trace (event `index`). */
    int (*observe)(cs_explorer *ex, void *state, size_t index);
    /* Called when the execution ends. */
    int (*end)(cs_explorer *ex, void *state, int outcome);
} cs__strategy_ops;

extern const cs__strategy_ops cs__strategy_fifo;
extern const cs__strategy_ops cs__strategy_random;
extern const cs__strategy_ops cs__strategy_replay;
extern const cs__strategy_ops cs__strategy_pct;
extern const cs__strategy_ops cs__strategy_pos;
extern const cs__strategy_ops cs__strategy_dpor;
extern const cs__strategy_ops cs__strategy_exhaustive;
extern const cs__strategy_ops cs__strategy_guided;

/* What strategies may ask of the explorer. */
const cs__trace *cs__explorer_trace(const cs_explorer *ex);
size_t cs__explorer_actor_count(const cs_explorer *ex);
/* Records a divergence (the prescribed actor is not enabled) so that
 * cs_divergence can report it; returns CS_EDIVERGED for convenience. */
int cs__explorer_diverged(cs_explorer *ex, size_t step, cs_actor expected,
                         size_t n_enabled);
/* Records a CS_DIVERGED_CHANGED divergence of event `step` of `actor`; the
 * differing access, if any (missing: made before, not now); returns
 * CS_EDIVERGED. */
int cs__explorer_changed(cs_explorer *ex, size_t step, cs_actor actor,
                         const cs_access *changed, bool missing);
/* A strategy that cuts an execution short as redundant (returning
 * CS_EBLOCKED from choose) counts it here. */
void cs__explorer_count_blocked(cs_explorer *ex);
/* The guided strategy counts a step that did not follow its schedule here
 * (cs_stats.guide_deviations). */
void cs__explorer_count_deviation(cs_explorer *ex);
/* The explorer's (validated, owned) configuration. */
const cs_config *cs__explorer_config(const cs_explorer *ex);

/* strategy_dpor.c's side of cs_share_* (chaossloth.h), on its state. */
int cs__dpor_share_offer(void *state, size_t *position, int *found);
int cs__dpor_share_give(void *state, size_t position, size_t *token);
int cs__dpor_share_take(void *state, size_t position);
int cs__dpor_share_done(void *state, size_t position, size_t token);
int cs__dpor_share_waiting(void *state, size_t *position, int *waiting);
int cs__dpor_share_resume(void *state);
int cs__dpor_share_reports(void *state, const uint8_t **buf, size_t *len);
void cs__dpor_share_reports_clear(void *state);
int cs__dpor_share_import(void *state, const uint8_t *buf, size_t len, const cs_actor *map,
                          size_t n_map);

#endif /* CS_INTERNAL_H */
