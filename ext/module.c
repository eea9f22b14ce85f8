/*
 * module.c -- chaossloth._core: module init and the translation of engine
 * status codes into Python exceptions (the only place that does it).
 */
#include "bridge.h"

PyObject *cs_EngineError;
PyObject *cs_DivergedError;
PyObject *cs_BudgetError;
PyObject *cs_BlockedError;

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

static struct PyModuleDef core_module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "chaossloth._core",
    .m_doc = "ChaosSloth's C engine and the controlled event loop's core.",
    .m_size = -1,
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
    if (cs_register_loop(m) < 0) goto fail;
    if (cs_register_hooks(m) < 0) goto fail;
    if (cs_register_explorer(m) < 0) goto fail;
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
