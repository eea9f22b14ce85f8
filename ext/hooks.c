/*
 * hooks.c -- the access hooks that instrumented user code calls.
 *
 * capture/instrument.py rewrites every shared-state access of the user's
 * modules into a call of one of these module-level functions of
 * chaossloth._core (all METH_FASTCALL).  Two families:
 *
 *   - operation hooks perform the access AND record it, returning what the
 *     original expression evaluated to: ga (getattr), sa (setattr), da
 *     (delattr), gi / si / di (subscripts), cm (method lookup for a call),
 *     ck (keyed method call: d.get(k), d.pop(k), d.setdefault(k)), contains
 *     (`k in x`).  One C call replaces one bytecode, so instrumented code pays
 *     a single call per access and the operation itself is the very C-API
 *     call the interpreter would make (PyObject_GetAttr, PyObject_SetItem,
 *     PySequence_Contains...), which keeps the semantics identical
 *     (descriptors, __getattr__, __slots__, __missing__ all behave as usual).
 *   - pass-through / record-only hooks for what the interpreter must keep
 *     doing itself (name loads and stores, whose scope the compiler resolves):
 *     gr / cr take the already-loaded value and return it, gw / cw record a
 *     store that the following native STORE performed, rd / it record a whole
 *     read (len(), iteration) and return the object.
 *
 * Argument order puts the stored value FIRST in the store hooks
 * (sa(value, obj, name, site)) because Python evaluates the right-hand side
 * of an assignment before the target's sub-expressions.
 *
 * Cost model: with no explorer attached every hook is one pointer check in
 * front of the operation.  With an explorer attached, the engine itself
 * rejects accesses outside an open step (CS_ESTATE), which we ignore.
 *
 * Resources (see ARCHITECTURE.md): (identity, key).
 *   attribute     (id(obj), hash(name))          names are interned str
 *   module attr   (id(module.__dict__), hash(name)) = the module's globals
 *   subscript     (id(obj), hash(key)) for keys of safe builtin types,
 *                 else CS_KEY_WHOLE (a user __hash__ is never called)
 *   global name   (id(globals), hash(name))
 *   closure cell  (id(cell), CELL_KEY)
 *   whole object  (id(obj), CS_KEY_WHOLE)
 *
 * Invariant: every object whose address was recorded stays alive until the
 * hooks are reset (explorer attached/detached, or _core.hooks_reset()), so an
 * address never names two objects within one execution.
 */
#include "bridge.h"

#include <stdint.h>
#include <string.h>

#define CELL_KEY ((uint64_t)0x63656c6cu) /* "cell": any fixed non-WHOLE key */

enum { KIND_UNKNOWN = 0, KIND_READ = 1, KIND_WRITE = 2 };

static cs_explorer *hooks_ex; /* NULL: every hook is a plain operation */

/* ------------------------------------------------------------ keepalive */

/* Open-addressing set of strong references, keyed by address.  Never calls
 * __hash__/__eq__ of the objects. */
static PyObject **keep_slots;
static size_t keep_cap, keep_len;

static size_t ptr_hash(const void *p) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x;
}

static int keep_grow(void) {
    size_t ncap = keep_cap ? keep_cap * 2 : 1024;
    PyObject **n = PyMem_Calloc(ncap, sizeof *n);
    if (!n) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i < keep_cap; i++) {
        PyObject *o = keep_slots[i];
        if (!o) continue;
        size_t j = ptr_hash(o) & (ncap - 1);
        while (n[j]) j = (j + 1) & (ncap - 1);
        n[j] = o;
    }
    PyMem_Free(keep_slots);
    keep_slots = n;
    keep_cap = ncap;
    return 0;
}

static int keep_alive(PyObject *o) {
    if (keep_len * 2 >= keep_cap && keep_grow() < 0) return -1;
    size_t j = ptr_hash(o) & (keep_cap - 1);
    while (keep_slots[j]) {
        if (keep_slots[j] == o) return 0;
        j = (j + 1) & (keep_cap - 1);
    }
    Py_INCREF(o);
    keep_slots[j] = o;
    keep_len++;
    return 0;
}

