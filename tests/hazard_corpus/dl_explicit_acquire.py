# expect: deadlock scenario=sync_both_ways
# Explicit acquire()/release() of two resource locks in opposite orders.
import asyncio


class Mirror:
    def __init__(self):
        self.primary = asyncio.Lock()
        self.replica = asyncio.Lock()
        self.rows = []

    async def replicate(self):
        await self.primary.acquire()
        try:
            await asyncio.sleep(0)
            await self.replica.acquire()  # race
            try:
                self.rows.append("p->r")
            finally:
                self.replica.release()
        finally:
            self.primary.release()

    async def promote(self):
        await self.replica.acquire()
        try:
            await asyncio.sleep(0)
            await self.primary.acquire()  # race
            try:
                self.rows.append("r->p")
            finally:
                self.primary.release()
        finally:
            self.replica.release()


async def sync_both_ways():
    m = Mirror()
    await asyncio.gather(m.replicate(), m.promote())
