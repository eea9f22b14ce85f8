"""DPOR that knows asyncio's primitives: what commutes is not ordered, and nothing else changes.

Two refinements of the dependency relation (issue 14), each checked here against brute force
(the ``exhaustive`` strategy: every schedule) on fixed and on generated programs:

* a semaphore's uncontended ``acquire`` and a ``release`` that wakes nobody are commutative
  updates of its counter (``_core.ADD``), so two acquires with room do not order each other;
* ``gather()``'s done-callbacks add to the count of finished children instead of writing the
  whole closure, and what the completion schedules reads that count, enabling
  (``CS_ENABLING``): N children take one order of their callbacks, not N!.

The property is always the same: the set of outcomes DPOR reaches is the set brute force
reaches, and the counts of executions show the reduction.
"""

from __future__ import annotations

import itertools
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from test_dpor_asyncio import _COUNTER, _DIR, finals_by_strategy

from chaossloth import _core, runner, scenario
from chaossloth.capture import sync

#: generated semaphore programs per run (each explored twice, brute force capped at 1,500)
EXAMPLES = int(os.environ.get("CHAOSSLOTH_PRIMITIVE_EXAMPLES", "10"))


#: the generated-program properties: EXAMPLES examples, derandomized unless
#: CHAOSSLOTH_SOUNDNESS_RANDOM is set
_GENERATED = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=os.environ.get("CHAOSSLOTH_SOUNDNESS_RANDOM") is None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def _final(r: runner.ExecutionResult, box: dict[str, Any]) -> Any:
    failure = (r.failure.kind, r.failure.type_name) if r.failure else None
    return (r.outcome, failure, box.get("final"))


def _reached(source: str, cap: int | None = None) -> dict[str, set[Any]]:
    """Per strategy, the finals its executions reached; an execution DPOR cut short as
    redundant (sleep-set blocked) reaches no final."""
    seen = finals_by_strategy(source, _final, cap=cap)
    return {k: {o for o in v if o[0] != runner.ABORTED} for k, v in seen.items()}


def _executions(source: str, strategy: str, budget: int = 20_000) -> runner.ExplorationResult:
    path = _DIR / f"prim_{next(_COUNTER)}.py"
    path.write_text(source)
    module = scenario.load_module(path)
    return runner.explore(
        lambda: module.main({}),
        strategy=strategy,
        stop_on_failure=False,
        detail_failure=False,
        max_executions=budget,
        max_steps=2000,
    )


GATHER_UPDATES = """
import asyncio


class Shared:
    def __init__(self):
        self.log = []


async def child(s, k):
    await asyncio.sleep(0)
    s.log.append(k)


async def main(box):
    s = Shared()
    await asyncio.gather(*[child(s, k) for k in range({n})])
    box["final"] = tuple(s.log)
"""


def test_gather_callbacks_take_one_order() -> None:
    """Three children that each append once: DPOR runs one execution per order of the appends
    (3! = 6), not 6 more for the orders of gather's done-callbacks, and reaches exactly the
    orders brute force reaches."""
    source = GATHER_UPDATES.replace("{n}", "3")
    seen = _reached(source)
    assert seen["dpor"] == seen["exhaustive"]
    assert len(seen["dpor"]) == 6
    res = _executions(source, "dpor")
    assert res.complete and res.executions == 6


WAIT_CHILDREN = """
import asyncio


class Shared:
    def __init__(self):
        self.log = []


async def child(s, k):
    await asyncio.sleep(0)
    s.log.append(k)


async def main(box):
    s = Shared()
    ts = [asyncio.create_task(child(s, k)) for k in range({n})]
    done, pending = await asyncio.wait(ts, return_when=asyncio.{when})
    box["final"] = (tuple(s.log), len(done))
    await asyncio.gather(*pending)
"""


@pytest.mark.parametrize("when", ["ALL_COMPLETED", "FIRST_COMPLETED"])
def test_wait_callbacks_reach_what_brute_force_reaches(when: str) -> None:
    """wait()'s callbacks are not gather()'s: its future may complete before every child is
    counted (FIRST_COMPLETED), so they stay ordered as one closure's; what wait() returns in
    each order is what brute force sees, with no redundant (sleep-set blocked) execution."""
    source = WAIT_CHILDREN.replace("{n}", "2").replace("{when}", when)
    seen = _reached(source)
    assert seen["dpor"] == seen["exhaustive"]
    if when == "FIRST_COMPLETED":
        assert {o[2][1] for o in seen["dpor"]} == {1, 2}


