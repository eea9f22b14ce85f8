"""What code that does not record itself can reach, on generated programs: DPOR == brute force.

A "library" (compiled under a file name no instrumentation covers, as an installed package's is)
builds a small object graph per execution: lists held at several depths of an instance (its
``__dict__``, a dict in it, a child instance, a ``__slots__`` instance, a list of instances, a
base class's attribute of the class it hands out).  Its code appends to one of those lists
through each way an uninstrumented call can be made on the graph: a function given the root, a
method of the root, the root's opaque ``__setitem__``, a classmethod of the class.

Each generated worker takes aliases of all those lists into a local (instrumented reads), yields,
calls the library, and later reads the lists' lengths through its aliases.  A read through an alias taken before another task's
library call is ordered with that call only if the call recorded a write of the list it changed
(ext/hooks.c, W_ARG walks): DPOR must reach every outcome brute force reaches.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_capture_order import _explore
from test_capture_protocols import installed_library
from test_loop_model import load

_LIBRARY = '''
class Child:
    def __init__(self):
        self.items = []


class Slotted:
    __slots__ = ("items",)

    def __init__(self):
        self.items = []


def graph_class():
    """A fresh class pair per execution: what the class's classmethod changes is its base's."""

    class Base:
        shared = {"items": []}

    class Root(Base):
        def __init__(self):
            self.items = []
            self.meta = {"items": []}
            self.child = Child()
            self.slot = Slotted()
            self.kids = [Child()]

        def push(self, where, v):
            target(self, where).append(v)

        def __setitem__(self, where, v):
            target(self, where).append(v)

        @classmethod
        def push_shared(cls, v):
            cls.shared["items"].append(v)

    return Root


def target(root, where):
    if where == "items":
        return root.items
    if where == "meta":
        return root.meta["items"]
    if where == "child":
        return root.child.items
    if where == "slot":
        return root.slot.items
    if where == "kids":
        return root.kids[0].items
    return type(root).shared["items"]


def push(root, where, v):
    target(root, where).append(v)
'''

#: where a list is held -> the instrumented expression that reaches it from the root `r`
WHERE = {
    "items": "r.items",
    "meta": "r.meta['items']",
    "child": "r.child.items",
    "slot": "r.slot.items",
    "kids": "r.kids[0].items",
    "shared": "r.shared['items']",
}

#: the ways to call the library: (name, source given `where` and a value)
CALLS = {
    "function": "lib.push(r, {where!r}, {v})",
    "method": "r.push({where!r}, {v})",
    "setitem": "r[{where!r}] = {v}",
    "classmethod": "type(r).push_shared({v})",
}


@pytest.fixture(autouse=True, scope="module")
def library() -> Iterator[types.ModuleType]:
    yield from installed_library("cs_reach_library", _LIBRARY)


_ALIASES = "(" + ", ".join(WHERE.values()) + ")"


def _op_source(op: tuple[Any, ...], worker: int, index: int) -> str:
    kind = op[0]
    if kind == "alias":  # every list at once: any later call of the other task is observable
        return f"aliases = {_ALIASES}"
    if kind == "read":
        return "seen.append(tuple(map(len, aliases)))"
    if kind == "sleep0":
        return "await asyncio.sleep(0)"
    _, how, where = op
    return CALLS[how].format(where=where, v=worker * 10 + index)


def render_workers(
    workers: list[list[tuple[Any, ...]]],
    op_source: Callable[[tuple[Any, ...], int, int], str],
    *,
    library: str,
    setup: str,
    state: str,
    shared: str = "",
) -> str:
    """A program of one worker per op list (each op's source from `op_source(op, worker,
    index)`, with `aliases` and `seen` in scope), run concurrently by main after `setup`; its
    outcome is what each worker saw and `state`.  `shared`: a name main hands every worker."""
    before = f"{shared}, " if shared else ""
    lines = ["import asyncio", f"import {library} as lib", ""]
    for w, ops in enumerate(workers):
        lines.append(f"async def worker{w}({before}seen):")
        lines.append("    aliases = ()")
        lines.extend(f"    {op_source(op, w, i)}" for i, op in enumerate(ops))
        lines.append("")
    lines.append("async def main(box):")
    lines.append(f"    {setup}")
    lines.append(f"    seen = [[] for _ in range({len(workers)})]")
    names = ", ".join(f"worker{w}({before}seen[{w}])" for w in range(len(workers)))
    lines.append(f"    await asyncio.gather({names})")
    lines.append(f"    box['final'] = (tuple(map(tuple, seen)), {state})")
    return "\n".join(lines) + "\n"


def render(workers: list[list[tuple[Any, ...]]]) -> str:
    lists = ", ".join(f"tuple(lib.target(r, {where!r}))" for where in WHERE)
    return render_workers(
        workers,
        _op_source,
        library="cs_reach_library",
        setup="r = lib.graph_class()()",
        state=lists,
        shared="r",
    )


_WHERES = st.sampled_from(sorted(WHERE))
_CALL = st.tuples(st.just("call"), st.sampled_from(sorted(CALLS)), _WHERES)
_OPS = st.one_of(
    st.just(("alias",)),
    st.just(("read",)),
    st.just(("sleep0",)),
    _CALL,
)
_SLEEP = st.just(("sleep0",))
#: one worker calls the library, the other takes its aliases, yields, and reads through them
#: (in either start order): the shape whose race is only on the lists
_RACY = st.tuples(
    st.lists(st.one_of(_SLEEP, _CALL), min_size=1, max_size=4),
    st.lists(st.one_of(_SLEEP, _CALL, st.just(("read",))), max_size=3),
    st.booleans(),
).map(lambda t: [t[0], [("alias",), ("sleep0",), *t[1], ("read",)]][:: -1 if t[2] else 1])
_WORKERS = st.one_of(
    _RACY, st.lists(st.lists(_OPS, min_size=1, max_size=5), min_size=2, max_size=2)
)


@settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(workers=_WORKERS)
def test_dpor_reaches_what_brute_force_reaches(workers: list[list[tuple[Any, ...]]]) -> None:
    module = load(render(workers))
    brute, _ = _explore(module, "exhaustive")
    dpor, _ = _explore(module, "dpor")
    assert dpor == brute, render(workers)


@pytest.mark.parametrize("how", sorted(CALLS))
def test_the_program_shape_races_through_an_alias(how: str) -> None:
    # the shape the property is about, written out: the other task's call comes first in the
    # default order, after the alias was taken; reading before it needs the list's race
    workers = [
        [("sleep0",), ("call", how, "kids" if how != "classmethod" else "shared")],
        [("alias",), ("sleep0",), ("read",)],
    ]
    module = load(render(workers))
    brute, _ = _explore(module, "exhaustive")
    dpor, _ = _explore(module, "dpor")
    assert len({final[0] for _, final in brute}) == 2
    assert dpor == brute
