# expect: lost-wakeup scenario=produce_and_consume
# A consumer waits on a Condition without checking the predicate first; when the producer
# notifies before the consumer waits, the notification is lost and the consumer waits forever.
import asyncio


class Mailbox:
    def __init__(self):
        self.cond = asyncio.Condition()
        self.items = []

    async def put(self, item):
        await asyncio.sleep(0)  # build the job
        async with self.cond:
            self.items.append(item)
            self.cond.notify()  # race

    async def get(self):
        await asyncio.sleep(0)  # register with the dispatcher
        async with self.cond:
            await self.cond.wait()  # race
            return self.items.pop(0)


async def produce_and_consume():
    box = Mailbox()
    got, _ = await asyncio.gather(box.get(), box.put("job-1"))
    assert got == "job-1"