SEMAPHORE_JOBS = """
import asyncio


class Shared:
    def __init__(self):
        self.n = 0


async def job(s, sem):
    async with sem:
        await asyncio.sleep(0)
        s.n = s.n + 1


async def main(box):
    s = Shared()
    sem = asyncio.Semaphore(2)
    await asyncio.gather(*[job(s, sem) for _ in range({n})])
    box["final"] = (s.n, sem._value)
"""


def test_four_jobs_behind_a_semaphore_complete() -> None:
    """Issue 14's workload: it used to hit 20,000 executions without finishing."""
    res = _executions(SEMAPHORE_JOBS.replace("{n}", "4"), "dpor")
    assert res.complete
    assert res.executions < 5000


def test_three_jobs_behind_a_semaphore_reach_what_brute_force_reaches() -> None:
    seen = _reached(SEMAPHORE_JOBS.replace("{n}", "3"))
    assert seen["dpor"] == seen["exhaustive"] == {("ok", None, (3, 2))}


ONE_PERMIT = """
import asyncio


async def job(sem, seen, k):
    await asyncio.sleep(0)  # the jobs start in gather's order; after this yield they float
    async with sem:
        await asyncio.sleep(0)
    seen.append((k, sem.locked()))


async def main(box):
    sem = asyncio.Semaphore(1)
    seen = []
    await asyncio.gather(job(sem, seen, 0), job(sem, seen, 1))
    box["final"] = tuple(seen)
"""


def test_an_acquire_that_finds_room_can_make_the_next_one_wait() -> None:
    """Found by the generated programs: two acquires that each find room alone do not commute
    (with one permit the second waits), so acquires order each other; whichever job takes the
    permit first sees it still locked on leaving (the other one was woken)."""
    seen = _reached(ONE_PERMIT)
    assert seen["dpor"] == seen["exhaustive"]
    saw_locked = {k for o in seen["dpor"] for k, locked in o[2] if locked}
    assert saw_locked == {0, 1}


OVER_RELEASE = """
import asyncio


async def release(sem, seen, k):
    await asyncio.sleep(0)  # the jobs start in gather's order; after this yield they float
    try:
        sem.release()
        seen.append((k, "released"))
    except ValueError:
        seen.append((k, "too many"))


async def main(box):
    sem = asyncio.BoundedSemaphore(1)
    await sem.acquire()
    seen = []
    await asyncio.gather(release(sem, seen, 0), release(sem, seen, 1))
    box["final"] = tuple(sorted(seen))
"""


def test_a_bounded_semaphores_releases_order_each_other() -> None:
    """Two releases of a BoundedSemaphore with one permit out: whichever runs second exceeds
    the bound (its releases never count as commuting: a second may exceed the bound), and DPOR
    sees both orders."""
    seen = _reached(OVER_RELEASE)
    assert seen["dpor"] == seen["exhaustive"]
    assert len(seen["dpor"]) == 2


VALUE_READER = """
import asyncio


async def holder(sem, seen):
    await asyncio.sleep(0)  # the jobs start in gather's order; after this yield they float
    async with sem:
        await asyncio.sleep(0)
        seen.append("in")


async def reader(sem, seen):
    await asyncio.sleep(0)
    seen.append(("value", sem._value, sem.locked()))


async def main(box):
    sem = asyncio.Semaphore({permits})
    seen = []
    await asyncio.gather(holder(sem, seen), holder(sem, seen), reader(sem, seen))
    box["final"] = tuple(seen)
"""


@pytest.mark.parametrize("permits", [1, 2, 3])
def test_reading_the_counter_orders_it_with_acquires_and_releases(permits: int) -> None:
    """The commutative updates are recorded on the counter's own attribute, so code that reads
    ``sem._value`` (or calls ``locked()``) is ordered with every acquire and release: DPOR must
    see every value brute force sees."""
    seen = _reached(VALUE_READER.replace("{permits}", str(permits)))
    assert seen["dpor"] == seen["exhaustive"]
    values = {v[1] for o in seen["dpor"] for v in o[2] if isinstance(v, tuple)}
    assert len(values) > 1


