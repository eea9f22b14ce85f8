"""The cycle collector as part of an execution's initial state (collector.py): every execution's
first step meets the same young-generation count, collections inside an execution never finalize
an earlier execution's garbage, and a cycle through a container the capture holds stays
collectable."""

from __future__ import annotations

import asyncio
import gc
from pathlib import Path
from typing import Any, ClassVar

import pytest

from chaossloth import collector, runner, scenario


def test_every_execution_meets_the_same_collector_state() -> None:
    counts: list[tuple[int, int, int]] = []

    async def worker(box: list[int]) -> None:
        box.append(len(box))
        await asyncio.sleep(0)
        box.append(len(box))

    async def main() -> None:
        counts.append(gc.get_count())
        box: list[int] = []
        await asyncio.gather(worker(box), worker(box), worker(box))

    result = runner.explore(main, strategy="random", max_executions=30, seed=7)
    assert result.executions == 30
    young = collector.stock_young_count()
    assert young > 0
    # the first execution warms ChaosSloth's caches: it may allocate a little more in the step
    assert len(set(counts[1:])) == 1, counts
    assert counts[-1][0] >= young and counts[-1][2] == 0, counts


class _Finalized:
    log: ClassVar[list[str]] = []

    def __init__(self, name: str) -> None:
        self.me = self  # a cycle: only the collector frees it
        self.name = name

    def __del__(self) -> None:
        _Finalized.log.append(self.name)


def test_no_execution_finalizes_garbage_of_an_earlier_one() -> None:
    seen: list[list[str]] = []
    serial = iter(range(1_000))

    async def main() -> None:
        n = next(serial)
        seen.append(list(_Finalized.log))
        _Finalized.log.clear()
        junk: Any = [[i] for i in range(5 * gc.get_threshold()[0])]  # collections run here
        del junk
        await asyncio.sleep(0)
        assert not _Finalized.log, _Finalized.log
        _Finalized(f"execution {n}")  # garbage at the very end of the execution

    _Finalized.log.clear()
    result = runner.explore(main, strategy="random", max_executions=5, seed=1)
    assert not result.failed, result.first_failure
    # each execution's garbage is finalized after it ends, before the next one starts
    assert seen[1:] == [[f"execution {n}"] for n in range(4)], seen


HELD_CYCLE = """
import asyncio
import gc
import weakref

FREED = []


class Node:
    pass


async def main():
    a = Node()
    a.children = [a]  # the capture holds this list (lists have no weak references)
    probe = weakref.ref(a)
    del a
    await asyncio.sleep(0)
    gc.collect()
    assert probe() is None, "the cycle through the held list was not collected"
"""


def test_a_cycle_through_a_held_container_is_collectable_in_an_execution(tmp_path: Path) -> None:
    path = tmp_path / "held_cycle.py"
    path.write_text(HELD_CYCLE)
    program = scenario.load_scenario(path, "main")
    result = runner.explore(program.factory, strategy="random", max_executions=3, seed=2)
    assert result.executions == 3 and not result.failed, result.first_failure


def test_settle_reaches_the_target_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    """Whatever the free list of lists holds, settle leaves the young count exactly at the
    target with that free list drained, and no automatic collection runs in it.  The second
    settle of each case starts with that free list empty: every list it makes counts."""
    collections: list[int] = []

    def seen(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            collections.append(info["generation"])

    for target in (1, 2, 3, 4, 29, 150):
        for free in (0, 40, 200):
            monkeypatch.setattr(collector._Stock, "young_count", target)
            counts = []
            gc.freeze()
            try:
                junk = [[] for _ in range(free)]
                del junk  # up to the free list's size goes back to it
                gc.callbacks.append(seen)
                try:
                    first = collector.settle()
                    counts.append(gc.get_count()[0])
                    second = collector.settle()
                    counts.append(gc.get_count()[0])
                finally:
                    gc.callbacks.remove(seen)
                fresh = [[] for _ in range(3)]  # the free list is empty: each one counts
                after = gc.get_count()[0]
            finally:
                gc.unfreeze()
            assert counts == [target, target], (target, free, counts)
            assert collections == [0, 0], (target, free, collections)  # settle's own only
            assert after >= target + 3, (target, free, after)
            collections.clear()
            del first, second, fresh


def test_watched_unfreezes_the_collector_when_the_reset_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from chaossloth.capture import importer

    def broken() -> None:
        raise RuntimeError("reset failed")

    monkeypatch.setattr(importer, "reset_modules", broken)
    before = gc.get_freeze_count()
    with pytest.raises(RuntimeError, match="reset failed"), runner.watched():
        raise AssertionError("the body must not run")
    assert gc.get_freeze_count() == before == 0
    assert runner._ModuleTable.active is None
