"""Failure messages a user reads: a bare `assert` names its source line; tasks are named by
their creation path ("Task main/0 (...)") in deadlock and divergence messages too."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import DEADLOCK_PROGRAM

from chaossloth import runner, scenario, schedule
from chaossloth.errors import NondeterminismError

BARE = """\
import asyncio


class C:
    def __init__(self):
        self.n = 0

    async def bump(self):
        v = self.n
        await asyncio.sleep(0)
        self.n = v + 1


async def main():
    c = C()
    await asyncio.gather(c.bump(), c.bump())
    assert c.n == 2
"""


def _write(tmp_path: Path, name: str, src: str) -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(src))
    return p


def test_bare_assert_in_a_scenario_names_its_line(tmp_path: Path) -> None:
    p = _write(tmp_path, "test_race.py", BARE)
    factory = scenario.load_scenario(p).factory
    r = runner.run_once(factory)
    assert r.failure is not None and r.failure.type_name == "AssertionError"
    assert r.failure.message == "assert c.n == 2 (test_race.py:17)"
    assert r.failure.to_json()["message"] == r.failure.message
    # the replay of the recorded schedule says the same
    again = schedule.replay(schedule.from_execution(r, {"file": str(p)}), factory)
    assert again.failure is not None and again.failure.message == r.failure.message


def test_assert_with_a_message_keeps_it(tmp_path: Path) -> None:
    p = _write(tmp_path, "msg.py", BARE.replace("assert c.n == 2", 'assert c.n == 2, "lost"'))
    r = runner.run_once(scenario.load_scenario(p).factory)
    assert r.failure is not None and r.failure.message == "lost"


def test_bare_assert_in_an_oracle_names_its_line(tmp_path: Path) -> None:
    async def main() -> int:
        return 1

    # compiled from a file of its own: pytest's assertion rewriting would add a message here
    p = _write(tmp_path, "judge.py", "def oracle(value):\n    assert value == 2\n")
    ns: dict[str, object] = {}
    exec(compile(p.read_text(), str(p), "exec"), ns)  # noqa: S102
    r = runner.run_once(main, oracle=ns["oracle"])  # type: ignore[arg-type]
    assert r.failure is not None and r.failure.kind == "oracle"
    assert r.failure.message == "assert value == 2 (judge.py:2)"


def test_exception_message_without_traceback() -> None:
    assert runner.exception_message(ValueError("x")) == "x"
    assert runner.exception_message(ValueError()) == ""
    assert runner.exception_message(AssertionError()).startswith("assertion failed")


PYTEST_FILE = """\
import asyncio

import pytest


class Box:
    def __init__(self):
        self.v = 0

    async def bump(self):
        v = self.v
        await asyncio.sleep(0)
        self.v = v + 1


@pytest.mark.chaossloth(max_executions=50)
async def test_racy():
    b = Box()
    await asyncio.gather(b.bump(), b.bump())
    assert b.v == 2
"""


def test_pytest_plugin_failure_names_the_bare_assert(tmp_path: Path) -> None:
    (tmp_path / "test_user.py").write_text(PYTEST_FILE)
    env = dict(os.environ)
    env.pop("CHAOSSLOTH_DEBUG", None)
    r = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_user.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert r.returncode == 1, r.stdout + r.stderr
    assert "AssertionError: assert b.v == 2 (test_user.py:20)" in r.stdout, r.stdout


AGEN_WAIT = """
import asyncio


async def scenario():
    q = asyncio.Queue()

    async def items():
        while True:
            item = await q.get()  # line 10: where the consumer really waits
            yield item

    async def consume():
        async for x in items():
            return x

    await asyncio.gather(consume(), q.get())
"""


def test_a_wait_inside_an_async_generator_names_the_generators_line(tmp_path: Path) -> None:
    """The consumer's `async for` awaits its generator's asend() (or the capture's proxy of
    it), which exposes nothing of the generator: the site and what the task waits for come from
    the generator's frame, and the tasks left suspended there are closed while the loop is still
    open (no "Event loop is closed" printed when the collector closes them later)."""
    p = _write(tmp_path, "agen.py", AGEN_WAIT)
    args = ["check", str(p), "--scenario", "scenario", "--json", str(tmp_path / "r.json")]
    r = subprocess.run(
        [sys.executable, "-m", "chaossloth", *args],
        check=False,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    assert r.returncode == 1, r.stdout + r.stderr
    assert "Exception ignored" not in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert "suspended at agen.py:10, waiting for Queue.get() on q" in r.stdout, r.stdout
    assert "RecordingFuture" not in r.stdout


DEADLOCK = DEADLOCK_PROGRAM


def test_deadlock_message_names_tasks_by_creation_path(tmp_path: Path) -> None:
    p = _write(tmp_path, "dead.py", DEADLOCK)
    r = runner.run_once(scenario.load_scenario(p).factory)
    assert r.failure is not None and r.failure.kind == "deadlock"
    msg = r.failure.message
    lines = msg.splitlines()
    assert len(lines) == 4, msg  # the headline, then one line per waiting task
    assert lines[1].startswith("  - Task main (main) suspended at ")
    assert any(ln.startswith("  - Task main/0 (Accounts.transfer) suspended at ") for ln in lines)
    assert any(ln.startswith("  - Task main/1 (Accounts.transfer) suspended at ") for ln in lines)
    # gather's children are tasks, named too (not "a Future")
    assert "unfinished: Task main/0 (Accounts.transfer), Task main/1 (Accounts.transfer)" in msg
    assert "Task-" not in msg and "a Future" not in msg
    blocked = r.failure.details["blocked"]
    assert {b["task"] for b in blocked} == {
        "Task main (main)",
        "Task main/0 (Accounts.transfer)",
        "Task main/1 (Accounts.transfer)",
    }
    # each name is the one the schedule's steps use
    step_names = {s.name for s in r.steps}
    assert {b["task"] for b in blocked} <= step_names


def test_divergence_names_enabled_tasks_like_the_schedule() -> None:
    state = {"runs": 0}

    async def work(n: int) -> None:
        for _ in range(n):
            await asyncio.sleep(0)

    async def main() -> None:
        state["runs"] += 1
        if state["runs"] == 1:
            await asyncio.gather(work(1), work(2))
        else:  # the second run creates one task fewer: the replay must diverge
            await asyncio.gather(work(3))

    r = runner.run_once(main)
    first, second = f"Task main/0 ({work.__qualname__})", f"Task main/1 ({work.__qualname__})"
    assert {first, second} <= {s.name for s in r.steps}
    sched = schedule.from_execution(r, {"file": "inline"})
    with pytest.raises(NondeterminismError) as info:
        schedule.replay(sched, main)
    msg = str(info.value)
    assert f"enabled were: {first})" in msg, msg
    assert f"expects {second} to run" in msg, msg
    assert "step main/" not in msg
    d = info.value.divergence  # type: ignore[attr-defined]
    assert d["enabled_names"] == [first]


def test_the_await_chain_goes_through_an_async_generators_asend() -> None:
    """Uninstrumented code: `async for` awaits asyncio's own asend object."""
    from chaossloth import deadlock

    async def main() -> list[str]:
        q: asyncio.Queue[int] = asyncio.Queue()

        async def items():  # type: ignore[no-untyped-def]
            while True:
                yield await q.get()

        async def consume() -> None:
            async for _ in items():
                return

        task = asyncio.ensure_future(consume())
        await asyncio.sleep(0)
        names = [f.f_code.co_name for f in deadlock._coro_frames(task)]
        task.cancel()
        return names

    assert asyncio.run(main()) == ["consume", "items", "get"]
