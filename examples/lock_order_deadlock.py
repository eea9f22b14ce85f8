"""Two transfers that take the two account locks in opposite orders: a deadlock.

    chaossloth check examples/lock_order_deadlock.py --scenario opposite_transfers

Transfer a->b holds lock a and waits for lock b while transfer b->a holds lock b and waits for
lock a; neither can proceed.
"""

import asyncio


class Accounts:
    def __init__(self):
        self.balance = {"a": 100, "b": 100}
        self.locks = {"a": asyncio.Lock(), "b": asyncio.Lock()}

    async def transfer(self, src, dst, amount):
        async with self.locks[src]:
            await asyncio.sleep(0)  # validate the source account
            async with self.locks[dst]:
                self.balance[src] -= amount
                self.balance[dst] += amount


async def opposite_transfers():
    accounts = Accounts()
    await asyncio.gather(accounts.transfer("a", "b", 10), accounts.transfer("b", "a", 20))
    assert sum(accounts.balance.values()) == 200


if __name__ == "__main__":
    asyncio.run(opposite_transfers())
