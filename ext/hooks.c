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
 *   - call hooks: newcall (allocations) and call (any other call handing
 *     mutable arguments to code that may not record its own accesses).
 *
 * Argument order puts the stored value FIRST in the store hooks
 * (sa(value, obj, name, site)) because Python evaluates the right-hand side
 * of an assignment before the target's sub-expressions.
 *
 * Cost model: with no explorer attached every hook is one pointer check in
 * front of the operation.  With an explorer attached, the engine itself
 * rejects accesses outside an open step (CS_ESTATE), which we ignore.
 *
 * Resources (see ARCHITECTURE.md): (identity, key), where the identity is the
 * object's canonical id (see "canonical identities" below), not its address.
 *   attribute     (obj, hash(name))          names are interned str
 *   module attr   (module.__dict__, hash(name)) = the module's globals
 *   subscript     (obj, hash(key)) for keys of safe builtin types, else
 *                 CS_KEY_WHOLE (a user __hash__ is never called)
 *   global name   (globals, hash(name))
 *   closure cell  (cell, CELL_KEY)
 *   whole object  (obj, CS_KEY_WHOLE)
 *
 * Invariant: an id never names two objects within one execution, and the
 * hooks never extend the life of an object whose death the program can
 * observe (see "object lifetimes" below).
 */
#include "compat.h"

#include <stdbool.h>

#include <stdint.h>
#include <string.h>

#define CELL_KEY ((uint64_t)0x63656c6cu) /* "cell": any fixed non-WHOLE key */

enum { KIND_UNKNOWN = 0, KIND_READ = 1, KIND_WRITE = 2 };

static cs_explorer *hooks_ex; /* NULL: every hook is a plain operation */

/* ------------------------------------------------ canonical identities */

/* The engine compares accesses of different executions (DPOR's sleep sets and
 * wakeup sequences), so an object must be named the same way in every
 * execution that reaches it the same way; an address is not (each execution
 * allocates afresh).  Each object gets, at first sight in an execution, a
 * canonical id, chosen by the first rule that applies:
 *   1. a module's globals dict: from the module's __name__;
 *   2. a class: from its __module__ and __qualname__;
 *   3. a value first seen as what a named holder holds under a safe key (read
 *      or stored by an instrumented access: `self.sessions`, `d[k]`, a
 *      global): from (holder id, key) -- so state reached through named
 *      objects is named by its path, whoever reaches it first;
 *   4. otherwise: from the step that first sees it, (actor, actor_step),
 *      and the rank of the sighting within that step -- the same in every
 *      execution where that step is the first to see it.
 * Ids are unique within an execution (a taken id is re-hashed); an object
 * reached first by different paths in different executions may get different
 * ids (a known limit: the engine may then under-approximate the dependency
 * of events from different executions).
 *
 * A cid, once given, stays in the used set until the hooks are reset: an
 * object that dies gives its address back, never its cid, so an object later
 * allocated at the same address is named afresh by the rules above (its
 * wanted id re-hashed if taken) -- deterministic across executions, because
 * deaths under reference counting are.  How the map learns of deaths without
 * keeping objects alive: "object lifetimes" below. */

#define CID_TAG 0x0B1E000000000000ULL
#define CID_MASK 0x0000FFFFFFFFFFFFULL

/* A named object.  Invariant: a slot is live iff its object is alive --
 * either wr watches it (wr_object == obj) or keep[kidx] == obj owns a
 * reference to it.  A slot whose IdRef died without its callback running
 * (the object was first named inside its own __del__, whose new weakrefs
 * CPython clears silently) is stale: lookups retire it (slot_live). */
typedef struct {
    PyObject *obj; /* the object's address, the key; NULL = empty.  Owned only
                      through keep[kidx] when wr is NULL */
    PyObject *wr;  /* weak-referenceable object: our IdRef watching it (a
                      strong reference to the weakref); NULL: held in keep[] */
    size_t kidx;   /* when wr is NULL: obj == keep[kidx] */
    uint64_t cid;
    bool stable; /* rules 1 and 2: the same id in every execution, which the
                    engine may trust (CS_ID_STABLE) */
} id_slot;

static id_slot *id_slots; /* open addressing, linear probing, no tombstones
                             (removal shifts the cluster back) */
static size_t id_cap, id_len;
static uint64_t *used_ids; /* set of cids in use (0 = empty; a cid is never 0) */
static size_t used_cap, used_len;
static size_t fresh_event = (size_t)-1;
static uint64_t fresh_rank;

static size_t ptr_hash(const void *p) {
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x;
}

static uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

static uint64_t as_cid(uint64_t h) { return CID_TAG | (mix64(h) & CID_MASK); }

static int used_has(uint64_t cid) {
    if (!used_cap) return 0;
    size_t j = (size_t)mix64(cid) & (used_cap - 1);
    while (used_ids[j]) {
        if (used_ids[j] == cid) return 1;
        j = (j + 1) & (used_cap - 1);
    }
    return 0;
}

static int used_add(uint64_t cid) {
    if (used_len * 2 >= used_cap) {
        size_t ncap = used_cap ? used_cap * 2 : 1024;
        uint64_t *n = PyMem_Calloc(ncap, sizeof *n);
        if (!n) {
            PyErr_NoMemory();
            return -1;
        }
        for (size_t i = 0; i < used_cap; i++) {
            if (!used_ids[i]) continue;
            size_t j = (size_t)mix64(used_ids[i]) & (ncap - 1);
            while (n[j]) j = (j + 1) & (ncap - 1);
            n[j] = used_ids[i];
        }
        PyMem_Free(used_ids);
        used_ids = n;
        used_cap = ncap;
    }
    size_t j = (size_t)mix64(cid) & (used_cap - 1);
    while (used_ids[j]) j = (j + 1) & (used_cap - 1);
    used_ids[j] = cid;
    used_len++;
    return 0;
}

/* ------------------------------------------------ object lifetimes */

/* The map must name objects without changing when they die (issue 9: a
 * weakref.finalize, a WeakValueDictionary entry, a __del__ must fire where
 * they fire on the stock loop).  Two kinds of slots:
 *
 *   - weak-referenceable objects are never held: the slot keeps an IdRef (a
 *     weakref subclass remembering the address) whose callback retires the
 *     slot when the object dies.  Retiring frees the address, never the cid.
 *     CPython runs the callbacks of a dying object before its memory can be
 *     reused, so a new object at the same address always finds the slot
 *     gone (or stale, see id_slot).
 *   - objects that are not weak-referenceable (list, dict, set, bytearray,
 *     tuple, cell, a __slots__ class without __weakref__, even one with
 *     __del__) cannot be watched, so the map holds a reference to them in
 *     keep[] and releases it as soon as the program cannot reach them:
 *       * at every step end (cs_hooks_sweep, called before the engine closes
 *         the step, so the finalizers that run then are accesses of that
 *         step): every held object whose only reference is ours, repeated
 *         until none is left (a released list may leave its inner lists
 *         with only our reference);
 *       * right after a hooked store or delete replaced it (the old value of
 *         `d[k] = v`, `del d[k]`, `lst[i] = v`, `self.x = v`, `del self.x`
 *         on objects with plain attribute storage): release_replaced;
 *       * in a full garbage collection: keep[] is owned by the keeper, a
 *         GC-tracked object that reports keep[] and its own (only) reference
 *         to the collector, so it is never a root.  A cycle reachable only
 *         through keep[] (parent.children = [child]; child.parent = parent)
 *         is found unreachable and collected as on the stock loop: its
 *         finalizers and weakref callbacks run, the collector clears the
 *         held containers, and the emptied husks are released at the next
 *         sweep.  The keeper itself has no tp_clear, so it survives.
 *
 * What stays approximate (written in ARCHITECTURE.md too):
 *   - a held object dropped mid-step other than by a hooked store or delete
 *     (a plain local going out of scope, `lst.pop()`, `d.clear()`, a store
 *     into a class with __setattr__ or a class-level default) keeps its
 *     contents -- and a non-weak-referenceable object its own __del__ --
 *     alive until the end of that step: the finalizers run in the same
 *     step, later within it than on the stock loop;
 *   - collections of the young generations do not look through keep[] (the
 *     keeper lives in the oldest one): cyclic garbage through a held
 *     container waits for a full collection (gc.collect(), or the automatic
 *     one), whose timing CPython does not promise anyway;
 *   - what reflects on references sees ours: sys.getrefcount of a held
 *     object is one higher, weakref.getweakrefcount/getweakrefs count the
 *     IdRef, gc.get_referrers lists the keeper, and a full collection counts
 *     the keeper (and released husks) among the unreachable objects it
 *     returns and, under gc.DEBUG_SAVEALL, in gc.garbage.
 *
 * Re-entrancy: releasing a reference, creating a weakref and the Python
 * calls of first_sight_cid may run finalizers, which call hooks.  So the
 * table changes only in code that runs no Python code (id_insert,
 * slot_delete, keep_take); canon creates the IdRef first and looks the
 * object up again afterwards; releases are batched and done after the
 * tables are consistent; and no caller keeps an id_slot pointer across a
 * call that may run Python code. */

