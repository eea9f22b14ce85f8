"""The runner: oracles, minimal failing schedule, seeded reproducibility, budgets; scenarios and
workloads loaded from files with clean input errors."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path
from typing import Any

import pytest

from chaossloth import runner, scenario
from chaossloth.errors import InputError
from chaossloth.runner import ExecutionResult, Step


def _write(tmp_path: Path, name: str, src: str) -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(src))
    return p


LOST_UPDATE = """\
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

async def main():
    c = Counter()
    await asyncio.gather(c.incr(0), c.incr(2))
    assert c.value == 2, f"lost update: value is {c.value}"
"""

FIXED = """\
import asyncio

class Counter:
    def __init__(self):
        self.value = 0
        self.lock = asyncio.Lock()

    async def incr(self):
        async with self.lock:
            v = self.value
            await asyncio.sleep(0)
            self.value = v + 1

async def main():
    c = Counter()
    await asyncio.gather(c.incr(), c.incr(), c.incr())
    assert c.value == 3
"""


@pytest.fixture
def lost_update(tmp_path: Path) -> scenario.Program:
    return scenario.load_scenario(_write(tmp_path, "lost.py", LOST_UPDATE), "main")


# ------------------------------------------------------------------ oracles


def test_fifo_passes_and_has_no_deviation(lost_update: scenario.Program) -> None:
    r = runner.run_once(lost_update.factory)
    assert r.outcome == runner.OK, r.failure
    assert r.deviations == 0
    assert r.steps[0] == Step(0, "Task main (main)")
    assert any(s.name.startswith("Task main/") for s in r.steps)
    assert r.trace is not None and len(r.trace) == len(r.steps)


def test_assertion_in_scenario_found_with_user_traceback(lost_update: scenario.Program) -> None:
    res = runner.explore(lost_update.factory, strategy="random", seed=1, max_executions=200)
    assert res.failed and res.first_failure is not None
    f = res.minimal_failure.failure
    assert f is not None and f.kind == "assertion" and f.type_name == "AssertionError"
    assert "lost update: value is 1" in f.message
    assert "lost.py" in f.traceback and "assert c.value == 2" in f.traceback
    assert "runner.py" not in f.traceback and "asyncio" not in f.traceback
    # the minimal schedule deviates from the default order, and not more than it must
    assert res.minimal_failure.deviations >= 1
    assert res.minimal_failure.deviations <= res.first_failure.deviations
    assert res.minimal_failure.trace is not None


def test_assertion_in_child_task_even_if_retrieved(tmp_path: Path) -> None:
    p = _write(
        tmp_path,
        "child.py",
        """\
        import asyncio

        async def check():
            assert False, "child says no"

        async def main():
            await asyncio.gather(check(), return_exceptions=True)
        """,
    )
    r = runner.run_once(scenario.load_scenario(p).factory)
    assert r.failure is not None and r.failure.kind == "assertion"
    assert r.failure.task == "Task main/0 (check)"
    assert "child says no" in r.failure.message


def test_exception_never_retrieved(tmp_path: Path) -> None:
    p = _write(
        tmp_path,
        "unretrieved.py",
        """\
        import asyncio

        async def boom():
            raise ValueError("nobody listens")

        async def main():
            asyncio.get_running_loop().create_task(boom())
            await asyncio.sleep(0)
            await asyncio.sleep(0)
        """,
    )
    r = runner.run_once(scenario.load_scenario(p).factory)
    assert r.failure is not None and r.failure.kind == "unretrieved"
    assert r.failure.type_name == "ValueError" and "never retrieved" in r.failure.message
    assert "unretrieved.py" in r.failure.traceback


def test_handled_exception_is_not_a_failure(tmp_path: Path) -> None:
    p = _write(
        tmp_path,
        "handled.py",
        """\
        import asyncio

        async def boom():
            raise ValueError("handled")

        async def main():
            try:
                await asyncio.create_task(boom())
            except ValueError:
                pass
        """,
    )
    assert runner.run_once(scenario.load_scenario(p).factory).outcome == runner.OK


def test_deadlock(tmp_path: Path) -> None:
    p = _write(
        tmp_path,
        "dead.py",
        """\
        import asyncio

        async def main():
            ev = asyncio.Event()
            await ev.wait()
        """,
    )
    r = runner.run_once(scenario.load_scenario(p).factory)
    assert r.failure is not None and r.failure.kind == "deadlock"
    # who waits for what, with actor ids, on the failure itself (and through JSON)
    (blocked,) = r.failure.details["blocked"]
    assert blocked["actor"] == 0 and blocked["name"].startswith("Task-")
    assert blocked["site"].endswith("dead.py:5") and blocked["waits_for"].startswith("Event.wait")
    again = runner.Failure.from_json(r.failure.to_json())
    assert again.details == r.failure.details
    assert "details" not in runner.Failure("exception", "E", "m").to_json()


def test_lock_order_deadlock_found_by_exploration(tmp_path: Path) -> None:
    p = _write(
        tmp_path,
        "abba.py",
        """\
        import asyncio

        async def ab(a, b):
            async with a:
                await asyncio.sleep(0)
                async with b:
                    pass

        async def main():
            a, b = asyncio.Lock(), asyncio.Lock()
            await asyncio.gather(ab(a, b), ab(b, a))
        """,
    )
    res = runner.explore(
        scenario.load_scenario(p).factory, strategy="random", seed=3, max_executions=300
    )
    assert res.failed and res.minimal_failure.failure.kind == "deadlock"
    blocked = res.minimal_failure.failure.details["blocked"]
    # main (in gather) and its two children; the children's actor ids are theirs in the trace
    assert len(blocked) == 3 and all(isinstance(b["actor"], int) for b in blocked)
    actors = {s.actor for s in res.minimal_failure.steps}
    assert {b["actor"] for b in blocked} <= actors


def test_livelock_step_budget(tmp_path: Path) -> None:
    p = _write(
        tmp_path,
        "spin.py",
        """\
        import asyncio

        async def main():
            while True:
                await asyncio.sleep(0)
        """,
    )
    r = runner.run_once(scenario.load_scenario(p).factory, max_steps=50)
    assert r.failure is not None and r.failure.kind == "livelock"
    assert len(r.steps) == 50


def test_extra_oracle(tmp_path: Path) -> None:
    p = _write(
        tmp_path,
        "ret.py",
        """\
        async def main():
            return 41
        """,
    )
    prog = scenario.load_scenario(p)
    ok = runner.run_once(prog.factory, oracle=lambda v: None if v == 41 else f"got {v}")
    assert ok.outcome == runner.OK and ok.value == 41
    bad = runner.run_once(prog.factory, oracle=lambda v: f"expected 42, got {v}")
    assert bad.failure is not None and bad.failure.kind == "oracle"
    assert bad.failure.message == "expected 42, got 41"


def test_workload_serializability(tmp_path: Path) -> None:
    src = """\
    import asyncio

    class Server:
        def __init__(self, start=0):
            self.sessions = {}
            self.start = start

        async def handle(self, client):
            cur = self.sessions.get(client, self.start)
            await asyncio.sleep(0.0001)
            self.sessions[client] = cur + 1
    """
    p = _write(tmp_path, "server.py", src)
    prog = scenario.load_workload(p, "Server", "handle", 2, "'audit'", "(5,)")
    assert prog.describe()["cls"] == "Server"
    res = runner.explore(
        prog.factory, strategy="random", seed=0, max_executions=100, oracle=prog.oracle
    )
    assert res.failed
    f = res.minimal_failure.failure
    assert f.kind == "oracle" and "not serializable" in f.message and "6" in f.message


def _judged(prog: scenario.Program, strategy: str) -> tuple[int, list[Any]]:
    """(oracle calls, per execution (schedule, oracle message or None)) of 60 executions."""
    calls = [0]

    def oracle(value: Any) -> Any:
        calls[0] += 1
        return prog.oracle(value)  # type: ignore[misc]

    seen: list[Any] = []
    runner.explore(
        prog.factory,
        strategy=strategy,
        seed=3,
        max_executions=60,
        stop_on_failure=False,
        detail_failure=False,
        oracle=oracle,
        on_execution=lambda r: seen.append(
            (tuple(r.schedule), r.failure.message if r.failure else None)
        ),
    )
    return calls[0], seen


SERVER = """\
import asyncio

