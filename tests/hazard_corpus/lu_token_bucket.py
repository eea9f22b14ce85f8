# expect: lost-update scenario=burst
# A token bucket: the refill reads the level, awaits the clock source, writes level + refill;
# a take in between is lost (the bucket hands out a token it no longer has).
import asyncio


class TokenBucket:
    def __init__(self, capacity):
        self.capacity = capacity
        self.tokens = 1

    async def refill(self):
        level = self.tokens  # race
        await asyncio.sleep(0)  # ask the clock how much time passed
        self.tokens = min(self.capacity, level + 1)  # race

    async def take(self):
        await asyncio.sleep(0)
        if self.tokens > 0:
            self.tokens -= 1  # race
            return True
        return False


async def burst():
    bucket = TokenBucket(capacity=5)
    _, granted = await asyncio.gather(bucket.refill(), bucket.take())
    assert bucket.tokens == 2 - int(granted), f"tokens={bucket.tokens}, granted={granted}"
