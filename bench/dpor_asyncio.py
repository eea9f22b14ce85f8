"""Executions DPOR needs on programs built from asyncio's primitives, against brute force and
against the number of distinct orders of a primitive-level model of the same program.

Workloads (real asyncio code, loaded through the capture instrumentation):
  semaphore  four jobs behind ``asyncio.Semaphore(2)``, each updating one shared counter in
             one step after an ``await asyncio.sleep(0)`` inside the semaphore
  pipeline   a three-stage ``asyncio.Queue`` pipeline: a producer puts 2 items, a middle stage
             gets and forwards them, a sink collects them
  event      an ``asyncio.Event`` handoff: a producer stores a value and sets the event, two
             consumers wait on it and read the value
  condition  an ``asyncio.Condition``: two consumers wait (``wait_for``) for an item a producer
             appends and notifies, each taking one
  awaiters   four tasks awaiting one shared task (an in-flight request's result), which
             sleeps once and stores before it returns
  lock       four jobs behind one ``asyncio.Lock``, each a read, an ``await asyncio.sleep(0)``
             and a write of one shared counter inside it

Every job yields once before its first operation: asyncio starts tasks in the order they were
created, so without it the jobs' first operations would run in gather's order only, which the
model (any interleaving) does not know; after that yield the jobs' steps float, as the model's.

Per workload: DPOR's executions (and whether it completed), brute force's (the ``exhaustive``
strategy: every schedule), and the model's distinct orders.  Each exploration is capped at
``--budget`` executions; a row that hits it says "budget hit" (its count is a lower bound).

The model: each job is its sequence of primitive operations (acquire, release, put, get, set,
wait, notify, and the shared-state accesses), a blocked operation is simply not enabled (no
futures, no wake-up callbacks), and two operations are dependent when they touch the same object
and one of them changes it.  The distinct orders are its Mazurkiewicz traces: every
interleaving the model allows, identified by the order of the conflicting operations of each
object.  It is what a DPOR that treats each primitive operation as one access of the primitive
would explore at best.  ChaosSloth goes below it where operations commute: a semaphore's
acquires that find room at different counts, its releases that wake nobody, a FIFO queue's put
and get that neither empty nor fill it (capture/sync.py), and gather()'s done-callbacks, which
count their children without ordering each other (ext/loop.c, record_shared_state), so DPOR
can need fewer executions than the model has orders.  It goes above it where asyncio's
implementation has states the model has not: a waiting acquire or get is a step of its own
(it queues a waiter), and a woken waiter resumes in a later step.  An Event's blocked wait is
ordered with the set that wakes it (capture/sync.py, _event_wrapper), and a task's blocking
await of a shared task with its completion (RecordingFuture), so each waiter blocks before it
or passes after it: 2^N executions where the model, whose blocked operations are disabled,
has 1 (the waiters do not order each other).  A Lock's contended acquire is the same case: it
blocks before the release that lets it in or passes after it, and its operations are writes of
the whole lock, so four jobs take 23 times the model's 4! orders.  Issue 14's goal: DPOR
within 2x of it.  Usage:
    python bench/dpor_asyncio.py [--budget N]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROGRAMS = """\
import asyncio


class Shared:
    def __init__(self):
        self.n = 0
        self.items = []


async def semaphore_job(s, sem):
    await asyncio.sleep(0)  # the job's own work first
    async with sem:
        await asyncio.sleep(0)
        s.n = s.n + 1  # the critical section: one step


async def semaphore():
    s = Shared()
    sem = asyncio.Semaphore(2)
    await asyncio.gather(*[semaphore_job(s, sem) for _ in range(4)])
    assert s.n == 4


async def produce(q1):
    await asyncio.sleep(0)  # the job's own work first
    for i in range(2):
        await q1.put(i)


async def forward(q1, q2):
    await asyncio.sleep(0)  # the job's own work first
    for _ in range(2):
        await q2.put(await q1.get())


async def sink(q2, s):
    await asyncio.sleep(0)  # the job's own work first
    for _ in range(2):
        s.items.append(await q2.get())


async def pipeline():
    s = Shared()
    q1, q2 = asyncio.Queue(), asyncio.Queue()
    await asyncio.gather(produce(q1), forward(q1, q2), sink(q2, s))
    assert s.items == [0, 1]


async def event_set(s, ev):
    await asyncio.sleep(0)  # the job's own work first
    s.n = 42
    ev.set()


async def event_wait(s, ev):
    await asyncio.sleep(0)  # the job's own work first
    await ev.wait()
    return s.n


async def event():
    s = Shared()
    ev = asyncio.Event()
    got = await asyncio.gather(event_wait(s, ev), event_wait(s, ev), event_set(s, ev))
    assert got[:2] == [42, 42]


