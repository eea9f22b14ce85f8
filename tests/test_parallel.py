"""``--jobs N`` (parallel.py): a sampling exploration split across worker processes tries the
executions one process tries (the same random streams), finds the failure one process finds
first, keeps the time limit in every worker, and says when a strategy is not split."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chaossloth import parallel, runner, scenario
from chaossloth.config import DEFAULTS
from chaossloth.stages import collapse

pytestmark = pytest.mark.skipif(not parallel.supported(), reason="--jobs needs os.fork")

WALL = 120

REVERSED = """
import asyncio

ORDER = []


async def worker(i):
    for _ in range(3):
        await asyncio.sleep(0)
    ORDER.append(i)


async def main():
    await asyncio.gather(*(worker(i) for i in range(4)))
    assert ORDER != [3, 2, 1, 0], ORDER
"""

SPINS_IN_ONE_ORDER = """
import asyncio

state = {"first": None}


async def worker(i):
    await asyncio.sleep(0)  # the workers start in gather's order; after this yield they float
    if state["first"] is None:
        state["first"] = i


async def main():
    await asyncio.gather(worker(0), worker(1), worker(2))
    if state["first"] == 2:
        while True:  # a step that never returns, in a schedule the default order never takes
            pass
"""


STUBBORN_IN_ONE_ORDER = SPINS_IN_ONE_ORDER.replace(
    """        while True:  # a step that never returns, in a schedule the default order never takes
            pass""",
    """        while True:  # ... and that swallows the watchdog's interrupt
            try:
                while True:
                    pass
            except BaseException:
                pass""",
)


def _program(tmp_path: Path, source: str) -> scenario.Program:
    path = tmp_path / "prog.py"
    path.write_text(source)
    return scenario.load_scenario(path, "main")


def _by_path(result: runner.ExecutionResult) -> list[tuple[int | None, int]]:
    """The schedule as creation paths (actor ids are numbered in the order a process met them)."""
    return [result.actor_paths[a] for a in result.schedule]


@pytest.mark.parametrize("strategy", ["random", "pos", "pct"])
def test_workers_try_the_executions_one_process_tries(tmp_path: Path, strategy: str) -> None:
    program = _program(tmp_path, REVERSED)
    cfg = DEFAULTS.replace(strategy=strategy, max_executions=150, stop_on_failure=False, seed=3)
    one = runner.explore(program.factory, config=cfg)
    three = parallel.explore(program.factory, config=cfg.replace(jobs=3))
    assert three.executions == one.executions == 150
    assert 0 < three.failing_executions == one.failing_executions < 150
    assert sorted(p["shard"] for p in three.phases) == [0, 1, 2]
    assert not three.complete and not three.distinct_traces_exact
    assert three.minimal_failure is not None and three.minimal_failure.failed
    assert three.minimal_failure.deviations == one.minimal_failure.deviations  # type: ignore[union-attr]


def test_the_failure_found_is_the_one_one_process_stops_at(tmp_path: Path) -> None:
    program = _program(tmp_path, REVERSED)
    cfg = DEFAULTS.replace(strategy="random", max_executions=3000, seed=1)
    one = runner.explore(program.factory, config=cfg)
    assert one.first_failure is not None
    for jobs in (2, 3):
        many = parallel.explore(program.factory, config=cfg.replace(jobs=jobs))
        assert many.first_failure is not None
        assert many.first_failure.index == one.first_failure.index
        assert _by_path(many.first_failure) == _by_path(one.first_failure)
        assert many.first_failure.trace is not None  # re-run with its full trace


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run(
        [sys.executable, "-m", "chaossloth", "check", "prog.py", "--scenario", "main",
         "--no-telemetry", "--no-database", *args],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=WALL, check=False,
    )  # fmt: skip


def test_cli_runs_a_sampling_strategy_on_n_processes(tmp_path: Path) -> None:
    (tmp_path / "prog.py").write_text(REVERSED)
    r = _cli(tmp_path, "--strategy", "random", "--jobs", "2", "--max-executions", "3000")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "(random on 2 processes)" in r.stdout and "counted per process" in r.stdout
    assert "FAIL:" in r.stdout, r.stdout
    replay = subprocess.run(
        [sys.executable, "-m", "chaossloth", "replay", ".chaossloth/prog.main.schedule.json"],
        cwd=tmp_path, capture_output=True, text=True, timeout=WALL, check=False,
    )  # fmt: skip
    assert replay.returncode == 1, replay.stdout + replay.stderr  # the failure, every time


def test_cli_says_when_a_strategy_is_not_split(tmp_path: Path) -> None:
    (tmp_path / "prog.py").write_text(REVERSED)
    r = _cli(tmp_path, "--strategy", "fifo", "--jobs", "2")
    assert "--jobs 2: strategy fifo runs in one process" in r.stdout, r.stdout + r.stderr


def test_cli_says_dpor_shares_its_tree(tmp_path: Path) -> None:
    (tmp_path / "prog.py").write_text(REVERSED)
    r = _cli(tmp_path, "--strategy", "dpor", "--jobs", "2")
    assert "--jobs 2: dpor's tree is shared by up to 2 processes" in r.stdout, r.stdout + r.stderr
    assert "FAIL:" in r.stdout, r.stdout


@pytest.mark.parametrize("value", ["0", "-1", "100000", "two"])
def test_cli_refuses_a_bad_number_of_jobs(tmp_path: Path, value: str) -> None:
    (tmp_path / "prog.py").write_text(REVERSED)
    r = _cli(tmp_path, "--jobs", value)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "jobs" in r.stderr.strip().splitlines()[-1] and "Traceback" not in r.stderr, r.stderr


def test_the_time_limit_holds_in_every_worker(tmp_path: Path) -> None:
    (tmp_path / "prog.py").write_text(SPINS_IN_ONE_ORDER)
    started = time.monotonic()
    one = _cli(tmp_path, "--strategy", "random", "--time-limit", "1")
    many = _cli(tmp_path, "--strategy", "random", "--time-limit", "1", "--jobs", "2")
    assert time.monotonic() - started < WALL
    assert many.returncode == one.returncode, (one.stdout + one.stderr, many.stdout + many.stderr)
    assert "Traceback" not in many.stderr, many.stderr


def test_auto_runs_its_pct_phase_on_the_workers(tmp_path: Path) -> None:
    program = _program(tmp_path, REVERSED)
    cfg = DEFAULTS.replace(strategy="auto", max_executions=40, stop_on_failure=False, jobs=2)
    result = runner.explore(program.factory, config=cfg)
    dpor, *pct = result.phases
    assert dpor["strategy"] == "dpor" and "shard" not in dpor
    assert [p["strategy"] for p in pct] == ["pct", "pct"]
    assert sorted(p["shard"] for p in pct) == [0, 1]
    assert result.executions == 40 and not result.distinct_traces_exact


PLUGIN_TEST = """
import asyncio

