"""Hostile programs (issue 13): each runs through the real CLI in a subprocess with a wall-clock
cap and an address-space limit, and must end with the stated exit code and message: NaN and
infinite timers as on the stock loop, the time limit whatever the program does, the program's
own exits as outcomes, forks, threads, tampering with sys.modules."""

from __future__ import annotations

import asyncio
import os
import resource
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

#: wall-clock cap of one CLI run, and its address-space limit
WALL = 90
MEMORY = 1536 * 1024 * 1024


def _limit_memory() -> None:
    """The child's limits; and Ctrl-C's default disposition, which a background job started
    without job control inherits as ignored (Python then never raises KeyboardInterrupt)."""
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("CHAOSSLOTH_DEBUG", None)
    return env


def run_cli(*args: str, cwd: Path, timeout: float = WALL) -> subprocess.CompletedProcess[str]:
    """`python -m chaossloth args` in cwd, capped in time and memory."""
    return subprocess.run(
        [sys.executable, "-m", "chaossloth", *args],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=_limit_memory,
        check=False,
    )


def write(tmp_path: Path, name: str, source: str) -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(source), encoding="utf-8")
    return p


def check(
    tmp_path: Path, file: str, scenario: str, *extra: str
) -> subprocess.CompletedProcess[str]:
    return run_cli("check", file, "--scenario", scenario, "--no-telemetry", *extra, cwd=tmp_path)


def one_error_line(r: subprocess.CompletedProcess[str]) -> str:
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    return lines[0]


# ------------------------------------------------------------------ timers


TIMERS = """
import asyncio

async def sleep_nan():
    await asyncio.sleep(float("nan"))
    return "woke"

async def call_later_nan():
    loop = asyncio.get_running_loop()
    fut = loop.create_future()
    loop.call_later(float("nan"), fut.set_result, 1)
    loop.call_at(float("-inf"), lambda: None)
    assert await fut == 1

async def wait_for_nan():
    try:
        await asyncio.wait_for(asyncio.Event().wait(), timeout=float("nan"))
    except (asyncio.TimeoutError, TimeoutError):
        return "timeout"
    return "no timeout"

async def sleep_inf():
    await asyncio.sleep(float("inf"))

async def wait_for_inf():
    await asyncio.wait_for(asyncio.Event().wait(), timeout=float("inf"))

async def inf_beside_work():
    t = asyncio.ensure_future(asyncio.sleep(float("inf")))
    await asyncio.sleep(5)
    t.cancel()
    return "done"
"""


def _stock_outcome(tmp_path: Path, scenario: str, cap: float | None = None) -> str:
    """'ok' or the exception type of the scenario under asyncio.run in this interpreter; with
    `cap`, run under wait_for(..., cap) (a NaN timer's place in the heap changes then: keep
    it for the infinite ones)."""
    main = (
        f"timers.{scenario}()" if cap is None else f"asyncio.wait_for(timers.{scenario}(), {cap})"
    )
    code = (
        "import asyncio, sys, timers\n"
        f"try:\n    asyncio.run({main})\n"
        "except BaseException as e:\n    print(type(e).__name__)\nelse:\n    print('ok')\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=WALL,
    )
    return r.stdout.strip()


@pytest.mark.parametrize(
    "scenario",
    [
        "sleep_nan",
        "call_later_nan",
        "wait_for_nan",
    ],
)
def test_nan_timers_behave_as_on_the_stock_loop(tmp_path: Path, scenario: str) -> None:
    """A NaN deadline is due at once on the stock loop of 3.11 and 3.12; 3.13's loop crashes
    when it must wait for one (its selector cannot take a NaN timeout) and its sleep refuses NaN
    outright: the controlled loop does what the interpreter's own loop does, and never spins."""
    write(tmp_path, "timers.py", TIMERS)
    stock = _stock_outcome(tmp_path, scenario)
    r = check(tmp_path, "timers.py", scenario, "--time-limit", "5")
    if stock == "ok":
        assert r.returncode == 0, r.stdout + r.stderr
        assert "PASS" in r.stdout
    else:
        assert r.returncode == 1, r.stdout + r.stderr
        assert stock in r.stdout


