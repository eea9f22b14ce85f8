"""Serializability oracle for ``--cls CLASS --method METHOD`` workloads.

A concurrent execution of K calls on one object is correct when its outcome -- the final state of
the object and what each call returned (or raised) -- is the outcome of *some* serial execution of
the same K calls, one after another in some order, on a fresh object.

* **Outcome** (what is compared). A structural snapshot of ``(object, results)`` taken in one pass,
  so that aliasing counts: an object reached twice is recorded the second time as a reference to
  the first visit (two callers handed the *same* connection differ from two callers handed equal
  ones). Builtin containers are walked recursively (dicts and sets in a canonical key order, so
  insertion order does not matter), user objects through their ``__dict__``/``__slots__``, asyncio
  primitives by their observable state (a lock held or not, an event set or not, a queue's items).
  A call that raised is recorded as the exception's type and arguments. The concurrent outcome is
  serializable when its snapshot equals the snapshot of ``(object, results)`` after some serial
  order, each call's result put at that call's place (calls with equal signatures are
  interchangeable: any assignment of their results to them is admitted).
* **Search** (how an order is found, without trying the K! orders). A depth-first search over
  prefixes of serial orders, from the fresh object: each step applies one call not yet applied.
  - A result whose snapshot takes no identity into account (built only of None, numbers,
    strings, bytes, tuples, frozensets and exceptions of those: *identity-free*) can no longer
    change, and its entry in the final snapshot is its own snapshot whatever surrounds it; it is
    compared with the observed entry of a call of the same signature at once, and the branch is
    pruned when no such call is left. Calls of one signature whose observed results have equal
    identity-free entries are interchangeable, so the search counts them instead of naming them.
    Any other result (a list, an object: its final entry depends on what later calls do to it
    and on aliasing) only counts against the observed calls of its signature whose results are
    not identity-free; which of them gets it is decided at the end of the order (``_LeafMatch``):
    directly when each such result is reachable from the object or private (shares nothing),
    else by trying the assignments (identical objects once). Identity-free entries and the
    others never compare equal (tags of the snapshot, see ``_RESERVED_TAGS``), so the pruning
    drops no order that the full comparison would accept; every match is confirmed by the full
    snapshot.
  - A search node that failed is remembered by (calls applied per interchangeable group, results
    that are not identity-free per signature, the state) and not searched again. The state is a
    strict key (``_StateKey``) of the object and of those results with their calls' signatures:
    dicts in insertion order, sets in iteration order (not their hidden table layout: an
    iteration order that depends on it is hash-order dependence, nondeterminism), floats by
    their bits, functions, classes
    and modules by identity (kept alive so their ids are never reused), plain Python objects by
    their fields. Two states merge only when their keys are equal (a dict lookup: a hash
    collision costs a comparison, never a merge). When the state holds anything the key cannot
    represent exactly (a C object, an exception, an ``asyncio.Future``, deeper than 64 levels),
    the node is named by its serial order of signatures instead, which determines it.
  - Serial executions (``run`` runs a coroutine to completion: the controlled loop in fifo order)
    are cached per order of signatures, shared by every check of the exploration; a prefix is run
    on to a full order (the remaining calls in call order), so K identical calls take one run.
  - Verdicts are cached per observed snapshot (the verdict is a function of it).
  The search assumes, as the enumeration of every order did, that a serial execution is
  deterministic and depends on the fresh object alone (state the calls keep outside the object,
  in globals or class attributes, is neither compared nor reset between serial executions).
* **Failure messages** are built on demand (``NotSerializable.message``), only for the failure
  that is reported.
"""

from __future__ import annotations

import asyncio
import collections
import copy
import enum
import itertools
import math
import struct
import types
from collections.abc import Callable, Coroutine, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from chaossloth import _core

MAX_CALLS = 16
"""At most this many concurrent calls: the search's memo holds up to one node per subset of the
calls whose results are not interchangeable (2^K), so beyond 16 a check can take minutes."""

