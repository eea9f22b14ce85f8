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
 *   key order     (dict or namespace holder, ORDER_KEY): written by an
 *                 insertion (see "insertion order")
 *   whole object  (obj, CS_KEY_WHOLE)
 *
 * Invariant: an id never names two objects within one execution, and the
 * hooks never extend the life of an object whose death the program can
 * observe (see "object lifetimes" below).
 */
#include "compat.h"

#ifndef Py_T_OBJECT_EX /* 3.11: the member types are structmember.h's */
#include <structmember.h>
#define Py_T_OBJECT_EX T_OBJECT_EX
#endif
#include <ctype.h>
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
    bool finalized; /* a weakref.finalize / weakref callback was registered on
                       it through a hook: its death runs code we may not see */
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
 *       * in a garbage collection: keep[] is owned by the keeper, a
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
 *   - the keeper ages like any object: the runner makes it young at the
 *     start of every execution (hooks_keeper_young), and a collection of a
 *     generation younger than the keeper's does not look through keep[], so
 *     cyclic garbage through a held container may wait for an older
 *     collection than on the stock loop (CPython promises no timing);
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
            bool finalized = s->finalized;
            slot_delete(s);
            n_retired++;
            Py_DECREF(wr);
            /* its finalizers (weakref.finalize(o, log.append, x)...) may be
             * uninstrumented callables acting on anything: a global write */
            if (hooks_ex && finalized) {
                int rc = cs_access_record(hooks_ex, CS_OBJECT_ALL, CS_KEY_WHOLE,
                                          (cs_access_kind)(CS_WRITE | CS_ID_STABLE), 0);
                if (rc != CS_OK && rc != CS_ESTATE && cs_py_check(rc) < 0) return NULL;
            }
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
    /* the common case, answered by the loop core itself; any other (a loop of another kind
     * running on this thread) through asyncio */
    if (cs_loop_running_actor(out)) return 1;
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
        t->tp_getattro != PyObject_GenericGetAttr || cs_compat_type_lookup(t, name))
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

static uint64_t hooks_gen; /* bumped at every reset: per-step caches compare it */
static PyObject *aliases;
static PyObject *type_kinds; /* type -> classification bits (see type_bits) */
static PyObject *protocol_kinds; /* type -> opaque-protocol bits (see protocol_bits) */

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
    hooks_gen++;
    Py_CLEAR(aliases);
    Py_CLEAR(type_kinds);
    Py_CLEAR(protocol_kinds);
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
static int site_of(PyObject *site_obj, uint32_t *site) {
    *site = 0;
    if (site_obj && PyLong_CheckExact(site_obj)) {
        unsigned long s = PyLong_AsUnsignedLong(site_obj);
        if (s == (unsigned long)-1 && PyErr_Occurred()) return -1;
        *site = (uint32_t)s;
    }
    return 0;
}

/* The global barrier: an access of (CS_OBJECT_ALL, CS_KEY_WHOLE), which
 * overlaps every resource (as a write it conflicts with every access).  It
 * names no Python object: it never goes through canon() (no id, nothing kept
 * alive) and always carries CS_ID_STABLE (it is the same in every execution).
 * Recorded where an operation can touch state the hooks cannot name (exec,
 * eval, globals(), sys.modules changes), or where a deep read or write gives
 * up (too large an object graph): coarser than any real access. */
/* Writes made by a thread other than the one that attached the explorer (the loop's): a
 * thread the program started, running beside the loop's steps.  They are recorded as the
 * open step's (or not at all between steps), and their interleavings with the loop's steps
 * are not explored: the front end takes the count (hooks_thread_accesses) and says the
 * exploration is not complete.  Such a thread's reads are not counted (a read of the future
 * it completes, of the loop it calls, is every such thread's): a read racing a step's write
 * is a gap (issue 37). */
static unsigned long hooks_thread;
static uint64_t n_thread_accesses;

/* obj is the loop, one of its futures, a method bound to one (fut.set_result), or an object
 * of the capture's own (a RecordingMethod: the future's class attribute that a bound method's
 * walk reaches) */
static int loop_side(PyObject *obj) {
    if (cs_loop_is_core(obj) || PyObject_HasAttrString(obj, "_asyncio_future_blocking")) return 1;
    if (strncmp(Py_TYPE(obj)->tp_name, "chaossloth._core.", 17) == 0) return 1;
    /* what a walk of a future's bound method reaches of its C type: the type's own descriptors
     * (3.12+), immutable, nobody's state */
    PyTypeObject *t = Py_TYPE(obj);
    if (t == &PyMethodDescr_Type || t == &PyGetSetDescr_Type || t == &PyMemberDescr_Type ||
        t == &PyClassMethodDescr_Type || t == &PyWrapperDescr_Type)
        return 1;
    if (PyType_Check(obj) && !(((PyTypeObject *)obj)->tp_flags & Py_TPFLAGS_HEAPTYPE)) return 1;
    PyObject *self = PyObject_GetAttrString(obj, "__self__");
    if (!self) {
        PyErr_Clear();
        return 0;
    }
    int side = self != obj && self != Py_None &&
               (cs_loop_is_core(self) || PyObject_HasAttrString(self, "_asyncio_future_blocking"));
    Py_DECREF(self);
    return side;
}

static void note_thread(int kind, PyObject *holder) {
    if (!hooks_ex || (kind & CS_KIND_MASK) != KIND_WRITE ||
        PyThread_get_thread_ident() == hooks_thread)
        return;
    /* the loop and its futures are what such a thread hands its events to
     * (call_soon_threadsafe(fut.set_result, v)): the external event the loop models */
    if (holder && loop_side(holder)) return;
    n_thread_accesses++;
}

static int record_barrier(int kind, PyObject *site_obj) {
    note_thread(kind, NULL);
    uint32_t site;
    if (site_of(site_obj, &site) < 0) return -1;
    int base = kind & CS_KIND_MASK;
    int rc = cs_access_record(hooks_ex, CS_OBJECT_ALL, CS_KEY_WHOLE,
                              (cs_access_kind)(base | CS_ID_STABLE), site);
    if (rc == CS_ESTATE) return 0;
    if (cs_py_check(rc) < 0) return -1;
    n_recorded++;
    if (log_list && log_access(CS_OBJECT_ALL, CS_KEY_WHOLE, base, site, NULL) < 0) return -1;
    return 0;
}

/* ---- aliases: an instance's __dict__ is the instance's attributes.  When
 * the hooks hand out obj.__dict__ (or vars(obj)), the dict is registered as
 * an alias of obj, so that d[k] / d[k] = v through it are recorded on
 * (obj, hash(k)), the very resource obj.k names (an attribute key is the hash
 * of its name, a str key hashes alike).  Map: id(dict) -> (dict, obj), both
 * held (the owner is kept alive by its id anyway). */
/* (declared above ids_clear) aliases: dict or NULL */
static PyObject *modules_dict; /* sys.modules (borrowed from the interpreter) */

static int add_alias(PyObject *d, PyObject *owner) {
    if (!PyDict_Check(d) || d == owner) return 0;
    if (!aliases && !(aliases = PyDict_New())) return -1;
    PyObject *k = PyLong_FromVoidPtr(d);
    PyObject *v = k ? PyTuple_Pack(2, d, owner) : NULL;
    int rc = v ? PyDict_SetItem(aliases, k, v) : -1;
    Py_XDECREF(k);
    Py_XDECREF(v);
    return rc;
}

/* The object an access of `o` really touches (borrowed). */
static PyObject *alias_of(PyObject *o) {
    if (!aliases || !PyDict_Check(o) || !PyDict_GET_SIZE(aliases)) return o;
    PyObject *k = PyLong_FromVoidPtr(o);
    if (!k) {
        PyErr_Clear();
        return o;
    }
    PyObject *v = PyDict_GetItemWithError(aliases, k);
    Py_DECREF(k);
    if (!v) {
        PyErr_Clear();
        return o;
    }
    return PyTuple_GET_ITEM(v, 1);
}

/* A direct-mapped cache of the accesses recorded in the open step: an access
 * equal to one already recorded in the same step (same object, key, kind and
 * site) adds nothing to the trace's dependency relation (the engine keeps one
 * access per resource and kind in a step), so it is not recorded again.  The
 * loops and method calls of hot code repeat accesses at one site; this keeps
 * their cost to a table probe.  Entries are valid for one step of one
 * execution (ev, gen).  The table is indexed by canonical ids, never by
 * addresses: which accesses are deduplicated (and so the trace's fingerprint
 * and the events DPOR compares) must be the same in every execution that
 * reaches the same step the same way. */
#define RCACHE_SIZE 512
typedef struct {
    uint64_t key, cid;
    size_t ev;
    uint64_t gen;
    uint32_t site;
    int kind;
} rcache_entry;
static rcache_entry rcache[RCACHE_SIZE];

static rcache_entry *rcache_slot(uint64_t cid, uint64_t key, int kind, uint32_t site) {
    uint64_t h = mix64(cid ^ mix64(key) ^ ((uint64_t)site << 8) ^ (uint64_t)kind);
    return &rcache[h & (RCACHE_SIZE - 1)];
}

static int record(PyObject *holder, uint64_t key, int kind, PyObject *site_obj,
                  PyObject *keyobj, uint64_t *cid_out) {
    note_thread(kind, holder);
    uint32_t site;
    if (site_of(site_obj, &site) < 0) return -1;
    if (!modules_dict) modules_dict = PyImport_GetModuleDict();
    /* a change of sys.modules changes what every later import (run by
     * uninstrumented machinery) finds: a global write */
    if (holder == modules_dict && (kind & CS_KIND_MASK) == KIND_WRITE &&
        record_barrier(KIND_WRITE, site_obj) < 0)
        return -1;
    holder = alias_of(holder);
    /* an object that observes deaths (a weak container, a weakref) sees the
     * objects only the map still holds as dead, as on the stock loop */
    int observer = observes_deaths(holder);
    if (observer && keep_len && cs_hooks_sweep() < 0) return -1;
    uint64_t object;
    bool stable, fresh;
    if (canon(holder, &object, &stable, &fresh) < 0) return -1;
    if (cid_out) *cid_out = object;
    if (stable || !fresh) kind &= ~CS_ID_CREATED;
    int flagged = stable ? kind | CS_ID_STABLE : kind;
    /* the step: its index in the trace, within this execution (executions
     * ended so far) of this attachment of the hooks */
    size_t ev = cs_trace_length(hooks_ex);
    cs_stats st;
    cs_explorer_stats(hooks_ex, &st);
    uint64_t gen = mix64(hooks_gen ^ mix64(st.executions));
    rcache_entry *slot = rcache_slot(object, key, flagged, site);
    if (slot->cid == object && slot->key == key && slot->kind == flagged &&
        slot->site == site && slot->ev == ev && slot->gen == gen && !log_list)
        return 0;
    int rc = cs_access_record(hooks_ex, object, key, (cs_access_kind)flagged, site);
    if (rc == CS_ESTATE) return 0; /* no step open: nothing to record */
    if (cs_py_check(rc) < 0) return -1;
    *slot = (rcache_entry){key, object, ev, gen, site, flagged};
    n_recorded++;
    if (log_list && log_access(object, key, kind & CS_KIND_MASK, site, keyobj) < 0) return -1;
    return observer ? liveness_read(site) : 0;
}

int cs_hooks_record_object(PyObject *obj, int kind) {
    if (!hooks_ex) return 0;
    return record(obj, CS_KEY_WHOLE, kind, NULL, NULL, NULL);
}

/* The sites of the task accesses the loop core records (set_task_sites): capture/sync.py's
 * "Task.step()" and "Task.complete()", registered like its other sites. */
static PyObject *task_step_site, *task_complete_site;


/* A module's attributes are its globals: record them on its __dict__ so that
 * `mod.x` and a `global x` inside mod name the same resource. */
static PyObject *holder_of(PyObject *obj) {
    /* super().m(...) acts on the instance super() is bound to (the super
     * object keeps it alive, so a borrowed reference is safe) */
    if (Py_IS_TYPE(obj, &PySuper_Type)) {
        PyObject *self = PyObject_GetAttrString(obj, "__self__");
        if (self && self != Py_None) {
            Py_DECREF(self);
            return self;
        }
        Py_XDECREF(self);
        PyErr_Clear();
        return obj;
    }
    if (PyModule_Check(obj)) {
        PyObject *d = PyModule_GetDict(obj); /* borrowed */
        if (d) return d;
        PyErr_Clear();
    }
    return obj;
}

/* An access of (obj, key) at a site, unless nothing records (no explorer, or a plain read
 * while cs_hooks_quiet_reads). */
static int record_hashed(PyObject *obj, uint64_t key, int kind, PyObject *site) {
    if (!hooks_ex) return 0;
    if (cs_hooks_quiet_reads && kind == CS_READ) return 0;
    return record(holder_of(obj), key, kind, site, NULL, NULL);
}

int cs_hooks_record_at(PyObject *obj, int kind, PyObject *site) {
    return record_hashed(obj, CS_KEY_WHOLE, kind, site);
}

/* The keys of a future's state (set_future_keys): state_keys[0] is the state key proper,
 * the others the C Future's and Task's attributes a completion may change, so that code
 * reading one (f._result) conflicts with it; callbacks_key is the "_callbacks" attribute's.
 * None set: a completion writes the whole future and a step reads its whole task. */
static uint64_t *state_keys;
static size_t n_state_keys;
static uint64_t callbacks_key;

int cs_hooks_record_completion(PyObject *fut, PyObject *site) {
    if (!hooks_ex) return 0;
    if (!n_state_keys) return cs_hooks_record_at(fut, CS_WRITE, site);
    for (size_t i = 0; i < n_state_keys; i++)
        if (record_hashed(fut, state_keys[i], CS_WRITE, site) < 0) return -1;
    return record_hashed(fut, callbacks_key, CS_WRITE, site);
}

int cs_hooks_record_registration(PyObject *fut, PyObject *site) {
    if (!n_state_keys) return cs_hooks_record_at(fut, CS_WRITE, site);
    return record_hashed(fut, callbacks_key, CS_ADD, site);
}

int cs_hooks_record_state_read(PyObject *fut, PyObject *site) {
    if (!n_state_keys) return cs_hooks_record_at(fut, CS_READ, site);
    return record_hashed(fut, state_keys[0], CS_READ, site);
}

