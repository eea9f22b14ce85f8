"""The program's randomness, made part of the schedule: every execution draws the same numbers.

A program that draws random numbers (retry jitter, a shuffled pool, a sampled id) would otherwise
behave differently in each execution of one schedule, which DPOR's replay check and replays in
another process report as nondeterminism, so such a program could never be explored.  As
Hypothesis does for its examples, the module-level generator of :mod:`random` is seeded here:

- when a program starts loading (:func:`begin`), the generator is seeded with ``SEED`` (the
  process's own state is kept, and put back by :func:`end`); the program's imports then run,
  and a ``random.seed(...)`` of theirs prevails;
- once they ran (:func:`loaded`) its state is recorded, and :func:`reset` puts it back before
  every execution: the same draws in every execution, and in every process (a schedule file
  replays them);
- ``uuid.uuid4`` and the ``secrets`` module draw from ``os.urandom``, which nothing can seed:
  while the program is loaded ``uuid.uuid4`` is replaced by a function with the same contract
  (a random UUID of version 4), and ``secrets`` draws (``token_bytes``, ``token_hex``,
  ``token_urlsafe``, ``randbelow``, ``randbits``, ``choice``), both from a generator of their
  own, reset with the other (a module that did ``from uuid import uuid4`` while loading binds
  the replacement).  ``os.urandom`` and ``os.getrandom`` (through which ``random.SystemRandom``
  draws too) draw from that generator as well while the program is loaded, when the program
  or a library calls them (ChaosSloth's own calls get the OS's entropy): the same bytes in
  every execution of a schedule and in every replay of it;
- ``asyncio.as_completed`` makes its tasks in the order of a set of the awaitables it is given,
  which for coroutines is an order of addresses: one that may differ between executions of the
  same schedule, so that the same step starts other work.  While the program is loaded it is
  replaced by a function that makes the tasks in the order given (one of the orders the stock
  function can take) and hands them to the stock one, which then only registers its callbacks
  in set order (on distinct tasks: no order among them is observable);
- ``asyncio.all_tasks()`` returns a set of tasks, which iterates in an order of addresses: a
  shutdown that cancels every task in that order wakes them in another order in each execution.
  While the program is loaded it returns a set that iterates in the order the tasks were made
  (the controlled loop's record of it), as a set of the same tasks; so do the two sets
  ``asyncio.wait`` returns (futures that are not tasks after the tasks, in the order given).
- the clock: on the controlled loop virtual time stands still while a step runs and jumps to
  the next deadline when nothing is ready, so a program that also reads the real clock sees
  two clocks that disagree: a ``deadline = time.monotonic() + 2`` polled with
  ``await asyncio.sleep(0.1)`` never expires (the sleeps take no real time), and a program that
  fails on every stock run passes every schedule; a timestamp handed to a task differs in every
  execution.  While the program is loaded, ``time.monotonic``, ``perf_counter`` and their
  ``_ns`` forms read the running loop's virtual clock (``loop.time()``, as they do on the
  stock loop, where ``loop.time()`` is ``time.monotonic()``; the controlled loop records the
  read, so DPOR orders it with the clock's advances; stage 4's jitter loop has a virtual clock
  too), and ``time.time``, ``time_ns`` and the functions that
  default to the current time (``localtime``, ``gmtime``, ``ctime``, ``asctime``,
  ``strftime``) read ``WALL_EPOCH`` plus it.  Anywhere else -- no loop on a virtual clock
  running in this thread (import time, another thread), or the caller is ChaosSloth's own
  code -- they are the real functions.  ``datetime.now()`` and ``date.today()`` are C methods
  of C types and stay real.
"""

from __future__ import annotations

import asyncio
import asyncio.events
import asyncio.tasks
import operator
import os
import random
import secrets
import sys
import time
import uuid
from typing import Any

from chaossloth.capture.escapes import tool_frame

#: the seed of the module-level generator when a program starts loading
SEED = 0
#: the seed of uuid4's generator
UUID_SEED = 0x55494434

_real_uuid4 = uuid.uuid4


