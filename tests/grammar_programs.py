"""A generator of small racy asyncio programs drawn from the Python grammar, for the differential
soundness test (tests/test_soundness_grammar.py) and the semantic-preservation test.

A program is two or three tasks started by ``main()``; each task is a short coroutine of
*operations* on shared state, separated by awaits (``asyncio.sleep(0)``, an instrumented
coroutine that sleeps, a short timer sleep, or none).  Every operation is a snippet of real
Python written in one *construct class* of issue 9 (the ``CLASSES`` table): truth tests,
comparisons, binary operators, unpacking, formatting, iteration spanning awaits, in-place
operators, bound methods and partials, dynamic attributes, class-level state, module-level state
of a second module, monkeypatching, exec/eval, ``*args``/``**kw`` calls, ``super()``,
properties, weak references and finalizers, and check-then-act exceptions; ``plain`` operations
are the ordinary accesses (``st.items.append(v)``, ``len(st.items)``) the other classes race
with.

Each operation names the shared *target* it touches (``items``, ``d``, ``obj``...) and whether
it reads (``R``) or writes (``W``) it.  A program drawn with a focus class starts task 0 with an
operation of that class, and task 1 with an operation on the same target that conflicts with it
(a write if the first only reads); every other operation also touches that target, so the
program is racy through the focus construct.

The program is a small package of two files in one directory: the main module and a second
module (``sh``) holding module-level state and a function a task monkeypatches.  ``main()``
resets all module and class state first (one module serves every execution), runs the tasks,
records each task's result or exception type, and returns ``snapshot(...)``: a string that
renders the final shared state, what each task observed (``seen``) and the task results.  For a
given schedule it is deterministic (no addresses, no set of strings, no timing).

Generation is written once against two primitives, ``choose(seq)`` and ``integer(lo, hi)``, so
that Hypothesis (:func:`programs`) and a plain ``random.Random`` (:func:`random_program`, for
the stress driver) draw from the same space.
"""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
import random
import sys
import tempfile
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from hypothesis import strategies as st

from chaossloth import errors, runner, scenario

T = TypeVar("T")


@dataclass(frozen=True)
class Op:
    name: str
    construct: str
    target: str
    role: str  # "R" (only observes the target) or "W" (may change it)
    code: str  # "{v}" is a small int drawn per use, "{i}" the operation's number


def _ops(construct: str, rows: list[tuple[str, str, str, str]]) -> list[Op]:
    return [
        Op(f"{construct}.{n}", construct, t, r, textwrap.dedent(c).strip()) for n, t, r, c in rows
    ]