int cs_hooks_record_task(PyObject *task, int kind) {
    if ((kind & CS_KIND_MASK) != CS_READ)
        return cs_hooks_record_completion(task, task_complete_site);
    return cs_hooks_record_state_read(task, task_step_site);
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

static int read_key(PyObject *k, PyObject *site);

static int record_item(PyObject *obj, PyObject *k, int kind, PyObject *site, path *p) {
    uint64_t key, cid;
    if (key_hash(k, &key) < 0) return -1;
    /* a key of another type is hashed and compared by its own dunders */
    if (key == CS_KEY_WHOLE && read_key(k, site) < 0) return -1;
    if (record(obj, key, kind, site, k, &cid) < 0) return -1;
    if (p) *p = (path){cid, key};
    return 0;
}

/* ------------------------------------------------- insertion order
 *
 * A dict iterates in insertion order, and so do the namespaces kept in dicts:
 * an instance's attributes, a class's, a module's globals.  Two steps that
 * insert different keys commute in content but not in order: list(d),
 * next(iter(d)), popitem() and vars(obj) tell the two orders apart.  So an
 * insertion of a key that was absent also writes the holder's ORDER_KEY:
 * insertions order each other, and a whole read (an iteration) conflicts with
 * it as with every key write.  An update of a present key leaves the order as
 * it was, and a deletion keeps the relative order of the keys that stay: they
 * write their key only (deleting a key and storing it again is an insertion,
 * seen when the store runs).  Where a hook cannot tell an insertion from an
 * update it records the insertion. */
#define ORDER_KEY ((uint64_t)0x6f72646572ULL) /* "order": any fixed non-WHOLE key */

static int record_insertion(PyObject *holder, PyObject *site) {
    return record(holder, ORDER_KEY, KIND_WRITE, site, NULL, NULL);
}

/* 1 if storing d[k] inserts k (a dict, or a subclass: its entries are the
 * dict's), 0 if not, -1 on error.  Called only for keys of safe types (their
 * hash and equality run no user code). */
static int dict_lacks(PyObject *d, PyObject *k) {
    if (!PyDict_Check(d)) return 0;
    int c = PyDict_Contains(d, k);
    return c < 0 ? -1 : !c;
}

/* Do instances of t have a __dict__ (an offset, or a dict CPython manages)? */
static int type_has_dict(PyTypeObject *t) {
#ifdef Py_TPFLAGS_MANAGED_DICT
    return t->tp_dictoffset != 0 || (t->tp_flags & Py_TPFLAGS_MANAGED_DICT);
#else
    return t->tp_dictoffset != 0;
#endif
}

/* 1 if `obj.name = value` may insert `name` into a namespace dict, 0 if it
 * surely does not, -1 on error. */
static int attr_inserts(PyObject *obj, PyObject *name) {
    if (PyModule_Check(obj)) return dict_lacks(PyModule_GetDict(obj), name);
    if (PyType_Check(obj)) {
        PyObject *d = ((PyTypeObject *)obj)->tp_dict;
        return d ? dict_lacks(d, name) : 0;
    }
    PyTypeObject *t = Py_TYPE(obj);
    /* a __setattr__ of its own runs instrumented code (recording what it
     * does) or is a C type's, which keeps no namespace dict of the object */
    if (t->tp_setattro != PyObject_GenericSetAttr || !PyUnicode_Check(name)) return 0;
    PyObject *descr = cs_compat_type_lookup(t, name); /* borrowed */
    if (descr && Py_TYPE(descr)->tp_descr_set) return 0; /* a data descriptor stores it */
    if (!type_has_dict(t)) return 0;
    if (!descr) {
        /* nothing on the class: the instance's own value, found without
         * materializing its dict */
        PyObject *v = _PyObject_GenericGetAttrWithDict(obj, name, NULL, 1);
        if (v) {
            Py_DECREF(v);
            return 0;
        }
        return PyErr_Occurred() ? -1 : 1;
    }
    /* a class-level default: only the instance dict says whether it is shadowed */
    PyObject *d = PyObject_GenericGetDict(obj, NULL);
    if (!d) {
        PyErr_Clear();
        return 1;
    }
    int lacks = dict_lacks(d, name);
    Py_DECREF(d);
    return lacks;
}

/* 1 if `name`, just stored in the dict `g`, may have been inserted: an
 * insertion appends, so a key that is not the last one was updated in place;
 * the last one may be either (0 if not, -1 on error). */
static int stored_last(PyObject *g, PyObject *name) {
    PyObject *it = PyObject_CallMethod(g, "__reversed__", NULL);
    if (!it) return -1;
    PyObject *last = PyIter_Next(it);
    Py_DECREF(it);
    if (!last) return PyErr_Occurred() ? -1 : 0;
    /* a key of another type would compare by its own __eq__: taken as inserted */
    int same = last == name || !PyUnicode_CheckExact(last)
                   ? 1
                   : PyObject_RichCompareBool(last, name, Py_EQ);
    Py_DECREF(last);
    return same;
}

int cs_hooks_record_key(PyObject *obj, PyObject *key, int kind) {
    if (!hooks_ex) return 0;
    return record_item(obj, key, kind, NULL, NULL);
}

/* Names a read result after its path; on failure drops it. */
static PyObject *named(PyObject *value, const path *p) {
    if (value && hooks_ex && name_value(value, p->cid, p->key) < 0) Py_CLEAR(value);
    return value;
}

/* Is `f` a Python function whose code was instrumented?  Such a callee
 * records its own accesses precisely, so the call site records only the
 * attribute lookup. */
static PyObject *instrumented_files; /* set of co_filename; NULL = none */
/* Functions that record their own accesses although their code is not
 * instrumented: capture/sync.py's wrappers of asyncio's primitives (they
 * record the primitive's state precisely and never mutate their arguments).
 * NULL = none. */
static PyObject *self_recording;
/* The classes those wrappers belong to (a tuple), or NULL.  The wrappers
 * record the primitive's state under keys of their own, so code that stores
 * into one of its attributes writes the whole primitive. */
static PyObject *self_recording_types;


static int is_instrumented_callable(PyObject *f) {
    if (PyMethod_Check(f)) f = PyMethod_GET_FUNCTION(f);
    /* a RecordingFuture's or RecordingTask's method records what it does itself */
    if (cs_recording_is_method(f)) return 1;
    if (!PyFunction_Check(f)) return 0;
    if (self_recording && PySet_Contains(self_recording, f) == 1) return 1;
    if (!instrumented_files) return 0;
    PyObject *code = PyFunction_GET_CODE(f);
    PyObject *fn = cs_compat_code_filename(code);
    return PySet_Contains(instrumented_files, fn) == 1;
}

/* ------------------------------------------ what protocols read and write */

/* Values whose state cannot change: no access to record when they are read. */
static int immutable_value(PyObject *o) {
    PyTypeObject *t = Py_TYPE(o);
    return o == Py_None || t == &PyLong_Type || t == &PyBool_Type || t == &PyFloat_Type ||
           t == &PyUnicode_Type || t == &PyBytes_Type || t == &PyComplex_Type ||
           t == &PyRange_Type || o == Py_Ellipsis || o == Py_NotImplemented ||
           PyFunction_Check(o) || PyCoro_CheckExact(o) || PyCode_Check(o) ||
           (PyType_Check(o) && !(((PyTypeObject *)o)->tp_flags & Py_TPFLAGS_HEAPTYPE));
}

/* The layout of a dict view (CPython's _PyDictViewObject, public up to 3.12,
 * internal since 3.13 with the same layout). */
typedef struct {
    PyObject_HEAD
    PyObject *dv_dict;
} dict_view_layout;

/* A dict view stands for its dict (views of dict subclasses included). */
static PyObject *view_base(PyObject *o) {
    PyTypeObject *t = Py_TYPE(o);
    if (t == &PyDictKeys_Type || t == &PyDictValues_Type || t == &PyDictItems_Type) {
        PyObject *d = ((dict_view_layout *)o)->dv_dict;
        if (d) return d;
    }
    return o;
}

static PyTypeObject *deque_type; /* collections.deque, looked up once */

static int is_deque(PyObject *o) {
    if (!deque_type) {
        PyObject *mod = PyImport_ImportModule("collections");
        PyObject *d = mod ? PyObject_GetAttrString(mod, "deque") : NULL;
        Py_XDECREF(mod);
        if (!d) {
            PyErr_Clear();
            return 0;
        }
        deque_type = (PyTypeObject *)d; /* kept for the process */
    }
    return PyObject_TypeCheck(o, deque_type);
}

/* Classification of a heap type, cached per execution (type_kinds):
 *   TB_OPAQUE_VALUE  a comparison / hash / formatting dunder is defined by
 *                    code that does not record itself (a dataclass's
 *                    generated __eq__ / __repr__, an uninstrumented base):
 *                    it may read every attribute;
 *   TB_HAS_TRUTH     __bool__ or __len__ is defined (a truth test calls it);
 *   TB_OPAQUE_TRUTH  ... by code that does not record itself.
 * A dunder inherited from object or defined by instrumented code is not
 * opaque: object's read no state (identity, type name), instrumented code
 * records what it reads. */
enum { TB_OPAQUE_VALUE = 1, TB_HAS_TRUTH = 2, TB_OPAQUE_TRUTH = 4, TB_KNOWN = 8 };

static const char *value_dunders[] = {"__eq__",  "__ne__",  "__lt__",     "__le__",
                                      "__gt__",  "__ge__",  "__hash__",   "__repr__",
                                      "__str__", "__format__", "__iter__", NULL};
static const char *truth_dunders[] = {"__bool__", "__len__", NULL};

/* 0: absent or harmless, 1: defined and opaque, 2: defined by instrumented code */
static int dunder_kind(PyTypeObject *t, const char *cname) {
    PyObject *name = PyUnicode_InternFromString(cname);
    if (!name) {
        PyErr_Clear();
        return 1;
    }
    PyObject *v = cs_compat_type_lookup(t, name); /* borrowed */
    PyObject *base = cs_compat_type_lookup(&PyBaseObject_Type, name);
    Py_DECREF(name);
    if (!v || v == Py_None || v == base) return 0;
    if (PyFunction_Check(v) && is_instrumented_callable(v)) return 2;
    return 1;
}

static int type_bits(PyTypeObject *t) {
    PyObject *cached = type_kinds ? PyDict_GetItemWithError(type_kinds, (PyObject *)t) : NULL;
    if (cached) return (int)PyLong_AsLong(cached);
    PyErr_Clear();
    int bits = TB_KNOWN;
    for (const char **n = value_dunders; *n; n++)
        if (dunder_kind(t, *n) == 1) bits |= TB_OPAQUE_VALUE;
    for (const char **n = truth_dunders; *n; n++) {
        int k = dunder_kind(t, *n);
        if (k) bits |= TB_HAS_TRUTH;
        if (k == 1) bits |= TB_OPAQUE_TRUTH;
    }
    if (!type_kinds) type_kinds = PyDict_New();
    PyObject *v = PyLong_FromLong(bits);
    if (!type_kinds || !v || PyDict_SetItem(type_kinds, (PyObject *)t, v) < 0) PyErr_Clear();
    Py_XDECREF(v);
    return bits;
}

/* ------------------------------------------- opaque item and attribute protocols
 *
 * `obj[k]`, `obj[k] = v`, `del obj[k]`, `k in obj` and `obj.name = v` are
 * recorded as accesses of the key or the attribute: what the builtin
 * containers' own slots do (dict, list, deque, OrderedDict, ... and their
 * subclasses that inherit them), and what instrumented dunders do besides
 * recording for themselves.  A dunder defined by code that does not record
 * itself -- a library's Python class (weakref.WeakValueDictionary,
 * collections.UserDict, an LRU cache whose lookup moves the key to the end,
 * a model whose __setattr__ tracks the fields set), or a C type the hooks do
 * not know -- may touch anything of its object: an insertion that changes
 * the iteration order, an eviction of another key, a recency list updated
 * by a read.  Such an operation is what a call of an uninstrumented method
 * is (record_callee): a write of the whole object, besides its key. */
enum {
    PB_GETITEM = 1,
    PB_SETITEM = 2,
    PB_DELITEM = 4,
    PB_CONTAINS = 8,
    PB_SETATTR = 16,
    PB_KNOWN = 32,
    PB_GETATTRIBUTE = 64, /* every attribute lookup runs opaque code */
    PB_GETATTR = 128,     /* a lookup that finds nothing runs opaque code */
};

static PyTypeObject *odict_type, *defaultdict_type, *counter_type; /* collections' */
static PyObject *counter_missing; /* collections.Counter.__missing__: returns 0, stores nothing */

static void load_collections_types(void) {
    if (odict_type) return;
    PyObject *mod = PyImport_ImportModule("collections");
    PyObject *od = mod ? PyObject_GetAttrString(mod, "OrderedDict") : NULL;
    PyObject *dd = od ? PyObject_GetAttrString(mod, "defaultdict") : NULL;
    PyObject *ct = dd ? PyObject_GetAttrString(mod, "Counter") : NULL;
    PyObject *miss = ct ? PyObject_GetAttrString(ct, "__missing__") : NULL;
    Py_XDECREF(mod);
    if (!miss) {
        PyErr_Clear();
        Py_XDECREF(od);
        Py_XDECREF(dd);
        Py_XDECREF(ct);
        return;
    }
    /* kept for the process */
    odict_type = (PyTypeObject *)od;
    defaultdict_type = (PyTypeObject *)dd;
    counter_type = (PyTypeObject *)ct;
    counter_missing = miss;
}

/* Static types whose item and attribute slots the hooks model exactly. */
static int modelled_static_type(PyTypeObject *t) {
    load_collections_types();
    is_deque(Py_None); /* loads deque_type */
    return t == &PyDict_Type || t == &PyList_Type || t == &PyTuple_Type ||
           t == &PyUnicode_Type || t == &PyBytes_Type || t == &PyByteArray_Type ||
           t == &PyRange_Type || t == &PyMemoryView_Type || t == &PyDictProxy_Type ||
           t == &PySet_Type || t == &PyFrozenSet_Type ||
           t == &PyBaseObject_Type || t == &PyType_Type || t == &PyModule_Type ||
           (deque_type && t == deque_type) || (odict_type && t == odict_type) ||
           (defaultdict_type && t == defaultdict_type);
}

/* 1 if the dunder `cname` of t (looked up on the type, as the interpreter's
 * slots do) is opaque: defined by code that does not record itself. */
static int opaque_dunder(PyTypeObject *t, const char *cname) {
    PyObject *name = PyUnicode_InternFromString(cname);
    if (!name) {
        PyErr_Clear();
        return 1;
    }
    PyObject *v = cs_compat_type_lookup(t, name); /* borrowed */
    Py_DECREF(name);
    if (!v) return 0; /* unsupported: the operation raises, touching nothing */
    if (PyFunction_Check(v)) return !is_instrumented_callable(v) && v != counter_missing;
    if (Py_IS_TYPE(v, &PyWrapperDescr_Type) || Py_IS_TYPE(v, &PyMethodDescr_Type)) {
        PyTypeObject *owner = ((PyDescrObject *)v)->d_type;
        return !modelled_static_type(owner);
    }
    return 1;
}

static int protocol_bits(PyTypeObject *t) {
    PyObject *cached =
        protocol_kinds ? PyDict_GetItemWithError(protocol_kinds, (PyObject *)t) : NULL;
    if (cached) return (int)PyLong_AsLong(cached);
    PyErr_Clear();
    int bits = PB_KNOWN;
    if (!(t->tp_flags & Py_TPFLAGS_HEAPTYPE)) {
        if (!modelled_static_type(t)) bits |= PB_GETITEM | PB_SETITEM | PB_DELITEM | PB_CONTAINS;
    } else {
        if (opaque_dunder(t, "__getitem__")) bits |= PB_GETITEM;
        /* a dict subclass's lookup of an absent key calls __missing__ */
        if (PyType_IsSubtype(t, &PyDict_Type) && opaque_dunder(t, "__missing__"))
            bits |= PB_GETITEM;
        if (opaque_dunder(t, "__setitem__")) bits |= PB_SETITEM;
        if (opaque_dunder(t, "__delitem__")) bits |= PB_DELITEM;
        if (opaque_dunder(t, "__contains__")) bits |= PB_CONTAINS;
        if (opaque_dunder(t, "__setattr__") || opaque_dunder(t, "__delattr__"))
            bits |= PB_SETATTR;
        if (opaque_dunder(t, "__getattribute__")) bits |= PB_GETATTRIBUTE;
        if (opaque_dunder(t, "__getattr__")) bits |= PB_GETATTR;
    }
    if (!protocol_kinds) protocol_kinds = PyDict_New();
    PyObject *v = PyLong_FromLong(bits);
    if (!protocol_kinds || !v || PyDict_SetItem(protocol_kinds, (PyObject *)t, v) < 0)
        PyErr_Clear();
    Py_XDECREF(v);
    return bits;
}

/* Walks of object graphs (deep reads and writes).  A walk visits each object
 * once (walk_seen, a table reset by bumping walk_cur) and gives up -- by
 * recording the global barrier with the walk's kind, which is coarser than
 * whatever was left -- past WALK_BUDGET objects or WALK_DEPTH levels.  A walk
 * runs no user code; a nested walk (a __del__ run by a decref inside
 * record()) records the object whole, which is what a walk starts with. */
#define WALK_CAP 8192
#define WALK_BUDGET 3000
#define WALK_DEPTH 48
static const void *walk_key[WALK_CAP];
static uint32_t walk_stamp[WALK_CAP];
static uint32_t walk_cur;
static int walking;
/* (namespace, code summary) pairs a walk entered: walk_named */
#define WALK_ENTERED 64
static const void *entered[WALK_ENTERED][2];
static int n_entered;
/* The code summaries an outermost walk uses, held until it ends (env_summary's
 * table may drop one meanwhile; `entered` compares them by address). */
static PyObject *walk_pins;

static int walk_pin(PyObject *sum) {
    if (!walk_pins && !(walk_pins = PyList_New(0))) return -1;
    return PyList_Append(walk_pins, sum);
}

static int walk_seen(const void *p) {
    size_t j = ptr_hash(p) & (WALK_CAP - 1);
    while (walk_stamp[j] == walk_cur) {
        if (walk_key[j] == p) return 1;
        j = (j + 1) & (WALK_CAP - 1);
    }
    walk_stamp[j] = walk_cur;
    walk_key[j] = p;
    return 0;
}

/* W_VALUE: what ==, <, hash(), repr()/str()/format(), an operator read: a
 *   container and everything in it (elements are compared, hashed,
 *   formatted), an instance whose dunders are opaque and all its attributes.
 * W_TRUTH: what a truth test reads: a container's length (the container
 *   whole), an instance's __bool__/__len__ if opaque (its attributes).
 * W_ARG: what a call may do to an argument: the object whole with the
 *   call's kind; a tuple stands for its items, a bound method for its
 *   receiver.  A read (a builtin that stores, hashes, compares or formats
 *   its arguments) also reads a container's elements and an opaque
 *   instance's attributes, as W_VALUE does.  A write (code that does not
 *   record itself) covers everything reachable: a container's elements, an
 *   instance's attributes (its __dict__ and its slots) and its class's
 *   attribute values (`type(self).registry`; the class itself is not
 *   recorded whole: walk_class_attrs), a class's attributes (its bases'
 *   too): such code may keep the object and change what it holds, which
 *   another task reaches through an alias taken before (`items = bag.items`). */
enum { W_VALUE, W_TRUTH, W_ARG };

typedef struct {
    int mode, kind;
    PyObject *site;
    size_t budget;
    int gave_up;
    int in_class_attrs; /* walking class attribute values (walk_class_attrs) */
    PyObject *gave_up_at; /* the site of the barrier it gave up with (borrowed) */
} walk_t;

/* A walk that cannot go on records the global barrier of its kind: coarser
 * than whatever is left (walk_end then keeps the barrier alone). */
static int give_up(walk_t *w) {
    w->gave_up = 1;
    w->gave_up_at = w->site;
    return record_barrier(w->kind, w->site);
}

static int walk_obj(walk_t *w, PyObject *o, int depth);
static int walk_env(walk_t *w, PyObject *f, PyObject *cls, int depth);
static int is_function_like(PyObject *v);

static int walk_dict_of(walk_t *w, PyObject *o, int depth) {
    if (!type_has_dict(Py_TYPE(o))) return 0;
    PyObject *d = PyObject_GenericGetDict(o, NULL);
    if (!d) {
        PyErr_Clear();
        return 0;
    }
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    int rc = 0;
    while (rc == 0 && PyDict_Next(d, &pos, &k, &v)) {
        Py_INCREF(v);
        rc = walk_obj(w, v, depth + 1);
        Py_DECREF(v);
    }
    Py_DECREF(d);
    return rc;
}

/* The __slots__ of o's heap classes (what walk_dict_of misses): each is read
 * from the instance's memory, never through its descriptor, so no user code
 * runs. */
static int walk_slots_of(walk_t *w, PyObject *o, int depth) {
    PyObject *mro = Py_TYPE(o)->tp_mro;
    if (!mro || !PyTuple_Check(mro)) return 0;
    int rc = 0;
    for (Py_ssize_t i = 0; rc == 0 && i < PyTuple_GET_SIZE(mro); i++) {
        PyTypeObject *t = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
        if (!(t->tp_flags & Py_TPFLAGS_HEAPTYPE) || !t->tp_members) continue;
        for (PyMemberDef *m = t->tp_members; rc == 0 && m->name; m++) {
            if (m->type != Py_T_OBJECT_EX) continue;
            PyObject *v = *(PyObject **)((char *)o + m->offset);
            if (!v) continue;
            Py_INCREF(v);
            rc = walk_obj(w, v, depth + 1);
            Py_DECREF(v);
        }
    }
    return rc;
}

/* The values of the class attributes of cls's heap classes, in MRO order
 * (`cls._registry.append(x)`, `type(self).shared[k] = v` change a base's
 * container).  Each class's attributes are walked once per walk (walk_seen
 * of the class's address + 1, a key no object has), and with_classes also
 * records each class whole (code handed the class may rebind its
 * attributes).  Code handed an instance is not taken to rebind its class's
 * attributes, nor those of a class it reaches only through class attributes
 * (a dataclass's field types, a generic's origin): recording those classes
 * whole would order every method lookup on them with the call. */
static int walk_class_attrs(walk_t *w, PyTypeObject *cls, int with_classes, int depth) {
    PyObject *mro = cls->tp_mro;
    if (!mro || !PyTuple_Check(mro)) return 0;
    int rc = 0;
    for (Py_ssize_t i = 0; rc == 0 && i < PyTuple_GET_SIZE(mro); i++) {
        PyTypeObject *t = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
        if (!(t->tp_flags & Py_TPFLAGS_HEAPTYPE) || !t->tp_dict) continue;
        if (with_classes && t != cls &&
            record((PyObject *)t, CS_KEY_WHOLE, w->kind, w->site, NULL, NULL) < 0)
            return -1;
        if (walk_seen((const char *)t + 1)) continue;
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        int outer = w->in_class_attrs;
        w->in_class_attrs = 1;
        while (rc == 0 && PyDict_Next(t->tp_dict, &pos, &k, &v)) {
            Py_INCREF(v);
            /* a method's environment, with its class as the context */
            rc = w->mode == W_ARG && w->kind == KIND_WRITE && is_function_like(v)
                     ? walk_env(w, v, (PyObject *)t, depth + 1)
                     : walk_obj(w, v, depth + 1);
            Py_DECREF(v);
        }
        w->in_class_attrs = outer;
    }
    return rc;
}

/* What code that does not record itself can reach in an instance: its
 * attributes, in its __dict__ and its slots. */
static int walk_fields_of(walk_t *w, PyObject *o, int depth) {
    int rc = walk_dict_of(w, o, depth);
    return rc == 0 ? walk_slots_of(w, o, depth) : rc;
}

/* ... and, for a write (W_ARG, KIND_WRITE), through its class too. */
static int walk_reachable_of(walk_t *w, PyObject *o, int depth) {
    int rc = walk_fields_of(w, o, depth);
    return rc == 0 ? walk_class_attrs(w, Py_TYPE(o), 0, depth) : rc;
}

/* The order in which the hooks visit a set's items: never the set's own
 * iteration order, which for items hashed by identity is an order of
 * addresses (another in each execution of one schedule, so a walk would name
 * the objects it meets in another order and record other accesses: a false
 * "nondeterministic").  Items are ranked by
 *   0: the canonical id of an item named already in this execution;
 *   1: an item hashed by identity and not named yet: a fingerprint of what
 *      it holds that does not depend on addresses (its type's qualified name
 *      and the names and values of its attributes that are scalars or named
 *      objects), so that a registry of jobs numbered 1..n is met in one order
 *      whatever their addresses;
 *   2: an item with a hash of its own: that hash (the set stores it; its
 *      order follows the values, not addresses);
 * then by the position in the set's table, the tie-break, which follows
 * addresses only for items hashed by identity that hold the same scalars
 * (indistinguishable to every walk, which records them alike).  Reads no
 * attribute through Python code: the fingerprint reads instance dicts. */
typedef struct {
    int rank;
    uint64_t key;
    Py_ssize_t pos;
    PyObject *item; /* borrowed from the set */
} set_item_order;

static int set_item_cmp(const void *x, const void *y) {
    const set_item_order *a = x, *b = y;
    if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
    if (a->key != b->key) return a->key < b->key ? -1 : 1;
    return a->pos < b->pos ? -1 : a->pos > b->pos;
}

static uint64_t scalar_fingerprint(PyObject *v, int *ok) {
    *ok = 1;
    if (v == Py_None) return 0x4e6f6e65ULL;
    if (PyLong_CheckExact(v) || PyUnicode_CheckExact(v) || PyBytes_CheckExact(v) ||
        PyFloat_CheckExact(v) || PyBool_Check(v)) {
        Py_hash_t h = PyObject_Hash(v); /* a builtin's hash: runs no Python code */
        if (h == -1) {
            PyErr_Clear();
            *ok = 0;
            return 0;
        }
        return (uint64_t)h;
    }
    id_slot *s = id_find(v);
    if (s) return s->cid;
    *ok = 0;
    return 0;
}

static uint64_t identity_fingerprint(PyObject *o) {
    PyTypeObject *t = Py_TYPE(o);
    uint64_t h = mix64((uint64_t)(uintptr_t)t); /* static within a process, as the order needs */
    if (t->tp_flags & Py_TPFLAGS_HEAPTYPE)
        h = mix64(str_hash(((PyHeapTypeObject *)t)->ht_qualname) ^ 0x74797065ULL);
    if (PyFunction_Check(o)) {
        PyObject *q = ((PyFunctionObject *)o)->func_qualname;
        PyCodeObject *code = (PyCodeObject *)PyFunction_GET_CODE(o);
        return mix64(h ^ str_hash(q) ^ ((uint64_t)code->co_firstlineno << 20));
    }
    if (!type_has_dict(t)) return h;
    PyObject *d = PyObject_GenericGetDict(o, NULL);
    if (!d) {
        PyErr_Clear();
        return h;
    }
    Py_ssize_t pos = 0;
    PyObject *k, *v;
    while (PyDict_Check(d) && PyDict_Next(d, &pos, &k, &v)) {
        int ok;
        uint64_t fv = scalar_fingerprint(v, &ok);
        if (ok) h = mix64(h ^ mix64(str_hash(k) + 0x9e3779b97f4a7c15ULL) ^ fv);
    }
    Py_DECREF(d);
    return h;
}

/* A new list of the items of the set x in the order above, or NULL with an
 * exception. */
static PyObject *set_items_ordered(PyObject *x) {
    PySetObject *so = (PySetObject *)x;
    Py_ssize_t n = PySet_GET_SIZE(x);
    set_item_order *r = PyMem_Malloc((size_t)(n ? n : 1) * sizeof *r);
    if (!r) return PyErr_NoMemory();
    Py_ssize_t m = 0;
    for (Py_ssize_t i = 0; i <= so->mask && m < n; i++) {
        setentry *e = &so->table[i];
        if (!e->key || e->hash == -1) continue; /* empty, or a dummy */
        set_item_order *it = &r[m++];
        it->item = e->key;
        it->pos = i;
        id_slot *s = id_find(e->key);
        if (s) {
            it->rank = 0;
            it->key = s->cid;
        } else if (Py_TYPE(e->key)->tp_hash == PyBaseObject_Type.tp_hash) {
            it->rank = 1;
            it->key = identity_fingerprint(e->key);
        } else {
            it->rank = 2;
            it->key = (uint64_t)e->hash;
        }
    }
    qsort(r, (size_t)m, sizeof *r, set_item_cmp);
    PyObject *out = PyList_New(m);
    if (out)
        for (Py_ssize_t i = 0; i < m; i++) PyList_SET_ITEM(out, i, Py_NewRef(r[i].item));
    PyMem_Free(r);
    return out;
}

static int walk_iterable(walk_t *w, PyObject *o, int depth) {
    /* only for builtin sets and deques: their iteration runs no user code */
    if (PyAnySet_Check(o)) {
        PyObject *items = set_items_ordered(o);
        if (!items) return -1;
        int rc = 0;
        for (Py_ssize_t i = 0; rc == 0 && i < PyList_GET_SIZE(items); i++)
            rc = walk_obj(w, PyList_GET_ITEM(items, i), depth + 1);
        Py_DECREF(items);
        return rc;
    }
    PyObject *it = PyObject_GetIter(o);
    if (!it) return -1;
    PyObject *item;
    int rc = 0;
    while (rc == 0 && (item = PyIter_Next(it))) {
        rc = walk_obj(w, item, depth + 1);
        Py_DECREF(item);
    }
    Py_DECREF(it);
    if (rc == 0 && PyErr_Occurred()) {
        PyErr_Clear(); /* mutated during the walk: nothing was run, the container is recorded */
    }
    return rc;
}

static PyTypeObject IterProxy_Type, AIterProxy_Type, CallProxy_Type, AwaitProxy_Type,
    AgenMethod_Type;

/* ---- the environment of code that does not record itself
 *
 * A library's function reaches more than its arguments and its receiver:
 * the globals of its module that its code names (a registry, a cache, a pool
 * kept at module level), the attributes of the modules and classes it names
 * (`Tracked.instances.append(self)`, `type(self).count += 1`), the cells it
 * closes over (the counter a decorator keeps), its mutable defaults and,
 * through the functions, classes and modules it names, theirs.  A write walk
 * (W_ARG, KIND_WRITE: what a call of such code may change) that meets such a
 * function walks that environment (walk_env), directed by the function's
 * summary (env_summary: its code's names and stores, read once per code
 * object from its bytecode and the code objects nested in it):
 *   - every name the code uses (co_names: global and attribute names are one
 *     list) is looked up in the function's globals, in each module and class
 *     reached that way, and in the class of the receiver it runs for (the
 *     class context: a method's, a constructor's); what is found is walked,
 *     a function's environment in turn (walk_seen: once per walk);
 *   - a name stored or deleted as a global (STORE_GLOBAL) is a write of that
 *     global, and of the module's key order when absent (an insertion); a
 *     name stored or deleted as an attribute (STORE_ATTR), of that attribute
 *     of each module and class reached by name, and of the class context
 *     where the class has it (a class-level value rebound: an attribute the
 *     class does not have is the instance's);
 *   - a closure cell is written when the code rebinds the free variable
 *     (STORE_DEREF: `nonlocal`), read otherwise, and its contents walked;
 *   - the defaults are walked;
 *   - a constructor's environment is its class's __init__ and __new__ (and
 *     a metaclass's __call__), with the class as context.
 * Not seen: a name computed at run time (getattr(mod, name), globals()[k] in
 * library code), an attribute inserted into a class through an instance's
 * type (`type(self).new = v`).
 *
 * The standard library's code is modelled instead (env_modelled: files under
 * the directories set_modelled_code names, and frozen modules), as is
 * ChaosSloth's own: asyncio by the loop core and capture/sync.py; random,
 * uuid and secrets by capture/entropy.py; the rest keeps caches (re's
 * compiled patterns, functools' and typing's) whose contents no outcome
 * depends on.  Its functions act on their arguments and receivers only. */
/* Code objects' summaries, direct-mapped by address (a code object's own hash
 * reads its whole bytecode on 3.12): an entry holds its code object, so an
 * address is never another code's while it is cached; a summary is (names,
 * global stores, attribute stores, free stores) as tuples of str, or None for
 * modelled code. */
#define ENV_SUMMARIES 4096
static struct {
    PyObject *code, *summary;
} env_summaries[ENV_SUMMARIES];
static PyObject *modelled_dirs;   /* tuple of str, or NULL */
static PyObject *unmodelled_dirs; /* tuple of str: directories inside those (site-packages) */
static int op_ext_arg = -1, op_store_global, op_delete_global, op_store_attr, op_delete_attr,
           op_store_deref, op_delete_deref;

static int load_opcodes(void) {
    if (op_ext_arg >= 0) return 0;
    static const char *names[] = {"STORE_GLOBAL", "DELETE_GLOBAL", "STORE_ATTR", "DELETE_ATTR",
                                  "STORE_DEREF",  "DELETE_DEREF",  "EXTENDED_ARG"};
    int *slots[] = {&op_store_global, &op_delete_global, &op_store_attr, &op_delete_attr,
                    &op_store_deref,  &op_delete_deref};
    PyObject *mod = PyImport_ImportModule("opcode");
    PyObject *map = mod ? PyObject_GetAttrString(mod, "opmap") : NULL;
    Py_XDECREF(mod);
    if (!map) return -1;
    int values[7];
    for (int i = 0; i < 7; i++) {
        PyObject *v = PyMapping_GetItemString(map, names[i]);
        values[i] = v ? (int)PyLong_AsLong(v) : -1;
        Py_XDECREF(v);
        if (values[i] < 0) {
            Py_DECREF(map);
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_RuntimeError, "no opcode %s", names[i]);
            return -1;
        }
    }
    Py_DECREF(map);
    for (int i = 0; i < 6; i++) *slots[i] = values[i];
    op_ext_arg = values[6];
    return 0;
}