typedef struct {
    PyWeakReference base;
    PyObject *addr; /* the watched object's address (never dereferenced once
                       it died): the key of its slot */
} IdRefObject;

static PyTypeObject IdRef_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "chaossloth._core._IdRef",
    .tp_basicsize = sizeof(IdRefObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The hooks' weak reference to an object they named.",
};

/* Deaths are accesses.  The callbacks a death runs besides ours are often
 * uninstrumented (a WeakValueDictionary or WeakSet dropping its entry,
 * finalize's registry), so what they change is invisible; instead every
 * death of a named object writes (LIVENESS, its cid) in the open step, and
 * every access of an object that observes deaths -- a weakref, a
 * WeakValueDictionary, WeakKeyDictionary, WeakSet, finalize (or a subclass)
 * -- also reads (LIVENESS, whole).  A death and a later look into a weak
 * container are thereby ordered, whichever step dropped the last reference
 * (a local going out of scope included).  Not covered: an uninstrumented
 * callable registered as a callback (weakref.finalize(obj, log.append, x))
 * mutates its receiver unseen; instrumented callbacks and __del__ record
 * their own accesses. */
#define LIVENESS_OBJECT 0xC5A2000000000000ULL

static PyObject *weak_observer_types; /* tuple of the weakref module's containers */

/* Per heap type, whether it observes deaths: a direct-mapped cache checked by
 * (type, tp_version_tag) -- a tag is never reused by another type and is
 * reset when the type changes, and 0 (no tag yet) is never cached. */
static struct {
    PyTypeObject *type;
    unsigned int tag;
    int observes;
} observer_cache[64];

static int observes_deaths(PyObject *o) {
    PyTypeObject *t = Py_TYPE(o);
    if (!(t->tp_flags & Py_TPFLAGS_HEAPTYPE))
        return t == &_PyWeakref_RefType || t == &_PyWeakref_ProxyType ||
               t == &_PyWeakref_CallableProxyType;
    size_t h = ((uintptr_t)t >> 6) & 63;
    if (t->tp_version_tag && observer_cache[h].type == t &&
        observer_cache[h].tag == t->tp_version_tag)
        return observer_cache[h].observes;
    int r = PyWeakref_Check(o);
    for (Py_ssize_t i = 0; !r && weak_observer_types && i < PyTuple_GET_SIZE(weak_observer_types);
         i++)
        r = PyType_IsSubtype(t, (PyTypeObject *)PyTuple_GET_ITEM(weak_observer_types, i));
    if (t->tp_version_tag) {
        observer_cache[h].type = t;
        observer_cache[h].tag = t->tp_version_tag;
        observer_cache[h].observes = r;
    }
    return r;
}

/* A read of every death so far and to come in this execution: what an access
 * of an object that observes deaths does besides its own access (and what
 * calling a weakref, `r()`, should do).  Inside a step only. */
static int liveness_read(uint32_t site) {
    int rc = cs_access_record(hooks_ex, LIVENESS_OBJECT, CS_KEY_WHOLE,
                              (cs_access_kind)(CS_READ | CS_ID_STABLE), site);
    return rc == CS_ESTATE ? 0 : cs_py_check(rc);
}

static PyObject *idref_callback; /* idref_died, as a callable */
static uint64_t n_deaths;        /* deaths recorded as accesses since reset */
static uint64_t n_released;      /* held objects let go since reset */
static uint64_t n_retired;       /* watched objects that died since reset */

static PyObject **keep; /* held objects (strong references), each with a slot */
static size_t keep_len, keep_cap;
static PyObject *keeper; /* owns keep[] as far as the collector knows; its
                            only reference is its own (borrowed here) */

static int keeper_traverse(PyObject *self, visitproc visit, void *arg) {
    for (size_t i = 0; i < keep_len; i++) Py_VISIT(keep[i]);
    Py_VISIT(self); /* the keeper's one reference is internal: never a root */
    return 0;
}

static void keeper_dealloc(PyObject *self) {
    PyObject_GC_UnTrack(self);
    PyObject_GC_Del(self);
}

static PyTypeObject Keeper_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "chaossloth._core._Keeper",
    .tp_basicsize = sizeof(PyObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = keeper_traverse,
    .tp_dealloc = keeper_dealloc,
    .tp_doc = "Holds the objects the hooks name but cannot watch (not weak-referenceable).",
};

/* The slot of address o, live or stale, or NULL. */
static id_slot *id_probe(const void *o) {
    if (!id_cap) return NULL;
    size_t j = ptr_hash(o) & (id_cap - 1);
    while (id_slots[j].obj) {
        if (id_slots[j].obj == o) return &id_slots[j];
        j = (j + 1) & (id_cap - 1);
    }
    return NULL;
}

/* Empties slot s and shifts the rest of its cluster back so that every
 * object stays reachable from its home position (no tombstones).  Runs no
 * Python code; the caller owns what the slot referenced (s->wr, or
 * keep[s->kidx]). */
static void slot_delete(id_slot *s) {
    size_t mask = id_cap - 1, i = (size_t)(s - id_slots), j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (!id_slots[j].obj) break;
        size_t home = ptr_hash(id_slots[j].obj) & mask;
        /* slot j may fill hole i unless its home lies cyclically in (i, j] */
        bool movable = i <= j ? (home <= i || home > j) : (home <= i && home > j);
        if (movable) {
            id_slots[i] = id_slots[j];
            i = j;
        }
    }
    memset(&id_slots[i], 0, sizeof id_slots[i]);
    id_len--;
}

/* Removes keep[k] and returns the reference it held (the caller owns it and
 * deletes the object's slot).  Runs no Python code. */
static PyObject *keep_take(size_t k) {
    PyObject *o = keep[k];
    PyObject *last = keep[--keep_len];
    if (k != keep_len) {
        keep[k] = last;
        id_slot *ls = id_probe(last);
        assert(ls && !ls->wr && ls->kidx == keep_len);
        ls->kidx = k;
    }
    return o;
}

/* Is the object of slot s still the one it names?  A watched object that
 * died without its IdRef's callback (see id_slot) is not. */
static bool slot_live(const id_slot *s) {
    return !s->wr || ((PyWeakReference *)s->wr)->wr_object == s->obj;
}

/* The live slot of o, or NULL (retiring a stale slot on the way: dropping a
 * dead IdRef runs no Python code). */
static id_slot *id_find(PyObject *o) {
    id_slot *s = id_probe(o);
    if (!s || slot_live(s)) return s;
    PyObject *wr = s->wr;
    slot_delete(s);
    n_retired++;
    Py_DECREF(wr);
    return NULL;
}

/* The IdRef's callback: o died, its slot (if it is still this IdRef's)
 * goes; its cid stays used.  Dropping the IdRef here is safe: CPython does
 * not touch a weakref after calling its callback. */
