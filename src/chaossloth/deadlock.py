"""Why a controlled loop is stuck: the deadlock message of :class:`~chaossloth.loop.ControlledLoop`.

When nothing can run while tasks still wait, the loop raises :class:`DeadlockError` built here:
for each waiting task, where it is suspended (its innermost frame in the user's code) and what
it waits for, named as the source code names it (``Lock.acquire() on self.locks['a']
(locked)``: a local, an attribute of a local, an item of a container held in one, a global),
found by walking the task's await chain and the user's frames.  These are heuristics for the
message only: nothing here decides an outcome (the runner classifies the execution as a
deadlock from the exception's type; diagnosis builds the wait-for cycle from the recorded lock
operations, using the names found here when they exist).
"""

from __future__ import annotations

import asyncio
import gc
import os
import types
from collections.abc import Callable
from types import FrameType
from typing import Any

from chaossloth.errors import DeadlockError
from chaossloth.report import relative_path

_ASYNCIO_DIR = os.path.dirname(asyncio.__file__) + os.sep
_OUR_DIR = os.path.dirname(__file__) + os.sep


def deadlock_error(pending: list[Any], label: Callable[[Any], str]) -> DeadlockError:
    """The error for a loop with nothing to run while the tasks `pending` (in creation order)
    still wait; `label` names a task in the message."""
    blocked: list[tuple[str, str | None, str]] = []
    lines = []
    for t in pending:
        name = t.get_name()
        site = _suspension_site(t)
        what = _waits_for(t, pending, label)
        blocked.append((name, site, what))
        where = f"suspended at {site}" if site else "not started"
        lines.append(f"  - {label(t)} {where}, waiting for {what}")
    if not pending:
        msg = (
            "deadlock: nothing can run (no callback ready, no timer pending) and no task is "
            "left, but the awaited future was never completed and loop.stop() was not "
            "called."
        )
    else:
        n = len(pending)
        msg = (
            "deadlock: nothing can run (no callback ready, no timer pending) while "
            f"{n} task{'s' if n != 1 else ''} still wait{'s' if n == 1 else ''}:\n"
            + "\n".join(lines)
        )
    return DeadlockError(msg, blocked, pending)


def coro_name(task: Any) -> str:
    try:
        coro = task.get_coro()
    except AttributeError:
        return "?"
    name = getattr(coro, "__qualname__", None) or type(coro).__name__
    return f"{name}()"


#: the awaitables that drive an async generator: asyncio's asend/athrow (which expose no
#: attribute for it) and the capture's proxy around one (ext/hooks.c awaitproxy)
_ASYNCGEN_AWAITABLES = ("async_generator_asend", "async_generator_athrow", "awaitproxy")


def _asyncgen_of_awaitable(obj: Any) -> Any:
    """The async generator an awaitable of _ASYNCGEN_AWAITABLES drives (among its referents),
    else None."""
    if type(obj).__name__ not in _ASYNCGEN_AWAITABLES:
        return None
    for ref in gc.get_referents(obj):
        if isinstance(ref, types.AsyncGeneratorType):
            return ref
    return None


def _coro_frames(task: Any) -> list[FrameType]:
    """The frames of a task's await chain, outermost first."""
    frames = []
    obj = getattr(task, "_coro", None) or task.get_coro()
    for _ in range(64):
        gen = _asyncgen_of_awaitable(obj)
        if gen is not None:  # `async for` / anext() awaits its generator's asend()
            obj = gen
        frame = (
            getattr(obj, "cr_frame", None)
            or getattr(obj, "gi_frame", None)
            or getattr(obj, "ag_frame", None)
        )
        if frame is None:
            break
        frames.append(frame)
        nxt = getattr(obj, "cr_await", None)
        if nxt is None:
            nxt = getattr(obj, "gi_yieldfrom", None)
        if nxt is None:
            nxt = getattr(obj, "ag_await", None)
        if nxt is None and frame.f_code.co_filename.startswith(_OUR_DIR):
            # capture.sync drives the primitive's own coroutine by hand (no `yield from`)
            nxt = frame.f_locals.get("coro")
        if nxt is None:
            break
        obj = nxt
    return frames


def _is_internal(frame: FrameType) -> bool:
    f = frame.f_code.co_filename
    return f.startswith((_ASYNCIO_DIR, _OUR_DIR))


def _suspension_site(task: Any) -> str | None:
    frames = _coro_frames(task)
    if not frames:
        return None
    user = [f for f in frames if not _is_internal(f)]
    f = (user or frames)[-1]
    return f"{relative_path(f.f_code.co_filename)}:{f.f_lineno}"


_PRIMITIVES: tuple[type, ...] = (
    asyncio.Lock,
    asyncio.Event,
    asyncio.Condition,
    asyncio.Semaphore,
    asyncio.Barrier,
    asyncio.Queue,
)


