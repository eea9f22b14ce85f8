# expect: deadlock scenario=reserve_and_reconcile
# An inventory and a ledger (stores.py), each with its own lock, call into each other: a
# reservation and a reconciliation take the two locks in opposite orders.
import asyncio

from stores import Inventory, Ledger

started = []


async def job(name, coro):
    started.append(name)
    await coro


async def reserve_and_reconcile():
    started.clear()
    ledger = Ledger()
    inventory = Inventory(ledger)
    await asyncio.gather(
        job("reserve", inventory.reserve("bolt")), job("reconcile", ledger.reconcile())
    )
