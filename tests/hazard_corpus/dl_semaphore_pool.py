# expect: deadlock scenario=two_nested_requests
# A pool of two connections; each request holds one and asks for a second one for a nested
# query: two requests hold both and wait forever.
import asyncio


class Pool:
    def __init__(self, size):
        self.slots = asyncio.Semaphore(size)

    async def run(self, query, nested=None):
        async with self.slots:  # race
            await asyncio.sleep(0)  # the query
            if nested is not None:
                await self.run(nested)
            return query


async def two_nested_requests():
    pool = Pool(2)
    await asyncio.gather(pool.run("orders", nested="items"), pool.run("users", nested="roles"))