static PyObject *idref_died(PyObject *Py_UNUSED(unused), PyObject *wr) {
    if (Py_IS_TYPE(wr, &IdRef_Type)) {
        id_slot *s = id_probe(((IdRefObject *)wr)->addr);
        if (s && s->wr == wr) { /* else: a reset already dropped the slot */
            uint64_t cid = s->cid;
            slot_delete(s);
            n_retired++;
            Py_DECREF(wr);
            if (hooks_ex) {
                int rc = cs_access_record(hooks_ex, LIVENESS_OBJECT, cid,
                                          (cs_access_kind)(CS_WRITE | CS_ID_STABLE), 0);
                if (rc == CS_OK)
                    n_deaths++;
                else if (rc != CS_ESTATE && cs_py_check(rc) < 0) /* (no step open: nothing) */
                    return NULL; /* reported by CPython as unraisable */
            }
        }
    }
    Py_RETURN_NONE;
}

static PyMethodDef idref_died_def = {"_idref_died", idref_died, METH_O, NULL};

/* A new IdRef watching o (may run Python code: it allocates). */
static PyObject *idref_new(PyObject *o) {
    PyObject *args[2] = {o, idref_callback};
    PyObject *wr = PyObject_Vectorcall((PyObject *)&IdRef_Type, args, 2, NULL);
    if (wr) ((IdRefObject *)wr)->addr = o;
    return wr;
}

static int id_reserve(void) {
    if (id_len * 2 < id_cap) return 0;
    size_t ncap = id_cap ? id_cap * 2 : 1024;
    id_slot *n = PyMem_Calloc(ncap, sizeof *n);
    if (!n) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i < id_cap; i++) {
        if (!id_slots[i].obj) continue;
        size_t j = ptr_hash(id_slots[i].obj) & (ncap - 1);
        while (n[j].obj) j = (j + 1) & (ncap - 1);
        n[j] = id_slots[i];
    }
    PyMem_Free(id_slots);
    id_slots = n;
    id_cap = ncap;
    return 0;
}

static int keep_reserve(void) {
    if (keep_len < keep_cap) return 0;
    size_t ncap = keep_cap ? keep_cap * 2 : 256;
    PyObject **n = PyMem_Realloc(keep, ncap * sizeof *n);
    if (!n) {
        PyErr_NoMemory();
        return -1;
    }
    keep = n;
    keep_cap = ncap;
    return 0;
}

/* Inserts o (absent) under a cid not yet used (re-hashing `want`), watched
 * by wr (stolen) or, if wr is NULL, held in keep[].  Runs no Python code. */
static int id_insert(PyObject *o, PyObject *wr, uint64_t want, bool stable, uint64_t *out) {
    if (id_reserve() < 0 || (!wr && keep_reserve() < 0)) {
        Py_XDECREF(wr);
        return -1;
    }
    uint64_t cid = want;
    while (used_has(cid)) cid = as_cid(cid + 1);
    if (used_add(cid) < 0) {
        Py_XDECREF(wr);
        return -1;
    }
    size_t j = ptr_hash(o) & (id_cap - 1);
    while (id_slots[j].obj) j = (j + 1) & (id_cap - 1);
    id_slots[j] = (id_slot){.obj = o, .wr = wr, .cid = cid, .stable = stable};
    if (!wr) {
        id_slots[j].kidx = keep_len;
        keep[keep_len++] = Py_NewRef(o);
    }
    id_len++;
    *out = cid;
    return 0;
}

static uint64_t str_hash(PyObject *s) {
    if (!s || !PyUnicode_Check(s)) return 0;
    Py_hash_t h = PyObject_Hash(s);
    if (h == -1) {
        PyErr_Clear();
        return 0;
    }
    return (uint64_t)h;
}

/* Rule 4 names objects after the step that first sees them.  The step is
 * named by (actor, actor_step) -- the same whatever the interleaving -- when
 * the running loop tells its current actor (ControlledLoop._cs_actor), else by
 * its event index.  actor_step comes from the completed events of the trace,
 * scanned incrementally (each event once per execution). */
static uint32_t *next_step; /* per actor: actor_step of its next event */
static size_t next_step_cap, scanned;
static uint64_t fresh_origin;
static PyObject *get_running_loop; /* asyncio.events._get_running_loop */

static int current_actor(cs_actor *out) {
    if (!get_running_loop) {
        PyObject *mod = PyImport_ImportModule("asyncio.events");
        if (!mod) return -1;
        get_running_loop = PyObject_GetAttrString(mod, "_get_running_loop");
        Py_DECREF(mod);
        if (!get_running_loop) return -1;
    }
    PyObject *loop = PyObject_CallNoArgs(get_running_loop);
    if (!loop) return -1;
    int found = 0;
    if (loop != Py_None) {
        PyObject *a = PyObject_GetAttrString(loop, "_cs_actor");
        if (!a) {
            PyErr_Clear();
        } else {
            if (PyLong_Check(a)) {
                unsigned long v = PyLong_AsUnsignedLong(a);
                if (!(v == (unsigned long)-1 && PyErr_Occurred())) {
                    *out = (cs_actor)v;
                    found = 1;
                }
                PyErr_Clear();
            }
            Py_DECREF(a);
        }
    }
    Py_DECREF(loop);
    return found;
}

static int next_step_reserve(cs_actor a) {
    if (a < next_step_cap) return 0;
    size_t ncap = next_step_cap ? next_step_cap : 64;
    while (ncap <= a) ncap *= 2;
    uint32_t *n = PyMem_Realloc(next_step, ncap * sizeof *n);
    if (!n) return -1;
    memset(n + next_step_cap, 0, (ncap - next_step_cap) * sizeof *n);
    next_step = n;
    next_step_cap = ncap;
    return 0;
}

static uint64_t origin_of_open_step(size_t ev) {
    uint64_t by_index = mix64((uint64_t)ev ^ 0x65766eULL);
    cs_actor actor;
    int r = current_actor(&actor);
    if (r <= 0) {
        PyErr_Clear();
        return by_index;
    }
    for (; scanned < ev; scanned++) {
        cs_event e;
        if (cs_trace_event(hooks_ex, scanned, &e) != CS_OK) return by_index;
        if (next_step_reserve(e.actor) < 0) return by_index;
        next_step[e.actor] = e.actor_step + 1;
    }
    if (next_step_reserve(actor) < 0) return by_index;
    return mix64(((uint64_t)actor << 32) | next_step[actor]);
}

/* Rules 1, 2 and 4 of the naming (see above); *stable for rules 1 and 2. */
static uint64_t first_sight_cid(PyObject *o, bool *stable) {
    *stable = true;
    if (PyDict_CheckExact(o)) {
        PyObject *name = PyDict_GetItemString(o, "__name__"); /* borrowed, no error */
        PyObject *spec = PyDict_GetItemString(o, "__builtins__");
        if (name && spec && PyUnicode_Check(name)) return as_cid(str_hash(name) ^ 0x6d6f64ULL);
    }
    if (PyType_Check(o)) {
        PyTypeObject *t = (PyTypeObject *)o;
        if (!(t->tp_flags & Py_TPFLAGS_HEAPTYPE))
            return as_cid((uint64_t)(uintptr_t)o ^ 0x737461ULL); /* static types never move */
        PyObject *mod = t->tp_dict ? PyDict_GetItemString(t->tp_dict, "__module__") : NULL;
        PyObject *qual = ((PyHeapTypeObject *)o)->ht_qualname;
        return as_cid(mix64(str_hash(mod)) ^ str_hash(qual) ^ 0x747970ULL);
    }
    *stable = false;
    size_t ev = cs_trace_length(hooks_ex);
    if (ev != fresh_event) {
        /* origin_of_open_step runs Python code, so a finalizer may name
         * objects re-entrantly meanwhile: the origin is set before the event
         * is marked as seen, and the rank restarts only if no nested call
         * restarted it already (ids stay unique either way: id_insert
         * re-hashes taken ones). */
        uint64_t origin = origin_of_open_step(ev);
        if (ev != fresh_event) {
            fresh_origin = origin;
            fresh_rank = 0;
            fresh_event = ev;
        }
    }
    return as_cid(mix64(fresh_origin) ^ (fresh_rank++ * 0x9e3779b97f4a7c15ULL));
}

/* Names o (absent from the map) with `want`: watched if it is
 * weak-referenceable, else held.  Creating the IdRef may run Python code
 * that names o meanwhile; then that name stands. */
