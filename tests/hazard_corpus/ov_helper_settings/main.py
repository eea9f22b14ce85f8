# expect: order-violation scenario=boot
# Module-level settings (settings.py) loaded by an async loader; the pool opener reads them
# before the loader stored them.
import asyncio

import settings

booted = []


async def open_pool():
    await asyncio.sleep(0)
    size = settings.get("pool_size")
    booted.append("pool")
    return size


async def boot():
    booted.clear()
    settings.SETTINGS = None
    results = await asyncio.gather(settings.load(), open_pool())
    assert results[1] == 4 and booted == ["pool"]