async def cond_take(s, cond):
    await asyncio.sleep(0)  # the job's own work first
    async with cond:
        await cond.wait_for(lambda: s.items)
        return s.items.pop()


async def cond_give(s, cond):
    await asyncio.sleep(0)  # the job's own work first
    for i in range(2):
        async with cond:
            s.items.append(i)
            cond.notify()


async def condition():
    s = Shared()
    cond = asyncio.Condition()
    got = await asyncio.gather(cond_take(s, cond), cond_take(s, cond), cond_give(s, cond))
    assert sorted(got[:2]) == [0, 1]


async def fetch(s):
    await asyncio.sleep(0)
    s.n = 42
    return s.n


async def await_shared(request):
    await asyncio.sleep(0)  # the job's own work first
    return await request


async def awaiters():
    s = Shared()
    request = asyncio.ensure_future(fetch(s))
    got = await asyncio.gather(*[await_shared(request) for _ in range(4)])
    assert got == [42] * 4


async def lock_job(s, lock):
    await asyncio.sleep(0)  # the job's own work first
    async with lock:
        x = s.n
        await asyncio.sleep(0)
        s.n = x + 1


async def lock():
    s = Shared()
    lk = asyncio.Lock()
    await asyncio.gather(*[lock_job(s, lk) for _ in range(4)])
    assert s.n == 4
