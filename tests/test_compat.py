"""The CPython-version layer (chaossloth.compat, ext/compat.c), the type stub of _core, and
the one-exploration-per-process rule; eager tasks and the exception handler's context side by
side with the stock loop of the running interpreter."""

from __future__ import annotations

import ast
import asyncio
import contextvars
import sys
from pathlib import Path
from typing import Any

import pytest
from test_loop_support import LOOP_KINDS, observe

import chaossloth
from chaossloth import _core, compat
from chaossloth.capture.instrument import hook_namespace, instrument_tree
from chaossloth.loop import ControlledLoop

STUB = Path(chaossloth.__file__).with_name("_core.pyi")

# ------------------------------------------------------------------------- the stub


def _stub_names() -> tuple[set[str], dict[str, set[str]]]:
    tree = ast.parse(STUB.read_text())
    top: set[str] = set()
    members: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            top.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            top.add(node.target.id)
        if isinstance(node, ast.ClassDef):
            names = set()
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    names.add(item.name)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    names.add(item.target.id)
            members[node.name] = names
    return top, members


def test_the_stub_names_every_public_name_of_core_and_nothing_else() -> None:
    top, members = _stub_names()
    runtime = {n for n in dir(_core) if not n.startswith("__")}
    assert top == runtime
    for cls, names in members.items():
        obj = getattr(_core, cls)
        own = {n for n in vars(obj) if not (n.startswith("__") and n.endswith("__"))}
        if not issubclass(obj, BaseException):
            own |= {"__new__"} & set(vars(obj)) & names
        assert names == own, cls


def test_the_stub_ships_with_the_package() -> None:
    pyproject = (Path(__file__).parent.parent / "pyproject.toml").read_text()
    assert '"_core.pyi"' in pyproject and STUB.is_file()


# -------------------------------------------------------------------- the version layer


def test_this_interpreter_is_supported_and_checked() -> None:
    assert sys.version_info[:2] in compat.SUPPORTED
    assert compat.COMPREHENSIONS_INLINED == (sys.version_info >= (3, 12))


def test_the_layout_check_rejects_what_does_not_match() -> None:
    loop = ControlledLoop()
    try:

        async def main() -> None:
            await asyncio.sleep(0)

        task = asyncio.tasks._PyTask(main(), loop=loop)  # type: ignore[attr-defined]
        py_step = vars(compat.PY_TASK)["_Task__step"]
        py_wakeup = vars(compat.PY_TASK)["_Task__wakeup"]
        step = loop._ready[0]._callback  # a bound method, not the C wrapper
        with pytest.raises(_core.CompatError, match="TaskStepMethWrapper"):
            _core._compat_check(task, step, step, py_step, py_wakeup)
        task.cancel()
        loop.run_until_complete(asyncio.gather(task, return_exceptions=True))
    finally:
        loop.close()


def test_the_unsupported_error_is_one_chaossloth_error() -> None:
    exc = compat._unsupported("a reason")
    assert isinstance(exc, chaossloth.ChaosSlothError) and isinstance(exc, ImportError)
    assert "a reason" in str(exc) and "3.11, 3.12, 3.13" in str(exc)


def test_the_set_event_loop_is_read_without_side_effects() -> None:
    loop = ControlledLoop()
    try:
        asyncio.set_event_loop(loop)
        assert compat.get_set_event_loop() is loop
        asyncio.set_event_loop(None)
        assert compat.get_set_event_loop() is None
    finally:
        loop.close()


def test_accesses_inside_comprehensions_are_instrumented_on_every_version() -> None:
    """3.12 inlines comprehensions (PEP 709): the names inside them must still be recorded,
    and their variables must not be taken for the function's cells."""
    source = (
        "G = 0\n"
        "def f():\n"
        "    x = []\n"
        "    def keep():\n"
        "        return x\n"
        "    return [G + len(x) for _ in range(2)], [lambda: i for i in range(3)]\n"
    )
    text = ast.unparse(instrument_tree(source, "t.py"))
    assert "_cs_gr(G, 'G'" in text  # the global read inside the comprehension
    assert "_cs_cr(x, _cs_c_x" in text.split("return (")[1]  # the cell read inside it
    assert "_cs_c_i" not in text  # the comprehension's own variable is no cell of f
    ns: dict[str, Any] = {"__name__": "t", **hook_namespace()}
    exec(compile(instrument_tree(source, "t.py"), "t.py", "exec"), ns)  # noqa: S102
    values, lambdas = ns["f"]()  # raised TypeError on 3.12 (a cell taken from no closure)
    assert values == [0, 0] and [g() for g in lambdas] == [2, 2, 2]