static int id_assign(PyObject *o, uint64_t want, bool stable, uint64_t *out) {
    PyObject *wr = NULL;
    if (PyType_SUPPORTS_WEAKREFS(Py_TYPE(o)) && !(wr = idref_new(o))) return -1;
    id_slot *s = id_find(o);
    if (s) {
        *out = s->cid;
        Py_XDECREF(wr);
        return 0;
    }
    return id_insert(o, wr, want, stable, out);
}

/* The canonical id of o in this execution (assigned at first sight), or -1
 * with an exception; *fresh = this call is the first sight. */
static int canon(PyObject *o, uint64_t *out, bool *stable, bool *fresh) {
    id_slot *s = id_find(o);
    *fresh = s == NULL;
    if (s) {
        *out = s->cid;
        *stable = s->stable;
        return 0;
    }
    uint64_t want = first_sight_cid(o, stable); /* may run Python code */
    return id_assign(o, want, *stable, out);
}

/* Rule 3: names `value` after (holder, key) unless it has a name already or
 * cannot be a holder (immutable scalars are never containers of state). */
static int name_value(PyObject *value, uint64_t holder, uint64_t key) {
    if (!value || key == CS_KEY_WHOLE) return 0;
    PyTypeObject *t = Py_TYPE(value);
    if (value == Py_None || t == &PyLong_Type || t == &PyBool_Type || t == &PyFloat_Type ||
        t == &PyUnicode_Type || t == &PyBytes_Type || t == &PyTuple_Type)
        return 0;
    if (id_find(value)) return 0;
    uint64_t cid;
    return id_assign(value, as_cid(mix64(holder) ^ key ^ 0x70617468ULL), false, &cid);
}

/* A store into a weak container (wc[k] = v): names the key and the value (if
 * they are not immutable scalars), so that their deaths, which drop the
 * entry, are recorded (see LIVENESS_OBJECT) even when nothing else names
 * them. */
static int watch_entry(PyObject *container, PyObject *key, PyObject *value) {
    if (!observes_deaths(container)) return 0;
    PyObject *both[2] = {key, value};
    for (int i = 0; i < 2; i++) {
        PyObject *o = both[i];
        PyTypeObject *t = Py_TYPE(o);
        if (o == Py_None || t == &PyLong_Type || t == &PyBool_Type || t == &PyFloat_Type ||
            t == &PyUnicode_Type || t == &PyBytes_Type)
            continue;
        uint64_t cid;
        bool stable, fresh;
        if (canon(o, &cid, &stable, &fresh) < 0) return -1;
    }
    return 0;
}

/* Releases, at every step end, the held objects that only the map still
 * references, until none is left (see "object lifetimes").  The references
 * are taken out of the tables in one batch, then dropped: the finalizers
 * this runs may call hooks, which then find consistent tables.  0, or -1
 * with MemoryError (nothing released). */
int cs_hooks_sweep(void) {
    for (;;) {
        size_t n = 0;
        for (size_t k = keep_len; k-- > 0;)
            if (Py_REFCNT(keep[k]) == 1) n++;
        if (n == 0) return 0;
        PyObject **batch = PyMem_Malloc(n * sizeof *batch);
        if (!batch) {
            PyErr_NoMemory();
            return -1;
        }
        size_t b = 0;
        /* downwards: keep_take moves the last entry, already examined, into k */
        for (size_t k = keep_len; k-- > 0 && b < n;) {
            if (Py_REFCNT(keep[k]) != 1) continue;
            id_slot *s = id_probe(keep[k]);
            assert(s && !s->wr && s->kidx == k);
            slot_delete(s);
            batch[b++] = keep_take(k);
        }
        n_released += b;
        for (size_t i = 0; i < b; i++) Py_DECREF(batch[i]);
        PyMem_Free(batch);
    }
}

/* The value a store into / delete from obj is about to replace, when it can
 * be read without running user code and the map holds something: a new
 * reference, or NULL (none known).  -1 only on an error of the read. */
static int replaced_item(PyObject *obj, PyObject *key, uint64_t hash, PyObject **old) {
    *old = NULL;
    if (!keep_len) return 0;
    if (PyDict_CheckExact(obj)) {
        /* hash: key_hash(key), CS_KEY_WHOLE when hashing it may run user code */
        if (hash == CS_KEY_WHOLE) return 0;
        *old = Py_XNewRef(_PyDict_GetItem_KnownHash(obj, key, (Py_hash_t)hash));
        return *old || !PyErr_Occurred() ? 0 : -1;
    }
    if (PyList_CheckExact(obj) && PyLong_CheckExact(key)) {
        Py_ssize_t i = PyLong_AsSsize_t(key);
        if (i == -1 && PyErr_Occurred()) {
            PyErr_Clear(); /* out of range for any list: the store raises */
            return 0;
        }
        if (i < 0) i += PyList_GET_SIZE(obj);
        if (i >= 0 && i < PyList_GET_SIZE(obj)) *old = Py_NewRef(PyList_GET_ITEM(obj, i));
    }
    return 0;
}

/* Same for an attribute: only for the generic attribute protocol with no
 * attribute of that name on the type (no descriptor, no class default), where
 * the value lives in the instance's own storage. */
static int replaced_attr(PyObject *obj, PyObject *name, PyObject **old) {
    *old = NULL;
    PyTypeObject *t = Py_TYPE(obj);
    if (!keep_len || !PyUnicode_CheckExact(name) || t->tp_setattro != PyObject_GenericSetAttr ||
        t->tp_getattro != PyObject_GenericGetAttr || _PyType_Lookup(t, name))
        return 0;
    *old = _PyObject_GenericGetAttrWithDict(obj, name, NULL, 1);
    return *old || !PyErr_Occurred() ? 0 : -1;
}

/* After a store or delete replaced `old` (a new reference, or NULL): if the
 * map held it and nothing else references it now, it goes at once, and so
 * do the held objects that only it referenced (a sweep).  -1 only when that
 * sweep fails (MemoryError). */
static int release_replaced(PyObject *old) {
    if (!old) return 0;
    id_slot *s = id_probe(old);
    bool dropped = s && !s->wr && Py_REFCNT(old) == 2; /* ours and keep[]'s */
    if (dropped) {
        size_t k = s->kidx;
        slot_delete(s);
        Py_DECREF(keep_take(k));
        n_released++;
    }
    Py_DECREF(old);
    return dropped ? cs_hooks_sweep() : 0;
}

/* Drops every name, IdRef and held reference.  The tables are detached first:
 * a __del__ run by a release may itself call a hook. */