def test_semaphore_operations_are_recorded_by_what_they_did() -> None:
    """Three jobs behind two permits, in FIFO order: the two acquires that find room write the
    permits they take (2, then 1); the third job waits (a write of the whole semaphore), the
    first release wakes it (a write); the second release wakes nobody and adds the permit it
    returns (1); the resumption, which only takes its woken waiter out of the queue, adds to
    the queued key; the last release returns permit 2."""
    calls: list[tuple[int, Any]] = []
    real = sync._record

    def spy(obj: Any, kind: int, site: int = 0, key: Any = None) -> None:
        if type(obj).__name__ in ("Semaphore", "BoundedSemaphore"):
            calls.append((kind, key))
        real(obj, kind, site, key)

    sync._record = spy
    try:
        res = _executions(SEMAPHORE_JOBS.replace("{n}", "3"), "fifo", budget=1)
    finally:
        sync._record = real
    assert res.executions == 1
    permit = sync._PERMIT
    updates = [(kind, key) for kind, key in calls if kind in (sync.W, _core.ADD)]
    assert updates == [
        (_core.ADD, sync._VALUE), (sync.W, (permit, 2)),
        (_core.ADD, sync._VALUE), (sync.W, (permit, 1)),
        (sync.W, None),  # job 2 waits
        (sync.W, None),  # job 0's release wakes it
        (_core.ADD, sync._VALUE), (_core.ADD, (permit, 1)),  # job 1's release
        (_core.ADD, sync._QUEUED), (_core.ADD, sync._WAITERS),  # job 2 resumes
        (_core.ADD, sync._VALUE), (_core.ADD, (permit, 2)),  # job 2's release
    ]  # fmt: skip
    reads = {key for kind, key in calls if kind == sync.R}
    assert reads == {sync._QUEUED, sync._PENDING}


EVENT_HANDOFF = """
import asyncio


class Shared:
    def __init__(self):
        self.n = 0


async def waiter(s, ev):
    await asyncio.sleep(0)  # the jobs start in gather's order; after this yield they float
    await ev.wait()
    return s.n


async def setter(s, ev):
    await asyncio.sleep(0)
    s.n = 42
    ev.set()


async def main(box):
    s = Shared()
    ev = asyncio.Event()
    box["final"] = tuple(await asyncio.gather(waiter(s, ev), waiter(s, ev), setter(s, ev)))
"""


def test_calling_a_primitives_method_is_not_a_write_at_the_call_site() -> None:
    """`ev.wait()` called from user code: the wrapper records the event's state itself, so
    the call site records only the attribute lookup, not a write of the whole event that
    would order the two waits (the call-site writes made eight executions).  Four: each
    waiter blocks before the set or finds it set after it (a blocking wait is ordered with
    the set that wakes it: capture/sync.py, _event_wrapper), and the two waiters do not order
    each other."""
    seen = _reached(EVENT_HANDOFF)
    assert seen["dpor"] == seen["exhaustive"] == {("ok", None, (42, 42, None))}
    res = _executions(EVENT_HANDOFF, "dpor")
    assert res.complete
    assert res.executions == 4


# ------------------------------------------------------------------ generated programs

_OPS = st.sampled_from(
    ["sleep", "log", "locked", "value", "release_extra", "waiters", "bump_value"]
)
_BODY = st.lists(st.sampled_from(["sleep", "log", "locked"]), min_size=0, max_size=2)
_JOB = st.lists(
    st.one_of(_OPS, st.tuples(st.just("with"), _BODY), st.just("cancel_waiter")),
    min_size=1,
    max_size=3,
)


def _job_source(i: int, ops: list[Any]) -> list[str]:
    out = [f"async def job{i}(s, sem, seen):"]
    for k, op in enumerate(ops):
        if op == "sleep":
            out.append("    await asyncio.sleep(0)")
        elif op == "log":
            out.append(f"    s.log.append({i * 10 + k})")
        elif op == "locked":
            out.append(f"    seen.append(({i}, sem.locked()))")
        elif op == "value":
            out.append(f"    seen.append(({i}, sem._value))")
        elif op == "waiters":
            out.append(f"    seen.append(({i}, 'waiters', len(sem._waiters or ())))")
        elif op == "bump_value":
            out.append("    sem._value += 1")
        elif op == "release_extra":
            out.append("    try:")
            out.append("        sem.release()")
            out.append("    except ValueError:")
            out.append(f"        seen.append(({i}, 'too many'))")
        elif op == "cancel_waiter":
            out.append("    t = asyncio.create_task(hold(sem))")
            out.append("    await asyncio.sleep(0)")
            out.append("    t.cancel()")
            out.append("    try:")
            out.append("        await t")
            out.append("    except asyncio.CancelledError:")
            out.append(f"        seen.append(({i}, 'cancelled'))")
        else:
            out.append("    async with sem:")
            body = op[1] or ["sleep"]
            for j, b in enumerate(body):
                if b == "sleep":
                    out.append("        await asyncio.sleep(0)")
                elif b == "locked":
                    out.append(f"        seen.append(({i}, 'in', sem.locked()))")
                else:
                    out.append(f"        s.log.append({i * 10 + k + j})")
    return out