class _Tracked(random.Random):
    """A generator that knows whether it drew since `drawn` was cleared (every draw of a
    random.Random goes through getrandbits), so that its reset can be skipped when it did not."""

    drawn = False

    def getrandbits(self, k: int) -> int:
        self.drawn = True
        return super().getrandbits(k)


#: the generator of uuid4 and of the secrets module while a program is loaded
_ids = _Tracked(UUID_SEED)


def _seeded_uuid4() -> uuid.UUID:
    """A random UUID (version 4), from the seeded generator."""
    return uuid.UUID(int=_ids.getrandbits(128), version=4)


#: the secrets module's attributes that draw: its generator, and two of its bound methods
_SECRETS = ("_sysrand", "randbits", "choice")


_seeded_uuid4.__name__ = _seeded_uuid4.__qualname__ = "uuid4"
_seeded_uuid4.__module__ = "uuid"

_real_urandom, _real_getrandom = os.urandom, getattr(os, "getrandom", None)


def _seeded_urandom(size: int) -> bytes:
    if tool_frame(_getframe(1)):
        return _real_urandom(size)
    size = operator.index(size)
    if size < 0:
        raise ValueError("negative argument not allowed")
    return _ids.randbytes(size)


def _seeded_getrandom(size: int, flags: int = 0) -> bytes:
    if tool_frame(_getframe(1)):
        return _real_getrandom(size, flags)  # type: ignore[misc]
    return _seeded_urandom(size)


_seeded_urandom.__name__ = _seeded_urandom.__qualname__ = "urandom"
_seeded_getrandom.__name__ = _seeded_getrandom.__qualname__ = "getrandom"
_seeded_urandom.__module__ = _seeded_getrandom.__module__ = "os"


_real_as_completed = asyncio.tasks.as_completed


def _ordered_as_completed(fs: Any, *, timeout: float | None = None) -> Any:
    """asyncio.as_completed, its tasks made in the order of `fs` (a running loop needed, as
    the stock function's ensure_future needs one; a single future or coroutine is left to the
    stock function's TypeError)."""
    if not (asyncio.isfuture(fs) or asyncio.iscoroutine(fs)) and asyncio._get_running_loop():
        fs = [asyncio.ensure_future(f) for f in dict.fromkeys(fs)]
    return _real_as_completed(fs, timeout=timeout)


_ordered_as_completed.__name__ = _ordered_as_completed.__qualname__ = "as_completed"
_ordered_as_completed.__module__ = "asyncio.tasks"
_ordered_as_completed.__doc__ = _real_as_completed.__doc__


_real_all_tasks = asyncio.tasks.all_tasks


class _CreationOrdered(set):  # type: ignore[type-arg]
    """A set of tasks that iterates in the order they were made (then, for any added later or
    unknown to the loop, in set order).  Set operations return plain sets."""

    def __init__(self, tasks: set[Any], made: list[Any]) -> None:
        super().__init__(tasks)
        self._made = made

    def __iter__(self) -> Any:
        contains = set.__contains__
        ordered = [t for t in self._made if contains(self, t)]
        if len(ordered) < len(self):
            listed = set(ordered)
            ordered.extend(t for t in set.__iter__(self) if t not in listed)
        return iter(ordered)


def _made(loop: Any) -> list[Any] | None:
    """The tasks a controlled loop made, in order (None: not a controlled loop)."""
    created = getattr(loop, "_cs_created", None)
    if created is None:
        return None
    return [t for ref in created if (t := ref()) is not None]


def _ordered_all_tasks(loop: Any = None) -> Any:
    """asyncio.all_tasks, iterating in creation order on a controlled loop."""
    found = _real_all_tasks(loop)
    if len(found) < 2:
        return found
    made = _made(asyncio.get_running_loop() if loop is None else loop)
    return found if made is None else _CreationOrdered(found, made)


_real_wait = asyncio.tasks.wait


async def _ordered_wait(
    fs: Any, *, timeout: float | None = None, return_when: str = asyncio.ALL_COMPLETED
) -> Any:
    """asyncio.wait, its two sets iterating in creation order on a controlled loop."""
    if asyncio.isfuture(fs) or asyncio.iscoroutine(fs):
        return await _real_wait(fs, timeout=timeout, return_when=return_when)
    given = list(fs)
    done, pending = await _real_wait(given, timeout=timeout, return_when=return_when)
    made = _made(asyncio.get_running_loop())
    if made is None:
        return done, pending
    order = made + [f for f in dict.fromkeys(given) if not isinstance(f, asyncio.Task)]
    return _CreationOrdered(done, order), _CreationOrdered(pending, order)


