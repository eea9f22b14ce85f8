"""anyio on the asyncio backend: a task group of two workers behind a CapacityLimiter(1) and
an anyio.Lock around a shared counter; never more than one inside, every increment lands.
The second worker waits for the first's `async with limiter` to exit: the exit, code that
does not record itself run in a later step than the entry, is recorded there (it was not, and
DPOR's reversal of it ended as a false 'nondeterministic')."""

import asyncio

import anyio

CASES = [
    {
        "requires": ["anyio==4.6.2"],
        "expect": "complete",
    }
]


async def scenario():
    limiter = anyio.CapacityLimiter(1)
    lock = anyio.Lock()
    state = {"inside": 0, "peak": 0, "count": 0}

    async def worker():
        async with limiter:
            state["inside"] += 1
            state["peak"] = max(state["peak"], state["inside"])
            await asyncio.sleep(0)
            async with lock:
                v = state["count"]
                await asyncio.sleep(0)
                state["count"] = v + 1
            state["inside"] -= 1

    async with anyio.create_task_group() as tg:
        for _ in range(2):
            tg.start_soon(worker)
    assert state["count"] == 2
    assert state["peak"] <= 1