def _program(kind: str, permits: int, jobs: list[list[Any]]) -> str:
    lines = [
        "import asyncio",
        "",
        "",
        "class Shared:",
        "    def __init__(self):",
        "        self.log = []",
        "",
        "",
        "async def hold(sem):",
        "    async with sem:",
        "        await asyncio.sleep(0)",
        "",
        "",
    ]
    for i, ops in enumerate(jobs):
        lines += _job_source(i, ops) + ["", ""]
    # each job observes into a list of its own: a shared one would order the jobs' steps
    # itself and hide a dependency the capture misses
    calls = ", ".join(f"job{i}(s, sem, seen[{i}])" for i in range(len(jobs)))
    lines += [
        "async def main(box):",
        "    s = Shared()",
        f"    sem = asyncio.{kind}({permits})",
        f"    seen = [[] for _ in range({len(jobs)})]",
        f"    await asyncio.gather({calls})",
        "    box['final'] = (tuple(s.log), sem._value, tuple(map(tuple, seen)))",
    ]
    return "\n".join(lines) + "\n"


@_GENERATED
@given(
    kind=st.sampled_from(["Semaphore", "BoundedSemaphore"]),
    permits=st.integers(1, 3),
    jobs=st.lists(_JOB, min_size=2, max_size=3),
)
def test_generated_semaphore_programs_reach_what_brute_force_reaches(
    kind: str, permits: int, jobs: list[list[Any]]
) -> None:
    source = _program(kind, permits, jobs)
    seen = _reached(source, cap=1500)
    assume(seen)
    assert seen["dpor"] == seen["exhaustive"], source


_QUEUE_OPS = st.sampled_from(
    ["put", "put_nowait", "get", "get_nowait", "qsize", "sleep", "task_done", "peek"]
)


def _queue_job_source(i: int, ops: list[str]) -> list[str]:
    out = [f"async def job{i}(q, seen):"]
    for k, op in enumerate(ops):
        item = i * 10 + k
        if op == "put":
            out.append(f"    await q.put({item})")
        elif op == "put_nowait":
            out.append("    try:")
            out.append(f"        q.put_nowait({item})")
            out.append("    except asyncio.QueueFull:")
            out.append(f"        seen.append(({i}, 'full'))")
        elif op == "get":
            out.append(f"    seen.append(({i}, await q.get()))")
        elif op == "get_nowait":
            out.append("    try:")
            out.append(f"        seen.append(({i}, q.get_nowait()))")
            out.append("    except asyncio.QueueEmpty:")
            out.append(f"        seen.append(({i}, 'empty'))")
        elif op == "qsize":
            out.append(f"    seen.append(({i}, 'size', q.qsize()))")
        elif op == "peek":
            out.append(f"    seen.append(({i}, 'items', tuple(q._queue)))")
        elif op == "task_done":
            out.append("    try:")
            out.append("        q.task_done()")
            out.append("    except ValueError:")
            out.append(f"        seen.append(({i}, 'done too often'))")
        else:
            out.append("    await asyncio.sleep(0)")
    return out


def _queue_program(kind: str, maxsize: int, prefill: int, jobs: list[list[str]]) -> str:
    lines = ["import asyncio", "", ""]
    for i, ops in enumerate(jobs):
        lines += _queue_job_source(i, ops) + ["", ""]
    # each job observes into a list of its own: a shared one would order the jobs' steps
    # itself and hide a dependency the capture misses
    calls = ", ".join(f"job{i}(q, seen[{i}])" for i in range(len(jobs)))
    lines += [
        "async def main(box):",
        f"    q = asyncio.{kind}({maxsize})",
        f"    for item in range({prefill}):",
        "        q.put_nowait(100 + item)",
        f"    seen = [[] for _ in range({len(jobs)})]",
        f"    await asyncio.gather({calls})",
        "    box['final'] = (tuple(q._queue), q._unfinished_tasks, tuple(map(tuple, seen)))",
    ]
    return "\n".join(lines) + "\n"


