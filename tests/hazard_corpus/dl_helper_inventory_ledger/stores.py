"""An inventory and a ledger, each guarded by its own lock, that call into each other."""

import asyncio


class Ledger:
    def __init__(self):
        self.lock = asyncio.Lock()
        self.entries = []
        self.inventory = None

    async def record(self, entry):
        async with self.lock:  # race
            self.entries.append(entry)

    async def reconcile(self):
        async with self.lock:
            await asyncio.sleep(0)
            count = await self.inventory.count()
            self.entries.append(("reconciled", count))


class Inventory:
    def __init__(self, ledger):
        self.lock = asyncio.Lock()
        self.items = {"bolt": 3}
        self.ledger = ledger
        ledger.inventory = self

    async def count(self):
        async with self.lock:  # race
            return sum(self.items.values())

    async def reserve(self, item):
        async with self.lock:
            self.items[item] -= 1
            await asyncio.sleep(0)
            await self.ledger.record(("reserve", item))