#: every operation, by construct class
OPS: list[Op] = [
    *_ops(
        "plain",
        [
            ("items_append", "items", "W", "st.items.append({v})"),
            ("items_len", "items", "R", "seen.append(len(st.items))"),
            ("items_insert", "items", "W", "st.items.insert(0, {v})"),
            ("items_clear", "items", "W", "st.items.clear()"),
            ("d_set", "d", "W", "st.d['a'] = {v}"),
            ("d_setb", "d", "W", "st.d['b'] = {v}"),
            ("d_get", "d", "R", "seen.append(st.d.get('a'))"),
            ("d_len", "d", "R", "seen.append(len(st.d))"),
            ("d_pop", "d", "W", "seen.append(st.d.pop('a', None))"),
            ("s_add", "s", "W", "st.s.add({v})"),
            ("s_discard", "s", "W", "st.s.discard(1)"),
            ("s_len", "s", "R", "seen.append(len(st.s))"),
            ("s_clear", "s", "W", "st.s.clear()"),
            ("p_set", "p", "W", "st.p.a = {v}"),
            ("p_incr", "p", "W", "st.p.b += 1"),
            ("p_get", "p", "R", "seen.append(st.p.a)"),
            ("key_incr", "key", "W", "st.key.a += 1"),
            ("obj_set", "obj", "W", "st.obj.f0 = {v}"),
            ("obj_get", "obj", "R", "seen.append(st.obj.f0)"),
            ("obj_set1", "obj", "W", "st.obj.f1 = {v}"),
            ("obj_get1", "obj", "R", "seen.append(st.obj.f1)"),
            ("obj_kind", "obj", "R", "seen.append(st.obj.kind())"),
            ("cls_incr", "cls", "W", "Cnt.used += 1"),
            ("cls_get", "cls", "R", "seen.append(Cnt.used)"),
            ("mod_incr", "mod", "W", "sh.counter += 1"),
            ("mod_get", "mod", "R", "seen.append(sh.counter)"),
            ("modlog_append", "modlog", "W", "sh.log.append({v})"),
            ("modlog_len", "modlog", "R", "seen.append(len(sh.log))"),
            ("heap_push", "heap", "W", "heapq.heappush(st.heap, {v})"),
            ("heap_len", "heap", "R", "seen.append(len(st.heap))"),
            ("jobs_append", "jobs", "W", "st.jobs.append({v})"),
            ("jobs_len", "jobs", "R", "seen.append(len(st.jobs))"),
            ("log_append", "log", "W", "st.log.append({v})"),
            ("log_get", "log", "R", "seen.append(list(st.log))"),
            ("cache_keys", "cache", "R", "seen.append(sorted(st.cache.keys()))"),
            ("cache_pop", "cache", "W", "st.cache.pop('k', None)"),
            ("flag_get", "flag", "R", "seen.append(FLAG)"),
            ("flag_set", "flag", "W", "FLAG = {v}"),
            ("reg_set", "reg", "W", "st.reg['a'] = {v}"),
            ("reg_get", "reg", "R", "seen.append(st.reg.get('a'))"),
            ("sub_get", "sub", "R", "seen.append(st.sub.n)"),
            ("sub_incr", "sub", "W", "st.sub.n += 1"),
            ("acct_get", "acct", "R", "seen.append(st.acct._bal)"),
            ("acct_incr", "acct", "W", "st.acct._bal += {v}"),
            ("it_next", "it", "W", "seen.append(next(st.it, None))"),
        ],
    ),
    *_ops(
        "truth",
        [
            ("if", "items", "R", "if st.items:\n    seen.append('t')\nelse:\n    seen.append('f')"),
            (
                "check_then_act",
                "items",
                "W",
                """
                if st.items:
                    await asyncio.sleep(0)
                    seen.append(st.items.pop())
                """,
            ),
            ("not", "d", "R", "seen.append(not st.d)"),
            ("bool", "s", "R", "seen.append(bool(st.s))"),
            ("and_or", "items", "R", "seen.append(st.items and 'x' or 'y')"),
            ("ternary", "heap", "R", "seen.append('y' if st.heap else 'n')"),
            ("assert", "items", "R", "assert st.items"),
            ("if_jobs", "jobs", "R", "if not st.jobs:\n    seen.append('idle')"),
            (
                "while",
                "items",
                "R",
                """
                k = 0
                while st.items:
                    k += 1
                    if k > 1:
                        break
                    await asyncio.sleep(0)
                seen.append(k)
                """,
            ),
        ],
    ),
    *_ops(
        "compare",
        [
            ("list_eq", "items", "R", "seen.append(st.items == [1])"),
            ("dict_ne", "d", "R", "seen.append(st.d != {'a': 1})"),
            ("list_lt", "items", "R", "seen.append(st.items < [1, 1])"),
            ("dataclass_eq", "p", "R", "seen.append(st.p == Pt())"),
            ("set_le", "s", "R", "seen.append(st.s <= {1, 2})"),
            ("hash", "key", "R", "seen.append(hash(st.key) == hash(Key()))"),
        ],
    ),
    *_ops(
        "binop",
        [
            ("list_add", "items", "R", "seen.append(len(st.items + [0]))"),
            ("set_or", "s", "R", "seen.append(sorted(st.s | {9}))"),
            ("dict_or", "d", "R", "seen.append(sorted((st.d | {'z': 0}).items()))"),
            ("list_mul", "items", "R", "seen.append(len(st.items * 2))"),
        ],
    ),
    *_ops(
        "unpack",
        [
            ("star_display", "items", "R", "seen.append([*st.items])"),
            ("star_call", "items", "R", "seen.append(count(*st.items))"),
            ("dstar_display", "d", "R", "seen.append(sorted({**st.d}))"),
            ("dstar_call", "d", "R", "seen.append(count(**st.d))"),
            (
                "assign",
                "items",
                "R",
                """
                try:
                    (a,) = st.items
                    seen.append(a)
                except ValueError:
                    seen.append('unpack')
                """,
            ),
        ],
    ),
    *_ops(
        "format",
        [
            ("fstring", "items", "R", 'seen.append(f"{st.items}")'),
            ("str", "d", "R", "seen.append(str(st.d))"),
            ("repr", "p", "R", "seen.append(repr(st.p))"),
            ("percent", "s", "R", "seen.append('%s' % (sorted(st.s),))"),
            ("percent_list", "items", "R", "seen.append('%s' % st.items)"),
            ("json", "d", "R", "seen.append(json.dumps(st.d, sort_keys=True))"),
        ],
    ),
    *_ops(
        "iter",
        [
            (
                "for_spanning",
                "items",
                "R",
                """
                for k in st.items:
                    seen.append(k)
                    await asyncio.sleep(0)
                """,
            ),
            (
                "for_copy",
                "items",
                "R",
                """
                for k in list(st.items):
                    await asyncio.sleep(0)
                    seen.append(k)
                """,
            ),
            (
                "for_dict",
                "d",
                "R",
                """
                for k in st.d:
                    await asyncio.sleep(0)
                    seen.append(k)
                """,
            ),
            (
                "async_for",
                "agen",
                "W",
                """
                async for k in st.agen:
                    seen.append(k)
                    break
                """,
            ),
            ("anext", "agen", "W", "seen.append(await anext(st.agen, None))"),
            ("next", "it", "W", "seen.append(next(st.it, None))"),
        ],
    ),
    *_ops(
        "inplace",
        [
            ("list_alias", "items", "W", "xs = st.items\nxs += [{v}]"),
            ("dict_alias", "d", "W", "dd = st.d\ndd |= {'b': {v}}"),
            ("set_alias", "s", "W", "ss = st.s\nss -= {1}"),
            ("list_attr", "items", "W", "st.items += [{v}]"),
            ("set_attr", "s", "W", "st.s |= {0, {v}}"),
        ],
    ),
    *_ops(
        "bound",
        [
            ("variable", "items", "W", "push = st.items.append\npush({v})"),
            (
                "variable_await",
                "items",
                "W",
                "push = st.items.append\nawait asyncio.sleep(0)\npush({v})",
            ),
            ("set_variable", "s", "W", "add = st.s.add\nadd({v})"),
            ("callback", "jobs", "W", "st.hooks.on_job({v})"),
            ("stored_partial", "heap", "W", "st.hooks.push({v})"),
            ("partial", "heap", "W", "p = functools.partial(heapq.heappush, st.heap)\np({v})"),
            ("getattr_call", "items", "W", "getattr(st.items, 'app' + 'end')({v})"),
            ("methodcaller", "items", "W", "operator.methodcaller('append', {v})(st.items)"),
            ("map", "items", "W", "list(map(st.items.append, [{v}]))"),
        ],
    ),
    *_ops(
        "dynattr",
        [
            ("setattr", "obj", "W", "setattr(st.obj, 'f' + str({v} % 2), {v})"),
            ("getattr", "obj", "R", "seen.append(getattr(st.obj, 'f' + '1', None))"),
            ("hasattr", "obj", "R", "seen.append(hasattr(st.obj, 'f' + '1'))"),
            ("delattr", "obj", "W", "delattr(st.obj, 'f' + '0')"),
            ("vars", "obj", "R", "seen.append(sorted(vars(st.obj)))"),
            ("dict_set", "obj", "W", "st.obj.__dict__['f' + '1'] = {v}"),
            ("dict_get", "obj", "R", "seen.append(st.obj.__dict__.get('f0'))"),
            ("class_assign", "obj", "W", "st.obj.__class__ = Other"),
        ],
    ),
    *_ops(
        "clsstate",
        [
            ("via_instance", "cls", "R", "seen.append(st.cnt.used)"),
            ("type_incr", "cls", "W", "type(st.cnt).used += 1"),
            ("class_attr_set", "cls", "W", "st.cnt.__class__.used = {v}"),
        ],
    ),
    *_ops(
        "module",
        [
            ("func_write", "mod", "W", "sh.bump()"),
            ("func_read", "mod", "R", "seen.append(sh.get())"),
            ("func_append", "modlog", "W", "sh.record({v})"),
            ("monkeypatch", "modfmt", "W", "sh.fmt = sh.alt"),
            ("call_patched", "modfmt", "R", "seen.append(sh.render(0))"),
            ("global_read", "flag", "R", "seen.append(flag_now())"),
        ],
    ),
    *_ops(
        "exec",
        [
            ("exec_write", "items", "W", "exec('st.items.append({v})', {'st': st})"),
            ("eval_read", "items", "R", "seen.append(eval('len(st.items)', {'st': st}))"),
            (
                "compile_write",
                "d",
                "W",
                "exec(compile(\"st.d['a'] = {v}\", '<g>', 'exec'), {'st': st})",
            ),
            ("globals_write", "flag", "W", "globals()['FLAG'] = {v}"),
            ("eval_global", "flag", "R", "seen.append(eval('FLAG'))"),
        ],
    ),
    *_ops(
        "starcall",
        [
            ("star_push", "heap", "W", "heapq.heappush(*(st.heap, {v}))"),
            ("kw_update", "d", "W", "st.d.update(**{'a': {v}})"),
            ("unbound_kw", "d", "W", "dict.update(st.d, **{'b': {v}})"),
            ("unbound_star", "items", "W", "list.append(*[st.items, {v}])"),
        ],
    ),
    *_ops(
        "super",
        [
            ("builtin_base", "reg", "W", "st.reg.put('a', {v})"),
            ("builtin_base_read", "reg", "R", "seen.append(st.reg.peek('a'))"),
            ("user_base", "sub", "W", "st.sub.bump()"),
        ],
    ),
    *_ops(
        "prop",
        [
            ("get", "acct", "R", "seen.append(st.acct.bal)"),
            ("set", "acct", "W", "st.acct.bal = st.acct.bal + {v}"),
            ("iadd", "acct", "W", "st.acct.bal += {v}"),
        ],
    ),
    *_ops(
        "lifetime",
        [
            ("del", "log", "W", "t = Tmp(st.log, {i})\nawait asyncio.sleep(0)\ndel t"),
            ("wvd", "cache", "W", "o = Item()\nst.cache['k'] = o\nawait asyncio.sleep(0)\ndel o"),
            ("wvd_read", "cache", "R", "seen.append('k' in st.cache)"),
            (
                "finalize",
                "log",
                "W",
                "o = Item()\nweakref.finalize(o, st.log.append, 'fin{i}')\nawait asyncio.sleep(0)\ndel o",
            ),
            ("gc", "log", "W", "c = Tmp(st.log, {i})\nc.me = c\ndel c\ngc.collect()"),
        ],
    ),
    *_ops(
        "raise",
        [
            ("pop_empty", "items", "W", "seen.append(st.items.pop())"),
            ("del_key", "d", "W", "del st.d['a']"),
            (
                "check_then_del",
                "d",
                "W",
                """
                if 'a' in st.d:
                    await asyncio.sleep(0)
                    del st.d['a']
                """,
            ),
            ("heappop_empty", "heap", "W", "seen.append(heapq.heappop(st.heap))"),
        ],
    ),
]