/* Drops every kept reference.  The table is detached first: a __del__ run by
 * a decref may itself call a hook. */
static void keep_clear(void) {
    PyObject **slots = keep_slots;
    size_t cap = keep_cap;
    keep_slots = NULL;
    keep_cap = keep_len = 0;
    for (size_t i = 0; i < cap; i++) Py_XDECREF(slots[i]);
    PyMem_Free(slots);
}

/* ------------------------------------------------------------ verbose log */

static PyObject *log_list; /* NULL: logging off */
static uint64_t n_recorded; /* accesses accepted by the engine since reset */

/* repr of a key only for types whose repr runs no user code */
static PyObject *safe_repr(PyObject *key) {
    if (!key) Py_RETURN_NONE;
    PyTypeObject *t = Py_TYPE(key);
    if (key == Py_None || t == &PyUnicode_Type || t == &PyLong_Type || t == &PyBool_Type ||
        t == &PyFloat_Type || t == &PyBytes_Type) {
        PyObject *r = PyObject_Repr(key);
        if (r && PyUnicode_GET_LENGTH(r) > 40) {
            PyObject *s = PyUnicode_Substring(r, 0, 37);
            Py_DECREF(r);
            if (!s) return NULL;
            r = PyUnicode_FromFormat("%U...", s);
            Py_DECREF(s);
        }
        return r;
    }
    if (t == &PyTuple_Type && PyTuple_GET_SIZE(key) <= 4) {
        Py_ssize_t n = PyTuple_GET_SIZE(key);
        PyObject *parts = PyList_New(n);
        if (!parts) return NULL;
        for (Py_ssize_t i = 0; i < n; i++) {
            PyObject *r = safe_repr(PyTuple_GET_ITEM(key, i));
            if (!r) {
                Py_DECREF(parts);
                return NULL;
            }
            PyList_SET_ITEM(parts, i, r);
        }
        PyObject *sep = PyUnicode_FromString(", ");
        PyObject *joined = sep ? PyUnicode_Join(sep, parts) : NULL;
        Py_XDECREF(sep);
        Py_DECREF(parts);
        if (!joined) return NULL;
        PyObject *r = PyUnicode_FromFormat(n == 1 ? "(%U,)" : "(%U)", joined);
        Py_DECREF(joined);
        return r;
    }
    return PyUnicode_FromFormat("<%s>", t->tp_name);
}

static int log_access(uint64_t object, uint64_t key, int kind, uint32_t site,
                      PyObject *keyobj) {
    PyObject *r = safe_repr(keyobj);
    if (!r) return -1;
    PyObject *entry = Py_BuildValue("(nKKiIN)", (Py_ssize_t)cs_trace_length(hooks_ex),
                                    (unsigned long long)object, (unsigned long long)key, kind,
                                    (unsigned)site, r);
    if (!entry) return -1;
    int rc = PyList_Append(log_list, entry);
    Py_DECREF(entry);
    return rc;
}

/* --------------------------------------------------------------- record */

/* Records an access of `holder` (kept alive) and returns 0, or -1 with an
 * exception.  `keyobj` is only used by the verbose log. */
static int record(PyObject *holder, uint64_t key, int kind, PyObject *site_obj,
                  PyObject *keyobj) {
    uint32_t site = 0;
    if (site_obj && PyLong_CheckExact(site_obj)) {
        unsigned long s = PyLong_AsUnsignedLong(site_obj);
        if (s == (unsigned long)-1 && PyErr_Occurred()) return -1;
        site = (uint32_t)s;
    }
    uint64_t object = (uint64_t)(uintptr_t)holder;
    int rc = cs_access_record(hooks_ex, object, key,
                              kind == KIND_READ ? CS_READ : CS_WRITE, site);
    if (rc == CS_ESTATE) return 0; /* no step open: nothing to record */
    if (cs_py_check(rc) < 0) return -1;
    n_recorded++;
    if (keep_alive(holder) < 0) return -1;
    if (log_list && log_access(object, key, kind, site, keyobj) < 0) return -1;
    return 0;
}

