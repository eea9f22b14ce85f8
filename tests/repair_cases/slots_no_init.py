import asyncio


class Base:
    def __init__(self, n):
        self.n = n


class Counter(Base):
    __slots__ = ("x",)

    async def inc(self):
        v = self.n
        await asyncio.sleep(0)
        self.n = v + 1


async def scenario():
    c = Counter(0)
    await asyncio.gather(c.inc(), c.inc())
    assert c.n == 2
