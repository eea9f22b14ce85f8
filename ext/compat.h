/*
 * compat.h -- every piece of the extension that depends on the CPython
 * version (private layouts, type names, private functions, deprecated API).
 * No other file of ext/ may use a CPython-private name or layout; each entry
 * says which versions it serves and why it is needed (compat.c has the
 * details).  Its Python twin is src/chaossloth/compat.py.
 *
 * Supported: CPython 3.11, 3.12 and 3.13.  Another version fails to compile
 * with one #error (compat.c); a supported version whose asyncio does not
 * match the layouts below fails at import with one message: compat.py calls
 * cs_compat_check (exposed as _core._compat_check) with a probe task before
 * anything else uses the extension.
 */
#ifndef CS_COMPAT_H
#define CS_COMPAT_H

#include "bridge.h"

/* _core._compat_check(c_task, c_step, c_wakeup, py_step, py_wakeup): checks
 * the probe objects compat.py made against the layouts compiled in, and
 * remembers what identifies a task's steps.  None on success; raises
 * _core.CompatError (one message naming what did not match) otherwise. */
PyObject *cs_compat_check(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

/* 1 where the stock loop crashes when it must wait for a NaN deadline: from
 * 3.13 `_run_once` passes `when - time()` to the selector unclamped and
 * selectors.py's `math.ceil(nan * 1e3)` raises ValueError (3.11 and 3.12 clamp
 * with max(0, ...), which turns NaN into 0: the timer is due at once). */
#define CS_SELECT_REFUSES_NAN (PY_VERSION_HEX >= 0x030D0000)

/* 1 once cs_compat_check has succeeded.  LoopCore refuses to be created
 * before (the step detection below would silently miss every task). */
int cs_compat_ready(void);

/* The task whose step `cb` is (borrowed), or NULL: a C Task's step wrapper
 * or wakeup builtin, or a bound __step / __wakeup of asyncio's pure-Python
 * Task (and subclasses).  Never raises. */
PyObject *cs_compat_task_of_step(PyObject *cb);

/* The referent of a weak reference as a new reference, Py_None (new
 * reference) when it is dead, or NULL with an exception. */
PyObject *cs_compat_weakref_get(PyObject *ref);

/* The attribute `name` (an interned str) found on the MRO of `type` without
 * invoking descriptors (borrowed), or NULL, never raising: what
 * type.__call__ itself looks up. */
PyObject *cs_compat_type_lookup(PyTypeObject *type, PyObject *name);

/* A code object's co_filename (borrowed; `code` must be a code object). */
PyObject *cs_compat_code_filename(PyObject *code);

/* A Python function's __qualname__ (borrowed; `fn` must be a function). */
PyObject *cs_compat_function_qualname(PyObject *fn);

/* The index of a code object's first free variable among the fast locals
 * that STORE_DEREF's argument indexes (`code` must be a code object). */
int cs_compat_code_first_free(PyObject *code);

/* A builtin function's C name (`cb` must pass PyCFunction_Check). */
const char *cs_compat_cfunction_name(PyObject *cb);

/* The version tag of a dict (`dict` must be one): equal tags at two moments
 * mean its contents did not change in between (compat.c says why and where it
 * holds).  Never raises. */
uint64_t cs_compat_dict_version(PyObject *dict);

/* One link of a task's await chain (a coroutine's cr_await, a generator's
 * gi_yieldfrom, an async generator's ag_await).  For a coroutine, generator or
 * async generator: 1, with its frame (new reference, or NULL once it has
 * finished), its code (new reference) and what it awaits (new reference or
 * NULL).  For the awaitable an async generator's __anext__ / asend() /
 * athrow() / aclose() returns (what `async for` and anext() await, which
 * exposes nothing of its generator): 1, with no frame or code and *next the
 * generator it drives, found by its traverse function.  0 for anything else
 * (the chain ends there: a future, a task); -1 with an exception. */
int cs_compat_await_link(PyObject *obj, PyObject **frame, PyObject **code, PyObject **next);

/* The tp_name of hooks.c's awaitproxy (an async generator's awaitable, wrapped). */
#define CS_AWAITPROXY_TYPE_NAME "chaossloth._core.awaitproxy"

#endif
