"""aiojobs' Job.wait(): a job returns a value while another task waits on it; wait() gives that
value whether the job finished before or after the wait() call.
Documented bug (aiojobs issue #119 "job.wait returns None when already closed instead of real
result", PR #343 "Return task value when waiting on closed job.", 1.1.0 changelog: "Job.wait()
now returns the task value if the job is already closed."): a job that had finished (its done
callback set _closed) before wait() checked `if self._closed` made wait() return None.
Fixed in 1.1.0."""

import asyncio

import aiojobs

CASES = [
    {"requires": ["aiojobs==1.4.0"], "expect": "complete"},
    {"requires": ["aiojobs==1.1.0"], "expect": "complete"},
    {
        # async-timeout pinned: 1.0.0's _do_wait uses the sync `with timeout()` that 5.0 removed
        "requires": ["aiojobs==1.0.0", "async-timeout==4.0.3"],
        "expect": "fail",
        "hazard": "order-violation",
        # _done_callback's :127 `self._closed = True` runs before wait()'s :56 `if self._closed:`
        # check, which then returns None instead of awaiting the task's result
        "lines": ["aiojobs/_job.py:127", "aiojobs/_job.py:56"],
    },
]
INSTRUMENT = ["aiojobs"]


async def make_scheduler():
    if tuple(int(p) for p in aiojobs.__version__.split(".")[:2]) >= (1, 1):
        return aiojobs.Scheduler()  # 1.1.0+: instantiate directly, as the docs say
    return await aiojobs.create_scheduler()  # before 1.1.0 the only way


async def scenario():
    sched = await make_scheduler()

    async def compute():
        await asyncio.sleep(0)
        return 42

    job = await sched.spawn(compute())

    async def waiter():
        await asyncio.sleep(0)
        return await job.wait()

    result = await asyncio.create_task(waiter())
    assert result == 42, f"job.wait() returned {result!r}"
    await sched.close()
