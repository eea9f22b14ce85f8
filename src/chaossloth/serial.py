"""Serializability oracle for ``--cls CLASS --method METHOD`` workloads.

A concurrent execution of K calls on one object is correct when its outcome -- the final state of
the object and what each call returned (or raised) -- is the outcome of *some* serial execution of
the same K calls, one after another in some order, on a fresh object.

* **Outcome.** A structural snapshot of ``(object, results)`` taken in one pass, so that aliasing
  counts: an object reached twice is recorded the second time as a reference to the first visit
  (two callers handed the *same* connection differ from two callers handed equal ones). Builtin
  containers are walked recursively (dicts and sets in a canonical key order, so insertion order
  does not matter), user objects through their ``__dict__``/``__slots__``, asyncio primitives by
  their observable state (a lock held or not, an event set or not, a queue's items). A call that
  raised is recorded as the exception's type and arguments.
* **Serial outcomes** are computed once per exploration: for every order of the K calls, the
  calls run one after another on a fresh object (``run`` runs a coroutine to completion: the
  controlled loop in fifo order). Calls with equal signatures share one run per distinct order
  of signatures; every assignment of its results to the interchangeable calls is then admitted.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import math
import types
from collections.abc import Callable, Coroutine, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

MAX_CALLS = 6
"""Beyond this many calls the K! serial orders are too many to enumerate."""

_MAX_DEPTH = 64
_NAMED = (
    type,
    types.FunctionType,
    types.MethodType,
    types.BuiltinFunctionType,
    types.ModuleType,
)
_PRIMITIVES = (type(None), bool, int, float, complex, str, bytes)
_ASYNCIO_STATE: tuple[tuple[type, Callable[[Any], Any]], ...] = (
    (asyncio.Condition, lambda c: c.locked()),
    (asyncio.Lock, lambda lk: lk.locked()),
    (asyncio.Event, lambda e: e.is_set()),
    (asyncio.Semaphore, lambda s: s._value),
    (asyncio.Queue, lambda q: list(getattr(q, "_queue", ()))),
    (asyncio.Future, lambda f: (f.done(), f.cancelled())),
)


@dataclass(frozen=True)
class Call:
    method: str
    args: tuple[Any, ...] = ()
    kwargs: tuple[tuple[str, Any], ...] = ()

    @property
    def signature(self) -> str:
        return repr((self.method, self.args, self.kwargs))

    def __str__(self) -> str:
        parts = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs]
        return f"{self.method}({', '.join(parts)})"


@dataclass(frozen=True)
class Raised:
    """A call's outcome when it raised."""

    type_name: str
    args: tuple[Any, ...]

    def __repr__(self) -> str:
        return f"raised {self.type_name}{self.args!r}"


def outcome_of(result: Any) -> Any:
    """A call result as recorded in an outcome: exceptions become ``Raised``."""
    if isinstance(result, BaseException):
        return Raised(type(result).__qualname__, tuple(result.args))
    return result


class _Snapshotter:
    def __init__(self) -> None:
        self.memo: dict[int, int] = {}
        self.keep: list[Any] = []  # keeps visited objects alive so ids stay unique

    def snap(self, x: Any, depth: int = 0) -> Hashable:
        t = type(x)
        if t in _PRIMITIVES:
            return (t.__name__, x) if t is not float or not math.isnan(x) else ("float", "nan")
        if depth > _MAX_DEPTH:
            return ("deep", t.__qualname__)
        d = depth + 1
        if t is tuple or t is frozenset or t is Raised:
            # immutable values: sharing one is not observable, so no identity is recorded
            if t is Raised:
                return ("raised", x.type_name, self.snap(x.args, d))
            return (t.__qualname__, self._items(x, d, ordered=t is tuple))
        if id(x) in self.memo:
            return ("ref", self.memo[id(x)])
        self.memo[id(x)] = len(self.memo)
        self.keep.append(x)
        if isinstance(x, (list, tuple)):
            return (t.__qualname__, self._items(x, d, ordered=True))
        if isinstance(x, dict):
            items = [(self.snap(k, d), v) for k, v in x.items()]
            items.sort(key=lambda kv: repr(kv[0]))
            return (t.__qualname__, tuple((k, self.snap(v, d)) for k, v in items))
        if isinstance(x, (set, frozenset)):
            return (t.__qualname__, self._items(x, d, ordered=False))
        for kind, state in _ASYNCIO_STATE:
            if isinstance(x, kind):
                try:
                    return (kind.__qualname__, self.snap(state(x), d))
                except Exception:  # noqa: BLE001 - a primitive in a state we cannot read
                    return (kind.__qualname__,)
        if isinstance(x, _NAMED):
            return ("named", t.__qualname__, getattr(x, "__qualname__", getattr(x, "__name__", "")))
        fields = _fields(x)
        if fields is not None:
            return ("obj", t.__qualname__, self.snap(fields, d))
        try:
            hash(x)
            if t.__eq__ is not object.__eq__:
                return ("value", t.__qualname__, x)
        except TypeError:
            pass
        return ("opaque", t.__qualname__)

    def _items(self, xs: Any, depth: int, *, ordered: bool) -> tuple[Hashable, ...]:
        items = [self.snap(v, depth) for v in xs]
        return tuple(items) if ordered else tuple(sorted(items, key=repr))


