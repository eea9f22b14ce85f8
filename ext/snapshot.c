/*
 * snapshot.c -- the serializability oracle's structural snapshot (serial.py,
 * _Snapshotter) of the values it meets most: None, numbers, strings, bytes,
 * and the exact builtin tuple, frozenset, list, dict and set, walked in C.
 * Anything else goes to the snapshotter's Python walk (snap_py), which comes
 * back here for what it contains, so the result is the Python walk's,
 * element for element:
 *   - a primitive: (type name, value); a NaN float: ("float", "nan");
 *   - deeper than MAX_DEPTH: ("deep", type qualname);
 *   - tuple, frozenset (no identity): ("tuple", items), ("frozenset", items
 *     sorted by their repr);
 *   - list, dict, set: a second visit of one object is ("ref", n), n its
 *     visit number in `memo` (id -> n, numbered in visiting order; the object
 *     kept alive in `keep` so that ids stay unique); else ("list", items),
 *     ("set", items sorted by repr), ("dict", (key, value) pairs sorted by
 *     the repr of the key's snapshot, every key snapshotted before any
 *     value).
 * Sorting by repr is stable: ties keep the iteration order, as list.sort
 * does (the sort key is (repr, position)).
 */
#include "bridge.h"

#include <math.h>

#define MAX_DEPTH 64 /* serial._MAX_DEPTH */

static PyObject *s_snap_py, *s_memo, *s_keep, *s_nan, *s_ref, *s_deep;
static PyObject *n_none, *n_bool, *n_int, *n_float, *n_complex, *n_str, *n_bytes;
static PyObject *n_tuple, *n_frozenset, *n_list, *n_dict, *n_set;

typedef struct {
    PyObject *snapshotter; /* borrowed */
    PyObject *memo;        /* dict, new reference */
    PyObject *keep;        /* list, new reference */
} walk;

static PyObject *snap(walk *w, PyObject *x, long depth);

static PyObject *pair(PyObject *a, PyObject *b) { return PyTuple_Pack(2, a, b); }

static PyObject *primitive_name(PyTypeObject *t) {
    if (t == Py_TYPE(Py_None)) return n_none;
    if (t == &PyBool_Type) return n_bool;
    if (t == &PyLong_Type) return n_int;
    if (t == &PyComplex_Type) return n_complex;
    if (t == &PyUnicode_Type) return n_str;
    if (t == &PyBytes_Type) return n_bytes;
    return NULL;
}

/* The snapshots of a tuple's or a list's items (a new tuple), in order.  A list is read
 * as `for v in xs` reads it, by index against its current length, each item held while it is
 * walked: the Python walk of an item may run code (a property) that changes the list. */
static PyObject *items_of(walk *w, PyObject *seq, long depth) {
    PyObject *out = PyList_New(0);
    for (Py_ssize_t i = 0; out && i < PySequence_Fast_GET_SIZE(seq); i++) {
        PyObject *item = Py_NewRef(PySequence_Fast_GET_ITEM(seq, i));
        PyObject *s = snap(w, item, depth);
        Py_DECREF(item);
        if (!s || PyList_Append(out, s) < 0) Py_CLEAR(out);
        Py_XDECREF(s);
    }
    if (!out) return NULL;
    PyObject *tuple = PyList_AsTuple(out);
    Py_DECREF(out);
    return tuple;
}

/* The items of `list` (a list of snapshots, or of (snapshot, value) pairs when by_first),
 * sorted stably by the repr of the snapshot: a new tuple. */