static void ids_clear(void) {
    id_slot *slots = id_slots;
    size_t cap = id_cap;
    PyObject **held = keep;
    size_t nheld = keep_len;
    id_slots = NULL;
    id_cap = id_len = 0;
    keep = NULL;
    keep_len = keep_cap = 0;
    PyMem_Free(used_ids);
    used_ids = NULL;
    used_cap = used_len = 0;
    fresh_event = (size_t)-1;
    fresh_rank = 0;
    scanned = 0;
    if (next_step) memset(next_step, 0, next_step_cap * sizeof *next_step);
    /* IdRefs first (dropping one runs no Python code), so that deaths caused
     * by the releases below find no slot of the old tables. */
    for (size_t i = 0; i < cap; i++) Py_XDECREF(slots[i].wr);
    PyMem_Free(slots);
    for (size_t i = 0; i < nheld; i++) Py_DECREF(held[i]);
    PyMem_Free(held);
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

/* Records an access of `holder` (named and kept alive) and returns 0, or -1
 * with an exception; *cid_out (may be NULL) receives the holder's canonical
 * id.  `keyobj` is only used by the verbose log.
 *
 * CS_ID_CREATED in `kind` is the caller's claim that holder was just created
 * by the open step.  It is kept only at the object's first sight in this
 * execution: an object the hooks have named already may have been accessed
 * (or created) by another step, and the engine names an object by its first
 * access anyway.  A stable object keeps CS_ID_STABLE instead. */
static int record(PyObject *holder, uint64_t key, int kind, PyObject *site_obj,
                  PyObject *keyobj, uint64_t *cid_out) {
    uint32_t site = 0;
    if (site_obj && PyLong_CheckExact(site_obj)) {
        unsigned long s = PyLong_AsUnsignedLong(site_obj);
        if (s == (unsigned long)-1 && PyErr_Occurred()) return -1;
        site = (uint32_t)s;
    }
    uint64_t object;
    bool stable, fresh;
    if (canon(holder, &object, &stable, &fresh) < 0) return -1;
    if (cid_out) *cid_out = object;
    if (stable || !fresh) kind &= ~CS_ID_CREATED;
    int flagged = stable ? kind | CS_ID_STABLE : kind;
    int rc = cs_access_record(hooks_ex, object, key, (cs_access_kind)flagged, site);
    if (rc == CS_ESTATE) return 0; /* no step open: nothing to record */
    if (cs_py_check(rc) < 0) return -1;
    n_recorded++;
    if (log_list && log_access(object, key, kind & CS_KIND_MASK, site, keyobj) < 0) return -1;
    return observes_deaths(holder) ? liveness_read(site) : 0;
}

int cs_hooks_record_object(PyObject *obj, int kind) {
    if (!hooks_ex) return 0;
    return record(obj, CS_KEY_WHOLE, kind, NULL, NULL, NULL);
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

/* The resource (holder's id, key) of the access, for naming the value. */
typedef struct {
    uint64_t cid, key;
} path;

static int record_attr(PyObject *obj, PyObject *name, int kind, PyObject *site, path *p) {
    uint64_t key, cid;
    if (name_hash(name, &key) < 0) return -1;
    if (record(holder_of(obj), key, kind, site, NULL, &cid) < 0) return -1;
    if (p) *p = (path){cid, key};
    return 0;
}

static int record_item(PyObject *obj, PyObject *k, int kind, PyObject *site, path *p) {
    uint64_t key, cid;
    if (key_hash(k, &key) < 0) return -1;
    if (record(obj, key, kind, site, k, &cid) < 0) return -1;
    if (p) *p = (path){cid, key};
    return 0;
}

/* Names a read result after its path; on failure drops it. */
static PyObject *named(PyObject *value, const path *p) {
    if (value && hooks_ex && name_value(value, p->cid, p->key) < 0) Py_CLEAR(value);
    return value;
}

#define NARGS(n, fname)                                                                    \
    if (nargs != (n)) {                                                                    \
        PyErr_Format(PyExc_TypeError, fname "() takes %d arguments (%zd given)", (n), nargs); \
        return NULL;                                                                       \
    }

/* ---------------------------------------------------- operation hooks */

/* ga(obj, name, site) -> getattr(obj, name) */
static PyObject *h_ga(PyObject *Py_UNUSED(m), PyObject *const *a, Py_ssize_t nargs) {
    NARGS(3, "ga");
    if (!hooks_ex) return PyObject_GetAttr(a[0], a[1]);
    path p;
    if (record_attr(a[0], a[1], KIND_READ, a[2], &p) < 0) return NULL;
    return named(PyObject_GetAttr(a[0], a[1]), &p);
}

/* sa(value, obj, name, site): obj.name = value */
static PyObject *h_sa(PyObject *Py_UNUSED(m), PyObject *const *a, Py_ssize_t nargs) {
    NARGS(4, "sa");
    PyObject *old = NULL;
    if (hooks_ex) {
        path p;
        if (record_attr(a[1], a[2], KIND_WRITE, a[3], &p) < 0) return NULL;
        if (name_value(a[0], p.cid, p.key) < 0) return NULL;
        if (replaced_attr(a[1], a[2], &old) < 0) return NULL;
    }
    int rc = PyObject_SetAttr(a[1], a[2], a[0]);
    if (release_replaced(old) < 0 || rc < 0) return NULL;
    Py_RETURN_NONE;
}

/* da(obj, name, site): del obj.name */
static PyObject *h_da(PyObject *Py_UNUSED(m), PyObject *const *a, Py_ssize_t nargs) {
    NARGS(3, "da");
    PyObject *old = NULL;
    if (hooks_ex && (record_attr(a[0], a[1], KIND_WRITE, a[2], NULL) < 0 ||
                     replaced_attr(a[0], a[1], &old) < 0))
        return NULL;
    int rc = PyObject_DelAttr(a[0], a[1]);
    if (release_replaced(old) < 0 || rc < 0) return NULL;
    Py_RETURN_NONE;
}

/* gi(obj, key, site) -> obj[key] */
static PyObject *h_gi(PyObject *Py_UNUSED(m), PyObject *const *a, Py_ssize_t nargs) {
    NARGS(3, "gi");
    if (!hooks_ex) return PyObject_GetItem(a[0], a[1]);
    path p;
    if (record_item(a[0], a[1], KIND_READ, a[2], &p) < 0) return NULL;
    return named(PyObject_GetItem(a[0], a[1]), &p);
}

/* si(value, obj, key, site): obj[key] = value */
static PyObject *h_si(PyObject *Py_UNUSED(m), PyObject *const *a, Py_ssize_t nargs) {
    NARGS(4, "si");
    PyObject *old = NULL;
    if (hooks_ex) {
        path p;
        if (record_item(a[1], a[2], KIND_WRITE, a[3], &p) < 0) return NULL;
        if (name_value(a[0], p.cid, p.key) < 0) return NULL;
        if (watch_entry(a[1], a[2], a[0]) < 0) return NULL;
        if (replaced_item(a[1], a[2], p.key, &old) < 0) return NULL;
    }
    int rc = PyObject_SetItem(a[1], a[2], a[0]);
    if (release_replaced(old) < 0 || rc < 0) return NULL;
    Py_RETURN_NONE;
}

/* di(obj, key, site): del obj[key] */
static PyObject *h_di(PyObject *Py_UNUSED(m), PyObject *const *a, Py_ssize_t nargs) {
    NARGS(3, "di");
    PyObject *old = NULL;
    path p;
    if (hooks_ex && (record_item(a[0], a[1], KIND_WRITE, a[2], &p) < 0 ||
                     replaced_item(a[0], a[1], p.key, &old) < 0))
        return NULL;
    int rc = PyObject_DelItem(a[0], a[1]);
    if (release_replaced(old) < 0 || rc < 0) return NULL;
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
static PyObject *h_cm(PyObject *Py_UNUSED(m), PyObject *const *a, Py_ssize_t nargs) {
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
        rc = record_attr(recv, name, KIND_READ, a[4], NULL);
    } else if (PyModule_Check(recv) || is_instrumented_callable(f)) {
        rc = record_attr(recv, name, KIND_READ, a[4], NULL);
    } else {
        rc = record(recv, CS_KEY_WHOLE, kind == KIND_READ ? KIND_READ : KIND_WRITE, a[3], NULL,
                    NULL);
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
static PyObject *h_ck(PyObject *Py_UNUSED(m), PyObject *const *a, Py_ssize_t nargs) {
    if (nargs < 4) {
        PyErr_SetString(PyExc_TypeError, "ck() takes at least 4 arguments");
        return NULL;
    }
    PyObject *f = a[0];
    path p = {0, CS_KEY_WHOLE};
    if (hooks_ex) {
        long kind = PyLong_AsLong(a[1]);
        if (kind == -1 && PyErr_Occurred()) return NULL;
        int k = kind == KIND_READ ? KIND_READ : KIND_WRITE;
        int rc = 0;
        if (PyCFunction_Check(f)) {
            PyObject *self = PyCFunction_GET_SELF(f);
            if (self && PyDict_CheckExact(self))
                rc = record_item(self, a[3], k, a[2], &p);
            else if (self && !PyModule_Check(self))
                rc = record(self, CS_KEY_WHOLE, k, a[2], NULL, NULL);
        } else if (PyMethod_Check(f) && !is_instrumented_callable(f)) {
            rc = record(PyMethod_GET_SELF(f), CS_KEY_WHOLE, KIND_WRITE, a[2], NULL, NULL);
        }
        if (rc < 0) return NULL;
    }
    PyObject *r = PyObject_Vectorcall(f, a + 3, (size_t)(nargs - 3), NULL);
    return p.key == CS_KEY_WHOLE ? r : named(r, &p);
}

/* contains(key, obj, site) -> key in obj */
static PyObject *h_contains(PyObject *Py_UNUSED(m), PyObject *const *a, Py_ssize_t nargs) {
    NARGS(3, "contains");
    PyObject *k = a[0], *obj = a[1];
    if (hooks_ex) {
        int rc;
        if (PyDict_CheckExact(obj) || PyAnySet_CheckExact(obj))
            rc = record_item(obj, k, KIND_READ, a[2], NULL);
        else
            rc = record(obj, CS_KEY_WHOLE, KIND_READ, a[2], NULL, NULL);
        if (rc < 0) return NULL;
    }
    int r = PySequence_Contains(obj, k);
    if (r < 0) return NULL;
    return PyBool_FromLong(r);
}

/* ------------------------------------------------ pass-through hooks */

/* gr(value, name, site) -> value: a read of the global `name` of the
 * calling frame's module. */
static PyObject *h_gr(PyObject *Py_UNUSED(m), PyObject *const *a, Py_ssize_t nargs) {
    NARGS(3, "gr");
    if (hooks_ex) {
        PyObject *g = PyEval_GetGlobals(); /* borrowed: the caller's globals */
        path p;
        if (g && record_attr(g, a[1], KIND_READ, a[2], &p) < 0) return NULL;
        if (g && name_value(a[0], p.cid, p.key) < 0) return NULL;
    }
    return Py_NewRef(a[0]);
}

/* gw(name, site): the caller just stored or deleted the global `name`. */
static PyObject *h_gw(PyObject *Py_UNUSED(m), PyObject *const *a, Py_ssize_t nargs) {
    NARGS(2, "gw");
    if (hooks_ex) {
        PyObject *g = PyEval_GetGlobals();
        if (g && record_attr(g, a[0], KIND_WRITE, a[1], NULL) < 0) return NULL;
    }
    Py_RETURN_NONE;
}

/* cr(value, cell, site) -> value: a read of a closure cell. */
static PyObject *h_cr(PyObject *Py_UNUSED(m), PyObject *const *a, Py_ssize_t nargs) {
    NARGS(3, "cr");
    if (hooks_ex && record(a[1], CELL_KEY, KIND_READ, a[2], NULL, NULL) < 0) return NULL;
    return Py_NewRef(a[0]);
}

/* cw(cell, site): the caller just stored or deleted the cell's variable. */
static PyObject *h_cw(PyObject *Py_UNUSED(m), PyObject *const *a, Py_ssize_t nargs) {
    NARGS(2, "cw");
    if (hooks_ex && record(a[0], CELL_KEY, KIND_WRITE, a[1], NULL, NULL) < 0) return NULL;
    Py_RETURN_NONE;
}

/* rd(obj, site) -> obj: a read of the whole object (len(obj), ...). */
static PyObject *h_rd(PyObject *Py_UNUSED(m), PyObject *const *a, Py_ssize_t nargs) {
    NARGS(2, "rd");
    if (hooks_ex && record(holder_of(a[0]), CS_KEY_WHOLE, KIND_READ, a[1], NULL, NULL) < 0)
        return NULL;
    return Py_NewRef(a[0]);
}

/* it(obj, site) -> obj, about to be iterated: a read of the whole object for
 * the builtin containers, a write for anything else (iterators and
 * generators are consumed by iteration). */
static PyObject *h_it(PyObject *Py_UNUSED(m), PyObject *const *a, Py_ssize_t nargs) {
    NARGS(2, "it");
    if (hooks_ex) {
        PyObject *o = a[0];
        PyTypeObject *t = Py_TYPE(o);
        int kind = (PyList_Check(o) || PyTuple_Check(o) || PyDict_Check(o) || PyAnySet_Check(o) ||
                    PyUnicode_Check(o) || PyBytes_Check(o) || t == &PyRange_Type ||
                    t == &PyDictKeys_Type || t == &PyDictValues_Type || t == &PyDictItems_Type)
                       ? KIND_READ
                       : KIND_WRITE;
        if (record(o, CS_KEY_WHOLE, kind, a[1], NULL, NULL) < 0) return NULL;
    }
    return Py_NewRef(a[0]);
}

/* ------------------------------------------------ allocations */

/* new(value, site) -> value: `value` was just allocated by a list, dict or set
 * display or comprehension of the user's code, in the open step.  A write of
 * the whole object flagged CS_ID_CREATED, so that the engine names it after
 * the creating step in every execution instead of after its first access
 * (which other executions may place elsewhere).  record() drops the flag if
 * the hooks have seen the object before (then it was not fresh). */
static PyObject *h_new(PyObject *Py_UNUSED(m), PyObject *const *a, Py_ssize_t nargs) {
    NARGS(2, "new");
    if (hooks_ex && record(a[0], CS_KEY_WHOLE, KIND_WRITE | CS_ID_CREATED, a[1], NULL, NULL) < 0)
        return NULL;
    return Py_NewRef(a[0]);
}

/* Does calling `f` always return a new object?  The exact builtin container
 * types do.  So does a class whose metaclass is exactly `type` (so that the
 * call is type.__call__) and whose __new__ is object.__new__ (which only
 * allocates); its __init__ runs after the allocation, so the creation must be
 * recorded in between (see h_newcall). */
enum { NEW_NO = 0, NEW_BUILTIN = 1, NEW_CLASS = 2 };

static int fresh_callee(PyObject *f) {
    if (f == (PyObject *)&PyList_Type || f == (PyObject *)&PyDict_Type ||
        f == (PyObject *)&PySet_Type || f == (PyObject *)&PyByteArray_Type)
        return NEW_BUILTIN;
    if (!PyType_Check(f) || !Py_IS_TYPE(f, &PyType_Type)) return NEW_NO;
    PyTypeObject *t = (PyTypeObject *)f;
    if (!(t->tp_flags & Py_TPFLAGS_HEAPTYPE) || t->tp_new != PyBaseObject_Type.tp_new)
        return NEW_NO;
    return NEW_CLASS;
}

/* type.__call__(t, *args, **kw) for a class with fresh_callee() == NEW_CLASS,
 * step by step as CPython 3.11's type_call does it, recording the new
 * instance (CS_ID_CREATED) between __new__ and __init__. */
static PyObject *construct(PyTypeObject *t, PyObject *const *args, Py_ssize_t n,
                           PyObject *kwnames, PyObject *site) {
    PyObject *tuple = NULL, *kw = NULL, *obj = NULL;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (!(tuple = PyTuple_New(n))) goto cleanup;
    for (Py_ssize_t i = 0; i < n; i++) PyTuple_SET_ITEM(tuple, i, Py_NewRef(args[i]));
    if (nkw) {
        if (!(kw = PyDict_New())) goto cleanup;
        for (Py_ssize_t i = 0; i < nkw; i++)
            if (PyDict_SetItem(kw, PyTuple_GET_ITEM(kwnames, i), args[n + i]) < 0) goto cleanup;
    }
    obj = t->tp_new(t, tuple, kw);
    if (!obj) goto cleanup;
    if (!PyObject_TypeCheck(obj, t)) goto cleanup; /* (never for object.__new__) */
    if (Py_IS_TYPE(obj, t) && hooks_ex &&
        record(obj, CS_KEY_WHOLE, KIND_WRITE | CS_ID_CREATED, site, NULL, NULL) < 0) {
        Py_CLEAR(obj);
        goto cleanup;
    }
    PyTypeObject *ot = Py_TYPE(obj);
    if (ot->tp_init && ot->tp_init(obj, tuple, kw) < 0) Py_CLEAR(obj);
cleanup:
    Py_XDECREF(tuple);
    Py_XDECREF(kw);
    return obj;
}

static int record_args(PyObject *f, PyObject *const *args, Py_ssize_t n, PyObject *site);

/* newcall(f, site, *args, **kw) -> f(*args, **kw), for calls of classes of
 * the instrumented module and of list / dict / set / bytearray.  What is
 * called is checked here, at run time: only a callee that always returns a
 * new object (fresh_callee) gets its result flagged CS_ID_CREATED; anything
 * else is a plain call (a function returning an existing object must never
 * be taken for its creator). */
static PyObject *h_newcall(PyObject *Py_UNUSED(m), PyObject *const *a, size_t nargsf,
                           PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs < 2) {
        PyErr_SetString(PyExc_TypeError, "newcall(f, site, *args, **kw)");
        return NULL;
    }
    PyObject *f = a[0];
    if (!hooks_ex) return PyObject_Vectorcall(f, a + 2, (size_t)(nargs - 2), kwnames);
    Py_ssize_t n = nargs - 2 + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
    if (record_args(f, a + 2, n, a[1]) < 0) return NULL;
    int how = fresh_callee(f);
    if (how == NEW_CLASS) return construct((PyTypeObject *)f, a + 2, nargs - 2, kwnames, a[1]);
    PyObject *r = PyObject_Vectorcall(f, a + 2, (size_t)(nargs - 2), kwnames);
    if (r && how == NEW_BUILTIN && Py_IS_TYPE(r, (PyTypeObject *)f) && hooks_ex &&
        record(r, CS_KEY_WHOLE, KIND_WRITE | CS_ID_CREATED, a[1], NULL, NULL) < 0)
        Py_CLEAR(r);
    return r;
}

/* ------------------------------------------------ calls of other code */

/* What a call does to the mutable objects it is handed.  An instrumented
 * callee records its own accesses (ARG_NONE); known pure builtins, builtin
 * types (constructors) and builtin methods of the builtin containers and
 * immutables only read their arguments (ARG_READ); any other callee may mutate
 * them (ARG_WRITE: over-approximation is safe). */
enum { ARG_NONE = 0, ARG_READ = KIND_READ, ARG_WRITE = KIND_WRITE };

static PyObject *pure_builtin_names; /* frozenset of names in builtins */
static PyObject *builtins_module;

static int pure_builtin(PyObject *f) {
    if (!pure_builtin_names) {
        static const char *names[] = {
            "abs", "all", "any", "ascii", "bin", "callable", "chr", "divmod", "format",
            "getattr", "hasattr", "hash", "hex", "id", "isinstance", "issubclass", "iter",
            "len", "max", "min", "oct", "ord", "pow", "print", "repr", "round", "sorted",
            "sum", "dir", "vars", NULL};
        PyObject *lst = PyList_New(0);
        if (!lst) return -1;
        for (const char **n = names; *n; n++) {
            PyObject *s = PyUnicode_InternFromString(*n);
            if (!s || PyList_Append(lst, s) < 0) {
                Py_XDECREF(s);
                Py_DECREF(lst);
                return -1;
            }
            Py_DECREF(s);
        }
        pure_builtin_names = PyFrozenSet_New(lst);
        Py_DECREF(lst);
        if (!pure_builtin_names) return -1;
        builtins_module = PyImport_ImportModule("builtins");
        if (!builtins_module) return -1;
    }
    PyObject *self = PyCFunction_GET_SELF(f);
    if (self != builtins_module) {
        /* every function of math only reads its arguments (fsum, prod, dist...) */
        const char *mod = PyModule_GetName(self);
        if (!mod) return -1;
        return strcmp(mod, "math") == 0;
    }
    const char *name = ((PyCFunctionObject *)f)->m_ml->ml_name;
    PyObject *s = PyUnicode_FromString(name);
    if (!s) return -1;
    int r = PySet_Contains(pure_builtin_names, s);
    Py_DECREF(s);
    return r;
}

/* Is o of a builtin type whose builtin methods never mutate their arguments
 * (they may store them, read them, or call back into code that records
 * itself)? */
static int plain_builtin_receiver(PyObject *o) {
    PyTypeObject *t = Py_TYPE(o);
    return PyList_Check(o) || PyDict_Check(o) || PyAnySet_Check(o) || PyTuple_Check(o) ||
           PyUnicode_Check(o) || PyBytes_Check(o) || PyByteArray_Check(o) || PyLong_Check(o) ||
           PyFloat_Check(o) || PyComplex_Check(o) || t == &PyRange_Type ||
           (PyType_Check(o) && !(((PyTypeObject *)o)->tp_flags & Py_TPFLAGS_HEAPTYPE));
}

static int arg_effect(PyObject *f) {
    if (PyFunction_Check(f) || PyMethod_Check(f))
        return is_instrumented_callable(f) ? ARG_NONE : ARG_WRITE;
    if (PyCFunction_Check(f)) {
        PyObject *self = PyCFunction_GET_SELF(f);
        if (self && PyModule_Check(self)) {
            int r = pure_builtin(f);
            if (r < 0) return -1;
            return r ? ARG_READ : ARG_WRITE;
        }
        return self && plain_builtin_receiver(self) ? ARG_READ : ARG_WRITE;
    }
    if (PyType_Check(f)) {
        PyTypeObject *t = (PyTypeObject *)f;
        if (!(t->tp_flags & Py_TPFLAGS_HEAPTYPE)) return ARG_READ; /* builtin constructors */
        if (fresh_callee(f) == NEW_CLASS) {
            /* type.__call__ runs object.__new__ (ignores arguments), then __init__ */
            static PyObject *init_name;
            if (!init_name && !(init_name = PyUnicode_InternFromString("__init__"))) return -1;
            PyObject *init = cs_compat_type_lookup(t, init_name); /* borrowed */
            if (init && (is_instrumented_callable(init) ||
                         init == cs_compat_type_lookup(&PyBaseObject_Type, init_name)))
                return ARG_NONE;
        }
        return ARG_WRITE;
    }
    return ARG_WRITE;
}

/* An argument worth recording: not an immutable scalar, a static type, a
 * function or a coroutine (a coroutine handed on records its accesses as it
 * runs).  A bound method stands for its receiver; a tuple for its items. */
static int record_arg(PyObject *o, int kind, PyObject *site, int depth) {
    PyTypeObject *t = Py_TYPE(o);
    if (o == Py_None || t == &PyLong_Type || t == &PyBool_Type || t == &PyFloat_Type ||
        t == &PyUnicode_Type || t == &PyBytes_Type || t == &PyComplex_Type ||
        t == &PyRange_Type || o == Py_Ellipsis || o == Py_NotImplemented ||
        PyFunction_Check(o) || PyCoro_CheckExact(o) ||
        (PyType_Check(o) && !(((PyTypeObject *)o)->tp_flags & Py_TPFLAGS_HEAPTYPE)))
        return 0;
    if (t == &PyTuple_Type) {
        if (depth >= 3) return record(o, CS_KEY_WHOLE, kind, site, NULL, NULL);
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(o); i++)
            if (record_arg(PyTuple_GET_ITEM(o, i), kind, site, depth + 1) < 0) return -1;
        return 0;
    }
    if (PyMethod_Check(o)) return record_arg(PyMethod_GET_SELF(o), kind, site, depth + 1);
    if (PyCFunction_Check(o)) {
        PyObject *self = PyCFunction_GET_SELF(o);
        if (!self || PyModule_Check(self)) return 0;
        return record_arg(self, kind, site, depth + 1);
    }
    return record(holder_of(o), CS_KEY_WHOLE, kind, site, NULL, NULL);
}

/* Records what calling f does to its arguments a[0..n) (positional and
 * keyword values alike). */
static int record_args(PyObject *f, PyObject *const *args, Py_ssize_t n, PyObject *site) {
    if (n == 0) return 0;
    int kind = arg_effect(f);
    if (kind < 0) return -1;
    if (kind == ARG_NONE) return 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (record_arg(args[i], kind, site, 0) < 0) return -1;
    return 0;
}

/* call(f, site, *args, **kw) -> f(*args, **kw), for a call of code that may
 * not be instrumented: the mutable arguments are recorded as read or written
 * according to arg_effect(f).  No Python frame is added, so frame-dependent
 * callees, tracebacks and error messages are unchanged. */
static PyObject *h_call(PyObject *Py_UNUSED(m), PyObject *const *a, size_t nargsf,
                        PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs < 2) {
        PyErr_SetString(PyExc_TypeError, "call(f, site, *args, **kw)");
        return NULL;
    }
    PyObject *f = a[0];
    if (hooks_ex) {
        Py_ssize_t n = nargs - 2 + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
        if (record_args(f, a + 2, n, a[1]) < 0) return NULL;
    }
    return PyObject_Vectorcall(f, a + 2, (size_t)(nargs - 2), kwnames);
}

/* ------------------------------------------------ driver-facing functions */

/* record(obj, kind, site=0, key=<whole>): an access recorded by Python code
 * (capture/sync.py).  kind 1 = read, 2 = write, optionally or-ed with
 * ID_CREATED when obj was created by the current step. */
static PyObject *h_record(PyObject *Py_UNUSED(m), PyObject *const *a, Py_ssize_t nargs) {
    if (nargs < 2 || nargs > 4) {
        PyErr_SetString(PyExc_TypeError, "record(obj, kind, site=0, key=None)");
        return NULL;
    }
    if (!hooks_ex) Py_RETURN_NONE;
    long kind = PyLong_AsLong(a[1]);
    if (kind == -1 && PyErr_Occurred()) return NULL;
    long base = kind & CS_KIND_MASK;
    if (base < CS_READ || base > CS_LOCK_RELEASE || (kind & ~(long)(CS_KIND_MASK | CS_ID_CREATED))) {
        PyErr_SetString(PyExc_ValueError,
                        "kind must be READ, WRITE, LOCK_ACQUIRE or LOCK_RELEASE, "
                        "optionally | ID_CREATED");
        return NULL;
    }
    PyObject *site = nargs > 2 ? a[2] : NULL;
    int rc = (nargs > 3 && a[3] != Py_None)
                 ? record_item(a[0], a[3], (int)kind, site, NULL)
                 : record(holder_of(a[0]), CS_KEY_WHOLE, (int)kind, site, NULL, NULL);
    if (rc < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *h_active(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(unused)) {
    return PyBool_FromLong(hooks_ex != NULL);
}

/* Forgets every name (and lets go of held objects) with the hooks detached,
 * so that finalizers this runs -- of the execution that ended -- record
 * nothing and name nothing in the next one. */
static void hooks_clear(void) {
    cs_explorer *ex = hooks_ex;
    hooks_ex = NULL;
    ids_clear();
    n_recorded = n_released = n_retired = n_deaths = 0;
    hooks_ex = ex;
}

static PyObject *h_reset(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(unused)) {
    hooks_clear();
    Py_RETURN_NONE;
}

/* hooks_sweep(): the step-end release, for drivers that run steps without a
 * LoopCore (the loop calls cs_hooks_sweep itself). */
static PyObject *h_sweep(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(unused)) {
    if (cs_hooks_sweep() < 0) return NULL;
    Py_RETURN_NONE;
}

/* hooks_attach(explorer | None): for drivers and tests that run steps without
 * a LoopCore (a loop claims the exploration itself).  Claims the process's
 * one exploration slot (module.c; ExplorationActiveError while a loop holds
 * it); None releases what hooks_attach claimed. */
static const char hooks_owner; /* the slot's owner token for hooks_attach */
static PyObject *h_attach(PyObject *Py_UNUSED(m), PyObject *arg) {
    if (arg == Py_None) {
        cs_exploration_release(&hooks_owner);
        Py_RETURN_NONE;
    }
    if (cs_exploration_claim(&hooks_owner, NULL, arg) < 0) return NULL;
    Py_RETURN_NONE;
}

/* hooks_log(on): verbose mode.  Returns the entries logged since the last
 * call, as tuples (trace_length, object, key, kind, site, key_repr), and
 * starts (on=True) or stops logging. */
static PyObject *h_log(PyObject *Py_UNUSED(m), PyObject *arg) {
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
static PyObject *h_set_files(PyObject *Py_UNUSED(m), PyObject *arg) {
    if (arg != Py_None && !PyAnySet_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "expected a set or None");
        return NULL;
    }
    Py_XSETREF(instrumented_files, arg == Py_None ? NULL : Py_NewRef(arg));
    Py_RETURN_NONE;
}

/* hooks_object_id(obj) -> the canonical id obj has in this execution, or
 * None if no hook has seen it. */
static PyObject *h_object_id(PyObject *Py_UNUSED(m), PyObject *obj) {
    id_slot *sl = id_find(holder_of(obj));
    if (!sl) Py_RETURN_NONE;
    return PyLong_FromUnsignedLongLong(sl->cid);
}

/* Since the last reset: accesses recorded (of objects, by the hooks),
 * objects named (live slots), objects held now (kept_alive: not
 * weak-referenceable), held objects released, watched objects that died,
 * deaths recorded (as writes of LIVENESS_OBJECT, inside a step). */
static PyObject *h_stats(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(unused)) {
    return Py_BuildValue("{sKsnsnsKsKsK}", "recorded", (unsigned long long)n_recorded, "named",
                         (Py_ssize_t)id_len, "kept_alive", (Py_ssize_t)keep_len, "released",
                         (unsigned long long)n_released, "retired", (unsigned long long)n_retired,
                         "deaths", (unsigned long long)n_deaths);
}

/* ------------------------------------------------------------ bridge */

void cs_hooks_set_explorer(cs_explorer *ex) {
    /* A new execution (or the end of one): names are per execution. */
    hooks_ex = NULL;
    hooks_clear();
    hooks_ex = ex;
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
    FAST("new", h_new, "new(value, site) -> value: a fresh object created by the open step."),
    {"call", (PyCFunction)(void (*)(void))h_call, METH_FASTCALL | METH_KEYWORDS,
     "call(f, site, *args, **kw) -> f(*args, **kw); mutable arguments recorded per callee."},
    {"newcall", (PyCFunction)(void (*)(void))h_newcall, METH_FASTCALL | METH_KEYWORDS,
     "newcall(f, site, *args, **kw) -> f(*args, **kw); a fresh result is recorded as created."},
    FAST("record", h_record, "record(obj, kind, site=0, key=None): record an access."),
    {"hooks_active", h_active, METH_NOARGS, "True while an explorer is attached to the hooks."},
    {"hooks_reset", h_reset, METH_NOARGS, "Forget every name; release the objects held."},
    {"hooks_sweep", h_sweep, METH_NOARGS,
     "Release the held objects only the hooks reference (done at every step end)."},
    {"hooks_attach", h_attach, METH_O, "Point the hooks at an Explorer (or None)."},
    {"hooks_log", h_log, METH_O, "hooks_log(on) -> entries logged so far; switch logging."},
    {"hooks_stats", h_stats, METH_NOARGS, "Counters of the hooks."},
    {"hooks_object_id", h_object_id, METH_O,
     "The canonical id an object has in this execution (None if unseen)."},
    {"set_instrumented_files", h_set_files, METH_O,
     "Filenames whose functions record their own accesses."},
    {NULL, NULL, 0, NULL},
};

int cs_register_hooks(PyObject *module) {
    IdRef_Type.tp_base = &_PyWeakref_RefType;
    if (PyType_Ready(&IdRef_Type) < 0 || PyType_Ready(&Keeper_Type) < 0) return -1;
    if (!idref_callback && !(idref_callback = PyCFunction_New(&idref_died_def, NULL))) return -1;
    if (!weak_observer_types) {
        PyObject *wm = PyImport_ImportModule("weakref");
        if (!wm) return -1;
        PyObject *t[4] = {NULL};
        static const char *names[4] = {"WeakValueDictionary", "WeakKeyDictionary", "WeakSet",
                                       "finalize"};
        int ok = 1;
        for (int i = 0; i < 4 && ok; i++) {
            t[i] = PyObject_GetAttrString(wm, names[i]);
            ok = t[i] && PyType_Check(t[i]);
        }
        Py_DECREF(wm);
        if (ok) weak_observer_types = PyTuple_Pack(4, t[0], t[1], t[2], t[3]);
        for (int i = 0; i < 4; i++) Py_XDECREF(t[i]);
        if (!ok && !PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "weakref: not a class");
        if (!weak_observer_types) return -1;
    }
    if (!keeper) {
        /* its one reference is its own (keeper_traverse): the collector never
         * takes it for a root */
        keeper = (PyObject *)PyObject_GC_New(PyObject, &Keeper_Type);
        if (!keeper) return -1;
        PyObject_GC_Track(keeper);
    }
    /* READ / WRITE / KEY_WHOLE come from explorer.c (same values as kinds 1 / 2). */
    PyObject *cell = PyLong_FromUnsignedLongLong(CELL_KEY);
    if (!cell || PyModule_AddObject(module, "CELL_KEY", cell) < 0) {
        Py_XDECREF(cell);
        return -1;
    }
    return PyModule_AddFunctions(module, hook_methods);
}