/* The length of the longest str of the tuple `dirs` that `file` starts with,
 * 0 if none does, -1 with an exception. */
static Py_ssize_t longest_dir_of(PyObject *file, PyObject *dirs) {
    Py_ssize_t best = 0;
    if (!dirs) return 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(dirs); i++) {
        PyObject *dir = PyTuple_GET_ITEM(dirs, i);
        Py_ssize_t r = PyUnicode_Tailmatch(file, dir, 0, PY_SSIZE_T_MAX, -1);
        if (r < 0) return -1;
        if (r && PyUnicode_GET_LENGTH(dir) > best) best = PyUnicode_GET_LENGTH(dir);
    }
    return best;
}

/* 1 if code from `file` (a co_filename or a module's __file__) is modelled.
 * The most specific directory decides: site-packages inside the standard
 * library's tree is not modelled, ChaosSloth's own package inside
 * site-packages is (its capture wrappers are never a library's code,
 * wherever it is installed). */
static int env_modelled(PyObject *file) {
    if (!PyUnicode_Check(file)) return 0;
    static PyObject *frozen;
    if (!frozen && !(frozen = PyUnicode_InternFromString("<frozen "))) return -1;
    Py_ssize_t r = PyUnicode_Tailmatch(file, frozen, 0, PY_SSIZE_T_MAX, -1);
    if (r != 0) return (int)r;
    Py_ssize_t in = longest_dir_of(file, modelled_dirs);
    Py_ssize_t out = in > 0 ? longest_dir_of(file, unmodelled_dirs) : 0;
    if (in < 0 || out < 0) return -1;
    return in > out;
}

static int add_name(PyObject *set, PyObject *names, unsigned long i) {
    if (!PyTuple_Check(names) || i >= (unsigned long)PyTuple_GET_SIZE(names)) return 0;
    return PySet_Add(set, PyTuple_GET_ITEM(names, (Py_ssize_t)i));
}

/* Adds what `code` and the code objects nested in it name and store. */
static int scan_code(PyObject *code, PyObject *names, PyObject *gstores, PyObject *astores,
                     PyObject *fstores) {
    PyObject *co_names = PyObject_GetAttrString(code, "co_names");
    PyObject *free = co_names ? PyCode_GetFreevars((PyCodeObject *)code) : NULL;
    PyObject *bytes = free ? PyCode_GetCode((PyCodeObject *)code) : NULL;
    PyObject *consts = bytes ? PyObject_GetAttrString(code, "co_consts") : NULL;
    int rc = consts && PyTuple_Check(co_names) && PyBytes_Check(bytes) && PyTuple_Check(consts)
                 ? 0
                 : -1;
    if (rc < 0 && !PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "not a code object");
    for (Py_ssize_t i = 0; rc == 0 && i < PyTuple_GET_SIZE(co_names); i++)
        rc = PySet_Add(names, PyTuple_GET_ITEM(co_names, i));
    if (rc == 0) {
        const unsigned char *b = (const unsigned char *)PyBytes_AS_STRING(bytes);
        Py_ssize_t n = PyBytes_GET_SIZE(bytes);
        long first_free = cs_compat_code_first_free(code);
        unsigned long ext = 0;
        /* two-byte code units (opcode, argument), an EXTENDED_ARG prefixing the
         * high bits; inline caches are units of their own, opcode CACHE */
        for (Py_ssize_t i = 0; rc == 0 && i + 1 < n; i += 2) {
            int op = b[i];
            unsigned long arg = ext | b[i + 1];
            if (op == op_ext_arg) {
                ext = arg << 8;
                continue;
            }
            ext = 0;
            if (op == op_store_global || op == op_delete_global)
                rc = add_name(gstores, co_names, arg);
            else if (op == op_store_attr || op == op_delete_attr)
                rc = add_name(astores, co_names, arg);
            else if ((op == op_store_deref || op == op_delete_deref) && (long)arg >= first_free)
                rc = add_name(fstores, free, arg - (unsigned long)first_free);
        }
    }
    for (Py_ssize_t i = 0; rc == 0 && i < PyTuple_GET_SIZE(consts); i++)
        if (PyCode_Check(PyTuple_GET_ITEM(consts, i)))
            rc = scan_code(PyTuple_GET_ITEM(consts, i), names, gstores, astores, fstores);
    Py_XDECREF(co_names);
    Py_XDECREF(free);
    Py_XDECREF(bytes);
    Py_XDECREF(consts);
    return rc;
}

enum { ENV_NAMES, ENV_GLOBAL_STORES, ENV_ATTR_STORES, ENV_FREE_STORES };

/* The summary of `code` (borrowed: valid until the next call; walk_pin holds
 * it for a walk), Py_None when its code is modelled, NULL with an exception. */
static PyObject *env_summary(PyObject *code) {
    size_t slot = ptr_hash(code) & (ENV_SUMMARIES - 1);
    if (env_summaries[slot].code == code) return env_summaries[slot].summary;
    int modelled = env_modelled(cs_compat_code_filename(code));
    if (modelled < 0) return NULL;
    PyObject *sum = NULL;
    if (modelled) {
        sum = Py_NewRef(Py_None);
    } else if (load_opcodes() == 0) {
        PyObject *names = PySet_New(NULL), *g = PySet_New(NULL), *a = PySet_New(NULL),
                 *f = PySet_New(NULL);
        if (names && g && a && f && scan_code(code, names, g, a, f) == 0) {
            PyObject *tn = PySequence_Tuple(names), *tg = tn ? PySequence_Tuple(g) : NULL,
                     *ta = tg ? PySequence_Tuple(a) : NULL, *tf = ta ? PySequence_Tuple(f) : NULL;
            if (tf) sum = PyTuple_Pack(4, tn, tg, ta, tf);
            Py_XDECREF(tn);
            Py_XDECREF(tg);
            Py_XDECREF(ta);
            Py_XDECREF(tf);
        }
        Py_XDECREF(names);
        Py_XDECREF(g);
        Py_XDECREF(a);
        Py_XDECREF(f);
    }
    if (!sum) return NULL;
    Py_XSETREF(env_summaries[slot].code, Py_NewRef(code));
    Py_XSETREF(env_summaries[slot].summary, sum); /* the table keeps it */
    return sum;
}

/* The summary of the Python function behind f (a function, a staticmethod or
 * classmethod wrapping one) when its environment is to be walked: *fn is set
 * to the function (borrowed) and the summary returned (borrowed); NULL with
 * no exception when there is nothing to walk (not a Python function,
 * instrumented, modelled), NULL with one on error. */
static PyObject *env_of(PyObject *f, PyObject **fn) {
    if (f && (Py_IS_TYPE(f, &PyStaticMethod_Type) || Py_IS_TYPE(f, &PyClassMethod_Type))) {
        PyObject *inner = PyObject_GetAttrString(f, "__func__");
        if (!inner) return NULL;
        Py_DECREF(inner); /* the wrapper keeps it */
        f = inner;
    }
    if (!f || !PyFunction_Check(f) || is_instrumented_callable(f)) return NULL;
    PyObject *sum = env_summary(PyFunction_GET_CODE(f));
    if (!sum || sum == Py_None) return NULL;
    *fn = f;
    return sum;
}

static int walk_env(walk_t *w, PyObject *f, PyObject *cls, int depth);

/* A Python function, or a staticmethod or classmethod (of one, presumably). */
static int is_function_like(PyObject *v) {
    return PyFunction_Check(v) || Py_IS_TYPE(v, &PyStaticMethod_Type) ||
           Py_IS_TYPE(v, &PyClassMethod_Type);
}

/* Records the writes of the names of `stores` found in (or, with `absent`,
 * missing from) the namespace of `owner` (a globals dict, a module, a class):
 * a key write, and an insertion when the name is not there yet. */
static int record_stores(walk_t *w, PyObject *owner, PyObject *stores, int absent) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(stores); i++) {
        PyObject *name = PyTuple_GET_ITEM(stores, i);
        int lacks = PyDict_Check(owner) ? dict_lacks(owner, name) : attr_inserts(owner, name);
        if (lacks < 0) return -1;
        /* a class context: a name no class of its MRO has is the instance's */
        if (lacks && !absent &&
            (!PyType_Check(owner) || !cs_compat_type_lookup((PyTypeObject *)owner, name)))
            continue;
        if (record_attr(owner, name, KIND_WRITE, w->site, NULL) < 0) return -1;
        if (lacks && record_insertion(holder_of(owner), w->site) < 0) return -1;
    }
    return 0;
}

/* Walks what code summarized by `sum` reaches by name from v. */
static int walk_named(walk_t *w, PyObject *v, PyObject *sum, int depth);

/* The values named by `sum` in the namespace dict `ns` (a class: its MRO,
 * through `cls`), walked. */
static int walk_names_in(walk_t *w, PyObject *ns, PyTypeObject *cls, PyObject *sum, int depth) {
    PyObject *names = PyTuple_GET_ITEM(sum, ENV_NAMES);
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); i++) {
        PyObject *name = PyTuple_GET_ITEM(names, i);
        PyObject *v = cls ? cs_compat_type_lookup(cls, name) : PyDict_GetItemWithError(ns, name);
        if (!v) {
            if (PyErr_Occurred()) return -1;
            continue;
        }
        Py_INCREF(v);
        int rc = cls && is_function_like(v) ? walk_env(w, v, (PyObject *)cls, depth)
                                            : walk_named(w, v, sum, depth);
        Py_DECREF(v);
        if (rc < 0) return -1;
        if (w->gave_up) return 0;
    }
    return 0;
}

/* A module or a class is entered once per walk for each code summary that
 * names something in it (the walk's table of pairs; past its size the walk
 * gives up, as past its budget). */
static int named_seen(PyObject *ns, PyObject *sum, int *full) {
    for (int i = 0; i < n_entered; i++)
        if (entered[i][0] == ns && entered[i][1] == sum) return 1;
    if (n_entered == WALK_ENTERED) {
        *full = 1;
        return 0;
    }
    entered[n_entered][0] = ns;
    entered[n_entered][1] = sum;
    n_entered++;
    return 0;
}

static int walk_named(walk_t *w, PyObject *v, PyObject *sum, int depth) {
    if (w->gave_up) return 0;
    int full = 0;
    if (PyModule_Check(v)) {
        PyObject *d = PyModule_GetDict(v); /* borrowed */
        PyObject *file = PyModule_GetFilenameObject(v);
        if (!file) PyErr_Clear();
        /* with no file: a C module's state is C code's (modelled), a module
         * made at run time is Python code's */
        int modelled = file ? env_modelled(file) : PyModule_GetDef(v) != NULL;
        Py_XDECREF(file);
        if (modelled != 0 || !d) return modelled < 0 ? -1 : 0;
        if (named_seen(d, sum, &full)) return 0;
        if (full || depth > WALK_DEPTH) {
            return give_up(w);
        }
        if (record_stores(w, v, PyTuple_GET_ITEM(sum, ENV_ATTR_STORES), 1) < 0) return -1;
        return walk_names_in(w, d, NULL, sum, depth + 1);
    }
    if (PyType_Check(v) && (((PyTypeObject *)v)->tp_flags & Py_TPFLAGS_HEAPTYPE)) {
        /* a class the code names: what it stores into it, and everything it
         * holds (its construction included: __init__ is one of its methods) */
        PyTypeObject *t = (PyTypeObject *)v;
        if (named_seen(v, sum, &full)) return 0;
        if (full || depth > WALK_DEPTH) {
            return give_up(w);
        }
        if (record_stores(w, v, PyTuple_GET_ITEM(sum, ENV_ATTR_STORES), 1) < 0) return -1;
        return walk_class_attrs(w, t, 0, depth); /* its values and its methods' environments */
    }
    return walk_obj(w, v, depth + 1);
}

/* The environment of the Python function f (see above), with `cls` (or NULL)
 * the class it runs for. */
static int walk_env(walk_t *w, PyObject *f, PyObject *cls, int depth) {
    PyObject *fn = NULL;
    PyObject *sum = env_of(f, &fn);
    if (!sum) return PyErr_Occurred() ? -1 : 0;
    if (w->gave_up) return 0;
    /* a nested walk (a __del__ run inside a walk) shares the outer one's
     * tables: the barrier is what it can record for an environment */
    if (walking > 1) {
        return give_up(w);
    }
    /* once as a plain function and once as a method (any class context: the
     * class reads of an attribute cover the MRO up to the class defining it) */
    if (walk_seen(cls ? (const char *)fn + 1 : (const char *)fn)) return 0;
    if (w->budget == 0 || depth > WALK_DEPTH) {
        return give_up(w);
    }
    w->budget--;
    if (walk_pin(sum) < 0) return -1;
    int rc = 0;
    PyObject *cells = PyFunction_GET_CLOSURE(fn);
    if (cells && PyTuple_Check(cells)) {
        PyObject *free = PyCode_GetFreevars((PyCodeObject *)PyFunction_GET_CODE(fn));
        if (!free) return -1;
        PyObject *rebound = PyTuple_GET_ITEM(sum, ENV_FREE_STORES);
        for (Py_ssize_t i = 0; rc == 0 && i < PyTuple_GET_SIZE(cells); i++) {
            PyObject *cell = PyTuple_GET_ITEM(cells, i);
            int stores = i < PyTuple_GET_SIZE(free)
                             ? PySequence_Contains(rebound, PyTuple_GET_ITEM(free, i))
                             : 1;
            if (stores < 0) {
                rc = -1;
                break;
            }
            rc = record(cell, CELL_KEY, stores ? KIND_WRITE : KIND_READ, w->site, NULL, NULL);
            PyObject *v = rc == 0 && PyCell_Check(cell) ? PyCell_GET(cell) : NULL;
            if (v) {
                Py_INCREF(v);
                rc = walk_obj(w, v, depth + 1);
                Py_DECREF(v);
            }
        }
        Py_DECREF(free);
    }
    PyObject *defaults = PyFunction_GET_DEFAULTS(fn);
    if (rc == 0 && defaults) rc = walk_obj(w, defaults, depth + 1);
    PyObject *kwdefaults = PyFunction_GET_KW_DEFAULTS(fn);
    if (rc == 0 && kwdefaults && PyDict_Check(kwdefaults)) {
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        while (rc == 0 && PyDict_Next(kwdefaults, &pos, &k, &v)) {
            Py_INCREF(v);
            rc = walk_obj(w, v, depth + 1);
            Py_DECREF(v);
        }
    }
    PyObject *g = PyFunction_GET_GLOBALS(fn);
    if (rc == 0 && g && PyDict_Check(g)) {
        rc = record_stores(w, g, PyTuple_GET_ITEM(sum, ENV_GLOBAL_STORES), 1);
        if (rc == 0) rc = walk_names_in(w, g, NULL, sum, depth + 1);
    }
    if (rc == 0 && cls && PyType_Check(cls)) {
        rc = record_stores(w, cls, PyTuple_GET_ITEM(sum, ENV_ATTR_STORES), 0);
        if (rc == 0) rc = walk_names_in(w, NULL, (PyTypeObject *)cls, sum, depth + 1);
    }
    return rc;
}

static int walk_obj(walk_t *w, PyObject *o, int depth) {
    /* what code that does not record itself may change: everything reachable */
    int deep = w->mode == W_ARG && w->kind == KIND_WRITE;
    if (w->gave_up) return 0;
    if (deep && is_function_like(o)) return walk_env(w, o, NULL, depth);
    if (immutable_value(o)) return 0;
    /* the hooks' proxies record their own accesses when used */
    if (Py_IS_TYPE(o, &IterProxy_Type) || Py_IS_TYPE(o, &AIterProxy_Type) ||
        Py_IS_TYPE(o, &CallProxy_Type) || Py_IS_TYPE(o, &AwaitProxy_Type) ||
        Py_IS_TYPE(o, &AgenMethod_Type))
        return 0;
    if (PyMethod_Check(o)) {
        if (w->mode != W_ARG) return 0; /* compared by identity of receiver and function */
        PyObject *self = PyMethod_GET_SELF(o);
        int rc = walk_obj(w, self, depth + 1);
        if (rc == 0 && deep) /* the method's environment, its receiver's class as context */
            rc = walk_env(w, PyMethod_GET_FUNCTION(o),
                          PyType_Check(self) ? self : (PyObject *)Py_TYPE(self), depth + 1);
        return rc;
    }
    if (PyCFunction_Check(o)) {
        PyObject *self = PyCFunction_GET_SELF(o);
        if (w->mode != W_ARG || !self || PyModule_Check(self)) return 0;
        return walk_obj(w, self, depth + 1);
    }
    o = view_base(o);
    if (PyModule_Check(o)) return record(holder_of(o), CS_KEY_WHOLE, w->kind, w->site, NULL, NULL);
    if (walking > 1) return record(o, CS_KEY_WHOLE, w->kind, w->site, NULL, NULL);
    if (walk_seen(o)) return 0;
    if (w->budget == 0 || depth > WALK_DEPTH) {
        return give_up(w);
    }
    w->budget--;
    if (deep && Py_IS_TYPE(o, &PyProperty_Type)) { /* its accessors' environments */
        static const char *fields[] = {"fget", "fset", "fdel"};
        for (int i = 0; i < 3; i++) {
            PyObject *acc = PyObject_GetAttrString(o, fields[i]);
            int rc = acc ? walk_obj(w, acc, depth + 1) : -1;
            Py_XDECREF(acc);
            if (rc < 0) return -1;
        }
        return 0;
    }
    if (deep && PyType_Check(o)) { /* a heap class (immutable_value passed the others) */
        if (record(o, CS_KEY_WHOLE, w->kind, w->site, NULL, NULL) < 0) return -1;
        return walk_class_attrs(w, (PyTypeObject *)o, !w->in_class_attrs, depth);
    }
    PyTypeObject *t = Py_TYPE(o);
    int heap = (t->tp_flags & Py_TPFLAGS_HEAPTYPE) != 0;
    int bits = heap ? type_bits(t) : 0;
    int rc = 0;
    if (PyTuple_Check(o) || PyList_Check(o) || PyDict_Check(o) || PyAnySet_Check(o) ||
        PyByteArray_Check(o) || is_deque(o)) {
        /* an exact tuple or frozenset is an immutable shell: only its items matter */
        if (t != &PyTuple_Type && t != &PyFrozenSet_Type &&
            record(o, CS_KEY_WHOLE, w->kind, w->site, NULL, NULL) < 0)
            return -1;
        if (w->mode == W_TRUTH) {
            if (heap && (bits & TB_OPAQUE_TRUTH)) {
                walk_t v = {W_VALUE, KIND_READ, w->site, w->budget, 0, 0, NULL};
                rc = walk_fields_of(&v, o, depth);
                w->budget = v.budget;
            }
            return rc;
        }
        if (PyTuple_Check(o)) {
            for (Py_ssize_t i = 0; rc == 0 && i < PyTuple_GET_SIZE(o); i++)
                rc = walk_obj(w, PyTuple_GET_ITEM(o, i), depth + 1);
        } else if (PyList_Check(o)) {
            for (Py_ssize_t i = 0; rc == 0 && i < PyList_GET_SIZE(o); i++) {
                PyObject *item = Py_NewRef(PyList_GET_ITEM(o, i));
                rc = walk_obj(w, item, depth + 1);
                Py_DECREF(item);
            }
        } else if (PyDict_Check(o)) {
            Py_ssize_t pos = 0;
            PyObject *k, *v;
            while (rc == 0 && PyDict_Next(o, &pos, &k, &v)) {
                Py_INCREF(k);
                Py_INCREF(v);
                rc = walk_obj(w, k, depth + 1);
                if (rc == 0) rc = walk_obj(w, v, depth + 1);
                Py_DECREF(k);
                Py_DECREF(v);
            }
        } else if (!PyByteArray_Check(o)) {
            rc = walk_iterable(w, o, depth);
        }
        if (rc == 0 && heap && deep) rc = walk_reachable_of(w, o, depth);
        else if (rc == 0 && heap && (bits & TB_OPAQUE_VALUE)) rc = walk_fields_of(w, o, depth);
        return rc;
    }
    if (!heap) /* a builtin or extension object: whole */
        return record(o, CS_KEY_WHOLE, w->kind, w->site, NULL, NULL);
    if (w->mode == W_TRUTH) {
        if (!(bits & TB_OPAQUE_TRUTH)) return 0; /* always true, or instrumented */
        if (record(o, CS_KEY_WHOLE, KIND_READ, w->site, NULL, NULL) < 0) return -1;
        walk_t v = {W_VALUE, KIND_READ, w->site, w->budget, 0, 0, NULL};
        rc = walk_fields_of(&v, o, depth);
        w->budget = v.budget;
        return rc;
    }
    if (w->mode == W_VALUE && !(bits & TB_OPAQUE_VALUE)) return 0;
    if (record(holder_of(o), CS_KEY_WHOLE, w->kind, w->site, NULL, NULL) < 0) return -1;
    if (deep) return walk_reachable_of(w, o, depth);
    return (bits & TB_OPAQUE_VALUE) ? walk_fields_of(w, o, depth) : 0;
}

