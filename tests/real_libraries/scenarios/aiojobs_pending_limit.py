"""aiojobs' Scheduler with limit=1 and pending_limit=1: three tasks spawn a job each at once;
every job runs (one at a time, the others queued) and the scheduler closes.
Documented bug (aiojobs 1.1.0 changelog: "Fix scheduler blocking forever when pending limit is
reached. (#135)", issue #98 "Scheduler stops scheduling tasks"): a spawn waiting for room in the
full pending queue was already in the scheduler's job set, so active_count exceeded the limit,
`_done` started nothing, and everything hung. Fixed in 1.1.0."""

import asyncio

import aiojobs

CASES = [
    {"requires": ["aiojobs==1.4.0"], "expect": "complete"},
    {"requires": ["aiojobs==1.1.0"], "expect": "complete"},
    {
        "requires": ["aiojobs==1.0.0"],
        "expect": "fail",
        "hazard": "deadlock",
        # :70 `self._jobs.add(job)` before :75 `await self._pending.put(job)` (the fix moved it)
        "lines": ["aiojobs/_scheduler.py:70", "aiojobs/_scheduler.py:75"],
    },
]
INSTRUMENT = ["aiojobs"]


async def make_scheduler(**kw):
    if tuple(int(p) for p in aiojobs.__version__.split(".")[:2]) >= (1, 1):
        return aiojobs.Scheduler(**kw)  # 1.1.0+: instantiate directly, as the docs say
    return await aiojobs.create_scheduler(**kw)  # before 1.1.0 the only way


async def scenario():
    sched = await make_scheduler(limit=1, pending_limit=1)
    done = []
    all_done = asyncio.Event()
    started = []
    accepted = asyncio.Event()  # the 2nd and 3rd job finish only once every spawn() returned

    async def work(i):
        started.append(i)
        await asyncio.sleep(0)
        if len(started) > 1 and started[0] != i:
            await accepted.wait()
        done.append(i)
        if len(done) == 3:
            all_done.set()

    async def spawner(i):
        # a request handler reads its request first: tasks start in creation order, so three
        # spawns in the handlers' first steps would always come before the first job ran
        await asyncio.sleep(0)
        await sched.spawn(work(i))

    await asyncio.gather(spawner(0), spawner(1), spawner(2))
    accepted.set()
    await all_done.wait()
    assert sorted(done) == [0, 1, 2]
    assert sched.pending_count == 0
    await sched.close()
    assert len(sched) == 0
