"""DPOR against brute force on small programs shaped like production services.

The generated programs of test_dpor_asyncio, test_dpor_primitives and test_dpor_futures each
draw from a grammar; these are written by hand after the idioms services use, each combining
asyncio machinery that the grammars keep apart: a timeout around a lock, a TaskGroup whose
child fails, back-pressure through a bounded queue, a semaphore whose waiter is cancelled, a
condition's notify_all, ``wait_for`` on an event, a shielded in-flight request shared by its
callers (a "singleflight" cache), ``as_completed``, a Barrier, a lock waiter cancelled
while a release hands it the lock, and a TTL cache whose entries expire by ``time.monotonic()``
(the loop's clock while it runs: capture/entropy.py).

Each is explored by brute force (``exhaustive``), by DPOR, and by DPOR with its tree shared by
two processes (``--jobs 2``, sharing from the first execution); the three must reach the same
set of outcomes (the final state the program stores, the execution's outcome and failure), and
DPOR must need fewer executions than brute force.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from test_share import outcomes

from chaossloth import runner, scenario

PROGRAMS: dict[str, str] = {}

PROGRAMS["timeout_around_lock"] = """
import asyncio

async def worker(lock, box, name, limit):
    try:
        async with asyncio.timeout(limit):
            async with lock:
                box["log"].append(name)
                await asyncio.sleep(0.01)
                box["log"].append(name + "!")
    except TimeoutError:
        box["log"].append(name + " timed out")

async def main(box):
    box["log"] = []
    lock = asyncio.Lock()
    await asyncio.gather(
        worker(lock, box, "a", 0.015), worker(lock, box, "b", 0.015), worker(lock, box, "c", 1)
    )
    box["final"] = (tuple(box["log"]), lock.locked())
"""

PROGRAMS["taskgroup_child_fails"] = """
import asyncio

class Stats:
    n = 0

async def job(s, i):
    x = s.n
    await asyncio.sleep(0)
    if x == 1 and i == 2:
        raise ValueError("boom")
    s.n = x + 1

async def main(box):
    s = Stats()
    failed = False
    try:
        async with asyncio.TaskGroup() as tg:
            for i in range(3):
                tg.create_task(job(s, i))
    except* ValueError:
        failed = True
    box["final"] = (s.n, failed)
"""

PROGRAMS["bounded_queue_backpressure"] = """
import asyncio

async def produce(q, box):
    for i in range(3):
        await q.put(i)
        box["log"].append(("put", i))

async def consume(q, box, name, n):
    for _ in range(n):
        v = await q.get()
        box["log"].append((name, v))
        q.task_done()

async def main(box):
    box["log"] = []
    q = asyncio.Queue(maxsize=1)
    await asyncio.gather(produce(q, box), consume(q, box, "x", 1), consume(q, box, "y", 2))
    box["final"] = tuple(box["log"])
"""

PROGRAMS["semaphore_waiter_cancelled"] = """
import asyncio

async def worker(sem, box, name):
    try:
        async with sem:
            box["log"].append(name)
            await asyncio.sleep(0)
    except asyncio.CancelledError:
        box["log"].append(name + " cancelled")
        raise

async def main(box):
    box["log"] = []
    sem = asyncio.Semaphore(1)
    tasks = [asyncio.ensure_future(worker(sem, box, n)) for n in "abc"]
    await asyncio.sleep(0)
    tasks[1].cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    box["final"] = (tuple(box["log"]), sem.locked())
"""

PROGRAMS["condition_notify_all"] = """
import asyncio

async def waiter(cond, box, name):
    async with cond:
        await cond.wait_for(lambda: box["ready"])
        box["log"].append(name)

async def announce(cond, box):
    await asyncio.sleep(0)
    async with cond:
        box["ready"] = True
        cond.notify_all()

async def main(box):
    box["log"] = []
    box["ready"] = False
    cond = asyncio.Condition()
    await asyncio.gather(waiter(cond, box, "a"), waiter(cond, box, "b"), announce(cond, box))
    box["final"] = tuple(box["log"])
"""

PROGRAMS["wait_for_event"] = """
import asyncio

async def bounded(ev, box):
    try:
        await asyncio.wait_for(ev.wait(), 0.01)
        box["log"].append("bounded")
    except TimeoutError:
        box["log"].append("bounded timed out")

async def announce(ev, box):
    await asyncio.sleep(0.01)
    ev.set()
    box["log"].append("set")

async def main(box):
    box["log"] = []
    ev = asyncio.Event()
    await asyncio.gather(bounded(ev, box), announce(ev, box))
    box["final"] = tuple(box["log"])
"""

PROGRAMS["shielded_singleflight"] = """
import asyncio

