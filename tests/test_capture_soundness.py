"""Capture must over-approximate: every implicit access is a dependency DPOR can reverse.

Each construct class of issue 9 has a case: a writer task changes shared state after one await,
a reader task observes it through the construct under test right after its own first await
(before the writer's change in the default order).  The reader is created first and yields
first: every asyncio loop starts tasks in the order they were created, so both first steps run
before the two steps that race.  Two variants of each program:

- racy: the reader asserts it saw the state before the change.  Brute force ("exhaustive")
  reaches the failing order; DPOR must reach it too, which it can only do if the construct's
  access was recorded (otherwise the reader's step and the writer's step look independent and
  DPOR runs the default order only).
- safe twin: the reader only records what it saw.  No failure, DPOR complete, and both values
  (before and after the change) must be seen by DPOR, exactly as by brute force.

The outcome sets of both strategies are compared (failure type included).
"""

from __future__ import annotations

import asyncio
import itertools
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import pytest

from chaossloth import runner, scenario

_DIR = Path(tempfile.mkdtemp(prefix="chaossloth-capture-"))
_COUNTER = itertools.count()

PRELUDE = """
import asyncio
import contextlib
import dataclasses
import functools
import heapq
import json
import operator
import sys
import types
from collections import UserDict


@dataclasses.dataclass
class Cfg:
    port: int


@dataclasses.dataclass(unsafe_hash=True)
class Key:
    port: int


@dataclasses.dataclass
class Boxed:
    items: list


class Rpc:
    def __init__(self, on_job):
        self.on_job = on_job


def helper():
    return 1


def other_helper():
    return 2


class Base:
    kind = "base"


class Other:
    kind = "other"


class S(Base):
    used = 0

    def __init__(self):
        self.items = ["x"]
        self.d = {"a": 1}
        self.tags = {1}
        self.cfg = Cfg(1)
        self.cfgs = [Cfg(1)]
        self.key = Key(1)
        self.keys = {Key(1)}
        self.n = 1
        self.q = []
        self.heap = [3]
        self.on_job = self.q.append
        self.rpc = Rpc(on_job=self.q.append)
        self.store = UserDict()
        self.nested = {"a": [1]}
        self.boxed = Boxed([1])
        self.stack = contextlib.ExitStack()
        self.stack.callback(int)


def collect(*args):
    return args
"""

TEMPLATE = """
async def writer(s):
{prep}
    await asyncio.sleep(0)
{writer}


async def read(s):
{reader}
    return v


async def checker(s, box, racy):
    await asyncio.sleep(0)  # lets the writer start: it runs its first step before this one's
    v = await read(s)
    box["v"] = repr(v)
    if racy:
        assert repr(v) == box["expected"], (repr(v), box["expected"])


async def main(box):
{reset}
    box["expected"] = repr(await read(S()))
    s = S()
    await asyncio.gather(checker(s, box, RACY), writer(s))
"""

