"""The loop model neither invents nor hides schedules (issue 9; DESIGN.md "Execution model").

* call_soon FIFO: the non-task callbacks queued by one step run in registration order under
  every strategy (one "chain" actor), as on the stock loop, and so do those that one task's
  successive steps queued (a reader dispatching a frame per step); task steps stay free to
  interleave, so a program that depends on the order of two task wakeups, or of two tasks'
  callbacks, still fails.  Across tasks a chain follows every chain whose starting step happens
  before its own (a finished task's done-callback runs before the callback that wait() queues
  once it saw the task done), and a bare yield lets the callbacks queued before it run.
* Busy-poll clock and fair polls: a task polling with ``await asyncio.sleep(0)`` for a flag that
  a timer, a sleeping task or an always-ready task sets terminates, with the stock loop's
  result, and dpor and exhaustive end complete (a poller that yielded poll_limit times in a row
  waits for what was ready when it yielded); DPOR and exhaustive reach the same outcomes on
  polling programs; replay through a busy-poll advance reproduces the run; a real livelock (a
  poll that can spin forever) is still reported, saying what the loop did.

Programs are loaded through the capture instrumentation (as the CLI loads them), so DPOR sees
their accesses.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest

from chaossloth import loop as cs_loop
from chaossloth import runner, scenario
from chaossloth.errors import StepBudgetExceeded

_DIR = Path(tempfile.mkdtemp(prefix="chaossloth-loopmodel-"))
_COUNTER = itertools.count()


def load(source: str) -> Any:
    path = _DIR / f"loopmodel_{next(_COUNTER)}.py"
    path.write_text(source)
    return scenario.load_module(path)


def stock(module: Any) -> tuple[Any, dict[str, Any]]:
    """The scenario's result and box on the stock asyncio loop."""
    box: dict[str, Any] = {}
    return asyncio.run(module.main(box)), box


def explore(module: Any, strategy: str, **kw: Any) -> tuple[runner.ExplorationResult, list[Any]]:
    """Explores `module.main(box)`; returns the result and, per non-aborted execution, (the
    failure message or None, the return value, the box)."""
    box: dict[str, Any] = {}
    seen: list[Any] = []

    def factory() -> Any:
        box.clear()
        return module.main(box)

    def on_execution(r: runner.ExecutionResult) -> None:
        if r.outcome != runner.ABORTED:
            failure = r.failure.message if r.failure is not None else None
            seen.append((failure, r.value, dict(box)))

    kw.setdefault("max_steps", 5000)
    res = runner.explore(
        factory,
        strategy=strategy,
        stop_on_failure=False,
        detail_failure=False,
        on_execution=on_execution,
        **kw,
    )
    return res, seen


def _outcomes(seen: list[Any]) -> set[Any]:
    return {(f, v, tuple(sorted(b.items()))) for f, v, b in seen}


@pytest.fixture
def small_poll_limit(monkeypatch: pytest.MonkeyPatch) -> int:
    """The runner's loops advance the clock after 3 consecutive yields (so that exhaustive
    enumeration of a polling program stays small)."""
    limit = 3

    class SmallPollLoop(cs_loop.ControlledLoop):
        def __init__(self, **kw: Any) -> None:
            super().__init__(poll_limit=limit, **kw)

    monkeypatch.setattr(runner, "ControlledLoop", SmallPollLoop)
    return limit


# ------------------------------------------------------------------ call_soon FIFO

EMITTER = """
import asyncio


class Emitter:
    def __init__(self):
        self.listeners = []

    def on(self, fn):
        self.listeners.append(fn)

    def emit(self, value):
        loop = asyncio.get_running_loop()
        for fn in self.listeners:
            loop.call_soon(fn, value)


class Conn:
    def __init__(self):
        self.state = "new"
        self.log = []
        self.closed = asyncio.get_running_loop().create_future()

    def on_open(self, value):
        self.state = "open"
        self.log.append("open")

    def on_data(self, value):
        # relies on asyncio's documented call_soon order: on_open was registered first
        assert self.state == "open", "data before open"
        self.log.append("data")

    def on_close(self, value):
        assert "data" in self.log, "close before data"
        self.state = "closed"
        self.log.append("close")
        self.closed.set_result(None)


async def other(conn):
    await asyncio.sleep(0)
    conn.log.append("other")  # a task step: free to interleave with the callbacks


async def main(box):
    conn = Conn()
    em = Emitter()
    em.on(conn.on_open)
    em.on(conn.on_data)
    em.on(conn.on_close)
    t = asyncio.ensure_future(other(conn))
    em.emit(1)
    await t
    await conn.closed
    box["log"] = tuple(conn.log)
    return conn.state
"""