"""

# ------------------------------------------------------------------ the primitive-level model

R, W = "r", "w"


@dataclass(frozen=True)
class Op:
    """One primitive operation: the objects it reads and writes, when it is enabled (a guard
    on the model's state) and what it does to the state."""

    reads: tuple[str, ...]
    writes: tuple[str, ...]
    guard: Callable[[dict[str, int]], bool]
    effect: Callable[[dict[str, int]], None]


def _always(st: dict[str, int]) -> bool:
    return True


def _nothing(st: dict[str, int]) -> None:
    return None


def _add(key: str, d: int) -> Callable[[dict[str, int]], None]:
    def effect(st: dict[str, int]) -> None:
        st[key] += d

    return effect


def _positive(key: str) -> Callable[[dict[str, int]], bool]:
    return lambda st: st[key] > 0


def op(
    reads: tuple[str, ...] = (),
    writes: tuple[str, ...] = (),
    guard: Callable[[dict[str, int]], bool] = _always,
    effect: Callable[[dict[str, int]], None] = _nothing,
) -> Op:
    return Op(reads, writes, guard, effect)


def model_semaphore() -> tuple[dict[str, int], list[list[Op]]]:
    # acquire (blocked while no permit), then one step: the counter's read-modify-write and
    # the release (``async with`` releases in the step that leaves the block)
    job = [
        op(writes=("sem",), guard=_positive("permits"), effect=_add("permits", -1)),
        op(writes=("n", "sem"), effect=_add("permits", 1)),
    ]
    return {"permits": 2}, [list(job) for _ in range(4)]


def model_pipeline() -> tuple[dict[str, int], list[list[Op]]]:
    put1 = op(writes=("q1",), effect=_add("q1", 1))
    get1 = op(writes=("q1",), guard=_positive("q1"), effect=_add("q1", -1))
    put2 = op(writes=("q2",), effect=_add("q2", 1))
    get2 = op(writes=("q2",), guard=_positive("q2"), effect=_add("q2", -1))
    out = op(writes=("items",))
    return {"q1": 0, "q2": 0}, [[put1, put1], [get1, put2, get1, put2], [get2, out, get2, out]]


def model_event() -> tuple[dict[str, int], list[list[Op]]]:
    wait = op(reads=("ev",), guard=_positive("set"))
    read = op(reads=("n",))
    setter = [op(writes=("n",)), op(writes=("ev",), effect=_add("set", 1))]
    return {"set": 0}, [[wait, read], [wait, read], setter]


def model_condition() -> tuple[dict[str, int], list[list[Op]]]:
    # The condition's lock is only ever held within one step (no await inside it but the
    # wait, which releases it), so lock and unlock fold into the operations.  A consumer looks
    # (takes the lock, checks for an item: the condition's waiters change when it waits) and
    # takes an item once there is one (after a notify, or at once); the producer gives twice
    # (append and notify under the lock).
    look = op(reads=("items",), writes=("cond",))
    take = op(writes=("cond", "items"), guard=_positive("items"), effect=_add("items", -1))
    give = op(writes=("cond", "items"), effect=_add("items", 1))
    return {"items": 0}, [[look, take], [look, take], [give, give]]


def count_traces(state: dict[str, int], jobs: list[list[Op]], cap: int) -> tuple[int, bool]:
    """(distinct Mazurkiewicz traces, complete) of the model, enumerating at most `cap`
    interleavings.  A trace is identified by, per object, its writes in order with the reads
    between two writes as a set."""
    seen: set[Any] = set()
    interleavings = 0
    objects = sorted({o for job in jobs for x in job for o in (*x.reads, *x.writes)})
    index = {o: i for i, o in enumerate(objects)}

    def key(hist: list[list[Any]]) -> Any:
        return tuple(tuple(h) for h in hist)

    def dfs(pcs: list[int], st: dict[str, int], hist: list[list[Any]]) -> bool:
        nonlocal interleavings
        enabled = [j for j, pc in enumerate(pcs) if pc < len(jobs[j]) and jobs[j][pc].guard(st)]
        if not enabled:
            interleavings += 1
            seen.add(key(hist))
            return interleavings < cap
        for j in enabled:
            x = jobs[j][pcs[j]]
            ident = (j, pcs[j])
            st2 = dict(st)
            x.effect(st2)
            hist2 = [list(h) for h in hist]
            for o in x.writes:
                hist2[index[o]].append(ident)
            for o in x.reads:
                h = hist2[index[o]]
                if h and isinstance(h[-1], frozenset):
                    h[-1] = h[-1] | {ident}
                else:
                    h.append(frozenset({ident}))
            pcs[j] += 1
            go_on = dfs(pcs, st2, hist2)
            pcs[j] -= 1
            if not go_on:
                return False
        return True

    complete = dfs([0] * len(jobs), dict(state), [[] for _ in objects])
    return len(seen), complete


def model_awaiters() -> tuple[dict[str, int], list[list[Op]]]:
    # the request's store and completion, then each awaiter's read of its result, enabled once
    # it is done
    fetch = [op(writes=("n",)), op(writes=("request",), effect=_add("done", 1))]
    wait = op(reads=("request",), guard=_positive("done"))
    return {"done": 0}, [fetch] + [[wait] for _ in range(4)]


def model_lock() -> tuple[dict[str, int], list[list[Op]]]:
    # acquire (blocked while held) with the read in its step, then the write and the release
    # in the step after the sleep
    job = [
        op(writes=("lock", "n"), guard=_positive("free"), effect=_add("free", -1)),
        op(writes=("n", "lock"), effect=_add("free", 1)),
    ]
    return {"free": 1}, [list(job) for _ in range(4)]


MODELS: dict[str, Callable[[], tuple[dict[str, int], list[list[Op]]]]] = {
    "semaphore": model_semaphore,
    "pipeline": model_pipeline,
    "event": model_event,
    "condition": model_condition,
    "awaiters": model_awaiters,
    "lock": model_lock,
}


# ------------------------------------------------------------------ ChaosSloth


def explore(program: Any, strategy: str, budget: int) -> tuple[Any, float]:
    from chaossloth import runner

    t0 = time.perf_counter()
    r = runner.explore(
        program.factory,
        strategy=strategy,
        max_executions=budget,
        stop_on_failure=False,
        detail_failure=False,
    )
    return r, time.perf_counter() - t0


def cell(r: Any, secs: float) -> str:
    done = "complete" if r.complete else "budget hit" if r.budget_hit else "incomplete"
    return f"{r.executions:>8} {done:<10} {secs:>6.1f}s"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--budget", type=int, default=20000, help="executions per row (20000)")
    args = ap.parse_args(argv)

    from chaossloth import scenario
    from chaossloth.config import Config

    tmp = Path(tempfile.mkdtemp(prefix="chaossloth-dpor-asyncio-"))
    path = tmp / "primitive_programs.py"
    path.write_text(PROGRAMS)
    print(f"executions needed, each exploration capped at {args.budget}")
    print(
        f"{'workload':<10} {'model':>7} {'dpor':>8} {'':<10} {'':>7} "
        f"{'exhaustive':>10} {'':<10} {'':>7} {'dpor/model':>10}"
    )
    for name, model in MODELS.items():
        state, jobs = model()
        orders, model_complete = count_traces(state, jobs, 2_000_000)
        program = scenario.load(str(path), Config(scenario=name))
        try:
            dpor, dpor_s = explore(program, "dpor", args.budget)
            brute, brute_s = explore(program, "exhaustive", args.budget)
        finally:
            program.release()
        ratio = dpor.executions / orders if orders else float("nan")
        more = "" if model_complete else "+"
        # a capped DPOR row's ratio is a lower bound
        shown = f"{ratio:.1f}" if dpor.complete else f">={ratio:.1f}"
        print(
            f"{name:<10} {orders:>6}{more} {cell(dpor, dpor_s)}  {cell(brute, brute_s)} "
            f"{shown:>10}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
