"""``--jobs N`` with dpor: the wakeup tree shared by forked processes (share.py,
engine/strategy_dpor.c "sharing the tree").

The property is the one the single-process explorer is held to: the outcomes reached are
exactly brute force's, and ``complete`` is claimed only when they are.  Each execution's outcome
is appended to a file by the process that ran it (``on_execution`` runs there), so the set seen
is every process's.  Programs: the branching generator of test_soundness_branching (steps whose
accesses depend on what they read), the asyncio-primitive workloads of bench/dpor_asyncio.py
plus a lock and a bounded queue, and the seed workload through the CLI.
"""

from __future__ import annotations

import json
import os
import random
import tempfile
from pathlib import Path
from typing import Any

import grammar_programs as grammar
import pytest
import test_soundness_branching as branching
from conftest import SEED_WORKLOAD, cli
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from test_soundness_grammar import CATALOGUE, SETTINGS

from chaossloth import runner, scenario
from chaossloth.config import Config

ROOT = Path(__file__).resolve().parent.parent
SEED = ROOT / "tests" / "targets" / "test_multi_resource.py"
PROGRAMS = int(os.environ.get("CHAOSSLOTH_SHARE_PROGRAMS", "40"))
PROGRAM_SEED = int(os.environ.get("CHAOSSLOTH_SHARE_SEED", "11"))

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="--jobs needs os.fork")


@pytest.fixture(autouse=True)
def share_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small programs share their trees too (a process gives a branch from its first
    execution on, not after share.GIVE_AFTER)."""
    monkeypatch.setenv("CHAOSSLOTH_SHARE_AFTER", "0")


def outcomes(
    factory_of: Any, observe: Any, strategy: str, jobs: int, **options: Any
) -> tuple[set[str], runner.ExplorationResult]:
    """(every outcome reached, the result): `factory_of(holder)` makes the factory, and
    `observe(r, holder)` the outcome of execution r, written as a line by whichever process
    ran it."""
    fd, name = tempfile.mkstemp(prefix="chaossloth-share-", suffix=".txt")
    os.close(fd)
    holder: list[Any] = [None]

    def on_execution(r: runner.ExecutionResult) -> None:
        if r.outcome == runner.ABORTED:
            return
        with open(name, "a", encoding="utf-8") as f:
            f.write(repr(observe(r, holder[0])) + "\n")

    try:
        res = runner.explore(
            factory_of(holder),
            strategy=strategy,
            stop_on_failure=False,
            detail_failure=False,
            on_execution=on_execution,
            max_steps=2000,
            jobs=jobs,
            **options,
        )
        with open(name, encoding="utf-8") as f:
            seen = {line.strip() for line in f if line.strip()}
    finally:
        os.unlink(name)
    return seen, res


def branching_factory(main: Any) -> Any:
    def make(holder: list[Any]) -> Any:
        def factory() -> Any:
            holder[0] = {}
            return main(holder[0])

        return factory

    return make


def branching_outcome(r: runner.ExecutionResult, box: dict[str, Any]) -> Any:
    return [r.outcome, sorted(vars(box["s"]).items()), box["seen"]]


@pytest.mark.parametrize("name", sorted(CATALOGUE))
def test_grammar_catalogue_reaches_brute_forces_outcomes(name: str) -> None:
    module = grammar.load_instrumented(CATALOGUE[name])
    make = lambda holder: module.main
    observe = lambda r, holder: grammar.outcome_of(r)
    brute, brute_res = outcomes(make, observe, "exhaustive", 1, max_executions=5000)
    assert brute_res.complete
    got, res = outcomes(make, observe, "dpor", 2, max_executions=5000)
    assert res.complete
    assert got == brute


@pytest.mark.parametrize("focus", [*grammar.CLASSES, "mixed"])
@settings(SETTINGS, max_examples=3)
@given(data=st.data())
def test_generated_grammar_programs_reach_brute_forces_outcomes(focus: str, data: Any) -> None:
    prog = data.draw(grammar.programs(focus))
    module = grammar.load_instrumented(prog)
    make = lambda holder: module.main
    observe = lambda r, holder: grammar.outcome_of(r)
    brute, brute_res = outcomes(make, observe, "exhaustive", 1, max_executions=1500)
    assume(brute_res.complete)
    got, res = outcomes(make, observe, "dpor", 2, max_executions=1500)
    assert res.complete and got == brute, prog.describe()


def test_generated_branching_programs_reach_brute_forces_outcomes() -> None:
    rng = random.Random(PROGRAM_SEED)
    progs = [branching.random_program(rng) for _ in range(PROGRAMS)]
    module = branching.load(progs)
    forked = 0
    for i, prog in enumerate(progs):
        make = branching_factory(getattr(module, f"m{i}"))
        brute, brute_res = outcomes(make, branching_outcome, "exhaustive", 1)
        assert brute_res.complete, branching.render("main", prog)
        for jobs in (2, 3):
            got, res = outcomes(make, branching_outcome, "dpor", jobs)
            assert res.complete, branching.render("main", prog)
            assert got == brute, f"--jobs {jobs}:\n" + (branching.mismatch(prog, brute, got) or "")
            forked += res.phases[-1].get("processes_forked", 0)
    assert forked > 0  # the programs did share their trees


PRIMITIVES = (ROOT / "bench" / "dpor_asyncio.py").read_text().split('PROGRAMS = """\\\n')[1]
PRIMITIVES = (
    PRIMITIVES.split('"""')[0]
    + """

async def lock_job(s, lock, k):
    async with lock:
        x = s.n
        await asyncio.sleep(0)
        s.n = x + k


async def locks():
    s = Shared()
    lock = asyncio.Lock()
    await asyncio.gather(*[lock_job(s, lock, k) for k in (1, 2, 3)])
    assert s.n == 6


async def bounded_put(q, s, k):
    await q.put(k)
    s.items.append(k)


async def bounded_get(q, s):
    s.items.append(-await q.get())


async def bounded():
    s = Shared()
    q = asyncio.Queue(1)
    await asyncio.gather(bounded_put(q, s, 1), bounded_put(q, s, 2), bounded_get(q, s),
                         bounded_get(q, s))
"""
)


