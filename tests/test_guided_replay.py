"""Guided replay (``runner.run_once(..., guided=True)``, engine/strategy_guided.c): a recorded
schedule replayed as a guide on a program that may no longer follow it (stage 7 replays a
program's failing schedule on the program with locks added).  It follows the schedule where it
can, takes the schedule's next enabled step where the prescribed one is blocked or missing, the
default order's step where nothing of the schedule is enabled, and never diverges."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from chaossloth import _core, runner, scenario
from chaossloth.errors import NondeterminismError

# Two scenarios with the same task creation order: main creates the same two tasks through
# gather; only the increment differs (the second holds a lock across its read-await-write).
# The pauses make the default order pass: losing the update takes a schedule off it.
PROGRAM = """\
import asyncio

class Counter:
    def __init__(self):
        self.value = 0

    async def incr(self, pause):
        for _ in range(pause):
            await asyncio.sleep(0)
        v = self.value
        await asyncio.sleep(0)
        self.value = v + 1

class LockedCounter:
    def __init__(self):
        self.value = 0
        self.lock = asyncio.Lock()

    async def incr(self, pause):
        for _ in range(pause):
            await asyncio.sleep(0)
        async with self.lock:
            v = self.value
            await asyncio.sleep(0)
            self.value = v + 1

async def racy():
    c = Counter()
    await asyncio.gather(c.incr(0), c.incr(2))
    return c.value

async def locked():
    c = LockedCounter()
    await asyncio.gather(c.incr(0), c.incr(2))
    return c.value
"""


def _two(value: object) -> str | None:
    """The oracle: both increments are in the final value."""
    return None if value == 2 else f"lost update: value is {value}"


@pytest.fixture
def programs(tmp_path: Path) -> tuple[scenario.Program, scenario.Program]:
    p = tmp_path / "counters.py"
    p.write_text(textwrap.dedent(PROGRAM))
    return scenario.load_scenario(p, "racy"), scenario.load_scenario(p, "locked")


@pytest.fixture
def failing(programs: tuple[scenario.Program, scenario.Program]) -> runner.ExecutionResult:
    """The racy program's minimal failing schedule, found by DPOR."""
    racy, _ = programs
    res = runner.explore(racy.factory, oracle=_two, strategy="dpor")
    assert res.minimal_failure is not None, "the racy program must fail under some schedule"
    best = res.minimal_failure
    assert best.failure is not None and "lost update: value is 1" in best.failure.message
    return best


# ------------------------------------------------------------ (a) a schedule the program follows


def test_guided_equals_replay_on_a_schedule_the_program_follows(
    programs: tuple[scenario.Program, scenario.Program], failing: runner.ExecutionResult
) -> None:
    racy, _ = programs
    fifo = runner.run_once(racy.factory, oracle=_two)
    assert fifo.outcome == runner.OK and fifo.schedule != failing.schedule
    for rec in (failing, fifo):
        kw = {"schedule": rec.schedule, "actor_paths": rec.actor_paths, "oracle": _two}
        replayed = runner.run_once(racy.factory, **kw)
        guided = runner.run_once(racy.factory, guided=True, **kw)
        assert guided.strategy == "guided" and replayed.strategy == "replay"
        assert guided.schedule == replayed.schedule == rec.schedule
        assert guided.guide_deviations == 0 == replayed.guide_deviations
        assert guided.outcome == replayed.outcome == rec.outcome
        assert guided.value == replayed.value == rec.value
        assert guided.deviations == rec.deviations  # choices off the default order: the same
    # the failing one stays failing under guidance
    again = runner.run_once(
        racy.factory,
        schedule=failing.schedule,
        actor_paths=failing.actor_paths,
        oracle=_two,
        guided=True,
    )
    assert again.failed and again.failure is not None
    assert again.failure.message == failing.failure.message  # type: ignore[union-attr]


# ------------------------------------------------------------ (b) the failing schedule, locked


def test_guided_replay_of_the_failing_schedule_on_the_locked_program_passes(
    programs: tuple[scenario.Program, scenario.Program], failing: runner.ExecutionResult
) -> None:
    _, locked = programs
    kw = {"schedule": failing.schedule, "actor_paths": failing.actor_paths, "oracle": _two}
    # Replay proper cannot follow it: the lock blocks the second task where the schedule runs it.
    with pytest.raises(NondeterminismError, match="diverged"):
        runner.run_once(locked.factory, **kw)
    guided = runner.run_once(locked.factory, guided=True, **kw)
    assert guided.outcome == runner.OK, guided.failure
    assert guided.value == 2
    assert guided.divergence is None
    assert guided.guide_deviations > 0
    assert guided.schedule != failing.schedule
    # it was guided: the schedule's first steps, up to where the lock intervenes, are followed
    assert guided.schedule[:2] == failing.schedule[:2]
    # every step the failing schedule's actors took is an actor of the guided run too
    assert set(failing.schedule) <= set(guided.schedule)


