/*
 * compat.c -- the CPython-version-specific part of the extension (see
 * compat.h).  Each entry: the versions it serves, why it is needed, and how a
 * mismatch is caught.
 *
 *   entry                      3.11             3.12             3.13
 *   -------------------------  ---------------  ---------------  ---------------
 *   C Task step wrapper name   TaskStepMeth-    _asyncio.TaskSt- _asyncio.TaskSt-
 *                              Wrapper (static) epMethWrapper    epMethWrapper
 *                                               (heap type)      (heap type)
 *   its layout                 HEAD, task, arg  same             same
 *   C Task wakeup              builtin "task_wakeup" bound to the task (all)
 *   pure-Python Task steps     bound _Task__step / _Task__wakeup (all)
 *   weakref referent           PyWeakref_GET_   PyWeakref_GET_   PyWeakref_GetRef
 *                              OBJECT           OBJECT           (GET_OBJECT is
 *                                                                deprecated)
 *   MRO lookup                 _PyType_Lookup (private; no public equivalent
 *                              before 3.14) in all three
 *   co_filename, func_qualname, PyCFunctionObject.m_ml: fields of the
 *                              non-limited object layouts, identical in all three
 *   dict version               ma_version_tag   same, deprecated same, deprecated
 *                              (private)        (dict watchers)  (dict watchers)
 */
#include "compat.h"

#include <string.h>

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030E0000
#error "chaossloth._core supports CPython 3.11, 3.12 and 3.13 only (see ext/compat.c)"
#endif

/* ------------------------------------------------ the C Task's steps */

/* Why: a task's steps must belong to the task's actor (ARCHITECTURE.md,
 * actor identity).  The C Task (Modules/_asynciomodule.c) schedules its step
 * as a TaskStepMethWrapper object and its wakeup as a builtin method
 * "task_wakeup" bound to the task; neither exposes the task through public
 * API at C speed, so the wrapper's layout is read directly.
 *
 * TaskStepMethWrapper in 3.11, 3.12 and 3.13: {PyObject_HEAD; TaskObj
 * *sw_task; PyObject *sw_arg;}.  3.11 names the static type
 * "TaskStepMethWrapper"; 3.12 made it a heap type of the _asyncio module,
 * "_asyncio.TaskStepMethWrapper".  cs_compat_check verifies name, size and
 * that sw_task is the wrapper's __self__ on a real probe task. */
typedef struct {
    PyObject_HEAD
    PyObject *sw_task;
    PyObject *sw_arg;
} step_wrapper_layout;

#if PY_VERSION_HEX >= 0x030C0000
#define STEP_WRAPPER_NAME "_asyncio.TaskStepMethWrapper"
#else
#define STEP_WRAPPER_NAME "TaskStepMethWrapper"
#endif
#define WAKEUP_NAME "task_wakeup"

static PyTypeObject *step_wrapper_type; /* set by cs_compat_check */
static PyMethodDef *wakeup_ml;          /* the C wakeup's method definition */
static PyObject *py_step, *py_wakeup;   /* _PyTask._Task__step / _Task__wakeup (functions) */

static void mismatch(const char *what) {
    PyErr_Format(cs_CompatError, "%s (the extension was compiled for CPython %s)", what,
                 PY_VERSION);
}

