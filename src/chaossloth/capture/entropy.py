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
  the replacement).  ``os.urandom`` itself stays unseeded: a program that uses it is reported
  as nondeterministic;
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
"""

from __future__ import annotations

import asyncio
import asyncio.tasks
import random
import secrets
import uuid
from typing import Any

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


class _Program:
    __slots__ = (
        "outer_all_tasks",
        "outer_as_completed",
        "outer_secrets",
        "outer_state",
        "outer_uuid4",
        "outer_wait",
        "state",
    )

    def __init__(self) -> None:
        #: the process's generator state, uuid4 and as_completed before the program began
        #: loading
        self.outer_state: Any = random.getstate()
        self.outer_uuid4: Any = uuid.uuid4
        self.outer_as_completed: Any = asyncio.tasks.as_completed
        self.outer_all_tasks: Any = asyncio.tasks.all_tasks
        self.outer_wait: Any = asyncio.tasks.wait
        self.outer_secrets: Any = [getattr(secrets, n) for n in _SECRETS]
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
    for name, value in zip(_SECRETS, (_ids, _ids.getrandbits, _ids.choice), strict=True):
        setattr(secrets, name, value)
    asyncio.as_completed = asyncio.tasks.as_completed = _ordered_as_completed
    asyncio.all_tasks = asyncio.tasks.all_tasks = _ordered_all_tasks
    asyncio.wait = asyncio.tasks.wait = _ordered_wait


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
    for name, value in zip(_SECRETS, program.outer_secrets, strict=True):
        setattr(secrets, name, value)
    asyncio.as_completed = asyncio.tasks.as_completed = program.outer_as_completed
    asyncio.all_tasks = asyncio.tasks.all_tasks = program.outer_all_tasks
    asyncio.wait = asyncio.tasks.wait = program.outer_wait