MAX_SEARCH_NODES = 1_000_000
"""A check that expands more search nodes stops with SerialError (say so rather than hang):
results that share objects, or states without an exact key, can need K! orders."""

EXACT_MESSAGE_ORDERS = 720
"""The failure message says whether every serial order gives one outcome; it enumerates the
orders to know it when there are at most this many (K <= 6), as before the search existed."""

_MAX_DEPTH = 64
_NAMED = (
    type,
    types.FunctionType,
    types.MethodType,
    types.BuiltinFunctionType,
    types.ModuleType,
)
_PRIMITIVES = (type(None), bool, int, float, complex, str, bytes)
_RESERVED_TAGS = frozenset(
    [t.__name__ for t in _PRIMITIVES] + ["tuple", "frozenset", "raised", "deep"]
)
"""The first element of every identity-free snapshot entry. A container of another type whose
name is one of these (a user's ``class tuple(list)``) is tagged with its module too, so that an
entry that took identities into account never equals an identity-free one (the search's pruning
relies on it)."""
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


_SCALAR_NAMES = {t: t.__name__ for t in _PRIMITIVES if t is not float}
"""Primitive types whose snapshot is (type name, value) (float aside: NaN is special)."""

_SEQ, _DICT, _SET, _ASYNCIO, _NAME, _OTHER = range(6)


@dataclass(frozen=True)
class _Kind:
    """What the snapshot does with instances of one type (decided once per type)."""

    code: int
    tag: str
    #: _ASYNCIO: the primitive's class and its state function
    primitive: tuple[type, Callable[[Any], Any]] | None = None
    #: _OTHER: slot names over the MRO, and whether fields are ignored (builtins, asyncio)
    slots: tuple[str, ...] = ()
    builtin: bool = False


_KINDS: dict[type, _Kind] = {}


def _kind(t: type) -> _Kind:
    k = _KINDS.get(t)
    if k is not None:
        return k
    tag = t.__qualname__ if t.__qualname__ not in _RESERVED_TAGS else _module_tag(t)
    if issubclass(t, (list, tuple)):
        k = _Kind(_SEQ, tag)
    elif issubclass(t, dict):
        k = _Kind(_DICT, tag)
    elif issubclass(t, (set, frozenset)):
        k = _Kind(_SET, tag)
    else:
        primitive = next(((c, f) for c, f in _ASYNCIO_STATE if issubclass(t, c)), None)
        if primitive is not None:
            k = _Kind(_ASYNCIO, tag, primitive=primitive)
        elif issubclass(t, _NAMED):
            k = _Kind(_NAME, tag)
        else:
            k = _Kind(
                _OTHER, tag, slots=_slot_names(t), builtin=t.__module__ in ("builtins", "asyncio")
            )
    _KINDS[t] = k
    return k


def _slot_names(t: type) -> tuple[str, ...]:
    return tuple(
        name
        for klass in t.__mro__
        for name in (getattr(klass, "__slots__", ()) or ())
        if name not in ("__dict__", "__weakref__")
    )


