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
    /* Lock operations on a lock resource (object = the lock, key = any).
     * For dependency and happens-before both behave as writes (they conflict
     * with every overlapping access).  For DPOR races they follow Abdulla et
     * al. / Nidhugg: a release is never reversed with the acquisition that
     * follows it (the lock was held, so that order is infeasible); instead an
     * acquisition races with the previous acquisition of the same lock by
     * another actor.  Use them only where a step that acquires a lock can
     * run only while the lock is free (the actor is not enabled otherwise),
     * as in C programs; a front end whose waiters are woken by a completed
     * future (asyncio) records plain reads and writes plus scheduled_by. */
    CS_LOCK_ACQUIRE = 3,
    CS_LOCK_RELEASE = 4,
    /* A commutative update: it changes the resource, and any two CS_ADDs of
     * the same resource leave the same state and behave the same in either
     * order (a counter's increments whose step does not act on the value it
     * sees).  It conflicts with reads and writes of the resource, not with
     * other adds: happens-before orders it after the resource's last write
     * and the reads since, and every later read or write after it.  Keyed
     * resources only: with CS_KEY_WHOLE or CS_OBJECT_ALL it is CS_EINVAL.
     * Diagnosis treats it as neither a read nor a write (an add never forms
     * an atomicity-violation pattern with another add). */
    CS_ADD = 5,
} cs_access_kind;

/* Identity flags, or-ed into the kind given to cs_access_record.  They say
 * how the object id relates to other executions (see stable_objects); the
 * first access of an object in an execution decides.  Without a flag, and
 * unless cs_config.stable_objects, an id is only an address.
 *   CS_ID_STABLE  the id names the same object in every execution (a module,
 *                 a class, the loop's clock, the handle of a given actor).
 *   CS_ID_CREATED the object was created by the current step (this is its
 *                 first access): the engine names it by (actor, actor_step,
 *                 rank of the creation within the step), which is the same
 *                 in every execution where that step runs. */
#define CS_ID_STABLE 0x40
#define CS_ID_CREATED 0x80
/* Or-ed into CS_READ only: an enabling read.  The front end promises that
 * the step could not have run before any CS_ADD of the same resource made
 * earlier in the execution (a task woken when a future completes, the
 * completion decided by a counter of adds reaching its end: every add had to
 * come first, not only the one that completed it).  It is a read for
 * happens-before and dependency; DPOR and the causes never reverse it with
 * those adds (such a pair is no race, as for scheduled_by); its conflicts with
 * other accesses are ordinary races. */
#define CS_ENABLING 0x20
#define CS_KIND_MASK 0x1f

/* A resource is (object, key).  CS_KEY_WHOLE is the whole-object wildcard: it
 * overlaps every key of the same object.  Two accesses conflict when their
 * resources overlap and at least one of them is a write (an add: see
 * CS_ADD). */
#define CS_KEY_WHOLE UINT64_MAX

/* CS_OBJECT_ALL is the global barrier: an access of (CS_OBJECT_ALL, any key)
 * overlaps every resource of every object (and every other barrier access),
 * so as a write it conflicts with every access before and after it, and as
 * a read with every write.  Front ends record it where an operation can
 * touch state they cannot name (exec, eval, globals() mutation...): coarser
 * than any real access, never missing one.  Only CS_READ and CS_WRITE apply
 * (a lock kind is CS_EINVAL); the identity flags are ignored: the barrier is
 * the same in every execution, never an address.  Everything that reports
 * dependency (happens-before, cs_trace_dependent, DPOR races, POS, the
 * trace fingerprint) sees it; diagnosis never names it as the resource of
 * a finding (see cs_diagnose). */
#define CS_OBJECT_ALL UINT64_MAX

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
    CS_STRATEGY_GUIDED = 7,     /* a recorded actor sequence as a guide: its
                                   next enabled actor, else the default; never
                                   diverges (strategy_guided.c) */
} cs_strategy_kind;

/* Name <-> kind ("fifo", "random", "replay", "pct", "pos", "dpor",
 * "exhaustive", "guided").  cs_strategy_from_name returns -1 for an unknown
 * name. */
const char *cs_strategy_name(cs_strategy_kind kind);
int cs_strategy_from_name(const char *name);