PyObject *cs_compat_check(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError,
                        "_compat_check(c_task, c_step, c_wakeup, py_step, py_wakeup)");
        return NULL;
    }
    PyObject *task = args[0], *step = args[1], *wakeup = args[2];
    PyTypeObject *tp = Py_TYPE(step);
    if (strcmp(tp->tp_name, STEP_WRAPPER_NAME) != 0) {
        mismatch("the C Task's step is not a " STEP_WRAPPER_NAME);
        return NULL;
    }
    if (tp->tp_basicsize != (Py_ssize_t)sizeof(step_wrapper_layout)) {
        mismatch("TaskStepMethWrapper's size differs from the layout compiled in");
        return NULL;
    }
    PyObject *self = PyObject_GetAttrString(step, "__self__");
    if (!self) return NULL;
    int same = self == task && ((step_wrapper_layout *)step)->sw_task == task;
    Py_DECREF(self);
    if (!same) {
        mismatch("TaskStepMethWrapper does not hold its task where the layout compiled in says");
        return NULL;
    }
    if (!PyCFunction_Check(wakeup) || PyCFunction_GET_SELF(wakeup) != task ||
        strcmp(cs_compat_cfunction_name(wakeup), WAKEUP_NAME) != 0) {
        mismatch("the C Task's wakeup is not a builtin " WAKEUP_NAME " bound to the task");
        return NULL;
    }
    if (!PyFunction_Check(args[3]) || !PyFunction_Check(args[4])) {
        mismatch("the pure-Python Task's __step / __wakeup are not functions");
        return NULL;
    }
    Py_XSETREF(step_wrapper_type, (PyTypeObject *)Py_NewRef((PyObject *)tp));
    wakeup_ml = ((PyCFunctionObject *)wakeup)->m_ml;
    Py_XSETREF(py_step, Py_NewRef(args[3]));
    Py_XSETREF(py_wakeup, Py_NewRef(args[4]));
    Py_RETURN_NONE;
}

int cs_compat_ready(void) { return step_wrapper_type != NULL; }

PyObject *cs_compat_task_of_step(PyObject *cb) {
    if (Py_TYPE(cb) == step_wrapper_type) return ((step_wrapper_layout *)cb)->sw_task;
    if (PyCFunction_Check(cb)) {
        PyCFunctionObject *f = (PyCFunctionObject *)cb;
        return f->m_ml == wakeup_ml ? f->m_self : NULL;
    }
    if (PyMethod_Check(cb)) {
        PyObject *fn = PyMethod_GET_FUNCTION(cb);
        if (fn == py_step || fn == py_wakeup) return PyMethod_GET_SELF(cb);
    }
    return NULL;
}

/* ------------------------------------------------------------ weakrefs */

/* Why: PyWeakref_GET_OBJECT returns a borrowed reference (unsafe if the
 * referent dies meanwhile) and is deprecated in 3.13, whose replacement
 * PyWeakref_GetRef does not exist before 3.13. */
PyObject *cs_compat_weakref_get(PyObject *ref) {
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *obj;
    int rc = PyWeakref_GetRef(ref, &obj);
    if (rc < 0) return NULL;
    return rc ? obj : Py_NewRef(Py_None);
#else
    if (!PyWeakref_Check(ref)) {
        PyErr_SetString(PyExc_TypeError, "expected a weak reference");
        return NULL;
    }
    return Py_NewRef(PyWeakref_GET_OBJECT(ref));
#endif
}

/* ---------------------------------------------------------- type lookup */

/* Why: hooks.c must know which __init__ type.__call__ will run without
 * triggering descriptors or __getattr__ of the metaclass; CPython offers only
 * the private _PyType_Lookup for it (declared in cpython/object.h in 3.11,
 * 3.12 and 3.13; a public PyType_Lookup-like API arrives only later). */
PyObject *cs_compat_type_lookup(PyTypeObject *type, PyObject *name) {
    return _PyType_Lookup(type, name);
}

/* -------------------------------------------------------- object fields */

/* Why: these run on every step or hook; the attribute-lookup route costs a
 * dictionary lookup and a new reference.  The fields are part of the
 * non-limited API, unchanged in 3.11-3.13. */
PyObject *cs_compat_code_filename(PyObject *code) {
    return ((PyCodeObject *)code)->co_filename;
}

PyObject *cs_compat_function_qualname(PyObject *fn) {
    return ((PyFunctionObject *)fn)->func_qualname;
}

