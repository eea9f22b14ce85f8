# expect: lost-wakeup scenario=wait_for_ready
# A component creates its "ready" future only when someone starts waiting; the readiness
# notification that comes first finds no future and is lost.
import asyncio


class Component:
    def __init__(self):
        self._waiter = None

    async def wait_ready(self):
        await asyncio.sleep(0)
        self._waiter = asyncio.get_running_loop().create_future()
        await self._waiter  # race

    async def become_ready(self):
        await asyncio.sleep(0)
        if self._waiter is not None:  # race
            self._waiter.set_result(None)


async def wait_for_ready():
    comp = Component()
    await asyncio.gather(comp.wait_ready(), comp.become_ready())
