"""Soundness of the reduction on the asyncio path, by differential testing.

Small asyncio programs are generated as real Python source (tests/asyncgen_programs.py), loaded
through the capture instrumentation, and explored twice: by brute force ("exhaustive": every
schedule) and by optimal DPOR.  The property: the SET of outcomes (final shared state, values
each task observed, results/exceptions, deadlock) is the same.  On programs made only of reads
and writes, DPOR must also run exactly one execution per Mazurkiewicz trace (the number of
distinct traces exhaustive enumeration counts) and never be sleep-set blocked.

Examples: CHAOSSLOTH_SOUNDNESS_EXAMPLES (default 20) per property; raise it to search harder
(CHAOSSLOTH_SOUNDNESS_RANDOM=1 draws new programs each run).  The machinery property (gather,
TaskGroup, wait, shield, timeout, cancellation of a sibling...) runs
CHAOSSLOTH_MACHINERY_EXAMPLES (default 15).
When the "dpor" strategy is not built (Explorer("dpor") raises), the DPOR properties are skipped
with that reason, never silently.
"""

from __future__ import annotations

import itertools
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from asyncgen_programs import Program, outcome, programs
from hypothesis import HealthCheck, assume, given, settings

from chaossloth import runner, scenario

EXAMPLES = int(os.environ.get("CHAOSSLOTH_SOUNDNESS_EXAMPLES", "20"))
MACHINERY_EXAMPLES = int(os.environ.get("CHAOSSLOTH_MACHINERY_EXAMPLES", "15"))
EXHAUSTIVE_CAP = int(os.environ.get("CHAOSSLOTH_SOUNDNESS_CAP", "1500"))

SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=os.environ.get("CHAOSSLOTH_SOUNDNESS_RANDOM") is None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.data_too_large,
    ],
)

_DIR = Path(tempfile.mkdtemp(prefix="chaossloth-gen-"))
_COUNTER = itertools.count()


def load(prog: Program) -> Any:
    path = _DIR / f"gen_{next(_COUNTER)}.py"
    path.write_text(prog.source())
    return scenario.load_module(path)


def outcomes(module: Any, strategy: str, **kw: Any) -> tuple[set[Any], runner.ExplorationResult]:
    holder: list[dict[str, Any]] = [{}]

    def factory() -> Any:
        box: dict[str, Any] = {}
        holder[0] = box
        return module.main(box)

    seen: set[Any] = set()

    def on_execution(r: runner.ExecutionResult) -> None:
        if r.outcome != runner.ABORTED:
            seen.add(outcome(r, holder[0]))

    res = runner.explore(
        factory,
        strategy=strategy,
        stop_on_failure=False,
        detail_failure=False,
        on_execution=on_execution,
        max_steps=2000,
        **kw,
    )
    return seen, res


def finals_by_strategy(
    source: str,
    observe: Callable[[runner.ExecutionResult, dict[str, Any]], Any],
    cap: int | None = None,
    **kw: Any,
) -> dict[str, set[Any]]:
    """Loads `source` (whose `main(box)` is the scenario), explores it with exhaustive and with
    dpor to completion, and returns per strategy the set of observe(result, box) values.  With
    `cap` (executions per exploration), an exploration that does not complete within it makes
    the result empty (the caller assumes it away) instead of failing."""
    path = _DIR / f"case_{next(_COUNTER)}.py"
    path.write_text(source)
    module = scenario.load_module(path)
    seen: dict[str, set[Any]] = {}
    for strategy in ("exhaustive", "dpor"):
        box: dict[str, Any] = {}
        got: set[Any] = set()

        def factory(box: dict[str, Any] = box) -> Any:
            box.clear()
            return module.main(box)

        def on_execution(
            r: runner.ExecutionResult, box: dict[str, Any] = box, got: set[Any] = got
        ) -> None:
            got.add(observe(r, box))

        res = runner.explore(
            factory,
            strategy=strategy,
            stop_on_failure=False,
            detail_failure=False,
            on_execution=on_execution,
            max_steps=2000,
            max_executions=cap,
            **kw,
        )
        if cap is not None and not res.complete:
            return {}
        assert res.complete, strategy
        seen[strategy] = got
    return seen


