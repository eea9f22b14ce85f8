"""A payment API with idempotency keys: a retried request must not charge twice."""

import asyncio


class PaymentService:
    def __init__(self):
        self.responses = {}
        self.charges = []

    async def _charge_card(self, card, amount):
        await asyncio.sleep(0)  # the card network
        self.charges.append((card, amount))
        return f"ch_{len(self.charges)}"

    async def pay(self, idem_key, card, amount):
        if idem_key in self.responses:  # race
            return self.responses[idem_key]
        charge_id = await self._charge_card(card, amount)
        self.responses[idem_key] = charge_id  # race
        return charge_id
