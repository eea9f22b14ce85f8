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
  were in the classes' ``__dict__``.  A semaphore's uncontended ``acquire``, its ``release``
  that wakes nobody and the resumption of a woken waiter are recorded finer, on the permits
  they move and its queue (see :func:`_counted` and :func:`_resumed`), so that DPOR orders them
  only where they do not commute; a FIFO queue's puts and gets likewise (:func:`_moved`), and
  an Event's operations by what they did, a blocked wait not ordered with the set that wakes
  it (:func:`_event_wrapper`).
* :class:`RecordingFuture` and :class:`RecordingTask`: asyncio's C future and task with their
  state changes (``set_result``, ``set_exception``, ``cancel``, ``add_done_callback``)
  recorded as writes and their observations (``done()``, ``result()``, ``exception()``,
  ``cancelled()``, ``await``) as reads; what a task's own steps do inside the C Task (look at
  the task, complete it) the loop core records (ext/loop.c, explorer_step).  The runner sets
  ``loop._cs_future_class`` / ``loop._cs_task_class`` to them.

With no explorer attached, or outside a step, each record is one C call that returns at once;
behaviour is never changed (every wrapper calls the original and returns what it returns).
"""

from __future__ import annotations

import asyncio
import asyncio.futures
import asyncio.tasks
import collections
import contextlib
import functools
import threading
import types
import weakref
from collections.abc import Callable, Generator, Iterator
from typing import Any, ClassVar

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
    already run to its first suspension (yielding `started`), recorded by the caller.  With
    `settled`, a resumption that finishes the coroutine is recorded after it ran, by
    ``settled(obj, site, observed)`` where ``observed = observe(obj)`` was taken before it ran;
    a resumption that suspends again or raises is a write of `kind`."""

    __slots__ = ("coro", "kind", "obj", "observe", "settled", "site", "started")

    def __init__(
        self,
        coro: Any,
        obj: Any,
        kind: int,
        site: int,
        started: Any = _NOT_STARTED,
        settled: Callable[[Any, int, Any], None] | None = None,
        observe: Callable[[Any], Any] | None = None,
    ) -> None:
        self.coro, self.obj, self.kind, self.site = coro, obj, kind, site
        self.started, self.settled, self.observe = started, settled, observe

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
        settled, observe = self.settled, self.observe
        while True:
            observed: Any = None
            if settled is None:
                _record(obj, kind, site)
            else:
                observed = observe(obj) if observe is not None else None
            try:
                if throw is not None:
                    exc, throw = throw, None
                    yielded = coro.throw(exc)
                else:
                    yielded = coro.send(send)
            except StopIteration as stop:
                if settled is not None:
                    settled(obj, site, observed)
                return stop.value
            except BaseException:
                if settled is not None:
                    _record(obj, kind, site)
                raise
            if settled is not None:
                _record(obj, kind, site)
            try:
                send = yield yielded
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # thrown in by the task (cancellation): pass it on  # noqa: BLE001
                throw = exc
                send = None


#: the keys of a semaphore (see :func:`_counted`): its counter attribute (so that code reading
#: ``sem._value`` conflicts with every update), its waiters attribute, one key per permit,
#: whether a waiter that makes ``locked()`` true is queued (not cancelled: pending, or woken and
#: not yet resumed), and whether a pending waiter (one a release would wake) is queued
_VALUE, _WAITERS, _PERMIT = "_value", "_waiters", "<permit>"
_QUEUED, _PENDING = "<queued>", "<pending>"


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