#: name -> (writer statements, reader statements setting v, reset statements for main); writer
#: statements before a line "---" run before the writer's await (its first step)
CASES: dict[str, tuple[str, str, str]] = {
    # ---------------------------------------------------------------- truth tests
    "if": ("s.items.clear()", "v = 1\nif s.items:\n    v = 2", ""),
    "while": ("s.items.clear()", "v = 0\nwhile s.items and v < 1:\n    v += 1", ""),
    "not": ("s.items.clear()", "v = not s.items", ""),
    "or": ("s.items.clear()", "v = (s.items or None) is None", ""),
    "and": ("s.items.clear()", "v = (s.items and 1) == 1", ""),
    "ifexp": ("s.items.clear()", "v = 1 if s.items else 2", ""),
    "assert": (
        "s.items.clear()",
        "try:\n    assert s.items\n    v = 1\nexcept AssertionError:\n    v = 2",
        "",
    ),
    "bool": ("s.items.clear()", "v = bool(s.items)", ""),
    "len": ("s.items.clear()", "v = len(s.items)", ""),
    "comprehension_if": ("s.items.clear()", "v = [1 for _ in (1, 2) if s.items]", ""),
    "truth_of_user_len": ("s.store['k'] = 1", "v = 1 if s.store else 2", ""),
    # ---------------------------------------------------------------- comparisons
    "dataclass_eq": ("s.cfg.port = 2", "v = s.cfg == Cfg(1)", ""),
    "list_eq": ("s.items.append('y')", "v = s.items == ['x']", ""),
    "list_lt": ("s.items[0] = 'z'", "v = s.items < ['y']", ""),
    "chained": ("s.items[0] = 'z'", "v = [] < s.items < ['y']", ""),
    "in_list_of_dataclasses": ("s.cfgs[0].port = 2", "v = Cfg(1) in s.cfgs", ""),
    # ---------------------------------------------------------------- operators
    "list_add": ("s.items.append('y')", "v = s.items + ['z']", ""),
    "set_or": ("s.tags.add(3)", "v = sorted(s.tags | {2})", ""),
    "percent_format": ("s.items.append('y')", "v = '%s' % (s.items,)", ""),
    # ---------------------------------------------------------------- unpacking
    "unpack_assign": ("s.items.append('y')", "a, *v = s.items", ""),
    "unpack_star_call": ("s.items.append('y')", "v = collect(*s.items)", ""),
    "unpack_display": ("s.items.append('y')", "v = [*s.items]", ""),
    "unpack_mapping": ("s.d['b'] = 2", "v = {**s.d}", ""),
    # ---------------------------------------------------------------- formatting
    "fstring": ("s.items.append('y')", "v = f'{s.items}'", ""),
    "str_dataclass": ("s.cfg.port = 2", "v = str(s.cfg)", ""),
    "repr": ("s.items.append('y')", "v = repr(s.items)", ""),
    "str_format_method": ("s.items.append('y')", "v = '{}'.format(s.items)", ""),
    "json_dumps": ("s.d['a'] = 2", "v = json.dumps(s.d)", ""),
    "json_dumps_nested": (
        "inner = s.nested['a']\n---\ninner.append(2)",
        "v = json.dumps(s.nested)",
        "",
    ),
    "str_dataclass_nested": ("inner = s.boxed.items\n---\ninner.append(2)", "v = str(s.boxed)", ""),
    "eq_dataclass_nested": (
        "inner = s.boxed.items\n---\ninner.append(2)",
        "v = s.boxed == Boxed([1])",
        "",
    ),
    # ---------------------------------------------------------------- hashing
    "hash_user_object": ("s.key.port = 2", "v = hash(s.key) == hash(Key(1))", ""),
    "dict_display_user_key": ("s.key.port = 2", "v = Key(1) in {s.key: 1}", ""),
    "set_contains_user_key": ("s.key.port = 2", "v = s.key in {Key(1)}", ""),
    # ---------------------------------------------------------------- in-place operators
    "iadd_local_alias": ("lst = s.items\nlst += ['y']", "v = len(s.items)", ""),
    "ior_local_alias": ("d = s.d\nd |= {'b': 2}", "v = len(s.d)", ""),
    "isub_local_alias": ("t = s.tags\nt -= {1}", "v = len(s.tags)", ""),
    # ---------------------------------------------------------------- mutators not spelled obj.m()
    "bound_method_variable": ("mark = s.items.append\n---\nmark('y')", "v = len(s.items)", ""),
    "callback_attribute": ("s.on_job('y')", "v = len(s.q)", ""),
    "callback_on_another_object": ("s.rpc.on_job('y')", "v = len(s.q)", ""),
    "callback_in_variable": ("cb = s.rpc.on_job\n---\ncb('y')", "v = len(s.q)", ""),
    "partial": (
        "push = functools.partial(heapq.heappush, s.heap)\n---\npush(1)",
        "v = len(s.heap)",
        "",
    ),
    "getattr_call": ("op = 'append'\ngetattr(s.items, op)('y')", "v = len(s.items)", ""),
    "getattr_star_call": (
        "op = 'append'\nargs = ('y',)\ngetattr(s.items, op)(*args)",
        "v = len(s.items)",
        "",
    ),
    "methodcaller": ("operator.methodcaller('append', 'y')(s.items)", "v = len(s.items)", ""),
    "map_bound_method": ("list(map(s.items.append, ['y']))", "v = len(s.items)", ""),
    "update_kwargs": ("kw = {'b': 2}\ns.d.update(**kw)", "v = len(s.d)", ""),
    "star_args_to_builtin": (
        "args = (s.d, 'b', 2)\noperator.setitem(*args)",
        "v = len(s.d)",
        "",
    ),
    "super_into_uninstrumented_base": ("s.store['k'] = 1", "v = len(s.store)", ""),
    "with_uninstrumented_context_manager": (
        "with s.stack:\n    pass",
        "v = len(s.stack._exit_callbacks)",
        "",
    ),
    # ---------------------------------------------------------------- dynamic attributes
    "setattr_computed": ("name = 'n'\nsetattr(s, name, 2)", "v = s.n", ""),
    "delattr_computed": ("name = 'n'\ndelattr(s, name)", "v = hasattr(s, 'n')", ""),
    "vars_item": ("vars(s)['n'] = 2", "v = s.n", ""),
    "dunder_dict_item": ("s.__dict__['n'] = 2", "v = s.n", ""),
    "dunder_class": ("s.__class__ = Other", "v = s.kind", ""),
    "class_level_state": ("S.used += 1", "v = s.used", "    S.used = 0"),
    "class_level_state_getattr": ("S.used += 1", "v = getattr(s, 'used')", "    S.used = 0"),
    "class_level_state_inherited": (
        "Base.kind = 'patched'",
        "v = s.kind",
        "    Base.kind = 'base'",
    ),
    "monkeypatch_module_function": (
        "sys.modules[__name__].helper = other_helper",
        "v = helper()",
        "    setattr(sys.modules[__name__], 'helper', ITS_HELPER)",
    ),
    # ---------------------------------------------------------------- the global barrier
    "exec": ("exec('s.n = 2', {'s': s})", "v = s.n", ""),
    "eval": ("s.n = 2", "v = eval('s.n')", ""),
    "globals_item": ("globals()['FLAG'] = 2", "v = FLAG", "    global FLAG\n    FLAG = 1"),
    "sys_modules": (
        "sys.modules['cs_fake_mod'] = types.ModuleType('cs_fake_mod')",
        "v = 'cs_fake_mod' in sys.modules",
        "    sys.modules.pop('cs_fake_mod', None)",
    ),
}