@pytest.mark.parametrize("scenario", ["sleep_inf", "wait_for_inf"])
def test_infinite_timers_never_fire(tmp_path: Path, scenario: str) -> None:
    """sleep(inf) waits forever on the stock loop: reported as the hang it is (a deadlock
    naming the timer at +inf), never as a timer that fired."""
    write(tmp_path, "timers.py", TIMERS)
    # the stock loop is still waiting after 5 s
    assert _stock_outcome(tmp_path, scenario, cap=5) == "TimeoutError"
    r = check(tmp_path, "timers.py", scenario, "--time-limit", "5")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "deadlock" in r.stdout
    assert "at +inf pending" in r.stdout


def test_infinite_timer_beside_finite_work(tmp_path: Path) -> None:
    """A timer at +inf does not stop the clock reaching the finite ones."""
    write(tmp_path, "timers.py", TIMERS)
    r = check(tmp_path, "timers.py", "inf_beside_work", "--time-limit", "5")
    assert r.returncode == 0, r.stdout + r.stderr


def test_controlled_loop_nan_and_inf_directly() -> None:
    """The loop itself: a NaN timer runs at the next iteration without moving the clock (3.13:
    the loop raises the stock loop's ValueError when it would have to wait for it, as its
    selector does); a timer at +inf is never run and the loop reports a deadlock instead of
    advancing to it."""
    from chaossloth import DeadlockError
    from chaossloth.loop import ControlledLoop

    loop = ControlledLoop()
    try:
        seen: list[str] = []
        if sys.version_info >= (3, 13):
            loop.call_later(float("nan"), seen.append, "nan")
            with pytest.raises(ValueError, match="NaN"):
                loop.run_forever()
            # beside a ready callback it is due at once, as in the stock loop
            loop.call_soon(seen.append, "soon")
            loop.call_later(1.0, seen.append, "one")
            loop.call_later(float("inf"), seen.append, "inf")
            loop.call_later(2.0, loop.stop)
            loop.run_forever()
            assert seen == ["soon", "nan", "one"]
        else:
            loop.call_later(float("nan"), seen.append, "nan")
            loop.call_later(1.0, seen.append, "one")
            loop.call_later(float("inf"), seen.append, "inf")
            loop.call_later(2.0, loop.stop)
            loop.run_forever()
            assert seen == ["nan", "one"]
        assert loop.time() == 2.0

        async def forever() -> None:
            await asyncio.sleep(float("inf"))

        with pytest.raises(DeadlockError, match=r"\+inf"):
            loop.run_until_complete(forever())
        assert loop.time() == 2.0
    finally:
        loop.close()


# ------------------------------------------------------------------ the time limit and Ctrl-C


SPIN = """
import asyncio

async def spin():
    await asyncio.sleep(0)
    while True:
        pass

async def stock_only():
    await asyncio.sleep(0)
    if "Controlled" not in type(asyncio.get_running_loop()).__name__:
        while True:
            pass

async def stubborn():
    await asyncio.sleep(0)
    while True:
        try:
            while True:
                pass
        except BaseException:
            pass

state = {"n": 0}

async def _worker():
    v = state["n"]
    await asyncio.sleep(0)
    state["n"] = v + 1
    if state["n"] == 1 and v == 0:
        pass

async def long_exploration():
    state["n"] = 0
    await asyncio.gather(*(_worker() for _ in range(6)))
"""


def test_time_limit_stops_a_step_that_never_returns(tmp_path: Path) -> None:
    write(tmp_path, "spin.py", SPIN)
    started = time.monotonic()
    r = check(tmp_path, "spin.py", "spin", "--time-limit", "1")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "ran past the time limit of 1s" in one_error_line(r)
    assert time.monotonic() - started < WALL


def test_time_limit_ends_a_step_that_swallows_the_interrupt(tmp_path: Path) -> None:
    write(tmp_path, "spin.py", SPIN)
    r = check(tmp_path, "spin.py", "stubborn", "--time-limit", "1")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "did not stop when interrupted" in one_error_line(r)


