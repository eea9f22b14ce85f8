"""Budgets hold in every stage (issue 37, item 4): --time-limit, --max-steps and the pytest
plugin's budget stop capture (stage 1) and the alphabet (stage 2) too, and the message says
which budget stopped the run and why it ran so long: a step that never awaits, a loop, or a
long workload (with the figure to raise).  The CLI cases run the real command in a subprocess,
as tests/test_hostile_programs.py does; no assertion here is about timing beyond a generous
sanity bound (the wall times are measured by hand: see the issue)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from chaossloth import _core, runner
from chaossloth.errors import InputError
from chaossloth.runner import Step
from chaossloth.stages import alphabet, capture

#: the sanity bound of one CLI run (seconds); the budgets under test are 10 s at most
WALL = 60

#: 10,000 tasks that each await once: 30,003 steps in the default order, all of which await
#: or end (a long workload, which ends)
MANY = """
import asyncio

class C:
    def __init__(self):
        self.n = 0

    async def inc(self):
        await asyncio.sleep(0)
        self.n += 1

async def scenario():
    c = C()
    await asyncio.gather(*(c.inc() for _ in range(10000)))
    assert c.n == 10000
"""

#: a step that never awaits
SPIN = """
import asyncio

async def scenario():
    while True:
        pass
"""

#: a loop that awaits and never ends
POLL = """
import asyncio

async def scenario():
    while True:
        await asyncio.sleep(0)
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("CHAOSSLOTH_DEBUG", None)
    return env


