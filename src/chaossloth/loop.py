"""ControlledLoop: an asyncio event loop whose scheduling ChaosSloth controls.

The hot path (ready queue, timer heap, virtual clock, call_soon/call_later/call_at, time, the
dispatch loop) is C: :class:`chaossloth._core.LoopCore`.  This module adds the rest of the
:class:`asyncio.AbstractEventLoop` surface in Python, as uvloop does
(``class Loop(_BaseLoop, AbstractEventLoop)``).

Semantics, in one place:

* **Order.**  Without an explorer, callbacks run in exactly the order of stock asyncio's
  ``BaseEventLoop._run_once`` (the same in 3.11, 3.12 and 3.13): each iteration moves the due
  timers to the ready queue (deadline order; equal deadlines in the order stock's heapq pops
  them) and then runs exactly the callbacks that were ready when it started.
* **Virtual time.**  ``loop.time()`` starts at 0.0 and moves when nothing is ready, to the
  earliest pending deadline, so ``await asyncio.sleep(3600)`` returns at once; and when a task
  busy-polls (``poll_limit`` consecutive ``await asyncio.sleep(0)``, default 1000) while a timer
  is pending, so a poll loop waiting for a timer ends as it does on the stock loop.  A timer is
  due when ``when <= loop.time()``.
* **Explorer.**  ``loop._cs_attach(explorer)`` routes every step through the C engine; see
  ARCHITECTURE.md for actor identity and the enabled set.  Timer modes: ``"strict"`` (timers
  fire in deadline order; equal deadlines are a real choice) and ``"relaxed"`` (any pending
  timer may fire at any choice point, the clock becoming ``max(now, when)``).
* **No real I/O.**  Sockets, pipes, subprocesses, signals and DNS raise
  :class:`~chaossloth.errors.UnsupportedOperation`; ``run_in_executor``/``to_thread`` run the
  function in its own step on the loop thread.
* **External events.**  ``call_soon_threadsafe`` from another thread (the program's own thread
  completing a future, ``run_coroutine_threadsafe``, ``wrap_future`` of a thread pool's future)
  is an event of unknown latency: it is queued and delivered when nothing else is ready, before
  the clock advances.  While a thread the program started during the run is alive and may
  still send one, the loop waits for it there: until every such thread has sent an event,
  ended, or blocks waiting (for a lock, a condition, a queue, a future: see
  :func:`chaossloth.capture.threads.blocked`).  Events are delivered in the order the threads were started, each
  thread's in the order sent, so one schedule delivers them at the same points in every
  execution.  A waiting task is not deadlocked while such a thread lives; one whose thread
  ended without waking it is.  An event that could have arrived while other steps ran (its
  thread was alive across them) was placed at the idle point only: the execution says so
  (``_cs_external_early``) and an exploration with one is not complete.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
import math
import sys
import threading
import time
import traceback
import warnings
import weakref
from asyncio import coroutines, events, futures, tasks
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from chaossloth import _core, compat, deadlock
from chaossloth.capture import threads as _threads
from chaossloth.errors import (
    DeadlockError,
    InputError,
    NondeterminismError,
    ScheduleDivergedError,
    StepBudgetExceeded,
    UnsupportedOperation,
)

__all__ = ["ControlledLoop", "EventLoopPolicy", "new_event_loop", "run"]

logger = logging.getLogger("asyncio")  # stock loops log to this logger

_T = TypeVar("_T")
_TIMER_MODES = ("strict", "relaxed")
_RUN_STOPPED, _RUN_IDLE, _RUN_EXTERNAL = 0, 1, 3
_real_sleep = time.sleep
_BUDGET_LIST = 5  # tasks / timers named in the step-budget message


def _run_until_complete_cb(fut: asyncio.Future[Any]) -> None:
    if not fut.cancelled():
        exc = fut.exception()
        if isinstance(exc, (SystemExit, KeyboardInterrupt)):
            # Issue #22429: run_forever() already finished, no need to stop it.
            return
    futures._get_loop(fut).stop()


def _run_job(fut: asyncio.Future[Any], func: Callable[..., Any], args: tuple[Any, ...]) -> None:
    """The step that stands for an executor job: runs ``func(*args)`` into ``fut``."""
    if fut.cancelled():
        return
    try:
        result = func(*args)
    except BaseException as exc:  # noqa: BLE001 - an executor reports every exception
        if not fut.cancelled():
            fut.set_exception(exc)
    else:
        if not fut.cancelled():
            fut.set_result(result)


class _AsyncGenSet:
    """The loop's live async generators, weakly held, iterated in first-use order (stock uses a
    WeakSet, whose order depends on addresses and so differs between runs)."""

    def __init__(self) -> None:
        self._refs: dict[int, weakref.ref[Any]] = {}

    def add(self, agen: Any) -> None:
        key = id(agen)

        def gone(_: Any, key: int = key, refs: dict[int, Any] = self._refs) -> None:
            refs.pop(key, None)

        self._refs[key] = weakref.ref(agen, gone)

    def discard(self, agen: Any) -> None:
        ref = self._refs.get(id(agen))
        if ref is not None and ref() is agen:
            del self._refs[id(agen)]

    def snapshot(self) -> list[Any]:
        return [a for a in (r() for r in list(self._refs.values())) if a is not None]

    def clear(self) -> None:
        self._refs.clear()

    def __len__(self) -> int:
        return len(self.snapshot())


_UNSUPPORTED = {
    "add_reader": "watching a file descriptor",
    "remove_reader": "watching a file descriptor",
    "add_writer": "watching a file descriptor",
    "remove_writer": "watching a file descriptor",
    "sock_recv": "socket I/O",
    "sock_recv_into": "socket I/O",
    "sock_recvfrom": "socket I/O",
    "sock_recvfrom_into": "socket I/O",
    "sock_sendall": "socket I/O",
    "sock_sendto": "socket I/O",
    "sock_connect": "socket I/O",
    "sock_accept": "socket I/O",
    "sock_sendfile": "socket I/O",
    "create_connection": "opening a network connection",
    "create_server": "serving on a network socket",
    "create_datagram_endpoint": "opening a datagram socket",
    "create_unix_connection": "opening a Unix socket",
    "create_unix_server": "serving on a Unix socket",
    "connect_accepted_socket": "wrapping a real socket",
    "sendfile": "sending a file over a transport",
    "start_tls": "TLS on a real transport",
    "subprocess_exec": "running a subprocess",
    "subprocess_shell": "running a subprocess",
    "add_signal_handler": "handling OS signals",
    "remove_signal_handler": "handling OS signals",
    "getaddrinfo": "DNS resolution",
    "getnameinfo": "DNS resolution",
    "connect_read_pipe": "reading a real pipe",
    "connect_write_pipe": "writing a real pipe",
}


def _unsupported(name: str, what: str) -> Callable[..., Any]:
    def method(self: ControlledLoop, *args: Any, **kwargs: Any) -> Any:
        raise UnsupportedOperation(
            f"loop.{name}() ({what}) is not supported on ChaosSloth's controlled loop: the loop "
            "owns time and scheduling, and real I/O would make runs irreproducible; fake the "
            "I/O with in-process futures or asyncio.Queue objects instead."
        )

    method.__name__ = name
    method.__qualname__ = f"ControlledLoop.{name}"
    method.__doc__ = f"Unsupported ({what}): raises UnsupportedOperation."
    return method


class ControlledLoop(_core.LoopCore, asyncio.AbstractEventLoop):  # type: ignore[misc]
    """An asyncio event loop with virtual time whose every scheduling decision can be made by
    ChaosSloth's engine (see the module docstring).

    ``timers`` is ``"strict"`` or ``"relaxed"``; ``max_steps`` bounds the steps of a run made
    without an explorer (livelock guard); ``debug`` as for stock loops; ``poll_limit`` (default
    1000, see ext/loop.c) is the number of consecutive bare yields (``asyncio.sleep(0)``) of one
    task after which virtual time advances to the earliest pending deadline.
    """

    #: the program's time.monotonic() and time.time() read this loop's clock while it runs
    #: (capture/entropy.py)
    _cs_virtual_clock = True

    def __init__(
        self,
        *,
        timers: str = "strict",
        max_steps: int | None = None,
        debug: bool | None = None,
        poll_limit: int | None = None,
    ) -> None:
        self._thread_id: int | None = None
        if timers not in _TIMER_MODES:
            self._closed = True
            raise InputError(f"timers must be 'strict' or 'relaxed', not {timers!r}")
        if max_steps is not None and (
            not isinstance(max_steps, int) or isinstance(max_steps, bool) or max_steps < 1
        ):
            self._closed = True
            raise InputError(f"max_steps must be a positive integer or None, not {max_steps!r}")
        if poll_limit is not None and (
            not isinstance(poll_limit, int) or isinstance(poll_limit, bool) or poll_limit < 1
        ):
            self._closed = True
            raise InputError(f"poll_limit must be a positive integer or None, not {poll_limit!r}")
        self._cs_timers = timers
        self._cs_max_steps = max_steps
        if poll_limit is not None:
            self._cs_poll_limit = poll_limit
        self._exception_handler: Callable[[Any, dict[str, Any]], Any] | None = None
        self._asyncgens = _AsyncGenSet()
        self._asyncgens_shutdown_called = False
        self._executor_shutdown_called = False
        self._default_executor: Any = None
        self._coroutine_origin_tracking_enabled = False
        self._coroutine_origin_tracking_saved_depth: int | None = None
        #: the threads the program started while this loop ran, in start order, each with
        #: the step count when it started or its last event was delivered
        self._cs_threads: list[list[Any]] = []
        #: the last wait for the threads delivered nothing and was settled by a thread seen
        #: only still (threads.Settling.still_only)
        self._cs_still = False
        #: an external event was delivered at an idle point although it could have come while
        #: other steps ran
        self._cs_external_early = False
        # the runner's readable actor names ("Task main/0 (Worker.run)"): messages name a
        # task by its creation path when set, by its asyncio name ("Task-3") otherwise
        self._cs_namer: Callable[[int], str] | None = None
        self.set_debug(coroutines._is_debug_mode() if debug is None else bool(debug))

    def __repr__(self) -> str:
        return (
            f"<{self.__class__.__name__} running={self.is_running()} "
            f"closed={self.is_closed()} debug={self.get_debug()} timers={self._cs_timers}>"
        )

    # ------------------------------------------------------------------ tasks and futures

    # create_task is LoopCore's (ext/loop.c): stock's, with `_cs_task_class` for asyncio.Task

    def _cs_factory_task(self, coro: Any, name: str | None, context: Any) -> Any:
        """create_task with a task factory set (LoopCore.create_task calls it)."""
        factory = self._task_factory
        if context is None:
            task = factory(self, coro)
        else:
            task = factory(self, coro, context=context)
        compat.set_task_name(task, name)
        return task

    def set_task_factory(self, factory: Callable[..., Any] | None) -> None:
        if factory is not None and not callable(factory):
            raise TypeError("task factory must be a callable or None")
        self._task_factory = factory

    def get_task_factory(self) -> Callable[..., Any] | None:
        return self._task_factory

    # --------------------------------------------------------------------- running

    def _check_closed(self) -> None:
        if self._closed:
            raise RuntimeError("Event loop is closed")

    def _check_running(self) -> None:
        if self.is_running():
            raise RuntimeError("This event loop is already running")
        if events._get_running_loop() is not None:
            raise RuntimeError("Cannot run the event loop while another loop is running")

    def _check_thread(self) -> None:
        if self._thread_id is None:
            return
        if threading.get_ident() != self._thread_id:
            raise RuntimeError(
                "Non-thread-safe operation invoked on an event loop other than the current one"
            )

    def _check_callback(self, callback: Any, method: str) -> None:
        if coroutines.iscoroutine(callback) or coroutines.iscoroutinefunction(callback):
            raise TypeError(f"coroutines cannot be used with {method}()")
        if not callable(callback):
            raise TypeError(f"a callable object was expected by {method}(), got {callback!r}")

    def run_forever(self) -> None:
        """Run until stop() is called.

        Raises DeadlockError when nothing can run any more (nothing ready, no timer pending)
        before stop() was called, StepBudgetExceeded when the step budget runs out,
        ScheduleDivergedError when an explorer's prescribed step is not enabled, and
        NondeterminismError when another thread scheduled a callback.
        """
        self._check_closed()
        self._check_running()
        self._set_coroutine_origin_tracking(self._debug)
        old_agen_hooks = sys.get_asyncgen_hooks()
        _threads.begin()
        try:
            self._thread_id = threading.get_ident()
            sys.set_asyncgen_hooks(
                firstiter=self._asyncgen_firstiter_hook, finalizer=self._asyncgen_finalizer_hook
            )
            events._set_running_loop(self)
            try:
                status = self._run_steps()
                while True:
                    while status == _RUN_EXTERNAL:
                        self._cs_wait_external()
                        status = self._run_steps()
                    # idle, its wait settled by a thread only seen still in a C call: that
                    # thread is waited for longer before this is a deadlock
                    if (
                        status != _RUN_IDLE
                        or not self._cs_still
                        or not self._cs_wait_external(confirm=True)
                    ):
                        break
                    status = self._run_steps()
            except _core.BudgetError:
                raise self._budget_error() from None
            except _core.DivergedError:
                raise self._diverged_error() from None
            if status == _RUN_IDLE:
                raise self._deadlock_error()
            if self._cs_external_count:
                # stopped with a thread's events never delivered: they could have come
                # before the steps that ran since they were sent
                self._cs_external_early = True
        finally:
            _threads.end()
            self._stopping = False
            self._thread_id = None
            events._set_running_loop(None)
            self._set_coroutine_origin_tracking(False)
            sys.set_asyncgen_hooks(*old_agen_hooks)

    def run_until_complete(self, future: Any) -> Any:
        """Run until the future (or coroutine, wrapped in a task) is done; return its result.

        Raises DeadlockError if the loop runs out of steps before the future is done.
        """
        self._check_closed()
        self._check_running()
        new_task = not futures.isfuture(future)
        future = tasks.ensure_future(future, loop=self)
        if new_task:
            # an exception is raised if it does not complete: no "destroyed pending" warning
            future._log_destroy_pending = False
        future.add_done_callback(_run_until_complete_cb)
        try:
            self.run_forever()
        except BaseException:
            if new_task and future.done() and not future.cancelled():
                # the coroutine raised a BaseException; consume it so nothing is logged
                future.exception()
            raise
        finally:
            future.remove_done_callback(_run_until_complete_cb)
        if not future.done():
            raise RuntimeError("Event loop stopped before Future completed.")
        return future.result()

    def stop(self) -> None:
        """Stop after the current iteration (every callback already ready still runs)."""
        # Stopping disables every step not already in this iteration: run_until_complete's
        # caller then cancels the tasks still pending (outside any step, so unrecorded).
        # Inside a step the stop is a write of everything (the global barrier), so that DPOR
        # orders it with every concurrent step and explores the orders where that step came
        # too late to run before the end; outside a step it records nothing.
        _core.bar(None, 0)
        self._stopping = True

    def is_running(self) -> bool:
        return self._thread_id is not None

    def is_closed(self) -> bool:
        return bool(self._closed)

    def close(self) -> None:
        """Close the loop: drop every scheduled callback.  The loop must not be running."""
        if self.is_running():
            raise RuntimeError("Cannot close a running event loop")
        if self._closed:
            return
        if self._debug:
            logger.debug("Close %r", self)
        self._closed = True
        self._cs_clear()
        self._executor_shutdown_called = True
        self._default_executor = None

    def __del__(self, _warn: Any = warnings.warn) -> None:
        if not self.is_closed():
            _warn(f"unclosed event loop {self!r}", ResourceWarning, source=self)
            if not self.is_running():
                self.close()

    # ---------------------------------------------------------------------- debug

    def set_debug(self, enabled: bool) -> None:
        self._debug = bool(enabled)
        if self.is_running():
            self.call_soon(self._set_coroutine_origin_tracking, enabled)

    def _set_coroutine_origin_tracking(self, enabled: bool) -> None:
        if bool(enabled) == bool(self._coroutine_origin_tracking_enabled):
            return
        if enabled:
            self._coroutine_origin_tracking_saved_depth = sys.get_coroutine_origin_tracking_depth()
            sys.set_coroutine_origin_tracking_depth(10)
        else:
            sys.set_coroutine_origin_tracking_depth(
                self._coroutine_origin_tracking_saved_depth or 0
            )
        self._coroutine_origin_tracking_enabled = enabled

    # ---------------------------------------------------------- exception handling

    def get_exception_handler(self) -> Callable[[Any, dict[str, Any]], Any] | None:
        return self._exception_handler

    def set_exception_handler(self, handler: Callable[[Any, dict[str, Any]], Any] | None) -> None:
        if handler is not None and not callable(handler):
            raise TypeError(f"A callable object or None is expected, got {handler!r}")
        self._exception_handler = handler

    def default_exception_handler(self, context: dict[str, Any]) -> None:
        """Log the context's message and details to the "asyncio" logger, as stock loops do."""
        message = context.get("message") or "Unhandled exception in event loop"
        exception = context.get("exception")
        exc_info: Any = (
            (type(exception), exception, exception.__traceback__)
            if exception is not None
            else False
        )
        current = self._current_handle
        if "source_traceback" not in context and current is not None and current._source_traceback:
            context["handle_traceback"] = current._source_traceback
        log_lines = [message]
        for key in sorted(context):
            if key in {"message", "exception"}:
                continue
            value = context[key]
            if key == "source_traceback":
                tb = "".join(traceback.format_list(value))
                value = "Object created at (most recent call last):\n" + tb.rstrip()
            elif key == "handle_traceback":
                tb = "".join(traceback.format_list(value))
                value = "Handle created at (most recent call last):\n" + tb.rstrip()
            else:
                value = repr(value)
            log_lines.append(f"{key}: {value}")
        logger.error("\n".join(log_lines), exc_info=exc_info)

    def call_exception_handler(self, context: dict[str, Any]) -> None:
        """Call the handler set with set_exception_handler(), else the default one."""
        if self._exception_handler is None:
            try:
                self.default_exception_handler(context)
            except (SystemExit, KeyboardInterrupt):
                raise
            except BaseException:  # second protection layer, as stock
                logger.error("Exception in default exception handler", exc_info=True)  # noqa: G201
            return
        try:
            compat.call_user_exception_handler(self._exception_handler, self, context)
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException as exc:  # noqa: BLE001 - the user's handler broke, as stock
            try:
                self.default_exception_handler(
                    {
                        "message": "Unhandled error in exception handler",
                        "exception": exc,
                        "context": context,
                    }
                )
            except (SystemExit, KeyboardInterrupt):
                raise
            except BaseException:
                logger.error(  # noqa: G201 - same record as stock
                    "Exception in default exception handler while handling an unexpected "
                    "error in custom exception handler",
                    exc_info=True,
                )

    # ------------------------------------------------------------- async generators

    def _asyncgen_finalizer_hook(self, agen: Any) -> None:
        self._asyncgens.discard(agen)
        if not self.is_closed():
            self.call_soon(self.create_task, agen.aclose())

    def _asyncgen_firstiter_hook(self, agen: Any) -> None:
        if self._asyncgens_shutdown_called:
            warnings.warn(
                f"asynchronous generator {agen!r} was scheduled after "
                f"loop.shutdown_asyncgens() call",
                ResourceWarning,
                source=self,
            )
        self._asyncgens.add(agen)

    async def shutdown_asyncgens(self) -> None:
        """Close every live async generator (in the order they were first iterated)."""
        self._asyncgens_shutdown_called = True
        closing = self._asyncgens.snapshot()
        if not closing:
            return
        self._asyncgens.clear()
        results = await tasks.gather(*[ag.aclose() for ag in closing], return_exceptions=True)
        for result, agen in zip(results, closing):
            if isinstance(result, Exception):
                self.call_exception_handler(
                    {
                        "message": f"an error occurred during closing of "
                        f"asynchronous generator {agen!r}",
                        "exception": result,
                        "asyncgen": agen,
                    }
                )

    # -------------------------------------------------------------------- executors

    def run_in_executor(self, executor: Any, func: Callable[..., _T], *args: Any) -> Any:
        """Run ``func(*args)`` deterministically: in a step of its own, on the loop thread.

        The controlled loop never starts threads: the function runs as one callback (its own
        actor, so an explorer may order it against everything else), with an empty context as
        a fresh executor thread would have, and its result or exception goes into the returned
        future.  ``executor`` is accepted and ignored.  A job cancelled before it runs is
        skipped.
        """
        self._check_closed()
        if self._debug:
            self._check_callback(func, "run_in_executor")
        if executor is None and self._executor_shutdown_called:
            raise RuntimeError("Executor shutdown has been called")
        fut = self.create_future()
        self.call_soon(_run_job, fut, func, args, context=contextvars.Context())
        return fut

    def set_default_executor(self, executor: Any) -> None:
        """Accepted for compatibility; jobs run on the loop thread regardless."""
        self._default_executor = executor

    async def shutdown_default_executor(self, timeout: float | None = None) -> None:
        """Nothing to wait for: jobs run in steps of the loop itself (``timeout``, which
        asyncio.Runner passes from 3.12, is accepted and unused)."""
        self._executor_shutdown_called = True

    # --------------------------------------------------------------- external events

    def _cs_thread_started(self, thread: threading.Thread) -> None:
        """A thread the program started while this loop runs (capture.threads): the loop
        waits for its events when idle."""
        self._cs_threads.append([thread, self._cs_steps])
        self._cs_watching = True

    def _cs_wait_external(self, confirm: bool = False) -> int:
        """Nothing is ready: waits until every live thread of the program's has sent an
        event, ended, or waits (threads.Settling; with `confirm`, before a deadlock verdict, a
        thread only seen still must stay so for threads.CONFIRM seconds; the watchdog's time
        limit bounds the wait), then delivers the events sent, in thread start order, and
        returns how many."""
        threads = self._cs_threads
        events: list[tuple[int, Any]] = []
        settling = _threads.Settling((t for t, _ in threads), confirm=confirm)
        while True:
            events.extend(self._cs_take_external())
            if settling.settled({ident for ident, _ in events}):
                break
            _real_sleep(_threads.POLL)
        rank = {t.ident: k for k, (t, _) in enumerate(threads)}
        steps = self._cs_steps
        # thread start order (an unknown thread's after them), each thread's in arrival order
        ordered = sorted(enumerate(events), key=lambda e: (rank.get(e[1][0], len(rank)), e[0]))
        for _, (ident, handle) in ordered:
            k = rank.get(ident)
            if k is None or threads[k][1] != steps:
                # steps ran while the thread could have sent it: it was placed here only
                self._cs_external_early = True
            if k is not None:
                threads[k][1] = steps
            self._cs_deliver(handle)
        self._cs_watching = any(t.is_alive() for t, _ in threads)
        self._cs_still = not events and settling.still_only
        if not events:
            self._cs_external_looked()
        return len(events)

    # ------------------------------------------------------------ errors and naming

    def _cs_tasks_in_order(self) -> list[Any]:
        """This loop's unfinished tasks, in creation order (tasks made without create_task
        come last, by name)."""
        pending = {id(t): t for t in tasks.all_tasks(self)}
        ordered = []
        for ref in self._cs_created:
            t = ref()
            if t is not None and id(t) in pending:
                ordered.append(pending.pop(id(t)))
        ordered.extend(sorted(pending.values(), key=lambda t: t.get_name()))
        return ordered

    def _cs_task_labeller(self) -> Callable[[Any], str]:
        """How messages name a task: the runner's creation-path name when the loop knows the
        task's actor and has a namer, else "task 'Task-3' (coro())"."""
        namer = self._cs_namer
        if namer is None:
            return deadlock.task_label
        try:
            actor_of = {id(v): a for a, v in self._cs_actors().items() if asyncio.isfuture(v)}
        except Exception:  # noqa: BLE001 - no actor table: asyncio names will do
            return deadlock.task_label

        def label(t: Any) -> str:
            a = actor_of.get(id(t))
            if a is not None:
                try:
                    return namer(a)
                except Exception:  # noqa: BLE001, S110 - a name is not worth a crash
                    pass
            return deadlock.task_label(t)

        return label

    def _cs_actor_name(self, actor: int) -> str:
        """A readable name of an actor of the current execution (for messages)."""
        if self._cs_namer is not None:
            try:
                return self._cs_namer(actor)
            except Exception:  # noqa: BLE001, S110 - fall back to the loop's own naming
                pass
        info = self._cs_actors().get(actor)
        if isinstance(info, str):
            kinds = self._cs_actor_kinds
            if kinds.get(actor) == "Task":
                return f"Task {info!r} (finished)"
            return f"callback {info}"
        if info is not None:
            return f"Task {info.get_name()!r} ({deadlock.coro_name(info)})"
        ex = self._cs_explorer
        if ex is None:
            return f"actor {actor}"
        try:
            parent, index = ex.actor_path(actor)
        except (ValueError, TypeError, IndexError):
            return f"actor {actor}"
        if parent is None:
            return f"actor {actor} (root #{index})"
        return f"actor {actor} (creation #{index} of {self._cs_actor_name(parent)})"

    def _budget_error(self) -> StepBudgetExceeded:
        """What the loop did when the step budget ran out: the tasks still running, the virtual
        clock and the pending timers (the model's state, not a claim about asyncio)."""
        ex = self._cs_explorer
        if ex is not None:
            try:
                steps = len(ex.schedule())
            except RuntimeError:
                steps = self._cs_steps
        else:
            steps = self._cs_steps
        running = [t for t in tasks.all_tasks(self) if not t.done()]
        shown = ", ".join(
            f"{t.get_name()!r} ({deadlock.coro_name(t)})" for t in running[:_BUDGET_LIST]
        )
        if len(running) > _BUDGET_LIST:
            shown += f", ... ({len(running)} in all)"
        timers = sorted((h for h in self._scheduled if not h.cancelled()), key=lambda h: h.when())
        pending = ", ".join(
            f"{_callback_name(_unwrap(h._callback))} at {h.when():g}" for h in timers[:_BUDGET_LIST]
        )
        if len(timers) > _BUDGET_LIST:
            pending += f", ... ({len(timers)} in all)"
        return StepBudgetExceeded(
            f"the step budget of {steps} steps ran out; tasks still running: {shown or 'none'}; "
            f"virtual time at {self._cs_now:g}; pending timers: {pending or 'none'}. The loop "
            f"advances virtual time when nothing is ready, or after "
            f"{self._cs_poll_limit} consecutive bare yields (asyncio.sleep(0)) of one task; a "
            "program that still runs is a livelock under this model, or longer than the budget: "
            "raise it with --max-steps (max_steps=...).",
            steps=steps,
        )

    def _diverged_error(self) -> ScheduleDivergedError:
        ex = self._cs_explorer
        div = ex.divergence() if ex is not None else None
        enabled = list(self._cs_div_enabled or [])
        names = ", ".join(self._cs_actor_name(a) for a in enabled) or "nothing"
        if not div:
            return ScheduleDivergedError(
                f"the schedule diverged: the prescribed step was not enabled (enabled: {names}).",
                enabled=enabled,
            )
        step, expected = div.get("step"), div.get("expected")
        if div.get("kind") == "changed":
            # a replayed step did other things than when it ran after the same steps before;
            # the runner words it (runner.divergence_text), with the actor table it keeps
            actor = div.get("actor")
            name = self._cs_actor_name(actor) if isinstance(actor, int) else "a step"
            return ScheduleDivergedError(
                f"at step {step}, {name} did not do what it did after the same steps in an "
                "earlier execution.",
                step=step,
            )
        exp_name = self._cs_actor_name(expected) if expected is not None else "?"
        return ScheduleDivergedError(
            f"the schedule diverged at step {step}: it prescribes {exp_name}, which is not "
            f"enabled; enabled were: {names}. The program did not repeat its behaviour under "
            "the same schedule (wall-clock time, unseeded randomness, I/O, threads or "
            "hash-order dependence), so this run proves nothing.",
            step=step,
            expected=expected,
            enabled=enabled,
        )

    def _deadlock_error(self) -> DeadlockError:
        pending = [t for t in self._cs_tasks_in_order() if not t.done()]
        err = deadlock.deadlock_error(pending, self._cs_task_labeller())
        never = sum(1 for h in self._scheduled if not h.cancelled() and h.when() == math.inf)
        if never:
            # ext/loop.c never fires a timer at +inf (sleep(inf), wait_for(..., timeout=inf)):
            # the stock loop waits for it forever, a hang this model reports as a deadlock
            note = (
                f" ({never} timer(s) at +inf pending: they never fire; the stock loop would "
                "wait forever)"
            )
            err.args = (f"{err.args[0]}{note}", *err.args[1:])
        return err