/* Where the open step's accesses (and the verbose log) stood when the
 * outermost walk began (walk_mark_ok: there is an open step). */
static size_t walk_mark_acc;
static Py_ssize_t walk_mark_log;
static int walk_mark_ok;

static void walk_mark_set(void) {
    walk_mark_ok = cs_step_access_count(hooks_ex, &walk_mark_acc) == CS_OK;
    walk_mark_log = log_list ? PyList_GET_SIZE(log_list) : 0;
}

/* An outermost walk that gave up recorded, before its barrier, the part of
 * the graph its traversal reached first: which part depends on the order it
 * met the objects in (sets ordered by hashes that PYTHONHASHSEED changes, the
 * depth an object is first met at), while the barrier covers all of it.  So
 * those accesses go and the barrier stays alone (when it covers each of
 * them; else all stay): what the step records is then the same whatever the
 * order.  The duplicate cache forgets the step, whose accesses it holds. */
static int walk_keep_barrier(walk_t *w) {
    if (!walk_mark_ok || !hooks_ex) return 0;
    int dropped = 0;
    int rc = cs_step_rewind(hooks_ex, walk_mark_acc,
                            (w->kind & CS_KIND_MASK) == KIND_WRITE ? CS_WRITE : CS_READ, &dropped);
    if (rc == CS_ESTATE) return 0;
    if (cs_py_check(rc) < 0) return -1;
    if (!dropped) return 0;
    memset(rcache, 0, sizeof rcache);
    if (log_list && PyList_GET_SIZE(log_list) > walk_mark_log &&
        PyList_SetSlice(log_list, walk_mark_log, PyList_GET_SIZE(log_list), NULL) < 0)
        return -1;
    return record_barrier(w->kind, w->gave_up_at);
}

/* Opens a walk (walk_end closes it): a fresh walk_seen table and table of
 * entered namespaces for an outermost one. */
static void walk_begin(walk_t *w, int mode, int kind, PyObject *site) {
    *w = (walk_t){mode, kind, site, WALK_BUDGET, 0, 0, NULL};
    walking++;
    if (walking > 1) return;
    walk_mark_set();
    n_entered = 0;
    if (++walk_cur == 0) { /* wrapped: clear the stamps */
        memset(walk_stamp, 0, sizeof walk_stamp);
        walk_cur = 1;
    }
}

/* Closes a walk; returns `rc`, or -1 when keeping an outermost walk's
 * barrier alone failed. */
static int walk_end(walk_t *w, int rc) {
    if (--walking == 0) {
        if (rc == 0 && w->gave_up) rc = walk_keep_barrier(w);
        if (walk_pins && PyList_GET_SIZE(walk_pins) &&
            PyList_SetSlice(walk_pins, 0, PyList_GET_SIZE(walk_pins), NULL) < 0)
            PyErr_Clear(); /* (deleting a slice of a list allocates nothing) */
    }
    return rc;
}

/* Runs one walk of o (the entry point of every deep access). */
static int walk(PyObject *o, int mode, int kind, PyObject *site) {
    if (!hooks_ex || (immutable_value(o) && !PyFunction_Check(o))) return 0;
    walk_t w;
    walk_begin(&w, mode, kind, site);
    return walk_end(&w, walk_obj(&w, o, 0));
}

/* ---- coroutines of code that does not record itself, resumed across steps
 *
 * A library's coroutine goes on running in the later steps of the task that
 * awaits it: what it does after its first await is no call of instrumented
 * code's, so the call's record (record_callee: the receiver, the arguments,
 * the function's environment) covers only the step that made it.  So at the
 * start of each step of a task, each frame of the task's await chain (its
 * coroutine, what that awaits, and so on: each of them resumes in the step)
 * whose code neither records itself nor is modelled is written as its call
 * was: everything reachable from the frame's variables (its receiver, its
 * arguments, its locals and the contents of its closure cells) and its code's
 * environment in the frame's globals (walk_names_in), at the site of the line
 * where it resumes (library_site).  Not seen: a cell such
 * a frame rebinds (`nonlocal`) after an await. */
static int walk_frame(walk_t *w, PyObject *frame, PyObject *sum) {
    PyObject *locals = PyFrame_GetLocals((PyFrameObject *)frame);
    if (!locals) return -1;
    int rc = 0;
    if (PyDict_Check(locals)) {
        Py_ssize_t pos = 0;
        PyObject *k, *v;
        while (rc == 0 && PyDict_Next(locals, &pos, &k, &v)) {
            Py_INCREF(v);
            rc = walk_obj(w, v, 1);
            Py_DECREF(v);
        }
    } else { /* 3.13: a proxy of the frame's variables */
        PyObject *values = PyMapping_Values(locals);
        rc = values ? 0 : -1;
        for (Py_ssize_t i = 0; rc == 0 && i < PyList_GET_SIZE(values); i++)
            rc = walk_obj(w, PyList_GET_ITEM(values, i), 1);
        Py_XDECREF(values);
    }
    Py_DECREF(locals);
    PyObject *globals = rc == 0 ? PyFrame_GetGlobals((PyFrameObject *)frame) : NULL;
    if (globals) {
        rc = record_stores(w, globals, PyTuple_GET_ITEM(sum, ENV_GLOBAL_STORES), 1);
        if (rc == 0) rc = walk_names_in(w, globals, NULL, sum, 1);
        Py_DECREF(globals);
    }
    return rc;
}

static PyObject *library_site_maker; /* set_library_site_maker's callable, or NULL */
static PyObject *library_sites;      /* (address of code, line) -> (code, site id) */

/* The site of the library frame `frame` of `code` resumed at its current
 * line (new reference): sites.library_frame's, made once per code and line
 * (the code is held by the table, so its address names it); the task step's
 * site when no maker is set. */
static PyObject *library_site(PyObject *frame, PyObject *code) {
    if (!library_site_maker) return Py_NewRef(task_step_site ? task_step_site : Py_None);
    if (!library_sites && !(library_sites = PyDict_New())) return NULL;
    int line = PyFrame_GetLineNumber((PyFrameObject *)frame);
    PyObject *key = Py_BuildValue("(Ni)", PyLong_FromVoidPtr(code), line);
    if (!key) return NULL;
    PyObject *got = PyDict_GetItemWithError(library_sites, key);
    if (got) {
        Py_DECREF(key);
        return Py_NewRef(PyTuple_GET_ITEM(got, 1));
    }
    PyObject *site = NULL, *entry = NULL;
    PyObject *qual = PyErr_Occurred() ? NULL : PyObject_GetAttrString(code, "co_qualname");
    PyObject *globals = qual ? PyFrame_GetGlobals((PyFrameObject *)frame) : NULL;
    PyObject *module = globals ? PyDict_GetItemString(globals, "__name__") : NULL;
    if (globals)
        site = PyObject_CallFunction(library_site_maker, "OiOO", cs_compat_code_filename(code),
                                     line, qual, module ? module : Py_None);
    if (site) entry = PyTuple_Pack(2, code, site);
    if (!entry || PyDict_SetItem(library_sites, key, entry) < 0) Py_CLEAR(site);
    Py_XDECREF(entry);
    Py_XDECREF(globals);
    Py_XDECREF(qual);
    Py_DECREF(key);
    return site;
}

int cs_hooks_record_resumed(PyObject *task) {
    if (!hooks_ex) return 0;
    static PyObject *s_coro_attr;
    if (!s_coro_attr && !(s_coro_attr = PyUnicode_InternFromString("_coro"))) return -1;
    PyObject *obj = PyObject_GetAttr(task, s_coro_attr);
    if (!obj) {
        PyErr_Clear(); /* not a task of asyncio's: nothing it awaits is known */
        return 0;
    }
    walk_t w;
    int open = 0, rc = 0;
    for (int depth = 0; rc == 0 && depth < WALK_DEPTH; depth++) {
        /* coroutines, generators and async generators (a library's `async for` body resumes
         * in this step too), through the awaitables that drive async generators */
        PyObject *frame, *code, *next;
        int link = cs_compat_await_link(obj, &frame, &code, &next);
        if (link <= 0) {
            if (link < 0) rc = -1;
            break;
        }
        PyObject *sum = NULL;
        int instrumented = !code || !PyCode_Check(code) || !instrumented_files
                               ? 0
                               : PySet_Contains(instrumented_files, cs_compat_code_filename(code));
        if (instrumented < 0) rc = -1;
        else if (!instrumented && code && PyCode_Check(code) && !(sum = env_summary(code)))
            rc = -1;
        if (rc == 0 && sum && sum != Py_None && frame && PyFrame_Check(frame)) {
            if (!open) {
                walk_begin(&w, W_ARG, KIND_WRITE, task_step_site);
                open = 1;
            }
            PyObject *site = library_site(frame, code);
            rc = site ? walk_pin(site) : -1; /* the walk keeps it */
            if (rc == 0) {
                w.site = site;
                rc = walk_pin(sum);
            }
            Py_XDECREF(site);
            if (rc == 0) rc = walk_frame(&w, frame, sum);
        }
        Py_XDECREF(frame);
        Py_XDECREF(code);
        Py_SETREF(obj, next);
        if (!obj) break;
    }
    Py_XDECREF(obj);
    if (open) rc = walk_end(&w, rc);
    return rc;
}

/* Records what an opaque protocol operation of obj may do (`bit`: which
 * operation): what an unknown method does (W_ARG, a write); nothing for an
 * exactly modelled one. */
static int record_opaque_protocol(PyObject *obj, int bit, PyObject *site) {
    PyTypeObject *t = Py_TYPE(obj);
    if (t == &PyDict_Type || t == &PyList_Type) return 0; /* the common case, at once */
    if (PyType_Check(obj) || PyModule_Check(obj) || Py_IS_TYPE(obj, &PySuper_Type)) return 0;
    if (!(protocol_bits(t) & bit)) return 0;
    return walk(obj, W_ARG, KIND_WRITE, site);
}

/* ---- attribute access that runs code: descriptors, __getattr__
 *
 * `obj.name`, `obj.name = v` and `del obj.name` on an instance of a Python
 * class are recorded as accesses of the attribute; what they run besides the
 * instance's dict is resolved here the way object's own lookup does: a data
 * descriptor of the class first (a property, a library's descriptor), then
 * the instance's dict, then a non-data descriptor (cached_property), then
 * __getattr__ when nothing was found.  A function of such a descriptor or
 * hook defined by code that does not record itself may change anything
 * reachable from obj (a lazy getter filling a cache, a setter tracking the
 * fields set): what an unknown method does (W_ARG, a write).  Instrumented
 * functions record for themselves.  Functions, classmethods, staticmethods
 * and the C descriptors other than property (slots, namedtuple fields) run
 * no code of their own.  Two stdlib descriptors are modelled:
 * functools.cached_property computing (a write of the attribute, inserted,
 * and what its function does), and an Enum member's name and value
 * (types.DynamicClassAttribute / enum.property: a read of the member). */
enum { AT_GET, AT_SET, AT_DEL };

static PyTypeObject *cached_property_type; /* functools.cached_property */
static PyTypeObject *dynamic_attr_type;    /* types.DynamicClassAttribute */
static PyObject *enum_type;                /* enum.Enum */

static void load_descriptor_types(void) {
    if (enum_type) return;
    PyObject *ft = PyImport_ImportModule("functools");
    PyObject *cp = ft ? PyObject_GetAttrString(ft, "cached_property") : NULL;
    PyObject *ty = cp ? PyImport_ImportModule("types") : NULL;
    PyObject *dca = ty ? PyObject_GetAttrString(ty, "DynamicClassAttribute") : NULL;
    PyObject *en = dca ? PyImport_ImportModule("enum") : NULL;
    PyObject *et = en ? PyObject_GetAttrString(en, "Enum") : NULL;
    Py_XDECREF(ft);
    Py_XDECREF(ty);
    Py_XDECREF(en);
    if (!et || !PyType_Check(cp) || !PyType_Check(dca)) {
        PyErr_Clear();
        Py_XDECREF(cp);
        Py_XDECREF(dca);
        Py_XDECREF(et);
        return;
    }
    /* kept for the process */
    cached_property_type = (PyTypeObject *)cp;
    dynamic_attr_type = (PyTypeObject *)dca;
    enum_type = et;
}

/* 1 if the callable f of a descriptor (a property's fget, ...) is code that
 * does not record itself; None or absent (the access raises) is not. */
static int opaque_function(PyObject *f) {
    return f && f != Py_None && !is_instrumented_callable(f);
}

/* Per AT_* operation, interned once (attribute accesses are the hot path):
 * the descriptor's dunder, and the property field holding its function. */
static PyObject *op_dunders[3], *op_property_fields[3];

static int load_op_names(void) {
    static const char *const dunders[] = {"__get__", "__set__", "__delete__"};
    static const char *const fields[] = {"fget", "fset", "fdel"};
    if (op_property_fields[2]) return 0;
    for (int op = 0; op < 3; op++) {
        if (!op_dunders[op] && !(op_dunders[op] = PyUnicode_InternFromString(dunders[op])))
            return -1;
        if (!op_property_fields[op] &&
            !(op_property_fields[op] = PyUnicode_InternFromString(fields[op])))
            return -1;
    }
    return 0;
}

/* 1 if the descriptor type dt's dunder for `op` (__get__, __set__,
 * __delete__) is a Python function that does not record itself; a slot of C
 * code (of a static or a heap type: 3.12's _collections._tuplegetter is one)
 * reads or writes the slot it describes. */
static int python_slot(PyTypeObject *dt, int op) {
    if (!(dt->tp_flags & Py_TPFLAGS_HEAPTYPE)) return 0;
    PyObject *f = cs_compat_type_lookup(dt, op_dunders[op]); /* borrowed */
    return f && PyFunction_Check(f) && !is_instrumented_callable(f);
}

/* What descriptor d of obj's class runs for `op`: 0 nothing opaque, 1 opaque
 * code, 2 a read of obj only (an Enum member's name / value), -1 error. */
static int descriptor_runs(PyObject *obj, PyObject *d, int op) {
    PyTypeObject *dt = Py_TYPE(d);
    if (load_op_names() < 0) return -1;
    if (dynamic_attr_type && PyObject_TypeCheck(d, dynamic_attr_type) && op == AT_GET &&
        enum_type && PyObject_IsInstance(obj, enum_type) == 1) {
        PyObject *mod = PyObject_GetAttrString((PyObject *)dt, "__module__");
        int stdlib = mod && PyUnicode_Check(mod) &&
                     (PyUnicode_CompareWithASCIIString(mod, "enum") == 0 ||
                      PyUnicode_CompareWithASCIIString(mod, "types") == 0);
        Py_XDECREF(mod);
        PyErr_Clear();
        if (stdlib) return 2;
    }
    if (PyObject_TypeCheck(d, &PyProperty_Type)) {
        /* a subclass may run its own __get__ / __set__ / __delete__ */
        int own = python_slot(dt, op);
        if (own) return own;
        PyObject *f = PyObject_GetAttr(d, op_property_fields[op]);
        if (!f) return -1;
        int r = opaque_function(f);
        Py_DECREF(f);
        return r;
    }
    return python_slot(dt, op);
}

/* 1 if name is in obj's instance dict, 0 if not (or obj has none), -1 on error. */
static int instance_has(PyObject *obj, PyObject *name) {
    if (!type_has_dict(Py_TYPE(obj))) return 0;
    PyObject *d = PyObject_GenericGetDict(obj, NULL);
    if (!d) return -1;
    int r = PyDict_Check(d) ? PyDict_Contains(d, name) : 0;
    Py_DECREF(d);
    return r;
}

/* Records what `op` of obj.name runs besides the instance's dict, before it
 * runs (see above). */
static int record_attr_code(PyObject *obj, PyObject *name, int op, PyObject *site) {
    PyTypeObject *t = Py_TYPE(obj);
    if (!(t->tp_flags & Py_TPFLAGS_HEAPTYPE) || !PyUnicode_Check(name) || PyType_Check(obj))
        return 0;
    load_descriptor_types();
    /* a class without __getattribute__ / __getattr__ keeps object's lookup */
    int hooks = t->tp_getattro == PyObject_GenericGetAttr ? 0 : protocol_bits(t);
    int opaque = op == AT_GET && (hooks & PB_GETATTRIBUTE);
    PyObject *d = opaque ? NULL : cs_compat_type_lookup(t, name); /* borrowed */
    PyTypeObject *dt = d ? Py_TYPE(d) : NULL;
    if (d && dt->tp_descr_set) { /* a data descriptor: it decides */
        opaque = descriptor_runs(obj, d, op);
    } else if (op == AT_GET && !opaque &&
               (d ? dt->tp_descr_get && (dt->tp_flags & Py_TPFLAGS_HEAPTYPE) /* may be Python */
                  : (hooks & PB_GETATTR) != 0)) {
        int in_dict = instance_has(obj, name);
        if (in_dict < 0) return -1;
        if (in_dict) {
            opaque = 0;
        } else if (!d) {
            opaque = 1; /* __getattr__ */
        } else if (cached_property_type && PyObject_TypeCheck(d, cached_property_type)) {
            /* computes and stores the value in the instance dict */
            PyObject *f = PyObject_GetAttrString(d, "func");
            if (!f) return -1;
            opaque = opaque_function(f);
            Py_DECREF(f);
            if (record_attr(obj, name, KIND_WRITE, site, NULL) < 0 ||
                record_insertion(holder_of(obj), site) < 0)
                return -1;
        } else {
            opaque = descriptor_runs(obj, d, op);
        }
    }
    if (opaque < 0) return -1;
    if (opaque == 2) return record(holder_of(obj), CS_KEY_WHOLE, KIND_READ, site, NULL, NULL);
    return opaque ? walk(obj, W_ARG, KIND_WRITE, site) : 0;
}

/* What iterating o once, eagerly, does to it (unpacking, `*x`, len-less
 * consumers): a read of a builtin container (a dict view: of its dict), a
 * write of anything else (an iterator or generator is consumed).  Immutable
 * iterables and exact tuples / frozensets have no state of their own. */
static int record_iterated(PyObject *o, PyObject *site) {
    PyTypeObject *t = Py_TYPE(o);
    if (immutable_value(o) || t == &PyTuple_Type || t == &PyFrozenSet_Type) return 0;
    o = view_base(o);
    int kind = (PyList_Check(o) || PyTuple_Check(o) || PyDict_Check(o) || PyAnySet_Check(o) ||
                PyUnicode_Check(o) || PyBytes_Check(o) || PyByteArray_Check(o) || is_deque(o))
                   ? KIND_READ
                   : KIND_WRITE;
    return record(holder_of(o), CS_KEY_WHOLE, kind, site, NULL, NULL);
}

static int read_key(PyObject *k, PyObject *site) { return walk(k, W_VALUE, KIND_READ, site); }

/* Reads of class-level state through obj.name: when the attribute is found
 * on the class (a method, a class variable, a property), a write of
 * Cls.name = ... by another task changes what obj.name gives.  Each heap class
 * of the MRO up to the one defining `name` is read at `name` (a write to any
 * of them may shadow it).  For a class itself, its bases from the second MRO
 * entry on (its own entry is the recorded access). */
static int record_class_reads(PyObject *obj, PyObject *name, PyObject *site) {
    if (!PyUnicode_Check(name) || PyModule_Check(obj)) return 0;
    PyTypeObject *t;
    Py_ssize_t start;
    if (PyType_Check(obj)) {
        t = (PyTypeObject *)obj;
        start = 1;
    } else {
        t = Py_TYPE(obj);
        start = 0;
        if (!(t->tp_flags & Py_TPFLAGS_HEAPTYPE)) return 0;
    }
    if (!cs_compat_type_lookup(t, name)) return 0;
    PyObject *mro = t->tp_mro;
    if (!mro || !PyTuple_Check(mro)) return 0;
    for (Py_ssize_t i = start; i < PyTuple_GET_SIZE(mro); i++) {
        PyTypeObject *c = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
        if (!(c->tp_flags & Py_TPFLAGS_HEAPTYPE)) break; /* static types never change */
        if (record_attr((PyObject *)c, name, KIND_READ, site, NULL) < 0) return -1;
        PyObject *d = c->tp_dict;
        if (d && PyDict_Contains(d, name) == 1) break;
        PyErr_Clear();
    }
    return 0;
}