def _counted(sem: Any, site: int, observed: tuple[Any, Any], delta: int) -> None:
    """Records a semaphore operation that ran.  An acquire that took a permit without waiting
    and a release of a plain Semaphore that returned one and woke nobody are recorded on the
    permit they move; anything else is a write of the whole semaphore.

    The permits are numbered by the counter: an acquire that finds the counter at ``v`` takes
    permit ``v`` (a write of it), a release that finds it at ``v`` returns permit ``v + 1`` (an
    add to it).  So two releases never order each other, an acquire orders the release that
    returned its permit and the next acquire of that permit, and two acquires that found the
    counter at different values do not order each other.  Every update also adds to
    ``_value``, so reads of the counter (``locked()``, ``sem._value``) conflict with all of
    them.  An acquire reads whether a waiter is queued, a release whether a pending one is
    (an acquire that waits writes the whole semaphore).  Code storing into the semaphore's
    attributes writes the whole of it (the hooks' rule for every wrapped primitive).

    Why this is sound, also across DPOR's branches, where an operation observed in one state
    is compared with one observed in another: the counter moves by one per operation, and
    moving it between ``v`` and ``v - 1`` (either way) touches permit ``v``.  An acquire that
    took permit ``v`` therefore stays independent only of operations run while the counter
    stays at ``v`` or above, where it still finds room.  There, an acquire that touches another
    permit found the counter above ``v``, at 2 or more, so both find room in either order; and
    an acquire and a release commute whenever the acquire finds room.  Releases that wake
    nobody commute always: each only adds one, and none turns another into a wake-up.  Where
    this fails, the operation is a write of the whole semaphore: two acquires at one permit
    left (the same permit: ordered), a release that wakes a waiter, a BoundedSemaphore's
    release (a second one may exceed the bound)."""
    before, waiting = observed
    value = getattr(sem, "_value", None)
    if (type(before) is not int or type(value) is not int or value != before + delta
            or waiting is None or _waiting(sem) != waiting
            or (delta > 0 and isinstance(sem, asyncio.BoundedSemaphore))):  # fmt: skip
        _record(sem, W, site)
        return
    _record(sem, ADD, site, _VALUE)
    if delta < 0:
        _record(sem, W, site, (_PERMIT, before))
        _record(sem, R, site, _QUEUED)
    else:
        _record(sem, ADD, site, (_PERMIT, value))
        _record(sem, R, site, _PENDING)


def _observed(sem: Any) -> tuple[Any, Any]:
    return getattr(sem, "_value", None), _waiting(sem)


def _resumed(sem: Any, site: int, observed: tuple[Any, Any]) -> None:
    """Records the resumption of an acquire that waited and was woken: the step in which it
    takes its waiter out of the queue and returns.  When that is all it did (the counter
    unchanged, one woken waiter fewer, the pending ones unchanged), it is an add to the queued
    key: it may turn ``locked()`` false for a later acquire, and two such resumptions commute;
    and an add to the waiters attribute, so that code reading ``sem._waiters`` sees it.
    It read whether a pending waiter is queued, and, when one is, whether the counter is at 1
    or more (the permit-1 key: then it would have woken that waiter).  With no pending waiter,
    the counter does not change what it does.

    Why this holds across branches: a pending waiter is queued only by an acquire that waits
    (a write of the whole semaphore), and the counter crosses from 0 to 1 only through
    permit 1, so a resumption recorded as quiet stays quiet after every operation independent
    of it.  A cancelled pending waiter changes nothing here: this resumption wakes nobody at a
    counter of 0.  Anything else -- it woke a waiter, took a permit, raised -- is a write of
    the whole semaphore."""
    before, waiting = observed
    value, after = _observed(sem)
    if (type(value) is not int or value != before or waiting is None or after is None
            or after != (waiting[0] - 1, waiting[1]) or (waiting[1] and value != 0)):  # fmt: skip
        _record(sem, W, site)
        return
    _record(sem, ADD, site, _QUEUED)
    _record(sem, ADD, site, _WAITERS)
    _record(sem, R, site, _PENDING)
    if waiting[1]:
        _record(sem, R, site, (_PERMIT, 1))


def _acquired(sem: Any, site: int, observed: tuple[Any, Any]) -> None:
    _counted(sem, site, observed, -1)


def _released(sem: Any, site: int, observed: tuple[Any, Any]) -> None:
    _counted(sem, site, observed, +1)


#: the keys of a FIFO queue (see :func:`_moved`): its items attribute (so that code reading
#: ``q._queue`` conflicts with every put and get), its two ends, one key per length (the
#: item at that position) and, bounded, one per free slot, its waiters attributes and its count
#: of unfinished items
_ITEMS, _TAIL, _HEAD, _LENGTH, _FREE = "_queue", "<tail>", "<head>", "<length>", "<free>"
_GETTERS, _PUTTERS, _UNFINISHED = "_getters", "_putters", "_unfinished_tasks"
_FIFO_PUT, _FIFO_GET = asyncio.Queue._put, asyncio.Queue._get  # type: ignore[attr-defined]


