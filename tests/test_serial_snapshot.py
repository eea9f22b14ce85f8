"""The serializability oracle's snapshot walks builtin values in C (ext/snapshot.c): it must
give, element for element, what the Python walk gives (same tuples, same reference numbers in
the same visiting order, same memo), on any value, shared and nested objects included."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from chaossloth import serial


class _PythonWalk(serial._Snapshotter):
    """The snapshotter with the Python walk only (the reference)."""

    snap = serial._Snapshotter.snap_py


class Point:
    def __init__(self, x: Any, y: Any) -> None:
        self.x = x
        self.y = y


class Slotted:
    __slots__ = ("a",)

    def __init__(self, a: Any) -> None:
        self.a = a


class MyList(list):  # type: ignore[type-arg]
    pass


class tuple_(tuple):  # type: ignore[type-arg]
    pass


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True),
    st.complex_numbers(allow_nan=False),
    st.text(max_size=4),
    st.binary(max_size=3),
)
hashables = st.recursive(
    scalars,
    lambda inner: st.one_of(st.tuples(inner, inner), st.frozensets(inner, max_size=3)),
    max_leaves=4,
)
hashable_lists = st.lists(hashables, max_size=3)
short_texts = st.text(max_size=3)
KINDS = ["list", "dict", "set", "tuple", "mylist", "tuple_", "point", "slotted", "raised"]


def _value(data: st.DataObject, pool: list[Any], budget: list[int], level: int = 0) -> Any:
    """A value of at most budget[0] containers, whose mutable containers may be shared:
    `pool` collects them, and a later draw may reuse one (aliasing: the second visit is a
    reference)."""
    kinds = ["scalar", "hashable"]
    if budget[0] > 0 and level < 5:
        kinds += KINDS
    if pool:
        kinds.append("shared")
    kind = data.draw(st.sampled_from(kinds))
    if kind == "scalar":
        return data.draw(scalars)
    if kind == "hashable":
        return data.draw(hashables)
    if kind == "shared":
        return pool[data.draw(st.integers(min_value=0, max_value=len(pool) - 1))]
    budget[0] -= 1
    n = data.draw(st.integers(min_value=0, max_value=3))

    def items() -> list[Any]:
        return [_value(data, pool, budget, level + 1) for _ in range(n)]

    made: Any
    if kind == "list":
        made = items()
    elif kind == "mylist":
        made = MyList(items())
    elif kind == "dict":
        made = {data.draw(hashables): _value(data, pool, budget, level + 1) for _ in range(n)}
    elif kind == "set":
        made = set(data.draw(hashable_lists))
    elif kind == "tuple":
        return tuple(items())
    elif kind == "tuple_":
        return tuple_(items())
    elif kind == "raised":
        return serial.Raised(data.draw(short_texts), tuple(items()))
    elif kind == "point":
        made = Point(_value(data, pool, budget, level + 1), _value(data, pool, budget, level + 1))
    else:
        made = Slotted(_value(data, pool, budget, level + 1))
    pool.append(made)
    return made


def _same(a: Any, b: Any) -> bool:
    """Equality where NaN equals NaN only as the very same float object (the snapshots keep
    the value itself; the Python walk turns NaN into "nan")."""
    if type(a) is not type(b):
        return False
    if isinstance(a, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_the_c_walk_is_the_python_walk(data: st.DataObject) -> None:
    pool: list[Any] = []
    value = _value(data, pool, [12])
    depth = data.draw(st.sampled_from([0, 1, 2, 63, 64, 65]))
    fast, slow = serial._Snapshotter(), _PythonWalk()
    got, want = fast.snap(value, depth), slow.snap(value, depth)
    assert _same(got, want), (got, want)
    # the same objects visited in the same order (a user object's fields are a fresh dict in
    # each walk: those by type)
    made = {id(x) for x in pool}

    def ident(x: Any) -> Any:
        return id(x) if id(x) in made else type(x)

    assert [ident(x) for x in fast.keep] == [ident(x) for x in slow.keep]
    assert sorted(fast.memo.values()) == sorted(slow.memo.values())


def test_aliasing_and_depth_by_hand() -> None:
    shared = [1, 2]
    value = {"b": shared, "a": (shared, {3}), "c": [float("nan"), -0.0]}
    fast, slow = serial._Snapshotter(), _PythonWalk()
    assert fast.snap(value) == slow.snap(value)
    nested: Any = []
    for _ in range(80):
        nested = [nested]
    assert serial._Snapshotter().snap(nested) == _PythonWalk().snap(nested)
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    assert serial._Snapshotter().snap(cyclic) == ("list", (("ref", 0),))


def test_a_list_changed_while_it_is_walked_is_read_as_a_for_loop_reads_it() -> None:
    """A slot's property (run by the Python walk of an item) empties the list being walked:
    the C walk reads the list by index against its current length, as the Python walk's
    loop does, holding each item while it walks it."""
    items: list[Any] = []

    class Clearing:
        __slots__ = ("boom",)

    Clearing.boom = property(lambda self: (items.clear(), 1)[1])  # type: ignore[assignment]

    def fill() -> list[Any]:
        items[:] = [Clearing(), 1, [2], "three"]
        return items

    got = serial._Snapshotter().snap(fill())
    assert got == _PythonWalk().snap(fill())
    fields = ("dict", ((("str", "boom"), ("int", 1)),))
    assert got == ("list", (("obj", Clearing.__qualname__, fields),))
