/*
 * loop.c -- chaossloth._core.LoopCore, the C base of ControlledLoop (the
 * Handle / TimerHandle objects it returns are in handle.c; what depends on
 * the CPython version is in compat.c).
 *
 * LoopCore owns the ready queue, the timer heap, the virtual clock and the
 * dispatch loop (the body of run_forever).  Everything that is not on the
 * per-step path lives in Python (src/chaossloth/loop.py).
 *
 * Invariants
 *   - Order (no explorer, or an explorer whose strategy picks index 0):
 *     identical to BaseEventLoop._run_once (the same in CPython 3.11,
 *     3.12 and 3.13; tested side by side on each).  An iteration
 *     drops cancelled timers from the heap head (or rebuilds the heap when
 *     more than 100 timers are scheduled and over half are cancelled), moves
 *     the due timers to the tail of the ready queue in heap-pop order, then
 *     runs exactly the handles that were ready at its start.  The heap uses
 *     heapq's own sift algorithms comparing `when` with a strict <, so equal
 *     deadlines pop in exactly the order stock asyncio pops them.
 *   - Virtual time: the clock moves at an iteration boundary where nothing
 *     is ready and stop() was not called, to the earliest deadline; and when
 *     a task busy-polls (busy_poll_check: POLL_LIMIT consecutive bare yields
 *     of one task while a timer is pending), to the earliest pending
 *     deadline, at the end of that task's step.  A timer is due when
 *     !(when > now) (timer_due): a NaN deadline is due at once, as on the
 *     stock loop, whose `when >= end_time` test is false for NaN (3.13's
 *     loop crashes when it must wait for a NaN deadline with nothing
 *     ready: boundary raises the same ValueError, CS_SELECT_REFUSES_NAN).  A timer
 *     at +inf never fires (timer_never): the clock never advances to it,
 *     relaxed mode never offers it, and a loop with nothing else to run is
 *     idle (a deadlock), where the stock loop would wait forever.
 *   - Every queued handle holds one strong reference from the queue or heap;
 *     handles are released only after the queue or heap is consistent again,
 *     because releasing one may run arbitrary finalizers that schedule more.
 *   - Explorer attached: each step is cs_choose -> cs_step_begin (a
 *     CS_AFTER_ALL handle: cs_step_begin_after, with the trace's length when
 *     it became runnable) -> run -> cs_step_end.  The enabled list is the ready queue in stock order (one
 *     entry per actor, its first handle), then the timers that may fire now
 *     (strict: the due ones not yet moved; relaxed: every pending one),
 *     ordered by (when, insertion).  The stock iteration structure (batches)
 *     is kept so that index 0 always reproduces the stock order.
 *   - Actor identity: a task's steps (cs_compat_task_of_step: the C Task's
 *     step wrapper and wakeup builtin, the Python Task's __step / __wakeup)
 *     belong to the task's actor, interned from (current actor, k) at its first
 *     call_soon.  The non-task call_soon callbacks queued by one step form
 *     ONE actor, a *chain*, interned from (current actor, k) at the first of
 *     them: asyncio documents that call_soon callbacks run in registration
 *     order, and a chain's handles sit in the ready queue in that order, so
 *     offering only an actor's first handle keeps them FIFO, and program
 *     order gives the happens-before edge (DPOR never tries to reverse them;
 *     a cancelled member is purged and the next one becomes the chain's next
 *     step).  Task steps stay free to interleave (the model of I/O latency);
 *     chains that one actor's steps started stay FIFO among themselves, chains
 *     that different actors' steps started interleave, and a busy-polling task
 *     waits for what was ready when it yielded ("FIFO and fairness", before
 *     explorer_step).  Each timer (call_at /
 *     call_later) gets an actor of its own, interned the same way.  k counts
 *     the creations of the current actor in this execution.
 *
 * Map (the banners below, in file order)
 *   asyncio pieces ....... import_asyncio: what the loop and handles call
 *   helpers .............. grow, record (the loop's own accesses)
 *   ready queue .......... ring buffer of handles: push, pop, remove
 *   timer heap ........... heapq's sift algorithms over TimerHandles
 *   actors ............... task/callback actor identity, new_handle, run one handle
 *   LoopCore ............. creation, GC, call_soon / call_at / call_later, time
 *   dispatch ............. iteration boundary, fifo loop, what a step records
 *   FIFO and fairness .... chains behind chains, parked pollers; explorer loop, run_steps
 *   explorer API ......... attach / detach (the exploration slot), introspection
 *   type ................. getters, members, methods, LoopCoreType, registration
 */
#include "compat.h"
#include "loop.h"

#include <assert.h>

#include <structmember.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Resource identities of the loop's own accesses.  A handle is named by its
 * actor, not its address: the name is stable across executions (strategies
 * compare accesses of different executions) and a freed handle's address
 * reused by a later one never makes them conflict.  The steps of one task
 * share the name, which only relates steps already ordered by the task.  The
 * tag keeps these apart from object addresses (user space is below 2^48). */
#define HANDLE_TAG 0xC5A0000000000000ULL
#define CLOCK_OBJECT 0xC5A1000000000000ULL
/* The timer heap as a whole: every heap operation (call_at/call_later, a
 * timer's cancel, a timer's step) reads it; a busy-poll check, whose decision
 * depends on the whole heap, writes it (see busy_poll_check). */
#define TIMERS_OBJECT 0xC5A2000000000000ULL
/* A chain that later chains follow (call_soon FIFO): each of its steps adds to
 * CHAIN_TAG | actor, and a follower's first step reads it, enabling. */
#define CHAIN_TAG 0xC5A3000000000000ULL
/* A parked poller's wait (fair polls): each step of an actor it waits for adds
 * to PARK_TAG | poller, and the poller's next step reads it, enabling. */
#define PARK_TAG 0xC5A4000000000000ULL

/* Busy-poll clock: consecutive bare yields of one task (asyncio.sleep(0))
 * after which the clock advances to the earliest pending deadline.  A real
 * loop spends ~5-50 us per such iteration, so 1000 of them is well under the
 * shortest timeouts programs commonly use (>= 0.1 s): a short busy
 * computation that yields fewer than 1000 times in a row never sees a long
 * timeout expire, while a poll loop waiting for a timer still ends within the
 * default step budget (10000).  Settable per loop (_cs_poll_limit). */
#define POLL_LIMIT 1000
/* create_task's list of weak references is pruned of dead ones when it grows past twice the
 * live ones found at the last pruning, and never below this */
#define CREATED_MIN_PRUNE 64

/* Stock BaseEventLoop constants. */
#define MIN_SCHEDULED_TIMER_HANDLES 100
#define MIN_CANCELLED_TIMER_HANDLES_FRACTION 0.5

/* RUN_EXTERNAL: nothing is ready and another thread may make something ready (see "External
 * events"): the front end waits for it, delivers what it sent, and runs the loop again. */
enum { RUN_STOPPED = 0, RUN_IDLE = 1, RUN_EXTERNAL = 3 };

typedef struct LoopCoreObject LoopCoreObject;


/* One follow: the FIFO entry (chain or starter) `a`, followed by a wake at event `ev`. */
typedef struct {
    cs_actor a;
    int64_t ev;
} fifo_follow;

/* The FIFO entries one event registered: self->chains[lo, hi), with the indices of the last
 * chain and the last starter among them (-1: none). */
typedef struct {
    int64_t start;
    size_t lo, hi;
    Py_ssize_t last_chain, last_starter;
} fifo_group;

typedef struct {
    PyObject *ref;  /* task actor: weakref to the task; callback: description */
    PyObject *name; /* task actor: its coroutine's __qualname__ at creation (or NULL) */
    uint32_t children;
    uint8_t kind;   /* 0 unseen in this execution, 1 task, 2 callback */
    /* explorer attached, per execution (see "call_soon FIFO" and "fair polls") */
    uint8_t chain;       /* a chain of call_soon callbacks */
    uint8_t starter;     /* a task created by a step: its first step is in the FIFO too */
    uint8_t first_pending; /* starter: its first step has not run yet */
    uint8_t park_read;   /* its next step was parked: that step reads PARK_TAG|actor, enabling */
    uint32_t live;       /* its handles queued and not cancelled */
    int64_t chain_start; /* chain: the event that started it (-1: none, between steps) */
    uint64_t chain_seq;  /* chain: the creation number of its first handle */
    int64_t chain_last;  /* chain: the event of its latest step (-1: none yet) */
    /* chain or starter: the event during which it stopped pending (INT64_MAX: still
     * pending, or never in the FIFO); during a step that event, between steps the next */
    int64_t drained_at;
    fifo_follow *follows; /* what must drain before its next step (see "FIFO and fairness") */
    size_t n_follows, cap_follows;
    cs_actor *efollows;   /* chain or starter: the follows its registration computed, kept */
    size_t n_efollows, cap_efollows;
    uint32_t fmark;       /* follow walks: == fifo_gen when visited in the current walk */
    uint8_t hollow;       /* chain or starter drained by cancels before its first step */
    cs_actor *waits;     /* parked poller: the actors that must step before its next step */
    size_t n_waits, cap_waits;
} actor_slot;

typedef struct {
    void *task;
    cs_actor actor;
} task_entry;

struct LoopCoreObject {
    PyObject_HEAD
    HandleObject **ready;
    size_t rhead, rlen, rcap;
    HandleObject **heap;
    size_t hlen, hcap;
    Py_ssize_t timer_cancelled_count;
    double now;
    uint64_t seq;
    char stopping, closed, debug, relaxed, running, in_iteration, in_step, clock_dirty;
    /* External events: call_soon_threadsafe from a thread other than the loop's queues a
     * handle here (a list of (thread ident, handle)), made but not registered: the loop's
     * tables are the loop thread's alone.  The front end delivers them (_cs_deliver) when
     * nothing else is ready.  `watching`: the front end knows of a live thread the program
     * started that may still send one; `external_checked`: steps + 1 when the front end last
     * looked with nothing to deliver (the loop then goes on to its timers or idles until the
     * next step runs). */
    PyObject *inbox;
    char watching;
    uint64_t external_checked;
    size_t batch_left;
    size_t ready_cancelled; /* handles cancelled while in the ready queue */
    unsigned long owner_thread;
    uint64_t steps, max_steps;
    PyObject *future_class, *task_class, *current_handle;
    /* create_task: set_task_factory's factory (NULL/None: none), and weak references to the
     * tasks made so far, in creation order (dead ones pruned once the list doubles) */
    PyObject *task_factory, *created;
    Py_ssize_t created_pruned;
    /* the tasks an explored step ended with an AssertionError (strong, or NULL): the runner
     * tracks tasks weakly and reports an assertion even when the program swallowed it and
     * dropped the task (gather(..., return_exceptions=True)) */
    PyObject *asserted;

    /* explorer */
    PyObject *explorer_obj;
    cs_explorer *ex;
    cs_actor cur_actor;
    int64_t cur_event;
    uint32_t root_children;
    actor_slot *actors;
    size_t n_actors;
    task_entry *tmap;
    size_t tmap_cap, tmap_len;
    /* per event of the current execution */
    uint32_t *choices;
    PyObject **site_code;
    int *site_line;
    size_t n_events, cap_events;
    /* scratch */
    cs_actor *en_actor;
    Py_ssize_t *en_ref; /* >= 0: ready index; < 0: -(heap index) - 1 */
    size_t en_cap;
    uint32_t *stamp;
    size_t stamp_cap;
    uint32_t stamp_gen;
    PyObject *div_enabled;
    /* call_soon FIFO: the chain actor of the current step (chain_event ==
     * cur_event) and how many callbacks joined it */
    cs_actor chain_actor;
    int64_t chain_event;
    uint32_t chain_len;
    /* busy-poll clock (explorer or not) */
    uint32_t poll_limit;
    uint32_t cur_polls;     /* polls of the handle running now */
    uint32_t cur_spins;     /* spins of the handle running now */
    double step_now;        /* the clock when the running step began */
    cs_actor *parked;       /* the parked pollers (their slots' n_waits > 0) */
    size_t n_parked, cap_parked;
    cs_actor *chains;       /* the chains started in this execution, in order */
    size_t n_chains, cap_chains;
    size_t step_chains;     /* chains[step_chains..] were started by the open step */
    fifo_group *groups;     /* the chains by registering event, in order */
    size_t n_groups, cap_groups;
    cs_actor *hollows;      /* the entries that drained hollow (actor_slot.hollow) */
    size_t n_hollows, cap_hollows;
    uint32_t fifo_gen;      /* generation of actor_slot.fmark */
    Py_ssize_t *grp_prev;   /* fifo_step_end scratch: per entry of the step's group, the last
                               chain / starter before it (two per entry) */
    size_t cap_grp_prev;
    /* the tasks whose next step the open step queued, with that handle's creation number */
    cs_actor *woken;
    uint64_t *woken_seq;
    uint8_t *woken_starts;  /* 1: that step also follows the first steps queued before it */
    size_t n_woken, cap_woken, cap_woken_seq, cap_woken_starts;
    PyObject *cur_task;     /* strong: the task whose step runs now, or NULL */
    HandleObject *requeued; /* strong: that task's next step queued by this step */
    PyObject *counted;      /* strong: the handles a counting closure's step scheduled (a
                               list, or NULL outside such a step; record_counted_future) */
    uint64_t poll_advances; /* busy-poll clock advances since creation or attach */
};

static PyTypeObject LoopCoreType;

/* ------------------------------------------------------ asyncio pieces */

/* Lazily imported asyncio pieces (first LoopCore creation). */
PyObject *cs_fmt_callback_source; /* format_helpers._format_callback_source */
PyObject *cs_extract_stack;       /* format_helpers.extract_stack */
PyObject *cs_empty_tuple;
static PyObject *future_type;     /* asyncio.futures.Future */
static PyObject *future_done;     /* its done(), unbound */
static PyObject *tasks_module;    /* asyncio.tasks: its Task is looked up at each use, as stock */
static PyObject *partial_type;    /* functools.partial */
static PyObject *asyncio_dir;     /* ".../asyncio/" */

/* asyncio's own closures that count finished children and complete one future with their
 * results once every child is counted (see record_shared_state): the code object, and the
 * index in its cells of that future.  Not wait()'s _on_completion: it may complete its future
 * before every child is counted (FIRST_COMPLETED), so the callback that completes it is not
 * interchangeable with the others. */
typedef struct {
    const char *function, *closure, *future_cell;
    PyObject *code;
    Py_ssize_t cell;
} counting_closure;
static counting_closure counting_closures[] = {
    {"gather", "_done_callback", "outer", NULL, -1},
};
static PyObject *s_coro, *s_cr_await, *s_cr_frame, *s_gi_frame, *s_gi_yieldfrom,
    *s_call_exception_handler, *s_check_callback, *s_check_thread,
    *s_loop, *s_qualname, *s_message, *s_exception, *s_handle,
    *s_source_traceback, *s_count;

/* Finds each counting closure's code object among its enclosing function's constants, and its
 * future's cell.  A closure not found as expected (another Python's asyncio) keeps code NULL:
 * its callbacks are then recorded as every other closure is, as a write of the whole closure. */
static int find_counting_closures(void) {
    PyObject *tasks = PyImport_ImportModule("asyncio.tasks");
    if (!tasks) return -1;
    int rc = 0;
    for (size_t i = 0; i < sizeof counting_closures / sizeof *counting_closures; i++) {
        counting_closure *cc = &counting_closures[i];
        PyObject *fn = PyObject_GetAttrString(tasks, cc->function);
        if (!fn) {
            PyErr_Clear();
            continue;
        }
        PyObject *outer = PyFunction_Check(fn) ? PyFunction_GET_CODE(fn) : NULL;
        PyObject *consts = outer ? PyObject_GetAttrString(outer, "co_consts") : NULL;
        PyObject *freevars = NULL;
        for (Py_ssize_t k = 0; consts && PyTuple_Check(consts) && k < PyTuple_GET_SIZE(consts);
             k++) {
            PyObject *c = PyTuple_GET_ITEM(consts, k);
            if (!PyCode_Check(c)) continue;
            PyObject *name = PyObject_GetAttrString(c, "co_name");
            int same = name && PyUnicode_Check(name) &&
                       PyUnicode_CompareWithASCIIString(name, cc->closure) == 0;
            Py_XDECREF(name);
            if (!same) continue;
            if (!(freevars = PyObject_GetAttrString(c, "co_freevars"))) break;
            for (Py_ssize_t v = 0; PyTuple_Check(freevars) && v < PyTuple_GET_SIZE(freevars);
                 v++) {
                PyObject *var = PyTuple_GET_ITEM(freevars, v);
                if (PyUnicode_Check(var) &&
                    PyUnicode_CompareWithASCIIString(var, cc->future_cell) == 0) {
                    cc->code = Py_NewRef(c);
                    cc->cell = v;
                }
            }
            break;
        }
        if (PyErr_Occurred()) rc = -1;
        Py_XDECREF(freevars);
        Py_XDECREF(consts);
        Py_DECREF(fn);
        if (rc < 0) break;
    }
    Py_DECREF(tasks);
    return rc;
}