#define NARGS(n, fname)                                                                    \
    if (nargs != (n)) {                                                                    \
        PyErr_Format(PyExc_TypeError, fname "() takes %d arguments (%zd given)", (n), nargs); \
        return NULL;                                                                       \
    }

/* ---------------------------------------------------- operation hooks */

static int name_is(PyObject *name, const char *s) {
    return PyUnicode_Check(name) && PyUnicode_CompareWithASCIIString(name, s) == 0;
}

static int is_dunder_dict(PyObject *name) { return name_is(name, "__dict__"); }

/* Attributes whose store changes every other attribute of the object:
 * __class__ (every later lookup goes to another class) and __dict__. */
static int whole_attr(PyObject *name) {
    return name_is(name, "__class__") || name_is(name, "__dict__");
}

/* 1 if storing attribute `name` of obj must write the whole object. */
static int stores_whole(PyObject *obj, PyObject *name) {
    if (whole_attr(name)) return 1;
    if (!self_recording_types) return 0;
    return PyObject_IsInstance(obj, self_recording_types);
}

/* ga(obj, name, site) -> getattr(obj, name) */
static PyObject *h_ga(PyObject *Py_UNUSED(m), PyObject *const *a, Py_ssize_t nargs) {
    NARGS(3, "ga");
    if (!hooks_ex) return PyObject_GetAttr(a[0], a[1]);
    path p;
    if (record_attr(a[0], a[1], KIND_READ, a[2], &p) < 0) return NULL;
    if (record_class_reads(a[0], a[1], a[2]) < 0) return NULL;
    if (record_attr_code(a[0], a[1], AT_GET, a[2]) < 0) return NULL;
    PyObject *r = named(PyObject_GetAttr(a[0], a[1]), &p);
    if (r && is_dunder_dict(a[1]) && add_alias(r, a[0]) < 0) Py_CLEAR(r);
    return r;
}

/* sa(value, obj, name, site): obj.name = value */
static PyObject *h_sa(PyObject *Py_UNUSED(m), PyObject *const *a, Py_ssize_t nargs) {
    NARGS(4, "sa");
    PyObject *old = NULL;
    if (hooks_ex) {
        path p;
        if (record_attr(a[1], a[2], KIND_WRITE, a[3], &p) < 0) return NULL;
        if (name_value(a[0], p.cid, p.key) < 0) return NULL;
        int inserts = attr_inserts(a[1], a[2]);
        if (inserts < 0 || (inserts && record_insertion(holder_of(a[1]), a[3]) < 0)) return NULL;
        int whole = stores_whole(a[1], a[2]);
        if (whole < 0 ||
            (whole && record(holder_of(a[1]), CS_KEY_WHOLE, KIND_WRITE, a[3], NULL, NULL) < 0))
            return NULL;
        if (record_opaque_protocol(a[1], PB_SETATTR, a[3]) < 0) return NULL;
        if (record_attr_code(a[1], a[2], AT_SET, a[3]) < 0) return NULL;
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
    if (hooks_ex && record_attr(a[0], a[1], KIND_WRITE, a[2], NULL) < 0) return NULL;
    if (hooks_ex) {
        int whole = stores_whole(a[0], a[1]);
        if (whole < 0 ||
            (whole && record(holder_of(a[0]), CS_KEY_WHOLE, KIND_WRITE, a[2], NULL, NULL) < 0))
            return NULL;
        if (record_opaque_protocol(a[0], PB_SETATTR, a[2]) < 0) return NULL;
        if (record_attr_code(a[0], a[1], AT_DEL, a[2]) < 0) return NULL;
    }
    if (hooks_ex && replaced_attr(a[0], a[1], &old) < 0) return NULL;
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
    if (record_opaque_protocol(a[0], PB_GETITEM, a[2]) < 0) return NULL;
    /* a dict subclass's __missing__ may insert the key it did not find
     * (defaultdict, in C: nothing else records it): a lookup that grew the
     * dict wrote the key and the order (the whole dict, for a key of an
     * unsafe type) */
    Py_ssize_t size = PyDict_Check(a[0]) && !PyDict_CheckExact(a[0]) ? PyDict_Size(a[0]) : -1;
    PyObject *r = PyObject_GetItem(a[0], a[1]);
    if (r && size >= 0 && PyDict_Size(a[0]) > size) {
        int rc = p.key == CS_KEY_WHOLE
                     ? record(a[0], CS_KEY_WHOLE, KIND_WRITE, a[2], NULL, NULL)
                     : record_item(a[0], a[1], KIND_WRITE, a[2], NULL);
        if (rc < 0 || record_insertion(a[0], a[2]) < 0) {
            Py_DECREF(r);
            return NULL;
        }
    }
    return named(r, &p);
}

/* si(value, obj, key, site): obj[key] = value */
static PyObject *h_si(PyObject *Py_UNUSED(m), PyObject *const *a, Py_ssize_t nargs) {
    NARGS(4, "si");
    PyObject *old = NULL;
    if (hooks_ex) {
        path p;
        if (record_item(a[1], a[2], KIND_WRITE, a[3], &p) < 0) return NULL;
        if (record_opaque_protocol(a[1], PB_SETITEM, a[3]) < 0) return NULL;
        int inserts = p.key == CS_KEY_WHOLE ? 0 : dict_lacks(a[1], a[2]);
        if (inserts < 0 || (inserts && record_insertion(a[1], a[3]) < 0)) return NULL;
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
                     record_opaque_protocol(a[0], PB_DELITEM, a[2]) < 0 ||
                     replaced_item(a[0], a[1], p.key, &old) < 0))
        return NULL;
    int rc = PyObject_DelItem(a[0], a[1]);
    if (release_replaced(old) < 0 || rc < 0) return NULL;
    Py_RETURN_NONE;
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

static int record_callee(PyObject *f, PyObject *site, int depth);
static PyObject *agen_method(PyObject *f, PyObject *recv, PyObject *name, PyObject *site);

/* The object a slot wrapper is bound to (`obj.__setitem__` of a type whose
 * slot is written in C, reached e.g. through super()), borrowed (the wrapper
 * keeps it alive), or NULL when f is no such "method-wrapper". */
static PyObject *method_wrapper_self(PyObject *f) {
    if (strcmp(Py_TYPE(f)->tp_name, "method-wrapper") != 0) return NULL;
    PyObject *self = PyObject_GetAttrString(f, "__self__");
    if (!self) {
        PyErr_Clear();
        return NULL;
    }
    Py_DECREF(self);
    return self;
}

/* Is the callable f a method bound to recv (a builtin one, or a Python one)? */
static int bound_to(PyObject *f, PyObject *recv) {
    if (PyMethod_Check(f)) return PyMethod_GET_SELF(f) == recv;
    if (PyCFunction_Check(f)) return PyCFunction_GET_SELF(f) == recv;
    PyObject *wrapped = method_wrapper_self(f);
    return wrapped && wrapped == recv;
}

/* cm(obj, name, site, attr_site) -> getattr(obj, name), about to be called.
 * Instrumented code (which records its own accesses precisely) and module
 * functions: a read of the attribute only (at attr_site).  A method bound to
 * obj acts as its callee does (record_callee, at site): a builtin container's
 * known pure method reads the receiver, another builtin method writes it,
 * code that does not record itself may change anything reachable from it.
 * The method's name alone proves nothing: a library's `get` or `items` may
 * reorder or purge what it holds.  A whole access covers the attribute read,
 * so that read is not recorded again. */
static PyMethodDef ordered_pop_def; /* set.pop in canonical order: "lazy iteration" */

static PyObject *h_cm(PyObject *Py_UNUSED(m), PyObject *const *a, Py_ssize_t nargs) {
    NARGS(4, "cm");
    PyObject *obj = a[0], *name = a[1];
    if (!hooks_ex) return PyObject_GetAttr(obj, name);
    PyObject *recv = receiver_of(obj);
    if (recv == obj && record_attr_code(obj, name, AT_GET, a[2]) < 0) {
        Py_DECREF(recv);
        return NULL;
    }
    PyObject *f = PyObject_GetAttr(obj, name);
    int rc;
    if (!f) {
        /* the lookup failed: it still read the attribute */
        rc = record_attr(recv, name, KIND_READ, a[3], NULL);
    } else if (PyModule_Check(recv) || is_instrumented_callable(f)) {
        rc = record_attr(recv, name, KIND_READ, a[3], NULL);
        /* a module's function may be a bound method or a partial of something else */
        if (rc == 0 && PyModule_Check(recv)) rc = record_callee(f, a[2], 0);
    } else if (!bound_to(f, recv)) {
        /* an attribute holding a callable of something else (a callback
         * `self.on_job` = jobs.append, a partial, a plain function): the
         * attribute is read, and the call acts as its callee does */
        rc = record_attr(recv, name, KIND_READ, a[3], NULL);
        if (rc == 0) rc = record_callee(f, a[2], 0);
    } else {
        rc = record_callee(f, a[2], 0);
    }
    if (rc == 0 && f) rc = record_class_reads(recv, name, a[3]);
    if (rc < 0) {
        Py_DECREF(recv);
        Py_XDECREF(f);
        return NULL;
    }
    /* asend / athrow / aclose / __anext__ of an async generator: the awaitable
     * the call returns resumes the generator in later steps (awaitproxy) */
    f = agen_method(f, recv, name, a[2]);
    if (f && PySet_CheckExact(recv) && PyCFunction_Check(f) && PyCFunction_GET_SELF(f) == recv &&
        !strcmp(cs_compat_cfunction_name(f), "pop")) {
        /* recorded above as the builtin method it replaces (a write of the set) */
        Py_SETREF(f, PyCFunction_New(&ordered_pop_def, recv));
    }
    Py_DECREF(recv);
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
    PyObject *dict = NULL; /* borrowed: an exact dict the call may insert into */
    Py_ssize_t size = 0;   /* its size before the call */
    if (hooks_ex) {
        long kind = PyLong_AsLong(a[1]);
        if (kind == -1 && PyErr_Occurred()) return NULL;
        int k = kind == KIND_READ ? KIND_READ : KIND_WRITE;
        int rc = 0;
        if (PyCFunction_Check(f)) {
            PyObject *self = PyCFunction_GET_SELF(f);
            if (self && PyDict_CheckExact(self)) {
                rc = record_item(self, a[3], k, a[2], &p);
                /* setdefault may insert: a call that grew the dict did */
                if (k == KIND_WRITE) {
                    dict = self;
                    size = PyDict_Size(self);
                }
            } else if (self && !PyModule_Check(self)) {
                rc = record(self, CS_KEY_WHOLE, k, a[2], NULL, NULL);
            }
        } else if (PyMethod_Check(f) && !is_instrumented_callable(f)) {
            rc = record(PyMethod_GET_SELF(f), CS_KEY_WHOLE, KIND_WRITE, a[2], NULL, NULL);
        }
        if (rc < 0) return NULL;
    }
    PyObject *r = PyObject_Vectorcall(f, a + 3, (size_t)(nargs - 3), NULL);
    if (r && dict && PyDict_Size(dict) > size && record_insertion(dict, a[2]) < 0) {
        Py_DECREF(r);
        return NULL;
    }
    return p.key == CS_KEY_WHOLE ? r : named(r, &p);
}

/* contains(key, obj, site) -> key in obj */
static PyObject *h_contains(PyObject *Py_UNUSED(m), PyObject *const *a, Py_ssize_t nargs) {
    NARGS(3, "contains");
    PyObject *k = a[0], *obj = a[1];
    if (hooks_ex) {
        int rc;
        if (PyDict_CheckExact(obj) || PyAnySet_CheckExact(obj)) {
            rc = record_item(obj, k, KIND_READ, a[2], NULL);
        } else {
            rc = record(holder_of(view_base(obj)), CS_KEY_WHOLE, KIND_READ, a[2], NULL, NULL);
            if (rc == 0) rc = record_opaque_protocol(obj, PB_CONTAINS, a[2]);
            /* a sequence compares k with each element: both are read as values */
            if (rc == 0 && (PyList_Check(obj) || PyTuple_Check(obj) || is_deque(obj)))
                rc = walk(obj, W_VALUE, KIND_READ, a[2]);
            if (rc == 0) rc = walk(k, W_VALUE, KIND_READ, a[2]);
        }
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
        /* a store (the name is there now) that may have inserted it */
        int stored = g ? PyDict_Contains(g, a[0]) : 0;
        int inserted = stored == 1 ? stored_last(g, a[0]) : stored;
        if (inserted < 0 || (inserted && record_insertion(holder_of(g), a[1]) < 0)) return NULL;
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
    if (hooks_ex && !immutable_value(a[0]) &&
        record(holder_of(view_base(a[0])), CS_KEY_WHOLE, KIND_READ, a[1], NULL, NULL) < 0)
        return NULL;
    return Py_NewRef(a[0]);
}

/* it(obj, site) -> obj, about to be iterated: a read of the whole object for
 * the builtin containers, a write for anything else (iterators and
 * generators are consumed by iteration). */
static PyObject *h_it(PyObject *Py_UNUSED(m), PyObject *const *a, Py_ssize_t nargs) {
    NARGS(2, "it");
    if (hooks_ex && record_iterated(a[0], a[1]) < 0) return NULL;
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

static int record_constructor(PyTypeObject *t, PyObject *site);
static PyObject *call_iterating_in_order(PyObject *f, PyObject *const *args, Py_ssize_t npos,
                                         Py_ssize_t n, PyObject *kwnames, int *done);

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
    if (PyType_Check(f) && record_constructor((PyTypeObject *)f, a[1]) < 0) return NULL;
    int how = fresh_callee(f);
    if (how == NEW_CLASS) return construct((PyTypeObject *)f, a + 2, nargs - 2, kwnames, a[1]);
    int done;
    PyObject *r = call_iterating_in_order(f, a + 2, nargs - 2, n, kwnames, &done);
    if (!done) r = PyObject_Vectorcall(f, a + 2, (size_t)(nargs - 2), kwnames);
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
    const char *name = cs_compat_cfunction_name(f);
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

/* What calling f does to an argument: see W_ARG (a function or a coroutine
 * handed on records its own accesses; a tuple stands for its items, a bound
 * method for its receiver; containers and opaque instances are walked). */
static int record_arg(PyObject *o, int kind, PyObject *site) {
    return walk(o, W_ARG, kind, site);
}

/* Records what calling f does to its arguments a[0..n) (positional and
 * keyword values alike). */
static int record_args(PyObject *f, PyObject *const *args, Py_ssize_t n, PyObject *site) {
    if (n == 0) return 0;
    int kind = arg_effect(f);
    if (kind < 0) return -1;
    if (kind == ARG_NONE) return 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (record_arg(args[i], kind, site) < 0) return -1;
    return 0;
}

/* Methods of the builtin containers and immutables that only read their
 * receiver (the C twin of instrument.PURE, restricted to builtin types). */
static PyObject *pure_method_names;

static int pure_method(PyObject *f) {
    if (!pure_method_names) {
        static const char *names[] = {
            "keys", "values", "items", "copy", "count", "index", "__contains__", "__len__",
            "__getitem__", "__iter__", "issubset", "issuperset", "isdisjoint", "union",
            "intersection", "difference", "symmetric_difference", "startswith", "endswith",
            "find", "rfind", "join", "split", "rsplit", "strip", "lstrip", "rstrip", "lower",
            "upper", "format", "replace", "encode", "decode", "splitlines", "partition",
            "rpartition", "isdigit", "isalpha", "isspace", "get", "__eq__", "__ne__",
            "__lt__", "__le__", "__gt__", "__ge__", "__hash__", "__repr__", "__str__",
            "__format__", "__reversed__", "__sizeof__", NULL};
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
        pure_method_names = PyFrozenSet_New(lst);
        Py_DECREF(lst);
        if (!pure_method_names) return -1;
    }
    PyObject *s = PyUnicode_FromString(cs_compat_cfunction_name(f));
    if (!s) return -1;
    int r = PySet_Contains(pure_method_names, s);
    Py_DECREF(s);
    return r;
}

/* Builtins that run or expose arbitrary code and namespaces: exec, eval,
 * compile (its code object is run later), globals(), locals(), __import__,
 * breakpoint.  Calling one is a global write (the barrier). */
static int barrier_builtin(PyObject *f) {
    if (!PyCFunction_Check(f)) return 0;
    PyObject *self = PyCFunction_GET_SELF(f);
    if (!self || !PyModule_Check(self)) return 0;
    const char *mod = PyModule_GetName(self);
    if (!mod) {
        PyErr_Clear();
        return 0;
    }
    if (strcmp(mod, "builtins") != 0) return 0;
    const char *n = cs_compat_cfunction_name(f);
    static const char *names[] = {"exec", "eval", "compile", "globals", "locals",
                                  "__import__", "breakpoint", NULL};
    for (const char **p = names; *p; p++)
        if (strcmp(n, *p) == 0) return 1;
    return 0;
}

/* f is the function `name` of the C module `module`. */
static int is_module_function(PyObject *f, const char *module, const char *name) {
    if (!PyCFunction_Check(f)) return 0;
    PyObject *self = PyCFunction_GET_SELF(f);
    if (!self || !PyModule_Check(self)) return 0;
    const char *mod = PyModule_GetName(self);
    if (!mod) {
        PyErr_Clear();
        return 0;
    }
    return strcmp(mod, module) == 0 && strcmp(cs_compat_cfunction_name(f), name) == 0;
}

static int is_builtin_named(PyObject *f, const char *name) {
    return is_module_function(f, "builtins", name);
}

static PyObject *finalize_type; /* weakref.finalize */

/* Calling f(obj, callback, ...) registers code to run at obj's death:
 * weakref.finalize, or a weak reference type given a callback. */
static int registers_finalizer(PyObject *f) {
    if (!finalize_type) {
        PyObject *mod = PyImport_ImportModule("weakref");
        finalize_type = mod ? PyObject_GetAttrString(mod, "finalize") : NULL;
        Py_XDECREF(mod);
        if (!finalize_type) {
            PyErr_Clear();
            return 0;
        }
    }
    return f == finalize_type || (PyType_Check(f) && PyType_IsSubtype((PyTypeObject *)f,
                                                                     &_PyWeakref_RefType));
}

static PyObject *partial_type; /* functools.partial */

static int is_partial(PyObject *f) {
    if (!partial_type) {
        PyObject *mod = PyImport_ImportModule("functools");
        partial_type = mod ? PyObject_GetAttrString(mod, "partial") : NULL;
        Py_XDECREF(mod);
        if (!partial_type) {
            PyErr_Clear();
            return 0;
        }
    }
    return PyObject_TypeCheck(f, (PyTypeObject *)partial_type);
}

/* What constructing an instance of t may change beyond the arguments: the
 * environments of its __init__ and __new__ and of its metaclass's __call__,
 * with t as their class context (see "the environment of code that does not
 * record itself"). */
static int record_constructor(PyTypeObject *t, PyObject *site) {
    if (!(t->tp_flags & Py_TPFLAGS_HEAPTYPE)) return 0;
    static PyObject *names[3];
    static const char *cnames[3] = {"__init__", "__new__", "__call__"};
    for (int i = 0; i < 3; i++)
        if (!names[i] && !(names[i] = PyUnicode_InternFromString(cnames[i]))) return -1;
    PyTypeObject *meta = Py_TYPE(t);
    PyObject *parts[3] = {
        cs_compat_type_lookup(t, names[0]), cs_compat_type_lookup(t, names[1]),
        (meta->tp_flags & Py_TPFLAGS_HEAPTYPE) ? cs_compat_type_lookup(meta, names[2]) : NULL};
    int any = 0;
    for (int i = 0; i < 3; i++) {
        PyObject *fn;
        if (parts[i] && env_of(parts[i], &fn)) any = 1;
        else if (PyErr_Occurred()) return -1;
    }
    if (!any) return 0;
    for (int i = 0; i < 3; i++) Py_XINCREF(parts[i]);
    walk_t w;
    walk_begin(&w, W_ARG, KIND_WRITE, site);
    int rc = 0;
    for (int i = 0; rc == 0 && i < 3; i++)
        if (parts[i]) rc = walk_env(&w, parts[i], (PyObject *)t, 0);
    rc = walk_end(&w, rc);
    for (int i = 0; i < 3; i++) Py_XDECREF(parts[i]);
    return rc;
}

/* What calling f does to the objects f itself carries, apart from the
 * arguments of the call (record_args):
 *   - a bound method of an object (builtin or Python, kept in a variable,
 *     stored as a callback, returned by getattr): a write of its receiver,
 *     unless the method is instrumented (it records for itself) or a known
 *     pure method of a builtin container (a read);
 *   - a function that does not record itself: its environment (globals,
 *     cells, defaults it reaches: walk_env); a class: its construction's
 *     (record_constructor);
 *   - a functools.partial: what its function does, to its receiver and to
 *     the bound arguments;
 *   - exec / eval / compile / globals / locals / __import__ / breakpoint:
 *     the global barrier;
 *   - another callable object whose __call__ is not instrumented: a write of
 *     the object.
 * Instrumented functions (they record for themselves) and static callables
 * (itemgetter, methodcaller...) carry no state of their own. */
static int record_callee(PyObject *f, PyObject *site, int depth) {
    if (!hooks_ex) return 0;
    if (depth > 8) return record_barrier(KIND_WRITE, site);
    if (PyMethod_Check(f)) {
        if (is_instrumented_callable(f)) return 0;
        return walk(f, W_ARG, KIND_WRITE, site); /* the receiver, the method's environment */
    }
    if (PyCFunction_Check(f)) {
        PyObject *self = PyCFunction_GET_SELF(f);
        if (!self) return 0;
        /* gc.collect() may finalize objects that became unreachable in any
         * earlier step: a global write, like the code-running builtins */
        if (PyModule_Check(self))
            return barrier_builtin(f) || is_module_function(f, "gc", "collect")
                       ? record_barrier(KIND_WRITE, site)
                       : 0;
        if (immutable_value(self) || Py_TYPE(self) == &PyTuple_Type) return 0;
        int pure = 0;
        if (plain_builtin_receiver(self)) {
            pure = pure_method(f);
            if (pure < 0) return -1;
        }
        return record(holder_of(view_base(self)), CS_KEY_WHOLE, pure ? KIND_READ : KIND_WRITE,
                      site, NULL, NULL);
    }
    if (PyFunction_Check(f)) return is_instrumented_callable(f) ? 0 : walk(f, W_ARG, KIND_WRITE, site);
    if (PyType_Check(f)) return record_constructor((PyTypeObject *)f, site);
    PyObject *wrapped = method_wrapper_self(f);
    if (wrapped) /* a slot wrapper: what the slot does to its object is unknown */
        return walk(wrapped, W_ARG, KIND_WRITE, site);
    if (is_partial(f)) {
        PyObject *func = PyObject_GetAttrString(f, "func");
        PyObject *args = func ? PyObject_GetAttrString(f, "args") : NULL;
        PyObject *kw = args ? PyObject_GetAttrString(f, "keywords") : NULL;
        int rc = kw ? 0 : -1;
        if (rc == 0) rc = record_callee(func, site, depth + 1);
        if (rc == 0 && PyTuple_Check(args))
            rc = record_args(func, &PyTuple_GET_ITEM(args, 0), PyTuple_GET_SIZE(args), site);
        if (rc == 0 && PyDict_Check(kw)) {
            Py_ssize_t pos = 0;
            PyObject *k, *v;
            int eff = arg_effect(func);
            if (eff < 0) rc = -1;
            while (rc == 0 && eff != ARG_NONE && PyDict_Next(kw, &pos, &k, &v))
                rc = record_arg(v, eff, site);
        }
        Py_XDECREF(func);
        Py_XDECREF(args);
        Py_XDECREF(kw);
        return rc;
    }
    PyTypeObject *t = Py_TYPE(f);
    if (!(t->tp_flags & Py_TPFLAGS_HEAPTYPE)) return 0;
    static PyObject *call_name;
    if (!call_name && !(call_name = PyUnicode_InternFromString("__call__"))) return -1;
    PyObject *call = cs_compat_type_lookup(t, call_name); /* borrowed */
    if (call && PyFunction_Check(call) && is_instrumented_callable(call)) return 0;
    return walk(f, W_ARG, KIND_WRITE, site);
}

/* ---- async generators resumed across steps.  An async generator's frame is
 * resumed by the awaitable its __anext__ / asend / athrow / aclose returns,
 * not by that call: when the generator's body awaits between two yields, the
 * awaitable is resumed again in later steps of the task awaiting it, and each
 * of those resumptions runs (or may run: close() throws into it on 3.13) the
 * generator's frame.  Two tasks driving one generator race on it in every
 * such step ("asynchronous generator is already running", or the items in
 * the other order), so each resumption is a write of the generator, recorded
 * in the step that resumes it.
 *
 * awaitproxy stands for that awaitable: its __await__ is itself (so that an
 * `await` drives it, never the inner object directly), and __next__ / send /
 * throw / close record the write, then hand over to the inner awaitable's
 * iterator (the inner's own __await__ result, fetched once) with the very
 * arguments, so values, StopIteration, errors and warnings are the inner's.
 * It has __await__, send, throw and close, so asyncio takes it for a
 * coroutine exactly as it takes the inner one (create_task, gather).  A
 * proxy resumed in another execution than the one that made it (a leftover
 * being finalized) records nothing. */
typedef struct {
    PyObject_HEAD
    PyObject *aw;     /* the inner awaitable */
    PyObject *it;     /* aw.__await__(), NULL until the first resumption */
    PyObject *target; /* the async generator each resumption writes */
    PyObject *site;
    uint64_t exec;    /* exec_tag() of the execution that made it */
} awaitproxy;

/* The execution the hooks are in (as record() tags its cache entries). */
static uint64_t exec_tag(void) {
    cs_stats st;
    cs_explorer_stats(hooks_ex, &st);
    return mix64(hooks_gen ^ mix64(st.executions));
}

static int ap_traverse(awaitproxy *p, visitproc visit, void *arg) {
    Py_VISIT(p->aw);
    Py_VISIT(p->it);
    Py_VISIT(p->target);
    Py_VISIT(p->site);
    return 0;
}

static int ap_clear(awaitproxy *p) {
    Py_CLEAR(p->aw);
    Py_CLEAR(p->it);
    Py_CLEAR(p->target);
    Py_CLEAR(p->site);
    return 0;
}

static void ap_dealloc(awaitproxy *p) {
    PyObject_GC_UnTrack(p);
    ap_clear(p);
    PyObject_GC_Del(p);
}

/* Records the resumption, and returns the inner iterator (borrowed) or NULL
 * with an exception. */
static PyObject *ap_resume(awaitproxy *p) {
    if (hooks_ex && p->exec == exec_tag() &&
        record(holder_of(p->target), CS_KEY_WHOLE, KIND_WRITE, p->site, NULL, NULL) < 0)
        return NULL;
    if (!p->it) {
        PyTypeObject *t = Py_TYPE(p->aw);
        PyObject *it;
        if (t->tp_as_async && t->tp_as_async->am_await) {
            it = t->tp_as_async->am_await(p->aw);
        } else {
            PyErr_Format(PyExc_TypeError, "object %.100s can't be used in 'await' expression",
                         t->tp_name);
            return NULL;
        }
        if (!it) return NULL;
        if (!PyIter_Check(it)) {
            PyErr_Format(PyExc_TypeError, "__await__() returned non-iterator of type '%.100s'",
                         Py_TYPE(it)->tp_name);
            Py_DECREF(it);
            return NULL;
        }
        p->it = it;
    }
    return p->it;
}

static PyObject *ap_await(PyObject *p) { return Py_NewRef(p); }

static PyObject *ap_next(awaitproxy *p) {
    PyObject *it = ap_resume(p);
    return it ? Py_TYPE(it)->tp_iternext(it) : NULL;
}

static PyObject *ap_send(awaitproxy *p, PyObject *v) {
    static PyObject *name;
    if (!name && !(name = PyUnicode_InternFromString("send"))) return NULL;
    PyObject *it = ap_resume(p);
    if (!it) return NULL;
    return PyObject_CallMethodOneArg(it, name, v);
}

static PyObject *ap_throw(awaitproxy *p, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *it = ap_resume(p);
    if (!it) return NULL;
    PyObject *meth = PyObject_GetAttrString(it, "throw");
    if (!meth) return NULL;
    PyObject *r = PyObject_Vectorcall(meth, args, (size_t)nargs, NULL);
    Py_DECREF(meth);
    return r;
}

static PyObject *ap_close(awaitproxy *p, PyObject *Py_UNUSED(unused)) {
    PyObject *it = ap_resume(p);
    if (!it) return NULL;
    PyObject *meth = PyObject_GetAttrString(it, "close");
    if (!meth) {
        /* an iterator without close() has nothing to close (as `yield from` treats it) */
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return NULL;
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    PyObject *r = PyObject_CallNoArgs(meth);
    Py_DECREF(meth);
    return r;
}

static PyMethodDef ap_methods[] = {
    {"send", (PyCFunction)ap_send, METH_O, "send(v): resume the inner awaitable with v."},
    {"throw", (PyCFunction)(void (*)(void))ap_throw, METH_FASTCALL,
     "throw(...): throw into the inner awaitable."},
    {"close", (PyCFunction)ap_close, METH_NOARGS, "close(): close the inner awaitable."},
    {NULL, NULL, 0, NULL},
};

static PyAsyncMethods ap_async = {
    .am_await = ap_await,
};

static PyTypeObject AwaitProxy_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = CS_AWAITPROXY_TYPE_NAME,
    .tp_basicsize = sizeof(awaitproxy),
    .tp_dealloc = (destructor)ap_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)ap_traverse,
    .tp_clear = (inquiry)ap_clear,
    .tp_as_async = &ap_async,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)ap_next,
    .tp_methods = ap_methods,
};

/* aw (the result of a call that returns an awaitable driving the async
 * generator `target`: steals it) as an awaitproxy, or NULL (aw released)
 * with an exception.  aw NULL (the call failed) is passed through. */
static PyObject *resume_proxy(PyObject *aw, PyObject *target, PyObject *site) {
    if (!aw || !hooks_ex) return aw;
    awaitproxy *p = PyObject_GC_New(awaitproxy, &AwaitProxy_Type);
    if (!p) {
        Py_DECREF(aw);
        return NULL;
    }
    p->aw = aw;
    p->it = NULL;
    p->target = Py_NewRef(target);
    p->site = Py_NewRef(site);
    p->exec = exec_tag();
    PyObject_GC_Track(p);
    return (PyObject *)p;
}

/* The methods of an async generator that return an awaitable resuming it. */
static int resumes_agen(const char *name) {
    return strcmp(name, "__anext__") == 0 || strcmp(name, "asend") == 0 ||
           strcmp(name, "athrow") == 0 || strcmp(name, "aclose") == 0;
}

static PyTypeObject *method_wrapper_type; /* type(None.__repr__), looked up once */

/* The async generator that calling f(args[0..n)) resumes through the
 * awaitable it returns (borrowed), or NULL (never raises): a method of an
 * async generator named by resumes_agen (builtin method or method-wrapper),
 * or anext(agen[, default]). */
static PyObject *resumed_agen(PyObject *f, PyObject *const *args, Py_ssize_t n) {
    if (PyCFunction_Check(f)) {
        PyObject *self = PyCFunction_GET_SELF(f);
        if (self && PyAsyncGen_CheckExact(self))
            return resumes_agen(cs_compat_cfunction_name(f)) ? self : NULL;
        if (n >= 1 && PyAsyncGen_CheckExact(args[0]) && is_builtin_named(f, "anext"))
            return args[0];
        return NULL;
    }
    if (!method_wrapper_type) {
        PyObject *w = PyObject_GetAttrString(Py_None, "__repr__");
        if (!w) {
            PyErr_Clear();
            return NULL;
        }
        method_wrapper_type = Py_TYPE(w);
        Py_DECREF(w);
    }
    if (!Py_IS_TYPE(f, method_wrapper_type)) return NULL;
    PyObject *self = PyObject_GetAttrString(f, "__self__");
    PyObject *name = self ? PyObject_GetAttrString(f, "__name__") : NULL;
    PyObject *r = NULL;
    if (name && PyAsyncGen_CheckExact(self) && PyUnicode_Check(name)) {
        const char *s = PyUnicode_AsUTF8(name);
        if (s && resumes_agen(s)) r = self; /* kept alive by f */
    }
    Py_XDECREF(self);
    Py_XDECREF(name);
    PyErr_Clear();
    return r;
}

/* A method of an async generator (resumes_agen) handed out by cm: calling
 * it calls the method and returns its awaitable as an awaitproxy. */
typedef struct {
    PyObject_HEAD
    PyObject *meth;
    PyObject *agen;
    PyObject *site;
    vectorcallfunc vectorcall;
} agenmethod;

static void am_dealloc(agenmethod *p) {
    Py_XDECREF(p->meth);
    Py_XDECREF(p->agen);
    Py_XDECREF(p->site);
    PyObject_Free(p);
}

static PyObject *am_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                               PyObject *kwnames) {
    agenmethod *p = (agenmethod *)self;
    return resume_proxy(PyObject_Vectorcall(p->meth, args, nargsf, kwnames), p->agen, p->site);
}

