"""A job scheduler that allocates sequential job ids and persists each job."""

import asyncio


class Scheduler:
    def __init__(self):
        self.next_id = 1
        self.jobs = {}

    async def _persist(self, job_id, spec):
        await asyncio.sleep(0)  # the jobs table

    async def submit(self, spec):
        job_id = self.next_id  # race
        await self._persist(job_id, spec)
        self.next_id = job_id + 1  # race
        self.jobs[job_id] = spec
        return job_id