static int import_asyncio(void) {
    if (cs_fmt_callback_source) return 0;
    PyObject *fh = NULL, *fut = NULL, *functools = NULL, *file = NULL;
    int rc = -1;
#define INTERN(var, s) if (!(var = PyUnicode_InternFromString(s))) goto done
    INTERN(s_coro, "_coro");
    INTERN(s_cr_await, "cr_await");
    INTERN(s_cr_frame, "cr_frame");
    INTERN(s_gi_frame, "gi_frame");
    INTERN(s_gi_yieldfrom, "gi_yieldfrom");
    INTERN(s_call_exception_handler, "call_exception_handler");
    INTERN(s_check_callback, "_check_callback");
    INTERN(s_check_thread, "_check_thread");
    INTERN(s_loop, "loop");
    INTERN(s_qualname, "__qualname__");
    INTERN(s_message, "message");
    INTERN(s_exception, "exception");
    INTERN(s_handle, "handle");
    INTERN(s_source_traceback, "source_traceback");
    INTERN(s_count, "count");
#undef INTERN
    if (!(cs_empty_tuple = PyTuple_New(0))) goto done;
    if (!(fh = PyImport_ImportModule("asyncio.format_helpers"))) goto done;
    if (!(fut = PyImport_ImportModule("asyncio.futures"))) goto done;
    if (!(functools = PyImport_ImportModule("functools"))) goto done;
    if (!(cs_extract_stack = PyObject_GetAttrString(fh, "extract_stack"))) goto done;
    if (!(future_type = PyObject_GetAttrString(fut, "Future"))) goto done;
    if (!PyType_Check(future_type)) {
        PyErr_SetString(PyExc_ImportError, "asyncio.futures.Future is not a type");
        goto done;
    }
    if (!(future_done = PyObject_GetAttrString(future_type, "done"))) goto done;
    if (!(tasks_module = PyImport_ImportModule("asyncio.tasks"))) goto done;
    if (!(partial_type = PyObject_GetAttrString(functools, "partial"))) goto done;
    if (!(file = PyObject_GetAttrString(fut, "__file__"))) goto done;
    if (find_counting_closures() < 0) goto done;
    {
        /* the directory of asyncio/futures.py, with its trailing separator */
        Py_ssize_t n = PyUnicode_GetLength(file);
        Py_ssize_t cut = PyUnicode_FindChar(file, '/', 0, n, -1);
        if (cut < 0) cut = PyUnicode_FindChar(file, '\\', 0, n, -1);
        if (!(asyncio_dir = PyUnicode_Substring(file, 0, cut + 1))) goto done;
    }
    /* last: it doubles as the "imported" flag */
    if (!(cs_fmt_callback_source = PyObject_GetAttrString(fh, "_format_callback_source")))
        goto done;
    rc = 0;
done:
    Py_XDECREF(fh);
    Py_XDECREF(fut);
    Py_XDECREF(functools);
    Py_XDECREF(file);
    return rc;
}

/* ------------------------------------------------------------ helpers */

static int grow(void **arr, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t ncap = *cap ? *cap : 16;
    while (ncap < need) ncap *= 2;
    void *p = PyMem_Realloc(*arr, ncap * elem);
    if (!p) {
        PyErr_NoMemory();
        return -1;
    }
    *arr = p;
    *cap = ncap;
    return 0;
}

/* A step of the explorer is open: the loop's own accesses are recorded. */
static inline int recording(LoopCoreObject *self) { return self->ex && self->in_step; }

/* The loop's resources (an actor's handle, the clock) are named by actor id
 * or by a constant: the same in every execution (CS_ID_STABLE). */
static int record(LoopCoreObject *self, uint64_t obj, cs_access_kind kind) {
    return cs_py_check(cs_access_record(self->ex, obj, CS_KEY_WHOLE,
                                        (cs_access_kind)(kind | CS_ID_STABLE), 0));
}

/* An add to, or an enabling read of, a loop resource (key 0: an add needs a key). */
static int record_edge(LoopCoreObject *self, uint64_t obj, cs_access_kind kind) {
    cs_access_kind k = (cs_access_kind)(kind | CS_ID_STABLE);
    return cs_py_check(cs_access_record(self->ex, obj, 0, k, 0));
}

/* ------------------------------------------------------- ready queue */

static int ready_push(LoopCoreObject *self, HandleObject *h) { /* steals */
    if (self->rlen == self->rcap) {
        size_t ncap = self->rcap ? self->rcap * 2 : 64;
        HandleObject **n = PyMem_Malloc(ncap * sizeof *n);
        if (!n) {
            PyErr_NoMemory();
            return -1;
        }
        for (size_t i = 0; i < self->rlen; i++)
            n[i] = self->ready[(self->rhead + i) & (self->rcap - 1)];
        PyMem_Free(self->ready);
        self->ready = n;
        self->rcap = ncap;
        self->rhead = 0;
    }
    self->ready[(self->rhead + self->rlen) & (self->rcap - 1)] = h;
    self->rlen++;
    h->queued = 1;
    /* invariant: ready_cancelled counts the cancelled handles in the queue
     * (a timer cancelled in the heap arrives here already cancelled) */
    if (h->cancelled) self->ready_cancelled++;
    return 0;
}

static inline HandleObject *ready_at(LoopCoreObject *self, size_t i) {
    return self->ready[(self->rhead + i) & (self->rcap - 1)];
}

static HandleObject *ready_pop(LoopCoreObject *self) { /* new reference */
    HandleObject *h = self->ready[self->rhead];
    h->queued = 0;
    if (h->cancelled) self->ready_cancelled--;
    self->rhead = (self->rhead + 1) & (self->rcap - 1);
    self->rlen--;
    return h;
}

static HandleObject *ready_remove(LoopCoreObject *self, size_t i) { /* new ref */
    if (i == 0) return ready_pop(self);
    HandleObject *h = ready_at(self, i);
    h->queued = 0;
    if (h->cancelled) self->ready_cancelled--;
    size_t mask = self->rcap - 1;
    for (size_t k = i; k + 1 < self->rlen; k++)
        self->ready[(self->rhead + k) & mask] = self->ready[(self->rhead + k + 1) & mask];
    self->rlen--;
    return h;
}

/* ---------------------------------------------------------- timer heap */
/* heapq's algorithms (Modules/_heapqmodule.c) with TimerHandle.__lt__. */

static void heap_siftdown(HandleObject **a, size_t startpos, size_t pos) {
    HandleObject *newitem = a[pos];
    while (pos > startpos) {
        size_t parentpos = (pos - 1) >> 1;
        HandleObject *parent = a[parentpos];
        if (!(newitem->when < parent->when)) break;
        a[pos] = parent;
        pos = parentpos;
    }
    a[pos] = newitem;
}

static void heap_siftup(HandleObject **a, size_t n, size_t pos) {
    size_t startpos = pos, limit = n >> 1;
    HandleObject *newitem = a[pos];
    while (pos < limit) {
        size_t child = 2 * pos + 1;
        if (child + 1 < n && !(a[child]->when < a[child + 1]->when)) child++;
        a[pos] = a[child];
        pos = child;
    }
    a[pos] = newitem;
    heap_siftdown(a, startpos, pos);
}

static int heap_push(LoopCoreObject *self, HandleObject *h) { /* steals */
    if (grow((void **)&self->heap, &self->hcap, self->hlen + 1, sizeof *self->heap) < 0)
        return -1;
    self->heap[self->hlen++] = h;
    heap_siftdown(self->heap, 0, self->hlen - 1);
    return 0;
}

static HandleObject *heap_pop(LoopCoreObject *self) { /* new reference */
    HandleObject *last = self->heap[--self->hlen];
    if (self->hlen == 0) return last;
    HandleObject *top = self->heap[0];
    self->heap[0] = last;
    heap_siftup(self->heap, self->hlen, 0);
    return top;
}

/* Removes an arbitrary entry (explorer's choice of a timer). */
static HandleObject *heap_remove(LoopCoreObject *self, size_t i) {
    HandleObject *h = self->heap[i];
    HandleObject *last = self->heap[--self->hlen];
    if (i < self->hlen) {
        self->heap[i] = last;
        heap_siftup(self->heap, self->hlen, i);
    }
    return h;
}

static void heap_heapify(LoopCoreObject *self) {
    for (size_t i = self->hlen >> 1; i-- > 0;) heap_siftup(self->heap, self->hlen, i);
}

/* ------------------------------------------------------------- actors */

static PyObject *describe_callback(PyObject *cb) {
    PyObject *fn = PyMethod_Check(cb) ? PyMethod_GET_FUNCTION(cb) : cb;
    if (PyFunction_Check(fn)) return Py_NewRef(cs_compat_function_qualname(fn));
    if (PyCFunction_Check(cb)) {
        PyObject *s = PyCFunction_GET_SELF(cb);
        const char *name = cs_compat_cfunction_name(cb);
        if (s && !PyModule_Check(s)) {
            const char *tn = Py_TYPE(s)->tp_name, *dot = strrchr(tn, '.');
            return PyUnicode_FromFormat("%s.%s", dot ? dot + 1 : tn, name);
        }
        return PyUnicode_FromString(name);
    }
    PyObject *q = PyObject_GetAttr(fn, s_qualname);
    if (q && PyUnicode_Check(q)) return q;
    Py_XDECREF(q);
    PyErr_Clear();
    return PyUnicode_FromString(Py_TYPE(cb)->tp_name);
}

static int actors_reserve(LoopCoreObject *self, cs_actor a) {
    size_t need = (size_t)a + 1;
    if (need <= self->n_actors) return 0;
    size_t cap = self->n_actors;
    actor_slot *p = self->actors;
    if (grow((void **)&p, &cap, need, sizeof *p) < 0) return -1;
    memset(p + self->n_actors, 0, (cap - self->n_actors) * sizeof *p);
    for (size_t i = self->n_actors; i < cap; i++) {
        p[i].chain_start = p[i].chain_last = -1;
        p[i].drained_at = INT64_MAX;
    }
    self->actors = p;
    self->n_actors = cap;
    return 0;
}

static size_t ptr_hash(void *p) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x;
}

/* A live task's actor from the map, or CS_NO_ACTOR. */
static cs_actor tmap_find(LoopCoreObject *self, PyObject *task) {
    if (!self->tmap_cap) return CS_NO_ACTOR;
    size_t mask = self->tmap_cap - 1;
    for (size_t j = ptr_hash(task) & mask; self->tmap[j].task; j = (j + 1) & mask) {
        if (self->tmap[j].task != task) continue;
        cs_actor a = self->tmap[j].actor;
        /* the entry is stale if the address now holds another object */
        PyObject *wr = self->actors[a].ref;
        if (!wr || !PyWeakref_Check(wr)) return CS_NO_ACTOR;
        PyObject *live = cs_compat_weakref_get(wr);
        if (!live) {
            PyErr_Clear();
            return CS_NO_ACTOR;
        }
        int same = live == task;
        Py_DECREF(live);
        return same ? a : CS_NO_ACTOR;
    }
    return CS_NO_ACTOR;
}

static int tmap_put(LoopCoreObject *self, PyObject *task, cs_actor a) {
    if ((self->tmap_len + 1) * 2 > self->tmap_cap) {
        size_t ncap = self->tmap_cap ? self->tmap_cap * 2 : 64;
        task_entry *n = PyMem_Calloc(ncap, sizeof *n);
        if (!n) {
            PyErr_NoMemory();
            return -1;
        }
        for (size_t i = 0; i < self->tmap_cap; i++) {
            if (!self->tmap[i].task) continue;
            size_t j = ptr_hash(self->tmap[i].task) & (ncap - 1);
            while (n[j].task) j = (j + 1) & (ncap - 1);
            n[j] = self->tmap[i];
        }
        PyMem_Free(self->tmap);
        self->tmap = n;
        self->tmap_cap = ncap;
    }
    size_t mask = self->tmap_cap - 1, j = ptr_hash(task) & mask;
    while (self->tmap[j].task && self->tmap[j].task != task) j = (j + 1) & mask;
    if (!self->tmap[j].task) self->tmap_len++;
    self->tmap[j].task = task;
    self->tmap[j].actor = a;
    return 0;
}

static int intern_child(LoopCoreObject *self, cs_actor *out) {
    uint32_t *counter;
    if (self->cur_actor == CS_NO_ACTOR) {
        counter = &self->root_children;
    } else {
        if (actors_reserve(self, self->cur_actor) < 0) return -1;
        counter = &self->actors[self->cur_actor].children;
    }
    if (cs_py_check(cs_actor_intern(self->ex, self->cur_actor, *counter, out)) < 0) return -1;
    (*counter)++;
    return actors_reserve(self, *out);
}

/* A later callback joins the current step's chain: its description lists the
 * distinct callbacks of the chain (for messages; identity is the actor id). */
static int chain_join(LoopCoreObject *self, cs_actor a, PyObject *cb) {
    actor_slot *s = &self->actors[a];
    self->chain_len++;
    if (!s->ref || !PyUnicode_Check(s->ref) || PyUnicode_GetLength(s->ref) > 160) return 0;
    PyObject *d = describe_callback(cb);
    if (!d) return -1;
    int has = PyUnicode_Contains(s->ref, d);
    if (has == 0) {
        PyObject *joined = PyUnicode_FromFormat("%U, %U", s->ref, d);
        if (!joined) has = -1;
        else Py_SETREF(s->ref, joined);
    }
    Py_DECREF(d);
    return has < 0 ? -1 : 0;
}

/* The step that schedules h started the work h is (a task's first step, a callback): its note
 * (cs_hooks_actor_note) is part of what the step did (cs_step_note). */
static int note_started(LoopCoreObject *self, PyObject *task, HandleObject *h) {
    if (!recording(self)) return 0;
    uint64_t note;
    if (cs_hooks_actor_note(task, task ? NULL : h->callback, task ? NULL : h->args, &note) < 0)
        return -1;
    return cs_py_check(cs_step_note(self->ex, note));
}

/* A step queued a task's next step (its first, a wakeup, a bare yield's): it
 * follows the chains queued before it (fifo_step_end), and the step's later
 * call_soon callbacks start a chain of their own, which runs after it on the
 * stock loop. */
static int note_woken(LoopCoreObject *self, cs_actor a, uint64_t seq, int starts) {
    if (!self->in_step) return 0;
    if (self->chain_event == self->cur_event) self->chain_actor = CS_NO_ACTOR;
    if (grow((void **)&self->woken, &self->cap_woken, self->n_woken + 1, sizeof *self->woken) < 0 ||
        grow((void **)&self->woken_seq, &self->cap_woken_seq, self->n_woken + 1,
             sizeof *self->woken_seq) < 0 ||
        grow((void **)&self->woken_starts, &self->cap_woken_starts, self->n_woken + 1,
             sizeof *self->woken_starts) < 0)
        return -1;
    self->woken[self->n_woken] = a;
    self->woken_starts[self->n_woken] = (uint8_t)starts;
    self->woken_seq[self->n_woken++] = seq;
    return 0;
}

/* Puts actor a (a chain, or a task whose first step is pending) in the
 * registration order that later chains and steps follow: registered by the
 * event `start` (-1: between steps) with handle number `seq`. */