class Server:
    def __init__(self):
        self.n = 0

    async def handle(self):
        cur = self.n
        await asyncio.sleep(0)
        self.n = cur + 1
"""


def _lost_update_server(tmp_path: Path) -> scenario.Program:
    """Two concurrent Server.handle() calls: a lost update the serializability oracle sees."""
    return scenario.load_workload(_write(tmp_path, "srv.py", SERVER), "Server", "handle", 2, "", "")


@pytest.mark.parametrize("strategy", ["random", "pct", "pos"])
def test_sampling_reuses_the_verdict_of_a_repeated_schedule(tmp_path: Path, strategy: str) -> None:
    prog = _lost_update_server(tmp_path)
    calls, seen = _judged(prog, strategy)
    distinct = {sched for sched, _ in seen}
    assert len(seen) == 60 and len(distinct) < 60  # the sample repeats schedules
    # the oracle judged each schedule once, and a repeated schedule got the same verdict
    assert calls == len(distinct)
    verdicts = {}
    for sched, msg in seen:
        assert verdicts.setdefault(sched, msg) == msg
    assert any(msg is not None for _, msg in seen)  # the lost update: some verdicts fail


def test_dpor_judges_every_execution(tmp_path: Path) -> None:
    prog = _lost_update_server(tmp_path)
    calls, seen = _judged(prog, "dpor")
    assert calls == len(seen) > 1


def test_capture_installed_once_per_exploration_and_removed(
    lost_update: scenario.Program, monkeypatch: pytest.MonkeyPatch
) -> None:
    from chaossloth.capture import sync

    installs = [0]
    real = sync.install

    def counting() -> int:
        installs[0] += 1
        return real()

    monkeypatch.setattr(sync, "install", counting)
    lock_acquire = asyncio.Lock.__dict__["acquire"]
    res = runner.explore(
        lost_update.factory,
        strategy="random",
        seed=0,
        max_executions=20,
        stop_on_failure=False,
        detail_failure=False,
    )
    assert res.executions == 20 and res.failed
    assert installs[0] == 1
    assert not sync.is_installed()
    assert asyncio.Lock.__dict__["acquire"] is lock_acquire


# ------------------------------------------------------------------ exploration


def test_random_is_reproducible_by_seed(lost_update: scenario.Program) -> None:
    def schedules(seed: int) -> list[list[int]]:
        got: list[list[int]] = []
        runner.explore(
            lost_update.factory,
            strategy="random",
            seed=seed,
            max_executions=12,
            stop_on_failure=False,
            on_execution=lambda r: got.append(r.schedule),
        )
        return got

    a, b, c = schedules(11), schedules(11), schedules(12)
    assert a == b
    assert len(a) == 12
    assert a != c


def test_budget_stops_and_says_incomplete(lost_update: scenario.Program) -> None:
    res = runner.explore(
        lost_update.factory, strategy="random", seed=0, max_executions=5, stop_on_failure=False
    )
    assert res.executions == 5
    assert res.budget_hit and not res.complete


def test_fixed_program_has_no_failure(tmp_path: Path) -> None:
    prog = scenario.load_scenario(_write(tmp_path, "fixed.py", FIXED))
    res = runner.explore(prog.factory, strategy="random", seed=5, max_executions=60)
    assert not res.failed and res.executions == 60


def test_progress_callback(lost_update: scenario.Program) -> None:
    seen: list[runner.Progress] = []
    runner.explore(
        lost_update.factory,
        strategy="random",
        seed=0,
        max_executions=3,
        stop_on_failure=False,
        progress=seen.append,
    )
    assert seen and seen[-1].executions == 3


def test_minimal_selection_prefers_fewest_deviations() -> None:
    def r(dev: int, n: int) -> ExecutionResult:
        return ExecutionResult(outcome=runner.FAILED, steps=[Step(0, "x")] * n, deviations=dev)

    best = None
    for cand in (r(3, 5), r(1, 9), r(2, 2), r(1, 7), r(1, 8)):
        if runner._better(cand, best):
            best = cand
    assert best is not None and (best.deviations, len(best.steps)) == (1, 7)


def test_deviations_from_trace_counts_fifo_inversions() -> None:
    class Ev:
        def __init__(self, by: int) -> None:
            self.scheduled_by = by

    # event 1 and 2 both made ready by event 0; running 2 before 1 is one inversion
    assert runner.deviations_from_trace([Ev(-1), Ev(0), Ev(0)]) == 0
    assert runner.deviations_from_trace([Ev(-1), Ev(0), Ev(1), Ev(0)]) == 1


def test_detailed_run_hands_back_its_explorer(lost_update: scenario.Program) -> None:
    from chaossloth import _core

    r = runner.run_once(lost_update.factory, detailed=True)
    assert r.explorer is not None and r.trace is not None
    # the explorer's current execution is this one: its trace and the engine's analyses
    assert r.explorer.schedule() == r.schedule and len(r.explorer.trace()) == len(r.trace)
    assert isinstance(_core.diagnose(r.explorer), list)
    assert runner.run_once(lost_update.factory, detailed=False).explorer is None
    res = runner.explore(lost_update.factory, strategy="dpor")
    assert res.minimal_failure is not None and res.minimal_failure.explorer is not None
    assert res.minimal_failure.explorer.schedule() == res.minimal_failure.schedule


def test_replay_of_a_found_schedule(lost_update: scenario.Program) -> None:
    res = runner.explore(lost_update.factory, strategy="random", seed=1, max_executions=200)
    best = res.minimal_failure
    again = runner.run_once(
        lost_update.factory, schedule=best.schedule, actor_paths=best.actor_paths
    )
    assert again.schedule == best.schedule
    assert again.failure is not None and again.failure.message == best.failure.message


def test_replay_divergence_is_nondeterminism(lost_update: scenario.Program) -> None:
    from chaossloth.errors import NondeterminismError, ScheduleDivergedError

    fifo = runner.run_once(lost_update.factory)
    bad = list(fifo.schedule)
    bad.insert(1, bad[-1])  # an actor that does not exist yet at step 1
    with pytest.raises(NondeterminismError, match="diverged: at step 1") as info:
        runner.run_once(lost_update.factory, schedule=bad, actor_paths=fifo.actor_paths)
    assert isinstance(info.value, ScheduleDivergedError)
    assert info.value.step == 1 and info.value.expected == bad[1]
    with pytest.raises(NondeterminismError, match="program ended"):
        runner.run_once(
            lost_update.factory, schedule=fifo.schedule + [0], actor_paths=fifo.actor_paths
        )


def test_fifo_order_matches_stock_asyncio(tmp_path: Path) -> None:
    src = """\
    import asyncio

    LOG = []

    async def w(name, n):
        for i in range(n):
            LOG.append((name, i))
            await asyncio.sleep(0)

    async def main():
        LOG.clear()
        loop = asyncio.get_running_loop()
        loop.call_soon(LOG.append, "cb")
        await asyncio.gather(w("a", 3), w("b", 2), w("c", 1))
        await asyncio.sleep(0.01)
        return list(LOG)
    """
    prog = scenario.load_scenario(_write(tmp_path, "order.py", src))
    stock = asyncio.run(prog.factory())
    ours = runner.run_once(prog.factory)
    assert ours.outcome == runner.OK and ours.value == stock


# ------------------------------------------------------------------ scenarios


def test_scenario_input_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        scenario.load_scenario(tmp_path / "nope.py")
    bad = _write(tmp_path, "syntax.py", "async def main():\n    x = (\n")
    with pytest.raises(InputError, match=r"syntax.py:2: syntax error"):
        scenario.load_scenario(bad)
    p = _write(
        tmp_path,
        "several.py",
        """\
        async def alpha():
            pass

        async def beta():
            pass

        def sync():
            pass

        async def needs(x):
            pass
        """,
    )
    with pytest.raises(InputError, match="no scenario named 'gamma' \\(available: alpha, beta\\)"):
        scenario.load_scenario(p, "gamma")
    with pytest.raises(InputError, match="'sync' is not an `async def`"):
        scenario.load_scenario(p, "sync")
    with pytest.raises(InputError, match=r"'needs' takes parameters \(x\)"):
        scenario.load_scenario(p, "needs")
    with pytest.raises(InputError, match="several scenarios, name one of: alpha, beta"):
        scenario.load_scenario(p)
    assert scenario.load_scenario(p, "beta").scenario == "beta"
    boom = _write(tmp_path, "boom.py", "x = 1\nraise RuntimeError('at import')\n")
    with pytest.raises(InputError, match=r"boom.py:2: loading the file raised RuntimeError"):
        scenario.load_scenario(boom)


def test_workload_input_errors(tmp_path: Path) -> None:
    p = _write(
        tmp_path,
        "srv.py",
        """\
        class Server:
            def __init__(self, n=0):
                self.n = n

            async def handle(self, k):
                self.n += k

            def sync_handle(self):
                pass
        """,
    )
    with pytest.raises(InputError, match=r"no class 'Srv' \(classes defined there: Server\)"):
        scenario.load_workload(p, "Srv", "handle")
    with pytest.raises(InputError, match=r"no method 'hndl' \(async methods: handle\)"):
        scenario.load_workload(p, "Server", "hndl")
    with pytest.raises(InputError, match="Server.sync_handle is not an `async def`"):
        scenario.load_workload(p, "Server", "sync_handle")
    with pytest.raises(InputError, match="--args 'audit' is not a Python literal"):
        scenario.load_workload(p, "Server", "handle", 2, "audit")
    with pytest.raises(InputError, match="does not accept these --args"):
        scenario.load_workload(p, "Server", "handle", 2, "(1, 2)")
    with pytest.raises(InputError, match="does not accept these --init-args"):
        scenario.load_workload(p, "Server", "handle", 2, "1", "(1, 2)")
    with pytest.raises(InputError, match="at least 1"):
        scenario.load_workload(p, "Server", "handle", 0, "1")
    assert scenario.parse_literal("'a'", "--args") == ("a",)
    assert scenario.parse_literal("('a', 1)", "--args") == ("a", 1)
    assert scenario.parse_literal("", "--args") == ()


def _unused(*_: Any) -> None:  # keeps linters quiet about typing-only imports
    pass


# ------------------------------------------------------------------ per-execution cost cuts


def _counting_messages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[int], Any]:
    """The Server workload with the serializability oracle's message builder counted."""
    from chaossloth import serial

    built = [0]
    real = serial.SerialOracle.message

    def counting(self: serial.SerialOracle, obj: Any, results: Any) -> str:
        built[0] += 1
        return real(self, obj, results)

    monkeypatch.setattr(serial.SerialOracle, "message", counting)
    prog = scenario.load_workload(_write(tmp_path, "srv.py", SERVER), "Server", "handle", 3, "", "")
    return built, prog


