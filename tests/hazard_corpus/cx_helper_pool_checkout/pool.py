"""A connection pool that counts checked-out connections."""

import asyncio


class Pool:
    def __init__(self, size):
        self.size = size
        self.in_use = 0

    async def checkout(self):
        if self.in_use >= self.size:
            raise RuntimeError("pool exhausted")
        self.in_use += 1  # race
        await asyncio.sleep(0.01)  # race
        return object()

    def checkin(self, conn):
        self.in_use -= 1