for _name, _what in _UNSUPPORTED.items():
    setattr(ControlledLoop, _name, _unsupported(_name, _what))
del _name, _what


# ------------------------------------------------------------------ helpers


def _unwrap(cb: Any) -> Any:
    """The function behind functools.partial wrappers."""
    while isinstance(cb, functools.partial):
        cb = cb.func
    return cb


def _callback_name(cb: Any) -> str:
    return str(getattr(cb, "__qualname__", None) or getattr(cb, "__name__", None) or repr(cb))


# ---------------------------------------------------------------------- entry points


class EventLoopPolicy(asyncio.DefaultEventLoopPolicy):  # type: ignore[misc,valid-type]
    """An event loop policy whose loops are ControlledLoops (keyword arguments go to each)."""

    def __init__(self, **loop_kwargs: Any) -> None:
        super().__init__()
        self._cs_loop_kwargs = loop_kwargs

    def new_event_loop(self) -> ControlledLoop:
        return ControlledLoop(**self._cs_loop_kwargs)


def new_event_loop(**kwargs: Any) -> ControlledLoop:
    """A new ControlledLoop (``timers=``, ``max_steps=``, ``debug=``)."""
    return ControlledLoop(**kwargs)


_STRATEGIES = ("fifo", "random", "replay", "pct", "pos", "dpor", "exhaustive")


