/*
 * recording.c -- the methods of capture/sync.py's RecordingFuture and
 * RecordingTask, in C: RecordingMethod(base, kind, site, flags) is a method
 * of a class whose call records one access of the instance (a whole-object
 * access of `kind` at `site`, as _core.record(self, kind, site) would) and
 * then calls `base`, the method of asyncio's C Future or Task it stands for,
 * with the same arguments, returning what it returns.
 *
 *   flags & RECORD_AFTER: the access is recorded after the call (__init__: the
 *                         object is named by the step that made it once it
 *                         exists as a future, CS_ID_CREATED in `kind`);
 *   flags & TRACK:        after the call, a weak reference to the instance is
 *                         appended to the list bound to "tracker" in `tracker_ns`
 *                         when there is one (the runner's tracked tasks of one
 *                         execution).
 *
 *   flags & COMPLETES:    (set_result, set_exception, a Future's cancel) a call that
 *                         finds the future pending and leaves it done records its
 *                         completion (cs_hooks_record_completion: its state keys and its
 *                         callbacks written); any other call, or one that raises,
 *                         writes the whole future.
 *   flags & STATE:        (done, result, exception, cancelled) the call reads the future's
 *                         state key (cs_hooks_record_state_read), not its callbacks.
 *   flags & AWAITS:       (__await__, __iter__) a done future's state is read (an await that
 *                         passes: it races with the completion, whose reversal is the
 *                         blocking await); a pending one
 *                         is remembered for the open step (pending_awaits): the task whose
 *                         step this is blocks on it and registers its wake-up next.
 *   flags & REGISTERS:    (add_done_callback) the registration of a task's wake-up on a
 *                         pending future that an await of this step remembered is that
 *                         await's blocking, an add to the callbacks
 *                         (cs_hooks_record_registration), and takes the await off the list;
 *                         any other registration writes the whole future.  An await the
 *                         step leaves unmatched (code that drove a coroutine by hand and saw
 *                         the future pending) writes the whole future at the step's end
 *                         (cs_recording_step_end): it saw the state, and the yield left the
 *                         future's blocking flag set, so that the next await of it raises
 *                         "await wasn't used with future" (a task's registration clears it).
 *
 * Why two blocking awaits of one future need not be ordered: see capture/sync.py,
 * RecordingFuture.
 *
 * With no explorer attached (or no open step) the record returns at once, so
 * the call is the base method's.  While quiet (quiet_futures(True)), no
 * RecordingMethod records: the caller records the operation those calls are
 * part of (capture/sync.py: Event.set, whose waiters' futures it completes).  The object
 * is a method descriptor (Py_TPFLAGS_METHOD_DESCRIPTOR): `obj.m(...)` calls it with obj first, no
 * bound method made; looked up on a class it is itself; on an instance, a
 * bound method.  The C Task calls its futures' methods by name
 * (add_done_callback, result, cancel), which find these.
 */
#include "compat.h"

#include <stddef.h>

enum { RECORD_AFTER = 1, TRACK = 2, COMPLETES = 4, AWAITS = 8, REGISTERS = 16, STATE = 32 };
#define ALL_FLAGS (RECORD_AFTER | TRACK | COMPLETES | AWAITS | REGISTERS | STATE)

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *base;       /* the C method called */
    PyObject *site;       /* an int, the site id */
    PyObject *tracker_ns; /* a dict with "tracker" (TRACK), or NULL */
    PyObject *name;       /* the base's __name__ */
    int kind;
    int flags;
} RecordingMethod;

static PyObject *s_tracker;

/* quiet_futures(True): the RecordingMethods' records are off until quiet_futures(False) */
static int quiet;

static int track(RecordingMethod *m, PyObject *self) {
    PyObject *list = PyDict_GetItemWithError(m->tracker_ns, s_tracker);
    if (!list) return PyErr_Occurred() ? -1 : 0;
    if (list == Py_None) return 0;
    if (!PyList_Check(list)) {
        PyErr_SetString(PyExc_TypeError, "sync.tracker must be a list or None");
        return -1;
    }
    /* weakly: a finished task is freed as on the stock loop (with its exception, its
     * traceback and the frames' locals), so code that checks what is left alive (a test's
     * gc.get_objects(), a weakref to a task) sees what it sees there */
    PyObject *ref = PyWeakref_NewRef(self, NULL);
    if (!ref) return -1;
    int rc = PyList_Append(list, ref);
    Py_DECREF(ref);
    return rc;
}

/* (future, site) pairs: the futures awaits of the open step found pending, not yet matched
 * by the registration of a task's wake-up (AWAITS, REGISTERS); NULL when empty. */
static PyObject *pending_awaits;

static int step_open(void) {
    cs_actor a;
    return cs_loop_running_actor(&a);
}

