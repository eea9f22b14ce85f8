"""asyncio's own synchronisation, made visible to the engine as accesses.

Two parts:

* :func:`install` / :func:`uninstall` (or the :func:`installed` context manager) wrap the public
  methods of ``asyncio.Lock``, ``Event``, ``Condition``, ``Semaphore``, ``BoundedSemaphore``,
  ``Barrier`` and ``Queue`` (``PriorityQueue`` and ``LifoQueue`` inherit them) so that every
  operation records an access to the primitive as a whole object: a write for what changes or
  waits on its state, a read for pure queries (``locked()``, ``is_set()``, ``qsize()``...).  The
  paths that never yield are covered (an uncontended ``acquire``, ``get`` on a non-empty queue,
  ``wait`` on a set event), and an awaiting method records again each time it resumes, in the
  step it resumes in.  Installation nests; the last uninstall puts back the very objects that
  were in the classes' ``__dict__``.  A semaphore's uncontended ``acquire`` and a ``release``
  that wakes nobody are recorded finer, on its counter (see :func:`_counted`), so that two
  releases of a plain Semaphore that wake nobody do not order each other.
* :class:`RecordingFuture` and :class:`RecordingTask`: the pure-Python future and task with their
  state changes (``set_result``, ``set_exception``, ``cancel``, completion,
  ``add_done_callback``) recorded as writes and their observations (``done()``, ``result()``,
  ``exception()``, ``cancelled()``, awaiting a done future) as reads.  The runner sets
  ``loop._cs_future_class`` / ``loop._cs_task_class`` to them.

With no explorer attached, or outside a step, each record is one C call that returns at once;
behaviour is never changed (every wrapper calls the original and returns what it returns).
"""

from __future__ import annotations

import asyncio
import asyncio.futures
import asyncio.tasks
import contextlib
import functools
import threading
from collections.abc import Callable, Generator, Iterator
from typing import Any

from chaossloth import _core
from chaossloth.capture import sites

R, W, ADD = 1, 2, _core.ADD
#: or-ed into a kind: the object was created by the current step, so the engine can name it
#: by the step that created it, the same in every execution (see CS_ID_CREATED)
CREATED: int = _core.ID_CREATED
_record = _core.record

#: class -> {method name: access kind}; awaiting methods are detected (coroutine functions)
SPEC: dict[type, dict[str, int]] = {
    asyncio.Lock: {"acquire": W, "release": W, "locked": R},
    asyncio.Event: {"set": W, "clear": W, "wait": R, "is_set": R},
    # Condition binds acquire/release/locked of its lock at __init__: those are the Lock's
    asyncio.Condition: {"wait": W, "wait_for": W, "notify": W, "notify_all": W},
    asyncio.Semaphore: {"acquire": W, "release": W, "locked": R},
    asyncio.BoundedSemaphore: {"release": W},
    asyncio.Barrier: {"wait": W, "reset": W, "abort": W},
    asyncio.Queue: {
        "put": W, "get": W, "put_nowait": W, "get_nowait": W, "task_done": W, "join": R,
        "qsize": R, "empty": R, "full": R,
    },
    # structured concurrency keeps its own uninstrumented state (children, errors, the parent's
    # cancellation, the deadline): every entry point is a write of the group / timeout object
    asyncio.TaskGroup: {"__aenter__": W, "__aexit__": W, "create_task": W},
    asyncio.Timeout: {"__aenter__": W, "__aexit__": W, "reschedule": W, "when": R, "expired": R},
}  # fmt: skip


def _site(cls: type, name: str) -> int:
    return sites.register("<asyncio>", 0, 0, f"asyncio.{cls.__name__}.{name}()",
                          f"asyncio.{cls.__name__}", "sync")  # fmt: skip


#: _Resuming's `started` when the coroutine has not run yet (a first suspension may yield None)
_NOT_STARTED: Any = object()