BY_NAME: dict[str, Op] = {o.name: o for o in OPS}
assert len(BY_NAME) == len(OPS), "operation names are unique"
#: the construct classes (every one but "plain" is a class of issue 9)
CLASSES: tuple[str, ...] = tuple(sorted({o.construct for o in OPS} - {"plain"}))
TARGETS: tuple[str, ...] = tuple(sorted({o.target for o in OPS}))

AWAITS = {
    "sleep0": "await asyncio.sleep(0)",
    "pause": "await pause()",
    "timer": "await asyncio.sleep(0.001)",
    "none": "",
}


@dataclass(frozen=True)
class Program:
    """tasks[k] is a list of items: ("op", op name, v) or ("await", kind)."""

    tasks: tuple[tuple[tuple[Any, ...], ...], ...]
    focus: str = "mixed"

    def constructs(self) -> set[str]:
        return {BY_NAME[it[1]].construct for t in self.tasks for it in t if it[0] == "op"}

    def op_names(self) -> list[str]:
        return [it[1] for t in self.tasks for it in t if it[0] == "op"]

    def source(self, shared: str = "gshared") -> str:
        return render_main(self, shared)

    def yielding_first(self) -> Program:
        """The same tasks, each yielding once (``sleep(0)``) before its first item.  Every
        asyncio loop starts tasks in the order they were created, so a race that sits in the
        tasks' first steps is no race at all; after that yield their steps float."""
        start = ("await", "sleep0")
        return Program(tuple((start, *t) for t in self.tasks), self.focus)

    def describe(self) -> str:
        """The tasks' source (the rest of the module is the fixed PRELUDE and main())."""
        return "\n".join(_task_source(k, t) for k, t in enumerate(self.tasks))