def test_an_exploration_builds_the_messages_of_the_failures_it_keeps_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built, prog = _counting_messages(tmp_path, monkeypatch)
    res = runner.explore(
        prog.factory,
        strategy="dpor",
        stop_on_failure=False,
        detail_failure=False,
        oracle=prog.oracle,
    )
    assert res.complete and res.failing_executions > 2
    first, best = res.first_failure, res.minimal_failure
    assert first is not None and best is not None
    for kept in (first, best):
        assert kept.failure is not None
        assert kept.failure.message.startswith("not serializable"), kept.failure.message
        assert kept.failure.message != runner.UNBUILT_MESSAGE
    # built for the first failure and each better one, never for every failing execution
    assert 1 <= built[0] < res.failing_executions


def test_every_failure_handed_to_on_execution_has_its_message(tmp_path: Path) -> None:
    prog = _lost_update_server(tmp_path)
    calls, seen = _judged(prog, "dpor")
    messages = [msg for _, msg in seen if msg is not None]
    assert messages and calls == len(seen)
    assert all(m.startswith("not serializable") for m in messages), messages


@pytest.mark.parametrize("debug", [False, True])
def test_the_loop_of_an_execution_follows_asyncios_debug_setting(
    monkeypatch: pytest.MonkeyPatch, debug: bool
) -> None:
    if debug:
        monkeypatch.setenv("PYTHONASYNCIODEBUG", "1")
    else:
        monkeypatch.delenv("PYTHONASYNCIODEBUG", raising=False)

    async def main() -> bool:
        return asyncio.get_running_loop().get_debug()

    assert runner.run_once(main).value is debug
    seen: list[Any] = []
    runner.explore(
        main, strategy="random", max_executions=3, on_execution=lambda r: seen.append(r.value)
    )
    assert seen == [debug] * 3