def _queue_state(q: Any) -> tuple[int, int, int] | None:
    """(items, waiting getters, waiting putters) of a FIFO queue, or None when it is not one
    whose internals this module knows (a LifoQueue, a PriorityQueue, a subclass with its own
    ``_put`` or ``_get``: then every operation is a write of the whole queue)."""
    t = type(q)
    if getattr(t, "_put", None) is not _FIFO_PUT or getattr(t, "_get", None) is not _FIFO_GET:
        return None
    try:
        return len(q._queue), len(q._getters), len(q._putters)
    except (AttributeError, TypeError):
        return None


def _moved(q: Any, site: int, observed: tuple[int, int, int] | None, delta: int) -> None:
    """Records a ``put_nowait`` (delta +1) or ``get_nowait`` (-1) that returned.  On a FIFO
    queue with nobody waiting on either side, a put writes the tail and a get the head: two
    puts order each other (the order of the items), two gets too (who gets which).  Between a
    put and a get, the queue's length is a counter, numbered as a semaphore's permits are (see
    :func:`_counted`): a put that finds ``n`` items adds to length key ``n + 1``, a get that
    finds ``n`` writes length key ``n``; bounded, a put that finds ``f`` free slots writes free
    key ``f`` and a get adds to free key ``f + 1``.  So a put and a get order each other where
    the length (the free slots) crossed the same boundary, and commute where they did not: a
    get from a queue of 3 items and a put into it of 1 item do not order each other.  Each reads
    both waiter lists (a waiting put or get writes the whole queue) and adds to the items
    attribute (code reading ``q._queue`` conflicts with both); a put adds to the count of
    unfinished items (``task_done()`` and ``join()`` access the whole queue).

    Why across DPOR's branches: the length moves by one per operation, and moving it between
    ``n - 1`` and ``n`` (either way) touches length key ``n``, so a get that found ``n`` items
    stays independent only of operations run while the length stays at ``n`` or above, where
    it still finds one; likewise a put and the free slots.  One key for "empty or not" is not
    enough: it missed a put that let a second get succeed after the first one took the item
    that was there (found by comparing with brute force on every program of two jobs of up to
    two operations).  Anything else -- a waiter woken, a full or empty queue, another queue type --
    is a write of the whole queue."""
    after = _queue_state(q)
    if (
        observed is None
        or after is None
        or observed[1:] != (0, 0)
        or after != (observed[0] + delta, 0, 0)
    ):
        _record(q, W, site)
        return
    length = observed[0]  # before
    bound = q.maxsize if type(q.maxsize) is int and q.maxsize > 0 else 0
    _record(q, ADD, site, _ITEMS)
    _record(q, R, site, _GETTERS)
    _record(q, R, site, _PUTTERS)
    if delta > 0:
        _record(q, W, site, _TAIL)
        _record(q, ADD, site, _UNFINISHED)
        _record(q, ADD, site, (_LENGTH, length + 1))
        if bound:
            _record(q, W, site, (_FREE, bound - length))
    else:
        _record(q, W, site, _HEAD)
        _record(q, W, site, (_LENGTH, length))
        if bound:
            _record(q, ADD, site, (_FREE, bound - length + 1))


def _put(q: Any, site: int, observed: tuple[int, int, int] | None) -> None:
    _moved(q, site, observed, +1)


def _got(q: Any, site: int, observed: tuple[int, int, int] | None) -> None:
    _moved(q, site, observed, -1)


#: the keys of an Event (see :func:`_event_method`): whether it is set, whether it was cleared
#: (what a wait that blocks read), and its two attributes (so that code reading them conflicts
#: with the operations that change them)
_IS_SET, _CLEARED, _EV_VALUE, _EV_WAITERS = "<set>", "<cleared>", "_value", "_waiters"
_EVENT_METHODS = ("wait", "set", "clear", "is_set")
#: the futures Event.wait registered (the wrapper saw each one suspend on its future), each
#: with a weak reference to the task that waits on it (a strong one would keep a task blocked
#: forever, and its future, alive for good): a set() completes them as part of its own
#: operation, recorded by it
_event_futures: weakref.WeakKeyDictionary[Any, weakref.ref[Any]] = weakref.WeakKeyDictionary()


def _plain_event(ev: Any) -> bool:
    """An Event whose methods are asyncio's own (the wrappers) and whose internals are the
    ones this module knows; any other is recorded as a whole object."""
    t = type(ev)
    if t is not asyncio.Event:
        wrapped = vars(asyncio.Event)
        if any(getattr(t, n, None) is not wrapped.get(n) for n in _EVENT_METHODS):
            return False
    try:
        return type(ev._value) is bool and type(ev._waiters) is collections.deque
    except AttributeError:
        return False