typedef struct {
    cs_strategy_kind kind;
    uint64_t seed;            /* random, pct, pos */
    uint32_t pct_depth;       /* pct: bug depth d (>= 1); default 3 */
    uint32_t pct_steps_hint;  /* pct: estimate of steps per execution (k) */
    const cs_actor *replay;   /* replay, guided: the actor sequence (copied) */
    size_t replay_len;
    uint64_t max_executions;  /* 0 = no limit */
    uint64_t max_steps;       /* per execution; 0 = no limit */
    double time_limit;        /* seconds of wall time; 0 = no limit */
    int count_traces;         /* 1: fingerprint each execution to count
                                 distinct Mazurkiewicz traces */
    int stable_objects;       /* 1: an object id names the same object in
                                 every execution (C programs).  0 (default):
                                 ids are addresses, meaningful within one
                                 execution only; the engine then names each
                                 object by its first access, and compares
                                 objects of different executions only where
                                 their common prefix makes the names agree
                                 (see strategy_dpor.c) */
    /* random, pct, pos: this explorer's execution i draws random stream
     * i * shard_count + shard_index (count 0 or 1: stream i), so shards
     * 0..count-1 of one seed together draw the streams a single explorer
     * would (pct's change points also follow the longest execution each
     * shard has seen).  shard_index < max(1, shard_count). */
    uint32_t shard_index;
    uint32_t shard_count;
    uint64_t exact_traces;    /* count_traces: distinct fingerprints counted
                                 exactly up to this many (0: the default,
                                 CS_EXACT_TRACES), then estimated by a
                                 fixed-size HyperLogLog sketch (64 KB, 0.4%
                                 standard error): cs_stats.traces_estimated */
    int fixed_step_accesses;  /* 1: a step's accesses never depend on the
                                 values it reads from other steps, only on
                                 its own actor's earlier steps (C programs:
                                 one shared access per step, whose kind
                                 never depends on a value).  0 (default): a
                                 step may branch on what it read (a Python
                                 step runs arbitrary code), so when DPOR
                                 reverses a race whose later step read what
                                 the earlier one wrote, it does not predict
                                 that step's accesses from its previous run:
                                 it treats it as dependent on everything
                                 before it (sound; costs executions) */
} cs_config;

/* The default of cs_config.exact_traces: 2^16 = 65,536 fingerprints (a 1 MB
 * table at most) before the distinct-trace count becomes an estimate, so a
 * run of hundreds of thousands of distinct executions keeps a flat RSS. */
#define CS_EXACT_TRACES ((uint64_t)1 << 16)

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
 * CS_AFTER_ALL: the step was made runnable by the latest clock advance (see
 * cs_clock_advance), so it happens after every step recorded before that
 * advance -- and only those: steps that ran after the advance may still be
 * reordered with it.  Without any advance recorded, CS_AFTER_ALL means after
 * every earlier step.  Between begin and end the front end reports accesses. */
#define CS_SCHEDULED_BY_NONE ((int64_t)-1)
#define CS_AFTER_ALL ((int64_t)-2)
int cs_step_begin(cs_explorer *ex, cs_actor actor, int64_t scheduled_by);
/* The front end advanced its virtual clock because nothing else could run
 * (strict timer mode): the timers this made due run with CS_AFTER_ALL.  Call
 * it between steps. */
int cs_clock_advance(cs_explorer *ex);
/* cs_step_begin for a step made runnable at the point where the trace had
 * `prefix` events (<= its length) and by nothing later: it happens after
 * every event before that point, and only those, whatever barriers were
 * recorded since; its scheduled_by reads CS_AFTER_ALL.  A timer made due by
 * a clock advance that runs after a later barrier, or a step the front end
 * made runnable between steps (a task it cancelled after the run's end: its
 * decision read the state every earlier step left). */
int cs_step_begin_after(cs_explorer *ex, cs_actor actor, size_t prefix);
int cs_access_record(cs_explorer *ex, uint64_t object, uint64_t key,
                     cs_access_kind kind, uint32_t site);
