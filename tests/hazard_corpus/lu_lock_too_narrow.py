# expect: lost-update scenario=two_credits
# The lock covers the read and the write separately, not the update: the await between the
# two critical sections lets the other credit in.
import asyncio


class LoyaltyPoints:
    def __init__(self):
        self.lock = asyncio.Lock()
        self.points = 0

    async def credit(self, n):
        async with self.lock:
            current = self.points  # race
        await asyncio.sleep(0)  # compute the bonus tier
        async with self.lock:
            self.points = current + n  # race


async def two_credits():
    account = LoyaltyPoints()
    await asyncio.gather(account.credit(10), account.credit(5))
    assert account.points == 15, f"points {account.points}"
