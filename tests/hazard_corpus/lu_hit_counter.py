# expect: lost-update scenario=two_requests
# A page-hit counter read before an await and written back after it.
import asyncio


class HitCounter:
    def __init__(self):
        self.hits = 0

    async def _log(self, path):
        await asyncio.sleep(0)

    async def hit(self, path):
        await asyncio.sleep(0)  # route the request
        current = self.hits  # race
        await self._log(path)
        self.hits = current + 1  # race


async def two_requests():
    counter = HitCounter()
    await asyncio.gather(counter.hit("/"), counter.hit("/about"))
    assert counter.hits == 2, f"expected 2 hits, got {counter.hits}"