import pytest

ORDER = []


async def worker(i):
    for _ in range(3):
        await asyncio.sleep(0)
    ORDER.append(i)


@pytest.mark.chaossloth(strategy="random", jobs=2, max_executions=3000)
async def test_reversed():
    ORDER.clear()
    await asyncio.gather(*(worker(i) for i in range(4)))
    assert ORDER != [3, 2, 1, 0], ORDER
"""


def test_the_pytest_marker_takes_jobs(tmp_path: Path) -> None:
    (tmp_path / "test_user.py").write_text(PLUGIN_TEST)
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_user.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=WALL, check=False,
    )  # fmt: skip
    out = r.stdout + r.stderr
    assert r.returncode == 1 and "1 failed" in out, out
    assert "FAILED (" in out and "chaossloth replay" in out, out


def test_a_worker_that_dies_without_its_report_stops_the_run(tmp_path: Path) -> None:
    """The watchdog ends a worker whose step swallows the interrupt (exit 2, its one line):
    the run must not go on with that worker's executions missing."""
    assert STUBBORN_IN_ONE_ORDER != SPINS_IN_ONE_ORDER
    (tmp_path / "prog.py").write_text(STUBBORN_IN_ONE_ORDER)
    r = _cli(tmp_path, "--strategy", "random", "--time-limit", "1", "--jobs", "2")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "did not stop when interrupted" in r.stderr, r.stderr
    assert "ended without its report (exit status 2)" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and "PASS" not in r.stdout, r.stdout + r.stderr


def test_stage_3_says_which_kind_of_distinct_trace_count_it_has() -> None:
    def said(exact: bool, estimated: bool) -> str:
        ex = runner.ExplorationResult(strategy="random", seed=0, distinct_traces=7)
        ex.distinct_traces_exact = exact
        return collapse._distinct_traces_said(ex, estimated)

    assert said(True, False) == "7 distinct traces"
    assert said(True, True) == "about 7 distinct traces (estimated past 65,536)"
    assert said(False, False) == "at least 7 distinct traces (counted per process)"
    assert said(False, True) == "at least about 7 distinct traces (counted per process)"