def test_emitter_relies_on_call_soon_order_and_passes_on_the_stock_loop() -> None:
    result, box = stock(load(EMITTER))
    assert result == "closed"
    assert box["log"] == ("open", "data", "close", "other")


@pytest.mark.parametrize("strategy", ["fifo", "random", "dpor", "exhaustive"])
def test_emitter_listeners_keep_registration_order(strategy: str) -> None:
    kw: dict[str, Any] = {"max_executions": 40} if strategy == "random" else {}
    res, seen = explore(load(EMITTER), strategy, **kw)
    assert res.failing_executions == 0, [s for s in seen if s[0]][:1]
    assert res.aborted == 0
    assert seen and all(value == "closed" for _, value, _ in seen)
    if strategy in ("dpor", "exhaustive"):
        assert res.complete
        # other's sleep(0) queues its next step behind the chain that main's step (which
        # created other) queued: "other" comes last, as on every stock loop
        positions = {box["log"].index("other") for _, _, box in seen}
        assert positions == {3}, positions


TWO_CHAINS = """
import asyncio


class Log:
    def __init__(self):
        self.items = []

    def add(self, x):
        self.items.append(x)


async def emit(log, name):
    loop = asyncio.get_running_loop()
    loop.call_soon(log.add, name + "1")
    loop.call_soon(log.add, name + "2")


async def main(box):
    log = Log()
    await asyncio.gather(emit(log, "a"), emit(log, "b"))
    await asyncio.sleep(0)
    box["log"] = tuple(log.items)
"""


@pytest.mark.parametrize("strategy", ["dpor", "exhaustive"])
def test_chains_of_ordered_steps_run_in_registration_order(strategy: str) -> None:
    res, seen = explore(load(TWO_CHAINS), strategy)
    assert res.complete and res.failing_executions == 0 and res.aborted == 0
    logs = {box["log"] for _, _, box in seen}
    # gather created a's task before b's, so a's first step runs first (tasks start in the
    # order they were created), and its chain runs first, whole, as on every asyncio loop
    assert logs == {("a1", "a2", "b1", "b2")}, sorted(logs)


FRAMES = """
import asyncio


class Parser:
    def __init__(self):
        self.frames = []
        self.done = asyncio.Event()

    def on_frame(self, n):
        # a protocol callback: frames are dispatched in the order they were read
        assert self.frames == list(range(n)), f"frame {n} after {self.frames}"
        self.frames.append(n)
        if n == 3:
            self.done.set()


async def reader(parser):
    loop = asyncio.get_running_loop()
    for n in range(4):
        loop.call_soon(parser.on_frame, n)  # one frame per step of the reader task
        await asyncio.sleep(0)


async def main(box):
    parser = Parser()
    task = asyncio.ensure_future(reader(parser))
    await parser.done.wait()
    await task
    box["frames"] = tuple(parser.frames)
    return len(parser.frames)
"""


@pytest.mark.parametrize("strategy", ["fifo", "random", "dpor", "exhaustive"])
def test_callbacks_of_one_task_keep_their_order_across_its_steps(strategy: str) -> None:
    mod = load(FRAMES)
    assert stock(mod) == (4, {"frames": (0, 1, 2, 3)})
    kw: dict[str, Any] = {"max_executions": 40} if strategy == "random" else {}
    res, seen = explore(mod, strategy, **kw)
    assert res.failing_executions == 0 and res.aborted == 0, [s for s in seen if s[0]][:1]
    assert seen and all(box == {"frames": (0, 1, 2, 3)} for _, _, box in seen)
    if strategy in ("dpor", "exhaustive"):
        assert res.complete
        # the reader's steps still interleave with the frames (a frame is dispatched before or
        # after the reader's next step), and main's wait with both
        assert res.executions > 1


