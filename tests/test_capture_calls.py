"""Arguments handed to code that does not record its own accesses (the call hook).

`total = math.fsum(self.items)` reads the list inside an uninstrumented callee and
`heapq.heappush(self.q, x)` writes it: the call site must record those accesses, or a
concurrent `self.items.append(x)` looks independent and DPOR skips the order that matters.
"""

from __future__ import annotations

import ast
import re
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import pytest
from conftest import exec_source, run_in_step

from chaossloth import _core, runner, scenario
from chaossloth.capture.instrument import instrument_tree

R, W, WHOLE = _core.READ, _core.WRITE, _core.KEY_WHOLE

SRC = """
import heapq, json, math, random
class S:
    def __init__(self):
        self.items = [1, 2]
        self.q = []
def helper(lst):
    return lst[0]
def read_fsum(s):
    return math.fsum(s.items)
def read_join(s):
    return ','.join(map(str, s.items)), ', '.join(s.q)
def read_isinstance(s):
    return isinstance(s.items, list)
def write_heappush(s):
    heapq.heappush(s.q, 3)
def write_shuffle(s):
    random.Random(1).shuffle(s.items)
def write_in_tuple(s):
    json.dumps((s.items, 1))
def instrumented_callee(s):
    return helper(s.items)
def bound_method_arg(s):
    return json.dumps([0], default=s.q.append)
"""


def _accesses(fn_name: str) -> tuple[list[tuple[int, int, int, int]], dict[str, Any]]:
    ns = exec_source(textwrap.dedent(SRC), "<calls>", True, "calls_mod")
    s = ns["S"]()
    ids: dict[str, Any] = {}

    def keep() -> None:
        ids.update(items=_core.hooks_object_id(s.items), q=_core.hooks_object_id(s.q))

    _, ex = run_in_step(lambda: ns[fn_name](s), keep)
    return [tuple(a) for a in ex.trace()[0].accesses], ids  # type: ignore[misc]


def _whole(acc: list[tuple[int, int, int, int]], obj: Any) -> set[int]:
    return {kind for o, key, kind, _ in acc if o == obj and key == WHOLE}


@pytest.mark.parametrize(
    ("fn", "obj", "kind"),
    [
        ("read_fsum", "items", R),
        ("read_join", "items", R),
        ("read_join", "q", R),
        ("read_isinstance", "items", R),
        ("write_heappush", "q", W),
        ("write_shuffle", "items", W),
        ("write_in_tuple", "items", W),
        ("bound_method_arg", "q", W),
    ],
)
def test_arguments_of_uninstrumented_callees_are_recorded(fn: str, obj: str, kind: int) -> None:
    acc, ids = _accesses(fn)
    assert ids[obj] is not None
    assert _whole(acc, ids[obj]) == {kind}, acc


def test_instrumented_callee_records_only_its_own_accesses() -> None:
    acc, ids = _accesses("instrumented_callee")
    # helper reads lst[0] (a keyed read); nothing whole is recorded for the argument
    assert _whole(acc, ids["items"]) == set()
    assert any(o == ids["items"] and k != WHOLE and kind == R for o, k, kind, _ in acc)


def _rewritten(src: str) -> str:
    return ast.unparse(instrument_tree(textwrap.dedent(src), "<rewritten>"))


def test_which_calls_go_through_the_hook() -> None:
    out = _rewritten(
        """
        import m
        def f(x, args, kw):
            m.g(1, 'a')
            m.g()
            m.g(*args)
            m.g(**kw)
            eval(x)
            vars()
            super().h(1)
            return m.g(x)
        """
    )
    # cm recorded the receiver and the callee: callm records the arguments, and is left out
    # when there are only constants to hand over
    out = re.sub(r"\b\d+\b", "N", out)  # site numbers
    assert out.count("_cs_callm(") == 1
    assert "'g', N, N)(N, 'a')" in out and "'g', N, N)()" in out
    # starred calls stay plain calls (their error messages name the callee); the iterable is
    # unpacked by sw, the mapping read by kw, where the interpreter would
    assert "'g', N, N)(*_cs_sw(args, N))" in out and "(**_cs_kw(kw, N))" in out
    assert "_cs_bar(eval, " in out  # eval runs arbitrary code: the global barrier
    assert "_cs_call(vars, " in out  # vars() with no argument: a barrier, decided at run time
    assert "super()" in out


def test_hook_without_explorer_is_a_plain_call() -> None:
    assert not _core.hooks_active()
    assert _core.call(sorted, 0, [3, 1], reverse=True) == [3, 1]
    with pytest.raises(TypeError, match="'int' object is not callable"):
        _core.call(5, 0, 1)


# ------------------------------------------------------------------ end to end

E2E = """
import asyncio, heapq, math
class S:
    def __init__(self):
        self.items = []
async def adder(s):
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    ADD
async def reader(s, seen):
    await asyncio.sleep(0)
    seen.append(READ)
async def main(box):
    s = S()
    seen = []
    box["seen"] = seen
    await asyncio.gather(adder(s), reader(s, seen))
"""


def _observed(module: Any, strategy: str) -> set[str]:
    holder: list[dict[str, Any]] = [{}]

    def factory() -> Any:
        holder[0] = {}
        return module.main(holder[0])

    seen: set[str] = set()

    def on_execution(r: runner.ExecutionResult) -> None:
        if r.outcome != runner.ABORTED:
            seen.add(repr(holder[0]["seen"]))

    res = runner.explore(factory, strategy=strategy, stop_on_failure=False,
                         detail_failure=False, on_execution=on_execution)  # fmt: skip
    assert res.complete
    return seen


@pytest.mark.parametrize(
    ("add", "read"),
    [
        ("s.items.append(1)", "sum(s.items)"),
        ("s.items.append(1)", "math.fsum(s.items)"),
        ("s.items.append(1)", "heapq.nlargest(1, s.items)"),
        ("heapq.heappush(s.items, 1)", "s.items.copy()"),
    ],
)
def test_dpor_sees_what_uninstrumented_callees_see(add: str, read: str) -> None:
    path = Path(tempfile.mkdtemp(prefix="chaossloth-calls-")) / "calls_e2e.py"
    path.write_text(E2E.replace("ADD", add).replace("READ", read))
    module = scenario.load_module(path)
    exhaustive = _observed(module, "exhaustive")
    assert len(exhaustive) == 2  # the reader ran before or after the add
    assert _observed(module, "dpor") == exhaustive
