"""A latency recorder that flushes to a metrics backend now and then."""

import asyncio


class Stats:
    def __init__(self):
        self.count = 0
        self.total_ms = 0

    async def _flush_if_needed(self):
        await asyncio.sleep(0)  # the metrics backend

    async def record(self, ms):
        count = self.count  # race
        await self._flush_if_needed()
        self.count = count + 1  # race
        self.total_ms += ms