def test_dpor_matches_exhaustive_on_chains_across_steps() -> None:
    mod = load(FRAMES)
    got = {}
    for strategy in ("exhaustive", "dpor"):
        res, seen = explore(mod, strategy)
        assert res.complete
        got[strategy] = _outcomes(seen)
    assert got["dpor"] == got["exhaustive"]


TWO_READERS = """
import asyncio


async def reader(log, name):
    loop = asyncio.get_running_loop()
    for n in range(2):
        loop.call_soon(log.append, f"{name}{n}")
        await asyncio.sleep(0)


async def main(box):
    log = []
    await asyncio.gather(reader(log, "a"), reader(log, "b"))
    await asyncio.sleep(0)
    box["log"] = tuple(log)
    # the stock loop alternates the two readers; nothing in the program makes it
    assert log == ["a0", "b0", "a1", "b1"], log
"""


def test_callbacks_of_two_tasks_still_interleave() -> None:
    mod = load(TWO_READERS)
    stock(mod)
    res, seen = explore(mod, "dpor")
    assert res.complete and res.failing_executions >= 1
    logs = {box["log"] for _, _, box in seen}
    # the first steps run in the order gather created the tasks, and each one's frame is queued
    # before the other's next step; the readers' later steps float (they could wait on I/O)
    assert logs == {("a0", "b0", "a1", "b1"), ("a0", "b0", "b1", "a1")}, sorted(logs)


DONE_CALLBACK_FIRST = """
import asyncio


async def main(box):
    pending = []

    async def work():
        pass

    t = asyncio.get_running_loop().create_task(work())
    t.add_done_callback(pending.remove)  # queued by t's last step
    pending.append(t)
    await asyncio.sleep(0)
    if pending:
        # t may be done already: wait() then queues its _on_completion behind remove
        await asyncio.wait(pending)
    box["pending"] = len(pending)
    assert not pending, pending
"""

YIELD_LETS_CALLBACKS_RUN = """
import asyncio


async def main(box):
    seen = []
    loop = asyncio.get_running_loop()

    async def other():
        loop.call_soon(seen.append, "other")
        await asyncio.sleep(0)  # the callback this step queued runs first
        assert seen == ["main", "other"], seen

    loop.call_soon(seen.append, "main")
    await asyncio.sleep(0)
    assert seen[0] == "main", seen
    await asyncio.gather(other())
    box["seen"] = tuple(seen)
"""


@pytest.mark.parametrize("name", ["DONE_CALLBACK_FIRST", "YIELD_LETS_CALLBACKS_RUN"])
def test_callbacks_queued_before_run_first_across_tasks(name: str) -> None:
    """A chain started by a step that happens before another step's registration runs first
    (a finished task's done-callback before the callback wait() queues once it saw the task
    done), and a bare yield lets the callbacks queued before it run: both hold on every stock
    loop, and DPOR and exhaustive end complete without a failure, with the same outcomes."""
    mod = load(globals()[name])
    stock(mod)
    got = {}
    for strategy in ("exhaustive", "dpor"):
        res, seen = explore(mod, strategy)
        assert res.complete and res.failing_executions == 0, [s for s in seen if s[0]][:1]
        got[strategy] = _outcomes(seen)
    assert got["dpor"] == got["exhaustive"]


TASK_WAKEUPS = """
import asyncio


async def waiter(ev, log, name):
    await ev.wait()
    log.append(name)


async def main(box):
    ev = asyncio.Event()
    log = []
    tasks = [asyncio.ensure_future(waiter(ev, log, n)) for n in "ab"]
    await asyncio.sleep(0)
    ev.set()
    await asyncio.gather(*tasks)
    assert log == ["a", "b"], log
"""


def test_order_of_two_task_wakeups_is_still_explored() -> None:
    mod = load(TASK_WAKEUPS)
    stock(mod)  # the stock loop wakes them in order: no failure there
    res, seen = explore(mod, "dpor")
    assert res.complete
    assert res.failing_executions >= 1
    assert any(f and "['b', 'a']" in f for f, _, _ in seen), seen


# ------------------------------------------------------------------ busy-poll clock

