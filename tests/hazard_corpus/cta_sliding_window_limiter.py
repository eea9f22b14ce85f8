# expect: check-then-act scenario=two_calls
# A sliding-window rate limiter: the limit check and the recording of the call are separated
# by the call to the backend, so both calls pass the check.
import asyncio


class RateLimited(Exception):
    pass


class SlidingWindowLimiter:
    def __init__(self, limit):
        self.limit = limit
        self.recent = []

    async def call(self, backend, t):
        if len(self.recent) >= self.limit:  # race
            raise RateLimited(t)
        result = await backend()
        self.recent.append(t)  # race
        return result


async def backend():
    await asyncio.sleep(0)
    return "ok"


async def two_calls():
    limiter = SlidingWindowLimiter(limit=1)
    outcomes = await asyncio.gather(
        limiter.call(backend, 1), limiter.call(backend, 2), return_exceptions=True
    )
    assert len(limiter.recent) <= limiter.limit, f"limit exceeded: {outcomes}"