def _waiting_task(fut: Any) -> Any:
    """The task waiting on a future a wrapped Event.wait registered, or None."""
    ref = _event_futures.get(fut)
    return ref() if ref is not None else None


def _event_wrapper(cls: type, name: str, orig: Any) -> Any:
    """Event's operations, recorded by what they did.

    * ``wait()`` that finds it set reads the set key; one that blocks reads the cleared key
      and adds to the waiters (its resumption, when woken, adds to them again: it leaves);
    * ``set()`` that sets it writes the set key and the waiters (and adds to the value),
      completing the blocked waiters' futures as part of it (their records quiet); one that
      finds it set reads the set key;
    * ``clear()`` that clears it writes both keys (and adds to the value); one that finds it
      clear reads the set key; ``is_set()`` reads the set key.

    So two waits, blocking or passing, do not order each other: swapped, each does what it
    did (a blocking wait still blocks, its wake-up an actor of its own).  A blocking wait and
    the set that wakes it are ordered (the wait's add to the waiters, the set's write of
    them): swapped, the wait would pass at once.  Recorded as independent, on the argument
    that the blocking order covers the passing one (the blocking step runs the code before
    the wait, the woken step the code after it), they were unsafe although that argument
    holds for outcomes: DPOR's wakeup sequences swap independent steps, and a sequence built
    where a wait blocked then prescribed its task's next step where the swap had made the
    wait pass (a divergence, found under --jobs on generated programs).  The clear() between a set and a waiter's next
    step is what the cleared key orders: a waiter woken by the set goes on, one that had not
    blocked yet blocks.  A set also reads each waiting task (a quiet set reaches it through
    its future): a cancel() of the task before the set makes the wait raise, after the set it
    may come after the task woke and finished, so the two are ordered (found by the generated
    programs).  A woken wait that raises writes the whole event.  Code reading ``ev._value``
    or ``ev._waiters`` conflicts with what changes them; code storing into the event writes
    all of it (the hooks' rule).  tests:
    test_dpor_primitives.py compares DPOR with brute force on generated Event programs."""
    site = _site(cls, name)

    if name == "wait":

        def resumed(ev: Any, site: int, observed: Any) -> None:
            _record(ev, ADD, site, _EV_WAITERS)

        @functools.wraps(orig)
        async def wait(self: Any) -> Any:
            if not _plain_event(self):
                return await _Resuming(orig(self), self, W, site)
            coro = orig(self)
            try:
                started = coro.send(None)
            except StopIteration as stop:
                _record(self, R, site, _IS_SET)
                return stop.value
            except BaseException:
                _record(self, W, site)
                raise
            _record(self, R, site, _CLEARED)
            _record(self, ADD, site, _EV_WAITERS)
            task = asyncio.current_task()
            if asyncio.isfuture(started) and task is not None:
                _event_futures[started] = weakref.ref(task)
            return await _Resuming(coro, self, W, site, started, resumed)

        return wait

    @functools.wraps(orig)
    def operation(self: Any) -> Any:
        if not _plain_event(self):
            _record(self, W, site)
            return orig(self)
        before = self._value
        # the waiters' futures completed quietly only when every one is a wait's: a future
        # put there by other code keeps its own records (and orders the set with its waiter)
        waiting = [_waiting_task(f) for f in self._waiters] if name == "set" else []
        quiet = name == "set" and not before and None not in waiting
        was = _core.quiet_futures(True) if quiet else False
        try:
            result = orig(self)
        except BaseException:
            _record(self, W, site)
            raise
        finally:
            if quiet:
                _core.quiet_futures(was)
        if name == "is_set" or (name == "set") == before:  # a query, or nothing changed
            _record(self, R, site, _IS_SET)
        elif name == "set":
            _record(self, W, site, _IS_SET)
            _record(self, ADD, site, _EV_VALUE)
            _record(self, W, site, _EV_WAITERS)
            if quiet:
                # it may wake each waiter before anything else reaches its task: a cancel()
                # of that task (which writes it) orders itself with the set
                for task in waiting:
                    _record(task, R, site)
        else:  # a clear that cleared it
            _record(self, W, site, _IS_SET)
            _record(self, W, site, _CLEARED)
            _record(self, ADD, site, _EV_VALUE)
        return result

    return operation


