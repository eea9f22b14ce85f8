"""A retry queue that must schedule each failed job once."""

import asyncio


class RetryQueue:
    def __init__(self):
        self.scheduled = set()
        self.queue = []

    async def _backoff(self, attempt):
        await asyncio.sleep(0)  # compute the delay from the job's history

    async def schedule(self, job_id, attempt):
        if job_id in self.scheduled:  # race
            return False
        await self._backoff(attempt)
        self.scheduled.add(job_id)  # race
        self.queue.append(job_id)
        return True