/* The number of accesses the open step has recorded so far. */
int cs_step_access_count(const cs_explorer *ex, size_t *count);
/* Drops the accesses the open step recorded after its first `keep` when a
 * global barrier of `kind` (CS_READ or CS_WRITE, on CS_OBJECT_ALL) covers
 * every one of them: a CS_READ barrier covers plain reads, a CS_WRITE one
 * reads, writes and adds; neither covers an enabling read or a lock
 * operation.  *dropped is 1 when they were dropped, 0 when one is not
 * covered (nothing changed).  The caller records the barrier itself: a front
 * end whose walk of an object graph gave up midway keeps the barrier alone,
 * not the part of the graph its traversal order happened to reach first. */
int cs_step_rewind(cs_explorer *ex, size_t keep, cs_access_kind kind, int *dropped);
/* Mixes `note` into the open step's note (cs_event.note; order matters):
 * what the step did that is not an access -- the work it started (a task's
 * coroutine and arguments, a callback) -- so that a strategy replaying the
 * step can tell that it did something else than before (DPOR does: see
 * cs_divergence_detail).  Equal work must give equal notes in every
 * execution; anything that may differ between executions (addresses) must
 * stay out of it. */
int cs_step_note(cs_explorer *ex, uint64_t note);
int cs_step_end(cs_explorer *ex);

/* Outcome flags of an execution, as judged by the front end's oracles. */
enum {
    CS_OUTCOME_OK = 0,
    CS_OUTCOME_FAILED = 1,   /* an oracle failed */
    CS_OUTCOME_ABORTED = 2,  /* diverged, budget, or internal error: the
                                execution says nothing about the program */
};
/* With cs_config.count_traces and an outcome that is not ABORTED, the trace
 * is fingerprinted first: CS_ENOMEM then leaves the execution open (end it
 * again, or as CS_OUTCOME_ABORTED, which needs no fingerprint). */
int cs_execution_end(cs_explorer *ex, int outcome);

/* Where replay (or DPOR's prescribed prefix) diverged in the last execution:
 * the step index, the actor that was expected and how many were enabled.
 * Returns CS_ESTATE if nothing diverged. */
int cs_divergence(const cs_explorer *ex, size_t *step, cs_actor *expected,
                  size_t *n_enabled);

/* How an execution diverged:
 *   NOT_ENABLED: the prescribed actor could not run (cs_choose);
 *   CHANGED: DPOR replayed a step after the same steps as in an earlier
 *     execution, and it made other accesses, was scheduled by another step,
 *     or carries another note (cs_step_note) than it did then.  The
 *     program does not behave the same under the same schedule, so what
 *     was explored so far may not be what will run: the exploration cannot
 *     be complete.  cs_divergence's `step` is the replayed step (ended: it
 *     is in the trace), `expected` its actor, `n_enabled` 0. */
typedef enum { CS_DIVERGED_NOT_ENABLED = 0, CS_DIVERGED_CHANGED = 1 } cs_divergence_kind;

/* The kind of the last divergence and, for CHANGED, an access that differs
 * (*has_access = 1): one the step made now and not before (*missing = 0, an
 * access of the trace), or one it made before and not now (*missing = 1:
 * its key and kind as recorded then, site 0, and its object id if it was
 * named by its id (CS_ID_STABLE or CS_OBJECT_ALL), else 0).
 * *has_access = 0 when only the scheduling step or the note differs.
 * Returns CS_ESTATE if nothing diverged. */
int cs_divergence_detail(const cs_explorer *ex, cs_divergence_kind *kind, int *has_access,
                         cs_access *access, int *missing);

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
    uint64_t guide_deviations; /* guided: steps that did not run the actor at
                                  the schedule's cursor (strategy_guided.c);
                                  0 for every other strategy */
    int traces_estimated;     /* 1: distinct_traces is a HyperLogLog estimate
                                 (more than cs_config.exact_traces distinct
                                 fingerprints were seen); 0: exact */
} cs_stats;

void cs_explorer_stats(const cs_explorer *ex, cs_stats *out);

