/*
 * loop.h -- what loop.c (LoopCore: queues, clock, dispatch) and handle.c
 * (Handle, TimerHandle) share.  No other file includes it.
 */
#ifndef CS_LOOP_H
#define CS_LOOP_H

#include "bridge.h"

typedef struct LoopCoreObject LoopCoreObject;

/* A callback scheduled on a LoopCore: chaossloth._core.Handle, or
 * TimerHandle (is_timer) for call_at / call_later.  handle.c owns the Python
 * surface; loop.c owns the fields below `when` (queue bookkeeping). */
typedef struct {
    PyObject_HEAD
    PyObject *callback; /* NULL once cancelled (as stock) */
    PyObject *args;     /* tuple; NULL once cancelled */
    PyObject *context;
    LoopCoreObject *loop;
    PyObject *source_traceback; /* debug mode only */
    PyObject *repr;             /* debug mode: repr kept at cancel */
    PyObject *weakreflist;
    double when;         /* TimerHandle: the deadline in loop.time() units */
    uint64_t seq;        /* creation order on its loop (ties between equal deadlines) */
    int64_t scheduled_by; /* event that scheduled it, -1 outside steps */
    size_t after_len;     /* after_all: the trace's length when it became runnable (loop.c) */
    cs_actor actor;       /* CS_NO_ACTOR without an explorer */
    PyObject *observes;   /* a future whose completion by counting scheduled it: its step
                             reads it, enabling (loop.c: record_shared_state), or NULL */
    uint32_t polls;       /* task step queued by the task's own previous step (a bare yield,
                             sleep(0)): that step's polls + 1; else 0 (see busy_poll_check) */
    uint32_t spins;       /* the same count, never restarted by the busy-poll clock (see
                             "fair polls" in loop.c) */
    char cancelled, scheduled, is_timer, after_all, queued;
} HandleObject;

extern PyTypeObject cs_HandleType;
extern PyTypeObject cs_TimerHandleType;

/* handle.c: a new Handle (or TimerHandle) of `loop` for cb(*args) in ctx
 * (None/NULL: a copy of the current context), with its creation stack in
 * debug mode; queue bookkeeping zeroed.  NULL with an exception. */
HandleObject *cs_handle_new(LoopCoreObject *loop, int timer, PyObject *cb, PyObject *const *args,
                            Py_ssize_t nargs, PyObject *ctx, int debug);

/* loop.c, for handle.c */
int cs_loop_debug(LoopCoreObject *loop);
/* Handle.cancel()'s effect on the loop: its counters, the flag, and (while a
 * step is recorded) a write of the handle's actor.  -1 with an exception. */
int cs_loop_cancel_handle(LoopCoreObject *loop, HandleObject *h);
/* Runs h as stock Handle._run does; -1 only for an exception that must leave
 * the loop (SystemExit, KeyboardInterrupt, a failing exception handler). */
int cs_loop_run_handle(LoopCoreObject *loop, HandleObject *h);

/* asyncio pieces imported by loop.c with the first LoopCore (so before any
 * handle exists): format_helpers._format_callback_source, extract_stack. */
extern PyObject *cs_fmt_callback_source;
extern PyObject *cs_extract_stack;
extern PyObject *cs_empty_tuple;

#endif
