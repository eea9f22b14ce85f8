# expect: cancellation scenario=two_syncs_with_timeout
# A manual "busy" flag around a sync; a timed-out sync leaves it set and the next sync refuses.
import asyncio


class Syncer:
    def __init__(self):
        self.busy = False
        self.synced = 0

    async def sync(self):
        if self.busy:
            raise RuntimeError("sync already running")
        self.busy = True  # race
        await asyncio.sleep(0.01)  # race
        self.synced += 1
        self.busy = False


async def two_syncs_with_timeout():
    syncer = Syncer()
    try:
        await asyncio.wait_for(syncer.sync(), timeout=0.01)  # race
    except TimeoutError:
        pass
    await syncer.sync()