/* ------------------------------------------------ sharing DPOR's tree */
/* A dpor exploration split across processes (--jobs): between two
 * executions, a process (the giver) offers a pending branch of a shallow
 * position of its wakeup tree; a fork of it (the taker) takes that branch
 * and explores its subtree only, while the giver goes on without it.  What
 * the taker finds that reverses above its branch comes back as reports,
 * which the giver imports; the giver does not backtrack above a position
 * whose given branches are not all done.  Every subtree is explored by one
 * process, and the exploration is complete when every process's part is.
 * Each call needs a dpor explorer between executions (else CS_EINVAL /
 * CS_ESTATE); strategy_dpor.c states the argument.
 *
 *   offer: *found = 1 and the shallowest position with a branch to give;
 *   give (giver, after the fork): that branch is the taker's now; *token
 *     names it for done;
 *   take (taker, right after the fork): only that branch is left here;
 *   reports (taker, any time): the reports so far, a byte string valid
 *     until the next call on ex; reports_clear drops them once sent;
 *   import (giver): a taker's reports, its actor ids mapped to the giver's
 *     (map[taker id], n_map = the taker's actor count);
 *   done (giver): the branch given at `position` as `token` has reported
 *     its last;
 *   waiting: *waiting = 1 when backtracking stopped at a held position
 *     (cs_execution_begin then fails with CS_ESTATE); resume goes on once its
 *     branches are done and their reports imported. */
int cs_share_offer(cs_explorer *ex, size_t *position, int *found);
int cs_share_give(cs_explorer *ex, size_t position, size_t *token);
int cs_share_take(cs_explorer *ex, size_t position);
int cs_share_reports(cs_explorer *ex, const uint8_t **buf, size_t *len);
int cs_share_reports_clear(cs_explorer *ex);
int cs_share_import(cs_explorer *ex, const uint8_t *buf, size_t len, const cs_actor *map,
                    size_t n_map);
int cs_share_done(cs_explorer *ex, size_t position, size_t token);
int cs_share_waiting(cs_explorer *ex, size_t *position, int *waiting);
int cs_share_resume(cs_explorer *ex);

/* ----------------------------------------------- the current execution */
/* Read access to what the current (or just ended) execution recorded. */

typedef struct {
    cs_actor actor;
    uint32_t actor_step;     /* this is the actor's n-th step (0-based) */
    int64_t scheduled_by;    /* event index, or -1 */
    uint32_t first_access;   /* index into the execution's access array */
    uint32_t n_accesses;
    uint64_t note;           /* cs_step_note's mix of the step's notes; 0: none */
} cs_event;

size_t cs_trace_length(const cs_explorer *ex);
int cs_trace_event(const cs_explorer *ex, size_t index, cs_event *out);
int cs_trace_access(const cs_explorer *ex, size_t access_index,
                    cs_access *out);
/* The CS_ID_* and CS_ENABLING flags an access was recorded with. */
int cs_trace_access_flags(const cs_explorer *ex, size_t access_index,
                          uint8_t *flags);
/* Vector clock of an event: `*len` entries indexed by actor id (entries past
 * *len are 0), built on demand into a buffer the explorer owns (the engine
 * keeps clocks over chains of events internally), hence the non-const
 * explorer.  The pointer stays valid until the next cs_trace_clock call,
 * step, or reset of the execution. */
int cs_trace_clock(cs_explorer *ex, size_t index, const uint32_t **clock,
                   size_t *len);
/* 1 if event a happens before event b (a != b), else 0. */
int cs_trace_happens_before(const cs_explorer *ex, size_t a, size_t b);

/* A copy of the current execution's happens-before that outlives it (the
 * explorer may run other executions, or be freed): the actor-indexed clock
 * of any event, entry by entry, in O(log(steps of the actor) * depth) each,
 * for O(events + clock nodes) memory where materialising every event's
 * clock would take O(events * actors).  cs_hb_view_clock gives entry
 * `actor` of cs_trace_clock(index) as it was (0 past its length);
 * cs_hb_view_clock_len its length. */
typedef struct cs_hb_view cs_hb_view;
int cs_trace_hb_view(const cs_explorer *ex, cs_hb_view **out);
void cs_hb_view_free(cs_hb_view *view);
size_t cs_hb_view_length(const cs_hb_view *view);
size_t cs_hb_view_clock_len(const cs_hb_view *view, size_t index);
int cs_hb_view_clock(const cs_hb_view *view, size_t index, cs_actor actor,
                     uint32_t *value);
