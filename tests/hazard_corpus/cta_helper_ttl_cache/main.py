# expect: check-then-act scenario=read_during_invalidate
# A TTL cache (ttl.py) checks the key, awaits its statistics, then reads the value: an
# invalidation in between makes the read raise KeyError.
import asyncio

from ttl import TTLCache

seen = []


async def reader(cache):
    value = await cache.get("user:1")
    seen.append(value)


async def read_during_invalidate():
    seen.clear()
    cache = TTLCache(ttl=30)
    cache.put("user:1", {"name": "ann"})
    await asyncio.gather(reader(cache), cache.invalidate("user:1"))
    assert len(seen) == 1
