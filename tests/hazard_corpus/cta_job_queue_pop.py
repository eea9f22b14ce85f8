# expect: check-then-act scenario=two_workers
# Workers check that a job is queued, log the claim, then pop it: the pop raises IndexError
# when the other worker took the last job in between.
import asyncio


class JobQueue:
    def __init__(self, jobs):
        self.jobs = list(jobs)

    async def log_claim(self, worker):
        await asyncio.sleep(0)

    async def claim(self, worker):
        if self.jobs:  # race
            await self.log_claim(worker)
            return self.jobs.pop()  # race
        return None


async def two_workers():
    queue = JobQueue(["resize-image"])
    done = await asyncio.gather(queue.claim("w1"), queue.claim("w2"))
    assert done.count("resize-image") == 1