def test_time_limit_on_the_stock_loop_too(tmp_path: Path) -> None:
    """Stage 4 runs the program on the stock loop: the limit holds there as well."""
    write(tmp_path, "spin.py", SPIN)
    r = run_cli("check", "spin.py", "--scenario", "stock_only", "--time-limit", "1", cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "[4/8]" in r.stdout  # stopped in stage 4
    assert "stock asyncio loop ran past the time limit" in one_error_line(r)


def test_sigint_stops_the_tool_with_130(tmp_path: Path) -> None:
    write(tmp_path, "spin.py", SPIN)
    proc = subprocess.Popen(
        [sys.executable, "-m", "chaossloth", "check", "spin.py", "--scenario",
         "long_exploration", "--no-telemetry", "--time-limit", "60", "--strategy", "random"],
        cwd=tmp_path,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=_limit_memory,  # noqa: PLW1509 - this test process starts no thread
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        # wait until the exploration runs (stage 3 printed nothing yet, stage 2 did)
        line = ""
        while "[2/8]" not in line:
            line = proc.stdout.readline()
            assert line, proc.stderr.read() if proc.stderr else ""
        time.sleep(0.5)
        # one Ctrl-C stops it; on a loaded machine a signal that lands before the exploration
        # really runs is sent again (at most 4 times), the exit must still be the user's 130
        err = ""
        for _ in range(4):
            proc.send_signal(signal.SIGINT)
            try:
                _, err = proc.communicate(timeout=10)
                break
            except subprocess.TimeoutExpired:
                continue
        else:
            _, err = proc.communicate(timeout=WALL)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    # (a coroutine the interrupt caught before it started may add a RuntimeWarning)
    assert any(line.startswith("chaossloth: error: interrupted") for line in err.splitlines()), err


# ------------------------------------------------------------------ the program's own exits


EXITS = """
import asyncio, sys

async def _quit(code):
    await asyncio.sleep(0)
    sys.exit(code)

async def exit0():
    await _quit(0)

async def exit5_in_child():
    await asyncio.create_task(_quit(5))

async def raise_systemexit():
    raise SystemExit(0)

async def keyboard():
    await asyncio.sleep(0)
    raise KeyboardInterrupt

async def generator_exit():
    raise GeneratorExit

async def fine():
    await asyncio.sleep(0)
"""


@pytest.mark.parametrize(
    ("scenario", "type_name", "message"),
    [
        ("exit0", "SystemExit", "the program called sys.exit(0)"),
        ("exit5_in_child", "SystemExit", "the program called sys.exit(5)"),
        ("raise_systemexit", "SystemExit", "the program called sys.exit(0)"),
        ("keyboard", "KeyboardInterrupt", "the program raised KeyboardInterrupt"),
        ("generator_exit", "GeneratorExit", "GeneratorExit"),
    ],
)
def test_the_programs_exit_is_a_failure_not_the_tools_exit(
    tmp_path: Path, scenario: str, type_name: str, message: str
) -> None:
    write(tmp_path, "exits.py", EXITS)
    r = check(tmp_path, "exits.py", scenario)
    assert r.returncode == 1, r.stdout + r.stderr
    assert f"{type_name}: {message}" in r.stdout or type_name in r.stdout
    if type_name != "GeneratorExit":
        assert message in r.stdout
    assert "FAIL" in r.stdout
    assert "[8/8]" in r.stdout  # the pipeline ran to its verdict
    # the schedule replays to the same failure (exit 1), not to the program's exit code
    sched = tmp_path / ".chaossloth" / f"exits.{scenario}.schedule.json"
    rr = run_cli("replay", str(sched), cwd=tmp_path)
    assert rr.returncode == 1, rr.stdout + rr.stderr
    assert "the failure reproduces" in rr.stdout


def test_exit_while_loading_is_an_input_error(tmp_path: Path) -> None:
    write(tmp_path, "quits.py", "import sys\nsys.exit(0)\nasync def main():\n    pass\n")
    r = check(tmp_path, "quits.py", "main")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "the program called sys.exit(0)" in one_error_line(r)


def test_exit_on_the_stock_loop_is_that_runs_failure(tmp_path: Path) -> None:
    """Stage 4 runs the program on the stock loop: its sys.exit there is that run's failure
    too (no exit code taken from it, nothing logged about unretrieved tasks)."""
    write(tmp_path, "exits.py", EXITS)
    r = run_cli("check", "exits.py", "--scenario", "exit0", "--time-limit", "2", cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "[4/8]" in r.stdout
    assert "never retrieved" not in r.stderr
    assert r.stderr == ""


# ------------------------------------------------------------------ forks, threads, sys.modules


FORKS = """
import asyncio, os, sys, threading, time

counter = {"n": 0}

async def _inc():
    v = counter["n"]
    await asyncio.sleep(0)
    counter["n"] = v + 1

async def racy():
    counter["n"] = 0
    await asyncio.gather(_inc(), _inc())
    assert counter["n"] == 2, counter["n"]

async def forks():
    await asyncio.sleep(0)
    pid = os.fork()
    if pid == 0:
        # the child goes on as if it were the parent: without the guard it would run the
        # rest of the tool and print a verdict of its own
        return
    os.waitpid(pid, 0)

async def leaves_a_thread():
    # one thread, started by the first execution and never joined (the mark is kept outside
    # the instrumented modules, which every execution resets)
    if not hasattr(sys, "_cs_test_sleeper"):
        sys._cs_test_sleeper = threading.Thread(target=time.sleep, args=(3600,), name="sleeper")
        sys._cs_test_sleeper.start()
    await asyncio.sleep(0)

async def tampers():
    await asyncio.sleep(0)
    sys.modules["json"] = object()
    for name in list(sys.modules):
        if name.startswith(("encodings", "chaossloth", "asyncio")):
            continue
        sys.modules[name] = None  # every later import of it raises ImportError
    counter["n"] = 0
    await asyncio.gather(_inc(), _inc())
    assert counter["n"] == 2, counter["n"]
"""


def test_a_forked_child_of_an_execution_exits_at_once(tmp_path: Path) -> None:
    write(tmp_path, "forks.py", FORKS)
    r = check(tmp_path, "forks.py", "forks", "--time-limit", "5")
    assert r.returncode == 0, r.stdout + r.stderr
    # one verdict: the children printed nothing
    assert r.stdout.count("[8/8]") == 1, r.stdout
    assert r.stdout.count("[1/8]") == 1, r.stdout


def test_a_thread_left_running_does_not_keep_the_process(tmp_path: Path) -> None:
    write(tmp_path, "forks.py", FORKS)
    r = check(tmp_path, "forks.py", "leaves_a_thread", "--time-limit", "2")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PASS" in r.stdout
    line = one_error_line(r)
    assert "thread(s) running ('sleeper'" in line and "outside" in line


def test_sys_modules_tampering_does_not_reach_the_tool(tmp_path: Path) -> None:
    """The program replaces json and re in sys.modules: the tool's later stages (the verdict
    writes JSON, the schedule is replayed) still work, and the failure found stands."""
    write(tmp_path, "forks.py", FORKS)
    r = run_cli(
        "check", "forks.py", "--scenario", "tampers", "--time-limit", "5",
        "--json", "report.json", cwd=tmp_path,
    )  # fmt: skip
    assert r.returncode == 1, r.stdout + r.stderr
    assert "lost update" in r.stdout or "FAIL" in r.stdout
    assert "replay did not reproduce" not in r.stdout
    assert (tmp_path / "report.json").read_text().startswith("{")


THREADSAFE = """
import asyncio, threading

async def main():
    loop = asyncio.get_running_loop()
    t = threading.Thread(target=lambda: loop.call_soon_threadsafe(print, "hi"), name="poker")
    t.start()
    t.join()
    await asyncio.sleep(0)
"""


def test_call_soon_threadsafe_from_a_thread_is_an_external_event(tmp_path: Path) -> None:
    """The thread's event was sent during the main task's step and the loop stopped before it
    was ever idle: the event was never delivered, as a slow thread's might not be; the
    exploration says the other arrival points were not explored (incomplete), no error."""
    write(tmp_path, "thr.py", THREADSAFE)
    r = check(tmp_path, "thr.py", "main")
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stderr == ""
    assert "exploration incomplete: an event from another thread" in r.stdout


# ------------------------------------------------------------------ the same initial state


STATEFUL = """
import asyncio
import shared
from shared import LOG

RUNS = []
TOTAL = 0

class Stats:
    calls = 0
    seen = []

async def _work():
    global TOTAL, ADDED
    await asyncio.sleep(0)
    RUNS.append(1)
    LOG.append(1)
    shared.COUNT += 1
    TOTAL += 1
    ADDED = True
    Stats.calls += 1
    Stats.seen.append(1)
    Stats.extra = 1

async def main():
    assert "ADDED" not in globals() and not hasattr(Stats, "extra")
    await asyncio.gather(_work(), _work())
    assert len(RUNS) == 2 and len(LOG) == 2 and shared.COUNT == 2 and TOTAL == 2, (
        RUNS, LOG, shared.COUNT, TOTAL)
    assert Stats.calls == 2 and len(Stats.seen) == 2, (Stats.calls, Stats.seen)
"""


def test_every_execution_starts_from_the_initial_state(tmp_path: Path) -> None:
    """Module globals, containers (also imported by name elsewhere), class attributes and names
    added later: all back to their initial state before each execution, so check passes and
    nothing fails in one execution only because of another."""
    write(tmp_path, "stateful.py", STATEFUL)
    write(tmp_path, "shared.py", "LOG = []\nCOUNT = 0\n")
    r = run_cli("check", "stateful.py", "--scenario", "main", "--time-limit", "3", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PASS" in r.stdout


# state an execution changes that is not put back: an instance of a library's class made at
# import (the program's own classes' instances are put back), os.environ
CARRY_OVER = {
    "instance": """
import asyncio
import types

COUNTER = types.SimpleNamespace(runs=0)

async def main():
    async def bump():
        COUNTER.runs += 1
        await asyncio.sleep(0)
    await asyncio.gather(bump(), bump())
    assert COUNTER.runs < 5, COUNTER.runs
""",
    "environ": """
import asyncio
import os

KEY = "CS_TEST_RUNS"  # the program's own variable (not one ChaosSloth reads)

async def main():
    async def bump():
        n = int(os.environ.get(KEY, "0"))
        await asyncio.sleep(0)
        os.environ[KEY] = str(n + 1)
    await asyncio.gather(bump(), bump())
    assert int(os.environ[KEY]) < 4, os.environ[KEY]
""",
}


@pytest.mark.parametrize("where", sorted(CARRY_OVER))
def test_state_carried_over_between_executions_is_an_input_problem(
    tmp_path: Path, where: str
) -> None:
    """The failure such a program shows depends on how many executions ran before it (replay
    would say it passes): exit 2, naming the object the default order changes."""
    write(tmp_path, "carry.py", CARRY_OVER[where])
    r = check(tmp_path, "carry.py", "main", "--max-executions", "50")
    assert r.returncode == 2, r.stdout + r.stderr
    line = one_error_line(r)
    assert "state carries over from one execution to the next" in line, line
    assert ("COUNTER.runs (carry.py:" if where == "instance" else "os.environ (carry.py:") in line


# state made at import that every execution must find as the imports left it
IMPORT_STATE = {
    # a module-level lock: the first execution binds it to its loop (3.10+), the next ones run
    # on fresh loops ("is bound to a different event loop" / a divergence, before)
    "module_lock": """
import asyncio

LOCK = asyncio.Lock()
TOTAL = {"n": 0}

async def main():
    async def add():
        async with LOCK:
            n = TOTAL["n"]
            await asyncio.sleep(0)
            TOTAL["n"] = n + 1
    await asyncio.gather(add(), add(), add())
    assert TOTAL["n"] == 3, TOTAL
""",
    # a service singleton with its own lock, queue and cache (an instance of the program's
    # class made at import: its fields were not put back before)
    "singleton": """
import asyncio

class Service:
    def __init__(self):
        self.lock = asyncio.Lock()
        self.jobs = asyncio.Queue()
        self.done = []

    async def worker(self):
        while True:
            job = await self.jobs.get()
            async with self.lock:
                self.done.append(job)
            self.jobs.task_done()

SERVICE = Service()

async def main():
    w = asyncio.create_task(SERVICE.worker())
    for j in range(2):
        await SERVICE.jobs.put(j)
    await SERVICE.jobs.join()
    w.cancel()
    assert sorted(SERVICE.done) == [0, 1], SERVICE.done
""",
    # ids from a module-level itertools.count and a seeded generator: every execution must
    # draw the same ones (keys that differ between executions made DPOR's replay of a step
    # see other accesses: "nondeterministic")
    "id_counter": """
import asyncio
import itertools
import random

_ids = itertools.count(1)
_jitter = random.Random(42)
ORDERS = {}
TOTAL = {"n": 0}

async def main():
    async def create(name):
        oid = next(_ids)
        await asyncio.sleep(0)
        ORDERS[oid] = (name, _jitter.randint(0, 9))
        n = TOTAL["n"]
        await asyncio.sleep(0)
        TOTAL["n"] = n + 1
    await asyncio.gather(create("a"), create("b"), create("c"))
    assert len(ORDERS) == 3, ORDERS
""",
    # a registry another module fills at import through a decorator: the reset used to put
    # the registry back as its own module left it, empty
    "registry": """
import asyncio
import handlers
import registry

async def main():
    results = await asyncio.gather(*(fn() for fn in registry.HANDLERS.values()))
    assert results == ["pong"], results
""",
}


@pytest.mark.parametrize("case", sorted(IMPORT_STATE))
def test_state_made_at_import_is_what_every_execution_starts_from(
    tmp_path: Path, case: str
) -> None:
    write(tmp_path, "prog.py", IMPORT_STATE[case])
    write(
        tmp_path,
        "registry.py",
        "HANDLERS = {}\n\ndef register(fn):\n    HANDLERS[fn.__name__] = fn\n    return fn\n",
    )
    write(
        tmp_path,
        "handlers.py",
        "from registry import register\n\n@register\nasync def ping():\n    return 'pong'\n",
    )
    r = check(tmp_path, "prog.py", "main", "--max-executions", "200")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PASS" in r.stdout, r.stdout


STAGE7_STATE = """
import asyncio

RUNS = []

class Counter:
    def __init__(self):
        self.value = 0

    async def bump(self):
        v = self.value
        await asyncio.sleep(0)
        self.value = v + 1

async def main():
    assert not RUNS, f"state left by another execution: {RUNS}"
    RUNS.append(1)
    c = Counter()
    await asyncio.gather(c.bump(), c.bump())
    assert c.value == 2, c.value
"""


def test_the_original_is_reset_again_after_stage_7_checked_the_patch(tmp_path: Path) -> None:
    """Stage 7 loads the patched copy and releases it; stage 8's replay of the original then
    starts from the original's initial state again, so it reproduces the failure."""
    write(tmp_path, "counter.py", STAGE7_STATE)
    r = run_cli("fix", "counter.py", "--scenario", "main", "--no-telemetry", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "patch verified (complete)" in r.stdout, r.stdout
    assert "replay did not reproduce" not in r.stdout, r.stdout


UNCOPYABLE = """
import asyncio
import threading

# a lock cannot be deep-copied: this list is reset shallowly (which items it holds)
HELD = [threading.Lock()]

async def main():
    assert len(HELD) == 1, HELD
    HELD.append(threading.Lock())
    await asyncio.sleep(0)
"""


def test_a_container_deepcopy_refuses_is_reset_shallowly_and_said(tmp_path: Path) -> None:
    write(tmp_path, "held.py", UNCOPYABLE)
    r = check(tmp_path, "held.py", "main", "--max-executions", "20")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "reset only shallowly between executions" in r.stdout, r.stdout
    assert "held.HELD (TypeError: cannot pickle '_thread.lock' object)" in r.stdout, r.stdout


FINALIZERS = """
import asyncio
import gc


class Resource:
    def __init__(self, loop, done):
        self.me = self  # a reference cycle: only the cycle collector frees it
        self.loop = loop
        self.done = done

    def __del__(self):
        self.loop.call_soon(self.done.set_result, "closed")


class Slotted:
    __slots__ = ("me", "loop", "done")  # no __weakref__: the hooks cannot hold it weakly

    def __init__(self, loop, done):
        self.me = self
        self.loop = loop
        self.done = done

    def __del__(self):
        self.loop.call_soon(self.done.set_result, "closed")


async def explicit():
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    Resource(loop, done)
    gc.collect()
    assert await asyncio.wait_for(done, 1) == "closed"


async def by_allocations():
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    Resource(loop, done)
    for _ in range(50):
        junk = [[i] for i in range(2000)]  # allocations start the collector
        del junk
        await asyncio.sleep(0)
    assert await asyncio.wait_for(done, 1) == "closed"


async def slotted_across_steps():
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    r = Slotted(loop, done)
    await asyncio.sleep(0)
    assert r.me is r
    del r
    await asyncio.sleep(0)
    gc.collect()
    assert await asyncio.wait_for(done, 1) == "closed"
"""


@pytest.mark.parametrize(
    "scenario",
    ["explicit", "by_allocations", "slotted_across_steps"],
)
def test_cyclic_garbage_is_finalized_during_the_run_as_on_the_stock_loop(
    tmp_path: Path, scenario: str
) -> None:
    """A finalizer of cyclic garbage that schedules a callback runs while the loop runs, as
    under asyncio.run: the callback it schedules is a step of the execution, never a failure
    after the loop closed."""
    write(tmp_path, "fin.py", FINALIZERS)
    stock = subprocess.run(
        [sys.executable, "-c", f"import asyncio, fin; asyncio.run(fin.{scenario}()); print('ok')"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=WALL,
        check=False,
    )
    assert stock.stdout.strip() == "ok", stock.stderr
    r = check(tmp_path, "fin.py", scenario, "--max-executions", "50")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PASS" in r.stdout and "Exception ignored" not in r.stderr, r.stdout + r.stderr