class _Snapshotter:
    def __init__(self) -> None:
        self.memo: dict[int, int] = {}
        self.keep: list[Any] = []  # keeps visited objects alive so ids stay unique

    def snap(self, x: Any, depth: int = 0) -> Hashable:
        """The snapshot of `x` at `depth`: the builtin values walked in C (_core.snapshot,
        ext/snapshot.c: element for element what :meth:`snap_py` returns), the others by
        :meth:`snap_py`."""
        return _core.snapshot(self, x, depth)  # type: ignore[no-any-return]

    def snap_py(self, x: Any, depth: int = 0) -> Hashable:
        t = type(x)
        if t in _PRIMITIVES:
            return (t.__name__, x) if t is not float or not math.isnan(x) else ("float", "nan")
        if depth > _MAX_DEPTH:
            return ("deep", t.__qualname__)
        d = depth + 1
        if t is tuple:
            # immutable values: sharing one is not observable, so no identity is recorded
            return ("tuple", self._ordered(x, d))
        if t is frozenset:
            return ("frozenset", self._unordered(x, d))
        if t is Raised:
            return ("raised", x.type_name, self.snap(x.args, d))
        memo = self.memo
        if id(x) in memo:
            return ("ref", memo[id(x)])
        memo[id(x)] = len(memo)
        self.keep.append(x)
        k = _KINDS.get(t) or _kind(t)
        code = k.code
        if code == _DICT:
            return (k.tag, self._dict(x, d))
        if code == _OTHER:
            fields = None if k.builtin else _instance_fields(x, k.slots)
            if fields is not None:
                return ("obj", t.__qualname__, self.snap(fields, d))
            try:
                hash(x)
                if t.__eq__ is not object.__eq__:
                    return ("value", t.__qualname__, x)
            except TypeError:
                pass
            return ("opaque", t.__qualname__)
        if code == _SEQ:
            return (k.tag, self._ordered(x, d))
        if code == _SET:
            return (k.tag, self._unordered(x, d))
        if code == _ASYNCIO:
            assert k.primitive is not None
            kind, state = k.primitive
            try:
                return (kind.__qualname__, self.snap(state(x), d))
            except Exception:  # noqa: BLE001 - a primitive in a state we cannot read
                return (kind.__qualname__,)
        return ("named", t.__qualname__, getattr(x, "__qualname__", getattr(x, "__name__", "")))

    def _ordered(self, xs: Any, d: int) -> tuple[Hashable, ...]:
        # scalars inline (this is the hot loop): what snap() would return for them
        snap = self.snap
        return tuple(
            [(_SCALAR_NAMES[type(v)], v) if type(v) in _SCALAR_NAMES else snap(v, d) for v in xs]
        )

    def _dict(self, x: dict[Any, Any], d: int) -> tuple[Hashable, ...]:
        snap = self.snap
        items = [
            ((_SCALAR_NAMES[type(k)], k) if type(k) in _SCALAR_NAMES else snap(k, d), v)
            for k, v in x.items()
        ]
        if len(items) > 1:
            items.sort(key=_repr_of_key)
        return tuple(
            [
                (k, (_SCALAR_NAMES[type(v)], v) if type(v) in _SCALAR_NAMES else snap(v, d))
                for k, v in items
            ]
        )

    def _unordered(self, xs: Any, d: int) -> tuple[Hashable, ...]:
        return tuple(sorted([self.snap(v, d) for v in xs], key=repr))


def _repr_of_key(kv: tuple[Hashable, Any]) -> str:
    return repr(kv[0])


def _instance_fields(x: Any, slots: tuple[str, ...]) -> dict[str, Any] | None:
    """``_fields`` with the type's slot names known."""
    fields: dict[str, Any] | None = None
    d = getattr(x, "__dict__", None)
    if isinstance(d, dict):
        fields = dict(d)
    for name in slots:
        if fields is None:
            fields = {}
        try:
            fields[name] = getattr(x, name)
        except AttributeError:
            pass
    return fields


def _module_tag(t: type) -> str:
    return f"{t.__module__}.{t.__qualname__}"


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
    return _Snapshotter().snap((obj, tuple([outcome_of(r) for r in results])))


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
    """The serial executions themselves could not be computed (they hang or crash the loop), or
    the search for a serial order outgrew ``MAX_SEARCH_NODES``."""


# ------------------------------------------------------------------ strict state keys

_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class defined by a class statement
_EXACT_SCALARS = (type(None), bool, int, str, bytes)
_LOSSY = ("lossy",)
_IMM = object()
"""Stands for an identity-free result in a state key: it can no longer change, it was compared
when it was returned, and no later call can reach it."""