def program(*tasks: Sequence[str | tuple[str, int]], focus: str = "mixed") -> Program:
    """A hand-written program: each task a list of op names (v = 1), ("name", v) pairs, or
    await kinds ("sleep0", "pause", "timer")."""
    out = []
    for t in tasks:
        items: list[tuple[Any, ...]] = []
        for x in t:
            if isinstance(x, tuple):
                items.append(("op", x[0], x[1]))
            elif x in AWAITS:
                items.append(("await", x))
            else:
                assert x in BY_NAME, x
                items.append(("op", x, 1))
        out.append(tuple(items))
    return Program(tuple(out), focus)


# ------------------------------------------------------------------ generation


def build(
    choose: Callable[[Sequence[Any]], Any], integer: Callable[[int, int], int], focus: str
) -> Program:
    """Draws a program whose task 0 starts with an operation of class `focus` ("mixed": any
    class), task 1 with a conflicting operation on the same target, and whose other operations
    all touch that target."""
    first = choose([o for o in OPS if o.construct == focus or focus == "mixed"])
    pool = [o for o in OPS if o.target == first.target]
    conflicting = [o for o in pool if o.role == "W"] if first.role == "R" else pool
    n_tasks = integer(2, 3)
    max_ops = 3 if n_tasks == 2 else 2
    tasks = []
    for k in range(n_tasks):
        ops: list[Op] = []
        if k == 0:
            ops.append(first)
        elif k == 1:
            ops.append(choose(conflicting))
        for _ in range(integer(0 if ops else 1, max_ops - len(ops))):
            ops.append(choose(pool))
        items: list[tuple[Any, ...]] = []
        if integer(0, 2) == 0:  # sometimes the task yields before its first operation
            items.append(("await", choose(("sleep0", "pause"))))
        for j, o in enumerate(ops):
            if j:
                items.append(("await", choose(tuple(AWAITS))))
            items.append(("op", o.name, integer(1, 3)))
        tasks.append(tuple(items))
    return Program(tuple(tasks), focus)