@pytest.fixture(scope="module")
def primitives(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("share") / "primitive_programs.py"
    path.write_text(PRIMITIVES)
    return path


def scenario_outcome(r: runner.ExecutionResult, holder: Any) -> Any:
    f = r.failure
    return [r.outcome, f.type_name if f else None, repr(r.value)]


@pytest.mark.parametrize(
    "name", ["semaphore", "pipeline", "event", "condition", "awaiters", "locks", "bounded"]
)
def test_primitive_workloads_reach_brute_forces_outcomes(primitives: Path, name: str) -> None:
    program = scenario.load(str(primitives), Config(scenario=name))
    try:
        make = lambda holder: program.factory
        budget = {"max_executions": 30000}
        brute, brute_res = outcomes(make, scenario_outcome, "exhaustive", 1, **budget)
        one, one_res = outcomes(make, scenario_outcome, "dpor", 1)
        got, res = outcomes(make, scenario_outcome, "dpor", 2)
    finally:
        program.release()
    assert one_res.complete and res.complete
    assert got == one
    if brute_res.complete:
        assert got == brute
    else:  # the semaphore's schedules are too many to enumerate: what they reach is in both
        assert brute <= got
    # the shared tree costs some executions (branches given before the races that would
    # have pruned them), not many
    assert res.executions <= 2 * one_res.executions + 10


def test_the_schedule_log_holds_every_processs_executions(primitives: Path) -> None:
    """The sentinel's log of what dpor ran (runner.ScheduleLog) gets the schedules the other
    processes ran too, in this process's actor ids: each one replays here."""
    program = scenario.load(str(primitives), Config(scenario="semaphore"))
    try:
        log = runner.ScheduleLog()
        paths: list[Any] = []
        res = runner.explore(
            program.factory,
            strategy="dpor",
            jobs=2,
            stop_on_failure=False,
            schedule_log=log,
            on_execution=lambda r: paths.append(r.actor_paths),
        )
        assert res.complete and res.phases[-1]["processes_forked"] > 0
        assert log.count == res.executions > len(paths) and log.truncated == 0
        table = max(paths, key=len)
        logged = list(log)
        # the schedules run in this process are in the log, and so are the others'
        assert len(set(map(tuple, logged))) > len(paths) // 2
        for sched in logged[-20:] + logged[:5]:
            # guided: a sleep-blocked execution's schedule is the prefix it ran
            again = runner.run_once(program.factory, schedule=sched, actor_paths=table, guided=True)
            assert again.schedule[: len(sched)] == sched
    finally:
        program.release()


def test_a_takers_log_keeps_the_room_its_giver_had_left() -> None:
    log = runner.ScheduleLog(max_entries=10)
    log.add_schedule([0, 1, 2, 3])
    log.restart()
    assert (log.count, log.entries, log.max_entries, list(log)) == (0, 0, 6, [])
    taker = runner.ScheduleLog(max_entries=6)
    taker.add_schedule([0, 2, 1])
    taker.add_schedule([0, 2, 2, 1, 1, 1, 1])  # over the room left: counted, not kept
    mine = runner.ScheduleLog(max_entries=10)
    mine.merge(taker, [0, 5, 7])
    assert list(mine) == [[0, 7, 5]] and mine.truncated == 1


def test_budget_holds_across_processes(primitives: Path) -> None:
    program = scenario.load(str(primitives), Config(scenario="semaphore"))
    try:
        res = runner.explore(
            program.factory, strategy="dpor", jobs=2, max_executions=200, stop_on_failure=False
        )
    finally:
        program.release()
    assert not res.complete and res.budget_hit
    # every process checks the shared count before it begins an execution
    assert 200 <= res.executions <= 200 + 1


def test_a_failure_found_by_any_process_is_reported_and_replays(primitives: Path) -> None:
    src = (
        PRIMITIVES
        + """

async def lost_update_job(s):
    x = s.n
    await asyncio.sleep(0)
    s.n = x + 1


async def lost_update():
    s = Shared()
    await asyncio.gather(*[lost_update_job(s) for _ in range(4)])
    assert s.n == 4
"""
    )
    path = primitives.parent / "lost_update.py"
    path.write_text(src)
    program = scenario.load(str(path), Config(scenario="lost_update"))
    try:
        for stop in (True, False):
            res = runner.explore(program.factory, strategy="dpor", jobs=2, stop_on_failure=stop)
            assert res.failed and res.complete is (not stop)
            best = res.minimal_failure
            assert best is not None and best.failure is not None
            again = runner.run_once(
                program.factory, schedule=best.schedule, actor_paths=best.actor_paths
            )
            assert again.failed
    finally:
        program.release()


def test_cli_check_with_jobs_finds_the_seed_bug_and_proves_the_fix(tmp_path: Path) -> None:
    common = [*SEED_WORKLOAD, "--strategy", "dpor", "--jobs", "2", "--no-telemetry"]
    common += ["--no-database"]
    out = cli("check", str(SEED), *common, "--json", str(tmp_path / "r.json"), cwd=tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "--jobs 2: dpor's tree is shared by up to 2 processes" in out.stdout, out.stdout
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["replay_reproduces"] is True
    fixed = cli("fix", str(SEED), *common, cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "complete" in fixed.stdout, fixed.stdout


def test_a_bad_share_after_is_an_input_error(
    primitives: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from chaossloth.errors import InputError

    monkeypatch.setenv("CHAOSSLOTH_SHARE_AFTER", "soon")
    program = scenario.load(str(primitives), Config(scenario="event"))
    try:
        with pytest.raises(InputError, match="CHAOSSLOTH_SHARE_AFTER"):
            runner.explore(program.factory, strategy="dpor", jobs=2)
    finally:
        program.release()


def test_without_processes_to_fork_one_process_explores_it_all(
    primitives: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_fork() -> int:
        raise BlockingIOError("Resource temporarily unavailable")

    monkeypatch.setattr(os, "fork", no_fork)
    program = scenario.load(str(primitives), Config(scenario="condition"))
    try:
        res = runner.explore(program.factory, strategy="dpor", jobs=2, stop_on_failure=False)
    finally:
        program.release()
    assert res.complete and res.executions == 10
    assert res.phases[-1]["processes_forked"] == 0


def test_cli_says_how_many_branches_other_processes_explored(tmp_path: Path) -> None:
    args = [*SEED_WORKLOAD, "--tasks", "4", "--strategy", "dpor", "--jobs", "2"]
    args += ["--no-stop-on-failure", "--no-telemetry", "--no-database"]
    out = cli("check", str(SEED), *args, cwd=tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "branches explored by other processes" in out.stdout, out.stdout
    assert "complete: every schedule covered" in out.stdout, out.stdout
