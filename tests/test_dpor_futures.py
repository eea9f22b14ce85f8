"""Several tasks awaiting one future or task: DPOR against brute force.

A task that awaits a pending future registers its wake-up and is woken by the completion; one
that awaits it done passes at once.  capture/sync.py records the registration as an add to the
future's callbacks (two tasks' registrations do not order each other), and the completion as a
write of the future's state and callbacks.  This file checks that nothing is lost by it: on
generated programs (awaits, plain callbacks, cancels of the future and of its waiters, peeks at
its internals, timeouts, awaits driven by hand) DPOR reaches every final brute force reaches,
and the counts show the reduction.
"""

from __future__ import annotations

import itertools

from hypothesis import assume, given
from hypothesis import strategies as st
from test_dpor_primitives import _GENERATED, _executions, _reached

#: each operation's lines in a job ({i}: the job, {k}: the operation's index); `f` is the
#: shared future (or task), `s.log` a shared list, `seen` the job's own observations
_LINES = {
    "await": [
        "try:",
        "    seen.append(({i}, {k}, await f))",
        "except asyncio.CancelledError:",
        "    seen.append(({i}, {k}, 'cancelled'))",
    ],
    "done": ["seen.append(({i}, {k}, f.done()))"],
    "set": [
        "if not f.done():",
        "    f.set_result({i})",
    ],
    "fail": [
        "if not f.done():",
        "    f.set_exception(KeyError({i}))",
    ],
    "cancel": ["seen.append(({i}, {k}, f.cancel()))"],
    "callbacks": ["seen.append(({i}, {k}, len(f._callbacks)))"],
    "plain_cb": ["f.add_done_callback(lambda _: s.log.append(('cb', {i}, {k})))"],
    "remove_cb": ["seen.append(({i}, {k}, f.remove_done_callback(s.callback)))"],
    "log": ["s.log.append({i} * 10 + {k})"],
    "sleep": ["await asyncio.sleep(0)"],
    "wait_for": [
        "try:",
        "    seen.append(({i}, {k}, await asyncio.wait_for(f, 0.01)))",
        "except asyncio.TimeoutError:",
        "    seen.append(({i}, {k}, 'timeout'))",
        "except asyncio.CancelledError:",
        "    seen.append(({i}, {k}, 'cancelled'))",
    ],
    # drives an await by hand: sees the future pending (it yields) or done, no task blocks
    "peek_await": [
        "try:",
        "    next(f.__await__())",
        "    seen.append(({i}, {k}, 'pending'))",
        "except StopIteration as stop:",
        "    seen.append(({i}, {k}, stop.value))",
        "except BaseException as e:",
        "    seen.append(({i}, {k}, type(e).__name__))",
    ],
    "cancel_waiter": [
        "w = asyncio.ensure_future(awaiting(f))",
        "await asyncio.sleep(0)",
        "w.cancel()",
        "try:",
        "    seen.append(({i}, {k}, await w))",
        "except asyncio.CancelledError:",
        "    seen.append(({i}, {k}, 'cancelled'))",
    ],
}

_HEADER = """\
import asyncio


class Shared:
    def __init__(self):
        self.log = []

    def callback(self, fut):
        self.log.append('registered')


async def awaiting(f):
    try:
        return await f
    except KeyError:
        return 'failed'


async def produce(s):
    await asyncio.sleep(0)
    s.log.append('produced')
    return 'p'
"""


def _program(shared: str, jobs: list[list[str]]) -> str:
    """`shared`: "future" (a plain future the jobs may complete), "task" (a task that
    completes after one sleep) or "done" (a future completed before the jobs start)."""
    lines = [_HEADER, ""]
    for i, ops in enumerate(jobs):
        lines.append(f"async def job{i}(s, f, seen):")
        for k, op in enumerate(ops):
            lines += ["    " + line.format(i=i, k=k) for line in _LINES[op]]
        lines += ["", ""]
    make = {
        "future": "asyncio.get_running_loop().create_future()",
        "task": "asyncio.ensure_future(produce(s))",
        "done": "asyncio.get_running_loop().create_future()",
    }[shared]
    calls = ", ".join(f"job{i}(s, f, seen[{i}])" for i in range(len(jobs)))
    lines += [
        "async def main(box):",
        "    s = Shared()",
        f"    f = {make}",
        *(["    f.set_result('early')"] if shared == "done" else []),
        # a plain callback for remove_cb to remove
        *(["    f.add_done_callback(s.callback)"] if any("remove_cb" in j for j in jobs) else []),
        f"    seen = [[] for _ in range({len(jobs)})]",
        f"    await asyncio.gather({calls}, return_exceptions=True)",
        "    state = f.cancelled() or (f.done() and repr(f.exception()))",
        "    box['final'] = (tuple(s.log), state, tuple(map(tuple, seen)))",
    ]
    return "\n".join(lines) + "\n"


