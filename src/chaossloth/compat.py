"""Everything in ChaosSloth's Python code that depends on the CPython version.

The twin of ``ext/compat.c``: no other module may read a CPython- or asyncio-private name whose
presence or meaning differs between the supported versions, or branch on ``sys.version_info``.
Supported: CPython 3.11, 3.12 and 3.13.  Importing ``chaossloth`` imports this module first; it
checks that what the entries below rely on is there and otherwise raises
:class:`UnsupportedPythonError` with one message naming the interpreter and what is missing.

Entries (which versions, and why each is needed):

* ``SUPPORTED`` -- 3.11, 3.12, 3.13: the versions whose asyncio internals were checked.
* the C Task's steps (all three; the type's name differs: ``TaskStepMethWrapper`` in 3.11,
  ``_asyncio.TaskStepMethWrapper`` from 3.12) -- a task's steps must be the task's actor, and the
  loop core recognises them by the wrapper's layout and the ``task_wakeup`` builtin: probed on a
  real C Task at import and checked by ``_core._compat_check`` (``ext/compat.c``).
* ``PY_FUTURE`` / ``PY_TASK`` (all three) -- asyncio's pure-Python Future and Task
  (``futures._PyFuture``, ``tasks._PyTask``), the bases of the recording classes in
  ``capture/sync.py``; their private ``_Future__schedule_callbacks``, ``_Task__step`` and
  ``_Task__wakeup`` are what recording and step detection hook, so they are checked here.
* :func:`set_task_name` -- stock ``create_task`` names a task made by a task factory through
  ``tasks._set_task_name`` in 3.11 and 3.12 (it tolerates a task without ``set_name``), and
  calls ``task.set_name`` directly in 3.13, where that helper is gone.
* :func:`call_user_exception_handler` -- from 3.12 stock ``call_exception_handler`` runs a custom
  handler inside the context of the task, future or handle the context dict names; 3.11 calls
  it directly.
* :func:`get_set_event_loop` -- the loop set with ``asyncio.set_event_loop``, read from the
  default policy's private slot ``_local._loop`` (3.11-3.13), because ``get_event_loop()``
  would warn (3.12+) or create a loop where none is set.
* ``shutdown_default_executor(timeout=None)`` -- 3.12's ``asyncio.Runner`` passes a timeout;
  ``ControlledLoop`` accepts it on every version (no code here: a wider signature is harmless
  on 3.11).
* ``COMPREHENSIONS_INLINED`` and :func:`from_inlined_comprehension` -- from 3.12 (PEP 709)
  list, set and dict comprehensions have no symbol table of their own: their names resolve as
  in the enclosing scope, their nested lambdas are children of the enclosing table, and their
  iteration variables appear in the enclosing function's table (as cells when a nested lambda
  captures them) flagged ``DEF_COMP_ITER`` (``2 << 8``).  The instrumenter
  (``capture/instrument.py``) must neither miss the accesses inside them nor take those
  variables for cells of the function; the flag is probed at import.
* eager tasks (3.12+: ``asyncio.eager_task_factory``, ``Task(eager_start=True)``) need nothing
  here: an eager task's first step runs inside the creating step, as on the stock loop, and
  its later steps are scheduled through ``call_soon`` like any task's (tested side by side with
  the stock loop in ``tests/test_compat.py``).
"""

from __future__ import annotations

import asyncio
import symtable
import sys
from asyncio import events, futures, tasks
from collections.abc import Callable
from typing import Any

from chaossloth.errors import ChaosSlothError

__all__ = [
    "COMPREHENSIONS_INLINED",
    "PY_FUTURE",
    "PY_TASK",
    "SUPPORTED",
    "UnsupportedPythonError",
    "call_user_exception_handler",
    "from_inlined_comprehension",
    "get_set_event_loop",
    "set_task_name",
]

#: (major, minor) versions whose layouts and asyncio internals ChaosSloth was checked against
SUPPORTED: tuple[tuple[int, int], ...] = ((3, 11), (3, 12), (3, 13))


class UnsupportedPythonError(ChaosSlothError, ImportError):
    """The running interpreter is not one ChaosSloth supports (raised when importing it)."""


def _unsupported(why: str) -> UnsupportedPythonError:
    impl = sys.implementation.name
    version = ".".join(str(p) for p in sys.version_info[:3])
    supported = ", ".join(f"{a}.{b}" for a, b in SUPPORTED)
    return UnsupportedPythonError(
        f"ChaosSloth cannot run on {impl} {version}: {why}. It supports CPython {supported}."
    )


if sys.implementation.name != "cpython" or sys.version_info[:2] not in SUPPORTED:
    raise _unsupported("this interpreter's asyncio internals were never checked")

# the extension exists only for supported versions: imported after the check above
from chaossloth import _core

try:
    import _asyncio  # asyncio's C accelerator, whose Task is probed below
except ImportError:
    raise _unsupported("asyncio's C accelerator (_asyncio) is missing") from None

# -------------------------------------------------------------- asyncio's pure-Python classes

PY_FUTURE: type = getattr(futures, "_PyFuture", None)  # type: ignore[assignment]
PY_TASK: type = getattr(tasks, "_PyTask", None)  # type: ignore[assignment]

#: asyncio's registries of live tasks: the WeakSet every task joins when it is scheduled (3.11's
#: ``_all_tasks``, 3.12+'s ``_scheduled_tasks``: the C accelerator registers into the same set)
#: and, 3.12+, the set of eager tasks that have not suspended yet
SCHEDULED_TASKS: Any = getattr(
    tasks, "_scheduled_tasks" if sys.version_info >= (3, 12) else "_all_tasks", None
)
EAGER_TASKS: Any = getattr(tasks, "_eager_tasks", None) if sys.version_info >= (3, 12) else ()


