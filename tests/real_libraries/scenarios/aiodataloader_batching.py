"""aiodataloader's DataLoader batches the loads of one loop iteration into one call of
batch_load_fn (it schedules the dispatch with call_soon) and caches per key: three concurrent
loads, two keys, one batch."""

import asyncio

from aiodataloader import DataLoader

CASES = [{"requires": ["aiodataloader==0.4.3"], "expect": "complete"}]


async def scenario():
    calls = []

    async def batch(keys):
        calls.append(list(keys))
        await asyncio.sleep(0)
        return [k * 10 for k in keys]

    loader = DataLoader(batch)
    assert await asyncio.gather(loader.load(1), loader.load(2), loader.load(1)) == [10, 20, 10]
    assert sum(len(c) for c in calls) == 2