static PyObject *sorted_by_repr(PyObject *list, int by_first) {
    Py_ssize_t n = PyList_GET_SIZE(list);
    PyObject *keyed = PyList_New(n);
    if (!keyed) return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(list, i);
        PyObject *r = PyObject_Repr(by_first ? PyTuple_GET_ITEM(item, 0) : item);
        PyObject *pos = r ? PyLong_FromSsize_t(i) : NULL;
        PyObject *k = pos ? PyTuple_Pack(3, r, pos, item) : NULL;
        Py_XDECREF(r);
        Py_XDECREF(pos);
        if (!k) {
            Py_DECREF(keyed);
            return NULL;
        }
        PyList_SET_ITEM(keyed, i, k);
    }
    /* (repr, position) never ties: the items themselves are never compared */
    if (PyList_Sort(keyed) < 0) {
        Py_DECREF(keyed);
        return NULL;
    }
    PyObject *out = PyTuple_New(n);
    for (Py_ssize_t i = 0; out && i < n; i++)
        PyTuple_SET_ITEM(out, i, Py_NewRef(PyTuple_GET_ITEM(PyList_GET_ITEM(keyed, i), 2)));
    Py_DECREF(keyed);
    return out;
}

/* An unordered collection's items: snapshotted in iteration order, sorted by repr. */
static PyObject *unordered(walk *w, PyObject *xs, long depth) {
    PyObject *list = PySequence_List(xs);
    if (!list) return NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
        PyObject *s = snap(w, PyList_GET_ITEM(list, i), depth);
        if (!s) {
            Py_DECREF(list);
            return NULL;
        }
        PyObject *old = PyList_GET_ITEM(list, i);
        PyList_SET_ITEM(list, i, s);
        Py_DECREF(old);
    }
    PyObject *out = sorted_by_repr(list, 0);
    Py_DECREF(list);
    return out;
}

static PyObject *dict_items(walk *w, PyObject *d, long depth) {
    PyObject *items = PyDict_Items(d); /* [(key, value)] */
    if (!items) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(items);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *kv = PyList_GET_ITEM(items, i);
        PyObject *k = snap(w, PyTuple_GET_ITEM(kv, 0), depth);
        PyObject *p = k ? pair(k, PyTuple_GET_ITEM(kv, 1)) : NULL;
        Py_XDECREF(k);
        if (!p) {
            Py_DECREF(items);
            return NULL;
        }
        PyObject *old = PyList_GET_ITEM(items, i);
        PyList_SET_ITEM(items, i, p);
        Py_DECREF(old);
    }
    PyObject *sorted = n > 1 ? sorted_by_repr(items, 1) : PySequence_Tuple(items);
    Py_DECREF(items);
    if (!sorted) return NULL;
    PyObject *out = PyTuple_New(n);
    for (Py_ssize_t i = 0; out && i < n; i++) {
        PyObject *kv = PyTuple_GET_ITEM(sorted, i);
        PyObject *v = snap(w, PyTuple_GET_ITEM(kv, 1), depth);
        PyObject *p = v ? pair(PyTuple_GET_ITEM(kv, 0), v) : NULL;
        Py_XDECREF(v);
        if (!p) Py_CLEAR(out);
        else PyTuple_SET_ITEM(out, i, p);
    }
    Py_DECREF(sorted);
    return out;
}

/* ("ref", n) for an object visited before (a new reference), NULL with no
 * exception when it is new (then numbered and kept), NULL with one on error. */
static PyObject *visit(walk *w, PyObject *x) {
    PyObject *id = PyLong_FromVoidPtr(x);
    if (!id) return NULL;
    PyObject *seen = PyDict_GetItemWithError(w->memo, id);
    if (seen) {
        Py_DECREF(id);
        return pair(s_ref, seen);
    }
    PyObject *n = PyErr_Occurred() ? NULL : PyLong_FromSsize_t(PyDict_GET_SIZE(w->memo));
    int rc = n ? PyDict_SetItem(w->memo, id, n) : -1;
    Py_XDECREF(n);
    Py_DECREF(id);
    if (rc == 0) rc = PyList_Append(w->keep, x);
    return NULL;
}