@st.composite
def programs(draw: Any, focus: str = "mixed") -> Program:
    return build(
        lambda seq: draw(st.sampled_from(list(seq))),
        lambda lo, hi: draw(st.integers(lo, hi)),
        focus,
    )


def random_program(rng: random.Random, focus: str = "mixed") -> Program:
    return build(lambda seq: rng.choice(list(seq)), rng.randint, focus)


def shrink_candidates(prog: Program) -> list[Program]:
    """Programs with one item less (an await or an operation; a task left empty is dropped,
    but two tasks always remain), for delta-debugging a mismatch."""
    out = []
    for k, t in enumerate(prog.tasks):
        for j in range(len(t)):
            rest = t[:j] + t[j + 1 :]
            tasks = list(prog.tasks)
            if any(it[0] == "op" for it in rest):
                tasks[k] = rest
            elif len(tasks) > 2:
                del tasks[k]
            else:
                continue
            out.append(Program(tuple(tasks), prog.focus))
    return out


# ------------------------------------------------------------------ rendering

SHARED_SOURCE = '''\
"""Module-level state of a generated program (tests/grammar_programs.py)."""

counter = 0
log = []


def fmt(x):
    return "std"


def alt(x):
    return "alt"


def render(x):
    return fmt(x)


def bump():
    global counter
    counter += 1


def get():
    return counter


def record(v):
    log.append(v)


_fmt0 = fmt


def reset():
    global counter, log, fmt
    counter = 0
    log = []
    fmt = _fmt0
'''