/* The free variables are the last co_nfreevars of the co_nlocalsplus "fast
 * locals" that LOAD_DEREF / STORE_DEREF index (3.11-3.13). */
int cs_compat_code_first_free(PyObject *code) {
    PyCodeObject *c = (PyCodeObject *)code;
    return c->co_nlocalsplus - c->co_nfreevars;
}

const char *cs_compat_cfunction_name(PyObject *cb) {
    return ((PyCFunctionObject *)cb)->m_ml->ml_name;
}

/* -------------------------------------------------------- dict versions */

/* Why: the runner asks, around every execution, whether the program changed
 * sys.modules (runner._ModuleTable); copying and comparing the table each
 * time cost more than a small execution.  PyDictObject.ma_version_tag: in
 * 3.11, 3.12 and 3.13 every change of a dict's contents stores a fresh value
 * of a process-wide counter into it (3.12 and 3.13 keep the dict watchers'
 * bits in its low bits, which only change with the watchers); deprecated
 * since 3.12 for the dict watchers, which 3.11 lacks, and still maintained by
 * every mutation path of a dict in 3.13 -- except an attribute store into an
 * object whose instance dict was materialized: 3.13 writes the object's inline
 * values, which the dict shares, without a new tag (so importer.py never
 * trusts the tag of an instance's __dict__).  So an unchanged tag of any other
 * dict means unchanged contents (the converse need not hold: a change undone
 * still changes it). */
uint64_t cs_compat_dict_version(PyObject *dict) {
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#endif
    return ((PyDictObject *)dict)->ma_version_tag;
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
}

/* ---- await chains */

static int visit_asyncgen(PyObject *o, void *found) {
    if (o && PyAsyncGen_CheckExact(o)) {
        *(PyObject **)found = o;
        return 1; /* stops the traversal */
    }
    return 0;
}

/* The async generator that an asend/athrow awaitable drives (borrowed), or
 * NULL.  Those types are not exported (3.11 to 3.13): known by name, and
 * their traverse visits the generator (genobject.c: ags_gen, agt_gen); the
 * capture's awaitproxy around one (hooks.c) visits it too, as its target. */
static PyObject *asyncgen_of_awaitable(PyObject *obj) {
    PyTypeObject *t = Py_TYPE(obj);
    if (strcmp(t->tp_name, "async_generator_asend") != 0 &&
        strcmp(t->tp_name, "async_generator_athrow") != 0 &&
        strcmp(t->tp_name, CS_AWAITPROXY_TYPE_NAME) != 0)
        return NULL;
    PyObject *found = NULL;
    if (t->tp_traverse) t->tp_traverse(obj, visit_asyncgen, &found);
    return found;
}

int cs_compat_await_link(PyObject *obj, PyObject **frame, PyObject **code, PyObject **next) {
    *frame = *code = *next = NULL;
    const char *fr, *co, *nx;
    if (PyCoro_CheckExact(obj)) {
        fr = "cr_frame", co = "cr_code", nx = "cr_await";
    } else if (PyGen_Check(obj)) {
        fr = "gi_frame", co = "gi_code", nx = "gi_yieldfrom";
    } else if (PyAsyncGen_CheckExact(obj)) {
        fr = "ag_frame", co = "ag_code", nx = "ag_await";
    } else {
        PyObject *gen = asyncgen_of_awaitable(obj);
        if (!gen) return 0;
        *next = Py_NewRef(gen);
        return 1;
    }
    PyObject *f = PyObject_GetAttrString(obj, fr);
    PyObject *c = f ? PyObject_GetAttrString(obj, co) : NULL;
    PyObject *n = c ? PyObject_GetAttrString(obj, nx) : NULL;
    if (!n) {
        Py_XDECREF(f);
        Py_XDECREF(c);
        return -1;
    }
    if (f == Py_None) Py_CLEAR(f);
    if (n == Py_None) Py_CLEAR(n);
    *frame = f;
    *code = c;
    *next = n;
    return 1;
}