static PyObject *am_repr(agenmethod *p) { return PyObject_Repr(p->meth); }

static PyTypeObject AgenMethod_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "chaossloth._core.agenmethod",
    .tp_basicsize = sizeof(agenmethod),
    .tp_dealloc = (destructor)am_dealloc,
    .tp_repr = (reprfunc)am_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(agenmethod, vectorcall),
};

/* f (the method `name` of recv, about to be called: cm) as an agenmethod
 * when it resumes the async generator recv, else f; steals f. */
static PyObject *agen_method(PyObject *f, PyObject *recv, PyObject *name, PyObject *site) {
    if (!f || !PyAsyncGen_CheckExact(recv) || !PyUnicode_Check(name)) return f;
    const char *s = PyUnicode_AsUTF8(name);
    if (!s) {
        Py_DECREF(f);
        return NULL;
    }
    if (!resumes_agen(s)) return f;
    agenmethod *p = PyObject_New(agenmethod, &AgenMethod_Type);
    if (!p) {
        Py_DECREF(f);
        return NULL;
    }
    p->meth = f;
    p->agen = Py_NewRef(recv);
    p->site = Py_NewRef(site);
    p->vectorcall = am_vectorcall;
    return (PyObject *)p;
}

static PyObject *set_in_order(PyObject *x, int *none);

/* The positional arguments (a bitmask of the first 32) that f, a builtin
 * which iterates them in order, reads as iterables: list, tuple, sorted,
 * enumerate, sum, any, all, min and max of one iterable take their first; zip
 * every one; map and filter all but the function.  0 for any other callee. */
static uint32_t iterated_args(PyObject *f, Py_ssize_t npos) {
    if (npos < 1) return 0;
    uint32_t all = npos >= 32 ? UINT32_MAX : (UINT32_C(1) << npos) - 1;
    if (f == (PyObject *)&PyList_Type || f == (PyObject *)&PyTuple_Type ||
        f == (PyObject *)&PyEnum_Type || is_builtin_named(f, "sorted") ||
        is_builtin_named(f, "sum") || is_builtin_named(f, "any") || is_builtin_named(f, "all"))
        return 1;
    if (npos == 1 && (is_builtin_named(f, "min") || is_builtin_named(f, "max"))) return 1;
    if (f == (PyObject *)&PyZip_Type) return all;
    if (f == (PyObject *)&PyMap_Type || f == (PyObject *)&PyFilter_Type) return all & ~UINT32_C(1);
    return 0;
}

/* f(*args) where f iterates a set of objects hashed by identity (see
 * setorder): that argument walked in canonical-id order, as a for loop over
 * it is, so list(tasks) or sorted(clients, key=...) (ties keep the input's
 * order) gives the same sequence in every execution of one schedule.  With
 * *done = 1: f's result, or NULL with an exception; *done = 0 when no
 * argument is such a set (the caller calls f as is). */
static PyObject *call_iterating_in_order(PyObject *f, PyObject *const *args, Py_ssize_t npos,
                                         Py_ssize_t n, PyObject *kwnames, int *done) {
    *done = 0;
    /* the type checks first: the callee's name is compared only when a set is passed */
    uint32_t sets = 0;
    for (Py_ssize_t i = 0; i < npos && i < 32; i++)
        if ((PySet_CheckExact(args[i]) || PyFrozenSet_CheckExact(args[i])) &&
            PySet_GET_SIZE(args[i]) > 1)
            sets |= UINT32_C(1) << i;
    uint32_t mask = sets ? sets & iterated_args(f, npos) : 0;
    if (!mask) return NULL;
    *done = 1;
    PyObject **copy = PyMem_Malloc((size_t)n * sizeof *copy);
    if (!copy) return PyErr_NoMemory();
    Py_ssize_t made = 0; /* copy[0..made) are new references */
    PyObject *r = NULL;
    for (; made < n; made++) {
        PyObject *x = args[made];
        if (made < 32 && (mask >> made & 1)) {
            int none;
            PyObject *it = set_in_order(x, &none);
            if (!it && !none) goto cleanup;
            copy[made] = it ? it : Py_NewRef(x);
        } else {
            copy[made] = Py_NewRef(x);
        }
    }
    r = PyObject_Vectorcall(f, copy, (size_t)npos, kwnames);
cleanup:
    for (Py_ssize_t i = 0; i < made; i++) Py_DECREF(copy[i]);
    PyMem_Free(copy);
    return r;
}

/* The shared body of call / callm: records the callee (unless recv_done:
 * the receiver of a method call was recorded by cm) and the arguments, calls,
 * and registers vars(obj)'s result as an alias of obj. */
static PyObject *call_common(PyObject *const *a, size_t nargsf, PyObject *kwnames,
                             int recv_done) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs < 2) {
        PyErr_SetString(PyExc_TypeError, "call(f, site, *args, **kw)");
        return NULL;
    }
    PyObject *f = a[0];
    int vars_of = 0;
    Py_ssize_t n = nargs - 2 + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
    if (hooks_ex) {
        if (!recv_done && record_callee(f, a[1], 0) < 0) return NULL;
        if (registers_finalizer(f) && n >= 2 && nargs >= 3) {
            id_slot *sl = id_find(a[2]); /* named by record_callee/record_args */
            if (!sl) {
                uint64_t cid;
                bool stable, fresh;
                if (canon(a[2], &cid, &stable, &fresh) < 0) return NULL;
                sl = id_find(a[2]);
            }
            if (sl) sl->finalized = true;
        }
        if (observes_deaths(f)) { /* r(): is the referent still alive? */
            uint32_t site;
            if ((keep_len && cs_hooks_sweep() < 0) || site_of(a[1], &site) < 0 ||
                liveness_read(site) < 0)
                return NULL;
        }
        if (is_builtin_named(f, "vars")) {
            if (n == 0) { /* the caller's locals */
                if (record_barrier(KIND_WRITE, a[1]) < 0) return NULL;
            } else {
                vars_of = nargs == 3;
            }
        }
        if (record_args(f, a + 2, n, a[1]) < 0) return NULL;
        /* getattr(obj, name[, default]) / hasattr(obj, name): the attribute, on the
         * instance (read whole by record_args) and on its classes */
        if (nargs >= 4 && !kwnames && PyUnicode_Check(a[3]) &&
            (is_builtin_named(f, "getattr") || is_builtin_named(f, "hasattr")) &&
            (record_class_reads(a[2], a[3], a[1]) < 0 ||
             record_attr_code(a[2], a[3], AT_GET, a[1]) < 0))
            return NULL;
        if (vars_of && !immutable_value(a[2]) &&
            record(holder_of(a[2]), CS_KEY_WHOLE, KIND_WRITE, a[1], NULL, NULL) < 0)
            return NULL;
    }
    PyObject *r = NULL;
    int done = 0;
    if (hooks_ex) r = call_iterating_in_order(f, a + 2, nargs - 2, n, kwnames, &done);
    if (!done) r = PyObject_Vectorcall(f, a + 2, (size_t)(nargs - 2), kwnames);
    if (r && vars_of && hooks_ex && add_alias(r, a[2]) < 0) Py_CLEAR(r);
    if (r && hooks_ex) {
        /* anext(agen), agen.asend kept in a variable...: see awaitproxy */
        PyObject *agen = resumed_agen(f, a + 2, nargs - 2);
        if (agen) r = resume_proxy(r, agen, a[1]);
    }
    return r;
}

/* call(f, site, *args, **kw) -> f(*args, **kw), for a call of code that may
 * not be instrumented: the callee's own state (record_callee) and the mutable
 * arguments (read or written according to arg_effect(f)) are recorded.  No
 * Python frame is added, so frame-dependent callees, tracebacks and error
 * messages are unchanged. */
static PyObject *h_call(PyObject *Py_UNUSED(m), PyObject *const *a, size_t nargsf, PyObject *kwnames) {
    return call_common(a, nargsf, kwnames, 0);
}

/* callm(f, site, *args, **kw): as call, for f returned by cm (which recorded
 * the receiver and the callee already). */
static PyObject *h_callm(PyObject *Py_UNUSED(m), PyObject *const *a, size_t nargsf, PyObject *kwnames) {
    return call_common(a, nargsf, kwnames, 1);
}

/* bar(f, site) -> f: f is about to run arbitrary code or expose a namespace
 * (exec, eval, compile, globals, locals, __import__, breakpoint called by
 * name): the global barrier, a write of everything. */
static PyObject *h_bar(PyObject *Py_UNUSED(m), PyObject *const *a, Py_ssize_t nargs) {
    NARGS(2, "bar");
    if (hooks_ex && record_barrier(KIND_WRITE, a[1]) < 0) return NULL;
    return Py_NewRef(a[0]);
}

/* ---- calls with `*args` / `**kw`.  They stay the interpreter's own calls
 * (so that a malformed `*` / `**` argument raises the very message naming
 * the callee); the callee is recorded by fx, and every argument is handed to
 * a callee whose effect is not known where the argument is evaluated: each is
 * recorded as written (W_ARG, write), an over-approximation when the callee
 * turns out to record for itself. */

/* fx(f, site) -> f: what calling f does to its own state (record_callee). */
static PyObject *h_fx(PyObject *Py_UNUSED(m), PyObject *const *a, Py_ssize_t nargs) {
    NARGS(2, "fx");
    if (hooks_ex && record_callee(a[0], a[1], 0) < 0) return NULL;
    return Py_NewRef(a[0]);
}

/* aw(x, site) -> x: a plain argument of a starred call, written. */
static PyObject *h_aw(PyObject *Py_UNUSED(m), PyObject *const *a, Py_ssize_t nargs) {
    NARGS(2, "aw");
    if (hooks_ex && walk(a[0], W_ARG, KIND_WRITE, a[1]) < 0) return NULL;
    return Py_NewRef(a[0]);
}

/* sw(x, site) -> the items of x as a tuple, for `f(*x)`: x is iterated here,
 * where the interpreter would iterate it (so a generator runs at the same
 * point), and each item is written.  A non-iterable x is returned as is: the
 * interpreter raises its own error. */
static PyObject *h_sw(PyObject *Py_UNUSED(m), PyObject *const *a, Py_ssize_t nargs) {
    NARGS(2, "sw");
    PyObject *x = a[0];
    PyTypeObject *t = Py_TYPE(x);
    if (!hooks_ex || (!t->tp_iter && !PySequence_Check(x))) return Py_NewRef(x);
    if (record_iterated(x, a[1]) < 0) return NULL;
    PyObject *items = PySequence_Tuple(x);
    if (items && walk(items, W_ARG, KIND_WRITE, a[1]) < 0) Py_CLEAR(items);
    return items;
}

/* kw(m, site) -> m, for `f(**m)`: the mapping read, its values written. */
static PyObject *h_kw(PyObject *Py_UNUSED(m), PyObject *const *a, Py_ssize_t nargs) {
    NARGS(2, "kw");
    PyObject *x = a[0];
    if (hooks_ex && !immutable_value(x)) {
        if (record(holder_of(x), CS_KEY_WHOLE, KIND_READ, a[1], NULL, NULL) < 0) return NULL;
        if (PyDict_Check(x)) {
            Py_ssize_t pos = 0;
            PyObject *k, *v;
            while (PyDict_Next(x, &pos, &k, &v))
                if (walk(v, W_ARG, KIND_WRITE, a[1]) < 0) return NULL;
        }
    }
    return Py_NewRef(x);
}