static PyObject *snap(walk *w, PyObject *x, long depth) {
    PyTypeObject *t = Py_TYPE(x);
    PyObject *name = primitive_name(t);
    if (name) return pair(name, x);
    if (t == &PyFloat_Type) return pair(n_float, isnan(PyFloat_AS_DOUBLE(x)) ? s_nan : x);
    int fast = t == &PyTuple_Type || t == &PyFrozenSet_Type || t == &PyList_Type ||
               t == &PyDict_Type || t == &PySet_Type;
    if (!fast) {
        PyObject *d = PyLong_FromLong(depth);
        if (!d) return NULL;
        PyObject *r = PyObject_CallMethodObjArgs(w->snapshotter, s_snap_py, x, d, NULL);
        Py_DECREF(d);
        return r;
    }
    PyObject *tag = t == &PyTuple_Type       ? n_tuple
                    : t == &PyFrozenSet_Type ? n_frozenset
                    : t == &PyList_Type      ? n_list
                    : t == &PyDict_Type      ? n_dict
                                             : n_set;
    if (depth > MAX_DEPTH) return pair(s_deep, tag); /* the exact types' qualnames */
    if (Py_EnterRecursiveCall(" in a serializability snapshot")) return NULL;
    PyObject *body = NULL;
    if (t == &PyTuple_Type) {
        body = items_of(w, x, depth + 1);
    } else if (t == &PyFrozenSet_Type) {
        body = unordered(w, x, depth + 1);
    } else {
        PyObject *ref = visit(w, x);
        if (ref || PyErr_Occurred()) {
            Py_LeaveRecursiveCall();
            return ref;
        }
        body = t == &PyList_Type   ? items_of(w, x, depth + 1)
               : t == &PyDict_Type ? dict_items(w, x, depth + 1)
                                   : unordered(w, x, depth + 1);
    }
    Py_LeaveRecursiveCall();
    if (!body) return NULL;
    PyObject *out = pair(tag, body);
    Py_DECREF(body);
    return out;
}

/* snapshot(snapshotter, x, depth): see the top of this file. */
static PyObject *snapshot(PyObject *Py_UNUSED(m), PyObject *const *a, Py_ssize_t nargs) {
    if (nargs != 3 || !PyLong_Check(a[2])) {
        PyErr_SetString(PyExc_TypeError, "snapshot(snapshotter, x, depth: int)");
        return NULL;
    }
    long depth = PyLong_AsLong(a[2]);
    if (depth == -1 && PyErr_Occurred()) return NULL;
    walk w = {a[0], PyObject_GetAttr(a[0], s_memo), NULL};
    if (!w.memo) return NULL;
    PyObject *out = NULL;
    if (!PyDict_CheckExact(w.memo)) {
        PyErr_SetString(PyExc_TypeError, "snapshot(): the snapshotter's memo is not a dict");
        goto done;
    }
    if (!(w.keep = PyObject_GetAttr(a[0], s_keep))) goto done;
    if (!PyList_CheckExact(w.keep)) {
        PyErr_SetString(PyExc_TypeError, "snapshot(): the snapshotter's keep is not a list");
        goto done;
    }
    out = snap(&w, a[1], depth);
done:
    Py_XDECREF(w.memo);
    Py_XDECREF(w.keep);
    return out;
}

static PyMethodDef snapshot_methods[] = {
    {"snapshot", (PyCFunction)(void (*)(void))snapshot, METH_FASTCALL,
     "snapshot(snapshotter, x, depth): serial._Snapshotter.snap's walk of the builtin values, "
     "in C; anything else by snapshotter.snap_py(x, depth)."},
    {NULL, NULL, 0, NULL},
};

int cs_register_snapshot(PyObject *module) {
#define STR(var, text)                                                                         \
    if (!(var = PyUnicode_InternFromString(text))) return -1
    STR(s_snap_py, "snap_py");
    STR(s_memo, "memo");
    STR(s_keep, "keep");
    STR(s_nan, "nan");
    STR(s_ref, "ref");
    STR(s_deep, "deep");
    STR(n_none, "NoneType");
    STR(n_bool, "bool");
    STR(n_int, "int");
    STR(n_float, "float");
    STR(n_complex, "complex");
    STR(n_str, "str");
    STR(n_bytes, "bytes");
    STR(n_tuple, "tuple");
    STR(n_frozenset, "frozenset");
    STR(n_list, "list");
    STR(n_dict, "dict");
    STR(n_set, "set");
#undef STR
    return PyModule_AddFunctions(module, snapshot_methods);
}
