"""A read-through cache that lets every concurrent miss hit the backend (a stampede).

    chaossloth check examples/cache_stampede.py --scenario concurrent_misses
    chaossloth check examples/cache_stampede.py --cls Cache --method get --args "'user:1'"

Both requests see the key missing, both fetch it: the backend, which should be asked once per
key, is asked twice (check-then-act).
"""

import asyncio


class Backend:
    def __init__(self):
        self.fetches = 0

    async def fetch(self, key):
        self.fetches += 1
        await asyncio.sleep(0.001)  # the slow query the cache is there to avoid
        return f"value-of-{key}"


class Cache:
    def __init__(self):
        self.backend = Backend()
        self.data = {}

    async def get(self, key):
        if key not in self.data:
            value = await self.backend.fetch(key)
            self.data[key] = value
        return self.data[key]


async def concurrent_misses():
    cache = Cache()
    a, b = await asyncio.gather(cache.get("user:1"), cache.get("user:1"))
    assert a == b == "value-of-user:1"
    assert cache.backend.fetches == 1, f"stampede: backend fetched {cache.backend.fetches} times"


if __name__ == "__main__":
    asyncio.run(concurrent_misses())
