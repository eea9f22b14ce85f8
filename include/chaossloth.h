/*
 * chaossloth.h -- the one public header of the ChaosSloth engine.
 *
 * The engine is plain C11 and never includes Python.h.  It knows nothing of
 * asyncio: a front end (the CPython extension, or the C "programs" used by the
 * tests and benchmarks) runs *executions* made of *steps*; each step belongs to
 * an *actor* (a task, a callback, a C thread) and performs *accesses* to
 * *resources*.  The engine decides which enabled actor runs next, records the
 * execution (vector clocks, dependencies), and decides whether another
 * execution is needed.
 *
 * Conventions
 *   - Every function that can fail returns an int status: CS_OK (0) or a
 *     negative CS_E* code.  Nothing aborts, nothing prints.
 *   - Actor ids are small integers interned from *creation paths*
 *     (parent actor, index among the parent's creations), so the same actor
 *     gets the same id in every execution of one exploration, whatever the
 *     schedule.  Schedules are sequences of actor ids.
 *   - Event indices are positions in the current execution (0-based).
 */
#ifndef CHAOSSLOTH_H
#define CHAOSSLOTH_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CS_VERSION_MAJOR 0
#define CS_VERSION_MINOR 1

/* ------------------------------------------------------------------ status */

enum {
    CS_OK = 0,
    CS_ENOMEM = -1,    /* allocation failed */
    CS_EINVAL = -2,    /* bad argument or call out of sequence */
    CS_EDIVERGED = -3, /* a prescribed actor is not enabled: the program is
                          not deterministic under this schedule */
    CS_EBUDGET = -4,   /* step budget of this execution exhausted */
    CS_ESTATE = -5,    /* no execution / step in progress (or one already is) */
    CS_EBLOCKED = -6,  /* dpor: the rest of this execution is redundant
                          (sleep-set blocked); end it with
                          CS_OUTCOME_ABORTED and begin the next one */
};

/* A static, human-readable name of a status code. */
const char *cs_strerror(int status);

/* ------------------------------------------------------------------ actors */

typedef uint32_t cs_actor;
#define CS_NO_ACTOR ((cs_actor)UINT32_MAX)

/* ---------------------------------------------------------------- accesses */

typedef enum {
    CS_READ = 1,
    CS_WRITE = 2,
} cs_access_kind;

/* A resource is (object, key).  CS_KEY_WHOLE is the whole-object wildcard: it
 * overlaps every key of the same object.  Two accesses conflict when their
 * resources overlap and at least one of them is a write. */
#define CS_KEY_WHOLE UINT64_MAX

typedef struct {
    uint64_t object; /* identity of the object within this execution */
    uint64_t key;    /* key within the object, or CS_KEY_WHOLE */
    uint32_t site;   /* front-end site id (source location), 0 = unknown */
    uint8_t kind;    /* cs_access_kind */
} cs_access;

/* -------------------------------------------------------------- strategies */

typedef enum {
    CS_STRATEGY_FIFO = 0,       /* always the first enabled actor (stock order) */
    CS_STRATEGY_RANDOM = 1,     /* uniform among enabled, seeded */
    CS_STRATEGY_REPLAY = 2,     /* a recorded actor sequence */
    CS_STRATEGY_PCT = 3,        /* probabilistic concurrency testing, depth d */
    CS_STRATEGY_POS = 4,        /* partial order sampling */
    CS_STRATEGY_DPOR = 5,       /* optimal DPOR: wakeup trees + sleep sets */
    CS_STRATEGY_EXHAUSTIVE = 6, /* brute force: every schedule (for testing) */
} cs_strategy_kind;

/* Name <-> kind ("fifo", "random", "replay", "pct", "pos", "dpor",
 * "exhaustive").  cs_strategy_from_name returns -1 for an unknown name. */
const char *cs_strategy_name(cs_strategy_kind kind);
int cs_strategy_from_name(const char *name);

typedef struct {
    cs_strategy_kind kind;
    uint64_t seed;            /* random, pct, pos */
    uint32_t pct_depth;       /* pct: bug depth d (>= 1); default 3 */
    uint32_t pct_steps_hint;  /* pct: estimate of steps per execution (k) */
    const cs_actor *replay;   /* replay: the actor sequence (copied) */
    size_t replay_len;
    uint64_t max_executions;  /* 0 = no limit */
    uint64_t max_steps;       /* per execution; 0 = no limit */
    double time_limit;        /* seconds of wall time; 0 = no limit */
    int count_traces;         /* 1: fingerprint each execution to count
                                 distinct Mazurkiewicz traces */
} cs_config;

/* Fills a config with defaults for the given strategy. */
void cs_config_init(cs_config *cfg, cs_strategy_kind kind);

/* ---------------------------------------------------------------- explorer */

typedef struct cs_explorer cs_explorer;

int cs_explorer_new(const cs_config *cfg, cs_explorer **out);
void cs_explorer_free(cs_explorer *ex);

/* Interns the creation path (parent, index) and returns its actor id.  The
 * root actor of every execution is cs_actor_intern(ex, CS_NO_ACTOR, 0).  The
 * table persists across executions of one explorer. */
int cs_actor_intern(cs_explorer *ex, cs_actor parent, uint32_t index,
                    cs_actor *out);