static int fifo_register(LoopCoreObject *self, cs_actor a, int64_t start, uint64_t seq) {
    actor_slot *s = &self->actors[a];
    s->chain_start = start;
    s->chain_seq = seq;
    s->chain_last = -1;
    s->drained_at = INT64_MAX;
    if (grow((void **)&self->chains, &self->cap_chains, self->n_chains + 1, sizeof *self->chains) <
        0)
        return -1;
    fifo_group *g = self->n_groups ? &self->groups[self->n_groups - 1] : NULL;
    if (!g || g->start != start || start < 0) {
        if (grow((void **)&self->groups, &self->cap_groups, self->n_groups + 1,
                 sizeof *self->groups) < 0)
            return -1;
        g = &self->groups[self->n_groups++];
        g->start = start;
        g->lo = self->n_chains;
        g->last_chain = g->last_starter = -1;
    }
    if (s->chain) g->last_chain = (Py_ssize_t)self->n_chains;
    else g->last_starter = (Py_ssize_t)self->n_chains;
    self->chains[self->n_chains++] = a;
    g->hi = self->n_chains;
    return 0;
}

static int assign_actor(LoopCoreObject *self, HandleObject *h) {
    PyObject *task = cs_compat_task_of_step(h->callback);
    cs_actor a;
    if (task) {
        a = tmap_find(self, task);
        if (a != CS_NO_ACTOR) {
            h->actor = a;
            /* a bare yield (the running task requeued) lets the tasks started before run */
            return note_woken(self, a, h->seq, a == self->cur_actor);
        }
        if (intern_child(self, &a) < 0) return -1;
        actor_slot *s = &self->actors[a];
        PyObject *wr = PyWeakref_NewRef(task, NULL);
        if (!wr) return -1;
        Py_XSETREF(s->ref, wr);
        /* what it runs, for the report once the task is gone (tasks are not kept alive) */
        PyObject *coro = PyObject_GetAttr(task, s_coro);
        PyObject *nm = coro ? PyObject_GetAttr(coro, s_qualname) : NULL;
        Py_XDECREF(coro);
        if (nm && !PyUnicode_Check(nm)) Py_CLEAR(nm);
        if (!nm) PyErr_Clear();
        Py_XSETREF(s->name, nm);
        s->kind = 1;
        if (tmap_put(self, task, a) < 0) return -1;
        if (note_started(self, task, h) < 0) return -1;
        if (self->in_step) {
            /* its first step: after the tasks the program started before it */
            s->starter = s->first_pending = 1;
            if (fifo_register(self, a, self->cur_event, h->seq) < 0) return -1;
        }
        if (note_woken(self, a, h->seq, 1) < 0) return -1;
    } else if (!h->is_timer && self->chain_actor != CS_NO_ACTOR &&
               self->chain_event == self->cur_event) {
        /* a later call_soon of the step that started the chain: FIFO behind it */
        a = self->chain_actor;
        if (chain_join(self, a, h->callback) < 0) return -1;
        if (note_started(self, NULL, h) < 0) return -1;
    } else {
        if (intern_child(self, &a) < 0) return -1;
        actor_slot *s = &self->actors[a];
        PyObject *d = describe_callback(h->callback);
        if (!d) return -1;
        Py_XSETREF(s->ref, d);
        Py_CLEAR(s->name);
        s->kind = 2;
        if (!h->is_timer) {
            /* the step's first non-task call_soon starts its chain */
            self->chain_actor = a;
            self->chain_event = self->cur_event;
            self->chain_len = 1;
            s->chain = 1;
            s->n_follows = 0;
            /* the chains it follows are known once the step ends (fifo_step_end) */
            if (fifo_register(self, a, self->in_step ? self->cur_event : -1, h->seq) < 0)
                return -1;
        }
        if (note_started(self, NULL, h) < 0) return -1;
    }
    h->actor = a;
    return 0;
}

/* A handle scheduled by this loop now: creation order, the scheduling event,
 * and (explorer attached) its actor. */
/* Gives a handle just made its place in this execution: its creation number, the step that
 * made it runnable, its actor.  On error the handle is released. */
static int register_handle(LoopCoreObject *self, HandleObject *h, int timer, PyObject *cb) {
    h->seq = self->seq++;
    h->scheduled_by = self->ex ? self->cur_event : -1;
    if (self->ex && !self->in_step && cs_trace_length(self->ex) > 0) {
        /* Made runnable between steps, once the execution has begun: by the
         * front end (the runner cancelling the tasks a run left pending, a
         * future it completes), whose decision read the state every step so
         * far left.  It follows all of them, and may run before none: with
         * CS_SCHEDULED_BY_NONE (enabled from the start) DPOR would reverse
         * it with the steps before it -- e.g. a cancelled sleeper's wakeup
         * with the step that stopped the loop -- and prescribe it where it
         * does not exist yet (a divergence).  Only the main task's first
         * step, made before any, is scheduled by nothing. */
        h->after_all = 1;
        h->after_len = cs_trace_length(self->ex);
    }
    if (self->counted && PyList_Append(self->counted, (PyObject *)h) < 0) {
        Py_DECREF(h);
        return -1;
    }
    if (!timer && self->cur_task && cs_compat_task_of_step(cb) == self->cur_task) {
        /* the running task queued its own next step: a bare yield (sleep(0)) */
        h->polls = self->cur_polls < UINT32_MAX ? self->cur_polls + 1 : UINT32_MAX;
        h->spins = self->cur_spins < UINT32_MAX ? self->cur_spins + 1 : UINT32_MAX;
        Py_XSETREF(self->requeued, (HandleObject *)Py_NewRef((PyObject *)h));
    }
    if (self->ex && assign_actor(self, h) < 0) {
        Py_DECREF(h);
        return -1;
    }
    if (self->ex) self->actors[h->actor].live++;
    return 0;
}

static HandleObject *new_handle(LoopCoreObject *self, int timer, PyObject *cb,
                                PyObject *const *args, Py_ssize_t nargs, PyObject *ctx) {
    HandleObject *h = cs_handle_new(self, timer, cb, args, nargs, ctx, self->debug);
    if (!h) return NULL;
    if (register_handle(self, h, timer, cb) < 0) return NULL;
    return h;
}

int cs_loop_debug(LoopCoreObject *self) { return self->debug; }

int cs_loop_is_core(PyObject *obj) { return PyObject_TypeCheck(obj, &LoopCoreType); }

static int release_member(LoopCoreObject *self, cs_actor a);
static int fifo_pending(const actor_slot *s);
static int fifo_drained(LoopCoreObject *self, cs_actor a);

int cs_loop_cancel_handle(LoopCoreObject *self, HandleObject *h) {
    if (h->is_timer && h->scheduled) self->timer_cancelled_count++;
    if (h->queued) self->ready_cancelled++;
    int was_live = !h->cancelled && (h->queued || h->scheduled);
    h->cancelled = 1;
    if (recording(self) && record(self, HANDLE_TAG | h->actor, CS_WRITE) < 0) return -1;
    if (recording(self) && h->is_timer && h->scheduled && record(self, TIMERS_OBJECT, CS_READ) < 0)
        return -1;
    if (!self->ex || !was_live || h->actor >= self->n_actors) return 0;
    actor_slot *s = &self->actors[h->actor];
    /* a chain member cancelled is, for its followers, one of its steps */
    if ((s->chain || s->first_pending) && recording(self) &&
        record_edge(self, CHAIN_TAG | h->actor, CS_ADD) < 0)
        return -1;
    int was_pending = fifo_pending(s);
    s->first_pending = 0;
    if (s->live && --s->live == 0 && release_member(self, h->actor) < 0) return -1;
    if (was_pending && !fifo_pending(s) && fifo_drained(self, h->actor) < 0) return -1;
    return 0;
}

/* Runs one handle as stock Handle._run does.  Returns -1 only for an
 * exception that must leave the loop (SystemExit, KeyboardInterrupt, or a
 * failure of the exception handler itself). */
int cs_loop_run_handle(LoopCoreObject *self, HandleObject *h) {
    PyObject *cb = h->callback, *args = h->args, *ctx = h->context;
    Py_INCREF(cb);
    Py_INCREF(args);
    Py_INCREF(ctx);
    PyObject *res = NULL;
    if (self->debug) Py_XSETREF(self->current_handle, Py_NewRef((PyObject *)h));
    if (PyContext_Enter(ctx) == 0) {
        res = PyObject_Vectorcall(cb, &PyTuple_GET_ITEM(args, 0),
                                  (size_t)PyTuple_GET_SIZE(args), NULL);
        if (PyContext_Exit(ctx) < 0) Py_CLEAR(res);
    }
    if (self->debug) Py_CLEAR(self->current_handle);
    int rc = 0;
    if (res) {
        Py_DECREF(res);
        goto out;
    }
    if (PyErr_ExceptionMatches(PyExc_SystemExit) ||
        PyErr_ExceptionMatches(PyExc_KeyboardInterrupt)) {
        rc = -1;
        goto out;
    }
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    PyErr_NormalizeException(&et, &ev, &tb);
    if (tb) PyException_SetTraceback(ev, tb);
    Py_XDECREF(et);
    Py_XDECREF(tb);
    PyObject *src = NULL, *msg = NULL, *context = NULL, *r = NULL;
    rc = -1;
    if (!(src = PyObject_CallFunctionObjArgs(cs_fmt_callback_source, cb, args, NULL))) goto fail;
    if (!(msg = PyUnicode_FromFormat("Exception in callback %U", src))) goto fail;
    if (!(context = PyDict_New())) goto fail;
    if (PyDict_SetItem(context, s_message, msg) < 0 ||
        PyDict_SetItem(context, s_exception, ev) < 0 ||
        PyDict_SetItem(context, s_handle, (PyObject *)h) < 0)
        goto fail;
    if (h->source_traceback && PyObject_IsTrue(h->source_traceback) == 1 &&
        PyDict_SetItem(context, s_source_traceback, h->source_traceback) < 0)
        goto fail;
    r = PyObject_CallMethodOneArg((PyObject *)self, s_call_exception_handler, context);
    if (r) rc = 0;
fail:
    Py_XDECREF(r);
    Py_XDECREF(src);
    Py_XDECREF(msg);
    Py_XDECREF(context);
    Py_XDECREF(ev);
out:
    Py_DECREF(cb);
    Py_DECREF(args);
    Py_DECREF(ctx);
    return rc;
}

/* ------------------------------------------------------------ LoopCore */

static PyObject *loop_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    (void)args;
    (void)kw;
    if (!cs_compat_ready()) {
        /* without the check, no task step would be recognised as one */
        PyErr_SetString(cs_CompatError, "chaossloth.compat has not checked this interpreter "
                                         "yet: import chaossloth before creating a LoopCore");
        return NULL;
    }
    if (import_asyncio() < 0) return NULL;
    LoopCoreObject *self = (LoopCoreObject *)type->tp_alloc(type, 0);
    if (!self) return NULL;
    self->owner_thread = PyThread_get_thread_ident();
    self->cur_actor = CS_NO_ACTOR;
    self->cur_event = -1;
    self->chain_actor = CS_NO_ACTOR;
    self->poll_limit = POLL_LIMIT;
    self->created_pruned = CREATED_MIN_PRUNE;
    return (PyObject *)self;
}

static void clear_execution(LoopCoreObject *self) {
    for (size_t i = 0; i < self->n_actors; i++) {
        Py_CLEAR(self->actors[i].ref);
        Py_CLEAR(self->actors[i].name);
        self->actors[i].children = 0;
        self->actors[i].kind = 0;
    }
    for (size_t i = 0; i < self->n_events; i++) Py_CLEAR(self->site_code[i]);
    self->n_events = 0;
    self->root_children = 0;
    if (self->tmap) memset(self->tmap, 0, self->tmap_cap * sizeof *self->tmap);
    self->tmap_len = 0;
    Py_CLEAR(self->div_enabled);
    self->chain_actor = CS_NO_ACTOR;
    self->chain_len = 0;
    for (size_t i = 0; i < self->n_actors; i++) {
        actor_slot *s = &self->actors[i];
        s->chain = s->park_read = s->starter = s->first_pending = 0;
        s->live = 0;
        s->chain_start = s->chain_last = -1;
        s->drained_at = INT64_MAX;
        s->n_follows = s->n_waits = s->n_efollows = 0;
        s->hollow = 0;
    }
    self->n_parked = 0;
    self->n_chains = self->step_chains = self->n_woken = 0;
    self->n_groups = self->n_hollows = 0;
}

/* Releases every queued handle (close(), dealloc).  Handles are detached
 * from the queues first: releasing one may run code that schedules more. */
static void clear_queues(LoopCoreObject *self) {
    while (self->rlen || self->hlen) {
        HandleObject **r = self->ready, **hp = self->heap;
        size_t rhead = self->rhead, rlen = self->rlen, rcap = self->rcap, hlen = self->hlen;
        self->ready = NULL;
        self->rhead = self->rlen = self->rcap = 0;
        self->heap = NULL;
        self->hlen = self->hcap = 0;
        self->timer_cancelled_count = 0;
        self->ready_cancelled = 0;
        for (size_t i = 0; i < hlen; i++) hp[i]->scheduled = 0;
        for (size_t i = 0; i < rlen; i++) r[(rhead + i) & (rcap - 1)]->queued = 0;
        for (size_t i = 0; i < rlen; i++) Py_DECREF(r[(rhead + i) & (rcap - 1)]);
        for (size_t i = 0; i < hlen; i++) Py_DECREF(hp[i]);
        PyMem_Free(r);
        PyMem_Free(hp);
    }
    self->in_iteration = 0;
}

static int loop_traverse(LoopCoreObject *self, visitproc visit, void *arg) {
    for (size_t i = 0; i < self->rlen; i++) Py_VISIT((PyObject *)ready_at(self, i));
    for (size_t i = 0; i < self->hlen; i++) Py_VISIT((PyObject *)self->heap[i]);
    Py_VISIT(self->future_class);
    Py_VISIT(self->task_class);
    Py_VISIT(self->task_factory);
    Py_VISIT(self->created);
    Py_VISIT(self->asserted);
    Py_VISIT(self->inbox);
    Py_VISIT(self->current_handle);
    Py_VISIT(self->explorer_obj);
    for (size_t i = 0; i < self->n_actors; i++) {
        Py_VISIT(self->actors[i].ref);
        Py_VISIT(self->actors[i].name);
    }
    Py_VISIT(self->div_enabled);
    Py_VISIT(self->cur_task);
    Py_VISIT((PyObject *)self->requeued);
    Py_VISIT(self->counted);
    return 0;
}

static int loop_clear(LoopCoreObject *self) {
    clear_queues(self);
    Py_CLEAR(self->future_class);
    Py_CLEAR(self->task_class);
    Py_CLEAR(self->task_factory);
    Py_CLEAR(self->created);
    Py_CLEAR(self->asserted);
    Py_CLEAR(self->inbox);
    Py_CLEAR(self->current_handle);
    Py_CLEAR(self->cur_task);
    Py_CLEAR(self->requeued);
    Py_CLEAR(self->counted);
    cs_exploration_release(self);
    self->ex = NULL;
    Py_CLEAR(self->explorer_obj);
    clear_execution(self);
    return 0;
}

static void loop_dealloc(LoopCoreObject *self) {
    PyTypeObject *tp = Py_TYPE(self);
    PyObject_GC_UnTrack(self);
    loop_clear(self);
    PyMem_Free(self->ready);
    PyMem_Free(self->heap);
    for (size_t i = 0; i < self->n_actors; i++) {
        PyMem_Free(self->actors[i].waits);
        PyMem_Free(self->actors[i].follows);
        PyMem_Free(self->actors[i].efollows);
    }
    PyMem_Free(self->groups);
    PyMem_Free(self->hollows);
    PyMem_Free(self->grp_prev);
    PyMem_Free(self->actors);
    PyMem_Free(self->parked);
    PyMem_Free(self->chains);
    PyMem_Free(self->woken);
    PyMem_Free(self->woken_seq);
    PyMem_Free(self->woken_starts);
    PyMem_Free(self->tmap);
    PyMem_Free(self->choices);
    PyMem_Free(self->site_code);
    PyMem_Free(self->site_line);
    PyMem_Free(self->en_actor);
    PyMem_Free(self->en_ref);
    PyMem_Free(self->stamp);
    tp->tp_free((PyObject *)self);
}

static int check_open(LoopCoreObject *self) {
    if (!self->closed) return 0;
    PyErr_SetString(PyExc_RuntimeError, "Event loop is closed");
    return -1;
}