def _name_in(obj: Any, frames: list[FrameType]) -> str | None:
    """A source-level name for ``obj`` seen from the user's frames (innermost first): a local,
    an attribute of a local (``self.lock``), an item of a dict or list held in one of those
    (``self.locks['a']``, ``locks[0]``), or a global (or an item of one)."""
    for frame in reversed(frames):
        if _is_internal(frame):
            continue
        local_items = list(frame.f_locals.items())
        for k, v in local_items:
            if v is obj:
                return k
        attrs: list[tuple[str, Any]] = []
        for k, v in local_items:
            d = getattr(v, "__dict__", None)
            if isinstance(d, dict):
                for ak, av in list(d.items()):
                    if av is obj:
                        return f"{k}.{ak}"
                    attrs.append((f"{k}.{ak}", av))
        for k, v in [*local_items, *attrs]:
            sub = _subscript_of(v, obj)
            if sub is not None:
                return k + sub
        global_items = list(frame.f_globals.items())
        for k, v in global_items:
            if v is obj:
                return k
        for k, v in global_items:
            sub = _subscript_of(v, obj)
            if sub is not None:
                return k + sub
    return None


_SCAN_ITEMS = 1000  # items looked at per container: naming must stay cheap on big ones


def _subscript_of(container: Any, obj: Any) -> str | None:
    """``[key]`` if ``container`` (a dict, list or tuple) holds ``obj``, else None.  A key is
    shown by its repr when that is short (strings, numbers, tuples of them)."""
    if isinstance(container, dict):
        for n, (key, value) in enumerate(list(container.items())):
            if n >= _SCAN_ITEMS:
                break
            if value is obj:
                text = _key_repr(key)
                return f"[{text}]" if text is not None else "[...]"
    elif isinstance(container, (list, tuple)):
        for i, value in enumerate(container[:_SCAN_ITEMS]):
            if value is obj:
                return f"[{i}]"
    return None


def _key_repr(key: Any) -> str | None:
    if isinstance(key, (str, int, float, bool, bytes, tuple)) or key is None:
        try:
            text = repr(key)
        except Exception:  # noqa: BLE001 - a tuple of odd objects: leave the key out
            return None
        return text if len(text) <= 40 else None
    return None


def _primitive_state(obj: Any) -> str:
    if isinstance(obj, asyncio.Lock):
        return "locked" if obj.locked() else "unlocked"
    if isinstance(obj, asyncio.Event):
        return "set" if obj.is_set() else "never set"
    if isinstance(obj, asyncio.Semaphore):
        return f"value {obj._value}"
    if isinstance(obj, asyncio.Barrier):
        return f"{obj.n_waiting}/{obj.parties} waiting"
    if isinstance(obj, asyncio.Queue):
        return f"{obj.qsize()} item(s), maxsize {obj.maxsize}"
    if isinstance(obj, asyncio.Condition):
        return "its lock " + ("locked" if obj.locked() else "unlocked")
    return ""


def task_label(t: Any) -> str:
    return f"task {t.get_name()!r} ({coro_name(t)})"


def _is_task(obj: Any) -> bool:
    """asyncio.Task (the recording runs' tasks are of a subclass), or another future with a
    coroutine (asyncio's pure-Python Task)."""
    return isinstance(obj, asyncio.Task) or (asyncio.isfuture(obj) and hasattr(obj, "get_coro"))


def _waits_for(
    task: Any,
    others: list[Any] = (),  # type: ignore[assignment]
    label: Callable[[Any], str] = task_label,
) -> str:
    frames = _coro_frames(task)
    for frame in frames:
        if frame.f_code.co_filename.startswith(_OUR_DIR):
            continue  # capture.sync's wrapper: the primitive's own method is further in
        obj = frame.f_locals.get("self")
        if isinstance(obj, _PRIMITIVES):
            name = _name_in(obj, frames)
            for other in others:  # e.g. a task made straight from ev.wait(): ask its creator
                if name is None and other is not task:
                    name = _name_in(obj, _coro_frames(other))
            name = name or f"an unnamed {type(obj).__name__} at 0x{id(obj):x}"
            state = _primitive_state(obj)
            method = frame.f_code.co_name
            if method == "__aenter__":
                method = "acquire"  # `async with primitive:`
            return f"{type(obj).__name__}.{method}() on {name}" + (f" ({state})" if state else "")
        if isinstance(obj, asyncio.TaskGroup):
            children = [t for t in getattr(obj, "_tasks", ()) if not t.done()]
            labels = ", ".join(label(t) for t in children)
            return f"its TaskGroup's tasks to finish ({labels or 'none left'})"
    waiter = getattr(task, "_fut_waiter", None)
    if waiter is None:
        return "nothing it can be woken by (no pending future)"
    if _is_task(waiter):
        return f"{label(waiter)} to finish"
    children = getattr(waiter, "_children", None)
    if children is not None:
        pending = [c for c in children if not c.done()]
        labels = ", ".join(label(c) if _is_task(c) else "a Future" for c in pending)
        return f"gather() of {len(children)} awaitables, unfinished: {labels or 'none'}"
    for frame in frames:
        code = frame.f_code
        if code.co_filename.startswith(_ASYNCIO_DIR) and code.co_name in ("_wait", "wait"):
            fs = frame.f_locals.get("fs")
            if fs:
                labels = ", ".join(
                    label(f) if _is_task(f) else "a Future" for f in fs if not f.done()
                )
                return f"asyncio.wait() on: {labels}"
    created = ""
    stb = getattr(waiter, "_source_traceback", None)
    if stb:
        created = f" created at {stb[-1][0]}:{stb[-1][1]}"
    return f"a {type(waiter).__name__}{created} that nothing completes"
