import asyncio


async def scenario():
    count = 0

    async def bump():
        nonlocal count
        c = count
        await asyncio.sleep(0)
        count = c + 1

    await asyncio.gather(bump(), bump())
    assert count == 2, count