/* Parent and index of an interned actor (for naming it). */
int cs_actor_path(const cs_explorer *ex, cs_actor actor, cs_actor *parent,
                  uint32_t *index);

/* Starts the next execution.  Sets *more to 1 if one should run, 0 when the
 * exploration is over (complete, or a budget was hit). */
int cs_execution_begin(cs_explorer *ex, int *more);

/* Chooses the next step among `n` enabled actors (n >= 1), given in the front
 * end's default order (fifo picks index 0).  An actor may appear at most once.
 * Returns CS_EDIVERGED when the strategy prescribes an actor that is not in
 * `enabled` (see cs_divergence), CS_EBUDGET when the step budget is spent. */
int cs_choose(cs_explorer *ex, const cs_actor *enabled, size_t n,
              size_t *chosen);

/* Brackets the execution of one step of `actor`.  `scheduled_by` is the event
 * index of the step that made this step runnable (call_soon / call_later /
 * task creation / future completion), or CS_SCHEDULED_BY_NONE, or
 * CS_AFTER_ALL: the step could only run once every earlier step had run (the
 * virtual clock advanced to fire it: strict timer mode), so it happens after
 * all of them.  Between begin and end the front end reports accesses. */
#define CS_SCHEDULED_BY_NONE ((int64_t)-1)
#define CS_AFTER_ALL ((int64_t)-2)
int cs_step_begin(cs_explorer *ex, cs_actor actor, int64_t scheduled_by);
int cs_access_record(cs_explorer *ex, uint64_t object, uint64_t key,
                     cs_access_kind kind, uint32_t site);
int cs_step_end(cs_explorer *ex);

/* Outcome flags of an execution, as judged by the front end's oracles. */
enum {
    CS_OUTCOME_OK = 0,
    CS_OUTCOME_FAILED = 1,   /* an oracle failed */
    CS_OUTCOME_ABORTED = 2,  /* diverged, budget, or internal error: the
                                execution says nothing about the program */
};
int cs_execution_end(cs_explorer *ex, int outcome);

/* Where replay (or DPOR's prescribed prefix) diverged in the last execution:
 * the step index, the actor that was expected and how many were enabled.
 * Returns CS_ESTATE if nothing diverged. */
int cs_divergence(const cs_explorer *ex, size_t *step, cs_actor *expected,
                  size_t *n_enabled);

typedef struct {
    uint64_t executions;      /* executions ended (all outcomes) */
    uint64_t failing;         /* executions ended with CS_OUTCOME_FAILED */
    uint64_t aborted;         /* executions ended with CS_OUTCOME_ABORTED */
    uint64_t sleep_blocked;   /* dpor: executions cut short by a sleep set */
    uint64_t distinct_traces; /* if count_traces: distinct fingerprints */
    uint64_t max_depth;       /* longest execution, in steps */
    int complete;             /* 1: every trace was covered (dpor,
                                 exhaustive, within budget) */
    int budget_hit;           /* 1: max_executions or time_limit stopped it */
} cs_stats;

void cs_explorer_stats(const cs_explorer *ex, cs_stats *out);

/* ----------------------------------------------- the current execution */
/* Read access to what the current (or just ended) execution recorded. */

typedef struct {
    cs_actor actor;
    uint32_t actor_step;     /* this is the actor's n-th step (0-based) */
    int64_t scheduled_by;    /* event index, or -1 */
    uint32_t first_access;   /* index into the execution's access array */
    uint32_t n_accesses;
} cs_event;

size_t cs_trace_length(const cs_explorer *ex);
int cs_trace_event(const cs_explorer *ex, size_t index, cs_event *out);
int cs_trace_access(const cs_explorer *ex, size_t access_index,
                    cs_access *out);
/* Vector clock of an event: `*len` entries indexed by actor id (entries past
 * *len are 0).  The pointer stays valid until the next step is recorded. */
int cs_trace_clock(const cs_explorer *ex, size_t index, const uint32_t **clock,
                   size_t *len);
/* 1 if event a happens before event b (a != b), else 0. */
int cs_trace_happens_before(const cs_explorer *ex, size_t a, size_t b);
/* 1 if events a and b are dependent (same actor, scheduled_by edge, or
 * conflicting accesses), else 0. */
int cs_trace_dependent(const cs_explorer *ex, size_t a, size_t b);
/* The immediate happens-before predecessors of an event (its covering
 * relation): writes up to `cap` indices, sets *n to the full count. */
int cs_trace_predecessors(const cs_explorer *ex, size_t index, size_t *out,
                          size_t cap, size_t *n);
/* The actor sequence of the current execution (its schedule). */
int cs_trace_schedule(const cs_explorer *ex, cs_actor *out, size_t cap,
                      size_t *n);

/* ------------------------------------------------------------ diagnosis */
/* (section owned by diagnose.c) */

/* ------------------------------------------------------- collision window */
/* (section owned by window.c) */

/* ---------------------------------------------------------- C programs */
/* (section owned by cprog.c: threads as small state machines over shared
 * cells, for the soundness tests and the classic DPOR benchmarks) */

#ifdef __cplusplus
}
#endif

#endif /* CHAOSSLOTH_H */
