"""anyio on the asyncio backend: a task group of four workers behind a CapacityLimiter(2) and
an anyio.Lock around a shared counter; never more than two inside, every increment lands."""

import asyncio

import anyio

CASES = [
    {
        "requires": ["anyio==4.6.2"],
        "expect": "complete",
        "steps_differ": "anyio's address-ordered task set and weak task states (see below)",
        "known_limitation": (
            "reported 'nondeterministic' (exit 2): anyio keeps its task group's tasks in a set "
            "its own code iterates in an order of addresses, and its task states in a "
            "WeakKeyDictionary whose dead entries go when the collector runs; the steps differ "
            "between hash seeds too"
        ),
    }
]


async def scenario():
    limiter = anyio.CapacityLimiter(2)
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
        for _ in range(3):
            tg.start_soon(worker)
    assert state["count"] == 3
    assert state["peak"] <= 2
