"""Objects created by the user's code are named after their creating step (CS_ID_CREATED).

The instrumenter wraps list / dict / set displays and comprehensions in ``_cs_new`` and calls of
the module's classes (and of list / dict / set / bytearray) in ``_cs_newcall``; the hooks record
the new object as created by the open step, so DPOR compares it exactly across executions instead
of conservatively (an object first touched after the prefix two executions share).
"""

from __future__ import annotations

import ast
import itertools
import tempfile
import textwrap
from pathlib import Path
from typing import Any, Self

import pytest

from chaossloth import _core, runner, scenario
from chaossloth.capture.instrument import instrument_tree

_DIR = Path(tempfile.mkdtemp(prefix="chaossloth-creation-"))
_N = itertools.count()


def rewritten(src: str) -> str:
    src = textwrap.dedent(src)
    return ast.unparse(instrument_tree(src, "<test>"))


def load(src: str) -> Any:
    path = _DIR / f"creation_{next(_N)}.py"
    path.write_text(textwrap.dedent(src))
    return scenario.load_module(path)


# ------------------------------------------------------------------ rewriting


def test_displays_and_comprehensions_are_created() -> None:
    out = rewritten(
        """
        def f(n):
            a = []
            b = {'k': [1]}
            c = {1, 2}
            d = [[] for _ in range(n)]
            e = {i: i for i in range(n)}
            g = (i for i in range(n))
            return a, b, c, d, e, g
        """
    )
    assert out.count("_cs_new(") == 7  # [], {'k': ...}, [1], {1, 2}, [], [..comp..], {..comp..}
    assert "g = (i for i in " in out  # a generator expression is not a container


def test_consumed_displays_are_not_recorded() -> None:
    out = rewritten(
        """
        def f(x):
            for i in [1, 2]:
                pass
            if x in [3, 4]:
                pass
            return [y for y in [5, 6]], sorted([7, 8]), g(*[9])
        """
    )
    for lit in ("[1, 2]", "[3, 4]", "[5, 6]", "[7, 8]", "[9]"):
        assert f"_cs_new({lit}" not in out, out
    assert out.count("_cs_new(") == 1  # the list comprehension itself


def test_store_targets_are_untouched() -> None:
    out = rewritten(
        """
        def f(t):
            [a, b] = t
            for [c, d] in t:
                pass
            return a, b, c, d
        """
    )
    assert "_cs_new" not in out


def test_class_calls_and_allocating_builtins_use_newcall() -> None:
    out = rewritten(
        """
        class C:
            pass
        def helper():
            return 1
        def f(x, kw):
            return C(), list(x), dict(a=1), helper(), C(*x), dict(**kw)
        """
    )
    assert "_cs_newcall(C, " in out
    assert "_cs_newcall(list, " in out
    assert "_cs_newcall(dict, " in out
    assert "helper()" in out  # a function may return an existing object: never flagged
    assert "C(*x)" in out and "dict(**kw)" in out  # forwarded calls keep their messages


def test_shadowed_class_name_is_a_plain_call() -> None:
    out = rewritten(
        """
        class C:
            pass
        def f(C):
            return C()
        """
    )
    assert "_cs_newcall" not in out


# ------------------------------------------------------------------ newcall semantics


class Plain:
    def __init__(self, a: int, b: int = 0) -> None:
        self.total = a + b


class Singleton:
    _it: Any = None

    def __new__(cls) -> Self:
        if cls._it is None:
            cls._it = super().__new__(cls)
        return cls._it


class Other:
    def __new__(cls) -> Any:
        return 42  # not an instance: __init__ must not run

    def __init__(self) -> None:  # pragma: no cover - must not be called
        raise AssertionError("__init__ of a non-instance")


class Boom:
    def __init__(self) -> None:
        raise ValueError("boom")


@pytest.fixture(params=[False, True], ids=["idle", "recording"])
def recording(request: Any) -> Any:
    if not request.param:
        yield None
        return
    ex = _core.Explorer("fifo")
    ex.begin()
    ex.step_begin(ex.intern(None, 0), -1)
    _core.hooks_attach(ex)
    try:
        yield ex
    finally:
        _core.hooks_attach(None)
        ex.step_end()
        ex.end(0)


def test_newcall_behaves_like_the_call(recording: Any) -> None:
    p = _core.newcall(Plain, 0, 1, b=2)
    assert type(p) is Plain and p.total == 3
    assert _core.newcall(Singleton, 0) is _core.newcall(Singleton, 0)
    assert _core.newcall(Other, 0) == 42
    with pytest.raises(ValueError, match="boom"):
        _core.newcall(Boom, 0)
    with pytest.raises(TypeError):
        _core.newcall(Plain, 0)  # missing argument, raised by __init__ as usual
    assert _core.newcall(list, 0, (1, 2)) == [1, 2]
    assert _core.newcall(dict, 0, a=1) == {"a": 1}
    assert _core.newcall(len, 0, "abc") == 3
    assert _core.new(p, 0) is p


@pytest.mark.parametrize("recording", [True], indirect=True, ids=["recording"])
def test_fresh_objects_are_recorded_once(recording: Any) -> None:
    before = _core.hooks_stats()["recorded"]
    x = _core.new([], 0)
    _core.newcall(Plain, 0, 1)
    assert _core.hooks_stats()["recorded"] - before == 2
    # an object already named is not fresh: the access is recorded, but not as a creation
    _core.record(x, _core.WRITE | _core.ID_CREATED)
    assert _core.hooks_stats()["recorded"] - before == 3


def test_traceback_points_at_the_user_line() -> None:
    mod = load(
        """
        class K:
            def __init__(self):
                raise KeyError('k')

        def make():
            return [K()]
        """
    )
    with pytest.raises(KeyError) as info:
        mod.make()
    lines = [(e.name, e.lineno) for e in info.traceback]
    assert ("make", 6) in lines and ("__init__", 3) in lines


# ------------------------------------------------------------------ the effect on DPOR

OWN_LISTS = """
import asyncio

class S:
    pass

async def w(s, seen):
    v = s.x
    seen.append(v)

async def main():
    s = S()
    s.x = 0
    seen = [[] for _ in range(3)]
    tasks = [asyncio.create_task(w(s, seen[i])) for i in range(3)]
    for t in tasks:
        await t
    return seen
"""


def test_lists_created_by_main_are_compared_exactly() -> None:
    """Each task appends to its own list, created by main but first touched by the task (after
    the prefix executions share).  Named by their creator, the lists never make two tasks look
    dependent, so dpor runs one execution per trace (it ran 6 for 4 traces before)."""
    mod = load(OWN_LISTS)

    def run(strategy: str) -> runner.ExplorationResult:
        return runner.explore(
            mod.main, strategy=strategy, stop_on_failure=False, detail_failure=False,
            max_executions=500, count_traces=True,
        )  # fmt: skip

    ex, dp = run("exhaustive"), run("dpor")
    assert ex.complete and dp.complete
    assert dp.sleep_blocked == 0
    assert dp.executions == ex.distinct_traces == dp.distinct_traces
