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
 *   flags & TRACK:        after the call, the instance is appended to the list
 *                         bound to "tracker" in `tracker_ns` when there is one
 *                         (the runner's tracked tasks of one execution).
 *
 * With no explorer attached (or no open step) the record returns at once, so
 * the call is the base method's.  While quiet (quiet_futures(True)), no
 * RecordingMethod records: the caller records the operation those calls are
 * part of (capture/sync.py: Event.set, whose waiters' futures it completes).  The object is a method descriptor
 * (Py_TPFLAGS_METHOD_DESCRIPTOR): `obj.m(...)` calls it with obj first, no
 * bound method made; looked up on a class it is itself; on an instance, a
 * bound method.  The C Task calls its futures' methods by name
 * (add_done_callback, result, cancel), which find these.
 */
#include "bridge.h"

#include <stddef.h>

enum { RECORD_AFTER = 1, TRACK = 2 };

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
    return PyList_Append(list, self);
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
    if (!(m->flags & RECORD_AFTER) && !quiet && cs_hooks_record_at(self, m->kind, m->site) < 0)
        return NULL;
    PyObject *out = PyObject_Vectorcall(m->base, args, nargsf, kwnames);
    if (!out) return NULL;
    if ((m->flags & RECORD_AFTER) && !quiet && cs_hooks_record_at(self, m->kind, m->site) < 0) {
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
        (ns && ns != Py_None && !PyDict_Check(ns)) || (flags & ~(RECORD_AFTER | TRACK))) {
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
    return PyModule_AddObjectRef(module, "RecordingMethod", (PyObject *)&RecordingMethodType);
}
