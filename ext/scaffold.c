/* scaffold.c -- TEMPORARY registration placeholders; each owner deletes its
 * function here when its file (loop.c, hooks.c, explorer.c) lands. */
#include "bridge.h"

int cs_register_loop(PyObject *module) { (void)module; return 0; }
int cs_register_hooks(PyObject *module) { (void)module; return 0; }
int cs_register_explorer(PyObject *module) { (void)module; return 0; }
static cs_explorer *hooks_explorer;
void cs_hooks_set_explorer(cs_explorer *ex) { hooks_explorer = ex; }
cs_explorer *cs_hooks_get_explorer(void) { return hooks_explorer; }
cs_explorer *cs_py_explorer_get(PyObject *obj) { (void)obj; PyErr_SetString(PyExc_TypeError, "Explorer not built yet"); return NULL; }
