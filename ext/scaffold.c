/* scaffold.c -- TEMPORARY registration placeholders; each owner deletes its
 * function here when its file (loop.c, hooks.c, explorer.c) lands. */
#include "bridge.h"