def _fields(x: Any) -> dict[str, Any] | None:
    fields: dict[str, Any] | None = None
    d = getattr(x, "__dict__", None)
    if isinstance(d, dict):
        fields = dict(d)
    for klass in type(x).__mro__:
        for name in getattr(klass, "__slots__", ()) or ():
            if name in ("__dict__", "__weakref__"):
                continue
            if fields is None:
                fields = {}
            try:
                fields[name] = getattr(x, name)
            except AttributeError:
                pass
    if fields is not None and type(x).__module__ in ("builtins", "asyncio"):
        return None
    return fields


def snapshot(obj: Any, results: Sequence[Any]) -> Hashable:
    """The outcome of one execution: the object's state and each call's result, in call order."""
    return _Snapshotter().snap((obj, tuple(outcome_of(r) for r in results)))


class _Render:
    """Readable, address-free text of values for messages. Objects without a repr of their
    own are shown as ``Type#n(field=value, ...)``; n numbers the distinct objects of one
    message, so two names of one object read ``Type#1`` twice and two objects differ."""

    def __init__(self) -> None:
        self.ids: dict[int, int] = {}
        self.keep: list[Any] = []

    def __call__(self, x: Any, depth: int = 0) -> str:
        t = type(x)
        if t is str:
            return repr(x) if len(x) <= 40 else repr(x[:37] + "...")
        if t in _PRIMITIVES:
            return repr(x)
        if isinstance(x, Raised):
            return repr(x)
        if depth > 3:
            return "..."
        d = depth + 1
        if isinstance(x, (list, tuple, set, frozenset)):
            items = [self(v, d) for v in list(x)[:8]] + (["..."] if len(x) > 8 else [])
            body = ", ".join(items)
            if isinstance(x, list):
                return f"[{body}]"
            if isinstance(x, tuple):
                return f"({body}{',' if len(x) == 1 else ''})"
            return "{" + body + "}" if x else "set()"
        if isinstance(x, dict):
            items = [f"{self(k, d)}: {self(v, d)}" for k, v in list(x.items())[:8]]
            return "{" + ", ".join(items + (["..."] if len(x) > 8 else [])) + "}"
        for kind, state in _ASYNCIO_STATE:
            if isinstance(x, kind):
                try:
                    return f"{kind.__name__}({state(x)})"
                except Exception:  # noqa: BLE001 - a state we cannot read
                    return kind.__name__
        fields = _fields(x)
        if fields is not None and t.__repr__ is object.__repr__:
            if id(x) in self.ids:
                return f"{t.__name__}#{self.ids[id(x)]}"
            self.ids[id(x)] = len(self.ids) + 1
            self.keep.append(x)
            inner = ", ".join(
                f"{k}={self(v, d)}" for k, v in fields.items() if not _is_sync_primitive(v)
            )
            return f"{t.__name__}#{self.ids[id(x)]}({inner})"
        text = repr(x)
        return text if len(text) <= 60 else text[:57] + "..."