/* A module's attributes are its globals: record them on its __dict__ so that
 * `mod.x` and a `global x` inside mod name the same resource. */
static PyObject *holder_of(PyObject *obj) {
    if (PyModule_Check(obj)) {
        PyObject *d = PyModule_GetDict(obj); /* borrowed */
        if (d) return d;
        PyErr_Clear();
    }
    return obj;
}

/* Hash of a key whose hashing runs no user code, else CS_KEY_WHOLE.  Equal
 * keys (1, 1.0, True) hash alike, as they name the same dict slot. */
static int safe_key(PyObject *k, int depth, int *ok) {
    PyTypeObject *t = Py_TYPE(k);
    if (k == Py_None || t == &PyUnicode_Type || t == &PyLong_Type || t == &PyBool_Type ||
        t == &PyFloat_Type || t == &PyBytes_Type) {
        *ok = 1;
        return 0;
    }
    if (t == &PyTuple_Type && depth < 4) {
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(k); i++) {
            safe_key(PyTuple_GET_ITEM(k, i), depth + 1, ok);
            if (!*ok) return 0;
        }
        *ok = 1;
        return 0;
    }
    *ok = 0;
    return 0;
}

static int key_hash(PyObject *k, uint64_t *out) {
    int ok = 0;
    safe_key(k, 0, &ok);
    if (!ok) {
        *out = CS_KEY_WHOLE;
        return 0;
    }
    Py_hash_t h = PyObject_Hash(k);
    if (h == -1) return -1;
    *out = (uint64_t)h; /* never CS_KEY_WHOLE: a hash is never -1 */
    return 0;
}

static int name_hash(PyObject *name, uint64_t *out) {
    if (!PyUnicode_Check(name)) {
        PyErr_Format(PyExc_TypeError, "attribute name must be string, not '%.200s'",
                     Py_TYPE(name)->tp_name);
        return -1;
    }
    Py_hash_t h = PyObject_Hash(name);
    if (h == -1) return -1;
    *out = (uint64_t)h;
    return 0;
}

static int record_attr(PyObject *obj, PyObject *name, int kind, PyObject *site) {
    uint64_t key;
    if (name_hash(name, &key) < 0) return -1;
    return record(holder_of(obj), key, kind, site, NULL);
}

static int record_item(PyObject *obj, PyObject *k, int kind, PyObject *site) {
    uint64_t key;
    if (key_hash(k, &key) < 0) return -1;
    return record(obj, key, kind, site, k);
}

#define NARGS(n, fname)                                                                    \
    if (nargs != (n)) {                                                                    \
        PyErr_Format(PyExc_TypeError, fname "() takes %d arguments (%zd given)", (n), nargs); \
        return NULL;                                                                       \
    }

/* ---------------------------------------------------- operation hooks */

/* ga(obj, name, site) -> getattr(obj, name) */
static PyObject *h_ga(PyObject *m, PyObject *const *a, Py_ssize_t nargs) {
    NARGS(3, "ga");
    if (hooks_ex && record_attr(a[0], a[1], KIND_READ, a[2]) < 0) return NULL;
    return PyObject_GetAttr(a[0], a[1]);
}

/* sa(value, obj, name, site): obj.name = value */
static PyObject *h_sa(PyObject *m, PyObject *const *a, Py_ssize_t nargs) {
    NARGS(4, "sa");
    if (hooks_ex && record_attr(a[1], a[2], KIND_WRITE, a[3]) < 0) return NULL;
    if (PyObject_SetAttr(a[1], a[2], a[0]) < 0) return NULL;
    Py_RETURN_NONE;
}

/* da(obj, name, site): del obj.name */
static PyObject *h_da(PyObject *m, PyObject *const *a, Py_ssize_t nargs) {
    NARGS(3, "da");
    if (hooks_ex && record_attr(a[0], a[1], KIND_WRITE, a[2]) < 0) return NULL;
    if (PyObject_DelAttr(a[0], a[1]) < 0) return NULL;
    Py_RETURN_NONE;
}

