# expect: lost-update scenario=restock_during_sale
# A restock reads the quantity, awaits the supplier, writes quantity + delivered; a sale
# in between (a plain decrement) is lost.
import asyncio


class Inventory:
    def __init__(self):
        self.qty = {"widget": 5}

    async def restock(self, item, n):
        before = self.qty[item]  # race
        await asyncio.sleep(0)  # the supplier's confirmation
        self.qty[item] = before + n  # race

    async def sell(self, item):
        await asyncio.sleep(0)
        if self.qty[item] > 0:
            self.qty[item] -= 1  # race
            return True
        return False


async def restock_during_sale():
    inv = Inventory()
    sold = await asyncio.gather(inv.restock("widget", 10), inv.sell("widget"))
    assert inv.qty["widget"] == 15 - sum(sold[1:]), inv.qty
