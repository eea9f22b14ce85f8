"""A readers-writer lock built on a polled state; acquire_write logs the grant before taking it."""

import asyncio


class RWLock:
    def __init__(self):
        self.readers = 0
        self.writer = False

    async def _log_grant(self):
        await asyncio.sleep(0)

    async def acquire_read(self):
        while self.writer:
            await asyncio.sleep(0)
        self.readers += 1

    def release_read(self):
        self.readers -= 1

    async def acquire_write(self):
        while self.writer or self.readers:  # race
            await asyncio.sleep(0)
        await self._log_grant()
        self.writer = True  # race

    def release_write(self):
        self.writer = False
