"""tenacity's AsyncRetrying around two services' calls that fail a few times each: both
retry (with virtual-time waits) and succeed."""

import asyncio

from tenacity import AsyncRetrying, stop_after_attempt, wait_fixed

CASES = [{"requires": ["tenacity==9.0.0"], "expect": "complete"}]


class Flaky:
    def __init__(self):
        self.fails = {"a": 2, "b": 1}
        self.done = []

    async def call(self, k):
        await asyncio.sleep(0)
        if self.fails[k] > 0:
            self.fails[k] -= 1
            raise ConnectionError(k)
        self.done.append(k)


async def scenario():
    svc = Flaky()

    async def run(k):
        async for attempt in AsyncRetrying(stop=stop_after_attempt(5), wait=wait_fixed(0.01)):
            with attempt:
                await svc.call(k)

    await asyncio.gather(run("a"), run("b"))
    assert sorted(svc.done) == ["a", "b"]