@_GENERATED
@given(
    kind=st.sampled_from(["Queue", "Queue", "LifoQueue"]),
    maxsize=st.integers(0, 2),
    prefill=st.integers(0, 2),
    jobs=st.lists(st.lists(_QUEUE_OPS, min_size=1, max_size=3), min_size=2, max_size=3),
)
def test_generated_queue_programs_reach_what_brute_force_reaches(
    kind: str, maxsize: int, prefill: int, jobs: list[list[str]]
) -> None:
    """Puts and gets of a FIFO queue are recorded on its ends and on whether it is empty or
    full (capture/sync.py, _moved): DPOR must reach every final brute force reaches, with
    items observed by get, get_nowait (or its QueueEmpty), put_nowait's QueueFull, qsize()
    and the items list itself."""
    assume(maxsize == 0 or prefill <= maxsize)
    source = _queue_program(kind, maxsize, prefill, jobs)
    seen = _reached(source, cap=1500)
    assume(seen)
    assert seen["dpor"] == seen["exhaustive"], source


def test_every_pair_of_queue_operations_reaches_what_brute_force_reaches() -> None:
    """Every program of two jobs doing one queue operation each, on a FIFO and a LIFO queue,
    unbounded and bounded at one, empty and holding one item: the generated programs above
    rarely draw the plain pairs where a dependency is easiest to miss (a put that lets a
    get_nowait succeed, with nothing else ordering the two jobs).  Each job yields first: jobs
    start in the order gather created them, and after that yield the two operations float."""
    ops = ["put", "put_nowait", "get", "get_nowait", "qsize", "sleep", "task_done"]
    mismatches = []
    for kind, maxsize, prefill in itertools.product(["Queue", "LifoQueue"], [0, 1], [0, 1]):
        for a, b in itertools.product(ops, repeat=2):
            source = _queue_program(kind, maxsize, prefill, [["sleep", a], ["sleep", b]])
            seen = _reached(source)
            if seen["dpor"] != seen["exhaustive"]:
                mismatches.append(source)
    assert not mismatches, mismatches[0]


def test_a_put_that_lets_a_second_get_succeed_orders_it() -> None:
    """Found by the exhaustive check of two-operation jobs: with one item queued, a put and
    then two gets; the second get succeeds only because the put came first.  A key for
    "empty or not" alone left the put and the second get unordered, and DPOR never ran the
    gets first (the second one finding the queue empty)."""
    for first in ("get", "get_nowait"):
        # each job yields first (jobs start in gather's order; after that yield they float)
        source = _queue_program("Queue", 0, 1, [["sleep", "put"], ["sleep", first, "get_nowait"]])
        seen = _reached(source)
        assert seen["dpor"] == seen["exhaustive"], source
        assert any((1, "empty") in o[2][2][1] for o in seen["dpor"])


_EVENT_OPS = st.sampled_from(
    ["wait", "wait", "set", "set", "clear", "is_set", "sleep", "log", "peek", "waiters"]
)
_EVENT_JOB = st.lists(
    st.one_of(_EVENT_OPS, st.just("wait_for"), st.just("cancel_waiter")), min_size=1, max_size=3
)


#: each Event operation's lines in a job ({i}: the job, {k}: the operation's index)
_EVENT_LINES = {
    "wait": ["await ev.wait()", "seen.append(({i}, {k}, 'woke'))"],
    "set": ["ev.set()"],
    "clear": ["ev.clear()"],
    "is_set": ["seen.append(({i}, {k}, ev.is_set()))"],
    "peek": ["seen.append(({i}, {k}, ev._value))"],
    "waiters": ["seen.append(({i}, {k}, len(ev._waiters)))"],
    "log": ["s.log.append({i} * 10 + {k})"],
    "sleep": ["await asyncio.sleep(0)"],
    "wait_for": [
        "try:",
        "    await asyncio.wait_for(ev.wait(), 0.01)",
        "    seen.append(({i}, {k}, 'in time'))",
        "except asyncio.TimeoutError:",
        "    seen.append(({i}, {k}, 'timeout'))",
    ],
    "cancel_waiter": [
        "t = asyncio.create_task(ev.wait())",
        "await asyncio.sleep(0)",
        "t.cancel()",
        "try:",
        "    seen.append(({i}, {k}, await t))",
        "except asyncio.CancelledError:",
        "    seen.append(({i}, {k}, 'cancelled'))",
    ],
}


