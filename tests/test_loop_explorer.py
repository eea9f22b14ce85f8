"""ControlledLoop with an Explorer attached: actor identity, scheduled_by edges, the loop's own
accesses, timer modes, await sites, and the runner-facing introspection."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from chaossloth import _core
from chaossloth.loop import ControlledLoop

HANDLE_TAG = 0xC5A0000000000000
CLOCK = 0xC5A1000000000000


def execute(
    main: Callable[[], Coroutine[Any, Any, Any]],
    ex: Any,
    *,
    timers: str = "strict",
    setup: Callable[[ControlledLoop], None] | None = None,
) -> tuple[Any, ControlledLoop]:
    """One execution of ``main()`` under ``ex``; returns (result, loop) with the loop closed."""
    assert ex.begin()
    loop = ControlledLoop(timers=timers)
    if setup:
        setup(loop)
    loop._cs_attach(ex)
    try:
        result = loop.run_until_complete(main())
    finally:
        loop._cs_detach()
        ex.end(_core.OUTCOME_OK)
        loop.close()
    return result, loop


async def parent_and_children() -> list[int]:
    async def child(i: int) -> int:
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        return i

    t1 = asyncio.create_task(child(1))
    t2 = asyncio.create_task(child(2))
    asyncio.get_running_loop().call_soon(lambda: None)
    return [await t1, await t2]


def test_actor_identity_follows_creation_paths() -> None:
    ex = _core.Explorer("fifo")
    result, loop = execute(parent_and_children, ex)
    assert result == [1, 2]
    trace = ex.trace()
    kinds = loop._cs_actor_kinds
    root = ex.intern(None, 0)
    # the root task, its two children (creations #0, #1), the lambda (#2)
    c1, c2, lam = ex.intern(root, 0), ex.intern(root, 1), ex.intern(root, 2)
    assert kinds[root] == kinds[c1] == kinds[c2] == "Task" and kinds[lam] == "callback"
    steps_of: dict[int, int] = {}
    for ev in trace:
        steps_of[ev.actor] = steps_of.get(ev.actor, 0) + 1
    # every step of a task -- first __step, sleep(0) re-steps, wakeups -- is the task's actor
    assert steps_of[c1] == 3 and steps_of[c2] == 3 and steps_of[lam] == 1
    assert steps_of[root] >= 2
    assert trace[0].actor == root and trace[0].scheduled_by == _core.SCHEDULED_BY_NONE


def test_actor_ids_stable_across_schedules() -> None:
    ex = _core.Explorer("random", seed=7)
    schedules = set()
    actor_sets = []
    for _ in range(6):
        execute(parent_and_children, ex)
        sched = ex.schedule()
        schedules.add(tuple(sched))
        actor_sets.append(sorted(set(sched)))
    assert len(schedules) > 1  # the strategy really reordered steps
    assert all(s == actor_sets[0] for s in actor_sets)


def test_python_task_steps_are_recognised() -> None:
    """_PyTask's __step/__wakeup (bound methods) belong to the task; other bound methods of a
    task (here task.cancel scheduled as a callback) do not."""

    async def main() -> str:
        loop = asyncio.get_running_loop()

        async def child() -> None:
            await asyncio.sleep(10)

        t = loop.create_task(child())
        await asyncio.sleep(0)
        loop.call_soon(t.cancel)
        try:
            await t
        except asyncio.CancelledError:
            return "cancelled"
        return "not"

    ex = _core.Explorer("fifo")

    def use_py_classes(loop: ControlledLoop) -> None:
        loop._cs_task_class = asyncio.tasks._PyTask  # type: ignore[attr-defined]
        loop._cs_future_class = asyncio.futures._PyFuture  # type: ignore[attr-defined]

    seen: list[type] = []

    async def main_checked() -> str:
        fut = asyncio.get_running_loop().create_future()
        seen.append(type(fut))
        fut.set_result(None)
        return await main()

    result, loop = execute(main_checked, ex, setup=use_py_classes)
    assert result == "cancelled"
    assert seen == [asyncio.futures._PyFuture]  # type: ignore[attr-defined]
    kinds = loop._cs_actor_kinds
    root = ex.intern(None, 0)
    child = ex.intern(root, 0)
    cancel_cb = ex.intern(root, 1)
    assert kinds[root] == kinds[child] == "Task"
    assert kinds[cancel_cb] == "callback"
    actors = [ev.actor for ev in ex.trace()]
    assert actors.count(child) == 2  # first step, then the wakeup with CancelledError


def test_scheduled_by_edges_and_after_all() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        fut = loop.create_future()

        async def waiter() -> None:
            await fut

        t = asyncio.create_task(waiter())
        await asyncio.sleep(0)
        fut.set_result(1)  # wakes `waiter` from this step
        await t
        await asyncio.sleep(5)  # a timer reached only by advancing the clock

    ex = _core.Explorer("fifo")
    execute(main, ex)
    trace = ex.trace()
    root = ex.intern(None, 0)
    waiter = ex.intern(root, 0)
    w_steps = [i for i, ev in enumerate(trace) if ev.actor == waiter]
    assert len(w_steps) == 2
    wake = trace[w_steps[1]]
    setter = wake.scheduled_by
    assert trace[setter].actor == root  # the root's step that called set_result
    after_all = [ev for ev in trace if ev.scheduled_by == _core.AFTER_ALL]
    assert len(after_all) == 1  # the sleep(5) timer
    assert all(0 <= ev.scheduled_by < i or ev.scheduled_by < 0 for i, ev in enumerate(trace))


def test_loop_records_handle_and_clock_accesses() -> None:
    times: list[float] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        h = loop.call_later(1, lambda: None)
        h.cancel()
        await asyncio.sleep(2)
        times.append(loop.time())

    ex = _core.Explorer("fifo")
    execute(main, ex)
    trace = ex.trace()
    write, read = _core.WRITE, _core.READ
    handle_reads = [a for ev in trace for a in ev.accesses if a[0] >> 48 == HANDLE_TAG >> 48]
    assert len([a for a in handle_reads if a[2] == read]) == len(trace)  # every step
    assert any(a[2] == write for a in handle_reads)  # the cancel
    clock = [(i, a[2]) for i, ev in enumerate(trace) for a in ev.accesses if a[0] == CLOCK]
    root = ex.intern(None, 0)
    last_root = max(i for i, ev in enumerate(trace) if ev.actor == root)
    assert (last_root, read) in clock  # loop.time() in the root's last step
    assert any(kind == write for _, kind in clock)  # the advance to t=2
    assert times == [2.0]


async def two_timers(log: list[str]) -> None:
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    loop.call_later(1, log.append, "a")
    loop.call_later(2, log.append, "b")
    loop.call_later(3, done.set_result, None)
    await done


def _orders(timers: str, seeds: range) -> set[tuple[str, ...]]:
    out = set()
    for seed in seeds:
        log: list[str] = []
        execute(lambda log=log: two_timers(log), _core.Explorer("random", seed=seed), timers=timers)
        out.add(tuple(log))
    return out


def test_strict_timers_fire_in_deadline_order() -> None:
    assert _orders("strict", range(12)) == {("a", "b")}


def test_relaxed_timers_may_fire_out_of_order() -> None:
    assert _orders("relaxed", range(12)) == {("a", "b"), ("b", "a")}


def test_relaxed_clock_is_max_of_now_and_deadline() -> None:
    late: set[str] = set()
    for seed in range(8):
        seen: list[tuple[str, float]] = []

        async def main(seen: list[tuple[str, float]] = seen) -> None:
            loop = asyncio.get_running_loop()
            done = loop.create_future()
            loop.call_later(1, lambda: seen.append(("a", loop.time())))
            loop.call_later(2, lambda: seen.append(("b", loop.time())))
            loop.call_later(3, done.set_result, None)
            await done

        execute(main, _core.Explorer("random", seed=seed), timers="relaxed")
        clock = dict(seen)
        assert clock["a"] in (1.0, 2.0, 3.0) and clock["b"] in (2.0, 3.0)
        assert [t for _, t in seen] == sorted(t for _, t in seen)  # time never goes back
        late.update(tag for tag, t in seen if t > {"a": 1.0, "b": 2.0}[tag])
    assert late  # some seed fired a timer after a later deadline had moved the clock


def test_equal_deadlines_are_a_real_choice_in_strict_mode() -> None:
    orders = set()
    for seed in range(12):
        log: list[str] = []

        async def main(log: list[str] = log) -> None:
            loop = asyncio.get_running_loop()
            when = loop.time() + 1
            loop.call_at(when, log.append, "x")
            loop.call_at(when, log.append, "y")
            await asyncio.sleep(2)

        execute(main, _core.Explorer("random", seed=seed))
        orders.add(tuple(log))
    assert orders == {("x", "y"), ("y", "x")}


def test_fifo_choices_are_index_zero_and_current_step_is_exposed() -> None:
    seen: list[tuple[Any, int]] = []
    loop_ref: list[ControlledLoop] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop_ref.append(loop)  # type: ignore[arg-type]
        seen.append((loop._cs_actor, loop._cs_event))  # type: ignore[attr-defined]
        loop.call_soon(lambda: seen.append((loop._cs_actor, loop._cs_event)))  # type: ignore[attr-defined]
        await asyncio.sleep(0)

    ex = _core.Explorer("fifo")
    _, loop = execute(main, ex)
    assert set(loop._cs_choices) == {0}
    root = ex.intern(None, 0)
    assert seen[0] == (root, 0)
    assert seen[1] == (ex.intern(root, 0), 1)
    assert loop._cs_actor is None and loop._cs_event == -1


def test_await_sites_name_the_user_line() -> None:
    async def main() -> None:
        lock = asyncio.Lock()
        async with lock:
            await asyncio.sleep(0)  # SITE-A
        await asyncio.sleep(1)  # SITE-B

    ex = _core.Explorer("fifo")
    _, loop = execute(main, ex)
    sites = loop._cs_await_sites()
    assert len(sites) == len(ex.trace())
    lines = [s[1] for s in sites if s is not None]
    src = Path(__file__).read_text(encoding="utf-8").splitlines()
    a = next(i for i, t in enumerate(src, 1) if "# SITE-A" in t and "src" not in t)
    b = next(i for i, t in enumerate(src, 1) if "# SITE-B" in t and "src" not in t)
    assert lines[:2] == [a, b]
    assert all(s is None or s[0] == __file__ for s in sites)
    assert sites[-1] is None  # the run_until_complete callback is not a task


def test_actor_descriptions() -> None:
    keep: list[Any] = []

    async def main() -> None:
        t = asyncio.create_task(asyncio.sleep(0), name="sleeper")
        keep.append(t)
        asyncio.get_running_loop().call_soon(print_nothing)
        await t

    ex = _core.Explorer("fifo")
    _, loop = execute(main, ex)
    actors = loop._cs_actors()
    root = ex.intern(None, 0)
    assert actors[ex.intern(root, 0)] is keep[0]
    assert actors[ex.intern(root, 1)] == "print_nothing"
    assert "sleeper" in loop._cs_actor_name(ex.intern(root, 0))
    assert loop._cs_actor_name(ex.intern(root, 1)) == "callback print_nothing"


def print_nothing() -> None:
    pass


def test_hooks_point_at_the_attached_explorer() -> None:
    ex = _core.Explorer("fifo")
    assert ex.begin()
    loop = ControlledLoop()
    loop._cs_attach(ex)
    assert _core.hooks_active()
    loop._cs_detach()
    assert not _core.hooks_active()
    ex.end(_core.OUTCOME_OK)
    loop.close()


def test_attach_requires_an_empty_idle_loop() -> None:
    loop = ControlledLoop()
    with pytest.raises(TypeError, match="Explorer"):
        loop._cs_attach(object())
    loop.call_soon(print_nothing)
    with pytest.raises(RuntimeError, match="before anything is scheduled"):
        loop._cs_attach(_core.Explorer("fifo"))
    loop.close()


@pytest.mark.parametrize("strategy", ["random", "exhaustive", "dpor"])
def test_timer_cancelled_in_the_heap_is_never_run(strategy: str) -> None:
    """A timer cancelled while it waits in the heap (not at its top) reaches the ready queue
    cancelled when the clock advances; the explorer must drop it, not run it (this crashed)."""

    async def main(out: list[str]) -> list[str]:
        loop = asyncio.get_running_loop()
        loop.call_later(1, out.append, "a")
        h2 = loop.call_later(1, out.append, "b")
        h2.cancel()
        loop.call_later(1, out.append, "c")
        await asyncio.sleep(2)
        return out

    ex = _core.Explorer(strategy, seed=3, max_executions=20)
    while ex.begin():
        loop = ControlledLoop()
        loop._cs_attach(ex)
        try:
            assert sorted(loop.run_until_complete(main([]))) == ["a", "c"]
        finally:
            loop.close()
        ex.end(_core.OUTCOME_OK)