POLL_TIMER = """
import asyncio


class Flag:
    def __init__(self):
        self.up = False

    def raise_(self):
        self.up = True


async def main(box):
    flag = Flag()
    loop = asyncio.get_running_loop()
    loop.call_later(0.5, flag.raise_)
    while not flag.up:
        await asyncio.sleep(0)
    return "done"
"""

POLL_SLEEPER = """
import asyncio


class Flag:
    def __init__(self):
        self.up = False


async def setter(flag):
    await asyncio.sleep(2)
    flag.up = True


async def main(box):
    flag = Flag()
    task = asyncio.ensure_future(setter(flag))
    while not flag.up:
        await asyncio.sleep(0)
    await task
    return "done"
"""

LONG_TIMEOUT = """
import asyncio


async def work():
    total = 0
    for i in range(200):
        total += i
        await asyncio.sleep(0)  # a short cooperative computation
    return total


async def main(box):
    return await asyncio.wait_for(work(), timeout=30)
"""

POLL_PROGRAMS = {"timer": POLL_TIMER, "sleeper": POLL_SLEEPER, "long_timeout": LONG_TIMEOUT}


@pytest.mark.parametrize("name", sorted(POLL_PROGRAMS))
def test_busy_poll_terminates_with_the_stock_result(name: str) -> None:
    mod = load(POLL_PROGRAMS[name])
    expected, _ = stock(mod)
    assert cs_loop.run(mod.main({})) == expected
    # dpor is complete: a poller that overtook the ready timer (or the sleeper's wakeup)
    # poll_limit times waits for it (fair polls, README "Which orders are explored")
    for strategy in ("fifo", "dpor"):
        res, seen = explore(mod, strategy, max_executions=500)
        assert res.complete or strategy == "fifo", (res.executions, res.incomplete_reason)
        assert res.failing_executions == 0 and res.aborted == 0, (strategy, seen[:1])
        assert seen and {value for _, value, _ in seen} == {expected}, strategy


POLL_READY_TASK = """
import asyncio


class Conn:
    def __init__(self):
        self.ready = False

    async def handshake(self):
        for _ in range(3):  # a few steps that never touch `ready`
            await asyncio.sleep(0)
        self.ready = True


async def main(box):
    conn = Conn()
    task = asyncio.ensure_future(conn.handshake())
    polls = 0
    while not conn.ready:  # polls for a task that is always ready, not for a timer
        polls += 1
        await asyncio.sleep(0)
    await task
    box["polls"] = polls
    return "ready"
"""


@pytest.mark.parametrize("strategy", ["dpor", "exhaustive"])
def test_a_poll_for_a_ready_task_is_fair(small_poll_limit: int, strategy: str) -> None:
    """Without fairness the poller may overtake the handshake forever: exhaustive enumeration
    never ends and dpor ends each execution that does so at the step budget."""
    mod = load(POLL_READY_TASK)
    res, seen = explore(mod, strategy, max_executions=2000)
    assert res.complete and res.aborted == 0, (res.executions, res.incomplete_reason)
    assert res.failing_executions == 0
    assert {value for _, value, _ in seen} == {"ready"}
    # The handshake's write lands after 2 polls at the earliest (its own 3 bare yields make it
    # a poller too, which waits for main's next step) and after poll_limit + 2 at the latest:
    # main's first poll lets the task it created start (as every asyncio loop does), then main
    # overtakes its second step poll_limit times and polls once per later step of it.
    polls = {box["polls"] for _, _, box in seen}
    assert polls == set(range(2, small_poll_limit + 3)), sorted(polls)


def test_dpor_matches_exhaustive_on_a_fair_poll(small_poll_limit: int) -> None:
    mod = load(POLL_READY_TASK)
    got = {}
    for strategy in ("exhaustive", "dpor"):
        res, seen = explore(mod, strategy)
        assert res.complete
        got[strategy] = (_outcomes(seen), res.executions)
    assert got["dpor"][0] == got["exhaustive"][0]
    assert got["dpor"][1] <= got["exhaustive"][1]