/* gi(obj, key, site) -> obj[key] */
static PyObject *h_gi(PyObject *m, PyObject *const *a, Py_ssize_t nargs) {
    NARGS(3, "gi");
    if (hooks_ex && record_item(a[0], a[1], KIND_READ, a[2]) < 0) return NULL;
    return PyObject_GetItem(a[0], a[1]);
}

/* si(value, obj, key, site): obj[key] = value */
static PyObject *h_si(PyObject *m, PyObject *const *a, Py_ssize_t nargs) {
    NARGS(4, "si");
    if (hooks_ex && record_item(a[1], a[2], KIND_WRITE, a[3]) < 0) return NULL;
    if (PyObject_SetItem(a[1], a[2], a[0]) < 0) return NULL;
    Py_RETURN_NONE;
}

/* di(obj, key, site): del obj[key] */
static PyObject *h_di(PyObject *m, PyObject *const *a, Py_ssize_t nargs) {
    NARGS(3, "di");
    if (hooks_ex && record_item(a[0], a[1], KIND_WRITE, a[2]) < 0) return NULL;
    if (PyObject_DelItem(a[0], a[1]) < 0) return NULL;
    Py_RETURN_NONE;
}

/* Is `f` a Python function whose code was instrumented?  Such a callee
 * records its own accesses precisely, so the call site records only the
 * attribute lookup. */
static PyObject *instrumented_files; /* set of co_filename; NULL = none */

static int is_instrumented_callable(PyObject *f) {
    if (PyMethod_Check(f)) f = PyMethod_GET_FUNCTION(f);
    if (!PyFunction_Check(f) || !instrumented_files) return 0;
    PyObject *code = PyFunction_GET_CODE(f);
    PyObject *fn = ((PyCodeObject *)code)->co_filename;
    return PySet_Contains(instrumented_files, fn) == 1;
}

/* The object a method call acts on: for `super().m()` the instance behind the
 * super object, else obj itself.  New reference. */
static PyObject *receiver_of(PyObject *obj) {
    if (Py_IS_TYPE(obj, &PySuper_Type)) {
        PyObject *self = PyObject_GetAttrString(obj, "__self__");
        if (self && self != Py_None) return self;
        Py_XDECREF(self);
        PyErr_Clear();
    }
    return Py_NewRef(obj);
}

/* cm(obj, name, kind, site, attr_site) -> getattr(obj, name), about to be
 * called.  Instrumented code (which records its own accesses precisely) and
 * module functions: a read of the attribute only (at attr_site).  Anything
 * else acts on the whole receiver (at site): kind 1 = known pure method, a
 * read; 2 = known mutator, a write; 0 = unknown, a write (over-approximation
 * is safe, under-approximation is not).  A whole access covers the attribute
 * read, so that read is not recorded again. */
static PyObject *h_cm(PyObject *m, PyObject *const *a, Py_ssize_t nargs) {
    NARGS(5, "cm");
    PyObject *obj = a[0], *name = a[1];
    if (!hooks_ex) return PyObject_GetAttr(obj, name);
    long kind = PyLong_AsLong(a[2]);
    if (kind == -1 && PyErr_Occurred()) return NULL;
    PyObject *recv = receiver_of(obj);
    PyObject *f = PyObject_GetAttr(obj, name);
    int rc;
    if (!f) {
        /* the lookup failed: it still read the attribute */
        rc = record_attr(recv, name, KIND_READ, a[4]);
    } else if (PyModule_Check(recv) || is_instrumented_callable(f)) {
        rc = record_attr(recv, name, KIND_READ, a[4]);
    } else {
        rc = record(recv, CS_KEY_WHOLE, kind == KIND_READ ? KIND_READ : KIND_WRITE, a[3], NULL);
    }
    Py_DECREF(recv);
    if (rc < 0) {
        Py_XDECREF(f);
        return NULL;
    }
    return f;
}