def describe_state(obj: Any, render: _Render | None = None) -> str:
    """A short readable rendering of an object's fields for messages."""
    render = render or _Render()
    fields = _fields(obj)
    if fields is None:
        return render(obj)
    shown = {k: v for k, v in fields.items() if not _is_sync_primitive(v)}
    return ", ".join(f"{k}={render(v)}" for k, v in shown.items())


def _describe(obj: Any, results: Sequence[Any]) -> tuple[str, str]:
    """State and results of one outcome, rendered together (shared object numbering)."""
    render = _Render()
    state = describe_state(obj, render)
    return state, "[" + ", ".join(render(outcome_of(r)) for r in results) + "]"


def _is_sync_primitive(v: Any) -> bool:
    return isinstance(v, tuple(kind for kind, _ in _ASYNCIO_STATE))


class SerialError(Exception):
    """The serial executions themselves could not be computed (they hang or crash the loop)."""


@dataclass
class SerialOutcome:
    order: tuple[int, ...]
    snapshot: Hashable
    state: str
    results: str


@dataclass
class SerialOracle:
    """Decides whether an outcome of K concurrent calls matches a serial execution."""

    factory: Callable[[], Any]
    calls: Sequence[Call]
    run: Callable[[Coroutine[Any, Any, Any]], Any]
    outcomes: list[SerialOutcome] = field(default_factory=list)
    _index: set[Hashable] = field(default_factory=set)
    serial_runs: int = 0

    def __post_init__(self) -> None:
        if len(self.calls) > MAX_CALLS:
            raise ValueError(
                f"the serializability oracle enumerates every order of the calls; "
                f"{len(self.calls)} calls are too many (at most {MAX_CALLS})"
            )

    def prepare(self) -> None:
        """Runs the serial executions (once); raises SerialError when one cannot complete."""
        if self.outcomes:
            return
        runs: dict[tuple[str, ...], tuple[Any, list[Any]]] = {}
        for perm in itertools.permutations(range(len(self.calls))):
            sigs = tuple(self.calls[i].signature for i in perm)
            if sigs not in runs:
                runs[sigs] = self._run_serial([self.calls[i] for i in perm])
                self.serial_runs += 1
            obj, in_order = runs[sigs]
            by_index: list[Any] = [None] * len(self.calls)
            for pos, i in enumerate(perm):
                by_index[i] = in_order[pos]
            snap = snapshot(obj, by_index)
            if snap not in self._index:
                self._index.add(snap)
                self.outcomes.append(SerialOutcome(tuple(perm), snap, *_describe(obj, by_index)))

    def _run_serial(self, calls: list[Call]) -> tuple[Any, list[Any]]:
        async def serial() -> tuple[Any, list[Any]]:
            obj = self.factory()
            results: list[Any] = []
            for c in calls:
                # each call gets its own copy of its arguments, as each concurrent call of a
                # workload does: a mutable argument shared by the calls or the runs would
                # carry one's mutations into the next
                args, kwargs = copy.deepcopy((c.args, dict(c.kwargs)))
                try:
                    results.append(await getattr(obj, c.method)(*args, **kwargs))
                except Exception as exc:  # noqa: BLE001 - a raising call is an outcome
                    results.append(exc)
            return obj, results

        try:
            return self.run(serial())
        except Exception as exc:
            order = ", ".join(str(c) for c in calls)
            raise SerialError(
                f"the serial execution {order} did not complete: {type(exc).__name__}: {exc}"
            ) from exc

    def check(self, obj: Any, results: Sequence[Any]) -> str | None:
        """None when the outcome is serializable, else a sentence saying how it differs."""
        self.prepare()
        if snapshot(obj, results) in self._index:
            return None
        got_state, got_results = _describe(obj, results)
        expected = self.outcomes[0]
        calls = (
            " and ".join(str(c) for c in self.calls)
            if len(self.calls) <= 3
            else (f"{len(self.calls)} calls")
        )
        msg = (
            f"not serializable: after {calls} the object has {got_state}"
            f" and the calls returned {got_results}; "
        )
        if len(self.outcomes) == 1:
            msg += f"run one after another they give {expected.state} and return {expected.results}"
        else:
            msg += (
                f"no serial order gives that (e.g. one after another: {expected.state}, "
                f"returning {expected.results})"
            )
        return msg