class _StateKey:
    """A hashable key of an object graph that is equal for two graphs only when they are the
    same as far as any later call can tell (see the module docstring); ``exact`` turns False
    when the graph holds something the key cannot represent, and the key must then not be used.

    `pins` keeps alive every object named by identity, so that an id in a key is never reused
    by another object during the oracle's life."""

    def __init__(self, pins: dict[int, Any]) -> None:
        self.memo: dict[int, int] = {}
        self.pins = pins
        self.exact = True

    def _pin(self, x: Any) -> int:
        self.pins[id(x)] = x
        return id(x)

    def key(self, x: Any, depth: int = 0) -> Hashable:
        t = type(x)
        if t in _EXACT_SCALARS:
            return (t.__name__, x)
        if t is float:
            return ("float", struct.pack("<d", x))
        if t is complex:
            return ("complex", struct.pack("<dd", x.real, x.imag))
        if x is _IMM:
            return ("identity-free result",)
        if depth > _MAX_DEPTH:
            self.exact = False
            return _LOSSY
        d = depth + 1
        if t is tuple:
            return ("tuple", tuple(self.key(v, d) for v in x))
        if t is frozenset:  # iteration order, which later code can observe
            return ("frozenset", tuple(self.key(v, d) for v in x))
        if id(x) in self.memo:
            return ("ref", self.memo[id(x)])
        self.memo[id(x)] = len(self.memo)
        if t is list or t is set:
            return (t.__name__, tuple(self.key(v, d) for v in x))
        if t is dict:  # insertion order: later iteration, popitem() see it
            return ("dict", tuple((self.key(k, d), self.key(v, d)) for k, v in x.items()))
        if t is collections.deque:
            return ("deque", x.maxlen, tuple(self.key(v, d) for v in x))
        if isinstance(x, (type, types.ModuleType, types.FunctionType, enum.Enum)):
            return ("id", self._pin(x))
        if t is types.MethodType:
            return ("method", self.key(x.__func__, d), self.key(x.__self__, d))
        if t is types.BuiltinFunctionType:
            owner = x.__self__
            if owner is None or isinstance(owner, types.ModuleType):
                return ("id", self._pin(x))
            return ("builtin method", x.__name__, self.key(owner, d))
        if isinstance(x, asyncio.AbstractEventLoop):
            # each serial execution runs on a loop of its own; a bound primitive is bound to
            # the loop that runs the whole execution, whichever it is
            return ("loop",)
        if t.__flags__ & _HEAPTYPE and all(
            k is object or k.__flags__ & _HEAPTYPE for k in t.__mro__
        ):
            fields: list[tuple[str, Hashable]] = []
            attrs = getattr(x, "__dict__", None)
            if attrs is not None:
                if type(attrs) is not dict:
                    self.exact = False
                    return _LOSSY
                fields.extend((k, self.key(v, d)) for k, v in attrs.items())
            for klass in t.__mro__:
                for name in getattr(klass, "__slots__", ()) or ():
                    if name in ("__dict__", "__weakref__"):
                        continue
                    try:
                        fields.append((name, self.key(getattr(x, name), d)))
                    except AttributeError:
                        fields.append((name, ("unset",)))
            return ("obj", self._pin(t), tuple(fields))
        self.exact = False
        return _LOSSY


# ------------------------------------------------------------------ serial executions


@dataclass
class _Node:
    """A prefix of a serial order (signature ids), as one serial execution observed it.

    Invariant: `entry` and `ident` describe the state right after the prefix's last call;
    `obj`/`results` are kept only for full orders (the execution ended there)."""

    #: the prefix: the signature id of each position
    sigs: tuple[int, ...]
    #: the snapshot entry of the last call's result when identity-free, else None
    entry: Hashable | None
    #: ("state", strict key) or, when the state has no exact key, ("order", the prefix)
    ident: Hashable
    obj: Any = None
    results: list[Any] | None = None


def _entry(result: Any) -> Hashable | None:
    """The result's entry in a snapshot of (object, results) when identity-free, else None."""
    snap = _Snapshotter()
    e = snap.snap(outcome_of(result), 2)  # results sit at depth 2 of snapshot()'s tuple
    return None if snap.memo else e


