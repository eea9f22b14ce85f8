"""A sliding-window rate limiter that prunes calls older than its cutoff on every acquire."""

import asyncio


class RateLimited(Exception):
    pass


class FakeClock:
    def __init__(self):
        self.now = 1000


class RateLimiter:
    def __init__(self, clock, limit, window):
        self.clock = clock
        self.limit = limit
        self.window = window
        self.calls = []

    async def acquire(self):
        cutoff = self.clock.now - self.window
        recent = [t for t in self.calls if t > cutoff]  # race
        await asyncio.sleep(0)  # the shared store's round trip
        if len(recent) >= self.limit:
            raise RateLimited()
        self.calls = recent + [self.clock.now]  # race
