# expect: check-then-act scenario=two_withdrawals
# The balance check passes for both withdrawals; the account goes negative.
import asyncio


class Account:
    def __init__(self, balance):
        self.balance = balance

    async def withdraw(self, amount):
        if self.balance >= amount:  # race
            await asyncio.sleep(0)  # the core-banking call
            self.balance -= amount  # race
            return True
        return False


async def two_withdrawals():
    acct = Account(100)
    results = await asyncio.gather(acct.withdraw(80), acct.withdraw(70))
    assert acct.balance >= 0, f"overdrawn: {acct.balance} after {results}"