/* ck(method, kind, site, key, *rest) -> method(key, *rest), for d.get(k),
 * d.pop(k), d.setdefault(k, v): `method` is the bound method the interpreter
 * looked up (so evaluation order is untouched).  On an exact dict the access
 * is narrowed to the key; a builtin method of another object covers the whole
 * receiver with `kind`; an uninstrumented Python method is an unknown method
 * (a write of the whole receiver); instrumented code records for itself. */
static PyObject *h_ck(PyObject *m, PyObject *const *a, Py_ssize_t nargs) {
    if (nargs < 4) {
        PyErr_SetString(PyExc_TypeError, "ck() takes at least 4 arguments");
        return NULL;
    }
    PyObject *f = a[0];
    if (hooks_ex) {
        long kind = PyLong_AsLong(a[1]);
        if (kind == -1 && PyErr_Occurred()) return NULL;
        int k = kind == KIND_READ ? KIND_READ : KIND_WRITE;
        int rc = 0;
        if (PyCFunction_Check(f)) {
            PyObject *self = PyCFunction_GET_SELF(f);
            if (self && PyDict_CheckExact(self))
                rc = record_item(self, a[3], k, a[2]);
            else if (self && !PyModule_Check(self))
                rc = record(self, CS_KEY_WHOLE, k, a[2], NULL);
        } else if (PyMethod_Check(f) && !is_instrumented_callable(f)) {
            rc = record(PyMethod_GET_SELF(f), CS_KEY_WHOLE, KIND_WRITE, a[2], NULL);
        }
        if (rc < 0) return NULL;
    }
    return PyObject_Vectorcall(f, a + 3, (size_t)(nargs - 3), NULL);
}

/* contains(key, obj, site) -> key in obj */
static PyObject *h_contains(PyObject *m, PyObject *const *a, Py_ssize_t nargs) {
    NARGS(3, "contains");
    PyObject *k = a[0], *obj = a[1];
    if (hooks_ex) {
        int rc;
        if (PyDict_CheckExact(obj) || PyAnySet_CheckExact(obj))
            rc = record_item(obj, k, KIND_READ, a[2]);
        else
            rc = record(obj, CS_KEY_WHOLE, KIND_READ, a[2], NULL);
        if (rc < 0) return NULL;
    }
    int r = PySequence_Contains(obj, k);
    if (r < 0) return NULL;
    return PyBool_FromLong(r);
}

/* ------------------------------------------------ pass-through hooks */

/* gr(value, name, site) -> value: a read of the global `name` of the
 * calling frame's module. */
static PyObject *h_gr(PyObject *m, PyObject *const *a, Py_ssize_t nargs) {
    NARGS(3, "gr");
    if (hooks_ex) {
        PyObject *g = PyEval_GetGlobals(); /* borrowed: the caller's globals */
        if (g && record_attr(g, a[1], KIND_READ, a[2]) < 0) return NULL;
    }
    return Py_NewRef(a[0]);
}

/* gw(name, site): the caller just stored or deleted the global `name`. */
static PyObject *h_gw(PyObject *m, PyObject *const *a, Py_ssize_t nargs) {
    NARGS(2, "gw");
    if (hooks_ex) {
        PyObject *g = PyEval_GetGlobals();
        if (g && record_attr(g, a[0], KIND_WRITE, a[1]) < 0) return NULL;
    }
    Py_RETURN_NONE;
}

/* cr(value, cell, site) -> value: a read of a closure cell. */
static PyObject *h_cr(PyObject *m, PyObject *const *a, Py_ssize_t nargs) {
    NARGS(3, "cr");
    if (hooks_ex && record(a[1], CELL_KEY, KIND_READ, a[2], NULL) < 0) return NULL;
    return Py_NewRef(a[0]);
}

