# expect: deadlock scenario=opposite_transfers
# Two transfers lock source then destination: a->b and b->a wait for each other.
import asyncio


class Accounts:
    def __init__(self):
        self.balance = {"a": 100, "b": 100}
        self.locks = {"a": asyncio.Lock(), "b": asyncio.Lock()}

    async def transfer(self, src, dst, amount):
        async with self.locks[src]:
            await asyncio.sleep(0)  # validate the source account
            async with self.locks[dst]:  # race
                self.balance[src] -= amount
                self.balance[dst] += amount


async def opposite_transfers():
    acc = Accounts()
    await asyncio.gather(acc.transfer("a", "b", 10), acc.transfer("b", "a", 20))
