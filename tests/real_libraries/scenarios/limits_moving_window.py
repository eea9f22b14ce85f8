"""limits' async moving-window strategy on its in-memory storage: three tasks hit a 3-per-minute
limit for one key at once; exactly three are allowed."""

import asyncio

from limits import parse
from limits.aio.storage import MemoryStorage
from limits.aio.strategies import MovingWindowRateLimiter

CASES = [{"requires": ["limits==3.13.0"], "expect": "complete"}]


async def scenario():
    storage = MemoryStorage()
    limiter = MovingWindowRateLimiter(storage)
    rate = parse("2/minute")

    async def hit():
        return await limiter.hit(rate, "user")

    allowed = await asyncio.gather(*(hit() for _ in range(3)))
    assert sum(allowed) == 2, allowed
