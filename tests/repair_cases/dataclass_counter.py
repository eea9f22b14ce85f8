import asyncio
from dataclasses import dataclass, field


@dataclass
class Stats:
    hits: int = 0
    seen: list = field(default_factory=list)

    async def hit(self):
        h = self.hits
        await asyncio.sleep(0)
        self.hits = h + 1


async def scenario():
    s = Stats()
    await asyncio.gather(s.hit(), s.hit())
    assert s.hits == 2
