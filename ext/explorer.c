/*
 * explorer.c -- chaossloth._core.Explorer: a thin wrapper of one cs_explorer
 * for the Python drivers (runner.py, schedule.py, tests), plus the module
 * level entry points of the engine's analyses (diagnose, wait_for_cycle,
 * window_estimate, rate_estimate).
 *
 * Invariants
 *   - An Explorer always owns exactly one live cs_explorer (created in
 *     tp_new, freed in tp_dealloc); there is no half-initialised state.
 *   - Every engine status goes through cs_py_check; argument errors are
 *     raised here as TypeError / ValueError / IndexError with one readable
 *     message before the engine is called.
 *   - Per-step methods (choose, step_begin, access, step_end) use
 *     METH_FASTCALL and allocate nothing for up to CHOOSE_STACK enabled
 *     actors.
 *
 * Map (the banners below, in file order)
 *   argument helpers ..... ints, actor lists and schedules from Python objects
 *   construction ......... Explorer(strategy, **options), dealloc, repr
 *   actors ............... intern, actor_path
 *   execution ............ begin, choose, step_begin, access, step_end, end
 *   reports .............. schedule, trace (Event), happens_before, stats ...
 *   diagnosis ............ diagnose, wait_for_cycle
 *   collision window ..... window_estimate, rate_estimate
 *   registration ......... ExplorerType, Event, module constants
 */
#include "bridge.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    PyObject_HEAD
    cs_explorer *ex;
    cs_strategy_kind kind;
    uint64_t seed;
} ExplorerObject;

static PyTypeObject ExplorerType;
static PyTypeObject *EventType;

#define CHOOSE_STACK 64

/* ---------------------------------------------------- argument helpers */

/* An int in [0, max]; raises TypeError/ValueError naming `what`. */
static int arg_u64(PyObject *o, uint64_t max, const char *what, uint64_t *out) {
    if (!PyLong_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int, not %.80s", what,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (overflow > 0) {
        unsigned long long u = PyLong_AsUnsignedLongLong(o);
        if (u == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            goto range;
        }
        if (u > max) goto range;
        *out = u;
        return 0;
    }
    if (overflow < 0 || v < 0 || (uint64_t)v > max) goto range;
    *out = (uint64_t)v;
    return 0;
range:
    PyErr_Format(PyExc_ValueError, "%s must be an integer in [0, %llu]", what,
                 (unsigned long long)max);
    return -1;
}

/* Any int, reduced modulo 2**64 (object identities and key hashes, which
 * may be negative in Python). */
static int arg_u64_wrap(PyObject *o, const char *what, uint64_t *out) {
    if (!PyLong_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int, not %.80s", what,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    unsigned long long v = PyLong_AsUnsignedLongLongMask(o);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    *out = v;
    return 0;
}

static int arg_actor(PyObject *o, const char *what, cs_actor *out) {
    uint64_t v;
    if (arg_u64(o, (uint64_t)CS_NO_ACTOR - 1, what, &v) < 0) return -1;
    *out = (cs_actor)v;
    return 0;
}

static int arg_index(PyObject *o, size_t len, const char *what, size_t *out) {
    if (!PyLong_Check(o)) {
        PyErr_Format(PyExc_TypeError, "%s must be an int, not %.80s", what,
                     Py_TYPE(o)->tp_name);
        return -1;
    }
    Py_ssize_t v = PyLong_AsSsize_t(o);
    if (v == -1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return -1;
        PyErr_Clear();
        v = -1;
    }
    if (v < 0 || (size_t)v >= len) {
        PyErr_Format(PyExc_IndexError, "%s out of range (trace has %zu events)",
                     what, len);
        return -1;
    }
    *out = (size_t)v;
    return 0;
}

static int check_nargs(const char *name, Py_ssize_t nargs, Py_ssize_t want) {
    if (nargs == want) return 0;
    PyErr_Format(PyExc_TypeError, "%s() takes exactly %zd argument%s (%zd given)",
                 name, want, want == 1 ? "" : "s", nargs);
    return -1;
}

static PyObject *actor_or_none(cs_actor a) {
    if (a == CS_NO_ACTOR) Py_RETURN_NONE;
    return PyLong_FromUnsignedLong(a);
}

/* A new list [item(ctx, 0), ..., item(ctx, n - 1)], or NULL with the
 * exception of the first item that failed (the list built so far is freed). */
static PyObject *list_of(size_t n, PyObject *(*item)(void *ctx, size_t k), void *ctx) {
    PyObject *list = PyList_New((Py_ssize_t)n);
    if (!list) return NULL;
    for (size_t k = 0; k < n; k++) {
        PyObject *v = item(ctx, k);
        if (!v) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)k, v);
    }
    return list;
}

static PyObject *size_item(void *sizes, size_t k) {
    return PyLong_FromSize_t(((const size_t *)sizes)[k]);
}

static PyObject *actor_item(void *actors, size_t k) {
    return PyLong_FromUnsignedLong(((const cs_actor *)actors)[k]);
}

/* ------------------------------------------------------- construction */