#: cases that need the engine's support of CS_OBJECT_ALL (the global barrier)
BARRIER_CASES = frozenset(["exec", "eval", "globals_item", "sys_modules"])


def source(name: str, racy: bool) -> str:
    writer, reader, reset = CASES[name]
    prep, _, writer = writer.rpartition("---\n")
    body = TEMPLATE.format(
        prep=textwrap.indent(prep, "    ") or "    pass",
        writer=textwrap.indent(writer, "    "),
        reader=textwrap.indent(reader, "    "),
        reset=reset or "    pass",
    )
    extra = "ITS_HELPER = helper\nFLAG = 1\n"
    return PRELUDE + extra + body + f"\nRACY = {racy}\n"


def explore_both(src: str) -> dict[str, tuple[set[Any], runner.ExplorationResult]]:
    """Explores `src` (a module whose main(box) is the scenario) with exhaustive and with dpor
    to completion: per strategy the set of (outcome, failure type, box['v']) and the result."""
    path = _DIR / f"case_{next(_COUNTER)}.py"
    path.write_text(src)
    module = scenario.load_module(path)
    out: dict[str, tuple[set[Any], runner.ExplorationResult]] = {}
    for strategy in ("exhaustive", "dpor"):
        box: dict[str, Any] = {}
        got: set[Any] = set()

        def factory(box: dict[str, Any] = box) -> Any:
            box.clear()
            return module.main(box)

        def on_execution(
            r: runner.ExecutionResult, box: dict[str, Any] = box, got: set[Any] = got
        ) -> None:
            failure = r.failure.type_name if r.failure else None
            got.add((r.outcome, failure, box.get("v")))

        res = runner.explore(
            factory,
            strategy=strategy,
            stop_on_failure=False,
            detail_failure=False,
            on_execution=on_execution,
            max_steps=2000,
        )
        out[strategy] = (got, res)
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_racy_read_is_found(name: str) -> None:
    both = explore_both(source(name, racy=True))
    ex_set, ex_res = both["exhaustive"]
    dp_set, dp_res = both["dpor"]
    assert ex_res.complete
    assert any(o[0] == runner.FAILED for o in ex_set), f"the case is not racy: {ex_set}"
    assert dp_set == ex_set, f"dpor {dp_set} != exhaustive {ex_set}"
    assert dp_res.failing_executions > 0


