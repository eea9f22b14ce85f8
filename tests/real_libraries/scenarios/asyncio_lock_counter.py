"""An asyncio.Lock held across an await by three workers: the counter is exact (issue 35's
second program; with ChaosSloth installed into site-packages it was once reported
'nondeterministic' through its own capture wrappers)."""

import asyncio

CASES = [{"requires": [], "expect": "complete"}]


async def scenario():
    lock = asyncio.Lock()
    n = 0

    async def work():
        nonlocal n
        async with lock:
            await asyncio.sleep(0)
            n += 1

    await asyncio.gather(work(), work(), work())
    assert n == 3
