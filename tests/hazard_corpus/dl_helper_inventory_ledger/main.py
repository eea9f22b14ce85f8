# expect: deadlock scenario=reserve_and_reconcile
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
