# expect: lost-update scenario=two_handlers
# A latency recorder (stats.py) reads the count, awaits a flush, writes count + 1.
import asyncio

from stats import Stats


async def handler(stats, ms, served):
    await stats.record(ms)
    served.append(ms)


async def two_handlers():
    stats = Stats()
    served = []
    await asyncio.gather(handler(stats, 5, served), handler(stats, 7, served))
    assert stats.count == len(served), f"{len(served)} requests served, stats.count={stats.count}"
