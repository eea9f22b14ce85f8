/*
 * bridge.h -- what the files of the CPython extension (chaossloth._core)
 * share.  The extension is the only place where the engine meets Python; it
 * uses the engine only through its public header, include/chaossloth.h.
 *
 *   module.c      module init; cs_py_check: the one place engine status
 *                 codes become Python exceptions; the exploration slot
 *   compat.c      everything that depends on the CPython version (compat.h)
 *   loop.c        LoopCore: ready queue, timer heap, virtual clock, dispatch
 *   handle.c      Handle / TimerHandle (loop.h: what loop.c and handle.c share)
 *   hooks.c       access hooks called by instrumented user code
 *   explorer.c    Explorer: thin wrapper of cs_explorer for Python drivers
 *
 * Each file exposes one registration function called from module init.
 */
#ifndef CS_BRIDGE_H
#define CS_BRIDGE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "chaossloth.h"

/* Module state (process-wide, see module.c): exception types shared by all
 * files. */
extern PyObject *cs_EngineError;   /* base: chaossloth._core.EngineError */
extern PyObject *cs_DivergedError; /* schedule diverged */
extern PyObject *cs_BudgetError;   /* step budget exhausted */
extern PyObject *cs_BlockedError;  /* dpor: execution redundant */
extern PyObject *cs_CompatError;   /* an interpreter whose layouts do not match */
extern PyObject *cs_ExplorationActiveError; /* a second exploration in the process */

/* Returns 0 if status is CS_OK; otherwise sets the matching Python exception
 * (MemoryError for CS_ENOMEM) and returns -1. */
int cs_py_check(int status);

/* module.c: one exploration per process.  `owner` (a LoopCore, or the hooks'
 * own token for hooks_attach) claims the slot for `explorer` (an Explorer
 * object): the hooks then record into it and the slot keeps it alive.
 * Claiming again by the same owner for the same explorer keeps the hooks'
 * state; a different owner while the slot is held raises
 * ExplorationActiveError naming the holder (`owner_obj`'s repr, or "the
 * hooks" when NULL).  Release by a non-holder is a no-op. */
int cs_exploration_claim(const void *owner, PyObject *owner_obj, PyObject *explorer);
void cs_exploration_release(const void *owner);
int cs_exploration_owned_by(const void *owner);

/* explorer.c: the cs_explorer behind a chaossloth._core.Explorer object, or
 * NULL with TypeError set. */
cs_explorer *cs_py_explorer_get(PyObject *obj);

/* hooks.c: the explorer that access hooks record into while a controlled
 * loop runs a step (NULL: hooks are no-ops).  Set only through
 * cs_exploration_claim / cs_exploration_release; hooks record only while a
 * step is open. */
void cs_hooks_set_explorer(cs_explorer *ex);
cs_explorer *cs_hooks_get_explorer(void);
/* hooks.c: records an access of a whole object under the hooks' canonical id (the same id
 * instrumented code and capture/sync.py use for it); naming it never extends its life beyond
 * what the program observes (hooks.c, "object lifetimes").
 * 0 when nothing is recorded (no explorer, no open step), -1 with an exception. */
int cs_hooks_record_object(PyObject *obj, int kind);
/* What _core.record(obj, kind, site) records (a whole-object access at a site id, kind
 * possibly or-ed with CS_ID_CREATED): for recording.c's methods. */
int cs_hooks_record_at(PyObject *obj, int kind, PyObject *site);
/* The access of a task that its own step makes inside the C Task, where no recording method
 * sees it: a read of its state key when the step begins (whether it is done, cancelled, what
 * it waits for), its completion (cs_hooks_record_completion) when the step completes it; at
 * the sites set_task_sites names. */
int cs_hooks_record_task(PyObject *task, int kind);
/* At the start of a step of `task`: the frames of its await chain that run code which neither
 * records itself nor is modelled, written as their calls were (hooks.c, "coroutines of code that
 * does not record itself, resumed across steps"). */
int cs_hooks_record_resumed(PyObject *task);
/* A future's completion (its result, exception or cancellation set): a write of each of its
 * state keys and of its callbacks (set_future_keys; without them a write of the whole
 * future).  A registration of a task's wake-up (cs_hooks_record_registration) is an add to
 * the callbacks: registrations commute with each other, not with the completion (see
 * capture/sync.py, RecordingFuture). */
int cs_hooks_record_completion(PyObject *fut, PyObject *site);
int cs_hooks_record_registration(PyObject *fut, PyObject *site);
/* A read of the future's state key (done(), result(), ...: they observe its state, not its
 * callbacks), which a completion writes (without state keys, of the whole future). */
int cs_hooks_record_state_read(PyObject *fut, PyObject *site);
/* The same on (obj, key): key as the hooks name subscripts (a str is a key,
 * an object of a user type the whole object). */
int cs_hooks_record_key(PyObject *obj, PyObject *key, int kind);
/* hooks.c: the step-end release of the objects the hooks hold (not weak-referenceable) and only
 * they still reference; called while the step is open, so the finalizers it runs are accesses of
 * that step.  0, or -1 with an exception. */
int cs_hooks_sweep(void);
/* While set (loop.c, a gather() callback's step), record() drops plain reads: see
 * record_shared_state. */
extern int cs_hooks_quiet_reads;
/* hooks.c: the note (cs_step_note) of an actor the open step starts: a task (its coroutine's
 * code and frame values) or a callback with its arguments (task NULL).  0, or -1 with an
 * exception. */
int cs_hooks_actor_note(PyObject *task, PyObject *callback, PyObject *args, uint64_t *out);

/* loop.c: the actor of the step a LoopCore is running on this thread: 1 with *out set, 0 when
 * no LoopCore's steps run on this thread or no actor's step is open.  What
 * asyncio.events._get_running_loop()._cs_actor tells while a controlled loop runs its steps,
 * without the call (nor its getpid()).  Never raises. */
int cs_loop_running_actor(cs_actor *out);
/* obj is a controlled loop's core (a ControlledLoop) */
int cs_loop_is_core(PyObject *obj);
/* loop.c: is the asyncio future done (its C done() unbound for a C Future, no record)?
 * 1, 0, or -1 with an exception. */
int cs_loop_future_is_done(PyObject *future);

/* recording.c: the end of a step's run (loop.c, explorer_step, before the step's own records
 * of its task): the awaits of the step that found a future pending and were not a task's
 * blocking await (no registration of its wake-up followed) are recorded as writes of the whole
 * future when `record` (they saw its state and left its blocking flag set), and forgotten.
 * 0, or -1 with an exception. */
int cs_recording_step_end(int record);
/* recording.c: is `f` a RecordingMethod (which records its call's access itself)? */
int cs_recording_is_method(PyObject *f);

int cs_register_handles(PyObject *module);
int cs_register_loop(PyObject *module);
int cs_register_hooks(PyObject *module);
int cs_register_explorer(PyObject *module);
int cs_register_snapshot(PyObject *module);
int cs_register_recording(PyObject *module);

#endif