class _Colour(__import__("enum").Enum):
    RED = 1


class _OwnCopy(__import__("enum").Enum):
    BLUE = 2

    def __deepcopy__(self, memo: Any) -> Any:
        return self


@pytest.mark.parametrize(
    ("value", "shared"),
    [
        ((), True),
        (("audit", 1, 2.5, None, True, b"x", 1j), True),
        ((("nested", (3,)), _Colour.RED), True),
        (([],), False),
        (({"a": 1},), False),
        ((("a", [1]),), False),
        ((_OwnCopy.BLUE,), False),  # its own __deepcopy__: copied as it says
        ((type("Int", (int,), {})(3),), False),  # a subclass may copy otherwise
    ],
)
def test_workload_arguments_are_shared_only_when_a_deep_copy_is_the_same_object(
    value: tuple[Any, ...], shared: bool
) -> None:
    import copy

    assert scenario._copy_is_identity(value) is shared
    if shared:
        assert copy.deepcopy(value) is value


def test_workload_calls_get_their_own_copy_of_mutable_arguments(tmp_path: Path) -> None:
    src = """\
    import asyncio

    class Box:
        def __init__(self, seed):
            self.seed = seed

        async def add(self, items):
            items.append(len(items))
            await asyncio.sleep(0)
            return (id(items) != id(self.seed), list(items))
    """
    prog = scenario.load_workload(
        _write(tmp_path, "box.py", src), "Box", "add", 2, "([1],)", "([0],)"
    )
    r = runner.run_once(prog.factory)
    obj, results = r.value
    assert obj.seed == [0]
    # each call appended to its own fresh copy of [1]
    assert results == [(True, [1, 1]), (True, [1, 1])]


