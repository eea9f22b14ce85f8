# expect: lost-update scenario=two_misses
# An LRU cache bounded in bytes (lru.py): two misses read `used`, await the loader, and each
# stores its own sum, losing the other's bytes.
import asyncio

from lru import LRUCache

calls = []


async def load(key):
    calls.append(key)
    await asyncio.sleep(0)  # the origin server
    return key * 10


async def serve(cache, key):
    await asyncio.sleep(0)  # parse the request
    return await cache.get(key)


async def two_misses():
    cache = LRUCache(load)
    results = await asyncio.gather(serve(cache, "a"), serve(cache, "b"))
    expected = sum(len(v) for v in results)
    assert cache.used == expected, f"used={cache.used}, cached bytes={expected}"