PRELUDE = '''\
"""Generated by tests/grammar_programs.py."""

import asyncio
import functools
import gc
import heapq
import json
import operator
import weakref
from dataclasses import dataclass

import {shared} as sh

FLAG = 0


@dataclass
class Pt:
    a: int = 0
    b: int = 0


@dataclass(unsafe_hash=True)
class Key:
    a: int = 0


class Obj:
    def kind(self):
        return "obj"


class Other:
    def kind(self):
        return "other"


class Cnt:
    used = 0


class Reg(dict):
    def put(self, k, v):
        super().__setitem__(k, v)

    def peek(self, k):
        return super().get(k)


class Base:
    def __init__(self):
        self.n = 0

    def bump(self):
        self.n += 1


class Sub(Base):
    def bump(self):
        super().bump()


class Acct:
    def __init__(self):
        self._bal = 0

    @property
    def bal(self):
        return self._bal

    @bal.setter
    def bal(self, v):
        self._bal = v


class Hooks:
    def __init__(self, on_job, push):
        self.on_job = on_job
        self.push = push


class Tmp:
    def __init__(self, log, tag):
        self.log = log
        self.tag = tag

    def __del__(self):
        self.log.append(("del", self.tag))


class Item:
    pass


class St:
    pass


async def gen(n):
    for i in range(n):
        await asyncio.sleep(0)
        yield i


async def pause():
    await asyncio.sleep(0)


def count(*a, **k):
    return len(a) + len(k)


def flag_now():
    return FLAG


def snapshot(st, seen, res):
    """The outcome: deterministic for a schedule (no addresses, no string sets)."""
    state = (
        ("items", list(st.items)),
        ("d", sorted(st.d.items())),
        ("s", sorted(st.s)),
        ("p", (st.p.a, st.p.b)),
        ("key", st.key.a),
        ("obj", type(st.obj).__name__, sorted(vars(st.obj).items())),
        ("cls", Cnt.used),
        ("mod", sh.counter, list(sh.log), sh.fmt.__name__),
        ("heap", sorted(st.heap)),
        ("jobs", list(st.jobs)),
        ("log", list(st.log)),
        ("cache", sorted(st.cache.keys())),
        ("flag", FLAG),
        ("reg", sorted(st.reg.items())),
        ("sub", st.sub.n),
        ("acct", st.acct._bal),
    )
    return repr((state, [list(x) for x in seen], res))
'''


def _task_source(k: int, items: tuple[tuple[Any, ...], ...]) -> str:
    lines = [f"async def task{k}(st, seen):", "    global FLAG"]
    for n, it in enumerate(items):
        if it[0] == "await":
            code = AWAITS[it[1]]
            if not code:
                continue
        else:
            code = BY_NAME[it[1]].code.replace("{v}", str(it[2])).replace("{i}", str(100 * k + n))
        lines.append(textwrap.indent(code, "    "))
    return "\n".join(lines) + "\n"


def render_main(prog: Program, shared: str) -> str:
    parts = [PRELUDE.replace("{shared}", shared)]
    for k, items in enumerate(prog.tasks):
        parts.append("\n" + _task_source(k, items))
    n = len(prog.tasks)
    starts = ", ".join(f"asyncio.create_task(task{k}(st, seen[{k}]))" for k in range(n))
    parts.append(
        f"""
async def main():
    global FLAG
    sh.reset()
    FLAG = 0
    Cnt.used = 0
    st = St()
    st.items = [1]
    st.d = {{"a": 1}}
    st.s = {{1, 2}}
    st.p = Pt()
    st.key = Key()
    st.obj = Obj()
    st.obj.f0 = 0
    st.cnt = Cnt()
    st.reg = Reg()
    st.sub = Sub()
    st.acct = Acct()
    st.heap = []
    st.log = []
    st.jobs = []
    st.hooks = Hooks(st.jobs.append, functools.partial(heapq.heappush, st.heap))
    st.agen = gen(2)
    st.it = iter([1, 2, 3])
    st.cache = weakref.WeakValueDictionary()
    seen = [[] for _ in range({n})]
    tasks = [{starts}]
    res = []
    for t in tasks:
        try:
            await t
            res.append("ok")
        except Exception as e:
            res.append("exc:" + type(e).__name__)
    await st.agen.aclose()
    return snapshot(st, seen, res)
"""
    )
    return "".join(parts)


# ------------------------------------------------------------------ loading and exploring

_DIR = Path(tempfile.mkdtemp(prefix="chaossloth-grammar-"))
_PLAIN_DIR = Path(tempfile.mkdtemp(prefix="chaossloth-grammar-plain-"))
_COUNTER = itertools.count()