def test_sampling_builds_the_messages_of_the_failures_it_keeps_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built, prog = _counting_messages(tmp_path, monkeypatch)
    res = runner.explore(
        prog.factory,
        strategy="random",
        seed=5,
        max_executions=200,
        stop_on_failure=False,
        detail_failure=False,
        oracle=prog.oracle,
    )
    assert res.failing_executions > 20
    for kept in (res.first_failure, res.minimal_failure):
        assert kept is not None and kept.failure is not None
        assert kept.failure.message.startswith("not serializable"), kept.failure.message
    assert 1 <= built[0] < res.failing_executions


def test_a_cached_verdict_gets_its_message_from_the_execution_that_keeps_it(
    tmp_path: Path,
) -> None:
    """A verdict stored before its message was built (its execution was not kept) is judged
    again, on the value of the execution with the same schedule that needs the message."""
    from chaossloth import _core
    from chaossloth.config import DEFAULTS

    prog = _lost_update_server(tmp_path)
    res = runner.explore(
        prog.factory,
        strategy="random",
        seed=3,
        max_executions=60,
        detail_failure=False,
        oracle=prog.oracle,
    )
    failing = res.first_failure
    assert failing is not None and failing.failure is not None
    ex = _core.Explorer("random", seed=0, max_executions=1)
    driver = runner._Driver(prog.factory, ex, DEFAULTS, prog.oracle)
    first, build = driver._judge(failing.schedule, failing.value)
    assert first is not None and first.message == runner.UNBUILT_MESSAGE and build is not None
    # not kept: build() never called; the same schedule again, kept this time
    second, build = driver._judge(failing.schedule, failing.value)
    assert second is not None and second.message == runner.UNBUILT_MESSAGE and build is not None
    message = build()
    assert message == failing.failure.message and message.startswith("not serializable")
    third, build = driver._judge(failing.schedule, failing.value)
    assert build is None and third is not None and third.message == message