_ordered_all_tasks.__name__ = _ordered_all_tasks.__qualname__ = "all_tasks"
_ordered_all_tasks.__module__ = "asyncio.tasks"
_ordered_all_tasks.__doc__ = _real_all_tasks.__doc__
_ordered_wait.__name__ = _ordered_wait.__qualname__ = "wait"
_ordered_wait.__module__ = "asyncio.tasks"
_ordered_wait.__doc__ = _real_wait.__doc__


#: the wall clock at virtual time 0 (2026-01-01 00:00:00 UTC): a fixed instant, so that an
#: execution reads the same time in every process and a schedule file replays it
WALL_EPOCH = 1_767_225_600
_WALL_EPOCH_NS = WALL_EPOCH * 1_000_000_000
_get_running_loop = asyncio.events._get_running_loop
_getframe = sys._getframe
_real_monotonic, _real_monotonic_ns = time.monotonic, time.monotonic_ns
_real_perf_counter, _real_perf_counter_ns = time.perf_counter, time.perf_counter_ns
_real_time, _real_time_ns = time.time, time.time_ns
_real_localtime, _real_gmtime, _real_ctime = time.localtime, time.gmtime, time.ctime
_real_asctime, _real_strftime = time.asctime, time.strftime


def _loop_now() -> float | None:
    """The running loop's virtual clock, for a clock function called by the program (the
    caller of the function that called this one); None for any other caller, or with no loop
    on a virtual clock (one whose class sets ``_cs_virtual_clock``) running in this thread."""
    loop = _get_running_loop()
    if loop is None or not getattr(loop, "_cs_virtual_clock", False):
        return None
    if tool_frame(_getframe(2)):
        return None
    return loop.time()


def _monotonic() -> float:
    now = _loop_now()
    return _real_monotonic() if now is None else now


def _monotonic_ns() -> int:
    now = _loop_now()
    return _real_monotonic_ns() if now is None else round(now * 1e9)


def _perf_counter() -> float:
    now = _loop_now()
    return _real_perf_counter() if now is None else now


def _perf_counter_ns() -> int:
    now = _loop_now()
    return _real_perf_counter_ns() if now is None else round(now * 1e9)


def _time() -> float:
    now = _loop_now()
    return _real_time() if now is None else WALL_EPOCH + now


def _time_ns() -> int:
    now = _loop_now()
    return _real_time_ns() if now is None else _WALL_EPOCH_NS + round(now * 1e9)


# the functions that read the current time when not given one: given one (not None), they
# are the real functions; a keyword argument is the real function's TypeError


def _localtime(*secs: Any) -> Any:
    now = None if secs and secs[0] is not None else _loop_now()
    return _real_localtime(*secs) if now is None else _real_localtime(WALL_EPOCH + now)


def _gmtime(*secs: Any) -> Any:
    now = None if secs and secs[0] is not None else _loop_now()
    return _real_gmtime(*secs) if now is None else _real_gmtime(WALL_EPOCH + now)


def _ctime(*secs: Any) -> Any:
    now = None if secs and secs[0] is not None else _loop_now()
    return _real_ctime(*secs) if now is None else _real_ctime(WALL_EPOCH + now)


def _asctime(*t: Any) -> Any:
    now = None if t else _loop_now()
    return _real_asctime(*t) if now is None else _real_asctime(_real_localtime(WALL_EPOCH + now))


def _strftime(format: Any, *t: Any) -> Any:
    now = None if t else _loop_now()
    if now is None:
        return _real_strftime(format, *t)
    return _real_strftime(format, _real_localtime(WALL_EPOCH + now))