int cs_hb_view_happens_before(const cs_hb_view *view, size_t a, size_t b);
/* 1 if events a and b are dependent (same actor, scheduled_by edge, or
 * conflicting accesses, the barrier CS_OBJECT_ALL included), else 0. */
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

/* Hazards found in the trace of a failing execution.  The four AVIO
 * unserializable interleavings (Lu, Tucek, Qin, Zhou, ASPLOS 2006) of a local
 * pair p, c (one actor, two different steps, so an await lies between them)
 * and a remote access r (another actor) between them in trace order, plus
 * the order violation defined in diagnose.c. */
typedef enum {
    CS_HAZARD_LOST_UPDATE = 1,    /* R-W-W: local read, remote write, local write */
    CS_HAZARD_STALE_READ = 2,     /* R-W-R: check-then-act, non-repeatable read */
    CS_HAZARD_DIRTY_READ = 3,     /* W-R-W: remote read of an intermediate value */
    CS_HAZARD_OVERWRITTEN = 4,    /* W-W-R: local read of an overwritten value */
    CS_HAZARD_ORDER_VIOLATION = 5 /* remote write overtook a read (diagnose.c) */
} cs_hazard_kind;

#define CS_NO_INDEX ((size_t)-1)

typedef struct {
    int kind;               /* cs_hazard_kind */
    cs_actor local_actor;   /* actor of p and c */
    cs_actor remote_actor;  /* actor of r */
    size_t p_event, r_event, c_event; /* event indices, p < r < c */
    size_t p_access, r_access, c_access; /* indices into the trace's access
                                            array (CS_NO_INDEX: none) */
    uint64_t object;        /* the shared resource */
    uint64_t key;           /* the most specific key of p, r, c */
} cs_finding;

/* Static name of a hazard kind ("lost_update", "stale_read", "dirty_read",
 * "overwritten_read", "order_violation"; "unknown"). */
const char *cs_hazard_name(int kind);
/* AVIO code of a hazard kind ("R-W-W", ...; "order" for order violations). */
const char *cs_hazard_pattern(int kind);

/* Finds the hazards of the explorer's current (or last) execution, ranked:
 * lost updates and stale reads first, then the other kinds; within a class,
 * the shortest interval (c_event - p_event) first, then by c_event.  Objects
 * listed in `ignore` (e.g. synchronisation primitives, whose intermediate
 * states are meant to be seen) are skipped.  Writes the first `cap`
 * findings to `out` and the total count to *n. */
int cs_diagnose(const cs_explorer *ex, const uint64_t *ignore, size_t n_ignore,
                cs_finding *out, size_t cap, size_t *n);

/* Deadlock: one cycle in a wait-for graph given as edges
 * waiter -> (resource) -> holder.  Writes the indices of the edges of one
 * cycle, in cycle order starting from the edge of smallest index that lies
 * on a found cycle, to `cycle` (up to cap) and its length to *len; *len = 0
 * when the graph has no cycle.  Deterministic for a given edge list. */
typedef struct {
    cs_actor waiter;
    uint64_t resource;
    cs_actor holder;
} cs_wait_edge;
int cs_wait_for_cycle(const cs_wait_edge *edges, size_t n, size_t *cycle,
                      size_t cap, size_t *len);

/* --------------------------------------------------------------- causes */
/* (section owned by causes.c) */

/* A race of the current execution: events first < second of different
 * actors, `first` an immediate happens-before predecessor of `second` that
 * neither woke it nor precedes its clock-advance barrier (causes.c). */
typedef struct {
    size_t first, second;
} cs_race;

/* The races of the current (or last) execution, sorted by (second, first):
 * writes the first `cap` to `out` and the total count to *n. */
int cs_trace_races(const cs_explorer *ex, cs_race *out, size_t cap, size_t *n);

/* The schedule (an actor per step) that reverses race (i, j): events before
 * i as recorded, the events between that do not happen after i, j, i, then
 * the rest as recorded (causes.c).  Sets *n to the trace length and writes
 * only when cap >= *n.  CS_EINVAL unless i < j < trace length. */
int cs_trace_reversal(const cs_explorer *ex, size_t i, size_t j, cs_actor *out, size_t cap,
                      size_t *n);

/* ------------------------------------------------------- collision window */
/* (section owned by window.c) */

