"""aiocache's SimpleMemoryCache: two tasks race a get-or-compute on one key behind
aiocache's RedLock, so the value is computed once and both read it."""

import asyncio

from aiocache import SimpleMemoryCache
from aiocache.lock import RedLock

CASES = [{"requires": ["aiocache==0.12.3"], "expect": "complete"}]


async def scenario():
    cache = SimpleMemoryCache()
    computed = []

    async def get_or_compute(key):
        value = await cache.get(key)
        if value is not None:
            return value
        async with RedLock(cache, key, lease=2):
            value = await cache.get(key)
            if value is None:
                computed.append(key)
                await asyncio.sleep(0)
                value = f"v-{key}"
                await cache.set(key, value)
        return value

    results = await asyncio.gather(get_or_compute("k"), get_or_compute("k"))
    assert results == ["v-k", "v-k"]
    assert computed == ["k"]