def _mismatch(prog: Program, a: str, sa: set[Any], b: str, sb: set[Any]) -> str:
    lines = [f"outcome sets differ between {a} and {b} for this program:", prog.source(), ""]
    for x in sorted(sa - sb, key=repr):
        lines.append(f"only under {a}: {x!r}")
    for x in sorted(sb - sa, key=repr):
        lines.append(f"only under {b}: {x!r}")
    return "\n".join(lines)


# ------------------------------------------------------------------ the harness can fail

#: each worker yields first: tasks start in the order they were created, so without that yield
#: both would read x in their first steps, before either writes (always the lost update)
LOST_UPDATE = Program(
    workers=[
        [("sleep0",), ("read_attr", "x"), ("sleep0",), ("write_attr", "x", 1)],
        [("sleep0",), ("read_attr", "x"), ("sleep0",), ("write_attr", "x", 1)],
    ]
)


def test_exhaustive_sees_both_outcomes_of_a_lost_update() -> None:
    mod = load(LOST_UPDATE)
    outs, res = outcomes(mod, "exhaustive", max_executions=EXHAUSTIVE_CAP)
    assert res.complete
    finals = {dict(o[1])["x"] for o in outs}
    assert finals == {1, 2}  # both read 0 (lost update), or one after the other


@SETTINGS
@given(programs())
def test_random_never_reaches_an_outcome_exhaustive_misses(prog: Program) -> None:
    """Checks the brute-force baseline itself (and the loop's determinism)."""
    mod = load(prog)
    ex_outs, ex_res = outcomes(mod, "exhaustive", max_executions=EXHAUSTIVE_CAP)
    assume(ex_res.complete)
    rnd_outs, _ = outcomes(mod, "random", seed=1, max_executions=25)
    assert rnd_outs <= ex_outs, _mismatch(prog, "random", rnd_outs, "exhaustive", ex_outs)


# ------------------------------------------------------------------ dpor against brute force

# Known unsoundness (found by these tests): resources are named by object address, and the
# objects of a scenario are re-created, at other addresses, in every execution.  DPOR compares
# the accesses of a sleeping task's next step, recorded in an EARLIER execution, with the steps
# of the current one: the same attribute of the "same" object no longer conflicts, the task
# stays asleep, the execution is cut as sleep-set blocked, and its outcomes are never seen,
# while the exploration still says "complete".  strict=True: these fail loudly once fixed.
READ_WRITE_RACE = Program(
    workers=[[("sleep0",), ("read_attr", "x")], [("sleep0",), ("write_attr", "x", 1)]]
)


def test_dpor_minimal_read_write_race() -> None:
    """w0: `v = s.x`; w1: `s.x = v + 1`; each after one `await asyncio.sleep(0)` (tasks start
    in the order they were created: in their first steps w0 always reads first), nothing
    else.  Exhaustive reaches w0 seeing 0 and w0 seeing 1; DPOR must too."""
    mod = load(READ_WRITE_RACE)
    ex_outs, _ = outcomes(mod, "exhaustive", max_executions=100)
    dp_outs, _ = outcomes(mod, "dpor", max_executions=100)
    assert {o[3][0] for o in ex_outs} == {(0,), (1,)}
    assert dp_outs == ex_outs, _mismatch(READ_WRITE_RACE, "dpor", dp_outs, "exhaustive", ex_outs)


@SETTINGS
@given(programs())
def test_dpor_reaches_exactly_the_outcomes_of_exhaustive(prog: Program) -> None:
    _check_dpor_against_exhaustive(prog)


