# expect: deadlock scenario=pipeline
# The producer holds the stats lock while putting into a bounded queue; the consumer takes the
# same lock before each get: producer waits for room, consumer waits for the lock.
import asyncio


class Pipeline:
    def __init__(self):
        self.lock = asyncio.Lock()
        self.queue = asyncio.Queue(maxsize=1)
        self.produced = 0
        self.consumed = 0

    async def produce(self, items):
        for item in items:
            await asyncio.sleep(0)  # fetch the item
            async with self.lock:
                self.produced += 1
                await self.queue.put(item)  # race

    async def consume(self, n):
        await asyncio.sleep(0)  # open the sink
        out = []
        for _ in range(n):
            async with self.lock:  # race
                self.consumed += 1
            out.append(await self.queue.get())
        return out


async def pipeline():
    p = Pipeline()
    _, out = await asyncio.gather(p.produce([1, 2, 3]), p.consume(3))
    assert out == [1, 2, 3]
