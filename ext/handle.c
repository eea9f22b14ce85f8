/*
 * handle.c -- chaossloth._core.Handle and TimerHandle: the objects
 * LoopCore.call_soon / call_at / call_later return, with the Python surface
 * of asyncio.Handle / asyncio.TimerHandle (cancel, cancelled, when,
 * get_context, _run, repr, the private attributes asyncio reads).
 *
 * Invariants
 *   - A handle holds its callback and args until it is cancelled (then both
 *     are NULL, as stock) or collected; the loop reference keeps its loop
 *     alive while it is queued.
 *   - Cancelling goes through the loop (cs_loop_cancel_handle): the loop's
 *     cancelled counters stay exact and an explored step records the write.
 *   - TimerHandles compare by `when` only for ordering (stock __lt__), and by
 *     (when, callback, args, cancelled) for equality (stock __eq__).
 *
 * Map
 *   creation ................ cs_handle_new
 *   GC ...................... handle_traverse, handle_clear, handle_dealloc
 *   methods ................. cancel, cancelled, get_context, when, _run, repr
 *   TimerHandle ordering .... timer_hash, timer_richcompare
 *   attributes .............. the getters, then the type objects
 */
#include "loop.h"

#include <string.h>

/* ------------------------------------------------------------ creation */

HandleObject *cs_handle_new(LoopCoreObject *loop, int timer, PyObject *cb, PyObject *const *args,
                            Py_ssize_t nargs, PyObject *ctx, int debug) {
    PyObject *targs;
    if (nargs == 0) {
        targs = Py_NewRef(cs_empty_tuple);
    } else {
        if (!(targs = PyTuple_New(nargs))) return NULL;
        for (Py_ssize_t i = 0; i < nargs; i++) PyTuple_SET_ITEM(targs, i, Py_NewRef(args[i]));
    }
    if (ctx == NULL || ctx == Py_None) {
        ctx = PyContext_CopyCurrent();
        if (!ctx) {
            Py_DECREF(targs);
            return NULL;
        }
    } else if (!PyContext_CheckExact(ctx)) {
        PyErr_Format(PyExc_TypeError, "context must be a contextvars.Context, not %.80s",
                     Py_TYPE(ctx)->tp_name);
        Py_DECREF(targs);
        return NULL;
    } else {
        Py_INCREF(ctx);
    }
    HandleObject *h = PyObject_GC_New(HandleObject, timer ? &cs_TimerHandleType : &cs_HandleType);
    if (!h) {
        Py_DECREF(targs);
        Py_DECREF(ctx);
        return NULL;
    }
    h->callback = Py_NewRef(cb);
    h->args = targs;
    h->context = ctx;
    h->loop = (LoopCoreObject *)Py_NewRef((PyObject *)loop);
    h->source_traceback = NULL;
    h->repr = NULL;
    h->weakreflist = NULL;
    h->observes = NULL;
    h->when = 0.0;
    h->seq = 0;
    h->scheduled_by = -1;
    h->after_len = 0;
    h->actor = CS_NO_ACTOR;
    h->polls = 0;
    h->spins = 0;
    h->cancelled = h->scheduled = h->after_all = h->queued = 0;
    h->is_timer = (char)(timer != 0);
    PyObject_GC_Track(h);
    if (debug) {
        PyObject *frame = (PyObject *)PyEval_GetFrame();
        h->source_traceback = PyObject_CallOneArg(cs_extract_stack, frame ? frame : Py_None);
        if (!h->source_traceback) goto fail;
    }
    return h;
fail:
    Py_DECREF(h);
    return NULL;
}

/* ------------------------------------------------------------ GC and methods */

static int handle_traverse(HandleObject *h, visitproc visit, void *arg) {
    Py_VISIT(h->callback);
    Py_VISIT(h->args);
    Py_VISIT(h->context);
    Py_VISIT((PyObject *)h->loop);
    Py_VISIT(h->source_traceback);
    Py_VISIT(h->repr);
    Py_VISIT(h->observes);
    return 0;
}

static int handle_clear(HandleObject *h) {
    Py_CLEAR(h->callback);
    Py_CLEAR(h->args);
    Py_CLEAR(h->context);
    Py_CLEAR(h->loop);
    Py_CLEAR(h->source_traceback);
    Py_CLEAR(h->repr);
    Py_CLEAR(h->observes);
    return 0;
}

static void handle_dealloc(HandleObject *h) {
    PyObject_GC_UnTrack(h);
    if (h->weakreflist) PyObject_ClearWeakRefs((PyObject *)h);
    handle_clear(h);
    PyObject_GC_Del(h);
}

static PyObject *handle_cancel(HandleObject *h, PyObject *unused) {
    (void)unused;
    if (h->cancelled) Py_RETURN_NONE;
    LoopCoreObject *loop = h->loop;
    if (!loop) {
        h->cancelled = 1;
    } else if (cs_loop_cancel_handle(loop, h) < 0) {
        return NULL;
    }
    if (loop && cs_loop_debug(loop)) {
        PyObject *r = PyObject_Repr((PyObject *)h);
        if (!r) return NULL;
        Py_XSETREF(h->repr, r);
    }
    Py_CLEAR(h->callback);
    Py_CLEAR(h->args);
    Py_RETURN_NONE;
}