def load_instrumented(prog: Program) -> ModuleType:
    """The program as the CLI loads it: its main file through ``scenario.load_module`` (which
    instruments the file and the sibling modules it imports)."""
    n = next(_COUNTER)
    (_DIR / f"gshared_{n}.py").write_text(SHARED_SOURCE)
    path = _DIR / f"gmain_{n}.py"
    path.write_text(prog.source(f"gshared_{n}"))
    return scenario.load_module(path)


def load_plain(prog: Program) -> ModuleType:
    """The same package compiled plainly, in a directory no import hook instruments."""
    n = next(_COUNTER)
    if str(_PLAIN_DIR) not in sys.path:
        sys.path.append(str(_PLAIN_DIR))
    (_PLAIN_DIR / f"gpshared_{n}.py").write_text(SHARED_SOURCE)
    path = _PLAIN_DIR / f"gpmain_{n}.py"
    path.write_text(prog.source(f"gpshared_{n}"))
    spec = importlib.util.spec_from_file_location(f"gpmain_{n}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def outcome_of(r: runner.ExecutionResult) -> tuple[Any, ...]:
    failure = (r.failure.kind, r.failure.type_name) if r.failure is not None else None
    return (r.outcome, failure, r.value)


@dataclass
class Differential:
    exhaustive: set[Any]
    dpor: set[Any]
    exhaustive_executions: int
    dpor_executions: int
    complete: bool  # exhaustive finished within the cap (dpor's set is compared only then)
    dpor_complete: bool
    #: dpor's replay of a prefix diverged: it reordered steps capture called independent and
    #: the program then took another path (a missed dependency, like a missing outcome)
    dpor_diverged: str | None = None

    @property
    def agrees(self) -> bool:
        return self.dpor == self.exhaustive and self.dpor_complete and not self.dpor_diverged


def explore_outcomes(
    module: ModuleType, strategy: str, cap: int
) -> tuple[set[Any], runner.ExplorationResult]:
    seen: set[Any] = set()

    def on_execution(r: runner.ExecutionResult) -> None:
        if r.outcome != runner.ABORTED:
            seen.add(outcome_of(r))

    res = runner.explore(
        module.main,
        strategy=strategy,
        stop_on_failure=False,
        detail_failure=False,
        on_execution=on_execution,
        max_executions=cap,
        max_steps=2000,
        count_traces=False,
    )
    return seen, res


def differential(prog: Program, cap: int) -> Differential:
    """Brute force, then (if it completed within `cap` executions) dpor with the same cap."""
    module = load_instrumented(prog)
    ex, ex_res = explore_outcomes(module, "exhaustive", cap)
    if not ex_res.complete:
        return Differential(ex, set(), ex_res.executions, 0, False, False)
    try:
        dp, dp_res = explore_outcomes(module, "dpor", cap)
    except errors.NondeterminismError as exc:  # exhaustive replayed the same prefixes fine
        return Differential(ex, set(), ex_res.executions, 0, True, False, str(exc))
    return Differential(ex, dp, ex_res.executions, dp_res.executions, True, dp_res.complete)


def mismatch_message(prog: Program, diff: Differential) -> str:
    lines = [
        f"dpor and exhaustive disagree on ({', '.join(prog.op_names())}):",
        prog.describe(),
        f"as a literal: {prog!r}",
    ]
    if diff.dpor_diverged:
        lines.append(f"dpor diverged: {diff.dpor_diverged}")
    elif not diff.dpor_complete:
        lines.append("dpor did not complete within the cap")
    for x in sorted(diff.exhaustive - diff.dpor, key=repr):
        lines.append(f"only under exhaustive: {x!r}")
    for x in sorted(diff.dpor - diff.exhaustive, key=repr):
        lines.append(f"only under dpor: {x!r}")
    return "\n".join(lines)


def run_plain(prog: Program) -> str:
    """The program's outcome on the stock asyncio loop in its default order."""
    return asyncio.run(load_plain(prog).main())


def run_instrumented_fifo(prog: Program) -> tuple[Any, ...]:
    """The program's outcome instrumented, on ChaosSloth's loop, in fifo (stock) order."""
    return outcome_of(runner.run_once(load_instrumented(prog).main, detailed=False))


def minimize(prog: Program, still_fails: Callable[[Program], bool]) -> Program:
    """Greedy delta debugging: drops items while the failure persists."""
    changed = True
    while changed:
        changed = False
        for cand in shrink_candidates(prog):
            if still_fails(cand):
                prog, changed = cand, True
                break
    return prog
