"""An exception a callback raises is part of the verdict.

asyncio hands an exception raised by a callback (call_soon, a future's done-callback) to the
loop's exception handler, which logs it, and goes on.  A callback that raised before it
completed the future a task awaits leaves the task waiting forever: the report said only
"waits for a future that nothing completes" (a lost wake-up) and never named the exception
(async-lru 2.0.2's done-callback KeyError, issue #480, left its callers hanging so).  The
deadlock's message now says which callback raised what, where; a callback's exception with no
deadlock after it fails the schedule as an exception of that callback (an exception the program
hands `loop.call_exception_handler` itself is a log line, as on a stock loop).  The same holds for a
task that died with an exception nobody retrieved before the others waited forever (strawberry
0.142.1's batch task, killed by set_result on a cancelled future): the deadlock names the task,
its exception and the line it raised at, and the finding lists that line ("raised").
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HANGS = """
import asyncio


async def scenario():
    loop = asyncio.get_running_loop()
    fut = loop.create_future()

    def complete():
        table = {}
        table["missing"]
        fut.set_result(1)

    loop.call_soon(complete)
    assert await fut == 1
"""

RAISES = """
import asyncio


async def scenario():
    def log_it():
        raise ValueError("bad frame")

    asyncio.get_running_loop().call_soon(log_it)
    await asyncio.sleep(0)
"""


DIES = """
import asyncio


async def scenario():
    loop = asyncio.get_running_loop()
    a, b = loop.create_future(), loop.create_future()

    async def worker():
        await asyncio.sleep(0)
        for fut in (a, b):
            if fut.cancelled():
                raise RuntimeError("worker gives up")  # line 13: b is never set
            fut.set_result(1)

    async def waiter(fut):
        return await fut

    ta = asyncio.ensure_future(waiter(a))
    tb = asyncio.ensure_future(waiter(b))
    loop.call_soon(asyncio.ensure_future, worker())  # nobody awaits the worker
    await asyncio.sleep(0)
    ta.cancel()  # cancels the future ta awaits: the worker gives up before it sets b
    await asyncio.gather(ta, tb, return_exceptions=True)
"""


def _check(tmp_path: Path, source: str) -> tuple[int, dict]:
    f = tmp_path / "prog.py"
    f.write_text(source)
    out = tmp_path / "r.json"
    done = subprocess.run(
        [sys.executable, "-m", "chaossloth", "check", str(f), "--json", str(out), "-q"],
        check=False,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "Traceback" not in done.stderr and "never retrieved" not in done.stderr, done.stderr
    return done.returncode, json.loads(out.read_text())


def test_a_deadlock_after_a_callback_raised_names_the_exception_and_its_line(
    tmp_path: Path,
) -> None:
    code, report = _check(tmp_path, HANGS)
    assert code == 1
    assert report["failure"]["kind"] == "deadlock"
    message = report["failure"]["message"]
    assert "scenario.<locals>.complete raised KeyError: 'missing' at prog.py:11" in message
    assert "KeyError" in report["failure"]["traceback"]


def test_a_callback_that_raises_fails_the_schedule(tmp_path: Path) -> None:
    code, report = _check(tmp_path, RAISES)
    assert code == 1
    assert report["failure"]["kind"] == "exception"
    assert report["failure"]["type"] == "ValueError"
    assert "raised in the callback scenario.<locals>.log_it" in report["failure"]["message"]


def test_a_deadlock_after_a_task_died_names_the_task_and_its_raise(tmp_path: Path) -> None:
    code, report = _check(tmp_path, DIES)
    assert code == 1
    assert report["failure"]["kind"] == "deadlock"
    message = report["failure"]["message"]
    assert "a task ended with an exception nobody retrieved: " in message, message
    assert "(scenario.<locals>.worker) raised RuntimeError: worker gives up at prog.py:13" in (
        message
    )
    assert "RuntimeError" in report["failure"]["traceback"]
    lines = {(ln["line"], ln["role"]) for f in report["findings"] for ln in f["lines"]}
    assert (13, "raised") in lines, report["findings"]


REPORTS = """
import asyncio


async def scenario():
    # what aiojobs does with a failed job: the program reports the exception itself; a stock
    # loop logs it and goes on
    loop = asyncio.get_running_loop()
    loop.call_exception_handler({"message": "job failed", "exception": RuntimeError("boom")})
    await asyncio.sleep(0)
"""


def test_an_exception_the_program_reports_itself_is_not_a_failure(tmp_path: Path) -> None:
    code, report = _check(tmp_path, REPORTS)
    assert code == 0, report
    assert report["complete"] is True
