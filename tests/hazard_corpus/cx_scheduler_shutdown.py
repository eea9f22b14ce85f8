# expect: cancellation scenario=shutdown_while_running
# A job scheduler's shutdown cancels running jobs; a job holding a lease is cancelled before it
# gives the lease back.
import asyncio


class Scheduler:
    def __init__(self):
        self.leases = set()
        self.running = []

    async def job(self, name):
        self.leases.add(name)  # race
        await asyncio.sleep(0)  # race
        self.leases.discard(name)

    def submit(self, name):
        self.running.append(asyncio.create_task(self.job(name)))

    async def shutdown(self):
        await asyncio.sleep(0)
        for t in self.running:
            t.cancel()  # race
        await asyncio.gather(*self.running, return_exceptions=True)


async def shutdown_while_running():
    sched = Scheduler()
    sched.submit("backup")
    await sched.shutdown()
    assert not sched.leases, f"leases never returned: {sched.leases}"
