"""asyncache's @cached over cachetools' TTLCache on a coroutine function: two tasks ask for
two keys concurrently; each caller gets its own key's value."""

import asyncio

from asyncache import cached
from cachetools import TTLCache

CASES = [{"requires": ["asyncache==0.3.1", "cachetools==5.5.0"], "expect": "complete"}]


async def scenario():
    @cached(TTLCache(maxsize=8, ttl=60))
    async def load(k):
        await asyncio.sleep(0)
        return f"v{k}"

    assert await asyncio.gather(load(1), load(2), load(1)) == ["v1", "v2", "v1"]