static int debug_checks(LoopCoreObject *self, PyObject *cb, const char *method) {
    PyObject *r = PyObject_CallMethodNoArgs((PyObject *)self, s_check_thread);
    if (!r) return -1;
    Py_DECREF(r);
    PyObject *m = PyUnicode_FromString(method);
    if (!m) return -1;
    r = PyObject_CallMethodObjArgs((PyObject *)self, s_check_callback, cb, m, NULL);
    Py_DECREF(m);
    if (!r) return -1;
    Py_DECREF(r);
    return 0;
}

/* Parses (callback, *args, context=None) after `skip` leading arguments. */
static int parse_cb(const char *name, PyObject *const *args, Py_ssize_t nargs,
                    PyObject *kwnames, Py_ssize_t skip, PyObject **ctx) {
    *ctx = NULL;
    if (kwnames) {
        Py_ssize_t nk = PyTuple_GET_SIZE(kwnames);
        for (Py_ssize_t i = 0; i < nk; i++) {
            PyObject *k = PyTuple_GET_ITEM(kwnames, i);
            if (!PyUnicode_Check(k) || PyUnicode_CompareWithASCIIString(k, "context") != 0) {
                PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%S'",
                             name, k);
                return -1;
            }
            *ctx = args[nargs + i];
        }
    }
    if (nargs < skip + 1) {
        PyErr_Format(PyExc_TypeError, "%s() missing required argument%s", name,
                     skip ? "s" : " 'callback'");
        return -1;
    }
    return 0;
}

static PyObject *schedule_soon(LoopCoreObject *self, const char *name, PyObject *const *args,
                               Py_ssize_t nargs, PyObject *kwnames) {
    PyObject *ctx;
    if (parse_cb(name, args, nargs, kwnames, 0, &ctx) < 0) return NULL;
    if (check_open(self) < 0) return NULL;
    if (self->debug && debug_checks(self, args[0], name) < 0) return NULL;
    HandleObject *h = new_handle(self, 0, args[0], args + 1, nargs - 1, ctx);
    if (!h) return NULL;
    if (ready_push(self, (HandleObject *)Py_NewRef((PyObject *)h)) < 0) {
        Py_DECREF(h);
        Py_DECREF(h);
        return NULL;
    }
    return (PyObject *)h;
}

static PyObject *loop_call_soon(LoopCoreObject *self, PyObject *const *args, Py_ssize_t nargs,
                                PyObject *kwnames) {
    return schedule_soon(self, "call_soon", args, nargs, kwnames);
}

static PyObject *loop_call_soon_threadsafe(LoopCoreObject *self, PyObject *const *args,
                                           Py_ssize_t nargs, PyObject *kwnames) {
    unsigned long me = PyThread_get_thread_ident();
    if (me == self->owner_thread)
        return schedule_soon(self, "call_soon_threadsafe", args, nargs, kwnames);
    /* another thread: an external event, queued for the loop thread to deliver */
    PyObject *ctx;
    if (parse_cb("call_soon_threadsafe", args, nargs, kwnames, 0, &ctx) < 0) return NULL;
    if (check_open(self) < 0) return NULL;
    HandleObject *h = cs_handle_new(self, 0, args[0], args + 1, nargs - 1, ctx, self->debug);
    if (!h) return NULL;
    if (!self->inbox && !(self->inbox = PyList_New(0))) goto fail;
    PyObject *ident = PyLong_FromUnsignedLong(me);
    if (!ident) goto fail;
    PyObject *item = PyTuple_Pack(2, ident, (PyObject *)h);
    Py_DECREF(ident);
    if (!item) goto fail;
    int rc = PyList_Append(self->inbox, item);
    Py_DECREF(item);
    if (rc < 0) goto fail;
    return (PyObject *)h;
fail:
    Py_DECREF(h);
    return NULL;
}

static PyObject *schedule_at(LoopCoreObject *self, double when, const char *name,
                             PyObject *const *args, Py_ssize_t nargs, PyObject *ctx) {
    if (check_open(self) < 0) return NULL;
    if (self->debug && debug_checks(self, args[0], name) < 0) return NULL;
    if (recording(self) && record(self, TIMERS_OBJECT, CS_READ) < 0) return NULL;
    HandleObject *h = new_handle(self, 1, args[0], args + 1, nargs - 1, ctx);
    if (!h) return NULL;
    h->when = when;
    if (heap_push(self, (HandleObject *)Py_NewRef((PyObject *)h)) < 0) {
        Py_DECREF(h);
        Py_DECREF(h);
        return NULL;
    }
    h->scheduled = 1;
    return (PyObject *)h;
}

static PyObject *loop_call_at(LoopCoreObject *self, PyObject *const *args, Py_ssize_t nargs,
                              PyObject *kwnames) {
    PyObject *ctx;
    if (parse_cb("call_at", args, nargs, kwnames, 1, &ctx) < 0) return NULL;
    if (args[0] == Py_None) {
        PyErr_SetString(PyExc_TypeError, "when cannot be None");
        return NULL;
    }
    double when = PyFloat_AsDouble(args[0]);
    if (when == -1.0 && PyErr_Occurred()) return NULL;
    return schedule_at(self, when, "call_at", args + 1, nargs - 1, ctx);
}

static PyObject *loop_call_later(LoopCoreObject *self, PyObject *const *args, Py_ssize_t nargs,
                                 PyObject *kwnames) {
    PyObject *ctx;
    if (parse_cb("call_later", args, nargs, kwnames, 1, &ctx) < 0) return NULL;
    if (args[0] == Py_None) {
        PyErr_SetString(PyExc_TypeError, "delay must not be None");
        return NULL;
    }
    double delay = PyFloat_AsDouble(args[0]);
    if (delay == -1.0 && PyErr_Occurred()) return NULL;
    if (recording(self) && record(self, CLOCK_OBJECT, CS_READ) < 0) return NULL;
    return schedule_at(self, self->now + delay, "call_at", args + 1, nargs - 1, ctx);
}

static PyObject *loop_time(LoopCoreObject *self, PyObject *Py_UNUSED(unused)) {
    if (recording(self) && record(self, CLOCK_OBJECT, CS_READ) < 0) return NULL;
    return PyFloat_FromDouble(self->now);
}

static PyObject *loop_get_debug(LoopCoreObject *self, PyObject *Py_UNUSED(unused)) {
    return PyBool_FromLong(self->debug);
}

static PyObject *loop_create_future(LoopCoreObject *self, PyObject *Py_UNUSED(unused)) {
    PyObject *cls = self->future_class && self->future_class != Py_None ? self->future_class
                                                                         : future_type;
    static PyObject *kwnames;
    if (!kwnames && !(kwnames = Py_BuildValue("(O)", s_loop))) return NULL;
    PyObject *argv[1] = {(PyObject *)self};
    return PyObject_Vectorcall(cls, argv, 0, kwnames);
}

/* Stock BaseEventLoop.create_task, with the loop's `_cs_task_class` in place of asyncio's
 * Task; a task factory is called by ControlledLoop._cs_factory_task (Python: it names the
 * task as this version's stock loop does).  Every task made is remembered, weakly, in
 * creation order (_cs_created: the deadlock message lists waiting tasks in that order). */
static PyObject *loop_create_task(LoopCoreObject *self, PyObject *const *args, Py_ssize_t nargs,
                                  PyObject *kwnames) {
    PyObject *name = Py_None, *context = Py_None, *task = NULL;
    if (nargs != 1) {
        PyErr_Format(PyExc_TypeError, "create_task() takes 1 positional argument (%zd given)",
                     nargs);
        return NULL;
    }
    for (Py_ssize_t i = 0, n = kwnames ? PyTuple_GET_SIZE(kwnames) : 0; i < n; i++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, i);
        if (PyUnicode_Check(key) && PyUnicode_CompareWithASCIIString(key, "name") == 0) {
            name = args[nargs + i];
        } else if (PyUnicode_Check(key) &&
                   PyUnicode_CompareWithASCIIString(key, "context") == 0) {
            context = args[nargs + i];
        } else {
            PyErr_Format(PyExc_TypeError,
                         "create_task() got an unexpected keyword argument '%S'", key);
            return NULL;
        }
    }
    if (self->closed) {
        PyErr_SetString(PyExc_RuntimeError, "Event loop is closed");
        return NULL;
    }
    if (self->task_factory && self->task_factory != Py_None) {
        task = PyObject_CallMethod((PyObject *)self, "_cs_factory_task", "OOO", args[0], name,
                                   context);
    } else {
        PyObject *cls = self->task_class && self->task_class != Py_None
                            ? Py_NewRef(self->task_class)
                            : PyObject_GetAttrString(tasks_module, "Task");
        if (!cls) return NULL;
        static PyObject *kw;
        if (!kw && !(kw = Py_BuildValue("(sss)", "loop", "name", "context"))) {
            Py_DECREF(cls);
            return NULL;
        }
        /* in debug mode the task's creation stack ends at the caller's frame, as stock's
         * does once it drops its create_task's own (this create_task has no frame) */
        PyObject *argv[4] = {args[0], (PyObject *)self, name, context};
        task = PyObject_Vectorcall(cls, argv, 1, kw);
        Py_DECREF(cls);
    }
    if (!task) return NULL;
    if (!self->created && !(self->created = PyList_New(0))) goto fail;
    PyObject *ref = PyWeakref_NewRef(task, NULL);
    if (!ref) goto fail;
    int rc = PyList_Append(self->created, ref);
    Py_DECREF(ref);
    if (rc < 0) goto fail;
    if (PyList_GET_SIZE(self->created) > self->created_pruned) {
        PyObject *live = PyList_New(0);
        if (!live) goto fail;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(self->created); i++) {
            PyObject *r = PyList_GET_ITEM(self->created, i);
            PyObject *referent = cs_compat_weakref_get(r);
            int alive = referent && referent != Py_None;
            Py_XDECREF(referent);
            if (!referent || (alive && PyList_Append(live, r) < 0)) {
                Py_DECREF(live);
                goto fail;
            }
        }
        Py_SETREF(self->created, live);
        self->created_pruned = 2 * PyList_GET_SIZE(live);
        if (self->created_pruned < CREATED_MIN_PRUNE) self->created_pruned = CREATED_MIN_PRUNE;
    }
    return task;
fail:
    Py_DECREF(task);
    return NULL;
}

static PyObject *loop_get_created(LoopCoreObject *self, void *Py_UNUSED(c)) {
    if (!self->created && !(self->created = PyList_New(0))) return NULL;
    return PyList_GetSlice(self->created, 0, PyList_GET_SIZE(self->created));
}

static PyObject *loop_timer_handle_cancelled(LoopCoreObject *self, PyObject *handle) {
    int scheduled;
    if (PyObject_TypeCheck(handle, &cs_HandleType)) {
        scheduled = ((HandleObject *)handle)->scheduled;
    } else {
        PyObject *v = PyObject_GetAttrString(handle, "_scheduled");
        if (!v) return NULL;
        scheduled = PyObject_IsTrue(v);
        Py_DECREF(v);
        if (scheduled < 0) return NULL;
    }
    if (scheduled) self->timer_cancelled_count++;
    Py_RETURN_NONE;
}

/* --------------------------------------------------------- dispatch */

/* Stock _run_once's prologue: drop cancelled timers from the heap. */
static int heap_cleanup(LoopCoreObject *self) {
    size_t n = self->hlen;
    if (n > MIN_SCHEDULED_TIMER_HANDLES &&
        (double)self->timer_cancelled_count / (double)n > MIN_CANCELLED_TIMER_HANDLES_FRACTION) {
        HandleObject **dead = PyMem_Malloc(n * sizeof *dead);
        if (!dead) {
            PyErr_NoMemory();
            return -1;
        }
        size_t j = 0, nd = 0;
        for (size_t i = 0; i < n; i++) {
            HandleObject *h = self->heap[i];
            if (h->cancelled) {
                h->scheduled = 0;
                dead[nd++] = h;
            } else {
                self->heap[j++] = h;
            }
        }
        self->hlen = j;
        heap_heapify(self);
        self->timer_cancelled_count = 0;
        for (size_t i = 0; i < nd; i++) Py_DECREF(dead[i]);
        PyMem_Free(dead);
    } else {
        while (self->hlen && self->heap[0]->cancelled) {
            self->timer_cancelled_count--;
            HandleObject *h = heap_pop(self);
            h->scheduled = 0;
            Py_DECREF(h);
        }
    }
    return 0;
}

/* A timer is due at `now` unless its deadline is later; NaN is due at once
 * (stock: the heap head runs unless `when >= now + resolution`). */
static inline int timer_due(double when, double now) { return !(when > now); }

/* A deadline the stock loop never reaches (it waits in select forever). */
static inline int timer_never(double when) { return when == INFINITY; }

/* An iteration's boundary: cleanup, advance the virtual clock if nothing is
 * ready, move the due timers to the ready queue. */
static int boundary(LoopCoreObject *self) {
    if (heap_cleanup(self) < 0) return -1;
    if (CS_SELECT_REFUSES_NAN && self->rlen == 0 && !self->stopping && self->hlen &&
        isnan(self->heap[0]->when)) {
        /* the stock loop's own crash, raised from its run: the execution's failure */
        PyErr_SetString(PyExc_ValueError, "cannot convert float NaN to integer");
        return -1;
    }
    int advanced = 0;
    if (self->rlen == 0 && !self->stopping && self->hlen && self->heap[0]->when > self->now &&
        !timer_never(self->heap[0]->when)) {
        self->now = self->heap[0]->when;
        self->clock_dirty = 1;
        advanced = 1;
        /* strict: the timers this makes due follow every step so far (and
         * only those): the engine records the barrier */
        if (self->ex && !self->relaxed && cs_py_check(cs_clock_advance(self->ex)) < 0) return -1;
    }
    while (self->hlen && timer_due(self->heap[0]->when, self->now)) {
        HandleObject *h = heap_pop(self);
        h->scheduled = 0;
        /* strict: a timer reached only by advancing the clock runs after
         * every step before the advance (relaxed: it could have fired
         * earlier) */
        if (advanced && !self->relaxed && self->ex) {
            h->after_all = 1;
            h->after_len = cs_trace_length(self->ex);
        }
        if (ready_push(self, h) < 0) {
            Py_DECREF(h);
            return -1;
        }
    }
    return 0;
}

/* Busy-poll clock, called at the end of every step (explorer or not).
 *
 * Virtual time otherwise moves only when nothing is ready, so a task polling
 * `while not flag: await asyncio.sleep(0)` for a flag that a timer (or a
 * sleeping task) sets would spin forever, while on the stock loop real time
 * passes and the timer fires.  Rule: when the step that just ran was a
 * task's POLL_LIMIT-th consecutive bare yield (its next step queued by the
 * step itself: Handle.polls), and no pending timer is due yet, the clock
 * advances to the earliest pending deadline; that task's count restarts.
 *
 * The schedules this creates are real: the stock loop's clock runs while it
 * busy-polls, so a timer firing while tasks are ready is what a real loop
 * does; they are also a subset of what relaxed timers already allow (any
 * pending timer may fire at any choice point).
 *
 * Determinism and DPOR.  The decision is a function of (a) the task's own
 * consecutive yields, which program order of its actor fixes, (b) the heap
 * and (c) the clock.  The step records them: a write of TIMERS_OBJECT (every
 * heap operation -- call_at/call_later, a timer's cancel, a timer's step --
 * reads it, so every one of them is ordered with the check and DPOR reverses
 * the races, e.g. a call_later that could have come first and would have been
 * the earliest deadline), a read of the clock, and a write of it when it
 * advances (so loop.time() readers race with it).  Nothing global (an
 * iteration count) enters the decision, so two executions with the same
 * Mazurkiewicz trace up to this step decide the same, and replay holds.  In
 * strict mode the timers it makes due become runnable because of this step:
 * they are scheduled_by it (an enabling edge DPOR never reverses), like a
 * call_soon.  In relaxed mode they were enabled already; only the clock moves.
 * The loop never advances past a due timer still in the heap. */
