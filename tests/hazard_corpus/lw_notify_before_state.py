# expect: lost-wakeup scenario=wait_for_migration
# The migrator notifies waiters before it records that the migration finished; a waiter that
# re-checks its predicate at the notification still sees "not done" and is never notified again.
import asyncio


class Migrator:
    def __init__(self):
        self.cond = asyncio.Condition()
        self.done = False

    async def migrate(self):
        await asyncio.sleep(0)  # run the migration
        async with self.cond:
            self.cond.notify_all()  # race
        await asyncio.sleep(0)  # write the migration record
        self.done = True

    async def wait_done(self):
        async with self.cond:
            await self.cond.wait_for(lambda: self.done)  # race
        return "migrated"


async def wait_for_migration():
    m = Migrator()
    status, _ = await asyncio.gather(m.wait_done(), m.migrate())
    assert status == "migrated"
