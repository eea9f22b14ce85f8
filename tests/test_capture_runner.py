"""Capture inside real executions: instrumented code, recording futures/tasks and the wrapped
primitives on the controlled loop give the same results as stock asyncio."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path
from typing import Any

import pytest
from test_instrument_semantics import CASES

from chaossloth import runner, scenario
from chaossloth.capture.importer import _register_file
from chaossloth.capture.instrument import compile_instrumented, hook_namespace

ASYNC_CASES = [n for n, src in CASES.items() if "async def run" in src]


def _ns(source: str, filename: str, instrumented: bool) -> dict[str, Any]:
    ns: dict[str, Any] = {"__name__": "case_rt"}
    source = textwrap.dedent(source)
    if instrumented:
        ns.update(hook_namespace())
        _register_file(filename)
        exec(compile_instrumented(source, filename), ns)  # noqa: S102
    else:
        exec(compile(source, filename, "exec"), ns)  # noqa: S102
    return ns


@pytest.mark.parametrize("name", ASYNC_CASES)
def test_controlled_loop_run_matches_stock_asyncio(name: str) -> None:
    want = repr(asyncio.run(_ns(CASES[name], f"<rt {name}>", False)["run"]()))
    ns = _ns(CASES[name], f"<rt {name}>", True)
    result = runner.run_once(ns["run"], detailed=True)
    assert result.outcome == "ok", result.failure
    assert repr(result.value) == want
    # the run recorded accesses of the user's code and of asyncio's primitives
    n_acc = sum(len(e.accesses) for e in result.trace or [])
    assert n_acc > 0


def test_seed_example_fails_in_stock_order_and_dpor_finds_it() -> None:
    seed = Path(__file__).parent / "targets" / "test_multi_resource.py"
    prog = scenario.load_scenario(seed, "scenario")
    once = runner.run_once(prog.factory)
    assert once.failed and "sessions['audit'] == 1" in once.failure.message  # type: ignore[union-attr]
    found = runner.explore(prog.factory, strategy="dpor", stop_on_failure=False)
    assert found.failed and found.complete
    assert found.executions >= 2  # the passing serial order was reached too