static PyObject *cx_exit_maker; /* set_cx_exit_maker's callable, or NULL */

/* cx(x, site[, protocol]) -> x: x is entered by `with` (protocol 0) or
 * `async with` (1).  Its __enter__ / __exit__ (or async twins) act on it:
 * when they are not instrumented, a write of x whole, at the entry and again
 * at the exit, which runs in a later step when the body awaits (an anyio
 * Lock released there is what the next acquirer reads): with a protocol, the
 * result is the maker's proxy of x, whose exit calls cx(x, site) (no
 * protocol: the record only).  asyncio's own primitives (classes of asyncio
 * modules) are recorded by capture/sync.py as lock operations and skipped. */
static PyObject *h_cx(PyObject *Py_UNUSED(m), PyObject *const *a, Py_ssize_t nargs) {
    if (nargs != 2 && nargs != 3) {
        PyErr_Format(PyExc_TypeError, "cx() takes 2 or 3 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *x = a[0];
    if (!hooks_ex || immutable_value(x)) return Py_NewRef(x);
    PyTypeObject *t = Py_TYPE(x);
    int opaque = 1;
    if (t->tp_flags & Py_TPFLAGS_HEAPTYPE) {
        PyObject *mod = t->tp_dict ? PyDict_GetItemString(t->tp_dict, "__module__") : NULL;
        const char *ms = mod && PyUnicode_Check(mod) ? PyUnicode_AsUTF8(mod) : NULL;
        if (ms && strncmp(ms, "asyncio.", 8) == 0) return Py_NewRef(x);
        PyErr_Clear();
        static const char *names[] = {"__enter__", "__exit__", "__aenter__", "__aexit__", NULL};
        opaque = 0;
        for (const char **n = names; *n; n++)
            if (dunder_kind(t, *n) == 1) opaque = 1;
    }
    if (!opaque) return Py_NewRef(x);
    if (record(holder_of(x), CS_KEY_WHOLE, KIND_WRITE, a[1], NULL, NULL) < 0) return NULL;
    if (nargs == 3 && cx_exit_maker)
        return PyObject_CallFunctionObjArgs(cx_exit_maker, x, a[1], a[2], NULL);
    return Py_NewRef(x);
}

/* set_cx_exit_maker(f): f(x, site, protocol) -> what `with` enters instead of
 * x, a proxy whose exit records (cx). */
static PyObject *h_set_cx_exit_maker(PyObject *Py_UNUSED(m), PyObject *arg) {
    if (!PyCallable_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "expected a callable");
        return NULL;
    }
    Py_XSETREF(cx_exit_maker, Py_NewRef(arg));
    Py_RETURN_NONE;
}

/* ------------------------------------------------ protocol reads */

/* tt(x, site) -> x: x is tested for truth (if, while, not, and, or, assert,
 * a conditional expression, bool(), len()): a read of what __bool__ /
 * __len__ read (W_TRUTH). */
static PyObject *h_tt(PyObject *Py_UNUSED(m), PyObject *const *a, Py_ssize_t nargs) {
    NARGS(2, "tt");
    if (hooks_ex && walk(a[0], W_TRUTH, KIND_READ, a[1]) < 0) return NULL;
    return Py_NewRef(a[0]);
}

/* rv(x, site) -> x: x is read as a value (compared in a chain, formatted by
 * an f-string, str(), repr(), format(), hash()): W_VALUE. */
static PyObject *h_rv(PyObject *Py_UNUSED(m), PyObject *const *a, Py_ssize_t nargs) {
    NARGS(2, "rv");
    if (hooks_ex && walk(a[0], W_VALUE, KIND_READ, a[1]) < 0) return NULL;
    return Py_NewRef(a[0]);
}

/* ra(x, site) -> x: x read as by code that does not record itself (a match
 * subject, whose patterns read its attributes and items): W_ARG, read. */
static PyObject *h_ra(PyObject *Py_UNUSED(m), PyObject *const *a, Py_ssize_t nargs) {
    NARGS(2, "ra");
    if (hooks_ex && walk(a[0], W_ARG, KIND_READ, a[1]) < 0) return NULL;
    return Py_NewRef(a[0]);
}

/* itv(x, site) -> x: x is iterated at once by a builtin that also compares
 * or hashes its elements (sorted, min, max, sum, set, frozenset, dict):
 * iterated (record_iterated) and read as a value. */
static PyObject *h_itv(PyObject *Py_UNUSED(m), PyObject *const *a, Py_ssize_t nargs) {
    NARGS(2, "itv");
    if (hooks_ex && (record_iterated(a[0], a[1]) < 0 || walk(a[0], W_VALUE, KIND_READ, a[1]) < 0))
        return NULL;
    return Py_NewRef(a[0]);
}

/* Operator codes shared with instrument.py (_BINOPS / _CMPOPS). */
static PyObject *binary_op(int op, PyObject *x, PyObject *y, int inplace) {
    switch (op) {
    case 0: return inplace ? PyNumber_InPlaceAdd(x, y) : PyNumber_Add(x, y);
    case 1: return inplace ? PyNumber_InPlaceSubtract(x, y) : PyNumber_Subtract(x, y);
    case 2: return inplace ? PyNumber_InPlaceMultiply(x, y) : PyNumber_Multiply(x, y);
    case 3: return inplace ? PyNumber_InPlaceMatrixMultiply(x, y) : PyNumber_MatrixMultiply(x, y);
    case 4: return inplace ? PyNumber_InPlaceTrueDivide(x, y) : PyNumber_TrueDivide(x, y);
    case 5: return inplace ? PyNumber_InPlaceFloorDivide(x, y) : PyNumber_FloorDivide(x, y);
    case 6: return inplace ? PyNumber_InPlaceRemainder(x, y) : PyNumber_Remainder(x, y);
    case 7: return inplace ? PyNumber_InPlacePower(x, y, Py_None) : PyNumber_Power(x, y, Py_None);
    case 8: return inplace ? PyNumber_InPlaceLshift(x, y) : PyNumber_Lshift(x, y);
    case 9: return inplace ? PyNumber_InPlaceRshift(x, y) : PyNumber_Rshift(x, y);
    case 10: return inplace ? PyNumber_InPlaceOr(x, y) : PyNumber_Or(x, y);
    case 11: return inplace ? PyNumber_InPlaceXor(x, y) : PyNumber_Xor(x, y);
    case 12: return inplace ? PyNumber_InPlaceAnd(x, y) : PyNumber_And(x, y);
    default:
        if (!inplace && op >= 20 && op <= 25) return PyObject_RichCompare(x, y, op - 20);
        PyErr_Format(PyExc_SystemError, "bad operator code %d", op);
        return NULL;
    }
}

static int op_code(PyObject *o, int *op) {
    long v = PyLong_AsLong(o);
    if (v == -1 && PyErr_Occurred()) return -1;
    *op = (int)v;
    return 0;
}

/* bop(x, y, op, site) -> x <op> y, for a binary operator (0-12) or a single
 * comparison (20 + Py_LT...Py_GE): both operands are read as values
 * (elements compared, dataclass fields read by a generated __eq__...). */
static PyObject *h_bop(PyObject *Py_UNUSED(m), PyObject *const *a, Py_ssize_t nargs) {
    NARGS(4, "bop");
    int op;
    if (op_code(a[2], &op) < 0) return NULL;
    if (hooks_ex && (walk(a[0], W_VALUE, KIND_READ, a[3]) < 0 ||
                     walk(a[1], W_VALUE, KIND_READ, a[3]) < 0))
        return NULL;
    return binary_op(op, a[0], a[1], 0);
}

/* aug(x, y, op, site) -> x <op>= y (the in-place operator; the caller stores
 * the result): x is mutated in place when its type supports it, so a mutable
 * x is written whole; y is read as a value. */
static PyObject *h_aug(PyObject *Py_UNUSED(m), PyObject *const *a, Py_ssize_t nargs) {
    NARGS(4, "aug");
    int op;
    if (op_code(a[2], &op) < 0) return NULL;
    if (hooks_ex) {
        PyObject *x = a[0];
        PyTypeObject *t = Py_TYPE(x);
        if (!immutable_value(x) && t != &PyTuple_Type && t != &PyFrozenSet_Type &&
            record(holder_of(x), CS_KEY_WHOLE, KIND_WRITE, a[3], NULL, NULL) < 0)
            return NULL;
        if (walk(a[1], W_VALUE, KIND_READ, a[3]) < 0) return NULL;
    }
    return binary_op(op, a[0], a[1], 1);
}

/* ------------------------------------------------ lazy iteration */

/* An iterator proxy: the iterator of a for loop, a comprehension or a lazy
 * builtin (enumerate, zip, map, filter, iter) over `src`.  Every next()
 * first records the access of src -- a read of a container (a dict view: its
 * dict), a write of an iterator or generator (consumed) -- in whichever step
 * it happens, once per step (last_ev), then advances.  With `unpack`, each
 * item that is not an exact tuple is recorded as iterated (the loop target
 * unpacks it). */
typedef struct {
    PyObject_HEAD
    PyObject *it;
    PyObject *src;
    PyObject *site;
    int kind;
    int unpack;
    size_t last_ev;
    uint64_t gen;
} iterproxy;

static int proxy_touch(PyObject *src, int kind, PyObject *site, size_t *last_ev,
                       uint64_t *gen) {
    if (!hooks_ex || !src) return 0;
    size_t ev = cs_trace_length(hooks_ex);
    if (ev == *last_ev && *gen == hooks_gen) return 0;
    if (record(holder_of(src), CS_KEY_WHOLE, kind, site, NULL, NULL) < 0) return -1;
    *last_ev = ev;
    *gen = hooks_gen;
    return 0;
}

static void ip_dealloc(iterproxy *p) {
    Py_XDECREF(p->it);
    Py_XDECREF(p->src);
    Py_XDECREF(p->site);
    PyObject_Free(p);
}

static PyObject *ip_next(iterproxy *p) {
    if (proxy_touch(p->src, p->kind, p->site, &p->last_ev, &p->gen) < 0) return NULL;
    PyObject *item = Py_TYPE(p->it)->tp_iternext(p->it);
    if (item && p->unpack && hooks_ex && record_iterated(item, p->site) < 0) Py_CLEAR(item);
    return item;
}

static PyObject *ip_length_hint(iterproxy *p, PyObject *Py_UNUSED(unused)) {
    Py_ssize_t n = PyObject_LengthHint(p->it, 0);
    if (n < 0) return NULL;
    return PyLong_FromSsize_t(n);
}

static PyMethodDef ip_methods[] = {
    {"__length_hint__", (PyCFunction)ip_length_hint, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject IterProxy_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "chaossloth._core.iterproxy",
    .tp_basicsize = sizeof(iterproxy),
    .tp_dealloc = (destructor)ip_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)ip_next,
    .tp_methods = ip_methods,
};

/* A set of objects hashed by identity iterates in an order of addresses, which
 * differs between executions of one schedule (the allocator's history does):
 * a loop over a set of clients that starts a task per client would start them
 * in another order each time.  Any order is one a set may iterate in, so a
 * loop over a set (or frozenset) whose items all hash by identity (object's
 * hash: instances of classes that do not define __hash__, functions) walks
 * them in the order of their canonical ids, which follow the schedule.  As
 * the set's own iterator does, it raises RuntimeError when the set changes
 * size during the loop. */
typedef struct {
    PyObject_HEAD
    PyObject *set;   /* the set iterated */
    PyObject *items; /* a list, sorted by canonical id */
    Py_ssize_t next, size;
} setorder;

static void so_dealloc(setorder *o) {
    Py_XDECREF(o->set);
    Py_XDECREF(o->items);
    PyObject_Free(o);
}

static PyObject *so_next(setorder *o) {
    if (!o->items) return NULL;
    if (PySet_GET_SIZE(o->set) != o->size) {
        Py_CLEAR(o->items);
        PyErr_SetString(PyExc_RuntimeError, "Set changed size during iteration");
        return NULL;
    }
    if (o->next >= PyList_GET_SIZE(o->items)) {
        Py_CLEAR(o->items);
        return NULL;
    }
    return Py_NewRef(PyList_GET_ITEM(o->items, o->next++));
}

static PyTypeObject SetOrder_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "chaossloth._core.setorder",
    .tp_basicsize = sizeof(setorder),
    .tp_dealloc = (destructor)so_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)so_next,
};

typedef struct {
    uint64_t cid;
    PyObject *item; /* borrowed from the list */
} ranked;

static int ranked_cmp(const void *x, const void *y) {
    uint64_t a = ((const ranked *)x)->cid, b = ((const ranked *)y)->cid;
    return a < b ? -1 : a > b;
}

/* An iterator of the set x in canonical-id order (see setorder), NULL with
 * *none = 1 when x is not such a set (an item with a hash of its own), or
 * NULL with an exception. */
static PyObject *set_in_order(PyObject *x, int *none) {
    *none = 1;
    Py_ssize_t n = PySet_GET_SIZE(x);
    if (n < 2) return NULL;
    /* the items not named yet are named in set_items_ordered's order, not
     * the set's (addresses) */
    PyObject *items = set_items_ordered(x);
    if (!items) {
        *none = 0;
        return NULL;
    }
    n = PyList_GET_SIZE(items);
    for (Py_ssize_t i = 0; i < n; i++)
        if (Py_TYPE(PyList_GET_ITEM(items, i))->tp_hash != PyBaseObject_Type.tp_hash) {
            Py_DECREF(items);
            return NULL;
        }
    *none = 0;
    ranked *r = PyMem_Malloc((size_t)n * sizeof *r);
    if (!r) {
        Py_DECREF(items);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        bool stable, fresh;
        r[i].item = PyList_GET_ITEM(items, i);
        if (canon(r[i].item, &r[i].cid, &stable, &fresh) < 0) {
            PyMem_Free(r);
            Py_DECREF(items);
            return NULL;
        }
    }
    qsort(r, (size_t)n, sizeof *r, ranked_cmp);
    PyObject *sorted = PyList_New(n);
    if (sorted)
        for (Py_ssize_t i = 0; i < n; i++) PyList_SET_ITEM(sorted, i, Py_NewRef(r[i].item));
    PyMem_Free(r);
    Py_DECREF(items);
    if (!sorted) return NULL;
    setorder *o = PyObject_New(setorder, &SetOrder_Type);
    if (!o) {
        Py_DECREF(sorted);
        return NULL;
    }
    o->set = Py_NewRef(x);
    o->items = sorted;
    o->next = 0;
    o->size = n;
    return (PyObject *)o;
}

/* set.pop() removes the item the set's iteration would give first: of a set
 * of objects hashed by identity, an order of addresses again.  A call
 * s.pop() in instrumented code on such a set (exact type) pops the item of
 * the smallest canonical id instead; a set with an item of its own hash pops
 * as set.pop does. */
static PyObject *ordered_pop(PyObject *set, PyObject *Py_UNUSED(unused)) {
    int none;
    PyObject *it = set_in_order(set, &none);
    if (!it) return none ? PySet_Pop(set) : NULL;
    PyObject *first = so_next((setorder *)it);
    Py_DECREF(it);
    if (!first) return NULL;
    if (PySet_Discard(set, first) < 0) Py_CLEAR(first);
    return first;
}

static PyMethodDef ordered_pop_def = {"pop", ordered_pop, METH_NOARGS,
                                      "Remove and return the set's first item (canonical order)."};

/* fi(x, site, mode) -> an iterator of x: see iterproxy (mode 1: unpack the
 * items; mode 2: x is the argument of iter()).  x is returned
 * as is when nothing is to be recorded (no explorer, an immutable iterable
 * whose items are recorded where they are used, an object that is not
 * iterable: the interpreter raises its own error). */
static PyObject *h_fi(PyObject *Py_UNUSED(m), PyObject *const *a, Py_ssize_t nargs) {
    NARGS(3, "fi");
    PyObject *x = a[0];
    PyTypeObject *t = Py_TYPE(x);
    long mode = PyLong_AsLong(a[2]); /* 0, 1: unpack items, 2: the argument of iter() */
    if (mode == -1 && PyErr_Occurred()) return NULL;
    int unpack = mode == 1;
    PyObject *it = NULL;
    if (hooks_ex && (t == &PySet_Type || t == &PyFrozenSet_Type)) {
        int none;
        it = set_in_order(x, &none);
        if (!it && !none) return NULL;
        if (it && t == &PyFrozenSet_Type && !unpack) return it; /* immutable: nothing to record */
    }
    if (!it && (!hooks_ex || Py_IS_TYPE(x, &IterProxy_Type) ||
                ((immutable_value(x) || t == &PyTuple_Type || t == &PyFrozenSet_Type) && !unpack) ||
                (!t->tp_iter && !PySequence_Check(x))))
        return Py_NewRef(x);
    if (!it && !(it = PyObject_GetIter(x))) return NULL;
    /* iter(an iterator) is that iterator (a generator keeps send()): its
     * consumption is recorded where it is consumed */
    if (Py_IS_TYPE(it, &IterProxy_Type) || (mode == 2 && it == x)) return it;
    iterproxy *p = PyObject_New(iterproxy, &IterProxy_Type);
    if (!p) {
        Py_DECREF(it);
        return NULL;
    }
    PyObject *src = view_base(x);
    int kind;
    if (immutable_value(x) || t == &PyTuple_Type || t == &PyFrozenSet_Type) {
        src = NULL;
        kind = KIND_READ;
    } else if (it == x) {
        kind = KIND_WRITE; /* an iterator or generator: consumed */
    } else {
        kind = KIND_READ;
    }
    p->it = it;
    p->src = Py_XNewRef(src);
    p->site = Py_NewRef(a[1]);
    p->kind = kind;
    p->unpack = unpack;
    p->last_ev = (size_t)-1;
    p->gen = hooks_gen;
    return (PyObject *)p;
}

/* rev(x, site) -> reversed(x) as an iterproxy reading x at every next():
 * reversed() needs the sequence itself, so the proxy goes around its
 * result. */
static PyObject *h_rev(PyObject *Py_UNUSED(m), PyObject *const *a, Py_ssize_t nargs) {
    NARGS(2, "rev");
    PyObject *x = a[0];
    PyObject *r = PyObject_CallOneArg((PyObject *)&PyReversed_Type, x);
    if (!r || !hooks_ex || !Py_TYPE(r)->tp_iternext) return r;
    iterproxy *p = PyObject_New(iterproxy, &IterProxy_Type);
    if (!p) {
        Py_DECREF(r);
        return NULL;
    }
    PyTypeObject *t = Py_TYPE(x);
    int immutable = immutable_value(x) || t == &PyTuple_Type;
    p->it = r;
    p->src = immutable ? NULL : Py_NewRef(view_base(x));
    p->site = Py_NewRef(a[1]);
    p->kind = KIND_READ;
    p->unpack = 0;
    p->last_ev = (size_t)-1;
    p->gen = hooks_gen;
    return (PyObject *)p;
}

/* The async twin: `async for` / async comprehensions.  Every __anext__ is a
 * write of the async iterator (two consumers of one async generator race on
 * it) and, when the iterable is another object, a read of it. */
typedef struct {
    PyObject_HEAD
    PyObject *it;
    PyObject *src; /* NULL: src is it */
    PyObject *site;
    size_t last_ev, last_ev_src;
    uint64_t gen, gen_src;
} aiterproxy;

static void aip_dealloc(aiterproxy *p) {
    Py_XDECREF(p->it);
    Py_XDECREF(p->src);
    Py_XDECREF(p->site);
    PyObject_Free(p);
}

static PyObject *aip_aiter(PyObject *p) { return Py_NewRef(p); }

static PyObject *aip_anext(aiterproxy *p) {
    if (proxy_touch(p->it, KIND_WRITE, p->site, &p->last_ev, &p->gen) < 0) return NULL;
    if (proxy_touch(p->src, KIND_READ, p->site, &p->last_ev_src, &p->gen_src) < 0) return NULL;
    PyTypeObject *t = Py_TYPE(p->it);
    if (PyAsyncGen_CheckExact(p->it)) /* see awaitproxy */
        return resume_proxy(t->tp_as_async->am_anext(p->it), p->it, p->site);
    if (t->tp_as_async && t->tp_as_async->am_anext) return t->tp_as_async->am_anext(p->it);
    return PyObject_CallMethod(p->it, "__anext__", NULL);
}

static PyAsyncMethods aip_async = {
    .am_aiter = aip_aiter,
    .am_anext = (unaryfunc)aip_anext,
};

static PyTypeObject AIterProxy_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "chaossloth._core.aiterproxy",
    .tp_basicsize = sizeof(aiterproxy),
    .tp_dealloc = (destructor)aip_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_as_async = &aip_async,
};

/* afi(x, site) -> an async iterator of x (see aiterproxy), or x as is when
 * there is nothing to record or x has no __aiter__ (the interpreter raises). */
static PyObject *h_afi(PyObject *Py_UNUSED(m), PyObject *const *a, Py_ssize_t nargs) {
    NARGS(2, "afi");
    PyObject *x = a[0];
    PyTypeObject *t = Py_TYPE(x);
    if (!hooks_ex || Py_IS_TYPE(x, &AIterProxy_Type) || !t->tp_as_async ||
        !t->tp_as_async->am_aiter)
        return Py_NewRef(x);
    PyObject *it = t->tp_as_async->am_aiter(x);
    if (!it) return NULL;
    PyTypeObject *it_t = Py_TYPE(it);
    if (!it_t->tp_as_async || !it_t->tp_as_async->am_anext) {
        PyErr_Format(PyExc_TypeError,
                     "'async for' received an object from __aiter__ that does not implement "
                     "__anext__: %.100s",
                     it_t->tp_name);
        Py_DECREF(it);
        return NULL;
    }
    aiterproxy *p = PyObject_New(aiterproxy, &AIterProxy_Type);
    if (!p) {
        Py_DECREF(it);
        return NULL;
    }
    p->it = it;
    p->src = it == x ? NULL : Py_NewRef(x);
    p->site = Py_NewRef(a[1]);
    p->last_ev = p->last_ev_src = (size_t)-1;
    p->gen = p->gen_src = hooks_gen;
    return (PyObject *)p;
}

/* A callable proxy: the function given to map() / filter(), called lazily
 * at each next(): every call records what calling the function does
 * (record_callee, record_args) in the step that calls it. */