Settle = Callable[[Any, int, Any], None]


def _settling_method(
    observe: Callable[[Any], Any], settle: Settle
) -> Callable[[type, str, Any], Any]:
    """A wrapper of an immediate method recorded by what it did: ``settle(obj, site,
    observed)`` after it returned, with ``observed = observe(obj)`` taken before it ran; one
    that raises writes the whole primitive."""

    def wrap(cls: type, name: str, orig: Any) -> Any:
        site = _site(cls, name)

        @functools.wraps(orig)
        def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            global _operating
            observed = observe(self)
            outer, _operating = _operating, self
            try:
                result = orig(self, *args, **kwargs)
            except BaseException:
                _record(self, W, site)
                raise
            finally:
                _operating = outer
            settle(self, site, observed)
            return result

        return method

    return wrap


def _settling_coroutine(
    observe: Callable[[Any], Any] | None,
    settle: Settle | None,
    resumed: Settle | None = None,
) -> Callable[[type, str, Any], Any]:
    """A wrapper of an awaiting method whose run to its first suspension, when it returns
    there, is recorded by ``settle(obj, site, observe(obj))`` (None: by the methods it called,
    themselves wrapped).  One that suspends writes the whole primitive (it waits: the waiters
    change), and so does each resumption, unless ``resumed`` records the one that returns (see
    :class:`_Resuming`).  Its own calls of the primitive's queries are part of the
    operation."""

    def wrap(cls: type, name: str, orig: Any) -> Any:
        site = _site(cls, name)

        @functools.wraps(orig)
        async def method(self: Any, *args: Any, **kwargs: Any) -> Any:
            global _operating
            observed = observe(self) if observe is not None else None
            coro = orig(self, *args, **kwargs)
            outer, _operating = _operating, self
            try:
                started = coro.send(None)
            except StopIteration as stop:
                if settle is not None:
                    settle(self, site, observed)
                return stop.value
            except BaseException:
                _record(self, W, site)
                raise
            finally:
                _operating = outer
            _record(self, W, site)
            return await _Resuming(coro, self, W, site, started, resumed, observe)

        return method

    return wrap


#: (class, method) -> a wrapper finer than _wrap's
_SPECIAL: dict[tuple[type, str], Callable[[type, str, Any], Any]] = {
    (asyncio.Semaphore, "acquire"): _settling_coroutine(_observed, _acquired, _resumed),
    (asyncio.Semaphore, "release"): _settling_method(_observed, _released),
    (asyncio.BoundedSemaphore, "release"): _settling_method(_observed, _released),
    # put() and get() that do not wait call put_nowait() / get_nowait(), which record
    (asyncio.Queue, "put"): _settling_coroutine(None, None),
    (asyncio.Queue, "get"): _settling_coroutine(None, None),
    (asyncio.Queue, "put_nowait"): _settling_method(_queue_state, _put),
    (asyncio.Queue, "get_nowait"): _settling_method(_queue_state, _got),
    **{(asyncio.Event, name): _event_wrapper for name in _EVENT_METHODS},
}


def _wrap(cls: type, name: str, orig: Any, kind: int) -> Any:
    special = _SPECIAL.get((cls, name))
    if special is not None:
        return special(cls, name, orig)
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
_SPEC_CLASSES = tuple(SPEC)
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


class _Plan:
    """The wrappers the last install set, as a list in SPEC's order and as the set handed to
    the hooks: an exploration installs once per phase, and the next install that sets the
    same wrappers reuses the set."""

    wrappers: ClassVar[list[Any]] = []
    registered: frozenset[Any] = frozenset()


def install() -> int:
    """Wraps the primitives' methods (nested calls only count).  Returns a token for
    :func:`uninstall`."""
    global _depth
    with _lock:
        _depth += 1
        if _depth == 1:
            wrappers = []
            for cls, methods in SPEC.items():
                for name, kind in methods.items():
                    orig = cls.__dict__.get(name)
                    if orig is None:
                        continue
                    _saved.append((cls, name, orig))
                    wrapper = _wrapper_of(cls, name, orig, kind)
                    wrappers.append(wrapper)
                    setattr(cls, name, wrapper)
            if wrappers != _Plan.wrappers:
                _Plan.wrappers, _Plan.registered = wrappers, frozenset(wrappers)
            # a call site of a wrapped method records only the attribute it looks up, not a
            # write of the whole receiver: the wrapper records the primitive's state itself,
            # under keys of its own, so code storing into a primitive's attribute writes all
            _core.set_self_recording(_Plan.registered, _SPEC_CLASSES)
        return _depth


