"""State that code which does not record itself keeps outside its arguments.

A library's function reaches more than what it is handed: the globals of its module that its
code names (a registry, a counter, a cache), the attributes of the classes and modules it names,
the cells it closes over, its mutable defaults, and through the functions it names, theirs.  A
call of such code walks that environment (ext/hooks.c, "the environment of code that does not
record itself"): without it, two tasks that meet only in a library's module state were
independent for DPOR, which then ran one order and said complete while brute force reached
another outcome.

Each program has a writer task that calls into the library and a reader task that observes the
library's state, each after a yield; DPOR must reach exactly the outcomes brute force reaches.
A library coroutine, or async generator, goes on in later steps of its task, after its
awaits: each step writes what the library frames it resumes can reach (ext/hooks.c, "coroutines
of code that does not record itself, resumed across steps"; an async generator's frame is
reached through the awaitable that drives it).  The library's state is put back at the start of
every execution by the program itself (nothing resets a library's modules between executions).  The library is compiled under a file name no
instrumentation covers, as an installed package's is.
"""

from __future__ import annotations

import types
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_capture_order import _explore
from test_capture_protocols import installed_library
from test_capture_reach import render_workers
from test_loop_model import load

_STORE = """
ITEMS = {"x": []}
"""

_LIBRARY = '''
import asyncio

import cs_state_store as store

_handlers = []
_count = 0
_config = {"x": 1}
LIMIT = 10


def register(h):
    _handlers.append(h)


def count():
    return len(_handlers)


def bump():
    global _count
    _count += 1


def add(x):
    _remember(x)


def _remember(x):
    _handlers.append(x)


def put_in_store(x):
    store.ITEMS["x"].append(x)


def make_counter():
    box = [0]

    def inc():
        box[0] += 1
        return box[0]

    return inc


def make_rebinding_counter():
    n = 0

    def inc():
        nonlocal n
        n += 1
        return n

    def peek():
        return n

    return inc, peek


def remember(x, seen=[]):
    seen.append(x)
    return len(seen)


def counted(fn):
    calls = []

    def wrapper(*args):
        calls.append(args)
        return fn(*args)

    wrapper.calls = calls
    return wrapper


def below_limit(n):
    return n < LIMIT


class Tracked:
    instances = []

    def __init__(self):
        Tracked.instances.append(self)


class SelfTracked:
    instances = []

    def __init__(self):
        type(self).instances.append(self)


class Totals:
    total = 0

    def bump(self):
        type(self).total += 1


class Pool:
    """Hands out connections from a module-level list through a method that calls a helper."""

    def take(self):
        return _take()


_free = []


def _take():
    return _free.pop() if _free else None


async def aregister(h):
    await asyncio.sleep(0)
    _handlers.append(h)


class Gate:
    def __init__(self):
        self.exits = 0

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        self.exits += 1  # the exit runs in a later step than the entry


async def aregister_each(*hs):
    for h in hs:
        await asyncio.sleep(0)
        _handlers.append(h)
        yield h


class Client:
    def __init__(self):
        self.sent = []

    async def send(self, x):
        await asyncio.sleep(0)
        await self._flush(x)

    async def _flush(self, x):
        await asyncio.sleep(0)
        self.sent.append(x)
'''