def registered_task_count() -> int:
    """How many live tasks asyncio's registries hold, of every loop (all_tasks() without
    its scan)."""
    return len(SCHEDULED_TASKS) + len(EAGER_TASKS)


_REQUIRED: tuple[tuple[Any, str, str], ...] = (
    (PY_FUTURE, "_Future__schedule_callbacks", "asyncio.futures._PyFuture"),
    (PY_TASK, "_Task__step", "asyncio.tasks._PyTask"),
    (PY_TASK, "_Task__wakeup", "asyncio.tasks._PyTask"),
    (events.BaseDefaultEventLoopPolicy, "_Local", "asyncio.events.BaseDefaultEventLoopPolicy"),
)


#: 3.12+ (PEP 709): list/set/dict comprehensions are inlined into the enclosing scope
COMPREHENSIONS_INLINED: bool = sys.version_info >= (3, 12)
_DEF_COMP_ITER = 2 << 8  # Include/internal/pycore_symtable.h, 3.11-3.13


def from_inlined_comprehension(symbol: symtable.Symbol) -> bool:
    """Is this symbol of a function's table there only because an inlined comprehension
    (3.12+) binds it?  (A name the function binds itself keeps the function's own flags.)"""
    if not COMPREHENSIONS_INLINED:
        return False
    return bool(symbol._Symbol__flags & _DEF_COMP_ITER)  # type: ignore[attr-defined]


def _check_python_side() -> None:
    for owner, name, where in _REQUIRED:
        if owner is None or name not in vars(owner):
            raise _unsupported(f"{where}.{name} is missing")
    if SCHEDULED_TASKS is None or EAGER_TASKS is None:
        raise _unsupported("asyncio.tasks has no registry of scheduled (or eager) tasks")
    if not hasattr(events.BaseDefaultEventLoopPolicy._Local, "_loop"):
        raise _unsupported("the default event loop policy has no private loop slot (_local._loop)")
    table = symtable.symtable("def f():\n    k = 0\n    [lambda: (i, k) for i in ()]\n", "", "exec")
    f = table.get_children()[0]
    names = {s.get_name(): s for s in f.get_symbols()}
    inlined = "i" in names and from_inlined_comprehension(names["i"])
    if inlined != COMPREHENSIONS_INLINED or from_inlined_comprehension(names["k"]):
        raise _unsupported("comprehensions' symbol tables are not laid out as expected")


# ------------------------------------------------------------------ the C Task's steps probe


class _ProbeLoop:
    """Just enough of a loop for a C Task to schedule its first step and await a future."""

    def __init__(self) -> None:
        self.scheduled: list[Any] = []

    def get_debug(self) -> bool:
        return False

    def call_soon(self, callback: Any, *args: Any, context: Any = None) -> None:
        self.scheduled.append(callback)


def _check_c_task() -> None:
    """Makes a C Task schedule its step and register its wakeup on a probe loop, and hands both
    to the extension, which checks them against the layouts compiled in."""
    loop = _ProbeLoop()
    waited = _asyncio.Future(loop=loop)

    async def probe() -> None:
        await waited

    coro = probe()
    task = _asyncio.Task(coro, loop=loop)
    task._log_destroy_pending = False
    try:
        if len(loop.scheduled) != 1:
            raise _unsupported("a C Task does not schedule exactly one first step")
        step = loop.scheduled[0]
        step()  # runs the coroutine up to `await waited`: the task registers its wakeup
        callbacks = waited._callbacks or []
        if len(callbacks) != 1:
            raise _unsupported("a C Task awaiting a future does not register one wakeup")
        wakeup = callbacks[0][0]
        try:
            _core._compat_check(
                task, step, wakeup, vars(PY_TASK)["_Task__step"], vars(PY_TASK)["_Task__wakeup"]
            )
        except _core.CompatError as exc:
            raise _unsupported(str(exc)) from None
    finally:
        coro.close()


_check_python_side()
_check_c_task()

# --------------------------------------------------------------------------------- helpers


def set_task_name(task: Any, name: str | None) -> None:
    """Names a task made by a task factory, as stock ``create_task`` does on this version."""
    if name is None:
        return
    if sys.version_info >= (3, 13):
        task.set_name(name)
        return
    # 3.11, 3.12: tasks._set_task_name warns (DeprecationWarning) for a task without set_name
    tasks._set_task_name(task, name)  # type: ignore[attr-defined]


def call_user_exception_handler(
    handler: Callable[[Any, dict[str, Any]], Any], loop: Any, context: dict[str, Any]
) -> None:
    """Calls a handler set with ``set_exception_handler`` as stock ``call_exception_handler``
    does on this version: from 3.12 inside the context of the task, future or handle that
    ``context`` names (in that order of preference), if it has one."""
    if sys.version_info < (3, 12):
        handler(loop, context)
        return
    thing = context.get("task")
    if thing is None:
        thing = context.get("future")  # sometimes a Task, which has a context
    if thing is None:
        thing = context.get("handle")
    ctx = thing.get_context() if thing is not None and hasattr(thing, "get_context") else None
    if ctx is not None and hasattr(ctx, "run"):
        ctx.run(handler, loop, context)
    else:
        handler(loop, context)


def get_set_event_loop() -> asyncio.AbstractEventLoop | None:
    """The loop set with ``asyncio.set_event_loop`` in this thread, or None (also when the
    installed policy does not derive from asyncio's default one, which has no such slot)."""
    policy = asyncio.get_event_loop_policy()
    if not isinstance(policy, events.BaseDefaultEventLoopPolicy):
        return None
    return policy._local._loop  # type: ignore[attr-defined,no-any-return]
