import asyncio


class Pool:
    def __init__(self):
        self.free = [1]
        self.given = []

    def _take(self):
        item = self.free.pop()
        self.given.append(item)
        return item

    async def acquire(self):
        if not self.free:
            return None
        await asyncio.sleep(0)
        return self._take()


async def scenario():
    p = Pool()
    await asyncio.gather(p.acquire(), p.acquire())