class _AuditSnapshotter(_Snapshotter):
    """A snapshot numbering objects from `offset` on (as if that many had been visited), which
    notes whether an order it sorted by depended on object numbers (``ref_sorted``): without
    that, its result at another offset is this one with every reference shifted.  Its walk is
    the Python one throughout (its sorts note what they sort by)."""

    snap = _Snapshotter.snap_py

    def __init__(self, offset: int = 0) -> None:
        super().__init__()
        self.memo.update((-1 - n, n) for n in range(offset))  # ids are positive: no clash
        self.ref_sorted = False

    def visited(self) -> set[int]:
        return {i for i in self.memo if i >= 0}

    def _dict(self, x: dict[Any, Any], d: int) -> tuple[Hashable, ...]:
        out = super()._dict(x, d)
        if len(out) > 1 and not self.ref_sorted:
            self.ref_sorted = any(_has_ref(kv[0]) for kv in out)
        return out

    def _unordered(self, xs: Any, d: int) -> tuple[Hashable, ...]:
        out = super()._unordered(xs, d)
        if len(out) > 1 and not self.ref_sorted:
            self.ref_sorted = any(_has_ref(v) for v in out)
        return out


def _has_ref(snap: Any) -> bool:
    """Whether a snapshot holds a reference node (or something shaped like one)."""
    if type(snap) is not tuple:
        return False
    if len(snap) == 2 and snap[0] == "ref" and type(snap[1]) is int:
        return True
    return any(_has_ref(c) for c in snap)


class _LeafMatch:
    """At the end of a serial order: is there an assignment of its results that are not
    identity-free to the calls whose observed results are not, that makes the snapshots equal?

    Fast path, when each such result is either reachable from the object (its entry is a
    reference to it: fixed; tuples, frozensets and exceptions are not numbered, so never) or
    private (reachable from nothing else compared, sharing nothing
    with the object or the other results, and its snapshot sorted nothing by object numbers):
    the object's part of the snapshot must be equal, and then the calls are taken in order, each
    entry matched to the one kind of result (equal snapshot) it can be; results of one kind are
    interchangeable. Otherwise every assignment is tried (identical objects once)."""

    def __init__(
        self, oracle: SerialOracle, observed: Any, results: Sequence[Any], mutable: list[int]
    ) -> None:
        self.oracle, self.observed, self.results, self.mutable = oracle, observed, results, mutable
        self.entries = observed[1][1][1]
        self.budget = oracle.nodes + MAX_SEARCH_NODES

    def charge(self, n: int) -> None:
        if self.oracle.nodes > self.budget - n:
            raise SerialError(
                f"the search for a serial order of {len(self.oracle.calls)} calls visited more "
                f"than {MAX_SEARCH_NODES} states (results that share objects, or states without "
                "an exact key, can need every order of the calls); use fewer --tasks"
            )

    def __call__(self, leaf: _Node) -> bool:
        assert leaf.obj is not None and leaf.results is not None
        sigs = self.oracle._sigs
        positions = [p for p, r in enumerate(leaf.results) if _entry(r) is None]
        if not positions:
            return self._equal(leaf, {})
        obj_snap = _Snapshotter()
        if obj_snap.snap(leaf.obj, 1) != self.observed[1][0]:
            return False  # the object's part does not depend on the assignment
        kinds = self._kinds(leaf, positions, obj_snap.memo)
        if kinds is None:
            return self._every_assignment(leaf, positions)
        offset = len(obj_snap.memo)
        assignment: dict[int, int] = {}
        for i in self.mutable:
            e = self.entries[i]
            found = None
            for (s, kind), left in kinds.items():
                if s != sigs[i] or not left:
                    continue
                if kind[0] == "reach":
                    ok = e == ("ref", kind[1])
                else:
                    rep = leaf.results[left[0]]
                    ok = _AuditSnapshotter(offset).snap(outcome_of(rep), 2) == e
                if ok:
                    found = (s, kind)
                    break
            if found is None:
                return False  # this call's entry is no result's
            p = kinds[found].pop()
            assignment[i] = p
            if found[1][0] == "private":
                offset += found[1][2]
        return self._equal(leaf, assignment)

    def _kinds(
        self, leaf: _Node, positions: list[int], obj_ids: dict[int, int]
    ) -> dict[tuple[int, Hashable], list[int]] | None:
        """Positions by (signature, kind), or None when the fast path does not apply."""
        assert leaf.results is not None
        kinds: dict[tuple[int, Hashable], list[int]] = {}
        seen: set[int] = set()
        audits: list[_AuditSnapshotter] = []  # alive: ids of their objects stay unique
        for p in positions:
            r = outcome_of(leaf.results[p])
            # a tuple, frozenset or raised exception is not numbered itself: only private ones
            numbered = type(r) not in (tuple, frozenset, Raised)
            if numbered and id(r) in obj_ids:
                kind: Hashable = ("reach", obj_ids[id(r)])
            else:
                audit = _AuditSnapshotter()
                audits.append(audit)
                shape = audit.snap(r, 2)
                ids = audit.visited()
                if audit.ref_sorted or ids & obj_ids.keys() or ids & seen:
                    return None
                seen |= ids
                kind = ("private", shape, len(ids))
            kinds.setdefault((leaf.sigs[p], kind), []).append(p)
        return kinds

    def _every_assignment(self, leaf: _Node, positions: list[int]) -> bool:
        assert leaf.results is not None
        sigs = self.oracle._sigs
        results = leaf.results

        def assign(n: int, free: list[int], chosen: dict[int, int]) -> bool:
            if n == len(self.mutable):
                return self._equal(leaf, chosen)
            self.charge(1)
            self.oracle.nodes += 1
            i = self.mutable[n]
            tried: list[Any] = []
            for p in free:
                if leaf.sigs[p] != sigs[i] or any(results[p] is t for t in tried):
                    continue  # identical objects: one of them is enough
                tried.append(results[p])
                chosen[i] = p
                if assign(n + 1, [q for q in free if q != p], chosen):
                    return True
                del chosen[i]
            return False

        return assign(0, positions, {})

    def _equal(self, leaf: _Node, assignment: dict[int, int]) -> bool:
        """The definitive comparison: the full snapshot with this assignment."""
        assert leaf.results is not None
        by_index = list(self.results)  # identity-free entries equal the observed ones
        for i, p in assignment.items():
            by_index[i] = leaf.results[p]
        return snapshot(leaf.obj, by_index) == self.observed