def uninstall(token: int | None = None) -> None:
    """Undoes one :func:`install`; the last one restores the original methods exactly."""
    global _depth
    with _lock:
        if _depth == 0:
            return
        _depth -= 1
        if _depth == 0:
            _core.set_self_recording(None, None)
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

#: asyncio's C Future and Task (the _asyncio accelerator, which compat requires): the bases of
#: the recording classes, so that a task's steps, its wake-ups and the futures' callbacks run
#: in C as on the stock loop
_CFuture: type = asyncio.futures.Future
_CTask: type = asyncio.tasks.Task


def _fsite(cls: str, name: str) -> int:
    return sites.register("<asyncio>", 0, 0, f"{cls}.{name}()", f"asyncio.{cls}", "sync")


_F = {n: _fsite("Future", n) for n in (
    "set_result", "set_exception", "cancel", "add_done_callback", "remove_done_callback",
    "done", "result", "exception", "cancelled", "complete", "create", "await")}  # fmt: skip
_T = {n: _fsite("Task", n) for n in (*_F, "step")}
_core.set_task_sites(_T["step"], _T["complete"])
_core.set_library_site_maker(sites.library_frame)


class _SyncExit:
    """What `with x:` enters when x's __enter__ / __exit__ are code that does not record
    itself (ext/hooks.c cx): x's own methods, and at the exit, in the step that runs it (the
    body may have awaited), the write of x that cx records at the entry."""

    __slots__ = ("cm", "site")

    def __init__(self, cm: Any, site: int) -> None:
        self.cm, self.site = cm, site

    def __enter__(self) -> Any:
        return type(self.cm).__enter__(self.cm)

    def __exit__(self, *exc: object) -> Any:
        _core.cx(self.cm, self.site)
        return type(self.cm).__exit__(self.cm, *exc)


class _AsyncExit:
    """_SyncExit for `async with`: the awaitables are x's own (no frame of ours between)."""

    __slots__ = ("cm", "site")

    def __init__(self, cm: Any, site: int) -> None:
        self.cm, self.site = cm, site

    def __aenter__(self) -> Any:
        return type(self.cm).__aenter__(self.cm)

    def __aexit__(self, *exc: object) -> Any:
        _core.cx(self.cm, self.site)
        return type(self.cm).__aexit__(self.cm, *exc)


def _exit_recorded(cm: Any, site: int, protocol: int) -> Any:
    """The proxy `with` (protocol 0) or `async with` (1) enters for cm; cm itself when its
    type lacks that protocol, so that the statement fails with Python's own TypeError."""
    t = type(cm)
    if protocol:
        ok = hasattr(t, "__aenter__") and hasattr(t, "__aexit__")
        return _AsyncExit(cm, site) if ok else cm
    ok = hasattr(t, "__enter__") and hasattr(t, "__exit__")
    return _SyncExit(cm, site) if ok else cm


_core.set_cx_exit_maker(_exit_recorded)


#: when a list: a weak reference to every RecordingTask created is appended to it, so that the
#: end of an execution can judge each of its tasks still alive, in creation order, while a task
#: the program dropped is freed as on the stock loop (the runner sets it for the time of one
#: execution; the loop holds a task that ended with an AssertionError)
tracker: list[Any] | None = None


_M = _core.RecordingMethod

#: the methods a Future and a Task share that record, with their access kind (what changes the
#: state writes, what observes it reads), the key of their site in _F / _T and the recording
#: method's flags (a Future's cancel is set apart: it completes the future, a Task's does not)
_SHARED_METHODS: tuple[tuple[str, int, str, int], ...] = (
    ("add_done_callback", W, "add_done_callback", _core.REGISTERS),
    ("remove_done_callback", W, "remove_done_callback", 0),
    ("done", R, "done", _core.STATE),
    ("result", R, "result", _core.STATE),
    ("exception", R, "exception", _core.STATE),
    ("cancelled", R, "cancelled", _core.STATE),
    ("__await__", R, "await", _core.AWAITS),
    ("__iter__", R, "await", _core.AWAITS),
)