#: time's attribute -> (its real function, its replacement while a program is loaded)
_CLOCKS: dict[str, tuple[Any, Any]] = {
    "monotonic": (_real_monotonic, _monotonic),
    "monotonic_ns": (_real_monotonic_ns, _monotonic_ns),
    "perf_counter": (_real_perf_counter, _perf_counter),
    "perf_counter_ns": (_real_perf_counter_ns, _perf_counter_ns),
    "time": (_real_time, _time),
    "time_ns": (_real_time_ns, _time_ns),
    "localtime": (_real_localtime, _localtime),
    "gmtime": (_real_gmtime, _gmtime),
    "ctime": (_real_ctime, _ctime),
    "asctime": (_real_asctime, _asctime),
    "strftime": (_real_strftime, _strftime),
}
for _name, (_real, _virtual) in _CLOCKS.items():
    _virtual.__name__ = _virtual.__qualname__ = _name
    _virtual.__module__ = "time"
    _virtual.__doc__ = _real.__doc__


class _Program:
    __slots__ = (
        "outer_all_tasks",
        "outer_as_completed",
        "outer_clocks",
        "outer_getrandom",
        "outer_secrets",
        "outer_state",
        "outer_urandom",
        "outer_uuid4",
        "outer_wait",
        "state",
    )

    def __init__(self) -> None:
        #: the process's generator state, uuid4 and as_completed before the program began
        #: loading
        self.outer_state: Any = random.getstate()
        self.outer_uuid4: Any = uuid.uuid4
        self.outer_urandom: Any = (os.urandom, random._urandom)  # type: ignore[attr-defined]
        self.outer_getrandom: Any = getattr(os, "getrandom", None)
        self.outer_as_completed: Any = asyncio.tasks.as_completed
        self.outer_all_tasks: Any = asyncio.tasks.all_tasks
        self.outer_wait: Any = asyncio.tasks.wait
        self.outer_secrets: Any = [getattr(secrets, n) for n in _SECRETS]
        self.outer_clocks: Any = {n: getattr(time, n) for n in _CLOCKS}
        #: the state the program's imports left (loaded), or None while it loads
        self.state: Any = None


#: the programs begun and not ended, innermost last (stage 7 loads the patched copy while the
#: original is loaded)
_programs: list[_Program] = []


def begin() -> None:
    _programs.append(_Program())
    random.seed(SEED)
    _ids.seed(UUID_SEED)
    _ids.drawn = False
    uuid.uuid4 = _seeded_uuid4
    os.urandom = random._urandom = _seeded_urandom  # type: ignore[attr-defined]
    if _real_getrandom is not None:
        os.getrandom = _seeded_getrandom
    for name, value in zip(_SECRETS, (_ids, _ids.getrandbits, _ids.choice), strict=True):
        setattr(secrets, name, value)
    asyncio.as_completed = asyncio.tasks.as_completed = _ordered_as_completed
    asyncio.all_tasks = asyncio.tasks.all_tasks = _ordered_all_tasks
    asyncio.wait = asyncio.tasks.wait = _ordered_wait
    for name, (_, virtual) in _CLOCKS.items():
        setattr(time, name, virtual)


def loaded() -> None:
    if _programs and _programs[-1].state is None:
        _programs[-1].state = (random.getstate(), _ids.getstate())


def reset() -> None:
    """Before an execution: the generators as the program's imports left them."""
    if not _programs:
        return
    program = _programs[-1]
    if program.state is None:
        loaded()
    state, ids_state = program.state
    random.setstate(state)
    if _ids.drawn:
        _ids.setstate(ids_state)
        _ids.drawn = False


def end() -> None:
    """The program is released: the process's generator and uuid4 as they were before it."""
    if not _programs:
        return
    program = _programs.pop()
    random.setstate(program.outer_state)
    uuid.uuid4 = program.outer_uuid4
    os.urandom, random._urandom = program.outer_urandom  # type: ignore[attr-defined]
    if _real_getrandom is not None:
        os.getrandom = program.outer_getrandom
    for name, value in zip(_SECRETS, program.outer_secrets, strict=True):
        setattr(secrets, name, value)
    asyncio.as_completed = asyncio.tasks.as_completed = program.outer_as_completed
    asyncio.all_tasks = asyncio.tasks.all_tasks = program.outer_all_tasks
    asyncio.wait = asyncio.tasks.wait = program.outer_wait
    for name, value in program.outer_clocks.items():
        setattr(time, name, value)