class Cache:
    def __init__(self):
        self.inflight = None
        self.calls = 0

    async def fetch(self):
        self.calls += 1
        await asyncio.sleep(0)
        return self.calls

    async def get(self):
        if self.inflight is None:
            self.inflight = asyncio.ensure_future(self.fetch())
        return await asyncio.shield(self.inflight)

async def main(box):
    c = Cache()
    got = await asyncio.gather(c.get(), c.get())
    box["final"] = (tuple(got), c.calls)
"""

PROGRAMS["as_completed"] = """
import asyncio

class Log:
    def __init__(self):
        self.done = []

async def job(log, i):
    await asyncio.sleep(0)
    log.done.append(i)
    return i

async def main(box):
    log = Log()
    got = []
    # tasks, not coroutines: as_completed makes a task of each coroutine in the order of a set
    # of them, an order of addresses, which a --jobs fork need not share with its giver
    jobs = [asyncio.ensure_future(job(log, i)) for i in range(3)]
    for f in asyncio.as_completed(jobs):
        got.append(await f)
    box["final"] = (tuple(got), tuple(log.done))
"""

PROGRAMS["barrier"] = """
import asyncio

async def party(barrier, box, name):
    box["log"].append(name)
    index = await barrier.wait()
    box["log"].append((name, index))

async def main(box):
    box["log"] = []
    barrier = asyncio.Barrier(2)
    await asyncio.gather(party(barrier, box, "a"), party(barrier, box, "b"))
    box["final"] = tuple(box["log"])
"""

PROGRAMS["lock_waiter_cancelled_on_handoff"] = """
import asyncio

async def holder(lock, box):
    async with lock:
        await asyncio.sleep(0)
        box["log"].append("holder")

async def waiter(lock, box, name):
    async with lock:
        box["log"].append(name)

async def main(box):
    box["log"] = []
    lock = asyncio.Lock()
    h = asyncio.ensure_future(holder(lock, box))
    a = asyncio.ensure_future(waiter(lock, box, "a"))
    b = asyncio.ensure_future(waiter(lock, box, "b"))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    a.cancel()
    await asyncio.gather(h, a, b, return_exceptions=True)
    box["final"] = (tuple(box["log"]), lock.locked(), a.cancelled())
"""

PROGRAMS["ttl_cache_on_the_clock"] = """
import asyncio
import time

class Cache:
    def __init__(self):
        self.value = None
        self.stamp = None
        self.loads = 0

async def get(c, box, name):
    now = time.monotonic()
    if c.stamp is None or now - c.stamp >= 1.0:
        c.loads += 1
        await asyncio.sleep(0.5)
        c.value, c.stamp = name, time.monotonic()
    box["log"].append((name, c.value, time.monotonic()))

async def late(c, box, delay):
    await asyncio.sleep(delay)
    await get(c, box, "late")

async def main(box):
    box["log"] = []
    c = Cache()
    await asyncio.gather(get(c, box, "a"), get(c, box, "b"), late(c, box, 1.2),
                         late(c, box, 1.5))
    box["final"] = (tuple(box["log"]), c.loads)
"""

_DIR = Path(tempfile.mkdtemp(prefix="chaossloth-services-"))


@pytest.fixture(autouse=True)
def share_at_once(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The jobs=2 runs share their tree from the first execution on (small programs would
    otherwise end before share.GIVE_AFTER)."""
    monkeypatch.setenv("CHAOSSLOTH_SHARE_AFTER", "0")
    yield


def _observe(r: runner.ExecutionResult, box: dict[str, Any]) -> Any:
    failure = (r.failure.kind, r.failure.type_name) if r.failure else None
    return (r.outcome, failure, box.get("final"))


def _explore(
    main: Callable[[dict[str, Any]], Any], strategy: str, jobs: int
) -> tuple[set[str], runner.ExplorationResult]:
    """(every outcome reached, as text written by whichever process ran it; the result)."""

    def factory_of(holder: list[Any]) -> Callable[[], Any]:
        def factory() -> Any:
            holder[0] = {}
            return main(holder[0])

        return factory

    return outcomes(factory_of, _observe, strategy, jobs, max_executions=40_000)


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_dpor_reaches_brute_forces_outcomes_on_service_idioms(name: str) -> None:
    path = _DIR / f"{name}.py"
    path.write_text(PROGRAMS[name])
    main = scenario.load_module(path).main
    brute, brute_res = _explore(main, "exhaustive", 1)
    assert brute_res.complete, f"{name}: brute force did not finish"
    dpor, dpor_res = _explore(main, "dpor", 1)
    assert dpor_res.complete
    assert dpor == brute, f"{name}: only brute force {brute - dpor}; only DPOR {dpor - brute}"
    assert dpor_res.executions < brute_res.executions
    shared, shared_res = _explore(main, "dpor", 2)
    assert shared_res.complete
    assert shared == brute, (
        f"{name}, --jobs 2: only brute {brute - shared}; only shared {shared - brute}"
    )
