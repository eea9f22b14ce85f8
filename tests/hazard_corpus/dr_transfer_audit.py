# expect: dirty-read scenario=audit_during_transfer
# A transfer debits, awaits the ledger, credits; an audit in between sums a total that is short.
import asyncio


class Ledger:
    def __init__(self):
        self.checking = 100
        self.savings = 100

    async def transfer(self, amount):
        await asyncio.sleep(0)  # authorize the transfer
        self.checking -= amount  # race
        await asyncio.sleep(0)  # write the journal entry
        self.savings += amount  # race

    async def audit(self):
        await asyncio.sleep(0)
        total = self.checking + self.savings  # race
        assert total == 200, f"books do not balance: {total}"


async def audit_during_transfer():
    ledger = Ledger()
    await asyncio.gather(ledger.transfer(30), ledger.audit())
