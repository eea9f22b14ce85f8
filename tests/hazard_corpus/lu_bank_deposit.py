# expect: lost-update scenario=payday
# Two deposits into one account; each reads the balance, calls the fraud check, writes back.
import asyncio


class Bank:
    def __init__(self):
        self.balances = {"alice": 100}

    async def fraud_check(self, account, amount):
        await asyncio.sleep(0)
        return amount < 10_000

    async def deposit(self, account, amount):
        balance = self.balances[account]  # race
        if not await self.fraud_check(account, amount):
            raise ValueError("rejected")
        self.balances[account] = balance + amount  # race


async def payday():
    bank = Bank()
    await asyncio.gather(bank.deposit("alice", 50), bank.deposit("alice", 25))
    assert bank.balances["alice"] == 175, bank.balances
