# expect: lost-update scenario=refund_and_purchase
# A wallet (wallet.py) refund reads the balance, awaits the provider, writes it back; a charge
# in between is lost.
import asyncio

from wallet import Wallet


async def purchase(wallet, amount, log):
    await asyncio.sleep(0)
    wallet.charge(amount)
    log["charged"] = log.get("charged", 0) + amount


async def refund_and_purchase():
    wallet = Wallet(50)
    log = {}
    await asyncio.gather(wallet.refund(20), purchase(wallet, 30, log))
    assert wallet.balance == 50 + 20 - log["charged"], f"balance {wallet.balance}"