POLL_CAN_SPIN = """
import asyncio


class Conn:
    def __init__(self):
        self.ready = False
        self.closing = False

    async def handshake(self):
        await asyncio.sleep(0)  # its first step ends here: main's first poll lets it run
        await asyncio.sleep(0)
        if self.closing:
            return
        self.ready = True


async def main(box):
    conn = Conn()
    task = asyncio.ensure_future(conn.handshake())
    polls = 0
    while not conn.ready:
        polls += 1
        if polls == 4:
            # a bug: a handshake that has not checked `closing` by the 4th poll never sets
            # `ready` (the stock loop alternates the two, so it checks after the 3rd poll and
            # this passes there; a handshake step that waited on I/O would not)
            conn.closing = True
        await asyncio.sleep(0)
    await task
"""


def test_a_poll_that_can_spin_forever_is_still_a_livelock() -> None:
    mod = load(POLL_CAN_SPIN)
    stock(mod)
    res, seen = explore(mod, "dpor", max_steps=3000)
    assert res.failing_executions >= 1
    assert any(f and "step budget" in f for f, _, _ in seen), seen[:2]
    # and the schedules where the handshake wins pass
    assert any(f is None for f, _, _ in seen)


def test_busy_poll_advances_after_poll_limit_yields() -> None:
    loop = cs_loop.ControlledLoop(poll_limit=5)
    try:
        log: list[tuple[int, float]] = []

        async def main() -> None:
            loop.call_later(7, lambda: None)
            for i in range(12):
                log.append((i, loop.time()))
                await asyncio.sleep(0)

        loop.run_until_complete(main())
        # the 5th consecutive yield moves the clock to the deadline; later yields start over
        assert [t for _, t in log] == [0.0] * 5 + [7.0] * 7
        assert loop._cs_poll_advances == 1
    finally:
        loop.close()


def test_awaiting_a_future_resets_the_poll_count() -> None:
    loop = cs_loop.ControlledLoop(poll_limit=3)
    try:

        async def main() -> list[float]:
            loop.call_later(7, lambda: None)
            seen = []
            for _ in range(6):
                await asyncio.sleep(0)
                await asyncio.sleep(0)
                fut = loop.create_future()
                loop.call_soon(fut.set_result, None)
                await fut  # a wakeup by another step: not a bare yield
                seen.append(loop.time())
            return seen

        assert loop.run_until_complete(main()) == [0.0] * 6
        assert loop._cs_poll_advances == 0
    finally:
        loop.close()


def test_poll_limit_is_validated() -> None:
    from chaossloth.errors import InputError

    with pytest.raises(InputError, match="poll_limit"):
        cs_loop.ControlledLoop(poll_limit=0)
    loop = cs_loop.ControlledLoop()
    try:
        assert loop._cs_poll_limit == 1000
        with pytest.raises(ValueError, match="poll_limit"):
            loop._cs_poll_limit = 0
    finally:
        loop.close()


POLL_RACES = """
import asyncio


class S:
    def __init__(self):
        self.up = False
        self.x = 0
        self.seen = []
        self.notes = []

    def raise_(self):
        self.up = True

    def note(self):
        self.notes.append(asyncio.get_running_loop().time())


async def bump(s):
    loop = asyncio.get_running_loop()
    s.x += 1
    await asyncio.sleep(0)
    loop.call_later(0.25, s.note)  # races with the poller's clock advance
    s.x += 1


async def main(box):
    s = S()
    loop = asyncio.get_running_loop()
    loop.call_later(1, s.raise_)
    task = asyncio.ensure_future(bump(s))
    for _ in range(6):  # bounded: under exploration a ready timer may be overtaken by polls
        if s.up:
            break
        s.seen.append(s.x)
        await asyncio.sleep(0)
    await task
    await asyncio.sleep(0)
    box["seen"] = tuple(s.seen)
    box["notes"] = tuple(s.notes)
    return loop.time()
"""


def test_dpor_matches_exhaustive_on_a_polling_program(small_poll_limit: int) -> None:
    mod = load(POLL_RACES)
    got = {}
    for strategy in ("exhaustive", "dpor"):
        res, seen = explore(mod, strategy, timers="strict")
        assert res.complete and res.aborted == 0, (strategy, res)
        got[strategy] = _outcomes(seen)
    assert got["dpor"] == got["exhaustive"]
    # the advance really happens at different points (several outcomes), and the note timer
    # scheduled before or after it changes what the clock says
    assert len(got["exhaustive"]) > 1