def _record_shared_methods(cls: type, base: type, sites: dict[str, int]) -> None:
    for name, kind, site, flags in _SHARED_METHODS:
        setattr(cls, name, _M(getattr(base, name), kind, sites[site], flags))


def _future_keys() -> tuple[str, ...]:
    """The keys a completion writes: the state key, then every C-level attribute of asyncio's
    Future and Task but ``_callbacks`` (code reading ``f._result`` or ``t._fut_waiter``
    names one of them; the completion is the one change of them no step records otherwise)."""
    names = {
        name
        for cls in (_CFuture, _CTask)
        for name, attr in vars(cls).items()
        if isinstance(attr, (types.GetSetDescriptorType, types.MemberDescriptorType))
    }
    return (_STATE, *sorted(names - {_CALLBACKS}))


_STATE, _CALLBACKS = "<state>", "_callbacks"


class RecordingFuture(_CFuture):  # type: ignore[misc, valid-type]
    """asyncio's Future whose state changes and observations are accesses.

    The C Future calls no Python-level method of its own, so every observation and change
    made through its methods is here, and the C Task's wake-up of a future that is not of the
    exact C type calls its result(), a read.  Each method records, then calls the C Future's
    (ext/recording.c; the creation is recorded once the future exists); the methods it shares
    with RecordingTask are set from _SHARED_METHODS.  Observations of its state (``done()``,
    ``result()``, ``exception()``, ``cancelled()``, an ``await`` of a done future) read the
    state key.  Changes write the whole future, except for two, recorded by what they did:

    * the completion (set_result, set_exception, a cancel of a pending future, a task's step
      that finishes it: ext/loop.c) writes the state keys (_future_keys: the state key and
      what ``f._result``, ``t._fut_waiter``, ... name) and the callbacks (``_callbacks``);
    * an ``await`` that finds the future pending, and the registration of the awaiting task's
      wake-up that follows it in the same step, are one add to the callbacks (a pending
      await without that registration writes the whole future at the step's end: it saw the
      state, and left the future's blocking flag set, which makes the next await of it raise).

    So two tasks blocking on one future commute: swapped, each still blocks, and their
    wake-ups are actors of their own whose order the explorer chooses, so the registrations'
    order decides nothing (code reading ``f._callbacks`` conflicts with the adds).  A task's
    own steps read only its state key, so its steps before the completion do not order
    themselves with the registrations either.  N awaiters of one task take 2^N executions
    (each blocks before the completion or passes after it), not N! times that.  A blocking
    await stays ordered with the completion that wakes it (as an Event's wait with its set:
    _event_wrapper): treating the two as independent made DPOR swap them in its wakeup
    sequences, which turns the blocking await into a passing one, and a sequence then
    prescribed the task's next step while it was blocked on another future (a divergence,
    under --jobs); recording the pair as ordered but never reversed hid the races of the
    steps it ordered (outcomes were lost).  tests: test_dpor_futures.py compares DPOR with
    brute force on generated programs of shared futures and tasks."""

    __init__ = _M(_CFuture.__init__, W | CREATED, _F["create"], _core.RECORD_AFTER)
    set_result = _M(_CFuture.set_result, W, _F["set_result"], _core.COMPLETES)
    set_exception = _M(_CFuture.set_exception, W, _F["set_exception"], _core.COMPLETES)
    cancel = _M(_CFuture.cancel, W, _F["cancel"], _core.COMPLETES)


class RecordingTask(_CTask):  # type: ignore[misc, valid-type]
    """asyncio's C Task, recorded like :class:`RecordingFuture`.  Its steps, its wake-ups and
    its completion run inside the C Task, where no Python method sees them: the loop core
    records them for every task step (ext/loop.c, explorer_step: a read of the task's state
    key when the step begins, its completion when the step completes it).  A task made while
    ``tracker`` is a list is appended to it, weakly."""

    __init__ = _M(
        _CTask.__init__, W | CREATED, _T["create"], _core.RECORD_AFTER | _core.TRACK, globals()
    )
    cancel = _M(_CTask.cancel, W, _T["cancel"])


_record_shared_methods(RecordingFuture, _CFuture, _F)
_record_shared_methods(RecordingTask, _CTask, _T)
_core.set_future_keys(_future_keys(), _CALLBACKS)