/* cw(cell, site): the caller just stored or deleted the cell's variable. */
static PyObject *h_cw(PyObject *m, PyObject *const *a, Py_ssize_t nargs) {
    NARGS(2, "cw");
    if (hooks_ex && record(a[0], CELL_KEY, KIND_WRITE, a[1], NULL) < 0) return NULL;
    Py_RETURN_NONE;
}

/* rd(obj, site) -> obj: a read of the whole object (len(obj), ...). */
static PyObject *h_rd(PyObject *m, PyObject *const *a, Py_ssize_t nargs) {
    NARGS(2, "rd");
    if (hooks_ex && record(holder_of(a[0]), CS_KEY_WHOLE, KIND_READ, a[1], NULL) < 0)
        return NULL;
    return Py_NewRef(a[0]);
}

/* it(obj, site) -> obj, about to be iterated: a read of the whole object for
 * the builtin containers, a write for anything else (iterators and
 * generators are consumed by iteration). */
static PyObject *h_it(PyObject *m, PyObject *const *a, Py_ssize_t nargs) {
    NARGS(2, "it");
    if (hooks_ex) {
        PyObject *o = a[0];
        PyTypeObject *t = Py_TYPE(o);
        int kind = (PyList_Check(o) || PyTuple_Check(o) || PyDict_Check(o) || PyAnySet_Check(o) ||
                    PyUnicode_Check(o) || PyBytes_Check(o) || t == &PyRange_Type ||
                    t == &PyDictKeys_Type || t == &PyDictValues_Type || t == &PyDictItems_Type)
                       ? KIND_READ
                       : KIND_WRITE;
        if (record(o, CS_KEY_WHOLE, kind, a[1], NULL) < 0) return NULL;
    }
    return Py_NewRef(a[0]);
}

/* ------------------------------------------------ driver-facing functions */

/* record(obj, kind, site=0, key=<whole>): an access recorded by Python code
 * (capture/sync.py).  kind 1 = read, 2 = write. */