def _follow(sched: list[int], ran: list[int]) -> tuple[int, int]:
    """The engine's bookkeeping replayed over a guided run's steps `ran`: (deviations, blocked),
    where a step is a deviation when its actor is not the one at the cursor (the schedule's
    first unused entry), and blocked when, besides, the cursor's actor runs later in the run
    (guided takes the cursor's entry whenever its actor is enabled: it was not)."""
    used, cursor, deviations, blocked = [False] * len(sched), 0, 0, 0
    for i, actor in enumerate(ran):
        if cursor >= len(sched) or sched[cursor] != actor:
            deviations += 1
            blocked += cursor < len(sched) and sched[cursor] in ran[i + 1 :]
        for j in range(cursor, len(sched)):
            if not used[j] and sched[j] == actor:
                used[j] = True
                break
        while cursor < len(sched) and used[cursor]:
            cursor += 1
    return deviations, blocked


def test_guide_deviations_count_the_steps_off_the_schedule(
    programs: tuple[scenario.Program, scenario.Program], failing: runner.ExecutionResult
) -> None:
    _, locked = programs
    guided = runner.run_once(
        locked.factory,
        schedule=failing.schedule,
        actor_paths=failing.actor_paths,
        guided=True,
    )
    deviations, _ = _follow(failing.schedule, guided.schedule)
    assert guided.guide_deviations == deviations > 0


def test_every_failing_schedule_guided_on_the_locked_program_passes(
    programs: tuple[scenario.Program, scenario.Program],
) -> None:
    """All the racy program's failing schedules (brute force), each replayed as a guide on the
    locked program: each passes, and in some of them the lock blocks the task the schedule runs
    next, so the schedule's next enabled task runs in its place."""
    racy, locked = programs
    failures: list[runner.ExecutionResult] = []
    res = runner.explore(
        racy.factory,
        oracle=_two,
        strategy="exhaustive",
        stop_on_failure=False,
        detail_failure=False,
        on_execution=lambda r: failures.append(r) if r.failed else None,
    )
    assert res.complete and len(failures) > 1
    blocked_somewhere = 0
    for f in failures:
        guided = runner.run_once(
            locked.factory,
            schedule=f.schedule,
            actor_paths=f.actor_paths,
            oracle=_two,
            guided=True,
        )
        assert guided.outcome == runner.OK and guided.value == 2, (f.schedule, guided.failure)
        deviations, blocked = _follow(f.schedule, guided.schedule)
        assert guided.guide_deviations == deviations > 0
        blocked_somewhere += blocked > 0
    assert blocked_somewhere > 0


# ------------------------------------------------------------ (c) actors that do not exist


def test_guided_replay_runs_a_schedule_with_unknown_actors_to_completion(
    programs: tuple[scenario.Program, scenario.Program], failing: runner.ExecutionResult
) -> None:
    racy, _ = programs
    paths = list(failing.actor_paths)
    # an actor with a creation path the program never takes, and ids past the table
    ghost = len(paths)
    paths.append((0, 999))
    at = 2
    sched = [*failing.schedule[:at], ghost, ghost + 1, 10_000, *failing.schedule[at:]]
    kw = {"schedule": sched, "actor_paths": paths, "oracle": _two}
    with pytest.raises(NondeterminismError):
        runner.run_once(racy.factory, **kw)
    guided = runner.run_once(racy.factory, guided=True, **kw)
    # the unknown entries are skipped; everything else is followed, so the failure is found again
    assert guided.schedule == failing.schedule
    assert guided.failed and guided.failure is not None
    assert guided.failure.message == failing.failure.message  # type: ignore[union-attr]
    # the first unknown entry stays unused, so the cursor stays on it from step `at` on
    assert guided.guide_deviations == len(failing.schedule) - at


def test_guided_replay_of_only_unknown_actors_is_the_default_order(
    programs: tuple[scenario.Program, scenario.Program],
) -> None:
    racy, _ = programs
    fifo = runner.run_once(racy.factory, oracle=_two)
    guided = runner.run_once(
        racy.factory, schedule=[500, 501], actor_paths=fifo.actor_paths, guided=True
    )
    assert guided.schedule == fifo.schedule
    assert guided.outcome == runner.OK and guided.value == 2
    assert guided.guide_deviations == len(fifo.schedule)


# ------------------------------------------------------------ the API's edges


def test_guided_needs_a_schedule(programs: tuple[scenario.Program, scenario.Program]) -> None:
    racy, _ = programs
    with pytest.raises(ValueError, match="needs a schedule"):
        runner.run_once(racy.factory, guided=True)
    with pytest.raises(ValueError, match="'guided' needs replay"):
        _core.Explorer("guided")
    assert "guided" in _core.STRATEGIES
    assert _core.Explorer("guided", replay=[]).strategy == "guided"


def test_other_runs_report_no_guide_deviations(
    programs: tuple[scenario.Program, scenario.Program], failing: runner.ExecutionResult
) -> None:
    racy, _ = programs
    assert failing.guide_deviations == 0
    assert runner.run_once(racy.factory, strategy="random", seed=3).guide_deviations == 0
