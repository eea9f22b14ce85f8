# expect: cancellation scenario=refill_with_timeout
# `async with asyncio.timeout(...)` cancels a cache refill after it dropped the old entries.
import asyncio


class Cache:
    def __init__(self):
        self.entries = {"a": 1, "b": 2}

    async def refill(self):
        self.entries = {}  # race
        await asyncio.sleep(0.02)  # race
        self.entries = {"a": 10, "b": 20}


async def refill_with_timeout():
    cache = Cache()
    try:
        async with asyncio.timeout(0.02):  # race
            await cache.refill()
    except TimeoutError:
        pass
    assert cache.entries, "cache left empty by a timed-out refill"