static PyObject *handle_cancelled(HandleObject *h, PyObject *Py_UNUSED(unused)) {
    return PyBool_FromLong(h->cancelled);
}

static PyObject *handle_get_context(HandleObject *h, PyObject *Py_UNUSED(unused)) {
    return Py_NewRef(h->context ? h->context : Py_None);
}

static PyObject *handle_when(HandleObject *h, PyObject *Py_UNUSED(unused)) {
    return PyFloat_FromDouble(h->when);
}

static PyObject *handle_repr(HandleObject *h) {
    if (h->repr) return Py_NewRef(h->repr);
    PyObject *parts = PyList_New(0), *s = NULL, *sep = NULL, *joined = NULL;
    if (!parts) return NULL;
    const char *tn = Py_TYPE(h)->tp_name, *dot = strrchr(tn, '.');
#define ADD(expr)                                                          \
    do {                                                                   \
        if (!(s = (expr)) || PyList_Append(parts, s) < 0) goto done;       \
        Py_CLEAR(s);                                                       \
    } while (0)
    ADD(PyUnicode_FromString(dot ? dot + 1 : tn));
    if (h->cancelled) ADD(PyUnicode_FromString("cancelled"));
    if (h->is_timer) {
        PyObject *w = PyFloat_FromDouble(h->when);
        if (!w) goto done;
        ADD(PyUnicode_FromFormat("when=%S", w));
        Py_DECREF(w);
    }
    if (h->callback)
        ADD(PyObject_CallFunctionObjArgs(cs_fmt_callback_source, h->callback,
                                         h->args ? h->args : cs_empty_tuple, NULL));
    if (h->source_traceback && PyList_Check(h->source_traceback) &&
        PyList_GET_SIZE(h->source_traceback) > 0) {
        PyObject *fr = PyList_GET_ITEM(h->source_traceback,
                                       PyList_GET_SIZE(h->source_traceback) - 1);
        PyObject *file = PySequence_GetItem(fr, 0), *line = file ? PySequence_GetItem(fr, 1) : NULL;
        if (!line) {
            Py_XDECREF(file);
            goto done;
        }
        s = PyUnicode_FromFormat("created at %S:%S", file, line);
        Py_DECREF(file);
        Py_DECREF(line);
        if (!s || PyList_Append(parts, s) < 0) goto done;
        Py_CLEAR(s);
    }
#undef ADD
    if (!(sep = PyUnicode_FromString(" "))) goto done;
    if (!(s = PyUnicode_Join(sep, parts))) goto done;
    joined = PyUnicode_FromFormat("<%U>", s);
done:
    Py_XDECREF(s);
    Py_XDECREF(sep);
    Py_DECREF(parts);
    return joined;
}

static PyObject *handle_run(HandleObject *h, PyObject *Py_UNUSED(unused)) {
    if (h->cancelled || !h->loop) Py_RETURN_NONE;
    if (cs_loop_run_handle(h->loop, h) < 0) return NULL;
    Py_RETURN_NONE;
}

static Py_hash_t timer_hash(HandleObject *h) {
    PyObject *w = PyFloat_FromDouble(h->when);
    if (!w) return -1;
    Py_hash_t x = PyObject_Hash(w);
    Py_DECREF(w);
    return x;
}

static PyObject *timer_richcompare(PyObject *a, PyObject *b, int op) {
    if (!PyObject_TypeCheck(b, &cs_TimerHandleType)) Py_RETURN_NOTIMPLEMENTED;
    HandleObject *x = (HandleObject *)a, *y = (HandleObject *)b;
    int eq = -1;
    if (op == Py_EQ || op == Py_NE || op == Py_LE || op == Py_GE) {
        eq = x->when == y->when && x->cancelled == y->cancelled;
        if (eq) {
            PyObject *cx = x->callback ? x->callback : Py_None;
            PyObject *cy = y->callback ? y->callback : Py_None;
            PyObject *ax = x->args ? x->args : Py_None, *ay = y->args ? y->args : Py_None;
            int c = PyObject_RichCompareBool(cx, cy, Py_EQ);
            if (c < 0) return NULL;
            if (c) c = PyObject_RichCompareBool(ax, ay, Py_EQ);
            if (c < 0) return NULL;
            eq = c;
        }
    }
    switch (op) {
    case Py_LT: return PyBool_FromLong(x->when < y->when);
    case Py_GT: return PyBool_FromLong(x->when > y->when);
    case Py_LE: return PyBool_FromLong(x->when < y->when || eq);
    case Py_GE: return PyBool_FromLong(x->when > y->when || eq);
    case Py_EQ: return PyBool_FromLong(eq);
    case Py_NE: return PyBool_FromLong(!eq);
    }
    Py_RETURN_NOTIMPLEMENTED;
}

