"""A bank whose transfer checks the balance, awaits the ledger, then moves the money.

    chaossloth check examples/bank_transfer.py --scenario two_transfers
    chaossloth check examples/bank_transfer.py --cls Bank --method transfer \
        --args "('alice', 'bob', 80)" --invariant no_overdraft

Two transfers of 80 from an account holding 100 both pass the balance check before either
debits: the account ends at -60 (check-then-act).
"""

import asyncio


class InsufficientFunds(Exception):
    pass


class Ledger:
    def __init__(self):
        self.entries = []

    async def record(self, src, dst, amount):
        await asyncio.sleep(0)  # a write to the ledger service
        self.entries.append((src, dst, amount))


class Bank:
    def __init__(self, alice=100, bob=0):
        self.balances = {"alice": alice, "bob": bob}
        self.ledger = Ledger()

    async def transfer(self, src, dst, amount):
        if self.balances[src] < amount:
            raise InsufficientFunds(f"{src} has {self.balances[src]}, needs {amount}")
        await self.ledger.record(src, dst, amount)
        self.balances[src] -= amount
        self.balances[dst] += amount
        return self.balances[src]


def no_overdraft(bank: Bank) -> bool:
    return all(v >= 0 for v in bank.balances.values())


async def two_transfers():
    bank = Bank()
    results = await asyncio.gather(
        bank.transfer("alice", "bob", 80),
        bank.transfer("alice", "bob", 80),
        return_exceptions=True,
    )
    assert no_overdraft(bank), f"overdraft: balances={bank.balances} results={results}"


if __name__ == "__main__":
    asyncio.run(two_transfers())