@dataclass(eq=False)
class NotSerializable:
    """A failing verdict: cheap to make; the sentence is built when asked for (``message``,
    ``str()``). Ask before the next execution runs: the observed object may share state with
    the program's modules, which are reset between executions."""

    oracle: SerialOracle
    obj: Any
    results: Sequence[Any]
    _message: str | None = None

    @property
    def message(self) -> str:
        if self._message is None:
            self._message = self.oracle.message(self.obj, self.results)
        return self._message

    def __str__(self) -> str:
        return self.message


@dataclass
class SerialOracle:
    """Decides whether an outcome of K concurrent calls matches a serial execution."""

    factory: Callable[[], Any]
    calls: Sequence[Call]
    run: Callable[[Coroutine[Any, Any, Any]], Any]
    #: serial executions run, and calls made in them
    serial_runs: int = 0
    serial_calls: int = 0
    #: searches run (distinct observed outcomes) and search nodes expanded in them
    searches: int = 0
    nodes: int = 0
    _sigs: tuple[int, ...] = ()
    _rep: dict[int, Call] = field(default_factory=dict)
    _nodes: dict[tuple[int, ...], _Node] = field(default_factory=dict)
    _verdicts: dict[Hashable, bool] = field(default_factory=dict)
    _pins: dict[int, Any] = field(default_factory=dict)
    _expected: tuple[str, str] | None = None
    _single: bool | None = None

    def __post_init__(self) -> None:
        if len(self.calls) > MAX_CALLS:
            raise ValueError(
                f"{len(self.calls)} calls are too many for the serializability oracle (at most "
                f"{MAX_CALLS}: its search can visit every subset of the calls)"
            )
        ids: dict[str, int] = {}
        for c in self.calls:
            sid = ids.setdefault(c.signature, len(ids))
            self._rep.setdefault(sid, c)
        self._sigs = tuple(ids[c.signature] for c in self.calls)

    # -------------------------------------------------------------- serial executions

    def prepare(self) -> None:
        """Runs the calls one after another in call order (once); raises SerialError when the
        serial execution cannot complete."""
        if self._expected is None:
            leaf = self._node(self._sigs)
            assert leaf.obj is not None and leaf.results is not None
            self._expected = _describe(leaf.obj, leaf.results)

    def _node(self, seq: tuple[int, ...]) -> _Node:
        node = self._nodes.get(seq)
        if node is None:
            self._execute(seq)
            node = self._nodes[seq]
        return node

    def _execute(self, seq: tuple[int, ...]) -> None:
        """Runs `seq` continued to a full order (the calls left, in call order), recording a
        node for every prefix not recorded yet."""
        left = list(self._sigs)
        for s in seq:
            left.remove(s)
        full = seq + tuple(left)
        calls = [self._rep[s] for s in full]

        async def serial() -> tuple[Any, list[Any]]:
            obj = self.factory()
            results: list[Any] = []
            for pos, c in enumerate(calls):
                # each call gets its own copy of its arguments, as each concurrent call of a
                # workload does: a mutable argument shared by the calls or the runs would
                # carry one's mutations into the next
                args, kwargs = copy.deepcopy((c.args, dict(c.kwargs)))
                try:
                    results.append(await getattr(obj, c.method)(*args, **kwargs))
                except Exception as exc:  # noqa: BLE001 - a raising call is an outcome
                    results.append(exc)
                self.serial_calls += 1
                prefix = full[: pos + 1]
                if prefix not in self._nodes:
                    self._nodes[prefix] = self._observe(prefix, obj, results)
            return obj, results

        self.serial_runs += 1
        try:
            obj, results = self.run(serial())
        except Exception as exc:
            order = ", ".join(str(c) for c in calls)
            raise SerialError(
                f"the serial execution {order} did not complete: {type(exc).__name__}: {exc}"
            ) from exc
        leaf = self._nodes[full]
        if leaf.obj is None:
            leaf.obj, leaf.results = obj, list(results)

    def _observe(self, prefix: tuple[int, ...], obj: Any, results: list[Any]) -> _Node:
        last = results[-1]
        entry = _entry(last)
        keyer = _StateKey(self._pins)
        # a result that is not identity-free is keyed with the signature of the call that
        # returned it: which calls it may be given to depends on it
        imm = tuple(_IMM if _entry(r) is not None else (sig, r) for sig, r in zip(prefix, results))
        key = keyer.key((obj, imm))
        ident = ("state", key) if keyer.exact else ("order", prefix)
        return _Node(prefix, entry, ident)

    # -------------------------------------------------------------- verdicts

    def check(self, obj: Any, results: Sequence[Any]) -> NotSerializable | None:
        """None when the outcome is serializable, else a verdict whose ``message`` says how it
        differs."""
        self.prepare()
        observed = snapshot(obj, results)
        ok = self._verdicts.get(observed)
        if ok is None:
            ok = self._search(observed, results)
            if len(self._verdicts) >= 65536:  # bounded memory; a dropped verdict costs a search
                self._verdicts.clear()
            self._verdicts[observed] = ok
        return None if ok else NotSerializable(self, obj, results)

    def _search(self, observed: Any, results: Sequence[Any]) -> bool:
        """Whether some serial order's snapshot equals `observed` (the module docstring)."""
        self.searches += 1
        k = len(self.calls)
        entries = observed[1][1][1]  # snapshot() = ("tuple", (obj, ("tuple", entries)))
        groups: dict[tuple[int, Hashable], int] = {}
        cap: list[int] = []
        mutable: list[int] = []  # calls whose observed result is not identity-free
        for i, r in enumerate(results):
            if _entry(r) is not None:
                g = groups.setdefault((self._sigs[i], entries[i]), len(groups))
                if g == len(cap):
                    cap.append(0)
                cap[g] += 1
            else:
                mutable.append(i)
        total = collections.Counter(self._sigs)
        n_sigs = len(total)
        mcap = [0] * n_sigs  # per signature: calls whose observed result is not identity-free
        for i in mutable:
            mcap[self._sigs[i]] += 1
        failed: set[Hashable] = set()
        match = _LeafMatch(self, observed, results, mutable)

        def dfs(seq: tuple[int, ...], counts: tuple[int, ...], mused: tuple[int, ...]) -> bool:
            if len(seq) == k:
                return match(self._nodes[seq])
            ident = self._nodes[seq].ident if seq else ("order", ())
            memo = (counts, mused, ident)
            if memo in failed:
                return False
            self.nodes += 1
            match.charge(1)
            used = collections.Counter(seq)
            for s in range(n_sigs):
                if used[s] == total[s]:
                    continue
                child = seq + (s,)
                node = self._node(child)
                if node.entry is not None:
                    g = groups.get((s, node.entry))
                    if g is None or counts[g] == cap[g]:
                        continue  # no call of this signature observed this result
                    bumped = counts[:g] + (counts[g] + 1,) + counts[g + 1 :]
                    if dfs(child, bumped, mused):
                        return True
                elif (
                    mused[s] < mcap[s]
                    and dfs(  # which call gets it: decided by _LeafMatch
                        child, counts, mused[:s] + (mused[s] + 1,) + mused[s + 1 :]
                    )
                ):
                    return True
            failed.add(memo)
            return False

        return dfs((), (0,) * len(cap), (0,) * n_sigs)

    # -------------------------------------------------------------- messages

    def serial_outcomes(self) -> list[tuple[tuple[int, ...], Hashable]]:
        """Every distinct serial outcome with the first order giving it (orders in
        lexicographic order of call indices): all K! orders, so only for small K."""
        seen: set[Hashable] = set()
        out: list[tuple[tuple[int, ...], Hashable]] = []
        for perm in itertools.permutations(range(len(self.calls))):
            leaf = self._node(tuple(self._sigs[i] for i in perm))
            assert leaf.obj is not None and leaf.results is not None
            by_index: list[Any] = [None] * len(self.calls)
            for pos, i in enumerate(perm):
                by_index[i] = leaf.results[pos]
            snap = snapshot(leaf.obj, by_index)
            if snap not in seen:
                seen.add(snap)
                out.append((perm, snap))
        return out

    def single_outcome(self) -> bool | None:
        """Whether every serial order gives one outcome: None when that is not known (more
        than ``EXACT_MESSAGE_ORDERS`` orders, and not evidently so)."""
        if self._single is None:
            if math.factorial(len(self.calls)) <= EXACT_MESSAGE_ORDERS:
                self._single = len(self.serial_outcomes()) == 1
            else:
                # evidently: one signature, and every result identity-free and equal
                leaf = self._node(self._sigs)
                assert leaf.results is not None
                entries = {_entry(r) for r in leaf.results}
                if len(set(self._sigs)) == 1 and len(entries) == 1 and None not in entries:
                    self._single = True
        return self._single

    def message(self, obj: Any, results: Sequence[Any]) -> str:
        """The sentence saying how the outcome (obj, results) differs from the serial ones."""
        self.prepare()
        assert self._expected is not None
        exp_state, exp_results = self._expected
        got_state, got_results = _describe(obj, results)
        calls = (
            " and ".join(str(c) for c in self.calls)
            if len(self.calls) <= 3
            else (f"{len(self.calls)} calls")
        )
        msg = (
            f"not serializable: after {calls} the object has {got_state}"
            f" and the calls returned {got_results}; "
        )
        if self.single_outcome():
            msg += f"run one after another they give {exp_state} and return {exp_results}"
        else:
            msg += (
                f"no serial order gives that (e.g. one after another: {exp_state}, "
                f"returning {exp_results})"
            )
        return msg