#: name -> (setup at the program's top, the writer's statement, the reader's alias taken before
#: its yield, what it reads after it, the program's reset of the library's state)
CASES: dict[str, tuple[str, str, str, str, str]] = {
    "a module global through a function": (
        "",
        "lib.register(1)",
        "pass",
        "lib.count()",
        "lib._handlers.clear()",
    ),
    "a module global read through an alias": (
        "from cs_state_library import _handlers",
        "lib.register(1)",
        "pass",
        "len(_handlers)",
        "_handlers.clear()",
    ),
    "a module global through a function the function calls": (
        "",
        "lib.add(1)",
        "items = lib._handlers",
        "len(items)",
        "lib._handlers.clear()",
    ),
    "a global the library rebinds": (
        "",
        "lib.bump()",
        "pass",
        "lib._count",
        "lib._count = 0",
    ),
    "another library module's global": (
        "import cs_state_store",
        "lib.put_in_store(1)",
        "items = cs_state_store.ITEMS['x']",
        "len(items)",
        "cs_state_store.ITEMS['x'].clear()",
    ),
    "a cell's contents": (
        "",
        "box['inc']()",
        "pass",
        "box['inc']()",
        "box['inc'] = lib.make_counter()",
    ),
    "a cell the library rebinds": (
        "",
        "box['inc']()",
        "pass",
        "box['peek']()",
        "box['inc'], box['peek'] = lib.make_rebinding_counter()",
    ),
    "a mutable default": (
        "",
        "lib.remember(1)",
        "pass",
        "lib.remember(2)",
        "lib.remember.__defaults__[0].clear()",
    ),
    "a decorator's cell": (
        "@lib.counted\ndef handler(x):\n    return x",
        "handler(1)",
        "calls = handler.calls",
        "len(calls)",
        "handler.calls.clear()",
    ),
    "a class registry its constructor fills by name": (
        "",
        "lib.Tracked()",
        "pass",
        "len(lib.Tracked.instances)",
        "lib.Tracked.instances.clear()",
    ),
    "a class registry its constructor fills through type(self)": (
        "",
        "lib.SelfTracked()",
        "pass",
        "len(lib.SelfTracked.instances)",
        "lib.SelfTracked.instances.clear()",
    ),
    "a class attribute a method rebinds through type(self)": (
        "",
        "box['totals'].bump()",
        "pass",
        "lib.Totals.total",
        "lib.Totals.total = 0\n    box['totals'] = lib.Totals()",
    ),
    "a module global a library coroutine changes after an await": (
        "",
        "await lib.aregister(1)",
        "pass",
        "lib.count()",
        "lib._handlers.clear()",
    ),
    "a module global a library async generator changes after an await": (
        "",
        "async for _ in lib.aregister_each(1):\n        pass",
        "pass",
        "lib.count()",
        "lib._handlers.clear()",
    ),
    "a library context manager's exit after the body awaited": (
        "",
        "async with box['gate']:\n        await asyncio.sleep(0)",
        "gate = box['gate']",
        "gate.exits",
        "box['gate'] = lib.Gate()",
    ),
    "a receiver a library coroutine changes after awaits": (
        "",
        "await box['client'].send(1)",
        "sent = box['client'].sent",
        "len(sent)",
        "box['client'] = lib.Client()",
    ),
    "a module global a method's helper changes": (
        "",
        "box['pool'].take()",
        "free = lib._free",
        "len(free)",
        "lib._free[:] = ['c']\n    box['pool'] = lib.Pool()",
    ),
}

_PROGRAM = """
import asyncio
import cs_state_library as lib
{setup}


async def writer(box):
    await asyncio.sleep(0)
    {write}


async def reader(box):
    {alias}
    await asyncio.sleep(0)
    box["seen"] = {read}


async def main(box):
    {reset}
    await asyncio.gather(writer(box), reader(box))
    box["final"] = box["seen"]
"""


@pytest.fixture(autouse=True, scope="module")
def library() -> Iterator[types.ModuleType]:
    store = installed_library("cs_state_store", _STORE)
    next(store)
    yield from installed_library("cs_state_library", _LIBRARY)
    next(store, None)


@pytest.mark.parametrize("name", sorted(CASES))
def test_library_state_orders_the_tasks_that_meet_in_it(name: str) -> None:
    setup, write, alias, read, reset = CASES[name]
    module = load(_PROGRAM.format(setup=setup, write=write, alias=alias, read=read, reset=reset))
    brute, brute_executions = _explore(module, "exhaustive")
    dpor, executions = _explore(module, "dpor")
    assert len(brute) == 2  # the read before the write, and after it
    assert dpor == brute
    assert executions < brute_executions


#: library calls that change nothing another task observes: still independent
PRECISE: dict[str, tuple[str, str]] = {
    "a function reading an immutable module constant": ("", "lib.below_limit(3)"),
    "the standard library's functions (modelled)": (
        "import json, re",
        "json.dumps({'a': [1]}) + str(re.match('a+', 'aa'))",
    ),
}

_TWO_CALLERS = """
import asyncio
import cs_state_library as lib
{setup}


async def one(box, k):
    await asyncio.sleep(0)
    box[k] = {call}


async def main(box):
    box["a"] = box["b"] = None
    await asyncio.gather(one(box, "a"), one(box, "b"))
    box["final"] = (box["a"], box["b"])
"""


@pytest.mark.parametrize("name", sorted(PRECISE))
def test_library_calls_that_share_nothing_stay_independent(name: str) -> None:
    setup, call = PRECISE[name]
    module = load(_TWO_CALLERS.format(setup=setup, call=call))
    brute, _ = _explore(module, "exhaustive")
    dpor, executions = _explore(module, "dpor")
    assert dpor == brute
    assert executions == 1