static int busy_poll_check(LoopCoreObject *self) {
    HandleObject *next = self->requeued;
    if (!next || !self->poll_limit || next->polls < self->poll_limit) return 0;
    int rec = recording(self);
    if (rec && (record(self, TIMERS_OBJECT, CS_WRITE) < 0 || record(self, CLOCK_OBJECT, CS_READ) < 0))
        return -1;
    double earliest = 0.0;
    int found = 0;
    for (size_t i = 0; i < self->hlen; i++) {
        HandleObject *t = self->heap[i];
        if (t->cancelled) continue;
        if (timer_due(t->when, self->now)) return 0; /* a due timer runs first */
        if (timer_never(t->when)) continue;
        if (!found || t->when < earliest) {
            earliest = t->when;
            found = 1;
        }
    }
    if (!found) return 0; /* keep counting: a timer scheduled later triggers at once */
    if (rec && record(self, CLOCK_OBJECT, CS_WRITE) < 0) return -1;
    if (self->ex && !self->relaxed)
        for (size_t i = 0; i < self->hlen; i++) {
            HandleObject *t = self->heap[i];
            if (!t->cancelled && timer_due(t->when, earliest)) {
                t->scheduled_by = self->cur_event;
                t->after_all = 0; /* made due by this step, not by its creation */
            }
        }
    self->now = earliest;
    next->polls = 0;
    self->poll_advances++;
    return 0;
}

static int budget_error(LoopCoreObject *self) {
    PyErr_Format(cs_BudgetError, "step budget exhausted after %llu steps",
                 (unsigned long long)self->steps);
    return -1;
}

/* Nothing is ready, and another thread has sent an event or may still send one that the
 * front end has not waited for since the last step: checked before the clock advances. */
static int external_pending(LoopCoreObject *self) {
    if (self->rlen != 0 || self->stopping) return 0;
    if (self->inbox && PyList_GET_SIZE(self->inbox) > 0) return 1;
    return self->watching && self->external_checked != self->steps + 1;
}

static int run_fifo(LoopCoreObject *self) {
    for (;;) {
        if (external_pending(self)) return RUN_EXTERNAL;
        if (boundary(self) < 0) return -1;
        if (self->rlen == 0) {
            if (self->stopping) return RUN_STOPPED;
            if (self->hlen == 0 || timer_never(self->heap[0]->when)) return RUN_IDLE;
        }
        size_t ntodo = self->rlen;
        for (size_t i = 0; i < ntodo; i++) {
            HandleObject *h = ready_pop(self);
            if (h->cancelled) {
                Py_DECREF(h);
                continue;
            }
            if (self->max_steps && self->steps >= self->max_steps) {
                /* put it back: the loop stays consistent and closable */
                self->rhead = (self->rhead + self->rcap - 1) & (self->rcap - 1);
                self->ready[self->rhead] = h;
                self->rlen++;
                return budget_error(self);
            }
            self->steps++;
            self->cur_task = Py_XNewRef(cs_compat_task_of_step(h->callback));
            self->cur_polls = h->polls;
            int rc = cs_loop_run_handle(self, h);
            if (rc == 0) rc = busy_poll_check(self);
            Py_CLEAR(self->cur_task);
            Py_CLEAR(self->requeued);
            Py_DECREF(h);
            if (rc < 0) return -1;
        }
        if (self->stopping) return RUN_STOPPED;
    }
}

static int ensure_event(LoopCoreObject *self, size_t ev) {
    if (ev < self->n_events) return 0;
    size_t need = ev + 1, c1 = self->cap_events, c2 = self->cap_events, c3 = self->cap_events;
    if (grow((void **)&self->choices, &c1, need, sizeof *self->choices) < 0) return -1;
    if (grow((void **)&self->site_code, &c2, need, sizeof *self->site_code) < 0) return -1;
    if (grow((void **)&self->site_line, &c3, need, sizeof *self->site_line) < 0) return -1;
    self->cap_events = c1;
    for (size_t i = self->n_events; i < need; i++) {
        self->choices[i] = 0;
        self->site_code[i] = NULL;
        self->site_line[i] = 0;
    }
    self->n_events = need;
    return 0;
}

static int is_asyncio_code(PyCodeObject *code) {
    Py_ssize_t n = PyUnicode_GetLength(asyncio_dir);
    PyObject *file = cs_compat_code_filename((PyObject *)code);
    return PyUnicode_Tailmatch(file, asyncio_dir, 0, n, -1) == 1;
}

/* Where `task` is suspended: the innermost frame of its await chain that is
 * not asyncio's own code (else the innermost).  Stores a code object and a
 * line; leaves them NULL/0 if the task is done.  Never raises. */
static void await_site(PyObject *task, PyObject **code_out, int *line_out) {
    *code_out = NULL;
    *line_out = 0;
    PyObject *obj = PyObject_GetAttr(task, s_coro);
    PyCodeObject *best = NULL, *inner = NULL;
    int best_line = 0, inner_line = 0;
    for (int depth = 0; obj && depth < 64; depth++) {
        PyObject *fr, *co, *next;
        if (cs_compat_await_link(obj, &fr, &co, &next) <= 0) break;
        int has_code = co != NULL; /* NULL: an async generator's awaitable, next is it */
        Py_XDECREF(co);
        if (fr && PyFrame_Check(fr)) {
            PyCodeObject *code = PyFrame_GetCode((PyFrameObject *)fr);
            int line = PyFrame_GetLineNumber((PyFrameObject *)fr);
            Py_XSETREF(inner, code);
            inner_line = line;
            if (!is_asyncio_code(code)) {
                Py_XSETREF(best, (PyCodeObject *)Py_NewRef((PyObject *)code));
                best_line = line;
            }
        } else if (fr || has_code) { /* a finished coroutine: nothing further */
            Py_XDECREF(fr);
            Py_XDECREF(next);
            break;
        }
        Py_XDECREF(fr);
        Py_SETREF(obj, next);
    }
    Py_XDECREF(obj);
    PyErr_Clear();
    if (best) {
        *code_out = (PyObject *)best;
        *line_out = best_line;
        Py_XDECREF(inner);
    } else if (inner) {
        *code_out = (PyObject *)inner;
        *line_out = inner_line;
    }
}

static int stamp_reserve(LoopCoreObject *self, cs_actor a) {
    size_t old = self->stamp_cap;
    if (grow((void **)&self->stamp, &self->stamp_cap, (size_t)a + 1, sizeof *self->stamp) < 0)
        return -1;
    if (self->stamp_cap > old)
        memset(self->stamp + old, 0, (self->stamp_cap - old) * sizeof *self->stamp);
    return 0;
}

/* Starts a new generation of stamps: no actor is marked in it. */
static void stamp_new_generation(LoopCoreObject *self) {
    if (++self->stamp_gen == 0) {
        memset(self->stamp, 0, self->stamp_cap * sizeof *self->stamp);
        self->stamp_gen = 1;
    }
}

/* Marks actor `a` in the current generation: 1 if it was not marked yet, 0 if
 * it was, -1 with an exception. */
static int stamp_first(LoopCoreObject *self, cs_actor a) {
    if (a >= self->stamp_cap && stamp_reserve(self, a) < 0) return -1;
    if (self->stamp[a] == self->stamp_gen) return 0;
    self->stamp[a] = self->stamp_gen;
    return 1;
}

static int en_reserve(LoopCoreObject *self, size_t n) {
    size_t c1 = self->en_cap, c2 = self->en_cap;
    if (grow((void **)&self->en_actor, &c1, n, sizeof *self->en_actor) < 0) return -1;
    if (grow((void **)&self->en_ref, &c2, n, sizeof *self->en_ref) < 0) return -1;
    self->en_cap = c1;
    return 0;
}

/* Appends (a, ref) unless `a` is listed already; room was reserved. */
static inline int en_add(LoopCoreObject *self, size_t *n, cs_actor a, Py_ssize_t ref) {
    int first = stamp_first(self, a);
    if (first <= 0) return first; /* actor already listed, or an error */
    self->en_actor[*n] = a;
    self->en_ref[*n] = ref;
    (*n)++;
    return 0;
}