LEFTOVERS = """\
import asyncio

cancelled = []


async def linger(name):
    try:
        await asyncio.sleep(10)
    except asyncio.CancelledError:  # not GeneratorExit: a coroutine closed unfinished
        cancelled.append(name)
        raise


def plain_task(loop, coro, **kw):
    return asyncio.Task(coro, loop=loop, **kw)


async def main():
    loop = asyncio.get_running_loop()
    asyncio.create_task(linger("tracked"))
    {untracked}
    asyncio.create_task(linger("last"))
    await asyncio.sleep(0)
    assert cancelled == [], cancelled
"""


@pytest.mark.parametrize(
    ("untracked", "expected"),
    [
        ("pass", ["tracked", "last"]),
        (
            "loop.set_task_factory(plain_task); asyncio.create_task(linger('factory'))",
            ["tracked", "factory", "last"],
        ),
        ("asyncio.Task(linger('constructed'), loop=loop)", ["tracked", "last", "constructed"]),
    ],
    ids=["tracked-only", "task-factory", "constructed"],
)
def test_the_tasks_an_execution_leaves_pending_are_cancelled_whatever_made_them(
    tmp_path: Path, untracked: str, expected: list[str]
) -> None:
    """asyncio.run's rule: every task the main task left pending is cancelled, the ones the
    runner does not track (a task factory's, a Task constructed directly) as well as its own
    (asyncio's registries then hold more than the tracked tasks: all_tasks() is scanned).
    Cancelled in creation order, untracked tasks after the tracked ones (the factory's
    last task is a plain Task too)."""
    p = _write(tmp_path, "leftovers.py", LEFTOVERS.replace("{untracked}", untracked))
    prog = scenario.load_scenario(p)
    try:
        r = runner.run_once(prog.factory)
        assert r.failure is None, r.failure
        cancelled = prog.factory.__globals__["cancelled"]  # the program's module's list
    finally:
        prog.release()
    if "factory" in untracked:
        # both of the factory's tasks are untracked: their order is all_tasks()'s
        assert cancelled[0] == "tracked" and sorted(cancelled) == sorted(expected)
    else:
        assert cancelled == expected


