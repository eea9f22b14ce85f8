# expect: check-then-act scenario=two_consumers
# Consumers test the queue with `if` instead of `while` around Condition.wait(); after a
# notify_all both wake, and the second pops an empty list (IndexError).
import asyncio


class WorkQueue:
    def __init__(self):
        self.cond = asyncio.Condition()
        self.items = []

    async def get(self):
        async with self.cond:
            if not self.items:  # race
                await self.cond.wait()
            return self.items.pop(0)  # race

    async def put(self, item):
        async with self.cond:
            self.items.append(item)
            self.cond.notify_all()


async def two_consumers():
    q = WorkQueue()
    consumers = [asyncio.create_task(q.get()) for _ in range(2)]
    await asyncio.sleep(0)
    await q.put("a")
    await asyncio.sleep(0)  # the producer fetches the next item
    await q.put("b")
    assert sorted(await asyncio.gather(*consumers)) == ["a", "b"]
