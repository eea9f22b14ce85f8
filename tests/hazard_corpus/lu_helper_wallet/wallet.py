"""A wallet whose refund reads the balance, awaits the payment provider, writes it back."""

import asyncio


class Wallet:
    def __init__(self, balance):
        self.balance = balance
        self.history = []

    async def refund(self, amount):
        balance = self.balance  # race
        await asyncio.sleep(0)  # the payment provider confirms the refund
        self.balance = balance + amount  # race
        self.history.append(("refund", amount))

    def charge(self, amount):
        if amount > self.balance:
            raise ValueError("insufficient funds")
        self.balance -= amount  # race
        self.history.append(("charge", amount))