def run(
    main: Coroutine[Any, Any, _T],
    *,
    debug: bool | None = None,
    timers: str = "strict",
    max_steps: int | None = None,
    strategy: str = "fifo",
    seed: int = 0,
) -> _T:
    """Run a coroutine on a new ControlledLoop and return its result, like ``asyncio.run``.

    Leftover tasks are cancelled (in creation order) and async generators shut down before the
    loop closes.  ``strategy`` other than ``"fifo"`` runs one execution under that strategy of
    the engine (``seed`` for the randomised ones); ``max_steps`` bounds the run.
    """
    if events._get_running_loop() is not None:
        raise RuntimeError("chaossloth.run() cannot be called from a running event loop")
    if not coroutines.iscoroutine(main):
        raise ValueError(f"a coroutine was expected, got {main!r}")
    try:
        if strategy not in _STRATEGIES or strategy == "replay":
            raise InputError(
                f"strategy must be one of fifo, random, pct, pos, dpor, exhaustive, not "
                f"{strategy!r}"
            )
        if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
            raise InputError(f"seed must be a non-negative integer, not {seed!r}")
        loop = ControlledLoop(timers=timers, max_steps=max_steps, debug=debug)
    except InputError:
        main.close()
        raise
    explorer = None
    outcome = _core.OUTCOME_OK if hasattr(_core, "OUTCOME_OK") else 0
    broken = False
    events.set_event_loop(loop)
    try:
        if strategy != "fifo":
            try:
                explorer = _core.Explorer(strategy, seed=seed, max_steps=max_steps or 0)
            except (ValueError, TypeError) as exc:
                raise InputError(str(exc)) from None
            if not explorer.begin():
                raise InputError(f"strategy {strategy!r} has no execution to run")
            loop._cs_attach(explorer)
        try:
            task = loop.create_task(main)
        except BaseException:
            main.close()
            raise
        try:
            return loop.run_until_complete(task)
        except (DeadlockError, StepBudgetExceeded, NondeterminismError):  # diverged too
            broken = True
            outcome = _core.OUTCOME_ABORTED
            raise
        except BaseException:
            outcome = _core.OUTCOME_FAILED
            raise
    finally:
        try:
            if broken:
                _silence_leftovers(loop)
            else:
                _cancel_all_tasks(loop)
                loop.run_until_complete(loop.shutdown_asyncgens())
                loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            if explorer is not None:
                loop._cs_detach()
                with contextlib.suppress(RuntimeError):  # already over after an engine error
                    explorer.end(outcome)
            events.set_event_loop(None)
            loop.close()