# ------------------------------------------------------------ one exploration per process


def test_a_second_exploration_in_the_process_is_refused() -> None:
    first, second = _core.Explorer("fifo"), _core.Explorer("fifo")
    assert first.begin() and second.begin()
    a, b = ControlledLoop(), ControlledLoop()
    try:
        a._cs_attach(first)
        with pytest.raises(_core.ExplorationActiveError, match="one exploration per process"):
            b._cs_attach(second)
        with pytest.raises(_core.ExplorationActiveError):
            b._cs_attach(first)  # the same explorer from another loop: two executions
        with pytest.raises(_core.ExplorationActiveError):
            _core.hooks_attach(second)
        _core.hooks_attach(None)  # releases only what hooks_attach claimed
        assert _core.hooks_active()
        a.close()  # closing gives the slot back
        assert not _core.hooks_active()
        b._cs_attach(second)
        assert _core.hooks_active()
        b._cs_detach()
        _core.hooks_attach(first)
        with pytest.raises(_core.ExplorationActiveError):
            a._cs_attach(second)
        _core.hooks_attach(None)
        assert not _core.hooks_active()
    finally:
        a.close()
        b.close()


# ------------------------------------------------------ side by side with the stock loop


async def _eager_program(log: list[Any]) -> Any:
    loop = asyncio.get_running_loop()
    loop.set_task_factory(asyncio.eager_task_factory)  # type: ignore[attr-defined]

    async def worker(name: str, n: int) -> str:
        log.append(("start", name))
        for i in range(n):
            await asyncio.sleep(0)
            log.append((name, i))
        return name

    async def quick(name: str) -> str:
        log.append(("quick", name))  # finishes during its eager first step
        return name

    t1 = asyncio.create_task(worker("a", 2))
    t2 = asyncio.create_task(quick("q"))
    log.append(("created", t1.done(), t2.done()))
    t3 = asyncio.create_task(worker("b", 1))
    return await asyncio.gather(t1, t2, t3)


@pytest.mark.skipif(sys.version_info < (3, 12), reason="eager tasks exist from 3.12 on")
@pytest.mark.parametrize("kind", ["controlled", "controlled+explorer"])
def test_eager_tasks_run_in_the_stock_order(kind: str) -> None:
    ref = observe(LOOP_KINDS["stock"], _eager_program)
    assert ("created", False, True) in ref["log"]
    assert observe(LOOP_KINDS[kind], _eager_program) == ref


_VAR: contextvars.ContextVar[str] = contextvars.ContextVar("_VAR", default="outside")


def _handler_context(factory: Any) -> list[str]:
    seen: list[str] = []

    def handler(loop: Any, context: dict[str, Any]) -> None:
        seen.append(_VAR.get())

    def bad() -> None:
        raise ValueError("boom")

    loop = factory()
    try:
        loop.set_exception_handler(handler)
        ctx = contextvars.copy_context()
        ctx.run(_VAR.set, "inside")
        loop.call_soon(bad, context=ctx)
        loop.call_soon(loop.stop)
        loop.run_forever()
    finally:
        loop.close()
    return seen


@pytest.mark.parametrize("kind", ["controlled", "controlled+explorer"])
def test_the_exception_handler_runs_in_the_context_stock_uses(kind: str) -> None:
    """3.11 calls a custom handler in the caller's context, 3.12+ in the handle's."""
    ref = _handler_context(LOOP_KINDS["stock"])
    assert ref == (["inside"] if sys.version_info >= (3, 12) else ["outside"])
    assert _handler_context(LOOP_KINDS[kind]) == ref