def test_dpor_never_claims_complete_with_relaxed_timers_left_pending(
    small_poll_limit: int,
) -> None:
    """A relaxed timer that never fired in an execution raced with nothing there, so DPOR never
    tried it earlier and misses outcomes exhaustive reaches; it must then not say complete."""
    mod = load(POLL_RACES)
    ex_res, ex_seen = explore(mod, "exhaustive", timers="relaxed")
    dp_res, dp_seen = explore(mod, "dpor", timers="relaxed")
    assert ex_res.complete
    assert _outcomes(dp_seen) <= _outcomes(ex_seen)
    assert not dp_res.complete
    assert dp_res.incomplete_reason == runner.RELAXED_PENDING_REASON


def test_replay_through_a_busy_poll_advance_reproduces(small_poll_limit: int) -> None:
    mod = load(POLL_RACES)
    box: dict[str, Any] = {}

    def factory() -> Any:
        box.clear()
        return mod.main(box)

    for seed in range(5):
        first = runner.run_once(factory, strategy="random", seed=seed)
        assert first.outcome != runner.ABORTED
        first_box = dict(box)
        again = runner.run_once(factory, schedule=first.schedule, actor_paths=first.actor_paths)
        assert again.outcome == first.outcome
        assert again.schedule == first.schedule
        assert again.value == first.value and dict(box) == first_box


def test_a_real_livelock_is_still_reported_with_what_the_loop_did() -> None:
    async def spin() -> None:
        loop = asyncio.get_running_loop()
        loop.call_later(3, lambda: None)  # fires, but the loop never ends
        while True:
            await asyncio.sleep(0)

    with pytest.raises(StepBudgetExceeded) as info:
        cs_loop.run(spin(), max_steps=2500)
    msg = str(info.value)
    assert "the step budget of 2500 steps ran out" in msg
    assert "tasks still running: 'Task-" in msg and "spin()" in msg
    # the busy-poll clock moved past the timer's deadline
    assert "virtual time at 3" in msg
    assert "pending timers: none" in msg
    assert "stock asyncio" not in msg

    async def spin_with_timer() -> None:
        asyncio.get_running_loop().call_later(60, print)
        while True:
            await asyncio.sleep(0)
            await asyncio.sleep(0.0)

    with pytest.raises(StepBudgetExceeded) as info:
        cs_loop.run(spin_with_timer(), max_steps=300, strategy="random")
    msg = str(info.value)
    assert "the step budget of 300 steps ran out" in msg
    assert "pending timers: print at 60" in msg and "virtual time at 0" in msg


# ------------------------------------------------------------------ end to end


def _scenario_file(tmp_path: Path, source: str) -> Path:
    path = tmp_path / "prog.py"
    path.write_text(source + "\n\nasync def scenario():\n    return await main({})\n")
    return path


@pytest.mark.parametrize(
    "name,verdict,hazard",
    [
        ("FRAMES", "pass", None),
        ("TWO_READERS", "fail", "order-violation"),
        ("POLL_SLEEPER", "pass", None),
        ("POLL_READY_TASK", "pass", None),
        ("POLL_CAN_SPIN", "fail", "livelock"),
    ],
)
def test_check_command_on_fifo_and_polling_programs(
    tmp_path: Path, name: str, verdict: str, hazard: str | None
) -> None:
    """As a user runs them: the emitter across a task's steps and the polls pass complete (the
    telemetry stage agrees: the stock loop's clock moves while a poll spins), their racy twins
    fail with their hazard."""
    from conftest import cli

    out = tmp_path / "report.json"
    path = _scenario_file(tmp_path, globals()[name])
    # an execution budget, not a time one: the poll for a ready task takes 1014 executions
    # (poll_limit 1000), seconds on a loaded machine
    budget = ["--max-executions", "5000"]
    r = cli("check", str(path), "--scenario", "scenario", *budget, "--json", str(out), cwd=tmp_path)
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == (0 if verdict == "pass" else 1), r.stdout + r.stderr
    rep = json.loads(out.read_text())
    assert rep["verdict"] == verdict and rep["hazard"] == hazard, rep["findings"]
    if verdict == "pass":
        assert rep["complete"], {k: v for k, v in rep.items() if k != "findings"}