def _event_job_source(i: int, ops: list[str]) -> list[str]:
    out = [f"async def job{i}(s, ev, seen):"]
    for k, op in enumerate(ops):
        out += ["    " + line.format(i=i, k=k) for line in _EVENT_LINES[op]]
    return out


def _event_program(preset: bool, jobs: list[list[str]]) -> str:
    lines = ["import asyncio", "", "", "class Shared:", "    def __init__(self):"]
    lines += ["        self.log = []", "", ""]
    for i, ops in enumerate(jobs):
        lines += _event_job_source(i, ops) + ["", ""]
    # each job observes into a list of its own (see _program)
    calls = ", ".join(f"job{i}(s, ev, seen[{i}])" for i in range(len(jobs)))
    lines += [
        "async def main(box):",
        "    s = Shared()",
        "    ev = asyncio.Event()",
        *(["    ev.set()"] if preset else []),
        f"    seen = [[] for _ in range({len(jobs)})]",
        f"    await asyncio.gather({calls})",
        "    box['final'] = (tuple(s.log), ev.is_set(), tuple(map(tuple, seen)))",
    ]
    return "\n".join(lines) + "\n"


@_GENERATED
@given(preset=st.booleans(), jobs=st.lists(_EVENT_JOB, min_size=2, max_size=3))
def test_generated_event_programs_reach_what_brute_force_reaches(
    preset: bool, jobs: list[list[str]]
) -> None:
    """Waits, sets and clears of an Event, with waits that time out or are cancelled and code
    peeking at its internals: DPOR must reach every final brute force reaches (a deadlock,
    every waiter left waiting, is a final too)."""
    source = _event_program(preset, jobs)
    seen = _reached(source, cap=1500)
    assume(seen)
    assert seen["dpor"] == seen["exhaustive"], source


def test_every_pair_of_event_operations_reaches_what_brute_force_reaches() -> None:
    """A job of one or two plain Event operations beside a job of one, every such pair, and
    three-job pulses: the pulse (a set and a clear between a waiter's registration and its
    wake-up) and a wait that finds the event set are where a dependency is easiest to miss.
    The pairs' jobs yield first (jobs start in gather's order; after that yield they float)."""
    ops = ["wait", "set", "clear", "is_set", "sleep"]
    mismatches = []
    jobs_of = [["sleep", a] for a in ops] + [
        ["sleep", a, b] for a, b in itertools.product(ops, repeat=2)
    ]
    for preset in (False, True):
        for a, b in itertools.product(jobs_of, [["sleep", op] for op in ops]):
            source = _event_program(preset, [a, b])
            seen = _reached(source)
            if seen["dpor"] != seen["exhaustive"]:
                mismatches.append(source)
        for trio in (
            [["wait"], ["set", "clear"], ["wait"]],
            [["wait"], ["set"], ["clear", "wait"]],
            [["wait", "wait"], ["set", "clear", "set"], ["is_set"]],
        ):
            source = _event_program(preset, trio)
            if (seen := _reached(source))["dpor"] != seen["exhaustive"]:
                mismatches.append(source)
    assert not mismatches, mismatches[0]


def test_a_set_is_ordered_with_a_cancel_of_the_task_it_wakes() -> None:
    """Found by the generated programs: a task waiting on the event, cancelled by one job while
    another sets the event.  Set first, the woken task can finish (True) before the cancel
    reaches it; cancelled first, the wait raises.  A set that completed the waiter's future
    quietly and touched nothing of its task left the set and the cancel unordered, and DPOR
    never reached True."""
    source = _event_program(False, [["cancel_waiter"], ["sleep", "set"]])
    seen = _reached(source)
    assert seen["dpor"] == seen["exhaustive"], source
    assert {o[2][2][0] for o in seen["dpor"]} == {((0, 0, True),), ((0, 0, "cancelled"),)}


def test_waiters_left_blocked_are_not_kept_alive() -> None:
    """The set's record of each waiting task holds the task weakly: executions that end with
    their waiters blocked forever (a deadlock) leave nothing of theirs alive."""
    import gc

    source = (
        "import asyncio\n\n\nasync def main(box):\n    ev = asyncio.Event()\n"
        "    await asyncio.gather(ev.wait(), ev.wait())\n"
    )
    res = _executions(source, "random", budget=20)
    assert res.executions == res.failing_executions == 20
    gc.collect()
    assert len(sync._event_futures) == 0