def _check_dpor_against_exhaustive(prog: Program) -> None:
    mod = load(prog)
    ex_outs, ex_res = outcomes(mod, "exhaustive", max_executions=EXHAUSTIVE_CAP)
    assume(ex_res.complete)
    dp_outs, dp_res = outcomes(mod, "dpor", max_executions=EXHAUSTIVE_CAP)
    assert dp_res.complete, f"dpor did not complete within {EXHAUSTIVE_CAP}:\n{prog.source()}"
    assert dp_outs == ex_outs, _mismatch(prog, "dpor", dp_outs, "exhaustive", ex_outs)
    assert dp_res.executions <= ex_res.executions


@settings(SETTINGS, max_examples=MACHINERY_EXAMPLES)
@given(programs(machinery=True))
def test_dpor_reaches_exactly_the_outcomes_of_exhaustive_with_asyncio_machinery(
    prog: Program,
) -> None:
    """The same property over asyncio's own combinators, whose state is not instrumented."""
    _check_dpor_against_exhaustive(prog)


@SETTINGS
@given(programs(rw_only=True))
def test_dpor_explores_one_execution_per_trace(prog: Program) -> None:
    """Optimality on read/write programs.  A wider search (CHAOSSLOTH_SOUNDNESS_RANDOM=1, more
    examples) found programs where one trace was explored twice; the smallest is
    test_two_readers_and_a_sleeper_take_one_execution_per_trace below."""
    mod = load(prog)
    ex_outs, ex_res = outcomes(mod, "exhaustive", max_executions=EXHAUSTIVE_CAP, count_traces=True)
    assume(ex_res.complete)
    dp_outs, dp_res = outcomes(mod, "dpor", max_executions=EXHAUSTIVE_CAP, count_traces=True)
    assert dp_outs == ex_outs, _mismatch(prog, "dpor", dp_outs, "exhaustive", ex_outs)
    assert dp_res.sleep_blocked == 0, prog.source()
    assert dp_res.executions == ex_res.distinct_traces, (
        f"dpor ran {dp_res.executions} executions for {ex_res.distinct_traces} traces:\n"
        + prog.source()
    )
    assert dp_res.distinct_traces == dp_res.executions  # no trace explored twice


def test_two_readers_and_a_sleeper_take_one_execution_per_trace() -> None:
    """main awaits its three tasks in turn; its step after w0's completion checks t1 and, only
    if t1 is done, t2.  Reversed before w1, that step never touches t2, but DPOR predicted it
    from its run after w1 (or, without fixed step accesses, took it to depend on everything):
    sequences were inserted that a branch explored later covers (8 executions, 7 with the
    prediction).  Branches whose continuations all sleep are now dropped
    (strategy_dpor.c, redundant())."""
    prog = Program(workers=[[("read_attr", "x")], [("read_attr", "x")], [("sleep0",)]])
    mod = load(prog)
    ex_outs, ex_res = outcomes(mod, "exhaustive", max_executions=EXHAUSTIVE_CAP, count_traces=True)
    dp_outs, dp_res = outcomes(mod, "dpor", max_executions=EXHAUSTIVE_CAP, count_traces=True)
    assert ex_res.complete and dp_res.complete
    assert dp_outs == ex_outs
    assert dp_res.executions == ex_res.distinct_traces


# ------------------------------------------------------------------ clock advances

TIMERS_AFTER_ADVANCE = """
import asyncio


class S:
    pass


async def main(box):
    s = S()
    s.x = 0
    box["s"] = s
    loop = asyncio.get_running_loop()

    def late():
        s.x = 2

    async def sleeper():
        await asyncio.sleep(1)
        s.x = 1

    t = asyncio.create_task(sleeper())
    await asyncio.sleep(0)
    loop.call_later(1, late)
    await t
    await asyncio.sleep(1)
"""


#: what x_at_end reports for a sleep-set blocked execution (aborted: no outcome)
BLOCKED = -1


def _x_at_end(r: runner.ExecutionResult, box: dict[str, Any]) -> int:
    if r.outcome == runner.ABORTED:
        assert r.divergence is None, r.divergence  # blocked, never diverged
        return BLOCKED
    return box["s"].x