/* Bayesian estimate of the collision window from real-loop telemetry: n
 * pairs (offset >= 0 seconds between the starts of two conflicting calls,
 * failed 0/1).  The model is documented at the top of window.c. */
typedef struct {
    double w_min, w_max;   /* support of the log-uniform prior on w (s) */
    double eps_a, eps_b;   /* Beta prior of the noise eps (restricted to
                              eps < 1/2) */
    uint32_t grid;         /* log-spaced grid points for w (>= 16) */
    uint32_t eps_grid;     /* grid points for eps (>= 4) */
} cs_window_prior;

/* Defaults: w in [1e-7, 10] s, eps ~ Beta(1, 9), 2000 x 64 grid. */
void cs_window_prior_init(cs_window_prior *prior);

typedef struct {
    double median, mean;   /* posterior median and mean of w (s) */
    double lo, hi;         /* 95% equal-tailed credible interval of w */
    double eps_mean;       /* posterior mean of the noise */
    uint64_t n, failures;  /* the telemetry summarised */
} cs_window_summary;

typedef struct cs_window cs_window;

/* Fits the posterior.  offsets must be finite and >= 0, failed[i] 0 or 1;
 * prior NULL = defaults.  CS_EINVAL on bad input. */
int cs_window_fit(const double *offsets, const uint8_t *failed, size_t n,
                  const cs_window_prior *prior, cs_window **out);
void cs_window_free(cs_window *w);
void cs_window_get_summary(const cs_window *w, cs_window_summary *out);
/* Posterior predictive P(fail | offset) = E[offset < w ? 1 - eps : eps]. */
double cs_window_p_fail(const cs_window *w, double offset);

/* Natural failure rate: posterior Beta(1 + f, 1 + n - f) of f failures in
 * n runs (uniform prior): its mean and 95% equal-tailed interval. */
typedef struct {
    double mean, lo, hi;
} cs_rate_summary;
int cs_rate_estimate(uint64_t failures, uint64_t runs, cs_rate_summary *out);
/* Regularised incomplete beta I_x(a, b) and its inverse in x (a, b > 0). */
double cs_beta_cdf(double x, double a, double b);
double cs_beta_quantile(double q, double a, double b);

/* ---------------------------------------------------------- C programs */
/* (section owned by cprog.c: threads as small state machines over shared
 * cells, for the soundness tests and the classic DPOR benchmarks) */

/* A C program: threads, each a small instruction list, over shared integer
 * cells and non-reentrant locks.  A *step* is one visible operation (LOAD,
 * STORE, CAS, FADD, LOCK, UNLOCK, BARRIER, BARRIER_READ); local operations (SET, arithmetic, jumps,
 * ASSERT) run eagerly right after the step that precedes them (and before a
 * thread's first step), so they never add interleavings.
 *
 * Registers are numbered 1..CS_CPROG_REGS; 0 means "none".  An operand is
 * the register b_reg/c_reg when non-zero, else the immediate b_imm/c_imm.
 * A memory address is base + (a ? r[a] : 0), checked against n_cells.
 *
 * Actors: thread i is cs_actor_intern(ex, CS_NO_ACTOR, i); every step has
 * scheduled_by = CS_SCHEDULED_BY_NONE.  Accesses: cell c is (object 1, key c);
 * lock l is (object 2, key l).  A CAS is a write whether or not it succeeds
 * (an event's accesses must not depend on the values it reads: DPOR predicts
 * a reversed event from its previous run); LOCK/UNLOCK are
 * CS_LOCK_ACQUIRE/CS_LOCK_RELEASE; BARRIER and BARRIER_READ are a write and
 * a read of (CS_OBJECT_ALL, 0), the global barrier.  A thread whose
 * next operation is LOCK of a held lock is not enabled. */
#define CS_CPROG_REGS 8