static PyObject *h_record(PyObject *m, PyObject *const *a, Py_ssize_t nargs) {
    if (nargs < 2 || nargs > 4) {
        PyErr_SetString(PyExc_TypeError, "record(obj, kind, site=0, key=None)");
        return NULL;
    }
    if (!hooks_ex) Py_RETURN_NONE;
    long kind = PyLong_AsLong(a[1]);
    if (kind == -1 && PyErr_Occurred()) return NULL;
    if (kind != KIND_READ && kind != KIND_WRITE) {
        PyErr_SetString(PyExc_ValueError, "kind must be 1 (read) or 2 (write)");
        return NULL;
    }
    PyObject *site = nargs > 2 ? a[2] : NULL;
    int rc = (nargs > 3 && a[3] != Py_None) ? record_item(a[0], a[3], (int)kind, site)
                                            : record(holder_of(a[0]), CS_KEY_WHOLE, (int)kind,
                                                     site, NULL);
    if (rc < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *h_active(PyObject *m, PyObject *unused) {
    return PyBool_FromLong(hooks_ex != NULL);
}

static PyObject *h_reset(PyObject *m, PyObject *unused) {
    keep_clear();
    n_recorded = 0;
    Py_RETURN_NONE;
}

/* hooks_attach(explorer | None): for drivers and tests that run steps without
 * a LoopCore; the loop itself uses cs_hooks_set_explorer. */
static PyObject *h_attach(PyObject *m, PyObject *arg) {
    if (arg == Py_None) {
        cs_hooks_set_explorer(NULL);
        Py_RETURN_NONE;
    }
    cs_explorer *ex = cs_py_explorer_get(arg);
    if (!ex) return NULL;
    cs_hooks_set_explorer(ex);
    Py_RETURN_NONE;
}

/* hooks_log(on): verbose mode.  Returns the entries logged since the last
 * call, as tuples (trace_length, object, key, kind, site, key_repr), and
 * starts (on=True) or stops logging. */
static PyObject *h_log(PyObject *m, PyObject *arg) {
    int on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
    PyObject *out = log_list ? log_list : PyList_New(0);
    if (!out) return NULL;
    log_list = NULL;
    if (on && !(log_list = PyList_New(0))) {
        Py_DECREF(out);
        return NULL;
    }
    return out;
}

/* set_instrumented_files(set): co_filename of every instrumented module. */
static PyObject *h_set_files(PyObject *m, PyObject *arg) {
    if (arg != Py_None && !PyAnySet_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "expected a set or None");
        return NULL;
    }
    Py_XSETREF(instrumented_files, arg == Py_None ? NULL : Py_NewRef(arg));
    Py_RETURN_NONE;
}

static PyObject *h_stats(PyObject *m, PyObject *unused) {
    return Py_BuildValue("{sKsn}", "recorded", (unsigned long long)n_recorded, "kept_alive",
                         (Py_ssize_t)keep_len);
}

/* ------------------------------------------------------------ bridge */

void cs_hooks_set_explorer(cs_explorer *ex) {
    /* A new execution (or the end of one): recorded addresses are no longer
     * compared with each other, so the objects may go. */
    hooks_ex = ex;
    keep_clear();
    n_recorded = 0;
}

cs_explorer *cs_hooks_get_explorer(void) { return hooks_ex; }

#define FAST(name, fn, doc) {name, (PyCFunction)(void (*)(void))fn, METH_FASTCALL, doc}

static PyMethodDef hook_methods[] = {
    FAST("ga", h_ga, "ga(obj, name, site) -> getattr(obj, name), recorded as a read."),
    FAST("sa", h_sa, "sa(value, obj, name, site): setattr, recorded as a write."),
    FAST("da", h_da, "da(obj, name, site): delattr, recorded as a write."),
    FAST("gi", h_gi, "gi(obj, key, site) -> obj[key], recorded as a read."),
    FAST("si", h_si, "si(value, obj, key, site): obj[key] = value, recorded as a write."),
    FAST("di", h_di, "di(obj, key, site): del obj[key], recorded as a write."),
    FAST("cm", h_cm, "cm(obj, name, kind, site, attr_site) -> bound method, access per kind."),
    FAST("ck", h_ck, "ck(obj, name, kind, site, key, *rest) -> obj.name(key, *rest)."),
    FAST("contains", h_contains, "contains(key, obj, site) -> key in obj, a read."),
    FAST("gr", h_gr, "gr(value, name, site) -> value: read of a global of the caller."),
    FAST("gw", h_gw, "gw(name, site): write of a global of the caller."),
    FAST("cr", h_cr, "cr(value, cell, site) -> value: read of a closure cell."),
    FAST("cw", h_cw, "cw(cell, site): write of a closure cell."),
    FAST("rd", h_rd, "rd(obj, site) -> obj: read of the whole object."),
    FAST("it", h_it, "it(obj, site) -> obj: iteration (read of containers, else write)."),
    FAST("record", h_record, "record(obj, kind, site=0, key=None): record an access."),
    {"hooks_active", h_active, METH_NOARGS, "True while an explorer is attached to the hooks."},
    {"hooks_reset", h_reset, METH_NOARGS, "Release the objects kept alive by the hooks."},
    {"hooks_attach", h_attach, METH_O, "Point the hooks at an Explorer (or None)."},
    {"hooks_log", h_log, METH_O, "hooks_log(on) -> entries logged so far; switch logging."},
    {"hooks_stats", h_stats, METH_NOARGS, "Counters of the hooks."},
    {"set_instrumented_files", h_set_files, METH_O,
     "Filenames whose functions record their own accesses."},
    {NULL, NULL, 0, NULL},
};

int cs_register_hooks(PyObject *module) {
    /* READ / WRITE / KEY_WHOLE come from explorer.c (same values as kinds 1 / 2). */
    PyObject *cell = PyLong_FromUnsignedLongLong(CELL_KEY);
    if (!cell || PyModule_AddObject(module, "CELL_KEY", cell) < 0) {
        Py_XDECREF(cell);
        return -1;
    }
    return PyModule_AddFunctions(module, hook_methods);
}