static HandleObject **timer_sort_heap; /* qsort context (single-threaded under the GIL) */
static int timer_cmp(const void *pa, const void *pb) {
    const HandleObject *a = timer_sort_heap[*(const Py_ssize_t *)pa];
    const HandleObject *b = timer_sort_heap[*(const Py_ssize_t *)pb];
    /* a total order (qsort needs one): NaN deadlines first, then by deadline,
     * then by insertion */
    int an = isnan(a->when), bn = isnan(b->when);
    if (an != bn) return an ? -1 : 1;
    if (!an && a->when != b->when) return a->when < b->when ? -1 : 1;
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* Drops cancelled handles from the ready queue (stock skips them). */
static int purge_cancelled(LoopCoreObject *self) {
    if (!self->ready_cancelled) return 0;
    size_t n = self->rlen, nd = 0;
    for (size_t i = 0; i < n; i++) nd += ready_at(self, i)->cancelled;
    self->ready_cancelled = 0;
    if (!nd) return 0;
    HandleObject **dead = PyMem_Malloc(nd * sizeof *dead);
    if (!dead) {
        PyErr_NoMemory();
        return -1;
    }
    size_t j = 0, k = 0, batch = self->batch_left;
    for (size_t i = 0; i < n; i++) {
        HandleObject *h = ready_at(self, i);
        if (h->cancelled) {
            if (i < batch) self->batch_left--;
            h->queued = 0;
            dead[k++] = h;
        } else {
            self->ready[(self->rhead + j++) & (self->rcap - 1)] = h; /* j <= i */
        }
    }
    self->rlen = j;
    for (k = 0; k < nd; k++) Py_DECREF(dead[k]);
    PyMem_Free(dead);
    return 0;
}

/* Is the future done?  By its _state (both asyncio futures have one), which records nothing
 * (a recording future's done() records a read of its state, which the caller's own records
 * stand for); by done() otherwise. */
int cs_loop_future_is_done(PyObject *future) {
    if (future_done && PyObject_TypeCheck(future, (PyTypeObject *)future_type)) {
        /* asyncio's C Future (a C Task, a recording one): its own done(), unbound (the
         * recording subclasses' done() records a read) */
        PyObject *done = PyObject_CallOneArg(future_done, future);
        if (!done) return -1;
        int truth = done == Py_True;
        Py_DECREF(done);
        return truth;
    }
    PyObject *state = PyObject_GetAttrString(future, "_state");
    if (state && PyUnicode_Check(state)) {
        int pending = PyUnicode_CompareWithASCIIString(state, "PENDING") == 0;
        Py_DECREF(state);
        return !pending;
    }
    Py_XDECREF(state);
    PyErr_Clear();
    PyObject *done = PyObject_CallMethod(future, "done", NULL);
    if (!done) return -1;
    int truth = PyObject_IsTrue(done);
    Py_DECREF(done);
    return truth;
}

/* A non-task callback's step writes the state it shares with other handles that the
 * instrumentation does not see: asyncio's own gather()/wait()/shield() callbacks are closures
 * that count finished children and complete an outer future through their cells, and
 * TaskGroup._on_task_done or a `lst.append` callback mutate their receiver.  So the step
 * writes, as a whole object: a closure's function object; a bound method's receiver (Python
 * or builtin, modules excepted); and, for a functools.partial, what its function shares.  Two
 * handles of one closure or one receiver are thereby ordered; plain functions, whose state is
 * their arguments, stay independent.  Over-approximating is safe; missing this was not.
 *
 * Except gather()'s own counting closure (counting_closures), whose other cells
 * are read-only but a counter of finished children, which decides only whether the step
 * completes the closure's future.  Their steps access (future, "count") instead:
 *   - the future was done before: a read (the callback only looks);
 *   - it is left pending: an add.  Two such steps swap without changing what either does:
 *     neither completed the future, so neither was the last child counted nor a failure, and
 *     neither is after the swap;
 *   - gather()'s, completed with a result: an add too.  Only the last child counted does that
 *     (a failure sets an exception), and the results are the children's whatever the order of
 *     their callbacks, so whichever runs last completes the future the same way: gather()'s N
 *     children take one order of their callbacks, not N!.  What the completion schedules (the
 *     awaiting task's wake-up, the future's other callbacks) waits for every add, not only the
 *     last one: those handles make an enabling read (CS_ENABLING) of (future, "count") when
 *     they run, which DPOR never reverses with an add;
 *   - completed otherwise (a child failed, the gather was cancelled): a write, ordered with
 *     every other callback.
 * A gather() callback's reads of the children (futures already done: their state no longer
 * changes, and each callback is scheduled by its own child's completion) are not recorded
 * (cs_hooks_quiet_reads): only the last callback reads every child, and which one is last
 * must not change what the steps record, else two of them would not swap as adds.
 * Returns the future (*future_out, a new reference) and its done() before the step
 * (*was_done); record_counted_future records after the step. */
static int record_shared_state(PyObject *cb, int depth, PyObject **future_out, int *was_done) {
    PyObject *target = NULL;
    if (PyMethod_Check(cb)) {
        target = PyMethod_GET_SELF(cb);
    } else if (PyFunction_Check(cb)) {
        PyObject *code = PyFunction_GET_CODE(cb), *cells = PyFunction_GET_CLOSURE(cb);
        for (size_t i = 0; cells && depth == 0 &&
                           i < sizeof counting_closures / sizeof *counting_closures;
             i++) {
            counting_closure *cc = &counting_closures[i];
            if (cc->code != code || cc->cell >= PyTuple_GET_SIZE(cells)) continue;
            PyObject *future = PyCell_GET(PyTuple_GET_ITEM(cells, cc->cell));
            if (!future || future == Py_None) break;
            int done = cs_loop_future_is_done(future);
            if (done < 0) return -1;
            *future_out = Py_NewRef(future);
            *was_done = done;
            return 0;
        }
        if (cells != NULL) target = cb;
    } else if (PyCFunction_Check(cb)) {
        PyObject *m_self = PyCFunction_GET_SELF(cb);
        if (m_self && !PyModule_Check(m_self)) target = m_self;
    } else if (depth < 4 && PyObject_TypeCheck(cb, (PyTypeObject *)partial_type)) {
        PyObject *fn = PyObject_GetAttrString(cb, "func");
        if (!fn) return -1;
        int rc = record_shared_state(fn, depth + 1, future_out, was_done);
        Py_DECREF(fn);
        return rc;
    }
    if (!target) return 0;
    return cs_hooks_record_object(target, CS_WRITE);
}

/* A done future's exception as the C Future stores it (`_exception`: exception() would
 * mark it retrieved), a new reference; NULL, no error set, when it has none to read. */
static PyObject *stored_exception(PyObject *future) {
    PyObject *exc = PyObject_GetAttrString(future, "_exception");
    if (!exc) PyErr_Clear();
    return exc;
}

/* Holds a task that ended with an AssertionError until the loop dies (see `asserted`). */
static int keep_if_asserted(LoopCoreObject *self, PyObject *task) {
    PyObject *exc = stored_exception(task);
    if (!exc) return 0; /* not asyncio's Task: the runner does not track it */
    int asserted = PyObject_TypeCheck(exc, (PyTypeObject *)PyExc_AssertionError);
    Py_DECREF(exc);
    if (!asserted) return 0;
    if (!self->asserted && !(self->asserted = PyList_New(0))) return -1;
    return PyList_Append(self->asserted, task);
}

/* After a counting closure's step: its access of (future, "count"), and the handles it
 * scheduled marked to read it, enabling, when the step completed the future by counting. */
static int record_counted_future(LoopCoreObject *self, PyObject *future, int was_done) {
    int kind = CS_READ;
    if (!was_done) {
        int done = cs_loop_future_is_done(future);
        if (done < 0) return -1;
        kind = CS_ADD;
        if (done) {
            /* with a result: by counting (the failure paths set an exception or cancel);
             * unreadable counts as failed */
            PyObject *exc = stored_exception(future);
            if (!exc || exc != Py_None) kind = CS_WRITE;
            Py_XDECREF(exc);
            if (kind == CS_ADD) {
                PyObject *cancelled = PyObject_CallMethod(future, "cancelled", NULL);
                if (!cancelled) return -1;
                int truth = PyObject_IsTrue(cancelled);
                Py_DECREF(cancelled);
                if (truth != 0) kind = CS_WRITE;
            }
            for (Py_ssize_t k = 0; kind == CS_ADD && k < PyList_GET_SIZE(self->counted); k++) {
                HandleObject *h = (HandleObject *)PyList_GET_ITEM(self->counted, k);
                Py_XSETREF(h->observes, Py_NewRef(future));
            }
        }
    }
    return cs_hooks_record_key(future, s_count, kind);
}

/* ------------------------------------------------------ FIFO and fairness
 *
 * call_soon FIFO across steps.  asyncio runs call_soon callbacks in the order
 * they were registered.  A chain (the plain callbacks one step queued) keeps
 * its own order by program order.  Between chains the model keeps the order
 * where it cannot depend on the schedule: a chain started by step r follows
 * every chain still queued whose starting step happens before r (the same
 * actor's earlier step: an emitter task that dispatches a frame with
 * call_soon between awaits; a task's done-callbacks, queued by its last step,
 * and the callback another task's step queues after it saw the task done).
 * Happens-before is the same in every execution of one trace, so the rule
 * is too.  The chain's first step is not offered while one of those chains
 * has a callback queued, and it reads CHAIN_TAG|each of them with
 * CS_ENABLING, to which each of their steps (and each cancel of one of their
 * callbacks) adds: happens-before edges that DPOR never reverses.  Chains
 * started by concurrent steps float, as those steps do (task steps model I/O
 * of unknown latency; an order between them that the schedule decides would
 * make the blocking of a chain depend on the order of independent steps, and
 * every order of the two is some schedule's registration order).  A task's
 * next step (its first, a wakeup by a future, a bare yield's) follows the
 * same chains, and those its own queuing step registered before it: on the
 * stock loop they are ahead of it in the ready queue (a finished task's
 * done-callback runs before the wakeup of the task awaiting it; sleep(0) lets
 * the callbacks queued so far run).  A step's call_soon callbacks queued after
 * such a task step start a chain of their own, which follows the earlier one.
 * The first step of a task that a step created is in the FIFO too, for the
 * first steps of tasks created after it and for bare yields: tasks start in
 * the order they were created, and sleep(0) lets the tasks created before it
 * start (no await has happened yet: no I/O of unknown latency is involved).
 * Other task steps still float among themselves.  A superset of the stock loop's
 * orders, which keep every registration order.
 *
 * Fair polls.  A task whose step ends in its poll_limit-th (or later)
 * consecutive bare yield (Handle.spins: sleep(0) in a loop that does nothing
 * else) busy-polls.  On the stock loop its next step runs behind every
 * handle ready when it yielded, and behind the timers due when its step
 * began (the next iteration moves them to the ready queue first); the
 * exploration otherwise lets it overtake them without bound, and a poll that
 * terminates on asyncio ends as a livelock at the step budget.  So (as CHESS's
 * fair scheduling does for spin loops) such a step parks the task: its next
 * step is not offered until each of those actors has taken a step (or lost
 * its last handle to a cancel); their steps add to PARK_TAG|task, which its
 * next step reads, enabling.  The parking set depends on the whole ready
 * queue, which every step changes, so the step that parks records a write of
 * the global barrier: every step is ordered with it, and DPOR reverses those
 * races.  A poll that can spin forever still does (nothing else is ready),
 * and is still a livelock.  No cycle of waits: a task parks only on actors
 * not parked then, so waits point from earlier parkings to later ones. */

static int parked_index(LoopCoreObject *self, cs_actor p) {
    for (size_t i = 0; i < self->n_parked; i++)
        if (self->parked[i] == p) return (int)i;
    return -1;
}

/* What a follower of `s` waits for: a chain's queued callbacks, a started task's first step. */
static int fifo_pending(const actor_slot *s) {
    return s->chain ? s->live != 0 : s->first_pending;
}

/* Reduced follows (issue 39).  The rule above defines, for a handle queued by step `ev` with
 * creation number `seq`, the set F of entries (chains, and with `starts` starters too) it
 * follows: o with o.start == ev and o.seq < seq, or o.start happening before ev, unless o
 * drained with its latest step happening before ev ("excluded").  Its step is not offered
 * while some o in F is pending, and reads CHAIN_TAG|o for each o in F.  F is O(entries): N
 * gathered tasks made F's O(N^2) in all, and each choice point rescanned them.  A follower
 * now keeps a subset D of F with the same blocking and the same transitive happens-before:
 *
 *   (a) An entry d is pending until its first step, and that step ran only when nothing in
 *       F(d) (its own registration's set) was pending.  Pending never comes back: a starter's
 *       first step is pending once; a chain registered by a step is joined only in that step
 *       (chain_actor is per event), so its `live` never grows again once followers exist.
 *       (Chains registered between steps do grow again, but have no start and are never
 *       followed.)  So for o in F(d): o pending implies d pending, unless d drained
 *       "hollow": by cancels, before any step of its own.
 *   (b) Every add to CHAIN_TAG|o (o's steps, cancels of o's live handles) happens while o
 *       is pending, so for o in F(d) all of them precede d's first step and (by its read of
 *       o, or inductively by the reduced reads) happen before it; d's first step adds to
 *       CHAIN_TAG|d, which the follower reads.  Reading d gives the follower every edge
 *       reading o would.  An excluded d (drained, its latest step before ev) gives them
 *       through ev instead, and everything in F(d) is excluded at ev too (its latest step
 *       happens before d's first), except hollow entries, which have no step to be excluded
 *       by: every hollow entry of F is read directly (self->hollows; rare).
 *   (c) F(d) contains every entry of the right kind that F contains and that happens before
 *       d's start: the entries one event registered form a group, in creation order; its
 *       last starter's F holds the group's earlier entries and, like the last chain's for
 *       chains, everything any group happening before that event holds.  So per group only
 *       the last chain and the last starter (before `seq` in ev's own group) are candidates,
 *       and a group whose start happens before a candidate already taken (a "coverer") is
 *       skipped.
 * D's entries are those candidates that are not excluded, plus the hollow entries of F: a
 * subset of F, so no edge is added, and by (b) and (c) every edge of F is implied, so
 * happens-before (what DPOR and the trace compare) is unchanged.  A candidate that drains
 * hollow later breaks (a): for blocking and for its reads it is replaced by its own D
 * (efollows, kept for that), recursively, filtered by F's rule at the follower's ev
 * (drained_at tells whether an entry was pending then) -- exactly the part of F it stood
 * for.  Blocking is then "some d in D is pending, or hollow with a pending d' in its D". */

/* Entry `a` stopped pending (its first step, or a cancel): when it happened, and whether it
 * drained hollow. */
static int fifo_drained(LoopCoreObject *self, cs_actor a) {
    actor_slot *s = &self->actors[a];
    if (s->chain_start < 0 || !(s->chain || s->starter)) return 0;
    s->drained_at = self->in_step ? self->cur_event : (int64_t)cs_trace_length(self->ex);
    if (s->chain_last >= 0 || s->hollow) return 0;
    s->hollow = 1;
    if (grow((void **)&self->hollows, &self->cap_hollows, self->n_hollows + 1,
             sizeof *self->hollows) < 0)
        return -1;
    self->hollows[self->n_hollows++] = a;
    return 0;
}

static void fifo_new_walk(LoopCoreObject *self) {
    if (++self->fifo_gen == 0) {
        for (size_t i = 0; i < self->n_actors; i++) self->actors[i].fmark = 0;
        self->fifo_gen = 1;
    }
}

/* Is entry o excluded from the follows computed at ev (drained by then, its latest step
 * happening before ev)?  Its latest step is final once it drained. */
static int fifo_excluded(LoopCoreObject *self, const actor_slot *o, int64_t ev) {
    return o->drained_at <= ev && o->chain_last >= 0 &&
           cs_trace_happens_before(self->ex, (size_t)o->chain_last, (size_t)ev);
}

/* Pending, or hollow with something it stood for pending ((a) above). */
static int fifo_pending_deep(LoopCoreObject *self, cs_actor d) {
    actor_slot *s = &self->actors[d];
    if (fifo_pending(s)) return 1;
    if (!s->hollow || s->fmark == self->fifo_gen) return 0;
    s->fmark = self->fifo_gen;
    for (size_t k = 0; k < s->n_efollows; k++)
        if (fifo_pending_deep(self, s->efollows[k])) return 1;
    return 0;
}

/* Not offered now: a parked poller, or a chain whose older chains are still queued. */
static int actor_blocked(LoopCoreObject *self, cs_actor a) {
    if (a >= self->n_actors) return 0;
    const actor_slot *s = &self->actors[a];
    if (s->n_waits) return 1;
    if (!s->n_follows) return 0;
    for (size_t k = 0; k < s->n_follows; k++)
        if (fifo_pending(&self->actors[s->follows[k].a])) return 1;
    int walked = 0;
    for (size_t k = 0; k < s->n_follows; k++) {
        const actor_slot *d = &self->actors[s->follows[k].a];
        if (!d->hollow) continue;
        if (!walked) fifo_new_walk(self);
        walked = 1;
        if (fifo_pending_deep(self, s->follows[k].a)) return 1;
    }
    return 0;
}

static int add_follow(LoopCoreObject *self, cs_actor c, cs_actor o, int64_t ev, int entry) {
    actor_slot *cs = &self->actors[c];
    actor_slot *os = &self->actors[o];
    if (os->fmark == self->fifo_gen) return 0; /* already in this D */
    os->fmark = self->fifo_gen;
    if (grow((void **)&cs->follows, &cs->cap_follows, cs->n_follows + 1, sizeof *cs->follows) <
        0)
        return -1;
    cs->follows[cs->n_follows++] = (fifo_follow){o, ev};
    if (!entry) return 0;
    if (grow((void **)&cs->efollows, &cs->cap_efollows, cs->n_efollows + 1,
             sizeof *cs->efollows) < 0)
        return -1;
    cs->efollows[cs->n_efollows++] = o;
    return 0;
}

/* Coverers kept per computation of D: past this many, candidates are taken without the test
 * (a larger D, never a wrong one). */
#define FIFO_COVERERS 16

/* After step `ev` ended (its clock is final), what the handles it queued
 * follow: each handle queued at creation number `seq` (a chain's first, a
 * task's next step) follows each chain registered before it -- started by a
 * step happening before `ev`, or earlier in `ev` itself -- unless that
 * chain's steps all happen before `ev` already.  A chain that drained before
 * `ev` ran without being ordered with it is followed too (the edge, not a
 * block): in an execution that runs `ev` first it is still queued and blocks,
 * and DPOR must not reverse the two on the strength of an execution where it
 * did not.  Computed as the reduced set D (above); `entry`: this is c's registration, whose
 * D is kept (efollows); `pc`, `ps`: in ev's own group, the last chain / starter created
 * before `seq` (-1: none). */
static int follow_chains(LoopCoreObject *self, cs_actor c, int64_t ev, uint64_t seq, int starts,
                         int entry, Py_ssize_t pc, Py_ssize_t ps) {
    fifo_new_walk(self);
    self->actors[c].fmark = self->fifo_gen; /* never itself */
    int64_t cov[FIFO_COVERERS];
    uint8_t cov_st[FIFO_COVERERS];
    size_t n_cov = 0;
    /* ev's group: its candidates are never excluded (they have not run), and cover every
     * group happening before ev, for their kinds */
    int all_chains = 0, all_starters = !starts;
    if (pc >= 0) {
        all_chains = 1;
        if (add_follow(self, c, self->chains[pc], ev, entry) < 0) return -1;
    }
    if (starts && ps >= 0) {
        all_chains = all_starters = 1;
        if (add_follow(self, c, self->chains[ps], ev, entry) < 0) return -1;
    }
    for (size_t gi = self->n_groups; gi-- > 0 && !(all_chains && all_starters);) {
        const fifo_group *g = &self->groups[gi];
        if (g->start < 0 || g->start >= ev ||
            !cs_trace_happens_before(self->ex, (size_t)g->start, (size_t)ev))
            continue;
        int need_c = g->last_chain >= 0 && !all_chains;
        int need_s = starts && g->last_starter >= 0 && !all_starters;
        for (size_t k = 0; k < n_cov && (need_c || need_s); k++) {
            if (!cs_trace_happens_before(self->ex, (size_t)g->start, (size_t)cov[k])) continue;
            need_c = 0;
            if (cov_st[k]) need_s = 0;
        }
        for (int kind = 0; kind < 2; kind++) {
            if (!(kind ? need_s : need_c)) continue;
            cs_actor d = self->chains[kind ? g->last_starter : g->last_chain];
            const actor_slot *ds = &self->actors[d];
            /* c itself (a task's later step): it ran, or its earlier follows are still kept */
            if (d != c && !fifo_excluded(self, ds, ev) && add_follow(self, c, d, ev, entry) < 0)
                return -1;
            if (n_cov < FIFO_COVERERS) {
                cov[n_cov] = g->start;
                cov_st[n_cov++] = (uint8_t)kind;
            }
        }
    }
    for (size_t i = 0; i < self->n_hollows; i++) {
        cs_actor o = self->hollows[i];
        const actor_slot *os = &self->actors[o];
        if (o == c || !(os->chain || (starts && os->starter))) continue;
        if (os->chain_start == ev ? os->chain_seq >= seq
                                  : !cs_trace_happens_before(self->ex, (size_t)os->chain_start,
                                                             (size_t)ev))
            continue;
        if (add_follow(self, c, o, ev, entry) < 0) return -1;
    }
    return 0;
}

/* In the step's own group chains[lo, hi): the last entry of kind `starter` before the
 * creation number `seq`, or -1. */
static Py_ssize_t group_prev(LoopCoreObject *self, size_t lo, size_t hi, uint64_t seq,
                             int starter) {
    size_t a = lo, b = hi;
    while (a < b) { /* first index with chain_seq >= seq */
        size_t m = a + (b - a) / 2;
        if (self->actors[self->chains[m]].chain_seq < seq) a = m + 1;
        else b = m;
    }
    return a == lo ? -1 : self->grp_prev[2 * (a - 1 - lo) + (starter ? 1 : 0)];
}

static int fifo_step_end(LoopCoreObject *self, int64_t ev) {
    int rc = 0;
    size_t lo = self->step_chains, hi = self->n_chains;
    /* started by ev: the group ev registered (the last one, if any) */
    if (hi > lo) {
        size_t need = 2 * (hi - lo);
        if (grow((void **)&self->grp_prev, &self->cap_grp_prev, need, sizeof *self->grp_prev) < 0)
            return -1;
        Py_ssize_t lc = -1, ls = -1;
        for (size_t i = lo; i < hi; i++) {
            const actor_slot *s = &self->actors[self->chains[i]];
            if (s->chain_start == ev) {
                if (s->chain) lc = (Py_ssize_t)i;
                else ls = (Py_ssize_t)i;
            }
            self->grp_prev[2 * (i - lo)] = lc;
            self->grp_prev[2 * (i - lo) + 1] = ls;
        }
    }
    for (size_t i = lo; rc == 0 && i < hi; i++) {
        cs_actor c = self->chains[i];
        const actor_slot *s = &self->actors[c];
        if (s->chain && s->chain_start == ev) {
            Py_ssize_t pc = i > lo ? group_prev(self, lo, hi, s->chain_seq, 0) : -1;
            rc = follow_chains(self, c, ev, s->chain_seq, 0, 1, pc, -1);
        }
    }
    for (size_t i = 0; rc == 0 && i < self->n_woken; i++) {
        cs_actor c = self->woken[i];
        uint64_t seq = self->woken_seq[i];
        const actor_slot *s = &self->actors[c];
        int entry = s->starter && s->chain_start == ev && s->chain_seq == seq && !s->n_efollows;
        Py_ssize_t pc = hi > lo ? group_prev(self, lo, hi, seq, 0) : -1;
        Py_ssize_t ps = hi > lo && self->woken_starts[i] ? group_prev(self, lo, hi, seq, 1) : -1;
        rc = follow_chains(self, c, ev, seq, self->woken_starts[i], entry, pc, ps);
    }
    self->n_woken = 0;
    self->step_chains = self->n_chains;
    return rc;
}

/* Actor `a` took a step, or lost its last handle: the pollers parked on it
 * stop waiting for it, ordered after what it did (an add in the open step). */
static int release_member(LoopCoreObject *self, cs_actor a) {
    for (size_t i = 0; i < self->n_parked;) {
        cs_actor p = self->parked[i];
        actor_slot *ps = &self->actors[p];
        int found = 0;
        for (size_t k = 0; k < ps->n_waits; k++)
            if (ps->waits[k] == a) {
                ps->waits[k] = ps->waits[--ps->n_waits];
                found = 1;
                break;
            }
        if (found && recording(self) && record_edge(self, PARK_TAG | p, CS_ADD) < 0) return -1;
        if (ps->n_waits == 0) {
            ps->park_read = 1;
            self->parked[i] = self->parked[--self->n_parked];
            continue;
        }
        i++;
    }
    return 0;
}

/* The reads of step-taking actor `a` for a hollow entry d it follows by a wake at ev: what d
 * stood for ((a) above), by F's rule at ev, recursively. */
static int read_hollow(LoopCoreObject *self, cs_actor a, cs_actor d, int64_t ev) {
    const actor_slot *ds = &self->actors[d];
    for (size_t k = 0; k < ds->n_efollows; k++) {
        cs_actor o = ds->efollows[k];
        actor_slot *os = &self->actors[o];
        if (o == a || fifo_excluded(self, os, ev)) continue;
        if (os->fmark != self->fifo_gen) {
            os->fmark = self->fifo_gen;
            if (record_edge(self, CHAIN_TAG | o, CS_READ | CS_ENABLING) < 0) return -1;
        }
        /* efollows point to earlier entries only: no cycle */
        if (os->hollow && read_hollow(self, a, o, ev) < 0) return -1;
    }
    return 0;
}

/* At a step's beginning: the edges of the FIFO and of parking. */
static int fair_step_begin(LoopCoreObject *self, cs_actor a) {
    actor_slot *s = &self->actors[a];
    int was_pending = fifo_pending(s);
    if (s->live) s->live--;
    if (s->n_follows) {
        fifo_new_walk(self);
        self->actors[a].fmark = self->fifo_gen;
        for (size_t k = 0; k < s->n_follows; k++) {
            cs_actor d = s->follows[k].a;
            actor_slot *ds = &self->actors[d];
            if (ds->fmark != self->fifo_gen) {
                ds->fmark = self->fifo_gen;
                if (record_edge(self, CHAIN_TAG | d, CS_READ | CS_ENABLING) < 0) return -1;
            }
            if (ds->hollow && read_hollow(self, a, d, s->follows[k].ev) < 0) return -1;
        }
    }
    s->n_follows = 0;
    if (s->chain || s->first_pending) {
        s->first_pending = 0;
        s->chain_last = self->cur_event;
        if (record_edge(self, CHAIN_TAG | a, CS_ADD) < 0) return -1;
    }
    if (was_pending && !fifo_pending(s) && fifo_drained(self, a) < 0) return -1;
    if (s->park_read) {
        s->park_read = 0;
        if (record_edge(self, PARK_TAG | a, CS_READ | CS_ENABLING) < 0) return -1;
    }
    return self->n_parked ? release_member(self, a) : 0;
}

/* After a busy-polling step of task actor `p`: the actors it waits for. */
static int park_poller(LoopCoreObject *self, cs_actor p) {
    actor_slot *ps = &self->actors[p];
    stamp_new_generation(self);
    ps->n_waits = 0;
    for (size_t i = 0; i < self->rlen + self->hlen; i++) {
        HandleObject *r = i < self->rlen ? ready_at(self, i) : self->heap[i - self->rlen];
        if (r->cancelled || r->actor == p || r->actor >= self->n_actors) continue;
        if (i >= self->rlen && (timer_never(r->when) || !timer_due(r->when, self->step_now)))
            continue;
        if (actor_blocked(self, r->actor)) continue;
        int first = stamp_first(self, r->actor);
        if (first < 0) return -1;
        if (!first) continue;
        if (grow((void **)&ps->waits, &ps->cap_waits, ps->n_waits + 1, sizeof *ps->waits) < 0)
            return -1;
        ps->waits[ps->n_waits++] = r->actor;
    }
    if (!ps->n_waits) return 0;
    size_t need = self->n_parked + 1;
    if (grow((void **)&self->parked, &self->cap_parked, need, sizeof *self->parked) < 0) return -1;
    if (parked_index(self, p) < 0) self->parked[self->n_parked++] = p;
    return 0;
}

static int explorer_step(LoopCoreObject *self, HandleObject *h, uint32_t choice) {
    cs_explorer *ex = self->ex;
    assert(!h->cancelled && h->callback); /* purge_cancelled runs before each choice */
    size_t ev = cs_trace_length(ex);
    int64_t by = h->scheduled_by;
    if (by >= (int64_t)ev) by = CS_SCHEDULED_BY_NONE;
    if (ensure_event(self, ev) < 0) return -1;
    self->choices[ev] = choice;
    Py_CLEAR(self->site_code[ev]);
    /* CS_AFTER_ALL with the barrier of the point where the handle became
     * runnable, not the latest one: a timer made due by a clock advance may
     * still be ready when the run ends and the runner makes handles (a later
     * barrier), and the steps between the two stay concurrent with it */
    int st = h->after_all ? cs_step_begin_after(ex, h->actor, h->after_len)
                          : cs_step_begin(ex, h->actor, by);
    if (cs_py_check(st) < 0) return -1;
    self->cur_actor = h->actor;
    self->cur_event = (int64_t)ev;
    self->in_step = 1;
    self->step_chains = self->n_chains;
    self->n_woken = 0;
    self->steps++;
    PyObject *task = NULL, *counted = NULL;
    int rc = 0, was_done = 0;
    if (self->clock_dirty) {
        self->clock_dirty = 0;
        rc = record(self, CLOCK_OBJECT, CS_WRITE);
    }
    if (rc == 0) rc = record(self, HANDLE_TAG | h->actor, CS_READ);
    if (rc == 0 && h->is_timer) rc = record(self, TIMERS_OBJECT, CS_READ);
    if (rc == 0) rc = fair_step_begin(self, h->actor);
    self->step_now = self->now;
    int task_was_done = 0;
    if (rc == 0) {
        task = cs_compat_task_of_step(h->callback);
        Py_XINCREF(task);
        if (!task) rc = record_shared_state(h->callback, 0, &counted, &was_done);
        else if ((task_was_done = cs_loop_future_is_done(task)) < 0) rc = -1;
        else rc = cs_hooks_record_task(task, CS_READ);
        if (rc == 0 && task) rc = cs_hooks_record_resumed(task);
    }
    self->cur_task = Py_XNewRef(task);
    self->cur_polls = h->polls;
    self->cur_spins = h->spins;
    if (rc == 0 && h->observes)
        rc = cs_hooks_record_key(h->observes, s_count, CS_READ | CS_ENABLING);
    if (rc == 0 && counted && !(self->counted = PyList_New(0))) rc = -1;
    cs_hooks_quiet_reads = counted != NULL;
    if (rc == 0) rc = cs_loop_run_handle(self, h);
    cs_hooks_quiet_reads = 0;
    if (cs_recording_step_end(rc == 0) < 0) rc = -1;
    if (rc == 0 && counted) rc = record_counted_future(self, counted, was_done);
    if (rc == 0 && task && !task_was_done) {
        int done = cs_loop_future_is_done(task);
        if (done < 0) rc = -1;
        else if (done) rc = cs_hooks_record_task(task, CS_WRITE);
        if (rc == 0 && done) rc = keep_if_asserted(self, task);
    }
    Py_CLEAR(self->counted);
    Py_CLEAR(counted);
    if (rc == 0) rc = cs_hooks_sweep();
    if (rc == 0) rc = busy_poll_check(self);
    /* a busy-polling step parks its task (see "fair polls") */
    int polling = rc == 0 && self->requeued && self->poll_limit &&
                  self->requeued->spins >= self->poll_limit;
    if (polling) rc = record(self, CS_OBJECT_ALL, CS_WRITE);
    Py_CLEAR(self->cur_task);
    Py_CLEAR(self->requeued);
    self->cur_spins = 0;
    if (task) {
        if (rc == 0) await_site(task, &self->site_code[ev], &self->site_line[ev]);
        Py_DECREF(task);
    }
    self->in_step = 0;
    self->cur_actor = CS_NO_ACTOR;
    self->cur_event = -1;
    st = cs_step_end(ex);
    if (rc < 0) return -1;
    if (cs_py_check(st) < 0) return -1;
    if (fifo_step_end(self, (int64_t)ev) < 0) return -1;
    if (polling && park_poller(self, h->actor) < 0) return -1;
    return 0;
}

static int run_explorer(LoopCoreObject *self) {
    for (;;) {
        if (!self->in_iteration) {
            if (external_pending(self)) return RUN_EXTERNAL;
            if (boundary(self) < 0) return -1;
            if (self->rlen == 0) {
                if (self->stopping) return RUN_STOPPED;
                if (self->hlen == 0 || timer_never(self->heap[0]->when)) return RUN_IDLE;
            }
            self->in_iteration = 1;
            self->batch_left = self->rlen;
        }
        if (purge_cancelled(self) < 0) return -1;
        if (self->batch_left == 0) {
            self->in_iteration = 0;
            if (self->stopping) return RUN_STOPPED;
            continue;
        }
        size_t n = 0;
        stamp_new_generation(self);
        if (en_reserve(self, self->rlen + self->hlen + 1) < 0) return -1;
        for (size_t i = 0; i < self->rlen; i++) {
            cs_actor a = ready_at(self, i)->actor;
            if (actor_blocked(self, a)) continue;
            if (en_add(self, &n, a, (Py_ssize_t)i) < 0) return -1;
        }
        /* strict: no timer is due unless the earliest one is */
        if (self->hlen && (self->relaxed || timer_due(self->heap[0]->when, self->now))) {
            Py_ssize_t *idx = PyMem_Malloc(self->hlen * sizeof *idx);
            if (!idx) {
                PyErr_NoMemory();
                return -1;
            }
            size_t m = 0;
            for (size_t i = 0; i < self->hlen; i++) {
                HandleObject *t = self->heap[i];
                if (!t->cancelled && !timer_never(t->when) &&
                    (self->relaxed || timer_due(t->when, self->now)))
                    idx[m++] = (Py_ssize_t)i;
            }
            timer_sort_heap = self->heap;
            qsort(idx, m, sizeof *idx, timer_cmp);
            int rc = 0;
            for (size_t k = 0; k < m && rc == 0; k++)
                rc = en_add(self, &n, self->heap[idx[k]]->actor, -idx[k] - 1);
            PyMem_Free(idx);
            if (rc < 0) return -1;
        }
        if (n == 0 && self->rlen) {
            /* unreachable: waits never form a cycle (see "FIFO and fairness") */
            PyErr_SetString(PyExc_SystemError, "chaossloth: every ready actor is blocked");
            return -1;
        }
        size_t pick = 0;
        int st = cs_choose(self->ex, self->en_actor, n, &pick);
        if (st == CS_EDIVERGED) {
            PyObject *lst = PyList_New((Py_ssize_t)n);
            if (!lst) return -1;
            for (size_t i = 0; i < n; i++) {
                PyObject *a = PyLong_FromUnsignedLong(self->en_actor[i]);
                if (!a) {
                    Py_DECREF(lst);
                    return -1;
                }
                PyList_SET_ITEM(lst, (Py_ssize_t)i, a);
            }
            Py_XSETREF(self->div_enabled, lst);
        }
        if (cs_py_check(st) < 0) return -1;
        Py_ssize_t ref = self->en_ref[pick];
        HandleObject *h;
        if (ref >= 0) {
            h = ready_remove(self, (size_t)ref);
            if ((size_t)ref < self->batch_left) self->batch_left--;
        } else {
            h = heap_remove(self, (size_t)(-ref - 1));
            h->scheduled = 0;
            if (h->when > self->now) {
                self->now = h->when;
                self->clock_dirty = 1;
            }
        }
        int rc = explorer_step(self, h, (uint32_t)pick);
        Py_DECREF(h);
        if (rc < 0) return -1;
    }
}

/* The LoopCore whose _run_steps runs now, innermost, with its thread: the running loop of that
 * thread for the hooks' naming (cs_loop_running_actor).  asyncio runs one loop per thread at a
 * time, and a loop running on another thread inside a step (a program's own thread) is not
 * the one a hook on this thread asks about: the thread is compared. */
static LoopCoreObject *running_core;
static unsigned long running_core_thread;

int cs_loop_running_actor(cs_actor *out) {
    LoopCoreObject *core = running_core;
    if (!core || running_core_thread != PyThread_get_thread_ident()) return 0;
    if (core->cur_actor == CS_NO_ACTOR) return 0;
    *out = core->cur_actor;
    return 1;
}

static PyObject *loop_run_steps(LoopCoreObject *self, PyObject *Py_UNUSED(unused)) {
    if (self->running) {
        PyErr_SetString(PyExc_RuntimeError, "This event loop is already running");
        return NULL;
    }
    unsigned long prev_owner = self->owner_thread;
    self->owner_thread = PyThread_get_thread_ident();
    self->running = 1;
    LoopCoreObject *outer_core = running_core;
    unsigned long outer_thread = running_core_thread;
    running_core = self;
    running_core_thread = self->owner_thread;
    int rc;
    if (self->ex) {
        /* the slot is this loop's since attach (a no-op then); claimed again in case it was
         * released meanwhile */
        rc = cs_exploration_claim(self, (PyObject *)self, self->explorer_obj);
        if (rc == 0) rc = run_explorer(self);
    } else {
        rc = run_fifo(self);
    }
    running_core = outer_core;
    running_core_thread = outer_thread;
    self->running = 0;
    self->owner_thread = prev_owner;
    if (rc < 0) {
        self->in_iteration = 0;
        return NULL;
    }
    return PyLong_FromLong(rc);
}

/* ----------------------------------------------------- explorer API */

static PyObject *loop_cs_attach(LoopCoreObject *self, PyObject *obj) {
    if (self->running) {
        PyErr_SetString(PyExc_RuntimeError, "cannot attach an explorer to a running loop");
        return NULL;
    }
    if (self->rlen || self->hlen) {
        PyErr_SetString(PyExc_RuntimeError,
                        "attach the explorer before anything is scheduled on the loop");
        return NULL;
    }
    cs_explorer *ex = cs_py_explorer_get(obj);
    if (!ex) return NULL;
    /* a new execution: the hooks start afresh even when the explorer is the same */
    cs_exploration_release(self);
    if (cs_exploration_claim(self, (PyObject *)self, obj) < 0) return NULL;
    Py_XSETREF(self->explorer_obj, Py_NewRef(obj));
    self->ex = ex;
    clear_execution(self);
    self->steps = 0;
    self->poll_advances = 0;
    self->in_iteration = 0;
    Py_RETURN_NONE;
}

static void detach(LoopCoreObject *self) {
    cs_exploration_release(self);
    self->ex = NULL;
    Py_CLEAR(self->explorer_obj);
    self->in_iteration = 0;
}

static PyObject *loop_cs_take_external(LoopCoreObject *self, PyObject *Py_UNUSED(unused)) {
    PyObject *items = self->inbox ? self->inbox : PyList_New(0);
    self->inbox = NULL;
    return items;
}

static PyObject *loop_cs_deliver(LoopCoreObject *self, PyObject *arg) {
    if (!PyObject_TypeCheck(arg, &cs_HandleType) || ((HandleObject *)arg)->is_timer) {
        PyErr_SetString(PyExc_TypeError, "_cs_deliver takes a Handle of call_soon_threadsafe");
        return NULL;
    }
    if (PyThread_get_thread_ident() != self->owner_thread || self->in_step) {
        PyErr_SetString(PyExc_RuntimeError,
                        "external events are delivered by the loop's thread between steps");
        return NULL;
    }
    HandleObject *h = (HandleObject *)arg;
    if (h->cancelled) Py_RETURN_NONE; /* cancelled by its thread before it was delivered */
    Py_INCREF(h);
    if (register_handle(self, h, 0, h->callback) < 0) return NULL;
    if (ready_push(self, h) < 0) {
        Py_DECREF(h);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *loop_get_external_count(LoopCoreObject *self, void *Py_UNUSED(c)) {
    return PyLong_FromSsize_t(self->inbox ? PyList_GET_SIZE(self->inbox) : 0);
}

static PyObject *loop_cs_external_looked(LoopCoreObject *self, PyObject *Py_UNUSED(unused)) {
    self->external_checked = self->steps + 1;
    Py_RETURN_NONE;
}

static PyObject *loop_cs_detach(LoopCoreObject *self, PyObject *unused) {
    (void)unused;
    if (self->running) {
        PyErr_SetString(PyExc_RuntimeError, "cannot detach the explorer of a running loop");
        return NULL;
    }
    detach(self);
    Py_RETURN_NONE;
}

/* close(): the loop will never run again, so it also gives the exploration slot back. */
static PyObject *loop_cs_clear(LoopCoreObject *self, PyObject *unused) {
    (void)unused;
    clear_queues(self);
    if (!self->running) detach(self);
    Py_RETURN_NONE;
}

static PyObject *actor_description(LoopCoreObject *self, cs_actor a, int *kind) {
    *kind = 0;
    if (a >= self->n_actors || !self->actors[a].kind) Py_RETURN_NONE;
    actor_slot *s = &self->actors[a];
    *kind = s->kind;
    if (s->kind == 2) return Py_NewRef(s->ref);
    PyObject *task = cs_compat_weakref_get(s->ref);
    if (task != Py_None) return task; /* or NULL: an exception */
    Py_DECREF(task);
    return Py_NewRef(s->name ? s->name : Py_None);
}

static PyObject *loop_cs_actors(LoopCoreObject *self, PyObject *Py_UNUSED(unused)) {
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    for (size_t a = 0; a < self->n_actors; a++) {
        int kind;
        PyObject *v = actor_description(self, (cs_actor)a, &kind);
        if (!v) goto fail;
        if (!kind) {
            Py_DECREF(v);
            continue;
        }
        PyObject *k = PyLong_FromSize_t(a);
        int rc = k ? PyDict_SetItem(d, k, v) : -1;
        Py_XDECREF(k);
        Py_DECREF(v);
        if (rc < 0) goto fail;
    }
    return d;
fail:
    Py_DECREF(d);
    return NULL;
}

static PyObject *loop_cs_actor_kinds(LoopCoreObject *self, void *Py_UNUSED(c)) {
    PyObject *d = PyDict_New();
    if (!d) return NULL;
    for (size_t a = 0; a < self->n_actors; a++) {
        if (!self->actors[a].kind) continue;
        PyObject *k = PyLong_FromSize_t(a);
        PyObject *v = PyUnicode_FromString(self->actors[a].kind == 1 ? "Task" : "callback");
        int rc = (k && v) ? PyDict_SetItem(d, k, v) : -1;
        Py_XDECREF(k);
        Py_XDECREF(v);
        if (rc < 0) {
            Py_DECREF(d);
            return NULL;
        }
    }
    return d;
}

static PyObject *loop_cs_await_sites(LoopCoreObject *self, PyObject *Py_UNUSED(unused)) {
    PyObject *out = PyList_New((Py_ssize_t)self->n_events);
    if (!out) return NULL;
    for (size_t i = 0; i < self->n_events; i++) {
        PyObject *v;
        if (self->site_code[i]) {
            v = Py_BuildValue("(Oi)", cs_compat_code_filename(self->site_code[i]),
                              self->site_line[i]);
            if (!v) {
                Py_DECREF(out);
                return NULL;
            }
        } else {
            v = Py_NewRef(Py_None);
        }
        PyList_SET_ITEM(out, (Py_ssize_t)i, v);
    }
    return out;
}

static PyObject *loop_cs_choices(LoopCoreObject *self, void *Py_UNUSED(c)) {
    PyObject *out = PyList_New((Py_ssize_t)self->n_events);
    if (!out) return NULL;
    for (size_t i = 0; i < self->n_events; i++) {
        PyObject *v = PyLong_FromUnsignedLong(self->choices[i]);
        if (!v) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, (Py_ssize_t)i, v);
    }
    return out;
}

static PyObject *loop_get_cs_actor(LoopCoreObject *self, void *Py_UNUSED(c)) {
    if (self->cur_actor == CS_NO_ACTOR) Py_RETURN_NONE;
    return PyLong_FromUnsignedLong(self->cur_actor);
}
static PyObject *loop_get_cs_event(LoopCoreObject *self, void *Py_UNUSED(c)) {
    return PyLong_FromLongLong(self->cur_event);
}
static PyObject *loop_get_cs_explorer(LoopCoreObject *self, void *Py_UNUSED(c)) {
    return Py_NewRef(self->explorer_obj ? self->explorer_obj : Py_None);
}
static PyObject *loop_get_cs_div_enabled(LoopCoreObject *self, void *Py_UNUSED(c)) {
    return Py_NewRef(self->div_enabled ? self->div_enabled : Py_None);
}
static PyObject *loop_get_timers(LoopCoreObject *self, void *Py_UNUSED(c)) {
    return PyUnicode_FromString(self->relaxed ? "relaxed" : "strict");
}
static int loop_set_timers(LoopCoreObject *self, PyObject *v, void *Py_UNUSED(c)) {
    if (v && PyUnicode_Check(v)) {
        if (PyUnicode_CompareWithASCIIString(v, "strict") == 0) {
            self->relaxed = 0;
            return 0;
        }
        if (PyUnicode_CompareWithASCIIString(v, "relaxed") == 0) {
            self->relaxed = 1;
            return 0;
        }
    }
    PyErr_Format(PyExc_ValueError, "timers must be 'strict' or 'relaxed', not %R", v ? v : Py_None);
    return -1;
}
static PyObject *loop_get_max_steps(LoopCoreObject *self, void *Py_UNUSED(c)) {
    if (!self->max_steps) Py_RETURN_NONE;
    return PyLong_FromUnsignedLongLong(self->max_steps);
}
static int loop_set_max_steps(LoopCoreObject *self, PyObject *v, void *Py_UNUSED(c)) {
    if (!v || v == Py_None) {
        self->max_steps = 0;
        return 0;
    }
    if (PyLong_Check(v)) {
        unsigned long long n = PyLong_AsUnsignedLongLong(v);
        if (!(n == (unsigned long long)-1 && PyErr_Occurred()) && n > 0) {
            self->max_steps = n;
            return 0;
        }
        PyErr_Clear();
    }
    PyErr_Format(PyExc_ValueError, "max_steps must be a positive int or None, not %R", v);
    return -1;
}
static PyObject *loop_get_poll_limit(LoopCoreObject *self, void *Py_UNUSED(c)) {
    return PyLong_FromUnsignedLong(self->poll_limit);
}
static int loop_set_poll_limit(LoopCoreObject *self, PyObject *v, void *Py_UNUSED(c)) {
    if (v && PyLong_Check(v)) {
        unsigned long n = PyLong_AsUnsignedLong(v);
        if (!(n == (unsigned long)-1 && PyErr_Occurred()) && n >= 1 && n <= UINT32_MAX) {
            self->poll_limit = (uint32_t)n;
            return 0;
        }
        PyErr_Clear();
    }
    PyErr_Format(PyExc_ValueError, "poll_limit must be an int in [1, 2**32), not %R",
                 v ? v : Py_None);
    return -1;
}
static PyObject *loop_get_poll_advances(LoopCoreObject *self, void *Py_UNUSED(c)) {
    return PyLong_FromUnsignedLongLong(self->poll_advances);
}
static PyObject *loop_get_steps(LoopCoreObject *self, void *Py_UNUSED(c)) {
    return PyLong_FromUnsignedLongLong(self->steps);
}
static PyObject *loop_get_ready_count(LoopCoreObject *self, void *Py_UNUSED(c)) {
    return PyLong_FromSize_t(self->rlen);
}
static PyObject *loop_get_timer_count(LoopCoreObject *self, void *Py_UNUSED(c)) {
    size_t n = 0;
    for (size_t i = 0; i < self->hlen; i++) n += !self->heap[i]->cancelled;
    return PyLong_FromSize_t(n);
}
static PyObject *loop_get_now(LoopCoreObject *self, void *Py_UNUSED(c)) {
    return PyFloat_FromDouble(self->now);
}
static PyObject *loop_get_scheduled(LoopCoreObject *self, void *Py_UNUSED(c)) {
    PyObject *out = PyList_New((Py_ssize_t)self->hlen);
    if (!out) return NULL;
    for (size_t i = 0; i < self->hlen; i++)
        PyList_SET_ITEM(out, (Py_ssize_t)i, Py_NewRef((PyObject *)self->heap[i]));
    return out;
}
static PyObject *loop_get_ready(LoopCoreObject *self, void *Py_UNUSED(c)) {
    PyObject *out = PyList_New((Py_ssize_t)self->rlen);
    if (!out) return NULL;
    for (size_t i = 0; i < self->rlen; i++)
        PyList_SET_ITEM(out, (Py_ssize_t)i, Py_NewRef((PyObject *)ready_at(self, i)));
    return out;
}

/* --------------------------------------------------------------- type */

static PyGetSetDef loop_getset[] = {
    {"_cs_actor", (getter)loop_get_cs_actor, NULL,
     "actor id of the step running now, or None outside steps (explorer attached)", NULL},
    {"_cs_event", (getter)loop_get_cs_event, NULL,
     "event index of the step running now, or -1 outside steps (explorer attached)", NULL},
    {"_cs_explorer", (getter)loop_get_cs_explorer, NULL, "the attached Explorer or None", NULL},
    {"_cs_actor_kinds", (getter)loop_cs_actor_kinds, NULL,
     "{actor id: 'Task' | 'callback'} for the actors of this execution", NULL},
    {"_cs_choices", (getter)loop_cs_choices, NULL,
     "per event: the index chosen in the enabled list (0 = stock order)", NULL},
    {"_cs_div_enabled", (getter)loop_get_cs_div_enabled, NULL,
     "actor ids that were enabled when the schedule diverged, or None", NULL},
    {"_cs_timers", (getter)loop_get_timers, (setter)loop_set_timers,
     "timer mode: 'strict' or 'relaxed'", NULL},
    {"_cs_max_steps", (getter)loop_get_max_steps, (setter)loop_set_max_steps,
     "step budget without an explorer (None: unlimited)", NULL},
    {"_cs_external_count", (getter)loop_get_external_count, NULL,
     "external events queued and not delivered yet", NULL},
    {"_cs_steps", (getter)loop_get_steps, NULL, "steps run (since creation or attach)", NULL},
    {"_cs_poll_limit", (getter)loop_get_poll_limit, (setter)loop_set_poll_limit,
     "consecutive bare yields of one task after which the clock advances to the earliest "
     "pending deadline (busy-poll clock; default 1000)",
     NULL},
    {"_cs_poll_advances", (getter)loop_get_poll_advances, NULL,
     "busy-poll clock advances (since creation or attach)", NULL},
    {"_cs_ready_count", (getter)loop_get_ready_count, NULL, "handles in the ready queue", NULL},
    {"_cs_timer_count", (getter)loop_get_timer_count, NULL, "pending (uncancelled) timers", NULL},
    {"_cs_now", (getter)loop_get_now, NULL, "the virtual clock, without recording a read", NULL},
    {"_scheduled", (getter)loop_get_scheduled, NULL, "the timer heap (a copy)", NULL},
    {"_cs_created", (getter)loop_get_created, NULL,
     "weak references to the tasks create_task made, in creation order (a copy; dead ones "
     "may be pruned)",
     NULL},
    {"_ready", (getter)loop_get_ready, NULL, "the ready queue (a copy)", NULL},
    {NULL},
};

static PyMemberDef loop_members[] = {
    {"_closed", T_BOOL, offsetof(LoopCoreObject, closed), 0, NULL},
    {"_stopping", T_BOOL, offsetof(LoopCoreObject, stopping), 0, NULL},
    {"_debug", T_BOOL, offsetof(LoopCoreObject, debug), 0, NULL},
    {"_cs_watching", T_BOOL, offsetof(LoopCoreObject, watching), 0,
     "a live thread of the program's may still send an external event"},
    {"_timer_cancelled_count", T_PYSSIZET, offsetof(LoopCoreObject, timer_cancelled_count),
     READONLY, NULL},
    {"_cs_future_class", T_OBJECT, offsetof(LoopCoreObject, future_class), 0,
     "class create_future() instantiates (None: asyncio.Future)"},
    {"_cs_task_class", T_OBJECT, offsetof(LoopCoreObject, task_class), 0,
     "class create_task() instantiates (None: asyncio.Task)"},
    {"_task_factory", T_OBJECT, offsetof(LoopCoreObject, task_factory), 0,
     "set_task_factory's factory (None: tasks are _cs_task_class or asyncio.Task)"},
    {"_current_handle", T_OBJECT, offsetof(LoopCoreObject, current_handle), READONLY, NULL},
    {NULL},
};

#define FASTKW(fn) (PyCFunction)(void (*)(void))fn, METH_FASTCALL | METH_KEYWORDS

static PyMethodDef loop_methods[] = {
    {"call_soon", FASTKW(loop_call_soon),
     "call_soon(callback, *args, context=None) -> Handle"},
    {"call_soon_threadsafe", FASTKW(loop_call_soon_threadsafe),
     "Like call_soon(); from another thread it raises NondeterminismError."},
    {"call_later", FASTKW(loop_call_later),
     "call_later(delay, callback, *args, context=None) -> TimerHandle"},
    {"call_at", FASTKW(loop_call_at),
     "call_at(when, callback, *args, context=None) -> TimerHandle"},
    {"time", (PyCFunction)loop_time, METH_NOARGS, "The virtual clock (seconds, starts at 0)."},
    {"get_debug", (PyCFunction)loop_get_debug, METH_NOARGS, "True in debug mode."},
    {"create_future", (PyCFunction)loop_create_future, METH_NOARGS,
     "Create a Future attached to the loop."},
    {"create_task", FASTKW(loop_create_task),
     "create_task(coro, *, name=None, context=None) -> Task: schedule a coroutine; honours "
     "set_task_factory and _cs_task_class."},
    {"_timer_handle_cancelled", (PyCFunction)loop_timer_handle_cancelled, METH_O,
     "Notification that a TimerHandle has been cancelled."},
    {"_run_steps", (PyCFunction)loop_run_steps, METH_NOARGS,
     "Dispatch until stopped (0), idle (1) or an external event may come (3)."},
    {"_cs_take_external", (PyCFunction)loop_cs_take_external, METH_NOARGS,
     "The external events queued so far, [(thread ident, handle)] in arrival order; "
     "the queue is emptied."},
    {"_cs_deliver", (PyCFunction)loop_cs_deliver, METH_O,
     "Make an external event's handle runnable, from the loop's thread between steps."},
    {"_cs_external_looked", (PyCFunction)loop_cs_external_looked, METH_NOARGS,
     "The front end waited for external events and none came: go on until the next step."},
    {"_cs_attach", (PyCFunction)loop_cs_attach, METH_O,
     "Make every step go through the explorer (starts a new execution's bookkeeping)."},
    {"_cs_detach", (PyCFunction)loop_cs_detach, METH_NOARGS, "Back to plain fifo dispatch."},
    {"_cs_clear", (PyCFunction)loop_cs_clear, METH_NOARGS,
     "Drop every queued handle; detach the explorer unless running (close())."},
    {"_cs_actors", (PyCFunction)loop_cs_actors, METH_NOARGS,
     "{actor id: task object (or its description once it is gone) | callback description}"},
    {"_cs_await_sites", (PyCFunction)loop_cs_await_sites, METH_NOARGS,
     "per event: (filename, line) where the step's task is suspended after it, or None"},
    {NULL},
};

static PyTypeObject LoopCoreType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "chaossloth._core.LoopCore",
    .tp_basicsize = sizeof(LoopCoreObject),
    .tp_dealloc = (destructor)loop_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_BASETYPE,
    .tp_doc = "C core of ControlledLoop: ready queue, timer heap, virtual clock, dispatch.",
    .tp_traverse = (traverseproc)loop_traverse,
    .tp_clear = (inquiry)loop_clear,
    .tp_methods = loop_methods,
    .tp_members = loop_members,
    .tp_getset = loop_getset,
    .tp_new = loop_new,
};

int cs_register_loop(PyObject *module) {
    if (PyType_Ready(&LoopCoreType) < 0) return -1;
    if (PyModule_AddObjectRef(module, "LoopCore", (PyObject *)&LoopCoreType) < 0) return -1;
    return 0;
}
