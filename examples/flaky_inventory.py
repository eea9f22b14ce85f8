"""The flaky one: a race that the stock asyncio order never shows.

    chaossloth check examples/flaky_inventory.py --scenario last_item
    chaossloth check examples/flaky_inventory.py --cls Inventory --method buy

Two customers try to buy the last item.  In asyncio's own order the first buyer always finishes
its check-and-decrement before the second one looks, so `asyncio.run(last_item())` passes every
time -- and the test stays green until the day a slower audit log or a faster second request
lets the second buyer check the stock inside the first buyer's window: the item is sold twice.
ChaosSloth finds that schedule (a check-then-act) without waiting for the bad day.
"""

import asyncio


class AuditLog:
    def __init__(self):
        self.lines = []

    async def write(self, line):
        await asyncio.sleep(0)  # the log is written asynchronously
        self.lines.append(line)


class Inventory:
    def __init__(self):
        self.stock = 1
        self.sold = 0
        self.log = AuditLog()

    async def buy(self):
        await asyncio.sleep(0.001)  # parse and authenticate the request
        if self.stock > 0:
            await self.log.write("reserve")  # the window: another buyer may look now
            self.stock -= 1
            self.sold += 1
            return True
        return False


async def last_item():
    inv = Inventory()
    first = asyncio.create_task(inv.buy())
    await asyncio.sleep(0.001)  # the second request arrives a moment later
    second = asyncio.create_task(inv.buy())
    results = await asyncio.gather(first, second)
    assert inv.stock >= 0, f"sold {inv.sold} of 1 item: stock is {inv.stock}"
    assert results.count(True) == 1


if __name__ == "__main__":
    asyncio.run(last_item())