@pytest.mark.parametrize("timers", ["strict", "relaxed"])
def test_steps_after_a_clock_advance_race_with_its_timers(timers: str) -> None:
    """Two timers become due at one clock advance; the task woken by the first writes what the
    second writes.  The second timer follows every step before the advance, but not the woken
    task's step: both orders of those two must be explored (x ends 1 or 2)."""
    finals = finals_by_strategy(TIMERS_AFTER_ADVANCE, _x_at_end, timers=timers)
    assert finals["exhaustive"] == {1, 2}
    assert finals["dpor"] - {BLOCKED} == {1, 2}
    if timers == "strict":
        assert BLOCKED not in finals["dpor"]


def test_relaxed_clock_advance_program_runs_no_blocked_execution() -> None:
    """It used to run 2 sleep-set blocked executions (an optimality defect, sound): the end of
    the run cut off the timer callback in some orders without any recorded dependency, so
    equivalent-looking prefixes continued differently.  The stop is now a write of everything
    (loop.stop), and no execution is blocked."""
    finals = finals_by_strategy(TIMERS_AFTER_ADVANCE, _x_at_end, timers="relaxed")
    assert BLOCKED not in finals["dpor"]


GATHER_TWO_EXCEPTIONS = """
import asyncio


class E1(Exception):
    pass


class E2(Exception):
    pass


async def a():
    await asyncio.sleep(0)
    raise E1()


async def b():
    await asyncio.sleep(0)
    raise E2()


async def main(box):
    try:
        await asyncio.gather(a(), b())
    except Exception as e:
        box["seen"] = type(e).__name__
    await asyncio.sleep(0)
"""


TASKGROUP_TWO_EXCEPTIONS = GATHER_TWO_EXCEPTIONS.replace(
    """    try:
        await asyncio.gather(a(), b())
    except Exception as e:
        box["seen"] = type(e).__name__""",
    """    try:
        async with asyncio.TaskGroup() as tg:
            tg.create_task(a())
            tg.create_task(b())
    except ExceptionGroup as eg:
        box["seen"] = ",".join(type(e).__name__ for e in eg.exceptions)""",
)


@pytest.mark.parametrize(
    "source,expected",
    [
        (GATHER_TWO_EXCEPTIONS, {"E1", "E2"}),
        (TASKGROUP_TWO_EXCEPTIONS, {"E1", "E2", "E1,E2", "E2,E1"}),
    ],
    ids=["gather", "taskgroup"],
)
def test_asyncio_internal_callbacks_that_share_state_are_ordered(
    source: str, expected: set[str]
) -> None:
    """gather()'s done-callbacks share uninstrumented closure state, TaskGroup's share the
    group object: whichever runs first decides which child's exception the parent sees (and,
    for the group, in which order).  Every outcome brute force reaches must be explored, and
    DPOR must not mistake the unrecorded state for nondeterminism."""
    assert source.count("TaskGroup") == (1 if "E1,E2" in expected else 0)
    seen = finals_by_strategy(source, lambda r, box: box.get("seen", "none"))
    assert seen["dpor"] == seen["exhaustive"] == expected


GATHER_SECOND_FAILURE = """
import asyncio


class E1(Exception):
    pass


async def k():
    raise E1()


async def w(box):
    try:
        await asyncio.gather(k(), k())
    except E1:
        box["seen"] = "E1"


async def main(box):
    await asyncio.create_task(w(box))
"""


def test_callbacks_still_ready_when_the_main_task_ends_run() -> None:
    """Found by the machinery generator: gather() raises the first child's E1; the second
    child's done-callback (which marks its E1 retrieved) may still be ready when the main task
    completes.  The execution used to end there, dropping the callback, so brute force reported
    "exception never retrieved" in some orders and DPOR (which sees no event for a callback that
    never runs) never did.  Like asyncio.run, the runner now runs what is still ready."""

    def outcome(r: runner.ExecutionResult, box: dict[str, Any]) -> Any:
        failure = (r.failure.kind, r.failure.type_name) if r.failure else None
        return (r.outcome, failure, box.get("seen"))

    seen = finals_by_strategy(GATHER_SECOND_FAILURE, outcome)
    assert seen["dpor"] == seen["exhaustive"] == {("ok", None, "E1")}