static int awaited(RecordingMethod *m, PyObject *fut) {
    int done = cs_loop_future_is_done(fut);
    if (done < 0) return -1;
    if (done) return cs_hooks_record_state_read(fut, m->site);
    if (!step_open()) return 0;
    if (!pending_awaits && !(pending_awaits = PyList_New(0))) return -1;
    PyObject *pair = PyTuple_Pack(2, fut, m->site);
    if (!pair) return -1;
    int rc = PyList_Append(pending_awaits, pair);
    Py_DECREF(pair);
    return rc;
}

/* Takes the first pending await of `fut` off the list: 1 if there was one. */
static int take_pending_await(PyObject *fut) {
    if (!pending_awaits) return 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(pending_awaits); i++) {
        if (PyTuple_GET_ITEM(PyList_GET_ITEM(pending_awaits, i), 0) != fut) continue;
        if (PySequence_DelItem(pending_awaits, i) < 0) return -1;
        return 1;
    }
    return 0;
}

static int registered(RecordingMethod *m, PyObject *fut, PyObject *const *args,
                      Py_ssize_t nargs) {
    if (nargs >= 2 && cs_compat_task_of_step(args[1])) {
        int done = cs_loop_future_is_done(fut);
        if (done < 0) return -1;
        int took = done ? 0 : take_pending_await(fut);
        if (took < 0) return -1;
        if (took) return cs_hooks_record_registration(fut, m->site);
    }
    return cs_hooks_record_at(fut, m->kind, m->site);
}

int cs_recording_step_end(int record) {
    if (!pending_awaits) return 0;
    PyObject *left = pending_awaits;
    pending_awaits = NULL;
    int rc = 0;
    for (Py_ssize_t i = 0; record && rc == 0 && i < PyList_GET_SIZE(left); i++) {
        PyObject *pair = PyList_GET_ITEM(left, i);
        rc = cs_hooks_record_at(PyTuple_GET_ITEM(pair, 0), CS_WRITE, PyTuple_GET_ITEM(pair, 1));
    }
    Py_DECREF(left);
    return rc;
}

static PyObject *rm_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf,
                               PyObject *kwnames) {
    RecordingMethod *m = (RecordingMethod *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs < 1) {
        PyErr_Format(PyExc_TypeError, "%U() needs the instance as its first argument", m->name);
        return NULL;
    }
    PyObject *self = args[0];
    /* nothing records without an explorer: skip the done() checks and the bookkeeping */
    int recording = !quiet && cs_hooks_get_explorer() != NULL;
    int was_done = 0;
    if (!recording || (m->flags & RECORD_AFTER)) {
    } else if (m->flags & AWAITS) {
        if (awaited(m, self) < 0) return NULL;
    } else if (m->flags & REGISTERS) {
        if (registered(m, self, args, nargs) < 0) return NULL;
    } else if (m->flags & COMPLETES) {
        if ((was_done = cs_loop_future_is_done(self)) < 0) return NULL;
    } else if (m->flags & STATE) {
        if (cs_hooks_record_state_read(self, m->site) < 0) return NULL;
    } else if (cs_hooks_record_at(self, m->kind, m->site) < 0) {
        return NULL;
    }
    PyObject *out = PyObject_Vectorcall(m->base, args, nargsf, kwnames);
    if ((m->flags & COMPLETES) && recording) {
        if (!out) {
            /* it raised (set_result of a done future): a write of the whole future */
            PyObject *et, *ev, *tb;
            PyErr_Fetch(&et, &ev, &tb);
            if (cs_hooks_record_at(self, m->kind, m->site) < 0) {
                Py_XDECREF(et);
                Py_XDECREF(ev);
                Py_XDECREF(tb);
                return NULL;
            }
            PyErr_Restore(et, ev, tb);
            return NULL;
        }
        int done = was_done ? 0 : cs_loop_future_is_done(self);
        int rc = done < 0 ? -1
                 : done   ? cs_hooks_record_completion(self, m->site)
                          : cs_hooks_record_at(self, m->kind, m->site);
        if (rc < 0) {
            Py_DECREF(out);
            return NULL;
        }
    }
    if (!out) return NULL;
    if ((m->flags & RECORD_AFTER) && recording &&
        cs_hooks_record_at(self, m->kind, m->site) < 0) {
        Py_DECREF(out);
        return NULL;
    }
    if ((m->flags & TRACK) && m->tracker_ns && track(m, self) < 0) {
        Py_DECREF(out);
        return NULL;
    }
    return out;
}

static PyObject *rm_get(PyObject *self, PyObject *obj, PyObject *Py_UNUSED(type)) {
    if (obj == NULL || obj == Py_None) return Py_NewRef(self);
    return PyMethod_New(self, obj);
}