static PyObject *handle_get_callback(HandleObject *h, void *Py_UNUSED(c)) {
    return Py_NewRef(h->callback ? h->callback : Py_None);
}
static PyObject *handle_get_args(HandleObject *h, void *Py_UNUSED(c)) {
    return Py_NewRef(h->args ? h->args : Py_None);
}
static PyObject *handle_get_loop(HandleObject *h, void *Py_UNUSED(c)) {
    return Py_NewRef(h->loop ? (PyObject *)h->loop : Py_None);
}
static PyObject *handle_get_cancelled(HandleObject *h, void *Py_UNUSED(c)) {
    return PyBool_FromLong(h->cancelled);
}
static PyObject *handle_get_stb(HandleObject *h, void *Py_UNUSED(c)) {
    return Py_NewRef(h->source_traceback ? h->source_traceback : Py_None);
}
static PyObject *handle_get_scheduled(HandleObject *h, void *Py_UNUSED(c)) {
    return PyBool_FromLong(h->scheduled);
}
static PyObject *handle_get_when(HandleObject *h, void *Py_UNUSED(c)) {
    return PyFloat_FromDouble(h->when);
}
static PyObject *handle_get_actor(HandleObject *h, void *Py_UNUSED(c)) {
    if (h->actor == CS_NO_ACTOR) Py_RETURN_NONE;
    return PyLong_FromUnsignedLong(h->actor);
}
static PyObject *handle_get_scheduled_by(HandleObject *h, void *Py_UNUSED(c)) {
    return PyLong_FromLongLong(h->after_all ? CS_AFTER_ALL : h->scheduled_by);
}

static PyGetSetDef handle_getset[] = {
    {"_callback", (getter)handle_get_callback, NULL, NULL, NULL},
    {"_args", (getter)handle_get_args, NULL, NULL, NULL},
    {"_context", (getter)handle_get_context, NULL, NULL, NULL},
    {"_loop", (getter)handle_get_loop, NULL, NULL, NULL},
    {"_cancelled", (getter)handle_get_cancelled, NULL, NULL, NULL},
    {"_source_traceback", (getter)handle_get_stb, NULL, NULL, NULL},
    {"_cs_actor", (getter)handle_get_actor, NULL, "actor id of this handle's step, or None",
     NULL},
    {"_cs_scheduled_by", (getter)handle_get_scheduled_by, NULL,
     "event index of the step that scheduled it (-1 outside steps, -2 after all)", NULL},
    {NULL},
};

static PyGetSetDef timer_getset[] = {
    {"_when", (getter)handle_get_when, NULL, NULL, NULL},
    {"_scheduled", (getter)handle_get_scheduled, NULL, NULL, NULL},
    {NULL},
};

static PyMethodDef handle_methods[] = {
    {"cancel", (PyCFunction)handle_cancel, METH_NOARGS, "Cancel the call (idempotent)."},
    {"cancelled", (PyCFunction)handle_cancelled, METH_NOARGS, "True if cancelled."},
    {"get_context", (PyCFunction)handle_get_context, METH_NOARGS,
     "The contextvars.Context the callback runs in."},
    {"_run", (PyCFunction)handle_run, METH_NOARGS, "Run the callback now (as Handle._run)."},
    {NULL},
};

static PyMethodDef timer_methods[] = {
    {"when", (PyCFunction)handle_when, METH_NOARGS, "The scheduled time, in loop.time() units."},
    {NULL},
};

PyTypeObject cs_HandleType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "chaossloth._core.Handle",
    .tp_basicsize = sizeof(HandleObject),
    .tp_dealloc = (destructor)handle_dealloc,
    .tp_repr = (reprfunc)handle_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_BASETYPE,
    .tp_doc = "A callback scheduled on a ControlledLoop (behaves like asyncio.Handle).",
    .tp_traverse = (traverseproc)handle_traverse,
    .tp_clear = (inquiry)handle_clear,
    .tp_weaklistoffset = offsetof(HandleObject, weakreflist),
    .tp_methods = handle_methods,
    .tp_getset = handle_getset,
};

PyTypeObject cs_TimerHandleType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "chaossloth._core.TimerHandle",
    .tp_basicsize = sizeof(HandleObject),
    .tp_dealloc = (destructor)handle_dealloc,
    .tp_repr = (reprfunc)handle_repr,
    .tp_hash = (hashfunc)timer_hash,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A timed callback on a ControlledLoop (behaves like asyncio.TimerHandle).",
    .tp_traverse = (traverseproc)handle_traverse,
    .tp_clear = (inquiry)handle_clear,
    .tp_richcompare = timer_richcompare,
    .tp_weaklistoffset = offsetof(HandleObject, weakreflist),
    .tp_methods = timer_methods,
    .tp_getset = timer_getset,
    .tp_base = &cs_HandleType,
};

int cs_register_handles(PyObject *module) {
    if (PyType_Ready(&cs_HandleType) < 0) return -1;
    if (PyType_Ready(&cs_TimerHandleType) < 0) return -1;
    if (PyModule_AddObjectRef(module, "Handle", (PyObject *)&cs_HandleType) < 0) return -1;
    if (PyModule_AddObjectRef(module, "TimerHandle", (PyObject *)&cs_TimerHandleType) < 0)
        return -1;
    return 0;
}