STRAY_STEP_AFTER_THE_END = """
import asyncio


class E1(Exception):
    pass


async def k1(d):
    await asyncio.sleep(0.01)
    d["b"] = 3


async def k2():
    await asyncio.sleep(0.01)
    raise E1()


async def w(box):
    try:
        await asyncio.gather(k1(box["d"]), k2())
    except E1:
        box["seen"] = "E1"


async def main(box):
    box["d"] = {}
    await asyncio.create_task(w(box))
"""


def test_a_step_the_end_of_the_run_cuts_off_is_explored() -> None:
    """Found by the machinery generator: k2 fails, the parent and the main task end, and the
    run stops before k1's wake-up runs; k1 is then cancelled and never writes.  Stopping the
    loop disables every step not already in the iteration, but nothing recorded it: DPOR saw
    no race between k1's step and the stop and never explored that order.  The stop is now a
    write of everything (loop.stop inside a step)."""

    def observe(r: runner.ExecutionResult, box: dict[str, Any]) -> Any:
        return (r.outcome, box.get("seen"), "b" in box["d"])

    seen = finals_by_strategy(STRAY_STEP_AFTER_THE_END, observe)
    assert seen["dpor"] == seen["exhaustive"] == {("ok", "E1", True), ("ok", "E1", False)}


CANCELLED_SLEEPER = Program(
    workers=[
        [("gather", [([], "E1", []), ([("sleep", "0.01")], None, [])], False), ("read_attr", "x")],
        [("read_attr", "x")],
    ]
)


def test_a_sleeper_the_runner_cancels_is_never_moved_before_the_end() -> None:
    """Found by the machinery generator (DPOR raised ScheduleDivergedError): gather() raises
    k0's E1 while k1 still sleeps; w0, w1 and the main task end, and the runner cancels k1, as
    asyncio.run does.  The cancellation happens between steps, after the loop stopped, and
    k1's wakeup was recorded as scheduled by nothing (enabled from the start): DPOR reversed
    it with the step that stopped the loop and prescribed k1 where only its sleep's timer,
    not yet due, could wake it.  A handle made between steps now follows every step before
    it (ext/loop.c: new_handle)."""
    mod = load(CANCELLED_SLEEPER)
    ex_outs, ex_res = outcomes(mod, "exhaustive", max_executions=EXHAUSTIVE_CAP)
    dp_outs, dp_res = outcomes(mod, "dpor", max_executions=EXHAUSTIVE_CAP)
    assert ex_res.complete and dp_res.complete
    assert dp_outs == ex_outs, _mismatch(CANCELLED_SLEEPER, "dpor", dp_outs, "exhaustive", ex_outs)
    assert dp_res.executions <= ex_res.executions


TIMER_STILL_READY_AT_THE_END = """
import asyncio


class E1(Exception):
    pass


async def k1(d):
    await asyncio.sleep(0.01)
    d["b"] = 3


async def k2():
    await asyncio.sleep(0.01)
    raise E1()


async def long():
    await asyncio.sleep(1)


async def w(box):
    try:
        await asyncio.gather(k1(box["d"]), k2())
    except E1:
        box["seen"] = "E1"


async def main(box):
    box["d"] = {}
    asyncio.create_task(long())
    await asyncio.create_task(w(box))
"""


def test_a_timer_still_ready_at_the_end_keeps_its_own_clock_advance() -> None:
    """The sibling of the test above, with a timer still ready at the end: k1's and k2's
    timers become due at one clock advance; k2 fails, and the run may end (the loop stopped,
    `long` cancelled between steps: its wakeup used to be prescribed before the stop, a
    divergence) while k1's wakeup is still ready.  That wakeup follows the steps before its
    advance only, not the later point where the runner cancelled `long` (each handle keeps
    the point where it became runnable; tests/c/test_trace.c pins the engine's side): k1
    writes d["b"] before the stop, or is cancelled after it."""

    def observe(r: runner.ExecutionResult, box: dict[str, Any]) -> Any:
        return (r.outcome, box.get("seen"), "b" in box["d"])

    seen = finals_by_strategy(TIMER_STILL_READY_AT_THE_END, observe)
    assert seen["dpor"] == seen["exhaustive"] == {("ok", "E1", True), ("ok", "E1", False)}


