# expect: lost-update scenario=checkout
# `self.total += await ...`: the old total is read before the await, stored after it.
import asyncio

PRICES = {"book": 12, "pen": 3}


class Cart:
    def __init__(self):
        self.total = 0

    async def price(self, item):
        await asyncio.sleep(0)  # the pricing service
        return PRICES[item]

    async def add(self, item):
        self.total += await self.price(item)  # race


async def checkout():
    cart = Cart()
    await asyncio.gather(cart.add("book"), cart.add("pen"))
    assert cart.total == 15, f"total {cart.total}"
