# expect: lost-wakeup scenario=submit_then_stop
# A worker waits for its wake-up Event, processes, then clears the Event; a stop request that
# sets the Event while the worker is processing is erased by the clear, and the worker never
# wakes up again.
import asyncio


class Worker:
    def __init__(self):
        self.wakeup = asyncio.Event()
        self.stopping = False
        self.processed = 0

    async def run(self):
        while True:
            await self.wakeup.wait()  # race
            if self.stopping:
                return self.processed
            await asyncio.sleep(0)  # process the batch
            self.processed += 1
            self.wakeup.clear()  # race

    def submit(self):
        self.wakeup.set()

    async def stop(self):
        await asyncio.sleep(0)
        self.stopping = True
        self.wakeup.set()


async def submit_then_stop():
    worker = Worker()
    task = asyncio.create_task(worker.run())
    worker.submit()
    await worker.stop()
    assert await task == 1
