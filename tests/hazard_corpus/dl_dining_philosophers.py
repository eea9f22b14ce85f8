# expect: deadlock scenario=three_workers
# Three workers each hold one shard lock and wait for the next shard's lock: a cycle of three.
import asyncio


class Shards:
    def __init__(self, n):
        self.locks = [asyncio.Lock() for _ in range(n)]
        self.moved = 0

    async def rebalance(self, i):
        left, right = self.locks[i], self.locks[(i + 1) % len(self.locks)]
        async with left:
            await asyncio.sleep(0)  # snapshot the shard
            async with right:  # race
                self.moved += 1


async def three_workers():
    shards = Shards(3)
    await asyncio.gather(*(shards.rebalance(i) for i in range(3)))