def run_cli(tmp_path: Path, name: str, source: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m chaossloth check name args` in tmp_path on `source`, within the sanity bound."""
    (tmp_path / name).write_text(textwrap.dedent(source), encoding="utf-8")
    started = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-m", "chaossloth", "check", name, *args],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=WALL * 2,
        check=False,
    )
    assert time.monotonic() - started < WALL, r.stdout + r.stderr
    return r


def first_error_line(r: subprocess.CompletedProcess[str]) -> str:
    lines = r.stderr.strip().splitlines()
    assert lines, r.stdout
    assert "Traceback" not in r.stderr, r.stderr
    return lines[0]


# ------------------------------------------------------------------ the CLI, end to end


def test_a_long_workload_stops_at_the_default_time_limit_and_says_it_is_long(
    tmp_path: Path,
) -> None:
    """A workload whose default order outlasts the default budget (30,000 gathered tasks, 90,003
    steps): capture ends at the time limit, which is named, and the steps are said to await
    (not "a step that never awaits?")."""
    many = MANY.replace("10000", "30000")
    r = run_cli(tmp_path, "many.py", many, "--max-steps", "200000")
    assert r.returncode == 2, r.stdout + r.stderr
    assert r.stdout.splitlines()[0].startswith("[1/8] Capture"), r.stdout
    assert r.stdout.splitlines()[0].endswith(" stopped"), r.stdout
    line = first_error_line(r)
    assert line.startswith(
        "chaossloth: error: capture (stage 1) ran past the time limit of 10s, counted from the "
        "command's start, and was stopped at its step "
    ), line
    assert line.endswith(
        ", its steps still awaiting one after another: the workload is long, not stuck; raise "
        "--time-limit for it to finish, or shrink it"
    ), line
    assert "never awaits" not in line and "never terminates" not in line, line


def test_a_cpu_spin_stops_at_the_time_limit(tmp_path: Path) -> None:
    r = run_cli(tmp_path, "spin.py", SPIN, "--time-limit", "3")
    assert r.returncode == 2, r.stdout + r.stderr
    line = first_error_line(r)
    assert line.startswith(
        "chaossloth: error: capture (stage 1) ran past the time limit of 3s, counted from the "
        "command's start, and was stopped: its step 1 had run for "
    ), line
    assert line.endswith(
        "s without awaiting (a loop that never awaits?); raise --time-limit if it needs longer"
    ), line


def test_ten_thousand_tasks_at_the_step_budget_are_long_not_endless(tmp_path: Path) -> None:
    """At --max-steps the steps are spread over the tasks, one each: a long workload, with
    the figure to raise, never "never terminates"."""
    r = run_cli(tmp_path, "many.py", MANY, "--max-steps", "300", "--time-limit", "60")
    assert r.returncode == 2, r.stdout + r.stderr
    line = first_error_line(r)
    assert line == (
        "chaossloth: error: the workload is long: in the default (stock asyncio) order it is "
        "still running after 300 steps (the step budget), spread over 300 tasks and callbacks, "
        "none taking more than 1 of them; raise --max-steps for it to finish, or shrink it"
    ), line


def test_a_loop_that_awaits_at_the_step_budget_is_said_to_loop(tmp_path: Path) -> None:
    r = run_cli(tmp_path, "poll.py", POLL, "--max-steps", "2000")
    assert r.returncode == 2, r.stdout + r.stderr
    line = first_error_line(r)
    assert line == (
        "chaossloth: error: the workload never terminates, or is longer than the step budget: "
        "in the default (stock asyncio) order it is still running after 2,000 steps, 2,000 of "
        "them by Task main (scenario) (a loop that awaits); raise --max-steps if it is merely "
        "long"
    ), line


def test_a_workload_within_its_budgets_passes(tmp_path: Path) -> None:
    r = run_cli(
        tmp_path,
        "few.py",
        MANY.replace("10000", "100"),
        "--max-steps",
        "100000",
        "--max-executions",
        "3",
        "--no-telemetry",
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines()[0].startswith("[1/8] Capture"), r.stdout
    assert "303 events" in r.stdout, r.stdout
    assert r.stderr == "", r.stderr


# ------------------------------------------------------------------ the pytest plugin

PLUGIN_TESTS = """
import asyncio

import pytest


@pytest.mark.chaossloth(time_limit=2)
async def test_spin():
    while True:
        pass


class C:
    def __init__(self):
        self.n = 0

    async def inc(self):
        await asyncio.sleep(0)
        self.n += 1


@pytest.mark.chaossloth(time_limit=2, max_steps=100000)
async def test_many():
    c = C()
    await asyncio.gather(*(c.inc() for _ in range(10000)))
"""


def test_the_plugin_budget_holds_in_capture(tmp_path: Path) -> None:
    """The plugin arms the time limit itself (no command does): a test whose default order
    outlasts its budget fails with the CLI's message instead of hanging in stage 1."""
    (tmp_path / "test_budgets_here.py").write_text(PLUGIN_TESTS, encoding="utf-8")
    started = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_budgets_here.py"],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=WALL * 2,
        check=False,
    )
    assert time.monotonic() - started < WALL, r.stdout + r.stderr
    out = r.stdout
    assert r.returncode == 1, out + r.stderr
    assert "2 failed" in out, out
    assert (
        "ChaosSloth cannot explore test_spin: capture (stage 1) ran past the time limit of 2s, "
        "counted from the run's start, and was stopped: its step 1 had run for"
    ) in out, out
    assert (
        "ChaosSloth cannot explore test_many: capture (stage 1) ran past the time limit of 2s"
    ) in out, out
    assert "the workload is long, not stuck" in out, out


# ------------------------------------------------------------------ the stages' own checks


def test_capture_does_not_start_a_second_run_that_cannot_fit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What is left of the budget is less than half the first default-order run took: the
    stage says so (the figure to raise) and stops before the determinism check's run."""
    runs: list[bool] = []

    def run_once(ctx: Any, *, detailed: bool) -> Any:
        runs.append(detailed)
        time.sleep(1.2)  # the check reads the clock: this run takes at least 1.2 s
        return types.SimpleNamespace(failure=None, steps=[Step(0, "Task main (scenario)")])

    monkeypatch.setattr(capture, "run_once", run_once)
    ctx = types.SimpleNamespace(config=types.SimpleNamespace(max_steps=10000), printer=None)
    with runner.run_budget(1.5), pytest.raises(InputError) as err:
        capture.Capture().run(ctx)  # type: ignore[arg-type]
    assert runs == [True]
    message = str(err.value)
    assert message.startswith(
        "capture (stage 1) would run past the time limit of 1.5s, counted from the run's start: "
        "the default-order run took 1."
    ), message
    assert "the workload is long: raise --time-limit to " in message, message


def test_the_step_budget_message_reads_the_steps() -> None:
    spread = [Step(a, f"Task main/{a} (inc)") for a in range(50)]
    assert capture.step_budget_message(spread).startswith("the workload is long: ")
    looping = [Step(a % 3, f"Task main/{a % 3} (poll)") for a in range(50)]
    assert capture.step_budget_message(looping).startswith(
        "the workload never terminates, or is longer than the step budget: "
    )


class _Ev(NamedTuple):
    actor: int
    accesses: list[tuple[int, int, int, int]]


def _trace(n: int) -> list[_Ev]:
    write = int(_core.WRITE)
    return [
        _Ev(i % 4, [(1, i % 3, write, 0), (2, int(_core.KEY_WHOLE), write, 0)]) for i in range(n)
    ]


def test_the_alphabet_stops_at_its_deadline() -> None:
    trace = _trace(40)
    full = alphabet.count(trace)
    assert "counted" not in full
    assert alphabet.count(trace, deadline=time.monotonic() + 3600) == full
    late = alphabet.count(trace, deadline=time.monotonic() - 1)
    assert late["counted"] == 0 and late["events"] == 40 and late["dependent_pairs"] == 0


def test_a_partial_alphabet_is_a_lower_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    trace = _trace(40)
    full = alphabet.count(trace)
    ticks = iter(range(10**6))
    # one tick per look at the clock: 40 in the first pass, then 15 steps of the second
    monkeypatch.setattr(alphabet, "time", types.SimpleNamespace(monotonic=lambda: next(ticks)))
    part = alphabet.count(trace, deadline=55)
    assert part["counted"] == 15
    assert 0 < part["dependent_pairs"] <= full["dependent_pairs"]
