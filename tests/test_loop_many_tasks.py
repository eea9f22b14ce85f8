"""The call_soon FIFO with many tasks (issue 39): the reduced follows of ext/loop.c ("FIFO and
fairness") keep stock asyncio's order and the explored schedules.  Behaviour only; the cost is
bench/bench_many_tasks.py's."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from chaossloth import runner

Main = Callable[[], Coroutine[Any, Any, Any]]


def gathered(n: int, log: list[Any]) -> Main:
    """n gathered tasks; each logs its first step, yields, logs its second; the done callbacks
    (gather's) are call_soon chains behind them."""

    async def task(k: int) -> int:
        log.append(("first", k))
        await asyncio.sleep(0)
        log.append(("second", k))
        return k

    async def main() -> list[int]:
        log.clear()
        return await asyncio.gather(*(task(k) for k in range(n)))

    return main


def test_first_steps_of_200_gathered_tasks_run_in_stock_order() -> None:
    stock: list[Any] = []
    asyncio.run(gathered(200, stock)())
    ours: list[Any] = []
    r = runner.run_once(gathered(200, ours), detailed=False, max_steps=5000)
    assert r.outcome == runner.OK
    assert ours == stock
    assert [k for what, k in ours[:200]] == list(range(200))


def test_every_schedule_keeps_the_creation_order_of_first_steps() -> None:
    """Across dpor's executions the first steps never reorder (FIFO among starters), and each
    bare yield's next step waits for the first steps of all the tasks created before it ran."""
    log: list[Any] = []
    seen: list[list[Any]] = []
    res = runner.explore(
        gathered(4, log),
        strategy="dpor",
        stop_on_failure=False,
        detail_failure=False,
        on_execution=lambda r: seen.append(list(log)),
        max_executions=500,
        max_steps=500,
    )
    assert res.complete
    for order in seen:
        firsts = [k for what, k in order if what == "first"]
        assert firsts == [0, 1, 2, 3]
        assert all(what == "first" for what, _ in order[:4])


def cancelled_chains(log: list[Any]) -> Main:
    """Chains drained by a cancel before they ran (hollow), behind and in front of others."""

    def cb(k: int) -> None:
        log.append(k)

    async def a() -> None:
        loop = asyncio.get_running_loop()
        h = loop.call_soon(cb, 1)
        await asyncio.sleep(0)
        loop.call_soon(cb, 2)
        h.cancel()

    async def b() -> None:
        loop = asyncio.get_running_loop()
        loop.call_soon(cb, 3)
        await asyncio.sleep(0)
        log.append("b")

    async def main() -> str:
        log.clear()
        loop = asyncio.get_running_loop()
        h = loop.call_soon(cb, 0)
        t1 = asyncio.create_task(a())
        h.cancel()
        t2 = asyncio.create_task(b())
        await asyncio.gather(t1, t2)
        return repr(log)

    return main


@pytest.mark.parametrize(
    ("program", "strategy", "executions"),
    [
        # the counts of the extension before issue 39 (the same explored schedules)
        (lambda log: gathered(3, log), "dpor", 6),
        (lambda log: gathered(3, log), "exhaustive", 30),
        (lambda log: gathered(4, log), "dpor", 24),
        (lambda log: gathered(4, log), "exhaustive", 336),
        (cancelled_chains, "dpor", 2),
        (cancelled_chains, "exhaustive", 16),
    ],
)
def test_execution_counts_are_unchanged(program: Any, strategy: str, executions: Any) -> None:
    log: list[Any] = []
    res = runner.explore(
        program(log),
        strategy=strategy,
        stop_on_failure=False,
        detail_failure=False,
        max_executions=2000,
        max_steps=500,
    )
    assert res.complete
    assert res.executions == executions