static PyObject *Explorer_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"strategy",       "seed",      "pct_depth",
                             "pct_steps_hint", "replay",    "max_executions",
                             "max_steps",      "time_limit", "count_traces",
                             "shard_index",    "shard_count", "exact_traces",
                             NULL};
    PyObject *strategy = NULL, *seed = NULL, *depth = NULL, *hint = NULL;
    PyObject *replay = Py_None, *max_exec = NULL, *max_steps = NULL;
    PyObject *time_limit = NULL, *shard_index = NULL, *shard_count = NULL;
    PyObject *exact_traces = NULL;
    int count_traces = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|$OOOOOOOpOOO:Explorer", kwlist,
                                     &strategy, &seed, &depth, &hint, &replay,
                                     &max_exec, &max_steps, &time_limit,
                                     &count_traces, &shard_index, &shard_count,
                                     &exact_traces))
        return NULL;
    if (!PyUnicode_Check(strategy)) {
        PyErr_Format(PyExc_TypeError, "strategy must be a str, not %.80s",
                     Py_TYPE(strategy)->tp_name);
        return NULL;
    }
    const char *name = PyUnicode_AsUTF8(strategy);
    if (!name) return NULL;
    int kind = cs_strategy_from_name(name);
    if (kind < 0) {
        PyErr_Format(PyExc_ValueError,
                     "unknown strategy %R (expected one of fifo, random, replay, "
                     "pct, pos, dpor, exhaustive, guided)",
                     strategy);
        return NULL;
    }
    cs_config cfg;
    cs_config_init(&cfg, (cs_strategy_kind)kind);
    uint64_t v;
    if (seed) {
        if (arg_u64(seed, UINT64_MAX, "seed", &v) < 0) return NULL;
        cfg.seed = v;
    }
    if (shard_count) {
        if (arg_u64(shard_count, UINT32_MAX, "shard_count", &v) < 0) return NULL;
        cfg.shard_count = (uint32_t)v;
    }
    if (shard_index) {
        if (arg_u64(shard_index, UINT32_MAX, "shard_index", &v) < 0) return NULL;
        if (v >= (cfg.shard_count ? cfg.shard_count : 1)) {
            PyErr_SetString(PyExc_ValueError, "shard_index must be below shard_count");
            return NULL;
        }
        cfg.shard_index = (uint32_t)v;
    }
    if (depth) {
        if (arg_u64(depth, UINT32_MAX, "pct_depth", &v) < 0) return NULL;
        if (v < 1) {
            PyErr_SetString(PyExc_ValueError, "pct_depth must be >= 1");
            return NULL;
        }
        cfg.pct_depth = (uint32_t)v;
    }
    if (hint) {
        if (arg_u64(hint, UINT32_MAX, "pct_steps_hint", &v) < 0) return NULL;
        if (v < 1) {
            PyErr_SetString(PyExc_ValueError, "pct_steps_hint must be >= 1");
            return NULL;
        }
        cfg.pct_steps_hint = (uint32_t)v;
    }
    if (max_exec) {
        if (arg_u64(max_exec, UINT64_MAX, "max_executions", &v) < 0) return NULL;
        cfg.max_executions = v;
    }
    if (max_steps) {
        if (arg_u64(max_steps, UINT64_MAX, "max_steps", &v) < 0) return NULL;
        cfg.max_steps = v;
    }
    if (exact_traces) {
        if (arg_u64(exact_traces, UINT64_MAX, "exact_traces", &v) < 0) return NULL;
        cfg.exact_traces = v; /* 0: the engine's default, CS_EXACT_TRACES */
    }
    if (time_limit) {
        double t = PyFloat_AsDouble(time_limit);
        if (t == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "time_limit must be a number, not %.80s",
                         Py_TYPE(time_limit)->tp_name);
            return NULL;
        }
        if (!(t >= 0.0) || isinf(t)) {
            PyErr_SetString(PyExc_ValueError,
                            "time_limit must be a finite number of seconds >= 0");
            return NULL;
        }
        cfg.time_limit = t;
    }
    cfg.count_traces = count_traces;

    cs_actor *sched = NULL;
    ExplorerObject *self = NULL;
    if (replay != Py_None) {
        PyObject *fast = PySequence_Fast(replay, "replay must be a sequence of actor ids");
        if (!fast) return NULL;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
        sched = PyMem_Malloc((size_t)(n ? n : 1) * sizeof *sched);
        if (!sched) {
            Py_DECREF(fast);
            PyErr_NoMemory();
            return NULL;
        }
        for (Py_ssize_t i = 0; i < n; i++) {
            if (arg_actor(PySequence_Fast_GET_ITEM(fast, i), "replay item", &sched[i]) < 0) {
                Py_DECREF(fast);
                goto fail;
            }
        }
        Py_DECREF(fast);
        cfg.replay = sched;
        cfg.replay_len = (size_t)n;
    } else if (kind == CS_STRATEGY_REPLAY || kind == CS_STRATEGY_GUIDED) {
        PyErr_Format(PyExc_ValueError, "strategy '%s' needs replay=[actor ids]", name);
        return NULL;
    }

    self = (ExplorerObject *)type->tp_alloc(type, 0);
    if (!self) goto fail;
    self->kind = (cs_strategy_kind)kind;
    self->seed = cfg.seed;
    if (cs_py_check(cs_explorer_new(&cfg, &self->ex)) < 0) goto fail;
    PyMem_Free(sched);
    return (PyObject *)self;
fail:
    PyMem_Free(sched);
    Py_XDECREF(self);
    return NULL;
}