class _Resuming:
    """Awaitable that drives a coroutine and records an access of `obj` before it starts and
    each time it resumes (every resumption is a later step).  With `started`, the coroutine has
    already run to its first suspension (yielding `started`), recorded by the caller."""

    __slots__ = ("coro", "kind", "obj", "site", "started")

    def __init__(
        self, coro: Any, obj: Any, kind: int, site: int, started: Any = _NOT_STARTED
    ) -> None:
        self.coro, self.obj, self.kind, self.site = coro, obj, kind, site
        self.started = started

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, obj, kind, site = self.coro, self.obj, self.kind, self.site
        send: Any = None
        throw: BaseException | None = None
        if self.started is not _NOT_STARTED:
            started, self.started = self.started, _NOT_STARTED
            try:
                send = yield started
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # noqa: BLE001
                throw = exc
        while True:
            _record(obj, kind, site)
            try:
                if throw is not None:
                    exc, throw = throw, None
                    yielded = coro.throw(exc)
                else:
                    yielded = coro.send(send)
            except StopIteration as stop:
                return stop.value
            try:
                send = yield yielded
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # thrown in by the task (cancellation): pass it on  # noqa: BLE001
                throw = exc
                send = None


#: the keys of a semaphore's counter: its attribute (so that code reading ``sem._value``
#: conflicts with every update), and one per direction of update
_VALUE, _DEC, _INC, _WAITERS = "_value", "<acquired>", "<released>", "_waiters"


def _waiting(sem: Any) -> tuple[int, int] | None:
    """(waiters, pending waiters) of a semaphore, or None when its internals are not the ones
    this module knows (then every operation is a write of the whole semaphore)."""
    try:
        ws = sem._waiters
        if not ws:
            return (0, 0)
        return (len(ws), sum(1 for w in ws if w._state == "PENDING"))
    except (AttributeError, TypeError):
        return None


#: the semaphore whose acquire or release is running its stock code now: its own calls of
#: ``locked()`` are part of that operation, recorded by :func:`_counted`, not reads of their own
_operating: Any = None


def _counted(sem: Any, before: Any, waiting: Any, delta: int, site: int) -> None:
    """Records a semaphore operation that ran.  A release of a plain Semaphore that added one
    to the counter and woke nobody is a commutative update of the counter; an acquire that
    took one without waiting updates it too but orders every other acquire; anything else is
    a write of the whole semaphore.

    Why releases that wake nobody commute: each only adds one, and running one never turns
    another into something else (a release never makes a waiter), in any state where both can
    run, so DPOR may treat them as independent even across branches.  Acquires do not commute
    with each other: two acquires that each find room alone may not both find it (with one
    permit left the second waits).  A BoundedSemaphore's releases do not either (the second
    may exceed the bound).  An acquire and a release do not commute (the acquire may have
    needed the release's permit): the acquire writes its key, which the release reads, and
    reads the release's key, to which the release adds.  Both read the waiters (a waiting
    acquire or a resumption writes the whole semaphore).  Reads of the counter itself
    (``locked()``, ``sem._value``) conflict with both."""
    value = getattr(sem, "_value", None)
    if (type(before) is not int or type(value) is not int or value != before + delta
            or waiting is None or _waiting(sem) != waiting
            or (delta > 0 and isinstance(sem, asyncio.BoundedSemaphore))):  # fmt: skip
        _record(sem, W, site)
        return
    _record(sem, ADD, site, _VALUE)
    if delta < 0:
        _record(sem, W, site, _DEC)
        _record(sem, R, site, _INC)
    else:
        _record(sem, ADD, site, _INC)
        _record(sem, R, site, _DEC)
    _record(sem, R, site, _WAITERS)