typedef enum {
    /* visible: one step each */
    CS_OP_LOAD = 1, /* r[dst] = cell[addr] */
    CS_OP_STORE,    /* cell[addr] = B */
    CS_OP_CAS,      /* cell[addr] == B ? (cell[addr] = C, r[dst] = 1) : r[dst] = 0 */
    CS_OP_FADD,     /* r[dst] = cell[addr]; cell[addr] += B */
    CS_OP_LOCK,     /* acquire lock base + (a ? r[a] : 0) (blocks while held) */
    CS_OP_UNLOCK,   /* release that lock (must be held by this thread) */
    /* local */
    CS_OP_SET,      /* r[dst] = B */
    CS_OP_ADD,      /* r[dst] = r[a] + B */
    CS_OP_SUB,      /* r[dst] = r[a] - B */
    CS_OP_MUL,      /* r[dst] = r[a] * B */
    CS_OP_MOD,      /* r[dst] = r[a] mod B (B > 0; result in [0, B)) */
    CS_OP_JMP,      /* goto target */
    CS_OP_JEQ,      /* if r[a] == B goto target */
    CS_OP_JNE,      /* if r[a] != B goto target */
    CS_OP_JLT,      /* if r[a] <  B goto target */
    CS_OP_JGE,      /* if r[a] >= B goto target */
    CS_OP_ASSERT,   /* if r[a] != B the execution fails (the thread stops) */
    /* visible (numbered after the others, which keep their values) */
    CS_OP_BARRIER,      /* touches every cell: r[dst] = sum of cell[c] * (c + 1)
                           over all cells (dst 0: not kept), then every cell
                           += B; recorded as a write of CS_OBJECT_ALL */
    CS_OP_BARRIER_READ, /* r[dst] = that sum; a read of CS_OBJECT_ALL */
    CS_OP_INC,          /* cell[addr] += B, the value unseen: a CS_ADD */
} cs_cprog_opcode;

typedef struct {
    uint8_t op;     /* cs_cprog_opcode */
    uint8_t dst;    /* destination register (1..CS_CPROG_REGS) */
    uint8_t a;      /* register operand / address index register, 0 = none */
    uint8_t b_reg;  /* operand B: register, or 0 for b_imm */
    uint8_t c_reg;  /* operand C: register, or 0 for c_imm */
    int32_t base;   /* memory: first cell; LOCK/UNLOCK: first lock id */
    int32_t target; /* jumps: instruction index (== len ends the thread) */
    int64_t b_imm, c_imm;
} cs_cprog_instr;

typedef struct {
    const cs_cprog_instr *code;
    size_t len;
} cs_cprog_thread;

typedef struct {
    size_t n_cells;
    const int64_t *init; /* n_cells initial values, or NULL for zeros */
    size_t n_locks;
    size_t n_threads;
    const cs_cprog_thread *threads;
    uint64_t max_local_ops; /* per step, to catch local infinite loops;
                               0 = 1000000 */
    int address_ids;        /* testing: give every cell and lock a fresh
                               object id in each execution, as allocation
                               addresses would be (and no stable_objects),
                               to exercise the engine's naming of objects
                               across executions */
    /* testing (the shared-tree tests): called with `hook_arg` before each
     * execution begins (a non-zero return ends the exploration with that
     * status) and once when it is over, before the explorer is freed */
    int (*between)(void *hook_arg, cs_explorer *ex);
    void (*at_end)(void *hook_arg, cs_explorer *ex);
    void *hook_arg;
} cs_cprog;

typedef struct {
    cs_stats stats;         /* the explorer's statistics at the end */
    uint64_t deadlocks;     /* executions where no thread was enabled while
                               some had not finished */
    uint64_t assert_failed; /* executions where an ASSERT failed */
    uint64_t diverged;      /* executions the strategy reported diverged */
    uint64_t budget;        /* executions cut by the step budget */
    double seconds;         /* wall time of the exploration */
    size_t n_finals;        /* distinct final states (sorted hashes of the
                               cells, every thread's registers and pc, of
                               executions not aborted) */
    uint64_t *finals;
} cs_cprog_result;

/* Runs `prog` under a fresh explorer built from `cfg`, through the public
 * API, until the strategy says the exploration is over.  Returns CS_EINVAL
 * for a malformed program (bad register, address, lock, jump) or a runtime
 * error of the program (address out of range, unlock of a lock not held,
 * too many local operations).  Free the result with cs_cprog_result_free. */
int cs_cprog_explore(const cs_cprog *prog, const cs_config *cfg,
                     cs_cprog_result *out);
void cs_cprog_result_free(cs_cprog_result *r);

#ifdef __cplusplus
}
#endif

#endif /* CHAOSSLOTH_H */
