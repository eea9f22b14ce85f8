# expect: cancellation scenario=cancel_mid_transfer
# A transfer task is cancelled by its owner between the debit and the credit.
import asyncio


class Bank:
    def __init__(self):
        self.accounts = {"a": 100, "b": 0}

    async def transfer(self, src, dst, amount):
        self.accounts[src] -= amount  # race
        await asyncio.sleep(0)  # race
        self.accounts[dst] += amount


async def cancel_mid_transfer():
    bank = Bank()
    task = asyncio.create_task(bank.transfer("a", "b", 40))
    await asyncio.sleep(0)
    task.cancel()  # race
    try:
        await task
    except asyncio.CancelledError:
        pass
    assert sum(bank.accounts.values()) == 100, f"money lost: {bank.accounts}"