def _wrap_semaphore_acquire(cls: type, orig: Any) -> Any:
    site = _site(cls, "acquire")

    @functools.wraps(orig)
    async def acquire(self: Any, *args: Any, **kwargs: Any) -> Any:
        global _operating
        before, waiting = getattr(self, "_value", None), _waiting(self)
        coro = orig(self, *args, **kwargs)
        outer, _operating = _operating, self
        try:
            started = coro.send(None)
        except StopIteration as stop:
            _counted(self, before, waiting, -1, site)
            return stop.value
        except BaseException:
            _record(self, W, site)
            raise
        finally:
            _operating = outer
        _record(self, W, site)  # it waits: the waiters change
        return await _Resuming(coro, self, W, site, started)

    return acquire


def _wrap_semaphore_release(cls: type, orig: Any) -> Any:
    site = _site(cls, "release")

    @functools.wraps(orig)
    def release(self: Any) -> Any:
        global _operating
        before, waiting = getattr(self, "_value", None), _waiting(self)
        outer, _operating = _operating, self
        try:
            result = orig(self)
        except BaseException:
            _record(self, W, site)
            raise
        finally:
            _operating = outer
        _counted(self, before, waiting, +1, site)
        return result

    return release


#: (class, method) -> a wrapper finer than _wrap's
_SPECIAL: dict[tuple[type, str], Callable[[type, Any], Any]] = {
    (asyncio.Semaphore, "acquire"): _wrap_semaphore_acquire,
    (asyncio.Semaphore, "release"): _wrap_semaphore_release,
    (asyncio.BoundedSemaphore, "release"): _wrap_semaphore_release,
}