# ------------------------------------------------------------------ generated programs

_GENERATED_LIBRARY = """
import asyncio

_log = []
_meta = {"log": []}
_count = 0


class Registry:
    entries = []
    total = 0

    def __init__(self):
        Registry.entries.append(1)

    def bump(self):
        type(self).total += 1


def _make_cell():
    box = []

    def push(v):
        box.append(v)

    def peek():
        return len(box)

    def clear():
        box.clear()

    return push, peek, clear


cell_push, cell_peek, cell_clear = _make_cell()


def remember(v, seen=[]):
    seen.append(v)
    return len(seen)


def log_it(v):
    _log.append(v)


def meta_it(v):
    _helper(v)


def _helper(v):
    _meta["log"].append(v)


def count_it():
    global _count
    _count += 1


async def alog(v):
    await asyncio.sleep(0)
    _log.append(v)


def reset():
    global _count
    _log.clear()
    _meta["log"].clear()
    _count = 0
    Registry.entries.clear()
    Registry.total = 0
    cell_clear()
    remember.__defaults__[0].clear()
"""

#: how a worker changes the library's state: each a different way library code reaches it
_PATHS = {
    "global": "lib.log_it({v})",
    "nested": "lib.meta_it({v})",
    "rebind": "lib.count_it()",
    "constructor": "lib.Registry()",
    "type(self)": "lib.Registry.__new__(lib.Registry).bump()",
    "cell": "lib.cell_push({v})",
    "default": "lib.remember({v})",
    "coroutine": "await lib.alog({v})",
}
_STATE = (
    "(len(lib._log), len(lib._meta['log']), lib._count, len(lib.Registry.entries),"
    " lib.Registry.total, lib.cell_peek(), len(lib.remember.__defaults__[0]))"
)
_ALIASES = "(lib._log, lib._meta['log'], lib.Registry.entries)"


def _generated_op(op: tuple[str, ...], worker: int, index: int) -> str:
    if op[0] == "sleep0":
        return "await asyncio.sleep(0)"
    if op[0] == "read":
        return f"seen.append({_STATE})"
    if op[0] == "alias":
        return f"aliases = {_ALIASES}"
    if op[0] == "aread":
        return "seen.append(tuple(map(len, aliases)))"
    return _PATHS[op[1]].format(v=worker * 10 + index)


def render_generated(workers: list[list[tuple[str, ...]]]) -> str:
    return render_workers(
        workers, _generated_op, library="cs_generated_state", setup="lib.reset()", state=_STATE
    )


_CHANGE = st.tuples(st.just("call"), st.sampled_from(sorted(_PATHS)))
_GENERATED_OPS = st.one_of(
    st.just(("sleep0",)), st.just(("read",)), st.just(("alias",)), st.just(("aread",)), _CHANGE
)
#: one worker changes the state, the other observes it across a yield (in either start order)
_OBSERVED = st.tuples(
    st.lists(st.one_of(st.just(("sleep0",)), _CHANGE), min_size=1, max_size=3),
    st.sampled_from([[("read",)], [("alias",), ("sleep0",), ("aread",)]]),
    st.booleans(),
).map(lambda t: [t[0], [("sleep0",), *t[1]]][:: -1 if t[2] else 1])
_GENERATED_WORKERS = st.one_of(
    _OBSERVED,
    st.lists(st.lists(_GENERATED_OPS, min_size=1, max_size=4), min_size=2, max_size=2),
)


@pytest.fixture(scope="module")
def generated_library() -> Iterator[types.ModuleType]:
    yield from installed_library("cs_generated_state", _GENERATED_LIBRARY)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(workers=_GENERATED_WORKERS)
def test_generated_library_state_dpor_reaches_what_brute_force_reaches(
    generated_library: types.ModuleType, workers: list[list[tuple[str, ...]]]
) -> None:
    module = load(render_generated(workers))
    brute, _ = _explore(module, "exhaustive")
    dpor, _ = _explore(module, "dpor")
    assert dpor == brute, render_generated(workers)


@pytest.mark.parametrize("path", sorted(_PATHS))
def test_each_path_into_library_state_races_with_a_read(
    generated_library: types.ModuleType, path: str
) -> None:
    workers = [[("sleep0",), ("call", path)], [("sleep0",), ("read",)]]
    module = load(render_generated(workers))
    brute, _ = _explore(module, "exhaustive")
    dpor, _ = _explore(module, "dpor")
    assert len({final[0] for _, final in brute}) == 2
    assert dpor == brute