def _cancel_all_tasks(loop: ControlledLoop) -> None:
    to_cancel = loop._cs_tasks_in_order()
    if not to_cancel:
        return
    for task in to_cancel:
        task.cancel()
    loop.run_until_complete(tasks.gather(*to_cancel, return_exceptions=True))
    for task in to_cancel:
        if task.cancelled():
            continue
        if task.exception() is not None:
            loop.call_exception_handler(
                {
                    "message": "unhandled exception during asyncio.run() shutdown",
                    "exception": task.exception(),
                    "task": task,
                }
            )


def _silence_leftovers(loop: ControlledLoop) -> None:
    """After a deadlock or budget stop the leftover tasks cannot be cancelled by running the
    loop further; drop them without the "Task was destroyed but it is pending" noise."""
    close_suspended_asyncgens(loop)  # first: closing a task may free one
    for task in loop._cs_tasks_in_order():
        task._log_destroy_pending = False
        coro = task.get_coro()
        # a coroutine that refuses to close is left to the GC
        with contextlib.suppress(Exception):
            coro.close()


def close_suspended_asyncgens(loop: ControlledLoop) -> None:
    """Closes what the loop's live async generators are suspended in (an await inside the
    generator's body), while the loop is open.  Closing the task that drove one does not close
    it (asend's close() leaves the generator suspended, and the finalizer hook only schedules
    its aclose()); the collector would, after the loop closed, and an awaitable's cleanup
    (Queue.get cancelling its getter) would then fail with "Event loop is closed", printed as
    an ignored exception."""
    for agen in loop._asyncgens.snapshot():
        inner = getattr(agen, "ag_await", None)
        close = getattr(inner, "close", None)
        if close is not None:
            with contextlib.suppress(BaseException):  # the user's cleanup; the run is over
                close()