@pytest.mark.parametrize("name", sorted(CASES))
def test_safe_twin_passes_complete(name: str) -> None:
    both = explore_both(source(name, racy=False))
    ex_set, _ = both["exhaustive"]
    dp_set, dp_res = both["dpor"]
    assert all(o[0] == runner.OK for o in ex_set), ex_set
    # both values (before and after the writer's change) are reachable, and DPOR sees both
    assert len({o[2] for o in ex_set}) == 2, ex_set
    assert dp_set == ex_set
    assert dp_res.complete and dp_res.failing_executions == 0


# ------------------------------------------------------------------ iteration spanning awaits

ITERATION = """
import asyncio


class Hub:
    def __init__(self):
        self.conns = [1, 2]
        self.d = {1: 1, 2: 2}
        self.sent = []

    async def broadcast(self, box):
        n = len(self.conns)
        for c in ITERABLE:
            await asyncio.sleep(0)
            self.sent.append(c)
        box["v"] = tuple(self.sent)
        if RACY:
            assert len(self.sent) == n and len(set(self.sent)) == n

    async def join(self):
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        MUTATE


async def main(box):
    h = Hub()
    await asyncio.gather(h.broadcast(box), h.join())
"""

ITER_CASES = {
    # the container is read at every next(): an append during the loop makes it run longer
    "for_list": ("self.conns", "self.conns.append(3)"),
    "for_enumerate": ("(c for _, c in enumerate(self.conns))", "self.conns.append(3)"),
    "for_zip": ("(a for a, _ in zip(self.conns, self.conns))", "self.conns.append(3)"),
    "generator_expression": ("(c for c in self.conns)", "self.conns.append(3)"),
    "for_dict_keys_view": ("self.d.keys()", "self.d.pop(2)"),
    "for_remove_skips": ("self.conns", "self.conns.remove(1)"),
    "for_reversed": ("reversed(self.conns)", "self.conns.remove(1)"),
    "for_map": ("map(int, self.conns)", "self.conns.append(3)"),
}


def _iter_source(name: str, racy: bool) -> str:
    iterable, mutate = ITER_CASES[name]
    src = ITERATION.replace("ITERABLE", iterable).replace("MUTATE", mutate)
    return src + f"\nRACY = {racy}\n"


@pytest.mark.parametrize("name", sorted(ITER_CASES))
def test_iteration_spanning_awaits_reads_at_every_next(name: str) -> None:
    both = explore_both(_iter_source(name, racy=True))
    ex_set, _ = both["exhaustive"]
    dp_set, dp_res = both["dpor"]
    assert any(o[0] == runner.FAILED for o in ex_set), ex_set
    assert dp_set == ex_set
    assert dp_res.failing_executions > 0


#: mutations that make the iteration itself raise: their safe twin iterates a snapshot
RAISING = frozenset(["for_dict_keys_view"])


@pytest.mark.parametrize("name", sorted(ITER_CASES))
def test_iteration_safe_twin(name: str) -> None:
    src = _iter_source(name, racy=False)
    if name in RAISING:
        iterable = ITER_CASES[name][0]
        src = src.replace(f"for c in {iterable}:", f"for c in list({iterable}):")
    both = explore_both(src)
    ex_set, _ = both["exhaustive"]
    dp_set, dp_res = both["dpor"]
    assert all(o[0] == runner.OK for o in ex_set)
    assert dp_set == ex_set and dp_res.complete


def test_iteration_of_a_snapshot_is_safe() -> None:
    """The safe way to write the broadcast: iterate a copy.  Passes, complete."""
    src = ITERATION.replace("ITERABLE", "list(self.conns)").replace(
        "MUTATE", "self.conns.append(3)"
    )
    both = explore_both(src + "\nRACY = True\n")
    for strategy in ("exhaustive", "dpor"):
        got, res = both[strategy]
        assert res.complete and res.failing_executions == 0, (strategy, got)
    assert both["dpor"][0] == both["exhaustive"][0]