def test_the_module_table_is_put_back_after_an_execution_that_changed_it(
    tmp_path: Path,
) -> None:
    """An execution that replaces, adds or removes sys.modules entries: what it replaced or
    removed is back after it (the version-tag fast path must not hide a change), and an
    execution that changes nothing leaves the table as it is."""
    import sys
    import types

    p = _write(
        tmp_path,
        "table.py",
        """\
        import sys
        import types

        async def main():
            sys.modules["colorsys"] = types.ModuleType("impostor")
            sys.modules.pop("cs_table_probe", None)
            sys.modules["cs_table_added"] = types.ModuleType("added")
        """,
    )
    import colorsys

    probe = types.ModuleType("cs_table_probe")
    sys.modules["cs_table_probe"] = probe
    prog = scenario.load_scenario(p)
    try:
        for _ in range(3):
            r = runner.run_once(prog.factory)
            assert r.failure is None
            assert sys.modules["colorsys"] is colorsys
            assert sys.modules["cs_table_probe"] is probe
        quiet = _write(tmp_path, "quiet.py", "async def main():\n    pass\n")
        qprog = scenario.load_scenario(quiet)
        try:
            before = dict(sys.modules)
            runner.run_once(qprog.factory)
            assert sys.modules == before
        finally:
            qprog.release()
    finally:
        prog.release()
        sys.modules.pop("cs_table_probe", None)
        sys.modules.pop("cs_table_added", None)
