"""Per-tenant storage quota accounting; `charge` awaits the object store between read and write."""

import asyncio


class QuotaBook:
    def __init__(self, limit):
        self.limit = limit
        self.used = {}

    async def _put_object(self, tenant, size):
        await asyncio.sleep(0)  # the object store
        return f"{tenant}/{size}"

    async def charge(self, tenant, size):
        used = self.used.get(tenant, 0)  # race
        if used + size > self.limit:
            raise RuntimeError("quota exceeded")
        key = await self._put_object(tenant, size)
        self.used[tenant] = used + size  # race
        return key