ASYNC_GEN = """
import asyncio


async def numbers():
    for i in range(2):
        await asyncio.sleep(0)
        yield i


async def consume(agen, box, key):
    got = []
    try:
        async for x in agen:
            got.append(x)
    except RuntimeError as e:
        got.append(type(e).__name__)
        if RACY:
            raise
    box[key] = tuple(got)


async def main(box):
    shared = numbers()
    other = numbers() if SEPARATE else shared
    await asyncio.gather(consume(shared, box, "a"), consume(other, box, "b"))
    box["v"] = (box.get("a"), box.get("b"))
"""


@pytest.mark.parametrize("separate", [False, True], ids=["shared", "separate"])
def test_async_for_over_a_shared_async_generator_is_a_write(separate: bool) -> None:
    """Two consumers of one async generator: every __anext__ writes it (one consumer may find
    it running and get RuntimeError).  Each with its own generator: safe, complete."""
    src = ASYNC_GEN + f"\nRACY = True\nSEPARATE = {separate}\n"
    both = explore_both(src)
    ex_set, _ = both["exhaustive"]
    dp_set, dp_res = both["dpor"]
    assert dp_set == ex_set
    if separate:
        assert all(o[0] == runner.OK for o in ex_set) and dp_res.complete
    else:
        assert any(o[0] == runner.FAILED for o in ex_set)
        assert dp_res.failing_executions > 0


# ------------------------------------------------------------------ async generators resumed later

#: consumers of one async generator whose body awaits between yields: the generator's frame
#: runs again in the consumer's LATER steps (the awaitable __anext__ / asend / athrow returned
#: is resumed there), and each of those steps races with another consumer's call.  Consumer b
#: pauses once first, so the failing order (b calls while a is suspended inside the generator)
#: is not the stock one: DPOR reaches it only if a's resumption step is recorded as a write.
AGEN_RESUMED = """
import asyncio


async def numbers():
    i, out = 0, None
    while i < 3:
        try:
            await asyncio.sleep(0)
            yield i if out is None else out
            out = None
        except ValueError:
            out = -1 - i  # athrow's value, yielded after the next await
        i += 1


async def consume(agen, box, key, pause, lock):
    for _ in range(pause):
        await asyncio.sleep(0)
    got = []
    try:
        if lock is None:
            CONSUME
        else:
            async with lock:
                CONSUME
    except RuntimeError as e:
        got.append(type(e).__name__)
        if RACY:
            raise
    box[key] = tuple(got)


async def main(box):
    shared = numbers()
    if PRIME:
        await anext(shared)
    other = numbers() if SEPARATE else shared
    if PRIME and SEPARATE:
        await anext(other)
    lock = asyncio.Lock() if LOCKED else None
    # locked, a pauses too: a that took the lock in its first step would always take it first
    # (tasks start in the order they were created)
    a = consume(shared, box, "a", int(LOCKED), lock)
    await asyncio.gather(a, consume(other, box, "b", 1, lock))
    box["v"] = (box.get("a"), box.get("b"))
    await shared.aclose()
    await other.aclose()
"""

#: name -> (the consumption, whether the generator is started first: athrow needs it inside try)
AGEN_FORMS: dict[str, tuple[str, bool]] = {
    "async_for_break": ("async for x in agen:\n    got.append(x)\n    break", False),
    "anext": ("got.append(await anext(agen))", False),
    "anext_default": ("got.append(await anext(agen, None))", False),
    "asend": ("got.append(await agen.asend(None))", False),
    "asend_in_variable": ("step = agen.asend\ngot.append(await step(None))", False),
    "dunder_anext": ("got.append(await agen.__anext__())", False),
    "dunder_anext_in_variable": ("nxt = agen.__anext__\ngot.append(await nxt())", False),
    "athrow": ("got.append(await agen.athrow(ValueError('v')))", True),
    "awaitable_kept": ("aw = agen.asend(None)\ngot.append(await aw)", False),
}