#: w0: ``tasks[2].cancel()``; w1: ``tasks[0].cancel()``; w2: nothing; each after a first
#: ``await asyncio.sleep(0)``: tasks start in the order they were created, so in their first
#: steps w0 always runs (and cancels w2 before it starts) first; after that yield they float
CROSSED_CANCELS = Program(
    workers=[[("sleep0",), ("cancel", 2)], [("sleep0",), ("cancel", 2)], [("sleep0",)]]
)


def test_crossed_cancels_reach_every_outcome() -> None:
    """Found by the machinery generator (random examples).  The outcome where w2 ends before
    w0 runs and w0 ends before w1 runs (both cancel() calls return False) was never explored.
    The first execution runs w0, w1, w2; its race (w0, w2) asks for w2 first, which the
    branch w1 is judged to cover (w1 and w2 are independent).  Below w1, w0's step is the
    start of a cancelled task: it never calls cancel() and no longer races with w2.  Its race
    with w1 asks for w2, w0 before w1, and DPOR judged it covered by w0's sleeping event,
    using the accesses w0's step made *after* w1 cancelled it (independent of w2), while w0
    run first calls cancel() and conflicts with w2.  A step that read what the racing step
    wrote may branch differently once moved before it: DPOR now takes it as dependent on
    everything before it in the reversal (cs_config.fixed_step_accesses = 0).  (The workers
    now yield once first; the steps above are the ones after that yield, which float.)"""
    mod = load(CROSSED_CANCELS)
    ex_outs, ex_res = outcomes(mod, "exhaustive", max_executions=EXHAUSTIVE_CAP)
    dp_outs, dp_res = outcomes(mod, "dpor", max_executions=EXHAUSTIVE_CAP)
    assert ex_res.complete and dp_res.complete
    both_done = [
        o for o in ex_outs if o[3][:2] == ((("cancel", 2, False),), (("cancel", 0, False),))
    ]
    assert len(both_done) == 1  # the harness reaches it: the program can show the defect
    assert dp_outs == ex_outs, _mismatch(CROSSED_CANCELS, "dpor", dp_outs, "exhaustive", ex_outs)


#: w0: ``tasks[1].cancel()`` then reads s.x; w1: ``await asyncio.sleep(0)``;
#: w2: ``tasks[0].cancel()``; each after a first ``await asyncio.sleep(0)`` (as above)
CANCEL_CHAIN = Program(
    workers=[
        [("sleep0",), ("cancel", 1), ("read_attr", "x")],
        [("sleep0",), ("sleep0",)],
        [("sleep0",), ("cancel", 1)],
    ]
)


def test_a_cancel_chain_reaches_every_outcome() -> None:
    """Found by the machinery generator after the program above was pinned: the same defect
    in another shape.  The outcome DPOR missed: w1 ends before w0 cancels it and w0 ends
    before w2 cancels it (both cancel() calls return False), each after its first yield."""
    mod = load(CANCEL_CHAIN)
    ex_outs, ex_res = outcomes(mod, "exhaustive", max_executions=EXHAUSTIVE_CAP)
    dp_outs, dp_res = outcomes(mod, "dpor", max_executions=EXHAUSTIVE_CAP)
    assert ex_res.complete and dp_res.complete
    both_done = [
        o
        for o in ex_outs
        if o[3][0][:1] == (("cancel", 1, False),) and o[3][2] == (("cancel", 0, False),)
    ]
    assert len(both_done) == 1  # the harness reaches it: the program can show the defect
    assert dp_outs == ex_outs, _mismatch(CANCEL_CHAIN, "dpor", dp_outs, "exhaustive", ex_outs)