_OPS = st.sampled_from(
    ["await", "await", "await", "done", "set", "set", "fail", "cancel", "callbacks",
     "plain_cb", "remove_cb", "log", "sleep", "wait_for", "cancel_waiter", "peek_await"]
)  # fmt: skip


@_GENERATED
@given(
    shared=st.sampled_from(["future", "task", "done"]),
    jobs=st.lists(st.lists(_OPS, min_size=1, max_size=3), min_size=2, max_size=3),
)
def test_generated_shared_future_programs_reach_what_brute_force_reaches(
    shared: str, jobs: list[list[str]]
) -> None:
    """DPOR must reach every final brute force reaches (a deadlock, awaiters left waiting on
    a future nobody completes, is a final too)."""
    source = _program(shared, jobs)
    seen = _reached(source, cap=1500)
    assume(seen)
    assert seen["dpor"] == seen["exhaustive"], source


def test_every_pair_of_future_operations_reaches_what_brute_force_reaches() -> None:
    """A job of one or two operations beside a job of one, every such pair on a plain
    future and on a task: an await that blocks beside the operation that completes, cancels
    or observes the future is where a dependency is easiest to miss.  Each job yields first
    (jobs start in gather's order; after that yield they float)."""
    ops = ["await", "set", "cancel", "done", "callbacks", "plain_cb", "sleep"]
    mismatches = []
    jobs_of = [["sleep", a] for a in ops] + [
        ["sleep", a, b] for a, b in itertools.product(ops, repeat=2)
    ]
    for shared in ("future", "task"):
        for a, b in itertools.product(jobs_of, [["sleep", op] for op in ops]):
            source = _program(shared, [a, b])
            if (seen := _reached(source))["dpor"] != seen["exhaustive"]:
                mismatches.append(source)
    assert not mismatches, mismatches[0]


def test_an_await_driven_by_hand_is_ordered_with_the_completion() -> None:
    """A coroutine driven by hand (no task registers a wake-up) sees the future pending or
    done: that await is a write of the whole future at its step's end (the yield leaves the
    future's blocking flag set, so that a later await of it raises), ordered with the
    completion and with other awaits, not a blocking await."""
    cases = (
        ("future", ["set"]),
        ("future", ["cancel"]),
        ("task", ["sleep"]),
        ("future", ["await"]),
    )
    for shared, other in cases:
        # each job yields first: the jobs start in gather's order, after the shared task's
        # first step, and that task's next step follows their first steps (its sleep(0) lets
        # them start); after that yield the steps float
        source = _program(shared, [["sleep", "peek_await"], ["sleep", *other]])
        seen = _reached(source)
        assert seen["dpor"] == seen["exhaustive"], source
        assert len(seen["dpor"]) >= 2, source


def _awaiters(n: int, shared: str) -> str:
    """N jobs that yield once and then await the shared future or task.  Without that yield
    each await would run in its job's first step, which every asyncio loop runs before the
    completion (the jobs start in the order gather created them, and the completing step of
    the task or the setter comes after its own sleep(0), which lets them start)."""
    awaiter = ["sleep", "await"]
    return _program(shared, [awaiter] * n + ([["sleep", "set"]] if shared == "future" else []))


def test_awaiters_of_one_task_do_not_order_each_other() -> None:
    """N tasks awaiting one task, which completes after a sleep: each awaiter blocks before
    the completion or passes after it, and the awaiters do not order each other, so 2^N
    executions (it took 11, 49, 261, 1,631 for N = 2..5 when each registration wrote the
    whole task)."""
    for n in (2, 3, 5):
        r = _executions(_awaiters(n, "task"), "dpor")
        assert r.complete and r.executions == 2**n, (n, r.executions)


def test_awaiters_of_one_future_do_not_order_each_other() -> None:
    """The same with a plain future that a further job completes after a sleep."""
    for n in (2, 4):
        r = _executions(_awaiters(n, "future"), "dpor")
        assert r.complete and r.executions == 2**n, (n, r.executions)