def _wrap(cls: type, name: str, orig: Any, kind: int) -> Any:
    special = _SPECIAL.get((cls, name))
    if special is not None:
        return special(cls, orig)
    site = _site(cls, name)
    if asyncio.iscoroutinefunction(orig):

        @functools.wraps(orig)
        async def awaiting(self: Any, *args: Any, **kwargs: Any) -> Any:
            return await _Resuming(orig(self, *args, **kwargs), self, kind, site)

        return awaiting

    @functools.wraps(orig)
    def immediate(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self is not _operating:
            _record(self, kind, site)
        return orig(self, *args, **kwargs)

    return immediate


_lock = threading.Lock()
_depth = 0
_saved: list[tuple[type, str, Any]] = []
#: (class, method) -> (original, its wrapper): an exploration installs once per execution, and
#: building the wrappers (and registering their sites) each time cost more than the execution
_wrappers: dict[tuple[type, str], tuple[Any, Any]] = {}


def _wrapper_of(cls: type, name: str, orig: Any, kind: int) -> Any:
    known = _wrappers.get((cls, name))
    if known is not None and known[0] is orig:
        return known[1]
    w = _wrap(cls, name, orig, kind)
    _wrappers[(cls, name)] = (orig, w)
    return w


def install() -> int:
    """Wraps the primitives' methods (nested calls only count).  Returns a token for
    :func:`uninstall`."""
    global _depth
    with _lock:
        _depth += 1
        if _depth == 1:
            for cls, methods in SPEC.items():
                for name, kind in methods.items():
                    orig = cls.__dict__.get(name)
                    if orig is None:
                        continue
                    _saved.append((cls, name, orig))
                    setattr(cls, name, _wrapper_of(cls, name, orig, kind))
        return _depth


def uninstall(token: int | None = None) -> None:
    """Undoes one :func:`install`; the last one restores the original methods exactly."""
    global _depth
    with _lock:
        if _depth == 0:
            return
        _depth -= 1
        if _depth == 0:
            while _saved:
                cls, name, orig = _saved.pop()
                setattr(cls, name, orig)


def is_installed() -> bool:
    return _depth > 0


@contextlib.contextmanager
def installed() -> Iterator[None]:
    """``with installed():`` the primitives record their operations."""
    token = install()
    try:
        yield
    finally:
        uninstall(token)


# ------------------------------------------------------------------ futures and tasks

_PyFuture: type = asyncio.futures._PyFuture  # type: ignore[attr-defined]
_PyTask: type = asyncio.tasks._PyTask  # type: ignore[attr-defined]


def _fsite(cls: str, name: str) -> int:
    return sites.register("<asyncio>", 0, 0, f"{cls}.{name}()", f"asyncio.{cls}", "sync")


_F = {n: _fsite("Future", n) for n in (
    "set_result", "set_exception", "cancel", "add_done_callback", "remove_done_callback",
    "done", "result", "exception", "cancelled", "complete", "create")}  # fmt: skip
_T = {n: _fsite("Task", n) for n in _F}


#: when a list: every RecordingTask created is appended to it (strongly held), so that the end
#: of an execution can judge each of its tasks even if the program dropped it (the runner sets
#: it for the time of one execution)
tracker: list[Any] | None = None


class RecordingFuture(_PyFuture):  # type: ignore[misc, valid-type]
    """asyncio's pure-Python Future whose state changes and observations are accesses."""

    def __init__(self, *, loop: Any = None) -> None:
        _PyFuture.__init__(self, loop=loop)
        _record(self, W | CREATED, _F["create"])

    def set_result(self, result: Any) -> None:
        _record(self, W, _F["set_result"])
        _PyFuture.set_result(self, result)

    def set_exception(self, exception: Any) -> None:
        _record(self, W, _F["set_exception"])
        _PyFuture.set_exception(self, exception)

    def cancel(self, msg: Any = None) -> bool:
        _record(self, W, _F["cancel"])
        return _PyFuture.cancel(self, msg=msg)

    def add_done_callback(self, fn: Callable[..., Any], *, context: Any = None) -> None:
        _record(self, W, _F["add_done_callback"])
        _PyFuture.add_done_callback(self, fn, context=context)

    def remove_done_callback(self, fn: Callable[..., Any]) -> int:
        _record(self, W, _F["remove_done_callback"])
        return _PyFuture.remove_done_callback(self, fn)

    def done(self) -> bool:
        _record(self, R, _F["done"])
        return _PyFuture.done(self)

    def result(self) -> Any:
        _record(self, R, _F["result"])
        return _PyFuture.result(self)

    def exception(self) -> Any:
        _record(self, R, _F["exception"])
        return _PyFuture.exception(self)

    def cancelled(self) -> bool:
        _record(self, R, _F["cancelled"])
        return _PyFuture.cancelled(self)


class RecordingTask(_PyTask):  # type: ignore[misc, valid-type]
    """asyncio's pure-Python Task, recorded like :class:`RecordingFuture`.  A task completes
    through ``Future.set_result`` called from its own step (bypassing Task.set_result), so its
    completion is recorded where every completion goes: scheduling the done-callbacks."""

    def __init__(self, coro: Any, *, loop: Any = None, name: Any = None, context: Any = None):
        _PyTask.__init__(self, coro, loop=loop, name=name, context=context)
        _record(self, W | CREATED, _T["create"])
        if tracker is not None:
            tracker.append(self)

    def _Future__schedule_callbacks(self) -> None:
        _record(self, W, _T["complete"])
        _PyTask._Future__schedule_callbacks(self)  # type: ignore[misc]

    def cancel(self, msg: Any = None) -> bool:
        _record(self, W, _T["cancel"])
        return _PyTask.cancel(self, msg=msg)

    def add_done_callback(self, fn: Callable[..., Any], *, context: Any = None) -> None:
        _record(self, W, _T["add_done_callback"])
        _PyTask.add_done_callback(self, fn, context=context)

    def remove_done_callback(self, fn: Callable[..., Any]) -> int:
        _record(self, W, _T["remove_done_callback"])
        return _PyTask.remove_done_callback(self, fn)

    def done(self) -> bool:
        _record(self, R, _T["done"])
        return _PyTask.done(self)

    def result(self) -> Any:
        _record(self, R, _T["result"])
        return _PyTask.result(self)

    def exception(self) -> Any:
        _record(self, R, _T["exception"])
        return _PyTask.exception(self)

    def cancelled(self) -> bool:
        _record(self, R, _T["cancelled"])
        return _PyTask.cancelled(self)
