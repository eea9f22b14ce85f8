import asyncio

total = 0


async def add(k):
    global total
    t = total
    await asyncio.sleep(0)
    total = t + k


async def scenario():
    global total
    total = 0
    await asyncio.gather(add(1), add(2))
    assert total == 3, total