def _agen_source(form: str, *, racy: bool, separate: bool = False, locked: bool = False) -> str:
    consume, prime = AGEN_FORMS[form]
    # the deeper placeholder first: the shallower one is a suffix of it
    body = AGEN_RESUMED.replace(
        "                CONSUME", textwrap.indent(consume, " " * 16)
    ).replace("            CONSUME", textwrap.indent(consume, " " * 12))
    flags = f"\nRACY = {racy}\nSEPARATE = {separate}\nLOCKED = {locked}\nPRIME = {prime}\n"
    return body + flags


@pytest.mark.parametrize("form", sorted(AGEN_FORMS))
def test_resumption_of_a_shared_async_generator_is_a_write(form: str) -> None:
    """b's call while a is suspended inside the generator: RuntimeError ("already running"),
    reachable only after a's first step; DPOR must reach it (and every other outcome)."""
    both = explore_both(_agen_source(form, racy=True))
    ex_set, ex_res = both["exhaustive"]
    dp_set, dp_res = both["dpor"]
    assert ex_res.complete
    assert any(o[0] == runner.FAILED and o[1] == "RuntimeError" for o in ex_set), ex_set
    assert dp_set == ex_set, f"dpor {dp_set} != exhaustive {ex_set}"
    assert dp_res.failing_executions > 0


@pytest.mark.parametrize("form", sorted(AGEN_FORMS))
@pytest.mark.parametrize("twin", ["separate", "locked"])
def test_async_generator_safe_twins_pass_complete(form: str, twin: str) -> None:
    """Each consumer with its own generator, or the consumers serialized by a Lock: no
    RuntimeError in any order; DPOR complete with exhaustive's outcomes."""
    src = _agen_source(form, racy=True, separate=twin == "separate", locked=twin == "locked")
    both = explore_both(src)
    ex_set, ex_res = both["exhaustive"]
    dp_set, dp_res = both["dpor"]
    assert ex_res.complete
    assert all(o[0] == runner.OK for o in ex_set), ex_set
    if twin == "locked":
        # either consumer may take the lock first: both item orders
        assert len({o[2] for o in ex_set}) == 2, ex_set
    assert dp_set == ex_set
    assert dp_res.complete and dp_res.failing_executions == 0


