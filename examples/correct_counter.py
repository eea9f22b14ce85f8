"""A correct program: the read-await-write interval is enclosed in a lock.

    chaossloth check examples/correct_counter.py --scenario two_increments
    chaossloth check examples/correct_counter.py --cls Counter --method increment --tasks 3

Every schedule passes; the exploration is complete.
"""

import asyncio


class Counter:
    def __init__(self):
        self.value = 0
        self.lock = asyncio.Lock()

    async def increment(self):
        await asyncio.sleep(0)  # the caller's own work comes first
        async with self.lock:
            current = self.value
            await asyncio.sleep(0)
            self.value = current + 1
            return self.value


async def two_increments():
    counter = Counter()
    results = await asyncio.gather(counter.increment(), counter.increment())
    assert counter.value == 2, f"value={counter.value}"
    assert sorted(results) == [1, 2]


if __name__ == "__main__":
    asyncio.run(two_increments())