typedef struct {
    PyObject_HEAD
    PyObject *func;
    PyObject *site;
    vectorcallfunc vectorcall;
} callproxy;

static void cp_dealloc(callproxy *p) {
    Py_XDECREF(p->func);
    Py_XDECREF(p->site);
    PyObject_Free(p);
}

static PyObject *cp_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                               PyObject *kwnames) {
    callproxy *p = (callproxy *)self;
    if (hooks_ex) {
        Py_ssize_t n = PyVectorcall_NARGS(nargsf) + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
        if (record_callee(p->func, p->site, 0) < 0) return NULL;
        if (record_args(p->func, args, n, p->site) < 0) return NULL;
    }
    return PyObject_Vectorcall(p->func, args, nargsf, kwnames);
}

static PyTypeObject CallProxy_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "chaossloth._core.callproxy",
    .tp_basicsize = sizeof(callproxy),
    .tp_dealloc = (destructor)cp_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(callproxy, vectorcall),
};

/* fw(f, site) -> f, or a callproxy of f when calling f may act on state
 * (anything but None, a plain function or a class). */
static PyObject *h_fw(PyObject *Py_UNUSED(m), PyObject *const *a, Py_ssize_t nargs) {
    NARGS(2, "fw");
    PyObject *f = a[0];
    if (!hooks_ex || f == Py_None || PyFunction_Check(f) || PyType_Check(f) ||
        !PyCallable_Check(f))
        return Py_NewRef(f);
    callproxy *p = PyObject_New(callproxy, &CallProxy_Type);
    if (!p) return NULL;
    p->func = Py_NewRef(f);
    p->site = Py_NewRef(a[1]);
    p->vectorcall = cp_vectorcall;
    return (PyObject *)p;
}

/* ------------------------------------------------ notes of actors
 *
 * What a step starts -- a task of a coroutine, a callback -- is part of what
 * the step did, as its accesses are: DPOR compares both when it replays a
 * step after the same steps as in an earlier execution (cs_step_note), so
 * that a program that starts other work under the same schedule is reported
 * as nondeterministic instead of explored as if it were the same.  A note
 * must be equal for equal work in every execution, so it takes nothing that
 * differs between executions of a deterministic program: no address, no
 * str hash (randomized per process, and --jobs may use processes), no name
 * made from a process-wide counter or an address (asyncio's "Task-12",
 * a repr's "0x7f..."), no float (a wall-clock deadline handed to a task);
 * an object counts by its canonical id (equal in every
 * execution that names it the same way, see "canonical identities") or, not
 * named yet, by its type.  What it cannot tell apart it notes alike: a note
 * may miss a difference, never invent one. */

static uint64_t note_mix(uint64_t h, uint64_t v) { return mix64(h ^ mix64(v + 0x9e3779b97f4a7c15ULL)); }

static uint64_t bytes_note(const char *p, Py_ssize_t n) {
    uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */
    for (Py_ssize_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 0x100000001b3ULL;
    return h;
}

static uint64_t cstr_note(const char *p) { return p ? bytes_note(p, (Py_ssize_t)strlen(p)) : 0; }

/* Does the text hold something that differs between executions of the same
 * program: asyncio's default task name ("Task-" and digits: a process-wide
 * count) or an address ("0x" and at least 8 hex digits, as reprs print)? */
static bool volatile_text(const char *p, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i + 5 < n; i++)
        if (!memcmp(p + i, "Task-", 5) && p[i + 5] >= '0' && p[i + 5] <= '9') return true;
    for (Py_ssize_t i = 0; i + 2 < n; i++) {
        if (p[i] != '0' || p[i + 1] != 'x') continue;
        Py_ssize_t k = i + 2;
        while (k < n && isxdigit((unsigned char)p[k])) k++;
        if (k - (i + 2) >= 8) return true;
    }
    return false;
}

static uint64_t text_note(PyObject *s) {
    Py_ssize_t n;
    const char *p = PyUnicode_AsUTF8AndSize(s, &n);
    if (!p) {
        PyErr_Clear();
        return 0x737472ULL;
    }
    return volatile_text(p, n) ? 0x737472ULL : bytes_note(p, n);
}

/* The attribute names the notes look up, interned once. */
static PyObject *note_names[7];
enum { N_GET_CORO, N_CR_CODE, N_CR_FRAME, N_GI_CODE, N_GI_FRAME, N_QUALNAME, N_FIRSTLINE };

static PyObject *note_name(int which) {
    static const char *const text[] = {"get_coro", "cr_code",     "cr_frame",      "gi_code",
                                       "gi_frame", "co_qualname", "co_firstlineno"};
    if (!note_names[which]) note_names[which] = PyUnicode_InternFromString(text[which]);
    return note_names[which];
}

static PyObject *note_attr(PyObject *o, int which) {
    PyObject *name = note_name(which);
    return name ? PyObject_GetAttr(o, name) : NULL;
}

/* Code objects' notes, direct-mapped by address; an entry holds its code
 * object, so an address is never another code's while it is cached. */
#define CODE_NOTES 256
static struct {
    PyObject *code;
    uint64_t note;
} code_notes[CODE_NOTES];

/* A code object by where it is: its qualified name, file and first line. */
static uint64_t code_note(PyObject *code) {
    size_t slot = ptr_hash(code) & (CODE_NOTES - 1);
    if (code_notes[slot].code == code) return code_notes[slot].note;
    uint64_t h = text_note(cs_compat_code_filename(code));
    PyObject *qual = note_attr(code, N_QUALNAME);
    PyObject *line = qual ? note_attr(code, N_FIRSTLINE) : NULL;
    if (qual && PyUnicode_Check(qual)) h = note_mix(h, text_note(qual));
    if (line && PyLong_Check(line)) h = note_mix(h, (uint64_t)PyLong_AsLongLong(line));
    Py_XDECREF(qual);
    Py_XDECREF(line);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return h;
    }
    Py_XSETREF(code_notes[slot].code, Py_NewRef(code));
    code_notes[slot].note = h;
    return h;
}

static uint64_t value_note(PyObject *o, int depth);

/* A coroutine (or generator) by its code and the values its frame holds:
 * before it starts, its arguments. */
static uint64_t frame_holder_note(PyObject *o, int depth) {
    int coro = PyCoro_CheckExact(o);
    PyObject *code = note_attr(o, coro ? N_CR_CODE : N_GI_CODE);
    PyObject *frame = code ? note_attr(o, coro ? N_CR_FRAME : N_GI_FRAME) : NULL;
    uint64_t h = 0x636f726fULL;
    if (code && PyCode_Check(code)) h = note_mix(h, code_note(code));
    if (frame && PyFrame_Check(frame)) {
        /* the values in the order of the code's variables, the same every time (the
         * code fixes the names) */
        PyObject *locals = PyFrame_GetLocals((PyFrameObject *)frame);
        if (locals && PyDict_Check(locals)) {
            Py_ssize_t pos = 0, n = 0;
            PyObject *k, *v;
            while (n++ < 32 && PyDict_Next(locals, &pos, &k, &v))
                h = note_mix(h, value_note(v, depth + 1));
        } else if (locals) { /* 3.13: a proxy of the frame's variables */
            PyObject *items = PyMapping_Items(locals);
            for (Py_ssize_t i = 0; items && i < PyList_GET_SIZE(items) && i < 32; i++) {
                PyObject *kv = PyList_GET_ITEM(items, i);
                if (PyTuple_Check(kv) && PyTuple_GET_SIZE(kv) == 2)
                    h = note_mix(h, value_note(PyTuple_GET_ITEM(kv, 1), depth + 1));
            }
            Py_XDECREF(items);
        }
        Py_XDECREF(locals);
    }
    Py_XDECREF(frame);
    Py_XDECREF(code);
    PyErr_Clear();
    return h;
}

static uint64_t value_note(PyObject *o, int depth) {
    PyTypeObject *t = Py_TYPE(o);
    if (o == Py_None) return 0x4e6f6e65ULL;
    if (PyBool_Check(o)) return o == Py_True ? 0x74727565ULL : 0x66616c73ULL;
    if (t == &PyLong_Type) {
        Py_hash_t h = PyObject_Hash(o); /* ints hash the same in every process */
        if (h == -1) PyErr_Clear();
        return note_mix(0x696e74ULL, (uint64_t)h);
    }
    /* a float is noted by its type alone: a deadline or timestamp read from the wall clock
     * (time.monotonic() + ttl), which a program may hand to the work it starts without its
     * order depending on it, differs in every execution */
    if (t == &PyFloat_Type) return 0x666c74ULL;
    if (t == &PyUnicode_Type) return note_mix(0x737472ULL, text_note(o));
    if (t == &PyBytes_Type) {
        const char *p = PyBytes_AS_STRING(o);
        Py_ssize_t n = PyBytes_GET_SIZE(o);
        return note_mix(0x627974ULL, volatile_text(p, n) ? 0 : bytes_note(p, n));
    }
    if (depth > 3) return cstr_note(t->tp_name);
    if (t == &PyTuple_Type) {
        uint64_t h = note_mix(0x747570ULL, (uint64_t)PyTuple_GET_SIZE(o));
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(o) && i < 16; i++)
            h = note_mix(h, value_note(PyTuple_GET_ITEM(o, i), depth + 1));
        return h;
    }
    if (PyFunction_Check(o)) return note_mix(0x66756eULL, code_note(PyFunction_GET_CODE(o)));
    if (PyMethod_Check(o))
        return note_mix(value_note(PyMethod_GET_FUNCTION(o), depth + 1),
                        value_note(PyMethod_GET_SELF(o), depth + 1));
    if (PyCFunction_Check(o)) {
        PyObject *self = PyCFunction_GET_SELF(o);
        uint64_t h = note_mix(0x63666eULL, cstr_note(cs_compat_cfunction_name(o)));
        return self ? note_mix(h, value_note(self, depth + 1)) : h;
    }
    if (PyCoro_CheckExact(o) || PyGen_CheckExact(o)) return frame_holder_note(o, depth);
    id_slot *slot = id_find(holder_of(o));
    if (slot) return note_mix(0x636964ULL, slot->cid);
    return cstr_note(t->tp_name);
}

int cs_hooks_actor_note(PyObject *task, PyObject *callback, PyObject *args, uint64_t *out) {
    uint64_t h;
    if (task) {
        PyObject *name = note_name(N_GET_CORO);
        PyObject *coro = name ? PyObject_CallMethodNoArgs(task, name) : NULL;
        if (!coro) {
            PyErr_Clear();
            h = note_mix(0x7461736bULL, cstr_note(Py_TYPE(task)->tp_name));
        } else {
            h = note_mix(0x7461736bULL, value_note(coro, 0));
            Py_DECREF(coro);
        }
    } else {
        h = note_mix(0x63616c6cULL, callback ? value_note(callback, 0) : 0);
        if (args && PyTuple_Check(args)) h = note_mix(h, value_note(args, 0));
    }
    if (PyErr_Occurred()) return -1;
    *out = h;
    return 0;
}

/* ------------------------------------------------ driver-facing functions */

int cs_hooks_quiet_reads;

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
    if (cs_hooks_quiet_reads && kind == CS_READ) Py_RETURN_NONE;
    long base = kind & CS_KIND_MASK;
    if (base < CS_READ || base > CS_ADD || (kind & ~(long)(CS_KIND_MASK | CS_ID_CREATED))) {
        PyErr_SetString(PyExc_ValueError,
                        "kind must be READ, WRITE, LOCK_ACQUIRE, LOCK_RELEASE or ADD, "
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

/* set_library_site_maker(f): f(filename, line, qualname, module) -> the site
 * id of a library coroutine's frame resumed at filename:line. */
static PyObject *h_set_library_site_maker(PyObject *Py_UNUSED(m), PyObject *arg) {
    if (!PyCallable_Check(arg)) {
        PyErr_SetString(PyExc_TypeError, "expected a callable");
        return NULL;
    }
    Py_XSETREF(library_site_maker, Py_NewRef(arg));
    Py_CLEAR(library_sites);
    Py_RETURN_NONE;
}

/* set_task_sites(step, complete): the site ids of the loop core's task accesses. */
static PyObject *h_set_task_sites(PyObject *Py_UNUSED(m), PyObject *const *a, Py_ssize_t nargs) {
    if (nargs != 2 || !PyLong_Check(a[0]) || !PyLong_Check(a[1])) {
        PyErr_SetString(PyExc_TypeError, "set_task_sites(step: int, complete: int)");
        return NULL;
    }
    Py_XSETREF(task_step_site, Py_NewRef(a[0]));
    Py_XSETREF(task_complete_site, Py_NewRef(a[1]));
    Py_RETURN_NONE;
}

/* set_future_keys(state, callbacks): the attribute names (str) of a future's state, the
 * state key proper first, and of its callbacks. */
static PyObject *h_set_future_keys(PyObject *Py_UNUSED(m), PyObject *const *a,
                                   Py_ssize_t nargs) {
    if (nargs != 2 || !PyTuple_Check(a[0]) || PyTuple_GET_SIZE(a[0]) == 0 ||
        !PyUnicode_Check(a[1])) {
        PyErr_SetString(PyExc_TypeError,
                        "set_future_keys(state: tuple[str, ...] (not empty), callbacks: str)");
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(a[0]);
    uint64_t *keys = PyMem_Calloc((size_t)n, sizeof *keys);
    if (!keys) return PyErr_NoMemory();
    uint64_t cb;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (name_hash(PyTuple_GET_ITEM(a[0], i), &keys[i]) < 0) goto fail;
    }
    if (name_hash(a[1], &cb) < 0) goto fail;
    PyMem_Free(state_keys);
    state_keys = keys;
    n_state_keys = (size_t)n;
    callbacks_key = cb;
    Py_RETURN_NONE;
fail:
    PyMem_Free(keys);
    return NULL;
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

/* hooks_keeper_young(): re-tracks the keeper, which puts it in the youngest
 * generation.  The runner freezes the collector at the start of every
 * execution (collector.py): a frozen keeper would be an outside reference to
 * everything keep[] holds, so no collection of the execution could reclaim a
 * cycle through a held container.  Young again, every collection looks
 * through keep[] (the keeper's one reference is its own: never a root). */
static PyObject *h_keeper_young(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(unused)) {
    if (keeper && PyObject_GC_IsTracked(keeper)) {
        PyObject_GC_UnTrack(keeper);
        PyObject_GC_Track(keeper);
    }
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

/* set_modelled_code(dirs, exceptions): the directories (tuples of str, each
 * ending with a separator) whose code's environment is modelled, not walked
 * (see "the environment of code that does not record itself"), and the
 * directories inside them that are not (site-packages).  Summaries made
 * before are dropped. */
static PyObject *h_set_modelled_code(PyObject *Py_UNUSED(m), PyObject *const *a,
                                     Py_ssize_t nargs) {
    NARGS(2, "set_modelled_code");
    for (int i = 0; i < 2; i++) {
        if (!PyTuple_Check(a[i])) {
            PyErr_SetString(PyExc_TypeError, "expected two tuples of str");
            return NULL;
        }
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(a[i]); j++)
            if (!PyUnicode_Check(PyTuple_GET_ITEM(a[i], j))) {
                PyErr_SetString(PyExc_TypeError, "expected two tuples of str");
                return NULL;
            }
    }
    Py_XSETREF(modelled_dirs, Py_NewRef(a[0]));
    Py_XSETREF(unmodelled_dirs, Py_NewRef(a[1]));
    for (size_t i = 0; i < ENV_SUMMARIES; i++) {
        Py_CLEAR(env_summaries[i].code);
        Py_CLEAR(env_summaries[i].summary);
    }
    Py_RETURN_NONE;
}

/* set_self_recording(functions, classes): the functions that record their
 * own accesses (a set) and the classes they belong to (a tuple), or
 * (None, None). */
static PyObject *h_set_self_recording(PyObject *Py_UNUSED(m), PyObject *const *a,
                                      Py_ssize_t nargs) {
    NARGS(2, "set_self_recording");
    if ((a[0] != Py_None && !PyAnySet_Check(a[0])) || (a[1] != Py_None && !PyTuple_Check(a[1]))) {
        PyErr_SetString(PyExc_TypeError, "expected a set and a tuple, or None and None");
        return NULL;
    }
    Py_XSETREF(self_recording, a[0] == Py_None ? NULL : Py_NewRef(a[0]));
    Py_XSETREF(self_recording_types, a[1] == Py_None ? NULL : Py_NewRef(a[1]));
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
    hooks_thread = PyThread_get_thread_ident();
}

/* hooks_thread_accesses(): the writes other threads made since the last call (note_thread),
 * and the count starts again. */
static PyObject *h_thread_accesses(PyObject *Py_UNUSED(m), PyObject *Py_UNUSED(unused)) {
    uint64_t n = n_thread_accesses;
    n_thread_accesses = 0;
    return PyLong_FromUnsignedLongLong(n);
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
    FAST("tt", h_tt, "tt(x, site) -> x: a truth test of x."),
    FAST("rv", h_rv, "rv(x, site) -> x: x read as a value (deep)."),
    FAST("bop", h_bop, "bop(x, y, op, site) -> x <op> y, operands read as values."),
    FAST("aug", h_aug, "aug(x, y, op, site) -> x <op>= y, x written."),
    FAST("cx", h_cx, "cx(x, site[, protocol]) -> x: entered by with; opaque enter/exit write it."),
    FAST("rev", h_rev, "rev(x, site) -> reversed(x), x read at every next()."),
    FAST("fx", h_fx, "fx(f, site) -> f: the callee of a starred call."),
    FAST("aw", h_aw, "aw(x, site) -> x: an argument of a starred call, written."),
    FAST("sw", h_sw, "sw(x, site) -> tuple(x): `*x` of a call, items written."),
    FAST("kw", h_kw, "kw(m, site) -> m: `**m` of a call, values written."),
    FAST("ra", h_ra, "ra(x, site) -> x: x read whole and deep."),
    FAST("itv", h_itv, "itv(x, site) -> x: iterated, elements read as values."),
    FAST("fi", h_fi, "fi(x, site, mode) -> iterator recording each next()."),
    FAST("afi", h_afi, "afi(x, site) -> async iterator recording each __anext__."),
    FAST("fw", h_fw, "fw(f, site) -> f or a proxy recording each call of f."),
    FAST("bar", h_bar, "bar(f, site) -> f: the global barrier (a write of everything)."),
    {"callm", (PyCFunction)(void (*)(void))h_callm, METH_FASTCALL | METH_KEYWORDS,
     "callm(f, site, *args, **kw) -> f(*args, **kw); f from cm, arguments recorded."},
    FAST("new", h_new, "new(value, site) -> value: a fresh object created by the open step."),
    {"call", (PyCFunction)(void (*)(void))h_call, METH_FASTCALL | METH_KEYWORDS,
     "call(f, site, *args, **kw) -> f(*args, **kw); mutable arguments recorded per callee."},
    {"newcall", (PyCFunction)(void (*)(void))h_newcall, METH_FASTCALL | METH_KEYWORDS,
     "newcall(f, site, *args, **kw) -> f(*args, **kw); a fresh result is recorded as created."},
    FAST("record", h_record, "record(obj, kind, site=0, key=None): record an access."),
    {"set_cx_exit_maker", h_set_cx_exit_maker, METH_O,
     "set_cx_exit_maker(f): f(x, site, protocol) -> the proxy `with` enters for x."},
    {"set_library_site_maker", h_set_library_site_maker, METH_O,
     "set_library_site_maker(f): f(filename, line, qualname, module) -> the site of a library "
     "coroutine's frame resumed at that line."},
    FAST("set_task_sites", h_set_task_sites,
         "set_task_sites(step, complete): the sites of the accesses the loop core records for "
         "a task's step (a read of the task) and its completion (a write)."),
    FAST("set_future_keys", h_set_future_keys,
         "set_future_keys(state, callbacks): the attribute names a future's completion writes "
         "(the state key first, which a task's step reads) and the one its callbacks are "
         "under (a completion writes it, a task's registered wake-up adds to it)."),
    {"hooks_active", h_active, METH_NOARGS, "True while an explorer is attached to the hooks."},
    {"hooks_reset", h_reset, METH_NOARGS, "Forget every name; release the objects held."},
    {"hooks_keeper_young", h_keeper_young, METH_NOARGS,
     "Move the holder of the objects the hooks keep to the youngest GC generation."},
    {"hooks_sweep", h_sweep, METH_NOARGS,
     "Release the held objects only the hooks reference (done at every step end)."},
    {"hooks_attach", h_attach, METH_O, "Point the hooks at an Explorer (or None)."},
    {"hooks_log", h_log, METH_O, "hooks_log(on) -> entries logged so far; switch logging."},
    {"hooks_stats", h_stats, METH_NOARGS, "Counters of the hooks."},
    {"hooks_thread_accesses", h_thread_accesses, METH_NOARGS,
     "Writes by threads other than the loop's since the last call; the count restarts."},
    {"hooks_object_id", h_object_id, METH_O,
     "The canonical id an object has in this execution (None if unseen)."},
    {"set_instrumented_files", h_set_files, METH_O,
     "Filenames whose functions record their own accesses."},
    FAST("set_modelled_code", h_set_modelled_code,
         "set_modelled_code(dirs, exceptions): directories whose code's module state is modelled "
         "(the standard library's), and directories inside them that are not (site-packages)"),
    FAST("set_self_recording", h_set_self_recording,
         "set_self_recording(functions, classes): functions (not instrumented) that record their "
         "own accesses, and their classes."),
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
    static const struct {
        const char *name;
        uint64_t key;
    } keys[] = {{"CELL_KEY", CELL_KEY}, {"ORDER_KEY", ORDER_KEY}};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        PyObject *k = PyLong_FromUnsignedLongLong(keys[i].key);
        if (!k || PyModule_AddObject(module, keys[i].name, k) < 0) {
            Py_XDECREF(k);
            return -1;
        }
    }
    if (PyType_Ready(&IterProxy_Type) < 0 || PyType_Ready(&AIterProxy_Type) < 0 ||
        PyType_Ready(&SetOrder_Type) < 0 ||
        PyType_Ready(&CallProxy_Type) < 0 || PyType_Ready(&AwaitProxy_Type) < 0 ||
        PyType_Ready(&AgenMethod_Type) < 0)
        return -1;
    return PyModule_AddFunctions(module, hook_methods);
}
