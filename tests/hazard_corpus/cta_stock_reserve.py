# expect: check-then-act scenario=reserve_during_recall
# A reservation checks the stock, awaits the warehouse, then decrements; a product recall
# zeroes the stock in between and the reservation drives it negative.
import asyncio


class Warehouse:
    def __init__(self):
        self.stock = {"kettle": 1}

    async def reserve(self, item):
        if self.stock[item] > 0:  # race
            await asyncio.sleep(0)  # the warehouse API
            self.stock[item] -= 1  # race
            return True
        return False

    async def recall(self, item):
        await asyncio.sleep(0)
        self.stock[item] = 0  # race


async def reserve_during_recall():
    wh = Warehouse()
    await asyncio.gather(wh.reserve("kettle"), wh.recall("kettle"))
    assert wh.stock["kettle"] >= 0, wh.stock