#: every way of driving an async generator, run plainly (stock loop) and instrumented on
#: ChaosSloth's loop (the awaitables go through the hooks' proxies): the same log
AGEN_SEMANTICS = """
import asyncio
import inspect

log = []


def note(tag, f):
    try:
        log.append((tag, "ok", f()))
    except Exception as e:
        log.append((tag, type(e).__name__, str(e)))


async def anote(tag, aw):
    try:
        log.append((tag, "ok", await aw))
    except (Exception, asyncio.CancelledError) as e:
        log.append((tag, type(e).__name__, str(e)))


async def echo(name):
    x = 0
    try:
        while True:
            await asyncio.sleep(0)
            try:
                got = yield x
            except ValueError as e:
                log.append((name, "caught", str(e)))
                await asyncio.sleep(0)
                got = yield -1
            log.append((name, "got", got))
            x += 1
            if got == "boom":
                raise KeyError("boom")
            if got == "stop":
                return
    finally:
        await asyncio.sleep(0)
        log.append((name, "finally"))


async def slow(name):
    try:
        for i in range(3):
            await asyncio.sleep(0)
        yield 1
    except asyncio.CancelledError:
        log.append((name, "cancelled inside"))
        raise
    finally:
        await asyncio.sleep(0)
        log.append((name, "finally"))


async def bad():
    await asyncio.sleep(0)
    yield 1
    await asyncio.sleep(0)
    raise LookupError("bad")


async def consumer(agen):
    return await anext(agen)


async def main():
    g = echo("g")
    await anote("asend None", g.asend(None))
    await anote("asend 1", g.asend(1))
    await anote("anext", anext(g))
    await anote("athrow caught", g.athrow(ValueError("v")))
    await anote("asend 2", g.asend(2))
    step = g.asend
    await anote("asend in variable", step(3))
    nxt = g.__anext__
    await anote("dunder anext in variable", nxt())
    await anote("dunder anext", g.__anext__())
    await anote("wait_for", asyncio.wait_for(g.asend(4), 5))
    await anote("ensure_future", asyncio.ensure_future(g.asend(5)))
    await anote("task", asyncio.create_task(anext(g)))
    aw = g.asend(6)
    log.append(("awaitable", asyncio.iscoroutine(aw), inspect.isawaitable(aw)))
    await anote("awaited once", aw)
    await anote("awaited twice", aw)
    await anote("athrow uncaught", g.athrow(TypeError("t")))
    await anote("anext exhausted default", anext(g, "dflt"))
    await anote("anext exhausted", anext(g))
    await anote("asend exhausted", g.asend(1))
    await anote("aclose exhausted", g.aclose())

    h = echo("h")
    await anote("h anext", anext(h))
    await anote("h aclose", h.aclose())
    await anote("h anext after aclose", anext(h))

    k = echo("k")
    await anote("k anext", anext(k))
    await anote("k boom", k.asend("boom"))
    r = echo("r")
    await anote("r anext", anext(r))
    await anote("r stop", r.asend("stop"))

    e = echo("e")
    async for x in e:
        log.append(("early break at", x))
        if x >= 2:
            break
    await anote("e aclose", e.aclose())

    try:
        async for x in bad():
            log.append(("bad item", x))
    except LookupError as exc:
        log.append(("bad raised", str(exc)))

    log.append(("comprehension", [x async for x in slow("c")]))

    two = echo("two")
    t1 = asyncio.create_task(anext(two))
    t2 = asyncio.create_task(anext(two))
    got = await asyncio.gather(t1, t2, return_exceptions=True)
    log.append(("two tasks", [repr(x) for x in got]))
    await anote("two aclose", two.aclose())

    p, q = echo("p"), echo("q")
    log.append(("gather", await asyncio.gather(anext(p), anext(q))))
    await asyncio.gather(p.aclose(), q.aclose())

    s = slow("s")
    t = asyncio.create_task(consumer(s))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    t.cancel()
    await anote("cancelled consumer", t)
    await anote("s after cancel", anext(s, "dflt"))
    return log
"""


def _plain_and_instrumented(src: str) -> tuple[Any, Any]:
    path = _DIR / f"agen_sem_{next(_COUNTER)}.py"
    path.write_text(src)
    plain: dict[str, Any] = {"__name__": "agen_plain"}
    exec(compile(src, str(path), "exec", dont_inherit=True), plain)  # noqa: S102
    want = asyncio.run(plain["main"]())
    module = scenario.load_module(path)
    r = runner.run_once(module.main, detailed=False)
    assert r.outcome == runner.OK, r.failure
    return want, r.value


def test_async_generator_protocol_behaves_the_same_instrumented() -> None:
    want, got = _plain_and_instrumented(AGEN_SEMANTICS)
    # the program reaches what it is meant to exercise
    flat = repr(want)
    for expected in (
        "cannot reuse already awaited",
        "already running",
        "StopAsyncIteration",
        "cancelled inside",
        "('bad raised', 'bad')",
        "('g', 'caught', 'v')",
    ):
        assert expected in flat, expected
    assert got == want


# ------------------------------------------------------------------ the issue's program, CLI

STOCK = """
import asyncio


class Stock:
    def __init__(self):
        self.items = ["x"]; self.sold = []

    async def buy(self, pause):
        if pause:
            await asyncio.sleep(0)
        if self.items:
            await asyncio.sleep(0)
            self.sold.append(self.items.pop())


async def scenario():
    s = Stock()
    await asyncio.gather(s.buy(False), s.buy(True))
    assert len(s.sold) == 1
"""


def test_issue_program_fails_with_check_then_act_on_items(tmp_path: Path) -> None:
    (tmp_path / "stock.py").write_text(STOCK)
    r = subprocess.run(
        [sys.executable, "-m", "chaossloth", "check", "stock.py", "--scenario", "scenario"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert r.returncode == 1, r.stdout + r.stderr
    assert "check-then-act" in r.stdout
    assert "check-then-act on self.items" in r.stdout
    assert "PASS" not in r.stdout