static void Explorer_dealloc(ExplorerObject *self) {
    cs_explorer_free(self->ex);
    self->ex = NULL;
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *Explorer_repr(ExplorerObject *self) {
    cs_stats st;
    cs_explorer_stats(self->ex, &st);
    return PyUnicode_FromFormat("<chaossloth._core.Explorer %s seed=%llu executions=%llu>",
                                cs_strategy_name(self->kind),
                                (unsigned long long)self->seed,
                                (unsigned long long)st.executions);
}

cs_explorer *cs_py_explorer_get(PyObject *obj) {
    if (!obj || !PyObject_TypeCheck(obj, &ExplorerType)) {
        PyErr_Format(PyExc_TypeError, "expected a chaossloth._core.Explorer, not %.80s",
                     obj ? Py_TYPE(obj)->tp_name : "NULL");
        return NULL;
    }
    return ((ExplorerObject *)obj)->ex;
}

/* ------------------------------------------------------------- actors */

static PyObject *Explorer_intern(ExplorerObject *self, PyObject *const *args,
                                 Py_ssize_t nargs) {
    if (check_nargs("intern", nargs, 2) < 0) return NULL;
    cs_actor parent = CS_NO_ACTOR, out;
    uint64_t index;
    if (args[0] != Py_None && arg_actor(args[0], "parent", &parent) < 0) return NULL;
    if (arg_u64(args[1], UINT32_MAX, "index", &index) < 0) return NULL;
    if (parent != CS_NO_ACTOR && cs_actor_path(self->ex, parent, NULL, NULL) != CS_OK) {
        PyErr_Format(PyExc_ValueError, "unknown parent actor %u", (unsigned)parent);
        return NULL;
    }
    if (cs_py_check(cs_actor_intern(self->ex, parent, (uint32_t)index, &out)) < 0)
        return NULL;
    return PyLong_FromUnsignedLong(out);
}

static PyObject *Explorer_actor_path(ExplorerObject *self, PyObject *arg) {
    cs_actor a, parent;
    uint32_t index;
    if (arg_actor(arg, "actor", &a) < 0) return NULL;
    if (cs_actor_path(self->ex, a, &parent, &index) != CS_OK) {
        PyErr_Format(PyExc_ValueError, "unknown actor %u", (unsigned)a);
        return NULL;
    }
    PyObject *p = actor_or_none(parent);
    if (!p) return NULL;
    return Py_BuildValue("(NI)", p, (unsigned)index);
}

/* ---------------------------------------------------------- execution */

static PyObject *Explorer_begin(ExplorerObject *self, PyObject *Py_UNUSED(ignored)) {
    int more = 0;
    if (cs_py_check(cs_execution_begin(self->ex, &more)) < 0) return NULL;
    return PyBool_FromLong(more);
}

static PyObject *Explorer_choose(ExplorerObject *self, PyObject *const *args,
                                 Py_ssize_t nargs) {
    if (check_nargs("choose", nargs, 1) < 0) return NULL;
    PyObject *seq = args[0];
    PyObject *fast = NULL;
    if (!PyList_CheckExact(seq) && !PyTuple_CheckExact(seq)) {
        fast = PySequence_Fast(seq, "choose() needs a list of actor ids");
        if (!fast) return NULL;
        seq = fast;
    }
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    if (n == 0) {
        Py_XDECREF(fast);
        PyErr_SetString(PyExc_ValueError, "choose() needs at least one enabled actor");
        return NULL;
    }
    cs_actor stackbuf[CHOOSE_STACK];
    cs_actor *en = stackbuf;
    PyObject *result = NULL;
    if (n > CHOOSE_STACK) {
        en = PyMem_Malloc((size_t)n * sizeof *en);
        if (!en) {
            PyErr_NoMemory();
            goto done;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = items[i];
        /* Fast path for small exact ints; arg_actor gives the message. */
        if (PyLong_CheckExact(it)) {
            long v = PyLong_AsLong(it);
            if (v >= 0 && (unsigned long)v < (unsigned long)CS_NO_ACTOR) {
                en[i] = (cs_actor)v;
                continue;
            }
            PyErr_Clear();
        }
        if (arg_actor(it, "enabled actor", &en[i]) < 0) goto done;
    }
    size_t pick = 0;
    if (cs_py_check(cs_choose(self->ex, en, (size_t)n, &pick)) < 0) goto done;
    result = PyLong_FromSize_t(pick);
done:
    if (en != stackbuf) PyMem_Free(en);
    Py_XDECREF(fast);
    return result;
}

static PyObject *Explorer_step_begin(ExplorerObject *self, PyObject *const *args,
                                     Py_ssize_t nargs) {
    if (check_nargs("step_begin", nargs, 2) < 0) return NULL;
    cs_actor a;
    if (arg_actor(args[0], "actor", &a) < 0) return NULL;
    if (!PyLong_Check(args[1])) {
        PyErr_Format(PyExc_TypeError, "scheduled_by must be an int, not %.80s",
                     Py_TYPE(args[1])->tp_name);
        return NULL;
    }
    long long by = PyLong_AsLongLong(args[1]);
    if (by == -1 && PyErr_Occurred()) return NULL;
    if (by < CS_AFTER_ALL || by >= (long long)cs_trace_length(self->ex)) {
        PyErr_Format(PyExc_ValueError,
                     "scheduled_by must be an earlier event index, SCHEDULED_BY_NONE "
                     "or AFTER_ALL (got %lld)",
                     by);
        return NULL;
    }
    if (cs_py_check(cs_step_begin(self->ex, a, (int64_t)by)) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *Explorer_access(ExplorerObject *self, PyObject *const *args,
                                 Py_ssize_t nargs) {
    if (check_nargs("access", nargs, 4) < 0) return NULL;
    uint64_t obj, key, kind, site;
    if (arg_u64_wrap(args[0], "object", &obj) < 0) return NULL;
    if (arg_u64_wrap(args[1], "key", &key) < 0) return NULL;
    if (arg_u64(args[2], 255, "kind", &kind) < 0) return NULL;
    uint64_t base = kind & CS_KIND_MASK, flags = kind & ~(uint64_t)CS_KIND_MASK;
    if ((base != CS_READ && base != CS_WRITE) || flags == (CS_ID_STABLE | CS_ID_CREATED)) {
        PyErr_SetString(PyExc_ValueError,
                        "kind must be READ or WRITE, optionally | ID_STABLE or | ID_CREATED");
        return NULL;
    }
    if (arg_u64(args[3], UINT32_MAX, "site", &site) < 0) return NULL;
    if (cs_py_check(cs_access_record(self->ex, obj, key, (cs_access_kind)kind,
                                     (uint32_t)site)) < 0)
        return NULL;
    Py_RETURN_NONE;
}

static PyObject *Explorer_step_end(ExplorerObject *self, PyObject *Py_UNUSED(ignored)) {
    if (cs_py_check(cs_step_end(self->ex)) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *Explorer_end(ExplorerObject *self, PyObject *arg) {
    uint64_t outcome;
    if (arg_u64(arg, 255, "outcome", &outcome) < 0) return NULL;
    if (outcome != CS_OUTCOME_OK && outcome != CS_OUTCOME_FAILED &&
        outcome != CS_OUTCOME_ABORTED) {
        PyErr_SetString(PyExc_ValueError,
                        "outcome must be OUTCOME_OK, OUTCOME_FAILED or OUTCOME_ABORTED");
        return NULL;
    }
    if (cs_py_check(cs_execution_end(self->ex, (int)outcome)) < 0) return NULL;
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------ reports */

static PyObject *Explorer_stats(ExplorerObject *self, PyObject *Py_UNUSED(ignored)) {
    cs_stats st;
    cs_explorer_stats(self->ex, &st);
    return Py_BuildValue("{sKsKsKsKsKsKsNsNsKsN}", "executions",
                         (unsigned long long)st.executions, "failing",
                         (unsigned long long)st.failing, "aborted",
                         (unsigned long long)st.aborted, "sleep_blocked",
                         (unsigned long long)st.sleep_blocked, "distinct_traces",
                         (unsigned long long)st.distinct_traces, "max_depth",
                         (unsigned long long)st.max_depth, "complete",
                         PyBool_FromLong(st.complete), "budget_hit",
                         PyBool_FromLong(st.budget_hit), "guide_deviations",
                         (unsigned long long)st.guide_deviations, "traces_estimated",
                         PyBool_FromLong(st.traces_estimated));
}

static PyObject *Explorer_divergence(ExplorerObject *self, PyObject *Py_UNUSED(ignored)) {
    size_t step, n_enabled;
    cs_actor expected;
    if (cs_divergence(self->ex, &step, &expected, &n_enabled) != CS_OK) Py_RETURN_NONE;
    cs_divergence_kind kind;
    int has_access = 0, missing = 0;
    cs_access acc;
    if (cs_divergence_detail(self->ex, &kind, &has_access, &acc, &missing) == CS_OK &&
        kind == CS_DIVERGED_CHANGED) {
        PyObject *access = Py_None;
        Py_INCREF(access);
        if (has_access) {
            Py_SETREF(access, Py_BuildValue("{sKsKsisIsO}", "object",
                                            (unsigned long long)acc.object, "key",
                                            (unsigned long long)acc.key, "kind", (int)acc.kind,
                                            "site", (unsigned)acc.site, "missing",
                                            missing ? Py_True : Py_False));
            if (!access) return NULL;
        }
        return Py_BuildValue("{snsIsssN}", "step", (Py_ssize_t)step, "actor", (unsigned)expected,
                             "kind", "changed", "access", access);
    }
    PyObject *exp = actor_or_none(expected);
    if (!exp) return NULL;
    return Py_BuildValue("{snsNsn}", "step", (Py_ssize_t)step, "expected", exp,
                         "enabled", (Py_ssize_t)n_enabled);
}

/* ------------------------------------------------------------ clocks */

/* The actor-indexed vector clock of an event, computed entry by entry from a
 * copy of the execution's happens-before (cs_hb_view) shared by every clock
 * of one trace() call: an execution of N tasks that share nothing has O(N)
 * events whose clocks are N entries wide, which as tuples cost O(N^2).  It
 * behaves as the tuple it stands for: len, indexing (negative too), slices
 * (a tuple), iteration, equality with tuples and other clocks, hash, repr. */
typedef struct {
    PyObject_HEAD
    cs_hb_view *view;
} HbViewObject;

typedef struct {
    PyObject_HEAD
    HbViewObject *owner;
    Py_ssize_t index, len;
} ClockObject;

static void HbView_dealloc(HbViewObject *self) {
    cs_hb_view_free(self->view);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject HbViewType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "chaossloth._core._HbView",
    .tp_basicsize = sizeof(HbViewObject),
    .tp_dealloc = (destructor)HbView_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One execution's happens-before, shared by its events' clocks.",
};

static void Clock_dealloc(ClockObject *self) {
    Py_XDECREF(self->owner);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static Py_ssize_t Clock_len(ClockObject *self) { return self->len; }

static PyObject *Clock_entry(ClockObject *self, Py_ssize_t k) {
    uint32_t v = 0;
    if (cs_py_check(cs_hb_view_clock(self->owner->view, (size_t)self->index, (cs_actor)k, &v)) <
        0)
        return NULL;
    return PyLong_FromUnsignedLong(v);
}

static PyObject *Clock_item(ClockObject *self, Py_ssize_t k) {
    if (k < 0 || k >= self->len) {
        PyErr_SetString(PyExc_IndexError, "clock index out of range");
        return NULL;
    }
    return Clock_entry(self, k);
}

static PyObject *Clock_tuple(ClockObject *self) {
    PyObject *tup = PyTuple_New(self->len);
    if (!tup) return NULL;
    for (Py_ssize_t k = 0; k < self->len; k++) {
        PyObject *v = Clock_entry(self, k);
        if (!v) {
            Py_DECREF(tup);
            return NULL;
        }
        PyTuple_SET_ITEM(tup, k, v);
    }
    return tup;
}

static PyObject *Clock_subscript(ClockObject *self, PyObject *key) {
    if (PyIndex_Check(key)) {
        Py_ssize_t k = PyNumber_AsSsize_t(key, PyExc_IndexError);
        if (k == -1 && PyErr_Occurred()) return NULL;
        if (k < 0) k += self->len;
        return Clock_item(self, k);
    }
    if (PySlice_Check(key)) {
        Py_ssize_t start, stop, step;
        if (PySlice_Unpack(key, &start, &stop, &step) < 0) return NULL;
        Py_ssize_t n = PySlice_AdjustIndices(self->len, &start, &stop, step);
        PyObject *tup = PyTuple_New(n);
        if (!tup) return NULL;
        for (Py_ssize_t i = 0, k = start; i < n; i++, k += step) {
            PyObject *v = Clock_entry(self, k);
            if (!v) {
                Py_DECREF(tup);
                return NULL;
            }
            PyTuple_SET_ITEM(tup, i, v);
        }
        return tup;
    }
    PyErr_Format(PyExc_TypeError, "clock indices must be integers or slices, not %.80s",
                 Py_TYPE(key)->tp_name);
    return NULL;
}

static PyTypeObject ClockType;

static PyObject *Clock_richcompare(ClockObject *self, PyObject *other, int op) {
    if (op != Py_EQ && op != Py_NE) Py_RETURN_NOTIMPLEMENTED;
    if (!PyTuple_Check(other) && !PyObject_TypeCheck(other, &ClockType))
        Py_RETURN_NOTIMPLEMENTED;
    PyObject *mine = Clock_tuple(self), *theirs = NULL, *res = NULL;
    if (!mine) return NULL;
    if (PyTuple_Check(other))
        theirs = Py_NewRef(other);
    else
        theirs = Clock_tuple((ClockObject *)other);
    if (theirs) res = PyObject_RichCompare(mine, theirs, op);
    Py_DECREF(mine);
    Py_XDECREF(theirs);
    return res;
}

static Py_hash_t Clock_hash(ClockObject *self) {
    PyObject *tup = Clock_tuple(self);
    if (!tup) return -1;
    Py_hash_t h = PyObject_Hash(tup);
    Py_DECREF(tup);
    return h;
}

static PyObject *Clock_repr(ClockObject *self) {
    PyObject *tup = Clock_tuple(self);
    if (!tup) return NULL;
    PyObject *r = PyObject_Repr(tup);
    Py_DECREF(tup);
    return r;
}

static PySequenceMethods Clock_as_sequence = {
    .sq_length = (lenfunc)Clock_len,
    .sq_item = (ssizeargfunc)Clock_item,
};

static PyMappingMethods Clock_as_mapping = {
    .mp_length = (lenfunc)Clock_len,
    .mp_subscript = (binaryfunc)Clock_subscript,
};

static PyTypeObject ClockType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "chaossloth._core.Clock",
    .tp_basicsize = sizeof(ClockObject),
    .tp_dealloc = (destructor)Clock_dealloc,
    .tp_repr = (reprfunc)Clock_repr,
    .tp_as_sequence = &Clock_as_sequence,
    .tp_as_mapping = &Clock_as_mapping,
    .tp_hash = (hashfunc)Clock_hash,
    .tp_richcompare = (richcmpfunc)Clock_richcompare,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An event's vector clock, indexed by actor id (a read-only sequence of ints, "
              "equal to the tuple of its entries).",
};

static PyObject *make_clock(HbViewObject *owner, size_t i) {
    ClockObject *c = PyObject_New(ClockObject, &ClockType);
    if (!c) return NULL;
    c->owner = (HbViewObject *)Py_NewRef(owner);
    c->index = (Py_ssize_t)i;
    c->len = (Py_ssize_t)cs_hb_view_clock_len(owner->view, i);
    return (PyObject *)c;
}

static PyObject *make_event(cs_explorer *ex, HbViewObject *view, size_t i) {
    cs_event ev;
    if (cs_py_check(cs_trace_event(ex, i, &ev)) < 0) return NULL;
    PyObject *rec = PyStructSequence_New(EventType);
    if (!rec) return NULL;
    PyObject *accs = PyList_New((Py_ssize_t)ev.n_accesses);
    if (!accs) goto fail;
    PyStructSequence_SetItem(rec, 3, accs);
    for (uint32_t k = 0; k < ev.n_accesses; k++) {
        cs_access a;
        if (cs_py_check(cs_trace_access(ex, (size_t)ev.first_access + k, &a)) < 0) goto fail;
        PyObject *t = Py_BuildValue("(KKiI)", (unsigned long long)a.object,
                                    (unsigned long long)a.key, (int)a.kind, (unsigned)a.site);
        if (!t) goto fail;
        PyList_SET_ITEM(accs, k, t);
    }
    PyObject *vc = make_clock(view, i);
    if (!vc) goto fail;
    PyStructSequence_SetItem(rec, 4, vc);
    PyObject *f0 = PyLong_FromUnsignedLong(ev.actor);
    PyObject *f1 = PyLong_FromUnsignedLong(ev.actor_step);
    PyObject *f2 = PyLong_FromLongLong(ev.scheduled_by);
    if (!f0 || !f1 || !f2) {
        Py_XDECREF(f0);
        Py_XDECREF(f1);
        Py_XDECREF(f2);
        goto fail;
    }
    PyStructSequence_SetItem(rec, 0, f0);
    PyStructSequence_SetItem(rec, 1, f1);
    PyStructSequence_SetItem(rec, 2, f2);
    return rec;
fail:
    /* Unset fields are NULL; the struct sequence dealloc tolerates them. */
    Py_DECREF(rec);
    return NULL;
}

static PyObject *Explorer_trace(ExplorerObject *self, PyObject *Py_UNUSED(ignored)) {
    HbViewObject *view = PyObject_New(HbViewObject, &HbViewType);
    if (!view) return NULL;
    view->view = NULL;
    PyObject *list = NULL;
    if (cs_py_check(cs_trace_hb_view(self->ex, &view->view)) < 0) goto done;
    size_t n = cs_trace_length(self->ex);
    list = PyList_New((Py_ssize_t)n);
    if (!list) goto done;
    for (size_t k = 0; k < n; k++) {
        PyObject *ev = make_event(self->ex, view, k);
        if (!ev) {
            Py_CLEAR(list);
            goto done;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)k, ev);
    }
done:
    Py_DECREF(view);
    return list;
}

/* name(a, b) -> bool: a relation between two events of the trace. */
static PyObject *event_relation(ExplorerObject *self, PyObject *const *args, Py_ssize_t nargs,
                                const char *name,
                                int (*rel)(const cs_explorer *, size_t, size_t)) {
    if (check_nargs(name, nargs, 2) < 0) return NULL;
    size_t n = cs_trace_length(self->ex), a, b;
    if (arg_index(args[0], n, "event index", &a) < 0) return NULL;
    if (arg_index(args[1], n, "event index", &b) < 0) return NULL;
    return PyBool_FromLong(rel(self->ex, a, b));
}

static PyObject *Explorer_happens_before(ExplorerObject *self, PyObject *const *args,
                                         Py_ssize_t nargs) {
    return event_relation(self, args, nargs, "happens_before", cs_trace_happens_before);
}

static PyObject *Explorer_dependent(ExplorerObject *self, PyObject *const *args,
                                    Py_ssize_t nargs) {
    return event_relation(self, args, nargs, "dependent", cs_trace_dependent);
}

static PyObject *Explorer_predecessors(ExplorerObject *self, PyObject *arg) {
    size_t len = cs_trace_length(self->ex), i, n = 0;
    if (arg_index(arg, len, "event index", &i) < 0) return NULL;
    if (cs_py_check(cs_trace_predecessors(self->ex, i, NULL, 0, &n)) < 0) return NULL;
    size_t *buf = PyMem_Malloc((n ? n : 1) * sizeof *buf);
    if (!buf) return PyErr_NoMemory();
    size_t got = 0;
    PyObject *list = NULL;
    if (cs_py_check(cs_trace_predecessors(self->ex, i, buf, n, &got)) == 0)
        list = list_of(got > n ? n : got, size_item, buf);
    PyMem_Free(buf);
    return list;
}

static PyObject *Explorer_schedule(ExplorerObject *self, PyObject *Py_UNUSED(ignored)) {
    size_t n = cs_trace_length(self->ex), got = 0;
    cs_actor *buf = PyMem_Malloc((n ? n : 1) * sizeof *buf);
    if (!buf) return PyErr_NoMemory();
    PyObject *list = NULL;
    if (cs_py_check(cs_trace_schedule(self->ex, buf, n, &got)) == 0)
        list = list_of(got > n ? n : got, actor_item, buf);
    PyMem_Free(buf);
    return list;
}

static PyObject *race_item(void *races, size_t k) {
    const cs_race *r = (const cs_race *)races + k;
    return Py_BuildValue("(nn)", (Py_ssize_t)r->first, (Py_ssize_t)r->second);
}

static PyObject *Explorer_races(ExplorerObject *self, PyObject *Py_UNUSED(ignored)) {
    size_t n = 0, got = 0;
    if (cs_py_check(cs_trace_races(self->ex, NULL, 0, &n)) < 0) return NULL;
    cs_race *buf = PyMem_Malloc((n ? n : 1) * sizeof *buf);
    if (!buf) return PyErr_NoMemory();
    PyObject *list = NULL;
    if (cs_py_check(cs_trace_races(self->ex, buf, n, &got)) == 0)
        list = list_of(got > n ? n : got, race_item, buf);
    PyMem_Free(buf);
    return list;
}

static PyObject *Explorer_reversal(ExplorerObject *self, PyObject *const *args,
                                   Py_ssize_t nargs) {
    if (check_nargs("reversal", nargs, 2) < 0) return NULL;
    size_t len = cs_trace_length(self->ex), i, j, got = 0;
    if (arg_index(args[0], len, "event index", &i) < 0) return NULL;
    if (arg_index(args[1], len, "event index", &j) < 0) return NULL;
    if (i >= j) {
        PyErr_SetString(PyExc_ValueError, "reversal(i, j) needs i < j");
        return NULL;
    }
    cs_actor *buf = PyMem_Malloc((len ? len : 1) * sizeof *buf);
    if (!buf) return PyErr_NoMemory();
    PyObject *list = NULL;
    if (cs_py_check(cs_trace_reversal(self->ex, i, j, buf, len, &got)) == 0)
        list = list_of(got > len ? len : got, actor_item, buf);
    PyMem_Free(buf);
    return list;
}

static PyObject *Explorer_get_strategy(ExplorerObject *self, void *Py_UNUSED(c)) {
    return PyUnicode_FromString(cs_strategy_name(self->kind));
}

static PyObject *Explorer_get_seed(ExplorerObject *self, void *Py_UNUSED(c)) {
    return PyLong_FromUnsignedLongLong(self->seed);
}

static PyGetSetDef Explorer_getset[] = {
    {"strategy", (getter)Explorer_get_strategy, NULL, "strategy name", NULL},
    {"seed", (getter)Explorer_get_seed, NULL, "seed of the randomised strategies", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

#define FASTCALL(f) (PyCFunction)(void (*)(void))(f), METH_FASTCALL

/* ------------------------------------------------ sharing the tree */
/* cs_share_* (chaossloth.h): a dpor exploration split across forked
 * processes, between executions; parallel.py drives them. */

static PyObject *Explorer_share_offer(ExplorerObject *self, PyObject *Py_UNUSED(ignored)) {
    size_t position = 0;
    int found = 0;
    if (cs_py_check(cs_share_offer(self->ex, &position, &found)) < 0) return NULL;
    if (!found) Py_RETURN_NONE;
    return PyLong_FromSize_t(position);
}

static PyObject *Explorer_share_give(ExplorerObject *self, PyObject *arg) {
    uint64_t position;
    size_t token = 0;
    if (arg_u64(arg, SIZE_MAX, "position", &position) < 0) return NULL;
    if (cs_py_check(cs_share_give(self->ex, (size_t)position, &token)) < 0) return NULL;
    return PyLong_FromSize_t(token);
}

static PyObject *Explorer_share_take(ExplorerObject *self, PyObject *arg) {
    uint64_t position;
    if (arg_u64(arg, SIZE_MAX, "position", &position) < 0) return NULL;
    if (cs_py_check(cs_share_take(self->ex, (size_t)position)) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *Explorer_share_done(ExplorerObject *self, PyObject *const *args,
                                     Py_ssize_t nargs) {
    if (check_nargs("share_done", nargs, 2) < 0) return NULL;
    uint64_t position, token;
    if (arg_u64(args[0], SIZE_MAX, "position", &position) < 0 ||
        arg_u64(args[1], SIZE_MAX, "token", &token) < 0)
        return NULL;
    if (cs_py_check(cs_share_done(self->ex, (size_t)position, (size_t)token)) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *Explorer_share_reports(ExplorerObject *self, PyObject *Py_UNUSED(ignored)) {
    const uint8_t *buf = NULL;
    size_t len = 0;
    if (cs_py_check(cs_share_reports(self->ex, &buf, &len)) < 0) return NULL;
    PyObject *out = PyBytes_FromStringAndSize((const char *)buf, (Py_ssize_t)len);
    if (!out) return NULL;
    if (cs_py_check(cs_share_reports_clear(self->ex)) < 0) {
        Py_DECREF(out);
        return NULL;
    }
    return out;
}

static PyObject *Explorer_share_import(ExplorerObject *self, PyObject *const *args,
                                       Py_ssize_t nargs) {
    if (check_nargs("share_import", nargs, 2) < 0) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0) return NULL;
    PyObject *seq = PySequence_Fast(args[1], "share_import: the actor map must be a sequence");
    cs_actor *map = NULL;
    PyObject *result = NULL;
    if (!seq) goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    map = PyMem_Malloc((size_t)(n ? n : 1) * sizeof *map);
    if (!map) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (arg_actor(PySequence_Fast_GET_ITEM(seq, i), "actor", &map[i]) < 0) goto done;
    if (cs_py_check(cs_share_import(self->ex, view.buf, (size_t)view.len, map, (size_t)n)) < 0)
        goto done;
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(map);
    Py_XDECREF(seq);
    PyBuffer_Release(&view);
    return result;
}

static PyObject *Explorer_share_waiting(ExplorerObject *self, PyObject *Py_UNUSED(ignored)) {
    size_t position = 0;
    int waiting = 0;
    if (cs_py_check(cs_share_waiting(self->ex, &position, &waiting)) < 0) return NULL;
    if (!waiting) Py_RETURN_NONE;
    return PyLong_FromSize_t(position);
}

static PyObject *Explorer_share_resume(ExplorerObject *self, PyObject *Py_UNUSED(ignored)) {
    if (cs_py_check(cs_share_resume(self->ex)) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyMethodDef Explorer_methods[] = {
    {"intern", FASTCALL(Explorer_intern),
     "intern(parent: int | None, index: int) -> int: actor id of a creation path"},
    {"actor_path", (PyCFunction)Explorer_actor_path, METH_O,
     "actor_path(actor) -> (parent | None, index)"},
    {"begin", (PyCFunction)Explorer_begin, METH_NOARGS,
     "begin() -> bool: start the next execution; False when exploration is over"},
    {"choose", FASTCALL(Explorer_choose),
     "choose(enabled: list[int]) -> int: index of the actor to run next"},
    {"step_begin", FASTCALL(Explorer_step_begin),
     "step_begin(actor, scheduled_by): open a step"},
    {"access", FASTCALL(Explorer_access),
     "access(object, key, kind, site): record an access of the open step"},
    {"step_end", (PyCFunction)Explorer_step_end, METH_NOARGS, "step_end(): close the step"},
    {"end", (PyCFunction)Explorer_end, METH_O, "end(outcome): end the execution"},
    {"stats", (PyCFunction)Explorer_stats, METH_NOARGS, "stats() -> dict"},
    {"divergence", (PyCFunction)Explorer_divergence, METH_NOARGS,
     "divergence() -> {'step', 'expected', 'enabled'} | {'step', 'actor', 'kind': 'changed', "
     "'access': {'object', 'key', 'kind', 'site', 'missing'} | None} | None"},
    {"trace", (PyCFunction)Explorer_trace, METH_NOARGS,
     "trace() -> list[Event] of the current (or last) execution"},
    {"happens_before", FASTCALL(Explorer_happens_before),
     "happens_before(a, b) -> bool"},
    {"dependent", FASTCALL(Explorer_dependent), "dependent(a, b) -> bool"},
    {"predecessors", (PyCFunction)Explorer_predecessors, METH_O,
     "predecessors(i) -> list[int]: immediate happens-before predecessors"},
    {"races", (PyCFunction)Explorer_races, METH_NOARGS,
     "races() -> list[tuple[int, int]]: the reversible races (i, j) of the current execution"},
    {"reversal", FASTCALL(Explorer_reversal),
     "reversal(i, j) -> list[int]: the schedule that runs race (i, j)'s j before i"},
    {"schedule", (PyCFunction)Explorer_schedule, METH_NOARGS,
     "schedule() -> list[int]: actor sequence of the current execution"},
    {"share_offer", (PyCFunction)Explorer_share_offer, METH_NOARGS,
     "share_offer() -> int | None: the shallowest position with a dpor branch to give"},
    {"share_give", (PyCFunction)Explorer_share_give, METH_O,
     "share_give(position) -> int: the branch offered there is another process's now "
     "(the token share_done names it by)"},
    {"share_take", (PyCFunction)Explorer_share_take, METH_O,
     "share_take(position): explore only the branch offered there (in the fork)"},
    {"share_reports", (PyCFunction)Explorer_share_reports, METH_NOARGS,
     "share_reports() -> bytes: the races reversed above this process's branch, "
     "since the last call"},
    {"share_import", FASTCALL(Explorer_share_import),
     "share_import(reports, actor_map): a taker's reports (map[taker id] = id here)"},
    {"share_done", FASTCALL(Explorer_share_done),
     "share_done(position, token): the branch given there has reported its last"},
    {"share_waiting", (PyCFunction)Explorer_share_waiting, METH_NOARGS,
     "share_waiting() -> int | None: the held position backtracking stopped at"},
    {"share_resume", (PyCFunction)Explorer_share_resume, METH_NOARGS,
     "share_resume(): backtrack on from the held position"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ExplorerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "chaossloth._core.Explorer",
    .tp_basicsize = sizeof(ExplorerObject),
    .tp_dealloc = (destructor)Explorer_dealloc,
    .tp_repr = (reprfunc)Explorer_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Explorer(strategy, *, seed=0, pct_depth=3, pct_steps_hint=64, replay=None, "
              "max_executions=0, max_steps=0, time_limit=0.0, count_traces=False, "
              "shard_index=0, shard_count=1, exact_traces=0)\n\n"
              "One exploration of a program's schedules by the C engine.",
    .tp_methods = Explorer_methods,
    .tp_getset = Explorer_getset,
    .tp_new = Explorer_new,
};

static PyStructSequence_Field event_fields[] = {
    {"actor", "actor id"},
    {"actor_step", "the actor's n-th step (0-based)"},
    {"scheduled_by", "event index that made it runnable, or SCHEDULED_BY_NONE / AFTER_ALL"},
    {"accesses", "list of (object, key, kind, site)"},
    {"clock", "vector clock, indexed by actor id (a Clock: a read-only sequence of ints)"},
    {NULL, NULL},
};

static PyStructSequence_Desc event_desc = {
    "chaossloth._core.Event",
    "One step of an execution.",
    event_fields,
    5,
};

/* --------------------------------------------------------- diagnosis */

/* Global access index (as in cs_finding; the position in the execution's
 * flattened access list, i.e. over trace()[0].accesses + trace()[1].accesses
 * + ...) and the access's site, or None for both. */
static int access_fields(cs_explorer *ex, size_t access, PyObject **index, PyObject **site) {
    if (access == CS_NO_INDEX) {
        *index = Py_NewRef(Py_None);
        *site = Py_NewRef(Py_None);
        return 0;
    }
    cs_access a;
    if (cs_py_check(cs_trace_access(ex, access, &a)) < 0) return -1;
    *index = PyLong_FromSize_t(access);
    *site = PyLong_FromUnsignedLong(a.site);
    if (!*index || !*site) {
        Py_CLEAR(*index);
        Py_CLEAR(*site);
        return -1;
    }
    return 0;
}

static PyObject *finding_dict(cs_explorer *ex, const cs_finding *f) {
    PyObject *pi = NULL, *ps = NULL, *ri = NULL, *rs = NULL, *ci = NULL, *cs = NULL;
    PyObject *res = NULL;
    if (access_fields(ex, f->p_access, &pi, &ps) < 0) goto done;
    if (access_fields(ex, f->r_access, &ri, &rs) < 0) goto done;
    if (access_fields(ex, f->c_access, &ci, &cs) < 0) goto done;
    res = Py_BuildValue("{sssssIsIsnsnsnsOsOsOsOsOsOsKsK}", "kind", cs_hazard_name(f->kind),
                        "pattern", cs_hazard_pattern(f->kind), "local_actor",
                        (unsigned)f->local_actor, "remote_actor", (unsigned)f->remote_actor,
                        "p_event", (Py_ssize_t)f->p_event, "r_event", (Py_ssize_t)f->r_event,
                        "c_event", (Py_ssize_t)f->c_event, "p_access", pi, "r_access", ri,
                        "c_access", ci, "p_site", ps, "r_site", rs, "c_site", cs, "object",
                        (unsigned long long)f->object, "key", (unsigned long long)f->key);
done:
    Py_XDECREF(pi);
    Py_XDECREF(ps);
    Py_XDECREF(ri);
    Py_XDECREF(rs);
    Py_XDECREF(ci);
    Py_XDECREF(cs);
    return res;
}

struct findings {
    cs_explorer *ex;
    const cs_finding *found;
};

static PyObject *finding_item(void *findings, size_t k) {
    const struct findings *fs = findings;
    return finding_dict(fs->ex, &fs->found[k]);
}

static PyObject *py_diagnose(PyObject *Py_UNUSED(m), PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"explorer", "ignore", "limit", NULL};
    PyObject *exo, *ignore = NULL, *limit_o = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|O$O:diagnose", kwlist, &exo, &ignore,
                                     &limit_o))
        return NULL;
    uint64_t limit = UINT64_MAX;
    if (limit_o && limit_o != Py_None && arg_u64(limit_o, UINT64_MAX, "limit", &limit) < 0)
        return NULL;
    cs_explorer *ex = cs_py_explorer_get(exo);
    if (!ex) return NULL;
    uint64_t *ign = NULL;
    size_t n_ign = 0, n = 0;
    cs_finding *found = NULL;
    PyObject *list = NULL;
    if (ignore && ignore != Py_None) {
        PyObject *fast = PySequence_Fast(ignore, "ignore must be a sequence of object ids");
        if (!fast) return NULL;
        n_ign = (size_t)PySequence_Fast_GET_SIZE(fast);
        ign = PyMem_Malloc((n_ign ? n_ign : 1) * sizeof *ign);
        if (!ign) {
            Py_DECREF(fast);
            return PyErr_NoMemory();
        }
        for (size_t i = 0; i < n_ign; i++) {
            if (arg_u64_wrap(PySequence_Fast_GET_ITEM(fast, i), "ignored object", &ign[i]) < 0) {
                Py_DECREF(fast);
                goto done;
            }
        }
        Py_DECREF(fast);
    }
    if (cs_py_check(cs_diagnose(ex, ign, n_ign, NULL, 0, &n)) < 0) goto done;
    if (n > limit) n = (size_t)limit;
    found = PyMem_Malloc((n ? n : 1) * sizeof *found);
    if (!found) {
        PyErr_NoMemory();
        goto done;
    }
    size_t n2 = 0;
    if (cs_py_check(cs_diagnose(ex, ign, n_ign, found, n, &n2)) < 0) goto done;
    /* the trace is unchanged between the two calls, so n2 >= n */
    if (n2 < n) n = n2;
    list = list_of(n, finding_item, &(struct findings){ex, found});
done:
    PyMem_Free(ign);
    PyMem_Free(found);
    return list;
}

static PyObject *py_wait_for_cycle(PyObject *Py_UNUSED(m), PyObject *edges) {
    PyObject *fast = PySequence_Fast(edges, "edges must be a sequence of (waiter, resource, holder)");
    if (!fast) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    cs_wait_edge *e = PyMem_Malloc((size_t)(n ? n : 1) * sizeof *e);
    size_t *cyc = PyMem_Malloc((size_t)(n ? n : 1) * sizeof *cyc);
    PyObject *res = NULL;
    if (!e || !cyc) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *it = PySequence_Fast_GET_ITEM(fast, i);
        if (!PyTuple_Check(it) || PyTuple_GET_SIZE(it) != 3) {
            PyErr_Format(PyExc_TypeError,
                         "edge %zd must be a (waiter, resource, holder) tuple", i);
            goto done;
        }
        if (arg_actor(PyTuple_GET_ITEM(it, 0), "waiter", &e[i].waiter) < 0) goto done;
        if (arg_actor(PyTuple_GET_ITEM(it, 2), "holder", &e[i].holder) < 0) goto done;
        e[i].resource = (uint64_t)i; /* any Python object: the tuple is returned */
    }
    size_t len = 0;
    if (cs_py_check(cs_wait_for_cycle(e, (size_t)n, cyc, (size_t)n, &len)) < 0) goto done;
    if (len == 0) {
        res = Py_NewRef(Py_None);
        goto done;
    }
    res = PyList_New((Py_ssize_t)len);
    if (!res) goto done;
    for (size_t k = 0; k < len; k++)
        PyList_SET_ITEM(res, (Py_ssize_t)k,
                        Py_NewRef(PySequence_Fast_GET_ITEM(fast, (Py_ssize_t)cyc[k])));
done:
    PyMem_Free(e);
    PyMem_Free(cyc);
    Py_DECREF(fast);
    return res;
}

/* ---------------------------------------------------- collision window */

static PyObject *py_window_estimate(PyObject *Py_UNUSED(m), PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"offsets", "failed", "at", "w_min", "w_max", NULL};
    PyObject *offs, *fails, *at = NULL;
    cs_window_prior prior;
    cs_window_prior_init(&prior);
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|$Odd:window_estimate", kwlist, &offs,
                                     &fails, &at, &prior.w_min, &prior.w_max))
        return NULL;
    if (!(prior.w_min > 0) || !(prior.w_max > prior.w_min) || isinf(prior.w_max)) {
        PyErr_SetString(PyExc_ValueError, "need 0 < w_min < w_max < inf");
        return NULL;
    }
    PyObject *fo = NULL, *ff = NULL, *fa = NULL, *res = NULL, *curve = NULL;
    double *x = NULL;
    uint8_t *y = NULL;
    cs_window *w = NULL;
    fo = PySequence_Fast(offs, "offsets must be a sequence of seconds");
    if (!fo) goto done;
    ff = PySequence_Fast(fails, "failed must be a sequence of 0/1 (or bools)");
    if (!ff) goto done;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(fo);
    if (PySequence_Fast_GET_SIZE(ff) != n) {
        PyErr_Format(PyExc_ValueError, "offsets and failed differ in length (%zd vs %zd)", n,
                     PySequence_Fast_GET_SIZE(ff));
        goto done;
    }
    x = PyMem_Malloc((size_t)(n ? n : 1) * sizeof *x);
    y = PyMem_Malloc((size_t)(n ? n : 1) * sizeof *y);
    if (!x || !y) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        x[i] = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(fo, i));
        if (x[i] == -1.0 && PyErr_Occurred()) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "offsets[%zd] is not a number", i);
            goto done;
        }
        if (!isfinite(x[i]) || x[i] < 0) {
            PyErr_Format(PyExc_ValueError, "offsets[%zd] must be a finite number >= 0", i);
            goto done;
        }
        int t = PyObject_IsTrue(PySequence_Fast_GET_ITEM(ff, i));
        if (t < 0) goto done;
        y[i] = (uint8_t)t;
    }
    if (cs_py_check(cs_window_fit(x, y, (size_t)n, &prior, &w)) < 0) goto done;
    cs_window_summary s;
    cs_window_get_summary(w, &s);
    if (at && at != Py_None) {
        fa = PySequence_Fast(at, "at must be a sequence of offsets");
        if (!fa) goto done;
        Py_ssize_t m = PySequence_Fast_GET_SIZE(fa);
        curve = PyList_New(m);
        if (!curve) goto done;
        for (Py_ssize_t i = 0; i < m; i++) {
            double o = PyFloat_AsDouble(PySequence_Fast_GET_ITEM(fa, i));
            if (o == -1.0 && PyErr_Occurred()) goto done;
            if (!(o >= 0)) {
                PyErr_Format(PyExc_ValueError, "at[%zd] must be a number >= 0", i);
                goto done;
            }
            PyObject *v = PyFloat_FromDouble(cs_window_p_fail(w, o));
            if (!v) goto done;
            PyList_SET_ITEM(curve, i, v);
        }
    } else {
        curve = PyList_New(0);
        if (!curve) goto done;
    }
    /* "estimate" is the recommended point estimate: the median (the mean is
     * pulled up by the long upper tail of a one-sided posterior). */
    res = Py_BuildValue("{sdsdsdsdsdsdsKsKsO}", "estimate", s.median, "median", s.median,
                        "mean", s.mean, "lo", s.lo,
                        "hi", s.hi, "eps_mean", s.eps_mean, "n", (unsigned long long)s.n,
                        "failures", (unsigned long long)s.failures, "p_fail", curve);
done:
    cs_window_free(w);
    PyMem_Free(x);
    PyMem_Free(y);
    Py_XDECREF(fo);
    Py_XDECREF(ff);
    Py_XDECREF(fa);
    Py_XDECREF(curve);
    return res;
}

static PyObject *py_rate_estimate(PyObject *Py_UNUSED(m), PyObject *const *args,
                                  Py_ssize_t nargs) {
    if (check_nargs("rate_estimate", nargs, 2) < 0) return NULL;
    uint64_t f, n;
    if (arg_u64(args[0], UINT64_MAX, "failures", &f) < 0) return NULL;
    if (arg_u64(args[1], UINT64_MAX, "runs", &n) < 0) return NULL;
    if (f > n) {
        PyErr_SetString(PyExc_ValueError, "failures cannot exceed runs");
        return NULL;
    }
    cs_rate_summary r;
    if (cs_py_check(cs_rate_estimate(f, n, &r)) < 0) return NULL;
    return Py_BuildValue("{sdsdsd}", "mean", r.mean, "lo", r.lo, "hi", r.hi);
}

/* ------------------------------------------------------ registration */

static PyMethodDef module_functions[] = {
    {"diagnose", (PyCFunction)(void (*)(void))py_diagnose, METH_VARARGS | METH_KEYWORDS,
     "diagnose(explorer, ignore=(), *, limit=None) -> list[dict]: AVIO hazards and order violations of "
     "the explorer's current (or last) execution, best first"},
    {"wait_for_cycle", (PyCFunction)py_wait_for_cycle, METH_O,
     "wait_for_cycle(edges) -> list | None: one cycle of (waiter, resource, holder) edges"},
    {"window_estimate", (PyCFunction)(void (*)(void))py_window_estimate,
     METH_VARARGS | METH_KEYWORDS,
     "window_estimate(offsets, failed, *, at=(), w_min=1e-7, w_max=10.0) -> dict: posterior "
     "of the collision window width (estimate = median, median, mean, lo, hi = 95% interval, "
     "eps_mean, n, "
     "failures, p_fail = P(fail | offset) at each offset of `at`)"},
    {"rate_estimate", FASTCALL(py_rate_estimate),
     "rate_estimate(failures, runs) -> {'mean', 'lo', 'hi'}: Beta(1+f, 1+n-f) posterior"},
    {NULL, NULL, 0, NULL},
};

int cs_register_explorer(PyObject *m) {
    if (PyType_Ready(&ExplorerType) < 0) return -1;
    if (PyType_Ready(&HbViewType) < 0) return -1;
    if (PyType_Ready(&ClockType) < 0) return -1;
    if (PyModule_AddObjectRef(m, "Clock", (PyObject *)&ClockType) < 0) return -1;
    if (PyModule_AddObjectRef(m, "Explorer", (PyObject *)&ExplorerType) < 0) return -1;
    if (!EventType) {
        EventType = PyStructSequence_NewType(&event_desc);
        if (!EventType) return -1;
    }
    if (PyModule_AddObjectRef(m, "Event", (PyObject *)EventType) < 0) return -1;
    if (PyModule_AddFunctions(m, module_functions) < 0) return -1;
    struct {
        const char *name;
        long long v;
    } ints[] = {
        {"READ", CS_READ},
        {"WRITE", CS_WRITE},
        {"ADD", CS_ADD},
        {"ID_STABLE", CS_ID_STABLE},
        {"ID_CREATED", CS_ID_CREATED},
        {"OUTCOME_OK", CS_OUTCOME_OK},
        {"OUTCOME_FAILED", CS_OUTCOME_FAILED},
        {"OUTCOME_ABORTED", CS_OUTCOME_ABORTED},
        {"SCHEDULED_BY_NONE", CS_SCHEDULED_BY_NONE},
        {"AFTER_ALL", CS_AFTER_ALL},
        {"EXACT_TRACES", (long long)CS_EXACT_TRACES},
    };
    for (size_t i = 0; i < sizeof ints / sizeof *ints; i++)
        if (PyModule_AddIntConstant(m, ints[i].name, (long)ints[i].v) < 0) return -1;
    PyObject *whole = PyLong_FromUnsignedLongLong(CS_KEY_WHOLE);
    if (!whole || PyModule_AddObject(m, "KEY_WHOLE", whole) < 0) {
        Py_XDECREF(whole);
        return -1;
    }
    PyObject *names = Py_BuildValue("(ssssssss)", "fifo", "random", "replay", "pct", "pos",
                                    "dpor", "exhaustive", "guided");
    if (!names || PyModule_AddObject(m, "STRATEGIES", names) < 0) {
        Py_XDECREF(names);
        return -1;
    }
    return 0;
}
