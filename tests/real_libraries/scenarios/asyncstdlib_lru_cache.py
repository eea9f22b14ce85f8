"""asyncstdlib's lru_cache on a coroutine function and its tee() shared by two consumer tasks:
the cache runs the function once per key for concurrent callers, and tee, given a lock as its docs require for
consumers in several tasks, gives both every item. (Without the lock the peers' concurrent
anext() raises "asynchronous generator is already running": ChaosSloth finds that at once.)"""

import asyncio

import asyncstdlib as a

CASES = [
    {
        "requires": ["asyncstdlib==3.12.5"],
        "expect": "complete",
    }
]


async def scenario():
    calls = []

    @a.lru_cache(maxsize=4)
    async def square(x):
        calls.append(x)
        await asyncio.sleep(0)
        return x * x

    async def numbers():
        for i in range(2):
            await asyncio.sleep(0)
            yield i

    assert await asyncio.gather(square(3), square(4)) == [9, 16]
    assert await square(3) == 9 and sorted(calls) == [3, 4]
    first, second = a.tee(numbers(), n=2, lock=asyncio.Lock())
    got = await asyncio.gather(a.list(first), a.list(second))
    assert got == [[0, 1], [0, 1]]
