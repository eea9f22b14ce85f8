"""A timeout that cancels a withdrawal half-way: the bookkeeping is left inconsistent.

    chaossloth check examples/timeout_cancel.py --scenario withdraw_with_timeout

``wait_for`` cancels the withdrawal when its timeout fires first (equal deadlines: the tie is a
real scheduling choice); the account is left with money marked pending forever.
"""

import asyncio


class Account:
    def __init__(self):
        self.balance = 100
        self.pending = 0

    async def withdraw(self, amount):
        self.pending += amount
        await asyncio.sleep(0.01)  # the bank's API call
        self.balance -= amount
        self.pending -= amount


async def withdraw_with_timeout():
    account = Account()
    try:
        await asyncio.wait_for(account.withdraw(10), timeout=0.01)
    except TimeoutError:
        pass
    assert account.pending == 0, f"withdrawal cancelled half-way: pending={account.pending}"


if __name__ == "__main__":
    asyncio.run(withdraw_with_timeout())
