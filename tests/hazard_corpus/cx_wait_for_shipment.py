# expect: cancellation scenario=ship_with_deadline
# wait_for cancels a shipment after its units were reserved and before they were shipped.
import asyncio


class Warehouse:
    def __init__(self):
        self.on_hand = 10
        self.reserved = 0
        self.shipped = 0

    async def ship(self, n):
        self.reserved += n  # race
        await asyncio.sleep(0.05)  # race
        self.reserved -= n
        self.on_hand -= n
        self.shipped += n


async def ship_with_deadline():
    wh = Warehouse()
    try:
        await asyncio.wait_for(wh.ship(3), timeout=0.05)  # race
    except TimeoutError:
        pass
    assert wh.reserved == 0, f"{wh.reserved} units reserved forever"