static PyObject *rm_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
    static char *names[] = {"base", "kind", "site", "flags", "tracker_ns", NULL};
    PyObject *base, *site, *ns = NULL;
    int kind, flags = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OiO|iO:RecordingMethod", names, &base, &kind,
                                     &site, &flags, &ns))
        return NULL;
    if (!PyCallable_Check(base) || !PyLong_CheckExact(site) ||
        (ns && ns != Py_None && !PyDict_Check(ns)) || (flags & ~ALL_FLAGS)) {
        PyErr_SetString(PyExc_TypeError,
                        "RecordingMethod(base: callable, kind: int, site: int, flags: int = 0, "
                        "tracker_ns: dict | None = None)");
        return NULL;
    }
    PyObject *name = PyObject_GetAttrString(base, "__name__");
    if (!name) return NULL;
    RecordingMethod *m = (RecordingMethod *)type->tp_alloc(type, 0);
    if (!m) {
        Py_DECREF(name);
        return NULL;
    }
    m->vectorcall = rm_vectorcall;
    m->base = Py_NewRef(base);
    m->site = Py_NewRef(site);
    m->tracker_ns = ns && ns != Py_None ? Py_NewRef(ns) : NULL;
    m->name = name;
    m->kind = kind;
    m->flags = flags;
    return (PyObject *)m;
}

static int rm_traverse(RecordingMethod *m, visitproc visit, void *arg) {
    Py_VISIT(m->base);
    Py_VISIT(m->site);
    Py_VISIT(m->tracker_ns);
    Py_VISIT(m->name);
    return 0;
}

static int rm_clear(RecordingMethod *m) {
    Py_CLEAR(m->base);
    Py_CLEAR(m->site);
    Py_CLEAR(m->tracker_ns);
    Py_CLEAR(m->name);
    return 0;
}

static void rm_dealloc(RecordingMethod *m) {
    PyObject_GC_UnTrack(m);
    rm_clear(m);
    Py_TYPE(m)->tp_free((PyObject *)m);
}

static PyObject *rm_repr(RecordingMethod *m) {
    return PyUnicode_FromFormat("<recording method %U>", m->name);
}

static PyObject *rm_get_name(RecordingMethod *m, void *Py_UNUSED(c)) {
    return Py_NewRef(m->name);
}

static PyObject *rm_get_base(RecordingMethod *m, void *Py_UNUSED(c)) {
    return Py_NewRef(m->base);
}

static PyGetSetDef rm_getset[] = {
    {"__name__", (getter)rm_get_name, NULL, "the base method's name", NULL},
    {"__wrapped__", (getter)rm_get_base, NULL, "the base method", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject RecordingMethodType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "chaossloth._core.RecordingMethod",
    .tp_basicsize = sizeof(RecordingMethod),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
                Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "RecordingMethod(base, kind, site, flags=0, tracker_ns=None): a method that "
              "records an access of its instance and calls base (ext/recording.c).",
    .tp_new = rm_new,
    .tp_dealloc = (destructor)rm_dealloc,
    .tp_traverse = (traverseproc)rm_traverse,
    .tp_clear = (inquiry)rm_clear,
    .tp_repr = (reprfunc)rm_repr,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(RecordingMethod, vectorcall),
    .tp_descr_get = rm_get,
    .tp_getset = rm_getset,
};

int cs_recording_is_method(PyObject *f) { return Py_IS_TYPE(f, &RecordingMethodType); }

static PyObject *quiet_futures(PyObject *Py_UNUSED(m), PyObject *on) {
    int v = PyObject_IsTrue(on);
    if (v < 0) return NULL;
    PyObject *was = PyBool_FromLong(quiet);
    quiet = v;
    return was;
}

static PyMethodDef quiet_def = {
    "quiet_futures", quiet_futures, METH_O,
    "quiet_futures(on) -> bool: while on, RecordingFuture/RecordingTask methods record nothing "
    "(their caller records the operation they are part of); returns the previous setting."};

int cs_register_recording(PyObject *module) {
    if (!(s_tracker = PyUnicode_InternFromString("tracker"))) return -1;
    if (PyType_Ready(&RecordingMethodType) < 0) return -1;
    PyObject *fn = PyCFunction_NewEx(&quiet_def, NULL, NULL);
    if (!fn) return -1;
    int rc = PyModule_AddObjectRef(module, "quiet_futures", fn);
    Py_DECREF(fn);
    if (rc < 0) return -1;
    if (PyModule_AddIntConstant(module, "RECORD_AFTER", RECORD_AFTER) < 0) return -1;
    if (PyModule_AddIntConstant(module, "TRACK", TRACK) < 0) return -1;
    if (PyModule_AddIntConstant(module, "COMPLETES", COMPLETES) < 0) return -1;
    if (PyModule_AddIntConstant(module, "AWAITS", AWAITS) < 0) return -1;
    if (PyModule_AddIntConstant(module, "REGISTERS", REGISTERS) < 0) return -1;
    if (PyModule_AddIntConstant(module, "STATE", STATE) < 0) return -1;
    return PyModule_AddObjectRef(module, "RecordingMethod", (PyObject *)&RecordingMethodType);
}
