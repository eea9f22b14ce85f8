"""A TTL cache: `get` checks the key, touches the access statistics, then returns the value."""

import asyncio


class TTLCache:
    def __init__(self, ttl):
        self.ttl = ttl
        self.data = {}
        self.hits = 0

    async def _touch(self, key):
        await asyncio.sleep(0)  # access statistics are written to a shared store

    async def get(self, key):
        if key in self.data:  # race
            await self._touch(key)
            self.hits += 1
            return self.data[key]  # race
        return None

    def put(self, key, value):
        self.data[key] = value

    async def invalidate(self, key):
        await asyncio.sleep(0)
        self.data.pop(key, None)  # race
