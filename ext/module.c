/*
 * module.c -- chaossloth._core: module init, the translation of engine
 * status codes into Python exceptions (the only place that does it), and the
 * process-wide exploration slot.
 *
 * Module state: process-global, by design.  The access hooks (hooks.c) and
 * the loop record into ONE explorer: canonical object ids, the objects kept
 * alive for an execution and the explorer pointer are process-wide.  So at
 * most one exploration is active per process, and it is enforced here:
 * cs_exploration_claim refuses a second owner with ExplorationActiveError
 * (ARCHITECTURE.md, "One exploration per process").  The module is
 * single-phase (m_size = -1) and refuses to be loaded twice.
 */
#include "compat.h"

PyObject *cs_EngineError;
PyObject *cs_DivergedError;
PyObject *cs_BudgetError;
PyObject *cs_BlockedError;
PyObject *cs_CompatError;
PyObject *cs_ExplorationActiveError;

int cs_py_check(int status) {
    if (status == CS_OK) return 0;
    if (PyErr_Occurred()) return -1;
    switch (status) {
    case CS_ENOMEM: PyErr_NoMemory(); break;
    case CS_EDIVERGED: PyErr_SetString(cs_DivergedError, cs_strerror(status)); break;
    case CS_EBUDGET: PyErr_SetString(cs_BudgetError, cs_strerror(status)); break;
    case CS_EBLOCKED: PyErr_SetString(cs_BlockedError, cs_strerror(status)); break;
    default: PyErr_Format(cs_EngineError, "%s (code %d)", cs_strerror(status), status);
    }
    return -1;
}

/* ------------------------------------------------ one exploration per process */

/* Invariant: active_owner != NULL iff an exploration is active; then
 * active_explorer is a strong reference to its Explorer (so the cs_explorer
 * the hooks record into cannot be freed under them) and the hooks point at
 * it. */
static const void *active_owner;
static PyObject *active_explorer;
/* for the error message: the owner's type (a strong reference) and address;
 * not its repr, which would run Python code on every execution's claim */
static PyObject *active_owner_type;
static const void *active_owner_addr;

int cs_exploration_claim(const void *owner, PyObject *owner_obj, PyObject *explorer) {
    cs_explorer *ex = cs_py_explorer_get(explorer);
    if (!ex) return -1;
    if (active_owner && active_owner != owner) {
        if (active_owner_type)
            PyErr_Format(cs_ExplorationActiveError,
                         "another exploration is active in this process (its explorer is "
                         "attached to <%s object at %p>): ChaosSloth runs one exploration per "
                         "process; detach it first (loop._cs_detach(), loop.close(), or "
                         "_core.hooks_attach(None))",
                         ((PyTypeObject *)active_owner_type)->tp_name, active_owner_addr);
        else
            PyErr_SetString(cs_ExplorationActiveError,
                            "another exploration is active in this process (its explorer is "
                            "attached to the hooks): ChaosSloth runs one exploration per "
                            "process; detach it first (loop._cs_detach(), loop.close(), or "
                            "_core.hooks_attach(None))");
        return -1;
    }
    if (active_owner == owner && active_explorer == explorer && cs_hooks_get_explorer() == ex)
        return 0; /* already claimed: keep this execution's hook state */
    Py_XSETREF(active_owner_type, owner_obj ? Py_NewRef((PyObject *)Py_TYPE(owner_obj)) : NULL);
    active_owner_addr = owner_obj;
    Py_XSETREF(active_explorer, Py_NewRef(explorer));
    active_owner = owner;
    cs_hooks_set_explorer(ex);
    return 0;
}

void cs_exploration_release(const void *owner) {
    if (!owner || active_owner != owner) return;
    active_owner = NULL;
    cs_hooks_set_explorer(NULL);
    Py_CLEAR(active_owner_type);
    Py_CLEAR(active_explorer); /* last: may free the explorer */
}

int cs_exploration_owned_by(const void *owner) { return owner && active_owner == owner; }

/* ------------------------------------------------------------ module init */

static PyObject *module_dict_version(PyObject *Py_UNUSED(m), PyObject *d) {
    if (!PyDict_Check(d)) {
        PyErr_SetString(PyExc_TypeError, "dict_version() expects a dict");
        return NULL;
    }
    return PyLong_FromUnsignedLongLong(cs_compat_dict_version(d));
}

static PyMethodDef module_methods[] = {
    {"_compat_check", (PyCFunction)(void (*)(void))cs_compat_check, METH_FASTCALL,
     "_compat_check(c_task, c_step, c_wakeup, py_step, py_wakeup): verify the CPython layouts "
     "the extension relies on against probe objects (chaossloth.compat calls it at import)."},
    {"dict_version", (PyCFunction)module_dict_version, METH_O,
     "dict_version(d) -> int: a tag that every change of the dict's contents changes (equal "
     "tags: the contents did not change in between; runner._ModuleTable)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef core_module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "chaossloth._core",
    .m_doc = "ChaosSloth's C engine and the controlled event loop's core.",
    .m_size = -1,
    .m_methods = module_methods,
};

#define NEW_ERROR(var, name, base)                                              \
    do {                                                                        \
        var = PyErr_NewException("chaossloth._core." name, base, NULL);         \
        if (!var || PyModule_AddObjectRef(m, name, var) < 0) goto fail;         \
    } while (0)

PyMODINIT_FUNC PyInit__core(void) {
    PyObject *m = PyModule_Create(&core_module);
    if (!m) return NULL;
    NEW_ERROR(cs_EngineError, "EngineError", PyExc_RuntimeError);
    NEW_ERROR(cs_DivergedError, "DivergedError", cs_EngineError);
    NEW_ERROR(cs_BudgetError, "BudgetError", cs_EngineError);
    NEW_ERROR(cs_BlockedError, "BlockedError", cs_EngineError);
    NEW_ERROR(cs_CompatError, "CompatError", PyExc_ImportError);
    NEW_ERROR(cs_ExplorationActiveError, "ExplorationActiveError", PyExc_RuntimeError);
    if (cs_register_handles(m) < 0) goto fail;
    if (cs_register_loop(m) < 0) goto fail;
    if (cs_register_hooks(m) < 0) goto fail;
    if (cs_register_explorer(m) < 0) goto fail;
    if (cs_register_snapshot(m) < 0) goto fail;
    if (cs_register_recording(m) < 0) goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
